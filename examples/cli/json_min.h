// json_min.h — a small strict JSON reader, shared by the tool (perplexity
// --ref) and the tests (the .ref.json files of the GGUF fixtures): objects,
// arrays, strings (escapes \" \\ \/ \b \f \n \r \t; \uXXXX is kept verbatim),
// numbers (kept as their text, so a float32 can be read back exactly with
// strtof), true / false / null. RFC 8259's grammar, plus two limits: more
// than 64 nested arrays / objects, and duplicate keys, are errors. A
// malformed document (truncated, bad number, raw control character,
// trailing bytes ...) makes parse() return false with a message naming the
// byte, never a crash; a number too large for its use is caught by the
// checked accessors.
#pragma once

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

namespace gbjson {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool b = false;
  std::string text;  // number text or string value
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  const Json *get(const std::string &k) const {
    auto it = fields.find(k);
    return it == fields.end() ? nullptr : &it->second;
  }
  // Unchecked conversions (the text of a number the reader accepted).
  float f32() const { return strtof(text.c_str(), nullptr); }
  double f64() const { return strtod(text.c_str(), nullptr); }
  long long i64() const { return strtoll(text.c_str(), nullptr, 10); }
  // Checked: false unless this is a number that is an integer (no fraction
  // or exponent) within long long's range.
  bool integer(long long *out) const {
    if (kind != kNumber || text.find_first_of(".eE") != std::string::npos) return false;
    errno = 0;
    const long long v = strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return false;
    *out = v;
    return true;
  }
  // Checked: false unless this is a number whose value is finite as a double.
  bool finite(double *out) const {
    if (kind != kNumber) return false;
    const double v = strtod(text.c_str(), nullptr);
    if (!isfinite(v)) return false;
    *out = v;
    return true;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string &s) : s_(s) {}
  bool parse(Json *out) {
    ws();
    if (!value(out, 0)) return false;
    ws();
    return p_ == s_.size() || fail("trailing bytes");
  }
  const std::string &error() const { return err_; }

 private:
  bool fail(const char *what) {
    if (err_.empty()) err_ = std::string(what) + " at byte " + std::to_string(p_);
    return false;
  }
  bool more() const { return p_ < s_.size(); }
  bool at(char c) const { return p_ < s_.size() && s_[p_] == c; }
  bool digit() const { return p_ < s_.size() && isdigit((unsigned char)s_[p_]); }
  void ws() {
    while (more() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\r' || s_[p_] == '\t')) p_++;
  }
  bool lit(const char *w) {
    const std::string t(w);
    if (s_.compare(p_, t.size(), t) != 0) return fail("bad literal");
    p_ += t.size();
    return true;
  }
  bool str(std::string *out) {
    if (!at('"')) return fail("expected a string");
    p_++;
    while (more() && s_[p_] != '"') {
      char c = s_[p_];
      if ((unsigned char)c < 0x20) return fail("control character in a string");
      p_++;
      if (c == '\\') {
        if (!more()) return fail("unterminated string");
        const char e = s_[p_++];
        switch (e) {
          case '"': case '\\': case '/': c = e; break;
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u':
            for (int i = 0; i < 4; i++)
              if (p_ + i >= s_.size() || !isxdigit((unsigned char)s_[p_ + i])) return fail("bad \\u escape");
            out->append("\\u");
            continue;  // the four hex digits follow as plain characters
          default: p_--; return fail("bad escape");
        }
      }
      out->push_back(c);
    }
    if (!more()) return fail("unterminated string");
    p_++;
    return true;
  }
  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  bool number(Json *v) {
    const size_t b = p_;
    if (at('-')) p_++;
    if (at('0')) {
      p_++;
    } else if (digit()) {
      while (digit()) p_++;
    } else {
      return fail(p_ == b ? "unexpected character" : "bad number");
    }
    if (at('.')) {
      p_++;
      if (!digit()) return fail("bad number");
      while (digit()) p_++;
    }
    if (at('e') || at('E')) {
      p_++;
      if (at('+') || at('-')) p_++;
      if (!digit()) return fail("bad number");
      while (digit()) p_++;
    }
    v->kind = Json::kNumber;
    v->text = s_.substr(b, p_ - b);
    return true;
  }
  bool value(Json *v, int depth) {
    if (!more()) return fail("unexpected end");
    const char c = s_[p_];
    if ((c == '{' || c == '[') && depth >= kMaxDepth) return fail("nested too deep");
    if (c == '{') {
      v->kind = Json::kObject;
      p_++;
      ws();
      if (at('}')) return ++p_, true;
      for (;;) {
        ws();
        std::string k;
        if (!str(&k)) return false;
        if (v->fields.count(k)) return fail("duplicate key");
        ws();
        if (!at(':')) return fail(more() ? "expected ':'" : "unexpected end");
        p_++;
        ws();
        if (!value(&v->fields[k], depth + 1)) return false;
        ws();
        if (at(',')) { p_++; continue; }
        if (at('}')) return ++p_, true;
        return fail(more() ? "expected ',' or '}'" : "unexpected end");
      }
    }
    if (c == '[') {
      v->kind = Json::kArray;
      p_++;
      ws();
      if (at(']')) return ++p_, true;
      for (;;) {
        ws();
        v->items.emplace_back();
        if (!value(&v->items.back(), depth + 1)) return false;
        ws();
        if (at(',')) { p_++; continue; }
        if (at(']')) return ++p_, true;
        return fail(more() ? "expected ',' or ']'" : "unexpected end");
      }
    }
    if (c == '"') {
      v->kind = Json::kString;
      return str(&v->text);
    }
    if (c == 't') { v->kind = Json::kBool; v->b = true; return lit("true"); }
    if (c == 'f') { v->kind = Json::kBool; return lit("false"); }
    if (c == 'n') return lit("null");
    return number(v);
  }

  static constexpr int kMaxDepth = 64;  // arrays and objects inside one another
  const std::string &s_;
  size_t p_ = 0;
  std::string err_;
};

}  // namespace gbjson
