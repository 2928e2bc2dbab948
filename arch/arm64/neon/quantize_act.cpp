// ARMv8-A Advanced SIMD q8x activation quantizer, the Cortex-A53 baseline.
//
// Same definition as generic: amax over the block (NaN ignored: FMAXNM from
// a zero start), d = amax / 127, id = 1 / d (0 when d is 0), and
// qs = round-half-away(v * id) (FCVTAS = roundf then convert). Bit-identical
// to the generic quantizer for finite inputs. A last partial block is
// copied into a zeroed buffer: nothing is read past x[n).
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

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
    const int8x16_t q0 = vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1]));
    const int8x16_t q1 = vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3]));
    vst1q_s8(out[b].qs, q0);
    vst1q_s8(out[b].qs + 16, q1);
    out[b].sum = (int32_t)vaddlvq_s8(q0) + (int32_t)vaddlvq_s8(q1);
  }
}
