// test_cli_perplexity.cpp — `gearbx perplexity --ref`: the tool scores a
// reference file's token windows the way the library does in process (the
// same NLL, bit for bit) and close to llama.cpp's outputs for the same GGUF
// file; a missing, malformed or mismatched reference exits with status 1
// and one line naming the problem. Also the JSON reader the tool and the
// fixture tests share: every malformed document is an error, never a crash.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert.h"
#include "json_min.h"
#include "test_util.h"

namespace {

struct Out {
  int status;  // -1 when the tool did not exit (a crash)
  std::string out, err;
};

Out sh(const std::string &args) {
  const std::string dir = gbt::temp_dir();
  const std::string o = dir + "/cli-ppl.out", e = dir + "/cli-ppl.err";
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

const char kName[] = "stories5M-Q4_K_M";
// All of the file's windows (8 x 255 positions); 2 under emulation
// (GB_TEST_SCALE < 1), where the tool and the library each score them.
size_t windows() { return gbt::test_scale() >= 1.0 ? 8 : 2; }

std::string ref_path() { return gbt::shared_path((std::string("fixtures/") + kName + ".gguf.ref.json").c_str()); }

// The GGUF converted with the default options: its own Q4_K/Q6_K blocks as
// the only tier, the file's default gear. Made once per test process.
const std::string &q4km_gbx() {
  static std::string path;
  if (path.empty()) {
    const std::string out = gbt::temp_dir() + "/ppl-" + kName + ".gbx";
    gb::ConvertOptions o;
    o.log.fn = gbt::quiet_log;
    const std::string in = gbt::shared_path((std::string("fixtures/") + kName + ".gguf").c_str());
    if (gb::convert_gguf(in.c_str(), out.c_str(), o) == GB_OK) path = out;
  }
  return path;
}

bool parse(const std::string &text, gbt::Json *out) {
  gbt::JsonReader r(text);
  const bool ok = r.parse(out);
  EXPECT_TRUE(ok) << r.error() << " in " << text;
  return ok;
}

double num(const gbt::Json &doc, const char *key) {
  const gbt::Json *v = doc.get(key);
  EXPECT_TRUE(v && v->kind == gbt::Json::kNumber) << key;
  return v && v->kind == gbt::Json::kNumber ? v->f64() : NAN;
}

// The library in process, as the tool runs the file by default (session
// options from gb_session_options_init, an f32 KV cache), the NLL summed in
// the same order with the same arithmetic.
double library_nll(const std::string &gbx, const gbt::Json &ref, size_t n_windows, size_t *positions) {
  gb_model *m = nullptr;
  EXPECT_EQ(gb_model_open_file(gbx.c_str(), nullptr, &m), GB_OK);
  gb_session_options so;
  gb_session_options_init(&so);
  so.kv.policy = GB_KV_F32;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  double nll = 0.0;
  bool ok = s != nullptr;
  *positions = 0;
  for (size_t w = 0; ok && w < n_windows; w++) {
    const std::vector<gbt::Json> &t = ref.get("windows")->items[w].items;
    EXPECT_EQ(gb_session_reset(s), GB_OK);
    for (size_t p = 0; ok && p + 1 < t.size(); p++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      ok = gb_feed(s, (int32_t)t[p].i64(), &info) == GB_OK;
      if (!ok) break;
      const float *lg = info.logits;
      float mx = lg[0];
      for (uint32_t i = 1; i < info.n_vocab; i++) mx = lg[i] > mx ? lg[i] : mx;
      double sum = 0.0;
      for (uint32_t i = 0; i < info.n_vocab; i++) sum += exp((double)lg[i] - mx);
      nll += (double)mx + log(sum) - (double)lg[t[p + 1].i64()];
      ++*positions;
    }
  }
  EXPECT_TRUE(ok) << "the library's session failed";
  gb_session_destroy(s);
  gb_model_close(m);
  return ok && *positions ? nll / (double)*positions : NAN;
}

TEST(CliPerplexityRef, Stories5MQ4KMScoresLikeLlamaCppAndTheLibrary) {
  const std::string &gbx = q4km_gbx();
  ASSERT_FALSE(gbx.empty()) << "conversion of " << kName << " failed";
  const Out r =
      sh("perplexity --ref " + ref_path() + " -m " + gbx + " --json --kv-policy f32 --windows " + std::to_string(windows()));
  ASSERT_EQ(r.status, 0) << r.err;
  gbt::Json doc;
  ASSERT_TRUE(parse(r.out, &doc));  // stdout holds the JSON object only
  for (const char *k :
       {"model", "gear", "positions", "windows", "nll", "ref_nll", "nll_diff", "top1_agreement", "max_logit_diff_w0"})
    EXPECT_NE(doc.get(k), nullptr) << k << " in " << r.out;
  const double nll = num(doc, "nll"), ref_nll = num(doc, "ref_nll"), diff = num(doc, "nll_diff"),
               agree = num(doc, "top1_agreement"), max_diff = num(doc, "max_logit_diff_w0");
  printf(
      "%s: gear %s (%s), %s positions: nll %.6f  ref_nll %.6f  nll_diff %+.3e  top1_agreement %.4f  "
      "max_logit_diff_w0 %.4f\n",
      kName, doc.get("gear")->text.c_str(), doc.get("tier_format") ? doc.get("tier_format")->text.c_str() : "?",
      doc.get("positions")->text.c_str(), nll, ref_nll, diff, agree, max_diff);

  gbt::Json ref;
  {
    const std::vector<uint8_t> b = gbt::read_file(ref_path());
    ASSERT_TRUE(parse(std::string(b.begin(), b.end()), &ref));
  }
  // The reference's mean: its windows are of equal length.
  double want = 0.0;
  const size_t kWindows = windows();
  for (size_t w = 0; w < kWindows; w++) want += ref.get("nll_per_window")->items[w].f64() / (double)kWindows;
  EXPECT_NEAR(ref_nll, want, 1e-12);
  EXPECT_NEAR(diff, nll - ref_nll, 1e-12);
  EXPECT_EQ(doc.get("windows")->i64(), (long long)kWindows);
  EXPECT_EQ(doc.get("positions")->i64(), (long long)(kWindows * 255));

  EXPECT_LT(fabs(diff), 0.003);
  EXPECT_GE(agree, 0.98);
  EXPECT_LT(max_diff, 0.35);

  size_t positions = 0;
  const double lib = library_nll(gbx, ref, kWindows, &positions);
  EXPECT_EQ(positions, kWindows * 255);
  EXPECT_NEAR(nll, lib, 1e-9) << "tool " << nll << " vs library " << lib;

  // The default output: a short text summary naming the gear and the tier.
  const Out t = sh("perplexity --ref " + ref_path() + " -m " + gbx + " --kv-policy f32 --windows 1");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("gear " + doc.get("gear")->text), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("top-1 agreement"), std::string::npos) << t.out;
  size_t lines = 0;
  for (char c : t.out) lines += c == '\n';
  EXPECT_LE(lines, 2u) << t.out;
}

TEST(CliPerplexityRef, MisuseExitsWithOneMessage) {
  const std::string &gbx = q4km_gbx();
  ASSERT_FALSE(gbx.empty());
  const std::string dir = gbt::temp_dir();
  auto ref = [&](const char *name, const std::string &text) {
    const std::string p = dir + "/" + name;
    EXPECT_TRUE(gbt::write_file(p, std::vector<uint8_t>(text.begin(), text.end())));
    return p;
  };
  struct Case {
    std::string args, message;
  } cases[] = {
      {"--ref " + dir + "/missing.ref.json", "cannot read the reference file"},
      {"--ref " + ref("truncated.json", "{\"windows\": [[1, 2, 3]"), "not valid JSON"},
      {"--ref " + ref("garbage.json", "windows"), "not valid JSON"},
      {"--ref " + ref("array.json", "[[1, 2, 3]]"), "expected a JSON object"},
      {"--ref " + ref("nowin.json", "{\"file\": \"x\"}"), "no \"windows\""},
      {"--ref " + ref("vocab.json", "{\"windows\": [[1, 600, 3]]}"), "token id 600 is outside the model's vocabulary"},
      {"--ref " + ref("negative.json", "{\"windows\": [[1, -1]]}"), "outside the model's vocabulary"},
      {"--ref " + ref("huge.json", "{\"windows\": [[1, 123456789012345678901234567890]]}"), "outside the model's vocabulary"},
      {"--ref " + ref("float.json", "{\"windows\": [[1, 2.5]]}"), "not a token id"},
      {"--ref " + ref("logits.json", "{\"windows\": [[1, 2, 3]], \"logits_w0\": [[0.5, 0.25]]}"), "vocabulary size mismatch"},
      {"--ref " + ref("nllw.json", "{\"windows\": [[1, 2, 3]], \"nll_per_window\": [1.0, 2.0]}"), "nll_per_window"},
      {"--ref " + ref_path() + " --windows 9", "has 8 windows"},
      {"--ref " + ref_path() + " -f " + ref_path(), "exclusive"},
  };
  for (const Case &c : cases) {
    const Out r = sh("perplexity -m " + gbx + " " + c.args);
    EXPECT_EQ(r.status, 1) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
    size_t lines = 0;
    for (char ch : r.err) lines += ch == '\n';
    EXPECT_EQ(lines, 1u) << c.args << ": " << r.err;
  }
}

bool rejects(const std::string &text) {
  gbt::Json j;
  gbt::JsonReader r(text);
  const bool ok = r.parse(&j);
  EXPECT_FALSE(ok) << "accepted: " << text.substr(0, 80);
  EXPECT_TRUE(ok || !r.error().empty());
  return !ok;
}

TEST(JsonMin, ReadsValidDocuments) {
  gbt::Json j;
  ASSERT_TRUE(parse("{\"a\": [1, -0.0, 2.5e-3, 1E+2, \"x\\\"y\\u00e9\\n\"], \"b\": {\"c\": null, \"d\": true, \"e\": {}}}", &j));
  const gbt::Json &a = *j.get("a");
  ASSERT_EQ(a.items.size(), 5u);
  long long i = 0;
  double d = 0;
  EXPECT_TRUE(a.items[0].integer(&i));
  EXPECT_EQ(i, 1);
  EXPECT_FALSE(a.items[1].integer(&i));
  EXPECT_TRUE(a.items[1].finite(&d));
  EXPECT_TRUE(signbit(a.items[1].f32()));
  EXPECT_DOUBLE_EQ(a.items[2].f64(), 2.5e-3);
  EXPECT_EQ(a.items[4].text, "x\"y\\u00e9\n");
  EXPECT_TRUE(j.get("b")->get("d")->b);
  std::string deep(64, '['), close(64, ']');
  EXPECT_TRUE(parse(deep + close, &j));
}

TEST(JsonMin, RejectsMalformedDocumentsWithoutCrashing) {
  for (const char *bad : {"",
                          " ",
                          "{",
                          "[",
                          "[1,",
                          "[1,]",
                          "{\"a\"}",
                          "{\"a\":}",
                          "{\"a\":1,}",
                          "{a:1}",
                          "\"abc",
                          "\"\\",
                          "\"\\q\"",
                          "\"\\u12\"",
                          "\"a\tb\"",
                          "tru",
                          "nul",
                          "01",
                          "-",
                          "1.",
                          ".5",
                          "1e",
                          "+1",
                          "--1",
                          "1-2",
                          "[1 2]",
                          "{} {}",
                          "[]x",
                          "{\"a\": 1, \"a\": 2}",
                          "\x01"})
    rejects(bad);
  rejects(std::string("[1, \0 2]", 8));  // a NUL byte
  // Nesting deeper than 64 is refused, however deep (no stack overflow).
  rejects(std::string(65, '[') + std::string(65, ']'));
  rejects(std::string(1000000, '['));
  rejects(std::string(500000, '{'));
  // Huge numbers parse as text; the checked accessors refuse them.
  gbt::Json j;
  ASSERT_TRUE(parse("[1e999999, -1e400, 123456789012345678901234567890, 9223372036854775807]", &j));
  double d = 0.0;
  long long i = 0;
  EXPECT_FALSE(j.items[0].finite(&d));
  EXPECT_FALSE(j.items[1].finite(&d));
  EXPECT_FALSE(j.items[2].integer(&i));
  EXPECT_TRUE(j.items[2].finite(&d));
  EXPECT_TRUE(j.items[3].integer(&i));
  EXPECT_EQ(i, 9223372036854775807LL);
  // Every prefix of a real reference file (cut before its closing brace) is
  // an error: truncated files.
  const std::vector<uint8_t> b = gbt::read_file(ref_path());
  const std::string text(b.begin(), b.end());
  const size_t end = text.rfind('}');
  ASSERT_NE(end, std::string::npos);
  ASSERT_GT(end, 128u);
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 64; n++) cuts.push_back(n);
  for (size_t n = 64; n < end - 64; n += 4099) cuts.push_back(n);
  for (size_t n = end - 64; n < end; n++) cuts.push_back(n);
  for (size_t n : cuts) rejects(text.substr(0, n));
}

}  // namespace
