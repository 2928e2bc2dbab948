// Generic kernels of GGUF's 32-weight block formats q4_1, q5_0, q5_1 and
// iq4nl (layouts in kernels.h): each block unpacked to its 32 codes in
// element order and its f16 scale d (and min m), then gemv_ggml.h's
// arithmetic of 32-weight blocks.
#include "../gguf_blocks.h"
#include "gemv_ggml.h"

namespace {

// The 16 bytes of nibbles: low nibbles are weights 0..15, high 16..31.
inline void nibbles32(const uint8_t *qs, int8_t *q) {
  for (int j = 0; j < 16; j++) {
    q[j] = (int8_t)(qs[j] & 15);
    q[j + 16] = (int8_t)(qs[j] >> 4);
  }
}
// q5_0 / q5_1: bit j of qh is weight j's fifth bit.
inline void fifth_bits32(uint32_t qh, int8_t *q) {
  for (int j = 0; j < 32; j++) q[j] = (int8_t)(q[j] | (((qh >> j) & 1) << 4));
}

struct Q4_1 {
  using Block = Block32;
  static constexpr size_t kBytes = GB_Q4_1_BLOCK_BYTES;
  static constexpr bool kMin = true;
  static void unpack(const uint8_t *b, Block32 *u) {
    u->d = ld_f16(b);
    u->m = ld_f16(b + 2);
    nibbles32(b + 4, u->q);
  }
};
struct Q5_0 {
  using Block = Block32;
  static constexpr size_t kBytes = GB_Q5_0_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block32 *u) {
    u->d = ld_f16(b);
    u->m = 0.0f;
    nibbles32(b + 6, u->q);
    fifth_bits32(ld_u32(b + 2), u->q);
    for (int j = 0; j < 32; j++) u->q[j] = (int8_t)(u->q[j] - 16);
  }
};
struct Q5_1 {
  using Block = Block32;
  static constexpr size_t kBytes = GB_Q5_1_BLOCK_BYTES;
  static constexpr bool kMin = true;
  static void unpack(const uint8_t *b, Block32 *u) {
    u->d = ld_f16(b);
    u->m = ld_f16(b + 2);
    nibbles32(b + 8, u->q);
    fifth_bits32(ld_u32(b + 4), u->q);
  }
};
struct Iq4nl {
  using Block = Block32;
  static constexpr size_t kBytes = GB_IQ4NL_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block32 *u) {
    u->d = ld_f16(b);
    u->m = 0.0f;
    nibbles32(b + 2, u->q);
    for (int j = 0; j < 32; j++) u->q[j] = gb_gguf::kIq4nlGrid[u->q[j]];
  }
};

}  // namespace

GB_GGML_GENERIC(q4_1, Q4_1, false)
GB_GGML_GENERIC(q5_0, Q5_0, false)
GB_GGML_GENERIC(q5_1, Q5_1, false)
GB_GGML_GENERIC(iq4nl, Iq4nl, false)
