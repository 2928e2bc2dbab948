// SVE q4 x q8x GEMV (any vector length: 128, 256, 512 ... 2048 bits), one
// position (gemv) and several (gemvm).
//
// Per 32-block and row an exact int32 sum: the block's 16 nibble bytes
// (one predicated load: the vector is at least 16 bytes) give the codes
// u in 0..15 (low nibbles: weights 0..15, high: 16..31), dotted by two SDOTs
// from -8 x the activations' sums, then SADDV: sum((u - 8) * x). Then
// generic's acc += (d * xd) * (float)isum in scalar float, block after
// block, unfused: the results equal gb_q4_gemv__generic's bit for bit. Four
// rows at a time share the activation block and its offset. The gemvm
// (gemv_blocks.h's gb_arm64::sve::gemvm_blocks) unpacks each block's
// weights (minus 8) once per row for all positions and is bit-identical per
// position to the gemv.
//
// Weight rows are not assumed aligned: weights are loaded as bytes (LD1B);
// the fp16 block scale goes through memcpy.
#include <arm_sve.h>
#include <stdint.h>

#include "arm64/arm64_common.h"
#include "gemv_blocks.h"
#include "kernels.h"

namespace {

using namespace gb_arm64;
using namespace gb_arm64::sve;

// q4 block: 16 nibble bytes, low nibbles = weights 0..15, high = 16..31,
// as codes u in 0..15; `init` (q4_init) holds -8 x the activations' sums,
// so the lanes add up to sum((u - 8) * x) exactly. The vector is at least
// 16 bytes, so one predicated load each. Inactive lanes of lo / hi hold
// garbage but meet zeroed activations.
inline int32_t dot_q4(const uint8_t *blk, svint8_t x0, svint8_t x1, svbool_t p16, svint32_t init) {
  const svuint8_t q = svld1_u8(p16, blk + 2);
  const svint8_t lo = svreinterpret_s8_u8(svand_n_u8_x(p16, q, 15));
  const svint8_t hi = svreinterpret_s8_u8(svlsr_n_u8_x(p16, q, 4));
  const svint32_t s = svdot_s32(svdot_s32(init, lo, x0), hi, x1);
  return (int32_t)svaddv_s32(svptrue_b32(), s);
}

inline svint32_t q4_init(svint8_t x0, svint8_t x1) {
  const svint8_t m8 = svdup_n_s8(-8);
  return svdot_s32(svdot_s32(svdup_n_s32(0), m8, x0), m8, x1);
}

// The block's weights as two 16-byte halves, unpacked, minus 8 (the gemvm).
struct Q4Half {
  static constexpr size_t kBytes = 18;
  static inline void load(svbool_t p16, const uint8_t *blk, svint8_t &a, svint8_t &b) {
    const svuint8_t q = svld1_u8(p16, blk + 2);
    a = svsub_n_s8_x(p16, svreinterpret_s8_u8(svand_n_u8_x(p16, q, 15)), 8);
    b = svsub_n_s8_x(p16, svreinterpret_s8_u8(svlsr_n_u8_x(p16, q, 4)), 8);
  }
};

}  // namespace

extern "C" void gb_q4_gemv__sve(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * 18;
  const svbool_t p16 = svwhilelt_b8_u64(0, 16);
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = b0 + rb;
    const uint8_t *b2 = b1 + rb;
    const uint8_t *b3 = b2 + rb;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (size_t b = 0; b < nb; b++, b0 += 18, b1 += 18, b2 += 18, b3 += 18) {
      const float xd = xq[b].d;
      const svint8_t x0 = svld1_s8(p16, xq[b].qs);
      const svint8_t x1 = svld1_s8(p16, xq[b].qs + 16);
      const svint32_t i0 = q4_init(x0, x1);
      a0 += f16_scale(b0) * xd * (float)dot_q4(b0, x0, x1, p16, i0);
      a1 += f16_scale(b1) * xd * (float)dot_q4(b1, x0, x1, p16, i0);
      a2 += f16_scale(b2) * xd * (float)dot_q4(b2, x0, x1, p16, i0);
      a3 += f16_scale(b3) * xd * (float)dot_q4(b3, x0, x1, p16, i0);
    }
    y[r] = a0;
    y[r + 1] = a1;
    y[r + 2] = a2;
    y[r + 3] = a3;
  }
  for (; r < row_end; r++) {
    const uint8_t *blk = W + r * rb;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += 18) {
      const svint8_t x0 = svld1_s8(p16, xq[b].qs);
      const svint8_t x1 = svld1_s8(p16, xq[b].qs + 16);
      acc += f16_scale(blk) * xq[b].d * (float)dot_q4(blk, x0, x1, p16, q4_init(x0, x1));
    }
    y[r] = acc;
  }
}

extern "C" void gb_q4_gemvm__sve(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                 const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                 size_t cols) {
  gemvm_blocks<Q4Half>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
