// krows16_avx2.h — the driver the AVX2 16-row K-quant GEMVs share
// (gemv_q4kr16.cpp, gemv_q6kr16.cpp): two ymm per 16-row group (rows 0-7,
// 8-15), the group's super-blocks one after another, the activations
// arranged per chunk of super-blocks; each chunk's sums add to y. A format
// supplies
//   struct F {
//     static constexpr size_t kGsb;      // bytes of one group super-block (16 blocks)
//     struct XSb;                        // one super-block's arranged activations
//     static void arrange(XSb *, const gb_q8x_block *x);        // x: its 8 blocks
//     static void sb_dot(__m256 acc[2], const uint8_t *g, const gb_q8x_block *x, const XSb &);
//   };
// Everything is static inline: each folder's TU keeps its own copy.
#pragma once

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace gb_avx2_krows16 {

constexpr size_t kPrefetch = 4096;  // bytes ahead of the group stream, every line
constexpr size_t kChunk = 128;      // super-blocks of arranged activations on the stack (a row of up to 32768 columns)

// y[0..16) (+)= the group's rows over n super-blocks (g at the first).
template <class F>
__attribute__((always_inline)) static inline void group(float *y, const uint8_t *g, const gb_q8x_block *x,
                                                        const typename F::XSb *xs, size_t n, bool first) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t s = 0; s < n; s++, g += F::kGsb) {
    for (size_t o = 0; o < F::kGsb; o += 64) _mm_prefetch(reinterpret_cast<const char *>(g + kPrefetch + o), _MM_HINT_T0);
    F::sb_dot(acc, g, x + 8 * s, xs[s]);
  }
  for (int h = 0; h < 2; h++)
    _mm256_storeu_ps(y + 8 * h, first ? acc[h] : _mm256_add_ps(_mm256_loadu_ps(y + 8 * h), acc[h]));
}

template <class F>
static inline void gemv(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  typename F::XSb xs[kChunk];
  for (size_t s0 = 0; s0 < nsb; s0 += kChunk) {
    const size_t n = nsb - s0 < kChunk ? nsb - s0 : kChunk;
    for (size_t s = 0; s < n; s++) F::arrange(&xs[s], xq + 8 * (s0 + s));
    for (size_t r = row_begin; r < row_end; r += 16)
      group<F>(y + r, W + ((r / 16) * nsb + s0) * F::kGsb, xq + 8 * s0, xs, n, s0 == 0);
  }
}

// Per group, super-block by super-block, every position in turn (the group
// super-block's weights come from L1 for the positions after the first),
// each position's sums added up per chunk exactly as gemv adds them.
template <class F>
static inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                         size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  __m256 acc[GB_GEMVM_MAX_M][2];
  for (size_t r = row_begin; r < row_end; r += 16)
    for (size_t s0 = 0; s0 < nsb; s0 += kChunk) {
      const size_t s1 = nsb - s0 < kChunk ? nsb : s0 + kChunk;
      const uint8_t *g = W + ((r / 16) * nsb + s0) * F::kGsb;
      for (size_t i = 0; i < m; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
      for (size_t s = s0; s < s1; s++, g += F::kGsb) {
        for (size_t o = 0; o < F::kGsb; o += 64) _mm_prefetch(reinterpret_cast<const char *>(g + kPrefetch + o), _MM_HINT_T0);
        for (size_t i = 0; i < m; i++) {
          const gb_q8x_block *x = XQ + i * ldxq + 8 * s;
          typename F::XSb xs;
          F::arrange(&xs, x);
          F::sb_dot(acc[i], g, x, xs);
        }
      }
      for (size_t i = 0; i < m; i++)
        for (int h = 0; h < 2; h++) {
          float *y = Y + i * ldy + r + 8 * h;
          _mm256_storeu_ps(y, s0 == 0 ? acc[i][h] : _mm256_add_ps(_mm256_loadu_ps(y), acc[i][h]));
        }
    }
}

}  // namespace gb_avx2_krows16
