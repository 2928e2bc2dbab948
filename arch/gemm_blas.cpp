// gemm_blas.cpp — the batched-prefill GEMM through OpenBLAS, when the library
// is built with it (GB_HAVE_OPENBLAS, CMake option GEARBX_WITH_OPENBLAS).
// C = A B^T is cblas_sgemm(RowMajor, NoTrans, Trans). Without OpenBLAS both
// functions exist and report its absence.
#include "kernels.h"

#ifdef GB_HAVE_OPENBLAS
#include <cblas.h>

namespace {
void gemm_openblas(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb, size_t m, size_t n,
                   size_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)n, (blasint)k, 1.0f, A, (blasint)lda, B,
              (blasint)ldb, 0.0f, C, (blasint)ldc);
}
}  // namespace

extern "C" gb_gemm_fn gb_gemm_blas(void) { return gemm_openblas; }
extern "C" void gb_gemm_blas_single_threaded(void) { openblas_set_num_threads(1); }
#else
extern "C" gb_gemm_fn gb_gemm_blas(void) { return nullptr; }
extern "C" void gb_gemm_blas_single_threaded(void) {}
#endif
