// fuzz_tokdata.cpp — fuzz target for TOKENIZER data (src/tok/tokdata.h): the
// input is an image. tokdata_validate must give a status, never crash; an
// image it accepts must initialise and encode and decode a fixed text with
// every id in range. Seeds: two small images made here (a SentencePiece
// and a byte-level BPE vocabulary), so no files are needed, and, when the
// shared fixtures are there, the real images of their vocabularies (the six
// llama.cpp vocabulary fixtures: SentencePiece and five byte-level BPE
// pre-tokenizers) and of the qwen2 and Llama 3 fixtures (merges, chat
// templates), and this repository's gemma4 vocabulary (UTF-8 BPE), mutated
// mostly in their header and tables.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "bytes.h"
#include "convert.h"
#include "gguf_parse.h"
#include "sample_files.h"
#include "tok/engine.h"
#include "tok/tokdata.h"
#include "tok/unicode.h"
#include "tokdata_gguf.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

void fuzz_fail(const char *what) {
  fprintf(stderr, "fuzz_tokdata: %s\n", what);
  abort();
}

gb::GgufValue str_value(const char *key, const std::string &s) {
  gb::GgufValue v;
  v.key = key;
  v.type = gb::kGgufString;
  v.is_str = true;
  v.s = s;
  return v;
}

std::string bytelevel(const std::string &raw) {
  std::string o;
  for (unsigned char c : raw) {
    uint8_t u[4];
    o.append(reinterpret_cast<const char *>(u), gb::utf8_encode(gb::bytelevel_cp(c), u));
  }
  return o;
}

std::vector<uint8_t> image(bool bpe) {
  gb::GgufFile g;
  g.has_tokens = g.has_types = true;
  auto add = [&](const std::string &t, int32_t type, float score) {
    g.tokens.push_back(t);
    g.token_types.push_back(type);
    g.scores.push_back(score);
  };
  if (bpe) {
    g.kv.push_back(str_value("tokenizer.ggml.model", "gpt2"));
    g.kv.push_back(str_value("tokenizer.ggml.pre", "llama-bpe"));
    for (int b = 0; b < 256; b++) add(bytelevel(std::string(1, (char)b)), 1, 0);
    const char *words[][2] = {{" ", "t"}, {"h", "e"}, {" t", "he"}, {"a", "b"}, {"ab", "ab"}, {"1", "2"}};
    for (const auto &w : words) {
      add(bytelevel(std::string(w[0]) + w[1]), 1, 0);
      g.merges.push_back(bytelevel(w[0]) + " " + bytelevel(w[1]));
    }
    g.has_merges = true;
    add("<|endoftext|>", 3, 0);
    add("\xc3\xbc", 4, 0);
  } else {
    g.kv.push_back(str_value("tokenizer.ggml.model", "llama"));
    add("<unk>", 2, 0);
    add("<s>", 3, 0);
    add("</s>", 3, 0);
    for (int b = 0; b < 256; b++) {
      char name[8];
      snprintf(name, sizeof name, "<0x%02X>", b);
      add(name, 6, 0);
    }
    const char *pieces[] = {"\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab", "\xe2\x96\x81\xe2\x96\x81", "x"};
    float sc = -1;
    for (const char *p : pieces) add(p, 1, sc -= 0.5f);
    add("<|user|>", 4, 0);
  }
  g.has_scores = true;
  std::vector<uint8_t> img;
  gb::Logger log;
  log.fn = quiet;
  if (gb::tokdata_from_gguf(g, log, &img) != GB_OK) fuzz_fail("seed image");
  return img;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gb::Logger log;
  log.fn = quiet;
  gb::TokView v;
  if (gb::tokdata_view(data, size, log, &v) != GB_OK) return 0;
  const size_t mem_bytes = gb::tok_mem_size(v);
  std::vector<uint64_t> mem(mem_bytes / 8 + 1);
  gb::Tok t;
  if (gb::tok_init(&t, v, mem.data(), mem_bytes, log) != GB_OK) return 0;
  static const char kText[] = "the ab abab 12 \xc3\xbc<|endoftext|><s> a  b\xff\xe2\x96\x81x<|user|>\n";
  for (uint32_t flags : {0u, (uint32_t)gb::kTokEncAll}) {
    const size_t len = sizeof kText - 1, cap = gb::tok_encode_capacity(len);
    std::vector<int32_t> ids(cap);
    size_t n = 0;
    if (gb::tok_encode(t, kText, len, flags, ids.data(), cap, &n) != GB_OK) fuzz_fail("encode failed");
    for (size_t i = 0; i < n; i++)
      if (ids[i] < 0 || (uint32_t)ids[i] >= v.n_tokens) fuzz_fail("token id out of range");
    char out[4096];
    size_t m = 0;
    const gb_status s = gb::tok_decode(t, ids.data(), n, gb::kTokDecSpecial, out, sizeof out, &m);
    if (s != GB_OK && s != GB_ERR_BUFFER_TOO_SMALL) fuzz_fail("decode failed");
  }
  return 0;
}

void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  for (bool bpe : {false, true}) {
    const std::vector<uint8_t> img = image(bpe);
    seeds->push_back(gb::FuzzSeed{img, gb::kTokHeaderBytes, 3});
    seeds->push_back(gb::FuzzSeed{img, img.size(), 1});
  }
  gb::Logger log;
  log.fn = quiet;
  const std::string dir = std::string(GB_SHARED_DIR) + "/fixtures/";
  for (const std::string &path :
       {dir + "vocab/ggml-vocab-llama-spm.gguf", dir + "vocab/ggml-vocab-phi-3.gguf", dir + "vocab/ggml-vocab-gpt-2.gguf",
        dir + "vocab/ggml-vocab-falcon.gguf", dir + "vocab/ggml-vocab-starcoder.gguf", dir + "vocab/ggml-vocab-deepseek-llm.gguf",
        dir + "qwen2-tiny-Q4_K_M.gguf", dir + "llama3-tiny-Q4_K_M.gguf",
        std::string(GB_TEST_SOURCE_DIR) + "/fixtures/vocab/ggml-vocab-gemma4-synth.gguf"}) {
    std::vector<uint8_t> img;
    if (gb::gguf_tokenizer(path.c_str(), log, &img) != GB_OK) continue;
    // Focus: the header and the arrays before the piece bytes (offsets,
    // scores, types come first in the writer's order).
    const uint64_t pb = gb::ld_u64(img.data() + 72);
    seeds->push_back(gb::FuzzSeed{img, pb > gb::kTokHeaderBytes && pb < img.size() ? (size_t)pb : img.size(), 1});
  }
}
