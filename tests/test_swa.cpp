// test_swa.cpp — sliding-window layers in the KV pool (kv.h: the rings).
//
// On the gemma3 fixture (layers 0, 1 and 3 slide over 16 positions, layer 2
// is global; sample_files.h arch_fixture_spec), converted with every tier:
//   - a saved state restored, and a run rolled back by the spec gear, decode
//     bit for bit as an uninterrupted run long after the rings wrapped, for
//     every KV policy kind (single-level, budgeted and evicting, multi-level);
//   - a prefill in chunks of 64 on two threads gives the logits of chunks of
//     17 on one thread (rings of another size);
//   - the pool's bytes are the global layer's for the whole context plus
//     three rings of the window and the longest batch, and gb_plan / the
//     session size follow; a budget below the rings is refused;
//   - a state image whose ring part is inconsistent is refused with
//     GB_ERR_CORRUPT, leaving the session as it was.
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "convert.h"
#include "crc32.h"
#include "kv.h"
#include "model.h"
#include "sample_files.h"
#include "test_util.h"

namespace {

// The gemma3 fixture as a .gbx with the default tiers (low q4, mid q8,
// high f16, f32), written once per test binary run.
const std::string &gemma3_gbx() {
  static std::string path;
  if (!path.empty()) return path;
  const std::vector<uint8_t> b = gb::gguf_serialize(gb::arch_fixture_spec("gemma3"));
  const std::string gguf = gbt::temp_dir() + "/swa-gemma3-F32.gguf";
  EXPECT_TRUE(gb::write_file_bytes(gguf, b.data(), b.size()));
  const std::string out = gbt::temp_dir() + "/swa-gemma3.gbx";
  gb::ConvertOptions o;
  o.log.fn = gbt::quiet_log;
  EXPECT_EQ(gb::convert_gguf(gguf.c_str(), out.c_str(), o), GB_OK);
  unlink(gguf.c_str());
  path = out;
  return path;
}

struct Model {
  gb_model *m = nullptr;
  Model() {
    gb_model_options mo = gbt::quiet_model_options();
    EXPECT_EQ(gb_model_open_file(gemma3_gbx().c_str(), &mo, &m), GB_OK);
  }
  ~Model() { gb_model_close(m); }
};

// A fixed token sequence of the fixture's 512-token vocabulary.
std::vector<int32_t> tokens(size_t n, uint32_t seed) {
  std::vector<int32_t> t(n);
  uint32_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    t[i] = 3 + (int32_t)((x >> 8) % 500);
  }
  return t;
}

struct Trace {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

Trace decode(gb_session *s, size_t n, uint32_t vocab) {
  Trace r;
  for (size_t i = 0; i < n; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t = -1;
    const gb_status st = gb_decode_step(s, &t, &info);
    EXPECT_EQ(st, GB_OK) << "step " << i;
    if (st != GB_OK) break;
    r.tokens.push_back(t);
    r.logits.insert(r.logits.end(), info.logits, info.logits + vocab);
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
    {"f32", GB_GEAR_F32, GB_KV_F32, 0, 0},
    {"f16", GB_GEAR_HIGH, GB_KV_F16, 0, 0},
    {"uniform4", GB_GEAR_LOW, GB_KV_UNIFORM4, 0, 0},
    {"uniform8_budget_evict", GB_GEAR_MID, GB_KV_UNIFORM8, 0.3f, 1},
    {"seed", GB_GEAR_AUTO, GB_KV_SEED, 0.4f, 0},
    {"window_evict", GB_GEAR_HIGH, GB_KV_WINDOW, 0.3f, 1},
    {"spec_f32", GB_GEAR_SPEC, GB_KV_F32, 0, 0},
    {"spec_uniform8", GB_GEAR_SPEC, GB_KV_UNIFORM8, 0, 0},
};

// Under emulation (GB_TEST_SCALE < 1) qemu runs binary16 arithmetic in
// software: the f16 tier's runs become the q8 tier's (auto and the spec
// gear's verifier too), each configuration decodes at one temperature, and
// the runs are shorter; the rings still wrap before the save.
bool emulated() { return gbt::test_scale() < 1.0; }

gb_session_options options(const Cfg &c, float temperature) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 256;
  so.gear = emulated() && (c.gear == GB_GEAR_HIGH || c.gear == GB_GEAR_AUTO) ? GB_GEAR_MID : c.gear;
  so.kv.policy = c.policy;
  so.kv.beta = c.beta;
  so.kv.evict = c.evict;
  so.sampler.temperature = temperature;
  so.sampler.seed = 11;
  so.spec_k = 4;
  so.spec_verify_gear = emulated() ? GB_GEAR_MID : GB_GEAR_HIGH;
  so.log = gbt::quiet_log;
  gbt::x(so).spec_adapt = 1;  // draft lengths by bytes, not by the clock
  return so;
}

// Greedy decoding at 256 positions on one gear and KV policy.
gb_session_options greedy(gb_gear gear, gb_kv_policy policy, uint32_t prefill_batch) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 256;
  so.gear = gear;
  so.kv.policy = policy;
  so.sampler.temperature = 0.0f;
  so.prefill_batch = prefill_batch;
  so.log = gbt::quiet_log;
  return so;
}

class SwaState : public ::testing::TestWithParam<int> {};

// Saved after 89 positions (99 under emulation; the rings of 32 or 96
// records have wrapped), restored into a new session: the next 100 steps
// (30) are those of the saved session, tokens and logits bit for bit; under
// the spec gear the greedy tokens are also the verifier's alone.
TEST_P(SwaState, RestoreAndRollbackAcrossTheWrapAreExact) {
  const Cfg &c = kCfgs[GetParam()];
  Model md;
  ASSERT_TRUE(md.m);
  const uint32_t V = md.m->meta.vocab_size;
  const std::vector<int32_t> prompt = tokens(40, 5);
  const size_t before = emulated() ? 60 : 50, after = emulated() ? 30 : 100, greedy = emulated() ? 60 : 150;
  std::vector<float> temps = {0.0f, 0.9f};
  if (emulated()) temps = {GetParam() % 2 ? 0.9f : 0.0f};
  if (emulated() && c.gear == GB_GEAR_SPEC) temps = {0.0f};
  for (float temp : temps) {
    SCOPED_TRACE(std::string(c.name) + " temperature " + std::to_string(temp));
    const gb_session_options so = options(c, temp);
    gb_session *a = nullptr, *b = nullptr;
    ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &a), GB_OK);
    ASSERT_EQ(gb_prefill(a, prompt.data(), prompt.size()), GB_OK);
    decode(a, before, V);
    size_t need = 0;
    int guard = 0;
    while (gb_session_state_size(a, &need) == GB_ERR_BAD_STATE && guard++ < 16) decode(a, 1, V);
    const std::vector<uint8_t> img = save(a);
    const Trace ra = decode(a, after, V);
    ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &b), GB_OK);
    ASSERT_EQ(gb_session_state_load(b, img.data(), img.size()), GB_OK);
    const Trace rb = decode(b, after, V);
    EXPECT_EQ(ra.tokens, rb.tokens);
    ASSERT_EQ(ra.logits.size(), rb.logits.size());
    EXPECT_EQ(memcmp(ra.logits.data(), rb.logits.data(), ra.logits.size() * sizeof(float)), 0);
    gb_session_destroy(a);
    gb_session_destroy(b);
    if (c.gear != GB_GEAR_SPEC || temp != 0.0f) continue;
    // The spec gear greedy: the verifier's tokens, though every round rolls
    // rejected drafts back across ring records.
    gb_session_options hi = so;
    hi.gear = so.spec_verify_gear;
    gb_session *v = nullptr, *sp = nullptr;
    ASSERT_EQ(gb_session_create(md.m, &hi, nullptr, 0, &v), GB_OK);
    ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &sp), GB_OK);
    ASSERT_EQ(gb_prefill(v, prompt.data(), prompt.size()), GB_OK);
    ASSERT_EQ(gb_prefill(sp, prompt.data(), prompt.size()), GB_OK);
    EXPECT_EQ(decode(v, greedy, V).tokens, decode(sp, greedy, V).tokens);
    gb_session_destroy(v);
    gb_session_destroy(sp);
  }
}

std::string cfg_name(const ::testing::TestParamInfo<int> &i) { return kCfgs[i.param].name; }
INSTANTIATE_TEST_SUITE_P(All, SwaState, ::testing::Range(0, (int)(sizeof kCfgs / sizeof kCfgs[0])), cfg_name);

// A 150-token prompt prefilled in chunks of 64 on two threads (each chunk
// enters the rings at once; rings of 96 records) decodes like the same
// prompt in chunks of 17 on one thread (rings of 32), bit for bit, on the
// f32 and the low tier: what a sliding layer computes depends on the
// positions alone. (The matrices run on prefill_blas 3, whose results do
// not depend on the chunks either: test_prefill_exact.cpp.)
TEST(Swa, BatchedPrefillOnThreadsIsTheStepByStepRun) {
  Model md;
  ASSERT_TRUE(md.m);
  const uint32_t V = md.m->meta.vocab_size;
  const std::vector<int32_t> prompt = tokens(150, 9);
  for (gb_gear gear : {GB_GEAR_F32, GB_GEAR_LOW}) {
    Trace r[2];
    for (int batched = 0; batched < 2; batched++) {
      gb_session_options so = greedy(gear, GB_KV_F16, batched ? 64 : 17);
      gbt::x(so).prefill_blas = 3;  // the multi-position kernels (or panels): the same bits for any chunk
      so.n_threads = batched ? 2 : 1;
      gb_session *s = nullptr;
      ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &s), GB_OK);
      ASSERT_EQ(gb_prefill(s, prompt.data(), prompt.size()), GB_OK);
      r[batched] = decode(s, 40, V);
      gb_session_destroy(s);
    }
    EXPECT_EQ(r[0].tokens, r[1].tokens) << gb_gear_name(gear);
    ASSERT_EQ(r[0].logits.size(), r[1].logits.size());
    EXPECT_EQ(memcmp(r[0].logits.data(), r[1].logits.data(), r[0].logits.size() * sizeof(float)), 0) << gb_gear_name(gear);
  }
}

// Records per ring: the window plus the longest batch less one (at most the
// context), rounded up to a multiple of 32.
uint64_t ring_cap(uint64_t n_ctx, uint64_t batch) { return (std::min<uint64_t>(n_ctx, 16 + batch - 1) + 31) / 32 * 32; }

// Bytes: the global layer holds the whole context, each of the three
// sliding layers a ring of the window plus the longest batch less one
// (16 + 64 - 1 with the default prefill chunk; the spec gear's verify pass
// of spec_k + 1 when longer), rounded up to 32 records. The same model with
// every layer global needs four full layers.
TEST(Swa, PoolHoldsTheGlobalLayersAndTheRings) {
  Model md;
  ASSERT_TRUE(md.m);
  const gb::Meta &c = md.m->meta;
  const uint64_t rec16 = 2ull * c.n_kv_heads * c.head_dim * 2;  // K and V of one token at f16
  for (uint32_t n_ctx : {256u, 4096u, 32768u}) {
    gb_session_options so;
    gb_session_options_init(&so);
    so.n_ctx = n_ctx;
    so.kv.policy = GB_KV_F16;
    so.log = gbt::quiet_log;
    uint64_t pool = 0;
    ASSERT_EQ(gb_kv_pool_size(md.m, &so, &pool, nullptr), GB_OK);
    const uint64_t ring = ring_cap(n_ctx, so.prefill_batch);
    EXPECT_EQ(pool, n_ctx * rec16 + 3 * ring * rec16) << n_ctx;
    size_t with_rings = 0, without = 0;
    ASSERT_EQ(gb_session_mem_size(md.m, &so, &with_rings), GB_OK);
    const uint32_t w = md.m->meta.swa_window;
    md.m->meta.swa_window = 0;
    uint64_t full = 0;
    ASSERT_EQ(gb_kv_pool_size(md.m, &so, &full, nullptr), GB_OK);
    ASSERT_EQ(gb_session_mem_size(md.m, &so, &without), GB_OK);
    md.m->meta.swa_window = w;
    EXPECT_EQ(full, 4ull * n_ctx * rec16) << n_ctx;
    // The session shrinks by at least the pool's difference, less the
    // rings' bookkeeping (a position and an index per record).
    EXPECT_GE(without - with_rings + 8 * ring, full - pool) << n_ctx;
    // A spec session's rings hold its verify pass when that is the longer.
    so.gear = GB_GEAR_SPEC;
    so.spec_k = 6;
    so.prefill_batch = 1;
    ASSERT_EQ(gb_kv_pool_size(md.m, &so, &pool, nullptr), GB_OK);
    EXPECT_EQ(pool, n_ctx * rec16 + 3 * ring_cap(n_ctx, 7) * rec16) << n_ctx;
  }
  // A budget: the rings first, the rest to the global layer; a budget that
  // cannot hold the rings is refused.
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 4096;
  so.kv.policy = GB_KV_UNIFORM8;
  so.log = gbt::quiet_log;
  const uint64_t ring_bytes = 3ull * ring_cap(4096, so.prefill_batch) * (2ull * c.n_kv_heads * c.head_dim + 4ull * c.n_kv_heads);
  so.kv.pool_bytes = ring_bytes + 100000;
  uint64_t pool = 0;
  ASSERT_EQ(gb_kv_pool_size(md.m, &so, &pool, nullptr), GB_OK);
  EXPECT_LE(pool, so.kv.pool_bytes);
  EXPECT_GT(pool, ring_bytes);
  so.kv.pool_bytes = ring_bytes;
  EXPECT_EQ(gb_kv_pool_size(md.m, &so, &pool, nullptr), GB_ERR_BUDGET_EXCEEDED);
}

// The ring part of a state image (its end: the occupied indexes and their
// positions, then each ring's records) made inconsistent, the CRC fixed:
// GB_ERR_CORRUPT, and the session decodes as before.
TEST(Swa, InconsistentRingsInAStateAreRefused) {
  Model md;
  ASSERT_TRUE(md.m);
  const uint32_t V = md.m->meta.vocab_size;
  const gb_session_options so = greedy(GB_GEAR_F32, GB_KV_F32, 1);  // rings of 32 records
  gb_session *a = nullptr, *b = nullptr;
  ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &a), GB_OK);
  ASSERT_EQ(gb_session_create(md.m, &so, nullptr, 0, &b), GB_OK);
  const std::vector<int32_t> prompt = tokens(40, 3);  // 39 positions run: 32..38 replaced 0..6
  ASSERT_EQ(gb_prefill(a, prompt.data(), prompt.size()), GB_OK);
  const std::vector<uint8_t> img = save(a);
  // 32 occupied indexes; the records of 3 rings, 2 x 64 f32 values each.
  const size_t rec = 2 * 64 * 4, tail = 3 * 32 * rec, list = img.size() - tail - 32 * 8, count = list - 4;
  ASSERT_EQ(gb::ld_u32(&img[count]), 32u);
  for (uint32_t i = 0; i < 32; i++) {
    ASSERT_EQ(gb::ld_u32(&img[list + 8 * i]), i);
    ASSERT_EQ(gb::ld_u32(&img[list + 8 * i + 4]), i < 7 ? 32 + i : i);
  }
  auto refused = [&](std::vector<uint8_t> bad, const char *what) {
    gb::st_u32(&bad[24], gb::crc32_update(0, bad.data() + 32, bad.size() - 32));
    EXPECT_EQ(gb_session_state_load(b, bad.data(), bad.size()), GB_ERR_CORRUPT) << what;
  };
  std::vector<uint8_t> bad = img;
  gb::st_u32(&bad[count], 33);
  refused(bad, "more records than indexes");
  bad = img;
  gb::st_u32(&bad[list + 8 * 3], 2);
  refused(bad, "indexes out of order");
  bad = img;
  gb::st_u32(&bad[list + 8 * 5 + 4], gb::ld_u32(&img[list + 8 * 5 + 4]) + 1);
  refused(bad, "a position in another index's class");
  bad = img;
  gb::st_u32(&bad[list + 8 * 15 + 4], 15 + 32 * 20);
  refused(bad, "a position beyond the session's");
  bad = img;
  bad.resize(bad.size() - 8);
  gb::st_u64(&bad[16], gb::ld_u64(&bad[16]) - 8);
  refused(bad, "records cut short");
  // b was left as created: it loads the image and decodes as a does.
  ASSERT_EQ(gb_session_state_load(b, img.data(), img.size()), GB_OK);
  EXPECT_EQ(decode(a, 30, V).logits, decode(b, 30, V).logits);
  gb_session_destroy(a);
  gb_session_destroy(b);
}

}  // namespace
