/* Project-written module with no call sites: the inliner never asks for a decision. */
int add3(int a, int b, int c) { return a + b + c; }
int scale(int x) { return x * 7 - 3; }
