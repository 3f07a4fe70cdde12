// Small project-written C++ unit: a binary search tree with small inline helpers.
#include <cstddef>

namespace {
struct Node {
  int key;
  Node* left = nullptr;
  Node* right = nullptr;
  explicit Node(int k) : key(k) {}
};

inline bool less(int a, int b) { return a < b; }
inline Node*& child(Node* n, int k) { return less(k, n->key) ? n->left : n->right; }

class Tree {
 public:
  ~Tree() { clear(root_); }
  void insert(int k) {
    if (!root_) { root_ = new Node(k); ++size_; return; }
    Node* n = root_;
    for (;;) {
      Node*& c = child(n, k);
      if (!c) { c = new Node(k); ++size_; return; }
      n = c;
    }
  }
  bool contains(int k) const {
    for (Node* n = root_; n; n = child(n, k))
      if (n->key == k) return true;
    return false;
  }
  std::size_t size() const { return size_; }
  int depth() const { return depth(root_); }

 private:
  static int depth(const Node* n) {
    if (!n) return 0;
    int l = depth(n->left), r = depth(n->right);
    return 1 + (l > r ? l : r);
  }
  static void clear(Node* n) {
    if (!n) return;
    clear(n->left);
    clear(n->right);
    delete n;
  }
  Node* root_ = nullptr;
  std::size_t size_ = 0;
};
}  // namespace

int tree_score(int n) {
  Tree t;
  for (int i = 0; i < n; ++i) t.insert((i * 37) % 101);
  int hits = 0;
  for (int i = 0; i < 101; ++i) hits += t.contains(i);
  return hits * 1000 + t.depth() + static_cast<int>(t.size());
}
