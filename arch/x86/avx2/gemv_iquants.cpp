// AVX2 GEMV of GGUF's i-quants: arch/x86/iquant_gemv.h's driver with the
// signed codes met through vpmaddubsw on |code|, the activation carrying the
// code's sign (pairs <= 2 * 62 * 128: exact in int16), and vpmaddwd by ones.
#include "x86/iquant_gemv.h"

namespace {

struct Dot {
  static __attribute__((always_inline)) inline __m256i dot(__m256i c, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(x, c)), _mm256_set1_epi16(1));
  }
};

}  // namespace

GB_IQUANTS_X86(avx2)
