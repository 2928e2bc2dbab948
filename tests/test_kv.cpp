// test_kv.cpp — the KV pool and its allocators: the budget is
// never exceeded (page-exact accounting, canaries, allocation hook),
// protected tokens stay at 8 bits, uniform importance gives a uniform
// allocation, precision only moves along the discrete levels, the
// too-small-pool error, context-full and eviction, telemetry, and a
// 10 000-step generation against a pool far smaller than the fp16 cache.
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "session.h"
#include "test_util.h"

namespace {

// Pages a layer's buckets hold (the rest are on its free stack).
uint32_t pages_used(const gb::KvPool &kv, uint32_t layer) { return kv.plan.n_pages - kv.layers[layer].n_free; }

class Kv : public ::testing::Test {
 protected:
  void SetUp() override {
    gb_model_options mo = gbt::quiet_model_options();
    ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m_), GB_OK);
    gb_session_options_init(&o_);
    o_.log = gbt::quiet_log;
    o_.gear = GB_GEAR_F32;
    o_.sampler.temperature = 0.9f;
  }
  void TearDown() override { gb_model_close(m_); }
  gb_model *m_ = nullptr;
  gb_session_options o_;
};

// Internal invariants of every layer: buckets dense, pages accounted.
void check_pool(const gb::KvPool &kv) {
  const gb::KvPlan &p = kv.plan;
  for (uint32_t l = 0; l < kv.n_layers; l++) {
    const gb::KvLayer &y = kv.layers[l];
    uint32_t pages = 0, tokens = 0;
    for (uint32_t lv = 0; lv < gb::kLevels; lv++) {
      const gb::KvBucket &b = y.bucket[lv];
      if (!(p.levels >> lv & 1)) {
        ASSERT_EQ(b.count, 0u);
        continue;
      }
      pages += (b.count + p.tpp[lv] - 1) / p.tpp[lv];
      tokens += b.count;
      for (uint32_t j = 0; j < b.count; j++) {
        ASSERT_EQ(y.level[b.slots[j]], lv);
        ASSERT_EQ(y.index[b.slots[j]], j);
      }
    }
    ASSERT_EQ(tokens, kv.n_tokens) << "layer " << l;
    ASSERT_EQ(pages, p.n_pages - y.n_free) << "layer " << l;
    ASSERT_LE(pages, p.n_pages);
  }
}

TEST_F(Kv, PoolSizeFollowsBetaAndBytes) {
  const gb_kv_policy pols[] = {GB_KV_F32, GB_KV_F16, GB_KV_UNIFORM8, GB_KV_UNIFORM4, GB_KV_UNIFORM3, GB_KV_UNIFORM2,
                               GB_KV_SEED, GB_KV_WINDOW, GB_KV_RECENCY};
  const double fp16 = 2.0 * 5 * 512 * 32 * 2;  // stories260K: 5 layers, kv_dim 32, n_ctx 512
  for (gb_kv_policy pol : pols)
    for (float beta : {0.3f, 0.5f, 1.0f}) {
      o_.kv.policy = pol;
      o_.kv.beta = beta;
      uint64_t pool = 0;
      uint32_t max_tokens = 0;
      const gb_status st = gb_kv_pool_size(m_, &o_, &pool, &max_tokens);
      if (st != GB_OK) {
        EXPECT_EQ(st, GB_ERR_BUDGET_EXCEEDED);
        continue;
      }
      EXPECT_LE(pool, beta * fp16) << "policy " << pol << " beta " << beta;
      EXPECT_GT(pool, 0.9 * beta * fp16) << "policy " << pol << " beta " << beta;
      EXPECT_GT(max_tokens, 0u);
    }
  o_.kv.policy = GB_KV_WINDOW;
  o_.kv.beta = 0;
  o_.kv.pool_bytes = 100000;
  uint64_t pool = 0;
  ASSERT_EQ(gb_kv_pool_size(m_, &o_, &pool, nullptr), GB_OK);
  EXPECT_LE(pool, 100000u);
  EXPECT_GT(pool, 95000u);
  // No budget: room for n_ctx tokens at the entry precision.
  o_.kv.pool_bytes = 0;
  o_.kv.policy = GB_KV_F32;
  uint32_t mt = 0;
  ASSERT_EQ(gb_kv_pool_size(m_, &o_, &pool, &mt), GB_OK);
  EXPECT_EQ(pool, 2ull * 5 * 512 * 32 * 4);
  EXPECT_EQ(mt, 512u);
}

// A pool that cannot hold the protected tokens plus one at the
// minimum is an error at creation, naming the KV pool.
TEST_F(Kv, BudgetViolationIsAnErrorAtCreation) {
  std::string last;
  o_.log = [](void *u, gb_log_level, const char *msg) { *static_cast<std::string *>(u) = msg; };
  o_.log_user = &last;
  o_.kv.policy = GB_KV_WINDOW;
  o_.kv.pool_bytes = 600;  // 5 layers x 120 bytes
  gb_session *s = nullptr;
  size_t need = 0;
  EXPECT_EQ(gb_session_mem_size(m_, &o_, &need), GB_ERR_BUDGET_EXCEEDED);
  EXPECT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_ERR_BUDGET_EXCEEDED);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(last.find("KV pool"), std::string::npos) << last;
  EXPECT_NE(last.find("beta_min"), std::string::npos) << last;
  for (gb_kv_policy pol : {GB_KV_UNIFORM2, GB_KV_F32}) {
    o_.kv.policy = pol;
    o_.kv.pool_bytes = 20;
    EXPECT_EQ(gb_session_mem_size(m_, &o_, &need), GB_ERR_BUDGET_EXCEEDED) << pol;
  }
  // Bad option values are specific errors.
  gb_session_options_init(&o_);
  o_.log = gbt::quiet_log;
  o_.kv.policy = (gb_kv_policy)42;
  EXPECT_EQ(gb_session_mem_size(m_, &o_, &need), GB_ERR_INVALID_ARGUMENT);
  gb_session_options_init(&o_);
  o_.log = gbt::quiet_log;
  o_.kv.beta = -1.0f;
  EXPECT_EQ(gb_session_mem_size(m_, &o_, &need), GB_ERR_INVALID_ARGUMENT);
  o_.kv.beta = 0.5f;
  gbt::x(o_).kv.gamma = 1.0f;
  EXPECT_EQ(gb_session_mem_size(m_, &o_, &need), GB_ERR_INVALID_ARGUMENT);
}

// Generation under every multi-level policy at tight budgets: at every step
// the used bytes stay within the pool, the buckets are consistent, the
// protected prefix stays at 8 bits, levels are in the discrete set and a
// token's level never goes up (its data below it is gone).
TEST_F(Kv, BudgetNeverExceededProtectedAt8DiscreteAndMonotone) {
  for (gb_kv_policy pol : {GB_KV_WINDOW, GB_KV_SEED, GB_KV_RECENCY})
    for (float beta : {0.35f, 0.5f}) {
      o_.kv.policy = pol;
      o_.kv.beta = beta;
      o_.n_ctx = 300;
      gb_session *s = nullptr;
      ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
      const int32_t bos = 1;
      ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
      const gb::KvPool &kv = s->kv;
      std::vector<uint8_t> prev((size_t)kv.n_layers * kv.plan.cap, gb::kLvNone);
      uint64_t requant_seen = 0;
      gb_status st = GB_OK;
      uint32_t steps = 0;
      for (; steps < 299; steps++) {
        gb_step_info info;
        info.struct_size = sizeof info;
        st = gb_decode_step(s, nullptr, &info);
        if (st != GB_OK) break;
        ASSERT_LE(info.kv_bytes_used, info.kv_pool_bytes);
        ASSERT_EQ(info.kv_tokens, steps + 1);
        uint32_t hist = 0;
        for (int i = 0; i < 6; i++) hist += info.kv_tokens_at_bits[i];
        ASSERT_EQ(hist, info.kv_tokens * kv.n_layers);
        check_pool(kv);
        for (uint32_t l = 0; l < kv.n_layers; l++)
          for (uint32_t slot = 0; slot < kv.plan.cap; slot++) {
            const uint8_t lv = kv.layers[l].level[slot];
            if (lv == gb::kLvNone) continue;
            ASSERT_TRUE(lv == gb::kLv2 || lv == gb::kLv3 || lv == gb::kLv4 || lv == gb::kLv8);
            if (kv.pos[slot] < o_.kv.k_critical) {
              ASSERT_EQ(lv, gb::kLv8) << "protected prefix token " << kv.pos[slot];
            }
            const uint8_t before = prev[(size_t)l * kv.plan.cap + slot];
            if (before != gb::kLvNone) {
              ASSERT_LE(lv, before) << "a level went up";
            }
            prev[(size_t)l * kv.plan.cap + slot] = lv;
          }
        requant_seen = info.kv_requantized;
      }
      EXPECT_EQ(st, GB_OK) << "policy " << pol << " beta " << beta << " step " << steps;
      EXPECT_GT(requant_seen, 0u) << "the budget was tight enough to force step-downs";
      gb_session_destroy(s);
    }
}

// Drive the pool directly: tokens with no attention statistics have equal
// importance, and the allocators then spread the budget uniformly: the
// unprotected tokens of a layer end within one link of the chain.
TEST_F(Kv, UniformImportanceGivesUniformAllocation) {
  for (gb_kv_policy pol : {GB_KV_SEED, GB_KV_WINDOW}) {
    o_.kv.policy = pol;
    o_.kv.beta = 0.45f;
    o_.kv.window = 0;
    gbt::x(o_).kv.rank_intervals = 0;  // hysteresis off: levels pinned by history are the point of it
    o_.n_ctx = 400;
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
    gb::KvPool &kv = s->kv;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> key(32), val(32);
    for (uint32_t t = 0; t < 400; t++) {
      ASSERT_EQ(gb::kv_begin(&kv, s->ex.k, t, s->log), GB_OK) << t;
      for (uint32_t l = 0; l < kv.n_layers; l++) {
        for (auto &v : key) v = nd(rng);
        for (auto &v : val) v = nd(rng);
        gb::kv_store_slot(&kv, l, kv.cur_slot, key.data(), val.data());
      }
      gb::kv_end(&kv);  // no kv_attend: every importance stays equal
    }
    if (pol == GB_KV_SEED)
      for (uint32_t l = 0; l < kv.n_layers; l++) gb::kv_seed_realloc(&kv, s->ex.k, l, 0);
    check_pool(kv);
    for (uint32_t l = 0; l < kv.n_layers; l++) {
      uint32_t lo = gb::kLevels, hi = 0;
      for (uint32_t slot = 0; slot < kv.plan.cap; slot++) {
        const uint8_t lv = kv.layers[l].level[slot];
        if (lv == gb::kLvNone || kv.pos[slot] < o_.kv.k_critical) continue;
        lo = lv < lo ? lv : lo;
        hi = lv > hi ? lv : hi;
      }
      EXPECT_LE(hi - lo, 1u) << "policy " << pol << " layer " << l << ": levels " << lo << ".." << hi;
      // And the budget is used: a further whole-level upgrade would not fit.
      EXPECT_GE(pages_used(kv, l) + 4, kv.plan.n_pages - kv.plan.reserve) << "policy " << pol;
    }
    gb_session_destroy(s);
  }
}

// Context full: exactly max_tokens tokens fit; the next decode step returns
// GB_ERR_CONTEXT_FULL and changes nothing; prefill refuses what cannot fit.
TEST_F(Kv, ContextFullAtCapacityWithoutEviction) {
  for (gb_kv_policy pol : {GB_KV_UNIFORM4, GB_KV_WINDOW, GB_KV_SEED}) {
    o_.kv.policy = pol;
    o_.kv.pool_bytes = 5 * 4000;
    o_.n_ctx = 512;
    uint32_t max_tokens = 0;
    ASSERT_EQ(gb_kv_pool_size(m_, &o_, nullptr, &max_tokens), GB_OK);
    ASSERT_LT(max_tokens, 300u);
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &s), GB_OK);
    std::vector<int32_t> many(max_tokens + 2, 300);
    many[0] = 1;
    EXPECT_EQ(gb_prefill(s, many.data(), many.size()), GB_ERR_CONTEXT_FULL);
    uint32_t pos = 99;
    ASSERT_EQ(gb_session_position(s, &pos, nullptr), GB_OK);
    EXPECT_EQ(pos, 0u) << "nothing fed";
    ASSERT_EQ(gb_prefill(s, many.data(), 1), GB_OK);
    uint32_t steps = 0;
    gb_status st;
    while ((st = gb_decode_step(s, nullptr, nullptr)) == GB_OK) steps++;
    EXPECT_EQ(st, GB_ERR_CONTEXT_FULL);
    EXPECT_EQ(steps, max_tokens) << "policy " << pol;
    EXPECT_EQ(gb_decode_step(s, nullptr, nullptr), GB_ERR_CONTEXT_FULL);
    EXPECT_EQ(s->kv.n_tokens, max_tokens);
    check_pool(s->kv);
    // Reset gives the whole pool back.
    ASSERT_EQ(gb_session_reset(s), GB_OK);
    ASSERT_EQ(gb_prefill(s, many.data(), 1), GB_OK);
    EXPECT_EQ(gb_decode_step(s, nullptr, nullptr), GB_OK);
    gb_session_destroy(s);
  }
}

// 10 000 decode steps against a pool the size of 48 fp16 tokens: the session
// lives in caller memory with a canary after it, nothing allocates, the pool
// and its page high-water mark stay within bounds at every step, and the run
// ends as documented: context full at max_tokens without eviction, all
// 10 000 steps with eviction (protected prefix and window kept). Emulated
// runs (GB_TEST_SCALE < 1: tests/run.sh's qemu runs) take 1 500 steps or
// more, still over 500 evictions past the pool's capacity.
TEST_F(Kv, LongGeneration10000StepsInAFixedPool) {
  const uint64_t fp16_token = 2ull * 5 * 32 * 2;  // all layers, K and V
  const double sc = gbt::test_scale();
  const uint32_t n_steps = sc >= 1.0 ? 10000u : std::max(1500u, (uint32_t)(10000 * sc));
  for (gb_kv_policy pol : {GB_KV_WINDOW, GB_KV_UNIFORM4, GB_KV_SEED})
    for (uint32_t evict : {0u, 1u}) {
      o_.kv.policy = pol;
      o_.kv.pool_bytes = 48 * fp16_token;
      o_.kv.evict = evict;
      o_.n_ctx = n_steps + 2;
      size_t need = 0;
      ASSERT_EQ(gb_session_mem_size(m_, &o_, &need), GB_OK);
      uint64_t pool = 0;
      uint32_t max_tokens = 0;
      ASSERT_EQ(gb_kv_pool_size(m_, &o_, &pool, &max_tokens), GB_OK);
      ASSERT_LE(pool, 48 * fp16_token);
      ASSERT_GT(max_tokens, 48u) << "quantized tokens: more than the fp16 tokens the bytes would hold";
      ASSERT_LT(max_tokens, 1000u);
      ASSERT_GT(n_steps, max_tokens + 500) << "eviction must run many times";
      const size_t alloc = (need + 63) / 64 * 64 + 256;
      uint8_t *mem = static_cast<uint8_t *>(aligned_alloc(64, alloc));
      memset(mem + need, 0x5A, alloc - need);
      gb_session *s = nullptr;
      ASSERT_EQ(gb_session_create(m_, &o_, mem, need, &s), GB_OK);
      const int32_t bos = 1;
      ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
      uint32_t page_hw = 0;
      uint32_t steps = 0;
      gb_status st = GB_OK;
      gb_step_info info;
      gbt::alloc_count_start();
      for (; steps < n_steps; steps++) {
        info.struct_size = sizeof info;
        st = gb_decode_step(s, nullptr, &info);
        if (st != GB_OK) break;
        if (info.kv_bytes_used > info.kv_pool_bytes || info.kv_pool_bytes != pool) break;
        for (uint32_t l = 0; l < s->kv.n_layers; l++) {
          const uint32_t u = pages_used(s->kv, l);
          page_hw = u > page_hw ? u : page_hw;
        }
      }
      const uint64_t allocs = gbt::alloc_count_stop();
      EXPECT_EQ(allocs, 0u);
      EXPECT_LE(info.kv_bytes_used, pool);
      EXPECT_LE(page_hw, s->kv.plan.n_pages) << "page high-water mark";
      for (size_t i = need; i < alloc; i++) ASSERT_EQ(mem[i], 0x5A) << "arena canary";
      check_pool(s->kv);
      if (!evict) {
        EXPECT_EQ(st, GB_ERR_CONTEXT_FULL) << "policy " << pol;
        EXPECT_EQ(steps, max_tokens) << "policy " << pol;
      } else {
        EXPECT_EQ(st, GB_OK) << "policy " << pol << " step " << steps;
        EXPECT_EQ(steps, n_steps);
        EXPECT_EQ(info.kv_tokens, max_tokens);
        EXPECT_EQ(info.kv_evicted, n_steps - max_tokens);
        // The prefix (attention sinks) and the recent window survived.
        uint32_t prefix = 0, recent = 0;
        for (uint32_t slot = 0; slot < s->kv.plan.cap; slot++) {
          if (s->kv.layers[0].level[slot] == gb::kLvNone) continue;
          prefix += s->kv.pos[slot] < o_.kv.k_critical;
          recent += s->kv.pos[slot] + o_.kv.window > s->kv.newest;
        }
        EXPECT_EQ(prefix, o_.kv.k_critical);
        EXPECT_EQ(recent, o_.kv.window);
      }
      gb_session_destroy(s);
      free(mem);
    }
}

// The f32 policy (the default without a budget) is the reference cache:
// the default session and an explicit f32 one give identical logits, and
// every quantized policy at 8 bits stays close to it.
TEST_F(Kv, DefaultIsF32AndUniform8IsClose) {
  o_.sampler.temperature = 0.0f;
  gb_session *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(gb_session_create(m_, &o_, nullptr, 0, &a), GB_OK);
  gb_session_options o2 = o_;
  o2.kv.policy = GB_KV_F32;
  ASSERT_EQ(gb_session_create(m_, &o2, nullptr, 0, &b), GB_OK);
  o2.kv.policy = GB_KV_UNIFORM8;
  ASSERT_EQ(gb_session_create(m_, &o2, nullptr, 0, &c), GB_OK);
  const int32_t toks[] = {1, 400, 300, 280, 350, 290, 310, 270, 330, 305};
  double kl = 0;
  for (int32_t t : toks) {
    gb_step_info ia, ib, ic;
    ia.struct_size = ib.struct_size = ic.struct_size = sizeof ia;
    ASSERT_EQ(gb_feed(a, t, &ia), GB_OK);
    ASSERT_EQ(gb_feed(b, t, &ib), GB_OK);
    ASSERT_EQ(gb_feed(c, t, &ic), GB_OK);
    ASSERT_EQ(0, memcmp(ia.logits, ib.logits, sizeof(float) * ia.n_vocab));
    double za = 0, zc = 0, ma = ia.logits[0], mc = ic.logits[0];
    for (uint32_t i = 0; i < ia.n_vocab; i++) {
      ma = ia.logits[i] > ma ? ia.logits[i] : ma;
      mc = ic.logits[i] > mc ? ic.logits[i] : mc;
    }
    for (uint32_t i = 0; i < ia.n_vocab; i++) {
      za += exp(ia.logits[i] - ma);
      zc += exp(ic.logits[i] - mc);
    }
    for (uint32_t i = 0; i < ia.n_vocab; i++) {
      const double lp = ia.logits[i] - ma - log(za), lq = ic.logits[i] - mc - log(zc);
      kl += exp(lp) * (lp - lq);
    }
    EXPECT_EQ(ia.kv_tokens_at_bits[5], ia.kv_tokens * 5);
    EXPECT_EQ(ic.kv_tokens_at_bits[3], ic.kv_tokens * 5);
  }
  kl /= sizeof toks / sizeof toks[0];
  EXPECT_GT(kl, 0.0);
  EXPECT_LT(kl, 0.01) << "8-bit keys and values: KL to the f32 cache (stories260K, the fragile model: ~0.002 on text)";
  gb_session_destroy(a);
  gb_session_destroy(b);
  gb_session_destroy(c);
}

}  // namespace
