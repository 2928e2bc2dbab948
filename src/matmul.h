// matmul.h — how a pass multiplies its matrices. Every way of multiplying
// lives here, behind one call:
//
//   one position        the GEMV kernels; up to three matrices that read the
//                       same input in one pool run (decode steps)
//   exact, m > 1        the multi-position GEMV: each weight read once for
//                       the m positions, each position bit for bit the GEMV
//                       (speculative verification, draft catch-up)
//   prefill, m > 1      the session's prefill method of the weight format
//                       (MatmulPlan): the multi-position GEMV, a prefill
//                       GEMM of the kernel table, or GEMMs on weight panels
//                       expanded to f32 (OpenBLAS or the built-in GEMM)
//
// The method per format is chosen once, when the session is created
// (matmul_plan), from the kernel table and the options, and kept as data;
// a pass only says which kind of result it needs (PassKind).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "options.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "model.h"

namespace gb {

struct Scratch;  // forward.h: the pass's activation buffers

// What a pass needs of its products.
enum class PassKind : uint8_t {
  kExact,    // every position bit for bit as a decode step computes it
  kPrefill,  // the session's prefill method (equal up to float summation order at most)
};

// How a prefill chunk multiplies a matrix of one weight format.
enum class PrefillMethod : uint8_t {
  kGemvm,   // the multi-position GEMV (bit for bit decoding's)
  kPgemm,   // the kernel table's prefill GEMM of the format
  kPanels,  // GEMMs on panels of weight rows expanded to f32
};

struct MatmulPlan {
  PrefillMethod prefill[GB_FMT_COUNT];
  gb_gemm_fn gemm;                   // the panels' GEMM: OpenBLAS or the table's built-in one
  uint32_t panel_rows, panel_slots;  // panel height; slots (one per task) 0: no panels
};

// The plan of a session with options o whose prefill chunks hold up to
// `batch` positions (1: no chunks), over kernel table k. OpenBLAS is used
// for panels when the options allow it (prefill_blas 1 or 2, not
// deterministic) and the library has it.
MatmulPlan matmul_plan(const gb_kernels &k, const SessionConfig &o, uint32_t batch);
// Whether a session with options o multiplies prefill panels through
// OpenBLAS (it then makes OpenBLAS single-threaded: gearbx splits the work).
bool matmul_uses_blas(const SessionConfig &o);
// Whether its prefill chunks run without panels (every format through the
// multi-position GEMV or a prefill GEMM; no panel buffers are carved).
bool matmul_gemvm_only(const SessionConfig &o);

// How a pass runs: the session's kernel table, its worker pool, the matmul
// plan, and the RoPE frequencies.
struct Exec {
  gb_kernels k;
  gb_port_pool *pool;
  MatmulPlan mm;
  const float *rope_freq;  // (rope_dim / 2) inverse frequencies
  const float *rope_freq_swa;  // the sliding-window layers' (their own base, no factors); nullptr: none
  float rope_scale;        // the rotated dimensions' factor (Meta::rope_attn_factor)
  Logger log;
};

// Weights streamed by a pass (the classifier included when it ran).
struct PassCost {
  uint64_t bytes = 0, weights = 0;
};

// Y (m, w.rows) = X (m, w.cols) W^T on W's format, through sc's activation
// buffers; adds what it streamed to *cost (prefill panels are not counted:
// prefill is not a decode step). m == 1 always runs the GEMV.
void matmul(const Exec &e, Scratch &sc, PassKind kind, PassCost *cost, float *Y, const float *X, uint32_t m,
            const TensorRef &w);

// Y[j] = X W[j]^T for n <= 3 matrices that read the same X. One position:
// one pool run for all of them (one wait for the threads instead of n), the
// input quantized or rounded to f16 once. More positions: one matmul per
// matrix, sharing that rounding or quantization. With glu (two matrices of
// as many rows, the FFN's gate and up), the one-position run also gates the
// rows each task computed, Y[0] = silu(Y[0]) * Y[1], and returns true; the
// caller gates otherwise.
bool matmul_shared(const Exec &e, Scratch &sc, PassKind kind, PassCost *cost, float *const *Y, const float *X, uint32_t m,
                   const TensorRef *const *W, uint32_t n, bool glu = false);

// The activations an f16 matrix multiplies: X's m rows of cols values, each
// rounded to the nearest f16 (ties to even) where its magnitude is at most
// 65504 (larger ones, and NaNs, stay as they are), in sc.xh. f16 weights
// times f16 activations with f32 sums, on every ISA and in every pass
// (decode, verify, prefill): the SIMD kernels can then read x at 2 bytes a
// column without changing a product (arch/x86/avx512/gemv_f16.cpp).
// The same values in binary16 go to sc.xh16 (row stride cols), for the
// multi-position kernels that read them (gb_gemvm_fn's XQ): *xh16, when
// asked, is sc.xh16, or nullptr when some value has no binary16 form
// (|x| > 65504, NaN).
// The positions are split between pool's threads (when given) as
// run_positions does; the result does not depend on it.
const float *f16_activations(Scratch &sc, const float *X, uint32_t m, uint32_t cols, const uint16_t **xh16 = nullptr,
                             gb_port_pool *pool = nullptr);

// X's m rows of cols values quantized for the integer kernels (the
// kernel table's quantize_act per row), in sc.xq at row stride
// sc.xq_stride; positions split between the pool's threads as
// run_positions does.
const gb_q8x_block *quantized_activations(const Exec &e, Scratch &sc, const float *X, uint32_t m, uint32_t cols);

// Tasks a GEMV of rows x cols is split into on the pool: whole row tiles, at
// most one per thread, none smaller than a minimum of work.
uint32_t gemv_tasks(gb_port_pool *pool, uint64_t rows, uint64_t cols);
// Rows [*r0, *r1) of task t of n over a matrix of `rows` rows: whole kernel
// row tiles (GB_GEMV_ROW_TILE), so each row is computed as one call over the
// whole matrix would compute it, whatever n is.
inline void task_rows(size_t rows, uint32_t t, uint32_t n, size_t *r0, size_t *r1) {
  const size_t tiles = (rows + GB_GEMV_ROW_TILE - 1) / GB_GEMV_ROW_TILE;
  *r0 = tiles * t / n * GB_GEMV_ROW_TILE;
  *r1 = tiles * (t + 1) / n * GB_GEMV_ROW_TILE;
  if (*r1 > rows) *r1 = rows;
}

}  // namespace gb
