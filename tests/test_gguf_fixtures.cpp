// test_gguf_fixtures.cpp — the GGUF files people download, against the
// outputs llama.cpp computes for them (../shared/fixtures: files made by
// llama.cpp's own quantizer, with reference dequantized values, logits and
// per-position NLL on real text in <file>.ref.json).
//   1. Dequantization of every tensor type equals the reference values bit
//      for bit (the first tensor of each type in each file, up to 4096
//      values).
//   2. The trained stories5M model in every type, converted with its f32
//      tier (the file's values exactly), scores the reference windows like
//      llama.cpp does: logits, NLL and argmax within the tolerances
//      measured between llama.cpp and an exact float64 forward pass.
//   3. The qwen2 (Q/K/V biases, NeoX RoPE, tied classifier) and Llama 3
//      (RoPE frequency factors, GQA 4:1, untied classifier) models: logits
//      against llama.cpp's, tight enough that leaving out a bias, the NeoX
//      pairing or the frequency factors would fail.
//   4. qwen3 (per-head Q/K norms, heads wider than dim / heads) and smollm3
//      (every fourth layer without RoPE): this repository's own fixtures
//      (tests/fixtures/), F32 and Q4_K_M, against llama.cpp's outputs; every
//      gear and the speculative gear on them; their .gbx fields checked.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "convert.h"
#include "format.h"
#include "ggml_types.h"
#include "gguf_parse.h"
#include "json_min.h"
#include "model.h"
#include "models/arch.h"
#include "sample_files.h"
#include "test_util.h"

namespace {

const char *const kFixtures[] = {"stories5M-F32",     "stories5M-F16",    "stories5M-BF16",    "stories5M-Q8_0", "stories5M-Q6_K",
                                 "stories5M-Q5_1",    "stories5M-Q5_0",   "stories5M-Q5_K_M",  "stories5M-Q4_1", "stories5M-Q4_0",
                                 "stories5M-Q4_K_M",  "stories5M-IQ4_NL", "stories5M-Q3_K_M",  "stories5M-Q2_K", "qwen2-tiny-F32",
                                 "qwen2-tiny-Q4_K_M", "llama3-tiny-F32",  "llama3-tiny-Q4_K_M", "stories5M-IQ4_XS",
                                 "stories5M-IQ3_S",   "stories5M-IQ3_XXS", "stories5M-IQ2_XS", "stories5M-IQ2_XXS",
                                 "stories5M-IQ1_M",   "stories5M-IQ1_S",   "stories5M-MXFP4",  "stories5M-dynamic-mix",
                                 "stories5M-Q1_0",    "stories5M-Q2_0",    "stories5M-NVFP4"};

// The shared fixtures, or this repository's (tests/fixtures: the types and
// architectures the shared set lacks).
std::string fixture(const std::string &name) {
  const std::string own = std::string(GB_TEST_SOURCE_DIR) + "/fixtures/" + name;
  if (access(own.c_str(), F_OK) == 0) return own;
  return gbt::shared_path(("fixtures/" + name).c_str());
}

bool load_json(const std::string &path, gbt::Json *out) {
  const std::vector<uint8_t> bytes = gbt::read_file(path);
  const std::string text(bytes.begin(), bytes.end());
  gbt::JsonReader r(text);
  if (!r.parse(out)) {
    ADD_FAILURE() << path << ": " << r.error();
    return false;
  }
  return true;
}

bool load_ref(const std::string &gguf_name, gbt::Json *out) { return load_json(fixture(gguf_name + ".gguf.ref.json"), out); }

TEST(GgufFixtures, DequantizationIsBitExactForEveryType) {
  size_t types_checked = 0;
  std::vector<std::string> seen;
  for (const char *name : kFixtures) {
    gbt::Json ref;
    ASSERT_TRUE(load_ref(name, &ref));
    const gbt::Json *dq = ref.get("dequant");
    ASSERT_TRUE(dq && dq->kind == gbt::Json::kObject) << name;
    gb::InputFile f;
    gb::Logger log;
    log.fn = gbt::quiet_log;
    ASSERT_EQ(f.open(fixture(std::string(name) + ".gguf").c_str(), log, "GGUF file"), GB_OK) << name;
    gb::GgufFile g;
    ASSERT_EQ(gb::gguf_parse(f, log, &g), GB_OK) << name;
    for (const auto &kv : dq->fields) {
      const gb::GgufTensor *t = g.tensor(kv.first);
      ASSERT_NE(t, nullptr) << name << ": " << kv.first;
      const std::string &type = kv.second.get("type")->text;
      ASSERT_STREQ(gb::ggml_type_name(t->type), type.c_str()) << name << ": " << kv.first;
      ASSERT_TRUE(gb::ggml_type_supported(t->type)) << type;
      const std::vector<gbt::Json> &vals = kv.second.get("values")->items;
      const uint64_t cols = t->ne[0];
      uint64_t rb = 0;
      ASSERT_TRUE(gb::ggml_row_bytes(t->type, cols, &rb));
      const uint64_t rows = (vals.size() + cols - 1) / cols;
      std::vector<uint8_t> raw(rb * rows);
      ASSERT_TRUE(f.read_at(t->offset, raw.data(), raw.size()));
      std::vector<float> out(rows * cols);
      for (uint64_t r = 0; r < rows; r++) gb::ggml_dequantize_row(t->type, raw.data() + r * rb, out.data() + r * cols, cols);
      size_t mismatches = 0, first = 0;
      for (size_t i = 0; i < vals.size(); i++) {
        const float want = vals[i].f32();
        uint32_t a, b;
        memcpy(&a, &out[i], 4);
        memcpy(&b, &want, 4);
        if (a != b && mismatches++ == 0) first = i;
      }
      EXPECT_EQ(mismatches, 0u) << name << " " << kv.first << " (" << type << "): first at " << first << ": " << out[first]
                                << " vs " << vals[first].f32();
      if (std::find(seen.begin(), seen.end(), type) == seen.end()) seen.push_back(type);
      types_checked++;
    }
  }
  std::string list;
  for (const std::string &t : seen) list += t + " ";
  printf("checked %zu (file, type) pairs; types: %s\n", types_checked, list.c_str());
  // F32 F16 BF16 Q8_0 Q6_K Q5_1 Q5_0 Q5_K Q4_1 Q4_0 Q4_K IQ4_NL IQ4_XS Q3_K Q2_K, and the i-quants IQ3_S IQ3_XXS
  // IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S, MXFP4, Q1_0, Q2_0 and NVFP4
  EXPECT_EQ(seen.size(), 26u) << list;
}

// A type this reader does not decode is refused with a status naming the
// tensor and the type (and every supported type), not guessed.
TEST(GgufFixtures, UnsupportedTypeIsNamed) {
  std::vector<uint8_t> img = gbt::read_file(fixture("stories5M-Q8_0.gguf"));
  ASSERT_FALSE(img.empty());
  gb::InputFile f;
  gb::Logger log;
  log.fn = gbt::quiet_log;
  ASSERT_EQ(f.open(fixture("stories5M-Q8_0.gguf").c_str(), log, "GGUF file"), GB_OK);
  gb::GgufFile g;
  ASSERT_EQ(gb::gguf_parse(f, log, &g), GB_OK);
  const gb::GgufTensor *t = g.tensor("blk.0.attn_q.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, (uint32_t)gb::kGgmlQ8_0);
  // The tensor directory entry's type field sits right before its offset;
  // find the entry by its name and rewrite the type to TQ1_0 (34).
  const std::string key = "blk.0.attn_q.weight";
  size_t at = std::string::npos;
  for (size_t i = 0; i + key.size() < img.size(); i++)
    if (memcmp(&img[i], key.data(), key.size()) == 0 && i >= 8) {
      at = i + key.size();
      break;
    }
  ASSERT_NE(at, std::string::npos);
  const uint32_t n_dims = img[at] | img[at + 1] << 8;
  const size_t type_at = at + 4 + 8 * (size_t)n_dims;
  ASSERT_EQ(img[type_at], 8);
  img[type_at] = 34;
  const std::string path = gbt::temp_dir() + "/tq1_0.gguf", out = gbt::temp_dir() + "/tq1_0.gbx";
  ASSERT_TRUE(gbt::write_file(path, img));
  std::string logged;
  gb::ConvertOptions o;
  o.log.fn = [](void *u, gb_log_level, const char *m) { *static_cast<std::string *>(u) += m; };
  o.log.user = &logged;
  EXPECT_EQ(gb::convert_gguf(path.c_str(), out.c_str(), o), GB_ERR_UNSUPPORTED_TYPE);
  EXPECT_NE(logged.find("blk.0.attn_q.weight"), std::string::npos) << logged;
  EXPECT_NE(logged.find("TQ1_0"), std::string::npos) << logged;
  EXPECT_NE(logged.find("Q4_K"), std::string::npos) << logged;  // the supported list
  EXPECT_NE(access(out.c_str(), F_OK), 0);
  unlink(path.c_str());
}

// A fixture's first n_windows reference windows scored the way the file
// runs by default, against llama.cpp's outputs, with an f32 KV cache (as the
// references were made). A quantized file converts to its own formats only
// (copied as they are) and runs its default gear, which is that tier; a
// float file runs its f32 tier (the file's values exactly).
struct Score {
  size_t n = 0;              // scored positions
  double nll = 0, want = 0;  // mean NLL: gearbx, llama.cpp (mean of the windows' means)
  double agreement = 0;      // argmax equal to llama.cpp's
  double max_diff = 0;       // max |logit - llama.cpp's|, window 0, positions 0..31
  uint32_t arch = 0;
  gb_model_info info{};  // of the converted file
};

bool is_float_fixture(const std::string &name) {
  return name.find("-F32") != std::string::npos || name.find("-F16") != std::string::npos ||
         name.find("-BF16") != std::string::npos;
}

// gguf: the file; ref: its references; tweak (optional): changes the opened
// model before the session (the sensitivity checks).
// Whether the GGUF's architecture has a .gbx form (`gearbx convert` takes it).
bool gbx_holds(const std::string &gguf) {
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  if (gb_model_open_file(gguf.c_str(), &mo, &m) != GB_OK) return true;
  const gb::ArchDef *a = gb::arch_by_id(m->meta.arch);
  gb_model_close(m);
  return a && a->min_gbx_version <= gb::kGbxVersion;
}

void score_file(const std::string &name, const std::string &gguf, const gbt::Json &ref, size_t n_windows, Score *r,
                void (*tweak)(gb_model *) = nullptr) {
  const std::string out = gbt::temp_dir() + "/fx-" + name + ".gbx";
  const bool flt = is_float_fixture(name);
  gb_model *m = nullptr;
  // An architecture no .gbx holds is scored from its GGUF opened in place;
  // the others converted (a float file to its f32 tier alone).
  const bool direct = !gbx_holds(gguf);
  if (direct) {
    ASSERT_EQ(gb_model_open_file(gguf.c_str(), nullptr, &m), GB_OK) << name;
  } else {
    gb::ConvertOptions o;
    o.log.fn = gbt::quiet_log;
    if (flt) {
      o.tiers = 1u << GB_GEAR_F32;
      o.embd_format = gb::kFmtF32;
    }
    ASSERT_EQ(gb::convert_gguf(gguf.c_str(), out.c_str(), o), GB_OK) << name;
    ASSERT_EQ(gb_model_open_file(out.c_str(), nullptr, &m), GB_OK) << name;
  }
  if (tweak) tweak(m);
  r->arch = m->meta.arch;
  r->info.struct_size = sizeof r->info;
  ASSERT_EQ(gb_model_get_info(m, &r->info), GB_OK);
  if (!flt) {
    // The source's own formats, as the only tier and the default.
    EXPECT_EQ(r->info.gears, 1u << r->info.default_gear) << name;
    EXPECT_EQ(r->info.tier_origin[r->info.default_gear], (uint32_t)GB_TIER_ORIGIN_SOURCE) << name;
  }
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = flt ? GB_GEAR_F32 : GB_GEAR_DEFAULT;
  so.kv.policy = GB_KV_F32;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK) << name;
  const std::vector<gbt::Json> &windows = ref.get("windows")->items, &argmax = ref.get("argmax")->items,
                               &logits_w0 = ref.get("logits_w0")->items;
  size_t agree = 0;
  for (size_t w = 0; w < n_windows; w++) {
    ASSERT_EQ(gb_session_reset(s), GB_OK);
    const std::vector<gbt::Json> &toks = windows[w].items;
    for (size_t p = 0; p + 1 < toks.size(); p++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      ASSERT_EQ(gb_feed(s, (int32_t)toks[p].i64(), &info), GB_OK) << name << " w " << w << " p " << p;
      const float *lg = info.logits;
      if (w == 0 && p < logits_w0.size())
        for (uint32_t j = 0; j < info.n_vocab; j++)
          r->max_diff = std::max(r->max_diff, fabs((double)lg[j] - logits_w0[p].items[j].f64()));
      double mx = -1e300, sum = 0;
      uint32_t best = 0;
      for (uint32_t j = 0; j < info.n_vocab; j++)
        if (lg[j] > mx) mx = lg[j], best = j;
      for (uint32_t j = 0; j < info.n_vocab; j++) sum += exp((double)lg[j] - mx);
      r->nll += mx + log(sum) - lg[toks[p + 1].i64()];
      agree += best == (uint32_t)argmax[w].items[p].i64();
      r->n++;
    }
    r->want += ref.get("nll_per_window")->items[w].f64() / (double)n_windows;  // windows of equal length
  }
  r->nll /= (double)r->n;
  r->agreement = (double)agree / (double)r->n;
  gb_session_destroy(s);
  gb_model_close(m);
  unlink(out.c_str());
}

void score(const std::string &name, size_t n_windows, Score *r) {
  gbt::Json ref;
  ASSERT_TRUE(load_ref(name, &ref));
  score_file(name, fixture(name + ".gguf"), ref, n_windows, r);
}

struct Tol {
  double logit, nll_mean, argmax_min;
};

// Tolerances: llama.cpp rounds activations to the weight type's dot-product
// type (f16, bf16, 8-bit blocks) before every matrix product; the f32 tier
// does not. An exact (float64) forward pass, measured
// against llama.cpp on these files: max |logit| difference 5e-6 (F32), 3.5e-3
// (F16), 4.7e-2 (BF16), <= 0.2 (quantized); nll_mean within 1e-3; at most 12
// argmax flips in 2040 positions. The bounds below leave room for float32
// accumulation on our side.
Tol tolerance(const std::string &name) {
  if (name.find("-F32") != std::string::npos) return {1e-4, 1e-5, 0.999};
  if (name.find("-F16") != std::string::npos) return {1e-2, 1e-4, 0.995};
  if (name.find("-BF16") != std::string::npos) return {0.1, 5e-4, 0.99};
  // Below 4 bits per weight (the 1- to 3-bit i-quants and the mix of them)
  // the NLL moves more with the activations' rounding: a kernel's
  // summation order can flip an 8-bit rounding of the next layer's input,
  // and weights this coarse carry the flip further (the mix on two windows:
  // +1.7e-3 against llama.cpp with one AVX-512 IQ4_XS kernel, +2.2e-3 with
  // another that differs from it by float rounding only). These hold the
  // NLL within 3e-3 and 98 % argmax agreement (5 flips of 255 on window 0
  // for IQ2_XS and the mix).
  const bool low_bit = name.find("-IQ1_") != std::string::npos || name.find("-IQ2_") != std::string::npos ||
                       name.find("-IQ3_") != std::string::npos || name.find("-dynamic-mix") != std::string::npos ||
                       name.find("-Q1_0") != std::string::npos || name.find("-Q2_0") != std::string::npos;
  // Q2_0 on this model is the coarsest file here (NLL 3.42 against the F32
  // file's 1.32: logits much flatter, near-ties everywhere): over all eight
  // windows its NLL is within 1.2e-3 of llama.cpp's and 97.1 % (AVX2
  // kernel) to 97.7 % (AVX-512 kernel, which differs from the AVX2 one by
  // float rounding alone) of argmaxes agree, 96.1-97.1 % on the two windows
  // scored here, with logits no further from llama.cpp's than the other
  // low-bit files'; Q1_0 (NLL 3.09) agrees on 99.0 % with either kernel.
  if (name.find("-Q2_0") != std::string::npos) return {0.35, 3e-3, 0.96};
  if (low_bit) return {0.35, 3e-3, 0.98};
  return {0.35, 2e-3, 0.985};
}

TEST(GgufFixtures, Stories5MScoresLikeLlamaCpp) {
  // Every type, two of the eight windows; under emulation (GB_TEST_SCALE <
  // 1) one window of six files covering the block families (legacy,
  // K-quant, non-uniform, non-uniform in super-blocks, the i-quants' mix).
  // All eight windows of every type were checked by hand (the tables in
  // docs/RESULTS.md).
  const bool full = gbt::test_scale() >= 1.0;
  size_t files = 0;
  for (const char *cname : kFixtures) {
    const std::string name(cname);
    if (name.rfind("stories5M-", 0) != 0) continue;
    if (!full && name != "stories5M-F32" && name != "stories5M-Q4_K_M" && name != "stories5M-IQ4_NL" && name != "stories5M-Q5_1" &&
        name != "stories5M-IQ4_XS" && name != "stories5M-dynamic-mix")
      continue;
    Score r;
    ASSERT_NO_FATAL_FAILURE(score(name, full ? 2 : 1, &r));  // of 8: 510 / 255 scored positions
    const Tol tol = tolerance(name);
    const uint32_t g = is_float_fixture(name) ? GB_GEAR_F32 : r.info.default_gear;
    printf(
        "%-20s %-5s %-9s %5.2f bits/weight  positions %4zu  NLL %.6f (llama.cpp %.6f, diff %+.2e)  argmax agreement "
        "%.2f%%  max |logit diff| %.3g\n",
        name.c_str(), gb_gear_name((gb_gear)g), r.info.tier_formats[g], (double)r.info.tier_bits[g], r.n, r.nll, r.want,
        r.nll - r.want, 100.0 * r.agreement, r.max_diff);
    EXPECT_LT(r.max_diff, tol.logit) << name;
    EXPECT_NEAR(r.nll, r.want, tol.nll_mean) << name;
    EXPECT_GE(r.agreement, tol.argmax_min) << name;
    files++;
  }
  EXPECT_EQ(files, full ? 26u : 6u);
}

struct ArchCase {
  const char *name;
  double logit_tol;  // max |logit - llama.cpp's| over window 0, positions 0..31
};

// Tolerances (measured when the fixtures were made): leaving out rope_freqs moves the
// llama3-tiny F32 logits by up to 3.3e-4, the wrong RoPE pairing moves
// qwen2-tiny's by 0.08; llama.cpp itself sits 3e-7 from exact math on both.
TEST(GgufFixtures, Qwen2AndLlama3ScoreLikeLlamaCpp) {
  const ArchCase cases[] = {
      {"qwen2-tiny-F32", 5e-5}, {"llama3-tiny-F32", 5e-5}, {"qwen2-tiny-Q4_K_M", 0.05}, {"llama3-tiny-Q4_K_M", 0.05}};
  for (const ArchCase &c : cases) {
    Score r;
    ASSERT_NO_FATAL_FAILURE(score(c.name, 1, &r));
    printf("%-20s arch %u  max |logit diff| %.3g  window-0 NLL %.6f (llama.cpp %.6f)  tiers 0x%x (default %s: %s)\n", c.name,
           r.arch, r.max_diff, r.nll, r.want, r.info.gears, gb_gear_name(r.info.default_gear),
           r.info.tier_formats[r.info.default_gear]);
    EXPECT_LT(r.max_diff, c.logit_tol) << c.name;
    EXPECT_NEAR(r.nll, r.want, c.logit_tol) << c.name;
    EXPECT_EQ(r.arch, gb::arch_by_name(strstr(c.name, "qwen2") ? "qwen2" : "llama")->id) << c.name;
  }
}

// The version-2 additions are checked on open: a version-1 file cannot
// claim qwen2, and a RoPE frequency factor must be finite and positive.
// A .gbx image (CRCs made right) opened from memory: its status.
gb_status open_image(std::vector<uint8_t> im) {
  gbt::gbx_fix_crcs(im);
  void *buf = nullptr;
  if (posix_memalign(&buf, 64, im.size()) != 0) return GB_ERR_OUT_OF_MEMORY;
  memcpy(buf, im.data(), im.size());
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  const gb_status st = gb_model_open_memory(buf, im.size(), &mo, &m);
  if (m) gb_model_close(m);
  free(buf);
  return st;
}

TEST(GgufFixtures, Version2TensorsAreChecked) {
  for (const char *name : {"qwen2-tiny-F32", "llama3-tiny-F32"}) {
    const std::string out = gbt::temp_dir() + "/v2-" + name + ".gbx";
    gb::ConvertOptions o;
    o.log.fn = gbt::quiet_log;
    o.tiers = 1u << GB_GEAR_F32;
    ASSERT_EQ(gb::convert_gguf(fixture(std::string(name) + ".gguf").c_str(), out.c_str(), o), GB_OK);
    const std::vector<uint8_t> img = gbt::read_file(out);
    unlink(out.c_str());
    ASSERT_EQ(gb::ld_u32(&img[8]), gb::kGbxVersion);
    EXPECT_EQ(open_image(img), GB_OK) << name;
    // Section table: META and TENSORS.
    size_t meta = 0, tens = 0;
    for (uint32_t i = 0; i < gb::ld_u32(&img[16]); i++) {
      const uint8_t *e = &img[64 + 32 * i];
      if (gb::ld_u32(e) == gb::kSecMeta) meta = (size_t)gb::ld_u64(e + 8);
      if (gb::ld_u32(e) == gb::kSecTensors) tens = (size_t)gb::ld_u64(e + 8);
    }
    ASSERT_TRUE(meta && tens);
    // A version-1 file: no TOKENIZER section (version 4 added it; the kind
    // is re-tagged 99, a section readers skip, leaving the VOCAB in use).
    std::vector<uint8_t> v1 = img;
    gb::st_u32(&v1[8], 1);
    EXPECT_EQ(open_image(v1), GB_ERR_CORRUPT) << name;  // a TOKENIZER in a version-1 file
    for (uint32_t i = 0; i < gb::ld_u32(&img[16]); i++)
      if (gb::ld_u32(&v1[64 + 32 * i]) == gb::kSecTokenizer) gb::st_u32(&v1[64 + 32 * i], 99);
    // qwen2 in a version-1 file: the architecture; llama3: the rope_freqs kind.
    EXPECT_EQ(open_image(v1), strstr(name, "qwen2") ? GB_ERR_UNSUPPORTED_TYPE : GB_ERR_CORRUPT) << name;
    // Every optional tensor gets a bad value or goes missing.
    const uint32_t n = gb::ld_u32(&img[tens]);
    bool found = false;
    for (uint32_t i = 0; i < n; i++) {
      const uint8_t *e = &img[tens + 16 + 64 * (size_t)i];
      const uint32_t kind = gb::ld_u32(e);
      if (kind == gb::kRopeFreqs) {
        const size_t sec = gb::ld_u32(e + 28);
        const size_t at = (size_t)gb::ld_u64(&img[64 + 32 * sec + 8]) + (size_t)gb::ld_u64(e + 32);
        for (float bad : {0.0f, -1.0f, NAN}) {
          std::vector<uint8_t> b = img;
          memcpy(&b[at + 4 * 3], &bad, 4);
          EXPECT_EQ(open_image(b), GB_ERR_CORRUPT) << name << " factor " << bad;
        }
        found = true;
      }
      if (kind == gb::kBiasK && gb::ld_u32(e + 4) == 1) {  // layer 1's K bias becomes a second layer-0 one
        std::vector<uint8_t> b = img;
        gb::st_u32(&b[tens + 16 + 64 * (size_t)i + 4], 0);
        EXPECT_EQ(open_image(b), GB_ERR_CORRUPT) << name;  // appears twice
        found = true;
      }
    }
    EXPECT_TRUE(found) << name;
  }
}

// ---- Architectures beyond llama and qwen2 ------------------------------------
// tests/fixtures/ holds, per architecture, the Q4_K_M file llama.cpp's
// quantizer made from the F32 one and llama.cpp's references for both (the
// shared fixtures' schema, F32 KV cache, 1 thread). The F32 file itself is
// written here from its fixed seed (sample_files.h, arch_fixture_spec): the
// same bytes the references were computed on, which the reference's
// dequantized embedding values confirm bit for bit.
const char *const kArchFixtures[] = {"qwen3", "smollm3", "phi3", "gemma3", "lfm2", "qwen35", "gemma4"};

double window0_nll(gb_model *m, gb_gear gear, const gbt::Json &ref);

std::string arch_fixture(const std::string &file) { return std::string(GB_TEST_SOURCE_DIR) + "/fixtures/" + file; }

// The architecture's F32 fixture in the temporary directory; its path.
std::string write_arch_f32(const std::string &arch, const gbt::Json &ref) {
  const gb::GgufSpec spec = gb::arch_fixture_spec(arch);
  const std::vector<uint8_t> b = gb::gguf_serialize(spec);
  const std::string path = gbt::temp_dir() + "/" + arch + "-tiny-F32.gguf";
  EXPECT_TRUE(gb::write_file_bytes(path, b.data(), b.size())) << path;
  const gbt::Json *dq = ref.get("dequant");
  const gbt::Json *e = dq ? dq->get("token_embd.weight") : nullptr;
  EXPECT_TRUE(e != nullptr) << arch;
  if (!e) return path;
  const std::vector<gbt::Json> &vals = e->get("values")->items;
  const std::vector<uint8_t> &data = spec.tensors[0].data;
  EXPECT_EQ(spec.tensors[0].name, "token_embd.weight");
  EXPECT_GE(data.size(), 4 * vals.size());
  size_t same = 0;
  for (size_t i = 0; i < vals.size() && 4 * i + 4 <= data.size(); i++) same += gb::ld_f32(&data[4 * i]) == (float)vals[i].f64();
  EXPECT_EQ(same, vals.size()) << arch << ": the generated F32 fixture is not the one the references were computed on";
  return path;
}

struct ArchScore {
  Score f32, q4;
};

void score_arch(const std::string &arch, size_t n_windows, ArchScore *r, void (*tweak)(gb_model *) = nullptr) {
  gbt::Json rf, rq;
  ASSERT_TRUE(load_json(arch_fixture(arch + "-tiny-F32.gguf.ref.json"), &rf));
  ASSERT_TRUE(load_json(arch_fixture(arch + "-tiny-Q4_K_M.gguf.ref.json"), &rq));
  const std::string f32 = write_arch_f32(arch, rf);
  ASSERT_NO_FATAL_FAILURE(score_file(arch + "-tiny-F32", f32, rf, n_windows, &r->f32, tweak));
  unlink(f32.c_str());
  ASSERT_NO_FATAL_FAILURE(
      score_file(arch + "-tiny-Q4_K_M", arch_fixture(arch + "-tiny-Q4_K_M.gguf"), rq, n_windows, &r->q4, tweak));
}

// Tolerances: llama.cpp sits within about 3e-7 of exact math on F32 files of
// this kind (measured with a float64 forward pass), so F32 logits must agree to 1e-4
// and the mean NLL to 1e-5; on the Q4_K_M file llama.cpp rounds activations
// to 8-bit blocks (Q8_K) before each product and the f32-accumulating q4k
// kernels here need not, so the mean NLL must agree to 0.003 nats and each
// logit to 0.35, as for the other quantized fixtures. The random weights
// give nearly flat logits, whose argmax such differences flip often (here
// 4-12 % of the positions on Q4_K_M).
// gemma3's F32 bound is llama.cpp's own spread on that file: it rounds each
// GELU input and output to binary16 (a table), so tiny differences in the
// sums flip a binary16 step, and the post-FFN norm magnifies the step;
// llama.cpp's logits decoding the references' windows one token at a time
// differ from its own batched ones by up to 7.2e-4 (2.1e-4 over the 32
// positions compared here; 2.4e-6 on qwen3). gemma4 adds a GELU per layer
// (its per-layer input gate) to the same rounding: llama.cpp's one-at-a-time
// logits differ from its batched ones by up to 8.5e-4 over the 32 positions
// (1.2e-3 over the window).
double f32_logit_bound(const std::string &arch) { return arch == "gemma3" || arch == "gemma4" ? 1e-3 : 1e-4; }

TEST(ArchFixtures, EachScoresLikeLlamaCpp) {
  const size_t windows = gbt::test_scale() >= 1.0 ? 8 : 1;
  for (const char *arch : kArchFixtures) {
    ArchScore r;
    ASSERT_NO_FATAL_FAILURE(score_arch(arch, windows, &r));
    for (const Score *sc : {&r.f32, &r.q4}) {
      const bool f = sc == &r.f32;
      printf(
          "%-8s %-6s %zu positions  NLL %.6f (llama.cpp %.6f, diff %+.2e)  argmax agreement %.2f%%  max |logit diff| %.3g  "
          "(tier %s: %s)\n",
          arch, f ? "F32" : "Q4_K_M", sc->n, sc->nll, sc->want, sc->nll - sc->want, 100.0 * sc->agreement, sc->max_diff,
          gb_gear_name((gb_gear)(f ? GB_GEAR_F32 : sc->info.default_gear)),
          sc->info.tier_formats[f ? GB_GEAR_F32 : sc->info.default_gear]);
      EXPECT_EQ(sc->arch, gb::arch_by_name(arch)->id) << arch;
      EXPECT_LT(sc->max_diff, f ? f32_logit_bound(arch) : 0.35) << arch;
      // The bounds hold the eight windows' mean (native runs); under
      // emulation one window is scored, and one window's mean moves more:
      // lfm2's window 0 is +6.0e-3 from llama.cpp's on every CPU (its
      // gated convolutions multiply two projections, each rounded as 8-bit
      // activations by llama.cpp only), the eight windows' +1.6e-3.
      const bool one = windows < 8;
      EXPECT_NEAR(sc->nll, sc->want, f ? 1e-5 : one ? 7e-3 : 3e-3) << arch;
      EXPECT_GE(sc->agreement, f ? 0.999 : one ? 0.80 : 0.85) << arch;
    }
  }
}

// What each architecture adds moves the logits far beyond those tolerances:
// the same files scored without the per-head Q/K norms (qwen3), with RoPE in
// the NoPE layers too (smollm3), or (phi3) with the short LongRoPE factors
// in the references' 256-position context (beyond the trained 128), without
// the attention factor, or rotating whole heads, disagree with llama.cpp;
// so do (gemma3) sliding layers that see every position, or rotate with the
// global base, a global layer without its linear scaling, an unscaled
// embedding, SiLU for GELU, uncapped logits, or no post-norms; and (lfm2)
// short convolutions that carry no state from earlier positions, or
// attention layers without their Q/K norms; and (qwen35) a DeltaNet state
// that does not decay, or convolutions blind to earlier positions; and
// (gemma4) attention scaled as usual, values left unnormalized, no
// per-layer inputs or output scales, or global heads rotated whole.
// A recurrent model's convolutions made blind to the positions before each
// one's own: every layer's older taps zeroed (copies; the file is mapped).
void blind_convolutions(gb_model *m) {
  static std::vector<float> taps[8];
  const uint32_t k = m->meta.conv_kernel, d = m->meta.conv_channels;
  for (uint32_t l = 0; l < m->meta.n_layers && l < 8; l++) {
    if (!m->conv_kernel[l].data) continue;
    const float *w = reinterpret_cast<const float *>(m->conv_kernel[l].data);
    taps[l].assign(w, w + (size_t)d * k);
    for (uint32_t c = 0; c < d; c++)
      for (uint32_t j = 0; j + 1 < k; j++) taps[l][(size_t)c * k + j] = 0.0f;
    m->conv_kernel[l].data = reinterpret_cast<const uint8_t *>(taps[l].data());
  }
}

TEST(ArchFixtures, WhatTheArchitectureAddsMatters) {
  struct Case {
    const char *arch;
    void (*tweak)(gb_model *);
    bool f32_only = false;  // a feature whose effect the Q4_K_M bound hides
  } cases[] = {
      {"qwen3",
       [](gb_model *m) {
         for (uint32_t l = 0; l < m->meta.n_layers; l++) m->qk_norm[0][l].data = m->qk_norm[1][l].data = nullptr;
       }},
      {"smollm3", [](gb_model *m) { m->meta.nope_period = 0; }},
      {"phi3", [](gb_model *m) { m->rope_freqs_long.data = nullptr; }},
      {"phi3", [](gb_model *m) { m->meta.rope_attn_factor = 1.0f; }},
      {"phi3",
       [](gb_model *m) {
         m->meta.rope_dim = m->meta.head_dim;
         m->rope_freqs_long.data = m->rope_freqs.data = nullptr;  // (factors for 24 pairs only)
       }},
      {"gemma3", [](gb_model *m) { m->meta.swa_window = 1u << 20; }},  // the sliding layers see every position
      {"gemma3", [](gb_model *m) { m->meta.rope_theta_swa = m->meta.rope_theta; }},
      {"gemma3", [](gb_model *m) { m->rope_freqs.data = nullptr; }},  // no linear scaling on the global layer
      {"gemma3", [](gb_model *m) { m->meta.embed_scale = 1.0f; }},
      {"gemma3", [](gb_model *m) { m->meta.ffn_act = gb::kFfnSilu; }},
      {"gemma3", [](gb_model *m) { m->meta.logit_softcap = 0.0f; }, true},  // logits near +-5 against a cap of 30
      {"gemma3",
       [](gb_model *m) {
         for (uint32_t l = 0; l < m->meta.n_layers; l++) m->post_norm[0][l].data = m->post_norm[1][l].data = nullptr;
       }},
      // lfm2: the short convolutions blind to the positions before their
      // own (their older taps zeroed: no state carried), or the attention
      // layers without their per-head norms.
      {"lfm2",
       blind_convolutions},
      {"lfm2",
       [](gb_model *m) {
         for (uint32_t l = 0; l < m->meta.n_layers; l++) m->qk_norm[0][l].data = m->qk_norm[1][l].data = nullptr;
       }},
      // qwen35: the DeltaNet state without its decay (A = 0), or its
      // convolutions blind to earlier positions.
      {"qwen35",
       [](gb_model *m) {
         static const float zeros[64] = {};
         for (uint32_t l = 0; l < m->meta.n_layers; l++)
           if (m->gdn[3][l].data) m->gdn[3][l].data = reinterpret_cast<const uint8_t *>(zeros);
       }},
      {"qwen35",
       blind_convolutions},
      // gemma4: attention scaled by 1/sqrt(head size) instead of 1, values
      // not normalized, no per-layer inputs, no layer output scales, or the
      // global layers rotating whole heads (no rope_freqs).
      {"gemma4", [](gb_model *m) { m->meta.attn_scale = 0.0f; }},
      {"gemma4", [](gb_model *m) { m->meta.v_norm = 0; }},
      {"gemma4", [](gb_model *m) { m->meta.ple_dim = 0; }},
      {"gemma4",
       [](gb_model *m) {
         for (uint32_t l = 0; l < m->meta.n_layers; l++) m->ple[3][l].data = nullptr;
       }},
      {"gemma4", [](gb_model *m) { m->rope_freqs.data = nullptr; }, true},  // one global layer of six (0.17 on Q4_K_M)
  };
  // Native runs only: what a feature does is the same on every CPU (the
  // emulated runs check each architecture's logits against llama.cpp's in
  // EachScoresLikeLlamaCpp, which a feature lost to some kernel would fail).
  if (gbt::test_scale() < 1.0) GTEST_SKIP() << "the features' effect is checked natively";
  for (const Case &c : cases) {
    ArchScore r;
    ASSERT_NO_FATAL_FAILURE(score_arch(c.arch, 1, &r, c.tweak));
    printf("%-8s without its feature: F32 max |logit diff| %.3g, NLL diff %+.3g; Q4_K_M %.3g, %+.3g\n", c.arch, r.f32.max_diff,
           r.f32.nll - r.f32.want, r.q4.max_diff, r.q4.nll - r.q4.want);
    EXPECT_GT(r.f32.max_diff, 1e-2) << c.arch;
    if (!c.f32_only) {
      EXPECT_GT(r.q4.max_diff, 0.35) << c.arch;
    }
  }
}

// Gemma 3's QAT weights ship as Q4_0: the gemma3 fixture quantized to Q4_0
// by llama.cpp scores like llama.cpp too (same bounds as Q4_K_M), past the
// 32-position window for 224 of each window's 256 positions.
TEST(ArchFixtures, Gemma3Q4_0) {
  gbt::Json ref;
  ASSERT_TRUE(load_json(arch_fixture("gemma3-tiny-Q4_0.gguf.ref.json"), &ref));
  Score sc;
  ASSERT_NO_FATAL_FAILURE(
      score_file("gemma3-tiny-Q4_0", arch_fixture("gemma3-tiny-Q4_0.gguf"), ref, gbt::test_scale() >= 1.0 ? 8 : 1, &sc));
  printf("gemma3   Q4_0   %zu positions  NLL %.6f (llama.cpp %.6f, diff %+.2e)  argmax agreement %.2f%%  max |logit diff| %.3g (%s)\n",
         sc.n, sc.nll, sc.want, sc.nll - sc.want, 100.0 * sc.agreement, sc.max_diff, sc.info.tier_formats[sc.info.default_gear]);
  EXPECT_EQ(sc.arch, gb::arch_by_name("gemma3")->id);
  EXPECT_LT(sc.max_diff, 0.35);
  EXPECT_NEAR(sc.nll, sc.want, 3e-3);
  EXPECT_GE(sc.agreement, 0.85);
}

// LongRoPE's short factors: the phi3 fixture's weights in a file trained at
// 256 positions (phi3-short), whose 256-position sessions stay within the
// trained context, score like llama.cpp too; scored with the long factors
// instead, they do not. (phi3-tiny itself checks the long factors.)
TEST(ArchFixtures, Phi3ShortFactorsWithinTheTrainedContext) {
  gbt::Json ref;
  ASSERT_TRUE(load_json(arch_fixture("phi3-short-tiny-F32.gguf.ref.json"), &ref));
  const std::string f32 = write_arch_f32("phi3-short", ref);
  Score sc, swapped;
  ASSERT_NO_FATAL_FAILURE(score_file("phi3-short-tiny-F32", f32, ref, gbt::test_scale() >= 1.0 ? 8 : 1, &sc));
  // The long factors in the short ones' place.
  ASSERT_NO_FATAL_FAILURE(score_file("phi3-short-tiny-F32", f32, ref, 1, &swapped, [](gb_model *m) {
    m->rope_freqs = m->rope_freqs_long;
    m->rope_freqs_long.data = nullptr;
  }));
  unlink(f32.c_str());
  printf("phi3-short F32 %zu positions  NLL %.6f (llama.cpp %.6f, diff %+.2e)  max |logit diff| %.3g; with the long factors: %.3g\n",
         sc.n, sc.nll, sc.want, sc.nll - sc.want, sc.max_diff, swapped.max_diff);
  EXPECT_LT(sc.max_diff, 1e-4);
  EXPECT_NEAR(sc.nll, sc.want, 1e-5);
  EXPECT_GT(swapped.max_diff, 1e-2);
}

// Every gear runs each architecture: the F32 file converted with the
// default tiers (low q4, mid q8, high f16, f32) scores window 0 near the f32
// tier on each, and the speculative gear's greedy tokens are the high
// tier's, bit for bit (under emulation: the q8 tier's, the f16 tier's NLL
// left to native runs). An architecture no .gbx could hold would run from
// the F32 GGUF opened in place, its other tiers made in memory at session
// creation (lazy tiers, the default): the same gears, the same checks.
TEST(ArchFixtures, EveryGearRunsAndSpecIsTheVerifier) {
  for (const char *arch : kArchFixtures) {
    // Under emulation the architectures whose passes differ in kind (sliding
    // windows, short convolutions, Gated DeltaNet): the gears' kernels are
    // the kernel tests' part, the others' logits EachScoresLikeLlamaCpp's.
    if (gbt::test_scale() < 1.0 && strcmp(arch, "gemma3") != 0 && strcmp(arch, "lfm2") != 0 && strcmp(arch, "qwen35") != 0 &&
        strcmp(arch, "gemma4") != 0)
      continue;
    gbt::Json ref;
    ASSERT_TRUE(load_json(arch_fixture(std::string(arch) + "-tiny-F32.gguf.ref.json"), &ref));
    const std::string f32 = write_arch_f32(arch, ref), out = gbt::temp_dir() + "/gears-" + arch + ".gbx";
    const bool direct = !gbx_holds(f32);
    if (!direct) {
      gb::ConvertOptions o;
      o.log.fn = gbt::quiet_log;
      ASSERT_EQ(gb::convert_gguf(f32.c_str(), out.c_str(), o), GB_OK) << arch;
    }
    gb_model *m = nullptr;
    gb_model_options mo = gbt::quiet_model_options();
    ASSERT_EQ(gb_model_open_file((direct ? f32 : out).c_str(), &mo, &m), GB_OK) << arch;
    gb_model_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_model_get_info(m, &info), GB_OK);
    ASSERT_EQ(info.gears, direct ? 1u << GB_GEAR_F32 : 0xFu) << arch;
    // Under emulation qemu runs binary16 arithmetic in software: the f16
    // tier's NLL is left to native runs and the spec gear verifies on q8.
    // In place, only the low and mid tiers are made in memory: the spec gear
    // verifies on the file's own f32 tier (q8 under emulation).
    const bool emulated = gbt::test_scale() < 1.0;
    const gb_gear verifier = emulated ? GB_GEAR_MID : direct ? GB_GEAR_F32 : GB_GEAR_HIGH;
    double nll[GB_GEAR_COUNT] = {0, 0, 0, 0};
    for (uint32_t g = 0; g < GB_GEAR_COUNT; g++)
      if (!((emulated || direct) && g == GB_GEAR_HIGH)) nll[g] = window0_nll(m, (gb_gear)g, ref);
    printf("%-8s window-0 NLL: low %.5f  mid %.5f  high %.5f  f32 %.5f (llama.cpp F32 %.5f)\n", arch, nll[0], nll[1], nll[2],
           nll[3], ref.get("nll_per_window")->items[0].f64());
    EXPECT_NEAR(nll[GB_GEAR_F32], ref.get("nll_per_window")->items[0].f64(), 1e-5) << arch;
    if (!emulated && !direct) {
      EXPECT_NEAR(nll[GB_GEAR_HIGH], nll[GB_GEAR_F32], 5e-3) << arch;
    }
    EXPECT_NEAR(nll[GB_GEAR_MID], nll[GB_GEAR_F32], 2e-2) << arch;
    EXPECT_NEAR(nll[GB_GEAR_LOW], nll[GB_GEAR_F32], 0.2) << arch;
    // Greedy: the verifier's tier alone, then the speculative gear verifying on it.
    const std::vector<gbt::Json> &w0 = ref.get("windows")->items[0].items;
    std::vector<int32_t> prompt;
    for (size_t i = 0; i < 12; i++) prompt.push_back((int32_t)w0[i].i64());
    std::vector<int32_t> toks[2];
    for (int spec = 0; spec < 2; spec++) {
      gb_session_options so;
      gb_session_options_init(&so);
      so.gear = spec ? GB_GEAR_SPEC : verifier;
      so.spec_verify_gear = verifier;
      so.sampler.temperature = 0.0f;
      so.log = gbt::quiet_log;
      gb_session *s = nullptr;
      ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK) << arch;
      ASSERT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK) << arch;
      for (int i = 0; i < (gbt::test_scale() >= 1.0 ? 64 : 24); i++) {  // fewer under emulation
        int32_t t = -1;
        ASSERT_EQ(gb_decode_step(s, &t, nullptr), GB_OK) << arch;
        toks[spec].push_back(t);
      }
      gb_session_destroy(s);
    }
    EXPECT_EQ(toks[0], toks[1]) << arch;
    gb_model_close(m);
    unlink(out.c_str());
    unlink(f32.c_str());
  }
}

// A repository fixture converted with the default options: the .gbx image
// (of the current version, opening as it is) and the offsets of its META and
// TENSORS sections.
void converted_fixture(const std::string &file, std::vector<uint8_t> *img, size_t *meta, size_t *tens) {
  const std::string out = gbt::temp_dir() + "/converted-" + file + ".gbx";
  gb::ConvertOptions o;
  o.log.fn = gbt::quiet_log;
  ASSERT_EQ(gb::convert_gguf(arch_fixture(file).c_str(), out.c_str(), o), GB_OK) << file;
  *img = gbt::read_file(out);
  unlink(out.c_str());
  ASSERT_EQ(gb::ld_u32(&(*img)[8]), gb::kGbxVersion);
  EXPECT_EQ(open_image(*img), GB_OK);
  for (uint32_t i = 0; i < gb::ld_u32(&(*img)[16]); i++) {
    const uint8_t *e = &(*img)[64 + 32 * i];
    if (gb::ld_u32(e) == gb::kSecMeta) *meta = (size_t)gb::ld_u64(e + 8);
    if (gb::ld_u32(e) == gb::kSecTensors) *tens = (size_t)gb::ld_u64(e + 8);
  }
  ASSERT_TRUE(*meta && *tens);
}

// A file of the version before the one that added an architecture and its
// tensor kinds: refused for the architecture (UNSUPPORTED_TYPE) and, claimed
// as llama, for the kinds (CORRUPT).
void expect_version_gate(const std::vector<uint8_t> &img, size_t meta, uint32_t previous) {
  std::vector<uint8_t> b = img;
  gb::st_u32(&b[8], previous);
  EXPECT_EQ(open_image(b), GB_ERR_UNSUPPORTED_TYPE) << "version " << previous;
  gb::st_u32(&b[meta + 4], gb::arch_by_name("llama")->id);
  EXPECT_EQ(open_image(b), GB_ERR_CORRUPT) << "version " << previous;
}

// The version-5 additions are checked on open: a file of an earlier version
// cannot hold a per-head norm or claim qwen3 / smollm3; the norms are in
// every layer or none; nope_period stays within the layers.
TEST(ArchFixtures, Version5FieldsAreChecked) {
  std::vector<uint8_t> img;
  size_t meta = 0, tens = 0;
  ASSERT_NO_FATAL_FAILURE(converted_fixture("qwen3-tiny-Q4_K_M.gguf", &img, &meta, &tens));
  expect_version_gate(img, meta, 4);  // qwen3 and the per-head norm kinds need version 5
  std::vector<uint8_t> b = img;
  gb::st_u32(&b[meta + 156], 3);
  EXPECT_EQ(open_image(b), GB_ERR_CORRUPT);  // NoPE period beyond the 2 layers
  b = img;
  gb::st_u32(&b[meta + 156], 2);
  EXPECT_EQ(open_image(b), GB_OK);  // layer 1 without RoPE: a valid file
  const uint32_t n = gb::ld_u32(&img[tens]);
  bool found = false;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = &img[tens + 16 + 64 * (size_t)i];
    if (gb::ld_u32(e) == gb::kKNorm && gb::ld_u32(e + 4) == 1) {  // layer 1's K norm becomes a second layer-0 one
      b = img;
      gb::st_u32(&b[tens + 16 + 64 * (size_t)i + 4], 0);
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT);
      b = img;
      gb::st_u32(&b[tens + 16 + 64 * (size_t)i], 99);  // an unknown kind
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

// The version-6 additions: phi3 needs version 6; the long RoPE factors
// (kind 19) come with the short ones and a trained context; the attention
// factor is finite, positive and at most 16 (0 reads as 1). The fused
// projections leave no trace in the file: their row ranges are the Q, K, V,
// gate and up matrices.
TEST(ArchFixtures, Version6FieldsAreChecked) {
  std::vector<uint8_t> img;
  size_t meta = 0, tens = 0;
  ASSERT_NO_FATAL_FAILURE(converted_fixture("phi3-tiny-Q4_K_M.gguf", &img, &meta, &tens));
  ASSERT_EQ(gb::ld_u32(&img[8]), gb::kGbxVersion);
  EXPECT_EQ(gb::ld_u32(&img[meta + 160]), 128u);
  EXPECT_FLOAT_EQ(gb::ld_f32(&img[meta + 164]), 1.0690450f);
  expect_version_gate(img, meta, 5);  // phi3 and kind 19 need version 6
  std::vector<uint8_t> b;
  for (float bad : {-1.0f, 17.0f, NAN, INFINITY}) {
    b = img;
    gb::st_f32(&b[meta + 164], bad);
    EXPECT_EQ(open_image(b), GB_ERR_CORRUPT) << bad;
  }
  b = img;
  gb::st_f32(&b[meta + 164], 0.0f);
  EXPECT_EQ(open_image(b), GB_OK);  // 0 reads as 1
  b = img;
  gb::st_u32(&b[meta + 160], 0);
  EXPECT_EQ(open_image(b), GB_ERR_MISSING_TENSOR);  // long factors, but no trained context to compare with
  const uint32_t n = gb::ld_u32(&img[tens]);
  int kinds[gb::kTensorKindMax + 1] = {0};
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = &img[tens + 16 + 64 * (size_t)i];
    const uint32_t kind = gb::ld_u32(e);
    if (kind <= gb::kTensorKindMax) kinds[kind]++;
    if (kind == gb::kRopeFreqs) {  // the short factors become a second long set
      b = img;
      gb::st_u32(&b[tens + 16 + 64 * (size_t)i], gb::kRopeFreqsLong);
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT);
      b = img;
      gb::st_u32(&b[tens + 16 + 64 * (size_t)i], gb::kTensorKindMax + 1);  // an unknown kind
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT);
    }
  }
  EXPECT_EQ(kinds[gb::kRopeFreqs], 1);
  EXPECT_EQ(kinds[gb::kRopeFreqsLong], 1);
  for (uint32_t k : {gb::kWq, gb::kWk, gb::kWv, gb::kW1, gb::kW3}) EXPECT_EQ(kinds[k], 2) << k;  // 2 layers, one tier
}

// The version-11 additions are checked on open: recurrent layers (the
// LAYERS section, META's convolution, DeltaNet and gated-attention fields,
// tensor kinds 22..32) only in a version-11 file, each layer holding the
// tensors of its kind, every shape following the META fields.
TEST(ArchFixtures, Version11FieldsAreChecked) {
  for (const char *arch : {"lfm2", "qwen35"}) {
    SCOPED_TRACE(arch);
    const bool delta = strcmp(arch, "qwen35") == 0;
    std::vector<uint8_t> img;
    size_t meta = 0, tens = 0;
    ASSERT_NO_FATAL_FAILURE(converted_fixture(std::string(arch) + "-tiny-Q4_K_M.gguf", &img, &meta, &tens));
    size_t layers = 0, layers_entry = 0;
    for (uint32_t i = 0; i < gb::ld_u32(&img[16]); i++)
      if (gb::ld_u32(&img[64 + 32 * i]) == gb::kSecLayers) {
        layers_entry = 64 + 32 * i;
        layers = (size_t)gb::ld_u64(&img[layers_entry + 8]);
      }
    ASSERT_NE(layers, 0u);
    const uint32_t n_layers = gb::ld_u32(&img[meta + 16]);
    ASSERT_EQ(gb::ld_u32(&img[layers]), n_layers);
    const uint32_t taps = delta ? 4 : 3;  // the fixtures' convolutions (lfm2's l_cache, qwen35's conv_kernel)
    EXPECT_EQ(gb::ld_u32(&img[meta + 192]), taps);
    EXPECT_EQ(gb::ld_u32(&img[meta + 212]), delta ? 1u : 0u);
    expect_version_gate(img, meta, 10);  // lfm2 / qwen35, LAYERS and kinds 22..32 need version 11
    uint32_t conv_layer = n_layers, attn_layer = n_layers;
    for (uint32_t l = 0; l < n_layers; l++) {
      if (img[layers + 8 + l] != gb::kLayerAttention && conv_layer == n_layers) conv_layer = l;
      if (img[layers + 8 + l] == gb::kLayerAttention && attn_layer == n_layers) attn_layer = l;
    }
    ASSERT_LT(conv_layer, n_layers);
    ASSERT_LT(attn_layer, n_layers);
    EXPECT_EQ(img[layers + 8 + conv_layer], delta ? gb::kLayerDeltaNet : gb::kLayerShortConv);
    struct Bad {
      size_t at;  // absolute offset
      uint32_t u;
      bool byte;
      gb_status want;
      const char *what;
    } bad[] = {
        {meta + 192, 0, false, GB_ERR_CORRUPT, "no convolution, but a LAYERS section"},
        {meta + 192, 1, false, GB_ERR_CORRUPT, "a convolution of one tap"},
        {meta + 192, gb::kMaxConvKernel + 1, false, GB_ERR_CORRUPT, "too many taps"},
        {meta + 192, taps + 1, false, GB_ERR_SHAPE_MISMATCH, "taps the tensors do not have"},
        {meta + 196, 7, false, GB_ERR_CORRUPT, "channels the layers cannot have"},
        {meta + 212, 2, false, GB_ERR_CORRUPT, "attn_gate not a flag"},
        {meta + 212, delta ? 0u : 1u, false, GB_ERR_SHAPE_MISMATCH, "queries without (with) their gates"},
        {layers, n_layers + 1, false, GB_ERR_CORRUPT, "LAYERS counts other layers"},
        {layers + 8 + conv_layer, 3, true, GB_ERR_CORRUPT, "an unknown layer kind"},
        {layers + 8 + conv_layer, gb::kLayerAttention, true, GB_ERR_CORRUPT, "a recurrent layer's tensors in an attention layer"},
        {layers + 8 + attn_layer, delta ? gb::kLayerDeltaNet : gb::kLayerShortConv, true, GB_ERR_CORRUPT,
         "an attention layer's tensors in a recurrent layer"},
        {layers + 8 + conv_layer, delta ? gb::kLayerShortConv : gb::kLayerDeltaNet, true, GB_ERR_CORRUPT,
         "a recurrent layer of the other kind"},
        {layers_entry, 6, false, GB_ERR_CORRUPT, "the LAYERS section missing (another kind)"},
    };
    for (const Bad &x : bad) {
      std::vector<uint8_t> b = img;
      if (x.byte)
        b[x.at] = (uint8_t)x.u;
      else
        gb::st_u32(&b[x.at], x.u);
      EXPECT_EQ(open_image(b), x.want) << x.what;
    }
    if (delta) {  // value heads that are no multiple of the key heads
      std::vector<uint8_t> b = img;
      gb::st_u32(&b[meta + 208], gb::ld_u32(&img[meta + 204]) * 2 + 1);
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT);
    }
    // Tensor entries: a recurrent kind moved to an attention layer, or
    // renamed to the other recurrent kind's; an unknown kind.
    const uint32_t n = gb::ld_u32(&img[tens]);
    bool found = false;
    for (uint32_t i = 0; i < n; i++) {
      const size_t e = tens + 16 + 64 * (size_t)i;
      const uint32_t kind = gb::ld_u32(&img[e]);
      if (kind != (delta ? (uint32_t)gb::kGdnQkv : (uint32_t)gb::kConvIn) || gb::ld_u32(&img[e + 4]) != conv_layer) continue;
      found = true;
      std::vector<uint8_t> b = img;
      gb::st_u32(&b[e + 4], attn_layer);
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT) << "moved to an attention layer";
      b = img;
      gb::st_u32(&b[e], delta ? gb::kConvIn : gb::kGdnQkv);
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT) << "the other kind's projection";
      b = img;
      gb::st_u32(&b[e], gb::kTensorKindMax + 1);
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT) << "an unknown kind";
    }
    EXPECT_TRUE(found);
    EXPECT_EQ(open_image(img), GB_OK);
  }
}

// The version-8 addition: weight format 16 (IQ4_XS) is refused in an
// earlier file, and the ids around it (the 16-row layouts' memory-only ids,
// one past it) in any.
TEST(GgufFixtures, Version8FormatIsChecked) {
  std::vector<uint8_t> img;
  size_t meta = 0, tens = 0;
  ASSERT_NO_FATAL_FAILURE(converted_fixture("stories5M-IQ4_XS.gguf", &img, &meta, &tens));
  const uint32_t n = gb::ld_u32(&img[tens]);
  size_t first = 0, count = 0;
  for (uint32_t i = 0; i < n; i++) {
    const size_t e = tens + 16 + 64 * (size_t)i;
    if (gb::ld_u32(&img[e + 12]) == gb::kFmtIq4xs && count++ == 0) first = e;
  }
  EXPECT_EQ(count, 42u);  // the matrices of the six layers
  ASSERT_NE(first, 0u);
  std::vector<uint8_t> b = img;
  gb::st_u32(&b[8], 7);
  EXPECT_EQ(open_image(b), GB_ERR_UNSUPPORTED_TYPE);
  for (uint32_t bad : {(uint32_t)gb::kFmtQ4KR16, (uint32_t)gb::kFmtQ6KR16, (uint32_t)gb::kFmtCount}) {
    b = img;
    gb::st_u32(&b[first + 12], bad);
    EXPECT_EQ(open_image(b), GB_ERR_UNSUPPORTED_TYPE) << bad;
  }
}

// The weight formats of versions 9 (17..24: the i-quants and MXFP4), 10
// (25, 26: Q1_0 and Q2_0) and 11 (27: NVFP4) are refused in an earlier
// file, and the id one past them in any.
TEST(GgufFixtures, NewerFormatsNeedTheirVersion) {
  struct Case {
    const char *name;
    uint32_t lo, hi, version;
    size_t count;  // tensors in formats lo..hi
  };
  const Case cases[] = {
      {"stories5M-MXFP4.gguf", gb::kFmtIq2xxs, gb::kFmtMxfp4, 9, 42},
      {"stories5M-IQ1_M.gguf", gb::kFmtIq2xxs, gb::kFmtMxfp4, 9, 36},  // 30 IQ1_M + 6 IQ2_XXS
      {"stories5M-Q1_0.gguf", gb::kFmtQ1_0, gb::kFmtQ2_0, 10, 42},
      {"stories5M-Q2_0.gguf", gb::kFmtQ1_0, gb::kFmtQ2_0, 10, 42},
      {"stories5M-NVFP4.gguf", gb::kFmtNvfp4, gb::kFmtNvfp4, 11, 42},
  };
  for (const Case &c : cases) {
    std::vector<uint8_t> img;
    size_t meta = 0, tens = 0;
    ASSERT_NO_FATAL_FAILURE(converted_fixture(c.name, &img, &meta, &tens));
    const uint32_t n = gb::ld_u32(&img[tens]);
    size_t first = 0, count = 0;
    for (uint32_t i = 0; i < n; i++) {
      const size_t e = tens + 16 + 64 * (size_t)i;
      const uint32_t f = gb::ld_u32(&img[e + 12]);
      if (f >= c.lo && f <= c.hi && count++ == 0) first = e;
    }
    EXPECT_EQ(count, c.count) << c.name;
    ASSERT_NE(first, 0u);
    EXPECT_EQ(open_image(img), GB_OK) << c.name;
    std::vector<uint8_t> b = img;
    gb::st_u32(&b[8], c.version - 1);
    EXPECT_EQ(open_image(b), GB_ERR_UNSUPPORTED_TYPE) << c.name;
    b = img;
    gb::st_u32(&b[first + 12], (uint32_t)gb::kFmtCount);
    EXPECT_EQ(open_image(b), GB_ERR_UNSUPPORTED_TYPE) << c.name;
  }
}

// The version-7 additions: gemma3 needs version 7; kinds 20 and 21 need it
// too and come in every layer or none; the sliding-window period leaves a
// global layer; the window, RoPE base, embedding scale, logit cap and FFN
// activation are in range. Export to GGUF refuses what it cannot write yet.
TEST(ArchFixtures, Version7FieldsAreChecked) {
  std::vector<uint8_t> img;
  size_t meta = 0, tens = 0;
  ASSERT_NO_FATAL_FAILURE(converted_fixture("gemma3-tiny-Q4_0.gguf", &img, &meta, &tens));
  EXPECT_EQ(gb::ld_u32(&img[meta + 168]), 16u);
  EXPECT_EQ(gb::ld_u32(&img[meta + 172]), 3u);
  EXPECT_EQ(gb::ld_f32(&img[meta + 176]), 1e4f);
  EXPECT_EQ(gb::ld_f32(&img[meta + 180]), 16.0f);
  EXPECT_EQ(gb::ld_f32(&img[meta + 184]), 30.0f);
  EXPECT_EQ(gb::ld_u32(&img[meta + 188]), (uint32_t)gb::kFfnGelu);
  expect_version_gate(img, meta, 6);  // gemma3 and kinds 20, 21 need version 7
  std::vector<uint8_t> b;
  struct Bad {
    uint32_t at;
    uint32_t u;
    float f;
    gb_status want;
  } bad[] = {
      {172, 1, 0, GB_ERR_UNSUPPORTED_TYPE},  // period 1: a window no layer uses
      {172, 0, 0, GB_ERR_UNSUPPORTED_TYPE},  // period 0: every layer slides, none is global
      {172, 5, 0, GB_ERR_CORRUPT},           // a period beyond the 4 layers
      {168, 1u << 23, 0, GB_ERR_CORRUPT},    // a window beyond any context
      {176, 0, NAN, GB_ERR_CORRUPT},
      {176, 0, -1.0f, GB_ERR_CORRUPT},
      {180, 0, -16.0f, GB_ERR_CORRUPT},
      {180, 0, INFINITY, GB_ERR_CORRUPT},
      {184, 0, -30.0f, GB_ERR_CORRUPT},
      {184, 0, NAN, GB_ERR_CORRUPT},
      {188, 2, 0, GB_ERR_CORRUPT},  // an unknown activation
  };
  for (const Bad &x : bad) {
    b = img;
    if (x.at == 176 || x.at == 180 || x.at == 184)
      gb::st_f32(&b[meta + x.at], x.f);
    else
      gb::st_u32(&b[meta + x.at], x.u);
    EXPECT_EQ(open_image(b), x.want) << "META +" << x.at << " " << x.u << " " << x.f;
  }
  b = img;
  gb::st_f32(&b[meta + 180], 0.0f);
  EXPECT_EQ(open_image(b), GB_OK);  // 0 reads as 1
  b = img;
  gb::st_u32(&b[meta + 168], 0);
  EXPECT_EQ(open_image(b), GB_OK);  // no window: every layer global
  const uint32_t n = gb::ld_u32(&img[tens]);
  bool found = false;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = &img[tens + 16 + 64 * (size_t)i];
    if (gb::ld_u32(e) == gb::kPostFfnNorm && gb::ld_u32(e + 4) == 2) {
      b = img;
      gb::st_u32(&b[tens + 16 + 64 * (size_t)i + 4], 1);  // layer 2's becomes a second layer-1 one
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT);
      b = img;
      gb::st_u32(&b[tens + 16 + 64 * (size_t)i], gb::kPostAttnNorm);  // two post-attention norms in layer 2, no post-FFN one
      EXPECT_EQ(open_image(b), GB_ERR_CORRUPT);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // Export: refused with its status, nothing written.
  const std::string gbx = gbt::temp_dir() + "/v7-gemma3.gbx", out = gbt::temp_dir() + "/v7-gemma3-export.gguf";
  ASSERT_TRUE(gb::write_file_bytes(gbx, img.data(), img.size()));
  gb::Logger quiet;
  quiet.fn = gbt::quiet_log;
  unlink(out.c_str());
  EXPECT_EQ(gb::export_gguf(gbx.c_str(), out.c_str(), -1, quiet), GB_ERR_UNSUPPORTED_TYPE);
  EXPECT_NE(access(out.c_str(), F_OK), 0);
  unlink(gbx.c_str());
}

}  // namespace

namespace {

// Mean NLL of a fixture's first reference window on one gear (f32 KV).
double window0_nll(gb_model *m, gb_gear gear, const gbt::Json &ref) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = gear;
  so.kv.policy = GB_KV_F32;
  so.log = gbt::quiet_log;
  gb_session *s = nullptr;
  if (gb_session_create(m, &so, nullptr, 0, &s) != GB_OK) return NAN;
  const std::vector<gbt::Json> &toks = ref.get("windows")->items[0].items;
  double nll = 0;
  size_t n = 0;
  for (size_t p = 0; p + 1 < toks.size(); p++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    if (gb_feed(s, (int32_t)toks[p].i64(), &info) != GB_OK) break;
    double mx = -1e300, sum = 0;
    for (uint32_t j = 0; j < info.n_vocab; j++) mx = std::max(mx, (double)info.logits[j]);
    for (uint32_t j = 0; j < info.n_vocab; j++) sum += exp((double)info.logits[j] - mx);
    nll += mx + log(sum) - info.logits[toks[p + 1].i64()];
    n++;
  }
  gb_session_destroy(s);
  return n + 1 == toks.size() ? nll / (double)n : NAN;
}

}  // namespace

// A file converted from quantized weights holds only its own tier: every gear
// policy that needs another fails with GB_ERR_UNAVAILABLE and a log line that
// says why. Derived tiers stay possible on request, with the re-rounding
// error in a warning, and they score worse than the source's own tier.
TEST(GgufFixtures, QuantizedFilesOfferOnlyHonestTiers) {
  const std::string out = gbt::temp_dir() + "/honest-q4km.gbx";
  gb::ConvertOptions o;
  o.log.fn = gbt::quiet_log;
  ASSERT_EQ(gb::convert_gguf(fixture("stories5M-Q4_K_M.gguf").c_str(), out.c_str(), o), GB_OK);
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(out.c_str(), nullptr, &m), GB_OK);
  gb_model_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(gb_model_get_info(m, &info), GB_OK);
  EXPECT_EQ(info.gears, 1u << GB_GEAR_LOW);
  EXPECT_EQ(info.default_gear, GB_GEAR_LOW);
  EXPECT_STREQ(info.tier_formats[GB_GEAR_LOW], "q4k+q6k");
  EXPECT_GT(info.tier_bits[GB_GEAR_LOW], 4.5f);
  EXPECT_LT(info.tier_bits[GB_GEAR_LOW], 5.5f);
  for (gb_gear g : {GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32, GB_GEAR_AUTO, GB_GEAR_SPEC}) {
    std::string logged;
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = g;
    gbt::x(so).lazy_tiers = 1;
    so.log = [](void *u, gb_log_level, const char *msg) { *static_cast<std::string *>(u) += msg; };
    so.log_user = &logged;
    gb_session *s = nullptr;
    EXPECT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_ERR_UNAVAILABLE) << gb_gear_name(g);
    EXPECT_EQ(s, nullptr);
    EXPECT_NE(logged.find("already quantized"), std::string::npos) << gb_gear_name(g) << ": " << logged;
  }
  gb_model_close(m);
  unlink(out.c_str());

  // Q8_0 with a low tier asked for: q4 rounded again from the 8-bit blocks.
  const std::string out2 = gbt::temp_dir() + "/derived-q8.gbx";
  std::string warned;
  o.tiers = 1u << GB_GEAR_LOW | 1u << GB_GEAR_MID;
  o.log.fn = [](void *u, gb_log_level lv, const char *msg) {
    if (lv <= GB_LOG_WARN) *static_cast<std::string *>(u) += std::string(msg) + "\n";
  };
  o.log.user = &warned;
  ASSERT_EQ(gb::convert_gguf(fixture("stories5M-Q8_0.gguf").c_str(), out2.c_str(), o), GB_OK);
  EXPECT_NE(warned.find("tier low (q4) was rounded again"), std::string::npos) << warned;
  EXPECT_NE(warned.find("relative RMS error"), std::string::npos) << warned;
  ASSERT_EQ(gb_model_open_file(out2.c_str(), nullptr, &m), GB_OK);
  ASSERT_EQ(gb_model_get_info(m, &info), GB_OK);
  EXPECT_EQ(info.default_gear, GB_GEAR_MID);
  EXPECT_EQ(info.tier_origin[GB_GEAR_MID], (uint32_t)GB_TIER_ORIGIN_SOURCE);
  EXPECT_EQ(info.tier_origin[GB_GEAR_LOW], (uint32_t)GB_TIER_ORIGIN_REQUANTIZED);
  gbt::Json ref;
  ASSERT_TRUE(load_ref("stories5M-Q8_0", &ref));
  const double own = window0_nll(m, GB_GEAR_MID, ref), derived = window0_nll(m, GB_GEAR_LOW, ref);
  printf("stories5M-Q8_0 window 0: NLL %.5f on its own q8 tier, %.5f on a q4 tier derived from it (+%.5f)\n", own, derived,
         derived - own);
  EXPECT_TRUE(isfinite(own) && isfinite(derived));
  EXPECT_GT(derived, own);
  gb_model_close(m);
  unlink(out2.c_str());
}
