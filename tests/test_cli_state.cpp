// test_cli_state.cpp — session state across processes: `gearbx run
// --save-state` then `gearbx run --load-state` prints, together, the text of
// one uninterrupted run (greedy and sampled, fixed and auto gears); -p with
// --load-state appends text; a missing, foreign or corrupt state file fails
// with one line.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

using Out = gbt::CliOut;
Out sh(const std::string &args) { return gbt::run_cli(args); }

TEST(CliState, SaveThenLoadPrintsTheUninterruptedText) {
  const std::string m = " run -m " + gbt::stories260k_gbx() + " --quiet --color never";
  const std::string file = gbt::temp_dir() + "/cli.state";
  const char *const modes[] = {"--gear high --temp 0", "--gear auto --temp 0.8 --seed 5",
                               "--gear low --kv-policy window --kv-budget 0.3 --temp 0.7 --seed 9 --repeat-penalty 1.2"};
  for (const char *mode : modes) {
    SCOPED_TRACE(mode);
    const std::string base = m + " " + mode + " -p 'Once upon a time'";
    const Out whole = sh(base + " -n 40");
    ASSERT_EQ(whole.status, 0) << whole.err;
    remove(file.c_str());
    const Out first = sh(base + " -n 15 --save-state " + file);
    ASSERT_EQ(first.status, 0) << first.err;
    EXPECT_FALSE(gbt::read_file(file).empty());
    EXPECT_TRUE(gbt::read_file(file + ".tmp").empty());  // renamed into place
    const Out second = sh(m + " " + mode + " -n 25 --load-state " + file);
    ASSERT_EQ(second.status, 0) << second.err;
    // Each run ends its output with a newline.
    std::string head = first.out;
    ASSERT_FALSE(head.empty());
    EXPECT_EQ(head.back(), '\n');
    head.pop_back();
    EXPECT_EQ(head + second.out, whole.out);
  }
}

TEST(CliState, PromptAppendsAfterLoad) {
  const std::string m = " run -m " + gbt::stories260k_gbx() + " --quiet --color never --gear high --temp 0";
  const std::string file = gbt::temp_dir() + "/cli2.state";
  ASSERT_EQ(sh(m + " -p 'Once upon a time' -n 5 --save-state " + file).status, 0);
  const Out r = sh(m + " -p ' the dog' -n 10 --load-state " + file);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_LE(r.out.find("the dog"), 2u) << r.out;  // after the tokenizer's space prefix
  EXPECT_GT(r.out.size(), 8u);
}

TEST(CliState, BadStateFiles) {
  const std::string m = " run -m " + gbt::stories260k_gbx() + " --quiet --gear high --temp 0 -n 5";
  const Out missing = sh(m + " --load-state " + gbt::temp_dir() + "/no-such.state");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("cannot read state file"), std::string::npos) << missing.err;
  const std::string junk = gbt::temp_dir() + "/junk.state";
  ASSERT_TRUE(gbt::write_file(junk, std::vector<uint8_t>(100, 7)));
  const Out bad = sh(m + " --load-state " + junk);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("bad magic"), std::string::npos) << bad.err;
  // A state saved under another gear policy.
  const std::string file = gbt::temp_dir() + "/cli3.state";
  ASSERT_EQ(sh(m + " -p 'Once' --save-state " + file).status, 0);
  const Out other = sh(" run -m " + gbt::stories260k_gbx() + " --quiet --gear low --temp 0 -n 5 --load-state " + file);
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.err.find("gear policy"), std::string::npos) << other.err;
}

}  // namespace
