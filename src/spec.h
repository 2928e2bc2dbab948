// spec.h — the speculative gear (GB_GEAR_SPEC): the low tier drafts, the
// high tier verifies, and the output is the high tier's (spec.cpp).
#pragma once

#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "forward.h"
#include "kv.h"

struct gb_session;

namespace gb {

// The speculative gear's part of a session, carved only for GB_GEAR_SPEC.
// The session's KV pool holds the verifier's entries, dkv the draft's; hist
// the token at every position, for the draft to catch up with.
struct Spec {
  bool on;                    // the session runs GB_GEAR_SPEC
  uint32_t k;                 // spec_k: most drafts per round
  gb_gear verify, draft;      // the verifying and the drafting tier
  Weights wdraft;             // the draft tier
  KvPool dkv;                 // the draft's KV pool (same plan as the verifier's)
  uint32_t dpos;              // positions in dkv
  int32_t *hist;              // (n_ctx) token at each position of the verifier's pool
  uint32_t m;                 // spec_k + 1: positions of a verify pass
  float *draft_p;             // (spec_k, vocab) the draft's sampling distributions
  float *p;                   // (vocab) the verifier's distribution at a position
  int32_t *tok;               // (m) the pass's tokens: pending, then the drafts
  int32_t *out;               // (m) tokens of the last round still to hand out
  uint32_t out_n, out_i;      // tokens in out, next to hand out
  uint32_t pos0;              // position of the last round's pending token
  uint32_t drafted, accepted;  // of the last round
  uint64_t round_bytes, round_weights;  // weights read by the last round
  double succ, trials;        // decayed counts of accepted drafts / drafts judged (spec_adapt)
  uint32_t idle;              // rounds without drafts since the last probe (spec_adapt)
  // spec_adapt 2: measured pass times, ns (0 = not measured yet): one draft
  // position, and a verify pass with j drafts (j + 1 positions), decayed.
  double t_draft;
  double t_verify[GB_GEMVM_MAX_M];
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state.
#define GB_SPEC_FIELDS(F)                                                                                       \
  F(SKIP, on) F(MATCH, k) F(MATCH, verify) F(MATCH, draft) F(SKIP, wdraft) F(OWN, dkv) F(SAVE, dpos) F(OWN, hist) \
  F(SKIP, m) F(SKIP, draft_p) F(SKIP, p) F(SKIP, tok) F(SKIP, out) F(SKIP, out_n) F(SKIP, out_i) F(SAVE, pos0)    \
  F(SAVE, drafted) F(SAVE, accepted) F(SKIP, round_bytes) F(SKIP, round_weights) F(SAVE, succ) F(SAVE, trials)   \
  F(SAVE, idle) F(SKIP, t_draft) F(SKIP, t_verify)

// Carve the part for options o (counting when a is counting): for
// GB_GEAR_SPEC the draft's KV pool (plan kvp), the history and the round's
// buffers; nothing otherwise (on = false).
void spec_carve(Spec *sp, Arena &a, const Meta &c, const SessionConfig &o, const KvPlan &kvp);
// The next token, from the queue of the last round or from a new round
// (draft, verify, accept, roll back). *logits: the verifier's distribution
// that produced it; *ran_round: whether this call ran one.
gb_status spec_next(gb_session *s, int32_t *token, const float **logits, bool *ran_round);
// The grammar's mask of its committed state into mask row 0, before a
// step runs anything (session.cpp). GB_ERR_GRAMMAR_NO_TOKEN, logged, when no
// token can continue it.
gb_status grammar_mask_first(gb_session *s);
// Forget the spec state (reset).
void spec_reset(gb_session *s);
// Before new input (gb_prefill, gb_feed): the tokens of the last round not
// handed out yet leave both KV pools, and the last handed-out token becomes
// pending again, as if the session had decoded one token at a time.
void spec_settle(gb_session *s);

}  // namespace gb
