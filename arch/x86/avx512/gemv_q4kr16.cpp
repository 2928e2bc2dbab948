// AVX-512 VNNI q4kr16 x q8x GEMV: one zmm lane per row of a 16-row group.
//
// In the 16-row layout (kernels.h, krows16.h) a group super-block is the
// sixteen rows' q4k blocks in 4-byte slices, each slice one 64-byte vector
// with row i in lane i: slice 0 = {d, dmin}, slices 1..3 = the 12 scale
// bytes, slices 4 + 8p + k = code bytes 32p + 4k .. 32p + 4k + 3, whose low
// nibbles are weights 4k.. of sub-block 2p and high nibbles those of
// sub-block 2p + 1. vpdpbusd of a slice's nibbles with the four matching
// activation bytes broadcast adds four products to every row's own lane:
// after eight slices each lane holds its row's exact int32 sum of the
// sub-block, with no horizontal reduction (as the q4r16 kernel does). High
// nibbles are used in place (code & 0xF0 = 16 * nibble), their scale taken
// / 16 (exact). The six-bit scales and mins are decoded per lane with shifts
// and masks. Per sub-block s, as gb_q4k_gemv__generic:
//   xd_s * (d * sc_s * isum_s - dmin * mn_s * xsum_s),
// accumulated as d * sum_s (xd_s sc_s) isum_s - dmin * sum_s mn_s (xd_s xsum_s)
// per super-block: the float part is reassociated, within the tolerance of
// tests/isa/test_kernels.cpp; every integer sum is exact.
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
#include "x86/krows16_act.h"
#include "krows16_avx512.h"

namespace {

constexpr size_t kGsb = 16 * GB_Q4K_BLOCK_BYTES;  // bytes of one group super-block (2304)

using gb_x86_krows16::ld32;
using XSb = gb_x86_krows16::Q4KAct;

// The exact int32 sums of sub-blocks 2p (lo) and 16 * 2p + 1 (hi) of the
// sixteen rows: eight slices, even and odd ones in separate accumulators.
__attribute__((always_inline)) inline void pair_isum(__m512i *lo, __m512i *hi, const uint8_t *g, const gb_q8x_block &xa,
                                                     const gb_q8x_block &xb) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i l[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  __m512i h[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int k = 0; k < 8; k++) {
    const __m512i v = _mm512_loadu_si512(g + 64 * k);
    l[k & 1] = _mm512_dpbusd_epi32(l[k & 1], _mm512_and_si512(v, low4), _mm512_set1_epi32(ld32(xa.qs + 4 * k)));
    h[k & 1] = _mm512_dpbusd_epi32(h[k & 1], _mm512_andnot_si512(low4, v), _mm512_set1_epi32(ld32(xb.qs + 4 * k)));
  }
  *lo = _mm512_add_epi32(l[0], l[1]);
  *hi = _mm512_add_epi32(h[0], h[1]);
}

// Sixteen rows' sums over one super-block column, added to acc.
__attribute__((always_inline)) inline __m512 sb_dot(const uint8_t *g, const gb_q8x_block *x, const XSb &xs, __m512 acc) {
  const __m512i m6 = _mm512_set1_epi8(63), m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
  const __m512i mff = _mm512_set1_epi32(0xFF);
  const __m512i dd = _mm512_loadu_si512(g);
  const __m512i q1 = _mm512_loadu_si512(g + 64), q2 = _mm512_loadu_si512(g + 128), q3 = _mm512_loadu_si512(g + 192);
  // The eight scales and mins of every row, one byte each (kernels.h):
  // byte j of sc[0] / mn[0] is sub-block j's, of sc[1] / mn[1] sub-block 4 + j's.
  const __m512i sc[2] = {_mm512_and_si512(q1, m6),
                         _mm512_or_si512(_mm512_and_si512(q3, m4), _mm512_and_si512(_mm512_srli_epi32(q1, 2), m30))};
  const __m512i mn[2] = {_mm512_and_si512(q2, m6), _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(q3, 4), m4),
                                                                   _mm512_and_si512(_mm512_srli_epi32(q2, 2), m30))};
  __m512 sacc = _mm512_setzero_ps(), macc = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int p = 0; p < 4; p++) {
    __m512i lo, hi;
    pair_isum(&lo, &hi, g + 256 + 512 * p, x[2 * p], x[2 * p + 1]);
    // Sub-blocks a = 2p and b = 2p + 1: bytes a % 4 and b % 4 of vector p / 2.
    const int h = p / 2, ja = (2 * p) % 4, jb = ja + 1;
    const __m512i sa = ja == 0 ? _mm512_and_si512(sc[h], mff) : _mm512_and_si512(_mm512_srli_epi32(sc[h], 8 * ja), mff);
    const __m512i ma = ja == 0 ? _mm512_and_si512(mn[h], mff) : _mm512_and_si512(_mm512_srli_epi32(mn[h], 8 * ja), mff);
    const __m512i sb = jb == 3 ? _mm512_srli_epi32(sc[h], 24) : _mm512_and_si512(_mm512_srli_epi32(sc[h], 8 * jb), mff);
    const __m512i mb = jb == 3 ? _mm512_srli_epi32(mn[h], 24) : _mm512_and_si512(_mm512_srli_epi32(mn[h], 8 * jb), mff);
    const int a = 2 * p, b = 2 * p + 1;
    // (xd * sc) * isum; the odd sub-block's isum is 16x, its factor / 16.
    const __m512 fa = _mm512_mul_ps(_mm512_cvtepi32_ps(sa), _mm512_set1_ps(xs.d[a]));
    const __m512 fb = _mm512_mul_ps(_mm512_cvtepi32_ps(sb), _mm512_set1_ps(xs.d[b] * 0.0625f));
    sacc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), fa, sacc);
    sacc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), fb, sacc);
    macc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ma), _mm512_set1_ps(xs.dsum[a]), macc);
    macc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mb), _mm512_set1_ps(xs.dsum[b]), macc);
  }
  // d and dmin: the f16 pair of each lane.
  const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
  const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
  acc = _mm512_fmadd_ps(d, sacc, acc);
  return _mm512_fnmadd_ps(dmin, macc, acc);
}

// The format, for the shared 16-row driver (krows16_avx512.h).
struct Q4KR16 {
  static constexpr size_t kGsb = ::kGsb;
  using XSb = ::XSb;
  static inline void arrange(XSb *o, const gb_q8x_block *x) { gb_x86_krows16::arrange(o, x); }
  __attribute__((always_inline)) static inline __m512 sb_dot(const uint8_t *g, const gb_q8x_block *x, const XSb &xs,
                                                             __m512 acc) {
    return ::sb_dot(g, x, xs, acc);
  }
};

}  // namespace

extern "C" void gb_q4kr16_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                       size_t row_begin, size_t row_end, size_t cols) {
  gb_avx512_krows16::gemv<Q4KR16>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q4kr16_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                        const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                        size_t row_end, size_t cols) {
  gb_avx512_krows16::gemvm<Q4KR16>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
