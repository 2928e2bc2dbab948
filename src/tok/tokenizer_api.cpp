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

gb_status tokenizer_obj_init_gguf(gb_tokenizer *t, const TokView &v, void *mem, size_t mem_bytes, const Logger &log) {
  t->kind = v.kind == kTokKindSpm ? GB_TOKENIZER_SPM : v.kind == kTokKindBpe ? GB_TOKENIZER_BPE : GB_TOKENIZER_BPE_UTF8;
  t->log = log;
  GB_TRY(tok_init(&t->tok, v, mem, mem_bytes, log));
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

// The engines return plain statuses; the public calls give them a line
// (not for GB_ERR_BUFFER_TOO_SMALL, the size query).
gb_status result(const gb_tokenizer *t, const char *fn, gb_status st) {
  if (st != GB_OK && st != GB_ERR_BUFFER_TOO_SMALL) t->log.log(GB_LOG_ERROR, "%s: %s", fn, gb_status_str(st));
  return st;
}

#define GB_CHECK_TOK(t, fn) GB_TRY(gb::check_handle((t), gb::kHandleTokenizer, (fn)))

}  // namespace

extern "C" gb_status gb_model_tokenizer(const gb_model *m, const gb_tokenizer **out) {
  GB_TRY(gb::check_handle(m, gb::kHandleModel, "gb_model_tokenizer"));
  if (!out) return gb::null_arg(m->log, "gb_model_tokenizer", "out");
  *out = &m->tokenizer;
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_mem_size(const void *image, size_t size, size_t *out_bytes) {
  if (!image) return gb::null_arg(gb::Logger(), "gb_tokenizer_mem_size", "image");
  if (!out_bytes) return gb::null_arg(gb::Logger(), "gb_tokenizer_mem_size", "out_bytes");
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
  gb_model_options o;
  GB_TRY(gb::read_model_options(opts, &o, "gb_tokenizer_open_memory"));
  if (!image) return gb::null_arg(gb::Logger{o.log, o.log_user, o.log_level}, "gb_tokenizer_open_memory", "image");
  if (!out) return gb::null_arg(gb::Logger{o.log, o.log_user, o.log_level}, "gb_tokenizer_open_memory", "out");
  gb::Logger log;
  log.fn = o.log;
  log.user = o.log_user;
  log.level = o.log_level;
  gb::TokView v;
  GB_TRY(gb::tokdata_view(static_cast<const uint8_t *>(image), size, log, &v));
  const size_t tables_bytes = gb::tok_mem_size(v);
  gb::Arena counter;
  counter.array<gb_tokenizer>(1);
  counter.alloc(tables_bytes, 8);
  const size_t need = counter.used();
  void *mem = nullptr;
  bool owned;
  GB_TRY(gb::obtain_memory(log, "tokenizer options (mem)", o.mem, o.mem_bytes, need, gb::Arena::kAlign, &mem, &owned));
  gb::Arena arena(mem, need);
  gb_tokenizer *t = new (arena.array<gb_tokenizer>(1)) gb_tokenizer();
  void *tables = arena.alloc(tables_bytes, 8);
  const gb_status st = gb::tokenizer_obj_init_gguf(t, v, tables, tables_bytes, log);
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
  if (!t || gb::check_handle(t, gb::kHandleTokenizer, "gb_tokenizer_close") != GB_OK) return;  // NULL: a no-op; else logged
  if (!t->standalone) {
    t->log.log(GB_LOG_ERROR, "gb_tokenizer_close: a model's own tokenizer is released with the model; nothing done");
    return;
  }
  void *mem = t->mem;
  t->~gb_tokenizer();
  t->handle = gb::kHandleDead;  // caller memory stays readable: later calls are refused
  if (mem) gb_port_aligned_free(mem);
}

extern "C" gb_status gb_tokenizer_get_info(const gb_tokenizer *t, gb_tokenizer_info *info) {
  GB_CHECK_TOK(t, "gb_tokenizer_get_info");
  if (!info) return gb::null_arg(t->log, "gb_tokenizer_get_info", "info");
  GB_RETURN_IF(info->struct_size < offsetof(gb_tokenizer_info, chat_template_bytes) || info->struct_size > sizeof(gb_tokenizer_info),
               t->log, GB_ERR_STRUCT_SIZE, "gb_tokenizer_get_info: gb_tokenizer_info struct_size %u not supported (%u to %u)",
               info->struct_size, (uint32_t)offsetof(gb_tokenizer_info, chat_template_bytes), (uint32_t)sizeof(gb_tokenizer_info));
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
  if (t->kind == GB_TOKENIZER_BPE || t->kind == GB_TOKENIZER_BPE_UTF8) {
    const char *name = gb::pretok_name(t->tok.v.pre);
    strncpy(r.pre, name, sizeof r.pre - 1);
  }
  r.chat_template_bytes = t->kind == GB_TOKENIZER_LLAMA2C ? 0 : t->tok.v.chat_template_len;
  memcpy(info, &r, info->struct_size);
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_encode(const gb_tokenizer *t, const char *text, size_t len, uint32_t flags, int32_t *tokens,
                                         size_t cap, size_t *n_tokens) {
  GB_CHECK_TOK(t, "gb_tokenizer_encode");
  if (!n_tokens) return gb::null_arg(t->log, "gb_tokenizer_encode", "n_tokens");
  if (!text && len) return gb::null_arg(t->log, "gb_tokenizer_encode", "text (with len > 0)");
  if (!tokens && cap) return gb::null_arg(t->log, "gb_tokenizer_encode", "tokens (with cap > 0)");
  if (flags & ~kEncodeFlags) return fail(t, GB_ERR_INVALID_ARGUMENT, "unknown encode flags");
  if (t->kind != GB_TOKENIZER_LLAMA2C)
    return result(t, "gb_tokenizer_encode", gb::tok_encode(t->tok, text, len, flags, tokens, cap, n_tokens));
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
  return result(t, "gb_tokenizer_encode", st);
}

extern "C" gb_status gb_tokenizer_token_text(const gb_tokenizer *t, int32_t prev, int32_t token, const char **out,
                                             size_t *len) {
  GB_CHECK_TOK(t, "gb_tokenizer_token_text");
  if (!out || !len) return gb::null_arg(t->log, "gb_tokenizer_token_text", !out ? "out" : "len");
  if (t->kind == GB_TOKENIZER_LLAMA2C) return result(t, "gb_tokenizer_token_text", gb::token_to_text(t->legacy, prev, token, out, len));
  GB_TRY(result(t, "gb_tokenizer_token_text", gb::tok_piece(t->tok, token, 0, out, len)));
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
  GB_CHECK_TOK(t, "gb_tokenizer_decode");
  if (!n_out) return gb::null_arg(t->log, "gb_tokenizer_decode", "n_out");
  if (!ids && n) return gb::null_arg(t->log, "gb_tokenizer_decode", "ids (with n > 0)");
  if (!buf && cap) return gb::null_arg(t->log, "gb_tokenizer_decode", "buf (with cap > 0)");
  if (flags & ~(GB_DETOKENIZE_SPECIAL | GB_DETOKENIZE_STRIP_SPACE)) return fail(t, GB_ERR_INVALID_ARGUMENT, "unknown decode flags");
  if (t->kind != GB_TOKENIZER_LLAMA2C) return result(t, "gb_tokenizer_decode", gb::tok_decode(t->tok, ids, n, flags, buf, cap, n_out));
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
      GB_TRY(result(t, "gb_tokenizer_decode", gb::token_to_text(t->legacy, -1, ids[i], &p, &m)));
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
  GB_CHECK_TOK(t, "gb_tokenizer_is_eog");
  if (!out) return gb::null_arg(t->log, "gb_tokenizer_is_eog", "out");
  GB_RETURN_IF(token < 0 || (uint32_t)token >= n_tokens(t), t->log, GB_ERR_TOKEN_OUT_OF_RANGE,
               "gb_tokenizer_is_eog: token %d outside [0, %u)", token, n_tokens(t));
  *out = token == t->eos || token == t->eot || token == t->eom;
  return GB_OK;
}

extern "C" gb_status gb_tokenizer_chat_template(const gb_tokenizer *t, const char **text, size_t *len) {
  GB_CHECK_TOK(t, "gb_tokenizer_chat_template");
  if (!text || !len) return gb::null_arg(t->log, "gb_tokenizer_chat_template", !text ? "text" : "len");
  GB_RETURN_IF(t->kind == GB_TOKENIZER_LLAMA2C || t->tok.v.chat_template_len == 0, t->log, GB_ERR_UNAVAILABLE,
               "gb_tokenizer_chat_template: the vocabulary carries no chat template");
  *text = reinterpret_cast<const char *>(t->tok.v.chat_template);
  *len = (size_t)t->tok.v.chat_template_len;
  return GB_OK;
}

extern "C" gb_status gb_tokenize(const gb_model *m, const char *text, size_t len, uint32_t flags, int32_t *tokens, size_t cap,
                                 size_t *n_tokens) {
  GB_TRY(gb::check_handle(m, gb::kHandleModel, "gb_tokenize"));
  return gb_tokenizer_encode(&m->tokenizer, text, len, flags, tokens, cap, n_tokens);
}

extern "C" gb_status gb_token_to_text(const gb_model *m, int32_t prev, int32_t token, const char **out, size_t *len) {
  GB_TRY(gb::check_handle(m, gb::kHandleModel, "gb_token_to_text"));
  return gb_tokenizer_token_text(&m->tokenizer, prev, token, out, len);
}
