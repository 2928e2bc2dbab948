// gemv_float.h — what the f32 and f16 gemvm of this folder (gemv_f32.cpp,
// gemv_f16.cpp) share: positions taken in chunks of four, each chunk one
// tile of named accumulators (SVE vectors cannot be held in arrays).
//
// Static, as in arm64_common.h: each kernel object keeps its own copy.
#ifndef GEARBX_ARCH_ARM64_SVE_GEMV_FLOAT_H
#define GEARBX_ARCH_ARM64_SVE_GEMV_FLOAT_H

#include <stddef.h>

#include <type_traits>

namespace gb_arm64 {
namespace sve {

// Positions [0, m) in chunks of four (a last chunk of 1..3): fn(P, y, x),
// P a std::integral_constant, y = Y + p0 * ldy and x[0..4) the chunk's
// positions (the last one repeated past the chunk's end).
template <class Fn>
static inline void position_chunks4(float *Y, size_t ldy, const float *X, size_t ldx, size_t m, Fn fn) {
  for (size_t p0 = 0; p0 < m; p0 += 4) {
    const size_t np = m - p0 < 4 ? m - p0 : 4;
    const float *x[4];
    for (size_t p = 0; p < 4; p++) x[p] = X + (p0 + (p < np ? p : 0)) * ldx;
    float *y = Y + p0 * ldy;
    switch (np) {
      case 4: fn(std::integral_constant<int, 4>(), y, x); break;
      case 3: fn(std::integral_constant<int, 3>(), y, x); break;
      case 2: fn(std::integral_constant<int, 2>(), y, x); break;
      default: fn(std::integral_constant<int, 1>(), y, x); break;
    }
  }
}

}  // namespace sve
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_SVE_GEMV_FLOAT_H
