// AVX-512 (VNNI) GEMV of GGUF's Q1_0 (128 weights of one bit under an f16
// scale), Q2_0 (64 weights of two bits) and NVFP4 (64 E2M1 weights under
// four UE4M3 scales), one position (gemv) and several (gemvm). Layouts in
// kernels.h.
//
// Two 32-weight sub-blocks at a time in one 512-bit vector (lanes 0..7 the
// first sub-block's int32 sums, 8..15 the second's), each meeting its own
// activation block:
//   q1_0: the 64 bits are a byte mask as they stand (kmovq); the
//         activations of the clear bits are negated under it (one masked
//         subtract; activations are -127..127) and summed by vpdpbusd with
//         ones: isum = sum (+-x), the code's product, with no decoding;
//   q2_0: the 2-bit fields u as bytes (each byte replicated four times by
//         vpshufb, then shifted by 0, 2, 4, 6 with two vpsrlvw blended on
//         the byte parity), isum = sum u * x - sum x (two vpdpbusd): the code
//         u - 1's product.
// Then, per activation block, t += xd * (float)isum lane by lane and, per
// block, acc += d * t, fused, the sixteen lanes added at the end: generic's
// arithmetic with the float part reassociated (the tests' tolerance).
//
// NVFP4: the block's 64 weights in one vector, 128-bit lane k group k: the
// 32 bytes of nibbles split into low and high nibbles and their 64-bit
// pieces interleaved (group k is the low nibbles of bytes 8k..8k + 7, then
// their high nibbles), the lanes put in group order, and vpshufb in the E2M1
// table offset by 12 (unsigned codes 0..24): isum = sum u * x - 12 * sum x
// (two vpdpbusd; int32 lanes 4k..4k + 3 are group k's, and groups 0, 1 meet
// the first activation block, 2, 3 the second). Then acc += (float)isum *
// (d_group * xd), fused, the sixteen lanes added at the end: generic's
// arithmetic (xd * (d_lo * isum_lo + d_hi * isum_hi) per activation block)
// reassociated. The scales are decoded in one vector (x86/nvfp4_scales.h).
//
// Against the AVX2 kernels (byte codes from a shuffle and a compare, or
// unpacks, per sub-block; vpmaddubsw; the sum subtracted in int32), 4096 x
// 4096 in cache, one thread: q1_0 0.52 -> 0.29 ms, q2_0 0.86 -> 0.46; a
// TinyLlama-1.1B-shaped Q1_0 file went from 0.93x to 1.5x llama.cpp's
// decode speed at one thread (from memory).
//
// The gemv is the gemvm with one position: a block's codes are decoded once
// per row and every position goes through the same operations, so the gemvm
// is bit-identical per position to the gemv. Rows are read one at a time,
// each block asking for the bytes kPrefetch ahead; nothing is read outside
// the rows' blocks.
// GCC 12's AVX-512 headers trip its own -Wmaybe-uninitialized (the
// _mm512_undefined_* placeholders of the unmasked intrinsics).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "f16.h"
#include "kernels.h"
#include "x86/nvfp4_scales.h"

namespace {

constexpr size_t kPrefetch = 1024;  // bytes ahead in the row

inline float ld_f16(const uint8_t *p) { return gb::f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

// Activation blocks a and a + 1: their 64 values, and their scales as the
// two halves of a vector.
inline __m512i act64(const gb_q8x_block *xq) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[0].qs))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[1].qs)), 1);
}
inline __m512 scales2(const gb_q8x_block *xq) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_set1_ps(xq[0].d))),
                                             _mm256_castps_pd(_mm256_set1_ps(xq[1].d)), 1));
}

struct Q1_0 {
  static constexpr size_t kBytes = GB_Q1_0_BLOCK_BYTES;
  static constexpr int kPairs = 2;  // pairs of 32-weight sub-blocks per block
  using Code = __mmask64;           // the pair's bits: set = +1
  static Code codes(const uint8_t *b, int pair) {
    uint64_t bits;
    memcpy(&bits, b + 2 + 8 * pair, 8);
    return _cvtu64_mask64(bits);
  }
  static __m512i isum(Code c, __m512i x) {
    const __m512i zero = _mm512_setzero_si512();
    return _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), _mm512_mask_sub_epi8(x, _knot_mask64(c), zero, x));
  }
};

struct Q2_0 {
  static constexpr size_t kBytes = GB_Q2_0_BLOCK_BYTES;
  static constexpr int kPairs = 1;
  using Code = __m512i;  // the pair's fields u as bytes 0..3
  static Code codes(const uint8_t *b, int) {
    // 128-bit lane L takes bytes 4L..4L + 3, each four times (weights 16L..16L + 15).
    const __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b + 2)));
    const __m512i rep = _mm512_shuffle_epi8(
        v, _mm512_set_epi64(0x0f0f0f0f0e0e0e0ell, 0x0d0d0d0d0c0c0c0cll, 0x0b0b0b0b0a0a0a0all, 0x0909090908080808ll,
                            0x0707070706060606ll, 0x0505050504040404ll, 0x0303030302020202ll, 0x0101010100000000ll));
    // Byte j keeps field j % 4: the even bytes of each word shift by 0 or 4,
    // the odd ones by 2 or 6.
    const __m512i even = _mm512_srlv_epi16(rep, _mm512_set1_epi64(0x0004000000040000ll));
    const __m512i odd = _mm512_srlv_epi16(rep, _mm512_set1_epi64(0x0006000200060002ll));
    return _mm512_and_si512(_mm512_mask_blend_epi8(0xaaaaaaaaaaaaaaaaull, even, odd), _mm512_set1_epi8(3));
  }
  static __m512i isum(Code u, __m512i x) {
    const __m512i zero = _mm512_setzero_si512();
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, u, x), _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), x));
  }
};

template <class F>
void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
           size_t row_end, size_t cols) {
  constexpr int P = F::kPairs;
  const size_t nb = cols / (64 * P), rb = nb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    __m512 acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *blk = row + b * F::kBytes;
      _mm_prefetch(reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(blk) + kPrefetch), _MM_HINT_T0);
      typename F::Code c[P];
      for (int i = 0; i < P; i++) c[i] = F::codes(blk, i);
      const __m512 d = _mm512_set1_ps(ld_f16(blk));
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block *xq = XQ + p * ldxq + b * 2 * P;
        __m512 t = _mm512_setzero_ps();
        for (int i = 0; i < P; i++)
          t = _mm512_fmadd_ps(scales2(xq + 2 * i), _mm512_cvtepi32_ps(F::isum(c[i], act64(xq + 2 * i))), t);
        acc[p] = _mm512_fmadd_ps(d, t, acc[p]);
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = _mm512_reduce_add_ps(acc[p]);
  }
}

void gemvm_nvfp4(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                 size_t row_begin, size_t row_end, size_t cols) {
  constexpr size_t kBytes = GB_NVFP4_BLOCK_BYTES;
  const size_t nb = cols / 64, rb = nb * kBytes;
  static const int8_t kCodes[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};  // E2M1 doubled, + 12
  const __m512i table =
      _mm512_maskz_broadcast_i32x4((__mmask16)0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i *>(kCodes)));
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m512i twelve = _mm512_set1_epi8(12), zero = _mm512_setzero_si512();
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    __m512 acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *blk = row + b * kBytes;
      _mm_prefetch(reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(blk) + kPrefetch), _MM_HINT_T0);
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 4));
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      // lanes: groups 0, 2 (unpacklo), then 1, 3 (unpackhi); reordered to 0, 1, 2, 3
      const __m512i g = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_unpacklo_epi64(lo, hi)),
                                           _mm256_unpackhi_epi64(lo, hi), 1);
      const __m512i u = _mm512_shuffle_epi8(table, _mm512_shuffle_i64x2(g, g, _MM_SHUFFLE(3, 1, 2, 0)));
      const __m512 d = _mm512_permutexvar_ps(spread, _mm512_zextps128_ps512(gb_nvfp4::scales4(blk)));
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block *xq = XQ + p * ldxq + 2 * b;
        const __m512i x = act64(xq);
        const __m512i isum = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, u, x), _mm512_dpbusd_epi32(zero, twelve, x));
        acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, scales2(xq)), acc[p]);
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = _mm512_reduce_add_ps(acc[p]);
  }
}

}  // namespace

extern "C" void gb_nvfp4_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                      size_t row_end, size_t cols) {
  gemvm_nvfp4(y, 0, W, xq, 0, 1, row_begin, row_end, cols);
}
extern "C" void gb_nvfp4_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                       size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gemvm_nvfp4(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}

#define GB_LOWBIT_AVX512(fmt, F)                                                                                     \
  extern "C" void gb_##fmt##_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,         \
                                          size_t row_begin, size_t row_end, size_t cols) {                           \
    gemvm<F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                                          \
  }                                                                                                                  \
  extern "C" void gb_##fmt##_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,            \
                                           const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,          \
                                           size_t row_end, size_t cols) {                                            \
    gemvm<F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                                                     \
  }

GB_LOWBIT_AVX512(q1_0, Q1_0)
GB_LOWBIT_AVX512(q2_0, Q2_0)
