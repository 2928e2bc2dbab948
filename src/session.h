// session.h — the state of one decoding session, carved from one arena.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "kv.h"
#include "model.h"
#include "monitor.h"
#include "sampler.h"

struct gb_session {
  const gb_model *model;
  gb::Logger log;
  gb_session_options opt;
  void *mem;         // the arena
  size_t mem_bytes;
  bool owns_mem;     // obtained by the library, freed on destroy
  gb_kernels k;      // kernel table chosen at creation
  gb_port_pool *pool;  // worker threads (opt.n_threads, caller included), in the arena

  uint32_t n_ctx;
  uint32_t pos;      // tokens in the KV cache
  int32_t pending;   // token to run at the next decode step, -1 = none

  // Activations (llama2.c's RunState).
  float *x;          // (dim) residual stream
  float *xb;         // (max(dim, q_dim)) normed input / attention output
  float *xb2;        // (dim)
  float *hb;         // (hidden_dim)
  float *hb2;        // (hidden_dim)
  float *q;          // (q_dim)
  float *kt;         // (kv_dim) this token's key before it is stored
  float *vt;         // (kv_dim)
  float *logits;     // (vocab)
  float *rope_freq;  // (rope_dim / 2) inverse frequencies
  gb_q8x_block *xq;  // (max(dim, q_dim, hidden) / 32) quantized activations
  gb::KvPool kv;     // the KV pool (issue #6) and attention scratch
  gb::Sampler sampler;
  gb::Monitor monitor;

  // Matrices of the current gear, resolved once per shift (pointer swap).
  gb_gear gear;                // gear of the next forward pass
  const gb::TensorRef *mats;   // (n_layers * kMatsPerLayer) for the managed set's gear
  const gb::TensorRef *base_mats;  // the base gear's (unmanaged matrices)
  const gb::TensorRef *classifier;
  uint64_t bytes_read, weights_read;  // of the last forward pass

  // Lazy tiers: tiers the file lacks, quantized from its f32 / high tier into
  // the arena on first entry and cached (seed 000 §6.2, §6.4).
  gb::TensorRef *lazy_mats[GB_GEAR_COUNT];  // (n_layers * kMatsPerLayer), nullptr = not lazy
  gb::TensorRef lazy_cls[GB_GEAR_COUNT];
  bool lazy_ready[GB_GEAR_COUNT];
  float *lazy_row;                          // (max cols) dequantized source row

  // Batched prefill (prefill.cpp): chunks of up to pf_batch positions; with
  // pf_batch == 1 nothing below is carved.
  uint32_t pf_batch;       // positions per chunk
  uint32_t pf_panel_rows;  // weight rows per panel
  uint32_t pf_slots;       // panels in pf_panel: threads that expand panels at once
  gb_gemm_fn pf_gemm;      // OpenBLAS's sgemm or the kernel table's GEMM
  int32_t *pf_tok;         // (pf_batch) tokens of the chunk
  float *pf_x;             // (pf_batch, dim) residual streams
  float *pf_xb;            // (pf_batch, max(dim, q_dim)) normed inputs / attention outputs
  float *pf_xb2;           // (pf_batch, dim)
  float *pf_hb, *pf_hb2;   // (pf_batch, hidden_dim)
  float *pf_q;             // (pf_batch, q_dim)
  float *pf_k, *pf_v;      // (pf_batch, kv_dim)
  float *pf_xa;            // (pf_batch, wide) activations as the q8/q4 kernels see them
  float *pf_panel;         // (pf_slots, pf_panel_rows, wide) weight rows expanded to f32
  float *pf_logits;        // (pf_batch, vocab) for monitor calibration, else nullptr

  // Speculative gear (spec.cpp), carved only for GB_GEAR_SPEC. The main KV
  // pool holds the verifier's entries, dkv the draft's; hist the token at
  // every position, for the draft to catch up with.
  bool spec;
  gb::KvPool dkv;          // the draft's KV pool (same plan as kv)
  uint32_t dpos;           // positions in dkv
  int32_t *hist;           // (n_ctx) token at each position of kv
  uint32_t sp_m;           // spec_k + 1: positions of a verify pass
  float *sp_x, *sp_xb, *sp_xb2, *sp_hb, *sp_hb2, *sp_q, *sp_k, *sp_v;  // (sp_m, ...) as pf_*
  gb_q8x_block *sp_xq;     // (sp_m, wide / 32) quantized activations per position
  float *sp_logits;        // (sp_m, vocab) the verifier's logits per position
  float *sp_draft_p;       // (spec_k, vocab) the draft's sampling distributions
  float *sp_p;             // (vocab) the verifier's distribution at a position
  int32_t *sp_tok;         // (sp_m) the pass's tokens: pending, then the drafts
  int32_t *sp_out;         // (sp_m) tokens of the last round still to hand out
  uint32_t sp_out_n, sp_out_i;  // tokens in sp_out, next to hand out
  uint32_t sp_pos0;        // position of the last round's pending token
  uint32_t sp_drafted, sp_accepted;  // of the last round
  uint64_t sp_round_bytes, sp_round_weights;  // weights read by the last round
  double sp_succ, sp_trials;  // decayed counts of accepted drafts / drafts judged (spec_adapt)
  uint32_t sp_idle;           // rounds without drafts since the last probe (spec_adapt)

  // Precision manager state.
  float *calib;                 // (n_ctx) prefill entropies for calibration (auto only)
  gb_gear prewarmed;            // tier last hinted in (WILLNEED), GB_GEAR_COUNT = none
  uint64_t resident_bytes;      // weight tiers resident, measured at creation / completed releases
  uint32_t release_pending;     // bit t: tier t is being returned to the OS, a slice per step
  bool resident_stale;          // a release completed: re-measure after the next pass
  uint64_t release_off[GB_GEAR_COUNT];  // bytes of tier t released so far
  uint64_t shifts;              // gear shifts since creation
};

namespace gb {
// Run one token at position s->pos through the model: s->logits gets the
// next-token logits and s->pos advances. Caller checks pos < n_ctx.
// GB_ERR_CONTEXT_FULL (nothing run) when the KV pool has no room.
gb_status forward(gb_session *s, int32_t token, bool want_logits);
// Run the chunk tokens[0..m) at positions s->pos.. through the model at once
// (GEMMs on weight panels, attention per position); s->pos advances by m.
// want_logits: s->pf_logits gets each position's next-token logits.
// Caller checks 2 <= m <= pf_batch, pos + m <= n_ctx and kv_batchable
// (GB_ERR_CONTEXT_FULL, nothing run, otherwise).
gb_status forward_batch(gb_session *s, const int32_t *tokens, uint32_t m, bool want_logits);
// The batched forward itself, for prefill and the speculative verify pass:
// every matrix multiplies the m positions through mm (Y (m, rows) = X (m,
// cols) W^T), attention runs per position over the pool (later positions
// hidden), and logits (when b.logits is set) get each position's logits.
struct BatchBuffers {
  float *x, *xb, *xb2, *hb, *hb2, *q, *k, *v;  // (m, dim), (m, max(dim, q_dim)), (m, dim), (m, hidden) x2, (m, q_dim), (m, kv_dim) x2
  float *logits;                               // (m, vocab) or nullptr
};
typedef void (*BatchMatmulFn)(gb_session *s, float *Y, const float *X, uint32_t m, const TensorRef &w);
gb_status forward_rows(gb_session *s, const int32_t *tokens, uint32_t m, const BatchBuffers &b, BatchMatmulFn mm);
// GB_GEAR_SPEC: the next token, from the queue of the last round or from
// a new round (draft, verify, accept, roll back). *logits: the verifier's
// distribution that produced it; *ran_round: whether this call ran one.
gb_status spec_next(gb_session *s, int32_t *token, const float **logits, bool *ran_round);
// Forget the spec state (reset).
void spec_reset(gb_session *s);
// Before new input (gb_prefill, gb_feed): the tokens of the last round not
// handed out yet leave both KV pools, and the last handed-out token becomes
// pending again, as if the session had decoded one token at a time.
void spec_settle(gb_session *s);
// Pieces of the forward pass shared by forward() and forward_batch().
void rmsnorm(float *out, const float *x, const TensorRef &w, uint32_t n, float eps);
void rope(float *vec, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dim, uint32_t type, const float *freq, uint32_t pos);
// Tasks a GEMV of rows x cols is split into on the session's pool: whole
// row tiles, at most one per thread, none smaller than a minimum of work.
uint32_t gemv_tasks(const gb_session *s, uint64_t rows, uint64_t cols);
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
