// ARMv8.2-A SDOT kernels: q8 and q4 GEMV against q8x activations.
//
// Per 32-block and row, two SDOTs give the exact int32 sum in four lanes;
// four rows are reduced together (ADDP) so lane k holds row k's sum, and
// the float work is generic's acc += (d * xd) * (float)isum, block after
// block with separate multiplies and adds: the results equal the generic
// kernels' bit for bit.
//
// Weight blocks are unaligned (18 / 34 bytes): byte loads and memcpy only;
// nothing is read past the last row's bytes or past xq[ceil(cols/32)).
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

namespace {

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

inline int32x4_t hsum4_s32(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

inline int32x4_t dot_q8(const uint8_t *qs, int8x16_t x0, int8x16_t x1, int32x4_t init) {
  const int8x16_t w0 = vreinterpretq_s8_u8(vld1q_u8(qs));
  const int8x16_t w1 = vreinterpretq_s8_u8(vld1q_u8(qs + 16));
  return vdotq_s32(vdotq_s32(init, w0, x0), w1, x1);
}

// Low nibbles: weights 0..15, high nibbles: 16..31, as codes u in 0..15
// (int8 as they are); `init` holds -8 x the activations' sums in the same
// four lanes, so the lanes add up to sum((u - 8) * x), exactly.
inline int32x4_t dot_q4(const uint8_t *qs, int8x16_t x0, int8x16_t x1, int32x4_t init) {
  const uint8x16_t q = vld1q_u8(qs);
  const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15)));
  const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
  return vdotq_s32(vdotq_s32(init, lo, x0), hi, x1);
}

// The accumulator's start for a block: 0 (q8) or -8 x sum(x) per lane (q4).
template <bool kQ4>
inline int32x4_t dot_init(int8x16_t x0, int8x16_t x1) {
  if (!kQ4) return vdupq_n_s32(0);
  const int8x16_t m8 = vdupq_n_s8(-8);
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), m8, x0), m8, x1);
}

template <size_t kBlockBytes, bool kQ4, int32x4_t (*Dot)(const uint8_t *, int8x16_t, int8x16_t, int32x4_t)>
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
      const int32x4_t i0 = dot_init<kQ4>(x0, x1);
      const int32x4_t isum = hsum4_s32(Dot(b0 + 2, x0, x1, i0), Dot(b1 + 2, x0, x1, i0), Dot(b2 + 2, x0, x1, i0),
                                       Dot(b3 + 2, x0, x1, i0));
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
      const int32_t isum = vaddvq_s32(Dot(blk + 2, x0, x1, dot_init<kQ4>(x0, x1)));
      acc += f16_scale(blk) * xq[b].d * (float)isum;
    }
    y[r] = acc;
  }
}

}  // namespace

extern "C" void gb_q8_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<34, false, dot_q8>(y, W, xq, row_begin, row_end, cols);
}

extern "C" void gb_q4_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  gemv_blocks<18, true, dot_q4>(y, W, xq, row_begin, row_end, cols);
}

// ---- multi-position GEMV ---------------------------------------------------------
// Four rows per step (a tail group computes copies of its last row, not
// stored: results do not depend on the grouping); each block's weights are
// loaded (q4: unpacked) once and dotted with the m positions' blocks (two
// SDOTs per row and position); per (row, position) the exact int32 block
// sum and acc += (d * xd) * (float)isum, block after block, as above:
// bit-identical to gb_q8_gemv__dotprod / gb_q4_gemv__dotprod per position.
namespace {

struct Q8Block {
  static constexpr size_t kBytes = 34;
  static constexpr bool kQ4 = false;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    a = vreinterpretq_s8_u8(vld1q_u8(blk + 2));
    b = vreinterpretq_s8_u8(vld1q_u8(blk + 18));
  }
};
struct Q4Block {
  static constexpr size_t kBytes = 18;
  static constexpr bool kQ4 = true;
  static inline void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {  // codes 0..15 (see dot_q4)
    const uint8x16_t q = vld1q_u8(blk + 2);
    a = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15)));
    b = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
  }
};

inline int32x4_t dot2(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1, int32x4_t init) {
  return vdotq_s32(vdotq_s32(init, a, x0), b, x1);
}

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
        const int32x4_t i0 = dot_init<F::kQ4>(x0, x1);
        const int32x4_t isum = hsum4_s32(dot2(wa[0], wb[0], x0, x1, i0), dot2(wa[1], wb[1], x0, x1, i0),
                                         dot2(wa[2], wb[2], x0, x1, i0), dot2(wa[3], wb[3], x0, x1, i0));
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

extern "C" void gb_q8_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gemvm_blocks<Q8Block>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}

extern "C" void gb_q4_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gemvm_blocks<Q4Block>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
