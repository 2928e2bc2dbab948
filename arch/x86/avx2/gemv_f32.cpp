// AVX2 + FMA f32 GEMV: four rows at a time sharing each load of x, two
// fused accumulators per row (16 columns, one cache line per row, per step),
// masked loads for the column tail, software prefetch (kPrefetch). A
// different summation order than generic (within the tests' tolerance), but
// a row is computed the same way whichever group it falls in, so results do
// not depend on the row range a thread is given.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace {

// Software prefetch. The rows of a group are adjacent in memory, so the
// hardware prefetchers' streams run into each other. Each row i prefetches
// kPrefetch bytes ahead in its own stream: row i, then row i + 4 of the next
// group, and so on. Offsets from the current position: `near` before byte
// `split` of the row, `far` after; 0 (the current line) past the rows in range.
constexpr size_t kPrefetch = 2048;

struct Prefetch {
  size_t split, near, far;
};

inline Prefetch prefetch_plan(size_t rb, size_t groups_after) {
  const size_t k = kPrefetch / rb;
  Prefetch p;
  p.split = rb - kPrefetch % rb;
  p.near = k <= groups_after ? kPrefetch + 3 * rb * k : 0;
  p.far = k + 1 <= groups_after ? kPrefetch + 3 * rb * (k + 1) : 0;
  return p;
}

// Lanes i < rem set: a mask for _mm256_maskload_ps (rem in 1..7).
inline __m256i tail_mask(size_t rem) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// [sum(a0), sum(a1), sum(a2), sum(a3)], each lane reduced in the same order.
inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

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
  if (R == 4) {
    _mm_storeu_ps(y + r, sum);
  } else {
    float t[4];
    _mm_storeu_ps(t, sum);
    for (int i = 0; i < R; i++) y[r + i] = t[i];
  }
}

}  // namespace

extern "C" void gb_f32_gemv__avx2(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = cols * 4;
  const Prefetch none = {0, 0, 0};
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) f32_rows<4>(y, W, x, r, cols, prefetch_plan(rb, (row_end - r) / 4 - 1));
  switch (row_end - r) {
    case 3: f32_rows<3>(y, W, x, r, cols, none); break;
    case 2: f32_rows<2>(y, W, x, r, cols, none); break;
    case 1: f32_rows<1>(y, W, x, r, cols, none); break;
    default: break;
  }
}
