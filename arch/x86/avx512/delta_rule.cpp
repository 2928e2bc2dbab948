// AVX-512 Gated DeltaNet state update and read-out (kernels.h,
// gb_delta_rule_fn): the AVX2 kernel's two passes per row at sixteen lanes;
// a dimension that is not a multiple of 16 finishes its row in scalar code.
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace {
// The sixteen lanes summed as 256-bit halves, then AVX2's tree (GCC 12 warns
// of an uninitialized value inside _mm512_reduce_add_ps at -Werror).
inline float hsum16(__m512 a) {
  alignas(64) float t[16];
  _mm512_store_ps(t, a);
  const __m256 h = _mm256_add_ps(_mm256_load_ps(t), _mm256_load_ps(t + 8));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
}  // namespace

extern "C" void gb_delta_rule__avx512(float *S, const float *k, const float *v, const float *q, float g, float beta, uint32_t d,
                                      float *o) {
  const float decay = expf(g);
  const __m512 vdecay = _mm512_set1_ps(decay);
  const uint32_t d16 = d & ~15u;
  for (uint32_t j = 0; j < d; j++) {
    float *row = S + (size_t)j * d;
    __m512 acc = _mm512_setzero_ps();
    for (uint32_t i = 0; i < d16; i += 16) {
      const __m512 r = _mm512_mul_ps(_mm512_loadu_ps(row + i), vdecay);
      _mm512_storeu_ps(row + i, r);
      acc = _mm512_fmadd_ps(r, _mm512_loadu_ps(k + i), acc);
    }
    float sk = hsum16(acc);
    for (uint32_t i = d16; i < d; i++) {
      row[i] *= decay;
      sk += row[i] * k[i];
    }
    const float dj = (v[j] - sk) * beta;
    if (!o) {  // a replay: the update alone
      const __m512 vdj0 = _mm512_set1_ps(dj);
      for (uint32_t i = 0; i < d16; i += 16) _mm512_storeu_ps(row + i, _mm512_fmadd_ps(_mm512_loadu_ps(k + i), vdj0, _mm512_loadu_ps(row + i)));
      for (uint32_t i = d16; i < d; i++) row[i] += k[i] * dj;
      continue;
    }
    const __m512 vdj = _mm512_set1_ps(dj);
    acc = _mm512_setzero_ps();
    for (uint32_t i = 0; i < d16; i += 16) {
      const __m512 r = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), vdj, _mm512_loadu_ps(row + i));
      _mm512_storeu_ps(row + i, r);
      acc = _mm512_fmadd_ps(r, _mm512_loadu_ps(q + i), acc);
    }
    float sq = hsum16(acc);
    for (uint32_t i = d16; i < d; i++) {
      row[i] += k[i] * dj;
      sq += row[i] * q[i];
    }
    o[j] = sq;
  }
}
