"""Project-written drivers for runtime_check's held-out and reserve programs from @extra
packages (lzo2, giflib, double-conversion, re2; reserve: tinyxml, libpng1.6): each calls
its library on a generated workload and prints counts and checksums, never addresses, so
its output is the same in every build and memory layout. runtime_check writes these texts into the program's generated-file
directory; nothing here is third-party code. (The other drivers: runtime_drivers.)
"""
from mlgo.evaluation import runtime_drivers

LZO_DRIVER = r"""/* mlgo runtime_check driver for lzo2: cuts a text into blocks and, for several LZO
   compressors (LZO1X-1 on 64 KiB blocks and on the whole text, LZO1X-1(15), LZO1X-999 at
   levels 3 and 7 followed by in-place optimization, LZO1B level 5, LZO1F-1), compresses
   every block, decompresses it with the bounds-checked decompressor and compares; on the
   first block it also checks that the safe decompressor refuses a too-small output buffer
   and a cut-off input. Prints sizes and checksums of the compressed streams; every round
   must give the same ones. Usage: lzo_run FILE [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lzo/lzoconf.h"
#include "lzo/lzo1b.h"
#include "lzo/lzo1f.h"
#include "lzo/lzo1x.h"
""" + runtime_drivers._READ_FILE + r"""
/* LZO1X-999 at the level in x999_level, its output then re-optimized in place. */
static int x999_level;
static int x999(const lzo_bytep in, lzo_uint n, lzo_bytep out, lzo_uintp out_len,
                lzo_voidp wrk) {
  int r = lzo1x_999_compress_level(in, n, out, out_len, wrk, NULL, 0, 0, x999_level);
  if (r != LZO_E_OK) return r;
  lzo_bytep scratch = malloc(n ? n : 1);
  lzo_uint got = n;
  r = lzo1x_optimize(out, *out_len, scratch, &got, NULL);
  if (r == LZO_E_OK && got != n) r = LZO_E_ERROR;
  free(scratch);
  return r;
}

static int b5(const lzo_bytep in, lzo_uint n, lzo_bytep out, lzo_uintp out_len,
              lzo_voidp wrk) {
  return lzo1b_5_compress(in, n, out, out_len, wrk);
}

typedef int (*codec_fn)(const lzo_bytep, lzo_uint, lzo_bytep, lzo_uintp, lzo_voidp);

struct codec {
  const char *name;
  codec_fn compress;
  codec_fn decompress;   /* the bounds-checked (_safe) decompressor */
  size_t wrkmem;
  size_t block;          /* bytes per independently compressed block */
  int level;             /* LZO1X-999 level, else 0 */
  int clear;             /* clear the work area before each block (see below) */
  int creps, dreps;      /* compressions, decompressions of each block per round */
};

static const struct codec codecs[] = {
  {"lzo1x_1", lzo1x_1_compress, lzo1x_decompress_safe, LZO1X_1_MEM_COMPRESS,
   65536, 0, 0, 3, 4},
  {"lzo1x_1/all", lzo1x_1_compress, lzo1x_decompress_safe, LZO1X_1_MEM_COMPRESS,
   (size_t)1 << 30, 0, 0, 2, 3},
  {"lzo1x_1_15", lzo1x_1_15_compress, lzo1x_decompress_safe, LZO1X_1_15_MEM_COMPRESS,
   16384, 0, 0, 3, 3},
  {"lzo1x_999/3", x999, lzo1x_decompress_safe, LZO1X_999_MEM_COMPRESS,
   131072, 3, 0, 1, 4},
  {"lzo1x_999/7", x999, lzo1x_decompress_safe, LZO1X_999_MEM_COMPRESS,
   262144, 7, 0, 1, 4},
  {"lzo1b_5", b5, lzo1b_decompress_safe, LZO1B_MEM_COMPRESS, 32768, 0, 0, 3, 4},
  {"lzo1f_1", lzo1f_1_compress, lzo1f_decompress_safe, LZO1F_MEM_COMPRESS,
   65536, 0, 1, 3, 4},
};
#define NCODECS (sizeof codecs / sizeof *codecs)

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE [ROUNDS]\n", argv[0]); return 2; }
  if (lzo_init() != LZO_E_OK) { fprintf(stderr, "lzo_init failed\n"); return 1; }
  size_t len;
  char *text = read_file(argv[1], &len);
  int rounds = argc > 2 ? atoi(argv[2]) : 1;
  const lzo_bytep in = (const lzo_bytep)text;
  size_t bound = len + len / 8 + 256;
  lzo_bytep comp = malloc(bound);
  lzo_bytep back = malloc(len + 16);
  size_t wmax = 0;
  for (size_t c = 0; c < NCODECS; c++)
    if (codecs[c].wrkmem > wmax) wmax = codecs[c].wrkmem;
  lzo_voidp wrk = malloc(wmax);
  if (!comp || !back || !wrk) { fprintf(stderr, "out of memory\n"); return 1; }
  unsigned long long first[NCODECS];
  int failures = 0;
  for (int r = 0; r < rounds; r++) {
    int last = r == rounds - 1;
    if (last)
      printf("input %zu bytes adler32 %08lx\n", len,
             (unsigned long)lzo_adler32(1, in, (lzo_uint)len));
    for (size_t c = 0; c < NCODECS; c++) {
      const struct codec *k = &codecs[c];
      x999_level = k->level;
      size_t total = 0, blocks = 0, largest = 0;
      lzo_uint32_t adler = 1;
      unsigned long long h = 1469598103934665603ULL;
      for (size_t off = 0; off < len && !failures; off += k->block) {
        lzo_uint n = (lzo_uint)(len - off < k->block ? len - off : k->block);
        lzo_uint clen = 0;
        for (int i = 0; i < k->creps; i++) {
          /* LZO1F-1 reads dictionary entries it has not written (the others clear
             theirs): without this its output would depend on earlier blocks */
          if (k->clear) memset(wrk, 0, k->wrkmem);
          lzo_uint got = (lzo_uint)bound;
          int rc = k->compress(in + off, n, comp, &got, wrk);
          if (rc != LZO_E_OK || (i > 0 && got != clen)) {
            fprintf(stderr, "%s: compress error %d at %zu\n", k->name, rc, off);
            failures++;
            break;
          }
          clen = got;
        }
        for (int i = 0; i < k->dreps && !failures; i++) {
          lzo_uint dlen = n;
          int rc = k->decompress(comp, clen, back, &dlen, NULL);
          if (rc != LZO_E_OK || dlen != n || memcmp(back, in + off, n) != 0) {
            fprintf(stderr, "%s: round trip failed (%d) at %zu\n", k->name, rc, off);
            failures++;
          }
        }
        if (blocks == 0 && last) {
          lzo_uint small = n / 2;
          int over = k->decompress(comp, clen, back, &small, NULL);
          lzo_uint cut = n;
          int trunc = k->decompress(comp, clen * 3 / 4, back, &cut, NULL);
          printf("%-12s guards: short output %d (%lu bytes), cut-off input %d (%lu bytes)\n",
                 k->name, over, (unsigned long)small, trunc, (unsigned long)cut);
        }
        total += clen;
        blocks++;
        if (clen > largest) largest = clen;
        adler = lzo_adler32(adler, comp, clen);
        h = (h ^ fnv1a((const char *)comp, clen)) * 1099511628211ULL;
      }
      unsigned long long sig = h ^ ((unsigned long long)adler << 32) ^ total;
      if (r == 0) first[c] = sig;
      else if (sig != first[c]) {
        fprintf(stderr, "%s: round %d differs from round 0\n", k->name, r);
        failures++;
      }
      if (last)
        printf("%-12s blocks %3zu compressed %7zu (%5.2f%%) largest %6zu adler32 %08lx "
               "fnv %016llx\n", k->name, blocks, total, len ? 100.0 * total / len : 0.0,
               largest, (unsigned long)adler, h);
    }
  }
  printf("%s\n", failures ? "FAILED" : "all round trips verified");
  free(comp); free(back); free(wrk); free(text);
  return failures != 0;
}
"""

GIF_DRIVER = r"""/* mlgo runtime_check driver for giflib: renders a deterministic animation in memory
   (gradients, moving rings, a checkerboard, an XOR texture and a band of noise),
   reduces every frame to a palette with GifQuantizeBuffer, labels it with the library's
   8x8 font, and writes all frames as one GIF89a (global map made by GifUnionColorMap,
   local maps, interlaced and offset frames, graphics control blocks, comments, a
   looping application block) through EGifOpen/EGifSpew into a memory buffer. Reads it
   back with DGifOpen/DGifSlurp and checks every pixel, map and extension; then writes
   every frame alone as a GIF87a with the line-by-line encoder and reads it back record
   by record. Prints sizes, quantization errors and FNV-1a hashes.
   Usage: gif_run SIZE FRAMES */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gif_lib.h"

static unsigned long long fnv1a(const void *p, size_t n, unsigned long long h) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ULL; }
  return h;
}
#define FNV_START 1469598103934665603ULL

static void die(const char *what, int err) {
  fprintf(stderr, "gif_run: %s: %s\n", what, GifErrorString(err));
  exit(1);
}

/* ---- memory streams for the library's callbacks ---- */
typedef struct { unsigned char *data; size_t len, cap; } Sink;
typedef struct { const unsigned char *data; size_t len, pos; } Source;

static int sink_write(GifFileType *gif, const GifByteType *buf, int n) {
  Sink *s = gif->UserData;
  if (s->len + (size_t)n > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + (size_t)n) cap *= 2;
    unsigned char *d = realloc(s->data, cap);
    if (!d) return 0;
    s->data = d;
    s->cap = cap;
  }
  memcpy(s->data + s->len, buf, (size_t)n);
  s->len += (size_t)n;
  return n;
}

static int source_read(GifFileType *gif, GifByteType *buf, int n) {
  Source *s = gif->UserData;
  size_t left = s->len - s->pos;
  size_t k = (size_t)n < left ? (size_t)n : left;
  memcpy(buf, s->data + s->pos, k);
  s->pos += k;
  return (int)k;
}

/* ---- the scene ---- */
typedef struct {
  int w, h, left, top, colors, interlace, use_global, delay, disposal, transparent;
  unsigned char *r, *g, *b;   /* the rendered true-colour frame */
  GifByteType *idx;           /* its palette indices, as written */
  GifColorType map[256];      /* its own palette from the quantizer */
  GifColorType shown[256];    /* the palette it is displayed with */
  char comment[400];
} Frame;

static int clampc(int v) { return v < 12 ? 12 : v > 243 ? 243 : v; }

static void render(Frame *fr, int W, int H, int f) {
  size_t n = (size_t)fr->w * fr->h;
  fr->r = malloc(n); fr->g = malloc(n); fr->b = malloc(n);
  unsigned int rng = 0x9e3779b9u ^ (unsigned int)(f * 7919);
  int cx = W / 4 + (f * W / 7) % (W / 2), cy = H / 3 + (f * 13) % (H / 3);
  int cx2 = W - 1 - cx, cy2 = H - 1 - cy, bdiv = W + H + 9 * f + 1;
  int *red = malloc(sizeof(int) * (size_t)fr->w);
  for (int x = 0; x < fr->w; x++) red[x] = 20 + (x + fr->left) * 210 / W;
  for (int y = 0; y < fr->h; y++) {
    int Y = y + fr->top;
    int noisy = (Y + 5 * f) % 61 < 7;
    int g0 = 20 + Y * 210 / H;
    for (int x = 0; x < fr->w; x++) {
      int X = x + fr->left;
      int r = red[x], g = g0;
      int b = 30 + (X + Y + 9 * f) * 180 / bdiv;
      int dx = X - cx, dy = Y - cy, d2 = dx * dx + dy * dy;
      int ex = X - cx2, ey = Y - cy2, e2 = ex * ex + ey * ey;
      if ((d2 / (90 + 4 * f)) % 4 < 2) { r = (r + 255 - (d2 >> 5) % 97) / 2; b = b * 3 / 4; }
      if (e2 < W * H / 10) g = (g + 40 + ((e2 >> 4) & 63)) % 256;
      if (X < W / 3 && Y > 2 * H / 3 && (((X + f) >> 3) ^ (Y >> 3)) & 1) {
        r = 235 - r / 4; g = 200 - g / 5; b = 60;
      }
      if (X > 2 * W / 3 && Y < H / 3) b = 40 + ((X ^ (Y + 3 * f)) & 127) + f % 50;
      if (noisy) {
        rng = rng * 1664525u + 1013904223u;
        r += (int)((rng >> 24) & 31) - 16;
        g += (int)((rng >> 16) & 31) - 16;
        b += (int)((rng >> 8) & 63) - 32;
      }
      size_t i = (size_t)y * fr->w + x;
      fr->r[i] = (unsigned char)clampc(r);
      fr->g[i] = (unsigned char)clampc(g);
      fr->b[i] = (unsigned char)clampc(b);
    }
  }
  free(red);
}

/* nearest palette entry of `map` (count entries) to one colour, for the label colours */
static int nearest(const GifColorType *map, int count, int r, int g, int b) {
  int best = 0, bd = 1 << 30;
  for (int i = 0; i < count; i++) {
    int dr = map[i].Red - r, dg = map[i].Green - g, db = map[i].Blue - b;
    int d = dr * dr + dg * dg + db * db;
    if (d < bd) { bd = d; best = i; }
  }
  return best;
}

static unsigned long long sq_error(const Frame *fr, const GifColorType *map) {
  unsigned long long e = 0;
  size_t n = (size_t)fr->w * fr->h;
  for (size_t i = 0; i < n; i++) {
    const GifColorType *c = &map[fr->idx[i]];
    long dr = c->Red - fr->r[i], dg = c->Green - fr->g[i], db = c->Blue - fr->b[i];
    e += (unsigned long long)(dr * dr + dg * dg + db * db);
  }
  return e;
}

static void add_ext(int *count, ExtensionBlock **blocks, int fn, const void *data, int len) {
  if (GifAddExtensionBlock(count, blocks, fn, (unsigned int)len, (unsigned char *)data)
      == GIF_ERROR) {
    fprintf(stderr, "gif_run: GifAddExtensionBlock failed\n");
    exit(1);
  }
}

/* A comment as extension blocks of at most 255 bytes each. */
static void add_comment(int *count, ExtensionBlock **blocks, const char *text) {
  int len = (int)strlen(text), first = 1;
  do {
    int k = len > 255 ? 255 : len;
    add_ext(count, blocks, first ? COMMENT_EXT_FUNC_CODE : CONTINUE_EXT_FUNC_CODE, text, k);
    text += k; len -= k; first = 0;
  } while (len > 0);
}

/* The comment text held by a run of blocks starting at `i` (0 if it is not there). */
static int comment_at(const ExtensionBlock *blocks, int count, int i, char *out, int cap) {
  if (i >= count || blocks[i].Function != COMMENT_EXT_FUNC_CODE) return 0;
  int n = 0;
  do {
    if (n + blocks[i].ByteCount >= cap) return 0;
    memcpy(out + n, blocks[i].Bytes, (size_t)blocks[i].ByteCount);
    n += blocks[i].ByteCount;
    i++;
  } while (i < count && blocks[i].Function == CONTINUE_EXT_FUNC_CODE);
  out[n] = 0;
  return 1;
}

static int find_comment(const ExtensionBlock *blocks, int count, char *out, int cap) {
  for (int i = 0; i < count; i++)
    if (comment_at(blocks, count, i, out, cap)) return 1;
  return 0;
}

static int check(int ok, const char *what, int frame) {
  if (!ok) printf("MISMATCH frame %d: %s\n", frame, what);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: %s SIZE FRAMES\n", argv[0]); return 2; }
  int W = atoi(argv[1]), H = W, F = atoi(argv[2]);
  if (W < 160 || W > 4096 || F < 2 || F > 200) { fprintf(stderr, "bad arguments\n"); return 2; }
  static const int palette_sizes[] = {64, 128, 256, 32, 256, 16, 128, 256, 8, 64, 256, 128};
  Frame *frames = calloc((size_t)F, sizeof(Frame));
  unsigned long long qerr_total = 0;

  /* 1. render and quantize every frame */
  for (int f = 0; f < F; f++) {
    Frame *fr = &frames[f];
    int full = f < 2 || f % 3 != 1;
    fr->w = full ? W : W - W / 4 - (f % 5) * 4;
    fr->h = full ? H : H - H / 3 + (f % 4) * 3;
    fr->left = full ? 0 : (W - fr->w) / 2 + f % 7;
    fr->top = full ? 0 : (H - fr->h) / 3;
    fr->colors = palette_sizes[f % 12];
    fr->interlace = f % 4 == 2;
    fr->use_global = f < 2;
    fr->delay = 3 + f * 2;
    fr->disposal = f % 3;
    fr->transparent = NO_TRANSPARENT_COLOR;
    render(fr, W, H, f);
    fr->idx = malloc((size_t)fr->w * fr->h);
    int size = fr->colors;
    if (GifQuantizeBuffer((unsigned)fr->w, (unsigned)fr->h, &size, fr->r, fr->g, fr->b,
                          fr->idx, fr->map) == GIF_ERROR) {
      fprintf(stderr, "gif_run: GifQuantizeBuffer failed on frame %d\n", f);
      return 1;
    }
    /* a boxed caption in the palette's darkest and lightest colours */
    SavedImage canvas;
    memset(&canvas, 0, sizeof canvas);
    canvas.ImageDesc.Width = fr->w;
    canvas.ImageDesc.Height = fr->h;
    canvas.RasterBits = fr->idx;
    int dark = nearest(fr->map, fr->colors, 12, 12, 12);
    int light = nearest(fr->map, fr->colors, 243, 243, 243);
    char caption[64];
    snprintf(caption, sizeof caption, "mlgo frame %d\r\t%d colours", f, fr->colors);
    GifDrawBoxedText8x8(&canvas, 4 + f % 9, 6 + (f * 11) % (fr->h - 40), caption, 3,
                        dark, light);
    GifDrawRectangle(&canvas, fr->w - 20, fr->h - 14, 12, 6, light);
    if (f % 4 == 3) fr->transparent = dark;
    snprintf(fr->comment, sizeof fr->comment,
             "frame %d: %dx%d at (%d,%d), %d colours, %s, delay %d", f, fr->w, fr->h,
             fr->left, fr->top, fr->colors, fr->interlace ? "interlaced" : "sequential",
             fr->delay);
    if (f % 5 == 0) {   /* a long comment, written as several sub-blocks */
      size_t n = strlen(fr->comment);
      while (n + 40 < sizeof fr->comment) {
        n += (size_t)snprintf(fr->comment + n, sizeof fr->comment - n, "; row %zu of padding",
                              n);
      }
    }
  }

  /* 2. the global map: frame 0's palette united with frame 1's; frame 1's indices move */
  ColorMapObject *m0 = GifMakeMapObject(frames[0].colors, frames[0].map);
  ColorMapObject *m1 = GifMakeMapObject(frames[1].colors, frames[1].map);
  GifPixelType trans[256];
  ColorMapObject *global = GifUnionColorMap(m0, m1, trans);
  if (!m0 || !m1 || !global) { fprintf(stderr, "gif_run: colour maps failed\n"); return 1; }
  printf("global map: %d + %d colours -> %d entries (%d bits)\n", frames[0].colors,
         frames[1].colors, global->ColorCount, global->BitsPerPixel);
  {
    SavedImage tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.ImageDesc.Width = frames[1].w;
    tmp.ImageDesc.Height = frames[1].h;
    tmp.RasterBits = frames[1].idx;
    GifApplyTranslation(&tmp, trans);
  }
  for (int f = 0; f < F; f++) {
    Frame *fr = &frames[f];
    if (fr->use_global) {
      memset(fr->shown, 0, sizeof fr->shown);
      memcpy(fr->shown, global->Colors, sizeof(GifColorType) * (size_t)global->ColorCount);
    } else {
      memcpy(fr->shown, fr->map, sizeof fr->shown);
    }
    unsigned long long e = sq_error(fr, fr->shown);
    qerr_total += e;
  }

  /* 3. the animation, slurp-style, into memory */
  Sink anim = {0};
  int err = 0;
  GifFileType *out = EGifOpen(&anim, sink_write, &err);
  if (!out) die("EGifOpen", err);
  out->SWidth = W;
  out->SHeight = H;
  out->SColorResolution = 8;
  out->SBackGroundColor = 0;
  out->SColorMap = global;
  for (int f = 0; f < F; f++) {
    Frame *fr = &frames[f];
    SavedImage *si = GifMakeSavedImage(out, NULL);
    if (!si) die("GifMakeSavedImage", E_GIF_ERR_NOT_ENOUGH_MEM);
    si->ImageDesc.Left = fr->left;
    si->ImageDesc.Top = fr->top;
    si->ImageDesc.Width = fr->w;
    si->ImageDesc.Height = fr->h;
    si->ImageDesc.Interlace = fr->interlace;
    si->ImageDesc.ColorMap = fr->use_global ? NULL : GifMakeMapObject(fr->colors, fr->map);
    si->RasterBits = malloc((size_t)fr->w * fr->h);
    memcpy(si->RasterBits, fr->idx, (size_t)fr->w * fr->h);
    if (f == 0) {
      static const unsigned char loop[3] = {1, 0, 0};
      add_ext(&si->ExtensionBlockCount, &si->ExtensionBlocks, APPLICATION_EXT_FUNC_CODE,
              "NETSCAPE2.0", 11);
      add_ext(&si->ExtensionBlockCount, &si->ExtensionBlocks, CONTINUE_EXT_FUNC_CODE, loop, 3);
    }
    add_comment(&si->ExtensionBlockCount, &si->ExtensionBlocks, fr->comment);
    GraphicsControlBlock gcb = {fr->disposal, false, fr->delay, fr->transparent};
    if (EGifGCBToSavedExtension(&gcb, out, f) == GIF_ERROR)
      die("EGifGCBToSavedExtension", E_GIF_ERR_NOT_ENOUGH_MEM);
  }
  add_comment(&out->ExtensionBlockCount, &out->ExtensionBlocks, "written by the mlgo driver");
  /* EGifSpew closes the file but leaves the saved images to us */
  SavedImage *images = out->SavedImages;
  int image_count = out->ImageCount;
  int ext_count = out->ExtensionBlockCount;
  ExtensionBlock *exts = out->ExtensionBlocks;
  if (EGifSpew(out) == GIF_ERROR) die("EGifSpew", out->Error);
  for (int i = 0; i < image_count; i++) {
    GifFreeMapObject(images[i].ImageDesc.ColorMap);
    free(images[i].RasterBits);
    GifFreeExtensions(&images[i].ExtensionBlockCount, &images[i].ExtensionBlocks);
  }
  free(images);
  GifFreeExtensions(&ext_count, &exts);
  printf("animation: %.6s, %d frames of up to %dx%d, %zu bytes, fnv1a %016llx\n",
         (const char *)anim.data, F, W, H, anim.len, fnv1a(anim.data, anim.len, FNV_START));

  /* 4. read it back whole and check everything */
  Source src = {anim.data, anim.len, 0};
  GifFileType *in = DGifOpen(&src, source_read, &err);
  if (!in) die("DGifOpen", err);
  if (DGifSlurp(in) == GIF_ERROR) die("DGifSlurp", in->Error);
  int bad = 0;
  bad += check(in->SWidth == W && in->SHeight == H, "screen size", -1);
  bad += check(in->ImageCount == F, "image count", -1);
  bad += check(in->SColorMap && in->SColorMap->ColorCount == global->ColorCount &&
               !memcmp(in->SColorMap->Colors, global->Colors,
                       sizeof(GifColorType) * (size_t)global->ColorCount), "global map", -1);
  char text[512];
  bad += check(find_comment(in->ExtensionBlocks, in->ExtensionBlockCount, text, sizeof text)
               && !strcmp(text, "written by the mlgo driver"), "trailing comment", -1);
  unsigned long long decoded_hash = FNV_START, shown_err = 0;
  for (int f = 0; f < F && f < in->ImageCount; f++) {
    Frame *fr = &frames[f];
    SavedImage *si = &in->SavedImages[f];
    GifImageDesc *d = &si->ImageDesc;
    bad += check(d->Left == fr->left && d->Top == fr->top && d->Width == fr->w &&
                 d->Height == fr->h && d->Interlace == fr->interlace, "descriptor", f);
    bad += check(!memcmp(si->RasterBits, fr->idx, (size_t)fr->w * fr->h), "pixels", f);
    const ColorMapObject *cm = d->ColorMap ? d->ColorMap : in->SColorMap;
    bad += check((d->ColorMap == NULL) == fr->use_global, "which map", f);
    GifColorType shown[256];
    memset(shown, 0, sizeof shown);
    memcpy(shown, cm->Colors, sizeof(GifColorType) * (size_t)cm->ColorCount);
    unsigned long long e = sq_error(fr, shown);
    shown_err += e;
    GraphicsControlBlock gcb = {0, false, -1, -1};
    bad += check(DGifSavedExtensionToGCB(in, f, &gcb) == GIF_OK && gcb.DelayTime == fr->delay
                 && gcb.DisposalMode == fr->disposal
                 && gcb.TransparentColor == fr->transparent, "graphics control", f);
    bad += check(find_comment(si->ExtensionBlocks, si->ExtensionBlockCount, text, sizeof text)
                 && !strcmp(text, fr->comment), "comment", f);
    if (f == 0)
      bad += check(si->ExtensionBlockCount >= 2 &&
                   si->ExtensionBlocks[0].Function == APPLICATION_EXT_FUNC_CODE &&
                   si->ExtensionBlocks[0].ByteCount == 11 &&
                   !memcmp(si->ExtensionBlocks[0].Bytes, "NETSCAPE2.0", 11), "loop block", f);
    decoded_hash = fnv1a(si->RasterBits, (size_t)fr->w * fr->h, decoded_hash);
    decoded_hash = fnv1a(cm->Colors, sizeof(GifColorType) * (size_t)cm->ColorCount,
                         decoded_hash);
    printf("frame %2d: %3dx%-3d at %3d,%-3d %3d colours (%s map) %s delay %2d disposal %d "
           "blocks %d sq-error %llu\n", f, d->Width, d->Height, d->Left, d->Top, fr->colors,
           d->ColorMap ? "local" : "global", d->Interlace ? "interlaced" : "sequential",
           gcb.DelayTime, gcb.DisposalMode, si->ExtensionBlockCount, e);
  }
  if (DGifCloseFile(in, &err) == GIF_ERROR) die("DGifCloseFile", err);
  printf("decoded animation: fnv1a %016llx, squared error %llu (expected %llu)\n",
         decoded_hash, shown_err, qerr_total);
  bad += check(shown_err == qerr_total, "squared error", -1);

  /* 5. every frame alone, GIF87a, line by line; read back record by record */
  size_t singles = 0;
  unsigned long long single_hash = FNV_START;
  for (int f = 0; f < F; f++) {
    Frame *fr = &frames[f];
    Sink one = {0};
    GifFileType *o = EGifOpen(&one, sink_write, &err);
    if (!o) die("EGifOpen", err);
    /* the frame's palette: its own, or the global map for the frames that use it */
    ColorMapObject *cm = fr->use_global ? GifMakeMapObject(global->ColorCount, global->Colors)
                                        : GifMakeMapObject(fr->colors, fr->map);
    if (!cm) die("GifMakeMapObject", E_GIF_ERR_NOT_ENOUGH_MEM);
    if (EGifPutScreenDesc(o, fr->w, fr->h, cm->BitsPerPixel, 0, cm) == GIF_ERROR ||
        EGifPutImageDesc(o, 0, 0, fr->w, fr->h, false, NULL) == GIF_ERROR)
      die("EGifPut*Desc", o->Error);
    GifByteType *line = malloc((size_t)fr->w);
    for (int y = 0; y < fr->h; y++) {
      memcpy(line, fr->idx + (size_t)y * fr->w, (size_t)fr->w);
      if (EGifPutLine(o, line, fr->w) == GIF_ERROR) die("EGifPutLine", o->Error);
    }
    if (EGifCloseFile(o, &err) == GIF_ERROR) die("EGifCloseFile", err);
    GifFreeMapObject(cm);
    singles += one.len;
    single_hash = fnv1a(one.data, one.len, single_hash);

    Source s1 = {one.data, one.len, 0};
    GifFileType *i1 = DGifOpen(&s1, source_read, &err);
    if (!i1) die("DGifOpen", err);
    GifRecordType rt;
    int images = 0;
    long histogram[256] = {0};
    do {
      if (DGifGetRecordType(i1, &rt) == GIF_ERROR) die("DGifGetRecordType", i1->Error);
      if (rt == IMAGE_DESC_RECORD_TYPE) {
        if (DGifGetImageDesc(i1) == GIF_ERROR) die("DGifGetImageDesc", i1->Error);
        images++;
        for (int y = 0; y < i1->Image.Height; y++) {
          if (DGifGetLine(i1, line, i1->Image.Width) == GIF_ERROR) die("DGifGetLine", i1->Error);
          for (int x = 0; x < fr->w; x++) {
            const GifColorType *a = &i1->SColorMap->Colors[line[x]];
            const GifColorType *b = &fr->shown[fr->idx[(size_t)y * fr->w + x]];
            if (a->Red != b->Red || a->Green != b->Green || a->Blue != b->Blue) {
              bad += check(0, "single-frame pixel", f);
              x = fr->w; y = i1->Image.Height;
            } else {
              histogram[line[x]]++;
            }
          }
        }
      } else if (rt == EXTENSION_RECORD_TYPE) {
        int code;
        GifByteType *ext;
        if (DGifGetExtension(i1, &code, &ext) == GIF_ERROR) die("DGifGetExtension", i1->Error);
        while (ext) if (DGifGetExtensionNext(i1, &ext) == GIF_ERROR) die("DGifGetExtensionNext", i1->Error);
      }
    } while (rt != TERMINATE_RECORD_TYPE);
    int used = 0;
    long top = 0;
    for (int k = 0; k < 256; k++) { used += histogram[k] > 0; if (histogram[k] > top) top = histogram[k]; }
    printf("single %2d: %.6s %7zu bytes, %d image, %3d colours used, commonest %ld pixels\n",
           f, (const char *)one.data, one.len, images, used, top);
    bad += check(images == 1, "single image count", f);
    if (DGifCloseFile(i1, &err) == GIF_ERROR) die("DGifCloseFile", err);
    free(line);
    free(one.data);
  }
  printf("singles: %zu bytes in all, fnv1a %016llx; animation %zu bytes\n", singles,
         single_hash, anim.len);
  printf("%s (%d mismatches)\n", bad ? "FAILED" : "all frames verified", bad);

  GifFreeMapObject(m0);
  GifFreeMapObject(m1);
  GifFreeMapObject(global);
  for (int f = 0; f < F; f++) {
    free(frames[f].r); free(frames[f].g); free(frames[f].b); free(frames[f].idx);
  }
  free(frames);
  free(anim.data);
  return bad ? 1 : 0;
}
"""

DCONV_DRIVER = r"""// mlgo runtime_check driver for double-conversion. Two workloads:
//  1. every number token of a JSON document is parsed strictly and printed back in
//     shortest, precision and fixed form;
//  2. a deterministic stream of COUNT doubles (random bit patterns, short decimals,
//     integers, binary fractions, values near powers of ten and the range limits,
//     widened floats, money amounts) is printed in the shortest, exponential,
//     precision and fixed modes of two differently configured converters, and the
//     texts are read back (decimal, hexadecimal floats, octal, digit separators,
//     16-bit text, single precision).
// Exact round trips are checked where they must hold; counts and FNV-1a checksums of
// all produced text are printed. Usage: dconv_run FILE.json COUNT
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "double-conversion/double-conversion.h"

using double_conversion::DoubleToStringConverter;
using double_conversion::StringBuilder;
using double_conversion::StringToDoubleConverter;

namespace {

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

double FromBits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float FloatFromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// 64-bit linear congruential generator with an output mix (its low bits alone are weak).
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t Next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t x = state;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    return x;
  }
  int Below(int n) { return static_cast<int>((Next() >> 33) % static_cast<uint64_t>(n)); }
};

// FNV-1a over every produced string, each followed by a 0 byte.
struct Checksum {
  uint64_t hash = 1469598103934665603ULL;
  long strings = 0;
  long bytes = 0;
  void Add(const char* s, int n) {
    for (int i = 0; i < n; i++) {
      hash ^= static_cast<unsigned char>(s[i]);
      hash *= 1099511628211ULL;
    }
    hash *= 1099511628211ULL;  // the 0 separator byte
    strings++;
    bytes += n;
  }
  void Add(const char* s) { Add(s, static_cast<int>(std::strlen(s))); }
};

struct Mode {
  const char* name;
  Checksum sum;
  long failed = 0;     // conversions that returned false
  long exact = 0;      // round trips that gave back the same bits
  long inexact = 0;    // round trips that did not (must stay 0 where they must hold)
  long stable = 0;     // re-printing the parsed value gave the same text
  long unstable = 0;
};

bool SameValue(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return Bits(a) == Bits(b);
}

// The EcmaScript converter prints -0 as "0" (UNIQUE_ZERO): what its text must read as.
double EcmaValue(double v) { return v == 0 ? 0.0 : v; }

bool SameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return FloatBits(a) == FloatBits(b);
}

void Tally(Mode* m, bool same) {
  if (same) m->exact++; else m->inexact++;
}

// Unsigned integer in base 2..16; returns its length.
int FormatUnsigned(uint64_t v, int base, char* out) {
  char tmp[72];
  int n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v % static_cast<uint64_t>(base)];
    v /= static_cast<uint64_t>(base);
  } while (v);
  for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  out[n] = 0;
  return n;
}

int FormatSigned(long v, char* out) {
  if (v < 0) {
    out[0] = '-';
    return 1 + FormatUnsigned(static_cast<uint64_t>(-v), 10, out + 1);
  }
  return FormatUnsigned(static_cast<uint64_t>(v), 10, out);
}

// A finite double as a C99-style hexadecimal float ("-0x1.8p+3"); -1 for Inf/NaN.
int FormatHexFloat(double v, char* out) {
  uint64_t b = Bits(v);
  int biased = static_cast<int>((b >> 52) & 0x7ff);
  uint64_t frac = b & ((1ULL << 52) - 1);
  if (biased == 0x7ff) return -1;
  char* p = out;
  if (b >> 63) *p++ = '-';
  *p++ = '0';
  *p++ = 'x';
  *p++ = biased ? '1' : '0';
  int exponent = biased ? biased - 1023 : -1022;
  if (biased == 0 && frac == 0) exponent = 0;
  if (frac) {
    *p++ = '.';
    int digits = 13;
    while ((frac & 0xf) == 0) {
      frac >>= 4;
      digits--;
    }
    for (int i = digits - 1; i >= 0; i--) *p++ = "0123456789abcdef"[(frac >> (4 * i)) & 0xf];
  }
  *p++ = 'p';
  if (exponent >= 0) *p++ = '+';
  p += FormatSigned(exponent, p);
  *p = 0;
  return static_cast<int>(p - out);
}

// A non-negative integer in decimal with a ' between groups of three digits.
int FormatGrouped(uint64_t v, char* out) {
  char plain[32];
  int n = FormatUnsigned(v, 10, plain);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0) out[k++] = '\'';
    out[k++] = plain[i];
  }
  out[k] = 0;
  return k;
}

const int kBuf = 256;

struct Converters {
  // JavaScript-like output: 1e+21, 0.000001, "Infinity".
  const DoubleToStringConverter& ecma = DoubleToStringConverter::EcmaScriptConverter();
  // Another style: 1.5E017, "12.0", %g-like trimming, a minimum exponent width.
  DoubleToStringConverter other{DoubleToStringConverter::EMIT_TRAILING_DECIMAL_POINT |
                                    DoubleToStringConverter::EMIT_TRAILING_ZERO_AFTER_POINT |
                                    DoubleToStringConverter::NO_TRAILING_ZERO,
                                "inf", "nan", 'E', -4, 17, 3, 2, 3};
  StringToDoubleConverter strict{StringToDoubleConverter::NO_FLAGS, 0.0, -1.0, "Infinity",
                                 "NaN"};
  StringToDoubleConverter lenient{StringToDoubleConverter::ALLOW_LEADING_SPACES |
                                      StringToDoubleConverter::ALLOW_TRAILING_SPACES |
                                      StringToDoubleConverter::ALLOW_CASE_INSENSITIVITY,
                                  0.0, -1.0, "inf", "nan"};
  StringToDoubleConverter hex{StringToDoubleConverter::ALLOW_HEX |
                                  StringToDoubleConverter::ALLOW_HEX_FLOATS,
                              0.0, -1.0, nullptr, nullptr};
  StringToDoubleConverter octal{StringToDoubleConverter::ALLOW_OCTALS, 0.0, -1.0, nullptr,
                                nullptr};
  StringToDoubleConverter grouped{StringToDoubleConverter::NO_FLAGS, 0.0, -1.0, nullptr,
                                  nullptr, '\''};
};

enum ModeIndex {
  kShortest, kShortestOther, kExponentialShortest, kPrecision17, kPrecision, kPrecisionLong,
  kFixed, kFixedLong, kExponential, kDigits, kSingle, kHex, kOctal, kGrouped, kUtf16,
  kDecimalInput, kJson, kModes
};

const char* const kModeNames[kModes] = {
    "shortest", "shortest-other", "exponential-shortest", "precision-17", "precision",
    "precision-long", "fixed", "fixed-long", "exponential", "digits", "single", "hex",
    "octal", "grouped", "utf16", "decimal-input", "json"};

struct Driver {
  Converters c;
  Mode modes[kModes];
  char buf[kBuf];

  Driver() {
    for (int i = 0; i < kModes; i++) modes[i].name = kModeNames[i];
  }

  double Parse(const StringToDoubleConverter& conv, const char* s, int n, bool* complete) {
    int used = 0;
    double v = conv.StringToDouble(s, n, &used);
    *complete = used == n;
    return v;
  }

  // Records the builder's text in mode m; returns its length, or -1 if it failed.
  int Finish(Mode* m, bool ok, StringBuilder* sb) {
    if (!ok) {
      m->failed++;
      sb->Reset();
      return -1;
    }
    int n = sb->position();
    sb->Finalize();
    m->sum.Add(buf, n);
    return n;
  }

  // Shortest text must give back exactly v, in either style.
  void Shortest(double v, char* keep) {
    {
      Mode* m = &modes[kShortest];
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.ecma.ToShortest(v, &sb), &sb);
      if (n < 0) return;
      bool complete;
      double back = Parse(c.strict, buf, n, &complete);
      Tally(m, complete && SameValue(back, EcmaValue(v)));
      if (keep) std::memcpy(keep, buf, static_cast<size_t>(n) + 1);
      // The same text as 16-bit characters must read the same.
      Mode* u = &modes[kUtf16];
      uint16_t wide[kBuf];
      for (int i = 0; i < n; i++) wide[i] = static_cast<unsigned char>(buf[i]);
      int used = 0;
      double back16 = c.strict.StringToDouble(wide, n, &used);
      u->sum.Add(buf, used);
      Tally(u, used == n && SameValue(back16, back));
    }
    {
      Mode* m = &modes[kShortestOther];
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.other.ToShortest(v, &sb), &sb);
      if (n < 0) return;
      // with padding spaces for the lenient reader
      char padded[kBuf + 4];
      padded[0] = ' ';
      std::memcpy(padded + 1, buf, static_cast<size_t>(n));
      padded[n + 1] = ' ';
      bool complete;
      double back = Parse(c.lenient, padded, n + 2, &complete);
      Tally(m, complete && SameValue(back, v));
    }
    {
      Mode* m = &modes[kExponentialShortest];
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.ecma.ToExponential(v, -1, &sb), &sb);
      if (n < 0) return;
      bool complete;
      double back = Parse(c.strict, buf, n, &complete);
      Tally(m, complete && SameValue(back, EcmaValue(v)));
    }
  }

  // Fixed digit counts: 17 significant digits always read back exactly; fewer are
  // checked for being stable under a second print.
  void Precision(double v, Rng* rng, char* keep) {
    {
      Mode* m = &modes[kPrecision17];
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.other.ToPrecision(v, 17, &sb), &sb);
      if (n >= 0) {
        bool complete;
        double back = Parse(c.lenient, buf, n, &complete);
        Tally(m, complete && SameValue(back, v));
      }
    }
    {
      Mode* m = &modes[kPrecision];
      int digits = 1 + rng->Below(16);
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.ecma.ToPrecision(v, digits, &sb), &sb);
      if (n >= 0) {
        if (keep) std::memcpy(keep, buf, static_cast<size_t>(n) + 1);
        bool complete;
        double back = Parse(c.strict, buf, n, &complete);
        char first[kBuf];
        std::memcpy(first, buf, static_cast<size_t>(n) + 1);
        StringBuilder again(buf, kBuf);
        c.ecma.ToPrecision(back, digits, &again);
        bool same = complete && std::strcmp(again.Finalize(), first) == 0;
        if (same) m->stable++; else m->unstable++;
      }
    }
  }

  void Fixed(double v, Rng* rng, char* keep) {
    Mode* m = &modes[kFixed];
    int digits = rng->Below(24);  // past 20 the slower exact path takes over
    StringBuilder sb(buf, kBuf);
    int n = Finish(m, c.ecma.ToFixed(v, digits, &sb), &sb);
    if (n < 0) return;
    if (keep) std::memcpy(keep, buf, static_cast<size_t>(n) + 1);
    bool complete;
    double back = Parse(c.strict, buf, n, &complete);
    char first[kBuf];
    std::memcpy(first, buf, static_cast<size_t>(n) + 1);
    StringBuilder again(buf, kBuf);
    c.ecma.ToFixed(back, digits, &again);
    bool same = complete && std::strcmp(again.Finalize(), first) == 0;
    if (same) m->stable++; else m->unstable++;
  }

  void Exponential(double v, Rng* rng, char* keep) {
    Mode* m = &modes[kExponential];
    int digits = rng->Below(20);
    StringBuilder sb(buf, kBuf);
    int n = Finish(m, c.other.ToExponential(v, digits, &sb), &sb);
    if (n < 0) return;
    if (keep) std::memcpy(keep, buf, static_cast<size_t>(n) + 1);
    bool complete;
    double back = Parse(c.lenient, buf, n, &complete);
    if (digits >= 16) Tally(m, complete && SameValue(back, v));
  }

  // Long expansions: many digits, read back through the long-input path.
  void Long(double v, Rng* rng) {
    {
      Mode* m = &modes[kPrecisionLong];
      int digits = 18 + rng->Below(100);
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.ecma.ToPrecision(v, digits, &sb), &sb);
      if (n >= 0) {
        bool complete;
        double back = Parse(c.strict, buf, n, &complete);
        Tally(m, complete && SameValue(back, EcmaValue(v)));
      }
    }
    {
      Mode* m = &modes[kFixedLong];
      int digits = 30 + rng->Below(71);
      StringBuilder sb(buf, kBuf);
      int n = Finish(m, c.other.ToFixed(v, digits, &sb), &sb);
      if (n >= 0) {
        bool complete;
        double back = Parse(c.strict, buf, n, &complete);
        // exact once the digits reach the value's last binary place
        char first[kBuf];
        std::memcpy(first, buf, static_cast<size_t>(n) + 1);
        StringBuilder again(buf, kBuf);
        c.other.ToFixed(back, digits, &again);
        bool same = complete && std::strcmp(again.Finalize(), first) == 0;
        if (same) m->stable++; else m->unstable++;
      }
    }
  }

  // The raw digit generator in its three modes.
  void Digits(double v, Rng* rng) {
    if (!std::isfinite(v)) return;
    Mode* m = &modes[kDigits];
    char digits[kBuf];
    char tail[32];
    bool sign;
    int length, point;
    DoubleToStringConverter::DoubleToAscii(v, DoubleToStringConverter::SHORTEST, 0, digits,
                                           kBuf, &sign, &length, &point);
    m->sum.Add(digits, length);
    FormatSigned(point, tail);
    m->sum.Add(tail);
    int requested = 1 + rng->Below(30);
    DoubleToStringConverter::DoubleToAscii(v, DoubleToStringConverter::PRECISION, requested,
                                           digits, kBuf, &sign, &length, &point);
    m->sum.Add(digits, length);
    FormatSigned(point, tail);
    m->sum.Add(tail);
    if (std::fabs(v) < 1e20) {
      requested = rng->Below(20);
      DoubleToStringConverter::DoubleToAscii(v, DoubleToStringConverter::FIXED, requested,
                                             digits, kBuf, &sign, &length, &point);
      m->sum.Add(digits, length);
      FormatSigned(point, tail);
      m->sum.Add(tail);
    }
  }

  void Single(double v) {
    float f = static_cast<float>(v);
    Mode* m = &modes[kSingle];
    StringBuilder sb(buf, kBuf);
    int n = Finish(m, c.ecma.ToShortestSingle(f, &sb), &sb);
    if (n < 0) return;
    int used = 0;
    float back = c.strict.StringToFloat(buf, n, &used);
    Tally(m, used == n && SameFloat(back, static_cast<float>(EcmaValue(f))));
  }

  void Hex(double v) {
    // double-conversion 3.2.1 reads some hexadecimal floats of 2^1019 and more as
    // infinity; those are left out.
    if (std::fabs(v) >= 0x1p1000) return;
    Mode* m = &modes[kHex];
    int n = FormatHexFloat(v, buf);
    if (n < 0) return;
    m->sum.Add(buf, n);
    bool complete;
    double back = Parse(c.hex, buf, n, &complete);
    Tally(m, complete && SameValue(back, v));
  }

  // Integral values: octal and grouped decimal text.
  void Integral(double v) {
    if (!(v >= 1.0 && v < 18446744073709551616.0) || std::floor(v) != v) return;
    uint64_t u = static_cast<uint64_t>(v);
    {
      Mode* m = &modes[kOctal];
      buf[0] = '0';
      int n = 1 + FormatUnsigned(u, 8, buf + 1);
      m->sum.Add(buf, n);
      bool complete;
      double back = Parse(c.octal, buf, n, &complete);
      Tally(m, complete && SameValue(back, v));
    }
    {
      Mode* m = &modes[kGrouped];
      int n = FormatGrouped(u, buf);
      m->sum.Add(buf, n);
      bool complete;
      double back = Parse(c.grouped, buf, n, &complete);
      Tally(m, complete && SameValue(back, v));
    }
  }

  void All(double v, Rng* rng, bool sample, long index) {
    char s1[kBuf] = "", s2[kBuf] = "", s3[kBuf] = "", s4[kBuf] = "";
    Shortest(v, sample ? s1 : nullptr);
    Precision(v, rng, sample ? s2 : nullptr);
    Fixed(v, rng, sample ? s3 : nullptr);
    Exponential(v, rng, sample ? s4 : nullptr);
    if (rng->Below(8) == 0) Long(v, rng);
    Digits(v, rng);
    Single(v);
    Hex(v);
    Integral(v);
    if (sample) std::printf("#%ld %s | %s | %s | %s\n", index, s1, s2, s3, s4);
  }

  // A decimal literal "[-]MANTISSA[.FRACTION]e[-]EXP" read with the strict reader.
  double Decimal(Rng* rng) {
    char text[96];
    int k = 0;
    if (rng->Below(4) == 0) text[k++] = '-';
    int digits = 1 + rng->Below(rng->Below(5) == 0 ? 40 : 17);
    int point = rng->Below(digits + 1);
    for (int i = 0; i < digits; i++) {
      if (i == point && i) text[k++] = '.';
      text[k++] = static_cast<char>('0' + (i == 0 ? 1 + rng->Below(9) : rng->Below(10)));
    }
    if (rng->Below(3)) {
      text[k++] = rng->Below(2) ? 'e' : 'E';
      k += FormatSigned(rng->Below(80) - 40 + (rng->Below(16) == 0 ? rng->Below(600) - 300 : 0),
                        text + k);
    }
    text[k] = 0;
    Mode* m = &modes[kDecimalInput];
    m->sum.Add(text, k);
    bool complete;
    double v = Parse(c.strict, text, k, &complete);
    if (!complete) m->failed++;
    return v;
  }

  double Generate(Rng* rng) {
    switch (rng->Below(9)) {
      case 0:
      case 1:
        return FromBits(rng->Next());  // any bit pattern, NaN and Inf included
      case 2:
      case 3:
        return Decimal(rng);
      case 4: {  // integers of any magnitude up to 2^64
        int bits = 1 + rng->Below(64);
        uint64_t u = rng->Next() >> (64 - bits);
        return rng->Below(2) ? static_cast<double>(u) : -static_cast<double>(u);
      }
      case 5: {  // binary fractions
        double x = static_cast<double>(rng->Next() >> 40);
        return std::ldexp(x, -rng->Below(60));
      }
      case 6: {  // near powers of ten, subnormals, near the largest double
        int pick = rng->Below(3);
        if (pick == 0) {
          double p = 1.0;
          int e = rng->Below(40) - 20;
          for (int i = 0; i < (e < 0 ? -e : e); i++) p = e < 0 ? p / 10.0 : p * 10.0;
          return FromBits(Bits(p) + static_cast<uint64_t>(rng->Below(7)) - 3);
        }
        if (pick == 1) return FromBits(rng->Next() >> (12 + rng->Below(52)));
        return FromBits(0x7fefffffffffffffULL - (rng->Next() >> (12 + rng->Below(40))));
      }
      case 7:  // widened single-precision values
        return static_cast<double>(FloatFromBits(static_cast<uint32_t>(rng->Next() >> 32)));
      default:  // money amounts
        return static_cast<double>(static_cast<long>(rng->Next() % 10000000) - 2000000) / 100.0;
    }
  }
};

char* ReadFile(const char* path, long* len) {
  FILE* f = std::fopen(path, "rb");
  if (!f) {
    std::perror(path);
    std::exit(2);
  }
  std::fseek(f, 0, SEEK_END);
  long n = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  char* text = static_cast<char*>(std::malloc(static_cast<size_t>(n) + 1));
  if (!text || std::fread(text, 1, static_cast<size_t>(n), f) != static_cast<size_t>(n)) {
    std::perror(path);
    std::exit(2);
  }
  text[n] = 0;
  std::fclose(f);
  *len = n;
  return text;
}

// Every number token outside strings: read strictly, printed back three ways.
void Json(Driver* d, const char* text, long len) {
  Mode* m = &d->modes[kJson];
  long integers = 0;
  for (long i = 0; i < len;) {
    char ch = text[i];
    if (ch == '"') {
      for (i++; i < len && text[i] != '"'; i++)
        if (text[i] == '\\') i++;
      i++;
      continue;
    }
    if (ch != '-' && (ch < '0' || ch > '9')) {
      i++;
      continue;
    }
    long j = i + 1;
    while (j < len && text[j] && std::strchr("0123456789.eE+-", text[j])) j++;
    int n = static_cast<int>(j - i);
    bool complete;
    double v = d->Parse(d->c.strict, text + i, n, &complete);
    i = j;
    if (!complete) {
      m->failed++;
      continue;
    }
    if (std::floor(v) == v) integers++;
    StringBuilder sb(d->buf, kBuf);
    d->c.ecma.ToShortest(v, &sb);
    int k = sb.position();
    int used = 0;
    double back = d->c.strict.StringToDouble(sb.Finalize(), k, &used);
    m->sum.Add(d->buf);
    Tally(m, used == k && SameValue(back, EcmaValue(v)));
    StringBuilder p(d->buf, kBuf);
    d->c.other.ToPrecision(v, 6, &p);
    m->sum.Add(p.Finalize());
    StringBuilder f(d->buf, kBuf);
    if (std::fabs(v) < 1e21) {
      d->c.ecma.ToFixed(v, 2, &f);
      m->sum.Add(f.Finalize());
    }
  }
  std::printf("json: %ld numbers, %ld integral\n", m->exact + m->inexact + m->failed,
              integers);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE.json COUNT\n", argv[0]);
    return 2;
  }
  long len;
  char* text = ReadFile(argv[1], &len);
  long count = std::atol(argv[2]);
  static Driver d;
  Json(&d, text, len);
  std::free(text);
  Rng rng(0x6d6c676f64636e76ULL);
  long every = count / 40 > 0 ? count / 40 : 1;
  for (long i = 0; i < count; i++) {
    double v = d.Generate(&rng);
    d.All(v, &rng, i % every == 0, i);
  }
  Checksum total;
  long bad = 0;
  std::printf("%-21s %9s %9s %9s %9s %9s %9s %9s %16s\n", "mode", "strings", "bytes",
              "failed", "exact", "inexact", "stable", "unstable", "fnv1a");
  for (int i = 0; i < kModes; i++) {
    const Mode& m = d.modes[i];
    std::printf("%-21s %9ld %9ld %9ld %9ld %9ld %9ld %9ld %016llx\n", m.name, m.sum.strings,
                m.sum.bytes, m.failed, m.exact, m.inexact, m.stable, m.unstable,
                static_cast<unsigned long long>(m.sum.hash));
    char h[24];
    FormatUnsigned(m.sum.hash, 16, h);
    total.Add(h);
    bad += m.inexact;
  }
  std::printf("values %ld, round-trip failures %ld, total %016llx\n", count, bad,
              static_cast<unsigned long long>(total.hash));
  return 0;
}
"""

RE2_DRIVER = r"""// mlgo runtime_check driver for re2: a grep-like workload over a generated word text.
// Compiles a set of varied regular expressions (alternations, classes, captures, anchors,
// case-insensitive, repetition, named groups, Latin-1, longest match), then per line
// PartialMatch/FullMatch/Consume, over the whole text FindAndConsume and GlobalReplace,
// and RE2::Set matching per line and per word. Prints counts and FNV-1a checksums of
// what matched (never addresses). Usage: re2_run FILE
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "re2/re2.h"
#include "re2/set.h"
#include "re2/unicode_casefold.h"
#include "re2/unicode_groups.h"

// ---- re2's generated character tables. Debian's re2 source ships without
// perl_groups.cc, unicode_groups.cc and unicode_casefold.cc (its build generates them from
// system Unicode data), so this driver defines its own, covering only ASCII and Latin-1
// (U+0000-U+00FF), which is all the workload text uses: the Perl classes \d \s \w, the
// POSIX classes, a few general categories and the Latin script, and simple case folding
// of the Latin-1 letters that fold within Latin-1.
namespace re2 {

// ---- Perl classes (ASCII, as in Perl's /a semantics).
static const URange16 kDigit[] = {{'0', '9'}};
static const URange16 kSpace[] = {{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}};
static const URange16 kWord[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};

const UGroup perl_groups[] = {
    {"\\d", +1, kDigit, 1, nullptr, 0}, {"\\D", -1, kDigit, 1, nullptr, 0},
    {"\\s", +1, kSpace, 3, nullptr, 0}, {"\\S", -1, kSpace, 3, nullptr, 0},
    {"\\w", +1, kWord, 4, nullptr, 0},  {"\\W", -1, kWord, 4, nullptr, 0},
};
const int num_perl_groups = sizeof(perl_groups) / sizeof(perl_groups[0]);

// ---- POSIX bracket classes (ASCII).
static const URange16 kAlnum[] = {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}};
static const URange16 kAlpha[] = {{'A', 'Z'}, {'a', 'z'}};
static const URange16 kAscii[] = {{0x00, 0x7f}};
static const URange16 kBlank[] = {{'\t', '\t'}, {' ', ' '}};
static const URange16 kCntrl[] = {{0x00, 0x1f}, {0x7f, 0x7f}};
static const URange16 kGraph[] = {{'!', '~'}};
static const URange16 kLower[] = {{'a', 'z'}};
static const URange16 kPrint[] = {{' ', '~'}};
static const URange16 kPunct[] = {{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}};
static const URange16 kPSpace[] = {{'\t', '\r'}, {' ', ' '}};
static const URange16 kUpper[] = {{'A', 'Z'}};
static const URange16 kXdigit[] = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};

#define MLGO_POSIX(name, r)                                              \
  {"[:" name ":]", +1, r, sizeof(r) / sizeof(r[0]), nullptr, 0},        \
  {"[:^" name ":]", -1, r, sizeof(r) / sizeof(r[0]), nullptr, 0}

const UGroup posix_groups[] = {
    MLGO_POSIX("alnum", kAlnum), MLGO_POSIX("alpha", kAlpha), MLGO_POSIX("ascii", kAscii),
    MLGO_POSIX("blank", kBlank), MLGO_POSIX("cntrl", kCntrl), MLGO_POSIX("digit", kDigit),
    MLGO_POSIX("graph", kGraph), MLGO_POSIX("lower", kLower), MLGO_POSIX("print", kPrint),
    MLGO_POSIX("punct", kPunct), MLGO_POSIX("space", kPSpace), MLGO_POSIX("upper", kUpper),
    MLGO_POSIX("word", kWord),   MLGO_POSIX("xdigit", kXdigit),
};
#undef MLGO_POSIX
const int num_posix_groups = sizeof(posix_groups) / sizeof(posix_groups[0]);

// ---- Unicode general categories and scripts, restricted to U+0000-U+00FF.
// (The parser validates capture-group names against Lu Ll Lt Lm Lo Nl Mn Mc Nd Pc, so
// every one of those must be present, even where Latin-1 has no member.)
static const URange16 kLu[] = {{0x41, 0x5a}, {0xc0, 0xd6}, {0xd8, 0xde}};
static const URange16 kLl[] = {{0x61, 0x7a}, {0xb5, 0xb5}, {0xdf, 0xf6}, {0xf8, 0xff}};
static const URange16 kLo[] = {{0xaa, 0xaa}, {0xba, 0xba}};
static const URange16 kL[] = {{0x41, 0x5a}, {0x61, 0x7a}, {0xaa, 0xaa}, {0xb5, 0xb5},
                              {0xba, 0xba}, {0xc0, 0xd6}, {0xd8, 0xf6}, {0xf8, 0xff}};
static const URange16 kNd[] = {{0x30, 0x39}};
static const URange16 kNo[] = {{0xb2, 0xb3}, {0xb9, 0xb9}, {0xbc, 0xbe}};
static const URange16 kN[] = {{0x30, 0x39}, {0xb2, 0xb3}, {0xb9, 0xb9}, {0xbc, 0xbe}};
static const URange16 kPc[] = {{0x5f, 0x5f}};
static const URange16 kZs[] = {{0x20, 0x20}, {0xa0, 0xa0}};
static const URange16 kCc[] = {{0x00, 0x1f}, {0x7f, 0x9f}};
static const URange16 kLatin[] = {{0x41, 0x5a}, {0x61, 0x7a}, {0xaa, 0xaa}, {0xba, 0xba},
                                  {0xc0, 0xd6}, {0xd8, 0xf6}, {0xf8, 0xff}};

#define MLGO_GROUP(name, r) {name, +1, r, sizeof(r) / sizeof(r[0]), nullptr, 0}
#define MLGO_EMPTY(name) {name, +1, nullptr, 0, nullptr, 0}

const UGroup unicode_groups[] = {
    MLGO_GROUP("L", kL),   MLGO_GROUP("Lu", kLu), MLGO_GROUP("Ll", kLl),
    MLGO_EMPTY("Lt"),      MLGO_EMPTY("Lm"),      MLGO_GROUP("Lo", kLo),
    MLGO_GROUP("N", kN),   MLGO_GROUP("Nd", kNd), MLGO_EMPTY("Nl"),
    MLGO_GROUP("No", kNo), MLGO_EMPTY("Mn"),      MLGO_EMPTY("Mc"),
    MLGO_GROUP("Pc", kPc), MLGO_GROUP("Zs", kZs), MLGO_GROUP("Cc", kCc),
    MLGO_GROUP("Latin", kLatin),
};
#undef MLGO_GROUP
#undef MLGO_EMPTY
const int num_unicode_groups = sizeof(unicode_groups) / sizeof(unicode_groups[0]);

// ---- Case folding: each entry maps a range of runes to the next rune of its fold
// cycle (sorted by lo, as LookupCaseFold's binary search needs). Latin-1 letters whose
// other case lies outside Latin-1 (micro sign, sharp s, y with diaeresis) are left out,
// so every cycle here is closed: upper <-> lower.
const CaseFold unicode_casefold[] = {
    {0x41, 0x5a, 32},  {0x61, 0x7a, -32}, {0xc0, 0xd6, 32},
    {0xd8, 0xde, 32},  {0xe0, 0xf6, -32}, {0xf8, 0xfe, -32},
};
const int num_unicode_casefold = sizeof(unicode_casefold) / sizeof(unicode_casefold[0]);

// Upper case to lower case (used by the prefilter, outside ASCII only).
const CaseFold unicode_tolower[] = {
    {0x41, 0x5a, 32}, {0xc0, 0xd6, 32}, {0xd8, 0xde, 32},
};
const int num_unicode_tolower = sizeof(unicode_tolower) / sizeof(unicode_tolower[0]);

}  // namespace re2

// ---- The driver.
using re2::RE2;
using re2::StringPiece;

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void Add(const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; i++) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
  void Add(StringPiece s) { Add(s.data(), s.size()); Add("\x1f", 1); }
  void Add(const std::string& s) { Add(StringPiece(s)); }
  void Add(long v) { Add(&v, sizeof v); }
};

std::string ReadFile(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (!f) { std::perror(path); std::exit(2); }
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

void Check(const RE2& re) {
  if (!re.ok()) {
    std::fprintf(stderr, "bad pattern %s: %s\n", re.pattern().c_str(), re.error().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  const std::string text = ReadFile(argv[1]);
  std::vector<StringPiece> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.emplace_back(text.data() + start, end - start);
    start = end + 1;
  }
  std::printf("bytes %zu lines %zu\n", text.size(), lines.size());

  // 1. Per-line PartialMatch with a dozen patterns of different shapes.
  const char* partial[] = {
      R"(\b(?:qu|x|zh|kw)[a-z]*\b)",             // literal alternation prefix
      R"(\b[aeiou][a-z]*[aeiou]\b)",            // classes, word boundaries
      R"([^aeiou\s]{4,})",                      // negated class, counted repetition
      R"((?i)\b[JKQ][AEIOU][A-Z]{3})",          // case-insensitive
      R"(^\w{8,} )",                            // anchored start
      R"( (\w{2}) \w+ (\w{2})$)",               // anchored end with captures
      R"((?:[b-df-hj-np-tv-z][aeiou]){3})",     // repeated pair
      R"(\b(\w+) (\w+) (\w+)\b.*\b\w{9}\b)",    // captures before a long word
      R"((?:ab|bc|cd|de|ef|fg)+[xyz])",         // alternation under +
      R"(\b\w*(?:ing|ion|est|ly)\b)",           // suffix alternation
      R"([[:lower:]]{3}[[:blank:]][[:alpha:]]{9}\b)", // POSIX classes
      R"(\b(\w)\w{2,}(e|a)\b)",                 // captures of single letters
  };
  Fnv h1;
  for (const char* pat : partial) {
    RE2 re(pat);
    Check(re);
    int n = re.NumberOfCapturingGroups();
    long hits = 0;
    std::vector<StringPiece> cap(n > 0 ? n : 0);
    std::vector<RE2::Arg> args(cap.size());
    std::vector<const RE2::Arg*> argp(cap.size());
    for (size_t i = 0; i < cap.size(); i++) { args[i] = &cap[i]; argp[i] = &args[i]; }
    for (const StringPiece& line : lines) {
      if (RE2::PartialMatchN(line, re, argp.data(), n)) {
        hits++;
        for (const StringPiece& c : cap) h1.Add(c);
      }
    }
    h1.Add(hits);
    std::printf("partial %-40s %6ld\n", pat, hits);
  }
  std::printf("partial checksum %016llx\n", (unsigned long long)h1.h);

  // 2. Per-line FullMatch: first and last word, and lines of short words only.
  RE2 first_last(R"((\w+)(?: \w+)* (\w+))");
  RE2 short_words(R"((?:\w{2,5} )*\w{2,5})");
  RE2 some_long(R"((?:\w+ )*?(\w{9,})(?: \w+)*)");
  Check(first_last); Check(short_words); Check(some_long);
  Fnv h2;
  long fl = 0, sw = 0, sl = 0;
  for (const StringPiece& line : lines) {
    std::string a, b;
    if (RE2::FullMatch(line, first_last, &a, &b)) { fl++; h2.Add(a); h2.Add(b); }
    if (RE2::FullMatch(line, short_words)) { sw++; h2.Add(line); }
    StringPiece lw;
    if (RE2::FullMatch(line, some_long, &lw)) { sl++; h2.Add(lw); }
  }
  std::printf("fullmatch first_last %ld short_words %ld first_long %ld checksum %016llx\n",
              fl, sw, sl, (unsigned long long)h2.h);

  // 3. Consume: tokenize every line word by word (anchored matching).
  RE2 token(R"((\w+)\s*)");
  Check(token);
  std::map<std::string, long> freq;
  long words = 0;
  for (const StringPiece& line : lines) {
    StringPiece rest = line;
    StringPiece w;
    while (RE2::Consume(&rest, token, &w)) {
      freq[std::string(w)]++;
      words++;
    }
  }
  std::vector<std::pair<long, std::string>> top;
  for (const auto& kv : freq) top.emplace_back(-kv.second, kv.first);
  std::sort(top.begin(), top.end());
  std::printf("consume words %ld distinct %zu top:", words, freq.size());
  for (size_t i = 0; i < 8 && i < top.size(); i++)
    std::printf(" %s=%ld", top[i].second.c_str(), -top[i].first);
  std::printf("\n");

  // 4. A literal alternation of 80 frequent words (ranks 10-89, escaped with QuoteMeta)
  // counted with FindAndConsume: with a capture; case-insensitive with a capture; and
  // longest-match in Latin-1 without one (the position after each match is hashed).
  std::string alt = "\\b(";
  for (size_t i = 10; i < 90 && i < top.size(); i++) {
    if (i > 10) alt += "|";
    alt += RE2::QuoteMeta(top[i].second);
  }
  alt += ")\\b";
  RE2::Options ci;
  ci.set_case_sensitive(false);
  RE2::Options longest_l1;
  longest_l1.set_longest_match(true);
  longest_l1.set_encoding(RE2::Options::EncodingLatin1);
  RE2 alt_re(alt), alt_ci(alt, ci), alt_long(alt, longest_l1);
  Check(alt_re); Check(alt_ci); Check(alt_long);
  Fnv h4;
  for (const RE2* re : {&alt_re, &alt_ci, &alt_long}) {
    StringPiece in(text);
    StringPiece w;
    long n = 0;
    if (re == &alt_long) {
      while (RE2::FindAndConsume(&in, *re)) { n++; h4.Add((long)in.size()); }
    } else {
      while (RE2::FindAndConsume(&in, *re, &w)) { n++; h4.Add(w); }
    }
    std::printf("alternation of 80 words: %ld hits (program size %d)\n", n,
                re->ProgramSize());
  }
  std::printf("alternation checksum %016llx\n", (unsigned long long)h4.h);

  // 5. FindAndConsume over the whole text with captures, typed args, named groups.
  RE2 pairs(R"((?P<left>\w*[xz]\w*) (?P<right>\w+))");
  RE2 ends(R"((\w+) (\w+)\n)");
  RE2 lengths(R"(\b([b-df-hj-np-tv-z]{2})([a-z]{3,}))");
  Check(pairs); Check(ends); Check(lengths);
  Fnv h5;
  for (const auto& kv : pairs.NamedCapturingGroups()) { h5.Add(kv.first); h5.Add((long)kv.second); }
  long np = 0, ne = 0, nl = 0, total_len = 0;
  {
    StringPiece in(text), l, r;
    while (RE2::FindAndConsume(&in, pairs, &l, &r)) { np++; h5.Add(l); h5.Add(r); }
  }
  {
    StringPiece in(text);
    std::string a, b;
    while (RE2::FindAndConsume(&in, ends, &a, &b)) { ne++; h5.Add(b); }
  }
  {
    StringPiece in(text), head;
    std::string tail;
    while (RE2::FindAndConsume(&in, lengths, &head, &tail)) {
      nl++;
      total_len += (long)tail.size();
      h5.Add(head);
    }
  }
  std::printf("find pairs %ld line_ends %ld consonant_heads %ld tail_len %ld checksum %016llx\n",
              np, ne, nl, total_len, (unsigned long long)h5.h);

  // 6. Unanchored matching with submatches over long spans (the NFA's territory): the
  // text before and after the first q-word of each 16 KB chunk.
  RE2 around(R"((?s)(.*?)\b(q\w*)\b(.*))");
  Check(around);
  Fnv h6;
  long found = 0;
  for (size_t off = 0; off + 16384 <= text.size() && off < 4 * 16384; off += 16384) {
    StringPiece chunk(text.data() + off, 16384), pre, q, post;
    if (RE2::PartialMatch(chunk, around, &pre, &q, &post)) {
      found++;
      h6.Add((long)pre.size()); h6.Add(q); h6.Add((long)post.size());
    }
  }
  std::printf("chunks with a q-word %ld checksum %016llx\n", found,
              (unsigned long long)h6.h);

  // 7. GlobalReplace, Replace and Extract on copies of the text.
  std::string t1 = text, t2 = text, t3 = text;
  RE2 swap(R"(\b([a-h])(\w*)(\w)\b)");
  RE2 vowels(R"([aeiou]+)");
  RE2 qz(R"((?i)\b([qz]\w*))");
  Check(swap); Check(vowels); Check(qz);
  int r1 = RE2::GlobalReplace(&t1, swap, "\\3\\2\\1");
  int r2 = RE2::GlobalReplace(&t2, vowels, "_");
  int r3 = RE2::GlobalReplace(&t3, qz, "<\\1>");
  Fnv h7;
  h7.Add(t1); h7.Add(t2); h7.Add(t3);
  long replaced = 0, extracted = 0;
  RE2 first_two(R"(^(\w+) (\w+))");
  Check(first_two);
  for (size_t i = 0; i < lines.size(); i += 4) {
    std::string s(lines[i]), out;
    if (RE2::Replace(&s, first_two, "\\2 \\1")) { replaced++; h7.Add(s); }
    if (RE2::Extract(lines[i], pairs, "\\2-\\1", &out)) { extracted++; h7.Add(out); }
  }
  std::printf("replace swap %d vowels %d qz %d lines %ld extract %ld sizes %zu %zu %zu "
              "checksum %016llx\n", r1, r2, r3, replaced, extracted, t1.size(), t2.size(),
              t3.size(), (unsigned long long)h7.h);

  // 8. RE2::Set: which of a dozen patterns each line contains; which shapes each word has.
  const char* line_pats[] = {
      R"(\bq)", R"(x\w*y)", R"(\b\w{9}\b)", R"(^\w{2} )", R"( \w{2}$)",
      R"((?i)ZZ|JJ|VV)", R"((?:\bt\w* ){2})",
      R"([aeiou]{3})", R"([^aeiou ]{5})", R"(\b(?:a|e|i|o|u)\w*\b \b(?:a|e|i|o|u))",
      R"(ab.*ba)", R"(\b(\w)\w*\b\s+\b[xyz])"};
  RE2::Set line_set(RE2::DefaultOptions, RE2::UNANCHORED);
  for (const char* p : line_pats) {
    std::string err;
    if (line_set.Add(p, &err) < 0) { std::fprintf(stderr, "set: %s\n", err.c_str()); return 1; }
  }
  if (!line_set.Compile()) { std::fprintf(stderr, "set compile failed\n"); return 1; }
  const char* word_pats[] = {R"([a-e]\w*)", R"(\w*[aeiou])", R"(\w{1,3})", R"(\w{8,})",
                             R"((?:[^aeiou][aeiou])+)", R"(\w*(?:ss|ll|ee|oo)\w*)"};
  RE2::Set word_set(RE2::DefaultOptions, RE2::ANCHOR_BOTH);
  int word_pat_n = 0;
  for (const char* p : word_pats) {
    std::string err;
    if (word_set.Add(p, &err) < 0) { std::fprintf(stderr, "set: %s\n", err.c_str()); return 1; }
    word_pat_n++;
  }
  if (!word_set.Compile()) { std::fprintf(stderr, "set compile failed\n"); return 1; }
  std::vector<long> line_counts(sizeof line_pats / sizeof *line_pats);
  std::vector<long> word_counts(word_pat_n);
  Fnv h8;
  std::vector<int> v;
  for (const StringPiece& line : lines) {
    if (line_set.Match(line, &v)) {
      std::sort(v.begin(), v.end());
      for (int i : v) { line_counts[i]++; h8.Add((long)i); }
    }
    h8.Add(-1L);
  }
  for (const auto& kv : freq) {
    for (long rep = 0; rep < 2; rep++) {
      if (word_set.Match(kv.first, &v)) {
        std::sort(v.begin(), v.end());
        for (int i : v) word_counts[i] += kv.second;
      }
    }
  }
  std::printf("set lines:");
  for (long c : line_counts) std::printf(" %ld", c);
  std::printf("\nset words (%d patterns):", word_pat_n);
  for (long c : word_counts) std::printf(" %ld", c);
  std::printf("\nset checksum %016llx\n", (unsigned long long)h8.h);

  Fnv all;
  for (uint64_t x : {h1.h, h2.h, h4.h, h5.h, h6.h, h7.h, h8.h}) all.Add(&x, sizeof x);
  std::printf("checksum %016llx\n", (unsigned long long)all.h);
  return 0;
}
"""


TINYXML_DRIVER = r"""// mlgo runtime_check driver for TinyXML (2.6, STL build as in Debian). A product catalog
// goes through ROUNDS rounds: it is parsed (from the file, then from the previous round's
// text), walked by a visitor and by hand, queried (stock, prices, tags, handles), edited
// (attributes set and removed, items removed, cloned and moved, children added, replaced
// and dropped, text rewritten), printed with TiXmlPrinter (indented, or as a stream),
// parsed again and compared node by node with the edited tree; some single items also go
// through operator<< and operator>> (the stream parser). A few broken snippets exercise
// the error reporting. Counts and FNV-1a checksums of the printed texts are written; no
// addresses. Usage: tinyxml_run FILE.xml ROUNDS
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tinyxml.h"

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ULL;
  void Bytes(const char* s, size_t n) {
    for (size_t i = 0; i < n; i++) {
      h ^= static_cast<unsigned char>(s[i]);
      h *= 1099511628211ULL;
    }
  }
  void Str(const char* s) {
    Bytes(s, std::strlen(s));
    h ^= 0xff;
    h *= 1099511628211ULL;
  }
  void Str(const std::string& s) {
    Bytes(s.data(), s.size());
    h ^= 0xff;
    h *= 1099511628211ULL;
  }
  void Num(long long v) {
    char buf[32];
    int n = std::snprintf(buf, sizeof buf, "%lld", v);
    Bytes(buf, static_cast<size_t>(n));
    h ^= 0xfe;
    h *= 1099511628211ULL;
  }
};

// Counts every kind of node, hashes names, attribute pairs and texts in document order.
class Census : public TiXmlVisitor {
 public:
  long elements = 0, attributes = 0, texts = 0, cdata = 0, comments = 0, unknowns = 0,
       decls = 0, text_bytes = 0;
  int depth = 0, max_depth = 0;
  Fnv fnv;

  bool VisitEnter(const TiXmlDocument&) override { return true; }
  bool VisitEnter(const TiXmlElement& e, const TiXmlAttribute* a) override {
    elements++;
    if (++depth > max_depth) max_depth = depth;
    fnv.Str(e.ValueStr());
    for (; a; a = a->Next()) {
      attributes++;
      fnv.Str(a->Name());
      fnv.Str(a->ValueStr());
    }
    return true;
  }
  bool VisitExit(const TiXmlElement&) override {
    depth--;
    fnv.Num(-1);
    return true;
  }
  bool Visit(const TiXmlDeclaration& d) override {
    decls++;
    fnv.Str(d.Version());
    fnv.Str(d.Encoding());
    return true;
  }
  bool Visit(const TiXmlText& t) override {
    if (t.CDATA()) cdata++; else texts++;
    text_bytes += static_cast<long>(t.ValueStr().size());
    fnv.Str(t.ValueStr());
    return true;
  }
  bool Visit(const TiXmlComment& c) override {
    comments++;
    fnv.Str(c.ValueStr());
    return true;
  }
  bool Visit(const TiXmlUnknown& u) override {
    unknowns++;
    fnv.Str(u.ValueStr());
    return true;
  }
  void Print(const char* what) const {
    std::printf("  %s: elements %ld attributes %ld texts %ld cdata %ld comments %ld "
                "unknowns %ld decls %ld text-bytes %ld depth %d hash %016llx\n",
                what, elements, attributes, texts, cdata, comments, unknowns, decls,
                text_bytes, max_depth, static_cast<unsigned long long>(fnv.h));
  }
};

// The same figures gathered without the visitor, by following child and sibling links.
void Walk(const TiXmlNode* n, long* nodes, long* attrs, long* chars) {
  for (const TiXmlNode* c = n->FirstChild(); c; c = c->NextSibling()) {
    (*nodes)++;
    *chars += static_cast<long>(c->ValueStr().size());
    if (const TiXmlElement* e = c->ToElement()) {
      for (const TiXmlAttribute* a = e->FirstAttribute(); a; a = a->Next()) (*attrs)++;
      Walk(c, nodes, attrs, chars);
    }
  }
}

// Node-by-node comparison; counts the nodes visited and the first few differences.
long Compare(const TiXmlNode* a, const TiXmlNode* b, long* visited) {
  (*visited)++;
  if (a->Type() != b->Type()) return 1;
  // A document's value is the name of the file it came from; not part of the content.
  if (!a->ToDocument() && a->ValueStr() != b->ValueStr()) return 1;
  if (a->ToText() && a->ToText()->CDATA() != b->ToText()->CDATA()) return 1;
  if (const TiXmlElement* ea = a->ToElement()) {
    const TiXmlAttribute* x = ea->FirstAttribute();
    const TiXmlAttribute* y = b->ToElement()->FirstAttribute();
    for (; x && y; x = x->Next(), y = y->Next())
      if (std::strcmp(x->Name(), y->Name()) != 0 || x->ValueStr() != y->ValueStr()) return 1;
    if (x || y) return 1;
  }
  long diffs = 0;
  const TiXmlNode* ca = a->FirstChild();
  const TiXmlNode* cb = b->FirstChild();
  for (; ca && cb; ca = ca->NextSibling(), cb = cb->NextSibling()) {
    diffs += Compare(ca, cb, visited);
    if (diffs > 3) return diffs;
  }
  if (ca || cb) diffs++;
  return diffs;
}

int IdNumber(const TiXmlElement* item) {
  const char* id = item->Attribute("id");
  return id && id[0] ? std::atoi(id + 1) : -1;
}

long long Cents(const TiXmlElement* price) {
  const char* t = price ? price->GetText() : nullptr;
  return t ? std::llround(std::atof(t) * 100.0) : 0;
}

// Appends the text of every text node under n (mixed content flattened).
void InnerText(const TiXmlNode* n, std::string* out) {
  for (const TiXmlNode* c = n->FirstChild(); c; c = c->NextSibling()) {
    if (const TiXmlText* t = c->ToText()) {
      if (!out->empty()) out->push_back(' ');
      out->append(t->ValueStr());
    } else if (c->ToElement()) {
      InnerText(c, out);
    }
  }
}

struct Query {
  long categories = 0, items = 0, stock = 0, tags = 0, blue = 0, bold = 0, featured = 0,
       notes = 0, words = 0;
  long long value_cents = 0, price_cents = 0;
  Fnv names;
};

Query Survey(TiXmlDocument& doc) {
  Query q;
  TiXmlElement* root = doc.RootElement();
  for (TiXmlElement* cat = root->FirstChildElement("category"); cat;
       cat = cat->NextSiblingElement("category")) {
    q.categories++;
    for (TiXmlElement* item = cat->FirstChildElement("item"); item;
         item = item->NextSiblingElement("item")) {
      q.items++;
      int stock = 0;
      if (item->QueryIntAttribute("stock", &stock) == TIXML_SUCCESS) q.stock += stock;
      long long cents = Cents(item->FirstChildElement("price"));
      q.price_cents += cents;
      q.value_cents += cents * stock;
      std::string featured;
      if (item->QueryValueAttribute(std::string("x:featured"), &featured) == TIXML_SUCCESS &&
          featured == "yes")
        q.featured++;
      if (const TiXmlElement* name = item->FirstChildElement("name"))
        if (name->GetText()) q.names.Str(name->GetText());
      if (TiXmlElement* tags = item->FirstChildElement("tags"))
        for (TiXmlElement* t = tags->FirstChildElement(); t; t = t->NextSiblingElement()) {
          q.tags++;
          if (t->GetText() && std::strcmp(t->GetText(), "blue") == 0) q.blue++;
        }
      if (const TiXmlElement* d = item->FirstChildElement("description")) {
        for (const TiXmlElement* b = d->FirstChildElement("b"); b;
             b = b->NextSiblingElement("b"))
          q.bold++;
        std::string text;
        InnerText(d, &text);
        bool in_word = false;
        for (char ch : text) {
          bool w = ch != ' ';
          if (w && !in_word) q.words++;
          in_word = w;
        }
      }
      if (item->FirstChild("notes")) q.notes++;
    }
  }
  return q;
}

void PrintQuery(const Query& q) {
  std::printf("  query: categories %ld items %ld stock %ld price %lld.%02lld value %lld.%02lld "
              "tags %ld blue %ld bold %ld featured %ld notes %ld words %ld names %016llx\n",
              q.categories, q.items, q.stock, q.price_cents / 100, q.price_cents % 100,
              q.value_cents / 100, q.value_cents % 100, q.tags, q.blue, q.bold, q.featured,
              q.notes, q.words, static_cast<unsigned long long>(q.names.h));
}

// Handle chains into the tree at a spread of positions.
void Probe(TiXmlDocument& doc, Fnv* fnv) {
  TiXmlHandle h(&doc);
  TiXmlHandle catalog = h.FirstChildElement("catalog");
  long found = 0, missing = 0;
  for (int c = 0; c < 140; c += 2) {
    for (int i = 0; i < 24; i += 3) {
      TiXmlElement* price =
          catalog.ChildElement("category", c).ChildElement("item", i).FirstChild("price")
              .ToElement();
      if (!price) {
        missing++;
        continue;
      }
      found++;
      fnv->Num(Cents(price));
      const char* cur = price->Attribute("currency");
      fnv->Str(cur ? cur : "-");
    }
  }
  std::printf("  handles: found %ld missing %ld hash %016llx\n", found, missing,
              static_cast<unsigned long long>(fnv->h));
}

struct Edits {
  long removed = 0, cloned = 0, attrs_set = 0, attrs_removed = 0, added = 0, dropped = 0,
       replaced = 0, renamed = 0, moved = 0;
};

// One round of edits; what changes depends on the round number.
Edits Edit(TiXmlDocument& doc, int round) {
  Edits e;
  TiXmlElement* root = doc.RootElement();
  root->SetAttribute("round", round);
  char buf[64];
  std::snprintf(buf, sizeof buf, "r%d", round);
  TiXmlElement fresh("category");
  fresh.SetAttribute("id", buf);
  fresh.SetAttribute(std::string("name"), std::string("copies of round ") + buf);
  TiXmlElement* extra = root->InsertEndChild(fresh)->ToElement();
  int ordinal = 0;
  for (TiXmlElement* cat = root->FirstChildElement("category"); cat;) {
    TiXmlElement* next_cat = cat->NextSiblingElement("category");
    if (cat == extra) break;
    if (round == 0) {
      TiXmlComment note;
      std::snprintf(buf, sizeof buf, " category %d ", ordinal);
      note.SetValue(buf);
      root->InsertBeforeChild(cat, note);
      e.added++;
    }
    for (TiXmlElement* item = cat->FirstChildElement("item"); item;) {
      TiXmlElement* next = item->NextSiblingElement("item");
      int id = IdNumber(item);
      int stock = 0;
      item->QueryIntAttribute("stock", &stock);
      long long cents = Cents(item->FirstChildElement("price"));
      if ((round == 0 && stock == 0) || (round > 0 && (id * 7 + round) % 31 == 0)) {
        cat->RemoveChild(item);
        e.removed++;
        item = next;
        continue;
      }
      if ((id + round) % 17 == 0) {
        // A copy goes to this round's category under a new id; the original moves to
        // the front of its own category.
        TiXmlNode* copy = item->Clone();
        std::snprintf(buf, sizeof buf, "i%d", id + 100000 * (round + 1));
        copy->ToElement()->SetAttribute("id", buf);
        extra->LinkEndChild(copy);
        e.cloned++;
        if (cat->FirstChild() != item) {
          TiXmlNode* moved = cat->InsertBeforeChild(cat->FirstChild(), *item);
          cat->RemoveChild(item);
          item = moved->ToElement();
          e.moved++;
        }
      }
      stock = (stock * 5 + round + 1) % 100;
      item->SetAttribute("stock", stock);
      item->SetAttribute("value", static_cast<int>((cents * stock) / 100));
      if (id % 3 == round % 3) {
        item->SetDoubleAttribute("ratio", cents ? stock * 100.0 / cents : 0.0);
        e.attrs_set++;
      } else if (item->Attribute("ratio")) {
        item->RemoveAttribute("ratio");
        e.attrs_removed++;
      }
      e.attrs_set += 2;
      if ((id + round) % 4 == 0 && item->Attribute("sku")) {
        item->RemoveAttribute("sku");
        e.attrs_removed++;
      }
      if (round == 1 && item->Attribute("x:featured")) {
        item->RemoveAttribute(std::string("x:featured"));
        e.attrs_removed++;
      }
      // A history entry per round; the entries of earlier rounds are dropped.
      TiXmlElement* hist = new TiXmlElement("history");
      hist->SetAttribute("round", round);
      hist->SetAttribute("stock", stock);
      std::snprintf(buf, sizeof buf, "round %d stock %d & value < %lld", round, stock,
                    (cents * stock) / 100);
      hist->LinkEndChild(new TiXmlText(buf));
      item->LinkEndChild(hist);
      e.added++;
      for (TiXmlElement* old = item->FirstChildElement("history"); old;) {
        TiXmlElement* nh = old->NextSiblingElement("history");
        int r = -1;
        old->QueryIntAttribute("round", &r);
        if (r >= 0 && r < round) {
          item->RemoveChild(old);
          e.dropped++;
        }
        old = nh;
      }
      // Tag texts: one colour renamed per round; CDATA notes become plain text in
      // round 1 (escaped on output from then on).
      if (TiXmlElement* tags = item->FirstChildElement("tags")) {
        static const char* kFrom[] = {"blue", "navy", "red", "crimson"};
        static const char* kTo[] = {"navy", "blue", "crimson", "red"};
        for (TiXmlElement* t = tags->FirstChildElement("tag"); t;
             t = t->NextSiblingElement("tag")) {
          TiXmlText* txt = t->FirstChild() ? t->FirstChild()->ToText() : nullptr;
          if (txt && txt->ValueStr() == kFrom[round % 4]) {
            txt->SetValue(kTo[round % 4]);
            e.renamed++;
          }
        }
        if ((id + round) % 11 == 0) {
          TiXmlElement tag("tag");
          tag.LinkEndChild(new TiXmlText(round % 2 ? "sale" : "new"));
          tags->InsertAfterChild(tags->FirstChild(), tag);
          e.added++;
        }
      }
      if (round == 1)
        if (TiXmlElement* notes = item->FirstChildElement("notes"))
          if (TiXmlNode* c = notes->FirstChild())
            if (c->ToText() && c->ToText()->CDATA()) {
              TiXmlText plain(c->ValueStr());
              notes->ReplaceChild(c, plain);
              e.replaced++;
            }
      // Comments and processing instructions inside items go in round 1.
      if (round == 1)
        for (TiXmlNode* c = item->FirstChild(); c;) {
          TiXmlNode* nc = c->NextSibling();
          if (c->ToComment() || c->ToUnknown()) {
            item->RemoveChild(c);
            e.dropped++;
          }
          c = nc;
        }
      if (round == 1 && id % 2 == 0)
        if (TiXmlElement* name = item->FirstChildElement("name")) {
          name->SetValue("title");
          e.renamed++;
        }
      item = next;
    }
    ordinal++;
    cat = next_cat;
  }
  std::printf("  edits: removed %ld cloned %ld moved %ld attrs set %ld removed %ld added %ld "
              "dropped %ld replaced %ld renamed %ld\n",
              e.removed, e.cloned, e.moved, e.attrs_set, e.attrs_removed, e.added, e.dropped,
              e.replaced, e.renamed);
  return e;
}

// Every 16th item printed on its own and read back through operator>> (the stream
// parser), then compared with the original.
long StreamItems(const TiXmlDocument& doc, int round) {
  long items = 0, bytes = 0, visited = 0, diffs = 0;
  int k = round;
  for (const TiXmlElement* cat = doc.RootElement()->FirstChildElement("category"); cat;
       cat = cat->NextSiblingElement("category"))
    for (const TiXmlElement* item = cat->FirstChildElement("item"); item;
         item = item->NextSiblingElement("item")) {
      if (k++ % 16 != 0) continue;
      std::string text;
      text << *item;
      std::istringstream in(text);
      TiXmlElement back("");
      in >> back;
      items++;
      bytes += static_cast<long>(text.size());
      diffs += Compare(item, &back, &visited);
    }
  std::printf("  streamed: items %ld bytes %ld visited %ld diffs %ld\n", items, bytes, visited,
              diffs);
  return diffs;
}

std::string Print(const TiXmlDocument& doc, int round) {
  if (round % 2 == 1) {
    std::string out;
    out << doc;  // stream printing: no indentation, no line breaks
    return out;
  }
  TiXmlPrinter printer;
  printer.SetIndent(round % 4 == 0 ? "  " : "\t");
  printer.SetLineBreak(round % 4 == 0 ? "\n" : "\r\n");
  doc.Accept(&printer);
  return std::string(printer.CStr(), printer.Size());
}

bool Check(const TiXmlDocument& doc, const char* what) {
  if (!doc.Error()) return true;
  std::printf("%s: error %d (%s) at %d:%d\n", what, doc.ErrorId(), doc.ErrorDesc(),
              doc.ErrorRow(), doc.ErrorCol());
  return false;
}

void Errors() {
  static const char* kBroken[] = {
      "<a><b></a>", "<a x='1' x='2'/>", "<a>text", "<!-- open", "<a x=1/>",
      "", "<a><![CDATA[never closed</a>", "<?xml version='1.0'?><a>&bogus;</a>",
      "<a>\n<b>\n</c></a>", "<a b='&#x;'/>", "<root><x y=\"1\"></x><x y=\"2\"/></root>"};
  Fnv fnv;
  int ok = 0;
  for (const char* s : kBroken) {
    TiXmlDocument d;
    d.Parse(s);
    if (!d.Error()) {
      ok++;
      std::string out;
      out << d;
      fnv.Str(out);
      continue;
    }
    fnv.Num(d.ErrorId());
    fnv.Str(d.ErrorDesc());
    fnv.Num(d.ErrorRow());
    fnv.Num(d.ErrorCol());
  }
  std::printf("broken snippets: %zu parsed %d hash %016llx\n",
              sizeof kBroken / sizeof kBroken[0], ok, static_cast<unsigned long long>(fnv.h));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE.xml ROUNDS\n", argv[0]);
    return 2;
  }
  int rounds = std::atoi(argv[2]);
  TiXmlDocument doc;
  if (!doc.LoadFile(argv[1], TIXML_ENCODING_UTF8) || !Check(doc, "load")) return 1;
  Fnv all;
  long total_diffs = 0;
  for (int round = 0; round < rounds; round++) {
    std::printf("round %d\n", round);
    Census before;
    doc.Accept(&before);
    before.Print("parsed");
    long nodes = 0, attrs = 0, chars = 0;
    Walk(&doc, &nodes, &attrs, &chars);
    std::printf("  walk: nodes %ld attributes %ld value-bytes %ld\n", nodes, attrs, chars);
    PrintQuery(Survey(doc));
    Fnv probe;
    Probe(doc, &probe);
    Edit(doc, round);
    total_diffs += StreamItems(doc, round);
    Census after;
    doc.Accept(&after);
    after.Print("edited");
    // A copy of the whole document must match it node for node.
    TiXmlDocument copy(doc);
    long visited = 0;
    long diffs = Compare(&doc, &copy, &visited);
    std::printf("  copy: visited %ld diffs %ld\n", visited, diffs);
    total_diffs += diffs;
    std::string text = Print(doc, round);
    Fnv tf;
    tf.Str(text);
    all.Str(text);
    std::printf("  printed: %zu bytes hash %016llx\n", text.size(),
                static_cast<unsigned long long>(tf.h));
    TiXmlDocument again;
    again.Parse(text.c_str(), nullptr, TIXML_ENCODING_UTF8);
    if (!Check(again, "reparse")) return 1;
    visited = 0;
    diffs = Compare(&doc, &again, &visited);
    std::string text2 = Print(again, round);
    bool same = text2 == text;
    std::printf("  reparsed: visited %ld diffs %ld text %s\n", visited, diffs,
                same ? "identical" : "DIFFERENT");
    total_diffs += diffs + (same ? 0 : 1);
    // The next round starts from the reparsed document.
    doc = again;
  }
  Errors();
  std::printf("rounds %d differences %ld all-text hash %016llx\n", rounds, total_diffs,
              static_cast<unsigned long long>(all.h));
  return total_diffs == 0 ? 0 : 3;
}
"""


PNG_DRIVER = r"""/* mlgo runtime_check driver for libpng: draws a set of deterministic test images in
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
"""
