// ARMv8-A Advanced SIMD f16 GEMV, one position (gemv) and several (gemvm),
// and the f16 row expansion; the Cortex-A53 baseline.
//
// No fp16 arithmetic: binary16 weights are widened with FCVTL / FCVTL2
// (vcvt_f32_f16, part of ARMv8-A) and accumulated in f32: four rows x 8
// columns per step with one fused accumulator of four lanes per (row,
// position), the tile loop of gemv_float.h (gb_arm64::neon::float_gemvm):
// a different order of summation than generic, within the tests' tolerance;
// every gemvm is bit-identical per position to the gemv, and results do not
// depend on the row split.
//
// Weight rows are not assumed aligned: every weight load is a byte load
// (vld1q_u8) reinterpreted, and the column tails go through memcpy. Nothing
// is read past the last row's bytes or past x[cols).
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "gemv_float.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::neon;

// FCVTL / FCVTL2 (ARMv8-A): exact for every binary16.
struct F16Weights {
  static constexpr size_t kBytes = 2;
  static inline void load8(const uint8_t *p, float32x4_t &lo, float32x4_t &hi) {
    const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(p));
    lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
    hi = vcvt_high_f32_f16(vreinterpretq_f16_u16(h));
  }
};

}  // namespace

extern "C" void gb_f16_gemv__neon(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  float_gemvm<F16Weights>(y, 0, W, x, 0, 1, row_begin, row_end, cols);
}

extern "C" void gb_f16_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  float_gemvm<F16Weights>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}

// ---- rows to f32 (prefill panels) ------------------------------------------------
// FCVTL is exact for every non-NaN binary16; NaNs are patched to generic's
// bit pattern (sign | 0x7f800000 | mant << 13: a signalling NaN stays
// signalling, where FCVTL would quieten it or give the default NaN).
namespace {

inline void f16x8_to_f32(float *out, uint16x8_t h) {
  const uint16x8_t is_nan = vcgtq_u16(vandq_u16(h, vdupq_n_u16(0x7fff)), vdupq_n_u16(0x7c00));
  const uint16x8_t sign = vandq_u16(h, vdupq_n_u16(0x8000));
  const uint16x8_t mant = vandq_u16(h, vdupq_n_u16(0x3ff));
  const uint32x4_t inf = vdupq_n_u32(0x7f800000u);
  const uint32x4_t nan_lo = vorrq_u32(vorrq_u32(vshll_n_u16(vget_low_u16(sign), 16), inf),
                                      vshll_n_u16(vget_low_u16(mant), 13));
  const uint32x4_t nan_hi = vorrq_u32(vorrq_u32(vshll_high_n_u16(sign, 16), inf), vshll_high_n_u16(mant, 13));
  const uint32x4_t lo = vreinterpretq_u32_f32(vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))));
  const uint32x4_t hi = vreinterpretq_u32_f32(vcvt_high_f32_f16(vreinterpretq_f16_u16(h)));
  const uint32x4_t m_lo = vmovl_u16(vget_low_u16(is_nan));  // 0 or 0xffff: widen, then fill
  const uint32x4_t m_hi = vmovl_high_u16(is_nan);
  const uint32x4_t sel_lo = vorrq_u32(m_lo, vshlq_n_u32(m_lo, 16));
  const uint32x4_t sel_hi = vorrq_u32(m_hi, vshlq_n_u32(m_hi, 16));
  vst1q_f32(out, vreinterpretq_f32_u32(vbslq_u32(sel_lo, nan_lo, lo)));
  vst1q_f32(out + 4, vreinterpretq_f32_u32(vbslq_u32(sel_hi, nan_hi, hi)));
}

}  // namespace

static void f16_row_to_f32(float *out, const uint8_t *row, size_t cols) {
  size_t c = 0;
  for (; c + 8 <= cols; c += 8) f16x8_to_f32(out + c, vreinterpretq_u16_u8(vld1q_u8(row + 2 * c)));
  if (c < cols) {
    const size_t rem = cols - c;
    uint16_t ht[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(ht, row + 2 * c, rem * 2);
    float ft[8];
    f16x8_to_f32(ft, vld1q_u16(ht));
    memcpy(out + c, ft, rem * 4);
  }
}

extern "C" void gb_f16_rows_to_f32__neon(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = 2 * cols;
  for (size_t r = row_begin; r < row_end; r++) f16_row_to_f32(out + (r - row_begin) * cols, W + r * rb, cols);
}
