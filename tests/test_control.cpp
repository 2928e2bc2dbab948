// test_control.cpp — generation control (gearbx.h: logit bias, repetition /
// frequency / presence penalties, stop strings, end-of-generation flag, the
// abort callback) on the shared stories models: each changes exactly what its
// contract says, greedy runs lose their repeated n-grams under penalties,
// an abort leaves the session usable with the same tokens as an
// uninterrupted run, and every bad option is refused.
#include <gtest/gtest.h>

#include <math.h>
#include <string.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

struct Gen {
  std::vector<int32_t> toks;
  std::vector<gb_step_info> infos;
  std::string text;
  std::vector<size_t> text_end;  // bytes of text after each token
  gb_status last = GB_OK;
};

gb_model *open_260k() {
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  EXPECT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
  return m;
}

gb_session_options greedy() {
  gb_session_options o;
  gb_session_options_init(&o);
  o.gear = GB_GEAR_HIGH;
  o.sampler.temperature = 0.0f;
  o.n_ctx = 256;
  o.log = gbt::quiet_log;
  return o;
}

std::vector<int32_t> prompt(gb_model *m, const char *text) {
  std::vector<int32_t> ids(GB_TOKENIZE_CAPACITY(strlen(text)));
  size_t n = 0;
  EXPECT_EQ(gb_tokenize(m, text, strlen(text), GB_TOKENIZE_ADD_BOS, ids.data(), ids.size(), &n), GB_OK);
  ids.resize(n);
  return ids;
}

Gen generate(gb_model *m, const gb_session_options &o, const std::vector<int32_t> &p, int n, bool stop_at_end = false) {
  Gen r;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  if (!s) return r;
  EXPECT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
  int32_t prev = p.back();
  for (int i = 0; i < n; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t = -1;
    r.last = gb_decode_step(s, &t, &info);
    if (r.last != GB_OK) break;
    r.toks.push_back(t);
    r.infos.push_back(info);
    const char *piece;
    size_t len;
    if (gb_token_to_text(m, prev, t, &piece, &len) == GB_OK) r.text.append(piece, len);
    r.text_end.push_back(r.text.size());
    prev = t;
    if (stop_at_end && info.end != GB_STEP_END_NONE) break;
  }
  gb_session_destroy(s);
  return r;
}

// Repeated n-grams: occurrences of an n-gram beyond its first.
size_t repeated_ngrams(const std::vector<int32_t> &t, size_t n) {
  std::map<std::vector<int32_t>, int> seen;
  size_t rep = 0;
  for (size_t i = 0; i + n <= t.size(); i++) rep += seen[std::vector<int32_t>(t.begin() + i, t.begin() + i + n)]++ > 0;
  return rep;
}

}  // namespace

TEST(Control, PenaltiesCutRepeatedNgramsOnAGreedyRun) {
  gb_model *m = open_260k();
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> p = prompt(m, "Once upon a time");
  gb_session_options o = greedy();
  const Gen base = generate(m, o, p, 200);
  ASSERT_EQ(base.toks.size(), 200u);
  const size_t base_rep = repeated_ngrams(base.toks, 3);
  ASSERT_GT(base_rep, 10u) << "the baseline should repeat itself (tiny model, greedy)";
  struct {
    float repeat, freq, presence;
  } cases[] = {{1.3f, 0, 0}, {1.0f, 0.5f, 0}, {1.0f, 0, 1.0f}};
  for (const auto &c : cases) {
    o = greedy();
    o.repeat_penalty = c.repeat;
    o.frequency_penalty = c.freq;
    o.presence_penalty = c.presence;
    o.penalty_window = 64;
    const Gen pen = generate(m, o, p, 200);
    ASSERT_EQ(pen.toks.size(), 200u);
    const size_t rep = repeated_ngrams(pen.toks, 3);
    EXPECT_LT(rep * 2, base_rep) << "repeat " << c.repeat << " freq " << c.freq << " presence " << c.presence << ": " << rep
                                 << " repeated trigrams vs " << base_rep;
  }
  gb_model_close(m);
}

TEST(Control, PenaltiesAndBiasChangeExactlyTheirTokens) {
  gb_model *m = open_260k();
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> p = prompt(m, "Once upon a time, Lily saw a big dog. Lily");
  const uint32_t V = 512;
  gb_session_options o = greedy();
  std::vector<float> base(V), pen(V);
  auto logits = [&](const gb_session_options &opt, std::vector<float> *out) {
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m, &opt, nullptr, 0, &s), GB_OK);
    ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t;
    ASSERT_EQ(gb_decode_step(s, &t, &info), GB_OK);
    ASSERT_EQ(info.n_vocab, V);
    out->assign(info.logits, info.logits + V);
    gb_session_destroy(s);
  };
  logits(o, &base);
  const uint32_t window = 8;  // the last 8 prompt tokens
  std::map<int32_t, int> count;
  for (size_t i = p.size() - window; i < p.size(); i++) count[p[i]]++;
  o.repeat_penalty = 2.0f;
  o.frequency_penalty = 0.25f;
  o.presence_penalty = 0.5f;
  o.penalty_window = window;
  const gb_logit_bias bias[] = {{7, -3.0f}, {p.back(), 1.5f}};
  o.logit_bias = bias;
  o.n_logit_bias = 2;
  logits(o, &pen);
  for (uint32_t t = 0; t < V; t++) {
    float want = base[t];
    for (const gb_logit_bias &b : bias)
      if (b.token == (int32_t)t) want += b.bias;
    auto it = count.find((int32_t)t);
    if (it != count.end()) {
      want -= 0.25f * (float)it->second + 0.5f;
      want = want > 0 ? want / 2.0f : want * 2.0f;
    }
    EXPECT_NEAR(pen[t], want, 1e-4f * (1.0f + fabsf(want))) << "token " << t;
  }
  // A banned token never comes; a strongly favoured one always does.
  o = greedy();
  const Gen free_run = generate(m, o, p, 20);
  ASSERT_FALSE(free_run.toks.empty());
  const gb_logit_bias ban[] = {{free_run.toks[0], -INFINITY}};
  o.logit_bias = ban;
  o.n_logit_bias = 1;
  const Gen banned = generate(m, o, p, 20);
  for (int32_t t : banned.toks) EXPECT_NE(t, free_run.toks[0]);
  const gb_logit_bias force[] = {{300, 1000.0f}};
  o.logit_bias = force;
  const Gen forced = generate(m, o, p, 10);
  for (int32_t t : forced.toks) EXPECT_EQ(t, 300);
  gb_model_close(m);
}

TEST(Control, StopStringsAndEndOfGeneration) {
  gb_model *m = open_260k();
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> p = prompt(m, "Once upon a time");
  gb_session_options o = greedy();
  const Gen base = generate(m, o, p, 120);
  ASSERT_EQ(base.toks.size(), 120u);
  for (const gb_step_info &i : base.infos) EXPECT_EQ(i.end, (uint32_t)GB_STEP_END_NONE);
  // A stop string inside one token's text, and one spanning a boundary.
  size_t k = 1;
  while (k + 1 < base.toks.size() && (base.text_end[k + 1] - base.text_end[k] < 3 || base.text_end[k] - base.text_end[k - 1] < 2)) k++;
  ASSERT_LT(k + 1, base.toks.size());
  const std::string across = base.text.substr(base.text_end[k] - 2, 4);  // 2 bytes of token k, 2 of k + 1
  const std::string word = " Lily";
  const size_t first_lily = base.text.find(word);
  ASSERT_NE(first_lily, std::string::npos);
  for (const std::string &stop : {word, across}) {
    const size_t at = base.text.find(stop);
    ASSERT_NE(at, std::string::npos);
    size_t tok = 0;  // the token whose text completes the first occurrence
    while (base.text_end[tok] < at + stop.size()) tok++;
    const char *stops[] = {"never appears in this story", stop.c_str()};
    o = greedy();
    o.stop_strings = stops;
    o.n_stop_strings = 2;
    const Gen r = generate(m, o, p, 120, true);
    ASSERT_EQ(r.toks.size(), tok + 1) << stop;
    const gb_step_info &last = r.infos.back();
    EXPECT_EQ(last.end, (uint32_t)GB_STEP_END_STOP) << stop;
    EXPECT_EQ(last.stop_index, 1u);
    EXPECT_EQ(last.stop_trim, r.text.size() - at) << stop;
    EXPECT_EQ(r.text.substr(0, r.text.size() - last.stop_trim), base.text.substr(0, at)) << stop;
    for (size_t i = 0; i + 1 < r.infos.size(); i++) EXPECT_EQ(r.infos[i].end, (uint32_t)GB_STEP_END_NONE);
    // The same tokens as without the stop string (it only reports).
    EXPECT_EQ(std::vector<int32_t>(base.toks.begin(), base.toks.begin() + (long)r.toks.size()), r.toks);
  }
  // End of generation: a forced EOS is flagged.
  o = greedy();
  const gb_logit_bias eos[] = {{2, 1000.0f}};
  o.logit_bias = eos;
  o.n_logit_bias = 1;
  const Gen e = generate(m, o, p, 3);
  ASSERT_EQ(e.toks.size(), 3u);
  EXPECT_EQ(e.toks[0], 2);
  EXPECT_EQ(e.infos[0].end, (uint32_t)GB_STEP_END_EOG);
  gb_model_close(m);
}

namespace {
struct Abort {
  int calls = 0, at = -1;  // abort on call number `at` (0-based), -1 never
};
int abort_cb(void *user) {
  Abort *a = static_cast<Abort *>(user);
  return a->calls++ == a->at ? 1 : 0;
}
}  // namespace

TEST(Control, AbortLeavesTheSessionUsable) {
  gb_model *m = open_260k();
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> p = prompt(m, "Once upon a time, there was a little dog named Max who liked to run");
  ASSERT_GT(p.size(), 12u);
  gb_session_options o = greedy();
  o.prefill_batch = 4;
  gbt::x(o).prefill_blas = 0;  // the built-in GEMM: the same results in chunks of any size
  const Gen base = generate(m, o, p, 30);
  ASSERT_EQ(base.toks.size(), 30u);
  Abort ab;
  o.abort_callback = abort_cb;
  o.abort_user = &ab;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  // Prefill: stop before the third chunk; the first two (8 positions) stay.
  ab.at = 2;
  EXPECT_EQ(gb_prefill(s, p.data(), p.size()), GB_ERR_ABORTED);
  uint32_t pos = 0;
  ASSERT_EQ(gb_session_position(s, &pos, nullptr), GB_OK);
  EXPECT_EQ(pos, 8u);
  int32_t t;
  EXPECT_EQ(gb_decode_step(s, &t, nullptr), GB_ERR_BAD_STATE);  // nothing pending
  ab.at = -1;
  ASSERT_EQ(gb_prefill(s, p.data() + pos, p.size() - pos), GB_OK);
  // Decode: an abort changes nothing; the tokens are the uninterrupted run's.
  std::vector<int32_t> toks;
  for (int i = 0; toks.size() < 30 && i < 40; i++) {
    if (i == 5 || i == 6 || i == 17) ab.at = ab.calls;  // this poll says stop
    const gb_status st = gb_decode_step(s, &t, nullptr);
    if (st == GB_ERR_ABORTED) continue;
    ASSERT_EQ(st, GB_OK);
    toks.push_back(t);
  }
  EXPECT_EQ(toks, base.toks);
  // gb_feed too, with nothing changed.
  ab.at = ab.calls;
  EXPECT_EQ(gb_feed(s, 5, nullptr), GB_ERR_ABORTED);
  uint32_t pos2 = 0;
  gb_session_position(s, &pos2, nullptr);
  EXPECT_EQ(gb_feed(s, 5, nullptr), GB_OK);
  uint32_t pos3 = 0;
  gb_session_position(s, &pos3, nullptr);
  EXPECT_EQ(pos3, pos2 + 1);
  gb_session_destroy(s);
  gb_model_close(m);
}

TEST(Control, BadOptionsAreRefused) {
  gb_model *m = open_260k();
  ASSERT_NE(m, nullptr);
  size_t bytes = 0;
  auto check = [&](const gb_session_options &o, gb_status want, const char *what) {
    EXPECT_EQ(gb_session_mem_size(m, &o, &bytes), want) << what;
    gb_session *s = nullptr;
    EXPECT_EQ(gb_session_create(m, &o, nullptr, 0, &s), want) << what;
    EXPECT_EQ(s != nullptr, want == GB_OK) << what;
    gb_session_destroy(s);
  };
  gb_session_options o;
  for (float r : {0.0f, -1.0f, NAN, 100.5f, INFINITY}) {
    o = greedy();
    o.repeat_penalty = r;
    check(o, GB_ERR_INVALID_ARGUMENT, "repeat_penalty");
  }
  for (float f : {NAN, 101.0f, -INFINITY}) {
    o = greedy();
    o.frequency_penalty = f;
    check(o, GB_ERR_INVALID_ARGUMENT, "frequency_penalty");
    o = greedy();
    o.presence_penalty = f;
    check(o, GB_ERR_INVALID_ARGUMENT, "presence_penalty");
  }
  for (uint32_t w : {0u, 65537u}) {
    o = greedy();
    o.penalty_window = w;
    check(o, GB_ERR_INVALID_ARGUMENT, "penalty_window");
  }
  o = greedy();
  o.n_logit_bias = 1;
  check(o, GB_ERR_NULL_POINTER, "logit_bias NULL");
  const gb_logit_bias out_of_range[] = {{512, 1.0f}}, negative[] = {{-1, 1.0f}}, nan_bias[] = {{3, NAN}}, plus_inf[] = {{3, INFINITY}};
  for (const gb_logit_bias *b : {out_of_range, negative}) {
    o = greedy();
    o.logit_bias = b;
    o.n_logit_bias = 1;
    check(o, GB_ERR_TOKEN_OUT_OF_RANGE, "bias token");
  }
  for (const gb_logit_bias *b : {nan_bias, plus_inf}) {
    o = greedy();
    o.logit_bias = b;
    o.n_logit_bias = 1;
    check(o, GB_ERR_INVALID_ARGUMENT, "bias value");
  }
  o = greedy();
  o.logit_bias = out_of_range;
  o.n_logit_bias = 70000;
  check(o, GB_ERR_INVALID_ARGUMENT, "too many biases");
  o = greedy();
  o.n_stop_strings = 1;
  check(o, GB_ERR_NULL_POINTER, "stop_strings NULL");
  const std::string long_stop(257, 'x');
  const char *null_entry[] = {nullptr}, *empty[] = {""}, *too_long[] = {long_stop.c_str()};
  o = greedy();
  o.stop_strings = null_entry;
  o.n_stop_strings = 1;
  check(o, GB_ERR_NULL_POINTER, "stop string NULL");
  for (const char **sv : {empty, too_long}) {
    o = greedy();
    o.stop_strings = sv;
    o.n_stop_strings = 1;
    check(o, GB_ERR_INVALID_ARGUMENT, "stop string length");
  }
  o = greedy();
  o.stop_strings = empty;
  o.n_stop_strings = 65;
  check(o, GB_ERR_INVALID_ARGUMENT, "too many stop strings");
  // The spec gear verifies unmodified distributions.
  o = greedy();
  o.gear = GB_GEAR_SPEC;
  o.repeat_penalty = 1.2f;
  check(o, GB_ERR_INVALID_ARGUMENT, "spec + penalty");
  o.repeat_penalty = 1.0f;
  o.logit_bias = nan_bias;
  o.n_logit_bias = 0;
  const char *stops[] = {"Lily"};
  o.stop_strings = stops;
  o.n_stop_strings = 1;
  check(o, GB_OK, "spec + stop strings");
  // A caller built against the layout before generation control: defaults.
  o = greedy();
  o.repeat_penalty = 0.0f;  // past the struct_size given: never read
  o.struct_size = (uint32_t)offsetof(gb_session_options, repeat_penalty);
  check(o, GB_OK, "older struct_size");
  gb_model_close(m);
}
