// Generic f32 GEMV and row expansion: the reference every f32 kernel is tested against.
#include "../kernels.h"

#include <string.h>

extern "C" void gb_f32_gemv__generic(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                     size_t row_begin, size_t row_end, size_t cols) {
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * cols * 4;
    float acc = 0.0f;
    for (size_t c = 0; c < cols; c++) {
      float w;
      memcpy(&w, row + 4 * c, 4);
      acc += w * x[c];
    }
    y[r] = acc;
  }
}

// Multi-position: each weight is loaded once and applied to the m positions,
// each with its own accumulator in gemv's column order.
extern "C" void gb_f32_gemvm__generic(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                      const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                      size_t cols) {
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * cols * 4;
    float acc[GB_GEMVM_MAX_M];
    for (size_t i = 0; i < m; i++) acc[i] = 0.0f;
    for (size_t c = 0; c < cols; c++) {
      float w;
      memcpy(&w, row + 4 * c, 4);
      for (size_t i = 0; i < m; i++) acc[i] += w * X[i * ldx + c];
    }
    for (size_t i = 0; i < m; i++) Y[i * ldy + r] = acc[i];
  }
}

static void f32_row_to_f32(float *out, const uint8_t *row, size_t cols) {
  memcpy(out, row, cols * 4);
}

extern "C" void gb_f32_rows_to_f32__generic(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = 4 * cols;
  for (size_t r = row_begin; r < row_end; r++) f32_row_to_f32(out + (r - row_begin) * cols, W + r * rb, cols);
}
