// ARMv8-A Advanced SIMD q8 x q8x GEMV, one position (gemv) and several
// (gemvm), the Cortex-A53 baseline (no SDOT).
//
// Per 32-block and row the exact int32 dot product of the int8 weights and
// activations: SMULL / SMULL2 of 8-byte halves, each product widened
// pairwise (SADDLP / SADALP) so that not even -128 x -128 can overflow an
// int16 lane. Four rows are reduced together (ADDP) so lane k holds row k's
// sum, and the float work is generic's acc += (d * xd) * (float)isum, block
// after block, with separate multiplies and adds: bit-identical to
// gb_q8_gemv__generic. The row and block loops are gemv_blocks.h's
// (gb_arm64::neon::gemv_blocks / gemvm_blocks); the gemvm loads each block's
// weights once for all positions and is bit-identical per position to the
// gemv.
//
// Weight blocks are unaligned (34 bytes): byte loads and memcpy only;
// nothing is read past the last row's bytes or past xq[ceil(cols/32)).
#include <arm_neon.h>
#include <stdint.h>

#include "gemv_blocks.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::neon;

// Exact int8 x int8 dot product of 32 values, left in the 4 lanes (no
// int16 overflow even for -128 * -128: each product is widened pairwise).
inline int32x4_t dot32_s8(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
  int32x4_t s = vpaddlq_s16(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)));
  s = vpadalq_s16(s, vmull_high_s8(w0, x0));
  s = vpadalq_s16(s, vmull_s8(vget_low_s8(w1), vget_low_s8(x1)));
  s = vpadalq_s16(s, vmull_high_s8(w1, x1));
  return s;
}

inline int32x4_t dot_q8(const uint8_t *qs, int8x16_t x0, int8x16_t x1) {
  return dot32_s8(vreinterpretq_s8_u8(vld1q_u8(qs)), vreinterpretq_s8_u8(vld1q_u8(qs + 16)), x0, x1);
}

struct Q8Block {
  static constexpr size_t kBytes = 34;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    a = vreinterpretq_s8_u8(vld1q_u8(blk + 2));
    b = vreinterpretq_s8_u8(vld1q_u8(blk + 18));
  }
  static inline int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) { return dot32_s8(a, b, x0, x1); }
};

}  // namespace

extern "C" void gb_q8_gemv__neon(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                 size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<34, dot_q8>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q8_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                  const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  gemvm_blocks<Q8Block>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
