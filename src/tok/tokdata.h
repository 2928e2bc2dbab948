// tokdata.h — the serialized tokenizer ("TOKENIZER data"): one flat,
// little-endian byte image holding everything the encoder and decoder need,
// meant to be stored as a section of a .gbx file and read in place.
//
// Layout (all integers little-endian; no alignment is assumed anywhere: every
// field is read with the loads of bytes.h, so the image may sit at any
// address; the writer still places each array at a multiple of 8):
//
//   header, kTokHeaderBytes = 128 bytes:
//   +0   u32 magic 'GBTK' (0x4B544247)       +4   u32 version (kTokDataVersion)
//   +8   u32 kind (TokKind)                  +12  u32 pre-tokenizer id (PretokId; 0 for SPM)
//   +16  u32 n_tokens (1..kTokMaxTokens)     +20  u32 n_merges (0 for SPM)
//   +24  u32 flags (kTokFlag*)               +28  u32 max_piece_bytes (<= kTokMaxPiece)
//   +32  i32 special[kTokSpecialCount]: bos, eos, eot, eom, unk, pad, sep, nl
//        (-1 when absent, else < n_tokens)
//   +64  u64 off_piece_off   (n_tokens + 1) u32: piece i is bytes [off[i], off[i+1])
//                            of the piece bytes; off[0] = 0, non-decreasing,
//                            off[n_tokens] = piece_bytes_len
//   +72  u64 off_piece_bytes
//   +80  u64 piece_bytes_len
//   +88  u64 off_scores      n_tokens f32 (SentencePiece scores; 0 for BPE), not NaN
//   +96  u64 off_types       n_tokens u8 (GGUF token types 0..6, TokType)
//   +104 u64 off_merges      n_merges x {u32 left, u32 right, i32 result}: rank =
//                            index; left/right < n_tokens, result in [-1, n_tokens)
//                            (the token whose text is left's text + right's text)
//   +112 u64 off_template    chat template text (UTF-8, not NUL-terminated)
//   +120 u64 template_len    (<= kTokMaxTemplate)
//
// Pieces are stored as the GGUF has them: SentencePiece text with U+2581 for
// spaces and <0xHH> byte tokens; byte-level BPE text in GPT-2's byte alphabet
// (except user-defined and control tokens, whose text is plain); UTF-8 BPE
// (Gemma 4) text as plain UTF-8 with U+2581 for spaces and <0xHH> byte
// tokens, merged by rank like byte-level BPE.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

namespace gb {

constexpr uint32_t kTokMagic = 0x4B544247u;  // "GBTK"
constexpr uint32_t kTokDataVersion = 1;
constexpr size_t kTokHeaderBytes = 128;
constexpr uint32_t kTokMaxTokens = 1u << 22;
constexpr uint32_t kTokMaxMerges = 1u << 23;
constexpr uint32_t kTokMaxPiece = 1024;
constexpr uint64_t kTokMaxTemplate = 1u << 20;

// kTokKindBpeUtf8: BPE over the text's UTF-8 characters (not GPT-2's byte
// alphabet), spaces written as U+2581, characters no merge covers falling
// back to <0xHH> byte tokens (tokenizer.ggml.model "gemma4"; its
// pre-tokenizer is always kPreGemma4).
enum TokKind : uint32_t { kTokKindSpm = 1, kTokKindBpe = 2, kTokKindBpeUtf8 = 3 };

// GGUF token types (tokenizer.ggml.token_type).
enum TokType : uint8_t {
  kTokTypeUndefined = 0, kTokTypeNormal = 1, kTokTypeUnknown = 2, kTokTypeControl = 3,
  kTokTypeUserDefined = 4, kTokTypeUnused = 5, kTokTypeByte = 6,
};

enum TokFlag : uint32_t {
  kTokFlagAddBos = 1u << 0,          // the model wants BOS first
  kTokFlagAddEos = 1u << 1,          // ... and EOS last
  kTokFlagAddSpacePrefix = 1u << 2,  // SPM: a space before the text
  kTokFlagIgnoreMerges = 1u << 3,    // BPE: a word that is a token stays whole
  kTokFlagAll = (1u << 4) - 1,
};

enum TokSpecial : uint32_t {
  kTokBos = 0, kTokEos, kTokEot, kTokEom, kTokUnk, kTokPad, kTokSep, kTokNl, kTokSpecialCount,
};

// A validated image, as pointers into it (no copy).
struct TokView {
  uint32_t kind = 0, pre = 0, n_tokens = 0, n_merges = 0, flags = 0, max_piece = 0;
  int32_t special[kTokSpecialCount] = {-1, -1, -1, -1, -1, -1, -1, -1};
  const uint8_t *piece_off = nullptr;    // (n_tokens + 1) u32
  const uint8_t *piece_bytes = nullptr;  // piece_bytes_len bytes
  uint64_t piece_bytes_len = 0;
  const uint8_t *scores = nullptr;       // n_tokens f32
  const uint8_t *types = nullptr;        // n_tokens u8
  const uint8_t *merges = nullptr;       // n_merges x 12 bytes
  const uint8_t *chat_template = nullptr;
  uint64_t chat_template_len = 0;

  // Piece i's stored bytes (i < n_tokens).
  const uint8_t *piece(uint32_t i, uint32_t *len) const;
  float score(uint32_t i) const;
  uint8_t type(uint32_t i) const { return types[i]; }
  void merge(uint32_t rank, uint32_t *left, uint32_t *right, int32_t *result) const;
};

// Check every field of the image p[0..n) (magic, version, kind, pre-tokenizer
// id, counts, each array inside the image, piece offsets, types, scores,
// merge and special ids, flags). Errors: GB_ERR_NULL_POINTER, GB_ERR_BAD_MAGIC,
// GB_ERR_UNSUPPORTED_VERSION, GB_ERR_TRUNCATED (an array runs past the end),
// GB_ERR_CORRUPT (any other inconsistency); each logs the field at fault.
gb_status tokdata_validate(const uint8_t *p, size_t n, const Logger &log);

// tokdata_validate, then fill *out with views into p (which must outlive it).
gb_status tokdata_view(const uint8_t *p, size_t n, const Logger &log, TokView *out);

}  // namespace gb
