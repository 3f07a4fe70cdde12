/* mlgo runtime_check driver for lzo2: cuts a text into blocks and, for several LZO
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
#include "mlgo_read_file.h"

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
