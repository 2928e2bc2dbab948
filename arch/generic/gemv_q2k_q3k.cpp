// Generic kernels of the K-quants q2k and q3k (layouts in kernels.h): each
// super-block unpacked to its 256 codes in element order and its sixteen
// scales (q2k: and mins), then gemv_ggml.h's arithmetic of super-blocks.
#include "gemv_ggml.h"

namespace {

// The two-bit fields: 128 weights per 32 bytes; group s (weights 32s..)
// takes bits 2(s%4)..2(s%4)+1 of bytes 32(s/4)..
inline void crumbs256(const uint8_t *qs, int8_t *q) {
  for (int s = 0; s < 8; s++)
    for (int l = 0; l < 32; l++) q[32 * s + l] = (int8_t)((qs[32 * (s / 4) + l] >> (2 * (s % 4))) & 3);
}

struct Q2K {
  using Block = Block256;
  static constexpr size_t kBytes = GB_Q2K_BLOCK_BYTES;
  static constexpr bool kMin = true;
  static void unpack(const uint8_t *b, Block256 *u) {
    for (int t = 0; t < 16; t++) {
      u->sc[t] = b[t] & 15;
      u->mn[t] = b[t] >> 4;
    }
    crumbs256(b + 16, u->q);
    u->d = ld_f16(b + 80);
    u->dmin = ld_f16(b + 82);
  }
};
struct Q3K {
  using Block = Block256;
  static constexpr size_t kBytes = GB_Q3K_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block256 *u) {
    const uint8_t *hm = b, *sc = b + 96;
    // Scale t: low four bits nibble t of bytes 0..7 (0..7 low nibbles, 8..15
    // high), high two bits from byte 8 + t % 4, bits 2(t/4)..; minus 32.
    for (int t = 0; t < 16; t++) {
      const int lo = t < 8 ? (sc[t] & 15) : (sc[t - 8] >> 4);
      const int hi = (sc[8 + (t & 3)] >> (2 * (t >> 2))) & 3;
      u->sc[t] = (lo | (hi << 4)) - 32;
      u->mn[t] = 0;
    }
    // Third bit of weight l of group s: bit s of hmask[l]; a clear bit
    // subtracts 4.
    crumbs256(b + 32, u->q);
    for (int s = 0; s < 8; s++)
      for (int l = 0; l < 32; l++) u->q[32 * s + l] = (int8_t)(u->q[32 * s + l] - ((hm[l] >> s) & 1 ? 0 : 4));
    u->d = ld_f16(b + 108);
    u->dmin = 0.0f;
  }
};

}  // namespace

GB_GGML_GENERIC(q2k, Q2K, false)
GB_GGML_GENERIC(q3k, Q3K, false)
