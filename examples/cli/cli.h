// cli.h — shared helpers of the gearbx command-line tool.
#pragma once

#include <stdint.h>
#include <stdio.h>

#include <string>

#include "gearbx.h"

int gb_cli_convert(int argc, char **argv);
int gb_cli_info(int argc, char **argv);
int gb_cli_run(int argc, char **argv);
int gb_cli_perplexity(int argc, char **argv);
int gb_cli_plan(int argc, char **argv);
int gb_cli_tokenize(int argc, char **argv);
int gb_cli_detokenize(int argc, char **argv);
int gb_cli_chat(int argc, char **argv);

// One-line error to stderr, returns the exit status 1.
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Parsers: return false (after printing a one-line error) on bad input.
bool cli_parse_u32(const char *cmd, const char *opt, const char *s, uint32_t *out);
bool cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);
bool cli_parse_f32(const char *cmd, const char *opt, const char *s, float *out);
// A gear by its name (gb_gear_from_name); prints the error.
bool cli_parse_gear(const char *cmd, const char *s, gb_gear *out);
// KV pool options shared by run and perplexity: --kv-budget BETA,
// --kv-bytes N, --kv-policy NAME, --kv-window N, --kv-critical N,
// --kv-tail N, --kv-evict, --kv-asym. Returns 2 for a flag, 1 for an
// option that took the value v, 0 when o is not a kv option, -1 on error
// (printed).
int cli_parse_kv_option(const char *cmd, const char *o, const char *v, gb_kv_options *kv);
#define CLI_KV_USAGE                                                                                  \
  "  --kv-policy NAME  KV cache: default, f32, f16, uniform8, uniform4, uniform3, uniform2, seed,\n"  \
  "                    window, recency (default: f32 without a budget, window with one)\n"          \
  "  --kv-budget BETA  KV pool = BETA x the fp16 cache of the context (--kv-bytes N: N bytes)\n"     \
  "  --kv-window N     recent tokens kept at 8 bits (window, recency); --kv-critical N prefix\n"    \
  "                    tokens at 8 bits (default 4); --kv-tail N; --kv-asym keys >= 3 bits;\n"      \
  "                    --kv-evict evict the least important token when the pool is full\n"

// A byte count with an optional binary suffix: 512M, 1G, 64K, 1048576.
bool cli_parse_bytes(const char *cmd, const char *opt, const char *s, uint64_t *out);
// Plan `so` for a budget (gb_plan) and print the plan on stderr unless
// quiet; false after printing the error.
bool cli_plan(const char *cmd, const gb_model *m, uint64_t budget, uint32_t n_ctx, gb_session_options *so, bool quiet);
// The plan's lines ("gear mid, kv window beta 0.25, ...") to f.
void cli_print_plan(FILE *f, const gb_plan_report &r);

// Library log sink of the tool: warnings to stderr, the last error kept for
// cli_detail(), which formats "status (library message)" for one error line.
void cli_log(void *user, gb_log_level level, const char *msg);
const char *cli_detail(gb_status st);

// The one error line for a failed session call: for GB_ERR_FILE_CHANGED (the
// model file was truncated, rewritten or became unreadable while mapped) a
// line naming the file, else as cli_detail(). Returns the exit status 1.
int cli_status_error(const char *cmd, gb_status st, const char *model_path);

// Open a model with CLI defaults; prints the error.
gb_model *cli_open_model(const char *cmd, const char *path);

// Read a whole file into a malloc'd buffer (NUL-terminated); NULL on error.
char *cli_read_file(const char *path, size_t *len);

// --grammar FILE (GBNF) or --json-schema FILE (converted to GBNF): the
// compiled grammar (gb_grammar_destroy it), NULL with the error printed.
gb_grammar *cli_load_grammar(const char *cmd, const char *grammar_path, const char *schema_path);
// --load map|copy|lock: how cli_open_model reaches the file (a process-wide
// choice, made while parsing options). False after printing the error.
bool cli_parse_load(const char *cmd, const char *v);
gb_model_load cli_load_mode();
#define CLI_LOAD_USAGE                                                                                    \
  "  --load map|copy|lock  map the file (default: pages the system may drop and read again under\n"      \
  "                    memory pressure), copy it into memory, or map it and lock what the default\n"     \
  "                    gear reads (mlock; refused above the locked-memory limit, `ulimit -l`)\n"

// The tool calls in a reply, one line each on stdout ("tool_call: {...}");
// a reply that is not well-formed is reported on stderr.
void cli_print_tool_calls(const char *cmd, gb_chat_template t, const std::string &reply);

// The grammar of the tool calls of template t for the tools text (at most
// four calls a reply); NULL after printing the error.
gb_grammar *cli_tools_grammar(const char *cmd, gb_chat_template t, const std::string &tools, gb_tool_choice choice,
                              const char *path);

// --plot (plot.cpp): one decode step of the SVG plot.
struct CliPlotStep {
  int gear, next_gear;  // gb_gear of the step and of the next one
  bool shifted, catastrophic;
  float entropy, entropy_smoothed;  // bits
  float theta_low, theta_high;      // thresholds in force (bits)
};
// Write an SVG of steps[0..n) to path (through path.tmp, renamed at the end;
// nothing is left behind on failure). title is plain UTF-8 text (escaped
// here). Deterministic: the same input gives the same bytes. False with errno
// set on failure.
bool cli_write_plot_svg(const char *path, const char *title, const CliPlotStep *steps, size_t n);
