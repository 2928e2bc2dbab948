// ARMv8.6-A I8MM fused attention over packed KV records (layouts in
// kernels.h).
//
// Scores with SMMLA: it multiplies a 2x8 int8 matrix A by the transpose of
// a 2x8 matrix B into a 2x2 int32 tile [a0.b0, a0.b1, a1.b0, a1.b1]. A holds
// 8 q8 values of two query heads of the group, B the 8 matching codes of
// two records' key rows (the two rows' packed bytes are loaded into one
// 16-byte register, so each plane costs one shift and mask for both
// records), so one instruction gives 2 heads x 2 records. Up to four head
// pairs share one unpacking of a record pair. An odd last head or record is
// paired with itself (with one query head per group half of each tile is
// a duplicate: no worse than SDOT). Codes are unpacked minus the level's
// offset, so the sums are the generic kernel's exact int32 sums and the
// float work is generic's ((float)isum * (sk * q8_d)) * scale: scores are
// bit-identical. Rows whose planes are not a multiple of 8 bytes (4 bits:
// d % 16, 2 bits: d % 32, 3 bits: d % 64) are first unpacked into buffers,
// then summed as 8-bit rows (any d % 8 == 0). Only NEON and I8MM
// instructions are used (the requirement is GB_ISA_NEON | GB_ISA_I8MM: no
// SDOT although the folder's flags allow it). f16 / f32 keys: FMLA over f32
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
// accumulation are shared with the dotprod kernel (attn_common.h,
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

constexpr uint32_t kPairs = 4;   // query head pairs whose sums stay in registers
constexpr uint32_t kPass = 4;    // query heads whose value accumulators stay in registers
constexpr uint32_t kMaxD = GB_KV_QUANT_MAX_HEAD_DIM;

// Exact sums of NP head pairs against two key rows row0, row1 (bits 2, 3, 4
// with planes_of_8, or 8 with any d % 8 == 0): out[p] = [qa.x0, qa.x1,
// qb.x0, qb.x1] with qa = qa_[p], qb = qb_[p] and x0, x1 the rows' signed
// codes.
template <uint32_t NP>
void isums(int32x4_t *out, const uint8_t *row0, const uint8_t *row1, const int8_t *const *qa,
           const int8_t *const *qb, uint32_t d, uint32_t bits) {
  int32x4_t acc[NP];
  for (uint32_t p = 0; p < NP; p++) acc[p] = vdupq_n_s32(0);
  // x: codes of elements o..o+7 of row0 (low half) and of row1 (high half).
  auto step = [&](int8x16_t x, uint32_t o) {
    for (uint32_t p = 0; p < NP; p++) acc[p] = vmmlaq_s32(acc[p], vcombine_s8(vld1_s8(qa[p] + o), vld1_s8(qb[p] + o)), x);
  };
  // Bytes c..c+7 of both rows' plane at byte offset `at`.
  auto load2 = [&](uint32_t at) { return vcombine_u8(vld1_u8(row0 + at), vld1_u8(row1 + at)); };
  if (bits == 8) {
    for (uint32_t j = 0; j < d; j += 8) step(vreinterpretq_s8_u8(load2(j)), j);
  } else if (bits == 4) {
    const uint32_t h = d / 2;
    const int8x16_t off = vdupq_n_s8(8);
    for (uint32_t c = 0; c < h; c += 8) {
      const uint8x16_t b = load2(c);
      step(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15))), off), c);
      step(vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), off), h + c);
    }
  } else {
    // 3 bits: sum q * (lo - 4) over the pair planes plus q * 4 * hi over the
    // bit planes (each element once in each).
    const uint32_t qd = d / 4;
    const int8x16_t off = vdupq_n_s8(bits == 3 ? 4 : 2);
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (uint32_t c = 0; c < qd; c += 8) {
      const uint8x16_t b = load2(c);
      step(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, m3)), off), c);
      step(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(b, 2), m3)), off), qd + c);
      step(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(b, 4), m3)), off), 2 * qd + c);
      step(vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 6)), off), 3 * qd + c);
    }
    if (bits == 3) {
      const uint32_t e = d / 8;
      for (uint32_t c = 0; c < e; c += 8) {
        const uint8x16_t b = load2(qd + c);
        for (int k = 0; k < 8; k++)  // bit k moved to value 4
          step(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b, vdupq_n_s8((int8_t)(2 - k))), vdupq_n_u8(4))), (uint32_t)k * e + c);
      }
    }
  }
  for (uint32_t p = 0; p < NP; p++) out[p] = acc[p];
}

void isums_n(uint32_t np, int32x4_t *out, const uint8_t *row0, const uint8_t *row1, const int8_t *const *qa,
             const int8_t *const *qb, uint32_t d, uint32_t bits) {
  switch (np) {
    case 1: isums<1>(out, row0, row1, qa, qb, d, bits); break;
    case 2: isums<2>(out, row0, row1, qa, qb, d, bits); break;
    case 3: isums<3>(out, row0, row1, qa, qb, d, bits); break;
    default: isums<4>(out, row0, row1, qa, qb, d, bits); break;
  }
}

}  // namespace

extern "C" void gb_attn_run__i8mm(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count,
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
  alignas(16) int8_t kx[2 * kMaxD];       // (2, d) signed codes of key rows not unpacked in registers
  alignas(16) int8_t vx[kChunk * kMaxD];  // (chunk, d) signed codes of one kv head's value rows
  const uint8_t *vsrc[kChunk];            // (chunk) value row of each record, in vx or in place
  float w[kPass * kChunk];                // (pass heads, chunk) softmax weight x value scale
  for (uint32_t c0 = 0; c0 < count; c0 += kChunk) {
    const uint32_t n = count - c0 < kChunk ? count - c0 : kChunk;
    if (kbits > 8) {
      for (uint32_t t = 0; t < n; t++)
        for (uint32_t h = 0; h < H; h++) {
          const uint8_t *kr = records + (size_t)(c0 + t) * rec + (size_t)(h / G) * krow;
          st->scores[(size_t)h * stride + base + c0 + t] = dot_f(st->q + (size_t)h * d, kr, d, kbits) * st->scale;
        }
    } else {
      for (uint32_t t = 0; t < n; t += 2) {
        const uint32_t t1 = t + 1 < n ? t + 1 : t;  // an odd last record pairs with itself
        for (uint32_t r = 0; r < R; r++) {
          const uint8_t *k0 = records + (size_t)(c0 + t) * rec + (size_t)r * krow;
          const uint8_t *k1 = records + (size_t)(c0 + t1) * rec + (size_t)r * krow;
          uint32_t bits = kbits;
          if (!in_regs) {
            unpack_signed(kx, k0, d, kbits);
            unpack_signed(kx + kMaxD, k1, d, kbits);
            k0 = reinterpret_cast<const uint8_t *>(kx);
            k1 = reinterpret_cast<const uint8_t *>(kx + kMaxD);
            bits = 8;
          }
          const float sk[2] = {gb::f16_to_f32(st->scales[(size_t)slots[c0 + t] * 2 * R + r]),
                               gb::f16_to_f32(st->scales[(size_t)slots[c0 + t1] * 2 * R + r])};
          for (uint32_t g0 = 0; g0 < G; g0 += 2 * kPairs) {
            const uint32_t nh = G - g0 < 2 * kPairs ? G - g0 : 2 * kPairs, np = (nh + 1) / 2;
            const int8_t *qa[kPairs], *qb[kPairs];
            for (uint32_t p = 0; p < np; p++) {
              qa[p] = st->q8 + (size_t)(r * G + g0 + 2 * p) * d;
              qb[p] = 2 * p + 1 < nh ? qa[p] + d : qa[p];  // an odd last head pairs with itself
            }
            int32x4_t tile[kPairs];
            isums_n(np, tile, k0, k1, qa, qb, d, bits);
            for (uint32_t i = 0; i < nh; i++) {
              const uint32_t h = r * G + g0 + i;
              int32_t isum[4];
              vst1q_s32(isum, tile[i / 2]);
              float *sc = st->scores + (size_t)h * stride + base + c0 + t;
              const int32_t *pair = isum + 2 * (i % 2);  // [this head . record t, . record t1]
              sc[0] = ((float)pair[0] * (sk[0] * st->q8_d[h])) * st->scale;
              if (t1 != t) sc[1] = ((float)pair[1] * (sk[1] * st->q8_d[h])) * st->scale;
            }
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

