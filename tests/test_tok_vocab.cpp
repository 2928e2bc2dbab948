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

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bytes.h"
#include "gguf_parse.h"
#include "test_util.h"
#include "tok/engine.h"
#include "tok/pretok.h"
#include "tok/tokdata.h"
#include "tok/unicode.h"
#include "tokdata_gguf.h"

namespace {

// The category groups and White_Space flag of ucp_class's table.
uint8_t ucp_group(uint32_t cp) { return gb::ucp_class(cp) & 7; }
bool ucp_is_space(uint32_t cp) { return (gb::ucp_class(cp) & gb::kUcWhitespace) != 0; }
bool ucp_is_letter(uint32_t cp) { return ucp_group(cp) == gb::kUcLetter; }
bool ucp_is_number(uint32_t cp) { return ucp_group(cp) == gb::kUcNumber; }

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

// The shared vocabularies, or this repository's (tests/fixtures/vocab: the
// ones of llama.cpp's own tests that the shared set lacks).
// A name "VOCAB@PRE" is VOCAB's file read with its pre-tokenizer taken to
// be PRE (its expected ids in this repository's VOCAB.as-PRE.out);
// "VOCAB@no-space-prefix" reads it with tokenizer.ggml.add_space_prefix
// false instead.
std::string base_name(const std::string &name) { return name.substr(0, name.find('@')); }
std::string pre_override(const std::string &name) {
  const size_t at = name.find('@');
  return at == std::string::npos ? std::string() : name.substr(at + 1);
}
std::string vocab_path(const std::string &full) {
  const std::string name = base_name(full);
  const std::string own = std::string(GB_TEST_SOURCE_DIR) + "/fixtures/vocab/ggml-vocab-" + name + ".gguf";
  if (access(own.c_str(), F_OK) == 0) return own;
  return gbt::shared_path(("fixtures/vocab/ggml-vocab-" + name + ".gguf").c_str());
}

gb_status make_image(const std::string &name, std::vector<uint8_t> *img) {
  gb::InputFile f;
  const gb::Logger log = quiet();
  gb_status s = f.open(vocab_path(name).c_str(), log, "vocabulary");
  if (s != GB_OK) return s;
  gb::GgufFile g;
  s = gb::gguf_parse(f, log, &g);
  if (s != GB_OK) return s;
  const std::string pre = pre_override(name);
  if (pre == "no-space-prefix") {  // a SentencePiece vocabulary read as Gemma's: no space prefix
    gb::GgufValue *v = const_cast<gb::GgufValue *>(g.find("tokenizer.ggml.add_space_prefix"));
    if (!v) {
      g.kv.emplace_back();
      v = &g.kv.back();
      v->key = "tokenizer.ggml.add_space_prefix";
      v->type = 7;  // bool
      v->is_int = true;
    }
    v->i = 0;
  } else if (!pre.empty()) {
    gb::GgufValue *v = const_cast<gb::GgufValue *>(g.find("tokenizer.ggml.pre"));
    if (!v || !v->is_str) return GB_ERR_CORRUPT;
    v->s = pre;
  }
  return gb::tokdata_from_gguf(g, log, img);
}

std::unique_ptr<Vocab> build(std::vector<uint8_t> img) {
  auto v = std::make_unique<Vocab>();
  v->img = std::move(img);
  const gb::Logger log = quiet();
  if (gb::tokdata_view(v->img.data(), v->img.size(), log, &v->v) != GB_OK) return nullptr;
  const size_t mem_bytes = gb::tok_mem_size(v->v);
  v->mem.resize(mem_bytes / 8 + 1);
  if (gb::tok_init(&v->tok, v->v, v->mem.data(), mem_bytes, log) != GB_OK) return nullptr;
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

// A test-input file's strings (each ends with the separator line).
std::vector<std::string> split_inputs(const std::string &path) {
  const std::vector<uint8_t> b = gbt::read_file(path);
  const std::string all(b.begin(), b.end()), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t p; (p = all.find(sep, at)) != std::string::npos; at = p + sep.size()) out.push_back(all.substr(at, p - at));
  return out;
}

std::vector<std::string> inputs(const std::string &name) { return split_inputs(vocab_path(name) + ".inp"); }

std::vector<std::vector<int32_t>> read_ids(const std::string &path);

std::vector<std::vector<int32_t>> outputs(const std::string &name) {
  const std::string pre = pre_override(name);
  return read_ids(pre.empty() ? vocab_path(name) + ".out"
                              : std::string(GB_TEST_SOURCE_DIR) + "/fixtures/vocab/ggml-vocab-" + base_name(name) + ".as-" + pre + ".out");
}

// A reference file's ids: one line of space-separated ids per input.
std::vector<std::vector<int32_t>> read_ids(const std::string &path) {
  const std::vector<uint8_t> b = gbt::read_file(path);
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

gb_status collect(void *ctx, size_t b, size_t e) {
  static_cast<std::vector<uint16_t> *>(ctx)->push_back((uint16_t)(e - b));
  return GB_OK;
}

// Bytes of TOKENIZER data for one fixture, made once.
const std::vector<uint8_t> &image(const std::string &name) {
  const Vocab *v = vocab(name);
  static const std::vector<uint8_t> none;
  return v ? v->img : none;
}

gb_status validate(const std::vector<uint8_t> &img) { return gb::tokdata_validate(img.data(), img.size(), quiet()); }

}  // namespace

TEST(TokVocab, LlamaSpm) { check_vocab("llama-spm"); }
TEST(TokVocab, Phi3) { check_vocab("phi-3"); }
// Gemma's SentencePiece writes no space before the text: llama.cpp's ids
// for the same vocabulary with add_space_prefix overridden to false.
TEST(TokVocab, LlamaSpmWithoutSpacePrefix) { check_vocab("llama-spm@no-space-prefix"); }
TEST(TokVocab, Gpt2) { check_vocab("gpt-2"); }
TEST(TokVocab, Falcon) { check_vocab("falcon"); }
TEST(TokVocab, Starcoder) { check_vocab("starcoder"); }
TEST(TokVocab, DeepseekLlm) { check_vocab("deepseek-llm"); }
TEST(TokVocab, DeepseekCoder) { check_vocab("deepseek-coder"); }
// No gpt-4o or tekken vocabulary is at hand: the gpt-2 one read with their
// pre-tokenizers, against llama.cpp's ids for the same override.
TEST(TokVocab, Gpt4oOnTheGpt2Vocabulary) { check_vocab("gpt-2@gpt-4o"); }
TEST(TokVocab, TekkenOnTheGpt2Vocabulary) { check_vocab("gpt-2@tekken"); }
// The same for the expressions whose ids on this vocabulary differ from the
// ones above (the others give gpt-4o's, qwen2's or gpt-2's ids here).
TEST(TokVocab, MoreExpressionsOnTheGpt2Vocabulary) {
  for (const char *pre : {"qwen35", "deepseek-v3", "chameleon", "superbpe", "bloom", "viking", "afmoe", "tiny_aya"})
    check_vocab(std::string("gpt-2@") + pre);
}

// A Gemma-4-style vocabulary (tokenizer.ggml.model "gemma4": BPE over UTF-8
// characters, spaces as U+2581, no split but at newline runs, <0xHH> byte
// tokens) made for this repository (fixtures/vocab, README.md there): llama.cpp's
// ids for the shared test strings and for this repository's own strings
// (newline runs in and out of the vocabulary, space runs, user-defined and
// control token texts, ill-formed UTF-8, characters only bytes can spell),
// without and with BOS and special-token parsing.
TEST(TokVocab, Gemma4Synthetic) {
  const Vocab *v = vocab("gemma4-synth");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->v.kind, (uint32_t)gb::kTokKindBpeUtf8);
  EXPECT_EQ(v->v.pre, (uint32_t)gb::kPreGemma4);
  EXPECT_TRUE(v->v.flags & gb::kTokFlagAddBos);
  EXPECT_EQ(v->v.special[gb::kTokBos], 2);
  EXPECT_EQ(v->v.special[gb::kTokEot], 6);  // <turn|>
  uint32_t n = 0;
  const uint8_t *nl = v->v.piece((uint32_t)v->v.special[gb::kTokNl], &n);
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(nl), n), "\n");
  const std::vector<std::string> shared = split_inputs(gbt::shared_path("fixtures/vocab/ggml-vocab-phi-3.gguf.inp"));
  const std::vector<std::vector<int32_t>> want = outputs("gemma4-synth");
  ASSERT_EQ(shared.size(), 46u);
  ASSERT_EQ(want.size(), 46u);
  int pass = 0;
  for (size_t i = 0; i < shared.size(); i++) {
    std::vector<int32_t> got;
    ASSERT_EQ(encode(v->tok, shared[i], 0, &got), GB_OK) << i;
    if (got == want[i]) pass++;
    else ADD_FAILURE() << "#" << i << " '" << shared[i] << "'\n  want " << show(v->tok, want[i]) << "\n  got  " << show(v->tok, got);
    EXPECT_EQ(decode(v->tok, got, 0), shared[i]) << "#" << i;  // every string is well-formed UTF-8
  }
  const std::string dir = std::string(GB_TEST_SOURCE_DIR) + "/fixtures/vocab/";
  const std::vector<std::string> extra = split_inputs(dir + "gemma4-synth-extra.inp");
  const std::vector<std::vector<int32_t>> plain = read_ids(dir + "gemma4-synth-extra.out"),
                                          special = read_ids(dir + "gemma4-synth-extra.special.out");
  ASSERT_EQ(extra.size(), 19u);
  ASSERT_EQ(plain.size(), extra.size());
  ASSERT_EQ(special.size(), extra.size());
  for (size_t i = 0; i < extra.size(); i++) {
    std::vector<int32_t> got;
    ASSERT_EQ(encode(v->tok, extra[i], 0, &got), GB_OK) << i;
    if (got == plain[i]) pass++;
    else ADD_FAILURE() << "extra #" << i << "\n  want " << show(v->tok, plain[i]) << "\n  got  " << show(v->tok, got);
    ASSERT_EQ(encode(v->tok, extra[i], gb::kTokEncAddBos | gb::kTokEncParseSpecial, &got), GB_OK) << i;
    if (got == special[i]) pass++;
    else ADD_FAILURE() << "extra #" << i << " (BOS, special)\n  want " << show(v->tok, special[i]) << "\n  got  " << show(v->tok, got);
  }
  // Round trips of the repository's strings (special texts kept): all but
  // the ill-formed one (#9, U+FFFD in its place) and the one with U+2581
  // written in the text (#12: it reads back as a space, as llama.cpp's does).
  for (size_t i = 0; i < extra.size(); i++) {
    std::vector<int32_t> got;
    ASSERT_EQ(encode(v->tok, extra[i], gb::kTokEncParseSpecial, &got), GB_OK) << i;
    const std::string back = decode(v->tok, got, gb::kTokDecSpecial);
    std::string expect = extra[i];
    for (size_t at; (at = expect.find("\xE2\x96\x81")) != std::string::npos;) expect.replace(at, 3, " ");
    if (i == 9) EXPECT_EQ(back, "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes \xEF\xBF\xBD end \xEF\xBF\xBD\xEF\xBF\xBD");
    else EXPECT_EQ(back, expect) << "extra #" << i;
  }
  // Control and unknown tokens read as nothing without kTokDecSpecial.
  std::vector<int32_t> ids;
  ASSERT_EQ(encode(v->tok, "<unk>a<|turn>", gb::kTokEncParseSpecial, &ids), GB_OK);
  EXPECT_EQ(decode(v->tok, ids, 0), "a");
  printf("[ vocab    ] gemma4-synth: %d/%zu id lists exact\n", pass, shared.size() + 2 * extra.size());
}

// What the builder reads for gemma4: BOS whatever the key says; the gemma4
// model's pre-tokenizer whatever tokenizer.ggml.pre says; a gpt2 model whose
// pre-tokenizer is gemma4 runs as gemma4 does (byte-level BOS/EOS defaults).
TEST(TokVocab, Gemma4Keys) {
  gb::InputFile f;
  const gb::Logger log = quiet();
  ASSERT_EQ(f.open(vocab_path("gemma4-synth").c_str(), log, "vocabulary"), GB_OK);
  gb::GgufFile g;
  ASSERT_EQ(gb::gguf_parse(f, log, &g), GB_OK);
  auto find = [&](const char *key) -> gb::GgufValue * {
    for (gb::GgufValue &kv : g.kv)
      if (kv.key == key) return &kv;
    g.kv.emplace_back();
    g.kv.back().key = key;
    return &g.kv.back();
  };
  auto view = [&](std::vector<uint8_t> *img, gb::TokView *tv) {
    ASSERT_EQ(gb::tokdata_from_gguf(g, log, img), GB_OK);
    ASSERT_EQ(gb::tokdata_view(img->data(), img->size(), log, tv), GB_OK);
  };
  gb::GgufValue *bos = find("tokenizer.ggml.add_bos_token");
  bos->is_int = true;
  bos->type = 7;
  bos->i = 0;
  gb::GgufValue *pre = find("tokenizer.ggml.pre");
  pre->is_str = true;
  pre->is_int = false;
  pre->type = 8;
  pre->s = "qwen2";
  std::vector<uint8_t> img;
  gb::TokView tv;
  view(&img, &tv);
  EXPECT_EQ(tv.kind, (uint32_t)gb::kTokKindBpeUtf8);
  EXPECT_EQ(tv.pre, (uint32_t)gb::kPreGemma4);
  EXPECT_TRUE(tv.flags & gb::kTokFlagAddBos);
  find("tokenizer.ggml.model")->s = "gpt2";
  EXPECT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_OK);
  view(&img, &tv);
  EXPECT_EQ(tv.kind, (uint32_t)gb::kTokKindBpe);  // qwen2's expressions over the byte-level alphabet
  pre->s = "gemma4";
  g.kv.erase(std::remove_if(g.kv.begin(), g.kv.end(), [](const gb::GgufValue &kv) { return kv.key == "tokenizer.ggml.bos_token_id"; }),
             g.kv.end());
  view(&img, &tv);
  EXPECT_EQ(tv.kind, (uint32_t)gb::kTokKindBpeUtf8);
  EXPECT_TRUE(tv.flags & gb::kTokFlagAddBos);
  EXPECT_EQ(tv.special[gb::kTokBos], 11);  // the gpt2 model's default
  find("tokenizer.ggml.model")->s = "gemma4";
  view(&img, &tv);
  EXPECT_EQ(tv.special[gb::kTokBos], -1);  // the gemma4 model has none without the key
  g.has_merges = false;
  EXPECT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_ERR_CORRUPT);
}

// llama.cpp's own splits (its regex splitter, byte lengths of the words,
// empty words dropped) of the shared gpt-2 test inputs followed by this
// repository's pretok-extra.inp, for every pre-tokenizer expression, in
// fixtures/vocab/pretok-splits.txt: "## NAME" and then a line per input.
TEST(TokPretok, SplitsLikeLlamaCpp) {
  std::vector<std::string> texts = split_inputs(vocab_path("gpt-2") + ".inp");
  for (const std::string &t : split_inputs(std::string(GB_TEST_SOURCE_DIR) + "/fixtures/vocab/pretok-extra.inp"))
    texts.push_back(t);
  ASSERT_EQ(texts.size(), 46u + 25u);
  const std::vector<uint8_t> b = gbt::read_file(std::string(GB_TEST_SOURCE_DIR) + "/fixtures/vocab/pretok-splits.txt");
  const std::string all(b.begin(), b.end());
  std::vector<bool> seen(gb::kPreCount, false);
  size_t at = 0, sections = 0;
  while ((at = all.find("## ", at)) != std::string::npos) {
    const size_t name_end = all.find('\n', at);
    const std::string name = all.substr(at + 3, name_end - at - 3);
    const gb::PretokInfo info = gb::pretok_from_name(name.c_str());
    ASSERT_GE(info.id, 0) << name;
    seen[(size_t)info.id] = true;
    sections++;
    size_t line = name_end + 1;
    for (size_t i = 0; i < texts.size(); i++) {
      const size_t eol = all.find('\n', line);
      ASSERT_NE(eol, std::string::npos) << name << " #" << i;
      std::vector<uint16_t> want, got;
      for (size_t k = line; k < eol;) {
        want.push_back((uint16_t)strtoul(all.c_str() + k, nullptr, 10));
        k = all.find(' ', k);
        k = k == std::string::npos || k > eol ? eol : k + 1;
      }
      line = eol + 1;
      ASSERT_EQ(gb::pretok_split((uint32_t)info.id, reinterpret_cast<const uint8_t *>(texts[i].data()), texts[i].size(),
                                 collect, &got),
                GB_OK);
      EXPECT_EQ(got, want) << name << " #" << i << " '" << texts[i] << "'";
    }
    at = line;
  }
  EXPECT_EQ(sections, 26u);
  // gemma4's one stage (newline runs, the rest) is checked below and by
  // TokVocab.Gemma4Synthetic's ids.
  for (uint32_t pre = gb::kPreDefault; pre < gb::kPreCount; pre++)
    EXPECT_TRUE(seen[pre] || pre == gb::kPreGemma4) << gb::pretok_name(pre);
  const struct {
    const char *text;
    std::vector<uint16_t> lengths;
  } runs[] = {{"a\n\nb c\n", {1, 2, 3, 1}}, {"\n", {1}}, {"no newline", {10}}, {"\n\n\nx\r\n\r", {3, 2, 1, 1}}, {"", {}}};
  for (const auto &r : runs) {
    std::vector<uint16_t> got;
    ASSERT_EQ(gb::pretok_split(gb::kPreGemma4, reinterpret_cast<const uint8_t *>(r.text), strlen(r.text), collect, &got), GB_OK);
    EXPECT_EQ(got, r.lengths) << r.text;
  }
}

TEST(TokPretok, Names) {
  EXPECT_EQ(gb::pretok_from_name("gpt-4o").id, (int32_t)gb::kPreGpt4o);
  EXPECT_EQ(gb::pretok_from_name("tekken").id, (int32_t)gb::kPreTekken);
  EXPECT_TRUE(gb::pretok_from_name("tekken").ignore_merges);
  EXPECT_EQ(gb::pretok_from_name("lfm2").id, (int32_t)gb::kPreLlama3);
  EXPECT_TRUE(gb::pretok_from_name("lfm2").add_bos);
  EXPECT_EQ(gb::pretok_from_name("glm4").id, (int32_t)gb::kPreLlama3);
  EXPECT_FALSE(gb::pretok_from_name("glm4").add_bos);
  EXPECT_EQ(gb::pretok_from_name("exaone4").id, (int32_t)gb::kPreGpt2);
  EXPECT_EQ(gb::pretok_from_name("kormo").id, (int32_t)gb::kPreQwen2);
  EXPECT_EQ(gb::pretok_from_name("deepseek-coder").id, (int32_t)gb::kPreDeepseekCoder);
  EXPECT_EQ(gb::pretok_from_name("llama-bpe").id, (int32_t)gb::kPreLlama3);
  EXPECT_TRUE(gb::pretok_from_name("llama-bpe").ignore_merges);
  EXPECT_EQ(gb::pretok_from_name("qwen2").id, (int32_t)gb::kPreQwen2);
  EXPECT_EQ(gb::pretok_from_name("smollm").id, (int32_t)gb::kPreStarcoder);
  EXPECT_EQ(gb::pretok_from_name("deepseek-llm").id, (int32_t)gb::kPreDeepseekLlm);
  EXPECT_EQ(gb::pretok_from_name("gpt-2").id, (int32_t)gb::kPreGpt2);
  EXPECT_EQ(gb::pretok_from_name("default").id, (int32_t)gb::kPreDefault);
  EXPECT_EQ(gb::pretok_from_name("falcon").id, (int32_t)gb::kPreFalcon);
  EXPECT_EQ(gb::pretok_from_name("qwen35").id, (int32_t)gb::kPreQwen35);
  EXPECT_EQ(gb::pretok_from_name("grok-2").id, (int32_t)gb::kPreQwen2);
  EXPECT_EQ(gb::pretok_from_name("cohere2moe").id, (int32_t)gb::kPreTinyAya);
  EXPECT_STREQ(gb::pretok_name(gb::kPreTinyAya), "tiny_aya");
  EXPECT_STREQ(gb::pretok_name(gb::kPreDeepseekV3), "deepseek-v3");
  EXPECT_TRUE(gb::pretok_from_name("minicpm5").ignore_merges);
  EXPECT_TRUE(gb::pretok_from_name("chameleon").add_bos);
  // BPE on raw UTF-8 (no GPT-2 byte alphabet): gemma4's, the others not handled here.
  EXPECT_EQ(gb::pretok_from_name("gemma4").id, (int32_t)gb::kPreGemma4);
  EXPECT_TRUE(gb::pretok_from_name("gemma4").add_bos);
  EXPECT_STREQ(gb::pretok_name(gb::kPreGemma4), "gemma4");
  for (const char *raw : {"sarvam-moe", "whitespace", "granite-embed-multi-311m"})
    EXPECT_EQ(gb::pretok_from_name(raw).id, -1) << raw;
  EXPECT_EQ(gb::pretok_from_name("no-such-pre").id, -1);
  EXPECT_EQ(gb::pretok_from_name(nullptr).id, -1);
  EXPECT_STREQ(gb::pretok_name(gb::kPreFalcon), "falcon");
  EXPECT_STREQ(gb::pretok_name(999), "unknown");
  std::vector<uint16_t> got;
  EXPECT_EQ(gb::pretok_split(gb::kPreNone, reinterpret_cast<const uint8_t *>("a"), 1, collect, &got), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb::pretok_split(gb::kPreCount, reinterpret_cast<const uint8_t *>("a"), 1, collect, &got), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb::pretok_split(gb::kPreGpt2, reinterpret_cast<const uint8_t *>("a"), 1, nullptr, &got), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb::pretok_split(gb::kPreGpt2, nullptr, 1, collect, &got), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::pretok_split(gb::kPreGpt2, nullptr, 0, collect, &got), GB_OK);
  EXPECT_TRUE(got.empty());
}

TEST(TokUnicode, Classes) {
  EXPECT_TRUE(ucp_is_letter('a'));
  EXPECT_TRUE(ucp_is_letter(0x4E2D));   // 中
  EXPECT_TRUE(ucp_is_number(0x0663));   // Arabic-Indic three
  EXPECT_TRUE(ucp_is_number(0x216B));   // Roman numeral twelve (Nl)
  EXPECT_TRUE(ucp_is_space(0x3000));
  EXPECT_TRUE(ucp_is_space(0x85));
  EXPECT_FALSE(ucp_is_space(0x1C));     // a separator control, not White_Space
  EXPECT_FALSE(ucp_is_space(0x200B));   // zero width space is Cf
  EXPECT_EQ(ucp_group(0x0301), gb::kUcMark);
  EXPECT_EQ(ucp_group('$'), gb::kUcSymbol);
  EXPECT_EQ(ucp_group(0x110000), gb::kUcUndefined);
  size_t adv;
  const uint8_t bad[] = {0x80, 0xC3, 0x28, 0xF8, 0xE2, 0x82, 0xF4, 0x90, 0x80, 0x80};
  EXPECT_EQ(gb::utf8_decode(bad, 1, &adv), 0xFFFDu);
  EXPECT_EQ(adv, 1u);
  EXPECT_EQ(gb::utf8_decode(bad + 1, 2, &adv), 0xFFFDu);  // bad continuation
  EXPECT_EQ(adv, 1u);
  EXPECT_EQ(gb::utf8_decode(bad + 3, 1, &adv), 0xFFFDu);
  EXPECT_EQ(gb::utf8_decode(bad + 4, 2, &adv), 0xFFFDu);  // cut short
  EXPECT_EQ(adv, 1u);
  EXPECT_EQ(gb::utf8_decode(bad + 6, 4, &adv), 0xFFFDu);  // above U+10FFFF
  EXPECT_EQ(adv, 4u);
  const uint8_t euro[] = {0xE2, 0x82, 0xAC};
  EXPECT_EQ(gb::utf8_decode(euro, 3, &adv), 0x20ACu);
  EXPECT_EQ(adv, 3u);
  for (int b = 0; b < 256; b++) EXPECT_EQ(gb::bytelevel_byte(gb::bytelevel_cp((uint8_t)b)), b);
  EXPECT_EQ(gb::bytelevel_cp(' '), 0x120u);  // 'Ġ'
  EXPECT_TRUE(gb::deepseek_letter(0x212A));  // KELVIN SIGN, in the regex's own ranges
  EXPECT_FALSE(gb::deepseek_letter(0x4E2D));
}

TEST(TokEncode, SpecialTokensAndFlags) {
  const Vocab *g = vocab("gpt-2");
  ASSERT_NE(g, nullptr);
  std::vector<int32_t> ids;
  ASSERT_EQ(encode(g->tok, "a<|endoftext|>b", gb::kTokEncParseSpecial, &ids), GB_OK);
  EXPECT_EQ(ids, (std::vector<int32_t>{64, 50256, 65}));
  ASSERT_EQ(encode(g->tok, "a<|endoftext|>b", 0, &ids), GB_OK);  // control tokens stay text
  EXPECT_GT(ids.size(), 3u);
  for (int32_t id : ids) EXPECT_NE(id, 50256);
  EXPECT_EQ(decode(g->tok, ids, 0), "a<|endoftext|>b");
  ASSERT_EQ(encode(g->tok, "a", gb::kTokEncAddBos | gb::kTokEncAddEos, &ids), GB_OK);
  EXPECT_EQ(ids, (std::vector<int32_t>{50256, 64, 50256}));
  EXPECT_EQ(decode(g->tok, ids, 0), "a");
  EXPECT_EQ(decode(g->tok, ids, gb::kTokDecSpecial), "<|endoftext|>a<|endoftext|>");

  const Vocab *s = vocab("llama-spm");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(encode(s->tok, "Hello", gb::kTokEncAddBos, &ids), GB_OK);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 15043}));
  ASSERT_EQ(encode(s->tok, "Hello", gb::kTokEncNoSpacePrefix, &ids), GB_OK);
  EXPECT_EQ(ids, (std::vector<int32_t>{10994}));
  ASSERT_EQ(encode(s->tok, "<s>Hello</s>", gb::kTokEncParseSpecial, &ids), GB_OK);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 15043, 2}));  // a space prefix again after a special token

  // phi-3 marks </s> user-defined: split out even without parse_special
  const Vocab *p = vocab("phi-3");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(encode(p->tok, "a</s>b", 0, &ids), GB_OK);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 2), ids.end());
  ASSERT_EQ(encode(p->tok, "<|end|>", 0, &ids), GB_OK);
  EXPECT_EQ(std::find(ids.begin(), ids.end(), 32007), ids.end());
  ASSERT_EQ(encode(p->tok, "<|end|>", gb::kTokEncParseSpecial, &ids), GB_OK);
  EXPECT_EQ(ids, (std::vector<int32_t>{32007}));
}

TEST(TokEncode, LossyCases) {
  // byte-level BPE: an invalid byte becomes U+FFFD, as in llama.cpp
  const Vocab *g = vocab("gpt-2");
  ASSERT_NE(g, nullptr);
  std::vector<int32_t> ids;
  ASSERT_EQ(encode(g->tok, "a\xff" "b", 0, &ids), GB_OK);
  EXPECT_EQ(decode(g->tok, ids, 0), "a\xEF\xBF\xBD" "b");
  // SentencePiece: U+2581 in the text is the space piece
  const Vocab *s = vocab("llama-spm");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(encode(s->tok, "a\xE2\x96\x81" "b", 0, &ids), GB_OK);
  EXPECT_EQ(decode(s->tok, ids, gb::kTokDecStripSpace), "a b");
  // ... while invalid UTF-8 survives through <0xHH> tokens
  ASSERT_EQ(encode(s->tok, "\xff\xc3(\x80", 0, &ids), GB_OK);
  EXPECT_EQ(decode(s->tok, ids, gb::kTokDecStripSpace), "\xff\xc3(\x80");
}

TEST(TokEncode, LongWordsStayFast) {
  const char *names[] = {"llama-spm", "gpt-2", "deepseek-llm"};
  for (const char *name : names) {
    const Vocab *v = vocab(name);
    ASSERT_NE(v, nullptr);
    for (const std::string &text : {std::string(200000, 'a'), std::string(200000, ' '), std::string(100000, '7'),
                                    std::string(60000, '\xff')}) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<int32_t> ids;
      ASSERT_EQ(encode(v->tok, text, 0, &ids), GB_OK);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(s, 5.0) << name << ": " << text.size() << " bytes took " << s << " s";
      EXPECT_FALSE(ids.empty());
    }
  }
}

TEST(TokEncode, NoAllocationAndThreadSafe) {
  const Vocab *v = vocab("deepseek-llm");
  const Vocab *s = vocab("phi-3");
  ASSERT_TRUE(v && s);
  const std::vector<std::string> in = inputs("deepseek-llm");
  std::string all;
  for (const std::string &x : in) all += x;
  std::vector<int32_t> buf(gb::tok_encode_capacity(all.size()));
  std::vector<char> text(8 * all.size() + 64);
  size_t n = 0, m = 0;
  gbt::alloc_count_start();
  const gb_status a = gb::tok_encode(v->tok, all.data(), all.size(), gb::kTokEncAddBos, buf.data(), buf.size(), &n);
  const gb_status b = gb::tok_decode(v->tok, buf.data(), n, 0, text.data(), text.size(), &m);
  size_t n2 = 0;
  const gb_status c = gb::tok_encode(s->tok, all.data(), all.size(), gb::kTokEncParseSpecial, buf.data(), buf.size(), &n2);
  const uint64_t allocs = gbt::alloc_count_stop();
  EXPECT_EQ(a, GB_OK);
  EXPECT_EQ(b, GB_OK);
  EXPECT_EQ(c, GB_OK);
  EXPECT_EQ(allocs, 0u);
  if (!gbt::threads_available()) return;
  std::vector<int32_t> ref;
  ASSERT_EQ(encode(v->tok, all, 0, &ref), GB_OK);
  std::vector<std::thread> th;
  std::vector<int> same(4, 0);
  for (int k = 0; k < 4; k++)
    th.emplace_back([&, k] {
      for (int r = 0; r < 20; r++) {
        std::vector<int32_t> b2(gb::tok_encode_capacity(all.size()));
        size_t nn = 0;
        if (gb::tok_encode(v->tok, all.data(), all.size(), 0, b2.data(), b2.size(), &nn) == GB_OK &&
            std::vector<int32_t>(b2.begin(), b2.begin() + (long)nn) == ref)
          same[k]++;
      }
    });
  for (auto &t : th) t.join();
  for (int k = 0; k < 4; k++) EXPECT_EQ(same[k], 20);
}

TEST(TokEncode, Misuse) {
  const Vocab *v = vocab("gpt-2");
  ASSERT_NE(v, nullptr);
  const gb::Tok &t = v->tok;
  int32_t out[256];
  size_t n = 99;
  EXPECT_EQ(gb::tok_encode(t, "ab", 2, 0, out, 256, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_encode(t, nullptr, 2, 0, out, 256, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_encode(t, "ab", 2, 0, nullptr, 256, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_encode(t, "ab", 2, 1u << 20, out, 256, &n), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb::tok_encode(t, nullptr, 0, 0, out, 256, &n), GB_OK);
  EXPECT_EQ(n, 0u);
  // too small: the needed capacity comes back
  EXPECT_EQ(gb::tok_encode(t, "ab", 2, 0, out, 3, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, gb::tok_encode_capacity(2));
  EXPECT_EQ(gb::tok_encode(t, "ab", 2, 0, nullptr, 0, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(gb::tok_encode_capacity(SIZE_MAX / 2), SIZE_MAX);
  EXPECT_EQ(gb::tok_encode(t, "ab", SIZE_MAX / 2, 0, out, 256, &n), GB_ERR_BUFFER_TOO_SMALL);
  ASSERT_LE(gb::tok_encode_capacity(2), 256u);
  EXPECT_EQ(gb::tok_encode(t, "ab", 2, 0, out, 256, &n), GB_OK);
  EXPECT_EQ(n, 1u);
  // an uninitialised tokenizer
  gb::Tok blank;
  EXPECT_EQ(gb::tok_encode(blank, "ab", 2, 0, out, 256, &n), GB_ERR_BAD_STATE);
  const char *p;
  size_t len;
  EXPECT_EQ(gb::tok_piece(blank, 0, 0, &p, &len), GB_ERR_BAD_STATE);
  // pieces
  EXPECT_EQ(gb::tok_piece(t, -1, 0, &p, &len), GB_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(gb::tok_piece(t, (int32_t)v->v.n_tokens, 0, &p, &len), GB_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(gb::tok_piece(t, 0, 0, nullptr, &len), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_piece(t, 0, 0, &p, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_piece(t, 0, 1u << 9, &p, &len), GB_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(gb::tok_piece(t, 220, 0, &p, &len), GB_OK);  // 'Ġ' is a space
  EXPECT_EQ(std::string(p, len), " ");
  ASSERT_EQ(gb::tok_piece(t, 50256, 0, &p, &len), GB_OK);  // control: nothing unless asked
  EXPECT_EQ(len, 0u);
  // decoding
  const int32_t ids[] = {15496, 995};  // "Hello world"
  char buf[32];
  EXPECT_EQ(gb::tok_decode(t, ids, 2, 0, buf, 4, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 11u);
  EXPECT_EQ(gb::tok_decode(t, ids, 2, 0, buf, sizeof buf, &n), GB_OK);
  EXPECT_EQ(std::string(buf, n), "Hello world");
  EXPECT_EQ(gb::tok_decode(t, ids, 2, 0, buf, sizeof buf, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_decode(t, nullptr, 2, 0, buf, sizeof buf, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_decode(t, ids, 2, 0, nullptr, 5, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_decode(t, ids, 2, 1u << 7, buf, sizeof buf, &n), GB_ERR_INVALID_ARGUMENT);
  const int32_t bad[] = {15496, -5};
  EXPECT_EQ(gb::tok_decode(t, bad, 2, 0, buf, sizeof buf, &n), GB_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(gb::tok_find_piece(t, reinterpret_cast<const uint8_t *>("Hello"), 5), 15496);
  EXPECT_EQ(gb::tok_find_piece(t, nullptr, 5), -1);
  EXPECT_EQ(gb::tok_find_piece(blank, reinterpret_cast<const uint8_t *>("Hello"), 5), -1);
  // init
  const gb::Logger log = quiet();
  gb::Tok t2;
  const size_t mem_bytes = gb::tok_mem_size(v->v);
  std::vector<uint64_t> mem(mem_bytes / 8 + 2);
  EXPECT_EQ(gb::tok_init(nullptr, v->v, mem.data(), mem_bytes, log), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_init(&t2, v->v, nullptr, mem_bytes, log), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tok_init(&t2, v->v, reinterpret_cast<uint8_t *>(mem.data()) + 4, mem_bytes, log), GB_ERR_ALIGNMENT);
  EXPECT_EQ(gb::tok_init(&t2, gb::TokView(), mem.data(), mem_bytes, log), GB_ERR_CORRUPT);
  EXPECT_EQ(gb::tok_init(&t2, v->v, mem.data(), mem_bytes - 1, log), GB_ERR_CORRUPT) << "memory smaller than the tables";
  EXPECT_EQ(gb::tokdata_view(v->img.data(), v->img.size(), log, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tokdata_validate(nullptr, 10, log), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tokdata_validate(nullptr, 0, log), GB_ERR_TRUNCATED);
}

TEST(TokData, Malformed) {
  for (const char *name : {"gpt-2", "llama-spm", "gemma4-synth"}) {
    const std::vector<uint8_t> &good = image(name);
    ASSERT_FALSE(good.empty());
    ASSERT_EQ(validate(good), GB_OK);
    // truncations anywhere
    for (size_t cut : {(size_t)0, (size_t)3, (size_t)4, (size_t)100, (size_t)127, (size_t)128, (size_t)200, good.size() / 3,
                       good.size() / 2, good.size() - 1})
      EXPECT_NE(validate(std::vector<uint8_t>(good.begin(), good.begin() + (long)cut)), GB_OK) << name << " cut at " << cut;
    struct Edit {
      size_t at;
      int bytes;
      uint64_t value;
      gb_status want;
      const char *what;
    };
    const uint32_t kind = gb::ld_u32(good.data() + 8);
    const bool bpe = kind != gb::kTokKindSpm;
    const uint64_t off_pieces = gb::ld_u64(good.data() + 64), off_merges = gb::ld_u64(good.data() + 104);
    std::vector<Edit> edits = {
        {0, 4, 0x46554747, GB_ERR_BAD_MAGIC, "magic"},
        {4, 4, 2, GB_ERR_UNSUPPORTED_VERSION, "version"},
        {8, 4, 4, GB_ERR_CORRUPT, "kind"},
        {12, 4, 99, GB_ERR_CORRUPT, "pre-tokenizer id"},
        {16, 4, 0, GB_ERR_CORRUPT, "no tokens"},
        {16, 4, 0xFFFFFFFFu, GB_ERR_CORRUPT, "n_tokens huge"},
        {16, 4, 300000, GB_ERR_TRUNCATED, "n_tokens past the arrays"},
        {20, 4, 0xFFFFFFFFu, GB_ERR_CORRUPT, "n_merges huge"},
        {24, 4, 1u << 7, GB_ERR_CORRUPT, "unknown flag"},
        {28, 4, 7, GB_ERR_CORRUPT, "max piece mismatch"},
        {32, 4, 0x7FFFFFFF, GB_ERR_CORRUPT, "bos out of range"},
        {36, 4, 0xFFFFFFFEu, GB_ERR_CORRUPT, "eos below -1"},
        {64, 8, 1ull << 40, GB_ERR_TRUNCATED, "piece offsets past the end"},
        {64, 8, 16, GB_ERR_CORRUPT, "piece offsets in the header"},
        {80, 8, ~0ull, GB_ERR_TRUNCATED, "piece bytes length"},
        {96, 8, good.size() - 2, GB_ERR_TRUNCATED, "types past the end"},
        {120, 8, 1ull << 40, GB_ERR_CORRUPT, "template length"},
        {off_pieces, 4, 1, GB_ERR_CORRUPT, "first piece offset"},
        {off_pieces + 8, 4, 0, GB_ERR_CORRUPT, "piece offsets out of order"},
    };
    if (kind == gb::kTokKindBpe) {
      edits.push_back({12, 4, gb::kPreGemma4, GB_ERR_CORRUPT, "byte-level BPE with gemma4's pre-tokenizer"});
    } else if (kind == gb::kTokKindBpeUtf8) {
      edits.push_back({12, 4, gb::kPreGpt2, GB_ERR_CORRUPT, "UTF-8 BPE with a byte-level pre-tokenizer"});
      edits.push_back({8, 4, gb::kTokKindBpe, GB_ERR_CORRUPT, "byte-level BPE kind with gemma4's pre-tokenizer"});
    }
    if (bpe) {
      edits.push_back({12, 4, 0, GB_ERR_CORRUPT, "BPE without pre-tokenizer"});
      edits.push_back({off_merges, 4, 0x7FFFFFF0, GB_ERR_CORRUPT, "merge left id"});
      edits.push_back({off_merges + 8, 4, 0xFFFFFFF0u, GB_ERR_CORRUPT, "merge result id"});
      edits.push_back({20, 4, 0x7FFFFF, GB_ERR_TRUNCATED, "n_merges past the end"});
    } else {
      edits.push_back({12, 4, gb::kPreGpt2, GB_ERR_CORRUPT, "SPM with a pre-tokenizer"});
      edits.push_back({20, 4, 1, GB_ERR_CORRUPT, "SPM with merges"});
    }
    for (const Edit &e : edits) {
      std::vector<uint8_t> b = good;
      for (int k = 0; k < e.bytes; k++) b[e.at + (size_t)k] = (uint8_t)(e.value >> (8 * k));
      EXPECT_EQ(validate(b), e.want) << name << ": " << e.what;
    }
    // a token type and a score out of range
    std::vector<uint8_t> b = good;
    b[gb::ld_u64(good.data() + 96) + 5] = 9;
    EXPECT_EQ(validate(b), GB_ERR_CORRUPT) << name << ": token type";
    b = good;
    gb::st_f32(b.data() + gb::ld_u64(good.data() + 88) + 4 * 7, NAN);
    EXPECT_EQ(validate(b), GB_ERR_CORRUPT) << name << ": NaN score";
  }
}

TEST(TokData, ConverterRefusesWhatItCannotTokenize) {
  gb::InputFile f;
  const gb::Logger log = quiet();
  ASSERT_EQ(f.open(vocab_path("gpt-2").c_str(), log, "vocabulary"), GB_OK);
  gb::GgufFile g;
  ASSERT_EQ(gb::gguf_parse(f, log, &g), GB_OK);
  EXPECT_EQ(g.tensors.size(), 0u);
  EXPECT_TRUE(g.has_merges);
  std::vector<uint8_t> img;
  ASSERT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_OK);
  auto set = [&](const char *key, const char *value) {
    for (gb::GgufValue &v : g.kv)
      if (v.key == key) v.s = value;
  };
  set("tokenizer.ggml.pre", "no-such-pre");
  EXPECT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_ERR_UNSUPPORTED_TYPE);
  set("tokenizer.ggml.pre", "llama-bpe");
  ASSERT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_OK);
  gb::TokView v;
  ASSERT_EQ(gb::tokdata_view(img.data(), img.size(), log, &v), GB_OK);
  EXPECT_EQ(v.pre, (uint32_t)gb::kPreLlama3);
  EXPECT_TRUE(v.flags & gb::kTokFlagIgnoreMerges);
  EXPECT_TRUE(v.flags & gb::kTokFlagAddBos);
  set("tokenizer.ggml.model", "bert");
  EXPECT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_ERR_UNSUPPORTED_TYPE);
  set("tokenizer.ggml.model", "gpt2");
  g.has_merges = false;
  EXPECT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_ERR_CORRUPT);
  g.has_merges = true;
  g.scores.assign(3, 0.0f);
  g.has_scores = true;
  EXPECT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_ERR_CORRUPT);
  g.has_scores = false;
  g.tokens.clear();
  EXPECT_EQ(gb::tokdata_from_gguf(g, log, &img), GB_ERR_CORRUPT);
  EXPECT_EQ(gb::tokdata_from_gguf(g, log, nullptr), GB_ERR_NULL_POINTER);

  // phi-3's chat template travels with the data
  const Vocab *p = vocab("phi-3");
  ASSERT_NE(p, nullptr);
  const std::string tmpl(reinterpret_cast<const char *>(p->v.chat_template), p->v.chat_template_len);
  EXPECT_NE(tmpl.find("<|assistant|>"), std::string::npos);
  EXPECT_EQ(p->v.special[gb::kTokBos], 1);
  EXPECT_EQ(p->v.special[gb::kTokEos], 32000);
  EXPECT_EQ(p->v.special[gb::kTokEot], 32007);  // <|end|>
  EXPECT_EQ(p->v.special[gb::kTokNl], 13);      // <0x0A>
  EXPECT_TRUE(p->v.flags & gb::kTokFlagAddSpacePrefix);
}
