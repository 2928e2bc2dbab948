// quant.cpp — weight quantizers (see quant.h).
#include "quant.h"

#include <math.h>
#include <string.h>

#include "bytes.h"
#include "f16.h"
#include "format.h"

namespace gb {

void quantize_row_q4(uint8_t *out, const float *x, size_t cols) {
  const size_t nb = (cols + kBlock - 1) / kBlock;
  for (size_t b = 0; b < nb; b++, out += kQ4BlockBytes) {
    float v[32];
    float m = 0.0f, amax = 0.0f;
    for (size_t j = 0; j < 32; j++) {
      const size_t i = b * 32 + j;
      v[j] = i < cols ? x[i] : 0.0f;
      if (fabsf(v[j]) > amax) { amax = fabsf(v[j]); m = v[j]; }
    }
    const uint16_t dh = f32_to_f16(m / -8.0f);
    const float d = f16_to_f32(dh);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    st_u16(out, dh);
    for (size_t j = 0; j < 16; j++) {
      int lo = (int)lrintf(v[j] * id), hi = (int)lrintf(v[j + 16] * id);
      lo = lo < -8 ? -8 : (lo > 7 ? 7 : lo);
      hi = hi < -8 ? -8 : (hi > 7 ? 7 : hi);
      out[2 + j] = (uint8_t)((lo + 8) | ((hi + 8) << 4));
    }
  }
}

void quantize_row_q8(uint8_t *out, const float *x, size_t cols) {
  const size_t nb = (cols + kBlock - 1) / kBlock;
  for (size_t b = 0; b < nb; b++, out += kQ8BlockBytes) {
    float v[32];
    float amax = 0.0f;
    for (size_t j = 0; j < 32; j++) {
      const size_t i = b * 32 + j;
      v[j] = i < cols ? x[i] : 0.0f;
      amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
    }
    const uint16_t dh = f32_to_f16(amax / 127.0f);
    const float d = f16_to_f32(dh);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    st_u16(out, dh);
    for (size_t j = 0; j < 32; j++) {
      int q = (int)lrintf(v[j] * id);
      q = q < -127 ? -127 : (q > 127 ? 127 : q);
      out[2 + j] = (uint8_t)(int8_t)q;
    }
  }
}

void quantize_row_f16(uint8_t *out, const float *x, size_t cols) {
  for (size_t c = 0; c < cols; c++) st_u16(out + 2 * c, f32_to_f16(x[c]));
}

void quantize_row(uint32_t fmt, uint8_t *out, const float *x, size_t cols) {
  switch (fmt) {
    case kFmtF32: memcpy(out, x, cols * 4); break;
    case kFmtF16: quantize_row_f16(out, x, cols); break;
    case kFmtQ8: quantize_row_q8(out, x, cols); break;
    case kFmtQ4: quantize_row_q4(out, x, cols); break;
    default: break;
  }
}

void dequantize_row(uint32_t fmt, float *out, const uint8_t *row, size_t cols) {
  const FormatInfo *f = format_info(fmt);
  if (f && !is_memory_only_format(fmt)) {
    f->to_f32(out, row, 0, 1, cols);  // rows [0, 1) of the matrix at row
    return;
  }
  for (size_t c = 0; c < cols; c++) out[c] = 0.0f;
}

// Group g of 16 rows, block b: 16 scales, then for k = 0..3 the 4-byte
// slice k of each row's 16 code bytes.
void q4_rows16_from_rows(uint8_t *out, const uint8_t *in, size_t rows, size_t cols) {
  const size_t nb = (cols + kBlock - 1) / kBlock, rb = nb * kQ4BlockBytes;
  for (size_t g = 0; g < rows / kRows16; g++)
    for (size_t b = 0; b < nb; b++) {
      uint8_t *o = out + g * kRows16 * rb + b * kRows16 * kQ4BlockBytes;
      for (size_t i = 0; i < kRows16; i++) {
        const uint8_t *blk = in + (g * kRows16 + i) * rb + b * kQ4BlockBytes;
        memcpy(o + 2 * i, blk, 2);
        for (size_t k = 0; k < 4; k++) memcpy(o + 32 + 64 * k + 4 * i, blk + 2 + 4 * k, 4);
      }
    }
}

void q4_rows_from_rows16(uint8_t *out, const uint8_t *in, size_t rows, size_t cols) {
  const size_t nb = (cols + kBlock - 1) / kBlock, rb = nb * kQ4BlockBytes;
  for (size_t g = 0; g < rows / kRows16; g++)
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *s = in + g * kRows16 * rb + b * kRows16 * kQ4BlockBytes;
      for (size_t i = 0; i < kRows16; i++) {
        uint8_t *blk = out + (g * kRows16 + i) * rb + b * kQ4BlockBytes;
        memcpy(blk, s + 2 * i, 2);
        for (size_t k = 0; k < 4; k++) memcpy(blk + 2 + 4 * k, s + 32 + 64 * k + 4 * i, 4);
      }
    }
}

}  // namespace gb
