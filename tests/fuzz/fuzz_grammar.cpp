// fuzz_grammar.cpp — fuzz target for the GBNF compiler and matcher
// (src/grammar/gbnf.cpp, matcher.cpp) through the public API.
// Input: grammar text, then optionally a NUL byte and a string to match.
// Checks: every status is one the grammar functions document; mem_size and
// create agree (create succeeds in exactly the counted bytes, and never
// writes past them); the image fits in that memory; matching is
// deterministic and prefix-closed (a string the grammar refuses stays
// refused when extended; every prefix of an accepted string or prefix is a
// prefix or complete). Any failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "gearbx.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_grammar";
#include "fuzz/fuzz_util.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

bool compile_status(gb_status s) {
  return s == GB_OK || s == GB_ERR_SYNTAX || s == GB_ERR_UNSUPPORTED_FEATURE || s == GB_ERR_INVALID_ARGUMENT;
}

gb_grammar_match_result match(gb_grammar *g, const std::string &s, bool *limited) {
  gb_grammar_match_result r = GB_GRAMMAR_MATCH_MAX_ENUM;
  const gb_status st = gb_grammar_match(g, s.data(), s.size(), &r);
  if (st == GB_ERR_GRAMMAR_LIMIT) {
    *limited = true;
    return GB_GRAMMAR_MATCH_NONE;
  }
  if (st != GB_OK) fuzz_fail("gb_grammar_match: unexpected status");
  if (r != GB_GRAMMAR_MATCH_NONE && r != GB_GRAMMAR_MATCH_PREFIX && r != GB_GRAMMAR_MATCH_COMPLETE)
    fuzz_fail("gb_grammar_match: result outside the enum");
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  g_in = data;
  g_in_size = size;
  if (size > 1 << 16) return 0;
  const uint8_t *nul = static_cast<const uint8_t *>(memchr(data, 0, size));
  const size_t glen = nul ? (size_t)(nul - data) : size;
  const char *text = reinterpret_cast<const char *>(data);
  const std::string probe = nul ? std::string(reinterpret_cast<const char *>(nul + 1), size - glen - 1) : std::string();
  gb_grammar_options o;
  gb_grammar_options_init(&o);
  o.log = quiet;
  o.max_stacks = 16;
  o.max_depth = 32;
  size_t need = 0;
  const gb_status ms = gb_grammar_mem_size(text, glen, &o, &need);
  if (!compile_status(ms)) fuzz_fail("gb_grammar_mem_size: unexpected status");
  if (ms != GB_OK) return 0;
  // Exactly the counted bytes, with a canary after them.
  std::vector<uint64_t> mem(need / 8 + 2, 0x5A5A5A5A5A5A5A5Aull);
  gb_grammar *g = nullptr;
  const gb_status cs = gb_grammar_create(text, glen, &o, mem.data(), need, &g);
  if (mem.back() != 0x5A5A5A5A5A5A5A5Aull) fuzz_fail("gb_grammar_create wrote past its counted memory");
  if (!compile_status(cs)) fuzz_fail("gb_grammar_create: unexpected status");
  if (cs != GB_OK) {
    // Only name resolution and left recursion are found after counting.
    if (cs == GB_ERR_INVALID_ARGUMENT || g) fuzz_fail("gb_grammar_create failed where gb_grammar_mem_size passed");
    return 0;
  }
  size_t image = 0;
  if (gb_grammar_image_size(g, &image) != GB_OK || image == 0 || image > need) fuzz_fail("image size");
  bool limited = false;
  const gb_grammar_match_result r = match(g, probe, &limited);
  if (!limited && match(g, probe, &limited) != r) fuzz_fail("matching is not deterministic");
  if (!limited) {
    if (r == GB_GRAMMAR_MATCH_NONE) {
      if (match(g, probe + "a", &limited) != GB_GRAMMAR_MATCH_NONE && !limited) fuzz_fail("a refused string extended");
    } else {
      for (size_t cut : {probe.size() / 2, probe.size() ? probe.size() - 1 : 0}) {
        const gb_grammar_match_result pr = match(g, probe.substr(0, cut), &limited);
        if (!limited && pr == GB_GRAMMAR_MATCH_NONE) fuzz_fail("a prefix of an accepted string is refused");
      }
    }
  }
  gb_grammar_destroy(g);
  return 0;
}

// Seeds: grammars of the kinds people write (JSON, arithmetic, lists,
// Unicode classes, bounded repetitions), each with a string it accepts.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  static const char *const kSeeds[][2] = {
      {"root ::= object\nvalue ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
       "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
       "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
       "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
       "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
       "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n",
       "{\"a\": [1, 2.5e3, \"x\\u00e9\"], \"b\": null}"},
      {"root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"", "(1+2)-30"},
      {"root ::= item+ # a list\nitem ::= \"- \" [^\\n]+ \"\\n\"", "- one\n- two\n"},
      {"root ::= [α-ω]{2,4} . [^a-z] \"\\u00e9\" [\\U0001F600-\\U0001F64F]?", "αβ日!é😀"},
      {"root ::= (\"ab\" | [c-e]){1,3} \"x\"{2} \"y\"{0,} \"z\"{,2}", "abcxxyyz"},
      {"root ::= a\na ::= b c\nb ::= \"b\"?\nc ::= \"c\" | \"\"", "bc"},
  };
  for (const auto &s : kSeeds) {
    std::string in = s[0];
    in.push_back('\0');
    in += s[1];
    seeds->push_back(gb::FuzzSeed{std::vector<uint8_t>(in.begin(), in.end()), strlen(s[0]), 1});
  }
}
