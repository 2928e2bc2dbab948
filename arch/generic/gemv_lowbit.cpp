// Generic kernels of GGUF's Q1_0 (128 weights of one bit under an f16
// scale) and Q2_0 (64 weights of two bits): each block unpacked to one int8
// code per weight (q1_0: -1 or 1; q2_0: u - 1, -1..2) and its scale, then
// gemv_ggml.h's arithmetic for blocks under one scale. rows_to_f32 forms
// d*(float)code, which is ggml's value: q1_0's +-d exactly, q2_0's
// (float)(u - 1)*d the same product.
#include "gemv_ggml.h"

namespace {

struct Q1_0 {
  using Block = BlockD<128>;
  static constexpr size_t kBytes = GB_Q1_0_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block *u) {
    u->d = ld_f16(b);
    for (int j = 0; j < 128; j++) u->q[j] = (int8_t)((b[2 + j / 8] >> (j % 8)) & 1 ? 1 : -1);
  }
};

struct Q2_0 {
  using Block = BlockD<64>;
  static constexpr size_t kBytes = GB_Q2_0_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block *u) {
    u->d = ld_f16(b);
    for (int j = 0; j < 64; j++) u->q[j] = (int8_t)(((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1);
  }
};

static_assert(Q1_0::kBytes == 2 + 128 / 8 && Q2_0::kBytes == 2 + 64 / 4, "formats.inc's block bytes");

}  // namespace

GB_GGML_GENERIC(q1_0, Q1_0, false)
GB_GGML_GENERIC(q2_0, Q2_0, false)
