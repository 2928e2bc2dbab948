// AVX-512 VNNI q4k x q8x GEMV: four rows per step, one super-block (256
// weights, eight 32-weight sub-blocks) of each.
//
// A super-block's 128 code bytes are two 64-byte vectors; the low nibbles of
// bytes 0..31 are sub-block 0 and their high nibbles sub-block 1, bytes
// 32..63 sub-blocks 2 and 3, and so on (ggml's order). vpdpbusd of the
// unsigned nibbles against the signed activations, arranged once per
// super-block to match ([x0|x2], [x1|x3], [x4|x6], [x5|x7]), leaves each
// sub-block's products in eight int32 lanes. The high nibbles are used in
// place (code & 0xF0 = 16 * nibble: one and-not instead of a shift and an
// and), so the odd sub-blocks' sums come out times 16. Two unpack-and-add
// levels per row and one two-source permute per pair of rows reduce them to
// the exact int32 sum of every (row, sub-block), in natural order, sixteen
// lanes for two rows. The 6-bit scales and mins of four rows are decoded
// together in one xmm (each row's 16-byte header is one dword column).
// Then per (row, sub-block), as gb_q4k_gemv__generic:
//   xd * (d * (float)(sc * isum) - dmin * (float)(mn * xq.sum)),
// where (float)(sc * isum) = (float)(16 isum) * (sc / 16) and
// (float)(mn * sum) = (float)mn * (float)sum exactly (every factor and
// product below 2^24); the terms accumulate per lane (fused) and each row's
// eight lanes are summed at the end: the float part is reassociated, within
// the tolerance of tests/isa/test_kernels.cpp. The activations are arranged
// for up to kChunk super-blocks at a time; each chunk's row sums add to y.
// GCC 12's AVX-512 headers trip its own -Wmaybe-uninitialized (the
// _mm512_undefined_* placeholders of the unmasked intrinsics).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "kquant_avx512.h"

namespace {

using gb_avx512_kquant::cat256;

constexpr size_t kSb = GB_Q4K_BLOCK_BYTES;  // bytes per super-block
constexpr size_t kChunk = 64;               // super-blocks of arranged activations (24 KiB on the stack)

// The activations of one super-block, arranged for the code vectors.
struct XSb {
  __m512i q[4];  // [x0|x2], [x1|x3], [x4|x6], [x5|x7]: the sub-blocks of the four dot products
  __m512 d;      // x_s.d for s = 0..7, twice (a pair of rows)
  __m512 sum;    // (float)x_s.sum, twice
};

inline __m512 twice(__m256 v) {
  const __m512 w = _mm512_castps256_ps512(v);
  return _mm512_shuffle_f32x4(w, w, _MM_SHUFFLE(1, 0, 1, 0));
}

inline void arrange(XSb *o, const gb_q8x_block *x) {
  o->q[0] = cat256(x[0].qs, x[2].qs);
  o->q[1] = cat256(x[1].qs, x[3].qs);
  o->q[2] = cat256(x[4].qs, x[6].qs);
  o->q[3] = cat256(x[5].qs, x[7].qs);
  o->d = twice(_mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d));
  o->sum = twice(_mm256_cvtepi32_ps(
      _mm256_setr_epi32(x[0].sum, x[1].sum, x[2].sum, x[3].sum, x[4].sum, x[5].sum, x[6].sum, x[7].sum)));
}

// One row's super-block: sixteen int32 lanes, lane 4L + k the sum of lanes
// 4L..4L+3 of dot product k (k: [s0|s2], [16 s1|16 s3], [s4|s6], [16 s5|16 s7]).
__attribute__((always_inline)) inline __m512i row_sums(const uint8_t *blk, const XSb &x) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i v0 = _mm512_loadu_si512(blk + 16), v1 = _mm512_loadu_si512(blk + 80);
  const __m512i p0 = _mm512_dpbusd_epi32(zero, _mm512_and_si512(v0, low4), x.q[0]);
  const __m512i p1 = _mm512_dpbusd_epi32(zero, _mm512_andnot_si512(low4, v0), x.q[1]);
  const __m512i p2 = _mm512_dpbusd_epi32(zero, _mm512_and_si512(v1, low4), x.q[2]);
  const __m512i p3 = _mm512_dpbusd_epi32(zero, _mm512_andnot_si512(low4, v1), x.q[3]);
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

// The (row, sub-block) sums of two rows from their row_sums: lane s of row
// 0, lane 8 + s of row 1 (sub-block s = lanes at idx_a + idx_b).
__attribute__((always_inline)) inline __m512i pair_sums(__m512i w0, __m512i w1) {
  const __m512i ia = _mm512_setr_epi32(0, 1, 8, 9, 2, 3, 10, 11, 16, 17, 24, 25, 18, 19, 26, 27);
  const __m512i ib = _mm512_setr_epi32(4, 5, 12, 13, 6, 7, 14, 15, 20, 21, 28, 29, 22, 23, 30, 31);
  return _mm512_add_epi32(_mm512_permutex2var_epi32(w0, ia, w1), _mm512_permutex2var_epi32(w0, ib, w1));
}

// The decoded headers of four rows: per pair of rows (lanes as pair_sums)
// the scales (odd sub-blocks / 16), the mins, d and dmin.
struct Head {
  __m512 sc[2], mn[2], d[2], dmin[2];
};

__attribute__((always_inline)) inline void decode_heads(Head *h, const uint8_t *const *b) {
  const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[0]));
  const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[1]));
  const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[2]));
  const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[3]));
  const __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
  const __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
  // Dword i of the header of the four rows: {d, dmin}, bytes 0..3, 4..7, 8..11 of the scales.
  const __m128i q0 = _mm_unpacklo_epi64(t0, t1), q1 = _mm_unpackhi_epi64(t0, t1);
  const __m128i q2 = _mm_unpacklo_epi64(t2, t3), q3 = _mm_unpackhi_epi64(t2, t3);
  const __m128i m6 = _mm_set1_epi8(63), m4 = _mm_set1_epi8(15), m2 = _mm_set1_epi8(3);
  const __m128i sc_lo = _mm_and_si128(q1, m6), mn_lo = _mm_and_si128(q2, m6);
  const __m128i sc_hi = _mm_or_si128(_mm_and_si128(q3, m4), _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(q1, 6), m2), 4));
  const __m128i mn_hi =
      _mm_or_si128(_mm_and_si128(_mm_srli_epi32(q3, 4), m4), _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(q2, 6), m2), 4));
  const __m512 odd16 = _mm512_setr_ps(1, 0.0625f, 1, 0.0625f, 1, 0.0625f, 1, 0.0625f, 1, 0.0625f, 1, 0.0625f, 1,
                                      0.0625f, 1, 0.0625f);
  h->sc[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi32(sc_lo, sc_hi))), odd16);
  h->sc[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi32(sc_lo, sc_hi))), odd16);
  h->mn[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi32(mn_lo, mn_hi)));
  h->mn[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi32(mn_lo, mn_hi)));
  const __m512 dd = _mm512_castps256_ps512(_mm256_cvtph_ps(q0));  // d0 dmin0 d1 dmin1 ... d3 dmin3
  h->d[0] = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), dd);
  h->d[1] = _mm512_permutexvar_ps(_mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6), dd);
  h->dmin[0] = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), dd);
  h->dmin[1] = _mm512_permutexvar_ps(_mm512_setr_epi32(5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7), dd);
}

// acc[j] (rows 2j, 2j+1) += the terms of super-block b[0..3] against x.
__attribute__((always_inline)) inline void sb_step(__m512 *acc, const uint8_t *const *b, const XSb &x) {
  Head h;
  decode_heads(&h, b);
  const __m512i w0 = row_sums(b[0], x), w1 = row_sums(b[1], x);
  const __m512i w2 = row_sums(b[2], x), w3 = row_sums(b[3], x);
  const __m512i is[2] = {pair_sums(w0, w1), pair_sums(w2, w3)};
  for (int j = 0; j < 2; j++) {
    const __m512 s = _mm512_mul_ps(h.d[j], _mm512_mul_ps(_mm512_cvtepi32_ps(is[j]), h.sc[j]));
    const __m512 m = _mm512_mul_ps(h.dmin[j], _mm512_mul_ps(h.mn[j], x.sum));
    acc[j] = _mm512_fmadd_ps(x.d, _mm512_sub_ps(s, m), acc[j]);
  }
}

// The format, for the shared four-row driver (kquant_avx512.h).
struct Q4K {
  static constexpr size_t kSb = ::kSb;
  static constexpr size_t kChunk = ::kChunk;
  using XSb = ::XSb;
  static inline void arrange(XSb *o, const gb_q8x_block *x) { ::arrange(o, x); }
  __attribute__((always_inline)) static inline void sb_step(__m512 *acc, const uint8_t *const *b, const XSb &x) {
    ::sb_step(acc, b, x);
  }
};

}  // namespace

extern "C" void gb_q4k_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  gb_avx512_kquant::gemv<Q4K>(y, W, xq, row_begin, row_end, cols);
}

// A group's chunk of weights (4 rows x 16 super-blocks, 9 KiB) is read from L1 for the
// positions after the first (kquant_avx512.h).
extern "C" void gb_q4k_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gb_avx512_kquant::gemvm<Q4K>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
