// fuzz_tools.cpp — fuzz target for tool calling: the tool-call parser
// (gb_tool_calls_parse, and gb_tool_call_arguments_json on every call it
// finds: Gemma 4's arguments become JSON), tool definitions rendered by the chat templates
// (gb_chat_apply_ex) and the tool-call grammar (gb_grammar_from_tools).
// Input: one byte choosing the function, then the text (a model's reply,
// or a tools JSON array).
// Checks: every status is one the function documents; the size queries,
// the exact capacity and a capacity one short agree (nothing written when
// too small); parsed calls lie inside the text, each name a JSON string's
// content and each arguments span a JSON object; the rendering is
// deterministic; a grammar written for the tools compiles and rejects a
// call to a tool that is not among them. Any failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "gearbx.h"
#include "json_text.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_tools";
#include "fuzz/fuzz_util.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

const gb_chat_template kTemplates[] = {GB_CHAT_TEMPLATE_QWEN25, GB_CHAT_TEMPLATE_QWEN3, GB_CHAT_TEMPLATE_LLAMA31};
// The templates whose calls are parsed (Gemma 4's arguments are not JSON:
// gb_tool_call_arguments_json converts them).
const gb_chat_template kParsed[] = {GB_CHAT_TEMPLATE_QWEN25, GB_CHAT_TEMPLATE_QWEN3, GB_CHAT_TEMPLATE_LLAMA31,
                                    GB_CHAT_TEMPLATE_GEMMA4};

void parse(const char *text, size_t size) {
  for (gb_chat_template t : kParsed) {
    const bool g4 = t == GB_CHAT_TEMPLATE_GEMMA4;
    size_t n = 0, content = 0;
    gb_tool_call calls[4];
    memset(calls, 0x7f, sizeof calls);
    const gb_status st = gb_tool_calls_parse(t, text, size, calls, 4, &n, &content);
    if (st != GB_OK && st != GB_ERR_SYNTAX && st != GB_ERR_BUFFER_TOO_SMALL) fuzz_fail("parse: unexpected status");
    if (st == GB_ERR_BUFFER_TOO_SMALL) {
      if (n <= 4) fuzz_fail("parse: too small with room");
      for (size_t i = 0; i < sizeof calls; i++)
        if (reinterpret_cast<unsigned char *>(calls)[i] != 0x7f) fuzz_fail("parse: written on BUFFER_TOO_SMALL");
      continue;
    }
    if (st != GB_OK) continue;
    if (content > size) fuzz_fail("parse: content past the text");
    for (size_t i = 0; i < n; i++) {
      const gb_tool_call &c = calls[i];
      if (c.name_offset < content || c.name_offset + c.name_len > size || c.arguments_offset + c.arguments_len > size)
        fuzz_fail("parse: a call outside the text");
      if (c.name_offset == 0 || text[c.name_offset - 1] != (g4 ? ':' : '"') ||
          text[c.name_offset + c.name_len] != (g4 ? '{' : '"'))
        fuzz_fail("parse: a name that is not a string's content");
      if (!g4) {
        const gb::JsonDoc args{text + c.arguments_offset, c.arguments_len};
        size_t pos;
        const char *what;
        if (!args.check(&pos, &what) || args.at(args.root()) != '{') fuzz_fail("parse: arguments that are not an object");
      }
      // The arguments as JSON: a JSON object (for the JSON formats the
      // span itself), the size query and the exact capacity agreeing.
      size_t need = 0;
      if (gb_tool_call_arguments_json(t, text, size, &c, nullptr, 0, &need) != GB_ERR_BUFFER_TOO_SMALL || need == 0)
        fuzz_fail("arguments json: the size query failed on a parsed call");
      std::vector<char> js(need, '\x7f');
      size_t got = 0;
      if (gb_tool_call_arguments_json(t, text, size, &c, js.data(), need - 1, &got) != GB_ERR_BUFFER_TOO_SMALL || got != need ||
          js[0] != '\x7f')
        fuzz_fail("arguments json: one byte short is not BUFFER_TOO_SMALL, or wrote");
      if (gb_tool_call_arguments_json(t, text, size, &c, js.data(), need, &got) != GB_OK || got + 1 != need || js[got] != 0)
        fuzz_fail("arguments json: the exact capacity failed");
      const gb::JsonDoc out{js.data(), got};
      size_t pos;
      const char *what;
      if (!out.check(&pos, &what) || out.at(out.root()) != '{') fuzz_fail("arguments json: not a JSON object");
      if (!g4 && (got != c.arguments_len || memcmp(js.data(), text + c.arguments_offset, got) != 0))
        fuzz_fail("arguments json: a JSON format's arguments changed");
    }
    // The count alone.
    size_t n2 = 0, content2 = 0;
    const gb_status q = gb_tool_calls_parse(t, text, size, nullptr, 0, &n2, &content2);
    if (n == 0 ? q != GB_OK : (q != GB_ERR_BUFFER_TOO_SMALL || n2 != n)) fuzz_fail("parse: the count differs");
  }
}

void tools(const char *text, size_t size) {
  const gb_chat_message msgs[] = {{"system", "s"}, {"user", "u"}};
  for (gb_chat_template t : kTemplates) {
    gb_chat_options o;
    gb_chat_options_init(&o);
    o.tools = text;
    o.tools_len = size;
    size_t need = 0;
    const gb_status q = gb_chat_apply_ex(t, msgs, 2, &o, nullptr, 0, &need);
    if (q != GB_ERR_BUFFER_TOO_SMALL && q != GB_ERR_SYNTAX && q != GB_ERR_INVALID_ARGUMENT &&
        q != GB_ERR_UNSUPPORTED_FEATURE)
      fuzz_fail("render: unexpected status");
    if (q == GB_ERR_BUFFER_TOO_SMALL) {
      std::vector<char> buf(need + 8, '\x7f');
      size_t n = 0;
      if (gb_chat_apply_ex(t, msgs, 2, &o, buf.data(), need - 1, &n) != GB_ERR_BUFFER_TOO_SMALL || n != need)
        fuzz_fail("render: a capacity one short");
      for (char c : buf)
        if (c != '\x7f') fuzz_fail("render: written on BUFFER_TOO_SMALL");
      if (gb_chat_apply_ex(t, msgs, 2, &o, buf.data(), need, &n) != GB_OK || n + 1 != need || buf[n] != '\0')
        fuzz_fail("render: the exact capacity");
      std::vector<char> again(need);
      size_t n2 = 0;
      if (gb_chat_apply_ex(t, msgs, 2, &o, again.data(), need, &n2) != GB_OK || n2 != n ||
          memcmp(again.data(), buf.data(), n) != 0)
        fuzz_fail("render: not deterministic");
    }
    for (gb_tool_choice choice : {GB_TOOL_CHOICE_REQUIRED, GB_TOOL_CHOICE_AUTO}) {
      const gb_status g = gb_grammar_from_tools(t, text, size, choice, 1, nullptr, 0, &need);
      if (g != GB_ERR_BUFFER_TOO_SMALL && g != GB_ERR_SYNTAX && g != GB_ERR_INVALID_ARGUMENT &&
          g != GB_ERR_UNSUPPORTED_FEATURE)
        fuzz_fail("grammar: unexpected status");
      if (g != GB_ERR_BUFFER_TOO_SMALL) continue;
      if (q == GB_ERR_SYNTAX) fuzz_fail("grammar: tools the renderer refused as malformed");
      std::vector<char> buf(need);
      size_t n = 0;
      if (gb_grammar_from_tools(t, text, size, choice, 1, buf.data(), need, &n) != GB_OK || n + 1 != need)
        fuzz_fail("grammar: the exact capacity");
      gb_grammar_options go;
      gb_grammar_options_init(&go);
      go.log = quiet;
      gb_grammar *gr = nullptr;
      const gb_status cs = gb_grammar_create(buf.data(), n, &go, nullptr, 0, &gr);
      if (cs != GB_OK && cs != GB_ERR_UNSUPPORTED_FEATURE) {
        fprintf(stderr, "%.*s\n", (int)n, buf.data());
        fuzz_fail("grammar: does not compile");
      }
      if (gr) {
        // Tool names are [A-Za-z0-9_-]: "@" never names one.
        const char *bad = t == GB_CHAT_TEMPLATE_LLAMA31 ? "{\"name\": \"@" : "<tool_call>\n{\"name\": \"@";
        gb_grammar_match_result r;
        const gb_status ms = gb_grammar_match(gr, bad, strlen(bad), &r);
        if (ms == GB_OK && r != GB_GRAMMAR_MATCH_NONE && choice == GB_TOOL_CHOICE_REQUIRED)
          fuzz_fail("grammar: a call to a tool that is not given");
      }
      gb_grammar_destroy(gr);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  g_in = data;
  g_in_size = size;
  if (size < 1 || size > 1 << 15) return 0;
  const char *text = reinterpret_cast<const char *>(data + 1);
  if (data[0] & 1) tools(text, size - 1);
  else parse(text, size - 1);
  return 0;
}

// Seeds: replies with calls in each format, and tool arrays as chat APIs
// send them.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  static const char *const kReplies[] = {
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": [1, 2.5e3]}}; "
      "{\"name\": \"b\", \"parameters\": {}}",
      "<think>\nhm\n</think>\n\n<tool_call>{\"arguments\":{\"a\":{\"b\":[null,true]}},\"name\":\"x\"}</tool_call>",
      "<|channel>thought\nok<channel|><|tool_call>call:get_weather{city:<|\"|>Paris \"x\"\n<|\"|>,days:[1,-2.5e-05],"
      "opts:{deep:[true,None,{}]}}<tool_call|><|tool_call>call:now{}<tool_call|><|tool_response>",
  };
  static const char *const kTools[] = {
      "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\u00e9\", "
      "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 8}, "
      "\"days\": {\"type\": \"integer\", \"minimum\": 1}}, \"required\": [\"city\"]}}}, {\"name\": \"now\"}]",
      "[{\"name\": \"f\", \"parameters\": {\"$defs\": {\"n\": {\"type\": \"object\", \"properties\": {\"v\": "
      "{\"type\": \"number\"}}}}, \"$ref\": \"#/$defs/n\"}, \"x\": [1.50, -0, 1e400, 1E-7]}]",
  };
  for (const char *s : kReplies) {
    std::vector<uint8_t> v(1, 0);
    v.insert(v.end(), s, s + strlen(s));
    seeds->push_back(gb::FuzzSeed{v, v.size(), 1});
  }
  for (const char *s : kTools) {
    std::vector<uint8_t> v(1, 1);
    v.insert(v.end(), s, s + strlen(s));
    seeds->push_back(gb::FuzzSeed{v, v.size(), 1});
  }
}
