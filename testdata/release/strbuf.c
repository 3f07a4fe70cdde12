/* Project-written test program for the release path: a growable string buffer with
   many small helpers, so the inliner sees many call sites of different sizes. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *data; size_t len, cap; } strbuf;

static size_t grow_to(size_t cap, size_t need) {
  while (cap < need) cap = cap ? cap * 2 : 16;
  return cap;
}

static int reserve(strbuf *b, size_t extra) {
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return 0;
  size_t cap = grow_to(b->cap, need);
  char *p = realloc(b->data, cap);
  if (!p) return -1;
  b->data = p;
  b->cap = cap;
  return 0;
}

static int append_n(strbuf *b, const char *s, size_t n) {
  if (reserve(b, n)) return -1;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
  return 0;
}

static int append(strbuf *b, const char *s) { return append_n(b, s, strlen(s)); }
static int append_char(strbuf *b, char c) { return append_n(b, &c, 1); }

static char hex_digit(unsigned v) { return "0123456789abcdef"[v & 15]; }

static int append_hex(strbuf *b, unsigned long v) {
  char tmp[2 * sizeof v];
  int n = 0;
  do { tmp[n++] = hex_digit(v); v >>= 4; } while (v);
  while (n) if (append_char(b, tmp[--n])) return -1;
  return 0;
}

static int append_dec(strbuf *b, long v) {
  char tmp[24];
  int n = 0, neg = v < 0;
  unsigned long u = neg ? -(unsigned long)v : (unsigned long)v;
  do { tmp[n++] = (char)('0' + u % 10); u /= 10; } while (u);
  if (neg && append_char(b, '-')) return -1;
  while (n) if (append_char(b, tmp[--n])) return -1;
  return 0;
}

static int is_special(char c) { return c == '"' || c == '\\' || c < 0x20; }

int append_quoted(strbuf *b, const char *s) {
  if (append_char(b, '"')) return -1;
  for (; *s; ++s) {
    if (!is_special(*s)) { if (append_char(b, *s)) return -1; continue; }
    if (append(b, "\\x") || append_hex(b, (unsigned char)*s)) return -1;
  }
  return append_char(b, '"');
}

int format_pair(strbuf *b, const char *key, long value) {
  return append_quoted(b, key) || append(b, ": ") || append_dec(b, value);
}

void strbuf_free(strbuf *b) { free(b->data); b->data = NULL; b->len = b->cap = 0; }
