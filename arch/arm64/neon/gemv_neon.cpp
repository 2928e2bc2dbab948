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
// formats (f32, f16) use several fused accumulators per row (a different
// order of summation than generic, within the tests' tolerance).
//
// Weight rows are not assumed aligned: every weight load is a byte load
// (vld1q_u8) reinterpreted, and scalar data goes through memcpy. Nothing is
// read past the last row's bytes, past x[cols) or past xq[ceil(cols/32)).
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

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

// f16: 8 weights widened to two f32 vectors, fused into lo / hi accumulators.
inline void f16x8_fma(float32x4_t &lo, float32x4_t &hi, uint16x8_t h, float32x4_t x0, float32x4_t x1) {
  lo = vfmaq_f32(lo, vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))), x0);
  hi = vfmaq_f32(hi, vcvt_high_f32_f16(vreinterpretq_f16_u16(h)), x1);
}

}  // namespace

// ---- f32 ---------------------------------------------------------------------

extern "C" void gb_f32_gemv__neon(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = cols * 4;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *w[4] = {W + r * rb, W + (r + 1) * rb, W + (r + 2) * rb, W + (r + 3) * rb};
    float32x4_t a[4], b[4];
    for (int k = 0; k < 4; k++) a[k] = b[k] = vdupq_n_f32(0.0f);
    size_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      const float32x4_t x0 = vld1q_f32(x + c), x1 = vld1q_f32(x + c + 4);
      for (int k = 0; k < 4; k++) {
        a[k] = vfmaq_f32(a[k], ld_f32(w[k] + 4 * c), x0);
        b[k] = vfmaq_f32(b[k], ld_f32(w[k] + 4 * c + 16), x1);
      }
    }
    if (c + 4 <= cols) {
      const float32x4_t x0 = vld1q_f32(x + c);
      for (int k = 0; k < 4; k++) a[k] = vfmaq_f32(a[k], ld_f32(w[k] + 4 * c), x0);
      c += 4;
    }
    float32x4_t s = vpaddq_f32(vpaddq_f32(vaddq_f32(a[0], b[0]), vaddq_f32(a[1], b[1])),
                               vpaddq_f32(vaddq_f32(a[2], b[2]), vaddq_f32(a[3], b[3])));
    if (c < cols) {
      float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (; c < cols; c++) {
        for (int k = 0; k < 4; k++) {
          float wv;
          memcpy(&wv, w[k] + 4 * c, 4);
          t[k] += wv * x[c];
        }
      }
      s = vaddq_f32(s, vld1q_f32(t));
    }
    vst1q_f32(y + r, s);
  }
  for (; r < row_end; r++) {
    const uint8_t *w = W + r * rb;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    size_t c = 0;
    for (; c + 16 <= cols; c += 16) {
      a0 = vfmaq_f32(a0, ld_f32(w + 4 * c), vld1q_f32(x + c));
      a1 = vfmaq_f32(a1, ld_f32(w + 4 * c + 16), vld1q_f32(x + c + 4));
      a2 = vfmaq_f32(a2, ld_f32(w + 4 * c + 32), vld1q_f32(x + c + 8));
      a3 = vfmaq_f32(a3, ld_f32(w + 4 * c + 48), vld1q_f32(x + c + 12));
    }
    for (; c + 4 <= cols; c += 4) a0 = vfmaq_f32(a0, ld_f32(w + 4 * c), vld1q_f32(x + c));
    float acc = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; c < cols; c++) {
      float wv;
      memcpy(&wv, w + 4 * c, 4);
      acc += wv * x[c];
    }
    y[r] = acc;
  }
}

// ---- f16 ---------------------------------------------------------------------

extern "C" void gb_f16_gemv__neon(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = cols * 2;
  const size_t cmain = cols & ~(size_t)7;
  const size_t rem = cols - cmain;
  // The tail (< 8 columns) goes through zero-padded copies.
  float xt[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  memcpy(xt, x + cmain, rem * 4);
  const float32x4_t xt0 = vld1q_f32(xt), xt1 = vld1q_f32(xt + 4);
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *w[4] = {W + r * rb, W + (r + 1) * rb, W + (r + 2) * rb, W + (r + 3) * rb};
    float32x4_t a[4], b[4];
    for (int k = 0; k < 4; k++) a[k] = b[k] = vdupq_n_f32(0.0f);
    for (size_t c = 0; c < cmain; c += 8) {
      const float32x4_t x0 = vld1q_f32(x + c), x1 = vld1q_f32(x + c + 4);
      for (int k = 0; k < 4; k++) f16x8_fma(a[k], b[k], vreinterpretq_u16_u8(vld1q_u8(w[k] + 2 * c)), x0, x1);
    }
    if (rem) {
      for (int k = 0; k < 4; k++) {
        uint16_t ht[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        memcpy(ht, w[k] + 2 * cmain, rem * 2);
        f16x8_fma(a[k], b[k], vld1q_u16(ht), xt0, xt1);
      }
    }
    vst1q_f32(y + r, vpaddq_f32(vpaddq_f32(vaddq_f32(a[0], b[0]), vaddq_f32(a[1], b[1])),
                                vpaddq_f32(vaddq_f32(a[2], b[2]), vaddq_f32(a[3], b[3]))));
  }
  for (; r < row_end; r++) {
    const uint8_t *w = W + r * rb;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    size_t c = 0;
    for (; c + 16 <= cmain; c += 16) {
      f16x8_fma(a0, a1, vreinterpretq_u16_u8(vld1q_u8(w + 2 * c)), vld1q_f32(x + c), vld1q_f32(x + c + 4));
      f16x8_fma(a2, a3, vreinterpretq_u16_u8(vld1q_u8(w + 2 * c + 16)), vld1q_f32(x + c + 8),
                vld1q_f32(x + c + 12));
    }
    for (; c < cmain; c += 8)
      f16x8_fma(a0, a1, vreinterpretq_u16_u8(vld1q_u8(w + 2 * c)), vld1q_f32(x + c), vld1q_f32(x + c + 4));
    if (rem) {
      uint16_t ht[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      memcpy(ht, w + 2 * cmain, rem * 2);
      f16x8_fma(a2, a3, vld1q_u16(ht), xt0, xt1);
    }
    y[r] = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
  }
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

extern "C" void gb_f16_row_to_f32__neon(float *out, const uint8_t *row, size_t cols) {
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
    vst1q_s8(out[b].qs, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
    vst1q_s8(out[b].qs + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
  }
}

// ---- multi-position GEMV ---------------------------------------------------------
// Y[i*ldy + r] for m positions, bit-identical per position to the kernels
// above: the same row grouping (groups of four from row_begin, then single
// rows for f32 / f16, whose single-row order differs from the group order)
// and per (row, position) the same operations in the same order. Each weight
// vector is loaded (and widened) once per tile and applied to the tile's
// positions; a tile's rows are re-read from cache once per chunk of
// positions (f32 / f16: 2 positions for a group of four, 3 for a single row;
// q8 / q4: all m positions per block, from memory once).

namespace {

inline void f16x8_widen(float32x4_t &lo, float32x4_t &hi, uint16x8_t h) {
  lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
  hi = vcvt_high_f32_f16(vreinterpretq_f16_u16(h));
}

// f32, rows r..r+3 (a group of gb_f32_gemv__neon), positions x[0..P).
template <int P>
inline void f32m_group(float *Y, size_t ldy, const uint8_t *W, const float *const *x, size_t r, size_t cols) {
  const size_t rb = cols * 4;
  const uint8_t *w[4] = {W + r * rb, W + (r + 1) * rb, W + (r + 2) * rb, W + (r + 3) * rb};
  float32x4_t a[4][P], b[4][P];
  for (int k = 0; k < 4; k++)
    for (int p = 0; p < P; p++) a[k][p] = b[k][p] = vdupq_n_f32(0.0f);
  size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    float32x4_t x0[P], x1[P];
    for (int p = 0; p < P; p++) x0[p] = vld1q_f32(x[p] + c), x1[p] = vld1q_f32(x[p] + c + 4);
    for (int k = 0; k < 4; k++) {
      const float32x4_t w0 = ld_f32(w[k] + 4 * c), w1 = ld_f32(w[k] + 4 * c + 16);
      for (int p = 0; p < P; p++) {
        a[k][p] = vfmaq_f32(a[k][p], w0, x0[p]);
        b[k][p] = vfmaq_f32(b[k][p], w1, x1[p]);
      }
    }
  }
  if (c + 4 <= cols) {
    for (int k = 0; k < 4; k++) {
      const float32x4_t w0 = ld_f32(w[k] + 4 * c);
      for (int p = 0; p < P; p++) a[k][p] = vfmaq_f32(a[k][p], w0, vld1q_f32(x[p] + c));
    }
    c += 4;
  }
  for (int p = 0; p < P; p++) {
    float32x4_t s = vpaddq_f32(vpaddq_f32(vaddq_f32(a[0][p], b[0][p]), vaddq_f32(a[1][p], b[1][p])),
                               vpaddq_f32(vaddq_f32(a[2][p], b[2][p]), vaddq_f32(a[3][p], b[3][p])));
    if (c < cols) {
      float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (size_t cc = c; cc < cols; cc++) {
        for (int k = 0; k < 4; k++) {
          float wv;
          memcpy(&wv, w[k] + 4 * cc, 4);
          t[k] += wv * x[p][cc];
        }
      }
      s = vaddq_f32(s, vld1q_f32(t));
    }
    vst1q_f32(Y + p * ldy + r, s);
  }
}

// f32, single row r (the row loop after the groups), positions x[0..P).
template <int P>
inline void f32m_row(float *Y, size_t ldy, const uint8_t *W, const float *const *x, size_t r, size_t cols) {
  const uint8_t *w = W + r * cols * 4;
  float32x4_t a0[P], a1[P], a2[P], a3[P];
  for (int p = 0; p < P; p++) a0[p] = a1[p] = a2[p] = a3[p] = vdupq_n_f32(0.0f);
  size_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const float32x4_t w0 = ld_f32(w + 4 * c), w1 = ld_f32(w + 4 * c + 16);
    const float32x4_t w2 = ld_f32(w + 4 * c + 32), w3 = ld_f32(w + 4 * c + 48);
    for (int p = 0; p < P; p++) {
      a0[p] = vfmaq_f32(a0[p], w0, vld1q_f32(x[p] + c));
      a1[p] = vfmaq_f32(a1[p], w1, vld1q_f32(x[p] + c + 4));
      a2[p] = vfmaq_f32(a2[p], w2, vld1q_f32(x[p] + c + 8));
      a3[p] = vfmaq_f32(a3[p], w3, vld1q_f32(x[p] + c + 12));
    }
  }
  for (; c + 4 <= cols; c += 4) {
    const float32x4_t w0 = ld_f32(w + 4 * c);
    for (int p = 0; p < P; p++) a0[p] = vfmaq_f32(a0[p], w0, vld1q_f32(x[p] + c));
  }
  for (int p = 0; p < P; p++) {
    float acc = vaddvq_f32(vaddq_f32(vaddq_f32(a0[p], a1[p]), vaddq_f32(a2[p], a3[p])));
    for (size_t cc = c; cc < cols; cc++) {
      float wv;
      memcpy(&wv, w + 4 * cc, 4);
      acc += wv * x[p][cc];
    }
    Y[p * ldy + r] = acc;
  }
}

// f16, rows r..r+3 (a group of gb_f16_gemv__neon), positions x[0..P); xt[p]:
// position p's column tail zero-padded to 8.
template <int P>
inline void f16m_group(float *Y, size_t ldy, const uint8_t *W, const float *const *x, const float (*xt)[8], size_t r,
                       size_t cols) {
  const size_t rb = cols * 2;
  const size_t cmain = cols & ~(size_t)7;
  const size_t rem = cols - cmain;
  const uint8_t *w[4] = {W + r * rb, W + (r + 1) * rb, W + (r + 2) * rb, W + (r + 3) * rb};
  float32x4_t a[4][P], b[4][P];
  for (int k = 0; k < 4; k++)
    for (int p = 0; p < P; p++) a[k][p] = b[k][p] = vdupq_n_f32(0.0f);
  for (size_t c = 0; c < cmain; c += 8) {
    float32x4_t x0[P], x1[P];
    for (int p = 0; p < P; p++) x0[p] = vld1q_f32(x[p] + c), x1[p] = vld1q_f32(x[p] + c + 4);
    for (int k = 0; k < 4; k++) {
      float32x4_t lo, hi;
      f16x8_widen(lo, hi, vreinterpretq_u16_u8(vld1q_u8(w[k] + 2 * c)));
      for (int p = 0; p < P; p++) {
        a[k][p] = vfmaq_f32(a[k][p], lo, x0[p]);
        b[k][p] = vfmaq_f32(b[k][p], hi, x1[p]);
      }
    }
  }
  if (rem) {
    for (int k = 0; k < 4; k++) {
      uint16_t ht[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      memcpy(ht, w[k] + 2 * cmain, rem * 2);
      float32x4_t lo, hi;
      f16x8_widen(lo, hi, vld1q_u16(ht));
      for (int p = 0; p < P; p++) {
        a[k][p] = vfmaq_f32(a[k][p], lo, vld1q_f32(xt[p]));
        b[k][p] = vfmaq_f32(b[k][p], hi, vld1q_f32(xt[p] + 4));
      }
    }
  }
  for (int p = 0; p < P; p++)
    vst1q_f32(Y + p * ldy + r, vpaddq_f32(vpaddq_f32(vaddq_f32(a[0][p], b[0][p]), vaddq_f32(a[1][p], b[1][p])),
                                          vpaddq_f32(vaddq_f32(a[2][p], b[2][p]), vaddq_f32(a[3][p], b[3][p]))));
}

// f16, single row r, positions x[0..P).
template <int P>
inline void f16m_row(float *Y, size_t ldy, const uint8_t *W, const float *const *x, const float (*xt)[8], size_t r,
                     size_t cols) {
  const uint8_t *w = W + r * cols * 2;
  const size_t cmain = cols & ~(size_t)7;
  const size_t rem = cols - cmain;
  float32x4_t a0[P], a1[P], a2[P], a3[P];
  for (int p = 0; p < P; p++) a0[p] = a1[p] = a2[p] = a3[p] = vdupq_n_f32(0.0f);
  size_t c = 0;
  for (; c + 16 <= cmain; c += 16) {
    float32x4_t l0, h0, l1, h1;
    f16x8_widen(l0, h0, vreinterpretq_u16_u8(vld1q_u8(w + 2 * c)));
    f16x8_widen(l1, h1, vreinterpretq_u16_u8(vld1q_u8(w + 2 * c + 16)));
    for (int p = 0; p < P; p++) {
      a0[p] = vfmaq_f32(a0[p], l0, vld1q_f32(x[p] + c));
      a1[p] = vfmaq_f32(a1[p], h0, vld1q_f32(x[p] + c + 4));
      a2[p] = vfmaq_f32(a2[p], l1, vld1q_f32(x[p] + c + 8));
      a3[p] = vfmaq_f32(a3[p], h1, vld1q_f32(x[p] + c + 12));
    }
  }
  for (; c < cmain; c += 8) {
    float32x4_t lo, hi;
    f16x8_widen(lo, hi, vreinterpretq_u16_u8(vld1q_u8(w + 2 * c)));
    for (int p = 0; p < P; p++) {
      a0[p] = vfmaq_f32(a0[p], lo, vld1q_f32(x[p] + c));
      a1[p] = vfmaq_f32(a1[p], hi, vld1q_f32(x[p] + c + 4));
    }
  }
  if (rem) {
    uint16_t ht[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(ht, w + 2 * cmain, rem * 2);
    float32x4_t lo, hi;
    f16x8_widen(lo, hi, vld1q_u16(ht));
    for (int p = 0; p < P; p++) {
      a2[p] = vfmaq_f32(a2[p], lo, vld1q_f32(xt[p]));
      a3[p] = vfmaq_f32(a3[p], hi, vld1q_f32(xt[p] + 4));
    }
  }
  for (int p = 0; p < P; p++) Y[p * ldy + r] = vaddvq_f32(vaddq_f32(vaddq_f32(a0[p], a1[p]), vaddq_f32(a2[p], a3[p])));
}

// Positions [0, m) in chunks of kP (a last chunk of 1..kP-1): fn<P>(y, x, xt).
template <int kP, class Fn>
inline void position_chunks(float *Y, size_t ldy, const float *X, size_t ldx, size_t m, size_t cols, Fn fn) {
  const size_t cmain = cols & ~(size_t)7;
  for (size_t p0 = 0; p0 < m; p0 += kP) {
    const size_t np = m - p0 < (size_t)kP ? m - p0 : (size_t)kP;
    const float *x[kP];
    float xt[kP][8];
    for (size_t p = 0; p < kP; p++) {
      x[p] = X + (p0 + (p < np ? p : 0)) * ldx;
      memset(xt[p], 0, sizeof xt[p]);
      memcpy(xt[p], x[p] + cmain, (cols - cmain) * 4);
    }
    float *y = Y + p0 * ldy;
    if (np == 3) fn(std::integral_constant<int, 3>(), y, x, xt);
    else if (np == 2) fn(std::integral_constant<int, 2>(), y, x, xt);
    else fn(std::integral_constant<int, 1>(), y, x, xt);
  }
}

}  // namespace

extern "C" void gb_f32_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4)
    position_chunks<2>(Y, ldy, X, ldx, m, cols, [&](auto P, float *y, const float *const *x, const float(*)[8]) {
      f32m_group<decltype(P)::value>(y, ldy, W, x, r, cols);
    });
  for (; r < row_end; r++)
    position_chunks<3>(Y, ldy, X, ldx, m, cols, [&](auto P, float *y, const float *const *x, const float(*)[8]) {
      f32m_row<decltype(P)::value>(y, ldy, W, x, r, cols);
    });
}

extern "C" void gb_f16_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4)
    position_chunks<2>(Y, ldy, X, ldx, m, cols, [&](auto P, float *y, const float *const *x, const float(*xt)[8]) {
      f16m_group<decltype(P)::value>(y, ldy, W, x, xt, r, cols);
    });
  for (; r < row_end; r++)
    position_chunks<3>(Y, ldy, X, ldx, m, cols, [&](auto P, float *y, const float *const *x, const float(*xt)[8]) {
      f16m_row<decltype(P)::value>(y, ldy, W, x, xt, r, cols);
    });
}

// q8 / q4: four rows per step (a tail group computes copies of its last
// row, not stored: the block formats' results do not depend on grouping);
// each block's weights are loaded (q4: unpacked) once and dotted with the m
// positions' blocks; per (row, position) the exact int32 block sum and
// acc += (d * xd) * (float)isum, block after block, as above.
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
