// fuzz_tok_bpe.cpp — fuzz target for the BPE encoders (byte-level and
// UTF-8) and their pre-tokenizers (src/tok/) over the fixture vocabularies
// (../shared/fixtures/vocab/, and this repository's gemma4 one; without
// them the target does nothing).
// Input: byte 0 picks the vocabulary and pre-tokenizer (bits 0-2: gpt-2,
// falcon, starcoder, deepseek-llm, and gpt-2's vocabulary under the
// llama-bpe, qwen2, default and starcoder/smollm pre-tokenizers; bit 5 set:
// the gemma4 vocabulary instead) and the flags (bit 3: parse special, bit 4:
// BOS and EOS); the rest is the text.
// Checks: every pre-tokenizer splits the text into non-empty words that
// tile it in order; encoding succeeds, ids are in range, nothing is written past the
// capacity, and decoding gives back the text with each invalid UTF-8 byte
// as U+FFFD and without the bytes the vocabulary has no token for (falcon
// lacks a few control bytes): llama.cpp's two lossy steps (gemma4 also
// reads U+2581 written in the text back as a space). Any failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "bytes.h"
#include "convert_util.h"
#include "gguf_parse.h"
#include "sample_files.h"
#include "tok/engine.h"
#include "tok/pretok.h"
#include "tok/unicode.h"
#include "tokdata_gguf.h"

namespace {
const char kFuzzName[] = "fuzz_tok_bpe";
}  // namespace
#include "fuzz_tok_common.h"

namespace {

Loaded *config(unsigned k) {
  static Loaded *c[8] = {};
  static const struct {
    const char *name;
    uint32_t pre;
  } kConfigs[8] = {{"gpt-2", 0},
                   {"falcon", 0},
                   {"starcoder", 0},
                   {"deepseek-llm", 0},
                   {"gpt-2", gb::kPreLlama3},
                   {"gpt-2", gb::kPreQwen2},
                   {"gpt-2", gb::kPreDefault},
                   {"gpt-2", gb::kPreStarcoder}};
  if (!c[k]) c[k] = load(kConfigs[k].name, kConfigs[k].pre);
  return c[k];
}

Loaded *gemma4() {
  static Loaded *c = load("gemma4-synth", 0, GB_TEST_SOURCE_DIR "/fixtures/vocab");
  return c;
}

struct Tiling {
  size_t next = 0;
  bool ok = true;
};
gb_status tile(void *ctx, size_t b, size_t e) {
  Tiling *t = static_cast<Tiling *>(ctx);
  if (b != t->next || e <= b) t->ok = false;
  t->next = e;
  return GB_OK;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  g_in = data;
  g_in_size = size;
  for (uint32_t pre = gb::kPreDefault; pre < gb::kPreCount; pre++) {
    Tiling t;
    if (gb::pretok_split(pre, data + 1, size - 1, tile, &t) != GB_OK) fuzz_fail("pre-tokenizer failed");
    if (!t.ok || t.next != size - 1) fuzz_fail("pre-tokenizer words do not tile the text");
  }
  Loaded *l = (data[0] & 32) ? gemma4() : config(data[0] & 7);
  const bool utf8_bpe = l->ok && l->v.kind == gb::kTokKindBpeUtf8;
  if (!l->ok) return 0;
  const uint32_t flags = ((data[0] & 8) ? (uint32_t)gb::kTokEncParseSpecial : 0u) | ((data[0] & 16) ? (uint32_t)(gb::kTokEncAddBos | gb::kTokEncAddEos) : 0u);
  const std::string x(reinterpret_cast<const char *>(data + 1), size - 1);

  const size_t cap = gb::tok_encode_capacity(x.size());
  std::vector<int32_t> ids(cap + 1, -77);
  size_t n = 0;
  if (gb::tok_encode(l->tok, x.data(), x.size(), flags, ids.data(), cap, &n) != GB_OK) fuzz_fail("encode failed");
  if (ids[cap] != -77) fuzz_fail("wrote past the capacity");
  if (n > 6 * x.size() + 8) fuzz_fail("too many tokens");
  ids.resize(n);
  for (int32_t id : ids)
    if (id < 0 || (uint32_t)id >= l->v.n_tokens) fuzz_fail("token id out of range");
  if (flags & gb::kTokEncAddBos) {
    if (ids.size() < 2) fuzz_fail("BOS and EOS missing");
    ids.erase(ids.begin());
    ids.pop_back();
  }

  size_t need = 0;
  gb::tok_decode(l->tok, ids.data(), ids.size(), gb::kTokDecSpecial, nullptr, 0, &need);
  std::string text(need, '\0');
  size_t got = 0;
  if (gb::tok_decode(l->tok, ids.data(), ids.size(), gb::kTokDecSpecial, need ? &text[0] : nullptr, need, &got) != GB_OK || got != need)
    fuzz_fail("decode failed");
  std::string want;
  for (size_t i = 0; i < x.size();) {
    size_t adv;
    uint8_t u[4];
    const uint32_t cp = gb::utf8_decode(reinterpret_cast<const uint8_t *>(x.data()) + i, x.size() - i, &adv);
    const size_t m = gb::utf8_encode(utf8_bpe && cp == 0x2581 ? ' ' : cp, u);
    for (size_t k = 0; k < m; k++)
      if (l->tok.byte_tok[u[k]] >= 0) want += (char)u[k];  // a byte without a token is dropped (falcon lacks a few)
    i += adv;
  }
  if (text != want) {
    fprintf(stderr, "decoded:");
    for (unsigned char c : text) fprintf(stderr, " %02x", c);
    fprintf(stderr, "\nids:");
    for (int32_t id : ids) fprintf(stderr, " %d", id);
    fprintf(stderr, "\n");
    fuzz_fail("decode(encode(x)) != x with U+FFFD for bad bytes");
  }
  return 0;
}

// Seeds: every configuration with the fixture's test strings and a few of ours.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  std::vector<std::string> texts = {"Hello, y'all! I'VE 12345 <|endoftext|>", "\xff\xfe\xc3(\xf4\x90\x80\x80", "  \n\t\r\n\xe3\x80\x80 x",
                                    "\xc3\xbc\xc3\xb8 \xe4\xb8\xad\xe6\x96\x87 \xef\xbc\x91"};
  FILE *f = fopen((std::string(GB_SHARED_DIR) + "/fixtures/vocab/ggml-vocab-gpt-2.gguf.inp").c_str(), "rb");
  if (f) {
    std::string all;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) all.append(buf, k);
    fclose(f);
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t at = 0, p; (p = all.find(sep, at)) != std::string::npos; at = p + sep.size()) texts.push_back(all.substr(at, p - at));
  }
  for (uint8_t cfg = 0; cfg < 64; cfg++)
    for (size_t i = cfg % 3; i < texts.size(); i += 3) {
      std::vector<uint8_t> b(1, cfg);
      b.insert(b.end(), texts[i].begin(), texts[i].end());
      seeds->push_back(gb::FuzzSeed{b, b.size(), 1});
    }
}
