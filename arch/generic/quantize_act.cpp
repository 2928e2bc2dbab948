// Generic activation quantizer: symmetric int8 per 32 values, scale
// amax / 127, round half away from zero. SIMD variants must match exactly.
#include <math.h>

#include "../kernels.h"

extern "C" void gb_q8x_quantize__generic(gb_q8x_block *out, const float *x, size_t n) {
  const size_t nb = (n + 31) / 32;
  for (size_t b = 0; b < nb; b++) {
    float v[32];
    float amax = 0.0f;
    for (size_t j = 0; j < 32; j++) {
      const size_t i = b * 32 + j;
      v[j] = i < n ? x[i] : 0.0f;
      const float a = fabsf(v[j]);
      amax = a > amax ? a : amax;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = d;
    int32_t sum = 0;
    for (size_t j = 0; j < 32; j++) {
      // Casting NaN or a value out of range to an integer is undefined:
      // NaN (an inf or NaN input; inf times id = 0) gives 0, as the x86
      // kernels do, and the clamp only acts for a subnormal amax (id = inf).
      const float r = roundf(v[j] * id);
      out[b].qs[j] = (int8_t)(r != r ? 0.0f : r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
      sum += out[b].qs[j];
    }
    out[b].sum = sum;
  }
}
