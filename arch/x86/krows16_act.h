// krows16_act.h — the activations of one super-block as the x86 16-row
// K-quant kernels use them (avx2/ and avx512/ gemv_q4kr16.cpp,
// gemv_q6kr16.cpp), arranged once per super-block and position from its
// eight q8x blocks. Plain C++: each folder's TU keeps its own copy.
#pragma once

#include <stdint.h>
#include <string.h>

#include "kernels.h"

namespace gb_x86_krows16 {

// Four activation bytes as one 32-bit word (for a broadcast).
static inline int32_t ld32(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

// q4k: per 32-weight sub-block the scale and xd * (float)sum.
struct Q4KAct {
  float d[8];
  float dsum[8];
};

static inline void arrange(Q4KAct *o, const gb_q8x_block *x) {
  for (int s = 0; s < 8; s++) {
    o->d[s] = x[s].d;
    o->dsum[s] = x[s].d * (float)x[s].sum;
  }
}

// q6k: per activation block its scale and -32 times the sum of each
// 16-byte half (the start of that half's integer accumulator).
struct Q6KAct {
  float d[8];
  int32_t off[8][2];
};

static inline void arrange(Q6KAct *o, const gb_q8x_block *x) {
  for (int a = 0; a < 8; a++) {
    int32_t lo = 0;
    for (int j = 0; j < 16; j++) lo += x[a].qs[j];
    o->d[a] = x[a].d;
    o->off[a][0] = -32 * lo;
    o->off[a][1] = -32 * (x[a].sum - lo);
  }
}

}  // namespace gb_x86_krows16
