// Generic f16 GEMV: binary16 weights widened to f32, f32 accumulation.
#include "../f16.h"
#include "../kernels.h"

extern "C" void gb_f16_gemv__generic(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                     size_t row_begin, size_t row_end, size_t cols) {
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * cols * 2;
    float acc = 0.0f;
    for (size_t c = 0; c < cols; c++) {
      uint16_t h = (uint16_t)(row[2 * c] | (row[2 * c + 1] << 8));
      acc += gb::f16_to_f32(h) * x[c];
    }
    y[r] = acc;
  }
}

// Multi-position: each weight is widened once and applied to the m
// positions, each with its own accumulator in gemv's column order.
extern "C" void gb_f16_gemvm__generic(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                      const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                      size_t cols) {
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * cols * 2;
    float acc[GB_GEMVM_MAX_M];
    for (size_t i = 0; i < m; i++) acc[i] = 0.0f;
    for (size_t c = 0; c < cols; c++) {
      const float w = gb::f16_to_f32((uint16_t)(row[2 * c] | (row[2 * c + 1] << 8)));
      for (size_t i = 0; i < m; i++) acc[i] += w * X[i * ldx + c];
    }
    for (size_t i = 0; i < m; i++) Y[i * ldy + r] = acc[i];
  }
}

static void f16_row_to_f32(float *out, const uint8_t *row, size_t cols) {
  for (size_t c = 0; c < cols; c++) out[c] = gb::f16_to_f32((uint16_t)(row[2 * c] | (row[2 * c + 1] << 8)));
}

extern "C" void gb_f16_rows_to_f32__generic(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = 2 * cols;
  for (size_t r = row_begin; r < row_end; r++) f16_row_to_f32(out + (r - row_begin) * cols, W + r * rb, cols);
}
