// control.h — generation control of a session: logit bias, repetition /
// frequency / presence penalties over a window of recent tokens, stop
// strings over the generated text, and the abort callback. Everything lives
// in the session arena (carved with it); nothing allocates after creation.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "options.h"

namespace gb {

struct Control {
  // Penalties: the last `window` tokens run, in a ring.
  float repeat = 1.0f, freq = 0.0f, presence = 0.0f;
  uint32_t window = 0;  // 0: penalties off
  int32_t *ring = nullptr;
  uint32_t ring_n = 0, ring_head = 0;
  uint8_t *mark = nullptr;  // (vocab / 8 + 1) bits, all clear between steps
  // Logit bias.
  int32_t *bias_tok = nullptr;
  float *bias_val = nullptr;
  uint32_t n_bias = 0;
  // Stop strings: text back to back, offsets, and the tail of the generated
  // text (at most stop_max - 1 bytes kept between steps).
  char *stop_text = nullptr;
  uint32_t *stop_off = nullptr;  // (n_stop + 1)
  uint32_t n_stop = 0, stop_max = 0;
  char *tail = nullptr;          // (stop_max + kTailSlack)
  uint32_t tail_n = 0;
  // Abort.
  gb_abort_fn abort_fn = nullptr;
  void *abort_user = nullptr;
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state.
#define GB_CONTROL_FIELDS(F)                                                                                     \
  F(SKIP, repeat) F(SKIP, freq) F(SKIP, presence) F(MATCH, window) F(OWN, ring) F(SAVE, ring_n) F(SAVE, ring_head) \
  F(SKIP, mark) F(SKIP, bias_tok) F(SKIP, bias_val) F(SKIP, n_bias) F(SKIP, stop_text) F(SKIP, stop_off)          \
  F(SKIP, n_stop) F(MATCH, stop_max) F(OWN, tail) F(OWN, tail_n) F(SKIP, abort_fn) F(SKIP, abort_user)

// Check the generation-control options (logging the one at fault).
gb_status control_validate(const SessionConfig &o, uint32_t vocab, const Logger &log);

// Carve the control's arrays (counting when `a` counts); with `c` non-null
// (placing), copy the bias and stop strings out of the options.
void control_carve(Control *c, Arena &a, const SessionConfig &o, uint32_t vocab, bool placing);

// Forget the token history and the generated text (reset, new input).
void control_reset(Control *c);
void control_clear_text(Control *c);

// A token ran through the model (history for the penalties).
void control_push(Control *c, int32_t token);

// Bias, then penalties, on a step's logits (in place).
void control_apply(Control *c, float *logits, uint32_t vocab);

// The generated text grew by text[0..n): whether a stop string now ends in
// it. On a match *index is the string and *trim the bytes of the generated
// text (ending here) it covers; the tail is cleared.
bool control_stop(Control *c, const char *text, size_t n, uint32_t *index, uint32_t *trim);

// Whether the caller asked to stop.
inline bool control_aborted(const Control &c) { return c.abort_fn && c.abort_fn(c.abort_user) != 0; }

}  // namespace gb
