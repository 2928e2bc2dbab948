// AVX-512 (VNNI) GEMV of GGUF's i-quants.
//
// iq2xxs, iq2xs, iq2s, iq3xxs and iq3s: a 32-weight sub-block becomes its
// 32 magnitudes (unsigned bytes) and a 32-bit mask of its negative weights
// (the format's sign bytes as they are, or its four 7-bit sign indexes with
// their parity bit as the eighth, computed: no table). The activations are negated under the
// mask (one masked subtract) and meet the magnitudes in vpdpbusd: the same
// int32 sums as the code-times-activation products of generic, four per
// lane, lanes 0..3 holding weights 0..15 and lanes 4..7 weights 16..31.
// The magnitudes: iq3s's and iq3xxs's codebooks (rows of four 3-bit level
// codes) are held in registers as 12-bit rows and looked up 32 indexes at a
// time with vpermt2w (Table12), then spread to bytes and mapped to their
// levels; the iq2 formats' rows (eight 2-bit codes) are four 8-byte
// codebook rows per sub-block, loaded one by one. Then, as arch/x86/iquant_gemv.h
// (which the AVX2 folder and iq1s / iq1m here still use, their codes being
// an offset grid rather than signed magnitudes): one vpmulld by the two
// halves' odd scales, t += xd * (float)(sc * isum) per activation block and
// acc += dq * t per super-block, fused, the eight lanes added at the end —
// generic's arithmetic with the float part reassociated (the tests'
// tolerance).
//
// Against decoding each sub-block into signed codes with scalar table
// lookups (the iquant_gemv.h driver), on this host (Zen 5, one thread,
// 4096 x 4096 in cache, interleaved runs, ms): with gathers for every
// format, iq3s 3.3-5.5 -> 1.9-2.4, iq2s 2.6-3.6 -> 1.5-2.2, iq2xs 2.4-3.4
// -> 2.0-2.8, iq3xxs and iq2xxs 5-15 % faster; the gathers were most of
// what was left (with a constant in their place iq3s ran in a third of the
// time; eight scalar loads per sub-block were slower, one 16-element
// gather for two sub-blocks no faster). The register lookup then took iq3s
// 1.9 -> 1.25 ms and iq3xxs 2.0 -> 1.27, bit for bit the gathers' results.
// The same lookup over the iq2 formats' 16-bit rows (eight 2-bit codes,
// spread to bytes in three halving steps) was no faster than their gathers
// (iq2xxs 1.75 -> 1.87 ms, iq2xs 1.98 -> 1.77, iq2s 1.47 -> 1.54). Their
// gathers then gave way to four scalar loads per sub-block and the sign
// parity to arithmetic: iq2xxs 2.6 -> 2.2 ms in the same interleaved runs
// (this host's speed drifts between runs; the ratio held), the same bits;
// then each sub-block's loads next to its signs (RowLoads): 1.65 -> 1.1 ms.
// A TinyLlama-1.1B-shaped IQ2_XXS file went from 0.56x to 0.94x
// llama.cpp's decode speed at one thread (from memory).
// Against generic these kernels are off by rounding alone (random rows,
// 4096 x 4096: 2.2e-7 rms relative, iq2xxs and iq3s), as far as the old
// driver was. Splitting a position's sub-block terms between two
// accumulators gained nothing measurable and moved the NLL of the IQ1_S
// fixture (whose mix holds iq2xxs matrices) by 8e-4, so each keeps one chain.
//
// The gemv is the gemvm with one position, and every position goes through
// the same operations: the gemvm is bit-identical per position to the gemv.
// Rows are read one at a time, each super-block asking for the bytes
// kPrefetch ahead (past the row: the next rows, or bytes past the matrix,
// which a prefetch may name without faulting).
// GCC 12's AVX-512 headers trip its own -Wmaybe-uninitialized (the
// _mm512_undefined_* placeholders of the unmasked intrinsics).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "x86/iquant_gemv.h"

namespace {

using gb_iq::ld16;
using gb_iq::ld32;

// Four 7-bit sign indexes, one per byte of b, each with its parity as the
// eighth bit (an even number of negative weights per 8-weight group): the
// 32-bit mask of the sub-block's negative weights.
inline uint32_t with_parity(uint32_t b) {
  uint32_t p = b ^ (b >> 4);
  p ^= p >> 2;
  p ^= p >> 1;
  return b | (p & 0x01010101u) << 7;
}
// Four 7-bit sign indexes packed in bits 0..27 of w, as that mask.
inline uint32_t signs7x4(uint32_t w) {
  return with_parity((w & 0x7fu) | (w << 1 & 0x7f00u) | (w << 2 & 0x7f0000u) | (w << 3 & 0x7f000000u));
}

// Four 8-byte codebook rows, loaded one by one (on this host faster than
// one gather of them).
inline __m256i rows4(const uint64_t *grid, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
  return _mm256_set_epi64x((long long)grid[i3], (long long)grid[i2], (long long)grid[i1], (long long)grid[i0]);
}

// The codebooks of iq3s (512 rows) and iq3xxs (256 rows), four 3-bit
// level codes a row in 12 bits, as N / 32 vectors of 32 u16 rows, looked
// up 32 indexes at a time by vpermt2w (64 rows a lookup) and blends on the
// index bits from 6 up: no gather (on this host the gathers were most of
// the kernel's time).
template <int N>
struct Table12 {
  __m512i t[N / 32];
  explicit Table12(const uint16_t *rows) {
    for (int i = 0; i < N / 32; i++) t[i] = _mm512_loadu_si512(rows + 32 * i);
  }
  __m512i lookup(__m512i idx) const {
    __m512i r[N / 64];
    for (int k = 0; k < N / 64; k++) r[k] = _mm512_permutex2var_epi16(t[2 * k], idx, t[2 * k + 1]);
    for (int bit = 6, n = N / 64; n > 1; bit++, n /= 2) {
      const __mmask32 m = _mm512_test_epi16_mask(idx, _mm512_set1_epi16((short)(1 << bit)));
      for (int k = 0; k < n / 2; k++) r[k] = _mm512_mask_blend_epi16(m, r[2 * k], r[2 * k + 1]);
    }
    return r[0];
  }
};

// Sixteen 12-bit rows (u32 lanes) to their four level codes (bytes).
inline __m512i codes12(__m512i x) {
  return _mm512_or_si512(
      _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(7)), _mm512_and_si512(_mm512_slli_epi32(x, 5), _mm512_set1_epi32(0x700))),
      _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi32(x, 10), _mm512_set1_epi32(0x70000)),
                      _mm512_and_si512(_mm512_slli_epi32(x, 15), _mm512_set1_epi32(0x7000000))));
}

// The magnitudes of a super-block's eight sub-blocks (indexes: 8 bytes per
// sub-block at q, with bit 8 from the bytes at qh when qh != nullptr),
// four sub-blocks a lookup; lv maps a level code to its magnitude.
template <int N, class Lv>
inline void mags12(const uint8_t *q, const uint8_t *qh, const Table12<N> &tab, Lv lv, __m256i *mag) {
  for (int s0 = 0; s0 < 8; s0 += 4) {
    __m512i idx = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + 8 * s0)));
    if (qh) idx = _mm512_mask_add_epi16(idx, (__mmask32)ld32(qh + s0), idx, _mm512_set1_epi16(256));  // bit 8 (idx < 256)
    const __m512i v = tab.lookup(idx);
    const __m512i lo = lv(codes12(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v))));
    const __m512i hi = lv(codes12(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1))));
    mag[s0] = _mm512_castsi512_si256(lo);
    mag[s0 + 1] = _mm512_extracti64x4_epi64(lo, 1);
    mag[s0 + 2] = _mm512_castsi512_si256(hi);
    mag[s0 + 3] = _mm512_extracti64x4_epi64(hi, 1);
  }
}

// Each decoder: decode8(b, table(), mag, neg) the magnitudes of the eight
// sub-blocks and their negative weights (bit j: weight j), from signs(b, s)
// for sub-block s. Layouts in arch/iquants.h. The iq2 formats decode a
// sub-block at a time (mags(b, s)), its loads next to its signs' (with all
// eight sub-blocks' row loads first the kernel ran a quarter slower), and
// hold no table.
template <class D>
struct RowLoads {
  struct Table {};
  static Table table() { return {}; }
  static void decode8(const uint8_t *b, const Table &, __m256i *mag, __mmask32 *neg) {
    for (int s = 0; s < 8; s++) {
      mag[s] = D::mags(b, s);
      neg[s] = (__mmask32)D::signs(b, s);
    }
  }
};
// The codebook-in-registers formats: four sub-blocks a lookup.
template <class D>
struct Lookup12 {
  template <class Table>
  static void decode8(const uint8_t *b, const Table &tab, __m256i *mag, __mmask32 *neg) {
    D::mags8(b, tab, mag);
    for (int s = 0; s < 8; s++) neg[s] = (__mmask32)D::signs(b, s);
  }
};
struct Iq2xxs : gb_iq::Iq2xxs, RowLoads<Iq2xxs> {
  static __m256i mags(const uint8_t *b, int s) {
    const uint8_t *q = b + 2 + 8 * s;
    return rows4(gb_iq::kIq2xxsGrid.v, q[0], q[1], q[2], q[3]);
  }
  static uint32_t signs(const uint8_t *b, int s) { return signs7x4(ld32(b + 2 + 8 * s + 4)); }
};
struct Iq2xs : gb_iq::Iq2xs, RowLoads<Iq2xs> {
  static __m256i mags(const uint8_t *b, int s) {
    const uint8_t *q = b + 2 + 8 * s;
    return rows4(gb_iq::kIq2xsGrid.v, ld16(q) & 511u, ld16(q + 2) & 511u, ld16(q + 4) & 511u, ld16(q + 6) & 511u);
  }
  static uint32_t signs(const uint8_t *b, int s) {
    const uint8_t *q = b + 2 + 8 * s;
    return with_parity((uint32_t)(ld16(q) >> 9) | (uint32_t)(ld16(q + 2) >> 9) << 8 | (uint32_t)(ld16(q + 4) >> 9) << 16 |
                       (uint32_t)(ld16(q + 6) >> 9) << 24);
  }
};
struct Iq2s : gb_iq::Iq2s, RowLoads<Iq2s> {
  static __m256i mags(const uint8_t *b, int s) {
    const uint8_t *q = b + 2 + 4 * s;
    const uint32_t h = b[66 + s];
    return rows4(gb_iq::kIq2sGrid.v, q[0] | (h & 3u) << 8, q[1] | (h >> 2 & 3u) << 8, q[2] | (h >> 4 & 3u) << 8,
                 q[3] | (h >> 6 & 3u) << 8);
  }
  static uint32_t signs(const uint8_t *b, int s) { return ld32(b + 34 + 4 * s); }
};
struct Iq3xxs : gb_iq::Iq3xxs, Lookup12<Iq3xxs> {
  using Table = Table12<256>;
  static Table table() { return Table(gb_iq::kIq3xxsPacked); }
  static void mags8(const uint8_t *b, const Table &tab, __m256i *mag) {
    const __m512i lv = _mm512_broadcast_i32x4(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(gb_iq::kIq3xxsLevels)));
    mags12(b + 2, nullptr, tab, [lv](__m512i c) { return _mm512_shuffle_epi8(lv, c); }, mag);
  }
  static uint32_t signs(const uint8_t *b, int s) { return signs7x4(ld32(b + 66 + 4 * s)); }
};
struct Iq3s : gb_iq::Iq3s, Lookup12<Iq3s> {
  using Table = Table12<512>;
  static Table table() { return Table(gb_iq::kIq3sPacked); }
  static void mags8(const uint8_t *b, const Table &tab, __m256i *mag) {
    mags12(b + 2, b + 66, tab, [](__m512i c) { return _mm512_or_si512(_mm512_slli_epi32(c, 1), _mm512_set1_epi32(0x01010101)); }, mag);
  }
  static uint32_t signs(const uint8_t *b, int s) { return ld32(b + 74 + 4 * s); }
};

constexpr size_t kPrefetch = 1024;  // bytes ahead of each super-block

template <class F>
void signed_gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                  size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * F::kBytes;
  const __m256i zero = _mm256_setzero_si256();
  const typename F::Table tab = F::table();
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    __m256 acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < nsb; sb++) {
      const uint8_t *b = row + sb * F::kBytes;
      _mm_prefetch(reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(b) + kPrefetch), _MM_HINT_T0);
      int32_t sc[16];
      F::scales(b, sc);
      __m256i mag[8], s8[8];
      __mmask32 neg[8];
      F::decode8(b, tab, mag, neg);
      for (int s = 0; s < 8; s++) s8[s] = _mm256_set_m128i(_mm_set1_epi32(sc[2 * s + 1]), _mm_set1_epi32(sc[2 * s]));
      gb_iqx::sb_positions(acc, XQ, ldxq, m, sb, s8, _mm256_set1_ps(F::dq(b)), [&](int s, __m256i x) {
        return _mm256_dpbusd_epi32(zero, mag[s], _mm256_mask_sub_epi8(x, neg[s], zero, x));
      });
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
