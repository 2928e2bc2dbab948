// AVX2 q4r16 x q8x GEMV: one 32-bit lane per row, two ymm per 16-row group.
//
// In the q4r16 layout (kernels.h) 32 bytes are the 4-byte slice k of eight
// rows' code bytes. vpmaddubsw against activation bytes 4k..4k+3 broadcast
// to every lane gives each row two int16 pair sums in its own lane; the
// eight products of the four slices, low and high nibbles, add up in int16
// (each pair sum |.| <= 2 * 15 * 127 = 3810, the total <= 8 * 3810 = 30480:
// exact, no saturation), then one vpmaddwd makes each row's int32 block sum,
// minus 8 * sum(x) for the nibble offset. Exact, so per row and block isum
// equals the generic kernel's; then acc += (d_w * d_x) * (float)isum,
// unfused, in block order: bit-identical to gb_q4_gemv__generic.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "f16.h"
#include "kernels.h"

namespace {

constexpr size_t kGroupBlock = 16 * 18;  // bytes of one block of a 16-row group
constexpr size_t kPrefetch = 4096;       // bytes ahead of the group stream (as the AVX-512 kernel)

inline int32_t ld32(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

// acc[0..1] += one group block g (rows 0..7 in acc[0], 8..15 in acc[1])
// against activation block x.
__attribute__((always_inline)) inline void block_acc(__m256 acc[2], const uint8_t *g, const gb_q8x_block &x) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int k = 0; k < 4; k++) {
    const __m256i xlo = _mm256_set1_epi32(ld32(x.qs + 4 * k)), xhi = _mm256_set1_epi32(ld32(x.qs + 16 + 4 * k));
    for (int h = 0; h < 2; h++) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(g + 32 + 64 * k + 32 * h));
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      s16[h] = _mm256_add_epi16(s16[h], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi)));
    }
  }
  const __m256i off = _mm256_set1_epi32(8 * x.sum);
  const __m256 xd = _mm256_set1_ps(x.d);
  for (int h = 0; h < 2; h++) {
    const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s16[h], ones), off);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(g + 16 * h)));
    acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(isum)));
  }
}

__attribute__((always_inline)) inline void prefetch_block(const uint8_t *g) {
  for (int p = 0; p < 5; p++) _mm_prefetch(reinterpret_cast<const char *>(g + kPrefetch + 64 * p), _MM_HINT_T0);
}

// y[16g .. 16g+16) for one group, rows 0..7 in acc[0] and 8..15 in acc[1].
__attribute__((always_inline)) inline void group_dot(const uint8_t *g, const gb_q8x_block *xq, size_t nb, float *y) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t b = 0; b < nb; b++, g += kGroupBlock) {
    prefetch_block(g);
    block_acc(acc, g, xq[b]);
  }
  _mm256_storeu_ps(y, acc[0]);
  _mm256_storeu_ps(y + 8, acc[1]);
}

// Two groups (g0 for y0, g1 for y1) at once, each a read stream of its own;
// per group the operations and order of group_dot.
__attribute__((always_inline)) inline void group_dot2(const uint8_t *g0, const uint8_t *g1, const gb_q8x_block *xq,
                                                      size_t nb, float *y0, float *y1) {
  __m256 a0[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, a1[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t b = 0; b < nb; b++, g0 += kGroupBlock, g1 += kGroupBlock) {
    prefetch_block(g0);
    prefetch_block(g1);
    block_acc(a0, g0, xq[b]);
    block_acc(a1, g1, xq[b]);
  }
  _mm256_storeu_ps(y0, a0[0]);
  _mm256_storeu_ps(y0 + 8, a0[1]);
  _mm256_storeu_ps(y1, a1[0]);
  _mm256_storeu_ps(y1 + 8, a1[1]);
}

}  // namespace

extern "C" void gb_q4r16_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  // The range's first and second half of groups as two read streams (as
  // the AVX-512 kernel); an odd last group alone.
  const size_t nb = (cols + 31) / 32, half = (row_end - row_begin) / 32;
  for (size_t i = 0; i < half; i++) {
    const size_t r0 = row_begin + 16 * i, r1 = r0 + 16 * half;
    group_dot2(W + (r0 / 16) * nb * kGroupBlock, W + (r1 / 16) * nb * kGroupBlock, xq, nb, y + r0, y + r1);
  }
  for (size_t r = row_begin + 32 * half; r < row_end; r += 16) group_dot(W + (r / 16) * nb * kGroupBlock, xq, nb, y + r);
}

// Per group, the positions one after another: the group's bytes (nb * 288)
// come from memory once and from L1/L2 for the other positions; each
// position's result is computed exactly as the gemv computes it.
extern "C" void gb_q4r16_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r += 16) {
    const uint8_t *g = W + (r / 16) * nb * kGroupBlock;
    for (size_t i = 0; i < m; i++) group_dot(g, XQ + i * ldxq, nb, Y + i * ldy + r);
  }
}

// Rows to f32 (prefill panels): per row and block, the four 4-byte slices
// gathered into the q4 byte order, nibbles widened to int32, minus 8, times
// the scale: d * (float)(u - 8), one rounding, as the generic expansion.
extern "C" void gb_q4r16_rows_to_f32__avx2(float *out, const uint8_t *W, size_t row_begin, size_t row_end,
                                           size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m256i eight = _mm256_set1_epi32(8);
  for (size_t r = row_begin; r < row_end; r++) {
    float *o = out + (r - row_begin) * cols;
    const uint8_t *g = W + (r / 16) * nb * kGroupBlock;
    const size_t i = r % 16;
    for (size_t b = 0; b < nb; b++, g += kGroupBlock) {
      int32_t s[4];
      for (int k = 0; k < 4; k++) memcpy(&s[k], g + 32 + 64 * k + 4 * i, 4);
      const __m128i q = _mm_setr_epi32(s[0], s[1], s[2], s[3]);
      // The generic conversion (vcvtph2ps would quiet a signalling NaN scale).
      const __m256 d = _mm256_set1_ps(gb::f16_to_f32((uint16_t)(g[2 * i] | (g[2 * i + 1] << 8))));
      const __m128i lo = _mm_and_si128(q, low4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), low4);
      float v[32];
      const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
      for (int p = 0; p < 4; p++) {
        const __m256i u = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[p]), eight);
        _mm256_storeu_ps(v + 8 * p, _mm256_mul_ps(d, _mm256_cvtepi32_ps(u)));
      }
      const size_t c0 = b * 32, n = cols - c0 < 32 ? cols - c0 : 32;
      memcpy(o + c0, v, n * sizeof(float));
    }
  }
}
