// tokenizer_obj.h — gb_tokenizer, the public tokenizer handle: either the
// llama2.c encoder over a VOCAB section (tokenizer.h) or a GGUF tokenizer
// over a TOKENIZER image (tok/engine.h). A model embeds one; one opened by
// gb_tokenizer_open_memory stands alone. Read-only after init, so every
// encode / decode call is thread-safe.
#pragma once

#include <stdint.h>

#include "common.h"
#include "tok/engine.h"
#include "tokenizer.h"

struct gb_tokenizer {
  uint32_t handle = gb::kHandleTokenizer;  // first: see gb::HandleKind
  gb_tokenizer_kind kind = GB_TOKENIZER_LLAMA2C;
  bool standalone = false;  // from gb_tokenizer_open_memory: gb_tokenizer_close releases it
  void *mem = nullptr;      // the allocation gb_tokenizer_close frees (nullptr: caller memory)
  gb::Logger log;
  gb::Tokenizer legacy;     // kind GB_TOKENIZER_LLAMA2C
  gb::Tok tok;              // kinds GB_TOKENIZER_SPM / _BPE / _BPE_UTF8
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false;
};

namespace gb {

// A llama2.c tokenizer over v (tables in mem, tokenizer_mem_size(v.n) bytes).
gb_status tokenizer_obj_init_llama2c(gb_tokenizer *t, const VocabView &v, void *mem, const Logger &log);

// A GGUF tokenizer over a validated view (tables in mem, mem_bytes =
// tok_mem_size(v) bytes).
gb_status tokenizer_obj_init_gguf(gb_tokenizer *t, const TokView &v, void *mem, size_t mem_bytes, const Logger &log);

}  // namespace gb
