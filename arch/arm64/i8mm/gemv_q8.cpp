// ARMv8.6-A I8MM q8 x q8x GEMV with SMMLA (vmmlaq_s32), one position (gemv)
// and several (gemvm).
//
// Two rows' int8 weights against one activation block per four SMMLAs, four
// rows a step merged with UZP1 (the loops of gemv_blocks.h:
// gb_arm64::i8mm::gemv_blocks / gemvm_blocks, which describe the operand
// layout); a last odd row is paired with itself. Only NEON + I8MM
// instructions are used (the kernel's requirement is GB_ISA_NEON |
// GB_ISA_I8MM; no SDOT even though the folder's flags allow it). The
// per-block int32 sums are exact and the float work is generic's
// acc += (d * xd) * (float)isum, block after block, unfused: bit-identical
// to gb_q8_gemv__generic; the gemvm builds each block's operands once for
// all positions and is bit-identical per position to the gemv.
//
// Weight blocks are unaligned (34 bytes): byte loads and memcpy only;
// nothing is read past the last row's bytes or past xq[ceil(cols/32)).
#include <arm_neon.h>
#include <stdint.h>

#include "gemv_blocks.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::i8mm;

// Weights 0..15 and 16..31 of a block as signed bytes.
struct Q8 {
  static constexpr size_t kBlockBytes = 34;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    a = vreinterpretq_s8_u8(vld1q_u8(blk + 2));
    b = vreinterpretq_s8_u8(vld1q_u8(blk + 18));
  }
};

}  // namespace

extern "C" void gb_q8_gemv__i8mm(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                 size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<Q8>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q8_gemvm__i8mm(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                  const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  gemvm_blocks<Q8>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
