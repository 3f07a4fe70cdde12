// A std::map with a malloc-backed allocator. libstdc++ builds each map node inside a
// try block whose handler frees the node and rethrows; clang-22's ML inline advisor
// answers the call in that handler itself, without sending an observation over the
// interactive channel, while the default advisor inlines it (see
// python/mlgo/env/inline_remarks.py and python/tests/env/inline_remarks_test.py).
#include <cstdlib>
#include <functional>
#include <map>
#include <new>

template <class T>
struct MallocAllocator {
  using value_type = T;
  MallocAllocator() = default;
  template <class U>
  MallocAllocator(const MallocAllocator<U>&) {}
  T* allocate(std::size_t n) {
    void* p = std::malloc(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
};

template <class T, class U>
bool operator==(const MallocAllocator<T>&, const MallocAllocator<U>&) { return true; }
template <class T, class U>
bool operator!=(const MallocAllocator<T>&, const MallocAllocator<U>&) { return false; }

int doubled_middle(int count) {
  std::map<int, int, std::less<int>, MallocAllocator<std::pair<const int, int>>> table;
  for (int i = 0; i < count; ++i) table[i] = 2 * i;
  return table[count / 2];
}
