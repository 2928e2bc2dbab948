// attn_common.h — what the fused attention kernels of the dotprod and i8mm
// folders (attn_kv.cpp) share. Both score quantized keys with their own
// instruction (SDOT, SMMLA) and share the rest: the test for rows that
// unpack in registers, the unpacking into a buffer of the others and of the
// value rows, the f16 / f32 key dot product and the value accumulation.
//
// ARMv8-A Advanced SIMD only; every function is static, as in
// arm64_common.h, so each folder's object keeps its own copy (the larger
// ones plain static functions, inlined or not as the compiler decides).
#ifndef GEARBX_ARCH_ARM64_ATTN_COMMON_H
#define GEARBX_ARCH_ARM64_ATTN_COMMON_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#include "arm64/arm64_common.h"

namespace gb_arm64 {
namespace attn {

constexpr uint32_t kChunk = 32;  // records per softmax step

// Whether a row unpacks in registers, 8 bytes of a plane at a time.
static inline bool planes_of_8(uint32_t d, uint32_t bits) {
  return bits == 8 || (bits == 4 && d % 16 == 0) || (bits == 2 && d % 32 == 0) || (bits == 3 && d % 64 == 0);
}

// A packed row (bits 2, 3, 4) to its signed codes x[0..d), any d % 8 == 0.
static void unpack_signed(int8_t *x, const uint8_t *row, uint32_t d, uint32_t bits) {
  if (bits == 4) {
    const uint32_t h = d / 2;
    uint32_t c = 0;
    for (; c + 8 <= h; c += 8) {
      const uint8x8_t b = vld1_u8(row + c);
      vst1_s8(x + c, vsub_s8(vreinterpret_s8_u8(vand_u8(b, vdup_n_u8(15))), vdup_n_s8(8)));
      vst1_s8(x + h + c, vsub_s8(vreinterpret_s8_u8(vshr_n_u8(b, 4)), vdup_n_s8(8)));
    }
    for (; c < h; c++) {
      x[c] = (int8_t)((row[c] & 15) - 8);
      x[h + c] = (int8_t)((row[c] >> 4) - 8);
    }
    return;
  }
  const uint32_t qd = d / 4;
  const int off = bits == 3 ? 4 : 2;
  uint32_t c = 0;
  for (; c + 8 <= qd; c += 8) {
    const uint8x8_t b = vld1_u8(row + c);
    for (int k = 0; k < 4; k++) {
      const uint8x8_t u = vand_u8(vshl_u8(b, vdup_n_s8((int8_t)(-2 * k))), vdup_n_u8(3));
      vst1_s8(x + k * qd + c, vsub_s8(vreinterpret_s8_u8(u), vdup_n_s8((int8_t)off)));
    }
  }
  for (; c < qd; c++)
    for (uint32_t k = 0; k < 4; k++) x[k * qd + c] = (int8_t)(((row[c] >> (2 * k)) & 3) - off);
  if (bits == 3) {
    const uint32_t e = d / 8;
    const uint8_t *hi = row + qd;
    c = 0;
    for (; c + 8 <= e; c += 8) {
      const uint8x8_t b = vld1_u8(hi + c);
      for (int k = 0; k < 8; k++) {
        const uint8x8_t h4 = vand_u8(vshl_u8(b, vdup_n_s8((int8_t)(2 - k))), vdup_n_u8(4));
        vst1_s8(x + k * e + c, vadd_s8(vld1_s8(x + k * e + c), vreinterpret_s8_u8(h4)));
      }
    }
    for (; c < e; c++)
      for (uint32_t k = 0; k < 8; k++) x[k * e + c] = (int8_t)(x[k * e + c] + (((hi[c] >> k) & 1) << 2));
  }
}

// sum_j q[j] * k[j] for an f16 / f32 key row, d % 8 == 0.
static float dot_f(const float *q, const uint8_t *k, uint32_t d, uint32_t bits) {
  float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
  for (uint32_t j = 0; j < d; j += 8) {
    const float32x4_t k0 = bits == 16 ? load_h4(k + 2 * j) : load_f4(k + 4 * j);
    const float32x4_t k1 = bits == 16 ? load_h4(k + 2 * j + 8) : load_f4(k + 4 * j + 16);
    a0 = vfmaq_f32(a0, vld1q_f32(q + j), k0);
    a1 = vfmaq_f32(a1, vld1q_f32(q + j + 4), k1);
  }
  return vaddvq_f32(vaddq_f32(a0, a1));
}

enum ValueKind { kCodes, kHalf, kFloat };  // int8 codes, binary16, f32

// acc[g * d + j] += sum_t w[g * kChunk + t] * v_t[j] for g < NH, t < n:
// v_t is the row at src[t]. Tiles of 8 columns; the NH x 8 sums stay in
// registers over the n records.
template <uint32_t NH, ValueKind K>
static void accumulate(float *acc, const uint8_t *const *src, const float *w, uint32_t n, uint32_t d) {
  for (uint32_t j = 0; j < d; j += 8) {
    float32x4_t a[NH][2];
    for (uint32_t g = 0; g < NH; g++) {
      a[g][0] = vld1q_f32(acc + g * d + j);
      a[g][1] = vld1q_f32(acc + g * d + j + 4);
    }
    for (uint32_t t = 0; t < n; t++) {
      float32x4_t x0, x1;
      if (K == kCodes) {
        const int16x8_t v = vmovl_s8(vld1_s8(reinterpret_cast<const int8_t *>(src[t]) + j));
        x0 = vcvtq_f32_s32(vmovl_s16(vget_low_s16(v)));
        x1 = vcvtq_f32_s32(vmovl_s16(vget_high_s16(v)));
      } else if (K == kHalf) {
        x0 = load_h4(src[t] + 2 * j);
        x1 = load_h4(src[t] + 2 * j + 8);
      } else {
        x0 = load_f4(src[t] + 4 * j);
        x1 = load_f4(src[t] + 4 * j + 16);
      }
      for (uint32_t g = 0; g < NH; g++) {
        const float wt = w[g * kChunk + t];
        a[g][0] = vfmaq_n_f32(a[g][0], x0, wt);
        a[g][1] = vfmaq_n_f32(a[g][1], x1, wt);
      }
    }
    for (uint32_t g = 0; g < NH; g++) {
      vst1q_f32(acc + g * d + j, a[g][0]);
      vst1q_f32(acc + g * d + j + 4, a[g][1]);
    }
  }
}

template <ValueKind K>
static void accumulate_n(uint32_t nh, float *acc, const uint8_t *const *src, const float *w, uint32_t n, uint32_t d) {
  switch (nh) {
    case 1: accumulate<1, K>(acc, src, w, n, d); break;
    case 2: accumulate<2, K>(acc, src, w, n, d); break;
    case 3: accumulate<3, K>(acc, src, w, n, d); break;
    default: accumulate<4, K>(acc, src, w, n, d); break;
  }
}

}  // namespace attn
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_ATTN_COMMON_H
