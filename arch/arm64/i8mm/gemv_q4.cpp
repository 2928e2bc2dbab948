// ARMv8.6-A I8MM q4 x q8x GEMV with SMMLA (vmmlaq_s32), one position (gemv)
// and several (gemvm).
//
// A q4 block's nibbles are unpacked in registers to signed bytes (low
// nibbles: weights 0..15, high nibbles: 16..31, both minus 8), then two
// rows' weights go against one activation block per four SMMLAs, four rows
// a step merged with UZP1 (the loops of gemv_blocks.h:
// gb_arm64::i8mm::gemv_blocks / gemvm_blocks, which describe the operand
// layout); a last odd row is paired with itself. Only NEON + I8MM
// instructions are used (the kernel's requirement is GB_ISA_NEON |
// GB_ISA_I8MM; no SDOT even though the folder's flags allow it). The
// per-block int32 sums are exact and the float work is generic's
// acc += (d * xd) * (float)isum, block after block, unfused: bit-identical
// to gb_q4_gemv__generic; the gemvm unpacks each block's weights once for
// all positions and is bit-identical per position to the gemv.
//
// Weight blocks are unaligned (18 bytes): byte loads and memcpy only;
// nothing is read past the last row's bytes or past xq[ceil(cols/32)).
#include <arm_neon.h>
#include <stdint.h>

#include "gemv_blocks.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::i8mm;

// Weights 0..15 and 16..31 of a block as signed bytes (nibble - 8).
struct Q4 {
  static constexpr size_t kBlockBytes = 18;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    const uint8x16_t q = vld1q_u8(blk + 2);
    const int8x16_t eight = vdupq_n_s8(8);
    a = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), eight);
    b = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
  }
};

}  // namespace

extern "C" void gb_q4_gemv__i8mm(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                 size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<Q4>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q4_gemvm__i8mm(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                  const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  gemvm_blocks<Q4>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
