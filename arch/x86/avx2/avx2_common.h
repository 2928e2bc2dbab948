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

// ---- multi-position GEMV of the float formats (f32, f16) --------------------
// The f32 / f16 GEMVs reduce every row the same way whichever group of four
// it is computed in: steps of Fmt::kStep columns whose 8-column parts
// alternate between two fused accumulators a0 / a1, then 8-column steps
// into a0, then the zero-padded column tail (< 8) into a1; finally
// s = a0 + a1 and hsum4's lane order. The multi-position kernels keep that
// order per (row, position) and only tile differently: R rows x P positions
// (2 x 3: 12 accumulators, two weight vectors and one x in the 16 ymm
// registers), each weight vector loaded (and widened) once per tile and
// applied to the P positions. A pair of rows is re-read from cache once per
// chunk of 3 positions; from memory once.
//
// Fmt provides kStep (columns per main step, a multiple of 16), kBytes (per
// weight), load8(row, c) (columns c..c+8 as f32) and tail8(row, c, rem)
// (columns c..c+rem, zero-padded to 8, reading only the row's bytes).
// pf > 0: each main step also asks for the line pf bytes ahead in each
// row's stream, into every cache level (float_gemv2).
template <class Fmt, int R, int P>
inline void float_gemvm_tile(float *Y, size_t ldy, const uint8_t *const *w, const float *const *x, size_t r,
                             size_t cols, size_t pf = 0) {
  __m256 a0[R][P], a1[R][P];
  for (int i = 0; i < R; i++)
    for (int p = 0; p < P; p++) a0[i][p] = a1[i][p] = _mm256_setzero_ps();
  // One 8-column part at c into the accumulators acc (a0 or a1).
  auto part = [&](__m256(*acc)[P], size_t c) __attribute__((always_inline)) {
    __m256 wv[R];
    for (int i = 0; i < R; i++) wv[i] = Fmt::load8(w[i], c);
    for (int p = 0; p < P; p++) {
      const __m256 xv = _mm256_loadu_ps(x[p] + c);
      for (int i = 0; i < R; i++) acc[i][p] = _mm256_fmadd_ps(wv[i], xv, acc[i][p]);
    }
  };
  size_t c = 0;
  for (; c + Fmt::kStep <= cols; c += Fmt::kStep) {
    if (pf)
      for (int i = 0; i < R; i++) _mm_prefetch(reinterpret_cast<const char *>(w[i] + c * Fmt::kBytes + pf), _MM_HINT_T0);
    for (size_t k = 0; k < Fmt::kStep; k += 16) {
      part(a0, c + k);
      part(a1, c + k + 8);
    }
  }
  for (; c + 8 <= cols; c += 8) part(a0, c);
  if (c < cols) {
    const size_t rem = cols - c;
    const __m256i mask = tail_mask(rem);
    __m256 wv[R];
    for (int i = 0; i < R; i++) wv[i] = Fmt::tail8(w[i], c, rem);
    for (int p = 0; p < P; p++) {
      const __m256 xv = _mm256_maskload_ps(x[p] + c, mask);
      for (int i = 0; i < R; i++) a1[i][p] = _mm256_fmadd_ps(wv[i], xv, a1[i][p]);
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  for (int i = 0; i < R; i++)
    for (int p = 0; p < P; p++)
      Y[p * ldy + r + i] = _mm_cvtss_f32(hsum4(_mm256_add_ps(a0[i][p], a1[i][p]), zero, zero, zero));
}

// Rows [row_begin, row_end) in pairs (a last single row), positions in
// chunks of 3 (a last chunk of 1 or 2).
template <class Fmt>
inline void float_gemvm(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx, size_t m,
                        size_t row_begin, size_t row_end, size_t cols) {
  constexpr int kR = 2, kP = 3;
  const size_t rb = cols * Fmt::kBytes;
  for (size_t r = row_begin; r < row_end; r += kR) {
    const size_t nr = row_end - r < (size_t)kR ? row_end - r : (size_t)kR;
    const uint8_t *w[kR];
    for (size_t i = 0; i < kR; i++) w[i] = W + (r + (i < nr ? i : 0)) * rb;
    for (size_t p0 = 0; p0 < m; p0 += kP) {
      const size_t np = m - p0 < (size_t)kP ? m - p0 : (size_t)kP;
      const float *x[kP];
      for (size_t p = 0; p < kP; p++) x[p] = X + (p0 + (p < np ? p : 0)) * ldx;
      float *y = Y + p0 * ldy;
      switch (nr * 4 + np) {
        case 2 * 4 + 3: float_gemvm_tile<Fmt, 2, 3>(y, ldy, w, x, r, cols); break;
        case 2 * 4 + 2: float_gemvm_tile<Fmt, 2, 2>(y, ldy, w, x, r, cols); break;
        case 2 * 4 + 1: float_gemvm_tile<Fmt, 2, 1>(y, ldy, w, x, r, cols); break;
        case 1 * 4 + 3: float_gemvm_tile<Fmt, 1, 3>(y, ldy, w, x, r, cols); break;
        case 1 * 4 + 2: float_gemvm_tile<Fmt, 1, 2>(y, ldy, w, x, r, cols); break;
        default: float_gemvm_tile<Fmt, 1, 1>(y, ldy, w, x, r, cols); break;
      }
    }
  }
}

// The one-position GEMV of the float formats as two read streams: the
// first and the second half of [row_begin, row_end), one row of each per
// tile, each prefetching kStreamAhead bytes ahead of itself (past row_end
// at the end: the next rows or bytes past the matrix, which a prefetch may
// name without faulting). Each row reduced as float_gemvm_tile reduces it,
// so the gemvm equals it bit for bit. Four adjacent rows side by side (the
// earlier kernels) read 79-80 % of the bandwidth from memory on the Zen 5
// host at one thread for f16 (81-84 % at two).
constexpr size_t kStreamAhead = 4096;
template <class Fmt>
inline void float_gemv2(float *y, const uint8_t *W, const float *x, size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = cols * Fmt::kBytes, h = (row_end - row_begin) / 2;
  const float *xs[1] = {x};
  for (size_t i = 0; i < h; i++) {
    const uint8_t *w[2] = {W + (row_begin + i) * rb, W + (row_begin + h + i) * rb};
    float out[2];
    float_gemvm_tile<Fmt, 2, 1>(out, 1, w, xs, 0, cols, kStreamAhead);
    y[row_begin + i] = out[0];
    y[row_begin + h + i] = out[1];
  }
  if (row_begin + 2 * h < row_end) {  // an odd count: the last row alone
    const uint8_t *w[1] = {W + (row_end - 1) * rb};
    float_gemvm_tile<Fmt, 1, 1>(y, 1, w, xs, row_end - 1, cols);
  }
}

}  // namespace gb_avx2

#endif  // GEARBX_ARCH_X86_AVX2_COMMON_H
