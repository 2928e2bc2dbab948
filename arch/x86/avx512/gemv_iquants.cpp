// AVX-512 (VNNI) GEMV of GGUF's i-quants.
//
// iq2xxs, iq2xs, iq2s, iq3xxs and iq3s: a 32-weight sub-block becomes its
// 32 magnitudes (unsigned bytes) by one gather of its codebook rows (four
// 8-byte rows, or eight 4-byte rows, indexes formed in a vector) and a
// 32-bit mask of its negative weights (the format's sign bytes as they are,
// or its four 7-bit sign indexes with their parity bit as the eighth). The
// activations are negated under the mask (one masked subtract) and meet the
// magnitudes in vpdpbusd: the same int32 sums as the code-times-activation
// products of generic, four per lane, lanes 0..3 holding weights 0..15 and
// lanes 4..7 weights 16..31. Then, as arch/x86/iquant_gemv.h (which the
// AVX2 folder and iq1s / iq1m here still use, their codes being an offset
// grid rather than signed magnitudes): one vpmulld by the two halves' odd
// scales, t += xd * (float)(sc * isum) per activation block and acc += dq *
// t per super-block, fused, the eight lanes added at the end — generic's
// arithmetic with the float part reassociated (the tests' tolerance).
//
// Against decoding each sub-block into signed codes with scalar table
// lookups (the iquant_gemv.h driver), on this host (Zen 5, one thread,
// 4096 x 4096 in cache, three interleaved runs, ms): iq3s 3.3-5.5 ->
// 1.9-2.4, iq2s 2.6-3.6 -> 1.5-2.2, iq2xs 2.4-3.4 -> 2.0-2.8, iq3xxs and
// iq2xxs 5-15 % faster. The gathers are most of what is left: with them
// replaced by a constant, iq3s ran at a third of the time. Eight scalar
// lookups per sub-block instead of the gather ran slower, one 16-element
// gather for two sub-blocks no faster. Against generic both drivers
// are off by rounding alone (random rows, 4096 x 4096: 2.2e-7 rms relative,
// iq2xxs and iq3s); they differ from each other by as much. Splitting the
// sub-blocks' terms between two accumulators gained nothing measurable and
// moved the NLL of the IQ1_S fixture (whose mix holds iq2xxs matrices) by
// 8e-4, so each position keeps one chain.
//
// The gemv is the gemvm with one position, and every position goes through
// the same operations: the gemvm is bit-identical per position to the gemv.
// Rows are read one at a time, each super-block asking for the bytes
// kPrefetch ahead (past the row: the next rows, or bytes past the matrix,
// which a prefetch may name without faulting).
#include "x86/iquant_gemv.h"

namespace {

using gb_iq::ld16;
using gb_iq::ld32;

// A 7-bit sign index with its parity as the eighth bit (an even number of
// negative weights per 8-weight group): the mask byte of the group.
struct Parity7 {
  uint8_t v[128];
};
constexpr Parity7 parity7() {
  Parity7 t{};
  for (int i = 0; i < 128; i++) {
    int p = 0;
    for (int j = 0; j < 7; j++) p ^= (i >> j) & 1;
    t.v[i] = (uint8_t)(i | p << 7);
  }
  return t;
}
constexpr Parity7 kParity7 = parity7();

// Four 7-bit sign indexes (bits 0..27 of w) as a 32-bit mask.
inline uint32_t signs7x4(uint32_t w) {
  return (uint32_t)kParity7.v[w & 127] | (uint32_t)kParity7.v[(w >> 7) & 127] << 8 |
         (uint32_t)kParity7.v[(w >> 14) & 127] << 16 | (uint32_t)kParity7.v[(w >> 21) & 127] << 24;
}

inline __m128i idx4_u8(const uint8_t *p) { return _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)ld32(p))); }
inline __m256i idx8_u8(const uint8_t *p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
}
inline __m256i gather8x8(const uint64_t *grid, __m128i idx) {
  return _mm256_i32gather_epi64(reinterpret_cast<const long long *>(grid), idx, 8);
}
inline __m256i gather8x4(const uint32_t *grid, __m256i idx) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int *>(grid), idx, 4);
}

// Each decoder: mags(b, s) the magnitudes of sub-block s, signs(b, s) its
// negative weights (bit j: weight j). Layouts in arch/iquants.h.
struct Iq2xxs : gb_iq::Iq2xxs {
  static __m256i mags(const uint8_t *b, int s) { return gather8x8(gb_iq::kIq2xxsGrid.v, idx4_u8(b + 2 + 8 * s)); }
  static uint32_t signs(const uint8_t *b, int s) { return signs7x4(ld32(b + 2 + 8 * s + 4)); }
};
struct Iq2xs : gb_iq::Iq2xs {
  static __m256i mags(const uint8_t *b, int s) {
    const __m128i q = _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(b + 2 + 8 * s)));
    return gather8x8(gb_iq::kIq2xsGrid.v, _mm_and_si128(q, _mm_set1_epi32(511)));
  }
  static uint32_t signs(const uint8_t *b, int s) {
    const uint8_t *q = b + 2 + 8 * s;
    return (uint32_t)kParity7.v[ld16(q) >> 9] | (uint32_t)kParity7.v[ld16(q + 2) >> 9] << 8 |
           (uint32_t)kParity7.v[ld16(q + 4) >> 9] << 16 | (uint32_t)kParity7.v[ld16(q + 6) >> 9] << 24;
  }
};
struct Iq2s : gb_iq::Iq2s {
  static __m256i mags(const uint8_t *b, int s) {
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(b[66 + s]), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi32(3));
    return gather8x8(gb_iq::kIq2sGrid.v, _mm_or_si128(idx4_u8(b + 2 + 4 * s), _mm_slli_epi32(hi, 8)));
  }
  static uint32_t signs(const uint8_t *b, int s) { return ld32(b + 34 + 4 * s); }
};
struct Iq3xxs : gb_iq::Iq3xxs {
  static __m256i mags(const uint8_t *b, int s) { return gather8x4(gb_iq::kIq3xxsGrid.v, idx8_u8(b + 2 + 8 * s)); }
  static uint32_t signs(const uint8_t *b, int s) { return signs7x4(ld32(b + 66 + 4 * s)); }
};
struct Iq3s : gb_iq::Iq3s {
  static __m256i mags(const uint8_t *b, int s) {
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b[66 + s]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                        _mm256_set1_epi32(1));
    return gather8x4(gb_iq::kIq3sGrid.v, _mm256_or_si256(idx8_u8(b + 2 + 8 * s), _mm256_slli_epi32(hi, 8)));
  }
  static uint32_t signs(const uint8_t *b, int s) { return ld32(b + 74 + 4 * s); }
};

constexpr size_t kPrefetch = 1024;  // bytes ahead of each super-block

template <class F>
void signed_gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                  size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * F::kBytes;
  const __m256i zero = _mm256_setzero_si256();
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    __m256 acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < nsb; sb++) {
      const uint8_t *b = row + sb * F::kBytes;
      _mm_prefetch(reinterpret_cast<const char *>(b + kPrefetch), _MM_HINT_T0);
      int32_t sc[16];
      F::scales(b, sc);
      __m256i mag[8], s8[8];
      __mmask32 neg[8];
      for (int s = 0; s < 8; s++) {
        mag[s] = F::mags(b, s);
        neg[s] = (__mmask32)F::signs(b, s);
        s8[s] = _mm256_set_m128i(_mm_set1_epi32(sc[2 * s + 1]), _mm_set1_epi32(sc[2 * s]));
      }
      const __m256 dq = _mm256_set1_ps(F::dq(b));
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block *xq = XQ + p * ldxq + sb * 8;
        __m256 t = _mm256_setzero_ps();
        for (int s = 0; s < 8; s++) {
          const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[s].qs));
          const __m256i xs = _mm256_mask_sub_epi8(x, neg[s], zero, x);
          const __m256i is = _mm256_mullo_epi32(_mm256_dpbusd_epi32(zero, mag[s], xs), s8[s]);
          t = _mm256_fmadd_ps(_mm256_set1_ps(xq[s].d), _mm256_cvtepi32_ps(is), t);
        }
        acc[p] = _mm256_fmadd_ps(dq, t, acc[p]);
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = gb_iqx::hsum(acc[p]);
  }
}

// iq1s / iq1m: the shared driver with vpdpbusd on |code| and the activation
// carrying the code's sign.
struct Dot {
  static __attribute__((always_inline)) inline __m256i dot(__m256i c, __m256i x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(c), _mm256_sign_epi8(x, c));
  }
};

}  // namespace

#define GB_IQ_SIGNED(fmt, F)                                                                                         \
  extern "C" void gb_##fmt##_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,         \
                                          size_t row_begin, size_t row_end, size_t cols) {                           \
    signed_gemvm<F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                                    \
  }                                                                                                                  \
  extern "C" void gb_##fmt##_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,            \
                                           const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,          \
                                           size_t row_end, size_t cols) {                                            \
    signed_gemvm<F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                                               \
  }
GB_IQ_SIGNED(iq2xxs, Iq2xxs)
GB_IQ_SIGNED(iq2xs, Iq2xs)
GB_IQ_SIGNED(iq2s, Iq2s)
GB_IQ_SIGNED(iq3xxs, Iq3xxs)
GB_IQ_SIGNED(iq3s, Iq3s)
GB_IQUANT_X86(iq1s, Iq1s, avx512)
GB_IQUANT_X86(iq1m, Iq1m, avx512)
