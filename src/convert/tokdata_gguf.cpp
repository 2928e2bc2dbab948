// tokdata_gguf.cpp — TOKENIZER data from GGUF metadata (see tokdata_gguf.h).
// The defaults follow llama.cpp's vocabulary loader: SentencePiece adds BOS
// and a space prefix unless the keys say otherwise, ids 1/2/0 for
// BOS/EOS/unknown when absent; byte-level BPE adds BOS only for the
// Llama 3 family, ids 11/11 for BOS/EOS when absent.
#include "tokdata_gguf.h"

#include <string.h>

#include <string>
#include <unordered_map>

#include "bytes.h"
#include "tok/pretok.h"
#include "tok/tokdata.h"

namespace gb {
namespace {

bool get_int(const GgufFile &g, const char *key, int64_t *v) {
  const GgufValue *x = g.find(key);
  if (!x || !x->is_int) return false;
  *v = x->i;
  return true;
}

bool get_str(const GgufFile &g, const char *key, std::string *s) {
  const GgufValue *x = g.find(key);
  if (!x || !x->is_str) return false;
  *s = x->s;
  return true;
}

size_t put_array(std::vector<uint8_t> &img, size_t header_field, size_t bytes) {
  size_t off = (img.size() + 7) & ~(size_t)7;
  img.resize(off + bytes);
  st_u64(img.data() + header_field, off);
  return off;
}

}  // namespace

gb_status tokdata_from_gguf(const GgufFile &g, const Logger &log, std::vector<uint8_t> *out) {
  GB_RETURN_IF(!out, log, GB_ERR_NULL_POINTER, "tokdata: null output");
  std::string model;
  GB_RETURN_IF(!get_str(g, "tokenizer.ggml.model", &model), log, GB_ERR_UNSUPPORTED_TYPE,
               "tokdata: the GGUF has no tokenizer.ggml.model");
  uint32_t kind;
  if (model == "llama") kind = kTokKindSpm;
  else if (model == "gpt2") kind = kTokKindBpe;
  else return fail(log, GB_ERR_UNSUPPORTED_TYPE, "tokdata: tokenizer model '%s' is not supported (llama, gpt2 are)", model.c_str());

  const size_t n = g.tokens.size();
  GB_RETURN_IF(!g.has_tokens || n == 0, log, GB_ERR_CORRUPT, "tokdata: no tokenizer.ggml.tokens");
  GB_RETURN_IF(n > kTokMaxTokens, log, GB_ERR_CORRUPT, "tokdata: %zu tokens (at most %u)", n, kTokMaxTokens);
  GB_RETURN_IF(g.has_scores && g.scores.size() != n, log, GB_ERR_CORRUPT, "tokdata: %zu scores for %zu tokens", g.scores.size(), n);
  GB_RETURN_IF(g.has_types && g.token_types.size() != n, log, GB_ERR_CORRUPT, "tokdata: %zu token types for %zu tokens",
               g.token_types.size(), n);

  uint32_t pre = kPreNone, flags = 0;
  PretokInfo info;
  if (kind == kTokKindBpe) {
    std::string name = "default";
    get_str(g, "tokenizer.ggml.pre", &name);
    info = pretok_from_name(name.c_str());
    GB_RETURN_IF(info.id < 0, log, GB_ERR_UNSUPPORTED_TYPE, "tokdata: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported",
                 name.c_str());
    pre = (uint32_t)info.id;
    GB_RETURN_IF(!g.has_merges, log, GB_ERR_CORRUPT, "tokdata: a gpt2 tokenizer without tokenizer.ggml.merges");
    if (info.ignore_merges) flags |= kTokFlagIgnoreMerges;
  }
  int64_t b;
  const bool add_bos = get_int(g, "tokenizer.ggml.add_bos_token", &b) ? b != 0 : (kind == kTokKindSpm || info.add_bos);
  const bool add_eos = get_int(g, "tokenizer.ggml.add_eos_token", &b) ? b != 0 : false;
  const bool space = get_int(g, "tokenizer.ggml.add_space_prefix", &b) ? b != 0 : kind == kTokKindSpm;
  if (add_bos) flags |= kTokFlagAddBos;
  if (add_eos) flags |= kTokFlagAddEos;
  if (space && kind == kTokKindSpm) flags |= kTokFlagAddSpacePrefix;

  // text -> id, the last of equal texts (as llama.cpp's map keeps)
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; i++) ids[g.tokens[i]] = (int32_t)i;
  auto id_of = [&](const std::string &s) -> int32_t {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  };

  // merges: "left right" (split at the first space after the first byte)
  std::vector<int32_t> merges;
  size_t dropped = 0;
  if (kind == kTokKindBpe) {
    merges.reserve(3 * g.merges.size());
    for (const std::string &m : g.merges) {
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos) {
        dropped++;
        continue;
      }
      const std::string l = m.substr(0, sp), r = m.substr(sp + 1);
      const int32_t a = id_of(l), c = id_of(r);
      if (a < 0 || c < 0) {
        dropped++;
        continue;
      }
      merges.push_back(a);
      merges.push_back(c);
      merges.push_back(id_of(l + r));
    }
    if (dropped)
      log.log(GB_LOG_WARN, "tokdata: %zu of %zu merges dropped (not 'left right' of two tokens)", dropped, g.merges.size());
    GB_RETURN_IF(merges.size() / 3 > kTokMaxMerges, log, GB_ERR_CORRUPT, "tokdata: %zu merges (at most %u)", merges.size() / 3,
                 kTokMaxMerges);
  }

  // special ids (absent or out of range: -1)
  int32_t special[kTokSpecialCount];
  for (int32_t &s : special) s = -1;
  if (kind == kTokKindSpm) {
    special[kTokBos] = 1;
    special[kTokEos] = 2;
    special[kTokUnk] = 0;
  } else {
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
    for (const char *name : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>"}) {
      const int32_t id = id_of(name);
      if (id >= 0) {
        special[kTokEot] = id;
        break;
      }
    }
  }
  special[kTokNl] = kind == kTokKindSpm ? id_of("<0x0A>") : id_of("\xC4\x8A");

  const std::string &tmpl = g.chat_template;
  if (g.chat_template_skipped) log.log(GB_LOG_WARN, "tokdata: tokenizer.chat_template longer than %llu bytes left out",
                                       (unsigned long long)kMaxChatTemplate);

  // image
  std::vector<uint8_t> img(kTokHeaderBytes, 0);
  uint64_t piece_bytes = 0;
  uint32_t longest = 0;
  for (const std::string &s : g.tokens) {
    piece_bytes += s.size();
    if (s.size() > longest) longest = (uint32_t)s.size();
  }
  GB_RETURN_IF(longest > kTokMaxPiece, log, GB_ERR_CORRUPT, "tokdata: a token of %u bytes (at most %u)", longest, kTokMaxPiece);
  GB_RETURN_IF(piece_bytes > 0xFFFFFFFFu, log, GB_ERR_CORRUPT, "tokdata: %llu bytes of token text", (unsigned long long)piece_bytes);
  uint8_t *h = img.data();
  st_u32(h + 0, kTokMagic);
  st_u32(h + 4, kTokDataVersion);
  st_u32(h + 8, kind);
  st_u32(h + 12, pre);
  st_u32(h + 16, (uint32_t)n);
  st_u32(h + 20, (uint32_t)(merges.size() / 3));
  st_u32(h + 24, flags);
  st_u32(h + 28, longest);
  for (uint32_t s = 0; s < kTokSpecialCount; s++) st_u32(h + 32 + 4 * s, (uint32_t)special[s]);

  size_t o = put_array(img, 64, 4 * (n + 1));
  uint32_t acc = 0;
  for (size_t i = 0; i <= n; i++) {
    st_u32(img.data() + o + 4 * i, acc);
    if (i < n) acc += (uint32_t)g.tokens[i].size();
  }
  o = put_array(img, 72, (size_t)piece_bytes);
  st_u64(img.data() + 80, piece_bytes);
  for (const std::string &s : g.tokens) {
    if (!s.empty()) memcpy(img.data() + o, s.data(), s.size());
    o += s.size();
  }
  o = put_array(img, 88, 4 * n);
  for (size_t i = 0; i < n; i++) st_f32(img.data() + o + 4 * i, g.has_scores && kind == kTokKindSpm ? g.scores[i] : 0.0f);
  o = put_array(img, 96, n);
  for (size_t i = 0; i < n; i++) {
    const int32_t t = g.has_types ? g.token_types[i] : kTokTypeNormal;
    img[o + i] = (uint8_t)(t >= 0 && t <= kTokTypeByte ? t : kTokTypeUndefined);
  }
  o = put_array(img, 104, 4 * merges.size());
  for (size_t i = 0; i < merges.size(); i++) st_u32(img.data() + o + 4 * i, (uint32_t)merges[i]);
  o = put_array(img, 112, tmpl.size());
  st_u64(img.data() + 120, tmpl.size());
  if (!tmpl.empty()) memcpy(img.data() + o, tmpl.data(), tmpl.size());

  GB_TRY(tokdata_validate(img.data(), img.size(), log));
  *out = std::move(img);
  return GB_OK;
}

}  // namespace gb
