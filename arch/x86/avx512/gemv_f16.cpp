// AVX-512 f16 GEMV: one row at a time (one sequential read stream, as in
// gemv_q8.cpp), binary16 widened 16 at a time with the 512-bit vcvtph2ps and
// fused into four f32 accumulators, 64 columns (two cache lines) per step;
// then 16-column steps and a masked tail (masked loads read no byte past the
// row). The row's result is (a0 + a1) + (a2 + a3) reduced in a fixed order:
// it depends only on the row and x, never on the row range or the other
// rows, and differs from the generic kernel's only by rounding.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"


namespace {

inline __m512 load16h(const uint8_t *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
}

// Rows w[0..R) against x; per row two accumulators (the two halves of each
// 32-column step), the tail's 16-column steps into the first and the masked
// remainder into the second, then a0 + a1 reduced: the same operations per
// row whatever R, so a row's result does not depend on its group.
template <int R>
__attribute__((always_inline)) inline void f16_rows(float *y, const uint8_t *const *w, const float *x, size_t cols) {
  __m512 a0[R], a1[R];
  for (int i = 0; i < R; i++) a0[i] = a1[i] = _mm512_setzero_ps();
  size_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16);
    for (int i = 0; i < R; i++) {
      a0[i] = _mm512_fmadd_ps(load16h(w[i] + 2 * c), x0, a0[i]);
      a1[i] = _mm512_fmadd_ps(load16h(w[i] + 2 * c + 32), x1, a1[i]);
    }
  }
  for (; c + 16 <= cols; c += 16) {
    const __m512 x0 = _mm512_loadu_ps(x + c);
    for (int i = 0; i < R; i++) a0[i] = _mm512_fmadd_ps(load16h(w[i] + 2 * c), x0, a0[i]);
  }
  if (c < cols) {
    const __mmask16 k = (__mmask16)((1u << (cols - c)) - 1);
    const __m512 xt = _mm512_maskz_loadu_ps(k, x + c);
    for (int i = 0; i < R; i++) a1[i] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, w[i] + 2 * c)), xt, a1[i]);
  }
  for (int i = 0; i < R; i++) y[i] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i], a1[i]));
}

// Rows [r0, r1) of W (row stride 2 * cols) into y[r - r0], R rows at a time
// (then one at a time).
template <int R>
inline void f16_range(float *y, const uint8_t *W, const float *x, size_t r0, size_t r1, size_t cols) {
  const size_t rb = 2 * cols;
  size_t r = r0;
  for (; r + R <= r1; r += R) {
    const uint8_t *w[R];
    for (int i = 0; i < R; i++) w[i] = W + (r + i) * rb;
    f16_rows<R>(y + (r - r0), w, x, cols);
  }
  for (; r < r1; r++) {
    const uint8_t *w[1] = {W + r * rb};
    f16_rows<1>(y + (r - r0), w, x, cols);
  }
}

// One row at a time reads the matrix as one stream, the fastest way from
// memory here while x (4 bytes a column) stays in the 32-48 KiB L1 data
// cache next to the weights streaming through; longer rows re-read x from
// L2 for every row, and four rows sharing each load of x are faster
// (bench_gemv, 4096 vs 11008 columns: docs/RESULTS.md).
constexpr size_t kLongRow = 6144;
inline void f16_any(float *y, const uint8_t *W, const float *x, size_t r0, size_t r1, size_t cols) {
  if (cols <= kLongRow) {
    f16_range<1>(y, W, x, r0, r1, cols);
  } else {
    f16_range<4>(y, W, x, r0, r1, cols);
  }
}

}  // namespace

extern "C" void gb_f16_gemv__avx512(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                    size_t row_begin, size_t row_end, size_t cols) {
  f16_any(y + row_begin, W, x, row_begin, row_end, cols);
}

// Multi-position: the row from memory once, from cache for the other
// positions; per (row, position) the gemv's function: bit-identical to it.
extern "C" void gb_f16_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                     const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                     size_t cols) {
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t e = r + 4 < row_end ? r + 4 : row_end;
    for (size_t p = 0; p < m; p++) f16_any(Y + p * ldy + r, W, X + p * ldx, r, e, cols);
  }
}
