// test_tools.cpp — tool calling: tool definitions rendered by the chat
// templates (gb_chat_apply_ex; the expected texts are what the models' own
// Jinja templates render, with Hugging Face's settings, for the same
// messages), JSON written as Python's json.dumps writes it, the tool-call
// parser (gb_tool_calls_parse) on well-formed and malformed replies, the
// tool-call grammar (gb_grammar_from_tools) on strings and under sampled
// generation on two fixture models, and every function's misuse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "json_text.h"
#include "test_util.h"

namespace {

// ---- expected renders --------------------------------------------------------

const char kQwen25Tools[] =
    "<|im_start|>system\n"
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"minimum\": 1}}, \"required\": [\"city\"]}}}\n"
    "{\"name\": \"now\", \"description\": \"Time été\", \"parameters\": {\"type\": \"object\", \"properties\": {}, \"x\": 1.5}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "";

const char kQwen25ToolTurns[] =
    "<|im_start|>system\n"
    "Be brief.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"minimum\": 1}}, \"required\": [\"city\"]}}}\n"
    "{\"name\": \"now\", \"description\": \"Time été\", \"parameters\": {\"type\": \"object\", \"properties\": {}, \"x\": 1.5}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Weather?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "{\"t\": 21}\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "sunny\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "";

const char kQwen3ToolTurnsNoThink[] =
    "<|im_start|>system\n"
    "Be brief.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"minimum\": 1}}, \"required\": [\"city\"]}}}\n"
    "{\"name\": \"now\", \"description\": \"Time été\", \"parameters\": {\"type\": \"object\", \"properties\": {}, \"x\": 1.5}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Weather?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"now\", \"arguments\": {}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "12:00\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "<think>\n"
    "\n"
    "</think>\n"
    "\n"
    "";

const char kLlama32Tools[] =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Environment: ipython\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: 29 Nov 2026\n"
    "\n"
    "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n"
    "\n"
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n"
    "\n"
    "{\n"
    "    \"type\": \"function\",\n"
    "    \"function\": {\n"
    "        \"name\": \"get_weather\",\n"
    "        \"description\": \"Weather in a city\",\n"
    "        \"parameters\": {\n"
    "            \"type\": \"object\",\n"
    "            \"properties\": {\n"
    "                \"city\": {\n"
    "                    \"type\": \"string\"\n"
    "                },\n"
    "                \"days\": {\n"
    "                    \"type\": \"integer\",\n"
    "                    \"minimum\": 1\n"
    "                }\n"
    "            },\n"
    "            \"required\": [\n"
    "                \"city\"\n"
    "            ]\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "{\n"
    "    \"name\": \"now\",\n"
    "    \"description\": \"Time été\",\n"
    "    \"parameters\": {\n"
    "        \"type\": \"object\",\n"
    "        \"properties\": {},\n"
    "        \"x\": 1.5\n"
    "    }\n"
    "}\n"
    "\n"
    "Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n"
    "\n"
    "\"21 \\\"C\\\"\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "";

const char kLlama31Plain[] =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: 26 Jul 2024\n"
    "\n"
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "";

const char kSmolToolNoThink[] =
    "<|im_start|>system\n"
    "## Metadata\n"
    "\n"
    "Knowledge Cutoff Date: June 2025\n"
    "Reasoning Mode: /no_think\n"
    "\n"
    "## Custom Instructions\n"
    "\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n"
    "\n"
    "<|im_end|>\n"
    "<|im_start|>user\n"
    "Hi<|im_end|>\n"
    "<|im_start|>user\n"
    "r<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<think>\n"
    "\n"
    "</think>\n"
    "";

// Two tools: one wrapped as chat APIs send it, one bare.
const char kTools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "
    "{\"type\": \"integer\", \"minimum\": 1}}, \"required\": [\"city\"]}}}, {\"name\": \"now\", \"description\": "
    "\"Time \\u00e9t\\u00e9\", \"parameters\": {\"type\": \"object\", \"properties\": {}, \"x\": 1.50}}]";

std::string render(gb_chat_template t, const std::vector<gb_chat_message> &msgs, const char *tools, int thinking = 1,
                   const char *date = nullptr, gb_status want = GB_OK) {
  gb_chat_options o;
  gb_chat_options_init(&o);
  o.tools = tools;
  o.tools_len = tools ? strlen(tools) : 0;
  o.thinking = thinking;
  o.date = date;
  size_t n = 0;
  gb_status st = gb_chat_apply_ex(t, msgs.data(), msgs.size(), &o, nullptr, 0, &n);
  if (st != GB_ERR_BUFFER_TOO_SMALL) {
    EXPECT_EQ(st, want);
    return std::string();
  }
  std::vector<char> buf(n);
  st = gb_chat_apply_ex(t, msgs.data(), msgs.size(), &o, buf.data(), buf.size(), &n);
  EXPECT_EQ(st, want);
  EXPECT_EQ(n + 1, buf.size());
  return st == GB_OK ? std::string(buf.data(), n) : std::string();
}

TEST(ChatTools, RendersWhatTheModelsTemplatesRender) {
  EXPECT_EQ(render(GB_CHAT_TEMPLATE_QWEN25, {{"user", "Weather in Paris?"}}, kTools), kQwen25Tools);
  EXPECT_EQ(render(GB_CHAT_TEMPLATE_QWEN25,
                   {{"system", "Be brief."},
                    {"user", "Weather?"},
                    {"assistant",
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
                    {"tool", "{\"t\": 21}"},
                    {"tool", "sunny"}},
                   kTools),
            kQwen25ToolTurns);
  EXPECT_EQ(render(GB_CHAT_TEMPLATE_QWEN3,
                   {{"system", "Be brief."},
                    {"user", "Weather?"},
                    {"assistant", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"},
                    {"tool", "12:00"}},
                   kTools, 0),
            kQwen3ToolTurnsNoThink);
  EXPECT_EQ(render(GB_CHAT_TEMPLATE_LLAMA31,
                   {{"system", " Be brief. "},
                    {"user", " Weather in Paris? "},
                    {"assistant", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
                    {"tool", "21 \"C\""}},
                   kTools, 1, "29 Nov 2026"),
            kLlama32Tools);
  EXPECT_EQ(render(GB_CHAT_TEMPLATE_LLAMA31, {{"user", "Hi"}}, nullptr), kLlama31Plain);
  EXPECT_EQ(render(GB_CHAT_TEMPLATE_SMOLLM3, {{"user", "Hi"}, {"tool", "r"}}, nullptr, 0), kSmolToolNoThink);
  // gb_chat_apply is gb_chat_apply_ex with the defaults.
  const gb_chat_message one[] = {{"user", "Hi"}};
  char buf[512];
  size_t n = 0;
  ASSERT_EQ(gb_chat_apply(GB_CHAT_TEMPLATE_LLAMA31, one, 1, 1, buf, sizeof buf, &n), GB_OK);
  EXPECT_EQ(std::string(buf, n), kLlama31Plain);
  // An empty tools array: Qwen writes no tools block, Llama 3.1 still
  // switches to its tool header (its template tests "tools is not none").
  EXPECT_EQ(render(GB_CHAT_TEMPLATE_QWEN25, {{"user", "Hi"}}, "[]"), render(GB_CHAT_TEMPLATE_QWEN25, {{"user", "Hi"}}, nullptr));
  EXPECT_NE(render(GB_CHAT_TEMPLATE_LLAMA31, {{"user", "Hi"}}, " [ ] ").find("Environment: ipython\n"), std::string::npos);
}

TEST(ChatTools, OptionsAndToolsAreChecked) {
  const gb_chat_message msgs[] = {{"user", "Hi"}};
  char buf[4096];
  size_t n = 77;
  gb_chat_options o;
  gb_chat_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.add_assistant_prompt, 1);
  EXPECT_EQ(o.thinking, 1);
  EXPECT_EQ(o.tools, nullptr);
  gb_chat_options_init(nullptr);  // no crash
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 1, nullptr, buf, sizeof buf, &n), GB_OK);
  const size_t plain = n;
  n = 77;
  for (uint32_t size : {0u, 4u, (uint32_t)sizeof o + 4}) {
    gb_chat_options bad = o;
    bad.struct_size = size;
    EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 1, &bad, buf, sizeof buf, &n), GB_ERR_STRUCT_SIZE);
  }
  // An older, shorter struct: the fields after it keep their defaults.
  gb_chat_options old = o;
  old.struct_size = offsetof(gb_chat_options, tools);
  old.thinking = 5;
  size_t n_old = 0;
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 1, &old, buf, sizeof buf, &n_old), GB_OK);
  EXPECT_EQ(n_old, plain);
  gb_chat_options bad = o;
  bad.thinking = 2;
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 1, &bad, buf, sizeof buf, &n), GB_ERR_INVALID_ARGUMENT);
  bad = o;
  bad.add_assistant_prompt = -1;
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 1, &bad, buf, sizeof buf, &n), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, nullptr, 1, &o, buf, sizeof buf, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 1, &o, nullptr, 5, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN3, msgs, 1, &o, buf, sizeof buf, nullptr), GB_ERR_NULL_POINTER);
  struct Case {
    const char *tools;
    gb_status want;
  };
  const Case cases[] = {
      {"", GB_ERR_SYNTAX},
      {"[", GB_ERR_SYNTAX},
      {"[{\"name\": \"a\"}] x", GB_ERR_SYNTAX},
      {"[{\"name\": \"a\", \"name\": \"b\"}]", GB_ERR_SYNTAX},  // a member twice
      {"[{\"name\": \"a\\u00\"}]", GB_ERR_SYNTAX},
      {"[{\"name\": \"\\ud800\"}]", GB_ERR_SYNTAX},  // a lone surrogate
      {"[{\"name\": \"\xff\"}]", GB_ERR_SYNTAX},     // not UTF-8
      {"[01]", GB_ERR_SYNTAX},
      {"{\"name\": \"a\"}", GB_ERR_INVALID_ARGUMENT},  // not an array
      {"[1]", GB_ERR_INVALID_ARGUMENT},
      {"[{\"function\": 3}]", GB_ERR_INVALID_ARGUMENT},
      {"[{\"description\": \"no name\"}]", GB_ERR_INVALID_ARGUMENT},
      {"[{\"name\": \"\"}]", GB_ERR_INVALID_ARGUMENT},
      {"[{\"name\": \"has space\"}]", GB_ERR_INVALID_ARGUMENT},
      {"[{\"name\": \"a.b\"}]", GB_ERR_INVALID_ARGUMENT},
      {"[{\"name\": \"x0123456789012345678901234567890123456789012345678901234567890123\"}]",
       GB_ERR_INVALID_ARGUMENT},  // 65 characters
      {"[{\"name\": \"a\", \"parameters\": []}]", GB_ERR_INVALID_ARGUMENT},
      {"[{\"name\": \"a\"}, {\"type\": \"function\", \"function\": {\"name\": \"a\"}}]", GB_ERR_INVALID_ARGUMENT},
      // Numbers written exactly as Python would only up to 15 significant digits.
      {"[{\"name\": \"a\", \"x\": 0.1234567890123456}]", GB_ERR_UNSUPPORTED_FEATURE},
      {"[{\"name\": \"a\", \"x\": 1e-310}]", GB_ERR_UNSUPPORTED_FEATURE},
  };
  for (const Case &c : cases) {
    gb_chat_options t = o;
    t.tools = c.tools;
    t.tools_len = strlen(c.tools);
    EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN25, msgs, 1, &t, buf, sizeof buf, &n), c.want) << c.tools;
  }
  // Tools for templates that define none; Llama 3.1 needs a message for them.
  gb_chat_options t = o;
  t.tools = kTools;
  t.tools_len = strlen(kTools);
  for (gb_chat_template tt : {GB_CHAT_TEMPLATE_LLAMA3, GB_CHAT_TEMPLATE_CHATML, GB_CHAT_TEMPLATE_QWEN2,
                              GB_CHAT_TEMPLATE_GEMMA, GB_CHAT_TEMPLATE_SMOLLM3, GB_CHAT_TEMPLATE_PHI4_MINI})
    EXPECT_EQ(gb_chat_apply_ex(tt, msgs, 1, &t, buf, sizeof buf, &n), GB_ERR_UNSUPPORTED_FEATURE)
        << gb_chat_template_name(tt);
  const gb_chat_message only_system[] = {{"system", "s"}};
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_LLAMA31, only_system, 1, &t, buf, sizeof buf, &n),
            GB_ERR_INVALID_ARGUMENT);
  t.tools = nullptr;
  t.tools_len = 3;  // ignored without a text
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_LLAMA31, only_system, 1, &t, buf, sizeof buf, &n), GB_OK);
  // Too small: nothing written, the size needed.
  gb_chat_options w = o;
  w.tools = kTools;
  w.tools_len = strlen(kTools);
  size_t need = 0;
  memset(buf, 'z', sizeof buf);
  EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN25, msgs, 1, &w, buf, 100, &need), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(need, 100u);
  for (size_t i = 0; i < sizeof buf; i++) ASSERT_EQ(buf[i], 'z');
  // Every prefix of the tools text: a status, never a read past its end.
  const std::string full = kTools;
  for (size_t k = 0; k < full.size(); k++) {
    std::vector<char> exact(full.begin(), full.begin() + (ptrdiff_t)k);
    gb_chat_options p = o;
    p.tools = exact.empty() ? "" : exact.data();
    p.tools_len = k;
    EXPECT_EQ(gb_chat_apply_ex(GB_CHAT_TEMPLATE_QWEN25, msgs, 1, &p, buf, sizeof buf, &n), GB_ERR_SYNTAX) << k;
  }
}

// ---- JSON as Python writes it ----------------------------------------------------

std::string dump(const std::string &json, int indent = -1) {
  const gb::JsonDoc d{json.data(), json.size()};
  size_t pos;
  const char *what;
  EXPECT_TRUE(d.check(&pos, &what)) << json;
  gb::TextOut count;
  gb::json_dump_py(d, d.root(), indent, count);
  std::string out(count.n, '\0');
  gb::TextOut w;
  w.buf = &out[0];
  gb::json_dump_py(d, d.root(), indent, w);
  EXPECT_EQ(w.n, count.n);
  return out;
}

TEST(JsonText, WritesWhatPythonJsonDumpsWrites) {
  // Expected values: Python 3.11's json.dumps(json.loads(text), ensure_ascii=False).
  const std::pair<const char *, const char *> cases[] = {
      {"1.50", "1.5"},
      {"1e2", "100.0"},
      {"1E-7", "1e-07"},
      {"-0", "0"},
      {"-0.0", "-0.0"},
      {"123456789012345678901234567890", "123456789012345678901234567890"},
      {"1e16", "1e+16"},
      {"1e15", "1000000000000000.0"},
      {"0.0001", "0.0001"},
      {"0.00001", "1e-05"},
      {"1e400", "Infinity"},
      {"-1e400", "-Infinity"},
      {"1e-400", "0.0"},
      {"2.5e-5", "2.5e-05"},
      {"0.1", "0.1"},
      {"123.456e3", "123456.0"},
      {"90071992547409.30", "90071992547409.3"},
      {"123456789012345e-20", "1.23456789012345e-06"},
      {"9.99999999999999e22", "9.99999999999999e+22"},
      {"1.79769313486231e308", "1.79769313486231e+308"},
      {"1.79769313486232e308", "Infinity"},
      {"-1e-999999999999999999999", "-0.0"},
      {"0.000e99999", "0.0"},
      {"\"a\\u00e9\\ud83d\\ude00\\/\\u001f\\u007f\"", "\"a\xc3\xa9\xf0\x9f\x98\x80/\\u001f\x7f\""},
      {"\"\\b\\f\\n\\r\\t\\\"\\\\\"", "\"\\b\\f\\n\\r\\t\\\"\\\\\""},
      {" {\"a\":[],\"b\" : {},\"c\":[1,{\"d\":null}]} ", "{\"a\": [], \"b\": {}, \"c\": [1, {\"d\": null}]}"},
      {"[true,false,null]", "[true, false, null]"},
  };
  for (const auto &c : cases) EXPECT_EQ(dump(c.first), c.second) << c.first;
  EXPECT_EQ(dump("{\"a\":[],\"b\":{},\"c\":[1,{\"d\":null}]}", 2),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": null\n    }\n  ]\n}");
  gb::TextOut s;
  std::string out(32, '\0');
  s.buf = &out[0];
  gb::json_dump_py_string("a\"\n\xff" "b", 5, s);
  EXPECT_EQ(out.substr(0, s.n), "\"a\\\"\\n\xef\xbf\xbd" "b\"");  // an ill-formed byte: U+FFFD
}

TEST(JsonText, RefusesWhatIsNotJson) {
  for (const char *bad : {"", " ", "{", "[1,]", "{\"a\"}", "{\"a\":}", "{a:1}", "01", "1.", "1e", "-", "+1", "tru",
                          "\"\\x\"", "\"\t\"", "[1] [2]", "nul", "{\"a\":1,}", "\"\\udc00\"", "\"\\ud800\\u0041\""}) {
    const gb::JsonDoc d{bad, strlen(bad)};
    size_t pos = 999;
    const char *what = nullptr;
    EXPECT_FALSE(d.check(&pos, &what)) << bad;
    EXPECT_NE(what, nullptr);
    EXPECT_LE(pos, strlen(bad));
  }
  // Nesting: 64 levels are fine, 65 are not.
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  size_t pos;
  const char *what;
  EXPECT_TRUE((gb::JsonDoc{ok.data(), ok.size()}.check(&pos, &what)));
  EXPECT_FALSE((gb::JsonDoc{deep.data(), deep.size()}.check(&pos, &what)));
}

// ---- parsing replies ----------------------------------------------------------------

struct Parsed {
  gb_status st;
  size_t content = 0;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

Parsed parse(gb_chat_template t, const std::string &text) {
  Parsed p;
  gb_tool_call calls[8];
  size_t n = 0;
  p.st = gb_tool_calls_parse(t, text.data(), text.size(), calls, 8, &n, &p.content);
  if (p.st == GB_OK)
    for (size_t i = 0; i < n; i++)
      p.calls.emplace_back(text.substr(calls[i].name_offset, calls[i].name_len),
                           text.substr(calls[i].arguments_offset, calls[i].arguments_len));
  return p;
}

TEST(ToolCalls, ParsesQwenCalls) {
  for (gb_chat_template t : {GB_CHAT_TEMPLATE_QWEN25, GB_CHAT_TEMPLATE_QWEN3}) {
    Parsed p = parse(t, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                        "</tool_call>\n<tool_call>{\"arguments\":{},\"name\":\"now\"}</tool_call>\n");
    ASSERT_EQ(p.st, GB_OK);
    EXPECT_EQ(p.content, 14u);
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(p.calls[0].first, "get_weather");
    EXPECT_EQ(p.calls[0].second, "{\"city\": \"Paris\"}");
    EXPECT_EQ(p.calls[1].first, "now");
    EXPECT_EQ(p.calls[1].second, "{}");
    p = parse(t, "Just text, no call.");
    EXPECT_EQ(p.st, GB_OK);
    EXPECT_EQ(p.calls.size(), 0u);
    EXPECT_EQ(p.content, 19u);
    p = parse(t, "");
    EXPECT_EQ(p.st, GB_OK);
    EXPECT_EQ(p.content, 0u);
    for (const char *bad : {
             "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}",                   // cut off
             "<tool_call>\n{\"name\": \"a\", \"arguments\": {}\n</tool_call>",      // unclosed object
             "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                      // no name
             "<tool_call>\n{\"name\": 3, \"arguments\": {}}\n</tool_call>",         // name not a string
             "<tool_call>\n{\"name\": \"a\\u0062\", \"arguments\": {}}\n</tool_call>",  // an escape in the name
             "<tool_call>\n{\"name\": \"a\"}\n</tool_call>",                        // no arguments
             "<tool_call>\n{\"name\": \"a\", \"arguments\": \"{}\"}\n</tool_call>",  // arguments a string
             "<tool_call>\n[1]\n</tool_call>",
             "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call> and more text",
             "<tool_call>\n{\"name\": \"a\", \"name\": \"b\", \"arguments\": {}}\n</tool_call>",
         })
      EXPECT_EQ(parse(t, bad).st, GB_ERR_SYNTAX) << bad;
  }
}

TEST(ToolCalls, ParsesLlama31Calls) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_LLAMA31;
  Parsed p = parse(t, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  ASSERT_EQ(p.st, GB_OK);
  EXPECT_EQ(p.content, 0u);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].first, "get_weather");
  EXPECT_EQ(p.calls[0].second, "{\"city\": \"Paris\"}");
  p = parse(t, "  <|python_tag|>{\"name\": \"a\", \"arguments\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": [1]}} ;");
  ASSERT_EQ(p.st, GB_OK);
  EXPECT_EQ(p.content, 2u);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].first, "b");
  EXPECT_EQ(p.calls[1].second, "{\"x\": [1]}");
  p = parse(t, "The weather is fine.");
  EXPECT_EQ(p.st, GB_OK);
  EXPECT_EQ(p.calls.size(), 0u);
  EXPECT_EQ(p.content, 20u);
  for (const char *bad : {"{\"name\": \"a\"}", "{\"name\": \"a\", \"parameters\": {}} trailing",
                          "{\"name\": \"a\", \"parameters\": {}", "{\"parameters\": {}}", "{\"name\": \"a\", \"parameters\": 1}"})
    EXPECT_EQ(parse(t, bad).st, GB_ERR_SYNTAX) << bad;
}

// The arguments of call i of text as JSON (gb_tool_call_arguments_json).
std::string args_json(gb_chat_template t, const std::string &text, const gb_tool_call &c, gb_status want = GB_OK) {
  size_t n = 0;
  gb_status st = gb_tool_call_arguments_json(t, text.data(), text.size(), &c, nullptr, 0, &n);
  if (st != GB_ERR_BUFFER_TOO_SMALL) {
    EXPECT_EQ(st, want);
    return std::string();
  }
  std::vector<char> buf(n, '\x7f');
  size_t m = 0;
  EXPECT_EQ(gb_tool_call_arguments_json(t, text.data(), text.size(), &c, buf.data(), n - 1, &m), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(m, n);
  EXPECT_EQ(buf[0], '\x7f');  // nothing written when too small
  st = gb_tool_call_arguments_json(t, text.data(), text.size(), &c, buf.data(), buf.size(), &m);
  EXPECT_EQ(st, want);
  EXPECT_EQ(m + 1, n);
  return std::string(buf.data(), m);
}

// Gemma 4's calls as its own Jinja template writes them (jinja2 rendering
// google-gemma-4-31B-it.jinja, an assistant message with three tool_calls:
// keys in its case-insensitive order, strings between <|"|> markers, Python's
// None), and each call's arguments as JSON: what Python's json.dumps writes
// for the same values in that order (separators "," and ":", no ASCII escapes).
TEST(ToolCalls, ParsesGemma4CallsIntoJson) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_GEMMA4;
  const std::string calls =
      "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|><|tool_call>call:search{cafe:<|"
      "\"|>café ☕<|\"|>,empty:{},exact:false,limit:5,nested:[[1,2],{k:[true]}],none:[],Query:<|\"|>say \"hi\" \\ "
      "back\nnow<|\"|>,range:{from:<|\"|>2026-01-01<|\"|>,to:None},ratio:-2.5e-05,tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>]}<tool_"
      "call|><|tool_call>call:ping{}<tool_call|>";
  const char *const want[3][2] = {
      {"get_weather", "{\"city\":\"Paris\",\"unit\":\"celsius\"}"},
      {"search",
       "{\"cafe\":\"café ☕\",\"empty\":{},\"exact\":false,\"limit\":5,\"nested\":[[1,2],{\"k\":[true]}],\"none\":[],"
       "\"Query\":\"say \\\"hi\\\" \\\\ back\\nnow\",\"range\":{\"from\":\"2026-01-01\",\"to\":null},\"ratio\":-2.5e-05,"
       "\"tags\":[\"a\",\"b\"]}"},
      {"ping", "{}"}};
  for (const std::string &before : {std::string(), std::string("<|channel>thought\nCheck first.<channel|>")})
    for (const std::string &after : {std::string(), std::string("<|tool_response>"), std::string("\n<|tool_response>\n")}) {
      const std::string text = before + calls + after;
      gb_tool_call c[4];
      size_t n = 0, content = 99;
      ASSERT_EQ(gb_tool_calls_parse(t, text.data(), text.size(), c, 4, &n, &content), GB_OK) << after;
      EXPECT_EQ(content, before.size());
      ASSERT_EQ(n, 3u);
      for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(text.substr(c[i].name_offset, c[i].name_len), want[i][0]);
        EXPECT_EQ(args_json(t, text, c[i]), want[i][1]) << i;
      }
    }
  // White space between the parts, keys between markers, escapes for
  // control characters; JSON formats' arguments come back as written.
  {
    const std::string text = "<|tool_call>call:f{ a : [ 1 , <|\"|>x\ty\x01<|\"|> ] , <|\"|>b c<|\"|>:{ } }<tool_call|>";
    gb_tool_call c[1];
    size_t n = 0, content = 0;
    ASSERT_EQ(gb_tool_calls_parse(t, text.data(), text.size(), c, 1, &n, &content), GB_OK);
    EXPECT_EQ(args_json(t, text, c[0]), "{\"a\":[1,\"x\\ty\\u0001\"],\"b c\":{}}");
    const std::string q = "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}</tool_call>";
    ASSERT_EQ(gb_tool_calls_parse(GB_CHAT_TEMPLATE_QWEN3, q.data(), q.size(), c, 1, &n, &content), GB_OK);
    EXPECT_EQ(args_json(GB_CHAT_TEMPLATE_QWEN3, q, c[0]), "{\"x\": [1, 2]}");
  }
  Parsed p = parse(t, "No call here.");
  EXPECT_EQ(p.st, GB_OK);
  EXPECT_EQ(p.calls.size(), 0u);
  EXPECT_EQ(p.content, 13u);
  const std::string deep = "<|tool_call>call:f{a:" + std::string(70, '[') + std::string(70, ']') + "}<tool_call|>";
  for (const std::string &bad : {
           std::string("<|tool_call>call:f{a:1}"),                        // cut off
           std::string("<|tool_call>call:f{a:1<tool_call|>"),             // unclosed object
           std::string("<|tool_call>call:{a:1}<tool_call|>"),             // no name
           std::string("<|tool_call>call:f g{a:1}<tool_call|>"),          // a space in the name
           std::string("<|tool_call>call:f[1]<tool_call|>"),              // not an object
           std::string("<|tool_call>call:f{a:<|\"|>x}<tool_call|>"),      // an unclosed string
           std::string("<|tool_call>call:f{a}<tool_call|>"),              // a key without a value
           std::string("<|tool_call>call:f{:1}<tool_call|>"),             // an empty key
           std::string("<|tool_call>call:f{a:1,}<tool_call|>"),           // a trailing comma
           std::string("<|tool_call>call:f{a:nan}<tool_call|>"),          // not a JSON number
           std::string("<|tool_call>call:f{a:01}<tool_call|>"),
           std::string("<|tool_call>call:f{a:1.}<tool_call|>"),
           std::string("<|tool_call>call:f{a:1}<tool_call|> and more text"),
           std::string("<|tool_call>call:f{a:1}<tool_call|><|tool_response>more"),
           std::string("<|tool_call>call:f{a:<|\"|>\xfd<|\"|>}<tool_call|>"),  // a string that is not UTF-8
           std::string("<|tool_call>call:f{\xc3:1}<tool_call|>"),                // a key cut inside a character
           std::string("<|tool_call>call:") + std::string(65, 'x') + "{}<tool_call|>",  // a name of 65 characters
           deep,
       })
    EXPECT_EQ(parse(t, bad).st, GB_ERR_SYNTAX) << bad;
  // A call span that is not one object, or not inside the text.
  const std::string text = "<|tool_call>call:f{a:1}<tool_call|>";
  gb_tool_call c{17, 1, 18, 5};
  EXPECT_EQ(args_json(t, text, c), "{\"a\":1}");
  c.arguments_len = 3;
  args_json(t, text, c, GB_ERR_SYNTAX);
  c.arguments_len = 50;
  args_json(t, text, c, GB_ERR_INVALID_ARGUMENT);
  c.arguments_offset = SIZE_MAX;
  args_json(t, text, c, GB_ERR_INVALID_ARGUMENT);
  c = gb_tool_call{17, 1, 18, 5};
  args_json(GB_CHAT_TEMPLATE_LFM2, text, c, GB_ERR_UNSUPPORTED_FEATURE);
  args_json(GB_CHAT_TEMPLATE_QWEN3, text, c, GB_ERR_SYNTAX);  // not JSON
  size_t n = 0;
  char buf[8];
  EXPECT_EQ(gb_tool_call_arguments_json(t, nullptr, 5, &c, buf, 8, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tool_call_arguments_json(t, text.data(), text.size(), nullptr, buf, 8, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tool_call_arguments_json(t, text.data(), text.size(), &c, nullptr, 8, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tool_call_arguments_json(t, text.data(), text.size(), &c, buf, 8, nullptr), GB_ERR_NULL_POINTER);
  // No grammar for Gemma 4's call syntax yet.
  static const char kOneTool[] = "[{\"name\": \"f\"}]";
  EXPECT_EQ(gb_grammar_from_tools(t, kOneTool, sizeof kOneTool - 1, GB_TOOL_CHOICE_AUTO, 1, nullptr, 0, &n), GB_ERR_UNSUPPORTED_FEATURE);
  // Every prefix of the calls: a status, never a read past the end (ASan).
  for (size_t k = 0; k <= calls.size(); k++) {
    std::vector<char> exact(calls.begin(), calls.begin() + (ptrdiff_t)k);
    gb_tool_call cc[4];
    size_t m = 0, content = 0;
    const gb_status st = gb_tool_calls_parse(t, exact.empty() ? "" : exact.data(), k, cc, 4, &m, &content);
    ASSERT_TRUE(st == GB_OK || st == GB_ERR_SYNTAX) << k;
  }
}

TEST(ToolCalls, Misuse) {
  const std::string text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"
                           "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
  gb_tool_call calls[2];
  memset(calls, 0x5a, sizeof calls);
  size_t n = 0, content = 77;
  const gb_chat_template t = GB_CHAT_TEMPLATE_QWEN25;
  EXPECT_EQ(gb_tool_calls_parse(t, text.data(), text.size(), calls, 1, &n, &content), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(content, 77u);
  for (size_t i = 0; i < sizeof calls; i++) ASSERT_EQ(reinterpret_cast<unsigned char *>(calls)[i], 0x5a);
  EXPECT_EQ(gb_tool_calls_parse(t, text.data(), text.size(), nullptr, 0, &n, &content), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(gb_tool_calls_parse(t, nullptr, 5, calls, 2, &n, &content), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tool_calls_parse(t, text.data(), text.size(), nullptr, 2, &n, &content), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tool_calls_parse(t, text.data(), text.size(), calls, 2, nullptr, &content), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tool_calls_parse(t, text.data(), text.size(), calls, 2, &n, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_tool_calls_parse(t, nullptr, 0, calls, 2, &n, &content), GB_OK);
  EXPECT_EQ(n, 0u);
  // (lfm2, lfm2.5 and qwen3.5 render tool definitions; their calls are not
  // parsed.)
  for (gb_chat_template bad : {GB_CHAT_TEMPLATE_LLAMA3, GB_CHAT_TEMPLATE_CHATML, GB_CHAT_TEMPLATE_SMOLLM3, GB_CHAT_TEMPLATE_LFM2,
                               GB_CHAT_TEMPLATE_LFM25, GB_CHAT_TEMPLATE_QWEN35, GB_CHAT_TEMPLATE_NONE, (gb_chat_template)99})
    EXPECT_EQ(gb_tool_calls_parse(bad, text.data(), text.size(), calls, 2, &n, &content), GB_ERR_UNSUPPORTED_FEATURE);
  // Every prefix: a status, never a read past the end (ASan).
  for (size_t k = 0; k <= text.size(); k++) {
    std::vector<char> exact(text.begin(), text.begin() + (ptrdiff_t)k);
    const gb_status st = gb_tool_calls_parse(t, exact.empty() ? "" : exact.data(), k, calls, 2, &n, &content);
    ASSERT_TRUE(st == GB_OK || st == GB_ERR_SYNTAX) << k;
  }
}

// ---- the tool-call grammar ---------------------------------------------------------

// Bounded arguments, so sampled generations end.
const char kBoundedTools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 8}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, "
    "\"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"set_alarm\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"hour\": {\"type\": \"integer\", \"minimum\": 0}, \"on\": {\"type\": "
    "\"boolean\"}}, \"required\": [\"hour\", \"on\"]}}}]";

std::string tools_grammar(gb_chat_template t, const char *tools, gb_tool_choice choice, uint32_t max_calls,
                          gb_status want = GB_OK) {
  size_t n = 0;
  gb_status st = gb_grammar_from_tools(t, tools, strlen(tools), choice, max_calls, nullptr, 0, &n);
  if (st != GB_ERR_BUFFER_TOO_SMALL) {
    EXPECT_EQ(st, want) << tools;
    return std::string();
  }
  std::vector<char> buf(n);
  st = gb_grammar_from_tools(t, tools, strlen(tools), choice, max_calls, buf.data(), buf.size(), &n);
  EXPECT_EQ(st, want);
  EXPECT_EQ(n + 1, buf.size());
  return std::string(buf.data(), n);
}

struct Grammar {
  gb_grammar *g = nullptr;
  explicit Grammar(const std::string &text) {
    EXPECT_EQ(gb_grammar_create(text.data(), text.size(), nullptr, nullptr, 0, &g), GB_OK) << text;
  }
  ~Grammar() { gb_grammar_destroy(g); }
  gb_grammar_match_result match(const std::string &s) {
    gb_grammar_match_result r = GB_GRAMMAR_MATCH_MAX_ENUM;
    EXPECT_EQ(gb_grammar_match(g, s.data(), s.size(), &r), GB_OK);
    return r;
  }
};

TEST(ToolGrammar, AcceptsExactlyTheTemplatesCallsOfTheTools) {
  const std::string w = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const std::string a = "<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"hour\": 7, \"on\": true}}\n</tool_call>";
  for (gb_chat_template t : {GB_CHAT_TEMPLATE_QWEN25, GB_CHAT_TEMPLATE_QWEN3}) {
    Grammar req(tools_grammar(t, kBoundedTools, GB_TOOL_CHOICE_REQUIRED, 2));
    EXPECT_EQ(req.match(w), GB_GRAMMAR_MATCH_COMPLETE);
    EXPECT_EQ(req.match(w + "\n" + a), GB_GRAMMAR_MATCH_COMPLETE);
    EXPECT_EQ(req.match(w + "\n" + a + "\n" + w), GB_GRAMMAR_MATCH_NONE);  // max_calls
    EXPECT_EQ(req.match(w + "\n"), GB_GRAMMAR_MATCH_PREFIX);
    EXPECT_EQ(req.match("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\"}}\n</tool_call>"),
              GB_GRAMMAR_MATCH_NONE);  // "city" is required
    EXPECT_EQ(req.match("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Parisienne\"}}"),
              GB_GRAMMAR_MATCH_NONE);  // maxLength
    EXPECT_EQ(req.match("<tool_call>\n{\"name\": \"get_time\""), GB_GRAMMAR_MATCH_NONE);  // not a tool
    EXPECT_EQ(req.match("<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"hour\": 7}}"), GB_GRAMMAR_MATCH_NONE);
    EXPECT_EQ(req.match("Sure"), GB_GRAMMAR_MATCH_NONE);
    const gb_grammar_match_result think =
        t == GB_CHAT_TEMPLATE_QWEN3 ? GB_GRAMMAR_MATCH_COMPLETE : GB_GRAMMAR_MATCH_NONE;
    EXPECT_EQ(req.match("<think>\nThe user wants weather.\n</think>\n\n" + w), think);
    Grammar autoc(tools_grammar(t, kBoundedTools, GB_TOOL_CHOICE_AUTO, 1));
    EXPECT_EQ(autoc.match(w), GB_GRAMMAR_MATCH_COMPLETE);
    EXPECT_EQ(autoc.match("Sure, it is sunny."), GB_GRAMMAR_MATCH_COMPLETE);
    EXPECT_EQ(autoc.match("<b>Sure</b>"), GB_GRAMMAR_MATCH_NONE);
    EXPECT_EQ(autoc.match(w + "\n" + w), GB_GRAMMAR_MATCH_NONE);
  }
  Grammar l(tools_grammar(GB_CHAT_TEMPLATE_LLAMA31, kBoundedTools, GB_TOOL_CHOICE_REQUIRED, 1));
  EXPECT_EQ(l.match("{\"name\": \"set_alarm\", \"parameters\": {\"hour\": 7, \"on\": false}}"), GB_GRAMMAR_MATCH_COMPLETE);
  EXPECT_EQ(l.match("{\"name\": \"set_alarm\", \"arguments\": {\"hour\": 7, \"on\": false}}"), GB_GRAMMAR_MATCH_NONE);
  EXPECT_EQ(l.match(w), GB_GRAMMAR_MATCH_NONE);
  // A tool without parameters takes any object.
  Grammar any(tools_grammar(GB_CHAT_TEMPLATE_LLAMA31, "[{\"name\": \"ping\"}]", GB_TOOL_CHOICE_REQUIRED, 1));
  EXPECT_EQ(any.match("{\"name\": \"ping\", \"parameters\": {\"x\": [1, {\"y\": null}]}}"), GB_GRAMMAR_MATCH_COMPLETE);
  // Every call the grammar completes, the parser reads back.
  for (const std::string &s : {w, w + "\n" + a}) {
    const Parsed p = parse(GB_CHAT_TEMPLATE_QWEN25, s);
    ASSERT_EQ(p.st, GB_OK);
    EXPECT_EQ(p.calls.size(), s == w ? 1u : 2u);
  }
}

TEST(ToolGrammar, Misuse) {
  size_t n = 77;
  char buf[16];
  const size_t len = strlen(kBoundedTools);
  const gb_chat_template q = GB_CHAT_TEMPLATE_QWEN25;
  EXPECT_EQ(gb_grammar_from_tools(q, nullptr, 4, GB_TOOL_CHOICE_AUTO, 1, buf, sizeof buf, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_grammar_from_tools(q, kBoundedTools, len, GB_TOOL_CHOICE_AUTO, 1, nullptr, 4, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_grammar_from_tools(q, kBoundedTools, len, GB_TOOL_CHOICE_AUTO, 1, buf, sizeof buf, nullptr),
            GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_grammar_from_tools(q, kBoundedTools, len, (gb_tool_choice)2, 1, buf, sizeof buf, &n),
            GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_grammar_from_tools(q, kBoundedTools, len, GB_TOOL_CHOICE_AUTO, 0, buf, sizeof buf, &n),
            GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_grammar_from_tools(GB_CHAT_TEMPLATE_LLAMA31, kBoundedTools, len, GB_TOOL_CHOICE_AUTO, 2, buf, sizeof buf,
                                  &n),
            GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_grammar_from_tools(q, "[]", 2, GB_TOOL_CHOICE_AUTO, 1, buf, sizeof buf, &n), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_grammar_from_tools(q, "[", 1, GB_TOOL_CHOICE_AUTO, 1, buf, sizeof buf, &n), GB_ERR_SYNTAX);
  for (gb_chat_template bad : {GB_CHAT_TEMPLATE_LLAMA3, GB_CHAT_TEMPLATE_SMOLLM3, GB_CHAT_TEMPLATE_NONE})
    EXPECT_EQ(gb_grammar_from_tools(bad, kBoundedTools, len, GB_TOOL_CHOICE_AUTO, 1, buf, sizeof buf, &n),
              GB_ERR_UNSUPPORTED_FEATURE);
  const char *unsupported = "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"patternProperties\": {}}}]";
  EXPECT_EQ(gb_grammar_from_tools(q, unsupported, strlen(unsupported), GB_TOOL_CHOICE_AUTO, 1, buf, sizeof buf, &n),
            GB_ERR_UNSUPPORTED_FEATURE);
  EXPECT_EQ(n, 77u);
  memset(buf, 'z', sizeof buf);
  EXPECT_EQ(gb_grammar_from_tools(q, kBoundedTools, len, GB_TOOL_CHOICE_AUTO, 1, buf, sizeof buf, &n),
            GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(n, sizeof buf);
  for (char c : buf) ASSERT_EQ(c, 'z');
  // Many calls: a count the compiler takes, or an open repetition.
  for (uint32_t m : {1000u, 1001u, 0xffffffffu}) {
    Grammar g(tools_grammar(q, kBoundedTools, GB_TOOL_CHOICE_REQUIRED, m));
    EXPECT_NE(g.g, nullptr);
  }
}

// ---- generation under the tool grammar --------------------------------------------

TEST(ToolGrammar, SampledRepliesAreCallsTheParserReads) {
  struct Case {
    const char *model;
    gb_chat_template t;
    uint32_t max_calls;
  };
  const Case cases[] = {{"fixtures/qwen2-tiny-Q4_K_M.gguf", GB_CHAT_TEMPLATE_QWEN25, 2},
                        {"fixtures/llama3-tiny-Q4_K_M.gguf", GB_CHAT_TEMPLATE_LLAMA31, 1}};
  const int n_seeds = (int)(16 * gbt::test_scale()) + 1;
  for (const Case &c : cases) {
    gb_model_options mo = gbt::quiet_model_options();
    gb_model *m = nullptr;
    ASSERT_EQ(gb_model_open_file(gbt::shared_path(c.model).c_str(), &mo, &m), GB_OK) << c.model;
    const gb_tokenizer *tok = nullptr;
    ASSERT_EQ(gb_model_tokenizer(m, &tok), GB_OK);
    gb_grammar *g = nullptr;
    const std::string gtext = tools_grammar(c.t, kBoundedTools, GB_TOOL_CHOICE_REQUIRED, c.max_calls);
    ASSERT_EQ(gb_grammar_create(gtext.data(), gtext.size(), nullptr, nullptr, 0, &g), GB_OK);
    // The prompt: the conversation with the tools, as the template renders it.
    const std::string prompt =
        render(c.t, {{"user", "Wake me at seven, and what is the weather in Oslo?"}}, kBoundedTools);
    std::vector<int32_t> ids(GB_TOKENIZE_CAPACITY(prompt.size()));
    size_t n_ids = 0;
    ASSERT_EQ(gb_tokenize(m, prompt.data(), prompt.size(), GB_TOKENIZE_PARSE_SPECIAL, ids.data(), ids.size(), &n_ids),
              GB_OK);
    int parsed = 0;
    for (int seed = 0; seed < n_seeds; seed++) {
      gb_session_options so;
      gb_session_options_init(&so);
      so.grammar = g;
      so.sampler.temperature = 1.0f;
      so.sampler.seed = (uint64_t)seed;
      so.n_ctx = (uint32_t)n_ids + 640;
      gb_session *s = nullptr;
      ASSERT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
      ASSERT_EQ(gb_prefill(s, ids.data(), n_ids), GB_OK);
      std::string text;
      int32_t prev = -1;
      bool ended = false;
      for (int i = 0; i < 600 && !ended; i++) {
        gb_step_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        int32_t t = -1;
        ASSERT_EQ(gb_decode_step(s, &t, &info), GB_OK);
        if (info.end == GB_STEP_END_EOG) {
          ended = true;
          break;
        }
        const char *p;
        size_t k;
        ASSERT_EQ(gb_token_to_text(m, prev, t, &p, &k), GB_OK);
        text.append(p, k);
        prev = t;
      }
      gb_session_destroy(s);
      EXPECT_TRUE(ended) << seed << ": " << text;
      const Parsed p = parse(c.t, text);
      ASSERT_EQ(p.st, GB_OK) << text;
      EXPECT_EQ(p.content, 0u) << text;
      ASSERT_GE(p.calls.size(), 1u) << text;
      ASSERT_LE(p.calls.size(), c.max_calls) << text;
      for (const auto &call : p.calls) {
        ASSERT_TRUE(call.first == "get_weather" || call.first == "set_alarm") << text;
        const gb::JsonDoc args{call.second.data(), call.second.size()};
        size_t pos;
        const char *what;
        ASSERT_TRUE(args.check(&pos, &what)) << call.second;
        // The required members are there, with the schema's types.
        if (call.first == "get_weather") {
          const size_t city = args.member(args.root(), "city");
          ASSERT_NE(city, gb::JsonDoc::kNpos) << call.second;
          EXPECT_EQ(args.at(city), '"');
        } else {
          const size_t hour = args.member(args.root(), "hour"), on = args.member(args.root(), "on");
          ASSERT_NE(hour, gb::JsonDoc::kNpos) << call.second;
          ASSERT_NE(on, gb::JsonDoc::kNpos) << call.second;
          EXPECT_TRUE(args.at(hour) >= '0' && args.at(hour) <= '9') << call.second;
          EXPECT_TRUE(args.at(on) == 't' || args.at(on) == 'f') << call.second;
        }
      }
      parsed++;
    }
    EXPECT_EQ(parsed, n_seeds);
    gb_grammar_destroy(g);
    gb_model_close(m);
  }
}

}  // namespace
