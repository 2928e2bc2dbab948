// ARMv8-A Advanced SIMD f32 GEMV, one position (gemv) and several (gemvm),
// the Cortex-A53 baseline.
//
// Four rows x 8 columns per step with one fused accumulator of four lanes
// per (row, position), the tile loop of gemv_float.h (gb_arm64::neon::
// float_gemvm): a different order of summation than generic, within the
// tests' tolerance; every gemvm is bit-identical per position to the gemv,
// and results do not depend on the row split.
//
// Weight rows are not assumed aligned: every weight load is a byte load
// (vld1q_u8) reinterpreted. Nothing is read past the last row's bytes or
// past x[cols).
#include <arm_neon.h>
#include <stdint.h>

#include "arm64/arm64_common.h"
#include "gemv_float.h"
#include "kernels.h"

namespace {

using namespace gb_arm64;
using namespace gb_arm64::neon;

struct F32Weights {
  static constexpr size_t kBytes = 4;
  static inline void load8(const uint8_t *p, float32x4_t &lo, float32x4_t &hi) {
    lo = load_f4(p);
    hi = load_f4(p + 16);
  }
};

}  // namespace

extern "C" void gb_f32_gemv__neon(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                  size_t row_begin, size_t row_end, size_t cols) {
  float_gemvm<F32Weights>(y, 0, W, x, 0, 1, row_begin, row_end, cols);
}

extern "C" void gb_f32_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                   const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                   size_t cols) {
  float_gemvm<F32Weights>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}
