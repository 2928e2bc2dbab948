// test_cli.cpp — the `gearbx` tool's contract: run streams only text to
// stdout, perplexity prints and writes JSON with the documented keys, and
// errors exit non-zero with one line on stderr.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

using Out = gbt::CliOut;
Out sh(const std::string &args) { return gbt::run_cli(args); }

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

// A file with one quantized tier (a converted Q4_K_M GGUF) has no float tier
// for the KL: perplexity scores it without one, no flag needed, and says so.
TEST(Cli, PerplexityOfASingleQuantizedTierNeedsNoFlag) {
  const std::string gbx = gbt::temp_dir() + "/s5-q4km-only.gbx";
  const Out c = sh("convert " + gbt::shared_path("fixtures/stories5M-Q4_K_M.gguf") + " -o " + gbx);
  ASSERT_EQ(c.status, 0) << c.err;
  const Out r = sh("perplexity -m " + gbx + " -f " + gbt::shared_path("data/tinystories_valid_excerpt.txt") +
                   " --ctx 128 --max-tokens 200");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ppl"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no KL"), std::string::npos) << r.err;
  unlink(gbx.c_str());
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

TEST(Cli, InfoPrintsSessionMemoryPerGear) {
  const Out r = sh("info " + gbt::stories260k_gbx() + " --ctx 128 --kv-budget 0.5");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("context 128 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  spec "), std::string::npos) << r.out;  // a size, or why not
  for (const char *g : {"low", "mid", "high", "f32", "auto"}) {
    const size_t at = r.out.find(std::string("\n  ") + g);
    ASSERT_NE(at, std::string::npos) << g << ": " << r.out;
    // "session N bytes" where N is what gb_session_mem_size says.
    const size_t sb = r.out.find("session", at);
    ASSERT_NE(sb, std::string::npos);
    EXPECT_GT(strtoull(r.out.c_str() + sb + 8, nullptr, 10), 0ull) << g;
  }
  // The session of the low gear, checked against the library.
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_ctx = 128;
  so.kv.beta = 0.5f;
  so.gear = GB_GEAR_LOW;
  size_t bytes = 0;
  ASSERT_EQ(gb_session_mem_size(m, &so, &bytes), GB_OK);
  gb_model_close(m);
  EXPECT_NE(r.out.find("low      session " + std::string(10 - std::to_string(bytes).size(), ' ') + std::to_string(bytes) + " bytes"),
            std::string::npos)
      << bytes << "\n" << r.out;
  EXPECT_NE(sh("info " + gbt::stories260k_gbx() + " --ctx").status, 0);
  EXPECT_NE(sh("info " + gbt::stories260k_gbx() + " --bogus").status, 0);
}

// Colour by gear only on a terminal: under a pseudo-terminal (util-linux
// `script`) the text carries SGR codes, through a pipe it does not; --color
// overrides both ways; --json prints one object per token instead.
TEST(Cli, RunColoursTokensOnlyOnATerminal) {
  const std::string run = std::string(GB_CLI_PATH) + " run -m " + gbt::stories260k_gbx() + " --gear auto --temp 0 -n 12 --quiet";
  const std::string dir = gbt::temp_dir(), o = dir + "/tty.out";
  auto capture = [&](const std::string &cmd) {
    const int rc = system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
    const std::vector<uint8_t> b = gbt::read_file(o);
    return std::string(b.begin(), b.end());
  };
  const std::string tty = capture("env -u NO_COLOR TERM=xterm script -qec '" + run + "' /dev/null > " + o + " 2>&1 < /dev/null");
  EXPECT_NE(tty.find("\x1b[3"), std::string::npos) << "no colour on a terminal: " << tty;
  std::string plain;  // the terminal's text without colour codes and carriage returns
  for (size_t i = 0; i < tty.size(); i++) {
    if (tty[i] == '\x1b') {
      while (i < tty.size() && tty[i] != 'm') i++;
    } else if (tty[i] != '\r') {
      plain += tty[i];
    }
  }
  EXPECT_EQ(plain.rfind("Once upon a time", 0), 0u) << plain;
  const std::string pipe = capture("env -u NO_COLOR TERM=xterm " + run + " | cat > " + o);
  EXPECT_EQ(pipe.find('\x1b'), std::string::npos) << "colour through a pipe: " << pipe;
  EXPECT_EQ(pipe.rfind("Once upon a time", 0), 0u) << pipe;
  const std::string never = capture("env -u NO_COLOR TERM=xterm script -qec '" + run + " --color never' /dev/null > " + o + " 2>&1 < /dev/null");
  EXPECT_EQ(never.find('\x1b'), std::string::npos) << never;
  const std::string nocolor = capture("env NO_COLOR=1 TERM=xterm script -qec '" + run + "' /dev/null > " + o + " 2>&1 < /dev/null");
  EXPECT_EQ(nocolor.find('\x1b'), std::string::npos) << nocolor;
  const std::string always = capture(run + " --color always > " + o);
  EXPECT_NE(always.find("\x1b[3"), std::string::npos) << always;
  EXPECT_EQ(sh("run -m " + gbt::stories260k_gbx() + " --color sometimes").status, 1);
  // --json: one object per generated token, with its text and gear.
  const std::string json = capture(run + " --json > " + o);
  size_t lines = 0, at = 0;
  for (char c : json) lines += c == '\n';
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 12u);
  while ((at = json.find('\n', at)) != std::string::npos) at++;
  EXPECT_EQ(json.rfind("{\"step\":0,", 0), 0u) << json;
  EXPECT_NE(json.find("\"gear\":\""), std::string::npos);
  EXPECT_NE(json.find("\"text\":\""), std::string::npos);
  EXPECT_EQ(json.find('\x1b'), std::string::npos);
}

TEST(Cli, RunGenerationControl) {
  const std::string base = "run -m " + gbt::stories260k_gbx() + " --gear high --temp 0 -n 60 --quiet";
  const Out plain = sh(base);
  ASSERT_EQ(plain.status, 0) << plain.err;
  const size_t at = plain.out.find(" Lily");
  ASSERT_NE(at, std::string::npos) << plain.out;
  // --stop: the text up to the stop string, which is not printed.
  const Out stopped = sh(base + " --stop ' Lily' --stop 'never in this story'");
  ASSERT_EQ(stopped.status, 0) << stopped.err;
  EXPECT_EQ(stopped.out, plain.out.substr(0, at) + "\n");
  // --logit-bias: forcing EOS ends the story at once; banning a token keeps it out.
  const Out eos = sh(base + " --logit-bias 2=1000");
  ASSERT_EQ(eos.status, 0) << eos.err;
  EXPECT_EQ(eos.out, "\n");
  // Penalties change a greedy story.
  const Out pen = sh(base + " --repeat-penalty 1.5 --penalty-window 32");
  ASSERT_EQ(pen.status, 0) << pen.err;
  EXPECT_NE(pen.out, plain.out);
  for (const char *bad : {" --repeat-penalty 0", " --logit-bias 2", " --logit-bias x=1", " --logit-bias 99999=1",
                          " --penalty-window 0", " --stop ''", " --frequency-penalty nan"}) {
    const Out r = sh(base + bad);
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_TRUE(r.out.empty()) << bad;
    size_t lines = 0;
    for (char c : r.err) lines += c == '\n';
    EXPECT_EQ(lines, 1u) << bad << ": " << r.err;
  }
}

TEST(Cli, PlanAndRunWithABudget) {
  const Out plan = sh("plan -m " + gbt::stories5m_gbx() + " --budget 4M --ctx 256");
  ASSERT_EQ(plan.status, 0) << plan.err;
  EXPECT_EQ(plan.out.rfind("plan for 4.0 MiB, context 256: gear ", 0), 0u) << plan.out;
  EXPECT_NE(plan.out.find("resident weights"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("gave up: "), std::string::npos) << plan.out;
  const Out roomy = sh("plan -m " + gbt::stories5m_gbx() + " --budget 1G");
  ASSERT_EQ(roomy.status, 0) << roomy.err;
  EXPECT_NE(roomy.out.find("gave up: nothing"), std::string::npos) << roomy.out;
  const Out run = sh("run -m " + gbt::stories5m_gbx() + " --budget 4M --ctx 256 --temp 0 -n 20");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
  EXPECT_NE(run.err.find("plan for 4.0 MiB"), std::string::npos) << run.err;
  for (const std::string &bad : {"plan -m " + gbt::stories5m_gbx() + " --budget 100K", "plan -m " + gbt::stories5m_gbx(),
                                 "plan -m " + gbt::stories5m_gbx() + " --budget 12Q", std::string("plan --budget 1G"),
                                 "run -m " + gbt::stories5m_gbx() + " --budget 100K"}) {
    const Out r = sh(bad);
    EXPECT_EQ(r.status, 1) << bad;
    size_t lines = 0;
    for (char c : r.err) lines += c == '\n';
    EXPECT_EQ(lines, 1u) << bad << ": " << r.err;
  }
}

// Ctrl-C stops generation through the session's abort callback: the text so
// far and the summary are printed, the exit status is 130.
TEST(Cli, RunStopsCleanlyOnSigint) {
  const std::string dir = gbt::temp_dir(), o = dir + "/int.out", e = dir + "/int.err", st = dir + "/int.status";
  // Endless: no end-of-text or BOS, an evicting pool, a huge context. The
  // signal goes once the story has started (the handler is in place by then,
  // however slowly the machine starts the program), at most after 60 s.
  const std::string run = std::string(GB_CLI_PATH) + " run -m " + gbt::stories5m_gbx() +
                          " -n 100000000 --ctx 1000000 --kv-bytes 4000000 --kv-evict --temp 0.8 --logit-bias 1=-inf"
                          " --logit-bias 2=-inf > " + o + " 2> " + e;
  const std::string script = run + " & p=$!; for i in $(seq 1 1200); do [ $(stat -c %s " + o +
                             " 2>/dev/null || echo 0) -ge 64 ] && break; sleep 0.05; done; kill -INT $p; wait $p; echo $? > " + st;
  gbt::write_temp("int.sh", script);
  ASSERT_EQ(system(("bash " + dir + "/int.sh").c_str()), 0);
  EXPECT_EQ(atoi(gbt::slurp(st).c_str()), 130);
  const std::vector<uint8_t> eb = gbt::read_file(e), ob = gbt::read_file(o);
  const std::string err(eb.begin(), eb.end()), out(ob.begin(), ob.end());
  EXPECT_NE(err.find("interrupted after"), std::string::npos) << err;
  EXPECT_NE(err.find("policy "), std::string::npos) << err;  // the summary
  EXPECT_GT(out.size(), 50u);
}

}  // namespace
