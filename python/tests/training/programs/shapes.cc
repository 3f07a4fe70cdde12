// Small project-written C++ unit: templates and inline members give linkonce_odr
// callees, the case where inlining decisions change code size the most at -Oz.
#include <cstddef>

template <typename T>
struct Buffer {
  T items[64];
  std::size_t count = 0;
  bool push(const T& v) {
    if (count == 64) return false;
    items[count++] = v;
    return true;
  }
  T at(std::size_t i) const { return i < count ? items[i] : T(); }
  T sum() const {
    T s = T();
    for (std::size_t i = 0; i < count; ++i) s += at(i);
    return s;
  }
};

struct Shape {
  virtual ~Shape() {}
  virtual double area() const = 0;
};
struct Rect : Shape {
  double w, h;
  Rect(double a, double b) : w(a), h(b) {}
  double area() const override { return w * h; }
};
struct Square : Rect {
  explicit Square(double s) : Rect(s, s) {}
};

static double scale(double x, int k) { return k > 0 ? x * k : x / (1 - k); }

double total_area(int n) {
  Buffer<double> b;
  for (int i = 0; i < n; ++i) {
    Rect r(i, i + 1);
    Square s(i);
    b.push(scale(r.area(), i % 3));
    b.push(scale(s.area(), -(i % 2)));
  }
  return b.sum();
}

int count_ints(int n) {
  Buffer<int> b;
  for (int i = 0; i < n; ++i) b.push(i * 7 % 13);
  return b.sum() + static_cast<int>(b.at(3));
}
