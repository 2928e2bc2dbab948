// test_gguf_split.cpp — a GGUF split in several files
// ("NAME-00001-of-00003.gguf" ...), as llama.cpp's gguf-split writes them:
// the first file holds every key and some of the tensors (or none), each
// file says which part it is of how many ("split.no", "split.count") and
// the first how many tensors there are ("split.tensors.count"). Opened from
// the first part's path, the model gives the same logits as the unsplit
// file, in every load mode; missing, misnumbered or overlapping parts get
// specific statuses; a change to any part is caught before a pass.
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sample_files.h"
#include "test_util.h"

namespace {

std::vector<uint8_t> u16(uint16_t v) { return {(uint8_t)v, (uint8_t)(v >> 8)}; }
std::vector<uint8_t> i32(int32_t v) {
  std::vector<uint8_t> b(4);
  memcpy(b.data(), &v, 4);
  return b;
}

// The whole model, and its tensors spread over parts: part k holds the
// tensors whose index i has first[k] <= i < first[k + 1].
gb::GgufSpec whole_spec() {
  gb::SampleDims d;
  d.dim = 64, d.hidden = 96, d.layers = 3, d.heads = 4, d.kv_heads = 2, d.vocab = 320, d.seq_len = 64;
  d.shared_classifier = false;
  return gb::sample_gguf_spec(d, 0 /* F32 */);
}

struct Split {
  std::vector<gb::GgufSpec> parts;
};

Split split(const gb::GgufSpec &whole, const std::vector<size_t> &first) {
  Split s;
  const size_t n = first.size();
  for (size_t k = 0; k < n; k++) {
    gb::GgufSpec p;
    if (k == 0) p.kv = whole.kv;
    p.set("split.no", 2, u16((uint16_t)k));
    p.set("split.count", 2, u16((uint16_t)n));
    p.set("split.tensors.count", 5, i32((int32_t)whole.tensors.size()));
    const size_t end = k + 1 < n ? first[k + 1] : whole.tensors.size();
    for (size_t i = first[k]; i < end; i++) p.tensors.push_back(whole.tensors[i]);
    s.parts.push_back(p);
  }
  return s;
}

std::string part_name(const std::string &prefix, size_t k, size_t n) {
  char b[64];
  snprintf(b, sizeof b, "-%05zu-of-%05zu.gguf", k + 1, n);
  return prefix + b;
}

// Writes the parts; returns the first part's path.
std::string write_parts(const Split &s, const std::string &name) {
  const std::string prefix = gbt::temp_dir() + "/" + name;
  for (size_t k = 0; k < s.parts.size(); k++) {
    const std::vector<uint8_t> b = gb::gguf_serialize(s.parts[k]);
    EXPECT_TRUE(gb::write_file_bytes(part_name(prefix, k, s.parts.size()), b.data(), b.size()));
  }
  return part_name(prefix, 0, s.parts.size());
}

struct Log {
  std::vector<std::string> lines;
  static void fn(void *u, gb_log_level, const char *m) { static_cast<Log *>(u)->lines.push_back(m); }
  bool has(const std::string &t) const {
    for (const std::string &l : lines)
      if (l.find(t) != std::string::npos) return true;
    return false;
  }
};

gb_status open(const std::string &path, gb_model **m, gb_model_load load = GB_MODEL_LOAD_MAP, Log *log = nullptr) {
  gb_model_options o = gbt::quiet_model_options();
  o.load = load;
  if (log) o.log = Log::fn, o.log_user = log;
  return gb_model_open_file(path.c_str(), &o, m);
}

// Greedy tokens and every logit of every step.
std::vector<float> run(gb_model *m, int n) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.sampler.temperature = 0;
  so.n_ctx = 64;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  const int32_t prompt[] = {1, 300, 301};
  EXPECT_EQ(gb_prefill(s, prompt, 3), GB_OK);
  std::vector<float> out;
  for (int i = 0; i < n; i++) {
    gb_step_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    int32_t t = -1;
    if (gb_decode_step(s, &t, &info) != GB_OK) break;
    out.push_back((float)t);
    out.insert(out.end(), info.logits, info.logits + info.n_vocab);
  }
  gb_session_destroy(s);
  return out;
}

TEST(GgufSplit, OpensFromTheFirstPartAndRunsAsTheWholeFile) {
  const gb::GgufSpec whole = whole_spec();
  const std::vector<uint8_t> wb = gb::gguf_serialize(whole);
  const std::string whole_path = gbt::temp_dir() + "/whole.gguf";
  ASSERT_TRUE(gb::write_file_bytes(whole_path, wb.data(), wb.size()));
  gb_model *w = nullptr;
  ASSERT_EQ(open(whole_path, &w), GB_OK);
  const std::vector<float> want = run(w, 8);
  ASSERT_GT(want.size(), 8u);
  gb_model_info wi;
  wi.struct_size = sizeof wi;
  gb_model_get_info(w, &wi);
  gb_model_close(w);
  const size_t T = whole.tensors.size();
  // Three parts; and the first part holding only metadata, as gguf-split's
  // --no-tensor-first-split writes it.
  for (const std::vector<size_t> &first : {std::vector<size_t>{0, T / 3, 2 * T / 3}, std::vector<size_t>{0, 0, T / 2}}) {
    const std::string path = write_parts(split(whole, first), first[1] == 0 ? "split-empty-first" : "split");
    for (gb_model_load load : {GB_MODEL_LOAD_MAP, GB_MODEL_LOAD_COPY, GB_MODEL_LOAD_LOCK}) {
      gb_model *m = nullptr;
      ASSERT_EQ(open(path, &m, load), GB_OK) << path << " load " << load;
      EXPECT_EQ(run(m, 8), want) << "load " << load;
      gb_model_info mi;
      mi.struct_size = sizeof mi;
      ASSERT_EQ(gb_model_get_info(m, &mi), GB_OK);
      EXPECT_GT(mi.file_bytes, wi.file_bytes);  // three headers
      EXPECT_EQ(mi.n_params, wi.n_params);
      EXPECT_EQ(gb_model_verify(m), GB_OK);
      gb_model_close(m);
    }
  }
}

TEST(GgufSplit, BadPartsGetAStatusNamingThem) {
  const gb::GgufSpec whole = whole_spec();
  const size_t T = whole.tensors.size();
  const std::vector<size_t> first = {0, T / 3, 2 * T / 3};
  gb_model *m = reinterpret_cast<gb_model *>(0x1);
  {  // the third file is missing
    const Split s = split(whole, first);
    const std::string path = write_parts(s, "missing");
    ASSERT_EQ(remove(part_name(gbt::temp_dir() + "/missing", 2, 3).c_str()), 0);
    Log log;
    EXPECT_EQ(open(path, &m, GB_MODEL_LOAD_MAP, &log), GB_ERR_FILE_NOT_FOUND);
    EXPECT_TRUE(log.has("missing-00003-of-00003.gguf")) << (log.lines.empty() ? "" : log.lines[0]);
  }
  {  // opened by another part's path, or a name that does not say where the others are
    const std::string path = write_parts(split(whole, first), "bypart");
    Log log;
    EXPECT_EQ(open(part_name(gbt::temp_dir() + "/bypart", 1, 3), &m, GB_MODEL_LOAD_MAP, &log), GB_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(log.has("open the first part"));
    const std::string renamed = gbt::temp_dir() + "/renamed.gguf";
    ASSERT_EQ(rename(path.c_str(), renamed.c_str()), 0);
    Log log2;
    EXPECT_EQ(open(renamed, &m, GB_MODEL_LOAD_MAP, &log2), GB_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(log2.has("-00001-of-00003.gguf"));
    // From memory: one buffer cannot hold the other files.
    const std::vector<uint8_t> b = gbt::read_file(renamed);
    std::vector<uint64_t> mem((b.size() + 7) / 8);
    memcpy(mem.data(), b.data(), b.size());
    gb_model_options o = gbt::quiet_model_options();
    EXPECT_EQ(gb_model_open_memory(mem.data(), b.size(), &o, &m), GB_ERR_INVALID_ARGUMENT);
    size_t bytes = 0;
    EXPECT_EQ(gb_model_mem_size(mem.data(), b.size(), &o, &bytes), GB_ERR_INVALID_ARGUMENT);
  }
  struct Case {
    const char *name;
    void (*edit)(Split *);
  };
  const Case cases[] = {
      {"misnumbered", [](Split *s) { s->parts[2].set("split.no", 2, u16(1)); }},
      {"count-differs", [](Split *s) { s->parts[1].set("split.count", 2, u16(4)); }},
      {"tensor-count", [](Split *s) { s->parts[0].set("split.tensors.count", 5, i32(3)); }},
      {"twice",
       [](Split *s) {
         s->parts[2].tensors.push_back(s->parts[1].tensors[0]);
         size_t total = 0;
         for (const gb::GgufSpec &p : s->parts) total += p.tensors.size();
         s->parts[0].set("split.tensors.count", 5, i32((int32_t)total));
       }},
      {"no-out-of-range", [](Split *s) { s->parts[1].set("split.no", 2, u16(7)); }},
      {"key-type", [](Split *s) { s->parts[1].set("split.no", 8, gb::gguf_enc_str("one")); }},
  };
  for (const Case &c : cases) {
    Split s = split(whole, first);
    c.edit(&s);
    const std::string path = write_parts(s, c.name);
    Log log;
    m = reinterpret_cast<gb_model *>(0x1);
    EXPECT_EQ(open(path, &m, GB_MODEL_LOAD_MAP, &log), GB_ERR_CORRUPT) << c.name;
    EXPECT_EQ(m, reinterpret_cast<gb_model *>(0x1)) << c.name;
    EXPECT_FALSE(log.lines.empty()) << c.name;
  }
}

TEST(GgufSplit, AChangedPartStopsThePass) {
  const gb::GgufSpec whole = whole_spec();
  const size_t T = whole.tensors.size();
  const std::string path = write_parts(split(whole, {0, T / 3, 2 * T / 3}), "changed");
  gb_model *m = nullptr;
  ASSERT_EQ(open(path, &m), GB_OK);
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 32;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  const int32_t bos = 1;
  ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
  ASSERT_EQ(truncate(part_name(gbt::temp_dir() + "/changed", 2, 3).c_str(), 100), 0);
  int32_t t = -1;
  EXPECT_EQ(gb_decode_step(s, &t, nullptr), GB_ERR_FILE_CHANGED);
  EXPECT_EQ(gb_model_verify(m), GB_ERR_FILE_CHANGED);
  gb_session_destroy(s);
  gb_model_close(m);
}

}  // namespace
