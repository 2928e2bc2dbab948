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
  for (size_t c = 0; c < cols; c++) {
    switch (fmt) {
      case kFmtF32: out[c] = ld_f32(row + 4 * c); break;
      case kFmtF16: out[c] = f16_to_f32(ld_u16(row + 2 * c)); break;
      case kFmtQ8: {
        const uint8_t *blk = row + (c / 32) * kQ8BlockBytes;
        out[c] = f16_to_f32(ld_u16(blk)) * (float)(int8_t)blk[2 + c % 32];
        break;
      }
      case kFmtQ4: {
        const uint8_t *blk = row + (c / 32) * kQ4BlockBytes;
        const size_t j = c % 32;
        const int q = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
        out[c] = f16_to_f32(ld_u16(blk)) * (float)(q - 8);
        break;
      }
      default: out[c] = 0.0f;
    }
  }
}

}  // namespace gb
