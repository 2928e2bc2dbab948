// ARMv8-A Advanced SIMD GEMV of GGUF's 32-weight block formats q4_1, q5_0,
// q5_1, iq4nl and mxfp4 (layouts in kernels.h), one position (gemv) and
// several (gemvm), the Cortex-A53 baseline (no SDOT); one driver for the
// five. mxfp4 is iq4nl with its own table (-12..12) and the scale
// 2^(e - 128) formed from the block's first byte as ggml forms it.
//
// A block is decoded in registers to its 32 codes as two int8 vectors
// (weights 0..15: the low nibbles, 16..31: the high ones): q4_1 0..15;
// q5_0 / q5_1 with the fifth bit of each weight (qh spread one byte per
// weight by TBL, tested by CMTST), q5_0 minus 16 (-16..15), q5_1 0..31;
// iq4nl the grid value of the nibble (TBL, -127..113). Products by SMULL /
// SMLAL into int16 lanes, widened pairwise (SADDLP / SADALP): four products
// per int16 lane for the 5-bit codes (4 * 32 * 128 = 16384), two for
// iq4nl's (2 * 127 * 128): exact int32 block sums. Four rows are reduced
// together (ADDP), lane k holding row k, and per lane, with fused
// multiply-adds, generic's expression
//   with a min (q4_1, q5_1): acc += xd * (d * isum + m * xq.sum)
//   without (q5_0, iq4nl):   acc += xd * (d * isum)
// block after block (the float part reassociated against
// gb_*_gemv__generic: the tests' tolerance).
//
// The gemv is the gemvm with one position: each block's weights are decoded
// once for the group's rows and dotted with every position through the same
// operations, so the gemvm is bit-identical per position to the gemv. A
// tail group of 1..3 rows computes copies of its last row (not stored).
// Blocks are unaligned: byte loads and memcpy only; nothing is read past the
// last row's bytes or past xq[cols / 32).
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "arm64/arm64_common.h"
#include "iquants.h"
#include "kernels.h"

namespace {

using namespace gb_arm64;

// The 16 nibble bytes at qs: low nibbles in a, high in b.
inline void nibbles(const uint8_t *qs, uint8x16_t &a, uint8x16_t &b) {
  const uint8x16_t q = vld1q_u8(qs);
  a = vandq_u8(q, vdupq_n_u8(15));
  b = vshrq_n_u8(q, 4);
}

// The u32 of fifth bits at p as 16 in byte j where bit j is set (weights
// 0..15 in a, 16..31 in b), else 0.
inline void fifth_bits(const uint8_t *p, uint8x16_t &a, uint8x16_t &b) {
  uint32_t qh;
  memcpy(&qh, p, 4);
  const uint8x16_t v = vreinterpretq_u8_u32(vdupq_n_u32(qh));
  static const uint8_t kSpread[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                      2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bit = vld1q_u8(kBit), sixteen = vdupq_n_u8(16);
  a = vandq_u8(vtstq_u8(vqtbl1q_u8(v, vld1q_u8(kSpread)), bit), sixteen);
  b = vandq_u8(vtstq_u8(vqtbl1q_u8(v, vld1q_u8(kSpread + 16)), bit), sixteen);
}

// Four products per int16 lane: |code| <= 32.
inline int32x4_t dot4(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) {
  int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(x0));
  p = vmlal_high_s8(p, a, x0);
  p = vmlal_s8(p, vget_low_s8(b), vget_low_s8(x1));
  p = vmlal_high_s8(p, b, x1);
  return vpaddlq_s16(p);
}

// Two products per int16 lane: |code| <= 127.
inline int32x4_t dot2(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) {
  const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(x0)), a, x0);
  const int16x8_t q = vmlal_high_s8(vmull_s8(vget_low_s8(b), vget_low_s8(x1)), b, x1);
  return vpadalq_s16(vpaddlq_s16(p), q);
}

// The formats: block bytes, offset of the f16 min (-1: none; d is at byte
// 0), the decoder and the dot product its codes allow.
struct Q4_1 {
  static constexpr size_t kBytes = GB_Q4_1_BLOCK_BYTES;
  static constexpr bool kE8m0 = false;
  static constexpr int kMinAt = 2;
  static void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    uint8x16_t lo, hi;
    nibbles(blk + 4, lo, hi);
    a = vreinterpretq_s8_u8(lo);
    b = vreinterpretq_s8_u8(hi);
  }
  static int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) { return dot4(a, b, x0, x1); }
};
struct Q5_0 {
  static constexpr size_t kBytes = GB_Q5_0_BLOCK_BYTES;
  static constexpr bool kE8m0 = false;
  static constexpr int kMinAt = -1;
  static void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    uint8x16_t lo, hi, fa, fb;
    nibbles(blk + 6, lo, hi);
    fifth_bits(blk + 2, fa, fb);
    const int8x16_t sixteen = vdupq_n_s8(16);
    a = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, fa)), sixteen);
    b = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(hi, fb)), sixteen);
  }
  static int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) { return dot4(a, b, x0, x1); }
};
struct Q5_1 {
  static constexpr size_t kBytes = GB_Q5_1_BLOCK_BYTES;
  static constexpr bool kE8m0 = false;
  static constexpr int kMinAt = 2;
  static void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    uint8x16_t lo, hi, fa, fb;
    nibbles(blk + 8, lo, hi);
    fifth_bits(blk + 4, fa, fb);
    a = vreinterpretq_s8_u8(vorrq_u8(lo, fa));
    b = vreinterpretq_s8_u8(vorrq_u8(hi, fb));
  }
  static int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) { return dot4(a, b, x0, x1); }
};
struct Iq4nl {
  static constexpr size_t kBytes = GB_IQ4NL_BLOCK_BYTES;
  static constexpr bool kE8m0 = false;
  static constexpr int kMinAt = -1;
  static void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    static const int8_t kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    const int8x16_t grid = vld1q_s8(kGrid);
    uint8x16_t lo, hi;
    nibbles(blk + 2, lo, hi);
    a = vqtbl1q_s8(grid, lo);
    b = vqtbl1q_s8(grid, hi);
  }
  static int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) { return dot2(a, b, x0, x1); }
};

struct Mxfp4 {
  static constexpr size_t kBytes = GB_MXFP4_BLOCK_BYTES;
  static constexpr bool kE8m0 = true;  // the scale 2^(e - 128) of the byte at 0 (arch/iquants.h)
  static constexpr int kMinAt = -1;
  static void load(const uint8_t *blk, int8x16_t &a, int8x16_t &b) {
    const int8x16_t grid = vld1q_s8(gb_iq::kMxfp4);
    uint8x16_t lo, hi;
    nibbles(blk + 1, lo, hi);
    a = vqtbl1q_s8(grid, lo);
    b = vqtbl1q_s8(grid, hi);
  }
  static int32x4_t dot(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) { return dot2(a, b, x0, x1); }
};

// Y[p*ldy + r] for positions p < m and rows [row_begin, row_end).
template <class F>
void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
           size_t row_end, size_t cols) {
  const size_t nb = cols / GB_QBLOCK;
  const size_t rb = nb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *row[4];
    for (size_t k = 0; k < 4; k++) row[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *blk[4];
      int8x16_t wa[4], wb[4];
      for (int k = 0; k < 4; k++) {
        blk[k] = row[k] + b * F::kBytes;
        F::load(blk[k], wa[k], wb[k]);
      }
      float32x4_t dw;
      if (F::kE8m0) {
        const float d[4] = {gb_iq::mxfp4_d(blk[0][0]), gb_iq::mxfp4_d(blk[1][0]), gb_iq::mxfp4_d(blk[2][0]),
                            gb_iq::mxfp4_d(blk[3][0])};
        dw = vld1q_f32(d);
      } else {
        dw = f16_scales4(blk[0], blk[1], blk[2], blk[3]);
      }
      float32x4_t mw = vdupq_n_f32(0.0f);
      if (F::kMinAt >= 0) mw = f16_scales4(blk[0] + F::kMinAt, blk[1] + F::kMinAt, blk[2] + F::kMinAt, blk[3] + F::kMinAt);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block &xb = XQ[p * ldxq + b];
        const int8x16_t x0 = vld1q_s8(xb.qs), x1 = vld1q_s8(xb.qs + 16);
        const int32x4_t isum = hsum4_s32(F::dot(wa[0], wb[0], x0, x1), F::dot(wa[1], wb[1], x0, x1),
                                         F::dot(wa[2], wb[2], x0, x1), F::dot(wa[3], wb[3], x0, x1));
        float32x4_t t = vmulq_f32(dw, vcvtq_f32_s32(isum));
        if (F::kMinAt >= 0) t = vfmaq_n_f32(t, mw, (float)xb.sum);
        acc[p] = vfmaq_n_f32(acc[p], t, xb.d);
      }
    }
    for (size_t p = 0; p < m; p++) {
      store_rows(Y + p * ldy + r, acc[p], nr);
    }
  }
}

}  // namespace

#define GB_BLK32_NEON(fmt, F)                                                                                      \
  extern "C" void gb_##fmt##_gemv__neon(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,        \
                                        size_t row_begin, size_t row_end, size_t cols) {                           \
    gemvm<F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                                        \
  }                                                                                                                \
  extern "C" void gb_##fmt##_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,           \
                                         const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,          \
                                         size_t row_end, size_t cols) {                                            \
    gemvm<F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                                                   \
  }

GB_BLK32_NEON(q4_1, Q4_1)
GB_BLK32_NEON(q5_0, Q5_0)
GB_BLK32_NEON(q5_1, Q5_1)
GB_BLK32_NEON(iq4nl, Iq4nl)
GB_BLK32_NEON(mxfp4, Mxfp4)
