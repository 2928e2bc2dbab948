// AVX-512 VNNI q6kr16 x q8x GEMV: one zmm lane per row of a 16-row group.
//
// In the 16-row layout (kernels.h, krows16.h) a group super-block is the
// sixteen rows' q6k blocks in 4-byte slices, row i in lane i of each 64-byte
// vector: slices 0..31 = ql, 32..47 = qh, 48..51 = the sixteen int8 scales,
// then the rows' f16 d (32 bytes). For half h of the super-block and code
// bytes l = 4k..4k+3, slice A = 16h + k holds weights of 32-weight groups
// g = 0 (low nibbles) and 2 (high), slice B = 16h + 8 + k groups 1 and 3,
// and slice H = 32 + 8h + k their top two bits (bits 2g, 2g + 1). Each
// group's 6-bit codes come out of A or B and H with one 16-bit shift and
// one bit select (vpternlogd) per vector; 16-bit shifts spill bits between
// bytes, and the masks take only the bits of each byte's own code. vpdpbusd
// of the unsigned codes with the matching activation bytes broadcast adds
// four products to every row's own lane; the accumulator of each 16-weight
// half starts at -32 * (sum of its 16 activation bytes), so it ends as the
// exact int32 sum of (u - 32) * x, as gb_q6k_gemv__generic's. Then per half
// t: (xd * sc_t) * isum_t, summed per super-block and times d: the float
// part is reassociated, within the tolerance of tests/isa/test_kernels.cpp.
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

constexpr size_t kGsb = 16 * GB_Q6K_BLOCK_BYTES;  // bytes of one group super-block (3360)
constexpr int kSel = 0xCA;                        // vpternlogd: a ? b : c, bit by bit

using gb_x86_krows16::ld32;
using XSb = gb_x86_krows16::Q6KAct;

// The sixteen rows' int8 scale t, as floats.
__attribute__((always_inline)) inline __m512 scale(const uint8_t *g, int t) {
  const __m512i v = _mm512_loadu_si512(g + 64 * (48 + t / 4));
  return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * (t % 4)), 24));
}

// Sixteen rows' sums over one super-block column, added to acc.
__attribute__((always_inline)) inline __m512 sb_dot(const uint8_t *g, const gb_q8x_block *x, const XSb &xs, __m512 acc) {
  const __m512i m0f = _mm512_set1_epi8(0x0F), m33 = _mm512_set1_epi8(0x33), mcc = _mm512_set1_epi8((char)0xCC);
  __m512 sacc = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
    for (int e = 0; e < 2; e++) {  // 16-weight half: code bytes 16e .. 16e + 15
      __m512i is[4];                // per 32-weight group g
#pragma GCC unroll 4
      for (int q = 0; q < 4; q++) is[q] = _mm512_set1_epi32(xs.off[4 * h + q][e]);
#pragma GCC unroll 4
      for (int k = 4 * e; k < 4 * e + 4; k++) {
        const __m512i A = _mm512_loadu_si512(g + 64 * (16 * h + k));
        const __m512i B = _mm512_loadu_si512(g + 64 * (16 * h + 8 + k));
        const __m512i H = _mm512_loadu_si512(g + 64 * (32 + 8 * h + k));
        const __m512i H1 = _mm512_and_si512(H, m33), H2 = _mm512_and_si512(H, mcc);
        const __m512i c0 = _mm512_ternarylogic_epi32(m0f, A, _mm512_slli_epi16(H1, 4), kSel);
        const __m512i c1 = _mm512_ternarylogic_epi32(m0f, B, _mm512_slli_epi16(H2, 2), kSel);
        const __m512i c2 = _mm512_ternarylogic_epi32(m0f, _mm512_srli_epi16(A, 4), H1, kSel);
        const __m512i c3 = _mm512_ternarylogic_epi32(m0f, _mm512_srli_epi16(B, 4), _mm512_srli_epi16(H2, 2), kSel);
        const int j = 4 * k;
        is[0] = _mm512_dpbusd_epi32(is[0], c0, _mm512_set1_epi32(ld32(x[4 * h + 0].qs + j)));
        is[1] = _mm512_dpbusd_epi32(is[1], c1, _mm512_set1_epi32(ld32(x[4 * h + 1].qs + j)));
        is[2] = _mm512_dpbusd_epi32(is[2], c2, _mm512_set1_epi32(ld32(x[4 * h + 2].qs + j)));
        is[3] = _mm512_dpbusd_epi32(is[3], c3, _mm512_set1_epi32(ld32(x[4 * h + 3].qs + j)));
      }
#pragma GCC unroll 4
      for (int q = 0; q < 4; q++) {
        const int a = 4 * h + q, t = 2 * a + e;
        sacc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[q]), _mm512_mul_ps(scale(g, t), _mm512_set1_ps(xs.d[a])), sacc);
      }
    }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(g + 64 * 52)));
  return _mm512_fmadd_ps(d, sacc, acc);
}

// The format, for the shared 16-row driver (krows16_avx512.h).
struct Q6KR16 {
  static constexpr size_t kGsb = ::kGsb;
  using XSb = ::XSb;
  static inline void arrange(XSb *o, const gb_q8x_block *x) { gb_x86_krows16::arrange(o, x); }
  __attribute__((always_inline)) static inline __m512 sb_dot(const uint8_t *g, const gb_q8x_block *x, const XSb &xs,
                                                             __m512 acc) {
    return ::sb_dot(g, x, xs, acc);
  }
};

}  // namespace

extern "C" void gb_q6kr16_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                       size_t row_begin, size_t row_end, size_t cols) {
  gb_avx512_krows16::gemv<Q6KR16>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q6kr16_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                        const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                        size_t row_end, size_t cols) {
  gb_avx512_krows16::gemvm<Q6KR16>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
