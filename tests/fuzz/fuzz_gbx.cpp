// fuzz_gbx.cpp — fuzz target for the .gbx reader (src/model.cpp) and what a
// model feeds: the input is a .gbx image opened from memory. Byte 0 of the
// input picks the mode: bit 0 = recompute every CRC32 before opening (so the
// mutation reaches the structural checks behind the checksums), bit 1 = full
// verification, bit 2 = sessions on the portable generic kernels
// (gb_session_options.deterministic: the C reference kernels, which the
// x86 and arm64 builds otherwise never run). When the model opens, a short
// session runs on it: tokenize,
// prefill, a few decode steps at each gear present. Any status is fine; a
// crash, a sanitizer report or a non-finite entropy from a model that passed
// verification is not.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "bytes.h"
#include "convert.h"
#include "format.h"
#include "gearbx.h"
#include "sample_files.h"
#include "fuzz/gbx_crc.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

// GB_FUZZ_STATS=1 prints how many inputs opened, to check the seeds reach
// past the checksums.
long g_inputs, g_opened;
void print_stats() { fprintf(stderr, "fuzz_gbx: %ld inputs, %ld opened\n", g_inputs, g_opened); }

[[noreturn]] void fuzz_fail(const char *what) {
  fprintf(stderr, "fuzz_gbx: %s\n", what);
  abort();
}

void exercise(gb_model *m, bool generic) {
  gb_model_info mi;
  memset(&mi, 0, sizeof mi);
  mi.struct_size = sizeof mi;
  if (gb_model_get_info(m, &mi) != GB_OK) fuzz_fail("get_info failed on an open model");
  const char *text = "Once upon a time";
  int32_t ids[GB_TOKENIZE_CAPACITY(16)];
  size_t n = 0;
  // BOS first when the model has one (a file may have none: GB_ERR_UNAVAILABLE).
  const uint32_t flags = mi.bos_id >= 0 ? GB_TOKENIZE_ADD_BOS : 0;
  if (gb_tokenize(m, text, strlen(text), flags, ids, sizeof ids / sizeof ids[0], &n) != GB_OK || n == 0)
    fuzz_fail("a model that opened cannot tokenize");
  for (size_t i = 0; i < n; i++) {
    const char *p;
    size_t len;
    if (gb_token_to_text(m, i ? ids[i - 1] : -1, ids[i], &p, &len) != GB_OK) fuzz_fail("token_to_text failed");
  }
  // The tokenizer handle: info, decoding, end-of-generation, template.
  const gb_tokenizer *tk = nullptr;
  if (gb_model_tokenizer(m, &tk) != GB_OK) fuzz_fail("no tokenizer");
  gb_tokenizer_info ti;
  ti.struct_size = sizeof ti;
  if (gb_tokenizer_get_info(tk, &ti) != GB_OK || ti.n_tokens != mi.vocab_size) fuzz_fail("tokenizer info");
  char dec[256];
  size_t dn = 0;
  const gb_status ds = gb_tokenizer_decode(tk, ids, n, GB_DETOKENIZE_SPECIAL, dec, sizeof dec, &dn);
  if (ds != GB_OK && ds != GB_ERR_BUFFER_TOO_SMALL) fuzz_fail("decode failed");
  int eog = 0;
  for (size_t i = 0; i < n; i++)
    if (gb_tokenizer_is_eog(tk, ids[i], &eog) != GB_OK) fuzz_fail("is_eog failed");
  const char *tpl;
  size_t tl;
  const gb_status ts = gb_tokenizer_chat_template(tk, &tpl, &tl);
  if (ts != GB_OK && ts != GB_ERR_UNAVAILABLE) fuzz_fail("chat_template failed");
  for (int g = GB_GEAR_LOW; g <= GB_GEAR_F32; g++) {
    if (!(mi.gears & (1u << g))) continue;
    gb_session_options so;
    gb_session_options_init(&so);
    so.n_ctx = 8;
    so.gear = (gb_gear)g;
    so.log = quiet;
    so.deterministic = generic ? 1 : 0;
    gb_session *s = nullptr;
    if (gb_session_create(m, &so, nullptr, 0, &s) != GB_OK) continue;
    // The generic kernels are slow under the sanitizers: fewer positions.
    const size_t n_prompt = generic ? 2 : 4;
    const int n_steps = generic ? 1 : 3;
    if (gb_prefill(s, ids, n < n_prompt ? n : n_prompt) == GB_OK) {
      for (int k = 0; k < n_steps; k++) {
        int32_t tok;
        gb_step_info info;
        info.struct_size = sizeof info;
        if (gb_decode_step(s, &tok, &info) != GB_OK) break;
        if (tok < 0 || (uint32_t)tok >= mi.vocab_size) fuzz_fail("sampled token out of range");
      }
    }
    gb_session_destroy(s);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const bool stats = [] {
    const char *e = getenv("GB_FUZZ_STATS");
    if (e && *e == '1') atexit(print_stats);
    return true;
  }();
  (void)stats;
  g_inputs++;
  const uint8_t mode = data[0];
  std::vector<uint8_t> img(data + 1, data + size);
  if (mode & 1) gbx_fix_crcs(img);
  // 64-byte aligned copy, as from flash.
  void *buf = nullptr;
  if (posix_memalign(&buf, 64, img.size() ? img.size() : 64) != 0) return 0;
  if (!img.empty()) memcpy(buf, img.data(), img.size());
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.log = quiet;
  mo.verify = (mode & 2) ? GB_VERIFY_ALL : GB_VERIFY_AUTO;
  gb_model *m = nullptr;
  const gb_status st = gb_model_open_memory(buf, img.size(), &mo, &m);
  if (st == GB_OK) {
    if (!m) fuzz_fail("GB_OK without a model");
    g_opened++;
    exercise(m, (mode & 4) != 0);
    gb_model_close(m);
  } else if (m) {
    fuzz_fail("error status but a model handle was written");
  }
  free(buf);
  return 0;
}

// Seeds: small synthetic models (one with all four tiers, one with low+high
// only and an untied classifier is not expressible in synthetic specs, so a
// second seed differs in shapes and GQA), stories260K converted from its
// GGUF (VOCAB and TOKENIZER sections) and the qwen2 fixture converted
// (Q4_K / Q6_K tier, Q/K/V biases, NeoX RoPE, a byte-level BPE TOKENIZER
// with its chat template), and small lfm2 and qwen35 models converted from
// their GGUF specs (a fed token runs their recurrent layers); mutations
// focused on the header, section table, META, LAYERS, VOCAB, TOKENIZER and
// TENSORS sections.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  const char *t = getenv("TMPDIR");
  std::string path = std::string(t && *t ? t : "/tmp") + "/gb-fuzz-gbx-" + std::to_string((long)getpid()) + ".gbx";
  const char *specs[] = {"dim=32,layers=1,hidden=64,heads=2,kv_heads=1,vocab=300,seq_len=16,seed=1",
                         "dim=48,layers=2,hidden=40,heads=4,kv_heads=2,vocab=270,seq_len=8,seed=2"};
  // Then GGUF models of ../shared (skipped when absent).
  const std::string ggufs[] = {std::string(GB_SHARED_DIR) + "/models/stories260K.gguf",
                               std::string(GB_SHARED_DIR) + "/fixtures/qwen2-tiny-Q4_K_M.gguf"};
  const char *recurrent[] = {"lfm2-small", "qwen35-small"};
  for (int i = 0; i < 6; i++) {
    gb::ConvertOptions o;
    o.page_align = 64;
    o.tiers = i == 0 ? 0xFu : i == 1 ? 0x5u : i == 2 ? 0x1u : i == 3 ? 0u : 0x1u;
    o.log = gb::Logger{quiet, nullptr, GB_LOG_ERROR};
    if (i >= 4) {
      o.embd_format = gb::kFmtF16;
      const std::string gguf = path + ".gguf";
      const std::vector<uint8_t> g = gb::gguf_serialize(gb::arch_fixture_spec(recurrent[i - 4]));
      FILE *gf = fopen(gguf.c_str(), "wb");
      if (!gf || fwrite(g.data(), 1, g.size(), gf) != g.size() || fclose(gf) != 0) fuzz_fail("could not write a seed's GGUF");
      const gb_status built = gb::convert_gguf(gguf.c_str(), path.c_str(), o);
      remove(gguf.c_str());
      if (built != GB_OK) fuzz_fail("could not build a seed");
    } else if (i >= 2) {
      FILE *probe = fopen(ggufs[i - 2].c_str(), "rb");
      if (!probe) continue;  // without the shared models: the synthetic seeds only
      fclose(probe);
    }
    if (i < 4 &&
        (i < 2 ? gb::convert_synthetic(specs[i], path.c_str(), o) : gb::convert_gguf(ggufs[i - 2].c_str(), path.c_str(), o)) != GB_OK)
      fuzz_fail("could not build a seed");
    FILE *f = fopen(path.c_str(), "rb");
    if (!f) fuzz_fail("could not read a seed");
    std::vector<uint8_t> b(1, 0);
    uint8_t chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) b.insert(b.end(), chunk, chunk + k);
    fclose(f);
    // Focus: header + section table + the metadata sections (everything
    // before the first data section), as found in the section table.
    size_t focus = b.size();
    const uint32_t ns = gb::ld_u32(&b[1 + 16]);
    for (uint32_t s = 0; s < ns; s++) {
      const uint8_t *e = &b[1 + gb::kHeaderFixedBytes + s * gb::kSectionEntryBytes];
      if (gb::ld_u32(e) >= gb::kSecCommon && 1 + gb::ld_u64(e + 8) < focus) focus = 1 + gb::ld_u64(e + 8);
    }
    for (uint8_t mode : {0, 1, 2, 3, 5}) {
      b[0] = mode;
      seeds->push_back(gb::FuzzSeed{b, focus, mode & 1 ? 3u : 1u});
    }
  }
  remove(path.c_str());
}
