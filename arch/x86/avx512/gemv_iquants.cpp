// AVX-512 (VNNI) GEMV of GGUF's i-quants: arch/x86/iquant_gemv.h's driver
// with vpdpbusd on |code| and the activation carrying the code's sign (four
// products summed in int32 per lane, no int16 step).
#include "x86/iquant_gemv.h"

namespace {

struct Dot {
  static __attribute__((always_inline)) inline __m256i dot(__m256i c, __m256i x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(c), _mm256_sign_epi8(x, c));
  }
};

}  // namespace

GB_IQUANTS_X86(avx512)
