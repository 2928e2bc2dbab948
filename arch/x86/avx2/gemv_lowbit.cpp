// AVX2 GEMV of GGUF's Q1_0 (128 weights of one bit under an f16 scale),
// Q2_0 (64 weights of two bits) and NVFP4 (64 E2M1 weights under four UE4M3
// scales), one position (gemv) and several (gemvm). Layouts in kernels.h.
//
// A 32-weight sub-block becomes 32 unsigned bytes u in element order in one
// 256-bit vector: q1_0 the bits (0 / 1: byte j takes byte j / 8 of the
// sub-block's 32-bit word and keeps bit j % 8), q2_0 the 2-bit fields (0..3:
// the four fields of every byte split into four vectors and interleaved
// back into element order). Their products with the activations go through
// vpmaddubsw (pairs <= 2 * 3 * 128: exact in int16) and vpmaddwd by ones, and
// the code's offset is taken out with the activation block's sum: q1_0's
// code 2u - 1 gives isum = 2 * sum u * x - xq.sum, q2_0's u - 1 gives
// sum u * x - xq.sum (the sum subtracted in lane 0), exact in int32. Then,
// per activation block, t += xd * (float)isum lane by lane and, per block,
// acc += d * t, fused, the eight lanes added at the end: generic's
// arithmetic with the float part reassociated (the tests' tolerance).
//
// NVFP4: a 32-weight half of the block (groups 2s and 2s + 1) is 16 bytes
// of nibbles; the low and high nibbles of the first 8 bytes are group 2s's
// weights 0..7 and 8..15 in element order, so unpacking the two 64-bit
// halves of (low, high) gives the 32 table indexes in element order, and
// vpshufb in the E2M1 table the signed codes (-12..12). |code| meets the
// activation carrying the code's sign through vpmaddubsw (pairs <= 2 * 12 *
// 127) and vpmaddwd by ones: lanes 0..3 hold group 2s's exact sums, 4..7
// group 2s + 1's. Then acc += (float)lanes * (d_group * xd), fused, the
// eight lanes added at the end: generic's arithmetic (xd * (d_lo * isum_lo
// + d_hi * isum_hi) per activation block) reassociated. The four scales are
// decoded in one vector (x86/nvfp4_scales.h).
//
// The gemv is the gemvm with one position: a block's codes are decoded once
// per row and every position goes through the same operations, so the gemvm
// is bit-identical per position to the gemv. Rows are read one at a time,
// each block asking for the bytes kPrefetch ahead; nothing is read outside
// the rows' blocks.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "f16.h"
#include "iquants.h"
#include "kernels.h"
#include "x86/nvfp4_scales.h"

namespace {

constexpr size_t kPrefetch = 1024;  // bytes ahead in the row

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float ld_f16(const uint8_t *p) { return gb::f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

struct Q1_0 {
  static constexpr size_t kBytes = GB_Q1_0_BLOCK_BYTES;
  static constexpr int kSubs = 4;      // 32-weight sub-blocks per block
  static constexpr int kCodeShift = 1;  // code = 2u - 1
  // The bits of sub-block s as bytes 0 / 1.
  static __m256i codes(const uint8_t *b, int s) {
    uint32_t w;
    memcpy(&w, b + 2 + 4 * s, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)w), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(1));
  }
};

struct Q2_0 {
  static constexpr size_t kBytes = GB_Q2_0_BLOCK_BYTES;
  static constexpr int kSubs = 2;
  static constexpr int kCodeShift = 0;  // code = u - 1
  // The fields of sub-block s (bytes 8s..8s + 7 of qs) as bytes 0..3.
  static __m256i codes(const uint8_t *b, int s) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(b + 2 + 8 * s));
    const __m128i m = _mm_set1_epi8(3);
    const __m128i a0 = _mm_and_si128(v, m), a1 = _mm_and_si128(_mm_srli_epi16(v, 2), m);
    const __m128i a2 = _mm_and_si128(_mm_srli_epi16(v, 4), m), a3 = _mm_and_si128(_mm_srli_epi16(v, 6), m);
    // byte i of a_k is weight 4i + k: pair the fields, then the pairs
    const __m128i t01 = _mm_unpacklo_epi8(a0, a1), t23 = _mm_unpacklo_epi8(a2, a3);
    return _mm256_set_m128i(_mm_unpackhi_epi16(t01, t23), _mm_unpacklo_epi16(t01, t23));
  }
};

template <class F>
void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
           size_t row_end, size_t cols) {
  constexpr int S = F::kSubs;
  const size_t nb = cols / (32 * S), rb = nb * F::kBytes;
  const __m256i ones = _mm256_set1_epi16(1);
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    __m256 acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *blk = row + b * F::kBytes;
      _mm_prefetch(reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(blk) + kPrefetch), _MM_HINT_T0);
      __m256i c[S];
      for (int s = 0; s < S; s++) c[s] = F::codes(blk, s);
      const __m256 d = _mm256_set1_ps(ld_f16(blk));
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block *xq = XQ + p * ldxq + b * S;
        __m256 t = _mm256_setzero_ps();
        for (int s = 0; s < S; s++) {
          const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[s].qs));
          const __m256i v = _mm256_madd_epi16(_mm256_maddubs_epi16(c[s], x), ones);
          const __m256i is = _mm256_sub_epi32(_mm256_slli_epi32(v, F::kCodeShift), _mm256_setr_epi32(xq[s].sum, 0, 0, 0, 0, 0, 0, 0));
          t = _mm256_fmadd_ps(_mm256_set1_ps(xq[s].d), _mm256_cvtepi32_ps(is), t);
        }
        acc[p] = _mm256_fmadd_ps(d, t, acc[p]);
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = hsum(acc[p]);
  }
}

void gemvm_nvfp4(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                 size_t row_begin, size_t row_end, size_t cols) {
  constexpr size_t kBytes = GB_NVFP4_BLOCK_BYTES;
  const size_t nb = cols / 64, rb = nb * kBytes;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb_iq::kMxfp4)));
  const __m128i low4 = _mm_set1_epi8(15);
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    __m256 acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *blk = row + b * kBytes;
      _mm_prefetch(reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(blk) + kPrefetch), _MM_HINT_T0);
      __m256i c[2];
      for (int s = 0; s < 2; s++) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk + 4 + 16 * s));
        const __m128i lo = _mm_and_si128(v, low4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
        c[s] = _mm256_shuffle_epi8(table, _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi)));
      }
      const __m256 d4 = _mm256_castps128_ps256(gb_nvfp4::scales4(blk));
      const __m256 dg[2] = {_mm256_permutevar8x32_ps(d4, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
                            _mm256_permutevar8x32_ps(d4, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3))};
      const __m256i a0 = _mm256_abs_epi8(c[0]), a1 = _mm256_abs_epi8(c[1]);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block *xq = XQ + p * ldxq + 2 * b;
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[0].qs));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[1].qs));
        const __m256i v0 = _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(x0, c[0])), ones);
        const __m256i v1 = _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(x1, c[1])), ones);
        acc[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v0), _mm256_mul_ps(dg[0], _mm256_set1_ps(xq[0].d)), acc[p]);
        acc[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v1), _mm256_mul_ps(dg[1], _mm256_set1_ps(xq[1].d)), acc[p]);
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = hsum(acc[p]);
  }
}

}  // namespace

extern "C" void gb_nvfp4_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                    size_t row_end, size_t cols) {
  gemvm_nvfp4(y, 0, W, xq, 0, 1, row_begin, row_end, cols);
}
extern "C" void gb_nvfp4_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                     size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gemvm_nvfp4(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}

#define GB_LOWBIT_AVX2(fmt, F)                                                                                     \
  extern "C" void gb_##fmt##_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,        \
                                        size_t row_begin, size_t row_end, size_t cols) {                           \
    gemvm<F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                                        \
  }                                                                                                                \
  extern "C" void gb_##fmt##_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,           \
                                         const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,          \
                                         size_t row_end, size_t cols) {                                            \
    gemvm<F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                                                   \
  }

GB_LOWBIT_AVX2(q1_0, Q1_0)
GB_LOWBIT_AVX2(q2_0, Q2_0)
