// AVX2 q8 x q8x GEMV, four rows per step over one 32-weight block (rows a
// quarter of the range apart in the gemv, adjacent in the gemvm);
// bit-identical to gb_q8_gemv__generic.
//
// Per row: vpmaddubsw(|w|, x * sign(w)) then vpmaddwd give eight int32
// partial sums of w * x (exact for every int8 weight, |w| <= 128, and the
// quantizer's activations, |x| <= 127: int16 pair sums <= 32512). An
// unpack-and-add transpose and one add reduce the four rows to the exact
// int32 sum of each row's block. Then, as the generic kernel does,
// acc += (d_w * d_x) * (float)isum, unfused and in block order, the four rows
// in the four lanes. The rows' fp16 scales are gathered with scalar loads
// into one vcvtph2ps.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_common.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;
constexpr size_t kPrefetch = 4096;  // bytes ahead per row stream (avx2_common.h)

// One block b for rows w[0..R); pf: prefetch offset (bytes) from each row's
// block. Row i of the group is lane i of acc.
template <int R>
__attribute__((always_inline)) inline __m128 q8_step(__m128 acc, const uint8_t *const *w, const gb_q8x_block *xq,
                                                     size_t b, size_t pf) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[b].qs));
  __m256i m[4];
  uint64_t h = 0;
  for (int i = 0; i < 4; i++) {
    if (i >= R) {
      m[i] = _mm256_setzero_si256();
      continue;
    }
    const uint8_t *p = w[i] + b * 34;
    _mm_prefetch(reinterpret_cast<const char *>(p + pf), _MM_HINT_T0);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 2));
    m[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(x, q)), ones);
    h |= ld16(p) << (16 * i);
  }
  // Transpose-and-add (cheaper than vphaddd here): lane j of t is row j's
  // sum over its lanes {0..3} (low 128 bits) or {4..7} (high); the two
  // halves together are the block's exact sum.
  const __m256i t01 = _mm256_add_epi32(_mm256_unpacklo_epi32(m[0], m[1]), _mm256_unpackhi_epi32(m[0], m[1]));
  const __m256i t23 = _mm256_add_epi32(_mm256_unpacklo_epi32(m[2], m[3]), _mm256_unpackhi_epi32(m[2], m[3]));
  const __m256i t = _mm256_add_epi32(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
  const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
  // As generic: acc += (d * xd) * (float)isum, unfused.
  const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)h)), _mm_set1_ps(xq[b].d));
  return _mm_add_ps(acc, _mm_mul_ps(dd, _mm_cvtepi32_ps(isum)));
}

// Rows [r, r + R), R <= 4, prefetching as planned by pf.
template <int R>
inline void q8_rows(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t r, size_t nb, const Prefetch &pf) {
  const size_t rb = nb * 34;
  const uint8_t *w[4];
  for (int i = 0; i < 4; i++) w[i] = W + (r + (i < R ? i : 0)) * rb;
  const size_t split = (pf.split + 33) / 34;  // first block at or past byte pf.split
  __m128 acc = _mm_setzero_ps();
  size_t b = 0;
  for (; b < split; b++) acc = q8_step<R>(acc, w, xq, b, pf.near);
  for (; b < nb; b++) acc = q8_step<R>(acc, w, xq, b, pf.far);
  store_lanes<R>(y + r, acc);
}

}  // namespace

// The gemv reads the rows as four streams, the four quarters of the row
// range, one row of each per step (lanes 0-3), each prefetching 2 KiB ahead
// of itself (past row_end at the end: the next rows or bytes past the
// matrix, which a prefetch may name without faulting); the rows left over
// (fewer than four) as a tail group. Four adjacent rows with the plan of
// avx2_common.h read 86-90 % of the bandwidth from memory on the Zen 5 host
// at one thread, 76-78 % at two.
constexpr size_t kQuarterAhead = 2048;
extern "C" void gb_q8_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                 size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * 34, q = (row_end - row_begin) / 4;
  for (size_t i = 0; i < q; i++) {
    const uint8_t *w[4];
    for (int k = 0; k < 4; k++) w[k] = W + (row_begin + k * q + i) * rb;
    __m128 acc = _mm_setzero_ps();
    for (size_t b = 0; b < nb; b++) acc = q8_step<4>(acc, w, xq, b, kQuarterAhead);
    float t[4];
    _mm_storeu_ps(t, acc);
    for (int k = 0; k < 4; k++) y[row_begin + k * q + i] = t[k];
  }
  for_row_groups<kPrefetch>(row_begin + 4 * q, row_end, rb, [&](auto R, size_t r, Prefetch pf) {
    q8_rows<decltype(R)::value>(y, W, xq, r, nb, pf);
  });
}

// ---- multi-position ----------------------------------------------------------
// Four rows per group as above; each block's weights are loaded (and their
// absolute values taken) once and dotted with the m positions' blocks, one
// accumulator vector per position (rows in lanes). Per (row, position) the
// same exact int32 block sums and the same float operations, block after
// block, as gb_q8_gemv__avx2 (and generic): bit-identical. Rows of a tail
// group (R < 4) are computed on copies of row r and not stored.
namespace {

template <int R>
inline void q8m_rows(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t r,
                     size_t nb, const Prefetch &pf) {
  const __m256i ones = _mm256_set1_epi16(1);
  const size_t rb = nb * 34;
  const uint8_t *w[4];
  for (int i = 0; i < 4; i++) w[i] = W + (r + (i < R ? i : 0)) * rb;
  const size_t split = (pf.split + 33) / 34;  // first block at or past byte pf.split
  __m128 acc[GB_GEMVM_MAX_M];
  for (size_t p = 0; p < m; p++) acc[p] = _mm_setzero_ps();
  for (size_t b = 0; b < nb; b++) {
    const size_t ahead = b < split ? pf.near : pf.far;
    __m256i q[4], aq[4];
    uint64_t h = 0;
    for (int i = 0; i < 4; i++) {
      const uint8_t *p = w[i] + b * 34;
      if (i < R) _mm_prefetch(reinterpret_cast<const char *>(p + ahead), _MM_HINT_T0);
      q[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 2));
      aq[i] = _mm256_abs_epi8(q[i]);
      h |= ld16(p) << (16 * i);
    }
    const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)h));
    for (size_t p = 0; p < m; p++) {
      const gb_q8x_block &xb = XQ[p * ldxq + b];
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb.qs));
      __m256i s[4];
      for (int i = 0; i < 4; i++) s[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(aq[i], _mm256_sign_epi8(x, q[i])), ones);
      const __m256i t01 = _mm256_add_epi32(_mm256_unpacklo_epi32(s[0], s[1]), _mm256_unpackhi_epi32(s[0], s[1]));
      const __m256i t23 = _mm256_add_epi32(_mm256_unpacklo_epi32(s[2], s[3]), _mm256_unpackhi_epi32(s[2], s[3]));
      const __m256i t = _mm256_add_epi32(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
      const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
      const __m128 dd = _mm_mul_ps(dw, _mm_set1_ps(xb.d));
      acc[p] = _mm_add_ps(acc[p], _mm_mul_ps(dd, _mm_cvtepi32_ps(isum)));
    }
  }
  for (size_t p = 0; p < m; p++) store_lanes<R>(Y + p * ldy + r, acc[p]);
}

}  // namespace

extern "C" void gb_q8_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                  const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * 34;
  for_row_groups<kPrefetch>(row_begin, row_end, rb, [&](auto R, size_t r, Prefetch pf) {
    q8m_rows<decltype(R)::value>(Y, ldy, W, XQ, ldxq, m, r, nb, pf);
  });
}
