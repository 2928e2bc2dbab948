// ARMv8.2-A SDOT q4kr16 x q8x GEMV: the 16-row q4k layout (kernels.h,
// krows16.h), one 32-bit lane per row.
//
// A group super-block (16 rows x 256 columns, 2304 bytes) is the rows' q4k
// blocks in 4-byte slices of 64 bytes, one 16-byte vector per four rows (row
// 4v+i in bytes 4i..4i+3 of vector v): slice 0 = {d, dmin}, slices 1..3 =
// the 12 scale bytes, slices 4 + 8p + k = code bytes 32p + 4k..32p + 4k + 3,
// whose low nibbles are weights 4k.. of sub-block 2p and high nibbles those
// of sub-block 2p + 1. SDOT by element (lane k % 4 of the activation's bytes
// 0..15 or 16..31) adds each row's four products to that row's own lane:
// eight slices leave the exact int32 sums of a sub-block for four rows in
// one vector, with no horizontal adds (as the q4r16 kernel does). The 6-bit
// scales and mins are decoded per lane with shifts and masks. Per sub-block
// s, as gb_q4k_gemv__generic: xd_s * (d * sc_s * isum_s - dmin * mn_s *
// xsum_s), accumulated per super-block as d * sum_s (xd_s sc_s) isum_s -
// dmin * sum_s mn_s (xd_s xsum_s): the float part is reassociated, within
// the tolerance of tests/isa/test_kernels.cpp; the integer sums are exact.
#include <arm_neon.h>
#include <stdint.h>

#include "kernels.h"

namespace {

constexpr size_t kGsb = 16 * GB_Q4K_BLOCK_BYTES;  // bytes of one group super-block (2304)
constexpr size_t kPrefetch = 2048;                // bytes ahead of the group stream

struct XPair {
  int8x16_t a_lo, a_hi, b_lo, b_hi;  // sub-blocks 2p and 2p + 1: bytes 0..15, 16..31
  float da, db, dsa, dsb;            // their scales, and scale * sum
};

inline XPair load_pair(const gb_q8x_block &a, const gb_q8x_block &b) {
  return {vld1q_s8(a.qs), vld1q_s8(a.qs + 16), vld1q_s8(b.qs), vld1q_s8(b.qs + 16),
          a.d,           b.d,                 a.d * (float)a.sum, b.d * (float)b.sum};
}

template <int K>
inline void slice_dot(int32x4_t *lo, int32x4_t *hi, const uint8_t *q, const XPair &x) {
  const uint8x16_t c = vld1q_u8(q + 64 * K);
  const int8x16_t l = vreinterpretq_s8_u8(vandq_u8(c, vdupq_n_u8(15))), h = vreinterpretq_s8_u8(vshrq_n_u8(c, 4));
  *lo = vdotq_laneq_s32(*lo, l, K < 4 ? x.a_lo : x.a_hi, K % 4);
  *hi = vdotq_laneq_s32(*hi, h, K < 4 ? x.b_lo : x.b_hi, K % 4);
}

// Scale (S = 0) or min (S = 1) of sub-block s of four rows (kernels.h).
template <int S>
inline float32x4_t scale_min(int s, uint32x4_t q1, uint32x4_t q2, uint32x4_t q3) {
  const uint32x4_t own = S == 0 ? q1 : q2;
  uint32x4_t v;
  if (s < 4) {
    v = vandq_u32(vshlq_u32(own, vdupq_n_s32(-8 * s)), vdupq_n_u32(63));
  } else {
    const int j = s - 4;
    const uint32x4_t low = vandq_u32(vshlq_u32(q3, vdupq_n_s32(-(8 * j + 4 * S))), vdupq_n_u32(15));
    const uint32x4_t top = vandq_u32(vshlq_u32(own, vdupq_n_s32(-(8 * j + 2))), vdupq_n_u32(0x30));
    v = vorrq_u32(low, top);
  }
  return vcvtq_f32_u32(v);
}

// Rows 4v..4v+3 of one group super-block g: acc += their sums.
inline float32x4_t quad_sb(float32x4_t acc, const uint8_t *g, const XPair x[4]) {
  const uint32x4_t q0 = vld1q_u32(reinterpret_cast<const uint32_t *>(g));
  const uint32x4_t q1 = vld1q_u32(reinterpret_cast<const uint32_t *>(g + 64));
  const uint32x4_t q2 = vld1q_u32(reinterpret_cast<const uint32_t *>(g + 128));
  const uint32x4_t q3 = vld1q_u32(reinterpret_cast<const uint32_t *>(g + 192));
  float32x4_t sacc = vdupq_n_f32(0.0f), macc = vdupq_n_f32(0.0f);
  for (int p = 0; p < 4; p++) {
    const uint8_t *q = g + 64 * (4 + 8 * p);
    int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
    slice_dot<0>(&lo, &hi, q, x[p]);
    slice_dot<1>(&lo, &hi, q, x[p]);
    slice_dot<2>(&lo, &hi, q, x[p]);
    slice_dot<3>(&lo, &hi, q, x[p]);
    slice_dot<4>(&lo, &hi, q, x[p]);
    slice_dot<5>(&lo, &hi, q, x[p]);
    slice_dot<6>(&lo, &hi, q, x[p]);
    slice_dot<7>(&lo, &hi, q, x[p]);
    const int a = 2 * p, b = 2 * p + 1;
    sacc = vfmaq_f32(sacc, vcvtq_f32_s32(lo), vmulq_n_f32(scale_min<0>(a, q1, q2, q3), x[p].da));
    sacc = vfmaq_f32(sacc, vcvtq_f32_s32(hi), vmulq_n_f32(scale_min<0>(b, q1, q2, q3), x[p].db));
    macc = vfmaq_n_f32(macc, scale_min<1>(a, q1, q2, q3), x[p].dsa);
    macc = vfmaq_n_f32(macc, scale_min<1>(b, q1, q2, q3), x[p].dsb);
  }
  const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(q0)));
  const float32x4_t dmin = vcvt_f32_f16(vreinterpret_f16_u16(vshrn_n_u32(q0, 16)));
  acc = vfmaq_f32(acc, d, sacc);
  return vfmsq_f32(acc, dmin, macc);
}

// y[0..16) = one group's rows over nsb super-blocks.
inline void group_dot(float *y, const uint8_t *g, const gb_q8x_block *xq, size_t nsb) {
  float32x4_t acc[4];
  for (int v = 0; v < 4; v++) acc[v] = vdupq_n_f32(0.0f);
  for (size_t s = 0; s < nsb; s++, g += kGsb, xq += 8) {
    for (size_t o = 0; o < kGsb; o += 64) __builtin_prefetch(g + kPrefetch + o, 0, 0);
    XPair x[4];
    for (int p = 0; p < 4; p++) x[p] = load_pair(xq[2 * p], xq[2 * p + 1]);
    for (int v = 0; v < 4; v++) acc[v] = quad_sb(acc[v], g + 16 * v, x);
  }
  for (int v = 0; v < 4; v++) vst1q_f32(y + 4 * v, acc[v]);
}

}  // namespace

extern "C" void gb_q4kr16_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                        size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for (size_t r = row_begin; r < row_end; r += 16) group_dot(y + r, W + (r / 16) * nsb * kGsb, xq, nsb);
}

// Per group, the positions one after another (its bytes come from L1/L2
// for the positions after the first); each computed as the gemv does.
extern "C" void gb_q4kr16_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                         const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                         size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for (size_t r = row_begin; r < row_end; r += 16)
    for (size_t i = 0; i < m; i++) group_dot(Y + i * ldy + r, W + (r / 16) * nsb * kGsb, XQ + i * ldxq, nsb);
}
