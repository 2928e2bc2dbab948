// nvfp4_scales.h — NVFP4's four UE4M3 group scales of a block decoded in a
// vector, for the x86 kernels (SSE4.1 instructions, used by the AVX2 and
// AVX-512 folders), as gb_iq::nvfp4_d (arch/iquants.h) decodes each: a
// byte's low seven bits shifted into a float's exponent and mantissa with
// the bias moved are (1 + man/8) * 2^(e - 8); exponent 0 is man * 2^-10,
// twice that value less 2^-8 (exact); the byte 0x7f is 0.
#ifndef GEARBX_ARCH_X86_NVFP4_SCALES_H
#define GEARBX_ARCH_X86_NVFP4_SCALES_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

namespace gb_nvfp4 {

inline __m128 scales4(const uint8_t *b) {
  uint32_t w;
  memcpy(&w, b, 4);
  const __m128i u = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)w));
  const __m128 v =
      _mm_castsi128_ps(_mm_add_epi32(_mm_slli_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7f)), 20), _mm_set1_epi32(119 << 23)));
  const __m128 sub = _mm_mul_ps(_mm_sub_ps(v, _mm_set1_ps(0x1p-8f)), _mm_set1_ps(2.0f));
  const __m128i e0 = _mm_cmpeq_epi32(_mm_and_si128(u, _mm_set1_epi32(0x78)), _mm_setzero_si128());
  const __m128 d = _mm_blendv_ps(v, sub, _mm_castsi128_ps(e0));
  return _mm_andnot_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(u, _mm_set1_epi32(0x7f))), d);
}

}  // namespace gb_nvfp4

#endif  // GEARBX_ARCH_X86_NVFP4_SCALES_H
