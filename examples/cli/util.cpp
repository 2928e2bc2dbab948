// util.cpp — argument parsing and small helpers of the gearbx tool.
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <string>

#include "cli.h"

int cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gearbx %s: error: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 1;
}

bool cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-') return cli_error(cmd, "%s needs a non-negative integer", opt), false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return cli_error(cmd, "%s: '%s' is not a non-negative integer", opt, s), false;
  *out = v;
  return true;
}

bool cli_parse_u32(const char *cmd, const char *opt, const char *s, uint32_t *out) {
  uint64_t v;
  if (!cli_parse_u64(cmd, opt, s, &v)) return false;
  if (v > 0xFFFFFFFFull) return cli_error(cmd, "%s: %s is too large", opt, s), false;
  *out = (uint32_t)v;
  return true;
}

bool cli_parse_f32(const char *cmd, const char *opt, const char *s, float *out) {
  if (!s || !*s) return cli_error(cmd, "%s needs a number", opt), false;
  char *end;
  errno = 0;
  float v = strtof(s, &end);
  if (errno || *end || !isfinite(v)) return cli_error(cmd, "%s: '%s' is not a number", opt, s), false;
  *out = v;
  return true;
}

bool cli_parse_gear(const char *cmd, const char *s, gb_gear *out) {
  if (s && gb_gear_from_name(s, out) == GB_OK) return true;
  cli_error(cmd, "unknown gear '%s' (low, mid, high, f32, auto, spec, default)", s ? s : "");
  return false;
}

int cli_parse_kv_option(const char *cmd, const char *o, const char *v, gb_kv_options *kv) {
  if (!strcmp(o, "--kv-evict")) return kv->evict = 1, 2;
  if (!strcmp(o, "--kv-asym")) return kv->asymmetric = 1, 2;
  if (strncmp(o, "--kv-", 5) != 0) return 0;
  if (!v) return cli_error(cmd, "option %s needs a value", o), -1;
  bool ok = true;
  if (!strcmp(o, "--kv-budget")) {
    ok = cli_parse_f32(cmd, o, v, &kv->beta);
    if (ok && !(kv->beta > 0.0f)) return cli_error(cmd, "--kv-budget must be > 0"), -1;
  } else if (!strcmp(o, "--kv-bytes")) {
    ok = cli_parse_u64(cmd, o, v, &kv->pool_bytes);
  } else if (!strcmp(o, "--kv-window")) {
    ok = cli_parse_u32(cmd, o, v, &kv->window);
  } else if (!strcmp(o, "--kv-critical")) {
    ok = cli_parse_u32(cmd, o, v, &kv->k_critical);
  } else if (!strcmp(o, "--kv-tail")) {
    ok = cli_parse_u32(cmd, o, v, &kv->k_tail);
  } else if (!strcmp(o, "--kv-policy")) {
    if (gb_kv_policy_from_name(v, &kv->policy) == GB_OK) return 1;
    return cli_error(cmd, "unknown kv policy '%s' (default, f32, f16, uniform8, uniform4, uniform3, uniform2, seed, window, recency)", v), -1;
  } else {
    return cli_error(cmd, "unknown option '%s'", o), -1;
  }
  return ok ? 1 : -1;
}

namespace {
char g_last_error[512];  // the library's last error line (tool-only state)
}

void cli_log(void *, gb_log_level level, const char *msg) {
  if (level == GB_LOG_ERROR) {
    snprintf(g_last_error, sizeof g_last_error, "%s", msg);
  } else {
    fprintf(stderr, "gearbx: %s: %s\n", level == GB_LOG_WARN ? "warning" : "info", msg);
  }
}

const char *cli_detail(gb_status st) {
  static char buf[640];
  if (g_last_error[0]) {
    snprintf(buf, sizeof buf, "%s (%s)", gb_status_str(st), g_last_error);
  } else {
    snprintf(buf, sizeof buf, "%s", gb_status_str(st));
  }
  g_last_error[0] = 0;
  return buf;
}

int cli_status_error(const char *cmd, gb_status st, const char *model_path) {
  if (st != GB_ERR_FILE_CHANGED) return cli_error(cmd, "%s", cli_detail(st));
  cli_detail(st);  // this line says it instead of the library's
  return cli_error(cmd, "the model file '%s' changed while in use (truncated, rewritten or unreadable): stopped; "
                   "run again once the file is complete", model_path);
}

// --load: how cli_open_model reaches the file (default: map).
static gb_model_load g_load = GB_MODEL_LOAD_MAP;

bool cli_parse_load(const char *cmd, const char *v) {
  if (!strcmp(v, "map")) g_load = GB_MODEL_LOAD_MAP;
  else if (!strcmp(v, "copy")) g_load = GB_MODEL_LOAD_COPY;
  else if (!strcmp(v, "lock")) g_load = GB_MODEL_LOAD_LOCK;
  else return cli_error(cmd, "--load: 'map', 'copy' or 'lock', not '%s'", v), false;
  return true;
}

gb_model_load cli_load_mode() { return g_load; }

gb_model *cli_open_model(const char *cmd, const char *path) {
  gb_model *m = nullptr;
  gb_model_options o;
  gb_model_options_init(&o);
  o.log = cli_log;
  o.load = g_load;
  gb_status st = gb_model_open_file(path, &o, &m);
  if (st != GB_OK) {
    cli_error(cmd, "cannot open model '%s': %s", path, cli_detail(st));
    return nullptr;
  }
  return m;
}

char *cli_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return nullptr;
  if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return nullptr; }
  long n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return nullptr; }
  char *buf = static_cast<char *>(malloc((size_t)n + 1));
  if (!buf) { fclose(f); return nullptr; }
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); fclose(f); return nullptr; }
  fclose(f);
  buf[n] = 0;
  *len = (size_t)n;
  return buf;
}

gb_grammar *cli_load_grammar(const char *cmd, const char *grammar_path, const char *schema_path) {
  if (grammar_path && schema_path) return cli_error(cmd, "--grammar and --json-schema: give one"), nullptr;
  const char *path = grammar_path ? grammar_path : schema_path;
  size_t len = 0;
  char *text = cli_read_file(path, &len);
  if (!text) return cli_error(cmd, "cannot read '%s': %s", path, strerror(errno)), nullptr;
  g_last_error[0] = 0;
  if (schema_path) {
    // The schema's grammar, sized by a first call.
    size_t need = 0;
    gb_status st = gb_grammar_from_json_schema(text, len, nullptr, 0, &need);
    char *gbnf = st == GB_ERR_BUFFER_TOO_SMALL ? static_cast<char *>(malloc(need)) : nullptr;
    if (gbnf) st = gb_grammar_from_json_schema(text, len, gbnf, need, &len);
    free(text);
    if (st != GB_OK) {
      free(gbnf);
      return cli_error(cmd, "JSON schema '%s': %s", path, cli_detail(st)), nullptr;
    }
    text = gbnf;
  }
  gb_grammar_options o;
  gb_grammar_options_init(&o);
  o.log = cli_log;
  gb_grammar *g = nullptr;
  const gb_status st = gb_grammar_create(text, len, &o, nullptr, 0, &g);
  free(text);
  if (st != GB_OK) return cli_error(cmd, "grammar '%s': %s", path, cli_detail(st)), nullptr;
  return g;
}

void cli_print_tool_calls(const char *cmd, gb_chat_template t, const std::string &reply) {
  std::string calls_buf(8 * sizeof(gb_tool_call), '\0');
  size_t n = 0, content = 0;
  gb_tool_call *calls = reinterpret_cast<gb_tool_call *>(&calls_buf[0]);
  gb_status st = gb_tool_calls_parse(t, reply.data(), reply.size(), calls, 8, &n, &content);
  if (st == GB_ERR_BUFFER_TOO_SMALL) {
    calls_buf.assign(n * sizeof(gb_tool_call), '\0');
    calls = reinterpret_cast<gb_tool_call *>(&calls_buf[0]);
    st = gb_tool_calls_parse(t, reply.data(), reply.size(), calls, n, &n, &content);
  }
  if (st != GB_OK) {
    fprintf(stderr, "gearbx %s: the reply is not a well-formed tool call: %s\n", cmd, cli_detail(st));
    return;
  }
  for (size_t i = 0; i < n; i++) {
    // The arguments as JSON (Gemma 4 writes its own syntax), on one line:
    // JSON strings hold no raw line breaks or tabs, so those are white
    // space between tokens.
    size_t need = 0;
    st = gb_tool_call_arguments_json(t, reply.data(), reply.size(), &calls[i], nullptr, 0, &need);
    std::string args(need, '\0');
    if (st == GB_ERR_BUFFER_TOO_SMALL)
      st = gb_tool_call_arguments_json(t, reply.data(), reply.size(), &calls[i], &args[0], need, &need);
    if (st != GB_OK) {
      fprintf(stderr, "gearbx %s: a tool call's arguments: %s\n", cmd, cli_detail(st));
      return;
    }
    args.resize(need);
    for (char &c : args)
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    printf("tool_call: {\"name\": \"%.*s\", \"arguments\": %s}\n", (int)calls[i].name_len,
           reply.data() + calls[i].name_offset, args.c_str());
  }
  fflush(stdout);
}

gb_grammar *cli_tools_grammar(const char *cmd, gb_chat_template t, const std::string &tools, gb_tool_choice choice,
                              const char *path) {
  g_last_error[0] = 0;
  size_t need = 0;
  const uint32_t max_calls = t == GB_CHAT_TEMPLATE_LLAMA31 ? 1 : 4;  // Llama 3.1 makes one call a turn
  gb_status st = gb_grammar_from_tools(t, tools.data(), tools.size(), choice, max_calls, nullptr, 0, &need);
  std::string gbnf;
  if (st == GB_ERR_BUFFER_TOO_SMALL) {
    gbnf.resize(need);
    st = gb_grammar_from_tools(t, tools.data(), tools.size(), choice, max_calls, &gbnf[0], need, &need);
  }
  if (st != GB_OK) return cli_error(cmd, "tools '%s': %s", path, cli_detail(st)), nullptr;
  gb_grammar_options o;
  gb_grammar_options_init(&o);
  o.log = cli_log;
  gb_grammar *g = nullptr;
  st = gb_grammar_create(gbnf.data(), need, &o, nullptr, 0, &g);
  if (st != GB_OK) return cli_error(cmd, "the grammar of tools '%s': %s", path, cli_detail(st)), nullptr;
  return g;
}

bool cli_parse_bytes(const char *cmd, const char *opt, const char *s, uint64_t *out) {
  char *end = nullptr;
  const double v = s ? strtod(s, &end) : 0.0;
  uint64_t mult = 1;
  if (end && *end) {
    switch (*end) {
      case 'k': case 'K': mult = 1ull << 10; break;
      case 'm': case 'M': mult = 1ull << 20; break;
      case 'g': case 'G': mult = 1ull << 30; break;
      default: mult = 0;
    }
    if (mult && end[1] && !((end[1] == 'B' || end[1] == 'b') && !end[2]) && !((end[1] == 'i') && (end[2] == 'B') && !end[3])) mult = 0;
  }
  if (!s || end == s || !mult || !(v > 0) || v * (double)mult > 1.8e19) {
    cli_error(cmd, "%s: '%s' is not a byte count (e.g. 512M, 1G, 65536)", opt, s ? s : "");
    return false;
  }
  *out = (uint64_t)(v * (double)mult);
  return true;
}

void cli_print_plan(FILE *f, const gb_plan_report &r) {
  const double mib = 1024.0 * 1024.0;
  fprintf(f, "plan for %.1f MiB, context %u: gear %s, kv %s", (double)r.budget_bytes / mib, r.n_ctx, gb_gear_name(r.gear),
          gb_kv_policy_name(r.kv_policy));
  if (r.kv_beta > 0) fprintf(f, " beta %.2f%s", (double)r.kv_beta, r.kv_evict ? " (evicting)" : "");
  fprintf(f, ", prefill batch %u\n", r.prefill_batch);
  fprintf(f, "  arena %.1f MiB (KV pool %.1f MiB) + resident weights %.1f MiB = %.1f MiB of %.1f MiB\n", (double)r.arena_bytes / mib,
          (double)r.kv_pool_bytes / mib, (double)r.weight_bytes / mib, (double)(r.arena_bytes + r.weight_bytes) / mib,
          (double)r.budget_bytes / mib);
  if (r.streamed_bytes)
    fprintf(f, "  streamed from the file a row per token, not counted: %.1f MiB (per-layer input table)\n",
            (double)r.streamed_bytes / mib);
  std::string g;
  if (r.gave_up & GB_PLAN_GAVE_UP_GEAR) g += ", a lower weight tier";
  if (r.gave_up & GB_PLAN_GAVE_UP_KV_LOSSY) g += ", a KV pool small enough to cost quality";
  else if (r.gave_up & GB_PLAN_GAVE_UP_KV) g += ", a KV cache below f32 (no measured loss)";
  if (r.gave_up & GB_PLAN_GAVE_UP_PREFILL) g += ", a smaller prefill batch (slower prompts)";
  fprintf(f, "  gave up: %s (%u configurations tried)\n", g.empty() ? "nothing" : g.c_str() + 2, r.candidates_tried);
}

bool cli_plan(const char *cmd, const gb_model *m, uint64_t budget, uint32_t n_ctx, gb_session_options *so, bool quiet) {
  gb_plan_report r;
  r.struct_size = sizeof r;
  const gb_status st = gb_plan(m, budget, n_ctx, so, &r);
  if (st != GB_OK) {
    cli_error(cmd, "%s", cli_detail(st));
    return false;
  }
  if (!quiet) cli_print_plan(stderr, r);
  return true;
}
