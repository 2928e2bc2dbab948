// AVX-512 f16 GEMV: binary16 widened 16 at a time with the 512-bit
// vcvtph2ps and fused into two f32 accumulators per row (the two halves of
// each 32-column step); then 16-column steps and a masked tail (masked loads
// read no byte past the row). A row's result depends only on the row and x,
// never on the row range, the other rows or the tile it is computed in, and
// differs from the generic kernel's only by rounding. When x is exactly
// representable in f16 (as the session passes it) the gemv reads an f16
// copy of it and the matrix as two prefetched row streams (f16x_rows: the
// 1.1B model's high gear decoded 17.2 -> 18.6 tok/s at one thread, 87 ->
// 95 % of the read bandwidth); otherwise one
// row at a time (rows longer than kLongRow four at a time). The
// multi-position kernel reads one or two such positions the same way (a
// verify pass of one draft), and prefetches the next block of rows from 3
// positions on.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace {

// Keeps v in a register: without it the compiler folds the load of x into
// every FMA that uses it, loading each x vector once per row of the tile
// (R times) instead of once; with x in L2 (multi-position tiles) that load
// traffic, not the FMAs, set the speed.
inline void pin(__m512 &v) { __asm__("" : "+v"(v)); }

inline __m512 load16h(const uint8_t *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
}

// Rows w[0..R) against positions x[0..P): per (row, position) two
// accumulators (the two halves of each 32-column step), the tail's
// 16-column steps into the first and the masked remainder into the second,
// then a0 + a1 reduced; each 16 weights are widened once and applied to the
// P positions. The same operations per (row, position) whatever R and P, so a
// row's result depends only on the row and x: not on its group, and the
// multi-position kernel equals the one-position one bit for bit.
// Y[p * ldy + i] = row i . x[p].
// Activations as the tiles read them: f32 (XF32) or, in the one-position
// kernel, an f16 copy of x that equals it exactly (XF16, see the gemv).
struct XF32 {
  using T = float;
  static inline __m512 load16(const float *p) { return _mm512_loadu_ps(p); }
  static inline __m512 load_masked(__mmask16 k, const float *p) { return _mm512_maskz_loadu_ps(k, p); }
};
struct XF16 {
  using T = uint16_t;
  static inline __m512 load16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  }
  static inline __m512 load_masked(__mmask16 k, const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
  }
};

// pf > 0: each 32-column step also asks for the line pf bytes past each
// row's into L2 (the rows of the next block, see the gemvm), or with kL1
// into every level (the row stream of f16x_rows).
template <int R, int P, class X = XF32, bool kL1 = false>
__attribute__((always_inline)) inline void f16_tile(float *Y, size_t ldy, const uint8_t *const *w,
                                                    const typename X::T *const *x, size_t cols, size_t pf = 0) {
  __m512 a0[R][P], a1[R][P];
  for (int i = 0; i < R; i++)
    for (int p = 0; p < P; p++) a0[i][p] = a1[i][p] = _mm512_setzero_ps();
  size_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    if (pf)
      for (int i = 0; i < R; i++)
        _mm_prefetch(reinterpret_cast<const char *>(w[i] + 2 * c + pf), kL1 ? _MM_HINT_T0 : _MM_HINT_T1);
    // The two 16-column halves one after the other: R weight registers live
    // at a time, so 2 R P accumulators + R + 1 fit the 32 zmm registers.
    for (int h = 0; h < 2; h++) {
      __m512(&a)[R][P] = h == 0 ? a0 : a1;
      __m512 wv[R];
      for (int i = 0; i < R; i++) wv[i] = load16h(w[i] + 2 * (c + 16 * h));
      for (int p = 0; p < P; p++) {
        __m512 xv = X::load16(x[p] + c + 16 * h);
        pin(xv);
        for (int i = 0; i < R; i++) a[i][p] = _mm512_fmadd_ps(wv[i], xv, a[i][p]);
      }
    }
  }
  for (; c + 16 <= cols; c += 16)
    for (int i = 0; i < R; i++) {
      const __m512 w0 = load16h(w[i] + 2 * c);
      for (int p = 0; p < P; p++) a0[i][p] = _mm512_fmadd_ps(w0, X::load16(x[p] + c), a0[i][p]);
    }
  if (c < cols) {
    const __mmask16 k = (__mmask16)((1u << (cols - c)) - 1);
    for (int i = 0; i < R; i++) {
      const __m512 wt = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, w[i] + 2 * c));
      for (int p = 0; p < P; p++) a1[i][p] = _mm512_fmadd_ps(wt, X::load_masked(k, x[p] + c), a1[i][p]);
    }
  }
  for (int p = 0; p < P; p++)
    for (int i = 0; i < R; i++) Y[p * ldy + i] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i][p], a1[i][p]));
}

// Rows [r0, r1) of W (row stride 2 * cols), R rows at a time and then one at
// a time, against positions x[0..P): Y[p * ldy + r - r0].
template <int R, int P, class X = XF32, bool kL1 = false>
inline void f16_range(float *Y, size_t ldy, const uint8_t *W, const typename X::T *const *x, size_t r0, size_t r1,
                      size_t cols, size_t pf = 0) {
  const size_t rb = 2 * cols;
  size_t r = r0;
  for (; r + R <= r1; r += R) {
    const uint8_t *w[R];
    for (int i = 0; i < R; i++) w[i] = W + (r + i) * rb;
    f16_tile<R, P, X, kL1>(Y + (r - r0), ldy, w, x, cols, pf);
  }
  for (; r < r1; r++) {
    const uint8_t *w[1] = {W + r * rb};
    f16_tile<1, P, X>(Y + (r - r0), ldy, w, x, cols);
  }
}

// One row at a time reads the matrix as one stream, the fastest way from
// memory here while x stays in the 32-48 KiB L1 data cache next to the
// weights streaming through. At 4 bytes a column, rows of 5632 columns
// (TinyLlama's FFN down projection) already re-read x from L2 for every row
// and streamed 16 GB/s where 2048 columns streamed 24; at 2 bytes a column
// the same rows stream 24-27 GB/s. So when x holds only values an f16
// represents exactly (the session rounds the activations of f16 matrices,
// forward.cpp), and cols <= kF16X, the gemv reads an f16 copy of it from
// the stack: the products, and so the result, are bit for bit those of the
// f32 path. Otherwise rows longer than kLongRow go four at a time, sharing
// each load of x (bench_gemv, 4096 vs 11008 columns: x in f32 16 GB/s
// against 24-27 in f16; four rows sharing x 22 against 13.5 at 11008).
constexpr size_t kLongRow = 6144;
constexpr size_t kF16X = 8192;  // 16 KiB of stack

// x[0..cols) to f16 in xh; whether every value came through exactly.
bool f16_exact(uint16_t *xh, const float *x, size_t cols) {
  __mmask16 bad = 0;
  size_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m512 v = _mm512_loadu_ps(x + c);
    const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(xh + c), h);
    bad |= _mm512_cmp_ps_mask(_mm512_cvtph_ps(h), v, _CMP_NEQ_UQ);
  }
  if (c < cols) {
    const __mmask16 k = (__mmask16)((1u << (cols - c)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + c);
    const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(xh + c, k, h);
    bad |= _mm512_mask_cmp_ps_mask(k, _mm512_cvtph_ps(h), v, _CMP_NEQ_UQ);
  }
  return bad == 0;
}

// Rows [r0, r1) against P f16 copies of x as two read streams: the first
// half of the rows and the second, one row of each per tile (f16_tile<2, P>
// on two rows half a range apart; a row's result does not depend on its
// tile), each stream asking 4 KiB ahead of itself for every cache level
// (prefetcht0; past r1 at the end: the next rows or bytes past the matrix,
// which a prefetch may name without faulting). On the 1.1B shapes (the 22
// layers' matrices streamed from memory, standalone, one thread) one
// stream read 36.0 GB/s and two 39.2-39.3 (2 x 2 KiB ahead 37.5, 2 x 8 KiB
// 36.7, three streams 2 KiB ahead 38.9, four 38.7-39.0, eight 30.5); two
// or four adjacent rows side by side, 16 rows ahead, 29-30. One row at a
// time with the row 16 rows ahead prefetched took a pass of one position
// from 56.5 to 53.5 ms and of two from 81 to 52 ms against x in f32 with no
// prefetch; prefetching into every level rather than L2 read 36.4 -> 38.0
// GB/s.
constexpr size_t kStreamAhead = 4096;
template <int P>
inline void f16x_rows(float *Y, size_t ldy, const uint8_t *W, const uint16_t *const *xh, size_t r0, size_t r1,
                      size_t cols) {
  const size_t rb = 2 * cols, h = (r1 - r0) / 2;
  for (size_t i = 0; i < h; i++) {
    const uint8_t *w[2] = {W + (r0 + i) * rb, W + (r0 + h + i) * rb};
    float out[2 * P];
    f16_tile<2, P, XF16, true>(out, 2, w, xh, cols, kStreamAhead);
    for (int p = 0; p < P; p++) {
      Y[p * ldy + r0 + i] = out[2 * p];
      Y[p * ldy + r0 + h + i] = out[2 * p + 1];
    }
  }
  if (r0 + 2 * h < r1) {  // an odd count: the last row alone
    const uint8_t *w[1] = {W + (r1 - 1) * rb};
    f16_tile<1, P, XF16>(Y + r1 - 1, ldy, w, xh, cols);
  }
}

}  // namespace

extern "C" void gb_f16_gemv__avx512(float *y, const uint8_t *W, const float *x, const gb_q8x_block *,
                                    size_t row_begin, size_t row_end, size_t cols) {
  if (cols <= kF16X) {
    alignas(64) uint16_t xh[kF16X];
    if (f16_exact(xh, x, cols)) {
      const uint16_t *xs[1] = {xh};
      f16x_rows<1>(y, 0, W, xs, row_begin, row_end, cols);
      return;
    }
  }
  const float *xs[1] = {x};
  if (cols <= kLongRow) {
    f16_range<1, 1>(y + row_begin, 0, W, xs, row_begin, row_end, cols);
  } else {
    f16_range<4, 1>(y + row_begin, 0, W, xs, row_begin, row_end, cols);
  }
}

// Multi-position: tiles of 4 rows x 3 positions (24 accumulators, 4
// weight registers, one x register), each row read from memory once and
// from cache once per 3 positions; 1-2 positions left over go 4 rows at a
// time too when a tile of 3 has brought the rows into cache, and one row at
// a time otherwise (one read stream, as the gemv: two rows side by side from
// memory ran a 2-position verify at 1.4x a decode step's time, one row at
// 1.1x on the 1.1B shapes). One or two positions alone, when f16-exact, go
// through f16x_rows like the gemv: on the 1.1B shapes' matrices two
// positions took 52-54 ms against 81-85 with x in f32 and no prefetch (one
// position: 53-56), so a verify pass of one draft costs what a decode step
// does. Per 16 columns a 4 x 3 tile loads 4 weight and 3
// x vectors for 12 FMAs; the 2 x 4 tile before it loaded 2 and 4 for 8 (8 x
// loads once the compiler folded them into the FMAs). On the 1.1B model a
// 128-token prefill ran 1.16-1.44x faster; a 3 x 4 tile ran 8-16 % slower
// than 4 x 3 in a standalone test, and 2 x 6 11-24 % slower (37.6 and 40.0
// against 42.0 and 49.7 GMAC/s).
//
// x of a tile's 3 positions must stay in the L1 data cache while the rows
// stream past from L2: 24 KiB in f32 at 2048 columns, 66 at 5632, more
// than the 32-48 KiB there is. So past kXF32Cols columns, when the caller
// hands the positions in binary16 too (XQ, see kernels.h), the tiles read
// those: one more conversion per x vector, half the bytes. Standalone, the
// 1.1B model's matrices with 128 positions from memory (one thread), the
// 2048 x 5632 down projection went 74 -> 90 GMAC/s; at 2048 columns f32
// and f16 x ran alike (91-95 and 90-93), so f32 stays there.
constexpr size_t kXF32Cols = 2048;

namespace {

// Rows [row_begin, row_end) in blocks of 16 rows, each multiplied by every
// tile of 3 positions before the next block. The second tile of 3 (the
// first when m < 6) also brings the next block's rows into L2, so that
// block's first tile reads them from cache rather than memory: in a
// standalone test on 2048 x 5632 this tile went from 36-42 to 48-51 GMAC/s
// at 6-15 positions. That includes the 16 rows after row_end: the next
// call's (a prefill chunk calls once per ~192 KiB block of rows and group of
// positions, spec.cpp) or another thread's, or bytes past the matrix, which
// a prefetch may name without faulting; the 1.1B model's matrices with 128
// positions from memory ran 4-7 % faster than when a call's last block
// prefetched nothing. Not for 1-2 positions in f32 (an earlier test: slower
// there; f16-exact ones take f16x_rows, which prefetches row by row).
template <class X>
void f16_blocks(float *Y, size_t ldy, const uint8_t *W, const typename X::T *X0, size_t ldx, size_t m,
                size_t row_begin, size_t row_end, size_t cols) {
  using T = typename X::T;
  constexpr size_t kRowsPerBlock = 16;  // rows kept in cache while the positions pass over them
  const size_t pf_tile = m >= 6 ? 3 : 0;
  const size_t pf = kRowsPerBlock * 2 * cols;
  for (size_t r = row_begin; r < row_end; r += kRowsPerBlock) {
    const size_t e = r + kRowsPerBlock < row_end ? r + kRowsPerBlock : row_end;
    size_t p = 0;
    for (; p + 3 <= m; p += 3) {
      const T *xs[3] = {X0 + p * ldx, X0 + (p + 1) * ldx, X0 + (p + 2) * ldx};
      f16_range<4, 3, X>(Y + p * ldy + r, ldy, W, xs, r, e, cols, p == pf_tile ? pf : 0);
    }
    const size_t left = m - p;
    const T *xs[2] = {X0 + p * ldx, X0 + (p + (left > 1 ? 1 : 0)) * ldx};
    if (p > 0) {  // the block's rows are in cache: 4 at a time again
      if (left == 2) f16_range<4, 2, X>(Y + p * ldy + r, ldy, W, xs, r, e, cols);
      if (left == 1) f16_range<4, 1, X>(Y + p * ldy + r, ldy, W, xs, r, e, cols);
    } else {
      if (left == 2) f16_range<1, 2, X>(Y + p * ldy + r, ldy, W, xs, r, e, cols);
      if (left == 1) f16_range<1, 1, X>(Y + p * ldy + r, ldy, W, xs, r, e, cols);
    }
  }
}

}  // namespace

extern "C" void gb_f16_gemvm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                                     size_t cols) {
  if (m == 1) {
    gb_f16_gemv__avx512(Y, W, X, nullptr, row_begin, row_end, cols);
    return;
  }
  if (m == 2 && XQ) {  // a verify pass of one draft, x in binary16 from the caller: as the gemv reads it
    const uint16_t *xs[2] = {reinterpret_cast<const uint16_t *>(XQ), reinterpret_cast<const uint16_t *>(XQ) + ldxq};
    f16x_rows<2>(Y, ldy, W, xs, row_begin, row_end, cols);
    return;
  }
  if (m == 2 && cols <= kF16X) {  // the same with f16 copies made here when x is f16-exact
    alignas(64) uint16_t xh[2][kF16X];
    if (f16_exact(xh[0], X, cols) && f16_exact(xh[1], X + ldx, cols)) {
      const uint16_t *xs[2] = {xh[0], xh[1]};
      f16x_rows<2>(Y, ldy, W, xs, row_begin, row_end, cols);
      return;
    }
  }
  if (XQ && cols > kXF32Cols && m >= 3) {
    f16_blocks<XF16>(Y, ldy, W, reinterpret_cast<const uint16_t *>(XQ), ldxq, m, row_begin, row_end, cols);
    return;
  }
  f16_blocks<XF32>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}

// ---- Prefill GEMM (kernels.h, GB_PGEMM) ------------------------------------
// One accumulator per (row, position), 16 columns a step and a masked tail,
// so a row's result does not depend on the tile it is computed in, and the
// tiles can take more positions per weight load than the gemvm's (whose two
// accumulators per pair, needed to equal the one-row gemv bit for bit, cap
// a tile at 12 pairs): 6 rows x 4 positions reading the binary16 copy of x
// the session passes (24 accumulators, 6 weight registers, one x), and
// 4 x 4 with x in f32 when there is no copy. The binary16 copy holds x's
// values exactly, so both give the same bits. As the session calls it (16
// positions a call, 192 KiB blocks of rows, 128 positions, one thread, the
// 1.1B model's matrices, minimum of 7 passes, the two interleaved), 6 x 4
// on binary16 x against 4 x 4 on f32 x: 2048 x 2048 80 -> 88-90 GMAC/s,
// 5632 x 2048 82 -> 83-88; 4 x 4 on binary16 x ran at 79-84 and 6 x 4 on
// f32 x at 81-85 there. (An earlier standalone test with 64 positions from
// memory had found 4 x 4 on f32 x fastest at 2048 columns, 108 GMAC/s.)
// Rows go in blocks of 16 (every tile of positions passes over a block
// while it is in L2), the second tile of positions prefetching the next
// block as f16_blocks does.
namespace {

template <int R, int P, class X>
__attribute__((always_inline)) inline void pgemm_tile(float *Y, size_t ldy, const uint8_t *const *w,
                                                      const typename X::T *const *x, size_t cols, size_t pf) {
  __m512 a[R][P];
  for (int i = 0; i < R; i++)
    for (int p = 0; p < P; p++) a[i][p] = _mm512_setzero_ps();
  size_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    if (pf && (c & 31) == 0)
      for (int i = 0; i < R; i++) _mm_prefetch(reinterpret_cast<const char *>(w[i] + 2 * c + pf), _MM_HINT_T1);
    __m512 wv[R];
    for (int i = 0; i < R; i++) wv[i] = load16h(w[i] + 2 * c);
    for (int p = 0; p < P; p++) {
      __m512 xv = X::load16(x[p] + c);
      pin(xv);
      for (int i = 0; i < R; i++) a[i][p] = _mm512_fmadd_ps(wv[i], xv, a[i][p]);
    }
  }
  if (c < cols) {
    const __mmask16 k = (__mmask16)((1u << (cols - c)) - 1);
    for (int i = 0; i < R; i++) {
      const __m512 wt = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, w[i] + 2 * c));
      for (int p = 0; p < P; p++) a[i][p] = _mm512_fmadd_ps(wt, X::load_masked(k, x[p] + c), a[i][p]);
    }
  }
  for (int p = 0; p < P; p++)
    for (int i = 0; i < R; i++) Y[p * ldy + i] = _mm512_reduce_add_ps(a[i][p]);
}

// Rows [r0, r1) of W against positions x[0..P): R rows a tile, then 4, then 1.
template <int R, int P, class X>
inline void pgemm_rows(float *Y, size_t ldy, const uint8_t *W, const typename X::T *const *x, size_t r0, size_t r1,
                       size_t cols, size_t pf) {
  const size_t rb = 2 * cols;
  size_t r = r0;
  for (; r + R <= r1; r += R) {
    const uint8_t *w[R];
    for (int i = 0; i < R; i++) w[i] = W + (r + i) * rb;
    pgemm_tile<R, P, X>(Y + r, ldy, w, x, cols, pf);
  }
  for (; r + 4 <= r1; r += 4) {
    const uint8_t *w[4] = {W + r * rb, W + (r + 1) * rb, W + (r + 2) * rb, W + (r + 3) * rb};
    pgemm_tile<4, P, X>(Y + r, ldy, w, x, cols, pf);
  }
  for (; r < r1; r++) {
    const uint8_t *w[1] = {W + r * rb};
    pgemm_tile<1, P, X>(Y + r, ldy, w, x, cols, 0);
  }
}

template <int R, class X>
void pgemm_blocks(float *Y, size_t ldy, const uint8_t *W, const typename X::T *X0, size_t ldx, size_t m,
                  size_t row_begin, size_t row_end, size_t cols) {
  using T = typename X::T;
  constexpr size_t kRowsPerBlock = 16;
  constexpr int P = 4;
  const size_t pf = kRowsPerBlock * 2 * cols;
  const size_t pf_tile = m >= 2 * P ? P : 0;
  for (size_t r = row_begin; r < row_end; r += kRowsPerBlock) {
    const size_t e = r + kRowsPerBlock < row_end ? r + kRowsPerBlock : row_end;
    size_t p = 0;
    for (; p + P <= m; p += P) {
      const T *xs[P] = {X0 + p * ldx, X0 + (p + 1) * ldx, X0 + (p + 2) * ldx, X0 + (p + 3) * ldx};
      pgemm_rows<R, P, X>(Y + p * ldy, ldy, W, xs, r, e, cols, p == pf_tile ? pf : 0);
    }
    const T *xs[3] = {X0 + p * ldx, X0 + (p + 1) * ldx, X0 + (p + 2) * ldx};
    switch (m - p) {  // positions left over, against the rows now in cache
      case 3: pgemm_rows<4, 3, X>(Y + p * ldy, ldy, W, xs, r, e, cols, p == 0 ? pf : 0); break;
      case 2: pgemm_rows<4, 2, X>(Y + p * ldy, ldy, W, xs, r, e, cols, p == 0 ? pf : 0); break;
      case 1: pgemm_rows<4, 1, X>(Y + p * ldy, ldy, W, xs, r, e, cols, p == 0 ? pf : 0); break;
      default: break;
    }
  }
}

}  // namespace

extern "C" void gb_f16_pgemm__avx512(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                                     const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                     size_t row_end, size_t cols) {
  if (XQ) {
    pgemm_blocks<6, XF16>(Y, ldy, W, reinterpret_cast<const uint16_t *>(XQ), ldxq, m, row_begin, row_end, cols);
    return;
  }
  pgemm_blocks<4, XF32>(Y, ldy, W, X, ldx, m, row_begin, row_end, cols);
}
