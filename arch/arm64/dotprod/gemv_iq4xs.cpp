// ARMv8.2-A SDOT GEMV of GGUF's IQ4_XS: arch/arm64/iq4xs_gemv.h's driver
// with the products of four codes and four activations summed per int32
// lane by SDOT (exact).
#include "arm64/iq4xs_gemv.h"

namespace {

inline int32x4_t sdot2(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) {
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a, x0), b, x1);
}

}  // namespace

extern "C" void gb_iq4xs_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                       size_t row_begin, size_t row_end, size_t cols) {
  gb_iq4xs::gemvm(y, 0, W, xq, 0, 1, row_begin, row_end, cols, sdot2);
}
extern "C" void gb_iq4xs_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                        const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                        size_t row_end, size_t cols) {
  gb_iq4xs::gemvm(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols, sdot2);
}
