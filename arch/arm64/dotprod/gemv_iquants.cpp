// ARMv8.2-A SDOT GEMV of GGUF's i-quants (arch/arm64/iquant_gemv.h's
// driver) and of Q1_0 / Q2_0 (arch/arm64/lowbit_gemv.h), both with one SDOT
// per 16 weights (four products summed in int32 per lane).
#include "arm64/iquant_gemv.h"
#include "arm64/lowbit_gemv.h"

namespace {

inline int32x4_t sdot16(int8x16_t w, int8x16_t x) { return vdotq_s32(vdupq_n_s32(0), w, x); }

}  // namespace

GB_IQUANTS_ARM64(dotprod, sdot16)
GB_LOWBIT_ARM64(dotprod, sdot16)
