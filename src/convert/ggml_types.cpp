// ggml_types.cpp — dequantization of every GGUF tensor type the importer
// reads. Each function decodes whole blocks in ggml's element order; the
// arithmetic (which products are formed first, in f32, no fused
// multiply-add: this file is compiled with -ffp-contract=off) is the one that
// reproduces ggml's reference decoder bit for bit.
#include "ggml_types.h"

#include <string.h>

#include "bytes.h"
#include "f16.h"

namespace gb {
namespace {

constexpr uint32_t kQK = 32;    // values per block of the legacy types
constexpr uint32_t kQKK = 256;  // values per super-block of the K-quants

inline float h(const uint8_t *p) { return f16_to_f32(ld_u16(p)); }

// Q4_0: f16 d, 16 bytes of nibbles; value j = d * (low nibble of byte j - 8),
// value j + 16 = d * (high nibble - 8).
void dq_q4_0(const uint8_t *b, float *y) {
  const float d = h(b);
  for (uint32_t j = 0; j < 16; j++) {
    y[j] = (float)((int)(b[2 + j] & 0x0F) - 8) * d;
    y[j + 16] = (float)((int)(b[2 + j] >> 4) - 8) * d;
  }
}

// Q4_1: f16 d, f16 m, 16 bytes of nibbles; value = nibble * d + m.
void dq_q4_1(const uint8_t *b, float *y) {
  const float d = h(b), m = h(b + 2);
  for (uint32_t j = 0; j < 16; j++) {
    y[j] = (float)(b[4 + j] & 0x0F) * d + m;
    y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
  }
}

// Q5_0: f16 d, u32 of fifth bits (bit j for value j), 16 bytes of nibbles;
// value = (nibble | fifth bit << 4) - 16, times d.
void dq_q5_0(const uint8_t *b, float *y) {
  const float d = h(b);
  const uint32_t qh = ld_u32(b + 2);
  for (uint32_t j = 0; j < 16; j++) {
    const int x0 = (int)((b[6 + j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
    const int x1 = (int)((b[6 + j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
    y[j] = (float)x0 * d;
    y[j + 16] = (float)x1 * d;
  }
}

// Q5_1: f16 d, f16 m, u32 of fifth bits, 16 bytes of nibbles;
// value = (nibble | fifth bit << 4) * d + m.
void dq_q5_1(const uint8_t *b, float *y) {
  const float d = h(b), m = h(b + 2);
  const uint32_t qh = ld_u32(b + 4);
  for (uint32_t j = 0; j < 16; j++) {
    const uint32_t x0 = (b[8 + j] & 0x0F) | (((qh >> j) << 4) & 0x10);
    const uint32_t x1 = (b[8 + j] >> 4) | ((qh >> (j + 12)) & 0x10);
    y[j] = (float)x0 * d + m;
    y[j + 16] = (float)x1 * d + m;
  }
}

// Q8_0: f16 d, 32 int8; value = q * d.
void dq_q8_0(const uint8_t *b, float *y) {
  const float d = h(b);
  for (uint32_t j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

// IQ4_NL: f16 d, 16 bytes of nibbles indexing a fixed non-uniform grid.
const int8_t kIq4nlGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
void dq_iq4_nl(const uint8_t *b, float *y) {
  const float d = h(b);
  for (uint32_t j = 0; j < 16; j++) {
    y[j] = d * (float)kIq4nlGrid[b[2 + j] & 0x0F];
    y[j + 16] = d * (float)kIq4nlGrid[b[2 + j] >> 4];
  }
}

// Q2_K (84 bytes per 256): u8 scales[16] (low nibble: scale, high: min, of
// each 16 values), u8 qs[64] (2-bit codes), f16 d, f16 dmin.
// value = d * scale * code - dmin * min.
void dq_q2_k(const uint8_t *b, float *y) {
  const uint8_t *sc = b, *q = b + 16;
  const float d = h(b + 80), dmin = h(b + 82);
  uint32_t is = 0;
  for (uint32_t n = 0; n < kQKK; n += 128) {
    for (uint32_t shift = 0; shift < 8; shift += 2) {
      for (uint32_t half = 0; half < 2; half++) {
        const uint8_t s = sc[is++];
        const float dl = d * (float)(s & 0x0F), ml = dmin * (float)(s >> 4);
        for (uint32_t l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

// Q3_K (110 bytes per 256): u8 hmask[32] (third bits), u8 qs[64] (low two
// bits), 12 bytes of sixteen 6-bit scales, f16 d.
// value = d * (scale - 32) * (code - (third bit ? 0 : 4)).
void dq_q3_k(const uint8_t *b, float *y) {
  const uint8_t *hm = b, *q = b + 32;
  const float d = h(b + 108);
  // Scales: the low 4 bits of scale i are nibble i of bytes 0..7 (scales
  // 0..7 low nibbles, 8..15 high nibbles), the high 2 bits come from bytes
  // 8..11, two bits per scale.
  const uint8_t *s = b + 96;
  int8_t scales[16];
  for (uint32_t i = 0; i < 16; i++) {
    const uint32_t lo = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
    const uint32_t hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    scales[i] = (int8_t)(lo | (hi << 4));
  }
  uint32_t is = 0;
  uint8_t m = 1;
  for (uint32_t n = 0; n < kQKK; n += 128) {
    for (uint32_t shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
      for (uint32_t half = 0; half < 2; half++) {
        const float dl = d * (float)(scales[is++] - 32);
        for (uint32_t l = 0; l < 16; l++) {
          const uint32_t k = l + 16 * half;
          *y++ = dl * (float)((int)((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
        }
      }
    }
    q += 32;
  }
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block
// from its 12 scale bytes.
inline void scale_min_k4(uint32_t j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K (144 bytes per 256): f16 d, f16 dmin, 12 scale bytes (eight 6-bit
// scales and mins), u8 qs[128]; sub-blocks of 32 values;
// value = d * scale * nibble - dmin * min.
void dq_q4_k(const uint8_t *b, float *y) {
  const float d = h(b), dmin = h(b + 2);
  const uint8_t *scales = b + 4, *q = b + 16;
  for (uint32_t j = 0, is = 0; j < kQKK; j += 64, is += 2, q += 32) {
    uint8_t sc, mn;
    scale_min_k4(is, scales, &sc, &mn);
    const float d1 = d * (float)sc, m1 = dmin * (float)mn;
    scale_min_k4(is + 1, scales, &sc, &mn);
    const float d2 = d * (float)sc, m2 = dmin * (float)mn;
    for (uint32_t l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0x0F) - m1;
    for (uint32_t l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
  }
}

// Q5_K (176 bytes per 256): as Q4_K plus u8 qh[32] of fifth bits (bit 2k of
// byte l for value l of sub-block pair k's first half, bit 2k+1 for the
// second).
void dq_q5_k(const uint8_t *b, float *y) {
  const float d = h(b), dmin = h(b + 2);
  const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (uint32_t j = 0, is = 0; j < kQKK; j += 64, is += 2, ql += 32) {
    uint8_t sc, mn;
    scale_min_k4(is, scales, &sc, &mn);
    const float d1 = d * (float)sc, m1 = dmin * (float)mn;
    scale_min_k4(is + 1, scales, &sc, &mn);
    const float d2 = d * (float)sc, m2 = dmin * (float)mn;
    for (uint32_t l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (uint32_t l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    u1 = (uint8_t)(u1 << 2);
    u2 = (uint8_t)(u2 << 2);
  }
}

// Q6_K (210 bytes per 256): u8 ql[128] (low 4 bits), u8 qh[64] (high 2
// bits), int8 scales[16] (one per 16 values), f16 d;
// value = d * scale * (code - 32).
void dq_q6_k(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  const float d = h(b + 208);
  for (uint32_t n = 0; n < kQKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (uint32_t l = 0; l < 32; l++) {
      const uint32_t is = l / 16;
      const int q1 = (int)((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = (int)((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * (float)sc[is] * (float)q1;
      y[l + 32] = d * (float)sc[is + 2] * (float)q2;
      y[l + 64] = d * (float)sc[is + 4] * (float)q3;
      y[l + 96] = d * (float)sc[is + 6] * (float)q4;
    }
  }
}

}  // namespace

GgmlBlock ggml_block(uint32_t type) {
  switch (type) {
    case kGgmlF32: return {1, 4};
    case kGgmlF16: return {1, 2};
    case kGgmlBF16: return {1, 2};
    case kGgmlQ4_0: return {kQK, 18};
    case kGgmlQ4_1: return {kQK, 20};
    case kGgmlQ5_0: return {kQK, 22};
    case kGgmlQ5_1: return {kQK, 24};
    case kGgmlQ8_0: return {kQK, 34};
    case kGgmlIQ4_NL: return {kQK, 18};
    case kGgmlQ2_K: return {kQKK, 84};
    case kGgmlQ3_K: return {kQKK, 110};
    case kGgmlQ4_K: return {kQKK, 144};
    case kGgmlQ5_K: return {kQKK, 176};
    case kGgmlQ6_K: return {kQKK, 210};
    default: return {0, 0};
  }
}

const char *ggml_type_name(uint32_t type) {
  static const char *const names[] = {"F32",  "F16",  "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
                                      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
                                      "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
                                      "IQ1_M", "BF16"};
  return type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

const char *ggml_supported_type_names() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL";
}

bool ggml_row_bytes(uint32_t type, uint64_t cols, uint64_t *out) {
  const GgmlBlock b = ggml_block(type);
  if (b.block == 0 || cols % b.block != 0) return false;
  *out = cols / b.block * b.bytes;
  return true;
}

void ggml_dequantize_row(uint32_t type, const uint8_t *src, float *dst, size_t cols) {
  switch (type) {
    case kGgmlF32: memcpy(dst, src, cols * 4); return;
    case kGgmlF16:
      for (size_t i = 0; i < cols; i++) dst[i] = f16_to_f32(ld_u16(src + 2 * i));
      return;
    case kGgmlBF16:
      for (size_t i = 0; i < cols; i++) {
        const uint32_t u = (uint32_t)ld_u16(src + 2 * i) << 16;
        memcpy(dst + i, &u, 4);
      }
      return;
    default: break;
  }
  void (*fn)(const uint8_t *, float *) = nullptr;
  switch (type) {
    case kGgmlQ4_0: fn = dq_q4_0; break;
    case kGgmlQ4_1: fn = dq_q4_1; break;
    case kGgmlQ5_0: fn = dq_q5_0; break;
    case kGgmlQ5_1: fn = dq_q5_1; break;
    case kGgmlQ8_0: fn = dq_q8_0; break;
    case kGgmlIQ4_NL: fn = dq_iq4_nl; break;
    case kGgmlQ2_K: fn = dq_q2_k; break;
    case kGgmlQ3_K: fn = dq_q3_k; break;
    case kGgmlQ4_K: fn = dq_q4_k; break;
    case kGgmlQ5_K: fn = dq_q5_k; break;
    case kGgmlQ6_K: fn = dq_q6_k; break;
    default: return;
  }
  const GgmlBlock blk = ggml_block(type);
  for (size_t i = 0; i < cols / blk.block; i++) fn(src + i * blk.bytes, dst + i * blk.block);
}

}  // namespace gb
