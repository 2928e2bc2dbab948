// AVX2 q4 x q8x GEMV, four rows and two blocks per step; bit-identical to
// gb_q4_gemv__generic.
//
// Per row, the 16 code bytes of blocks b and b+1 (16-byte loads: an 18-byte
// block is never over-read) form one 256-bit vector; its low nibbles are
// weights 0..15 of each block and its high nibbles weights 16..31, matched
// against the activations rearranged once per step (xlo = x_b[0..15] |
// x_b+1[0..15], xhi = the upper halves). vpmaddubsw(codes, x) summed for both
// halves, minus the shared 8 * (x pairs), is (code - 8) * x in int16 lanes
// (|sum| <= 16 * 8 * 128 at every stage below: exact). Three vphaddw and one
// vpmaddwd reduce the four rows to the exact int32 sum of every (row, block).
// Then, as the generic kernel does, acc += (d_w * d_x) * (float)isum per
// block, unfused and in block order, the four rows in the four lanes. The
// rows' fp16 scales are gathered with scalar loads into one vcvtph2ps.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_common.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;
constexpr size_t kPrefetch = 4096;  // bytes ahead per row stream (avx2_common.h)

inline __m128i loadu128(const uint8_t *p) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)); }

// One step over blocks b and b+1 (PAIR) or the last block b alone (its
// partner taken as zero) for rows w[0..R). Row i of the group is lane i of acc.
template <int R, bool PAIR>
__attribute__((always_inline)) inline __m128 q4_step(__m128 acc, const uint8_t *const *w, const gb_q8x_block *xq,
                                                     size_t b, size_t pf) {
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i eights = _mm256_set1_epi8(8);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[b].qs));
  const __m256i x1 = PAIR ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[b + 1].qs)) : zero;
  const __m256i xlo = _mm256_permute2x128_si256(x0, x1, 0x20);
  const __m256i xhi = _mm256_permute2x128_si256(x0, x1, 0x31);
  const __m256i off = _mm256_add_epi16(_mm256_maddubs_epi16(eights, xlo), _mm256_maddubs_epi16(eights, xhi));
  __m256i s[4];
  uint64_t h0 = 0, h1 = 0;
  for (int i = 0; i < 4; i++) {
    if (i >= R) {
      s[i] = zero;
      continue;
    }
    const uint8_t *p = w[i] + b * 18;
    _mm_prefetch(reinterpret_cast<const char *>(p + pf), _MM_HINT_T0);
    const __m128i qa = loadu128(p + 2);
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(qa), PAIR ? loadu128(p + 20) : _mm_setzero_si128(), 1);
    const __m256i lo = _mm256_and_si256(q, low4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    s[i] = _mm256_sub_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi)), off);
    h0 |= ld16(p) << (16 * i);
    if (PAIR) h1 |= ld16(p + 18) << (16 * i);
  }
  // [r0 r1 r2 r3] of block b in the low 128 bits, of block b+1 in the high.
  const __m256i t = _mm256_hadd_epi16(_mm256_hadd_epi16(s[0], s[1]), _mm256_hadd_epi16(s[2], s[3]));
  const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(t, ones));
  const __m256 dw = _mm256_cvtph_ps(_mm_set_epi64x((long long)h1, (long long)h0));
  const __m256 dx = _mm256_set_m128(_mm_set1_ps(PAIR ? xq[b + 1].d : 0.0f), _mm_set1_ps(xq[b].d));
  // As generic: acc += (d * xd) * (float)isum, unfused, block b then b+1.
  const __m256 prod = _mm256_mul_ps(_mm256_mul_ps(dw, dx), isum);
  acc = _mm_add_ps(acc, _mm256_castps256_ps128(prod));
  if (PAIR) acc = _mm_add_ps(acc, _mm256_extractf128_ps(prod, 1));
  return acc;
}

// Rows [r, r + R), R <= 4, prefetching as planned by pf.
template <int R>
inline void q4_rows(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t r, size_t nb, const Prefetch &pf) {
  const size_t rb = nb * 18;
  const uint8_t *w[4];
  for (int i = 0; i < 4; i++) w[i] = W + (r + (i < R ? i : 0)) * rb;
  const size_t split = (pf.split + 17) / 18;  // first block at or past byte pf.split
  __m128 acc = _mm_setzero_ps();
  size_t b = 0;
  for (; b + 2 <= split; b += 2) acc = q4_step<R, true>(acc, w, xq, b, pf.near);
  for (; b + 2 <= nb; b += 2) acc = q4_step<R, true>(acc, w, xq, b, pf.far);
  if (b < nb) acc = q4_step<R, false>(acc, w, xq, b, pf.far);
  store_lanes<R>(y + r, acc);
}

}  // namespace

extern "C" void gb_q4_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                 size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * 18;
  for_row_groups<kPrefetch>(row_begin, row_end, rb, [&](auto R, size_t r, Prefetch pf) {
    q4_rows<decltype(R)::value>(y, W, xq, r, nb, pf);
  });
}

// ---- multi-position ----------------------------------------------------------
// Four rows and two blocks per step as above; the rows' nibbles are split
// once per step and dotted with the m positions' blocks, one accumulator
// vector per position (rows in lanes). Per (row, position) the same exact
// int32 block sums and the same float operations, block after block, as
// gb_q4_gemv__avx2 (and generic): bit-identical. Rows of a tail group
// (R < 4) are computed on copies of row r and not stored.
namespace {

template <int R, bool PAIR>
__attribute__((always_inline)) inline void q4m_step(__m128 *acc, const uint8_t *const *w, const gb_q8x_block *XQ,
                                                    size_t ldxq, size_t m, size_t b, size_t pf) {
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i eights = _mm256_set1_epi8(8);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i zero = _mm256_setzero_si256();
  __m256i lo[4], hi[4];
  uint64_t h0 = 0, h1 = 0;
  for (int i = 0; i < 4; i++) {
    const uint8_t *p = w[i] + b * 18;
    if (i < R) _mm_prefetch(reinterpret_cast<const char *>(p + pf), _MM_HINT_T0);
    const __m128i qa = loadu128(p + 2);
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(qa), PAIR ? loadu128(p + 20) : _mm_setzero_si128(), 1);
    lo[i] = _mm256_and_si256(q, low4);
    hi[i] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    h0 |= ld16(p) << (16 * i);
    if (PAIR) h1 |= ld16(p + 18) << (16 * i);
  }
  const __m256 dw = _mm256_cvtph_ps(_mm_set_epi64x((long long)h1, (long long)h0));
  for (size_t p = 0; p < m; p++) {
    const gb_q8x_block *xq = XQ + p * ldxq;
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[b].qs));
    const __m256i x1 = PAIR ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[b + 1].qs)) : zero;
    const __m256i xlo = _mm256_permute2x128_si256(x0, x1, 0x20);
    const __m256i xhi = _mm256_permute2x128_si256(x0, x1, 0x31);
    const __m256i off = _mm256_add_epi16(_mm256_maddubs_epi16(eights, xlo), _mm256_maddubs_epi16(eights, xhi));
    __m256i s[4];
    for (int i = 0; i < 4; i++)
      s[i] = _mm256_sub_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo[i], xlo), _mm256_maddubs_epi16(hi[i], xhi)), off);
    const __m256i t = _mm256_hadd_epi16(_mm256_hadd_epi16(s[0], s[1]), _mm256_hadd_epi16(s[2], s[3]));
    const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(t, ones));
    const __m256 dx = _mm256_set_m128(_mm_set1_ps(PAIR ? xq[b + 1].d : 0.0f), _mm_set1_ps(xq[b].d));
    const __m256 prod = _mm256_mul_ps(_mm256_mul_ps(dw, dx), isum);
    acc[p] = _mm_add_ps(acc[p], _mm256_castps256_ps128(prod));
    if (PAIR) acc[p] = _mm_add_ps(acc[p], _mm256_extractf128_ps(prod, 1));
  }
}

template <int R>
inline void q4m_rows(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t r,
                     size_t nb, const Prefetch &pf) {
  const size_t rb = nb * 18;
  const uint8_t *w[4];
  for (int i = 0; i < 4; i++) w[i] = W + (r + (i < R ? i : 0)) * rb;
  const size_t split = (pf.split + 17) / 18;  // first block at or past byte pf.split
  __m128 acc[GB_GEMVM_MAX_M];
  for (size_t p = 0; p < m; p++) acc[p] = _mm_setzero_ps();
  size_t b = 0;
  for (; b + 2 <= split; b += 2) q4m_step<R, true>(acc, w, XQ, ldxq, m, b, pf.near);
  for (; b + 2 <= nb; b += 2) q4m_step<R, true>(acc, w, XQ, ldxq, m, b, pf.far);
  if (b < nb) q4m_step<R, false>(acc, w, XQ, ldxq, m, b, pf.far);
  for (size_t p = 0; p < m; p++) store_lanes<R>(Y + p * ldy + r, acc[p]);
}

}  // namespace

extern "C" void gb_q4_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                  const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * 18;
  for_row_groups<kPrefetch>(row_begin, row_end, rb, [&](auto R, size_t r, Prefetch pf) {
    q4m_rows<decltype(R)::value>(Y, ldy, W, XQ, ldxq, m, r, nb, pf);
  });
}
