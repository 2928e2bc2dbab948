// Generic kernels of the K-quant q6k (layout in kernels.h), row-major and in
// the 16-row layout q6kr16 (the same code on blocks gathered out of their
// group, arch/krows16.h): each super-block unpacked to its 256 signed codes
// in element order and its sixteen scales, then gemv_ggml.h's arithmetic of
// super-blocks.
#include "gemv_ggml.h"

namespace {

struct Q6K {
  using Block = Block256;
  static constexpr size_t kBytes = GB_Q6K_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block256 *u) {
    // Per 128-weight half n = s/4: ql bytes 64n.., qh bytes 128 + 32n..;
    // group g = s%4 of the half takes the low (g < 2) or high nibbles of
    // ql[64n + 32(g%2) + l] and bits 2g..2g+1 of qh[32n + l]; minus 32.
    for (int s = 0; s < 8; s++) {
      const int n = s / 4, g = s % 4;
      const uint8_t *ql = b + 64 * n + 32 * (g % 2), *qh = b + 128 + 32 * n;
      for (int l = 0; l < 32; l++) {
        const int lo = g < 2 ? ql[l] & 15 : ql[l] >> 4;
        u->q[32 * s + l] = (int8_t)((lo | (((qh[l] >> (2 * g)) & 3) << 4)) - 32);
      }
    }
    for (int t = 0; t < 16; t++) {
      u->sc[t] = (int8_t)b[192 + t];
      u->mn[t] = 0;
    }
    u->d = ld_f16(b + 208);
    u->dmin = 0.0f;
  }
};

}  // namespace

GB_GGML_GENERIC(q6k, Q6K, false)
GB_GGML_GENERIC(q6kr16, Q6K, true)
