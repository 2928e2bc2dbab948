// gemv_blocks.h — the q8 / q4 loops of this folder (gemv_q8.cpp,
// gemv_q4.cpp), compiled with its -march (+dotprod+i8mm) only.
//
// SMMLA multiplies a 2x8 int8 matrix A by the transpose of a 2x8 matrix B
// into a 2x2 int32 tile [a0.b0, a0.b1, a1.b0, a1.b1]. Here A holds 8 weights
// of two rows ([row0 bytes k..k+7 | row1 bytes k..k+7], built with ZIP1/ZIP2
// on 64-bit lanes) and B the matching 8 activations in both halves, so a
// 32-block of two rows takes four SMMLAs and leaves [s0, s0, s1, s1]. Two
// such pairs are merged with UZP1 into [s0, s1, s2, s3] (four rows a step);
// a last odd row is paired with itself. Only NEON and SMMLA: the kernels
// require GB_ISA_NEON | GB_ISA_I8MM, no SDOT.
//
// F (the format's file) provides kBlockBytes and load(blk, a, b): the
// block's weights 0..15 and 16..31 as signed bytes.
//
// Static, as in arm64_common.h: each kernel object keeps its own copy.
#ifndef GEARBX_ARCH_ARM64_I8MM_GEMV_BLOCKS_H
#define GEARBX_ARCH_ARM64_I8MM_GEMV_BLOCKS_H

#if !defined(__ARM_FEATURE_MATMUL_INT8)
#error "i8mm/gemv_blocks.h belongs to the i8mm folder (compiled with +i8mm)"
#endif

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arm64/arm64_common.h"
#include "kernels.h"

namespace gb_arm64 {
namespace i8mm {

static inline int8x16_t zip1_64(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
static inline int8x16_t zip2_64(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// The activations of one block as four B operands: xx[i] = [x chunk i | x chunk i].
struct XDup {
  int8x16_t c[4];
};

static inline XDup xdup(const gb_q8x_block &xb) {
  const int8x16_t x0 = vld1q_s8(xb.qs);
  const int8x16_t x1 = vld1q_s8(xb.qs + 16);
  XDup r;
  r.c[0] = zip1_64(x0, x0);
  r.c[1] = zip2_64(x0, x0);
  r.c[2] = zip1_64(x1, x1);
  r.c[3] = zip2_64(x1, x1);
  return r;
}

// Two rows' weights (32 int8 each, as two 16-byte halves) against one block.
static inline int32x4_t mm_pair(int8x16_t r0a, int8x16_t r0b, int8x16_t r1a, int8x16_t r1b, const XDup &x) {
  int32x4_t acc = vmmlaq_s32(vdupq_n_s32(0), zip1_64(r0a, r1a), x.c[0]);
  acc = vmmlaq_s32(acc, zip2_64(r0a, r1a), x.c[1]);
  acc = vmmlaq_s32(acc, zip1_64(r0b, r1b), x.c[2]);
  acc = vmmlaq_s32(acc, zip2_64(r0b, r1b), x.c[3]);
  return acc;  // [s0, s0, s1, s1]
}

// The gemv. The per-block int32 sums are exact and the float work is
// generic's acc += (d * xd) * (float)isum, block after block, unfused.
template <class F>
static inline void gemv_blocks(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end,
                               size_t cols) {
  const size_t kB = F::kBlockBytes;
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * kB;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = b0 + rb;
    const uint8_t *b2 = b1 + rb;
    const uint8_t *b3 = b2 + rb;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const XDup x = xdup(xq[b]);
      int8x16_t w0a, w0b, w1a, w1b, w2a, w2b, w3a, w3b;
      F::load(b0, w0a, w0b);
      F::load(b1, w1a, w1b);
      F::load(b2, w2a, w2b);
      F::load(b3, w3a, w3b);
      const int32x4_t s01 = mm_pair(w0a, w0b, w1a, w1b, x);
      const int32x4_t s23 = mm_pair(w2a, w2b, w3a, w3b, x);
      const int32x4_t isum = vuzp1q_s32(s01, s23);  // [s0, s1, s2, s3]
      const float32x4_t dd = vmulq_n_f32(f16_scales4(b0, b1, b2, b3), xq[b].d);
      acc = vaddq_f32(acc, vmulq_f32(dd, vcvtq_f32_s32(isum)));
      b0 += kB;
      b1 += kB;
      b2 += kB;
      b3 += kB;
    }
    vst1q_f32(y + r, acc);
  }
  // 1..3 rows left: pairs, the last odd row paired with itself.
  for (; r < row_end; r += 2) {
    const bool two = r + 1 < row_end;
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = two ? b0 + rb : b0;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const XDup x = xdup(xq[b]);
      int8x16_t w0a, w0b, w1a, w1b;
      F::load(b0, w0a, w0b);
      F::load(b1, w1a, w1b);
      const int32x4_t s = mm_pair(w0a, w0b, w1a, w1b, x);  // [s0, s0, s1, s1]
      const float32x4_t dd = vmulq_n_f32(f16_scales4(b0, b0, b1, b1), xq[b].d);
      acc = vaddq_f32(acc, vmulq_f32(dd, vcvtq_f32_s32(s)));
      b0 += kB;
      b1 += kB;
    }
    y[r] = vgetq_lane_f32(acc, 0);
    if (two) y[r + 1] = vgetq_lane_f32(acc, 2);
  }
}

// A operands of two rows' 32 weights: [r0 k..k+7 | r1 k..k+7] for k = 0, 8, 16, 24.
struct PairA {
  int8x16_t a[4];
};

static inline PairA pair_a(int8x16_t r0a, int8x16_t r0b, int8x16_t r1a, int8x16_t r1b) {
  PairA p;
  p.a[0] = zip1_64(r0a, r1a);
  p.a[1] = zip2_64(r0a, r1a);
  p.a[2] = zip1_64(r0b, r1b);
  p.a[3] = zip2_64(r0b, r1b);
  return p;
}

static inline int32x4_t mm_pair_a(const PairA &w, const XDup &x) {
  int32x4_t acc = vmmlaq_s32(vdupq_n_s32(0), w.a[0], x.c[0]);
  acc = vmmlaq_s32(acc, w.a[1], x.c[1]);
  acc = vmmlaq_s32(acc, w.a[2], x.c[2]);
  acc = vmmlaq_s32(acc, w.a[3], x.c[3]);
  return acc;  // [s0, s0, s1, s1]
}

// The gemvm: four rows per step (a tail group computes copies of its last
// row, not stored). Per block the two row pairs' A operands (ZIP1/ZIP2 of
// their weights) are built once; per position its B operands (xdup), eight
// SMMLAs and one UZP1 give the four rows' exact int32 sums; then
// acc += (d * xd) * (float)isum, block after block, as the gemv:
// bit-identical to it per position.
template <class F>
static inline void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                                size_t row_begin, size_t row_end, size_t cols) {
  const size_t kB = F::kBlockBytes;
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * kB;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *bk[4];
    for (size_t k = 0; k < 4; k++) bk[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *b0 = bk[0] + b * kB, *b1 = bk[1] + b * kB, *b2 = bk[2] + b * kB, *b3 = bk[3] + b * kB;
      int8x16_t w0a, w0b, w1a, w1b, w2a, w2b, w3a, w3b;
      F::load(b0, w0a, w0b);
      F::load(b1, w1a, w1b);
      F::load(b2, w2a, w2b);
      F::load(b3, w3a, w3b);
      const PairA p01 = pair_a(w0a, w0b, w1a, w1b);
      const PairA p23 = pair_a(w2a, w2b, w3a, w3b);
      const float32x4_t dw = f16_scales4(b0, b1, b2, b3);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block &xb = XQ[p * ldxq + b];
        const XDup x = xdup(xb);
        const int32x4_t isum = vuzp1q_s32(mm_pair_a(p01, x), mm_pair_a(p23, x));  // [s0, s1, s2, s3]
        const float32x4_t dd = vmulq_n_f32(dw, xb.d);
        acc[p] = vaddq_f32(acc[p], vmulq_f32(dd, vcvtq_f32_s32(isum)));
      }
    }
    for (size_t p = 0; p < m; p++) {
      store_rows(Y + p * ldy + r, acc[p], nr);
    }
  }
}

}  // namespace i8mm
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_I8MM_GEMV_BLOCKS_H
