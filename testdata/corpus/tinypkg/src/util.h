#ifndef TINYPKG_UTIL_H
#define TINYPKG_UTIL_H
#include <stdint.h>
static inline uint32_t util_clamp(uint32_t v, uint32_t lo, uint32_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}
#endif
