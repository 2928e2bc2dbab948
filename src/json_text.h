// json_text.h — a JSON text held by the caller, checked once and then read
// in place: members, elements, strings decoded code point by code point,
// and the value written again as Python's json.dumps writes it (what the
// chat templates' `tojson` filter renders). Nothing is allocated.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gb {

// The well-formed UTF-8 sequence at p (n bytes available, n >= 1): its
// length, *cp its code point; 0 when ill-formed (overlong, surrogate, past
// U+10FFFF, cut short).
size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp);

// Counts every byte; copies them only when buf is set (the writing pass of
// a two-pass renderer: count, check the capacity, write).
struct TextOut {
  char *buf = nullptr;
  size_t n = 0;
  void put(const char *p, size_t len) {
    if (buf && len) __builtin_memcpy(buf + n, p, len);
    n += len;
  }
  void put(const char *s) { put(s, __builtin_strlen(s)); }
  void put(char c) { put(&c, 1); }
};

struct JsonDoc {
  static constexpr size_t kNpos = ~(size_t)0;
  static constexpr uint32_t kMaxDepth = 64;

  const char *s;
  size_t n;

  // The whole text is one JSON value (RFC 8259): UTF-8 without ill-formed
  // bytes, string escapes that decode to Unicode scalar values (surrogates
  // only in pairs), nesting of at most kMaxDepth, no object with a name
  // twice (Python keeps the first place and the last value; a tool
  // definition that does this is a mistake). On failure: false, *pos the
  // offset of the problem and *what a description.
  bool check(size_t *pos, const char **what) const;

  // One JSON value starting at `from` (after white space), checked as
  // check() does; *end receives the offset just past it. Text after it is
  // not looked at.
  bool check_value(size_t from, size_t *end, size_t *pos, const char **what) const;

  // Below: only on a checked text (or inside a checked value).
  char at(size_t i) const { return i < n ? s[i] : '\0'; }
  size_t ws(size_t i) const;
  size_t value_end(size_t v) const;
  // The first value of the text (after white space).
  size_t root() const { return ws(0); }
  // Members of the object at obj: start with *cur = obj + 1; each call sets
  // *key (its opening quote) and *val, false after the last.
  bool next_member(size_t *cur, size_t *key, size_t *val) const;
  // Elements of the array at arr, in the same way.
  bool next_elem(size_t *cur, size_t *val) const;
  // The value of member `name` of the object at obj, or kNpos.
  size_t member(size_t obj, const char *name) const;
  // The next code point of the string whose opening quote was at the start
  // (*i just after it at first); -1 at its closing quote.
  int32_t next_cp(size_t *i) const;
  // The string at str decodes to exactly `lit` (UTF-8).
  bool str_eq(size_t str, const char *lit) const;
  // Number of elements of the array at arr.
  size_t count(size_t arr) const;
};

// The value at v of a checked document written as Python's
// json.dumps(value, ensure_ascii=False, indent=indent) writes it after
// json.loads: separators ", " and ": " without an indent, "," and ": " with
// one (a line break and indent * depth spaces before every member or
// element; empty objects and arrays stay "{}" and "[]"); members in their
// order; strings with '"', '\\' and the control characters escaped (\n \r
// \t \b \f, else \u00xx), every other character as UTF-8; integers with
// their digits ("-0" becomes "0"); other numbers as Python's repr of the
// nearest double (1.50 -> 1.5, 1e2 -> 100.0, 1e-7 -> 1e-07, overflow ->
// Infinity), for the numbers json_py_unwritable_number accepts. indent < 0:
// no indent.
void json_dump_py(const JsonDoc &d, size_t v, int indent, TextOut &o);

// Numbers with a fraction or an exponent are written from their decimal
// digits, which is exact for at most this many significant digits in
// double's normal range (and for values beyond it: Infinity, 0.0).
constexpr size_t kPyFloatMaxDigits = 15;

// The offset of the first number of a checked document that json_dump_py
// cannot write as Python would (more significant digits than
// kPyFloatMaxDigits, or below double's normal range but not zero), or
// JsonDoc::kNpos.
size_t json_py_unwritable_number(const JsonDoc &d);

// `text` (len bytes of UTF-8) as a JSON string the way json.dumps writes a
// str (quotes included). Ill-formed bytes are written as U+FFFD.
void json_dump_py_string(const char *text, size_t len, TextOut &o);

}  // namespace gb
