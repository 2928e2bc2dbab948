// ARMv8.2-A SDOT q4 x q8x GEMV, one position (gemv) and several (gemvm).
//
// A q4 block's nibbles are dotted as codes u in 0..15 (low nibbles: weights
// 0..15, high nibbles: 16..31; AND 15, USHR 4) by two SDOTs from an
// accumulator that starts at -8 x the activations' sums (two more SDOTs per
// block, shared by the rows), so the lanes add up to sum((u - 8) * x),
// exactly. Four rows are reduced together (ADDP) so lane k holds row k's
// sum, and the float work is generic's acc += (d * xd) * (float)isum, block
// after block with separate multiplies and adds: bit-identical to
// gb_q4_gemv__generic. The row and block loops are gemv_blocks.h's
// (gb_arm64::sdot::gemv_blocks / gemvm_blocks); the gemvm unpacks each
// block's weights once for all positions and is bit-identical per position
// to the gemv.
//
// Weight blocks are unaligned (18 bytes): byte loads and memcpy only;
// nothing is read past the last row's bytes or past xq[ceil(cols/32)).
#include <arm_neon.h>
#include <stdint.h>

#include "gemv_blocks.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::sdot;

// Low nibbles: weights 0..15, high nibbles: 16..31, as codes u in 0..15
// (int8 as they are); `init` holds -8 x the activations' sums in the same
// four lanes, so the lanes add up to sum((u - 8) * x), exactly.
inline int32x4_t dot_q4(const uint8_t *qs, int8x16_t x0, int8x16_t x1, int32x4_t init) {
  const uint8x16_t q = vld1q_u8(qs);
  const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15)));
  const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
  return vdotq_s32(vdotq_s32(init, lo, x0), hi, x1);
}

struct Q4Block {
  static constexpr size_t kBytes = 18;
  static constexpr bool kQ4 = true;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {  // codes 0..15 (see dot_q4)
    const uint8x16_t q = vld1q_u8(blk + 2);
    a = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15)));
    b = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
  }
};

}  // namespace

extern "C" void gb_q4_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<18, true, dot_q4>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q4_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gemvm_blocks<Q4Block>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
