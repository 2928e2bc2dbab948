// ARMv8-A Advanced SIMD kernels for q4r16 (the Cortex-A53 baseline: no
// SDOT): q4 blocks of 16 rows interleaved (kernels.h), one position (gemv)
// and several (gemvm).
//
// A group-block (16 rows x 32 columns, 288 bytes) is 16 f16 scales, then
// for k = 0..3 the slice qs[4k..4k+3] of each of the 16 rows: one 16-byte
// vector per slice and four rows (row 4j+i in bytes 4i..4i+3). Its low
// nibbles (AND 15) are weights 4k..4k+3 of the four rows, its high nibbles
// (USHR 4) weights 16+4k..16+4k+3, as codes 0..15. The activation bytes
// 4k..4k+3 (resp. 16+4k..) are replicated to all four 32-bit lanes (DUP),
// so SMULL / SMLAL of the low 8 bytes multiply rows 4j and 4j+1 byte for
// byte, SMULL2 / SMLAL2 rows 4j+2 and 4j+3. Eight products accumulate per
// int16 lane (four slices x low / high; |15 x 128| x 8 < 2^15: exact), and
// SADDLP twice plus one ADDP leave row 4j+i's block sum in lane i; adding
// -8 x sum(x) (gb_q8x_block::sum) gives isum = sum((u - 8) * x), exactly.
//
// Float work per row and block is generic's acc += (d * xd) * (float)isum,
// block after block, with separate multiplies and adds: bit-identical to
// gb_q4_gemv__generic on the same weights in row-major q4 and to
// gb_q4r16_gemv__generic. Scales are converted four at a time (FCVTL:
// arm64_common.h's q4r16_scales).
//
// Cost (bench/mca.sh, llvm-mca 19), cycles per 32 weights: 14.1 on
// Cortex-A55 (12.1 on LLVM's Cortex-A53 model), against 19.3 for
// gb_q4_gemv__neon: the 16 byte-wise multiplies per four rows and block
// dominate (no SDOT), the unpacking and the float work are shared by whole
// 16-byte vectors.
//
// Row ranges are whole groups (multiples of 16). No byte past the range's
// groups or past xq[ceil(cols/32)) is loaded.
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "arm64/arm64_common.h"
#include "f16.h"
#include "kernels.h"

namespace {

using namespace gb_arm64;

constexpr size_t kGroupBlock = 288;  // bytes of one block of a 16-row group

// One activation block, replicated for the byte-wise products.
struct XRep {
  int8x16_t lo[4], hi[4];  // lo[k]: bytes 4k..4k+3 in every lane; hi[k]: 16+4k..
  int32x4_t off;           // -8 x sum(qs)
  float d;
};

inline int8x16_t rep4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

inline XRep load_x(const gb_q8x_block &b) {
  XRep x;
  for (int k = 0; k < 4; k++) {
    x.lo[k] = rep4(b.qs + 4 * k);
    x.hi[k] = rep4(b.qs + 16 + 4 * k);
  }
  x.off = vdupq_n_s32(-8 * b.sum);
  x.d = b.d;
  return x;
}

// The codes of four rows' four slices (q: slice 0; slices 64 bytes apart).
struct Codes4 {
  int8x16_t lo[4], hi[4];
};

inline void load_rows4(const uint8_t *q, Codes4 &c) {
  const uint8x16_t low4 = vdupq_n_u8(15);
  for (int k = 0; k < 4; k++) {
    const uint8x16_t v = vld1q_u8(q + 64 * k);
    c.lo[k] = vreinterpretq_s8_u8(vandq_u8(v, low4));
    c.hi[k] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
  }
}

// Exact block sums of the four rows: lane i = row 4j+i.
inline int32x4_t rows4_sum(const Codes4 &c, const XRep &x) {
  int16x8_t a = vmull_s8(vget_low_s8(c.lo[0]), vget_low_s8(x.lo[0]));  // rows 4j, 4j+1
  int16x8_t b = vmull_high_s8(c.lo[0], x.lo[0]);                       // rows 4j+2, 4j+3
  a = vmlal_s8(a, vget_low_s8(c.hi[0]), vget_low_s8(x.hi[0]));
  b = vmlal_high_s8(b, c.hi[0], x.hi[0]);
  for (int k = 1; k < 4; k++) {
    a = vmlal_s8(a, vget_low_s8(c.lo[k]), vget_low_s8(x.lo[k]));
    b = vmlal_high_s8(b, c.lo[k], x.lo[k]);
    a = vmlal_s8(a, vget_low_s8(c.hi[k]), vget_low_s8(x.hi[k]));
    b = vmlal_high_s8(b, c.hi[k], x.hi[k]);
  }
  return vaddq_s32(vpaddq_s32(vpaddlq_s16(a), vpaddlq_s16(b)), x.off);
}

// acc += (dw * xd) * (float)isum, lane by lane (generic's order).
inline float32x4_t accumulate(float32x4_t acc, float32x4_t dw, float xd, int32x4_t isum) {
  return vaddq_f32(acc, vmulq_f32(vmulq_n_f32(dw, xd), vcvtq_f32_s32(isum)));
}

// One group-block (g) of 16 rows for one position.
inline void group_block(float32x4_t acc[4], const uint8_t *g, const gb_q8x_block &xb) {
  const XRep x = load_x(xb);
  float32x4_t dw[4];
  q4r16_scales(g, dw);
  for (int j = 0; j < 4; j++) {
    Codes4 c;
    load_rows4(g + 32 + 16 * j, c);
    acc[j] = accumulate(acc[j], dw[j], x.d, rows4_sum(c, x));
  }
}

// y[4j + i] = row 16g + 4j + i of group g (its blocks at g) times xq, for
// all 16 rows of the group.
__attribute__((always_inline)) inline void group_gemv(float *y, const uint8_t *g, const gb_q8x_block *xq, size_t nb) {
  float32x4_t acc[4];
  for (int j = 0; j < 4; j++) acc[j] = vdupq_n_f32(0.0f);
  for (size_t b = 0; b < nb; b++, g += kGroupBlock) group_block(acc, g, xq[b]);
  for (int j = 0; j < 4; j++) vst1q_f32(y + 4 * j, acc[j]);
}

}  // namespace

extern "C" void gb_q4r16_gemv__neon(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                    size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r += 16) group_gemv(y + r, W + (r / 16) * nb * kGroupBlock, xq, nb);
}

// ---- multi-position GEMV ---------------------------------------------------------
// Each group through the gemv's loop once per position: the group's weight
// bytes are loaded from memory for the first position and re-read from cache
// (nb * 288 bytes: L1 or L2) for the others; bit-identical to
// gb_q4r16_gemv__neon per position (the same code). On in-order cores this
// beats splitting each four rows' codes once and looping positions over them
// (llvm-mca, Cortex-A53 / A55: 12.1 / 14.1 against 25.3 / 17.8 cycles per
// 32 weights and position): the replicated activations then cost as much as
// the split saves, and one four-row group per position leaves the SMLAL
// chains no independent work to hide their latency.
extern "C" void gb_q4r16_gemvm__neon(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r += 16)
    for (size_t p = 0; p < m; p++) group_gemv(Y + p * ldy + r, W + (r / 16) * nb * kGroupBlock, XQ + p * ldxq, nb);
}

// ---- rows to f32 (prefill panels) ------------------------------------------------
// Per row and block: the four 4-byte slices gathered into the q4 byte order,
// nibbles widened to int32, minus 8, times the scale: d * (float)(u - 8),
// one rounding, as the generic expansion (the scale converted by generic's
// gb::f16_to_f32, which keeps a signalling NaN's payload as FCVT would not).
extern "C" void gb_q4r16_rows_to_f32__neon(float *out, const uint8_t *W, size_t row_begin, size_t row_end,
                                           size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const uint8x16_t low4 = vdupq_n_u8(15);
  const int32x4_t eight = vdupq_n_s32(8);
  for (size_t r = row_begin; r < row_end; r++) {
    float *o = out + (r - row_begin) * cols;
    const uint8_t *g = W + (r / 16) * nb * kGroupBlock;
    const size_t i = r % 16;
    for (size_t b = 0; b < nb; b++, g += kGroupBlock) {
      uint32x4_t s = vdupq_n_u32(0);
      s = vld1q_lane_u32(reinterpret_cast<const uint32_t *>(g + 32 + 4 * i), s, 0);
      s = vld1q_lane_u32(reinterpret_cast<const uint32_t *>(g + 96 + 4 * i), s, 1);
      s = vld1q_lane_u32(reinterpret_cast<const uint32_t *>(g + 160 + 4 * i), s, 2);
      s = vld1q_lane_u32(reinterpret_cast<const uint32_t *>(g + 224 + 4 * i), s, 3);
      const uint8x16_t q = vreinterpretq_u8_u32(s);
      const float d = gb::f16_to_f32((uint16_t)(g[2 * i] | (g[2 * i + 1] << 8)));
      const uint8x16_t half[2] = {vandq_u8(q, low4), vshrq_n_u8(q, 4)};
      float v[32];
      for (int h = 0; h < 2; h++) {
        const uint16x8_t w0 = vmovl_u8(vget_low_u8(half[h])), w1 = vmovl_high_u8(half[h]);
        const uint16x4_t parts[4] = {vget_low_u16(w0), vget_high_u16(w0), vget_low_u16(w1), vget_high_u16(w1)};
        for (int p = 0; p < 4; p++) {
          const int32x4_t u = vsubq_s32(vreinterpretq_s32_u32(vmovl_u16(parts[p])), eight);
          vst1q_f32(v + 16 * h + 4 * p, vmulq_n_f32(vcvtq_f32_s32(u), d));
        }
      }
      const size_t c0 = b * 32, n = cols - c0 < 32 ? cols - c0 : 32;
      memcpy(o + c0, v, n * sizeof(float));
    }
  }
}
