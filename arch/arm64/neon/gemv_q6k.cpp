// ARMv8-A Advanced SIMD q6k x q8x GEMV, one position (gemv) and several (gemvm),
// the Cortex-A53 baseline (no SDOT).
//
// A q6k super-block (210 bytes: 128 bytes of low nibbles, 64 of high bit
// pairs, 16 int8 scales, f16 d) is unpacked once per row into codes - 32
// (-32..31) and sixteen integer scales; per 16-value sub-block the exact
// int32 sum times its scale, the two of an activation block added; then
// acc += xd * (d * (float)is) on the super-block's 8 blocks in two vectors.
// Products by SMULL / SMLAL into int16 lanes, widened pairwise (SADDLP).
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

struct Q6KBlock {
  static constexpr size_t kBytes = GB_Q6K_BLOCK_BYTES;
  using Weights = kquant::Q6KWeights;
  static inline void unpack(const uint8_t *blk, Weights &w) { kquant::unpack_q6k(blk, w); }
  static inline void acc(const Weights &w, const gb_q8x_block *xb, const kquant::XS &xs, float32x4_t a[2]) {
    kquant::acc_q6k<neon::KquantDot>(w, xb, xs, a);
  }
};

}  // namespace

extern "C" void gb_q6k_gemv__neon(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                  size_t row_begin, size_t row_end, size_t cols) {
  kquant::gemvm_superblocks<Q6KBlock, 1>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);
}

extern "C" void gb_q6k_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                   const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                   size_t row_end, size_t cols) {
  kquant::gemvm_superblocks<Q6KBlock, GB_GEMVM_MAX_M>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
