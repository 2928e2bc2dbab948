// cmd_chat.cpp — `gearbx chat`: a conversation with a model, one user
// message per line of standard input (a terminal or a pipe; end of input
// ends the chat), each reply streamed to stdout and ended with a newline.
//
// Every turn renders the whole conversation with the chat template
// (gb_chat_apply with the assistant prompt) but feeds the model only what the
// KV cache does not hold yet: the rendered text after the previous turn's
// render and the reply (the template's end of the reply's turn, the new user
// message, the assistant prompt). The cache is kept between turns and never
// run again. The text is tokenized with the control tokens it names
// (GB_TOKENIZE_PARSE_SPECIAL) and without an automatic BOS: the templates
// write the BOS text where the model wants it (BOS is still put first when
// the tokenizer asks for it and the first turn's text does not start with
// it). A continuation does not get SentencePiece's space prefix at its start
// (it continues the text in the cache), only after its control tokens, as
// when the whole conversation is tokenized at once.
//
// A reply ends at an end-of-generation token, at a generated BOS (llama2.c's
// models end a story with BOS), when its text ends with one of the
// template's end-of-turn strings (removed from the reply), at -n tokens, or
// when the context is full (the conversation is then reset). The token that
// ended a reply is not run; a reply cut by -n keeps its last token, which
// runs at the start of the next turn. The stream goes through
// gb_utf8_stream, so a character split across tokens is printed whole.
//
// "/reset" on a line of its own forgets the conversation and the cache.
// With --tools FILE (a JSON array of tool definitions) the template renders
// the tools, every reply is constrained by the tools' grammar
// (gb_grammar_from_tools: --tool-choice auto lets the model answer in text
// instead, required makes every reply a call), and after a reply its calls
// are printed, one line each: `tool_call: {"name": ..., "arguments": ...}`.
// A line "/tool TEXT" passes TEXT back as a tool's result and asks for the
// next reply.
// --show-prompt writes to stderr, per turn, the exact text fed to the model
// between "=== fed (N tokens) ===" and "=== end fed ===" lines, and after
// each reply "[end: eog|bos|stop-string|limit|context-full, kv=N tokens]".
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cli.h"

namespace {

const char kTemplates[] =
    "llama2, llama3, llama3.1, chatml, zephyr, phi3, gemma, qwen2, qwen2.5, qwen3, qwen3.5, phi4-mini, phi4, smollm3, "
    "lfm2, lfm2.5, gemma4";

int chat_usage() {
  fprintf(stderr,
          "usage: gearbx chat -m MODEL.gbx [--system TEXT] [--template NAME] [-n MAX_TOKENS_PER_TURN]\n"
          "                   [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--ctx N] [--threads N]\n"
          "                   [--gear default|low|mid|high|f32|auto] [--deterministic] [--show-prompt]\n"
          "  one user message per line of standard input; '/reset' starts a new conversation\n"
          "  --template NAME   %s\n"
          "                    (default: recognised from the model's own chat template)\n"
          "  -n N              most tokens per reply (default 256)\n"
          "  --deterministic   portable generic kernels only: the same replies on every CPU\n"
          "  --show-prompt     write the text fed to the model and how each reply ended to stderr\n"
          CLI_LOAD_USAGE
          "  --grammar FILE    every reply is text of the GBNF grammar in FILE (its rule 'root')\n"
          "  --json-schema FILE  every reply is JSON that the JSON Schema in FILE accepts\n"
          "  --tools FILE      tool definitions (a JSON array) for the templates with tool calls (qwen2.5,\n"
          "                    qwen3, llama3.1): replies call them with arguments valid for their schemas\n"
          "                    (gemma4: rendered and parsed, not constrained); each call is printed as\n"
          "                    'tool_call: {\"name\": ..., \"arguments\": ...}' (arguments as JSON);\n"
          "                    a line '/tool TEXT' returns a tool's result\n"
          "  --tool-choice auto|required  auto (default): a call or a text reply; required: a call\n",
          kTemplates);
  return 1;
}

struct Msg {
  std::string role, content;
};

std::string trim_ws(const std::string &s) {
  const char *ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return std::string();
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

bool ends_with(const std::string &s, const char *t) {
  const size_t n = strlen(t);
  return s.size() >= n && !memcmp(s.data() + s.size() - n, t, n);
}

struct Chat {
  const char *C = "chat";
  const char *path = "";  // of the model
  gb_model *model = nullptr;
  const gb_tokenizer *tok = nullptr;
  gb_tokenizer_info ti;
  gb_session *s = nullptr;
  gb_chat_template tmpl = GB_CHAT_TEMPLATE_NONE;
  const char *const *eot = nullptr;
  size_t n_eot = 0;
  bool parse_special = true;  // false: a llama2.c vocabulary (no control-token parsing)
  bool show = false;
  uint32_t n_max = 256;
  const char *system = nullptr;
  gb_grammar *grammar = nullptr;  // --grammar / --json-schema / --tools: every reply follows it
  std::string tools;              // --tools: the file's text
  bool has_tools = false;

  std::vector<Msg> msgs;
  std::string last_render;   // the render fed up to the previous turn ("" when the cache is empty)
  std::string last_reply;    // the previous turn's reply text (in the cache after last_render)
  bool drop_pending = false; // the pending token ended the last reply: do not run it
  std::vector<int32_t> ids, ids2;

  ~Chat() {
    gb_session_destroy(s);
    gb_model_close(model);
    gb_grammar_destroy(grammar);
  }

  void reset_conversation() {
    msgs.clear();
    if (system) msgs.push_back({"system", system});
    last_render.clear();
    last_reply.clear();
    drop_pending = false;
    gb_session_reset(s);
  }

  uint32_t kv_tokens() const {
    uint32_t pos = 0, n_ctx = 0;
    gb_session_position(s, &pos, &n_ctx);
    return pos;
  }

  gb_status render(std::string *out) const {
    std::vector<gb_chat_message> m(msgs.size());
    for (size_t i = 0; i < msgs.size(); i++) m[i] = {msgs[i].role.c_str(), msgs[i].content.c_str()};
    gb_chat_options o;
    gb_chat_options_init(&o);
    if (has_tools) {
      o.tools = tools.data();
      o.tools_len = tools.size();
    }
    size_t need = 0;
    gb_status st = gb_chat_apply_ex(tmpl, m.data(), m.size(), &o, nullptr, 0, &need);
    if (st != GB_ERR_BUFFER_TOO_SMALL) return st == GB_OK ? GB_ERR_INVALID_ARGUMENT : st;
    std::vector<char> buf(need);
    size_t n = 0;
    st = gb_chat_apply_ex(tmpl, m.data(), m.size(), &o, buf.data(), buf.size(), &n);
    if (st == GB_OK) out->assign(buf.data(), n);
    return st;
  }

  gb_status encode(const std::string &text, uint32_t flags, std::vector<int32_t> *out) const {
    out->resize(GB_TOKENIZE_CAPACITY(text.size()));
    size_t n = 0;
    const gb_status st = gb_tokenizer_encode(tok, text.data(), text.size(), flags, out->data(), out->size(), &n);
    out->resize(st == GB_OK ? n : 0);
    return st;
  }

  // Tokens of text that continues the text in the cache: no space prefix
  // before its first piece of plain text; after a control token the
  // tokenizer's usual handling (SentencePiece puts the prefix there).
  gb_status encode_continuation(const std::string &text, std::vector<int32_t> *out) {
    const uint32_t sp = parse_special ? GB_TOKENIZE_PARSE_SPECIAL : 0u;
    if (ti.kind == GB_TOKENIZER_BPE || ti.kind == GB_TOKENIZER_BPE_UTF8) return encode(text, sp, out);  // no space prefix to avoid
    gb_status st = encode(text, sp | GB_TOKENIZE_NO_DUMMY_PREFIX, out);
    if (st != GB_OK || ti.kind != GB_TOKENIZER_SPM || !parse_special) return st;
    // Find the first control token and the text before it.
    size_t at = 0;
    for (size_t i = 0; i < out->size(); i++) {
      const int32_t id = (*out)[i];
      char plain[256], full[256];
      size_t lp = 0, lf = 0;
      if (gb_tokenizer_decode(tok, &id, 1, 0, plain, sizeof plain, &lp) != GB_OK) return st;
      if (gb_tokenizer_decode(tok, &id, 1, GB_DETOKENIZE_SPECIAL, full, sizeof full, &lf) != GB_OK) return st;
      if (text.compare(at, lf, full, lf) != 0) return st;  // not the text's bytes: keep the plain encoding
      if (lp == 0 && lf > 0) {
        // Plain text before it (no prefix), then the rest as usual.
        st = encode(text.substr(at), sp, &ids2);
        if (st != GB_OK) return st;
        out->resize(i);
        out->insert(out->end(), ids2.begin(), ids2.end());
        return GB_OK;
      }
      at += lf;
    }
    return GB_OK;
  }

  // Print reply[from, to) to stdout.
  static void emit(const std::string &reply, size_t from, size_t to) {
    if (to > from) fwrite(reply.data() + from, 1, to - from, stdout);
    fflush(stdout);
  }

  // Bytes at the end of text that could start an end-of-turn string.
  size_t holdback(const std::string &text) const {
    size_t h = 0;
    for (size_t k = 0; k < n_eot; k++) {
      const size_t n = strlen(eot[k]);
      for (size_t l = n > 0 ? n - 1 : 0; l > h; l--)
        if (text.size() >= l && !memcmp(text.data() + text.size() - l, eot[k], l)) {
          h = l;
          break;
        }
    }
    return h;
  }

  // Feed tokens (running or dropping the pending token first). Returns the
  // status of the library call.
  gb_status feed(const std::vector<int32_t> &t) {
    if (t.empty()) return GB_ERR_INVALID_ARGUMENT;
    if (drop_pending && t.size() >= 2) {
      // gb_feed discards the pending token without running it.
      gb_status st = gb_feed(s, t[0], nullptr);
      if (st != GB_OK) return st;
      drop_pending = false;
      return gb_prefill(s, t.data() + 1, t.size() - 1);
    }
    const gb_status st = gb_prefill(s, t.data(), t.size());
    if (st == GB_OK) drop_pending = false;
    return st;
  }

  // One user line. Returns false on a fatal error (printed).
  bool turn(const std::string &user, const char *role = "user") {
    msgs.push_back({role, user});
    std::string full;
    gb_status st = render(&full);
    if (st != GB_OK) {
      msgs.pop_back();
      return cli_error(C, "cannot render the conversation: %s", cli_detail(st)), false;
    }
    // The text the cache does not hold yet.
    std::string fed;
    bool fresh = last_render.empty();
    if (!fresh) {
      const std::string r = trim_ws(last_reply);
      const size_t at = full.compare(0, last_render.size(), last_render) == 0 ? full.find(r, last_render.size())
                                                                               : std::string::npos;
      if (at == std::string::npos) {
        fprintf(stderr, "gearbx chat: the template rewrote the conversation: running it again from the start\n");
        gb_session_reset(s);
        drop_pending = false;
        fresh = true;
      } else {
        fed = full.substr(at + r.size());
      }
    }
    if (fresh) fed = full;
    for (int attempt = 0;; attempt++) {
      if (fresh) {
        st = encode(fed, parse_special ? GB_TOKENIZE_PARSE_SPECIAL : 0u, &ids);
        if (st == GB_OK && ti.add_bos && ti.bos_id >= 0 && (ids.empty() || ids[0] != ti.bos_id))
          ids.insert(ids.begin(), ti.bos_id);
      } else {
        st = encode_continuation(fed, &ids);
      }
      if (st != GB_OK) return cli_error(C, "cannot tokenize the prompt: %s", cli_detail(st)), false;
      st = ids.empty() ? GB_OK : feed(ids);
      if (st == GB_OK) {
        if (show) {
          fprintf(stderr, "=== fed (%zu tokens) ===\n", ids.size());
          fwrite(fed.data(), 1, fed.size(), stderr);
          fprintf(stderr, "\n=== end fed ===\n");
        }
        break;
      }
      if (st != GB_ERR_CONTEXT_FULL) return cli_status_error(C, st, path), false;
      cli_detail(st);  // clear the library's message
      uint32_t pos = 0, n_ctx = 0;
      gb_session_position(s, &pos, &n_ctx);
      if (attempt > 0 || msgs.size() <= (system ? 2u : 1u)) {
        fprintf(stderr, "gearbx chat: the message does not fit in the context (%zu tokens, %u in the context): "
                "conversation reset\n", ids.size(), n_ctx);
        reset_conversation();
        return true;
      }
      fprintf(stderr, "gearbx chat: context full (%u of %u tokens): conversation reset\n", pos, n_ctx);
      reset_conversation();
      msgs.push_back({role, user});
      st = render(&full);
      if (st != GB_OK) return cli_error(C, "cannot render the conversation: %s", cli_detail(st)), false;
      fed = full;
      fresh = true;
    }
    if (ids.empty()) return true;
    // Each reply starts the grammar afresh.
    if (grammar && (st = gb_session_set_grammar(s, grammar)) != GB_OK) return cli_status_error(C, st, path), false;

    // Generate the reply.
    gb_utf8_stream u8;
    gb_utf8_stream_init(&u8);
    std::string reply;
    size_t printed = 0;
    const char *why = "limit";
    int32_t prev = ids.back();
    std::vector<char> piece;
    for (uint32_t k = 0; k < n_max; k++) {
      int32_t t = -1;
      st = gb_decode_step(s, &t, nullptr);
      if (st == GB_ERR_CONTEXT_FULL) {
        cli_detail(st);
        why = "context-full";
        break;
      }
      if (st != GB_OK) return cli_status_error(C, st, path), false;
      int eog = 0;
      gb_tokenizer_is_eog(tok, t, &eog);
      if (eog) { why = "eog"; break; }
      if (t == ti.bos_id) { why = "bos"; break; }
      const char *txt = nullptr;
      size_t len = 0;
      if (gb_tokenizer_token_text(tok, prev, t, &txt, &len) != GB_OK) len = 0;
      prev = t;
      if (len == 0) {
        // A control token: it ends the turn when it spells an end-of-turn string.
        char buf[256];
        size_t lf = 0;
        if (gb_tokenizer_decode(tok, &t, 1, GB_DETOKENIZE_SPECIAL, buf, sizeof buf, &lf) == GB_OK && lf > 0) {
          const std::string sp(buf, lf);
          bool stop = false;
          for (size_t e = 0; e < n_eot && !stop; e++) stop = sp == eot[e];
          if (stop) { why = "stop-string"; break; }
        }
        continue;
      }
      piece.resize(GB_UTF8_STREAM_CAPACITY(len));
      size_t n = 0;
      if (gb_utf8_stream_push(&u8, txt, len, piece.data(), piece.size(), &n) != GB_OK) n = 0;
      reply.append(piece.data(), n);
      bool stop = false;
      for (size_t e = 0; e < n_eot && !stop; e++)
        if (ends_with(reply, eot[e])) {
          reply.resize(reply.size() - strlen(eot[e]));
          stop = true;
        }
      if (stop) { why = "stop-string"; break; }
      const size_t upto = reply.size() - holdback(reply);
      if (upto > printed) {
        emit(reply, printed, upto);
        printed = upto;
      }
    }
    piece.resize(GB_UTF8_STREAM_CAPACITY(0));
    size_t n = 0;
    if (gb_utf8_stream_flush(&u8, piece.data(), piece.size(), &n) == GB_OK) reply.append(piece.data(), n);
    emit(reply, printed, reply.size());
    fputc('\n', stdout);
    fflush(stdout);

    if (has_tools) cli_print_tool_calls(C, tmpl, reply);
    msgs.push_back({"assistant", reply});
    last_render = full;
    last_reply = reply;
    drop_pending = strcmp(why, "limit") != 0;
    if (show) fprintf(stderr, "[end: %s, kv=%u tokens]\n", why, kv_tokens());
    if (!strcmp(why, "context-full")) {
      uint32_t pos = 0, n_ctx = 0;
      gb_session_position(s, &pos, &n_ctx);
      fprintf(stderr, "gearbx chat: context full (%u of %u tokens): conversation reset\n", pos, n_ctx);
      reset_conversation();
    }
    return true;
  }
};

}  // namespace

int gb_cli_chat(int argc, char **argv) {
  Chat c;
  const char *C = c.C;
  const char *model = nullptr, *tname = nullptr, *gpath = nullptr, *spath = nullptr, *tpath = nullptr;
  gb_tool_choice choice = GB_TOOL_CHOICE_AUTO;
  uint32_t ctx = 0, threads = 1;
  gb_session_options so;
  gb_session_options_init(&so);
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (!strcmp(o, "--help")) return chat_usage(), 0;
    if (!strcmp(o, "--show-prompt")) { c.show = true; continue; }
    if (!strcmp(o, "--deterministic")) { so.deterministic = 1; continue; }
    if (!v) return cli_error(C, "option %s needs a value", o);
    if (!strcmp(o, "-m")) model = v;
    else if (!strcmp(o, "--system")) c.system = v;
    else if (!strcmp(o, "--template")) tname = v;
    else if (!strcmp(o, "-n")) ok = cli_parse_u32(C, o, v, &c.n_max);
    else if (!strcmp(o, "--temp")) ok = cli_parse_f32(C, o, v, &so.sampler.temperature);
    else if (!strcmp(o, "--top-k")) ok = cli_parse_u32(C, o, v, &so.sampler.top_k);
    else if (!strcmp(o, "--top-p")) ok = cli_parse_f32(C, o, v, &so.sampler.top_p);
    else if (!strcmp(o, "--min-p")) ok = cli_parse_f32(C, o, v, &so.sampler.min_p);
    else if (!strcmp(o, "--seed")) ok = cli_parse_u64(C, o, v, &so.sampler.seed);
    else if (!strcmp(o, "--ctx")) ok = cli_parse_u32(C, o, v, &ctx);
    else if (!strcmp(o, "--threads")) ok = cli_parse_u32(C, o, v, &threads);
    else if (!strcmp(o, "--gear")) ok = cli_parse_gear(C, v, &so.gear);
    else if (!strcmp(o, "--grammar")) gpath = v;
    else if (!strcmp(o, "--json-schema")) spath = v;
    else if (!strcmp(o, "--tools")) tpath = v;
    else if (!strcmp(o, "--load")) ok = cli_parse_load(C, v);
    else if (!strcmp(o, "--tool-choice")) {
      if (!strcmp(v, "auto")) choice = GB_TOOL_CHOICE_AUTO;
      else if (!strcmp(v, "required")) choice = GB_TOOL_CHOICE_REQUIRED;
      else return cli_error(C, "--tool-choice: 'auto' or 'required', not '%s'", v);
    }
    else return cli_error(C, "unknown option '%s'", o);
    if (!ok) return 1;
    i++;
  }
  if (!model) return cli_error(C, "-m MODEL.gbx is required");
  if (tname && gb_chat_template_from_name(tname, &c.tmpl) != GB_OK)
    return cli_error(C, "unknown chat template '%s' (%s)", tname, kTemplates);
  so.n_ctx = ctx;
  so.n_threads = threads;
  if (tpath && (gpath || spath)) return cli_error(C, "--tools brings its own grammar: not with --grammar or --json-schema");
  if ((gpath || spath) && !(c.grammar = cli_load_grammar(C, gpath, spath))) return 1;
  if (tpath) {
    size_t len = 0;
    char *text = cli_read_file(tpath, &len);
    if (!text) return cli_error(C, "cannot read '%s': %s", tpath, strerror(errno));
    c.tools.assign(text, len);
    free(text);
    c.has_tools = true;
  }

  c.path = model;
  c.model = cli_open_model(C, model);
  if (!c.model) return 1;
  gb_status st = gb_model_tokenizer(c.model, &c.tok);
  memset(&c.ti, 0, sizeof c.ti);
  c.ti.struct_size = sizeof c.ti;
  if (st == GB_OK) st = gb_tokenizer_get_info(c.tok, &c.ti);
  if (st != GB_OK) return cli_error(C, "'%s': no tokenizer: %s", model, cli_detail(st));
  if (!tname) {
    const char *jinja = nullptr;
    size_t jlen = 0;
    if (gb_tokenizer_chat_template(c.tok, &jinja, &jlen) != GB_OK) {
      cli_detail(GB_OK);
      return cli_error(C, "'%s' has no chat template: pass --template NAME (%s)", model, kTemplates);
    }
    if (gb_chat_template_detect(jinja, jlen, &c.tmpl) != GB_OK) {
      cli_detail(GB_OK);
      return cli_error(C, "the chat template of '%s' is not one of the built-in ones: pass --template NAME (%s)", model,
                       kTemplates);
    }
  }
  st = gb_chat_eot_strings(c.tmpl, &c.eot, &c.n_eot);
  if (st != GB_OK) return cli_error(C, "%s", cli_detail(st));
  if (c.has_tools && c.tmpl == GB_CHAT_TEMPLATE_GEMMA4) {
    // Gemma 4's call syntax has no grammar yet: its replies run
    // unconstrained, and their calls are still parsed and printed.
    fprintf(stderr, "gearbx chat: note: gemma4's tool calls are not constrained by a grammar; they are parsed after each reply\n");
  } else if (c.has_tools && !(c.grammar = cli_tools_grammar(C, c.tmpl, c.tools, choice, tpath))) {
    return 1;
  }
  so.grammar = c.grammar;
  if (c.ti.kind == GB_TOKENIZER_LLAMA2C) {
    c.parse_special = false;
    fprintf(stderr, "gearbx chat: warning: a llama2.c vocabulary has no control-token parsing: the template's markers "
            "are fed as plain text\n");
  }
  st = gb_session_create(c.model, &so, nullptr, 0, &c.s);
  if (st != GB_OK) return cli_error(C, "%s", cli_detail(st));
  c.reset_conversation();
  if (c.show) fprintf(stderr, "[template %s]\n", gb_chat_template_name(c.tmpl));

  const bool tty = isatty(0) != 0;
  char *line = nullptr;
  size_t cap = 0;
  int rc = 0;
  for (;;) {
    if (tty) {
      fputs("> ", stderr);
      fflush(stderr);
    }
    const ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) break;
    std::string u(line, (size_t)n);
    while (!u.empty() && (u.back() == '\n' || u.back() == '\r')) u.pop_back();
    if (u == "/reset") {
      c.reset_conversation();
      fprintf(stderr, "[reset, kv=%u tokens]\n", c.kv_tokens());
      continue;
    }
    if (trim_ws(u).empty()) continue;
    const bool tool = u.compare(0, 6, "/tool ") == 0;
    if (tool && !c.has_tools) {
      fprintf(stderr, "gearbx chat: '/tool' returns a tool's result: start the chat with --tools FILE\n");
      continue;
    }
    if (!c.turn(tool ? u.substr(6) : u, tool ? "tool" : "user")) { rc = 1; break; }
  }
  free(line);
  return rc;
}
