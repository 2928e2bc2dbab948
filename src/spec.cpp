// spec.cpp — the speculative gear (GB_GEAR_SPEC): the low tier
// drafts, the high tier verifies, and the output is the high tier's.
//
// A round, with pos tokens in the verifier's KV pool and t the pending token:
//
//   1. The draft length k: spec_k, or with spec_adapt the k that minimizes
//      the expected weight bytes (spec_adapt 1) or measured time (2) per
//      token at the acceptance rate so far (0: the verifier alone, with a
//      one-token probe every 16th such round). When k > 0 the draft runs
//      t, d1, ... on the draft tier, each draft token sampled from the
//      draft's distribution q_i (argmax when greedy); it stops after k
//      tokens, or before a position whose draft entropy exceeds
//      spec_stop_entropy. Its pool lags behind the verifier's by the tokens
//      it has not run (the prompt, fed tokens, rounds without drafts, the
//      last draft of a round that kept them all): up to spec_k of them go
//      with t in its first pass (one multi-position pass), any more in
//      batched catch-up passes before it; d1, d2, ... one position at a time.
//   2. The verifier runs [t, d1..dk] at positions pos..pos+k in one pass:
//      every matrix multiplies the k + 1 positions with the multi-position
//      GEMV (each weight read once), whose per-position arithmetic is the
//      one-position GEMV's, and attention runs per position over the pool,
//      causally (the batch's later tokens hidden). So logits L_0..L_k are
//      bit for bit those of k + 1 single decode steps.
//   3. Acceptance: d_{i+1} is kept with probability min(1, p_i(d)/q_i(d))
//      (p_i: the verifier's sampling distribution from L_i); the first
//      rejection draws the bonus token from max(0, p_i - q_i) normalized;
//      if all k are kept the bonus comes from p_k. Greedy: kept iff d_{i+1}
//      is the argmax of L_i, the bonus is that argmax. This is the standard
//      speculative-sampling rule: every emitted token has the verifier's
//      distribution exactly.
//   4. Both pools drop the positions past the kept prefix (kv_truncate);
//      the a kept drafts and the bonus are handed out one per
//      gb_decode_step call, the bonus becoming the next pending token.
#include <math.h>
#include <string.h>

#include "format.h"
#include "forward.h"
#include "gearbx_port.h"
#include "session.h"

namespace gb {
namespace {

// One draft pass: tokens at the draft's positions dpos.. on the draft tier
// and pool (logits in sc.logits when asked); the weights it read count for
// the round.
gb_status draft_forward(gb_session *s, const int32_t *tokens, uint32_t m, bool want_logits) {
  PassCost cost;
  GB_TRY(forward(s->spec.wdraft, &s->spec.dkv, s->sc, s->ex, tokens, m, s->spec.dpos, PassKind::kExact, want_logits, &cost));
  s->spec.dpos += m;
  s->spec.round_bytes += cost.bytes;
  s->spec.round_weights += cost.weights;
  return GB_OK;
}

// The draft length minimizing expected weight bytes per token when each
// draft is accepted with probability a (independently): k draft passes of
// D bytes and one verify pass of V bytes yield 1 + a(1 - a^k)/(1 - a)
// tokens. k = 0 (the verifier alone: V bytes, one token) wins when drafts
// are accepted too rarely to pay for themselves.
// V[k]: the cost of a verify pass with k drafts.
uint32_t best_k(double a, uint32_t kmax, double D, const double *V) {
  uint32_t best = 0;
  double best_cost = V[0];
  for (uint32_t k = 1; k <= kmax; k++) {
    const double tokens = a >= 1.0 ? 1.0 + k : 1.0 + a * (1.0 - pow(a, (double)k)) / (1.0 - a);
    const double cost = (k * D + V[k]) / tokens;
    if (cost < best_cost) {
      best_cost = cost;
      best = k;
    }
  }
  return best;
}

// A pass's time (t0..t1, ns) into a running estimate: a faster pass
// replaces it, a slower one moves it a fifth of the way. Interference from
// other work only ever adds time, and the first pass of a length can be
// several times slower than the rest (pages and cache lines touched for the
// first time: 260 ms against 58 for the second verify pass of one draft on
// the 1.1B model), so a plain average would keep that length looking too
// expensive to try again. Clocks that read 0 (ports without one) leave it
// unmeasured.
void ema_time(double *avg, uint64_t t0, uint64_t t1) {
  if (t1 <= t0) return;
  const double t = (double)(t1 - t0);
  *avg = *avg > 0.0 && t > *avg ? 0.8 * *avg + 0.2 * t : t;
}

// While the adaptive rule says k = 0, every kProbeRounds-th round still
// drafts one token, so that the acceptance estimate can recover when the
// text becomes easier for the draft.
constexpr uint32_t kProbeRounds = 16;

// The acceptance estimate after a reset: kPriorAccepted of kPriorJudged
// drafts (3/4, the weight of two judged drafts), decayed with the real
// counts, so it fades within a few rounds. Starting from no counts, the
// first judged draft alone set the estimate: a rejection there (one run in
// seven at 85 % acceptance) read as a = 0, k = 0, and the session decoded
// on the verifier alone until the next probe, 16 rounds later. With the
// prior, one early rejection gives a = 0.48 and two in a row 0.35 (still
// drafting where a draft pass costs a third of a verify pass); a draft
// that is really poor reaches k = 0 after three.
constexpr double kPriorAccepted = 1.5, kPriorJudged = 2.0;

// The draft pool catches up with the verifier's tokens hist[dpos..to): in
// batched passes of up to spec.m positions (each weight read once per pass,
// per position bit for bit a single draft step) when the pool takes a
// batch, else one position at a time.
gb_status draft_catch_up(gb_session *s, uint32_t to) {
  while (s->spec.dpos < to) {
    uint32_t m = to - s->spec.dpos;
    if (m > s->spec.m) m = s->spec.m;
    if (m > 1 && !kv_batchable(&s->spec.dkv, s->spec.dpos, m)) m = 1;
    GB_TRY(draft_forward(s, s->spec.hist + s->spec.dpos, m, false));
  }
  return GB_OK;
}

gb_status round(gb_session *s) {
  const Meta &c = s->model->meta;
  const uint32_t V = c.vocab_size, pos = s->cur.pos;
  const bool greedy = s->opt.sampler.temperature == 0.0f;
  // Under a grammar every position of the round samples under the mask of
  // the grammar's state after the drafts before it (st[j]: after j drafts;
  // mask row j), the draft as the verifier, so the output is the
  // constrained verifier's. Row 0 first: a state no token continues stops
  // the round before anything runs.
  Constraint &g = s->cons;
  const bool gram = g.on;
  if (gram) {
    g.st[0] = g.m.cur;
    GB_TRY(grammar_mask_first(s));
  }
  s->spec.round_bytes = s->spec.round_weights = 0;
  s->spec.pos0 = pos;
  // 1. The draft length, then (when drafting) catch up and draft.
  // The timed rule (spec_adapt 2) makes the draft lengths, and so a
  // sampled run's random draws, depend on the clock: with deterministic = 1
  // (output independent of the machine), or on a port whose clock reads 0,
  // it counts bytes instead.
  const bool timed = s->opt.spec_adapt == 2 && !s->opt.deterministic && gb_port_now_ns() != 0;
  uint32_t k = s->spec.k;
  if (timed && s->spec.trials <= 0.0) k = 1;  // no estimate (a restored state's zero counts): start short
  if (s->opt.spec_adapt && s->spec.trials > 0.0) {
    const gb_model *m = s->model;
    const double db = (double)m->gear_section[s->spec.draft].size, vb = (double)m->gear_section[s->spec.verify].size;
    double Vk[GB_GEMVM_MAX_M];
    double D = db;
    uint32_t kmax = k;
    for (uint32_t j = 0; j <= k; j++) Vk[j] = vb > 0.0 ? vb : 1.0;  // bytes: the same for every k
    if (timed) {
      // Measured times. A verify pass's time is not linear in its
      // positions: one position (a decode step) and two both read the
      // weights once and cost about the same; from three on, the f16 tier's
      // arithmetic adds ~15-30 % of a decode step per position (a
      // DRAM-bound 1.1B model: 57-58 ms for one or two positions, 70-74 for
      // three, 90-93 for four, 118-123 for six). So the rule uses the lengths it has
      // measured and looks one length past the longest of them, guessing
      // that one from the last step's growth (none when only the decode
      // step is below it, so that two positions are tried). It starts at
      // one draft, so the measured lengths are 1..longest with no gaps. The
      // decode step, until measured, is one draft pass scaled by the bytes;
      // until a single-position draft pass is timed (the first round's
      // draft also runs the prompt), bytes stand in for every time.
      uint32_t longest = 0;
      while (longest < k && s->spec.t_verify[longest + 1] > 0.0) longest++;
      kmax = longest + 1 < k ? longest + 1 : k;
      if (s->spec.t_draft > 0.0) {
        D = s->spec.t_draft;
        Vk[0] = s->spec.t_verify[0] > 0.0 ? s->spec.t_verify[0] : D * (vb / (db > 0.0 ? db : 1.0));
        for (uint32_t j = 1; j <= longest; j++) Vk[j] = s->spec.t_verify[j];
        if (longest < k) {
          const double step = longest >= 2 ? Vk[longest] - Vk[longest - 1] : 0.0;
          Vk[longest + 1] = Vk[longest] + (step > 0.0 ? step : 0.0);
        }
      }
    }
    k = best_k(s->spec.succ / s->spec.trials, kmax, D, Vk);
    if (k > 0 || ++s->spec.idle >= kProbeRounds) {
      k = k > 0 ? k : 1;
      s->spec.idle = 0;
    }
  }
  if (pos + k + 1 > s->opt.n_ctx) k = s->opt.n_ctx - pos - 1;  // the verify pass must fit the context
  if (kv_room(&s->kv) < k + 1) k = kv_room(&s->kv) > 0 ? kv_room(&s->kv) - 1 : 0;
  // The draft lags behind the verifier by the tokens it has not run: the
  // prompt and fed tokens, rounds without drafts, and one after a round
  // that kept all its drafts (the last draft was sampled, never run). Up
  // to spec.m - 1 of those ride along with the pending token in the first
  // draft pass: one read of the draft tier instead of two (a
  // multi-position pass, per position bit for bit single steps), the rest
  // goes in batched catch-up passes first. Every path keeps dpos <= pos;
  // should one not, the draft drops its extra positions here.
  if (s->spec.dpos > pos) {
    kv_truncate(&s->spec.dkv, pos);
    s->spec.dpos = pos;
  }
  if (k > 0) {
    const uint32_t lag = pos - s->spec.dpos, carry = lag < s->spec.m - 1 ? lag : s->spec.m - 1;
    GB_TRY(draft_catch_up(s, pos - carry));
    if (carry > 0 && !kv_batchable(&s->spec.dkv, pos - carry, carry + 1)) GB_TRY(draft_catch_up(s, pos));
  }
  s->spec.tok[0] = s->cur.pending;
  s->spec.hist[pos] = s->cur.pending;  // the first draft pass reads hist[dpos..pos]
  uint32_t n = 0;  // drafted
  for (int32_t cur = s->cur.pending; n < k;) {
    const uint32_t mp = n == 0 ? pos + 1 - s->spec.dpos : 1;
    const uint64_t t0 = timed ? gb_port_now_ns() : 0;
    GB_TRY(draft_forward(s, n == 0 ? s->spec.hist + s->spec.dpos : &cur, mp, true));
    if (timed && mp == 1) ema_time(&s->spec.t_draft, t0, gb_port_now_ns());
    float *dl = s->sc.logits + (size_t)(mp - 1) * V;  // the draft's logits of its last position
    nan_guard(dl, V);
    if (s->opt.spec_stop_entropy > 0.0f && entropy_bits(dl, V) > s->opt.spec_stop_entropy) break;
    if (gram) {
      if (n > 0) {
        const gb_status ms = constraint_mask(&g, g.st[n], V, n);
        if (ms == GB_ERR_GRAMMAR_NO_TOKEN) break;  // a dead end: the verifier meets it at row n
        GB_TRY(ms);
      }
      constraint_apply(g, dl, V, n);
    }
    if (greedy) {
      cur = sampler_sample(&s->sampler, dl);
    } else {
      float *q = s->spec.draft_p + (size_t)n * V;
      sampler_probs(&s->sampler, dl, q);
      cur = sampler_draw(&s->sampler, q);
    }
    s->spec.tok[++n] = cur;
    if (gram) GB_TRY(constraint_after(&g, g.st[n - 1], cur, &g.st[n]));
  }
  uint32_t masked = n;  // mask rows 0..masked-1 hold the drafts' masks (row 0 at least)
  if (masked == 0) masked = 1;
  // 2. Verify the pending token and the n drafts in one pass (no drafts:
  // the verifier's ordinary decode step, the same logits bit for bit).
  PassCost cost;
  const uint64_t t0 = timed ? gb_port_now_ns() : 0;
  GB_TRY(forward(s->gears.w, &s->kv, s->sc, s->ex, s->spec.tok, n + 1, pos, PassKind::kExact, true, &cost));
  if (timed) ema_time(&s->spec.t_verify[n], t0, gb_port_now_ns());
  for (uint32_t i = 0; i <= n; i++) nan_guard(s->sc.logits + (size_t)i * V, V);
  s->spec.round_bytes += cost.bytes;
  s->spec.round_weights += cost.weights;
  // 3. Accept the longest agreeing prefix, then the verifier's own token.
  uint32_t a = 0;
  int32_t bonus = -1;
  for (; a < n; a++) {
    float *L = s->sc.logits + (size_t)a * V;
    if (gram) constraint_apply(g, L, V, a);
    const int32_t d = s->spec.tok[a + 1];
    if (greedy) {
      const int32_t best = sampler_sample(&s->sampler, L);
      if (best != d) {
        bonus = best;
        break;
      }
      continue;
    }
    sampler_probs(&s->sampler, L, s->spec.p);
    const float *q = s->spec.draft_p + (size_t)a * V;
    const float ratio = q[d] > 0.0f ? s->spec.p[d] / q[d] : 0.0f;
    if (sampler_uniform(&s->sampler) < ratio) continue;
    for (uint32_t j = 0; j < V; j++) s->spec.p[j] = s->spec.p[j] > q[j] ? s->spec.p[j] - q[j] : 0.0f;
    bonus = sampler_draw(&s->sampler, s->spec.p);
    break;
  }
  if (bonus < 0 && gram) {
    // Every draft kept: row n's mask (unless the drafting found it).
    gb_status ms = masked > n ? GB_OK : constraint_mask(&g, g.st[n], V, n);
    if (ms == GB_ERR_GRAMMAR_NO_TOKEN) {
      // A dead end after the last draft: hand the drafts out and leave the
      // last one pending, as decoding one token at a time would; the next
      // step then reports it before running anything.
      matcher_rollback(&g.m);
      kv_truncate(&s->kv, pos + n);
      s->cur.pos = pos + n;
      if (s->spec.dpos > s->cur.pos) {
        kv_truncate(&s->spec.dkv, s->cur.pos);
        s->spec.dpos = s->cur.pos;
      }
      for (uint32_t i = 0; i < n; i++) s->spec.hist[pos + i] = s->spec.tok[i];
      for (uint32_t i = 0; i < n; i++) s->spec.out[i] = s->spec.tok[i + 1];
      s->spec.out_n = n;
      s->spec.out_i = 0;
      s->cur.pending = s->spec.tok[n];
      s->spec.drafted = s->spec.accepted = n;
      return GB_OK;
    }
    GB_TRY(ms);
    constraint_apply(g, s->sc.logits + (size_t)n * V, V, n);
  }
  if (bonus < 0) {
    const float *L = s->sc.logits + (size_t)n * V;
    if (greedy) {
      bonus = sampler_sample(&s->sampler, L);
    } else {
      sampler_probs(&s->sampler, L, s->spec.p);
      bonus = sampler_draw(&s->sampler, s->spec.p);
    }
  }
  if (gram) matcher_rollback(&g.m);  // the round's states; handed-out tokens advance the grammar
  // 4. Keep positions pos..pos+a (the pending token and the a kept drafts).
  kv_truncate(&s->kv, pos + a + 1);
  s->cur.pos = pos + a + 1;
  if (s->spec.dpos > s->cur.pos) {
    kv_truncate(&s->spec.dkv, s->cur.pos);
    s->spec.dpos = s->cur.pos;
  }
  for (uint32_t i = 0; i <= a; i++) s->spec.hist[pos + i] = s->spec.tok[i];
  for (uint32_t i = 0; i < a; i++) s->spec.out[i] = s->spec.tok[i + 1];
  s->spec.out[a] = bonus;
  s->spec.out_n = a + 1;
  s->spec.out_i = 0;
  s->cur.pending = bonus;
  s->spec.drafted = n;
  s->spec.accepted = a;
  // Acceptance so far (decayed): a successes in a + [a < n] trials.
  s->spec.succ = 0.9 * s->spec.succ + a;
  s->spec.trials = 0.9 * s->spec.trials + a + (a < n ? 1 : 0);
  return GB_OK;
}

}  // namespace

void spec_carve(Spec *sp, Arena &a, const Meta &c, const SessionConfig &o, const KvPlan &kvp) {
  sp->on = o.gear == GB_GEAR_SPEC;
  sp->k = o.spec_k;
  sp->verify = o.spec_verify_gear;
  sp->draft = o.spec_draft_gear;
  sp->hist = nullptr;
  sp->m = 0;
  if (!sp->on) return;
  const uint32_t V = c.vocab_size, S = o.spec_k + 1;
  kv_carve(&sp->dkv, a, c, o, kvp);
  sp->hist = a.array<int32_t>(o.n_ctx);
  sp->m = S;
  sp->draft_p = a.array<float>((size_t)o.spec_k * V);
  sp->p = a.array<float>(V);
  sp->tok = a.array<int32_t>(S);
  sp->out = a.array<int32_t>(S);
}

gb_status spec_next(gb_session *s, int32_t *token, const float **logits, bool *ran_round) {
  *ran_round = false;
  if (s->spec.out_i >= s->spec.out_n) {
    GB_TRY(round(s));
    *ran_round = true;
  }
  const uint32_t i = s->spec.out_i++;
  *token = s->spec.out[i];
  *logits = s->sc.logits + (size_t)i * s->model->meta.vocab_size;
  return GB_OK;
}

void spec_settle(gb_session *s) {
  if (!s->spec.on || s->spec.out_i >= s->spec.out_n) return;
  const uint32_t keep = s->spec.pos0 + s->spec.out_i;  // positions of the tokens before the last handed out
  kv_truncate(&s->kv, keep);
  s->cur.pos = keep;
  s->cur.pending = s->spec.out_i ? s->spec.out[s->spec.out_i - 1] : s->spec.tok[0];
  if (s->spec.dpos > keep) {
    kv_truncate(&s->spec.dkv, keep);
    s->spec.dpos = keep;
  }
  s->spec.out_n = s->spec.out_i = 0;
}

void spec_reset(gb_session *s) {
  if (!s->spec.on) return;
  kv_reset(&s->spec.dkv);
  s->spec.dpos = 0;
  s->spec.out_n = s->spec.out_i = 0;
  s->spec.drafted = s->spec.accepted = 0;
  s->spec.round_bytes = s->spec.round_weights = 0;
  s->spec.succ = kPriorAccepted;
  s->spec.trials = kPriorJudged;
  s->spec.idle = 0;
}

}  // namespace gb
