// Generic q8 x q8x GEMV: per 32-weight block an exact int32 dot product of
// int8 weights and int8 activations, then one float multiply-add with the
// two scales. SIMD variants must produce the same per-block integer sums.
#include "../f16.h"
#include "../kernels.h"

extern "C" void gb_q8_gemv__generic(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *blk = W + r * nb * 34;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += 34) {
      const float d = gb::f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
      const int8_t *q = (const int8_t *)(blk + 2);
      int32_t isum = 0;
      for (int j = 0; j < 32; j++) isum += (int32_t)q[j] * (int32_t)xq[b].qs[j];
      acc += d * xq[b].d * (float)isum;
    }
    y[r] = acc;
  }
}

// Multi-position: each weight block is read once and dotted with the m
// positions' blocks; per position the same exact isum and float multiply-add.
extern "C" void gb_q8_gemvm__generic(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *blk = W + r * nb * 34;
    float acc[GB_GEMVM_MAX_M];
    for (size_t i = 0; i < m; i++) acc[i] = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += 34) {
      const float d = gb::f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
      const int8_t *q = (const int8_t *)(blk + 2);
      for (size_t i = 0; i < m; i++) {
        const gb_q8x_block &xb = XQ[i * ldxq + b];
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += (int32_t)q[j] * (int32_t)xb.qs[j];
        acc[i] += d * xb.d * (float)isum;
      }
    }
    for (size_t i = 0; i < m; i++) Y[i * ldy + r] = acc[i];
  }
}

static void q8_row_to_f32(float *out, const uint8_t *row, size_t cols) {
  // Block by block (one scale conversion per 32 weights): this expands the
  // weight panels of batched prefill.
  for (size_t c0 = 0; c0 < cols; c0 += 32) {
    const uint8_t *blk = row + (c0 / 32) * 34;
    const float d = gb::f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
    const size_t n = cols - c0 < 32 ? cols - c0 : 32;
    for (size_t j = 0; j < n; j++) out[c0 + j] = d * (float)(int8_t)blk[2 + j];
  }
}

extern "C" void gb_q8_rows_to_f32__generic(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = (cols + 31) / 32 * 34;
  for (size_t r = row_begin; r < row_end; r++) q8_row_to_f32(out + (r - row_begin) * cols, W + r * rb, cols);
}
