// AVX2 q5k x q8x GEMV, one position (gemv) and several (gemvm), on the
// driver of gemv_kquant.h (row groups, positions, bit-identity).
//
// Each row's super-block (256 weights, eight 32-weight sub-blocks) is
// decoded once into eight vectors of 32 codes 0..31
// (sub-block s: the low (s even) or high nibbles of bytes 32(s/2).. of the
// nibbles, or 16 where bit s of the fifth-bit byte of the same weight is
// set; the fifth-bit bytes shifted so that bit s lands on bit 4, then
// masked) and its 6-bit scales and mins (scalar shifts of the three scale
// words, gguf_blocks.h), then dotted with every position's eight
// activation blocks: vpmaddubsw (pairs <= 2 * 31 * 128: exact in int16) and
// vpmaddwd by ones, a vphaddd tree to the exact int32 isum of each
// sub-block (lane s). Per lane, as gb_q5k_gemv__generic,
//   xd * (d * (float)(sc * isum) - dmin * (float)(mn * xq.sum)),
// with (float)(sc * isum) = (float)sc * (float)isum exactly (below 2^24);
// the terms accumulate fused per lane and each row's lanes are summed at the
// end: reassociated against generic (the tests' tolerance).
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2_common.h"
#include "gemv_kquant.h"
#include "gguf_blocks.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;

inline __m256i ld256(const void *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

// Bit s of every byte of v moved to bit 4 (other bits are masked later).
template <int S>
inline __m256i bit_to_4(__m256i v) {
  if (S < 4) return _mm256_slli_epi16(v, 4 - S);
  if (S > 4) return _mm256_srli_epi16(v, S - 4);
  return v;
}

// One row's super-block, decoded.
struct Decoded {
  __m256i c[8];  // sub-block s: codes 0..31 of weights 32s..32s+31
  __m256 sc, mn; // the eight 6-bit scales / mins as f32
  __m256 d, dmin;
};

template <int S>
__attribute__((always_inline)) inline void decode_pair(const uint8_t *blk, __m256i qh, Decoded &u) {
  const __m256i low4 = _mm256_set1_epi8(15), bit4 = _mm256_set1_epi8(16);
  const __m256i v = ld256(blk + 48 + 16 * S);  // S even: bytes 32(S/2)..
  u.c[S] = _mm256_or_si256(_mm256_and_si256(v, low4), _mm256_and_si256(bit_to_4<S>(qh), bit4));
  u.c[S + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4),
                               _mm256_and_si256(bit_to_4<S + 1>(qh), bit4));
}

__attribute__((always_inline)) inline void decode(const uint8_t *blk, Decoded &u) {
  uint64_t sc, mn;  // byte s: sub-block s's scale / min
  gb_gguf::scales_mins_k4(blk + 4, &sc, &mn);
  u.sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc)));
  u.mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn)));
  const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)(ld16(blk) | ld16(blk + 2) << 16)));
  u.d = _mm256_broadcastss_ps(dd);
  u.dmin = _mm256_broadcastss_ps(_mm_shuffle_ps(dd, dd, 1));
  const __m256i qh = ld256(blk + 16);
  decode_pair<0>(blk, qh, u);
  decode_pair<2>(blk, qh, u);
  decode_pair<4>(blk, qh, u);
  decode_pair<6>(blk, qh, u);
}

// acc += the row's terms against one position's eight blocks x (lane s).
__attribute__((always_inline)) inline __m256 accumulate(const Decoded &u, const gb_q8x_block *x, __m256 acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i p[8];
  for (int s = 0; s < 8; s++) p[s] = _mm256_madd_epi16(_mm256_maddubs_epi16(u.c[s], ld256(x[s].qs)), ones);
  // Lanes [0..3 | 4..7] of the two quads hold halves of sub-blocks 0..3 / 4..7.
  const __m256i q03 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i q47 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  const __m256i isum =
      _mm256_add_epi32(_mm256_permute2x128_si256(q03, q47, 0x20), _mm256_permute2x128_si256(q03, q47, 0x31));
  const __m256 xd = _mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d);
  const __m256 xs = _mm256_cvtepi32_ps(
      _mm256_setr_epi32(x[0].sum, x[1].sum, x[2].sum, x[3].sum, x[4].sum, x[5].sum, x[6].sum, x[7].sum));
  const __m256 t = _mm256_sub_ps(_mm256_mul_ps(u.d, _mm256_mul_ps(u.sc, _mm256_cvtepi32_ps(isum))),
                                 _mm256_mul_ps(u.dmin, _mm256_mul_ps(u.mn, xs)));
  return _mm256_fmadd_ps(xd, t, acc);
}

struct Q5k {
  static constexpr size_t kBytes = GB_Q5K_BLOCK_BYTES;
  using Act = const gb_q8x_block *;  // the blocks themselves
  using Decoded = ::Decoded;
  static void prepare(const gb_q8x_block *x, Act &a) { a = x; }
  static void decode(const uint8_t *blk, Decoded &u) { ::decode(blk, u); }
  static __m256 accumulate(const Decoded &u, Act x, __m256 acc) { return ::accumulate(u, x, acc); }
};

}  // namespace

GB_AVX2_KQUANT_ENTRIES(q5k, Q5k)
