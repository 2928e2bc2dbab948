// gemv_blocks.h — the q8 / q4 loops of this folder (gemv_q8.cpp,
// gemv_q4.cpp), ARMv8-A Advanced SIMD.
//
// Bit-identical to the generic kernels: the int32 sum of each 32-block is
// exact, and per row the float work is acc += (d * xd) * (float)isum, block
// after block, with separate multiplies and adds (no fusing), four rows in
// the four lanes of a vector.
//
// Static, as in arm64_common.h: each kernel object keeps its own copy.
#ifndef GEARBX_ARCH_ARM64_NEON_GEMV_BLOCKS_H
#define GEARBX_ARCH_ARM64_NEON_GEMV_BLOCKS_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arm64/arm64_common.h"
#include "kernels.h"

namespace gb_arm64 {
namespace neon {

// The gemv. kBlockBytes: 34 (q8) or 18 (q4); Dot(qs, x0, x1): the exact
// int32 dot product of the block's quants at qs with the activations x0 / x1
// (weights 0..15 / 16..31), spread over the four lanes.
template <size_t kBlockBytes, int32x4_t (*Dot)(const uint8_t *, int8x16_t, int8x16_t)>
static inline void gemv_blocks(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end,
                               size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * kBlockBytes;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = b0 + rb;
    const uint8_t *b2 = b1 + rb;
    const uint8_t *b3 = b2 + rb;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const int8x16_t x0 = vld1q_s8(xq[b].qs);
      const int8x16_t x1 = vld1q_s8(xq[b].qs + 16);
      const int32x4_t isum = hsum4_s32(Dot(b0 + 2, x0, x1), Dot(b1 + 2, x0, x1), Dot(b2 + 2, x0, x1),
                                       Dot(b3 + 2, x0, x1));
      const float32x4_t dd = vmulq_n_f32(f16_scales4(b0, b1, b2, b3), xq[b].d);
      acc = vaddq_f32(acc, vmulq_f32(dd, vcvtq_f32_s32(isum)));
      b0 += kBlockBytes;
      b1 += kBlockBytes;
      b2 += kBlockBytes;
      b3 += kBlockBytes;
    }
    vst1q_f32(y + r, acc);
  }
  for (; r < row_end; r++) {
    const uint8_t *blk = W + r * rb;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += kBlockBytes) {
      const int8x16_t x0 = vld1q_s8(xq[b].qs);
      const int8x16_t x1 = vld1q_s8(xq[b].qs + 16);
      const int32_t isum = vaddvq_s32(Dot(blk + 2, x0, x1));
      acc += f16_scale(blk) * xq[b].d * (float)isum;
    }
    y[r] = acc;
  }
}

// The gemvm, bit-identical per position to the gemv: four rows per step (a
// tail group computes copies of its last row, not stored: the block
// formats' results do not depend on grouping); each block's weights are
// loaded (q4: unpacked) once and dotted with the m positions' blocks; per
// (row, position) the exact int32 block sum and
// acc += (d * xd) * (float)isum, block after block. F provides kBytes,
// load(blk, a, b) (the block's weights 0..15 / 16..31 as int8) and
// dot(a, b, x0, x1) (as Dot above, spread over the four lanes).
template <class F>
static inline void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                                size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *bk[4];
    for (size_t k = 0; k < 4; k++) bk[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      int8x16_t wa[4], wb[4];
      for (int k = 0; k < 4; k++) F::load(bk[k] + b * F::kBytes, wa[k], wb[k]);
      const float32x4_t dw = f16_scales4(bk[0] + b * F::kBytes, bk[1] + b * F::kBytes, bk[2] + b * F::kBytes,
                                         bk[3] + b * F::kBytes);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block &xb = XQ[p * ldxq + b];
        const int8x16_t x0 = vld1q_s8(xb.qs), x1 = vld1q_s8(xb.qs + 16);
        const int32x4_t isum = hsum4_s32(F::dot(wa[0], wb[0], x0, x1), F::dot(wa[1], wb[1], x0, x1),
                                         F::dot(wa[2], wb[2], x0, x1), F::dot(wa[3], wb[3], x0, x1));
        const float32x4_t dd = vmulq_n_f32(dw, xb.d);
        acc[p] = vaddq_f32(acc[p], vmulq_f32(dd, vcvtq_f32_s32(isum)));
      }
    }
    for (size_t p = 0; p < m; p++) {
      store_rows(Y + p * ldy + r, acc[p], nr);
    }
  }
}

}  // namespace neon
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_NEON_GEMV_BLOCKS_H
