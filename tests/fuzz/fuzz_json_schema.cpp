// fuzz_json_schema.cpp — fuzz target for the JSON Schema converter
// (src/grammar/json_schema.cpp) through gb_grammar_from_json_schema.
// Input: the schema text.
// Checks: every status is one the function documents; the size query, the
// exact capacity and a capacity one short agree (nothing written when too
// small, NUL at the end, no byte past it); the conversion is deterministic;
// the grammar it writes compiles (gb_grammar_create), the only refusal
// allowed being left recursion from a schema that refers to itself before
// reading anything. Any failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "gearbx.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_json_schema";
#include "fuzz/fuzz_util.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

bool documented(gb_status s) {
  return s == GB_OK || s == GB_ERR_SYNTAX || s == GB_ERR_UNSUPPORTED_FEATURE || s == GB_ERR_INVALID_ARGUMENT ||
         s == GB_ERR_BUFFER_TOO_SMALL;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  g_in = data;
  g_in_size = size;
  if (size > 1 << 15) return 0;
  const char *text = reinterpret_cast<const char *>(data);
  size_t need = 0;
  const gb_status q = gb_grammar_from_json_schema(text, size, nullptr, 0, &need);
  if (!documented(q) || q == GB_OK) fuzz_fail("size query: unexpected status");
  if (q != GB_ERR_BUFFER_TOO_SMALL) return 0;
  if (need == 0 || need > (64u << 20)) fuzz_fail("size query: implausible size");
  // One byte short: nothing written.
  std::vector<char> buf(need + 16, '\x7f');
  size_t n = 0;
  if (gb_grammar_from_json_schema(text, size, buf.data(), need - 1, &n) != GB_ERR_BUFFER_TOO_SMALL || n != need)
    fuzz_fail("a capacity one short is not refused with the size");
  for (char c : buf)
    if (c != '\x7f') fuzz_fail("written on BUFFER_TOO_SMALL");
  if (gb_grammar_from_json_schema(text, size, buf.data(), need, &n) != GB_OK) fuzz_fail("the exact capacity failed");
  if (n + 1 != need || buf[n] != '\0' || strlen(buf.data()) != n) fuzz_fail("length and NUL");
  for (size_t i = need; i < buf.size(); i++)
    if (buf[i] != '\x7f') fuzz_fail("written past the capacity");
  std::vector<char> again(need);
  size_t n2 = 0;
  if (gb_grammar_from_json_schema(text, size, again.data(), need, &n2) != GB_OK || n2 != n ||
      memcmp(again.data(), buf.data(), n) != 0)
    fuzz_fail("not deterministic");
  gb_grammar_options o;
  gb_grammar_options_init(&o);
  o.log = quiet;
  gb_grammar *g = nullptr;
  const gb_status cs = gb_grammar_create(buf.data(), n, &o, nullptr, 0, &g);
  if (cs != GB_OK && cs != GB_ERR_UNSUPPORTED_FEATURE) {
    fprintf(stderr, "%.*s\n", (int)n, buf.data());
    fuzz_fail("the converter wrote a grammar that does not compile");
  }
  if (g) {
    gb_grammar_match_result r;
    const gb_status ms = gb_grammar_match(g, "{}", 2, &r);
    if (ms != GB_OK && ms != GB_ERR_GRAMMAR_LIMIT) fuzz_fail("matching the converted grammar");
  }
  gb_grammar_destroy(g);
  return 0;
}

// Seeds: schemas of the kinds applications send (objects with required and
// optional properties, arrays with bounds, enums, formats, $refs, anyOf).
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  static const char *const kSchemas[] = {
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0}},
 "required": ["name"]})",
      R"({"type": "array", "items": {"enum": ["red", "green", "blue", 3, null]}, "minItems": 1, "maxItems": 4})",
      R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "number"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/$defs/node"})",
      R"({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"},
 "day": {"type": "string", "format": "date"}}, "additionalProperties": {"type": "boolean"}})",
      R"({"oneOf": [{"const": {"a": [1, 2, {"b": "c"}]}}, {"type": ["string", "null"], "minLength": 2}]})",
      R"({"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}, "required": ["name", "arguments"]})",
      R"({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})",
      "{}",
  };
  for (const char *s : kSchemas) seeds->push_back(gb::FuzzSeed{std::vector<uint8_t>(s, s + strlen(s)), strlen(s), 1});
}
