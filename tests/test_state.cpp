// test_state.cpp — session state save / restore (gb_session_state_*):
// restoring and decoding gives the tokens and logits of never having stopped,
// for every KV policy and gear, greedy and sampled, saved after the prompt and
// mid-generation; loading into a larger n_ctx; every mismatch and corruption
// gives its status and leaves the session as it was; misuse.
#include <string.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "crc32.h"
#include "test_util.h"

namespace {

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

struct Trace {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  uint64_t evicted = 0;
};

// n decode steps, recording tokens and the logits each came from.
Trace decode(gb_session *s, gb_model *m, size_t n) {
  Trace r;
  gb_model_info mi;
  memset(&mi, 0, sizeof mi);
  mi.struct_size = sizeof mi;
  EXPECT_EQ(gb_model_get_info(m, &mi), GB_OK);
  for (size_t i = 0; i < n; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t = -1;
    const gb_status st = gb_decode_step(s, &t, &info);
    EXPECT_EQ(st, GB_OK);
    if (st != GB_OK) break;
    r.tokens.push_back(t);
    r.logits.insert(r.logits.end(), info.logits, info.logits + mi.vocab_size);
    r.evicted = info.kv_evicted;
  }
  return r;
}

std::vector<uint8_t> save(gb_session *s) { return gbt::save_state(s); }

struct Cfg {
  const char *name;
  gb_gear gear;
  gb_kv_policy policy;
  float beta;
  uint32_t evict;
};

const Cfg kCfgs[] = {
    {"f32", GB_GEAR_HIGH, GB_KV_F32, 0, 0},
    {"f16", GB_GEAR_LOW, GB_KV_F16, 0, 0},
    {"uniform8", GB_GEAR_MID, GB_KV_UNIFORM8, 0, 0},
    {"uniform4", GB_GEAR_F32, GB_KV_UNIFORM4, 0, 0},
    {"uniform3", GB_GEAR_HIGH, GB_KV_UNIFORM3, 0, 0},
    {"uniform2", GB_GEAR_HIGH, GB_KV_UNIFORM2, 0, 0},
    {"uniform4_budget_evict", GB_GEAR_HIGH, GB_KV_UNIFORM4, 0.06f, 1},
    {"window", GB_GEAR_AUTO, GB_KV_WINDOW, 0.3f, 0},
    {"window_evict", GB_GEAR_AUTO, GB_KV_WINDOW, 0.08f, 1},
    {"seed", GB_GEAR_AUTO, GB_KV_SEED, 0.3f, 0},
    {"seed_evict", GB_GEAR_MID, GB_KV_SEED, 0.08f, 1},
    {"recency", GB_GEAR_LOW, GB_KV_RECENCY, 0.3f, 0},
    {"recency_evict", GB_GEAR_AUTO, GB_KV_RECENCY, 0.08f, 1},
    {"spec_f32", GB_GEAR_SPEC, GB_KV_F32, 0, 0},
    {"spec_uniform8", GB_GEAR_SPEC, GB_KV_UNIFORM8, 0, 0},
    {"auto_f16", GB_GEAR_AUTO, GB_KV_F16, 0, 0},
};

gb_session_options options(const Cfg &c, float temperature, uint32_t n_ctx = 256) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = n_ctx;
  so.gear = c.gear;
  so.kv.policy = c.policy;
  so.kv.beta = c.beta;
  so.kv.evict = c.evict;
  so.sampler.temperature = temperature;
  so.sampler.seed = 7;
  so.spec_k = 4;
  gbt::x(so).spec_adapt = 1;  // sampled runs are compared: draft lengths by bytes, not by the clock
  if (c.gear != GB_GEAR_SPEC) {  // the spec gear verifies unmodified distributions
    so.repeat_penalty = 1.1f;
    so.penalty_window = 16;
  }
  return so;
}

class StateRoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(StateRoundTrip, DecodeAfterRestoreIsBitIdentical) {
  const Cfg &c = kCfgs[GetParam()];
  Model md(gbt::stories260k_gbx());
  const std::vector<int32_t> prompt = prompt_tokens(md.m, "Once upon a time, there was a little girl named Lily. She");
  for (float temp : {0.0f, 0.8f}) {
    for (size_t before : {(size_t)0, (size_t)7}) {
      SCOPED_TRACE(std::string(c.name) + " temp " + std::to_string(temp) + " after " + std::to_string(before));
      const gb_session_options so = options(c, temp);
      gb_session *a = nullptr, *b = nullptr;
      ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &a), GB_OK);
      ASSERT_EQ(gb_prefill(a, prompt.data(), prompt.size()), GB_OK);
      decode(a, md.m, before);
      // A spec session saves between rounds: step on until it can.
      size_t need = 0;
      int guard = 0;
      while (gb_session_state_size(a, &need) == GB_ERR_BAD_STATE && guard++ < 64) decode(a, md.m, 1);
      const std::vector<uint8_t> img = save(a);
      const size_t n = 120;
      const Trace ra = decode(a, md.m, n);
      ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &b), GB_OK);
      ASSERT_EQ(gb_session_state_load(b, img.data(), img.size()), GB_OK);
      const Trace rb = decode(b, md.m, n);
      EXPECT_EQ(ra.tokens, rb.tokens);
      ASSERT_EQ(ra.logits.size(), rb.logits.size());
      EXPECT_EQ(memcmp(ra.logits.data(), rb.logits.data(), ra.logits.size() * sizeof(float)), 0);
      if (c.evict) {
        EXPECT_GT(ra.evicted, 0u) << "the budget should force evictions";
      }
      EXPECT_EQ(ra.evicted, rb.evicted);
      // The same state saved again from the restored session, after the same
      // steps, is the same image.
      gb_session_destroy(a);
      gb_session_destroy(b);
    }
  }
}

std::string cfg_name(const ::testing::TestParamInfo<int> &i) { return kCfgs[i.param].name; }
INSTANTIATE_TEST_SUITE_P(All, StateRoundTrip, ::testing::Range(0, (int)(sizeof kCfgs / sizeof kCfgs[0])), cfg_name);

// Save, restore, save again: the same bytes (nothing lost in between).
TEST(State, ImageRoundTripsByteForByte) {
  Model md(gbt::stories260k_gbx());
  const std::vector<int32_t> prompt = prompt_tokens(md.m, "Once upon a time");
  for (const Cfg &c : kCfgs) {
    SCOPED_TRACE(c.name);
    const gb_session_options so = options(c, 0.7f);
    gb_session *a = nullptr, *b = nullptr;
    ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &a), GB_OK);
    ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &b), GB_OK);
    ASSERT_EQ(gb_prefill(a, prompt.data(), prompt.size()), GB_OK);
    const std::vector<uint8_t> i1 = save(a);
    ASSERT_EQ(gb_session_state_load(b, i1.data(), i1.size()), GB_OK);
    EXPECT_EQ(save(b), i1);
    gb_session_destroy(a);
    gb_session_destroy(b);
  }
}

class StateErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    gb_model_options mo = gbt::quiet_model_options();
    ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m_), GB_OK);
    prompt_ = prompt_tokens(m_, "Once upon a time, there was a little dog named Max. He liked to run");
    so_ = opts(GB_KV_UNIFORM8, 256);
    ASSERT_EQ(gb_session_create(m_, &so_, nullptr, 0, &a_), GB_OK);
    ASSERT_EQ(gb_prefill(a_, prompt_.data(), prompt_.size()), GB_OK);
    decode(a_, m_, 5);
    img_ = save(a_);
  }
  void TearDown() override {
    gb_session_destroy(a_);
    gb_model_close(m_);
  }
  gb_session_options opts(gb_kv_policy p, uint32_t n_ctx) {
    gb_session_options so;
    gb_session_options_init(&so);
    so.n_ctx = n_ctx;
    so.gear = GB_GEAR_AUTO;
    so.kv.policy = p;
    so.sampler.temperature = 0.9f;
    so.sampler.seed = 3;
    so.log = gbt::quiet_log;
    return so;
  }
  // A session at another state (its own prompt), and what it decodes next.
  gb_session *victim(const gb_session_options &so) {
    gb_session *v = nullptr;
    EXPECT_EQ(gb_session_create(m_, &so, nullptr, 0, &v), GB_OK);
    const std::vector<int32_t> p = prompt_tokens(m_, "The sun");
    EXPECT_EQ(gb_prefill(v, p.data(), p.size()), GB_OK);
    return v;
  }
  // A failed load leaves v as it was: v decodes as its twin does.
  void expect_refused(const std::vector<uint8_t> &img, gb_status want, const gb_session_options &so) {
    gb_session *v = victim(so), *twin = victim(so);
    EXPECT_EQ(gb_session_state_load(v, img.data(), img.size()), want);
    const Trace rv = decode(v, m_, 6), rt = decode(twin, m_, 6);
    EXPECT_EQ(rv.tokens, rt.tokens);
    EXPECT_EQ(rv.logits, rt.logits);
    gb_session_destroy(v);
    gb_session_destroy(twin);
  }
  // The payload of the image's record with this tag (the body is records of
  // u32 tag, u32 length, payload).
  static size_t record(const std::vector<uint8_t> &img, const char *tag) {
    for (size_t at = 32; at + 8 <= img.size(); at += 8 + gb::ld_u32(&img[at + 4]))
      if (memcmp(&img[at], tag, 4) == 0) return at + 8;
    ADD_FAILURE() << "no " << tag << " record";
    return 32;
  }
  static void fix_crc(std::vector<uint8_t> &img) {
    gb::st_u32(&img[24], gb::crc32_update(0, img.data() + 32, img.size() - 32));
  }
  gb_model *m_ = nullptr;
  gb_session *a_ = nullptr;
  gb_session_options so_;
  std::vector<int32_t> prompt_;
  std::vector<uint8_t> img_;
};

TEST_F(StateErrors, LargerContextLoadsAndDecodesTheSame) {
  const gb_session_options big = opts(GB_KV_UNIFORM8, 512);
  gb_session *b = nullptr, *c = nullptr;
  ASSERT_EQ(gb_session_create(m_, &big, nullptr, 0, &b), GB_OK);
  ASSERT_EQ(gb_session_state_load(b, img_.data(), img_.size()), GB_OK);
  uint32_t pos = 0, n_ctx = 0;
  ASSERT_EQ(gb_session_position(b, &pos, &n_ctx), GB_OK);
  EXPECT_EQ(n_ctx, 512u);
  ASSERT_EQ(gb_session_create(m_, &so_, nullptr, 0, &c), GB_OK);
  ASSERT_EQ(gb_session_state_load(c, img_.data(), img_.size()), GB_OK);
  EXPECT_EQ(decode(b, m_, 40).tokens, decode(c, m_, 40).tokens);
  gb_session_destroy(b);
  gb_session_destroy(c);
}

TEST_F(StateErrors, Mismatches) {
  uint32_t pos = 0;
  ASSERT_EQ(gb_session_position(a_, &pos, nullptr), GB_OK);
  expect_refused(img_, GB_ERR_CONTEXT_FULL, opts(GB_KV_UNIFORM8, pos - 1));
  expect_refused(img_, GB_ERR_INVALID_ARGUMENT, opts(GB_KV_F16, 256));
  expect_refused(img_, GB_ERR_INVALID_ARGUMENT, opts(GB_KV_UNIFORM4, 256));
  gb_session_options fixed = opts(GB_KV_UNIFORM8, 256);
  fixed.gear = GB_GEAR_MID;
  expect_refused(img_, GB_ERR_INVALID_ARGUMENT, fixed);
  gb_session_options win = opts(GB_KV_UNIFORM8, 256);
  gbt::x(win).monitor.window = 7;
  expect_refused(img_, GB_ERR_INVALID_ARGUMENT, win);
  // The same layout in a pool with fewer slots than the saved tokens.
  gb_session_options small = opts(GB_KV_UNIFORM8, 256);
  uint64_t full = 0;
  ASSERT_EQ(gb_kv_pool_size(m_, &small, &full, nullptr), GB_OK);
  small.kv.pool_bytes = full * (pos / 2) / 256;
  expect_refused(img_, GB_ERR_BUDGET_EXCEEDED, small);
  // Another model of the same shape (converted from the GGUF: other sections).
  gb_model *other = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gguf_gbx().c_str(), &mo, &other), GB_OK);
  gb_model_info i1, i2;
  i1.struct_size = i2.struct_size = sizeof i1;
  ASSERT_EQ(gb_model_get_info(m_, &i1), GB_OK);
  ASSERT_EQ(gb_model_get_info(other, &i2), GB_OK);
  EXPECT_EQ(i1.vocab_size, i2.vocab_size);
  gb_session *o = nullptr;
  gb_session_options so = so_;
  so.log = gbt::quiet_log;
  ASSERT_EQ(gb_session_create(other, &so, nullptr, 0, &o), GB_OK);
  EXPECT_EQ(gb_session_state_load(o, img_.data(), img_.size()), GB_ERR_INVALID_ARGUMENT);
  gb_session_destroy(o);
  gb_model_close(other);
}

TEST_F(StateErrors, Corruption) {
  std::vector<uint8_t> b = img_;
  b[0] ^= 1;
  expect_refused(b, GB_ERR_BAD_MAGIC, so_);
  for (uint32_t v : {2u, 4u}) {  // the previous format (no sliding-window rings), a future one
    b = img_;
    gb::st_u32(&b[8], v);
    expect_refused(b, GB_ERR_UNSUPPORTED_VERSION, so_);
  }
  b = img_;
  b[b.size() / 2] ^= 0x10;
  expect_refused(b, GB_ERR_CHECKSUM, so_);
  b = img_;
  b[24] ^= 1;
  expect_refused(b, GB_ERR_CHECKSUM, so_);
  b = img_;
  b.resize(b.size() - 1);
  expect_refused(b, GB_ERR_TRUNCATED, so_);
  b = img_;
  b.resize(20);
  expect_refused(b, GB_ERR_TRUNCATED, so_);
  b = img_;
  b.push_back(0);
  expect_refused(b, GB_ERR_CORRUPT, so_);
  b = img_;
  gb::st_u64(&b[16], gb::ld_u64(&b[16]) + 8);  // body length beyond the buffer
  expect_refused(b, GB_ERR_TRUNCATED, so_);
  // Behind a valid CRC: position beyond n_ctx, pending token out of range,
  // the monitor's count beyond its window, a body cut short (length fixed).
  const size_t cur = record(img_, "CURS");  // u32 n_ctx, then pos, pending, last_out
  b = img_;
  gb::st_u32(&b[cur + 4], 100000);
  fix_crc(b);
  expect_refused(b, GB_ERR_CORRUPT, so_);
  b = img_;
  gb::st_u32(&b[cur + 8], 1u << 30);
  fix_crc(b);
  expect_refused(b, GB_ERR_CORRUPT, so_);
  b = img_;
  gb::st_u32(&b[record(img_, "MONI") + 8], 1000);  // th_low, th_high, count
  fix_crc(b);
  expect_refused(b, GB_ERR_CORRUPT, so_);
  b = img_;
  b.resize(b.size() - 40);
  gb::st_u64(&b[16], b.size() - 32);
  fix_crc(b);
  expect_refused(b, GB_ERR_CORRUPT, so_);
  // Every single-byte change behind a fixed CRC: a status, never a crash,
  // and the session unchanged unless the load succeeded.
  for (size_t i = 32; i < img_.size(); i += 1 + img_.size() / 300) {
    b = img_;
    b[i] ^= 0xA5;
    fix_crc(b);
    gb_session *v = victim(so_);
    const gb_status st = gb_session_state_load(v, b.data(), b.size());
    if (st != GB_OK) {
      gb_session *twin = victim(so_);
      EXPECT_EQ(decode(v, m_, 3).tokens, decode(twin, m_, 3).tokens) << "byte " << i;
      gb_session_destroy(twin);
    }
    gb_session_destroy(v);
  }
}

// An image of the first format (version 1, written by gearbx 0.1 for this
// model and these options) is refused with its own status, and the session
// stays as it was.
// Numbers that name no value of an enumerated field (a gear of 0xFFFF0002)
// in every word of every record's first 64 bytes, behind a fixed CRC: a
// status (the gear fields answer GB_ERR_CORRUPT), never a load of an invalid
// enum value (UBSan) or a crash, and a refused load changes nothing.
TEST_F(StateErrors, UnnamedEnumValuesAreRefused) {
  int refused = 0;
  for (size_t at = 32; at + 8 <= img_.size(); at += 8 + gb::ld_u32(&img_[at + 4])) {
    const size_t len = gb::ld_u32(&img_[at + 4]);
    for (size_t w = 0; w + 4 <= len && w < 64; w += 4) {
      std::vector<uint8_t> b = img_;
      gb::st_u32(&b[at + 8 + w], 0xFFFF0002u);
      fix_crc(b);
      gb_session *v = victim(so_);
      const gb_status st = gb_session_state_load(v, b.data(), b.size());
      if (st != GB_OK) {
        refused++;
        gb_session *twin = victim(so_);
        EXPECT_EQ(decode(v, m_, 2).tokens, decode(twin, m_, 2).tokens) << "record at " << at << ", word " << w;
        gb_session_destroy(twin);
      }
      gb_session_destroy(v);
    }
  }
  EXPECT_GT(refused, 0);
  // The gear record's first field is the gear policy (a MATCH field).
  std::vector<uint8_t> b = img_;
  gb::st_u32(&b[record(img_, "GEAR")], 0xFFFF0002u);
  fix_crc(b);
  expect_refused(b, GB_ERR_CORRUPT, so_);
}

TEST_F(StateErrors, VersionOneImageIsRefused) {
  const std::vector<uint8_t> v1 = gbt::read_file(std::string(GB_TEST_SOURCE_DIR) + "/corpus/state_v1/stories260k-mid-uniform8-ctx8.state");
  ASSERT_GT(v1.size(), 32u);
  ASSERT_EQ(gb::ld_u32(&v1[8]), 1u);
  gb_session_options so = opts(GB_KV_UNIFORM8, 64);
  so.gear = GB_GEAR_MID;
  expect_refused(v1, GB_ERR_UNSUPPORTED_VERSION, so);
}

TEST_F(StateErrors, Misuse) {
  size_t n = 0;
  EXPECT_EQ(gb_session_state_size(nullptr, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_state_size(a_, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_state_max_size(nullptr, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_state_save(nullptr, img_.data(), img_.size(), &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_state_save(a_, img_.data(), img_.size(), nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_state_save(a_, nullptr, 10, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_state_load(nullptr, img_.data(), img_.size()), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_session_state_load(a_, nullptr, 10), GB_ERR_NULL_POINTER);
  // Too small: the size needed, nothing written (guard bytes intact).
  gb_session_options quiet = so_;
  quiet.log = gbt::quiet_log;
  std::vector<uint8_t> buf(img_.size() + 64, 0xCD);
  n = 0;
  EXPECT_EQ(gb_session_state_save(a_, buf.data(), img_.size() - 1, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, img_.size());
  for (uint8_t v : buf) ASSERT_EQ(v, 0xCD);
  n = 0;
  EXPECT_EQ(gb_session_state_save(a_, nullptr, 0, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, img_.size());
  EXPECT_EQ(gb_session_state_save(a_, buf.data(), img_.size(), &n), GB_OK);
  for (size_t i = img_.size(); i < buf.size(); i++) ASSERT_EQ(buf[i], 0xCD);
  EXPECT_EQ(memcmp(buf.data(), img_.data(), img_.size()), 0);
  // A fresh session saves (nothing pending) and loads: decoding then is refused
  // as in any fresh session, and prefill works.
  gb_session *f = nullptr, *g = victim(so_);
  ASSERT_EQ(gb_session_create(m_, &quiet, nullptr, 0, &f), GB_OK);
  const std::vector<uint8_t> fresh = save(f);
  ASSERT_EQ(gb_session_state_load(g, fresh.data(), fresh.size()), GB_OK);
  uint32_t pos = 1;
  ASSERT_EQ(gb_session_position(g, &pos, nullptr), GB_OK);
  EXPECT_EQ(pos, 0u);
  int32_t t;
  EXPECT_EQ(gb_decode_step(g, &t, nullptr), GB_ERR_BAD_STATE);
  ASSERT_EQ(gb_prefill(g, prompt_.data(), prompt_.size()), GB_OK);
  ASSERT_EQ(gb_prefill(f, prompt_.data(), prompt_.size()), GB_OK);
  EXPECT_EQ(decode(g, m_, 10).tokens, decode(f, m_, 10).tokens);
  gb_session_destroy(f);
  gb_session_destroy(g);
  // No allocation while saving.
  gbt::alloc_count_start();
  EXPECT_EQ(gb_session_state_save(a_, buf.data(), buf.size(), &n), GB_OK);
  EXPECT_EQ(gbt::alloc_count_stop(), 0u);
}

TEST(State, SpecMidRoundIsRefused) {
  Model md(gbt::stories260k_gbx());
  gb_session_options so = options(kCfgs[13], 0.0f);
  so.log = gbt::quiet_log;
  gbt::x(so).spec_adapt = 0;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &s), GB_OK);
  const std::vector<int32_t> p = prompt_tokens(md.m, "Once upon a time");
  ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
  bool refused = false;
  for (int i = 0; i < 40 && !refused; i++) {
    decode(s, md.m, 1);
    size_t n = 0;
    const gb_status st = gb_session_state_size(s, &n);
    if (st == GB_ERR_BAD_STATE) {
      refused = true;
      std::vector<uint8_t> buf(1 << 20);
      EXPECT_EQ(gb_session_state_save(s, buf.data(), buf.size(), &n), GB_ERR_BAD_STATE);
    } else {
      EXPECT_EQ(st, GB_OK);
    }
  }
  EXPECT_TRUE(refused) << "no round handed out more than one token";
  gb_session_destroy(s);
}

}  // namespace
