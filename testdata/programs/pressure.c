/* Project-written kernel with many simultaneously live values, to make the register
   allocator evict and spill. */
#include <stdint.h>

uint64_t churn(const uint64_t *in, int n, uint64_t *out) {
  uint64_t a0 = 1, a1 = 2, a2 = 3, a3 = 5, a4 = 7, a5 = 11, a6 = 13, a7 = 17;
  uint64_t b0 = 19, b1 = 23, b2 = 29, b3 = 31, b4 = 37, b5 = 41, b6 = 43, b7 = 47;
  for (int i = 0; i < n; ++i) {
    uint64_t x = in[i];
    a0 += x ^ b7; a1 ^= a0 * 3 + b6; a2 += a1 >> 3 ^ b5; a3 ^= a2 * 7 + b4;
    a4 += a3 >> 5 ^ b3; a5 ^= a4 * 11 + b2; a6 += a5 >> 7 ^ b1; a7 ^= a6 * 13 + b0;
    b0 += a7 ^ x; b1 ^= b0 * 17 + a6; b2 += b1 >> 2 ^ a5; b3 ^= b2 * 19 + a4;
    b4 += b3 >> 4 ^ a3; b5 ^= b4 * 23 + a2; b6 += b5 >> 6 ^ a1; b7 ^= b6 * 29 + a0;
    if (x & 1) out[i & 7] += a0 + b0;
  }
  return a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7 ^ b0 ^ b1 ^ b2 ^ b3 ^ b4 ^ b5 ^ b6 ^ b7;
}

double blend(const double *p, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  double t0 = 1, t1 = 1, t2 = 1, t3 = 1, t4 = 1, t5 = 1, t6 = 1, t7 = 1;
  for (int i = 0; i + 8 <= n; i += 8) {
    s0 += p[i] * t7; s1 += p[i + 1] * t6; s2 += p[i + 2] * t5; s3 += p[i + 3] * t4;
    s4 += p[i + 4] * t3; s5 += p[i + 5] * t2; s6 += p[i + 6] * t1; s7 += p[i + 7] * t0;
    t0 = s0 * 0.5 + t1; t1 = s1 * 0.25 + t2; t2 = s2 * 0.125 + t3; t3 = s3 * 0.5 + t4;
    t4 = s4 * 0.25 + t5; t5 = s5 * 0.125 + t6; t6 = s6 * 0.5 + t7; t7 = s7 * 0.25 + t0;
  }
  return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + t0 * t1 * t2 * t3 * t4 * t5 * t6 * t7;
}

extern void sink(uint64_t, uint64_t, uint64_t, uint64_t);

uint64_t across_calls(uint64_t a, uint64_t b, uint64_t c, uint64_t d, int n) {
  uint64_t e = a * b, f = b * c, g = c * d, h = d * a, k = a ^ c, m = b ^ d;
  for (int i = 0; i < n; ++i) {
    sink(e, f, g, h);
    e += k; f ^= m; g += e >> 1; h ^= f << 1; k += g; m ^= h;
  }
  return e + f + g + h + k + m;
}
