// test_cli_run_trace.cpp — `gearbx run` telemetry: the --trace CSV (columns,
// gear names, consistency of shifts, entropy range), the --plot SVG (entropy
// polylines, threshold step-lines, legend, deterministic bytes), the
// tmp-and-rename contract (a failed run leaves an existing file untouched,
// an unwritable path fails before generating with one stderr line), and the
// cold-start prompt classifier line.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

struct Out {
  int status;
  std::string out, err;
};

std::string slurp(const std::string &path) {
  std::vector<uint8_t> b = gbt::read_file(path);
  return std::string(b.begin(), b.end());
}

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

Out sh(const std::string &args) {
  const std::string dir = gbt::temp_dir();
  const std::string o = dir + "/trace_cli.out", e = dir + "/trace_cli.err";
  const std::string cmd = std::string(GB_CLI_PATH) + " " + args + " >" + o + " 2>" + e;
  const int rc = system(cmd.c_str());
  Out r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

size_t count_lines(const std::string &s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> r;
  size_t a = 0;
  for (;;) {
    const size_t b = s.find(sep, a);
    r.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return r;
    a = b + 1;
  }
}

const char kHeader[] =
    "step,pos,token,gear,next_gear,predicted_gear,shifted,tokens_in_gear,entropy,entropy_smoothed,theta_low,theta_high,"
    "catastrophic,weight_bytes_read,resident_weight_bytes,step_us,kv_tokens,kv_bytes_used,kv_pool_bytes,kv_bits_per_element,"
    "kv_at_2,kv_at_3,kv_at_4,kv_at_8,kv_at_16,kv_at_32,kv_reallocations,kv_requantized,kv_evicted";

// The value of attribute `points` of the element with id="id" (empty if absent).
std::string points_of(const std::string &svg, const std::string &id) {
  const size_t at = svg.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t el = svg.rfind('<', at);
  const size_t end = svg.find('>', at);
  const size_t p = svg.find(" points=\"", el);
  if (p == std::string::npos || p > end) return "";
  const size_t q = svg.find('"', p + 9);
  return svg.substr(p + 9, q - (p + 9));
}

class CliRunTrace : public ::testing::Test {
 protected:
  std::string dir_ = gbt::temp_dir();
  std::string model_ = gbt::stories260k_gbx();
};

TEST_F(CliRunTrace, CsvHasOneRowPerStepAndConsistentColumns) {
  const std::string csv_path = dir_ + "/run_trace.csv", svg_path = dir_ + "/run_plot.svg";
  const Out r = sh("run -m " + model_ + " -n 40 --gear auto --temp 0 --trace " + csv_path + " --plot " + svg_path);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("gear"), std::string::npos) << r.out;  // diagnostics stay on stderr
  EXPECT_FALSE(exists(csv_path + ".tmp"));
  EXPECT_FALSE(exists(svg_path + ".tmp"));

  const std::string csv = slurp(csv_path);
  ASSERT_EQ(count_lines(csv), 41u) << csv;
  ASSERT_EQ(csv.back(), '\n');
  std::vector<std::string> lines = split(csv.substr(0, csv.size() - 1), '\n');
  ASSERT_EQ(lines.size(), 41u);
  EXPECT_EQ(lines[0], kHeader);
  const size_t n_cols = split(kHeader, ',').size();
  ASSERT_EQ(n_cols, 29u);
  const std::set<std::string> gears = {"low", "mid", "high"};
  std::string prev_next;
  for (size_t i = 1; i < lines.size(); i++) {
    const std::vector<std::string> c = split(lines[i], ',');
    ASSERT_EQ(c.size(), n_cols) << "row " << i << ": " << lines[i];
    // The KV pool (f32 cache by default): one more token per step, within the pool.
    EXPECT_EQ(atoi(c[16].c_str()), (int)i) << lines[i];
    EXPECT_LE(strtoull(c[17].c_str(), nullptr, 10), strtoull(c[18].c_str(), nullptr, 10)) << lines[i];
    EXPECT_EQ(atoi(c[26].c_str()), 0) << lines[i];
    EXPECT_EQ(atoi(c[0].c_str()), (int)i - 1) << lines[i];
    const std::string &gear = c[3], &next = c[4], &pred = c[5];
    EXPECT_TRUE(gears.count(gear)) << lines[i];
    EXPECT_TRUE(gears.count(next)) << lines[i];
    EXPECT_TRUE(gears.count(pred)) << lines[i];
    EXPECT_EQ(c[6], gear != next ? "1" : "0") << lines[i];
    if (!prev_next.empty()) {
      EXPECT_EQ(gear, prev_next) << "row " << i << " does not run the gear chosen before it";
    }
    prev_next = next;
    EXPECT_GE(atoi(c[7].c_str()), 1) << lines[i];
    const double h = atof(c[8].c_str()), hs = atof(c[9].c_str());
    EXPECT_GE(h, 0.0) << lines[i];
    EXPECT_LE(h, 9.0 + 1e-4) << lines[i];  // log2(512)
    EXPECT_GE(hs, 0.0) << lines[i];
    EXPECT_LE(hs, 9.0 + 1e-4) << lines[i];
    EXPECT_LT(atof(c[10].c_str()), atof(c[11].c_str())) << lines[i];
    EXPECT_TRUE(c[12] == "0" || c[12] == "1") << lines[i];
    EXPECT_GT(strtoull(c[13].c_str(), nullptr, 10), 0ull) << lines[i];
    EXPECT_GE(atof(c[15].c_str()), 0.0) << lines[i];
  }

  const std::string svg = slurp(svg_path);
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  ASSERT_GE(svg.size(), 7u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  for (const char *id : {"entropy-raw", "entropy-smoothed"}) {
    const std::string pts = points_of(svg, id);
    ASSERT_FALSE(pts.empty()) << id;
    const std::vector<std::string> p = split(pts, ' ');
    EXPECT_EQ(p.size(), 40u) << id;
    for (const std::string &xy : p) EXPECT_EQ(split(xy, ',').size(), 2u) << id << ": " << xy;
  }
  for (const char *needle : {"id=\"theta-low\"", "id=\"theta-high\"", "stroke-dasharray", "id=\"legend\"", "low gear", "mid gear",
                             "high gear", "id=\"gear-bands\"", "stories260K", "policy auto", "40 tokens", "decode step",
                             "entropy (bits)"})
    EXPECT_NE(svg.find(needle), std::string::npos) << needle;
  // Every shift in the CSV has a marker in the plot.
  size_t shifts = 0;
  for (size_t i = 1; i < lines.size(); i++) shifts += split(lines[i], ',')[6] == "1";
  size_t markers = 0;
  for (size_t at = svg.find("<title>step "); at != std::string::npos; at = svg.find("<title>step ", at + 1)) markers++;
  EXPECT_EQ(markers, shifts);
}

TEST_F(CliRunTrace, PlotIsDeterministic) {
  const std::string a = dir_ + "/det_a.svg", b = dir_ + "/det_b.svg";
  const std::string args = "run -m " + model_ + " -n 30 --gear auto --temp 0.8 --seed 7 --quiet --plot ";
  ASSERT_EQ(sh(args + a).status, 0);
  ASSERT_EQ(sh(args + b).status, 0);
  const std::string sa = slurp(a), sb = slurp(b);
  EXPECT_FALSE(sa.empty());
  EXPECT_EQ(sa, sb);
}

TEST_F(CliRunTrace, FailedRunLeavesExistingTraceUntouched) {
  const std::string csv = dir_ + "/keep.csv", svg = dir_ + "/keep.svg";
  ASSERT_TRUE(gbt::write_file(csv, {'o', 'l', 'd', '\n'}));
  ASSERT_TRUE(gbt::write_file(svg, {'o', 'l', 'd', '\n'}));
  const Out r = sh("run -m " + model_ + " -n 10 --temp -1 --trace " + csv + " --plot " + svg);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_EQ(slurp(csv), "old\n");
  EXPECT_EQ(slurp(svg), "old\n");
  EXPECT_FALSE(exists(csv + ".tmp"));
  EXPECT_FALSE(exists(svg + ".tmp"));
  // A model that does not open either.
  const Out r2 = sh("run -m " + dir_ + "/no-such-model.gbx --trace " + csv);
  EXPECT_NE(r2.status, 0);
  EXPECT_EQ(slurp(csv), "old\n");
  EXPECT_FALSE(exists(csv + ".tmp"));
}

TEST_F(CliRunTrace, UnwritablePathsFailBeforeGenerating) {
  for (const char *opt : {"--plot", "--trace"}) {
    const std::string path = dir_ + "/no/such/dir/out.file";
    const Out r = sh("run -m " + model_ + " -n 10 " + opt + " " + path);
    EXPECT_NE(r.status, 0) << opt;
    EXPECT_TRUE(r.out.empty()) << opt << ": " << r.out;
    EXPECT_EQ(count_lines(r.err), 1u) << opt << ": " << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  }
}

TEST_F(CliRunTrace, ColdStartGearFromThePrompt) {
  const std::string csv = dir_ + "/cold.csv";
  // Math symbols score high: the session starts in the high gear.
  const Out r = sh("run -m " + model_ + " -p 'Let x = 3*4+5. Then y^2 = x/2 - 1' -n 5 --gear auto --temp 0 --trace " + csv);
  ASSERT_EQ(r.status, 0) << r.err;
  const size_t at = r.err.find("prompt score ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const size_t in = r.err.find(" -> start in ", at);
  ASSERT_NE(in, std::string::npos) << r.err;
  const std::string gear = r.err.substr(in + 13, r.err.find('\n', in) - (in + 13));
  EXPECT_EQ(gear, "high");
  EXPECT_GE(atof(r.err.c_str() + at + 13), 4.0) << r.err;
  EXPECT_EQ(r.out.find("score"), std::string::npos);  // stdout carries only text
  const std::vector<std::string> lines = split(slurp(csv), '\n');
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(split(lines[1], ',')[3], gear);  // the first step runs the cold-start gear

  // A plain story prompt scores low; fixed gears and empty prompts are not classified.
  const Out low = sh("run -m " + model_ + " -p 'Once upon a time' -n 3 --gear auto --temp 0");
  ASSERT_EQ(low.status, 0) << low.err;
  EXPECT_NE(low.err.find("-> start in low"), std::string::npos) << low.err;
  const Out fixed = sh("run -m " + model_ + " -p 'x = 1 + 2' -n 3 --gear mid --temp 0");
  ASSERT_EQ(fixed.status, 0) << fixed.err;
  EXPECT_EQ(fixed.err.find("prompt score"), std::string::npos) << fixed.err;
  const Out empty = sh("run -m " + model_ + " -n 3 --gear auto --temp 0");
  ASSERT_EQ(empty.status, 0) << empty.err;
  EXPECT_EQ(empty.err.find("prompt score"), std::string::npos) << empty.err;
}

}  // namespace
