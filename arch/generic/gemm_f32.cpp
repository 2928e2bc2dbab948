// Generic f32 GEMM, C = A B^T: the batched-prefill fallback when no BLAS is
// linked (and the reference any SIMD GEMM will be tested against).
//
// Layout: A (m, k) activations, one position per row; B (n, k) a panel of
// weight rows (dequantized to f32); C (m, n). Register tiles of 4 x 4
// outputs; each output keeps 4 partial sums (lane l takes k = l mod 4), added
// as (s0 + s1) + (s2 + s3), then the k % 4 tail in order. That order depends
// on k only, so tile edges, m, n and any split of B's rows between threads
// give bit-identical outputs, on every CPU (fp-contract is off).
#include "../kernels.h"

namespace {

template <int MR, int NR>
inline void tile(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb, size_t k) {
  float acc[MR][NR][4] = {};
  const size_t k4 = k & ~(size_t)3;
  for (size_t p = 0; p < k4; p += 4)
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++)
        for (int l = 0; l < 4; l++) acc[i][j][l] += A[i * lda + p + l] * B[j * ldb + p + l];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) {
      float s = (acc[i][j][0] + acc[i][j][1]) + (acc[i][j][2] + acc[i][j][3]);
      for (size_t p = k4; p < k; p++) s += A[i * lda + p] * B[j * ldb + p];
      C[i * ldc + j] = s;
    }
}

template <int MR>
inline void row_of_tiles(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb, size_t n, size_t k) {
  size_t j = 0;
  for (; j + 4 <= n; j += 4) tile<MR, 4>(C + j, ldc, A, lda, B + j * ldb, ldb, k);
  switch (n - j) {
    case 3: tile<MR, 3>(C + j, ldc, A, lda, B + j * ldb, ldb, k); break;
    case 2: tile<MR, 2>(C + j, ldc, A, lda, B + j * ldb, ldb, k); break;
    case 1: tile<MR, 1>(C + j, ldc, A, lda, B + j * ldb, ldb, k); break;
    default: break;
  }
}

}  // namespace

extern "C" void gb_f32_gemm__generic(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb, size_t m,
                                     size_t n, size_t k) {
  size_t i = 0;
  for (; i + 4 <= m; i += 4) row_of_tiles<4>(C + i * ldc, ldc, A + i * lda, lda, B, ldb, n, k);
  switch (m - i) {
    case 3: row_of_tiles<3>(C + i * ldc, ldc, A + i * lda, lda, B, ldb, n, k); break;
    case 2: row_of_tiles<2>(C + i * ldc, ldc, A + i * lda, lda, B, ldb, n, k); break;
    case 1: row_of_tiles<1>(C + i * ldc, ldc, A + i * lda, lda, B, ldb, n, k); break;
    default: break;
  }
}
