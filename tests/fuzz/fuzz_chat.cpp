// fuzz_chat.cpp — fuzz target for the chat templates (src/chat.cpp) through
// the public API: gb_chat_template_detect on arbitrary template text, and
// gb_chat_apply on arbitrary messages, template ids, assistant-prompt flags
// and capacities, and gb_chat_eot_strings.
// Input: byte 0 is the template id (0 .. 254, and 255 for
// GB_CHAT_TEMPLATE_MAX_ENUM, so values outside the list are tried too; a
// negative value is outside the enum's range, the caller's undefined
// behaviour, so it is not passed), byte 1 the flags (bits 0-1: the
// add_assistant_prompt value 0, 1, 2 or -1; bit 2: also ask with a capacity
// one byte short), the rest NUL-separated strings read as role, content,
// role, content, ... (a one-byte role "s", "u", "a" or "t" stands for
// "system", "user", "assistant", "tool", so valid conversations are easy to reach; any other
// role is passed as it is). The whole input is also the text given to
// gb_chat_template_detect.
// Checks: every status is one the header lists; detection's result is a
// template with a name and end-of-turn strings; the size query, the exact
// capacity and a capacity one short agree (nothing written when too small,
// NUL at the end, no byte past it); the rendering is deterministic; valid
// UTF-8 contents give valid UTF-8 text (white space trimming never splits a
// character); each untrimmed content appears in the text. Any failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "gearbx.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_chat";
#include "fuzz/fuzz_util.h"
#include "utf8_check.h"

namespace {

void check_template(gb_chat_template t) {
  const char *name = gb_chat_template_name(t);
  if (!name || strcmp(name, "unknown") == 0) fuzz_fail("a valid template has no name");
  gb_chat_template back = GB_CHAT_TEMPLATE_NONE;
  if (gb_chat_template_from_name(name, &back) != GB_OK || back != t) fuzz_fail("name does not map back");
  const char *const *eot = nullptr;
  size_t n = 0;
  if (gb_chat_eot_strings(t, &eot, &n) != GB_OK || !eot || n == 0 || eot[n] != nullptr) fuzz_fail("eot strings");
  for (size_t i = 0; i < n; i++)
    if (!eot[i] || !eot[i][0]) fuzz_fail("empty eot string");
}

bool known_template(int32_t v) { return v >= GB_CHAT_TEMPLATE_LLAMA2 && v <= GB_CHAT_TEMPLATE_GEMMA4; }

// Templates that strip contents (llama2, llama3, gemma, qwen3.5; llama3.1,
// which also writes a tool's result as a JSON string; lfm2.5, which strips
// the answers of past assistant turns; gemma4, which also drops the
// reasoning channel of assistant turns).
bool trims(int32_t v) {
  return v == GB_CHAT_TEMPLATE_LLAMA2 || v == GB_CHAT_TEMPLATE_LLAMA3 || v == GB_CHAT_TEMPLATE_GEMMA ||
         v == GB_CHAT_TEMPLATE_LLAMA31 || v == GB_CHAT_TEMPLATE_QWEN35 || v == GB_CHAT_TEMPLATE_LFM25 ||
         v == GB_CHAT_TEMPLATE_GEMMA4;
}

// Templates with a turn for a tool's result.
bool tool_role(int32_t v) {
  return v == GB_CHAT_TEMPLATE_QWEN25 || v == GB_CHAT_TEMPLATE_QWEN3 || v == GB_CHAT_TEMPLATE_SMOLLM3 ||
         v == GB_CHAT_TEMPLATE_LLAMA31 || v == GB_CHAT_TEMPLATE_LFM2 || v == GB_CHAT_TEMPLATE_LFM25 ||
         v == GB_CHAT_TEMPLATE_QWEN35;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  g_in = data;
  g_in_size = size;
  // Detection over the whole input as template text.
  const gb_chat_template kUnset = (gb_chat_template)0x7ffffff0;
  gb_chat_template found = kUnset;
  const gb_status ds = gb_chat_template_detect(reinterpret_cast<const char *>(data), size, &found);
  if (ds == GB_OK) {
    if (!known_template((int32_t)found)) fuzz_fail("detect returned no template");
    check_template(found);
  } else if (ds != GB_ERR_UNAVAILABLE || found != kUnset) {
    fuzz_fail("detect: unexpected status or output written on failure");
  }
  if (size < 2) return 0;

  const int32_t tv = data[0] == 255 ? (int32_t)GB_CHAT_TEMPLATE_MAX_ENUM : (int32_t)data[0];
  const gb_chat_template t = (gb_chat_template)tv;
  static const int kGen[4] = {0, 1, 2, -1};
  const int gen = kGen[data[1] & 3];
  const bool short_cap = (data[1] & 4) != 0;
  // NUL-separated strings: role, content, role, content, ...
  std::vector<std::string> parts;
  std::string cur;
  for (size_t i = 2; i < size; i++) {
    if (data[i] == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += (char)data[i];
    }
  }
  parts.push_back(cur);
  if (parts.size() % 2) parts.emplace_back();
  std::vector<gb_chat_message> msgs;
  for (size_t i = 0; i < parts.size(); i += 2) {
    std::string &r = parts[i];
    if (r == "s") r = "system";
    else if (r == "u") r = "user";
    else if (r == "a") r = "assistant";
    else if (r == "t") r = "tool";
    msgs.push_back(gb_chat_message{r.c_str(), parts[i + 1].c_str()});
  }
  if (known_template(tv)) check_template(t);
  else {
    const char *const *eot = nullptr;
    size_t n = 0;
    if (gb_chat_eot_strings(t, &eot, &n) != GB_ERR_INVALID_ARGUMENT) fuzz_fail("eot strings of an unknown template");
    if (strcmp(gb_chat_template_name(t), "unknown") != 0) fuzz_fail("an unknown template has a name");
  }

  // Size query.
  size_t need = 0;
  const gb_status qs = gb_chat_apply(t, msgs.data(), msgs.size(), gen, nullptr, 0, &need);
  if (qs != GB_ERR_BUFFER_TOO_SMALL) {
    if (qs != GB_ERR_INVALID_ARGUMENT) fuzz_fail("size query: unexpected status");
    if (known_template(tv) && (gen == 0 || gen == 1)) {
      // Only a role or the order of roles can be refused.
      bool odd_role = false;
      for (const gb_chat_message &m : msgs)
        odd_role = odd_role || (strcmp(m.role, "system") != 0 && strcmp(m.role, "user") != 0 &&
                                strcmp(m.role, "assistant") != 0 && !(tool_role(tv) && strcmp(m.role, "tool") == 0));
      // (qwen3.5 also refuses a later system message and a conversation
      // without a user query.)
      const bool alternates = tv == GB_CHAT_TEMPLATE_LLAMA2 || tv == GB_CHAT_TEMPLATE_GEMMA || tv == GB_CHAT_TEMPLATE_QWEN35;
      if (!odd_role && !alternates) fuzz_fail("valid roles refused by a template that takes any order");
    }
    return 0;
  }
  if (!known_template(tv) || (gen != 0 && gen != 1)) fuzz_fail("an invalid template or flag was accepted");
  if (need == 0) fuzz_fail("size query gave 0");

  // Exact capacity, with a canary after it.
  std::vector<char> buf(need + 16, '\x5a');
  size_t n = 0;
  if (gb_chat_apply(t, msgs.data(), msgs.size(), gen, buf.data(), need, &n) != GB_OK) fuzz_fail("exact capacity refused");
  if (n + 1 != need || buf[n] != '\0') fuzz_fail("length or NUL wrong");
  for (size_t i = need; i < buf.size(); i++)
    if (buf[i] != '\x5a') fuzz_fail("wrote past the capacity");
  const std::string text(buf.data(), n);
  if (strlen(text.c_str()) != n) fuzz_fail("NUL inside the text");
  if (short_cap) {
    std::vector<char> small(need - 1 + 16, '\x33');
    size_t m = 0;
    if (gb_chat_apply(t, msgs.data(), msgs.size(), gen, need > 1 ? small.data() : nullptr, need - 1, &m) != GB_ERR_BUFFER_TOO_SMALL ||
        m != need)
      fuzz_fail("a capacity one short is not refused with the size");
    for (char c : small)
      if (c != '\x33') fuzz_fail("written although the capacity was too small");
  }
  // Deterministic.
  std::vector<char> again(need);
  size_t n2 = 0;
  if (gb_chat_apply(t, msgs.data(), msgs.size(), gen, again.data(), need, &n2) != GB_OK || n2 != n ||
      memcmp(again.data(), buf.data(), n) != 0)
    fuzz_fail("two renderings differ");
  // Valid UTF-8 in, valid UTF-8 out; untrimmed contents appear as given.
  bool all_valid = true;
  for (const gb_chat_message &m : msgs) all_valid = all_valid && gbt::utf8_well_formed(m.content) && gbt::utf8_well_formed(m.role);
  if (all_valid && !gbt::utf8_well_formed(text)) fuzz_fail("valid UTF-8 contents gave invalid UTF-8 text");
  // qwen3 writes an assistant text's answer only (after its last "</think>"),
  // leading newlines dropped where it opens a <think> block. smollm3 drops
  // an answer's leading newlines and rewrites or drops system texts.
  if (!trims(tv))
    for (const gb_chat_message &m : msgs) {
      std::string want = m.content;
      const bool assistant = strcmp(m.role, "assistant") == 0;
      if (tv == GB_CHAT_TEMPLATE_SMOLLM3 && strcmp(m.role, "system") == 0) continue;
      if (tv == GB_CHAT_TEMPLATE_QWEN3 && assistant) {
        const size_t close = want.rfind("</think>");
        if (close != std::string::npos) want = want.substr(close + 8);
      }
      if ((tv == GB_CHAT_TEMPLATE_QWEN3 || tv == GB_CHAT_TEMPLATE_SMOLLM3) && assistant)
        want.erase(0, want.find_first_not_of('\n') == std::string::npos ? want.size() : want.find_first_not_of('\n'));
      if (text.find(want) == std::string::npos) fuzz_fail("a content is missing from the text");
    }
  return 0;
}

// Seeds: real template texts' distinguishing parts (written here) and short
// conversations for every template, flag and a few role orders.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  static const char *const kTemplates[] = {
      ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"),
      "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}<|im_start|>",
      "<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>",
      "<|im_start|><think>",
      "<|im_start|>{%- set ns = namespace(last_query_index=0) %}<think>{{ m.reasoning_content }}</think>",
      "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}",
      "<|start_header_id|><|eot_id|>Cutting Knowledge Date",
      "<|start_header_id|><|eot_id|>Cutting Knowledge Date: December 2023 Today Date: {{ tools_in_user_message }}",
      "{{ bos_token }}<start_of_turn>user\n{{ content }}<end_of_turn>\n",
      "{{ bos_token + '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + content + ' [/INST]' }}",
      "[INST] {{ content }} [/INST]",
      "<|system|>\n{{ s }}<|end|>\n<|user|>\n{{ u }}<|end|>\n<|assistant|>\n",
      "<|system|>\n{{ s }}{{ eos_token }}<|user|>\n<|assistant|>\n",
      "{{ '<|' + m['role'] + '|>' + m['content'] + '<|tool|>' + m['tools'] + '<|/tool|>' + '<|end|>' }}<|assistant|>",
      "{{ '<|im_start|>' + m['role'] + '<|im_sep|>' + m['content'] + '<|im_end|>' }}",
      "{{- '<|im_start|>system\\n' -}}{{- 'Reasoning Mode: ' -}}{{- '## Custom Instructions' -}}/no_think<think>",
      "{{- bos_token -}}List of tools: <|tool_list_start|>[<|im_start|><|tool_response_start|>",
      "{{- bos_token -}}{%- set keep_past_thinking = false -%}List of tools: [<|im_start|>",
      "<|im_start|><think>last_query_index reasoning_content <function= <parameter= image",
  };
  for (const char *t : kTemplates) {
    const std::string s = t;
    seeds->push_back(gb::FuzzSeed{std::vector<uint8_t>(s.begin(), s.end()), s.size(), 1});
  }
  static const char *const kConversations[][6] = {
      {"u", "Hello!", nullptr},
      {"s", "Be brief.", "u", " \t Hi there \xe2\x80\x83", "a", "Hello.\n"},
      {"u", "\xc2\xa0\xe3\x80\x80 caf\xc3\xa9 \xf0\x9f\x98\x80\xe2\x80\xa8", "a", " ok ", "u", "again"},
      {"a", "first", "s", "late system", nullptr},
      {"u", "Weather?", "a", "<tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call>", "t", "21 \"C\""},
      {"system", "", "user", "", nullptr},
      {"tool", "x", nullptr},
      {"s", "a/t/no_thinkhink /think \xe3\x80\x80", "u", "q", "a", "\n\nanswer"},
  };
  for (uint8_t t : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 255})
    for (uint8_t flags = 0; flags < 8; flags++)
      for (size_t c = 0; c < sizeof kConversations / sizeof kConversations[0]; c++) {
        if ((t + flags + c) % 3 != 0 && c > 1) continue;
        std::vector<uint8_t> b = {t, flags};
        for (size_t k = 0; k < 6 && kConversations[c][k]; k++) {
          if (k) b.push_back(0);
          const char *s = kConversations[c][k];
          b.insert(b.end(), s, s + strlen(s));
        }
        seeds->push_back(gb::FuzzSeed{b, b.size(), 1});
      }
}
