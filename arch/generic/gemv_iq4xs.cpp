// Generic kernels of GGUF's IQ4_XS (layout in kernels.h): each super-block
// unpacked to its 256 codes (iq4nl's grid values, element order) and the
// signed scale ls - 32 of each 32-weight sub-block, stored for both of its
// 16-weight halves, then gemv_ggml.h's arithmetic of super-blocks without
// mins. rows_to_f32 is d*(float)(ls - 32) times the code, as ggml decodes.
#include "gemv_ggml.h"

namespace {

struct Iq4xs {
  using Block = Block256;
  static constexpr size_t kBytes = GB_IQ4XS_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block256 *u) {
    u->d = ld_f16(b);
    u->dmin = 0.0f;
    const uint32_t sh = (uint32_t)b[2] | ((uint32_t)b[3] << 8);
    for (int s = 0; s < 8; s++) {
      const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((sh >> (2 * s)) & 3) << 4);
      u->sc[2 * s] = u->sc[2 * s + 1] = ls - 32;
      u->mn[2 * s] = u->mn[2 * s + 1] = 0;
      const uint8_t *qs = b + 8 + 16 * s;
      for (int l = 0; l < 16; l++) {
        u->q[32 * s + l] = gb_gguf::kIq4nlGrid[qs[l] & 15];
        u->q[32 * s + 16 + l] = gb_gguf::kIq4nlGrid[qs[l] >> 4];
      }
    }
  }
};

}  // namespace

GB_GGML_GENERIC(iq4xs, Iq4xs, false)
