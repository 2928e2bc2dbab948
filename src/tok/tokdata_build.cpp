// tokdata_build.cpp — the TOKENIZER image of a GGUF in place (see
// tokdata_build.h). One function runs twice: counting (sizes only, no
// memory) and building; the arithmetic that places the arrays is shared, so
// the two cannot disagree.
#include "tok/tokdata_build.h"

#include <string.h>

#include "bytes.h"
#include "tok/engine.h"
#include "tok/pretok.h"
#include "tok/tokdata.h"

namespace gb {
namespace {

constexpr uint32_t kFnv = 2166136261u;
inline uint32_t fnv(uint32_t h, const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
  return h;
}

uint32_t pow2_at_least(uint64_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

bool get_int(const GgufView &g, const char *key, int64_t *v) {
  GgufScalar x;
  if (!g.value(key, &x) || !x.is_int) return false;
  *v = x.i;
  return true;
}

// text -> id over the image's pieces (the last of equal texts wins, as
// llama.cpp's map keeps).
struct Ids {
  const uint8_t *img = nullptr;
  uint64_t off_at = 0, bytes_at = 0;
  uint32_t *slots = nullptr, mask = 0;
  const uint8_t *piece(uint32_t i, uint32_t *n) const {
    const uint32_t a = ld_u32(img + off_at + 4ull * i), b = ld_u32(img + off_at + 4ull * i + 4);
    *n = b - a;
    return img + bytes_at + a;
  }
  void insert(uint32_t id) {
    uint32_t n;
    const uint8_t *s = piece(id, &n);
    for (uint32_t k = fnv(kFnv, s, n) & mask;; k = (k + 1) & mask) {
      if (slots[k] == 0xFFFFFFFFu) {
        slots[k] = id;
        return;
      }
      uint32_t m;
      const uint8_t *t = piece(slots[k], &m);
      if (m == n && memcmp(s, t, n) == 0) {
        slots[k] = id;
        return;
      }
    }
  }
  // The id of the text a + b, or -1.
  int32_t find(const uint8_t *a, size_t na, const uint8_t *b = nullptr, size_t nb = 0) const {
    for (uint32_t k = fnv(fnv(kFnv, a, na), b, nb) & mask;; k = (k + 1) & mask) {
      if (slots[k] == 0xFFFFFFFFu) return -1;
      uint32_t m;
      const uint8_t *t = piece(slots[k], &m);
      if (m == na + nb && memcmp(t, a, na) == 0 && (nb == 0 || memcmp(t + na, b, nb) == 0)) return (int32_t)slots[k];
    }
  }
  int32_t find(const char *s) const { return find(reinterpret_cast<const uint8_t *>(s), strlen(s)); }
};

}  // namespace

gb_status tokdata_build(const GgufView &g, const Logger &log, uint8_t *img, uint32_t *scratch, TokBuildSizes *sizes) {
  const bool build = img != nullptr;
  GgufScalar model;
  GB_RETURN_IF(!g.value("tokenizer.ggml.model", &model) || !model.is_str, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: the file has no tokenizer.ggml.model");
  uint32_t kind;
  if (model.len == 5 && memcmp(model.s, "llama", 5) == 0) kind = kTokKindSpm;
  else if (model.len == 4 && memcmp(model.s, "gpt2", 4) == 0) kind = kTokKindBpe;
  else if (model.len == 6 && memcmp(model.s, "gemma4", 6) == 0) kind = kTokKindBpeUtf8;
  else
    return fail(log, GB_ERR_UNSUPPORTED_TYPE, "gguf: tokenizer model '%.*s' is not supported (llama, gpt2, gemma4 are)",
                (int)(model.len < 64 ? model.len : 64), (const char *)model.s);
  const bool gemma4_model = kind == kTokKindBpeUtf8;

  GgufArray tokens, scores, types, merges;
  GB_RETURN_IF(!g.array("tokenizer.ggml.tokens", &tokens) || tokens.count == 0, log, GB_ERR_CORRUPT,
               "gguf: no tokenizer.ggml.tokens");
  GB_RETURN_IF(tokens.elem != kGgufString, log, GB_ERR_CORRUPT, "gguf: tokenizer.ggml.tokens holds type %u, not strings",
               tokens.elem);
  GB_RETURN_IF(tokens.count > kTokMaxTokens, log, GB_ERR_CORRUPT, "gguf: %llu tokens (at most %u)",
               (unsigned long long)tokens.count, kTokMaxTokens);
  const uint32_t n = (uint32_t)tokens.count;
  const bool has_scores = g.array("tokenizer.ggml.scores", &scores);
  const bool has_types = g.array("tokenizer.ggml.token_type", &types);
  GB_RETURN_IF(has_scores && (scores.elem != kGgufF32 || scores.count != n), log, GB_ERR_CORRUPT,
               "gguf: tokenizer.ggml.scores is not %u float32 values", n);
  GB_RETURN_IF(has_types && ((types.elem != kGgufI32 && types.elem != kGgufU32) || types.count != n), log, GB_ERR_CORRUPT,
               "gguf: tokenizer.ggml.token_type is not %u int32 values", n);

  uint32_t pre = kPreNone, flags = 0;
  PretokInfo info;
  uint64_t n_merges = 0;
  if (kind != kTokKindSpm) {
    // The gemma4 model's pre-tokenizer is always its own, whatever the key says.
    char name[64] = "default";
    GgufScalar p;
    if (gemma4_model) {
      memcpy(name, "gemma4", 7);
    } else if (g.value("tokenizer.ggml.pre", &p) && p.is_str) {
      const size_t k = p.len < sizeof name - 1 ? (size_t)p.len : sizeof name - 1;
      memcpy(name, p.s, k);
      name[k] = 0;
      if (p.len >= sizeof name || memchr(name, 0, k)) name[0] = '?';  // no name this long is known
    }
    info = pretok_from_name(name);
    GB_RETURN_IF(info.id < 0, log, GB_ERR_UNSUPPORTED_TYPE, "gguf: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported", name);
    pre = (uint32_t)info.id;
    if (pre == kPreGemma4) kind = kTokKindBpeUtf8;  // a gpt2 model with this name runs as gemma4 does
    GB_RETURN_IF(!g.array("tokenizer.ggml.merges", &merges), log, GB_ERR_CORRUPT,
                 "gguf: a BPE tokenizer without tokenizer.ggml.merges");
    GB_RETURN_IF(merges.elem != kGgufString, log, GB_ERR_CORRUPT, "gguf: tokenizer.ggml.merges holds type %u, not strings",
                 merges.elem);
    GB_RETURN_IF(merges.count > kTokMaxMerges, log, GB_ERR_CORRUPT, "gguf: %llu merges (at most %u)",
                 (unsigned long long)merges.count, kTokMaxMerges);
    n_merges = merges.count;
    if (info.ignore_merges) flags |= kTokFlagIgnoreMerges;
  }
  int64_t b;
  // gemma4 always starts with BOS (llama.cpp overrides a key that says no).
  const bool add_bos = pre == kPreGemma4 ? true
                       : get_int(g, "tokenizer.ggml.add_bos_token", &b) ? b != 0
                                                                         : (kind == kTokKindSpm || info.add_bos);
  const bool add_eos = get_int(g, "tokenizer.ggml.add_eos_token", &b) ? b != 0 : false;
  const bool space = get_int(g, "tokenizer.ggml.add_space_prefix", &b) ? b != 0 : kind == kTokKindSpm;
  if (add_bos) flags |= kTokFlagAddBos;
  if (add_eos) flags |= kTokFlagAddEos;
  if (space && kind == kTokKindSpm) flags |= kTokFlagAddSpacePrefix;

  GgufScalar tmpl;
  uint64_t tmpl_len = 0;
  if (g.value("tokenizer.chat_template", &tmpl) && tmpl.is_str) {
    if (tmpl.len > kTokMaxTemplate)
      log.log(GB_LOG_WARN, "gguf: tokenizer.chat_template longer than %llu bytes left out", (unsigned long long)kTokMaxTemplate);
    else
      tmpl_len = tmpl.len;
  }

  // Pieces: sizes, the longest, and the decoded bytes tok_init will need.
  uint64_t piece_bytes = 0, dec_bytes = 0;
  uint32_t longest = 0;
  uint64_t off = tokens.off, toff = types.off;
  auto type_at = [&](uint32_t i) -> uint8_t {
    if (!has_types) return kTokTypeNormal;
    const int32_t t = ld_i32(g.base + toff + 4ull * i);
    return (uint8_t)(t >= 0 && t <= kTokTypeByte ? t : kTokTypeUndefined);
  };
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *s;
    uint64_t len;
    g.next_string(&off, &s, &len);
    GB_RETURN_IF(len > kTokMaxPiece, log, GB_ERR_CORRUPT, "gguf: token %u is %llu bytes (at most %u)", i,
                 (unsigned long long)len, kTokMaxPiece);
    piece_bytes += len;
    if (len > longest) longest = (uint32_t)len;
    dec_bytes += tok_decode_piece(kind, type_at(i), s, (uint32_t)len, nullptr, 0);
  }
  GB_RETURN_IF(piece_bytes > 0xFFFFFFFFu, log, GB_ERR_CORRUPT, "gguf: %llu bytes of token text", (unsigned long long)piece_bytes);

  // Placement: the header, then each array at a multiple of 8.
  uint64_t at = kTokHeaderBytes;
  auto place = [&](uint64_t bytes) {
    const uint64_t o = align_up(at, 8);
    at = o + bytes;
    return o;
  };
  const uint64_t o_off = place(4ull * (n + 1)), o_bytes = place(piece_bytes), o_scores = place(4ull * n), o_types = place(n),
                 o_merges = place(12ull * n_merges), o_tmpl = place(tmpl_len);
  const uint32_t slots = pow2_at_least(2ull * n);
  if (!build) {
    sizes->image_bytes = (size_t)at;
    sizes->scratch_bytes = 4ull * slots;
    sizes->tables_bytes = tok_mem_size_counts(n, (uint32_t)n_merges, (size_t)dec_bytes);
    return GB_OK;
  }
  GB_RETURN_IF(sizes->image_bytes != at || !scratch, log, GB_ERR_CORRUPT, "gguf: the tokenizer changed since it was sized");
  memset(img, 0, (size_t)at);
  st_u32(img + 0, kTokMagic);
  st_u32(img + 4, kTokDataVersion);
  st_u32(img + 8, kind);
  st_u32(img + 12, pre);
  st_u32(img + 16, n);
  st_u32(img + 24, flags);
  st_u32(img + 28, longest);
  st_u64(img + 64, o_off);
  st_u64(img + 72, o_bytes);
  st_u64(img + 80, piece_bytes);
  st_u64(img + 88, o_scores);
  st_u64(img + 96, o_types);
  st_u64(img + 104, o_merges);
  st_u64(img + 112, o_tmpl);
  st_u64(img + 120, tmpl_len);
  off = tokens.off;
  uint32_t acc = 0;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *s;
    uint64_t len;
    g.next_string(&off, &s, &len);
    st_u32(img + o_off + 4ull * i, acc);
    if (len) memcpy(img + o_bytes + acc, s, (size_t)len);
    acc += (uint32_t)len;
    const float sc = has_scores && kind == kTokKindSpm ? ld_f32(g.base + scores.off + 4ull * i) : 0.0f;
    st_f32(img + o_scores + 4ull * i, sc);
    img[o_types + i] = type_at(i);
  }
  st_u32(img + o_off + 4ull * n, acc);
  if (tmpl_len) memcpy(img + o_tmpl, tmpl.s, (size_t)tmpl_len);

  Ids ids;
  ids.img = img;
  ids.off_at = o_off;
  ids.bytes_at = o_bytes;
  ids.slots = scratch;
  ids.mask = slots - 1;
  for (uint32_t k = 0; k < slots; k++) scratch[k] = 0xFFFFFFFFu;
  for (uint32_t i = 0; i < n; i++) ids.insert(i);

  // Merges "left right" (split at the first space after the first byte).
  uint64_t kept = 0, dropped = 0;
  off = merges.off;
  for (uint64_t i = 0; i < n_merges; i++) {
    const uint8_t *s;
    uint64_t len;
    g.next_string(&off, &s, &len);
    const void *sp = len > 1 ? memchr(s + 1, ' ', (size_t)len - 1) : nullptr;
    const size_t nl = sp ? (size_t)(static_cast<const uint8_t *>(sp) - s) : 0;
    const int32_t l = sp ? ids.find(s, nl) : -1, r = sp ? ids.find(s + nl + 1, (size_t)len - nl - 1) : -1;
    if (l < 0 || r < 0) {
      dropped++;
      continue;
    }
    uint8_t *e = img + o_merges + 12 * kept++;
    st_u32(e, (uint32_t)l);
    st_u32(e + 4, (uint32_t)r);
    st_u32(e + 8, (uint32_t)ids.find(s, nl, s + nl + 1, (size_t)len - nl - 1));
  }
  if (dropped)
    log.log(GB_LOG_WARN, "gguf: %llu of %llu merges dropped (not 'left right' of two tokens)", (unsigned long long)dropped,
            (unsigned long long)n_merges);
  st_u32(img + 20, (uint32_t)kept);

  int32_t special[kTokSpecialCount];
  for (int32_t &s : special) s = -1;
  if (kind == kTokKindSpm) {
    special[kTokBos] = 1;
    special[kTokEos] = 2;
    special[kTokUnk] = 0;
  } else if (!gemma4_model) {  // gemma4's come from the keys only
    special[kTokBos] = 11;
    special[kTokEos] = 11;
  }
  static const struct {
    TokSpecial slot;
    const char *key;
  } kKeys[] = {
      {kTokBos, "tokenizer.ggml.bos_token_id"},     {kTokEos, "tokenizer.ggml.eos_token_id"},
      {kTokEot, "tokenizer.ggml.eot_token_id"},     {kTokEom, "tokenizer.ggml.eom_token_id"},
      {kTokUnk, "tokenizer.ggml.unknown_token_id"}, {kTokPad, "tokenizer.ggml.padding_token_id"},
      {kTokSep, "tokenizer.ggml.seperator_token_id"},
  };
  for (const auto &k : kKeys) {
    int64_t v;
    if (get_int(g, k.key, &v)) special[k.slot] = v >= 0 && v < (int64_t)n ? (int32_t)v : -1;
  }
  for (int32_t &s : special)
    if (s >= (int32_t)n) s = -1;
  if (special[kTokEot] < 0) {
    static const char *const kEot[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<turn|>", "<|endoftext|>", "<EOT>"};
    for (const char *name : kEot) {
      const int32_t id = ids.find(name);
      if (id >= 0) {
        special[kTokEot] = id;
        break;
      }
    }
  }
  special[kTokNl] = kind == kTokKindSpm ? ids.find("<0x0A>") : kind == kTokKindBpe ? ids.find("\xC4\x8A") : ids.find("\n");
  if (special[kTokNl] < 0 && kind == kTokKindBpeUtf8) special[kTokNl] = ids.find("<0x0A>");
  for (uint32_t s = 0; s < kTokSpecialCount; s++) st_u32(img + 32 + 4 * s, (uint32_t)special[s]);
  return tokdata_validate(img, (size_t)at, log);
}

}  // namespace gb
