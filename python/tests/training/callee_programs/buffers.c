#include <stdlib.h>
#include <string.h>
typedef struct buf { char *data; unsigned len, cap; int err; } buf;
extern void *(*alloc_hook)(size_t);
extern void (*free_hook)(void *);

static buf *buf_new(void) {
  buf *b = (buf *)alloc_hook(sizeof(buf));
  if (b) memset(b, 0, sizeof(buf));
  return b;
}
static int buf_fail(buf *b, int code) { b->err = code; free_hook(b->data); b->data = 0; return -code; }
static unsigned rd32(const unsigned char *p) { return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3]; }
static int grow(buf *b, unsigned n) {
  if (b->len + n <= b->cap) return 0;
  char *d = (char *)alloc_hook(b->cap * 2 + n);
  if (!d) return buf_fail(b, 12);
  memcpy(d, b->data, b->len); free_hook(b->data); b->data = d; b->cap = b->cap * 2 + n; return 0;
}

buf *make_a(void) { return buf_new(); }
buf *make_b(unsigned n) { buf *b = buf_new(); if (b && grow(b, n)) return 0; return b; }
buf *make_c(const char *s) { buf *b = buf_new(); unsigned n = strlen(s); if (!b || grow(b, n)) return 0; memcpy(b->data, s, n); b->len = n; return b; }
buf *make_d(buf *o) { buf *b = buf_new(); if (!b || grow(b, o->len)) return 0; memcpy(b->data, o->data, o->len); b->len = o->len; return b; }
buf *make_e(void) { buf *b = buf_new(); if (b) b->err = 1; return b; }
buf *make_f(void) { buf *b = buf_new(); if (b) b->cap = 1; return b; }
int put(buf *b, char c) { if (grow(b, 1)) return buf_fail(b, 1); b->data[b->len++] = c; return 0; }
int put2(buf *b, const char *s) { if (grow(b, 2)) return buf_fail(b, 2); memcpy(b->data + b->len, s, 2); b->len += 2; return 0; }
int put4(buf *b, const char *s) { if (grow(b, 4)) return buf_fail(b, 3); memcpy(b->data + b->len, s, 4); b->len += 4; return 0; }
int check(buf *b) { if (b->len > 1000) return buf_fail(b, 4); return 0; }
unsigned sum(const unsigned char *p) {
  unsigned w0 = rd32(p), w1 = rd32(p + 4), w2 = rd32(p + 8), w3 = rd32(p + 12);
  unsigned w4 = rd32(p + 16), w5 = rd32(p + 20), w6 = rd32(p + 24), w7 = rd32(p + 28);
  return (w0 ^ w1) + (w2 ^ w3) * 3 + (w4 ^ w5) * 5 + (w6 ^ w7) * 7;
}
