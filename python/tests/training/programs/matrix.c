/* Small project-written C unit: matrix helpers called from several places. */
#define N 8
typedef struct { double m[N][N]; } mat;

static double get(const mat *a, int i, int j) { return a->m[i][j]; }
static void set(mat *a, int i, int j, double v) { a->m[i][j] = v; }
static double dot_row_col(const mat *a, const mat *b, int i, int j) {
  double s = 0;
  for (int k = 0; k < N; k++) s += get(a, i, k) * get(b, k, j);
  return s;
}

void mat_mul(const mat *a, const mat *b, mat *out) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) set(out, i, j, dot_row_col(a, b, i, j));
}

void mat_identity(mat *a) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) set(a, i, j, i == j ? 1.0 : 0.0);
}

double mat_trace(const mat *a) {
  double t = 0;
  for (int i = 0; i < N; i++) t += get(a, i, i);
  return t;
}

void mat_transpose(mat *a) {
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++) {
      double x = get(a, i, j);
      set(a, i, j, get(a, j, i));
      set(a, j, i, x);
    }
}
