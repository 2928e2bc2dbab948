// unicode.cpp — table lookups over unicode_tables.inc (see unicode.h).
#include "tok/unicode.h"

namespace gb {
namespace {
#include "tok/unicode_tables.inc"

// Index of the last entry of starts[0..count) that is <= cp (starts[0] == 0).
template <class T>
uint32_t last_le(const T *starts, uint32_t count, uint32_t cp) {
  uint32_t lo = 0, hi = count;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (starts[mid] <= cp) lo = mid;
    else hi = mid;
  }
  return lo;
}

struct ByteInverse {
  int16_t cp_to_byte[0x144];  // byte-level code points are all below U+0144
  constexpr ByteInverse() : cp_to_byte() {
    for (int i = 0; i < 0x144; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) cp_to_byte[kByteToCp[b]] = (int16_t)b;
  }
};
constexpr ByteInverse kByteInverse;
}  // namespace

uint8_t ucp_class(uint32_t cp) {
  if (cp > 0x10FFFF) return kUcUndefined;
  return kUcatVal[last_le(kUcatStart, kUcatCount, cp)];
}

uint32_t utf8_decode(const uint8_t *p, size_t n, size_t *adv) {
  const uint8_t b0 = p[0];
  *adv = 1;
  if (b0 < 0x80) return b0;
  size_t len;
  uint32_t cp;
  if ((b0 & 0x40) == 0) return 0xFFFD;  // continuation byte
  if ((b0 & 0x20) == 0) { len = 2; cp = b0 & 0x1F; }
  else if ((b0 & 0x10) == 0) { len = 3; cp = b0 & 0x0F; }
  else if ((b0 & 0x08) == 0) { len = 4; cp = b0 & 0x07; }
  else return 0xFFFD;
  if (len > n) return 0xFFFD;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0xFFFD;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  *adv = len;
  return cp > 0x10FFFF ? 0xFFFD : cp;
}

size_t utf8_encode(uint32_t cp, uint8_t *out) {
  if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
  if (cp < 0x800) { out[0] = (uint8_t)(0xC0 | (cp >> 6)); out[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    out[0] = (uint8_t)(0xE0 | (cp >> 12));
    out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (uint8_t)(0xF0 | (cp >> 18));
  out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

uint32_t bytelevel_cp(uint8_t b) { return kByteToCp[b]; }

int bytelevel_byte(uint32_t cp) { return cp < 0x144 ? kByteInverse.cp_to_byte[cp] : -1; }

bool deepseek_letter(uint32_t cp) {
  uint32_t lo = 0, hi = kDsLetterCount;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (kDsLetterRanges[mid][1] < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < kDsLetterCount && kDsLetterRanges[lo][0] <= cp;
}

}  // namespace gb
