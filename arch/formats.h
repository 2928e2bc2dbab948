// formats.h — the table of weight formats, one row per GB_FMT_* id, made
// from formats.inc: names, block geometry, GGUF's type ids, the 16-row
// variants and each format's one decoder to f32. The kernel layer owns it;
// src/format.h names its rows for the .gbx file, the converter reads GGUF's
// type ids from it, tests and tools their format facts.
#ifndef GEARBX_ARCH_FORMATS_H
#define GEARBX_ARCH_FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

// The columns' "none" (formats.inc): no GGUF type, no 16-row variant.
#define GB_GGML_NONE 0xffffffffu
#define GB_FMT_NONE GB_FMT_COUNT

namespace gb {

struct FormatInfo {
  uint32_t id;
  const char *name;        // as tools print it ("q4k")
  uint32_t weights, bytes; // per block
  uint32_t ggml;           // GGUF's type id of the same row-major bytes, or GB_GGML_NONE
  bool act;                // its kernels take quantized activations (gb_q8x_block)
  bool gguf;               // GGUF's own block format: copied, rows of whole blocks
  uint32_t rows16;         // its 16-row interleaved variant, or GB_FMT_NONE
  uint32_t file;           // the format a file stores it as (itself for a file format)
  int d_at, m_at;          // byte offsets of the f16 d and m / dmin in a block, -1: none
  // The decoder, bit-exact with ggml's for GGUF's formats: rows
  // [row_begin, row_end) of the matrix at W (row 0, this format's layout)
  // to f32, (row_end - row_begin) x cols.
  gb_rows_to_f32_fn to_f32;
};

inline constexpr FormatInfo kFormats[GB_FMT_COUNT] = {
#define GB_FORMAT(id, ID, name, weights, bytes, ggml, act, gguf, rows16, file, d_at, m_at)                        \
  {GB_FMT_##ID, #name, weights, bytes, ggml, act != 0, gguf != 0, GB_FMT_##rows16, GB_FMT_##file, d_at, m_at, \
   gb_##name##_rows_to_f32__generic},
#include "formats.inc"
#undef GB_FORMAT
};

// The row of a format id; nullptr for an id that is no format.
constexpr const FormatInfo *format_info(uint32_t fmt) { return fmt < GB_FMT_COUNT ? &kFormats[fmt] : nullptr; }

// The row-major format whose bytes are GGUF's type `ggml`; GB_FMT_NONE if none.
constexpr uint32_t format_of_ggml(uint32_t ggml) {
  for (uint32_t f = 0; f < GB_FMT_COUNT; f++)
    if (kFormats[f].ggml == ggml && ggml != GB_GGML_NONE) return f;
  return GB_FMT_NONE;
}

// The rows agree with each other: ids in order; a 16-row variant and its
// file format name each other and have the same blocks.
constexpr bool formats_consistent() {
  for (uint32_t f = 0; f < GB_FMT_COUNT; f++) {
    const FormatInfo &i = kFormats[f], &file = kFormats[i.file];
    if (i.id != f || file.file != i.file) return false;
    if (i.rows16 != GB_FMT_NONE && (i.file != f || kFormats[i.rows16].file != f)) return false;
    if (i.file != f && (file.rows16 != f || i.ggml != GB_GGML_NONE || i.weights != file.weights ||
                        i.bytes != file.bytes || i.act != file.act || i.gguf != file.gguf || i.d_at != file.d_at ||
                        i.m_at != file.m_at))
      return false;
  }
  return true;
}
static_assert(formats_consistent(), "formats.inc: rows out of id order, or a 16-row variant unlike its file format");

}  // namespace gb

#endif  // GEARBX_ARCH_FORMATS_H
