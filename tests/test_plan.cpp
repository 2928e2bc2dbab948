// test_plan.cpp — gb_plan(): over a sweep of budgets on stories5M, every plan
// creates a session whose arena plus measured resident weight tiers (from
// the OS) plus the common section fit the budget; more budget never gives a
// plan later in the preference order; what fits nothing is refused; misuse.
#include <gtest/gtest.h>

#include <math.h>
#include <string.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace {

gb_model *open_5m() {
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  EXPECT_EQ(gb_model_open_file(gbt::stories5m_gbx().c_str(), &mo, &m), GB_OK);
  return m;
}

gb_session_options base() {
  gb_session_options o;
  gb_session_options_init(&o);
  o.log = gbt::quiet_log;
  o.sampler.temperature = 0.0f;
  return o;
}

}  // namespace

TEST(Plan, EveryPlanFitsItsBudgetWhenMeasured) {
  gb_model *m = open_5m();
  ASSERT_NE(m, nullptr);
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  ASSERT_EQ(gb_model_get_info(m, &mi), GB_OK);
  uint64_t tiers = 0;
  for (int g = 0; g < GB_GEAR_COUNT; g++) tiers += mi.gear_bytes[g];
  const uint64_t common = mi.file_bytes - tiers;  // upper bound of the common section
  uint32_t last_tried = 0;
  int plans = 0;
  for (uint64_t kib : {65536ull, 16384ull, 9000ull, 8192ull, 7000ull, 6144ull, 5000ull, 4096ull, 3500ull, 3200ull, 3000ull}) {
    const uint64_t budget = kib << 10;
    gb_session_options o = base();
    gb_plan_report r;
    r.struct_size = sizeof r;
    const gb_status st = gb_plan(m, budget, 256, &o, &r);
    if (st == GB_ERR_BUDGET_EXCEEDED) {
      EXPECT_GT(plans, 4) << "the sweep should find several plans before nothing fits";
      continue;
    }
    ASSERT_EQ(st, GB_OK) << kib << " KiB";
    plans++;
    EXPECT_EQ(o.mem_budget, budget);
    EXPECT_EQ(r.budget_bytes, budget);
    EXPECT_LE(r.arena_bytes + r.weight_bytes, budget) << kib << " KiB";
    EXPECT_GE(r.candidates_tried, last_tried) << "a smaller budget never gets an earlier plan";
    last_tried = r.candidates_tried;
    EXPECT_EQ((uint32_t)o.gear, (uint32_t)r.gear);
    EXPECT_EQ(o.prefill_batch, r.prefill_batch);
    // Create it and measure: arena + resident tiers (the OS's figure) + the
    // common section stay within the budget.
    gbt::x(o).measure_residency = 1;
    size_t arena = 0;
    ASSERT_EQ(gb_session_mem_size(m, &o, &arena), GB_OK);
    EXPECT_EQ(arena, r.arena_bytes);
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK) << kib << " KiB";
    const int32_t prompt[] = {1, 403, 407, 261, 378};
    ASSERT_EQ(gb_prefill(s, prompt, 5), GB_OK);
    gb_step_info info;
    for (int i = 0; i < 8; i++) {
      info.struct_size = sizeof info;
      int32_t t;
      ASSERT_EQ(gb_decode_step(s, &t, &info), GB_OK);
    }
    EXPECT_LE(arena + info.resident_weight_bytes + common, budget) << kib << " KiB: resident " << info.resident_weight_bytes;
    gb_session_destroy(s);
  }
  EXPECT_GE(plans, 5);
  // The largest budget gives up nothing; the smallest that works gave
  // something up.
  gb_session_options o = base();
  gb_plan_report r;
  r.struct_size = sizeof r;
  ASSERT_EQ(gb_plan(m, 1ull << 30, 0, &o, &r), GB_OK);
  EXPECT_EQ(r.gave_up, 0u);
  EXPECT_EQ((uint32_t)r.gear, (uint32_t)mi.default_gear);
  EXPECT_EQ(r.n_ctx, mi.seq_len);
  gb_model_close(m);
}

TEST(Plan, KeepsTheCallersOtherChoicesAndRefusesMisuse) {
  gb_model *m = open_5m();
  ASSERT_NE(m, nullptr);
  gb_session_options o = base();
  o.n_threads = 2;
  o.sampler.top_k = 7;
  o.repeat_penalty = 1.2f;
  gb_plan_report r;
  r.struct_size = sizeof r;
  ASSERT_EQ(gb_plan(m, 4u << 20, 128, &o, &r), GB_OK);
  EXPECT_EQ(o.n_threads, 2u);
  EXPECT_EQ(o.sampler.top_k, 7u);
  EXPECT_EQ(o.repeat_penalty, 1.2f);
  EXPECT_EQ(o.n_ctx, 128u);
  EXPECT_EQ((void *)o.log, (void *)gbt::quiet_log);
  // Nothing fits: a status, opts untouched.
  gb_session_options before = base(), after = base();
  EXPECT_EQ(gb_plan(m, 100000, 256, &after, &r), GB_ERR_BUDGET_EXCEEDED);
  EXPECT_EQ(memcmp(&before, &after, sizeof before), 0);
  // Misuse.
  EXPECT_EQ(gb_plan(nullptr, 1u << 30, 0, &after, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_plan(m, 1u << 30, 0, nullptr, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_plan(m, 0, 0, &after, nullptr), GB_ERR_INVALID_ARGUMENT);
  r.struct_size = 3;
  EXPECT_EQ(gb_plan(m, 1u << 30, 0, &after, &r), GB_ERR_STRUCT_SIZE);
  gb_session_options bad = base();
  bad.struct_size = 2;
  EXPECT_EQ(gb_plan(m, 1u << 30, 0, &bad, nullptr), GB_ERR_STRUCT_SIZE);
  bad = base();
  bad.sampler.temperature = NAN;  // the caller's own option is wrong
  EXPECT_EQ(gb_plan(m, 1u << 30, 0, &bad, nullptr), GB_ERR_INVALID_ARGUMENT);
  bad = base();
  EXPECT_EQ(gb_plan(m, 1u << 30, 1u << 23, &bad, nullptr), GB_ERR_INVALID_ARGUMENT);  // n_ctx too large
  EXPECT_EQ(gb_plan(m, 1u << 30, 0, &after, nullptr), GB_OK);  // report optional
  gb_model_close(m);
}
