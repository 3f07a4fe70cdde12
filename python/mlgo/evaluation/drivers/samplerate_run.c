/* mlgo runtime_check driver for libsamplerate: generates deterministic signals (sine
   sweeps up to near Nyquist, tones, LCG noise; 1, 2, 3, 4 and 6 channels) and converts
   them with every converter (sinc best/medium/fastest, zero-order hold, linear) at
   several ratios: the simple API, the streaming src_process API in random chunk sizes
   (constant and varying ratios), the callback API, and cloned and reset states. Checks
   its own results: streaming and callback output against the simple API's, a clone and
   a reset state against the original, pure tones against the analytic sine at the new
   rate, a band-limited signal converted there and back against itself, and the float to
   int16/int32 conversions. Prints per conversion the frame count, the sum of the int16
   samples and their FNV-1a hash, then one hash of everything; exits 1 on a mismatch.
   Usage: samplerate_run SEED FRAMES */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "samplerate.h"

#define FNV_START 1469598103934665603ULL
static unsigned long long fnv_bytes(unsigned long long h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ULL; }
  return h;
}

static unsigned long long g_total = FNV_START;
static int g_failures = 0;

static void die(const char *what, int err) {
  fprintf(stderr, "samplerate_run: %s: %s\n", what, err ? src_strerror(err) : "failed");
  exit(1);
}

static void fail(const char *what, double value) {
  printf("FAIL %s (%.6g)\n", what, value);
  g_failures++;
}

/* ---- a small deterministic generator ---- */
typedef struct { unsigned long long s; } Rng;
static unsigned int rng_next(Rng *r) {
  r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (unsigned int)(r->s >> 33);
}
static double rng_unit(Rng *r) { return rng_next(r) / 2147483648.0 * 2.0 - 1.0; } /* [-1,1) */

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of memory", 0);
  return p;
}

/* ---- signals ---- */
enum { SIG_BROAD, SIG_TONES };

/* frames x ch interleaved. SIG_BROAD: a sweep from near DC to near Nyquist, a tone and
   noise, different per channel. SIG_TONES: three tones below 0.12 cycles per sample. */
static float *make_signal(long frames, int ch, unsigned seed, int kind) {
  float *x = xmalloc(sizeof(float) * (size_t)(frames * ch));
  Rng r = {0x5eed0000ULL + seed * 977ULL + (unsigned)kind * 31ULL + (unsigned)ch};
  for (int c = 0; c < ch; c++) {
    double f0 = 0.001 + 0.002 * (rng_next(&r) % 100) / 100.0;
    double f1 = 0.40 + 0.08 * (rng_next(&r) % 100) / 100.0;
    double ft[3], amp[3], ph[3];
    for (int k = 0; k < 3; k++) {
      ft[k] = 0.004 + 0.11 * (rng_next(&r) % 1000) / 1000.0;
      amp[k] = 0.1 + 0.18 * (rng_next(&r) % 100) / 100.0;
      ph[k] = 6.283185307179586 * (rng_next(&r) % 1000) / 1000.0;
    }
    double phase = 0.0;
    for (long i = 0; i < frames; i++) {
      double v;
      if (kind == SIG_BROAD) {
        double f = f0 + (f1 - f0) * (double)i / (double)frames;
        phase += 6.283185307179586 * f;
        if (phase > 6.283185307179586) phase -= 6.283185307179586;
        v = 0.45 * sin(phase) + 0.25 * sin(6.283185307179586 * ft[0] * i + ph[0])
            + 0.08 * rng_unit(&r);
      } else {
        v = 0.0;
        for (int k = 0; k < 3; k++) v += amp[k] * sin(6.283185307179586 * ft[k] * i + ph[k]);
      }
      x[i * ch + c] = (float)v;
    }
  }
  return x;
}

/* ---- digests ---- */
typedef struct { long frames; long long sum; unsigned long long hash; } Digest;

static Digest digest(const float *x, long frames, int ch) {
  Digest d = {frames, 0, FNV_START};
  short tmp[4096];
  unsigned char bytes[8192];
  long n = frames * ch;
  for (long i = 0; i < n; i += 4096) {
    int len = (int)(n - i < 4096 ? n - i : 4096);
    src_float_to_short_array(x + i, tmp, len);
    for (int k = 0; k < len; k++) {
      d.sum += lrintf(x[i + k] * 32768.0f);
      bytes[2 * k] = (unsigned char)(tmp[k] & 0xff);
      bytes[2 * k + 1] = (unsigned char)((unsigned short)tmp[k] >> 8);
    }
    d.hash = fnv_bytes(d.hash, bytes, (size_t)len * 2);
  }
  return d;
}

static void report(const char *what, int conv, int ch, double ratio, Digest d) {
  char line[256];
  snprintf(line, sizeof line, "%-9s %-6s ch=%d ratio=%.5f frames=%ld sum=%lld fnv=%016llx",
           what, conv == SRC_SINC_BEST_QUALITY ? "best" : conv == SRC_SINC_MEDIUM_QUALITY
           ? "medium" : conv == SRC_SINC_FASTEST ? "fast" : conv == SRC_ZERO_ORDER_HOLD
           ? "zoh" : "linear", ch, ratio, d.frames, d.sum, d.hash);
  puts(line);
  g_total = fnv_bytes(g_total, line, strlen(line));
}

static long out_capacity(long frames, double max_ratio) {
  return (long)(frames * max_ratio) + 512;
}

/* ---- the three APIs ---- */
static long convert_simple(int conv, int ch, double ratio, const float *in, long frames,
                           float **out) {
  long cap = out_capacity(frames, ratio);
  *out = xmalloc(sizeof(float) * (size_t)(cap * ch));
  SRC_DATA d;
  memset(&d, 0, sizeof d);
  d.data_in = in;
  d.input_frames = frames;
  d.data_out = *out;
  d.output_frames = cap;
  d.src_ratio = ratio;
  int e = src_simple(&d, conv, ch);
  if (e) die("src_simple", e);
  if (d.input_frames_used < frames - 1) fail("src_simple left input", (double)d.input_frames_used);
  return d.output_frames_gen;
}

/* Feeds `in` to `st` in random chunks (at most max_in frames in, max_out out per call).
   With r1 != r0 the ratio of each call moves slowly between r0 and r1. Stops after
   stop_after input frames (the rest stays for the caller) unless stop_after < 0. */
typedef struct { long pos, n_out, calls; int eoi; } Stream;

static void stream_run(SRC_STATE *st, Stream *s, double r0, double r1, const float *in,
                       long frames, int ch, float *out, long cap, Rng *rng, int max_in,
                       int max_out, long stop_after) {
  for (;;) {
    if (stop_after >= 0 && s->pos >= stop_after) return;
    SRC_DATA d;
    memset(&d, 0, sizeof d);
    long want_in = 1 + (long)(rng_next(rng) % (unsigned)max_in);
    long want_out = 1 + (long)(rng_next(rng) % (unsigned)max_out);
    if (s->eoi || want_in >= frames - s->pos) {
      want_in = frames - s->pos;
      s->eoi = stop_after < 0;
    }
    if (want_out > cap - s->n_out) want_out = cap - s->n_out;
    if (want_out <= 0) die("stream output overflow", 0);
    d.data_in = in + s->pos * ch;
    d.input_frames = want_in;
    d.data_out = out + s->n_out * ch;
    d.output_frames = want_out;
    d.end_of_input = s->eoi;
    d.src_ratio = r0 == r1 ? r0 : r0 + (r1 - r0) * (0.5 - 0.5 * cos(0.037 * s->calls));
    int e = src_process(st, &d);
    if (e) die("src_process", e);
    s->pos += d.input_frames_used;
    s->n_out += d.output_frames_gen;
    s->calls++;
    if (s->eoi && d.output_frames_gen == 0 && s->pos >= frames) return;
    if (s->calls > 50000000L) die("stream does not end", 0);
  }
}

static long convert_stream(int conv, int ch, double r0, double r1, const float *in,
                           long frames, float **out, Rng *rng, int max_in, int max_out) {
  long cap = out_capacity(frames, r0 > r1 ? r0 : r1);
  *out = xmalloc(sizeof(float) * (size_t)(cap * ch));
  int e;
  SRC_STATE *st = src_new(conv, ch, &e);
  if (!st) die("src_new", e);
  if (src_get_channels(st) != ch) fail("src_get_channels", src_get_channels(st));
  Stream s = {0, 0, 0, 0};
  stream_run(st, &s, r0, r1, in, frames, ch, *out, cap, rng, max_in, max_out, -1);
  src_delete(st);
  return s.n_out;
}

typedef struct { const float *in; long frames, pos; int ch; Rng rng; int max_in; } Feed;

static long feed_cb(void *data, float **ptr) {
  Feed *f = data;
  long n = 1 + (long)(rng_next(&f->rng) % (unsigned)f->max_in);
  if (n > f->frames - f->pos) n = f->frames - f->pos;
  *ptr = (float *)(f->in + f->pos * f->ch);
  f->pos += n;
  return n;
}

static long convert_callback(int conv, int ch, double ratio, const float *in, long frames,
                             float **out, unsigned seed) {
  long cap = out_capacity(frames, ratio);
  *out = xmalloc(sizeof(float) * (size_t)(cap * ch));
  Feed f = {in, frames, 0, ch, {seed * 1234567ULL + 89}, 333};
  int e;
  SRC_STATE *st = src_callback_new(feed_cb, conv, ch, &e, &f);
  if (!st) die("src_callback_new", e);
  long n = 0;
  Rng r = {seed + 4242ULL};
  for (;;) {
    long want = 1 + (long)(rng_next(&r) % 300u);
    if (want > cap - n) want = cap - n;
    if (want <= 0) die("callback output overflow", 0);
    long got = src_callback_read(st, ratio, want, *out + n * ch);
    if (got == 0) break;
    n += got;
  }
  if (src_error(st)) die("src_callback_read", src_error(st));
  src_delete(st);
  return n;
}

/* ---- checks ---- */
/* The largest difference of two conversions over their common frames, which must be
   (nearly) all of them. */
static double compare(const float *a, long na, const float *b, long nb, int ch,
                      const char *what) {
  long n = na < nb ? na : nb;
  if (labs(na - nb) > 2) fail(what, (double)(na - nb));
  double m = 0.0;
  for (long i = 0; i < n * ch; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (d > m) m = d;
  }
  return m;
}

/* A mono tone of `freq` cycles per input sample converted by `ratio`: away from the
   ends the output is the same tone at the new rate, `delay` input samples late.
   Returns the largest error. */
static double tone_error(int conv, double ratio, double freq, double delay, long frames,
                         Digest *dg) {
  float *in = xmalloc(sizeof(float) * (size_t)frames);
  for (long i = 0; i < frames; i++) in[i] = (float)(0.7 * sin(6.283185307179586 * freq * i + 0.3));
  float *out;
  long n = convert_simple(conv, 1, ratio, in, frames, &out);
  *dg = digest(out, n, 1);
  long edge = (long)(300 * (ratio > 1 ? ratio : 1.0 / ratio)) + 50;
  double m = 0.0;
  for (long k = edge; k < n - edge; k++) {
    double want = 0.7 * sin(6.283185307179586 * freq * ((double)k / ratio - delay) + 0.3);
    double d = fabs(out[k] - want);
    if (d > m) m = d;
  }
  if (n < (long)(frames * ratio) - 2 || n > (long)(frames * ratio) + 2)
    fail("tone output length", (double)n);
  free(in);
  free(out);
  return m;
}

static void check_int_conversions(const float *x, long n) {
  short *s = xmalloc(sizeof(short) * (size_t)n);
  int *w = xmalloc(sizeof(int) * (size_t)n);
  float *back = xmalloc(sizeof(float) * (size_t)n);
  src_float_to_short_array(x, s, (int)n);
  src_short_to_float_array(s, back, (int)n);
  double m = 0.0;
  for (long i = 0; i < n; i++) {
    double d = fabs((double)back[i] - (double)x[i]);
    if (fabs(x[i]) < 0.99 && d > m) m = d;
  }
  if (m > 1.0 / 32768.0) fail("int16 round trip", m);
  src_float_to_int_array(x, w, (int)n);
  src_int_to_float_array(w, back, (int)n);
  m = 0.0;
  for (long i = 0; i < n; i++) {
    double d = fabs((double)back[i] - (double)x[i]);
    if (fabs(x[i]) < 0.99 && d > m) m = d;
  }
  if (m > 1e-6) fail("int32 round trip", m);
  unsigned long long h = fnv_bytes(FNV_START, s, sizeof(short) * (size_t)n);
  h = fnv_bytes(h, w, sizeof(int) * (size_t)n);
  char line[96];
  snprintf(line, sizeof line, "int-conv  n=%ld fnv=%016llx", n, h);
  puts(line);
  g_total = fnv_bytes(g_total, line, strlen(line));
  free(s); free(w); free(back);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SEED FRAMES\n", argv[0]);
    return 2;
  }
  unsigned seed = (unsigned)strtoul(argv[1], NULL, 10);
  long N = strtol(argv[2], NULL, 10);
  if (N < 2000) { fprintf(stderr, "samplerate_run: FRAMES must be >= 2000\n"); return 2; }
  Rng rng = {0xfeedULL + seed};
  const int convs[] = {SRC_SINC_FASTEST, SRC_SINC_MEDIUM_QUALITY, SRC_ZERO_ORDER_HOLD,
                       SRC_LINEAR};
  float *out, *out2;
  long n, n2;

  /* 1. Mono, the simple API: every cheap converter at six ratios. */
  float *mono = make_signal(N, 1, seed, SIG_BROAD);
  check_int_conversions(mono, N);
  const double ratios[] = {0.5, 44100.0 / 48000.0, 1.0, 48000.0 / 44100.0, 1.7, 0.3127};
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 6; r++) {
      n = convert_simple(convs[c], 1, ratios[r], mono, N, &out);
      report("simple", convs[c], 1, ratios[r], digest(out, n, 1));
      free(out);
    }

  /* 2. Stereo, streaming in random chunks against the simple API. */
  long NS = N / 2;
  float *stereo = make_signal(NS, 2, seed, SIG_BROAD);
  for (int c = 0; c < 4; c++) {
    const double rs[2] = {0.75, 1.5 + 0.01 * (seed % 7)};
    for (int r = 0; r < 2; r++) {
      n = convert_stream(convs[c], 2, rs[r], rs[r], stereo, NS, &out, &rng, 700, 500);
      n2 = convert_simple(convs[c], 2, rs[r], stereo, NS, &out2);
      double m = compare(out, n, out2, n2, 2, "stream length");
      if (m > 1e-5) fail("stream vs simple", m);
      report("stream", convs[c], 2, rs[r], digest(out, n, 2));
      free(out);
      free(out2);
    }
  }

  /* 3. Three (generic), four and six channels streamed with the fast sinc; medium on
        the quad signal. */
  const int chans[] = {3, 4, 6};
  for (int k = 0; k < 3; k++) {
    long NM = N / chans[k] + 1000;
    float *multi = make_signal(NM, chans[k], seed + (unsigned)k, SIG_BROAD);
    n = convert_stream(SRC_SINC_FASTEST, chans[k], 0.6, 0.6, multi, NM, &out, &rng, 400, 300);
    n2 = convert_simple(SRC_SINC_FASTEST, chans[k], 0.6, multi, NM, &out2);
    if (compare(out, n, out2, n2, chans[k], "multi length") > 1e-5)
      fail("multichannel stream vs simple", chans[k]);
    report("stream", SRC_SINC_FASTEST, chans[k], 0.6, digest(out, n, chans[k]));
    free(out);
    free(out2);
    int conv = chans[k] == 4 ? SRC_SINC_MEDIUM_QUALITY : SRC_SINC_FASTEST;
    n = convert_simple(conv, chans[k], 1.25, multi, NM, &out);
    report("simple", conv, chans[k], 1.25, digest(out, n, chans[k]));
    free(out);
    free(multi);
  }

  /* 4. Ratios varying from call to call. */
  for (int c = 0; c < 4; c++) {
    double r0 = 0.55, r1 = 1.45;
    float *sig = c == 1 ? stereo : mono;
    int ch = c == 1 ? 2 : 1;
    long len = c == 1 ? NS : N / 2;
    n = convert_stream(convs[c], ch, r0, r1, sig, len, &out, &rng, 256, 256);
    if (n < (long)(len * 0.5) || n > (long)(len * 1.5)) fail("varying ratio length", n);
    report("vari", convs[c], ch, r1, digest(out, n, ch));
    free(out);
  }

  /* 5. The callback API against the simple API. */
  for (int c = 0; c < 2; c++) {
    double ratio = c ? 1.3 : 0.9;
    n = convert_callback(convs[c], 2, ratio, stereo, NS / 2, &out, seed);
    n2 = convert_simple(convs[c], 2, ratio, stereo, NS / 2, &out2);
    double m = compare(out, n, out2, n2, 2, "callback length");
    if (m > 1e-5) fail("callback vs simple", m);
    report("callback", convs[c], 2, ratio, digest(out, n, 2));
    free(out);
    free(out2);
  }

  /* 6. A state cloned half way must go on exactly like the original; a reset state must
        do the same work again bit for bit. */
  for (int c = 0; c < 2; c++) {
    long len = N / 4, cap = out_capacity(len, 1.2);
    float *a = xmalloc(sizeof(float) * (size_t)(cap * 2));
    float *b = xmalloc(sizeof(float) * (size_t)(cap * 2));
    int e;
    SRC_STATE *st = src_new(convs[c], 2, &e);
    if (!st) die("src_new", e);
    Rng r1 = {seed + 17ULL}, r2;
    Stream s1 = {0, 0, 0, 0};
    stream_run(st, &s1, 1.2, 1.2, stereo, len, 2, a, cap, &r1, 500, 400, len / 2);
    SRC_STATE *cl = src_clone(st, &e);
    if (!cl) die("src_clone", e);
    Stream s2 = s1;
    r2 = r1;
    memcpy(b, a, sizeof(float) * (size_t)(s1.n_out * 2));
    stream_run(st, &s1, 1.2, 1.2, stereo, len, 2, a, cap, &r1, 500, 400, -1);
    stream_run(cl, &s2, 1.2, 1.2, stereo, len, 2, b, cap, &r2, 500, 400, -1);
    if (s1.n_out != s2.n_out || memcmp(a, b, sizeof(float) * (size_t)(s1.n_out * 2)))
      fail("clone differs", (double)(s1.n_out - s2.n_out));
    Digest da = digest(a, s1.n_out, 2);
    if ((e = src_reset(st))) die("src_reset", e);
    Rng r3 = {seed + 17ULL};
    Stream s3 = {0, 0, 0, 0};
    stream_run(st, &s3, 1.2, 1.2, stereo, len, 2, b, cap, &r3, 500, 400, -1);
    if (s3.n_out != s1.n_out || memcmp(a, b, sizeof(float) * (size_t)(s1.n_out * 2)))
      fail("reset differs", (double)(s1.n_out - s3.n_out));
    report("clone", convs[c], 2, 1.2, da);
    src_delete(cl);
    src_delete(st);
    free(a);
    free(b);
  }

  /* 7. Pure tones against the analytic sine, every converter. */
  const double limits[] = {5e-5, 5e-6, 0.12, 0.01}, delays[] = {0.0, 0.0, 1.5, 1.0};
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 2; r++) {
      double ratio = r ? 1.6 : 0.7, freq = 0.031 + 0.001 * (seed % 11);
      Digest dg;
      double m = tone_error(convs[c], ratio, freq, delays[c], N / 4, &dg);
      if (m > limits[c]) fail("tone error", m);
      report("tone", convs[c], 1, ratio, dg);
    }

  /* 8. A band-limited signal there and back with the medium sinc. */
  {
    long len = N / 3;
    float *tones = make_signal(len, 1, seed, SIG_TONES);
    n = convert_simple(SRC_SINC_MEDIUM_QUALITY, 1, 1.5, tones, len, &out);
    n2 = convert_simple(SRC_SINC_MEDIUM_QUALITY, 1, 1.0 / 1.5, out, n, &out2);
    double m = 0.0;
    for (long i = 500; i < len - 500 && i < n2; i++) {
      double d = fabs((double)out2[i] - (double)tones[i]);
      if (d > m) m = d;
    }
    if (m > 1e-3) fail("round trip", m);
    report("roundtrip", SRC_SINC_MEDIUM_QUALITY, 1, 1.5, digest(out2, n2, 1));
    free(out);
    free(out2);
    free(tones);
  }

  /* 9. The best sinc: slow, so short signals only. */
  {
    Digest dg;
    double m = tone_error(SRC_SINC_BEST_QUALITY, 0.9, 0.043, 0.0, N / 24, &dg);
    if (m > 1e-6) fail("best tone error", m);
    report("tone", SRC_SINC_BEST_QUALITY, 1, 0.9, dg);
    long len = N / 48;
    n = convert_stream(SRC_SINC_BEST_QUALITY, 2, 1.1, 1.1, stereo, len, &out, &rng, 300, 300);
    n2 = convert_simple(SRC_SINC_BEST_QUALITY, 2, 1.1, stereo, len, &out2);
    if (compare(out, n, out2, n2, 2, "best length") > 1e-5) fail("best stream vs simple", 0);
    report("stream", SRC_SINC_BEST_QUALITY, 2, 1.1, digest(out, n, 2));
    free(out);
    free(out2);
  }

  printf("total fnv=%016llx failures=%d\n", g_total, g_failures);
  free(mono);
  free(stereo);
  return g_failures ? 1 : 0;
}
