// pretok.cpp — the pre-tokenizer matchers (see pretok.h).
//
// Each matcher looks at position i of a piece [.., end) and returns the end
// of the match starting at i, or i when none starts there (then *skip may
// move the search further when no match can start before it). The classes
// follow llama.cpp: \s is White_Space, \p{L}/\p{N}/\p{P} are the Unicode
// category groups; the deepseek-llm stages use their regex's literal ranges
// and see non-ASCII white space as U+000B, as llama.cpp's std::wregex
// fallback does.
#include "tok/pretok.h"

#include <string.h>

#include "tok/unicode.h"

namespace gb {
namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;  // past the end of the piece

struct Ch {
  uint32_t cp;
  size_t len;
  uint8_t cls;
  bool space() const { return (cls & kUcWhitespace) != 0; }
  bool letter() const { return (cls & 7) == kUcLetter; }
  bool number() const { return (cls & 7) == kUcNumber; }
  // [^\s\p{L}\p{N}] (and not past the end)
  bool other() const { return cp != kNone && !space() && !letter() && !number(); }
};

struct Piece {
  const uint8_t *t;
  size_t end;
  Ch at(size_t i) const {
    if (i >= end) return {kNone, 0, 0};
    size_t adv;
    const uint32_t cp = utf8_decode(t + i, end - i, &adv);
    return {cp, adv, ucp_class(cp)};
  }
};

typedef size_t (*Matcher)(const Piece &p, size_t i, size_t *skip);

inline uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's 't 're 've 'm 'll 'd at i (case-insensitive when ci); 0 if none.
size_t contraction(const Piece &p, size_t i, bool ci) {
  const Ch c1 = p.at(i + 1);
  if (c1.cp == kNone) return 0;
  const uint32_t a = ci ? ascii_lower(c1.cp) : c1.cp;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (a != 'r' && a != 'v' && a != 'l') return 0;
  const Ch c2 = p.at(i + 2);
  if (c2.cp == kNone) return 0;
  const uint32_t b = ci ? ascii_lower(c2.cp) : c2.cp;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

template <class Pred>
size_t run(const Piece &p, size_t i, Pred pred) {
  for (Ch c = p.at(i); c.cp != kNone && pred(c); c = p.at(i)) i += c.len;
  return i;
}

// White-space tail shared by the GPT-2 and Llama 3 expressions:
// \s+(?!\S)|\s+ at a white-space character i.
size_t space_tail(const Piece &p, size_t i) {
  size_t e = i, last = i, count = 0;
  for (Ch c = p.at(e); c.cp != kNone && c.space(); c = p.at(e)) {
    last = e;
    e += c.len;
    count++;
  }
  if (e >= p.end || count == 1) return e;  // at the end, or a single one: \s+
  return last;                             // leave the last one to the next word
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t m_gpt2(const Piece &p, size_t i, size_t *) {
  const Ch c = p.at(i);
  if (c.cp == '\'') {
    const size_t e = contraction(p, i, false);
    if (e) return e;
  }
  size_t j = i;
  Ch d = c;
  if (c.cp == ' ') {
    j = i + 1;
    d = p.at(j);
  }
  if (d.letter()) return run(p, j, [](const Ch &x) { return x.letter(); });
  if (d.number()) return run(p, j, [](const Ch &x) { return x.number(); });
  if (d.other()) return run(p, j, [](const Ch &x) { return x.other(); });
  if (c.space()) return space_tail(p, i);
  return i + c.len;
}

// What varies among the Llama 3-like expressions (llama3, qwen2, qwen35,
// seed-coder, jais-2, gpt-4o, tekken, ...).
enum Tail : uint8_t { kTailNl, kTailNlSlash, kTailNone, kTailOneNlSlash };
struct Shape {
  size_t max_digits;  // \p{N}{1,max_digits}; 0 for \p{N}+
  bool marks;         // words are [\p{L}\p{M}]+ and symbols [^\s\p{L}\p{M}\p{N}]+
  Tail tail;          // after the symbols: [\r\n]*, [\r\n/]*, nothing, [\r\n/]?
  bool cascade;       // jais-2's white space: \s{512}(?!\S)|..|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}
};

bool letter_cls(const Ch &x) { return x.letter(); }
bool is_mark(const Ch &x) { return (x.cls & 7) == kUcMark; }
bool letter_or_mark(const Ch &x) { return x.letter() || is_mark(x); }
// [^\s\p{L}\p{M}\p{N}]
bool other_not_mark(const Ch &x) { return x.other() && !is_mark(x); }

// \s*[\r\n]+|\s+(?!\S)|\s+ at a white-space character c = p.at(i), or with
// cascade jais-2's \s*[\r\n]+|\s{512}(?!\S)|..|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}.
size_t spaces(const Piece &p, size_t i, const Ch &c, bool cascade) {
  size_t e = i, nl_end = 0, count = 0;
  for (Ch x = c; x.cp != kNone && x.space(); x = p.at(e)) {
    e += x.len;
    count++;
    if (x.cp == '\r' || x.cp == '\n') nl_end = e;
  }
  if (nl_end) return nl_end;  // \s*[\r\n]+ ends after the run's last newline
  if (!cascade) return space_tail(p, i);
  // \s{k}(?!\S): k characters when more follow in the run or the run ends
  // the piece; else one.
  const bool at_end = e >= p.end;
  size_t k = 512;
  while (k >= 4 && !(count > k || (count == k && at_end))) k /= 2;
  if (k < 4) k = (count > 2 || (count == 2 && at_end)) ? 2 : 1;
  size_t end = i;
  for (size_t n = 0; n < k; n++) end += p.at(end).len;
  return end;
}

// The alternatives these expressions end with, at c = p.at(i):
// \p{N}{1,max}| ?SYM+TAIL|\s*[\r\n]+|\s+(?!\S)|\s+ (jais-2: its cascade for
// the last two).
size_t numbers_symbols_spaces(const Piece &p, size_t i, const Ch &c, const Shape &sh) {
  if (c.number()) {
    size_t e = i, k = 0;
    for (Ch x = c; (sh.max_digits == 0 || k < sh.max_digits) && x.number(); x = p.at(e), k++) e += x.len;
    return e;
  }
  const size_t j = c.cp == ' ' ? i + 1 : i;
  const Ch d = p.at(j);
  if (sh.marks ? other_not_mark(d) : d.other()) {
    const size_t e = sh.marks ? run(p, j, other_not_mark) : run(p, j, [](const Ch &x) { return x.other(); });
    const auto nl = [](const Ch &x) { return x.cp == '\r' || x.cp == '\n'; };
    const auto nl_slash = [](const Ch &x) { return x.cp == '\r' || x.cp == '\n' || x.cp == '/'; };
    switch (sh.tail) {
      case kTailNl: return run(p, e, nl);
      case kTailNlSlash: return run(p, e, nl_slash);
      case kTailOneNlSlash: return nl_slash(p.at(e)) ? e + 1 : e;
      case kTailNone: return e;
    }
  }
  if (c.space()) return spaces(p, i, c, sh.cascade);
  return i + c.len;
}

// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?WORD+|<numbers_symbols_spaces>
// with WORD \p{L}, or [\p{L}\p{M}] when sh.marks.
size_t m_llama3_shape(const Piece &p, size_t i, const Shape &sh) {
  const Ch c = p.at(i);
  if (c.cp == '\'') {
    const size_t e = contraction(p, i, true);
    if (e) return e;
  }
  const auto word = sh.marks ? letter_or_mark : letter_cls;
  if (word(c)) return run(p, i, word);
  if (c.cp != '\r' && c.cp != '\n' && !c.number() && word(p.at(i + c.len))) return run(p, i + c.len, word);
  return numbers_symbols_spaces(p, i, c, sh);
}
constexpr Shape kShapeLlama3{3, false, kTailNl, false};
constexpr Shape kShapeQwen2{1, false, kTailNl, false};
size_t m_llama3(const Piece &p, size_t i, size_t *) { return m_llama3_shape(p, i, kShapeLlama3); }
size_t m_qwen2(const Piece &p, size_t i, size_t *) { return m_llama3_shape(p, i, kShapeQwen2); }
// qwen35: words and symbols with marks.
size_t m_qwen35(const Piece &p, size_t i, size_t *) { return m_llama3_shape(p, i, Shape{1, true, kTailNl, false}); }
// seed-coder: ` ?[^\s\p{L}\p{N}\r\n]+` without a newline tail.
size_t m_seed_coder(const Piece &p, size_t i, size_t *) { return m_llama3_shape(p, i, Shape{1, false, kTailNone, false}); }
// minicpm5's second stage: \p{N}+.
size_t m_llama3_numbers(const Piece &p, size_t i, size_t *) { return m_llama3_shape(p, i, Shape{0, false, kTailNl, false}); }
size_t m_jais2(const Piece &p, size_t i, size_t *) { return m_llama3_shape(p, i, Shape{3, false, kTailNl, true}); }

// gpt-4o, as llama.cpp's expression reads it:
//   [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}
//   | ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with U a letter other than a-z, W a letter other than A-Z (a non-ASCII
// letter is both: llama.cpp matches on its collapsed category, without
// case) and C an ASCII contraction in any case ('s, 'T, 'Re, ...). tekken:
// the same without C and with \p{N} for \p{N}{1,3}. granite-embed-multi:
// marks count as letters in U and W.
struct Gpt4oWord {
  bool contr, marks;
  bool base(const Ch &x) const { return marks ? letter_or_mark(x) : x.letter(); }
  bool u(const Ch &x) const { return base(x) && !(x.cp >= 'a' && x.cp <= 'z'); }
  bool w(const Ch &x) const { return base(x) && !(x.cp >= 'A' && x.cp <= 'Z'); }
  // U*W+ or U+W* at j, with its contraction when contr: the end, or 0 when
  // neither starts there.
  size_t at(const Piece &p, size_t j) const {
    size_t k = j, last_w = kNone;
    for (Ch x = p.at(k); x.cp != kNone && u(x); x = p.at(k)) {
      if (w(x)) last_w = k;
      k += x.len;
    }
    size_t e;
    const auto wp = [this](const Ch &x) { return w(x); };
    if (w(p.at(k)))
      e = run(p, k, wp);  // U* then W+
    else if (last_w != kNone)
      e = run(p, last_w, wp);  // U* gives back down to its last W: W+ from there
    else if (k > j)
      e = k;  // U+ then an empty W*
    else
      return 0;
    if (contr && p.at(e).cp == '\'') {
      const size_t c = contraction(p, e, true);
      if (c) e = c;
    }
    return e;
  }
};
size_t m_gpt4o_n(const Piece &p, size_t i, const Gpt4oWord &wd, size_t max_digits) {
  const Ch c = p.at(i);
  if (wd.base(c)) return wd.at(p, i);
  if (c.cp != '\r' && c.cp != '\n' && !c.letter() && !c.number()) {
    const size_t e = wd.at(p, i + c.len);
    if (e) return e;
  }
  return numbers_symbols_spaces(p, i, c, Shape{max_digits, false, kTailNlSlash, false});
}
size_t m_gpt4o(const Piece &p, size_t i, size_t *) { return m_gpt4o_n(p, i, Gpt4oWord{true, false}, 3); }
size_t m_tekken(const Piece &p, size_t i, size_t *) { return m_gpt4o_n(p, i, Gpt4oWord{false, false}, 1); }
size_t m_granite_multi(const Piece &p, size_t i, size_t *) { return m_gpt4o_n(p, i, Gpt4oWord{true, true}, 3); }

// tiny_aya's and youtu's second stage: their \p{Lu}..\p{Lo} classes collapse
// to one letter class in llama.cpp, so a word is
// [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+C?, then \p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n/]*|...
// [^\r\n\p{L}\p{N}]?WORD+C? at c = p.at(i), WORD the characters `word` takes:
// the end, or 0 when none starts there.
template <class Pred>
size_t prefixed_word(const Piece &p, size_t i, const Ch &c, Pred word) {
  size_t e = 0;
  if (word(c)) e = run(p, i, word);
  else if (c.cp != '\r' && c.cp != '\n' && !c.letter() && !c.number() && word(p.at(i + c.len)))
    e = run(p, i + c.len, word);
  if (e && p.at(e).cp == '\'') {
    const size_t k = contraction(p, e, true);
    if (k) e = k;
  }
  return e;
}

size_t m_lm_words_n(const Piece &p, size_t i, size_t max_digits) {
  const Ch c = p.at(i);
  if (const size_t e = prefixed_word(p, i, c, letter_or_mark)) return e;
  return numbers_symbols_spaces(p, i, c, Shape{max_digits, false, kTailNlSlash, false});
}
size_t m_aya(const Piece &p, size_t i, size_t *) { return m_lm_words_n(p, i, 3); }
size_t m_youtu(const Piece &p, size_t i, size_t *) { return m_lm_words_n(p, i, 1); }

// \p{N}
size_t m_number1(const Piece &p, size_t i, size_t *) {
  const Ch c = p.at(i);
  return c.number() ? i + c.len : i;
}
// \p{N}+
size_t m_numbers(const Piece &p, size_t i, size_t *) {
  return run(p, i, [](const Ch &x) { return x.number(); });
}
// [0-9][0-9][0-9]
size_t m_3digits(const Piece &p, size_t i, size_t *) {
  if (i + 3 > p.end) return i;
  for (size_t k = 0; k < 3; k++)
    if (p.t[i + k] < '0' || p.t[i + k] > '9') return i;
  return i + 3;
}

bool punct_sym(const Ch &x, bool backtick) {
  if ((x.cls & 7) == kUcPunct) return true;
  switch (x.cp) {
    case '$': case '+': case '<': case '=': case '>': case '^': case '~': case '|': return true;
    case '`': return backtick;
    default: return false;
  }
}
// [\p{P}\$\+<=>\^~\|`]+
size_t m_punct_falcon(const Piece &p, size_t i, size_t *) {
  return run(p, i, [](const Ch &x) { return punct_sym(x, true); });
}
// [\p{P}\$\+<=>\^~\|]+
size_t m_punct_default(const Piece &p, size_t i, size_t *) {
  return run(p, i, [](const Ch &x) { return punct_sym(x, false); });
}

// deepseek-llm (std::wregex semantics: non-ASCII white space reads as U+000B).
inline uint32_t wide(const Ch &x) { return x.cp > 0x7F && x.space() ? 0x0B : x.cp; }
inline bool wspace(const Ch &x) {
  const uint32_t w = wide(x);
  return w == ' ' || (w >= 0x09 && w <= 0x0D);
}
bool ds_letter(const Ch &x) { return x.cp != kNone && deepseek_letter(wide(x)); }
bool ds_punct(const Ch &x) {
  const uint32_t w = wide(x);
  return (w >= 0x21 && w <= 0x2F) || (w >= 0x3A && w <= 0x7E) || (w >= 0xFF01 && w <= 0xFF0F) ||
         (w >= 0xFF1A && w <= 0xFF5E) || (w >= 0x2018 && w <= 0x201F) || (w >= 0x3000 && w <= 0x3002);
}
bool ds_cjk(const Ch &x) {
  const uint32_t w = wide(x);
  return (w >= 0x4E00 && w <= 0x9FA5) || (w >= 0x0800 && w <= 0x4E00) || (w >= 0xAC00 && w <= 0xD7FF);
}
// [\r\n]
size_t m_crlf(const Piece &p, size_t i, size_t *) {
  const uint8_t b = p.t[i];
  return b == '\r' || b == '\n' ? i + 1 : i;
}
template <bool (*Cls)(const Ch &)>
size_t opt_space_run(const Piece &p, size_t i) {
  const Ch c = p.at(i);
  if (wspace(c) && Cls(p.at(i + c.len))) return run(p, i + c.len, Cls);
  return run(p, i, Cls);
}
// \s?[letters]+
size_t m_ds_letters(const Piece &p, size_t i, size_t *) { return opt_space_run<ds_letter>(p, i); }
// \s?[!-/:-~！-／：-～‘-‟　-。]+
size_t m_ds_punct(const Piece &p, size_t i, size_t *) { return opt_space_run<ds_punct>(p, i); }
// \s+$
size_t m_space_at_end(const Piece &p, size_t i, size_t *skip) {
  const size_t e = run(p, i, [](const Ch &x) { return wspace(x); });
  if (e == i) return i;
  if (e >= p.end) return e;
  *skip = e;  // no match can start inside this run either
  return i;
}
// [一-龥ࠀ-一가-퟿]+
size_t m_ds_cjk(const Piece &p, size_t i, size_t *) { return run(p, i, ds_cjk); }

// deepseek-coder's category stages (\s is White_Space, as elsewhere).
bool punct_cls(const Ch &x) { return x.cp != kNone && (x.cls & 7) == kUcPunct; }
template <bool (*Cls)(const Ch &)>
size_t opt_ws_run(const Piece &p, size_t i) {
  const Ch c = p.at(i);
  if (c.space() && Cls(p.at(i + c.len))) return run(p, i + c.len, Cls);
  return run(p, i, Cls);
}
// \s?\p{L}+
size_t m_sp_letters(const Piece &p, size_t i, size_t *) { return opt_ws_run<letter_cls>(p, i); }
// \s?\p{P}+
size_t m_sp_punct(const Piece &p, size_t i, size_t *) { return opt_ws_run<punct_cls>(p, i); }

// ---- stages written with literal code point ranges and no \p{..} class:
// llama.cpp matches them on the code points, with non-ASCII white space
// read as U+000B, so \s is White_Space and never in a literal range -------------

template <size_t N>
bool in_ranges(uint32_t cp, const uint32_t (&r)[N][2]) {
  for (size_t k = 0; k < N; k++)
    if (cp >= r[k][0] && cp <= r[k][1]) return true;
  return false;
}
// [一-龥぀-ゟ゠-ヿ]: CJK ideographs to U+9FA5, hiragana, katakana.
const uint32_t kCjkKana[][2] = {{0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF}};
size_t m_cjk_kana(const Piece &p, size_t i, size_t *) {
  return run(p, i, [](const Ch &x) { return x.cp != kNone && in_ranges(x.cp, kCjkKana); });
}
// youtu's first stage: Hangul syllables and jamo, CJK punctuation, bopomofo,
// CJK and kana, each class a run of its own.
const uint32_t kYoutuHangul[][2] = {{0xAC00, 0xD7A3}, {0x3131, 0x318E}};
const uint32_t kYoutuPunct[][2] = {{0xFF01, 0xFF01}, {0x2026, 0x2026}, {0x201C, 0x201D}, {0x2018, 0x2019},
                                   {0x2014, 0x2014}, {0xFF1A, 0xFF1B}, {0xFF0C, 0xFF0C}, {0x3001, 0x303F},
                                   {0xFE30, 0xFE4F}};
const uint32_t kYoutuBopomofo[][2] = {{0x3105, 0x312F}};
size_t m_youtu_cjk(const Piece &p, size_t i, size_t *) {
  const uint32_t cp = p.at(i).cp;
  if (cp == kNone) return i;
  if (in_ranges(cp, kYoutuHangul)) return run(p, i, [](const Ch &x) { return x.cp != kNone && in_ranges(x.cp, kYoutuHangul); });
  if (in_ranges(cp, kYoutuPunct)) return run(p, i, [](const Ch &x) { return x.cp != kNone && in_ranges(x.cp, kYoutuPunct); });
  if (in_ranges(cp, kYoutuBopomofo))
    return run(p, i, [](const Ch &x) { return x.cp != kNone && in_ranges(x.cp, kYoutuBopomofo); });
  return m_cjk_kana(p, i, nullptr);
}
// afmoe's second stage: CJK, kana, Thai, Lao, Khmer, Myanmar, Hangul, ...
// (its expression's ranges as written, U+8C48..U+FAFF included).
const uint32_t kAfmoeScripts[][2] = {{0x4E00, 0x9FFF}, {0x3400, 0x4DBF}, {0x8C48, 0xFAFF}, {0x3040, 0x309F},
                                     {0x30A0, 0x30FF}, {0xFF65, 0xFF9F}, {0x2F00, 0x2FDF}, {0x0E40, 0x0E7F},
                                     {0x0E80, 0x0EFF}, {0x1780, 0x17FF}, {0x1000, 0x109F}, {0xAA60, 0xAA7F},
                                     {0xA9E0, 0xA9FF}, {0xAC00, 0xD7AF}, {0x1100, 0x11FF}};
size_t m_afmoe_scripts(const Piece &p, size_t i, size_t *) {
  return run(p, i, [](const Ch &x) { return x.cp != kNone && in_ranges(x.cp, kAfmoeScripts); });
}
// bloom, poro-chat, gpt3-finnish, viking: ` ?[^(\s|.,!?…。，、।۔،)]+`.
bool bloom_word(const Ch &x) {
  if (x.space()) return false;
  switch (x.cp) {
    case kNone: case '(': case ')': case '|':
    case '.': case ',': case '!': case '?': case 0x2026: case 0x3002: case 0xFF0C: case 0x3001: case 0x0964:
    case 0x06D4: case 0x060C:
      return false;
    default:
      return true;
  }
}
size_t m_bloom(const Piece &p, size_t i, size_t *) {
  const Ch c = p.at(i);
  if (c.cp == ' ' && bloom_word(p.at(i + 1))) return run(p, i + 1, bloom_word);
  return run(p, i, bloom_word);
}

// ---- chameleon's stages -----------------------------------------------------
// <sentinel:[0-9]+>
size_t m_sentinel(const Piece &p, size_t i, size_t *) {
  static const char kOpen[] = "<sentinel:";
  const size_t n = sizeof kOpen - 1;
  if (i + n > p.end || memcmp(p.t + i, kOpen, n) != 0) return i;
  size_t e = i + n;
  while (e < p.end && p.t[e] >= '0' && p.t[e] <= '9') e++;
  return e > i + n && e < p.end && p.t[e] == '>' ? e + 1 : i;
}
// (IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z
size_t m_image_token(const Piece &p, size_t i, size_t *) {
  if (i + 6 > p.end || memcmp(p.t + i, "IMGIMG", 6) != 0) return i;
  size_t e = i + 6;
  while (e < p.end && e < i + 10 && p.t[e] >= 'A' && p.t[e] <= 'I') e++;
  return e > i + 6 && e < p.end && p.t[e] == 'Z' ? e + 1 : i;
}
// ([\t\n]|    |  )
size_t m_tabs_spaces(const Piece &p, size_t i, size_t *) {
  if (p.t[i] == '\t' || p.t[i] == '\n') return i + 1;
  if (i + 4 <= p.end && memcmp(p.t + i, "    ", 4) == 0) return i + 4;
  if (i + 2 <= p.end && memcmp(p.t + i, "  ", 2) == 0) return i + 2;
  return i;
}
// [\p{P}!-/:-@\[-`{-~]: one punctuation character or ASCII symbol.
size_t m_punct_one(const Piece &p, size_t i, size_t *) {
  const Ch c = p.at(i);
  const bool ascii_sym = (c.cp >= 0x21 && c.cp <= 0x2F) || (c.cp >= 0x3A && c.cp <= 0x40) ||
                         (c.cp >= 0x5B && c.cp <= 0x60) || (c.cp >= 0x7B && c.cp <= 0x7E);
  return ascii_sym || (c.cp != kNone && (c.cls & 7) == kUcPunct) ? i + c.len : i;
}

// ---- numbers --------------------------------------------------------------------
// \p{N}{1,3}
size_t m_numbers3(const Piece &p, size_t i, size_t *) {
  size_t e = i, k = 0;
  for (Ch x = p.at(i); k < 3 && x.number(); x = p.at(e), k++) e += x.len;
  return e;
}
// afmoe's and tiny_aya's digit stage, as llama.cpp runs it: a run of n
// numbers splits into its first n mod 3 (when not 0) and then groups of 3,
// and the text before a run joins the run's first group in one piece. So
// from i a piece reaches to the end of the next group.
size_t m_digit_groups(const Piece &p, size_t i, size_t *skip) {
  size_t k = i;
  Ch x = p.at(k);
  while (x.cp != kNone && !x.number()) {
    k += x.len;
    x = p.at(k);
  }
  if (x.cp == kNone) {
    *skip = p.end;  // no number left: the rest is one piece
    return i;
  }
  // A run's first group is its length mod 3 (3 when that is 0); past it
  // (i inside a run) what remains is a multiple of 3.
  size_t n = 0;
  for (size_t e = k; p.at(e).number(); e += p.at(e).len) n++;
  const size_t take = n % 3 ? n % 3 : 3;
  size_t e = k;
  for (size_t t = 0; t < take; t++) e += p.at(e).len;
  return e;
}
// superbpe's second stage, (?=(\d{3})+(?!\d)): empty matches before every
// group of three ASCII digits counted from the end of a digit run, so a
// piece reaches from i to the next such position.
size_t m_digits_from_right(const Piece &p, size_t i, size_t *skip) {
  const auto digit = [](uint8_t b) { return b >= '0' && b <= '9'; };
  for (size_t k = i; k < p.end;) {
    if (!digit(p.t[k])) {
      k++;
      continue;
    }
    size_t e = k;
    while (e < p.end && digit(p.t[e])) e++;
    size_t q = k + (e - k) % 3;  // split points: q, q + 3, .. below e
    while (q < e && q <= i) q += 3;
    if (q < e) return q;
    k = e;
  }
  *skip = p.end;
  return i;
}

// ---- deepseek-v3, hunyuan-dense, joyai-llm, afmoe --------------------------------
// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
// | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ ; anything else (numbers,
// controls) is left between matches.
bool ascii_punct(uint32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}
bool ascii_letter(const Ch &x) { return (x.cp >= 'A' && x.cp <= 'Z') || (x.cp >= 'a' && x.cp <= 'z'); }
bool punct_or_symbol(const Ch &x) { return x.cp != kNone && ((x.cls & 7) == kUcPunct || (x.cls & 7) == kUcSymbol); }
size_t m_dsv3(const Piece &p, size_t i, size_t *) {
  const Ch c = p.at(i);
  if (ascii_punct(c.cp) && ascii_letter(p.at(i + 1))) return run(p, i + 1, ascii_letter);
  if (letter_or_mark(c)) return run(p, i, letter_or_mark);
  if (c.cp != '\r' && c.cp != '\n' && !punct_or_symbol(c) && letter_or_mark(p.at(i + c.len)))
    return run(p, i + c.len, letter_or_mark);
  const size_t j = c.cp == ' ' ? i + 1 : i;
  if (punct_or_symbol(p.at(j)))
    return run(p, run(p, j, punct_or_symbol), [](const Ch &x) { return x.cp == '\r' || x.cp == '\n'; });
  if (c.space()) return spaces(p, i, c, false);
  return i;
}

// exaone-moe: C|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}
// | ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+ : a word takes marks
// after its letters and single spaces between letters.
size_t exaone_word(const Piece &p, size_t k) {
  while (p.at(k).letter()) {
    k += p.at(k).len;
    k = run(p, k, is_mark);
    if (p.at(k).cp == ' ' && p.at(k + 1).letter()) k += 1;
  }
  return k;
}
size_t m_exaone_moe(const Piece &p, size_t i, size_t *) {
  const Ch c = p.at(i);
  if (c.cp == '\'') {
    const size_t e = contraction(p, i, true);
    if (e) return e;
  }
  if (c.letter()) return exaone_word(p, i);
  if (c.cp != '\r' && c.cp != '\n' && !c.number() && p.at(i + c.len).letter()) return exaone_word(p, i + c.len);
  return numbers_symbols_spaces(p, i, c, Shape{1, false, kTailOneNlSlash, false});
}

// ---- kimi-k2: one pass, as llama.cpp's own code for it runs -----------------------
bool han(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2EBEF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}
bool letter_not_han(const Ch &x) { return x.letter() && !han(x.cp); }
// [\p{Han}]+ | [^\r\n\p{L}\p{N}]?L+C? with L a letter other than Han
// | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]* (stopping at unassigned code points)
// | \s*[\r\n]+|\s+(?!\S)|\s+ ; anything else is a piece of its own.
size_t m_kimi(const Piece &p, size_t i, size_t *) {
  const Ch c = p.at(i);
  if (han(c.cp)) return run(p, i, [](const Ch &x) { return x.cp != kNone && han(x.cp); });
  if (const size_t e = prefixed_word(p, i, c, letter_not_han)) return e;
  if (c.number()) return m_numbers3(p, i, nullptr);
  const size_t j = c.cp == ' ' ? i + 1 : i;
  const auto sym = [](const Ch &x) { return x.other() && x.cls != kUcUndefined; };
  if (sym(p.at(j))) return run(p, run(p, j, sym), [](const Ch &x) { return x.cp == '\r' || x.cp == '\n'; });
  if (c.space()) return spaces(p, i, c, false);
  return i + c.len;
}

// [^\n]+|[\n]+
size_t m_lines(const Piece &p, size_t i, size_t *) {
  const bool nl = p.t[i] == '\n';
  size_t e = i;
  while (e < p.end && (p.t[e] == '\n') == nl) e++;
  return e;
}

struct Stages {
  const Matcher *m;
  uint32_t n;
};

const Matcher kDefault[] = {m_punct_default, m_gpt2, m_numbers, m_3digits};
const Matcher kGpt2[] = {m_gpt2};
const Matcher kLlama3[] = {m_llama3};
const Matcher kQwen2[] = {m_qwen2};
const Matcher kStarcoder[] = {m_number1, m_gpt2};
const Matcher kFalcon[] = {m_punct_falcon, m_gpt2, m_3digits};
const Matcher kDeepseek[] = {m_crlf, m_ds_letters, m_ds_punct, m_space_at_end, m_ds_cjk, m_numbers};
// [\r\n], \s?\p{L}+, \s?\p{P}+, [一-龥ࠀ-一가-퟿]+, \p{N}
const Matcher kDeepseekCoder[] = {m_crlf, m_sp_letters, m_sp_punct, m_ds_cjk, m_number1};
const Matcher kGpt4o[] = {m_gpt4o};
const Matcher kTekken[] = {m_tekken};
const Matcher kQwen35[] = {m_qwen35};
const Matcher kSeedCoder[] = {m_seed_coder};
const Matcher kMinicpm5[] = {m_numbers3, m_llama3_numbers};
const Matcher kLaguna[] = {m_lines, m_qwen2};
const Matcher kJais2[] = {m_jais2};
const Matcher kDeepseekV3[] = {m_numbers3, m_cjk_kana, m_dsv3};
const Matcher kYoutu[] = {m_youtu_cjk, m_youtu};
const Matcher kBloom[] = {m_bloom};
const Matcher kViking[] = {m_bloom, m_number1};
const Matcher kChameleon[] = {m_sentinel, m_image_token, m_tabs_spaces, m_number1, m_punct_one, m_gpt2};
const Matcher kGraniteMulti[] = {m_granite_multi};
const Matcher kTinyAya[] = {m_digit_groups, m_aya};
const Matcher kKimiK2[] = {m_kimi};
const Matcher kSuperbpe[] = {m_numbers, m_digits_from_right};
const Matcher kAfmoe[] = {m_digit_groups, m_afmoe_scripts, m_dsv3};
const Matcher kExaoneMoe[] = {m_exaone_moe};

// gemma4: [^\n]+|[\n]+ (newline is one byte, so bytes are scanned).
size_t m_newline_runs(const Piece &p, size_t i, size_t *) {
  const bool nl = p.t[i] == '\n';
  size_t e = i;
  while (e < p.end && (p.t[e] == '\n') == nl) e++;
  return e;
}
const Matcher kGemma4[] = {m_newline_runs};

Stages stages_of(uint32_t id) {
#define GB_STAGES(a) Stages{a, (uint32_t)(sizeof a / sizeof a[0])}
  switch (id) {
    case kPreDefault: return GB_STAGES(kDefault);
    case kPreGpt2: return GB_STAGES(kGpt2);
    case kPreLlama3: return GB_STAGES(kLlama3);
    case kPreQwen2: return GB_STAGES(kQwen2);
    case kPreStarcoder: return GB_STAGES(kStarcoder);
    case kPreFalcon: return GB_STAGES(kFalcon);
    case kPreDeepseekLlm: return GB_STAGES(kDeepseek);
    case kPreDeepseekCoder: return GB_STAGES(kDeepseekCoder);
    case kPreGpt4o: return GB_STAGES(kGpt4o);
    case kPreTekken: return GB_STAGES(kTekken);
    case kPreQwen35: return GB_STAGES(kQwen35);
    case kPreSeedCoder: return GB_STAGES(kSeedCoder);
    case kPreMinicpm5: return GB_STAGES(kMinicpm5);
    case kPreLaguna: return GB_STAGES(kLaguna);
    case kPreJais2: return GB_STAGES(kJais2);
    case kPreDeepseekV3: return GB_STAGES(kDeepseekV3);
    case kPreYoutu: return GB_STAGES(kYoutu);
    case kPreBloom: return GB_STAGES(kBloom);
    case kPreViking: return GB_STAGES(kViking);
    case kPreChameleon: return GB_STAGES(kChameleon);
    case kPreGraniteMulti: return GB_STAGES(kGraniteMulti);
    case kPreTinyAya: return GB_STAGES(kTinyAya);
    case kPreKimiK2: return GB_STAGES(kKimiK2);
    case kPreSuperbpe: return GB_STAGES(kSuperbpe);
    case kPreAfmoe: return GB_STAGES(kAfmoe);
    case kPreExaoneMoe: return GB_STAGES(kExaoneMoe);
    case kPreGemma4: return GB_STAGES(kGemma4);
    default: return Stages{nullptr, 0};
  }
#undef GB_STAGES
}

struct Splitter {
  const uint8_t *text;
  Stages st;
  PretokWordFn fn;
  void *ctx;

  gb_status split(uint32_t stage, size_t begin, size_t end) {
    if (begin >= end) return GB_OK;
    if (stage == st.n) return fn(ctx, begin, end);
    const Piece p{text, end};
    size_t gap = begin, i = begin;
    while (i < end) {
      size_t skip = 0;
      const size_t e = st.m[stage](p, i, &skip);
      if (e > i) {
        GB_TRY(split(stage + 1, gap, i));
        GB_TRY(split(stage + 1, i, e));
        gap = i = e;
      } else if (skip > i) {
        i = skip;
      } else {
        size_t adv;
        utf8_decode(text + i, end - i, &adv);
        i += adv;
      }
    }
    return split(stage + 1, gap, end);
  }
};

struct Name {
  const char *name;
  PretokId id;
  bool ignore_merges, add_bos;
};
const Name kNames[] = {
    {"default", kPreDefault, false, false},     {"gpt-2", kPreGpt2, false, false},
    {"phi-2", kPreGpt2, false, false},          {"jina-es", kPreGpt2, false, false},
    {"jina-de", kPreGpt2, false, false},        {"jina-v1-en", kPreGpt2, false, false},
    {"jina-v2-es", kPreGpt2, false, false},     {"jina-v2-de", kPreGpt2, false, false},
    {"jina-v2-code", kPreGpt2, false, false},   {"roberta-bpe", kPreGpt2, false, false},
    {"gigachat", kPreGpt2, false, false},       {"mpt", kPreGpt2, false, false},
    {"olmo", kPreGpt2, false, false},           {"jais", kPreGpt2, false, false},
    {"llama3", kPreLlama3, true, true},         {"llama-v3", kPreLlama3, true, true},
    {"llama-bpe", kPreLlama3, true, true},      {"falcon3", kPreLlama3, true, true},
    {"dbrx", kPreLlama3, false, false},         {"smaug-bpe", kPreLlama3, false, false},
    {"qwen2", kPreQwen2, false, false},         {"deepseek-r1-qwen", kPreQwen2, false, false},
    {"stablelm2", kPreQwen2, false, false},     {"megrez", kPreQwen2, false, false},
    {"starcoder", kPreStarcoder, false, false}, {"smollm", kPreStarcoder, false, false},
    {"refact", kPreStarcoder, false, false},    {"command-r", kPreStarcoder, false, false},
    {"codeshell", kPreStarcoder, false, false}, {"exaone", kPreStarcoder, false, false},
    {"minerva-7b", kPreStarcoder, false, false}, {"falcon", kPreFalcon, false, false},
    {"deepseek-llm", kPreDeepseekLlm, false, false}, {"deepseek-coder", kPreDeepseekCoder, false, false},
    {"gpt-4o", kPreGpt4o, false, false},         {"llama4", kPreGpt4o, false, false},
    {"kanana2", kPreGpt4o, false, false},        {"talkie", kPreGpt4o, false, false},
    {"minimax-m2", kPreGpt4o, false, false},      {"tekken", kPreTekken, true, true},
    // Names llama.cpp gives the same expressions (and flags) as above.
    {"falcon-h1", kPreLlama3, true, true},        {"pixtral", kPreLlama3, true, true},
    {"midm-2.0", kPreLlama3, true, true},         {"lfm2", kPreLlama3, true, true},
    {"jina-v5-nano", kPreLlama3, true, true},     {"glm4", kPreLlama3, false, false},
    {"chatglm-bpe", kPreLlama3, false, false},    {"a.x-4.0", kPreGpt2, false, false},
    {"mellum", kPreGpt2, false, false},           {"modern-bert", kPreGpt2, false, false},
    {"exaone4", kPreGpt2, false, false},          {"kormo", kPreQwen2, false, false},
    {"f2llmv2", kPreQwen2, false, false},
    {"grok-2", kPreQwen2, false, false},          {"hunyuan", kPreQwen2, false, false},
    {"solar-open", kPreQwen2, false, false},      {"bailingmoe", kPreQwen2, false, false},
    {"bailingmoe2", kPreQwen2, false, false},     {"llada-moe", kPreQwen2, false, false},
    {"mellum2", kPreStarcoder, false, false},     {"trillion", kPreGpt2, false, false},
    {"granite-docling", kPreGpt2, false, false},
    // Their own expressions.
    {"qwen35", kPreQwen35, false, false},         {"seed-coder", kPreSeedCoder, false, false},
    {"minicpm5", kPreMinicpm5, true, false},      {"laguna", kPreLaguna, false, false},
    {"jais-2", kPreJais2, false, false},          {"deepseek-v3", kPreDeepseekV3, false, false},
    {"youtu", kPreYoutu, true, false},            {"bloom", kPreBloom, false, false},
    {"viking", kPreViking, false, false},         {"chameleon", kPreChameleon, false, true},
    {"granite-embed-multi-97m", kPreGraniteMulti, true, false}, {"tiny_aya", kPreTinyAya, false, false},
    {"kimi-k2", kPreKimiK2, false, false},        {"superbpe", kPreSuperbpe, false, false},
    {"afmoe", kPreAfmoe, false, false},           {"exaone-moe", kPreExaoneMoe, false, false},
    {"gemma4", kPreGemma4, false, true},  // BOS always: llama.cpp forces it for this name
    // Names llama.cpp gives these same expressions (and flags).
    {"cohere2moe", kPreTinyAya, false, false},    {"hunyuan-dense", kPreDeepseekV3, false, false},
    {"joyai-llm", kPreDeepseekV3, false, false},  {"poro-chat", kPreBloom, false, false},
    {"gpt3-finnish", kPreBloom, false, false},
};

}  // namespace

PretokInfo pretok_from_name(const char *name) {
  PretokInfo info;
  if (!name) return info;
  for (const Name &n : kNames)
    if (strcmp(n.name, name) == 0) {
      info.id = (int32_t)n.id;
      info.ignore_merges = n.ignore_merges;
      info.add_bos = n.add_bos;
      break;
    }
  return info;
}

const char *pretok_name(uint32_t id) {
  if (id == kPreNone) return "none";
  for (const Name &n : kNames)
    if ((uint32_t)n.id == id) return n.name;
  return "unknown";
}

gb_status pretok_split(uint32_t id, const uint8_t *text, size_t n, PretokWordFn fn, void *ctx) {
  const Stages st = stages_of(id);
  if (!st.n || !fn) return GB_ERR_INVALID_ARGUMENT;
  if (!text && n) return GB_ERR_NULL_POINTER;
  Splitter s{text, st, fn, ctx};
  return s.split(0, 0, n);
}

}  // namespace gb
