// krows16_avx512.h — the driver the AVX-512 16-row K-quant GEMVs share
// (gemv_q4kr16.cpp, gemv_q6kr16.cpp): one zmm lane per row of a group, the
// group's super-blocks one after another, the activations arranged per chunk
// of super-blocks; each chunk's sums add to y. A format supplies
//   struct F {
//     static constexpr size_t kGsb;      // bytes of one group super-block (16 blocks)
//     struct XSb;                        // one super-block's arranged activations
//     static void arrange(XSb *, const gb_q8x_block *x);        // x: its 8 blocks
//     static __m512 sb_dot(const uint8_t *g, const gb_q8x_block *x, const XSb &, __m512 acc);
//   };
// Everything is static inline: each folder's TU keeps its own copy.
#pragma once

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace gb_avx512_krows16 {

constexpr size_t kPrefetch = 4096;  // bytes ahead of the group stream, every 64-byte line
constexpr size_t kChunk = 128;      // super-blocks of arranged activations on the stack

template <class F>
__attribute__((always_inline)) static inline __m512 group_dot(const uint8_t *g, const gb_q8x_block *xq,
                                                              const typename F::XSb *xs, size_t nsb) {
  __m512 acc = _mm512_setzero_ps();
  for (size_t s = 0; s < nsb; s++, g += F::kGsb) {
    for (size_t k = 0; k < F::kGsb; k += 64) _mm_prefetch(reinterpret_cast<const char *>(g + kPrefetch + k), _MM_HINT_T0);
    acc = F::sb_dot(g, xq + 8 * s, xs[s], acc);
  }
  return acc;
}

template <class F>
static inline void gemv(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  typename F::XSb xs[kChunk];
  for (size_t s0 = 0; s0 < nsb; s0 += kChunk) {
    const size_t n = nsb - s0 < kChunk ? nsb - s0 : kChunk;
    for (size_t s = 0; s < n; s++) F::arrange(&xs[s], xq + 8 * (s0 + s));
    for (size_t r = row_begin; r < row_end; r += 16) {
      const __m512 v = group_dot<F>(W + ((r / 16) * nsb + s0) * F::kGsb, xq + 8 * s0, xs, n);
      _mm512_storeu_ps(y + r, s0 == 0 ? v : _mm512_add_ps(_mm512_loadu_ps(y + r), v));
    }
  }
}

// Per group, super-block by super-block, every position in turn (the group
// super-block's weights come from L1 for the positions after the first),
// each position's sums added up per chunk exactly as gemv adds them.
template <class F>
static inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                         size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  __m512 acc[GB_GEMVM_MAX_M];
  for (size_t r = row_begin; r < row_end; r += 16)
    for (size_t s0 = 0; s0 < nsb; s0 += kChunk) {
      const size_t s1 = nsb - s0 < kChunk ? nsb : s0 + kChunk;
      const uint8_t *g = W + ((r / 16) * nsb + s0) * F::kGsb;
      for (size_t i = 0; i < m; i++) acc[i] = _mm512_setzero_ps();
      for (size_t s = s0; s < s1; s++, g += F::kGsb) {
        for (size_t k = 0; k < F::kGsb; k += 64) _mm_prefetch(reinterpret_cast<const char *>(g + kPrefetch + k), _MM_HINT_T0);
        for (size_t i = 0; i < m; i++) {
          const gb_q8x_block *x = XQ + i * ldxq + 8 * s;
          typename F::XSb xs;
          F::arrange(&xs, x);
          acc[i] = F::sb_dot(g, x, xs, acc[i]);
        }
      }
      for (size_t i = 0; i < m; i++) {
        float *y = Y + i * ldy + r;
        _mm512_storeu_ps(y, s0 == 0 ? acc[i] : _mm512_add_ps(_mm512_loadu_ps(y), acc[i]));
      }
    }
}

}  // namespace gb_avx512_krows16
