// gemv_float.h — the f32 / f16 tile loop of this folder (gemv_f32.cpp,
// gemv_f16.cpp), ARMv8-A Advanced SIMD.
//
// One tile serves the gemv and the gemvm: 4 rows x 8 columns per step,
// applied to P positions (P = 1 for the gemv). Per (row, position) one
// accumulator; per 8 columns
//   acc = fma(fma(acc, w[c..c+3], x[c..c+3]), w[c+4..c+7], x[c+4..c+7])
// (lane j sums the columns c with c % 4 == j), a column tail of 1..7 goes
// through the same two steps from zero-padded copies of w and x, and the row
// result is (acc[0] + acc[1]) + (acc[2] + acc[3]). That order depends neither
// on P nor on which rows share the tile (a tail group of 1..3 rows computes
// copies of its last row, not stored), so every gemvm is bit-identical per
// position to the gemv, and results do not depend on the row split.
//
// Registers: 4P accumulators, the 8 widened weight vectors of the step and
// two x vectors at a time: P <= kMaxTileP = 4 (26 of 32). Each weight vector
// is loaded and widened once per step and used for the tile's P positions;
// with more positions than that, a group's rows are re-read from cache once
// per chunk (chunks of near-equal size, at most kMaxTileP). One accumulator
// per (row, position) instead of two is what lets four positions fit; its
// price is a chain of two dependent FMAs per step, which bounds the f32 gemv
// (P = 1) at 2 FMA latencies per 32 weights where the core could issue more
// (the f16 gemv is bound by FCVTL throughput before that).
//
// F (the format's file) provides kBytes (per weight) and load8(p, lo, hi):
// the 8 weights at p as f32.
//
// Static, as in arm64_common.h: each kernel object keeps its own copy.
#ifndef GEARBX_ARCH_ARM64_NEON_GEMV_FLOAT_H
#define GEARBX_ARCH_ARM64_NEON_GEMV_FLOAT_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arm64/arm64_common.h"
#include "kernels.h"

namespace gb_arm64 {
namespace neon {

constexpr size_t kMaxTileP = 4;

// Rows w[0..3] times positions x[0..P): out[p] lane k = row k . x_p.
// xt[p]: x_p's column tail (cols % 8 values) zero-padded to 8.
template <class F, size_t P>
static inline void float_tile(float32x4_t *out, const uint8_t *const *w, const float *const *x, const float (*xt)[8],
                              size_t cols) {
  const size_t cmain = cols & ~(size_t)7;
  const size_t rem = cols - cmain;
  float32x4_t acc[4][P];
  for (size_t k = 0; k < 4; k++)
    for (size_t p = 0; p < P; p++) acc[k][p] = vdupq_n_f32(0.0f);
  for (size_t c = 0; c < cmain; c += 8) {
    float32x4_t lo[4], hi[4];
    for (size_t k = 0; k < 4; k++) F::load8(w[k] + F::kBytes * c, lo[k], hi[k]);
    for (size_t p = 0; p < P; p++) {
      const float32x4_t x0 = vld1q_f32(x[p] + c), x1 = vld1q_f32(x[p] + c + 4);
      for (size_t k = 0; k < 4; k++) acc[k][p] = vfmaq_f32(acc[k][p], lo[k], x0);
      for (size_t k = 0; k < 4; k++) acc[k][p] = vfmaq_f32(acc[k][p], hi[k], x1);
    }
  }
  if (rem) {
    float32x4_t lo[4], hi[4];
    for (size_t k = 0; k < 4; k++) {
      uint8_t wt[8 * F::kBytes];
      memset(wt, 0, sizeof wt);
      memcpy(wt, w[k] + F::kBytes * cmain, rem * F::kBytes);
      F::load8(wt, lo[k], hi[k]);
    }
    for (size_t p = 0; p < P; p++) {
      const float32x4_t x0 = vld1q_f32(xt[p]), x1 = vld1q_f32(xt[p] + 4);
      for (size_t k = 0; k < 4; k++) acc[k][p] = vfmaq_f32(acc[k][p], lo[k], x0);
      for (size_t k = 0; k < 4; k++) acc[k][p] = vfmaq_f32(acc[k][p], hi[k], x1);
    }
  }
  for (size_t p = 0; p < P; p++)
    out[p] = vpaddq_f32(vpaddq_f32(acc[0][p], acc[1][p]), vpaddq_f32(acc[2][p], acc[3][p]));
}

// Y[i*ldy + r] = W[r] . X_i for i < m (1 <= m <= GB_GEMVM_MAX_M), r in
// [row_begin, row_end); the gemv is m = 1.
template <class F>
static inline void float_gemvm(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx, size_t m,
                               size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = cols * F::kBytes;
  const size_t cmain = cols & ~(size_t)7;
  const float *x[GB_GEMVM_MAX_M];
  float xt[GB_GEMVM_MAX_M][8];
  for (size_t i = 0; i < m; i++) {
    x[i] = X + i * ldx;
    memset(xt[i], 0, sizeof xt[i]);
    memcpy(xt[i], x[i] + cmain, (cols - cmain) * 4);
  }
  const size_t chunks = (m + kMaxTileP - 1) / kMaxTileP;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *w[4];
    for (size_t k = 0; k < 4; k++) w[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    for (size_t ch = 0, p0 = 0; ch < chunks; ch++) {
      const size_t np = m / chunks + (ch < m % chunks ? 1 : 0);
      float32x4_t out[kMaxTileP];
      switch (np) {
        case 4: float_tile<F, 4>(out, w, x + p0, xt + p0, cols); break;
        case 3: float_tile<F, 3>(out, w, x + p0, xt + p0, cols); break;
        case 2: float_tile<F, 2>(out, w, x + p0, xt + p0, cols); break;
        default: float_tile<F, 1>(out, w, x + p0, xt + p0, cols); break;
      }
      for (size_t p = 0; p < np; p++) {
        float *y = Y + (p0 + p) * ldy + r;
        store_rows(y, out[p], nr);
      }
      p0 += np;
    }
  }
}

}  // namespace neon
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_NEON_GEMV_FLOAT_H
