// fuzz_tok_spm.cpp — fuzz target for the SentencePiece encoder (src/tok/)
// over the llama-spm fixture vocabulary (../shared/fixtures/vocab/; without
// it the target does nothing). Input: byte 0 selects the flags (BOS, EOS, no
// space prefix, parse special), the rest is the text, any bytes.
// Checks: encoding succeeds, ids are in range, nothing is written past the
// capacity, and, without special parsing, decoding gives the text back (with
// U+2581 read as a space on both sides: the lossy case). Any failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "convert_util.h"
#include "gguf_parse.h"
#include "sample_files.h"
#include "tok/engine.h"
#include "tokdata_gguf.h"

namespace {
const char kFuzzName[] = "fuzz_tok_spm";
}  // namespace
#include "fuzz_tok_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Loaded *l = load("llama-spm", 0);
  if (!l->ok || size == 0) return 0;
  g_in = data;
  g_in_size = size;
  const uint32_t flags = data[0] & gb::kTokEncAll;
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

  size_t need = 0;
  gb::tok_decode(l->tok, ids.data(), ids.size(), gb::kTokDecStripSpace, nullptr, 0, &need);
  std::string text(need, '\0');
  size_t got = 0;
  if (gb::tok_decode(l->tok, ids.data(), ids.size(), gb::kTokDecStripSpace, need ? &text[0] : nullptr, need, &got) != GB_OK ||
      got != need)
    fuzz_fail("decode failed");
  if (flags & (gb::kTokEncParseSpecial | gb::kTokEncNoSpacePrefix)) return 0;
  // The encoder spells spaces U+2581 before splitting, as llama.cpp does;
  // decoding turns the pieces' U+2581 back into spaces but byte tokens give
  // their bytes (a broken UTF-8 sequence followed by a space comes back as
  // the bytes of U+2581), so both sides are compared with U+2581 as ' '.
  auto spaces = [](const std::string &s) {
    std::string o;
    for (size_t i = 0; i < s.size(); i++) {
      if (i + 2 < s.size() && memcmp(&s[i], "\xE2\x96\x81", 3) == 0) {
        o += ' ';
        i += 2;
      } else {
        o += s[i];
      }
    }
    return o;
  };
  const std::string want = spaces(x);
  text = spaces(text);
  if (text != want) {
    fprintf(stderr, "decoded:");
    for (unsigned char c : text) fprintf(stderr, " %02x", c);
    fprintf(stderr, "\n");
    fuzz_fail("decode(encode(x)) != x");
  }
  return 0;
}

// Seeds: flag byte + each of the fixture's test strings, and a few of ours.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  std::vector<std::string> texts = {"Once upon a time", "\xff\xfe\xc3(", "<s>a</s><unk>", "  \n\t", "\xe2\x96\x81\xe2\x96\x81x", ""};
  FILE *f = fopen((std::string(GB_SHARED_DIR) + "/fixtures/vocab/ggml-vocab-llama-spm.gguf.inp").c_str(), "rb");
  if (f) {
    std::string all;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) all.append(buf, k);
    fclose(f);
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t at = 0, p; (p = all.find(sep, at)) != std::string::npos; at = p + sep.size()) texts.push_back(all.substr(at, p - at));
  }
  for (uint8_t flags : {0, 1, 4, 6})
    for (const std::string &t : texts) {
      std::vector<uint8_t> b(1, flags);
      b.insert(b.end(), t.begin(), t.end());
      seeds->push_back(gb::FuzzSeed{b, b.size(), 1});
    }
}
