// AVX-512 (VNNI) GEMV of GGUF's i-quants.
//
// iq2xxs, iq2xs, iq2s, iq3xxs and iq3s: a 32-weight sub-block becomes its
// 32 magnitudes (unsigned bytes) and a 32-bit mask of its negative weights
// (the format's sign bytes as they are, or its four 7-bit sign indexes with
// their parity bit as the eighth, computed: no table). The activations are
// negated under the mask (one masked subtract) and meet the magnitudes in
// vpdpbusd: the same int32 sums as the code-times-activation products of
// generic, four per lane, lanes 0..3 holding weights 0..15 and lanes 4..7
// weights 16..31. The magnitudes: iq3s's and iq3xxs's codebooks (rows of
// four 3-bit level codes) are held in registers as 12-bit rows and looked
// up 32 indexes at a time with vpermt2w (Table12), then spread to bytes and
// mapped to their levels; the iq2 formats' rows (eight 2-bit codes) are
// four 8-byte codebook rows per sub-block, loaded one by one. iq1s and
// iq1m: their codes (an offset grid, not signed magnitudes) plus 9 as
// unsigned bytes, the same row loads (OffsetDot). What scalar code would
// spend most of the time on — row indexes spread over bit fields, 7-bit
// sign indexes and their parity — a vector pre-pass over a chunk of
// super-blocks computes first (Pre). Then, as arch/x86/iquant_gemv.h (the
// AVX2 folder's driver): one vpmulld by the two halves' odd scales, t +=
// xd * (float)(sc * isum) per activation block and acc += dq * t per
// super-block, fused, the eight lanes added at the end — generic's
// arithmetic with the float part reassociated (the tests' tolerance).
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
// llama.cpp's decode speed at one thread (from memory). The pre-pass, with
// every format's bits unchanged (min of 5 interleaved runs, ms): iq2xxs
// 1.09 -> 0.93, iq2xs 2.00 -> 1.28, iq2s 1.48 -> 1.25, iq3xxs 1.19 -> 1.03,
// iq3s unchanged (its indexes and signs were already vector work); iq1s
// 1.64 -> 0.90 and iq1m 2.15 -> 1.07 with OffsetDot against the shared
// driver's signed codes.
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

// A pre-pass over a chunk of super-blocks computes with vector shifts what
// scalar code would spend most of the kernel's time on, and stores it for
// the decoders to load (struct Pre): the codebook row indexes of the
// formats that spread them over bit fields (iq2xs, iq2s, iq1s, iq1m) and
// the 7-bit sign indexes with their parity (iq2xxs, iq2xs, iq3xxs).
// Computed and stored in the super-block that loads them, the loads waited
// on the store (store-to-load forwarding from a vector to a narrower load):
// iq1s 4096 x 4096 in cache 1.64 ms, 1.28 computed per super-block, 1.03
// per chunk.
constexpr size_t kChunk = 16;  // super-blocks a pre-pass covers

struct Pre {
  alignas(64) uint16_t idx[32];  // lane 4s + l: codebook row of group l of sub-block s
  uint32_t neg[8];               // sub-block s's negative weights (bit j: weight j)
};

template <int kStep>
struct GroupFields {  // lane i: group i % 4 of sub-block i / 4
  alignas(64) uint16_t shift[32] = {};
  alignas(64) uint16_t sub[32] = {};
  constexpr GroupFields() {
    for (int i = 0; i < 32; i++) {
      shift[i] = (uint16_t)(kStep * (i % 4));
      sub[i] = (uint16_t)(i / 4);
    }
  }
};
// The 32 indexes of a super-block, stored at idx: lo (lane 4s + l: group l
// of sub-block s) plus, above bit 8, field l of sub-block s's word h[s]:
// (h[s] >> (kStep * l)) & kMask.
template <int kStep, int kMask>
inline void store_index32(uint16_t *idx, __m512i lo, __m128i h) {
  static constexpr GroupFields<kStep> f{};
  const __m512i hs = _mm512_permutexvar_epi16(_mm512_load_si512(f.sub), _mm512_castsi128_si512(h));
  const __m512i field = _mm512_and_si512(_mm512_srlv_epi16(hs, _mm512_load_si512(f.shift)), _mm512_set1_epi16(kMask));
  _mm512_store_si512(idx, _mm512_or_si512(lo, _mm512_slli_epi16(field, 8)));
}
inline __m512i bytes32(const uint8_t *p) { return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))); }
// Eight words of four 7-bit sign indexes (bits 0..27), stored as the
// sub-blocks' masks of negative weights: each index in its own byte with
// its parity as the eighth bit (an even number of negative weights per
// 8-weight group).
inline void store_signs7x4(uint32_t *neg, __m256i w) {
  const __m256i t = _mm256_or_si256(
      _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi32(0x7f)), _mm256_and_si256(_mm256_slli_epi32(w, 1), _mm256_set1_epi32(0x7f00))),
      _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(w, 2), _mm256_set1_epi32(0x7f0000)),
                      _mm256_and_si256(_mm256_slli_epi32(w, 3), _mm256_set1_epi32(0x7f000000))));
  __m256i p = _mm256_xor_si256(t, _mm256_srli_epi32(t, 4));
  p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
  p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(neg),
                      _mm256_or_si256(t, _mm256_slli_epi32(_mm256_and_si256(p, _mm256_set1_epi32(0x01010101)), 7)));
}

// Each decoder: prepass(b, pre) its part of the pre-pass, decode8(b,
// table(), pre, mag, neg) the magnitudes of the eight sub-blocks and their
// negative weights (bit j: weight j). Layouts in arch/iquants.h. The iq2
// formats decode a sub-block at a time (mags(b, pre, s)), its row loads
// next to its sign mask's (with all eight sub-blocks' row loads first the
// kernel ran a quarter slower), and hold no table.
//
// The sub-block dot of the signed formats: the activations negated under
// the mask meet the magnitudes.
struct SignedDot {
  static __attribute__((always_inline)) inline __m256i dot(__m256i mag, __mmask32 neg, __m256i x) {
    const __m256i zero = _mm256_setzero_si256();
    return _mm256_dpbusd_epi32(zero, mag, _mm256_mask_sub_epi8(x, neg, zero, x));
  }
};
template <class D>
struct RowLoads : SignedDot {
  struct Table {};
  static Table table() { return {}; }
  static void decode8(const uint8_t *b, const Table &, const Pre &pre, __m256i *mag, __mmask32 *neg) {
    for (int s = 0; s < 8; s++) {
      mag[s] = D::mags(b, pre, s);
      neg[s] = (__mmask32)D::signs(b, pre, s);
    }
  }
};
// Rows by the indexes of the pre-pass.
template <size_t N>
inline __m256i rows4(const gb_iq::Grid8<N> &grid, const Pre &pre, int s) {
  const uint16_t *i = pre.idx + 4 * s;
  return rows4(grid.v, i[0], i[1], i[2], i[3]);
}
// The codebook-in-registers formats: four sub-blocks a lookup.
template <class D>
struct Lookup12 : SignedDot {
  template <class Table>
  static void decode8(const uint8_t *b, const Table &tab, const Pre &pre, __m256i *mag, __mmask32 *neg) {
    D::mags8(b, tab, mag);
    for (int s = 0; s < 8; s++) neg[s] = (__mmask32)D::signs(b, pre, s);
  }
};
struct Iq2xxs : gb_iq::Iq2xxs, RowLoads<Iq2xxs> {
  static void prepass(const uint8_t *b, Pre &pre) {  // sub-block s's sign word: bytes 4..7 of its 8
    store_signs7x4(pre.neg, _mm512_cvtepi64_epi32(_mm512_srli_epi64(_mm512_loadu_si512(b + 2), 32)));
  }
  static __m256i mags(const uint8_t *b, const Pre &, int s) {
    const uint8_t *q = b + 2 + 8 * s;
    return rows4(gb_iq::kIq2xxsGrid.v, q[0], q[1], q[2], q[3]);
  }
  static uint32_t signs(const uint8_t *, const Pre &pre, int s) { return pre.neg[s]; }
};
struct Iq2xs : gb_iq::Iq2xs, RowLoads<Iq2xs> {
  static void prepass(const uint8_t *b, Pre &pre) {  // each u16: a 9-bit row index, a 7-bit sign index
    const __m512i q = _mm512_loadu_si512(b + 2);
    _mm512_store_si512(pre.idx, _mm512_and_si512(q, _mm512_set1_epi16(511)));
    const __m512i t = _mm512_srli_epi16(q, 9);
    __m512i p = _mm512_xor_si512(t, _mm512_srli_epi16(t, 4));
    p = _mm512_xor_si512(p, _mm512_srli_epi16(p, 2));
    p = _mm512_xor_si512(p, _mm512_srli_epi16(p, 1));
    const __m512i sg = _mm512_or_si512(t, _mm512_slli_epi16(_mm512_and_si512(p, _mm512_set1_epi16(1)), 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(pre.neg), _mm512_cvtepi16_epi8(sg));
  }
  static __m256i mags(const uint8_t *, const Pre &pre, int s) { return rows4(gb_iq::kIq2xsGrid, pre, s); }
  static uint32_t signs(const uint8_t *, const Pre &pre, int s) { return pre.neg[s]; }
};
struct Iq2s : gb_iq::Iq2s, RowLoads<Iq2s> {
  static void prepass(const uint8_t *b, Pre &pre) {  // group l: bits 2l, 2l + 1 of qh[s]
    store_index32<2, 3>(pre.idx, bytes32(b + 2), _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(b + 66))));
  }
  static __m256i mags(const uint8_t *, const Pre &pre, int s) { return rows4(gb_iq::kIq2sGrid, pre, s); }
  static uint32_t signs(const uint8_t *b, const Pre &, int s) { return ld32(b + 34 + 4 * s); }
};
struct Iq3xxs : gb_iq::Iq3xxs, Lookup12<Iq3xxs> {
  using Table = Table12<256>;
  static Table table() { return Table(gb_iq::kIq3xxsPacked); }
  static void mags8(const uint8_t *b, const Table &tab, __m256i *mag) {
    const __m512i lv = _mm512_broadcast_i32x4(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(gb_iq::kIq3xxsLevels)));
    mags12(b + 2, nullptr, tab, [lv](__m512i c) { return _mm512_shuffle_epi8(lv, c); }, mag);
  }
  static void prepass(const uint8_t *b, Pre &pre) {
    store_signs7x4(pre.neg, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + 66)));
  }
  static uint32_t signs(const uint8_t *, const Pre &pre, int s) { return pre.neg[s]; }
};
struct Iq3s : gb_iq::Iq3s, Lookup12<Iq3s> {
  using Table = Table12<512>;
  static Table table() { return Table(gb_iq::kIq3sPacked); }
  static void mags8(const uint8_t *b, const Table &tab, __m256i *mag) {
    mags12(b + 2, b + 66, tab, [](__m512i c) { return _mm512_or_si512(_mm512_slli_epi32(c, 1), _mm512_set1_epi32(0x01010101)); }, mag);
  }
  static void prepass(const uint8_t *, Pre &) {}
  static uint32_t signs(const uint8_t *b, const Pre &, int s) { return ld32(b + 74 + 4 * s); }
};

// iq1s / iq1m: codes 8g + delta (g in {-1, 0, 1}, delta = +-1) held as
// the unsigned bytes u = code + 9 (0..18): a codebook row (8g) plus 10,
// less 2 in the weights whose delta is -1. Then sum code * x = sum u * x -
// 9 sum x: two vpdpbusd per sub-block and no sign work (the same int32
// sums as the signed codes' products). The codebook rows are loaded one by
// one as the iq2 formats' are. (Masks of the negative deltas made in the
// pre-pass and loaded here ran slower than delta's few operations.)
template <class D>
struct OffsetDot {
  struct Table {};
  static Table table() { return {}; }
  static void decode8(const uint8_t *b, const Table &, const Pre &pre, __m256i *u, __mmask32 *neg) {
    for (int s = 0; s < 8; s++) {
      u[s] = D::delta(b, s, _mm256_add_epi8(rows4(gb_iq::kIq1sGrid, pre, s), _mm256_set1_epi8(10)));
      neg[s] = 0;
    }
  }
  static __attribute__((always_inline)) inline __m256i dot(__m256i u, __mmask32, __m256i x) {
    const __m256i zero = _mm256_setzero_si256();
    return _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, u, x), _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(9), x));
  }
};
struct Iq1s : gb_iq::Iq1s, OffsetDot<Iq1s> {
  static void prepass(const uint8_t *b, Pre &pre) {  // group l: bits 3l..3l + 2 of qh[s]
    store_index32<3, 7>(pre.idx, bytes32(b + 2), _mm_loadu_si128(reinterpret_cast<const __m128i *>(b + 34)));
  }
  // u - 2 in the whole sub-block where its delta is -1 (bit 15 of qh[s]).
  static __m256i delta(const uint8_t *b, int s, __m256i u) {
    return _mm256_sub_epi8(u, _mm256_set1_epi8((char)(2 * (ld16(b + 34 + 2 * s) >> 15))));
  }
};
struct Iq1m : gb_iq::Iq1m, OffsetDot<Iq1m> {
  static void prepass(const uint8_t *b, Pre &pre) {  // group l: bits 4l..4l + 2 of qh[s]
    store_index32<4, 7>(pre.idx, bytes32(b), _mm_loadu_si128(reinterpret_cast<const __m128i *>(b + 32)));
  }
  // u - 2 in group l (16-bit lanes 4l..4l + 3) where its delta is -1 (bit
  // 4l + 3 of qh[s]).
  static __m256i delta(const uint8_t *b, int s, __m256i u) {
    const __mmask16 neg = _mm256_test_epi16_mask(_mm256_set1_epi16((short)ld16(b + 32 + 2 * s)),
                                                 _mm256_set_epi64x(0x8000800080008000ll, 0x0800080008000800ll,
                                                                   0x0080008000800080ll, 0x0008000800080008ll));
    return _mm256_mask_sub_epi16(u, neg, u, _mm256_set1_epi16(0x0202));
  }
};

constexpr size_t kPrefetch = 1024;  // bytes ahead of each super-block

template <class F>
void iq_gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
              size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * F::kBytes;
  const typename F::Table tab = F::table();
  Pre pre[kChunk];
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *row = W + r * rb;
    __m256 acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = _mm256_setzero_ps();
    for (size_t c0 = 0; c0 < nsb; c0 += kChunk) {
      const size_t c1 = c0 + kChunk < nsb ? c0 + kChunk : nsb;
      for (size_t sb = c0; sb < c1; sb++) F::prepass(row + sb * F::kBytes, pre[sb - c0]);
      for (size_t sb = c0; sb < c1; sb++) {
        const uint8_t *b = row + sb * F::kBytes;
        _mm_prefetch(reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(b) + kPrefetch), _MM_HINT_T0);
        int32_t sc[16];
        F::scales(b, sc);
        __m256i mag[8], s8[8];
        __mmask32 neg[8];
        F::decode8(b, tab, pre[sb - c0], mag, neg);
        for (int s = 0; s < 8; s++) s8[s] = _mm256_set_m128i(_mm_set1_epi32(sc[2 * s + 1]), _mm_set1_epi32(sc[2 * s]));
        gb_iqx::sb_positions(acc, XQ, ldxq, m, sb, s8, _mm256_set1_ps(F::dq(b)),
                             [&](int s, __m256i x) { return F::dot(mag[s], neg[s], x); });
      }
    }
    for (size_t p = 0; p < m; p++) Y[p * ldy + r] = gb_iqx::hsum(acc[p]);
  }
}

}  // namespace

#define GB_IQ_AVX512(fmt, F)                                                                                         \
  extern "C" void gb_##fmt##_gemv__avx512(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,         \
                                          size_t row_begin, size_t row_end, size_t cols) {                           \
    iq_gemvm<F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                                        \
  }                                                                                                                  \
  extern "C" void gb_##fmt##_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,            \
                                           const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,          \
                                           size_t row_end, size_t cols) {                                            \
    iq_gemvm<F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                                                   \
  }
GB_IQ_AVX512(iq2xxs, Iq2xxs)
GB_IQ_AVX512(iq2xs, Iq2xs)
GB_IQ_AVX512(iq2s, Iq2s)
GB_IQ_AVX512(iq3xxs, Iq3xxs)
GB_IQ_AVX512(iq3s, Iq3s)
GB_IQ_AVX512(iq1s, Iq1s)
GB_IQ_AVX512(iq1m, Iq1m)
