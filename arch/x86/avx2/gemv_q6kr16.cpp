// AVX2 q6kr16 x q8x GEMV: one 32-bit lane per row, two ymm per 16-row group
// (the AVX-512 kernel's zmm lanes split in two; krows16_avx2.h drives it).
//
// In the 16-row layout (kernels.h, krows16.h) a group super-block is the
// sixteen rows' q6k blocks in 4-byte slices, row i in bytes 4i..4i+3 of each
// 64-byte slice: slices 0..31 = ql, 32..47 = qh, 48..51 = the sixteen int8
// scales, then the rows' f16 d (32 bytes). For half h of the super-block and
// code bytes l = 4k..4k+3, slice A = 16h + k holds weights of 32-weight
// groups 0 (low nibbles) and 2 (high), slice B = 16h + 8 + k groups 1 and 3,
// and slice H = 32 + 8h + k their top two bits (bits 2g, 2g + 1). Each
// group's 6-bit codes come out of A or B and H with 16-bit shifts and a bit
// select ((a & m) | (b & ~m)); the masks take only each byte's own bits.
// vpmaddubsw of the unsigned codes (0..63) with the matching activation
// bytes broadcast gives two int16 pair sums per row (|.| <= 2 * 63 * 127 =
// 16002); two slices add in int16 (<= 32004: exact), then vpmaddwd into the
// int32 accumulator of each 16-weight half, which starts at -32 * (sum of
// its 16 activation bytes): it ends as the exact int32 sum of (u - 32) * x,
// as gb_q6k_gemv__generic's. Then per half t: (xd * sc_t) * isum_t, summed
// per super-block and times d, in the AVX-512 kernel's order: the float part
// is reassociated against the generic kernel, within the tolerance of
// tests/isa/test_kernels.cpp.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "x86/krows16_act.h"
#include "krows16_avx2.h"

namespace {

constexpr size_t kGsb = 16 * GB_Q6K_BLOCK_BYTES;  // bytes of one group super-block (3360)

using gb_x86_krows16::ld32;
using XSb = gb_x86_krows16::Q6KAct;

inline __m256i ld(const uint8_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

// Bits of a where m is set, of b elsewhere.
inline __m256i sel(__m256i m, __m256i a, __m256i b) { return _mm256_or_si256(_mm256_and_si256(a, m), _mm256_andnot_si256(m, b)); }

// Rows 8hr..8hr+7 (gh = g + 32 hr): their int8 scale t, as floats.
__attribute__((always_inline)) inline __m256 scale(const uint8_t *gh, int t) {
  const __m256i v = ld(gh + 64 * (48 + t / 4));
  return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * (t % 4)), 24));
}

// Rows 8hr..8hr+7 of one group super-block, added to acc.
__attribute__((always_inline)) inline __m256 half_dot(const uint8_t *g, int hr, const gb_q8x_block *x, const XSb &xs,
                                                      __m256 acc) {
  const __m256i m0f = _mm256_set1_epi8(0x0F), m33 = _mm256_set1_epi8(0x33), mcc = _mm256_set1_epi8((char)0xCC);
  const __m256i ones = _mm256_set1_epi16(1);
  const uint8_t *gh = g + 32 * hr;
  __m256 sacc = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
    for (int e = 0; e < 2; e++) {  // 16-weight half: code bytes 16e .. 16e + 15
      __m256i is[4];                // per 32-weight group
#pragma GCC unroll 4
      for (int q = 0; q < 4; q++) is[q] = _mm256_set1_epi32(xs.off[4 * h + q][e]);
#pragma GCC unroll 2
      for (int k = 4 * e; k < 4 * e + 4; k += 2) {
        __m256i s16[4];
#pragma GCC unroll 2
        for (int u = 0; u < 2; u++) {
          const __m256i A = ld(gh + 64 * (16 * h + k + u)), B = ld(gh + 64 * (16 * h + 8 + k + u));
          const __m256i H = ld(gh + 64 * (32 + 8 * h + k + u));
          const __m256i H1 = _mm256_and_si256(H, m33), H2 = _mm256_and_si256(H, mcc);
          const __m256i c[4] = {sel(m0f, A, _mm256_slli_epi16(H1, 4)), sel(m0f, B, _mm256_slli_epi16(H2, 2)),
                                sel(m0f, _mm256_srli_epi16(A, 4), H1),
                                sel(m0f, _mm256_srli_epi16(B, 4), _mm256_srli_epi16(H2, 2))};
          const int j = 4 * (k + u);
#pragma GCC unroll 4
          for (int q = 0; q < 4; q++) {
            const __m256i p = _mm256_maddubs_epi16(c[q], _mm256_set1_epi32(ld32(x[4 * h + q].qs + j)));
            s16[q] = u == 0 ? p : _mm256_add_epi16(s16[q], p);
          }
        }
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) is[q] = _mm256_add_epi32(is[q], _mm256_madd_epi16(s16[q], ones));
      }
#pragma GCC unroll 4
      for (int q = 0; q < 4; q++) {
        const int a = 4 * h + q, t = 2 * a + e;
        sacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[q]), _mm256_mul_ps(scale(gh, t), _mm256_set1_ps(xs.d[a])), sacc);
      }
    }
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(g + 64 * 52 + 16 * hr)));
  return _mm256_fmadd_ps(d, sacc, acc);
}

// The format, for the 16-row driver (krows16_avx2.h).
struct Q6KR16 {
  static constexpr size_t kGsb = ::kGsb;
  using XSb = ::XSb;
  static inline void arrange(XSb *o, const gb_q8x_block *x) { gb_x86_krows16::arrange(o, x); }
  __attribute__((always_inline)) static inline void sb_dot(__m256 acc[2], const uint8_t *g, const gb_q8x_block *x,
                                                           const XSb &xs) {
    acc[0] = half_dot(g, 0, x, xs, acc[0]);
    acc[1] = half_dot(g, 1, x, xs, acc[1]);
  }
};

}  // namespace

extern "C" void gb_q6kr16_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gb_avx2_krows16::gemv<Q6KR16>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q6kr16_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                      size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gb_avx2_krows16::gemvm<Q6KR16>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
