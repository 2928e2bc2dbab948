// fuzz_gguf_open.cpp — fuzz target: the input is a GGUF file opened as a
// model in place, from memory (gb_model_mem_size, then gb_model_open_memory
// into caller memory of that size, with every value checked), and when it
// opens: its tokenizer encodes and decodes a text, one token is fed, and
// gb_model_verify runs. No conversion, no session arena beyond a 16-token
// context: about twice fuzz_gguf's inputs a second instrumented (the real
// seeds are whole 1 MB models, scanned and fed a token), far more for the
// mutations that the header already refuses. Any status is fine; a crash,
// leak or undefined behaviour is not, and neither is a model that opens
// in less memory than gb_model_mem_size said or one that refuses the
// memory it asked for.
// Seeds: those of gguf_seeds.h.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gearbx.h"

static const char kFuzzName[] = "fuzz_gguf_open";
#include "fuzz/fuzz_util.h"
#include "fuzz/gguf_seeds.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

std::string scratch_path() {
  const char *t = getenv("TMPDIR");
  return std::string(t && *t ? t : "/tmp") + "/gb-fuzz-gguf-open-" + std::to_string((long)getpid()) + ".gguf";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  g_in = data;
  g_in_size = size;
  // A tight, 64-byte aligned copy: ASan sees any read past the end.
  void *buf = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  gb_model_options o;
  gb_model_options_init(&o);
  o.log = quiet;
  o.verify = GB_VERIFY_ALL;
  size_t need = 0;
  if (gb_model_mem_size(buf, size, &o, &need) != GB_OK) {
    gb_model *m = nullptr;
    if (gb_model_open_memory(buf, size, &o, &m) == GB_OK) {
      // Sizing refused what opening accepts: only the checks that need the
      // tables (keys or names twice, overlapping data) run at open alone,
      // so the reverse is fine, this is not.
      gb_model_close(m);
      free(buf);
      fuzz_fail("gb_model_mem_size refused a model that opens");
    }
    free(buf);
    return 0;
  }
  void *mem = aligned_alloc(64, (need + 63) / 64 * 64 + 64);
  o.mem = mem;
  o.mem_bytes = need;
  gb_model *m = nullptr;
  const gb_status st = gb_model_open_memory(buf, size, &o, &m);
  if (st == GB_ERR_ARENA_TOO_SMALL) fuzz_fail("the memory gb_model_mem_size asked for was refused");
  if (st == GB_OK) {
    const gb_tokenizer *tok = nullptr;
    if (gb_model_tokenizer(m, &tok) == GB_OK) {
      static const char kText[] = "Hello, world! <|im_end|> 123";
      int32_t ids[GB_TOKENIZE_CAPACITY(sizeof kText)];
      size_t n = 0;
      if (gb_tokenizer_encode(tok, kText, sizeof kText - 1, GB_TOKENIZE_ADD_BOS | GB_TOKENIZE_PARSE_SPECIAL, ids,
                              sizeof ids / sizeof ids[0], &n) == GB_OK)
        for (size_t i = 0; i < n; i++) {
          const char *t;
          size_t len;
          gb_tokenizer_token_text(tok, i ? ids[i - 1] : -1, ids[i], &t, &len);
        }
    }
    gb_session_options so;
    gb_session_options_init(&so);
    so.n_ctx = 16;
    so.log = quiet;
    gb_session *s = nullptr;
    if (gb_session_create(m, &so, nullptr, 0, &s) == GB_OK) {
      gb_feed(s, 0, nullptr);
      gb_session_destroy(s);
    }
    gb_model_verify(m);
    gb_model_close(m);
  }
  free(mem);
  free(buf);
  return 0;
}

void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  const std::string path = scratch_path();
  gguf_fuzz_seeds(seeds, path);
  remove(path.c_str());
}
