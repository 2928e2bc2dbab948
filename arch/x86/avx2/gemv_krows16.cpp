// q4kr16 / q6kr16 (the 16-row K-quant layout, arch/krows16.h) through this
// folder's row-major q4k / q6k kernels, on rows gathered out of their group
// a few super-blocks at a time (gb_krows16::adapt_gemv / adapt_gemvm).
#include "kernels.h"
#include "krows16.h"

extern "C" void gb_q4kr16_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gb_krows16::adapt_gemv<GB_Q4K_BLOCK_BYTES>(gb_q4k_gemv__avx2, y, W, xq, row_begin, row_end, cols);
}
extern "C" void gb_q4kr16_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                      size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gb_krows16::adapt_gemvm<GB_Q4K_BLOCK_BYTES>(gb_q4k_gemvm__avx2, Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
extern "C" void gb_q6kr16_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gb_krows16::adapt_gemv<GB_Q6K_BLOCK_BYTES>(gb_q6k_gemv__avx2, y, W, xq, row_begin, row_end, cols);
}
extern "C" void gb_q6kr16_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                      size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gb_krows16::adapt_gemvm<GB_Q6K_BLOCK_BYTES>(gb_q6k_gemvm__avx2, Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
