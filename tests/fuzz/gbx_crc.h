// gbx_crc.h — what the .gbx fuzz targets share: recompute every CRC32 of an
// image (each section's over its bytes, then the header's), so that a
// mutation reaches the structural checks behind the checksums. Sections
// whose range lies outside the image keep their stored CRC.
#pragma once

#include <stdint.h>

#include <vector>

#include "bytes.h"
#include "crc32.h"
#include "format.h"

namespace {

inline void gbx_fix_crcs(std::vector<uint8_t> &img) {
  using namespace gb;
  if (img.size() < kHeaderFixedBytes) return;
  const uint32_t n = ld_u32(&img[16]);
  const uint64_t hb = kHeaderFixedBytes + (uint64_t)n * kSectionEntryBytes;
  if (n > kMaxSections || hb > img.size()) return;
  for (uint32_t i = 0; i < n; i++) {
    uint8_t *e = &img[kHeaderFixedBytes + i * kSectionEntryBytes];
    const uint64_t off = ld_u64(e + 8), size = ld_u64(e + 16);
    if (off <= img.size() && size <= img.size() - off) st_u32(e + 24, crc32_update(0, img.data() + off, size));
  }
  st_u32(&img[36], 0);
  st_u32(&img[36], crc32_update(0, img.data(), hb));
}

}  // namespace
