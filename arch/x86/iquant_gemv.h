// The GEMV driver of GGUF's i-quants in the AVX2 folder: every one of them
// (iq2xxs, iq2xs, iq2s, iq3xxs, iq3s, iq1s, iq1m) with vpmaddubsw, one
// position (gemv) and several (gemvm); the AVX-512 folder decodes in its own
// way (avx512/gemv_iquants.cpp) and shares sb_positions and hsum from here.
// Layouts in kernels.h; the codebooks and each format's decoder in
// arch/iquants.h.
//
// A 32-weight sub-block becomes its 32 int8 codes in one 256-bit vector
// (element order): the decoder's four 8-lane words lo and hi (codebook rows
// looked up by index, sign masks from the sign bits) are placed with
// vpinsrq / vinserti128 and added as bytes. The folder's Dot gives exact
// int32 partial sums of four products per lane, |code| meeting the
// activation that carries the code's sign; lanes 0..3 hold weights 0..15,
// lanes 4..7 weights 16..31, so one vpmulld by the two halves' odd scales
// gives sc * isum per lane (|value| < 2^22: exact in float). Then, per
// activation block, t += xd * (float)(sc * isum) and, per super-block,
// acc += dq * t with fused multiply-adds, and the eight lanes are added at
// the end: generic's arithmetic (gemv_ggml.h) with the float part
// reassociated (the tests' tolerance).
//
// The gemv is the gemvm with one position: a super-block's codes are
// decoded once per row and every position goes through the same
// operations, so the gemvm is bit-identical per position to the gemv.
// Nothing is read outside the rows' blocks.
#ifndef GEARBX_ARCH_X86_IQUANT_GEMV_H
#define GEARBX_ARCH_X86_IQUANT_GEMV_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "iquants.h"
#include "kernels.h"

// Internal linkage: a kernel folder's objects define no shared or weak symbols.
namespace gb_iqx {
namespace {

constexpr size_t kPrefetch = 1024;  // bytes ahead in the row

inline __m256i words4(const uint64_t *v) {
  const __m128i a = _mm_insert_epi64(_mm_cvtsi64_si128((long long)v[0]), (long long)v[1], 1);
  const __m128i b = _mm_insert_epi64(_mm_cvtsi64_si128((long long)v[2]), (long long)v[3], 1);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}

// The 32 codes of sub-block s of the super-block at b.
template <class F>
inline __m256i codes(const uint8_t *b, int s) {
  uint64_t lo[4], hi[4];
  F::sub(b, s, lo, hi);
  return _mm256_add_epi8(words4(lo), words4(hi));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One super-block's terms for positions [0, m): acc[p] += dq * sum over
// sub-blocks s of xd_s * (float)(s8[s] * dot(s, x_s)), dot(s, x) giving
// the int32 sums of sub-block s's products with the activations x (lanes
// 0..3 weights 0..15, 4..7 weights 16..31), in this order.
template <class DotS>
__attribute__((always_inline)) inline void sb_positions(__m256 *acc, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t sb,
                                                        const __m256i *s8, __m256 dq, DotS dot) {
  for (size_t p = 0; p < m; p++) {
    const gb_q8x_block *xq = XQ + p * ldxq + sb * 8;
    __m256 t = _mm256_setzero_ps();
    for (int s = 0; s < 8; s++) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[s].qs));
      const __m256i is = _mm256_mullo_epi32(dot(s, x), s8[s]);
      t = _mm256_fmadd_ps(_mm256_set1_ps(xq[s].d), _mm256_cvtepi32_ps(is), t);
    }
    acc[p] = _mm256_fmadd_ps(dq, t, acc[p]);
  }
}

template <class F, class Dot>
inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    __m256 acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < nsb; sb++) {
      const uint8_t *b = row + sb * F::kBytes;
      if ((sb + 1) * F::kBytes + kPrefetch <= rb)
        _mm_prefetch(reinterpret_cast<const char *>(b + kPrefetch), _MM_HINT_T0);
      int32_t sc[16];
      F::scales(b, sc);
      __m256i c[8], s8[8];
      for (int s = 0; s < 8; s++) {
        c[s] = codes<F>(b, s);
        s8[s] = _mm256_set_m128i(_mm_set1_epi32(sc[2 * s + 1]), _mm_set1_epi32(sc[2 * s]));
      }
      sb_positions(acc, XQ, ldxq, m, sb, s8, _mm256_set1_ps(F::dq(b)), [&c](int s, __m256i x) { return Dot::dot(c[s], x); });
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = hsum(acc[p]);
  }
}

}  // namespace
}  // namespace gb_iqx

// The two entry points of format `fmt` on decoder F (arch/iquants.h) with
// the folder's Dot, in folder `isa`.
#define GB_IQUANT_X86(fmt, F, isa)                                                                                 \
  extern "C" void gb_##fmt##_gemv__##isa(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,       \
                                         size_t row_begin, size_t row_end, size_t cols) {                          \
    gb_iqx::gemvm<gb_iq::F, Dot>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                    \
  }                                                                                                                \
  extern "C" void gb_##fmt##_gemvm__##isa(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,          \
                                          const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,         \
                                          size_t row_end, size_t cols) {                                           \
    gb_iqx::gemvm<gb_iq::F, Dot>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                               \
  }
#define GB_IQUANTS_X86(isa)             \
  GB_IQUANT_X86(iq2xxs, Iq2xxs, isa)    \
  GB_IQUANT_X86(iq2xs, Iq2xs, isa)      \
  GB_IQUANT_X86(iq2s, Iq2s, isa)        \
  GB_IQUANT_X86(iq3xxs, Iq3xxs, isa)    \
  GB_IQUANT_X86(iq3s, Iq3s, isa)        \
  GB_IQUANT_X86(iq1s, Iq1s, isa)        \
  GB_IQUANT_X86(iq1m, Iq1m, isa)

#endif  // GEARBX_ARCH_X86_IQUANT_GEMV_H
