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
// and to gb_q4r16_gemv__generic.
//
// Scales, gemv: no FCVTL (each FCVTL / FCVTL2 is two uops on ASIMD pipe V0
// in LLVM's Neoverse-N1 model). The f16 scale h is loaded into a general
// register and turned into the f32 bit pattern
//   ((h & 0x8000) << 16) | ((h & 0x7fff) << 13),
// which is the value h * 2^-112 exactly: a normal binary16 (1 + m/2^10) *
// 2^(e-15) (biased exponent e = 1..30) becomes the normal f32 with biased
// exponent e, (1 + m/2^10) * 2^(e-127); a subnormal m * 2^-24 becomes the
// f32 subnormal (m * 2^13) * 2^-149 = m * 2^-136; +-0 stays +-0. Two scales
// per 64-bit register (scale_pair: two LDRSH, then UXTW, ORR and an AND with
// a shifted register), four per vector by FMOV D and FMOV V.D[1] (the M
// pipe, no ASIMD uop). The activation scale is replaced by xd' = xd *
// 2^112, once per call and block: exact, as a product by a power of two
// that neither overflows (|xd| < 2^16: |xd'| <= FLT_MAX) nor rounds (a
// subnormal xd becomes a normal xd'). So dw' * xd' is the same real number
// as d * xd and rounds to the same float: the results do not change by a
// bit. What this needs is checked, and the FCVTL path (arm64_common.h's
// q4r16_scales: one 32-byte load, FCVTL / FCVTL2, exact for every non-NaN
// binary16) is taken where it fails:
//  - FPCR.FZ (and FEAT_AFP's FPCR.FIZ) clear, read once per call: flushing
//    would zero the subnormal dw'. Set: the whole call takes FCVTL.
//  - every |xd| < 2^16 (so none is inf or NaN), per column chunk: else the
//    chunk takes FCVTL.
//  - no scale is inf or NaN (exponent 31 would read as a finite f32):
//    (bits & 0x7C00) + 0x0400 reaches bit 15 exactly for exponent 31, tested
//    four scales at a time in a general register and collected per group
//    and chunk. Set: that group's chunk is recomputed through FCVTL from the
//    sums it started with (inf and NaN propagate as in the generic kernel).
// Columns are taken in chunks of kChunk = 512 blocks (16384 columns; their
// xd' on the stack, 2 KiB); after the first chunk a row's sum goes on from
// y[r], so every row still adds its blocks in order. The gemvm (m >= 2)
// keeps FCVTL, converted once per group-block for all its positions.
//
// Cost (bench/mca.sh, llvm-mca 19), gemv: per group-block 32 SDOT + 16 AND
// + 16 USHR + 16 FP ops (4 FSUB, 4 FMUL dw' * xd', 4 FMUL, 4 FADD) = 80
// ASIMD uops, 40 cycles on the two ASIMD pipes of a Neoverse-N1 (V0 40, V1
// 40, M 24 per group-block): 2.50 cycles per 32 weights, against 2.75 with
// FCVTL (88 uops), 4.50 for gb_q4_gemv__dotprod and a Raspberry Pi 5's DRAM
// bound of 2.53. The conversion's integer work (16 LDRSH, four 8-byte
// loads, 36 ALU ops, 8 FMOV) runs on the load and integer pipes, which have
// room. Neoverse-V1: 1.31 (FCVTL: 1.38). The in-order Cortex-A55 pays for
// the ~60 more instructions: 13.12 (FCVTL: 12.44); LLVM's Cortex-A76 (its
// Cortex-A57 model) 4.63 (4.13). The 80 depend on GCC's register
// allocation: asm statements steer it (sdot_in_place; xd' kept a scalar;
// the mask hidden in a register), and mca.sh shows the loop's count after
// any change to this file.
//
// Row ranges are whole groups (multiples of 16). No byte past the range's
// groups or past xq[ceil(cols/32)) is loaded; prefetches (kPrefetch ahead in
// the weight stream) do not fault.
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

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

// SDOT by element K as an asm statement that reads and writes its
// accumulator in place ("+w"). Used by the gemv's main loop: there, with the
// intrinsic, GCC 12's register allocation sometimes moves an accumulator to
// another register between two SDOTs (a MOV: one more ASIMD uop).
template <int K>
inline int32x4_t sdot_in_place(int32x4_t acc, int8x16_t w, int8x16_t x) {
  __asm__("sdot %0.4s, %1.16b, %2.4b[%3]" : "+w"(acc) : "w"(w), "w"(x), "i"(K));
  return acc;
}

template <int K, bool InPlace>
inline int32x4_t slice_dot(int32x4_t acc, Nibbles n, const XBlock &x) {
  if (InPlace) return sdot_in_place<K>(sdot_in_place<K>(acc, n.lo, x.lo), n.hi, x.hi);
  return vdotq_laneq_s32(vdotq_laneq_s32(acc, n.lo, x.lo, K), n.hi, x.hi, K);
}

// M_j + block sums of rows 4j..4j+3 from their four slices' nibbles.
template <int J, bool InPlace = false>
inline int32x4_t rows4_sum(const Nibbles n[4], const XBlock &x) {
  int32x4_t a = vdupq_n_s32(magic(J) + x.off);
  a = slice_dot<0, InPlace>(a, n[0], x);
  a = slice_dot<1, InPlace>(a, n[1], x);
  a = slice_dot<2, InPlace>(a, n[2], x);
  return slice_dot<3, InPlace>(a, n[3], x);
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

template <int J, bool InPlace = false>
inline void rows4_block(float32x4_t acc[4], const uint8_t *g, const float32x4_t dw[4], const XBlock &x,
                        const Consts &k) {
  Nibbles n[4];
  load_rows4(g + 32 + 16 * J, k.low4, n);
  acc[J] = accumulate(acc[J], dw[J], x.d, rows4_sum<J, InPlace>(n, x), k.c[J]);
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

// acc[j] lane i (row 4j + i of the group) over the n blocks at g (FCVTL path).
__attribute__((always_inline)) inline void group_blocks(float32x4_t acc[4], const uint8_t *g,
                                                        const gb_q8x_block *xq, size_t n, const Consts &k) {
  for (size_t b = 0; b < n; b++, g += kGroupBlock) {
    prefetch_block(g);
    group_block(acc, g, xq[b], k);
  }
}

// y[4j + i] = row 16g + 4j + i of group g (its blocks at g) times xq.
__attribute__((always_inline)) inline void group_gemv(float *y, const uint8_t *g, const gb_q8x_block *xq, size_t nb,
                                                      const Consts &k) {
  float32x4_t acc[4];
  for (int j = 0; j < 4; j++) acc[j] = vdupq_n_f32(0.0f);
  group_blocks(acc, g, xq, nb, k);
  for (int j = 0; j < 4; j++) vst1q_f32(y + 4 * j, acc[j]);
}

// ---- the gemv's scales without FCVTL ----------------------------------------
// (The header says why each step is exact and when the FCVTL path is taken.)
constexpr size_t kChunk = 512;                    // blocks per column chunk: xd' on the stack, 2 KiB
constexpr float kScaleUp = 0x1p112f;              // xd' = xd * 2^112
constexpr float kMaxXd = 0x1p16f;                 // |xd| < 2^16: xd' finite and exact
constexpr uint64_t kFpcrFlush = (1u << 24) | 1u;  // FPCR.FZ; FPCR.FIZ (FEAT_AFP; RES0 without it)

// Bit patterns of h0 * 2^-112 and h1 * 2^-112 as f32, h0 and h1 the scales
// at s and s + 2, in the low and the high 32 bits. t holds each scale
// sign-extended to 32 bits in its half; t << 13 puts bits 0..14 of each at
// 13..27 of its half and copies of its sign at 28..31 (the low half's upper
// copies spill into 32..44); mask = 0x8fffe000 in each half keeps the sign
// at 31 and 13..27 and clears the rest.
inline uint64_t scale_pair(const uint8_t *s, uint64_t mask) {
  int16_t h0, h1;
  memcpy(&h0, s, 2);
  memcpy(&h1, s + 2, 2);
  const uint64_t t = (uint64_t)(uint32_t)(int32_t)h0 | ((uint64_t)(int64_t)h1 << 32);
  return (t << 13) & mask;
}

// The four scales at s as h * 2^-112: FMOV D and FMOV V.D[1] from general
// registers, no ASIMD uop in LLVM's Neoverse-N1 model (INS, the compiler's
// choice for a high half, takes one).
inline float32x4_t scale_vec(const uint8_t *s, uint64_t mask) {
  const uint64_t lo = scale_pair(s, mask), hi = scale_pair(s + 4, mask);
  float32x4_t v;
  __asm__("fmov %d0, %1\n\tfmov %0.d[1], %2" : "=w"(v) : "r"(lo), "r"(hi));
  return v;
}

// Bit 15 of a 16-bit lane is set iff that scale of the four at s is inf or
// NaN (exponent bits 0x7C00: + 0x0400 carries into bit 15; smaller
// exponents do not reach it, and no lane carries into the next).
inline uint64_t nonfinite_bits(const uint8_t *s) {
  uint64_t v;
  memcpy(&v, s, 8);
  return (v & 0x7c007c007c007c00ull) + 0x0400040004000400ull;
}

// group_block with the scales as h * 2^-112 and xd' (= xd * 2^112) for xd;
// flag collects nonfinite_bits of the 16 scales.
inline void group_block_scaled(float32x4_t acc[4], const uint8_t *g, const gb_q8x_block &xb, float xd_up,
                               uint64_t &flag, uint64_t mask, const Consts &k) {
  XBlock x = load_x(xb);
  __asm__("" : "+w"(xd_up));  // a scalar register: FMUL by element, not a broadcast load (LD1R, an ASIMD uop)
  x.d = xd_up;
  float32x4_t dw[4];
  for (int j = 0; j < 4; j++) dw[j] = scale_vec(g + 8 * j, mask);
  for (int j = 0; j < 4; j++) flag |= nonfinite_bits(g + 8 * j);
  rows4_block<0, true>(acc, g, dw, x, k);
  rows4_block<1, true>(acc, g, dw, x, k);
  rows4_block<2, true>(acc, g, dw, x, k);
  rows4_block<3, true>(acc, g, dw, x, k);
}

// group_blocks through group_block_scaled (xd' of block b in xd_up[b]);
// false if one of the scales is inf or NaN (acc must then be recomputed).
__attribute__((always_inline)) inline bool group_blocks_scaled(float32x4_t acc[4], const uint8_t *g,
                                                               const gb_q8x_block *xq, const float *xd_up, size_t n,
                                                               uint64_t mask, const Consts &k) {
  uint64_t flag = 0;
  for (size_t b = 0; b < n; b++, g += kGroupBlock) {
    prefetch_block(g);
    group_block_scaled(acc, g, xq[b], xd_up[b], flag, mask, k);
  }
  return (flag & 0x8000800080008000ull) == 0;
}

inline uint64_t read_fpcr() {
  uint64_t v;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
  return v;
}

}  // namespace

extern "C" void gb_q4r16_gemv__dotprod(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                       size_t row_begin, size_t row_end, size_t cols) {
  const size_t nb = (cols + 31) / 32;
  const Consts k = consts();
  if (nb == 0 || (read_fpcr() & kFpcrFlush)) {  // (no columns: zeros) flushing would zero a subnormal dw
    for (size_t r = row_begin; r < row_end; r += 16) group_gemv(y + r, W + (r / 16) * nb * kGroupBlock, xq, nb, k);
    return;
  }
  // The pattern mask in a register behind an asm statement (the AND takes
  // the shift as its shifted-register operand either way; without the asm,
  // GCC 12 allocates the loop's vector registers with two MOVs).
  uint64_t mask = 0x8fffe0008fffe000ull;
  __asm__("" : "+r"(mask));
  // Columns in chunks of kChunk blocks; after the first chunk a row's sum
  // goes on from y[r], so each row still adds its blocks in order.
  float xd_up[kChunk];
  for (size_t b0 = 0; b0 < nb; b0 += kChunk) {
    const size_t n = nb - b0 < kChunk ? nb - b0 : kChunk;
    bool scaled = true;  // every |xd| < 2^16 (false where one is inf or NaN)
    for (size_t b = 0; b < n; b++) {
      const float d = xq[b0 + b].d;
      scaled &= __builtin_fabsf(d) < kMaxXd;
      xd_up[b] = d * kScaleUp;
    }
    for (size_t r = row_begin; r < row_end; r += 16) {
      const uint8_t *g = W + ((r / 16) * nb + b0) * kGroupBlock;
      float32x4_t acc0[4], acc[4];
      for (int j = 0; j < 4; j++) acc0[j] = b0 ? vld1q_f32(y + r + 4 * j) : vdupq_n_f32(0.0f);
      for (int j = 0; j < 4; j++) acc[j] = acc0[j];
      if (!scaled || !group_blocks_scaled(acc, g, xq + b0, xd_up, n, mask, k)) {  // the FCVTL path
        for (int j = 0; j < 4; j++) acc[j] = acc0[j];
        group_blocks(acc, g, xq + b0, n, k);
      }
      for (int j = 0; j < 4; j++) vst1q_f32(y + r + 4 * j, acc[j]);
    }
  }
}

// ---- multi-position GEMV ---------------------------------------------------------
// Per group-block, half a group (8 rows, 16 nibble vectors) is loaded and
// split once, then dotted with each of the m positions' blocks; the float
// accumulators of all (position, row) pairs live in acc[m][4] (on the stack:
// 16 x 4 vectors do not fit the register file) and are read and written once
// per position and half-block. Per (row, position) the same integer start,
// SDOTs and acc += (d * xd) * (float)isum, block after block, as the gemv,
// with the scales by FCVTL (exact, as the gemv's are): bit-identical to
// gb_q4r16_gemv__dotprod per position. The group's weight bytes are loaded
// once; the positions' activation blocks are re-read from cache once per
// group and half. Per position and 32 weights (llvm-mca, Neoverse-N1): 2.25
// cycles at m = 2, 1.94 at 4, 1.71 at 16, where re-reading the group per
// position with FCVTL would cost 2.75 (the gemv's loop: 2.50). One position
// (m = 1) takes the gemv.
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
  if (m == 1) {  // the gemv: no accumulators in memory
    gb_q4r16_gemv__dotprod(Y, W, nullptr, XQ, row_begin, row_end, cols);
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
