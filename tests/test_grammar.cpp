// test_grammar.cpp — constrained decoding: the GBNF compiler and matcher
// (gb_grammar_*) on strings, malformed grammars, and sessions decoding under
// a grammar: every token the mask allows against the matcher run on the
// text, sampled generations that all complete, the speculative gear's
// greedy output against the verifier's, state save / restore, replacing a
// grammar mid-session, and no allocation while decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "crc32.h"
#include "sample_files.h"
#include "test_util.h"

namespace {

struct LogCapture {
  std::string last;
  int errors = 0;
  static void fn(void *user, gb_log_level level, const char *msg) {
    auto *c = static_cast<LogCapture *>(user);
    if (level == GB_LOG_ERROR) c->errors++;
    c->last = msg;
  }
};

// A compiled grammar, owned.
struct Grammar {
  gb_grammar *g = nullptr;
  gb_status st = GB_OK;
  LogCapture log;
  explicit Grammar(const std::string &text, const char *root = nullptr, uint32_t stacks = 0, uint32_t depth = 0) {
    gb_grammar_options o;
    gb_grammar_options_init(&o);
    o.root = root;
    o.log = LogCapture::fn;
    o.log_user = &log;
    if (stacks) o.max_stacks = stacks;
    if (depth) o.max_depth = depth;
    st = gb_grammar_create(text.data(), text.size(), &o, nullptr, 0, &g);
  }
  ~Grammar() { gb_grammar_destroy(g); }
  gb_grammar_match_result match(const std::string &s) {
    gb_grammar_match_result r = GB_GRAMMAR_MATCH_MAX_ENUM;
    EXPECT_EQ(gb_grammar_match(g, s.data(), s.size(), &r), GB_OK);
    return r;
  }
};

constexpr gb_grammar_match_result NONE = GB_GRAMMAR_MATCH_NONE, PREFIX = GB_GRAMMAR_MATCH_PREFIX,
                                  COMPLETE = GB_GRAMMAR_MATCH_COMPLETE;

TEST(Grammar, LiteralsClassesAndRepetitions) {
  Grammar g(R"(# a comment line
root ::= "id:" ws num ("," ws num){0,2} tail   # trailing comment
num ::= [1-9] [0-9]* | "0"
ws ::= [ \t]?
tail ::= ";" | "."
)");
  ASSERT_EQ(g.st, GB_OK) << g.log.last;
  EXPECT_EQ(g.match(""), PREFIX);
  EXPECT_EQ(g.match("id:"), PREFIX);
  EXPECT_EQ(g.match("id: 12;"), COMPLETE);
  EXPECT_EQ(g.match("id:0,\t3,4."), COMPLETE);
  EXPECT_EQ(g.match("id:0,3,4,5."), NONE);  // at most two more
  EXPECT_EQ(g.match("id:01;"), NONE);
  EXPECT_EQ(g.match("id:  1;"), NONE);      // one blank at most
  EXPECT_EQ(g.match("id:7"), PREFIX);
  EXPECT_EQ(g.match("id:7;x"), NONE);
}

TEST(Grammar, ExactAndOpenCounts) {
  Grammar g(R"(root ::= "a"{3} "b"{2,} "c"{,2} "d"{1,3} "e"+ "f"?)");
  ASSERT_EQ(g.st, GB_OK) << g.log.last;
  EXPECT_EQ(g.match("aaabbde"), COMPLETE);
  EXPECT_EQ(g.match("aaabbbbbbccdddeeef"), COMPLETE);
  EXPECT_EQ(g.match("aabbde"), NONE);
  EXPECT_EQ(g.match("aaabde"), NONE);
  EXPECT_EQ(g.match("aaabbcccde"), NONE);
  EXPECT_EQ(g.match("aaabbddddde"), NONE);
  EXPECT_EQ(g.match("aaabbd"), PREFIX);
  EXPECT_EQ(g.match("aaabbdeff"), NONE);
}

TEST(Grammar, UnicodeClassesByUtf8Bytes) {
  Grammar g(R"(root ::= [α-ω]+ [^a-z"\\] . "\u00e9" [\x41-\x43])");
  ASSERT_EQ(g.st, GB_OK) << g.log.last;
  EXPECT_EQ(g.match("αβ日xéB"), COMPLETE);
  EXPECT_EQ(g.match("ω!\nées"), NONE);  // "é" then "s" is not in [A-C]
  EXPECT_EQ(g.match("ω!\néC"), COMPLETE);
  EXPECT_EQ(g.match("αa"), NONE);        // a-z excluded
  EXPECT_EQ(g.match("a"), NONE);         // not Greek
  // A character cut inside its bytes is a prefix exactly when some code
  // point of the class starts with them.
  EXPECT_EQ(g.match("\xCE"), PREFIX);      // α..ω are CE B1 .. CF 89
  EXPECT_EQ(g.match("\xCF\x8A"), NONE);    // U+03CA is past ω
  EXPECT_EQ(g.match("\xD0"), NONE);
  // Ill-formed UTF-8 never matches a class, even one that takes anything.
  Grammar any(R"(root ::= .*)");
  ASSERT_EQ(any.st, GB_OK);
  EXPECT_EQ(any.match("ok \xF0\x9F\x98\x80"), COMPLETE);
  EXPECT_EQ(any.match("\xF0\x9F"), PREFIX);
  EXPECT_EQ(any.match("\xC0\xAF"), NONE);          // overlong
  EXPECT_EQ(any.match("\xED\xA0\x80"), NONE);      // a surrogate
  EXPECT_EQ(any.match("\xF4\x90\x80\x80"), NONE);  // past U+10FFFF
  EXPECT_EQ(any.match("\x80"), NONE);              // a lone continuation byte
}

TEST(Grammar, RecursionNestsAndRepetitionDoesNotGrowTheStack) {
  Grammar g(R"x(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")")x",
            nullptr, 8, 16);
  ASSERT_EQ(g.st, GB_OK) << g.log.last;
  EXPECT_EQ(g.match("(1+(2-3))+4"), COMPLETE);
  EXPECT_EQ(g.match("(1+2"), PREFIX);
  EXPECT_EQ(g.match("1+)"), NONE);
  // A long repetition runs in constant depth.
  std::string long_sum = "1";
  for (int i = 0; i < 2000; i++) long_sum += "+23";
  EXPECT_EQ(g.match(long_sum), COMPLETE);
  // Nesting is bounded by max_depth: a status, not a crash.
  std::string deep(40, '(');
  gb_grammar_match_result r;
  EXPECT_EQ(gb_grammar_match(g.g, deep.data(), deep.size(), &r), GB_ERR_GRAMMAR_LIMIT);
  EXPECT_NE(g.log.last.find("max_depth"), std::string::npos) << g.log.last;
}

TEST(Grammar, StartRuleAndEmptyAlternatives) {
  Grammar g("greeting ::= \"hi\" | \"\"\nroot ::= \"x\"", "greeting");
  ASSERT_EQ(g.st, GB_OK) << g.log.last;
  EXPECT_EQ(g.match(""), COMPLETE);
  EXPECT_EQ(g.match("h"), PREFIX);
  EXPECT_EQ(g.match("hi"), COMPLETE);
  EXPECT_EQ(g.match("x"), NONE);
}

struct Bad {
  const char *text;
  gb_status st;
  const char *where;  // expected in the log line
};

TEST(Grammar, MalformedGrammarsGetAStatusAndAPosition) {
  const Bad cases[] = {
      {"root ::= \"abc", GB_ERR_SYNTAX, "line 1, column 14"},
      {"root ::= [a-z", GB_ERR_SYNTAX, "unclosed character class"},
      {"root ::= (\"a\" | \"b\"", GB_ERR_SYNTAX, "expected ')'"},
      {"root \"a\"", GB_ERR_SYNTAX, "expected '::='"},
      {"root ::= \"a\"\n\nroot ::= \"b\"", GB_ERR_SYNTAX, "line 3, column 1: a rule defined twice"},
      {"root ::= item\n", GB_ERR_SYNTAX, "line 1, column 10: undefined rule"},
      {"start ::= \"a\"", GB_ERR_SYNTAX, "no rule named 'root'"},
      {"root ::= \"\\q\"", GB_ERR_SYNTAX, "unknown escape"},
      {"root ::= \"\\x4\"", GB_ERR_SYNTAX, "hexadecimal"},
      {"root ::= \"a\" @", GB_ERR_SYNTAX, "unexpected character"},
      {"root ::= * \"a\"", GB_ERR_SYNTAX, "repetition without a term"},
      {"root ::= \"a\"{3,2}", GB_ERR_SYNTAX, "n < m"},
      {"root ::= \"a\"{2", GB_ERR_SYNTAX, "expected '}'"},
      {"root ::= \"\xFF\"", GB_ERR_SYNTAX, "invalid UTF-8"},
      {"", GB_ERR_SYNTAX, "no rules"},
      {"root ::= \"a\"{1001}", GB_ERR_UNSUPPORTED_FEATURE, "over 1000"},
      {"root ::= root \"a\" | \"b\"", GB_ERR_UNSUPPORTED_FEATURE, "line 1, column 1: left recursion"},
      {"root ::= a\na ::= b \"x\"\nb ::= \"y\"? a", GB_ERR_UNSUPPORTED_FEATURE, "left recursion"},
      {"root ::= (\"a\"?)*", GB_ERR_UNSUPPORTED_FEATURE, "left recursion"},
  };
  for (const Bad &b : cases) {
    Grammar g(b.text);
    EXPECT_EQ(g.st, b.st) << b.text;
    EXPECT_EQ(g.g, nullptr) << b.text;
    EXPECT_NE(g.log.last.find(b.where), std::string::npos) << b.text << " -> " << g.log.last;
  }
}

TEST(Grammar, MemorySizeIsEnoughAndChecked) {
  const std::string text = "root ::= ([a-z]+ \" \"?){1,5} \".\"";
  size_t need = 0;
  ASSERT_EQ(gb_grammar_mem_size(text.data(), text.size(), nullptr, &need), GB_OK);
  std::vector<uint64_t> mem(need / 8 + 2, 0xA5A5A5A5A5A5A5A5ull);
  gb_grammar *g = nullptr;
  gb_grammar_options o;
  gb_grammar_options_init(&o);
  o.log = gbt::quiet_log;
  EXPECT_EQ(gb_grammar_create(text.data(), text.size(), &o, mem.data(), need - 1, &g), GB_ERR_ARENA_TOO_SMALL);
  EXPECT_EQ(gb_grammar_create(text.data(), text.size(), &o, reinterpret_cast<char *>(mem.data()) + 4, need, &g),
            GB_ERR_ALIGNMENT);
  ASSERT_EQ(gb_grammar_create(text.data(), text.size(), &o, mem.data(), need, &g), GB_OK);
  EXPECT_EQ(mem[need / 8 + 1], 0xA5A5A5A5A5A5A5A5ull);  // nothing past the size written
  gb_grammar_match_result r;
  ASSERT_EQ(gb_grammar_match(g, "ab cd.", 6, &r), GB_OK);
  EXPECT_EQ(r, COMPLETE);
  size_t image = 0;
  ASSERT_EQ(gb_grammar_image_size(g, &image), GB_OK);
  EXPECT_GT(image, 0u);
  EXPECT_LE(image, need);
  gb_grammar_destroy(g);
  EXPECT_EQ(gb_grammar_match(g, "a", 1, &r), GB_ERR_BAD_HANDLE);  // destroyed in caller memory
}

// ---- sessions ---------------------------------------------------------------

struct Model {
  gb_model *m = nullptr;
  explicit Model(const std::string &path) {
    gb_model_options mo = gbt::quiet_model_options();
    EXPECT_EQ(gb_model_open_file(path.c_str(), &mo, &m), GB_OK) << path;
  }
  ~Model() { gb_model_close(m); }
};

std::vector<int32_t> tokenize(gb_model *m, const std::string &text) {
  std::vector<int32_t> t(GB_TOKENIZE_CAPACITY(text.size()) + 8);
  size_t n = 0;
  EXPECT_EQ(gb_tokenize(m, text.data(), text.size(), GB_TOKENIZE_ADD_BOS, t.data(), t.size(), &n), GB_OK);
  t.resize(n);
  return t;
}

std::string text_of(gb_model *m, int32_t prev, int32_t tok) {
  const char *p;
  size_t n;
  EXPECT_EQ(gb_token_to_text(m, prev, tok, &p, &n), GB_OK);
  return std::string(p, n);
}

struct Gen {
  std::string text;
  std::vector<int32_t> tokens;
  bool ended = false;  // an end-of-generation token
  gb_status st = GB_OK;
};

// Decode up to n tokens; with check, every step's mask is compared with
// the matcher run on the text so far plus each token's text.
Gen decode(gb_session *s, gb_model *m, gb_grammar *g, int n, bool check = false) {
  Gen r;
  int32_t prev = -1;
  for (int i = 0; i < n; i++) {
    gb_step_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    int32_t t = -1;
    r.st = gb_decode_step(s, &t, &info);
    if (r.st != GB_OK) break;
    if (check) {
      gb_grammar_match_result now;
      EXPECT_EQ(gb_grammar_match(g, r.text.data(), r.text.size(), &now), GB_OK);
      for (uint32_t v = 0; v < info.n_vocab; v++) {
        int eog = 0;
        const gb_tokenizer *tk;
        gb_model_tokenizer(m, &tk);
        gb_tokenizer_is_eog(tk, (int32_t)v, &eog);
        bool want;
        if (eog) {
          want = now == COMPLETE;
        } else {
          const std::string piece = text_of(m, -1, (int32_t)v);
          gb_grammar_match_result after = NONE;
          const std::string cand = r.text + piece;
          if (!piece.empty()) {
            EXPECT_EQ(gb_grammar_match(g, cand.data(), cand.size(), &after), GB_OK);
          }
          want = after != NONE;
        }
        if (std::isfinite(info.logits[v]) != want) {
          ADD_FAILURE() << "token " << v << " allowed " << !want << " after \"" << r.text << "\"";
          r.st = GB_ERR_INTERNAL;
          return r;
        }
      }
    }
    r.tokens.push_back(t);
    if (info.end == GB_STEP_END_EOG) {
      r.ended = true;
      break;
    }
    r.text += text_of(m, prev, t);
    prev = t;
  }
  return r;
}

gb_session *session(gb_model *m, gb_grammar *g, float temp, uint64_t seed, gb_gear gear = GB_GEAR_DEFAULT,
                    uint32_t room = 0) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.grammar = g;
  so.grammar_max_bytes = room;
  so.sampler.temperature = temp;
  so.sampler.seed = seed;
  so.gear = gear;
  so.n_ctx = 256;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
  return s;
}

const char *kRecord = R"(root ::= "{\"name\": \"" name "\", \"age\": " age ", \"pet\": " pet "}"
name ::= [A-Z] [a-z]{1,8}
age ::= [1-9] [0-9]?
pet ::= "\"cat\"" | "\"dog\"" | "null")";

// A JSON string's characters loop on one state: the mask takes every
// token of plain characters at once and walks only the others. (Unbounded:
// a generation may not end within the test's tokens.)
const char *kJsonString = R"x(root ::= "{\"k\": \"" ( [^"\\\x00-\x1F] | "\\" ["\\/bfnrt] )* "\"}")x";

TEST(GrammarSession, TheMaskIsExactlyTheTokensThatContinueTheText) {
  for (const char *path : {"fixtures/stories5M-Q8_0.gguf", "fixtures/qwen2-tiny-Q4_K_M.gguf"})
  for (const char *text : {kRecord, kJsonString}) {
    Model mod(gbt::shared_path(path));
    ASSERT_NE(mod.m, nullptr);
    Grammar g(text);
    ASSERT_EQ(g.st, GB_OK) << g.log.last;
    gb_session *s = session(mod.m, g.g, 1.0f, 7);
    ASSERT_NE(s, nullptr);
    const std::vector<int32_t> p = tokenize(mod.m, "Tom is a boy.");
    ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
    const Gen r = decode(s, mod.m, g.g, 60, true);
    EXPECT_EQ(r.st, GB_OK);
    if (text == kRecord) {
      EXPECT_TRUE(r.ended) << path << ": " << r.text;
      EXPECT_EQ(g.match(r.text), COMPLETE) << r.text;
    } else {
      EXPECT_NE(g.match(r.text), NONE) << r.text;
      EXPECT_GT(r.text.size(), 12u) << r.text;  // into the string
    }
    gb_session_destroy(s);
  }
}

TEST(GrammarSession, SampledGenerationsAllComplete) {
  // stories260K: small enough for 200 generations per grammar.
  Model mod(gbt::stories260k_gbx());
  ASSERT_NE(mod.m, nullptr);
  const char *grammars[] = {
      kRecord,
      R"(root ::= "[" item ("," item){0,4} "]"
item ::= [0-9]{1,3} | "\"" [a-z ]{0,6} "\"" | "true" | "false")",
      R"x(root ::= expr "="
expr ::= term (("+" | "*") term){0,3}
term ::= [0-9] | "(" expr ")")x",
  };
  const int n = (int)(200 * gbt::test_scale()) + 1;
  const std::vector<int32_t> p = tokenize(mod.m, "Once upon a time");
  for (const char *text : grammars) {
    Grammar g(text);
    ASSERT_EQ(g.st, GB_OK) << g.log.last;
    int complete = 0;
    for (int seed = 0; seed < n; seed++) {
      gb_session *s = session(mod.m, g.g, 1.0f, (uint64_t)seed);
      ASSERT_NE(s, nullptr);
      ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
      const Gen r = decode(s, mod.m, g.g, 200);
      EXPECT_EQ(r.st, GB_OK);
      if (r.ended && g.match(r.text) == COMPLETE) complete++;
      else ADD_FAILURE() << "seed " << seed << ": \"" << r.text << "\" ended " << r.ended;
      gb_session_destroy(s);
    }
    EXPECT_EQ(complete, n);
  }
}

TEST(GrammarSession, SpecGearGreedyIsTheConstrainedVerifier) {
  Model mod(gbt::stories260k_gbx());
  ASSERT_NE(mod.m, nullptr);
  Grammar g(R"(root ::= "Lily said: \"" [a-z ,.]{1,40} "\"" ("\n" | "!"))");
  ASSERT_EQ(g.st, GB_OK) << g.log.last;
  const std::vector<int32_t> p = tokenize(mod.m, "Once upon a time");
  std::string texts[2];
  for (int k = 0; k < 2; k++) {
    gb_session *s = session(mod.m, g.g, 0.0f, 1, k == 0 ? GB_GEAR_HIGH : GB_GEAR_SPEC);
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
    const Gen r = decode(s, mod.m, g.g, 80);
    EXPECT_EQ(r.st, GB_OK);
    EXPECT_TRUE(r.ended) << r.text;
    texts[k] = r.text;
    gb_session_destroy(s);
  }
  EXPECT_EQ(texts[0], texts[1]);
  EXPECT_EQ(g.match(texts[0]), COMPLETE);
  // Sampling: still only strings of the grammar.
  for (uint64_t seed = 0; seed < 20; seed++) {
    gb_session *s = session(mod.m, g.g, 1.0f, seed, GB_GEAR_SPEC);
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
    const Gen r = decode(s, mod.m, g.g, 80);
    EXPECT_TRUE(r.ended && g.match(r.text) == COMPLETE) << r.text;
    gb_session_destroy(s);
  }
}

TEST(GrammarSession, StateSaveRestoreContinuesTheGrammar) {
  Model mod(gbt::stories260k_gbx());
  ASSERT_NE(mod.m, nullptr);
  Grammar g(kRecord);
  ASSERT_EQ(g.st, GB_OK);
  const std::vector<int32_t> p = tokenize(mod.m, "Once upon a time");
  for (gb_gear gear : {GB_GEAR_MID, GB_GEAR_SPEC}) {
    // Sampled, except for the spec gear, whose draft lengths (and so its
    // random draws) follow measured times.
    const float temp = gear == GB_GEAR_SPEC ? 0.0f : 1.0f;
    gb_session *a = session(mod.m, g.g, temp, 3, gear);
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(gb_prefill(a, p.data(), p.size()), GB_OK);
    Gen head;
    std::vector<uint8_t> img;
    // Save where the spec gear has handed out its whole round.
    for (int i = 0; i < 40 && img.empty(); i++) {
      const Gen one = decode(a, mod.m, g.g, 1);
      ASSERT_EQ(one.st, GB_OK);
      size_t sz;
      if (i >= 8 && gb_session_state_size(a, &sz) == GB_OK) img = gbt::save_state(a);
    }
    ASSERT_FALSE(img.empty());
    const Gen rest_a = decode(a, mod.m, g.g, 60);
    // A fresh session with room for a grammar but none set takes it all.
    gb_session *b = session(mod.m, nullptr, temp, 99, gear, 64 * 1024);
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(gb_session_state_load(b, img.data(), img.size()), GB_OK);
    const Gen rest_b = decode(b, mod.m, g.g, 60);
    EXPECT_EQ(rest_a.tokens, rest_b.tokens) << rest_a.text << " | " << rest_b.text << " | gear " << gear;
    EXPECT_TRUE(rest_b.ended);
    // A grammar record with a stack position off any element, behind a
    // valid CRC, is refused with nothing changed.
    std::vector<uint8_t> bad = img;
    size_t at = 0;
    for (size_t i = 32; i + 4 <= bad.size(); i++)
      if (memcmp(&bad[i], "GRAM", 4) == 0) at = i;
    ASSERT_GT(at, 0u);
    // tag, bytes, reserved, on, words, image, heads, depth, then the top's word
    uint32_t words;
    memcpy(&words, &bad[at + 8 + 5], 4);  // reserved (1 byte) and on (4) come first
    const size_t top = at + 8 + 1 + 4 + 4 + 4 * (size_t)words + 4 + 4;
    ASSERT_LT(top + 4, bad.size());
    const uint32_t off = 1;  // word 1 of the image: the header, never an element
    memcpy(&bad[top], &off, 4);
    const uint32_t crc = gb::crc32_update(0, bad.data() + 32, bad.size() - 32);
    memcpy(&bad[24], &crc, 4);
    gb_session *c = session(mod.m, nullptr, temp, 5, gear, 64 * 1024);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(gb_session_state_load(c, bad.data(), bad.size()), GB_ERR_CORRUPT);
    uint32_t pos = 99;
    ASSERT_EQ(gb_session_position(c, &pos, nullptr), GB_OK);
    EXPECT_EQ(pos, 0u);
    // A session without room does not take a state that has a grammar.
    gb_session *d = session(mod.m, nullptr, 1.0f, 5, gear, 0);
    ASSERT_NE(d, nullptr);
    EXPECT_NE(gb_session_state_load(d, img.data(), img.size()), GB_OK);
    gb_session_destroy(a);
    gb_session_destroy(b);
    gb_session_destroy(c);
    gb_session_destroy(d);
  }
}

TEST(GrammarSession, SetReplaceAndClearMidSession) {
  Model mod(gbt::stories260k_gbx());
  ASSERT_NE(mod.m, nullptr);
  Grammar yes(R"(root ::= "yes" | "no")"), num(R"(root ::= [0-9]{2})"), big(std::string("root ::= ") + [] {
    std::string s = "\"a\"";
    for (int i = 0; i < 400; i++) s += " | \"w" + std::to_string(i) + "\"";
    return s;
  }());
  ASSERT_EQ(big.st, GB_OK);
  const std::vector<int32_t> p = tokenize(mod.m, "Once upon a time");
  size_t yes_bytes = 0, big_bytes = 0;
  ASSERT_EQ(gb_grammar_image_size(yes.g, &yes_bytes), GB_OK);
  ASSERT_EQ(gb_grammar_image_size(big.g, &big_bytes), GB_OK);
  gb_session *s = session(mod.m, yes.g, 1.0f, 11, GB_GEAR_DEFAULT, (uint32_t)(yes_bytes > 4096 ? yes_bytes : 4096));
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
  Gen r = decode(s, mod.m, yes.g, 10);
  EXPECT_TRUE(r.ended && yes.match(r.text) == COMPLETE) << r.text;
  // A chat turn later: another grammar for the next answer.
  ASSERT_EQ(gb_session_set_grammar(s, num.g), GB_OK);
  ASSERT_EQ(gb_prefill(s, p.data(), 2), GB_OK);
  r = decode(s, mod.m, num.g, 10);
  EXPECT_TRUE(r.ended && num.match(r.text) == COMPLETE) << r.text;
  // Too large for the room: refused, the grammar in force stays.
  gb_log_fn fn = nullptr;
  (void)fn;
  ASSERT_GT(big_bytes, 4096u);
  EXPECT_EQ(gb_session_set_grammar(s, big.g), GB_ERR_BUDGET_EXCEEDED);
  ASSERT_EQ(gb_session_reset(s), GB_OK);
  ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
  r = decode(s, mod.m, num.g, 10);
  EXPECT_TRUE(r.ended && num.match(r.text) == COMPLETE) << r.text;
  // Cleared: free text again (the story goes on past two digits).
  ASSERT_EQ(gb_session_set_grammar(s, nullptr), GB_OK);
  ASSERT_EQ(gb_prefill(s, p.data(), p.size()), GB_OK);
  r = decode(s, mod.m, nullptr, 20);
  EXPECT_EQ(r.tokens.size(), 20u);
  gb_session_destroy(s);
  // A session that reserved nothing.
  gb_session *plain = session(mod.m, nullptr, 1.0f, 1);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(gb_session_set_grammar(plain, yes.g), GB_ERR_UNAVAILABLE);
  gb_session_destroy(plain);
}

TEST(GrammarSession, NoTokenThatContinuesIsAStatusAndChangesNothing) {
  // A vocabulary without a way to write 'z': the byte token <0x7A> is an
  // unused control token, and no piece holds a 'z'.
  gb::SampleDims d;
  d.vocab = 300;
  d.seq_len = 256;
  gb::GgufSpec spec = gb::sample_gguf_spec(d, 0 /* F32 */);
  std::vector<uint8_t> toks, scores, types;
  auto u32 = [](std::vector<uint8_t> &v, uint32_t x) { v.insert(v.end(), (uint8_t *)&x, (uint8_t *)&x + 4); };
  auto u64 = [](std::vector<uint8_t> &v, uint64_t x) { v.insert(v.end(), (uint8_t *)&x, (uint8_t *)&x + 8); };
  auto str = [&](std::vector<uint8_t> &v, const std::string &t) {
    u64(v, t.size());
    v.insert(v.end(), t.begin(), t.end());
  };
  u32(toks, 8), u64(toks, d.vocab), u32(scores, 6), u64(scores, d.vocab), u32(types, 5), u64(types, d.vocab);
  for (uint32_t i = 0; i < d.vocab; i++) {
    char buf[32];
    uint32_t type = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    if (i == 0) snprintf(buf, sizeof buf, "<unk>");
    else if (i == 1) snprintf(buf, sizeof buf, "<s>");
    else if (i == 2) snprintf(buf, sizeof buf, "</s>");
    else if (i == 3 + 'z') snprintf(buf, sizeof buf, "<unused0>"), type = 5;
    else if (i < 259) snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
    else snprintf(buf, sizeof buf, "\xE2\x96\x81%c%u", 'a' + (char)(i % 25), i);  // a..y
    str(toks, buf);
    float sc = i < 259 ? 0.0f : -(float)i;
    scores.insert(scores.end(), (uint8_t *)&sc, (uint8_t *)&sc + 4);
    u32(types, type);
  }
  spec.set("tokenizer.ggml.tokens", 9, toks);
  spec.set("tokenizer.ggml.scores", 9, scores);
  spec.set("tokenizer.ggml.token_type", 9, types);
  const std::vector<uint8_t> file = gb::gguf_serialize(spec);
  std::vector<uint64_t> mem((file.size() + 7) / 8);
  memcpy(mem.data(), file.data(), file.size());
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_memory(mem.data(), file.size(), &mo, &m), GB_OK);
  Grammar g(R"(root ::= "a" | "z")");  // "a" can be written; after it the grammar ends
  Grammar z(R"(root ::= "z")");
  ASSERT_EQ(g.st, GB_OK);
  ASSERT_EQ(z.st, GB_OK);
  gb_session *s = session(m, z.g, 0.0f, 1, GB_GEAR_DEFAULT, 64 * 1024);
  ASSERT_NE(s, nullptr);
  const int32_t bos = 1;
  ASSERT_EQ(gb_prefill(s, &bos, 1), GB_OK);
  uint32_t pos = 0, n_ctx = 0;
  ASSERT_EQ(gb_session_position(s, &pos, &n_ctx), GB_OK);
  int32_t t = -7;
  EXPECT_EQ(gb_decode_step(s, &t, nullptr), GB_ERR_GRAMMAR_NO_TOKEN);
  EXPECT_EQ(t, -7);  // nothing handed out
  uint32_t pos2 = 0;
  ASSERT_EQ(gb_session_position(s, &pos2, &n_ctx), GB_OK);
  EXPECT_EQ(pos2, pos);
  EXPECT_EQ(gb_decode_step(s, &t, nullptr), GB_ERR_GRAMMAR_NO_TOKEN);  // the same again
  // Another grammar: decoding goes on from the same place.
  ASSERT_EQ(gb_session_set_grammar(s, g.g), GB_OK);
  const Gen r = decode(s, m, g.g, 8);
  EXPECT_EQ(r.st, GB_OK);
  EXPECT_TRUE(r.ended);
  EXPECT_EQ(r.text, "a");
  gb_session_destroy(s);
  gb_model_close(m);
}

TEST(GrammarSession, LimitsAndOptionsAreChecked) {
  Model mod(gbt::stories260k_gbx());
  ASSERT_NE(mod.m, nullptr);
  Grammar g(kRecord);
  gb_session_options so;
  gb_session_options_init(&so);
  so.log = gbt::quiet_log;
  so.grammar = g.g;
  size_t with = 0, without = 0;
  ASSERT_EQ(gb_session_mem_size(mod.m, &so, &with), GB_OK);
  so.grammar = nullptr;
  ASSERT_EQ(gb_session_mem_size(mod.m, &so, &without), GB_OK);
  EXPECT_GT(with, without);  // the room, the index and the parse state are counted
  so.grammar = g.g;
  so.grammar_max_stacks = 0;
  EXPECT_EQ(gb_session_mem_size(mod.m, &so, &with), GB_ERR_INVALID_ARGUMENT);
  so.grammar_max_stacks = 64;
  so.grammar_max_depth = 70000;
  EXPECT_EQ(gb_session_mem_size(mod.m, &so, &with), GB_ERR_INVALID_ARGUMENT);
  so.grammar_max_depth = 128;
  so.grammar_max_bytes = 16;  // smaller than the grammar
  EXPECT_EQ(gb_session_mem_size(mod.m, &so, &with), GB_ERR_BUDGET_EXCEEDED);
  so.grammar_max_bytes = 0;
  // A start state beyond the limits fails creation with its status.
  Grammar wide(R"(root ::= "a" | "b" | "c" | "d" | "e")");
  so.grammar = wide.g;
  so.grammar_max_stacks = 3;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(mod.m, &so, nullptr, 0, &s), GB_ERR_GRAMMAR_LIMIT);
  EXPECT_EQ(s, nullptr);
  // A grammar handle that is not one.
  so.grammar = reinterpret_cast<const gb_grammar *>(mod.m);
  EXPECT_EQ(gb_session_mem_size(mod.m, &so, &with), GB_ERR_BAD_HANDLE);
}

TEST(GrammarSession, DecodingUnderAGrammarDoesNotAllocate) {
  Model mod(gbt::stories260k_gbx());
  ASSERT_NE(mod.m, nullptr);
  Grammar g(kRecord), other(R"(root ::= [a-z]{3,9})");
  gb_session *s = session(mod.m, g.g, 1.0f, 5, GB_GEAR_DEFAULT, 8192);
  ASSERT_NE(s, nullptr);
  const std::vector<int32_t> p = tokenize(mod.m, "Once upon a time");
  gbt::alloc_count_start();
  gb_prefill(s, p.data(), p.size());
  for (int i = 0; i < 30; i++) {
    int32_t t;
    if (gb_decode_step(s, &t, nullptr) != GB_OK) break;
  }
  gb_session_set_grammar(s, other.g);
  gb_session_reset(s);
  gb_prefill(s, p.data(), p.size());
  for (int i = 0; i < 10; i++) {
    int32_t t;
    if (gb_decode_step(s, &t, nullptr) != GB_OK) break;
  }
  EXPECT_EQ(gbt::alloc_count_stop(), 0u);
  gb_session_destroy(s);
}

}  // namespace
