// forward.h — the model path: m tokens through the decoder, in the spirit of
// llama2.c's Config / TransformerWeights / RunState split. Everything a pass
// reads or writes is an argument:
//
//   Weights  a read-only view of the tiers in use (gears.h makes them)
//   KvPool   the cache the pass appends to and attends over (kv.h)
//   Scratch  activations for up to m_max positions, carved once per session
//   Exec     how the matrices are multiplied: kernel table, threads, the
//            matmul plan (matmul.h)
//
// Decode (m = 1, one GEMV per matrix), batched prefill (m = the chunk, the
// session's prefill method) and speculative verification (m = drafts + 1,
// the multi-position GEMV that reads each weight once) are the same
// function with a different m and PassKind; drafting is a call with the
// draft tier's Weights and the draft's KvPool.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "kv.h"
#include "matmul.h"
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
  float *conv;       // (m_max, max(3 * dim, conv_channels)) a recurrent layer's convolution inputs; nullptr without such layers
  float *gdn_z;      // (m_max, gdn_v_dim) a Gated DeltaNet layer's output gates; nullptr without such layers
  float *gdn_o;      // (m_max, gdn_v_dim) its outputs before W_out
  float *gdn_u;      // (m_max, conv_channels) the convolved q, k, v
  float *gdn_ab;     // (m_max, gdn_v_heads) four times: the alpha and beta products, the decays and rates
  float *gate;       // (m_max, q_dim) gated attention's gates; nullptr without them
  float *ple;        // (m_max, n_layers * ple_dim) each position's per-layer inputs; nullptr without them
  float *ple_p;      // (m_max, n_layers * ple_dim) their projection from the embedding, then a layer's gate products
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

// Per-position work of a pass on the pool: fn(ctx, task, i0, i1) for
// contiguous position ranges [i0, i1) covering [0, m), at most
// kMaxPositionTasks tasks (task < that), one task when `values` (the work,
// in values touched) is too small to share. Each position's results must
// not depend on the split, so a pass computes the same bits on any number
// of threads.
constexpr uint32_t kMaxPositionTasks = 64;
typedef void (*PositionsFn)(void *ctx, uint32_t task, uint32_t i0, uint32_t i1);
void run_positions(gb_port_pool *pool, uint32_t m, uint64_t values, PositionsFn fn, void *ctx);

// a[i] = silu(a[i]) * b[i] for i in [i0, i1): the FFN's gate (SwiGLU).
inline void silu_mul(float *a, const float *b, size_t i0, size_t i1) {
  for (size_t i = i0; i < i1; i++) {
    const float g = a[i];
    a[i] = g / (1.0f + expf(-g)) * b[i];
  }
}

// Run tokens[0..m) at positions pos..pos+m-1 through the model: each enters
// the KV pool, each position attends to the cache up to itself, and when
// want_logits sc.logits gets each position's next-token logits (m rows).
// m == 1 enters the pool as a decode step does (per-policy step-downs,
// eviction); m > 1 needs kv_batchable (a single-level policy with room).
// GB_ERR_CONTEXT_FULL with nothing run when the pool cannot take them;
// GB_ERR_INTERNAL when m exceeds what sc was carved for.
gb_status forward(const Weights &w, KvPool *kv, Scratch &sc, const Exec &e, const int32_t *tokens, uint32_t m, uint32_t pos,
                  PassKind kind, bool want_logits, PassCost *cost);

// Pieces of the pass.
void rmsnorm(float *out, const float *x, const TensorRef &w, uint32_t n, float eps);
// scale multiplies the rotated dimensions (the model's rope_attn_factor; 1:
// the plain rotation, bit for bit).
void rope(float *vec, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dim, uint32_t type, const float *freq, float scale,
          uint32_t pos);
}  // namespace gb
