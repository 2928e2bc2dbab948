// The GEMV driver of GGUF's i-quants (iq2xxs, iq2xs, iq2s, iq3xxs, iq3s,
// iq1s, iq1m) for the arm64 folders (neon: SMULL / SMLAL, dotprod: SDOT),
// one position (gemv) and several (gemvm). Layouts in kernels.h; the
// codebooks and each format's decoder in arch/iquants.h.
//
// A 32-weight sub-block becomes its 32 int8 codes as two vectors (weights
// 0..15 and 16..31): the decoder's 8-lane words lo and hi (codebook rows
// looked up by index, sign masks from the sign bits) combined and added as
// bytes. The folder's Dot gives each 16-weight half's exact int32 sums in
// four lanes, which are multiplied by the half's odd scale and added (|sum|
// < 2^22: exact in float); then, per activation block, t += xd * (float)sum
// and, per super-block, acc += dq * t with fused multiply-adds, the four
// lanes added at the end: generic's arithmetic (gemv_ggml.h) with the float
// part reassociated (the tests' tolerance).
//
// The gemv is the gemvm with one position: a super-block's codes are
// decoded once per row and every position goes through the same
// operations, so the gemvm is bit-identical per position to the gemv.
// Nothing is read outside the rows' blocks.
#ifndef GEARBX_ARCH_ARM64_IQUANT_GEMV_H
#define GEARBX_ARCH_ARM64_IQUANT_GEMV_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#include "iquants.h"
#include "kernels.h"

// Internal linkage: a kernel folder's objects define no shared or weak symbols.
namespace gb_iqa {
namespace {

// The 32 codes of sub-block s of the super-block at b: weights 0..15 in a,
// 16..31 in c.
template <class F>
inline void codes(const uint8_t *b, int s, int8x16_t &a, int8x16_t &c) {
  uint64_t lo[4], hi[4];
  F::sub(b, s, lo, hi);
  a = vreinterpretq_s8_u8(vaddq_u8(vcombine_u8(vcreate_u8(lo[0]), vcreate_u8(lo[1])),
                                   vcombine_u8(vcreate_u8(hi[0]), vcreate_u8(hi[1]))));
  c = vreinterpretq_s8_u8(vaddq_u8(vcombine_u8(vcreate_u8(lo[2]), vcreate_u8(lo[3])),
                                   vcombine_u8(vcreate_u8(hi[2]), vcreate_u8(hi[3]))));
}

// Dot(w, x): the exact int32 sums of 16 products in four lanes.
template <class F, class Dot>
inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                  size_t row_begin, size_t row_end, size_t cols, Dot dot) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t sb = 0; sb < nsb; sb++) {
      const uint8_t *b = row + sb * F::kBytes;
      int32_t sc[16];
      F::scales(b, sc);
      int8x16_t c[16];
      for (int s = 0; s < 8; s++) codes<F>(b, s, c[2 * s], c[2 * s + 1]);
      const float dq = F::dq(b);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block *xq = XQ + p * ldxq + sb * 8;
        float32x4_t t = vdupq_n_f32(0.0f);
        for (int s = 0; s < 8; s++) {
          const int32x4_t lo = vmulq_n_s32(dot(c[2 * s], vld1q_s8(xq[s].qs)), sc[2 * s]);
          const int32x4_t is = vmlaq_n_s32(lo, dot(c[2 * s + 1], vld1q_s8(xq[s].qs + 16)), sc[2 * s + 1]);
          t = vfmaq_n_f32(t, vcvtq_f32_s32(is), xq[s].d);
        }
        acc[p] = vfmaq_n_f32(acc[p], t, dq);
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = vaddvq_f32(acc[p]);
  }
}

}  // namespace
}  // namespace gb_iqa

// The two entry points of format `fmt` on decoder F (arch/iquants.h) with
// the folder's dot function, in folder `isa`.
#define GB_IQUANT_ARM64(fmt, F, isa, dot)                                                                          \
  extern "C" void gb_##fmt##_gemv__##isa(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,       \
                                         size_t row_begin, size_t row_end, size_t cols) {                          \
    gb_iqa::gemvm<gb_iq::F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols, dot);                                    \
  }                                                                                                                \
  extern "C" void gb_##fmt##_gemvm__##isa(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,          \
                                          const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,         \
                                          size_t row_end, size_t cols) {                                           \
    gb_iqa::gemvm<gb_iq::F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols, dot);                               \
  }
#define GB_IQUANTS_ARM64(isa, dot)          \
  GB_IQUANT_ARM64(iq2xxs, Iq2xxs, isa, dot) \
  GB_IQUANT_ARM64(iq2xs, Iq2xs, isa, dot)   \
  GB_IQUANT_ARM64(iq2s, Iq2s, isa, dot)     \
  GB_IQUANT_ARM64(iq3xxs, Iq3xxs, isa, dot) \
  GB_IQUANT_ARM64(iq3s, Iq3s, isa, dot)     \
  GB_IQUANT_ARM64(iq1s, Iq1s, isa, dot)     \
  GB_IQUANT_ARM64(iq1m, Iq1m, isa, dot)

#endif  // GEARBX_ARCH_ARM64_IQUANT_GEMV_H
