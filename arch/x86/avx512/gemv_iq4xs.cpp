// AVX-512 VNNI GEMV of GGUF's IQ4_XS: arch/x86/iq4xs_gemv.h's driver with
// the codes stored + 128 (1..241, unsigned) and met by vpdpbusd (256-bit,
// AVX-512 VL), four products per int32 lane; 128 * the activation block's
// sum is taken off each sub-block's sum, so the isum is the same exact int32.
#include "x86/iq4xs_gemv.h"

namespace {

struct Dot {
  static constexpr int kOffset = 128;
  static __m256i grid() {
    return _mm256_add_epi8(
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb_gguf::kIq4nlGrid))),
        _mm256_set1_epi8((char)128));
  }
  static __attribute__((always_inline)) inline __m256i dot(__m256i c, __m256i x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), c, x);
  }
};

}  // namespace

extern "C" void gb_iq4xs_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                      size_t row_begin, size_t row_end, size_t cols) {
  gb_iq4xs::gemvm<Dot>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);
}
extern "C" void gb_iq4xs_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                       const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                       size_t row_end, size_t cols) {
  gb_iq4xs::gemvm<Dot>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
