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

// The alternatives the Llama 3 and gpt-4o expressions end with, at c = p.at(i):
// \p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ (gpt-4o:
// [\r\n/]* after the symbols, when slash).
size_t numbers_symbols_spaces(const Piece &p, size_t i, const Ch &c, size_t max_digits, bool slash) {
  if (c.number()) {
    size_t e = i, k = 0;
    for (Ch x = c; k < max_digits && x.number(); x = p.at(e), k++) e += x.len;
    return e;
  }
  const size_t j = c.cp == ' ' ? i + 1 : i;
  if (p.at(j).other()) {
    const size_t e = run(p, j, [](const Ch &x) { return x.other(); });
    if (slash) return run(p, e, [](const Ch &x) { return x.cp == '\r' || x.cp == '\n' || x.cp == '/'; });
    return run(p, e, [](const Ch &x) { return x.cp == '\r' || x.cp == '\n'; });
  }
  if (c.space()) {
    size_t e = i, nl_end = 0;
    for (Ch x = c; x.cp != kNone && x.space(); x = p.at(e)) {
      e += x.len;
      if (x.cp == '\r' || x.cp == '\n') nl_end = e;
    }
    if (nl_end) return nl_end;  // \s*[\r\n]+ ends after the run's last newline
    return space_tail(p, i);
  }
  return i + c.len;
}

// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}
// | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t m_llama3_n(const Piece &p, size_t i, size_t max_digits) {
  const Ch c = p.at(i);
  if (c.cp == '\'') {
    const size_t e = contraction(p, i, true);
    if (e) return e;
  }
  if (c.letter()) return run(p, i, [](const Ch &x) { return x.letter(); });
  if (c.cp != '\r' && c.cp != '\n' && !c.number() && p.at(i + c.len).letter())
    return run(p, i + c.len, [](const Ch &x) { return x.letter(); });
  return numbers_symbols_spaces(p, i, c, max_digits, false);
}
size_t m_llama3(const Piece &p, size_t i, size_t *) { return m_llama3_n(p, i, 3); }
size_t m_qwen2(const Piece &p, size_t i, size_t *) { return m_llama3_n(p, i, 1); }

// gpt-4o, as llama.cpp's expression reads it:
//   [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}
//   | ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with U a letter other than a-z, W a letter other than A-Z (a non-ASCII
// letter is both: llama.cpp matches on its collapsed category, without
// case) and C an ASCII contraction in any case ('s, 'T, 'Re, ...). tekken:
// the same without C and with \p{N} for \p{N}{1,3}.
bool gpt4o_u(const Ch &x) { return x.letter() && !(x.cp >= 'a' && x.cp <= 'z'); }
bool gpt4o_w(const Ch &x) { return x.letter() && !(x.cp >= 'A' && x.cp <= 'Z'); }
// U*W+ or U+W* at j, with its contraction when contr: the end, or 0 when
// neither starts there.
size_t gpt4o_word(const Piece &p, size_t j, bool contr) {
  size_t k = j, last_w = kNone;
  for (Ch x = p.at(k); x.cp != kNone && gpt4o_u(x); x = p.at(k)) {
    if (gpt4o_w(x)) last_w = k;
    k += x.len;
  }
  size_t e;
  if (gpt4o_w(p.at(k)))
    e = run(p, k, gpt4o_w);  // U* then W+
  else if (last_w != kNone)
    e = run(p, last_w, gpt4o_w);  // U* gives back down to its last W: W+ from there
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
size_t m_gpt4o_n(const Piece &p, size_t i, bool contr, size_t max_digits) {
  const Ch c = p.at(i);
  if (c.letter()) return gpt4o_word(p, i, contr);
  if (c.cp != '\r' && c.cp != '\n' && !c.number()) {
    const size_t e = gpt4o_word(p, i + c.len, contr);
    if (e) return e;
  }
  return numbers_symbols_spaces(p, i, c, max_digits, true);
}
size_t m_gpt4o(const Piece &p, size_t i, size_t *) { return m_gpt4o_n(p, i, true, 3); }
size_t m_tekken(const Piece &p, size_t i, size_t *) { return m_gpt4o_n(p, i, false, 1); }

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
bool letter_cls(const Ch &x) { return x.letter(); }
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
