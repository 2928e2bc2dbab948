// Generic kernels of the K-quant q5k (layout in kernels.h): each super-block
// unpacked to its 256 codes in element order (q4k's nibbles and a fifth bit)
// and its eight scales and mins, then gemv_ggml.h's arithmetic of
// super-blocks.
#include "gemv_ggml.h"

namespace {

struct Q5K {
  using Block = Block256;
  static constexpr size_t kBytes = GB_Q5K_BLOCK_BYTES;
  static constexpr bool kMin = true;
  static void unpack(const uint8_t *b, Block256 *u) {
    u->d = ld_f16(b);
    u->dmin = ld_f16(b + 2);
    for (int s = 0; s < 8; s++) set_scale_min_k4(s, b + 4, u);
    // The fifth bit of weight l of group s is bit s of qh[l].
    const uint8_t *qh = b + 16;
    nibbles256(b + 48, u->q);
    for (int s = 0; s < 8; s++)
      for (int l = 0; l < 32; l++) u->q[32 * s + l] = (int8_t)(u->q[32 * s + l] | (((qh[l] >> s) & 1) << 4));
  }
};

}  // namespace

GB_GGML_GENERIC(q5k, Q5K, false)
