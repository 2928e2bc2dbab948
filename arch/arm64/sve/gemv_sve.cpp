// SVE kernels (any vector length: 128, 256, 512 ... 2048 bits): f32 / f16 /
// q8 / q4 GEMV.
//
// Vector-length agnostic: every loop steps by svcntw() / svcnth() / svcntb()
// under svwhilelt predicates, so columns need not be a multiple of the
// vector length and nothing past x[cols) or the row's bytes is touched
// (inactive lanes of a predicated load are not accessed).
//
// f32 / f16: four rows at a time, one predicated FMLA accumulator per row
// (two for f16) and a final FADDV: a different order of summation than
// generic, within the tests' tolerance.
// q8 / q4: per 32-block and row an exact int32 sum (SDOT over the block's
// bytes, one vector when VL >= 256 bits, two steps at 128 bits, then SADDV),
// then generic's acc += (d * xd) * (float)isum in scalar float, block after
// block, unfused: the results equal the generic kernels' bit for bit.
//
// Weight rows are not assumed aligned: weights are loaded as bytes (LD1B)
// and reinterpreted; the fp16 block scale goes through memcpy.
#include <arm_neon.h>
#include <arm_sve.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "kernels.h"

namespace {

inline float f16_scale(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// svcntw() floats of a row from byte offset 4*c, predicated by bytes.
inline svfloat32_t ld_w32(const uint8_t *row, uint64_t c, uint64_t cols) {
  return svreinterpret_f32_u8(svld1_u8(svwhilelt_b8_u64(4 * c, 4 * cols), row + 4 * c));
}

inline svfloat32_t cvt_f16(svbool_t pg, svuint32_t h) {
  return svcvt_f32_f16_x(pg, svreinterpret_f16_u32(h));
}

// One f16 step: svcnth() weights at p (byte predicate pb) against x0 / x1.
inline void f16_step(svfloat32_t &lo, svfloat32_t &hi, const uint8_t *p, svbool_t pb, svbool_t p0, svbool_t p1,
                     svfloat32_t x0, svfloat32_t x1) {
  const svuint16_t h = svreinterpret_u16_u8(svld1_u8(pb, p));
  lo = svmla_f32_m(p0, lo, cvt_f16(p0, svunpklo_u32(h)), x0);
  hi = svmla_f32_m(p1, hi, cvt_f16(p1, svunpkhi_u32(h)), x1);
}

}  // namespace

// ---- f32 ---------------------------------------------------------------------

extern "C" void gb_f32_gemv__sve(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                 size_t row_begin, size_t row_end, size_t cols) {
  const uint64_t n = cols;
  const uint64_t vl = svcntw();
  const size_t rb = cols * 4;
  const svbool_t all = svptrue_b32();
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *w0 = W + r * rb;
    const uint8_t *w1 = w0 + rb;
    const uint8_t *w2 = w1 + rb;
    const uint8_t *w3 = w2 + rb;
    svfloat32_t a0 = svdup_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (uint64_t c = 0; c < n; c += vl) {
      const svbool_t pg = svwhilelt_b32_u64(c, n);
      const svfloat32_t xv = svld1_f32(pg, x + c);
      a0 = svmla_f32_m(pg, a0, ld_w32(w0, c, n), xv);
      a1 = svmla_f32_m(pg, a1, ld_w32(w1, c, n), xv);
      a2 = svmla_f32_m(pg, a2, ld_w32(w2, c, n), xv);
      a3 = svmla_f32_m(pg, a3, ld_w32(w3, c, n), xv);
    }
    y[r] = svaddv_f32(all, a0);
    y[r + 1] = svaddv_f32(all, a1);
    y[r + 2] = svaddv_f32(all, a2);
    y[r + 3] = svaddv_f32(all, a3);
  }
  for (; r < row_end; r++) {
    const uint8_t *w = W + r * rb;
    svfloat32_t a0 = svdup_n_f32(0.0f), a1 = a0;
    uint64_t c = 0;
    for (; c + 2 * vl <= n; c += 2 * vl) {
      a0 = svmla_f32_x(all, a0, ld_w32(w, c, n), svld1_f32(all, x + c));
      a1 = svmla_f32_x(all, a1, ld_w32(w, c + vl, n), svld1_vnum_f32(all, x + c, 1));
    }
    for (; c < n; c += vl) {
      const svbool_t pg = svwhilelt_b32_u64(c, n);
      a0 = svmla_f32_m(pg, a0, ld_w32(w, c, n), svld1_f32(pg, x + c));
    }
    y[r] = svaddv_f32(all, svadd_f32_x(all, a0, a1));
  }
}

// ---- f16 ---------------------------------------------------------------------
// One step covers svcnth() columns: the bytes are loaded once, split into
// two halves of svcntw() 32-bit lanes (UNPKLO / UNPKHI, the binary16 in the
// low half of each lane) and widened with FCVT.

extern "C" void gb_f16_gemv__sve(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                 size_t row_begin, size_t row_end, size_t cols) {
  const uint64_t n = cols;
  const uint64_t vw = svcntw();
  const uint64_t vh = svcnth();
  const size_t rb = cols * 2;
  const svbool_t all = svptrue_b32();
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    const uint8_t *w0 = W + r * rb;
    const uint8_t *w1 = w0 + rb;
    const uint8_t *w2 = w1 + rb;
    const uint8_t *w3 = w2 + rb;
    svfloat32_t l0 = svdup_n_f32(0.0f), l1 = l0, l2 = l0, l3 = l0;
    svfloat32_t h0 = l0, h1 = l0, h2 = l0, h3 = l0;
    for (uint64_t c = 0; c < n; c += vh) {
      const svbool_t pb = svwhilelt_b8_u64(2 * c, 2 * n);
      const svbool_t p0 = svwhilelt_b32_u64(c, n);
      const svbool_t p1 = svwhilelt_b32_u64(c + vw, n);
      const svfloat32_t x0 = svld1_f32(p0, x + c);
      const svfloat32_t x1 = svld1_vnum_f32(p1, x + c, 1);
      f16_step(l0, h0, w0 + 2 * c, pb, p0, p1, x0, x1);
      f16_step(l1, h1, w1 + 2 * c, pb, p0, p1, x0, x1);
      f16_step(l2, h2, w2 + 2 * c, pb, p0, p1, x0, x1);
      f16_step(l3, h3, w3 + 2 * c, pb, p0, p1, x0, x1);
    }
    y[r] = svaddv_f32(all, svadd_f32_x(all, l0, h0));
    y[r + 1] = svaddv_f32(all, svadd_f32_x(all, l1, h1));
    y[r + 2] = svaddv_f32(all, svadd_f32_x(all, l2, h2));
    y[r + 3] = svaddv_f32(all, svadd_f32_x(all, l3, h3));
  }
  for (; r < row_end; r++) {
    const uint8_t *w = W + r * rb;
    svfloat32_t lo = svdup_n_f32(0.0f), hi = lo;
    for (uint64_t c = 0; c < n; c += vh) {
      const svbool_t pb = svwhilelt_b8_u64(2 * c, 2 * n);
      const svbool_t p0 = svwhilelt_b32_u64(c, n);
      const svbool_t p1 = svwhilelt_b32_u64(c + vw, n);
      f16_step(lo, hi, w + 2 * c, pb, p0, p1, svld1_f32(p0, x + c), svld1_vnum_f32(p1, x + c, 1));
    }
    y[r] = svaddv_f32(all, svadd_f32_x(all, lo, hi));
  }
}

// ---- q8 / q4 -----------------------------------------------------------------

namespace {

// Exact int32 dot product of one q8 block's 32 weights with the activations.
inline int32_t dot_q8(const uint8_t *blk, const int8_t *xs, uint64_t vb) {
  svint32_t s = svdup_n_s32(0);
  for (uint64_t j = 0; j < 32; j += vb) {
    const svbool_t pg = svwhilelt_b8_u64(j, 32);
    s = svdot_s32(s, svld1_s8(pg, (const int8_t *)(blk + 2 + j)), svld1_s8(pg, xs + j));
  }
  return (int32_t)svaddv_s32(svptrue_b32(), s);
}

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

// ---- multi-position GEMV ---------------------------------------------------------
// Y[i*ldy + r] for m positions, bit-identical per position to the kernels
// above at every vector length: the same row grouping (f32: groups of four,
// then single rows, whose order differs), the same predicated steps of
// svcntw() / svcnth() columns and the same FADDV per (row, position). Up to
// four positions share each weight vector load (SVE vectors cannot be held
// in arrays: the accumulators are named, unused ones compiled away for
// P < 4); a tile's rows are re-read from cache once per chunk of four
// positions. q8 / q4: each block's weights are loaded once per row and
// dotted with all m positions' blocks.

namespace {

// a_k += w_k * xv on the lanes of pg, rows k = 0..3 (a group's step).
inline void mla4(svbool_t pg, svfloat32_t &a0, svfloat32_t &a1, svfloat32_t &a2, svfloat32_t &a3, svfloat32_t w0,
                 svfloat32_t w1, svfloat32_t w2, svfloat32_t w3, svfloat32_t xv) {
  a0 = svmla_f32_m(pg, a0, w0, xv);
  a1 = svmla_f32_m(pg, a1, w1, xv);
  a2 = svmla_f32_m(pg, a2, w2, xv);
  a3 = svmla_f32_m(pg, a3, w3, xv);
}

inline void store4(float *y, svfloat32_t a0, svfloat32_t a1, svfloat32_t a2, svfloat32_t a3) {
  const svbool_t all = svptrue_b32();
  y[0] = svaddv_f32(all, a0);
  y[1] = svaddv_f32(all, a1);
  y[2] = svaddv_f32(all, a2);
  y[3] = svaddv_f32(all, a3);
}

// f32, rows r..r+3 (a group of gb_f32_gemv__sve), positions x[0..P), P <= 4.
template <int P>
void f32m_group(float *Y, size_t ldy, const uint8_t *W, const float *const *x, size_t r, size_t cols) {
  const uint64_t n = cols;
  const uint64_t vl = svcntw();
  const size_t rb = cols * 4;
  const uint8_t *w0 = W + r * rb, *w1 = w0 + rb, *w2 = w1 + rb, *w3 = w2 + rb;
  const svfloat32_t z = svdup_n_f32(0.0f);
  svfloat32_t a0 = z, a1 = z, a2 = z, a3 = z, b0 = z, b1 = z, b2 = z, b3 = z;
  svfloat32_t c0 = z, c1 = z, c2 = z, c3 = z, d0 = z, d1 = z, d2 = z, d3 = z;
  for (uint64_t c = 0; c < n; c += vl) {
    const svbool_t pg = svwhilelt_b32_u64(c, n);
    const svfloat32_t v0 = ld_w32(w0, c, n), v1 = ld_w32(w1, c, n), v2 = ld_w32(w2, c, n), v3 = ld_w32(w3, c, n);
    mla4(pg, a0, a1, a2, a3, v0, v1, v2, v3, svld1_f32(pg, x[0] + c));
    if (P > 1) mla4(pg, b0, b1, b2, b3, v0, v1, v2, v3, svld1_f32(pg, x[1] + c));
    if (P > 2) mla4(pg, c0, c1, c2, c3, v0, v1, v2, v3, svld1_f32(pg, x[2] + c));
    if (P > 3) mla4(pg, d0, d1, d2, d3, v0, v1, v2, v3, svld1_f32(pg, x[3] + c));
  }
  store4(Y + r, a0, a1, a2, a3);
  if (P > 1) store4(Y + ldy + r, b0, b1, b2, b3);
  if (P > 2) store4(Y + 2 * ldy + r, c0, c1, c2, c3);
  if (P > 3) store4(Y + 3 * ldy + r, d0, d1, d2, d3);
}

// f32 single row: the two-vector steps, then the predicated tail into a0.
inline void f32_row_step2(svfloat32_t &a0, svfloat32_t &a1, svfloat32_t v0, svfloat32_t v1, const float *x, uint64_t c) {
  const svbool_t all = svptrue_b32();
  a0 = svmla_f32_x(all, a0, v0, svld1_f32(all, x + c));
  a1 = svmla_f32_x(all, a1, v1, svld1_vnum_f32(all, x + c, 1));
}

template <int P>
void f32m_row(float *Y, size_t ldy, const uint8_t *W, const float *const *x, size_t r, size_t cols) {
  const uint64_t n = cols;
  const uint64_t vl = svcntw();
  const uint8_t *w = W + r * cols * 4;
  const svbool_t all = svptrue_b32();
  const svfloat32_t z = svdup_n_f32(0.0f);
  svfloat32_t a0 = z, a1 = z, b0 = z, b1 = z, c0 = z, c1 = z, d0 = z, d1 = z;
  uint64_t c = 0;
  for (; c + 2 * vl <= n; c += 2 * vl) {
    const svfloat32_t v0 = ld_w32(w, c, n), v1 = ld_w32(w, c + vl, n);
    f32_row_step2(a0, a1, v0, v1, x[0], c);
    if (P > 1) f32_row_step2(b0, b1, v0, v1, x[1], c);
    if (P > 2) f32_row_step2(c0, c1, v0, v1, x[2], c);
    if (P > 3) f32_row_step2(d0, d1, v0, v1, x[3], c);
  }
  for (; c < n; c += vl) {
    const svbool_t pg = svwhilelt_b32_u64(c, n);
    const svfloat32_t v = ld_w32(w, c, n);
    a0 = svmla_f32_m(pg, a0, v, svld1_f32(pg, x[0] + c));
    if (P > 1) b0 = svmla_f32_m(pg, b0, v, svld1_f32(pg, x[1] + c));
    if (P > 2) c0 = svmla_f32_m(pg, c0, v, svld1_f32(pg, x[2] + c));
    if (P > 3) d0 = svmla_f32_m(pg, d0, v, svld1_f32(pg, x[3] + c));
  }
  Y[r] = svaddv_f32(all, svadd_f32_x(all, a0, a1));
  if (P > 1) Y[ldy + r] = svaddv_f32(all, svadd_f32_x(all, b0, b1));
  if (P > 2) Y[2 * ldy + r] = svaddv_f32(all, svadd_f32_x(all, c0, c1));
  if (P > 3) Y[3 * ldy + r] = svaddv_f32(all, svadd_f32_x(all, d0, d1));
}

// f16: every row (in a group or not) is reduced the same way, so rows go
// one at a time: one load and widening of svcnth() weights per step, applied
// to P <= 4 positions (lo / hi accumulators each).
inline void f16_apply(svfloat32_t &lo, svfloat32_t &hi, svbool_t p0, svbool_t p1, svfloat32_t wl, svfloat32_t wh,
                      const float *x, uint64_t c) {
  lo = svmla_f32_m(p0, lo, wl, svld1_f32(p0, x + c));
  hi = svmla_f32_m(p1, hi, wh, svld1_vnum_f32(p1, x + c, 1));
}

template <int P>
void f16m_row(float *Y, size_t ldy, const uint8_t *W, const float *const *x, size_t r, size_t cols) {
  const uint64_t n = cols;
  const uint64_t vw = svcntw();
  const uint64_t vh = svcnth();
  const uint8_t *w = W + r * cols * 2;
  const svbool_t all = svptrue_b32();
  const svfloat32_t z = svdup_n_f32(0.0f);
  svfloat32_t al = z, ah = z, bl = z, bh = z, cl = z, ch = z, dl = z, dh = z;
  for (uint64_t c = 0; c < n; c += vh) {
    const svbool_t pb = svwhilelt_b8_u64(2 * c, 2 * n);
    const svbool_t p0 = svwhilelt_b32_u64(c, n);
    const svbool_t p1 = svwhilelt_b32_u64(c + vw, n);
    const svuint16_t h = svreinterpret_u16_u8(svld1_u8(pb, w + 2 * c));
    const svfloat32_t wl = cvt_f16(p0, svunpklo_u32(h)), wh = cvt_f16(p1, svunpkhi_u32(h));
    f16_apply(al, ah, p0, p1, wl, wh, x[0], c);
    if (P > 1) f16_apply(bl, bh, p0, p1, wl, wh, x[1], c);
    if (P > 2) f16_apply(cl, ch, p0, p1, wl, wh, x[2], c);
    if (P > 3) f16_apply(dl, dh, p0, p1, wl, wh, x[3], c);
  }
  Y[r] = svaddv_f32(all, svadd_f32_x(all, al, ah));
  if (P > 1) Y[ldy + r] = svaddv_f32(all, svadd_f32_x(all, bl, bh));
  if (P > 2) Y[2 * ldy + r] = svaddv_f32(all, svadd_f32_x(all, cl, ch));
  if (P > 3) Y[3 * ldy + r] = svaddv_f32(all, svadd_f32_x(all, dl, dh));
}

// Positions [0, m) in chunks of four (a last chunk of 1..3): fn(P, y, x).
template <class Fn>
inline void position_chunks4(float *Y, size_t ldy, const float *X, size_t ldx, size_t m, Fn fn) {
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

}  // namespace

extern "C" void gb_f32_gemvm__sve(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                  const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4)
    position_chunks4(Y, ldy, X, ldx, m, [&](auto P, float *y, const float *const *x) {
      f32m_group<decltype(P)::value>(y, ldy, W, x, r, cols);
    });
  for (; r < row_end; r++)
    position_chunks4(Y, ldy, X, ldx, m, [&](auto P, float *y, const float *const *x) {
      f32m_row<decltype(P)::value>(y, ldy, W, x, r, cols);
    });
}

extern "C" void gb_f16_gemvm__sve(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                  const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  for (size_t r = row_begin; r < row_end; r++)
    position_chunks4(Y, ldy, X, ldx, m, [&](auto P, float *y, const float *const *x) {
      f16m_row<decltype(P)::value>(y, ldy, W, x, r, cols);
    });
}

// q8 / q4: per row and block the weights as two 16-byte halves (q4:
// unpacked, minus 8), dotted (SDOT, SADDV) with each position's block: the
// exact int32 sum whatever the vector length; then, in scalar float,
// acc += (d * xd) * (float)isum, block after block, as above.
namespace {

struct Q8Half {
  static constexpr size_t kBytes = 34;
  static inline void load(svbool_t p16, const uint8_t *blk, svint8_t &a, svint8_t &b) {
    a = svld1_s8(p16, (const int8_t *)(blk + 2));
    b = svld1_s8(p16, (const int8_t *)(blk + 18));
  }
};
struct Q4Half {
  static constexpr size_t kBytes = 18;
  static inline void load(svbool_t p16, const uint8_t *blk, svint8_t &a, svint8_t &b) {
    const svuint8_t q = svld1_u8(p16, blk + 2);
    a = svsub_n_s8_x(p16, svreinterpret_s8_u8(svand_n_u8_x(p16, q, 15)), 8);
    b = svsub_n_s8_x(p16, svreinterpret_s8_u8(svlsr_n_u8_x(p16, q, 4)), 8);
  }
};

// Inactive lanes of a / b may hold garbage; x0 / x1 are zero there.
inline int32_t dot_halves(svint8_t a, svint8_t b, svint8_t x0, svint8_t x1) {
  return (int32_t)svaddv_s32(svptrue_b32(), svdot_s32(svdot_s32(svdup_n_s32(0), a, x0), b, x1));
}

template <class F>
void gemvm_blocks(float *Y, size_t ldy, const uint8_t *W, const gb_q8x_block *XQ, size_t ldxq, size_t m,
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

}  // namespace

extern "C" void gb_q8_gemvm__sve(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                 const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                 size_t cols) {
  gemvm_blocks<Q8Half>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}

extern "C" void gb_q4_gemvm__sve(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                 const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                 size_t cols) {
  gemvm_blocks<Q4Half>(Y, ldy, W, XQ, ldxq, m, row_begin, row_end, cols);
}
