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
