// Generic kernels of GGUF's Q1_0 (128 weights of one bit under an f16
// scale), Q2_0 (64 weights of two bits) and NVFP4 (64 E2M1 weights under
// four UE4M3 scales): each block unpacked to one int8 code per weight (q1_0:
// -1 or 1; q2_0: u - 1, -1..2; nvfp4: the doubled E2M1 value, -12..12) and
// its scales, then gemv_ggml.h's arithmetic for blocks under one scale or,
// nvfp4, one per 16 weights. rows_to_f32 forms the product ggml's
// dequantizer forms: q1_0's +-d exactly, q2_0's (float)(u - 1)*d, nvfp4's
// (float)value*d_k.
#include "../iquants.h"
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

struct Nvfp4 {
  using Block = Block64x4;
  static constexpr size_t kBytes = GB_NVFP4_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block *u) {
    for (int k = 0; k < 4; k++) {
      u->d[k] = gb_iq::nvfp4_d(b[k]);
      for (int j = 0; j < 8; j++) {
        const uint8_t v = b[4 + 8 * k + j];
        u->q[16 * k + j] = gb_iq::kMxfp4[v & 15];
        u->q[16 * k + j + 8] = gb_iq::kMxfp4[v >> 4];
      }
    }
  }
};

static_assert(Q1_0::kBytes == 2 + 128 / 8 && Q2_0::kBytes == 2 + 64 / 4 && Nvfp4::kBytes == 4 + 64 / 2,
              "formats.inc's block bytes");

}  // namespace

GB_GGML_GENERIC(q1_0, Q1_0, false)
GB_GGML_GENERIC(q2_0, Q2_0, false)
GB_GGML_GENERIC(nvfp4, Nvfp4, false)
