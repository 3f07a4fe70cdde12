/* Small project-written program with many call sites, so the inliner has decisions. */
#include <stddef.h>

struct vec { int *data; size_t len, cap; };

static int clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }
static int square(int x) { return x * x; }
static int mix(int a, int b) { return (a * 31) ^ (b >> 3); }

static int sum_range(const struct vec *v, size_t from, size_t to) {
  int s = 0;
  for (size_t i = from; i < to && i < v->len; ++i) s += v->data[i];
  return s;
}

int vec_push(struct vec *v, int x) {
  if (v->len == v->cap) return -1;
  v->data[v->len++] = clamp(x, -1000, 1000);
  return 0;
}

static int checksum(const struct vec *v) {
  int h = 17;
  for (size_t i = 0; i < v->len; ++i) h = mix(h, v->data[i]);
  return h;
}

int energy(const struct vec *v) {
  int e = 0;
  for (size_t i = 0; i < v->len; ++i) e += square(v->data[i]);
  return e + checksum(v);
}

int window_max(const struct vec *v, size_t w) {
  int best = sum_range(v, 0, w);
  for (size_t i = 1; i + w <= v->len; ++i) {
    int s = sum_range(v, i, i + w);
    if (s > best) best = s;
  }
  return clamp(best, 0, 1 << 20);
}

static void fill(struct vec *v, int seed) {
  for (size_t i = 0; i < v->cap; ++i) {
    seed = mix(seed, (int)i);
    vec_push(v, seed % 97);
  }
}

int run(int seed) {
  int buf[64];
  struct vec v = {buf, 0, 64};
  fill(&v, seed);
  return energy(&v) + window_max(&v, 8) + checksum(&v);
}
