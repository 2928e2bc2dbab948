// cmd_run.cpp — `gearbx run`: generate text, streaming it to stdout. Gear
// routing goes to stderr: the cold-start gear of an auto session with a
// prompt, a strip of one letter per token (L/M/H/F) and a summary; --trace
// writes every step's telemetry as CSV and --plot an SVG of the entropy and
// gears (plot.cpp). Both files are written to FILE.tmp and renamed at the
// end, so a failed run leaves an existing file as it was; an unwritable path
// is reported before the model is loaded.
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cli.h"

namespace {
struct RunArgs {
  const char *model = nullptr, *prompt = "", *trace = nullptr, *plot = nullptr;
  const char *save_state = nullptr, *load_state = nullptr;  // --save-state / --load-state FILE
  const char *grammar = nullptr, *schema = nullptr;           // --grammar / --json-schema FILE
  const char *tools = nullptr, *tmpl = nullptr;               // --tools FILE, --template NAME
  gb_tool_choice tool_choice = GB_TOOL_CHOICE_AUTO;
  uint32_t n = 256, ctx = 0, threads = 1;
  uint64_t budget = 0;  // --budget: plan the session (gb_plan)
  bool quiet = false, json = false;
  std::vector<const char *> stops;  // --stop
  std::vector<gb_logit_bias> bias;  // --logit-bias
  int color = -1;  // -1 auto (stdout is a terminal), 0 never, 1 always
};

// Ctrl-C: the session's abort callback stops generation between passes (the
// text so far and the summary are still printed); a second Ctrl-C kills.
volatile sig_atomic_t g_interrupted = 0;
void on_sigint(int) {
  g_interrupted = 1;
  signal(SIGINT, SIG_DFL);
}
int interrupted(void *) { return g_interrupted != 0; }

// Per-gear colours of the generated text (ANSI SGR): low green, mid yellow,
// high red, f32 magenta.
const char *const kGearColor[GB_GEAR_COUNT] = {"\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[35m"};
const char kColorReset[] = "\x1b[0m";

// Whether to colour: --color, else a terminal that is not "dumb" and no
// NO_COLOR in the environment.
bool want_color(int opt) {
  if (opt >= 0) return opt == 1;
  const char *term = getenv("TERM");
  return isatty(1) && !getenv("NO_COLOR") && !(term && !strcmp(term, "dumb"));
}

bool tokenizer_adds_bos(gb_model *m) {
  const gb_tokenizer *tk = nullptr;
  gb_tokenizer_info ti;
  memset(&ti, 0, sizeof ti);
  ti.struct_size = sizeof ti;
  return gb_model_tokenizer(m, &tk) == GB_OK && gb_tokenizer_get_info(tk, &ti) == GB_OK && ti.add_bos;
}

// --tools: the template (--template, else the model's), the prompt as the
// user's message rendered with the tools, and the tools' grammar.
bool run_tools_prompt(const char *C, gb_model *m, const RunArgs *a, gb_chat_template *tmpl, std::string *rendered,
                      gb_grammar **grammar) {
  if (a->grammar || a->schema) return cli_error(C, "--tools brings its own grammar: not with --grammar or --json-schema"), false;
  if (a->load_state) return cli_error(C, "--tools renders a new conversation: not with --load-state"), false;
  if (a->tmpl) {
    if (gb_chat_template_from_name(a->tmpl, tmpl) != GB_OK) return cli_error(C, "unknown chat template '%s'", a->tmpl), false;
  } else {
    const gb_tokenizer *tk = nullptr;
    const char *jinja = nullptr;
    size_t jlen = 0;
    if (gb_model_tokenizer(m, &tk) != GB_OK || gb_tokenizer_chat_template(tk, &jinja, &jlen) != GB_OK ||
        gb_chat_template_detect(jinja, jlen, tmpl) != GB_OK) {
      cli_detail(GB_OK);
      return cli_error(C, "--tools: the model's chat template is not a built-in one: pass --template NAME"), false;
    }
  }
  size_t len = 0;
  char *text = cli_read_file(a->tools, &len);
  if (!text) return cli_error(C, "cannot read '%s': %s", a->tools, strerror(errno)), false;
  const std::string tools(text, len);
  free(text);
  gb_chat_options o;
  gb_chat_options_init(&o);
  o.tools = tools.data();
  o.tools_len = tools.size();
  const gb_chat_message msg = {"user", a->prompt};
  size_t need = 0;
  gb_status st = gb_chat_apply_ex(*tmpl, &msg, 1, &o, nullptr, 0, &need);
  if (st == GB_ERR_BUFFER_TOO_SMALL) {
    rendered->resize(need);
    st = gb_chat_apply_ex(*tmpl, &msg, 1, &o, &(*rendered)[0], need, &need);
    rendered->resize(need);
  }
  if (st != GB_OK) return cli_error(C, "tools '%s': %s", a->tools, cli_detail(st)), false;
  *grammar = cli_tools_grammar(C, *tmpl, tools, a->tool_choice, a->tools);
  return *grammar != nullptr;
}

// s[0..n) as a JSON string body.
void json_str(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '\n') fputs("\\n", f);
    else if (c == '\t') fputs("\\t", f);
    else if (c == '\r') fputs("\\r", f);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
}

int run_usage() {
  fprintf(stderr,
          "usage: gearbx run -m MODEL.gbx [-p PROMPT] [-n TOKENS] [--gear default|low|mid|high|f32|auto|spec]\n"
          "                  [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--gumbel]\n"
          "                  [--ctx N] [--threads N] [--trace FILE.csv] [--plot FILE.svg] [--quiet]\n"
          "                  [--deterministic] [--spec-k K] [--spec-verify mid|high|f32] [--spec-draft low|mid]\n"
          "                  [--spec-stop BITS] [--spec-adapt 0|1|2] [--color auto|always|never] [--json]\n"
          "  --gear default    (the default) the file's default tier: mid, or a quantized GGUF's own tier\n"
          "  --gear spec       draft on the low tier, verify on high in one batched pass: high's tokens\n"
          "  --trace FILE.csv  one row of telemetry per decode step\n"
          "  --plot FILE.svg   entropy, thresholds and gears per step as an SVG chart\n"
          "  --deterministic   portable generic kernels only: the same tokens on every CPU\n"
          "  --budget SIZE     plan gear, KV pool and prefill batch to fit SIZE bytes (512M, 1G;\n"
          "                    arena + resident weights, gearbx plan prints the plan)\n"
          "  --color WHEN      colour each generated token by the gear that produced it (green low,\n"
          "                    yellow mid, red high, magenta f32): auto (default: when stdout is a\n"
          "                    terminal and NO_COLOR is unset), always, never\n"
          "  --json            one JSON object per generated token on stdout (its text, gear and the\n"
          "                    step's telemetry) instead of the text\n"
          "  --repeat-penalty F --frequency-penalty F --presence-penalty F --penalty-window N\n"
          "                    penalize tokens of the last N (default 64) that ran (off: 1, 0, 0)\n"
          "  --logit-bias TOKEN=BIAS  add BIAS to TOKEN's logit (-inf bans it); repeatable\n"
          "  --stop TEXT       end when the generated text contains TEXT (not printed); repeatable\n"
          CLI_LOAD_USAGE
          "  --grammar FILE    generate only text of the GBNF grammar in FILE (its rule 'root')\n"
          "  --json-schema FILE  generate only JSON that the JSON Schema in FILE accepts\n"
          "  --tools FILE      -p is a user message, rendered with these tool definitions (a JSON array) by\n"
          "                    the chat template (qwen2.5, qwen3, llama3.1: --template NAME, else the\n"
          "                    model's); the reply calls them with valid arguments, each call printed after\n"
          "                    it as 'tool_call: {\"name\": ..., \"arguments\": ...}'\n"
          "  --tool-choice auto|required  auto (default): a call or a text reply; required: a call\n"
          "  --save-state FILE after generating, write the session state to FILE (via FILE.tmp)\n"
          "  --load-state FILE restore a saved state instead of prefilling a prompt, then decode on\n"
          "                    (same model and options; -p then appends its text, without BOS)\n"
          CLI_KV_USAGE);
  return 1;
}

const char kTraceHeader[] =
    "step,pos,token,gear,next_gear,predicted_gear,shifted,tokens_in_gear,entropy,entropy_smoothed,theta_low,theta_high,"
    "catastrophic,weight_bytes_read,resident_weight_bytes,step_us,kv_tokens,kv_bytes_used,kv_pool_bytes,kv_bits_per_element,"
    "kv_at_2,kv_at_3,kv_at_4,kv_at_8,kv_at_16,kv_at_32,kv_reallocations,kv_requantized,kv_evicted\n";

// An output file written as PATH.tmp and renamed over PATH by commit().
// Created when the run starts (so an unwritable path fails early); removed
// if the run does not commit.
struct TmpFile {
  std::string path, tmp;
  FILE *f = nullptr;
  bool committed = false;

  bool open(const char *p) {
    path = p;
    tmp = path + ".tmp";
    f = fopen(tmp.c_str(), "w");
    return f != nullptr;
  }
  // Close and rename; false (errno set, the temporary removed) on failure.
  bool commit() {
    const bool wrote = !ferror(f);
    const bool closed = fclose(f) == 0;
    f = nullptr;
    if (!wrote || !closed || rename(tmp.c_str(), path.c_str()) != 0) {
      const int e = errno ? errno : EIO;
      remove(tmp.c_str());
      errno = e;
      return false;
    }
    committed = true;
    return true;
  }
  ~TmpFile() {
    if (f) fclose(f);
    if (!tmp.empty() && !committed) remove(tmp.c_str());
  }
};

const char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}
}  // namespace

int gb_cli_run(int argc, char **argv) {
  const char *C = "run";
  RunArgs a;
  gb_session_options so;
  gb_session_options_init(&so);
  gb_session_experimental sx;  // the research controls some flags set
  gb_session_experimental_init(&sx);
  so.experimental = &sx;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (!strcmp(o, "--help")) return run_usage(), 0;
    if (!strcmp(o, "--quiet")) { a.quiet = true; continue; }
    if (!strcmp(o, "--gumbel")) { so.sampler.method = GB_SAMPLE_GUMBEL; continue; }
    if (!strcmp(o, "--deterministic")) { so.deterministic = 1; continue; }
    if (!strcmp(o, "--json")) { a.json = true; continue; }
    const int kr = cli_parse_kv_option(C, o, v, &so.kv);
    if (kr < 0) return 1;
    if (kr == 2) continue;
    if (kr == 1) { i++; continue; }
    if (!v) return cli_error(C, "option %s needs a value", o);
    if (!strcmp(o, "-m")) a.model = v;
    else if (!strcmp(o, "-p")) a.prompt = v;
    else if (!strcmp(o, "-n")) ok = cli_parse_u32(C, o, v, &a.n);
    else if (!strcmp(o, "--gear")) ok = cli_parse_gear(C, v, &so.gear);
    else if (!strcmp(o, "--temp")) ok = cli_parse_f32(C, o, v, &so.sampler.temperature);
    else if (!strcmp(o, "--top-k")) ok = cli_parse_u32(C, o, v, &so.sampler.top_k);
    else if (!strcmp(o, "--top-p")) ok = cli_parse_f32(C, o, v, &so.sampler.top_p);
    else if (!strcmp(o, "--min-p")) ok = cli_parse_f32(C, o, v, &so.sampler.min_p);
    else if (!strcmp(o, "--seed")) ok = cli_parse_u64(C, o, v, &so.sampler.seed);
    else if (!strcmp(o, "--ctx")) ok = cli_parse_u32(C, o, v, &a.ctx);
    else if (!strcmp(o, "--budget")) ok = cli_parse_bytes(C, o, v, &a.budget);
    else if (!strcmp(o, "--threads")) ok = cli_parse_u32(C, o, v, &a.threads);
    else if (!strcmp(o, "--trace")) a.trace = v;
    else if (!strcmp(o, "--color")) {
      if (!strcmp(v, "auto")) a.color = -1;
      else if (!strcmp(v, "always")) a.color = 1;
      else if (!strcmp(v, "never")) a.color = 0;
      else return cli_error(C, "--color: '%s' is not auto, always or never", v);
    }
    else if (!strcmp(o, "--plot")) a.plot = v;
    else if (!strcmp(o, "--spec-k")) ok = cli_parse_u32(C, o, v, &so.spec_k);
    else if (!strcmp(o, "--spec-verify")) ok = cli_parse_gear(C, v, &so.spec_verify_gear);
    else if (!strcmp(o, "--spec-draft")) ok = cli_parse_gear(C, v, &so.spec_draft_gear);
    else if (!strcmp(o, "--spec-stop")) ok = cli_parse_f32(C, o, v, &sx.spec_stop_entropy);
    else if (!strcmp(o, "--spec-adapt")) ok = cli_parse_u32(C, o, v, &sx.spec_adapt);
    else if (!strcmp(o, "--repeat-penalty")) ok = cli_parse_f32(C, o, v, &so.repeat_penalty);
    else if (!strcmp(o, "--frequency-penalty")) ok = cli_parse_f32(C, o, v, &so.frequency_penalty);
    else if (!strcmp(o, "--presence-penalty")) ok = cli_parse_f32(C, o, v, &so.presence_penalty);
    else if (!strcmp(o, "--penalty-window")) ok = cli_parse_u32(C, o, v, &so.penalty_window);
    else if (!strcmp(o, "--stop")) a.stops.push_back(v);
    else if (!strcmp(o, "--save-state")) a.save_state = v;
    else if (!strcmp(o, "--grammar")) a.grammar = v;
    else if (!strcmp(o, "--json-schema")) a.schema = v;
    else if (!strcmp(o, "--tools")) a.tools = v;
    else if (!strcmp(o, "--load")) ok = cli_parse_load(C, v);
    else if (!strcmp(o, "--template")) a.tmpl = v;
    else if (!strcmp(o, "--tool-choice")) {
      if (!strcmp(v, "auto")) a.tool_choice = GB_TOOL_CHOICE_AUTO;
      else if (!strcmp(v, "required")) a.tool_choice = GB_TOOL_CHOICE_REQUIRED;
      else return cli_error(C, "--tool-choice: 'auto' or 'required', not '%s'", v);
    }
    else if (!strcmp(o, "--load-state")) a.load_state = v;
    else if (!strcmp(o, "--logit-bias")) {
      char *end = nullptr;
      const long tokv = strtol(v, &end, 10);
      gb_logit_bias b;
      b.token = (int32_t)tokv;
      if (end == v || *end != '=' || tokv < 0 || tokv > INT32_MAX) return cli_error(C, "--logit-bias: '%s' is not TOKEN=BIAS", v);
      const char *bv = end + 1;
      if (!strcmp(bv, "-inf")) b.bias = -INFINITY;
      else if (!cli_parse_f32(C, o, bv, &b.bias)) return 1;
      a.bias.push_back(b);
    }
    else return cli_error(C, "unknown option '%s'", o);
    if (!ok) return 1;
    i++;
  }
  if (!a.model) return cli_error(C, "-m MODEL.gbx is required");
  so.abort_callback = interrupted;
  signal(SIGINT, on_sigint);
  so.stop_strings = a.stops.empty() ? nullptr : a.stops.data();
  so.n_stop_strings = (uint32_t)a.stops.size();
  so.logit_bias = a.bias.empty() ? nullptr : a.bias.data();
  so.n_logit_bias = (uint32_t)a.bias.size();
  // Text that could still turn out to start a stop string is held back
  // (each piece with its gear, for the colours).
  size_t hold = 0;
  for (const char *x : a.stops) hold = strlen(x) > hold ? strlen(x) : hold;
  hold = hold > 0 ? hold - 1 : 0;
  struct Held {
    std::string text;
    unsigned gear;
  };
  std::vector<Held> held;
  so.n_ctx = a.ctx;
  so.n_threads = a.threads;
  if (a.trace) sx.measure_residency = 1;  // the trace's resident_weight_bytes column

  // Output files first: an unwritable path fails before any work. The plot's
  // temporary is only a probe here; cli_write_plot_svg() rewrites it.
  TmpFile trace, plot;
  if (a.trace && !trace.open(a.trace)) return cli_error(C, "cannot write trace file '%s': %s", a.trace, strerror(errno));
  if (a.plot && !plot.open(a.plot)) return cli_error(C, "cannot write plot file '%s': %s", a.plot, strerror(errno));
  if (plot.f) {
    fclose(plot.f);
    plot.f = nullptr;
  }

  gb_grammar *grammar = nullptr;
  if ((a.grammar || a.schema) && !(grammar = cli_load_grammar(C, a.grammar, a.schema))) return 1;
  so.grammar = grammar;
  gb_model *m = cli_open_model(C, a.model);
  if (!m) {
    gb_grammar_destroy(grammar);
    return 1;
  }
  // --budget: gear, KV pool and prefill batch chosen to fit (the other
  // options as given).
  if (a.budget && !cli_plan(C, m, a.budget, a.ctx, &so, a.quiet)) {
    gb_model_close(m);
    gb_grammar_destroy(grammar);
    return 1;
  }
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);
  // --tools: the prompt is the user's message, rendered with the tools by the
  // chat template; the reply is constrained to the tools' calls.
  gb_chat_template tmpl = GB_CHAT_TEMPLATE_NONE;
  std::string rendered;
  if (a.tools && !run_tools_prompt(C, m, &a, &tmpl, &rendered, &grammar)) {
    gb_model_close(m);
    gb_grammar_destroy(grammar);
    return 1;
  }
  if (a.tools) {
    so.grammar = grammar;
    a.prompt = rendered.c_str();
  }
  int rc = 0;
  gb_session *s = nullptr;
  const size_t plen = strlen(a.prompt);
  size_t cap = GB_TOKENIZE_CAPACITY(plen), n_prompt = 0;
  int32_t *prompt = static_cast<int32_t *>(malloc(cap * sizeof(int32_t)));
  char *strip = static_cast<char *>(malloc((size_t)a.n + 1));
  std::vector<CliPlotStep> steps;
  gb_status st = prompt && strip ? GB_OK : GB_ERR_OUT_OF_MEMORY;
  // --load-state: the prompt (if any) continues the restored text, no BOS.
  if (st == GB_OK && a.tools) {
    // The template writes the BOS text where the model wants it; BOS is
    // still put first when the tokenizer asks for it and the text lacks it.
    st = gb_tokenize(m, a.prompt, plen, GB_TOKENIZE_PARSE_SPECIAL, prompt + 1, cap - 1, &n_prompt);
    size_t first = 1;
    if (st == GB_OK && mi.bos_id >= 0 && tokenizer_adds_bos(m) && (n_prompt == 0 || prompt[1] != mi.bos_id)) {
      prompt[0] = mi.bos_id;
      first = 0;
      n_prompt++;
    }
    if (first) memmove(prompt, prompt + 1, n_prompt * sizeof *prompt);
  } else if (st == GB_OK) {
    st = gb_tokenize(m, a.prompt, plen, a.load_state ? 0u : (uint32_t)GB_TOKENIZE_ADD_BOS, prompt, cap, &n_prompt);
  }
  if (st == GB_OK) st = gb_session_create(m, &so, nullptr, 0, &s);
  if (st == GB_OK && a.load_state) {
    std::vector<uint8_t> img;
    FILE *f = fopen(a.load_state, "rb");
    if (!f) {
      rc = cli_error(C, "cannot read state file '%s': %s", a.load_state, strerror(errno));
      st = GB_ERR_IO;
    } else {
      uint8_t buf[65536];
      size_t k;
      while ((k = fread(buf, 1, sizeof buf, f)) > 0) img.insert(img.end(), buf, buf + k);
      fclose(f);
      st = gb_session_state_load(s, img.data(), img.size());
    }
  }
  // Cold start: an auto session with a prompt starts in the gear the
  // prompt classifier picks, before the prefill runs.
  if (st == GB_OK && !a.load_state && so.gear == GB_GEAR_AUTO && plen > 0) {
    float score = 0;
    const gb_gear g = gb_classify_prompt(a.prompt, plen, &sx.monitor, &score);
    st = gb_session_set_gear(s, g);
    if (st == GB_OK && !a.quiet) fprintf(stderr, "gearbx run: prompt score %.2f -> start in %s\n", (double)score, gb_gear_name(g));
  }
  if (st == GB_OK && (!a.load_state || n_prompt > 0)) st = gb_prefill(s, prompt, n_prompt);
  if (st != GB_OK && rc == 0) rc = cli_status_error(C, st, a.model);
  const gb_tokenizer *tk = nullptr;
  gb_model_tokenizer(m, &tk);
  const bool color = !a.json && want_color(a.color);
  // Text goes out through a UTF-8 stream: a character split over two byte
  // tokens prints whole, never as two broken halves.
  gb_utf8_stream u8;
  gb_utf8_stream_init(&u8);
  char u8buf[GB_UTF8_STREAM_CAPACITY(1024)];
  auto emit = [&](const char *t, size_t l, FILE *f) {
    while (l > 0) {
      const size_t k = l < 1024 ? l : 1024;
      size_t n = 0;
      if (gb_utf8_stream_push(&u8, t, k, u8buf, sizeof u8buf, &n) == GB_OK) fwrite(u8buf, 1, n, f);
      t += k;
      l -= k;
    }
  };
  if (rc == 0) {
    if (trace.f) fputs(kTraceHeader, trace.f);
    // Echo the prompt (after BOS), then stream the generation.
    // (A restored state's text was printed by the run that saved it.)
    int32_t prev = a.load_state ? -1 : prompt[0];
    for (size_t i = a.load_state ? 0 : 1; i < n_prompt && !a.json; i++) {
      const char *t;
      size_t l;
      if (gb_token_to_text(m, prev, prompt[i], &t, &l) == GB_OK) emit(t, l, stdout);
      prev = prompt[i];
    }
    if (n_prompt > 0) prev = prompt[n_prompt - 1];
    uint32_t per_gear[GB_GEAR_COUNT] = {0}, shifts = 0, made = 0;
    gb_step_info last;
    memset(&last, 0, sizeof last);
    uint64_t total_ns = 0, sp_rounds = 0, sp_drafted = 0, sp_accepted = 0, bytes_total = 0;
    std::string reply;  // --tools: the generated text, for the calls in it
    for (uint32_t step = 0; step < a.n; step++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      int32_t tok;
      st = gb_decode_step(s, &tok, &info);
      if (st == GB_ERR_ABORTED) {
        fprintf(stderr, "\ngearbx run: interrupted after %u tokens\n", made);
        rc = 130;
        break;
      }
      if (st == GB_ERR_CONTEXT_FULL) {
        fprintf(stderr, "gearbx run: context full after %u tokens\n", made);
        break;
      }
      if (st != GB_OK) { rc = cli_status_error(C, st, a.model); break; }
      const unsigned g = (unsigned)info.gear < GB_GEAR_COUNT ? (unsigned)info.gear : (unsigned)GB_GEAR_HIGH;
      per_gear[g]++;
      shifts += info.shifted;
      total_ns += info.step_ns;
      bytes_total += info.weight_bytes_read;
      if (info.spec_round) {
        sp_rounds++;
        sp_drafted += info.spec_drafted;
        sp_accepted += info.spec_accepted;
      }
      strip[made++] = "LMHF"[g];
      last = info;
      if (trace.f)
        fprintf(trace.f, "%u,%u,%d,%s,%s,%s,%u,%u,%.5f,%.5f,%.5f,%.5f,%u,%llu,%llu,%.1f,%u,%llu,%llu,%.4f,%u,%u,%u,%u,%u,%u,%llu,%llu,%llu\n",
                step, info.pos, tok, gb_gear_name(info.gear), gb_gear_name(info.next_gear), gb_gear_name(info.predicted_gear),
                info.shifted, info.tokens_in_gear, (double)info.entropy, (double)info.entropy_smoothed, (double)info.theta_low,
                (double)info.theta_high, info.catastrophic, (unsigned long long)info.weight_bytes_read,
                (unsigned long long)info.resident_weight_bytes, (double)info.step_ns / 1e3, info.kv_tokens,
                (unsigned long long)info.kv_bytes_used, (unsigned long long)info.kv_pool_bytes, (double)info.kv_bits_per_element,
                info.kv_tokens_at_bits[0], info.kv_tokens_at_bits[1], info.kv_tokens_at_bits[2], info.kv_tokens_at_bits[3],
                info.kv_tokens_at_bits[4], info.kv_tokens_at_bits[5], (unsigned long long)info.kv_reallocations,
                (unsigned long long)info.kv_requantized, (unsigned long long)info.kv_evicted);
      if (a.plot) {
        CliPlotStep p;
        p.gear = info.gear;
        p.next_gear = info.next_gear;
        p.shifted = info.shifted != 0;
        p.catastrophic = info.catastrophic != 0;
        p.entropy = info.entropy;
        p.entropy_smoothed = info.entropy_smoothed;
        p.theta_low = info.theta_low;
        p.theta_high = info.theta_high;
        steps.push_back(p);
      }
      // End of text or turn (the tokenizer's end-of-generation ids; a BOS
      // ends a llama2.c document too), or a stop string.
      const bool eog = info.end == GB_STEP_END_EOG || tok == mi.bos_id;
      const bool stop = eog || info.end == GB_STEP_END_STOP;
      const char *t = "";
      size_t l = 0;
      if (!eog && gb_token_to_text(m, prev, tok, &t, &l) != GB_OK) l = 0;
      if (a.tools) reply.append(t, l);
      if (a.json) {
        printf("{\"step\":%u,\"pos\":%u,\"token\":%d,\"text\":\"", step, info.pos, tok);
        json_str(stdout, t, l);
        printf("\",\"gear\":\"%s\",\"next_gear\":\"%s\",\"shifted\":%u,\"entropy\":%.5f,\"entropy_smoothed\":%.5f,"
               "\"weight_bytes_read\":%llu,\"step_us\":%.1f,\"kv_tokens\":%u,\"kv_bytes_used\":%llu,\"kv_bits_per_element\":%.4f,"
               "\"end\":%s}\n",
               gb_gear_name(info.gear), gb_gear_name(info.next_gear), info.shifted, (double)info.entropy,
               (double)info.entropy_smoothed, (unsigned long long)info.weight_bytes_read, (double)info.step_ns / 1e3,
               info.kv_tokens, (unsigned long long)info.kv_bytes_used, (double)info.kv_bits_per_element,
               stop ? "true" : "false");
      } else {
        held.push_back(Held{std::string(t, l), g});
        size_t total = 0;
        for (const Held &h : held) total += h.text.size();
        if (info.end == GB_STEP_END_STOP) {  // the stop string is not printed
          size_t cut = info.stop_trim < total ? info.stop_trim : total;
          while (cut > 0) {
            Held &h = held.back();
            const size_t k = cut < h.text.size() ? cut : h.text.size();
            h.text.resize(h.text.size() - k);
            cut -= k;
            if (h.text.empty()) held.pop_back();
          }
          total = 0;
        }
        // Print all but the bytes a stop string could still start with.
        size_t printable = stop ? SIZE_MAX : total > hold ? total - hold : 0;
        while (!held.empty() && printable > 0) {
          Held &h = held.front();
          const size_t k = printable < h.text.size() ? printable : h.text.size();
          if (color) fputs(kGearColor[h.gear], stdout);
          emit(h.text.data(), k, stdout);
          if (color) fputs(kColorReset, stdout);
          h.text.erase(0, k);
          printable -= k;
          if (h.text.empty()) held.erase(held.begin());
        }
      }
      fflush(stdout);
      if (stop) break;
      prev = tok;
    }
    if (!a.json) {
      size_t n = 0;
      if (gb_utf8_stream_flush(&u8, u8buf, sizeof u8buf, &n) == GB_OK) fwrite(u8buf, 1, n, stdout);
      fputc('\n', stdout);
    }
    if (a.tools) cli_print_tool_calls(C, tmpl, reply);
    fflush(stdout);  // the story's last line before the summary on stderr
    strip[made] = 0;
    if (!a.quiet && made > 0) {
      fprintf(stderr, "gears (L=low M=mid H=high F=f32, one letter per token):\n%s\n", strip);
      fprintf(stderr, "policy %s: %u tokens, low %.0f%% mid %.0f%% high %.0f%% f32 %.0f%%, %u shifts, %.1f tok/s\n",
              gb_gear_name(so.gear), made, 100.0 * per_gear[0] / made, 100.0 * per_gear[1] / made, 100.0 * per_gear[2] / made,
              100.0 * per_gear[3] / made, shifts, total_ns ? made / (total_ns / 1e9) : 0.0);
      if (so.gear == GB_GEAR_SPEC && sp_rounds > 0)
        fprintf(stderr, "spec: %llu rounds, %llu drafted, %llu accepted (%.0f%%), %.2f tokens per verify pass, %.3f MB of weights read per token\n",
                (unsigned long long)sp_rounds, (unsigned long long)sp_drafted, (unsigned long long)sp_accepted,
                sp_drafted ? 100.0 * (double)sp_accepted / (double)sp_drafted : 0.0, (double)made / (double)sp_rounds,
                (double)bytes_total / made / 1e6);
      else
        fprintf(stderr, "%.3f MB of weights read per token\n", (double)bytes_total / made / 1e6);
      fprintf(stderr,
              "kv %s: %u tokens cached, %llu of %llu pool bytes, %.2f bits/element (2/3/4/8/16/32-bit token-layers %u/%u/%u/%u/%u/%u), "
              "%llu reallocations, %llu step-downs, %llu evicted\n",
              gb_kv_policy_name(so.kv.policy), last.kv_tokens, (unsigned long long)last.kv_bytes_used,
              (unsigned long long)last.kv_pool_bytes, (double)last.kv_bits_per_element, last.kv_tokens_at_bits[0],
              last.kv_tokens_at_bits[1], last.kv_tokens_at_bits[2], last.kv_tokens_at_bits[3], last.kv_tokens_at_bits[4],
              last.kv_tokens_at_bits[5], (unsigned long long)last.kv_reallocations, (unsigned long long)last.kv_requantized,
              (unsigned long long)last.kv_evicted);
    }
    if (rc == 0 && trace.f && !trace.commit()) rc = cli_error(C, "cannot write trace file '%s': %s", a.trace, strerror(errno));
    if (rc == 0 && a.plot) {
      char title[256];
      char sampling[64];
      if (so.sampler.temperature > 0)
        snprintf(sampling, sizeof sampling, "temp %g, seed %llu", (double)so.sampler.temperature,
                 (unsigned long long)so.sampler.seed);
      else
        snprintf(sampling, sizeof sampling, "greedy");
      snprintf(title, sizeof title, "%s \xc2\xb7 policy %s \xc2\xb7 %u tokens (%s)", mi.name[0] ? mi.name : base_name(a.model),
               gb_gear_name(so.gear), made, sampling);
      if (cli_write_plot_svg(a.plot, title, steps.data(), steps.size())) plot.committed = true;
      else rc = cli_error(C, "cannot write plot file '%s': %s", a.plot, strerror(errno));
    }
  }
  if (rc == 0 && a.save_state) {
    size_t need = 0, n = 0;
    std::vector<uint8_t> img;
    st = gb_session_state_size(s, &need);
    if (st == GB_OK) {
      img.resize(need);
      st = gb_session_state_save(s, img.data(), img.size(), &n);
    }
    if (st != GB_OK) {
      rc = cli_error(C, "cannot save the session state: %s", cli_detail(st));
    } else {
      const std::string tmp = std::string(a.save_state) + ".tmp";
      FILE *f = fopen(tmp.c_str(), "wb");
      bool ok = f && fwrite(img.data(), 1, n, f) == n;
      if (f) ok = fclose(f) == 0 && ok;
      if (ok) ok = rename(tmp.c_str(), a.save_state) == 0;
      if (!ok) {
        rc = cli_error(C, "cannot write state file '%s': %s", a.save_state, strerror(errno));
        remove(tmp.c_str());
      }
    }
  }
  gb_session_destroy(s);
  gb_model_close(m);
  gb_grammar_destroy(grammar);
  free(prompt);
  free(strip);
  return rc;
}
