// utf8_check.h — UTF-8 well-formedness after Unicode's Table 3-7, for the
// tests and fuzz targets that judge text the library produces. Written apart
// from src/utf8_stream.cpp, so that it can judge it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>

namespace gbt {

// Length of the sequence lead byte b starts, and the range its second byte
// must fall in; 0 for a byte that starts no multi-byte sequence (ASCII
// included: callers handle it first).
inline size_t utf8_lead(uint8_t b, uint8_t *lo, uint8_t *hi) {
  *lo = 0x80;
  *hi = 0xbf;
  if (b >= 0xc2 && b <= 0xdf) return 2;
  if (b >= 0xe0 && b <= 0xef) {
    if (b == 0xe0) *lo = 0xa0;
    if (b == 0xed) *hi = 0x9f;
    return 3;
  }
  if (b >= 0xf0 && b <= 0xf4) {
    if (b == 0xf0) *lo = 0x90;
    if (b == 0xf4) *hi = 0x8f;
    return 4;
  }
  return 0;
}

inline bool utf8_well_formed(const std::string &s) {
  const uint8_t *p = reinterpret_cast<const uint8_t *>(s.data());
  for (size_t i = 0; i < s.size();) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    uint8_t lo, hi;
    const size_t k = utf8_lead(p[i], &lo, &hi);
    if (k == 0 || i + k > s.size()) return false;
    for (size_t j = 1; j < k; j++)
      if (p[i + j] < (j == 1 ? lo : 0x80) || p[i + j] > (j == 1 ? hi : 0xbf)) return false;
    i += k;
  }
  return true;
}

}  // namespace gbt
