// gbnf.cpp — GBNF text to a grammar image (gbnf.h).
//
// One recursive-descent parser, run twice: counting (sizes only, to know
// the memory) and placing. It needs no allocation: the words of the rule
// being parsed sit on a stack at the top of the output (stored downward,
// read through at()), and each finished rule body, a group, a repetition,
// moves to the front where the image grows. A group inside a rule is
// therefore finished, and numbered, before the rule that contains it.
//
// Each body in the front is preceded by two words (the offset + 1 of its
// name in the text, 0 for a rule the compiler made, and the name's length)
// so that names can be resolved once every rule is known; they are zeroed
// afterwards. A reference is first kRefName with the offset of the name in
// the text and becomes kRef once resolved.
#include "grammar/gbnf.h"

#include <algorithm>

namespace gb {
namespace {

constexpr uint32_t kRefName = 6;  // unresolved reference (placing only)
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kMaxRules = (1u << 24) - 1;

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

struct Compiler {
  const char *s;
  size_t n;
  size_t i = 0;
  uint32_t *w;  // nullptr: counting
  size_t cap;
  size_t front = kGbnfHeaderWords, back = 0, peak = kGbnfHeaderWords;
  uint32_t rules = 0;
  bool over = false;  // placing went past cap (a counting bug): nothing written there
  const Logger &log;

  Compiler(const char *text, size_t len, uint32_t *out, size_t c, const Logger &lg) : s(text), n(len), w(out), cap(c), log(lg) {}

  bool placing() const { return w != nullptr; }
  char peek(size_t k = 0) const { return i + k < n ? s[i + k] : '\0'; }
  bool at_end() const { return i >= n; }

  // The back stack, as a list growing upward: entry j sits at w[cap - 1 - j].
  uint32_t &at(size_t j) { return w[cap - 1 - j]; }
  void grow(size_t total) {
    if (total > peak) peak = total;
  }
  void push(uint32_t x) {
    back++;
    grow(front + back);
    if (!placing()) return;
    if (front + back > cap) over = true;
    else at(back - 1) = x;
  }

  gb_status error(gb_status st, size_t pos, const char *what, const char *detail = "") {
    uint32_t line = 1, col = 1;
    for (size_t k = 0; k < pos && k < n; k++) {
      if (s[k] == '\n') line++, col = 1;
      else col++;
    }
    return fail(log, st, "grammar: line %u, column %u: %s%s", line, col, what, detail);
  }
  gb_status syntax(const char *what) { return error(GB_ERR_SYNTAX, i, what); }

  // Spaces, tabs and # comments; line breaks too where newline_ok.
  void skip_space(bool newline_ok) {
    while (i < n) {
      const char c = s[i];
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        i++;
      } else if (c == '#') {
        while (i < n && s[i] != '\n' && s[i] != '\r') i++;
      } else {
        break;
      }
    }
  }

  size_t name_len(size_t at_pos) const {
    size_t k = at_pos;
    while (k < n && word_char(s[k])) k++;
    return k - at_pos;
  }

  // Move back-stack entries [from, back) to the front as a rule body;
  // name_at: offset of its name in the text + 1, or 0. Returns its number.
  gb_status emit_rule(size_t from, size_t name_at, size_t nlen, uint32_t *index) {
    if (rules >= kMaxRules) return syntax("too many rules");
    const size_t body = back - from;
    grow(front + 2 + body + back);
    if (front + 2 + body + back > kGbnfMaxWords) return error(GB_ERR_UNSUPPORTED_FEATURE, i, "grammar too large (over 16M words)");
    if (placing()) {
      if (over || front + 2 + body + back > cap) return fail(log, GB_ERR_INTERNAL, "grammar: compile outgrew its counted size");
      w[front] = (uint32_t)name_at;
      w[front + 1] = (uint32_t)nlen;
      for (size_t j = 0; j < body; j++) w[front + 2 + j] = at(from + j);
    }
    front += 2 + body;
    back = from;
    *index = rules++;
    return GB_OK;
  }

  // One character of a literal or class at i: an escape or a UTF-8 sequence.
  gb_status parse_char(uint32_t *cp) {
    const unsigned char c = (unsigned char)s[i];
    if (c == '\\') {
      const char e = peek(1);
      int hex = 0;
      switch (e) {
        case 'n': *cp = '\n'; i += 2; return GB_OK;
        case 'r': *cp = '\r'; i += 2; return GB_OK;
        case 't': *cp = '\t'; i += 2; return GB_OK;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '.':
          *cp = (uint32_t)e;
          i += 2;
          return GB_OK;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        default: return syntax("unknown escape");
      }
      uint32_t v = 0;
      for (int k = 0; k < hex; k++) {
        const char h = peek(2 + k);
        uint32_t d;
        if (h >= '0' && h <= '9') d = (uint32_t)(h - '0');
        else if (h >= 'a' && h <= 'f') d = (uint32_t)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') d = (uint32_t)(h - 'A' + 10);
        else return syntax("expected a hexadecimal digit in the escape");
        v = v << 4 | d;
      }
      if (v > kMaxCodePoint) return syntax("escape beyond U+10FFFF");
      *cp = v;
      i += 2 + (size_t)hex;
      return GB_OK;
    }
    // UTF-8: the lead byte says the length; the continuation bytes must follow.
    uint32_t need, v;
    if (c < 0x80) need = 0, v = c;
    else if ((c & 0xE0) == 0xC0) need = 1, v = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) need = 2, v = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) need = 3, v = c & 0x07;
    else return syntax("invalid UTF-8");
    for (uint32_t k = 1; k <= need; k++) {
      const unsigned char d = (unsigned char)peek(k);
      if ((d & 0xC0) != 0x80) return syntax("invalid UTF-8");
      v = v << 6 | (d & 0x3F);
    }
    if (v > kMaxCodePoint) return syntax("invalid UTF-8");
    *cp = v;
    i += 1 + need;
    return GB_OK;
  }

  void push_utf8(uint32_t cp) {
    uint8_t b[4];
    int k;
    if (cp < 0x80) b[0] = (uint8_t)cp, k = 1;
    else if (cp < 0x800) b[0] = (uint8_t)(0xC0 | cp >> 6), b[1] = (uint8_t)(0x80 | (cp & 0x3F)), k = 2;
    else if (cp < 0x10000)
      b[0] = (uint8_t)(0xE0 | cp >> 12), b[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), b[2] = (uint8_t)(0x80 | (cp & 0x3F)), k = 3;
    else
      b[0] = (uint8_t)(0xF0 | cp >> 18), b[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F)), b[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)),
      b[3] = (uint8_t)(0x80 | (cp & 0x3F)), k = 4;
    for (int j = 0; j < k; j++) push(kGbByte | (uint32_t)b[j] << 8);
  }

  gb_status parse_literal() {
    i++;  // the opening quote
    while (true) {
      if (at_end()) return syntax("unclosed string literal");
      if (s[i] == '"') break;
      uint32_t cp = 0;
      GB_TRY(parse_char(&cp));
      push_utf8(cp);
    }
    i++;
    return GB_OK;
  }

  // Emit the class element for the raw ranges at [from, back) (pairs lo,
  // hi): sorted, merged, complemented when negated, surrogates removed.
  void emit_class(size_t from, bool negated) {
    const size_t r = (back - from) / 2;
    const size_t bound = 1 + 2 * (r + 2);  // merged <= r, complement +1, surrogate split +1
    const size_t out = back;
    if (!placing()) {
      back += bound;
      grow(front + back);
      back = from + bound;
      return;
    }
    if (over || front + back + bound > cap) {
      over = true;
      return;
    }
    // The raw pairs lie in memory as (hi, lo) word pairs: sort them there.
    struct Pair {
      uint32_t hi, lo;
    };
    Pair *p = reinterpret_cast<Pair *>(&at(back - 1));
    std::sort(p, p + r, [](const Pair &a, const Pair &b) { return a.lo < b.lo; });
    push(0);  // header, set below
    uint32_t count = 0;
    auto add = [&](uint32_t lo, uint32_t hi) {  // one range, surrogates cut out
      const uint32_t s0 = 0xD800, s1 = 0xDFFF;
      if (lo < s0 && hi >= s0) {
        if (hi > s1) {
          push(lo), push(s0 - 1), count++;
          lo = s1 + 1;
        } else {
          hi = s0 - 1;
        }
      } else if (lo >= s0 && lo <= s1) {
        if (hi <= s1) return;
        lo = s1 + 1;
      }
      push(lo), push(hi), count++;
    };
    uint32_t next = 0;  // complement: first code point not yet covered
    bool have = false;
    uint32_t mlo = 0, mhi = 0;  // the merged range being grown
    auto flush = [&]() {
      if (!have) return;
      if (negated) {
        if (mlo > next) add(next, mlo - 1);
        next = mhi + 1;
      } else {
        add(mlo, mhi);
      }
    };
    // The pairs are sorted ascending by address; merge them in that order.
    for (size_t k = 0; k < r; k++) {
      const uint32_t lo = p[k].lo, hi = p[k].hi;
      if (hi < lo) continue;  // an empty range ("z-a") matches nothing
      if (have && lo <= mhi + 1) {
        if (hi > mhi) mhi = hi;
        continue;
      }
      flush();
      have = true, mlo = lo, mhi = hi;
    }
    flush();
    if (negated && next <= kMaxCodePoint) add(next, kMaxCodePoint);
    at(out) = kGbClass | count << 8;
    const size_t words = 1 + 2 * (size_t)count;
    for (size_t j = 0; j < words; j++) at(from + j) = at(out + j);
    grow(front + from + bound);
    back = from + words;
  }

  gb_status parse_class() {
    i++;  // '['
    bool negated = false;
    if (peek() == '^') negated = true, i++;
    const size_t from = back;
    while (true) {
      if (at_end()) return syntax("unclosed character class");
      if (s[i] == ']') break;
      uint32_t lo = 0, hi;
      GB_TRY(parse_char(&lo));
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && i + 1 < n) {
        i++;
        GB_TRY(parse_char(&hi));
      }
      push(lo), push(hi);
    }
    i++;
    emit_class(from, negated);
    return GB_OK;
  }

  // Replace the term at [t0, back) by `min` copies and up to `max` (~0u:
  // any number of) copies more, through rules of their own.
  gb_status repeat(size_t t0, uint32_t min, uint32_t max) {
    if (min > kGbnfMaxRepeat || (max != ~0u && max > kGbnfMaxRepeat))
      return error(GB_ERR_UNSUPPORTED_FEATURE, i, "repetition count over 1000");
    if (over) return fail(log, GB_ERR_INTERNAL, "grammar: compile outgrew its counted size");
    // The term as one word: a single element stays, longer ones become a rule.
    uint32_t x;
    if (back - t0 == 1) {
      x = placing() ? at(t0) : 0;
      back = t0;
    } else {
      push(kGbEndAlt), push(kGbEndRule);
      uint32_t r = 0;
      GB_TRY(emit_rule(t0, 0, 0, &r));
      x = kGbRef | r << 8;
    }
    uint32_t tail = 0;
    bool has_tail = false;
    if (max == ~0u) {
      // R ::= x R | (empty)
      const size_t f = back;
      push(x), push(kGbRef | rules << 8), push(kGbEndAlt), push(kGbEndAlt), push(kGbEndRule);
      GB_TRY(emit_rule(f, 0, 0, &tail));
      has_tail = true;
    } else {
      // O_1 ::= x | (empty);  O_j ::= x O_(j-1) | (empty)
      for (uint32_t j = min; j < max; j++) {
        const size_t f = back;
        push(x);
        if (has_tail) push(kGbRef | tail << 8);
        push(kGbEndAlt), push(kGbEndAlt), push(kGbEndRule);
        GB_TRY(emit_rule(f, 0, 0, &tail));
        has_tail = true;
      }
    }
    for (uint32_t j = 0; j < min; j++) push(x);
    if (has_tail) push(kGbRef | tail << 8);
    return GB_OK;
  }

  gb_status parse_count(uint32_t *v) {
    if (!(peek() >= '0' && peek() <= '9')) return syntax("expected a number in the repetition");
    uint64_t x = 0;
    while (peek() >= '0' && peek() <= '9') {
      x = x * 10 + (uint64_t)(s[i] - '0');
      if (x > kGbnfMaxRepeat) return error(GB_ERR_UNSUPPORTED_FEATURE, i, "repetition count over 1000");
      i++;
    }
    *v = (uint32_t)x;
    return GB_OK;
  }

  gb_status parse_sequence(bool nested, uint32_t depth) {
    size_t last = SIZE_MAX;  // start of the last term on the back stack
    while (!at_end()) {
      const char c = s[i];
      if (c == '"') {
        last = back;
        GB_TRY(parse_literal());
      } else if (c == '[') {
        last = back;
        GB_TRY(parse_class());
      } else if (c == '.') {
        i++;
        last = back;
        // Any character: the class of every code point (surrogates excluded).
        push(0), push(kMaxCodePoint);
        emit_class(last, false);
      } else if (word_char(c)) {
        last = back;
        const size_t at_name = i;
        i += name_len(i);
        if (at_name >= (1u << 24)) return syntax("rule name beyond 16 MiB of text");
        push(kRefName | (uint32_t)at_name << 8);
      } else if (c == '(') {
        if (depth >= kGbnfMaxNesting) return error(GB_ERR_UNSUPPORTED_FEATURE, i, "groups nested over 256 deep");
        i++;
        skip_space(true);
        const size_t f = back;
        GB_TRY(parse_alternates(true, depth + 1));
        if (peek() != ')') return syntax("expected ')'");
        i++;
        uint32_t r = 0;
        GB_TRY(emit_rule(f, 0, 0, &r));
        last = back;
        push(kGbRef | r << 8);
      } else if (c == '*' || c == '+' || c == '?') {
        if (last == SIZE_MAX) return syntax("repetition without a term before it");
        i++;
        GB_TRY(repeat(last, c == '+' ? 1 : 0, c == '?' ? 1 : ~0u));
      } else if (c == '{') {
        if (last == SIZE_MAX) return syntax("repetition without a term before it");
        i++;
        skip_space(nested);
        uint32_t lo = 0, hi = ~0u;
        if (peek() != ',') GB_TRY(parse_count(&lo));
        skip_space(nested);
        if (peek() == ',') {
          i++;
          skip_space(nested);
          if (peek() != '}') {
            GB_TRY(parse_count(&hi));
            if (hi < lo) return syntax("repetition {m,n} with n < m");
          }
        } else {
          hi = lo;
        }
        skip_space(nested);
        if (peek() != '}') return syntax("expected '}'");
        i++;
        GB_TRY(repeat(last, lo, hi));
      } else {
        break;
      }
      skip_space(nested);
    }
    return GB_OK;
  }

  gb_status parse_alternates(bool nested, uint32_t depth) {
    GB_TRY(parse_sequence(nested, depth));
    push(kGbEndAlt);
    while (peek() == '|') {
      i++;
      skip_space(true);
      GB_TRY(parse_sequence(nested, depth));
      push(kGbEndAlt);
    }
    push(kGbEndRule);
    return GB_OK;
  }

  gb_status parse_rule() {
    const size_t at_name = i;
    const size_t nl = name_len(i);
    if (nl == 0) return syntax("expected a rule name");
    i += nl;
    skip_space(false);
    if (!(peek() == ':' && peek(1) == ':' && peek(2) == '=')) return syntax("expected '::='");
    i += 3;
    skip_space(true);
    const size_t f = back;
    GB_TRY(parse_alternates(false, 0));
    if (!at_end() && s[i] != '\n' && s[i] != '\r') return syntax("unexpected character");
    uint32_t r = 0;
    return emit_rule(f, at_name + 1, nl, &r);
  }

  gb_status parse() {
    skip_space(true);
    while (!at_end()) {
      GB_TRY(parse_rule());
      skip_space(true);
    }
    if (rules == 0) return syntax("no rules");
    return GB_OK;
  }

  // ---- placing only: names, the rule table, left recursion -------------

  bool same_name(size_t a, size_t la, size_t b, size_t lb) const { return la == lb && memcmp(s + a, s + b, la) == 0; }

  // Skip one element at word p of the front; returns the next word.
  size_t next_elem(size_t p) const {
    const uint32_t k = gbnf_kind(w[p]);
    return k == kGbClass ? p + 1 + 2 * (size_t)gbnf_arg(w[p]) : p + 1;
  }

  gb_status resolve(const char *root, size_t *image) {
    // The rule table after the bodies.
    const size_t table = front;
    size_t p = kGbnfHeaderWords;
    for (uint32_t r = 0; r < rules; r++) {
      w[table + r] = (uint32_t)(p + 2);
      p += 2;
      while (gbnf_kind(w[p]) != kGbEndRule) p = next_elem(p);
      p++;
    }
    const size_t end = table + rules;
    auto name_of = [&](uint32_t r, size_t *at_name, size_t *len) {
      const size_t b = w[table + r];
      *at_name = w[b - 2];
      *len = w[b - 1];
      return *at_name != 0;
    };
    // Every named rule once.
    for (uint32_t r = 0; r < rules; r++) {
      size_t a, la;
      if (!name_of(r, &a, &la)) continue;
      for (uint32_t q = 0; q < r; q++) {
        size_t b, lb;
        if (name_of(q, &b, &lb) && same_name(a - 1, la, b - 1, lb))
          return error(GB_ERR_SYNTAX, a - 1, "a rule defined twice");
      }
    }
    auto find = [&](size_t at_name, size_t len) -> int64_t {
      for (uint32_t r = 0; r < rules; r++) {
        size_t b, lb;
        if (name_of(r, &b, &lb) && same_name(at_name, len, b - 1, lb)) return r;
      }
      return -1;
    };
    for (uint32_t r = 0; r < rules; r++) {
      for (size_t q = w[table + r]; gbnf_kind(w[q]) != kGbEndRule; q = next_elem(q)) {
        if (gbnf_kind(w[q]) != kRefName) continue;
        const size_t at_name = gbnf_arg(w[q]);
        const int64_t t = find(at_name, name_len(at_name));
        if (t < 0) return error(GB_ERR_SYNTAX, at_name, "undefined rule");
        w[q] = kGbRef | (uint32_t)t << 8;
      }
    }
    const size_t root_len = strlen(root);
    int64_t root_rule = -1;
    for (uint32_t r = 0; r < rules && root_rule < 0; r++) {
      size_t b, lb;
      if (name_of(r, &b, &lb) && lb == root_len && memcmp(s + b - 1, root, lb) == 0) root_rule = r;
    }
    if (root_rule < 0) return fail(log, GB_ERR_SYNTAX, "grammar: no rule named '%s' (the start rule)", root);
    GB_TRY(check_left_recursion(table, end));
    for (uint32_t r = 0; r < rules; r++) w[w[table + r] - 2] = w[w[table + r] - 1] = 0;
    w[0] = kGbnfMagic;
    w[1] = kGbnfVersion;
    w[2] = (uint32_t)end;
    w[3] = rules;
    w[4] = (uint32_t)root_rule;
    w[5] = (uint32_t)table;
    w[6] = w[7] = 0;
    *image = end;
    return GB_OK;
  }

  // A rule that can reach itself before reading any character would make
  // the matcher expand forever: refused. Work space after the image:
  // nullable and colour bytes per rule, then the search stack.
  gb_status check_left_recursion(size_t table, size_t end) {
    uint8_t *nullable = reinterpret_cast<uint8_t *>(w + end);
    uint8_t *colour = nullable + rules;
    uint32_t *stack = w + end + (2 * (size_t)rules + 3) / 4 + 1;  // (rule, position) pairs
    memset(nullable, 0, 2 * (size_t)rules);
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t r = 0; r < rules; r++) {
        if (nullable[r]) continue;
        bool alt_ok = true;
        for (size_t q = w[table + r]; gbnf_kind(w[q]) != kGbEndRule; q = next_elem(q)) {
          const uint32_t k = gbnf_kind(w[q]);
          if (k == kGbEndAlt) {
            if (alt_ok) {
              nullable[r] = 1;
              changed = true;
              break;
            }
            alt_ok = true;
          } else if (k != kGbRef || !nullable[gbnf_arg(w[q])]) {
            alt_ok = false;
          }
        }
      }
    }
    // Depth-first over the edges "r may start with t" (t referenced with
    // only nullable rules before it in an alternative of r); grey (1) = on
    // the path. A stack entry is the rule and its scan position, with bit 31
    // set while the position is still at the start of its alternative.
    constexpr uint32_t kLead = 1u << 31;
    for (uint32_t r0 = 0; r0 < rules; r0++) {
      if (colour[r0]) continue;
      colour[r0] = 1;
      stack[0] = r0, stack[1] = w[table + r0] | kLead;
      size_t sp = 1;
      while (sp > 0) {
        const uint32_t r = stack[2 * sp - 2];
        size_t pos = stack[2 * sp - 1] & ~kLead;
        bool lead = (stack[2 * sp - 1] & kLead) != 0;
        // Next reference in lead position.
        bool found = false;
        while (true) {
          const uint32_t k = gbnf_kind(w[pos]);
          if (k == kGbEndRule) break;
          if (k == kGbEndAlt) {
            pos++, lead = true;
          } else if (lead && k == kGbRef) {
            found = true;
            break;
          } else {
            lead = false;
            pos = next_elem(pos);
          }
        }
        if (!found) {
          colour[r] = 2;
          sp--;
          continue;
        }
        const uint32_t t = gbnf_arg(w[pos]);
        stack[2 * sp - 1] = (uint32_t)(pos + 1) | (nullable[t] ? kLead : 0u);
        if (colour[t] == 1) {
          // The cycle runs through the stack's rules from t up: name one of
          // them that has a name.
          size_t name_at = 0;
          for (size_t j = sp; j-- > 0;) {
            const uint32_t rr = stack[2 * j];
            if (!name_at) name_at = w[w[table + rr] - 2];
            if (rr == t) break;
          }
          if (name_at) return error(GB_ERR_UNSUPPORTED_FEATURE, name_at - 1, "left recursion in this rule");
          return fail(log, GB_ERR_UNSUPPORTED_FEATURE, "grammar: left recursion (through a group or repetition)");
        }
        if (colour[t] == 0) {
          colour[t] = 1;
          stack[2 * sp] = t, stack[2 * sp + 1] = w[table + t] | kLead;
          sp++;
        }
      }
    }
    return GB_OK;
  }
};

}  // namespace

gb_status gbnf_compile(const char *text, size_t len, const char *root, uint32_t *out, size_t cap, size_t *need,
                       size_t *image, const Logger &log) {
  Compiler c(text, len, out, cap, log);
  if (out && cap < kGbnfHeaderWords) return fail(log, GB_ERR_INTERNAL, "grammar: compile outgrew its counted size");
  GB_TRY(c.parse());
  if (c.over) return fail(log, GB_ERR_INTERNAL, "grammar: compile outgrew its counted size");
  // The rule table, then the left-recursion work space (two bytes and two
  // stack words per rule), after the image.
  const size_t total = c.front + c.rules + (2 * (size_t)c.rules + 3) / 4 + 1 + 2 * (size_t)c.rules + 2;
  const size_t words = (c.peak > total ? c.peak : total) + c.back;
  if (need) *need = words;
  if (!out) return GB_OK;
  if (cap < words) return fail(log, GB_ERR_INTERNAL, "grammar: compile outgrew its counted size");
  size_t img = 0;
  GB_TRY(c.resolve(root, &img));
  if (image) *image = img;
  return GB_OK;
}

}  // namespace gb
