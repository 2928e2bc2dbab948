// tokdata.cpp — validation and in-place view of TOKENIZER data (see tokdata.h).
#include "tok/tokdata.h"

#include <math.h>

#include "bytes.h"
#include "tok/pretok.h"

namespace gb {

// The view reads the image in place on every call: a model file rewritten
// while it is mapped can make offsets and ids anything, so what they locate
// is kept inside the validated arrays (for an image that did not change,
// these clamps change nothing).
const uint8_t *TokView::piece(uint32_t i, uint32_t *len) const {
  uint64_t a = ld_u32(piece_off + 4 * (size_t)i), b = ld_u32(piece_off + 4 * (size_t)i + 4);
  a = a < piece_bytes_len ? a : piece_bytes_len;
  b = b < a ? a : b < piece_bytes_len ? b : piece_bytes_len;
  *len = (uint32_t)(b - a);
  return piece_bytes + a;
}

float TokView::score(uint32_t i) const { return ld_f32(scores + 4 * (size_t)i); }

void TokView::merge(uint32_t rank, uint32_t *left, uint32_t *right, int32_t *result) const {
  const uint8_t *m = merges + 12 * (size_t)rank;
  *left = ld_u32(m);
  *right = ld_u32(m + 4);
  *result = ld_i32(m + 8);
  if (*result < -1 || *result >= (int32_t)n_tokens) *result = -1;
}

namespace {

const char *const kSpecialNames[kTokSpecialCount] = {"bos", "eos", "eot", "eom", "unk", "pad", "sep", "nl"};

// Array `what` of count x elem bytes at the offset stored at header+field.
gb_status array_at(const uint8_t *p, size_t n, size_t field, uint64_t count, uint64_t elem, const char *what,
                   const Logger &log, const uint8_t **out) {
  const uint64_t off = ld_u64(p + field);
  uint64_t bytes;
  GB_RETURN_IF(!mul_ok(count, elem, &bytes), log, GB_ERR_CORRUPT, "tokdata: %s: size overflows", what);
  GB_RETURN_IF(off < kTokHeaderBytes && bytes > 0, log, GB_ERR_CORRUPT, "tokdata: %s at offset %llu overlaps the header", what,
               (unsigned long long)off);
  GB_RETURN_IF(!in_range(off, bytes, n), log, GB_ERR_TRUNCATED,
               "tokdata: %s (%llu bytes at offset %llu) runs past the end (%zu bytes)", what, (unsigned long long)bytes,
               (unsigned long long)off, n);
  *out = p + off;
  return GB_OK;
}

gb_status parse(const uint8_t *p, size_t n, const Logger &log, TokView *v) {
  GB_RETURN_IF(!p && n, log, GB_ERR_NULL_POINTER, "tokdata: null data");
  GB_RETURN_IF(n < 4, log, GB_ERR_TRUNCATED, "tokdata: %zu bytes, too small for the magic", n);
  GB_RETURN_IF(ld_u32(p) != kTokMagic, log, GB_ERR_BAD_MAGIC, "tokdata: bad magic 0x%08x", ld_u32(p));
  GB_RETURN_IF(n < kTokHeaderBytes, log, GB_ERR_TRUNCATED, "tokdata: %zu bytes, header needs %zu", n, kTokHeaderBytes);
  const uint32_t version = ld_u32(p + 4);
  GB_RETURN_IF(version != kTokDataVersion, log, GB_ERR_UNSUPPORTED_VERSION, "tokdata: version %u (this build reads %u)", version,
               kTokDataVersion);
  v->kind = ld_u32(p + 8);
  v->pre = ld_u32(p + 12);
  v->n_tokens = ld_u32(p + 16);
  v->n_merges = ld_u32(p + 20);
  v->flags = ld_u32(p + 24);
  v->max_piece = ld_u32(p + 28);
  GB_RETURN_IF(v->kind != kTokKindSpm && v->kind != kTokKindBpe && v->kind != kTokKindBpeUtf8, log, GB_ERR_CORRUPT,
               "tokdata: kind %u unknown", v->kind);
  GB_RETURN_IF(v->kind == kTokKindSpm && v->pre != kPreNone, log, GB_ERR_CORRUPT,
               "tokdata: pre-tokenizer %u on a SentencePiece vocabulary", v->pre);
  GB_RETURN_IF(v->kind == kTokKindBpe && (v->pre == kPreNone || v->pre == kPreGemma4 || v->pre >= kPreCount), log,
               GB_ERR_CORRUPT, "tokdata: pre-tokenizer id %u unknown for byte-level BPE", v->pre);
  GB_RETURN_IF(v->kind == kTokKindBpeUtf8 && v->pre != kPreGemma4, log, GB_ERR_CORRUPT,
               "tokdata: pre-tokenizer id %u on a UTF-8 BPE vocabulary (only %u is)", v->pre, (uint32_t)kPreGemma4);
  GB_RETURN_IF(v->n_tokens == 0 || v->n_tokens > kTokMaxTokens, log, GB_ERR_CORRUPT, "tokdata: n_tokens %u (1..%u)",
               v->n_tokens, kTokMaxTokens);
  GB_RETURN_IF(v->n_merges > kTokMaxMerges, log, GB_ERR_CORRUPT, "tokdata: n_merges %u (at most %u)", v->n_merges,
               kTokMaxMerges);
  GB_RETURN_IF(v->kind == kTokKindSpm && v->n_merges != 0, log, GB_ERR_CORRUPT, "tokdata: n_merges %u on a SentencePiece vocabulary",
               v->n_merges);
  GB_RETURN_IF(v->flags & ~kTokFlagAll, log, GB_ERR_CORRUPT, "tokdata: flags 0x%x has unknown bits", v->flags);
  GB_RETURN_IF(v->max_piece > kTokMaxPiece, log, GB_ERR_CORRUPT, "tokdata: max_piece_bytes %u (at most %u)", v->max_piece,
               kTokMaxPiece);
  for (uint32_t s = 0; s < kTokSpecialCount; s++) {
    v->special[s] = ld_i32(p + 32 + 4 * s);
    GB_RETURN_IF(v->special[s] < -1 || v->special[s] >= (int32_t)v->n_tokens, log, GB_ERR_CORRUPT,
                 "tokdata: special id %s = %d outside [-1, %u)", kSpecialNames[s], v->special[s], v->n_tokens);
  }
  GB_TRY(array_at(p, n, 64, (uint64_t)v->n_tokens + 1, 4, "piece offsets", log, &v->piece_off));
  v->piece_bytes_len = ld_u64(p + 80);
  GB_TRY(array_at(p, n, 72, v->piece_bytes_len, 1, "piece bytes", log, &v->piece_bytes));
  GB_TRY(array_at(p, n, 88, v->n_tokens, 4, "scores", log, &v->scores));
  GB_TRY(array_at(p, n, 96, v->n_tokens, 1, "token types", log, &v->types));
  GB_TRY(array_at(p, n, 104, v->n_merges, 12, "merges", log, &v->merges));
  v->chat_template_len = ld_u64(p + 120);
  GB_RETURN_IF(v->chat_template_len > kTokMaxTemplate, log, GB_ERR_CORRUPT, "tokdata: chat template of %llu bytes (at most %llu)",
               (unsigned long long)v->chat_template_len, (unsigned long long)kTokMaxTemplate);
  GB_TRY(array_at(p, n, 112, v->chat_template_len, 1, "chat template", log, &v->chat_template));

  GB_RETURN_IF(ld_u32(v->piece_off) != 0, log, GB_ERR_CORRUPT, "tokdata: piece offset 0 is %u, not 0", ld_u32(v->piece_off));
  uint32_t prev = 0, longest = 0;
  for (uint32_t i = 1; i <= v->n_tokens; i++) {
    const uint32_t o = ld_u32(v->piece_off + 4 * (size_t)i);
    GB_RETURN_IF(o < prev || o > v->piece_bytes_len, log, GB_ERR_CORRUPT, "tokdata: piece offset %u = %u out of order or past %llu", i,
                 o, (unsigned long long)v->piece_bytes_len);
    if (o - prev > longest) longest = o - prev;
    prev = o;
  }
  GB_RETURN_IF(prev != v->piece_bytes_len, log, GB_ERR_CORRUPT, "tokdata: pieces end at %u, piece bytes are %llu", prev,
               (unsigned long long)v->piece_bytes_len);
  GB_RETURN_IF(longest != v->max_piece, log, GB_ERR_CORRUPT, "tokdata: max_piece_bytes %u, longest piece is %u", v->max_piece,
               longest);
  for (uint32_t i = 0; i < v->n_tokens; i++) {
    GB_RETURN_IF(v->types[i] > kTokTypeByte, log, GB_ERR_CORRUPT, "tokdata: token %u has type %u (0..6)", i, v->types[i]);
    GB_RETURN_IF(isnan(v->score(i)), log, GB_ERR_CORRUPT, "tokdata: token %u has a NaN score", i);
  }
  for (uint32_t r = 0; r < v->n_merges; r++) {
    const uint8_t *m = v->merges + 12 * (size_t)r;  // as stored: merge() would clamp the result
    const uint32_t a = ld_u32(m), b = ld_u32(m + 4);
    const int32_t c = ld_i32(m + 8);
    GB_RETURN_IF(a >= v->n_tokens || b >= v->n_tokens || c < -1 || c >= (int32_t)v->n_tokens, log, GB_ERR_CORRUPT,
                 "tokdata: merge %u = (%u, %u -> %d) has an id outside the %u tokens", r, a, b, c, v->n_tokens);
  }
  return GB_OK;
}

}  // namespace

gb_status tokdata_validate(const uint8_t *p, size_t n, const Logger &log) {
  TokView v;
  return parse(p, n, log, &v);
}

gb_status tokdata_view(const uint8_t *p, size_t n, const Logger &log, TokView *out) {
  GB_RETURN_IF(!out, log, GB_ERR_NULL_POINTER, "tokdata: null output view");
  TokView v;
  GB_TRY(parse(p, n, log, &v));
  *out = v;
  return GB_OK;
}

}  // namespace gb
