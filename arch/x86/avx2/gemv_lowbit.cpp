// AVX2 GEMV of GGUF's Q1_0 (128 weights of one bit under an f16 scale) and
// Q2_0 (64 weights of two bits), one position (gemv) and several (gemvm).
// Layouts in kernels.h.
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
#include "kernels.h"

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

}  // namespace

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
