// gbnf.h — the compiled form of a GBNF grammar, and the compiler.
//
// A grammar compiles to one array of 32-bit words (an "image") with no
// pointers, so a session can copy it into its arena and a saved state can
// name it by its bytes:
//
//   [0] kMagic  [1] kVersion  [2] words in the image  [3] rules
//   [4] the root rule  [5] offset of the rule table  [6..8) zero
//   rule bodies, then the rule table: (rules) offsets of each rule's body
//
// A body is its alternatives one after the other, each a sequence of
// elements ended by kEndAlt, and the last followed by kEndRule. Elements
// (the low 8 bits of the first word say which):
//   kByte   the byte in bits 8..15 (literal text, matched byte for byte)
//   kClass  n = bits 8..31 code-point ranges follow, two words each (lo, hi),
//           sorted and disjoint; matches one UTF-8 encoded code point in them
//   kRef    the rule in bits 8..31
// Repetitions and groups become rules of their own (x* is R ::= x R | ε,
// with the reference at the end of an alternative run as a loop by the
// matcher, so repetition does not grow its stack).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

namespace gb {

constexpr uint32_t kGbnfMagic = 0x52474247u;  // "GBGR"
constexpr uint32_t kGbnfVersion = 1;
constexpr uint32_t kGbnfHeaderWords = 8;
// Limits the compiler enforces (GB_ERR_UNSUPPORTED_FEATURE beyond them).
constexpr size_t kGbnfMaxText = 16u << 20;       // bytes of grammar text
constexpr size_t kGbnfMaxWords = 16u << 20;      // words of image
constexpr uint32_t kGbnfMaxRepeat = 1000;        // m and n of x{m,n}
constexpr uint32_t kGbnfMaxNesting = 256;        // groups inside groups

enum GbnfElem : uint32_t { kGbByte = 1, kGbClass = 2, kGbRef = 3, kGbEndAlt = 4, kGbEndRule = 5 };

inline uint32_t gbnf_kind(uint32_t w) { return w & 0xffu; }
inline uint32_t gbnf_arg(uint32_t w) { return w >> 8; }

// Compile text[0..len) with start rule `root` into out[0..cap) words.
// out == nullptr counts: *need receives the words the compile needs (an
// upper bound of the image plus the compiler's work space), and only the
// syntax is checked. Placing (out != nullptr, cap >= the counted need):
// also resolves rule names (undefined or twice-defined rules, the root)
// and refuses left recursion; *image receives the image's words (at out[0]).
// Errors: GB_ERR_SYNTAX, GB_ERR_UNSUPPORTED_FEATURE (logged with line and
// column), GB_ERR_INTERNAL (cap below the counted need).
gb_status gbnf_compile(const char *text, size_t len, const char *root, uint32_t *out, size_t cap, size_t *need,
                       size_t *image, const Logger &log);

// Check that words[0..n) is an image gbnf_compile wrote (header, offsets
// in order, element kinds, class ranges and rule numbers all in range).
// W: a pointer to the words, or anything with operator[] giving word i (a
// saved state's little-endian bytes). GB_ERR_CORRUPT otherwise.
template <class W>
gb_status gbnf_check(const W &w, size_t n) {
  if (n < kGbnfHeaderWords || n > kGbnfMaxWords || w[0] != kGbnfMagic || w[1] != kGbnfVersion || w[2] != n) return GB_ERR_CORRUPT;
  const uint32_t rules = w[3], root = w[4], table = w[5];
  if (rules == 0 || root >= rules || table < kGbnfHeaderWords || (uint64_t)table + rules != n) return GB_ERR_CORRUPT;
  for (uint32_t r = 0; r < rules; r++) {
    size_t p = w[table + r];
    if (p < kGbnfHeaderWords || p >= table || (r > 0 && p <= w[table + r - 1])) return GB_ERR_CORRUPT;
    while (true) {
      if (p >= table) return GB_ERR_CORRUPT;
      const uint32_t k = gbnf_kind(w[p]), a = gbnf_arg(w[p]);
      if (k == kGbEndRule) break;
      if (k == kGbClass) {
        if (p + 1 + 2 * (size_t)a > table) return GB_ERR_CORRUPT;
        for (uint32_t j = 0; j < a; j++) {
          const uint32_t lo = w[p + 1 + 2 * j], hi = w[p + 2 + 2 * j];
          if (lo > hi || hi > 0x10FFFF || (j > 0 && lo <= w[p + 2 * j])) return GB_ERR_CORRUPT;
        }
        p += 1 + 2 * (size_t)a;
      } else if (k == kGbRef) {
        if (a >= rules) return GB_ERR_CORRUPT;
        p++;
      } else if (k == kGbByte) {
        if (a > 0xFF) return GB_ERR_CORRUPT;
        p++;
      } else if (k == kGbEndAlt) {
        // An alternative ends; kGbEndRule must follow one.
        p++;
      } else {
        return GB_ERR_CORRUPT;
      }
    }
    if (p == w[table + r] || gbnf_kind(w[p - 1]) != kGbEndAlt) return GB_ERR_CORRUPT;
  }
  return GB_OK;
}

// Whether word pos of a checked image starts an element of a rule body
// (kGbByte, kGbClass, kGbRef or kGbEndAlt), as a parse stack's node may
// point at: a restored state is held to it.
template <class W>
bool gbnf_element_start(const W &w, size_t n, uint32_t pos) {
  const uint32_t rules = w[3], table = w[5];
  if (pos < kGbnfHeaderWords || pos >= table || n < table) return false;
  // The rule whose body holds pos: bodies lie in rule order.
  uint32_t lo = 0, hi = rules;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (w[table + mid] <= pos) lo = mid;
    else hi = mid;
  }
  for (size_t p = w[table + lo]; p < table; p += gbnf_kind(w[p]) == kGbClass ? 1 + 2 * (size_t)gbnf_arg(w[p]) : 1) {
    if (p == pos) return gbnf_kind(w[p]) != kGbEndRule;
    if (gbnf_kind(w[p]) == kGbEndRule) return false;
  }
  return false;
}

}  // namespace gb
