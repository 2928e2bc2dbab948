// gemv_blocks.h — the q8 / q4 gemvm loop of this folder (gemv_q8.cpp,
// gemv_q4.cpp), compiled with its -march (+sve) only.
//
// Per row and block the weights as two 16-byte halves (q4: unpacked, minus
// 8), dotted (SDOT, SADDV) with each position's block: the exact int32 sum
// whatever the vector length; then, in scalar float,
// acc += (d * xd) * (float)isum, block after block, as the gemv.
//
// F (the format's file) provides kBytes and load(p16, blk, a, b): the
// block's weights 0..15 / 16..31 under p16 (the first 16 byte lanes).
//
// Static, as in arm64_common.h: each kernel object keeps its own copy.
#ifndef GEARBX_ARCH_ARM64_SVE_GEMV_BLOCKS_H
#define GEARBX_ARCH_ARM64_SVE_GEMV_BLOCKS_H

#if !defined(__ARM_FEATURE_SVE)
#error "sve/gemv_blocks.h belongs to the sve folder (compiled with +sve)"
#endif

#include <arm_sve.h>
#include <stddef.h>
#include <stdint.h>

#include "arm64/arm64_common.h"
#include "kernels.h"

namespace gb_arm64 {
namespace sve {

// Inactive lanes of a / b may hold garbage; x0 / x1 are zero there.
static inline int32_t dot_halves(svint8_t a, svint8_t b, svint8_t x0, svint8_t x1) {
  return (int32_t)svaddv_s32(svptrue_b32(), svdot_s32(svdot_s32(svdup_n_s32(0), a, x0), b, x1));
}

template <class F>
static void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                         size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * F::kBytes;
  const svbool_t p16 = svwhilelt_b8_u64(0, 16);
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    float acc[4][GB_GEMVM_MAX_M];
    for (size_t k = 0; k < nr; k++)
      for (size_t p = 0; p < m; p++) acc[k][p] = 0.0f;
    for (size_t b = 0; b < nb; b++) {
      for (size_t k = 0; k < nr; k++) {
        const uint8_t *blk = W + (r + k) * rb + b * F::kBytes;
        svint8_t wa, wb;
        F::load(p16, blk, wa, wb);
        const float d = f16_scale(blk);
        for (size_t p = 0; p < m; p++) {
          const gb_q8x_block &xb = XQ[p * ldxq + b];
          const int32_t isum = dot_halves(wa, wb, svld1_s8(p16, xb.qs), svld1_s8(p16, xb.qs + 16));
          acc[k][p] += d * xb.d * (float)isum;
        }
      }
    }
    for (size_t k = 0; k < nr; k++)
      for (size_t p = 0; p < m; p++) Y[p * ldy + r + k] = acc[k][p];
  }
}

}  // namespace sve
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_SVE_GEMV_BLOCKS_H
