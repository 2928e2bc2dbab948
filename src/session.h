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
  float *att;        // (n_heads, n_ctx) attention scores
  float *logits;     // (vocab)
  float *rope_freq;  // (rope_dim / 2) inverse frequencies
  gb_q8x_block *xq;  // (max(dim, q_dim, hidden) / 32) quantized activations
  gb::KvCache kv;
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

  // Precision manager state.
  float *calib;                 // (n_ctx) prefill entropies for calibration (auto only)
  gb_gear prewarmed;            // tier last hinted in (WILLNEED), GB_GEAR_COUNT = none
  uint64_t resident_bytes;      // weight tiers resident, measured at creation / shifts
  uint64_t shifts;              // gear shifts since creation
};

namespace gb {
// Run one token at position s->pos through the model: s->logits gets the
// next-token logits and s->pos advances. Caller checks pos < n_ctx.
void forward(gb_session *s, int32_t token, bool want_logits);
// Point the session's matrices at gear g (no copy).
void set_gear(gb_session *s, gb_gear g);
// The precision manager's shift: set_gear, then hint the new tier in and
// release the pages of tiers no longer in use; re-measures residency.
void shift_gear(gb_session *s, gb_gear g);
// Quantize a lazy tier from its source tier (first entry; logs a warning
// when the source looks already quantized).
void lazy_quantize(gb_session *s, gb_gear g);
// Tasks a GEMV of rows x cols is split into on the session's pool: whole
// row tiles, at most one per thread, none smaller than a minimum of work.
uint32_t gemv_tasks(const gb_session *s, uint64_t rows, uint64_t cols);
// Weight-tier bytes resident in this process (0 when the port cannot tell).
uint64_t measure_resident(const gb_session *s);
}  // namespace gb
