// q6kr16 (the 16-row K-quant layout, arch/krows16.h) through this folder's
// row-major q6k kernels, on rows gathered out of their group a few
// super-blocks at a time (gb_krows16::adapt_gemv / adapt_gemvm); q4kr16 has
// a kernel of its own (gemv_q4kr16.cpp).
//
// The gather is a transpose: eight 64-byte slices of a group super-block
// are an 8 x 16 matrix of 4-byte words (slice k, row i), and row i's block
// takes word i of each slice in order. Two 8 x 8 word transposes (rows 0-7
// and 8-15; unpack 32, unpack 64, 128-bit permutes) move eight slices of
// all sixteen rows; slices past the last multiple of eight and the B % 4
// tail bytes go as gb_krows16::gather does. The scalar gather (4-byte
// copies) held the kernels to 16-21 % of the read bandwidth on the AVX-512
// host with the AVX2 kernels selected, this one with the prefetch to 36-39 %
// (docs/RESULTS.md, "Session 19"); the row-major kernels themselves run at
// 65-69 % there (compute-bound), so a native 16-row AVX2 kernel would gain
// about as much again.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "krows16.h"

namespace {

// Super-blocks per gather: 4 (9-13 KiB of rows, in L1) ran 12.5 GB/s, 8 and
// 16 ran 9.4 and 8.5 on the AVX-512 host.
constexpr size_t kChunk = 4;
constexpr size_t kAhead = 4096;  // prefetch distance in the group stream, every line

// Words 8c .. 8c + 7 of rows 8h .. 8h + 7 for slices s0 .. s0 + 7 of group
// super-block g, into each row's block (out + i * ld, at byte 4 * s0).
__attribute__((always_inline)) inline void transpose8(uint8_t *out, size_t ld, const uint8_t *g, size_t s0, int h) {
  __m256i r[8], t[8];
  for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(g + 64 * (s0 + k) + 32 * h));
  // r[k] = words (k, 0..7); after the transpose t[i] = words (0..7, i).
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_epi32(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_epi32(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_unpacklo_epi64(t[k], t[k + 2]);
    r[k + 1] = _mm256_unpackhi_epi64(t[k], t[k + 2]);
    r[k + 2] = _mm256_unpacklo_epi64(t[k + 1], t[k + 3]);
    r[k + 3] = _mm256_unpackhi_epi64(t[k + 1], t[k + 3]);
  }
  // r[0..3] hold rows {0,4}, {1,5}, {2,6}, {3,7} of slices 0..3 (128-bit
  // halves), r[4..7] the same of slices 4..7.
  for (int j = 0; j < 4; j++) {
    const __m256i lo = _mm256_permute2x128_si256(r[j], r[4 + j], 0x20);  // row j
    const __m256i hi = _mm256_permute2x128_si256(r[j], r[4 + j], 0x31);  // row j + 4
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + (size_t)(8 * h + j) * ld + 4 * s0), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + (size_t)(8 * h + j + 4) * ld + 4 * s0), hi);
  }
}

template <size_t B>
void gather_chunk_avx2(uint8_t *scratch, const uint8_t *gsb, size_t n) {
  constexpr size_t ns = B / 4, full = ns / 8 * 8;
  const size_t ld = n * B;  // row stride of the scratch
  for (size_t s = 0; s < n; s++) {
    const uint8_t *g = gsb + s * gb_krows16::kRows * B;
    uint8_t *out = scratch + s * B;
    for (size_t o = 0; o < gb_krows16::kRows * B; o += 64) _mm_prefetch(reinterpret_cast<const char *>(g + kAhead + o), _MM_HINT_T0);
    for (size_t s0 = 0; s0 < full; s0 += 8) {
      transpose8(out, ld, g, s0, 0);
      transpose8(out, ld, g, s0, 1);
    }
    for (size_t i = 0; i < gb_krows16::kRows; i++) {
      for (size_t k = full; k < ns; k++) memcpy(out + i * ld + 4 * k, g + 64 * k + 4 * i, 4);
      if (B % 4) memcpy(out + i * ld + 4 * ns, g + 64 * ns + (B % 4) * i, B % 4);
    }
  }
}

}  // namespace

extern "C" void gb_q6kr16_gemv__avx2(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq, size_t row_begin,
                                     size_t row_end, size_t cols) {
  gb_krows16::adapt_gemv<GB_Q6K_BLOCK_BYTES, gather_chunk_avx2<GB_Q6K_BLOCK_BYTES>, kChunk>(gb_q6k_gemv__avx2, y, W, xq, row_begin,
                                                                                    row_end, cols);
}
extern "C" void gb_q6kr16_gemvm__avx2(float *Y, size_t ldy, const uint8_t *W, const float *, size_t, const gb_q8x_block *XQ,
                                      size_t ldxq, size_t m, size_t row_begin, size_t row_end, size_t cols) {
  gb_krows16::adapt_gemvm<GB_Q6K_BLOCK_BYTES, gather_chunk_avx2<GB_Q6K_BLOCK_BYTES>, kChunk>(gb_q6k_gemvm__avx2, Y, ldy, W, XQ, ldxq,
                                                                                     m, row_begin, row_end, cols);
}
