// kquant_dot.h — the dot products this folder's K-quant kernels (gemv_q4k.cpp,
// gemv_q5k.cpp, gemv_q6k.cpp) give the super-block loop they share with the
// dotprod folder (kquant_common.h's kquant::gemvm_superblocks), without SDOT:
// SMULL / SMLAL into int16 lanes (dot32: four products per lane, |w| <= 31
// (q5k) so |sum| <= 4 * 31 * 128 < 2^15; dot16: two, |w| <= 32), widened
// pairwise (SADDLP).
#ifndef GEARBX_ARCH_ARM64_NEON_KQUANT_DOT_H
#define GEARBX_ARCH_ARM64_NEON_KQUANT_DOT_H

#include <arm_neon.h>

namespace gb_arm64 {
namespace neon {

struct KquantDot {
  static inline int32x4_t dot32(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1) {
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(x0));
    p = vmlal_high_s8(p, a, x0);
    p = vmlal_s8(p, vget_low_s8(b), vget_low_s8(x1));
    p = vmlal_high_s8(p, b, x1);
    return vpaddlq_s16(p);
  }
  static inline int32x4_t dot16(int8x16_t a, int8x16_t x) {
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(x)), a, x));
  }
};

}  // namespace neon
}  // namespace gb_arm64

#endif  // GEARBX_ARCH_ARM64_NEON_KQUANT_DOT_H
