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

extern "C" void gb_f32_row_to_f32__generic(float *out, const uint8_t *row, size_t cols) {
  memcpy(out, row, cols * 4);
}
