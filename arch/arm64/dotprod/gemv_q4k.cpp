// ARMv8.2-A SDOT q4k x q8x GEMV, one position (gemv) and several (gemvm).
//
// A q4k super-block (144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales
// and mins, 128 bytes of nibbles) is unpacked once per row into codes 0..15
// and eight integer scales and mins; per activation block (= sub-block of
// 32) the exact int32 sum, times the scale, and the block's activation sum
// times the min; then acc += xd * (d * (float)(sc * isum) - dmin * (float)(mn
// * xsum)) on the super-block's 8 blocks in two vectors.
// Products by SDOT from zero (four lanes per 16 weights).
// A super-block's partial sums are reduced with ADDP (lane s: block s);
// integer parts are exact.
// The row and super-block loop is kquant_common.h's
// (gb_arm64::kquant::gemvm_superblocks): the gemv is its one-position case,
// so the gemvm is bit-identical per position to the gemv, and it unpacks
// each row's super-block once for all positions.
//
// Super-blocks are unaligned: byte loads and memcpy only; nothing is read
// past the last row's bytes or past xq[cols / 32).
#include <arm_neon.h>
#include <stdint.h>

#include "arm64/kquant_common.h"
#include "kernels.h"
#include "kquant_dot.h"

namespace {

using namespace gb_arm64;

struct Q4KBlock {
  static constexpr size_t kBytes = GB_Q4K_BLOCK_BYTES;
  using Weights = kquant::Q4KWeights;
  static inline void unpack(const uint8_t *blk, Weights &w) { kquant::unpack_q4k(blk, w); }
  static inline void acc(const Weights &w, const gb_q8x_block *xb, const kquant::XS &xs, float32x4_t a[2]) {
    kquant::acc_q4k<sdot::KquantDot>(w, xb, xs, a);
  }
};

}  // namespace

extern "C" void gb_q4k_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                     size_t row_begin, size_t row_end, size_t cols) {
  kquant::gemvm_superblocks<Q4KBlock, 1>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);
}

extern "C" void gb_q4k_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                      const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                      size_t row_end, size_t cols) {
  kquant::gemvm_superblocks<Q4KBlock, GB_GEMVM_MAX_M>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
