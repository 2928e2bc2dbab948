// vocab.h — a read-only view of the VOCAB section of a .gbx (format.h),
// pointing into the mapped file. Validated by the model loader before use:
// offsets are non-decreasing and inside the blob, n == vocab_size. The
// bytes are read in place on every use, so a file rewritten while it is
// mapped can make them anything: piece() keeps every piece inside the blob
// whatever its offsets say now.
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
  uint32_t blob_bytes = 0;  // every piece lies inside blob[0, blob_bytes)
  int32_t bos = -1, eos = -1, unk = -1;

  float score(uint32_t i) const { return ld_f32(scores + 4 * (size_t)i); }
  uint8_t type(uint32_t i) const { return types[i]; }
  // Bytes [offsets[i], offsets[i + 1]) of the blob, clamped to the blob
  // (no change for offsets that passed the loader's checks).
  const uint8_t *piece(uint32_t i, size_t *len) const {
    uint32_t a = ld_u32(offsets + 4 * (size_t)i), b = ld_u32(offsets + 4 * (size_t)i + 4);
    a = a < blob_bytes ? a : blob_bytes;
    b = b < a ? a : b < blob_bytes ? b : blob_bytes;
    *len = b - a;
    return blob + a;
  }
};

}  // namespace gb
