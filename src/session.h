// session.h — the state of one decoding session, carved from one arena.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "control.h"
#include "forward.h"
#include "gears.h"
#include "gearbx_port.h"
#include "grammar/constrain.h"
#include "kernels.h"
#include "kv.h"
#include "model.h"
#include "monitor.h"
#include "sampler.h"
#include "spec.h"

namespace gb {

// The one arena a session lives in.
struct SessionMemory {
  void *base;
  size_t bytes;
  bool owned;  // obtained by the library, freed on destroy
};

// Where the session is in its token stream.
struct Cursor {
  uint32_t pos;      // tokens in the KV cache
  int32_t pending;   // token to run at the next decode step, -1 = none
  int32_t last_out;  // token gb_decode_step handed out last (-1 after new input)
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state.
#define GB_CURSOR_FIELDS(F) F(SAVE, pos) F(SAVE, pending) F(SAVE, last_out)

// Batched prefill: chunks of up to `batch` positions through forward() with
// the plan's prefill methods (Exec::mm); the first prefill of an auto
// session keeps its positions' entropies to calibrate the monitor.
struct Prefill {
  uint32_t batch;  // positions per chunk (1: token by token)
  int32_t *tok;    // (batch) tokens of the chunk, or nullptr
  float *calib;    // (n_ctx) prefill entropies for calibration (auto only), or nullptr
};

}  // namespace gb

// A session is its parts, each with its own type and file; all carved from
// one arena (session.cpp's carve()).
struct gb_session {
  uint32_t handle = gb::kHandleSession;  // first: see gb::HandleKind
  const gb_model *model;
  gb::Logger log;
  gb::SessionConfig opt;  // as given, defaults filled in (opt.n_ctx is the context)
  gb::SessionMemory mem;
  gb::Exec ex;             // kernel table, worker pool, matmul plan, RoPE frequencies (matmul.h)
  gb::Cursor cur;
  // The model path's buffers (forward.h). sc.logits row 0 holds the last
  // decode pass's logits; a verify pass's m rows stay there while its
  // tokens are handed out.
  gb::Scratch sc;
  gb::KvPool kv;           // the verifier's (or only) KV pool (kv.h)
  gb::Gears gears;         // tiers in use, shifts, lazy tiers, residency (gears.h)
  gb::Monitor monitor;     // entropy, thresholds, the next gear (monitor.h)
  gb::Sampler sampler;
  gb::Control ctl;         // bias, penalties, stop strings, abort (control.h)
  gb::Prefill pf;
  gb::Spec spec;           // the speculative gear (spec.h)
  gb::Constraint cons;     // the grammar the sampler follows (grammar/constrain.h)
};


