// test_router.cpp — the precision manager: lazy tiers (quantized on first entry, cached),
// the double-quantization warning, page residency measured from the OS as
// gears shift, calibration at prefill, the cold-start gear.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert.h"
#include "format.h"
#include "quant.h"
#include "sample_files.h"
#include "gears.h"
#include "session.h"
#include "test_util.h"

namespace {

struct Logs {
  std::vector<std::string> lines;
  static void fn(void *u, gb_log_level lv, const char *m) {
    if (lv <= GB_LOG_WARN) static_cast<Logs *>(u)->lines.push_back(m);
  }
  bool has(const char *s) const {
    for (const std::string &l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};

gb::ConvertOptions conv_opts(uint32_t tiers) {
  gb::ConvertOptions o;
  o.tiers = tiers;
  o.page_align = 4096;
  o.log.fn = gbt::quiet_log;
  return o;
}

// stories260K with only the high (f16) tier.
const std::string &high_only_gbx() {
  static std::string path;
  if (path.empty()) {
    path = gbt::temp_dir() + "/s260k-high-only.gbx";
    if (gb::convert_llama2c(gbt::shared_path("models/stories260K.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(),
                            path.c_str(), conv_opts(1u << GB_GEAR_HIGH)) != GB_OK)
      path = "(conversion failed)";
  }
  return path;
}

std::vector<float> first_logits(gb_model *m, gb_gear gear, std::vector<int32_t> *tokens, int n) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = gear;
  so.sampler.temperature = 0.0f;
  so.log = gbt::quiet_log;
  gb_session *s = nullptr;
  std::vector<float> out;
  if (gb_session_create(m, &so, nullptr, 0, &s) != GB_OK) return out;
  const int32_t bos = 1;
  gb_prefill(s, &bos, 1);
  for (int i = 0; i < n; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t;
    if (gb_decode_step(s, &t, &info) != GB_OK) break;
    if (i == 0) out.assign(info.logits, info.logits + info.n_vocab);
    tokens->push_back(t);
  }
  gb_session_destroy(s);
  return out;
}

TEST(LazyTiers, MissingTiersAreQuantizedOnFirstEntry) {
  gb_model *lazy = nullptr, *full = nullptr;
  ASSERT_EQ(gb_model_open_file(high_only_gbx().c_str(), nullptr, &lazy), GB_OK);
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), nullptr, &full), GB_OK);
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(lazy, &mi);
  EXPECT_EQ(mi.gears, 1u << GB_GEAR_HIGH);
  std::vector<int32_t> tf;
  const std::vector<float> f32 = first_logits(full, GB_GEAR_F32, &tf, 1);
  for (gb_gear g : {GB_GEAR_LOW, GB_GEAR_MID}) {
    std::vector<int32_t> ta, tb;
    const std::vector<float> a = first_logits(lazy, g, &ta, 30), b = first_logits(full, g, &tb, 30);
    ASSERT_EQ(a.size(), 512u);
    ASSERT_EQ(b.size(), 512u);
    // Same quantizer; the lazy tier starts from f16 weights, the stored one
    // from f32, so they differ by far less than either differs from f32.
    double md = 0, mq = 0;
    // Plain compares: aarch64 g++ 12 -O3 hits an internal compiler error
    // vectorizing a two-accumulator fmax reduction here.
    for (size_t i = 0; i < a.size(); i++) {
      const double d1 = fabs((double)a[i] - b[i]), d2 = fabs((double)b[i] - f32[i]);
      if (d1 > md) md = d1;
      if (d2 > mq) mq = d2;
    }
    printf("gear %d: max |lazy - stored| %.4f, max |stored - f32| %.4f\n", (int)g, md, mq);
    EXPECT_LT(md, 2.0 * mq) << "gear " << g;  // same order as the quantization noise itself
    EXPECT_GT(md, 0.0) << "gear " << g << ": expected f16-vs-f32 source differences";
    const size_t same = g == GB_GEAR_MID ? 30 : 20;  // greedy text agrees
    ASSERT_GE(ta.size(), same);
    ASSERT_GE(tb.size(), same);
    EXPECT_TRUE(std::equal(ta.begin(), ta.begin() + same, tb.begin())) << "gear " << g;
  }
  // Exactly: every lazy matrix is quantize(high tier row), byte for byte.
  {
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = GB_GEAR_MID;
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(lazy, &so, nullptr, 0, &s), GB_OK);
    ASSERT_TRUE(s->gears.lazy_ready[GB_GEAR_MID]);
    const gb::TensorRef *src = lazy->mats[GB_GEAR_HIGH], *dst = s->gears.lazy_mats[GB_GEAR_MID];
    std::vector<float> row;
    std::vector<uint8_t> q;
    for (size_t i = 0; i < (size_t)mi.n_layers * gb::kMatsPerLayer; i++) {
      ASSERT_EQ(dst[i].format, (uint32_t)gb::kFmtQ8);
      const uint64_t rs = gb::row_bytes(src[i].format, src[i].cols), rd = gb::row_bytes(gb::kFmtQ8, src[i].cols);
      row.resize(src[i].cols);
      q.resize(rd);
      for (uint32_t r = 0; r < src[i].rows; r++) {
        gb::dequantize_row(src[i].format, row.data(), src[i].data + r * rs, src[i].cols);
        gb::quantize_row(gb::kFmtQ8, q.data(), row.data(), src[i].cols);
        ASSERT_EQ(0, memcmp(q.data(), dst[i].data + r * rd, rd)) << "matrix " << i << " row " << r;
      }
    }
    gb_session_destroy(s);
  }
  // The arena holds the lazy tier: bigger than the same session on the full file.
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = GB_GEAR_LOW;
  size_t lazy_bytes = 0, full_bytes = 0;
  ASSERT_EQ(gb_session_mem_size(lazy, &so, &lazy_bytes), GB_OK);
  ASSERT_EQ(gb_session_mem_size(full, &so, &full_bytes), GB_OK);
  EXPECT_GT(lazy_bytes, full_bytes + 100000u);  // the q4 tier of stories260K is ~140 KB
  // Lazy tiers off: the tier is unavailable.
  gbt::x(so).lazy_tiers = 0;
  so.log = gbt::quiet_log;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(lazy, &so, nullptr, 0, &s), GB_ERR_UNAVAILABLE);
  EXPECT_EQ(s, nullptr);
  gb_model_close(lazy);
  gb_model_close(full);
}

// An auto session on a high-only file shifts into lazy tiers in the middle
// of decoding, without allocating.
TEST(LazyTiers, AutoShiftsIntoLazyTiersWithoutAllocating) {
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(high_only_gbx().c_str(), nullptr, &m), GB_OK);
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = GB_GEAR_AUTO;
  gbt::x(so).monitor.initial_gear = GB_GEAR_HIGH;
  so.sampler.temperature = 0.9f;
  so.log = gbt::quiet_log;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  const int32_t bos = 1;
  ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
  int seen[GB_GEAR_COUNT] = {0};
  gbt::alloc_count_start();
  for (int i = 0; i < 200; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_decode_step(s, nullptr, &info), GB_OK);
    seen[info.gear]++;
  }
  EXPECT_EQ(gbt::alloc_count_stop(), 0u);
  EXPECT_GT(seen[GB_GEAR_LOW] + seen[GB_GEAR_MID], 0);
  EXPECT_TRUE(s->gears.lazy_ready[GB_GEAR_LOW] || s->gears.lazy_ready[GB_GEAR_MID]);
  gb_session_destroy(s);
  gb_model_close(m);
}

// Double quantization: a high tier made from weights that were 4-bit
// quantized before (here: an f32 GGUF whose values sit on the q4 grid, which
// the converter cannot tell from trained weights) gets a warning when a lower
// tier is quantized from it; genuine f32-trained weights do not.
TEST(LazyTiers, DoubleQuantizationWarning) {
  gb::SampleDims d;
  d.dim = 64;
  d.hidden = 96;
  d.heads = 4;
  d.kv_heads = 2;
  d.vocab = 260;
  const std::string in = gbt::temp_dir() + "/dq.gguf", out = gbt::temp_dir() + "/dq.gbx";
  gb::GgufSpec spec = gb::sample_gguf_spec(d, 0 /* F32 */);
  for (gb::GgufTensorSpec &t : spec.tensors) {
    if (t.ne.size() < 2 || t.ne[1] < 2) continue;  // norms stay as they are
    const size_t cols = t.ne[0], rows = t.data.size() / 4 / cols;
    std::vector<float> row(cols);
    std::vector<uint8_t> q(gb::row_bytes(gb::kFmtQ4, cols));
    for (size_t r = 0; r < rows; r++) {
      memcpy(row.data(), t.data.data() + r * cols * 4, cols * 4);
      gb::quantize_row(gb::kFmtQ4, q.data(), row.data(), cols);
      gb::dequantize_row(gb::kFmtQ4, row.data(), q.data(), cols);
      memcpy(t.data.data() + r * cols * 4, row.data(), cols * 4);
    }
  }
  ASSERT_TRUE(gbt::write_file(in, gb::gguf_serialize(spec)));
  ASSERT_EQ(gb::convert_gguf(in.c_str(), out.c_str(), conv_opts(1u << GB_GEAR_HIGH)), GB_OK);
  for (int q4src = 1; q4src >= 0; q4src--) {
    gb_model *m = nullptr;
    ASSERT_EQ(gb_model_open_file(q4src ? out.c_str() : high_only_gbx().c_str(), nullptr, &m), GB_OK);
    Logs logs;
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = GB_GEAR_LOW;
    so.log = Logs::fn;
    so.log_user = &logs;
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
    EXPECT_EQ(logs.has("already 4-bit quantized"), q4src == 1) << (logs.lines.empty() ? "(no log)" : logs.lines[0]);
    gb_session_destroy(s);
    gb_model_close(m);
  }
}

// Page residency, measured from the OS (/proc/self/pagemap): the managed
// weights resident in low gear are at most 40% of those in high gear, and a
// shift releases the tier it leaves.
TEST(Residency, LowGearKeepsFarLessResidentThanHigh) {
  const std::string path = gbt::temp_dir() + "/resident.gbx";
  ASSERT_EQ(gb::convert_synthetic("dim=512,layers=4,hidden=1408,heads=8,kv_heads=4,vocab=512,seq_len=64,seed=5", path.c_str(),
                                  conv_opts(0x7)),
            GB_OK);
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(path.c_str(), nullptr, &m), GB_OK);
  auto resident_after = [&](gb_gear g) -> uint64_t {
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = g;
    so.sampler.temperature = 0.0f;
    gb_session *s = nullptr;
    if (gb_session_create(m, &so, nullptr, 0, &s) != GB_OK) return 0;
    const int32_t bos = 1;
    gb_prefill(s, &bos, 1);
    for (int i = 0; i < 3; i++) gb_decode_step(s, nullptr, nullptr);
    const uint64_t r = gb::measure_resident(s);
    gb_session_destroy(s);
    return r;
  };
  const uint64_t high = resident_after(GB_GEAR_HIGH), low = resident_after(GB_GEAR_LOW), mid = resident_after(GB_GEAR_MID);
  printf("resident weight tiers: high %llu, mid %llu, low %llu bytes (low/high %.3f)\n", (unsigned long long)high,
         (unsigned long long)mid, (unsigned long long)low, (double)low / (double)high);
  ASSERT_GT(high, 4u << 20);  // the f16 tier is ~14 MB and was all touched
  EXPECT_LE((double)low, 0.40 * (double)high);
  EXPECT_LT(mid, high);
  EXPECT_LT(low, mid);

  // Within one auto session: a shift from high to low drops residency, the
  // high tier's pages leaving a slice per decode step (release_steps), and
  // the step info reports the OS's figure once the release completes.
  for (uint32_t steps : {1u, 4u}) {
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = GB_GEAR_AUTO;
    gbt::x(so).monitor.initial_gear = GB_GEAR_HIGH;
    gbt::x(so).release_steps = steps;
    gbt::x(so).measure_residency = 1;
    gbt::x(so).monitor.min_gear_duration = 1000000;  // only set_gear shifts here
    gbt::x(so).monitor.catastrophic_frac = 0.0f;
    gbt::x(so).monitor.lookahead = 0;
    gbt::x(so).monitor.prewarm = 0;  // a forecast of high would keep that tier (pre-warmed)
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
    const int32_t bos = 1;
    gb_prefill(s, &bos, 1);
    gb_step_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_decode_step(s, nullptr, &info), GB_OK);
    const uint64_t before = gb::measure_resident(s);
    ASSERT_GT(before, 4u << 20);
    ASSERT_EQ(gb_session_set_gear(s, GB_GEAR_LOW), GB_OK);
    std::vector<uint64_t> measured;  // by the OS after each step in low
    for (uint32_t i = 0; i < steps; i++) {
      ASSERT_EQ(gb_decode_step(s, nullptr, &info), GB_OK);
      EXPECT_EQ(info.gear, GB_GEAR_LOW);
      measured.push_back(gb::measure_resident(s));
      if (i + 1 < steps) {
        EXPECT_GT(measured.back(), 0.40 * (double)before) << "released too early, step " << i;
      }
    }
    for (size_t i = 1; i < measured.size(); i++) EXPECT_LT(measured[i], measured[i - 1]) << "a slice per step";
    const uint64_t after = measured.back();
    printf("auto session, release_steps %u: resident %llu bytes in high, %llu after shifting to low\n", steps,
           (unsigned long long)before, (unsigned long long)after);
    EXPECT_LE((double)after, 0.40 * (double)before);
    EXPECT_EQ(info.resident_weight_bytes, after);  // the step info carries the OS's figure
    gb_session_destroy(s);
  }
  gb_model_close(m);
}

// The first prefill of an auto session calibrates the thresholds; a
// fixed-gear session never does; a reset keeps the calibration.
TEST(Calibration, PrefillCalibratesAutoSessions) {
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), nullptr, &m), GB_OK);
  int32_t toks[128];
  size_t n = 0;
  const char *p = "Once upon a time, there was a little dog named Max. He liked to run and play.";
  ASSERT_EQ(gb_tokenize(m, p, strlen(p), GB_TOKENIZE_ADD_BOS, toks, 128, &n), GB_OK);
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = GB_GEAR_AUTO;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  const float lo0 = s->monitor.th_low, hi0 = s->monitor.th_high;
  ASSERT_EQ(gb_prefill(s, toks, n), GB_OK);
  EXPECT_TRUE(s->monitor.calibrated);
  EXPECT_TRUE(s->monitor.th_low != lo0 || s->monitor.th_high != hi0);
  EXPECT_LE(s->monitor.th_low, 0.06f * 9.0f + 1e-6f);  // caps at log2 512 = 9 bits
  EXPECT_LE(s->monitor.th_high, 0.12f * 9.0f + 1e-6f);
  EXPECT_LT(s->monitor.th_low, s->monitor.th_high);
  const float lo1 = s->monitor.th_low;
  ASSERT_EQ(gb_session_reset(s), GB_OK);
  EXPECT_EQ(s->monitor.th_low, lo1);
  gb_session_destroy(s);
  gbt::x(so).monitor.calibrate = 0;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  ASSERT_EQ(gb_prefill(s, toks, n), GB_OK);
  EXPECT_FALSE(s->monitor.calibrated);
  gb_session_destroy(s);
  gbt::x(so).monitor.calibrate = 1;
  so.gear = GB_GEAR_MID;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  ASSERT_EQ(gb_prefill(s, toks, n), GB_OK);
  EXPECT_FALSE(s->monitor.calibrated);
  EXPECT_EQ(gb_session_set_gear(s, GB_GEAR_LOW), GB_ERR_BAD_STATE);
  gb_session_destroy(s);
  gb_model_close(m);
}

}  // namespace
