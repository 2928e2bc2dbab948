// json_text.cpp — see json_text.h.
#include "json_text.h"

#include <stdio.h>
#include <string.h>

namespace gb {
namespace {

// The digits of the largest double, 1.7976931348623157e308, up to where a
// 15-digit decimal can be compared with the halfway point to 2^1024.
const char kPyFloatMax[] = "179769313486231";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void put_utf8(TextOut &o, uint32_t cp) {
  char b[4];
  size_t k;
  if (cp < 0x80) {
    b[0] = (char)cp, k = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xc0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 0x3f)), k = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xe0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[2] = (char)(0x80 | (cp & 0x3f));
    k = 3;
  } else {
    b[0] = (char)(0xf0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f));
    k = 4;
  }
  o.put(b, k);
}

// One code point inside a string as json.dumps(ensure_ascii=False) writes it.
void put_json_cp(TextOut &o, uint32_t cp) {
  switch (cp) {
    case '"': return o.put("\\\"");
    case '\\': return o.put("\\\\");
    case '\n': return o.put("\\n");
    case '\r': return o.put("\\r");
    case '\t': return o.put("\\t");
    case '\b': return o.put("\\b");
    case '\f': return o.put("\\f");
    default: break;
  }
  if (cp < 0x20) {
    static const char kHex[] = "0123456789abcdef";
    const char e[6] = {'\\', 'u', '0', '0', kHex[cp >> 4], kHex[cp & 15]};
    return o.put(e, 6);
  }
  put_utf8(o, cp);
}

// The checker: a recursive descent over the text recording the first error.
struct Checker {
  const JsonDoc &d;
  size_t err_pos = 0;
  const char *err = nullptr;

  bool fail(size_t pos, const char *what) {
    err_pos = pos > d.n ? d.n : pos;
    err = pos >= d.n ? "unexpected end of text" : what;
    return false;
  }
  // The string at *pi (its opening quote); *pi past its closing quote.
  bool string(size_t *pi) {
    size_t i = *pi + 1;
    const unsigned char *p = reinterpret_cast<const unsigned char *>(d.s);
    for (;;) {
      if (i >= d.n) return fail(i, "unclosed string");
      const unsigned char c = p[i];
      if (c == '"') break;
      if (c < 0x20) return fail(i, "control character in a string");
      if (c == '\\') {
        const char e = d.at(i + 1);
        if (e == 'u') {
          uint32_t u = 0;
          for (int k = 0; k < 4; k++) {
            const int h = hex_val(d.at(i + 2 + k));
            if (h < 0) return fail(i, "bad \\u escape");
            u = u * 16 + (uint32_t)h;
          }
          if (u >= 0xdc00 && u <= 0xdfff) return fail(i, "a low surrogate without its high one");
          if (u >= 0xd800 && u <= 0xdbff) {
            uint32_t l = 0;
            if (d.at(i + 6) != '\\' || d.at(i + 7) != 'u') return fail(i, "a high surrogate without its low one");
            for (int k = 0; k < 4; k++) {
              const int h = hex_val(d.at(i + 8 + k));
              if (h < 0) return fail(i + 6, "bad \\u escape");
              l = l * 16 + (uint32_t)h;
            }
            if (l < 0xdc00 || l > 0xdfff) return fail(i, "a high surrogate without its low one");
            i += 12;
          } else {
            i += 6;
          }
          continue;
        }
        if (!e || !strchr("\"\\/bfnrt", e)) return fail(i, "bad escape");
        i += 2;
        continue;
      }
      uint32_t cp;
      const size_t k = utf8_decode(p + i, d.n - i, &cp);
      if (!k) return fail(i, "ill-formed UTF-8");
      i += k;
    }
    *pi = i + 1;
    return true;
  }
  bool number(size_t *pi) {
    size_t i = *pi;
    if (d.at(i) == '-') i++;
    if (d.at(i) == '0') {
      i++;
    } else if (d.at(i) >= '1' && d.at(i) <= '9') {
      while (is_digit(d.at(i))) i++;
    } else {
      return fail(i, "bad number");
    }
    if (d.at(i) == '.') {
      i++;
      if (!is_digit(d.at(i))) return fail(i, "bad number");
      while (is_digit(d.at(i))) i++;
    }
    if (d.at(i) == 'e' || d.at(i) == 'E') {
      i++;
      if (d.at(i) == '+' || d.at(i) == '-') i++;
      if (!is_digit(d.at(i))) return fail(i, "bad number");
      while (is_digit(d.at(i))) i++;
    }
    *pi = i;
    return true;
  }
  // Two strings (opening quotes at a and b) decode to the same text.
  bool same_string(size_t a, size_t b) const {
    size_t i = a + 1, k = b + 1;
    for (;;) {
      const int32_t x = d.next_cp(&i), y = d.next_cp(&k);
      if (x != y) return false;
      if (x < 0) return true;
    }
  }
  bool value(size_t *pi, uint32_t depth) {
    size_t i = d.ws(*pi);
    const char c = d.at(i);
    if (i >= d.n) return fail(i, "a value is missing");
    if (c == '{' || c == '[') {
      if (depth >= JsonDoc::kMaxDepth) return fail(i, "nested deeper than 64");
      const char close = c == '{' ? '}' : ']';
      const size_t open = i;
      i = d.ws(i + 1);
      if (d.at(i) == close) {
        *pi = i + 1;
        return true;
      }
      for (;;) {
        if (c == '{') {
          if (d.at(i) != '"') return fail(i, "a member name (a string) is expected");
          const size_t key = i;
          if (!string(&i)) return false;
          // A name given twice in this object.
          for (size_t cur = open + 1, k, v;;) {
            size_t at = d.ws(cur);
            if (d.at(at) == ',') at = d.ws(at + 1);
            if (at >= key || !d.next_member(&cur, &k, &v)) break;
            if (same_string(k, key)) return fail(key, "a member name given twice");
          }
          i = d.ws(i);
          if (d.at(i) != ':') return fail(i, "':' is expected");
          i++;
        }
        if (!value(&i, depth + 1)) return false;
        i = d.ws(i);
        if (d.at(i) == ',') {
          i = d.ws(i + 1);
          continue;
        }
        if (d.at(i) == close) break;
        return fail(i, c == '{' ? "',' or '}' is expected" : "',' or ']' is expected");
      }
      *pi = i + 1;
      return true;
    }
    if (c == '"') {
      *pi = i;
      return string(pi);
    }
    if (c == '-' || is_digit(c)) {
      *pi = i;
      return number(pi);
    }
    static const char *const kWords[] = {"true", "false", "null"};
    for (const char *w : kWords) {
      const size_t k = strlen(w);
      if (i + k <= d.n && memcmp(d.s + i, w, k) == 0) {
        *pi = i + k;
        return true;
      }
    }
    return fail(i, "a value is expected");
  }
};

// A number with a fraction or an exponent, as decimal digits: value =
// (negative ? -1 : 1) * d[0].d[1]..d[nd-1] * 10^exp10 (no leading or
// trailing zeros; nd == 0 for zero). The exponent saturates far beyond
// double's range.
struct Decimal {
  bool negative = false;
  char d[kPyFloatMaxDigits + 1];
  size_t nd = 0;       // significant digits (may exceed the array: then not stored)
  long exp10 = 0;
};

Decimal read_decimal(const char *b, size_t len) {
  Decimal r;
  const char *p = b, *end = b + len;
  if (p < end && *p == '-') r.negative = true, p++;
  long point = 0;  // digits seen before the decimal point, counted from the first significant one
  bool started = false, before_point = true;
  size_t zeros = 0;  // trailing zeros not yet stored
  long lead = 0;     // zeros after the point before the first significant digit
  for (; p < end && *p != 'e' && *p != 'E'; p++) {
    if (*p == '.') {
      before_point = false;
      continue;
    }
    const char c = *p;
    if (!started) {
      if (c == '0') {
        if (!before_point) lead++;
        continue;
      }
      started = true;
    }
    if (before_point) point++;
    if (c == '0') {
      zeros++;
      continue;
    }
    for (; zeros; zeros--, r.nd++)
      if (r.nd < kPyFloatMaxDigits) r.d[r.nd] = '0';
    if (r.nd < kPyFloatMaxDigits) r.d[r.nd] = c;
    r.nd++;
  }
  long e = 0;
  if (p < end) {  // the exponent, saturated
    p++;
    const bool eneg = p < end && *p == '-';
    if (p < end && (*p == '-' || *p == '+')) p++;
    for (; p < end; p++) e = e > 100000000 ? e : e * 10 + (*p - '0');
    if (eneg) e = -e;
  }
  r.exp10 = r.nd ? (point > 0 ? point - 1 : -lead - 1) + e : 0;
  return r;
}

// Python's repr of the double nearest to a decimal of at most 15
// significant digits in double's normal range: those digits themselves
// (every such decimal survives the round trip through a double, so no
// shorter one names the same double), laid out positionally when the
// exponent is in [-4, 16), else as d.ddde[+-]XX.
void put_py_float(TextOut &o, const char *b, size_t len) {
  const Decimal x = read_decimal(b, len);
  if (x.negative) o.put('-');
  if (x.nd == 0 || x.exp10 < -324) return o.put("0.0");  // below half the smallest double: zero
  if (x.exp10 > 308 || (x.exp10 == 308 && memcmp(x.d, kPyFloatMax, x.nd) > 0)) return o.put("Infinity");
  const size_t nd = x.nd;
  const long exp10 = x.exp10;
  if (exp10 < -4 || exp10 >= 16) {
    o.put(x.d[0]);
    if (nd > 1) {
      o.put('.');
      o.put(x.d + 1, nd - 1);
    }
    char e[16];
    const long a = exp10 < 0 ? -exp10 : exp10;
    const int k = snprintf(e, sizeof e, "e%c%02ld", exp10 < 0 ? '-' : '+', a);
    o.put(e, (size_t)k);
    return;
  }
  if (exp10 < 0) {
    o.put("0.");
    for (long i = 0; i < -exp10 - 1; i++) o.put('0');
    o.put(x.d, nd);
    return;
  }
  const size_t int_digits = (size_t)exp10 + 1;
  if (nd <= int_digits) {
    o.put(x.d, nd);
    for (size_t i = nd; i < int_digits; i++) o.put('0');
    o.put(".0");
  } else {
    o.put(x.d, int_digits);
    o.put('.');
    o.put(x.d + int_digits, nd - int_digits);
  }
}

bool is_float_text(const char *b, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (b[i] == '.' || b[i] == 'e' || b[i] == 'E') return true;
  return false;
}

void newline_indent(TextOut &o, int indent, uint32_t depth) {
  o.put('\n');
  for (uint32_t i = 0; i < (uint32_t)indent * depth; i++) o.put(' ');
}

void dump(const JsonDoc &d, size_t v, int indent, uint32_t depth, TextOut &o) {
  const char c = d.at(v);
  if (c == '"') {
    o.put('"');
    size_t i = v + 1;
    for (int32_t cp; (cp = d.next_cp(&i)) >= 0;) put_json_cp(o, (uint32_t)cp);
    o.put('"');
    return;
  }
  if (c == '{' || c == '[') {
    const bool obj = c == '{';
    size_t cur = v + 1, key = 0, val = 0;
    bool first = true;
    while (obj ? d.next_member(&cur, &key, &val) : d.next_elem(&cur, &val)) {
      if (first) o.put(c);
      else o.put(indent >= 0 ? "," : ", ");
      first = false;
      if (indent >= 0) newline_indent(o, indent, depth + 1);
      if (obj) {
        dump(d, key, indent, depth + 1, o);
        o.put(": ");
      }
      dump(d, val, indent, depth + 1, o);
    }
    if (first) {
      o.put(obj ? "{}" : "[]");
      return;
    }
    if (indent >= 0) newline_indent(o, indent, depth);
    o.put(obj ? '}' : ']');
    return;
  }
  const size_t e = d.value_end(v);
  if (c == '-' || is_digit(c)) {
    if (is_float_text(d.s + v, e - v)) return put_py_float(o, d.s + v, e - v);
    size_t b = v;
    const bool neg = d.s[b] == '-';
    if (neg) b++;
    if (!(e - b == 1 && d.s[b] == '0') && neg) o.put('-');
    o.put(d.s + b, e - b);
    return;
  }
  o.put(d.s + v, e - v);  // true, false, null
}

}  // namespace

size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp) {
  const unsigned char b = p[0];
  if (b < 0x80) return *cp = b, 1;
  size_t k;
  uint32_t c;
  if (b >= 0xc2 && b <= 0xdf) k = 2, c = b & 0x1fu;
  else if (b >= 0xe0 && b <= 0xef) k = 3, c = b & 0x0fu;
  else if (b >= 0xf0 && b <= 0xf4) k = 4, c = b & 0x07u;
  else return 0;
  if (n < k) return 0;
  for (size_t i = 1; i < k; i++) {
    if ((p[i] & 0xc0u) != 0x80u) return 0;
    c = (c << 6) | (p[i] & 0x3fu);
  }
  if ((k == 3 && c < 0x800) || (k == 4 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff)) return 0;
  *cp = c;
  return k;
}

bool JsonDoc::check(size_t *pos, const char **what) const {
  Checker c{*this};
  size_t i = 0;
  if (!s && n) {
    *pos = 0, *what = "no text";
    return false;
  }
  if (!c.value(&i, 0)) {
    *pos = c.err_pos, *what = c.err;
    return false;
  }
  i = ws(i);
  if (i != n) {
    *pos = i, *what = "text after the value";
    return false;
  }
  return true;
}

bool JsonDoc::check_value(size_t from, size_t *end, size_t *pos, const char **what) const {
  Checker c{*this};
  size_t i = from;
  if (!c.value(&i, 0)) {
    *pos = c.err_pos, *what = c.err;
    return false;
  }
  *end = i;
  return true;
}

size_t JsonDoc::ws(size_t i) const {
  while (i < n && is_ws(s[i])) i++;
  return i;
}

size_t JsonDoc::value_end(size_t v) const {
  const char c = at(v);
  if (c == '"') {
    size_t i = v + 1;
    while (i < n && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
    return i + 1;
  }
  if (c == '{' || c == '[') {
    size_t depth = 0, i = v;
    while (i < n) {
      const char x = s[i];
      if (x == '"') {
        i = value_end(i);
        continue;
      }
      if (x == '{' || x == '[') depth++;
      else if ((x == '}' || x == ']') && --depth == 0) return i + 1;
      i++;
    }
    return n;
  }
  size_t i = v;
  while (i < n && !is_ws(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') i++;
  return i;
}

bool JsonDoc::next_member(size_t *cur, size_t *key, size_t *val) const {
  size_t i = ws(*cur);
  if (at(i) == ',') i = ws(i + 1);
  if (at(i) != '"') return false;
  *key = i;
  i = ws(value_end(i));
  i = ws(i + 1);  // ':'
  *val = i;
  *cur = value_end(i);
  return true;
}

bool JsonDoc::next_elem(size_t *cur, size_t *val) const {
  size_t i = ws(*cur);
  if (at(i) == ',') i = ws(i + 1);
  if (i >= n || at(i) == ']') return false;
  *val = i;
  *cur = value_end(i);
  return true;
}

size_t JsonDoc::member(size_t obj, const char *name) const {
  if (at(obj) != '{') return kNpos;
  size_t cur = obj + 1, k, v;
  while (next_member(&cur, &k, &v))
    if (str_eq(k, name)) return v;
  return kNpos;
}

int32_t JsonDoc::next_cp(size_t *pi) const {
  size_t i = *pi;
  if (i >= n || s[i] == '"') return -1;
  if (s[i] == '\\') {
    const char e = s[i + 1];
    uint32_t u = 0;
    switch (e) {
      case 'b': *pi = i + 2; return '\b';
      case 'f': *pi = i + 2; return '\f';
      case 'n': *pi = i + 2; return '\n';
      case 'r': *pi = i + 2; return '\r';
      case 't': *pi = i + 2; return '\t';
      case 'u': break;
      default: *pi = i + 2; return e;  // " \ /
    }
    for (int k = 0; k < 4; k++) u = u * 16 + (uint32_t)hex_val(s[i + 2 + k]);
    if (u >= 0xd800 && u <= 0xdbff) {
      uint32_t l = 0;
      for (int k = 0; k < 4; k++) l = l * 16 + (uint32_t)hex_val(s[i + 8 + k]);
      *pi = i + 12;
      return (int32_t)(0x10000 + ((u - 0xd800) << 10) + (l - 0xdc00));
    }
    *pi = i + 6;
    return (int32_t)u;
  }
  uint32_t cp = 0;
  const size_t k = utf8_decode(reinterpret_cast<const unsigned char *>(s) + i, n - i, &cp);
  *pi = i + k;
  return (int32_t)cp;
}

bool JsonDoc::str_eq(size_t str, const char *lit) const {
  if (at(str) != '"') return false;
  size_t i = str + 1;
  const unsigned char *p = reinterpret_cast<const unsigned char *>(lit);
  size_t left = strlen(lit);
  for (;;) {
    const int32_t cp = next_cp(&i);
    if (cp < 0) return left == 0;
    if (!left) return false;
    uint32_t want;
    const size_t k = utf8_decode(p, left, &want);
    if (!k || want != (uint32_t)cp) return false;
    p += k, left -= k;
  }
}

size_t JsonDoc::count(size_t arr) const {
  size_t cur = arr + 1, v, k = 0;
  while (next_elem(&cur, &v)) k++;
  return k;
}

void json_dump_py(const JsonDoc &d, size_t v, int indent, TextOut &o) { dump(d, v, indent, 0, o); }

size_t json_py_unwritable_number(const JsonDoc &d) {
  for (size_t i = 0; i < d.n; i++) {
    const char c = d.s[i];
    if (c == '"') {
      i = d.value_end(i) - 1;
      continue;
    }
    if (c != '-' && !is_digit(c)) continue;
    const size_t e = d.value_end(i);
    if (is_float_text(d.s + i, e - i)) {
      const Decimal x = read_decimal(d.s + i, e - i);
      if (x.nd > kPyFloatMaxDigits || (x.nd && x.exp10 >= -324 && x.exp10 < -307)) return i;
    }
    i = e - 1;
  }
  return JsonDoc::kNpos;
}

void json_dump_py_string(const char *text, size_t len, TextOut &o) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(text);
  o.put('"');
  for (size_t i = 0; i < len;) {
    uint32_t cp = 0;
    size_t k = utf8_decode(p + i, len - i, &cp);
    if (!k) cp = 0xfffd, k = 1;
    put_json_cp(o, cp);
    i += k;
  }
  o.put('"');
}

}  // namespace gb
