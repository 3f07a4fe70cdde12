/* Floating-point stencil with calls in the loop: values live across calls. */
double weight(int i);
void stencil(double *out, const double *in, int n, double a, double b, double c) {
  double p0 = 0, p1 = 0, p2 = 0, p3 = 0, p4 = 0, p5 = 0;
  for (int i = 2; i < n - 2; i++) {
    double w = weight(i);
    double v = a * in[i - 2] + b * in[i - 1] + c * in[i] + b * in[i + 1] + a * in[i + 2];
    p0 += v * w; p1 += p0 * a; p2 += p1 * b; p3 += p2 * c; p4 += p3 * w; p5 += p4 + v;
    out[i] = v * w + p0 - p1 + p2 - p3 + p4 - p5;
  }
  out[0] = p0 + p1 + p2 + p3 + p4 + p5;
}
int table(int *t, int n, int k) {
  int s0 = 0, s1 = 1, s2 = 2, s3 = 3, s4 = 4, s5 = 5, s6 = 6, s7 = 7, s8 = 8;
  for (int i = 0; i < n; i++) {
    int x = t[(i * k) % n];
    s0 += x; s1 ^= s0 + x; s2 += s1 * x; s3 ^= s2 - x; s4 += s3 << 1; s5 ^= s4 >> 2;
    s6 += s5 * 3; s7 ^= s6 + s0; s8 += s7 - s1;
    if (x > s8) t[i] = s0 + s2 + s4 + s6 + s8; else t[i] = s1 + s3 + s5 + s7;
  }
  return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8;
}
