// The driver of the AVX2 K-quant kernels that decode each row's super-block
// once and dot it with every position (q2k, q3k, q5k).
//
// Rows go in groups of four (the prefetch streams of avx2_common.h), one
// super-block (256 weights, eight activation blocks) at a time. Per
// super-block, every position's activation blocks are first prepared once
// for the group (F::prepare: what the format's dot needs of them besides the
// codes, e.g. 16-value half sums); then each row's super-block is decoded
// (F::decode) and accumulated against every prepared position
// (F::accumulate, one f32 lane per activation block). Each row's eight lanes
// are summed at the end (hsum4).
//
// The gemv is the gemvm with one position: the same operations per (row,
// position), so the gemvm is bit-identical per position to the gemv; a row's
// result does not depend on the rows beside it.
//
// A format F provides: kBytes (bytes per super-block), types Act and
// Decoded, and
//   static void prepare(const gb_q8x_block *x, Act &a);  // x: 8 blocks
//   static void decode(const uint8_t *blk, Decoded &u);
//   static __m256 accumulate(const Decoded &u, const Act &a, __m256 acc);
#ifndef GEARBX_ARCH_X86_AVX2_GEMV_KQUANT_H
#define GEARBX_ARCH_X86_AVX2_GEMV_KQUANT_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2_common.h"
#include "kernels.h"

namespace gb_avx2_kquant {

constexpr size_t kPrefetch = 4096;  // bytes ahead per row stream (avx2_common.h)

// Rows [r, r + R), R <= 4, times m positions.
template <class F, int R>
inline void rows(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t r,
                 size_t nsb, const gb_avx2::Prefetch &pf) {
  const size_t rb = nsb * F::kBytes;
  __m256 acc[GB_GEMVM_MAX_M][4];
  for (size_t p = 0; p < m; p++)
    for (int i = 0; i < 4; i++) acc[p][i] = _mm256_setzero_ps();
  for (size_t s = 0; s < nsb; s++) {
    const size_t off = s * F::kBytes, ahead = off < pf.split ? pf.near : pf.far;
    typename F::Act act[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) F::prepare(XQ + p * ldxq + 8 * s, act[p]);
    for (int i = 0; i < R; i++) {
      const uint8_t *blk = W + (r + i) * rb + off;
      for (size_t k = 0; k < F::kBytes; k += 64)
        _mm_prefetch(reinterpret_cast<const char *>(blk + ahead + k), _MM_HINT_T0);
      typename F::Decoded u;
      F::decode(blk, u);
      for (size_t p = 0; p < m; p++) acc[p][i] = F::accumulate(u, act[p], acc[p][i]);
    }
  }
  for (size_t p = 0; p < m; p++)
    gb_avx2::store_lanes<R>(Y + p * ldy + r, gb_avx2::hsum4(acc[p][0], acc[p][1], acc[p][2], acc[p][3]));
}

template <class F>
inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  gb_avx2::for_row_groups<kPrefetch>(row_begin, row_end, nsb * F::kBytes, [&](auto R, size_t r, gb_avx2::Prefetch pf) {
    rows<F, decltype(R)::value>(Y, ldy, W, XQ, ldxq, m, r, nsb, pf);
  });
}

}  // namespace gb_avx2_kquant

// The two entry points of format `fmt` (kernels.inc) on driver type F.
#define GB_AVX2_KQUANT_ENTRIES(fmt, F)                                                                              \
  extern "C" void gb_##fmt##_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,         \
                                        size_t row_begin, size_t row_end, size_t cols) {                           \
    gb_avx2_kquant::gemvm<F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                          \
  }                                                                                                                 \
  extern "C" void gb_##fmt##_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,            \
                                         const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,           \
                                         size_t row_end, size_t cols) {                                             \
    gb_avx2_kquant::gemvm<F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                                     \
  }

#endif  // GEARBX_ARCH_X86_AVX2_GEMV_KQUANT_H
