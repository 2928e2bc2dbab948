// test_cli_tokenize.cpp — `gearbx tokenize` / `gearbx detokenize`: the
// llama.cpp vocabulary fixtures tokenize to their .out files byte for byte
// (vocabulary-only GGUFs read directly), the text comes back through
// detokenize, a converted .gbx model gives the library's ids, and misuse
// exits non-zero with one error line.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

using Out = gbt::CliOut;
using gbt::count_lines;
using gbt::slurp;
using gbt::write_temp;
Out cli(const std::string &args, const std::string &in = "") { return gbt::run_cli(args, in); }

std::vector<std::string> split(const std::string &s, const std::string &sep) {
  std::vector<std::string> v;
  size_t at = 0;
  for (;;) {
    const size_t e = s.find(sep, at);
    if (e == std::string::npos) break;
    v.push_back(s.substr(at, e - at));
    at = e + sep.size();
  }
  v.push_back(s.substr(at));
  return v;
}

// The llama.cpp vocabulary fixtures that have .inp / .out files.
std::vector<std::string> vocab_fixtures() {
  std::vector<std::string> v;
  const std::string dir = gbt::shared_path("fixtures/vocab");
  DIR *d = opendir(dir.c_str());
  if (!d) return v;
  while (dirent *e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) {
      const std::string p = dir + "/" + n;
      if (!gbt::read_file(p + ".inp").empty() && !gbt::read_file(p + ".out").empty()) v.push_back(p);
    }
  }
  closedir(d);
  std::sort(v.begin(), v.end());
  return v;
}

const char kSep[] = "\n__ggml_vocab_test__\n";
const char kSepArg[] = "'\\n__ggml_vocab_test__\\n'";

TEST(CliTokenize, VocabFixturesGiveLlamaCppIds) {
  const std::vector<std::string> fx = vocab_fixtures();
  ASSERT_GE(fx.size(), 6u);
  for (const std::string &f : fx) {
    const Out r = cli(std::string("tokenize -m ") + f + " --no-bos --lines " + kSepArg, f + ".inp");
    ASSERT_EQ(r.status, 0) << f << ": " << r.err;
    EXPECT_TRUE(r.err.empty()) << f << ": " << r.err;
    const std::string want = slurp(f + ".out");
    if (r.out == want) continue;
    // Name the first differing line and its input.
    const std::vector<std::string> got_l = split(r.out, "\n"), want_l = split(want, "\n");
    const std::vector<std::string> inp = split(slurp(f + ".inp"), kSep);
    for (size_t i = 0; i < std::max(got_l.size(), want_l.size()); i++) {
      const std::string g = i < got_l.size() ? got_l[i] : "<missing>", w = i < want_l.size() ? want_l[i] : "<missing>";
      if (g != w) {
        ADD_FAILURE() << f << ": line " << i + 1 << " differs for input '" << (i < inp.size() ? inp[i] : "?")
                      << "'\n got: '" << g << "'\nwant: '" << w << "'";
        break;
      }
    }
    ADD_FAILURE() << f << ": output differs from the .out file";
  }
}

// tokenize --lines | detokenize --lines gives every fixture string back.
TEST(CliTokenize, DetokenizeGivesTheTextBack) {
  const std::vector<std::string> fx = vocab_fixtures();
  ASSERT_GE(fx.size(), 6u);
  for (const std::string &f : fx) {
    const std::string ids = gbt::temp_dir() + "/roundtrip.ids";
    Out r = cli(std::string("tokenize -m ") + f + " --no-bos --lines " + kSepArg, f + ".inp");
    ASSERT_EQ(r.status, 0) << f << ": " << r.err;
    ASSERT_TRUE(gbt::write_file(ids, std::vector<uint8_t>(r.out.begin(), r.out.end())));
    r = cli(std::string("detokenize -m ") + f + " --lines " + kSepArg, ids);
    ASSERT_EQ(r.status, 0) << f << ": " << r.err;
    const std::string inp = slurp(f + ".inp");
    const std::vector<std::string> got = split(r.out, kSep), want = split(inp, kSep);
    EXPECT_EQ(r.out, inp) << f;
    ASSERT_EQ(got.size(), want.size()) << f;
    size_t exact = 0;
    std::string lossy;
    for (size_t i = 0; i < want.size(); i++) {
      if (got[i] == want[i]) {
        exact++;
        continue;
      }
      lossy += "\n  '" + want[i] + "' -> '" + got[i] + "'";
    }
    // Every fixture string comes back (the six vocabularies are lossless
    // for them: byte fallback, byte-level BPE).
    EXPECT_EQ(exact, want.size()) << f << ": not given back:" << lossy;
  }
}

TEST(CliTokenize, WholeInputBosAndSpecialTokens) {
  const std::string spm = gbt::shared_path("fixtures/vocab/ggml-vocab-llama-spm.gguf");
  const std::string text = write_temp("hello.txt", "Hello world\n  two spaces <s> and \xc3\xa9");
  // Default: BOS (the vocabulary's add_bos) and ids on one line, single spaces.
  Out r = cli("tokenize -m " + spm, text);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.out.rfind("1 ", 0), 0u) << r.out;
  EXPECT_EQ(count_lines(r.out), 1u);
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(r.out.find("  "), std::string::npos) << r.out;
  const std::string with_bos = r.out;
  r = cli("tokenize -m " + spm + " --no-bos", text);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ("1 " + r.out, with_bos);
  // The text comes back from either, BOS or not.
  const std::string ids = write_temp("hello.ids", with_bos);
  r = cli("detokenize -m " + spm, ids);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, slurp(text));
  // --special shows the control token's text.
  r = cli("detokenize -m " + spm + " --special", ids);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<s>", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("Hello world\n  two spaces <s> and \xc3\xa9"), std::string::npos) << r.out;
  // "<s>" in the text is plain text unless --parse-special.
  const std::string s_text = write_temp("s.txt", "<s>Hi");
  r = cli("tokenize -m " + spm + " --no-bos", s_text);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.rfind("1 ", 0), 0u) << r.out;
  r = cli("tokenize -m " + spm + " --no-bos --parse-special", s_text);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("1 ", 0), 0u) << r.out;
  // Empty input: an empty line (BOS alone with the default).
  r = cli("tokenize -m " + spm + " --no-bos");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
  r = cli("tokenize -m " + spm);
  EXPECT_EQ(r.out, "1\n");
}

TEST(CliTokenize, GbxModelGivesTheLibrarysIds) {
  const std::string gguf = gbt::shared_path("fixtures/stories5M-Q8_0.gguf");
  const std::string gbx = gbt::temp_dir() + "/tok-stories5M.gbx";
  Out r = cli("convert " + gguf + " -o " + gbx + " --quiet --page-align 4096");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string prompt = "Once upon a time";
  const std::string text = write_temp("once.txt", prompt);

  gb_model_options o = gbt::quiet_model_options();
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(gbx.c_str(), &o, &m), GB_OK);
  const gb_tokenizer *tok = nullptr;
  ASSERT_EQ(gb_model_tokenizer(m, &tok), GB_OK);
  gb_tokenizer_info ti;
  memset(&ti, 0, sizeof ti);
  ti.struct_size = sizeof ti;
  ASSERT_EQ(gb_tokenizer_get_info(tok, &ti), GB_OK);
  for (int bos = 0; bos < 2; bos++) {
    std::vector<int32_t> ids(GB_TOKENIZE_CAPACITY(prompt.size()));
    size_t n = 0;
    ASSERT_EQ(gb_tokenize(m, prompt.data(), prompt.size(), bos && ti.add_bos ? GB_TOKENIZE_ADD_BOS : 0u, ids.data(),
                          ids.size(), &n),
              GB_OK);
    ASSERT_GT(n, 1u);
    std::string want;
    for (size_t i = 0; i < n; i++) want += (i ? " " : "") + std::to_string(ids[i]);
    want += "\n";
    const std::string flags = bos ? "" : " --no-bos";
    r = cli("tokenize -m " + gbx + flags, text);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, want) << "bos " << bos;
    // The GGUF's own tokenizer keys give the same ids.
    r = cli("tokenize -m " + gguf + flags, text);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, want) << "bos " << bos;
    // And back.
    const std::string idf = write_temp("once.ids", want);
    r = cli("detokenize -m " + gbx, idf);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, prompt);
  }
  gb_model_close(m);
}

TEST(CliTokenize, MisuseExitsWithOneErrorLine) {
  const std::string spm = gbt::shared_path("fixtures/vocab/ggml-vocab-llama-spm.gguf");
  const std::string notmodel = write_temp("not-a-model.txt", "just some text, not a model file\n");
  const std::string bad_ids = write_temp("bad.ids", "1 2 x3 4\n");
  const std::string neg_ids = write_temp("neg.ids", "1 -2\n");
  const std::string big_ids = write_temp("big.ids", "1 32000\n");  // llama-spm has 32000 tokens
  const std::string huge_ids = write_temp("huge.ids", "99999999999999999999999\n");
  struct Case {
    std::string args, in, must;  // must: text the error line contains
  } cases[] = {
      {"tokenize", "", "-m"},
      {"tokenize -m", "", "needs a value"},
      {"tokenize -m " + gbt::temp_dir() + "/missing.gguf", "", "missing.gguf"},
      {"tokenize -m " + spm + " --frobnicate", "", "--frobnicate"},
      {"tokenize -m " + notmodel, "", "not-a-model.txt"},
      {"tokenize -m " + spm + " --lines ''", "", "--lines"},
      {"tokenize -m " + spm + " --lines 'a\\qb'", "", "escape"},
      {"tokenize -m " + spm + " --special", "", "--special"},
      {"detokenize", "", "-m"},
      {"detokenize -m " + spm + " --no-bos", "", "--no-bos"},
      {"detokenize -m " + notmodel, bad_ids, "not-a-model.txt"},
      {"detokenize -m " + spm, bad_ids, "x3"},
      {"detokenize -m " + spm, neg_ids, "-2"},
      {"detokenize -m " + spm, big_ids, "32000"},
      {"detokenize -m " + spm, huge_ids, "99999999999999999999999"},
      {"detokenize -m " + spm + " --lines '\\n'", bad_ids, "line 1"},
  };
  for (const Case &c : cases) {
    const Out r = cli(c.args, c.in);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
    EXPECT_NE(r.err.find("error"), std::string::npos) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.must), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << c.args << ": " << r.err;
  }
}

}  // namespace
