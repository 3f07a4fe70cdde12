/* mlgo runtime_check driver for giflib: renders a deterministic animation in memory
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
