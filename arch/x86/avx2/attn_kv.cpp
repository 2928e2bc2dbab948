// AVX2 + FMA + F16C fused attention over packed KV records (layouts in
// kernels.h). Per chunk of 32 records: each key row is unpacked once into
// bytes (nibble / bit-pair / bit planes are contiguous quarters or halves of
// the row, so one shift and mask per plane), dotted with every query head of
// its group by vpmaddubsw (unsigned codes x int8 query; 8-bit keys use the
// sign trick) into an exact int32 sum, and scaled late exactly as the
// generic kernel does, so scores are bit-identical. The softmax weights of
// the chunk come from a vector exp; each value row is widened to f32 once
// and accumulated into every head of its group with FMAs (a different
// rounding than generic's separate multiply and add: within the tests'
// tolerance). Rows whose head_dim is not a multiple of 32 (or more than 64
// query heads) go to the generic kernel. The finish step normalises the output and computes the attention
// mass with the same vector exp.
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "f16.h"
#include "kernels.h"

namespace {

constexpr uint32_t kChunk = 32;

// exp(x) for x <= 0 (Cephes polynomial, relative error ~2e-7).
inline __m256 exp256(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
  const __m256 x2 = _mm256_mul_ps(x, x);
  y = _mm256_fmadd_ps(y, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// A packed row (bits 2, 3, 4) to unsigned codes u[0..d); d % 32 == 0.
inline void unpack_codes(uint8_t *u, const uint8_t *row, uint32_t d, uint32_t bits) {
  const __m128i m3 = _mm_set1_epi8(3), m15 = _mm_set1_epi8(15), one = _mm_set1_epi8(1);
  if (bits == 4) {
    const uint32_t h = d / 2;
    for (uint32_t c = 0; c < h; c += 16) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + c));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(u + c), _mm_and_si128(b, m15));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(u + h + c), _mm_and_si128(_mm_srli_epi16(b, 4), m15));
    }
    return;
  }
  const uint32_t qd = d / 4;  // multiple of 8
  for (uint32_t c = 0; c < qd; c += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + c));
    for (int k = 0; k < 4; k++)
      _mm_storel_epi64(reinterpret_cast<__m128i *>(u + k * qd + c), _mm_and_si128(_mm_srl_epi16(b, _mm_cvtsi32_si128(2 * k)), m3));
  }
  if (bits == 3) {
    const uint32_t e = d / 8;  // multiple of 4
    const uint8_t *hi = row + qd;
    if (e % 8 == 0) {
      for (uint32_t c = 0; c < e; c += 8) {
        const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(hi + c));
        for (int k = 0; k < 8; k++) {
          __m128i *p = reinterpret_cast<__m128i *>(u + k * e + c);
          const __m128i bit = _mm_and_si128(_mm_srl_epi16(b, _mm_cvtsi32_si128(k)), one);
          _mm_storel_epi64(p, _mm_or_si128(_mm_loadl_epi64(p), _mm_slli_epi16(bit, 2)));
        }
      }
    } else {
      for (uint32_t j = 0; j < e; j++)
        for (uint32_t k = 0; k < 8; k++) u[j + k * e] = (uint8_t)(u[j + k * e] | (((hi[j] >> k) & 1) << 2));
    }
  }
}

// int32 dot of unsigned codes u[0..d) with the int8 query; d % 32 == 0.
inline int32_t dot_u8_s8(const uint8_t *u, const int8_t *q, uint32_t d) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc = _mm256_setzero_si256();
  for (uint32_t j = 0; j < d; j += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(u + j));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + j));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  }
  return hsum_i32(acc);
}

// int32 dot of signed int8 keys with the query: |q| x sign(k, q).
inline int32_t dot_s8_s8(const int8_t *k, const int8_t *q, uint32_t d) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc = _mm256_setzero_si256();
  for (uint32_t j = 0; j < d; j += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(k + j));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + j));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(b), _mm256_sign_epi8(a, b)), ones));
  }
  return hsum_i32(acc);
}

inline float dot_f32(const float *q, const uint8_t *k, uint32_t d, uint32_t bits) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  for (uint32_t j = 0; j < d; j += 16) {
    __m256 k0, k1;
    if (bits == 16) {
      k0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(k + 2 * j)));
      k1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(k + 2 * j + 16)));
    } else {
      k0 = _mm256_loadu_ps(reinterpret_cast<const float *>(k + 4 * j));
      k1 = _mm256_loadu_ps(reinterpret_cast<const float *>(k + 4 * j + 32));
    }
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), k0, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 8), k1, a1);
  }
  return hsum(_mm256_add_ps(a0, a1));
}

// A value row widened to f32 (without its scale); d % 32 == 0.
inline void widen_row(float *v, const uint8_t *row, uint32_t d, uint32_t bits, uint8_t *codes) {
  if (bits == 32) {
    memcpy(v, row, (size_t)d * 4);
  } else if (bits == 16) {
    for (uint32_t j = 0; j < d; j += 8)
      _mm256_storeu_ps(v + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * j))));
  } else if (bits == 8) {
    for (uint32_t j = 0; j < d; j += 8)
      _mm256_storeu_ps(v + j, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + j)))));
  } else {
    unpack_codes(codes, row, d, bits);
    const __m256i off = _mm256_set1_epi32(1 << (bits - 1));
    for (uint32_t j = 0; j < d; j += 8) {
      const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(codes + j)));
      _mm256_storeu_ps(v + j, _mm256_cvtepi32_ps(_mm256_sub_epi32(c, off)));
    }
  }
}

}  // namespace

extern "C" void gb_attn_run__avx2(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count,
                                  uint32_t kbits, uint32_t vbits, uint32_t base) {
  const uint32_t H = st->n_heads, R = st->n_kv_heads, d = st->head_dim, G = H / R;
  if (d % 32 != 0 || d > 512 || H > 64) {
    gb_attn_run__generic(st, records, slots, count, kbits, vbits, base);
    return;
  }
  const uint32_t krow = d * kbits / 8, vrow = d * vbits / 8;
  const size_t rec = (size_t)R * (krow + vrow);
  const size_t stride = st->score_stride;
  alignas(32) uint8_t codes[512];
  alignas(32) float vf[512];
  alignas(32) float p[64 * kChunk];  // (H, chunk) softmax weights
  int32_t qsum[64];                   // off x sum(q8) per head
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
            int32_t isum;
            if (kbits == 8) {
              isum = dot_s8_s8(reinterpret_cast<const int8_t *>(kr), q8, d);
            } else {
              isum = dot_u8_s8(codes, q8, d) - qsum[h];
            }
            score = ((float)isum * (sk * st->q8_d[h])) * st->scale;
          } else {
            score = dot_f32(st->q + (size_t)h * d, kr, d, kbits) * st->scale;
          }
          st->scores[(size_t)h * stride + base + c0 + t] = score;
        }
      }
    }
    // Running max and the chunk's weights per head: p[h][t] = exp(s - m).
    for (uint32_t h = 0; h < H; h++) {
      float *s = st->scores + (size_t)h * stride + base + c0;
      float mx = st->m[h];
      for (uint32_t t = 0; t < n; t++) mx = s[t] > mx ? s[t] : mx;
      if (mx > st->m[h]) {
        const float f = expf(st->m[h] - mx);
        st->l[h] *= f;
        float *acc = st->acc + (size_t)h * d;
        const __m256 vfac = _mm256_set1_ps(f);
        for (uint32_t j = 0; j < d; j += 8) _mm256_storeu_ps(acc + j, _mm256_mul_ps(_mm256_loadu_ps(acc + j), vfac));
        st->m[h] = mx;
      }
    }
    // The chunk's softmax weights per head, p = exp(score - m), into l.
    for (uint32_t h = 0; h < H; h++) {
      const float *s = st->scores + (size_t)h * stride + base + c0;
      float *ph = p + (size_t)h * kChunk;
      const __m256 m = _mm256_set1_ps(st->m[h]);
      uint32_t t = 0;
      for (; t + 8 <= n; t += 8) _mm256_storeu_ps(ph + t, exp256(_mm256_sub_ps(_mm256_loadu_ps(s + t), m)));
      for (; t < n; t++) ph[t] = expf(s[t] - st->m[h]);
      float l = st->l[h];
      for (t = 0; t < n; t++) l += ph[t];
      st->l[h] = l;
    }
    // Values: each row widened once, accumulated into its group's heads.
    for (uint32_t t = 0; t < n; t++) {
      const uint8_t *v0 = records + (size_t)(c0 + t) * rec + (size_t)R * krow;
      const uint32_t slot = slots[c0 + t];
      for (uint32_t r = 0; r < R; r++) {
        widen_row(vf, v0 + (size_t)r * vrow, d, vbits, codes);
        const float sv = vbits <= 8 ? gb::f16_to_f32(st->scales[(size_t)slot * 2 * R + R + r]) : 1.0f;
        for (uint32_t g = 0; g < G; g++) {
          const uint32_t h = r * G + g;
          const float pt = p[(size_t)h * kChunk + t];
          const __m256 w = _mm256_set1_ps(vbits <= 8 ? pt * sv : pt);
          float *acc = st->acc + (size_t)h * d;
          for (uint32_t j = 0; j < d; j += 8)
            _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(w, _mm256_loadu_ps(vf + j), _mm256_loadu_ps(acc + j)));
        }
      }
    }
  }
}

extern "C" void gb_attn_finish__avx2(const gb_attn_state *st, uint32_t n, const float *head_w, float *out, float *mass,
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
    const __m256 vm = _mm256_set1_ps(st->m[h]), vinv = _mm256_set1_ps(inv), vw = _mm256_set1_ps(head_w[h]);
    __m256 vsum = _mm256_setzero_ps();
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 pv = _mm256_mul_ps(exp256(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm)), vinv);
      _mm256_storeu_ps(mass + i, _mm256_add_ps(_mm256_loadu_ps(mass + i), pv));
      _mm256_storeu_ps(wmass + i, _mm256_fmadd_ps(vw, pv, _mm256_loadu_ps(wmass + i)));
      vsum = _mm256_add_ps(vsum, pv);
    }
    float sum = hsum(vsum);
    for (; i < n; i++) {
      const float pv = expf(s[i] - st->m[h]) * inv;
      mass[i] += pv;
      wmass[i] += head_w[h] * pv;
      sum += pv;
    }
    head_mean[h] = n ? sum / (float)n : 0.0f;
  }
  const float invH = 1.0f / (float)H;
  for (uint32_t i = 0; i < n; i++) {
    mass[i] *= invH;
    wmass[i] *= invH;
  }
}
