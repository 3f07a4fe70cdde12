/* Register pressure: many live 64-bit accumulators across a loop with a branch. */
#include <stdint.h>
uint64_t mixer(uint64_t *a, int n, uint64_t s) {
  uint64_t x0 = s, x1 = s * 3, x2 = s ^ 7, x3 = s + 11, x4 = s * 13, x5 = s >> 3;
  uint64_t x6 = s << 5, x7 = ~s, x8 = s * s, x9 = s + 1, x10 = s - 1, x11 = s * 7;
  uint64_t x12 = s ^ 0xff, x13 = s + 99, x14 = s * 31;
  for (int i = 0; i < n; i++) {
    uint64_t v = a[i];
    x0 += v * x1; x1 ^= v + x2; x2 += x3 * v; x3 ^= x4 + v; x4 += x5 ^ v;
    x5 += x6 * v; x6 ^= x7 + v; x7 += x8 * v; x8 ^= x9 + v; x9 += x10 * v;
    x10 ^= x11 + v; x11 += x12 * v; x12 ^= x13 + v; x13 += x14 * v; x14 ^= x0 + v;
    if (v & 1) a[i] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
    else a[i] = x8 ^ x9 ^ x10 ^ x11 ^ x12 ^ x13 ^ x14;
  }
  return x0 ^ x1 ^ x2 ^ x3 ^ x4 ^ x5 ^ x6 ^ x7 ^ x8 ^ x9 ^ x10 ^ x11 ^ x12 ^ x13 ^ x14;
}
