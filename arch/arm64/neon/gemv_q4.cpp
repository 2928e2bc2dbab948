// ARMv8-A Advanced SIMD q4 x q8x GEMV, one position (gemv) and several
// (gemvm), the Cortex-A53 baseline (no SDOT).
//
// A q4 block's 16 bytes of nibbles are unpacked in registers: low nibbles
// are weights 0..15, high nibbles 16..31, both minus 8 (range -8..7), and
// multiplied with the int8 activations by SMULL / SMLAL (four products per
// int16 lane cannot overflow: 4 * 8 * 128 = 4096), then widened pairwise
// (SADDLP): the exact int32 block sum. Four rows are reduced together
// (ADDP) so lane k holds row k's sum, and the float work is generic's
// acc += (d * xd) * (float)isum, block after block, with separate multiplies
// and adds: bit-identical to gb_q4_gemv__generic. The row and block loops
// are gemv_blocks.h's (gb_arm64::neon::gemv_blocks / gemvm_blocks); the
// gemvm unpacks each block's weights once for all positions and is
// bit-identical per position to the gemv.
//
// Weight blocks are unaligned (18 bytes): byte loads and memcpy only;
// nothing is read past the last row's bytes or past xq[ceil(cols/32)).
#include <arm_neon.h>
#include <stdint.h>

#include "gemv_blocks.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::neon;

// q4 block: 16 bytes of nibbles; low nibbles are weights 0..15, high 16..31,
// both minus 8 (range -8..7, so four products per int16 lane cannot
// overflow: 4 * 8 * 128 = 4096).
inline int32x4_t dot_q4(const uint8_t *qs, int8x16_t x0, int8x16_t x1) {
  const uint8x16_t q = vld1q_u8(qs);
  const int8x16_t eight = vdupq_n_s8(8);
  const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), eight);
  const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
  int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(x0));
  p = vmlal_high_s8(p, lo, x0);
  p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(x1));
  p = vmlal_high_s8(p, hi, x1);
  return vpaddlq_s16(p);
}

struct Q4Block {
  static constexpr size_t kBytes = 18;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    const uint8x16_t q = vld1q_u8(blk + 2);
    const int8x16_t eight = vdupq_n_s8(8);
    a = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), eight);
    b = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
  }
  // |w| <= 8: four products per int16 lane cannot overflow (as dot_q4).
  static inline int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) {
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(x0));
    p = vmlal_high_s8(p, a, x0);
    p = vmlal_s8(p, vget_low_s8(b), vget_low_s8(x1));
    p = vmlal_high_s8(p, b, x1);
    return vpaddlq_s16(p);
  }
};

}  // namespace

extern "C" void gb_q4_gemv__neon(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                 size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<18, dot_q4>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q4_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                  const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  gemvm_blocks<Q4Block>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
