// test_spec.cpp — the speculative gear (GB_GEAR_SPEC): greedy
// output bit-identical to the verifying tier alone, the sampling rule keeping
// the verifier's distribution (a chi-square test, with a negative control
// showing the test would catch the draft's distribution), rollback when new
// input arrives mid-round, telemetry, and bad options.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert.h"
#include "test_util.h"

namespace {

// GB_TEST_SCALE (tests/run.sh sets it for the emulated aarch64 runs) shrinks
// the token and sample counts; 1 on native runs.
double scale() { return gbt::test_scale(); }
size_t scaled(size_t n, size_t at_least) {
  const size_t v = (size_t)((double)n * scale());
  return v > at_least ? v : at_least;
}

struct Model {
  gb_model *m = nullptr;
  explicit Model(const std::string &path) { EXPECT_EQ(gb_model_open_file(path.c_str(), nullptr, &m), GB_OK); }
  ~Model() { gb_model_close(m); }
};

std::vector<int32_t> prompt_tokens(gb_model *m, const char *text) {
  std::vector<int32_t> t(512);
  size_t n = 0;
  EXPECT_EQ(gb_tokenize(m, text, strlen(text), GB_TOKENIZE_ADD_BOS, t.data(), t.size(), &n), GB_OK);
  t.resize(n);
  return t;
}

// Greedy tokens of a session with these options after the prompt; the step
// info of every spec round into *infos when asked.
std::vector<int32_t> generate(gb_model *m, gb_session_options so, const std::vector<int32_t> &prompt, size_t n,
                              uint64_t *rounds = nullptr, uint64_t *accepted = nullptr, uint64_t *drafted = nullptr,
                              std::vector<gb_step_info> *infos = nullptr) {
  so.sampler.temperature = 0.0f;
  gb_session *s = nullptr;
  std::vector<int32_t> out;
  if (gb_session_create(m, &so, nullptr, 0, &s) != GB_OK) return out;
  EXPECT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK);
  for (size_t i = 0; i < n; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t;
    const gb_status st = gb_decode_step(s, &t, &info);
    if (st == GB_ERR_CONTEXT_FULL) break;
    EXPECT_EQ(st, GB_OK);
    if (st != GB_OK) break;
    if (info.spec_round) {
      if (rounds) ++*rounds;
      if (accepted) *accepted += info.spec_accepted;
      if (drafted) *drafted += info.spec_drafted;
      EXPECT_LE(info.spec_accepted, info.spec_drafted);
      EXPECT_GT(info.weight_bytes_read, 0u);
      if (infos) infos->push_back(info);
    }
    out.push_back(t);
  }
  gb_session_destroy(s);
  return out;
}

gb_session_options spec_options(gb_gear verify = GB_GEAR_HIGH) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = GB_GEAR_SPEC;
  so.spec_verify_gear = verify;
  so.log = gbt::quiet_log;
  return so;
}

gb_session_options plain_options(gb_gear g) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = g;
  so.log = gbt::quiet_log;
  return so;
}

const char *kPrompts[] = {"Once upon a time", "Tom and his mom went to the park. They saw a big", "The little bird"};

void expect_same_as_verifier(const std::string &path, size_t tokens_per_prompt, double min_accept) {
  Model md(path);
  ASSERT_NE(md.m, nullptr);
  size_t total = 0;
  uint64_t rounds = 0, accepted = 0, drafted = 0;
  for (const char *p : kPrompts) {
    const std::vector<int32_t> prompt = prompt_tokens(md.m, p);
    // The context holds the whole generation: the n_ctx limit is its own test.
    gb_session_options ps = plain_options(GB_GEAR_HIGH), ss = spec_options();
    const uint32_t ctx = (uint32_t)(prompt.size() + tokens_per_prompt + 1);
    ps.n_ctx = ss.n_ctx = ctx;
    const std::vector<int32_t> want = generate(md.m, ps, prompt, tokens_per_prompt);
    const std::vector<int32_t> got = generate(md.m, ss, prompt, tokens_per_prompt, &rounds, &accepted, &drafted);
    ASSERT_EQ(want.size(), got.size()) << p;
    for (size_t i = 0; i < want.size(); i++) ASSERT_EQ(want[i], got[i]) << "prompt '" << p << "', token " << i;
    total += got.size();
  }
  printf("%s: %zu greedy tokens identical to the high tier alone; %llu rounds, %llu of %llu drafts accepted\n", path.c_str(),
         total, (unsigned long long)rounds, (unsigned long long)accepted, (unsigned long long)drafted);
  EXPECT_GT((double)accepted, min_accept * (double)drafted);  // the low tier is a useful draft of the high one
}

TEST(Spec, GreedyIsTheVerifierBitForBitStories260K) { expect_same_as_verifier(gbt::stories260k_gbx(), scaled(700, 100), 0.4); }

TEST(Spec, GreedyIsTheVerifierBitForBitStories5M) { expect_same_as_verifier(gbt::stories5m_gbx(), scaled(240, 40), 0.7); }

// Other settings keep the identity: mid as verifier, threads, a draft that
// stops early on entropy, short drafts, the generic kernels. On stories5M;
// under emulation (GB_TEST_SCALE < 1) on stories260K, whose f16 verifier
// the emulator's software f16 arithmetic computes a tenth as long.
TEST(Spec, GreedyIdentityAcrossOptions) {
  Model md(gbt::test_scale() >= 1.0 ? gbt::stories5m_gbx() : gbt::stories260k_gbx());
  const std::vector<int32_t> prompt = prompt_tokens(md.m, kPrompts[1]);
  const size_t n = scaled(120, 30);
  struct Case {
    const char *name;
    gb_gear verify;
    uint32_t k, threads, deterministic;
    float stop;
    uint32_t adapt;
  } cases[] = {{"verify mid", GB_GEAR_MID, 8, 1, 0, 0.0f, 1},
               {"2 threads", GB_GEAR_HIGH, 8, 2, 0, 0.0f, 1},
               {"entropy stop 1.5 bits", GB_GEAR_HIGH, 15, 1, 0, 1.5f, 1},
               {"k = 1", GB_GEAR_HIGH, 1, 1, 0, 0.0f, 1},
               {"fixed k = 8", GB_GEAR_HIGH, 8, 1, 0, 0.0f, 0},
               {"k by measured time", GB_GEAR_HIGH, 8, 1, 0, 0.0f, 2},
               {"generic kernels", GB_GEAR_HIGH, 4, 1, 1, 0.0f, 1}};
  for (const Case &c : cases) {
    if (c.threads > 1 && !gbt::threads_available()) continue;  // GB_TEST_NO_THREADS: this emulator cannot start threads
    gb_session_options ps = plain_options(c.verify), ss = spec_options(c.verify);
    ps.n_threads = ss.n_threads = c.threads;
    ps.deterministic = ss.deterministic = c.deterministic;
    ss.spec_k = c.k;
    gbt::x(ss).spec_stop_entropy = c.stop;
    gbt::x(ss).spec_adapt = c.adapt;
    uint64_t rounds = 0, accepted = 0, drafted = 0;
    const std::vector<int32_t> want = generate(md.m, ps, prompt, n);
    const std::vector<int32_t> got = generate(md.m, ss, prompt, n, &rounds, &accepted, &drafted);
    EXPECT_EQ(want, got) << c.name;
    EXPECT_GT(rounds, 0u) << c.name;
    if (c.k == 1) {
      EXPECT_GE(rounds, n / 2) << c.name;  // at most two tokens per round
    }
  }
}

// A draft that is rarely right (random weights: the q4 tier's argmax often
// differs from the f16 tier's): the adaptive rule stops drafting (rounds of
// the verifier alone, a one-token probe every 16th), the draft pool catches
// up in batched passes when drafting resumes, the tokens stay the verifier's,
// and the weight bytes per token stay near the verifier's own instead of
// paying for rejected drafts.
TEST(Spec, PoorDraftFallsBackToTheVerifier) {
  const std::string path = gbt::temp_dir() + "/spec_random.gbx";
  gb::ConvertOptions co;
  co.tiers = (1u << GB_GEAR_LOW) | (1u << GB_GEAR_HIGH);
  co.log.fn = gbt::quiet_log;
  ASSERT_EQ(
      gb::convert_synthetic("dim=128,layers=2,hidden=384,heads=4,kv_heads=2,vocab=2048,seq_len=512,seed=3", path.c_str(), co),
      GB_OK);
  Model md(path);
  ASSERT_NE(md.m, nullptr);
  const std::vector<int32_t> prompt = {1, 300, 301, 302};
  const size_t n = scaled(300, 120);
  gb_session_options ps = plain_options(GB_GEAR_HIGH), ss = spec_options();
  gbt::x(ss).spec_adapt = 1;  // the rule on bytes, which this test counts (the timed one depends on the clock)
  const std::vector<int32_t> want = generate(md.m, ps, prompt, n);
  // Rounds counted by draft length, and their weight bytes.
  std::vector<gb_step_info> infos;
  const std::vector<int32_t> got = generate(md.m, ss, prompt, n, nullptr, nullptr, nullptr, &infos);
  uint64_t zero = 0, probes = 0, longer = 0, bytes = 0, accepted = 0, drafted = 0;
  for (const gb_step_info &info : infos) {
    bytes += info.weight_bytes_read;
    accepted += info.spec_accepted;
    drafted += info.spec_drafted;
    (info.spec_drafted == 0 ? zero : info.spec_drafted == 1 ? probes : longer)++;
  }
  EXPECT_EQ(want, got);
  // The verifier alone: weight bytes of one decode step.
  double high_bytes = 0.0;
  {
    gb_session *h = nullptr;
    ASSERT_EQ(gb_session_create(md.m, &ps, nullptr, 0, &h), GB_OK);
    ASSERT_EQ(gb_prefill(h, prompt.data(), prompt.size()), GB_OK);
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t;
    ASSERT_EQ(gb_decode_step(h, &t, &info), GB_OK);
    high_bytes = (double)info.weight_bytes_read;
    gb_session_destroy(h);
  }
  ASSERT_GT(high_bytes, 0.0);
  const double per_token = (double)bytes / (double)n;
  printf(
      "random-weight model: %llu of %llu drafts accepted; rounds: %llu without drafts, %llu of one draft, %llu longer; "
      "%.3f x the verifier's weight bytes per token\n",
      (unsigned long long)accepted, (unsigned long long)drafted, (unsigned long long)zero, (unsigned long long)probes,
      (unsigned long long)longer, per_token / high_bytes);
  EXPECT_LT((double)accepted, 0.5 * (double)drafted);  // the premise: a poor draft
  // The starting estimate: one or two rejections do not stop drafting, so
  // the first three rounds draft (from no counts, a rejection in the first
  // round meant 16 rounds on the verifier alone).
  ASSERT_GE(infos.size(), 3u);
  for (size_t i = 0; i < 3; i++) EXPECT_GT(infos[i].spec_drafted, 0u) << "round " << i;
  EXPECT_GT(zero, 0u);
  EXPECT_GT(probes, 0u);
  EXPECT_LT(per_token, 1.15 * high_bytes);
}

// The timed rule (the default) starts with one draft and never drafts more
// than one token past the longest round it has measured; with
// deterministic = 1 it counts bytes instead, whose first round drafts what
// the starting acceptance estimate pays for. Either way the tokens are the
// verifier's.
TEST(Spec, TimedRuleLengthensOneStepAtATime) {
  Model md(gbt::stories5m_gbx());
  const std::vector<int32_t> prompt = prompt_tokens(md.m, kPrompts[0]);
  const size_t n = scaled(160, 40);
  gb_session_options ps = plain_options(GB_GEAR_HIGH);
  const std::vector<int32_t> want = generate(md.m, ps, prompt, n);
  for (uint32_t det : {0u, 1u}) {
    SCOPED_TRACE(det ? "deterministic" : "timed");
    gb_session_options ss = spec_options();
    gb_session_options defaults;
    gb_session_options_init(&defaults);
    ASSERT_EQ(gbt::x(defaults).spec_adapt, 2u);
    gbt::x(ss).spec_adapt = gbt::x(defaults).spec_adapt;
    ss.spec_k = 8;
    ss.deterministic = ps.deterministic = det;
    std::vector<gb_step_info> infos;
    const std::vector<int32_t> got = generate(md.m, ss, prompt, n, nullptr, nullptr, nullptr, &infos);
    std::vector<uint32_t> lengths;
    for (const gb_step_info &info : infos) lengths.push_back(info.spec_drafted);
    EXPECT_EQ(det ? generate(md.m, ps, prompt, n) : want, got);
    ASSERT_GT(lengths.size(), 2u);
    if (det) {
      // Bytes from the first round, at the starting estimate (3/4): longer
      // than the timed rule's one draft, short of spec_k (at a = 3/4 a
      // draft past the third does not pay for its bytes).
      EXPECT_GT(lengths[0], 1u);
      EXPECT_LT(lengths[0], 8u);
      continue;
    }
    EXPECT_EQ(lengths[0], 1u);
    uint32_t longest = 0, above_one = 0;
    for (uint32_t d : lengths) {
      EXPECT_LE(d, longest + 1);
      longest = d > longest ? d : longest;
      above_one += d > 1;
    }
    EXPECT_GT(above_one, 0u);  // it does lengthen (the draft's greedy tokens agree often here)
  }
}

// New input in the middle of a round: the tokens not handed out leave the
// context, and the session continues as the verifier alone would.
TEST(Spec, PrefillMidRoundRollsBack) {
  Model md(gbt::stories260k_gbx());
  const std::vector<int32_t> prompt = prompt_tokens(md.m, kPrompts[0]);
  const std::vector<int32_t> more = prompt_tokens(md.m, " and the dog");
  std::vector<int32_t> seq[2];
  for (int v = 0; v < 2; v++) {
    gb_session_options so = v ? spec_options() : plain_options(GB_GEAR_HIGH);
    so.sampler.temperature = 0.0f;
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &s), GB_OK);
    ASSERT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK);
    int32_t t;
    for (int i = 0; i < 3; i++) {  // mid-round: a round hands out several tokens
      ASSERT_EQ(gb_decode_step(s, &t, nullptr), GB_OK);
      seq[v].push_back(t);
    }
    ASSERT_EQ(gb_prefill(s, more.data() + 1, more.size() - 1), GB_OK);  // without BOS
    uint32_t pos = 0;
    gb_session_position(s, &pos, nullptr);
    seq[v].push_back((int32_t)pos);
    for (int i = 0; i < 3; i++) {
      ASSERT_EQ(gb_decode_step(s, &t, nullptr), GB_OK);
      seq[v].push_back(t);
    }
    // Teacher forcing mid-round: the next-token logits are the verifier's.
    gb_step_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_feed(s, more[1], &info), GB_OK);
    int32_t best = 0;
    for (uint32_t j = 1; j < info.n_vocab; j++) best = info.logits[j] > info.logits[best] ? (int32_t)j : best;
    seq[v].push_back(best);
    ASSERT_EQ(gb_prefill(s, &best, 1), GB_OK);
    for (int i = 0; i < 40; i++) {
      ASSERT_EQ(gb_decode_step(s, &t, nullptr), GB_OK);
      seq[v].push_back(t);
    }
    gb_session_destroy(s);
  }
  EXPECT_EQ(seq[0], seq[1]);
}

// Chi-square statistic of counts against probabilities (bins with an
// expected count below 5 pooled), its degrees of freedom, and the critical
// value at p = 1e-4 (Wilson-Hilferty).
struct Chi2 {
  double stat = 0, crit = 0;
  int df = 0;
};
Chi2 chi2(const std::map<int32_t, int> &counts, const std::vector<float> &p, int n) {
  Chi2 r;
  double pool_e = 0, pool_o = 0;
  int bins = 0;
  for (size_t t = 0; t < p.size(); t++) {
    const double e = (double)p[t] * n;
    const auto it = counts.find((int32_t)t);
    const double o = it == counts.end() ? 0.0 : it->second;
    if (e < 5.0) {
      pool_e += e;
      pool_o += o;
      continue;
    }
    r.stat += (o - e) * (o - e) / e;
    bins++;
  }
  if (pool_e > 0.0) {
    r.stat += (pool_o - pool_e) * (pool_o - pool_e) / (pool_e > 1e-9 ? pool_e : 1e-9);
    bins++;
  }
  r.df = bins - 1;
  const double k = r.df, z = 3.719;
  r.crit = k * pow(1.0 - 2.0 / (9.0 * k) + z * sqrt(2.0 / (9.0 * k)), 3.0);
  return r;
}

// The first token after a prompt, sampled at T = 1 over many seeds, against
// the high tier's softmax. The spec gear's tokens come from drafts accepted
// with probability min(1, p/q) or from the residual max(0, p - q): if the
// rule were wrong the mix would drift toward the low tier's q. The negative
// control samples the low tier itself and must fail the same test.
TEST(Spec, SamplingKeepsTheVerifierDistribution) {
  Model md(gbt::stories260k_gbx());
  const std::vector<int32_t> prompt = prompt_tokens(md.m, "Once upon a time, there was a");
  const int N = (int)scaled(3000, 500);
  // p: the high tier's distribution of the first token.
  std::vector<float> p;
  {
    gb_session_options so = plain_options(GB_GEAR_HIGH);
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &s), GB_OK);
    ASSERT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK);
    gb_step_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_decode_step(s, nullptr, &info), GB_OK);
    double mx = -1e30, z = 0;
    for (uint32_t i = 0; i < info.n_vocab; i++) mx = info.logits[i] > mx ? info.logits[i] : mx;
    p.resize(info.n_vocab);
    for (uint32_t i = 0; i < info.n_vocab; i++) z += exp(info.logits[i] - mx);
    for (uint32_t i = 0; i < info.n_vocab; i++) p[i] = (float)(exp(info.logits[i] - mx) / z);
    gb_session_destroy(s);
  }
  auto sample_first = [&](gb_gear g, std::map<int32_t, int> *counts, uint64_t *accepted_first) {
    gb_session_options so = g == GB_GEAR_SPEC ? spec_options() : plain_options(g);
    so.sampler.temperature = 1.0f;
    size_t bytes = 0;
    ASSERT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_OK);
    void *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    for (int r = 0; r < N; r++) {
      so.sampler.seed = 1000 + (uint64_t)r;
      gb_session *s = nullptr;
      ASSERT_EQ(gb_session_create(md.m, &so, mem, bytes, &s), GB_OK);
      ASSERT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK);
      gb_step_info info;
      info.struct_size = sizeof info;
      int32_t t;
      ASSERT_EQ(gb_decode_step(s, &t, &info), GB_OK);
      (*counts)[t]++;
      if (accepted_first && info.spec_accepted > 0) ++*accepted_first;
      gb_session_destroy(s);
    }
    free(mem);
  };
  std::map<int32_t, int> spec_counts, low_counts;
  uint64_t accepted_first = 0;
  sample_first(GB_GEAR_SPEC, &spec_counts, &accepted_first);
  sample_first(GB_GEAR_LOW, &low_counts, nullptr);
  const Chi2 cs = chi2(spec_counts, p, N), cl = chi2(low_counts, p, N);
  printf("spec vs high softmax: chi2 %.1f, df %d, critical %.1f (p = 1e-4); first draft accepted in %llu of %d runs\n", cs.stat,
         cs.df, cs.crit, (unsigned long long)accepted_first, N);
  printf("negative control, low tier vs high softmax: chi2 %.1f, df %d, critical %.1f\n", cl.stat, cl.df, cl.crit);
  EXPECT_LT(cs.stat, cs.crit);
  EXPECT_GT(cl.stat, cl.crit) << "the test cannot tell the draft's distribution from the verifier's";
  EXPECT_GT(accepted_first, (uint64_t)N / 2) << "the acceptance path was barely exercised";
  EXPECT_LT(accepted_first, (uint64_t)N) << "the rejection path was never exercised";
}

TEST(Spec, BadOptionsAreRefused) {
  Model md(gbt::stories260k_gbx());
  size_t bytes = 0;
  gb_session_options so = spec_options();
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_OK);
  so.spec_k = 0;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_ERR_INVALID_ARGUMENT);
  so.spec_k = 16;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_ERR_INVALID_ARGUMENT);
  so = spec_options();
  so.spec_verify_gear = GB_GEAR_LOW;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_ERR_INVALID_ARGUMENT);
  so = spec_options();
  so.spec_draft_gear = GB_GEAR_HIGH;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_ERR_INVALID_ARGUMENT);
  so = spec_options();
  gbt::x(so).spec_stop_entropy = NAN;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_ERR_INVALID_ARGUMENT);
  so = spec_options();
  so.kv.policy = GB_KV_WINDOW;
  so.kv.beta = 0.5f;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_ERR_INVALID_ARGUMENT);
  so = spec_options();
  so.kv.evict = 1;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_ERR_INVALID_ARGUMENT);
  so = spec_options();
  gbt::x(so).spec_adapt = 2;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_OK);
  gbt::x(so).spec_adapt = 3;
  EXPECT_EQ(gb_session_mem_size(md.m, &so, &bytes), GB_ERR_INVALID_ARGUMENT);
}

// The end of the context: rounds shrink to fit, then context-full, with every
// token still the verifier's.
TEST(Spec, ContextEndIsTheVerifiers) {
  Model md(gbt::stories260k_gbx());
  const std::vector<int32_t> prompt = prompt_tokens(md.m, kPrompts[0]);
  gb_session_options ps = plain_options(GB_GEAR_HIGH), ss = spec_options();
  ps.n_ctx = ss.n_ctx = 40;
  const std::vector<int32_t> want = generate(md.m, ps, prompt, 100);
  const std::vector<int32_t> got = generate(md.m, ss, prompt, 100);
  EXPECT_EQ(want, got);
  EXPECT_LT(got.size(), 100u);
}

}  // namespace
