// forward.h — the model path: m tokens through the decoder, in the spirit of
// llama2.c's Config / TransformerWeights / RunState split. Everything a pass
// reads or writes is an argument:
//
//   Weights  a read-only view of the tiers in use (gears.h makes them)
//   KvPool   the cache the pass appends to and attends over (kv.h)
//   Scratch  activations for up to m_max positions, carved once per session
//   Exec     how the matrices are multiplied: kernel table, threads, GEMM
//
// Decode (m = 1, one GEMV per matrix), batched prefill (m = the chunk, GEMMs
// on weight panels) and speculative verification (m = drafts + 1, the
// multi-position GEMV that reads each weight once) are the same function
// with a different m and MatmulFn; drafting is a call with the draft tier's
// Weights and the draft's KvPool.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "kv.h"
#include "model.h"

namespace gb {

// The matrices one pass reads. mats and base_mats are (n_layers,
// kMatsPerLayer) arrays; base_mats holds the unmanaged matrices (the FFN
// when only attention follows the gear) and equals mats otherwise.
struct Weights {
  const gb_model *model;        // embedding, norms, hyper-parameters
  const TensorRef *mats;        // the managed matrices on the gear's tier
  const TensorRef *base_mats;   // the unmanaged matrices' tier
  const TensorRef *classifier;
};

// Activations of up to m_max positions, position-major. A pass of m <= m_max
// positions uses the first m rows of each buffer.
struct Scratch {
  uint32_t m_max;
  float *x;          // (m_max, dim) residual streams
  float *xb;         // (m_max, max(dim, q_dim)) normed inputs / attention outputs
  float *xb2;        // (m_max, dim)
  float *hb, *hb2;   // (m_max, hidden_dim)
  float *q;          // (m_max, q_dim)
  float *k, *v;      // (m_max, kv_dim) this pass's keys and values before they are cached
  float *logits;     // (logit_rows, vocab)
  uint32_t logit_rows;
  gb_q8x_block *xq;  // (m_max, xq_stride) activations quantized for the integer kernels
  uint32_t xq_stride;
  float *xa;         // (m_max, wide) q8/q4 activations expanded back to f32 (panel GEMM), or nullptr
  float *xh;         // (m_max, wide) activations of f16 matrices rounded to f16 (f16_activations)
  uint16_t *xh16;    // (m_max, wide) the same values in binary16 (f16_activations)
  // What xh and xq hold while keep_input (matmul_shared's matrices, which
  // share one input): the rounding of xh_of's xh_m rows of xh_cols (xh_big:
  // some value without a binary16 form), and the quantization of xq_of's
  // xq_m rows of xq_cols. Outside matmul_shared xh_of and xq_of are null.
  bool keep_input, xh_big;
  const float *xh_of, *xq_of;
  uint32_t xh_m, xh_cols, xq_m, xq_cols;
  float *panel;      // (panel_slots, panel_rows, wide) weight panels expanded to f32, or nullptr
  KvAttnScratch *attn;  // (attn_sets) for the positions of a pass attending at once, beside the pool's own
  uint32_t attn_sets, attn_cap;
};

// What a session needs of its scratch: positions per pass, rows of logits
// kept, and the panel GEMM's buffers.
struct ScratchShape {
  uint32_t m_max = 1, logit_rows = 1;
  uint32_t panel_slots = 0, panel_rows = 0;  // 0: no panel GEMM (no xa, no panels)
  uint32_t attn_sets = 0, attn_cap = 0;       // attention scratch sets for pools of attn_cap slots
};
// Carve sc from the arena (counting when a is counting; sc is always real).
void scratch_carve(Scratch *sc, Arena &a, const Meta &c, const ScratchShape &shape);

// How a pass multiplies: the session's kernel table, its worker pool, and the
// panel GEMM (OpenBLAS or the table's) with its panel height.
struct Exec {
  const gb_kernels *k;
  gb_port_pool *pool;
  gb_gemm_fn gemm;
  uint32_t panel_rows, panel_slots;  // panel_slots 0: no panels, every prefill matrix through the gemvm kernels
  bool pgemm;                        // prefill may use the table's prefill GEMMs (not bit for bit decoding's)
  const float *rope_freq;  // (rope_dim / 2) inverse frequencies
  Logger log;
};

// Weights streamed by a pass (the classifier included when it ran).
struct PassCost {
  uint64_t bytes = 0, weights = 0;
};

// Y (m, w.rows) = X (m, w.cols) W^T on W's format, through sc's activation
// buffers; adds what it streamed to *cost.
typedef void (*MatmulFn)(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w);
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

// Per-position work of a pass on the pool: fn(ctx, task, i0, i1) for
// contiguous position ranges [i0, i1) covering [0, m), at most
// kMaxPositionTasks tasks (task < that), one task when `values` (the work,
// in values touched) is too small to share. Each position's results must
// not depend on the split, so a pass computes the same bits on any number
// of threads.
constexpr uint32_t kMaxPositionTasks = 64;
typedef void (*PositionsFn)(void *ctx, uint32_t task, uint32_t i0, uint32_t i1);
void run_positions(gb_port_pool *pool, uint32_t m, uint64_t values, PositionsFn fn, void *ctx);

// One position, one GEMV per matrix (decode).
void matmul_gemv(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w);
// m positions through the multi-position GEMV: each weight read from memory
// once (past GB_GEMVM_MAX_M positions, in L2-sized blocks of rows that every
// group of positions multiplies in turn), each position's result bit for bit
// matmul_gemv's (speculative verification, prefill chunks).
void matmul_gemvm(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w);
// The same through the kernel table's prefill GEMM of w's format (which must
// exist): each position's result equals matmul_gemv's up to float summation
// order.
void matmul_pgemm(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w);
// m positions as GEMMs on weight panels expanded to f32 (batched prefill;
// not counted in *cost: prefill is not a decode step).
void matmul_panels(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w);
// A prefill chunk: matmul_gemvm (every position of the chunk in one pass
// over the weights) for quantized and f16 formats with SIMD multi-position
// kernels, and for every format when the session has no panels
// (e.panel_slots 0); else matmul_panels.
void matmul_prefill(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w);

// Run tokens[0..m) at positions pos..pos+m-1 through the model: each enters
// the KV pool, each position attends to the cache up to itself, and when
// want_logits sc.logits gets each position's next-token logits (m rows).
// m == 1 enters the pool as a decode step does (per-policy step-downs,
// eviction); m > 1 needs kv_batchable (a single-level policy with room).
// GB_ERR_CONTEXT_FULL with nothing run when the pool cannot take them;
// GB_ERR_INTERNAL when m exceeds what sc was carved for.
gb_status forward(const Weights &w, KvPool *kv, Scratch &sc, const Exec &e, const int32_t *tokens, uint32_t m, uint32_t pos,
                  MatmulFn mm, bool want_logits, PassCost *cost);

// Pieces of the pass.
void rmsnorm(float *out, const float *x, const TensorRef &w, uint32_t n, float eps);
void rope(float *vec, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dim, uint32_t type, const float *freq, uint32_t pos);
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
