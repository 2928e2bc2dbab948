// What the generic kernels of GGUF's block formats share (q4_1, q5_0, q5_1,
// iq4nl in gemv_blk32.cpp; the K-quants in gemv_q2k_q3k.cpp, gemv_q4k.cpp,
// gemv_q5k.cpp, gemv_q6k.cpp; layouts in kernels.h). Every block is first
// unpacked (F::unpack, the format's file) to one code per weight (int8, ggml
// element order) plus its scales as integers; the nine formats then share
// two arithmetics:
//   32-weight blocks (one activation block each):
//     isum = sum code * xq.qs                                 (exact int32)
//     with a min (q4_1, q5_1: w = d*code + m):
//       acc += xd * (d*(float)isum + m*(float)xq.sum)
//     without (q5_0, iq4nl: w = d*code):   acc += xd * (d*(float)isum)
//   256-weight super-blocks, scales per 16 weights (q4k / q5k's scale of 32
//   weights is stored for both of its halves, so sc_a == sc_b there):
//     per activation block a (its halves lo, hi):
//       is1 = sc_lo*isum_lo + sc_hi*isum_hi                    (exact int32)
//     with mins (q2k, q4k, q5k: w = d*sc*code - dmin*mn):
//       is2 = mn_lo*asum_lo + mn_hi*asum_hi  (asum: sum of the 16 xq.qs)
//       acc += xd * (d*(float)is1 - dmin*(float)is2)
//     without (q3k, q6k: signed codes, w = d*sc*code):
//       acc += xd * (d*(float)is1)
//   64- or 128-weight blocks under one scale (q2_0, q1_0: w = d*code),
//   per activation block a:  acc += xd * (d*(float)isum_a)
//   64-weight blocks with a float scale per 16 weights (nvfp4: w = d_k*code),
//   per activation block a (its halves lo, hi):
//     acc += xd * (d_lo*(float)isum_lo + d_hi*(float)isum_hi)
// For q4k / q5k, is1 = sc_s*isum_s and is2 = mn_s*xq.sum over the whole
// activation block: SIMD kernels may form them either way. The |integers|
// stay below 2^24, so (float)is is exact.
// rows_to_f32 is the formats' one decoder (formats.h: the converter decodes
// GGUF tensors with it too). It forms ggml's float operations in ggml's
// order, so it is bit-exact with ggml's dequantize_row_* (compiled with
// -ffp-contract=off; tests/test_gguf_fixtures.cpp checks every type against
// ggml's values):
//   with a min: (float)code*d + m;   without: d*(float)code
//   K: dl = d*(float)sc, ml = dmin*(float)mn, dl*(float)code - ml
//      (without mins: dl*(float)code).
// gemv is gemvm with one position, so the two are bit-identical by
// construction; a row is done block by block, each block unpacked once.
#ifndef GEARBX_ARCH_GENERIC_GEMV_GGML_H
#define GEARBX_ARCH_GENERIC_GEMV_GGML_H

#include "../f16.h"
#include "../gguf_blocks.h"
#include "../kernels.h"
#include "../krows16.h"

namespace {

inline float ld_f16(const uint8_t *p) { return gb::f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }
inline uint32_t ld_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

// Exact integer sums over n codes and activations.
inline int32_t idot(const int8_t *q, const int8_t *x, int n) {
  int32_t s = 0;
  for (int j = 0; j < n; j++) s += (int32_t)q[j] * (int32_t)x[j];
  return s;
}
inline int32_t isum16(const int8_t *x) {
  int32_t s = 0;
  for (int j = 0; j < 16; j++) s += x[j];
  return s;
}

// ---- 32-weight blocks ----------------------------------------------------------
struct Block32 {
  static constexpr size_t kWeights = 32;
  int8_t q[32];  // codes in element order
  float d, m;    // m: 0 where the format has no min
};

// The block's contribution to one position's sum (its one activation block).
template <bool kMin>
inline void accumulate(const Block32 &u, const gb_q8x_block *x, float *acc) {
  const int32_t isum = idot(u.q, x->qs, 32);
  if (kMin) {
    *acc += x->d * (u.d * (float)isum + u.m * (float)x->sum);
  } else {
    *acc += x->d * (u.d * (float)isum);
  }
}

template <bool kMin>
inline void expand(const Block32 &u, float *out) {
  for (int j = 0; j < 32; j++) out[j] = kMin ? (float)u.q[j] * u.d + u.m : u.d * (float)u.q[j];
}

// ---- N-weight blocks under one scale, N a multiple of 32 (q1_0, q2_0) -------------
template <size_t N>
struct BlockD {
  static constexpr size_t kWeights = N;
  int8_t q[N];  // codes in element order
  float d;
};

template <bool kMin, size_t N>
inline void accumulate(const BlockD<N> &u, const gb_q8x_block *x, float *acc) {
  static_assert(!kMin && N % 32 == 0, "one scale, whole activation blocks");
  for (size_t a = 0; a < N / 32; a++, x++) *acc += x->d * (u.d * (float)idot(u.q + 32 * a, x->qs, 32));
}

template <bool kMin, size_t N>
inline void expand(const BlockD<N> &u, float *out) {
  for (size_t j = 0; j < N; j++) out[j] = u.d * (float)u.q[j];
}

// ---- 64-weight blocks, a float scale per 16 weights (nvfp4) ------------------------
struct Block64x4 {
  static constexpr size_t kWeights = 64;
  int8_t q[64];  // codes in element order
  float d[4];    // scale of weights 16k..16k+15
};

template <bool kMin>
inline void accumulate(const Block64x4 &u, const gb_q8x_block *x, float *acc) {
  static_assert(!kMin, "no min");
  for (int a = 0; a < 2; a++, x++)
    *acc += x->d * (u.d[2 * a] * (float)idot(u.q + 32 * a, x->qs, 16) +
                    u.d[2 * a + 1] * (float)idot(u.q + 32 * a + 16, x->qs + 16, 16));
}

template <bool kMin>
inline void expand(const Block64x4 &u, float *out) {
  for (int j = 0; j < 64; j++) out[j] = (float)u.q[j] * u.d[j / 16];
}

// ---- 256-weight super-blocks (K-quants) ------------------------------------------
struct Block256 {
  static constexpr size_t kWeights = 256;
  int8_t q[256];   // codes in element order
  int32_t sc[16];  // scale of weights 16t..16t+15
  int32_t mn[16];  // min of the same (0 where the format has none)
  float d, dmin;
};

// The super-blocks' codes are unpacked per 32-weight group s = e / 32
// (0..7), weight l = e % 32 of it.
// q4k / q5k: 64 weights per 32 bytes of nibbles; group s takes the low (s
// even) or high nibbles of bytes 32(s/2)..
inline void nibbles256(const uint8_t *qs, int8_t *q) {
  for (int s = 0; s < 8; s++)
    for (int l = 0; l < 32; l++) {
      const uint8_t v = qs[32 * (s / 2) + l];
      q[32 * s + l] = (int8_t)(s % 2 ? v >> 4 : v & 15);
    }
}

// q4k / q5k: the scale and min of 32-weight sub-block s (0..7), from the
// 12 scale bytes q, as those of both of its 16-weight halves.
inline void set_scale_min_k4(int s, const uint8_t *q, Block256 *u) {
  uint8_t sc, mn;
  gb_gguf::scale_min_k4(s, q, &sc, &mn);
  u->sc[2 * s] = u->sc[2 * s + 1] = sc;
  u->mn[2 * s] = u->mn[2 * s + 1] = mn;
}

template <bool kMin>
inline void accumulate(const Block256 &u, const gb_q8x_block *x, float *acc) {
  for (int a = 0; a < 8; a++, x++) {
    const int8_t *q = u.q + 32 * a;
    const int32_t is1 = u.sc[2 * a] * idot(q, x->qs, 16) + u.sc[2 * a + 1] * idot(q + 16, x->qs + 16, 16);
    if (kMin) {
      const int32_t is2 = u.mn[2 * a] * isum16(x->qs) + u.mn[2 * a + 1] * isum16(x->qs + 16);
      *acc += x->d * (u.d * (float)is1 - u.dmin * (float)is2);
    } else {
      *acc += x->d * (u.d * (float)is1);
    }
  }
}

template <bool kMin>
inline void expand(const Block256 &u, float *out) {
  for (int t = 0; t < 16; t++) {
    const float dl = u.d * (float)u.sc[t], ml = kMin ? u.dmin * (float)u.mn[t] : 0.0f;
    for (int l = 0; l < 16; l++) out[16 * t + l] = kMin ? dl * (float)u.q[16 * t + l] - ml : dl * (float)u.q[16 * t + l];
  }
}

// ---- the drivers -------------------------------------------------------------------
// A format F gives: using Block (Block32 or Block256); kBytes (per block);
// kMin (whether it has mins); static void unpack(const uint8_t *, Block *).
// Block b of row r: in place (row-major), or gathered out of its 16-row
// group into `buf` (q4kr16 / q6kr16, arch/krows16.h). Everything after the
// fetch is the same, in the same order, so the 16-row kernels are
// bit-identical with the row-major ones on the de-interleaved matrix.
template <class F, bool kR16>
inline const uint8_t *block_at(const uint8_t *W, size_t r, size_t b, size_t nb, uint8_t *buf) {
  if (!kR16) return W + (r * nb + b) * F::kBytes;
  constexpr size_t R = gb_krows16::kRows;
  gb_krows16::gather(buf, W + ((r / R) * nb + b) * R * F::kBytes, F::kBytes, r % R);
  return buf;
}

// Rows [row_begin, row_end) times m positions; each block unpacked once.
template <class F, bool kR16>
void gemvm(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
           size_t row_end, size_t cols) {
  constexpr size_t kW = F::Block::kWeights, kAct = kW / GB_QBLOCK;
  const size_t nb = cols / kW;
  for (size_t r = row_begin; r < row_end; r++) {
    float acc[GB_GEMVM_MAX_M];
    for (size_t i = 0; i < m; i++) acc[i] = 0.0f;
    for (size_t b = 0; b < nb; b++) {
      uint8_t buf[F::kBytes];
      typename F::Block u;
      F::unpack(block_at<F, kR16>(W, r, b, nb, buf), &u);
      for (size_t i = 0; i < m; i++) accumulate<F::kMin>(u, XQ + i * ldxq + b * kAct, &acc[i]);
    }
    for (size_t i = 0; i < m; i++) Y[i * ldy + r] = acc[i];
  }
}

template <class F, bool kR16>
void rows_to_f32(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols) {
  constexpr size_t kW = F::Block::kWeights;
  const size_t nb = cols / kW;
  for (size_t r = row_begin; r < row_end; r++) {
    float *o = out + (r - row_begin) * cols;
    for (size_t b = 0; b < nb; b++, o += kW) {
      uint8_t buf[F::kBytes];
      typename F::Block u;
      F::unpack(block_at<F, kR16>(W, r, b, nb, buf), &u);
      expand<F::kMin>(u, o);
    }
  }
}

}  // namespace

// The three entry points of format `fmt` (kernels.inc) on format type F,
// row-major or (R16) in the 16-row layout.
#define GB_GGML_GENERIC(fmt, F, R16)                                                                                \
  extern "C" void gb_##fmt##_gemv__generic(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,      \
                                           size_t row_begin, size_t row_end, size_t cols) {                        \
    gemvm<F, R16>(y, 0, W, xq, 0, 1, row_begin, row_end, cols);                                                  \
  }                                                                                                                 \
  extern "C" void gb_##fmt##_gemvm__generic(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,         \
                                            const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,        \
                                            size_t row_end, size_t cols) {                                          \
    gemvm<F, R16>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);                                             \
  }                                                                                                                 \
  extern "C" void gb_##fmt##_rows_to_f32__generic(float *out, const uint8_t *W, size_t row_begin, size_t row_end, \
                                                  size_t cols) {                                                    \
    rows_to_f32<F, R16>(out, W, row_begin, row_end, cols);                                                       \
  }

#endif  // GEARBX_ARCH_GENERIC_GEMV_GGML_H
