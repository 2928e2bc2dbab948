// ARMv8.2-A dot-product fused attention over packed KV records (layouts in
// kernels.h).
//
// Scores: a key row is unpacked in registers, 8 codes of one plane at a
// time (one shift and mask per plane), already minus the level's offset, so
// the codes are the signed values of the generic kernel; two such 8-code
// blocks make one 16-byte SDOT operand, whose query half is the two matching
// 8-byte pieces of q8. Up to four query heads of the group share one
// unpacking, each with its own int32 accumulator in a register. The sums
// are exact (|q8| <= 127, |code| <= 128, d <= 512), and the float work is
// generic's ((float)isum * (sk * q8_d)) * scale: scores are bit-identical.
// Rows whose planes are not a multiple of 8 bytes (4 bits: d % 16, 2 bits:
// d % 32, 3 bits: d % 64) are first unpacked into a buffer, then summed as
// 8-bit rows; 8-bit rows take any d % 8 == 0. f16 / f32 keys: FMLA over f32
// (summation order differs from generic: tolerance).
//
// Softmax as generic (expf, same max / rescale / sum order per head). Values
// of one kv head are unpacked once per chunk of 32 records (int8 buffer;
// 8-bit, f16 and f32 rows are read in place); then for each tile of 8
// columns the accumulators of up to four query heads stay in registers
// while the chunk's records are added with FMLA (fused, unlike generic's
// multiply then add: within the tests' tolerance). The finish step is the
// generic one (scalar work over the scores).
//
// The buffer unpacking, the f16 / f32 key dot product and the value
// accumulation are shared with the i8mm kernel (attn_common.h,
// gb_arm64::attn).
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "arm64/attn_common.h"
#include "f16.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::attn;

constexpr uint32_t kPass = 4;  // query heads whose sums / accumulators stay in registers
constexpr uint32_t kMaxD = GB_KV_QUANT_MAX_HEAD_DIM;

// isum[g] = sum_j q[g * d + j] * x[j] for g < NH, x the signed codes of the
// packed row (bits 2, 3, 4 with planes_of_8, or 8 with any d % 8 == 0).
template <uint32_t NH>
void isums(int32_t *isum, const uint8_t *row, const int8_t *q, uint32_t d, uint32_t bits) {
  int32x4_t acc[NH];
  for (uint32_t g = 0; g < NH; g++) acc[g] = vdupq_n_s32(0);
  // x: codes of elements oa..oa+7 (low half) and ob..ob+7 (high half).
  auto step = [&](int8x16_t x, uint32_t oa, uint32_t ob) {
    for (uint32_t g = 0; g < NH; g++)
      acc[g] = vdotq_s32(acc[g], x, vcombine_s8(vld1_s8(q + g * d + oa), vld1_s8(q + g * d + ob)));
  };
  if (bits == 8) {
    const int8_t *k = reinterpret_cast<const int8_t *>(row);
    uint32_t j = 0;
    for (; j + 16 <= d; j += 16) step(vld1q_s8(k + j), j, j + 8);
    if (j < d) step(vcombine_s8(vld1_s8(k + j), vdup_n_s8(0)), j, j);  // zero codes: the high half adds 0
  } else if (bits == 4) {
    const uint32_t h = d / 2;
    for (uint32_t c = 0; c < h; c += 8) {
      const uint8x8_t b = vld1_u8(row + c);
      const uint8x16_t u = vcombine_u8(vand_u8(b, vdup_n_u8(15)), vshr_n_u8(b, 4));
      step(vsubq_s8(vreinterpretq_s8_u8(u), vdupq_n_s8(8)), c, h + c);
    }
  } else {
    // 3 bits: sum q * (lo - 4) over the pair planes plus q * 4 * hi over the
    // bit planes (each element once in each).
    const uint32_t qd = d / 4;
    const int8x16_t off = vdupq_n_s8(bits == 3 ? 4 : 2);
    const uint8x8_t m3 = vdup_n_u8(3);
    for (uint32_t c = 0; c < qd; c += 8) {
      const uint8x8_t b = vld1_u8(row + c);
      const uint8x16_t u01 = vcombine_u8(vand_u8(b, m3), vand_u8(vshr_n_u8(b, 2), m3));
      const uint8x16_t u23 = vcombine_u8(vand_u8(vshr_n_u8(b, 4), m3), vshr_n_u8(b, 6));
      step(vsubq_s8(vreinterpretq_s8_u8(u01), off), c, qd + c);
      step(vsubq_s8(vreinterpretq_s8_u8(u23), off), 2 * qd + c, 3 * qd + c);
    }
    if (bits == 3) {
      const uint32_t e = d / 8;
      const uint8_t *hi = row + qd;
      for (uint32_t c = 0; c < e; c += 8) {
        const uint8x8_t b = vld1_u8(hi + c);
        for (int k = 0; k < 8; k += 2) {  // bits k and k + 1 moved to value 4
          const uint8x8_t h0 = vand_u8(vshl_u8(b, vdup_n_s8((int8_t)(2 - k))), vdup_n_u8(4));
          const uint8x8_t h1 = vand_u8(vshl_u8(b, vdup_n_s8((int8_t)(1 - k))), vdup_n_u8(4));
          step(vreinterpretq_s8_u8(vcombine_u8(h0, h1)), (uint32_t)k * e + c, (uint32_t)(k + 1) * e + c);
        }
      }
    }
  }
  for (uint32_t g = 0; g < NH; g++) isum[g] = vaddvq_s32(acc[g]);
}

void isums_n(uint32_t nh, int32_t *isum, const uint8_t *row, const int8_t *q, uint32_t d, uint32_t bits) {
  switch (nh) {
    case 1: isums<1>(isum, row, q, d, bits); break;
    case 2: isums<2>(isum, row, q, d, bits); break;
    case 3: isums<3>(isum, row, q, d, bits); break;
    default: isums<4>(isum, row, q, d, bits); break;
  }
}

}  // namespace

extern "C" void gb_attn_run__dotprod(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count,
                                     uint32_t kbits, uint32_t vbits, uint32_t base) {
  const uint32_t H = st->n_heads, R = st->n_kv_heads, d = st->head_dim, G = H / R;
  if (d > kMaxD) {
    gb_attn_run__generic(st, records, slots, count, kbits, vbits, base);
    return;
  }
  const uint32_t krow = d * kbits / 8, vrow = d * vbits / 8;
  const size_t rec = (size_t)R * (krow + vrow);
  const size_t stride = st->score_stride;
  const bool in_regs = kbits <= 8 && planes_of_8(d, kbits);
  const ValueKind vkind = vbits <= 8 ? kCodes : vbits == 16 ? kHalf : kFloat;
  alignas(16) int8_t kx[kMaxD];           // (d) signed codes of a key row not unpacked in registers
  alignas(16) int8_t vx[kChunk * kMaxD];  // (chunk, d) signed codes of one kv head's value rows
  const uint8_t *vsrc[kChunk];            // (chunk) value row of each record, in vx or in place
  float w[kPass * kChunk];                // (pass heads, chunk) softmax weight x value scale
  for (uint32_t c0 = 0; c0 < count; c0 += kChunk) {
    const uint32_t n = count - c0 < kChunk ? count - c0 : kChunk;
    for (uint32_t t = 0; t < n; t++) {
      const uint8_t *r0 = records + (size_t)(c0 + t) * rec;
      const uint32_t slot = slots[c0 + t];
      for (uint32_t r = 0; r < R; r++) {
        const uint8_t *kr = r0 + (size_t)r * krow;
        float *sc = st->scores + (size_t)r * G * stride + base + c0 + t;
        if (kbits > 8) {
          for (uint32_t g = 0; g < G; g++)
            sc[g * stride] = dot_f(st->q + (size_t)(r * G + g) * d, kr, d, kbits) * st->scale;
          continue;
        }
        const float sk = gb::f16_to_f32(st->scales[(size_t)slot * 2 * R + r]);
        const uint8_t *src = kr;
        uint32_t bits = kbits;
        if (!in_regs) {
          unpack_signed(kx, kr, d, kbits);
          src = reinterpret_cast<const uint8_t *>(kx);
          bits = 8;
        }
        for (uint32_t g0 = 0; g0 < G; g0 += kPass) {
          const uint32_t nh = G - g0 < kPass ? G - g0 : kPass;
          int32_t isum[kPass];
          isums_n(nh, isum, src, st->q8 + (size_t)(r * G + g0) * d, d, bits);
          for (uint32_t i = 0; i < nh; i++) {
            const uint32_t h = r * G + g0 + i;
            sc[(g0 + i) * stride] = ((float)isum[i] * (sk * st->q8_d[h])) * st->scale;
          }
        }
      }
    }
    for (uint32_t r = 0; r < R; r++) {
      for (uint32_t t = 0; t < n; t++) {
        const uint8_t *vr = records + (size_t)(c0 + t) * rec + (size_t)R * krow + (size_t)r * vrow;
        if (vbits < 8) {
          unpack_signed(vx + (size_t)t * d, vr, d, vbits);
          vsrc[t] = reinterpret_cast<const uint8_t *>(vx + (size_t)t * d);
        } else {
          vsrc[t] = vr;
        }
      }
      for (uint32_t g0 = 0; g0 < G; g0 += kPass) {
        const uint32_t nh = G - g0 < kPass ? G - g0 : kPass;
        for (uint32_t i = 0; i < nh; i++) {
          const uint32_t h = r * G + g0 + i;
          const float *s = st->scores + (size_t)h * stride + base + c0;
          float mx = st->m[h];
          for (uint32_t t = 0; t < n; t++) mx = s[t] > mx ? s[t] : mx;
          if (mx > st->m[h]) {  // rescale what was accumulated under a smaller max
            const float f = expf(st->m[h] - mx);
            st->l[h] *= f;
            float *acc = st->acc + (size_t)h * d;
            for (uint32_t j = 0; j < d; j += 4) vst1q_f32(acc + j, vmulq_n_f32(vld1q_f32(acc + j), f));
            st->m[h] = mx;
          }
          float l = st->l[h];
          for (uint32_t t = 0; t < n; t++) {
            const float p = expf(s[t] - st->m[h]);
            l += p;
            w[i * kChunk + t] =
                vbits <= 8 ? p * gb::f16_to_f32(st->scales[(size_t)slots[c0 + t] * 2 * R + R + r]) : p;
          }
          st->l[h] = l;
        }
        float *acc = st->acc + (size_t)(r * G + g0) * d;
        if (vkind == kCodes)
          accumulate_n<kCodes>(nh, acc, vsrc, w, n, d);
        else if (vkind == kHalf)
          accumulate_n<kHalf>(nh, acc, vsrc, w, n, d);
        else
          accumulate_n<kFloat>(nh, acc, vsrc, w, n, d);
      }
    }
  }
}

