// chat.cpp — built-in chat templates (see chat.h and gearbx.h).
//
// Each renderer writes, for plain text messages, what the model family's own
// Jinja template renders with Hugging Face's settings (trim_blocks and
// lstrip_blocks on): the same marker strings, the same BOS text where the
// template writes bos_token, the same white space trimming, the same
// opening of the assistant turn for add_generation_prompt. Rendering runs
// twice over the same code: once counting (nothing written) to check the
// capacity, once writing, so the size and the text cannot disagree.
#include "chat.h"

#include <stddef.h>
#include <string.h>

#include "json_text.h"
#include "tools.h"

namespace gb {
namespace {

enum Role { kSystem, kUser, kAssistant, kTool };

struct Span {
  const char *p;
  size_t n;
};

// Counts every byte; copies only in the writing pass (buf != nullptr).
struct Out : TextOut {
  using TextOut::put;
  void put(const char *s) { TextOut::put(s); }
  void put(Span s) { TextOut::put(s.p, s.n); }
};

// ---- str.strip(): Python's notion of white space --------------------------
// Jinja's `trim` filter and Python's str.strip() remove the code points for
// which str.isspace() holds: U+0009..U+000D, U+001C..U+001F, U+0020, U+0085,
// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_py_space(uint32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
  if (c == 0x85 || c == 0xa0 || c == 0x1680) return true;
  if (c >= 0x2000 && c <= 0x200a) return true;
  return c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point of the well-formed UTF-8 sequence at p (at most n bytes);
// *len its length. Returns false for an ill-formed one (never white space).
// (json_text.h's decoder, in the form the trimming below reads.)
bool decode_utf8(const unsigned char *p, size_t n, uint32_t *cp, size_t *len) {
  *len = utf8_decode(p, n, cp);
  return *len != 0;
}

// Bytes of leading white space in s.
size_t lead_space(Span s) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(s.p);
  size_t i = 0;
  while (i < s.n) {
    uint32_t c;
    size_t k;
    if (!decode_utf8(p + i, s.n - i, &c, &k) || !is_py_space(c)) break;
    i += k;
  }
  return i;
}

// Bytes of trailing white space in s.
size_t trail_space(Span s) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(s.p);
  size_t end = s.n;
  while (end > 0) {
    // Start of the last character: back over at most three continuation bytes.
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && (p[start] & 0xc0u) == 0x80u) start--;
    uint32_t c;
    size_t k;
    if (!decode_utf8(p + start, end - start, &c, &k) || k != end - start || !is_py_space(c)) break;
    end = start;
  }
  return s.n - end;
}

// Write the concatenation of parts[0..np) with str.strip() applied to the
// whole (white space never spans two parts: each part is a whole string).
void put_stripped(Out &o, const Span *parts, size_t np) {
  size_t first = np, first_off = 0;
  for (size_t i = 0; i < np; i++) {
    const size_t k = lead_space(parts[i]);
    if (k < parts[i].n) {
      first = i;
      first_off = k;
      break;
    }
  }
  if (first == np) return;  // all white space
  size_t last = first, last_end = 0;
  for (size_t i = np; i-- > first;) {
    const size_t t = trail_space(parts[i]);
    if (t < parts[i].n) {
      last = i;
      last_end = parts[i].n - t;
      break;
    }
  }
  for (size_t i = first; i <= last; i++) {
    const size_t b = i == first ? first_off : 0;
    const size_t e = i == last ? last_end : parts[i].n;
    o.put(parts[i].p + b, e - b);
  }
}

void put_stripped(Out &o, Span s) { put_stripped(o, &s, 1); }

// ---- messages ---------------------------------------------------------------

struct Msg {
  Role role;
  Span role_name;
  Span text;
};

Span span_of(const char *s) { return Span{s, strlen(s)}; }

// Templates whose Jinja code raises unless the turns go (system,) user,
// assistant, user, ...
bool alternates(gb_chat_template t) { return t == GB_CHAT_TEMPLATE_LLAMA2 || t == GB_CHAT_TEMPLATE_GEMMA; }

// Templates with a turn for a tool's result.
bool has_tool_role(gb_chat_template t) {
  return t == GB_CHAT_TEMPLATE_QWEN25 || t == GB_CHAT_TEMPLATE_QWEN3 || t == GB_CHAT_TEMPLATE_SMOLLM3 ||
         t == GB_CHAT_TEMPLATE_LLAMA31 || t == GB_CHAT_TEMPLATE_LFM2 || t == GB_CHAT_TEMPLATE_LFM25 ||
         t == GB_CHAT_TEMPLATE_QWEN35;
}

// Templates that write tool definitions without a call format gearbx
// constrains replies to (the definitions are rendered, calls not parsed).
bool renders_tools_only(gb_chat_template t) {
  return t == GB_CHAT_TEMPLATE_LFM2 || t == GB_CHAT_TEMPLATE_LFM25 || t == GB_CHAT_TEMPLATE_QWEN35 ||
         t == GB_CHAT_TEMPLATE_GEMMA4;
}

gb_status check_messages(gb_chat_template t, const gb_chat_message *msgs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!msgs[i].role || !msgs[i].content) return GB_ERR_NULL_POINTER;
    const char *r = msgs[i].role;
    Role role;
    if (strcmp(r, "system") == 0) {
      role = kSystem;
    } else if (strcmp(r, "user") == 0) {
      role = kUser;
    } else if (strcmp(r, "assistant") == 0) {
      role = kAssistant;
    } else if (strcmp(r, "tool") == 0 && has_tool_role(t)) {
      role = kTool;
    } else {
      return GB_ERR_INVALID_ARGUMENT;
    }
    if (alternates(t)) {
      const size_t first_turn = (n > 0 && strcmp(msgs[0].role, "system") == 0) ? 1 : 0;
      if (i < first_turn) continue;  // the leading system message
      const Role want = ((i - first_turn) % 2 == 0) ? kUser : kAssistant;
      if (role != want) return GB_ERR_INVALID_ARGUMENT;
    }
  }
  return GB_OK;
}

Msg msg_at(const gb_chat_message *msgs, size_t i) {
  Msg m;
  m.role_name = span_of(msgs[i].role);
  const char c = m.role_name.p[0];
  m.role = c == 's' ? kSystem : c == 'u' ? kUser : c == 't' ? kTool : kAssistant;
  m.text = span_of(msgs[i].content);
  return m;
}

// What gb_chat_options adds to the messages.
struct Extra {
  const JsonDoc *tools = nullptr;  // checked; nullptr: none
  Span date{"26 Jul 2024", 11};
  bool thinking = true;
};

// ---- renderers ----------------------------------------------------------------

// Llama 2 chat: the system text goes inside the first [INST] between
// <<SYS>> markers; `'<<SYS>>\n' + system + '\n<</SYS>>\n\n' + user` is
// stripped as one string, an assistant turn is ' ' + strip(text) + ' </s>',
// every user turn starts with the BOS text. The template has no generation
// prompt: the text after " [/INST]" is where the answer goes.
// Every message as open + role + after_role + text + close (ChatML, Zephyr,
// Phi-3 differ only in these markers).
void put_turns(Out &o, const gb_chat_message *msgs, size_t n, const char *open, const char *after_role, const char *close) {
  for (size_t k = 0; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    o.put(open);
    o.put(m.role_name);
    o.put(after_role);
    o.put(m.text);
    o.put(close);
  }
}

void render_llama2(Out &o, const gb_chat_message *msgs, size_t n, bool) {
  size_t i = 0;
  Span sys{nullptr, 0};
  if (msg_at(msgs, 0).role == kSystem) {
    sys = msg_at(msgs, 0).text;
    i = 1;
  }
  for (size_t k = i; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    if (m.role == kUser) {
      o.put("<s>[INST] ");
      if (k == i && sys.p) {
        const Span parts[4] = {span_of("<<SYS>>\n"), sys, span_of("\n<</SYS>>\n\n"), m.text};
        put_stripped(o, parts, 4);
      } else {
        put_stripped(o, m.text);
      }
      o.put(" [/INST]");
    } else {
      o.put(" ");
      put_stripped(o, m.text);
      o.put(" </s>");
    }
  }
}

// Llama 3 (Meta-Llama-3-*-Instruct): BOS text, then per message a header
// with the role, the trimmed text and <|eot_id|>.
// One Llama 3 turn: the role's header, the trimmed text, <|eot_id|>. A
// tool's result (Llama 3.1) is an "ipython" turn holding the text as a JSON
// string.
void put_llama3_turn(Out &o, const Msg &m) {
  if (m.role == kTool) {
    o.put("<|start_header_id|>ipython<|end_header_id|>\n\n");
    json_dump_py_string(m.text.p, m.text.n, o);
  } else {
    o.put("<|start_header_id|>");
    o.put(m.role_name);
    o.put("<|end_header_id|>\n\n");
    put_stripped(o, m.text);
  }
  o.put("<|eot_id|>");
}

void render_llama3(Out &o, const gb_chat_message *msgs, size_t n, bool gen) {
  o.put("<|begin_of_text|>");
  for (size_t k = 0; k < n; k++) put_llama3_turn(o, msg_at(msgs, k));
  if (gen) o.put("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Llama 3.1 / 3.2 / 3.3: BOS text; a system turn that always carries the
// knowledge date, today's date and the (trimmed) system text, with
// "Environment: ipython" first when tools are given; the tools, with
// instructions, open the first message after it (its text trimmed, written
// as a user turn whatever its role); then llama3's turns, a tool result as
// an "ipython" turn holding the text as a JSON string (the template's
// tojson of a string).
void render_llama31(Out &o, const gb_chat_message *msgs, size_t n, bool gen, const Extra &x) {
  o.put("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n");
  if (x.tools) o.put("Environment: ipython\n");
  o.put("Cutting Knowledge Date: December 2023\nToday Date: ");
  o.put(x.date);
  o.put("\n\n");
  size_t k = 0;
  if (msg_at(msgs, 0).role == kSystem) put_stripped(o, msg_at(msgs, k++).text);
  o.put("<|eot_id|>");
  if (x.tools) {  // k < n: checked by the caller
    o.put("<|start_header_id|>user<|end_header_id|>\n\n"
          "Given the following functions, please respond with a JSON for a function call with its proper "
          "arguments that best answers the given prompt.\n\n"
          "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
          "value}.Do not use variables.\n\n");
    size_t cur = x.tools->root() + 1, v;
    while (x.tools->next_elem(&cur, &v)) {
      json_dump_py(*x.tools, v, 4, o);
      o.put("\n\n");
    }
    put_stripped(o, msg_at(msgs, k++).text);
    o.put("<|eot_id|>");
  }
  for (; k < n; k++) put_llama3_turn(o, msg_at(msgs, k));
  if (gen) o.put("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// ChatML: <|im_start|>role\n text <|im_end|>\n, text untouched, no BOS.
// Qwen2 and Qwen2.5 write their default system message first when the
// conversation does not start with one.
void render_chatml(Out &o, const gb_chat_message *msgs, size_t n, bool gen, const char *default_system) {
  if (default_system && msg_at(msgs, 0).role != kSystem) {
    o.put("<|im_start|>system\n");
    o.put(default_system);
    o.put("<|im_end|>\n");
  }
  put_turns(o, msgs, n, "<|im_start|>", "\n", "<|im_end|>\n");
  if (gen) o.put("<|im_start|>assistant\n");
}

// Zephyr (and TinyLlama chat): <|role|>\n text </s>, then the newline that
// follows the expression in the template's source; no BOS.
void render_zephyr(Out &o, const gb_chat_message *msgs, size_t n, bool gen) {
  put_turns(o, msgs, n, "<|", "|>\n", "</s>\n");
  if (gen) o.put("<|assistant|>\n");
}

// Phi-3 (Phi-3-mini-*-instruct since May 2024): <|role|>\n text <|end|>\n;
// without a generation prompt the template ends with its EOS text.
void render_phi3(Out &o, const gb_chat_message *msgs, size_t n, bool gen) {
  put_turns(o, msgs, n, "<|", "|>\n", "<|end|>\n");
  o.put(gen ? "<|assistant|>\n" : "<|endoftext|>");
}

// Phi-4-mini: <|role|> text <|end|>, nothing between turns; without a
// generation prompt its EOS text.
void render_phi4_mini(Out &o, const gb_chat_message *msgs, size_t n, bool gen) {
  put_turns(o, msgs, n, "<|", "|>", "<|end|>");
  o.put(gen ? "<|assistant|>" : "<|endoftext|>");
}

// Phi-4: <|im_start|>role<|im_sep|> text <|im_end|>, no newlines.
void render_phi4(Out &o, const gb_chat_message *msgs, size_t n, bool gen) {
  put_turns(o, msgs, n, "<|im_start|>", "<|im_sep|>", "<|im_end|>");
  if (gen) o.put("<|im_start|>assistant<|im_sep|>");
}

// Gemma: BOS text, turns <start_of_turn>user|model\n trim(text)
// <end_of_turn>\n. Gemma has no system role: as Gemma 3's template does, a
// leading system text followed by "\n\n" opens the first user turn (it is not
// trimmed; Gemma 1 and 2's templates refuse a system message instead).
void render_gemma(Out &o, const gb_chat_message *msgs, size_t n, bool gen) {
  o.put("<bos>");
  size_t i = 0;
  Span sys{nullptr, 0};
  if (msg_at(msgs, 0).role == kSystem) {
    sys = msg_at(msgs, 0).text;
    i = 1;
  }
  for (size_t k = i; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    o.put(m.role == kUser ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
    if (k == i && sys.p) {
      o.put(sys);
      o.put("\n\n");
    }
    put_stripped(o, m.text);
    o.put("<end_of_turn>\n");
  }
  if (gen) o.put("<start_of_turn>model\n");
}

// Gemma 4's strip_thinking: the parts of text outside its reasoning channel
// (text is cut at every "<channel|>"; of each piece, what comes before a
// "<|channel>" in it), f called on each in order.
template <class F>
void each_outside_channel(Span t, F f) {
  static const char kOpen[] = "<|channel>", kClose[] = "<channel|>";
  for (size_t at = 0;;) {
    size_t end = at;
    while (end + sizeof kClose - 1 <= t.n && memcmp(t.p + end, kClose, sizeof kClose - 1) != 0) end++;
    if (end + sizeof kClose - 1 > t.n) end = t.n;
    size_t cut = at;
    while (cut + sizeof kOpen - 1 <= end && memcmp(t.p + cut, kOpen, sizeof kOpen - 1) != 0) cut++;
    f(Span{t.p + at, (cut + sizeof kOpen - 1 <= end ? cut : end) - at});
    if (end == t.n) return;
    at = end + sizeof kClose - 1;
  }
}

// Those parts, concatenated and stripped (str.strip()).
void put_outside_channel(Out &o, Span t) {
  size_t idx = 0, first = (size_t)-1, first_off = 0, last = 0, last_end = 0;
  each_outside_channel(t, [&](Span p) {
    const size_t k = lead_space(p);
    if (k < p.n) {
      if (first == (size_t)-1) {
        first = idx;
        first_off = k;
      }
      last = idx;
      last_end = p.n - trail_space(p);
    }
    idx++;
  });
  if (first == (size_t)-1) return;
  idx = 0;
  each_outside_channel(t, [&](Span p) {
    if (idx >= first && idx <= last) {
      const size_t b = idx == first ? first_off : 0, e = idx == last ? last_end : p.n;
      o.put(p.p + b, e - b);
    }
    idx++;
  });
}

// Gemma 4: BOS text; a system turn <|turn>system\n ... <turn|>\n when the
// first message is a system one, thinking is on (then <|think|>\n opens
// it) or tools are given (their declarations close it, chat_gemma4.cpp);
// turns <|turn>role\n trim(text) <turn|>\n with role "model" for the
// assistant, whose text loses its reasoning channel; an assistant message
// right after another continues its turn (no new header). The generation
// prompt opens a model turn, with an empty thought channel when thinking is
// off. (Tool results follow tool calls, which plain messages do not carry:
// the template has no turn for them, so the role is refused.)
bool has_tools(const Extra &x);

void render_gemma4(Out &o, const gb_chat_message *msgs, size_t n, bool gen, const Extra &x) {
  o.put("<bos>");
  size_t i = 0;
  const bool sys = msg_at(msgs, 0).role == kSystem;
  if (x.thinking || sys || has_tools(x)) {
    o.put("<|turn>system\n");
    if (x.thinking) o.put("<|think|>\n");
    if (sys) {
      put_stripped(o, msg_at(msgs, 0).text);
      i = 1;
    }
    if (has_tools(x)) gemma4_put_tools(*x.tools, o);
    o.put("<turn|>\n");
  }
  for (size_t k = i; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    if (m.role == kAssistant) {
      if (k == i || msg_at(msgs, k - 1).role != kAssistant) o.put("<|turn>model\n");
      put_outside_channel(o, m.text);
    } else {
      o.put("<|turn>");
      o.put(m.role_name);
      o.put("\n");
      put_stripped(o, m.text);
    }
    o.put("<turn|>\n");
  }
  if (gen) o.put(x.thinking ? "<|turn>model\n" : "<|turn>model\n<|channel>thought\n<channel|>");
}

// Offset of the first / last occurrence of needle in s; s.n when absent.
size_t span_find(Span s, const char *needle, bool last) {
  const size_t k = strlen(needle);
  size_t at = s.n;
  for (size_t i = 0; i + k <= s.n; i++)
    if (memcmp(s.p + i, needle, k) == 0) {
      at = i;
      if (!last) break;
    }
  return at;
}
Span span_sub(Span s, size_t b, size_t e) { return Span{s.p + b, e - b}; }
Span span_lstrip_nl(Span s) {
  size_t b = 0;
  while (b < s.n && s.p[b] == '\n') b++;
  return span_sub(s, b, s.n);
}
Span span_rstrip_nl(Span s) {
  size_t e = s.n;
  while (e > 0 && s.p[e - 1] == '\n') e--;
  return span_sub(s, 0, e);
}

const char kQwen2System[] = "You are a helpful assistant.";
const char kQwen25System[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// Qwen2.5's and Qwen3's tools block (the end of their system turn): every
// tool definition as json.dumps writes it, one per line inside <tools>,
// then the instructions for the call format.
void put_qwen_tools(Out &o, const JsonDoc &tools) {
  o.put("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
  size_t cur = tools.root() + 1, v;
  while (tools.next_elem(&cur, &v)) {
    o.put("\n");
    json_dump_py(tools, v, -1, o);
  }
  o.put("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n");
}

bool has_tools(const Extra &x) { return x.tools && x.tools->count(x.tools->root()) > 0; }

// A tool result in Qwen's form: consecutive results share one user turn.
void put_qwen_tool_turn(Out &o, const gb_chat_message *msgs, size_t n, size_t k) {
  if (k == 0 || msg_at(msgs, k - 1).role != kTool) o.put("<|im_start|>user");
  o.put("\n<tool_response>\n");
  o.put(msg_at(msgs, k).text);
  o.put("\n</tool_response>");
  if (k + 1 == n || msg_at(msgs, k + 1).role != kTool) o.put("<|im_end|>\n");
}

// Qwen2.5: ChatML with its default system message; with tools the system
// turn (the caller's text or the default) ends with the tools block.
void render_qwen25(Out &o, const gb_chat_message *msgs, size_t n, bool gen, const Extra &x) {
  const bool sys = msg_at(msgs, 0).role == kSystem;
  o.put("<|im_start|>system\n");
  o.put(sys ? msg_at(msgs, 0).text : span_of(kQwen25System));
  if (has_tools(x)) {
    o.put("\n\n");
    put_qwen_tools(o, *x.tools);
  } else {
    o.put("<|im_end|>\n");
  }
  for (size_t k = sys ? 1 : 0; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    if (m.role == kTool) {
      put_qwen_tool_turn(o, msgs, n, k);
      continue;
    }
    o.put("<|im_start|>");
    o.put(m.role_name);
    o.put("\n");
    o.put(m.text);
    o.put("<|im_end|>\n");
  }
  if (gen) o.put("<|im_start|>assistant\n");
}

// Qwen3: ChatML without a default system message, with reasoning blocks.
// An assistant text holding "</think>" is split: what follows the last
// "</think>" (leading newlines dropped) is the answer, what lies between the
// last "<think>" and the first "</think>" the reasoning. Assistant turns
// before the last user turn keep their answer only; after it, the last
// message, and any with reasoning, are written as "<think>\n" reasoning
// "\n</think>\n\n" answer. The generation prompt opens the assistant turn
// and leaves the model free to think (the template's enable_thinking
// default).
void render_qwen3(Out &o, const gb_chat_message *msgs, size_t n, bool gen, const Extra &x) {
  size_t i = 0;
  const bool sys = msg_at(msgs, 0).role == kSystem;
  if (has_tools(x)) {
    o.put("<|im_start|>system\n");
    if (sys) {
      o.put(msg_at(msgs, 0).text);
      o.put("\n\n");
    }
    put_qwen_tools(o, *x.tools);
  } else if (sys) {
    o.put("<|im_start|>system\n");
    o.put(msg_at(msgs, 0).text);
    o.put("<|im_end|>\n");
  }
  if (sys) i = 1;
  // The last user message that is not a tool response.
  size_t last_query = n - 1;
  for (size_t k = n; k-- > 0;) {
    const Msg m = msg_at(msgs, k);
    const bool tool = m.text.n >= 31 && memcmp(m.text.p, "<tool_response>", 15) == 0 &&
                      memcmp(m.text.p + m.text.n - 16, "</tool_response>", 16) == 0;
    if (m.role == kUser && !tool) {
      last_query = k;
      break;
    }
  }
  for (size_t k = i; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    if (m.role == kTool) {
      put_qwen_tool_turn(o, msgs, n, k);
      continue;
    }
    if (m.role != kAssistant) {
      o.put(m.role == kUser ? "<|im_start|>user\n" : "<|im_start|>system\n");
      o.put(m.text);
      o.put("<|im_end|>\n");
      continue;
    }
    Span answer = m.text, reasoning{m.text.p, 0};
    const size_t close_last = span_find(m.text, "</think>", true);
    if (close_last != m.text.n) {
      answer = span_lstrip_nl(span_sub(m.text, close_last + 8, m.text.n));
      Span before = span_rstrip_nl(span_sub(m.text, 0, span_find(m.text, "</think>", false)));
      const size_t open = span_find(before, "<think>", true);
      if (open != before.n) before = span_sub(before, open + 7, before.n);
      reasoning = span_lstrip_nl(before);
    }
    o.put("<|im_start|>assistant\n");
    if (k > last_query && (k == n - 1 || reasoning.n)) {
      o.put("<think>\n");
      o.put(span_rstrip_nl(span_lstrip_nl(reasoning)));
      o.put("\n</think>\n\n");
      o.put(span_lstrip_nl(answer));
    } else {
      o.put(answer);
    }
    o.put("<|im_end|>\n");
  }
  if (gen) o.put(x.thinking ? "<|im_start|>assistant\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

// SmolLM3: ChatML with a system turn that is always written: a metadata
// header, the reasoning mode and custom instructions. The mode is
// "/no_think" when the first message is a system text containing
// "/no_think", else "/think" (the template's enable_thinking default). The
// custom instructions are that system text with every "/no_think", then
// every "/think" of what remains, removed and trailing white space stripped
// (two str.replace calls, then rstrip()); when they are empty, the
// template's default text for the mode. System messages after the first are
// not written. Assistant turns drop leading newlines; in "/no_think" mode
// they, and the assistant prompt, start with an empty <think> block. This is
// the template without a date line; one that writes today's date renders
// differently and is not detected.
const char kSmolThinkSystem[] =
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
const char kSmolPlainSystem[] = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n";

// The offsets of the bytes of s that remain after removing every "/no_think"
// and then every "/think" of the result, left to right without overlap as
// str.replace does, one per next() (s.n at the end). Six bytes of look-ahead,
// nothing allocated. Both words are ASCII, so in valid UTF-8 a removal never
// splits or joins a multi-byte character.
struct ThinkTagFilter {
  Span s;
  size_t i = 0;          // next byte of s for the first removal
  size_t look[6] = {};   // offsets after the first removal, not yet returned
  size_t n_look = 0;
  explicit ThinkTagFilter(Span text) : s(text) {}
  size_t first() {  // next offset of s without "/no_think"
    while (i + 9 <= s.n && memcmp(s.p + i, "/no_think", 9) == 0) i += 9;
    return i < s.n ? i++ : s.n;
  }
  size_t next() {
    for (;;) {
      while (n_look < 6) look[n_look++] = first();
      bool match = true;
      for (size_t k = 0; k < 6 && match; k++) match = look[k] < s.n && s.p[look[k]] == "/think"[k];
      if (!match) break;
      n_look = 0;
    }
    const size_t at = look[0];
    memmove(look, look + 1, 5 * sizeof look[0]);
    n_look--;
    return at;
  }
};

// Writes SmolLM3's custom instructions for system text s (see above);
// returns false, writing nothing, when they are empty.
bool put_smol_instructions(Out &o, Span s) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(s.p);
  // Pass 1: the output's length up to its last character that is not white
  // space (an ill-formed byte counts as a character that is not).
  size_t out = 0, keep = 0;
  ThinkTagFilter f(s);
  for (size_t at = f.next(); at < s.n; at = f.next()) {
    uint32_t c;
    size_t k;
    if (decode_utf8(p + at, s.n - at, &c, &k)) {
      for (size_t j = 1; j < k; j++) f.next();  // its continuation bytes
    } else {
      k = 1;
      c = 0xFFFD;
    }
    out += k;
    if (!is_py_space(c)) keep = out;
  }
  if (keep == 0) return false;
  ThinkTagFilter g(s);
  for (size_t w = 0; w < keep; w++) o.put(s.p + g.next(), 1);
  o.put("\n\n");
  return true;
}

void render_smollm3(Out &o, const gb_chat_message *msgs, size_t n, bool gen, const Extra &x) {
  const bool has_system = msg_at(msgs, 0).role == kSystem;
  const Span sys = has_system ? msg_at(msgs, 0).text : Span{"", 0};
  const bool think = span_find(sys, "/no_think", false) != sys.n  ? false
                     : span_find(sys, "/think", false) != sys.n ? true
                                                                  : x.thinking;
  o.put("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: ");
  o.put(think ? "/think" : "/no_think");
  o.put("\n\n## Custom Instructions\n\n");
  if (!put_smol_instructions(o, sys)) o.put(think ? kSmolThinkSystem : kSmolPlainSystem);
  o.put("<|im_end|>\n");
  for (size_t k = 0; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    if (m.role == kSystem) continue;
    if (m.role == kUser || m.role == kTool) {
      o.put("<|im_start|>user\n");
      o.put(m.text);
    } else {
      o.put("<|im_start|>assistant\n");
      if (!think) o.put("<think>\n\n</think>\n");
      o.put(span_lstrip_nl(m.text));
    }
    o.put("<|im_end|>\n");
  }
  if (gen) o.put(think ? "<|im_start|>assistant\n" : "<|im_start|>assistant\n<think>\n\n</think>\n");
}


// LFM2 and LFM2.5: the BOS text, then a system turn when there is a system
// message or tools: the system text, a newline when both, then "List of
// tools: [" and each definition as json.dumps writes it, ", " between them,
// then "]" (LFM2: the list between <|tool_list_start|> and
// <|tool_list_end|>). Every other message is a ChatML turn with its role as
// given (a later system message too); LFM2 wraps a tool result between
// <|tool_response_start|> and <|tool_response_end|>; LFM2.5 keeps, of
// assistant turns but the last assistant turn, what follows their last
// "</think>", stripped.
void render_lfm2(Out &o, const gb_chat_message *msgs, size_t n, bool gen, const Extra &x, bool v25) {
  o.put("<|startoftext|>");
  const bool sys = msg_at(msgs, 0).role == kSystem;
  const Span sys_text = sys ? msg_at(msgs, 0).text : Span{"", 0};
  if (sys_text.n || has_tools(x)) {
    o.put("<|im_start|>system\n");
    o.put(sys_text);
    if (has_tools(x)) {
      if (sys_text.n) o.put("\n");
      o.put(v25 ? "List of tools: [" : "List of tools: <|tool_list_start|>[");
      size_t cur = x.tools->root() + 1, v;
      bool first = true;
      while (x.tools->next_elem(&cur, &v)) {
        if (!first) o.put(", ");
        first = false;
        json_dump_py(*x.tools, v, -1, o);
      }
      o.put(v25 ? "]" : "]<|tool_list_end|>");
    }
    o.put("<|im_end|>\n");
  }
  size_t last_assistant = n;
  for (size_t k = sys ? 1 : 0; k < n; k++)
    if (msg_at(msgs, k).role == kAssistant) last_assistant = k;
  for (size_t k = sys ? 1 : 0; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    o.put("<|im_start|>");
    o.put(m.role_name);
    o.put("\n");
    if (m.role == kTool && !v25) {
      o.put("<|tool_response_start|>");
      o.put(m.text);
      o.put("<|tool_response_end|>");
    } else if (m.role == kAssistant && v25 && k != last_assistant && span_find(m.text, "</think>", true) != m.text.n) {
      put_stripped(o, span_sub(m.text, span_find(m.text, "</think>", true) + 8, m.text.n));
    } else {
      o.put(m.text);
    }
    o.put("<|im_end|>\n");
  }
  if (gen) o.put("<|im_start|>assistant\n");
}

// Qwen3.5: with tools, a system turn of the tool block (every definition as
// json.dumps writes it, one per line inside <tools>, then the XML call
// format's instructions) and then, after a blank line, the system text when
// its stripped form is not empty; without, the stripped system text in a
// turn of its own. Every text is stripped. The last user query is the last
// user message that is not a tool response (its stripped text wrapped in
// <tool_response> tags). An assistant text holding "</think>" is split: the
// reasoning is what lies between the last "<think>" and the first
// "</think>" (leading and trailing newlines dropped, then stripped), the
// answer what follows the last "</think>" (leading newlines dropped). After
// the last user query every assistant turn is "<think>\n" reasoning
// "\n</think>\n\n" answer; before it, the answer alone. Tool results after
// a message of another role open a user turn, each is "\n<tool_response>\n"
// text "\n</tool_response>", and the last of a run closes it. The generation
// prompt opens the assistant turn and a <think> block (thinking off: an
// empty block).
const char kQwen35ToolIntro[] = "# Tools\n\nYou have access to the following functions:\n\n<tools>";
const char kQwen35ToolRules[] =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required "
    "parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language "
    "BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like "
    "normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>";

Span span_strip(Span s) {
  const size_t b = lead_space(s);
  if (b == s.n) return span_sub(s, s.n, s.n);
  return span_sub(s, b, s.n - trail_space(s));
}

// Whether text, stripped, is a tool response as Qwen3.5's template tests it.
bool qwen35_tool_response(Span text) {
  const Span t = span_strip(text);
  return t.n >= 15 && memcmp(t.p, "<tool_response>", 15) == 0 && t.n >= 16 && memcmp(t.p + t.n - 16, "</tool_response>", 16) == 0;
}

// The last user query's index, or n when there is none.
size_t qwen35_last_query(const gb_chat_message *msgs, size_t n) {
  for (size_t k = n; k-- > 0;) {
    const Msg m = msg_at(msgs, k);
    if (m.role == kUser && !qwen35_tool_response(m.text)) return k;
  }
  return n;
}

void render_qwen35(Out &o, const gb_chat_message *msgs, size_t n, bool gen, const Extra &x) {
  const bool sys = msg_at(msgs, 0).role == kSystem;
  if (has_tools(x)) {
    o.put("<|im_start|>system\n");
    o.put(kQwen35ToolIntro);
    size_t cur = x.tools->root() + 1, v;
    while (x.tools->next_elem(&cur, &v)) {
      o.put("\n");
      json_dump_py(*x.tools, v, -1, o);
    }
    o.put(kQwen35ToolRules);
    if (sys && span_strip(msg_at(msgs, 0).text).n) {
      o.put("\n\n");
      o.put(span_strip(msg_at(msgs, 0).text));
    }
    o.put("<|im_end|>\n");
  } else if (sys) {
    o.put("<|im_start|>system\n");
    o.put(span_strip(msg_at(msgs, 0).text));
    o.put("<|im_end|>\n");
  }
  const size_t last_query = qwen35_last_query(msgs, n);
  for (size_t k = sys ? 1 : 0; k < n; k++) {
    const Msg m = msg_at(msgs, k);
    const Span text = span_strip(m.text);
    if (m.role == kUser) {
      o.put("<|im_start|>user\n");
      o.put(text);
      o.put("<|im_end|>\n");
    } else if (m.role == kAssistant) {
      Span answer = text, reasoning{text.p, 0};
      const size_t close_last = span_find(text, "</think>", true);
      if (close_last != text.n) {
        answer = span_lstrip_nl(span_sub(text, close_last + 8, text.n));
        Span before = span_rstrip_nl(span_sub(text, 0, span_find(text, "</think>", false)));
        const size_t open = span_find(before, "<think>", true);
        if (open != before.n) before = span_sub(before, open + 7, before.n);
        reasoning = span_strip(span_lstrip_nl(before));
      }
      o.put("<|im_start|>assistant\n");
      if (k > last_query) {
        o.put("<think>\n");
        o.put(reasoning);
        o.put("\n</think>\n\n");
      }
      o.put(answer);
      o.put("<|im_end|>\n");
    } else {  // a tool result
      if (k > 0 && msg_at(msgs, k - 1).role != kTool) o.put("<|im_start|>user");
      o.put("\n<tool_response>\n");
      o.put(text);
      o.put("\n</tool_response>");
      if (k + 1 == n || msg_at(msgs, k + 1).role != kTool) o.put("<|im_end|>\n");
    }
  }
  if (gen) o.put(x.thinking ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

void render(gb_chat_template t, Out &o, const gb_chat_message *msgs, size_t n, bool gen, const Extra &x) {
  switch (t) {
    case GB_CHAT_TEMPLATE_LLAMA2: render_llama2(o, msgs, n, gen); break;
    case GB_CHAT_TEMPLATE_LLAMA3: render_llama3(o, msgs, n, gen); break;
    case GB_CHAT_TEMPLATE_CHATML: render_chatml(o, msgs, n, gen, nullptr); break;
    case GB_CHAT_TEMPLATE_QWEN2: render_chatml(o, msgs, n, gen, kQwen2System); break;
    case GB_CHAT_TEMPLATE_QWEN25: render_qwen25(o, msgs, n, gen, x); break;
    case GB_CHAT_TEMPLATE_ZEPHYR: render_zephyr(o, msgs, n, gen); break;
    case GB_CHAT_TEMPLATE_PHI3: render_phi3(o, msgs, n, gen); break;
    case GB_CHAT_TEMPLATE_GEMMA: render_gemma(o, msgs, n, gen); break;
    case GB_CHAT_TEMPLATE_QWEN3: render_qwen3(o, msgs, n, gen, x); break;
    case GB_CHAT_TEMPLATE_PHI4_MINI: render_phi4_mini(o, msgs, n, gen); break;
    case GB_CHAT_TEMPLATE_PHI4: render_phi4(o, msgs, n, gen); break;
    case GB_CHAT_TEMPLATE_SMOLLM3: render_smollm3(o, msgs, n, gen, x); break;
    case GB_CHAT_TEMPLATE_LLAMA31: render_llama31(o, msgs, n, gen, x); break;
    case GB_CHAT_TEMPLATE_LFM2: render_lfm2(o, msgs, n, gen, x, false); break;
    case GB_CHAT_TEMPLATE_LFM25: render_lfm2(o, msgs, n, gen, x, true); break;
    case GB_CHAT_TEMPLATE_QWEN35: render_qwen35(o, msgs, n, gen, x); break;
    case GB_CHAT_TEMPLATE_GEMMA4: render_gemma4(o, msgs, n, gen, x); break;
    default: break;  // rejected by the caller
  }
}

// ---- names, end-of-turn strings ---------------------------------------------------

struct TemplateInfo {
  const char *name;
  const char *const *eot;  // NULL-terminated
};

const char *const kEotLlama2[] = {"</s>", nullptr};
const char *const kEotLlama3[] = {"<|eot_id|>", "<|end_of_text|>", nullptr};
const char *const kEotLlama31[] = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", nullptr};
const char *const kEotChatml[] = {"<|im_end|>", nullptr};
const char *const kEotZephyr[] = {"</s>", nullptr};
const char *const kEotPhi3[] = {"<|end|>", "<|endoftext|>", nullptr};
const char *const kEotGemma[] = {"<end_of_turn>", "<eos>", nullptr};
const char *const kEotQwen[] = {"<|im_end|>", "<|endoftext|>", nullptr};
const char *const kEotPhi4[] = {"<|im_end|>", "<|endoftext|>", nullptr};
const char *const kEotSmol[] = {"<|im_end|>", "<|end_of_text|>", nullptr};
// Gemma 4 also stops at <|tool_response>: after a call the model waits for its result.
const char *const kEotGemma4[] = {"<turn|>", "<eos>", "<|tool_response>", nullptr};

// Index = gb_chat_template value.
const TemplateInfo kTemplates[] = {
    {nullptr, nullptr},        // GB_CHAT_TEMPLATE_NONE
    {"llama2", kEotLlama2},    // GB_CHAT_TEMPLATE_LLAMA2
    {"llama3", kEotLlama3},    // GB_CHAT_TEMPLATE_LLAMA3
    {"chatml", kEotChatml},    // GB_CHAT_TEMPLATE_CHATML
    {"zephyr", kEotZephyr},    // GB_CHAT_TEMPLATE_ZEPHYR
    {"phi3", kEotPhi3},        // GB_CHAT_TEMPLATE_PHI3
    {"gemma", kEotGemma},      // GB_CHAT_TEMPLATE_GEMMA
    {"qwen2", kEotQwen},       // GB_CHAT_TEMPLATE_QWEN2
    {"qwen2.5", kEotQwen},     // GB_CHAT_TEMPLATE_QWEN25
    {"qwen3", kEotQwen},       // GB_CHAT_TEMPLATE_QWEN3
    {"phi4-mini", kEotPhi3},   // GB_CHAT_TEMPLATE_PHI4_MINI
    {"phi4", kEotPhi4},        // GB_CHAT_TEMPLATE_PHI4
    {"smollm3", kEotSmol},     // GB_CHAT_TEMPLATE_SMOLLM3
    {"llama3.1", kEotLlama31}, // GB_CHAT_TEMPLATE_LLAMA31
    {"lfm2", kEotChatml},      // GB_CHAT_TEMPLATE_LFM2
    {"lfm2.5", kEotChatml},    // GB_CHAT_TEMPLATE_LFM25
    {"qwen3.5", kEotQwen},     // GB_CHAT_TEMPLATE_QWEN35
    {"gemma4", kEotGemma4},    // GB_CHAT_TEMPLATE_GEMMA4
};
constexpr int32_t kNumTemplates = (int32_t)(sizeof kTemplates / sizeof *kTemplates);
static_assert(kNumTemplates == GB_CHAT_TEMPLATE_GEMMA4 + 1, "one entry per template");

// The template's table entry, or nullptr for a value outside the enum.
const TemplateInfo *info_of(gb_chat_template t) {
  const int32_t v = raw_enum(t);
  if (v <= GB_CHAT_TEMPLATE_NONE || v >= kNumTemplates) return nullptr;
  return &kTemplates[v];
}

// ---- detection ------------------------------------------------------------

// Offset of needle in text[0..n), or n when absent.
size_t find(const char *text, size_t n, const char *needle, size_t from = 0) {
  const size_t k = strlen(needle);
  if (k > n) return n;
  for (size_t i = from; i + k <= n; i++)
    if (text[i] == needle[0] && memcmp(text + i, needle, k) == 0) return i;
  return n;
}

bool has(const char *text, size_t n, const char *needle) { return find(text, n, needle) != n; }

// A ChatML template that writes literal text right after "<|im_start|>system"
// and its newline (an escaped "\n" inside a Jinja string, or a real newline
// in template text) has a built-in default system message.
bool chatml_default_system(const char *text, size_t n) {
  const char kOpen[] = "<|im_start|>system";
  for (size_t at = find(text, n, kOpen); at != n; at = find(text, n, kOpen, at + 1)) {
    size_t i = at + sizeof kOpen - 1;
    if (i + 1 < n && text[i] == '\\' && text[i + 1] == 'n') {
      i += 2;
    } else if (i < n && text[i] == '\n') {
      i += 1;
    } else {
      continue;
    }
    if (i < n && text[i] != '\'' && text[i] != '"' && text[i] != '{') return true;
  }
  return false;
}

gb_status detect(const char *t, size_t n, gb_chat_template *out) {
  gb_chat_template id = GB_CHAT_TEMPLATE_NONE;
  if (has(t, n, "<|im_sep|>") && has(t, n, "<|im_start|>") && has(t, n, "<|im_end|>")) {
    id = GB_CHAT_TEMPLATE_PHI4;  // ChatML's markers with Phi-4's separator after the role
  } else if (has(t, n, "<|im_start|>") && has(t, n, "List of tools: ") && has(t, n, "bos_token")) {
    // LFM2's family: the tools listed in the system turn; LFM2's own marks
    // the list and the results, LFM2.5's drops past reasoning instead.
    if (has(t, n, "<|tool_list_start|>") && has(t, n, "<|tool_response_start|>") && !has(t, n, "</think>"))
      id = GB_CHAT_TEMPLATE_LFM2;
    else if (!has(t, n, "<|tool_list_start|>") && has(t, n, "keep_past_thinking"))
      id = GB_CHAT_TEMPLATE_LFM25;
  } else if (has(t, n, "<|im_start|>")) {
    // Reasoning templates rewrite assistant turns: Qwen3's (it splits them
    // at "</think>" and finds the last user query) is built in; others
    // with <think> blocks (Qwen3.5's, which also renders images; QwQ's)
    // render differently. SmolLM3's has its own system header (below).
    if (has(t, n, "<think>")) {
      if (has(t, n, "last_query_index") && has(t, n, "<function=") && has(t, n, "<parameter=") &&
          has(t, n, "reasoning_content"))
        id = GB_CHAT_TEMPLATE_QWEN35;  // Qwen3.5's: its XML tool calls (images are not rendered here)
      else if (has(t, n, "Reasoning Mode: ") && has(t, n, "## Custom Instructions") && has(t, n, "/no_think") &&
          !has(t, n, "Today Date") && !has(t, n, "strftime_now"))
        id = GB_CHAT_TEMPLATE_SMOLLM3;
      else if (has(t, n, "last_query_index") && has(t, n, "reasoning_content") && !has(t, n, "vision") && !has(t, n, "image"))
        id = GB_CHAT_TEMPLATE_QWEN3;
    } else if (has(t, n, kQwen25System)) {
      id = GB_CHAT_TEMPLATE_QWEN25;
    } else if (has(t, n, "<|im_start|>system\\nYou are a helpful assistant.<|im_end|>")) {
      id = GB_CHAT_TEMPLATE_QWEN2;
    } else if (!chatml_default_system(t, n)) {
      id = GB_CHAT_TEMPLATE_CHATML;
    }
  } else if (has(t, n, "<|start_header_id|>") && has(t, n, "<|eot_id|>")) {
    // Llama 3.1 and later put a dated header into every system turn; 3.1's
    // built-in tools (a "Tools:" line, <|python_tag|> calls) are not rendered.
    if (!has(t, n, "Cutting Knowledge Date")) id = GB_CHAT_TEMPLATE_LLAMA3;
    else if (has(t, n, "Today Date: ") && has(t, n, "tools_in_user_message")) id = GB_CHAT_TEMPLATE_LLAMA31;
  } else if (has(t, n, "<start_of_turn>") && has(t, n, "<end_of_turn>")) {
    id = GB_CHAT_TEMPLATE_GEMMA;
  } else if (has(t, n, "<|turn>") && has(t, n, "<turn|>") && has(t, n, "strip_thinking")) {
    id = GB_CHAT_TEMPLATE_GEMMA4;  // Gemma 4's turns, its reasoning channel dropped from model turns
  } else if (has(t, n, "[INST]")) {
    // Llama 2's carries the system text in <<SYS>>; Mistral's has none.
    if (has(t, n, "<<SYS>>") && has(t, n, "[/INST]")) id = GB_CHAT_TEMPLATE_LLAMA2;
  } else if (has(t, n, "<|/tool|>") && has(t, n, "<|assistant|>") && has(t, n, "<|end|>")) {
    // Phi-4-mini writes each role as '<|' + role + '|>' with the text right
    // after it, and tool definitions between <|tool|> and <|/tool|>.
    id = GB_CHAT_TEMPLATE_PHI4_MINI;
  } else if (has(t, n, "<|user|>") && has(t, n, "<|assistant|>") && has(t, n, "<|system|>")) {
    // Phi-3 closes turns with <|end|>, Zephyr with the EOS text. Earlier
    // Phi-3 templates without a system turn (assistant header written after
    // every user turn) render differently and stay unknown. Phi-3.5's skips
    // an empty system message, the only text where it differs from Phi-3's.
    if (has(t, n, "<|end|>")) {
      id = GB_CHAT_TEMPLATE_PHI3;
    } else if (has(t, n, "eos_token")) {
      id = GB_CHAT_TEMPLATE_ZEPHYR;
    }
  }
  if (id == GB_CHAT_TEMPLATE_NONE) return GB_ERR_UNAVAILABLE;
  *out = id;
  return GB_OK;
}

}  // namespace

const char *chat_template_name(gb_chat_template t) {
  const TemplateInfo *info = info_of(t);
  return info ? info->name : "unknown";
}

gb_status chat_template_from_name(const char *name, gb_chat_template *out) {
  if (!name || !out) return GB_ERR_NULL_POINTER;
  for (int32_t i = GB_CHAT_TEMPLATE_NONE + 1; i < kNumTemplates; i++) {
    if (strcmp(name, kTemplates[i].name) == 0) {
      *out = (gb_chat_template)i;
      return GB_OK;
    }
  }
  return GB_ERR_INVALID_ARGUMENT;
}

gb_status chat_template_detect(const char *jinja_text, size_t len, gb_chat_template *out) {
  if (!out || (!jinja_text && len > 0)) return GB_ERR_NULL_POINTER;
  if (len == 0) return GB_ERR_UNAVAILABLE;
  return detect(jinja_text, len, out);
}


gb_status chat_apply_ex(gb_chat_template t, const gb_chat_message *msgs, size_t n, const gb_chat_options *opts,
                        char *buf, size_t cap, size_t *n_out, const Logger &log) {
  if (!msgs || !n_out || (!buf && cap > 0)) return GB_ERR_NULL_POINTER;
  gb_chat_options o;
  chat_options_init(&o);
  if (opts) {
    if (opts->struct_size < offsetof(gb_chat_options, tools) || opts->struct_size > sizeof o)
      return fail(log, GB_ERR_STRUCT_SIZE, "gb_chat_options struct_size %u not supported", opts->struct_size);
    memcpy(&o, opts, opts->struct_size);
  }
  if (!info_of(t) || n == 0 || (o.add_assistant_prompt != 0 && o.add_assistant_prompt != 1) ||
      (o.thinking != 0 && o.thinking != 1))
    return GB_ERR_INVALID_ARGUMENT;
  GB_TRY(check_messages(t, msgs, n));
  if (t == GB_CHAT_TEMPLATE_QWEN35) {
    // Qwen3.5's template raises for a system message after the first and
    // for a conversation without a user query.
    for (size_t k = 1; k < n; k++)
      if (msg_at(msgs, k).role == kSystem)
        return fail(log, GB_ERR_INVALID_ARGUMENT, "qwen3.5: a system message after the first (message %zu)", k);
    if (qwen35_last_query(msgs, n) == n)
      return fail(log, GB_ERR_INVALID_ARGUMENT, "qwen3.5: no user message that is not a tool response");
  }
  Extra x;
  x.thinking = o.thinking == 1;
  if (o.date) x.date = span_of(o.date);
  JsonDoc tools{o.tools, o.tools_len};
  if (o.tools) {
    if (tool_format(t) == kNoToolFormat && !renders_tools_only(t))
      return fail(log, GB_ERR_UNSUPPORTED_FEATURE, "chat template %s has no tool definitions", chat_template_name(t));
    GB_TRY(tools_check(tools, log));
    if (t == GB_CHAT_TEMPLATE_GEMMA4) GB_TRY(gemma4_tools_check(tools, log));
    x.tools = &tools;
    // Llama 3.1 puts the tools into the first message after the system one.
    if (t == GB_CHAT_TEMPLATE_LLAMA31 && n == (msg_at(msgs, 0).role == kSystem ? 1u : 0u))
      return fail(log, GB_ERR_INVALID_ARGUMENT, "llama3.1 puts the tools into a user message: there is none");
  }
  const bool gen = o.add_assistant_prompt == 1;
  Out count;
  render(t, count, msgs, n, gen, x);
  if (count.n >= cap) {
    *n_out = count.n + 1;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  Out write;
  write.buf = buf;
  render(t, write, msgs, n, gen, x);
  GB_DASSERT(write.n == count.n);
  buf[write.n] = '\0';
  *n_out = write.n;
  return GB_OK;
}

gb_status chat_apply(gb_chat_template t, const gb_chat_message *msgs, size_t n, int add_assistant_prompt,
                     char *buf, size_t cap, size_t *n_out) {
  gb_chat_options o;
  chat_options_init(&o);
  o.add_assistant_prompt = add_assistant_prompt;
  return chat_apply_ex(t, msgs, n, &o, buf, cap, n_out, Logger{});
}

void chat_options_init(gb_chat_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->add_assistant_prompt = 1;
  o->thinking = 1;
}

gb_status chat_eot_strings(gb_chat_template t, const char *const **strings, size_t *count) {
  if (!strings || !count) return GB_ERR_NULL_POINTER;
  const TemplateInfo *info = info_of(t);
  if (!info) return GB_ERR_INVALID_ARGUMENT;
  size_t k = 0;
  while (info->eot[k]) k++;
  *strings = info->eot;
  *count = k;
  return GB_OK;
}

}  // namespace gb

// ---- C API ------------------------------------------------------------------

extern "C" const char *gb_chat_template_name(gb_chat_template t) { return gb::chat_template_name(t); }

extern "C" gb_status gb_chat_template_from_name(const char *name, gb_chat_template *out) {
  const gb_status st = gb::chat_template_from_name(name, out);
  return st == GB_ERR_INVALID_ARGUMENT ? st : gb::api_result("gb_chat_template_from_name", st);  // unknown name: the answer
}

extern "C" gb_status gb_chat_template_detect(const char *text, size_t len, gb_chat_template *out) {
  const gb_status st = gb::chat_template_detect(text, len, out);
  return st == GB_ERR_UNAVAILABLE ? st : gb::api_result("gb_chat_template_detect", st);  // not recognised: the answer
}

extern "C" gb_status gb_chat_apply(gb_chat_template t, const gb_chat_message *msgs, size_t n,
                                   int add_assistant_prompt, char *buf, size_t cap, size_t *n_out) {
  return gb::api_result("gb_chat_apply", gb::chat_apply(t, msgs, n, add_assistant_prompt, buf, cap, n_out));
}

extern "C" void gb_chat_options_init(gb_chat_options *opts) {
  if (opts) gb::chat_options_init(opts);
}

extern "C" gb_status gb_chat_apply_ex(gb_chat_template t, const gb_chat_message *msgs, size_t n,
                                      const gb_chat_options *opts, char *buf, size_t cap, size_t *n_out) {
  return gb::api_result("gb_chat_apply_ex", gb::chat_apply_ex(t, msgs, n, opts, buf, cap, n_out, gb::Logger{}));
}

extern "C" gb_status gb_chat_eot_strings(gb_chat_template t, const char *const **strings, size_t *count) {
  return gb::api_result("gb_chat_eot_strings", gb::chat_eot_strings(t, strings, count));
}
