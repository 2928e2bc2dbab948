// Generic q4r16 kernels: q4 blocks with 16 rows interleaved (kernels.h).
// Per row and block the same exact int32 sum and the same float
// multiply-add, in block order, as gb_q4_gemv__generic: a matrix stored as
// q4 and as q4r16 gives bit-identical results.
#include "../f16.h"
#include "../kernels.h"

namespace {

constexpr size_t kGroupBlock = 16 * 18;  // bytes of one block of a 16-row group

// Block b of row r: its scale and its 16 code bytes gathered back into the
// q4 order (byte j: weights j and j + 16).
inline const uint8_t *block_of(const uint8_t *W, size_t nb, size_t r, size_t b, float *d, uint8_t q[16]) {
  const uint8_t *g = W + (r / 16) * nb * kGroupBlock + b * kGroupBlock;
  const size_t i = r % 16;
  *d = gb::f16_to_f32((uint16_t)(g[2 * i] | (g[2 * i + 1] << 8)));
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 4; j++) q[4 * k + j] = g[32 + 64 * k + 4 * i + j];
  return g;
}

inline int32_t dot_block(const uint8_t q[16], const int8_t *x) {
  int32_t isum = 0;
  for (int j = 0; j < 16; j++) {
    isum += ((int32_t)(q[j] & 15) - 8) * (int32_t)x[j];
    isum += ((int32_t)(q[j] >> 4) - 8) * (int32_t)x[j + 16];
  }
  return isum;
}

}  // namespace

extern "C" void gb_q4r16_gemv__generic(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                       size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r++) {
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++) {
      float d;
      uint8_t q[16];
      block_of(W, nb, r, b, &d, q);
      acc += d * xq[b].d * (float)dot_block(q, xq[b].qs);
    }
    y[r] = acc;
  }
}

extern "C" void gb_q4r16_gemvm__generic(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                        const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                        size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r++) {
    float acc[GB_GEMVM_MAX_M];
    for (size_t i = 0; i < m; i++) acc[i] = 0.0f;
    for (size_t b = 0; b < nb; b++) {
      float d;
      uint8_t q[16];
      block_of(W, nb, r, b, &d, q);
      for (size_t i = 0; i < m; i++) {
        const gb_q8x_block &xb = XQ[i * ldxq + b];
        acc[i] += d * xb.d * (float)dot_block(q, xb.qs);
      }
    }
    for (size_t i = 0; i < m; i++) Y[i * ldy + r] = acc[i];
  }
}

extern "C" void gb_q4r16_rows_to_f32__generic(float *out, const uint8_t *W, size_t row_begin, size_t row_end,
                                              size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r++) {
    float *o = out + (r - row_begin) * cols;
    for (size_t b = 0; b < nb; b++) {
      float d;
      uint8_t q[16];
      block_of(W, nb, r, b, &d, q);
      float v[32];
      for (int j = 0; j < 16; j++) {
        v[j] = d * (float)((int)(q[j] & 15) - 8);
        v[j + 16] = d * (float)((int)(q[j] >> 4) - 8);
      }
      const size_t c0 = b * 32, n = cols - c0 < 32 ? cols - c0 : 32;
      for (size_t j = 0; j < n; j++) o[c0 + j] = v[j];
    }
  }
}
