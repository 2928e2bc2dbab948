// ARMv8.2-A SDOT GEMV of GGUF's i-quants: arch/arm64/iquant_gemv.h's driver
// with one SDOT per 16 weights (four products summed in int32 per lane).
#include "arm64/iquant_gemv.h"

namespace {

inline int32x4_t sdot16(int8x16_t w, int8x16_t x) { return vdotq_s32(vdupq_n_s32(0), w, x); }

}  // namespace

GB_IQUANTS_ARM64(dotprod, sdot16)
