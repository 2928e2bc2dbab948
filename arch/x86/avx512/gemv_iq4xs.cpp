// AVX-512 VNNI GEMV of GGUF's IQ4_XS: four rows per step, one super-block
// (256 weights, eight 32-weight sub-blocks) of each, on the four-row driver
// of kquant_avx512.h.
//
// A super-block's 128 nibble bytes are two 64-byte vectors, sub-blocks 0..3
// and 4..7, 16 bytes each: low nibbles are a sub-block's weights 0..15,
// high nibbles 16..31. Each nibble becomes its grid value + 128 (vpshufb on
// the grid in every 128-bit lane: 1..241, unsigned) and meets the signed
// activations, arranged once per super-block to match ([x0 0..15 | x1 0..15
// | x2 0..15 | x3 0..15] and the same of weights 16..31, then x4..x7), in
// vpdpbusd: two per vector, so each 128-bit lane k holds sub-block k's
// products in four int32 lanes. Two unpack-and-add levels (the second one
// pairing two rows) and one permute leave the exact int32 sum of every
// (row, sub-block), sixteen lanes for two rows (row 2j's eight sub-blocks,
// then row 2j+1's); 128 * the activation block's sum comes off each (the
// codes' offset), and the signed scale ls - 32 multiplies it in int32
// (|product| < 2^24: exact in float). Then per (row, sub-block), as
// gb_iq4xs_gemv__generic: acc += xd * (d * (float)((ls - 32) * isum)), the
// terms accumulating per lane (fused) and each row's eight lanes summed at
// the end: the float part is reassociated, within the tolerance of
// tests/isa/test_kernels.cpp. The activations are arranged for up to kChunk
// super-blocks at a time; each chunk's row sums add to y.
// GCC 12's AVX-512 headers trip its own -Wmaybe-uninitialized (the
// _mm512_undefined_* placeholders of the unmasked intrinsics).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf_blocks.h"
#include "kernels.h"
#include "kquant_avx512.h"

namespace {

constexpr size_t kSb = GB_IQ4XS_BLOCK_BYTES;  // bytes per super-block
constexpr size_t kChunk = 64;                 // super-blocks of arranged activations (24 KiB on the stack)

// The activations of one super-block, arranged for the code vectors.
struct XSb {
  __m512i lo[2], hi[2];  // weights 0..15 / 16..31 of blocks 0..3 ([0]) and 4..7 ([1]), 16 bytes each
  __m512 d;              // x_s.d for s = 0..7, twice (a pair of rows)
  __m512i sum128;        // 128 * x_s.sum, twice
};

inline __m128i ld128(const int8_t *p) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)); }

// Bytes off..off+15 of the four blocks x[0..3], one 128-bit lane each.
inline __m512i quad(const gb_q8x_block *x, int off) {
  __m512i v = _mm512_castsi128_si512(ld128(x[0].qs + off));
  v = _mm512_inserti32x4(v, ld128(x[1].qs + off), 1);
  v = _mm512_inserti32x4(v, ld128(x[2].qs + off), 2);
  return _mm512_inserti32x4(v, ld128(x[3].qs + off), 3);
}

inline void arrange(XSb *o, const gb_q8x_block *x) {
  o->lo[0] = quad(x, 0);
  o->hi[0] = quad(x, 16);
  o->lo[1] = quad(x + 4, 0);
  o->hi[1] = quad(x + 4, 16);
  const __m512 d = _mm512_castps256_ps512(_mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d));
  o->d = _mm512_shuffle_f32x4(d, d, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i s = _mm512_castsi256_si512(_mm256_slli_epi32(
      _mm256_setr_epi32(x[0].sum, x[1].sum, x[2].sum, x[3].sum, x[4].sum, x[5].sum, x[6].sum, x[7].sum), 7));
  o->sum128 = _mm512_shuffle_i32x4(s, s, _MM_SHUFFLE(1, 0, 1, 0));
}

// One row's super-block: lane 4k + {0, 1, 2, 3} holds partial sums of
// sub-blocks k, k + 4, k, k + 4 (codes + 128).
__attribute__((always_inline)) inline __m512i row_sums(const uint8_t *blk, const XSb &x, __m512i grid) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i v0 = _mm512_loadu_si512(blk + 8), v1 = _mm512_loadu_si512(blk + 72);
  const __m512i l0 = _mm512_shuffle_epi8(grid, _mm512_and_si512(v0, low4));
  const __m512i h0 = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(v0, 4), low4));
  const __m512i l1 = _mm512_shuffle_epi8(grid, _mm512_and_si512(v1, low4));
  const __m512i h1 = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(v1, 4), low4));
  const __m512i pa = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, l0, x.lo[0]), h0, x.hi[0]);
  const __m512i pb = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, l1, x.lo[1]), h1, x.hi[1]);
  return _mm512_add_epi32(_mm512_unpacklo_epi32(pa, pb), _mm512_unpackhi_epi32(pa, pb));
}

// The (row, sub-block) sums of two rows from their row_sums: lanes 0..7 row
// 0's sub-blocks 0..7, lanes 8..15 row 1's.
__attribute__((always_inline)) inline __m512i pair_sums(__m512i t, __m512i u) {
  const __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi64(t, u), _mm512_unpackhi_epi64(t, u));
  // v: lane 4k = row 0 sub-block k, 4k + 1 = row 0 k + 4, 4k + 2 = row 1 k, 4k + 3 = row 1 k + 4
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), v);
}

// The signed scales ls - 32 of two rows' super-blocks (lanes as pair_sums)
// and their d (eight lanes each). Sub-block s's scale is nibble s of the
// 32-bit scales_l word (bytes 4..7) with bits 2s, 2s + 1 of scales_h (bytes
// 2..3) above it: both words broadcast to their row's eight lanes and
// shifted per lane, so no scalar unpacking (and no vector load of values
// just stored, which stalled on store forwarding) sits in the loop.
__attribute__((always_inline)) inline void pair_heads(const uint8_t *b0, const uint8_t *b1, __m512i *sc, __m512 *d) {
  uint32_t l0, l1;
  memcpy(&l0, b0 + 4, 4);
  memcpy(&l1, b1 + 4, 4);
  const uint32_t h0 = (uint32_t)b0[2] | ((uint32_t)b0[3] << 8), h1 = (uint32_t)b1[2] | ((uint32_t)b1[3] << 8);
  const __m512i lw = _mm512_mask_set1_epi32(_mm512_set1_epi32((int)l0), 0xFF00, (int)l1);
  const __m512i hw = _mm512_mask_set1_epi32(_mm512_set1_epi32((int)h0), 0xFF00, (int)h1);
  const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(lw, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28)),
                                      _mm512_set1_epi32(15));
  const __m512i hi = _mm512_slli_epi32(
      _mm512_and_si512(_mm512_srlv_epi32(hw, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14)),
                       _mm512_set1_epi32(3)),
      4);
  *sc = _mm512_sub_epi32(_mm512_or_si512(lo, hi), _mm512_set1_epi32(32));
  const uint32_t h = (uint32_t)(b0[0] | (b0[1] << 8)) | (uint32_t)(b1[0] | (b1[1] << 8)) << 16;
  const __m512 dd = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128((int)h)));  // d0 d1
  *d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), dd);
}

// acc[j] (rows 2j, 2j+1) += the terms of super-block b[0..3] against x.
__attribute__((always_inline)) inline void sb_step(__m512 *acc, const uint8_t *const *b, const XSb &x) {
  const __m512i grid = _mm512_add_epi8(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb_gguf::kIq4nlGrid))),
      _mm512_set1_epi8((char)128));
  const __m512i w0 = row_sums(b[0], x, grid), w1 = row_sums(b[1], x, grid);
  const __m512i w2 = row_sums(b[2], x, grid), w3 = row_sums(b[3], x, grid);
  const __m512i is[2] = {pair_sums(w0, w1), pair_sums(w2, w3)};
  for (int j = 0; j < 2; j++) {
    __m512i sc;
    __m512 d;
    pair_heads(b[2 * j], b[2 * j + 1], &sc, &d);
    const __m512i isum = _mm512_mullo_epi32(_mm512_sub_epi32(is[j], x.sum128), sc);
    acc[j] = _mm512_fmadd_ps(x.d, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)), acc[j]);
  }
}

// The format, for the shared four-row driver (kquant_avx512.h).
struct Iq4xs {
  static constexpr size_t kSb = ::kSb;
  static constexpr size_t kChunk = ::kChunk;
  using XSb = ::XSb;
  static inline void arrange(XSb *o, const gb_q8x_block *x) { ::arrange(o, x); }
  __attribute__((always_inline)) static inline void sb_step(__m512 *acc, const uint8_t *const *b, const XSb &x) {
    ::sb_step(acc, b, x);
  }
};

}  // namespace

extern "C" void gb_iq4xs_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                      size_t row_begin, size_t row_end, size_t cols) {
  gb_avx512_kquant::gemv<Iq4xs>(y, W, xq, row_begin, row_end, cols);
}
extern "C" void gb_iq4xs_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                       const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                       size_t row_end, size_t cols) {
  gb_avx512_kquant::gemvm<Iq4xs>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
