// AVX2 GEMV of GGUF's 32-weight block formats q4_1, q5_0, q5_1, iq4nl and
// mxfp4
// (layouts in kernels.h), one position (gemv) and several (gemvm): four
// rows and two blocks per step, one driver for the four formats.
//
// Each block is decoded in registers to its 32 codes in element order, one
// byte each, in one 256-bit vector (low 128 bits: weights 0..15, the low
// nibbles; high: 16..31): q4_1 the nibbles (0..15); q5_0 / q5_1 the nibbles
// or their fifth bit (qh broadcast, one byte per weight selected by a bit
// mask: 0..31); iq4nl the grid value of the nibble (vpshufb, -127..113),
// mxfp4 likewise from its table (-12..12), its scale 2^(e - 128) formed
// from the block's first byte as ggml forms it (arch/iquants.h).
// Unsigned codes meet the activations through vpmaddubsw (pairs <= 2 * 31 *
// 128: exact in int16) and vpmaddwd by ones; iq4nl's signed codes through
// the same with |code| and the activation carrying the code's sign (pairs
// <= 2 * 127 * 128). A vphaddd tree reduces the eight partial vectors of
// four rows and two blocks to the exact int32 isum of every (row, block),
// rows in lanes, block b in the low half and b+1 in the high half. q5_0's
// codes are stored +16: isum = sum u * x - 16 * xq.sum, exact.
// Then, per lane, generic's expression with fused multiply-adds:
//   with a min (q4_1, q5_1): acc += xd * (d * isum + m * xq.sum)
//   without (q5_0, iq4nl):   acc += xd * (d * isum)
// and a row's two half-lanes are added at the end: the float part is
// reassociated against gb_*_gemv__generic (the tests' tolerance).
//
// The gemv is the gemvm with one position: a step decodes the rows' blocks
// once and runs every position through the same operations, so the gemvm is
// bit-identical per position to the gemv. Rows of a tail group (R < 4) are
// computed on copies of row r and not stored. Nothing is read past the
// rows' bytes (16-byte loads inside a block only).
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "avx2_common.h"
#include "gguf_blocks.h"
#include "iquants.h"
#include "kernels.h"

namespace {

using namespace gb_avx2;
constexpr size_t kPrefetch = 4096;  // bytes ahead per row stream (avx2_common.h)

inline __m256i ld256(const void *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

// The 16 nibble bytes at qs as 32 codes 0..15 in element order.
inline __m256i nibbles(const uint8_t *qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
}

// The u32 of fifth bits at p as 16 in byte j where bit j is set, else 0.
inline __m256i fifth_bits(const uint8_t *p) {
  uint32_t qh;
  memcpy(&qh, p, 4);
  // byte j takes byte j / 8 of qh, then keeps bit j % 8 of it.
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                          3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread), bit);
  return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
}

// The formats: block bytes, offset of the f16 min (-1: none), the code
// offset subtracted in int32 (q5_0), whether codes are signed, and the
// decoder (the f16 scale d is at byte 0 of every block).
struct Q4_1 {
  static constexpr size_t kBytes = GB_Q4_1_BLOCK_BYTES;
  static constexpr bool kE8m0 = false;  // the scale: f16 d at byte 0
  static constexpr int kMinAt = 2, kOff = 0;
  static constexpr bool kSigned = false;
  static __m256i codes(const uint8_t *b) { return nibbles(b + 4); }
};
struct Q5_0 {
  static constexpr size_t kBytes = GB_Q5_0_BLOCK_BYTES;
  static constexpr bool kE8m0 = false;  // the scale: f16 d at byte 0
  static constexpr int kMinAt = -1, kOff = 16;
  static constexpr bool kSigned = false;
  static __m256i codes(const uint8_t *b) { return _mm256_or_si256(nibbles(b + 6), fifth_bits(b + 2)); }
};
struct Q5_1 {
  static constexpr size_t kBytes = GB_Q5_1_BLOCK_BYTES;
  static constexpr bool kE8m0 = false;  // the scale: f16 d at byte 0
  static constexpr int kMinAt = 2, kOff = 0;
  static constexpr bool kSigned = false;
  static __m256i codes(const uint8_t *b) { return _mm256_or_si256(nibbles(b + 8), fifth_bits(b + 4)); }
};
struct Iq4nl {
  static constexpr size_t kBytes = GB_IQ4NL_BLOCK_BYTES;
  static constexpr bool kE8m0 = false;
  static constexpr int kMinAt = -1, kOff = 0;
  static constexpr bool kSigned = true;
  static __m256i codes(const uint8_t *b) {
    const __m256i grid =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb_gguf::kIq4nlGrid)));
    return _mm256_shuffle_epi8(grid, nibbles(b + 2));
  }
};

struct Mxfp4 {
  static constexpr size_t kBytes = GB_MXFP4_BLOCK_BYTES;
  static constexpr bool kE8m0 = true;  // the scale: 2^(e - 128), e the byte at 0
  static constexpr int kMinAt = -1, kOff = 0;
  static constexpr bool kSigned = true;
  static __m256i codes(const uint8_t *b) {
    const __m256i grid =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(gb_iq::kMxfp4)));
    return _mm256_shuffle_epi8(grid, nibbles(b + 1));
  }
};
// The exact int32 products of one block's codes with activations x, in
// eight partial lanes.
template <class F>
__attribute__((always_inline)) inline __m256i dot(__m256i c, __m256i x) {
  const __m256i ones = _mm256_set1_epi16(1);
  if (F::kSigned) return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(x, c)), ones);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(c, x), ones);
}

// Four rows' f16 values at byte `at` of blocks b and b+1 (PAIR) as f32:
// rows in lanes, block b low, b+1 high (0 where !PAIR).
template <bool PAIR>
__attribute__((always_inline)) inline __m256 scales8(const uint8_t *const *w, size_t off, size_t bytes, int at) {
  uint64_t h0 = 0, h1 = 0;
  for (int i = 0; i < 4; i++) {
    h0 |= ld16(w[i] + off + at) << (16 * i);
    if (PAIR) h1 |= ld16(w[i] + off + bytes + at) << (16 * i);
  }
  return _mm256_cvtph_ps(_mm_set_epi64x((long long)h1, (long long)h0));
}

// One step over blocks b and b+1 (PAIR) or the last block b alone, rows
// w[0..4) (prefetching those below R), the m positions' accumulators (rows
// in lanes, one half per block).
template <class F, int R, bool PAIR>
__attribute__((always_inline)) inline void step(__m256 *acc, const uint8_t *const *w, const gb_q8x_block *XQ,
                                                size_t ldxq, size_t m, size_t b, size_t pf) {
  const size_t off = b * F::kBytes;
  __m256i c0[4], c1[4];
  for (int i = 0; i < 4; i++) {
    if (i < R) _mm_prefetch(reinterpret_cast<const char *>(w[i] + off + pf), _MM_HINT_T0);
    c0[i] = F::codes(w[i] + off);
    c1[i] = PAIR ? F::codes(w[i] + off + F::kBytes) : _mm256_setzero_si256();
  }
  __m256 dw;
  if (F::kE8m0) {
    float d[8];
    for (int i = 0; i < 4; i++) {
      d[i] = gb_iq::mxfp4_d(w[i][off]);
      d[4 + i] = PAIR ? gb_iq::mxfp4_d(w[i][off + F::kBytes]) : 0.0f;
    }
    dw = _mm256_loadu_ps(d);
  } else {
    dw = scales8<PAIR>(w, off, F::kBytes, 0);
  }
  const __m256 mw = F::kMinAt >= 0 ? scales8<PAIR>(w, off, F::kBytes, F::kMinAt) : _mm256_setzero_ps();
  for (size_t p = 0; p < m; p++) {
    const gb_q8x_block *xq = XQ + p * ldxq + b;
    const __m256i x0 = ld256(xq[0].qs);
    const __m256i x1 = PAIR ? ld256(xq[1].qs) : _mm256_setzero_si256();
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(dot<F>(c0[0], x0), dot<F>(c0[1], x0)),
                                         _mm256_hadd_epi32(dot<F>(c0[2], x0), dot<F>(c0[3], x0)));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(dot<F>(c1[0], x1), dot<F>(c1[1], x1)),
                                         _mm256_hadd_epi32(dot<F>(c1[2], x1), dot<F>(c1[3], x1)));
    __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
    const __m256i xs = _mm256_set_m128i(_mm_set1_epi32(PAIR ? xq[1].sum : 0), _mm_set1_epi32(xq[0].sum));
    if (F::kOff) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(xs, 4));
    const __m256 dx = _mm256_set_m128(_mm_set1_ps(PAIR ? xq[1].d : 0.0f), _mm_set1_ps(xq[0].d));
    __m256 t = _mm256_mul_ps(dw, _mm256_cvtepi32_ps(isum));
    if (F::kMinAt >= 0) t = _mm256_fmadd_ps(mw, _mm256_cvtepi32_ps(xs), t);
    acc[p] = _mm256_fmadd_ps(dx, t, acc[p]);
  }
}
static_assert(Q5_0::kOff == 16, "the q5_0 offset is applied as a shift by 4");

// Rows [r, r + R), R <= 4, times m positions.
template <class F, int R>
inline void rows4(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t r,
                  size_t nb, const Prefetch &pf) {
  const size_t rb = nb * F::kBytes;
  const uint8_t *w[4];
  for (int i = 0; i < 4; i++) w[i] = W + (r + (i < R ? i : 0)) * rb;
  const size_t split = (pf.split + F::kBytes - 1) / F::kBytes;  // first block at or past byte pf.split
  __m256 acc[GB_GEMVM_MAX_M];
  for (size_t p = 0; p < m; p++) acc[p] = _mm256_setzero_ps();
  size_t b = 0;
  for (; b + 2 <= split && b + 2 <= nb; b += 2) step<F, R, true>(acc, w, XQ, ldxq, m, b, pf.near);
  for (; b + 2 <= nb; b += 2) step<F, R, true>(acc, w, XQ, ldxq, m, b, pf.far);
  if (b < nb) step<F, R, false>(acc, w, XQ, ldxq, m, b, pf.far);
  for (size_t p = 0; p < m; p++)
    store_lanes<R>(Y + p * ldy + r, _mm_add_ps(_mm256_castps256_ps128(acc[p]), _mm256_extractf128_ps(acc[p], 1)));
}

template <class F>
inline void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                  size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = cols / GB_QBLOCK;
  for_row_groups<kPrefetch>(row_begin, row_end, nb * F::kBytes, [&](auto R, size_t r, Prefetch pf) {
    rows4<F, decltype(R)::value>(Y, ldy, W, XQ, ldxq, m, r, nb, pf);
  });
}

}  // namespace

#define GB_BLK32_AVX2(fmt, F)                                                                                      \
  extern "C" void gb_##fmt##_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,        \
                                        size_t row_begin, size_t row_end, size_t cols) {                           \
    gemvm<F>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                                        \
  }                                                                                                                \
  extern "C" void gb_##fmt##_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,           \
                                         const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,          \
                                         size_t row_end, size_t cols) {                                            \
    gemvm<F>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                                                   \
  }

GB_BLK32_AVX2(q4_1, Q4_1)
GB_BLK32_AVX2(q5_0, Q5_0)
GB_BLK32_AVX2(q5_1, Q5_1)
GB_BLK32_AVX2(iq4nl, Iq4nl)
GB_BLK32_AVX2(mxfp4, Mxfp4)
