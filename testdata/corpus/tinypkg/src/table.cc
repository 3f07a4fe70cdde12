// Small project-written C++ unit: templates and small methods for the inliner.
#include <cstddef>
#include <cstdint>

namespace tiny {

template <typename T, std::size_t N>
class Ring {
 public:
  void push(T v) { data_[head_++ % N] = v; if (size_ < N) ++size_; }
  T at(std::size_t i) const { return data_[(head_ + N - size_ + i) % N]; }
  std::size_t size() const { return size_; }

 private:
  T data_[N] = {};
  std::size_t head_ = 0, size_ = 0;
};

template <typename T, std::size_t N>
T sum(const Ring<T, N>& r) {
  T s{};
  for (std::size_t i = 0; i < r.size(); ++i) s += r.at(i);
  return s;
}

}  // namespace tiny

extern "C" long tiny_table(const int* xs, int n) {
  tiny::Ring<long, 8> r;
  for (int i = 0; i < n; ++i) r.push(xs[i] * 3);
  tiny::Ring<int, 4> q;
  for (int i = 0; i < n; ++i) q.push(xs[i]);
  return tiny::sum(r) + tiny::sum(q);
}
