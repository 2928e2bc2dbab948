// crc32.h — CRC-32 (IEEE, zlib's polynomial), through zlib when available.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace gb {
// Continue a CRC: crc32_update(0, ...) starts one; feed pieces in order.
uint32_t crc32_update(uint32_t crc, const void *data, size_t len);
}  // namespace gb
