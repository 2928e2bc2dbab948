// krows16.h — the 16-row interleaved layout of the K-quant super-blocks
// (q4kr16, q6kr16; kernels.h gives the byte order). One group super-block is
// the sixteen rows' blocks of one super-block column in 4-byte slices: byte
// j < 4*(B/4) of row i at 64*(j/4) + 4*i + j%4, the B%4 bytes left of each
// block (q6k's f16 d) after the slices, row by row. Used by the generic
// kernels, the adapters that run a row-major kernel on de-interleaved rows,
// the converter and the tests.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

namespace gb_krows16 {

constexpr size_t kRows = 16;

// Row i's block (B bytes) out of group super-block g (16 * B bytes).
static inline void gather(uint8_t *blk, const uint8_t *g, size_t B, size_t i) {
  const size_t ns = B / 4, tail = B % 4;
  for (size_t k = 0; k < ns; k++) memcpy(blk + 4 * k, g + 64 * k + 4 * i, 4);
  if (tail) memcpy(blk + 4 * ns, g + 64 * ns + tail * i, tail);
}

// The inverse: row i's block into group super-block g.
static inline void scatter(uint8_t *g, const uint8_t *blk, size_t B, size_t i) {
  const size_t ns = B / 4, tail = B % 4;
  for (size_t k = 0; k < ns; k++) memcpy(g + 64 * k + 4 * i, blk + 4 * k, 4);
  if (tail) memcpy(g + 64 * ns + tail * i, blk + 4 * ns, tail);
}

// Whole matrices (rows % 16 == 0, cols % 256 == 0): row-major <-> 16-row.
static inline void from_rows(uint8_t *out, const uint8_t *in, size_t rows, size_t cols, size_t B) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * B;
  for (size_t g = 0; g < rows / kRows; g++)
    for (size_t s = 0; s < nsb; s++)
      for (size_t i = 0; i < kRows; i++) scatter(out + (g * nsb + s) * kRows * B, in + (g * kRows + i) * rb + s * B, B, i);
}
static inline void to_rows(uint8_t *out, const uint8_t *in, size_t rows, size_t cols, size_t B) {
  const size_t nsb = cols / GB_QK_K, rb = nsb * B;
  for (size_t g = 0; g < rows / kRows; g++)
    for (size_t s = 0; s < nsb; s++)
      for (size_t i = 0; i < kRows; i++) gather(out + (g * kRows + i) * rb + s * B, in + (g * nsb + s) * kRows * B, B, i);
}

// A folder without a kernel of its own for the 16-row layout runs its
// row-major kernel on de-interleaved rows: per group, chunks of up to
// kChunk super-blocks are gathered into a row-major scratch (16 rows x
// kChunk blocks on the stack) and the row-major kernel's results over each
// chunk are added up. Same integer sums; the float sums are grouped per
// chunk (within the tolerance of the kernel tests).
constexpr size_t kChunk = 4;

template <size_t B>
static inline void gather_chunk(uint8_t *scratch, const uint8_t *gsb, size_t n) {
  for (size_t s = 0; s < n; s++)
    for (size_t i = 0; i < kRows; i++) gather(scratch + i * n * B + s * B, gsb + s * kRows * B, B, i);
}

template <size_t B>
static inline void adapt_gemv(gb_gemv_fn rowmajor, float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin,
                       size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  alignas(64) uint8_t scratch[kRows * kChunk * B];
  float part[kRows];
  for (size_t r = row_begin; r < row_end; r += kRows) {
    const uint8_t *g = W + (r / kRows) * nsb * kRows * B;
    for (size_t s0 = 0; s0 < nsb; s0 += kChunk) {
      const size_t n = nsb - s0 < kChunk ? nsb - s0 : kChunk;
      gather_chunk<B>(scratch, g + s0 * kRows * B, n);
      rowmajor(part, scratch, nullptr, xq + s0 * (GB_QK_K / GB_QBLOCK), 0, kRows, n * GB_QK_K);
      for (size_t i = 0; i < kRows; i++) y[r + i] = s0 == 0 ? part[i] : y[r + i] + part[i];
    }
  }
}

template <size_t B>
static inline void adapt_gemvm(gb_gemvm_fn rowmajor, float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq,
                        size_t m, size_t row_begin, size_t row_end, size_t cols) {
  const size_t nsb = cols / GB_QK_K;
  alignas(64) uint8_t scratch[kRows * kChunk * B];
  float part[GB_GEMVM_MAX_M * kRows];
  for (size_t r = row_begin; r < row_end; r += kRows) {
    const uint8_t *g = W + (r / kRows) * nsb * kRows * B;
    for (size_t s0 = 0; s0 < nsb; s0 += kChunk) {
      const size_t n = nsb - s0 < kChunk ? nsb - s0 : kChunk;
      gather_chunk<B>(scratch, g + s0 * kRows * B, n);
      rowmajor(part, kRows, scratch, nullptr, 0, XQ + s0 * (GB_QK_K / GB_QBLOCK), ldxq, m, 0, kRows, n * GB_QK_K);
      for (size_t p = 0; p < m; p++)
        for (size_t i = 0; i < kRows; i++)
          Y[p * ldy + r + i] = s0 == 0 ? part[p * kRows + i] : Y[p * ldy + r + i] + part[p * kRows + i];
    }
  }
}

}  // namespace gb_krows16
