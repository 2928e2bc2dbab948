// concurrency.cpp — one model shared read-only by many sessions on many
// threads at once.
//
// Every job below is deterministic: greedy or seeded decoding (tokens and
// the logits they came from, bit for bit), batched prefill, a session saved
// and restored into another, the model's tokenizer (gb_tokenize,
// gb_tokenizer_encode / decode, token texts), gb_model_get_info and
// gb_chat_apply. Each job runs once on the main thread first; its output is
// the reference. Then every thread runs every job, each thread starting at a
// different one so that all kinds run at the same moment, for several rounds,
// and each output must equal the reference byte for byte. One decoding job
// uses n_threads = 2 and one prefill job n_threads = 3, so the sessions' own
// worker pools run beside the caller threads. Sessions are created and
// destroyed inside the jobs, so creation (kernel selection, worker start,
// OpenBLAS set to one thread) runs concurrently too.
//
// Built as gearbx_concurrency (not in gearbx_tests) so that
// tests/run_tsan.sh builds and runs it alone under ThreadSanitizer.
// GB_TEST_SCALE shrinks the rounds and the tokens per job (emulated runs).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

size_t scaled(size_t n, size_t at_least) {
  const size_t v = (size_t)((double)n * gbt::test_scale());
  return v > at_least ? v : at_least;
}

// A job's output: bytes appended in order. Equal outputs, equal behaviour.
struct Out {
  std::string bytes;
  bool failed = false;  // a call returned an unexpected status
  std::string why;
  template <typename T>
  void put(const T &v) {
    bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  }
  void put_n(const void *p, size_t n) { bytes.append(static_cast<const char *>(p), n); }
  void fail(const char *what, gb_status st) {
    if (!failed) why = std::string(what) + ": " + gb_status_str(st);
    failed = true;
  }
};
#define GBT_CALL(out, call)       \
  do {                            \
    const gb_status st_ = (call); \
    if (st_ != GB_OK) {           \
      (out).fail(#call, st_);     \
      return;                     \
    }                             \
  } while (0)

struct Shared {
  gb_model *m = nullptr;
  const gb_tokenizer *tok = nullptr;
  uint32_t vocab = 0;
  std::vector<std::vector<int32_t>> prompts;  // with BOS
  std::vector<int32_t> long_prompt;           // several prefill chunks
  size_t steps = 0;                           // decode steps per job
};

const char *const kTexts[] = {
    "Once upon a time, there was a little girl named Lily. She",
    "The cat sat on the mat and looked at the big red ball.",
    "Tom and his dog went to the park. They played all day, and",
    "One day, a bird flew into the garden. It was sad because",
    "caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 \xf0\x9f\x98\x80 \xff\xfe bytes\n\ttabs",
};

std::vector<int32_t> tokenize(gb_model *m, const std::string &text) {
  std::vector<int32_t> t(GB_TOKENIZE_CAPACITY(text.size()));
  size_t n = 0;
  EXPECT_EQ(gb_tokenize(m, text.data(), text.size(), GB_TOKENIZE_ADD_BOS, t.data(), t.size(), &n), GB_OK);
  t.resize(n);
  return t;
}

gb_session_options base_options() {
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 256;
  so.log = gbt::quiet_log;
  so.sampler.temperature = 0.0f;
  return so;
}

// Prefill `prompt`, then `steps` decode steps: every token, and the logits it
// was drawn from, go to the output.
void decode_into(Out &o, const Shared &sh, gb_session *s, const std::vector<int32_t> &prompt, size_t steps) {
  GBT_CALL(o, gb_prefill(s, prompt.data(), prompt.size()));
  for (size_t i = 0; i < steps; i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    int32_t t = -1;
    GBT_CALL(o, gb_decode_step(s, &t, &info));
    o.put(t);
    o.put(info.gear);
    o.put_n(info.logits, sizeof(float) * sh.vocab);
    for (uint32_t v = 0; v < sh.vocab; v++)
      if (!isfinite(info.logits[v])) return o.fail("non-finite logit", GB_ERR_INTERNAL);
  }
}

void run_session(Out &o, const Shared &sh, const gb_session_options &so, const std::vector<int32_t> &prompt,
                 size_t steps) {
  gb_session *s = nullptr;
  GBT_CALL(o, gb_session_create(sh.m, &so, nullptr, 0, &s));
  decode_into(o, sh, s, prompt, steps);
  gb_session_destroy(s);
}

// ---- the jobs ----------------------------------------------------------------

void job_greedy_high(Out &o, const Shared &sh) {
  gb_session_options so = base_options();
  so.gear = GB_GEAR_HIGH;
  run_session(o, sh, so, sh.prompts[0], sh.steps);
}

// The session's own worker pool: GEMVs big enough (the classifier) are split
// between the caller and one worker.
void job_two_threads(Out &o, const Shared &sh) {
  gb_session_options so = base_options();
  so.gear = GB_GEAR_LOW;
  so.n_threads = 2;
  so.kv.policy = GB_KV_UNIFORM8;
  run_session(o, sh, so, sh.prompts[1], sh.steps);
}

// Entropy routing with sampling (seeded): gear shifts, pre-warming and the
// release of tiers (madvise on the shared mapping) while others read it.
void job_auto_sampled(Out &o, const Shared &sh) {
  gb_session_options so = base_options();
  so.gear = GB_GEAR_AUTO;
  so.sampler.temperature = 0.9f;
  so.sampler.seed = 42;
  so.sampler.top_k = 40;
  gbt::x(so).release_steps = 2;
  gbt::x(so).measure_residency = 1;
  so.kv.policy = GB_KV_WINDOW;
  so.kv.beta = 0.1f;
  so.kv.evict = 1;
  run_session(o, sh, so, sh.prompts[2], sh.steps);
}

void job_spec(Out &o, const Shared &sh) {
  gb_session_options so = base_options();
  so.gear = GB_GEAR_SPEC;
  so.spec_k = 4;
  so.kv.policy = GB_KV_F16;
  run_session(o, sh, so, sh.prompts[3], sh.steps);
}

// Batched prefill of a long prompt in chunks of 16, then a few steps: the
// built-in GEMM with its panels over three threads, and OpenBLAS (when the
// library has it: else token by token) from several threads at once.
void job_prefill(Out &o, const Shared &sh) {
  gb_session_options so = base_options();
  so.gear = GB_GEAR_MID;
  so.n_threads = 3;
  so.prefill_batch = 16;
  gbt::x(so).prefill_panel_rows = 32;
  gbt::x(so).prefill_blas = 0;
  run_session(o, sh, so, sh.long_prompt, 8);
}
void job_prefill_blas(Out &o, const Shared &sh) {
  gb_session_options so = base_options();
  so.gear = GB_GEAR_HIGH;
  so.prefill_batch = 32;
  gbt::x(so).prefill_blas = 1;
  run_session(o, sh, so, sh.long_prompt, 8);
}

// Save a session mid-generation, restore it into a second one, decode on.
void job_state(Out &o, const Shared &sh) {
  gb_session_options so = base_options();
  so.gear = GB_GEAR_MID;
  so.sampler.temperature = 0.8f;
  so.sampler.seed = 9;
  so.kv.policy = GB_KV_SEED;
  so.kv.beta = 0.3f;
  gb_session *a = nullptr, *b = nullptr;
  GBT_CALL(o, gb_session_create(sh.m, &so, nullptr, 0, &a));
  decode_into(o, sh, a, sh.prompts[4], sh.steps / 2);
  size_t need = 0, n = 0;
  if (!o.failed && gb_session_state_size(a, &need) == GB_OK) {
    std::vector<uint8_t> img(need);
    const gb_status st = gb_session_state_save(a, img.data(), img.size(), &n);
    if (st != GB_OK) o.fail("gb_session_state_save", st);
    o.put(n);
    if (!o.failed && gb_session_create(sh.m, &so, nullptr, 0, &b) == GB_OK) {
      const gb_status ld = gb_session_state_load(b, img.data(), n);
      if (ld != GB_OK) o.fail("gb_session_state_load", ld);
      for (size_t i = 0; i < sh.steps / 2 && !o.failed; i++) {
        gb_step_info ia, ib;
        ia.struct_size = ib.struct_size = sizeof ia;
        int32_t ta = -1, tb = -1;
        const gb_status sa = gb_decode_step(a, &ta, &ia), sb = gb_decode_step(b, &tb, &ib);
        if (sa != GB_OK || sb != GB_OK) o.fail("gb_decode_step after restore", sa != GB_OK ? sa : sb);
        if (o.failed) break;
        if (ta != tb || memcmp(ia.logits, ib.logits, sizeof(float) * sh.vocab) != 0)
          o.fail("restored session diverged", GB_ERR_INTERNAL);
        o.put(tb);
        o.put_n(ib.logits, sizeof(float) * sh.vocab);
      }
      gb_session_destroy(b);
    } else if (!o.failed) {
      o.fail("gb_session_create (restore)", GB_ERR_INTERNAL);
    }
  } else if (!o.failed) {
    o.fail("gb_session_state_size", GB_ERR_INTERNAL);
  }
  gb_session_destroy(a);
}

// The model's tokenizer through every entry point.
void job_tokenizer(Out &o, const Shared &sh) {
  std::vector<int32_t> ids;
  std::vector<char> text;
  for (const char *t : kTexts) {
    const size_t len = strlen(t);
    for (uint32_t flags : {0u, (uint32_t)GB_TOKENIZE_ADD_BOS, (uint32_t)(GB_TOKENIZE_ADD_BOS | GB_TOKENIZE_ADD_EOS)}) {
      ids.assign(GB_TOKENIZE_CAPACITY(len), 0);
      size_t n = 0, n2 = 0;
      GBT_CALL(o, gb_tokenize(sh.m, t, len, flags, ids.data(), ids.size(), &n));
      o.put(n);
      o.put_n(ids.data(), n * sizeof(int32_t));
      std::vector<int32_t> ids2(ids.size());
      GBT_CALL(o, gb_tokenizer_encode(sh.tok, t, len, flags, ids2.data(), ids2.size(), &n2));
      if (n2 != n || memcmp(ids.data(), ids2.data(), n * sizeof(int32_t)) != 0)
        return o.fail("gb_tokenize and gb_tokenizer_encode differ", GB_ERR_INTERNAL);
      size_t need = 0;
      const gb_status st = gb_tokenizer_decode(sh.tok, ids.data(), n, 0, nullptr, 0, &need);
      if (st != GB_OK && st != GB_ERR_BUFFER_TOO_SMALL) return o.fail("gb_tokenizer_decode (size)", st);
      text.assign(need + 1, 0);
      size_t got = 0;
      GBT_CALL(o, gb_tokenizer_decode(sh.tok, ids.data(), n, GB_DETOKENIZE_SPECIAL, text.data(), text.size(), &got));
      o.put(got);
      o.put_n(text.data(), got);
      int32_t prev = -1;
      for (size_t i = 0; i < n; i++) {
        const char *piece = nullptr;
        size_t plen = 0;
        GBT_CALL(o, gb_token_to_text(sh.m, prev, ids[i], &piece, &plen));
        o.put_n(piece, plen);
        int eog = 0;
        GBT_CALL(o, gb_tokenizer_is_eog(sh.tok, ids[i], &eog));
        o.put(eog);
        prev = ids[i];
      }
    }
  }
}

// gb_model_get_info and chat templates (no session).
void job_info_chat(Out &o, const Shared &sh) {
  gb_model_info mi;
  memset(&mi, 0, sizeof mi);
  mi.struct_size = sizeof mi;
  GBT_CALL(o, gb_model_get_info(sh.m, &mi));
  o.put(mi);
  gb_tokenizer_info ti;
  memset(&ti, 0, sizeof ti);
  ti.struct_size = sizeof ti;
  GBT_CALL(o, gb_tokenizer_get_info(sh.tok, &ti));
  o.put(ti);
  const gb_chat_message msgs[] = {{"system", "You tell short stories."},
                                  {"user", "  Tell me about a cat.  "},
                                  {"assistant", "Once upon a time, a cat sat."},
                                  {"user", kTexts[4]}};
  char buf[2048];
  for (int t = GB_CHAT_TEMPLATE_LLAMA2; t <= GB_CHAT_TEMPLATE_QWEN3; t++) {
    size_t n = 0;
    GBT_CALL(o, gb_chat_apply((gb_chat_template)t, msgs, 4, t == GB_CHAT_TEMPLATE_LLAMA2 ? 0 : 1, buf, sizeof buf, &n));
    o.put(n);
    o.put_n(buf, n);
    const char *const *eot = nullptr;
    size_t ne = 0;
    GBT_CALL(o, gb_chat_eot_strings((gb_chat_template)t, &eot, &ne));
    for (size_t i = 0; i < ne; i++) o.put_n(eot[i], strlen(eot[i]));
  }
}

struct Job {
  const char *name;
  void (*fn)(Out &, const Shared &);
};
const Job kJobs[] = {
    {"greedy_high", job_greedy_high},
    {"two_threads", job_two_threads},
    {"auto_sampled", job_auto_sampled},
    {"spec", job_spec},
    {"prefill", job_prefill},
    {"prefill_blas", job_prefill_blas},
    {"state", job_state},
    {"tokenizer", job_tokenizer},
    {"info_chat", job_info_chat},
};
constexpr size_t kNJobs = sizeof kJobs / sizeof kJobs[0];

TEST(Concurrency, SharedModelManyThreadsSameResults) {
  if (!gbt::threads_available()) GTEST_SKIP() << "no threads here (GB_TEST_NO_THREADS)";
  Shared sh;
  gb_model_options mo = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &sh.m), GB_OK);
  ASSERT_EQ(gb_model_tokenizer(sh.m, &sh.tok), GB_OK);
  gb_model_info mi;
  memset(&mi, 0, sizeof mi);
  mi.struct_size = sizeof mi;
  ASSERT_EQ(gb_model_get_info(sh.m, &mi), GB_OK);
  sh.vocab = mi.vocab_size;
  for (const char *t : kTexts) sh.prompts.push_back(tokenize(sh.m, t));
  std::string lp;
  for (int i = 0; i < 3; i++) lp += std::string(kTexts[i]) + " ";
  sh.long_prompt = tokenize(sh.m, lp);
  ASSERT_GT(sh.long_prompt.size(), 40u);  // several chunks of 16
  sh.steps = scaled(48, 8);
  const size_t rounds = scaled(6, 2);
  const size_t n_threads = 8;

  // The references, single-threaded.
  std::vector<Out> ref(kNJobs);
  for (size_t j = 0; j < kNJobs; j++) {
    kJobs[j].fn(ref[j], sh);
    ASSERT_FALSE(ref[j].failed) << kJobs[j].name << ": " << ref[j].why;
    ASSERT_FALSE(ref[j].bytes.empty()) << kJobs[j].name;
  }
  // A second single-threaded run agrees with the first: a mismatch under
  // threads then means the threads.
  for (size_t j = 0; j < kNJobs; j++) {
    Out again;
    kJobs[j].fn(again, sh);
    ASSERT_TRUE(again.bytes == ref[j].bytes) << kJobs[j].name << " differs between two single-threaded runs";
  }

  // All at once: thread t runs job (t + k) mod J at its k-th turn, so at any
  // moment every kind of job is running somewhere.
  std::atomic<int> ready{0};
  std::atomic<uint64_t> ops{0};
  std::vector<std::string> errors(n_threads);
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  auto body = [&](size_t t) {
    ready.fetch_add(1);
    while (ready.load() < (int)n_threads) std::this_thread::yield();
    for (size_t r = 0; r < rounds; r++) {
      for (size_t k = 0; k < kNJobs; k++) {
        const size_t j = (t + k) % kNJobs;
        Out o;
        kJobs[j].fn(o, sh);
        ops.fetch_add(1);
        if (errors[t].empty() && (o.failed || o.bytes != ref[j].bytes)) {
          errors[t] = std::string(kJobs[j].name) + " on thread " + std::to_string(t) + ", round " + std::to_string(r) +
                      ": " + (o.failed ? o.why : "output differs from the single-threaded run");
        }
      }
    }
  };
  for (size_t t = 0; t < n_threads; t++) threads.emplace_back(body, t);
  for (std::thread &th : threads) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string &e : errors) EXPECT_TRUE(e.empty()) << e;
  EXPECT_EQ(ops.load(), (uint64_t)(n_threads * rounds * kNJobs));
  printf("concurrency: %zu threads x %zu rounds x %zu jobs = %llu jobs (%zu decode steps each) in %.2f s\n", n_threads,
         rounds, kNJobs, (unsigned long long)ops.load(), sh.steps, secs);
  gb_model_close(sh.m);
}

}  // namespace
