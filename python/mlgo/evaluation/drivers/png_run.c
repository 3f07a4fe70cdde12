/* mlgo runtime_check driver for libpng: draws a set of deterministic test images in
   memory (8-bit RGB with an odd width, RGBA, 16-bit gray, 16-bit RGBA, gray+alpha,
   1/2/4-bit gray and 4/8-bit palettes with transparency), each a mix of gradients,
   rings, flat tiles, an XOR texture and bands of noise from a fixed-seed LCG. Every
   image is encoded to PNG in memory (png_set_write_fn into a growing buffer) with each
   filter choice, with and without Adam7 interlacing, at several zlib levels and
   strategies, with text, time, gamma and pHYs chunks. Each encoding is read back with
   the sequential reader and compared pixel for pixel; some also with the progressive
   reader fed in uneven pieces, and with expansion to RGBA8 (checked against our own
   conversion) or with gray/gamma/16-bit transforms (hashed). The simplified API writes
   and reads some images again (exact RGBA, composited BGR, linear 16-bit, colormapped).
   A corrupted file must fail with a CRC error. Prints sizes and FNV-1a hashes.
   Usage: png_run SIZE ROUNDS */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "png.h"

#define FNV_START 1469598103934665603ULL
static unsigned long long fnv1a(const void *p, size_t n, unsigned long long h) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ULL; }
  return h;
}

static unsigned int rng_state;
static unsigned int rnd(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return rng_state >> 8;
}

static int warnings;
static void on_error(png_structp p, png_const_charp msg) {
  /* Expected only for the corrupted file; the caller's setjmp catches it. */
  char *last = png_get_error_ptr(p);
  if (last) snprintf(last, 200, "%s", msg);
  png_longjmp(p, 1);
}
static void on_warning(png_structp p, png_const_charp msg) {
  (void)p;
  warnings++;
  fprintf(stderr, "png_run: warning: %s\n", msg);
}

static void *xmalloc(size_t n) {
  void *q = calloc(1, n ? n : 1);
  if (!q) { fprintf(stderr, "png_run: out of memory\n"); exit(1); }
  return q;
}

/* ---- memory streams ---- */
typedef struct { unsigned char *data; size_t len, cap; } Buf;
typedef struct { const unsigned char *data; size_t len, pos; } Src;

static void buf_write(png_structp p, png_bytep data, size_t n) {
  Buf *b = png_get_io_ptr(p);
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 8192;
    while (cap < b->len + n) cap *= 2;
    unsigned char *d = realloc(b->data, cap);
    if (!d) png_error(p, "sink: out of memory");
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, data, n);
  b->len += n;
}
static void buf_flush(png_structp p) { (void)p; }

static void src_read(png_structp p, png_bytep out, size_t n) {
  Src *s = png_get_io_ptr(p);
  if (n > s->len - s->pos) png_error(p, "source: read past the end");
  memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

/* ---- images ---- */
typedef struct {
  const char *name;
  int w, h, ct, bd, ch;
  size_t rb;
  unsigned char *px;
  png_color pal[256];
  int npal;
  png_byte trns[256];
  int ntrns;
} Img;

static int channels_of(int ct) {
  switch (ct) {
    case PNG_COLOR_TYPE_GRAY: case PNG_COLOR_TYPE_PALETTE: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    default: return 4;
  }
}

static void put(Img *im, int x, int y, int c, unsigned v) {
  unsigned char *row = im->px + (size_t)y * im->rb;
  size_t s = (size_t)x * im->ch + c;
  if (im->bd == 16) { row[2 * s] = (unsigned char)(v >> 8); row[2 * s + 1] = (unsigned char)v; }
  else if (im->bd == 8) row[s] = (unsigned char)v;
  else {
    size_t bit = s * im->bd;
    int shift = 8 - im->bd - (int)(bit & 7);
    unsigned mask = ((1u << im->bd) - 1) << shift;
    row[bit >> 3] = (unsigned char)((row[bit >> 3] & ~mask) | ((v << shift) & mask));
  }
}

static unsigned get(const Img *im, int x, int y, int c) {
  const unsigned char *row = im->px + (size_t)y * im->rb;
  size_t s = (size_t)x * im->ch + c;
  if (im->bd == 16) return (unsigned)row[2 * s] << 8 | row[2 * s + 1];
  if (im->bd == 8) return row[s];
  size_t bit = s * im->bd;
  int shift = 8 - im->bd - (int)(bit & 7);
  return (row[bit >> 3] >> shift) & ((1u << im->bd) - 1);
}

/* One 16-bit sample of the scene: channel c at (x, y) of a W x H canvas. */
static unsigned scene(int x, int y, int c, int W, int H, int seed) {
  unsigned v;
  switch (c & 3) {
    case 0: v = (unsigned)(x * 65535 / (W - 1)); break;
    case 1: v = (unsigned)(y * 65535 / (H - 1)); break;
    case 2: v = (unsigned)(((x ^ (y + seed)) & 63) * 1040); break;
    default: v = 65535u - (unsigned)((x + y) * 65535 / (W + H - 2)); break;
  }
  int dx = x - W / 3 - seed % 7, dy = y - H / 2, d2 = dx * dx + dy * dy;
  if ((d2 / (2 * W + 7)) % 3 == 0) v = 65535u - v;
  if (x > W / 2 && y < H / 3) v = (((x >> 4) + (y >> 4) + c) & 1) ? 0xc350u : 0x2710u;
  if ((y + 3 * seed) % 53 < 6 && c != 3) v ^= rnd() & 0xffffu;
  return v & 0xffffu;
}

static Img *make_image(const char *name, int w, int h, int ct, int bd, int seed) {
  Img *im = xmalloc(sizeof *im);
  im->name = name; im->w = w; im->h = h; im->ct = ct; im->bd = bd;
  im->ch = channels_of(ct);
  im->rb = ((size_t)w * im->ch * bd + 7) / 8;
  im->px = xmalloc(im->rb * (size_t)h);
  if (ct == PNG_COLOR_TYPE_PALETTE) {
    im->npal = 1 << bd;
    for (int i = 0; i < im->npal; i++) {
      im->pal[i].red = (png_byte)(i * 255 / (im->npal - 1));
      im->pal[i].green = (png_byte)((i * 97 + seed * 13) & 255);
      im->pal[i].blue = (png_byte)(255 - (i * 31 & 255));
    }
    im->ntrns = im->npal / 4;
    for (int i = 0; i < im->ntrns; i++) im->trns[i] = (png_byte)(i * 255 / im->ntrns);
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        unsigned a = scene(x, y, 0, w, h, seed) >> 8, b = scene(x, y, 2, w, h, seed) >> 8;
        put(im, x, y, 0, ((a + b) >> (9 - bd)) & (im->npal - 1));
      }
    return im;
  }
  int gray = (ct & PNG_COLOR_MASK_COLOR) == 0, alpha = (ct & PNG_COLOR_MASK_ALPHA) != 0;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < im->ch; c++) {
        int sc = (alpha && c == im->ch - 1) ? 3 : gray ? (y / 32 % 3) : c;
        unsigned v = scene(x, y, sc, w, h, seed);
        put(im, x, y, c, v >> (16 - bd));
      }
  return im;
}

static void free_image(Img *im) { free(im->px); free(im); }

/* ---- encoding ---- */
typedef struct { int filters, interlace, level, strategy; } Config;

static const char *filter_name(int f) {
  switch (f) {
    case PNG_FILTER_NONE: return "none";
    case PNG_FILTER_SUB: return "sub";
    case PNG_FILTER_UP: return "up";
    case PNG_FILTER_AVG: return "avg";
    case PNG_FILTER_PAETH: return "paeth";
    case PNG_ALL_FILTERS: return "all";
    default: return "mix";
  }
}

static const char *TEXT_BODY =
    "A generated test image for the runtime benchmark. The zTXt copy of this text is "
    "compressed by the writer and inflated again by the reader; the tEXt copy is not.";

static void encode(const Img *im, const Config *cf, Buf *out) {
  char err[200] = "";
  out->len = 0;
  png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, err, on_error, on_warning);
  png_infop info = png_create_info_struct(p);
  png_bytep *rows = xmalloc(sizeof(png_bytep) * (size_t)im->h);
  if (setjmp(png_jmpbuf(p))) {
    fprintf(stderr, "png_run: write of %s failed: %s\n", im->name, err);
    exit(1);
  }
  png_set_write_fn(p, out, buf_write, buf_flush);
  png_set_IHDR(p, info, (png_uint_32)im->w, (png_uint_32)im->h, im->bd, im->ct,
               cf->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (im->ct == PNG_COLOR_TYPE_PALETTE) {
    png_set_PLTE(p, info, im->pal, im->npal);
    png_set_tRNS(p, info, im->trns, im->ntrns, NULL);
  }
  png_set_gAMA_fixed(p, info, 45455);
  png_set_pHYs(p, info, 2835, 2835, PNG_RESOLUTION_METER);
  png_time t = {2024, 5, 17, 12, 30, 45};
  png_set_tIME(p, info, &t);
  png_text text[3];
  memset(text, 0, sizeof text);
  text[0].compression = PNG_TEXT_COMPRESSION_NONE;
  text[0].key = "Title"; text[0].text = (char *)im->name;
  text[1].compression = PNG_TEXT_COMPRESSION_zTXt;
  text[1].key = "Comment"; text[1].text = (char *)TEXT_BODY;
  text[2].compression = PNG_TEXT_COMPRESSION_NONE;
  text[2].key = "Description"; text[2].text = (char *)TEXT_BODY;
  png_set_text(p, info, text, 3);
  png_set_filter(p, PNG_FILTER_TYPE_BASE, cf->filters);
  png_set_compression_level(p, cf->level);
  png_set_compression_strategy(p, cf->strategy);
  png_set_compression_buffer_size(p, 4096 + (size_t)cf->level * 1024);
  for (int y = 0; y < im->h; y++) rows[y] = im->px + (size_t)y * im->rb;
  png_write_info(p, info);
  png_write_image(p, rows);
  png_write_end(p, info);
  png_destroy_write_struct(&p, &info);
  free(rows);
}

/* ---- sequential reading ---- */
enum { PLAIN, TO_RGBA8, MIXED };

typedef struct { unsigned char *px; size_t rb; int w, h, ch, bd, texts; } Decoded;

static void decode(const unsigned char *data, size_t len, int mode, const Img *im,
                   Decoded *d) {
  char err[200] = "";
  Src s = {data, len, 0};
  png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, err, on_error, on_warning);
  png_infop info = png_create_info_struct(p);
  png_bytep *rows = NULL;
  if (setjmp(png_jmpbuf(p))) {
    fprintf(stderr, "png_run: read of %s failed: %s\n", im->name, err);
    exit(1);
  }
  png_set_read_fn(p, &s, src_read);
  png_read_info(p, info);
  png_uint_32 w, h;
  int bd, ct, il;
  png_get_IHDR(p, info, &w, &h, &bd, &ct, &il, NULL, NULL);
  if ((int)w != im->w || (int)h != im->h || bd != im->bd || ct != im->ct) {
    fprintf(stderr, "png_run: %s: header mismatch\n", im->name);
    exit(1);
  }
  if (mode == TO_RGBA8) {
    png_set_expand(p);
    png_set_strip_16(p);
    png_set_gray_to_rgb(p);
    if (!(ct & PNG_COLOR_MASK_ALPHA) && !(ct == PNG_COLOR_TYPE_PALETTE && im->ntrns))
      png_set_add_alpha(p, 0xff, PNG_FILLER_AFTER);
  } else if (mode == MIXED) {
    if (ct & PNG_COLOR_MASK_COLOR) {
      png_set_expand(p);
      png_set_scale_16(p);
      png_set_rgb_to_gray_fixed(p, PNG_ERROR_ACTION_NONE, 21268, 71514);
      png_set_gamma_fixed(p, 220000, 45455);
    } else {
      png_set_expand_16(p);
      if (ct & PNG_COLOR_MASK_ALPHA) png_set_invert_alpha(p);
      png_set_swap(p);
    }
  }
  png_set_interlace_handling(p);
  png_read_update_info(p, info);
  d->rb = png_get_rowbytes(p, info);
  d->w = (int)w; d->h = (int)h;
  d->ch = png_get_channels(p, info);
  d->bd = png_get_bit_depth(p, info);
  d->px = xmalloc(d->rb * h);
  rows = xmalloc(sizeof(png_bytep) * h);
  for (png_uint_32 y = 0; y < h; y++) rows[y] = d->px + (size_t)y * d->rb;
  png_read_image(p, rows);
  png_read_end(p, info);
  png_textp text;
  int nt = 0;
  png_get_text(p, info, &text, &nt);
  d->texts = 0;
  for (int i = 0; i < nt; i++)
    if (strcmp(text[i].key, "Title") == 0 ? strcmp(text[i].text, im->name) == 0
                                          : strcmp(text[i].text, TEXT_BODY) == 0)
      d->texts++;
  png_destroy_read_struct(&p, &info, NULL);
  free(rows);
}

/* Our own expansion of an image to RGBA8, as the TO_RGBA8 transforms should give. */
static unsigned char *expect_rgba8(const Img *im) {
  unsigned char *o = xmalloc((size_t)im->w * im->h * 4);
  int gray = (im->ct & PNG_COLOR_MASK_COLOR) == 0, alpha = (im->ct & PNG_COLOR_MASK_ALPHA) != 0;
  unsigned maxv = (1u << im->bd) - 1;
  for (int y = 0; y < im->h; y++)
    for (int x = 0; x < im->w; x++) {
      unsigned char *q = o + ((size_t)y * im->w + x) * 4;
      if (im->ct == PNG_COLOR_TYPE_PALETTE) {
        unsigned i = get(im, x, y, 0);
        q[0] = im->pal[i].red; q[1] = im->pal[i].green; q[2] = im->pal[i].blue;
        q[3] = (int)i < im->ntrns ? im->trns[i] : 255;
        continue;
      }
      unsigned v[4];
      for (int c = 0; c < im->ch; c++) {
        unsigned s = get(im, x, y, c);
        v[c] = im->bd == 16 ? s >> 8 : im->bd == 8 ? s : s * 255 / maxv;
      }
      if (gray) { q[0] = q[1] = q[2] = (unsigned char)v[0]; q[3] = alpha ? v[1] : 255; }
      else { q[0] = v[0]; q[1] = v[1]; q[2] = v[2]; q[3] = alpha ? v[3] : 255; }
    }
  return o;
}

static int same_pixels(const Img *im, const Decoded *d) {
  if (d->rb != im->rb) return 0;
  return memcmp(d->px, im->px, im->rb * (size_t)im->h) == 0;
}

/* ---- progressive reading ---- */
typedef struct {
  const Img *im;
  unsigned char *px;
  size_t rb;
  int rows_seen, done;
} Prog;

static void prog_info(png_structp p, png_infop info) {
  Prog *g = png_get_progressive_ptr(p);
  png_set_interlace_handling(p);
  png_read_update_info(p, info);
  g->rb = png_get_rowbytes(p, info);
  g->px = xmalloc(g->rb * png_get_image_height(p, info));
}
static void prog_row(png_structp p, png_bytep row, png_uint_32 y, int pass) {
  Prog *g = png_get_progressive_ptr(p);
  (void)pass;
  g->rows_seen++;
  if (row) png_progressive_combine_row(p, g->px + (size_t)y * g->rb, row);
}
static void prog_end(png_structp p, png_infop info) {
  Prog *g = png_get_progressive_ptr(p);
  (void)info;
  g->done = 1;
}

static int decode_progressive(const unsigned char *data, size_t len, const Img *im,
                              int *rows_seen) {
  char err[200] = "";
  Prog g = {im, NULL, 0, 0, 0};
  png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, err, on_error, on_warning);
  png_infop info = png_create_info_struct(p);
  if (setjmp(png_jmpbuf(p))) {
    fprintf(stderr, "png_run: progressive read of %s failed: %s\n", im->name, err);
    exit(1);
  }
  png_set_progressive_read_fn(p, &g, prog_info, prog_row, prog_end);
  size_t pos = 0;
  while (pos < len) {
    size_t n = 1 + rnd() % 3000;
    if (n > len - pos) n = len - pos;
    png_process_data(p, info, (png_bytep)data + pos, n);
    pos += n;
  }
  int ok = g.done && g.rb == im->rb &&
           memcmp(g.px, im->px, im->rb * (size_t)im->h) == 0;
  *rows_seen = g.rows_seen;
  png_destroy_read_struct(&p, &info, NULL);
  free(g.px);
  return ok;
}

/* ---- a corrupted file must be refused ---- */
static int corrupted_refused(const unsigned char *data, size_t len, char *why) {
  unsigned char *copy = xmalloc(len);
  memcpy(copy, data, len);
  copy[len / 2] ^= 0x5a;   /* inside the image data */
  Src s = {copy, len, 0};
  png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, why, on_error, on_warning);
  png_infop info = png_create_info_struct(p);
  volatile int refused = 0;
  unsigned char *volatile px = NULL;
  png_bytep *volatile rows = NULL;
  if (setjmp(png_jmpbuf(p))) {
    refused = 1;
  } else {
    png_set_read_fn(p, &s, src_read);
    png_read_info(p, info);
    png_set_interlace_handling(p);
    png_read_update_info(p, info);
    size_t rb = png_get_rowbytes(p, info);
    png_uint_32 h = png_get_image_height(p, info);
    px = xmalloc(rb * h);
    rows = xmalloc(sizeof(png_bytep) * h);
    for (png_uint_32 y = 0; y < h; y++) rows[y] = px + (size_t)y * rb;
    png_read_image(p, rows);
    png_read_end(p, info);
  }
  png_destroy_read_struct(&p, &info, NULL);
  free(px); free(rows); free(copy);
  return refused;
}

/* ---- the simplified API ---- */
static void simplified(const Img *im, int *failures) {
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = (png_uint_32)im->w;
  img.height = (png_uint_32)im->h;
  if (im->bd == 16) {
    img.format = im->ct == PNG_COLOR_TYPE_GRAY ? PNG_FORMAT_LINEAR_Y : PNG_FORMAT_LINEAR_RGB_ALPHA;
  } else {
    img.format = im->ct == PNG_COLOR_TYPE_RGBA ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  }
  /* The simplified API takes 16-bit samples in native order. */
  void *buffer = im->px;
  png_uint_16 *native = NULL;
  if (im->bd == 16) {
    size_t n = (size_t)im->w * im->h * im->ch;
    native = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) native[i] = (png_uint_16)(im->px[2 * i] << 8 | im->px[2 * i + 1]);
    buffer = native;
  }
  png_alloc_size_t size = 0;
  if (!png_image_write_get_memory_size(img, size, 0, buffer, 0, NULL)) {
    fprintf(stderr, "png_run: simplified size of %s: %s\n", im->name, img.message);
    exit(1);
  }
  unsigned char *mem = xmalloc(size);
  if (!png_image_write_to_memory(&img, mem, &size, 0, buffer, 0, NULL)) {
    fprintf(stderr, "png_run: simplified write of %s: %s\n", im->name, img.message);
    exit(1);
  }
  png_image_free(&img);
  printf("  simplified %-7s %7lu bytes %016llx\n", im->name, (unsigned long)size,
         fnv1a(mem, size, FNV_START));

  static const png_uint_32 formats[] = {
      PNG_FORMAT_RGBA, PNG_FORMAT_BGR, PNG_FORMAT_LINEAR_RGB_ALPHA, PNG_FORMAT_GA,
      PNG_FORMAT_RGB_COLORMAP, PNG_FORMAT_ARGB, PNG_FORMAT_LINEAR_Y};
  static const char *const fnames[] = {"rgba", "bgr", "lin-rgba", "ga", "rgb-cmap", "argb",
                                       "lin-y"};
  for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++) {
    png_image r;
    memset(&r, 0, sizeof r);
    r.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&r, mem, size)) {
      fprintf(stderr, "png_run: simplified read of %s: %s\n", im->name, r.message);
      exit(1);
    }
    r.format = formats[k];
    size_t bytes = PNG_IMAGE_SIZE(r);
    unsigned char *out = xmalloc(bytes);
    unsigned char *cmap = (r.format & PNG_FORMAT_FLAG_COLORMAP)
                              ? xmalloc(PNG_IMAGE_COLORMAP_SIZE(r)) : NULL;
    png_color bg = {40, 90, 200};
    if (!png_image_finish_read(&r, &bg, out, 0, cmap)) {
      fprintf(stderr, "png_run: simplified finish of %s (%s): %s\n", im->name, fnames[k],
              r.message);
      exit(1);
    }
    unsigned long long h = fnv1a(out, bytes, FNV_START);
    if (cmap) h = fnv1a(cmap, PNG_IMAGE_COLORMAP_SIZE(r), h);
    const char *check = "";
    if (formats[k] == PNG_FORMAT_RGBA && im->bd == 8 && im->ct == PNG_COLOR_TYPE_RGBA) {
      int ok = memcmp(out, im->px, bytes) == 0;
      check = ok ? " exact" : " MISMATCH";
      *failures += !ok;
    } else if (formats[k] == PNG_FORMAT_LINEAR_Y && native && im->ct == PNG_COLOR_TYPE_GRAY) {
      int ok = memcmp(out, native, bytes) == 0;
      check = ok ? " exact" : " MISMATCH";
      *failures += !ok;
    }
    printf("    -> %-8s %8lu bytes %016llx%s\n", fnames[k], (unsigned long)bytes, h, check);
    png_image_free(&r);
    free(out); free(cmap);
  }
  free(mem); free(native);
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: %s SIZE ROUNDS\n", argv[0]); return 2; }
  int S = atoi(argv[1]), R = atoi(argv[2]);
  if (S < 32 || R < 1) { fprintf(stderr, "png_run: SIZE >= 32, ROUNDS >= 1\n"); return 2; }
  static const int filters[] = {PNG_FILTER_NONE, PNG_FILTER_SUB, PNG_FILTER_UP,
                                PNG_FILTER_AVG, PNG_FILTER_PAETH, PNG_ALL_FILTERS,
                                PNG_FILTER_SUB | PNG_FILTER_UP | PNG_FILTER_PAETH};
  static const int levels[] = {1, 2, 1, 4, 1};
  static const int strategies[] = {Z_RLE, Z_DEFAULT_STRATEGY, Z_HUFFMAN_ONLY, Z_FILTERED};
  int failures = 0, encodings = 0;
  unsigned long long total = FNV_START;
  size_t total_bytes = 0;
  Buf out = {NULL, 0, 0};
  printf("libpng %s, zlib %s\n", PNG_LIBPNG_VER_STRING, ZLIB_VERSION);
  for (int round = 0; round < R; round++) {
    rng_state = 0x2545f491u + 977u * (unsigned)round;
    int seed = 5 + 11 * round;
    Img *imgs[] = {
        make_image("rgb8", S + 3, S, PNG_COLOR_TYPE_RGB, 8, seed),
        make_image("rgba8", S, S - 5, PNG_COLOR_TYPE_RGBA, 8, seed),
        make_image("gray16", S, S, PNG_COLOR_TYPE_GRAY, 16, seed),
        make_image("rgba16", S / 2, S / 2 + 1, PNG_COLOR_TYPE_RGBA, 16, seed),
        make_image("ga8", S - 1, S / 2, PNG_COLOR_TYPE_GRAY_ALPHA, 8, seed),
        make_image("pal8", S, S, PNG_COLOR_TYPE_PALETTE, 8, seed),
        make_image("pal4", S, S / 2, PNG_COLOR_TYPE_PALETTE, 4, seed),
        make_image("gray4", S, S / 2, PNG_COLOR_TYPE_GRAY, 4, seed),
        make_image("gray2", S, S / 2, PNG_COLOR_TYPE_GRAY, 2, seed),
        make_image("gray1", S, S, PNG_COLOR_TYPE_GRAY, 1, seed),
    };
    int nimg = (int)(sizeof imgs / sizeof imgs[0]);
    printf("round %d\n", round);
    for (int i = 0; i < nimg; i++) {
      Img *im = imgs[i];
      unsigned char *want = expect_rgba8(im);
      for (int f = 0; f < (int)(sizeof filters / sizeof filters[0]); f++)
        for (int il = 0; il < 2; il++) {
          int k = encodings++;
          Config cf = {filters[f], il, levels[k % 5], strategies[(k / 5) % 4]};
          encode(im, &cf, &out);
          Decoded d;
          decode(out.data, out.len, PLAIN, im, &d);
          int ok = same_pixels(im, &d) && d.texts == 3;
          free(d.px);
          char extra[120] = "";
          if (f == 5 || f == 6) {   /* progressive reader, in uneven pieces */
            int seen;
            int pok = decode_progressive(out.data, out.len, im, &seen);
            ok &= pok;
            snprintf(extra, sizeof extra, " prog %d rows", seen);
          }
          if (f == 2 || f == 5) {   /* expanded to RGBA8 and checked */
            Decoded e;
            decode(out.data, out.len, TO_RGBA8, im, &e);
            int eok = e.rb == (size_t)im->w * 4 &&
                      memcmp(e.px, want, (size_t)im->w * im->h * 4) == 0;
            ok &= eok;
            free(e.px);
            size_t l = strlen(extra);
            snprintf(extra + l, sizeof extra - l, " rgba8");
          }
          if (f == 4) {             /* gray / gamma / 16-bit transforms, hashed */
            Decoded m;
            decode(out.data, out.len, MIXED, im, &m);
            size_t l = strlen(extra);
            snprintf(extra + l, sizeof extra - l, " mixed %dx%d %016llx", m.ch, m.bd,
                     fnv1a(m.px, m.rb * (size_t)m.h, FNV_START));
            free(m.px);
          }
          failures += !ok;
          total = fnv1a(out.data, out.len, total);
          total_bytes += out.len;
          printf("  %-7s %-5s il=%d z=%d/%d %7lu bytes %016llx %s%s\n", im->name,
                 filter_name(filters[f]), il, cf.level, cf.strategy, (unsigned long)out.len,
                 fnv1a(out.data, out.len, FNV_START), ok ? "ok" : "MISMATCH", extra);
        }
      free(want);
    }
    char why[200] = "";
    int refused = corrupted_refused(out.data, out.len, why);
    failures += !refused;
    printf("  corrupted file %s (%s)\n", refused ? "refused" : "ACCEPTED", why);
    simplified(imgs[0], &failures);
    simplified(imgs[1], &failures);
    simplified(imgs[2], &failures);
    simplified(imgs[3], &failures);
    for (int i = 0; i < nimg; i++) free_image(imgs[i]);
  }
  printf("%d encodings, %lu bytes, all %016llx, %d warnings\n", encodings,
         (unsigned long)total_bytes, total, warnings);
  printf("%s\n", failures ? "FAILED" : "all images verified");
  free(out.data);
  return failures != 0;
}
