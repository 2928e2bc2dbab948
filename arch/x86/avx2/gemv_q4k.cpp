// AVX2 q4k x q8x GEMV: four rows per step, one super-block (256 weights,
// eight 32-weight sub-blocks) of each.
//
// Per row, code bytes 32j..32j+31 hold sub-block 2j in their low nibbles and
// 2j+1 in their high nibbles (ggml's order): vpmaddubsw of the nibbles
// against activation block s (|pair| <= 2 * 15 * 128: exact in int16) and
// vpmaddwd by ones give each sub-block's products in eight int32 lanes; a
// vphaddd tree and one cross-lane add reduce the eight vectors to the exact
// isum of every sub-block, in order, in one vector. The 6-bit scales and
// mins of the four rows are decoded together in one xmm (each row's 16-byte
// header is one dword column). Then per (row, sub-block), as
// gb_q4k_gemv__generic:
//   xd * (d * (float)(sc * isum) - dmin * (float)(mn * xq.sum)),
// with (float)(sc * isum) = (float)sc * (float)isum and likewise for the
// mins, exactly (every product below 2^24); the terms accumulate per lane
// (fused) and each row's eight lanes are summed at the end: the float part
// is reassociated, within the tolerance of tests/isa/test_kernels.cpp.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2_common.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;
constexpr size_t kSb = GB_Q4K_BLOCK_BYTES;  // bytes per super-block
constexpr size_t kPrefetch = 4096;          // bytes ahead per row stream (avx2_common.h)

inline __m256i ld256(const void *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

// The exact isum of the eight sub-blocks of one row's super-block against x.
__attribute__((always_inline)) inline __m256i row_sums(const uint8_t *blk, const gb_q8x_block *x) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256i p[8];
  for (int j = 0; j < 4; j++) {
    const __m256i v = ld256(blk + 16 + 32 * j);
    p[2 * j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v, low4), ld256(x[2 * j].qs)), ones);
    p[2 * j + 1] = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), ld256(x[2 * j + 1].qs)), ones);
  }
  // [s0 s1 s2 s3 | s0 s1 s2 s3] partial halves, then the same for s4..s7.
  const __m256i t0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i t1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20), _mm256_permute2x128_si256(t0, t1, 0x31));
}

// Rows [r, r + R), R <= 4 (rows past R are copies of row r, not stored).
template <int R>
inline void rows4(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t r, size_t nsb, const Prefetch &pf) {
  const size_t rb = nsb * kSb;
  const uint8_t *w[4];
  for (int i = 0; i < 4; i++) w[i] = W + (r + (i < R ? i : 0)) * rb;
  const __m128i m6 = _mm_set1_epi8(63), m4 = _mm_set1_epi8(15), m2 = _mm_set1_epi8(3);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t s = 0; s < nsb; s++) {
    const size_t off = s * kSb, ahead = off < pf.split ? pf.near : pf.far;
    const uint8_t *b[4];
    for (int i = 0; i < 4; i++) {
      b[i] = w[i] + off;
      if (i < R) {
        _mm_prefetch(reinterpret_cast<const char *>(b[i] + ahead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(b[i] + ahead + 64), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(b[i] + ahead + 128), _MM_HINT_T0);
      }
    }
    const gb_q8x_block *x = xq + 8 * s;
    const __m256 xd = _mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d);
    const __m256 xs = _mm256_cvtepi32_ps(
        _mm256_setr_epi32(x[0].sum, x[1].sum, x[2].sum, x[3].sum, x[4].sum, x[5].sum, x[6].sum, x[7].sum));
    // Dword k of the four rows' headers: {d, dmin}, scale bytes 0..3, 4..7, 8..11.
    const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[0]));
    const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[1]));
    const __m128i h2 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[2]));
    const __m128i h3 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[3]));
    const __m128i t0 = _mm_unpacklo_epi32(h0, h1), t1 = _mm_unpacklo_epi32(h2, h3);
    const __m128i t2 = _mm_unpackhi_epi32(h0, h1), t3 = _mm_unpackhi_epi32(h2, h3);
    const __m128i q0 = _mm_unpacklo_epi64(t0, t1), q1 = _mm_unpackhi_epi64(t0, t1);
    const __m128i q2 = _mm_unpacklo_epi64(t2, t3), q3 = _mm_unpackhi_epi64(t2, t3);
    const __m128i sc_lo = _mm_and_si128(q1, m6), mn_lo = _mm_and_si128(q2, m6);
    const __m128i sc_hi =
        _mm_or_si128(_mm_and_si128(q3, m4), _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(q1, 6), m2), 4));
    const __m128i mn_hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(q3, 4), m4),
                                       _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(q2, 6), m2), 4));
    // Row i's eight scales (mins): bytes 8i..8i+7 of sc (mn) over rows 0-1 and 2-3.
    const __m128i sc[2] = {_mm_unpacklo_epi32(sc_lo, sc_hi), _mm_unpackhi_epi32(sc_lo, sc_hi)};
    const __m128i mn[2] = {_mm_unpacklo_epi32(mn_lo, mn_hi), _mm_unpackhi_epi32(mn_lo, mn_hi)};
    const __m256 dd = _mm256_cvtph_ps(q0);  // d0 dmin0 d1 dmin1 ... d3 dmin3
    for (int i = 0; i < 4; i++) {
      const __m128i sci = (i & 1) ? _mm_srli_si128(sc[i / 2], 8) : sc[i / 2];
      const __m128i mni = (i & 1) ? _mm_srli_si128(mn[i / 2], 8) : mn[i / 2];
      const __m256 d = _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(2 * i));
      const __m256 dmin = _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(2 * i + 1));
      const __m256 is = _mm256_mul_ps(_mm256_cvtepi32_ps(row_sums(b[i], x)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sci)));
      const __m256 ms = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mni)), xs);
      acc[i] = _mm256_fmadd_ps(xd, _mm256_sub_ps(_mm256_mul_ps(d, is), _mm256_mul_ps(dmin, ms)), acc[i]);
    }
  }
  store_lanes<R>(y + r, hsum4(acc[0], acc[1], acc[2], acc[3]));
}

}  // namespace

extern "C" void gb_q4k_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for_row_groups<kPrefetch>(row_begin, row_end, nsb * kSb, [&](auto R, size_t r, Prefetch pf) {
    rows4<decltype(R)::value>(y, W, xq, r, nsb, pf);
  });
}

// Per group of four rows, the positions one after another with the gemv's
// operations (bit-identical); the group's rows come from memory once and
// from L1/L2 for the other positions.
extern "C" void gb_q4k_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                   const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for_row_groups<kPrefetch>(row_begin, row_end, nsb * kSb, [&](auto R, size_t r, Prefetch pf) {
    for (size_t p = 0; p < m; p++) rows4<decltype(R)::value>(Y + p * ldy, W, XQ + p * ldxq, r, nsb, pf);
  });
}
