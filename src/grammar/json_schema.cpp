// json_schema.cpp — JSON Schema to GBNF text (gb_grammar_from_json_schema).
//
// The schema is read in place: after one pass that checks the JSON syntax
// (and nesting of at most 64), small scanners skip values, walk the members
// of an object and the elements of an array, and compare or decode strings
// code point by code point. Nothing is allocated and nothing is copied but a
// few bytes for log lines.
//
// The text is generated twice by the same code: a pass that only counts
// bytes, then (when the caller's buffer holds them all) a pass that writes.
// Each schema node becomes one rule, written in full before the rules of
// its children, so a rule's body refers to its children by names that are
// computed again from the node's path when the children are written.
//
// Rule names. The start rule is `root`; a definition "#/$defs/NAME" is
// `def-NAME` ("#/definitions/NAME": `definitions-NAME`). A property adds
// "-NAME" to its object's name; structural children and helper rules add
// "--TAG" (TAG letters and an index: --item3 a prefixItems entry, --items the
// items schema, --add additionalProperties, --any2 an anyOf/oneOf branch,
// --all the allOf entry, --c4/--a4/--x the object's member chain, --t1 the
// array's tuple chain). In a NAME every byte outside [a-zA-Z0-9], and 'Z'
// itself, is written as 'Z' and two hex digits (an empty name is "Z"), so
// distinct paths always give distinct names. The shared rules are `ws` and
// `json-*`.
//
// What the grammar accepts:
//   - whitespace: `ws` (nothing, one space, or a line break and at most 20
//     spaces or tabs: a small model cannot spend its tokens on it) after '{', '[',
//     ':' and ',' and after every member value or element; none before or
//     after the whole value;
//   - strings: any character but '"', '\' and controls, or the JSON escapes;
//     literal strings (property names, enum and const values) only in one
//     spelling: the characters themselves, with '"', '\' and the controls
//     escaped (\n \t \r \b \f, else \u00XX);
//   - integers -?(0|[1-9][0-9]{0,14}) (at most 15 digits, so generation ends);
//     numbers add a fraction of 1-15 digits and an exponent of 1-3 digits;
//   - objects: the declared properties in the order of "properties", each
//     required one present and each other one present or absent; then, when
//     additionalProperties is a schema (or true), any number of further
//     members whose names are not declared ones (spelled without \u and \/
//     escapes, so that no other spelling of a declared name gets through).
//     An absent additionalProperties counts as false: only the declared
//     properties; an object schema with neither "properties",
//     "additionalProperties" nor "required" accepts any object;
//   - arrays: prefixItems (or an array "items" with additionalItems) for the
//     first elements, "items" for the rest; with prefixItems and no "items"
//     only the tuple's elements (like additionalProperties); minItems and
//     maxItems bound the count;
//   - enum / const: their values as literal JSON (objects and arrays with
//     `ws` between tokens; numbers spelled as in the schema, so 1.0 does not
//     match 1), an enum's scalars as a tree of their common prefixes;
//   - anyOf / oneOf: alternation (oneOf's exclusivity is not enforced);
//     allOf of one schema; $ref to "#", "#/$defs/NAME" or
//     "#/definitions/NAME" (the referenced definitions are written after the
//     root's rules, in order of first reference);
//   - "type" absent: the types whose keywords the schema uses (properties ->
//     object, items -> array, minLength/format -> string, minimum ->
//     number), or any value when it uses none;
//   - string minLength / maxLength (in characters; an escape is one) and
//     format date, time, date-time (RFC 3339, fraction of seconds at most 9
//     digits, day not checked against the month) and uuid;
//   - minimum 0 / exclusiveMinimum -1 (non-negative) and minimum 1 /
//     exclusiveMinimum 0 (positive) for integers; minimum 0 and
//     exclusiveMinimum 0 for numbers.
// Annotations (title, description, default, examples, $schema, $id,
// $comment, deprecated, readOnly, writeOnly, and $defs / definitions, which
// only hold the referenced schemas) are ignored; any other keyword, an
// unknown format, and a keyword beside $ref / anyOf / oneOf / allOf (or
// beside enum / const, "type" excepted) is GB_ERR_UNSUPPORTED_FEATURE.
//
// The matcher follows one parse stack per way the text can go on: about one
// per optional property still possible at a member's start, one per branch of
// an enum's prefix tree (all of them for an enum of over 2048 scalars, which
// are listed one by one). Objects with dozens of optional properties can need
// more than gb_grammar_options.max_stacks' default of 64. Beside
// additionalProperties at most 2048 properties, with names of at most 126
// characters, are supported.
#include <stdio.h>

#include <algorithm>

#include "common.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace gb {
namespace {

constexpr uint32_t kMaxDepth = 64;        // JSON nesting, and schema recursion
constexpr uint32_t kMaxDefs = 256;        // distinct definitions referenced
constexpr size_t kNone = ~(size_t)0;      // an absent keyword or value
constexpr uint64_t kInf = ~(uint64_t)0;   // no upper bound
constexpr uint64_t kNoIdx = ~(uint64_t)0;  // a tag without an index
// Repetition counts: the compiler takes up to 1000 per x{m,n}; two levels of
// them reach a million.
constexpr uint64_t kRep = kGbnfMaxRepeat;
constexpr uint64_t kMaxCount = kRep * kRep;
// Texts sorted on the stack (enum values, names of properties beside
// additionalProperties), and the longest property name there.
constexpr size_t kMaxSorted = 2048;
constexpr size_t kMaxKeyLen = 128;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// UTF-8 bytes of cp into b; returns their count.
int utf8_encode(uint32_t cp, uint8_t b[4]) {
  if (cp < 0x80) {
    b[0] = (uint8_t)cp;
    return 1;
  }
  if (cp < 0x800) {
    b[0] = (uint8_t)(0xC0 | cp >> 6), b[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    b[0] = (uint8_t)(0xE0 | cp >> 12), b[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), b[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  b[0] = (uint8_t)(0xF0 | cp >> 18), b[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
  b[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), b[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

// ---- the JSON text ---------------------------------------------------------------
//
// The scanners below assume text that the Validator accepted; they still stay
// within [0, n) whatever the bytes.

struct Json {
  const char *s;
  size_t n;

  char at(size_t i) const { return i < n ? s[i] : '\0'; }
  size_t skip_ws(size_t i) const {
    while (i < n && is_ws(s[i])) i++;
    return i;
  }
  // The end of the string whose opening quote is at i.
  size_t skip_string(size_t i) const {
    i++;
    while (i < n && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
    return i < n ? i + 1 : n;
  }
  // The end of the value starting at i.
  size_t skip_value(size_t i) const {
    const char c = at(i);
    if (c == '"') return skip_string(i);
    if (c == '{' || c == '[') {
      size_t depth = 0;
      while (i < n) {
        const char d = s[i];
        if (d == '"') {
          i = skip_string(i);
          continue;
        }
        if (d == '{' || d == '[') depth++;
        else if ((d == '}' || d == ']') && --depth == 0) return i + 1;
        i++;
      }
      return n;
    }
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_ws(s[i])) i++;
    return i;
  }
  // Walk an object's members or an array's elements: *c starts just after
  // the '{' or '['. Each call yields the next one (false after the last).
  bool next_member(size_t *c, size_t *key, size_t *val) const {
    size_t i = skip_ws(*c);
    if (at(i) == ',') i = skip_ws(i + 1);
    if (at(i) != '"') return false;
    *key = i;
    i = skip_ws(skip_string(i));
    if (at(i) != ':') return false;
    *val = skip_ws(i + 1);
    *c = skip_value(*val);
    return true;
  }
  bool next_elem(size_t *c, size_t *val) const {
    size_t i = skip_ws(*c);
    if (at(i) == ',') i = skip_ws(i + 1);
    if (i >= n || at(i) == ']') return false;
    *val = i;
    *c = skip_value(i);
    return true;
  }
  bool has_members(size_t o) const { return at(skip_ws(o + 1)) == '"'; }
  size_t count_elems(size_t a) const {
    size_t c = a + 1, v, k = 0;
    while (next_elem(&c, &v)) k++;
    return k;
  }
  size_t hex4(size_t i) const {
    size_t v = 0;
    for (size_t k = 0; k < 4; k++) {
      const int h = hex_val(at(i + k));
      if (h < 0) return 0;
      v = v << 4 | (size_t)h;
    }
    return v;
  }
  // The next code point of a string's content at *i, or -1 at its end.
  int32_t next_cp(size_t *i) const {
    size_t k = *i;
    if (k >= n || s[k] == '"') return -1;
    const uint8_t c = (uint8_t)s[k];
    if (c == '\\') {
      const char e = at(k + 1);
      *i = k + 2;
      switch (e) {
        case 'b': return '\b';
        case 'f': return '\f';
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'u': break;
        default: return (uint8_t)e;  // " \ /
      }
      uint32_t v = (uint32_t)hex4(k + 2);
      *i = k + 6;
      if (v >= 0xD800 && v <= 0xDBFF && at(k + 6) == '\\' && at(k + 7) == 'u') {
        const uint32_t lo = (uint32_t)hex4(k + 8);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
          v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
          *i = k + 12;
        }
      }
      return (int32_t)v;
    }
    uint32_t need, v;
    if (c < 0x80) need = 0, v = c;
    else if ((c & 0xE0) == 0xC0) need = 1, v = c & 0x1Fu;
    else if ((c & 0xF0) == 0xE0) need = 2, v = c & 0x0Fu;
    else need = 3, v = c & 0x07u;
    for (uint32_t m = 1; m <= need; m++) v = v << 6 | ((uint8_t)at(k + m) & 0x3Fu);
    *i = k + 1 + need;
    return (int32_t)v;
  }
  // Whether the string at q is the ASCII text lit.
  bool str_is(size_t q, const char *lit) const {
    size_t i = q + 1;
    for (const char *p = lit; *p; p++)
      if (next_cp(&i) != (uint8_t)*p) return false;
    return next_cp(&i) == -1;
  }
  bool str_eq(size_t a, size_t b) const {
    size_t i = a + 1, k = b + 1;
    while (true) {
      const int32_t x = next_cp(&i), y = next_cp(&k);
      if (x != y) return false;
      if (x < 0) return true;
    }
  }
  // The member `name` of the object at o: its value's position, or kNone.
  size_t find(size_t o, const char *name) const {
    size_t c = o + 1, key, val;
    while (next_member(&c, &key, &val))
      if (str_is(key, name)) return val;
    return kNone;
  }
  // The string at q decoded into buf (NUL-terminated, cut at cap - 4 bytes
  // with "..."), for log lines.
  void text(size_t q, char *buf, size_t cap) const {
    size_t i = q + 1, w = 0;
    int32_t cp;
    while ((cp = next_cp(&i)) >= 0) {
      uint8_t b[4];
      const int k = utf8_encode((uint32_t)cp, b);
      if (w + (size_t)k + 4 > cap) {
        memcpy(buf + w, "...", 3);
        w += 3;
        break;
      }
      for (int m = 0; m < k; m++) buf[w++] = (char)b[m];
    }
    buf[w] = '\0';
  }
  void line_col(size_t pos, uint32_t *line, uint32_t *col) const {
    uint32_t l = 1, c = 1;
    for (size_t k = 0; k < pos && k < n; k++) {
      if (s[k] == '\n') l++, c = 1;
      else c++;
    }
    *line = l, *col = c;
  }
};

// The code points of a scalar's JSON text as the grammar spells it: a
// string's characters themselves between quotes, with '"', '\' and the
// controls escaped (\n \r \t \b \f, else \u00XX); a number or word as written.
struct LitCursor {
  const Json &j;
  size_t i, end;
  bool str;
  uint8_t phase = 0;  // strings: 0 before the opening quote, 1 in the content, 2 done
  char pend[6];       // the rest of an escape
  uint8_t np = 0, ip = 0;

  LitCursor(const Json &json, size_t v) : j(json), i(v + 1), end(0), str(json.at(v) == '"') {
    if (!str) i = v, end = j.skip_value(v);
  }
  int32_t next() {
    if (ip < np) return (uint8_t)pend[ip++];
    if (!str) return i < end ? (uint8_t)j.s[i++] : -1;
    if (phase == 0) {
      phase = 1;
      return '"';
    }
    if (phase == 2) return -1;
    const int32_t cp = j.next_cp(&i);
    if (cp < 0) {
      phase = 2;
      return '"';
    }
    char e = 0;
    switch (cp) {
      case '"': e = '"'; break;
      case '\\': e = '\\'; break;
      case '\n': e = 'n'; break;
      case '\r': e = 'r'; break;
      case '\t': e = 't'; break;
      case '\b': e = 'b'; break;
      case '\f': e = 'f'; break;
      default:
        if (cp >= 0x20) return cp;
        static const char kHex[] = "0123456789ABCDEF";
        pend[0] = 'u', pend[1] = '0', pend[2] = '0', pend[3] = kHex[cp >> 4], pend[4] = kHex[cp & 15];
        np = 5, ip = 0;
        return '\\';
    }
    pend[0] = e, np = 1, ip = 0;
    return '\\';
  }
  // Skip n code points; false if the text ends first.
  bool skip(size_t n) {
    for (size_t k = 0; k < n; k++)
      if (next() < 0) return false;
    return true;
  }
};

// A number's value as far as the converter needs it.
struct NumInfo {
  bool neg = false;       // below zero (-0 is zero)
  bool integral = false;  // a whole number
  bool big = false;       // integral with more than 15 digits
  uint64_t abs = 0;       // |value| when integral and not big
};

NumInfo num_info(const Json &j, size_t p) {
  NumInfo r;
  size_t i = p;
  const bool minus = j.at(i) == '-';
  if (minus) i++;
  // Digits of the integer and fraction parts as one sequence: where the
  // first and last non-zero ones are.
  const size_t d0 = i;
  int64_t count = 0, first = -1, last = -1, frac = 0;
  bool in_frac = false;
  for (; i < j.n && (is_digit(j.s[i]) || (j.s[i] == '.' && !in_frac)); i++) {
    if (j.s[i] == '.') {
      in_frac = true;
      continue;
    }
    if (j.s[i] != '0') {
      if (first < 0) first = count;
      last = count;
    }
    count++;
    if (in_frac) frac++;
  }
  int64_t exp = 0;
  if (j.at(i) == 'e' || j.at(i) == 'E') {
    i++;
    const bool eneg = j.at(i) == '-';
    if (j.at(i) == '-' || j.at(i) == '+') i++;
    for (; i < j.n && is_digit(j.s[i]); i++)
      if (exp < 100000000) exp = exp * 10 + (j.s[i] - '0');
    if (eneg) exp = -exp;
  }
  if (first < 0) {
    r.integral = true;
    return r;
  }
  r.neg = minus;
  const int64_t e10 = exp - frac + (count - 1 - last);  // the exponent of the last non-zero digit
  const int64_t sig = last - first + 1;
  r.integral = e10 >= 0;
  if (!r.integral) return r;
  if (sig + e10 > 15) {
    r.big = true;
    return r;
  }
  int64_t idx = 0;
  for (size_t k = d0; k < j.n && (is_digit(j.s[k]) || j.s[k] == '.'); k++) {
    if (j.s[k] == '.') continue;
    if (idx >= first && idx <= last) r.abs = r.abs * 10 + (uint64_t)(j.s[k] - '0');
    idx++;
  }
  for (int64_t k = 0; k < e10; k++) r.abs *= 10;
  return r;
}

bool is_number_start(char c) { return c == '-' || is_digit(c); }

// ---- syntax check ------------------------------------------------------------------

struct Validator {
  const Json &j;
  const Logger &log;

  gb_status error(gb_status st, size_t pos, const char *what) {
    uint32_t line, col;
    j.line_col(pos, &line, &col);
    return fail(log, st, "json schema: line %u, column %u: %s", line, col, what);
  }
  gb_status syntax(size_t pos, const char *what) {
    return error(GB_ERR_SYNTAX, pos >= j.n ? j.n : pos, pos >= j.n ? "unexpected end of text" : what);
  }

  gb_status string(size_t *pi) {
    size_t i = *pi + 1;
    while (true) {
      if (i >= j.n) return syntax(i, "unclosed string");
      const uint8_t c = (uint8_t)j.s[i];
      if (c == '"') break;
      if (c < 0x20) return syntax(i, "control character in a string");
      if (c == '\\') {
        const char e = j.at(i + 1);
        if (e == 'u') {
          for (size_t k = 2; k < 6; k++)
            if (hex_val(j.at(i + k)) < 0) return syntax(i + k, "expected four hexadecimal digits after \\u");
          const size_t v = j.hex4(i + 2);
          if (v >= 0xDC00 && v <= 0xDFFF) return syntax(i, "unpaired surrogate escape");
          if (v >= 0xD800 && v <= 0xDBFF) {
            if (!(j.at(i + 6) == '\\' && j.at(i + 7) == 'u')) return syntax(i, "unpaired surrogate escape");
            for (size_t k = 8; k < 12; k++)
              if (hex_val(j.at(i + k)) < 0) return syntax(i + k, "expected four hexadecimal digits after \\u");
            const size_t lo = j.hex4(i + 8);
            if (lo < 0xDC00 || lo > 0xDFFF) return syntax(i, "unpaired surrogate escape");
            i += 12;
          } else {
            i += 6;
          }
          continue;
        }
        if (!(e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't'))
          return syntax(i, "unknown escape in a string");
        i += 2;
        continue;
      }
      if (c < 0x80) {
        i++;
        continue;
      }
      // UTF-8: the lead byte fixes the length and the second byte's range
      // (no overlong forms, no surrogates, nothing beyond U+10FFFF).
      uint32_t need;
      uint8_t lo2 = 0x80, hi2 = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) need = 1;
      else if (c == 0xE0) need = 2, lo2 = 0xA0;
      else if (c == 0xED) need = 2, hi2 = 0x9F;
      else if (c >= 0xE1 && c <= 0xEF) need = 2;
      else if (c == 0xF0) need = 3, lo2 = 0x90;
      else if (c >= 0xF1 && c <= 0xF3) need = 3;
      else if (c == 0xF4) need = 3, hi2 = 0x8F;
      else return syntax(i, "invalid UTF-8");
      for (uint32_t k = 1; k <= need; k++) {
        const uint8_t d = (uint8_t)j.at(i + k);
        if (k == 1 ? (d < lo2 || d > hi2) : (d & 0xC0) != 0x80) return syntax(i, "invalid UTF-8");
      }
      i += 1 + need;
    }
    *pi = i + 1;
    return GB_OK;
  }

  gb_status number(size_t *pi) {
    size_t i = *pi;
    if (j.at(i) == '-') i++;
    if (j.at(i) == '0') {
      i++;
    } else if (is_digit(j.at(i))) {
      while (is_digit(j.at(i))) i++;
    } else {
      return syntax(i, "expected a digit");
    }
    if (j.at(i) == '.') {
      i++;
      if (!is_digit(j.at(i))) return syntax(i, "expected a digit after '.'");
      while (is_digit(j.at(i))) i++;
    }
    if (j.at(i) == 'e' || j.at(i) == 'E') {
      i++;
      if (j.at(i) == '+' || j.at(i) == '-') i++;
      if (!is_digit(j.at(i))) return syntax(i, "expected a digit in the exponent");
      while (is_digit(j.at(i))) i++;
    }
    *pi = i;
    return GB_OK;
  }

  gb_status value(size_t *pi, uint32_t depth) {
    size_t i = j.skip_ws(*pi);
    const char c = j.at(i);
    if (i >= j.n) return syntax(i, "expected a value");
    if (c == '{' || c == '[') {
      if (depth >= kMaxDepth) return error(GB_ERR_UNSUPPORTED_FEATURE, i, "values nested deeper than 64");
      const char close = c == '{' ? '}' : ']';
      i = j.skip_ws(i + 1);
      if (j.at(i) == close) {
        *pi = i + 1;
        return GB_OK;
      }
      while (true) {
        if (c == '{') {
          if (j.at(i) != '"') return syntax(i, "expected a string (a member's name)");
          GB_TRY(string(&i));
          i = j.skip_ws(i);
          if (j.at(i) != ':') return syntax(i, "expected ':'");
          i++;
        }
        GB_TRY(value(&i, depth + 1));
        i = j.skip_ws(i);
        if (j.at(i) == ',') {
          i = j.skip_ws(i + 1);
          continue;
        }
        if (j.at(i) == close) break;
        return syntax(i, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
      }
      *pi = i + 1;
      return GB_OK;
    }
    if (c == '"') {
      *pi = i;
      return string(pi);
    }
    if (is_number_start(c)) {
      *pi = i;
      return number(pi);
    }
    static const char *const kWords[] = {"true", "false", "null"};
    for (const char *w : kWords) {
      const size_t len = strlen(w);
      if (j.n - i >= len && memcmp(j.s + i, w, len) == 0) {
        *pi = i + len;
        return GB_OK;
      }
    }
    return syntax(i, "expected a value");
  }

  gb_status run() {
    size_t i = 0;
    GB_TRY(value(&i, 0));
    i = j.skip_ws(i);
    if (i < j.n) return syntax(i, "text after the value");
    return GB_OK;
  }
};

// ---- output ------------------------------------------------------------------------

// Counts every byte; stores them only in the writing pass (which runs when
// the count fits the buffer).
struct Out {
  char *buf = nullptr;
  size_t cap = 0;
  size_t n = 0;

  void c(char ch) {
    if (buf && n < cap) buf[n] = ch;
    n++;
  }
  void s(const char *t) {
    while (*t) c(*t++);
  }
  void u(uint64_t v) {
    char d[24];
    int k = 0;
    do d[k++] = (char)('0' + v % 10);
    while (v /= 10);
    while (k) c(d[--k]);
  }
  void hex2(uint8_t b) {
    static const char kHex[] = "0123456789ABCDEF";
    c(kHex[b >> 4]);
    c(kHex[b & 15]);
  }
};

// ---- the shared rules -----------------------------------------------------------------

enum Prim : uint32_t {
  kPWs, kPChar, kPString, kPInteger, kPIntNonneg, kPIntPos, kPNumber, kPNumNonneg, kPNumPos, kPBool, kPNull,
  kPValue, kPObject, kPArray, kPDatePart, kPTimePart, kPDate, kPTime, kPDateTime, kPUuid, kPKeyChar, kPKeyRest,
  kPKey, kPCount
};

constexpr uint32_t bit(Prim p) { return 1u << p; }

struct PrimDef {
  const char *name;
  const char *body;
  uint32_t deps;  // the shared rules the body refers to
};

// The integer part of every number: at most 15 digits, so that a model
// cannot write digits forever; fractions at most 15 digits, exponents 3.
const PrimDef kPrims[kPCount] = {
    {"ws", "(\" \" | \"\\n\" [ \\t]{0,20})?", 0},
    {"json-char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})", 0},
    {"json-string", "\"\\\"\" json-char* \"\\\"\"", bit(kPChar)},
    {"json-integer", "\"-\"? (\"0\" | [1-9] [0-9]{0,14})", 0},
    {"json-integer-nonneg", "\"0\" | [1-9] [0-9]{0,14}", 0},
    {"json-integer-pos", "[1-9] [0-9]{0,14}", 0},
    {"json-number", "\"-\"? json-number-nonneg", bit(kPNumNonneg)},
    {"json-number-nonneg", "(\"0\" | [1-9] [0-9]{0,14}) (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?", 0},
    {"json-number-pos",
     "([1-9] [0-9]{0,14} (\".\" [0-9]{1,15})? | \"0.\" \"0\"{0,14} [1-9] [0-9]{0,14}) ([eE] [-+]? [0-9]{1,3})?", 0},
    {"json-boolean", "\"true\" | \"false\"", 0},
    {"json-null", "\"null\"", 0},
    {"json-value", "json-object | json-array | json-string | json-number | json-boolean | json-null",
     bit(kPObject) | bit(kPArray) | bit(kPString) | bit(kPNumber) | bit(kPBool) | bit(kPNull)},
    {"json-object",
     "\"{\" ws (json-string ws \":\" ws json-value ws (\",\" ws json-string ws \":\" ws json-value ws)*)? \"}\"",
     bit(kPWs) | bit(kPString) | bit(kPValue)},
    {"json-array", "\"[\" ws (json-value ws (\",\" ws json-value ws)*)? \"]\"", bit(kPWs) | bit(kPValue)},
    {"json-date-part", "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])", 0},
    {"json-time-part",
     "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" ([0-5] [0-9] | \"60\") (\".\" [0-9]{1,9})? "
     "([Zz] | [-+] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])",
     0},
    {"json-date", "\"\\\"\" json-date-part \"\\\"\"", bit(kPDatePart)},
    {"json-time", "\"\\\"\" json-time-part \"\\\"\"", bit(kPTimePart)},
    {"json-date-time", "\"\\\"\" json-date-part [Tt] json-time-part \"\\\"\"", bit(kPDatePart) | bit(kPTimePart)},
    {"json-uuid",
     "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} "
     "\"\\\"\"",
     0},
    // The names of additional properties: one spelling per name (no \u or
    // \/ escapes), so that one that is not a declared name's text is not
    // that name in another spelling.
    {"json-key-char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\bfnrt]", 0},
    {"json-key-rest", "json-key-char* \"\\\"\"", bit(kPKeyChar)},
    {"json-key", "\"\\\"\" json-key-rest", bit(kPKeyRest)},
};

// ---- keywords ----------------------------------------------------------------------

enum Kw : uint32_t {
  kType, kProperties, kRequired, kAdditionalProperties, kItems, kPrefixItems, kAdditionalItems, kMinItems, kMaxItems,
  kEnum, kConst, kAnyOf, kOneOf, kAllOf, kRef, kMinLength, kMaxLength, kFormat, kMinimum, kExclusiveMinimum, kKwCount
};
const char *const kKwNames[kKwCount] = {
    "type",     "properties", "required", "additionalProperties", "items",     "prefixItems", "additionalItems",
    "minItems", "maxItems",   "enum",     "const",                "anyOf",     "oneOf",       "allOf",
    "$ref",     "minLength",  "maxLength", "format",              "minimum",   "exclusiveMinimum"};
const char *const kAnnotations[] = {"title",      "description", "default",  "examples", "$schema", "$id",
                                    "$comment",   "$defs",       "definitions", "deprecated", "readOnly", "writeOnly"};

// Type bits.
enum : uint32_t {
  kTObject = 1, kTArray = 2, kTString = 4, kTNumber = 8, kTInteger = 16, kTBool = 32, kTNull = 64, kTAll = 127
};
const char *const kTypeNames[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

// The keywords of one schema object: each one's value, or kNone.
struct Kws {
  size_t at[kKwCount];
  bool has(Kw k) const { return at[k] != kNone; }
};

// A rule's name: the path from the root or a definition.
struct Path {
  enum Kind : uint8_t { kRoot, kDef, kDefinition, kProp, kTag };
  const Path *up;
  Kind kind;
  size_t key;       // kDef, kDefinition, kProp: the name's string in the schema
  const char *tag;  // kTag
  uint64_t idx;     // kTag: its index, or kNoIdx
};

Path prop_path(const Path &up, size_t key) { return Path{&up, Path::kProp, key, nullptr, kNoIdx}; }
Path tag_path(const Path &up, const char *tag, uint64_t idx = kNoIdx) { return Path{&up, Path::kTag, 0, tag, idx}; }

// ---- the generator -----------------------------------------------------------------

struct Gen {
  const Json &j;
  const Logger &log;
  Out out;
  size_t root = 0;                          // the schema
  size_t defs_at = kNone, definitions_at = kNone;  // the root's $defs / definitions objects
  struct Def {
    Path::Kind kind;
    size_t key, val;
  } defs[kMaxDefs];
  uint32_t n_defs = 0;
  uint32_t prims = 0;  // the shared rules referred to
  const char *prefix = "";  // before every rule name but the shared ones
  bool write_shared = true;  // write the shared rules at the end

  Gen(const Json &json, const Logger &lg) : j(json), log(lg) {}

  __attribute__((noinline, format(printf, 4, 5))) gb_status err(gb_status st, size_t pos, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint32_t line, col;
    j.line_col(pos, &line, &col);
    return fail(log, st, "json schema: line %u, column %u: %s", line, col, msg);
  }

  // ---- names and literals

  void prim(Prim p) {
    prims |= bit(p);
    out.s(kPrims[p].name);
  }
  // A property or definition name: [a-zA-Z0-9] but 'Z' as they are, other
  // bytes as 'Z' and two hex digits, the empty name as "Z".
  void seg(size_t q) {
    size_t i = q + 1;
    int32_t cp;
    bool any = false;
    while ((cp = j.next_cp(&i)) >= 0) {
      any = true;
      uint8_t b[4];
      const int k = utf8_encode((uint32_t)cp, b);
      for (int m = 0; m < k; m++) {
        const uint8_t x = b[m];
        const bool alnum = (x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Y') || (x >= '0' && x <= '9');
        if (alnum) {
          out.c((char)x);
        } else {
          out.c('Z');
          out.hex2(x);
        }
      }
    }
    if (!any) out.c('Z');
  }
  void name(const Path &p) {
    if (p.up) name(*p.up);
    else out.s(prefix);
    switch (p.kind) {
      case Path::kRoot: out.s("root"); break;
      case Path::kDef: out.s("def-"), seg(p.key); break;
      case Path::kDefinition: out.s("definitions-"), seg(p.key); break;
      case Path::kProp: out.c('-'), seg(p.key); break;
      case Path::kTag:
        out.s("--"), out.s(p.tag);
        if (p.idx != kNoIdx) out.u(p.idx);
        break;
    }
  }
  void aux(const Path &p, const char *tag, uint64_t idx = kNoIdx) { name(tag_path(p, tag, idx)); }
  void rule(const Path &p) { name(p), out.s(" ::= "); }
  void rule_aux(const Path &p, const char *tag, uint64_t idx = kNoIdx) { aux(p, tag, idx), out.s(" ::= "); }

  // One code point of a JSON text inside a GBNF literal.
  void lit_cp(int32_t cp) {
    if (cp == '"') return out.s("\\\"");
    if (cp == '\\') return out.s("\\\\");
    if (cp == 0x7F) return out.s("\\x7F");
    uint8_t b[4];
    const int k = utf8_encode((uint32_t)cp, b);
    for (int m = 0; m < k; m++) out.c((char)b[m]);
  }
  // The scalar at v (string, number, true, false, null) as a GBNF literal
  // of its JSON text.
  void lit_scalar(size_t v) {
    out.c('"');
    LitCursor c(j, v);
    for (int32_t cp; (cp = c.next()) >= 0;) lit_cp(cp);
    out.c('"');
  }
  // The value at v as a GBNF sequence matching its JSON text (ws between
  // the tokens of objects and arrays).
  void lit_value(size_t v) {
    const char c = j.at(v);
    if (c == '{') {
      out.s("\"{\" ");
      prim(kPWs);
      size_t cur = v + 1, key, val;
      bool first = true;
      while (j.next_member(&cur, &key, &val)) {
        if (!first) out.s(" \",\" "), prim(kPWs);
        first = false;
        out.c(' ');
        lit_scalar(key);
        out.c(' '), prim(kPWs), out.s(" \":\" "), prim(kPWs), out.c(' ');
        lit_value(val);
        out.c(' '), prim(kPWs);
      }
      out.s(" \"}\"");
    } else if (c == '[') {
      out.s("\"[\" ");
      prim(kPWs);
      size_t cur = v + 1, val;
      bool first = true;
      while (j.next_elem(&cur, &val)) {
        if (!first) out.s(" \",\" "), prim(kPWs);
        first = false;
        out.c(' ');
        lit_value(val);
        out.c(' '), prim(kPWs);
      }
      out.s(" \"]\"");
    } else {
      lit_scalar(v);
    }
  }

  // ---- enum values as a tree of prefixes
  //
  // Alternatives that start alike are each a parse stack for as long as they
  // agree (and the matcher keeps a bounded number of stacks), so the scalar
  // values of an enum are written as a tree of their common prefixes: sorted
  // by their text, then at each branch one alternative per next code point,
  // each with the run of code points its values share.

  // Code point L of v's text, -1 past its end.
  int32_t cp_at(size_t v, size_t L) const {
    LitCursor c(j, v);
    return c.skip(L) ? c.next() : -1;
  }
  // The code points a and b share from L on.
  size_t common(size_t a, size_t b, size_t L) const {
    LitCursor x(j, a), y(j, b);
    x.skip(L), y.skip(L);
    size_t k = 0;
    for (int32_t p; (p = x.next()) >= 0 && p == y.next();) k++;
    return k;
  }
  size_t lit_length(size_t v) const {
    LitCursor c(j, v);
    size_t n = 0;
    while (c.next() >= 0) n++;
    return n;
  }
  // Code points [from, from + n) of v's text as one GBNF literal.
  void lit_part(size_t v, size_t from, size_t n) {
    LitCursor c(j, v);
    c.skip(from);
    out.c('"');
    for (size_t k = 0; k < n; k++) lit_cp(c.next());
    out.c('"');
  }
  // Values v[a, b) (sorted) share their first L code points: the rest of
  // them as the rule's alternatives (top), or as " (...)" after the shared
  // part, "?" when one of them ends there. Branches below kMaxDepth levels
  // list their values one by one.
  void trie(const uint32_t *v, size_t a, size_t b, size_t L, uint32_t depth, bool top) {
    bool ends = false;
    while (a < b && cp_at(v[a], L) < 0) a++, ends = true;  // the shortest sort first
    if (a == b) return;
    if (!top) out.s(" (");
    for (size_t g = a; g < b;) {
      size_t h = g + 1;
      if (depth < kMaxDepth) {
        const int32_t cp = cp_at(v[g], L);
        while (h < b && cp_at(v[h], L) == cp) h++;
      }
      if (g > a) out.s(" | ");
      const size_t ext = h - g > 1 ? common(v[g], v[h - 1], L) : lit_length(v[g]) - L;
      lit_part(v[g], L, ext);
      trie(v, g, h, L + ext, depth + 1, false);
      g = h;
    }
    if (!top) out.s(ends ? ")?" : ")");
  }
  // Sort scalars by their texts' code points (a shorter text first).
  void sort_texts(uint32_t *v, size_t n) const {
    std::sort(v, v + n, [&](uint32_t a, uint32_t b) {
      LitCursor x(j, a), y(j, b);
      while (true) {
        const int32_t p = x.next(), q = y.next();
        if (p != q) return p < q;
        if (p < 0) return false;
      }
    });
  }
  // The enum's scalar values of the allowed types as alternatives; false
  // when it has none. Not inlined: its array stays out of node()'s frames.
  __attribute__((noinline)) bool enum_scalars(size_t arr, uint32_t mask) {
    uint32_t v[kMaxSorted];
    size_t n = 0, total = 0, cur = arr + 1, e;
    while (j.next_elem(&cur, &e)) {
      if (j.at(e) == '{' || j.at(e) == '[' || !(value_types(e) & mask)) continue;
      if (n < kMaxSorted && e <= UINT32_MAX) v[n++] = (uint32_t)e;
      total++;
    }
    if (total == 0) return false;
    if (n == total) {
      sort_texts(v, n);
      trie(v, 0, n, 0, 0, true);
      return true;
    }
    bool first = true;
    for (cur = arr + 1; j.next_elem(&cur, &e);) {
      if (j.at(e) == '{' || j.at(e) == '[' || !(value_types(e) & mask)) continue;
      if (!first) out.s(" | ");
      first = false;
      lit_scalar(e);
    }
    return true;
  }

  // ---- names of additional properties
  //
  // Beside declared properties an additional member's name is any name but
  // theirs: a tree over the declared names' texts (sorted as for enums) that
  // may leave it at each point, with a character none of them has there or
  // the closing quote where none ends, and then goes on as any name.

  // A code point inside a GBNF character class.
  void class_cp(int32_t cp) {
    if (cp == ']' || cp == '[' || cp == '^' || cp == '-') out.c('\\');
    lit_cp(cp);  // escapes '"' and '\\' itself
  }
  // Names v[a, b) share their first L code points (after_bs: the last one
  // opens an escape): the group of ways to go on.
  void key_trie(const uint32_t *v, size_t a, size_t b, size_t L, bool after_bs) {
    bool first = true, ends = false, escape = false;
    auto alt = [&] {
      if (!first) out.s(" | ");
      first = false;
    };
    out.c('(');
    for (size_t g = a; g < b;) {
      const int32_t cp = cp_at(v[g], L);
      size_t h = g + 1;
      while (h < b && cp_at(v[h], L) == cp) h++;
      if (!after_bs && cp == '"') {
        ends = true;  // a declared name: not one of the others
      } else if (!(after_bs && cp == 'u')) {  // \u is not a spelling of the others
        alt();
        out.c('"'), lit_cp(cp), out.s("\" ");
        key_trie(v, g, h, L + 1, !after_bs && cp == '\\');
        escape = escape || cp == '\\';
      }
      g = h;
    }
    if (!after_bs) {
      if (!ends) alt(), out.s("\"\\\"\"");
      alt();
      out.s("[^\"\\\\\\x00-\\x1F");
      for (size_t g = a; g < b; g++) {
        const int32_t cp = cp_at(v[g], L);
        if (cp != '"' && cp != '\\' && (g == a || cp != cp_at(v[g - 1], L))) class_cp(cp);
      }
      out.s("] "), prim(kPKeyRest);
      if (!escape) alt(), out.s("\"\\\\\" [\"\\\\bfnrt] "), prim(kPKeyRest);
    } else {
      static const char kLetters[] = "\"\\bfnrt";
      bool any = false;
      for (const char *e = kLetters; *e; e++) {
        bool taken = false;
        for (size_t g = a; g < b && !taken; g++) taken = cp_at(v[g], L) == *e;
        if (taken) continue;
        if (!any) alt(), out.c('[');
        any = true;
        class_cp(*e);
      }
      if (any) out.s("] "), prim(kPKeyRest);
    }
    out.c(')');
  }
  // The name of an additional property beside the properties at props.
  // Not inlined: its array stays out of node()'s frames.
  __attribute__((noinline)) void extra_key(size_t props) {
    uint32_t v[kMaxSorted];
    size_t n = 0, c = props + 1, key, val;
    while (n < kMaxSorted && j.next_member(&c, &key, &val)) v[n++] = (uint32_t)key;  // counts checked by obj_check
    sort_texts(v, n);
    out.s("\"\\\"\" ");
    key_trie(v, 0, n, 1, false);
  }

  // x written `lo` to `hi` times (hi: kInf for no bound), both at most 1000.
  template <class F>
  void times(F x, uint64_t lo, uint64_t hi) {
    if (hi == 0) return;
    out.c(' ');
    x();
    if (lo == 1 && hi == 1) return;
    if (lo == 0 && hi == 1) return out.c('?');
    if (lo == 0 && hi == kInf) return out.c('*');
    if (lo == 1 && hi == kInf) return out.c('+');
    out.c('{'), out.u(lo);
    if (hi != lo) {
      out.c(',');
      if (hi != kInf) out.u(hi);
    }
    out.c('}');
  }
  // body() (a sequence) repeated lo to hi times (hi: kInf for no bound).
  // Counts over 1000 go through blocks of 1000: lo = 1000q + r copies as
  // ((x){1000}){q} (x){r}, and up to k = 1000q + r more as the choice
  // between fewer than q blocks and any partial one, or q blocks and up to
  // r more, so that the matcher follows at most a few ways at once.
  // single: body is one term (no parentheses needed).
  template <class F>
  gb_status rep(F body, bool single, uint64_t lo, uint64_t hi, size_t pos) {
    if (lo > kMaxCount || (hi != kInf && hi - lo > kMaxCount))
      return err(GB_ERR_UNSUPPORTED_FEATURE, pos, "a count over %llu", (unsigned long long)kMaxCount);
    auto g = [&] {
      if (!single) out.c('(');
      body();
      if (!single) out.c(')');
    };
    auto block = [&] { out.c('('), g(), out.s("{1000})"); };
    if (lo >= kRep) times(block, lo / kRep, lo / kRep);
    times(g, lo % kRep, lo % kRep);
    if (hi == kInf) {
      times(g, 0, kInf);
    } else if (hi - lo <= kRep) {
      times(g, 0, hi - lo);
    } else {
      const uint64_t q = (hi - lo) / kRep, r = (hi - lo) % kRep;
      out.s(" (");
      times(block, 0, q - 1);
      times(g, 0, kRep - 1);
      out.s(" |");
      times(block, q, q);
      if (r) times(g, 0, r);
      out.s(" )");
    }
    return GB_OK;
  }

  // ---- reading keywords

  gb_status read_kws(size_t p, Kws *k) {
    for (size_t &a : k->at) a = kNone;
    size_t c = p + 1, key, val;
    while (j.next_member(&c, &key, &val)) {
      bool known = false;
      for (uint32_t w = 0; w < kKwCount && !known; w++) {
        if (!j.str_is(key, kKwNames[w])) continue;
        known = true;
        if (k->at[w] != kNone) return err(GB_ERR_INVALID_ARGUMENT, key, "keyword '%s' given twice", kKwNames[w]);
        k->at[w] = val;
      }
      for (const char *a : kAnnotations) known = known || j.str_is(key, a);
      if (!known) {
        char t[64];
        j.text(key, t, sizeof t);
        return err(GB_ERR_UNSUPPORTED_FEATURE, key, "keyword '%s' not supported", t);
      }
    }
    return GB_OK;
  }
  // Refuse every keyword of k but `self` and `also`.
  gb_status alone(const Kws &k, Kw self, Kw also) {
    for (uint32_t w = 0; w < kKwCount; w++)
      if (w != self && w != also && k.has((Kw)w))
        return err(GB_ERR_UNSUPPORTED_FEATURE, k.at[w], "keyword '%s' beside '%s' not supported", kKwNames[w],
                   kKwNames[self]);
    return GB_OK;
  }
  // A non-negative integer keyword (absent: dflt). Values over 15 digits
  // read as kMaxCount + 1 (refused where they are used).
  gb_status count(const Kws &k, Kw w, uint64_t dflt, uint64_t *v) {
    *v = dflt;
    if (!k.has(w)) return GB_OK;
    const size_t p = k.at[w];
    if (!is_number_start(j.at(p))) return err(GB_ERR_INVALID_ARGUMENT, p, "'%s' must be a number", kKwNames[w]);
    const NumInfo ni = num_info(j, p);
    if (ni.neg || !ni.integral)
      return err(GB_ERR_INVALID_ARGUMENT, p, "'%s' must be a non-negative integer", kKwNames[w]);
    *v = ni.big ? kMaxCount + 1 : ni.abs;
    return GB_OK;
  }
  gb_status array_kw(const Kws &k, Kw w) {
    if (j.at(k.at[w]) != '[') return err(GB_ERR_INVALID_ARGUMENT, k.at[w], "'%s' must be an array", kKwNames[w]);
    return GB_OK;
  }

  // The types a schema allows.
  gb_status types(const Kws &k, uint32_t *mask) {
    uint32_t m = 0;
    if (k.has(kType)) {
      const size_t t = k.at[kType];
      auto one = [&](size_t q) -> gb_status {
        if (j.at(q) != '"') return err(GB_ERR_INVALID_ARGUMENT, q, "'type' must be a string or an array of strings");
        for (uint32_t b = 0; b < 7; b++)
          if (j.str_is(q, kTypeNames[b])) {
            m |= 1u << b;
            return GB_OK;
          }
        char tx[64];
        j.text(q, tx, sizeof tx);
        return err(GB_ERR_INVALID_ARGUMENT, q, "unknown type '%s'", tx);
      };
      if (j.at(t) == '[') {
        size_t c = t + 1, v;
        while (j.next_elem(&c, &v)) GB_TRY(one(v));
        if (!m) return err(GB_ERR_INVALID_ARGUMENT, t, "'type' is an empty array");
      } else {
        GB_TRY(one(t));
      }
    } else {
      if (k.has(kProperties) || k.has(kRequired) || k.has(kAdditionalProperties)) m |= kTObject;
      if (k.has(kItems) || k.has(kPrefixItems) || k.has(kAdditionalItems) || k.has(kMinItems) || k.has(kMaxItems))
        m |= kTArray;
      if (k.has(kMinLength) || k.has(kMaxLength) || k.has(kFormat)) m |= kTString;
      if (k.has(kMinimum) || k.has(kExclusiveMinimum)) m |= kTNumber;
      if (!m) m = kTAll;
    }
    if (m & kTNumber) m &= ~kTInteger;  // numbers include the integers
    *mask = m;
    return GB_OK;
  }

  // The type bits a literal value has.
  uint32_t value_types(size_t v) const {
    switch (j.at(v)) {
      case '{': return kTObject;
      case '[': return kTArray;
      case '"': return kTString;
      case 't': case 'f': return kTBool;
      case 'n': return kTNull;
      default: return kTNumber | (num_info(j, v).integral ? kTInteger : 0u);
    }
  }

  // ---- $ref

  // The definition a $ref string names: its path and schema. False when it
  // names none (not logged).
  bool resolve(size_t q, Path *target, size_t *val) const {
    if (j.at(q) != '"') return false;
    if (j.str_is(q, "#")) {
      *target = Path{nullptr, Path::kRoot, 0, nullptr, kNoIdx};
      *val = root;
      return true;
    }
    static const char *const kPrefix[2] = {"#/$defs/", "#/definitions/"};
    for (int w = 0; w < 2; w++) {
      const size_t obj = w == 0 ? defs_at : definitions_at;
      if (obj == kNone) continue;
      size_t i = q + 1;
      bool ok = true;
      for (const char *p = kPrefix[w]; *p && ok; p++) ok = j.next_cp(&i) == (uint8_t)*p;
      if (!ok) continue;
      size_t c = obj + 1, key, v;
      while (j.next_member(&c, &key, &v)) {
        // The rest of the reference, JSON-pointer unescaped, against the key.
        size_t ri = i, ki = key + 1;
        bool same = true;
        while (same) {
          int32_t r = j.next_cp(&ri);
          if (r == '~') {
            const int32_t e = j.next_cp(&ri);
            r = e == '0' ? '~' : e == '1' ? '/' : -2;
          } else if (r == '/') {
            r = -2;  // a deeper pointer: not a definition's name
          }
          const int32_t kc = j.next_cp(&ki);
          if (r != kc) same = false;
          else if (r < 0) break;
        }
        if (same) {
          *target = Path{nullptr, w == 0 ? Path::kDef : Path::kDefinition, key, nullptr, kNoIdx};
          *val = v;
          return true;
        }
      }
    }
    return false;
  }

  // Where a schema that only redirects ($ref, or allOf of one schema) leads;
  // kNone for any other schema.
  size_t redirect(size_t p) const {
    if (j.at(p) != '{') return kNone;
    size_t c = p + 1, key, val, to = kNone;
    while (j.next_member(&c, &key, &val)) {
      Path t;
      if (j.str_is(key, "$ref")) {
        if (!resolve(val, &t, &to)) return kNone;
      } else if (j.str_is(key, "allOf")) {
        if (j.at(val) != '[' || j.count_elems(val) != 1) return kNone;
        size_t e = val + 1;
        j.next_elem(&e, &to);
      } else {
        bool annotation = false;
        for (const char *a : kAnnotations) annotation = annotation || j.str_is(key, a);
        if (!annotation) return kNone;
      }
    }
    return to;
  }

  gb_status ref_node(size_t p, const Kws &k, const Path &path) {
    GB_TRY(alone(k, kRef, kRef));
    Path target;
    size_t val;
    if (!resolve(k.at[kRef], &target, &val)) {
      if (j.at(k.at[kRef]) != '"') return err(GB_ERR_INVALID_ARGUMENT, k.at[kRef], "'$ref' must be a string");
      char t[96];
      j.text(k.at[kRef], t, sizeof t);
      return err(GB_ERR_INVALID_ARGUMENT, k.at[kRef],
                 "$ref '%s' does not resolve (\"#\", \"#/$defs/NAME\" or \"#/definitions/NAME\")", t);
    }
    // A chain of references that comes back to where it started matches
    // nothing (and would be left recursion).
    size_t at = val;
    for (uint32_t hops = 0; at != kNone; hops++) {
      if (at == p || hops > kMaxDepth)
        return err(GB_ERR_INVALID_ARGUMENT, k.at[kRef], "$ref cycle without a value in between");
      at = redirect(at);
    }
    if (target.kind != Path::kRoot) {
      uint32_t d = 0;
      while (d < n_defs && defs[d].key != target.key) d++;
      if (d == n_defs) {
        if (n_defs == kMaxDefs)
          return err(GB_ERR_UNSUPPORTED_FEATURE, k.at[kRef], "more than %u definitions referenced", kMaxDefs);
        defs[n_defs++] = Def{target.kind, target.key, val};
      }
    }
    rule(path);
    name(target);
    out.c('\n');
    return GB_OK;
  }

  // ---- objects

  struct ObjInfo {
    bool any = false;         // any object (no keywords of objects)
    size_t props = kNone;     // the properties object
    uint32_t n = 0;           // properties whose schema is not false
    int64_t last_req = -1;    // the index (among those) of the last required one
    size_t extra = kNone;     // additionalProperties' schema, kNone: no other members
  };

  bool is_required(const Kws &k, size_t key) const {
    if (!k.has(kRequired)) return false;
    size_t c = k.at[kRequired] + 1, v;
    while (j.next_elem(&c, &v))
      if (j.str_eq(v, key)) return true;
    return false;
  }

  gb_status obj_check(const Kws &k, ObjInfo *o) {
    const size_t ap = k.has(kAdditionalProperties) ? k.at[kAdditionalProperties] : kNone;
    if (!k.has(kProperties) && !k.has(kRequired) && ap == kNone) {
      o->any = true;
      return GB_OK;
    }
    if (ap != kNone && j.at(ap) != 'f') o->extra = ap;
    if (k.has(kRequired)) {
      GB_TRY(array_kw(k, kRequired));
      size_t c = k.at[kRequired] + 1, v;
      while (j.next_elem(&c, &v)) {
        if (j.at(v) != '"') return err(GB_ERR_INVALID_ARGUMENT, v, "'required' must list strings");
        const size_t pv = k.has(kProperties) && j.at(k.at[kProperties]) == '{' ? k.at[kProperties] : kNone;
        bool found = false;
        size_t pc = pv == kNone ? 0 : pv + 1, key, val;
        while (pv != kNone && !found && j.next_member(&pc, &key, &val)) found = j.str_eq(key, v);
        if (!found) {
          char t[64];
          j.text(v, t, sizeof t);
          return err(ap != kNone && j.at(ap) == 'f' ? GB_ERR_INVALID_ARGUMENT : GB_ERR_UNSUPPORTED_FEATURE, v,
                     "required property '%s' is not in 'properties'", t);
        }
      }
    }
    if (!k.has(kProperties)) return GB_OK;
    o->props = k.at[kProperties];
    if (j.at(o->props) != '{') return err(GB_ERR_INVALID_ARGUMENT, o->props, "'properties' must be an object");
    size_t c = o->props + 1, key, val, count = 0;
    while (j.next_member(&c, &key, &val)) {
      // The names that additional properties must not take: sorted on the stack.
      if (o->extra != kNone && (++count > kMaxSorted || key > UINT32_MAX))
        return err(GB_ERR_UNSUPPORTED_FEATURE, key, "more than %zu properties beside additionalProperties", kMaxSorted);
      if (o->extra != kNone && lit_length(key) > kMaxKeyLen)
        return err(GB_ERR_UNSUPPORTED_FEATURE, key, "a property name over %zu characters beside additionalProperties",
                   kMaxKeyLen - 2);
      size_t c2 = o->props + 1, key2, val2;
      while (j.next_member(&c2, &key2, &val2) && key2 < key)
        if (j.str_eq(key, key2)) {
          char t[64];
          j.text(key, t, sizeof t);
          return err(GB_ERR_INVALID_ARGUMENT, key, "property '%s' listed twice", t);
        }
      const bool req = is_required(k, key);
      if (j.at(val) == 'f') {
        if (req) {
          char t[64];
          j.text(key, t, sizeof t);
          return err(GB_ERR_INVALID_ARGUMENT, val, "required property '%s' has the schema false", t);
        }
        continue;
      }
      if (req) o->last_req = o->n;
      o->n++;
    }
    return GB_OK;
  }

  // "{" ws BODY "}": the body starts at --c0 (optional when nothing is required).
  void obj_alt(const ObjInfo &o, const Path &path) {
    if (o.any) return prim(kPObject);
    out.s("\"{\" ");
    prim(kPWs);
    if (o.n > 0 || o.extra != kNone) {
      out.c(' ');
      aux(path, "c", 0);
      if (o.last_req < 0) out.c('?');
    }
    out.s(" \"}\"");
  }

  // The member chain. For the i-th property (of the n kept, in order):
  //   --c<i> ::= "KEY" ws ":" ws VALUE ws --a<i+1> | --c<i+1>   (the second: when it is optional)
  //   --a<i> ::= "," ws --c<i>                                  (in ( )? when nothing from i on is required)
  // so --c<i> is "the first member written is property i or a later one" and
  // --a<i> "after a member, properties i.. follow". With a schema for other
  // members, --c<n> starts them and --x repeats them.
  void obj_rules(const Kws &k, const ObjInfo &o, const Path &path) {
    if (o.any) return;
    auto after = [&](uint32_t i) {  // " --a<i>" where something may follow
      if (i < o.n) out.c(' '), aux(path, "a", i);
      else if (o.extra != kNone) out.c(' '), aux(path, "x");
    };
    auto extra_member = [&] {
      if (o.props != kNone && j.has_members(o.props)) aux(path, "k");
      else prim(kPKey);
      out.c(' '), prim(kPWs), out.s(" \":\" "), prim(kPWs), out.c(' ');
      aux(path, "add");
      out.c(' '), prim(kPWs);
    };
    if (o.props != kNone) {
      size_t c = o.props + 1, key, val;
      uint32_t i = 0;
      while (j.next_member(&c, &key, &val)) {
        if (j.at(val) == 'f') continue;
        const bool req = is_required(k, key);
        rule_aux(path, "c", i);
        lit_scalar(key);
        out.c(' '), prim(kPWs), out.s(" \":\" "), prim(kPWs), out.c(' ');
        name(prop_path(path, key));
        out.c(' '), prim(kPWs);
        after(i + 1);
        if (!req && (i + 1 < o.n || o.extra != kNone)) out.s(" | "), aux(path, "c", i + 1);
        out.c('\n');
        i++;
      }
      for (i = 1; i < o.n; i++) {
        rule_aux(path, "a", i);
        const bool opt = (int64_t)i > o.last_req;
        if (opt) out.c('(');
        out.s("\",\" "), prim(kPWs), out.c(' '), aux(path, "c", i);
        if (opt) out.s(")?");
        out.c('\n');
      }
    }
    if (o.extra != kNone && o.props != kNone && j.has_members(o.props)) {
      rule_aux(path, "k");
      extra_key(o.props);
      out.c('\n');
    }
    if (o.extra != kNone) {
      rule_aux(path, "c", o.n);
      extra_member();
      out.c(' '), aux(path, "x");
      out.c('\n');
      rule_aux(path, "x");
      out.s("(\",\" "), prim(kPWs), out.c(' ');
      extra_member();
      out.s(")*\n");
    }
  }

  gb_status obj_children(const ObjInfo &o, const Path &path, uint32_t depth) {
    if (o.any) return GB_OK;
    if (o.props != kNone) {
      size_t c = o.props + 1, key, val;
      while (j.next_member(&c, &key, &val)) {
        if (j.at(val) == 'f') continue;
        GB_TRY(node(val, prop_path(path, key), depth + 1));
      }
    }
    if (o.extra != kNone) GB_TRY(node(o.extra, tag_path(path, "add"), depth + 1));
    return GB_OK;
  }

  // ---- arrays

  struct ArrInfo {
    bool any = false;        // any array
    size_t prefix = kNone;   // the array of the first elements' schemas
    uint64_t k = 0;          // its length
    size_t rest = kNone;     // the other elements' schema (kNone: none; 0: any value)
    uint64_t min = 0, max = kInf;
  };
  static constexpr size_t kAnyValue = 0;  // ArrInfo::rest: any value (the schema cannot sit at 0)

  gb_status arr_check(const Kws &k, ArrInfo *a) {
    GB_TRY(count(k, kMinItems, 0, &a->min));
    GB_TRY(count(k, kMaxItems, kInf, &a->max));
    if (a->min > a->max)
      return err(GB_ERR_INVALID_ARGUMENT, k.at[kMinItems], "minItems %llu above maxItems %llu",
                 (unsigned long long)a->min, (unsigned long long)a->max);
    const size_t items = k.has(kItems) ? k.at[kItems] : kNone;
    if (k.has(kPrefixItems)) {
      GB_TRY(array_kw(k, kPrefixItems));
      if (items != kNone && j.at(items) == '[')
        return err(GB_ERR_UNSUPPORTED_FEATURE, items, "an array 'items' beside 'prefixItems' not supported");
      if (k.has(kAdditionalItems))
        return err(GB_ERR_UNSUPPORTED_FEATURE, k.at[kAdditionalItems],
                   "'additionalItems' beside 'prefixItems' not supported");
      a->prefix = k.at[kPrefixItems];
      a->rest = items == kNone || j.at(items) == 'f' ? kNone : items;
    } else if (items != kNone && j.at(items) == '[') {
      a->prefix = items;
      const size_t ai = k.has(kAdditionalItems) ? k.at[kAdditionalItems] : kNone;
      a->rest = ai == kNone || j.at(ai) == 'f' ? kNone : ai;
    } else {
      a->rest = items == kNone ? kAnyValue : j.at(items) == 'f' ? kNone : items;
    }
    if (a->prefix != kNone) {
      size_t c = a->prefix + 1, v;
      while (j.next_elem(&c, &v)) {
        if (j.at(v) == 'f') {  // no element at this index: the array ends before it
          if (a->max > a->k) a->max = a->k;
          break;
        }
        a->k++;
      }
    }
    if (a->rest == kNone && a->max > a->k) a->max = a->k;
    if (a->min > a->max)
      return err(GB_ERR_INVALID_ARGUMENT, k.has(kMinItems) ? k.at[kMinItems] : a->prefix,
                 "minItems %llu above the %llu elements the schema allows", (unsigned long long)a->min,
                 (unsigned long long)a->max);
    a->any = a->prefix == kNone && a->rest == kAnyValue && a->min == 0 && a->max == kInf;
    // Counts that rep() refuses, found before anything is written.
    const uint64_t lo = a->min > a->k ? a->min - a->k : 0;
    if (a->rest != kNone && (lo > kMaxCount || (a->max != kInf && a->max > a->k && a->max - a->k > kMaxCount)))
      return err(GB_ERR_UNSUPPORTED_FEATURE, k.has(kMaxItems) ? k.at[kMaxItems] : k.at[kMinItems],
                 "an element count over %llu", (unsigned long long)kMaxCount);
    return GB_OK;
  }

  void rest_ref(const ArrInfo &a, const Path &path) {
    if (a.rest == kAnyValue) prim(kPValue);
    else aux(path, "items");
  }

  // The elements after k of them: ("," ws R ws){lo,hi}; with no element
  // before (k = 0): (R ws ("," ws R ws){0,hi-1})? or R ws ("," ws R ws){lo-1,hi-1}.
  gb_status rest_seq(const ArrInfo &a, const Path &path, size_t pos) {
    auto more = [&] { out.s("\",\" "), prim(kPWs), out.c(' '), rest_ref(a, path), out.c(' '), prim(kPWs); };
    const uint64_t hi = a.max == kInf ? kInf : a.max - a.k;
    if (a.k > 0) return rep(more, false, a.min > a.k ? a.min - a.k : 0, hi, pos);
    if (a.min == 0) {
      out.s(" (");
      rest_ref(a, path), out.c(' '), prim(kPWs);
      GB_TRY(rep(more, false, 0, hi == kInf ? kInf : hi - 1, pos));
      out.s(")?");
      return GB_OK;
    }
    out.c(' ');
    rest_ref(a, path), out.c(' '), prim(kPWs);
    return rep(more, false, a.min - 1, hi == kInf ? kInf : hi - 1, pos);
  }

  gb_status arr_alt(const ArrInfo &a, const Path &path, size_t pos) {
    if (a.any) {
      prim(kPArray);
      return GB_OK;
    }
    out.s("\"[\" ");
    prim(kPWs);
    const uint64_t kk = a.k < a.max ? a.k : a.max;
    if (kk > 0) out.c(' '), aux(path, "t", 0);
    else if (a.rest != kNone && a.max > 0) GB_TRY(rest_seq(a, path, pos));
    out.s(" \"]\"");
    return GB_OK;
  }

  // The tuple chain: --t<i> ::= ("," ws) ITEM<i> ws --t<i+1>, in ( )? from
  // the i that minItems no longer requires; the last one goes on to the
  // other elements.
  gb_status arr_rules(const ArrInfo &a, const Path &path, size_t pos) {
    if (a.any) return GB_OK;
    const uint64_t kk = a.k < a.max ? a.k : a.max;
    for (uint64_t i = 0; i < kk; i++) {
      rule_aux(path, "t", i);
      const bool opt = i >= a.min;
      if (opt) out.c('(');
      if (i > 0) out.s("\",\" "), prim(kPWs), out.c(' ');
      aux(path, "item", i);
      out.c(' '), prim(kPWs);
      if (i + 1 < kk) out.c(' '), aux(path, "t", i + 1);
      else if (a.rest != kNone && a.max > a.k) GB_TRY(rest_seq(a, path, pos));
      if (opt) out.s(")?");
      out.c('\n');
    }
    return GB_OK;
  }

  gb_status arr_children(const ArrInfo &a, const Path &path, uint32_t depth) {
    if (a.any) return GB_OK;
    const uint64_t kk = a.k < a.max ? a.k : a.max;
    if (a.prefix != kNone) {
      size_t c = a.prefix + 1, v;
      for (uint64_t i = 0; i < kk && j.next_elem(&c, &v); i++) GB_TRY(node(v, tag_path(path, "item", i), depth + 1));
    }
    if (a.rest != kNone && a.rest != kAnyValue && a.max > a.k) GB_TRY(node(a.rest, tag_path(path, "items"), depth + 1));
    return GB_OK;
  }

  // ---- strings and numbers

  struct StrInfo {
    Prim format = kPString;  // kPString: no format
    bool bounded = false;
    uint64_t min = 0, max = kInf;
  };

  gb_status str_check(const Kws &k, StrInfo *s) {
    if (k.has(kFormat)) {
      const size_t f = k.at[kFormat];
      if (j.at(f) != '"') return err(GB_ERR_INVALID_ARGUMENT, f, "'format' must be a string");
      if (j.str_is(f, "date")) s->format = kPDate;
      else if (j.str_is(f, "time")) s->format = kPTime;
      else if (j.str_is(f, "date-time")) s->format = kPDateTime;
      else if (j.str_is(f, "uuid")) s->format = kPUuid;
      else {
        char t[64];
        j.text(f, t, sizeof t);
        return err(GB_ERR_UNSUPPORTED_FEATURE, f, "format '%s' not supported (date, time, date-time, uuid)", t);
      }
      if (k.has(kMinLength) || k.has(kMaxLength)) {
        const Kw w = k.has(kMinLength) ? kMinLength : kMaxLength;
        return err(GB_ERR_UNSUPPORTED_FEATURE, k.at[w], "'%s' beside 'format' not supported", kKwNames[w]);
      }
      return GB_OK;
    }
    GB_TRY(count(k, kMinLength, 0, &s->min));
    GB_TRY(count(k, kMaxLength, kInf, &s->max));
    if (s->min > s->max)
      return err(GB_ERR_INVALID_ARGUMENT, k.at[kMinLength], "minLength %llu above maxLength %llu",
                 (unsigned long long)s->min, (unsigned long long)s->max);
    if (s->min > kMaxCount || (s->max != kInf && s->max - s->min > kMaxCount))
      return err(GB_ERR_UNSUPPORTED_FEATURE, k.has(kMaxLength) ? k.at[kMaxLength] : k.at[kMinLength],
                 "a string length over %llu", (unsigned long long)kMaxCount);
    s->bounded = k.has(kMinLength) || k.has(kMaxLength);
    return GB_OK;
  }

  gb_status str_alt(const StrInfo &s, size_t pos) {
    if (!s.bounded) {
      prim(s.format);
      return GB_OK;
    }
    out.s("\"\\\"\"");
    GB_TRY(rep([&] { prim(kPChar); }, true, s.min, s.max, pos));
    out.s(" \"\\\"\"");
    return GB_OK;
  }

  // The shared rule for numbers (integer: whole numbers only) under the
  // schema's lower bound: only the bounds 0 and 1 that sign and leading digit
  // can express.
  gb_status num_rule(const Kws &k, bool integer, Prim *p) {
    *p = integer ? kPInteger : kPNumber;
    if (k.has(kMinimum) && k.has(kExclusiveMinimum))
      return err(GB_ERR_UNSUPPORTED_FEATURE, k.at[kExclusiveMinimum],
                 "'minimum' beside 'exclusiveMinimum' not supported");
    const Kw w = k.has(kMinimum) ? kMinimum : kExclusiveMinimum;
    if (!k.has(w)) return GB_OK;
    const size_t v = k.at[w];
    if (!is_number_start(j.at(v))) {
      return err(j.at(v) == 't' || j.at(v) == 'f' ? GB_ERR_UNSUPPORTED_FEATURE : GB_ERR_INVALID_ARGUMENT, v,
                 "'%s' must be a number", kKwNames[w]);
    }
    const NumInfo ni = num_info(j, v);
    const bool zero = ni.integral && !ni.big && ni.abs == 0, one = ni.integral && !ni.big && ni.abs == 1;
    if (w == kMinimum && zero) *p = integer ? kPIntNonneg : kPNumNonneg;
    else if (w == kMinimum && one && !ni.neg && integer) *p = kPIntPos;
    else if (w == kExclusiveMinimum && zero) *p = integer ? kPIntPos : kPNumPos;
    else if (w == kExclusiveMinimum && one && ni.neg && integer) *p = kPIntNonneg;
    else
      return err(GB_ERR_UNSUPPORTED_FEATURE, v, "'%s' of this value not supported (%s)", kKwNames[w],
                 integer ? (w == kMinimum ? "0 or 1 for integers" : "-1 or 0 for integers") : "0 for numbers");
    return GB_OK;
  }

  // ---- one schema

  gb_status node(size_t p, const Path &path, uint32_t depth) {
    if (depth > kMaxDepth) return err(GB_ERR_UNSUPPORTED_FEATURE, p, "schemas nested deeper than 64");
    const char c = j.at(p);
    if (c == 't') {
      rule(path), prim(kPValue), out.c('\n');
      return GB_OK;
    }
    if (c == 'f') return err(GB_ERR_INVALID_ARGUMENT, p, "the schema false accepts no value here");
    if (c != '{') return err(GB_ERR_INVALID_ARGUMENT, p, "a schema must be an object or a boolean");
    Kws k;
    GB_TRY(read_kws(p, &k));

    if (k.has(kRef)) return ref_node(p, k, path);

    if (k.has(kAnyOf) || k.has(kOneOf)) {
      const Kw w = k.has(kAnyOf) ? kAnyOf : kOneOf;
      GB_TRY(alone(k, w, kKwCount));
      GB_TRY(array_kw(k, w));
      rule(path);
      size_t cur = k.at[w] + 1, v;
      uint64_t i = 0, kept = 0;
      for (; j.next_elem(&cur, &v); i++) {
        if (j.at(v) == 'f') continue;
        if (kept++) out.s(" | ");
        aux(path, "any", i);
      }
      out.c('\n');
      if (!kept) return err(GB_ERR_INVALID_ARGUMENT, k.at[w], "'%s' has no schema that accepts a value", kKwNames[w]);
      cur = k.at[w] + 1;
      for (i = 0; j.next_elem(&cur, &v); i++)
        if (j.at(v) != 'f') GB_TRY(node(v, tag_path(path, "any", i), depth + 1));
      return GB_OK;
    }

    if (k.has(kAllOf)) {
      GB_TRY(alone(k, kAllOf, kAllOf));
      GB_TRY(array_kw(k, kAllOf));
      const size_t n = j.count_elems(k.at[kAllOf]);
      if (n != 1)
        return err(GB_ERR_UNSUPPORTED_FEATURE, k.at[kAllOf], "'allOf' of %zu schemas not supported (only one)", n);
      size_t cur = k.at[kAllOf] + 1, v = kNone;
      j.next_elem(&cur, &v);
      rule(path), aux(path, "all"), out.c('\n');
      return node(v, tag_path(path, "all"), depth + 1);
    }

    uint32_t mask;
    if (k.has(kEnum) || k.has(kConst)) {
      const Kw w = k.has(kEnum) ? kEnum : kConst;
      GB_TRY(alone(k, w, kType));
      mask = kTAll;
      if (k.has(kType)) GB_TRY(types(k, &mask));
      rule(path);
      uint32_t kept = 0;
      if (w == kConst) {
        if (value_types(k.at[kConst]) & mask) lit_value(k.at[kConst]), kept++;
      } else {
        GB_TRY(array_kw(k, kEnum));
        if (j.count_elems(k.at[kEnum]) == 0) return err(GB_ERR_INVALID_ARGUMENT, k.at[kEnum], "'enum' is empty");
        if (enum_scalars(k.at[kEnum], mask)) kept++;
        // Objects and arrays: one alternative each.
        for (size_t cur = k.at[kEnum] + 1, v; j.next_elem(&cur, &v);) {
          if ((j.at(v) != '{' && j.at(v) != '[') || !(value_types(v) & mask)) continue;
          if (kept++) out.s(" | ");
          lit_value(v);
        }
      }
      out.c('\n');
      if (!kept) return err(GB_ERR_INVALID_ARGUMENT, k.at[w], "no value of '%s' has the schema's type", kKwNames[w]);
      return GB_OK;
    }

    GB_TRY(types(k, &mask));
    ObjInfo o;
    ArrInfo a;
    StrInfo s;
    Prim num = kPNumber;
    if (mask & kTObject) GB_TRY(obj_check(k, &o));
    if (mask & kTArray) GB_TRY(arr_check(k, &a));
    if (mask & kTString) GB_TRY(str_check(k, &s));
    if (mask & (kTNumber | kTInteger)) GB_TRY(num_rule(k, (mask & kTInteger) != 0, &num));

    rule(path);
    const bool plain = o.any && a.any && !s.bounded && s.format == kPString && (num == kPNumber);
    if (mask == kTAll && plain) {
      prim(kPValue);
    } else {
      uint32_t alts = 0;
      auto sep = [&] {
        if (alts++) out.s(" | ");
      };
      if (mask & kTObject) sep(), obj_alt(o, path);
      if (mask & kTArray) {
        sep();
        GB_TRY(arr_alt(a, path, p));
      }
      if (mask & kTString) {
        sep();
        GB_TRY(str_alt(s, p));
      }
      if (mask & (kTNumber | kTInteger)) sep(), prim(num);
      if (mask & kTBool) sep(), prim(kPBool);
      if (mask & kTNull) sep(), prim(kPNull);
    }
    out.c('\n');
    if (mask == kTAll && plain) return GB_OK;
    if (mask & kTObject) obj_rules(k, o, path);
    if (mask & kTArray) GB_TRY(arr_rules(a, path, p));
    if (mask & kTObject) GB_TRY(obj_children(o, path, depth));
    if (mask & kTArray) GB_TRY(arr_children(a, path, depth));
    return GB_OK;
  }

  gb_status run() {
    root = j.skip_ws(0);
    if (j.at(root) == '{') {
      defs_at = j.find(root, "$defs");
      definitions_at = j.find(root, "definitions");
      if (defs_at != kNone && j.at(defs_at) != '{')
        return err(GB_ERR_INVALID_ARGUMENT, defs_at, "'$defs' must be an object");
      if (definitions_at != kNone && j.at(definitions_at) != '{')
        return err(GB_ERR_INVALID_ARGUMENT, definitions_at, "'definitions' must be an object");
    }
    const Path top{nullptr, Path::kRoot, 0, nullptr, kNoIdx};
    GB_TRY(node(root, top, 0));
    // Definitions in order of first reference (the list grows as they refer
    // to others).
    for (uint32_t d = 0; d < n_defs; d++) {
      const Path dp{nullptr, defs[d].kind, defs[d].key, nullptr, kNoIdx};
      GB_TRY(node(defs[d].val, dp, 1));
    }
    if (!write_shared) return GB_OK;
    write_shared_rules();
    return GB_OK;
  }
  // The shared rules, with those they refer to.
  void write_shared_rules() {
    for (uint32_t before = 0; before != prims;) {
      before = prims;
      for (uint32_t q = 0; q < kPCount; q++)
        if (prims & (1u << q)) prims |= kPrims[q].deps;
    }
    for (uint32_t q = 0; q < kPCount; q++) {
      if (!(prims & (1u << q))) continue;
      out.s(kPrims[q].name), out.s(" ::= "), out.s(kPrims[q].body), out.c('\n');
    }
  }
};

}  // namespace

gb_status json_schema_rules(const char *schema, size_t len, const char *prefix, const Logger &log, char *buf,
                            size_t cap, size_t *n, uint32_t *prims) {
  const Json j{schema, len};
  Validator v{j, log};
  GB_TRY(v.run());
  Gen g(j, log);
  g.prefix = prefix;
  g.write_shared = false;
  g.prims = *prims;
  g.out.buf = buf ? buf + *n : nullptr;
  g.out.cap = buf ? cap - *n : 0;
  GB_TRY(g.run());
  *n += g.out.n;
  *prims = g.prims;
  return GB_OK;
}

void json_schema_shared_rules(uint32_t prims, char *buf, size_t cap, size_t *n) {
  const Json j{"", 0};
  const Logger log;
  Gen g(j, log);
  g.prims = prims;
  g.out.buf = buf ? buf + *n : nullptr;
  g.out.cap = buf ? cap - *n : 0;
  g.write_shared_rules();
  *n += g.out.n;
}

}  // namespace gb

extern "C" gb_status gb_grammar_from_json_schema(const char *schema, size_t len, char *buf, size_t cap, size_t *n_out) {
  using namespace gb;
  const Logger log;
  const char *fn = "gb_grammar_from_json_schema";
  if (!schema && len) return null_arg(log, fn, "schema (with len > 0)");
  if (!n_out) return null_arg(log, fn, "n_out");
  if (!buf && cap) return null_arg(log, fn, "buf (with cap > 0)");
  const Json j{schema ? schema : "", len};
  Validator v{j, log};
  GB_TRY(v.run());
  size_t need;
  {
    Gen counting(j, log);
    GB_TRY(counting.run());
    need = counting.out.n;
  }
  if (need >= cap) {
    *n_out = need + 1;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  Gen writing(j, log);
  writing.out.buf = buf;
  writing.out.cap = cap;
  const gb_status st = writing.run();
  if (st != GB_OK || writing.out.n != need)
    return fail(log, GB_ERR_INTERNAL, "%s: the writing pass differs from the counting pass", fn);
  buf[need] = '\0';
  *n_out = need;
  return GB_OK;
}
