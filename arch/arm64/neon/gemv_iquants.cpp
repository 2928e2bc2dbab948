// ARMv8-A Advanced SIMD GEMV of GGUF's i-quants (arch/arm64/iquant_gemv.h's
// driver) and of Q1_0 / Q2_0 (arch/arm64/lowbit_gemv.h), both with SMULL /
// SMLAL2 into int16 (two products per lane, <= 2 * 62 * 128: exact) widened
// pairwise (SADDLP).
#include "arm64/iquant_gemv.h"
#include "arm64/lowbit_gemv.h"

namespace {

inline int32x4_t dot16(int8x16_t w, int8x16_t x) {
  return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x));
}

}  // namespace

GB_IQUANTS_ARM64(neon, dot16)
GB_LOWBIT_ARM64(neon, dot16)
