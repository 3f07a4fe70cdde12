/* Project-written workload for libtommath: modular exponentiation, primality tests,
   multiplication, division and gcd of pseudo-random big numbers from a seed. Prints a
   checksum of every result, so two builds can be compared by their output.
   usage: bigdemo SEED BITS ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include "tommath.h"

static uint64_t state;
static uint64_t next(void) {
  state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state;
}
static void fill(mp_int *a, int bits) {
  unsigned char buf[1024];
  int n = bits / 8;
  for (int i = 0; i < n; i++) buf[i] = (unsigned char)next();
  buf[0] |= 0x80;
  mp_from_ubin(a, buf, (size_t)n);
}
static uint64_t digest(const mp_int *a, uint64_t h) {
  unsigned char buf[2048];
  size_t n = 0;
  mp_to_ubin(a, buf, sizeof buf, &n);
  for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
  return h;
}
int main(int argc, char **argv) {
  state = argc > 1 ? strtoull(argv[1], 0, 10) * 2654435761u + 1 : 1;
  int bits = argc > 2 ? atoi(argv[2]) : 512;
  int rounds = argc > 3 ? atoi(argv[3]) : 8;
  mp_int a, b, m, r, q;
  mp_init_multi(&a, &b, &m, &r, &q, NULL);
  uint64_t h = 1469598103934665603ull;
  int primes = 0;
  for (int i = 0; i < rounds; i++) {
    fill(&a, bits); fill(&b, bits); fill(&m, bits);
    mp_set_u32(&r, 1); mp_mul_2d(&r, 0, &r);
    if (mp_iseven(&m)) mp_add_d(&m, 1, &m);
    mp_exptmod(&a, &b, &m, &r); h = digest(&r, h);
    mp_mul(&a, &b, &r); h = digest(&r, h);
    mp_sqr(&r, &r); h = digest(&r, h);
    mp_div(&r, &m, &q, &r); h = digest(&q, h); h = digest(&r, h);
    mp_gcd(&a, &b, &r); h = digest(&r, h);
    mp_bool p = MP_NO;
    mp_prime_is_prime(&m, 8, &p);
    primes += p == MP_YES;
    mp_prime_next_prime(&m, 8, 0); h = digest(&m, h);
  }
  printf("%d %016llx\n", primes, (unsigned long long)h);
  mp_clear_multi(&a, &b, &m, &r, &q, NULL);
  return 0;
}
