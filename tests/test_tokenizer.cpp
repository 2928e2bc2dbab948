// test_tokenizer.cpp — the byte-fallback BPE encoder/decoder (src/tokenizer.cpp)
// against tok512.bin (the stories260K vocabulary, laid out here the way a
// .gbx VOCAB section is) and against generated vocabularies, with two
// independent reference encoders: a literal llama2.c-style whole-text loop and
// a priority-queue one for inputs too long for the literal loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "format.h"
#include "test_util.h"
#include "tokenizer.h"
#include "vocab.h"

#ifndef GB_SHARED_DIR
#define GB_SHARED_DIR "../shared"
#endif

namespace {

using gb::Tokenizer;

struct Entry {
  std::string piece;
  float score;
  uint8_t type;
};

struct LogCapture {
  int errors = 0;
  std::string last;
  static void fn(void *user, gb_log_level level, const char *msg) {
    auto *c = static_cast<LogCapture *>(user);
    if (level == GB_LOG_ERROR) c->errors++;
    c->last = msg;
  }
};

// A vocabulary laid out as format.h's VOCAB section, and its tokenizer.
struct Vocab {
  std::vector<Entry> entries;
  std::vector<uint8_t> section;
  std::vector<uint32_t> mem;
  gb::VocabView view;
  Tokenizer tok;
  LogCapture logs;

  gb_status build(int32_t bos, int32_t eos, int32_t unk, uint32_t max_piece = 0) {
    const uint32_t n = (uint32_t)entries.size();
    uint32_t blob = 0, maxlen = 0;
    for (const Entry &e : entries) {
      blob += (uint32_t)e.piece.size();
      maxlen = std::max(maxlen, (uint32_t)e.piece.size());
    }
    if (max_piece == 0) max_piece = maxlen;
    const size_t types_off = 16 + 4ull * n + 4ull * (n + 1);
    const size_t blob_off = types_off + ((n + 3) & ~3u);
    section.assign(blob_off + blob, 0);
    uint8_t *p = section.data();
    gb::st_u32(p, n);
    gb::st_u32(p + 4, max_piece);
    gb::st_u32(p + 8, blob);
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
      gb::st_f32(p + 16 + 4 * i, entries[i].score);
      gb::st_u32(p + 16 + 4ull * n + 4 * i, off);
      p[types_off + i] = entries[i].type;
      memcpy(p + blob_off + off, entries[i].piece.data(), entries[i].piece.size());
      off += (uint32_t)entries[i].piece.size();
    }
    gb::st_u32(p + 16 + 4ull * n + 4ull * n, off);
    view = gb::VocabView();
    view.n = n;
    view.max_piece_bytes = max_piece;
    view.scores = p + 16;
    view.offsets = p + 16 + 4ull * n;
    view.types = p + types_off;
    view.blob = p + blob_off;
    view.blob_bytes = blob;
    view.bos = bos;
    view.eos = eos;
    view.unk = unk;
    mem.assign(gb::tokenizer_mem_size(n) / 4 + 1, 0);
    gb::Logger log;
    log.fn = &LogCapture::fn;
    log.user = &logs;
    return gb::tokenizer_init(&tok, view, mem.data(), log);
  }
};

std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::string();
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// tok512.bin: int32 max_token_length, then 512 x (f32 score, i32 len, bytes).
// Types per the models README: <unk>, two control tokens, 256 byte tokens.
const Vocab *tok512() {
  static Vocab *v = [] {
    const std::string d = read_file(GB_SHARED_DIR "/models/tok512.bin");
    if (d.size() < 4) return (Vocab *)nullptr;
    auto *r = new Vocab;
    size_t o = 4;
    for (int i = 0; i < 512; i++) {
      float sc;
      int32_t len;
      memcpy(&sc, d.data() + o, 4);
      memcpy(&len, d.data() + o + 4, 4);
      o += 8;
      Entry e{d.substr(o, (size_t)len), sc, gb::kTokNormal};
      o += (size_t)len;
      if (i == 0) e.type = gb::kTokUnknown;
      else if (i <= 2) e.type = gb::kTokControl;
      else if (i <= 258) e.type = gb::kTokByte;
      r->entries.push_back(e);
    }
    if (r->build(1, 2, 0) != GB_OK) {
      delete r;
      return (Vocab *)nullptr;
    }
    return r;
  }();
  return v;
}

#define NEED_TOK512()                                              \
  const Vocab *V = tok512();                                       \
  if (!V) GTEST_SKIP() << "tok512.bin not found in " GB_SHARED_DIR; \
  const Tokenizer &T = V->tok

std::vector<int32_t> encode(const Tokenizer &t, const std::string &s, uint32_t flags = GB_TOKENIZE_ADD_BOS) {
  std::vector<int32_t> out(GB_TOKENIZE_CAPACITY(s.size()));
  size_t n = 0;
  const gb_status st = gb::tokenize(t, s.data(), s.size(), flags, out.data(), out.size(), &n);
  EXPECT_EQ(st, GB_OK);
  if (st != GB_OK) return {};
  out.resize(n);
  return out;
}

std::string decode(const Tokenizer &t, const std::vector<int32_t> &ids) {
  std::string s;
  int32_t prev = -1;
  for (int32_t id : ids) {
    const char *p = nullptr;
    size_t n = 0;
    EXPECT_EQ(gb::token_to_text(t, prev, id, &p, &n), GB_OK);
    s.append(p, n);
    prev = id;
  }
  return s;
}

// What decode(encode(x, flags)) must give.
std::string expected_decode(const std::string &x, uint32_t flags) {
  const bool bos = flags & GB_TOKENIZE_ADD_BOS, dummy = !(flags & GB_TOKENIZE_NO_DUMMY_PREFIX) && !x.empty();
  std::string s = dummy ? " " + x : x;
  if (bos && !s.empty() && s[0] == ' ') s.erase(0, 1);
  return s;
}

// ---- reference encoders ----------------------------------------------------

// Well-formed UTF-8 codepoint length at i, else 1 (written independently of
// the library: decode, then reject over-long forms, surrogates, > U+10FFFF).
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

struct RefTok {
  std::string text;
  int32_t id;
  bool fallback;
  size_t pos;  // start in the dummy-prefixed text
};

struct Reference {
  std::map<std::string, int32_t> lut;  // mergeable pieces, lowest id
  const Vocab *v;
  int32_t byte_tok[256];

  explicit Reference(const Vocab &voc) : v(&voc) {
    for (int b = 0; b < 256; b++) byte_tok[b] = -1;
    for (size_t i = 0; i < voc.entries.size(); i++) {
      const Entry &e = voc.entries[i];
      if (e.type == gb::kTokNormal || e.type == gb::kTokUserDefined) lut.emplace(e.piece, (int32_t)i);
      if (e.type == gb::kTokByte) {
        const int b = (int)strtol(e.piece.substr(3, 2).c_str(), nullptr, 16);
        if (byte_tok[b] < 0) byte_tok[b] = (int32_t)i;
      }
    }
  }
  int32_t find(const std::string &s) const {
    auto it = lut.find(s);
    return it == lut.end() ? -1 : it->second;
  }
  float score(int32_t id) const { return v->entries[(size_t)id].score; }

  std::vector<RefTok> units(const std::string &x, uint32_t flags) const {
    const std::string s = (!x.empty() && !(flags & GB_TOKENIZE_NO_DUMMY_PREFIX)) ? " " + x : x;
    std::vector<RefTok> t;
    for (size_t i = 0; i < s.size();) {
      const size_t u = ref_unit(s, i);
      const std::string unit = s.substr(i, u);
      const int32_t id = find(unit);
      if (id >= 0) {
        t.push_back({unit, id, false, i});
      } else {
        for (size_t k = 0; k < u; k++) {
          const int32_t b = byte_tok[(uint8_t)unit[k]];
          t.push_back({unit.substr(k, 1), b >= 0 ? b : v->view.unk, true, i + k});
        }
      }
      i += u;
    }
    return t;
  }

  std::vector<int32_t> finish(const std::vector<RefTok> &t, uint32_t flags) const {
    std::vector<int32_t> ids;
    if (flags & GB_TOKENIZE_ADD_BOS) ids.push_back(v->view.bos);
    for (const RefTok &r : t) ids.push_back(r.id);
    return ids;
  }

  // llama2.c's loop over the whole text: scan every pair, merge the best.
  std::vector<int32_t> naive(const std::string &x, uint32_t flags) const {
    std::vector<RefTok> t = units(x, flags);
    for (;;) {
      float best = 0;
      int32_t best_id = -1;
      size_t best_i = 0;
      for (size_t i = 0; i + 1 < t.size(); i++) {
        if (t[i].fallback || t[i + 1].fallback) continue;
        const int32_t id = find(t[i].text + t[i + 1].text);
        if (id >= 0 && (best_id < 0 || score(id) > best)) best = score(id), best_id = id, best_i = i;
      }
      if (best_id < 0) break;
      t[best_i].text += t[best_i + 1].text;
      t[best_i].id = best_id;
      t.erase(t.begin() + (long)best_i + 1);
    }
    return finish(t, flags);
  }

  // The same merges driven by an ordered set of (-score, position).
  std::vector<int32_t> fast(const std::string &x, uint32_t flags) const {
    std::vector<RefTok> t = units(x, flags);
    const size_t n = t.size();
    std::vector<size_t> prev(n), next(n);
    std::vector<int32_t> pair(n, -1);
    std::vector<bool> alive(n, true);
    for (size_t i = 0; i < n; i++) prev[i] = i - 1, next[i] = i + 1;
    std::set<std::pair<float, size_t>> q;
    auto set_pair = [&](size_t i) {
      if (pair[i] >= 0) q.erase({-score(pair[i]), t[i].pos});
      pair[i] = -1;
      const size_t j = next[i];
      if (j >= n || t[i].fallback || t[j].fallback) return;
      pair[i] = find(t[i].text + t[j].text);
      if (pair[i] >= 0) q.insert({-score(pair[i]), t[i].pos});
    };
    std::map<size_t, size_t> at;  // position -> index
    for (size_t i = 0; i < n; i++) at[t[i].pos] = i;
    for (size_t i = 0; i < n; i++) set_pair(i);
    while (!q.empty()) {
      const size_t i = at[q.begin()->second];
      const size_t j = next[i];
      t[i].text += t[j].text;
      t[i].id = pair[i];
      if (pair[j] >= 0) q.erase({-score(pair[j]), t[j].pos});
      pair[j] = -1;
      alive[j] = false;
      next[i] = next[j];
      if (next[j] < n) prev[next[j]] = i;
      set_pair(i);
      if (prev[i] != (size_t)-1) set_pair(prev[i]);
    }
    std::vector<RefTok> out;
    for (size_t i = 0; i < n; i++)
      if (alive[i]) out.push_back(t[i]);
    return finish(out, flags);
  }
};

// ---- generated vocabularies ------------------------------------------------

// unk, two control tokens, byte tokens, then BPE-like merges of a small
// alphabet with many equal scores, plus traps: duplicate pieces, a Normal
// piece spelled like a byte token, Unused / Control pieces that must never
// be produced, and pieces containing bytes the alphabet cannot form.
Vocab *make_generated(uint32_t seed, bool all_bytes = true, bool newline_merges = false) {
  std::mt19937 rng(seed);
  auto *v = new Vocab;
  v->entries.push_back({"<unk>", 0, gb::kTokUnknown});
  v->entries.push_back({"<s>", 0, gb::kTokControl});
  v->entries.push_back({"</s>", 0, gb::kTokControl});
  for (int b = 0; b < 256; b++) {
    if (!all_bytes && (b == 'e' || b == 0xFF)) continue;
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    v->entries.push_back({buf, 0, gb::kTokByte});
  }
  std::vector<std::string> base = {" ", "a", "b", "c", "d", "\n", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xC3"};
  std::vector<std::string> pieces;
  for (const std::string &b : base) {
    pieces.push_back(b);
    v->entries.push_back({b, -(float)(rng() % 50), gb::kTokNormal});
  }
  for (int i = 0; i < 160; i++) {
    const std::string &a = pieces[rng() % pieces.size()], &b = pieces[rng() % pieces.size()];
    const std::string p = a + b;
    if (p.size() > 12) continue;
    if (!newline_merges && p.find('\n') != std::string::npos) continue;
    pieces.push_back(p);
    v->entries.push_back({p, -(float)(rng() % 30), rng() % 8 == 0 ? gb::kTokUserDefined : gb::kTokNormal});
    if (rng() % 10 == 0) v->entries.push_back({p, 5.0f, gb::kTokNormal});  // duplicate: must lose to the lower id
  }
  v->entries.push_back({"<s>", -3, gb::kTokNormal});
  v->entries.push_back({"<0x61>", -3, gb::kTokNormal});
  v->entries.push_back({"ba", 100, gb::kTokUnused});
  v->entries.push_back({"cc", 100, gb::kTokControl});
  v->entries.push_back({"ex", 100, gb::kTokNormal});
  v->entries.push_back({"xy", 100, gb::kTokNormal});
  v->entries.push_back({"aa", -2, gb::kTokNormal});
  v->entries.push_back({"aaaa", -2, gb::kTokNormal});
  const int32_t unk = 0;
  if (v->build(1, 2, unk) != GB_OK) {
    ADD_FAILURE() << "generated vocabulary rejected: " << v->logs.last;
  }
  return v;
}

// Random inputs: raw bytes, valid UTF-8, or mixes of the vocabulary's pieces.
std::string random_input(std::mt19937 &rng, const Vocab &v, size_t max_units) {
  std::string s;
  const size_t n = rng() % (max_units + 1);
  const int kind = (int)(rng() % 3);
  for (size_t i = 0; i < n; i++) {
    if (kind == 0) {
      s.push_back((char)(rng() & 0xFF));
    } else if (kind == 1) {
      uint32_t cp;
      switch (rng() % 4) {
        case 0: cp = rng() % 0x80; break;
        case 1: cp = 0x80 + rng() % 0x780; break;
        case 2: cp = 0x800 + rng() % 0xF800; if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xE000; break;
        default: cp = 0x10000 + rng() % 0x100000; break;
      }
      if (cp < 0x80) s.push_back((char)cp);
      else if (cp < 0x800) s.push_back((char)(0xC0 | cp >> 6)), s.push_back((char)(0x80 | (cp & 0x3F)));
      else if (cp < 0x10000)
        s.push_back((char)(0xE0 | cp >> 12)), s.push_back((char)(0x80 | ((cp >> 6) & 0x3F))),
            s.push_back((char)(0x80 | (cp & 0x3F)));
      else
        s.push_back((char)(0xF0 | cp >> 18)), s.push_back((char)(0x80 | ((cp >> 12) & 0x3F))),
            s.push_back((char)(0x80 | ((cp >> 6) & 0x3F))), s.push_back((char)(0x80 | (cp & 0x3F)));
    } else {
      const int r = (int)(rng() % 10);
      if (r < 7) s += v.entries[rng() % v.entries.size()].piece;
      else if (r < 8) s.push_back(' ');
      else if (r < 9) s.push_back("\n.,!"[rng() % 4]);
      else s.push_back((char)(rng() & 0xFF));
    }
  }
  return s;
}

const uint32_t kFlagSets[4] = {GB_TOKENIZE_ADD_BOS, 0, GB_TOKENIZE_ADD_BOS | GB_TOKENIZE_NO_DUMMY_PREFIX,
                               GB_TOKENIZE_NO_DUMMY_PREFIX};

// ---- tok512 ----------------------------------------------------------------

TEST(TokenizerTok512, Tables) {
  NEED_TOK512();
  for (int b = 0; b < 256; b++) EXPECT_EQ(T.byte_token[b], b + 3) << b;
  ASSERT_GE(T.space_token, 0);
  EXPECT_EQ(V->entries[(size_t)T.space_token].piece, " ");
  EXPECT_EQ(T.byte_in_merge[(uint8_t)'\n'], 0);
  EXPECT_EQ(T.byte_in_merge[(uint8_t)','], 0);
  EXPECT_EQ(T.byte_in_merge[(uint8_t)'a'], 1);
  EXPECT_EQ(T.byte_in_merge[(uint8_t)' '], 1);
  // sorted is a permutation in byte order.
  std::vector<bool> seen(512, false);
  for (uint32_t i = 0; i < 512; i++) {
    ASSERT_LT(T.sorted[i], 512u);
    seen[T.sorted[i]] = true;
    if (i) {
      EXPECT_LT(V->entries[T.sorted[i - 1]].piece, V->entries[T.sorted[i]].piece);
    }
  }
  for (bool b : seen) EXPECT_TRUE(b);
}

TEST(TokenizerTok512, StoryOpening) {
  NEED_TOK512();
  const std::string s = "Once upon a time, there was a little girl named Lily.";
  const std::vector<int32_t> ids = encode(T, s);
  // <s> " Once" " upon" " a" " time" "," " there" " was" " a" " little" " g" "ir" "l" " named" " Lily" "."
  const std::vector<int32_t> want = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  EXPECT_EQ(ids, want);
  EXPECT_EQ(decode(T, ids), s);
  EXPECT_EQ(V->entries[403].piece, " Once");
  EXPECT_EQ(V->entries[317].piece, " Lily");
}

TEST(TokenizerTok512, KnownIds) {
  NEED_TOK512();
  EXPECT_EQ(V->entries[265].piece, " the");
  EXPECT_EQ(encode(T, "the"), (std::vector<int32_t>{1, 265}));
  EXPECT_EQ(encode(T, "the", 0), (std::vector<int32_t>{265}));
  // No dummy prefix: "the" is not one piece.
  const std::vector<int32_t> nd = encode(T, "the", GB_TOKENIZE_NO_DUMMY_PREFIX);
  EXPECT_GT(nd.size(), 1u);
  EXPECT_EQ(decode(T, nd), "the");
  EXPECT_EQ(encode(T, "Hello world"), (std::vector<int32_t>{1, 346, 306, 414, 263, 304, 341}));
  // "é" is a piece; "\n" is a byte token (0x0A + 3).
  EXPECT_EQ(encode(T, "h\xC3\xA9llo"), (std::vector<int32_t>{1, 270, 485, 306, 414}));
  EXPECT_EQ(encode(T, "\n", 0), (std::vector<int32_t>{T.space_token, 13}));
}

TEST(TokenizerTok512, InvalidUtf8RoundTripsThroughByteTokens) {
  NEED_TOK512();
  const char *cases[] = {"\xFF", "\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\x80\x80",
                         "\xF8\x88\x80\x80\x80"};
  for (const char *c : cases) {
    const std::string s(c);
    const std::vector<int32_t> ids = encode(T, s, GB_TOKENIZE_NO_DUMMY_PREFIX);
    ASSERT_EQ(ids.size(), s.size()) << "each byte is its own byte token";
    for (size_t i = 0; i < s.size(); i++) EXPECT_EQ(ids[i], (uint8_t)s[i] + 3);
    EXPECT_EQ(decode(T, ids), s);
    EXPECT_EQ(decode(T, encode(T, "ab" + s + "cd")), "ab" + s + "cd");
  }
  // A valid codepoint that is not a piece falls back to its bytes.
  const std::string cjk = "\xE4\xB8\x96";
  EXPECT_EQ(encode(T, cjk, GB_TOKENIZE_NO_DUMMY_PREFIX), (std::vector<int32_t>{0xE4 + 3, 0xB8 + 3, 0x96 + 3}));
  // "â" (C3 A2) is a piece, "€" (E2 82 AC) too.
  EXPECT_EQ(encode(T, "\xC3\xA2\xE2\x82\xAC", GB_TOKENIZE_NO_DUMMY_PREFIX), (std::vector<int32_t>{502, 503}));
}

void corpus_round_trip(const Tokenizer &T, const char *name) {
  const std::string text = read_file(std::string(GB_SHARED_DIR "/data/") + name);
  if (text.empty()) GTEST_SKIP() << name << " not found";
  std::vector<int32_t> out(GB_TOKENIZE_CAPACITY(text.size()));
  size_t n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(gb::tokenize(T, text.data(), text.size(), GB_TOKENIZE_ADD_BOS, out.data(), out.size(), &n), GB_OK);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.resize(n);
  printf("[ tokenize ] %s: %zu bytes -> %zu tokens in %.1f ms\n", name, text.size(), n, ms);
  ::testing::Test::RecordProperty("tokenize_ms", std::to_string(ms));
  EXPECT_EQ(out[0], 1);
  EXPECT_LT(n, text.size() * 3 / 4);  // it does merge
  EXPECT_EQ(decode(T, out), text);
}

TEST(TokenizerTok512, RoundTripTinyStories) {
  NEED_TOK512();
  corpus_round_trip(T, "tinystories_valid_excerpt.txt");
}

TEST(TokenizerTok512, RoundTripShakespeare) {
  NEED_TOK512();
  corpus_round_trip(T, "tinyshakespeare.txt");
}

// The per-segment merge equals the literal whole-text loop.
TEST(TokenizerTok512, SegmentedEqualsWholeTextNaive) {
  NEED_TOK512();
  const Reference ref(*V);
  std::mt19937 rng(1234);
  for (int i = 0; i < 1500; i++) {
    const std::string s = random_input(rng, *V, 80);
    const uint32_t f = kFlagSets[i % 4];
    ASSERT_EQ(encode(T, s, f), ref.naive(s, f)) << "input #" << i;
  }
  // Windows of real text: paragraphs, newlines, punctuation.
  for (const char *name : {"tinystories_valid_excerpt.txt", "tinyshakespeare.txt"}) {
    const std::string text = read_file(std::string(GB_SHARED_DIR "/data/") + name);
    if (text.size() < 20000) continue;
    for (int w = 0; w < 8; w++) {
      const std::string s = text.substr(rng() % (text.size() - 3000), 500 + rng() % 1000);
      ASSERT_EQ(encode(T, s), ref.naive(s, GB_TOKENIZE_ADD_BOS)) << name << " window " << w;
    }
    // The whole file against the priority-queue reference.
    ASSERT_EQ(encode(T, text), ref.fast(text, GB_TOKENIZE_ADD_BOS)) << name;
  }
}

// One segment of the whole input: a random walk over byte pairs that occur
// inside pieces, so the encoder finds no cut anywhere. The block cache keeps
// this fast, and it must stay exact.
TEST(TokenizerTok512, OneLongSegment) {
  NEED_TOK512();
  std::vector<std::vector<char>> next(128);
  for (const Entry &e : V->entries) {
    if (e.type != gb::kTokNormal || e.piece.size() < 2) continue;
    for (size_t k = 0; k + 1 < e.piece.size(); k++) {
      const uint8_t x = (uint8_t)e.piece[k], y = (uint8_t)e.piece[k + 1];
      if (x < 128 && y < 128) next[x].push_back((char)y);
    }
  }
  // Keep only bytes from which the walk can always go on.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &c : next) {
      const size_t before = c.size();
      c.erase(std::remove_if(c.begin(), c.end(), [&](char y) { return next[(uint8_t)y].empty(); }), c.end());
      changed |= c.size() != before;
    }
  }
  ASSERT_FALSE(next['e'].empty());
  std::mt19937 rng(77);
  std::string s = "e";
  while (s.size() < 200000) {
    const std::vector<char> &c = next[(uint8_t)s.back()];
    s.push_back(c[rng() % c.size()]);
  }
  std::vector<int32_t> out(GB_TOKENIZE_CAPACITY(s.size()));
  size_t n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(gb::tokenize(T, s.data(), s.size(), GB_TOKENIZE_ADD_BOS, out.data(), out.size(), &n), GB_OK);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  printf("[ tokenize ] one %zu-byte segment -> %zu tokens in %.1f ms\n", s.size(), n, ms);
  out.resize(n);
  EXPECT_EQ(decode(T, out), s);
  EXPECT_EQ(out, Reference(*V).fast(s, GB_TOKENIZE_ADD_BOS));
}

// ---- generated vocabularies ------------------------------------------------

TEST(TokenizerGenerated, MatchesReferences) {
  for (uint32_t seed = 1; seed <= 12; seed++) {
    Vocab *v = make_generated(seed, seed % 3 != 0, seed % 2 == 0);
    ASSERT_EQ(v->tok.v.n, v->entries.size());
    const Reference ref(*v);
    std::mt19937 rng(seed * 7919);
    for (int i = 0; i < 400; i++) {
      const std::string s = random_input(rng, *v, 60);
      const uint32_t f = kFlagSets[i % 4];
      const std::vector<int32_t> got = encode(v->tok, s, f);
      ASSERT_EQ(got, ref.naive(s, f)) << "seed " << seed << " input #" << i;
      ASSERT_EQ(got, ref.fast(s, f)) << "seed " << seed << " input #" << i;
    }
    delete v;
  }
}

// Long segments (no separator for thousands of bytes) exercise the block
// cache, including segments long enough to hit the block-count cap.
TEST(TokenizerGenerated, LongSegments) {
  Vocab *v = make_generated(99, true, true);
  const Reference ref(*v);
  std::mt19937 rng(5);
  const std::string alpha[] = {" ", "a", "b", "c", "d", "\xC3\xA9"};
  for (size_t len : {300u, 3000u, 20000u, 150000u}) {
    std::string s;
    while (s.size() < len) s += alpha[rng() % 6];
    const std::vector<int32_t> got = encode(v->tok, s);
    if (len <= 3000) {
      ASSERT_EQ(got, ref.naive(s, GB_TOKENIZE_ADD_BOS)) << len;
    }
    ASSERT_EQ(got, ref.fast(s, GB_TOKENIZE_ADD_BOS)) << len;
    ASSERT_EQ(decode(v->tok, got), s);
  }
  // Equal scores everywhere: the leftmost rule decides.
  std::string s(70000, 'a');
  const std::vector<int32_t> got = encode(v->tok, s, GB_TOKENIZE_NO_DUMMY_PREFIX);
  ASSERT_EQ(got, ref.fast(s, GB_TOKENIZE_NO_DUMMY_PREFIX));
  delete v;
}

TEST(TokenizerGenerated, NeverProducesUnusedControlOrByteLookalikes) {
  Vocab *v = make_generated(3);
  for (const char *s : {"ba", "cc", "<s>", "<0x61>", "xy"}) {
    for (int32_t id : encode(v->tok, s, GB_TOKENIZE_NO_DUMMY_PREFIX)) {
      const uint8_t type = v->entries[(size_t)id].type;
      if (std::string(s) == "xy") {
        EXPECT_EQ(type, gb::kTokByte);  // 'x' and 'y' are not pieces: fallback, never merged
      } else {
        EXPECT_TRUE(type == gb::kTokNormal || type == gb::kTokUserDefined || type == gb::kTokByte) << s;
      }
    }
    EXPECT_EQ(decode(v->tok, encode(v->tok, s)), s);
  }
  delete v;
}

// ---- property: 20000 random round trips -------------------------------------

TEST(TokenizerProperty, RandomRoundTrip20000) {
  const Vocab *t512 = tok512();
  Vocab *gen = make_generated(42);
  const Reference ref_gen(*gen);
  std::mt19937 rng(20000);
  std::string stories = read_file(GB_SHARED_DIR "/data/tinystories_valid_excerpt.txt");
  for (int i = 0; i < 20000; i++) {
    const Vocab &v = (t512 && i % 2 == 0) ? *t512 : *gen;
    std::string s;
    if (i % 7 == 6 && stories.size() > 1000) {
      s = stories.substr(rng() % (stories.size() - 500), rng() % 400);
    } else {
      s = random_input(rng, v, 48);
    }
    const uint32_t f = kFlagSets[rng() % 4];
    const std::vector<int32_t> ids = encode(v.tok, s, f);
    ASSERT_EQ(decode(v.tok, ids), expected_decode(s, f)) << "input #" << i;
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && (uint32_t)id < v.tok.v.n);
    if (&v == gen && i % 10 == 1) {
      ASSERT_EQ(ids, ref_gen.naive(s, f)) << "input #" << i;
    }
  }
  delete gen;
}

// ---- API contract ----------------------------------------------------------

TEST(TokenizerApi, BufferTooSmallWritesNothing) {
  NEED_TOK512();
  const std::string s = "Once upon a time";
  std::vector<int32_t> buf(s.size() + 8, 0x7EADBEEF);
  size_t n = 12345;
  EXPECT_EQ(gb::tokenize(T, s.data(), s.size(), GB_TOKENIZE_ADD_BOS, buf.data(), s.size() + 2, &n),
            GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, gb::tokenize_capacity(s.size()));
  EXPECT_LE(n, GB_TOKENIZE_CAPACITY(s.size()));
  for (int32_t x : buf) EXPECT_EQ(x, 0x7EADBEEF);
  EXPECT_EQ(gb::tokenize(T, s.data(), s.size(), 0, buf.data(), 0, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, s.size() + 3);
  for (int32_t x : buf) EXPECT_EQ(x, 0x7EADBEEF);
  // Exactly the capacity works, and nothing past it is touched.
  EXPECT_EQ(gb::tokenize(T, s.data(), s.size(), GB_TOKENIZE_ADD_BOS, buf.data(), s.size() + 3, &n), GB_OK);
  for (size_t i = s.size() + 3; i < buf.size(); i++) EXPECT_EQ(buf[i], 0x7EADBEEF);
  // Worst case fills len + 2 slots: BOS, dummy, one token per byte.
  const std::string bytes = "\n\n\n\n";
  std::vector<int32_t> b2(bytes.size() + 3);
  ASSERT_EQ(gb::tokenize(T, bytes.data(), bytes.size(), GB_TOKENIZE_ADD_BOS, b2.data(), b2.size(), &n), GB_OK);
  EXPECT_EQ(n, bytes.size() + 2);
}

TEST(TokenizerApi, DoesNotAllocate) {
  NEED_TOK512();
  const std::string s = "Once upon a time, \xC3\xA9\xFF there was a little girl named Lily.\n\nShe";
  std::vector<int32_t> out(GB_TOKENIZE_CAPACITY(s.size()));
  size_t n = 0;
  gbt::alloc_count_start();
  const gb_status st = gb::tokenize(T, s.data(), s.size(), GB_TOKENIZE_ADD_BOS, out.data(), out.size(), &n);
  const char *p;
  size_t len;
  for (size_t i = 0; st == GB_OK && i < n; i++) gb::token_to_text(T, i ? out[i - 1] : -1, out[i], &p, &len);
  const uint64_t allocs = gbt::alloc_count_stop();
  ASSERT_EQ(st, GB_OK);
  EXPECT_EQ(allocs, 0u);
}

TEST(TokenizerApi, NullArguments) {
  NEED_TOK512();
  int32_t buf[16];
  size_t n = 0;
  const char *p = nullptr;
  size_t len = 0;
  EXPECT_EQ(gb::tokenize(T, "ab", 2, 0, buf, 16, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tokenize(T, "ab", 2, 0, nullptr, 16, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tokenize(T, nullptr, 2, 0, buf, 16, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tokenize(T, nullptr, 0, 0, buf, 16, &n), GB_OK);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(gb::token_to_text(T, -1, 5, nullptr, &len), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::token_to_text(T, -1, 5, &p, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb::tokenize(T, "ab", 2, 4u, buf, 16, &n), GB_ERR_INVALID_ARGUMENT);
}

TEST(TokenizerApi, EmptyText) {
  NEED_TOK512();
  int32_t buf[3] = {-7, -7, -7};
  size_t n = 99;
  ASSERT_EQ(gb::tokenize(T, "", 0, GB_TOKENIZE_ADD_BOS, buf, 3, &n), GB_OK);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(buf[0], 1);
  ASSERT_EQ(gb::tokenize(T, "", 0, 0, buf, 3, &n), GB_OK);
  EXPECT_EQ(n, 0u);
  ASSERT_EQ(gb::tokenize(T, nullptr, 0, GB_TOKENIZE_ADD_BOS | GB_TOKENIZE_NO_DUMMY_PREFIX, buf, 3, &n), GB_OK);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(gb::tokenize(T, "", 0, 0, buf, 2, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 3u);
}

TEST(TokenizerApi, TokenToText) {
  NEED_TOK512();
  const char *p = nullptr;
  size_t n = 99;
  ASSERT_EQ(gb::token_to_text(T, -1, 3 + 0x0A, &p, &n), GB_OK);
  EXPECT_EQ(std::string(p, n), "\n");
  ASSERT_EQ(gb::token_to_text(T, -1, 3 + 0xFF, &p, &n), GB_OK);
  EXPECT_EQ(std::string(p, n), "\xFF");
  ASSERT_EQ(gb::token_to_text(T, -1, 3, &p, &n), GB_OK);  // <0x00>
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(p[0], '\0');
  for (int32_t id : {0, 1, 2}) {  // <unk>, BOS, EOS
    ASSERT_EQ(gb::token_to_text(T, -1, id, &p, &n), GB_OK);
    EXPECT_EQ(n, 0u) << id;
    EXPECT_NE(p, nullptr);
  }
  ASSERT_EQ(gb::token_to_text(T, -1, 265, &p, &n), GB_OK);
  EXPECT_EQ(std::string(p, n), " the");
  ASSERT_EQ(gb::token_to_text(T, 1, 265, &p, &n), GB_OK);  // after BOS
  EXPECT_EQ(std::string(p, n), "the");
  ASSERT_EQ(gb::token_to_text(T, 2, 265, &p, &n), GB_OK);  // after EOS: kept
  EXPECT_EQ(std::string(p, n), " the");
  ASSERT_EQ(gb::token_to_text(T, 1, T.space_token, &p, &n), GB_OK);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(gb::token_to_text(T, -1, 512, &p, &n), GB_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(gb::token_to_text(T, -1, -1, &p, &n), GB_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(gb::token_to_text(T, -1, INT32_MAX, &p, &n), GB_ERR_TOKEN_OUT_OF_RANGE);
}

TEST(TokenizerApi, NoBosTokenInVocabulary) {
  Vocab v;
  v.entries.push_back({"<unk>", 0, gb::kTokUnknown});
  v.entries.push_back({"a", -1, gb::kTokNormal});
  ASSERT_EQ(v.build(-1, -1, 0), GB_OK);
  int32_t buf[8];
  size_t n;
  EXPECT_EQ(gb::tokenize(v.tok, "a", 1, GB_TOKENIZE_ADD_BOS, buf, 8, &n), GB_ERR_UNAVAILABLE);
  ASSERT_EQ(gb::tokenize(v.tok, "ab", 2, 0, buf, 8, &n), GB_OK);
  // No " " piece and no byte tokens: the dummy space and "b" become <unk>.
  EXPECT_EQ(v.tok.space_token, -1);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(buf[0], 0);
  EXPECT_EQ(buf[1], 1);
  EXPECT_EQ(buf[2], 0);
}

// ---- vocabulary validation ---------------------------------------------------

TEST(TokenizerInit, RejectsUnusableVocabularies) {
  {  // a byte without byte token, and no unk
    Vocab v;
    v.entries.push_back({"<s>", 0, gb::kTokControl});
    v.entries.push_back({"<0x41>", 0, gb::kTokByte});
    EXPECT_EQ(v.build(0, -1, -1), GB_ERR_CORRUPT);
    EXPECT_GT(v.logs.errors, 0);
  }
  {  // malformed byte token
    Vocab v;
    v.entries.push_back({"<unk>", 0, gb::kTokUnknown});
    v.entries.push_back({"<0xZZ>", 0, gb::kTokByte});
    EXPECT_EQ(v.build(-1, -1, 0), GB_ERR_CORRUPT);
  }
  {  // piece longer than max_piece_bytes
    Vocab v;
    v.entries.push_back({"<unk>", 0, gb::kTokUnknown});
    v.entries.push_back({"abcdef", 0, gb::kTokNormal});
    EXPECT_EQ(v.build(-1, -1, 0, 4), GB_ERR_CORRUPT);
  }
  {  // special id out of range
    Vocab v;
    v.entries.push_back({"<unk>", 0, gb::kTokUnknown});
    EXPECT_EQ(v.build(5, -1, 0), GB_ERR_CORRUPT);
  }
  {  // bad type
    Vocab v;
    v.entries.push_back({"<unk>", 0, gb::kTokUnknown});
    v.entries.push_back({"a", 0, 9});
    EXPECT_EQ(v.build(-1, -1, 0), GB_ERR_CORRUPT);
  }
  {  // non-finite score of a mergeable piece
    Vocab v;
    v.entries.push_back({"<unk>", 0, gb::kTokUnknown});
    v.entries.push_back({"ab", NAN, gb::kTokNormal});
    EXPECT_EQ(v.build(-1, -1, 0), GB_ERR_CORRUPT);
  }
  {  // ASCII covered by one-byte pieces, every other byte by a byte token: fine
    Vocab v;
    for (int b = 0; b < 128; b++) v.entries.push_back({std::string(1, (char)b), -1, gb::kTokNormal});
    for (int b = 128; b < 256; b++) {
      char buf[8];
      snprintf(buf, sizeof buf, "<0x%02x>", b);  // lower-case hex is accepted
      v.entries.push_back({buf, 0, gb::kTokByte});
    }
    ASSERT_EQ(v.build(-1, -1, -1), GB_OK);
    EXPECT_EQ(v.tok.byte_token[0xAB], 128 + 0xAB - 128);
    EXPECT_EQ(decode(v.tok, encode(v.tok, "x\xAB\xC3\xA9y", 0)), " x\xAB\xC3\xA9y");
  }
}

TEST(TokenizerInit, DuplicatePiecesGiveLowestId) {
  Vocab v;
  v.entries.push_back({"<unk>", 0, gb::kTokUnknown});
  v.entries.push_back({"ab", 0, gb::kTokControl});   // same bytes, not mergeable
  v.entries.push_back({"a", -1, gb::kTokNormal});
  v.entries.push_back({"b", -1, gb::kTokNormal});
  v.entries.push_back({"ab", -5, gb::kTokNormal});
  v.entries.push_back({"ab", 9, gb::kTokNormal});
  v.entries.push_back({"a", 3, gb::kTokUserDefined});
  ASSERT_EQ(v.build(-1, -1, 0), GB_OK);
  EXPECT_EQ(encode(v.tok, "ab", GB_TOKENIZE_NO_DUMMY_PREFIX), (std::vector<int32_t>{4}));
  EXPECT_EQ(encode(v.tok, "a", GB_TOKENIZE_NO_DUMMY_PREFIX), (std::vector<int32_t>{2}));
}

}  // namespace
