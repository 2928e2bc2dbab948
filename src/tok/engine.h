// engine.h — the GGUF tokenizers over a TokView (tokdata.h): SentencePiece
// (tokenizer.ggml.model "llama"), byte-level BPE ("gpt2") and BPE over UTF-8
// characters with SentencePiece's spaces and byte tokens ("gemma4"),
// tokenizing as llama.cpp does.
//
// Lifetime: tok_mem_size(view) bytes of caller memory (8-byte aligned) hold
// the lookup tables tok_init builds (piece -> id, merge pair -> rank, decoded
// token texts, the special-token list); the Tok points into that memory and
// into the view's bytes, which must both outlive it. After tok_init nothing
// allocates: encoding works in the caller's output buffer (see
// tok_encode_capacity) and on the stack. A Tok is read-only after init, so
// any number of threads may encode and decode with it at once.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "tok/tokdata.h"

namespace gb {

struct Tok {
  TokView v;
  const int32_t *piece_hash = nullptr;  // (piece_mask + 1) token ids, -1 = empty slot
  uint32_t piece_mask = 0;
  const int32_t *merge_hash = nullptr;  // (merge_mask + 1) merge ranks, -1 = empty slot
  uint32_t merge_mask = 0;
  const uint32_t *dec_off = nullptr;    // (n_tokens + 1) offsets into dec
  const uint8_t *dec = nullptr;         // decoded text of every token, back to back
  const int32_t *special = nullptr;     // (n_special) split-out candidates, longest text first
  uint32_t n_special = 0;
  int32_t byte_tok[256];    // SPM: <0xHH> token of each byte; BPE: token of the byte's byte-level character
  int32_t single_tok[256];  // BPE: token whose text is exactly that one byte (fallback)
};

// Encoding flags.
enum : uint32_t {
  kTokEncAddBos = 1u << 0,         // BOS first (when the vocabulary has one)
  kTokEncNoSpacePrefix = 1u << 1,  // SPM: no space prefix even if the vocabulary wants one
  kTokEncParseSpecial = 1u << 2,   // control tokens written in the text become their ids
  kTokEncAddEos = 1u << 3,         // EOS last (when the vocabulary has one)
  kTokEncAll = (1u << 4) - 1,
};
// Decoding flags.
enum : uint32_t {
  kTokDecSpecial = 1u << 0,      // control tokens give their text (else nothing)
  kTokDecStripSpace = 1u << 1,   // SPM with a space prefix: drop one leading space of the first piece with text
  kTokDecAll = (1u << 2) - 1,
};

// Bytes tok_init needs for this vocabulary (runs the same carving as tok_init).
size_t tok_mem_size(const TokView &v);
// The same from counts: n_merges at least the image's, decoded_bytes the
// sum of tok_decode_piece over the tokens (an image built from a GGUF in
// place is sized this way before it exists).
size_t tok_mem_size_counts(uint32_t n_tokens, uint32_t n_merges, size_t decoded_bytes);
// The decoded text of one piece of a tokenizer of `kind` (TokKind) with
// GGUF token type `type`: bytes written to out (up to cap), the length
// returned.
size_t tok_decode_piece(uint32_t kind, uint8_t type, const uint8_t *s, uint32_t n, uint8_t *out, size_t cap);

// Build the tables in mem (mem_bytes = tok_mem_size(v), 8-aligned). v must
// come from tokdata_view (its counts and offsets are trusted here). Errors:
// GB_ERR_NULL_POINTER, GB_ERR_ALIGNMENT, GB_ERR_CORRUPT (a vocabulary the
// encoder cannot use, or an image that changed since mem_bytes was counted;
// logged).
gb_status tok_init(Tok *t, const TokView &v, void *mem, size_t mem_bytes, const Logger &log);

// Capacity in int32 the output buffer of tok_encode must have for len bytes
// of text: room for the ids (at most 6 per byte: an invalid byte becomes
// U+FFFD, three byte-level characters, each at worst two single-byte tokens)
// and the encoder's work area for one word or piece of text (the piece's
// bytes, at most 3 per input byte, and seven int32 per byte of it).
// SIZE_MAX when len is too large for such a buffer to exist.
size_t tok_encode_capacity(size_t len);

// Tokenize text[0..len) (any bytes) as llama.cpp's llama_tokenize does with
// add_special = (flags & (kTokEncAddBos|kTokEncAddEos)) and parse_special =
// (flags & kTokEncParseSpecial): user-defined tokens are always split out of
// the text, control and unknown ones only with kTokEncParseSpecial.
// out: cap int32, at least tok_encode_capacity(len), else
// GB_ERR_BUFFER_TOO_SMALL with *n_out = the capacity needed and nothing
// meaningful in out. On success out[0..*n_out) are the ids (the rest of out
// was used as work space). Errors: GB_ERR_NULL_POINTER (n_out, or text/out
// NULL with a nonzero length), GB_ERR_INVALID_ARGUMENT (unknown flags).
// Time: O(len log len) for the merges plus, for the special-token split,
// O(len * candidates) per nesting level; recursion depth is bounded by the
// number of special tokens present in the text (a few dozen bytes each).
gb_status tok_encode(const Tok &t, const char *text, size_t len, uint32_t flags, int32_t *out, size_t cap,
                     size_t *n_out);

// The decoded text of one token: SPM pieces with U+2581 as ' ', <0xHH> as
// its byte, unknown as U+2585; byte-level BPE pieces mapped back from the
// byte-level alphabet; UTF-8 BPE pieces with U+2581 as ' ', <0xHH> as its
// byte; user-defined tokens as written; control tokens (and UTF-8 BPE's
// unknown ones, as llama.cpp treats them) as written with kTokDecSpecial,
// else empty. *out points into the Tok's memory (not NUL-terminated).
// Errors: GB_ERR_NULL_POINTER, GB_ERR_TOKEN_OUT_OF_RANGE, GB_ERR_INVALID_ARGUMENT (flags).
gb_status tok_piece(const Tok &t, int32_t id, uint32_t flags, const char **out, size_t *len);

// The concatenated text of ids[0..n) into out[0..cap). GB_ERR_BUFFER_TOO_SMALL
// with *n_out = bytes needed when it does not fit. Errors as tok_piece.
gb_status tok_decode(const Tok &t, const int32_t *ids, size_t n, uint32_t flags, char *out, size_t cap, size_t *n_out);

// Id of the token whose stored text is exactly p[0..n), or -1 (the last such
// token when several share a text, as llama.cpp's lookup keeps).
int32_t tok_find_piece(const Tok &t, const uint8_t *p, size_t n);

}  // namespace gb
