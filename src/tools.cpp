// tools.cpp — tool definitions, tool-call parsing and tool-call grammars.
//
// The call formats are the ones the chat templates write for a call in the
// conversation (and the models are trained to produce):
//   qwen2.5, qwen3  <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
//                   (several separated by a line break)
//   llama3.1        {"name": "NAME", "parameters": {...}}
// The parser takes any JSON white space inside a call; the grammar produces
// exactly the template's spelling around the arguments, and the arguments
// as the JSON Schema converter's grammar for the tool's "parameters".
#include "tools.h"

#include <stdio.h>
#include <string.h>

#include "chat.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace gb {
namespace {

constexpr size_t kMaxName = 64;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// The raw content of the string at q when it is a valid tool name; its
// length, or 0 when it is not one.
size_t tool_name(const JsonDoc &d, size_t q) {
  if (d.at(q) != '"') return 0;
  size_t k = 0;
  while (q + 1 + k < d.n && name_char(d.s[q + 1 + k])) k++;
  if (d.at(q + 1 + k) != '"' || k == 0 || k > kMaxName) return 0;
  return k;
}

gb_status syntax_at(const Logger &log, const char *what_doc, size_t pos, const char *what) {
  return fail(log, GB_ERR_SYNTAX, "%s: offset %zu: %s", what_doc, pos, what);
}

}  // namespace

ToolFormat tool_format(gb_chat_template t) {
  switch (raw_enum(t)) {
    case GB_CHAT_TEMPLATE_QWEN25:
    case GB_CHAT_TEMPLATE_QWEN3: return kToolQwen;
    case GB_CHAT_TEMPLATE_LLAMA31: return kToolLlama31;
    case GB_CHAT_TEMPLATE_GEMMA4: return kToolGemma4;
    default: return kNoToolFormat;
  }
}

size_t tool_function(const JsonDoc &tools, size_t v) {
  const size_t f = tools.member(v, "function");
  return f != JsonDoc::kNpos && tools.at(f) == '{' ? f : v;
}

gb_status tools_check(const JsonDoc &tools, const Logger &log) {
  size_t pos;
  const char *what;
  if (!tools.check(&pos, &what)) return syntax_at(log, "tools", pos, what);
  const size_t root = tools.root();
  if (tools.at(root) != '[') return fail(log, GB_ERR_INVALID_ARGUMENT, "tools: not a JSON array");
  const size_t num = json_py_unwritable_number(tools);
  if (num != JsonDoc::kNpos)
    return fail(log, GB_ERR_UNSUPPORTED_FEATURE,
                "tools: offset %zu: a number with more than %zu significant digits, or below the smallest normal "
                "double, is not rendered",
                num, kPyFloatMaxDigits);
  size_t cur = root + 1, v;
  while (tools.next_elem(&cur, &v)) {
    if (tools.at(v) != '{') return fail(log, GB_ERR_INVALID_ARGUMENT, "tools: offset %zu: a tool is not an object", v);
    const size_t f0 = tools.member(v, "function");
    if (f0 != JsonDoc::kNpos && tools.at(f0) != '{')
      return fail(log, GB_ERR_INVALID_ARGUMENT, "tools: offset %zu: \"function\" is not an object", f0);
    const size_t f = tool_function(tools, v);
    const size_t name = tools.member(f, "name");
    if (name == JsonDoc::kNpos)
      return fail(log, GB_ERR_INVALID_ARGUMENT, "tools: offset %zu: a tool without a \"name\"", f);
    const size_t k = tool_name(tools, name);
    if (!k)
      return fail(log, GB_ERR_INVALID_ARGUMENT,
                  "tools: offset %zu: a tool name must be 1-64 characters of [A-Za-z0-9_-]", name);
    const size_t params = tools.member(f, "parameters");
    if (params != JsonDoc::kNpos && tools.at(params) != '{')
      return fail(log, GB_ERR_INVALID_ARGUMENT, "tools: offset %zu: \"parameters\" is not an object", params);
    // Names are distinct (a call must say which tool it means).
    size_t cur2 = root + 1, w;
    while (tools.next_elem(&cur2, &w) && w < v) {
      const size_t other = tools.member(tool_function(tools, w), "name");
      if (tool_name(tools, other) == k && memcmp(tools.s + other + 1, tools.s + name + 1, k) == 0)
        return fail(log, GB_ERR_INVALID_ARGUMENT, "tools: offset %zu: the tool name '%.*s' is given twice", name,
                    (int)k, tools.s + name + 1);
    }
  }
  return GB_OK;
}

namespace {

// ---- Gemma 4's argument syntax ------------------------------------------------------
//
// Gemma 4 writes a call's arguments as its template's format_argument
// does: strings between <|"|> markers (no escapes: a string cannot hold the
// marker), true / false, numbers as Python writes them, None, objects
// {key:value,...} with bare keys (or keys between markers), arrays
// [value,...]. G4Value reads one value and writes its JSON form: strings
// escaped as JSON, keys quoted, None as null; white space between the parts
// is allowed and dropped. Depth is bounded (kG4MaxDepth) so that no input
// exhausts the stack.

constexpr char kG4Quote[] = "<|\"|>";
constexpr size_t kG4QuoteLen = sizeof kG4Quote - 1;
constexpr int kG4MaxDepth = 64;

struct JsonOut {
  char *buf;
  size_t cap;
  size_t n = 0;
  void c(char ch) {
    if (buf && n < cap) buf[n] = ch;
    n++;
  }
  void s(const char *t, size_t k) {
    for (size_t i = 0; i < k; i++) c(t[i]);
  }
  // t[0..k) as a JSON string's content: ", \ and control characters escaped.
  void str(const char *t, size_t k) {
    static const char kHex[] = "0123456789abcdef";
    c('"');
    for (size_t i = 0; i < k; i++) {
      const unsigned char ch = (unsigned char)t[i];
      if (ch == '"' || ch == '\\') {
        c('\\');
        c((char)ch);
      } else if (ch == '\n') {
        s("\\n", 2);
      } else if (ch == '\r') {
        s("\\r", 2);
      } else if (ch == '\t') {
        s("\\t", 2);
      } else if (ch == '\b') {
        s("\\b", 2);
      } else if (ch == '\f') {
        s("\\f", 2);
      } else if (ch < 0x20) {
        s("\\u00", 4);
        c(kHex[ch >> 4]);
        c(kHex[ch & 15]);
      } else {
        c((char)ch);
      }
    }
    c('"');
  }
};

struct G4Value {
  const char *s;
  size_t n;
  size_t err = 0;  // where the first error is
  const char *what = nullptr;

  bool fail(size_t at, const char *w) {
    if (!what) {
      err = at;
      what = w;
    }
    return false;
  }
  size_t ws(size_t i) const {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
  }
  bool lit(size_t i, const char *t, size_t k) const { return i <= n && n - i >= k && memcmp(s + i, t, k) == 0; }
  // [a, b) is well-formed UTF-8 (what a JSON string may hold).
  bool utf8(size_t a, size_t b) {
    for (size_t i = a; i < b;) {
      uint32_t cp;
      const size_t k = utf8_decode(reinterpret_cast<const unsigned char *>(s) + i, b - i, &cp);
      if (!k) return fail(i, "a string or key that is not well-formed UTF-8");
      i += k;
    }
    return true;
  }
  // A quoted string at i (the marker there): its content [*a, *b), *end past it.
  bool quoted(size_t i, size_t *a, size_t *b, size_t *end) {
    const size_t from = i + kG4QuoteLen;
    for (size_t j = from; j + kG4QuoteLen <= n; j++)
      if (memcmp(s + j, kG4Quote, kG4QuoteLen) == 0) {
        *a = from;
        *b = j;
        *end = j + kG4QuoteLen;
        return utf8(from, j);
      }
    return fail(i, "a string without its closing <|\"|>");
  }
  // A number as JSON writes one (Python's repr of an int or a finite float
  // is one).
  bool number(size_t i, size_t *end) {
    size_t j = i;
    if (j < n && s[j] == '-') j++;
    if (j >= n || s[j] < '0' || s[j] > '9') return fail(i, "a value is expected");
    if (s[j] == '0') {
      j++;
    } else {
      while (j < n && s[j] >= '0' && s[j] <= '9') j++;
    }
    if (j < n && s[j] == '.') {
      j++;
      if (j >= n || s[j] < '0' || s[j] > '9') return fail(j, "a digit is expected after '.'");
      while (j < n && s[j] >= '0' && s[j] <= '9') j++;
    }
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
      j++;
      if (j < n && (s[j] == '+' || s[j] == '-')) j++;
      if (j >= n || s[j] < '0' || s[j] > '9') return fail(j, "a digit is expected in the exponent");
      while (j < n && s[j] >= '0' && s[j] <= '9') j++;
    }
    *end = j;
    return true;
  }
  // A bare key at i: up to ':' (not empty; none of ",{}[]" nor a marker).
  bool key(size_t i, size_t *a, size_t *b, size_t *end, JsonOut &o) {
    if (lit(i, kG4Quote, kG4QuoteLen)) {
      if (!quoted(i, a, b, end)) return false;
      o.str(s + *a, *b - *a);
      return true;
    }
    size_t j = i;
    while (j < n && s[j] != ':' && s[j] != ',' && s[j] != '{' && s[j] != '}' && s[j] != '[' && s[j] != ']' &&
           !lit(j, kG4Quote, kG4QuoteLen))
      j++;
    size_t k = j;
    while (k > i && (s[k - 1] == ' ' || s[k - 1] == '\t' || s[k - 1] == '\n' || s[k - 1] == '\r')) k--;
    if (k == i || j >= n || s[j] != ':') return fail(i, "a key followed by ':' is expected");
    if (!utf8(i, k)) return false;
    *a = i;
    *b = k;
    *end = j;
    o.str(s + i, k - i);
    return true;
  }
  // The value at i (after white space), written to o; *end past it.
  bool value(size_t i, size_t *end, JsonOut &o, int depth) {
    i = ws(i);
    if (i >= n) return fail(i, "a value is expected");
    if (depth > kG4MaxDepth) return fail(i, "values nested too deeply");
    const char ch = s[i];
    if (ch == '{' || ch == '[') {
      const bool obj = ch == '{';
      o.c(ch);
      size_t j = ws(i + 1);
      if (j < n && s[j] == (obj ? '}' : ']')) {
        o.c(s[j]);
        *end = j + 1;
        return true;
      }
      for (;;) {
        if (obj) {
          size_t a, b, e;
          if (!key(j, &a, &b, &e, o)) return false;
          e = ws(e);
          if (e >= n || s[e] != ':') return fail(e, "':' is expected after a key");
          o.c(':');
          j = e + 1;
        }
        size_t e;
        if (!value(j, &e, o, depth + 1)) return false;
        j = ws(e);
        if (j < n && s[j] == ',') {
          o.c(',');
          j = ws(j + 1);
          continue;
        }
        if (j < n && s[j] == (obj ? '}' : ']')) {
          o.c(s[j]);
          *end = j + 1;
          return true;
        }
        return fail(j, obj ? "',' or '}' is expected" : "',' or ']' is expected");
      }
    }
    if (lit(i, kG4Quote, kG4QuoteLen)) {
      size_t a, b;
      if (!quoted(i, &a, &b, end)) return false;
      o.str(s + a, b - a);
      return true;
    }
    static const struct {
      const char *in, *out;
    } kWords[] = {{"true", "true"}, {"false", "false"}, {"None", "null"}, {"null", "null"}};
    for (const auto &w : kWords) {
      const size_t k = strlen(w.in);
      if (lit(i, w.in, k)) {
        o.s(w.out, strlen(w.out));
        *end = i + k;
        return true;
      }
    }
    size_t e;
    if (!number(i, &e)) return false;
    o.s(s + i, e - i);
    *end = e;
    return true;
  }
};

// ---- parsing ---------------------------------------------------------------------

struct Parser {
  const JsonDoc d;
  const Logger &log;
  gb_tool_call *calls;
  size_t cap;
  size_t n = 0;

  gb_status bad(size_t pos, const char *what) { return syntax_at(log, "tool call", pos, what); }

  // The call object at [from, ...): *end past it. args_key: the member
  // holding the arguments ("arguments", or llama3.1's "parameters").
  gb_status object(size_t from, size_t *end, bool llama) {
    size_t pos;
    const char *what;
    if (d.at(from) != '{') return bad(from, "a JSON object is expected");
    if (!d.check_value(from, end, &pos, &what)) return bad(pos, what);
    const size_t name = d.member(from, "name");
    if (name == JsonDoc::kNpos || d.at(name) != '"') return bad(from, "the call has no \"name\" string");
    const size_t name_end = d.value_end(name);
    for (size_t i = name + 1; i + 1 < name_end; i++)
      if (d.s[i] == '\\') return bad(i, "an escape in a tool name");
    size_t args = d.member(from, "arguments");
    if (args == JsonDoc::kNpos && llama) args = d.member(from, "parameters");
    if (args == JsonDoc::kNpos) return bad(from, llama ? "the call has no \"parameters\"" : "the call has no \"arguments\"");
    if (d.at(args) != '{') return bad(args, "the arguments are not a JSON object");
    if (n < cap) {
      calls[n].name_offset = name + 1;
      calls[n].name_len = name_end - name - 2;
      calls[n].arguments_offset = args;
      calls[n].arguments_len = d.value_end(args) - args;
    }
    n++;
    return GB_OK;
  }

  static bool starts(const JsonDoc &d, size_t i, const char *lit) {
    const size_t k = strlen(lit);
    return i <= d.n && d.n - i >= k && memcmp(d.s + i, lit, k) == 0;
  }

  // Where lit first occurs in the reply (d.n when nowhere).
  static size_t first(const JsonDoc &d, const char *lit) {
    for (size_t i = 0; i < d.n; i++)
      if (starts(d, i, lit)) return i;
    return d.n;
  }

  gb_status qwen(size_t *content_len) {
    static const char kOpen[] = "<tool_call>", kClose[] = "</tool_call>";
    size_t at = first(d, kOpen);
    *content_len = at;
    while (at < d.n) {
      if (!starts(d, at, kOpen)) return bad(at, "text after a tool call that is not another call");
      size_t end;
      GB_TRY(object(d.ws(at + sizeof kOpen - 1), &end, false));
      end = d.ws(end);
      if (!starts(d, end, kClose)) return bad(end, "\"</tool_call>\" is expected");
      at = d.ws(end + sizeof kClose - 1);
    }
    return GB_OK;
  }

  // Gemma 4: <|tool_call>call:NAME{ARGUMENTS}<tool_call|>, one after
  // another (white space between them allowed); after the last, white space
  // and the end of turn the model writes when it waits for the results
  // (<|tool_response>) may follow.
  gb_status gemma4(size_t *content_len) {
    static const char kOpen[] = "<|tool_call>call:", kClose[] = "<tool_call|>", kWait[] = "<|tool_response>";
    size_t at = first(d, kOpen);
    *content_len = at;
    while (at < d.n) {
      if (starts(d, at, kWait) && d.ws(at + sizeof kWait - 1) == d.n) return GB_OK;
      if (!starts(d, at, kOpen)) return bad(at, "text after a tool call that is not another call");
      const size_t name = at + sizeof kOpen - 1;
      size_t k = name;
      while (k < d.n && k - name <= 64 &&
             ((d.s[k] >= 'a' && d.s[k] <= 'z') || (d.s[k] >= 'A' && d.s[k] <= 'Z') || (d.s[k] >= '0' && d.s[k] <= '9') ||
              d.s[k] == '_' || d.s[k] == '-'))
        k++;
      if (k == name || k - name > 64 || d.at(k) != '{')
        return bad(name, "a tool name of 1-64 characters of [A-Za-z0-9_-] and '{' are expected");
      G4Value v{d.s, d.n};
      JsonOut none{nullptr, 0};
      size_t end;
      if (!v.value(k, &end, none, 0)) return bad(v.err, v.what);
      if (!starts(d, end, kClose)) return bad(end, "\"<tool_call|>\" is expected");
      if (n < cap) {
        calls[n].name_offset = name;
        calls[n].name_len = k - name;
        calls[n].arguments_offset = k;
        calls[n].arguments_len = end - k;
      }
      n++;
      at = d.ws(end + sizeof kClose - 1);
    }
    return GB_OK;
  }

  gb_status llama31(size_t *content_len) {
    size_t i = d.ws(0);
    const size_t start = i;
    if (starts(d, i, "<|python_tag|>")) i = d.ws(i + 14);
    if (d.at(i) != '{') {
      *content_len = d.n;
      return GB_OK;
    }
    *content_len = start;
    for (;;) {
      size_t end;
      GB_TRY(object(i, &end, true));
      i = d.ws(end);
      if (i == d.n) return GB_OK;
      if (d.at(i) != ';') return bad(i, "';' or the end is expected after a call");
      i = d.ws(i + 1);
      if (i == d.n) return GB_OK;
    }
  }
};

// ---- grammar ---------------------------------------------------------------------

struct GrammarOut {
  char *buf;
  size_t cap;
  size_t n = 0;
  void s(const char *t) {
    const size_t k = strlen(t);
    if (buf && n + k <= cap) memcpy(buf + n, t, k);
    n += k;
  }
  void s(const char *t, size_t k) {
    if (buf && n + k <= cap) memcpy(buf + n, t, k);
    n += k;
  }
  void u(uint64_t v) {
    char d[24];
    const int k = snprintf(d, sizeof d, "%llu", (unsigned long long)v);
    s(d, (size_t)k);
  }
};

gb_status tools_grammar(ToolFormat f, gb_chat_template t, const JsonDoc &tools, gb_tool_choice choice, uint32_t max_calls,
                        const Logger &log, GrammarOut &o) {
  const bool think = t == GB_CHAT_TEMPLATE_QWEN3;
  o.s("root ::= ");
  if (think) o.s("tool-think? ");
  o.s(choice == GB_TOOL_CHOICE_AUTO ? "(tool-calls | tool-text)\n" : "tool-calls\n");
  if (think) o.s("tool-think ::= \"<think>\" [^<]* \"</think>\" \"\\n\"{0,2}\n");
  if (choice == GB_TOOL_CHOICE_AUTO) o.s(f == kToolQwen ? "tool-text ::= [^<] .*\n" : "tool-text ::= [^{] .*\n");
  o.s("tool-calls ::= tool-call");
  if (max_calls > 1) {
    o.s(" (\"\\n\" tool-call)");
    if (max_calls - 1 <= kGbnfMaxRepeat) {
      o.s("{0,");
      o.u(max_calls - 1);
      o.s("}");
    } else {
      o.s("*");
    }
  }
  o.s("\n");
  o.s(f == kToolQwen ? "tool-call ::= \"<tool_call>\\n{\\\"name\\\": \\\"\" tool-args \"}\\n</tool_call>\"\n"
                 : "tool-call ::= \"{\\\"name\\\": \\\"\" tool-args \"}\"\n");
  o.s("tool-args ::= ");
  size_t cur = tools.root() + 1, v;
  for (uint32_t k = 0; tools.next_elem(&cur, &v); k++) {
    const size_t name = tools.member(tool_function(tools, v), "name");
    if (k) o.s(" | ");
    o.s("\"");
    o.s(tools.s + name + 1, tool_name(tools, name));
    o.s(f == kToolQwen ? "\\\", \\\"arguments\\\": \" tool" : "\\\", \\\"parameters\\\": \" tool");
    o.u(k);
    o.s("-root");
  }
  o.s("\n");
  // Each tool's arguments: its schema's rules under the prefix "toolK-".
  uint32_t prims = 0;
  cur = tools.root() + 1;
  for (uint32_t k = 0; tools.next_elem(&cur, &v); k++) {
    const size_t f_obj = tool_function(tools, v);
    const size_t params = tools.member(f_obj, "parameters");
    static const char kAnyObject[] = "{\"type\": \"object\", \"additionalProperties\": true}";
    const char *schema = params == JsonDoc::kNpos ? kAnyObject : tools.s + params;
    const size_t len = params == JsonDoc::kNpos ? sizeof kAnyObject - 1 : tools.value_end(params) - params;
    char prefix[24];
    snprintf(prefix, sizeof prefix, "tool%u-", k);
    const gb_status st = json_schema_rules(schema, len, prefix, log, o.buf, o.cap, &o.n, &prims);
    if (st != GB_OK) {
      const size_t name = tools.member(f_obj, "name");
      return fail(log, st, "tools: the parameters of '%.*s' (offset %zu) cannot be converted",
                  (int)tool_name(tools, name), tools.s + name + 1, params);
    }
  }
  json_schema_shared_rules(prims, o.buf, o.cap, &o.n);
  return GB_OK;
}

}  // namespace
}  // namespace gb

extern "C" gb_status gb_tool_calls_parse(gb_chat_template t, const char *text, size_t len, gb_tool_call *calls,
                                         size_t cap, size_t *n_calls, size_t *content_len) {
  using namespace gb;
  const Logger log;
  const char *fn = "gb_tool_calls_parse";
  if (!text && len) return null_arg(log, fn, "text (with len > 0)");
  if (!calls && cap) return null_arg(log, fn, "calls (with cap > 0)");
  if (!n_calls) return null_arg(log, fn, "n_calls");
  if (!content_len) return null_arg(log, fn, "content_len");
  const ToolFormat f = tool_format(t);
  if (f == kNoToolFormat)
    return fail(log, GB_ERR_UNSUPPORTED_FEATURE, "%s: chat template %s has no tool-call format", fn,
                chat_template_name(t));
  Parser p{JsonDoc{text ? text : "", len}, log, calls, cap};
  // A first pass counts (nothing written), so a short array leaves the
  // caller's untouched.
  Parser count{p.d, log, nullptr, 0};
  size_t content;
  GB_TRY(f == kToolQwen ? count.qwen(&content) : f == kToolGemma4 ? count.gemma4(&content) : count.llama31(&content));
  if (count.n > cap) {
    *n_calls = count.n;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  GB_TRY(f == kToolQwen ? p.qwen(&content) : f == kToolGemma4 ? p.gemma4(&content) : p.llama31(&content));
  *n_calls = p.n;
  *content_len = content;
  return GB_OK;
}

extern "C" gb_status gb_grammar_from_tools(gb_chat_template t, const char *tools, size_t tools_len,
                                           gb_tool_choice choice, uint32_t max_calls, char *buf, size_t cap,
                                           size_t *n_out) {
  using namespace gb;
  const Logger log;
  const char *fn = "gb_grammar_from_tools";
  if (!tools && tools_len) return null_arg(log, fn, "tools (with tools_len > 0)");
  if (!n_out) return null_arg(log, fn, "n_out");
  if (!buf && cap) return null_arg(log, fn, "buf (with cap > 0)");
  const ToolFormat f = tool_format(t);
  if (f == kNoToolFormat)
    return fail(log, GB_ERR_UNSUPPORTED_FEATURE, "%s: chat template %s has no tool-call format", fn,
                chat_template_name(t));
  if (f == kToolGemma4)
    return fail(log, GB_ERR_UNSUPPORTED_FEATURE,
                "%s: chat template %s: no grammar for its call syntax yet (its calls are parsed: gb_tool_calls_parse)", fn,
                chat_template_name(t));
  const int32_t c = raw_enum(choice);
  if (c != GB_TOOL_CHOICE_REQUIRED && c != GB_TOOL_CHOICE_AUTO)
    return fail(log, GB_ERR_INVALID_ARGUMENT, "%s: unknown tool choice %d", fn, c);
  if (max_calls == 0 || (f == kToolLlama31 && max_calls > 1))
    return fail(log, GB_ERR_INVALID_ARGUMENT, "%s: max_calls %u (1%s)", fn, max_calls,
                f == kToolLlama31 ? " for llama3.1" : " or more");
  const JsonDoc d{tools ? tools : "", tools_len};
  GB_TRY(tools_check(d, log));
  if (d.count(d.root()) == 0) return fail(log, GB_ERR_INVALID_ARGUMENT, "%s: no tools", fn);
  GrammarOut count{nullptr, 0};
  GB_TRY(tools_grammar(f, t, d, choice, max_calls, log, count));
  if (count.n >= cap) {
    *n_out = count.n + 1;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  GrammarOut write{buf, cap};
  const gb_status st = tools_grammar(f, t, d, choice, max_calls, log, write);
  if (st != GB_OK || write.n != count.n)
    return fail(log, GB_ERR_INTERNAL, "%s: the writing pass differs from the counting pass", fn);
  buf[write.n] = '\0';
  *n_out = write.n;
  return GB_OK;
}

extern "C" gb_status gb_tool_call_arguments_json(gb_chat_template t, const char *text, size_t len, const gb_tool_call *call,
                                                 char *buf, size_t cap, size_t *n_out) {
  using namespace gb;
  const Logger log;
  const char *fn = "gb_tool_call_arguments_json";
  if (!text && len) return null_arg(log, fn, "text (with len > 0)");
  if (!call) return null_arg(log, fn, "call");
  if (!n_out) return null_arg(log, fn, "n_out");
  if (!buf && cap) return null_arg(log, fn, "buf (with cap > 0)");
  const ToolFormat f = tool_format(t);
  if (f == kNoToolFormat)
    return fail(log, GB_ERR_UNSUPPORTED_FEATURE, "%s: chat template %s has no tool-call format", fn,
                chat_template_name(t));
  if (call->arguments_offset > len || call->arguments_len > len - call->arguments_offset || call->arguments_len == 0)
    return fail(log, GB_ERR_INVALID_ARGUMENT, "%s: the call's arguments (offset %zu, %zu bytes) are not inside the %zu-byte text",
                fn, call->arguments_offset, call->arguments_len, len);
  const char *a = text + call->arguments_offset;
  const size_t k = call->arguments_len;
  JsonOut count{nullptr, 0};
  if (f == kToolGemma4) {
    G4Value v{a, k};
    size_t end;
    if (!v.value(0, &end, count, 0) || a[0] != '{' || end != k)
      return fail(log, GB_ERR_SYNTAX, "%s: offset %zu: %s", fn, call->arguments_offset + (v.what ? v.err : end),
                  v.what ? v.what : "the arguments are not one object");
  } else {
    const JsonDoc d{a, k};
    size_t pos;
    const char *what;
    if (!d.check(&pos, &what)) return fail(log, GB_ERR_SYNTAX, "%s: offset %zu: %s", fn, call->arguments_offset + pos, what);
    if (d.at(d.root()) != '{') return fail(log, GB_ERR_SYNTAX, "%s: the arguments are not a JSON object", fn);
    count.s(a, k);
  }
  if (count.n >= cap) {
    *n_out = count.n + 1;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  JsonOut w{buf, cap};
  if (f == kToolGemma4) {
    G4Value v{a, k};
    size_t end;
    v.value(0, &end, w, 0);
  } else {
    w.s(a, k);
  }
  buf[w.n] = '\0';
  *n_out = w.n;
  return GB_OK;
}
