// fuzz_tok_common.h — what the tokenizer fuzz targets share beyond
// fuzz_util.h: a fixture vocabulary loaded into an engine. Include after
// defining `static const char kFuzzName[]`.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "bytes.h"
#include "fuzz/fuzz_util.h"
#include "convert_util.h"
#include "gguf_parse.h"
#include "tok/engine.h"
#include "tok/pretok.h"
#include "tokdata_gguf.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

struct Loaded {
  std::vector<uint8_t> img;
  std::vector<uint64_t> mem;
  gb::TokView v;
  gb::Tok tok;
  bool ok = false;
};

// The fixture vocabulary DIR/ggml-vocab-NAME.gguf (DIR: the shared
// fixtures' vocab/ unless given; ok = false when the file is absent); pre: 0
// keeps its own pre-tokenizer, else it is replaced (llama-bpe also ignores
// merges, as that pre-tokenizer's models do).
Loaded *load(const char *name, uint32_t pre, const char *dir = GB_SHARED_DIR "/fixtures/vocab") {
  auto *l = new Loaded;
  gb::Logger log;
  log.fn = quiet;
  gb::InputFile f;
  gb::GgufFile g;
  const std::string path = std::string(dir) + "/ggml-vocab-" + name + ".gguf";
  if (f.open(path.c_str(), log, "vocabulary") != GB_OK || gb::gguf_parse(f, log, &g) != GB_OK ||
      gb::tokdata_from_gguf(g, log, &l->img) != GB_OK)
    return l;
  if (pre) {
    gb::st_u32(l->img.data() + 12, pre);
    if (pre == gb::kPreLlama3) gb::st_u32(l->img.data() + 24, gb::ld_u32(l->img.data() + 24) | gb::kTokFlagIgnoreMerges);
  }
  if (gb::tokdata_view(l->img.data(), l->img.size(), log, &l->v) != GB_OK) fuzz_fail("the fixture's data does not validate");
  const size_t mem_bytes = gb::tok_mem_size(l->v);
  l->mem.resize(mem_bytes / 8 + 1);
  l->ok = gb::tok_init(&l->tok, l->v, l->mem.data(), mem_bytes, log) == GB_OK;
  if (!l->ok) fuzz_fail("the fixture vocabulary does not load");
  return l;
}

}  // namespace
