// test_threads.cpp — the port's persistent pool, and that logits do not
// depend on the session's thread count: every GEMV row (and every batched
// prefill output) is computed by one thread, so n_threads 1, 2, 3 and 4 give
// bit-identical logits, for every gear, through prefill and decode.
#include <string.h>

#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gearbx_port.h"
#include "session.h"
#include "test_util.h"

namespace {

struct Counts {
  std::atomic<uint32_t> hits[64];
  std::atomic<uint32_t> bad{0};
};

void count_task(void *ctx, uint32_t t, uint32_t n) {
  Counts *c = static_cast<Counts *>(ctx);
  if (t >= n || n > 64) {
    c->bad++;
    return;
  }
  c->hits[t]++;
}

TEST(Pool, EveryTaskRunsOnceInEverySection) {
  if (!gbt::threads_available()) GTEST_SKIP() << "GB_TEST_NO_THREADS: this emulator cannot start threads";
  for (uint32_t threads : {0u, 1u, 2u, 3u, 4u, 8u}) {
    std::vector<uint8_t> mem(gb_port_pool_mem_size(threads) + 64);
    void *at = (void *)(((uintptr_t)mem.data() + 63) & ~(uintptr_t)63);
    gb_port_pool *p = gb_port_pool_start(at, threads);
    ASSERT_NE(p, nullptr);
    EXPECT_GE(gb_port_pool_threads(p), 1u);
    EXPECT_LE(gb_port_pool_threads(p), threads > 1 ? threads : 1u);
    for (uint32_t rep = 0; rep < 2000; rep++) {
      const uint32_t n = rep % 64;
      Counts c;
      for (auto &h : c.hits) h = 0;
      gb_port_pool_run(p, n, count_task, &c);
      ASSERT_EQ(c.bad.load(), 0u);
      for (uint32_t t = 0; t < 64; t++) ASSERT_EQ(c.hits[t].load(), t < n ? 1u : 0u) << "threads " << threads << " n " << n;
    }
    gb_port_pool_stop(p);
  }
}

// Small matrices stay on the calling thread; large ones get at most one task
// per thread, each a whole number of kernel row tiles.
TEST(Pool, GemvTaskCounts) {
  if (!gbt::threads_available()) GTEST_SKIP() << "GB_TEST_NO_THREADS: this emulator cannot start threads";
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
  gb_session_options o;
  gb_session_options_init(&o);
  o.n_threads = 4;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  EXPECT_EQ(gb_port_pool_threads(s->ex.pool), 4u);
  EXPECT_EQ(gb::gemv_tasks(s->ex.pool, 64, 64), 1u);      // 4096 weights: not worth a hand-off
  EXPECT_EQ(gb::gemv_tasks(s->ex.pool, 16, 100000), 1u);  // one row tile (GB_GEMV_ROW_TILE)
  EXPECT_EQ(gb::gemv_tasks(s->ex.pool, 32, 100000), 2u);  // two row tiles
  EXPECT_EQ(gb::gemv_tasks(s->ex.pool, 2048, 2048), 4u);  // one per thread
  EXPECT_EQ(gb::gemv_tasks(s->ex.pool, 512, 64), 2u);     // 32768 weights
  gb_session_destroy(s);
  gb_model_close(m);
}

struct Trace {
  std::vector<float> logits;  // every step's logits, concatenated
  std::vector<int32_t> tokens;
};

Trace run(gb_model *m, gb_gear gear, uint32_t threads, uint32_t blas, const std::vector<int32_t> &prompt, uint32_t steps) {
  Trace tr;
  gb_session_options o;
  gb_session_options_init(&o);
  o.log = gbt::quiet_log;
  o.gear = gear;
  o.n_threads = threads;
  gbt::x(o).prefill_blas = blas;
  o.prefill_batch = 16;  // the prompt runs as chunks of 16, 16 and a rest
  o.sampler.temperature = 0.0f;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  if (!s) return tr;
  EXPECT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK);
  for (uint32_t i = 0; i < steps; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t tok = -1;
    if (gb_decode_step(s, &tok, &info) != GB_OK) {
      ADD_FAILURE() << "decode step " << i;
      break;
    }
    tr.tokens.push_back(tok);
    tr.logits.insert(tr.logits.end(), info.logits, info.logits + info.n_vocab);
  }
  gb_session_destroy(s);
  return tr;
}

void expect_thread_invariant(const std::string &path) {
  if (!gbt::threads_available()) GTEST_SKIP() << "GB_TEST_NO_THREADS: this emulator cannot start threads";
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(path.c_str(), &mo, &m), GB_OK);
  const char *text =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and "
      "her big brown dog.";
  int32_t toks[256];
  size_t n = 0;
  ASSERT_EQ(gb_tokenize(m, text, strlen(text), GB_TOKENIZE_ADD_BOS, toks, 256, &n), GB_OK);
  const std::vector<int32_t> prompt(toks, toks + n);
  // Both prefill GEMMs (the built-in one and OpenBLAS when linked) and no
  // panels (prefill_blas 3).
  // Emulated runs (GB_TEST_SCALE < 1): fewer steps, thread counts 2 and 4,
  // and each gear with one of the three prefill paths (in turn) instead of
  // all three: every gear and every path still runs, in a third of the
  // sessions (the emulator spends most of this test in the high gear's f16
  // arithmetic, which it computes in software).
  const bool full = gbt::test_scale() >= 1.0;
  const uint32_t steps = full ? 24 : 8;
  const std::vector<uint32_t> counts = full ? std::vector<uint32_t>{2, 3, 4} : std::vector<uint32_t>{2, 4};
  const uint32_t paths[3] = {0u, 1u, 3u};
  const gb_gear gears[5] = {GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32, GB_GEAR_AUTO};
  for (uint32_t pi = 0; pi < 3; pi++)
    for (uint32_t gi = 0; gi < 5; gi++) {
      if (!full && gi % 3 != pi) continue;
      const uint32_t blas = paths[pi];
      const gb_gear g = gears[gi];
      const Trace ref = run(m, g, 1, blas, prompt, steps);
      ASSERT_FALSE(ref.logits.empty());
      for (uint32_t t : counts) {
        const Trace tr = run(m, g, t, blas, prompt, steps);
        EXPECT_EQ(tr.tokens, ref.tokens) << "gear " << g << " threads " << t;
        ASSERT_EQ(tr.logits.size(), ref.logits.size());
        EXPECT_EQ(0, memcmp(tr.logits.data(), ref.logits.data(), ref.logits.size() * sizeof(float)))
            << "gear " << g << " prefill_blas " << blas << ": logits with " << t << " threads differ from 1 thread";
      }
    }
  gb_model_close(m);
}

TEST(Threads, LogitsBitIdenticalForAnyThreadCountStories260K) { expect_thread_invariant(gbt::stories260k_gbx()); }
TEST(Threads, LogitsBitIdenticalForAnyThreadCountStories5M) { expect_thread_invariant(gbt::stories5m_gbx()); }

}  // namespace
