// AVX-512 VNNI q6k x q8x GEMV: four rows per step, one super-block (256
// weights, sixteen 16-weight scales) of each.
//
// Codes (ggml's order), per 128-value half with its 64 ql and 32 qh bytes,
// for l < 32: y[l] = ql[l] & 15 | (qh[l] & 3) << 4,
// y[l + 32] = ql[l + 32] & 15 | (qh[l] >> 2 & 3) << 4, y[l + 64] = ql[l] >> 4
// | (qh[l] >> 4 & 3) << 4, y[l + 96] = ql[l + 32] >> 4 | (qh[l] >> 6) << 4
// (ql, qh of the half). So 64 ql bytes and [qh, qh >> 2] (32 + 32 bytes)
// give values 0..63 of the half in one vector (low nibbles | bits 0-1 << 4)
// and 64..127 in another (high nibbles | bits 4-5 in place): two
// vpternlogd merges. vpdpbusd of the unsigned 6-bit codes against the
// signed activations, the accumulators starting at -32 * (the sums of the
// activations' 4-byte groups, once per super-block for all rows), gives
// (code - 32) * x summed over each 4-value group, exactly. Two unpack-and-add
// levels leave one lane per 16-value scale group (in a transposed order);
// vpmulld by the int8 scales (permuted to match) and a two-source permute
// per pair of rows adding each activation block's two halves give, per
// (row, block), is = sc_a * isum_a + sc_b * isum_b exactly, as
// gb_q6k_gemv__generic. Then acc += xd * (d * (float)is), fused per lane,
// and each row's eight lanes are summed at the end: the float part is
// reassociated, within the tolerance of tests/isa/test_kernels.cpp. The
// activations are arranged for up to kChunk super-blocks at a time; each
// chunk's row sums add to y.
// GCC 12's AVX-512 headers trip its own -Wmaybe-uninitialized (the
// _mm512_undefined_* placeholders of the unmasked intrinsics).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "kquant_avx512.h"

namespace {

using gb_avx512_kquant::cat256;

constexpr size_t kSb = GB_Q6K_BLOCK_BYTES;  // bytes per super-block
constexpr size_t kChunk = 64;               // super-blocks of arranged activations (36 KiB on the stack)

// The activations of one super-block, arranged for the code vectors.
struct XSb {
  __m512i q[4];    // [x0|x1], [x2|x3], [x4|x5], [x6|x7]
  __m512i off[4];  // -32 * (sum of each 4-byte group of q[k])
  __m512 d;        // x_b.d for b = 0..7, twice (a pair of rows)
};

inline void arrange(XSb *o, const gb_q8x_block *x) {
  const __m512i k32 = _mm512_set1_epi8(32);
  for (int k = 0; k < 4; k++) {
    o->q[k] = cat256(x[2 * k].qs, x[2 * k + 1].qs);
    o->off[k] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k32, o->q[k]));
  }
  const __m512 d = _mm512_castps256_ps512(_mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d));
  o->d = _mm512_shuffle_f32x4(d, d, _MM_SHUFFLE(1, 0, 1, 0));
}

// One row's super-block: sixteen int32 lanes, lane 4L + k the sum of
// (code - 32) * x over 16-value group 4k + L, times its scale.
__attribute__((always_inline)) inline __m512i row_sums(const uint8_t *blk, const XSb &x) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2h = _mm512_set1_epi8(0x30);
  const __m512i l0 = _mm512_loadu_si512(blk), l1 = _mm512_loadu_si512(blk + 64);
  const __m512i h = _mm512_loadu_si512(blk + 128), h2 = _mm512_srli_epi16(h, 2);
  const __m512i hn[2] = {_mm512_shuffle_i64x2(h, h2, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_i64x2(h, h2, _MM_SHUFFLE(3, 2, 3, 2))};
  const __m512i l[2] = {l0, l1};
  __m512i p[4];
  for (int n = 0; n < 2; n++) {
    // Bit selects by the constant c: 0xD8 is c ? b : a, 0xE4 is c ? a : b.
    const __m512i lo = _mm512_ternarylogic_epi32(_mm512_and_si512(l[n], m4), _mm512_slli_epi16(hn[n], 4), m2h, 0xD8);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l[n], 4), _mm512_and_si512(hn[n], m2h), m4, 0xE4);
    p[2 * n] = _mm512_dpbusd_epi32(x.off[2 * n], lo, x.q[2 * n]);
    p[2 * n + 1] = _mm512_dpbusd_epi32(x.off[2 * n + 1], hi, x.q[2 * n + 1]);
  }
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
  const __m512i w = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
  const __m128i perm = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk + 192)), perm);
  return _mm512_mullo_epi32(w, _mm512_cvtepi8_epi32(sc));
}

// The (row, block) sums of two rows from their row_sums: lane b of row 0,
// lane 8 + b of row 1 (block b = groups 2b and 2b + 1).
__attribute__((always_inline)) inline __m512i pair_sums(__m512i w0, __m512i w1) {
  const __m512i ia = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 16, 24, 17, 25, 18, 26, 19, 27);
  const __m512i ib = _mm512_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15, 20, 28, 21, 29, 22, 30, 23, 31);
  return _mm512_add_epi32(_mm512_permutex2var_epi32(w0, ia, w1), _mm512_permutex2var_epi32(w0, ib, w1));
}

inline uint64_t ld16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

// acc[j] (rows 2j, 2j+1) += the terms of super-block b[0..3] against x.
__attribute__((always_inline)) inline void sb_step(__m512 *acc, const uint8_t *const *b, const XSb &x) {
  const uint64_t h = ld16(b[0] + 208) | ld16(b[1] + 208) << 16 | ld16(b[2] + 208) << 32 | ld16(b[3] + 208) << 48;
  const __m512 d4 = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)h)));
  const __m512 d[2] = {_mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), d4),
                       _mm512_permutexvar_ps(_mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), d4)};
  const __m512i w0 = row_sums(b[0], x), w1 = row_sums(b[1], x);
  const __m512i w2 = row_sums(b[2], x), w3 = row_sums(b[3], x);
  const __m512i is[2] = {pair_sums(w0, w1), pair_sums(w2, w3)};
  for (int j = 0; j < 2; j++) acc[j] = _mm512_fmadd_ps(x.d, _mm512_mul_ps(d[j], _mm512_cvtepi32_ps(is[j])), acc[j]);
}

// The format, for the shared four-row driver (kquant_avx512.h).
struct Q6K {
  static constexpr size_t kSb = ::kSb;
  static constexpr size_t kChunk = ::kChunk;
  using XSb = ::XSb;
  static inline void arrange(XSb *o, const gb_q8x_block *x) { ::arrange(o, x); }
  __attribute__((always_inline)) static inline void sb_step(__m512 *acc, const uint8_t *const *b, const XSb &x) {
    ::sb_step(acc, b, x);
  }
};

}  // namespace

extern "C" void gb_q6k_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  gb_avx512_kquant::gemv<Q6K>(y, W, xq, row_begin, row_end, cols);
}

// A group's chunk of weights (4 rows x 8 super-blocks, 6.6 KiB) is read from L1 for the
// positions after the first (kquant_avx512.h).
extern "C" void gb_q6k_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gb_avx512_kquant::gemvm<Q6K>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
