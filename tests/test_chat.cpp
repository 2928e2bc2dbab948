// test_chat.cpp — built-in chat templates (src/chat.cpp) and the streaming
// UTF-8 assembler (src/utf8_stream.cpp) through the public C API.
//
// The expected texts are typed from the model families' documented prompt
// formats (what their tokenizer_config.json chat_template renders); the
// detection inputs are Jinja snippets written here that carry each family's
// distinctive markers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gearbx.h"
#include "test_util.h"
#include "utf8_check.h"

namespace {

// ---- helpers ----------------------------------------------------------------

const gb_chat_message kTwoTurns[] = {
    {"user", "Hello"},
    {"assistant", "Hi there!"},
    {"user", "How are you?"},
};
const gb_chat_message kTwoTurnsSystem[] = {
    {"system", "You are terse."},
    {"user", "Hello"},
    {"assistant", "Hi there!"},
    {"user", "How are you?"},
};

// Render through the size query and then into an exact-size buffer.
std::string apply(gb_chat_template t, const gb_chat_message *m, size_t n, int gen) {
  size_t need = 0;
  EXPECT_EQ(gb_chat_apply(t, m, n, gen, nullptr, 0, &need), GB_ERR_BUFFER_TOO_SMALL);
  std::vector<char> buf(need, '\x7f');
  size_t len = 0;
  EXPECT_EQ(gb_chat_apply(t, m, n, gen, buf.data(), buf.size(), &len), GB_OK);
  EXPECT_EQ(len + 1, need);
  EXPECT_EQ(buf[len], '\0');
  return std::string(buf.data(), len);
}

template <size_t N>
std::string apply(gb_chat_template t, const gb_chat_message (&m)[N], int gen) {
  return apply(t, m, N, gen);
}

// The text of t over m[0..n) with options: the generation prompt or not,
// thinking on or off, the tools JSON (or none).
std::string apply_with(gb_chat_template t, const gb_chat_message *m, size_t n, int gen, int thinking, const char *tools) {
  gb_chat_options o;
  gb_chat_options_init(&o);
  o.tools = tools;
  o.tools_len = tools ? strlen(tools) : 0;
  o.add_assistant_prompt = gen;
  o.thinking = thinking;
  size_t need = 0;
  EXPECT_EQ(gb_chat_apply_ex(t, m, n, &o, nullptr, 0, &need), GB_ERR_BUFFER_TOO_SMALL);
  std::vector<char> buf(need);
  size_t len = 0;
  EXPECT_EQ(gb_chat_apply_ex(t, m, n, &o, buf.data(), buf.size(), &len), GB_OK);
  return std::string(buf.data(), len);
}

// With the tools JSON (a generation prompt; thinking on or off).
std::string apply_tools(gb_chat_template t, const gb_chat_message *m, size_t n, const char *tools, int thinking = 1) {
  return apply_with(t, m, n, 1, thinking, tools);
}

const gb_chat_template kAll[] = {GB_CHAT_TEMPLATE_LLAMA2, GB_CHAT_TEMPLATE_LLAMA3, GB_CHAT_TEMPLATE_CHATML,
                                 GB_CHAT_TEMPLATE_ZEPHYR, GB_CHAT_TEMPLATE_PHI3,   GB_CHAT_TEMPLATE_GEMMA,
                                 GB_CHAT_TEMPLATE_QWEN2,  GB_CHAT_TEMPLATE_QWEN25, GB_CHAT_TEMPLATE_QWEN3,
                                 GB_CHAT_TEMPLATE_PHI4_MINI, GB_CHAT_TEMPLATE_PHI4, GB_CHAT_TEMPLATE_SMOLLM3,
                                 GB_CHAT_TEMPLATE_LLAMA31, GB_CHAT_TEMPLATE_LFM2, GB_CHAT_TEMPLATE_LFM25,
                                 GB_CHAT_TEMPLATE_QWEN35, GB_CHAT_TEMPLATE_GEMMA4};

// Template values outside the enum are passed from C (tests/c_caller.c),
// where an enum parameter may hold any int.

// ---- the templates' texts ---------------------------------------------------------

TEST(ChatTemplate, Llama2) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_LLAMA2;
  const std::string plain = "<s>[INST] Hello [/INST] Hi there! </s><s>[INST] How are you? [/INST]";
  EXPECT_EQ(apply(t, kTwoTurns, 1), plain);
  EXPECT_EQ(apply(t, kTwoTurns, 0), plain);  // no generation prompt in Llama 2's template
  const std::string sys =
      "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHello [/INST] Hi there! </s>"
      "<s>[INST] How are you? [/INST]";
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 1), sys);
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 0), sys);
  // An answer ends its turn with a space and the EOS text.
  const gb_chat_message one[] = {{"user", "Q"}, {"assistant", "A"}};
  EXPECT_EQ(apply(t, one, 1), "<s>[INST] Q [/INST] A </s>");
}

TEST(ChatTemplate, Llama2Strips) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_LLAMA2;
  // content.strip() on each turn; with a system message the whole
  // "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + user string is stripped, so
  // the system text and the start of the first user turn keep their white
  // space and a blank first user turn takes the trailing "\n\n" with it.
  const gb_chat_message m[] = {{"system", " S "}, {"user", " \tU\n"}, {"assistant", "\n A \n"}, {"user", " V "}};
  EXPECT_EQ(apply(t, m, 1), "<s>[INST] <<SYS>>\n S \n<</SYS>>\n\n \tU [/INST] A </s><s>[INST] V [/INST]");
  const gb_chat_message blank[] = {{"system", "S"}, {"user", "  \n"}};
  EXPECT_EQ(apply(t, blank, 1), "<s>[INST] <<SYS>>\nS\n<</SYS>> [/INST]");
  // A system message alone leaves no turn to render.
  const gb_chat_message only[] = {{"system", "S"}};
  EXPECT_EQ(apply(t, only, 1), "");
}

TEST(ChatTemplate, Llama3) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_LLAMA3;
  const std::string turns =
      "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>";
  const std::string gen = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(apply(t, kTwoTurns, 1), "<|begin_of_text|>" + turns + gen);
  EXPECT_EQ(apply(t, kTwoTurns, 0), "<|begin_of_text|>" + turns);
  const std::string sys = "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>";
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 1), "<|begin_of_text|>" + sys + turns + gen);
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 0), "<|begin_of_text|>" + sys + turns);
}

TEST(ChatTemplate, Llama3TrimsUnicodeSpace) {
  // `| trim` is Python's str.strip(): Unicode white space too (U+3000,
  // U+00A0, U+2028), but not U+200B (a format character) or invalid bytes.
  const gb_chat_message m[] = {{"user", "\xe3\x80\x80 \xc2\xa0Hi\n\xe2\x80\xa8"},
                               {"assistant", "\xe2\x80\x8bX\xe2\x80\x8b"},
                               {"user", "\xff \x80"}};
  EXPECT_EQ(apply(GB_CHAT_TEMPLATE_LLAMA3, m, 0),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n\xe2\x80\x8bX\xe2\x80\x8b<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n\xff \x80<|eot_id|>");
  const gb_chat_message blank[] = {{"user", " \t\r\n\x0b\x0c\x1c\x1f"}};
  EXPECT_EQ(apply(GB_CHAT_TEMPLATE_LLAMA3, blank, 0),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>");
}

const char kChatmlTurns[] =
    "<|im_start|>user\nHello<|im_end|>\n"
    "<|im_start|>assistant\nHi there!<|im_end|>\n"
    "<|im_start|>user\nHow are you?<|im_end|>\n";
const char kChatmlSystem[] = "<|im_start|>system\nYou are terse.<|im_end|>\n";
const char kChatmlGen[] = "<|im_start|>assistant\n";

TEST(ChatTemplate, Chatml) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_CHATML;
  EXPECT_EQ(apply(t, kTwoTurns, 1), std::string(kChatmlTurns) + kChatmlGen);
  EXPECT_EQ(apply(t, kTwoTurns, 0), std::string(kChatmlTurns));
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 1), std::string(kChatmlSystem) + kChatmlTurns + kChatmlGen);
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 0), std::string(kChatmlSystem) + kChatmlTurns);
  // Text is copied as given (no trimming); roles in any order.
  const gb_chat_message m[] = {{"assistant", " a "}, {"system", "\n"}};
  EXPECT_EQ(apply(t, m, 0), "<|im_start|>assistant\n a <|im_end|>\n<|im_start|>system\n\n<|im_end|>\n");
}

TEST(ChatTemplate, QwenDefaultSystem) {
  const std::string q2 = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
  const std::string q25 =
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n";
  EXPECT_EQ(apply(GB_CHAT_TEMPLATE_QWEN2, kTwoTurns, 1), q2 + kChatmlTurns + kChatmlGen);
  EXPECT_EQ(apply(GB_CHAT_TEMPLATE_QWEN25, kTwoTurns, 0), q25 + kChatmlTurns);
  // A caller's system message replaces the default.
  EXPECT_EQ(apply(GB_CHAT_TEMPLATE_QWEN2, kTwoTurnsSystem, 1), std::string(kChatmlSystem) + kChatmlTurns + kChatmlGen);
  EXPECT_EQ(apply(GB_CHAT_TEMPLATE_QWEN25, kTwoTurnsSystem, 0), std::string(kChatmlSystem) + kChatmlTurns);
}

// Qwen3: the texts its template (Qwen3-0.6B's tokenizer_config.json) renders
// for these messages with Hugging Face's settings.
TEST(ChatTemplate, Qwen3) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_QWEN3;
  // Plain turns: ChatML, no default system message, the first system kept.
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 1), std::string(kChatmlSystem) + kChatmlTurns + kChatmlGen);
  EXPECT_EQ(apply(t, kTwoTurns, 0), std::string(kChatmlTurns));
  // Reasoning before the last user turn is dropped; after it, kept in a
  // <think> block with its newlines normalised.
  const gb_chat_message history[] = {{"user", "2+2?"},
                                     {"assistant", "<think>\nadd them\n</think>\n\n4"},
                                     {"user", "and 3+3?"},
                                     {"assistant", "<think>\n\nagain\n\n</think>\n\n\n6"}};
  EXPECT_EQ(apply(t, history, 0),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nand 3+3?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nagain\n</think>\n\n6<|im_end|>\n");
  // The last message after the last user turn always gets a block.
  const gb_chat_message plain[] = {{"user", "Hi"}, {"assistant", "Hello!"}};
  EXPECT_EQ(apply(t, plain, 0), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n");
  // Between: only turns with reasoning; the answer follows the last
  // "</think>", the reasoning lies between the last "<think>" and the first
  // "</think>"; a later system message is a turn of its own.
  const gb_chat_message mid[] = {
      {"user", "q"}, {"assistant", "<think>r1</think>a1"}, {"assistant", "plain"}, {"assistant", "x<think>r3</think>y</think>z"}};
  EXPECT_EQ(apply(t, mid, 1),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr1\n</think>\n\na1<|im_end|>\n"
            "<|im_start|>assistant\nplain<|im_end|>\n<|im_start|>assistant\n<think>\nr3\n</think>\n\nz<|im_end|>\n"
            "<|im_start|>assistant\n");
  const gb_chat_message later[] = {{"user", "a"}, {"system", "late"}, {"assistant", "b"}};
  EXPECT_EQ(apply(t, later, 1),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>system\nlate<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nb"
            "<|im_end|>\n<|im_start|>assistant\n");
  // A tool response is not the last user query.
  const gb_chat_message tool[] = {
      {"user", "q"}, {"assistant", "<think>r</think>a"}, {"user", "<tool_response>\n42\n</tool_response>"}, {"assistant", "b"}};
  EXPECT_EQ(apply(t, tool, 0),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\na<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nb"
            "<|im_end|>\n");
}

// LFM2.5 and LFM2: the BOS text, the system turn (with the tool list when
// there are tools), ChatML turns; LFM2.5 drops past reasoning, LFM2 marks
// the tool list and tool results. (The expected texts are what the models'
// Jinja templates render, with Hugging Face's settings.)
TEST(ChatTemplate, Lfm25) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_LFM25;
  const gb_chat_message history[] = {{"system", "Be brief."},
                                     {"user", "Hi"},
                                     {"assistant", "<think>x</think>  Hello "},
                                     {"user", "Again"},
                                     {"assistant", "<think>y</think>Yes"}};
  EXPECT_EQ(apply(t, history, 0),
            "<|startoftext|><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "Hello<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n<think>y</think>Yes<|im_end|>\n");
  const gb_chat_message hi[] = {{"user", "Hi"}};
  EXPECT_EQ(apply(t, hi, 1), "<|startoftext|><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const gb_chat_message with_tool[] = {{"system", "S"}, {"user", "w?"}, {"tool", "42"}};
  EXPECT_EQ(apply_tools(t, with_tool, 3, "[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"parameters\":{\"type\":\"object\"}}},"
                                         "{\"name\":\"two\"}]"),
            "<|startoftext|><|im_start|>system\nS\nList of tools: [{\"type\": \"function\", \"function\": {\"name\": \"get\", "
            "\"parameters\": {\"type\": \"object\"}}}, {\"name\": \"two\"}]<|im_end|>\n<|im_start|>user\nw?<|im_end|>\n"
            "<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_tools(t, hi, 1, "[{\"name\":\"one\",\"d\":\"\xc3\xa9\"}]"),
            "<|startoftext|><|im_start|>system\nList of tools: [{\"name\": \"one\", \"d\": \"\xc3\xa9\"}]<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Lfm2) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_LFM2;
  const gb_chat_message m[] = {{"system", "S"}, {"user", "w?"}, {"assistant", "<think>a</think>b"}, {"tool", "42"}};
  EXPECT_EQ(apply_tools(t, m, 4, "[{\"name\":\"get\"},{\"name\":\"two\"}]"),
            "<|startoftext|><|im_start|>system\nS\nList of tools: <|tool_list_start|>[{\"name\": \"get\"}, {\"name\": \"two\"}]"
            "<|tool_list_end|><|im_end|>\n<|im_start|>user\nw?<|im_end|>\n<|im_start|>assistant\n<think>a</think>b<|im_end|>\n"
            "<|im_start|>tool\n<|tool_response_start|>42<|tool_response_end|><|im_end|>\n<|im_start|>assistant\n");
  // An empty system message and no tools: no system turn.
  const gb_chat_message empty_sys[] = {{"system", ""}, {"user", "Hi"}};
  EXPECT_EQ(apply(t, empty_sys, 1), "<|startoftext|><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// Qwen3.5: texts stripped; after the last user query every assistant turn
// gets a reasoning block; tool results share a user turn; the generation
// prompt opens a <think> block (an empty one with thinking off).
TEST(ChatTemplate, Qwen35) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_QWEN35;
  const gb_chat_message history[] = {{"system", "  Be brief. "},
                                     {"user", " 2+2? "},
                                     {"assistant", "<think>\nadd\n</think>\n\n4"},
                                     {"user", "3+3?"},
                                     {"assistant", "6"}};
  EXPECT_EQ(apply(t, history, 1),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n6<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
  const gb_chat_message tools[] = {
      {"user", "q"}, {"assistant", "x<think>r3</think>y</think>z"}, {"tool", "r1"}, {"tool", "r2"}, {"assistant", "done"}};
  EXPECT_EQ(apply(t, tools, 0),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr3\n</think>\n\nz<|im_end|>\n<|im_start|>user\n"
            "<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\ndone<|im_end|>\n");
  const gb_chat_message sys_user[] = {{"system", "S"}, {"user", "w?"}};
  const std::string with_tools = apply_tools(t, sys_user, 2, "[{\"name\":\"get\",\"parameters\":{\"type\":\"object\"}}]", 0);
  EXPECT_EQ(with_tools.rfind("<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
                             "{\"name\": \"get\", \"parameters\": {\"type\": \"object\"}}\n</tools>\n\nIf you choose",
                             0),
            0u);
  const std::string tail = "</IMPORTANT>\n\nS<|im_end|>\n<|im_start|>user\nw?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  ASSERT_GE(with_tools.size(), tail.size());
  EXPECT_EQ(with_tools.substr(with_tools.size() - tail.size()), tail);
  EXPECT_NE(with_tools.find("<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>"),
            std::string::npos);
  // What its template raises for.
  char buf[256];
  size_t n = 0;
  const gb_chat_message late[] = {{"user", "a"}, {"system", "late"}};
  EXPECT_EQ(gb_chat_apply(t, late, 2, 1, buf, sizeof buf, &n), GB_ERR_INVALID_ARGUMENT);
  const gb_chat_message no_query[] = {{"user", "<tool_response>x</tool_response>"}};
  EXPECT_EQ(gb_chat_apply(t, no_query, 1, 1, buf, sizeof buf, &n), GB_ERR_INVALID_ARGUMENT);
}

// Gemma 4: expected texts rendered by Gemma 4's own Jinja template
// (jinja2, trim_blocks and lstrip_blocks on) with enable_thinking true or
// false: the system turn (and <|think|> in it), stripped texts, the
// reasoning channel dropped from model turns, a second assistant message
// continuing its turn, the generation prompt with its empty thought channel.
std::string apply_thinking(gb_chat_template t, const gb_chat_message *m, size_t n, int gen, int thinking) {
  return apply_with(t, m, n, gen, thinking, nullptr);
}

TEST(ChatTemplate, Gemma4) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_GEMMA4;
  const gb_chat_message plain[] = {{"system", "  Be brief. "}, {"user", " 2+2? "}, {"assistant", " 4 "}, {"user", "3+3?"}};
  const std::string plain_text =
      "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\n2+2?<turn|>\n<|turn>model\n4<turn|>\n<|turn>user\n3+3?<turn|>\n";
  EXPECT_EQ(apply_thinking(t, plain, 4, 1, 0), plain_text + "<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_EQ(apply_thinking(t, plain, 4, 0, 0), plain_text);
  const gb_chat_message hi[] = {{"user", "Hi"}};
  EXPECT_EQ(apply_thinking(t, hi, 1, 1, 0), "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_EQ(apply_thinking(t, hi, 1, 0, 0), "<bos><|turn>user\nHi<turn|>\n");
  EXPECT_EQ(apply_thinking(t, hi, 1, 1, 1), "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
  EXPECT_EQ(apply(t, hi, 1), apply_thinking(t, hi, 1, 1, 1));  // thinking on by default
  const gb_chat_message sys_hi[] = {{"system", "S"}, {"user", "Hi"}};
  EXPECT_EQ(apply_thinking(t, sys_hi, 2, 0, 1), "<bos><|turn>system\n<|think|>\nS<turn|>\n<|turn>user\nHi<turn|>\n");
  const gb_chat_message channel[] = {{"user", "q"}, {"assistant", " a <|channel>thought\nhidden<channel|> b <channel|>c<|channel>x"}};
  EXPECT_EQ(apply_thinking(t, channel, 2, 0, 0), "<bos><|turn>user\nq<turn|>\n<|turn>model\na  b c<turn|>\n");
  const gb_chat_message only_thought[] = {{"user", "q"}, {"assistant", " <|channel>all hidden"}};
  EXPECT_EQ(apply_thinking(t, only_thought, 2, 0, 0), "<bos><|turn>user\nq<turn|>\n<|turn>model\n<turn|>\n");
  const gb_chat_message two[] = {{"user", "q"}, {"assistant", "one"}, {"assistant", "two"}, {"user", "r"}};
  EXPECT_EQ(apply_thinking(t, two, 4, 0, 0), "<bos><|turn>user\nq<turn|>\n<|turn>model\none<turn|>\ntwo<turn|>\n<|turn>user\nr<turn|>\n");
  const gb_chat_message late[] = {{"user", "q"}, {"system", " late "}, {"assistant", "a"}};
  EXPECT_EQ(apply_thinking(t, late, 3, 0, 0), "<bos><|turn>user\nq<turn|>\n<|turn>system\nlate<turn|>\n<|turn>model\na<turn|>\n");
  // No tool role (the template writes a tool's result only after an
  // assistant message's structured calls, which these messages do not carry).
  char buf[512];
  size_t n = 0;
  const gb_chat_message tool[] = {{"user", "q"}, {"tool", "r"}};
  EXPECT_EQ(gb_chat_apply(t, tool, 2, 1, buf, sizeof buf, &n), GB_ERR_INVALID_ARGUMENT);
}

// Gemma 4's tool declarations: expected texts rendered by its Jinja template
// (jinja2, trim_blocks and lstrip_blocks on) from the same tools JSON: keys
// in case-insensitive order (ties in their order), strings in <|"|> quote
// tokens, types upper-cased, numbers and null as Python prints them, the
// items' other keys through format_argument, a property named "type"
// skipped, a response declaration, and the template's own quirks (a tool
// without a description gets an empty one; parameters without a "type"
// leave their brace open).
const char kGemma4Weather[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get the current weather in a city.\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"The city, e.g. Par"
    "is\"},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"],\"description\":\"Temperature unit\"}},\"req"
    "uired\":[\"city\"]}}}]";
const char kGemma4Search[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"search\",\"description\":\"Search documents\",\"parameters\":{\"type"
    "\":\"object\",\"properties\":{\"Query\":{\"type\":\"string\",\"description\":\"What to find\"},\"limit\":{\"type\":\"i"
    "nteger\",\"description\":\"Max results\",\"minimum\":1},\"tags\":{\"type\":\"array\",\"description\":\"Filter tags\","
    "\"items\":{\"type\":\"string\",\"enum\":[\"a\",\"b\"],\"maxLength\":8,\"description\":null,\"multipleOf\":0.25,\"minim"
    "um\":-1e-7}},\"range\":{\"type\":\"object\",\"description\":\"Date range\",\"properties\":{\"from\":{\"type\":\"string"
    "\"},\"to\":{\"type\":\"string\",\"nullable\":true}},\"required\":[\"from\"]},\"points\":{\"type\":\"array\",\"items\":"
    "{\"type\":[\"number\",\"null\"],\"properties\":{\"x\":{\"type\":\"number\"},\"y\":{\"type\":\"number\",\"description\""
    ":\"Y\"}},\"required\":[\"x\"]}},\"exact\":{\"type\":\"boolean\",\"nullable\":true},\"type\":{\"type\":\"string\",\"des"
    "cription\":\"a schema keyword\"},\"mode\":{\"type\":\"string\",\"enum\":[{\"K\":1,\"a\":true},\"x\",null,2.5]},\"b\":{"
    "\"type\":\"string\"},\"B\":{\"type\":\"integer\"},\"alpha\":{\"description\":\"no type\"},\"cafe\":{\"type\":\"string"
    "\",\"description\":\"caf\\u00e9 \\u2615\"}},\"required\":[\"Query\",\"limit\"]},\"response\":{\"description\":\"The hi"
    "ts\",\"type\":\"object\"}}},{\"type\":\"function\",\"function\":{\"name\":\"ping\",\"parameters\":{\"properties\":{\"h"
    "ost\":{\"type\":\"string\"}}}}}]";

TEST(ChatTemplate, Gemma4ToolDeclarations) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_GEMMA4;
  const gb_chat_message sys_user[] = {{"system", " Be brief. "}, {"user", "Weather in Paris?"}};
  EXPECT_EQ(apply_with(t, sys_user, 2, 1, 1, kGemma4Weather),
            "<bos><|turn>system\n<|think|>\nBe brief.<|tool>declaration:get_weather{description:<|\"|>Get the current weather in a "
            "city.<|\"|>,parameters:{properties:{city:{description:<|\"|>The city, e.g. Paris<|\"|>,type:<|\"|>STRING<|\"|>},unit:{"
            "description:<|\"|>Temperature unit<|\"|>,enum:[<|\"|>celsius<|\"|>,<|\"|>fahrenheit<|\"|>],type:<|\"|>STRING<|\"|>}},r"
            "equired:[<|\"|>city<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n<|turn>user\nWeather in Paris?<turn|>\n<|turn>mode"
            "l\n");
  EXPECT_EQ(apply_with(t, sys_user + 1, 1, 1, 0, kGemma4Weather),
            "<bos><|turn>system\n<|tool>declaration:get_weather{description:<|\"|>Get the current weather in a city.<|\"|>,paramete"
            "rs:{properties:{city:{description:<|\"|>The city, e.g. Paris<|\"|>,type:<|\"|>STRING<|\"|>},unit:{description:<|\"|>Te"
            "mperature unit<|\"|>,enum:[<|\"|>celsius<|\"|>,<|\"|>fahrenheit<|\"|>],type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<"
            "|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n<|channel>thought"
            "\n<channel|>");
  const gb_chat_message find[] = {{"user", "find"}};
  EXPECT_EQ(apply_with(t, find, 1, 0, 0, kGemma4Search),
            "<bos><|turn>system\n<|tool>declaration:search{description:<|\"|>Search documents<|\"|>,parameters:{properties:{alpha:{"
            "description:<|\"|>no type<|\"|>,type:<|\"|><|\"|>},b:{type:<|\"|>STRING<|\"|>},B:{type:<|\"|>INTEGER<|\"|>},cafe:{desc"
            "ription:<|\"|>café ☕<|\"|>,type:<|\"|>STRING<|\"|>},exact:{nullable:true,type:<|\"|>BOOLEAN<|\"|>},limit:{description:"
            "<|\"|>Max results<|\"|>,type:<|\"|>INTEGER<|\"|>},mode:{enum:[{<|\"|>a<|\"|>:true,<|\"|>K<|\"|>:1},<|\"|>x<|\"|>,None,"
            "2.5],type:<|\"|>STRING<|\"|>},points:{items:{properties:{x:{type:<|\"|>NUMBER<|\"|>},y:{description:<|\"|>Y<|\"|>,type"
            ":<|\"|>NUMBER<|\"|>}},required:[<|\"|>x<|\"|>],type:[<|\"|>NUMBER<|\"|>,<|\"|>NULL<|\"|>]},type:<|\"|>ARRAY<|\"|>},Que"
            "ry:{description:<|\"|>What to find<|\"|>,type:<|\"|>STRING<|\"|>},range:{description:<|\"|>Date range<|\"|>,properties"
            ":{from:{type:<|\"|>STRING<|\"|>},to:{nullable:true,type:<|\"|>STRING<|\"|>}},required:[<|\"|>from<|\"|>],type:<|\"|>OB"
            "JECT<|\"|>},tags:{description:<|\"|>Filter tags<|\"|>,items:{enum:[<|\"|>a<|\"|>,<|\"|>b<|\"|>],maxLength:8,minimum:-1"
            "e-07,multipleOf:0.25,type:<|\"|>STRING<|\"|>},type:<|\"|>ARRAY<|\"|>}},required:[<|\"|>Query<|\"|>,<|\"|>limit<|\"|>],"
            "type:<|\"|>OBJECT<|\"|>},response:{description:<|\"|>The hits<|\"|>,type:<|\"|>OBJECT<|\"|>}}<tool|><|tool>declaration"
            ":ping{description:<|\"|><|\"|>,parameters:{properties:{host:{type:<|\"|>STRING<|\"|>}},}<tool|><turn|>\n<|turn>user\nf"
            "ind<turn|>\n");
  const gb_chat_message hi[] = {{"user", "Hi"}};
  EXPECT_EQ(apply_with(t, hi, 1, 1, 0, "[]"), "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");  // no tools: no system turn
  // What the template would not render the same way everywhere is refused
  // before anything is written.
  struct Bad {
    const char *tools;
    gb_status want;
  } bad[] = {
      {R"([{"name":"f"}])", GB_ERR_INVALID_ARGUMENT},  // no "function" object: the template reads tool.function
      {R"([{"function":{"name":"f","description":3}}])", GB_ERR_UNSUPPORTED_FEATURE},
      {R"([{"function":{"name":"f","parameters":{"properties":{"a":"string"}}}}])", GB_ERR_UNSUPPORTED_FEATURE},
      {R"([{"function":{"name":"f","parameters":{"properties":{"a":{"type":["string","null"]}}}}}])",
       GB_ERR_UNSUPPORTED_FEATURE},
      {R"([{"function":{"name":"f","parameters":{"properties":{"a":{"description":{"x":1}}}}}}])",
       GB_ERR_UNSUPPORTED_FEATURE},
      {R"([{"function":{"name":"f","parameters":{"properties":{"\u00c9t\u00e9":{"type":"string"}}}}}])",
       GB_ERR_UNSUPPORTED_FEATURE},  // a key Python lower-cases beyond ASCII
      {R"([{"function":{"name":"f","parameters":{"required":"a"}}}])", GB_ERR_UNSUPPORTED_FEATURE},
      {R"([{"function":{"name":"f","parameters":{"properties":{"a":{"type":"array","items":{"required":"x"}}}}}}])",
       GB_ERR_UNSUPPORTED_FEATURE},
      {R"([{"function":{"name":"f","response":"text"}}])", GB_ERR_UNSUPPORTED_FEATURE},
      {R"([{"function":{"name":"f","parameters":{"type":"\u00f6bject"}}}])", GB_ERR_UNSUPPORTED_FEATURE},
  };
  char buf[256];
  for (const Bad &b : bad) {
    gb_chat_options o;
    gb_chat_options_init(&o);
    o.tools = b.tools;
    o.tools_len = strlen(b.tools);
    size_t n = 0;
    memset(buf, 'z', sizeof buf);
    EXPECT_EQ(gb_chat_apply_ex(t, hi, 1, &o, buf, sizeof buf, &n), b.want) << b.tools;
    EXPECT_EQ(buf[0], 'z') << b.tools;  // nothing written
  }
}

TEST(ChatTemplate, Zephyr) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_ZEPHYR;
  const std::string turns = "<|user|>\nHello</s>\n<|assistant|>\nHi there!</s>\n<|user|>\nHow are you?</s>\n";
  EXPECT_EQ(apply(t, kTwoTurns, 1), turns + "<|assistant|>\n");
  EXPECT_EQ(apply(t, kTwoTurns, 0), turns);
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 1), "<|system|>\nYou are terse.</s>\n" + turns + "<|assistant|>\n");
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 0), "<|system|>\nYou are terse.</s>\n" + turns);
}

TEST(ChatTemplate, Phi3) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_PHI3;
  const std::string turns =
      "<|user|>\nHello<|end|>\n<|assistant|>\nHi there!<|end|>\n<|user|>\nHow are you?<|end|>\n";
  EXPECT_EQ(apply(t, kTwoTurns, 1), turns + "<|assistant|>\n");
  EXPECT_EQ(apply(t, kTwoTurns, 0), turns + "<|endoftext|>");  // the template's else branch
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 1), "<|system|>\nYou are terse.<|end|>\n" + turns + "<|assistant|>\n");
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 0), "<|system|>\nYou are terse.<|end|>\n" + turns + "<|endoftext|>");
}

// Phi-4-mini: no newline after the role or between turns.
TEST(ChatTemplate, Phi4Mini) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_PHI4_MINI;
  const std::string turns = "<|user|>Hello<|end|><|assistant|>Hi there!<|end|><|user|>How are you?<|end|>";
  EXPECT_EQ(apply(t, kTwoTurns, 1), turns + "<|assistant|>");
  EXPECT_EQ(apply(t, kTwoTurns, 0), turns + "<|endoftext|>");
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 1), "<|system|>You are terse.<|end|>" + turns + "<|assistant|>");
}

// Phi-4: ChatML's markers with <|im_sep|> after the role, no newlines.
TEST(ChatTemplate, Phi4) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_PHI4;
  const std::string turns =
      "<|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there!<|im_end|>"
      "<|im_start|>user<|im_sep|>How are you?<|im_end|>";
  EXPECT_EQ(apply(t, kTwoTurns, 1), turns + "<|im_start|>assistant<|im_sep|>");
  EXPECT_EQ(apply(t, kTwoTurns, 0), turns);
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 0), "<|im_start|>system<|im_sep|>You are terse.<|im_end|>" + turns);
}

// SmolLM3: a system turn with metadata always comes first; the expected
// texts are what its Jinja template renders (jinja2, trim_blocks and
// lstrip_blocks on) for these messages.
TEST(ChatTemplate, SmolLM3) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_SMOLLM3;
  const std::string head = "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: ";
  const std::string custom = "\n\n## Custom Instructions\n\n";
  const std::string think_default =
      "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
      "thoroughly exploring questions through a systematic thinking process before providing the final precise and "
      "accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, "
      "reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please "
      "structure your response into two main sections: Thought and Solution using the specified format: <think> "
      "Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. "
      "Each step should include detailed considerations such as analysing questions, summarizing relevant findings, "
      "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
      "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
      "Thought section, systematically present the final solution that you deem correct. The Solution section should "
      "be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.\n\n";
  const std::string plain_default = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n";
  const std::string end = "<|im_end|>\n";
  const std::string empty_think = "<think>\n\n</think>\n";
  const std::string turns =
      "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there!<|im_end|>\n"
      "<|im_start|>user\nHow are you?<|im_end|>\n";
  EXPECT_EQ(apply(t, kTwoTurns, 1), head + "/think" + custom + think_default + end + turns + "<|im_start|>assistant\n");
  // Leading newlines of an answer are dropped, trailing ones kept.
  const gb_chat_message nl[] = {{"user", "Hello"}, {"assistant", "\n\nHi there!\n"}, {"user", "How are you?"}};
  EXPECT_EQ(apply(t, nl, 0), head + "/think" + custom + think_default + end +
                                 "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there!\n<|im_end|>\n"
                                 "<|im_start|>user\nHow are you?<|im_end|>\n");
  const gb_chat_message sys[] = {{"system", "You are terse."}, {"user", "Hello"}, {"assistant", "Hi there!"}};
  EXPECT_EQ(apply(t, sys, 1), head + "/think" + custom + "You are terse.\n\n" + end +
                                  "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there!<|im_end|>\n"
                                  "<|im_start|>assistant\n");
  // "/no_think" in the system text: the tag is removed, the answers and the
  // prompt start with an empty reasoning block.
  const gb_chat_message no[] = {{"system", "Be brief. /no_think  \n"}, {"user", "Hello"}, {"assistant", "\nHi"}};
  EXPECT_EQ(apply(t, no, 1), head + "/no_think" + custom + "Be brief.\n\n" + end + "<|im_start|>user\nHello<|im_end|>\n" +
                                 "<|im_start|>assistant\n" + empty_think + "Hi<|im_end|>\n<|im_start|>assistant\n" +
                                 empty_think);
  // Only tags: the mode's default instructions.
  const gb_chat_message tag[] = {{"system", "/think"}, {"user", "Q"}};
  EXPECT_EQ(apply(t, tag, 1), head + "/think" + custom + think_default + end + "<|im_start|>user\nQ<|im_end|>\n" +
                                  "<|im_start|>assistant\n");
  const gb_chat_message notag[] = {{"system", " /no_think"}, {"user", "Q"}};
  EXPECT_EQ(apply(t, notag, 0), head + "/no_think" + custom + plain_default + end + "<|im_start|>user\nQ<|im_end|>\n");
  // The two removals run one after the other over the whole text, so removing
  // "/no_think" can join a "/think" that the second removal takes, and
  // removing "/think" can join a "/no_think" that stays; the strip takes
  // Unicode white space (U+3000, U+00A0).
  const gb_chat_message joined[] = {{"system", "a/t/no_thinkhink b/no_thin/thinkk c\xe3\x80\x80\xc2\xa0 \n"},
                                    {"user", "Q"}};
  EXPECT_EQ(apply(t, joined, 1), head + "/no_think" + custom + "a b/no_think c\n\n" + end +
                                     "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n" + empty_think);
  // A later system message is neither written nor read for the mode.
  const gb_chat_message later[] = {{"user", "a"}, {"system", "late /no_think"}, {"assistant", "b"}};
  EXPECT_EQ(apply(t, later, 1), head + "/think" + custom + think_default + end +
                                    "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n"
                                    "<|im_start|>assistant\n");
  // Ill-formed bytes are kept as they are and are not white space.
  const gb_chat_message bad[] = {{"system", "x\xff \xc2"}, {"user", "Q"}};
  EXPECT_EQ(apply(t, bad, 0), head + "/think" + custom + "x\xff \xc2\n\n" + end + "<|im_start|>user\nQ<|im_end|>\n");
}

TEST(ChatTemplate, Gemma) {
  const gb_chat_template t = GB_CHAT_TEMPLATE_GEMMA;
  const std::string rest =
      "Hello<end_of_turn>\n<start_of_turn>model\nHi there!<end_of_turn>\n"
      "<start_of_turn>user\nHow are you?<end_of_turn>\n";
  const std::string gen = "<start_of_turn>model\n";
  EXPECT_EQ(apply(t, kTwoTurns, 1), "<bos><start_of_turn>user\n" + rest + gen);
  EXPECT_EQ(apply(t, kTwoTurns, 0), "<bos><start_of_turn>user\n" + rest);
  // No system role: its text opens the first user turn, then a blank line.
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 1), "<bos><start_of_turn>user\nYou are terse.\n\n" + rest + gen);
  EXPECT_EQ(apply(t, kTwoTurnsSystem, 0), "<bos><start_of_turn>user\nYou are terse.\n\n" + rest);
  // Turn text is trimmed, the folded system text is not.
  const gb_chat_message m[] = {{"system", " S "}, {"user", "  U  "}};
  EXPECT_EQ(apply(t, m, 1), "<bos><start_of_turn>user\n S \n\nU<end_of_turn>\n<start_of_turn>model\n");
}

// Python's white space (str.isspace) as UTF-8 strings, for the check below.
const char *const kPySpaces[] = {"\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", " ",
                                 "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81",
                                 "\xe2\x80\x82", "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85",
                                 "\xe2\x80\x86", "\xe2\x80\x87", "\xe2\x80\x88", "\xe2\x80\x89",
                                 "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf",
                                 "\xe2\x81\x9f", "\xe3\x80\x80"};

// Length of the white space character that s starts with (at), 0 if none.
size_t space_at(const std::string &s, size_t at) {
  for (const char *sp : kPySpaces)
    if (s.compare(at, strlen(sp), sp) == 0) return strlen(sp);
  return 0;
}

TEST(ChatTemplate, RandomContentCopiedOrStripped) {
  // Random contents mixing white space, other characters and stray bytes:
  // ChatML copies them, Llama 3 keeps exactly the stretch between the first
  // and the last character that is not white space.
  const uint32_t seed = 20240517u;
  std::mt19937 rng(seed);
  const char *const atoms[] = {" ", "\n", "\xe3\x80\x80", "\xc2\xa0", "a", "\xc3\xa9", "\xe2\x80\x8b",
                               "\x80", "\xe2\x80", "\xf0\x9f\x98\x80", "\t", "\x1f", "\xe2\x80\xa8"};
  for (int iter = 0; iter < 500; iter++) {
    std::string content;
    const int k = (int)(rng() % 7);
    for (int i = 0; i < k; i++) content += atoms[rng() % (sizeof atoms / sizeof *atoms)];
    const gb_chat_message m[] = {{"user", content.c_str()}};
    ASSERT_EQ(apply(GB_CHAT_TEMPLATE_CHATML, m, 0), "<|im_start|>user\n" + content + "<|im_end|>\n");
    const std::string head = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n";
    const std::string got = apply(GB_CHAT_TEMPLATE_LLAMA3, m, 0);
    ASSERT_EQ(got.compare(0, head.size(), head), 0);
    ASSERT_GE(got.size(), head.size() + 10);
    const std::string kept = got.substr(head.size(), got.size() - head.size() - 10);
    // Expected: skip leading white space, then cut trailing white space by
    // trying every end where the rest is all white space.
    size_t b = 0;
    while (size_t w = space_at(content, b)) b += w;
    size_t e = content.size();
    for (size_t cut = b; cut <= content.size(); cut++) {
      size_t j = cut;
      while (j < content.size()) {
        const size_t w = space_at(content, j);
        if (!w) break;
        j += w;
      }
      if (j == content.size()) {
        e = cut;
        break;
      }
    }
    ASSERT_EQ(kept, content.substr(b, e - b)) << "seed " << seed << " iter " << iter;
  }
}

// ---- size, buffer, misuse ------------------------------------------------------

TEST(ChatApply, BufferTooSmallWritesNothing) {
  for (gb_chat_template t : kAll) {
    const std::string want = apply(t, kTwoTurnsSystem, 1);
    const size_t need = want.size() + 1;
    for (size_t cap : {size_t(0), size_t(1), need / 2, need - 1, need, need + 5}) {
      std::vector<char> buf(need + 16, '\x5a');
      size_t n_out = 12345;
      const gb_status s = gb_chat_apply(t, kTwoTurnsSystem, 4, 1, buf.data(), cap, &n_out);
      if (cap < need) {
        ASSERT_EQ(s, GB_ERR_BUFFER_TOO_SMALL) << gb_chat_template_name(t) << " cap " << cap;
        EXPECT_EQ(n_out, need);
        for (char c : buf) ASSERT_EQ(c, '\x5a') << "written with cap " << cap;
      } else {
        ASSERT_EQ(s, GB_OK);
        EXPECT_EQ(n_out, want.size());
        EXPECT_EQ(std::string(buf.data()), want);
        for (size_t i = need; i < buf.size(); i++) ASSERT_EQ(buf[i], '\x5a') << "past the text at " << i;
      }
    }
  }
}

TEST(ChatApply, Misuse) {
  char buf[256];
  size_t n_out = 77;
  const gb_chat_template t = GB_CHAT_TEMPLATE_CHATML;
  EXPECT_EQ(gb_chat_apply(t, nullptr, 1, 1, buf, sizeof buf, &n_out), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_apply(t, kTwoTurns, 3, 1, buf, sizeof buf, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_apply(t, kTwoTurns, 3, 1, nullptr, 10, &n_out), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_apply(t, kTwoTurns, 0, 1, buf, sizeof buf, &n_out), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_chat_apply(t, kTwoTurns, 3, 2, buf, sizeof buf, &n_out), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_chat_apply(t, kTwoTurns, 3, -1, buf, sizeof buf, &n_out), GB_ERR_INVALID_ARGUMENT);
  for (int32_t bad : {0, 18, -1, 1000, 0x7fffffff})
    EXPECT_EQ(gbt_c_chat_apply(bad, kTwoTurns, 3, 1, buf, sizeof buf, &n_out), GB_ERR_INVALID_ARGUMENT)
        << bad;
  for (gb_chat_template tt : kAll) {
    const gb_chat_message null_role[] = {{"user", "a"}, {nullptr, "b"}};
    EXPECT_EQ(gb_chat_apply(tt, null_role, 2, 1, buf, sizeof buf, &n_out), GB_ERR_NULL_POINTER);
    const gb_chat_message null_text[] = {{"user", nullptr}};
    EXPECT_EQ(gb_chat_apply(tt, null_text, 1, 1, buf, sizeof buf, &n_out), GB_ERR_NULL_POINTER);
    for (const char *role : {"User", "Tool", "tool ", "ipython", "", "model", "system ", "assistant\n"}) {
      const gb_chat_message bad_role[] = {{"user", "a"}, {role, "b"}};
      EXPECT_EQ(gb_chat_apply(tt, bad_role, 2, 1, buf, sizeof buf, &n_out), GB_ERR_INVALID_ARGUMENT)
          << gb_chat_template_name(tt) << " role '" << role << "'";
    }
  }
  // A tool result only where the template has a turn for it.
  for (gb_chat_template tt : kAll) {
    const bool takes = tt == GB_CHAT_TEMPLATE_QWEN25 || tt == GB_CHAT_TEMPLATE_QWEN3 ||
                       tt == GB_CHAT_TEMPLATE_SMOLLM3 || tt == GB_CHAT_TEMPLATE_LLAMA31 || tt == GB_CHAT_TEMPLATE_LFM2 ||
                       tt == GB_CHAT_TEMPLATE_LFM25 || tt == GB_CHAT_TEMPLATE_QWEN35;
    const gb_chat_message tool[] = {{"user", "a"}, {"tool", "b"}};
    size_t n = 77;
    char big[4096];  // smollm3 writes its default instructions
    EXPECT_EQ(gb_chat_apply(tt, tool, 2, 1, big, sizeof big, &n), takes ? GB_OK : GB_ERR_INVALID_ARGUMENT)
        << gb_chat_template_name(tt);
    EXPECT_EQ(n == 77u, !takes);
  }
  EXPECT_EQ(n_out, 77u);  // written only on success or "too small"
}

TEST(ChatApply, AlternationWhereTheTemplateRequiresIt) {
  const gb_chat_message assistant_first[] = {{"assistant", "a"}, {"user", "u"}};
  const gb_chat_message two_users[] = {{"user", "u"}, {"user", "v"}};
  const gb_chat_message late_system[] = {{"user", "u"}, {"system", "s"}};
  const gb_chat_message two_systems[] = {{"system", "s"}, {"system", "t"}, {"user", "u"}};
  const gb_chat_message system_then_assistant[] = {{"system", "s"}, {"assistant", "a"}};
  char buf[4096];  // smollm3 writes its default instructions
  size_t n_out = 0;
  for (gb_chat_template t : kAll) {
    const bool strict = t == GB_CHAT_TEMPLATE_LLAMA2 || t == GB_CHAT_TEMPLATE_GEMMA;
    const gb_status want = strict ? GB_ERR_INVALID_ARGUMENT : GB_OK;
    // Qwen3.5's template raises for a system message after the first and
    // without a user query, not for the order of the others.
    const gb_status want_q = t == GB_CHAT_TEMPLATE_QWEN35 ? GB_ERR_INVALID_ARGUMENT : want;
    const char *name = gb_chat_template_name(t);
    EXPECT_EQ(gb_chat_apply(t, assistant_first, 2, 1, buf, sizeof buf, &n_out), want) << name;
    EXPECT_EQ(gb_chat_apply(t, two_users, 2, 1, buf, sizeof buf, &n_out), want) << name;
    EXPECT_EQ(gb_chat_apply(t, late_system, 2, 1, buf, sizeof buf, &n_out), want_q) << name;
    EXPECT_EQ(gb_chat_apply(t, two_systems, 3, 1, buf, sizeof buf, &n_out), want_q) << name;
    EXPECT_EQ(gb_chat_apply(t, system_then_assistant, 2, 1, buf, sizeof buf, &n_out), want_q) << name;
  }
}

// ---- names, end-of-turn strings ------------------------------------------------------

TEST(ChatTemplate, Names) {
  const char *const names[] = {"llama2", "llama3", "chatml", "zephyr", "phi3", "gemma",
                               "qwen2",  "qwen2.5", "qwen3", "phi4-mini", "phi4", "smollm3", "llama3.1",
                               "lfm2",   "lfm2.5",  "qwen3.5", "gemma4"};
  for (size_t i = 0; i < sizeof kAll / sizeof *kAll; i++) {
    EXPECT_STREQ(gb_chat_template_name(kAll[i]), names[i]);
    gb_chat_template t = GB_CHAT_TEMPLATE_NONE;
    ASSERT_EQ(gb_chat_template_from_name(names[i], &t), GB_OK);
    EXPECT_EQ(t, kAll[i]);
  }
  for (int32_t bad : {0, 18, -1, 0x7fffffff}) EXPECT_STREQ(gbt_c_chat_template_name(bad), "unknown");
  gb_chat_template t = GB_CHAT_TEMPLATE_PHI3;
  for (const char *bad : {"", "Llama2", "llama", "chatml ", "unknown", "mistral"})
    EXPECT_EQ(gb_chat_template_from_name(bad, &t), GB_ERR_INVALID_ARGUMENT) << bad;
  EXPECT_EQ(t, GB_CHAT_TEMPLATE_PHI3);
  EXPECT_EQ(gb_chat_template_from_name(nullptr, &t), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_template_from_name("llama3", nullptr), GB_ERR_NULL_POINTER);
}

TEST(ChatTemplate, EndOfTurnStrings) {
  struct Want {
    gb_chat_template t;
    std::vector<std::string> eot;
  };
  const Want wants[] = {
      {GB_CHAT_TEMPLATE_LLAMA2, {"</s>"}},
      {GB_CHAT_TEMPLATE_LLAMA3, {"<|eot_id|>", "<|end_of_text|>"}},
      {GB_CHAT_TEMPLATE_CHATML, {"<|im_end|>"}},
      {GB_CHAT_TEMPLATE_ZEPHYR, {"</s>"}},
      {GB_CHAT_TEMPLATE_PHI3, {"<|end|>", "<|endoftext|>"}},
      {GB_CHAT_TEMPLATE_GEMMA, {"<end_of_turn>", "<eos>"}},
      {GB_CHAT_TEMPLATE_QWEN2, {"<|im_end|>", "<|endoftext|>"}},
      {GB_CHAT_TEMPLATE_QWEN25, {"<|im_end|>", "<|endoftext|>"}},
      {GB_CHAT_TEMPLATE_QWEN3, {"<|im_end|>", "<|endoftext|>"}},
      {GB_CHAT_TEMPLATE_PHI4_MINI, {"<|end|>", "<|endoftext|>"}},
      {GB_CHAT_TEMPLATE_PHI4, {"<|im_end|>", "<|endoftext|>"}},
      {GB_CHAT_TEMPLATE_SMOLLM3, {"<|im_end|>", "<|end_of_text|>"}},
      {GB_CHAT_TEMPLATE_LLAMA31, {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"}},
      {GB_CHAT_TEMPLATE_LFM2, {"<|im_end|>"}},
      {GB_CHAT_TEMPLATE_LFM25, {"<|im_end|>"}},
      {GB_CHAT_TEMPLATE_QWEN35, {"<|im_end|>", "<|endoftext|>"}},
      {GB_CHAT_TEMPLATE_GEMMA4, {"<turn|>", "<eos>", "<|tool_response>"}},
  };
  for (const Want &w : wants) {
    const char *const *s = nullptr;
    size_t n = 0;
    ASSERT_EQ(gb_chat_eot_strings(w.t, &s, &n), GB_OK);
    ASSERT_EQ(n, w.eot.size()) << gb_chat_template_name(w.t);
    for (size_t i = 0; i < n; i++) EXPECT_EQ(s[i], w.eot[i]);
    EXPECT_EQ(s[n], nullptr);
  }
  const char *const *s = nullptr;
  size_t n = 5;
  EXPECT_EQ(gbt_c_chat_eot_strings(0, &s, &n), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gbt_c_chat_eot_strings(18, &s, &n), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gbt_c_chat_eot_strings(-3, &s, &n), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gb_chat_eot_strings(GB_CHAT_TEMPLATE_LLAMA3, nullptr, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_eot_strings(GB_CHAT_TEMPLATE_LLAMA3, &s, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(n, 5u);
}

// ---- detection -----------------------------------------------------------------

// Jinja snippets written for this test, each shaped like its family's
// tokenizer.chat_template (escaped "\n" inside string literals, as the GGUF
// metadata stores them).
const char kJinjaLlama2[] =
    "{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}"
    "{% set msgs = messages[1:] %}{% else %}{% set sys = false %}{% set msgs = messages %}{% endif %}"
    "{% for m in msgs %}{% if loop.index0 == 0 and sys != false %}"
    "{% set text = '<<SYS>>\\n' + sys + '\\n<</SYS>>\\n\\n' + m['content'] %}{% else %}"
    "{% set text = m['content'] %}{% endif %}{% if m['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + text.strip() + ' [/INST]' }}{% else %}"
    "{{ ' ' + text.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
const char kJinjaLlama3[] =
    "{% for m in messages %}{% set text = '<|start_header_id|>' + m['role'] + "
    "'<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.first %}{% set text = bos_token + text %}{% endif %}{{ text }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
const char kJinjaChatml[] =
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char kJinjaQwen2[] =
    "{% for m in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char kJinjaQwen25[] =
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for m in messages %}"
    "{%- if m.role == 'user' or (m.role == 'system' and not loop.first) or m.role == 'assistant' %}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
const char kJinjaZephyr[] =
    "{% for m in messages %}\n{% if m['role'] == 'user' %}\n{{ '<|user|>\\n' + m['content'] + eos_token }}\n"
    "{% elif m['role'] == 'system' %}\n{{ '<|system|>\\n' + m['content'] + eos_token }}\n"
    "{% elif m['role'] == 'assistant' %}\n{{ '<|assistant|>\\n' + m['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
const char kJinjaPhi3[] =
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ '<|system|>\\n' + m['content'] + '<|end|>\\n' }}"
    "{% elif m['role'] == 'user' %}{{ '<|user|>\\n' + m['content'] + '<|end|>\\n' }}"
    "{% elif m['role'] == 'assistant' %}{{ '<|assistant|>\\n' + m['content'] + '<|end|>\\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";
const char kJinjaGemma[] =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set prefix = messages[0]['content'] + '\\n\\n' %}"
    "{% set msgs = messages[1:] %}{% else %}{% set prefix = '' %}{% set msgs = messages %}{% endif %}"
    "{% for m in msgs %}{% if m['role'] == 'assistant' %}{% set role = 'model' %}{% else %}"
    "{% set role = m['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') }}"
    "{{ m['content'] | trim }}{{ '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";

// Phi-4-mini's structure: each role written as '<|' + role + '|>', tool
// definitions between <|tool|> and <|/tool|> in the system turn.
const char kJinjaPhi4Mini[] =
    "{% for m in messages %}{% if m['role'] == 'system' and m['tools'] %}{{ '<|' + m['role'] + '|>' + m['content'] + "
    "'<|tool|>' + m['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + m['role'] + '|>' + m['content'] + '<|end|>' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";
// Phi-4's: ChatML's markers with <|im_sep|>.
const char kJinjaPhi4[] =
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '<|im_sep|>' + m['content'] + '<|im_end|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}";

// SmolLM3's: the system header with the reasoning mode and custom instructions.
const char kJinjaSmolLM3[] =
    "{%- if '/no_think' in system_message -%}{%- set reasoning_mode = '/no_think' -%}{%- endif -%}"
    "{{- '<|im_start|>system\\n' -}}{{- 'Reasoning Mode: ' + reasoning_mode + '\\n\\n' -}}"
    "{{- '## Custom Instructions\\n\\n' -}}{{ '<|im_start|>assistant\\n' + '<think>\\n\\n</think>\\n' }}";

// Qwen3's markers: the last user query found, reasoning split from the answer.
const char kJinjaQwen3[] =
    "{%- set ns = namespace(last_query_index=messages|length - 1) %}{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.reasoning_content is defined %}{%- set r = m.reasoning_content %}{%- endif %}"
    "{%- if loop.index0 > ns.last_query_index %}{{- '<|im_start|>' + m.role + '\\n<think>\\n' + r + '\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}";

// Llama 3.1's markers: the dated system header, tools in the first user turn.
const char kJinjaLlama31[] =
    "{{- bos_token }}{%- if not tools_in_user_message is defined %}{%- set tools_in_user_message = true %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{{- 'Cutting Knowledge Date: December 2023\\n' }}"
    "{{- 'Today Date: ' + date_string + '\\n\\n' }}{{- system_message }}{{- '<|eot_id|>' }}";

// LFM2's markers: the BOS, the tool list in the system turn, its markers.
const char kJinjaLfm2[] =
    "{{- bos_token -}}{%- if tools -%}{%- set ns.system_prompt = ns.system_prompt + \"List of tools: <|tool_list_start|>[\" -%}"
    "{%- endif -%}{{- \"<|im_start|>system\\n\" + ns.system_prompt + \"<|im_end|>\\n\" -}}"
    "{%- set content = \"<|tool_response_start|>\" + content + \"<|tool_response_end|>\" -%}";

// LFM2.5's: the same list without markers, past reasoning dropped.
const char kJinjaLfm25[] =
    "{{- bos_token -}}{%- set keep_past_thinking = keep_past_thinking | default(false) -%}"
    "{%- set ns.system_prompt = ns.system_prompt + \"List of tools: [\" -%}"
    "{{- \"<|im_start|>system\\n\" + ns.system_prompt + \"<|im_end|>\\n\" -}}"
    "{%- set content = content.split(\"</think>\")[-1] | trim -%}";

// Qwen3.5's: Qwen3's reasoning markers with its XML tool calls and images.
const char kJinjaQwen35[] =
    "{%- set image_count = namespace(value=0) %}{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
    "{%- if message.reasoning_content is string %}{%- endif %}{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
    "{{- '<parameter=' + args_name + '>\\n' }}{{- '<|im_start|>' + message.role + '\\n<think>\\n' }}";

// Gemma 4's: its turn markers and the macro that drops the reasoning channel.
const char kJinjaGemma4[] =
    "{%- macro strip_thinking(text) -%}{%- for part in text.split('<channel|>') -%}{%- endfor -%}{%- endmacro -%}"
    "{{- bos_token -}}{{- '<|turn>system\\n' -}}{{- '<|think|>\\n' -}}{{- '<turn|>\\n' -}}"
    "{{- '<|turn>' + role + '\\n' }}{{- strip_thinking(message['content']) -}}";

gb_status detect(const char *text, gb_chat_template *out) { return gb_chat_template_detect(text, strlen(text), out); }

TEST(ChatDetect, EachFamily) {
  struct Case {
    const char *text;
    gb_chat_template want;
  };
  const Case cases[] = {
      {kJinjaLlama2, GB_CHAT_TEMPLATE_LLAMA2}, {kJinjaLlama3, GB_CHAT_TEMPLATE_LLAMA3},
      {kJinjaChatml, GB_CHAT_TEMPLATE_CHATML}, {kJinjaQwen2, GB_CHAT_TEMPLATE_QWEN2},
      {kJinjaQwen25, GB_CHAT_TEMPLATE_QWEN25}, {kJinjaZephyr, GB_CHAT_TEMPLATE_ZEPHYR},
      {kJinjaPhi3, GB_CHAT_TEMPLATE_PHI3},     {kJinjaGemma, GB_CHAT_TEMPLATE_GEMMA},
      {kJinjaQwen3, GB_CHAT_TEMPLATE_QWEN3},   {kJinjaPhi4Mini, GB_CHAT_TEMPLATE_PHI4_MINI},
      {kJinjaPhi4, GB_CHAT_TEMPLATE_PHI4},     {kJinjaSmolLM3, GB_CHAT_TEMPLATE_SMOLLM3},
      {kJinjaLlama31, GB_CHAT_TEMPLATE_LLAMA31}, {kJinjaLfm2, GB_CHAT_TEMPLATE_LFM2},
      {kJinjaLfm25, GB_CHAT_TEMPLATE_LFM25},     {kJinjaQwen35, GB_CHAT_TEMPLATE_QWEN35},
      {kJinjaGemma4, GB_CHAT_TEMPLATE_GEMMA4},
  };
  for (const Case &c : cases) {
    gb_chat_template t = GB_CHAT_TEMPLATE_NONE;
    ASSERT_EQ(detect(c.text, &t), GB_OK) << c.text;
    EXPECT_EQ(t, c.want) << gb_chat_template_name(c.want);
  }
}

TEST(ChatDetect, UnknownIsAStatus) {
  // Relatives that render differently, and texts of no known family.
  const char *const unknown[] = {
      // Mistral: [INST] without <<SYS>>
      "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
      "{% else %}{{ m['content'] + eos_token }}{% endif %}{% endfor %}",
      // A dated Llama system header without Llama 3.1's tool handling
      "{{- bos_token }}{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
      "{{- 'Cutting Knowledge Date: December 2023\\n' }}{{- 'Today Date: ' + date_string + '\\n\\n' }}"
      "{{- system_message }}{{- '<|eot_id|>' }}",
      // ChatML with a default system message of its own
      "{% for m in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\nYou are a helpful AI assistant named Bob.<|im_end|>\\n' }}{% endif %}"
      "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}",
      // ChatML with reasoning blocks (Qwen3 style)
      "{% for m in messages %}{% if m['role'] == 'assistant' and '</think>' in m['content'] %}"
      "{% set c = m['content'].split('</think>')[-1] %}{% else %}{% set c = m['content'] %}{% endif %}"
      "{{ '<|im_start|>' + m['role'] + '\\n' + c + '<|im_end|>\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{% endif %}",
      // Qwen3.5 style: Qwen3's reasoning markers, and images
      "{%- set ns = namespace(last_query_index=0) %}{%- if m.reasoning_content %}<think>{%- endif %}"
      "{%- if c.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{%- endif %}<|im_start|>",
      // SmolLM3 style with today's date in the system header
      "{%- set today = strftime_now('%d %B %Y') -%}{{- '<|im_start|>system\\n' -}}{{- 'Today Date: ' + today -}}"
      "{{- 'Reasoning Mode: ' + reasoning_mode -}}{{- '## Custom Instructions' -}}{{- '/no_think <think>' -}}",
      // Phi-3 style without a system turn (assistant header after each user turn)
      "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
      "{{ '<|user|>\\n' + m['content'] + '<|end|>\\n<|assistant|>\\n' }}{% else %}"
      "{{ m['content'] + '<|end|>\\n' }}{% endif %}{% endfor %}",
      // Vicuna-style plain text
      "{% for m in messages %}{% if m['role'] == 'user' %}USER: {{ m['content'] }}\n"
      "{% else %}ASSISTANT: {{ m['content'] }}</s>{% endif %}{% endfor %}",
      // Markers of two families but not all of either one's
      "<|user|> <|assistant|>",
      "<start_of_turn>",
      "[INST] <<SYS>>",
      "x",
  };
  for (const char *text : unknown) {
    gb_chat_template t = GB_CHAT_TEMPLATE_NONE;
    EXPECT_EQ(detect(text, &t), GB_ERR_UNAVAILABLE) << text;
    EXPECT_EQ(t, GB_CHAT_TEMPLATE_NONE);
  }
}

TEST(ChatDetect, ReadsOnlyLenBytes) {
  // The text is a byte range, not a C string: markers past len do not count,
  // bytes after a NUL inside it do.
  gb_chat_template t = GB_CHAT_TEMPLATE_NONE;
  const std::string gemma = "{{ '<start_of_turn>' }}{{ '<end_of_turn>' }}";
  EXPECT_EQ(gb_chat_template_detect(gemma.data(), gemma.size() - 6, &t), GB_ERR_UNAVAILABLE);
  EXPECT_EQ(gb_chat_template_detect(gemma.data(), gemma.size(), &t), GB_OK);
  EXPECT_EQ(t, GB_CHAT_TEMPLATE_GEMMA);
  std::string with_nul = std::string("{{ '<start_of_turn>' }}") + '\0' + "{{ '<end_of_turn>' }}";
  t = GB_CHAT_TEMPLATE_NONE;
  EXPECT_EQ(gb_chat_template_detect(with_nul.data(), with_nul.size(), &t), GB_OK);
  EXPECT_EQ(t, GB_CHAT_TEMPLATE_GEMMA);
  // Every prefix of a real snippet: no read past len (ASan), a status or the family.
  const std::string llama3 = kJinjaLlama3;
  for (size_t n = 0; n <= llama3.size(); n++) {
    std::vector<char> exact(llama3.begin(), llama3.begin() + (ptrdiff_t)n);
    const gb_status s = gb_chat_template_detect(exact.empty() ? "" : exact.data(), n, &t);
    ASSERT_TRUE(s == GB_OK || s == GB_ERR_UNAVAILABLE) << n;
  }
}

TEST(ChatDetect, Misuse) {
  gb_chat_template t = GB_CHAT_TEMPLATE_NONE;
  EXPECT_EQ(gb_chat_template_detect(nullptr, 5, &t), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_template_detect(kJinjaChatml, strlen(kJinjaChatml), nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_chat_template_detect(nullptr, 0, &t), GB_ERR_UNAVAILABLE);
  EXPECT_EQ(gb_chat_template_detect("", 0, &t), GB_ERR_UNAVAILABLE);
  EXPECT_EQ(t, GB_CHAT_TEMPLATE_NONE);
}

TEST(ChatDetect, DetectedTemplateRendersTheFamily) {
  // Detection then rendering, as a chat front end does.
  gb_chat_template t = GB_CHAT_TEMPLATE_NONE;
  ASSERT_EQ(detect(kJinjaLlama3, &t), GB_OK);
  const char *const *eot = nullptr;
  size_t n_eot = 0;
  ASSERT_EQ(gb_chat_eot_strings(t, &eot, &n_eot), GB_OK);
  const std::string text = apply(t, kTwoTurns, 1);
  EXPECT_NE(text.find(eot[0]), std::string::npos);
}

// ---- streaming UTF-8 --------------------------------------------------------------

std::string push(gb_utf8_stream &s, const std::string &in) {
  std::vector<char> out(GB_UTF8_STREAM_CAPACITY(in.size()));
  size_t n = 0;
  EXPECT_EQ(gb_utf8_stream_push(&s, in.data(), in.size(), out.data(), out.size(), &n), GB_OK);
  return std::string(out.data(), n);
}

std::string flush(gb_utf8_stream &s) {
  char out[GB_UTF8_STREAM_CAPACITY(0)];
  size_t n = 0;
  EXPECT_EQ(gb_utf8_stream_flush(&s, out, sizeof out, &n), GB_OK);
  return std::string(out, n);
}

std::string whole(const std::string &in) {
  gb_utf8_stream s;
  gb_utf8_stream_init(&s);
  std::string r = push(s, in);
  return r + flush(s);
}

// Independent check of "only complete sequences": a chunk is well-formed
// UTF-8 by itself (Table 3-7 ranges, written out again here).
const std::string kFffd = "\xef\xbf\xbd";

TEST(Utf8Stream, AsciiAndWholeCharactersPassThrough) {
  const std::string text = "plain ASCII, \xc3\xa9t\xc3\xa9 \xe2\x82\xac 20 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf end";
  EXPECT_EQ(whole(text), text);
  EXPECT_EQ(whole(""), "");
  EXPECT_EQ(whole(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Utf8Stream, SplitEverywhere) {
  // 1-, 2-, 3- and 4-byte characters; every way of cutting it into pushes.
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";  // a é € 😀 z: 11 bytes
  const size_t n = text.size();
  for (uint32_t cuts = 0; cuts < (1u << (n - 1)); cuts++) {
    gb_utf8_stream s;
    gb_utf8_stream_init(&s);
    std::string got;
    size_t start = 0;
    for (size_t i = 1; i <= n; i++) {
      if (i == n || (cuts >> (i - 1)) & 1u) {
        const std::string piece = push(s, text.substr(start, i - start));
        ASSERT_TRUE(gbt::utf8_well_formed(piece)) << "cuts " << cuts;
        got += piece;
        start = i;
      }
    }
    ASSERT_EQ(flush(s), "") << "cuts " << cuts;
    ASSERT_EQ(got, text) << "cuts " << cuts;
  }
}

TEST(Utf8Stream, EmojiHeldUntilComplete) {
  const std::string emoji = "\xf0\x9f\xa6\x99";  // U+1F999
  gb_utf8_stream s;
  gb_utf8_stream_init(&s);
  EXPECT_EQ(push(s, "x" + emoji.substr(0, 1)), "x");
  EXPECT_EQ(push(s, emoji.substr(1, 1)), "");
  EXPECT_EQ(push(s, ""), "");
  EXPECT_EQ(push(s, emoji.substr(2, 1)), "");
  EXPECT_EQ(push(s, emoji.substr(3, 1) + "y"), emoji + "y");
  EXPECT_EQ(flush(s), "");
}

TEST(Utf8Stream, IllFormedBecomesReplacement) {
  struct Case {
    std::string in, want;
  };
  const std::string R = kFffd;
  const Case cases[] = {
      {"\x80", R},                                   // lone continuation
      {"a\xbf\x80z", "a" + R + R + "z"},             // two of them
      {"\xc0\xaf", R + R},                           // overlong '/'
      {"\xc1\xbf", R + R},                           // overlong
      {"\xe0\x80\x80", R + R + R},                   // overlong 3-byte
      {"\xe0\x9f\xbf", R + R + R},                   // overlong 3-byte
      {"\xed\xa0\x80", R + R + R},                   // surrogate
      {"\xf0\x80\x80\x80", R + R + R + R},           // overlong 4-byte
      {"\xf4\x90\x80\x80", R + R + R + R},           // above U+10FFFF
      {"\xf5\x80", R + R},                           // invalid lead
      {"\xff", R},
      {"\xe2\x82" "A", R + "A"},                     // cut short by ASCII
      {"\xf0\x9f\x98" "\xc3\xa9", R + "\xc3\xa9"},  // cut short by a new lead
      {"\xe2\xe2\x82\xac", R + "\xe2\x82\xac"},
      // Unicode's maximal-subpart example (chapter 3, U+FFFD substitution):
      {"\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64", "a" + R + R + R + "b" + R + "c" + R + R + "d"},
  };
  for (const Case &c : cases) {
    EXPECT_EQ(whole(c.in), c.want);
    // The same byte by byte.
    gb_utf8_stream s;
    gb_utf8_stream_init(&s);
    std::string got;
    for (char ch : c.in) got += push(s, std::string(1, ch));
    got += flush(s);
    EXPECT_EQ(got, c.want);
  }
}

// A whole-buffer decoder written differently, from the definitions: at each
// position either the shortest well-formed prefix is a whole character, or
// the maximal subpart is the longest prefix (up to 3 bytes) that tail bytes
// could still complete; it becomes one U+FFFD. Only a sequence's second byte
// has a narrowed range, so completing with 0x80 tails is enough to test.
bool completable(const std::string &prefix) {
  return gbt::utf8_well_formed(prefix + "\x80") || gbt::utf8_well_formed(prefix + "\x80\x80");
}

std::string reference_replace(const std::string &in) {
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    size_t complete = 0;
    for (size_t k = 1; k <= 4 && i + k <= in.size(); k++)
      if (gbt::utf8_well_formed(in.substr(i, k))) {
        complete = k;
        break;
      }
    if (complete) {
      out += in.substr(i, complete);
      i += complete;
      continue;
    }
    size_t part = 1;
    for (size_t k = 2; k <= 3 && i + k <= in.size() && completable(in.substr(i, k)); k++) part = k;
    out += kFffd;
    i += part;
  }
  return out;
}

TEST(Utf8Stream, RandomBytesRandomSplits) {
  const uint32_t seed = 1234567u;
  std::mt19937 rng(seed);
  // Bytes biased towards the interesting ones: leads, tails, boundaries.
  const unsigned char pool[] = {0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf,
                                0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff};
  for (int iter = 0; iter < 300; iter++) {
    std::string in(rng() % 24, '\0');
    for (char &c : in) c = (char)pool[rng() % sizeof pool];
    const std::string want = reference_replace(in);
    gb_utf8_stream s;
    gb_utf8_stream_init(&s);
    std::string got;
    for (size_t i = 0; i < in.size();) {
      const size_t k = std::min(in.size() - i, (size_t)(rng() % 5));
      const std::string piece = push(s, in.substr(i, k));
      ASSERT_TRUE(gbt::utf8_well_formed(piece)) << "seed " << seed << " iter " << iter;
      got += piece;
      i += k;
    }
    got += flush(s);
    ASSERT_EQ(got, want) << "seed " << seed << " iter " << iter;
  }
}

TEST(Utf8Stream, FlushAndReuse) {
  gb_utf8_stream s;
  gb_utf8_stream_init(&s);
  EXPECT_EQ(flush(s), "");
  EXPECT_EQ(push(s, "ok\xe2\x82"), "ok");
  EXPECT_EQ(flush(s), kFffd);  // cut short by the end
  EXPECT_EQ(flush(s), "");
  EXPECT_EQ(push(s, "\xac"), kFffd);  // the held bytes are gone: a lone tail
  EXPECT_EQ(push(s, "\xf0\x9f"), "");
  gb_utf8_stream_init(&s);  // restart discards what was held
  EXPECT_EQ(push(s, "\x98\x80"), kFffd + kFffd);
  EXPECT_EQ(flush(s), "");
}

TEST(Utf8Stream, BufferTooSmallChangesNothing) {
  gb_utf8_stream s;
  gb_utf8_stream_init(&s);
  EXPECT_EQ(push(s, "\xe2\x82"), "");
  char out[16];
  memset(out, 0x5a, sizeof out);
  size_t n = 0;
  // "\xac" completes €; "\xff" then adds a replacement: 6 bytes.
  EXPECT_EQ(gb_utf8_stream_push(&s, "\xac\xff", 2, out, 5, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 6u);
  EXPECT_EQ(gb_utf8_stream_push(&s, "\xac\xff", 2, nullptr, 0, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 6u);
  for (char c : out) EXPECT_EQ(c, '\x5a');
  ASSERT_EQ(gb_utf8_stream_push(&s, "\xac\xff", 2, out, 6, &n), GB_OK);
  EXPECT_EQ(std::string(out, n), "\xe2\x82\xac" + kFffd);
  EXPECT_EQ(out[6], '\x5a');
  // Flush: 3 bytes for a held sequence, kept when the buffer is too small.
  EXPECT_EQ(push(s, "\xf0"), "");
  EXPECT_EQ(gb_utf8_stream_flush(&s, out, 2, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(gb_utf8_stream_flush(&s, nullptr, 0, &n), GB_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(push(s, "\x9f\x98\x80"), "\xf0\x9f\x98\x80");
  // Nothing to write needs no buffer.
  EXPECT_EQ(gb_utf8_stream_flush(&s, nullptr, 0, &n), GB_OK);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(gb_utf8_stream_push(&s, "\xe2", 1, nullptr, 0, &n), GB_OK);
  EXPECT_EQ(n, 0u);
}

TEST(Utf8Stream, CapacityMacroSuffices) {
  // Worst cases: every byte a replacement, and a held prefix broken by one.
  gb_utf8_stream s;
  gb_utf8_stream_init(&s);
  EXPECT_EQ(push(s, "\xf0\x9f\x98"), "");
  const std::string bad(10, '\xff');
  std::vector<char> out(GB_UTF8_STREAM_CAPACITY(bad.size()));
  size_t n = 0;
  ASSERT_EQ(gb_utf8_stream_push(&s, bad.data(), bad.size(), out.data(), out.size(), &n), GB_OK);
  EXPECT_EQ(n, 33u);
  EXPECT_LE(n, GB_UTF8_STREAM_CAPACITY(bad.size()));
}

TEST(Utf8Stream, Misuse) {
  gb_utf8_stream_init(nullptr);  // no-op
  gb_utf8_stream s;
  gb_utf8_stream_init(&s);
  char out[8];
  size_t n = 99;
  EXPECT_EQ(gb_utf8_stream_push(nullptr, "a", 1, out, sizeof out, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_utf8_stream_push(&s, "a", 1, out, sizeof out, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_utf8_stream_push(&s, nullptr, 1, out, sizeof out, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_utf8_stream_push(&s, "a", 1, nullptr, 4, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_utf8_stream_flush(nullptr, out, sizeof out, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_utf8_stream_flush(&s, out, sizeof out, nullptr), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_utf8_stream_flush(&s, nullptr, 3, &n), GB_ERR_NULL_POINTER);
  EXPECT_EQ(n, 99u);
  EXPECT_EQ(gb_utf8_stream_push(&s, nullptr, 0, out, sizeof out, &n), GB_OK);
  EXPECT_EQ(n, 0u);
  // A struct gb_utf8_stream_init never saw.
  gb_utf8_stream junk;
  for (int fill : {0x00, 0xff, 0x5a}) {
    memset(&junk, fill, sizeof junk);
    EXPECT_EQ(gb_utf8_stream_push(&junk, "a", 1, out, sizeof out, &n), GB_ERR_BAD_STATE) << fill;
    EXPECT_EQ(gb_utf8_stream_flush(&junk, out, sizeof out, &n), GB_ERR_BAD_STATE) << fill;
  }
}

// ---- no allocation, thread safety ----------------------------------------------------

TEST(ChatApply, NoAllocation) {
  char buf[1024];
  size_t n = 0;
  gb_chat_template t = GB_CHAT_TEMPLATE_NONE;
  const char *const *eot = nullptr;
  gb_utf8_stream s;
  gbt::alloc_count_start();
  for (gb_chat_template tt : kAll) {
    (void)gb_chat_apply(tt, kTwoTurnsSystem, 4, 1, buf, sizeof buf, &n);
    (void)gb_chat_apply(tt, kTwoTurns, 3, 0, nullptr, 0, &n);
    (void)gb_chat_eot_strings(tt, &eot, &n);
    (void)gb_chat_template_from_name(gb_chat_template_name(tt), &t);
  }
  (void)gb_chat_template_detect(kJinjaQwen25, strlen(kJinjaQwen25), &t);
  (void)gb_chat_template_detect(kJinjaZephyr, strlen(kJinjaZephyr), &t);
  gb_utf8_stream_init(&s);
  (void)gb_utf8_stream_push(&s, "\xe2\x82\xac\xf0\x9f", 5, buf, sizeof buf, &n);
  (void)gb_utf8_stream_flush(&s, buf, sizeof buf, &n);
  EXPECT_EQ(gbt::alloc_count_stop(), 0u);
}

TEST(ChatApply, ConcurrentCallsAgree) {
  if (!gbt::threads_available()) GTEST_SKIP() << "threads unavailable";
  std::vector<std::string> want;
  for (gb_chat_template t : kAll) want.push_back(apply(t, kTwoTurnsSystem, 1));
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; w++) {
    threads.emplace_back([&, w] {
      char buf[1024];
      for (int iter = 0; iter < 200; iter++) {
        const size_t k = (size_t)(iter + w) % want.size();
        size_t n = 0;
        if (gb_chat_apply(kAll[k], kTwoTurnsSystem, 4, 1, buf, sizeof buf, &n) != GB_OK ||
            std::string(buf, n) != want[k])
          bad[(size_t)w]++;
      }
    });
  }
  for (std::thread &th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

}  // namespace
