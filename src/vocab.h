// vocab.h — a read-only view of the VOCAB section of a .gbx (format.h),
// pointing into the mapped file. Validated by the model loader before use:
// offsets are non-decreasing and inside the blob, n == vocab_size.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"

namespace gb {

struct VocabView {
  uint32_t n = 0;
  uint32_t max_piece_bytes = 0;
  const uint8_t *scores = nullptr;   // f32 LE [n]
  const uint8_t *offsets = nullptr;  // u32 LE [n + 1]
  const uint8_t *types = nullptr;    // u8 [n], TokenType
  const uint8_t *blob = nullptr;
  int32_t bos = -1, eos = -1, unk = -1;

  float score(uint32_t i) const { return ld_f32(scores + 4 * (size_t)i); }
  uint8_t type(uint32_t i) const { return types[i]; }
  const uint8_t *piece(uint32_t i, size_t *len) const {
    const uint32_t a = ld_u32(offsets + 4 * (size_t)i), b = ld_u32(offsets + 4 * (size_t)i + 4);
    *len = b - a;
    return blob + a;
  }
};

}  // namespace gb
