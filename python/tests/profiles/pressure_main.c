/* Project-written driver for testdata/programs/pressure.c: runs churn() 20 times over
   4096 values and blend() once, so its hot loop runs a known number of times. */
#include <stdint.h>
#include <stdio.h>
uint64_t churn(const uint64_t *in, int n, uint64_t *out);
double blend(const double *p, int n);
int main(void) {
  static uint64_t in[4096], out[8];
  static double p[4096];
  for (int i = 0; i < 4096; ++i) { in[i] = i * 2654435761u; p[i] = i * 0.001; }
  uint64_t h = 0;
  for (int r = 0; r < 20; ++r) h ^= churn(in, 4096, out);
  printf("%llu %.3f\n", (unsigned long long)h, blend(p, 4096));
  return 0;
}
void sink(void *p) { (void)p; }
