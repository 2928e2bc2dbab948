// The IQ4_XS GEMV driver of the arm64 folders (neon: SMULL / SMLAL, dotprod:
// SDOT), one position (gemv) and several (gemvm). Layout in kernels.h.
//
// A 32-weight sub-block is decoded in registers to its 32 codes as two int8
// vectors (weights 0..15: the grid values of the low nibbles, 16..31: of
// the high ones; TBL, -127..113); the folder's Dot gives the exact int32
// sums of four lanes. Four rows are reduced together (ADDP), lane k holding
// row k; each sub-block's sum is multiplied in int32 by the row's signed
// scale ls - 32 (|product| < 2^24: exact in float), then per lane, with
// fused multiply-adds, generic's expression acc += xd * (d * (ls - 32) *
// isum), sub-block after sub-block (the float part reassociated against
// gb_iq4xs_gemv__generic: the tests' tolerance).
//
// The gemv is the gemvm with one position: each sub-block's weights are
// decoded once for the group's rows and dotted with every position through
// the same operations, so the gemvm is bit-identical per position to the
// gemv. A tail group of 1..3 rows computes copies of its last row (not
// stored). Blocks are unaligned: byte loads and memcpy only; nothing is
// read past the last row's bytes or past xq[cols / 32).
#ifndef GEARBX_ARCH_ARM64_IQ4XS_GEMV_H
#define GEARBX_ARCH_ARM64_IQ4XS_GEMV_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "arm64/arm64_common.h"
#include "gguf_blocks.h"
#include "kernels.h"

// Internal linkage: a kernel folder's objects define no shared or weak symbols.
namespace gb_iq4xs {
namespace {

using namespace gb_arm64;
constexpr size_t kBytes = GB_IQ4XS_BLOCK_BYTES;

// The signed scale ls - 32 of sub-block s of the super-block at b.
inline int32_t scale(const uint8_t *b, int s) {
  const uint32_t sh = (uint32_t)b[2] | ((uint32_t)b[3] << 8);
  return (int32_t)(((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((sh >> (2 * s)) & 3) << 4)) - 32;
}

// Y[p*ldy + r] for positions p < m and rows [row_begin, row_end); Dot(a, b,
// x0, x1) the exact int32 products of codes a, b with activations x0, x1 in
// four lanes.
template <class Dot>
void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
           size_t row_end, size_t cols, Dot dot) {
  const size_t nsb = cols / GB_QK_K;
  const size_t rb = nsb * kBytes;
  const int8x16_t grid = vld1q_s8(gb_gguf::kIq4nlGrid);
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *row[4];
    for (size_t k = 0; k < 4; k++) row[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t sb = 0; sb < nsb; sb++) {
      const uint8_t *blk[4];
      for (int k = 0; k < 4; k++) blk[k] = row[k] + sb * kBytes;
      const float32x4_t dw = f16_scales4(blk[0], blk[1], blk[2], blk[3]);
      for (int s = 0; s < 8; s++) {
        int8x16_t wa[4], wb[4];
        int32_t ls[4];
        for (int k = 0; k < 4; k++) {
          const uint8x16_t q = vld1q_u8(blk[k] + 8 + 16 * s);
          wa[k] = vqtbl1q_s8(grid, vandq_u8(q, vdupq_n_u8(15)));
          wb[k] = vqtbl1q_s8(grid, vshrq_n_u8(q, 4));
          ls[k] = scale(blk[k], s);
        }
        const int32x4_t sc = vld1q_s32(ls);
        for (size_t p = 0; p < m; p++) {
          const gb_q8x_block &xb = XQ[p * ldxq + sb * 8 + (size_t)s];
          const int8x16_t x0 = vld1q_s8(xb.qs), x1 = vld1q_s8(xb.qs + 16);
          const int32x4_t isum =
              hsum4_s32(dot(wa[0], wb[0], x0, x1), dot(wa[1], wb[1], x0, x1), dot(wa[2], wb[2], x0, x1),
                        dot(wa[3], wb[3], x0, x1));
          const float32x4_t t = vmulq_f32(dw, vcvtq_f32_s32(vmulq_s32(isum, sc)));
          acc[p] = vfmaq_n_f32(acc[p], t, xb.d);
        }
      }
    }
    for (size_t p = 0; p < m; p++) {
      store_rows(Y + p * ldy + r, acc[p], nr);
    }
  }
}

}  // namespace
}  // namespace gb_iq4xs

#endif  // GEARBX_ARCH_ARM64_IQ4XS_GEMV_H
