/* kernels.h — the kernel contract shared by every instruction-set folder.
 *
 * Kernels are pure functions over buffers: no allocation, no globals, no
 * calls into port/. The list of kernels is written once, in kernels.inc; it
 * generates the declarations here, the dispatch tables (dispatch.cpp), the
 * kernel tests and the kernel benchmarks.
 *
 * Weight layouts are those of src/format.h (kLayoutRowMajor):
 *   f32 row: cols floats; f16 row: cols binary16;
 *   q8 row: ceil(cols/32) blocks {u16 d; i8 qs[32]}            (34 bytes);
 *   q4 row: ceil(cols/32) blocks {u16 d; u8 qs[16]}            (18 bytes),
 *           weight j = d*((qs[j]&15)-8), weight j+16 = d*((qs[j]>>4)-8).
 * Block rows are padded with zero weights past cols.
 */
#ifndef GEARBX_ARCH_KERNELS_H
#define GEARBX_ARCH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An activation vector quantized for integer dot products: 32 values per
 * block, symmetric, one f32 scale: x[j] ~= d * qs[j]. Blocks past the end of
 * the vector are zero-padded. */
typedef struct gb_q8x_block {
  float d;
  int8_t qs[32];
} gb_q8x_block;

/* y[r] = sum_c W[r][c] * x[c] for r in [row_begin, row_end).
 * W points at row 0 of the matrix. x: cols floats (used by f32/f16);
 * xq: ceil(cols/32) activation blocks (used by q8/q4: integer products per
 * block, one float multiply-add per block). y is indexed by absolute row.
 * Over-read allowance: none (kernels read exactly the rows' bytes). */
/* Rows a gemv kernel handles together (its row tile): kernels step through
 * [row_begin, row_end) in groups of at most this many rows, starting at
 * row_begin. Splitting a matrix between threads at multiples of it gives
 * every row the same grouping as one call over the whole matrix, so results
 * do not depend on the split. */
#define GB_GEMV_ROW_TILE 4

typedef void (*gb_gemv_fn)(float *y, const uint8_t *W, const float *x, const gb_q8x_block *xq,
                           size_t row_begin, size_t row_end, size_t cols);

/* Quantize n floats into ceil(n/32) activation blocks. */
typedef void (*gb_quantize_act_fn)(gb_q8x_block *out, const float *x, size_t n);

/* Expand one stored row of cols weights to f32 (embedding lookup, prefill
 * panels). */
typedef void (*gb_row_to_f32_fn)(float *out, const uint8_t *row, size_t cols);

/* C[i][j] = sum_p A[i][p] * B[j][p] for i < m, j < n, i.e. C = A B^T (a
 * block of positions times a panel of weight rows, batched prefill).
 * A: (m, k), row stride lda; B: (n, k), row stride ldb; C: (m, n), row
 * stride ldc; all f32, strides in elements. Each C element's sum runs in an
 * order fixed by k alone (kernels document it), so splitting B's rows gives
 * identical results. Writes exactly C's m x n elements; reads exactly A's and
 * B's. */
typedef void (*gb_gemm_fn)(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb, size_t m,
                           size_t n, size_t k);

/* The f32 GEMM of OpenBLAS (cblas_sgemm, row-major, B transposed) when the
 * library was built with it (GEARBX_WITH_OPENBLAS), else NULL. Its summation
 * order is OpenBLAS's: it depends on the CPU it runs on, not on how the
 * caller splits B. OpenBLAS allocates its own working buffers (once, at its
 * initialisation or first use). */
gb_gemm_fn gb_gemm_blas(void);
/* Make OpenBLAS run each call on the calling thread only (process-wide
 * openblas_set_num_threads(1)): gearbx splits prefill between its own
 * threads. No-op without OpenBLAS. */
void gb_gemm_blas_single_threaded(void);

/* Instruction sets, one bit each (also the CPU feature bits the dispatcher
 * is given). */
enum {
  GB_ISA_GENERIC = 1u << 0,
  GB_ISA_AVX2 = 1u << 1,    /* AVX2 + FMA + F16C */
  GB_ISA_NEON = 1u << 8,    /* ARMv8-A Advanced SIMD (+fp16 conversions) */
  GB_ISA_DOTPROD = 1u << 9, /* ARMv8.2-A sdot */
  GB_ISA_I8MM = 1u << 10,   /* ARMv8.6-A smmla */
  GB_ISA_SVE = 1u << 11     /* SVE, any vector length */
};

/* Weight formats, indexes of the tables below (= gb::WeightFormat). */
enum { GB_FMT_F32 = 0, GB_FMT_F16 = 1, GB_FMT_Q8 = 2, GB_FMT_Q4 = 3, GB_FMT_COUNT = 4 };

typedef struct gb_kernels {
  const char *name[GB_FMT_COUNT];  /* name of the gemv chosen per format   */
  uint32_t isa_mask;               /* every ISA a chosen kernel uses       */
  gb_gemv_fn gemv[GB_FMT_COUNT];
  gb_row_to_f32_fn row_to_f32[GB_FMT_COUNT];
  gb_quantize_act_fn quantize_act;
  gb_gemm_fn gemm_f32;             /* the built-in GEMM (batched prefill)  */
} gb_kernels;

/* Declarations of every kernel in kernels.inc. */
#define GB_GEMV(fmt, isa, req)                                                                  \
  void gb_##fmt##_gemv__##isa(float *y, const uint8_t *W, const float *x, const gb_q8x_block *xq, \
                              size_t row_begin, size_t row_end, size_t cols);
#define GB_ROW(fmt, isa, req) void gb_##fmt##_row_to_f32__##isa(float *out, const uint8_t *row, size_t cols);
#define GB_QUANT_ACT(isa, req) void gb_q8x_quantize__##isa(gb_q8x_block *out, const float *x, size_t n);
#define GB_GEMM(fmt, isa, req)                                                                            \
  void gb_##fmt##_gemm__##isa(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb, \
                              size_t m, size_t n, size_t k);
#include "kernels.inc"
#undef GB_GEMV
#undef GB_ROW
#undef GB_QUANT_ACT
#undef GB_GEMM

/* Fill *k with the best kernel of each slot whose ISA requirement is in
 * `isa_available` (GB_ISA_GENERIC is always assumed). max_isa_mask limits
 * the choice further (e.g. tests forcing the generic table: GB_ISA_GENERIC). */
void gb_kernels_select(gb_kernels *k, uint32_t isa_available);

#ifdef __cplusplus
}
#endif

#endif /* GEARBX_ARCH_KERNELS_H */
