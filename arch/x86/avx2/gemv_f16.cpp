// AVX2 + FMA + F16C f16 GEMV: binary16 weights widened with vcvtph2ps, f32
// accumulation; four rows at a time sharing each load of x, two fused
// accumulators per row, 32 columns (one cache line per row) per step,
// software prefetch. A different summation order than generic (within the
// tests' tolerance), but a row is computed the same way whichever group it
// falls in, so results do not depend on the row range. The column tail (< 8)
// is copied into a zeroed buffer so no byte past the row is read.
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
constexpr size_t kPrefetch = 2048;  // bytes ahead per row stream (avx2_common.h)

inline __m256 load8h(const uint8_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

// Columns [c, c + 32) (one cache line) of rows w[0..R).
template <int R>
__attribute__((always_inline)) inline void f16_step(__m256 *a0, __m256 *a1, const uint8_t *const *w, const float *x,
                                                    size_t c, size_t pf) {
  const __m256 x0 = _mm256_loadu_ps(x + c);
  const __m256 x1 = _mm256_loadu_ps(x + c + 8);
  const __m256 x2 = _mm256_loadu_ps(x + c + 16);
  const __m256 x3 = _mm256_loadu_ps(x + c + 24);
  for (int i = 0; i < R; i++) {
    const uint8_t *p = w[i] + 2 * c;
    _mm_prefetch(reinterpret_cast<const char *>(p + pf), _MM_HINT_T0);
    a0[i] = _mm256_fmadd_ps(load8h(p), x0, a0[i]);
    a1[i] = _mm256_fmadd_ps(load8h(p + 16), x1, a1[i]);
    a0[i] = _mm256_fmadd_ps(load8h(p + 32), x2, a0[i]);
    a1[i] = _mm256_fmadd_ps(load8h(p + 48), x3, a1[i]);
  }
}

template <int R>
inline void f16_rows(float *y, const uint8_t *W, const float *x, size_t r, size_t cols, const Prefetch &pf) {
  const size_t rb = cols * 2;
  const uint8_t *w[R];
  __m256 a0[R], a1[R];
  for (int i = 0; i < R; i++) {
    w[i] = W + (r + i) * rb;
    a0[i] = _mm256_setzero_ps();
    a1[i] = _mm256_setzero_ps();
  }
  const size_t split = pf.split / 2;
  size_t c = 0;
  for (; c + 32 <= split; c += 32) f16_step<R>(a0, a1, w, x, c, pf.near);
  for (; c + 32 <= cols; c += 32) f16_step<R>(a0, a1, w, x, c, pf.far);
  for (; c + 8 <= cols; c += 8) {
    const __m256 x0 = _mm256_loadu_ps(x + c);
    for (int i = 0; i < R; i++) a0[i] = _mm256_fmadd_ps(load8h(w[i] + 2 * c), x0, a0[i]);
  }
  if (c < cols) {
    const size_t rem = cols - c;
    const __m256 x1 = _mm256_maskload_ps(x + c, tail_mask(rem));
    for (int i = 0; i < R; i++) {
      uint8_t buf[16] = {0};
      memcpy(buf, w[i] + 2 * c, rem * 2);
      a1[i] = _mm256_fmadd_ps(load8h(buf), x1, a1[i]);
    }
  }
  __m256 s[4];
  for (int i = 0; i < 4; i++) s[i] = i < R ? _mm256_add_ps(a0[i], a1[i]) : _mm256_setzero_ps();
  const __m128 sum = hsum4(s[0], s[1], s[2], s[3]);
  store_lanes<R>(y + r, sum);
}

}  // namespace

extern "C" void gb_f16_gemv__avx2(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = cols * 2;
  for_row_groups<kPrefetch>(row_begin, row_end, rb, [&](auto R, size_t r, Prefetch pf) {
    f16_rows<decltype(R)::value>(y, W, x, r, cols, pf);
  });
}

// Multi-position: gemv's per-row order, tiled 2 rows x 3 positions
// (avx2_common.h, float_gemvm); each 8 weights widened once per tile.
namespace {
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
