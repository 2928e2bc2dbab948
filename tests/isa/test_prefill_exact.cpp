// test_prefill_exact.cpp — where this CPU has SIMD multi-position kernels for
// a tier's formats, batched prefill with prefill_blas 3 runs them
// (src/prefill.cpp) and its logits after the prompt and over the greedy
// steps that follow are bit for bit those of token-by-token decoding
// (stories260K), for chunks of 3, 16, 17 and 64 positions (groups of 16 and
// a remainder), one and two threads. Where it has only the generic ones,
// prefill uses the panels and this test checks that it says so
// (tests/test_prefill.cpp covers that path's tolerance). Where it has a
// prefill GEMM (f16 on AVX-512), the default prefill runs it: not decoding's
// bits, but the same bits whatever the chunks and threads.
#include <math.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format.h"
#include "forward.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "test_util.h"

namespace {

// Logits of the pass after the prompt and of `steps` greedy steps.
std::vector<float> run(gb_model *m, gb_gear gear, uint32_t batch, uint32_t threads, const std::vector<int32_t> &prompt,
                       int steps, uint32_t prefill_blas = 3) {
  gb_session_options o;
  gb_session_options_init(&o);
  gbt::x(o).prefill_blas = prefill_blas;
  o.log = gbt::quiet_log;
  o.gear = gear;
  o.sampler.temperature = 0.0f;
  o.prefill_batch = batch;
  o.n_threads = threads;
  std::vector<float> out;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  if (!s) return out;
  EXPECT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK);
  for (int i = 0; i <= steps; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t tok = -1;
    if (gb_decode_step(s, &tok, &info) != GB_OK) {
      ADD_FAILURE() << "step " << i;
      break;
    }
    out.insert(out.end(), info.logits, info.logits + info.n_vocab);
  }
  gb_session_destroy(s);
  return out;
}

TEST(PrefillExact, MultiPositionKernelsEqualDecodeBitForBit) {
  gb_kernels k;
  gb_kernels_select(&k, gb_port_cpu_features() | GB_ISA_GENERIC);
  // The formats of stories260K's low (q4r16, and q4 for matrices whose rows
  // are not a multiple of 16), mid (q8) and high (f16) tiers.
  const struct {
    gb_gear gear;
    uint32_t fmt[2];
  } tiers[] = {{GB_GEAR_LOW, {GB_FMT_Q4R16, GB_FMT_Q4}}, {GB_GEAR_MID, {GB_FMT_Q8, GB_FMT_Q8}}, {GB_GEAR_HIGH, {GB_FMT_F16, GB_FMT_F16}}};
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 70; i++) prompt.push_back(300 + (i * 37) % 200);
  // Under emulation (GB_TEST_SCALE < 1) one chunk size: a group of 16 and a
  // remainder.
  const std::vector<uint32_t> batches = gbt::test_scale() >= 1.0 ? std::vector<uint32_t>{3, 16, 17, 64} : std::vector<uint32_t>{17};
  const int steps = gbt::test_scale() >= 1.0 ? 8 : 3;
  int exact = 0;
  for (const auto &t : tiers) {
    bool simd = true;
    for (uint32_t f : t.fmt) simd = simd && k.gemvm_name[f] && !strstr(k.gemvm_name[f], "__generic");
    printf("gear %s: multi-position kernels %s, %s\n", gb_gear_name(t.gear), k.gemvm_name[t.fmt[0]], k.gemvm_name[t.fmt[1]]);
    if (!simd) continue;
    const std::vector<float> want = run(m, t.gear, 1, 1, prompt, steps);
    ASSERT_FALSE(want.empty());
    for (uint32_t batch : batches)
      for (uint32_t threads : {1u, 2u}) {
        if (threads > 1 && !gbt::threads_available()) continue;
        const std::vector<float> got = run(m, t.gear, batch, threads, prompt, steps);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(0, memcmp(got.data(), want.data(), want.size() * sizeof(float)))
            << gb_gear_name(t.gear) << " batch " << batch << " threads " << threads;
      }
    exact++;
  }
  gb_model_close(m);
  printf("%d of 3 tiers ran through SIMD multi-position kernels and matched decode bit for bit\n", exact);
  if (k.gemvm_name[GB_FMT_Q8] && !strstr(k.gemvm_name[GB_FMT_Q8], "__generic")) {
    EXPECT_GE(exact, 1);
  }
}

// f16_activations split between a pool's threads by positions: the same
// bits as on one thread, and no binary16 copy when a value without one (inf)
// sits in any task's rows.
TEST(PrefillExact, F16ActivationsOnThePoolAreTheOneThreadBits) {
  if (!gbt::threads_available()) {
    printf("one thread here: nothing to split\n");
    return;
  }
  const uint32_t cols = 20000, rows = 9;
  std::vector<float> in((size_t)cols * rows);
  uint32_t s = 777;
  for (float &v : in) {
    s = s * 1664525u + 1013904223u;
    v = (float)((int32_t)s) * 0x1p-24f;  // up to +-128, many below the f16 step
  }
  gb::Scratch sc;
  memset(&sc, 0, sizeof sc);
  std::vector<float> buf(in.size());
  std::vector<uint16_t> h(in.size());
  sc.xh = buf.data();
  sc.xh16 = h.data();
  const uint16_t *xh16 = nullptr;
  const float *out = gb::f16_activations(sc, in.data(), rows, cols, &xh16);
  ASSERT_EQ(xh16, h.data());
  const std::vector<float> want_r(out, out + in.size());
  const std::vector<uint16_t> want_h(h);
  for (uint32_t threads : {2u, 3u, 4u}) {
    std::vector<uint8_t> mem(gb_port_pool_mem_size(threads) + 64);
    void *at = (void *)(((uintptr_t)mem.data() + 63) & ~(uintptr_t)63);
    gb_port_pool *pool = gb_port_pool_start(at, threads);
    ASSERT_NE(pool, nullptr);
    std::fill(buf.begin(), buf.end(), -1.0f);
    std::fill(h.begin(), h.end(), (uint16_t)0xffff);
    xh16 = nullptr;
    out = gb::f16_activations(sc, in.data(), rows, cols, &xh16, pool);
    EXPECT_EQ(xh16, h.data()) << threads << " threads";
    EXPECT_EQ(0, memcmp(out, want_r.data(), want_r.size() * 4)) << threads << " threads";
    EXPECT_EQ(0, memcmp(h.data(), want_h.data(), want_h.size() * 2)) << threads << " threads";
    for (uint32_t row : {0u, 4u, 8u}) {
      std::vector<float> v = in;
      v[(size_t)row * cols + 7] = INFINITY;
      xh16 = h.data();
      out = gb::f16_activations(sc, v.data(), rows, cols, &xh16, pool);
      EXPECT_EQ(xh16, nullptr) << "inf in row " << row << ", " << threads << " threads";
      EXPECT_EQ(out[(size_t)row * cols + 7], INFINITY);
    }
    gb_port_pool_stop(pool);
  }
}

// A pass of many positions also runs its per-position steps (norms,
// residual adds, SwiGLU, the f16 rounding of activations) on the pool, in
// ranges of positions; stories5M's 128-position chunks are large enough to
// be split (stories260K's are not). The logits stay decoding's bits with
// the multi-position kernels, and with the prefill GEMM the same bits at any
// thread count.
TEST(PrefillExact, PerPositionStepsOnThePoolKeepTheBits) {
  gb_kernels k;
  gb_kernels_select(&k, gb_port_cpu_features() | GB_ISA_GENERIC);
  if (!gbt::threads_available()) {
    printf("one thread here: nothing to split\n");
    return;
  }
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories5m_gbx().c_str(), &mo, &m), GB_OK);
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 140; i++) prompt.push_back(300 + (i * 37) % 200);
  const struct {
    gb_gear gear;
    uint32_t fmt;
  } tiers[] = {{GB_GEAR_LOW, GB_FMT_Q4R16}, {GB_GEAR_MID, GB_FMT_Q8}, {GB_GEAR_HIGH, GB_FMT_F16}};
  const std::vector<uint32_t> threads = gbt::test_scale() >= 1.0 ? std::vector<uint32_t>{2, 3} : std::vector<uint32_t>{2};
  int ran = 0;
  for (const auto &t : tiers) {
    if (!k.gemvm_name[t.fmt] || strstr(k.gemvm_name[t.fmt], "__generic")) continue;
    const std::vector<float> want = run(m, t.gear, 1, 1, prompt, 2);
    ASSERT_FALSE(want.empty());
    for (uint32_t n : threads) {
      const std::vector<float> got = run(m, t.gear, 128, n, prompt, 2);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(0, memcmp(got.data(), want.data(), want.size() * sizeof(float))) << gb_gear_name(t.gear) << " threads " << n;
    }
    ran++;
  }
  if (k.pgemm[GB_FMT_F16]) {
    const std::vector<float> want = run(m, GB_GEAR_HIGH, 128, 1, prompt, 2, 1);
    ASSERT_FALSE(want.empty());
    for (uint32_t n : threads) {
      const std::vector<float> got = run(m, GB_GEAR_HIGH, 128, n, prompt, 2, 1);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(0, memcmp(got.data(), want.data(), want.size() * sizeof(float))) << "prefill GEMM, threads " << n;
    }
    ran++;
  }
  gb_model_close(m);
  printf("%d passes compared\n", ran);
}

// The prefill GEMM's rows depend only on the row and their position's x
// (kernels.h), so a prefill through it gives the same logits whatever the
// chunk size (of at least two positions) and thread count. gb_prefill runs
// all but the last of the 71 prompt tokens (the first decode step takes
// that one): 70 positions in chunks of 2, 4, 7, 16, 17 and 64 leave no chunk
// of one, which would run as a decode step (with 3: 23 x 3 + 1, and the
// logits differ from step 3 on).
TEST(PrefillExact, PrefillGemmGivesTheSameBitsWhateverTheChunksAndThreads) {
  gb_kernels k;
  gb_kernels_select(&k, gb_port_cpu_features() | GB_ISA_GENERIC);
  if (!k.pgemm[GB_FMT_F16]) {
    printf("no prefill GEMM for f16 on this CPU: prefill runs the gemvm (the test above)\n");
    return;
  }
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 70; i++) prompt.push_back(300 + (i * 37) % 200);
  const std::vector<uint32_t> batches = gbt::test_scale() >= 1.0 ? std::vector<uint32_t>{2, 4, 7, 16, 17, 64} : std::vector<uint32_t>{4, 17};
  const std::vector<float> want = run(m, GB_GEAR_HIGH, 64, 1, prompt, 4, 1);
  const std::vector<float> exact = run(m, GB_GEAR_HIGH, 64, 1, prompt, 4, 3);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(want.size(), exact.size());
  // It is another kernel: were it the gemvm, the two would agree.
  EXPECT_NE(0, memcmp(want.data(), exact.data(), want.size() * sizeof(float))) << k.pgemm_name[GB_FMT_F16] << " not used";
  for (uint32_t batch : batches)
    for (uint32_t threads : {1u, 2u}) {
      if (threads > 1 && !gbt::threads_available()) continue;
      const std::vector<float> got = run(m, GB_GEAR_HIGH, batch, threads, prompt, 4, 1);
      ASSERT_EQ(got.size(), want.size());
      size_t first = 0;
      while (first < want.size() && !memcmp(&got[first], &want[first], sizeof(float))) first++;
      EXPECT_EQ(first, want.size()) << "batch " << batch << " threads " << threads << ": first difference at logit " << first
                                    << " of " << want.size() << " (" << got[first < got.size() ? first : 0] << " vs "
                                    << want[first < want.size() ? first : 0] << ")";
    }
  gb_model_close(m);
}

}  // namespace
