// AVX2 q2k / q3k x q8x GEMV, one position (gemv) and several (gemvm), on the
// driver of gemv_kquant.h (row groups, positions, bit-identity).
//
// Both formats keep two-bit fields, 128 weights per 32 bytes (group s of 32
// weights: bits 2(s%4).. of bytes 32(s/4)..), and a scale per 16 weights.
// A row's super-block decodes to eight vectors of unsigned codes (q2k: 0..3;
// q3k: the two bits | the hmask bit << 2, 0..7, i.e. its signed code + 4)
// and its sixteen scales (q2k also mins) as int32, in the order of the
// reduction below. Against activation block b: vpmaddubsw (|pair| <= 2 * 7
// * 128: exact in int16), vpmaddwd by ones, then a vphaddd tree leaves one
// int32 per 16-value group t in two vectors, groups [0 2 4 6 | 1 3 5 7] and
// [8 10 12 14 | 9 11 13 15] (block b's halves 2b, 2b+1 in the two 128-bit
// lanes). The position's 16-value half sums hs_t of the activations, in the
// same order, are prepared once per super-block for the row group. Then per
// block, exactly in int32 as gb_q2k_gemv__generic / gb_q3k_gemv__generic:
//   q3k: is1 = sum over its two groups of sc_t * (dot_t - 4 * hs_t)
//   q2k: is1 = sum sc_t * dot_t,  is2 = sum mn_t * hs_t
// (vpmulld, and one cross-lane add of the two groups), and
//   q3k: acc += xd * (d * (float)is1)
//   q2k: acc += xd * (d * (float)is1 - dmin * (float)is2),
// per lane (fused); the driver sums each row's lanes at the end: the float
// part is reassociated, within the tolerance of tests/isa/test_kernels.cpp.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2_common.h"
#include "gemv_kquant.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;

inline __m256i ld256(const void *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
inline __m128i ld128(const void *p) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)); }

// Sixteen bytes in group order t, rearranged to the reduction's order.
inline __m128i to_reduction_order(__m128i v) {
  return _mm_shuffle_epi8(v, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
}

// Eight products vectors (one per activation block, int32 lanes 0..3 of
// group 2b, 4..7 of group 2b+1) reduced to one int32 per group.
__attribute__((always_inline)) inline void reduce(const __m256i *p, __m256i &g0, __m256i &g1) {
  g0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
}

// Per activation block b (lane b): its two groups' terms added.
inline __m256i per_block(__m256i a0, __m256i a1) {
  return _mm256_add_epi32(_mm256_permute2x128_si256(a0, a1, 0x20), _mm256_permute2x128_si256(a0, a1, 0x31));
}

// One position's eight activation blocks, prepared: the scales and the
// 16-value half sums.
struct Act {
  const gb_q8x_block *x;
  __m256i hs[2];
  __m256 xd;
};

__attribute__((always_inline)) inline void prepare_act(const gb_q8x_block *x, Act &a) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i p[8];
  for (int b = 0; b < 8; b++) p[b] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, ld256(x[b].qs)), ones16);
  reduce(p, a.hs[0], a.hs[1]);
  a.x = x;
  a.xd = _mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d);
}

// Per group, the codes c dotted with the activations.
__attribute__((always_inline)) inline void dots(const __m256i *c, const gb_q8x_block *x, __m256i &g0, __m256i &g1) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i p[8];
  for (int b = 0; b < 8; b++) p[b] = _mm256_madd_epi16(_mm256_maddubs_epi16(c[b], ld256(x[b].qs)), ones);
  reduce(p, g0, g1);
}

// The two-bit fields of groups 4h..4h+3 (bytes v = 32h..32h+31).
__attribute__((always_inline)) inline void crumbs(__m256i v, __m256i *c) {
  const __m256i m2 = _mm256_set1_epi8(3);
  c[0] = _mm256_and_si256(v, m2);
  c[1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m2);
  c[2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m2);
  c[3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m2);
}

// ---- q2k: {sc[16] (scale | min << 4), qs[64], f16 d, dmin} -------------------
struct Q2k {
  static constexpr size_t kBytes = GB_Q2K_BLOCK_BYTES;
  using Act = ::Act;
  struct Decoded {
    __m256i c[8];           // codes 0..3 of groups 0..7
    __m256i sc[2], mn[2];   // scales, mins (0..15) in the reduction's order
    __m256 d, dmin;
  };

  __attribute__((always_inline)) static void decode(const uint8_t *blk, Decoded &u) {
    const __m128i m4 = _mm_set1_epi8(15);
    const __m128i b = to_reduction_order(ld128(blk));
    const __m128i sc = _mm_and_si128(b, m4), mn = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
    u.sc[0] = _mm256_cvtepu8_epi32(sc);
    u.sc[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(sc, 8));
    u.mn[0] = _mm256_cvtepu8_epi32(mn);
    u.mn[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(mn, 8));
    crumbs(ld256(blk + 16), u.c);
    crumbs(ld256(blk + 48), u.c + 4);
    const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)(ld16(blk + 80) | ld16(blk + 82) << 16)));
    u.d = _mm256_broadcastss_ps(dd);
    u.dmin = _mm256_broadcastss_ps(_mm_shuffle_ps(dd, dd, 1));
  }

  __attribute__((always_inline)) static __m256 accumulate(const Decoded &u, const Act &a, __m256 acc) {
    __m256i g0, g1;
    dots(u.c, a.x, g0, g1);
    const __m256i is1 = per_block(_mm256_mullo_epi32(g0, u.sc[0]), _mm256_mullo_epi32(g1, u.sc[1]));
    const __m256i is2 = per_block(_mm256_mullo_epi32(a.hs[0], u.mn[0]), _mm256_mullo_epi32(a.hs[1], u.mn[1]));
    const __m256 t = _mm256_sub_ps(_mm256_mul_ps(u.d, _mm256_cvtepi32_ps(is1)),
                                   _mm256_mul_ps(u.dmin, _mm256_cvtepi32_ps(is2)));
    return _mm256_fmadd_ps(a.xd, t, acc);
  }

  static void prepare(const gb_q8x_block *x, Act &a) { prepare_act(x, a); }
};

// ---- q3k: {hmask[32], qs[64], sc[12], f16 d} ---------------------------------
struct Q3k {
  static constexpr size_t kBytes = GB_Q3K_BLOCK_BYTES;
  using Act = ::Act;
  struct Decoded {
    __m256i c[8];   // codes + 4 (0..7) of groups 0..7
    __m256i sc[2];  // scales (-32..31) in the reduction's order
    __m256 d;
  };

  // Bit s of every byte of v moved to bit 2 (other bits masked later).
  template <int S>
  static __m256i bit_to_2(__m256i v) {
    if (S < 2) return _mm256_slli_epi16(v, 2 - S);
    if (S > 2) return _mm256_srli_epi16(v, S - 2);
    return v;
  }
  template <int S>
  __attribute__((always_inline)) static void high_bits(__m256i hm, Decoded &u) {
    const __m256i four = _mm256_set1_epi8(4);
    u.c[S] = _mm256_or_si256(u.c[S], _mm256_and_si256(bit_to_2<S>(hm), four));
    u.c[S + 1] = _mm256_or_si256(u.c[S + 1], _mm256_and_si256(bit_to_2<S + 1>(hm), four));
  }

  __attribute__((always_inline)) static void decode(const uint8_t *blk, Decoded &u) {
    crumbs(ld256(blk + 32), u.c);
    crumbs(ld256(blk + 64), u.c + 4);
    const __m256i hm = ld256(blk);
    high_bits<0>(hm, u);
    high_bits<2>(hm, u);
    high_bits<4>(hm, u);
    high_bits<6>(hm, u);
    // Scale bytes 0..11 (loaded from byte 94: no read past the block). Low
    // four bits of t: nibble t of bytes 0..7 (low nibbles first); high two:
    // bits 2(t/4).. of byte 8 + t%4 (dword t/4 of four copies of bytes
    // 8..11, shifted by 2(t/4)).
    const __m128i v = _mm_srli_si128(ld128(blk + 94), 2);
    const __m128i m4 = _mm_set1_epi8(15), m2 = _mm_set1_epi8(3);
    const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    const __m128i h = _mm_shuffle_epi8(v, _mm_setr_epi8(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(h, _mm_setr_epi32(0, 2, 4, 6)), m2);
    const __m128i sc =
        to_reduction_order(_mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32)));
    u.sc[0] = _mm256_cvtepi8_epi32(sc);
    u.sc[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8));
    u.d = _mm256_set1_ps(_cvtsh_ss((unsigned short)ld16(blk + 108)));
  }

  __attribute__((always_inline)) static __m256 accumulate(const Decoded &u, const Act &a, __m256 acc) {
    __m256i g0, g1;
    dots(u.c, a.x, g0, g1);
    // (code + 4) * x - 4 * x, per group.
    g0 = _mm256_sub_epi32(g0, _mm256_slli_epi32(a.hs[0], 2));
    g1 = _mm256_sub_epi32(g1, _mm256_slli_epi32(a.hs[1], 2));
    const __m256i is1 = per_block(_mm256_mullo_epi32(g0, u.sc[0]), _mm256_mullo_epi32(g1, u.sc[1]));
    return _mm256_fmadd_ps(a.xd, _mm256_mul_ps(u.d, _mm256_cvtepi32_ps(is1)), acc);
  }

  static void prepare(const gb_q8x_block *x, Act &a) { prepare_act(x, a); }
};

}  // namespace

GB_AVX2_KQUANT_ENTRIES(q2k, Q2k)
GB_AVX2_KQUANT_ENTRIES(q3k, Q3k)
