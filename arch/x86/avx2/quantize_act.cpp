// AVX2 activation quantizer, bit-identical to the generic one: per 32
// values amax = max |x|, d = amax / 127, id = 1 / d (0 when d is 0),
// q = round-half-away-from-zero(x * id). The rounding is done exactly:
// t = trunc(|v|), and |v| - t (exact below 2^23) >= 0.5 adds one; the sign
// is put back before the (then exact) conversion to int32.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

namespace {

inline __m256i round_away(__m256 v, __m256 id) {
  const __m256 signbit = _mm256_set1_ps(-0.0f);
  const __m256 p = _mm256_mul_ps(v, id);
  const __m256 a = _mm256_andnot_ps(signbit, p);
  const __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(a, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                  _mm256_set1_ps(1.0f));
  const __m256 r = _mm256_or_ps(_mm256_add_ps(t, up), _mm256_and_ps(signbit, p));
  // NaN (an inf input times id = 0) gives 0, as the generic cast does on x86.
  return _mm256_cvttps_epi32(_mm256_and_ps(r, _mm256_cmp_ps(p, p, _CMP_ORD_Q)));
}

inline void quantize_block(gb_q8x_block *out, const float *x) {
  const __m256 signbit = _mm256_set1_ps(-0.0f);
  const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
  const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
  // vmaxps returns its second operand when either is NaN: NaNs are skipped,
  // as in generic's `a > amax ? a : amax`.
  __m256 m = _mm256_max_ps(_mm256_andnot_ps(signbit, v0), _mm256_setzero_ps());
  m = _mm256_max_ps(_mm256_andnot_ps(signbit, v1), m);
  m = _mm256_max_ps(_mm256_andnot_ps(signbit, v2), m);
  m = _mm256_max_ps(_mm256_andnot_ps(signbit, v3), m);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  const float amax = _mm_cvtss_f32(m4);
  const float d = amax / 127.0f;
  const float idf = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 id = _mm256_set1_ps(idf);
  const __m256i i0 = round_away(v0, id), i1 = round_away(v1, id);
  const __m256i i2 = round_away(v2, id), i3 = round_away(v3, id);
  // packs work within 128-bit lanes: bytes come out as 4-value groups
  // 0,2,4,6 | 1,3,5,7 of the 8 groups; the permute puts them in order.
  const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  const __m256i q = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  out->d = d;
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(out->qs), q);
  // sum of the 32 int8 values: pairs to int16 (x * 1), then to int32.
  const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
  const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  out->sum = _mm_cvtsi128_si32(s4);
}

}  // namespace

extern "C" void gb_q8x_quantize__avx2(gb_q8x_block *out, const float *x, size_t n) {
  size_t b = 0;
  for (; (b + 1) * 32 <= n; b++) quantize_block(out + b, x + b * 32);
  if (b * 32 < n) {
    float v[32] = {0};
    memcpy(v, x + b * 32, (n - b * 32) * sizeof(float));
    quantize_block(out + b, v);
  }
}
