// test_gguf_direct.cpp — GGUF files opened as models in place (no convert
// step):
//   - every GGUF fixture (each type llama.cpp's quantizer writes, every
//     architecture) gives bit for bit the logits, token ids and model facts
//     of the same file converted to a .gbx with the same tier and the
//     row-major layout;
//   - a type no weight format reads (BF16) is refused, naming the tensor;
//   - caller memory: gb_model_mem_size is exact (one byte less is refused);
//   - truncations at every length of the metadata and across the data,
//     flipped metadata bytes, and planted faults (misaligned or overlapping
//     tensor data, a key twice, an unknown tensor type or architecture, a
//     non-finite block scale): a specific status, never a crash (ASan sees
//     any read outside the buffer);
//   - a mapped GGUF truncated under an open model: GB_ERR_FILE_CHANGED.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "convert.h"
#include "format.h"
#include "gguf_view.h"
#include "json_min.h"
#include "model.h"
#include "test_util.h"

namespace {

struct Log {
  std::string text;
  static void fn(void *u, gb_log_level, const char *m) {
    static_cast<Log *>(u)->text += m;
    static_cast<Log *>(u)->text += "\n";
  }
};

std::string shared_fixture(const std::string &n) { return gbt::shared_path(("fixtures/" + n).c_str()); }
std::string own_fixture(const std::string &n) { return std::string(GB_TEST_SOURCE_DIR) + "/fixtures/" + n; }

// Every GGUF fixture that gearbx runs: llama.cpp's quantizer's output for
// each type, and each architecture's tiny model.
std::vector<std::string> all_fixtures() {
  std::vector<std::string> v;
  for (const char *t : {"F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M",
                        "Q6_K"})
    v.push_back(shared_fixture(std::string("stories5M-") + t + ".gguf"));
  for (const char *n : {"llama3-tiny-F32", "llama3-tiny-Q4_K_M", "qwen2-tiny-F32", "qwen2-tiny-Q4_K_M"})
    v.push_back(shared_fixture(std::string(n) + ".gguf"));
  for (const char *n : {"stories5M-IQ4_XS", "gemma3-tiny-Q4_0", "gemma3-tiny-Q4_K_M", "phi3-tiny-Q4_K_M", "qwen3-tiny-Q4_K_M",
                        "smollm3-tiny-Q4_K_M", "lfm2-tiny-Q4_K_M", "qwen35-tiny-Q4_K_M"})
    v.push_back(own_fixture(std::string(n) + ".gguf"));
  return v;
}

gb_model *open_quiet(const std::string &path, gb_status *st, Log *log = nullptr, gb_verify verify = GB_VERIFY_AUTO,
                     gb_gguf_layout layout = GB_GGUF_LAYOUT_AUTO, gb_model_load load = GB_MODEL_LOAD_MAP) {
  gb_model_options o = gbt::quiet_model_options();
  if (log) {
    o.log = Log::fn;
    o.log_user = log;
  }
  o.verify = verify;
  o.gguf_layout = layout;
  o.load = load;
  gb_model *m = nullptr;
  *st = gb_model_open_file(path.c_str(), &o, &m);
  return m;
}

// Logits of the first n tokens of `toks`, fed one by one with an f32 KV cache.
std::vector<float> logits_of(gb_model *m, const std::vector<int32_t> &toks) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.kv.policy = GB_KV_F32;
  so.n_ctx = 64;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  std::vector<float> out;
  if (!s) return out;
  for (int32_t t : toks) {
    gb_step_info info;
    info.struct_size = sizeof info;
    EXPECT_EQ(gb_feed(s, t, &info), GB_OK);
    if (!info.logits) break;
    out.insert(out.end(), info.logits, info.logits + info.n_vocab);
  }
  gb_session_destroy(s);
  return out;
}

std::vector<int32_t> tokens_of(gb_model *m, const char *text) {
  const gb_tokenizer *tok = nullptr;
  EXPECT_EQ(gb_model_tokenizer(m, &tok), GB_OK);
  std::vector<int32_t> ids(GB_TOKENIZE_CAPACITY(strlen(text)));
  size_t n = 0;
  EXPECT_EQ(gb_tokenizer_encode(tok, text, strlen(text), GB_TOKENIZE_ADD_BOS | GB_TOKENIZE_PARSE_SPECIAL, ids.data(), ids.size(), &n),
            GB_OK);
  ids.resize(n);
  return ids;
}

}  // namespace

// One fixture opened directly with `layout` / `load`, against the file
// converted to the same tier with the matching layout (row-major for the
// file's own layout, 16-row groups for the repacked one).
void expect_same_as_converted(const std::string &path, gb_gguf_layout layout, gb_model_load load, bool full) {
  SCOPED_TRACE(path + (layout == GB_GGUF_LAYOUT_FILE ? " (file layout)" : " (repacked)") +
               (load == GB_MODEL_LOAD_COPY ? " copy" : " map"));
  gb_status st;
  gb_model *d = open_quiet(path, &st, nullptr, GB_VERIFY_AUTO, layout, load);
  ASSERT_EQ(st, GB_OK);
  gb_model_info di;
  di.struct_size = sizeof di;
  ASSERT_EQ(gb_model_get_info(d, &di), GB_OK);
  // The file's own formats are the one tier, and the default gear.
  EXPECT_EQ(di.is_gguf, 1u);
  EXPECT_EQ(di.gears, 1u << di.default_gear);
  EXPECT_EQ(di.tier_origin[di.default_gear], (uint32_t)GB_TIER_ORIGIN_SOURCE);
  EXPECT_EQ(di.file_bytes, (uint64_t)gbt::read_file(path).size());

  const std::string out = gbt::temp_dir() + "/direct-cmp.gbx";
  gb::ConvertOptions co;
  co.log.fn = gbt::quiet_log;
  co.tiers = 1u << di.default_gear;
  co.q4_layout = layout == GB_GGUF_LAYOUT_FILE ? gb::kLayoutRowMajor : gb::kLayoutRows16;
  ASSERT_EQ(gb::convert_gguf(path.c_str(), out.c_str(), co), GB_OK);
  gb_model *c = open_quiet(out, &st);
  ASSERT_EQ(st, GB_OK);
  gb_model_info ci;
  ci.struct_size = sizeof ci;
  ASSERT_EQ(gb_model_get_info(c, &ci), GB_OK);
  EXPECT_EQ(ci.is_gguf, 0u);
  EXPECT_EQ(di.gears, ci.gears);
  EXPECT_EQ(di.default_gear, ci.default_gear);
  EXPECT_STREQ(di.tier_formats[di.default_gear], ci.tier_formats[ci.default_gear]);
  EXPECT_EQ(di.tier_bits[di.default_gear], ci.tier_bits[ci.default_gear]);
  EXPECT_EQ(di.n_params, ci.n_params);
  EXPECT_EQ(di.bos_id, ci.bos_id);
  EXPECT_EQ(di.eos_id, ci.eos_id);
  EXPECT_EQ(di.vocab_size, ci.vocab_size);
  EXPECT_EQ(di.shared_classifier, ci.shared_classifier);
  EXPECT_EQ(d->meta.rope_type, c->meta.rope_type);
  EXPECT_EQ(d->meta.swa_window, c->meta.swa_window);
  EXPECT_EQ(d->meta.embed_scale, c->meta.embed_scale);
  // Recurrent layers: the same kinds, convolutions and DeltaNet shapes.
  EXPECT_EQ(d->meta.conv_kernel, c->meta.conv_kernel);
  EXPECT_EQ(d->meta.conv_channels, c->meta.conv_channels);
  EXPECT_EQ(d->meta.gdn_state, c->meta.gdn_state);
  EXPECT_EQ(d->meta.gdn_v_heads, c->meta.gdn_v_heads);
  EXPECT_EQ(d->meta.attn_gate, c->meta.attn_gate);
  for (uint32_t l = 0; l < d->meta.n_layers; l++) EXPECT_EQ(d->meta.kind(l), c->meta.kind(l)) << "layer " << l;
  // The same kernels run: every view in the same format (a layout included).
  const size_t nm = (size_t)d->meta.n_layers * gb::kMatsPerLayer;
  for (size_t i = 0; i < nm; i++)
    EXPECT_EQ(d->mats[di.default_gear][i].format, c->mats[ci.default_gear][i].format) << "matrix " << i;
  EXPECT_EQ(gb::file_format(d->embd.format), gb::file_format(c->embd.format));  // a tied one interleaved in place

  const char *text = "Once upon a time, Lily said: \"Hello!\" 123 <|im_end|>\n";
  const std::vector<int32_t> td = tokens_of(d, text), tc = tokens_of(c, text);
  EXPECT_EQ(td, tc);
  ASSERT_GE(td.size(), 8u);
  size_t n_feed = std::min<size_t>(td.size(), full ? 32 : 8);
  n_feed = std::min<size_t>(n_feed, di.seq_len - 1);
  std::vector<int32_t> feed(td.begin(), td.begin() + (long)n_feed);
  const std::vector<float> ld = logits_of(d, feed), lc = logits_of(c, feed);
  ASSERT_EQ(ld.size(), lc.size());
  ASSERT_EQ(ld.size(), feed.size() * di.vocab_size);
  size_t differ = 0;
  for (size_t i = 0; i < ld.size(); i++) differ += memcmp(&ld[i], &lc[i], 4) != 0;
  EXPECT_EQ(differ, 0u) << "of " << ld.size() << " logits";
  EXPECT_EQ(gb_model_verify(d), GB_OK);
  gb_model_close(c);
  gb_model_close(d);
  unlink(out.c_str());
}

TEST(GgufDirect, EveryFixtureGivesTheLogitsOfItsConvertedFile) {
  // Under emulation (GB_TEST_SCALE < 1) every third fixture, which still
  // covers legacy, K-quant, non-uniform and float types and four
  // architectures; the x86 run checks them all.
  const bool full = gbt::test_scale() >= 1.0;
  const std::vector<std::string> files = all_fixtures();
  for (size_t i = 0; i < files.size(); i += full ? 1 : 3) {
    ASSERT_NO_FATAL_FAILURE(expect_same_as_converted(files[i], GB_GGUF_LAYOUT_FILE, GB_MODEL_LOAD_MAP, full));
    ASSERT_NO_FATAL_FAILURE(expect_same_as_converted(files[i], GB_GGUF_LAYOUT_AUTO, GB_MODEL_LOAD_MAP, full));
  }
}

TEST(GgufDirect, RepackedInPlaceInALoadedCopy) {
  // Q4_0 and a K-quant mix (q4k, q6k), with a classifier of its own and tied.
  for (const std::string &path : {shared_fixture("stories5M-Q4_0.gguf"), shared_fixture("llama3-tiny-Q4_K_M.gguf"),
                                   own_fixture("gemma3-tiny-Q4_0.gguf")})
    ASSERT_NO_FATAL_FAILURE(expect_same_as_converted(path, GB_GGUF_LAYOUT_REPACK, GB_MODEL_LOAD_COPY, true));
}

TEST(GgufDirect, TheLayoutDecidesTheMemory) {
  const std::vector<uint8_t> file = gbt::read_file(shared_fixture("llama3-tiny-Q4_K_M.gguf"));
  void *buf = aligned_alloc(64, (file.size() + 63) / 64 * 64);
  memcpy(buf, file.data(), file.size());
  gb_model_options o = gbt::quiet_model_options();
  size_t in_place = 0, repacked = 0;
  ASSERT_EQ(gb_model_mem_size(buf, file.size(), &o, &in_place), GB_OK);  // AUTO from memory: the file's layout
  o.gguf_layout = GB_GGUF_LAYOUT_REPACK;
  ASSERT_EQ(gb_model_mem_size(buf, file.size(), &o, &repacked), GB_OK);
  // Every q4k / q6k matrix is copied: the classifier, the layers, and the
  // tied-or-not embedding is not (this file has output.weight).
  EXPECT_GT(repacked, in_place + file.size() * 8 / 10);
  EXPECT_LT(repacked, in_place + file.size());
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_memory(buf, file.size(), &o, &m), GB_OK);
  EXPECT_EQ(m->mats[m->meta.default_gear][0].format, (uint32_t)gb::kFmtQ4KR16);
  EXPECT_EQ(gb_model_verify(m), GB_OK);
  gb_model_close(m);
  o.gguf_layout = (gb_gguf_layout)3;
  EXPECT_EQ(gb_model_open_memory(buf, file.size(), &o, &m), GB_ERR_INVALID_ARGUMENT);
  free(buf);
}

TEST(GgufDirect, ATypeNoFormatReadsIsRefusedByName) {
  Log log;
  gb_status st;
  gb_model *m = open_quiet(shared_fixture("stories5M-BF16.gguf"), &st, &log);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(st, GB_ERR_UNSUPPORTED_TYPE);
  EXPECT_NE(log.text.find("token_embd.weight"), std::string::npos) << log.text;
  EXPECT_NE(log.text.find("gearbx convert"), std::string::npos) << log.text;
}

TEST(GgufDirect, CallerMemoryIsSizedExactly) {
  std::vector<uint8_t> file = gbt::read_file(shared_fixture("llama3-tiny-Q4_K_M.gguf"));
  ASSERT_FALSE(file.empty());
  void *buf = aligned_alloc(64, (file.size() + 63) / 64 * 64);
  memcpy(buf, file.data(), file.size());
  gb_model_options o = gbt::quiet_model_options();
  size_t need = 0;
  ASSERT_EQ(gb_model_mem_size(buf, file.size(), &o, &need), GB_OK);
  ASSERT_GT(need, 0u);
  std::vector<uint8_t> arena_store(need + 64);
  void *arena = (void *)(((uintptr_t)arena_store.data() + 63) / 64 * 64);
  o.mem = arena;
  o.mem_bytes = need - 1;
  gb_model *m = nullptr;
  EXPECT_EQ(gb_model_open_memory(buf, file.size(), &o, &m), GB_ERR_ARENA_TOO_SMALL);
  EXPECT_EQ(m, nullptr);
  o.mem_bytes = need;
  gbt::alloc_count_start();
  ASSERT_EQ(gb_model_open_memory(buf, file.size(), &o, &m), GB_OK);
  EXPECT_EQ(gbt::alloc_count_stop(), 0u);  // nothing but the caller's memory
  gb_status st;  // the same file mapped, in its own layout as from memory
  gb_model *f = open_quiet(shared_fixture("llama3-tiny-Q4_K_M.gguf"), &st, nullptr, GB_VERIFY_AUTO, GB_GGUF_LAYOUT_FILE);
  ASSERT_EQ(st, GB_OK);
  const std::vector<int32_t> toks = {1, 300, 301, 302};
  EXPECT_EQ(logits_of(m, toks), logits_of(f, toks));
  EXPECT_EQ(gb_model_verify(m), GB_OK);
  gb_model_close(f);
  gb_model_close(m);
  free(buf);
}

namespace {

// Opens bytes from a tight heap copy; a model that opens also runs two
// tokens and verifies (nothing may read outside the buffer).
gb_status open_bytes(const std::vector<uint8_t> &b, Log *log = nullptr, gb_verify verify = GB_VERIFY_AUTO) {
  void *buf = aligned_alloc(64, (b.size() + 63) / 64 * 64 + 64);
  if (!b.empty()) memcpy(buf, b.data(), b.size());
  gb_model_options o = gbt::quiet_model_options();
  if (log) {
    o.log = Log::fn;
    o.log_user = log;
  }
  o.verify = verify;
  gb_model *m = nullptr;
  size_t need = 0;
  const gb_status sz = gb_model_mem_size(buf, b.size(), &o, &need);
  gb_status st = gb_model_open_memory(buf, b.size(), &o, &m);
  if (st == GB_OK) {
    EXPECT_EQ(sz, GB_OK);
    gb_session_options so;
    gb_session_options_init(&so);
    so.n_ctx = 16;
    gb_session *s = nullptr;
    if (gb_session_create(m, &so, nullptr, 0, &s) == GB_OK) {
      gb_feed(s, 1, nullptr);
      gb_feed(s, 2, nullptr);
      gb_session_destroy(s);
    }
    gb_model_verify(m);
    gb_model_close(m);
  }
  free(buf);
  return st;
}

// The byte offset of tensor `name`'s directory entry fields: n_dims, then
// ne[], type, offset.
size_t tensor_entry(const std::vector<uint8_t> &b, const std::string &name) {
  for (size_t i = 8; i + name.size() + 4 < b.size(); i++)
    if (gb::ld_u64(&b[i - 8]) == name.size() && memcmp(&b[i], name.data(), name.size()) == 0) return i + name.size();
  return 0;
}

uint64_t data_start_of(const std::vector<uint8_t> &b) {
  gb::GgufView v;
  gb::Logger quiet;
  quiet.fn = gbt::quiet_log;
  EXPECT_EQ(gb::gguf_view_open(b.data(), b.size(), quiet, nullptr, nullptr, nullptr, &v), GB_OK);
  return v.data_start;
}

}  // namespace

TEST(GgufDirect, TruncationsAtEveryMetadataLength) {
  const std::vector<uint8_t> file = gbt::read_file(shared_fixture("qwen2-tiny-Q4_K_M.gguf"));
  ASSERT_EQ(open_bytes(file), GB_OK);
  const uint64_t ds = data_start_of(file);
  const size_t step = gbt::test_scale() >= 1.0 ? 1 : 7;
  for (size_t n = 0; n < ds; n += step) {
    const gb_status st = open_bytes(std::vector<uint8_t>(file.begin(), file.begin() + (long)n));
    ASSERT_TRUE(st == GB_ERR_TRUNCATED || st == GB_ERR_BAD_MAGIC) << n << ": " << gb_status_str(st);
  }
  // Across the tensor data: the last tensor always runs past the end.
  for (size_t n = ds; n < file.size(); n += 4099) {
    Log log;
    ASSERT_EQ(open_bytes(std::vector<uint8_t>(file.begin(), file.begin() + (long)n), &log), GB_ERR_TRUNCATED) << n;
    EXPECT_NE(log.text.find("past the end"), std::string::npos) << log.text;
  }
}

TEST(GgufDirect, FlippedMetadataBytesNeverCrash) {
  const std::vector<uint8_t> file = gbt::read_file(shared_fixture("llama3-tiny-Q4_K_M.gguf"));
  const uint64_t ds = data_start_of(file);
  std::mt19937 rng(7);
  const int trials = gbt::test_scale() >= 1.0 ? 600 : 60;
  int opened = 0;
  for (int t = 0; t < trials; t++) {
    std::vector<uint8_t> b = file;
    const int flips = 1 + (int)(rng() % 4);
    for (int k = 0; k < flips; k++) b[rng() % ds] ^= (uint8_t)(1u << (rng() % 8));
    opened += open_bytes(b) == GB_OK;
  }
  // Token text and unused keys take most of the metadata: many still open.
  EXPECT_GT(opened, 0);
  EXPECT_LT(opened, trials);
}

TEST(GgufDirect, PlantedFaultsGetTheirStatus) {
  const std::vector<uint8_t> file = gbt::read_file(shared_fixture("llama3-tiny-Q4_K_M.gguf"));
  const size_t q = tensor_entry(file, "blk.0.attn_q.weight"), k = tensor_entry(file, "blk.0.attn_k.weight");
  ASSERT_GT(q, 0u);
  ASSERT_GT(k, 0u);
  const size_t q_type = q + 4 + 8 * gb::ld_u32(&file[q]), q_off = q_type + 4;
  const size_t k_off = k + 4 + 8 * gb::ld_u32(&file[k]) + 4;
  {  // misaligned data
    std::vector<uint8_t> b = file;
    gb::st_u64(&b[q_off], gb::ld_u64(&b[q_off]) + 1);
    EXPECT_EQ(open_bytes(b), GB_ERR_CORRUPT);
  }
  {  // two tensors on the same bytes
    std::vector<uint8_t> b = file;
    gb::st_u64(&b[k_off], gb::ld_u64(&b[q_off]));
    Log log;
    EXPECT_EQ(open_bytes(b, &log), GB_ERR_CORRUPT);
    EXPECT_NE(log.text.find("overlap"), std::string::npos) << log.text;
  }
  {  // a type no format reads (TQ1_0)
    std::vector<uint8_t> b = file;
    b[q_type] = 34;
    Log log;
    EXPECT_EQ(open_bytes(b, &log), GB_ERR_UNSUPPORTED_TYPE);
    EXPECT_NE(log.text.find("blk.0.attn_q.weight"), std::string::npos) << log.text;
  }
  {  // a key twice: rename general.name's key to general.architecture's spelling length-for-length
    std::vector<uint8_t> b = file;
    const std::string from = "tokenizer.ggml.bos_token_id", to = "tokenizer.ggml.eos_token_id";
    const size_t at = tensor_entry(b, from);  // the key's bytes are found the same way
    ASSERT_GT(at, 0u);
    memcpy(&b[at - from.size()], to.data(), to.size());
    Log log;
    EXPECT_EQ(open_bytes(b, &log), GB_ERR_CORRUPT);
    EXPECT_NE(log.text.find("twice"), std::string::npos) << log.text;
  }
  {  // an architecture gearbx does not run
    std::vector<uint8_t> b = file;
    const size_t at = tensor_entry(b, "general.architecture");
    ASSERT_GT(at, 0u);
    const size_t val = at + 4 + 8;  // type, then the string's length
    ASSERT_EQ(gb::ld_u64(&b[at + 4]), 5u);
    memcpy(&b[val], "lxama", 5);
    Log log;
    EXPECT_EQ(open_bytes(b, &log), GB_ERR_UNSUPPORTED_TYPE);
    EXPECT_NE(log.text.find("lxama"), std::string::npos) << log.text;
  }
  {  // a non-finite block scale: found by a scan, not at a metadata-only open
    std::vector<uint8_t> b = file;
    const uint64_t ds = data_start_of(b);
    gb::st_u16(&b[ds + gb::ld_u64(&b[q_off])], 0x7C00);  // the first Q4_K block's d: +inf
    Log log;
    EXPECT_EQ(open_bytes(b, &log, GB_VERIFY_ALL), GB_ERR_CORRUPT);
    EXPECT_NE(log.text.find("non-finite"), std::string::npos) << log.text;
    EXPECT_EQ(open_bytes(b, nullptr, GB_VERIFY_AUTO), GB_ERR_CORRUPT);  // 1 MB: under the auto limit
    void *buf = aligned_alloc(64, (b.size() + 63) / 64 * 64);
    memcpy(buf, b.data(), b.size());
    gb_model_options o = gbt::quiet_model_options();
    o.verify = GB_VERIFY_METADATA;
    gb_model *m = nullptr;
    ASSERT_EQ(gb_model_open_memory(buf, b.size(), &o, &m), GB_OK);
    EXPECT_EQ(gb_model_verify(m), GB_ERR_CORRUPT);
    gb_model_close(m);
    free(buf);
    // The same file mapped and repacked: gb_model_verify reads the scales
    // in their 16-row groups.
    const std::string path = gbt::temp_dir() + "/direct-nan.gguf";
    ASSERT_TRUE(gbt::write_file(path, b));
    gb_status st;
    gb_model *r = open_quiet(path, &st, nullptr, GB_VERIFY_METADATA, GB_GGUF_LAYOUT_REPACK);
    ASSERT_EQ(st, GB_OK);
    EXPECT_EQ(r->mats[r->meta.default_gear][0].format, (uint32_t)gb::kFmtQ4KR16);
    EXPECT_EQ(gb_model_verify(r), GB_ERR_CORRUPT);
    gb_model_close(r);
    unlink(path.c_str());
  }
}

TEST(GgufDirect, TruncatedMappedFileStopsTheStep) {
  const std::string path = gbt::temp_dir() + "/direct-trunc.gguf";
  ASSERT_TRUE(gbt::write_file(path, gbt::read_file(shared_fixture("stories5M-Q4_0.gguf"))));
  gb_status st;
  gb_model *m = open_quiet(path, &st);
  ASSERT_EQ(st, GB_OK);
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 32;
  so.sampler.temperature = 0.0f;
  so.log = gbt::quiet_log;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  const int32_t prompt[2] = {1, 403};
  ASSERT_EQ(gb_prefill(s, prompt, 2), GB_OK);
  int32_t t = -1;
  ASSERT_EQ(gb_decode_step(s, &t, nullptr), GB_OK);
  struct stat sb;
  ASSERT_EQ(stat(path.c_str(), &sb), 0);
  ASSERT_EQ(truncate(path.c_str(), sb.st_size / 2), 0);
  EXPECT_EQ(gb_decode_step(s, &t, nullptr), GB_ERR_FILE_CHANGED);
  EXPECT_EQ(gb_decode_step(s, &t, nullptr), GB_ERR_FILE_CHANGED);
  EXPECT_EQ(gb_model_verify(m), GB_ERR_FILE_CHANGED);
  gb_session_destroy(s);
  gb_model_close(m);
  unlink(path.c_str());
}

TEST(GgufDirect, TheToolTakesAGgufWhereverItTakesAModel) {
  const std::string f = shared_fixture("stories5M-Q4_K_M.gguf");
  const gbt::CliOut info = gbt::run_cli("info " + f);
  EXPECT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("GGUF opened in place"), std::string::npos) << info.out;
  const gbt::CliOut run = gbt::run_cli("run -m " + f + " -p \"Once upon a time\" -n 16 --temp 0 --quiet");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("Once upon a time"), std::string::npos) << run.out;
  // One quantized tier: perplexity scores it without extra flags.
  const std::string text = gbt::write_temp("direct-ppl.txt", "Once upon a time, there was a little dog. The dog liked to run.\n");
  const gbt::CliOut ppl = gbt::run_cli("perplexity -m " + f + " -f " + text);
  EXPECT_EQ(ppl.status, 0) << ppl.err;
  const gbt::CliOut tok = gbt::run_cli("tokenize -m " + f, text);
  EXPECT_EQ(tok.status, 0) << tok.err;
  EXPECT_GT(tok.out.size(), 10u);
  const gbt::CliOut plan = gbt::run_cli("plan -m " + f + " --budget 64M");
  EXPECT_EQ(plan.status, 0) << plan.err;
}
