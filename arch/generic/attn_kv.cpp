// Generic fused attention over packed KV records (layouts in kernels.h):
// scores, streaming softmax and the value sum read the 2/3/4/8-bit, f16 or
// f32 rows in place, a chunk of records at a time; nothing is dequantized
// into a copy of the cache. For quantized keys the query is used as int8
// (per head) and each score is an exact int32 dot product scaled late, so
// SIMD variants reproduce the scores bit for bit. The finish step turns the
// saved scores of this one query into the attention mass per token (the
// KV pool's importance statistics) while normalising the output.
#include <math.h>
#include <string.h>

#include "../f16.h"
#include "../kernels.h"

namespace {

constexpr uint32_t kChunk = 32;

// One packed row of d elements at `bits` (2, 3, 4, 8) to signed integers.
void unpack_row(int8_t *q, const uint8_t *row, uint32_t d, uint32_t bits) {
  if (bits == 8) {
    memcpy(q, row, d);
  } else if (bits == 4) {
    const uint32_t h = d / 2;
    for (uint32_t j = 0; j < h; j++) {
      q[j] = (int8_t)((row[j] & 15) - 8);
      q[j + h] = (int8_t)((row[j] >> 4) - 8);
    }
  } else if (bits == 3) {
    const uint32_t qd = d / 4, e = d / 8;
    const uint8_t *hi = row + qd;
    for (uint32_t j = 0; j < qd; j++)
      for (uint32_t k = 0; k < 4; k++) q[j + k * qd] = (int8_t)((row[j] >> (2 * k)) & 3);
    for (uint32_t j = 0; j < e; j++)
      for (uint32_t k = 0; k < 8; k++) q[j + k * e] = (int8_t)(q[j + k * e] | (((hi[j] >> k) & 1) << 2));
    for (uint32_t j = 0; j < d; j++) q[j] = (int8_t)(q[j] - 4);
  } else {  // 2
    const uint32_t qd = d / 4;
    for (uint32_t j = 0; j < qd; j++)
      for (uint32_t k = 0; k < 4; k++) q[j + k * qd] = (int8_t)(((row[j] >> (2 * k)) & 3) - 2);
  }
}

inline uint32_t row_bytes(uint32_t d, uint32_t bits) { return d * bits / 8; }

inline float h2f(const uint16_t *p) { return gb::f16_to_f32(*p); }

inline float load_h(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return gb::f16_to_f32(h);
}

inline float load_f(const uint8_t *p) {
  float f;
  memcpy(&f, p, 4);
  return f;
}

}  // namespace

extern "C" void gb_attn_run__generic(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count,
                                     uint32_t kbits, uint32_t vbits, uint32_t base) {
  const uint32_t H = st->n_heads, R = st->n_kv_heads, d = st->head_dim, G = H / R;
  const uint32_t krow = row_bytes(d, kbits), vrow = row_bytes(d, vbits);
  const size_t rec = (size_t)R * (krow + vrow);
  int8_t qk[GB_KV_QUANT_MAX_HEAD_DIM];  // one unpacked row
  for (uint32_t c0 = 0; c0 < count; c0 += kChunk) {
    const uint32_t n = count - c0 < kChunk ? count - c0 : kChunk;
    // Scores of the chunk.
    for (uint32_t t = 0; t < n; t++) {
      const uint8_t *r0 = records + (size_t)(c0 + t) * rec;
      const uint32_t slot = slots[c0 + t];
      for (uint32_t r = 0; r < R; r++) {
        const uint8_t *kr = r0 + (size_t)r * krow;
        if (kbits <= 8) unpack_row(qk, kr, d, kbits);
        const float sk = kbits <= 8 ? h2f(st->scales + (size_t)slot * 2 * R + r) : 0.0f;
        for (uint32_t g = 0; g < G; g++) {
          const uint32_t h = r * G + g;
          float score;
          if (kbits <= 8) {
            const int8_t *q8 = st->q8 + (size_t)h * d;
            int32_t isum = 0;
            for (uint32_t j = 0; j < d; j++) isum += (int32_t)q8[j] * (int32_t)qk[j];
            score = ((float)isum * (sk * st->q8_d[h])) * st->scale;
          } else {
            const float *q = st->q + (size_t)h * d;
            float dot = 0.0f;
            if (kbits == 16)
              for (uint32_t j = 0; j < d; j++) dot += q[j] * load_h(kr + 2 * j);
            else
              for (uint32_t j = 0; j < d; j++) dot += q[j] * load_f(kr + 4 * j);
            score = dot * st->scale;
          }
          st->scores[(size_t)h * st->score_stride + base + c0 + t] = score;
        }
      }
    }
    // Running max: rescale what was accumulated under a smaller one.
    for (uint32_t h = 0; h < H; h++) {
      const float *s = st->scores + (size_t)h * st->score_stride + base + c0;
      float mx = st->m[h];
      for (uint32_t t = 0; t < n; t++) mx = s[t] > mx ? s[t] : mx;
      if (mx > st->m[h]) {
        const float f = expf(st->m[h] - mx);
        st->l[h] *= f;
        float *acc = st->acc + (size_t)h * d;
        for (uint32_t j = 0; j < d; j++) acc[j] *= f;
        st->m[h] = mx;
      }
    }
    // Values of the chunk.
    for (uint32_t t = 0; t < n; t++) {
      const uint8_t *r0 = records + (size_t)(c0 + t) * rec + (size_t)R * krow;
      const uint32_t slot = slots[c0 + t];
      for (uint32_t r = 0; r < R; r++) {
        const uint8_t *vr = r0 + (size_t)r * vrow;
        if (vbits <= 8) unpack_row(qk, vr, d, vbits);
        const float sv = vbits <= 8 ? h2f(st->scales + (size_t)slot * 2 * R + R + r) : 0.0f;
        for (uint32_t g = 0; g < G; g++) {
          const uint32_t h = r * G + g;
          const float p = expf(st->scores[(size_t)h * st->score_stride + base + c0 + t] - st->m[h]);
          st->l[h] += p;
          float *acc = st->acc + (size_t)h * d;
          if (vbits <= 8) {
            const float w = p * sv;
            for (uint32_t j = 0; j < d; j++) acc[j] += w * (float)qk[j];
          } else if (vbits == 16) {
            for (uint32_t j = 0; j < d; j++) acc[j] += p * load_h(vr + 2 * j);
          } else {
            for (uint32_t j = 0; j < d; j++) acc[j] += p * load_f(vr + 4 * j);
          }
        }
      }
    }
  }
}

extern "C" void gb_attn_finish__generic(const gb_attn_state *st, uint32_t n, const float *head_w, float *out, float *mass,
                                        float *wmass, float *head_mean) {
  const uint32_t H = st->n_heads, d = st->head_dim;
  for (uint32_t h = 0; h < H; h++) {
    const float inv = st->l[h] > 0.0f ? 1.0f / st->l[h] : 0.0f;
    for (uint32_t j = 0; j < d; j++) out[(size_t)h * d + j] = st->acc[(size_t)h * d + j] * inv;
  }
  if (!mass) return;
  for (uint32_t i = 0; i < n; i++) mass[i] = wmass[i] = 0.0f;
  for (uint32_t h = 0; h < H; h++) {
    const float inv = st->l[h] > 0.0f ? 1.0f / st->l[h] : 0.0f;
    const float *s = st->scores + (size_t)h * st->score_stride;
    const float w = head_w[h];
    float sum = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
      const float p = expf(s[i] - st->m[h]) * inv;
      mass[i] += p;
      wmass[i] += w * p;
      sum += p;
    }
    head_mean[h] = n ? sum / (float)n : 0.0f;
  }
  const float invH = 1.0f / (float)H;
  for (uint32_t i = 0; i < n; i++) {
    mass[i] *= invH;
    wmass[i] *= invH;
  }
}

extern "C" void gb_kv_dequant__generic(float *out, const uint8_t *records, const uint32_t *slots, const uint16_t *scales,
                                       uint32_t count, uint32_t n_kv_heads, uint32_t head_dim, uint32_t kbits, uint32_t vbits) {
  const uint32_t R = n_kv_heads, d = head_dim;
  const uint32_t krow = row_bytes(d, kbits), vrow = row_bytes(d, vbits);
  const size_t rec = (size_t)R * (krow + vrow);
  int8_t q[GB_KV_QUANT_MAX_HEAD_DIM];
  for (uint32_t t = 0; t < count; t++) {
    const uint8_t *p = records + (size_t)t * rec;
    for (uint32_t kv = 0; kv < 2; kv++) {
      const uint32_t bits = kv ? vbits : kbits, rb = kv ? vrow : krow;
      for (uint32_t r = 0; r < R; r++, p += rb, out += d) {
        if (bits == 32) {
          memcpy(out, p, (size_t)d * 4);
        } else if (bits == 16) {
          for (uint32_t j = 0; j < d; j++) out[j] = load_h(p + 2 * j);
        } else {
          unpack_row(q, p, d, bits);
          const float s = gb::f16_to_f32(scales[(size_t)slots[t] * 2 * R + kv * R + r]);
          for (uint32_t j = 0; j < d; j++) out[j] = s * (float)q[j];
        }
      }
    }
  }
}
