// AVX-512 VNNI q8 x q8x GEMV: the rows as two read streams, the first and
// the second half of the row range, one row of each per tile, each stream
// prefetched 4 KiB ahead of itself (see the gemv).
//
// Why so few streams: the rows of a matrix are adjacent, so reading them in
// order is a sequential stream, which the hardware prefetchers follow at
// nearly the single-core read bandwidth. The AVX2 kernel reads four
// adjacent rows side by side and reduces them together; on this memory
// system that stays near half the bandwidth even with software prefetch.
// Two streams half a range apart, each prefetched a little ahead, read
// faster than one.
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

// Block b of rows w[0..R) into acc[i][p] for positions xq[0..P): the
// position's bytes, bias start and scale are shared by the rows.
template <int R, int P>
__attribute__((always_inline)) inline void q8_block(__m256 (*acc)[P], const uint8_t *const *w, const gb_q8x_block *const *xq,
                                                    size_t b) {
  const __m256i bias = _mm256_set1_epi8((char)0x80);
  __m256i wb[R];
  __m256 dw[R];
  for (int i = 0; i < R; i++) {
    const uint8_t *q = w[i] + b * GB_Q8_BLOCK_BYTES;
    wb[i] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + 2)), bias);
    dw[i] = _mm256_cvtph_ps(_mm_set1_epi16((short)(q[0] | (q[1] << 8))));
  }
  for (int p = 0; p < P; p++) {
    const gb_q8x_block &xb = xq[p][b];
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb.qs));
    const __m256i start = _mm256_zextsi128_si256(_mm_cvtsi32_si128(-128 * xb.sum));
    const __m256 xd = _mm256_set1_ps(xb.d);
    for (int i = 0; i < R; i++) {
      const __m256i isum = _mm256_dpbusd_epi32(start, wb[i], x);
      acc[i][p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw[i], xd), acc[i][p]);
    }
  }
}

// Rows w[0..R) of nb blocks against positions xq[0..P): per block each row's
// weights are loaded and biased once; per (row, position) the block's
// acc += (d_w * d_x) * (float)(lanes of sum w x), blocks alternating between
// two accumulators, then a0 + a1 reduced. The same operations per (row,
// position) whatever R and P: the multi-position kernel equals the gemv bit
// for bit. Y[p * ldy + i] = row i . x[p].
template <int R, int P>
__attribute__((always_inline)) inline void q8_tile(float *Y, size_t ldy, const uint8_t *const *w, const gb_q8x_block *const *xq,
                                                   size_t nb, size_t pf = 0) {
  __m256 a0[R][P], a1[R][P];
  for (int i = 0; i < R; i++)
    for (int p = 0; p < P; p++) a0[i][p] = a1[i][p] = _mm256_setzero_ps();
  size_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    if (pf)
      for (int i = 0; i < R; i++) _mm_prefetch(reinterpret_cast<const char *>(w[i] + b * GB_Q8_BLOCK_BYTES + pf), _MM_HINT_T0);
    q8_block<R, P>(a0, w, xq, b);
    q8_block<R, P>(a1, w, xq, b + 1);
  }
  if (b < nb) q8_block<R, P>(a0, w, xq, b);
  for (int p = 0; p < P; p++)
    for (int i = 0; i < R; i++) Y[p * ldy + i] = hsum8(_mm256_add_ps(a0[i][p], a1[i][p]));
}


// Blocks b and b + 1 at once in 512-bit registers: block b in the low 256
// bits, b + 1 in the high, so that the low half of acc[i][p] is q8_tile's
// a0 and the high half its a1, lane for lane the same operations (the
// products, int32 sums, conversions, scale products and FMAs of each block
// do not depend on the lanes beside them). Half the instructions per block
// for the FMA work of the multi-position tiles, and the same bits.
template <int R, int P>
__attribute__((always_inline)) inline void q8_block2(__m512 (*acc)[P], const uint8_t *const *w,
                                                     const gb_q8x_block *const *xq, size_t b) {
  const __m512i bias = _mm512_set1_epi8((char)0x80);
  __m512i wb[R];
  __m512 dw[R];
  for (int i = 0; i < R; i++) {
    const uint8_t *q = w[i] + b * GB_Q8_BLOCK_BYTES, *q1 = q + GB_Q8_BLOCK_BYTES;
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + 2));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q1 + 2));
    wb[i] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), bias);
    const __m256i s = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)(q[0] | (q[1] << 8)))),
                                              _mm_set1_epi16((short)(q1[0] | (q1[1] << 8))), 1);
    dw[i] = _mm512_cvtph_ps(s);
  }
  for (int p = 0; p < P; p++) {
    const gb_q8x_block &x0 = xq[p][b], &x1 = xq[p][b + 1];
    const __m512i x = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x0.qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x1.qs)), 1);
    const __m512i start =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_zextsi128_si256(_mm_cvtsi32_si128(-128 * x0.sum))),
                           _mm256_zextsi128_si256(_mm_cvtsi32_si128(-128 * x1.sum)), 1);
    const __m512 xd = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(x0.d)),
                                                          _mm256_castps_pd(_mm256_set1_ps(x1.d)), 1));
    for (int i = 0; i < R; i++) {
      const __m512i isum = _mm512_dpbusd_epi32(start, wb[i], x);
      acc[i][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw[i], xd), acc[i][p]);
    }
  }
}

// q8_tile with q8_block2: bit for bit q8_tile's result (the last, odd block
// goes to the low half through q8_block, as q8_tile's a0).
template <int R, int P>
__attribute__((always_inline)) inline void q8_tile2(float *Y, size_t ldy, const uint8_t *const *w,
                                                    const gb_q8x_block *const *xq, size_t nb) {
  __m512 a[R][P];
  for (int i = 0; i < R; i++)
    for (int p = 0; p < P; p++) a[i][p] = _mm512_setzero_ps();
  size_t b = 0;
  for (; b + 2 <= nb; b += 2) q8_block2<R, P>(a, w, xq, b);
  __m256 a0[R][P], a1[R][P];
  for (int i = 0; i < R; i++)
    for (int p = 0; p < P; p++) {
      a0[i][p] = _mm512_castps512_ps256(a[i][p]);
      a1[i][p] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[i][p]), 1));
    }
  if (b < nb) q8_block<R, P>(a0, w, xq, b);
  for (int p = 0; p < P; p++)
    for (int i = 0; i < R; i++) Y[p * ldy + i] = hsum8(_mm256_add_ps(a0[i][p], a1[i][p]));
}

// Rows [r0, r1), R at a time then one at a time, against positions xq[0..P):
// Y[p * ldy + r - r0]; kPairs: through q8_tile2 (the same bits).
template <int R, int P, bool kPairs = false>
inline void q8_range(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *const *xq, size_t r0, size_t r1,
                     size_t nb) {
  const size_t rb = nb * GB_Q8_BLOCK_BYTES;
  size_t r = r0;
  for (; r + R <= r1; r += R) {
    const uint8_t *w[R];
    for (int i = 0; i < R; i++) w[i] = W + (r + i) * rb;
    if (kPairs) q8_tile2<R, P>(Y + (r - r0), ldy, w, xq, nb);
    else q8_tile<R, P>(Y + (r - r0), ldy, w, xq, nb);
  }
  for (; r < r1; r++) {
    const uint8_t *w[1] = {W + r * rb};
    if (kPairs) q8_tile2<1, P>(Y + (r - r0), ldy, w, xq, nb);
    else q8_tile<1, P>(Y + (r - r0), ldy, w, xq, nb);
  }
}


// Rows [r0, r1) against positions xq[0..P) as two read streams, the first
// and the second half of the rows, one row of each per tile (a row's result
// does not depend on its tile), each stream prefetching 4 KiB ahead of
// itself (past r1 at the end: the next rows or bytes past the matrix, which
// a prefetch may name without faulting), as the f16 gemv reads its rows.
constexpr size_t kStreamAhead = 4096;
template <int P>
inline void q8_rows2(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *const *xq, size_t r0, size_t r1,
                     size_t nb) {
  const size_t rb = nb * GB_Q8_BLOCK_BYTES, h = (r1 - r0) / 2;
  for (size_t i = 0; i < h; i++) {
    const uint8_t *w[2] = {W + (r0 + i) * rb, W + (r0 + h + i) * rb};
    float out[2 * P];
    q8_tile<2, P>(out, 2, w, xq, nb, kStreamAhead);
    for (int p = 0; p < P; p++) {
      Y[p * ldy + r0 + i] = out[2 * p];
      Y[p * ldy + r0 + h + i] = out[2 * p + 1];
    }
  }
  if (r0 + 2 * h < r1) {  // an odd count: the last row alone
    const uint8_t *w[1] = {W + (r1 - 1) * rb};
    q8_tile<1, P>(Y + r1 - 1, ldy, w, xq, nb);
  }
}

}  // namespace

// The gemv reads the rows as two prefetched streams (q8_rows2): on the 1.1B
// model the mid gear's one-thread decode went 32.6-33.2 -> 33.9-35.1 tok/s
// (89 -> 91-94 % of the read bandwidth; one stream prefetching 16 rows
// ahead into L2 had brought it there from 76-79 %). Two streams with the L2
// hint alone did not move it.
extern "C" void gb_q8_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                   size_t row_begin, size_t row_end, size_t cols) {
  const gb_q8x_block *xs[1] = {xq};
  q8_rows2<1>(y, 0, W, xs, row_begin, row_end, (cols + 31) / 32);
}

// Multi-position: tiles of 4 rows x 4 positions; 16 rows at a time stay in
// cache while the positions pass over them (each row read from memory once).
extern "C" void gb_q8_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                    const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                    size_t cols) {
  const size_t nb = (cols + 31) / 32;
  if (m <= 3) {  // a verify pass of 1-2 drafts: the rows from memory as the gemv reads them
    const gb_q8x_block *xs[3] = {XQ, XQ + (m > 1 ? ldxq : 0), XQ + (m > 2 ? 2 * ldxq : 0)};
    if (m == 3) q8_rows2<3>(Y, ldy, W, xs, row_begin, row_end, nb);
    if (m == 2) q8_rows2<2>(Y, ldy, W, xs, row_begin, row_end, nb);
    if (m == 1) q8_rows2<1>(Y, ldy, W, xs, row_begin, row_end, nb);
    return;
  }
  constexpr size_t kRowsPerBlock = 16;
  for (size_t r = row_begin; r < row_end; r += kRowsPerBlock) {
    const size_t e = r + kRowsPerBlock < row_end ? r + kRowsPerBlock : row_end;
    size_t p = 0;
    for (; p + 4 <= m; p += 4) {
      const gb_q8x_block *xs[4] = {XQ + p * ldxq, XQ + (p + 1) * ldxq, XQ + (p + 2) * ldxq, XQ + (p + 3) * ldxq};
      q8_range<4, 4, true>(Y + p * ldy + r, ldy, W, xs, r, e, nb);
    }
    // The last 1-3 positions one row at a time, the block's rows now in
    // cache.
    const size_t left = m - p;
    const gb_q8x_block *xs[3] = {XQ + p * ldxq, XQ + (p + (left > 1 ? 1 : 0)) * ldxq, XQ + (p + (left > 2 ? 2 : 0)) * ldxq};
    switch (left) {
      case 3: q8_range<1, 3>(Y + p * ldy + r, ldy, W, xs, r, e, nb); break;
      case 2: q8_range<1, 2>(Y + p * ldy + r, ldy, W, xs, r, e, nb); break;
      case 1: q8_range<1, 1>(Y + p * ldy + r, ldy, W, xs, r, e, nb); break;
      default: break;
    }
  }
}
