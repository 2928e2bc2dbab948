// kquant_common.h — the K-quant (q4k, q5k, q6k) gemv / gemvm of the neon and
// dotprod folders: one super-block loop and the unpacking of each format,
// instantiated by each folder with its own dot products (the folder's
// kquant_dot.h: SMULL / SMLAL in neon, SDOT in dotprod).
//
// A super-block holds 256 weights of one row and meets 8 activation blocks
// (xq[8 sb .. 8 sb + 7]). Per row and super-block the weights are unpacked
// once into 16 int8 vectors c[0..15] (c[i] = weights 16i..16i+15 in ggml
// element order, src/convert/ggml_types.cpp) with their integer scales, then
// dotted with each position's 8 blocks: exact int32 sums per activation
// block (q4k / q5k: sub-block s of 32 == block s) or per 16-value sub-block
// (q6k: two per block), reduced with ADDP so lane s holds sub-block s, and
// multiplied by the scales in int32 (exact: |sc * isum| < 2^24). The float
// part runs on the super-block's 8 blocks as two 4-lane vectors, per lane
// the generic kernel's expression
//   q4k / q5k: acc += xd * (d * (float)(sc * isum) - dmin * (float)(mn * xsum))
//   q6k:       acc += xd * (d * (float)(sc_a * isum_a + sc_b * isum_b))
// with fused multiply-adds; a row's result is the horizontal sum of its two
// accumulators at the end (reassociated against the generic kernel's block
// order: the tests compare with a tolerance).
//
// The gemv and the gemvm are the same loop (the gemv: one position), so they
// are bit-identical per position. Rows go in groups of four, a super-block
// at a time: the activations' scales and sums of the super-block are read
// once per position for the group, then each row's super-block is unpacked
// once and dotted with every position. A row's arithmetic does not depend on
// the grouping.
//
// F (the format's file) provides kBytes (per super-block), Weights,
// unpack(blk, w) and acc(w, xb, xs, acc) from the pieces below; D (the dot
// products of the folder: neon::KquantDot, sdot::KquantDot) provides
// dot32(a, b, x0, x1) (32 weights as two vectors against a block's two
// halves) and dot16(a, x) (16 weights), the exact int32 sums spread over
// four lanes.
//
// ARMv8-A Advanced SIMD only (the dot products come from the folder); every
// function is static, as in arm64_common.h, so each folder's objects keep
// their own copies.
#ifndef GEARBX_ARCH_ARM64_KQUANT_COMMON_H
#define GEARBX_ARCH_ARM64_KQUANT_COMMON_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arm64/arm64_common.h"
#include "kernels.h"

namespace gb_arm64 {
namespace kquant {

// A super-block's 8 activation scales and sums, blocks 0..3 / 4..7.
struct XS {
  float32x4_t d[2];
  int32x4_t sum[2];
};

// xb: 8 consecutive activation blocks. {d, sum} are the first 8 bytes of a
// block: two blocks' pairs combined and unzipped (UZP1 / UZP2).
static inline XS load_xs(const gb_q8x_block *xb) {
  XS r;
  for (int h = 0; h < 2; h++) {
    const uint8_t *p = (const uint8_t *)(xb + 4 * h);
    const uint8x16_t a = vcombine_u8(vld1_u8(p), vld1_u8(p + sizeof(gb_q8x_block)));
    const uint8x16_t b = vcombine_u8(vld1_u8(p + 2 * sizeof(gb_q8x_block)), vld1_u8(p + 3 * sizeof(gb_q8x_block)));
    const uint32x4_t lo = vreinterpretq_u32_u8(a), hi = vreinterpretq_u32_u8(b);
    r.d[h] = vreinterpretq_f32_u32(vuzp1q_u32(lo, hi));
    r.sum[h] = vreinterpretq_s32_u32(vuzp2q_u32(lo, hi));
  }
  return r;
}

// Four int32x4 of 8 int8 / uint8 scales widened: lanes 0..3 and 4..7.
static inline void widen8_u8(uint8x8_t v, int32x4_t out[2]) {
  const int16x8_t w = vreinterpretq_s16_u16(vmovl_u8(v));
  out[0] = vmovl_s16(vget_low_s16(w));
  out[1] = vmovl_high_s16(w);
}

// ---- q4k / q5k ----
// Block: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, (q5k: 32 bytes
// of fifth bits,) 128 bytes of nibbles; sub-block pair k (64 weights) is
// the low then the high nibbles of bytes 32k..32k+31.
struct Q4KWeights {
  int8x16_t c[16];     // codes 0..15 (q4k) / 0..31 (q5k); sub-block s: c[2s], c[2s+1]
  int32x4_t sc[2], mn[2];  // 6-bit scales / mins, sub-blocks 0..3 and 4..7
  float d, dmin;
};

// The 12 scale bytes as 8 scales and 8 mins (ggml's get_scale_min_k4 for
// j = 0..7, four at a time in 32-bit words).
static inline void q4k_scales(const uint8_t *q, Q4KWeights &w) {
  uint32_t u[3];
  memcpy(u, q, 12);
  const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const uint32_t sc_lo = u[0] & m6, mn_lo = u[1] & m6;
  const uint32_t sc_hi = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
  const uint32_t mn_hi = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
  widen8_u8(vcreate_u8((uint64_t)sc_lo | ((uint64_t)sc_hi << 32)), w.sc);
  widen8_u8(vcreate_u8((uint64_t)mn_lo | ((uint64_t)mn_hi << 32)), w.mn);
}

// d and dmin (the two fp16 at blk) as f32 (one FCVTL).
static inline void d_dmin(const uint8_t *blk, Q4KWeights &w) {
  uint32_t h;
  memcpy(&h, blk, 4);
  const float32x4_t dd = vcvt_f32_f16(vreinterpret_f16_u32(vdup_n_u32(h)));
  w.d = vgetq_lane_f32(dd, 0);
  w.dmin = vgetq_lane_f32(dd, 1);
}

static inline void unpack_q4k(const uint8_t *blk, Q4KWeights &w) {
  d_dmin(blk, w);
  q4k_scales(blk + 4, w);
  const uint8_t *qs = blk + 16;
  const uint8x16_t m4 = vdupq_n_u8(15);
  for (int k = 0; k < 4; k++) {
    const uint8x16_t q0 = vld1q_u8(qs + 32 * k), q1 = vld1q_u8(qs + 32 * k + 16);
    w.c[4 * k + 0] = vreinterpretq_s8_u8(vandq_u8(q0, m4));
    w.c[4 * k + 1] = vreinterpretq_s8_u8(vandq_u8(q1, m4));
    w.c[4 * k + 2] = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
    w.c[4 * k + 3] = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
  }
}

// q5k: the fifth bit of weight l of sub-block pair k is bit 2k (first 32) or
// 2k + 1 (second 32) of qh[l].
static inline void unpack_q5k(const uint8_t *blk, Q4KWeights &w) {
  d_dmin(blk, w);
  q4k_scales(blk + 4, w);
  const uint8x16_t h0 = vld1q_u8(blk + 16), h1 = vld1q_u8(blk + 32);
  const uint8_t *qs = blk + 48;
  const uint8x16_t m4 = vdupq_n_u8(15), b16 = vdupq_n_u8(16);
  for (int k = 0; k < 4; k++) {
    const uint8x16_t q0 = vld1q_u8(qs + 32 * k), q1 = vld1q_u8(qs + 32 * k + 16);
    const uint8x16_t blo = vdupq_n_u8((uint8_t)(1u << (2 * k))), bhi = vdupq_n_u8((uint8_t)(2u << (2 * k)));
    w.c[4 * k + 0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q0, m4), vandq_u8(vtstq_u8(h0, blo), b16)));
    w.c[4 * k + 1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q1, m4), vandq_u8(vtstq_u8(h1, blo), b16)));
    w.c[4 * k + 2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q0, 4), vandq_u8(vtstq_u8(h0, bhi), b16)));
    w.c[4 * k + 3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q1, 4), vandq_u8(vtstq_u8(h1, bhi), b16)));
  }
}

// One position's 8 blocks against a q4k / q5k super-block.
template <class D>
static inline void acc_q4k(const Q4KWeights &w, const gb_q8x_block *xb, const XS &xs, float32x4_t acc[2]) {
  for (int h = 0; h < 2; h++) {
    int32x4_t p[4];
    for (int j = 0; j < 4; j++) {
      const int s = 4 * h + j;
      p[j] = D::dot32(w.c[2 * s], w.c[2 * s + 1], vld1q_s8(xb[s].qs), vld1q_s8(xb[s].qs + 16));
    }
    const int32x4_t is = vmulq_s32(hsum4_s32(p[0], p[1], p[2], p[3]), w.sc[h]);
    const int32x4_t ms = vmulq_s32(xs.sum[h], w.mn[h]);
    const float32x4_t t = vfmsq_n_f32(vmulq_n_f32(vcvtq_f32_s32(is), w.d), vcvtq_f32_s32(ms), w.dmin);
    acc[h] = vfmaq_f32(acc[h], xs.d[h], t);
  }
}

// ---- q6k ----
// Block: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one
// per 16 weights), f16 d; code - 32 in -32..31. Half n (128 weights) uses
// ql[64n..], qh[32n..]: weight 128n + 32k + l (k = 0..3, l = 0..31) has low
// bits (ql[l + 32*(k & 1)] >> 4*(k >> 1)) & 15 and high bits (qh[l] >> 2k) & 3.
struct Q6KWeights {
  int8x16_t c[16];     // codes - 32
  int32x4_t sc[4];     // scales of 16-value sub-blocks 4i..4i+3
  float d;
};

static inline void unpack_q6k(const uint8_t *blk, Q6KWeights &w) {
  w.d = f16_scale(blk + 208);
  const int8x16_t s8 = vld1q_s8((const int8_t *)(blk + 192));
  const int16x8_t s16a = vmovl_s8(vget_low_s8(s8)), s16b = vmovl_high_s8(s8);
  w.sc[0] = vmovl_s16(vget_low_s16(s16a));
  w.sc[1] = vmovl_high_s16(s16a);
  w.sc[2] = vmovl_s16(vget_low_s16(s16b));
  w.sc[3] = vmovl_high_s16(s16b);
  const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30);
  const int8x16_t k32 = vdupq_n_s8(32);
  for (int n = 0; n < 2; n++) {
    const uint8_t *ql = blk + 64 * n, *qh = blk + 128 + 32 * n;
    const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
    const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
    uint8x16_t u[8];
    u[0] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h0, 4), m30));
    u[1] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(h1, 4), m30));
    u[2] = vorrq_u8(vandq_u8(l2, m4), vandq_u8(vshlq_n_u8(h0, 2), m30));
    u[3] = vorrq_u8(vandq_u8(l3, m4), vandq_u8(vshlq_n_u8(h1, 2), m30));
    u[4] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h0, m30));
    u[5] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(h1, m30));
    u[6] = vorrq_u8(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(h0, 2), m30));
    u[7] = vorrq_u8(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(h1, 2), m30));
    for (int i = 0; i < 8; i++) w.c[8 * n + i] = vsubq_s8(vreinterpretq_s8_u8(u[i]), k32);
  }
}

// One position's 8 blocks against a q6k super-block: block s = sub-blocks
// 2s and 2s + 1, each scaled, then paired (ADDP).
template <class D>
static inline void acc_q6k(const Q6KWeights &w, const gb_q8x_block *xb, const XS &xs, float32x4_t acc[2]) {
  int32x4_t v[4];
  for (int i = 0; i < 4; i++) {
    int32x4_t p[4];
    for (int j = 0; j < 2; j++) {
      const gb_q8x_block &b = xb[2 * i + j];
      p[2 * j] = D::dot16(w.c[4 * i + 2 * j], vld1q_s8(b.qs));
      p[2 * j + 1] = D::dot16(w.c[4 * i + 2 * j + 1], vld1q_s8(b.qs + 16));
    }
    v[i] = vmulq_s32(hsum4_s32(p[0], p[1], p[2], p[3]), w.sc[i]);
  }
  for (int h = 0; h < 2; h++) {
    const int32x4_t is = vpaddq_s32(v[2 * h], v[2 * h + 1]);
    acc[h] = vfmaq_f32(acc[h], xs.d[h], vmulq_n_f32(vcvtq_f32_s32(is), w.d));
  }
}

// Y[p*ldy + r] for positions p < m (m <= kMaxM) and rows [row_begin, row_end).
template <class F, size_t kMaxM>
static inline void gemvm_superblocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq,
                                     size_t m, size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  const size_t rb = nsb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    float32x4_t acc[4][kMaxM][2];
    for (size_t k = 0; k < nr; k++)
      for (size_t p = 0; p < m; p++) acc[k][p][0] = acc[k][p][1] = vdupq_n_f32(0.0f);
    for (size_t sb = 0; sb < nsb; sb++) {
      XS xs[kMaxM];
      for (size_t p = 0; p < m; p++) xs[p] = load_xs(XQ + p * ldxq + 8 * sb);
      for (size_t k = 0; k < nr; k++) {
        typename F::Weights w;
        F::unpack(W + (r + k) * rb + sb * F::kBytes, w);
        for (size_t p = 0; p < m; p++) F::acc(w, XQ + p * ldxq + 8 * sb, xs[p], acc[k][p]);
      }
    }
    for (size_t k = 0; k < nr; k++)
      for (size_t p = 0; p < m; p++) Y[p * ldy + r + k] = vaddvq_f32(vaddq_f32(acc[k][p][0], acc[k][p][1]));
  }
}

}  // namespace kquant
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_KQUANT_COMMON_H
