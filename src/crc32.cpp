// crc32.cpp — zlib's crc32 when built with it; otherwise a table-driven
// equivalent for platforms without zlib (the none port, bare metal).
#include "crc32.h"

#ifdef GB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace gb {

#ifdef GB_HAVE_ZLIB
uint32_t crc32_update(uint32_t crc, const void *data, size_t len) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  uLong c = crc;
  while (len > 0) {  // zlib takes uInt lengths
    const uInt chunk = len > 0x40000000u ? 0x40000000u : (uInt)len;
    c = ::crc32(c, p, chunk);
    p += chunk;
    len -= chunk;
  }
  return (uint32_t)c;
}
#else
namespace {
struct Table {
  uint32_t t[256];
  constexpr Table() : t() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
  }
};
constexpr Table kTable;
}  // namespace
uint32_t crc32_update(uint32_t crc, const void *data, size_t len) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  uint32_t c = crc ^ 0xFFFFFFFFu;
  for (size_t i = 0; i < len; i++) c = kTable.t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
#endif

}  // namespace gb
