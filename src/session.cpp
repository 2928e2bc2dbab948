// session.cpp — session options, the arena layout, and the decode API.
// "Estimate, then place": carve() runs once counting and once placing, so
// gb_session_mem_size() is exactly what gb_session_create() uses.
#include "session.h"

#include <math.h>
#include <string.h>

#include <new>

#include "format.h"
#include "gearbx_port.h"
#include "gears.h"
#include "grammar/grammar_obj.h"

namespace gb {
namespace {

gb_status read_options(const gb_model *m, const gb_session_options *in, SessionConfig *o, Logger *log, KvPlan *kv) {
  gb_session_options so;
  gb_session_options_init(&so);
  gb_session_experimental x;
  gb_session_experimental_init(&x);
  *log = m->log;
  if (in) {
    // Fields past a caller's struct_size (an older layout) keep their
    // defaults.
    if (in->struct_size < offsetof(gb_session_options, log) || in->struct_size > sizeof so)
      return fail(*log, GB_ERR_STRUCT_SIZE, "session options: struct_size %u not supported (%u to %u)", in->struct_size,
                  (uint32_t)offsetof(gb_session_options, log), (uint32_t)sizeof so);
    memcpy(&so, in, in->struct_size);
    so.struct_size = sizeof so;
  }
  if (so.experimental) {
    const uint32_t xs = so.experimental->struct_size;
    if (xs < offsetof(gb_session_experimental, managed) || xs > sizeof x)
      return fail(*log, GB_ERR_STRUCT_SIZE, "session options: experimental struct_size %u not supported (%u to %u)", xs,
                  (uint32_t)offsetof(gb_session_experimental, managed), (uint32_t)sizeof x);
    memcpy(&x, so.experimental, xs);
    x.struct_size = sizeof x;
  }
  session_config(so, x, o);
  if (o->log) {
    log->fn = o->log;
    log->user = o->log_user;
  }
  const Meta &c = m->meta;
  if (o->n_ctx == 0) o->n_ctx = c.seq_len;
  GB_RETURN_IF(o->n_ctx > (1u << 22), *log, GB_ERR_INVALID_ARGUMENT, "session options: n_ctx %u too large", o->n_ctx);
  // GB_GEAR_DEFAULT runs the file's default tier (its source's own
  // quantization for a converted quantized GGUF).
  if (raw_enum(o->gear) == GB_GEAR_DEFAULT) o->gear = (gb_gear)m->meta.default_gear;
  const bool fixed = (uint32_t)raw_enum(o->gear) < GB_GEAR_COUNT;
  const bool spec = raw_enum(o->gear) == GB_GEAR_SPEC;
  GB_RETURN_IF(!fixed && !spec && raw_enum(o->gear) != GB_GEAR_AUTO, *log, GB_ERR_INVALID_ARGUMENT,
               "session options: gear %d unknown", raw_enum(o->gear));
  if (spec) {
    GB_RETURN_IF(o->spec_k < 1 || o->spec_k + 1 > GB_GEMVM_MAX_M, *log, GB_ERR_INVALID_ARGUMENT,
                 "session options: spec_k %u must be in 1..%u", o->spec_k, GB_GEMVM_MAX_M - 1);
    const int32_t vg = raw_enum(o->spec_verify_gear), dg = raw_enum(o->spec_draft_gear);
    GB_RETURN_IF(vg < GB_GEAR_MID || vg > GB_GEAR_F32, *log, GB_ERR_INVALID_ARGUMENT,
                 "session options: spec_verify_gear %d must be MID, HIGH or F32", vg);
    GB_RETURN_IF(dg < GB_GEAR_LOW || dg >= vg, *log, GB_ERR_INVALID_ARGUMENT,
                 "session options: spec_draft_gear %d must be a tier below spec_verify_gear %d", dg, vg);
    GB_RETURN_IF(!(o->spec_stop_entropy >= 0.0f) || isinf(o->spec_stop_entropy), *log, GB_ERR_INVALID_ARGUMENT,
                 "session options: spec_stop_entropy must be a finite number >= 0");
    GB_RETURN_IF(o->spec_adapt > 2, *log, GB_ERR_INVALID_ARGUMENT, "session options: spec_adapt must be 0, 1 or 2");
    GB_RETURN_IF(o->kv.evict, *log, GB_ERR_INVALID_ARGUMENT,
                 "session options: the spec gear cannot roll back an evicting KV pool (kv.evict)");
  }
  GB_RETURN_IF((uint32_t)raw_enum(o->managed) > GB_MANAGED_ATTENTION, *log, GB_ERR_INVALID_ARGUMENT,
               "session options: managed set %d unknown", raw_enum(o->managed));
  GB_RETURN_IF((uint32_t)raw_enum(o->base_gear) >= GB_GEAR_COUNT, *log, GB_ERR_INVALID_ARGUMENT,
               "session options: base_gear %d invalid", raw_enum(o->base_gear));
  GB_RETURN_IF(o->deterministic > 1, *log, GB_ERR_INVALID_ARGUMENT, "session options: deterministic must be 0 or 1");
  GB_RETURN_IF(o->n_threads > 256, *log, GB_ERR_INVALID_ARGUMENT, "session options: n_threads %u > 256", o->n_threads);
  GB_RETURN_IF(o->prefill_batch == 0 || o->prefill_batch > 4096, *log, GB_ERR_INVALID_ARGUMENT,
               "session options: prefill_batch %u must be in 1..4096 (1 = token by token)", o->prefill_batch);
  GB_RETURN_IF(o->prefill_panel_rows == 0 || o->prefill_panel_rows > 65536, *log, GB_ERR_INVALID_ARGUMENT,
               "session options: prefill_panel_rows %u must be in 1..65536", o->prefill_panel_rows);
  GB_RETURN_IF(o->prefill_blas > 3, *log, GB_ERR_INVALID_ARGUMENT, "session options: prefill_blas %u must be 0, 1, 2 or 3",
               o->prefill_blas);
  GB_RETURN_IF(o->prefill_blas == 2 && o->deterministic, *log, GB_ERR_INVALID_ARGUMENT,
               "session options: prefill_blas 2 (OpenBLAS required) conflicts with deterministic 1 (portable kernels only)");
  GB_RETURN_IF(o->prefill_blas == 2 && !gb_gemm_blas(), *log, GB_ERR_UNAVAILABLE,
               "session options: prefill_blas 2 needs OpenBLAS, and this library was built without it (GEARBX_WITH_OPENBLAS)");
  GB_TRY(sampler_validate(o->sampler, *log));
  GB_TRY(control_validate(*o, m->meta.vocab_size, *log));
  GB_TRY(constraint_validate(*o, *log));
  GB_TRY(monitor_validate(o->monitor, *log));
  // Every tier the session may enter must be in the file (or built lazily).
  // The base tier serves the unmanaged matrices, so only a partial managed
  // set needs it.
  const uint32_t need = (o->managed == GB_MANAGED_ALL ? 0u : 1u << o->base_gear) | policy_tiers(*o);
  GB_RETURN_IF(o->lazy_tiers > 1, *log, GB_ERR_INVALID_ARGUMENT, "session options: lazy_tiers must be 0 or 1");
  GB_RETURN_IF(o->measure_residency > 1, *log, GB_ERR_INVALID_ARGUMENT, "session options: measure_residency must be 0 or 1");
  GB_RETURN_IF(o->release_steps > 65536, *log, GB_ERR_INVALID_ARGUMENT, "session options: release_steps %u > 65536",
               o->release_steps);
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++)
    GB_RETURN_IF((need >> g & 1) && !(m->gears >> g & 1) && !lazy_tier(m, *o, g), *log, GB_ERR_UNAVAILABLE,
                 "session options: the %s tier is not in the model file%s", gb_gear_name((gb_gear)g),
                 m->meta.quantized_source
                     ? ": the file was converted from already quantized weights and holds only tiers it can give "
                       "without rounding them again (gearbx info lists them; convert --tiers derives others)"
                 : g <= GB_GEAR_MID && !o->lazy_tiers ? " (lazy_tiers is off)"
                                                      : "");
  GB_TRY(kv_plan(c, *o, *log, kv));
  GB_RETURN_IF(spec && (kv->policy >= GB_KV_SEED), *log, GB_ERR_INVALID_ARGUMENT,
               "session options: the spec gear needs a single-level KV policy (f32, f16, uniformN) to roll drafts back");
  return GB_OK;
}

bool prefill_batched(const SessionConfig &o) { return o.prefill_batch > 1 && o.n_ctx > 1; }

// The arena layout of a session (counting when a is counting).
gb_session *carve(Arena &a, const gb_model *m, const SessionConfig &o, const KvPlan &kvp) {
  const Meta &c = m->meta;
  const uint32_t qd = c.q_dim();
  gb_session *s = a.array<gb_session>(1);
  gb_session tmp;  // receives pointers while counting
  gb_session *t = s ? new (s) gb_session() : &tmp;
  float *rope_freq = a.array<float>(c.rope_dim / 2 + 1);
  t->ex.rope_freq = rope_freq;
  t->ex.rope_freq_swa = c.swa_window ? a.array<float>(c.swa_rope_dim() / 2 + 1) : nullptr;
  kv_carve(&t->kv, a, c, o, kvp);
  const bool calibrating = o.gear == GB_GEAR_AUTO && o.monitor.calibrate;
  t->pf.calib = calibrating ? a.array<float>(o.n_ctx) : nullptr;
  const bool any_lazy = lazy_carve(&t->gears, a, m, o);
  // One scratch for every pass: the prefill chunk, the verify pass, or one
  // position; logits rows for calibrating prefill chunks and verify passes.
  // Policies that move tokens between precisions decide token by token, so
  // their prefill never batches (kv_batchable): no chunk scratch for them.
  const bool batched = prefill_batched(o) && !kv_policy_multi_level(kvp.policy);
  const uint32_t M = !batched ? 1 : o.prefill_batch < o.n_ctx ? o.prefill_batch : o.n_ctx;
  const uint32_t S = o.gear == GB_GEAR_SPEC ? o.spec_k + 1 : 1;
  ScratchShape shape;
  shape.m_max = M > S ? M : S;
  shape.logit_rows = calibrating && M > S ? M : S;
  if (M > 1 && !matmul_gemvm_only(o)) {
    shape.panel_slots = o.n_threads > 1 ? o.n_threads : 1;
    shape.panel_rows = o.prefill_panel_rows;
  }
  // Positions of a pass attend at once, one scratch set per thread beyond
  // the first (none when the pool gathers importance: forward.cpp).
  if (shape.m_max > 1 && o.n_threads > 1 && !kvp.importance) {
    constexpr uint32_t kMaxAttnSets = 7;  // attention is a few % of a pass: more threads share these
    shape.attn_sets = o.n_threads - 1 < kMaxAttnSets ? o.n_threads - 1 : kMaxAttnSets;
    shape.attn_cap = kv_attn_cap(kvp);
  }
  scratch_carve(&t->sc, a, c, shape);
  t->pf.batch = M;
  t->pf.tok = M > 1 ? a.array<int32_t>(M) : nullptr;
  spec_carve(&t->spec, a, c, o, kvp);
  const uint32_t max_cols = c.hidden_dim > qd ? (c.hidden_dim > c.dim ? c.hidden_dim : c.dim) : (qd > c.dim ? qd : c.dim);
  t->gears.lazy_row = any_lazy ? a.array<float>(max_cols) : nullptr;
  void *pmem = a.alloc(gb_port_pool_mem_size(o.n_threads), 64);
  void *smem = a.alloc(sampler_mem_size(c.vocab_size), 8);
  void *mmem = a.alloc(monitor_mem_size(o.monitor), 8);
  control_carve(&t->ctl, a, o, c.vocab_size, s != nullptr);
  constraint_carve(&t->cons, a, m, o);
  if (!s) return nullptr;
  s->ex.pool = gb_port_pool_start(pmem, o.n_threads);
  sampler_init(&s->sampler, o.sampler, c.vocab_size, smem);
  monitor_init(&s->monitor, o.monitor, c.vocab_size, mmem);
  return s;
}

gb_status check_budget(const gb_model *m, const SessionConfig &o, size_t arena, uint64_t kv_pool_bytes, const Logger &log) {
  if (o.mem_budget == 0) return GB_OK;
  // Resident weights: the common section plus every tier the session may hold at once.
  uint64_t weights = 0;
  for (uint32_t i = 0; i < m->n_sections; i++)
    if (m->sections[i].kind == kSecCommon) weights += m->sections[i].size;
  weights += resident_tier_bytes(m, o);
  GB_RETURN_IF(arena > o.mem_budget, log, GB_ERR_BUDGET_EXCEEDED,
               "session does not fit the budget: the arena alone needs %zu bytes of %llu (n_ctx %u: KV pool %llu bytes)", arena,
               (unsigned long long)o.mem_budget, o.n_ctx, (unsigned long long)kv_pool_bytes);
  GB_RETURN_IF(arena + weights > o.mem_budget, log, GB_ERR_BUDGET_EXCEEDED,
               "session does not fit the budget: arena %zu + resident weight tiers %llu bytes > %llu", arena,
               (unsigned long long)weights, (unsigned long long)o.mem_budget);
  return GB_OK;
}

struct StepResult {
  gb_gear gear;                                                    // tier used by the pass
  uint32_t tokens_in_gear;                                         // passes in that tier, this one included
  float H, Hs;                                                     // entropy and its rolling mean
  const float *logits;                                             // (vocab) the distribution the token came from
  uint64_t bytes, weights;                                         // weights read for it (0 when handed out of a spec round)
  uint32_t spec_drafted = 0, spec_accepted = 0, spec_round = 0;    // GB_GEAR_SPEC
  uint32_t end = GB_STEP_END_NONE, stop_index = 0, stop_trim = 0;  // generation control
  uint64_t grammar_ns = 0;                                         // masks found by the call
  uint32_t grammar_allowed = 0;
};

// Why generation should end at token `tok` handed out after `prev`: an
// end-of-generation token, or a stop string completed by its text.
void end_of(gb_session *s, int32_t prev, int32_t tok, StepResult *sr) {
  const gb_tokenizer *tk = &s->model->tokenizer;
  int eog = 0;
  if (gb_tokenizer_is_eog(tk, tok, &eog) == GB_OK && eog) {
    sr->end = GB_STEP_END_EOG;
    return;
  }
  if (!s->ctl.n_stop) return;
  const char *p;
  size_t n;
  if (gb_tokenizer_token_text(tk, prev, tok, &p, &n) != GB_OK) return;
  if (control_stop(&s->ctl, p, n, &sr->stop_index, &sr->stop_trim)) sr->end = GB_STEP_END_STOP;
}

// gb_step_info's first layout ended at step_ns; fields are only appended.
constexpr uint32_t kStepInfoMinSize = offsetof(gb_step_info, predicted_gear);

// The struct_size rule of the other caller structs (options, gb_model_info):
// from the first published layout up to this header's. Checked before the
// step changes anything.
gb_status check_info(const gb_session *s, const gb_step_info *info, const char *fn) {
  if (!info || (info->struct_size >= kStepInfoMinSize && info->struct_size <= sizeof(gb_step_info))) return GB_OK;
  return fail(s->log, GB_ERR_STRUCT_SIZE, "%s: gb_step_info struct_size %u not supported (%u to %u)", fn, info->struct_size,
              kStepInfoMinSize, (uint32_t)sizeof(gb_step_info));
}

void fill_info(gb_session *s, gb_step_info *info, int32_t token, uint32_t pos, const StepResult &sr, uint64_t t0) {
  if (!info) return;
  const uint32_t size = info->struct_size;  // in range: check_info ran first
  gb_step_info r;
  memset(&r, 0, sizeof r);
  r.struct_size = size;
  r.token = token;
  r.pos = pos;
  r.gear = sr.gear;
  r.next_gear = s->gears.gear;
  r.shifted = s->gears.gear != sr.gear;
  r.tokens_in_gear = sr.tokens_in_gear;
  r.entropy = sr.H;
  r.entropy_smoothed = sr.Hs;
  r.logits = sr.logits;
  r.n_vocab = s->model->meta.vocab_size;
  r.weight_bytes_read = sr.bytes;
  r.weights_read = sr.weights;
  r.spec_drafted = sr.spec_drafted;
  r.spec_accepted = sr.spec_accepted;
  r.spec_round = sr.spec_round;
  r.end = sr.end;
  r.stop_index = sr.stop_index;
  r.stop_trim = sr.stop_trim;
  r.grammar_ns = sr.grammar_ns;
  r.grammar_allowed = sr.grammar_allowed;
  r.predicted_gear = s->monitor.predicted;
  r.catastrophic = s->monitor.catastrophic ? 1u : 0u;
  r.resident_weight_bytes = s->gears.resident_bytes;
  r.theta_low = s->monitor.th_low;
  r.theta_high = s->monitor.th_high;
  KvStats ks;
  kv_stats(&s->kv, &ks);
  r.kv_bytes_used = ks.used_bytes;
  r.kv_pool_bytes = ks.pool_bytes;
  r.kv_tokens = ks.tokens;
  for (int i = 0; i < 6; i++) r.kv_tokens_at_bits[i] = ks.at_bits[i];
  r.kv_bits_per_element = (float)ks.bits_per_element;
  r.kv_reallocations = s->kv.reallocs;
  r.kv_requantized = s->kv.requant;
  r.kv_evicted = s->kv.evicted;
  r.step_ns = gb_port_now_ns() - t0;
  memcpy(info, &r, size);
}

}  // namespace

// The mask of the grammar's committed state, before a step runs anything.
gb_status grammar_mask_first(gb_session *s) {
  const gb_status st = constraint_mask(&s->cons, s->cons.m.cur, s->model->meta.vocab_size, 0);
  GB_RETURN_IF(st == GB_ERR_GRAMMAR_NO_TOKEN, s->log, st,
               "gb_decode_step: no token of the vocabulary can continue the grammar here (nothing ran)");
  return st;
}

namespace {

// Run `token` with logits, then the NaN guard, the entropy and the monitor.
gb_status step(gb_session *s, int32_t token, StepResult *out) {
  StepResult &r = *out;
  r.gear = s->gears.gear;
  r.tokens_in_gear = s->monitor.tokens_in_gear + 1;
  PassCost cost;
  GB_TRY(forward(s->gears.w, &s->kv, s->sc, s->ex, &token, 1, s->cur.pos, PassKind::kExact, true, &cost));
  s->cur.pos++;
  control_push(&s->ctl, token);
  const uint32_t V = s->model->meta.vocab_size;
  float *logits = s->sc.logits;
  nan_guard(logits, V);
  r.logits = logits;
  r.bytes = cost.bytes;
  r.weights = cost.weights;
  r.H = entropy_bits(logits, V);
  gears_after_step(s, monitor_update(&s->monitor, r.H, &r.Hs));
  return GB_OK;
}

// A decode step of the speculative gear: the next token of the current
// round, or a new round. The info reports the verifier's distribution for
// the token, the round's counts, and its weight bytes on the call that ran it.
gb_status spec_step(gb_session *s, int32_t *token_out, gb_step_info *info, uint64_t t0) {
  if (s->spec.out_i >= s->spec.out_n && s->cur.pos >= s->opt.n_ctx)
    return fail(s->log, GB_ERR_CONTEXT_FULL, "gb_decode_step: context of %u tokens is full", s->opt.n_ctx);
  int32_t tok = -1;
  const float *lg = nullptr;
  bool ran = false;
  const uint64_t mask_ns = s->cons.mask_ns;
  GB_TRY(spec_next(s, &tok, &lg, &ran));
  GB_TRY(model_check_file(*s->model, s->log, "gb_decode_step"));  // after the passes: no token read from a changed file
  GB_TRY(constraint_accept(&s->cons, tok));
  if (token_out) *token_out = tok;
  StepResult sr;
  end_of(s, s->cur.last_out, tok, &sr);
  s->cur.last_out = tok;
  if (s->cons.on) {
    sr.grammar_ns = s->cons.mask_ns - mask_ns;
    sr.grammar_allowed = s->cons.n_allowed;
  }
  if (!info) return GB_OK;
  const uint32_t V = s->model->meta.vocab_size;
  sr.gear = s->spec.verify;
  sr.tokens_in_gear = s->spec.out_i;
  sr.H = entropy_bits(lg, V);
  sr.Hs = sr.H;
  sr.logits = lg;
  sr.bytes = ran ? s->spec.round_bytes : 0;
  sr.weights = ran ? s->spec.round_weights : 0;
  sr.spec_drafted = s->spec.drafted;
  sr.spec_accepted = s->spec.accepted;
  sr.spec_round = ran ? 1u : 0u;
  fill_info(s, info, tok, s->spec.pos0 + s->spec.out_i - 1, sr, t0);
  return GB_OK;
}

}  // namespace
}  // namespace gb

using namespace gb;

extern "C" void gb_session_options_init(gb_session_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  // The file's default tier: mid for files made from float weights
  // (measured: it dominates entropy routing in NLL and bits read), a
  // quantized GGUF source's own tier otherwise.
  o->gear = GB_GEAR_DEFAULT;
  o->n_threads = 1;
  o->sampler.temperature = 1.0f;
  o->sampler.top_p = 1.0f;
  o->sampler.seed = 42;
  o->sampler.method = GB_SAMPLE_MULTINOMIAL;
  o->kv.policy = GB_KV_DEFAULT;
  o->kv.k_critical = 4;
  o->kv.window = 16;
  o->spec_k = 15;  // an upper bound: spec_adapt picks each round's length
  o->spec_verify_gear = GB_GEAR_HIGH;
  o->spec_draft_gear = GB_GEAR_LOW;
  o->prefill_batch = 64;
  o->repeat_penalty = 1.0f;
  o->penalty_window = 64;
  o->grammar_max_stacks = 64;
  o->grammar_max_depth = 128;
}

extern "C" void gb_session_experimental_init(gb_session_experimental *x) {
  if (!x) return;
  memset(x, 0, sizeof *x);
  x->struct_size = sizeof *x;
  x->managed = GB_MANAGED_ALL;
  x->base_gear = GB_GEAR_HIGH;
  x->monitor.window = 5;
  x->monitor.theta_low = 1.8f;
  x->monitor.theta_high = 3.5f;
  x->monitor.hysteresis = 0.1f;
  x->monitor.min_gear_duration = 4;
  x->monitor.vocab_ref = 32768;
  x->monitor.initial_gear = GB_GEAR_HIGH;
  x->monitor.lookahead = 2;
  x->monitor.prewarm = 1;
  x->monitor.catastrophic_frac = 0.9f;
  x->monitor.catastrophic_run = 2;
  x->monitor.calibrate = 1;
  x->monitor.calib_min_samples = 5;
  x->monitor.calib_p_low = 0.30f;
  x->monitor.calib_p_high = 0.60f;
  x->monitor.calib_cap_low = 0.06f;
  x->monitor.calib_cap_high = 0.12f;
  x->monitor.calib_min_band = 0.2f;
  x->monitor.classify_high = 4.0f;
  x->monitor.classify_mid = 1.5f;
  x->lazy_tiers = 1;
  x->release_steps = 16;
  x->measure_residency = 0;
  x->kv.gamma = 0.9f;
  x->kv.gamma_head = 0.95f;
  x->kv.recency_T = 512.0f;
  x->kv.alpha = 0.6f;
  x->kv.eps_importance = 1e-6f;
  x->kv.f_base = 16;
  x->kv.rank_threshold = 0.05f;
  x->kv.rank_intervals = 2;
  x->kv.drift_kl = 0.02f;
  x->prefill_panel_rows = 64;
  x->prefill_blas = 1;
  x->spec_stop_entropy = 0.0f;
  x->spec_adapt = 2;  // measured time per token: 1.3-1.6x the high gear where bytes gave 1.1-1.4x
}

namespace gb {

void session_config(const gb_session_options &o, const gb_session_experimental &x, SessionConfig *out) {
  SessionConfig &c = *out;
  memset(&c, 0, sizeof c);
  c.n_ctx = o.n_ctx;
  c.gear = o.gear;
  c.n_threads = o.n_threads;
  c.mem_budget = o.mem_budget;
  c.sampler = o.sampler;
  c.log = o.log;
  c.log_user = o.log_user;
  c.deterministic = o.deterministic;
  c.kv.policy = o.kv.policy;
  c.kv.pool_bytes = o.kv.pool_bytes;
  c.kv.beta = o.kv.beta;
  c.kv.evict = o.kv.evict;
  c.kv.asymmetric = o.kv.asymmetric;
  c.kv.k_critical = o.kv.k_critical;
  c.kv.k_tail = o.kv.k_tail;
  c.kv.window = o.kv.window;
  c.kv.gamma = x.kv.gamma;
  c.kv.gamma_head = x.kv.gamma_head;
  c.kv.recency_T = x.kv.recency_T;
  c.kv.alpha = x.kv.alpha;
  c.kv.eps_importance = x.kv.eps_importance;
  c.kv.f_base = x.kv.f_base;
  c.kv.rank_threshold = x.kv.rank_threshold;
  c.kv.rank_intervals = x.kv.rank_intervals;
  c.kv.drift_kl = x.kv.drift_kl;
  c.prefill_batch = o.prefill_batch;
  c.spec_k = o.spec_k;
  c.spec_verify_gear = o.spec_verify_gear;
  c.spec_draft_gear = o.spec_draft_gear;
  c.repeat_penalty = o.repeat_penalty;
  c.frequency_penalty = o.frequency_penalty;
  c.presence_penalty = o.presence_penalty;
  c.penalty_window = o.penalty_window;
  c.logit_bias = o.logit_bias;
  c.n_logit_bias = o.n_logit_bias;
  c.stop_strings = o.stop_strings;
  c.n_stop_strings = o.n_stop_strings;
  c.abort_callback = o.abort_callback;
  c.abort_user = o.abort_user;
  c.grammar = o.grammar;
  c.grammar_max_bytes = o.grammar_max_bytes;
  c.grammar_max_stacks = o.grammar_max_stacks;
  c.grammar_max_depth = o.grammar_max_depth;
  c.managed = x.managed;
  c.base_gear = x.base_gear;
  c.monitor = x.monitor;
  c.lazy_tiers = x.lazy_tiers;
  c.release_steps = x.release_steps;
  c.measure_residency = x.measure_residency;
  c.prefill_panel_rows = x.prefill_panel_rows;
  c.prefill_blas = x.prefill_blas;
  c.spec_stop_entropy = x.spec_stop_entropy;
  c.spec_adapt = x.spec_adapt;
}

}  // namespace gb

extern "C" gb_status gb_session_mem_size(const gb_model *m, const gb_session_options *opts, size_t *out) {
  GB_TRY(check_handle(m, kHandleModel, "gb_session_mem_size"));
  if (!out) return null_arg(m->log, "gb_session_mem_size", "out");
  SessionConfig o;
  Logger log;
  KvPlan kvp;
  GB_TRY(read_options(m, opts, &o, &log, &kvp));
  Arena counter;
  carve(counter, m, o, kvp);
  GB_TRY(check_budget(m, o, counter.used(), kvp.pool_bytes, log));
  *out = counter.used();
  return GB_OK;
}

extern "C" gb_status gb_kv_pool_size(const gb_model *m, const gb_session_options *opts, uint64_t *pool_bytes,
                                     uint32_t *max_tokens) {
  GB_TRY(check_handle(m, kHandleModel, "gb_kv_pool_size"));
  SessionConfig o;
  Logger log;
  KvPlan kvp;
  GB_TRY(read_options(m, opts, &o, &log, &kvp));
  if (pool_bytes) *pool_bytes = kvp.pool_bytes;
  if (max_tokens) *max_tokens = kvp.max_tokens;
  return GB_OK;
}

extern "C" gb_status gb_session_create(const gb_model *m, const gb_session_options *opts, void *mem, size_t mem_bytes,
                                       gb_session **out) {
  GB_TRY(check_handle(m, kHandleModel, "gb_session_create"));
  if (!out) return null_arg(m->log, "gb_session_create", "out");
  SessionConfig o;
  Logger log;
  KvPlan kvp;
  GB_TRY(read_options(m, opts, &o, &log, &kvp));
  Arena counter;
  carve(counter, m, o, kvp);
  const size_t need = counter.used();
  GB_TRY(check_budget(m, o, need, kvp.pool_bytes, log));
  bool owns = false;
  GB_TRY(obtain_memory(log, "gb_session_create", mem, mem_bytes, need, Arena::kAlign, &mem, &owns));
  if (owns) mem_bytes = need;
  Arena arena(mem, mem_bytes);
  gb_session *s = carve(arena, m, o, kvp);
  s->model = m;
  s->log = log;
  s->opt = o;
  s->mem.base = mem;
  s->mem.bytes = mem_bytes;
  s->mem.owned = owns;
  s->opt.n_ctx = o.n_ctx;
  s->gears.policy = o.gear;
  gb_kernels_select(&s->ex.k, o.deterministic ? (uint32_t)GB_ISA_GENERIC : gb_port_cpu_features());
  s->ex.mm = matmul_plan(s->ex.k, o, s->pf.batch);
  if (matmul_uses_blas(o)) gb_gemm_blas_single_threaded();
  s->ex.log = log;
  const Meta &c = m->meta;
  // Pair i turns by pos * theta^(-2i / rope_dim), divided by the model's
  // frequency factor where it has one (Llama 3.1-style long-context
  // scaling; LongRoPE: the long factors when the session's context exceeds
  // the one the model was trained at, else the short ones).
  const bool long_ctx = m->rope_freqs_long.data && o.n_ctx > c.rope_orig_ctx;
  const float *factor = reinterpret_cast<const float *>(long_ctx ? m->rope_freqs_long.data : m->rope_freqs.data);
  s->ex.rope_scale = c.rope_attn_factor;
  float *rope_freq = const_cast<float *>(s->ex.rope_freq);  // carved in this session's arena
  for (uint32_t i = 0; i < c.rope_dim / 2; i++) {
    rope_freq[i] = 1.0f / powf(c.rope_theta, (float)(2 * i) / (float)c.rope_dim);
    if (factor) rope_freq[i] /= factor[i];
  }
  // Sliding-window layers: their own base, no factors.
  if (c.swa_window) {
    float *swa = const_cast<float *>(s->ex.rope_freq_swa);
    const uint32_t rd = c.swa_rope_dim();  // Gemma 4: the sliding layers rotate their own (smaller) heads
    for (uint32_t i = 0; i < rd / 2; i++) swa[i] = 1.0f / powf(c.rope_theta_swa, (float)(2 * i) / (float)rd);
  }
  const gb_status gs = constraint_init(&s->cons, m, o, &s->log);
  if (gs != GB_OK) {  // the grammar's start outgrew its limits
    gb_port_pool_stop(s->ex.pool);
    s->handle = kHandleDead;
    if (owns) gb_port_aligned_free(mem);
    return gs;
  }
  gb_session_reset(s);
  s->cur.pending = -1;
  s->cur.pos = 0;
  *out = s;
  return GB_OK;
}

extern "C" gb_status gb_session_reset(gb_session *s) {
  GB_TRY(check_handle(s, kHandleSession, "gb_session_reset"));
  s->cur.pos = 0;
  s->cur.pending = -1;
  kv_reset(&s->kv);
  sampler_reset(&s->sampler);
  monitor_reset(&s->monitor);
  if ((unsigned)s->opt.gear < GB_GEAR_COUNT || s->spec.on) {
    s->monitor.gear = s->spec.on ? s->spec.verify : s->opt.gear;
    s->monitor.locked = true;
  }
  spec_reset(s);
  control_reset(&s->ctl);
  GB_TRY(constraint_restart(&s->cons));
  s->cur.last_out = -1;
  s->gears.prewarmed = GB_GEAR_COUNT;
  s->gears.release_pending = 0;
  s->gears.resident_bytes = 0;
  shift_gear(s, s->monitor.gear);
  if (s->spec.on) s->spec.wdraft = tier_weights(s, s->spec.draft);
  release_work(s, true);  // a fresh context starts with only its tiers mapped
  return GB_OK;
}

extern "C" void gb_session_destroy(gb_session *s) {
  if (!s || check_handle(s, kHandleSession, "gb_session_destroy") != GB_OK) return;  // NULL: a no-op; else logged
  s->handle = kHandleDead;  // caller memory stays readable: later calls are refused
  gb_port_pool_stop(s->ex.pool);
  if (s->mem.owned) gb_port_aligned_free(s->mem.base);
}

extern "C" gb_status gb_prefill(gb_session *s, const int32_t *tokens, size_t n) {
  GB_TRY(check_handle(s, kHandleSession, "gb_prefill"));
  if (!tokens) return null_arg(s->log, "gb_prefill", "tokens");
  GB_RETURN_IF(n == 0, s->log, GB_ERR_INVALID_ARGUMENT, "gb_prefill: no tokens");
  const uint32_t V = s->model->meta.vocab_size;
  for (size_t i = 0; i < n; i++)
    GB_RETURN_IF(tokens[i] < 0 || (uint32_t)tokens[i] >= V, s->log, GB_ERR_TOKEN_OUT_OF_RANGE,
                 "gb_prefill: token %d at index %zu outside [0, %u)", tokens[i], i, V);
  GB_TRY(model_check_file(*s->model, s->log, "gb_prefill"));
  spec_settle(s);               // tokens of a round not handed out yet leave the context
  control_clear_text(&s->ctl);  // new input: stop strings look at what follows
  s->cur.last_out = -1;
  // A pending token is run first; then all but the last new token.
  const uint64_t needed = (uint64_t)s->cur.pos + (s->cur.pending >= 0 ? 1 : 0) + (n - 1);
  GB_RETURN_IF(needed >= s->opt.n_ctx, s->log, GB_ERR_CONTEXT_FULL, "gb_prefill: %zu tokens do not fit (position %u of %u)", n,
               s->cur.pos, s->opt.n_ctx);
  const uint64_t adding = needed - s->cur.pos;
  GB_RETURN_IF(!s->opt.kv.evict && adding > kv_room(&s->kv), s->log, GB_ERR_CONTEXT_FULL,
               "gb_prefill: %zu tokens do not fit in the KV pool (room for %u more at minimum precision)", n, kv_room(&s->kv));
  // Calibration: the first prefill of an auto session calibrates the thresholds from
  // the entropies of its positions (computing their logits).
  const bool calib = s->pf.calib && !s->monitor.calibrated;
  size_t nc = 0;
  // The positions to run: the pending token, then all but the last new one;
  // in chunks of up to pf.batch (a single position runs as a decode pass, and
  // so does every position when the KV policy moves tokens between
  // precisions: its decisions are made token by token).
  const int32_t pending = s->cur.pending;
  const size_t total = (pending >= 0 ? 1 : 0) + (n - 1);
  auto token_at = [&](size_t i) { return pending >= 0 ? (i == 0 ? pending : tokens[i - 1]) : tokens[i]; };
  if (s->spec.on)  // the draft catches up from the history at its next round
    for (size_t i = 0; i < total; i++) s->spec.hist[s->cur.pos + i] = token_at(i);
  for (size_t i = 0; i < total;) {
    // The abort callback, between chunks: what ran stays (no token pending
    // then); before the first, nothing has changed.
    if (control_aborted(s->ctl)) {
      s->log.log(GB_LOG_INFO, "gb_prefill: aborted by the callback at position %u", s->cur.pos);
      return GB_ERR_ABORTED;
    }
    if (i > 0) GB_TRY(model_check_file(*s->model, s->log, "gb_prefill"));  // what ran stays, as for an abort
    uint32_t m = (uint32_t)(total - i < s->pf.batch ? total - i : s->pf.batch);
    if (m > 1 && !kv_batchable(&s->kv, s->cur.pos, m)) m = 1;
    int32_t one;
    int32_t *chunk = m == 1 ? &one : s->pf.tok;
    for (uint32_t j = 0; j < m; j++) chunk[j] = token_at(i + j);
    PassCost cost;
    GB_TRY(forward(s->gears.w, &s->kv, s->sc, s->ex, chunk, m, s->cur.pos, PassKind::kPrefill, calib, &cost));
    s->cur.pos += m;
    for (uint32_t j = 0; j < m; j++) control_push(&s->ctl, chunk[j]);
    for (uint32_t j = 0; calib && j < m; j++) {
      float *lg = s->sc.logits + (size_t)j * V;
      nan_guard(lg, V);
      s->pf.calib[nc++] = entropy_bits(lg, V);
    }
    s->cur.pending = -1;  // it ran in the first chunk
    i += m;
  }
  s->cur.pending = tokens[n - 1];
  GB_TRY(model_check_file(*s->model, s->log, "gb_prefill"));  // after the passes: a change they read is reported
  if (calib && monitor_calibrate(&s->monitor, s->pf.calib, nc))
    s->log.log(GB_LOG_INFO, "monitor calibrated from %zu prefill entropies: theta_low %.3f, theta_high %.3f bits", nc,
               (double)s->monitor.th_low, (double)s->monitor.th_high);
  return GB_OK;
}

extern "C" gb_gear gb_classify_prompt(const char *text, size_t len, const gb_monitor_options *opts, float *score) {
  gb_session_experimental d;
  gb_session_experimental_init(&d);
  if (!text && len > 0) Logger().log(GB_LOG_WARN, "gb_classify_prompt: text is NULL with len %zu; scored as empty text", len);
  const float sc = text ? prompt_score(text, len) : 0.0f;
  if (score) *score = sc;
  return prompt_gear(sc, opts ? *opts : d.monitor);
}

extern "C" gb_status gb_session_set_gear(gb_session *s, gb_gear gear) {
  GB_TRY(check_handle(s, kHandleSession, "gb_session_set_gear"));
  GB_RETURN_IF(s->monitor.locked, s->log, GB_ERR_BAD_STATE, "gb_session_set_gear: the session runs a fixed gear");
  GB_RETURN_IF((uint32_t)raw_enum(gear) > GB_GEAR_HIGH, s->log, GB_ERR_INVALID_ARGUMENT, "gb_session_set_gear: gear %d invalid",
               raw_enum(gear));
  s->monitor.gear = gear;
  s->monitor.tokens_in_gear = 0;
  if (gear != s->gears.gear) shift_gear(s, gear);
  return GB_OK;
}

extern "C" gb_status gb_decode_step(gb_session *s, int32_t *token_out, gb_step_info *info) {
  GB_TRY(check_handle(s, kHandleSession, "gb_decode_step"));
  const uint64_t t0 = gb_port_now_ns();
  GB_TRY(check_info(s, info, "gb_decode_step"));
  GB_RETURN_IF(s->cur.pending < 0, s->log, GB_ERR_BAD_STATE, "gb_decode_step: nothing to run; call gb_prefill first");
  if (control_aborted(s->ctl)) {
    s->log.log(GB_LOG_INFO, "gb_decode_step: aborted by the callback at position %u", s->cur.pos);
    return GB_ERR_ABORTED;
  }
  GB_TRY(model_check_file(*s->model, s->log, "gb_decode_step"));
  if (s->spec.on) return spec_step(s, token_out, info, t0);
  if (s->cur.pos >= s->opt.n_ctx)
    return fail(s->log, GB_ERR_CONTEXT_FULL, "gb_decode_step: context of %u tokens is full", s->opt.n_ctx);
  const uint32_t V = s->model->meta.vocab_size;
  // The grammar's mask depends on its state only: found before the pass, so
  // a state no token can continue changes nothing.
  const uint64_t mask_ns = s->cons.mask_ns;
  if (s->cons.on) GB_TRY(grammar_mask_first(s));
  const uint32_t pos = s->cur.pos;
  StepResult sr;
  GB_TRY(step(s, s->cur.pending, &sr));
  GB_TRY(model_check_file(*s->model, s->log, "gb_decode_step"));  // after the pass: no token read from a changed file
  if (s->cons.on) {
    sr.grammar_ns = s->cons.mask_ns - mask_ns;
    sr.grammar_allowed = s->cons.n_allowed;
  }
  control_apply(&s->ctl, s->sc.logits, V);
  if (s->cons.on) constraint_apply(s->cons, s->sc.logits, V);
  const int32_t next = sampler_sample(&s->sampler, s->sc.logits);
  GB_TRY(constraint_accept(&s->cons, next));
  end_of(s, s->cur.pending, next, &sr);
  s->cur.pending = next;
  s->cur.last_out = next;
  if (token_out) *token_out = next;
  fill_info(s, info, next, pos, sr, t0);
  return GB_OK;
}

extern "C" gb_status gb_feed(gb_session *s, int32_t token, gb_step_info *info) {
  GB_TRY(check_handle(s, kHandleSession, "gb_feed"));
  const uint64_t t0 = gb_port_now_ns();
  GB_TRY(check_info(s, info, "gb_feed"));
  GB_RETURN_IF(token < 0 || (uint32_t)token >= s->model->meta.vocab_size, s->log, GB_ERR_TOKEN_OUT_OF_RANGE,
               "gb_feed: token %d out of range", token);
  if (control_aborted(s->ctl)) {
    s->log.log(GB_LOG_INFO, "gb_feed: aborted by the callback at position %u", s->cur.pos);
    return GB_ERR_ABORTED;
  }
  GB_TRY(model_check_file(*s->model, s->log, "gb_feed"));
  spec_settle(s);
  if (s->cur.pos >= s->opt.n_ctx) return fail(s->log, GB_ERR_CONTEXT_FULL, "gb_feed: context of %u tokens is full", s->opt.n_ctx);
  control_clear_text(&s->ctl);
  s->cur.last_out = -1;
  s->cur.pending = -1;
  if (s->spec.on) s->spec.hist[s->cur.pos] = token;
  const uint32_t pos = s->cur.pos;
  StepResult sr;
  GB_TRY(step(s, token, &sr));
  GB_TRY(model_check_file(*s->model, s->log, "gb_feed"));  // after the pass: a change it read is reported
  fill_info(s, info, -1, pos, sr, t0);
  return GB_OK;
}

extern "C" gb_status gb_session_set_grammar(gb_session *s, const gb_grammar *g) {
  GB_TRY(check_handle(s, kHandleSession, "gb_session_set_grammar"));
  GB_RETURN_IF(!s->cons.reserved, s->log, GB_ERR_UNAVAILABLE,
               "gb_session_set_grammar: the session reserved no room for a grammar (gb_session_options.grammar_max_bytes)");
  if (g) GB_TRY(check_handle(g, kHandleGrammar, "gb_session_set_grammar"));
  if (g && g->n_words > s->cons.room)
    return fail(s->log, GB_ERR_BUDGET_EXCEEDED, "gb_session_set_grammar: the grammar's image of %zu bytes is over the room of %zu",
                g->n_words * sizeof(uint32_t), (size_t)s->cons.room * sizeof(uint32_t));
  spec_settle(s);  // a round's tokens not handed out were drawn under the old grammar
  return constraint_set(&s->cons, g ? g->words : nullptr, g ? g->n_words : 0, s->log);
}

extern "C" gb_status gb_session_position(const gb_session *s, uint32_t *pos, uint32_t *n_ctx) {
  GB_TRY(check_handle(s, kHandleSession, "gb_session_position"));
  if (pos) *pos = s->cur.pos;
  if (n_ctx) *n_ctx = s->opt.n_ctx;
  return GB_OK;
}
