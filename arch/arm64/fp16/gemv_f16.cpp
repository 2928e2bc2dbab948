// ARMv8.2-A FP16 arithmetic (FEAT_FP16: FMUL / FMLA on eight binary16
// lanes) f16 GEMV, one position (gemv) and several (gemvm): the Cortex-A55,
// Cortex-A76 / Neoverse-N1 class, where no exact widening form reaches the
// DRAM bound (the neon kernel widens every weight with FCVTL, two uops on
// the one V0 pipe per four weights: 16.0 cycles per 32 weights on LLVM's
// Neoverse-N1 model against a Raspberry Pi 5's DRAM bound of 9.0; this one
// 7.6, bench/mca.sh: it widens one binary16 sum per four products).
//
// What it computes, per row and position, for activations that binary16
// represents exactly (as the session passes them: forward.h
// f16_activations), x in binary16 (FCVTN: exact for such values):
//   per block of 32 columns c0.., for lane j = 0..7, in binary16 with
//   round-to-nearest-even (one rounding per FMLA, which is fused)
//     a_j = w[c0+j] x[c0+j]  (+ w[c0+8+j] x[c0+8+j]) (+ w[c0+16+j] ...) (+ w[c0+24+j] ...)
//   then, widened (exact), in f32: L_i = (L_i + a_i) + a_(i+4) for the
//   row's four lane sums L_0..3, block after block; a column tail of 1..31
//   is one more block with zeros in the missing columns (adding exact zeros
//   to a binary16 partial sum leaves it as it is); the result is
//   (L0 + L1) + (L2 + L3).
// So each product and each partial sum of four products is rounded to
// binary16 once: per block the error is at most 4 u sum|w x| (u = 2^-11)
// plus 4 x 2^-25 where products fall below binary16's normal range, on top
// of the f32 sums. Measured on stories5M's high tier (TinyStories text, KL
// against the f32 tier, under qemu): 1.8e-7 nats/token against 8e-8 for
// the neon kernel's f32 sums of exact products; a binary16 sum per lane
// over the whole row instead (emulated) gave 6.3e-7.
//
// Exact fallbacks, so that no input gets a worse answer than the neon
// kernel's: a position whose x has a value binary16 cannot hold (|x| >
// 65504, NaN) takes gb_f16_gemv__neon for all its rows; a (row, position)
// whose result is not finite (a binary16 partial sum overflowed, or a weight
// is inf / NaN) is recomputed by gb_f16_gemv__neon, which gives what f32
// sums give. Both are decided per position as the gemv decides them, so
// every gemvm is bit-identical per position to the gemv (the spec gear's
// verify pass to a decode step), and results do not depend on the row
// split (a tail group of 1..3 rows computes copies of its last row, not
// stored).
//
// Weight rows are not assumed aligned (byte loads reinterpreted); column
// tails go through zero-padded copies. Nothing is read past the last row's
// bytes or past x[cols).
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

// The neon folder's exact kernel (always built with this one).
extern "C" void gb_f16_gemv__neon(float *y, const uint8_t *W, const float *x, const gb_q8x_block *xq, size_t row_begin,
                                  size_t row_end, size_t cols);

namespace {

constexpr size_t kBlock = 32;
// Tiles: one position x 8 rows (the gemv: the conversion of x to binary16,
// FCVTN on V0 like FCVTL, is shared by 8 rows: 7.6 cycles per 32 weights on
// Neoverse-N1 where a 4-row tile took 9.3), or two positions x 4 rows (gemvm).
// Registers: R sums per position, 4 x vectors per position, 4 weights.
constexpr size_t kMaxTileP = 2;

// Whether binary16 holds every x[0..cols) exactly (round trip through
// FCVTN / FCVTL: inf for |x| > 65504 and NaN never compare equal).
bool f16_exact(const float *x, size_t cols) {
  uint32x4_t ok = vdupq_n_u32(~0u);
  size_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    const float32x4_t v = vld1q_f32(x + c);
    ok = vandq_u32(ok, vceqq_f32(v, vcvt_f32_f16(vcvt_f16_f32(v))));
  }
  for (; c < cols; c++) {
    const float32x4_t v = vdupq_n_f32(x[c]);
    ok = vandq_u32(ok, vceqq_f32(v, vcvt_f32_f16(vcvt_f16_f32(v))));
  }
  return vminvq_u32(ok) != 0;
}

// 32 activations from f32 (exact in binary16) to four 8-lane vectors.
inline void load_x32(float16x8_t xh[4], const float *x) {
  for (int i = 0; i < 4; i++)
    xh[i] = vcombine_f16(vcvt_f16_f32(vld1q_f32(x + 8 * i)), vcvt_f16_f32(vld1q_f32(x + 8 * i + 4)));
}

inline float16x8_t load_w8(const uint8_t *p) { return vreinterpretq_f16_u8(vld1q_u8(p)); }

// One block of 32 columns: the R rows' weights w[k] (64 bytes each)
// against P positions' activations xh[p], into the lane sums acc.
template <size_t P, size_t R>
__attribute__((always_inline)) inline void block(float32x4_t (*acc)[P], const uint8_t *const *w, const float16x8_t (*xh)[4]) {
  for (size_t k = 0; k < R; k++) {
    const float16x8_t w0 = load_w8(w[k]), w1 = load_w8(w[k] + 16), w2 = load_w8(w[k] + 32), w3 = load_w8(w[k] + 48);
    for (size_t p = 0; p < P; p++) {
      float16x8_t a = vmulq_f16(w0, xh[p][0]);
      a = vfmaq_f16(a, w1, xh[p][1]);
      a = vfmaq_f16(a, w2, xh[p][2]);
      a = vfmaq_f16(a, w3, xh[p][3]);
      acc[k][p] = vaddq_f32(vaddq_f32(acc[k][p], vcvt_f32_f16(vget_low_f16(a))), vcvt_high_f32_f16(a));
    }
  }
}

// Rows w[0..R) times positions x[0..P): out[p][j] lane k = row 4j + k . x_p.
template <size_t P, size_t R>
__attribute__((always_inline)) inline void tile(float32x4_t (*out)[R / 4], const uint8_t *const *w, const float *const *x,
                                                size_t cols) {
  const size_t cmain = cols / kBlock * kBlock, rem = cols - cmain;
  float32x4_t acc[R][P];
  for (size_t k = 0; k < R; k++)
    for (size_t p = 0; p < P; p++) acc[k][p] = vdupq_n_f32(0.0f);
  for (size_t c = 0; c < cmain; c += kBlock) {
    float16x8_t xh[P][4];
    for (size_t p = 0; p < P; p++) load_x32(xh[p], x[p] + c);
    const uint8_t *wc[R];
    for (size_t k = 0; k < R; k++) wc[k] = w[k] + 2 * c;
    block<P, R>(acc, wc, xh);
  }
  if (rem) {
    float16x8_t xh[P][4];
    for (size_t p = 0; p < P; p++) {
      float xt[kBlock];
      memset(xt, 0, sizeof xt);
      memcpy(xt, x[p] + cmain, rem * 4);
      load_x32(xh[p], xt);
    }
    uint8_t wt[R][2 * kBlock];
    const uint8_t *wc[R];
    for (size_t k = 0; k < R; k++) {
      memset(wt[k], 0, sizeof wt[k]);
      memcpy(wt[k], w[k] + 2 * cmain, rem * 2);
      wc[k] = wt[k];
    }
    block<P, R>(acc, wc, xh);
  }
  for (size_t p = 0; p < P; p++)
    for (size_t j = 0; j < R / 4; j++) {
      out[p][j] = vpaddq_f32(vpaddq_f32(acc[4 * j][p], acc[4 * j + 1][p]), vpaddq_f32(acc[4 * j + 2][p], acc[4 * j + 3][p]));
    }
}

// Rows [row_begin, row_end) for the P positions x[p] (all f16-exact), into
// y[p][r]; a non-finite result is recomputed exactly. Inlined into the
// entry points (one hot loop per kernel, as bench/mca.sh reads them).
template <size_t P, size_t R>
__attribute__((always_inline)) inline void rows(float *const *y, const uint8_t *W, const float *const *x, size_t row_begin,
                                                size_t row_end, size_t cols) {
  const size_t rb = 2 * cols;
  for (size_t r = row_begin; r < row_end; r += R) {
    const size_t nr = row_end - r < R ? row_end - r : R;
    const uint8_t *w[R];
    for (size_t k = 0; k < R; k++) w[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t out[P][R / 4];
    tile<P, R>(out, w, x, cols);
    for (size_t p = 0; p < P; p++) {
      float t[R];
      for (size_t j = 0; j < R / 4; j++) vst1q_f32(t + 4 * j, out[p][j]);
      for (size_t k = 0; k < nr; k++) {
        if (isfinite(t[k])) y[p][r + k] = t[k];
        else gb_f16_gemv__neon(y[p], W, x[p], nullptr, r + k, r + k + 1, cols);
      }
    }
  }
}

}  // namespace

extern "C" void gb_f16_gemv__fp16(float *y, const uint8_t *W, const float *x, const gb_q8x_block *, size_t row_begin,
                                  size_t row_end, size_t cols) {
  if (!f16_exact(x, cols)) {
    gb_f16_gemv__neon(y, W, x, nullptr, row_begin, row_end, cols);
    return;
  }
  float *ys[1] = {y};
  const float *xs[1] = {x};
  rows<1, 8>(ys, W, xs, row_begin, row_end, cols);
}

// Positions whose x binary16 holds go through tiles of two (each weight
// block loaded once for both), the others one by one through the exact
// kernel: per position what the gemv computes.
extern "C" void gb_f16_gemvm__fp16(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  size_t exact[GB_GEMVM_MAX_M], n = 0;
  for (size_t i = 0; i < m; i++) {
    if (f16_exact(X + i * ldx, cols)) exact[n++] = i;
    else gb_f16_gemv__neon(Y + i * ldy, W, X + i * ldx, nullptr, row_begin, row_end, cols);
  }
  size_t i = 0;
  for (; i + kMaxTileP <= n; i += kMaxTileP) {
    float *ys[kMaxTileP];
    const float *xs[kMaxTileP];
    for (size_t p = 0; p < kMaxTileP; p++) {
      ys[p] = Y + exact[i + p] * ldy;
      xs[p] = X + exact[i + p] * ldx;
    }
    rows<kMaxTileP, 4>(ys, W, xs, row_begin, row_end, cols);
  }
  for (; i < n; i++) {
    float *ys[1] = {Y + exact[i] * ldy};
    const float *xs[1] = {X + exact[i] * ldx};
    rows<1, 8>(ys, W, xs, row_begin, row_end, cols);
  }
}
