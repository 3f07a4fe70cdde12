/* Small project-written C unit: string helpers with several call sites each. */
#include <stddef.h>

static size_t my_len(const char *s) { size_t n = 0; while (s[n]) n++; return n; }
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }
static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c; }

size_t trim(char *s) {
  size_t n = my_len(s);
  while (n > 0 && is_space(s[n - 1])) s[--n] = 0;
  size_t i = 0;
  while (s[i] && is_space(s[i])) i++;
  for (size_t j = 0; j + i <= n; j++) s[j] = s[j + i];
  return n - i;
}

int equal_nocase(const char *a, const char *b) {
  size_t na = my_len(a), nb = my_len(b);
  if (na != nb) return 0;
  for (size_t i = 0; i < na; i++)
    if (lower(a[i]) != lower(b[i])) return 0;
  return 1;
}

int count_words(const char *s) {
  int n = 0, in = 0;
  for (; *s; s++) {
    if (is_space(*s)) in = 0;
    else if (!in) { in = 1; n++; }
  }
  return n;
}
