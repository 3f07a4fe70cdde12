/* Project-written: seventeen values live across a loop; LLVM 19's allocator evicts a
   few times here (it evicts nothing in small_pressure.c). */
long squeeze17(const long *p, long q) {
  long v0 = p[0], v1 = p[1], v2 = p[2], v3 = p[3], v4 = p[4], v5 = p[5], v6 = p[6], v7 = p[7], v8 = p[8], v9 = p[9], v10 = p[10], v11 = p[11], v12 = p[12], v13 = p[13], v14 = p[14], v15 = p[15], v16 = p[16];
  for (long t = 0; t < q; ++t) {
    v0 += v1 ^ t;
    v1 += v2 ^ t;
    v2 += v3 ^ t;
    v3 += v4 ^ t;
    v4 += v5 ^ t;
    v5 += v6 ^ t;
    v6 += v7 ^ t;
    v7 += v8 ^ t;
    v8 += v9 ^ t;
    v9 += v10 ^ t;
    v10 += v11 ^ t;
    v11 += v12 ^ t;
    v12 += v13 ^ t;
    v13 += v14 ^ t;
    v14 += v15 ^ t;
    v15 += v16 ^ t;
    v16 += v0 ^ t;
  }
  return v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9 + v10 + v11 + v12 + v13 + v14 + v15 + v16;
}
