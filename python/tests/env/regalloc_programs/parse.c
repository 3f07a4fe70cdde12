/* A small state machine with many live values and a call per character. */
int classify(int c);
int parse(const char *s, int *counts, int n) {
  int st = 0, words = 0, nums = 0, ops = 0, depth = 0, maxd = 0, lines = 1, col = 0;
  long acc = 0, last = 0, sum = 0;
  for (int i = 0; i < n && s[i]; i++) {
    int c = s[i], k = classify(c);
    col++;
    switch (st) {
    case 0: if (k == 1) { st = 1; words++; } else if (k == 2) { st = 2; nums++; acc = c - '0'; } break;
    case 1: if (k != 1) st = 0; break;
    case 2: if (k == 2) acc = acc * 10 + (c - '0'); else { st = 0; sum += acc; last = acc; } break;
    }
    if (c == '(') { depth++; if (depth > maxd) maxd = depth; }
    if (c == ')') depth--;
    if (c == '+' || c == '-' || c == '*') ops++;
    if (c == '\n') { lines++; col = 0; }
    counts[k & 7] += col;
  }
  counts[0] = words; counts[1] = nums; counts[2] = ops; counts[3] = maxd; counts[4] = lines;
  return (int)(sum ^ last) + depth;
}
