// tokenizer.h — byte-fallback BPE (SentencePiece / llama2.c style) over a
// VocabView. Built once when a model is opened; encoding and decoding never
// allocate and are thread-safe.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "vocab.h"

namespace gb {

struct Tokenizer {
  VocabView v;
  const uint32_t *sorted = nullptr;  // (n) token ids sorted by piece bytes
  int32_t byte_token[256];           // id of the <0xHH> token, or -1
  uint8_t byte_in_merge[256];        // 1 if some piece of >1 byte contains the byte
  int32_t space_token = -1;          // id of the piece " " (dummy prefix), or -1
};

// Bytes of memory tokenizer_init needs for a vocabulary of n tokens.
size_t tokenizer_mem_size(uint32_t n);

// Build the lookup tables in `mem` (tokenizer_mem_size bytes, 8-aligned),
// which must outlive the tokenizer. Fails with GB_ERR_CORRUPT on a vocabulary
// the encoder cannot use (logged).
gb_status tokenizer_init(Tokenizer *t, const VocabView &v, void *mem, const Logger &log);

// Capacity tokenize() needs for len bytes (it works in the output buffer):
// at most one id per byte, BOS, and the dummy prefix's slot.
inline size_t tokenize_capacity(size_t len) { return len + 3; }

// Encode per gb_tokenizer_encode() in gearbx.h (flags GB_TOKENIZE_ADD_BOS and
// GB_TOKENIZE_NO_DUMMY_PREFIX; capacity tokenize_capacity(len)).
gb_status tokenize(const Tokenizer &t, const char *text, size_t len, uint32_t flags, int32_t *out,
                   size_t cap, size_t *n_out);

// Decode per gb_tokenizer_token_text() in gearbx.h.
gb_status token_to_text(const Tokenizer &t, int32_t prev, int32_t token, const char **out,
                        size_t *len);

}  // namespace gb
