// arm64_common.h — the small helpers that several arm64 kernel folders
// (neon, dotprod, i8mm, sve) use: fp16 scale loads, unaligned f32 / f16
// vector loads, the horizontal sum of four int32x4 and the q4r16 group
// scales. Two more headers here hold what two folders share:
// kquant_common.h (the K-quant super-block loop of neon and dotprod) and
// attn_common.h (the attention helpers of dotprod and i8mm). What the files
// of one folder share lives in that folder (gemv_blocks.h, gemv_float.h,
// kquant_dot.h), compiled with that folder's flags only.
//
// Every folder compiles these headers with its own -march (neon: armv8-a,
// dotprod: +dotprod, i8mm: +dotprod+i8mm, sve: +sve); they use ARMv8-A
// Advanced SIMD only, which every folder has.
//
// No anonymous namespace here (a header's types must not depend on one);
// instead every function and function template is static, so each folder
// gets its own internal copy compiled with its own flags and the linker never
// folds an out-of-line copy built for one folder's -march (an SVE or SDOT
// build of a helper, say) into a kernel that must run on a baseline core.
// Kernel files use the helpers from their own anonymous namespace
// (`using namespace gb_arm64;` or the sub-namespace of their header), as
// the AVX2 files do with avx2_common.h.
#ifndef GEARBX_ARCH_ARM64_COMMON_H
#define GEARBX_ARCH_ARM64_COMMON_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace gb_arm64 {

// y[0..nr) = the first nr (1..4) lanes of v: a group of four rows' results,
// of which a tail group stores only its own rows.
static inline void store_rows(float *y, float32x4_t v, size_t nr) {
  if (nr == 4) {
    vst1q_f32(y, v);
  } else {
    float t[4];
    vst1q_f32(t, v);
    memcpy(y, t, nr * 4);
  }
}

// The fp16 scale at p (unaligned) as f32. FCVTL: exact for every binary16.
static inline float f16_scale(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// The fp16 scales at p0..p3 as the four lanes of one vector (one FCVTL).
static inline float32x4_t f16_scales4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3) {
  uint16_t h[4];
  memcpy(&h[0], p0, 2);
  memcpy(&h[1], p1, 2);
  memcpy(&h[2], p2, 2);
  memcpy(&h[3], p3, 2);
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// Four f32 at p (16 bytes, unaligned: a byte load reinterpreted).
static inline float32x4_t load_f4(const uint8_t *p) { return vreinterpretq_f32_u8(vld1q_u8(p)); }

// Four binary16 at p (8 bytes) widened to f32.
static inline float32x4_t load_h4(const uint8_t *p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

// Sum of 4 int32x4 vectors, lane k = horizontal sum of the k-th argument.
static inline int32x4_t hsum4_s32(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

// The 16 fp16 scales at the start of a q4r16 group-block as f32, rows
// 4j..4j+3 in s[j] (one 32-byte load, FCVTL / FCVTL2).
static inline void q4r16_scales(const uint8_t *g, float32x4_t s[4]) {
  const float16x8_t h0 = vreinterpretq_f16_u8(vld1q_u8(g));
  const float16x8_t h1 = vreinterpretq_f16_u8(vld1q_u8(g + 16));
  s[0] = vcvt_f32_f16(vget_low_f16(h0));
  s[1] = vcvt_high_f32_f16(h0);
  s[2] = vcvt_f32_f16(vget_low_f16(h1));
  s[3] = vcvt_high_f32_f16(h1);
}

}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_COMMON_H
