// plan.cpp — gb_plan(): the best session configuration that fits a byte
// budget (gearbx.h, "Budget planner"). Candidates are tried in the
// documented preference order through gb_session_mem_size with mem_budget
// set, so the plan fits by the same accounting the session's own budget
// check uses (arena + common section + the tiers the gear enters).
#include <string.h>

#include "gearbx.h"
#include "gears.h"
#include "model.h"
#include "options.h"

namespace {

void quiet_log(void *, gb_log_level, const char *) {}

struct Kv {
  gb_kv_policy policy;
  float beta;
  uint32_t evict;
  bool lossy;
};

// Tiers in preference order: the default, then the lower ones by bits per
// weight (a missing one only where the session could build it lazily).
uint32_t tier_order(const gb_model *m, const gb::SessionConfig &base, gb_gear out[GB_GEAR_COUNT]) {
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);
  static const float kNominal[GB_GEAR_COUNT] = {4.5f, 8.5f, 16.0f, 32.0f};
  float bits[GB_GEAR_COUNT];
  bool usable[GB_GEAR_COUNT];
  gb::SessionConfig probe = base;
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
    const bool present = (mi.gears >> g & 1) != 0;
    probe.gear = (gb_gear)g;
    usable[g] = present || gb::lazy_tier(m, probe, g);
    bits[g] = present ? mi.tier_bits[g] : kNominal[g];
  }
  uint32_t n = 0;
  const uint32_t d = mi.default_gear;
  out[n++] = (gb_gear)d;
  for (;;) {  // the next lower tier by bits
    int best = -1;
    for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
      if (!usable[g] || bits[g] >= bits[out[n - 1]]) continue;
      if (best < 0 || bits[g] > bits[best]) best = (int)g;
    }
    if (best < 0) break;
    out[n++] = (gb_gear)best;
  }
  return n;
}

}  // namespace

extern "C" gb_status gb_plan(const gb_model *m, uint64_t budget, uint32_t n_ctx, gb_session_options *opts, gb_plan_report *report) {
  GB_TRY(gb::check_handle(m, gb::kHandleModel, "gb_plan"));
  if (!opts) return gb::null_arg(m->log, "gb_plan", "opts");
  GB_RETURN_IF(report && (report->struct_size < offsetof(gb_plan_report, candidates_tried) || report->struct_size > sizeof(gb_plan_report)),
               m->log, GB_ERR_STRUCT_SIZE, "gb_plan: gb_plan_report struct_size %u not supported (%u to %u)", report->struct_size,
               (uint32_t)offsetof(gb_plan_report, candidates_tried), (uint32_t)sizeof(gb_plan_report));
  if (opts->struct_size < offsetof(gb_session_options, log) || opts->struct_size > sizeof(gb_session_options)) {
    m->log.log(GB_LOG_ERROR, "gb_plan: session options struct_size %u not supported", opts->struct_size);
    return GB_ERR_STRUCT_SIZE;
  }
  gb::Logger log = m->log;
  if (opts->log) {
    log.fn = opts->log;
    log.user = opts->log_user;
  }
  GB_RETURN_IF(budget == 0, log, GB_ERR_INVALID_ARGUMENT, "gb_plan: a budget of 0 bytes");
  gb_session_options base;
  gb_session_options_init(&base);
  memcpy(&base, opts, opts->struct_size);
  base.struct_size = sizeof base;
  base.n_ctx = n_ctx;
  base.mem_budget = budget;
  base.kv.pool_bytes = 0;
  // The caller's experimental controls, as a session will read them.
  gb_session_experimental x;
  gb_session_experimental_init(&x);
  if (base.experimental && base.experimental->struct_size <= sizeof x) memcpy(&x, base.experimental, base.experimental->struct_size);
  x.struct_size = sizeof x;
  gb_gear tiers[GB_GEAR_COUNT];
  gb::SessionConfig cfg;
  gb::session_config(base, x, &cfg);
  const uint32_t n_tiers = tier_order(m, cfg, tiers);

  static const Kv kLossless[] = {{GB_KV_F32, 0.0f, 0, false}, {GB_KV_F16, 0.0f, 0, false}, {GB_KV_WINDOW, 0.5f, 0, false},
                                 {GB_KV_WINDOW, 0.25f, 0, false}};
  static const Kv kSmall = {GB_KV_WINDOW, 0.2f, 0, true};
  static const Kv kLast[] = {{GB_KV_WINDOW, 0.16f, 0, true}, {GB_KV_WINDOW, 0.14f, 1, true}};
  static const uint32_t kBatch[] = {64, 16, 1};

  uint32_t tried = 0;
  uint64_t smallest = UINT64_MAX, common = 0;
  for (uint32_t i = 0; i < m->n_sections; i++)
    if (m->sections[i].kind == gb::kSecCommon) common += m->sections[i].size;
  gb_session_options best;
  bool found = false;
  Kv kv_best{};
  auto attempt = [&](gb_gear g, const Kv &kv) -> gb_status {
    for (uint32_t b : kBatch) {
      gb_session_options c = base;
      c.gear = g;
      c.kv.policy = kv.policy;
      c.kv.beta = kv.beta;
      c.kv.evict = kv.evict;
      c.prefill_batch = b;
      c.log = quiet_log;
      c.log_user = nullptr;
      tried++;
      size_t bytes = 0;
      gb_session_options unbounded = c;
      unbounded.mem_budget = 0;
      const gb_status st = gb_session_mem_size(m, &c, &bytes);
      if (st == GB_OK) {
        best = c;
        kv_best = kv;
        found = true;
        return GB_OK;
      }
      if (st == GB_ERR_BUDGET_EXCEEDED) {
        size_t need = 0;
        if (gb_session_mem_size(m, &unbounded, &need) == GB_OK) {
          gb::session_config(unbounded, x, &cfg);
          const uint64_t total = need + common + gb::resident_tier_bytes(m, cfg);
          smallest = total < smallest ? total : smallest;
        }
        continue;
      }
      if (st == GB_ERR_UNAVAILABLE) return GB_OK;  // this tier cannot run here: next candidate
      // The caller's other options are wrong: say so with the real log.
      c.log = opts->log;
      c.log_user = opts->log_user;
      return gb_session_mem_size(m, &c, &bytes);
    }
    return GB_OK;
  };
  // The documented order.
  for (const Kv &kv : kLossless) {
    GB_TRY(attempt(tiers[0], kv));
    if (found) break;
  }
  if (!found) GB_TRY(attempt(tiers[0], kSmall));
  for (uint32_t t = 1; t < n_tiers && !found; t++) {
    for (const Kv &kv : kLossless) {
      GB_TRY(attempt(tiers[t], kv));
      if (found) break;
    }
    if (!found) GB_TRY(attempt(tiers[t], kSmall));
  }
  for (const Kv &kv : kLast)
    for (uint32_t t = 0; t < n_tiers && !found; t++) GB_TRY(attempt(tiers[t], kv));
  if (!found) {
    if (smallest != UINT64_MAX)
      log.log(GB_LOG_ERROR, "gb_plan: nothing fits %llu bytes; the smallest configuration needs about %llu (n_ctx %u)",
              (unsigned long long)budget, (unsigned long long)smallest, n_ctx);
    else
      log.log(GB_LOG_ERROR, "gb_plan: nothing fits %llu bytes (n_ctx %u)", (unsigned long long)budget, n_ctx);
    return GB_ERR_BUDGET_EXCEEDED;
  }
  best.log = opts->log;
  best.log_user = opts->log_user;
  if (report) {
    gb_plan_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = report->struct_size;
    r.budget_bytes = budget;
    size_t arena = 0;
    gb_session_mem_size(m, &best, &arena);
    r.arena_bytes = arena;
    uint64_t pool = 0;
    uint32_t max_tokens = 0;
    gb_kv_pool_size(m, &best, &pool, &max_tokens);
    r.kv_pool_bytes = pool;
    gb::session_config(best, x, &cfg);
    r.weight_bytes = common + gb::resident_tier_bytes(m, cfg);
    r.streamed_bytes = gb::streamed_bytes(m);
    r.n_ctx = best.n_ctx ? best.n_ctx : m->meta.seq_len;
    r.gear = best.gear;
    r.kv_policy = best.kv.policy;
    r.kv_beta = best.kv.beta;
    r.kv_evict = best.kv.evict;
    r.prefill_batch = best.prefill_batch;
    r.gave_up = (best.prefill_batch < 64 ? GB_PLAN_GAVE_UP_PREFILL : 0u) | (kv_best.policy != GB_KV_F32 ? GB_PLAN_GAVE_UP_KV : 0u) |
                (kv_best.lossy ? GB_PLAN_GAVE_UP_KV_LOSSY : 0u) | (best.gear != tiers[0] ? GB_PLAN_GAVE_UP_GEAR : 0u);
    r.candidates_tried = tried;
    memcpy(report, &r, report->struct_size);
  }
  memcpy(opts, &best, opts->struct_size);
  opts->struct_size = best.struct_size < opts->struct_size ? best.struct_size : opts->struct_size;
  return GB_OK;
}
