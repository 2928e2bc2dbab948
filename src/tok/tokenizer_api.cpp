// tokenizer_api.cpp — the public tokenizer calls (gearbx.h, "Tokenizer"):
// one handle over the llama2.c encoder and the GGUF tokenizers.
#include <stddef.h>
#include <string.h>

#include <new>

#include "arena.h"
#include "gearbx.h"
#include "gearbx_port.h"
#include "model.h"
#include "tok/pretok.h"
#include "tok/tokenizer_obj.h"

namespace gb {

gb_status tokenizer_obj_init_llama2c(gb_tokenizer *t, const VocabView &v, void *mem, const Logger &log) {
  t->kind = GB_TOKENIZER_LLAMA2C;
  t->log = log;
  GB_TRY(tokenizer_init(&t->legacy, v, mem, log));
  t->bos = v.bos;
  t->eos = v.eos;
  t->unk = v.unk;
  t->add_bos = v.bos >= 0;  // llama2.c starts every text with BOS
  return GB_OK;
}

gb_status tokenizer_obj_init_gguf(gb_tokenizer *t, const TokView &v, void *mem, const Logger &log) {
  t->kind = v.kind == kTokKindSpm ? GB_TOKENIZER_SPM : GB_TOKENIZER_BPE;
  t->log = log;
  GB_TRY(tok_init(&t->tok, v, mem, log));
  t->bos = v.special[kTokBos];
  t->eos = v.special[kTokEos];
  t->eot = v.special[kTokEot];
  t->eom = v.special[kTokEom];
  t->unk = v.special[kTokUnk];
  t->pad = v.special[kTokPad];
  t->add_bos = (v.flags & kTokFlagAddBos) != 0;
  t->add_eos = (v.flags & kTokFlagAddEos) != 0;
  return GB_OK;
}

}  // namespace gb

namespace {

constexpr uint32_t kEncodeFlags = GB_TOKENIZE_ADD_BOS | GB_TOKENIZE_NO_DUMMY_PREFIX | GB_TOKENIZE_PARSE_SPECIAL | GB_TOKENIZE_ADD_EOS;
static_assert(GB_TOKENIZE_ADD_BOS == gb::kTokEncAddBos && GB_TOKENIZE_NO_DUMMY_PREFIX == gb::kTokEncNoSpacePrefix &&
                  GB_TOKENIZE_PARSE_SPECIAL == gb::kTokEncParseSpecial && GB_TOKENIZE_ADD_EOS == gb::kTokEncAddEos &&
                  kEncodeFlags == gb::kTokEncAll,
              "public encode flags are the engine's");
static_assert(GB_DETOKENIZE_SPECIAL == gb::kTokDecSpecial && GB_DETOKENIZE_STRIP_SPACE == gb::kTokDecStripSpace,
              "public decode flags are the engine's");

uint32_t n_tokens(const gb_tokenizer *t) { return t->kind == GB_TOKENIZER_LLAMA2C ? t->legacy.v.n : t->tok.v.n_tokens; }

// Fill `st`'s log line; for the calls whose misuse is worth a line.
gb_status fail(const gb_tokenizer *t, gb_status st, const char *what) {
  t->log.log(GB_LOG_ERROR, "tokenizer: %s (%s)", what, gb_status_str(st));
  return st;
}

}  // namespace

extern "C" gb_status gb_model_tokenizer(const gb_model *m, const gb_tokenizer **out) {
  if (!m || !out) return GB_ERR_NULL_POINTER;
  *out = &m->tokenizer;
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_mem_size(const void *image, size_t size, size_t *out_bytes) {
  if (!image || !out_bytes) return GB_ERR_NULL_POINTER;
  gb::TokView v;
  GB_TRY(gb::tokdata_view(static_cast<const uint8_t *>(image), size, gb::Logger(), &v));
  gb::Arena counter;
  counter.array<gb_tokenizer>(1);
  counter.alloc(gb::tok_mem_size(v), 8);
  *out_bytes = counter.used();
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_open_memory(const void *image, size_t size, const gb_model_options *opts,
                                              gb_tokenizer **out) {
  if (!image || !out) return GB_ERR_NULL_POINTER;
  gb_model_options o;
  GB_TRY(gb::read_model_options(opts, &o));
  gb::Logger log;
  log.fn = o.log;
  log.user = o.log_user;
  log.level = o.log_level;
  gb::TokView v;
  GB_TRY(gb::tokdata_view(static_cast<const uint8_t *>(image), size, log, &v));
  gb::Arena counter;
  counter.array<gb_tokenizer>(1);
  counter.alloc(gb::tok_mem_size(v), 8);
  const size_t need = counter.used();
  void *mem = o.mem;
  if (mem) {
    GB_RETURN_IF((uintptr_t)mem % gb::Arena::kAlign != 0, log, GB_ERR_ALIGNMENT, "tokenizer options: mem must be %zu-byte aligned",
                 (size_t)gb::Arena::kAlign);
    GB_RETURN_IF(o.mem_bytes < need, log, GB_ERR_ARENA_TOO_SMALL, "tokenizer options: mem_bytes %zu < the %zu bytes needed",
                 o.mem_bytes, need);
  } else {
    mem = gb_port_aligned_alloc(need, gb::Arena::kAlign);
    GB_RETURN_IF(!mem, log, GB_ERR_OUT_OF_MEMORY, "tokenizer: cannot obtain %zu bytes", need);
  }
  gb::Arena arena(mem, need);
  gb_tokenizer *t = new (arena.array<gb_tokenizer>(1)) gb_tokenizer();
  void *tables = arena.alloc(gb::tok_mem_size(v), 8);
  const gb_status st = gb::tokenizer_obj_init_gguf(t, v, tables, log);
  if (st != GB_OK) {
    if (!o.mem) gb_port_aligned_free(mem);
    return st;
  }
  t->standalone = true;
  t->mem = o.mem ? nullptr : mem;
  *out = t;
  return GB_OK;
}

extern "C" void gb_tokenizer_close(gb_tokenizer *t) {
  if (!t || !t->standalone) return;
  void *mem = t->mem;
  t->~gb_tokenizer();
  if (mem) gb_port_aligned_free(mem);
}

extern "C" gb_status gb_tokenizer_get_info(const gb_tokenizer *t, gb_tokenizer_info *info) {
  if (!t || !info) return GB_ERR_NULL_POINTER;
  if (info->struct_size < offsetof(gb_tokenizer_info, chat_template_bytes) || info->struct_size > sizeof(gb_tokenizer_info))
    return GB_ERR_STRUCT_SIZE;
  gb_tokenizer_info r;
  memset(&r, 0, sizeof r);
  r.struct_size = info->struct_size;
  r.kind = t->kind;
  r.n_tokens = n_tokens(t);
  r.bos_id = t->bos;
  r.eos_id = t->eos;
  r.eot_id = t->eot;
  r.eom_id = t->eom;
  r.unk_id = t->unk;
  r.pad_id = t->pad;
  r.add_bos = t->add_bos;
  r.add_eos = t->add_eos;
  if (t->kind == GB_TOKENIZER_BPE) {
    const char *name = gb::pretok_name(t->tok.v.pre);
    strncpy(r.pre, name, sizeof r.pre - 1);
  }
  r.chat_template_bytes = t->kind == GB_TOKENIZER_LLAMA2C ? 0 : t->tok.v.chat_template_len;
  memcpy(info, &r, info->struct_size);
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_encode(const gb_tokenizer *t, const char *text, size_t len, uint32_t flags, int32_t *tokens,
                                         size_t cap, size_t *n_tokens) {
  if (!t || !n_tokens) return GB_ERR_NULL_POINTER;
  if (flags & ~kEncodeFlags) return fail(t, GB_ERR_INVALID_ARGUMENT, "unknown encode flags");
  if (t->kind != GB_TOKENIZER_LLAMA2C) return gb::tok_encode(t->tok, text, len, flags, tokens, cap, n_tokens);
  if (flags & GB_TOKENIZE_PARSE_SPECIAL)
    return fail(t, GB_ERR_UNAVAILABLE, "a llama2.c vocabulary has no special-token text to parse");
  const bool eos = (flags & GB_TOKENIZE_ADD_EOS) != 0;
  if (eos && t->eos < 0) return fail(t, GB_ERR_UNAVAILABLE, "GB_TOKENIZE_ADD_EOS without an EOS token");
  // One slot more than the encoder needs when EOS follows.
  if (eos && tokens && cap == gb::tokenize_capacity(len)) {
    *n_tokens = cap + 1;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  gb_status st = gb::tokenize(t->legacy, text, len, flags & ~GB_TOKENIZE_ADD_EOS, tokens, cap, n_tokens);
  if (st == GB_ERR_BUFFER_TOO_SMALL && eos) (*n_tokens)++;
  if (st == GB_OK && eos) tokens[(*n_tokens)++] = t->eos;
  return st;
}

extern "C" gb_status gb_tokenizer_token_text(const gb_tokenizer *t, int32_t prev, int32_t token, const char **out,
                                             size_t *len) {
  if (!t || !out || !len) return GB_ERR_NULL_POINTER;
  if (t->kind == GB_TOKENIZER_LLAMA2C) return gb::token_to_text(t->legacy, prev, token, out, len);
  GB_TRY(gb::tok_piece(t->tok, token, 0, out, len));
  // SentencePiece's space prefix is dropped right after BOS.
  if (prev >= 0 && prev == t->bos && t->kind == GB_TOKENIZER_SPM && (t->tok.v.flags & gb::kTokFlagAddSpacePrefix) && *len > 0 &&
      (*out)[0] == ' ') {
    ++*out;
    --*len;
  }
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_decode(const gb_tokenizer *t, const int32_t *ids, size_t n, uint32_t flags, char *buf,
                                         size_t cap, size_t *n_out) {
  if (!t || !n_out || (!ids && n) || (!buf && cap)) return GB_ERR_NULL_POINTER;
  if (flags & ~(GB_DETOKENIZE_SPECIAL | GB_DETOKENIZE_STRIP_SPACE)) return fail(t, GB_ERR_INVALID_ARGUMENT, "unknown decode flags");
  if (t->kind != GB_TOKENIZER_LLAMA2C) return gb::tok_decode(t->tok, ids, n, flags, buf, cap, n_out);
  // llama2.c: the pieces back to back; control tokens have no text in this
  // vocabulary's decoder, and a leading space goes with STRIP_SPACE.
  size_t need = 0;
  bool strip = (flags & GB_DETOKENIZE_STRIP_SPACE) != 0;
  for (int pass = 0; pass < 2; pass++) {
    size_t w = 0;
    bool s = strip;
    for (size_t i = 0; i < n; i++) {
      const char *p;
      size_t m;
      GB_TRY(gb::token_to_text(t->legacy, -1, ids[i], &p, &m));
      if (s && m) {
        s = false;
        if (p[0] == ' ') p++, m--;
      }
      if (pass == 1 && m) memcpy(buf + w, p, m);
      w += m;
    }
    if (pass == 0) {
      need = w;
      *n_out = need;
      if (need > cap) return GB_ERR_BUFFER_TOO_SMALL;
    }
  }
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_is_eog(const gb_tokenizer *t, int32_t token, int *out) {
  if (!t || !out) return GB_ERR_NULL_POINTER;
  if (token < 0 || (uint32_t)token >= n_tokens(t)) return GB_ERR_TOKEN_OUT_OF_RANGE;
  *out = token == t->eos || token == t->eot || token == t->eom;
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_chat_template(const gb_tokenizer *t, const char **text, size_t *len) {
  if (!t || !text || !len) return GB_ERR_NULL_POINTER;
  if (t->kind == GB_TOKENIZER_LLAMA2C || t->tok.v.chat_template_len == 0) return GB_ERR_UNAVAILABLE;
  *text = reinterpret_cast<const char *>(t->tok.v.chat_template);
  *len = (size_t)t->tok.v.chat_template_len;
  return GB_OK;
}

extern "C" gb_status gb_tokenize(const gb_model *m, const char *text, size_t len, uint32_t flags, int32_t *tokens, size_t cap,
                                 size_t *n_tokens) {
  if (!m) return GB_ERR_NULL_POINTER;
  return gb_tokenizer_encode(&m->tokenizer, text, len, flags, tokens, cap, n_tokens);
}

extern "C" gb_status gb_token_to_text(const gb_model *m, int32_t prev, int32_t token, const char **out, size_t *len) {
  if (!m) return GB_ERR_NULL_POINTER;
  return gb_tokenizer_token_text(&m->tokenizer, prev, token, out, len);
}
