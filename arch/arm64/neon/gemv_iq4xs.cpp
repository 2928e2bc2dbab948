// ARMv8-A Advanced SIMD GEMV of GGUF's IQ4_XS, the Cortex-A53 baseline (no
// SDOT): arch/arm64/iq4xs_gemv.h's driver with products by SMULL / SMLAL
// into int16 lanes, two per lane (2 * 127 * 128), widened pairwise (SADDLP
// / SADALP) to exact int32 sums.
#include "arm64/iq4xs_gemv.h"

namespace {

inline int32x4_t dot2(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) {
  const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(x0)), a, x0);
  const int16x8_t q = vmlal_high_s8(vmull_s8(vget_low_s8(b), vget_low_s8(x1)), b, x1);
  return vpadalq_s16(vpaddlq_s16(p), q);
}

}  // namespace

extern "C" void gb_iq4xs_gemv__neon(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                    size_t row_end, size_t cols) {
  gb_iq4xs::gemvm(y, 0, W, xq, 0, 1, row_begin, row_end, cols, dot2);
}
extern "C" void gb_iq4xs_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                     size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gb_iq4xs::gemvm(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols, dot2);
}
