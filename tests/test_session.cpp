// test_session.cpp — the session API: options, memory estimate and
// placement, budget refusals, misuse statuses, determinism, and that
// prefill/decode never allocate.
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

class Session : public ::testing::Test {
 protected:
  void SetUp() override {
    gb_model_options mo = gbt::quiet_model_options();
    ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m_), GB_OK);
    gb_session_options_init(&o_);
    o_.log = gbt::quiet_log;
  }
  void TearDown() override { gb_model_close(m_); }
  gb_model *m_ = nullptr;
  gb_session_options o_;
};

TEST_F(Session, VersionAndStatusStrings) {
  EXPECT_EQ(gb_version(), (uint32_t)GB_VERSION_NUMBER);
  EXPECT_STREQ(gb_version_string(), "0.6.0");
  for (int s = 0; s < 700; s++) EXPECT_NE(gb_status_str((gb_status)s), nullptr);
  EXPECT_STREQ(gb_status_str((gb_status)12345), "unknown status");
  EXPECT_STREQ(gb_status_str(GB_ERR_CONTEXT_FULL), "context full");
  // Any int a C caller can pass, negative ones included (the sanitizer build
  // aborted on -1 while the value was loaded as the enum).
  for (int v : {-1, -100, INT_MIN, INT_MAX, 0x7ffffffe, 600})
    EXPECT_STREQ(gbt_c_status_str(v), "unknown status") << v;
  EXPECT_STREQ(gbt_c_status_str(GB_ERR_CONTEXT_FULL), "context full");
}

TEST_F(Session, MemSizeIsExactAndCallerMemoryWorks) {
  size_t need = 0;
  ASSERT_EQ(gb_session_mem_size(m_, &o_, &need), GB_OK);
  ASSERT_GT(need, 0u);
  void *mem = aligned_alloc(64, (need + 63) / 64 * 64 + 64);
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m_, &o_, mem, need - 1, &s), GB_ERR_ARENA_TOO_SMALL);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(gb_session_create(m_, &o_, (char *)mem + 8, need, &s), GB_ERR_ALIGNMENT);
  // A canary after the arena must survive creation and decoding.
  memset((char *)mem + need, 0xA5, 64);
  ASSERT_EQ(gb_session_create(m_, &o_, mem, need, &s), GB_OK);
  const int32_t bos = 1;
  ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
  for (int i = 0; i < 50; i++) ASSERT_EQ(gb_decode_step(s, nullptr, nullptr), GB_OK);
  for (int i = 0; i < 64; i++) ASSERT_EQ(((unsigned char *)mem)[need + i], 0xA5);
  gb_session_destroy(s);
  free(mem);
}

TEST_F(Session, NoHeapAllocationDuringPrefillAndDecode) {
  for (gb_gear g : {GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32, GB_GEAR_AUTO}) {
    o_.gear = g;
    o_.sampler.temperature = 0.8f;
    o_.sampler.top_p = 0.9f;
    o_.sampler.top_k = 40;
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
    int32_t toks[64];
    size_t n = 0;
    ASSERT_EQ(gb_tokenize(m_, "Once upon a time", 16, GB_TOKENIZE_ADD_BOS, toks, 64, &n), GB_OK);
    gbt::alloc_count_start();
    gb_status st = gb_prefill(s, toks, n);
    for (int i = 0; i < 100 && st == GB_OK; i++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      st = gb_decode_step(s, nullptr, &info);
    }
    gb_step_info info;
    info.struct_size = sizeof info;
    if (st == GB_OK) st = gb_feed(s, 5, &info);
    if (st == GB_OK) st = gb_session_reset(s);
    const uint64_t allocs = gbt::alloc_count_stop();
    EXPECT_EQ(st, GB_OK);
    EXPECT_EQ(allocs, 0u) << "gear " << g;
    gb_session_destroy(s);
  }
  // The hook does see allocations: creating a session without memory allocates once.
  gbt::alloc_count_start();
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
  EXPECT_EQ(gbt::alloc_count_stop(), 1u);
  gb_session_destroy(s);
}

TEST_F(Session, BudgetRefusalsNameThePart) {
  size_t need = 0;
  ASSERT_EQ(gb_session_mem_size(m_, &o_, &need), GB_OK);
  o_.mem_budget = need / 2;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_mem_size(m_, &o_, &need), GB_ERR_BUDGET_EXCEEDED);
  EXPECT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_ERR_BUDGET_EXCEEDED);
  EXPECT_EQ(s, nullptr);
  // Enough for the arena but not for the resident tiers.
  gb_session_options_init(&o_);
  o_.log = gbt::quiet_log;
  ASSERT_EQ(gb_session_mem_size(m_, &o_, &need), GB_OK);
  o_.mem_budget = need + 1000;
  EXPECT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_ERR_BUDGET_EXCEEDED);
  o_.mem_budget = 1ull << 32;
  ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
  gb_session_destroy(s);
  // A context far too large for the budget.
  o_.n_ctx = 1u << 20;
  o_.mem_budget = 64u << 20;
  EXPECT_EQ(gb_session_mem_size(m_, &o_, &need), GB_ERR_BUDGET_EXCEEDED);
}

TEST_F(Session, BadOptionsAndArguments) {
  gb_session *s = nullptr;
  size_t need;
  EXPECT_EQ(gb_session_mem_size(nullptr, &o_, &need), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_mem_size(m_, &o_, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_create(m_, &o_, nullptr, 0, nullptr), GB_ERR_NULL_POINTER);
  gb_session_options bad = o_;
  bad.struct_size = 3;
  EXPECT_EQ(gb_session_create(m_, &bad, nullptr, 0, &s), GB_ERR_STRUCT_SIZE);
  bad = o_;
  bad.gear = (gb_gear)7;
  EXPECT_EQ(gb_session_create(m_, &bad, nullptr, 0, &s), GB_ERR_INVALID_ARGUMENT);
  bad = o_;
  bad.sampler.temperature = -1.0f;
  EXPECT_EQ(gb_session_create(m_, &bad, nullptr, 0, &s), GB_ERR_INVALID_ARGUMENT);
  bad = o_;
  bad.sampler.top_p = 0.0f;
  EXPECT_EQ(gb_session_create(m_, &bad, nullptr, 0, &s), GB_ERR_INVALID_ARGUMENT);
  bad = o_;
  gbt::x(bad).monitor.window = 0;
  EXPECT_EQ(gb_session_create(m_, &bad, nullptr, 0, &s), GB_ERR_INVALID_ARGUMENT);
  bad = o_;
  gbt::x(bad).monitor.theta_low = 4.0f;
  gbt::x(bad).monitor.theta_high = 3.0f;
  EXPECT_EQ(gb_session_create(m_, &bad, nullptr, 0, &s), GB_ERR_INVALID_ARGUMENT);
  bad = o_;
  gbt::x(bad).managed = (gb_managed_set)9;
  EXPECT_EQ(gb_session_create(m_, &bad, nullptr, 0, &s), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);

  ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
  EXPECT_EQ(gb_decode_step(s, nullptr, nullptr), GB_ERR_BAD_STATE);
  const int32_t bad_tok[2] = {1, 100000};
  EXPECT_EQ(gb_prefill(s, bad_tok, 2), GB_ERR_TOKEN_OUT_OF_RANGE);
  const int32_t neg = -3;
  EXPECT_EQ(gb_prefill(s, &neg, 1), GB_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(gb_prefill(s, bad_tok, 0), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_prefill(s, nullptr, 1), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_feed(s, 512, nullptr), GB_ERR_TOKEN_OUT_OF_RANGE);
  uint32_t pos = 99;
  ASSERT_EQ(gb_session_position(s, &pos, nullptr), GB_OK);
  EXPECT_EQ(pos, 0u);  // nothing was fed by the failed calls
  EXPECT_EQ(gb_decode_step(nullptr, nullptr, nullptr), GB_ERR_NULL_POINTER);
  gb_session_destroy(s);
  gb_session_destroy(nullptr);
  gb_model_close(nullptr);
}

// One spelling of every gear and KV policy, in the library and the tools:
// names round-trip, anything else is a status (names) or "unknown" (values).
TEST(Names, GearsAndKvPoliciesRoundTrip) {
  const gb_gear gears[] = {GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32, GB_GEAR_AUTO, GB_GEAR_SPEC};
  const char *const gear_names[] = {"low", "mid", "high", "f32", "auto", "spec"};
  for (size_t i = 0; i < 6; i++) {
    EXPECT_STREQ(gb_gear_name(gears[i]), gear_names[i]);
    gb_gear g = GB_GEAR_MAX_ENUM;
    ASSERT_EQ(gb_gear_from_name(gear_names[i], &g), GB_OK);
    EXPECT_EQ(g, gears[i]);
  }
  const char *const policy_names[] = {"default", "f32", "f16", "uniform8", "uniform4", "uniform3", "uniform2",
                                      "seed", "window", "recency"};
  for (int p = GB_KV_DEFAULT; p <= GB_KV_RECENCY; p++) {
    EXPECT_STREQ(gb_kv_policy_name((gb_kv_policy)p), policy_names[p]);
    gb_kv_policy q = GB_KV_POLICY_MAX_ENUM;
    ASSERT_EQ(gb_kv_policy_from_name(policy_names[p], &q), GB_OK);
    EXPECT_EQ(q, (gb_kv_policy)p);
  }
  // Unknown names, wrong case, prefixes, NULL: a status, *out untouched.
  for (const char *bad : {"", "LOW", "lo", "lowx", "high ", "unknown", "window8"}) {
    gb_gear g = GB_GEAR_MID;
    EXPECT_EQ(gb_gear_from_name(bad, &g), GB_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_EQ(g, GB_GEAR_MID);
    gb_kv_policy q = GB_KV_F16;
    EXPECT_EQ(gb_kv_policy_from_name(bad, &q), GB_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_EQ(q, GB_KV_F16);
  }
  gb_gear g;
  gb_kv_policy q;
  EXPECT_EQ(gb_gear_from_name(nullptr, &g), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_gear_from_name("low", nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_kv_policy_from_name(nullptr, &q), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_kv_policy_from_name("f16", nullptr), GB_ERR_NULL_POINTER);
  // Values no enumerator has, as a C caller can pass them.
  for (int v : {-1, 4, 15, 19, 100, INT_MIN, INT_MAX}) EXPECT_STREQ(gbt_c_gear_name(v), "unknown") << v;
  for (int v : {-1, 10, 100, INT_MIN, INT_MAX}) EXPECT_STREQ(gbt_c_kv_policy_name(v), "unknown") << v;
}

// gb_step_info follows the rule of every caller struct: a struct_size below
// the first published layout or above this header's is refused before the
// step runs, so the session is where it was and nothing was written.
TEST_F(Session, StepInfoStructSizeOutOfRangeIsRefusedBeforeTheStep) {
  o_.sampler.temperature = 0.0f;
  gb_session *s = nullptr, *ref = nullptr;
  ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
  ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &ref), GB_OK);
  const int32_t bos = 1;
  ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
  ASSERT_EQ(gb_prefill(ref, &bos, 1), GB_OK);
  const uint32_t first = (uint32_t)offsetof(gb_step_info, predicted_gear);
  for (uint32_t size : {0u, 4u, first - 1, (uint32_t)sizeof(gb_step_info) + 1, 0xFFFFFFFFu}) {
    gb_step_info info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = size;
    int32_t tok = -7;
    EXPECT_EQ(gb_decode_step(s, &tok, &info), GB_ERR_STRUCT_SIZE) << size;
    EXPECT_EQ(gb_feed(s, 5, &info), GB_ERR_STRUCT_SIZE) << size;
    EXPECT_EQ(tok, -7) << size;
    EXPECT_EQ(info.struct_size, size);
    EXPECT_EQ(info.token, (int32_t)0x5A5A5A5A) << "the refused step wrote into info";
  }
  uint32_t pos = 99;
  ASSERT_EQ(gb_session_position(s, &pos, nullptr), GB_OK);
  EXPECT_EQ(pos, 0u);
  // Both ends of the range are accepted, and the refused calls changed nothing:
  // the session decodes what an untouched one does.
  for (uint32_t size : {first, (uint32_t)sizeof(gb_step_info)}) {
    gb_step_info a, b;
    memset(&a, 0x5A, sizeof a);
    a.struct_size = size;
    b.struct_size = sizeof b;
    int32_t ta = -1, tb = -2;
    ASSERT_EQ(gb_decode_step(s, &ta, &a), GB_OK);
    ASSERT_EQ(gb_decode_step(ref, &tb, &b), GB_OK);
    EXPECT_EQ(ta, tb);
    EXPECT_EQ(a.token, ta);
    EXPECT_EQ(a.pos, b.pos);
    if (size < sizeof a) {
      uint8_t past;
      memcpy(&past, (const uint8_t *)&a + size, 1);
      EXPECT_EQ(past, 0x5Au) << "wrote past struct_size";
    }
  }
  gb_session_destroy(s);
  gb_session_destroy(ref);
}

TEST_F(Session, MissingTierIsUnavailable) {
  // A model converted without the f32 tier refuses f32 sessions.
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  ASSERT_EQ(gb_model_get_info(m_, &mi), GB_OK);
  EXPECT_EQ(mi.gears, 0xFu);
  EXPECT_EQ(mi.vocab_size, 512u);
  EXPECT_EQ(mi.dim, 64u);
  EXPECT_EQ(mi.n_kv_heads, 4u);
  mi.struct_size = 2;
  EXPECT_EQ(gb_model_get_info(m_, &mi), GB_ERR_STRUCT_SIZE);
}

TEST_F(Session, ContextFullIsAStatus) {
  o_.n_ctx = 8;
  o_.sampler.temperature = 0.0f;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
  std::vector<int32_t> many(9, 300);
  EXPECT_EQ(gb_prefill(s, many.data(), many.size()), GB_ERR_CONTEXT_FULL);
  const int32_t bos = 1;
  ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
  int steps = 0;
  gb_status st;
  while ((st = gb_decode_step(s, nullptr, nullptr)) == GB_OK) steps++;
  EXPECT_EQ(st, GB_ERR_CONTEXT_FULL);
  EXPECT_EQ(steps, 8);
  gb_session_destroy(s);
}

std::vector<int32_t> sample_run(gb_model *m, gb_session_options o, int n) {
  gb_session *s = nullptr;
  std::vector<int32_t> out;
  if (gb_session_create(m, &o, nullptr, 0, &s) != GB_OK) return out;
  const int32_t bos = 1;
  gb_prefill(s, &bos, 1);
  for (int i = 0; i < n; i++) {
    int32_t t;
    if (gb_decode_step(s, &t, nullptr) != GB_OK) break;
    out.push_back(t);
  }
  // Reset gives the same sequence again.
  gb_session_reset(s);
  gb_prefill(s, &bos, 1);
  for (int i = 0; i < n; i++) {
    int32_t t;
    if (gb_decode_step(s, &t, nullptr) != GB_OK || t != out[i]) {
      out.clear();
      break;
    }
  }
  gb_session_destroy(s);
  return out;
}

TEST_F(Session, SameSeedSameTokens) {
  o_.sampler.temperature = 1.0f;
  o_.sampler.seed = 7;
  const auto a = sample_run(m_, o_, 80), b = sample_run(m_, o_, 80);
  ASSERT_EQ(a.size(), 80u);
  EXPECT_EQ(a, b);
  o_.sampler.seed = 8;
  EXPECT_NE(a, sample_run(m_, o_, 80));
  o_.sampler.method = GB_SAMPLE_GUMBEL;
  const auto g = sample_run(m_, o_, 80);
  EXPECT_EQ(g.size(), 80u);
}

TEST_F(Session, AutoPolicyShiftsAndReportsTelemetry) {
  o_.gear = GB_GEAR_AUTO;
  o_.sampler.temperature = 1.0f;
  gbt::x(o_).monitor.min_gear_duration = 2;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
  const int32_t bos = 1;
  ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
  int seen[GB_GEAR_COUNT] = {0}, shifts = 0;
  gb_gear expect = GB_GEAR_HIGH;  // initial gear
  for (int i = 0; i < 300; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_decode_step(s, nullptr, &info), GB_OK);
    ASSERT_EQ(info.gear, expect);  // the pass runs on the gear chosen by the previous step
    ASSERT_LE(info.gear, GB_GEAR_HIGH);
    EXPECT_GE(info.entropy, 0.0f);
    EXPECT_LE(info.entropy, 9.0f + 1e-3f);  // log2(512)
    EXPECT_EQ(info.shifted, info.next_gear != info.gear ? 1u : 0u);
    if (info.shifted) {
      EXPECT_GE(info.tokens_in_gear, 2u);
    }
    EXPECT_GT(info.weight_bytes_read, 0u);
    seen[info.gear]++;
    shifts += info.shifted;
    expect = info.next_gear;
  }
  EXPECT_GT(shifts, 0);
  EXPECT_GT(seen[GB_GEAR_LOW] + seen[GB_GEAR_MID], 0);
  gb_session_destroy(s);
}

}  // namespace

// A model can be opened from memory into caller memory: nothing allocates.
TEST(ModelMemory, OpenFromMemoryIntoCallerMemoryAllocatesNothing) {
  std::vector<uint8_t> img = gbt::read_file(gbt::stories260k_gbx());
  void *data = nullptr;
  ASSERT_EQ(posix_memalign(&data, 64, img.size()), 0);
  memcpy(data, img.data(), img.size());
  gb_model_options mo = gbt::quiet_model_options();
  size_t need = 0;
  ASSERT_EQ(gb_model_mem_size(data, img.size(), &mo, &need), GB_OK);
  EXPECT_GT(need, 0u);
  std::vector<uint8_t> mem(need + 128, 0xAB);
  uint8_t *aligned = mem.data() + (64 - (uintptr_t)mem.data() % 64) % 64;
  gb_model *m = nullptr;
  mo.mem = aligned;
  mo.mem_bytes = need - 1;
  EXPECT_EQ(gb_model_open_memory(data, img.size(), &mo, &m), GB_ERR_ARENA_TOO_SMALL);
  EXPECT_EQ(m, nullptr);
  mo.mem = aligned + 8;
  mo.mem_bytes = need;
  EXPECT_EQ(gb_model_open_memory(data, img.size(), &mo, &m), GB_ERR_ALIGNMENT);
  mo.mem = aligned;
  gbt::alloc_count_start();
  const gb_status st = gb_model_open_memory(data, img.size(), &mo, &m);
  const uint64_t allocs = gbt::alloc_count_stop();
  ASSERT_EQ(st, GB_OK);
  EXPECT_EQ(allocs, 0u);
  EXPECT_EQ(aligned[need], 0xAB) << "wrote past mem_bytes";
  // It decodes like any model.
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = GB_GEAR_HIGH;
  so.sampler.temperature = 0.0f;
  size_t sbytes = 0;
  ASSERT_EQ(gb_session_mem_size(m, &so, &sbytes), GB_OK);
  void *smem = nullptr;
  ASSERT_EQ(posix_memalign(&smem, 64, sbytes), 0);
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &so, smem, sbytes, &s), GB_OK);
  const int32_t bos = 1;
  ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
  int32_t tok = -1;
  ASSERT_EQ(gb_decode_step(s, &tok, nullptr), GB_OK);
  EXPECT_GE(tok, 0);
  gb_session_destroy(s);
  gb_model_close(m);
  free(smem);
  free(data);
}
