// AVX-512 VNNI q4r16 x q8x GEMV: one zmm lane per row of a 16-row group.
//
// In the q4r16 layout (kernels.h) a 64-byte vector is the 4-byte slice k of
// the sixteen rows' code bytes, so vpdpbusd with activation bytes 4k..4k+3
// broadcast to every lane adds four products to each row's own lane: after
// the four slices, low and high nibbles, each lane holds its row's whole
// block sum, with no horizontal reduction and no shuffles. The high nibbles
// are used in place (code & 0xF0 = 16 * high nibble) in a second accumulator,
// shifted right by 4 at the end of the block (exact: every term is a
// multiple of 16). The -8 offset enters as the low accumulator's start,
// -8 * sum(x) (gb_q8x_block.sum). All int32 arithmetic is exact (|sum| <=
// 32 * 15 * 127 + 8 * 32 * 127), so per row and block isum equals the generic
// kernel's, and then, as there, acc += (d_w * d_x) * (float)isum, unfused, in
// block order: bit-identical to gb_q4_gemv__generic on the same weights.
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

namespace {

constexpr size_t kGroupBlock = 16 * 18;  // bytes of one block of a 16-row group
constexpr size_t kPrefetch = 4096;  // bytes ahead of the group stream (A/B on this host: 2048 and 1024 slower, none or NTA no better)

inline int32_t ld32(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

// The exact int32 block sums of the 16 rows of one group block g against x.
// Two accumulators per nibble half (even and odd slices) halve the chains
// of dependent vpdpbusd.
__attribute__((always_inline)) inline __m512i block_isum(const uint8_t *g, const gb_q8x_block &x) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i lo[2] = {_mm512_set1_epi32(-8 * x.sum), _mm512_setzero_si512()};
  __m512i hi[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int k = 0; k < 4; k++) {
    const __m512i v = _mm512_loadu_si512(g + 32 + 64 * k);
    lo[k & 1] = _mm512_dpbusd_epi32(lo[k & 1], _mm512_and_si512(v, low4), _mm512_set1_epi32(ld32(x.qs + 4 * k)));
    hi[k & 1] = _mm512_dpbusd_epi32(hi[k & 1], _mm512_andnot_si512(low4, v), _mm512_set1_epi32(ld32(x.qs + 16 + 4 * k)));
  }
  return _mm512_add_epi32(_mm512_add_epi32(lo[0], lo[1]), _mm512_srai_epi32(_mm512_add_epi32(hi[0], hi[1]), 4));
}

// The 288 bytes of a block kPrefetch ahead of g, into every cache level.
__attribute__((always_inline)) inline void prefetch_block(const uint8_t *g) {
  for (size_t o = 0; o < kGroupBlock; o += 64) _mm_prefetch(reinterpret_cast<const char *>(g + kPrefetch + o), _MM_HINT_T0);
}

// acc + (d_w * d_x) * (float)isum for group block g and activation block x.
__attribute__((always_inline)) inline __m512 block_acc(__m512 acc, const uint8_t *g, const gb_q8x_block &x) {
  const __m512i isum = block_isum(g, x);
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(g)));
  const __m512 t = _mm512_mul_ps(d, _mm512_set1_ps(x.d));
  return _mm512_add_ps(acc, _mm512_mul_ps(t, _mm512_cvtepi32_ps(isum)));
}

// y[16g .. 16g+16) for one group: acc += (d_w * d_x) * (float)isum per block.
__attribute__((always_inline)) inline __m512 group_dot(const uint8_t *g, const gb_q8x_block *xq, size_t nb) {
  __m512 acc = _mm512_setzero_ps();
  for (size_t b = 0; b < nb; b++, g += kGroupBlock) {
    prefetch_block(g);
    acc = block_acc(acc, g, xq[b]);
  }
  return acc;
}

// Two groups at once, each a read stream of its own (g0, g1), block by
// block: per group the same operations in the same order as group_dot.
__attribute__((always_inline)) inline void group_dot2(float *y0, float *y1, const uint8_t *g0, const uint8_t *g1,
                                                      const gb_q8x_block *xq, size_t nb) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  for (size_t b = 0; b < nb; b++, g0 += kGroupBlock, g1 += kGroupBlock) {
    prefetch_block(g0);
    prefetch_block(g1);
    a0 = block_acc(a0, g0, xq[b]);
    a1 = block_acc(a1, g1, xq[b]);
  }
  _mm512_storeu_ps(y0, a0);
  _mm512_storeu_ps(y1, a1);
}

}  // namespace

extern "C" void gb_q4r16_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                      size_t row_begin, size_t row_end, size_t cols) {
  // The range's first and second half of groups as two read streams, one
  // group of each at a time (from memory, one thread: 37.7-41.4 -> 41.0-44.4
  // GB/s on the 1.1B shape's matrices); an odd last group alone.
  const size_t nb = (cols + 31) / 32, groups = (row_end - row_begin) / 16, half = groups / 2;
  for (size_t i = 0; i < half; i++) {
    const size_t r0 = row_begin + 16 * i, r1 = r0 + 16 * half;
    group_dot2(y + r0, y + r1, W + (r0 / 16) * nb * kGroupBlock, W + (r1 / 16) * nb * kGroupBlock, xq, nb);
  }
  for (size_t r = row_begin + 32 * half; r < row_end; r += 16)
    _mm512_storeu_ps(y + r, group_dot(W + (r / 16) * nb * kGroupBlock, xq, nb));
}

// Per group, the positions one after another: the group's bytes (nb * 288)
// come from memory once and from L1/L2 for the other positions; each
// position's result is computed exactly as the gemv computes it.
extern "C" void gb_q4r16_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                       const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                       size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r += 16) {
    const uint8_t *g = W + (r / 16) * nb * kGroupBlock;
    for (size_t i = 0; i < m; i++) _mm512_storeu_ps(Y + i * ldy + r, group_dot(g, XQ + i * ldxq, nb));
  }
}
