// Generic kernels of the K-quant q4k (layout in kernels.h), row-major and in
// the 16-row layout q4kr16 (the same code on blocks gathered out of their
// group, arch/krows16.h): each super-block unpacked to its 256 codes in
// element order and its eight scales and mins, then gemv_ggml.h's
// arithmetic of super-blocks.
#include "gemv_ggml.h"

namespace {

struct Q4K {
  using Block = Block256;
  static constexpr size_t kBytes = GB_Q4K_BLOCK_BYTES;
  static constexpr bool kMin = true;
  static void unpack(const uint8_t *b, Block256 *u) {
    u->d = ld_f16(b);
    u->dmin = ld_f16(b + 2);
    for (int s = 0; s < 8; s++) set_scale_min_k4(s, b + 4, u);
    nibbles256(b + 16, u->q);
  }
};

}  // namespace

GB_GGML_GENERIC(q4k, Q4K, false)
GB_GGML_GENERIC(q4kr16, Q4K, true)
