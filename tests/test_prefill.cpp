// test_prefill.cpp — batched prefill (GEMMs on weight panels) against
// token-by-token decoding: logits after the prompt and over 20 greedy steps
// (5 under emulation) agree within float tolerance for every gear, chunk sizes 1, 3, 7 and 64,
// panel sizes that do and do not divide the matrices, the built-in GEMM and
// OpenBLAS; monitor calibration sees the same entropies; the arena accounts
// for the scratch, nothing allocates, and bad options get specific statuses.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "f16.h"
#include "kernels.h"
#include "session.h"
#include "test_util.h"

namespace {

const char *kPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, "
    "she saw a big, red ball under a tree. She ran to the ball and kicked it very high. The ball flew over the fence and "
    "into the garden of an old man. Lily was scared, but she knocked on the door and said sorry.";

struct Trace {
  std::vector<std::vector<float>> logits;  // per step
  std::vector<int32_t> tokens;
  float th_low = 0, th_high = 0;
  bool calibrated = false;
};

gb_session_options options(gb_gear gear, uint32_t batch, uint32_t panel, uint32_t blas, uint32_t threads = 1) {
  gb_session_options o;
  gb_session_options_init(&o);
  o.log = gbt::quiet_log;
  o.gear = gear;
  o.sampler.temperature = 0.0f;
  o.prefill_batch = batch;
  gbt::x(o).prefill_panel_rows = panel;
  gbt::x(o).prefill_blas = blas;
  o.n_threads = threads;
  return o;
}

// Greedy steps after the prompt: 20, fewer under emulation (GB_TEST_SCALE <
// 1: the prompt's chunks, which are what differs between the runs, stay
// whole; only the decoding after them shrinks).
int steps() { return gbt::test_scale() >= 1.0 ? 20 : 5; }

// Prefill the prompt, then steps() + 1 passes: the first runs the prompt's last token;
// each later one runs `force[i]` when given (teacher forcing, so a reference
// follows the tokens of the run it is compared with), else the greedy token.
Trace run(gb_model *m, const gb_session_options &o, const std::vector<int32_t> &prompt, const std::vector<int32_t> *force) {
  Trace r;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  if (!s) return r;
  EXPECT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK);
  r.calibrated = s->monitor.calibrated;
  r.th_low = s->monitor.th_low;
  r.th_high = s->monitor.th_high;
  for (int i = 0; i <= steps(); i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t tok = -1;
    gb_status st;
    if (i > 0 && force) {
      st = gb_feed(s, (*force)[i - 1], &info);
      tok = (*force)[i - 1];
    } else {
      st = gb_decode_step(s, &tok, &info);
    }
    if (st != GB_OK) {
      ADD_FAILURE() << "step " << i << ": " << gb_status_str(st);
      break;
    }
    r.logits.emplace_back(info.logits, info.logits + info.n_vocab);
    r.tokens.push_back(tok);
  }
  gb_session_destroy(s);
  return r;
}

// Largest |a - b| over the largest |b|, over every step (*mean: the mean
// |a - b| over the mean |b|).
double rel_diff(const Trace &a, const Trace &b, double *mean = nullptr) {
  double d = 0, mag = 1e-6, sd = 0, sm = 1e-6;
  for (size_t i = 0; i < a.logits.size() && i < b.logits.size(); i++)
    for (size_t j = 0; j < a.logits[i].size(); j++) {
      const double e = fabs((double)a.logits[i][j] - b.logits[i][j]);
      d = fmax(d, e);
      mag = fmax(mag, fabs((double)b.logits[i][j]));
      sd += e;
      sm += fabs((double)b.logits[i][j]);
    }
  if (mean) *mean = sd / sm;
  return d / mag;
}

std::vector<int32_t> tokenize(gb_model *m, const char *text) {
  std::vector<int32_t> t(GB_TOKENIZE_CAPACITY(strlen(text)));
  size_t n = 0;
  EXPECT_EQ(gb_tokenize(m, text, strlen(text), GB_TOKENIZE_ADD_BOS, t.data(), t.size(), &n), GB_OK);
  t.resize(n);
  return t;
}

// Under emulation (GB_TEST_SCALE < 1) the emulator computes the high
// gear's f16 arithmetic in software, so the tests on stories5M thin their
// grids of gears and prefill paths to a diagonal: every gear and every
// path still runs, not every pair.
bool emulated() { return gbt::test_scale() < 1.0; }

// thin: under emulation, gear i runs only the i-th (batch, GEMM) pair of the
// grid (in turn), instead of all of them.
void expect_batched_matches(const std::string &path, std::vector<uint32_t> batches, bool thin = false) {
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(path.c_str(), &mo, &m), GB_OK);
  const std::vector<int32_t> prompt = tokenize(m, kPrompt);
  ASSERT_GT(prompt.size(), 66u);  // longer than the largest chunk
  const bool have_blas = gb_gemm_blas() != nullptr;
  const gb_gear gears[4] = {GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32};
  for (uint32_t gi = 0; gi < 4; gi++) {
    const gb_gear g = gears[gi];
    Trace ref, f32;  // token by token, teacher-forced to the batched run's tokens (reused while they agree)
    std::vector<std::pair<uint32_t, uint32_t>> pairs;  // (chunk size, GEMM)
    for (uint32_t batch : batches)
      for (uint32_t blas : {0u, 1u})
        if (!blas || have_blas) pairs.push_back({batch, blas});
    if (thin && emulated()) pairs = {pairs[gi % pairs.size()]};
    for (const auto &pair : pairs) {
      const uint32_t batch = pair.first, blas = pair.second;
      const uint32_t panel = batch == 7 ? 13 : 64;  // 13 divides no matrix of these models
      const Trace b = run(m, options(g, batch, panel, blas), prompt, nullptr);
      if (ref.tokens != b.tokens) {
        ref = run(m, options(g, 1, 64, 0), prompt, &b.tokens);
        ref.tokens = b.tokens;  // (the first entry holds the reference's own greedy token)
        f32 = run(m, options(GB_GEAR_F32, 1, 64, 0), prompt, &b.tokens);
      }
      ASSERT_EQ(b.logits.size(), (size_t)steps() + 1);
      ASSERT_EQ(ref.logits.size(), (size_t)steps() + 1);
      double mean = 0, gear_mean = 0;
      const double d = rel_diff(b, ref, &mean);
      // The gear's own error on the same tokens: token by token at f32.
      rel_diff(ref, f32, &gear_mean);
      printf(
          "gear %d batch %2u panel %2u %s: logit diff over prompt + 20 steps: max %.2e, mean %.2e (relative; this gear "
          "vs f32: mean %.2e)\n",
          g, batch, panel, blas ? "openblas" : "built-in", d, mean, gear_mean);
      if (batch == 1) {
        EXPECT_EQ(d, 0.0) << "a chunk of one position is a decode pass";
      } else if (g == GB_GEAR_F32) {
        // f32 weights: the GEMM's summation order is the only difference.
        EXPECT_LT(d, 1e-5) << "gear " << g << " batch " << batch << " blas " << blas;
      } else {
        // q8/q4: the activations are quantized as the decode kernels do,
        // but an activation within float rounding of a quantization
        // boundary can land on the other side (a full step, 1/127 of its
        // block's largest value), and that propagates through the layers
        // and the cache: two runs whose inputs differ by float rounding
        // end up with different rounding noise of the same size. A single
        // GEMV agrees to 1e-7; whole runs differ by less than the gear's
        // own error against f32 (mostly that same activation noise at
        // mid: measured 3e-3 vs 4.5e-3 on stories5M). f16 likewise where
        // the CPU has a prefill GEMM (kernels.h; tests/isa covers which
        // kernel runs): activations are rounded to f16, and one within
        // float rounding of a halfway point rounds the other way
        // (2.5e-4 vs the gear's 3e-4 on stories260K).
        EXPECT_LT(d, 5e-2) << "gear " << g << " batch " << batch << " blas " << blas;
        EXPECT_LT(mean, gear_mean) << "gear " << g << " batch " << batch << " blas " << blas;
      }
    }
  }
  gb_model_close(m);
}

TEST(Prefill, BatchedMatchesTokenByTokenStories260K) { expect_batched_matches(gbt::stories260k_gbx(), {1, 3, 7, 64}); }
// Fewer chunk sizes on the larger model (and under emulation one pair per
// gear) keep the qemu runs of CI short.
TEST(Prefill, BatchedMatchesTokenByTokenStories5M) { expect_batched_matches(gbt::stories5m_gbx(), {7, 64}, true); }

// Auto sessions calibrate the monitor from the prefill's entropies: the
// batched prefill computes the classifier for every position and lands on
// the same thresholds.
TEST(Prefill, CalibrationFromBatchedPrefill) {
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories5m_gbx().c_str(), &mo, &m), GB_OK);
  const std::vector<int32_t> prompt = tokenize(m, kPrompt);
  for (uint32_t blas : {0u, 1u}) {
    if (emulated() && blas == 0) continue;  // one GEMM under emulation (see emulated())
    const Trace ref = run(m, options(GB_GEAR_AUTO, 1, 64, 0), prompt, nullptr);
    const Trace b = run(m, options(GB_GEAR_AUTO, 7, 64, blas), prompt, nullptr);
    ASSERT_TRUE(ref.calibrated);
    ASSERT_TRUE(b.calibrated);
    EXPECT_NEAR(b.th_low, ref.th_low, 1e-3);
    EXPECT_NEAR(b.th_high, ref.th_high, 1e-3);
    EXPECT_LT(rel_diff(b, ref), 2e-2);
  }
  gb_model_close(m);
}

// The arena holds the scratch: mem_size grows with the options, a session
// in exactly that much caller memory runs a long batched prefill with a
// canary after it intact, and nothing allocates (4 threads, either GEMM).
TEST(Prefill, ArenaAccountsForScratchAndNothingAllocates) {
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories5m_gbx().c_str(), &mo, &m), GB_OK);
  const std::vector<int32_t> prompt = tokenize(m, kPrompt);
  size_t tbt = 0, b32 = 0, b64 = 0, p128 = 0, t4 = 0;
  gb_session_options o = options(GB_GEAR_MID, 1, 64, 0);
  ASSERT_EQ(gb_session_mem_size(m, &o, &tbt), GB_OK);
  o = options(GB_GEAR_MID, 32, 64, 0);
  ASSERT_EQ(gb_session_mem_size(m, &o, &b32), GB_OK);
  o = options(GB_GEAR_MID, 64, 64, 0);
  ASSERT_EQ(gb_session_mem_size(m, &o, &b64), GB_OK);
  o = options(GB_GEAR_MID, 32, 128, 0);
  ASSERT_EQ(gb_session_mem_size(m, &o, &p128), GB_OK);
  o = options(GB_GEAR_MID, 32, 64, 0, 4);
  ASSERT_EQ(gb_session_mem_size(m, &o, &t4), GB_OK);
  // stories5M: dim 256, hidden 768 (the widest row), vocab 512.
  EXPECT_GE(b32 - tbt, (size_t)32 * (4 * 256 + 3 * 768) * 4 + 64 * 768 * 4);
  EXPECT_GE(b64 - b32, (size_t)32 * (4 * 256 + 3 * 768) * 4);
  EXPECT_GE(p128 - b32, (size_t)64 * 768 * 4);
  EXPECT_GE(t4 - b32, (size_t)3 * 64 * 768 * 4);  // one panel per thread
  size_t autob = 0;
  o = options(GB_GEAR_AUTO, 32, 64, 0);
  ASSERT_EQ(gb_session_mem_size(m, &o, &autob), GB_OK);
  // Calibration logits: a row per chunk position. The session's one scratch
  // (forward.h) already holds the decode pass's row, so the auto session
  // needs 31 more rows, and holds 32.
  EXPECT_GE(autob - b32, (size_t)31 * 512 * 4);
  {
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
    EXPECT_GE(s->sc.logit_rows, 32u);
    gb_session_destroy(s);
  }

  const uint32_t paths[3] = {0u, 1u, 3u};
  const gb_gear gears[3] = {GB_GEAR_LOW, GB_GEAR_HIGH, GB_GEAR_AUTO};
  for (uint32_t pi = 0; pi < 3; pi++)
    for (uint32_t gi = 0; gi < 3; gi++) {
      if (emulated() && pi != gi) continue;  // the diagonal under emulation (see emulated())
      const uint32_t blas = paths[pi];
      const gb_gear g = gears[gi];
      o = options(g, 7, 40, blas, gbt::threads_available() ? 4 : 1);
      size_t need = 0;
      ASSERT_EQ(gb_session_mem_size(m, &o, &need), GB_OK);
      unsigned char *mem = static_cast<unsigned char *>(aligned_alloc(64, (need + 63) / 64 * 64 + 64));
      memset(mem + need, 0xA5, 64);
      gb_session *s = nullptr;
      ASSERT_EQ(gb_session_create(m, &o, mem, need, &s), GB_OK);
      // Warm OpenBLAS up once: its own buffers are allocated at first use.
      ASSERT_EQ(gb_prefill(s, prompt.data(), 8), GB_OK);
      ASSERT_EQ(gb_session_reset(s), GB_OK);
      gbt::alloc_count_start();
      const gb_status st = gb_prefill(s, prompt.data(), prompt.size());
      const gb_status st2 = gb_decode_step(s, nullptr, nullptr);
      const uint64_t allocs = gbt::alloc_count_stop();
      EXPECT_EQ(st, GB_OK);
      EXPECT_EQ(st2, GB_OK);
      EXPECT_EQ(allocs, 0u) << "gear " << g << " blas " << blas;
      for (int i = 0; i < 64; i++) ASSERT_EQ(mem[need + i], 0xA5) << "wrote past the arena";
      gb_session_destroy(s);
      free(mem);
    }
  gb_model_close(m);
}

// prefill_blas 3 (and 1 in deterministic sessions): no panels, every matrix
// of every gear through the multi-position kernels, so the logits after the
// prompt and over the greedy steps are bit for bit token-by-token
// decoding's, for chunks that are and are not multiples of the kernels'
// group of 16; the arena is smaller than with panels by at least the panels.
TEST(Prefill, NoPanelsEqualsDecodeBitForBit) {
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
  const std::vector<int32_t> prompt = tokenize(m, kPrompt);
  const std::vector<uint32_t> batches = gbt::test_scale() >= 1.0 ? std::vector<uint32_t>{7, 16, 40} : std::vector<uint32_t>{40};
  for (uint32_t det : {0u, 1u})
    for (gb_gear g : {GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32}) {
      gb_session_options o = options(g, 1, 64, 0);
      o.deterministic = det;
      const Trace ref = run(m, o, prompt, nullptr);
      ASSERT_EQ(ref.logits.size(), (size_t)steps() + 1);
      for (uint32_t batch : batches) {
        o = options(g, batch, 64, det ? 1 : 3);
        o.deterministic = det;
        gb_session *s = nullptr;
        ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
        EXPECT_EQ(s->pf.batch, batch);
        EXPECT_EQ(s->sc.panel, nullptr);
        gb_session_destroy(s);
        const Trace b = run(m, o, prompt, nullptr);
        EXPECT_EQ(b.tokens, ref.tokens) << "gear " << g << " batch " << batch << " deterministic " << det;
        ASSERT_EQ(b.logits.size(), ref.logits.size());
        for (size_t i = 0; i < ref.logits.size(); i++)
          ASSERT_EQ(0, memcmp(b.logits[i].data(), ref.logits[i].data(), ref.logits[i].size() * sizeof(float)))
              << "gear " << g << " batch " << batch << " deterministic " << det << " step " << i;
      }
    }
  size_t panels = 0, none = 0;
  gb_session_options o = options(GB_GEAR_HIGH, 32, 64, 0, 2);
  ASSERT_EQ(gb_session_mem_size(m, &o, &panels), GB_OK);
  gbt::x(o).prefill_blas = 3;
  ASSERT_EQ(gb_session_mem_size(m, &o, &none), GB_OK);
  // stories260K: dim 64, hidden 172; two panels of 64 rows x 172 floats and
  // 32 expanded activation rows.
  EXPECT_GE(panels, none + (size_t)2 * 64 * 172 * 4) << panels << " " << none;
  gb_model_close(m);
}

// The activations of f16 matrices: each value rounded to the nearest f16,
// ties to even (f16.h's portable conversion is the reference), where its
// magnitude is at most 65504; larger values, infinities and NaNs unchanged.
// Edges: the largest f16, the halfway points around it, the smallest normal
// and the subnormals below it, ties both ways; then random bit patterns.
TEST(F16Activations, RoundToNearestEvenWithinRange) {
  auto bits = [](uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
  };
  std::vector<float> in = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           65504.0f,
                           -65504.0f,
                           65505.0f,
                           65519.0f,
                           65520.0f,
                           1e6f,
                           INFINITY,
                           -INFINITY,
                           NAN,
                           6.103515625e-05f /* 2^-14 */,
                           6.0e-05f,
                           5.96e-08f,
                           2.98e-08f,
                           1e-30f,
                           bits(0x3f801000u) /* 1 + 2^-11: tie, to even (down) */,
                           bits(0x3f803000u) /* 1 + 3 x 2^-11: tie, to even (up) */,
                           bits(0x477fe000u),
                           bits(0x477fe001u),
                           bits(0x387fffffu),
                           bits(0x38800000u),
                           bits(0x38801000u)};
  uint32_t s = 12345;
  for (int i = 0; i < 100000; i++) {
    s = s * 1664525u + 1013904223u;
    in.push_back(bits(s));
  }
  gb::Scratch sc;
  memset(&sc, 0, sizeof sc);
  std::vector<float> buf(in.size());
  std::vector<uint16_t> h(in.size());
  sc.xh = buf.data();
  sc.xh16 = h.data();
  const float *out = gb::f16_activations(sc, in.data(), 1, (uint32_t)in.size());
  ASSERT_EQ(out, buf.data());
  for (size_t i = 0; i < in.size(); i++) {
    uint32_t b;
    memcpy(&b, &in[i], 4);
    const bool keep = (b & 0x7fffffffu) > 0x477fe000u;  // beyond 65504, inf, NaN
    const float want = keep ? in[i] : gb::f16_to_f32(gb::f32_to_f16(in[i]));
    ASSERT_EQ(0, memcmp(&want, &out[i], 4)) << "input " << std::hexfloat << in[i] << " (0x" << std::hex << b << "): got "
                                            << out[i] << ", want " << want;
  }
  // With the binary16 copy: the same rounded values, and a copy that equals
  // them bit for bit when every one has a binary16 form; none when one
  // does not (past 65504, inf, NaN), whichever position it is at.
  std::vector<float> ok;
  for (float v : in) {
    uint32_t b;
    memcpy(&b, &v, 4);
    if ((b & 0x7fffffffu) <= 0x477fe000u) ok.push_back(v);
  }
  const uint16_t *xh16 = reinterpret_cast<const uint16_t *>(1);
  out = gb::f16_activations(sc, ok.data(), 1, (uint32_t)ok.size(), &xh16);
  ASSERT_EQ(xh16, h.data());
  for (size_t i = 0; i < ok.size(); i++) {
    const float want = gb::f16_to_f32(gb::f32_to_f16(ok[i]));
    ASSERT_EQ(0, memcmp(&want, &out[i], 4)) << "input " << std::hexfloat << ok[i];
    const float back = gb::f16_to_f32(h[i]);
    ASSERT_EQ(0, memcmp(&back, &out[i], 4)) << "binary16 copy of " << std::hexfloat << ok[i] << ": 0x" << std::hex << h[i];
  }
  for (float bad : {65505.0f, -1e6f, INFINITY, NAN})
    for (size_t at : {(size_t)0, ok.size() / 2, ok.size() - 1}) {
      std::vector<float> v = ok;
      v[at] = bad;
      xh16 = h.data();
      out = gb::f16_activations(sc, v.data(), 1, (uint32_t)v.size(), &xh16);
      ASSERT_EQ(xh16, nullptr) << bad << " at " << at;
      ASSERT_EQ(0, memcmp(&v[at], &out[at], 4)) << "kept as it is";
    }
}

TEST(Prefill, BadOptionsGetSpecificStatuses) {
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
  size_t bytes = 0;
  gb_session_options o = options(GB_GEAR_HIGH, 0, 64, 1);
  EXPECT_EQ(gb_session_mem_size(m, &o, &bytes), GB_ERR_INVALID_ARGUMENT);
  o = options(GB_GEAR_HIGH, 4097, 64, 1);
  EXPECT_EQ(gb_session_mem_size(m, &o, &bytes), GB_ERR_INVALID_ARGUMENT);
  o = options(GB_GEAR_HIGH, 32, 0, 1);
  EXPECT_EQ(gb_session_mem_size(m, &o, &bytes), GB_ERR_INVALID_ARGUMENT);
  o = options(GB_GEAR_HIGH, 32, 65537, 1);
  EXPECT_EQ(gb_session_mem_size(m, &o, &bytes), GB_ERR_INVALID_ARGUMENT);
  o = options(GB_GEAR_HIGH, 32, 64, 4);
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  o = options(GB_GEAR_HIGH, 32, 64, 2);
  o.deterministic = 1;
  EXPECT_EQ(gb_session_mem_size(m, &o, &bytes), GB_ERR_INVALID_ARGUMENT);
  o.deterministic = 0;
  EXPECT_EQ(gb_session_mem_size(m, &o, &bytes), gb_gemm_blas() ? GB_OK : GB_ERR_UNAVAILABLE);
  // Limits are accepted; a chunk larger than the context is capped at it.
  o = options(GB_GEAR_HIGH, 4096, 65536, gb_gemm_blas() ? 2 : 0);
  o.n_ctx = 64;
  ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  EXPECT_EQ(s->pf.batch, 64u);
  const std::vector<int32_t> prompt = tokenize(m, kPrompt);
  EXPECT_EQ(gb_prefill(s, prompt.data(), 65), GB_ERR_CONTEXT_FULL);
  EXPECT_EQ(gb_prefill(s, prompt.data(), 64), GB_OK);  // one chunk of 63 positions
  EXPECT_EQ(gb_decode_step(s, nullptr, nullptr), GB_OK);
  gb_session_destroy(s);
  // Deterministic sessions never use OpenBLAS: by default no panels (the
  // generic multi-position kernels), the portable built-in GEMM on panels
  // when asked for.
  o = options(GB_GEAR_HIGH, 32, 64, 1);
  o.deterministic = 1;
  ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  EXPECT_EQ(s->pf.batch, 32u);
  EXPECT_EQ(s->ex.mm.panel_slots, 0u);
  EXPECT_EQ(s->sc.panel, nullptr);
  gb_session_destroy(s);
  gbt::x(o).prefill_blas = 0;
  ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  EXPECT_EQ(s->pf.batch, 32u);
  EXPECT_EQ(s->ex.mm.gemm, s->ex.k.gemm_f32);
  EXPECT_NE(s->sc.panel, nullptr);
  gb_session_destroy(s);
  // Callers built against the header before the prefill options get the
  // defaults: batches of 64, through OpenBLAS on panels, or without it
  // through the multi-position kernels and no panels.
  o = options(GB_GEAR_HIGH, 0, 0, 9);
  o.struct_size = offsetof(gb_session_options, prefill_batch);
  ASSERT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  EXPECT_EQ(s->pf.batch, 64u);
  EXPECT_EQ(s->ex.mm.panel_rows, 64u);
  if (gb_gemm_blas()) {
    EXPECT_EQ(s->ex.mm.gemm, gb_gemm_blas());
    EXPECT_NE(s->sc.panel, nullptr);
  } else {
    EXPECT_EQ(s->sc.panel, nullptr);
  }
  gb_session_destroy(s);
  gb_model_close(m);
}

}  // namespace
