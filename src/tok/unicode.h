// unicode.h — the Unicode facts the tokenizers need: UTF-8 decoding with
// llama.cpp's treatment of bad bytes, general-category groups and White_Space
// from generated tables (unicode_tables.inc, real Unicode data), and the
// GPT-2 byte-level alphabet. No allocation; everything is a pure function.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gb {

// Category group of a code point (low 3 bits of ucp_class()).
enum UcGroup : uint8_t {
  kUcUndefined = 0,  // unassigned (Cn) and anything past U+10FFFF
  kUcLetter = 1,     // L*
  kUcNumber = 2,     // N*
  kUcPunct = 3,      // P*
  kUcMark = 4,       // M*
  kUcSymbol = 5,     // S*
  kUcSeparator = 6,  // Z*
  kUcControl = 7,    // Cc, Cf, Cs, Co
};
constexpr uint8_t kUcWhitespace = 0x08;  // White_Space property

uint8_t ucp_class(uint32_t cp);

// Decode one code point at p[0..n) (n >= 1) as llama.cpp does: the lead
// byte's high bits give the length, continuation bytes must be 10xxxxxx,
// overlong forms and surrogates are accepted as decoded. A bad sequence
// (stray continuation byte, lead 0xF8..0xFF, missing or bad continuation)
// gives U+FFFD and consumes 1 byte. A 4-byte form above U+10FFFF (where
// llama.cpp fails later, when it re-encodes) also gives U+FFFD, consuming
// its 4 bytes. *adv receives the bytes consumed (1..4).
uint32_t utf8_decode(const uint8_t *p, size_t n, size_t *adv);

// UTF-8 encoding of cp (<= 0x10FFFF) into out[0..4); returns its length.
size_t utf8_encode(uint32_t cp, uint8_t *out);

// SentencePiece's character length from a lead byte alone (0x00..0xBF: 1,
// 0xC0..0xDF: 2, 0xE0..0xEF: 3, 0xF0..0xFF: 4); callers clip to the text.
inline size_t utf8_lead_len(uint8_t b) {
  static const uint8_t k[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return k[b >> 4];
}


// GPT-2 byte-level alphabet: each byte is one code point.
uint32_t bytelevel_cp(uint8_t b);
// The byte a byte-level code point stands for, or -1.
int bytelevel_byte(uint32_t cp);

// The letter class of deepseek-llm's pre-tokenizer (its regex's own ranges).
bool deepseek_letter(uint32_t cp);

}  // namespace gb
