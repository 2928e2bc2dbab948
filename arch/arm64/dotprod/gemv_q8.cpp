// ARMv8.2-A SDOT q8 x q8x GEMV, one position (gemv) and several (gemvm).
//
// Per 32-block and row, two SDOTs give the exact int32 sum in four lanes;
// four rows are reduced together (ADDP) so lane k holds row k's sum, and
// the float work is generic's acc += (d * xd) * (float)isum, block after
// block with separate multiplies and adds: bit-identical to
// gb_q8_gemv__generic. The row and block loops are gemv_blocks.h's
// (gb_arm64::sdot::gemv_blocks / gemvm_blocks); the gemvm loads each block's
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

using namespace gb_arm64::sdot;

inline int32x4_t dot_q8(const uint8_t *qs, int8x16_t x0, int8x16_t x1, int32x4_t init) {
  const int8x16_t w0 = vreinterpretq_s8_u8(vld1q_u8(qs));
  const int8x16_t w1 = vreinterpretq_s8_u8(vld1q_u8(qs + 16));
  return vdotq_s32(vdotq_s32(init, w0, x0), w1, x1);
}

struct Q8Block {
  static constexpr size_t kBytes = 34;
  static constexpr bool kQ4 = false;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    a = vreinterpretq_s8_u8(vld1q_u8(blk + 2));
    b = vreinterpretq_s8_u8(vld1q_u8(blk + 18));
  }
};

}  // namespace

extern "C" void gb_q8_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<34, false, dot_q8>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q8_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gemvm_blocks<Q8Block>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
