// ARMv8-A Advanced SIMD fused attention over packed KV records (layouts in
// kernels.h), the Cortex-A53 baseline. Per chunk of 32 records: each key
// row is unpacked once to int8 codes (one shift and mask per plane), dotted
// with every query head of its group by SMULL/SADALP into exact int32 sums
// (codes <= 15 and |q8| <= 127 fit the int16 products; 8-bit keys too) and
// scaled late exactly as the generic kernel does, so scores are
// bit-identical. Softmax weights use expf as generic does; each value row is
// widened to f32 once and accumulated into its group's heads with FMLA (a
// different rounding than generic's multiply then add: within the tests'
// tolerance). Rows whose head_dim is not a multiple of 32 go to the generic
// kernel; so does the finish step (scalar work over the scores).
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "arm64/arm64_common.h"
#include "f16.h"
#include "kernels.h"

namespace {

using namespace gb_arm64;

constexpr uint32_t kChunk = 32;

// A packed row (bits 2, 3, 4) to codes u[0..d); d % 32 == 0.
inline void unpack_codes(uint8_t *u, const uint8_t *row, uint32_t d, uint32_t bits) {
  if (bits == 4) {
    const uint32_t h = d / 2;
    for (uint32_t c = 0; c < h; c += 16) {
      const uint8x16_t b = vld1q_u8(row + c);
      vst1q_u8(u + c, vandq_u8(b, vdupq_n_u8(15)));
      vst1q_u8(u + h + c, vshrq_n_u8(b, 4));
    }
    return;
  }
  const uint32_t qd = d / 4;  // multiple of 8
  const uint8x8_t m3 = vdup_n_u8(3);
  for (uint32_t c = 0; c < qd; c += 8) {
    const uint8x8_t b = vld1_u8(row + c);
    vst1_u8(u + c, vand_u8(b, m3));
    vst1_u8(u + qd + c, vand_u8(vshr_n_u8(b, 2), m3));
    vst1_u8(u + 2 * qd + c, vand_u8(vshr_n_u8(b, 4), m3));
    vst1_u8(u + 3 * qd + c, vshr_n_u8(b, 6));
  }
  if (bits == 3) {
    const uint32_t e = d / 8;  // multiple of 4
    const uint8_t *hi = row + qd;
    if (e % 8 == 0) {
      for (uint32_t c = 0; c < e; c += 8) {
        const uint8x8_t b = vld1_u8(hi + c);
        for (int k = 0; k < 8; k++) {
          const uint8x8_t bit = vand_u8(vshl_u8(b, vdup_n_s8((int8_t)-k)), vdup_n_u8(1));
          vst1_u8(u + k * e + c, vorr_u8(vld1_u8(u + k * e + c), vshl_n_u8(bit, 2)));
        }
      }
    } else {
      for (uint32_t j = 0; j < e; j++)
        for (uint32_t k = 0; k < 8; k++) u[j + k * e] = (uint8_t)(u[j + k * e] | (((hi[j] >> k) & 1) << 2));
    }
  }
}

// Exact int32 dot of d int8 values (codes reinterpret as int8: <= 15).
inline int32_t dot_s8(const int8_t *a, const int8_t *q, uint32_t d) {
  int32x4_t acc0 = vdupq_n_s32(0), acc1 = vdupq_n_s32(0);
  for (uint32_t j = 0; j < d; j += 16) {
    const int8x16_t x = vld1q_s8(a + j), y = vld1q_s8(q + j);
    acc0 = vpadalq_s16(acc0, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    acc1 = vpadalq_s16(acc1, vmull_s8(vget_high_s8(x), vget_high_s8(y)));
  }
  return vaddvq_s32(vaddq_s32(acc0, acc1));
}

inline float dot_f(const float *q, const uint8_t *k, uint32_t d, uint32_t bits) {
  float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
  for (uint32_t j = 0; j < d; j += 8) {
    float32x4_t k0, k1;
    if (bits == 16) {
      k0 = load_h4(k + 2 * j);
      k1 = load_h4(k + 2 * j + 8);
    } else {
      float t[8];
      memcpy(t, k + 4 * j, 32);
      k0 = vld1q_f32(t);
      k1 = vld1q_f32(t + 4);
    }
    a0 = vfmaq_f32(a0, vld1q_f32(q + j), k0);
    a1 = vfmaq_f32(a1, vld1q_f32(q + j + 4), k1);
  }
  return vaddvq_f32(vaddq_f32(a0, a1));
}

// A value row widened to f32 (without its scale); d % 32 == 0.
inline void widen_row(float *v, const uint8_t *row, uint32_t d, uint32_t bits, uint8_t *codes) {
  if (bits == 32) {
    memcpy(v, row, (size_t)d * 4);
    return;
  }
  if (bits == 16) {
    for (uint32_t j = 0; j < d; j += 4) vst1q_f32(v + j, load_h4(row + 2 * j));
    return;
  }
  const int8_t *src;
  int8x8_t off;
  if (bits == 8) {
    src = reinterpret_cast<const int8_t *>(row);
    off = vdup_n_s8(0);
  } else {
    unpack_codes(codes, row, d, bits);
    src = reinterpret_cast<const int8_t *>(codes);
    off = vdup_n_s8((int8_t)(1 << (bits - 1)));
  }
  for (uint32_t j = 0; j < d; j += 8) {
    const int16x8_t w = vmovl_s8(vsub_s8(vld1_s8(src + j), off));
    vst1q_f32(v + j, vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))));
    vst1q_f32(v + j + 4, vcvtq_f32_s32(vmovl_s16(vget_high_s16(w))));
  }
}

}  // namespace

extern "C" void gb_attn_run__neon(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count,
                                  uint32_t kbits, uint32_t vbits, uint32_t base) {
  const uint32_t H = st->n_heads, R = st->n_kv_heads, d = st->head_dim, G = H / R;
  if (d % 32 != 0 || d > GB_KV_QUANT_MAX_HEAD_DIM || H > 64) {
    gb_attn_run__generic(st, records, slots, count, kbits, vbits, base);
    return;
  }
  const uint32_t krow = d * kbits / 8, vrow = d * vbits / 8;
  const size_t rec = (size_t)R * (krow + vrow);
  const size_t stride = st->score_stride;
  alignas(16) uint8_t codes[GB_KV_QUANT_MAX_HEAD_DIM];
  alignas(16) float vf[GB_KV_QUANT_MAX_HEAD_DIM];
  float p[64 * kChunk];  // (H, chunk) softmax weights
  int32_t qsum[64];      // off x sum(q8) per head
  if (kbits < 8)
    for (uint32_t h = 0; h < H; h++) {
      int32_t s = 0;
      for (uint32_t j = 0; j < d; j++) s += st->q8[(size_t)h * d + j];
      qsum[h] = s * (1 << (kbits - 1));
    }
  for (uint32_t c0 = 0; c0 < count; c0 += kChunk) {
    const uint32_t n = count - c0 < kChunk ? count - c0 : kChunk;
    for (uint32_t t = 0; t < n; t++) {
      const uint8_t *r0 = records + (size_t)(c0 + t) * rec;
      const uint32_t slot = slots[c0 + t];
      for (uint32_t r = 0; r < R; r++) {
        const uint8_t *kr = r0 + (size_t)r * krow;
        const float sk = kbits <= 8 ? gb::f16_to_f32(st->scales[(size_t)slot * 2 * R + r]) : 0.0f;
        if (kbits < 8) unpack_codes(codes, kr, d, kbits);
        for (uint32_t g = 0; g < G; g++) {
          const uint32_t h = r * G + g;
          float score;
          if (kbits <= 8) {
            const int8_t *q8 = st->q8 + (size_t)h * d;
            const int32_t isum = kbits == 8 ? dot_s8(reinterpret_cast<const int8_t *>(kr), q8, d)
                                            : dot_s8(reinterpret_cast<const int8_t *>(codes), q8, d) - qsum[h];
            score = ((float)isum * (sk * st->q8_d[h])) * st->scale;
          } else {
            score = dot_f(st->q + (size_t)h * d, kr, d, kbits) * st->scale;
          }
          st->scores[(size_t)h * stride + base + c0 + t] = score;
        }
      }
    }
    for (uint32_t h = 0; h < H; h++) {
      const float *s = st->scores + (size_t)h * stride + base + c0;
      float mx = st->m[h];
      for (uint32_t t = 0; t < n; t++) mx = s[t] > mx ? s[t] : mx;
      if (mx > st->m[h]) {
        const float f = expf(st->m[h] - mx);
        st->l[h] *= f;
        float *acc = st->acc + (size_t)h * d;
        for (uint32_t j = 0; j < d; j += 4) vst1q_f32(acc + j, vmulq_n_f32(vld1q_f32(acc + j), f));
        st->m[h] = mx;
      }
      float *ph = p + (size_t)h * kChunk;
      float l = st->l[h];
      for (uint32_t t = 0; t < n; t++) {
        ph[t] = expf(s[t] - st->m[h]);
        l += ph[t];
      }
      st->l[h] = l;
    }
    for (uint32_t t = 0; t < n; t++) {
      const uint8_t *v0 = records + (size_t)(c0 + t) * rec + (size_t)R * krow;
      const uint32_t slot = slots[c0 + t];
      for (uint32_t r = 0; r < R; r++) {
        widen_row(vf, v0 + (size_t)r * vrow, d, vbits, codes);
        const float sv = vbits <= 8 ? gb::f16_to_f32(st->scales[(size_t)slot * 2 * R + R + r]) : 1.0f;
        for (uint32_t g = 0; g < G; g++) {
          const uint32_t h = r * G + g;
          const float pt = p[(size_t)h * kChunk + t];
          const float w = vbits <= 8 ? pt * sv : pt;
          float *acc = st->acc + (size_t)h * d;
          for (uint32_t j = 0; j < d; j += 4) vst1q_f32(acc + j, vfmaq_n_f32(vld1q_f32(acc + j), vld1q_f32(vf + j), w));
        }
      }
    }
  }
}

