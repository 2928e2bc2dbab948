// SVE f32 GEMV (any vector length: 128, 256, 512 ... 2048 bits), one
// position (gemv) and several (gemvm).
//
// Vector-length agnostic: every loop steps by svcntw() under svwhilelt
// predicates, so columns need not be a multiple of the vector length and
// nothing past x[cols) or the row's bytes is touched (inactive lanes of a
// predicated load are not accessed). Four rows at a time, one predicated
// FMLA accumulator per row and a final FADDV; a single row left over takes
// two accumulators, then a predicated tail: a different order of summation
// than generic, within the tests' tolerance.
//
// Weight rows are not assumed aligned: weights are loaded as bytes (LD1B)
// and reinterpreted.
#include <arm_sve.h>
#include <stdint.h>

#include "gemv_float.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::sve;

// svcntw() floats of a row from byte offset 4*c, predicated by bytes.
inline svfloat32_t ld_w32(const uint8_t *row, uint64_t c, uint64_t cols) {
  return svreinterpret_f32_u8(svld1_u8(svwhilelt_b8_u64(4 * c, 4 * cols), row + 4 * c));
}

}  // namespace

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

// ---- multi-position GEMV ---------------------------------------------------------
// Y[i*ldy + r] for m positions, bit-identical per position to the gemv at
// every vector length: the same row grouping (groups of four, then single
// rows, whose order differs), the same predicated steps of svcntw() columns
// and the same FADDV per (row, position). Up to four positions share each
// weight vector load (SVE vectors cannot be held in arrays: the accumulators
// are named, unused ones compiled away for P < 4; positions in chunks of
// four, gemv_float.h's position_chunks4); a tile's rows are re-read from
// cache once per chunk of four positions.

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
