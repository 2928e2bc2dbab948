// avx2_common.h — helpers shared by the AVX2 kernels of this folder (compiled
// with its -mavx2 -mfma -mf16c only): the software-prefetch plan, column-tail
// masks, horizontal sums, scalar fp16-scale loads, and the loop over groups
// of four rows every GEMV here is built from.
#ifndef GEARBX_ARCH_X86_AVX2_COMMON_H
#define GEARBX_ARCH_X86_AVX2_COMMON_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

namespace gb_avx2 {

// Software prefetch. The rows of a group are adjacent in memory, so the
// hardware prefetchers' streams run into each other (from DRAM, without
// this, about a third of the bandwidth for the block formats). Each row i
// prefetches kAhead bytes ahead in its own stream: row i, then row i + 4 of
// the next group, and so on. Offsets from the current position: `near`
// before byte `split` of the row, `far` after; 0 (the current line) past the
// rows in range.
struct Prefetch {
  size_t split, near, far;
};

template <size_t kAhead>
inline Prefetch prefetch_plan(size_t rb, size_t groups_after) {
  const size_t k = kAhead / rb;
  Prefetch p;
  p.split = rb - kAhead % rb;
  p.near = k <= groups_after ? kAhead + 3 * rb * k : 0;
  p.far = k + 1 <= groups_after ? kAhead + 3 * rb * (k + 1) : 0;
  return p;
}

// Lanes i < rem set: a mask for _mm256_maskload_ps (rem in 1..7).
inline __m256i tail_mask(size_t rem) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// [sum(a0), sum(a1), sum(a2), sum(a3)], each lane reduced in the same order.
inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// A u16 (fp16 scale) in a general register. The empty asm keeps the
// compiler from moving the scale assembly into vector registers, where it
// would cost more vector µops than the scalar shifts and ors it replaces.
inline uint64_t ld16(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  uint64_t v = h;
  __asm__("" : "+r"(v));
  return v;
}

// y[0..R) = lanes 0..R of acc.
template <int R>
inline void store_lanes(float *y, __m128 acc) {
  if (R == 4) {
    _mm_storeu_ps(y, acc);
  } else {
    float t[4];
    _mm_storeu_ps(t, acc);
    for (int i = 0; i < R; i++) y[i] = t[i];
  }
}

// Rows [row_begin, row_end) of a matrix with rb-byte rows, in groups of four
// (prefetching kAhead bytes ahead) and a tail group of 1-3 rows (no
// prefetch): rows(std::integral_constant<int, R>, r, plan) computes rows
// r..r+R.
template <size_t kAhead, class Rows>
inline void for_row_groups(size_t row_begin, size_t row_end, size_t rb, Rows rows) {
  const Prefetch none = {0, 0, 0};
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) rows(std::integral_constant<int, 4>(), r, prefetch_plan<kAhead>(rb, (row_end - r) / 4 - 1));
  switch (row_end - r) {
    case 3: rows(std::integral_constant<int, 3>(), r, none); break;
    case 2: rows(std::integral_constant<int, 2>(), r, none); break;
    case 1: rows(std::integral_constant<int, 1>(), r, none); break;
    default: break;
  }
}

}  // namespace gb_avx2

#endif  // GEARBX_ARCH_X86_AVX2_COMMON_H
