// test_cli_chat.cpp — `gearbx chat` through a pipe: the first turn feeds
// the llama2 template's exact text, later turns only what the KV cache does
// not hold (the render minus the previous render and the reply), the cache
// grows across turns and /reset empties it, replies end at the model's own
// end (EOS / BOS) before the token limit, tools are rendered and every reply
// is a call whose parsed form is printed, and misuse exits with one error
// line.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

using Out = gbt::CliOut;
using gbt::count_lines;
using gbt::slurp;
using gbt::write_temp;
Out cli(const std::string &args, const std::string &in = "") { return gbt::run_cli(args, in); }

// stories5M (SentencePiece vocabulary from its GGUF, no chat template) as a
// .gbx, converted once per process through the tool.
const std::string &stories_gbx() {
  static std::string path;
  if (path.empty()) {
    const std::string p = gbt::temp_dir() + "/chat-stories5M.gbx";
    const Out r = cli("convert " + gbt::shared_path("fixtures/stories5M-Q8_0.gguf") + " -o " + p +
                      " --quiet --page-align 4096");
    EXPECT_EQ(r.status, 0) << r.err;
    path = p;
  }
  return path;
}

// What --show-prompt reports: per turn the fed text, and how the reply ended.
struct Turn {
  std::string fed;
  size_t fed_tokens = 0;
  std::string end;  // eog, bos, stop-string, limit, context-full
  unsigned kv = 0;
  bool reset_before = false;  // a "[reset, kv=0 tokens]" line came before this turn
};

std::vector<Turn> parse_turns(const std::string &err, int *resets_seen) {
  std::vector<Turn> turns;
  const std::string open = "=== fed (", close = "\n=== end fed ===\n";
  size_t at = 0;
  bool pending_reset = false;
  *resets_seen = 0;
  for (;;) {
    const size_t f = err.find(open, at), rs = err.find("[reset, kv=0 tokens]\n", at);
    if (rs != std::string::npos && (f == std::string::npos || rs < f)) {
      pending_reset = true;
      ++*resets_seen;
      at = rs + 1;
      continue;
    }
    if (f == std::string::npos) break;
    Turn t;
    t.reset_before = pending_reset;
    pending_reset = false;
    t.fed_tokens = strtoul(err.c_str() + f + open.size(), nullptr, 10);
    const size_t body = err.find(" tokens) ===\n", f);
    if (body == std::string::npos) break;
    const size_t b = body + strlen(" tokens) ===\n");
    const size_t e = err.find(close, b);
    if (e == std::string::npos) break;
    t.fed = err.substr(b, e - b);
    const size_t end = err.find("[end: ", e);
    if (end == std::string::npos) break;
    const size_t comma = err.find(", kv=", end);
    if (comma == std::string::npos) break;
    t.end = err.substr(end + 6, comma - end - 6);
    t.kv = (unsigned)strtoul(err.c_str() + comma + 5, nullptr, 10);
    turns.push_back(t);
    at = comma;
  }
  return turns;
}

std::string render(const std::vector<gb_chat_message> &m) {
  size_t need = 0;
  EXPECT_EQ(gb_chat_apply(GB_CHAT_TEMPLATE_LLAMA2, m.data(), m.size(), 1, nullptr, 0, &need), GB_ERR_BUFFER_TOO_SMALL);
  std::vector<char> buf(need);
  size_t n = 0;
  EXPECT_EQ(gb_chat_apply(GB_CHAT_TEMPLATE_LLAMA2, m.data(), m.size(), 1, buf.data(), buf.size(), &n), GB_OK);
  return std::string(buf.data(), n);
}

std::string trim(const std::string &s) {
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1);
}

const char kSystem[] = "You tell stories.";
// A first message after which the greedy reply ends on its own (BOS, as
// llama2.c's models end a story) within -n 200; measured with the portable
// kernels (--deterministic), so the same on every CPU.
const char kUser1[] = "Sara saw a big dog. The dog was nice. Sara and the dog became friends and played all day.";
const char kUser2[] = "Now one about a dog.";

TEST(CliChat, Llama2TurnsFeedOnlyTheNewTextAndKeepTheCache) {
  const std::string in = write_temp("chat-in.txt", std::string(kUser1) + "\n" + kUser2 + "\n/reset\n" + kUser1 + "\n");
  const Out r = cli("chat -m " + stories_gbx() + " --template llama2 --system '" + kSystem +
                        "' --temp 0 -n 200 --ctx 512 --deterministic --show-prompt",
                    in);
  ASSERT_EQ(r.status, 0) << r.err;
  int resets = 0;
  const std::vector<Turn> t = parse_turns(r.err, &resets);
  ASSERT_EQ(t.size(), 3u) << r.err;
  EXPECT_EQ(resets, 1) << r.err;

  // Turn 1: the whole render, exactly the llama2 template's text.
  const std::string r1 =
      "<s>[INST] <<SYS>>\nYou tell stories.\n<</SYS>>\n\n"
      "Sara saw a big dog. The dog was nice. Sara and the dog became friends and played all day. [/INST]";
  EXPECT_EQ(t[0].fed, r1);
  const gb_chat_message m1[] = {{"system", kSystem}, {"user", kUser1}};
  EXPECT_EQ(render(std::vector<gb_chat_message>(m1, m1 + 2)), r1);
  EXPECT_FALSE(t[0].reset_before);

  // stdout is reply 1, reply 2 and reply 3 (turn 3 repeats turn 1 after
  // /reset, greedy: the same reply), each followed by a newline; a reply
  // may hold newlines itself, so take the longest reply 1 that starts and
  // ends stdout.
  const std::string &out = r.out;
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out.back(), '\n');
  std::string reply1;
  bool found = false;
  for (size_t nl = out.find('\n'); nl != std::string::npos; nl = out.find('\n', nl + 1)) {
    const std::string cand = out.substr(0, nl);
    if (2 * cand.size() + 3 > out.size()) break;
    if (out.compare(out.size() - cand.size() - 2, cand.size() + 2, "\n" + cand + "\n") == 0) {
      reply1 = cand;
      found = true;
    }
  }
  ASSERT_TRUE(found) << "turn 3's reply is not turn 1's:\n" << out;
  // Turn 2 is fed render 2 minus render 1 minus reply 1 (where the template
  // trims the reply's white space: what follows the trimmed reply).
  const gb_chat_message m2[] = {{"system", kSystem}, {"user", kUser1}, {"assistant", reply1.c_str()}, {"user", kUser2}};
  const std::string r2 = render(std::vector<gb_chat_message>(m2, m2 + 4));
  ASSERT_EQ(r2.compare(0, r1.size(), r1), 0) << r2;
  std::string expect2;
  if (r2.compare(r1.size(), reply1.size(), reply1) == 0) {
    expect2 = r2.substr(r1.size() + reply1.size());
  } else {
    const size_t at = r2.find(trim(reply1), r1.size());
    ASSERT_NE(at, std::string::npos) << r2;
    expect2 = r2.substr(at + trim(reply1).size());
  }
  EXPECT_EQ(t[1].fed, expect2);
  // Literally: the end of the answer's turn and the next [INST] turn.
  EXPECT_EQ(t[1].fed, std::string(" </s><s>[INST] ") + kUser2 + " [/INST]");
  EXPECT_FALSE(t[1].reset_before);
  EXPECT_LT(t[1].fed_tokens, t[0].fed_tokens);  // only the suffix was tokenized

  // The cache is kept: turn 2 adds its fed tokens and its reply to turn 1's
  // (a reply cut at the limit leaves its last token pending, not cached).
  EXPECT_GT(t[0].kv, t[0].fed_tokens);
  EXPECT_GT(t[1].kv, t[0].kv);
  if (t[1].end == "limit") {
    EXPECT_EQ(t[1].kv, t[0].kv + t[1].fed_tokens + 200 - 1);
  }

  // /reset empties the cache: turn 3 starts over with the full render and
  // (greedy) answers as turn 1 did.
  EXPECT_TRUE(t[2].reset_before);
  EXPECT_EQ(t[2].fed, r1);
  EXPECT_EQ(t[2].kv, t[0].kv);
  EXPECT_EQ(t[2].end, t[0].end);

  // At least one reply ended on its own (not at the -n limit).
  int natural = 0;
  for (const Turn &x : t) {
    EXPECT_TRUE(x.end == "eog" || x.end == "bos" || x.end == "stop-string" || x.end == "limit") << x.end;
    natural += x.end == "eog" || x.end == "bos" || x.end == "stop-string";
  }
  EXPECT_GE(natural, 1) << r.err;
}

// A full context resets the conversation: the turn that does not fit is
// fed again alone, as a new conversation's first turn.
TEST(CliChat, FullContextStartsOver) {
  const std::string in = write_temp("chat-full.txt", "Hi\nMore\n");
  const Out r = cli("chat -m " + stories_gbx() + " --template llama2 --temp 0 -n 75 --ctx 100 --deterministic --show-prompt", in);
  ASSERT_EQ(r.status, 0) << r.err;
  int resets = 0;
  const std::vector<Turn> t = parse_turns(r.err, &resets);
  ASSERT_EQ(t.size(), 2u) << r.err;
  EXPECT_EQ(t[0].fed, "<s>[INST] Hi [/INST]");
  EXPECT_EQ(t[0].end, "limit") << r.err;
  EXPECT_EQ(t[0].kv, t[0].fed_tokens + 75 - 1);
  EXPECT_NE(r.err.find("gearbx chat: context full"), std::string::npos) << r.err;
  EXPECT_EQ(t[1].fed, "<s>[INST] More [/INST]");
  EXPECT_LE(t[1].kv, 100u);
  EXPECT_GE(count_lines(r.out), 2u) << r.out;  // two replies (each may hold newlines)
}

// Tool definitions with bounded arguments, for the qwen2 and llama3 fixtures.
const char kToolsJson[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 8}}, \"required\": [\"city\"]}}}, "
    "{\"name\": \"set_alarm\", \"parameters\": {\"type\": \"object\", \"properties\": {\"hour\": "
    "{\"type\": \"integer\", \"minimum\": 0}}, \"required\": [\"hour\"]}}]";

// The "tool_call: " lines of an output.
std::vector<std::string> tool_call_lines(const std::string &out) {
  std::vector<std::string> lines;
  for (size_t at = out.find("tool_call: "); at != std::string::npos; at = out.find("tool_call: ", at + 1)) {
    if (at > 0 && out[at - 1] != '\n') continue;
    lines.push_back(out.substr(at, out.find('\n', at) - at));
  }
  return lines;
}

TEST(CliChat, ToolsAreRenderedCalledAndTheResultGoesBack) {
  const std::string tools = write_temp("chat-tools.json", kToolsJson);
  const std::string in = write_temp("chat-tools.txt", "Weather in Oslo?\n/tool {\"temp\": 21}\n");
  const Out r = cli("chat -m " + gbt::shared_path("fixtures/qwen2-tiny-Q4_K_M.gguf") + " --template qwen2.5 --tools " +
                        tools + " --tool-choice required --temp 1 --seed 3 --ctx 2048 -n 300 --show-prompt",
                    in);
  ASSERT_EQ(r.status, 0) << r.err;
  // The tools in the system turn; the result in a user turn.
  EXPECT_NE(r.err.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>"),
            std::string::npos)
      << r.err;
  // Both replies are calls, each printed on one line.
  const std::vector<std::string> calls = tool_call_lines(r.out);
  ASSERT_GE(calls.size(), 2u) << r.out;
  for (const std::string &c : calls)
    EXPECT_TRUE(c.rfind("tool_call: {\"name\": \"get_weather\", \"arguments\": {", 0) == 0 ||
                c.rfind("tool_call: {\"name\": \"set_alarm\", \"arguments\": {", 0) == 0)
        << c;
  // run: one user message, rendered by the model's family template.
  const Out q = cli("run -m " + gbt::shared_path("fixtures/llama3-tiny-Q4_K_M.gguf") + " -p \"Wake me at 7\" --tools " +
                    tools + " --template llama3.1 --tool-choice required --temp 1 --seed 4 --ctx 2048 -n 300 --quiet");
  ASSERT_EQ(q.status, 0) << q.err;
  const std::vector<std::string> one = tool_call_lines(q.out);
  ASSERT_EQ(one.size(), 1u) << q.out;
  EXPECT_EQ(one[0].rfind("tool_call: {\"name\": \"", 0), 0u) << one[0];
  // Misuse: a template without tool calls, a malformed file, with --grammar.
  const std::string bad = write_temp("chat-tools-bad.json", "[{\"name\": \"a b\"}]");
  const std::string m = gbt::shared_path("fixtures/qwen2-tiny-Q4_K_M.gguf");
  for (const std::string &args : {"chat -m " + m + " --template chatml --tools " + tools,
                                   "chat -m " + m + " --template qwen2.5 --tools " + bad,
                                   "chat -m " + m + " --template qwen2.5 --tool-choice sometimes --tools " + tools,
                                   "run -m " + m + " -p x --template qwen2.5 --tools " + tools + " --grammar " + tools}) {
    const Out e = cli(args, in);
    EXPECT_EQ(e.status, 1) << args;
    EXPECT_NE(e.err.find("error"), std::string::npos) << args << ": " << e.err;
  }
}

TEST(CliChat, MisuseExitsWithOneErrorLine) {
  const std::string in = write_temp("chat-misuse.txt", "Hello\n");
  struct Case {
    std::string args, must;
  } cases[] = {
      {"chat", "-m"},
      {"chat -m " + stories_gbx() + " --template frobnicate", "frobnicate"},
      {"chat -m " + stories_gbx(), "--template"},  // no chat template in the file
      {"chat -m " + stories_gbx() + " --template llama2 --frobnicate", "--frobnicate"},
      {"chat -m " + gbt::temp_dir() + "/missing.gbx --template llama2", "missing.gbx"},
      {"chat -m " + stories_gbx() + " --template llama2 -n x", "-n"},
  };
  for (const Case &c : cases) {
    const Out r = cli(c.args, in);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
    EXPECT_NE(r.err.find("error"), std::string::npos) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.must), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << c.args << ": " << r.err;
  }
}

}  // namespace
