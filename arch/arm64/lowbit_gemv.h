// The GEMV of GGUF's Q1_0 (128 weights of one bit under an f16 scale),
// Q2_0 (64 weights of two bits) and NVFP4 (64 E2M1 weights under four UE4M3
// scales) for the arm64 folders (neon: SMULL / SMLAL, dotprod: SDOT), one
// position (gemv) and several (gemvm). Layouts in kernels.h.
//
// A 32-weight sub-block becomes its 32 signed codes as two vectors (weights
// 0..15 and 16..31): q1_0 -1 / 1 (byte j takes byte j / 8 of the
// sub-block's bits by TBL and tests bit j % 8), q2_0 u - 1 in -1..2 (byte j
// takes byte j / 4 and shifts its field j % 4 down). The folder's Dot gives
// each 16-weight half's exact int32 sums in four lanes; then, per
// activation block, t += xd * (float)isum and, per block, acc += d * t with
// fused multiply-adds, the four lanes added at the end: generic's
// arithmetic with the float part reassociated (the tests' tolerance).
//
// NVFP4: a 16-weight group is 8 bytes of nibbles, low then high in element
// order: TBL of (low, high) in the E2M1 table gives its 16 signed codes
// (-12..12) in one vector; each group's exact sums (Dot) are scaled by its
// own d_k times xd: acc += (float)isum * (xd * d_k), fused, the four lanes
// added at the end (generic's arithmetic reassociated).
//
// The gemv is the gemvm with one position: a block's codes are decoded once
// per row and every position goes through the same operations, so the gemvm
// is bit-identical per position to the gemv. Nothing is read outside the
// rows' blocks.
#ifndef GEARBX_ARCH_ARM64_LOWBIT_GEMV_H
#define GEARBX_ARCH_ARM64_LOWBIT_GEMV_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arm64_common.h"
#include "iquants.h"
#include "kernels.h"

// Internal linkage: a kernel folder's objects define no shared or weak symbols.
namespace gb_lowbit {
namespace {

struct Q1_0 {
  static constexpr size_t kBytes = GB_Q1_0_BLOCK_BYTES;
  static constexpr int kSubs = 4;  // 32-weight sub-blocks per block
  static void codes(const uint8_t *b, int s, int8x16_t &lo, int8x16_t &hi) {
    uint32_t bits;
    memcpy(&bits, b + 2 + 4 * s, 4);
    const uint8x8_t w = vcreate_u8(bits);
    static const uint8_t kIdx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t tab = vcombine_u8(w, w), bit = vld1q_u8(kBit);
    const uint8x16_t two = vdupq_n_u8(2), one = vdupq_n_u8(1);
    lo = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vtstq_u8(vqtbl1q_u8(tab, vld1q_u8(kIdx)), bit), two), one));
    hi = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vtstq_u8(vqtbl1q_u8(tab, vld1q_u8(kIdx + 16)), bit), two), one));
  }
};

struct Q2_0 {
  static constexpr size_t kBytes = GB_Q2_0_BLOCK_BYTES;
  static constexpr int kSubs = 2;
  static void codes(const uint8_t *b, int s, int8x16_t &lo, int8x16_t &hi) {
    const uint8x8_t w = vld1_u8(b + 2 + 8 * s);
    static const uint8_t kIdx[32] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                     4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7};
    static const int8_t kShift[16] = {0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6};
    const uint8x16_t tab = vcombine_u8(w, w), three = vdupq_n_u8(3), one = vdupq_n_u8(1);
    const int8x16_t sh = vld1q_s8(kShift);
    lo = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshlq_u8(vqtbl1q_u8(tab, vld1q_u8(kIdx)), sh), three), one));
    hi = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshlq_u8(vqtbl1q_u8(tab, vld1q_u8(kIdx + 16)), sh), three), one));
  }
};

// Dot(w, x): the exact int32 sums of 16 products in four lanes.
template <class F, class Dot>
inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                  size_t row_begin, size_t row_end, size_t cols, Dot dot) {
  constexpr int S = F::kSubs;
  const size_t nb = cols / (32 * S), rb = nb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *blk = row + b * F::kBytes;
      int8x16_t c[2 * S];
      for (int s = 0; s < S; s++) F::codes(blk, s, c[2 * s], c[2 * s + 1]);
      const float d = gb_arm64::f16_scale(blk);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block *xq = XQ + p * ldxq + b * S;
        float32x4_t t = vdupq_n_f32(0.0f);
        for (int s = 0; s < S; s++) {
          const int32x4_t is = vaddq_s32(dot(c[2 * s], vld1q_s8(xq[s].qs)), dot(c[2 * s + 1], vld1q_s8(xq[s].qs + 16)));
          t = vfmaq_n_f32(t, vcvtq_f32_s32(is), xq[s].d);
        }
        acc[p] = vfmaq_n_f32(acc[p], t, d);
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = vaddvq_f32(acc[p]);
  }
}

template <class Dot>
inline void gemvm_nvfp4(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                        size_t row_begin, size_t row_end, size_t cols, Dot dot) {
  constexpr size_t kBytes = GB_NVFP4_BLOCK_BYTES;
  const size_t nb = cols / 64, rb = nb * kBytes;
  const int8x16_t table = vld1q_s8(gb_iq::kMxfp4);
  const uint8x8_t low4 = vdup_n_u8(15);
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *blk = row + b * kBytes;
      int8x16_t c[4];
      float d[4];
      for (int k = 0; k < 4; k++) {
        const uint8x8_t v = vld1_u8(blk + 4 + 8 * k);
        c[k] = vqtbl1q_s8(table, vcombine_u8(vand_u8(v, low4), vshr_n_u8(v, 4)));
        d[k] = gb_iq::nvfp4_d(blk[k]);
      }
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block *xq = XQ + p * ldxq + 2 * b;
        for (int s = 0; s < 2; s++) {
          acc[p] = vfmaq_n_f32(acc[p], vcvtq_f32_s32(dot(c[2 * s], vld1q_s8(xq[s].qs))), xq[s].d * d[2 * s]);
          acc[p] = vfmaq_n_f32(acc[p], vcvtq_f32_s32(dot(c[2 * s + 1], vld1q_s8(xq[s].qs + 16))), xq[s].d * d[2 * s + 1]);
        }
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = vaddvq_f32(acc[p]);
  }
}

}  // namespace
}  // namespace gb_lowbit

// The four entry points of q1_0 and q2_0 with the folder's dot function, in
// folder `isa`.
#define GB_LOWBIT_ARM64_ONE(fmt, F, isa, dot)                                                                      \
  extern "C" void gb_##fmt##_gemv__##isa(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,       \
                                         size_t row_begin, size_t row_end, size_t cols) {                          \
    gb_lowbit::gemvm<gb_lowbit::F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols, dot);                             \
  }                                                                                                                \
  extern "C" void gb_##fmt##_gemvm__##isa(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,          \
                                          const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,         \
                                          size_t row_end, size_t cols) {                                           \
    gb_lowbit::gemvm<gb_lowbit::F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols, dot);                        \
  }
#define GB_LOWBIT_ARM64(isa, dot)                                                                                  \
  GB_LOWBIT_ARM64_ONE(q1_0, Q1_0, isa, dot)                                                                        \
  GB_LOWBIT_ARM64_ONE(q2_0, Q2_0, isa, dot)                                                                        \
  extern "C" void gb_nvfp4_gemv__##isa(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,          \
                                       size_t row_begin, size_t row_end, size_t cols) {                            \
    gb_lowbit::gemvm_nvfp4(y, 0, W, xq, 0, 1, row_begin, row_end, cols, dot);                                     \
  }                                                                                                                \
  extern "C" void gb_nvfp4_gemvm__##isa(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,             \
                                        const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,           \
                                        size_t row_end, size_t cols) {                                             \
    gb_lowbit::gemvm_nvfp4(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols, dot);                                \
  }

#endif  // GEARBX_ARCH_ARM64_LOWBIT_GEMV_H
