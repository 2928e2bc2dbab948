// ARMv8.2-A SDOT kernels for q4r16: q4 blocks of 16 rows interleaved
// (kernels.h), one position (gemv) and several (gemvm).
//
// A group-block (16 rows x 32 columns, 288 bytes) is 16 f16 scales, then
// for k = 0..3 the slice qs[4k..4k+3] of each of the 16 rows: 64 bytes per
// slice, one 16-byte vector per four rows (row 4j+i in bytes 4i..4i+3 of
// vector j of the slice). Its low nibbles are weights 4k..4k+3 of those
// rows, its high nibbles weights 16+4k..16+4k+3, so SDOT by element (lane k
// of the activation's bytes 0..15, resp. 16..31) adds each row's four
// products to that row's own 32-bit lane: eight SDOTs (four slices x low /
// high nibbles) leave the block sums of four rows in one vector, with no
// horizontal adds.
//
// Exact integers: the codes are dotted as 0..15 (AND 15, USHR 4) from an
// accumulator that starts at M - 8 x sum(x) (gb_q8x_block::sum), so it ends
// at M + isum, isum = sum((u - 8) * x), |isum| <= 32 * 8 * 128 = 2^15. M is
// the bit pattern of a float C in [2^23, 2^24), where the floats are the
// integers and consecutive integers have consecutive bit patterns: M + isum
// is the bit pattern of C + isum, and (C + isum) - C is (float)isum exactly.
// One FSUB on either FP pipe where SCVTF would take two uops of V0 (LLVM's
// Neoverse-N1 model).
//
// Float work per row and block is generic's acc += (d * xd) * (float)isum,
// block after block, with separate multiplies and adds (-ffp-contract=off):
// bit-identical to gb_q4_gemv__generic on the same weights in row-major q4
// and to gb_q4r16_gemv__generic. The 16 scales of a group-block are one
// 32-byte load, converted four at a time (FCVTL: exact for every non-NaN
// binary16; arm64_common.h's q4r16_scales).
//
// Cost (bench/mca.sh, llvm-mca 19): per group-block 32 SDOT + 16 AND + 16
// USHR + 4 FCVTL (2 uops each) + 16 FP ops = 88 ASIMD uops, 44 cycles on the
// two ASIMD pipes of a Cortex-A76 / Neoverse-N1: 2.75 cycles per 32 weights
// there, against 4.50 for gb_q4_gemv__dotprod; 1.38 on Neoverse-V1.
//
// Row ranges are whole groups (multiples of 16). No byte past the range's
// groups or past xq[ceil(cols/32)) is loaded; prefetches (kPrefetch ahead in
// the weight stream) do not fault.
#include <arm_neon.h>
#include <stdint.h>

#include "arm64/arm64_common.h"
#include "kernels.h"

namespace {

using namespace gb_arm64;

constexpr size_t kGroupBlock = 288;  // bytes of one block of a 16-row group
constexpr size_t kPrefetch = 2048;   // prefetch distance in the weight stream (bytes)

// The four groups of four rows start from different integers: M_j =
// bits(C_j), C_j = (1.5 + j / 8) * 2^23 (C_j + isum stays in [2^23, 2^24)).
// Distinct values keep the compiler from making one DUP and three vector
// copies of the four starts: four DUPs from general registers (M pipe) cost
// no ASIMD uop.
constexpr int32_t kMagic0 = 0x4B400000;
constexpr int32_t magic(int j) { return kMagic0 + (j << 20); }

struct Consts {
  uint8x16_t low4;   // 15 in every byte
  float32x4_t c[4];  // C_j
};

inline Consts consts() {
  Consts k;
  k.low4 = vdupq_n_u8(15);
  for (int j = 0; j < 4; j++) k.c[j] = vreinterpretq_f32_s32(vdupq_n_s32(magic(j)));
  return k;
}

// One activation block as the SDOTs use it.
struct XBlock {
  int8x16_t lo, hi;  // bytes 0..15 (columns of the low nibbles) and 16..31
  int32_t off;       // -8 x sum(qs)
  float d;
};

inline XBlock load_x(const gb_q8x_block &b) { return {vld1q_s8(b.qs), vld1q_s8(b.qs + 16), -8 * b.sum, b.d}; }

// Codes of slice K of four rows, low and high nibbles (0..15).
struct Nibbles {
  int8x16_t lo, hi;
};

inline Nibbles split(uint8x16_t v, uint8x16_t low4) {
  return {vreinterpretq_s8_u8(vandq_u8(v, low4)), vreinterpretq_s8_u8(vshrq_n_u8(v, 4))};
}

template <int K>
inline int32x4_t slice_dot(int32x4_t acc, Nibbles n, const XBlock &x) {
  return vdotq_laneq_s32(vdotq_laneq_s32(acc, n.lo, x.lo, K), n.hi, x.hi, K);
}

// M_j + block sums of rows 4j..4j+3 from their four slices' nibbles.
template <int J>
inline int32x4_t rows4_sum(const Nibbles n[4], const XBlock &x) {
  int32x4_t a = vdupq_n_s32(magic(J) + x.off);
  a = slice_dot<0>(a, n[0], x);
  a = slice_dot<1>(a, n[1], x);
  a = slice_dot<2>(a, n[2], x);
  return slice_dot<3>(a, n[3], x);
}

// The nibbles of rows 4j..4j+3 (q: their 16 bytes of slice 0; the slices
// are 64 bytes apart).
inline void load_rows4(const uint8_t *q, uint8x16_t low4, Nibbles n[4]) {
  for (int k = 0; k < 4; k++) n[k] = split(vld1q_u8(q + 64 * k), low4);
}

// acc += (dw * xd) * (float)isum, biased = M + isum (bits), c = C.
inline float32x4_t accumulate(float32x4_t acc, float32x4_t dw, float xd, int32x4_t biased, float32x4_t c) {
  const float32x4_t f = vsubq_f32(vreinterpretq_f32_s32(biased), c);
  return vaddq_f32(acc, vmulq_f32(vmulq_n_f32(dw, xd), f));
}

template <int J>
inline void rows4_block(float32x4_t acc[4], const uint8_t *g, const float32x4_t dw[4], const XBlock &x,
                        const Consts &k) {
  Nibbles n[4];
  load_rows4(g + 32 + 16 * J, k.low4, n);
  acc[J] = accumulate(acc[J], dw[J], x.d, rows4_sum<J>(n, x), k.c[J]);
}

// One group-block (g) of 16 rows for one position.
inline void group_block(float32x4_t acc[4], const uint8_t *g, const gb_q8x_block &xb, const Consts &k) {
  const XBlock x = load_x(xb);
  float32x4_t dw[4];
  q4r16_scales(g, dw);
  rows4_block<0>(acc, g, dw, x, k);
  rows4_block<1>(acc, g, dw, x, k);
  rows4_block<2>(acc, g, dw, x, k);
  rows4_block<3>(acc, g, dw, x, k);
}

inline void prefetch_block(const uint8_t *g) {
  for (size_t o = 0; o < kGroupBlock; o += 64) __builtin_prefetch(g + kPrefetch + o, 0, 0);  // PLDL1STRM
}

// y[4j + i] = row 16g + 4j + i of group g (its blocks at g) times xq.
__attribute__((always_inline)) inline void group_gemv(float *y, const uint8_t *g, const gb_q8x_block *xq, size_t nb,
                                                      const Consts &k) {
  float32x4_t acc[4];
  for (int j = 0; j < 4; j++) acc[j] = vdupq_n_f32(0.0f);
  for (size_t b = 0; b < nb; b++, g += kGroupBlock) {
    prefetch_block(g);
    group_block(acc, g, xq[b], k);
  }
  for (int j = 0; j < 4; j++) vst1q_f32(y + 4 * j, acc[j]);
}

}  // namespace

extern "C" void gb_q4r16_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                       size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const Consts k = consts();
  for (size_t r = row_begin; r < row_end; r += 16) group_gemv(y + r, W + (r / 16) * nb * kGroupBlock, xq, nb, k);
}

// ---- multi-position GEMV ---------------------------------------------------------
// Per group-block, half a group (8 rows, 16 nibble vectors) is loaded and
// split once, then dotted with each of the m positions' blocks; the float
// accumulators of all (position, row) pairs live in acc[m][4] (on the stack:
// 16 x 4 vectors do not fit the register file) and are read and written once
// per position and half-block. Per (row, position) the same integer start,
// SDOTs, conversion and acc += (d * xd) * (float)isum, block after block, as
// the gemv: bit-identical to gb_q4r16_gemv__dotprod per position. The group's
// weight bytes are loaded once; the positions' activation blocks are re-read
// from cache once per group and half. Per position and 32 weights (llvm-mca,
// Neoverse-N1): 2.25 cycles at m = 2, 1.94 at 4, 1.71 at 16, where re-reading
// the group per position would cost the gemv's 2.75. One position (m = 1)
// takes the gemv's loop.
namespace {

// Rows 8h..8h+7 (H = h) of group-block g for the m positions' blocks xb
// (xb[p * ldxq]).
template <int H>
inline void half_block(float32x4_t (*acc)[4], const uint8_t *g, const float32x4_t dw[4], const gb_q8x_block *xb,
                       size_t ldxq, size_t m, const Consts &k) {
  constexpr int J0 = 2 * H, J1 = 2 * H + 1;
  Nibbles n0[4], n1[4];
  load_rows4(g + 32 + 16 * J0, k.low4, n0);
  load_rows4(g + 32 + 16 * J1, k.low4, n1);
  for (size_t p = 0; p < m; p++, xb += ldxq) {
    const XBlock x = load_x(*xb);
    const int32x4_t s0 = rows4_sum<J0>(n0, x), s1 = rows4_sum<J1>(n1, x);
    acc[p][J0] = accumulate(acc[p][J0], dw[J0], x.d, s0, k.c[J0]);
    acc[p][J1] = accumulate(acc[p][J1], dw[J1], x.d, s1, k.c[J1]);
  }
}

}  // namespace

extern "C" void gb_q4r16_gemvm__dotprod(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                        const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                        size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const Consts k = consts();
  if (m == 1) {  // the gemv's loop: no accumulators in memory
    for (size_t r = row_begin; r < row_end; r += 16) group_gemv(Y + r, W + (r / 16) * nb * kGroupBlock, XQ, nb, k);
    return;
  }
  float32x4_t acc[GB_GEMVM_MAX_M][4];
  for (size_t r = row_begin; r < row_end; r += 16) {
    const uint8_t *g = W + (r / 16) * nb * kGroupBlock;
    for (size_t p = 0; p < m; p++)
      for (int j = 0; j < 4; j++) acc[p][j] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++, g += kGroupBlock) {
      prefetch_block(g);
      float32x4_t dw[4];
      q4r16_scales(g, dw);
      half_block<0>(acc, g, dw, XQ + b, ldxq, m, k);
      half_block<1>(acc, g, dw, XQ + b, ldxq, m, k);
    }
    for (size_t p = 0; p < m; p++)
      for (int j = 0; j < 4; j++) vst1q_f32(Y + p * ldy + r + 4 * j, acc[p][j]);
  }
}
