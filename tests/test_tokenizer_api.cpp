// test_tokenizer_api.cpp — the public tokenizer handle (gearbx.h,
// "Tokenizer"): a .gbx converted from a GGUF carries its tokenizer (TOKENIZER
// section, version 4) and gb_tokenize runs it; the same image opened without a
// model (gb_convert_gguf_tokenizer + gb_tokenizer_open_memory) gives the same
// ids; older files (VOCAB only) keep the llama2.c path; misuse of every call.
#include <gtest/gtest.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bytes.h"
#include "convert_util.h"
#include "gguf_parse.h"
#include "sample_files.h"
#include "format.h"
#include "gearbx.h"
#include "gearbx_convert.h"
#include "test_util.h"
#include "tokenizer.h"

namespace {

std::string vocab_path(const char *name) {
  return gbt::shared_path((std::string("fixtures/vocab/ggml-vocab-") + name + ".gguf").c_str());
}

gb_convert_options quiet_convert() {
  gb_convert_options o;
  gb_convert_default_options(&o);
  o.log = gbt::quiet_log;
  return o;
}

// A standalone tokenizer from a GGUF, owning its image.
struct Standalone {
  void *image = nullptr;
  size_t size = 0;
  gb_tokenizer *tok = nullptr;
  gb_status open(const std::string &gguf) {
    const gb_convert_options o = quiet_convert();
    gb_status st = gb_convert_gguf_tokenizer(gguf.c_str(), &o, &image, &size);
    if (st != GB_OK) return st;
    const gb_model_options mo = gbt::quiet_model_options();
    return gb_tokenizer_open_memory(image, size, &mo, &tok);
  }
  ~Standalone() {
    gb_tokenizer_close(tok);
    gb_convert_free(image);
  }
};

std::vector<int32_t> encode(const gb_tokenizer *t, const std::string &s, uint32_t flags, gb_status *st_out = nullptr) {
  std::vector<int32_t> ids(GB_TOKENIZE_CAPACITY(s.size()));
  size_t n = 0;
  const gb_status st = gb_tokenizer_encode(t, s.data(), s.size(), flags, ids.data(), ids.size(), &n);
  if (st_out) *st_out = st;
  EXPECT_TRUE(st == GB_OK || st_out) << gb_status_str(st);
  ids.resize(st == GB_OK ? n : 0);
  return ids;
}

std::string decode(const gb_tokenizer *t, const std::vector<int32_t> &ids, uint32_t flags) {
  size_t need = 0;
  const gb_status st = gb_tokenizer_decode(t, ids.data(), ids.size(), flags, nullptr, 0, &need);
  EXPECT_EQ(st, need == 0 ? GB_OK : GB_ERR_BUFFER_TOO_SMALL);
  std::string out(need, '\0');
  size_t n = 0;
  EXPECT_EQ(gb_tokenizer_decode(t, ids.data(), ids.size(), flags, out.empty() ? nullptr : &out[0], out.size(), &n), GB_OK);
  EXPECT_EQ(n, need);
  return out;
}

const char *kTexts[] = {"Once upon a time, there was a little girl named Lily.", " leading space", "", "a\nb\n\n  c",
                        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\xff\xfe bad bytes", "1234567 numbers 3.14"};

}  // namespace

TEST(TokenizerApi, GgufModelCarriesItsTokenizer) {
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gguf_gbx().c_str(), &mo, &m), GB_OK);
  const gb_tokenizer *t = nullptr;
  ASSERT_EQ(gb_model_tokenizer(m, &t), GB_OK);
  gb_tokenizer_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(gb_tokenizer_get_info(t, &info), GB_OK);
  EXPECT_EQ(info.kind, GB_TOKENIZER_SPM);
  EXPECT_EQ(info.n_tokens, 512u);
  EXPECT_EQ(info.bos_id, 1);
  EXPECT_EQ(info.eos_id, 2);
  EXPECT_EQ(info.add_bos, 1u);  // SentencePiece's default (the file has no add_bos key)
  EXPECT_STREQ(info.pre, "");
  EXPECT_EQ(info.chat_template_bytes, 0u);
  const char *tpl = nullptr;
  size_t tl = 0;
  EXPECT_EQ(gb_tokenizer_chat_template(t, &tpl, &tl), GB_ERR_UNAVAILABLE);

  // The same file's tokenizer without the model: the same ids; and the
  // llama2.c tokenizer of the same vocabulary agrees on ordinary text.
  Standalone s;
  ASSERT_EQ(s.open(gbt::shared_path("models/stories260K.gguf")), GB_OK);
  gb_model *l2c = nullptr;
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &l2c), GB_OK);
  const gb_tokenizer *lt = nullptr;
  ASSERT_EQ(gb_model_tokenizer(l2c, &lt), GB_OK);
  info.struct_size = sizeof info;
  ASSERT_EQ(gb_tokenizer_get_info(lt, &info), GB_OK);
  EXPECT_EQ(info.kind, GB_TOKENIZER_LLAMA2C);
  for (const char *text : kTexts) {
    const std::string x = text;
    for (uint32_t f : {0u, (uint32_t)GB_TOKENIZE_ADD_BOS, (uint32_t)(GB_TOKENIZE_ADD_BOS | GB_TOKENIZE_ADD_EOS)}) {
      const std::vector<int32_t> a = encode(t, x, f);
      EXPECT_EQ(a, encode(s.tok, x, f)) << x;
      std::vector<int32_t> viamodel(GB_TOKENIZE_CAPACITY(x.size()));
      size_t n = 0;
      ASSERT_EQ(gb_tokenize(m, x.data(), x.size(), f, viamodel.data(), viamodel.size(), &n), GB_OK);
      viamodel.resize(n);
      EXPECT_EQ(a, viamodel);
      if (x.find('\xff') == std::string::npos) { EXPECT_EQ(a, encode(lt, x, f)) << x << " flags " << f; }
      if (f & GB_TOKENIZE_ADD_BOS) { EXPECT_EQ(a.front(), 1); }
      if (f & GB_TOKENIZE_ADD_EOS) { EXPECT_EQ(a.back(), 2); }
      // Decoding drops the space prefix and gives the text back.
      if (x.find('\xff') == std::string::npos) {
        EXPECT_EQ(decode(t, a, GB_DETOKENIZE_STRIP_SPACE), x);
        EXPECT_EQ(decode(lt, encode(lt, x, f), GB_DETOKENIZE_STRIP_SPACE), x);
      }
    }
  }
  // Token by token after BOS: the prefix space goes, as decode does.
  const std::vector<int32_t> ids = encode(t, "Once upon", GB_TOKENIZE_ADD_BOS);
  std::string streamed;
  for (size_t i = 1; i < ids.size(); i++) {
    const char *p;
    size_t n;
    ASSERT_EQ(gb_token_to_text(m, ids[i - 1], ids[i], &p, &n), GB_OK);
    streamed.append(p, n);
  }
  EXPECT_EQ(streamed, "Once upon");
  // Special tokens written in the text: only with PARSE_SPECIAL.
  EXPECT_EQ(encode(t, "</s>", GB_TOKENIZE_PARSE_SPECIAL | GB_TOKENIZE_NO_DUMMY_PREFIX), std::vector<int32_t>({2}));
  EXPECT_NE(encode(t, "</s>", GB_TOKENIZE_NO_DUMMY_PREFIX), std::vector<int32_t>({2}));
  gb_status st;
  EXPECT_TRUE(encode(lt, "</s>", GB_TOKENIZE_PARSE_SPECIAL, &st).empty());
  EXPECT_EQ(st, GB_ERR_UNAVAILABLE);
  int eog = -1;
  EXPECT_EQ(gb_tokenizer_is_eog(t, 2, &eog), GB_OK);
  EXPECT_EQ(eog, 1);
  EXPECT_EQ(gb_tokenizer_is_eog(t, 1, &eog), GB_OK);
  EXPECT_EQ(eog, 0);
  EXPECT_EQ(gb_tokenizer_is_eog(lt, 2, &eog), GB_OK);
  EXPECT_EQ(eog, 1);
  gb_model_close(l2c);
  gb_model_close(m);
}

TEST(TokenizerApi, VocabularyOnlyGgufs) {
  // Byte-level BPE vocabularies: kind, pre-tokenizer, special-token parsing,
  // end-of-generation ids, and a lossless round trip.
  for (const char *name : {"gpt-2", "starcoder", "falcon", "deepseek-llm"}) {
    Standalone s;
    ASSERT_EQ(s.open(vocab_path(name)), GB_OK) << name;
    gb_tokenizer_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_tokenizer_get_info(s.tok, &info), GB_OK);
    EXPECT_EQ(info.kind, GB_TOKENIZER_BPE) << name;
    EXPECT_NE(info.pre[0], '\0') << name;
    EXPECT_GT(info.n_tokens, 1000u);
    for (const char *text : kTexts) {
      const std::string x = text;
      if (x.find('\xff') != std::string::npos) continue;  // invalid UTF-8 becomes U+FFFD
      EXPECT_EQ(decode(s.tok, encode(s.tok, x, 0), 0), x) << name;
    }
    ASSERT_GE(info.eos_id, 0) << name;
    int eog = 0;
    EXPECT_EQ(gb_tokenizer_is_eog(s.tok, info.eos_id, &eog), GB_OK);
    EXPECT_EQ(eog, 1);
    // The EOS text, written in the text, is its id only with PARSE_SPECIAL.
    const char *p;
    size_t n;
    ASSERT_EQ(gb_tokenizer_decode(s.tok, &info.eos_id, 1, GB_DETOKENIZE_SPECIAL, nullptr, 0, &n), GB_ERR_BUFFER_TOO_SMALL);
    std::string eos_text(n, '\0');
    ASSERT_EQ(gb_tokenizer_decode(s.tok, &info.eos_id, 1, GB_DETOKENIZE_SPECIAL, &eos_text[0], n, &n), GB_OK);
    ASSERT_FALSE(eos_text.empty()) << name;
    EXPECT_EQ(encode(s.tok, "hi" + eos_text, GB_TOKENIZE_PARSE_SPECIAL).back(), info.eos_id) << name;
    EXPECT_NE(encode(s.tok, "hi" + eos_text, 0).back(), info.eos_id) << name;
    // Control tokens have no text unless asked for.
    ASSERT_EQ(gb_tokenizer_token_text(s.tok, -1, info.eos_id, &p, &n), GB_OK);
    EXPECT_EQ(n, 0u) << name;
  }
  // Phi-3 (SentencePiece) carries a chat template: the first Phi-3 one (BOS
  // text, no system turn, the assistant header after every user turn),
  // which renders unlike the built-in phi3 and so is not guessed.
  Standalone phi;
  ASSERT_EQ(phi.open(vocab_path("phi-3")), GB_OK);
  const char *tpl = nullptr;
  size_t tl = 0;
  ASSERT_EQ(gb_tokenizer_chat_template(phi.tok, &tpl, &tl), GB_OK);
  ASSERT_GT(tl, 16u);
  EXPECT_EQ(std::string(tpl, 16), "{{ bos_token }}{");
  gb_chat_template ct = GB_CHAT_TEMPLATE_NONE;
  EXPECT_EQ(gb_chat_template_detect(tpl, tl, &ct), GB_ERR_UNAVAILABLE);
  gb_tokenizer_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(gb_tokenizer_get_info(phi.tok, &info), GB_OK);
  EXPECT_EQ(info.kind, GB_TOKENIZER_SPM);
  EXPECT_EQ(info.chat_template_bytes, (uint64_t)tl);
  EXPECT_GE(info.eot_id, 0);  // <|end|>
  int eog = 0;
  EXPECT_EQ(gb_tokenizer_is_eog(phi.tok, info.eot_id, &eog), GB_OK);
  EXPECT_EQ(eog, 1);
  // A rendered chat turn tokenizes with its markers as single ids.
  const gb_chat_message msgs[] = {{"user", "Hello"}};
  char buf[256];
  size_t bn = 0;
  ASSERT_EQ(gb_chat_apply(GB_CHAT_TEMPLATE_PHI3, msgs, 1, 1, buf, sizeof buf, &bn), GB_OK);
  // (SentencePiece puts its space prefix after each special token, as
  // llama.cpp does, so the decoded text has a space after each marker.)
  const std::vector<int32_t> ids = encode(phi.tok, std::string(buf, bn), GB_TOKENIZE_PARSE_SPECIAL);
  EXPECT_EQ(decode(phi.tok, ids, GB_DETOKENIZE_SPECIAL | GB_DETOKENIZE_STRIP_SPACE),
            "<|user|> \nHello<|end|> \n<|assistant|> \n");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), info.eot_id), 1);
  EXPECT_GT(encode(phi.tok, std::string(buf, bn), 0).size(), ids.size() + 6) << "markers as text are many pieces";
}

TEST(TokenizerApi, OlderFilesStillOpen) {
  // A version-3 file (before TOKENIZER existed): the converted GGUF model with
  // its TOKENIZER entry re-tagged as a kind readers skip opens on its VOCAB.
  std::vector<uint8_t> img = gbt::read_file(gbt::stories260k_gguf_gbx());
  ASSERT_EQ(gb::ld_u32(&img[8]), gb::kGbxVersion);
  ASSERT_EQ(gb::kGbxVersion, 11u);
  gb::st_u32(&img[8], 3);
  auto open = [](std::vector<uint8_t> im, gb_tokenizer_kind *kind) {
    gbt::gbx_fix_crcs(im);
    void *buf = nullptr;
    if (posix_memalign(&buf, 64, im.size()) != 0) return GB_ERR_OUT_OF_MEMORY;
    memcpy(buf, im.data(), im.size());
    gb_model_options mo = gbt::quiet_model_options();
    gb_model *m = nullptr;
    gb_status st = gb_model_open_memory(buf, im.size(), &mo, &m);
    if (m) {
      const gb_tokenizer *t;
      gb_tokenizer_info info;
      info.struct_size = sizeof info;
      gb_model_tokenizer(m, &t);
      gb_tokenizer_get_info(t, &info);
      *kind = info.kind;
      gb_model_close(m);
    }
    free(buf);
    return st;
  };
  gb_tokenizer_kind kind = GB_TOKENIZER_MAX_ENUM;
  EXPECT_EQ(open(img, &kind), GB_ERR_CORRUPT);  // a TOKENIZER in a version-3 file
  size_t vocab_entry = 0;
  for (uint32_t i = 0; i < gb::ld_u32(&img[16]); i++) {
    uint8_t *e = &img[64 + 32 * i];
    if (gb::ld_u32(e) == gb::kSecTokenizer) gb::st_u32(e, 99);
    if (gb::ld_u32(e) == gb::kSecVocab) vocab_entry = 64 + 32 * i;
  }
  EXPECT_EQ(open(img, &kind), GB_OK);
  EXPECT_EQ(kind, GB_TOKENIZER_LLAMA2C);
  // Version 4 with a TOKENIZER and no VOCAB opens on the TOKENIZER; with
  // neither, the file is refused.
  img = gbt::read_file(gbt::stories260k_gguf_gbx());
  ASSERT_NE(vocab_entry, 0u);
  gb::st_u32(&img[vocab_entry], 98);
  EXPECT_EQ(open(img, &kind), GB_OK);
  EXPECT_EQ(kind, GB_TOKENIZER_SPM);
  for (uint32_t i = 0; i < gb::ld_u32(&img[16]); i++)
    if (gb::ld_u32(&img[64 + 32 * i]) == gb::kSecTokenizer) gb::st_u32(&img[64 + 32 * i], 97);
  EXPECT_EQ(open(img, &kind), GB_ERR_CORRUPT);
}

TEST(TokenizerApi, TokenizerSectionIsValidated) {
  // Damage inside the TOKENIZER bytes (CRCs refreshed): a status, no crash.
  const std::vector<uint8_t> img = gbt::read_file(gbt::stories260k_gguf_gbx());
  size_t off = 0, size = 0;
  for (uint32_t i = 0; i < gb::ld_u32(&img[16]); i++)
    if (gb::ld_u32(&img[64 + 32 * i]) == gb::kSecTokenizer) {
      off = (size_t)gb::ld_u64(&img[64 + 32 * i + 8]);
      size = (size_t)gb::ld_u64(&img[64 + 32 * i + 16]);
    }
  ASSERT_GT(size, 128u);
  struct Case {
    size_t at;
    uint32_t value;
    gb_status want;
  } cases[] = {{0, 0x12345678u, GB_ERR_BAD_MAGIC}, {4, 99, GB_ERR_UNSUPPORTED_VERSION}, {16, 511, GB_ERR_CORRUPT},
               {16, 513, GB_ERR_TRUNCATED},      {32, 600, GB_ERR_CORRUPT},             {8, 7, GB_ERR_CORRUPT}};
  for (const Case &c : cases) {
    std::vector<uint8_t> im = img;
    gb::st_u32(&im[off + c.at], c.value);
    gbt::gbx_fix_crcs(im);
    void *buf = nullptr;
    ASSERT_EQ(posix_memalign(&buf, 64, im.size()), 0);
    memcpy(buf, im.data(), im.size());
    gb_model_options mo = gbt::quiet_model_options();
    gb_model *m = nullptr;
    EXPECT_EQ(gb_model_open_memory(buf, im.size(), &mo, &m), c.want) << "byte " << c.at << " = " << c.value;
    EXPECT_EQ(m, nullptr);
    size_t need = 0;
    EXPECT_EQ(gb_model_mem_size(buf, im.size(), &mo, &need), c.want) << "byte " << c.at;
    free(buf);
  }
}

TEST(TokenizerApi, Misuse) {
  Standalone s;
  ASSERT_EQ(s.open(vocab_path("gpt-2")), GB_OK);
  const gb_tokenizer *t = s.tok;
  int32_t ids[64];
  size_t n = 0;
  const char *p = nullptr;
  int eog = 0;
  // NULLs.
  EXPECT_EQ(gb_model_tokenizer(nullptr, &t), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_encode(nullptr, "a", 1, 0, ids, 64, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_encode(t, nullptr, 1, 0, ids, 64, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_encode(t, "a", 1, 0, ids, 64, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_encode(t, "a", 1, 0, nullptr, 64, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_token_text(nullptr, -1, 0, &p, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_token_text(t, -1, 0, nullptr, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_decode(nullptr, ids, 1, 0, nullptr, 0, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_decode(t, nullptr, 1, 0, nullptr, 0, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_decode(t, ids, 0, 0, nullptr, 4, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_is_eog(nullptr, 0, &eog), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_is_eog(t, 0, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_chat_template(t, nullptr, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_get_info(t, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenize(nullptr, "a", 1, 0, ids, 64, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_token_to_text(nullptr, -1, 0, &p, &n), GB_ERR_NULL_POINTER);
  // Ranges and flags.
  EXPECT_EQ(gb_tokenizer_encode(t, "a", 1, 1u << 7, ids, 64, &n), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_tokenizer_decode(t, ids, 0, 1u << 5, nullptr, 0, &n), GB_ERR_INVALID_ARGUMENT);
  for (int32_t bad : {-1, 50257, INT32_MAX, INT32_MIN}) {
    EXPECT_EQ(gb_tokenizer_token_text(t, -1, bad, &p, &n), GB_ERR_TOKEN_OUT_OF_RANGE) << bad;
    EXPECT_EQ(gb_tokenizer_is_eog(t, bad, &eog), GB_ERR_TOKEN_OUT_OF_RANGE) << bad;
    const int32_t one[1] = {bad};
    EXPECT_EQ(gb_tokenizer_decode(t, one, 1, 0, nullptr, 0, &n), GB_ERR_TOKEN_OUT_OF_RANGE) << bad;
  }
  // Too small a buffer: the status and the capacity, never past cap.
  const std::string text = "hello world, hello world";
  std::vector<int32_t> small(8, -7);
  EXPECT_EQ(gb_tokenizer_encode(t, text.data(), text.size(), 0, small.data(), 4, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(n, 4u);
  EXPECT_LE(n, GB_TOKENIZE_CAPACITY(text.size()));
  for (size_t i = 4; i < small.size(); i++) EXPECT_EQ(small[i], -7);
  char out[4] = {'x', 'x', 'x', 'x'};
  const std::vector<int32_t> hello = encode(t, text, 0);
  EXPECT_EQ(gb_tokenizer_decode(t, hello.data(), hello.size(), 0, out, sizeof out, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, text.size());
  for (char c : out) EXPECT_EQ(c, 'x');
  // Struct sizes.
  gb_tokenizer_info info;
  info.struct_size = 4;
  EXPECT_EQ(gb_tokenizer_get_info(t, &info), GB_ERR_STRUCT_SIZE);
  info.struct_size = sizeof info + 8;
  EXPECT_EQ(gb_tokenizer_get_info(t, &info), GB_ERR_STRUCT_SIZE);
  // A shorter struct (an older caller) is filled up to its size only.
  struct {
    gb_tokenizer_info i;
    uint8_t guard[8];
  } older;
  memset(&older, 0xAB, sizeof older);
  older.i.struct_size = (uint32_t)offsetof(gb_tokenizer_info, chat_template_bytes);
  EXPECT_EQ(gb_tokenizer_get_info(t, &older.i), GB_OK);
  const uint8_t *tail = reinterpret_cast<const uint8_t *>(&older.i) + offsetof(gb_tokenizer_info, chat_template_bytes);
  for (size_t i = 0; i < sizeof older - offsetof(gb_tokenizer_info, chat_template_bytes); i++) EXPECT_EQ(tail[i], 0xAB);
  // No chat template in this vocabulary.
  size_t tl = 0;
  EXPECT_EQ(gb_tokenizer_chat_template(t, &p, &tl), GB_ERR_UNAVAILABLE);

  // Opening: bad images, memory of the caller's.
  gb_tokenizer *o = nullptr;
  const uint8_t junk[200] = {1, 2, 3};
  gb_model_options mo = gbt::quiet_model_options();
  EXPECT_EQ(gb_tokenizer_open_memory(nullptr, 10, &mo, &o), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_open_memory(junk, sizeof junk, &mo, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_open_memory(junk, sizeof junk, &mo, &o), GB_ERR_BAD_MAGIC);
  EXPECT_EQ(gb_tokenizer_open_memory(s.image, 100, &mo, &o), GB_ERR_TRUNCATED);
  EXPECT_EQ(gb_tokenizer_open_memory(s.image, s.size - 1, &mo, &o), GB_ERR_TRUNCATED);
  EXPECT_EQ(o, nullptr);
  size_t need = 0;
  EXPECT_EQ(gb_tokenizer_mem_size(nullptr, 1, &need), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_mem_size(s.image, s.size, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tokenizer_mem_size(junk, sizeof junk, &need), GB_ERR_BAD_MAGIC);
  ASSERT_EQ(gb_tokenizer_mem_size(s.image, s.size, &need), GB_OK);
  void *memp = nullptr;
  ASSERT_EQ(posix_memalign(&memp, 64, need + 64), 0);
  std::unique_ptr<void, decltype(&free)> hold(memp, free);
  uint8_t *mem = static_cast<uint8_t *>(memp);
  mo.mem = mem;
  mo.mem_bytes = need - 1;
  EXPECT_EQ(gb_tokenizer_open_memory(s.image, s.size, &mo, &o), GB_ERR_ARENA_TOO_SMALL);
  mo.mem = mem + 8;
  mo.mem_bytes = need;
  EXPECT_EQ(gb_tokenizer_open_memory(s.image, s.size, &mo, &o), GB_ERR_ALIGNMENT);
  EXPECT_EQ(o, nullptr);
  mo.mem = mem;
  mo.mem_bytes = need;
  std::vector<int32_t> ids2(GB_TOKENIZE_CAPACITY(text.size()));
  gbt::alloc_count_start();
  ASSERT_EQ(gb_tokenizer_open_memory(s.image, s.size, &mo, &o), GB_OK);
  ASSERT_EQ(gb_tokenizer_encode(o, text.data(), text.size(), 0, ids2.data(), ids2.size(), &n), GB_OK);
  EXPECT_EQ(gbt::alloc_count_stop(), 0u) << "caller memory: no allocation";
  ids2.resize(n);
  EXPECT_EQ(ids2, hello);
  gb_tokenizer_close(o);
  gb_tokenizer_close(nullptr);
  gb_model_options bad = gbt::quiet_model_options();
  bad.struct_size = 3;
  EXPECT_EQ(gb_tokenizer_open_memory(s.image, s.size, &bad, &o), GB_ERR_STRUCT_SIZE);

  // A model's own tokenizer is not closed by gb_tokenizer_close.
  gb_model *m = nullptr;
  gb_model_options mo2 = gbt::quiet_model_options();
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gguf_gbx().c_str(), &mo2, &m), GB_OK);
  const gb_tokenizer *mt = nullptr;
  ASSERT_EQ(gb_model_tokenizer(m, &mt), GB_OK);
  gb_tokenizer_close(const_cast<gb_tokenizer *>(mt));
  EXPECT_EQ(encode(mt, "still here", 0).empty(), false);
  EXPECT_EQ(gb_model_tokenizer(m, nullptr), GB_ERR_NULL_POINTER);
  gb_model_close(m);

  // The converter's entry: bad paths and files.
  void *im = nullptr;
  size_t isz = 0;
  const gb_convert_options co = quiet_convert();
  EXPECT_EQ(gb_convert_gguf_tokenizer(nullptr, &co, &im, &isz), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_convert_gguf_tokenizer(vocab_path("gpt-2").c_str(), &co, nullptr, &isz), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_convert_gguf_tokenizer("/nonexistent/x.gguf", &co, &im, &isz), GB_ERR_FILE_NOT_FOUND);
  EXPECT_EQ(gb_convert_gguf_tokenizer(gbt::stories260k_gbx().c_str(), &co, &im, &isz), GB_ERR_BAD_MAGIC);
  EXPECT_EQ(im, nullptr);
  gb_convert_free(nullptr);
}

// A model whose GGUF carries a byte-level BPE vocabulary (GPT-2's, from the
// fixtures, with its 50257 tokens and merges) converts, keeps only the
// TOKENIZER (no VOCAB section), tokenizes as the vocabulary does on its own,
// generates, and its tokens decode.
TEST(TokenizerApi, BpeModelConvertsAndRuns) {
  gb::InputFile f;
  gb::Logger log;
  log.fn = gbt::quiet_log;
  ASSERT_EQ(f.open(vocab_path("gpt-2").c_str(), log, "vocabulary"), GB_OK);
  gb::GgufFile g;
  ASSERT_EQ(gb::gguf_parse(f, log, &g), GB_OK);
  ASSERT_TRUE(g.has_tokens && g.has_merges);
  const uint32_t n = (uint32_t)g.tokens.size();
  ASSERT_EQ(n, 50257u);

  gb::SampleDims d;
  d.dim = 32;
  d.hidden = 64;
  d.layers = 1;
  d.heads = 2;
  d.kv_heads = 1;
  d.vocab = n;
  d.seq_len = 32;
  gb::GgufSpec s = gb::sample_gguf_spec(d, 0);
  auto u32 = [](std::vector<uint8_t> &b, uint32_t v) { for (int i = 0; i < 4; i++) b.push_back((uint8_t)(v >> (8 * i))); };
  auto u64 = [](std::vector<uint8_t> &b, uint64_t v) { for (int i = 0; i < 8; i++) b.push_back((uint8_t)(v >> (8 * i))); };
  auto str_array = [&](const std::vector<std::string> &v) {
    std::vector<uint8_t> b;
    u32(b, 8);
    u64(b, v.size());
    for (const std::string &x : v) {
      u64(b, x.size());
      b.insert(b.end(), x.begin(), x.end());
    }
    return b;
  };
  std::vector<uint8_t> types;
  u32(types, 5);
  u64(types, n);
  for (uint32_t i = 0; i < n; i++) u32(types, g.has_types ? (uint32_t)g.token_types[i] : 1u);
  s.set_str("tokenizer.ggml.model", "gpt2");
  s.set_str("tokenizer.ggml.pre", "gpt-2");
  s.set("tokenizer.ggml.tokens", 9, str_array(g.tokens));
  s.set("tokenizer.ggml.merges", 9, str_array(g.merges));
  s.set("tokenizer.ggml.token_type", 9, types);
  s.remove("tokenizer.ggml.scores");
  s.remove("tokenizer.ggml.unknown_token_id");
  s.set_u32("tokenizer.ggml.bos_token_id", 50256);
  s.set_u32("tokenizer.ggml.eos_token_id", 50256);
  const std::string tpl =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  s.set_str("tokenizer.chat_template", tpl);
  const std::string in = gbt::temp_dir() + "/bpe-model.gguf", out = gbt::temp_dir() + "/bpe-model.gbx";
  const std::vector<uint8_t> bytes = gb::gguf_serialize(s);
  ASSERT_TRUE(gbt::write_file(in, bytes));
  gb_convert_options co = quiet_convert();
  co.tiers = (1u << GB_GEAR_MID) | (1u << GB_GEAR_F32);
  ASSERT_EQ(gb_convert_gguf(in.c_str(), out.c_str(), &co), GB_OK);

  // Sections: TOKENIZER, no VOCAB.
  const std::vector<uint8_t> img = gbt::read_file(out);
  bool vocab = false, tokenizer = false;
  for (uint32_t i = 0; i < gb::ld_u32(&img[16]); i++) {
    vocab |= gb::ld_u32(&img[64 + 32 * i]) == gb::kSecVocab;
    tokenizer |= gb::ld_u32(&img[64 + 32 * i]) == gb::kSecTokenizer;
  }
  EXPECT_FALSE(vocab);
  EXPECT_TRUE(tokenizer);

  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(out.c_str(), &mo, &m), GB_OK);
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  ASSERT_EQ(gb_model_get_info(m, &mi), GB_OK);
  EXPECT_EQ(mi.vocab_size, n);
  EXPECT_EQ(mi.bos_id, 50256);
  EXPECT_EQ(mi.eos_id, 50256);
  const gb_tokenizer *t = nullptr;
  ASSERT_EQ(gb_model_tokenizer(m, &t), GB_OK);
  gb_tokenizer_info ti;
  ti.struct_size = sizeof ti;
  ASSERT_EQ(gb_tokenizer_get_info(t, &ti), GB_OK);
  EXPECT_EQ(ti.kind, GB_TOKENIZER_BPE);
  EXPECT_STREQ(ti.pre, "gpt-2");
  const char *tp = nullptr;
  size_t tl = 0;
  ASSERT_EQ(gb_tokenizer_chat_template(t, &tp, &tl), GB_OK);
  EXPECT_EQ(std::string(tp, tl), tpl);
  gb_chat_template ct;
  EXPECT_EQ(gb_chat_template_detect(tp, tl, &ct), GB_OK);
  EXPECT_EQ(ct, GB_CHAT_TEMPLATE_CHATML);

  Standalone alone;
  ASSERT_EQ(alone.open(vocab_path("gpt-2")), GB_OK);
  for (const char *text : kTexts) {
    const std::string x = text;
    EXPECT_EQ(encode(t, x, 0), encode(alone.tok, x, 0)) << x;
  }
  // "Hello world" is two GPT-2 tokens.
  const std::vector<int32_t> hello = encode(t, "Hello world", 0);
  ASSERT_EQ(hello.size(), 2u);
  EXPECT_EQ(decode(t, hello, 0), "Hello world");

  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 16;
  so.gear = GB_GEAR_MID;
  so.log = gbt::quiet_log;
  gb_session *sess = nullptr;
  ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &sess), GB_OK);
  ASSERT_EQ(gb_prefill(sess, hello.data(), hello.size()), GB_OK);
  std::string text;
  int32_t prev = hello.back();
  for (int k = 0; k < 6; k++) {
    int32_t tok = -1;
    gb_step_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_decode_step(sess, &tok, &info), GB_OK);
    ASSERT_GE(tok, 0);
    ASSERT_LT((uint32_t)tok, n);
    const char *p;
    size_t len;
    ASSERT_EQ(gb_token_to_text(m, prev, tok, &p, &len), GB_OK);
    text.append(p, len);
    prev = tok;
  }
  gb_session_destroy(sess);
  gb_model_close(m);
  unlink(in.c_str());
  unlink(out.c_str());
}
