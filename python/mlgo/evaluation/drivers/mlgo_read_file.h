/* mlgo runtime_check drivers: shared helpers. The whole file in memory (exits 2 when
   it cannot be read), and the FNV-1a hash the drivers print as checksums. */
#ifndef MLGO_READ_FILE_H
#define MLGO_READ_FILE_H
#include <stdio.h>
#include <stdlib.h>

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(2); }
  buf[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static unsigned long long fnv1a(const char *s, size_t n) {
  unsigned long long h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
  return h;
}
#endif
