// cli.h — shared helpers of the gearbx command-line tool.
#pragma once

#include <stdint.h>
#include <stdio.h>

#include "gearbx.h"

int gb_cli_convert(int argc, char **argv);
int gb_cli_info(int argc, char **argv);
int gb_cli_run(int argc, char **argv);
int gb_cli_perplexity(int argc, char **argv);

// One-line error to stderr, returns the exit status 1.
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Parsers: return false (after printing a one-line error) on bad input.
bool cli_parse_u32(const char *cmd, const char *opt, const char *s, uint32_t *out);
bool cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);
bool cli_parse_f32(const char *cmd, const char *opt, const char *s, float *out);
// "low" | "mid" | "high" | "f32" | "auto"
bool cli_parse_gear(const char *cmd, const char *s, gb_gear *out);
const char *cli_gear_name(int g);

// Library log sink of the tool: warnings to stderr, the last error kept for
// cli_detail(), which formats "status (library message)" for one error line.
void cli_log(void *user, gb_log_level level, const char *msg);
const char *cli_detail(gb_status st);

// Open a model with CLI defaults; prints the error.
gb_model *cli_open_model(const char *cmd, const char *path);

// Read a whole file into a malloc'd buffer (NUL-terminated); NULL on error.
char *cli_read_file(const char *path, size_t *len);

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
