// json_min.h — a small JSON reader for test fixtures (the .ref.json files of
// the GGUF fixtures): objects, arrays, strings (escapes \" \\ \/ \b \f \n \r
// \t; \u is kept verbatim), numbers (kept as their text, so a float32 can be
// read back exactly with strtof), true / false / null. A malformed document
// gives a null root and an error message, never a crash.
#pragma once

#include <stdlib.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gbt {

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
  float f32() const { return strtof(text.c_str(), nullptr); }
  double f64() const { return strtod(text.c_str(), nullptr); }
  long long i64() const { return strtoll(text.c_str(), nullptr, 10); }
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
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\r' || s_[p_] == '\t')) p_++;
  }
  bool lit(const char *w) {
    const std::string t(w);
    if (s_.compare(p_, t.size(), t) != 0) return fail("bad literal");
    p_ += t.size();
    return true;
  }
  bool str(std::string *out) {
    if (p_ >= s_.size() || s_[p_] != '"') return fail("expected a string");
    p_++;
    while (p_ < s_.size() && s_[p_] != '"') {
      char c = s_[p_++];
      if (c == '\\') {
        if (p_ >= s_.size()) return fail("bad escape");
        const char e = s_[p_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u': out->append("\\u"); continue;
          default: c = e;
        }
      }
      out->push_back(c);
    }
    if (p_ >= s_.size()) return fail("unterminated string");
    p_++;
    return true;
  }
  bool value(Json *v, int depth) {
    if (depth > 64) return fail("nested too deep");
    if (p_ >= s_.size()) return fail("unexpected end");
    const char c = s_[p_];
    if (c == '{') {
      v->kind = Json::kObject;
      p_++;
      ws();
      if (p_ < s_.size() && s_[p_] == '}') return ++p_, true;
      for (;;) {
        ws();
        std::string k;
        if (!str(&k)) return false;
        ws();
        if (p_ >= s_.size() || s_[p_] != ':') return fail("expected ':'");
        p_++;
        ws();
        if (!value(&v->fields[k], depth + 1)) return false;
        ws();
        if (p_ < s_.size() && s_[p_] == ',') { p_++; continue; }
        if (p_ < s_.size() && s_[p_] == '}') return ++p_, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v->kind = Json::kArray;
      p_++;
      ws();
      if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
      for (;;) {
        ws();
        v->items.emplace_back();
        if (!value(&v->items.back(), depth + 1)) return false;
        ws();
        if (p_ < s_.size() && s_[p_] == ',') { p_++; continue; }
        if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v->kind = Json::kString;
      return str(&v->text);
    }
    if (c == 't') { v->kind = Json::kBool; v->b = true; return lit("true"); }
    if (c == 'f') { v->kind = Json::kBool; return lit("false"); }
    if (c == 'n') return lit("null");
    const size_t b = p_;
    while (p_ < s_.size() && (isdigit((unsigned char)s_[p_]) || s_[p_] == '-' || s_[p_] == '+' || s_[p_] == '.' ||
                              s_[p_] == 'e' || s_[p_] == 'E'))
      p_++;
    if (p_ == b) return fail("unexpected character");
    v->kind = Json::kNumber;
    v->text = s_.substr(b, p_ - b);
    return true;
  }

  const std::string &s_;
  size_t p_ = 0;
  std::string err_;
};

}  // namespace gbt
