// ARMv8-A Advanced SIMD kernels (the Cortex-A53 baseline): f32 / f16 / q8 /
// q4 GEMV, f16 row expansion and the q8x activation quantizer.
//
// Baseline only: no SDOT, no fp16 arithmetic; fp16 is widened with FCVTL
// (vcvt_f32_f16), which is part of ARMv8-A.
//
// Block formats (q8, q4) reproduce the generic kernels exactly: the int32
// sum of each 32-block is exact, and per row the float work is
// acc += (d * xd) * (float)isum, block after block, with separate multiplies
// and adds (no fusing), four rows in the four lanes of a vector. The float
// formats (f32, f16) fuse multiply and add, four lanes per row (a different
// order of summation than generic, within the tests' tolerance).
//
// Weight rows are not assumed aligned: every weight load is a byte load
// (vld1q_u8) reinterpreted, and scalar data goes through memcpy. Nothing is
// read past the last row's bytes, past x[cols) or past xq[ceil(cols/32)).
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

namespace {

// ---- helpers ---------------------------------------------------------------

inline float f16_scale(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

inline float32x4_t f16_scales4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3) {
  uint16_t h[4];
  memcpy(&h[0], p0, 2);
  memcpy(&h[1], p1, 2);
  memcpy(&h[2], p2, 2);
  memcpy(&h[3], p3, 2);
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

inline float32x4_t ld_f32(const uint8_t *p) { return vreinterpretq_f32_u8(vld1q_u8(p)); }

// Sum of 4 int32x4 vectors, lane k = horizontal sum of v[k].
inline int32x4_t hsum4_s32(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

// Exact int8 x int8 dot product of 32 values, left in the 4 lanes (no
// int16 overflow even for -128 * -128: each product is widened pairwise).
inline int32x4_t dot32_s8(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
  int32x4_t s = vpaddlq_s16(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)));
  s = vpadalq_s16(s, vmull_high_s8(w0, x0));
  s = vpadalq_s16(s, vmull_s8(vget_low_s8(w1), vget_low_s8(x1)));
  s = vpadalq_s16(s, vmull_high_s8(w1, x1));
  return s;
}

// q4 block: 16 bytes of nibbles; low nibbles are weights 0..15, high 16..31,
// both minus 8 (range -8..7, so four products per int16 lane cannot
// overflow: 4 * 8 * 128 = 4096).
inline int32x4_t dot_q4(const uint8_t *qs, int8x16_t x0, int8x16_t x1) {
  const uint8x16_t q = vld1q_u8(qs);
  const int8x16_t eight = vdupq_n_s8(8);
  const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), eight);
  const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
  int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(x0));
  p = vmlal_high_s8(p, lo, x0);
  p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(x1));
  p = vmlal_high_s8(p, hi, x1);
  return vpaddlq_s16(p);
}

inline int32x4_t dot_q8(const uint8_t *qs, int8x16_t x0, int8x16_t x1) {
  return dot32_s8(vreinterpretq_s8_u8(vld1q_u8(qs)), vreinterpretq_s8_u8(vld1q_u8(qs + 16)), x0, x1);
}

// Block GEMV shared by q8 and q4 (kBlockBytes 34 or 18; Dot is dot_q8 or
// dot_q4 applied to the block's quants).
template <size_t kBlockBytes, int32x4_t (*Dot)(const uint8_t *, int8x16_t, int8x16_t)>
inline void gemv_blocks(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end,
                        size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * kBlockBytes;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = b0 + rb;
    const uint8_t *b2 = b1 + rb;
    const uint8_t *b3 = b2 + rb;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const int8x16_t x0 = vld1q_s8(xq[b].qs);
      const int8x16_t x1 = vld1q_s8(xq[b].qs + 16);
      const int32x4_t isum = hsum4_s32(Dot(b0 + 2, x0, x1), Dot(b1 + 2, x0, x1), Dot(b2 + 2, x0, x1),
                                       Dot(b3 + 2, x0, x1));
      const float32x4_t dd = vmulq_n_f32(f16_scales4(b0, b1, b2, b3), xq[b].d);
      acc = vaddq_f32(acc, vmulq_f32(dd, vcvtq_f32_s32(isum)));
      b0 += kBlockBytes;
      b1 += kBlockBytes;
      b2 += kBlockBytes;
      b3 += kBlockBytes;
    }
    vst1q_f32(y + r, acc);
  }
  for (; r < row_end; r++) {
    const uint8_t *blk = W + r * rb;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += kBlockBytes) {
      const int8x16_t x0 = vld1q_s8(xq[b].qs);
      const int8x16_t x1 = vld1q_s8(xq[b].qs + 16);
      const int32_t isum = vaddvq_s32(Dot(blk + 2, x0, x1));
      acc += f16_scale(blk) * xq[b].d * (float)isum;
    }
    y[r] = acc;
  }
}

}  // namespace

// ---- f32 / f16: one position (gemv) and several (gemvm) -------------------------
// One tile serves both: 4 rows x 8 columns per step, applied to P positions
// (P = 1 for the gemv). Per (row, position) one accumulator; per 8 columns
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
namespace {

constexpr size_t kMaxTileP = 4;

struct F32Weights {
  static constexpr size_t kBytes = 4;
  static inline void load8(const uint8_t *p, float32x4_t &lo, float32x4_t &hi) {
    lo = ld_f32(p);
    hi = ld_f32(p + 16);
  }
};

// FCVTL / FCVTL2 (ARMv8-A): exact for every binary16.
struct F16Weights {
  static constexpr size_t kBytes = 2;
  static inline void load8(const uint8_t *p, float32x4_t &lo, float32x4_t &hi) {
    const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(p));
    lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
    hi = vcvt_high_f32_f16(vreinterpretq_f16_u16(h));
  }
};

// Rows w[0..3] times positions x[0..P): out[p] lane k = row k . x_p.
// xt[p]: x_p's column tail (cols % 8 values) zero-padded to 8.
template <class F, size_t P>
inline void float_tile(float32x4_t *out, const uint8_t *const *w, const float *const *x, const float (*xt)[8],
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
inline void float_gemvm(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx, size_t m,
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
        if (nr == 4) {
          vst1q_f32(y, out[p]);
        } else {
          float t[4];
          vst1q_f32(t, out[p]);
          memcpy(y, t, nr * 4);
        }
      }
      p0 += np;
    }
  }
}

}  // namespace

extern "C" void gb_f32_gemv__neon(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  float_gemvm<F32Weights>(y, 0, W, x, 0, 1, row_begin, row_end, cols);
}

extern "C" void gb_f32_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  float_gemvm<F32Weights>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}

extern "C" void gb_f16_gemv__neon(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  float_gemvm<F16Weights>(y, 0, W, x, 0, 1, row_begin, row_end, cols);
}

extern "C" void gb_f16_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  float_gemvm<F16Weights>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}

// FCVTL is exact for every non-NaN binary16; NaNs are patched to generic's
// bit pattern (sign | 0x7f800000 | mant << 13: a signalling NaN stays
// signalling, where FCVTL would quieten it or give the default NaN).
namespace {

inline void f16x8_to_f32(float *out, uint16x8_t h) {
  const uint16x8_t is_nan = vcgtq_u16(vandq_u16(h, vdupq_n_u16(0x7fff)), vdupq_n_u16(0x7c00));
  const uint16x8_t sign = vandq_u16(h, vdupq_n_u16(0x8000));
  const uint16x8_t mant = vandq_u16(h, vdupq_n_u16(0x3ff));
  const uint32x4_t inf = vdupq_n_u32(0x7f800000u);
  const uint32x4_t nan_lo = vorrq_u32(vorrq_u32(vshll_n_u16(vget_low_u16(sign), 16), inf),
                                      vshll_n_u16(vget_low_u16(mant), 13));
  const uint32x4_t nan_hi = vorrq_u32(vorrq_u32(vshll_high_n_u16(sign, 16), inf), vshll_high_n_u16(mant, 13));
  const uint32x4_t lo = vreinterpretq_u32_f32(vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))));
  const uint32x4_t hi = vreinterpretq_u32_f32(vcvt_high_f32_f16(vreinterpretq_f16_u16(h)));
  const uint32x4_t m_lo = vmovl_u16(vget_low_u16(is_nan));  // 0 or 0xffff: widen, then fill
  const uint32x4_t m_hi = vmovl_high_u16(is_nan);
  const uint32x4_t sel_lo = vorrq_u32(m_lo, vshlq_n_u32(m_lo, 16));
  const uint32x4_t sel_hi = vorrq_u32(m_hi, vshlq_n_u32(m_hi, 16));
  vst1q_f32(out, vreinterpretq_f32_u32(vbslq_u32(sel_lo, nan_lo, lo)));
  vst1q_f32(out + 4, vreinterpretq_f32_u32(vbslq_u32(sel_hi, nan_hi, hi)));
}

}  // namespace

static void f16_row_to_f32(float *out, const uint8_t *row, size_t cols) {
  size_t c = 0;
  for (; c + 8 <= cols; c += 8) f16x8_to_f32(out + c, vreinterpretq_u16_u8(vld1q_u8(row + 2 * c)));
  if (c < cols) {
    const size_t rem = cols - c;
    uint16_t ht[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(ht, row + 2 * c, rem * 2);
    float ft[8];
    f16x8_to_f32(ft, vld1q_u16(ht));
    memcpy(out + c, ft, rem * 4);
  }
}

// ---- q8 / q4 -----------------------------------------------------------------

extern "C" void gb_q8_gemv__neon(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                 size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<34, dot_q8>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q4_gemv__neon(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                 size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<18, dot_q4>(y, W, xq, row_begin, row_end, cols);
}

// ---- q8x activation quantizer --------------------------------------------------
// Same definition as generic: amax over the block (NaN ignored: FMAXNM from
// a zero start), d = amax / 127, id = 1 / d (0 when d is 0), and
// qs = round-half-away(v * id) (FCVTAS = roundf then convert). Bit-identical
// to the generic quantizer for finite inputs.

extern "C" void gb_q8x_quantize__neon(gb_q8x_block *out, const float *x, size_t n) {
  const size_t nb = (n + 31) / 32;
  for (size_t b = 0; b < nb; b++) {
    float buf[32];
    const float *p = x + b * 32;
    if (b * 32 + 32 > n) {
      memset(buf, 0, sizeof buf);
      memcpy(buf, p, (n - b * 32) * 4);
      p = buf;
    }
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int i = 0; i < 8; i++) {
      v[i] = vld1q_f32(p + 4 * i);
      m = vmaxnmq_f32(m, vabsq_f32(v[i]));
    }
    const float amax = vmaxnmvq_f32(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = d;
    int16x8_t h[4];
    for (int i = 0; i < 4; i++) {
      const int32x4_t q0 = vcvtaq_s32_f32(vmulq_n_f32(v[2 * i], id));
      const int32x4_t q1 = vcvtaq_s32_f32(vmulq_n_f32(v[2 * i + 1], id));
      h[i] = vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1));
    }
    const int8x16_t q0 = vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1]));
    const int8x16_t q1 = vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3]));
    vst1q_s8(out[b].qs, q0);
    vst1q_s8(out[b].qs + 16, q1);
    out[b].sum = (int32_t)vaddlvq_s8(q0) + (int32_t)vaddlvq_s8(q1);
  }
}

// ---- q8 / q4 multi-position GEMV -----------------------------------------------
// Bit-identical per position to the q8 / q4 gemv above: four rows per step
// (a tail group computes copies of its last row, not stored: the block
// formats' results do not depend on grouping); each block's weights are
// loaded (q4: unpacked) once and dotted with the m positions' blocks; per
// (row, position) the exact int32 block sum and acc += (d * xd) * (float)isum,
// block after block, as above.
namespace {

struct Q8Block {
  static constexpr size_t kBytes = 34;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    a = vreinterpretq_s8_u8(vld1q_u8(blk + 2));
    b = vreinterpretq_s8_u8(vld1q_u8(blk + 18));
  }
  static inline int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) { return dot32_s8(a, b, x0, x1); }
};
struct Q4Block {
  static constexpr size_t kBytes = 18;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    const uint8x16_t q = vld1q_u8(blk + 2);
    const int8x16_t eight = vdupq_n_s8(8);
    a = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), eight);
    b = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
  }
  // |w| <= 8: four products per int16 lane cannot overflow (as dot_q4).
  static inline int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) {
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(x0));
    p = vmlal_high_s8(p, a, x0);
    p = vmlal_s8(p, vget_low_s8(b), vget_low_s8(x1));
    p = vmlal_high_s8(p, b, x1);
    return vpaddlq_s16(p);
  }
};

template <class F>
inline void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                         size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *bk[4];
    for (size_t k = 0; k < 4; k++) bk[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      int8x16_t wa[4], wb[4];
      for (int k = 0; k < 4; k++) F::load(bk[k] + b * F::kBytes, wa[k], wb[k]);
      const float32x4_t dw = f16_scales4(bk[0] + b * F::kBytes, bk[1] + b * F::kBytes, bk[2] + b * F::kBytes,
                                         bk[3] + b * F::kBytes);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block &xb = XQ[p * ldxq + b];
        const int8x16_t x0 = vld1q_s8(xb.qs), x1 = vld1q_s8(xb.qs + 16);
        const int32x4_t isum = hsum4_s32(F::dot(wa[0], wb[0], x0, x1), F::dot(wa[1], wb[1], x0, x1),
                                         F::dot(wa[2], wb[2], x0, x1), F::dot(wa[3], wb[3], x0, x1));
        const float32x4_t dd = vmulq_n_f32(dw, xb.d);
        acc[p] = vaddq_f32(acc[p], vmulq_f32(dd, vcvtq_f32_s32(isum)));
      }
    }
    for (size_t p = 0; p < m; p++) {
      if (nr == 4) {
        vst1q_f32(Y + p * ldy + r, acc[p]);
      } else {
        float t[4];
        vst1q_f32(t, acc[p]);
        memcpy(Y + p * ldy + r, t, nr * 4);
      }
    }
  }
}

}  // namespace

extern "C" void gb_q8_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                  const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  gemvm_blocks<Q8Block>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}

extern "C" void gb_q4_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                  const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  gemvm_blocks<Q4Block>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}

extern "C" void gb_f16_rows_to_f32__neon(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = 2 * cols;
  for (size_t r = row_begin; r < row_end; r++) f16_row_to_f32(out + (r - row_begin) * cols, W + r * rb, cols);
}
