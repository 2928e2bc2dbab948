// session.h — the state of one decoding session, carved from one arena.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "control.h"
#include "forward.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "kv.h"
#include "model.h"
#include "monitor.h"
#include "sampler.h"

struct gb_session {
  uint32_t handle = gb::kHandleSession;  // first: see gb::HandleKind
  const gb_model *model;
  gb::Logger log;
  gb_session_options opt;
  void *mem;         // the arena
  size_t mem_bytes;
  bool owns_mem;     // obtained by the library, freed on destroy
  gb_port_pool *pool;  // worker threads (opt.n_threads, caller included), in the arena

  uint32_t n_ctx;
  uint32_t pos;      // tokens in the KV cache
  int32_t pending;   // token to run at the next decode step, -1 = none

  // The model path's arguments (forward.h). sc.logits row 0 holds the last
  // decode pass's logits; a verify pass's m rows stay there while its tokens
  // are handed out.
  gb::Weights w;     // the current gear's tier (set_gear)
  gb::Scratch sc;    // activations of every pass, sized for the largest m
  gb::Exec ex;       // kernel table, pool, matmul plan, rope frequencies
  float *rope_freq;  // (rope_dim / 2) inverse frequencies
  gb::KvPool kv;     // the KV pool and attention scratch
  gb::Sampler sampler;
  gb::Monitor monitor;
  gb::Control ctl;   // bias, penalties, stop strings, abort
  int32_t last_out;  // token gb_decode_step handed out last (-1 after new input)

  gb_gear gear;                // gear of the next forward pass (w is its tier)

  // Lazy tiers: tiers the file lacks, quantized from its f32 / high tier into
  // the arena on first entry and cached (never re-quantized on re-entry).
  gb::TensorRef *lazy_mats[GB_GEAR_COUNT];  // (n_layers * kMatsPerLayer), nullptr = not lazy
  gb::TensorRef lazy_cls[GB_GEAR_COUNT];
  bool lazy_ready[GB_GEAR_COUNT];
  float *lazy_row;                          // (max cols) dequantized source row

  // Batched prefill: chunks of up to pf_batch positions through forward()
  // with the plan's prefill methods (ex.mm).
  uint32_t pf_batch;       // positions per chunk (1: token by token)
  int32_t *pf_tok;         // (pf_batch) tokens of the chunk, or nullptr

  // Speculative gear (spec.cpp), carved only for GB_GEAR_SPEC. The main KV
  // pool holds the verifier's entries, dkv the draft's; hist the token at
  // every position, for the draft to catch up with.
  bool spec;
  gb::Weights wdraft;      // the draft tier
  gb::KvPool dkv;          // the draft's KV pool (same plan as kv)
  uint32_t dpos;           // positions in dkv
  int32_t *hist;           // (n_ctx) token at each position of kv
  uint32_t sp_m;           // spec_k + 1: positions of a verify pass
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
  // spec_adapt 2: measured pass times, ns (0 = not measured yet): one draft
  // position, and a verify pass with j drafts (j + 1 positions), decayed.
  double sp_t_draft;
  double sp_t_verify[GB_GEMVM_MAX_M];

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
}  // namespace gb
