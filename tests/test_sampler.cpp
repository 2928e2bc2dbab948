// test_sampler.cpp — the sampler (src/sampler.cpp): option validation, the
// NaN guard, the RNG's reproducibility (golden values from an independent
// splitmix64 + xoroshiro128+ implementation), greedy / top-k = 1, and the
// sampled distributions of both draw methods against the filtered,
// renormalised target, computed here in double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sampler.h"
#include "test_util.h"

namespace {

struct LogCapture {
  int errors = 0;
  std::string last;
  static void fn(void *user, gb_log_level level, const char *msg) {
    auto *c = static_cast<LogCapture *>(user);
    if (level == GB_LOG_ERROR) c->errors++;
    c->last = msg;
  }
};

gb_sampler_options defaults() {
  gb_sampler_options o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.seed = 42;
  o.method = GB_SAMPLE_MULTINOMIAL;
  return o;
}

// A sampler with its own scratch memory.
struct TestSampler {
  std::vector<uint64_t> mem;
  gb::Sampler s;
  TestSampler(const gb_sampler_options &o, uint32_t n) : mem(gb::sampler_mem_size(n) / 8 + 1) {
    gb::sampler_init(&s, o, n, mem.data());
  }
  int32_t sample(const std::vector<float> &logits) { return gb::sampler_sample(&s, logits.data()); }
};

// The distribution sampler_sample must draw from, computed independently:
// temperature, top-k, softmax, min-p (renormalised), top-p (renormalised).
std::vector<double> target(const std::vector<float> &logits, const gb_sampler_options &o) {
  const size_t n = logits.size();
  std::vector<double> x(n);
  for (size_t i = 0; i < n; i++) x[i] = (double)logits[i] / o.temperature;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] > x[b]; });
  if (o.top_k > 0 && o.top_k < n) order.resize(o.top_k);
  std::vector<double> p(n, 0.0);
  double sum = 0;
  for (size_t i : order) sum += std::exp(x[i] - x[order[0]]);
  for (size_t i : order) p[i] = std::exp(x[i] - x[order[0]]) / sum;
  auto renorm = [&] {
    const double t = std::accumulate(p.begin(), p.end(), 0.0);
    for (double &v : p) v /= t;
  };
  if (o.min_p > 0) {
    const double pmax = p[order[0]];
    for (double &v : p)
      if (v < o.min_p * pmax) v = 0;
    renorm();
  }
  if (o.top_p < 1) {
    double cum = 0;
    bool done = false;
    for (size_t i : order) {
      if (done) p[i] = 0;
      cum += p[i];
      if (cum >= o.top_p) done = true;
    }
    renorm();
  }
  return p;
}

// Pearson chi-square of counts against p over the support of p; any draw
// outside the support fails the test.
double chi_square(const std::vector<uint64_t> &counts, const std::vector<double> &p, uint64_t total, int *df) {
  double chi = 0;
  *df = -1;
  for (size_t i = 0; i < p.size(); i++) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0u) << "token " << i << " is outside the filtered distribution";
      continue;
    }
    const double e = p[i] * (double)total;
    chi += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
    (*df)++;
  }
  return chi;
}

void check_distribution(const std::vector<float> &logits, gb_sampler_options o, const char *what) {
  const std::vector<double> p = target(logits, o);
  for (gb_sample_method method : {GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL}) {
    o.method = method;
    o.seed = 1000 + (uint64_t)method;
    TestSampler ts(o, (uint32_t)logits.size());
    const uint64_t draws = 200000;
    std::vector<uint64_t> counts(logits.size(), 0);
    for (uint64_t d = 0; d < draws; d++) {
      const int32_t t = ts.sample(logits);
      ASSERT_GE(t, 0);
      ASSERT_LT((size_t)t, logits.size());
      counts[(size_t)t]++;
    }
    int df = 0;
    const double chi = chi_square(counts, p, draws, &df);
    // About a 1e-6 tail for the degrees of freedom used here; the seed is
    // fixed, so the test is deterministic either way.
    const double bound = df + 6.0 * std::sqrt(2.0 * std::max(df, 1)) + 10.0;
    EXPECT_LT(chi, bound) << what << (method == GB_SAMPLE_GUMBEL ? " (gumbel)" : " (multinomial)") << ", df " << df;
  }
}

std::vector<float> random_logits(uint32_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> l(n);
  for (float &v : l) v = nd(rng);
  return l;
}

TEST(Sampler, ValidateRejectsBadOptions) {
  LogCapture cap;
  gb::Logger log;
  log.fn = &LogCapture::fn;
  log.user = &cap;
  EXPECT_EQ(gb::sampler_validate(defaults(), log), GB_OK);
  auto bad = [&](void (*edit)(gb_sampler_options &)) {
    gb_sampler_options o = defaults();
    edit(o);
    const int before = cap.errors;
    const gb_status st = gb::sampler_validate(o, log);
    EXPECT_GT(cap.errors, before) << "no log line";
    return st;
  };
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.temperature = -0.5f; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.temperature = NAN; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.temperature = INFINITY; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.top_p = 0.0f; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.top_p = 1.01f; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.top_p = -0.2f; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.top_p = NAN; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.min_p = 1.0f; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.min_p = -0.01f; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.min_p = NAN; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.method = (gb_sample_method)2; }), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](gb_sampler_options &o) { o.method = (gb_sample_method)-1; }), GB_ERR_INVALID_ARGUMENT);
  // The edges that are allowed.
  gb_sampler_options o = defaults();
  o.temperature = 0.0f;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.top_k = 0xFFFFFFFFu;
  o.method = GB_SAMPLE_GUMBEL;
  EXPECT_EQ(gb::sampler_validate(o, log), GB_OK);
  o.top_p = 1e-6f;
  o.min_p = 0.999f;
  EXPECT_EQ(gb::sampler_validate(o, log), GB_OK);
}

TEST(Sampler, NanGuard) {
  float v[7] = {NAN, INFINITY, -INFINITY, 1.5f, -3.0f, 0.0f, -NAN};
  gb::nan_guard(v, 7);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 1e4f);
  EXPECT_EQ(v[2], -1e4f);
  EXPECT_EQ(v[3], 1.5f);
  EXPECT_EQ(v[4], -3.0f);
  EXPECT_EQ(v[5], 0.0f);
  EXPECT_EQ(v[6], 0.0f);
  gb::nan_guard(nullptr, 0);
}

// Golden values: splitmix64 -> xoroshiro128+ (24, 16, 37), top 24 bits.
TEST(Sampler, UniformStreamIsPortable) {
  const struct {
    uint64_t seed;
    uint32_t first[3];
  } golden[] = {
      {42, {15124245, 1291930, 8884230}},
      {0, {5282118, 14157308, 14343170}},
      {0xFFFFFFFFFFFFFFFFull, {13531497, 377609, 9036601}},
  };
  for (const auto &g : golden) {
    gb_sampler_options o = defaults();
    o.seed = g.seed;
    TestSampler ts(o, 4);
    for (uint32_t want : g.first) {
      const float u = gb::sampler_uniform(&ts.s);
      EXPECT_EQ(u * 16777216.0f, (float)want) << "seed " << g.seed;
    }
  }
  TestSampler ts(defaults(), 4);
  for (int i = 0; i < 100000; i++) {
    const float u = gb::sampler_uniform(&ts.s);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u * 16777216.0f, std::floor(u * 16777216.0f));
  }
}

TEST(Sampler, SameSeedSameTokens) {
  const std::vector<float> logits = random_logits(300, 1, 2.0f);
  for (gb_sample_method m : {GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL}) {
    gb_sampler_options o = defaults();
    o.method = m;
    o.top_k = 40;
    o.top_p = 0.95f;
    o.min_p = 0.01f;
    TestSampler a(o, 300), b(o, 300);
    o.seed = 43;
    TestSampler c(o, 300);
    std::vector<int32_t> ta, tb, tc;
    for (int i = 0; i < 500; i++) {
      ta.push_back(a.sample(logits));
      tb.push_back(b.sample(logits));
      tc.push_back(c.sample(logits));
    }
    EXPECT_EQ(ta, tb);
    EXPECT_NE(ta, tc);
    gb::sampler_reset(&a.s);
    for (int i = 0; i < 500; i++) ASSERT_EQ(a.sample(logits), ta[(size_t)i]) << "after reset, draw " << i;
  }
}

TEST(Sampler, GreedyIsArgmaxWithoutDrawing) {
  gb_sampler_options o = defaults();
  o.temperature = 0.0f;
  for (uint32_t seed = 0; seed < 50; seed++) {
    std::vector<float> logits = random_logits(1000, seed, 3.0f);
    const size_t want = (size_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
    TestSampler ts(o, 1000), fresh(o, 1000);
    EXPECT_EQ(ts.sample(logits), (int32_t)want);
    EXPECT_EQ(gb::sampler_uniform(&ts.s), gb::sampler_uniform(&fresh.s)) << "greedy drew from the RNG";
  }
  // Ties: the lowest index.
  std::vector<float> tie = {1, 5, 2, 5, 5};
  TestSampler ts(o, 5);
  EXPECT_EQ(ts.sample(tie), 1);
  std::vector<float> flat(100, -2.0f);
  TestSampler tf(o, 100);
  EXPECT_EQ(tf.sample(flat), 0);
}

TEST(Sampler, TopK1IsGreedy) {
  gb_sampler_options o = defaults();
  o.top_k = 1;
  for (gb_sample_method m : {GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL}) {
    o.method = m;
    for (uint32_t seed = 0; seed < 50; seed++) {
      std::vector<float> logits = random_logits(500, seed + 100, 1.0f);
      if (seed % 5 == 0) logits[7] = logits[3] = 50.0f;  // a tie for the top
      const int32_t want = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
      TestSampler ts(o, 500);
      for (int d = 0; d < 20; d++) ASSERT_EQ(ts.sample(logits), want);
    }
  }
}

TEST(Sampler, DistributionPlain) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, 1.2f, -1.0f, 0.7f, 0.1f, 1.6f};
  check_distribution(logits, defaults(), "T=1");
  gb_sampler_options o = defaults();
  o.temperature = 0.6f;
  check_distribution(logits, o, "T=0.6");
  o.temperature = 2.5f;
  check_distribution(logits, o, "T=2.5");
}

TEST(Sampler, DistributionTopK) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, 1.2f, -1.0f, 0.7f, 0.1f, 1.6f};
  gb_sampler_options o = defaults();
  o.top_k = 4;
  check_distribution(logits, o, "top_k=4");
  o.top_k = 10;  // == n: off
  check_distribution(logits, o, "top_k=n");
}

TEST(Sampler, DistributionMinP) {
  // p relative to the max: 1, e^-1, e^-2, e^-3, e^-4 ... ; min_p 0.1 keeps
  // the first three (e^-2 = 0.135 >= 0.1 > e^-3 = 0.050).
  const std::vector<float> logits = {0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -5.0f, -2.5f, -6.0f};
  gb_sampler_options o = defaults();
  o.min_p = 0.1f;
  const std::vector<double> p = target(logits, o);
  EXPECT_GT(p[2], 0);
  EXPECT_EQ(p[3], 0);
  EXPECT_EQ(p[6], 0);  // e^-2.5 = 0.082 < 0.1
  check_distribution(logits, o, "min_p=0.1");
}

TEST(Sampler, DistributionTopP) {
  // Probabilities 0.4, 0.3, 0.15, 0.1, 0.05: top_p 0.8 keeps the first three
  // (0.7 < 0.8 <= 0.85).
  const std::vector<float> logits = {std::log(0.15f), std::log(0.4f), std::log(0.05f), std::log(0.3f),
                                     std::log(0.1f)};
  gb_sampler_options o = defaults();
  o.top_p = 0.8f;
  const std::vector<double> p = target(logits, o);
  EXPECT_EQ(p[4], 0);
  EXPECT_EQ(p[2], 0);
  EXPECT_GT(p[0], 0);
  check_distribution(logits, o, "top_p=0.8");
}

TEST(Sampler, DistributionAllFilters) {
  const std::vector<float> logits = random_logits(40, 7, 0.7f);
  gb_sampler_options o = defaults();
  o.temperature = 0.8f;
  o.top_k = 20;
  o.min_p = 0.05f;
  o.top_p = 0.9f;
  const std::vector<double> p = target(logits, o);
  const size_t support = (size_t)std::count_if(p.begin(), p.end(), [](double v) { return v > 0; });
  printf("[ sampler  ] all filters: %zu of 40 tokens kept\n", support);
  EXPECT_GT(support, 2u);
  EXPECT_LT(support, 20u);
  check_distribution(logits, o, "all filters");
}

// Filters must never let an excluded token through, whatever the draws.
TEST(Sampler, FiltersNeverSampleExcluded) {
  for (uint32_t seed = 0; seed < 20; seed++) {
    const std::vector<float> logits = random_logits(500, seed, 2.0f + (float)(seed % 4));
    for (gb_sample_method m : {GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL}) {
      gb_sampler_options o = defaults();
      o.method = m;
      o.seed = seed;
      o.min_p = (seed % 3 == 0) ? 0.2f : 0.0f;
      o.top_p = (seed % 3 == 1) ? 0.5f : 1.0f;
      o.top_k = (seed % 3 == 2) ? 5 : 0;
      const std::vector<double> p = target(logits, o);
      TestSampler ts(o, 500);
      for (int d = 0; d < 1000; d++) {
        const int32_t t = ts.sample(logits);
        ASSERT_GT(p[(size_t)t], 0) << "seed " << seed << " sampled excluded token " << t;
      }
    }
  }
}

// A nucleus smaller than every token's probability is the top token alone
// (llama2.c's cutoff would discard every candidate here).
TEST(Sampler, TinyTopPKeepsTheTopToken) {
  std::vector<float> flat(64, 0.0f);
  gb_sampler_options o = defaults();
  o.top_p = 1e-4f;
  for (gb_sample_method m : {GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL}) {
    o.method = m;
    TestSampler ts(o, 64);
    for (int d = 0; d < 100; d++) ASSERT_EQ(ts.sample(flat), 0);
  }
  std::vector<float> l = random_logits(64, 3, 0.01f);
  TestSampler ts(o, 64);
  const int32_t want = (int32_t)(std::max_element(l.begin(), l.end()) - l.begin());
  for (int d = 0; d < 100; d++) ASSERT_EQ(ts.sample(l), want);
}

TEST(Sampler, ExtremeTemperaturesAndGuardedLogits) {
  std::vector<float> logits = random_logits(100, 9, 1.0f);
  logits[17] = 1e4f;  // +inf after the guard
  logits[3] = -1e4f;
  gb_sampler_options o = defaults();
  o.temperature = 1e-30f;  // logits / T overflow float
  for (gb_sample_method m : {GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL}) {
    o.method = m;
    TestSampler ts(o, 100);
    for (int d = 0; d < 50; d++) ASSERT_EQ(ts.sample(logits), 17);
  }
  o.temperature = 1e30f;  // flat
  TestSampler ts(o, 100);
  std::vector<int> seen(100, 0);
  for (int d = 0; d < 20000; d++) seen[(size_t)ts.sample(logits)]++;
  for (int c : seen) EXPECT_GT(c, 100);
}

TEST(Sampler, SingleTokenVocabulary) {
  const std::vector<float> one = {0.3f};
  for (gb_sample_method m : {GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL}) {
    gb_sampler_options o = defaults();
    o.method = m;
    o.top_p = 0.5f;
    o.min_p = 0.5f;
    o.top_k = 3;
    TestSampler ts(o, 1);
    EXPECT_EQ(ts.sample(one), 0);
  }
}

TEST(Sampler, DoesNotAllocate) {
  const std::vector<float> logits = random_logits(4096, 5, 2.0f);
  gb_sampler_options o = defaults();
  o.top_k = 100;
  o.top_p = 0.9f;
  o.min_p = 0.01f;
  for (gb_sample_method m : {GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL}) {
    o.method = m;
    TestSampler ts(o, 4096);
    gbt::alloc_count_start();
    for (int d = 0; d < 50; d++) ts.sample(logits);
    gb::sampler_reset(&ts.s);
    const uint64_t n = gbt::alloc_count_stop();
    EXPECT_EQ(n, 0u);
  }
}

}  // namespace
