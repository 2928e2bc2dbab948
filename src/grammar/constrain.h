// constrain.h — a session's constrained decoding: the room for a grammar
// image, its matcher, the vocabulary index the token mask walks, and the
// mask of the current step. All carved with the session; nothing
// allocates after creation.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "grammar/matcher.h"
#include "options.h"

namespace gb {

struct Constraint {
  bool reserved = false;      // the session can hold a grammar
  uint32_t *image = nullptr;  // (room) words; image[0..words) the grammar in use
  uint32_t room = 0, words = 0;
  bool on = false;            // a grammar is set
  Matcher m;
  VocabIndex vi;
  const gb_tokenizer *tk = nullptr;  // the model's
  uint32_t *allowed = nullptr;  // (rows, vocab / 32 + 1) masks: one, or one per
                                // position of a speculative round
  uint32_t rows = 0, row_words = 0;
  GState *st = nullptr;         // (rows) a speculative round's states
  uint32_t n_allowed = 0;
  uint64_t mask_ns = 0;         // time spent on masks since creation / reset
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state.
#define GB_CONSTRAINT_FIELDS(F)                                                                                    \
  F(MATCH, reserved) F(OWN, image) F(SKIP, room) F(OWN, words) F(OWN, on) F(OWN, m) F(SKIP, vi) F(SKIP, tk) F(SKIP, allowed) F(SKIP, rows) F(SKIP, row_words) F(SKIP, st) \
  F(SKIP, n_allowed) F(SKIP, mask_ns)

// Check the grammar options (logging the one at fault).
gb_status constraint_validate(const SessionConfig &o, const Logger &log);

// Carve (counting when a counts) for the model's tokenizer.
void constraint_carve(Constraint *c, Arena &a, const gb_model *model, const SessionConfig &o);

// After placing: build the vocabulary index and start the options'
// grammar. log: where the matcher reports (outlives c).
gb_status constraint_init(Constraint *c, const gb_model *model, const SessionConfig &o, const Logger *log);

// Replace the grammar (img nullptr: none) and start it. Errors before any
// change: GB_ERR_BUDGET_EXCEEDED, GB_ERR_CORRUPT; GB_ERR_GRAMMAR_LIMIT when
// its start outgrows the limits, and then no grammar is set.
gb_status constraint_set(Constraint *c, const uint32_t *img, size_t words, const Logger &log);

// Start the grammar afresh (session reset).
gb_status constraint_restart(Constraint *c);

// The mask of state st into row `row` of c->allowed. GB_ERR_GRAMMAR_NO_TOKEN
// (not logged: the caller says what it means) when it is empty.
gb_status constraint_mask(Constraint *c, GState st, uint32_t vocab, uint32_t row = 0);

// Logits of the tokens outside mask row `row` to -infinity.
void constraint_apply(const Constraint &c, float *logits, uint32_t vocab, uint32_t row = 0);

// The committed state after `token` (appended above it); end-of-generation
// tokens leave the state as it is.
gb_status constraint_after(Constraint *c, GState st, int32_t token, GState *out);

// Advance the committed state by a token handed out.
gb_status constraint_accept(Constraint *c, int32_t token);

}  // namespace gb
