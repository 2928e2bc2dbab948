// fuzz_gbx_parse.cpp — fuzz target for the .gbx reader alone, fast enough
// for long campaigns: the header, the section table, META, VOCAB,
// TOKENIZER and the tensor table, through gb_model_mem_size (the sizing
// pass) and gb_model_open_memory, then what an open model answers without a
// session: its info, the session sizing at each gear it has, a short
// tokenization and the tokenizer's facts. Nothing is decoded.
// Input: one mode byte (bit 0: recompute every CRC32 before opening, so the
// mutation reaches the structural checks behind the checksums; bit 1: full
// verification), then the image. Seeds: small synthetic models (10 to 25
// kilobytes), in the four modes.
// Checks: the sizing pass and the open agree (a file the open accepts is
// one the sizing pass accepts), an open model answers its info and
// tokenizes into its vocabulary, a session sizing that succeeds is not
// zero bytes. Any failure aborts.
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

static const char kFuzzName[] = "fuzz_gbx_parse";
#include "fuzz/fuzz_util.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  g_in = data;
  g_in_size = size;
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  std::vector<uint8_t> img(data + 1, data + size);
  if (mode & 1) gbx_fix_crcs(img);
  // A tight, 64-byte aligned copy (as from flash): ASan sees any read past the end.
  const size_t n = img.size();
  uint8_t *buf = static_cast<uint8_t *>(aligned_alloc(64, (n + 63) / 64 * 64 + 64));
  if (!buf) return 0;
  if (n) memcpy(buf, img.data(), n);
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.log = quiet;
  mo.verify = (mode & 2) ? GB_VERIFY_ALL : GB_VERIFY_AUTO;
  size_t mem = 0;
  const gb_status ms = gb_model_mem_size(buf, n, &mo, &mem);
  gb_model *m = nullptr;
  const gb_status st = gb_model_open_memory(buf, n, &mo, &m);
  if (st == GB_OK) {
    if (!m) fuzz_fail("GB_OK without a model");
    if (ms != GB_OK) fuzz_fail("the open accepts a file the sizing pass refuses");
    gb_model_info mi;
    memset(&mi, 0, sizeof mi);
    mi.struct_size = sizeof mi;
    if (gb_model_get_info(m, &mi) != GB_OK) fuzz_fail("get_info failed on an open model");
    if (mi.vocab_size == 0 || mi.gears == 0) fuzz_fail("an open model without a vocabulary or a gear");
    for (int g = GB_GEAR_LOW; g <= GB_GEAR_F32; g++) {
      if (!(mi.gears & (1u << g))) continue;
      gb_session_options so;
      gb_session_options_init(&so);
      so.n_ctx = 16;
      so.gear = (gb_gear)g;
      so.log = quiet;
      size_t sb = 0;
      if (gb_session_mem_size(m, &so, &sb) == GB_OK && sb == 0) fuzz_fail("a session of zero bytes");
    }
    // With BOS first when the model has one (GB_ERR_UNAVAILABLE otherwise,
    // which a file without a BOS token may well be).
    const char *text = "Once upon a time";
    int32_t ids[GB_TOKENIZE_CAPACITY(16)];
    size_t k = 0;
    const uint32_t flags = mi.bos_id >= 0 ? GB_TOKENIZE_ADD_BOS : 0;
    if (gb_tokenize(m, text, strlen(text), flags, ids, sizeof ids / sizeof ids[0], &k) != GB_OK || k == 0)
      fuzz_fail("a model that opened cannot tokenize");
    if (mi.bos_id < 0 && gb_tokenize(m, text, strlen(text), GB_TOKENIZE_ADD_BOS, ids, sizeof ids / sizeof ids[0], &k) !=
                             GB_ERR_UNAVAILABLE)
      fuzz_fail("BOS added by a model without one");
    for (size_t i = 0; i < k; i++)
      if (ids[i] < 0 || (uint32_t)ids[i] >= mi.vocab_size) fuzz_fail("a token id outside the vocabulary");
    const gb_tokenizer *tk = nullptr;
    if (gb_model_tokenizer(m, &tk) != GB_OK) fuzz_fail("no tokenizer");
    gb_tokenizer_info ti;
    ti.struct_size = sizeof ti;
    if (gb_tokenizer_get_info(tk, &ti) != GB_OK || ti.n_tokens != mi.vocab_size) fuzz_fail("tokenizer info");
    gb_model_close(m);
  } else if (m) {
    fuzz_fail("error status but a model handle was written");
  }
  free(buf);
  return 0;
}

// Seeds: small synthetic models converted here (one 4-bit tier; two tiers
// with other shapes and GQA; the f32 tier alone), and small lfm2 and qwen35
// models (a LAYERS section, recurrent tensor kinds, DeltaNet fields)
// converted from their GGUF specs, each in the four modes; mutations focused
// on everything before the first data section.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  const char *t = getenv("TMPDIR");
  std::string path =
      std::string(t && *t ? t : "/tmp") + "/gb-fuzz-gbx-parse-" + std::to_string((long)getpid()) + ".gbx";
  // Small on purpose (10-25 KB): every input is checksummed, sized and
  // opened whole, so the rate follows the size.
  const char *specs[] = {"dim=16,layers=1,hidden=16,heads=2,kv_heads=1,vocab=260,seq_len=8,seed=1",
                         "dim=32,layers=2,hidden=32,heads=4,kv_heads=2,vocab=262,seq_len=8,seed=2",
                         "dim=16,layers=1,hidden=32,heads=2,kv_heads=2,vocab=260,seq_len=8,seed=3"};
  const char *recurrent[] = {"lfm2-small", "qwen35-small"};
  const uint32_t tiers[] = {0x1u, 0x5u, 0x8u, 0x1u, 0x1u};
  for (int i = 0; i < 5; i++) {
    gb::ConvertOptions o;
    o.page_align = 64;
    o.tiers = tiers[i];
    o.log = gb::Logger{quiet, nullptr, GB_LOG_ERROR};
    gb_status built;
    if (i < 3) {
      built = gb::convert_synthetic(specs[i], path.c_str(), o);
    } else {
      o.embd_format = gb::kFmtF16;  // (the seed stays small: the rate follows the size)
      const std::string gguf = path + ".gguf";
      const std::vector<uint8_t> g = gb::gguf_serialize(gb::arch_fixture_spec(recurrent[i - 3]));
      FILE *f = fopen(gguf.c_str(), "wb");
      if (!f || fwrite(g.data(), 1, g.size(), f) != g.size() || fclose(f) != 0) fuzz_fail("could not write a seed's GGUF");
      built = gb::convert_gguf(gguf.c_str(), path.c_str(), o);
      remove(gguf.c_str());
    }
    if (built != GB_OK) fuzz_fail("could not build a seed");
    std::vector<uint8_t> b(1, 0);
    const std::vector<uint8_t> f = read_all(path);
    if (f.size() < gb::kHeaderFixedBytes) fuzz_fail("could not read a seed");
    b.insert(b.end(), f.begin(), f.end());
    size_t focus = b.size();
    const uint32_t ns = gb::ld_u32(&b[1 + 16]);
    for (uint32_t s = 0; s < ns; s++) {
      const uint8_t *e = &b[1 + gb::kHeaderFixedBytes + s * gb::kSectionEntryBytes];
      if (gb::ld_u32(e) >= gb::kSecCommon && 1 + gb::ld_u64(e + 8) < focus) focus = 1 + gb::ld_u64(e + 8);
    }
    for (uint8_t mode : {0, 1, 2, 3}) {
      b[0] = mode;
      seeds->push_back(gb::FuzzSeed{b, focus, mode & 1 ? 3u : 1u});
    }
  }
  remove(path.c_str());
}
