// chat_gemma4.cpp — Gemma 4's tool declarations: each tool of a checked
// tools array written as its chat template's declaration macros write it,
//   <|tool>declaration:NAME{description:<|"|>TEXT<|"|>,parameters:{
//     properties:{KEY:{description:...,type:<|"|>STRING<|"|>},...},
//     required:[<|"|>KEY<|"|>,...],type:<|"|>OBJECT<|"|>}}<tool|>
// with the members of every object in case-insensitive key order, strings
// between <|"|> quote tokens, types in upper case, numbers and null as
// Python prints them, and the macros' own quirks kept (a property named like
// a schema keyword is skipped; parameters without a "type" leave their brace
// open). gemma4_tools_check accepts the schemas those macros render the
// same way wherever they run and refuses the rest before anything is
// written. Nothing is allocated: members are visited in order by repeated
// scans of their object.
#include <string.h>

#include "chat.h"

namespace gb {
namespace {

constexpr size_t kNpos = JsonDoc::kNpos;
const char kQuote[] = "<|\"|>";

bool is_kind(const JsonDoc &d, size_t v, char c) { return v != kNpos && d.at(v) == c; }
bool is_str(const JsonDoc &d, size_t v) { return is_kind(d, v, '"'); }
bool is_obj(const JsonDoc &d, size_t v) { return is_kind(d, v, '{'); }
bool is_arr(const JsonDoc &d, size_t v) { return is_kind(d, v, '['); }

// Python's truth value of a JSON value; an absent one is false.
bool truthy(const JsonDoc &d, size_t v) {
  if (v == kNpos) return false;
  switch (d.at(v)) {
    case 'n':
    case 'f': return false;
    case 't': return true;
    case '"': return d.at(v + 1) != '"';
    case '[': return d.at(d.ws(v + 1)) != ']';
    case '{': return d.at(d.ws(v + 1)) != '}';
    default: {  // a number: nonzero when a digit of its mantissa is
      for (size_t i = v; i < d.n; i++) {
        const char c = d.s[i];
        if (c == 'e' || c == 'E' || !(c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'))) break;
        if (c >= '1' && c <= '9') return true;
      }
      return false;
    }
  }
}

void put_cp(uint32_t c, TextOut &o) {
  char b[4];
  size_t k;
  if (c < 0x80) {
    b[0] = (char)c;
    k = 1;
  } else if (c < 0x800) {
    b[0] = (char)(0xC0 | c >> 6);
    b[1] = (char)(0x80 | (c & 0x3F));
    k = 2;
  } else if (c < 0x10000) {
    b[0] = (char)(0xE0 | c >> 12);
    b[1] = (char)(0x80 | (c >> 6 & 0x3F));
    b[2] = (char)(0x80 | (c & 0x3F));
    k = 3;
  } else {
    b[0] = (char)(0xF0 | c >> 18);
    b[1] = (char)(0x80 | (c >> 12 & 0x3F));
    b[2] = (char)(0x80 | (c >> 6 & 0x3F));
    b[3] = (char)(0x80 | (c & 0x3F));
    k = 4;
  }
  o.put(b, k);
}

// The string at v as its text (upper: ASCII letters in upper case; the
// checks allow no other letters where the template upper-cases).
void put_text(const JsonDoc &d, size_t v, TextOut &o, bool upper = false) {
  size_t i = v + 1;
  for (int32_t c; (c = d.next_cp(&i)) >= 0;) put_cp(upper && c >= 'a' && c <= 'z' ? (uint32_t)(c - 32) : (uint32_t)c, o);
}

// Whether the string at v has only ASCII characters.
bool ascii(const JsonDoc &d, size_t v) {
  size_t i = v + 1;
  for (int32_t c; (c = d.next_cp(&i)) >= 0;)
    if (c >= 0x80) return false;
  return true;
}

// The string at v upper-cased equals lit (absent or not a string: "").
bool upper_is(const JsonDoc &d, size_t v, const char *lit) {
  if (!is_str(d, v)) return !*lit;
  size_t i = v + 1, k = 0;
  for (int32_t c; (c = d.next_cp(&i)) >= 0; k++) {
    const int32_t u = c >= 'a' && c <= 'z' ? c - 32 : c;
    if (!lit[k] || u != (unsigned char)lit[k]) return false;
  }
  return !lit[k];
}

// Keys compared as Jinja's dictsort compares them (lower-cased; the checks
// allow only ASCII keys where it sorts): <0, 0, >0.
int key_cmp(const JsonDoc &d, size_t a, size_t b) {
  size_t i = a + 1, j = b + 1;
  for (;;) {
    int32_t x = d.next_cp(&i), y = d.next_cp(&j);
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return x < y ? -1 : 1;
    if (x < 0) return 0;
  }
}

// The members of obj in dictsort's order (stable: equal keys in their
// order): start with *idx = kNpos; each call sets *key, *val.
bool next_sorted(const JsonDoc &d, size_t obj, size_t *idx, size_t *key, size_t *val) {
  size_t best = kNpos, best_key = 0, best_val = 0, prev_key = kNpos;
  if (*idx != kNpos) {  // the previous one's key
    size_t cur = obj + 1, k, v, i = 0;
    while (d.next_member(&cur, &k, &v))
      if (i++ == *idx) prev_key = k;
  }
  size_t cur = obj + 1, k, v, i = 0;
  for (; d.next_member(&cur, &k, &v); i++) {
    if (prev_key != kNpos) {
      const int c = key_cmp(d, k, prev_key);
      if (c < 0 || (c == 0 && i <= *idx)) continue;
    }
    if (best == kNpos || key_cmp(d, k, best_key) < 0) {
      best = i;
      best_key = k;
      best_val = v;
    }
  }
  if (best == kNpos) return false;
  *idx = best;
  *key = best_key;
  *val = best_val;
  return true;
}

// format_argument: strings quoted, booleans, mappings (keys quoted when
// escape_keys), sequences, anything else as Python prints it.
void put_argument(const JsonDoc &d, size_t v, bool escape_keys, TextOut &o) {
  switch (d.at(v)) {
    case '"':
      o.put(kQuote);
      put_text(d, v, o);
      o.put(kQuote);
      return;
    case 't': o.put("true"); return;
    case 'f': o.put("false"); return;
    case 'n': o.put("None"); return;
    case '{': {
      o.put('{');
      size_t idx = kNpos, k, val;
      for (bool first = true; next_sorted(d, v, &idx, &k, &val); first = false) {
        if (!first) o.put(',');
        if (escape_keys) o.put(kQuote);
        put_text(d, k, o);
        if (escape_keys) o.put(kQuote);
        o.put(':');
        put_argument(d, val, escape_keys, o);
      }
      o.put('}');
      return;
    }
    case '[': {
      o.put('[');
      size_t cur = v + 1, e;
      for (bool first = true; d.next_elem(&cur, &e); first = false) {
        if (!first) o.put(',');
        put_argument(d, e, escape_keys, o);
      }
      o.put(']');
      return;
    }
    default: json_dump_py(d, v, -1, o); return;  // a number, as Python's repr
  }
}

// required:[<|"|>a<|"|>,...] of an array of strings.
void put_required(const JsonDoc &d, size_t arr, TextOut &o) {
  o.put("required:[");
  size_t cur = arr + 1, e;
  for (bool first = true; d.next_elem(&cur, &e); first = false) {
    if (!first) o.put(',');
    o.put(kQuote);
    put_text(d, e, o);
    o.put(kQuote);
  }
  o.put(']');
}

bool schema_keyword(const JsonDoc &d, size_t key) {
  static const char *const kWords[] = {"description", "type", "properties", "required", "nullable"};
  for (const char *w : kWords)
    if (d.str_eq(key, w)) return true;
  return false;
}

// format_parameters over the object at props.
void put_parameters(const JsonDoc &d, size_t props, TextOut &o) {
  size_t idx = kNpos, key, value;
  bool found_first = false;
  while (next_sorted(d, props, &idx, &key, &value)) {
    if (schema_keyword(d, key)) continue;
    if (found_first) o.put(',');
    found_first = true;
    put_text(d, key, o);
    o.put(":{");
    bool add_comma = false;
    auto comma = [&] {
      if (add_comma) o.put(',');
      add_comma = true;
    };
    const size_t desc = d.member(value, "description"), type = d.member(value, "type");
    if (truthy(d, desc)) {
      o.put("description:");
      o.put(kQuote);
      put_text(d, desc, o);
      o.put(kQuote);
      add_comma = true;
    }
    if (upper_is(d, type, "STRING")) {
      const size_t en = d.member(value, "enum");
      if (truthy(d, en)) {
        comma();
        o.put("enum:");
        put_argument(d, en, true, o);
      }
    } else if (upper_is(d, type, "ARRAY")) {
      const size_t items = d.member(value, "items");
      if (is_obj(d, items) && truthy(d, items)) {
        comma();
        o.put("items:{");
        size_t j = kNpos, ik, iv;
        bool first = true;
        while (next_sorted(d, items, &j, &ik, &iv)) {
          if (d.at(iv) == 'n') continue;  // none
          if (!first) o.put(',');
          first = false;
          if (d.str_eq(ik, "properties")) {
            o.put("properties:{");
            if (is_obj(d, iv)) put_parameters(d, iv, o);
            o.put('}');
          } else if (d.str_eq(ik, "required")) {
            put_required(d, iv, o);
          } else if (d.str_eq(ik, "type")) {
            o.put("type:");
            if (is_str(d, iv)) {
              o.put(kQuote);
              put_text(d, iv, o, true);
              o.put(kQuote);
            } else {  // a list of type names, each upper-cased
              o.put('[');
              size_t cur = iv + 1, e;
              for (bool f = true; d.next_elem(&cur, &e); f = false) {
                if (!f) o.put(',');
                o.put(kQuote);
                put_text(d, e, o, true);
                o.put(kQuote);
              }
              o.put(']');
            }
          } else {
            put_text(d, ik, o);
            o.put(':');
            put_argument(d, iv, true, o);
          }
        }
        o.put('}');
      }
    }
    if (truthy(d, d.member(value, "nullable"))) {
      comma();
      o.put("nullable:true");
    }
    if (upper_is(d, type, "OBJECT")) {
      const size_t sub = d.member(value, "properties");
      comma();
      o.put("properties:{");
      put_parameters(d, is_obj(d, sub) ? sub : value, o);  // the value itself when it has no properties object
      o.put('}');
      const size_t req = d.member(value, "required");
      if (truthy(d, req)) {
        comma();
        put_required(d, req, o);
      }
    }
    comma();
    o.put("type:");
    o.put(kQuote);
    if (is_str(d, type)) put_text(d, type, o, true);
    o.put(kQuote);
    o.put('}');
  }
}

// ---- checks -------------------------------------------------------------------

gb_status refuse(const Logger &log, size_t at, const char *what) {
  return fail(log, GB_ERR_UNSUPPORTED_FEATURE, "gemma4 tools: offset %zu: %s (not rendered)", at, what);
}

// Every object key of the value at v ASCII (they are sorted).
gb_status check_keys(const JsonDoc &d, size_t v, const Logger &log) {
  if (is_obj(d, v)) {
    size_t cur = v + 1, k, val;
    while (d.next_member(&cur, &k, &val)) {
      if (!ascii(d, k)) return refuse(log, k, "a key with a character beyond ASCII");
      GB_TRY(check_keys(d, val, log));
    }
  } else if (is_arr(d, v)) {
    size_t cur = v + 1, e;
    while (d.next_elem(&cur, &e)) GB_TRY(check_keys(d, e, log));
  }
  return GB_OK;
}

// A value the template prints as text: absent or a string.
gb_status check_text(const JsonDoc &d, size_t v, const Logger &log, const char *what) {
  return v == kNpos || is_str(d, v) || !truthy(d, v) ? GB_OK : refuse(log, v, what);
}

// A type name: absent or an ASCII string (it is upper-cased).
gb_status check_type(const JsonDoc &d, size_t v, const Logger &log) {
  return v == kNpos || (is_str(d, v) && ascii(d, v)) ? GB_OK : refuse(log, v, "a \"type\" that is not an ASCII string");
}

gb_status check_required(const JsonDoc &d, size_t v, const Logger &log) {
  if (!truthy(d, v)) return GB_OK;
  if (!is_arr(d, v)) return refuse(log, v, "a \"required\" that is not an array");
  size_t cur = v + 1, e;
  while (d.next_elem(&cur, &e))
    if (!is_str(d, e)) return refuse(log, e, "a \"required\" entry that is not a string");
  return GB_OK;
}

gb_status check_parameters(const JsonDoc &d, size_t props, const Logger &log) {
  size_t cur = props + 1, key, value;
  while (d.next_member(&cur, &key, &value)) {
    if (schema_keyword(d, key)) continue;
    if (!is_obj(d, value)) return refuse(log, value, "a property that is not an object");
    GB_TRY(check_text(d, d.member(value, "description"), log, "a property \"description\" that is not a string"));
    GB_TRY(check_type(d, d.member(value, "type"), log));
    GB_TRY(check_required(d, d.member(value, "required"), log));
    const size_t items = d.member(value, "items");
    if (is_obj(d, items)) {
      size_t c2 = items + 1, ik, iv;
      while (d.next_member(&c2, &ik, &iv)) {
        if (d.at(iv) == 'n') continue;
        if (d.str_eq(ik, "properties") && is_obj(d, iv)) GB_TRY(check_parameters(d, iv, log));
        if (d.str_eq(ik, "required")) {
          if (!is_arr(d, iv)) return refuse(log, iv, "an items \"required\" that is not an array");
          GB_TRY(check_required(d, iv, log));
        }
        if (d.str_eq(ik, "type") && !is_str(d, iv)) {
          if (!is_arr(d, iv)) return refuse(log, iv, "an items \"type\" that is neither a string nor a list");
          size_t c3 = iv + 1, e;
          while (d.next_elem(&c3, &e)) GB_TRY(check_type(d, e, log));
        } else if (d.str_eq(ik, "type")) {
          GB_TRY(check_type(d, iv, log));
        }
      }
    }
    if (upper_is(d, d.member(value, "type"), "OBJECT")) {
      const size_t sub = d.member(value, "properties");
      GB_TRY(check_parameters(d, is_obj(d, sub) ? sub : value, log));
    }
  }
  return GB_OK;
}

}  // namespace

gb_status gemma4_tools_check(const JsonDoc &tools, const Logger &log) {
  GB_TRY(check_keys(tools, tools.root(), log));
  size_t cur = tools.root() + 1, t;
  while (tools.next_elem(&cur, &t)) {
    const size_t f = tools.member(t, "function");
    if (!is_obj(tools, f))
      return fail(log, GB_ERR_INVALID_ARGUMENT, "gemma4 tools: offset %zu: a tool without its \"function\" object", t);
    // (printed whatever its value: only a string prints as itself)
    const size_t desc = tools.member(f, "description");
    if (desc != kNpos && !is_str(tools, desc)) return refuse(log, desc, "a tool \"description\" that is not a string");
    const size_t params = tools.member(f, "parameters");
    if (truthy(tools, params)) {
      const size_t props = tools.member(params, "properties");
      if (truthy(tools, props)) {
        if (!is_obj(tools, props)) return refuse(log, props, "\"properties\" that is not an object");
        GB_TRY(check_parameters(tools, props, log));
      }
      GB_TRY(check_required(tools, tools.member(params, "required"), log));
      GB_TRY(check_type(tools, tools.member(params, "type"), log));
    }
    const size_t resp = tools.member(f, "response");
    if (resp != kNpos) {
      if (!is_obj(tools, resp)) return refuse(log, resp, "a \"response\" that is not an object");
      GB_TRY(check_text(tools, tools.member(resp, "description"), log, "a response \"description\" that is not a string"));
      GB_TRY(check_type(tools, tools.member(resp, "type"), log));
    }
  }
  return GB_OK;
}

void gemma4_put_tools(const JsonDoc &tools, TextOut &o) {
  size_t cur = tools.root() + 1, t;
  while (tools.next_elem(&cur, &t)) {
    const size_t f = tools.member(t, "function");
    o.put("<|tool>declaration:");
    put_text(tools, tools.member(f, "name"), o);
    o.put("{description:");
    o.put(kQuote);
    const size_t desc = tools.member(f, "description");
    if (is_str(tools, desc)) put_text(tools, desc, o);
    o.put(kQuote);
    const size_t params = tools.member(f, "parameters");
    if (truthy(tools, params)) {
      o.put(",parameters:{");
      const size_t props = tools.member(params, "properties");
      if (truthy(tools, props)) {
        o.put("properties:{");
        put_parameters(tools, props, o);
        o.put("},");
      }
      const size_t req = tools.member(params, "required");
      if (truthy(tools, req)) {
        put_required(tools, req, o);
        o.put(',');
      }
      const size_t type = tools.member(params, "type");
      if (truthy(tools, type)) {
        o.put("type:");
        o.put(kQuote);
        put_text(tools, type, o, true);
        o.put(kQuote);
        o.put('}');
      }
    }
    const size_t resp = tools.member(f, "response");
    if (resp != kNpos) {
      o.put(",response:{");
      const size_t rd = tools.member(resp, "description");
      if (truthy(tools, rd)) {
        o.put("description:");
        o.put(kQuote);
        put_text(tools, rd, o);
        o.put(kQuote);
        o.put(',');
      }
      if (upper_is(tools, tools.member(resp, "type"), "OBJECT")) {
        o.put("type:");
        o.put(kQuote);
        o.put("OBJECT");
        o.put(kQuote);
        o.put('}');
      }
    }
    o.put("}<tool|>");
  }
}

}  // namespace gb
