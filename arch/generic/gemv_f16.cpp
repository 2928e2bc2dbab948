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

extern "C" void gb_f16_row_to_f32__generic(float *out, const uint8_t *row, size_t cols) {
  for (size_t c = 0; c < cols; c++) out[c] = gb::f16_to_f32((uint16_t)(row[2 * c] | (row[2 * c + 1] << 8)));
}
