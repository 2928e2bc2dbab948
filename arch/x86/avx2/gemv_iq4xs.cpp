// AVX2 GEMV of GGUF's IQ4_XS: arch/x86/iq4xs_gemv.h's driver with the
// signed codes met through vpmaddubsw on |code|, the activation carrying the
// code's sign (pairs <= 2 * 127 * 128: exact in int16), and vpmaddwd by
// ones.
#include "x86/iq4xs_gemv.h"

namespace {

struct Dot {
  static __m256i grid() {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb_gguf::kIq4nlGrid)));
  }
  static __attribute__((always_inline)) inline __m256i dot(__m256i c, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(x, c)), _mm256_set1_epi16(1));
  }
};

}  // namespace

extern "C" void gb_iq4xs_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                    size_t row_end, size_t cols) {
  gb_iq4xs::gemvm<Dot>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);
}
extern "C" void gb_iq4xs_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                     size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gb_iq4xs::gemvm<Dot>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
