// AVX2 + FMA + F16C f16 GEMV: binary16 weights widened with vcvtph2ps, f32
// accumulation; two read streams of single rows (avx2_common.h,
// float_gemv2), two fused accumulators per row, 32 columns (one cache line
// per row) per step. A different summation order than generic (within the
// tests' tolerance), but a row is computed the same way whichever tile it
// falls in, so results do not depend on the row range, and the gemvm equals
// the gemv bit for bit. The column tail (< 8) is copied into a zeroed buffer
// so no byte past the row is read.
// Also the f16 row expansion (bit-identical to generic: groups holding
// inf/NaN take the scalar path).
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "f16.h"
#include "avx2_common.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;

inline __m256 load8h(const uint8_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

struct F16 {
  static constexpr size_t kStep = 32, kBytes = 2;
  static __m256 load8(const uint8_t *row, size_t c) { return load8h(row + 2 * c); }
  static __m256 tail8(const uint8_t *row, size_t c, size_t rem) {
    uint8_t buf[16] = {0};
    memcpy(buf, row + 2 * c, rem * 2);
    return load8h(buf);
  }
};
}  // namespace

extern "C" void gb_f16_gemv__avx2(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  float_gemv2<F16>(y, W, x, row_begin, row_end, cols);
}

// Multi-position: gemv's per-row order, tiled 2 rows x 3 positions
// (avx2_common.h, float_gemvm); each 8 weights widened once per tile.
extern "C" void gb_f16_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  float_gemvm<F16>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}

static void f16_row_to_f32(float *out, const uint8_t *row, size_t cols) {
  const __m128i expmask = _mm_set1_epi16(0x7c00);
  size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * c));
    // vcvtph2ps quiets signalling NaNs; the generic conversion keeps the
    // payload as is. Groups holding inf/NaN go the scalar way (bit-identical).
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, expmask), expmask)) == 0) {
      _mm256_storeu_ps(out + c, _mm256_cvtph_ps(h));
    } else {
      for (size_t j = c; j < c + 8; j++) out[j] = gb::f16_to_f32((uint16_t)(row[2 * j] | (row[2 * j + 1] << 8)));
    }
  }
  for (; c < cols; c++) out[c] = gb::f16_to_f32((uint16_t)(row[2 * c] | (row[2 * c + 1] << 8)));
}

extern "C" void gb_f16_rows_to_f32__avx2(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = 2 * cols;
  for (size_t r = row_begin; r < row_end; r++) f16_row_to_f32(out + (r - row_begin) * cols, W + r * rb, cols);
}
