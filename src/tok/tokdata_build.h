// tokdata_build.h — the TOKENIZER image (tokdata.h) of a GGUF's tokenizer.*
// keys, built in caller memory from a GgufView: what opening a GGUF
// directly uses instead of a converted .gbx's TOKENIZER section.
//
// The defaults follow llama.cpp's vocabulary loader: SentencePiece adds BOS
// and a space prefix unless the keys say otherwise, ids 1/2/0 for
// BOS/EOS/unknown when absent; byte-level BPE adds BOS only where its
// pre-tokenizer says so, ids 11/11 for BOS/EOS when absent; gemma4 always
// adds BOS and has no default ids. The end-of-turn
// token, when no key names it, is the first of the usual end-of-turn texts
// the vocabulary has.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "gguf_view.h"

namespace gb {

struct TokBuildSizes {
  size_t image_bytes = 0;    // the image
  size_t scratch_bytes = 0;  // the text -> id table used while building
  size_t tables_bytes = 0;   // tok_init's tables for it (at least tok_mem_size of the image)
};

// Count (img == nullptr): the sizes only. Build: the image into img
// (sizes->image_bytes, from a count over the same view) with scratch
// (sizes->scratch_bytes, 4-byte aligned), then validated. Errors:
// GB_ERR_UNSUPPORTED_TYPE for a tokenizer.ggml.model other than "llama"
// (SentencePiece), "gpt2" (byte-level BPE) or "gemma4" (UTF-8 BPE), or a pre-tokenizer this
// build does not know; GB_ERR_CORRUPT for missing or inconsistent arrays;
// each with a log line.
gb_status tokdata_build(const GgufView &g, const Logger &log, uint8_t *img, uint32_t *scratch, TokBuildSizes *sizes);

}  // namespace gb
