// NEON Gated DeltaNet state update and read-out (kernels.h,
// gb_delta_rule_fn): each row once through the registers for the decay and
// S[j] . k, once for the update and S[j] . q, two four-lane accumulators per
// step; a dimension that is not a multiple of 8 finishes its row in scalar
// code.
#include <arm_neon.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

extern "C" void gb_delta_rule__neon(float *S, const float *k, const float *v, const float *q, float g, float beta, uint32_t d,
                                    float *o) {
  const float decay = expf(g);
  const uint32_t d8 = d & ~7u;
  for (uint32_t j = 0; j < d; j++) {
    float *row = S + (size_t)j * d;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
    for (uint32_t i = 0; i < d8; i += 8) {
      const float32x4_t r0 = vmulq_n_f32(vld1q_f32(row + i), decay), r1 = vmulq_n_f32(vld1q_f32(row + i + 4), decay);
      vst1q_f32(row + i, r0);
      vst1q_f32(row + i + 4, r1);
      a0 = vfmaq_f32(a0, r0, vld1q_f32(k + i));
      a1 = vfmaq_f32(a1, r1, vld1q_f32(k + i + 4));
    }
    float sk = vaddvq_f32(vaddq_f32(a0, a1));
    for (uint32_t i = d8; i < d; i++) {
      row[i] *= decay;
      sk += row[i] * k[i];
    }
    const float dj = (v[j] - sk) * beta;
    if (!o) {  // a replay: the update alone
      for (uint32_t i = 0; i < d8; i += 4) vst1q_f32(row + i, vfmaq_n_f32(vld1q_f32(row + i), vld1q_f32(k + i), dj));
      for (uint32_t i = d8; i < d; i++) row[i] += k[i] * dj;
      continue;
    }
    a0 = a1 = vdupq_n_f32(0.0f);
    for (uint32_t i = 0; i < d8; i += 8) {
      const float32x4_t r0 = vfmaq_n_f32(vld1q_f32(row + i), vld1q_f32(k + i), dj);
      const float32x4_t r1 = vfmaq_n_f32(vld1q_f32(row + i + 4), vld1q_f32(k + i + 4), dj);
      vst1q_f32(row + i, r0);
      vst1q_f32(row + i + 4, r1);
      a0 = vfmaq_f32(a0, r0, vld1q_f32(q + i));
      a1 = vfmaq_f32(a1, r1, vld1q_f32(q + i + 4));
    }
    float sq = vaddvq_f32(vaddq_f32(a0, a1));
    for (uint32_t i = d8; i < d; i++) {
      row[i] += k[i] * dj;
      sq += row[i] * q[i];
    }
    o[j] = sq;
  }
}
