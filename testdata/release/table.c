/* Project-written test program for the release path: an open-addressing hash table. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *key; long value; } slot;
typedef struct { slot *slots; size_t cap, used; } table;

static uint64_t mix(uint64_t h) {
  h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 33;
  return h;
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  while (*s) { h ^= (unsigned char)*s++; h *= 1099511628211ULL; }
  return mix(h);
}

static size_t probe(const table *t, const char *key) {
  size_t i = hash_str(key) & (t->cap - 1);
  while (t->slots[i].key && strcmp(t->slots[i].key, key) != 0) i = (i + 1) & (t->cap - 1);
  return i;
}

static int needs_grow(const table *t) { return (t->used + 1) * 4 > t->cap * 3; }

static int rehash(table *t) {
  size_t old_cap = t->cap;
  slot *old = t->slots;
  t->cap = old_cap ? old_cap * 2 : 8;
  t->slots = calloc(t->cap, sizeof(slot));
  if (!t->slots) { t->slots = old; t->cap = old_cap; return -1; }
  for (size_t i = 0; i < old_cap; ++i)
    if (old[i].key) t->slots[probe(t, old[i].key)] = old[i];
  free(old);
  return 0;
}

int table_put(table *t, const char *key, long value) {
  if ((!t->cap || needs_grow(t)) && rehash(t)) return -1;
  size_t i = probe(t, key);
  if (!t->slots[i].key) { t->slots[i].key = key; ++t->used; }
  t->slots[i].value = value;
  return 0;
}

long table_get(const table *t, const char *key, long dflt) {
  if (!t->cap) return dflt;
  size_t i = probe(t, key);
  return t->slots[i].key ? t->slots[i].value : dflt;
}

static long clamp_add(long a, long b) {
  long r = a + b;
  return r < a ? a : r;
}

long table_sum(const table *t) {
  long s = 0;
  for (size_t i = 0; i < t->cap; ++i)
    if (t->slots[i].key) s = clamp_add(s, t->slots[i].value);
  return s;
}

long table_count_prefix(const table *t, const char *prefix) {
  size_t n = strlen(prefix);
  long c = 0;
  for (size_t i = 0; i < t->cap; ++i)
    if (t->slots[i].key && strncmp(t->slots[i].key, prefix, n) == 0) c = clamp_add(c, 1);
  return c;
}
