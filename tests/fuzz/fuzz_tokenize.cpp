// fuzz_tokenize.cpp — fuzz target for the BPE encoder (src/tokenizer.cpp).
// Input: byte 0 selects the flags (BOS, dummy prefix), the rest is the text.
// The vocabulary is generated here (byte tokens, control tokens, BPE-like
// merges over a small alphabet with many equal scores, duplicate pieces, and
// pieces that must never be produced), so the target needs no files.
// Checks: encoding succeeds, ids are in range, decoding gives the text back,
// and (for inputs up to 2 KB) the ids equal a literal llama2.c-style
// whole-text merge loop. Any failure aborts.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <string>
#include <vector>

#include "format.h"
#include "sample_files.h"
#include "tokenizer.h"

namespace {

struct Piece {
  std::string s;
  float score;
  uint8_t type;
};

struct FuzzVocab {
  std::vector<Piece> pieces;
  std::vector<uint8_t> section;
  std::vector<uint32_t> mem;
  gb::Tokenizer tok;
  std::map<std::string, int32_t> lut;  // mergeable pieces, lowest id
  int32_t byte_tok[256];
};

// A fixed linear congruential generator: the vocabulary is the same on every
// run and platform.
struct Lcg {
  uint64_t x;
  uint32_t next() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(x >> 33);
  }
};

void fuzz_fail(const char *what) {
  fprintf(stderr, "fuzz_tokenize: %s\n", what);
  abort();
}

FuzzVocab *build_vocab() {
  auto *v = new FuzzVocab;
  Lcg rng{12345};
  v->pieces.push_back({"<unk>", 0, gb::kTokUnknown});
  v->pieces.push_back({"<s>", 0, gb::kTokControl});
  v->pieces.push_back({"</s>", 0, gb::kTokControl});
  for (int b = 0; b < 256; b++) {
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    v->pieces.push_back({buf, 0, gb::kTokByte});
  }
  const char *base[] = {" ", "a", "b", "c", "d", "e", "\n", ".", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xC3"};
  std::vector<std::string> formed;
  for (const char *b : base) {
    formed.push_back(b);
    v->pieces.push_back({b, -(float)(rng.next() % 40), gb::kTokNormal});
  }
  for (int i = 0; i < 300; i++) {
    const std::string p = formed[rng.next() % formed.size()] + formed[rng.next() % formed.size()];
    if (p.size() > 16) continue;
    formed.push_back(p);
    v->pieces.push_back({p, -(float)(rng.next() % 25), rng.next() % 9 == 0 ? gb::kTokUserDefined : gb::kTokNormal});
    if (rng.next() % 12 == 0) v->pieces.push_back({p, 50, gb::kTokNormal});
  }
  v->pieces.push_back({"<s>", -1, gb::kTokNormal});
  v->pieces.push_back({"<0x61>", -1, gb::kTokNormal});
  v->pieces.push_back({"ba", 99, gb::kTokUnused});
  v->pieces.push_back({"dd", 99, gb::kTokControl});
  v->pieces.push_back({"xa", 99, gb::kTokNormal});

  const uint32_t n = (uint32_t)v->pieces.size();
  uint32_t blob = 0, maxlen = 0;
  for (const Piece &p : v->pieces) {
    blob += (uint32_t)p.s.size();
    if (p.s.size() > maxlen) maxlen = (uint32_t)p.s.size();
  }
  const size_t types_off = 16 + 4ull * n + 4ull * (n + 1);
  const size_t blob_off = types_off + ((n + 3) & ~3u);
  v->section.assign(blob_off + blob, 0);
  uint8_t *s = v->section.data();
  gb::st_u32(s, n);
  gb::st_u32(s + 4, maxlen);
  gb::st_u32(s + 8, blob);
  uint32_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    gb::st_f32(s + 16 + 4 * i, v->pieces[i].score);
    gb::st_u32(s + 16 + 4ull * n + 4 * i, off);
    s[types_off + i] = v->pieces[i].type;
    memcpy(s + blob_off + off, v->pieces[i].s.data(), v->pieces[i].s.size());
    off += (uint32_t)v->pieces[i].s.size();
  }
  gb::st_u32(s + 16 + 8ull * n, off);
  gb::VocabView view;
  view.n = n;
  view.max_piece_bytes = maxlen;
  view.scores = s + 16;
  view.offsets = s + 16 + 4ull * n;
  view.types = s + types_off;
  view.blob = s + blob_off;
  view.blob_bytes = blob;
  view.bos = 1;
  view.eos = 2;
  view.unk = 0;
  v->mem.assign(gb::tokenizer_mem_size(n) / 4 + 1, 0);
  gb::Logger log;
  if (gb::tokenizer_init(&v->tok, view, v->mem.data(), log) != GB_OK) fuzz_fail("vocabulary rejected");
  for (int b = 0; b < 256; b++) v->byte_tok[b] = 3 + b;
  for (uint32_t i = 0; i < n; i++)
    if (v->pieces[i].type == gb::kTokNormal || v->pieces[i].type == gb::kTokUserDefined)
      v->lut.emplace(v->pieces[i].s, (int32_t)i);
  return v;
}

// Well-formed UTF-8 codepoint length at i, else 1.
size_t ref_unit(const std::string &s, size_t i) {
  const unsigned c = (uint8_t)s[i];
  size_t more;
  uint32_t cp, min;
  if (c < 0x80) return 1;
  if ((c >> 5) == 6) more = 1, cp = c & 0x1F, min = 0x80;
  else if ((c >> 4) == 0xE) more = 2, cp = c & 0xF, min = 0x800;
  else if ((c >> 3) == 0x1E) more = 3, cp = c & 7, min = 0x10000;
  else return 1;
  if (i + more >= s.size()) return 1;
  for (size_t k = 1; k <= more; k++) {
    const unsigned b = (uint8_t)s[i + k];
    if ((b & 0xC0) != 0x80) return 1;
    cp = cp << 6 | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 1;
  return more + 1;
}

// llama2.c's encode(): units, byte fallback, then merge the best pair of the
// whole text (leftmost on ties) until none merges.
std::vector<int32_t> reference(const FuzzVocab &v, const std::string &x, uint32_t flags) {
  struct Tok {
    std::string text;
    int32_t id;
    bool fallback;
  };
  const std::string s = (!x.empty() && !(flags & GB_TOKENIZE_NO_DUMMY_PREFIX)) ? " " + x : x;
  std::vector<Tok> t;
  for (size_t i = 0; i < s.size();) {
    const size_t u = ref_unit(s, i);
    const std::string unit = s.substr(i, u);
    auto it = v.lut.find(unit);
    if (it != v.lut.end()) {
      t.push_back({unit, it->second, false});
    } else {
      for (size_t k = 0; k < u; k++) t.push_back({unit.substr(k, 1), v.byte_tok[(uint8_t)unit[k]], true});
    }
    i += u;
  }
  for (;;) {
    float best = 0;
    int32_t best_id = -1;
    size_t best_i = 0;
    for (size_t i = 0; i + 1 < t.size(); i++) {
      if (t[i].fallback || t[i + 1].fallback) continue;
      auto it = v.lut.find(t[i].text + t[i + 1].text);
      if (it == v.lut.end()) continue;
      const float sc = v.pieces[(size_t)it->second].score;
      if (best_id < 0 || sc > best) best = sc, best_id = it->second, best_i = i;
    }
    if (best_id < 0) break;
    t[best_i].text += t[best_i + 1].text;
    t[best_i].id = best_id;
    t.erase(t.begin() + (long)best_i + 1);
  }
  std::vector<int32_t> ids;
  if (flags & GB_TOKENIZE_ADD_BOS) ids.push_back(1);
  for (const Tok &k : t) ids.push_back(k.id);
  return ids;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FuzzVocab *v = build_vocab();
  if (size == 0) return 0;
  const uint32_t flags = data[0] & 3u;
  const std::string x(reinterpret_cast<const char *>(data + 1), size - 1);

  std::vector<int32_t> ids(GB_TOKENIZE_CAPACITY(x.size()) + 1, -77);
  size_t n = 0;
  if (gb::tokenize(v->tok, x.data(), x.size(), flags, ids.data(), ids.size() - 1, &n) != GB_OK)
    fuzz_fail("tokenize failed");
  if (n > x.size() + 2) fuzz_fail("too many tokens");
  if (ids.back() != -77) fuzz_fail("wrote past the capacity");
  ids.resize(n);

  std::string text;
  int32_t prev = -1;
  for (int32_t id : ids) {
    if (id < 0 || (uint32_t)id >= v->tok.v.n) fuzz_fail("token id out of range");
    const char *p;
    size_t len;
    if (gb::token_to_text(v->tok, prev, id, &p, &len) != GB_OK) fuzz_fail("token_to_text failed");
    text.append(p, len);
    prev = id;
  }
  std::string want = (!x.empty() && !(flags & GB_TOKENIZE_NO_DUMMY_PREFIX)) ? " " + x : x;
  if ((flags & GB_TOKENIZE_ADD_BOS) && !want.empty() && want[0] == ' ') want.erase(0, 1);
  if (text != want) fuzz_fail("decode(encode(x)) != x");

  if (x.size() <= 2048 && ids != reference(*v, x, flags)) fuzz_fail("differs from the whole-text reference");
  return 0;
}

// Seeds for the replay driver: flag byte + text, covering plain words, byte
// fallback (non-ASCII), control characters and long repeats.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  static const char *const texts[] = {
      "Once upon a time", "  leading and trailing spaces  ", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
      "ababababababababab aaaa bbbb", "\n\t\x01\x7f\xff", "", "a",
  };
  for (uint8_t flags = 0; flags < 4; flags++)
    for (const char *t : texts) {
      std::vector<uint8_t> b(1, flags);
      b.insert(b.end(), t, t + strlen(t));
      seeds->push_back(gb::FuzzSeed{b, b.size(), 1});
    }
}
