// Generic kernels of GGUF's i-quants (iq2xxs, iq2xs, iq2s, iq3xxs, iq3s,
// iq1s, iq1m) and of MXFP4 (layouts in kernels.h, codebooks and decoders in
// arch/iquants.h): each block unpacked to one int8 code per weight and its
// integer scales, then gemv_ggml.h's arithmetic (super-blocks without mins;
// MXFP4 as 32-weight blocks without a min). rows_to_f32 rounds where ggml's
// dequantizer rounds (iquants.h explains why the rewritten scales do).
#include "../iquants.h"
#include "gemv_ggml.h"

namespace {

template <class F>
struct Iq {
  using Block = Block256;
  static constexpr size_t kBytes = F::kBytes;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block256 *u) {
    u->d = F::dq(b);
    u->dmin = 0.0f;
    F::scales(b, u->sc);
    for (int t = 0; t < 16; t++) u->mn[t] = 0;
    for (int s = 0; s < 8; s++) gb_iq::codes32<F>(b, s, u->q + 32 * s);
  }
};

struct Mxfp4 {
  using Block = Block32;
  static constexpr size_t kBytes = GB_MXFP4_BLOCK_BYTES;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t *b, Block32 *u) {
    u->d = gb_iq::mxfp4_d(b[0]);
    u->m = 0.0f;
    for (int j = 0; j < 16; j++) {
      u->q[j] = gb_iq::kMxfp4[b[1 + j] & 15];
      u->q[j + 16] = gb_iq::kMxfp4[b[1 + j] >> 4];
    }
  }
};

using Iq2xxs = Iq<gb_iq::Iq2xxs>;
using Iq2xs = Iq<gb_iq::Iq2xs>;
using Iq2s = Iq<gb_iq::Iq2s>;
using Iq3xxs = Iq<gb_iq::Iq3xxs>;
using Iq3s = Iq<gb_iq::Iq3s>;
using Iq1s = Iq<gb_iq::Iq1s>;
using Iq1m = Iq<gb_iq::Iq1m>;
static_assert(Iq2xxs::kBytes == GB_IQ2XXS_BLOCK_BYTES && Iq2xs::kBytes == GB_IQ2XS_BLOCK_BYTES &&
                  Iq2s::kBytes == GB_IQ2S_BLOCK_BYTES && Iq3xxs::kBytes == GB_IQ3XXS_BLOCK_BYTES &&
                  Iq3s::kBytes == GB_IQ3S_BLOCK_BYTES && Iq1s::kBytes == GB_IQ1S_BLOCK_BYTES &&
                  Iq1m::kBytes == GB_IQ1M_BLOCK_BYTES,
              "iquants.h and formats.inc agree on the block sizes");

}  // namespace

GB_GGML_GENERIC(iq2xxs, Iq2xxs, false)
GB_GGML_GENERIC(iq2xs, Iq2xs, false)
GB_GGML_GENERIC(iq2s, Iq2s, false)
GB_GGML_GENERIC(iq3xxs, Iq3xxs, false)
GB_GGML_GENERIC(iq3s, Iq3s, false)
GB_GGML_GENERIC(iq1s, Iq1s, false)
GB_GGML_GENERIC(iq1m, Iq1m, false)
GB_GGML_GENERIC(mxfp4, Mxfp4, false)
