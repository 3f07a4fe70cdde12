/* Small project-written C unit: helpers the inliner can fold into callers. */
#include <stddef.h>
#include <stdint.h>
#include "util.h"

static uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static uint32_t mix(uint32_t h, uint32_t k) {
  k *= 0xcc9e2d51u;
  k = rotl(k, 15);
  k *= 0x1b873593u;
  h ^= k;
  return rotl(h, 13) * 5 + 0xe6546b64u;
}

uint32_t checksum(const uint8_t *data, size_t n, uint32_t seed) {
  uint32_t h = seed;
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    h = mix(h, (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 |
                   (uint32_t)data[i + 2] << 16 | (uint32_t)data[i + 3] << 24);
  for (; i < n; i++) h = mix(h, data[i]);
  return util_clamp(h ^ (uint32_t)n, 0, 0xfffffff0u);
}

uint32_t checksum_str(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  return checksum((const uint8_t *)s, n, 17);
}
