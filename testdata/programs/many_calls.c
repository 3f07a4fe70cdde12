/* More than 32 calls to defined functions in one module, and a static function called
   once (from the function with most calls): the sole call of a static function is a
   decision above the small-module gate. */
int step0(int x) { return x * 3 + 1; }
int step1(int x) { return x ^ (x >> 3); }
int step2(int x) { return x * 5 - 7; }
int step3(int x) { return (x << 2) | 1; }
int step4(int x) { return x % 97 + x / 3; }
int step5(int x) { return x > 100 ? x - 100 : x + 11; }
int step6(int x) { return step0(x) + step1(x); }
int step7(int x) { return step2(x) - step3(x); }
int step8(int x) { return step4(step5(x)); }
int step9(int x) { return step6(x) ^ step7(x); }

static int mix_once(int a, int b) {
  int r = 0;
  for (int i = 0; i < a % 13; ++i) r += (a * i) ^ (b - i);
  return r + a - b;
}

int run(int x) {
  int s = 0;
  s += step0(x); s += step1(s); s += step2(s); s += step3(s); s += step4(s);
  s += step5(s); s += step6(s); s += step7(s); s += step8(s); s += step9(s);
  s += step0(s); s += step1(s); s += step2(s); s += step3(s); s += step4(s);
  s += step5(s); s += step6(s); s += step7(s); s += step8(s); s += step9(s);
  s += step0(s); s += step1(s); s += step2(s); s += step3(s); s += step4(s);
  s += step5(s); s += step6(s); s += step7(s); s += step8(s); s += step9(s);
  s += mix_once(s, x);
  return s;
}
