// Recurrent layers (lfm2's gated short convolutions, qwen35's Gated
// DeltaNet) under the session machinery: their state (a convolution's last
// inputs per layer, and a DeltaNet's matrix per value head) lives in the
// session's pool beside the attention layers' KV cache, and every path that
// moves a session must carry it exactly: save and restore, reset, the
// speculative gear's rollback of rejected drafts, prefill chunks, thread
// counts. Gemma 4's layers, which read other layers' caches and carry
// per-layer inputs, and whose sliding layers' rings have their own head
// shape, go through the same checks (and their own, at the end). The files
// are the repository's fixtures (tests/fixtures: the F32 file written from
// its seed, the Q4_K_M file llama.cpp's quantizer made from it); their
// agreement with llama.cpp is ArchFixtures' part.
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "convert.h"
#include "kv.h"
#include "model.h"
#include "models/arch.h"
#include "sample_files.h"
#include "session.h"
#include "test_util.h"

namespace {

// (gemma4 holds no recurrent state, but its sliding layers' own head
// shapes, its layers reading other layers' caches and its per-layer inputs
// go through the same machinery; no .gbx holds it.)
const char *const kArchs[] = {"lfm2", "qwen35", "gemma4"};
bool in_place_only(const std::string &arch) { return arch == "gemma4"; }

std::string q4km(const std::string &arch) { return std::string(GB_TEST_SOURCE_DIR) + "/fixtures/" + arch + "-tiny-Q4_K_M.gguf"; }

// The F32 fixture, written once per process.
const std::string &f32_file(const std::string &arch) {
  static std::map<std::string, std::string> paths;
  std::string &path = paths[arch];
  if (path.empty()) {
    const std::vector<uint8_t> b = gb::gguf_serialize(gb::arch_fixture_spec(arch));
    path = gbt::temp_dir() + "/" + arch + "-tiny-F32.gguf";
    gbt::write_file(path, b);
  }
  return path;
}

// A file converted to .gbx once per process: the F32 file with every tier
// (low q4, mid q8, high f16, f32), a quantized one with its own.
const std::string &gbx_of(const std::string &gguf) {
  static std::map<std::string, std::string> paths;
  std::string &path = paths[gguf];
  if (path.empty()) {
    const std::string out = gbt::temp_dir() + "/rec-" + std::to_string(paths.size()) + ".gbx";
    gb::ConvertOptions o;
    o.log.fn = gbt::quiet_log;
    EXPECT_EQ(gb::convert_gguf(gguf.c_str(), out.c_str(), o), GB_OK) << gguf;
    path = out;
  }
  return path;
}

// The model in each form: the F32 and Q4_K_M GGUFs opened in place, and
// their .gbx conversions.
std::vector<std::string> forms(const std::string &arch) {
  if (in_place_only(arch)) return {f32_file(arch), q4km(arch)};
  return {f32_file(arch), q4km(arch), gbx_of(f32_file(arch)), gbx_of(q4km(arch))};
}
// The gear a form is run at: the f32 tier of the F32 model, else the file's own.
gb_gear gear_of(const std::string &arch, const std::string &path) {
  return path == q4km(arch) || (!in_place_only(arch) && path == gbx_of(q4km(arch))) ? GB_GEAR_DEFAULT : GB_GEAR_F32;
}

const int32_t kPrompt[] = {1, 403, 407, 261, 266, 324, 290, 382, 311, 267, 400, 365, 354, 260, 277};

gb_session_options options(gb_gear gear, uint32_t threads = 1, uint32_t batch = 4) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = gear;
  so.n_threads = threads;
  so.prefill_batch = batch;
  so.sampler.temperature = 0.0f;
  so.log = gbt::quiet_log;
  return so;
}

struct Steps {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // every step's, concatenated
};

// `steps` greedy decode steps from where s stands.
void decode(gb_session *s, uint32_t steps, Steps *r) {
  for (uint32_t i = 0; i < steps; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t = -1;
    ASSERT_EQ(gb_decode_step(s, &t, &info), GB_OK) << "step " << i;
    r->tokens.push_back(t);
    r->logits.insert(r->logits.end(), info.logits, info.logits + info.n_vocab);
  }
}

Steps prompt_then_decode(gb_model *m, const gb_session_options &so, uint32_t steps) {
  Steps r;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  if (!s) return r;
  EXPECT_EQ(gb_prefill(s, kPrompt, sizeof kPrompt / sizeof kPrompt[0]), GB_OK);
  decode(s, steps, &r);
  gb_session_destroy(s);
  return r;
}

// (A plain loop of comparisons: the aarch64 cross compiler's vectorizer
// fails on an fmax reduction here.)
double max_abs_diff(const std::vector<float> &a, const std::vector<float> &b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) {
    const double d = fabs((double)a[i] - (double)b[i]);
    if (d > worst) worst = d;
  }
  return worst;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

gb_model *open(const std::string &path) {
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  EXPECT_EQ(gb_model_open_file(path.c_str(), &mo, &m), GB_OK) << path;
  return m;
}

// The pool holds each kind of layer's state, sized before creation: the
// attention layers' KV, the recurrent layers' convolution rows (their
// older taps, plus the verify pass where the speculative gear may roll
// back), and
// the DeltaNet matrices (with a checkpoint and a log of that run's update
// inputs only where the speculative gear may roll back).
TEST(Recurrent, ThePoolHoldsEachLayerKindsState) {
  struct Want {
    const char *arch;
    uint32_t attn, conv, delta, taps, channels;
  } wants[] = {{"lfm2", 2, 4, 0, 3, 256}, {"qwen35", 1, 3, 3, 4, 256}};
  for (const Want &w : wants) {
    gb_model *m = open(q4km(w.arch));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->meta.conv_kernel, w.taps) << w.arch;
    EXPECT_EQ(m->meta.conv_channels, w.channels) << w.arch;
    gb_model_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_model_get_info(m, &info), GB_OK);
    EXPECT_EQ(info.n_attention_layers, w.attn) << w.arch;
    EXPECT_EQ(info.n_shortconv_layers, w.delta ? 0u : w.conv) << w.arch;
    EXPECT_EQ(info.n_deltanet_layers, w.delta) << w.arch;
    EXPECT_EQ(info.conv_kernel, w.taps) << w.arch;
    EXPECT_EQ(info.recurrent_bytes, 4ull * w.conv * (w.taps - 1) * w.channels +
                                        4ull * w.delta * m->meta.gdn_v_heads * m->meta.gdn_state * m->meta.gdn_state)
        << w.arch;
    // A caller built against 0.5's header (the struct without these fields)
    // gets the fields it knows.
    gb_model_info old;
    memset(&old, 0xAB, sizeof old);
    old.struct_size = (uint32_t)offsetof(gb_model_info, n_attention_layers);
    ASSERT_EQ(gb_model_get_info(m, &old), GB_OK);
    EXPECT_EQ(old.n_attention_layers, 0xABABABABu) << w.arch;
    EXPECT_EQ(old.dim, info.dim);
    for (uint32_t batch : {1u, 4u, 16u}) {
      gb_session_options so = options(GB_GEAR_DEFAULT, 1, batch);
      size_t bytes = 0;
      ASSERT_EQ(gb_session_mem_size(m, &so, &bytes), GB_OK);
      gb_session *s = nullptr;
      ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
      const gb::KvPlan &p = s->kv.plan;
      EXPECT_EQ(s->kv.n_layers, w.attn) << w.arch;
      EXPECT_EQ(p.conv_layers, w.conv) << w.arch;
      EXPECT_EQ(p.conv_taps, w.taps) << w.arch;
      EXPECT_EQ(p.conv_cap, w.taps - 1) << w.arch;  // a batch's own inputs come from its scratch
      EXPECT_EQ(p.conv_bytes, 4ull * w.conv * p.conv_cap * w.channels) << w.arch;
      EXPECT_EQ(p.delta_layers, w.delta) << w.arch;
      EXPECT_EQ(p.delta_log, 0u) << w.arch;  // no rollback without the speculative gear
      EXPECT_EQ(p.delta_bytes, 4ull * w.delta * m->meta.gdn_v_heads * m->meta.gdn_state * m->meta.gdn_state) << w.arch;
      EXPECT_EQ(p.pool_bytes, p.layer_bytes * w.attn + p.conv_bytes + p.delta_bytes) << w.arch;
      gb_session_destroy(s);
    }
    gb_model_close(m);
    // The speculative gear's verify pass (spec_k + 1 positions) and rollback.
    gb_model *f = open(f32_file(w.arch));
    ASSERT_NE(f, nullptr);
    gb_session_options so = options(GB_GEAR_SPEC, 1, 64);  // prompt chunks longer than the verify pass
    so.spec_verify_gear = GB_GEAR_F32;
    so.spec_k = 6;
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(f, &so, nullptr, 0, &s), GB_OK);
    const gb::KvPlan &p = s->kv.plan;
    EXPECT_EQ(p.conv_cap, w.taps - 1 + 7u) << w.arch;
    EXPECT_EQ(p.delta_log, w.delta ? 7u : 0u) << w.arch;
    if (w.delta) {
      const uint64_t st = 4ull * w.delta * p.delta_state();
      EXPECT_EQ(p.delta_bytes, 2 * st + 7ull * w.delta * p.delta_entry() * 4) << w.arch;
    }
    gb_session_destroy(s);
    gb_model_close(f);
  }
}

// Session a takes the prompt, 5 steps (head), a saved image (img) and 24
// more steps (ra); session b, new, loads the image and takes 24 steps (rb).
// The caller destroys both.
struct Resumed {
  gb_session *a = nullptr, *b = nullptr;
  std::vector<uint8_t> img;
  Steps head, ra, rb;
};
void save_and_resume(gb_model *m, const gb_session_options &so, const int32_t *prompt, size_t n_prompt, const std::string &what,
                     Resumed *r) {
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &r->a), GB_OK) << what;
  ASSERT_EQ(gb_prefill(r->a, prompt, n_prompt), GB_OK) << what;
  decode(r->a, 5, &r->head);
  r->img = gbt::save_state(r->a);
  ASSERT_FALSE(r->img.empty()) << what;
  decode(r->a, 24, &r->ra);
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &r->b), GB_OK) << what;
  ASSERT_EQ(gb_session_state_load(r->b, r->img.data(), r->img.size()), GB_OK) << what;
  decode(r->b, 24, &r->rb);
}

// Save at a position, go on; restore into a new session and go on: the
// same logits, bit for bit (F32 and the Q4_K_M tier, each as its GGUF and
// as its .gbx; the prompt enters in chunks, so the saved rows come from a
// batch and from single steps).
TEST(Recurrent, RestoredStateContinuesBitForBit) {
  for (const char *arch : kArchs)
  for (const std::string &path : forms(arch)) {
    gb_model *m = open(path);
    ASSERT_NE(m, nullptr);
    const gb_session_options so = options(gear_of(arch, path), 1, 4);
    Resumed r;
    save_and_resume(m, so, kPrompt, sizeof kPrompt / sizeof kPrompt[0], path, &r);
    gb_session *const a = r.a, *const b = r.b;
    ASSERT_FALSE(HasFatalFailure());
    const std::vector<uint8_t> &img = r.img;
    const Steps &head = r.head, &ra = r.ra, &rb = r.rb;
    EXPECT_EQ(ra.tokens, rb.tokens) << path;
    EXPECT_TRUE(same_bits(ra.logits, rb.logits)) << path;
    // Without the convolutions' rows (or the DeltaNet matrices; gemma4: the
    // sliding layers' rings) the continuation differs: the state image
    // carries them.
    gb_session *c = nullptr;
    ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &c), GB_OK);
    ASSERT_EQ(gb_session_state_load(c, img.data(), img.size()), GB_OK);
    for (uint32_t i = 0; i < c->kv.plan.conv_cap; i++) c->kv.conv.pos[i] = gb::kRingEmpty;
    if (!c->kv.plan.conv_layers)
      for (uint32_t i = 0; i < c->kv.plan.ring_cap; i++) c->kv.ring.pos[i] = gb::kRingEmpty;
    if (c->kv.plan.delta_layers) {
      ASSERT_EQ(gb_session_state_load(c, img.data(), img.size()), GB_OK);
      memset(c->kv.delta.s, 0, sizeof(float) * c->kv.plan.delta_layers * c->kv.plan.delta_state());
    }
    Steps rc;
    decode(c, 1, &rc);
    EXPECT_FALSE(same_bits(std::vector<float>(ra.logits.begin(), ra.logits.begin() + (long)rc.logits.size()), rc.logits)) << path;
    // Reset forgets them too: the same prompt gives the first run's logits.
    ASSERT_EQ(gb_session_reset(b), GB_OK);
    ASSERT_EQ(gb_prefill(b, kPrompt, sizeof kPrompt / sizeof kPrompt[0]), GB_OK);
    Steps again;
    decode(b, 5, &again);
    EXPECT_TRUE(same_bits(head.logits, again.logits)) << path;
    gb_session_destroy(c);
    gb_session_destroy(b);
    gb_session_destroy(a);
    gb_model_close(m);
  }
}

// One thread or several, the prompt in one chunk or many: the same logits
// bit for bit at every thread count; chunks may change the summation order
// of the batched matrix products, so across chunk sizes the logits agree to
// float rounding and the greedy tokens are the same. (gemma4 rounds each
// GELU input to binary16, where a rounding difference can flip a step
// that the norms after it magnify: about 10 times the others' bounds, as
// llama.cpp's own batched and one-at-a-time logits differ on that file.)
TEST(Recurrent, ThreadsAndChunksGiveTheSameLogits) {
  const uint32_t steps = gbt::test_scale() >= 1.0 ? 24 : 8;
  for (const char *arch : kArchs)
  for (const std::string &path : {f32_file(arch), q4km(arch)}) {
    gb_model *m = open(path);
    ASSERT_NE(m, nullptr);
    const gb_gear g = path == q4km(arch) ? GB_GEAR_DEFAULT : GB_GEAR_F32;
    const Steps one = prompt_then_decode(m, options(g, 1, 4), steps);
    ASSERT_EQ(one.tokens.size(), steps);
    if (gbt::threads_available())
      for (uint32_t t : {2u, 3u}) {
        const Steps r = prompt_then_decode(m, options(g, t, 4), steps);
        EXPECT_EQ(r.tokens, one.tokens) << path << " threads " << t;
        EXPECT_TRUE(same_bits(r.logits, one.logits)) << path << " threads " << t;
      }
    for (uint32_t batch : {1u, 7u, 16u}) {
      const Steps r = prompt_then_decode(m, options(g, 1, batch), steps);
      EXPECT_EQ(r.tokens, one.tokens) << path << " batch " << batch;
      ASSERT_EQ(r.logits.size(), one.logits.size());
      const double bound = (path == q4km(arch) ? 2e-2 : 1e-4) * (in_place_only(arch) ? 10 : 1);
      EXPECT_LT(max_abs_diff(r.logits, one.logits), bound) << path << " batch " << batch;
    }
    gb_model_close(m);
  }
}

// The speculative gear rolls rejected drafts back: the convolutions' rows
// of the rejected positions are dropped and those before them kept, so the
// greedy tokens are the verifier's alone, whatever the draft length and
// draft tier (lazily made from the F32 file in place, the .gbx's own tiers
// in its conversion: most drafts are rejected on these random weights, so
// nearly every round rolls back).
TEST(Recurrent, SpeculativeGreedyIsTheVerifiers) {
  for (const char *arch : kArchs)
  for (const std::string &path : in_place_only(arch) ? std::vector<std::string>{f32_file(arch)}
                                                     : std::vector<std::string>{f32_file(arch), gbx_of(f32_file(arch))}) {
  gb_model *m = open(path);
  ASSERT_NE(m, nullptr);
  const uint32_t steps = gbt::test_scale() >= 1.0 ? 48 : 16;
  const Steps ref = prompt_then_decode(m, options(GB_GEAR_F32, 1, 4), steps);
  // (Prompt chunks longer than the verify pass, 4 against k = 1 and 16
  // against k = 3, are not logged: the checkpoint is the state after them.)
  struct Cfg {
    uint32_t k;
    gb_gear draft;
    uint32_t batch;
  } cfgs[] = {{1, GB_GEAR_LOW, 4}, {3, GB_GEAR_LOW, 4}, {3, GB_GEAR_LOW, 16}, {6, GB_GEAR_LOW, 4}, {4, GB_GEAR_MID, 4}};
  for (const Cfg &c : cfgs) {
    gb_session_options so = options(GB_GEAR_SPEC, 1, c.batch);
    so.spec_verify_gear = GB_GEAR_F32;
    so.spec_draft_gear = c.draft;
    so.spec_k = c.k;
    const Steps r = prompt_then_decode(m, so, steps);
    EXPECT_EQ(r.tokens, ref.tokens) << path << " spec_k " << c.k << " draft " << gb_gear_name(c.draft) << " batch " << c.batch;
  }
  gb_model_close(m);
  }
}

// ---- malformed files ------------------------------------------------------------

gb_status open_spec(const gb::GgufSpec &spec, std::string *log = nullptr) {
  const std::vector<uint8_t> b = gb::gguf_serialize(spec);
  gb_model_options mo = gbt::quiet_model_options();
  if (log) {
    mo.log = [](void *u, gb_log_level, const char *msg) { *static_cast<std::string *>(u) += msg; };
    mo.log_user = log;
  }
  gb_model *m = nullptr;
  const gb_status st = gb_model_open_memory(b.data(), b.size(), &mo, &m);
  if (st == GB_OK) gb_model_close(m);
  return st;
}

// A GGUF array value of elements of type elem (4: u32, 5: i32, 6: f32 bits,
// 7: bool, one byte each).
std::vector<uint8_t> u32_array(std::initializer_list<uint32_t> v, uint32_t elem = 4) {
  std::vector<uint8_t> a(12);
  gb::st_u32(&a[0], elem);
  gb::st_u64(&a[4], v.size());
  for (uint32_t x : v) {
    const size_t at = a.size();
    if (elem == 7) {
      a.push_back((uint8_t)x);
      continue;
    }
    a.resize(at + 4);
    gb::st_u32(&a[at], x);
  }
  return a;
}

// An edit of a good file and the status its open must answer (with a log
// line).
struct Refusal {
  const char *what;
  gb_status want;
  void (*edit)(gb::GgufSpec *);
};

template <size_t N>
void expect_refusals(const gb::GgufSpec &good, const Refusal (&cases)[N]) {
  ASSERT_EQ(open_spec(good), GB_OK);
  for (const Refusal &c : cases) {
    gb::GgufSpec s = good;
    c.edit(&s);
    std::string log;
    EXPECT_EQ(open_spec(s, &log), c.want) << c.what;
    EXPECT_FALSE(log.empty()) << c.what;
  }
}

TEST(Recurrent, MalformedLfm2FilesAreRefusedWithTheirStatus) {
  const Refusal cases[] = {
      {"head_count_kv array of 2 entries for 3 layers", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set("lfm2.attention.head_count_kv", 9, u32_array({0, 1})); }},
      {"head_count_kv 0 in every layer", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set("lfm2.attention.head_count_kv", 9, u32_array({0, 0, 0})); }},
      {"head_count_kv differing between attention layers", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set("lfm2.attention.head_count_kv", 9, u32_array({2, 0, 1})); }},
      {"head_count_kv an array of i32 with a negative entry", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set("lfm2.attention.head_count_kv", 9, u32_array({0, 0, 0xffffffffu}, 5)); }},
      {"head_count_kv an array of f32", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set("lfm2.attention.head_count_kv", 9, u32_array({0, 0, 0x3f800000u}, 6)); }},
      {"no 0 in head_count_kv (no convolution layer)", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set_u32("lfm2.attention.head_count_kv", 1); }},
      {"shortconv.l_cache missing", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { s->remove("lfm2.shortconv.l_cache"); }},
      {"shortconv.l_cache 1", GB_ERR_UNSUPPORTED_TYPE, [](gb::GgufSpec *s) { s->set_u32("lfm2.shortconv.l_cache", 1); }},
      {"shortconv.l_cache 17", GB_ERR_UNSUPPORTED_TYPE, [](gb::GgufSpec *s) { s->set_u32("lfm2.shortconv.l_cache", 17); }},
      {"a sliding window", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set_u32("lfm2.attention.sliding_window", 16); }},
      {"taps of layer 0 missing", GB_ERR_MISSING_TENSOR, [](gb::GgufSpec *s) { s->remove_tensor("blk.0.shortconv.conv.weight"); }},
      {"input projection of layer 1 missing", GB_ERR_MISSING_TENSOR,
       [](gb::GgufSpec *s) { s->remove_tensor("blk.1.shortconv.in_proj.weight"); }},
      {"taps of 4 where l_cache is 3", GB_ERR_SHAPE_MISMATCH,
       [](gb::GgufSpec *s) {
         gb::GgufTensorSpec *t = s->tensor("blk.0.shortconv.conv.weight");
         t->ne = {4, t->ne[1] * 3 / 4};
       }},
      {"input projection of 2 * dim rows", GB_ERR_SHAPE_MISMATCH,
       [](gb::GgufSpec *s) {
         gb::GgufTensorSpec *t = s->tensor("blk.1.shortconv.in_proj.weight");
         t->ne[1] = t->ne[1] * 2 / 3;
         t->data.resize(t->data.size() * 2 / 3);
       }},
      {"a non-finite tap", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { gb::st_u32(&s->tensor("blk.1.shortconv.conv.weight")->data[8], 0x7fc00000u); }},
      {"final norm missing (lfm2 names it token_embd_norm)", GB_ERR_MISSING_TENSOR,
       [](gb::GgufSpec *s) { s->remove_tensor("token_embd_norm.weight"); }},
      {"the attention layer without its Q norm", GB_ERR_MISSING_TENSOR,
       [](gb::GgufSpec *s) { s->remove_tensor("blk.2.attn_q_norm.weight"); }},
  };
  expect_refusals(gb::arch_fixture_spec("lfm2-small"), cases);
  // An architecture without convolution layers refuses a 0 in the array.
  gb::GgufSpec q = gb::arch_fixture_spec("qwen3");
  q.set("qwen3.attention.head_count_kv", 9, u32_array({0, 2}));
  EXPECT_EQ(open_spec(q), GB_ERR_UNSUPPORTED_TYPE);
  // ... and reads a per-layer array of one value as that value.
  q.set("qwen3.attention.head_count_kv", 9, u32_array({2, 2}));
  EXPECT_EQ(open_spec(q), GB_OK);
}

std::vector<uint8_t> sections(std::initializer_list<uint32_t> v) { return u32_array(v, 5); }

TEST(Recurrent, MalformedQwen35FilesAreRefusedWithTheirStatus) {
  const Refusal cases[] = {
      {"ssm.inner_size not heads x state", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { s->set_u32("qwen35.ssm.inner_size", 33); }},
      {"value heads not a multiple of key heads", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set_u32("qwen35.ssm.group_count", 3); }},
      {"ssm.state_size missing", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { s->remove("qwen35.ssm.state_size"); }},
      {"ssm.conv_kernel 1", GB_ERR_UNSUPPORTED_TYPE, [](gb::GgufSpec *s) { s->set_u32("qwen35.ssm.conv_kernel", 1); }},
      {"rope.dimension_sections missing", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { s->remove("qwen35.rope.dimension_sections"); }},
      {"sections leaving pairs to the fourth stream", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set("qwen35.rope.dimension_sections", 9, sections({0, 0, 0, 4})); }},
      {"sections of 5 entries", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set("qwen35.rope.dimension_sections", 9, sections({1, 1, 1, 0, 0})); }},
      {"full_attention_interval 0", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { s->set_u32("qwen35.full_attention_interval", 0); }},
      {"recurrent_layers: every layer (no attention)", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set("qwen35.attention.recurrent_layers", 9, u32_array({1, 1, 1, 1}, 7)); }},
      {"recurrent_layers of 3 entries for 4 layers", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set("qwen35.attention.recurrent_layers", 9, u32_array({1, 1, 0}, 7)); }},
      {"recurrent_layers with a flag of 2", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set("qwen35.attention.recurrent_layers", 9, u32_array({1, 2, 1, 0}, 4)); }},
      {"nextn_predict_layers = block_count", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { s->set_u32("qwen35.nextn_predict_layers", 4); }},
      {"ssm_a of layer 0 missing", GB_ERR_MISSING_TENSOR, [](gb::GgufSpec *s) { s->remove_tensor("blk.0.ssm_a"); }},
      {"output gate of layer 1 missing", GB_ERR_MISSING_TENSOR, [](gb::GgufSpec *s) { s->remove_tensor("blk.1.attn_gate.weight"); }},
      {"convolution of 3 taps where ssm.conv_kernel is 4", GB_ERR_SHAPE_MISMATCH,
       [](gb::GgufSpec *s) { s->set_u32("qwen35.ssm.conv_kernel", 3); }},
      {"a query projection without its gate rows", GB_ERR_SHAPE_MISMATCH,
       [](gb::GgufSpec *s) {
         gb::GgufTensorSpec *t = s->tensor("blk.3.attn_q.weight");
         t->ne[1] /= 2;
         t->data.resize(t->data.size() / 2);
       }},
      {"a non-finite decay rate", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { gb::st_u32(&s->tensor("blk.2.ssm_a")->data[0], 0x7f800000u); }},
      {"the pre-FFN norm under the plain name only", GB_ERR_MISSING_TENSOR,
       [](gb::GgufSpec *s) {
         for (gb::GgufTensorSpec &t : s->tensors)
           if (t.name == "blk.0.post_attention_norm.weight") t.name = "blk.0.ffn_norm.weight";
       }},
  };
  expect_refusals(gb::arch_fixture_spec("qwen35-small"), cases);
}

// The recurrent layers marked by attention.recurrent_layers (flags, as some
// files carry them) instead of full_attention_interval: the same model.
TEST(Recurrent, RecurrentLayerFlagsAreTheInterval) {
  gb::GgufSpec s = gb::arch_fixture_spec("qwen35");
  s.remove("qwen35.full_attention_interval");
  s.set("qwen35.attention.recurrent_layers", 9, u32_array({1, 1, 1, 0}, 7));
  const std::vector<uint8_t> b = gb::gguf_serialize(s);
  const std::string path = gbt::temp_dir() + "/qwen35-flags.gguf";
  gbt::write_file(path, b);
  gb_model *a = open(path), *f = open(f32_file("qwen35"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(f, nullptr);
  const Steps ra = prompt_then_decode(a, options(GB_GEAR_F32), 8), rf = prompt_then_decode(f, options(GB_GEAR_F32), 8);
  EXPECT_TRUE(same_bits(ra.logits, rf.logits));
  gb_model_close(a);
  gb_model_close(f);
  unlink(path.c_str());
}

// The .gbx form holds what the GGUF does: each layer's kind, the
// convolution and DeltaNet shapes, and (from the F32 file) every tier,
// each a real one (no tier is made at session creation).
TEST(Recurrent, TheGbxFormHoldsTheLayersAndEveryTier) {
  for (const char *arch : kArchs) {
    if (in_place_only(arch)) continue;
    gb_model *g = open(f32_file(arch)), *c = open(gbx_of(f32_file(arch)));
    ASSERT_TRUE(g && c);
    gb_model_info gi, ci;
    gi.struct_size = ci.struct_size = sizeof gi;
    ASSERT_EQ(gb_model_get_info(g, &gi), GB_OK);
    ASSERT_EQ(gb_model_get_info(c, &ci), GB_OK);
    EXPECT_EQ(ci.is_gguf, 0u);
    EXPECT_EQ(ci.gears, 0xFu) << arch;
    EXPECT_EQ(gi.n_params, ci.n_params) << arch;
    // (The convolution and DeltaNet fields: GgufDirect's comparison of the
    // converted Q4_K_M files, which the same code writes.)
    EXPECT_EQ(g->meta.conv_kernel, c->meta.conv_kernel);
    ASSERT_NE(c->meta.layer_kind, nullptr);
    uint32_t recurrent = 0;
    for (uint32_t l = 0; l < g->meta.n_layers; l++) {
      EXPECT_EQ(g->meta.kind(l), c->meta.kind(l)) << arch << " layer " << l;
      recurrent += c->meta.conv_layer(l);
    }
    EXPECT_GT(recurrent, 0u) << arch;
    // The f32 tier's logits are the GGUF's, bit for bit.
    const Steps a = prompt_then_decode(g, options(GB_GEAR_F32), 8), b = prompt_then_decode(c, options(GB_GEAR_F32), 8);
    EXPECT_EQ(a.tokens, b.tokens) << arch;
    EXPECT_TRUE(same_bits(a.logits, b.logits)) << arch;
    gb_model_close(c);
    gb_model_close(g);
  }
}

}  // namespace

// ---- gemma4: per-layer head shapes, shared caches, per-layer inputs -------------

// The pool holds the sliding layers' rings at their own head shape (2 KV
// heads of 64 against the global layers' 1 of 128) and nothing for the
// layers that read an earlier layer's cache: of the fixture's six layers,
// one global layer and two rings hold KV; layers 3 and 4 read layer 1's
// ring, layer 5 layer 2's cache. The per-layer input table is streamed from
// the file: the model reports it apart, the budget and the planner leave
// it out of the resident weights.
TEST(Gemma4, ThePoolHoldsOnlyTheCachesOfLayersThatOwnOne) {
  gb_model *m = open(q4km("gemma4"));
  ASSERT_NE(m, nullptr);
  gb_model_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(gb_model_get_info(m, &info), GB_OK);
  EXPECT_EQ(info.head_dim, 128u);
  EXPECT_EQ(info.n_kv_heads, 1u);
  EXPECT_EQ(info.head_dim_swa, 64u);
  EXPECT_EQ(info.n_kv_heads_swa, 2u);
  EXPECT_EQ(info.n_kv_shared_layers, 3u);
  EXPECT_EQ(info.n_attention_layers, 6u);
  EXPECT_EQ(info.per_layer_input_bytes, m->ple_embd.nbytes);
  EXPECT_EQ(info.per_layer_input_row_bytes, 6u * 32 / 32 * 34);  // a Q8_0 row of 6 layers x 32 values
  for (uint32_t policy : {(uint32_t)GB_KV_F32, (uint32_t)GB_KV_UNIFORM8}) {
    gb_session_options so = options(GB_GEAR_DEFAULT, 1, 4);
    so.kv.policy = (gb_kv_policy)policy;
    so.n_ctx = 256;
    size_t bytes = 0;
    ASSERT_EQ(gb_session_mem_size(m, &so, &bytes), GB_OK);
    gb_session *s = nullptr;
    ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
    const gb::KvPool &kv = s->kv;
    const gb::KvPlan &p = kv.plan;
    EXPECT_EQ(kv.n_layers, 1u);
    EXPECT_EQ(p.ring_layers, 2u);
    EXPECT_EQ(p.ring_kv_heads, 2u);
    EXPECT_EQ(p.ring_head_dim, 64u);
    EXPECT_EQ(kv.layer_map[3], kv.layer_map[1]);
    EXPECT_EQ(kv.layer_map[4], kv.layer_map[1]);
    EXPECT_EQ(kv.layer_map[5], kv.layer_map[2]);
    const uint32_t bits = policy == GB_KV_F32 ? 32 : 8;
    EXPECT_EQ(p.rec[p.entry], 1u * 2 * 128 * bits / 8);
    EXPECT_EQ(p.ring_rec, 2u * 2 * 64 * bits / 8);
    EXPECT_EQ(p.ring_scale_bytes, policy == GB_KV_F32 ? 0u : 4u * 2);
    EXPECT_EQ(p.pool_bytes, p.layer_bytes + 2ull * p.ring_cap * (p.ring_rec + p.ring_scale_bytes));
    gb_session_destroy(s);
  }
  // Both caches are read back at their own shapes: 8-bit keys and values
  // give the f32 pool's tokens, their logits within 8-bit rounding.
  const Steps f = prompt_then_decode(m, options(GB_GEAR_DEFAULT, 1, 4), 16);
  gb_session_options q8 = options(GB_GEAR_DEFAULT, 1, 4);
  q8.kv.policy = GB_KV_UNIFORM8;
  const Steps q = prompt_then_decode(m, q8, 16);
  ASSERT_EQ(q.logits.size(), f.logits.size());
  // (gemma3's fixture moves as much: 0.10 at most over the same steps.)
  EXPECT_EQ(q.tokens, f.tokens);
  EXPECT_LT(max_abs_diff(q.logits, f.logits), 0.25);
  EXPECT_GT(max_abs_diff(q.logits, f.logits), 0.0);  // the 8-bit pool is really in use
  // The planner: the streamed table is reported apart, not resident.
  gb_session_options po;
  gb_session_options_init(&po);
  po.log = gbt::quiet_log;
  gb_plan_report rep;
  rep.struct_size = sizeof rep;
  ASSERT_EQ(gb_plan(m, 64ull << 20, 256, &po, &rep), GB_OK);
  EXPECT_EQ(rep.streamed_bytes, info.per_layer_input_bytes);
  EXPECT_EQ(rep.weight_bytes, info.gear_bytes[info.default_gear] - info.per_layer_input_bytes);
  gb_model_close(m);
  // Locked in memory: the tensors a token reads whole, not the table.
  gb_model_options lo = gbt::quiet_model_options();
  lo.load = GB_MODEL_LOAD_LOCK;
  gb_model *k = nullptr;
  if (gb_model_open_file(q4km("gemma4").c_str(), &lo, &k) == GB_OK) {  // (a host may refuse to lock pages)
    gb_model_info ki;
    ki.struct_size = sizeof ki;
    ASSERT_EQ(gb_model_get_info(k, &ki), GB_OK);
    EXPECT_GT(ki.locked_bytes, k->mem_bytes);
    EXPECT_LE(ki.locked_bytes - k->mem_bytes, ki.gear_bytes[ki.default_gear] - ki.per_layer_input_bytes);
    gb_model_close(k);
  }
}

// The rings' own record shape under every kind of pool: saved past the
// ring's wrap (a 45-token prompt against a window of 16) and restored, the
// continuation is the uninterrupted one bit for bit, at 8 and 4 bits
// (scales per head of the rings' own count), f16, and a budgeted pool.
TEST(Gemma4, QuantizedRingsOfTheirOwnShapeRestoreBitForBit) {
  gb_model *m = open(f32_file("gemma4"));
  ASSERT_NE(m, nullptr);
  std::vector<int32_t> prompt;
  for (int r = 0; r < 3; r++) prompt.insert(prompt.end(), kPrompt, kPrompt + sizeof kPrompt / sizeof kPrompt[0]);
  struct Pool {
    gb_kv_policy policy;
    float beta;
  } pools[] = {{GB_KV_UNIFORM8, 0.0f}, {GB_KV_UNIFORM4, 0.0f}, {GB_KV_F16, 0.0f}, {GB_KV_WINDOW, 0.5f}};
  for (const Pool &pl : pools) {
    gb_session_options so = options(GB_GEAR_F32, 1, 4);
    so.kv.policy = pl.policy;
    so.kv.beta = pl.beta;
    so.n_ctx = 256;
    Resumed r;
    save_and_resume(m, so, prompt.data(), prompt.size(), gb_kv_policy_name(pl.policy), &r);
    EXPECT_EQ(r.ra.tokens, r.rb.tokens) << gb_kv_policy_name(pl.policy);
    EXPECT_TRUE(same_bits(r.ra.logits, r.rb.logits)) << gb_kv_policy_name(pl.policy);
    gb_session_destroy(r.b);
    gb_session_destroy(r.a);
    ASSERT_FALSE(HasFatalFailure());
  }
  gb_model_close(m);
}

// What the architecture adds is checked on open: each edit of a good file
// answers its status with a log line.
TEST(Gemma4, MalformedFilesAreRefusedWithTheirStatus) {
  static const Refusal cases[] = {
      {"sliding_window_pattern missing", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->remove("gemma4.attention.sliding_window_pattern"); }},
      {"sliding_window_pattern of 5 entries", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set("gemma4.attention.sliding_window_pattern", 9, u32_array({1, 1, 0, 1, 1}, 7)); }},
      {"sliding_window_pattern not periodic", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set("gemma4.attention.sliding_window_pattern", 9, u32_array({1, 1, 0, 1, 0, 0}, 7)); }},
      {"sliding_window 0", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { s->set_u32("gemma4.attention.sliding_window", 0); }},
      {"key_length_swa missing", GB_ERR_CORRUPT, [](gb::GgufSpec *s) { s->remove("gemma4.attention.key_length_swa"); }},
      {"sliding heads wider than the global ones", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) {
         s->set_u32("gemma4.attention.key_length_swa", 64);
         s->set_u32("gemma4.attention.value_length_swa", 64);
       }},
      {"value_length_swa differs", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set_u32("gemma4.attention.value_length_swa", 8); }},
      {"rope.dimension_count_swa beyond the sliding heads", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set_u32("gemma4.rope.dimension_count_swa", 32); }},
      {"head_count_kv differs among the sliding layers", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set("gemma4.attention.head_count_kv", 9, u32_array({2, 1, 1, 2, 2, 1})); }},
      {"shared_kv_layers leaving one layer with a cache", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set_u32("gemma4.attention.shared_kv_layers", 5); }},
      {"a global layer that would read a sliding layer's cache", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set_u32("gemma4.attention.shared_kv_layers", 4); }},
      {"feed_forward_length of 5 entries", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { s->set("gemma4.feed_forward_length", 9, u32_array({64, 64, 64, 128, 128})); }},
      {"feed_forward_length differing among the layers holding a cache", GB_ERR_UNSUPPORTED_TYPE,
       [](gb::GgufSpec *s) { s->set("gemma4.feed_forward_length", 9, u32_array({64, 128, 64, 128, 128, 128})); }},
      {"experts", GB_ERR_UNSUPPORTED_TYPE, [](gb::GgufSpec *s) { s->set_u32("gemma4.expert_count", 4); }},
      {"the per-layer input table missing", GB_ERR_MISSING_TENSOR,
       [](gb::GgufSpec *s) { s->remove_tensor("per_layer_token_embd.weight"); }},
      {"a layer's per-layer input projection missing", GB_ERR_MISSING_TENSOR,
       [](gb::GgufSpec *s) { s->remove_tensor("blk.3.proj.weight"); }},
      {"a cache-holding layer's value projection missing", GB_ERR_MISSING_TENSOR,
       [](gb::GgufSpec *s) { s->remove_tensor("blk.0.attn_v.weight"); }},
      {"the output scale in some layers only", GB_ERR_MISSING_TENSOR,
       [](gb::GgufSpec *s) { s->remove_tensor("blk.4.layer_output_scale.weight"); }},
      {"the per-layer projection of half its rows", GB_ERR_SHAPE_MISMATCH,
       [](gb::GgufSpec *s) {
         gb::GgufTensorSpec *t = s->tensor("per_layer_model_proj.weight");
         t->ne[1] /= 2;
         t->data.resize(t->data.size() / 2);
       }},
      {"a global layer's key projection of sliding-head rows", GB_ERR_SHAPE_MISMATCH,
       [](gb::GgufSpec *s) {
         gb::GgufTensorSpec *t = s->tensor("blk.2.attn_k.weight");
         t->ne[1] /= 2;
         t->data.resize(t->data.size() / 2);
       }},
      {"a non-finite per-layer input norm weight", GB_ERR_CORRUPT,
       [](gb::GgufSpec *s) { gb::st_u32(&s->tensor("per_layer_proj_norm.weight")->data[4], 0x7f800000u); }},
  };
  expect_refusals(gb::arch_fixture_spec("gemma4-small"), cases);
}
