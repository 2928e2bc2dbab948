// test_json_schema.cpp — JSON Schema to GBNF (gb_grammar_from_json_schema):
// schemas converted, compiled with gb_grammar_create and run over JSON
// instances the schema accepts (COMPLETE) and ones it refuses (not
// COMPLETE); malformed, unsupported and inconsistent schemas; the size
// query, NULL arguments, and no allocation.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gearbx.h"
#include "test_util.h"

namespace {

constexpr gb_grammar_match_result NONE = GB_GRAMMAR_MATCH_NONE, PREFIX = GB_GRAMMAR_MATCH_PREFIX,
                                  COMPLETE = GB_GRAMMAR_MATCH_COMPLETE;

// The schema's grammar through the size query and an exact-size buffer.
gb_status convert(const std::string &schema, std::string *out) {
  size_t need = 0;
  gb_status st = gb_grammar_from_json_schema(schema.data(), schema.size(), nullptr, 0, &need);
  if (st != GB_ERR_BUFFER_TOO_SMALL) return st;
  std::vector<char> buf(need, '\x7f');
  size_t len = 0;
  st = gb_grammar_from_json_schema(schema.data(), schema.size(), buf.data(), buf.size(), &len);
  if (st != GB_OK) return st;
  EXPECT_EQ(len + 1, need);
  EXPECT_EQ(buf[len], '\0');
  out->assign(buf.data(), len);
  return GB_OK;
}

// The status of a schema that does not convert, and the log line it wrote
// (the function logs through the default sink: stderr).
struct Refusal {
  gb_status st;
  std::string log;
};
Refusal refuse(const std::string &schema) {
  std::string text;
  testing::internal::CaptureStderr();
  const gb_status st = convert(schema, &text);
  return Refusal{st, testing::internal::GetCapturedStderr()};
}

// A schema converted and compiled.
struct Schema {
  std::string text;
  gb_grammar *g = nullptr;
  explicit Schema(const std::string &schema, uint32_t stacks = 0) {
    const gb_status st = convert(schema, &text);
    EXPECT_EQ(st, GB_OK) << schema;
    if (st != GB_OK) return;
    gb_grammar_options o;
    gb_grammar_options_init(&o);
    if (stacks) o.max_stacks = stacks;
    EXPECT_EQ(gb_grammar_create(text.data(), text.size(), &o, nullptr, 0, &g), GB_OK) << text;
  }
  ~Schema() { gb_grammar_destroy(g); }
  Schema(const Schema &) = delete;
  Schema &operator=(const Schema &) = delete;
  gb_grammar_match_result match(const std::string &s) {
    gb_grammar_match_result r = GB_GRAMMAR_MATCH_MAX_ENUM;
    if (!g) return r;
    EXPECT_EQ(gb_grammar_match(g, s.data(), s.size(), &r), GB_OK) << s;
    return r;
  }
  bool accepts(const std::string &s) { return match(s) == COMPLETE; }
};

// ---- objects ---------------------------------------------------------------------------

TEST(JsonSchema, RequiredAndOptionalPropertiesInDeclaredOrder) {
  Schema s(R"({"type": "object",
    "properties": {
      "name": {"type": "string"},
      "age": {"type": "integer"},
      "email": {"type": "string"},
      "tags": {"type": "array", "items": {"type": "string"}}
    },
    "required": ["name", "tags"]})");
  EXPECT_TRUE(s.accepts(R"({"name":"ann","tags":[]})"));
  EXPECT_TRUE(s.accepts(R"({"name":"ann","age":3,"tags":["x"]})"));
  EXPECT_TRUE(s.accepts(R"({"name":"ann","email":"a@b","tags":[]})"));
  EXPECT_TRUE(s.accepts(R"({"name":"ann","age":-7,"email":"","tags":["x","y"]})"));
  EXPECT_TRUE(s.accepts("{ \"name\" : \"ann\" ,\n\t\"tags\" : [ ] }"));
  EXPECT_FALSE(s.accepts(R"({"tags":[]})"));                         // missing required
  EXPECT_FALSE(s.accepts(R"({"name":"ann"})"));
  EXPECT_FALSE(s.accepts(R"({"name":"ann","tags":[],"x":1})"));       // extra property
  EXPECT_FALSE(s.accepts(R"({"tags":[],"name":"ann"})"));             // out of declared order
  EXPECT_FALSE(s.accepts(R"({"name":5,"tags":[]})"));                 // wrong type
  EXPECT_FALSE(s.accepts(R"({"name":"ann","age":1.5,"tags":[]})"));
  EXPECT_FALSE(s.accepts(R"({"name":"ann","age":3,"age":3,"tags":[]})"));
  EXPECT_FALSE(s.accepts(R"({"name":"ann",,"tags":[]})"));
  EXPECT_FALSE(s.accepts(R"({"name":"ann","tags":[],})"));
  EXPECT_EQ(s.match(R"({"name":"ann")"), PREFIX);
  EXPECT_EQ(s.match("[]"), NONE);
}

TEST(JsonSchema, AllOptionalAndNestedObjects) {
  Schema s(R"({"type": "object", "properties": {
      "a": {"type": "boolean"},
      "b": {"type": "object", "properties": {"c": {"type": "null"}, "d": {"type": "number"}}, "required": ["d"]},
      "e": {"type": "string"}}})");
  EXPECT_TRUE(s.accepts("{}"));
  EXPECT_TRUE(s.accepts(R"({"a":true})"));
  EXPECT_TRUE(s.accepts(R"({"e":""})"));
  EXPECT_TRUE(s.accepts(R"({"a":false,"e":"x"})"));
  EXPECT_TRUE(s.accepts(R"({"b":{"d":1.5e3}})"));
  EXPECT_TRUE(s.accepts(R"({"a":true,"b":{"c":null,"d":-0.25},"e":"z"})"));
  EXPECT_FALSE(s.accepts(R"({"b":{"c":null}})"));
  EXPECT_FALSE(s.accepts(R"({"b":{}})"));
  EXPECT_FALSE(s.accepts(R"({"e":"x","a":true})"));
  EXPECT_FALSE(s.accepts(R"({,"a":true})"));
}

TEST(JsonSchema, AdditionalProperties) {
  // A schema: further members with any key after the declared ones.
  Schema s(R"({"type": "object", "properties": {"id": {"type": "integer"}},
               "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(s.accepts("{}"));
  EXPECT_TRUE(s.accepts(R"({"id":1})"));
  EXPECT_TRUE(s.accepts(R"({"x":"1","y":"2"})"));
  EXPECT_TRUE(s.accepts(R"({"id":1,"x":"1"})"));
  EXPECT_FALSE(s.accepts(R"({"x":1})"));
  EXPECT_FALSE(s.accepts(R"({"x":"1","id":1})"));
  // false, and absent beside properties: the declared ones only.
  Schema f(R"({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": false})");
  EXPECT_TRUE(f.accepts(R"({"id":1})"));
  EXPECT_FALSE(f.accepts(R"({"id":1,"x":"1"})"));
  Schema none(R"({"type": "object", "properties": {}})");
  EXPECT_TRUE(none.accepts("{}"));
  EXPECT_FALSE(none.accepts(R"({"x":1})"));
  // No object keywords at all: any object.
  Schema any(R"({"type": "object"})");
  EXPECT_TRUE(any.accepts(R"({"x":{"y":[1,"2",null]},"z":true})"));
  EXPECT_FALSE(any.accepts("[]"));
  // A further member cannot take a declared name, in any spelling.
  Schema named(R"({"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "integer"},
                                                    "q\"]": {"type": "null"}, "gone": false},
                   "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(named.accepts(R"({"a":1,"ab":2,"q\"]":null,"b":"x","abc":"y","":"z","q\"":"w","q\n":"v"})"));
  for (const char *t : {R"({"a":"x"})", R"({"ab":"x"})", R"({"q\"]":"x"})", R"({"gone":"x"})", R"({"\u0061":"x"})",
                        R"({"a":1,"b":"x","a":"y"})"})
    EXPECT_FALSE(named.accepts(t)) << t;
  Schema only(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(only.accepts(R"({"a":1,"b":2})"));
  EXPECT_FALSE(only.accepts(R"({"a":true})"));
}

TEST(JsonSchema, PropertyNamesBecomeDistinctRuleNames) {
  // Names that sanitize alike must still give distinct rules.
  Schema s(R"({"type": "object", "properties": {
      "a-b": {"type": "integer"}, "a_b": {"type": "string"}, "a b": {"type": "boolean"}, "": {"type": "null"},
      "Zip": {"type": "integer"}, "名前": {"const": "é"}, "quote\"d": {"type": "integer"}},
    "required": ["a-b", "a_b", "a b", "", "Zip", "名前", "quote\"d"]})");
  EXPECT_TRUE(s.accepts(R"({"a-b":1,"a_b":"x","a b":true,"":null,"Zip":2,"名前":"é","quote\"d":3})"));
  EXPECT_FALSE(s.accepts(R"({"a-b":"x","a_b":"x","a b":true,"":null,"Zip":2,"名前":"é","quote\"d":3})"));
  // Every rule name is made of [a-zA-Z0-9-].
  size_t rules = 0;
  for (size_t at = 0; at < s.text.size();) {
    const size_t eol = s.text.find('\n', at), def = s.text.find(" ::= ", at);
    ASSERT_LT(def, eol);
    const std::string name = s.text.substr(at, def - at);
    const char *allowed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-";
    EXPECT_EQ(name.find_first_not_of(allowed), std::string::npos) << name;
    rules++;
    at = eol + 1;
  }
  EXPECT_GT(rules, 7u);
}

// ---- arrays ----------------------------------------------------------------------------

TEST(JsonSchema, ArraysWithMinAndMaxItems) {
  Schema s(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
  EXPECT_FALSE(s.accepts("[]"));
  EXPECT_TRUE(s.accepts("[1]"));
  EXPECT_TRUE(s.accepts("[1, 2,3]"));
  EXPECT_FALSE(s.accepts("[1,2,3,4]"));  // too many items
  EXPECT_FALSE(s.accepts("[1,\"2\"]"));
  EXPECT_FALSE(s.accepts("[1,]"));
  Schema any(R"({"type": "array"})");
  EXPECT_TRUE(any.accepts(R"([1,"a",{"b":[]},null])"));
  EXPECT_TRUE(any.accepts("[]"));
  Schema empty(R"({"type": "array", "items": false})");
  EXPECT_TRUE(empty.accepts("[]"));
  EXPECT_FALSE(empty.accepts("[1]"));
}

TEST(JsonSchema, CountsOverAThousand) {
  Schema s(R"({"type": "array", "items": {"const": 7}, "minItems": 1200, "maxItems": 2500})");
  auto arr = [](size_t n) {
    std::string t = "[";
    for (size_t i = 0; i < n; i++) t += i ? ",7" : "7";
    return t + "]";
  };
  for (size_t n : {1199u, 2501u}) EXPECT_FALSE(s.accepts(arr(n))) << n;
  for (size_t n : {1200u, 1201u, 1999u, 2000u, 2200u, 2201u, 2500u}) EXPECT_TRUE(s.accepts(arr(n))) << n;
  Schema str(R"({"type": "string", "minLength": 1500, "maxLength": 3100})");
  auto q = [](size_t n) { return "\"" + std::string(n, 'x') + "\""; };
  for (size_t n : {1499u, 3101u}) EXPECT_FALSE(str.accepts(q(n))) << n;
  for (size_t n : {1500u, 2000u, 2999u, 3000u, 3100u}) EXPECT_TRUE(str.accepts(q(n))) << n;
}

TEST(JsonSchema, Tuples) {
  Schema s(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer", "minimum": 0}],
               "items": {"type": "boolean"}, "minItems": 1, "maxItems": 4})");
  EXPECT_FALSE(s.accepts("[]"));
  EXPECT_TRUE(s.accepts(R"(["a"])"));
  EXPECT_TRUE(s.accepts(R"(["a",0])"));
  EXPECT_TRUE(s.accepts(R"(["a",1,true,false])"));
  EXPECT_FALSE(s.accepts(R"(["a",1,true,false,true])"));
  EXPECT_FALSE(s.accepts(R"(["a",-1])"));
  EXPECT_FALSE(s.accepts(R"([1])"));
  EXPECT_FALSE(s.accepts(R"(["a",1,3])"));
  // prefixItems without items: the tuple's elements only.
  Schema t(R"({"prefixItems": [{"type": "string"}, {"type": "null"}]})");
  EXPECT_TRUE(t.accepts("[]"));
  EXPECT_TRUE(t.accepts(R"(["a",null])"));
  EXPECT_FALSE(t.accepts(R"(["a",null,1])"));
  // The older array form of items, with additionalItems.
  Schema old(R"({"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}})");
  EXPECT_TRUE(old.accepts(R"([1,"a","b"])"));
  EXPECT_FALSE(old.accepts(R"([1,2])"));
}

// ---- scalars ---------------------------------------------------------------------------

TEST(JsonSchema, StringsAndNumbers) {
  Schema s(R"({"type": "string", "minLength": 2, "maxLength": 4})");
  EXPECT_FALSE(s.accepts(R"("a")"));
  EXPECT_TRUE(s.accepts(R"("ab")"));
  EXPECT_TRUE(s.accepts(R"("a\nb")"));  // an escape is one character
  EXPECT_TRUE(s.accepts(R"("éèêë")"));
  EXPECT_FALSE(s.accepts(R"("abcde")"));
  Schema str(R"({"type": "string"})");
  EXPECT_TRUE(str.accepts(R"("x\"y\\z\/\u00e9\b\f\n\r\t")"));
  EXPECT_FALSE(str.accepts("\"a\nb\""));  // a raw control character
  EXPECT_FALSE(str.accepts(R"("\x")"));
  Schema i(R"({"type": "integer"})");
  EXPECT_TRUE(i.accepts("0"));
  EXPECT_TRUE(i.accepts("-12"));
  EXPECT_TRUE(i.accepts("123456789012345"));
  EXPECT_FALSE(i.accepts("1234567890123456"));  // at most 15 digits
  EXPECT_FALSE(i.accepts("01"));
  EXPECT_FALSE(i.accepts("1.0"));
  EXPECT_FALSE(i.accepts("\"1\""));
  Schema n(R"({"type": "number"})");
  for (const char *t : {"0", "-0.5", "1e10", "2.5E-3", "3E+2", "10"}) EXPECT_TRUE(n.accepts(t)) << t;
  for (const char *t : {".5", "1.", "+1", "1e", "--1", "0x10"}) EXPECT_FALSE(n.accepts(t)) << t;
  Schema nonneg(R"({"type": "integer", "minimum": 0})");
  EXPECT_TRUE(nonneg.accepts("0"));
  EXPECT_FALSE(nonneg.accepts("-1"));
  Schema pos(R"({"type": "integer", "exclusiveMinimum": 0})");
  EXPECT_TRUE(pos.accepts("1"));
  EXPECT_FALSE(pos.accepts("0"));
  Schema npos(R"({"type": "number", "exclusiveMinimum": 0})");
  EXPECT_TRUE(npos.accepts("0.001"));
  EXPECT_FALSE(npos.accepts("0.0"));
  EXPECT_FALSE(npos.accepts("-2"));
  Schema b(R"({"type": ["boolean", "null"]})");
  EXPECT_TRUE(b.accepts("true"));
  EXPECT_TRUE(b.accepts("null"));
  EXPECT_FALSE(b.accepts("0"));
}

TEST(JsonSchema, Formats) {
  Schema d(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(d.accepts(R"("2024-02-29")"));
  EXPECT_FALSE(d.accepts(R"("2024-13-01")"));  // bad month
  EXPECT_FALSE(d.accepts(R"("2024-01-32")"));
  EXPECT_FALSE(d.accepts(R"("24-01-01")"));
  Schema t(R"({"type": "string", "format": "time"})");
  EXPECT_TRUE(t.accepts(R"("23:59:60.5Z")"));
  EXPECT_TRUE(t.accepts(R"("08:00:00+05:30")"));
  EXPECT_FALSE(t.accepts(R"("24:00:00Z")"));
  EXPECT_FALSE(t.accepts(R"("08:00:00")"));  // no offset
  Schema dt(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(dt.accepts(R"("2024-01-31T10:20:30Z")"));
  EXPECT_FALSE(dt.accepts(R"("2024-01-31 10:20:30Z")"));
  Schema u(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(u.accepts(R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(u.accepts(R"("123e4567e89b12d3a456426614174000")"));
}

TEST(JsonSchema, EnumAndConst) {
  Schema e(R"({"enum": ["red", "green", "greenish", "", "a\"b", 1, 1.5, true, null, [1, 2], {"k": "v"}]})");
  for (const char *t : {R"("red")", R"("green")", R"("greenish")", R"("")", R"("a\"b")", "1", "1.5", "true", "null",
                        "[1, 2]", R"({ "k" : "v" })"})
    EXPECT_TRUE(e.accepts(t)) << t;
  for (const char *t : {R"("blue")", R"("gree")", R"("greenis")", "2", "1.0", "false", "[2,1]", R"({"k":"w"})"})
    EXPECT_FALSE(e.accepts(t)) << t;
  // With a type: only the values of that type.
  Schema typed(R"({"type": "string", "enum": ["a", 1, null]})");
  EXPECT_TRUE(typed.accepts(R"("a")"));
  EXPECT_FALSE(typed.accepts("1"));
  EXPECT_FALSE(typed.accepts("null"));
  Schema c(R"({"const": {"a": [1, true, null], "b": "x\ny\u00e9"}})");
  EXPECT_TRUE(c.accepts(R"({"a":[1,true,null],"b":"x\nyé"})"));
  EXPECT_TRUE(c.accepts(R"({ "a" : [ 1 , true , null ] , "b" : "x\nyé" })"));
  EXPECT_FALSE(c.accepts(R"({"a":[1,true,null]})"));
  EXPECT_FALSE(c.accepts(R"({"b":"x\nyé","a":[1,true,null]})"));
}

TEST(JsonSchema, LargeEnumsFitTheDefaultStacks) {
  // Three hundred values with long shared prefixes: written as a tree, the
  // default 64 parse stacks are enough.
  std::string schema = R"({"enum": [)";
  for (int i = 0; i < 300; i++) schema += (i ? ",\"" : "\"") + std::string("value-") + std::to_string(i) + "\"";
  schema += "]}";
  Schema s(schema);
  for (int i : {0, 1, 10, 99, 100, 299}) EXPECT_TRUE(s.accepts("\"value-" + std::to_string(i) + "\"")) << i;
  EXPECT_FALSE(s.accepts(R"("value-300")"));
  EXPECT_FALSE(s.accepts(R"("value-")"));
}

// ---- combinations and references --------------------------------------------------------

TEST(JsonSchema, AnyOfOneOfAllOf) {
  Schema s(R"({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}, false]})");
  EXPECT_TRUE(s.accepts(R"("a")"));
  EXPECT_TRUE(s.accepts("42"));
  EXPECT_FALSE(s.accepts(R"("ab")"));
  EXPECT_FALSE(s.accepts("null"));
  Schema o(R"({"oneOf": [{"type": "null"}, {"type": "object", "properties": {"x": {"type": "integer"}}}],
               "description": "annotations are ignored"})");
  EXPECT_TRUE(o.accepts("null"));
  EXPECT_TRUE(o.accepts(R"({"x":1})"));
  EXPECT_FALSE(o.accepts("1"));
  Schema a(R"({"allOf": [{"type": "boolean"}], "title": "t"})");
  EXPECT_TRUE(a.accepts("false"));
  EXPECT_FALSE(a.accepts("0"));
}

TEST(JsonSchema, RefsAndRecursion) {
  Schema tree(R"({
    "$defs": {"node": {"type": "object",
      "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"]}},
    "$ref": "#/$defs/node"})");
  EXPECT_TRUE(tree.accepts(R"({"value":1})"));
  EXPECT_TRUE(tree.accepts(R"({"value":1,"children":[{"value":2,"children":[{"value":3}]},{"value":4}]})"));
  EXPECT_FALSE(tree.accepts(R"({"children":[]})"));
  EXPECT_FALSE(tree.accepts(R"({"value":1,"children":[{"value":"x"}]})"));
  // "definitions", a pointer escape in the name, and "#" for the root.
  Schema list(R"({"type": "object", "properties": {"head": {"$ref": "#/definitions/a~1b"},
                                                   "tail": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
                  "required": ["head", "tail"],
                  "definitions": {"a/b": {"type": "string"}}})");
  EXPECT_TRUE(list.accepts(R"({"head":"a","tail":{"head":"b","tail":null}})"));
  EXPECT_FALSE(list.accepts(R"({"head":"a","tail":{"head":1,"tail":null}})"));
}

TEST(JsonSchema, AnyValue) {
  for (const char *schema : {"{}", "true", R"({"title": "anything", "$schema": "x", "$comment": "c"})"}) {
    Schema s(schema);
    for (const char *t : {"1", "\"s\"", "null", "[1,[2,{}]]", R"({"a":{"b":false}})"})
      EXPECT_TRUE(s.accepts(t)) << schema << " " << t;
    EXPECT_FALSE(s.accepts("nul")) << schema;
  }
}

TEST(JsonSchema, WhitespaceIsBounded) {
  Schema s(R"({"type": "array", "items": {"type": "integer"}})");
  // Nothing, one space, or a line break and up to 20 blanks of indentation:
  // a small model cannot spend its tokens on white space.
  EXPECT_TRUE(s.accepts("[1, 2]"));
  EXPECT_TRUE(s.accepts("[\n" + std::string(20, ' ') + "1,\n\t2\n]"));
  EXPECT_FALSE(s.accepts("[\n" + std::string(21, ' ') + "1]"));
  EXPECT_FALSE(s.accepts("[  1]"));
  EXPECT_FALSE(s.accepts("[\n\n1]"));
  EXPECT_FALSE(s.accepts(" [1]"));  // none around the value
}

// ---- refusals --------------------------------------------------------------------------

TEST(JsonSchema, MalformedJsonIsASyntaxErrorWithLineAndColumn) {
  Refusal r = refuse("{\n  \"type\": \"string\",\n}");
  EXPECT_EQ(r.st, GB_ERR_SYNTAX);
  EXPECT_NE(r.log.find("line 3, column 1"), std::string::npos) << r.log;
  r = refuse("{\"type\": \"str");
  EXPECT_EQ(r.st, GB_ERR_SYNTAX);
  EXPECT_NE(r.log.find("line 1, column"), std::string::npos) << r.log;
  for (const char *bad : {"", "{", "{\"a\" 1}", "{\"a\":1,}", "[1 2]", "{\"a\":tru}", "{\"a\":01}", "{\"a\":\"\\x\"}",
                          "{\"a\":\"\\ud800\"}", "{\"a\":1} x", "{'a':1}", "{\"a\":\"\x01\"}", "{\"a\":\"\xc3\x28\"}"})
    EXPECT_EQ(refuse(bad).st, GB_ERR_SYNTAX) << bad;
  // NULL with len 0 is the empty text.
  size_t n = 0;
  testing::internal::CaptureStderr();
  EXPECT_EQ(gb_grammar_from_json_schema(nullptr, 0, nullptr, 0, &n), GB_ERR_SYNTAX);
  testing::internal::GetCapturedStderr();
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  struct Case {
    const char *schema, *named;
  };
  const Case cases[] = {
      {R"({"type": "string", "pattern": "^a+$"})", "pattern"},
      {R"({"type": "object", "properties": {"a": {"type": "integer", "maximum": 3}}})", "maximum"},
      {R"({"type": "integer", "minimum": 5})", "minimum"},
      {R"({"type": "string", "format": "email"})", "email"},
      {R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})", "allOf"},
      {R"({"not": {"type": "null"}})", "not"},
      {R"({"type": "object", "patternProperties": {"^x": {}}})", "patternProperties"},
      {R"({"anyOf": [{"type": "string"}], "type": "string"})", "type"},
      {R"({"type": "string", "format": "date", "maxLength": 12})", "maxLength"},
      {R"({"type": "string", "maxLength": 2000001})", "length"},
  };
  for (const Case &c : cases) {
    const Refusal r = refuse(c.schema);
    EXPECT_EQ(r.st, GB_ERR_UNSUPPORTED_FEATURE) << c.schema;
    EXPECT_NE(r.log.find(c.named), std::string::npos) << c.schema << ": " << r.log;
  }
  // Nesting past 64 levels.
  std::string deep;
  for (int i = 0; i < 70; i++) deep += "{\"items\":";
  deep += "{}";
  for (int i = 0; i < 70; i++) deep += "}";
  EXPECT_EQ(refuse(deep).st, GB_ERR_UNSUPPORTED_FEATURE);
}

TEST(JsonSchema, InconsistentSchemasAreInvalidArguments) {
  for (const char *schema : {
           R"({"type": "array", "minItems": 3, "maxItems": 2})",
           R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})",
           R"({"type": "string", "minLength": 3, "maxLength": 2})",
           R"({"$ref": "#/$defs/missing"})",
           R"({"$ref": "#/components/schemas/x"})",
           R"({"$ref": "#"})",
           R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})",
           R"({"enum": []})",
           R"({"type": "integer", "enum": ["a", "b"]})",
           R"({"type": "strin"})",
           R"({"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": false})",
           R"({"type": "object", "properties": {"a": false}, "required": ["a"]})",
           R"({"type": "array", "minItems": -1})",
           R"({"type": "array", "maxItems": 1.5})",
           R"("a string")",
           "false",
       })
    EXPECT_EQ(refuse(schema).st, GB_ERR_INVALID_ARGUMENT) << schema;
}

// ---- the buffer, arguments, allocation --------------------------------------------------

TEST(JsonSchema, BufferTooSmallWritesNothingAndReportsTheSize) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})";
  std::string text;
  ASSERT_EQ(convert(schema, &text), GB_OK);
  size_t n = 0;
  ASSERT_EQ(gb_grammar_from_json_schema(schema.data(), schema.size(), nullptr, 0, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, text.size() + 1);
  std::vector<char> buf(text.size() + 1, '#');
  for (size_t cap : {(size_t)1, text.size() / 2, text.size()}) {
    n = 0;
    EXPECT_EQ(gb_grammar_from_json_schema(schema.data(), schema.size(), buf.data(), cap, &n), GB_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(n, text.size() + 1);
    EXPECT_EQ(std::string(buf.data(), buf.size()), std::string(buf.size(), '#')) << "cap " << cap;
  }
  EXPECT_EQ(gb_grammar_from_json_schema(schema.data(), schema.size(), buf.data(), buf.size(), &n), GB_OK);
  EXPECT_EQ(n, text.size());
  EXPECT_EQ(std::string(buf.data()), text);
  // The output starts with the root rule and is the same every time.
  EXPECT_EQ(text.rfind("root ::= ", 0), 0u) << text;
  std::string again;
  ASSERT_EQ(convert(schema, &again), GB_OK);
  EXPECT_EQ(again, text);
}

TEST(JsonSchema, NullArguments) {
  const char schema[] = "{}";
  char buf[4096];
  size_t n = 0;
  testing::internal::CaptureStderr();
  EXPECT_EQ(gb_grammar_from_json_schema(nullptr, 2, buf, sizeof buf, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_grammar_from_json_schema(schema, 2, buf, sizeof buf, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_grammar_from_json_schema(schema, 2, nullptr, 16, &n), GB_ERR_NULL_POINTER);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("gb_grammar_from_json_schema"), std::string::npos) << log;
  EXPECT_EQ(gb_grammar_from_json_schema(schema, 2, buf, sizeof buf, &n), GB_OK);
  EXPECT_EQ(strlen(buf), n);
}

TEST(JsonSchema, DoesNotAllocate) {
  const std::string schema = R"({"$defs": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}},
    "type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
      "kind": {"enum": ["alpha", "beta", "gamma"]}, "points": {"type": "array", "items": {"$ref": "#/$defs/p"},
      "maxItems": 1500}}, "required": ["id"]})";
  static char buf[1 << 16];
  size_t n = 0;
  gbt::alloc_count_start();
  const gb_status st1 = gb_grammar_from_json_schema(schema.data(), schema.size(), nullptr, 0, &n);
  const gb_status st2 = gb_grammar_from_json_schema(schema.data(), schema.size(), buf, sizeof buf, &n);
  EXPECT_EQ(gbt::alloc_count_stop(), 0u);
  EXPECT_EQ(st1, GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(st2, GB_OK);
}

}  // namespace
