// AVX2 + FMA f32 GEMV: four rows at a time sharing each load of x, two
// fused accumulators per row (16 columns, one cache line per row, per step),
// masked loads for the column tail, software prefetch (kPrefetch). A
// different summation order than generic (within the tests' tolerance), but
// a row is computed the same way whichever group it falls in, so results do
// not depend on the row range a thread is given.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2_common.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;
constexpr size_t kPrefetch = 2048;  // bytes ahead per row stream (avx2_common.h)

// Columns [c, c + 16) of rows w[0..R).
template <int R>
__attribute__((always_inline)) inline void f32_step(__m256 *a0, __m256 *a1, const float *const *w, const float *x,
                                                    size_t c, size_t pf) {
  const __m256 x0 = _mm256_loadu_ps(x + c);
  const __m256 x1 = _mm256_loadu_ps(x + c + 8);
  for (int i = 0; i < R; i++) {
    _mm_prefetch(reinterpret_cast<const char *>(w[i] + c) + pf, _MM_HINT_T0);
    a0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(w[i] + c), x0, a0[i]);
    a1[i] = _mm256_fmadd_ps(_mm256_loadu_ps(w[i] + c + 8), x1, a1[i]);
  }
}

template <int R>
inline void f32_rows(float *y, const uint8_t *W, const float *x, size_t r, size_t cols, const Prefetch &pf) {
  const size_t rb = cols * 4;
  const float *w[R];
  __m256 a0[R], a1[R];
  for (int i = 0; i < R; i++) {
    w[i] = reinterpret_cast<const float *>(W + (r + i) * rb);
    a0[i] = _mm256_setzero_ps();
    a1[i] = _mm256_setzero_ps();
  }
  const size_t split = pf.split / 4;
  size_t c = 0;
  for (; c + 16 <= split; c += 16) f32_step<R>(a0, a1, w, x, c, pf.near);
  for (; c + 16 <= cols; c += 16) f32_step<R>(a0, a1, w, x, c, pf.far);
  if (c + 8 <= cols) {
    const __m256 x0 = _mm256_loadu_ps(x + c);
    for (int i = 0; i < R; i++) a0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(w[i] + c), x0, a0[i]);
    c += 8;
  }
  if (c < cols) {
    const __m256i m = tail_mask(cols - c);
    const __m256 x1 = _mm256_maskload_ps(x + c, m);
    for (int i = 0; i < R; i++) a1[i] = _mm256_fmadd_ps(_mm256_maskload_ps(w[i] + c, m), x1, a1[i]);
  }
  __m256 s[4];
  for (int i = 0; i < 4; i++) s[i] = i < R ? _mm256_add_ps(a0[i], a1[i]) : _mm256_setzero_ps();
  const __m128 sum = hsum4(s[0], s[1], s[2], s[3]);
  store_lanes<R>(y + r, sum);
}

}  // namespace

extern "C" void gb_f32_gemv__avx2(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = cols * 4;
  for_row_groups<kPrefetch>(row_begin, row_end, rb, [&](auto R, size_t r, Prefetch pf) {
    f32_rows<decltype(R)::value>(y, W, x, r, cols, pf);
  });
}

// Multi-position: gemv's per-row order, tiled 2 rows x 3 positions
// (avx2_common.h, float_gemvm).
namespace {
struct F32 {
  static constexpr size_t kStep = 16, kBytes = 4;
  static __m256 load8(const uint8_t *row, size_t c) { return _mm256_loadu_ps(reinterpret_cast<const float *>(row) + c); }
  static __m256 tail8(const uint8_t *row, size_t c, size_t rem) {
    return _mm256_maskload_ps(reinterpret_cast<const float *>(row) + c, tail_mask(rem));
  }
};
}  // namespace

extern "C" void gb_f32_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  float_gemvm<F32>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}
