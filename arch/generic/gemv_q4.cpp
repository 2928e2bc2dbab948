// Generic q4 x q8x GEMV: per block, nibbles minus 8 times int8 activations
// summed exactly in int32, then one float multiply-add with the scales.
#include "../f16.h"
#include "../kernels.h"

extern "C" void gb_q4_gemv__generic(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *blk = W + r * nb * 18;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += 18) {
      const float d = gb::f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
      const uint8_t *q = blk + 2;
      int32_t isum = 0;
      for (int j = 0; j < 16; j++) {
        isum += ((int32_t)(q[j] & 15) - 8) * (int32_t)xq[b].qs[j];
        isum += ((int32_t)(q[j] >> 4) - 8) * (int32_t)xq[b].qs[j + 16];
      }
      acc += d * xq[b].d * (float)isum;
    }
    y[r] = acc;
  }
}

// Multi-position: each weight block is unpacked once and dotted with the m
// positions' blocks; per position the same exact isum and float multiply-add.
extern "C" void gb_q4_gemvm__generic(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r++) {
    const uint8_t *blk = W + r * nb * 18;
    float acc[GB_GEMVM_MAX_M];
    for (size_t i = 0; i < m; i++) acc[i] = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += 18) {
      const float d = gb::f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
      int32_t w[32];
      for (int j = 0; j < 16; j++) {
        w[j] = (int32_t)(blk[2 + j] & 15) - 8;
        w[j + 16] = (int32_t)(blk[2 + j] >> 4) - 8;
      }
      for (size_t i = 0; i < m; i++) {
        const gb_q8x_block &xb = XQ[i * ldxq + b];
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += w[j] * (int32_t)xb.qs[j];
        acc[i] += d * xb.d * (float)isum;
      }
    }
    for (size_t i = 0; i < m; i++) Y[i * ldy + r] = acc[i];
  }
}

static void q4_row_to_f32(float *out, const uint8_t *row, size_t cols) {
  // Block by block (one scale conversion per 32 weights): this expands the
  // weight panels of batched prefill.
  for (size_t c0 = 0; c0 < cols; c0 += 32) {
    const uint8_t *blk = row + (c0 / 32) * 18;
    const float d = gb::f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
    float v[32];
    for (int j = 0; j < 16; j++) {
      v[j] = d * (float)((int)(blk[2 + j] & 15) - 8);
      v[j + 16] = d * (float)((int)(blk[2 + j] >> 4) - 8);
    }
    const size_t n = cols - c0 < 32 ? cols - c0 : 32;
    for (size_t j = 0; j < n; j++) out[c0 + j] = v[j];
  }
}

extern "C" void gb_q4_rows_to_f32__generic(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = (cols + 31) / 32 * 18;
  for (size_t r = row_begin; r < row_end; r++) q4_row_to_f32(out + (r - row_begin) * cols, W + r * rb, cols);
}
