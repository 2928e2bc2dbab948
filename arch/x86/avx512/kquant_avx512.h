// kquant_avx512.h — what the AVX-512 K-quant GEMVs share (gemv_q4k.cpp,
// gemv_q6k.cpp): four rows per step, one super-block of each; activations
// arranged once per chunk of super-blocks (gemv) or per step and position
// (gemvm); each chunk's row sums add to y. A format supplies
//   struct F {
//     static constexpr size_t kSb;           // bytes per super-block
//     static constexpr size_t kChunk;        // super-blocks of arranged activations
//     struct XSb;                            // one super-block's arranged activations
//     static void arrange(XSb *, const gb_q8x_block *x);          // x: its 8 blocks
//     static void sb_step(__m512 *acc, const uint8_t *const *b, const XSb &);
//   };
// where sb_step adds, for rows 2j and 2j+1, eight lanes each to acc[j].
// Everything is static inline: each folder's TU keeps its own copy.
#pragma once

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace gb_avx512_kquant {

// Each step asks for the same super-block of the rows one group (four
// rows) ahead, every 64-byte line, into every cache level: the bytes the
// next group reads at this step. On this host (Zen 5, one thread, matrices
// streamed from memory, 4096 x 4096 and 4096 x 11008) that took q4k from
// 0.53 / 1.43 ms to 0.41 / 1.08, q6k from 0.86 / 2.40 to 0.55 / 1.89 and
// iq4xs from 0.51 / 1.51 to 0.40 / 1.02 against a fixed 2 KiB ahead of
// each row (two rows ahead: little gain; six: about as four; eight: less).
constexpr size_t kGroupRows = 4;

// Two 32-byte activation blocks in one vector: a in the low half, b in the high.
static inline __m512i cat256(const int8_t *a, const int8_t *b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(a))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b)), 1);
}

// The four rows' sums of their eight lanes each, rows in lanes 0..3.
static inline __m128 row_totals(const __m512 *acc) {
  const __m512 lo = _mm512_shuffle_f32x4(acc[0], acc[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m512 hi = _mm512_shuffle_f32x4(acc[0], acc[1], _MM_SHUFFLE(3, 1, 3, 1));
  __m512 s = _mm512_add_ps(lo, hi);  // 128-bit lane i: four partial sums of row i
  s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s));
}

// y[r..r+R) (+)= rows r..r+R over super-blocks [s0, s1), x[s - s0] arranged.
// Rows past R are copies of row r, not stored.
template <class F>
__attribute__((always_inline)) static inline void group(float *y, const uint8_t *W, size_t rb, size_t r, size_t R,
                                                        const typename F::XSb *xs, size_t s0, size_t s1) {
  const uint8_t *b[4];
  for (size_t i = 0; i < 4; i++) b[i] = W + (r + (i < R ? i : 0)) * rb + s0 * F::kSb;
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (size_t s = s0; s < s1; s++) {
    // This super-block of the next group's rows (past the range's end: the
    // next call's rows or bytes past the matrix, which a prefetch may name
    // without faulting; the address is formed as an integer, never as a
    // pointer past the matrix).
    for (size_t i = 0; i < R; i++)
      for (size_t k = 0; k < F::kSb; k += 64)
        _mm_prefetch(reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(b[i]) + kGroupRows * rb + k), _MM_HINT_T0);
    F::sb_step(acc, b, xs[s - s0]);
    for (int i = 0; i < 4; i++) b[i] += F::kSb;
  }
  float t[4];
  _mm_storeu_ps(t, row_totals(acc));
  for (size_t i = 0; i < R; i++) y[r + i] = s0 == 0 ? t[i] : y[r + i] + t[i];
}

template <class F>
static inline void gemv(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * F::kSb;
  typename F::XSb xs[F::kChunk];
  for (size_t s0 = 0; s0 < nsb; s0 += F::kChunk) {
    const size_t s1 = nsb - s0 < F::kChunk ? nsb : s0 + F::kChunk;
    for (size_t s = s0; s < s1; s++) F::arrange(&xs[s - s0], xq + 8 * s);
    for (size_t r = row_begin; r < row_end; r += 4)
      group<F>(y, W, rb, r, row_end - r < 4 ? row_end - r : 4, xs, s0, s1);
  }
}

// The same chunks, groups and operations per position as gemv
// (bit-identical); per step every position in turn, so the four rows'
// super-blocks are read from L1 for the positions after the first.
template <class F>
static inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                         size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * F::kSb;
  __m512 acc[GB_GEMVM_MAX_M][2];
  for (size_t s0 = 0; s0 < nsb; s0 += F::kChunk) {
    const size_t s1 = nsb - s0 < F::kChunk ? nsb : s0 + F::kChunk;
    for (size_t r = row_begin; r < row_end; r += 4) {
      const size_t R = row_end - r < 4 ? row_end - r : 4;
      const uint8_t *b[4];
      for (size_t i = 0; i < 4; i++) b[i] = W + (r + (i < R ? i : 0)) * rb + s0 * F::kSb;
      for (size_t p = 0; p < m; p++) acc[p][0] = acc[p][1] = _mm512_setzero_ps();
      for (size_t s = s0; s < s1; s++) {
        for (size_t i = 0; i < R; i++)
          for (size_t k = 0; k < F::kSb; k += 64)
            _mm_prefetch(reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(b[i]) + kGroupRows * rb + k), _MM_HINT_T0);
        for (size_t p = 0; p < m; p++) {
          typename F::XSb x;
          F::arrange(&x, XQ + p * ldxq + 8 * s);
          F::sb_step(acc[p], b, x);
        }
        for (int i = 0; i < 4; i++) b[i] += F::kSb;
      }
      for (size_t p = 0; p < m; p++) {
        float t[4];
        _mm_storeu_ps(t, row_totals(acc[p]));
        float *y = Y + p * ldy;
        for (size_t i = 0; i < R; i++) y[r + i] = s0 == 0 ? t[i] : y[r + i] + t[i];
      }
    }
  }
}

}  // namespace gb_avx512_kquant
