// tokdata_gguf.cpp — TOKENIZER data from a parsed GGUF (see tokdata_gguf.h).
// The image is built by the core's builder (src/tok/tokdata_build.cpp), the
// one a GGUF opened in place uses, so a converted file and an opened one
// tokenize alike: the parsed tokenizer keys are written back as a small
// GGUF (no tensors) and read through a GgufView.
#include "tokdata_gguf.h"

#include <string.h>

#include <string>

#include "bytes.h"
#include "gguf_view.h"
#include "tok/tokdata_build.h"

namespace gb {
namespace {

struct Writer {
  std::vector<uint8_t> b;
  uint64_t n_kv = 0;
  void u32(uint32_t v) {
    b.resize(b.size() + 4);
    st_u32(&b[b.size() - 4], v);
  }
  void u64(uint64_t v) {
    b.resize(b.size() + 8);
    st_u64(&b[b.size() - 8], v);
  }
  void str(const std::string &s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void key(const char *k, uint32_t type) {
    str(k);
    u32(type);
    n_kv++;
  }
};

}  // namespace

gb_status tokdata_from_gguf(const GgufFile &g, const Logger &log, std::vector<uint8_t> *out) {
  GB_RETURN_IF(!out, log, GB_ERR_NULL_POINTER, "tokdata: null output");
  Writer w;
  w.b.resize(24);  // header, counts written last
  for (const GgufValue &v : g.kv) {
    if (v.key.compare(0, 10, "tokenizer.") != 0) continue;
    if (v.is_str) {
      w.key(v.key.c_str(), kGgufString);
      w.str(v.s);
    } else if (v.is_int) {
      w.key(v.key.c_str(), kGgufI64);
      w.u64((uint64_t)v.i);
    }
  }
  if (g.has_tokens) {
    w.key("tokenizer.ggml.tokens", kGgufArray);
    w.u32(kGgufString);
    w.u64(g.tokens.size());
    for (const std::string &t : g.tokens) w.str(t);
  }
  if (g.has_scores) {
    w.key("tokenizer.ggml.scores", kGgufArray);
    w.u32(kGgufF32);
    w.u64(g.scores.size());
    for (float f : g.scores) {
      uint32_t u;
      memcpy(&u, &f, 4);
      w.u32(u);
    }
  }
  if (g.has_types) {
    w.key("tokenizer.ggml.token_type", kGgufArray);
    w.u32(kGgufI32);
    w.u64(g.token_types.size());
    for (int32_t t : g.token_types) w.u32((uint32_t)t);
  }
  if (g.has_merges) {
    w.key("tokenizer.ggml.merges", kGgufArray);
    w.u32(kGgufString);
    w.u64(g.merges.size());
    for (const std::string &m : g.merges) w.str(m);
  }
  if (g.has_chat_template) {
    w.key("tokenizer.chat_template", kGgufString);
    w.str(g.chat_template);
  }
  if (g.chat_template_skipped)
    log.log(GB_LOG_WARN, "tokdata: tokenizer.chat_template longer than %llu bytes left out", (unsigned long long)kMaxChatTemplate);
  memcpy(w.b.data(), "GGUF", 4);
  st_u32(&w.b[4], 3);
  st_u64(&w.b[8], 0);
  st_u64(&w.b[16], w.n_kv);
  GgufView view;
  GB_TRY(gguf_view_open(w.b.data(), w.b.size(), log, nullptr, nullptr, nullptr, &view));
  TokBuildSizes sz;
  GB_TRY(tokdata_build(view, log, nullptr, nullptr, &sz));
  std::vector<uint8_t> img(sz.image_bytes);
  std::vector<uint32_t> scratch(sz.scratch_bytes / 4 + 1);
  GB_TRY(tokdata_build(view, log, img.data(), scratch.data(), &sz));
  *out = std::move(img);
  return GB_OK;
}

}  // namespace gb
