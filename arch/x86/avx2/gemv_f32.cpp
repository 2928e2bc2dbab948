// AVX2 + FMA f32 GEMV: two read streams of single rows (avx2_common.h,
// float_gemv2), two fused accumulators per row (16 columns, one cache line,
// per step), masked loads for the column tail. A different summation order
// than generic (within the tests' tolerance), but a row is computed the
// same way whichever tile it falls in, so results do not depend on the row
// range a thread is given, and the gemvm equals the gemv bit for bit.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2_common.h"
#include "kernels.h"

namespace {
using namespace gb_avx2;
struct F32 {
  static constexpr size_t kStep = 16, kBytes = 4;
  static __m256 load8(const uint8_t *row, size_t c) { return _mm256_loadu_ps(reinterpret_cast<const float *>(row) + c); }
  static __m256 tail8(const uint8_t *row, size_t c, size_t rem) {
    return _mm256_maskload_ps(reinterpret_cast<const float *>(row) + c, tail_mask(rem));
  }
};
}  // namespace

extern "C" void gb_f32_gemv__avx2(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  float_gemv2<F32>(y, W, x, row_begin, row_end, cols);
}

// Multi-position: gemv's per-row order, tiled 2 rows x 3 positions
// (avx2_common.h, float_gemvm).
extern "C" void gb_f32_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  float_gemvm<F32>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}
