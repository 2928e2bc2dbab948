// test_cli.cpp — the `gearbx` tool's contract: run streams only text to
// stdout, perplexity prints and writes JSON with the documented keys, and
// errors exit non-zero with one line on stderr.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

struct Out {
  int status;
  std::string out, err;
};

Out sh(const std::string &args) {
  const std::string dir = gbt::temp_dir();
  const std::string o = dir + "/cli.out", e = dir + "/cli.err";
  const std::string cmd = std::string(GB_CLI_PATH) + " " + args + " >" + o + " 2>" + e;
  const int rc = system(cmd.c_str());
  Out r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  auto rd = [](const std::string &p) {
    std::vector<uint8_t> b = gbt::read_file(p);
    return std::string(b.begin(), b.end());
  };
  r.out = rd(o);
  r.err = rd(e);
  return r;
}

TEST(Cli, RunGreedyStreamsTheStoryOnly) {
  const Out r = sh("run -m " + gbt::stories260k_gbx() + " --gear high --temp 0 -n 30");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("gear"), std::string::npos);  // diagnostics stay on stderr
  EXPECT_NE(r.err.find("policy high"), std::string::npos) << r.err;
}

TEST(Cli, RunWithPromptAndTrace) {
  const std::string trace = gbt::temp_dir() + "/trace.csv";
  const Out r = sh("run -m " + gbt::stories260k_gbx() + " -p 'Once upon a time' --gear auto --temp 0.8 --top-p 0.9 --seed 3 -n 40 --trace " +
                   trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u);
  std::vector<uint8_t> csv = gbt::read_file(trace);
  std::string s(csv.begin(), csv.end());
  EXPECT_EQ(s.rfind("step,pos,token,gear,next_gear,predicted_gear,shifted,tokens_in_gear,entropy,entropy_smoothed", 0), 0u);
  size_t lines = 0;
  for (char c : s) lines += c == '\n';
  EXPECT_GE(lines, 2u);
}

TEST(Cli, PerplexityJsonHasTheKeys) {
  const std::string json = gbt::temp_dir() + "/ppl.json";
  const Out r = sh("perplexity -m " + gbt::stories260k_gbx() + " -f " + gbt::shared_path("data/tinystories_valid_excerpt.txt") +
                   " --policy low --ctx 128 --max-tokens 300 --json " + json);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ppl"), std::string::npos);
  std::vector<uint8_t> b = gbt::read_file(json);
  std::string s(b.begin(), b.end());
  for (const char *k : {"\"ppl\"", "\"nll\"", "\"tokens\": 300", "\"bits_per_weight\"", "\"gear_fraction\"", "\"shifts_per_100\""})
    EXPECT_NE(s.find(k), std::string::npos) << k << " in " << s;
  // Low gear reads 4.5-bit weights (18 bytes per 32), plus the padding of
  // 172-wide rows to 192 and the f32 norms: a little above 4.5, well below 8.
  const size_t at = s.find("\"bits_per_weight\": ");
  ASSERT_NE(at, std::string::npos);
  const double bpw = atof(s.c_str() + at + strlen("\"bits_per_weight\": "));
  EXPECT_GE(bpw, 4.5);
  EXPECT_LE(bpw, 4.8);
}

TEST(Cli, ErrorsExitNonZeroWithOneLine) {
  for (const char *args : {"run", "run -m /nonexistent.gbx", "perplexity -m /nonexistent.gbx -f /nonexistent.txt", "info",
                           "run -m x --gear turbo", "run -m x -n -5", "frobnicate", "convert", "info /etc/hostname"}) {
    const Out r = sh(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
    EXPECT_NE(r.err.find("error"), std::string::npos) << args << ": " << r.err;
    size_t lines = 0;
    for (char c : r.err) lines += c == '\n';
    if (std::string(args) != "frobnicate") {  // usage follows that one
      EXPECT_EQ(lines, 1u) << args << ": " << r.err;
    }
  }
}

TEST(Cli, InfoPrintsHyperParameters) {
  const Out r = sh("info " + gbt::stories260k_gbx());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("vocab_size   512"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tier low"), std::string::npos) << r.out;
}

}  // namespace
