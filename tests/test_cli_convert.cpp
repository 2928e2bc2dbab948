// test_cli_convert.cpp — the `gearbx convert` contract: the three input
// kinds convert with exit status 0 and nothing on stdout; every error exits
// non-zero with exactly one "gearbx convert: error: ..." line on stderr and
// leaves no output behind.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "format.h"
#include "test_util.h"

namespace {

using gbt::CliOut;
CliOut convert_cli(const std::string &args) { return gbt::run_cli("convert " + args); }

size_t lines(const std::string &s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

uint32_t gears_of(const std::string &path) {
  const std::vector<uint8_t> b = gbt::read_file(path);
  if (b.size() < 64) return 0;
  uint32_t g = 0;
  const uint32_t n = gb::ld_u32(&b[16]);
  for (uint32_t i = 0; i < n && 64 + 32 * (i + 1) <= b.size(); i++) {
    const uint32_t k = gb::ld_u32(&b[64 + 32 * i]);
    if (k >= gb::kSecGearBase) g |= 1u << (k - gb::kSecGearBase);
  }
  return g;
}

TEST(CliConvert, ConvertsAllThreeInputKinds) {
  const std::string dir = gbt::temp_dir();
  const std::string a = dir + "/cli-l2c.gbx", b = dir + "/cli-gguf.gbx", c = dir + "/cli-synth.gbx";
  CliOut r = convert_cli(gbt::shared_path("models/stories260K.bin") + " --tokenizer " + gbt::shared_path("models/tok512.bin") +
                         " -o " + a + " --page-align 4096");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("gearbx convert: wrote"), std::string::npos) << r.err;
  EXPECT_EQ(gears_of(a), 0xFu);

  r = convert_cli(gbt::shared_path("models/stories260K.gguf") + " -o " + b + " --quiet --tiers low,high --embd f16");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_EQ(gears_of(b), 0x5u);

  r = convert_cli("--synthetic dim=64,layers=1,hidden=96,heads=4,kv_heads=2,vocab=300 -o " + c + " --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(gears_of(c), 0x7u);  // synthetic default: no f32 tier
}

TEST(CliConvert, ErrorsAreOneLine) {
  const std::string dir = gbt::temp_dir();
  const std::string out = dir + "/cli-err.gbx";
  const std::string bin = gbt::shared_path("models/stories260K.bin"), tok = gbt::shared_path("models/tok512.bin");
  const std::string gguf = gbt::shared_path("models/stories260K.gguf");
  const std::string cases[] = {
      "",
      bin + " --tokenizer " + tok,                       // no -o
      bin + " -o " + out,                                // no tokenizer
      gguf + " --tokenizer " + tok + " -o " + out,       // tokenizer with GGUF
      gguf + " -o " + out + " --tiers low,turbo",
      gguf + " -o " + out + " --tiers",
      gguf + " -o " + out + " --embd q4",
      gguf + " -o " + out + " --page-align 100",
      gguf + " -o " + out + " --frobnicate",
      gguf + " " + bin + " -o " + out,
      "--synthetic dim=64,layers=1 -o " + out,
      "--synthetic tinyllama-1.1b " + gguf + " -o " + out,
      dir + "/does-not-exist.gguf -o " + out,
      tok + " --tokenizer " + tok + " -o " + out,        // a tokenizer is no checkpoint
      bin + " --tokenizer " + bin + " -o " + out,        // nor the reverse
  };
  for (const std::string &args : cases) {
    const CliOut r = convert_cli(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
    EXPECT_EQ(r.err.rfind("gearbx convert: error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << args << ": " << r.err;
    EXPECT_NE(access(out.c_str(), F_OK), 0) << args;
  }
}

TEST(CliConvert, HelpGoesToStdout) {
  const CliOut r = convert_cli("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("usage: gearbx convert"), std::string::npos) << r.out;
}

}  // namespace

TEST(CliConvert, ToGgufWritesATierAndRefusesMisuse) {
  const std::string gbx = gbt::stories260k_gbx(), dir = gbt::temp_dir();
  const std::string out = dir + "/cli-export.gguf";
  CliOut r = convert_cli(gbx + " --to-gguf " + out + " --tier f32 --quiet");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const std::vector<uint8_t> b = gbt::read_file(out);
  ASSERT_GE(b.size(), 24u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "GGUF");
  // It converts back.
  r = convert_cli(out + " -o " + dir + "/cli-export-back.gbx --quiet");
  EXPECT_EQ(r.status, 0) << r.err;
  unlink((dir + "/cli-export-back.gbx").c_str());
  unlink(out.c_str());
  // Misuse: one error line each, nothing written.
  const std::string bad[] = {
      gbx + " --to-gguf " + out + " --tier auto",                      // not a tier
      gbx + " --to-gguf " + out + " -o " + dir + "/x.gbx",             // two outputs
      gbt::shared_path("models/stories260K.gguf") + " --to-gguf " + out,  // already GGUF
      gbx + " --to-gguf " + out + " --tier low",                       // 172 columns: no Q4_0 blocks
      gbx + " --to-gguf",                                              // no path
  };
  for (const std::string &a : bad) {
    r = convert_cli(a);
    EXPECT_NE(r.status, 0) << a;
    EXPECT_EQ(lines(r.err), 1u) << a << ": " << r.err;
    EXPECT_EQ(r.err.rfind("gearbx convert: error: ", 0), 0u) << r.err;
    EXPECT_NE(access(out.c_str(), F_OK), 0) << a;
  }
}
