// fuzz_state.cpp — fuzz target for gb_session_state_load (src/state.cpp): the
// input is a session state image. Byte 0 picks the mode: bit 0 = recompute
// the body's CRC32 before loading (so the mutation reaches the structural
// checks behind it), bits 1-2 the session it loads into (auto gear with a
// uniform4 pool; a WINDOW pool on a byte budget with eviction; the spec gear
// over f16; the high gear with a uniform8 pool on the portable generic
// kernels, gb_session_options.deterministic). Any status is fine; a crash or sanitizer report is not, and
// neither is a session that cannot decode after a refused load, nor one that
// cannot save again after an accepted one. Seeds: real states of those
// sessions after a prompt and after a few decode steps.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "bytes.h"
#include "convert.h"
#include "crc32.h"
#include "gearbx.h"
#include "sample_files.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

[[noreturn]] void fuzz_fail(const char *what) {
  fprintf(stderr, "fuzz_state: %s\n", what);
  abort();
}

constexpr int kConfigs = 4;
gb_model *g_model;
gb_session *g_sess[kConfigs];
std::vector<uint8_t> g_model_bytes;
const int32_t kPrompt[] = {1, 5, 7, 9, 11};

void init() {
  if (g_model) return;
  const char *t = getenv("TMPDIR");
  const std::string path = std::string(t && *t ? t : "/tmp") + "/gb-fuzz-state-" + std::to_string((long)getpid()) + ".gbx";
  gb::ConvertOptions o;
  o.page_align = 64;
  o.tiers = 0xFu;
  o.log = gb::Logger{quiet, nullptr, GB_LOG_ERROR};
  if (gb::convert_synthetic("dim=32,layers=2,hidden=64,heads=2,kv_heads=1,vocab=300,seq_len=32,seed=3", path.c_str(), o) != GB_OK)
    fuzz_fail("could not build the model");
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) fuzz_fail("could not read the model");
  uint8_t chunk[65536];
  size_t k;
  while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) g_model_bytes.insert(g_model_bytes.end(), chunk, chunk + k);
  fclose(f);
  remove(path.c_str());
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.log = quiet;
  if (gb_model_open_memory(g_model_bytes.data(), g_model_bytes.size(), &mo, &g_model) != GB_OK) fuzz_fail("model does not open");
  for (int c = 0; c < kConfigs; c++) {
    gb_session_options so;
    gb_session_options_init(&so);
    so.log = quiet;
    so.n_ctx = 32;
    so.sampler.temperature = 0.8f;
    if (c == 0) {
      so.gear = GB_GEAR_AUTO;
      so.kv.policy = GB_KV_UNIFORM4;
      so.repeat_penalty = 1.2f;
      so.penalty_window = 8;
    } else if (c == 1) {
      so.gear = GB_GEAR_LOW;
      so.kv.policy = GB_KV_WINDOW;
      so.kv.beta = 0.5f;
      so.kv.evict = 1;
      so.kv.window = 4;
    } else if (c == 2) {
      so.gear = GB_GEAR_SPEC;
      so.kv.policy = GB_KV_F16;
      so.spec_k = 3;
    } else {
      so.gear = GB_GEAR_HIGH;
      so.kv.policy = GB_KV_UNIFORM8;
      so.deterministic = 1;
    }
    if (gb_session_create(g_model, &so, nullptr, 0, &g_sess[c]) != GB_OK) fuzz_fail("session does not create");
  }
}

// A known state: the prompt and two steps.
void known_state(gb_session *s) {
  if (gb_session_reset(s) != GB_OK || gb_prefill(s, kPrompt, sizeof kPrompt / sizeof kPrompt[0]) != GB_OK)
    fuzz_fail("prefill failed");
  int32_t tok;
  for (int i = 0; i < 2; i++)
    if (gb_decode_step(s, &tok, nullptr) != GB_OK) fuzz_fail("decode failed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  init();
  if (size < 1) return 0;
  std::vector<uint8_t> img(data + 1, data + size);
  if ((data[0] & 1) && img.size() >= 32) gb::st_u32(&img[24], gb::crc32_update(0, img.data() + 32, img.size() - 32));
  gb_session *s = g_sess[(data[0] >> 1) % kConfigs];
  known_state(s);
  const gb_status st = gb_session_state_load(s, img.data(), img.size());
  int32_t tok;
  if (st != GB_OK) {
    if (gb_decode_step(s, &tok, nullptr) != GB_OK) fuzz_fail("a refused load left the session unable to decode");
    return 0;
  }
  size_t n = 0;
  const gb_status ss = gb_session_state_size(s, &n);
  if (ss != GB_OK) fuzz_fail("an accepted state cannot be measured again");
  std::vector<uint8_t> again(n);
  if (gb_session_state_save(s, again.data(), again.size(), &n) != GB_OK) fuzz_fail("an accepted state cannot be saved again");
  for (int i = 0; i < 3; i++) {
    const gb_status ds = gb_decode_step(s, &tok, nullptr);
    if (ds != GB_OK && ds != GB_ERR_BAD_STATE && ds != GB_ERR_CONTEXT_FULL) fuzz_fail("decode after a load failed oddly");
    if (ds != GB_OK) break;
  }
  return 0;
}

void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  init();
  for (int c = 0; c < kConfigs; c++) {
    gb_session *s = g_sess[c];
    for (int steps = 0; steps < 3; steps++) {
      if (gb_session_reset(s) != GB_OK || gb_prefill(s, kPrompt, sizeof kPrompt / sizeof kPrompt[0]) != GB_OK)
        fuzz_fail("seed prefill failed");
      int32_t tok;
      for (int i = 0; i < steps * 4; i++)
        if (gb_decode_step(s, &tok, nullptr) != GB_OK) fuzz_fail("seed decode failed");
      size_t n = 0;
      int guard = 0;
      while (gb_session_state_size(s, &n) == GB_ERR_BAD_STATE && guard++ < 32) gb_decode_step(s, &tok, nullptr);
      std::vector<uint8_t> b(1 + n);
      if (gb_session_state_save(s, b.data() + 1, n, &n) != GB_OK) fuzz_fail("seed save failed");
      for (uint8_t mode = 0; mode < 2; mode++) {
        b[0] = (uint8_t)(mode | c << 1);
        seeds->push_back(gb::FuzzSeed{b, b.size(), mode ? 3u : 1u});
      }
    }
  }
}
