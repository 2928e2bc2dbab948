// The IQ4_XS GEMV driver of the avx2 folder (vpmaddubsw on |code| with the
// activation carrying the code's sign; avx512 has its own 512-bit kernel on
// the K-quants' four-row driver), one position (gemv) and several (gemvm):
// four rows and two 32-weight sub-blocks per step, four steps per
// 256-weight super-block. Layout in kernels.h.
//
// A sub-block's 16 nibble bytes become its 32 codes in element order, one
// byte each, in one 256-bit vector (low 128 bits: the low nibbles, weights
// 0..15; high: 16..31), each the grid value of its nibble (vpshufb on the
// folder's grid). The folder's dot gives exact int32 partial sums; a
// vphaddd tree reduces the eight partial vectors of four rows and two
// sub-blocks to the exact int32 isum of every (row, sub-block), rows in
// lanes, sub-block s in the low half and s+1 in the high half. Each is
// multiplied in int32 by its signed scale ls - 32, formed in the same lanes
// by variable shifts of the rows' scale words (|product| < 2^24, so exact
// in float), then generic's expression per lane with fused multiply-adds:
// acc += xd * (d * (ls - 32) * isum). A row's two half-lanes are added at
// the end: the float part is reassociated against gb_iq4xs_gemv__generic
// (the tests' tolerance).
//
// The gemv is the gemvm with one position: a step decodes the rows'
// sub-blocks once and runs every position through the same operations, so
// the gemvm is bit-identical per position to the gemv. Rows of a tail group
// (R < 4) are computed on copies of row r and not stored. Nothing is read
// past the rows' bytes (16-byte loads inside a super-block only).
#ifndef GEARBX_ARCH_X86_IQ4XS_GEMV_H
#define GEARBX_ARCH_X86_IQ4XS_GEMV_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf_blocks.h"
#include "kernels.h"
#include "x86/avx2/avx2_common.h"

// Internal linkage: a kernel folder's objects define no shared or weak symbols.
namespace gb_iq4xs {
namespace {

using namespace gb_avx2;

constexpr size_t kPrefetch = 4096;  // bytes ahead per row stream (avx2_common.h)
constexpr size_t kBytes = GB_IQ4XS_BLOCK_BYTES;

inline __m256i ld256(const void *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

// The codes of the sub-block whose 16 nibble bytes are at qs.
inline __m256i codes(const uint8_t *qs, __m256i grid) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
  const __m256i n = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
  return _mm256_shuffle_epi8(grid, n);
}

// The scales of four rows' super-blocks, kept for the four steps: the rows'
// u32 of low scale nibbles and u16 of high bit pairs, each row's in lanes
// i and 4 + i.
struct Scales {
  __m256i sl, sh;
};
inline Scales scales(const uint8_t *const *w, size_t off) {
  uint32_t l[4], h[4];
  for (int i = 0; i < 4; i++) {
    memcpy(&l[i], w[i] + off + 4, 4);
    h[i] = (uint32_t)w[i][off + 2] | ((uint32_t)w[i][off + 3] << 8);
  }
  const __m128i lv = _mm_setr_epi32((int)l[0], (int)l[1], (int)l[2], (int)l[3]);
  const __m128i hv = _mm_setr_epi32((int)h[0], (int)h[1], (int)h[2], (int)h[3]);
  return Scales{_mm256_set_m128i(lv, lv), _mm256_set_m128i(hv, hv)};
}
// ls - 32 of sub-blocks s (lanes 0..3, rows) and s + 1 (lanes 4..7): the
// nibble of the low word at bit 4s, the pair of the high word at bit 2s.
inline __m256i step_scales(const Scales &sc, int s) {
  const __m256i nl = _mm256_setr_epi32(4 * s, 4 * s, 4 * s, 4 * s, 4 * s + 4, 4 * s + 4, 4 * s + 4, 4 * s + 4);
  const __m256i nh = _mm256_setr_epi32(2 * s, 2 * s, 2 * s, 2 * s, 2 * s + 2, 2 * s + 2, 2 * s + 2, 2 * s + 2);
  const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(sc.sl, nl), _mm256_set1_epi32(15));
  const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(sc.sh, nh), _mm256_set1_epi32(3)), 4);
  return _mm256_sub_epi32(_mm256_or_si256(lo, hi), _mm256_set1_epi32(32));
}

// One step: sub-blocks s and s+1 (s even) of super-block sb, rows w[0..4)
// (prefetching those below R), the m positions' accumulators (rows in
// lanes, one half per sub-block).
template <class Dot, int R>
__attribute__((always_inline)) inline void step(__m256 *acc, const uint8_t *const *w, const gb_q8x_block *XQ,
                                                size_t ldxq, size_t m, size_t sb, int s, __m256 dw, __m256i sc,
                                                size_t pf, __m256i grid) {
  const size_t off = sb * kBytes;
  __m256i c0[4], c1[4];
  for (int i = 0; i < 4; i++) {
    if (i < R) _mm_prefetch(reinterpret_cast<const char *>(w[i] + off + 8 + 32 * (s / 2) + pf), _MM_HINT_T0);
    c0[i] = codes(w[i] + off + 8 + 16 * s, grid);
    c1[i] = codes(w[i] + off + 8 + 16 * (s + 1), grid);
  }
  for (size_t p = 0; p < m; p++) {
    const gb_q8x_block *xq = XQ + p * ldxq + sb * 8 + (size_t)s;
    const __m256i x0 = ld256(xq[0].qs), x1 = ld256(xq[1].qs);
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(Dot::dot(c0[0], x0), Dot::dot(c0[1], x0)),
                                         _mm256_hadd_epi32(Dot::dot(c0[2], x0), Dot::dot(c0[3], x0)));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(Dot::dot(c1[0], x1), Dot::dot(c1[1], x1)),
                                         _mm256_hadd_epi32(Dot::dot(c1[2], x1), Dot::dot(c1[3], x1)));
    const __m256i isum =
        _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
    const __m256 dx = _mm256_set_m128(_mm_set1_ps(xq[1].d), _mm_set1_ps(xq[0].d));
    const __m256 t = _mm256_mul_ps(dw, _mm256_cvtepi32_ps(_mm256_mullo_epi32(isum, sc)));
    acc[p] = _mm256_fmadd_ps(dx, t, acc[p]);
  }
}

// Rows [r, r + R), R <= 4, times m positions.
template <class Dot, int R>
inline void rows4(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t r,
                  size_t nsb, const Prefetch &pf) {
  const size_t rb = nsb * kBytes;
  const uint8_t *w[4];
  for (int i = 0; i < 4; i++) w[i] = W + (r + (i < R ? i : 0)) * rb;
  const size_t split = (pf.split + kBytes - 1) / kBytes;  // first super-block at or past byte pf.split
  const __m256i grid = Dot::grid();
  __m256 acc[GB_GEMVM_MAX_M];
  for (size_t p = 0; p < m; p++) acc[p] = _mm256_setzero_ps();
  for (size_t sb = 0; sb < nsb; sb++) {
    uint64_t h = 0;
    for (int i = 0; i < 4; i++) h |= ld16(w[i] + sb * kBytes) << (16 * i);
    const __m256 dw = _mm256_cvtph_ps(_mm_set1_epi64x((long long)h));  // row i's d in lanes i and 4 + i
    const size_t ahead = sb < split ? pf.near : pf.far;
    const Scales sc = scales(w, sb * kBytes);
    for (int s = 0; s < 8; s += 2) step<Dot, R>(acc, w, XQ, ldxq, m, sb, s, dw, step_scales(sc, s), ahead, grid);
  }
  for (size_t p = 0; p < m; p++)
    store_lanes<R>(Y + p * ldy + r, _mm_add_ps(_mm256_castps256_ps128(acc[p]), _mm256_extractf128_ps(acc[p], 1)));
}

template <class Dot>
inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for_row_groups<kPrefetch>(row_begin, row_end, nsb * kBytes, [&](auto R, size_t r, Prefetch pf) {
    rows4<Dot, decltype(R)::value>(Y, ldy, W, XQ, ldxq, m, r, nsb, pf);
  });
}

}  // namespace
}  // namespace gb_iq4xs

#endif  // GEARBX_ARCH_X86_IQ4XS_GEMV_H
