// AVX2 + FMA Gated DeltaNet state update and read-out (kernels.h,
// gb_delta_rule_fn): each row once through the registers for the decay and
// S[j] . k, once for the update and S[j] . q, eight lanes per step; a
// dimension that is not a multiple of 8 finishes its row in scalar code.
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace {
inline float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
}  // namespace

extern "C" void gb_delta_rule__avx2(float *S, const float *k, const float *v, const float *q, float g, float beta, uint32_t d,
                                    float *o) {
  const float decay = expf(g);
  const __m256 vdecay = _mm256_set1_ps(decay);
  const uint32_t d8 = d & ~7u;
  for (uint32_t j = 0; j < d; j++) {
    float *row = S + (size_t)j * d;
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t i = 0; i < d8; i += 8) {
      const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i), vdecay);
      _mm256_storeu_ps(row + i, r);
      acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i), acc);
    }
    float sk = hsum(acc);
    for (uint32_t i = d8; i < d; i++) {
      row[i] *= decay;
      sk += row[i] * k[i];
    }
    const float dj = (v[j] - sk) * beta;
    if (!o) {  // a replay: the update alone
      const __m256 vdj0 = _mm256_set1_ps(dj);
      for (uint32_t i = 0; i < d8; i += 8) _mm256_storeu_ps(row + i, _mm256_fmadd_ps(_mm256_loadu_ps(k + i), vdj0, _mm256_loadu_ps(row + i)));
      for (uint32_t i = d8; i < d; i++) row[i] += k[i] * dj;
      continue;
    }
    const __m256 vdj = _mm256_set1_ps(dj);
    acc = _mm256_setzero_ps();
    for (uint32_t i = 0; i < d8; i += 8) {
      const __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), vdj, _mm256_loadu_ps(row + i));
      _mm256_storeu_ps(row + i, r);
      acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i), acc);
    }
    float sq = hsum(acc);
    for (uint32_t i = d8; i < d; i++) {
      row[i] += k[i] * dj;
      sq += row[i] * q[i];
    }
    o[j] = sq;
  }
}
