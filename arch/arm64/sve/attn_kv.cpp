// SVE fused attention over packed KV records (layouts in kernels.h), any
// vector length (128, 256, 512 ... bits).
//
// Vector-length agnostic: every loop steps by svcntb() bytes of a plane (or
// svcntw() columns) under a svwhilelt predicate, so no head_dim (d % 8 == 0)
// needs a scalar tail or a buffer, and nothing past a row or a query is
// read (inactive lanes of a predicated load are not accessed and read as 0).
//
// Scores: a key row is unpacked in registers, one plane a vector at a time
// (one shift and mask per plane), already minus the level's offset, so the
// codes are the signed values of the generic kernel; SDOT (svdot_s32, base
// SVE) multiplies them with the matching q8 bytes of up to four query heads
// of the group, one int32 accumulator each. Lanes past the plane's end hold
// whatever the unpacking left there but meet q8 lanes loaded as 0. The sums
// are exact and reduced with SADDV; the float work is generic's
// ((float)isum * (sk * q8_d)) * scale: scores are bit-identical. f16 / f32
// keys: predicated FMLA over f32 and FADDV (summation order differs from
// generic: tolerance).
//
// Softmax as generic (expf, same max / rescale / sum order per head). Values
// of one kv head are unpacked once per chunk of 32 records into an int8
// buffer (8-bit, f16 and f32 rows are read in place); then for each tile of
// svcntw() columns the accumulators of up to four query heads stay in
// registers while the chunk's records are added with FMLA (fused, unlike
// generic's multiply then add: within the tests' tolerance). Rows are read
// as bytes (LD1B, or LD1SB for codes): no alignment is assumed. The finish
// step is the generic one (scalar work over the scores).
#include <arm_sve.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "f16.h"
#include "kernels.h"

namespace {

constexpr uint32_t kChunk = 32;  // records per softmax step
constexpr uint32_t kPass = 4;    // query heads whose sums / accumulators stay in registers
constexpr uint32_t kMaxD = GB_KV_QUANT_MAX_HEAD_DIM;

// Plane k (0..3) of 2-bit pairs, as unsigned codes.
inline svuint8_t pair_plane(svbool_t pg, svuint8_t b, uint32_t k) {
  return svand_n_u8_x(pg, svlsr_n_u8_x(pg, b, (uint8_t)(2 * k)), 3);
}

// Bit k of each byte, as 0 or 4 (the high bit of a 3-bit code).
inline svint8_t high_bit4(svbool_t pg, svuint8_t b, uint32_t k) {
  return svreinterpret_s8_u8(svlsl_n_u8_x(pg, svand_n_u8_x(pg, svlsr_n_u8_x(pg, b, (uint8_t)k), 1), 2));
}

// isum[g] = sum_j q[g * d + j] * x[j] for g < NH, x the signed codes of the
// packed row (bits 2, 3, 4, 8). One accumulator variable per head.
template <uint32_t NH>
void isums(int32_t *isum, const uint8_t *row, const int8_t *q, uint32_t d, uint32_t bits) {
  svint32_t a0 = svdup_n_s32(0), a1 = a0, a2 = a0, a3 = a0;
  // x: codes of elements o.. under pg (its inactive lanes meet q8 zeros).
  auto step = [&](svbool_t pg, svint8_t x, uint32_t o) {
    a0 = svdot_s32(a0, x, svld1_s8(pg, q + o));
    if (NH > 1) a1 = svdot_s32(a1, x, svld1_s8(pg, q + d + o));
    if (NH > 2) a2 = svdot_s32(a2, x, svld1_s8(pg, q + 2 * d + o));
    if (NH > 3) a3 = svdot_s32(a3, x, svld1_s8(pg, q + 3 * d + o));
  };
  const uint32_t vb = (uint32_t)svcntb();
  if (bits == 8) {
    for (uint32_t j = 0; j < d; j += vb) {
      const svbool_t pg = svwhilelt_b8_u32(j, d);
      step(pg, svld1_s8(pg, reinterpret_cast<const int8_t *>(row) + j), j);
    }
  } else if (bits == 4) {
    const uint32_t h = d / 2;
    for (uint32_t c = 0; c < h; c += vb) {
      const svbool_t pg = svwhilelt_b8_u32(c, h);
      const svuint8_t b = svld1_u8(pg, row + c);
      step(pg, svsub_n_s8_x(pg, svreinterpret_s8_u8(svand_n_u8_x(pg, b, 15)), 8), c);
      step(pg, svsub_n_s8_x(pg, svreinterpret_s8_u8(svlsr_n_u8_x(pg, b, 4)), 8), h + c);
    }
  } else {
    // 3 bits: sum q * (lo - 4) over the pair planes plus q * 4 * hi over the
    // bit planes (each element once in each).
    const uint32_t qd = d / 4;
    const int8_t off = bits == 3 ? 4 : 2;
    for (uint32_t c = 0; c < qd; c += vb) {
      const svbool_t pg = svwhilelt_b8_u32(c, qd);
      const svuint8_t b = svld1_u8(pg, row + c);
      for (uint32_t k = 0; k < 4; k++)
        step(pg, svsub_n_s8_x(pg, svreinterpret_s8_u8(pair_plane(pg, b, k)), off), k * qd + c);
    }
    if (bits == 3) {
      const uint32_t e = d / 8;
      for (uint32_t c = 0; c < e; c += vb) {
        const svbool_t pg = svwhilelt_b8_u32(c, e);
        const svuint8_t b = svld1_u8(pg, row + qd + c);
        for (uint32_t k = 0; k < 8; k++) step(pg, high_bit4(pg, b, k), k * e + c);
      }
    }
  }
  const svbool_t all = svptrue_b32();
  isum[0] = (int32_t)svaddv_s32(all, a0);
  if (NH > 1) isum[1] = (int32_t)svaddv_s32(all, a1);
  if (NH > 2) isum[2] = (int32_t)svaddv_s32(all, a2);
  if (NH > 3) isum[3] = (int32_t)svaddv_s32(all, a3);
}

void isums_n(uint32_t nh, int32_t *isum, const uint8_t *row, const int8_t *q, uint32_t d, uint32_t bits) {
  switch (nh) {
    case 1: isums<1>(isum, row, q, d, bits); break;
    case 2: isums<2>(isum, row, q, d, bits); break;
    case 3: isums<3>(isum, row, q, d, bits); break;
    default: isums<4>(isum, row, q, d, bits); break;
  }
}

// A packed row (bits 2, 3, 4) to its signed codes x[0..d).
void unpack_signed(int8_t *x, const uint8_t *row, uint32_t d, uint32_t bits) {
  const uint32_t vb = (uint32_t)svcntb();
  if (bits == 4) {
    const uint32_t h = d / 2;
    for (uint32_t c = 0; c < h; c += vb) {
      const svbool_t pg = svwhilelt_b8_u32(c, h);
      const svuint8_t b = svld1_u8(pg, row + c);
      svst1_s8(pg, x + c, svsub_n_s8_x(pg, svreinterpret_s8_u8(svand_n_u8_x(pg, b, 15)), 8));
      svst1_s8(pg, x + h + c, svsub_n_s8_x(pg, svreinterpret_s8_u8(svlsr_n_u8_x(pg, b, 4)), 8));
    }
    return;
  }
  const uint32_t qd = d / 4;
  const int8_t off = bits == 3 ? 4 : 2;
  for (uint32_t c = 0; c < qd; c += vb) {
    const svbool_t pg = svwhilelt_b8_u32(c, qd);
    const svuint8_t b = svld1_u8(pg, row + c);
    for (uint32_t k = 0; k < 4; k++)
      svst1_s8(pg, x + k * qd + c, svsub_n_s8_x(pg, svreinterpret_s8_u8(pair_plane(pg, b, k)), off));
  }
  if (bits == 3) {
    const uint32_t e = d / 8;
    for (uint32_t c = 0; c < e; c += vb) {
      const svbool_t pg = svwhilelt_b8_u32(c, e);
      const svuint8_t b = svld1_u8(pg, row + qd + c);
      for (uint32_t k = 0; k < 8; k++) {
        int8_t *p = x + k * e + c;
        svst1_s8(pg, p, svadd_s8_x(pg, svld1_s8(pg, p), high_bit4(pg, b, k)));
      }
    }
  }
}

// svcntw() f16 / f32 elements of a row from element j, predicated by bytes.
inline svfloat32_t load_half(svbool_t pw, const uint8_t *row, uint32_t j, uint32_t d) {
  const svuint8_t b = svld1_u8(svwhilelt_b8_u32(2 * j, 2 * d), row + 2 * j);
  return svcvt_f32_f16_x(pw, svreinterpret_f16_u32(svunpklo_u32(svreinterpret_u16_u8(b))));
}

inline svfloat32_t load_float(const uint8_t *row, uint32_t j, uint32_t d) {
  return svreinterpret_f32_u8(svld1_u8(svwhilelt_b8_u32(4 * j, 4 * d), row + 4 * j));
}

// sum_j q[j] * k[j] for an f16 / f32 key row.
float dot_f(const float *q, const uint8_t *k, uint32_t d, uint32_t bits) {
  svfloat32_t a = svdup_n_f32(0);
  for (uint32_t j = 0; j < d; j += (uint32_t)svcntw()) {
    const svbool_t pw = svwhilelt_b32_u32(j, d);
    const svfloat32_t kv = bits == 16 ? load_half(pw, k, j, d) : load_float(k, j, d);
    a = svmla_f32_m(pw, a, svld1_f32(pw, q + j), kv);
  }
  return svaddv_f32(svptrue_b32(), a);
}

enum ValueKind { kCodes, kHalf, kFloat };  // int8 codes, binary16, f32

// acc[g * d + j] += sum_t w[g * kChunk + t] * v_t[j] for g < NH, t < n:
// v_t is the row at src[t]. Tiles of svcntw() columns; the NH tiles of sums
// stay in registers over the n records (one variable per head: sizeless SVE
// types make no arrays).
template <uint32_t NH, ValueKind K>
void accumulate(float *acc, const uint8_t *const *src, const float *w, uint32_t n, uint32_t d) {
  for (uint32_t j = 0; j < d; j += (uint32_t)svcntw()) {
    const svbool_t pw = svwhilelt_b32_u32(j, d);
    svfloat32_t a0 = svld1_f32(pw, acc + j), a1 = a0, a2 = a0, a3 = a0;
    if (NH > 1) a1 = svld1_f32(pw, acc + d + j);
    if (NH > 2) a2 = svld1_f32(pw, acc + 2 * d + j);
    if (NH > 3) a3 = svld1_f32(pw, acc + 3 * d + j);
    for (uint32_t t = 0; t < n; t++) {
      svfloat32_t x;
      if (K == kCodes)
        x = svcvt_f32_s32_x(pw, svld1sb_s32(pw, reinterpret_cast<const int8_t *>(src[t]) + j));
      else if (K == kHalf)
        x = load_half(pw, src[t], j, d);
      else
        x = load_float(src[t], j, d);
      a0 = svmla_n_f32_x(pw, a0, x, w[t]);
      if (NH > 1) a1 = svmla_n_f32_x(pw, a1, x, w[kChunk + t]);
      if (NH > 2) a2 = svmla_n_f32_x(pw, a2, x, w[2 * kChunk + t]);
      if (NH > 3) a3 = svmla_n_f32_x(pw, a3, x, w[3 * kChunk + t]);
    }
    svst1_f32(pw, acc + j, a0);
    if (NH > 1) svst1_f32(pw, acc + d + j, a1);
    if (NH > 2) svst1_f32(pw, acc + 2 * d + j, a2);
    if (NH > 3) svst1_f32(pw, acc + 3 * d + j, a3);
  }
}

template <ValueKind K>
void accumulate_n(uint32_t nh, float *acc, const uint8_t *const *src, const float *w, uint32_t n, uint32_t d) {
  switch (nh) {
    case 1: accumulate<1, K>(acc, src, w, n, d); break;
    case 2: accumulate<2, K>(acc, src, w, n, d); break;
    case 3: accumulate<3, K>(acc, src, w, n, d); break;
    default: accumulate<4, K>(acc, src, w, n, d); break;
  }
}

}  // namespace

extern "C" void gb_attn_run__sve(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count,
                                 uint32_t kbits, uint32_t vbits, uint32_t base) {
  const uint32_t H = st->n_heads, R = st->n_kv_heads, d = st->head_dim, G = H / R;
  if (d > kMaxD) {
    gb_attn_run__generic(st, records, slots, count, kbits, vbits, base);
    return;
  }
  const uint32_t krow = d * kbits / 8, vrow = d * vbits / 8;
  const size_t rec = (size_t)R * (krow + vrow);
  const size_t stride = st->score_stride;
  const ValueKind vkind = vbits <= 8 ? kCodes : vbits == 16 ? kHalf : kFloat;
  int8_t vx[kChunk * kMaxD];    // (chunk, d) signed codes of one kv head's value rows
  const uint8_t *vsrc[kChunk];  // (chunk) value row of each record, in vx or in place
  float w[kPass * kChunk];      // (pass heads, chunk) softmax weight x value scale
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
        for (uint32_t g0 = 0; g0 < G; g0 += kPass) {
          const uint32_t nh = G - g0 < kPass ? G - g0 : kPass;
          int32_t isum[kPass];
          isums_n(nh, isum, kr, st->q8 + (size_t)(r * G + g0) * d, d, kbits);
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
            for (uint32_t j = 0; j < d; j += (uint32_t)svcntw()) {
              const svbool_t pw = svwhilelt_b32_u32(j, d);
              svst1_f32(pw, acc + j, svmul_n_f32_x(pw, svld1_f32(pw, acc + j), f));
            }
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

