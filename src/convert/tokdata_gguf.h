// tokdata_gguf.h — TOKENIZER data (src/tok/tokdata.h) from a parsed GGUF's
// tokenizer.* keys, for the converter (allocates; not part of the core).
#pragma once

#include <stdint.h>

#include <vector>

#include "common.h"
#include "gguf_parse.h"

namespace gb {

// Build the image from g (a vocabulary-only GGUF with 0 tensors is fine).
// Errors: GB_ERR_UNSUPPORTED_TYPE for a tokenizer.ggml.model other than
// "llama" (SentencePiece) or "gpt2" (byte-level BPE), or a tokenizer.ggml.pre
// name this build does not know (the log names it); GB_ERR_CORRUPT for
// missing tokens, arrays of different lengths, BPE without merges, or an
// image that would not validate. Each logs the reason.
gb_status tokdata_from_gguf(const GgufFile &g, const Logger &log, std::vector<uint8_t> *out);

}  // namespace gb
