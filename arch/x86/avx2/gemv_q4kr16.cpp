// AVX2 q4kr16 x q8x GEMV: one 32-bit lane per row, two ymm per 16-row group
// (rows 0-7 in the first, 8-15 in the second; the AVX-512 kernel's zmm
// lanes split in two).
//
// A group super-block (krows16.h, kernels.h) is 4-byte slices of the
// sixteen rows, row i in bytes 4i..4i+3 of each 64-byte slice: slice 0 =
// {d, dmin}, slices 1..3 = the 12 scale bytes, slices 4 + 8p + k = code
// bytes 32p + 4k .. 32p + 4k + 3, whose low nibbles are weights 4k.. of
// sub-block 2p and high nibbles those of sub-block 2p + 1. vpmaddubsw of a
// slice's nibbles (0..15) against the four matching activation bytes
// broadcast gives each row two int16 pair sums in its own lane; the eight
// slices of a sub-block add up in int16 (each pair sum |.| <= 2 * 15 * 127
// = 3810, eight of them <= 30480: exact, no saturation), then vpmaddwd
// makes each row's int32 sub-block sum. The six-bit scales and mins are
// decoded per lane with shifts and masks. Per sub-block s, as
// gb_q4k_gemv__generic: xd_s * (d * sc_s * isum_s - dmin * mn_s * xsum_s),
// accumulated as d * sum_s (xd_s sc_s) isum_s - dmin * sum_s mn_s (xd_s
// xsum_s) per super-block: the float part is reassociated, within the
// tolerance of tests/isa/test_kernels.cpp; every integer sum is exact. The
// gemvm computes each position exactly as the gemv does.
//
// (This replaced running gb_q4k_gemv__avx2 on rows gathered out of the
// 16-row layout: 15-16 GB/s from memory at one thread on the AVX-512 host
// with the AVX2 kernels selected, against 26.3-27.7 for these kernels.)
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "x86/krows16_act.h"
#include "krows16_avx2.h"

namespace {

constexpr size_t kGsb = 16 * GB_Q4K_BLOCK_BYTES;  // bytes of one group super-block (2304)

using gb_x86_krows16::ld32;
using XSb = gb_x86_krows16::Q4KAct;

// Eight binary16 values, one in the low half of each 32-bit lane of v (the
// high halves zero), as floats.
__attribute__((always_inline)) inline __m256 f16_lanes(__m256i v) {
  const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);  // lanes 0-3, 4-7 in the low 128 bits
  return _mm256_cvtph_ps(_mm256_castsi256_si128(p));
}

// Rows 8h..8h+7 of one group super-block g, added to acc.
__attribute__((always_inline)) inline __m256 half_dot(const uint8_t *g, int h, const gb_q8x_block *x, const XSb &xs,
                                                      __m256 acc) {
  const __m256i m6 = _mm256_set1_epi8(63), m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  const __m256i mff = _mm256_set1_epi32(0xFF), ones = _mm256_set1_epi16(1);
  const uint8_t *gh = g + 32 * h;
  const __m256i dd = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(gh));
  const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(gh + 64));
  const __m256i q2 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(gh + 128));
  const __m256i q3 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(gh + 192));
  // The eight scales and mins of every row, one byte each (kernels.h):
  // byte j of sc[0] / mn[0] is sub-block j's, of sc[1] / mn[1] sub-block 4 + j's.
  const __m256i sc[2] = {_mm256_and_si256(q1, m6),
                         _mm256_or_si256(_mm256_and_si256(q3, m4), _mm256_and_si256(_mm256_srli_epi32(q1, 2), m30))};
  const __m256i mn[2] = {_mm256_and_si256(q2, m6), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(q3, 4), m4),
                                                                   _mm256_and_si256(_mm256_srli_epi32(q2, 2), m30))};
  __m256 sacc = _mm256_setzero_ps(), macc = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int p = 0; p < 4; p++) {
    const uint8_t *c = gh + 256 + 512 * p;
    const gb_q8x_block &xa = x[2 * p], &xb = x[2 * p + 1];
    __m256i l16 = _mm256_setzero_si256(), h16 = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(c + 64 * k));
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      l16 = _mm256_add_epi16(l16, _mm256_maddubs_epi16(lo, _mm256_set1_epi32(ld32(xa.qs + 4 * k))));
      h16 = _mm256_add_epi16(h16, _mm256_maddubs_epi16(hi, _mm256_set1_epi32(ld32(xb.qs + 4 * k))));
    }
    const __m256i lo = _mm256_madd_epi16(l16, ones), hi = _mm256_madd_epi16(h16, ones);
    // Sub-blocks a = 2p and b = 2p + 1: bytes a % 4 and b % 4 of vector p / 2.
    const int v = p / 2, ja = (2 * p) % 4, jb = ja + 1;
    const __m256i sa = _mm256_and_si256(_mm256_srli_epi32(sc[v], 8 * ja), mff);
    const __m256i ma = _mm256_and_si256(_mm256_srli_epi32(mn[v], 8 * ja), mff);
    const __m256i sb = _mm256_and_si256(_mm256_srli_epi32(sc[v], 8 * jb), mff);
    const __m256i mb = _mm256_and_si256(_mm256_srli_epi32(mn[v], 8 * jb), mff);
    const int a = 2 * p, b = 2 * p + 1;
    const __m256 fa = _mm256_mul_ps(_mm256_cvtepi32_ps(sa), _mm256_set1_ps(xs.d[a]));
    const __m256 fb = _mm256_mul_ps(_mm256_cvtepi32_ps(sb), _mm256_set1_ps(xs.d[b]));
    sacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), fa, sacc);
    sacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), fb, sacc);
    macc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ma), _mm256_set1_ps(xs.dsum[a]), macc);
    macc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mb), _mm256_set1_ps(xs.dsum[b]), macc);
  }
  // d and dmin: the f16 pair of each lane (low and high half).
  const __m256 d = f16_lanes(_mm256_and_si256(dd, _mm256_set1_epi32(0xFFFF)));
  const __m256 dmin = f16_lanes(_mm256_srli_epi32(dd, 16));
  acc = _mm256_fmadd_ps(d, sacc, acc);
  return _mm256_fnmadd_ps(dmin, macc, acc);
}

// acc[h] += rows 8h..8h+7 of group super-block g.
__attribute__((always_inline)) inline void sb_dot(__m256 acc[2], const uint8_t *g, const gb_q8x_block *x, const XSb &xs) {
  acc[0] = half_dot(g, 0, x, xs, acc[0]);
  acc[1] = half_dot(g, 1, x, xs, acc[1]);
}

// The format, for the 16-row driver (krows16_avx2.h).
struct Q4KR16 {
  static constexpr size_t kGsb = ::kGsb;
  using XSb = ::XSb;
  static inline void arrange(XSb *o, const gb_q8x_block *x) { gb_x86_krows16::arrange(o, x); }
  __attribute__((always_inline)) static inline void sb_dot(__m256 acc[2], const uint8_t *g, const gb_q8x_block *x,
                                                           const XSb &xs) {
    ::sb_dot(acc, g, x, xs);
  }
};

}  // namespace

extern "C" void gb_q4kr16_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gb_avx2_krows16::gemv<Q4KR16>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q4kr16_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                      size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gb_avx2_krows16::gemvm<Q4KR16>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
