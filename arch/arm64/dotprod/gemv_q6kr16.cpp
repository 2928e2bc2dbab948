// ARMv8.2-A SDOT q6kr16 x q8x GEMV: the 16-row q6k layout (kernels.h,
// krows16.h), one 32-bit lane per row.
//
// A group super-block (16 rows x 256 columns, 3360 bytes) is the rows' q6k
// blocks in 4-byte slices of 64 bytes, one 16-byte vector per four rows:
// slices 0..31 = ql, 32..47 = qh, 48..51 = the sixteen int8 scales, then the
// rows' f16 d (32 bytes). For half h of the super-block and code bytes
// l = 4k..4k+3, slice A = 16h + k holds 32-weight groups g = 0 (low nibbles)
// and 2 (high), slice B = 16h + 8 + k groups 1 and 3, slice H = 32 + 8h + k
// their top two bits (2g, 2g + 1). Each group's 6-bit codes come out with
// byte shifts and inserts (SLI, USRA); SDOT by element adds each row's four
// products to its own lane, from an accumulator that starts at -32 * the
// sum of the 16 activation bytes of that half: the exact int32 sum of
// (u - 32) * x, as gb_q6k_gemv__generic's. Then per 16-weight half t:
// (xd * sc_t) * isum_t, summed per super-block and times d: the float part
// is reassociated, within the tolerance of tests/isa/test_kernels.cpp.
#include <arm_neon.h>
#include <stdint.h>

#include "kernels.h"

namespace {

constexpr size_t kGsb = 16 * GB_Q6K_BLOCK_BYTES;  // bytes of one group super-block (3360)
constexpr size_t kPrefetch = 2048;                // bytes ahead of the group stream

// The four activation halves (groups g = 0..3 of half h, bytes 16e..16e+15).
struct XHalf {
  int8x16_t x[4];
  int32_t off[4];  // -32 * sum of the 16 bytes
  float d[4];
};

template <int K>
inline void slice_dot(int32x4_t is[4], const uint8_t *A, const uint8_t *B, const uint8_t *H, const XHalf &x) {
  const uint8x16_t a = vld1q_u8(A + 64 * K), b = vld1q_u8(B + 64 * K), h = vld1q_u8(H + 64 * K);
  const uint8x16_t c0 = vsliq_n_u8(a, vandq_u8(h, vdupq_n_u8(3)), 4);
  const uint8x16_t c1 = vsliq_n_u8(b, vandq_u8(vshrq_n_u8(h, 2), vdupq_n_u8(3)), 4);
  const uint8x16_t c2 = vsraq_n_u8(vandq_u8(h, vdupq_n_u8(0x30)), a, 4);
  const uint8x16_t c3 = vsraq_n_u8(vshrq_n_u8(vandq_u8(h, vdupq_n_u8(0xC0)), 2), b, 4);
  is[0] = vdotq_laneq_s32(is[0], vreinterpretq_s8_u8(c0), x.x[0], K);
  is[1] = vdotq_laneq_s32(is[1], vreinterpretq_s8_u8(c1), x.x[1], K);
  is[2] = vdotq_laneq_s32(is[2], vreinterpretq_s8_u8(c2), x.x[2], K);
  is[3] = vdotq_laneq_s32(is[3], vreinterpretq_s8_u8(c3), x.x[3], K);
}

// The int8 scale t of four rows as floats (slice 48 + t / 4, byte t % 4).
inline float32x4_t scale(const uint8_t *g, int t) {
  const int32x4_t v = vreinterpretq_s32_u8(vld1q_u8(g + 64 * (48 + t / 4)));
  return vcvtq_f32_s32(vshlq_s32(vshlq_s32(v, vdupq_n_s32(24 - 8 * (t % 4))), vdupq_n_s32(-24)));
}

// Rows 4v..4v+3 (g at their vector of slice 0): sacc += half (h, e)'s terms.
inline float32x4_t quad_half(float32x4_t sacc, const uint8_t *g, int h, int e, const XHalf &x) {
  const uint8_t *A = g + 64 * (16 * h + 4 * e), *B = g + 64 * (16 * h + 8 + 4 * e), *H = g + 64 * (32 + 8 * h + 4 * e);
  int32x4_t is[4];
  for (int q = 0; q < 4; q++) is[q] = vdupq_n_s32(x.off[q]);
  slice_dot<0>(is, A, B, H, x);
  slice_dot<1>(is, A, B, H, x);
  slice_dot<2>(is, A, B, H, x);
  slice_dot<3>(is, A, B, H, x);
  for (int q = 0; q < 4; q++) {
    const int t = 2 * (4 * h + q) + e;
    sacc = vfmaq_f32(sacc, vcvtq_f32_s32(is[q]), vmulq_n_f32(scale(g, t), x.d[q]));
  }
  return sacc;
}

// y[0..16) = one group's rows over nsb super-blocks.
inline void group_dot(float *y, const uint8_t *g, const gb_q8x_block *xq, size_t nsb) {
  float32x4_t acc[4];
  for (int v = 0; v < 4; v++) acc[v] = vdupq_n_f32(0.0f);
  for (size_t s = 0; s < nsb; s++, g += kGsb, xq += 8) {
    for (size_t o = 0; o < kGsb; o += 64) __builtin_prefetch(g + kPrefetch + o, 0, 0);
    float32x4_t sacc[4];
    for (int v = 0; v < 4; v++) sacc[v] = vdupq_n_f32(0.0f);
    for (int h = 0; h < 2; h++)
      for (int e = 0; e < 2; e++) {
        XHalf x;
        for (int q = 0; q < 4; q++) {
          const gb_q8x_block &b = xq[4 * h + q];
          x.x[q] = vld1q_s8(b.qs + 16 * e);
          x.off[q] = -32 * (int32_t)vaddlvq_s8(x.x[q]);
          x.d[q] = b.d;
        }
        for (int v = 0; v < 4; v++) sacc[v] = quad_half(sacc[v], g + 16 * v, h, e, x);
      }
    for (int v = 0; v < 4; v++) {
      const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(g + 64 * 52 + 8 * v)));
      acc[v] = vfmaq_f32(acc[v], d, sacc[v]);
    }
  }
  for (int v = 0; v < 4; v++) vst1q_f32(y + 4 * v, acc[v]);
}

}  // namespace

extern "C" void gb_q6kr16_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                        size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for (size_t r = row_begin; r < row_end; r += 16) group_dot(y + r, W + (r / 16) * nsb * kGsb, xq, nsb);
}

// Per group, the positions one after another; each computed as the gemv does.
extern "C" void gb_q6kr16_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                         const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                         size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  for (size_t r = row_begin; r < row_end; r += 16)
    for (size_t i = 0; i < m; i++) group_dot(Y + i * ldy + r, W + (r / 16) * nsb * kGsb, XQ + i * ldxq, nsb);
}
