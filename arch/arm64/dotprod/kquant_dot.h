// kquant_dot.h — the dot products this folder's K-quant kernels (gemv_q4k.cpp,
// gemv_q5k.cpp, gemv_q6k.cpp) give the super-block loop they share with the
// neon folder (kquant_common.h's kquant::gemvm_superblocks): SDOT from zero,
// four lanes; codes are signed bytes (q6k: minus 32).
#ifndef GEARBX_ARCH_ARM64_DOTPROD_KQUANT_DOT_H
#define GEARBX_ARCH_ARM64_DOTPROD_KQUANT_DOT_H

#if !defined(__ARM_FEATURE_DOTPROD)
#error "dotprod/kquant_dot.h belongs to the dotprod folder (compiled with +dotprod)"
#endif

#include <arm_neon.h>

namespace gb_arm64 {
namespace sdot {

struct KquantDot {
  static inline int32x4_t dot32(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a, x0), b, x1);
  }
  static inline int32x4_t dot16(int8x16_t a, int8x16_t x) { return vdotq_s32(vdupq_n_s32(0), a, x); }
};

}  // namespace sdot
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_DOTPROD_KQUANT_DOT_H
