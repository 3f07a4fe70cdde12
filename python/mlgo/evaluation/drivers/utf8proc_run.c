/* mlgo runtime_check driver for utf8proc: per line of a UTF-8 text, NFC, NFD,
   NFKC and NFKC case folding, grapheme clusters, display width and general categories;
   prints the case-folded text and the totals. Usage: utf8proc_run FILE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "utf8proc.h"
#include "mlgo_read_file.h"

static utf8proc_ssize_t norm(const utf8proc_uint8_t *s, utf8proc_ssize_t n,
                             utf8proc_option_t opt, utf8proc_uint8_t **out) {
  utf8proc_ssize_t r = utf8proc_map(s, n, out, opt);
  if (r < 0) { fprintf(stderr, "utf8proc_map: %s\n", utf8proc_errmsg(r)); exit(1); }
  return r;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
  size_t len;
  char *text = read_file(argv[1], &len);
  long cats[32] = {0};
  long long nfc = 0, nfd = 0, nfkc = 0, folded = 0, graphemes = 0, width = 0, upper = 0;
  unsigned long long h = 1469598103934665603ULL;
  char *line = text, *end = text + len;
  while (line < end) {
    char *nl = memchr(line, '\n', (size_t)(end - line));
    utf8proc_ssize_t n = (nl ? nl : end) - line;
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)line;
    utf8proc_uint8_t *o;
    nfc += norm(s, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE, &o); free(o);
    nfd += norm(s, n, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, &o); free(o);
    nfkc += norm(s, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, &o); free(o);
    utf8proc_ssize_t m = norm(s, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                              UTF8PROC_CASEFOLD | UTF8PROC_IGNORE | UTF8PROC_STRIPCC, &o);
    folded += m;
    fwrite(o, 1, (size_t)m, stdout);
    fputc('\n', stdout);
    h = (h ^ fnv1a((const char *)o, (size_t)m)) * 1099511628211ULL;
    free(o);
    utf8proc_int32_t prev = -1, state = 0;
    for (utf8proc_ssize_t i = 0; i < n;) {
      utf8proc_int32_t c;
      utf8proc_ssize_t k = utf8proc_iterate(s + i, n - i, &c);
      if (k < 0) { fprintf(stderr, "bad UTF-8 at %ld\n", (long)(line - text + i)); return 1; }
      i += k;
      cats[utf8proc_category(c) & 31]++;
      width += utf8proc_charwidth(c);
      upper += utf8proc_toupper(c) != c;
      if (prev < 0 || utf8proc_grapheme_break_stateful(prev, c, &state)) graphemes++;
      prev = c;
    }
    line += n + 1;
  }
  printf("# nfc %lld nfd %lld nfkc %lld folded %lld graphemes %lld width %lld upper %lld "
         "hash %016llx\n# categories", nfc, nfd, nfkc, folded, graphemes, width, upper, h);
  for (int i = 0; i < 30; i++) printf(" %ld", cats[i]);
  printf("\n");
  free(text);
  return 0;
}
