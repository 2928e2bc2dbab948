// SVE q8 x q8x GEMV (any vector length: 128, 256, 512 ... 2048 bits), one
// position (gemv) and several (gemvm).
//
// Per 32-block and row an exact int32 sum: SDOT over the block's bytes
// (one vector when VL >= 256 bits, two steps at 128 bits, predicated by
// svwhilelt so nothing past the block is read), then SADDV; then generic's
// acc += (d * xd) * (float)isum in scalar float, block after block,
// unfused: the results equal gb_q8_gemv__generic's bit for bit. Four rows at
// a time share the activation block. The gemvm (gemv_blocks.h's
// gb_arm64::sve::gemvm_blocks) loads each block's weights once per row for
// all positions and is bit-identical per position to the gemv.
//
// Weight rows are not assumed aligned: weights are loaded as bytes (LD1B)
// and reinterpreted; the fp16 block scale goes through memcpy.
#include <arm_sve.h>
#include <stdint.h>

#include "arm64/arm64_common.h"
#include "gemv_blocks.h"
#include "kernels.h"

namespace {

using namespace gb_arm64;
using namespace gb_arm64::sve;

// Exact int32 dot product of one q8 block's 32 weights with the activations.
inline int32_t dot_q8(const uint8_t *blk, const int8_t *xs, uint64_t vb) {
  svint32_t s = svdup_n_s32(0);
  for (uint64_t j = 0; j < 32; j += vb) {
    const svbool_t pg = svwhilelt_b8_u64(j, 32);
    s = svdot_s32(s, svld1_s8(pg, (const int8_t *)(blk + 2 + j)), svld1_s8(pg, xs + j));
  }
  return (int32_t)svaddv_s32(svptrue_b32(), s);
}

// The block's weights as two 16-byte halves (the gemvm).
struct Q8Half {
  static constexpr size_t kBytes = 34;
  static inline void load(svbool_t p16, const uint8_t *blk, svint8_t &a, svint8_t &b) {
    a = svld1_s8(p16, (const int8_t *)(blk + 2));
    b = svld1_s8(p16, (const int8_t *)(blk + 18));
  }
};

}  // namespace

extern "C" void gb_q8_gemv__sve(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * 34;
  const uint64_t vb = svcntb();
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = b0 + rb;
    const uint8_t *b2 = b1 + rb;
    const uint8_t *b3 = b2 + rb;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (size_t b = 0; b < nb; b++, b0 += 34, b1 += 34, b2 += 34, b3 += 34) {
      const float xd = xq[b].d;
      const int8_t *xs = xq[b].qs;
      a0 += f16_scale(b0) * xd * (float)dot_q8(b0, xs, vb);
      a1 += f16_scale(b1) * xd * (float)dot_q8(b1, xs, vb);
      a2 += f16_scale(b2) * xd * (float)dot_q8(b2, xs, vb);
      a3 += f16_scale(b3) * xd * (float)dot_q8(b3, xs, vb);
    }
    y[r] = a0;
    y[r + 1] = a1;
    y[r + 2] = a2;
    y[r + 3] = a3;
  }
  for (; r < row_end; r++) {
    const uint8_t *blk = W + r * rb;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += 34) acc += f16_scale(blk) * xq[b].d * (float)dot_q8(blk, xq[b].qs, vb);
    y[r] = acc;
  }
}

extern "C" void gb_q8_gemvm__sve(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                 const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                 size_t cols) {
  gemvm_blocks<Q8Half>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
