// AVX-512 VNNI q8 x q8x GEMV: one row at a time, one read stream.
//
// Why one row at a time: the rows of a matrix are adjacent, so reading them
// in order is a single sequential stream, which the hardware prefetchers
// follow at the full single-core read bandwidth. The AVX2 kernel reads four
// rows side by side (four streams) and reduces them together; on this
// memory system that stays near half the bandwidth even with software
// prefetch (docs/RESULTS.md, "Decode kernels against llama.cpp").
//
// Per 32-weight block: vpdpbusd needs one unsigned operand, so the weights
// are biased to u8 (w ^ 0x80 = w + 128) and the activations stay signed:
// sum((w + 128) x) = sum(w x) + 128 sum(x). The 128 * sum(x) is cancelled
// exactly by starting lane 0 of the block's int32 vector at -128 *
// gb_q8x_block.sum (|lane| <= 4 * 255 * 127 + 128 * 32 * 127: exact). The
// eight int32 lanes are converted to float and fused-multiply-added, scaled
// by d_w * d_x, into two accumulators (even, odd blocks); the row is
// a0 + a1 reduced in a fixed order. So a row's result depends only on the
// row and x, never on the row range or on the other rows (the split and
// multi-position tests rely on it), and differs from the generic kernel's
// (exact block sums, one float multiply-add per block) only by rounding.
// GCC 12's AVX-512 headers trip its own -Wmaybe-uninitialized (the
// _mm512_undefined_* placeholders of the unmasked intrinsics).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace {

inline float hsum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// One block: acc += (d_w * d_x) * (float)(lanes of sum w x).
__attribute__((always_inline)) inline __m256 q8_block(__m256 acc, const uint8_t *p, const gb_q8x_block &xb) {
  const __m256i bias = _mm256_set1_epi8((char)0x80);
  const __m256i w = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 2)), bias);
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb.qs));
  const __m256i start = _mm256_zextsi128_si256(_mm_cvtsi32_si128(-128 * xb.sum));
  const __m256i isum = _mm256_dpbusd_epi32(start, w, x);
  const __m256 dw = _mm256_cvtph_ps(_mm_set1_epi16((short)(p[0] | (p[1] << 8))));
  const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(xb.d));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
}

// One row of nb blocks at w.
inline float q8_row(const uint8_t *w, const gb_q8x_block *xq, size_t nb) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  size_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    a0 = q8_block(a0, w + b * GB_Q8_BLOCK_BYTES, xq[b]);
    a1 = q8_block(a1, w + (b + 1) * GB_Q8_BLOCK_BYTES, xq[b + 1]);
  }
  if (b < nb) a0 = q8_block(a0, w + b * GB_Q8_BLOCK_BYTES, xq[b]);
  return hsum8(_mm256_add_ps(a0, a1));
}

}  // namespace

extern "C" void gb_q8_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                   size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * GB_Q8_BLOCK_BYTES;
  for (size_t r = row_begin; r < row_end; r++) y[r] = q8_row(W + r * rb, xq, nb);
}

// Multi-position: each row is read from memory once and from cache for the
// other positions; per (row, position) the same function as the gemv, so
// bit-identical to it.
extern "C" void gb_q8_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                    const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                    size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * GB_Q8_BLOCK_BYTES;
  for (size_t r = row_begin; r < row_end; r++)
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = q8_row(W + r * rb, XQ + p * ldxq, nb);
}
