// arm64_common.h — helpers shared by the arm64 kernel folders (neon, dotprod,
// i8mm, sve) and by the files of one folder: fp16 scale loads, unaligned f32
// / f16 vector loads, horizontal sums, the f32 / f16 tile loops and the
// q8 / q4 block loops of the baseline kernels, the q4r16 scale load, the SVE
// position chunks and the attention helpers the dotprod and i8mm kernels
// share.
//
// Every folder compiles this header with its own -march (neon: armv8-a,
// dotprod: +dotprod, i8mm: +dotprod+i8mm, sve: +sve). Outside the sections
// guarded by an ACLE feature macro it uses ARMv8-A Advanced SIMD only, which
// every folder has. The three guarded sections hold the loops that the q8
// and q4 files of one folder share and that need more: SDOT
// (__ARM_FEATURE_DOTPROD: the dotprod folder; also defined, unused, in the
// i8mm one), SMMLA (__ARM_FEATURE_MATMUL_INT8: i8mm) and SVE
// (__ARM_FEATURE_SVE: sve); a folder without the feature never sees them.
//
// No anonymous namespace here (a header's types must not depend on one);
// instead every function and function template is static, so each folder
// gets its own internal copy compiled with its own flags and the linker never
// folds an out-of-line copy built for one folder's -march (an SVE or SDOT
// build of a helper, say) into a kernel that must run on a baseline core.
// Small helpers are `static inline`; the larger attention functions are
// plain static functions (inlined or not as the compiler decides, as for any
// local function), [[maybe_unused]] for the files that do not call them.
// Kernel files use the helpers from their own anonymous namespace
// (`using namespace gb_arm64;` and the sub-namespace of their section), as
// the AVX2 files do with avx2_common.h.
#ifndef GEARBX_ARCH_ARM64_COMMON_H
#define GEARBX_ARCH_ARM64_COMMON_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "kernels.h"

namespace gb_arm64 {

// ---- scalars and small vectors ---------------------------------------------

// The fp16 scale at p (unaligned) as f32. FCVTL: exact for every binary16.
static inline float f16_scale(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// The fp16 scales at p0..p3 as the four lanes of one vector (one FCVTL).
static inline float32x4_t f16_scales4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3) {
  uint16_t h[4];
  memcpy(&h[0], p0, 2);
  memcpy(&h[1], p1, 2);
  memcpy(&h[2], p2, 2);
  memcpy(&h[3], p3, 2);
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// Four f32 at p (16 bytes, unaligned: a byte load reinterpreted).
static inline float32x4_t load_f4(const uint8_t *p) { return vreinterpretq_f32_u8(vld1q_u8(p)); }

// Four binary16 at p (8 bytes) widened to f32.
static inline float32x4_t load_h4(const uint8_t *p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

// Sum of 4 int32x4 vectors, lane k = horizontal sum of the k-th argument.
static inline int32x4_t hsum4_s32(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

// ---- q4r16 -----------------------------------------------------------------

// The 16 fp16 scales at the start of a q4r16 group-block as f32, rows
// 4j..4j+3 in s[j] (one 32-byte load, FCVTL / FCVTL2).
static inline void q4r16_scales(const uint8_t *g, float32x4_t s[4]) {
  const float16x8_t h0 = vreinterpretq_f16_u8(vld1q_u8(g));
  const float16x8_t h1 = vreinterpretq_f16_u8(vld1q_u8(g + 16));
  s[0] = vcvt_f32_f16(vget_low_f16(h0));
  s[1] = vcvt_high_f32_f16(h0);
  s[2] = vcvt_f32_f16(vget_low_f16(h1));
  s[3] = vcvt_high_f32_f16(h1);
}

// ---- positions in chunks of four (SVE f32 / f16 gemvm) ----------------------

// Positions [0, m) in chunks of four (a last chunk of 1..3): fn(P, y, x),
// P a std::integral_constant, y = Y + p0 * ldy and x[0..4) the chunk's
// positions (the last one repeated past the chunk's end).
template <class Fn>
static inline void position_chunks4(float *Y, size_t ldy, const float *X, size_t ldx, size_t m, Fn fn) {
  for (size_t p0 = 0; p0 < m; p0 += 4) {
    const size_t np = m - p0 < 4 ? m - p0 : 4;
    const float *x[4];
    for (size_t p = 0; p < 4; p++) x[p] = X + (p0 + (p < np ? p : 0)) * ldx;
    float *y = Y + p0 * ldy;
    switch (np) {
      case 4: fn(std::integral_constant<int, 4>(), y, x); break;
      case 3: fn(std::integral_constant<int, 3>(), y, x); break;
      case 2: fn(std::integral_constant<int, 2>(), y, x); break;
      default: fn(std::integral_constant<int, 1>(), y, x); break;
    }
  }
}

// ---- the neon folder: f32 / f16 tile loops ----------------------------------
// One tile serves the gemv and the gemvm: 4 rows x 8 columns per step,
// applied to P positions (P = 1 for the gemv). Per (row, position) one
// accumulator; per 8 columns
//   acc = fma(fma(acc, w[c..c+3], x[c..c+3]), w[c+4..c+7], x[c+4..c+7])
// (lane j sums the columns c with c % 4 == j), a column tail of 1..7 goes
// through the same two steps from zero-padded copies of w and x, and the row
// result is (acc[0] + acc[1]) + (acc[2] + acc[3]). That order depends neither
// on P nor on which rows share the tile (a tail group of 1..3 rows computes
// copies of its last row, not stored), so every gemvm is bit-identical per
// position to the gemv, and results do not depend on the row split.
//
// Registers: 4P accumulators, the 8 widened weight vectors of the step and
// two x vectors at a time: P <= kMaxTileP = 4 (26 of 32). Each weight vector
// is loaded and widened once per step and used for the tile's P positions;
// with more positions than that, a group's rows are re-read from cache once
// per chunk (chunks of near-equal size, at most kMaxTileP). One accumulator
// per (row, position) instead of two is what lets four positions fit; its
// price is a chain of two dependent FMAs per step, which bounds the f32 gemv
// (P = 1) at 2 FMA latencies per 32 weights where the core could issue more
// (the f16 gemv is bound by FCVTL throughput before that).
//
// F (the format's file) provides kBytes (per weight) and load8(p, lo, hi):
// the 8 weights at p as f32.
namespace neon {

constexpr size_t kMaxTileP = 4;

// Rows w[0..3] times positions x[0..P): out[p] lane k = row k . x_p.
// xt[p]: x_p's column tail (cols % 8 values) zero-padded to 8.
template <class F, size_t P>
static inline void float_tile(float32x4_t *out, const uint8_t *const *w, const float *const *x, const float (*xt)[8],
                              size_t cols) {
  const size_t cmain = cols & ~(size_t)7;
  const size_t rem = cols - cmain;
  float32x4_t acc[4][P];
  for (size_t k = 0; k < 4; k++)
    for (size_t p = 0; p < P; p++) acc[k][p] = vdupq_n_f32(0.0f);
  for (size_t c = 0; c < cmain; c += 8) {
    float32x4_t lo[4], hi[4];
    for (size_t k = 0; k < 4; k++) F::load8(w[k] + F::kBytes * c, lo[k], hi[k]);
    for (size_t p = 0; p < P; p++) {
      const float32x4_t x0 = vld1q_f32(x[p] + c), x1 = vld1q_f32(x[p] + c + 4);
      for (size_t k = 0; k < 4; k++) acc[k][p] = vfmaq_f32(acc[k][p], lo[k], x0);
      for (size_t k = 0; k < 4; k++) acc[k][p] = vfmaq_f32(acc[k][p], hi[k], x1);
    }
  }
  if (rem) {
    float32x4_t lo[4], hi[4];
    for (size_t k = 0; k < 4; k++) {
      uint8_t wt[8 * F::kBytes];
      memset(wt, 0, sizeof wt);
      memcpy(wt, w[k] + F::kBytes * cmain, rem * F::kBytes);
      F::load8(wt, lo[k], hi[k]);
    }
    for (size_t p = 0; p < P; p++) {
      const float32x4_t x0 = vld1q_f32(xt[p]), x1 = vld1q_f32(xt[p] + 4);
      for (size_t k = 0; k < 4; k++) acc[k][p] = vfmaq_f32(acc[k][p], lo[k], x0);
      for (size_t k = 0; k < 4; k++) acc[k][p] = vfmaq_f32(acc[k][p], hi[k], x1);
    }
  }
  for (size_t p = 0; p < P; p++)
    out[p] = vpaddq_f32(vpaddq_f32(acc[0][p], acc[1][p]), vpaddq_f32(acc[2][p], acc[3][p]));
}

// Y[i*ldy + r] = W[r] . X_i for i < m (1 <= m <= GB_GEMVM_MAX_M), r in
// [row_begin, row_end); the gemv is m = 1.
template <class F>
static inline void float_gemvm(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx, size_t m,
                               size_t row_begin, size_t row_end, size_t cols) {
  const size_t rb = cols * F::kBytes;
  const size_t cmain = cols & ~(size_t)7;
  const float *x[GB_GEMVM_MAX_M];
  float xt[GB_GEMVM_MAX_M][8];
  for (size_t i = 0; i < m; i++) {
    x[i] = X + i * ldx;
    memset(xt[i], 0, sizeof xt[i]);
    memcpy(xt[i], x[i] + cmain, (cols - cmain) * 4);
  }
  const size_t chunks = (m + kMaxTileP - 1) / kMaxTileP;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *w[4];
    for (size_t k = 0; k < 4; k++) w[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    for (size_t ch = 0, p0 = 0; ch < chunks; ch++) {
      const size_t np = m / chunks + (ch < m % chunks ? 1 : 0);
      float32x4_t out[kMaxTileP];
      switch (np) {
        case 4: float_tile<F, 4>(out, w, x + p0, xt + p0, cols); break;
        case 3: float_tile<F, 3>(out, w, x + p0, xt + p0, cols); break;
        case 2: float_tile<F, 2>(out, w, x + p0, xt + p0, cols); break;
        default: float_tile<F, 1>(out, w, x + p0, xt + p0, cols); break;
      }
      for (size_t p = 0; p < np; p++) {
        float *y = Y + (p0 + p) * ldy + r;
        if (nr == 4) {
          vst1q_f32(y, out[p]);
        } else {
          float t[4];
          vst1q_f32(t, out[p]);
          memcpy(y, t, nr * 4);
        }
      }
      p0 += np;
    }
  }
}

// ---- the neon folder: q8 / q4 block loops ---------------------------------
// Bit-identical to the generic kernels: the int32 sum of each 32-block is
// exact, and per row the float work is acc += (d * xd) * (float)isum, block
// after block, with separate multiplies and adds (no fusing), four rows in
// the four lanes of a vector.

// The gemv. kBlockBytes: 34 (q8) or 18 (q4); Dot(qs, x0, x1): the exact
// int32 dot product of the block's quants at qs with the activations x0 / x1
// (weights 0..15 / 16..31), spread over the four lanes.
template <size_t kBlockBytes, int32x4_t (*Dot)(const uint8_t *, int8x16_t, int8x16_t)>
static inline void gemv_blocks(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end,
                               size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * kBlockBytes;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = b0 + rb;
    const uint8_t *b2 = b1 + rb;
    const uint8_t *b3 = b2 + rb;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const int8x16_t x0 = vld1q_s8(xq[b].qs);
      const int8x16_t x1 = vld1q_s8(xq[b].qs + 16);
      const int32x4_t isum = hsum4_s32(Dot(b0 + 2, x0, x1), Dot(b1 + 2, x0, x1), Dot(b2 + 2, x0, x1),
                                       Dot(b3 + 2, x0, x1));
      const float32x4_t dd = vmulq_n_f32(f16_scales4(b0, b1, b2, b3), xq[b].d);
      acc = vaddq_f32(acc, vmulq_f32(dd, vcvtq_f32_s32(isum)));
      b0 += kBlockBytes;
      b1 += kBlockBytes;
      b2 += kBlockBytes;
      b3 += kBlockBytes;
    }
    vst1q_f32(y + r, acc);
  }
  for (; r < row_end; r++) {
    const uint8_t *blk = W + r * rb;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += kBlockBytes) {
      const int8x16_t x0 = vld1q_s8(xq[b].qs);
      const int8x16_t x1 = vld1q_s8(xq[b].qs + 16);
      const int32_t isum = vaddvq_s32(Dot(blk + 2, x0, x1));
      acc += f16_scale(blk) * xq[b].d * (float)isum;
    }
    y[r] = acc;
  }
}

// The gemvm, bit-identical per position to the gemv: four rows per step (a
// tail group computes copies of its last row, not stored: the block
// formats' results do not depend on grouping); each block's weights are
// loaded (q4: unpacked) once and dotted with the m positions' blocks; per
// (row, position) the exact int32 block sum and
// acc += (d * xd) * (float)isum, block after block. F provides kBytes,
// load(blk, a, b) (the block's weights 0..15 / 16..31 as int8) and
// dot(a, b, x0, x1) (as Dot above, spread over the four lanes).
template <class F>
static inline void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                                size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *bk[4];
    for (size_t k = 0; k < 4; k++) bk[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      int8x16_t wa[4], wb[4];
      for (int k = 0; k < 4; k++) F::load(bk[k] + b * F::kBytes, wa[k], wb[k]);
      const float32x4_t dw = f16_scales4(bk[0] + b * F::kBytes, bk[1] + b * F::kBytes, bk[2] + b * F::kBytes,
                                         bk[3] + b * F::kBytes);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block &xb = XQ[p * ldxq + b];
        const int8x16_t x0 = vld1q_s8(xb.qs), x1 = vld1q_s8(xb.qs + 16);
        const int32x4_t isum = hsum4_s32(F::dot(wa[0], wb[0], x0, x1), F::dot(wa[1], wb[1], x0, x1),
                                         F::dot(wa[2], wb[2], x0, x1), F::dot(wa[3], wb[3], x0, x1));
        const float32x4_t dd = vmulq_n_f32(dw, xb.d);
        acc[p] = vaddq_f32(acc[p], vmulq_f32(dd, vcvtq_f32_s32(isum)));
      }
    }
    for (size_t p = 0; p < m; p++) {
      if (nr == 4) {
        vst1q_f32(Y + p * ldy + r, acc[p]);
      } else {
        float t[4];
        vst1q_f32(t, acc[p]);
        memcpy(Y + p * ldy + r, t, nr * 4);
      }
    }
  }
}

}  // namespace neon

// ---- attention helpers of the dotprod and i8mm kernels -----------------------
// Both score quantized keys with their own instruction (SDOT, SMMLA) and
// share the rest: the test for rows that unpack in registers, the unpacking
// into a buffer of the others and of the value rows, the f16 / f32 key dot
// product and the value accumulation.
namespace attn {

constexpr uint32_t kChunk = 32;  // records per softmax step

// Whether a row unpacks in registers, 8 bytes of a plane at a time.
static inline bool planes_of_8(uint32_t d, uint32_t bits) {
  return bits == 8 || (bits == 4 && d % 16 == 0) || (bits == 2 && d % 32 == 0) || (bits == 3 && d % 64 == 0);
}

// A packed row (bits 2, 3, 4) to its signed codes x[0..d), any d % 8 == 0.
[[maybe_unused]] static void unpack_signed(int8_t *x, const uint8_t *row, uint32_t d, uint32_t bits) {
  if (bits == 4) {
    const uint32_t h = d / 2;
    uint32_t c = 0;
    for (; c + 8 <= h; c += 8) {
      const uint8x8_t b = vld1_u8(row + c);
      vst1_s8(x + c, vsub_s8(vreinterpret_s8_u8(vand_u8(b, vdup_n_u8(15))), vdup_n_s8(8)));
      vst1_s8(x + h + c, vsub_s8(vreinterpret_s8_u8(vshr_n_u8(b, 4)), vdup_n_s8(8)));
    }
    for (; c < h; c++) {
      x[c] = (int8_t)((row[c] & 15) - 8);
      x[h + c] = (int8_t)((row[c] >> 4) - 8);
    }
    return;
  }
  const uint32_t qd = d / 4;
  const int off = bits == 3 ? 4 : 2;
  uint32_t c = 0;
  for (; c + 8 <= qd; c += 8) {
    const uint8x8_t b = vld1_u8(row + c);
    for (int k = 0; k < 4; k++) {
      const uint8x8_t u = vand_u8(vshl_u8(b, vdup_n_s8((int8_t)(-2 * k))), vdup_n_u8(3));
      vst1_s8(x + k * qd + c, vsub_s8(vreinterpret_s8_u8(u), vdup_n_s8((int8_t)off)));
    }
  }
  for (; c < qd; c++)
    for (uint32_t k = 0; k < 4; k++) x[k * qd + c] = (int8_t)(((row[c] >> (2 * k)) & 3) - off);
  if (bits == 3) {
    const uint32_t e = d / 8;
    const uint8_t *hi = row + qd;
    c = 0;
    for (; c + 8 <= e; c += 8) {
      const uint8x8_t b = vld1_u8(hi + c);
      for (int k = 0; k < 8; k++) {
        const uint8x8_t h4 = vand_u8(vshl_u8(b, vdup_n_s8((int8_t)(2 - k))), vdup_n_u8(4));
        vst1_s8(x + k * e + c, vadd_s8(vld1_s8(x + k * e + c), vreinterpret_s8_u8(h4)));
      }
    }
    for (; c < e; c++)
      for (uint32_t k = 0; k < 8; k++) x[k * e + c] = (int8_t)(x[k * e + c] + (((hi[c] >> k) & 1) << 2));
  }
}

// sum_j q[j] * k[j] for an f16 / f32 key row, d % 8 == 0.
[[maybe_unused]] static float dot_f(const float *q, const uint8_t *k, uint32_t d, uint32_t bits) {
  float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
  for (uint32_t j = 0; j < d; j += 8) {
    const float32x4_t k0 = bits == 16 ? load_h4(k + 2 * j) : load_f4(k + 4 * j);
    const float32x4_t k1 = bits == 16 ? load_h4(k + 2 * j + 8) : load_f4(k + 4 * j + 16);
    a0 = vfmaq_f32(a0, vld1q_f32(q + j), k0);
    a1 = vfmaq_f32(a1, vld1q_f32(q + j + 4), k1);
  }
  return vaddvq_f32(vaddq_f32(a0, a1));
}

enum ValueKind { kCodes, kHalf, kFloat };  // int8 codes, binary16, f32

// acc[g * d + j] += sum_t w[g * kChunk + t] * v_t[j] for g < NH, t < n:
// v_t is the row at src[t]. Tiles of 8 columns; the NH x 8 sums stay in
// registers over the n records.
template <uint32_t NH, ValueKind K>
static void accumulate(float *acc, const uint8_t *const *src, const float *w, uint32_t n, uint32_t d) {
  for (uint32_t j = 0; j < d; j += 8) {
    float32x4_t a[NH][2];
    for (uint32_t g = 0; g < NH; g++) {
      a[g][0] = vld1q_f32(acc + g * d + j);
      a[g][1] = vld1q_f32(acc + g * d + j + 4);
    }
    for (uint32_t t = 0; t < n; t++) {
      float32x4_t x0, x1;
      if (K == kCodes) {
        const int16x8_t v = vmovl_s8(vld1_s8(reinterpret_cast<const int8_t *>(src[t]) + j));
        x0 = vcvtq_f32_s32(vmovl_s16(vget_low_s16(v)));
        x1 = vcvtq_f32_s32(vmovl_s16(vget_high_s16(v)));
      } else if (K == kHalf) {
        x0 = load_h4(src[t] + 2 * j);
        x1 = load_h4(src[t] + 2 * j + 8);
      } else {
        x0 = load_f4(src[t] + 4 * j);
        x1 = load_f4(src[t] + 4 * j + 16);
      }
      for (uint32_t g = 0; g < NH; g++) {
        const float wt = w[g * kChunk + t];
        a[g][0] = vfmaq_n_f32(a[g][0], x0, wt);
        a[g][1] = vfmaq_n_f32(a[g][1], x1, wt);
      }
    }
    for (uint32_t g = 0; g < NH; g++) {
      vst1q_f32(acc + g * d + j, a[g][0]);
      vst1q_f32(acc + g * d + j + 4, a[g][1]);
    }
  }
}

template <ValueKind K>
static void accumulate_n(uint32_t nh, float *acc, const uint8_t *const *src, const float *w, uint32_t n, uint32_t d) {
  switch (nh) {
    case 1: accumulate<1, K>(acc, src, w, n, d); break;
    case 2: accumulate<2, K>(acc, src, w, n, d); break;
    case 3: accumulate<3, K>(acc, src, w, n, d); break;
    default: accumulate<4, K>(acc, src, w, n, d); break;
  }
}

}  // namespace attn

}  // namespace gb_arm64

// ---- SDOT: the dotprod folder's q8 / q4 loops ---------------------------------
// As the neon folder's loops, with the block's int32 sums from two SDOTs
// (four lanes) starting at an accumulator given per block: 0 for q8, and for
// q4, whose codes are dotted as 0..15, -8 x the activations' sums.
#if defined(__ARM_FEATURE_DOTPROD)
namespace gb_arm64 {
namespace sdot {

// The accumulator's start for a block: 0 (q8) or -8 x sum(x) per lane (q4).
template <bool kQ4>
static inline int32x4_t dot_init(int8x16_t x0, int8x16_t x1) {
  if (!kQ4) return vdupq_n_s32(0);
  const int8x16_t m8 = vdupq_n_s8(-8);
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), m8, x0), m8, x1);
}

// The gemv. Dot(qs, x0, x1, init): the block's sums from init, four lanes.
template <size_t kBlockBytes, bool kQ4, int32x4_t (*Dot)(const uint8_t *, int8x16_t, int8x16_t, int32x4_t)>
static inline void gemv_blocks(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end,
                               size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * kBlockBytes;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = b0 + rb;
    const uint8_t *b2 = b1 + rb;
    const uint8_t *b3 = b2 + rb;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const int8x16_t x0 = vld1q_s8(xq[b].qs);
      const int8x16_t x1 = vld1q_s8(xq[b].qs + 16);
      const int32x4_t i0 = dot_init<kQ4>(x0, x1);
      const int32x4_t isum = hsum4_s32(Dot(b0 + 2, x0, x1, i0), Dot(b1 + 2, x0, x1, i0), Dot(b2 + 2, x0, x1, i0),
                                       Dot(b3 + 2, x0, x1, i0));
      const float32x4_t dd = vmulq_n_f32(f16_scales4(b0, b1, b2, b3), xq[b].d);
      acc = vaddq_f32(acc, vmulq_f32(dd, vcvtq_f32_s32(isum)));
      b0 += kBlockBytes;
      b1 += kBlockBytes;
      b2 += kBlockBytes;
      b3 += kBlockBytes;
    }
    vst1q_f32(y + r, acc);
  }
  for (; r < row_end; r++) {
    const uint8_t *blk = W + r * rb;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, blk += kBlockBytes) {
      const int8x16_t x0 = vld1q_s8(xq[b].qs);
      const int8x16_t x1 = vld1q_s8(xq[b].qs + 16);
      const int32_t isum = vaddvq_s32(Dot(blk + 2, x0, x1, dot_init<kQ4>(x0, x1)));
      acc += f16_scale(blk) * xq[b].d * (float)isum;
    }
    y[r] = acc;
  }
}

static inline int32x4_t dot2(int8x16_t a, int8x16_t b, int8x16_t x0, int8x16_t x1, int32x4_t init) {
  return vdotq_s32(vdotq_s32(init, a, x0), b, x1);
}

// The gemvm: four rows per step (a tail group computes copies of its last
// row, not stored: results do not depend on the grouping); each block's
// weights are loaded (q4: unpacked) once and dotted with the m positions'
// blocks (two SDOTs per row and position); per (row, position) the exact
// int32 block sum and acc += (d * xd) * (float)isum, block after block, as
// the gemv: bit-identical to it per position. F provides kBytes, kQ4 and
// load(blk, a, b) (the block's weights 0..15 / 16..31 as SDOT takes them).
template <class F>
static inline void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                                size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * F::kBytes;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *bk[4];
    for (size_t k = 0; k < 4; k++) bk[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      int8x16_t wa[4], wb[4];
      for (int k = 0; k < 4; k++) F::load(bk[k] + b * F::kBytes, wa[k], wb[k]);
      const float32x4_t dw = f16_scales4(bk[0] + b * F::kBytes, bk[1] + b * F::kBytes, bk[2] + b * F::kBytes,
                                         bk[3] + b * F::kBytes);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block &xb = XQ[p * ldxq + b];
        const int8x16_t x0 = vld1q_s8(xb.qs), x1 = vld1q_s8(xb.qs + 16);
        const int32x4_t i0 = dot_init<F::kQ4>(x0, x1);
        const int32x4_t isum = hsum4_s32(dot2(wa[0], wb[0], x0, x1, i0), dot2(wa[1], wb[1], x0, x1, i0),
                                         dot2(wa[2], wb[2], x0, x1, i0), dot2(wa[3], wb[3], x0, x1, i0));
        const float32x4_t dd = vmulq_n_f32(dw, xb.d);
        acc[p] = vaddq_f32(acc[p], vmulq_f32(dd, vcvtq_f32_s32(isum)));
      }
    }
    for (size_t p = 0; p < m; p++) {
      if (nr == 4) {
        vst1q_f32(Y + p * ldy + r, acc[p]);
      } else {
        float t[4];
        vst1q_f32(t, acc[p]);
        memcpy(Y + p * ldy + r, t, nr * 4);
      }
    }
  }
}

}  // namespace sdot
}  // namespace gb_arm64
#endif  // __ARM_FEATURE_DOTPROD

// ---- SMMLA: the i8mm folder's q8 / q4 loops -----------------------------------
// SMMLA multiplies a 2x8 int8 matrix A by the transpose of a 2x8 matrix B
// into a 2x2 int32 tile [a0.b0, a0.b1, a1.b0, a1.b1]. Here A holds 8 weights
// of two rows ([row0 bytes k..k+7 | row1 bytes k..k+7], built with ZIP1/ZIP2
// on 64-bit lanes) and B the matching 8 activations in both halves, so a
// 32-block of two rows takes four SMMLAs and leaves [s0, s0, s1, s1]. Two
// such pairs are merged with UZP1 into [s0, s1, s2, s3] (four rows a step);
// a last odd row is paired with itself. Only NEON and SMMLA: the kernels
// require GB_ISA_NEON | GB_ISA_I8MM, no SDOT.
//
// F (the format's file) provides kBlockBytes and load(blk, a, b): the
// block's weights 0..15 and 16..31 as signed bytes.
#if defined(__ARM_FEATURE_MATMUL_INT8)
namespace gb_arm64 {
namespace i8mm {

static inline int8x16_t zip1_64(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
static inline int8x16_t zip2_64(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// The activations of one block as four B operands: xx[i] = [x chunk i | x chunk i].
struct XDup {
  int8x16_t c[4];
};

static inline XDup xdup(const gb_q8x_block &xb) {
  const int8x16_t x0 = vld1q_s8(xb.qs);
  const int8x16_t x1 = vld1q_s8(xb.qs + 16);
  XDup r;
  r.c[0] = zip1_64(x0, x0);
  r.c[1] = zip2_64(x0, x0);
  r.c[2] = zip1_64(x1, x1);
  r.c[3] = zip2_64(x1, x1);
  return r;
}

// Two rows' weights (32 int8 each, as two 16-byte halves) against one block.
static inline int32x4_t mm_pair(int8x16_t r0a, int8x16_t r0b, int8x16_t r1a, int8x16_t r1b, const XDup &x) {
  int32x4_t acc = vmmlaq_s32(vdupq_n_s32(0), zip1_64(r0a, r1a), x.c[0]);
  acc = vmmlaq_s32(acc, zip2_64(r0a, r1a), x.c[1]);
  acc = vmmlaq_s32(acc, zip1_64(r0b, r1b), x.c[2]);
  acc = vmmlaq_s32(acc, zip2_64(r0b, r1b), x.c[3]);
  return acc;  // [s0, s0, s1, s1]
}

// The gemv. The per-block int32 sums are exact and the float work is
// generic's acc += (d * xd) * (float)isum, block after block, unfused.
template <class F>
static inline void gemv_blocks(float *y, const uint8_t *W, const gb_q8x_block *xq, size_t row_begin, size_t row_end,
                               size_t cols) {
  const size_t kB = F::kBlockBytes;
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * kB;
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = b0 + rb;
    const uint8_t *b2 = b1 + rb;
    const uint8_t *b3 = b2 + rb;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const XDup x = xdup(xq[b]);
      int8x16_t w0a, w0b, w1a, w1b, w2a, w2b, w3a, w3b;
      F::load(b0, w0a, w0b);
      F::load(b1, w1a, w1b);
      F::load(b2, w2a, w2b);
      F::load(b3, w3a, w3b);
      const int32x4_t s01 = mm_pair(w0a, w0b, w1a, w1b, x);
      const int32x4_t s23 = mm_pair(w2a, w2b, w3a, w3b, x);
      const int32x4_t isum = vuzp1q_s32(s01, s23);  // [s0, s1, s2, s3]
      const float32x4_t dd = vmulq_n_f32(f16_scales4(b0, b1, b2, b3), xq[b].d);
      acc = vaddq_f32(acc, vmulq_f32(dd, vcvtq_f32_s32(isum)));
      b0 += kB;
      b1 += kB;
      b2 += kB;
      b3 += kB;
    }
    vst1q_f32(y + r, acc);
  }
  // 1..3 rows left: pairs, the last odd row paired with itself.
  for (; r < row_end; r += 2) {
    const bool two = r + 1 < row_end;
    const uint8_t *b0 = W + r * rb;
    const uint8_t *b1 = two ? b0 + rb : b0;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const XDup x = xdup(xq[b]);
      int8x16_t w0a, w0b, w1a, w1b;
      F::load(b0, w0a, w0b);
      F::load(b1, w1a, w1b);
      const int32x4_t s = mm_pair(w0a, w0b, w1a, w1b, x);  // [s0, s0, s1, s1]
      const float32x4_t dd = vmulq_n_f32(f16_scales4(b0, b0, b1, b1), xq[b].d);
      acc = vaddq_f32(acc, vmulq_f32(dd, vcvtq_f32_s32(s)));
      b0 += kB;
      b1 += kB;
    }
    y[r] = vgetq_lane_f32(acc, 0);
    if (two) y[r + 1] = vgetq_lane_f32(acc, 2);
  }
}

// A operands of two rows' 32 weights: [r0 k..k+7 | r1 k..k+7] for k = 0, 8, 16, 24.
struct PairA {
  int8x16_t a[4];
};

static inline PairA pair_a(int8x16_t r0a, int8x16_t r0b, int8x16_t r1a, int8x16_t r1b) {
  PairA p;
  p.a[0] = zip1_64(r0a, r1a);
  p.a[1] = zip2_64(r0a, r1a);
  p.a[2] = zip1_64(r0b, r1b);
  p.a[3] = zip2_64(r0b, r1b);
  return p;
}

static inline int32x4_t mm_pair_a(const PairA &w, const XDup &x) {
  int32x4_t acc = vmmlaq_s32(vdupq_n_s32(0), w.a[0], x.c[0]);
  acc = vmmlaq_s32(acc, w.a[1], x.c[1]);
  acc = vmmlaq_s32(acc, w.a[2], x.c[2]);
  acc = vmmlaq_s32(acc, w.a[3], x.c[3]);
  return acc;  // [s0, s0, s1, s1]
}

// The gemvm: four rows per step (a tail group computes copies of its last
// row, not stored). Per block the two row pairs' A operands (ZIP1/ZIP2 of
// their weights) are built once; per position its B operands (xdup), eight
// SMMLAs and one UZP1 give the four rows' exact int32 sums; then
// acc += (d * xd) * (float)isum, block after block, as the gemv:
// bit-identical to it per position.
template <class F>
static inline void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                                size_t row_begin, size_t row_end, size_t cols) {
  const size_t kB = F::kBlockBytes;
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * kB;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    const uint8_t *bk[4];
    for (size_t k = 0; k < 4; k++) bk[k] = W + (r + (k < nr ? k : nr - 1)) * rb;
    float32x4_t acc[GB_GEMVM_MAX_M];
    for (size_t p = 0; p < m; p++) acc[p] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
      const uint8_t *b0 = bk[0] + b * kB, *b1 = bk[1] + b * kB, *b2 = bk[2] + b * kB, *b3 = bk[3] + b * kB;
      int8x16_t w0a, w0b, w1a, w1b, w2a, w2b, w3a, w3b;
      F::load(b0, w0a, w0b);
      F::load(b1, w1a, w1b);
      F::load(b2, w2a, w2b);
      F::load(b3, w3a, w3b);
      const PairA p01 = pair_a(w0a, w0b, w1a, w1b);
      const PairA p23 = pair_a(w2a, w2b, w3a, w3b);
      const float32x4_t dw = f16_scales4(b0, b1, b2, b3);
      for (size_t p = 0; p < m; p++) {
        const gb_q8x_block &xb = XQ[p * ldxq + b];
        const XDup x = xdup(xb);
        const int32x4_t isum = vuzp1q_s32(mm_pair_a(p01, x), mm_pair_a(p23, x));  // [s0, s1, s2, s3]
        const float32x4_t dd = vmulq_n_f32(dw, xb.d);
        acc[p] = vaddq_f32(acc[p], vmulq_f32(dd, vcvtq_f32_s32(isum)));
      }
    }
    for (size_t p = 0; p < m; p++) {
      if (nr == 4) {
        vst1q_f32(Y + p * ldy + r, acc[p]);
      } else {
        float t[4];
        vst1q_f32(t, acc[p]);
        memcpy(Y + p * ldy + r, t, nr * 4);
      }
    }
  }
}

}  // namespace i8mm
}  // namespace gb_arm64
#endif  // __ARM_FEATURE_MATMUL_INT8

// ---- SVE: the sve folder's q8 / q4 gemvm ----------------------------------------
// Per row and block the weights as two 16-byte halves (q4: unpacked, minus
// 8), dotted (SDOT, SADDV) with each position's block: the exact int32 sum
// whatever the vector length; then, in scalar float,
// acc += (d * xd) * (float)isum, block after block, as the gemv.
//
// F (the format's file) provides kBytes and load(p16, blk, a, b): the
// block's weights 0..15 / 16..31 under p16 (the first 16 byte lanes).
#if defined(__ARM_FEATURE_SVE)
#include <arm_sve.h>

namespace gb_arm64 {
namespace sve {

// Inactive lanes of a / b may hold garbage; x0 / x1 are zero there.
static inline int32_t dot_halves(svint8_t a, svint8_t b, svint8_t x0, svint8_t x1) {
  return (int32_t)svaddv_s32(svptrue_b32(), svdot_s32(svdot_s32(svdup_n_s32(0), a, x0), b, x1));
}

template <class F>
static void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
                         size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const size_t rb = nb * F::kBytes;
  const svbool_t p16 = svwhilelt_b8_u64(0, 16);
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nr = row_end - r < 4 ? row_end - r : 4;
    float acc[4][GB_GEMVM_MAX_M];
    for (size_t k = 0; k < nr; k++)
      for (size_t p = 0; p < m; p++) acc[k][p] = 0.0f;
    for (size_t b = 0; b < nb; b++) {
      for (size_t k = 0; k < nr; k++) {
        const uint8_t *blk = W + (r + k) * rb + b * F::kBytes;
        svint8_t wa, wb;
        F::load(p16, blk, wa, wb);
        const float d = f16_scale(blk);
        for (size_t p = 0; p < m; p++) {
          const gb_q8x_block &xb = XQ[p * ldxq + b];
          const int32_t isum = dot_halves(wa, wb, svld1_s8(p16, xb.qs), svld1_s8(p16, xb.qs + 16));
          acc[k][p] += d * xb.d * (float)isum;
        }
      }
    }
    for (size_t k = 0; k < nr; k++)
      for (size_t p = 0; p < m; p++) Y[p * ldy + r + k] = acc[k][p];
  }
}

}  // namespace sve
}  // namespace gb_arm64
#endif  // __ARM_FEATURE_SVE

#endif  // GEARBX_ARCH_ARM64_COMMON_H
