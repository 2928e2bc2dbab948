// SVE f16 GEMV (any vector length: 128, 256, 512 ... 2048 bits), one
// position (gemv) and several (gemvm).
//
// Vector-length agnostic: every loop steps by svcnth() columns under
// svwhilelt predicates, so columns need not be a multiple of the vector
// length and nothing past x[cols) or the row's bytes is touched (inactive
// lanes of a predicated load are not accessed). One step loads svcnth()
// weights once as bytes, splits them into two halves of svcntw() 32-bit
// lanes (UNPKLO / UNPKHI, the binary16 in the low half of each lane) and
// widens them with FCVT; two predicated FMLA accumulators per row and a
// final FADDV: a different order of summation than generic, within the
// tests' tolerance.
//
// Weight rows are not assumed aligned: weights are loaded as bytes (LD1B)
// and reinterpreted.
#include <arm_sve.h>
#include <stdint.h>

#include "gemv_float.h"
#include "kernels.h"

namespace {

using namespace gb_arm64::sve;

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

// ---- multi-position GEMV ---------------------------------------------------------
// Y[i*ldy + r] for m positions, bit-identical per position to the gemv at
// every vector length: every row (in a group or not) is reduced the same way,
// so rows go one at a time: one load and widening of svcnth() weights per
// step, applied to P <= 4 positions (lo / hi accumulators each, named: SVE
// vectors cannot be held in arrays; positions in chunks of four,
// gemv_float.h's position_chunks4), the same predicated steps and the same
// FADDV per (row, position) as the gemv. A row is re-read from cache once per
// chunk of four positions.

namespace {

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

}  // namespace

extern "C" void gb_f16_gemvm__sve(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                  const gb_q8x_block *, size_t, size_t m, size_t row_begin, size_t row_end,
                                  size_t cols) {
  for (size_t r = row_begin; r < row_end; r++)
    position_chunks4(Y, ldy, X, ldx, m, [&](auto P, float *y, const float *const *x) {
      f16m_row<decltype(P)::value>(y, ldy, W, x, r, cols);
    });
}
