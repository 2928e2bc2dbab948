// control.cpp — logit bias, penalties, stop strings (control.h).
#include "control.h"

#include <math.h>
#include <string.h>

namespace gb {

namespace {
constexpr uint32_t kMaxWindow = 65536, kMaxBias = 65536, kMaxStop = 64, kMaxStopBytes = 256;
constexpr uint32_t kTailSlack = 1100;  // one token's text (pieces are at most 1024 bytes)

bool penalties_on(const SessionConfig &o) {
  return o.repeat_penalty != 1.0f || o.frequency_penalty != 0.0f || o.presence_penalty != 0.0f;
}
}  // namespace

gb_status control_validate(const SessionConfig &o, uint32_t vocab, const Logger &log) {
  GB_RETURN_IF(!(o.repeat_penalty > 0.0f && o.repeat_penalty <= 100.0f), log, GB_ERR_INVALID_ARGUMENT,
               "session options: repeat_penalty %g must be in (0, 100] (1 = off)", (double)o.repeat_penalty);
  GB_RETURN_IF(!(fabsf(o.frequency_penalty) <= 100.0f), log, GB_ERR_INVALID_ARGUMENT,
               "session options: frequency_penalty %g must be in [-100, 100]", (double)o.frequency_penalty);
  GB_RETURN_IF(!(fabsf(o.presence_penalty) <= 100.0f), log, GB_ERR_INVALID_ARGUMENT,
               "session options: presence_penalty %g must be in [-100, 100]", (double)o.presence_penalty);
  GB_RETURN_IF(o.penalty_window == 0 || o.penalty_window > kMaxWindow, log, GB_ERR_INVALID_ARGUMENT,
               "session options: penalty_window %u must be in 1..%u", o.penalty_window, kMaxWindow);
  GB_RETURN_IF(o.n_logit_bias > kMaxBias, log, GB_ERR_INVALID_ARGUMENT, "session options: n_logit_bias %u > %u", o.n_logit_bias,
               kMaxBias);
  GB_RETURN_IF(o.n_logit_bias && !o.logit_bias, log, GB_ERR_NULL_POINTER, "session options: logit_bias is NULL with n_logit_bias %u",
               o.n_logit_bias);
  for (uint32_t i = 0; i < o.n_logit_bias; i++) {
    const gb_logit_bias &b = o.logit_bias[i];
    GB_RETURN_IF(b.token < 0 || (uint32_t)b.token >= vocab, log, GB_ERR_TOKEN_OUT_OF_RANGE,
                 "session options: logit_bias[%u].token %d outside [0, %u)", i, b.token, vocab);
    GB_RETURN_IF(isnan(b.bias) || (isinf(b.bias) && b.bias > 0), log, GB_ERR_INVALID_ARGUMENT,
                 "session options: logit_bias[%u].bias must be a number or -infinity", i);
  }
  GB_RETURN_IF(o.n_stop_strings > kMaxStop, log, GB_ERR_INVALID_ARGUMENT, "session options: n_stop_strings %u > %u",
               o.n_stop_strings, kMaxStop);
  GB_RETURN_IF(o.n_stop_strings && !o.stop_strings, log, GB_ERR_NULL_POINTER,
               "session options: stop_strings is NULL with n_stop_strings %u", o.n_stop_strings);
  for (uint32_t i = 0; i < o.n_stop_strings; i++) {
    GB_RETURN_IF(!o.stop_strings[i], log, GB_ERR_NULL_POINTER, "session options: stop_strings[%u] is NULL", i);
    const size_t n = strnlen(o.stop_strings[i], kMaxStopBytes + 1);
    GB_RETURN_IF(n == 0 || n > kMaxStopBytes, log, GB_ERR_INVALID_ARGUMENT, "session options: stop_strings[%u] must be 1..%u bytes", i,
                 kMaxStopBytes);
  }
  const bool spec = raw_enum(o.gear) == GB_GEAR_SPEC;
  GB_RETURN_IF(spec && (penalties_on(o) || o.n_logit_bias), log, GB_ERR_INVALID_ARGUMENT,
               "session options: penalties and logit bias do not combine with the spec gear (it verifies unmodified distributions)");
  return GB_OK;
}

void control_carve(Control *c, Arena &a, const SessionConfig &o, uint32_t vocab, bool placing) {
  const bool pen = penalties_on(o);
  const uint32_t window = pen ? (o.penalty_window < o.n_ctx ? o.penalty_window : (o.n_ctx ? o.n_ctx : 1)) : 0;
  c->ring = pen ? a.array<int32_t>(window) : nullptr;
  c->mark = pen ? a.array<uint8_t>(vocab / 8 + 1) : nullptr;
  c->bias_tok = o.n_logit_bias ? a.array<int32_t>(o.n_logit_bias) : nullptr;
  c->bias_val = o.n_logit_bias ? a.array<float>(o.n_logit_bias) : nullptr;
  uint32_t text = 0, longest = 0;
  for (uint32_t i = 0; i < o.n_stop_strings; i++) {
    const uint32_t n = (uint32_t)strlen(o.stop_strings[i]);
    text += n;
    longest = n > longest ? n : longest;
  }
  c->stop_text = o.n_stop_strings ? a.array<char>(text) : nullptr;
  c->stop_off = o.n_stop_strings ? a.array<uint32_t>(o.n_stop_strings + 1) : nullptr;
  c->tail = o.n_stop_strings ? a.array<char>(longest + kTailSlack) : nullptr;
  if (!placing) return;
  c->repeat = o.repeat_penalty;
  c->freq = o.frequency_penalty;
  c->presence = o.presence_penalty;
  c->window = window;
  if (c->mark) memset(c->mark, 0, vocab / 8 + 1);
  c->n_bias = o.n_logit_bias;
  for (uint32_t i = 0; i < o.n_logit_bias; i++) {
    c->bias_tok[i] = o.logit_bias[i].token;
    c->bias_val[i] = o.logit_bias[i].bias;
  }
  c->n_stop = o.n_stop_strings;
  c->stop_max = longest;
  uint32_t off = 0;
  for (uint32_t i = 0; i < o.n_stop_strings; i++) {
    const uint32_t n = (uint32_t)strlen(o.stop_strings[i]);
    c->stop_off[i] = off;
    memcpy(c->stop_text + off, o.stop_strings[i], n);
    off += n;
  }
  if (c->stop_off) c->stop_off[o.n_stop_strings] = off;
  c->abort_fn = o.abort_callback;
  c->abort_user = o.abort_user;
  control_reset(c);
}

void control_reset(Control *c) {
  c->ring_n = c->ring_head = 0;
  control_clear_text(c);
}

void control_clear_text(Control *c) { c->tail_n = 0; }

void control_push(Control *c, int32_t token) {
  if (!c->window) return;
  c->ring[c->ring_head] = token;
  c->ring_head = c->ring_head + 1 == c->window ? 0 : c->ring_head + 1;
  if (c->ring_n < c->window) c->ring_n++;
}

void control_apply(Control *c, float *logits, uint32_t vocab) {
  for (uint32_t i = 0; i < c->n_bias; i++) logits[c->bias_tok[i]] += c->bias_val[i];
  if (!c->window || c->ring_n == 0) return;
  // logit -= frequency x count + presence, then the repetition rule, once
  // per distinct token: the first pass subtracts per occurrence and marks,
  // the second finishes each marked token and clears its mark.
  for (uint32_t i = 0; i < c->ring_n; i++) {
    const int32_t t = c->ring[i];
    if (t < 0 || (uint32_t)t >= vocab) continue;
    logits[t] -= c->freq;
    c->mark[t >> 3] |= (uint8_t)(1u << (t & 7));
  }
  for (uint32_t i = 0; i < c->ring_n; i++) {
    const int32_t t = c->ring[i];
    if (t < 0 || (uint32_t)t >= vocab) continue;
    uint8_t &m = c->mark[t >> 3];
    const uint8_t bit = (uint8_t)(1u << (t & 7));
    if (!(m & bit)) continue;
    m &= (uint8_t)~bit;
    float &l = logits[t];
    l -= c->presence;
    l = l > 0.0f ? l / c->repeat : l * c->repeat;
  }
}

bool control_stop(Control *c, const char *text, size_t n, uint32_t *index, uint32_t *trim) {
  if (!c->n_stop) return false;
  // Append (a token's text beyond the slack is cut to its last bytes: only
  // they can complete a stop string together with what came before).
  const uint32_t cap = c->stop_max + kTailSlack;
  if (n > cap) {
    text += n - cap;
    n = cap;
    c->tail_n = 0;
  }
  if (c->tail_n + n > cap) {
    const uint32_t keep = cap - (uint32_t)n;
    memmove(c->tail, c->tail + (c->tail_n - keep), keep);
    c->tail_n = keep;
  }
  const uint32_t old = c->tail_n;
  memcpy(c->tail + old, text, n);
  c->tail_n += (uint32_t)n;
  // The earliest-ending match that ends inside the new text.
  uint32_t best_end = UINT32_MAX, best = 0, best_len = 0;
  for (uint32_t k = 0; k < c->n_stop; k++) {
    const char *s = c->stop_text + c->stop_off[k];
    const uint32_t len = c->stop_off[k + 1] - c->stop_off[k];
    for (uint32_t end = old + 1; end <= c->tail_n && end < best_end; end++) {
      if (end < len) continue;
      if (memcmp(c->tail + end - len, s, len) == 0) {
        best_end = end;
        best = k;
        best_len = len;
        break;
      }
    }
  }
  if (best_end != UINT32_MAX) {
    *index = best;
    *trim = c->tail_n - (best_end - best_len);
    c->tail_n = 0;
    return true;
  }
  // Keep what a later match could still start with.
  const uint32_t keep = c->stop_max > 1 ? c->stop_max - 1 : 0;
  if (c->tail_n > keep) {
    memmove(c->tail, c->tail + (c->tail_n - keep), keep);
    c->tail_n = keep;
  }
  return false;
}

}  // namespace gb
