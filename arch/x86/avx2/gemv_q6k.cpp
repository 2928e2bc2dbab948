// AVX2 q6k x q8x GEMV: four rows per step, one super-block (256 weights,
// sixteen 16-weight scales) of each.
//
// Codes (ggml's order), per 128-value half with its 64 ql and 32 qh bytes,
// for l < 32: y[l] = ql[l] & 15 | (qh[l] & 3) << 4,
// y[l + 32] = ql[l + 32] & 15 | (qh[l] >> 2 & 3) << 4, y[l + 64] = ql[l] >> 4
// | (qh[l] >> 4 & 3) << 4, y[l + 96] = ql[l + 32] >> 4 | (qh[l] >> 6) << 4:
// each activation block's 32 unsigned codes (0..63) in one vector.
// vpmaddubsw against the activations minus vpmaddubsw(32, x) (once per
// super-block for all rows) is (code - 32) * x in int16 pairs (|pair| <=
// 2 * 32 * 128: exact), vpmaddwd by ones makes int32 lanes, four per
// 16-value scale group; a vphaddd tree leaves one lane per group, vpmulld by
// the int8 scales (permuted to match) and one cross-lane add of each block's
// two groups give, per (row, block), is = sc_a * isum_a + sc_b * isum_b
// exactly, as gb_q6k_gemv__generic. Then acc += xd * (d * (float)is), fused
// per lane, and each row's eight lanes are summed at the end: the float part
// is reassociated, within the tolerance of tests/isa/test_kernels.cpp.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2_common.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;
constexpr size_t kSb = GB_Q6K_BLOCK_BYTES;  // bytes per super-block
constexpr size_t kPrefetch = 4096;          // bytes ahead per row stream (avx2_common.h)

inline __m256i ld256(const void *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

// Per (block b, 16-value group): (code - 32) * x summed, one int32 per group
// after the reduction; x8[b] are the activation bytes of block b, off[b] =
// vpmaddubsw(32, x8[b]).
__attribute__((always_inline)) inline __m256i row_sums(const uint8_t *blk, const __m256i *x8, const __m256i *off) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2h = _mm256_set1_epi8(0x30), ones = _mm256_set1_epi16(1);
  __m256i p[8];
  for (int n = 0; n < 2; n++) {
    const __m256i l0 = ld256(blk + 64 * n), l1 = ld256(blk + 64 * n + 32), h = ld256(blk + 128 + 32 * n);
    const __m256i h2 = _mm256_srli_epi16(h, 2);
    __m256i c[4];
    c[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2h));
    c[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h2, 4), m2h));
    c[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2h));
    c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(h2, m2h));
    for (int k = 0; k < 4; k++) {
      const int b = 4 * n + k;
      p[b] = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(c[k], x8[b]), off[b]), ones);
    }
  }
  // Groups [0 2 4 6 | 1 3 5 7] and [8 10 12 14 | 9 11 13 15], times their scales.
  const __m256i t0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i t1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  const __m128i perm = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
  const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk + 192)), perm);
  const __m256i s0 = _mm256_mullo_epi32(t0, _mm256_cvtepi8_epi32(sc));
  const __m256i s1 = _mm256_mullo_epi32(t1, _mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)));
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0, s1, 0x20), _mm256_permute2x128_si256(s0, s1, 0x31));
}

// Rows [r, r + R), R <= 4 (rows past R are copies of row r, not stored).
template <int R>
inline void rows4(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t r, size_t nsb, const Prefetch &pf) {
  const size_t rb = nsb * kSb;
  const uint8_t *w[4];
  for (int i = 0; i < 4; i++) w[i] = W + (r + (i < R ? i : 0)) * rb;
  const __m256i k32 = _mm256_set1_epi8(32);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t s = 0; s < nsb; s++) {
    const size_t off = s * kSb, ahead = off < pf.split ? pf.near : pf.far;
    const uint8_t *b[4];
    for (int i = 0; i < 4; i++) {
      b[i] = w[i] + off;
      if (i < R)
        for (int k = 0; k < 4; k++) _mm_prefetch(reinterpret_cast<const char *>(b[i] + ahead + 64 * k), _MM_HINT_T0);
    }
    const gb_q8x_block *x = xq + 8 * s;
    __m256i x8[8], xo[8];
    for (int k = 0; k < 8; k++) {
      x8[k] = ld256(x[k].qs);
      xo[k] = _mm256_maddubs_epi16(k32, x8[k]);
    }
    const __m256 xd = _mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d);
    for (int i = 0; i < 4; i++) {
      const __m256 d = _mm256_set1_ps(_cvtsh_ss((unsigned short)ld16(b[i] + 208)));
      const __m256 is = _mm256_cvtepi32_ps(row_sums(b[i], x8, xo));
      acc[i] = _mm256_fmadd_ps(xd, _mm256_mul_ps(d, is), acc[i]);
    }
  }
  store_lanes<R>(y + r, hsum4(acc[0], acc[1], acc[2], acc[3]));
}

}  // namespace

extern "C" void gb_q6k_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for_row_groups<kPrefetch>(row_begin, row_end, nsb * kSb, [&](auto R, size_t r, Prefetch pf) {
    rows4<decltype(R)::value>(y, W, xq, r, nsb, pf);
  });
}

// Per group of four rows, the positions one after another with the gemv's
// operations (bit-identical); the group's rows come from memory once and
// from L1/L2 for the other positions.
extern "C" void gb_q6k_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                   const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for_row_groups<kPrefetch>(row_begin, row_end, nsb * kSb, [&](auto R, size_t r, Prefetch pf) {
    for (size_t p = 0; p < m; p++) rows4<decltype(R)::value>(Y + p * ldy, W, XQ + p * ldxq, r, nsb, pf);
  });
}
