/* Project-written test program for the release path: a tiny stack machine. */
#include <stdint.h>

enum { OP_PUSH, OP_ADD, OP_SUB, OP_MUL, OP_DUP, OP_SWAP, OP_JZ, OP_JMP, OP_HALT };

typedef struct { int64_t stack[64]; int sp; int pc; int steps; } vm;

static void push(vm *m, int64_t v) { if (m->sp < 64) m->stack[m->sp++] = v; }
static int64_t pop(vm *m) { return m->sp > 0 ? m->stack[--m->sp] : 0; }
static int64_t peek(const vm *m) { return m->sp > 0 ? m->stack[m->sp - 1] : 0; }

static void binop(vm *m, int op) {
  int64_t b = pop(m), a = pop(m);
  switch (op) {
    case OP_ADD: push(m, a + b); break;
    case OP_SUB: push(m, a - b); break;
    default: push(m, a * b); break;
  }
}

static void swap(vm *m) {
  int64_t b = pop(m), a = pop(m);
  push(m, b);
  push(m, a);
}

static int fetch(vm *m, const int32_t *code, int n) { return m->pc < n ? code[m->pc++] : OP_HALT; }

int64_t run(const int32_t *code, int n, int max_steps) {
  vm m = {{0}, 0, 0, 0};
  while (m.steps++ < max_steps) {
    int op = fetch(&m, code, n);
    switch (op) {
      case OP_PUSH: push(&m, fetch(&m, code, n)); break;
      case OP_ADD: case OP_SUB: case OP_MUL: binop(&m, op); break;
      case OP_DUP: push(&m, peek(&m)); break;
      case OP_SWAP: swap(&m); break;
      case OP_JZ: { int t = fetch(&m, code, n); if (!pop(&m)) m.pc = t; break; }
      case OP_JMP: m.pc = fetch(&m, code, n); break;
      default: return peek(&m);
    }
  }
  return peek(&m);
}

int64_t factorial(int k) {
  int32_t code[] = {OP_PUSH, 1, OP_PUSH, 0, OP_HALT};
  code[3] = k;
  int64_t acc = 1;
  for (int i = 2; i <= k; ++i) acc *= run(code, 5, 10) ? i : 1;
  return acc;
}
