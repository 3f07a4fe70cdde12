/* Project-written test program for the release path: many values live across a loop,
   so the register allocator has to evict and spill. */
#include <stdint.h>

static uint32_t rotl(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

uint32_t digest(const uint32_t *w, int n) {
  uint32_t h0 = 0x67452301, h1 = 0xefcdab89, h2 = 0x98badcfe, h3 = 0x10325476;
  uint32_t h4 = 0xc3d2e1f0, h5 = 0x76543210, h6 = 0xfedcba98, h7 = 0x0f1e2d3c;
  uint32_t g0 = 1, g1 = 3, g2 = 5, g3 = 7, g4 = 11, g5 = 13, g6 = 17, g7 = 19;
  for (int i = 0; i < n; ++i) {
    uint32_t x = w[i];
    h0 = rotl(h0 + x, 3) ^ g7;  h1 = rotl(h1 ^ h0, 5) + g6;
    h2 = rotl(h2 + h1, 7) ^ g5; h3 = rotl(h3 ^ h2, 11) + g4;
    h4 = rotl(h4 + h3, 13) ^ g3; h5 = rotl(h5 ^ h4, 17) + g2;
    h6 = rotl(h6 + h5, 19) ^ g1; h7 = rotl(h7 ^ h6, 23) + g0;
    g0 += h7 * 3; g1 ^= h6 + g0; g2 += h5 ^ g1; g3 ^= h4 * 5 + g2;
    g4 += h3 ^ g3; g5 ^= h2 * 7 + g4; g6 += h1 ^ g5; g7 ^= h0 * 9 + g6;
    if (x & 3) h0 ^= g0 + g7;
  }
  return h0 ^ h1 ^ h2 ^ h3 ^ h4 ^ h5 ^ h6 ^ h7 ^ g0 ^ g1 ^ g2 ^ g3 ^ g4 ^ g5 ^ g6 ^ g7;
}

double smooth(const double *p, int n, double *out) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  double b0 = 1, b1 = 1, b2 = 1, b3 = 1, b4 = 1, b5 = 1, b6 = 1, b7 = 1;
  double c0 = .5, c1 = .25, c2 = .125, c3 = .0625, c4 = .5, c5 = .25, c6 = .125, c7 = .0625;
  for (int i = 0; i + 8 <= n; i += 8) {
    a0 += p[i] * b7 + c0; a1 += p[i + 1] * b6 + c1; a2 += p[i + 2] * b5 + c2;
    a3 += p[i + 3] * b4 + c3; a4 += p[i + 4] * b3 + c4; a5 += p[i + 5] * b2 + c5;
    a6 += p[i + 6] * b1 + c6; a7 += p[i + 7] * b0 + c7;
    b0 = a0 * c7 + b1; b1 = a1 * c6 + b2; b2 = a2 * c5 + b3; b3 = a3 * c4 + b4;
    b4 = a4 * c3 + b5; b5 = a5 * c2 + b6; b6 = a6 * c1 + b7; b7 = a7 * c0 + b0;
    c0 = b0 - c1; c1 = b1 - c2; c2 = b2 - c3; c3 = b3 - c4;
    c4 = b4 - c5; c5 = b5 - c6; c6 = b6 - c7; c7 = b7 - c0;
    out[i & 7] = a0 + b0 + c0;
  }
  return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + b0 * b1 * b2 * b3 + c4 + c5 + c6 + c7;
}
