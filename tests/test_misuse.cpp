// test_misuse.cpp — every public function of gearbx.h and gearbx_convert.h
// called the wrong way: NULL pointers, a handle of another kind or one
// already destroyed (in caller memory, where that is detectable), a wrong
// struct_size, values out of range, calls in the wrong state (decode before
// prefill, prefill past the context, after a failed call, double destroy).
// Each case expects its specific status and at least one log line (through
// the object's log callback, or the default sink on stderr when there is no
// object to carry one), and nothing written to out-parameters. Lookups by
// name or by template text answer "unknown" with a status and no line (the
// caller reports it in its own words), as do documented no-ops; after the
// state cases the session must still work. ASan and LeakSanitizer run this
// file in CI (no crash, no leak).
//
// The list of functions comes from the headers at build time (GB_API_LIST,
// see tests/CMakeLists.txt): a function added to a header without cases
// here fails MisuseTable.EveryPublicFunctionHasCases. With GB_MISUSE_TABLE
// set to a path, MisuseTable.Run writes the table (functions x kinds of
// misuse) there as Markdown: docs/RELIABILITY.md carries it.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gearbx_convert.h"
#include "test_util.h"

#ifndef GB_API_LIST
#error "GB_API_LIST (the headers' function names) is defined by tests/CMakeLists.txt"
#endif

namespace {

// ---- log capture -------------------------------------------------------------

struct Lines {
  std::vector<std::string> v;
  static void fn(void *u, gb_log_level, const char *m) { static_cast<Lines *>(u)->v.push_back(m); }
};
Lines g_lines;  // every object below logs here

// stderr into a temporary file for the duration of one call (the default
// sink writes there when no object carries a callback).
class StderrCapture {
 public:
  StderrCapture() {
    fflush(stderr);
    path_ = gbt::temp_dir() + "/misuse_stderr.txt";
    const int fd = open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    saved_ = dup(2);
    dup2(fd, 2);
    close(fd);
  }
  std::string finish() {
    fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    return gbt::slurp(path_);
  }

 private:
  std::string path_;
  int saved_ = -1;
};

// ---- the table -----------------------------------------------------------------

enum Kind { kNull, kHandle, kDestroyed, kStructSize, kRange, kState, kNoop, kKinds };
const char *const kKindNames[kKinds] = {"NULL pointer", "wrong handle", "destroyed handle", "struct_size", "out of range",
                                        "wrong state",  "NULL no-op"};

struct Case {
  const char *fn;
  Kind kind;
  std::string what;
  gb_status want;
  std::function<gb_status()> call;
  bool log = true;  // a log line is required (kNoop: none allowed)
};

constexpr uint32_t kCtx = 24;

class Misuse {
 public:
  gb_model *model = nullptr;
  gb_session *sess = nullptr;      // library memory
  gb_session *dead = nullptr;      // destroyed, in caller memory (still readable)
  gb_tokenizer *tok = nullptr;     // standalone (GGUF vocabulary)
  gb_tokenizer *dead_tok = nullptr;  // closed, in caller memory
  gb_grammar *grammar = nullptr;       // library memory
  gb_grammar *dead_grammar = nullptr;  // destroyed, in caller memory
  std::vector<uint64_t> dead_grammar_mem;
  const gb_tokenizer *model_tok = nullptr;
  std::vector<uint8_t> dead_mem, dead_tok_mem, state;
  std::vector<uint8_t> gbx_image;  // the model file, 64-aligned copy
  void *tok_image = nullptr;
  size_t tok_image_size = 0;
  std::vector<Case> cases;

  gb_model_options model_opts() {
    gb_model_options o;
    gb_model_options_init(&o);
    o.log = Lines::fn;
    o.log_user = &g_lines;
    return o;
  }
  gb_session_options sess_opts() {
    gb_session_options o;
    gb_session_options_init(&o);
    o.n_ctx = kCtx;
    o.gear = GB_GEAR_HIGH;
    o.sampler.temperature = 0.0f;
    o.log = Lines::fn;
    o.log_user = &g_lines;
    return o;
  }
  gb_convert_options conv_opts() {
    gb_convert_options o;
    gb_convert_default_options(&o);
    o.log = Lines::fn;
    o.log_user = &g_lines;
    return o;
  }

  bool setup() {
    gb_model_options mo = model_opts();
    if (gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &model) != GB_OK) return false;
    if (gb_model_tokenizer(model, &model_tok) != GB_OK) return false;
    gb_session_options so = sess_opts();
    if (gb_session_create(model, &so, nullptr, 0, &sess) != GB_OK) return false;
    size_t need = 0;
    if (gb_session_mem_size(model, &so, &need) != GB_OK) return false;
    dead_mem.assign(need + 64, 0);
    void *mem = dead_mem.data() + (64 - (uintptr_t)dead_mem.data() % 64) % 64;
    if (gb_session_create(model, &so, mem, need, &dead) != GB_OK) return false;
    gb_session_destroy(dead);
    gb_convert_options co = conv_opts();
    if (gb_convert_gguf_tokenizer(gbt::shared_path("fixtures/vocab/ggml-vocab-gpt-2.gguf").c_str(), &co, &tok_image,
                                  &tok_image_size) != GB_OK)
      return false;
    gb_model_options to = model_opts();
    if (gb_tokenizer_open_memory(tok_image, tok_image_size, &to, &tok) != GB_OK) return false;
    if (gb_tokenizer_mem_size(tok_image, tok_image_size, &need) != GB_OK) return false;
    dead_tok_mem.assign(need + 64, 0);
    to.mem = dead_tok_mem.data() + (64 - (uintptr_t)dead_tok_mem.data() % 64) % 64;
    to.mem_bytes = need;
    if (gb_tokenizer_open_memory(tok_image, tok_image_size, &to, &dead_tok) != GB_OK) return false;
    gb_tokenizer_close(dead_tok);
    const char gtext[] = "root ::= [a-z]+";
    if (gb_grammar_create(gtext, sizeof gtext - 1, nullptr, nullptr, 0, &grammar) != GB_OK) return false;
    if (gb_grammar_mem_size(gtext, sizeof gtext - 1, nullptr, &need) != GB_OK) return false;
    dead_grammar_mem.assign(need / 8 + 1, 0);
    if (gb_grammar_create(gtext, sizeof gtext - 1, nullptr, dead_grammar_mem.data(), need, &dead_grammar) != GB_OK) return false;
    gb_grammar_destroy(dead_grammar);
    const std::vector<uint8_t> f = gbt::read_file(gbt::stories260k_gbx());
    gbx_image.assign(f.size() + 64, 0);
    memcpy(aligned_image(), f.data(), f.size());
    // A saved state of a fresh session with a prefilled prompt.
    const int32_t p[] = {1, 403};
    if (gb_prefill(sess, p, 2) != GB_OK) return false;
    size_t n = 0;
    if (gb_session_state_size(sess, &n) != GB_OK) return false;
    state.resize(n);
    if (gb_session_state_save(sess, state.data(), n, &n) != GB_OK) return false;
    return gb_session_reset(sess) == GB_OK;
  }
  uint8_t *aligned_image() { return gbx_image.data() + (64 - (uintptr_t)gbx_image.data() % 64) % 64; }
  size_t image_size() const { return gbx_image.size() - 64; }
  ~Misuse() {
    gb_session_destroy(sess);
    gb_tokenizer_close(tok);
    gb_grammar_destroy(grammar);
    gb_model_close(model);
    gb_convert_free(tok_image);
  }

  void add(const char *fn, Kind k, std::string what, gb_status want, std::function<gb_status()> call) {
    cases.push_back(Case{fn, k, std::move(what), want, std::move(call), k != kNoop});
  }
  // A call with no status: returns GB_OK when it did what the contract says,
  // GB_ERR_INTERNAL otherwise (the lambda checks).
  static gb_status ok_if(bool b) { return b ? GB_OK : GB_ERR_INTERNAL; }

  void build();
};

gb_model *as_model(const void *p) { return reinterpret_cast<gb_model *>(const_cast<void *>(p)); }
gb_session *as_session(const void *p) { return reinterpret_cast<gb_session *>(const_cast<void *>(p)); }
gb_tokenizer *as_tok(const void *p) { return reinterpret_cast<gb_tokenizer *>(const_cast<void *>(p)); }

// A block of zeros the size of any handle: "not a handle at all".
alignas(64) uint8_t g_zeros[4096];

void Misuse::build() {
  gb_model *const M = model;
  gb_session *const S = sess;
  const gb_tokenizer *const T = tok;
  const gb_tokenizer *const MT = model_tok;
  const std::string path = gbt::stories260k_gbx();
  static int32_t ids[4] = {1, 403, 407, 2};
  static int32_t out_tokens[64];
  static char buf[256];
  static const char *cstr;
  static size_t n;
  static int flag;
  static uint32_t u32;
  static uint64_t u64;
  static gb_gear gear;
  static gb_kv_policy pol;
  static gb_chat_template ct;
  static const char *const *strings;
  static gb_utf8_stream us;

  // ---- version, names --------------------------------------------------------------
  add("gb_version", kNoop, "no arguments: always the build's version", GB_OK, [] { return ok_if(gb_version() == GB_VERSION_NUMBER); });
  add("gb_version_string", kNoop, "no arguments: never NULL", GB_OK, [] { return ok_if(gb_version_string() != nullptr); });
  // Through a C caller (tests/c_caller.c): C may pass any int as the enum,
  // while loading such a value as gb_status in C++ would itself be UB here.
  add("gb_status_str", kRange, "-1, 12345, INT_MAX: \"unknown status\", not UB", GB_OK, [] {
    bool ok = true;
    for (int v : {-1, 12345, 0x7fffffff}) ok = ok && strcmp(gbt_c_status_str(v), "unknown status") == 0;
    return ok_if(ok);
  });
  cases.back().log = false;
  add("gb_gear_name", kRange, "-1 and 99: \"unknown\"", GB_OK, [] {
    return ok_if(strcmp(gbt_c_gear_name(-1), "unknown") == 0 && strcmp(gbt_c_gear_name(99), "unknown") == 0);
  });
  cases.back().log = false;
  add("gb_gear_from_name", kNull, "name NULL", GB_ERR_NULL_POINTER, [] { return gb_gear_from_name(nullptr, &gear); });
  add("gb_gear_from_name", kNull, "out NULL", GB_ERR_NULL_POINTER, [] { return gb_gear_from_name("low", nullptr); });
  add("gb_gear_from_name", kRange, "unknown name", GB_ERR_INVALID_ARGUMENT, [] { return gb_gear_from_name("turbo", &gear); });
  cases.back().log = false;  // a lookup: the status is the answer, the caller reports it
  add("gb_kv_policy_name", kRange, "-1 and 99: \"unknown\"", GB_OK, [] {
    return ok_if(strcmp(gbt_c_kv_policy_name(-1), "unknown") == 0 && strcmp(gbt_c_kv_policy_name(99), "unknown") == 0);
  });
  cases.back().log = false;
  add("gb_kv_policy_from_name", kNull, "name NULL", GB_ERR_NULL_POINTER, [] { return gb_kv_policy_from_name(nullptr, &pol); });
  add("gb_kv_policy_from_name", kNull, "out NULL", GB_ERR_NULL_POINTER, [] { return gb_kv_policy_from_name("recency", nullptr); });
  add("gb_kv_policy_from_name", kRange, "unknown name", GB_ERR_INVALID_ARGUMENT, [] { return gb_kv_policy_from_name("lru", &pol); });
  cases.back().log = false;  // a lookup: the status is the answer, the caller reports it

  // ---- model -------------------------------------------------------------------------
  add("gb_model_options_init", kNoop, "NULL", GB_OK, [] {
    gb_model_options_init(nullptr);
    return GB_OK;
  });
  add("gb_model_open_file", kNull, "path NULL", GB_ERR_NULL_POINTER, [this] {
    gb_model_options o = model_opts();
    gb_model *m = nullptr;
    return gb_model_open_file(nullptr, &o, &m);
  });
  add("gb_model_open_file", kNull, "out NULL", GB_ERR_NULL_POINTER, [this, path] {
    gb_model_options o = model_opts();
    return gb_model_open_file(path.c_str(), &o, nullptr);
  });
  for (uint32_t size : {0u, 4u, (uint32_t)sizeof(gb_model_options) + 8}) {
    add("gb_model_open_file", kStructSize, "options struct_size " + std::to_string(size), GB_ERR_STRUCT_SIZE, [this, path, size] {
      gb_model_options o = model_opts();
      o.struct_size = size;
      gb_model *m = nullptr;
      return gb_model_open_file(path.c_str(), &o, &m);
    });
  }
  add("gb_model_open_file", kRange, "verify mode 7", GB_ERR_INVALID_ARGUMENT, [this, path] {
    gb_model_options o = model_opts();
    memset(&o.verify, 7, 1);
    gb_model *m = nullptr;
    return gb_model_open_file(path.c_str(), &o, &m);
  });
  add("gb_model_open_file", kRange, "log level -1", GB_ERR_INVALID_ARGUMENT, [this, path] {
    gb_model_options o = model_opts();
    const int32_t v = -1;
    memcpy(&o.log_level, &v, 4);
    gb_model *m = nullptr;
    return gb_model_open_file(path.c_str(), &o, &m);
  });
  add("gb_model_open_file", kRange, "load mode 5", GB_ERR_INVALID_ARGUMENT, [this, path] {
    gb_model_options o = model_opts();
    const int32_t v = 5;
    memcpy(&o.load, &v, 4);
    gb_model *m = nullptr;
    return gb_model_open_file(path.c_str(), &o, &m);
  });
  add("gb_model_open_file", kRange, "a directory", GB_ERR_IO, [this] {
    gb_model_options o = model_opts();
    gb_model *m = nullptr;
    return gb_model_open_file(gbt::temp_dir().c_str(), &o, &m);
  });
  add("gb_model_open_file", kRange, "caller mem misaligned", GB_ERR_ALIGNMENT, [this, path] {
    gb_model_options o = model_opts();
    o.mem = g_zeros + 8;
    o.mem_bytes = 1000;
    gb_model *m = nullptr;
    return gb_model_open_file(path.c_str(), &o, &m);
  });
  add("gb_model_open_file", kRange, "caller mem too small", GB_ERR_ARENA_TOO_SMALL, [this, path] {
    gb_model_options o = model_opts();
    o.mem = g_zeros;
    o.mem_bytes = 64;
    gb_model *m = nullptr;
    return gb_model_open_file(path.c_str(), &o, &m);
  });
  add("gb_model_open_memory", kNull, "data NULL", GB_ERR_NULL_POINTER, [this] {
    gb_model_options o = model_opts();
    gb_model *m = nullptr;
    return gb_model_open_memory(nullptr, 100, &o, &m);
  });
  add("gb_model_open_memory", kNull, "out NULL", GB_ERR_NULL_POINTER, [this] {
    gb_model_options o = model_opts();
    return gb_model_open_memory(aligned_image(), image_size(), &o, nullptr);
  });
  add("gb_model_open_memory", kRange, "data misaligned", GB_ERR_ALIGNMENT, [this] {
    gb_model_options o = model_opts();
    gb_model *m = nullptr;
    return gb_model_open_memory(aligned_image() + 4, image_size() - 4, &o, &m);
  });
  add("gb_model_open_memory", kRange, "size 0", GB_ERR_TRUNCATED, [this] {
    gb_model_options o = model_opts();
    gb_model *m = nullptr;
    return gb_model_open_memory(aligned_image(), 0, &o, &m);
  });
  add("gb_model_open_memory", kStructSize, "options struct_size 1", GB_ERR_STRUCT_SIZE, [this] {
    gb_model_options o = model_opts();
    o.struct_size = 1;
    gb_model *m = nullptr;
    return gb_model_open_memory(aligned_image(), image_size(), &o, &m);
  });
  add("gb_model_mem_size", kNull, "data NULL", GB_ERR_NULL_POINTER, [] { return gb_model_mem_size(nullptr, 10, nullptr, &n); });
  add("gb_model_mem_size", kNull, "out NULL", GB_ERR_NULL_POINTER, [this] { return gb_model_mem_size(aligned_image(), image_size(), nullptr, nullptr); });
  add("gb_model_mem_size", kRange, "not a model", GB_ERR_BAD_MAGIC, [] { return gb_model_mem_size(g_zeros, sizeof g_zeros, nullptr, &n); });
  add("gb_model_mem_size", kStructSize, "options struct_size 0", GB_ERR_STRUCT_SIZE, [this] {
    gb_model_options o = model_opts();
    o.struct_size = 0;
    return gb_model_mem_size(aligned_image(), image_size(), &o, &n);
  });
  add("gb_model_get_info", kNull, "model NULL", GB_ERR_NULL_POINTER, [] {
    gb_model_info i;
    i.struct_size = sizeof i;
    return gb_model_get_info(nullptr, &i);
  });
  add("gb_model_get_info", kNull, "info NULL", GB_ERR_NULL_POINTER, [M] { return gb_model_get_info(M, nullptr); });
  add("gb_model_get_info", kHandle, "a session as the model", GB_ERR_BAD_HANDLE, [S] {
    gb_model_info i;
    i.struct_size = sizeof i;
    return gb_model_get_info(as_model(S), &i);
  });
  add("gb_model_get_info", kHandle, "zeros as the model", GB_ERR_BAD_HANDLE, [] {
    gb_model_info i;
    i.struct_size = sizeof i;
    return gb_model_get_info(as_model(g_zeros), &i);
  });
  for (uint32_t size : {0u, 8u, (uint32_t)sizeof(gb_model_info) + 4}) {
    add("gb_model_get_info", kStructSize, "struct_size " + std::to_string(size), GB_ERR_STRUCT_SIZE, [M, size] {
      gb_model_info i;
      memset(&i, 0xAB, sizeof i);
      i.struct_size = size;
      const gb_status st = gb_model_get_info(M, &i);
      return i.dim == 0xABABABABu ? st : GB_ERR_INTERNAL;  // nothing written
    });
  }
  add("gb_model_verify", kNull, "model NULL", GB_ERR_NULL_POINTER, [] { return gb_model_verify(nullptr); });
  add("gb_model_verify", kHandle, "a tokenizer as the model", GB_ERR_BAD_HANDLE, [T] { return gb_model_verify(as_model(T)); });
  add("gb_model_close", kNoop, "NULL", GB_OK, [] {
    gb_model_close(nullptr);
    return GB_OK;
  });
  add("gb_model_close", kHandle, "a session as the model: refused, nothing freed", GB_OK, [S] {
    gb_model_close(as_model(S));
    return GB_OK;
  });
  add("gb_model_tokenizer", kNull, "model NULL", GB_ERR_NULL_POINTER, [] {
    const gb_tokenizer *t;
    return gb_model_tokenizer(nullptr, &t);
  });
  add("gb_model_tokenizer", kNull, "out NULL", GB_ERR_NULL_POINTER, [M] { return gb_model_tokenizer(M, nullptr); });
  add("gb_model_tokenizer", kHandle, "a tokenizer as the model", GB_ERR_BAD_HANDLE, [T] {
    const gb_tokenizer *t;
    return gb_model_tokenizer(as_model(T), &t);
  });

  // ---- tokenizer ---------------------------------------------------------------------
  add("gb_tokenizer_mem_size", kNull, "image NULL", GB_ERR_NULL_POINTER, [] { return gb_tokenizer_mem_size(nullptr, 10, &n); });
  add("gb_tokenizer_mem_size", kNull, "out NULL", GB_ERR_NULL_POINTER, [this] { return gb_tokenizer_mem_size(tok_image, tok_image_size, nullptr); });
  add("gb_tokenizer_mem_size", kRange, "not an image", GB_ERR_BAD_MAGIC, [] { return gb_tokenizer_mem_size(g_zeros, 256, &n); });
  add("gb_tokenizer_open_memory", kNull, "image NULL", GB_ERR_NULL_POINTER, [] {
    gb_tokenizer *t;
    return gb_tokenizer_open_memory(nullptr, 10, nullptr, &t);
  });
  add("gb_tokenizer_open_memory", kNull, "out NULL", GB_ERR_NULL_POINTER, [this] {
    return gb_tokenizer_open_memory(tok_image, tok_image_size, nullptr, nullptr);
  });
  add("gb_tokenizer_open_memory", kStructSize, "options struct_size 3", GB_ERR_STRUCT_SIZE, [this] {
    gb_model_options o = model_opts();
    o.struct_size = 3;
    gb_tokenizer *t;
    return gb_tokenizer_open_memory(tok_image, tok_image_size, &o, &t);
  });
  add("gb_tokenizer_open_memory", kRange, "truncated image", GB_ERR_TRUNCATED, [this] {
    gb_tokenizer *t;
    gb_model_options o = model_opts();
    return gb_tokenizer_open_memory(tok_image, 40, &o, &t);
  });
  add("gb_tokenizer_open_memory", kRange, "caller mem too small", GB_ERR_ARENA_TOO_SMALL, [this] {
    gb_model_options o = model_opts();
    o.mem = g_zeros;
    o.mem_bytes = 64;
    gb_tokenizer *t;
    return gb_tokenizer_open_memory(tok_image, tok_image_size, &o, &t);
  });
  add("gb_tokenizer_close", kNoop, "NULL", GB_OK, [] {
    gb_tokenizer_close(nullptr);
    return GB_OK;
  });
  add("gb_tokenizer_close", kHandle, "the model's own tokenizer: refused, nothing freed", GB_OK, [MT] {
    gb_tokenizer_close(const_cast<gb_tokenizer *>(MT));
    return GB_OK;
  });
  add("gb_tokenizer_close", kDestroyed, "closed twice (caller memory)", GB_OK, [this] {
    gb_tokenizer_close(dead_tok);
    return GB_OK;
  });
  add("gb_tokenizer_close", kHandle, "a model as the tokenizer", GB_OK, [M] {
    gb_tokenizer_close(as_tok(M));
    return GB_OK;
  });
  add("gb_tokenizer_get_info", kNull, "tok NULL", GB_ERR_NULL_POINTER, [] {
    gb_tokenizer_info i;
    i.struct_size = sizeof i;
    return gb_tokenizer_get_info(nullptr, &i);
  });
  add("gb_tokenizer_get_info", kNull, "info NULL", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_get_info(T, nullptr); });
  add("gb_tokenizer_get_info", kStructSize, "struct_size 2", GB_ERR_STRUCT_SIZE, [T] {
    gb_tokenizer_info i;
    i.struct_size = 2;
    return gb_tokenizer_get_info(T, &i);
  });
  add("gb_tokenizer_get_info", kHandle, "a session as the tokenizer", GB_ERR_BAD_HANDLE, [S] {
    gb_tokenizer_info i;
    i.struct_size = sizeof i;
    return gb_tokenizer_get_info(as_tok(S), &i);
  });
  add("gb_tokenizer_get_info", kDestroyed, "closed (caller memory)", GB_ERR_BAD_HANDLE, [this] {
    gb_tokenizer_info i;
    i.struct_size = sizeof i;
    return gb_tokenizer_get_info(dead_tok, &i);
  });
  add("gb_tokenizer_encode", kNull, "tok NULL", GB_ERR_NULL_POINTER, [] { return gb_tokenizer_encode(nullptr, "a", 1, 0, out_tokens, 64, &n); });
  add("gb_tokenizer_encode", kNull, "n_tokens NULL", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_encode(T, "a", 1, 0, out_tokens, 64, nullptr); });
  add("gb_tokenizer_encode", kNull, "text NULL with len 3", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_encode(T, nullptr, 3, 0, out_tokens, 64, &n); });
  add("gb_tokenizer_encode", kNull, "tokens NULL with cap 8", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_encode(T, "a", 1, 0, nullptr, 8, &n); });
  add("gb_tokenizer_encode", kRange, "unknown flags", GB_ERR_INVALID_ARGUMENT, [T] { return gb_tokenizer_encode(T, "a", 1, 1u << 30, out_tokens, 64, &n); });
  add("gb_tokenizer_encode", kRange, "PARSE_SPECIAL on a llama2.c vocabulary", GB_ERR_UNAVAILABLE, [MT] {
    return gb_tokenizer_encode(MT, "a", 1, GB_TOKENIZE_PARSE_SPECIAL, out_tokens, 64, &n);
  });
  add("gb_tokenizer_encode", kHandle, "a model as the tokenizer", GB_ERR_BAD_HANDLE, [M] { return gb_tokenizer_encode(as_tok(M), "a", 1, 0, out_tokens, 64, &n); });
  add("gb_tokenizer_encode", kDestroyed, "closed (caller memory)", GB_ERR_BAD_HANDLE, [this] { return gb_tokenizer_encode(dead_tok, "a", 1, 0, out_tokens, 64, &n); });
  add("gb_tokenizer_token_text", kNull, "tok NULL", GB_ERR_NULL_POINTER, [] { return gb_tokenizer_token_text(nullptr, -1, 5, &cstr, &n); });
  add("gb_tokenizer_token_text", kNull, "out NULL", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_token_text(T, -1, 5, nullptr, &n); });
  add("gb_tokenizer_token_text", kRange, "token -1", GB_ERR_TOKEN_OUT_OF_RANGE, [T] { return gb_tokenizer_token_text(T, -1, -1, &cstr, &n); });
  add("gb_tokenizer_token_text", kRange, "token = n_tokens (llama2.c)", GB_ERR_TOKEN_OUT_OF_RANGE, [MT] { return gb_tokenizer_token_text(MT, -1, 512, &cstr, &n); });
  add("gb_tokenizer_token_text", kHandle, "zeros as the tokenizer", GB_ERR_BAD_HANDLE, [] { return gb_tokenizer_token_text(as_tok(g_zeros), -1, 5, &cstr, &n); });
  add("gb_tokenizer_decode", kNull, "tok NULL", GB_ERR_NULL_POINTER, [] { return gb_tokenizer_decode(nullptr, ids, 2, 0, buf, sizeof buf, &n); });
  add("gb_tokenizer_decode", kNull, "ids NULL with n 2", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_decode(T, nullptr, 2, 0, buf, sizeof buf, &n); });
  add("gb_tokenizer_decode", kNull, "buf NULL with cap 10", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_decode(T, ids, 2, 0, nullptr, 10, &n); });
  add("gb_tokenizer_decode", kNull, "n_out NULL", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_decode(T, ids, 2, 0, buf, sizeof buf, nullptr); });
  add("gb_tokenizer_decode", kRange, "unknown flags", GB_ERR_INVALID_ARGUMENT, [T] { return gb_tokenizer_decode(T, ids, 2, 64, buf, sizeof buf, &n); });
  add("gb_tokenizer_decode", kRange, "token out of range", GB_ERR_TOKEN_OUT_OF_RANGE, [T] {
    static const int32_t bad[2] = {5, 1 << 30};
    return gb_tokenizer_decode(T, bad, 2, 0, buf, sizeof buf, &n);
  });
  add("gb_tokenizer_decode", kRange, "token out of range (llama2.c)", GB_ERR_TOKEN_OUT_OF_RANGE, [MT] {
    static const int32_t bad[2] = {5, -3};
    return gb_tokenizer_decode(MT, bad, 2, 0, buf, sizeof buf, &n);
  });
  add("gb_tokenizer_decode", kHandle, "a session as the tokenizer", GB_ERR_BAD_HANDLE, [S] { return gb_tokenizer_decode(as_tok(S), ids, 2, 0, buf, sizeof buf, &n); });
  add("gb_tokenizer_is_eog", kNull, "tok NULL", GB_ERR_NULL_POINTER, [] { return gb_tokenizer_is_eog(nullptr, 2, &flag); });
  add("gb_tokenizer_is_eog", kNull, "out NULL", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_is_eog(T, 2, nullptr); });
  add("gb_tokenizer_is_eog", kRange, "token -5", GB_ERR_TOKEN_OUT_OF_RANGE, [T] { return gb_tokenizer_is_eog(T, -5, &flag); });
  add("gb_tokenizer_is_eog", kHandle, "a model as the tokenizer", GB_ERR_BAD_HANDLE, [M] { return gb_tokenizer_is_eog(as_tok(M), 2, &flag); });
  add("gb_tokenizer_chat_template", kNull, "tok NULL", GB_ERR_NULL_POINTER, [] { return gb_tokenizer_chat_template(nullptr, &cstr, &n); });
  add("gb_tokenizer_chat_template", kNull, "len NULL", GB_ERR_NULL_POINTER, [T] { return gb_tokenizer_chat_template(T, &cstr, nullptr); });
  add("gb_tokenizer_chat_template", kState, "a vocabulary without a template", GB_ERR_UNAVAILABLE, [MT] { return gb_tokenizer_chat_template(MT, &cstr, &n); });
  add("gb_tokenizer_chat_template", kDestroyed, "closed (caller memory)", GB_ERR_BAD_HANDLE, [this] { return gb_tokenizer_chat_template(dead_tok, &cstr, &n); });
  add("gb_tokenize", kNull, "model NULL", GB_ERR_NULL_POINTER, [] { return gb_tokenize(nullptr, "a", 1, 0, out_tokens, 64, &n); });
  add("gb_tokenize", kNull, "n_tokens NULL", GB_ERR_NULL_POINTER, [M] { return gb_tokenize(M, "a", 1, 0, out_tokens, 64, nullptr); });
  add("gb_tokenize", kNull, "text NULL with len 2", GB_ERR_NULL_POINTER, [M] { return gb_tokenize(M, nullptr, 2, 0, out_tokens, 64, &n); });
  add("gb_tokenize", kRange, "unknown flags", GB_ERR_INVALID_ARGUMENT, [M] { return gb_tokenize(M, "a", 1, 1u << 20, out_tokens, 64, &n); });
  add("gb_tokenize", kHandle, "a tokenizer as the model", GB_ERR_BAD_HANDLE, [T] { return gb_tokenize(as_model(T), "a", 1, 0, out_tokens, 64, &n); });
  add("gb_token_to_text", kNull, "model NULL", GB_ERR_NULL_POINTER, [] { return gb_token_to_text(nullptr, -1, 5, &cstr, &n); });
  add("gb_token_to_text", kNull, "len NULL", GB_ERR_NULL_POINTER, [M] { return gb_token_to_text(M, -1, 5, &cstr, nullptr); });
  add("gb_token_to_text", kRange, "token 512 of 512", GB_ERR_TOKEN_OUT_OF_RANGE, [M] { return gb_token_to_text(M, -1, 512, &cstr, &n); });
  add("gb_token_to_text", kHandle, "a session as the model", GB_ERR_BAD_HANDLE, [S] { return gb_token_to_text(as_model(S), -1, 5, &cstr, &n); });

  // ---- session -------------------------------------------------------------------------
  add("gb_session_options_init", kNoop, "NULL", GB_OK, [] {
    gb_session_options_init(nullptr);
    return GB_OK;
  });
  add("gb_session_experimental_init", kNoop, "NULL", GB_OK, [] {
    gb_session_experimental_init(nullptr);
    return GB_OK;
  });
  add("gb_session_mem_size", kStructSize, "experimental struct_size 0", GB_ERR_STRUCT_SIZE, [this, M] {
    gb_session_options o;
    gb_session_options_init(&o);
    gb_session_experimental x;
    gb_session_experimental_init(&x);
    x.struct_size = 0;
    o.experimental = &x;
    return gb_session_mem_size(M, &o, &n);
  });
  add("gb_session_create", kStructSize, "experimental struct_size larger than the struct", GB_ERR_STRUCT_SIZE, [this, M] {
    gb_session_options o;
    gb_session_options_init(&o);
    gb_session_experimental x;
    gb_session_experimental_init(&x);
    x.struct_size = sizeof x + 4;
    o.experimental = &x;
    gb_session *s = nullptr;
    return gb_session_create(M, &o, nullptr, 0, &s);
  });
  add("gb_session_mem_size", kNull, "model NULL", GB_ERR_NULL_POINTER, [] { return gb_session_mem_size(nullptr, nullptr, &n); });
  add("gb_session_mem_size", kNull, "out NULL", GB_ERR_NULL_POINTER, [M] { return gb_session_mem_size(M, nullptr, nullptr); });
  add("gb_session_mem_size", kHandle, "a session as the model", GB_ERR_BAD_HANDLE, [S] { return gb_session_mem_size(as_model(S), nullptr, &n); });
  add("gb_session_mem_size", kStructSize, "options struct_size 0", GB_ERR_STRUCT_SIZE, [this, M] {
    gb_session_options o = sess_opts();
    o.struct_size = 0;
    return gb_session_mem_size(M, &o, &n);
  });
  add("gb_session_mem_size", kRange, "gear 42", GB_ERR_INVALID_ARGUMENT, [this, M] {
    gb_session_options o = sess_opts();
    const int32_t v = 42;
    memcpy(&o.gear, &v, 4);
    return gb_session_mem_size(M, &o, &n);
  });
  add("gb_session_mem_size", kRange, "temperature -1", GB_ERR_INVALID_ARGUMENT, [this, M] {
    gb_session_options o = sess_opts();
    o.sampler.temperature = -1.0f;
    return gb_session_mem_size(M, &o, &n);
  });
  add("gb_session_create", kNull, "model NULL", GB_ERR_NULL_POINTER, [this] {
    gb_session_options o = sess_opts();
    gb_session *s;
    return gb_session_create(nullptr, &o, nullptr, 0, &s);
  });
  add("gb_session_create", kNull, "out NULL", GB_ERR_NULL_POINTER, [this, M] {
    gb_session_options o = sess_opts();
    return gb_session_create(M, &o, nullptr, 0, nullptr);
  });
  add("gb_session_create", kHandle, "a tokenizer as the model", GB_ERR_BAD_HANDLE, [this, T] {
    gb_session_options o = sess_opts();
    gb_session *s;
    return gb_session_create(as_model(T), &o, nullptr, 0, &s);
  });
  add("gb_session_create", kStructSize, "options struct_size larger than the struct", GB_ERR_STRUCT_SIZE, [this, M] {
    gb_session_options o = sess_opts();
    o.struct_size = sizeof o + 16;
    gb_session *s;
    return gb_session_create(M, &o, nullptr, 0, &s);
  });
  add("gb_session_create", kRange, "n_ctx above the model's", GB_ERR_INVALID_ARGUMENT, [this, M] {
    gb_session_options o = sess_opts();
    o.n_ctx = 1u << 30;
    gb_session *s;
    return gb_session_create(M, &o, nullptr, 0, &s);
  });
  add("gb_session_create", kRange, "caller memory too small", GB_ERR_ARENA_TOO_SMALL, [this, M] {
    gb_session_options o = sess_opts();
    gb_session *s;
    return gb_session_create(M, &o, g_zeros, 128, &s);
  });
  add("gb_session_create", kRange, "caller memory misaligned", GB_ERR_ALIGNMENT, [this, M] {
    gb_session_options o = sess_opts();
    gb_session *s;
    return gb_session_create(M, &o, g_zeros + 4, sizeof g_zeros - 4, &s);
  });
  add("gb_session_reset", kNull, "NULL", GB_ERR_NULL_POINTER, [] { return gb_session_reset(nullptr); });
  add("gb_session_reset", kHandle, "a model as the session", GB_ERR_BAD_HANDLE, [M] { return gb_session_reset(as_session(M)); });
  add("gb_session_reset", kDestroyed, "destroyed (caller memory)", GB_ERR_BAD_HANDLE, [this] { return gb_session_reset(dead); });
  add("gb_session_destroy", kNoop, "NULL", GB_OK, [] {
    gb_session_destroy(nullptr);
    return GB_OK;
  });
  add("gb_session_destroy", kDestroyed, "destroyed twice (caller memory)", GB_OK, [this] {
    gb_session_destroy(dead);
    return GB_OK;
  });
  add("gb_session_destroy", kHandle, "a model as the session: refused, nothing freed", GB_OK, [M] {
    gb_session_destroy(as_session(M));
    return GB_OK;
  });
  add("gb_prefill", kNull, "session NULL", GB_ERR_NULL_POINTER, [] { return gb_prefill(nullptr, ids, 2); });
  add("gb_prefill", kNull, "tokens NULL", GB_ERR_NULL_POINTER, [S] { return gb_prefill(S, nullptr, 2); });
  add("gb_prefill", kRange, "no tokens", GB_ERR_INVALID_ARGUMENT, [S] { return gb_prefill(S, ids, 0); });
  add("gb_prefill", kRange, "token out of range", GB_ERR_TOKEN_OUT_OF_RANGE, [S] {
    static const int32_t bad[3] = {1, 9999, 5};
    return gb_prefill(S, bad, 3);
  });
  add("gb_prefill", kState, "past the context", GB_ERR_CONTEXT_FULL, [S] {
    static int32_t many[kCtx + 4];
    for (auto &t : many) t = 5;
    return gb_prefill(S, many, kCtx + 4);
  });
  add("gb_prefill", kHandle, "a tokenizer as the session", GB_ERR_BAD_HANDLE, [T] { return gb_prefill(as_session(T), ids, 2); });
  add("gb_prefill", kDestroyed, "destroyed (caller memory)", GB_ERR_BAD_HANDLE, [this] { return gb_prefill(dead, ids, 2); });
  add("gb_decode_step", kNull, "session NULL", GB_ERR_NULL_POINTER, [] { return gb_decode_step(nullptr, out_tokens, nullptr); });
  add("gb_decode_step", kState, "before any prefill", GB_ERR_BAD_STATE, [S] { return gb_decode_step(S, out_tokens, nullptr); });
  for (uint32_t size : {0u, 12u, (uint32_t)sizeof(gb_step_info) + 4}) {
    add("gb_decode_step", kStructSize, "info struct_size " + std::to_string(size), GB_ERR_STRUCT_SIZE, [S, size] {
      gb_step_info i;
      memset(&i, 0xCD, sizeof i);
      i.struct_size = size;
      const gb_status st = gb_decode_step(S, out_tokens, &i);
      return i.pos == 0xCDCDCDCDu ? st : GB_ERR_INTERNAL;
    });
  }
  add("gb_decode_step", kHandle, "a model as the session", GB_ERR_BAD_HANDLE, [M] { return gb_decode_step(as_session(M), out_tokens, nullptr); });
  add("gb_decode_step", kDestroyed, "destroyed (caller memory)", GB_ERR_BAD_HANDLE, [this] { return gb_decode_step(dead, out_tokens, nullptr); });
  add("gb_feed", kNull, "session NULL", GB_ERR_NULL_POINTER, [] { return gb_feed(nullptr, 5, nullptr); });
  add("gb_feed", kRange, "token -1", GB_ERR_TOKEN_OUT_OF_RANGE, [S] { return gb_feed(S, -1, nullptr); });
  add("gb_feed", kStructSize, "info struct_size 1", GB_ERR_STRUCT_SIZE, [S] {
    gb_step_info i;
    i.struct_size = 1;
    return gb_feed(S, 5, &i);
  });
  add("gb_feed", kHandle, "zeros as the session", GB_ERR_BAD_HANDLE, [] { return gb_feed(as_session(g_zeros), 5, nullptr); });
  add("gb_classify_prompt", kNull, "text NULL with len 5: scored as empty text", GB_OK, [] {
    float a = -1, b = -2;
    const gb_gear g = gb_classify_prompt(nullptr, 5, nullptr, &a), h = gb_classify_prompt("", 0, nullptr, &b);
    return ok_if(g == h && a == b);
  });
  add("gb_session_set_gear", kNull, "NULL", GB_ERR_NULL_POINTER, [] { return gb_session_set_gear(nullptr, GB_GEAR_LOW); });
  add("gb_session_set_gear", kState, "a fixed-gear session", GB_ERR_BAD_STATE, [S] { return gb_session_set_gear(S, GB_GEAR_LOW); });
  add("gb_session_set_gear", kHandle, "a model as the session", GB_ERR_BAD_HANDLE, [M] { return gb_session_set_gear(as_session(M), GB_GEAR_LOW); });
  add("gb_kv_pool_size", kNull, "model NULL", GB_ERR_NULL_POINTER, [] { return gb_kv_pool_size(nullptr, nullptr, &u64, &u32); });
  add("gb_kv_pool_size", kHandle, "a session as the model", GB_ERR_BAD_HANDLE, [S] { return gb_kv_pool_size(as_model(S), nullptr, &u64, &u32); });
  add("gb_kv_pool_size", kStructSize, "options struct_size 7", GB_ERR_STRUCT_SIZE, [this, M] {
    gb_session_options o = sess_opts();
    o.struct_size = 7;
    return gb_kv_pool_size(M, &o, &u64, &u32);
  });
  add("gb_session_state_size", kNull, "session NULL", GB_ERR_NULL_POINTER, [] { return gb_session_state_size(nullptr, &n); });
  add("gb_session_state_size", kNull, "out NULL", GB_ERR_NULL_POINTER, [S] { return gb_session_state_size(S, nullptr); });
  add("gb_session_state_size", kHandle, "a model as the session", GB_ERR_BAD_HANDLE, [M] { return gb_session_state_size(as_session(M), &n); });
  add("gb_session_state_max_size", kNull, "session NULL", GB_ERR_NULL_POINTER, [] { return gb_session_state_max_size(nullptr, &n); });
  add("gb_session_state_max_size", kNull, "out NULL", GB_ERR_NULL_POINTER, [S] { return gb_session_state_max_size(S, nullptr); });
  add("gb_session_state_max_size", kDestroyed, "destroyed (caller memory)", GB_ERR_BAD_HANDLE, [this] { return gb_session_state_max_size(dead, &n); });
  add("gb_session_state_save", kNull, "session NULL", GB_ERR_NULL_POINTER, [] { return gb_session_state_save(nullptr, buf, sizeof buf, &n); });
  add("gb_session_state_save", kNull, "buf NULL with cap 10", GB_ERR_NULL_POINTER, [S] { return gb_session_state_save(S, nullptr, 10, &n); });
  add("gb_session_state_save", kNull, "n_out NULL", GB_ERR_NULL_POINTER, [S] { return gb_session_state_save(S, buf, sizeof buf, nullptr); });
  add("gb_session_state_save", kHandle, "a tokenizer as the session", GB_ERR_BAD_HANDLE, [T] { return gb_session_state_save(as_session(T), buf, sizeof buf, &n); });
  add("gb_session_state_load", kNull, "session NULL", GB_ERR_NULL_POINTER, [this] { return gb_session_state_load(nullptr, state.data(), state.size()); });
  add("gb_session_state_load", kNull, "buf NULL", GB_ERR_NULL_POINTER, [S] { return gb_session_state_load(S, nullptr, 100); });
  add("gb_session_state_load", kRange, "not a state image", GB_ERR_BAD_MAGIC, [S] { return gb_session_state_load(S, g_zeros, 512); });
  add("gb_session_state_load", kRange, "truncated image", GB_ERR_TRUNCATED, [this, S] { return gb_session_state_load(S, state.data(), state.size() / 2); });
  add("gb_session_state_load", kHandle, "a model as the session", GB_ERR_BAD_HANDLE, [this, M] { return gb_session_state_load(as_session(M), state.data(), state.size()); });
  add("gb_session_state_load", kDestroyed, "destroyed (caller memory)", GB_ERR_BAD_HANDLE, [this] { return gb_session_state_load(dead, state.data(), state.size()); });
  add("gb_session_position", kNull, "session NULL", GB_ERR_NULL_POINTER, [] { return gb_session_position(nullptr, &u32, &u32); });
  add("gb_session_position", kHandle, "a model as the session", GB_ERR_BAD_HANDLE, [M] { return gb_session_position(as_session(M), &u32, &u32); });
  add("gb_plan", kNull, "model NULL", GB_ERR_NULL_POINTER, [this] {
    gb_session_options o = sess_opts();
    return gb_plan(nullptr, 1 << 20, 64, &o, nullptr);
  });
  add("gb_plan", kNull, "opts NULL", GB_ERR_NULL_POINTER, [M] { return gb_plan(M, 1 << 20, 64, nullptr, nullptr); });
  add("gb_plan", kHandle, "a session as the model", GB_ERR_BAD_HANDLE, [this, S] {
    gb_session_options o = sess_opts();
    return gb_plan(as_model(S), 1 << 20, 64, &o, nullptr);
  });
  add("gb_plan", kStructSize, "report struct_size 3", GB_ERR_STRUCT_SIZE, [this, M] {
    gb_session_options o = sess_opts();
    gb_plan_report r;
    r.struct_size = 3;
    return gb_plan(M, 1 << 20, 64, &o, &r);
  });
  add("gb_plan", kStructSize, "options struct_size 0", GB_ERR_STRUCT_SIZE, [this, M] {
    gb_session_options o = sess_opts();
    o.struct_size = 0;
    return gb_plan(M, 1 << 20, 64, &o, nullptr);
  });
  add("gb_plan", kRange, "budget 0", GB_ERR_INVALID_ARGUMENT, [this, M] {
    gb_session_options o = sess_opts();
    return gb_plan(M, 0, 64, &o, nullptr);
  });
  add("gb_plan", kRange, "budget 1 KiB: nothing fits", GB_ERR_BUDGET_EXCEEDED, [this, M] {
    gb_session_options o = sess_opts();
    return gb_plan(M, 1024, 64, &o, nullptr);
  });

  // ---- chat, UTF-8 stream -------------------------------------------------------------
  add("gb_chat_template_name", kRange, "-1 and 1000: \"unknown\"", GB_OK, [] {
    return ok_if(strcmp(gbt_c_chat_template_name(-1), "unknown") == 0 && strcmp(gbt_c_chat_template_name(1000), "unknown") == 0);
  });
  cases.back().log = false;
  add("gb_chat_template_from_name", kNull, "name NULL", GB_ERR_NULL_POINTER, [] { return gb_chat_template_from_name(nullptr, &ct); });
  add("gb_chat_template_from_name", kNull, "out NULL", GB_ERR_NULL_POINTER, [] { return gb_chat_template_from_name("chatml", nullptr); });
  add("gb_chat_template_from_name", kRange, "unknown name", GB_ERR_INVALID_ARGUMENT, [] { return gb_chat_template_from_name("klingon", &ct); });
  cases.back().log = false;  // a lookup: the status is the answer, the caller reports it
  add("gb_chat_template_detect", kNull, "out NULL", GB_ERR_NULL_POINTER, [] { return gb_chat_template_detect("x", 1, nullptr); });
  add("gb_chat_template_detect", kNull, "text NULL with len 4", GB_ERR_NULL_POINTER, [] { return gb_chat_template_detect(nullptr, 4, &ct); });
  add("gb_chat_template_detect", kRange, "text that is no known template", GB_ERR_UNAVAILABLE, [] { return gb_chat_template_detect("{{ hello }}", 11, &ct); });
  cases.back().log = false;  // a lookup: the status is the answer, the caller reports it
  static const gb_chat_message msgs[2] = {{"user", "hi"}, {"assistant", "hello"}};
  add("gb_chat_apply", kNull, "msgs NULL", GB_ERR_NULL_POINTER, [] { return gb_chat_apply(GB_CHAT_TEMPLATE_CHATML, nullptr, 2, 1, buf, sizeof buf, &n); });
  add("gb_chat_apply", kNull, "n_out NULL", GB_ERR_NULL_POINTER, [] { return gb_chat_apply(GB_CHAT_TEMPLATE_CHATML, msgs, 2, 1, buf, sizeof buf, nullptr); });
  add("gb_chat_apply", kNull, "a role NULL", GB_ERR_NULL_POINTER, [] {
    static const gb_chat_message bad[1] = {{nullptr, "x"}};
    return gb_chat_apply(GB_CHAT_TEMPLATE_CHATML, bad, 1, 1, buf, sizeof buf, &n);
  });
  add("gb_chat_apply", kRange, "template -3", GB_ERR_INVALID_ARGUMENT, [] { return gbt_c_chat_apply(-3, msgs, 2, 1, buf, sizeof buf, &n); });
  add("gb_chat_apply", kRange, "n 0", GB_ERR_INVALID_ARGUMENT, [] { return gb_chat_apply(GB_CHAT_TEMPLATE_CHATML, msgs, 0, 1, buf, sizeof buf, &n); });
  add("gb_chat_apply", kRange, "unknown role", GB_ERR_INVALID_ARGUMENT, [] {
    static const gb_chat_message bad[1] = {{"wizard", "x"}};
    return gb_chat_apply(GB_CHAT_TEMPLATE_CHATML, bad, 1, 1, buf, sizeof buf, &n);
  });
  add("gb_chat_options_init", kNoop, "NULL", GB_OK, [] {
    gb_chat_options_init(nullptr);
    return GB_OK;
  });
  add("gb_chat_apply_ex", kNull, "msgs NULL", GB_ERR_NULL_POINTER, [] { return gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, nullptr, 2, nullptr, buf, sizeof buf, &n); });
  add("gb_chat_apply_ex", kNull, "n_out NULL", GB_ERR_NULL_POINTER, [] { return gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 2, nullptr, buf, sizeof buf, nullptr); });
  add("gb_chat_apply_ex", kStructSize, "struct_size 3", GB_ERR_STRUCT_SIZE, [] {
    gb_chat_options o;
    gb_chat_options_init(&o);
    o.struct_size = 3;
    return gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 2, &o, buf, sizeof buf, &n);
  });
  add("gb_chat_apply_ex", kRange, "thinking 2", GB_ERR_INVALID_ARGUMENT, [] {
    gb_chat_options o;
    gb_chat_options_init(&o);
    o.thinking = 2;
    return gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 2, &o, buf, sizeof buf, &n);
  });
  add("gb_chat_apply_ex", kRange, "tools not JSON", GB_ERR_SYNTAX, [] {
    gb_chat_options o;
    gb_chat_options_init(&o);
    o.tools = "[{";
    o.tools_len = 2;
    return gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 2, &o, buf, sizeof buf, &n);
  });
  add("gb_chat_apply_ex", kRange, "a tool without a name", GB_ERR_INVALID_ARGUMENT, [] {
    gb_chat_options o;
    gb_chat_options_init(&o);
    o.tools = "[{}]";
    o.tools_len = 4;
    return gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 2, &o, buf, sizeof buf, &n);
  });
  add("gb_chat_apply_ex", kRange, "tools for a template without them", GB_ERR_UNSUPPORTED_FEATURE, [] {
    gb_chat_options o;
    gb_chat_options_init(&o);
    o.tools = "[]";
    o.tools_len = 2;
    return gb_chat_apply_ex(GB_CHAT_TEMPLATE_CHATML, msgs, 2, &o, buf, sizeof buf, &n);
  });
  static const char call[] = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  add("gb_tool_calls_parse", kNull, "text NULL with len 4", GB_ERR_NULL_POINTER, [] {
    gb_tool_call c[1];
    return gb_tool_calls_parse(GB_CHAT_TEMPLATE_QWEN3, nullptr, 4, c, 1, &n, &n);
  });
  add("gb_tool_calls_parse", kNull, "n_calls NULL", GB_ERR_NULL_POINTER, [] {
    gb_tool_call c[1];
    return gb_tool_calls_parse(GB_CHAT_TEMPLATE_QWEN3, call, sizeof call - 1, c, 1, nullptr, &n);
  });
  add("gb_tool_calls_parse", kNull, "calls NULL with cap 1", GB_ERR_NULL_POINTER, [] {
    return gb_tool_calls_parse(GB_CHAT_TEMPLATE_QWEN3, call, sizeof call - 1, nullptr, 1, &n, &n);
  });
  add("gb_tool_calls_parse", kRange, "a template without tool calls", GB_ERR_UNSUPPORTED_FEATURE, [] {
    gb_tool_call c[1];
    return gb_tool_calls_parse(GB_CHAT_TEMPLATE_LLAMA2, call, sizeof call - 1, c, 1, &n, &n);
  });
  add("gb_tool_calls_parse", kRange, "a cut-off call", GB_ERR_SYNTAX, [] {
    gb_tool_call c[1];
    return gb_tool_calls_parse(GB_CHAT_TEMPLATE_QWEN3, call, sizeof call - 5, c, 1, &n, &n);
  });
  add("gb_tool_call_arguments_json", kNull, "call NULL", GB_ERR_NULL_POINTER, [] {
    char b[8];
    return gb_tool_call_arguments_json(GB_CHAT_TEMPLATE_QWEN3, call, sizeof call - 1, nullptr, b, 8, &n);
  });
  add("gb_tool_call_arguments_json", kNull, "buf NULL with cap 8", GB_ERR_NULL_POINTER, [] {
    const gb_tool_call c{0, 0, 0, 2};
    return gb_tool_call_arguments_json(GB_CHAT_TEMPLATE_QWEN3, call, sizeof call - 1, &c, nullptr, 8, &n);
  });
  add("gb_tool_call_arguments_json", kRange, "arguments past the text", GB_ERR_INVALID_ARGUMENT, [] {
    const gb_tool_call c{0, 0, sizeof call, 2};
    char b[8];
    return gb_tool_call_arguments_json(GB_CHAT_TEMPLATE_QWEN3, call, sizeof call - 1, &c, b, 8, &n);
  });
  add("gb_tool_call_arguments_json", kRange, "a template without tool calls", GB_ERR_UNSUPPORTED_FEATURE, [] {
    const gb_tool_call c{0, 0, 0, 2};
    char b[8];
    return gb_tool_call_arguments_json(GB_CHAT_TEMPLATE_LLAMA2, call, sizeof call - 1, &c, b, 8, &n);
  });
  static const char tools[] = "[{\"name\": \"f\"}]";
  add("gb_grammar_from_tools", kNull, "n_out NULL", GB_ERR_NULL_POINTER, [] {
    return gb_grammar_from_tools(GB_CHAT_TEMPLATE_QWEN3, tools, sizeof tools - 1, GB_TOOL_CHOICE_AUTO, 1, nullptr, 0, nullptr);
  });
  add("gb_grammar_from_tools", kNull, "tools NULL with len 4", GB_ERR_NULL_POINTER, [] {
    return gb_grammar_from_tools(GB_CHAT_TEMPLATE_QWEN3, nullptr, 4, GB_TOOL_CHOICE_AUTO, 1, nullptr, 0, &n);
  });
  add("gb_grammar_from_tools", kRange, "max_calls 0", GB_ERR_INVALID_ARGUMENT, [] {
    return gb_grammar_from_tools(GB_CHAT_TEMPLATE_QWEN3, tools, sizeof tools - 1, GB_TOOL_CHOICE_AUTO, 0, nullptr, 0, &n);
  });
  add("gb_grammar_from_tools", kRange, "tool choice 7", GB_ERR_INVALID_ARGUMENT, [] {
    return gb_grammar_from_tools(GB_CHAT_TEMPLATE_QWEN3, tools, sizeof tools - 1, (gb_tool_choice)7, 1, nullptr, 0, &n);
  });
  add("gb_grammar_from_tools", kRange, "a template without tool calls", GB_ERR_UNSUPPORTED_FEATURE, [] {
    return gb_grammar_from_tools(GB_CHAT_TEMPLATE_GEMMA, tools, sizeof tools - 1, GB_TOOL_CHOICE_AUTO, 1, nullptr, 0, &n);
  });
  add("gb_chat_eot_strings", kNull, "strings NULL", GB_ERR_NULL_POINTER, [] { return gb_chat_eot_strings(GB_CHAT_TEMPLATE_CHATML, nullptr, &n); });
  add("gb_chat_eot_strings", kRange, "template 999", GB_ERR_INVALID_ARGUMENT, [] { return gbt_c_chat_eot_strings(999, &strings, &n); });
  add("gb_utf8_stream_init", kNoop, "NULL", GB_OK, [] {
    gb_utf8_stream_init(nullptr);
    return GB_OK;
  });
  add("gb_utf8_stream_push", kNull, "stream NULL", GB_ERR_NULL_POINTER, [] { return gb_utf8_stream_push(nullptr, "a", 1, buf, sizeof buf, &n); });
  add("gb_utf8_stream_push", kNull, "bytes NULL with len 2", GB_ERR_NULL_POINTER, [] {
    gb_utf8_stream_init(&us);
    return gb_utf8_stream_push(&us, nullptr, 2, buf, sizeof buf, &n);
  });
  add("gb_utf8_stream_push", kState, "a stream never initialised (garbage)", GB_ERR_BAD_STATE, [] {
    gb_utf8_stream g;
    memset(&g, 0xEE, sizeof g);
    return gb_utf8_stream_push(&g, "a", 1, buf, sizeof buf, &n);
  });
  add("gb_utf8_stream_flush", kNull, "n_out NULL", GB_ERR_NULL_POINTER, [] {
    gb_utf8_stream_init(&us);
    return gb_utf8_stream_flush(&us, buf, sizeof buf, nullptr);
  });
  add("gb_utf8_stream_flush", kState, "a stream never initialised (garbage)", GB_ERR_BAD_STATE, [] {
    gb_utf8_stream g;
    memset(&g, 0xEE, sizeof g);
    return gb_utf8_stream_flush(&g, buf, sizeof buf, &n);
  });

  // ---- converter (gearbx_convert.h) -------------------------------------------------------
  const std::string out = gbt::temp_dir() + "/misuse_out.gbx";
  add("gb_convert_default_options", kNoop, "NULL", GB_OK, [] {
    gb_convert_default_options(nullptr);
    return GB_OK;
  });
  add("gb_convert_llama2c", kNull, "checkpoint NULL", GB_ERR_NULL_POINTER, [this, out] {
    gb_convert_options o = conv_opts();
    return gb_convert_llama2c(nullptr, gbt::shared_path("models/tok512.bin").c_str(), out.c_str(), &o);
  });
  add("gb_convert_llama2c", kRange, "missing checkpoint", GB_ERR_FILE_NOT_FOUND, [this, out] {
    gb_convert_options o = conv_opts();
    return gb_convert_llama2c((gbt::temp_dir() + "/absent.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(), out.c_str(), &o);
  });
  add("gb_convert_llama2c", kRange, "page_align 3000", GB_ERR_INVALID_ARGUMENT, [this, out] {
    gb_convert_options o = conv_opts();
    o.page_align = 3000;
    return gb_convert_llama2c(gbt::shared_path("models/stories260K.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(),
                              out.c_str(), &o);
  });
  add("gb_convert_gguf", kNull, "out path NULL", GB_ERR_NULL_POINTER, [this] {
    gb_convert_options o = conv_opts();
    return gb_convert_gguf(gbt::shared_path("models/stories260K.gguf").c_str(), nullptr, &o);
  });
  add("gb_convert_gguf", kRange, "not a GGUF", GB_ERR_BAD_MAGIC, [this, out] {
    gb_convert_options o = conv_opts();
    return gb_convert_gguf(gbt::stories260k_gbx().c_str(), out.c_str(), &o);
  });
  add("gb_convert_gguf", kRange, "tiers bit 7", GB_ERR_INVALID_ARGUMENT, [this, out] {
    gb_convert_options o = conv_opts();
    o.tiers = 1u << 7;
    return gb_convert_gguf(gbt::shared_path("models/stories260K.gguf").c_str(), out.c_str(), &o);
  });
  add("gb_convert_to_gguf", kNull, "gbx path NULL", GB_ERR_NULL_POINTER, [this, out] {
    gb_convert_options o = conv_opts();
    return gb_convert_to_gguf(nullptr, out.c_str(), GB_GEAR_LOW, &o);
  });
  add("gb_convert_to_gguf", kRange, "tier 9", GB_ERR_INVALID_ARGUMENT, [this, out] {
    gb_convert_options o = conv_opts();
    gb_gear g;
    const int32_t v = 9;
    memcpy(&g, &v, 4);
    return gb_convert_to_gguf(gbt::stories260k_gbx().c_str(), out.c_str(), g, &o);
  });
  add("gb_convert_gguf_tokenizer", kNull, "image NULL", GB_ERR_NULL_POINTER, [this] {
    gb_convert_options o = conv_opts();
    return gb_convert_gguf_tokenizer(gbt::shared_path("fixtures/vocab/ggml-vocab-gpt-2.gguf").c_str(), &o, nullptr, &n);
  });
  add("gb_convert_gguf_tokenizer", kRange, "missing file", GB_ERR_FILE_NOT_FOUND, [this] {
    gb_convert_options o = conv_opts();
    void *img = nullptr;
    return gb_convert_gguf_tokenizer((gbt::temp_dir() + "/absent.gguf").c_str(), &o, &img, &n);
  });
  add("gb_convert_free", kNoop, "NULL", GB_OK, [] {
    gb_convert_free(nullptr);
    return GB_OK;
  });
  add("gb_convert_synthetic", kNull, "spec NULL", GB_ERR_NULL_POINTER, [this, out] {
    gb_convert_options o = conv_opts();
    return gb_convert_synthetic(nullptr, out.c_str(), &o);
  });
  add("gb_convert_synthetic", kRange, "unknown preset", GB_ERR_INVALID_ARGUMENT, [this, out] {
    gb_convert_options o = conv_opts();
    return gb_convert_synthetic("gpt-9000", out.c_str(), &o);
  });
  add("gb_convert_synthetic", kRange, "dim=0", GB_ERR_INVALID_ARGUMENT, [this, out] {
    gb_convert_options o = conv_opts();
    return gb_convert_synthetic("dim=0,layers=1,hidden=8,heads=1,kv_heads=1,vocab=16", out.c_str(), &o);
  });
  // Grammars. G: a live grammar in library memory; DG: one destroyed in caller memory.
  static const char kG[] = "root ::= [a-z]+";
  const size_t gl = sizeof kG - 1;
  gb_grammar *G = grammar;
  gb_grammar *DG = dead_grammar;
  add("gb_grammar_options_init", kNoop, "NULL", GB_OK, [] {
    gb_grammar_options_init(nullptr);
    return GB_OK;
  });
  add("gb_grammar_mem_size", kNull, "out NULL", GB_ERR_NULL_POINTER, [gl] { return gb_grammar_mem_size(kG, gl, nullptr, nullptr); });
  add("gb_grammar_mem_size", kNull, "text NULL with len 3", GB_ERR_NULL_POINTER, [] { return gb_grammar_mem_size(nullptr, 3, nullptr, &n); });
  add("gb_grammar_mem_size", kStructSize, "options struct_size 3", GB_ERR_STRUCT_SIZE, [gl] {
    gb_grammar_options o;
    gb_grammar_options_init(&o);
    o.struct_size = 3;
    return gb_grammar_mem_size(kG, gl, &o, &n);
  });
  add("gb_grammar_mem_size", kRange, "max_stacks 0", GB_ERR_INVALID_ARGUMENT, [gl] {
    gb_grammar_options o;
    gb_grammar_options_init(&o);
    o.max_stacks = 0;
    return gb_grammar_mem_size(kG, gl, &o, &n);
  });
  add("gb_grammar_mem_size", kRange, "not a grammar", GB_ERR_SYNTAX, [] { return gb_grammar_mem_size("root = x", 8, nullptr, &n); });
  add("gb_grammar_create", kNull, "out NULL", GB_ERR_NULL_POINTER, [gl] { return gb_grammar_create(kG, gl, nullptr, nullptr, 0, nullptr); });
  add("gb_grammar_create", kRange, "memory too small", GB_ERR_ARENA_TOO_SMALL, [gl] {
    gb_grammar *g = nullptr;
    alignas(64) static uint8_t small[64];
    return gb_grammar_create(kG, gl, nullptr, small, sizeof small, &g);
  });
  add("gb_grammar_create", kRange, "undefined rule", GB_ERR_SYNTAX, [] {
    gb_grammar *g = nullptr;
    return gb_grammar_create("root ::= x", 10, nullptr, nullptr, 0, &g);
  });
  add("gb_grammar_destroy", kNoop, "NULL", GB_OK, [] {
    gb_grammar_destroy(nullptr);
    return GB_OK;
  });
  add("gb_grammar_destroy", kDestroyed, "destroyed twice (caller memory)", GB_OK, [DG] {
    gb_grammar_destroy(DG);
    return GB_OK;
  });
  add("gb_grammar_destroy", kHandle, "a model as the grammar: refused, nothing freed", GB_OK, [M] {
    gb_grammar_destroy(reinterpret_cast<gb_grammar *>(M));
    return GB_OK;
  });
  add("gb_grammar_image_size", kNull, "out NULL", GB_ERR_NULL_POINTER, [G] { return gb_grammar_image_size(G, nullptr); });
  add("gb_grammar_image_size", kHandle, "a session as the grammar", GB_ERR_BAD_HANDLE, [S] {
    return gb_grammar_image_size(reinterpret_cast<gb_grammar *>(S), &n);
  });
  add("gb_grammar_match", kNull, "out NULL", GB_ERR_NULL_POINTER, [G] { return gb_grammar_match(G, "a", 1, nullptr); });
  add("gb_grammar_match", kNull, "text NULL with len 2", GB_ERR_NULL_POINTER, [G] {
    gb_grammar_match_result r;
    return gb_grammar_match(G, nullptr, 2, &r);
  });
  add("gb_grammar_match", kDestroyed, "destroyed (caller memory)", GB_ERR_BAD_HANDLE, [DG] {
    gb_grammar_match_result r;
    return gb_grammar_match(DG, "a", 1, &r);
  });
  add("gb_grammar_match", kHandle, "zeros as the grammar", GB_ERR_BAD_HANDLE, [] {
    gb_grammar_match_result r;
    return gb_grammar_match(reinterpret_cast<gb_grammar *>(g_zeros), "a", 1, &r);
  });
  add("gb_grammar_from_json_schema", kNull, "n_out NULL", GB_ERR_NULL_POINTER, [] {
    return gb_grammar_from_json_schema("{}", 2, nullptr, 0, nullptr);
  });
  add("gb_grammar_from_json_schema", kNull, "schema NULL with len 2", GB_ERR_NULL_POINTER, [] {
    return gb_grammar_from_json_schema(nullptr, 2, nullptr, 0, &n);
  });
  add("gb_grammar_from_json_schema", kNull, "buf NULL with cap 8", GB_ERR_NULL_POINTER, [] {
    return gb_grammar_from_json_schema("{}", 2, nullptr, 8, &n);
  });
  add("gb_grammar_from_json_schema", kRange, "not JSON", GB_ERR_SYNTAX, [] {
    char b[256];
    return gb_grammar_from_json_schema("{\"type\": ", 9, b, sizeof b, &n);
  });
  add("gb_grammar_from_json_schema", kRange, "an unknown keyword", GB_ERR_UNSUPPORTED_FEATURE, [] {
    char b[256];
    return gb_grammar_from_json_schema("{\"frobnicate\": 1}", 17, b, sizeof b, &n);
  });
  add("gb_session_set_grammar", kNull, "session NULL", GB_ERR_NULL_POINTER, [G] { return gb_session_set_grammar(nullptr, G); });
  add("gb_session_set_grammar", kState, "a session without room for a grammar", GB_ERR_UNAVAILABLE, [S, G] {
    return gb_session_set_grammar(S, G);
  });
  add("gb_session_set_grammar", kHandle, "a model as the session", GB_ERR_BAD_HANDLE, [M, G] {
    return gb_session_set_grammar(as_session(M), G);
  });
  add("gb_session_set_grammar", kDestroyed, "destroyed session (caller memory)", GB_ERR_BAD_HANDLE, [this, G] {
    return gb_session_set_grammar(dead, G);
  });
}

std::vector<std::string> api_functions() {
  std::vector<std::string> v;
  std::stringstream ss(GB_API_LIST);
  std::string name;
  while (std::getline(ss, name, ','))
    if (!name.empty()) v.push_back(name);
  return v;
}

// The misuse cases, run in order on one model / session / tokenizer.
class MisuseTable : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fx_ = new Misuse;
    ok_ = fx_->setup();
    if (ok_) fx_->build();
  }
  static void TearDownTestSuite() {
    delete fx_;
    fx_ = nullptr;
  }
  static Misuse *fx_;
  static bool ok_;
};
Misuse *MisuseTable::fx_ = nullptr;
bool MisuseTable::ok_ = false;

}  // namespace

TEST_F(MisuseTable, EveryPublicFunctionHasCases) {
  ASSERT_TRUE(ok_);
  std::set<std::string> covered;
  for (const Case &c : fx_->cases) covered.insert(c.fn);
  const std::vector<std::string> api = api_functions();
  ASSERT_GT(api.size(), 50u) << "the header list is read at build time";
  for (const std::string &f : api) EXPECT_TRUE(covered.count(f)) << f << " has no misuse case in tests/test_misuse.cpp";
  const std::set<std::string> known(api.begin(), api.end());
  for (const std::string &f : covered) EXPECT_TRUE(known.count(f)) << f << ": a case for a function no header declares";
}

TEST_F(MisuseTable, Run) {
  ASSERT_TRUE(ok_);
  std::map<std::string, std::map<int, int>> grid;
  int ran = 0;
  for (const Case &c : fx_->cases) {
    g_lines.v.clear();
    StderrCapture cap;
    const gb_status st = c.call();
    const std::string err = cap.finish();
    const size_t lines = g_lines.v.size() + gbt::count_lines(err);
    const std::string id = std::string(c.fn) + " / " + c.what;
    EXPECT_EQ(st, c.want) << id << ": got " << gb_status_str(st) << " (" << (int)st << ")";
    if (c.log) {
      EXPECT_GE(lines, 1u) << id << ": no log line";
    } else {
      EXPECT_EQ(lines, 0u) << id << ": logged on a documented no-op: " << (g_lines.v.empty() ? err : g_lines.v[0]);
    }
    grid[c.fn][c.kind]++;
    ran++;
  }
  // After all of it the objects still work: the session decodes greedily
  // exactly like a fresh one, the tokenizer and model answer.
  gb_session *s = fx_->sess;
  ASSERT_EQ(gb_session_reset(s), GB_OK);
  const int32_t p[] = {1, 403};
  ASSERT_EQ(gb_prefill(s, p, 2), GB_OK);
  std::vector<int32_t> got;
  for (int i = 0; i < 8; i++) {
    int32_t t;
    ASSERT_EQ(gb_decode_step(s, &t, nullptr), GB_OK);
    got.push_back(t);
  }
  gb_session_options so = fx_->sess_opts();
  gb_session *fresh = nullptr;
  ASSERT_EQ(gb_session_create(fx_->model, &so, nullptr, 0, &fresh), GB_OK);
  ASSERT_EQ(gb_prefill(fresh, p, 2), GB_OK);
  for (int i = 0; i < 8; i++) {
    int32_t t;
    ASSERT_EQ(gb_decode_step(fresh, &t, nullptr), GB_OK);
    EXPECT_EQ(t, got[i]) << "step " << i;
  }
  gb_session_destroy(fresh);
  size_t n = 0;
  std::vector<int32_t> toks(GB_TOKENIZE_CAPACITY(5));
  EXPECT_EQ(gb_tokenizer_encode(fx_->tok, "hello", 5, 0, toks.data(), toks.size(), &n), GB_OK);
  EXPECT_GT(n, 0u);
  EXPECT_EQ(gb_model_verify(fx_->model), GB_OK);
  // The table for docs/RELIABILITY.md.
  if (const char *path = getenv("GB_MISUSE_TABLE")) {
    std::string md = "| function |";
    for (int k = 0; k < kKinds; k++) md += std::string(" ") + kKindNames[k] + " |";
    md += "\n|---|";
    for (int k = 0; k < kKinds; k++) md += "---:|";
    md += "\n";
    int total[kKinds] = {};
    for (const std::string &f : api_functions()) {
      md += "| `" + f + "` |";
      for (int k = 0; k < kKinds; k++) {
        const int c = grid[f][k];
        total[k] += c;
        md += c ? " " + std::to_string(c) + " |" : " |";
      }
      md += "\n";
    }
    md += "| **" + std::to_string(ran) + " cases** |";
    for (int k = 0; k < kKinds; k++) md += " " + std::to_string(total[k]) + " |";
    md += "\n";
    FILE *f = fopen(path, "w");
    ASSERT_NE(f, nullptr);
    fputs(md.c_str(), f);
    fclose(f);
  }
}

// Calls after a failed step: the session stays usable where the contract
// says so, and a session that hit the end of its context recovers by reset.
TEST(Misuse, SessionUsableAfterFailedCalls) {
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 8;
  so.gear = GB_GEAR_MID;
  so.sampler.temperature = 0.0f;
  so.log = gbt::quiet_log;
  gb_session *s = nullptr;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  const int32_t p[] = {1, 403, 407};
  const int32_t bad[] = {1, 600};
  ASSERT_EQ(gb_prefill(s, bad, 2), GB_ERR_TOKEN_OUT_OF_RANGE);
  ASSERT_EQ(gb_decode_step(s, nullptr, nullptr), GB_ERR_BAD_STATE) << "the failed prefill fed nothing";
  ASSERT_EQ(gb_prefill(s, p, 3), GB_OK);
  std::vector<int32_t> first;
  gb_status st = GB_OK;
  for (int i = 0; i < 20 && st == GB_OK; i++) {
    int32_t t;
    st = gb_decode_step(s, &t, nullptr);
    if (st == GB_OK) first.push_back(t);
  }
  EXPECT_EQ(st, GB_ERR_CONTEXT_FULL);
  EXPECT_EQ(first.size(), 6u) << "positions 2..7 of an 8-token context";
  EXPECT_EQ(gb_decode_step(s, nullptr, nullptr), GB_ERR_CONTEXT_FULL) << "and again";
  uint32_t pos = 0;
  ASSERT_EQ(gb_session_position(s, &pos, nullptr), GB_OK);
  EXPECT_EQ(pos, 8u);
  ASSERT_EQ(gb_session_reset(s), GB_OK);
  ASSERT_EQ(gb_prefill(s, p, 3), GB_OK);
  std::vector<int32_t> again;
  for (size_t i = 0; i < first.size(); i++) {
    int32_t t;
    ASSERT_EQ(gb_decode_step(s, &t, nullptr), GB_OK);
    again.push_back(t);
  }
  EXPECT_EQ(again, first);
  gb_session_destroy(s);
  gb_model_close(m);
}
