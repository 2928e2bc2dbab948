// gguf_parse.h — a bounded GGUF (v2, v3) reader for the converter: the
// key-value metadata the importer needs (general.*, llama.*, qwen2.*,
// tokenizer.ggml.*), the tokenizer arrays and the tensor directory. Every
// count, length and offset is checked against the file size before anything
// is allocated or read.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "common.h"
#include "convert_util.h"
#include "ggml_types.h"
#include "gguf_view.h"

namespace gb {


// A scalar or string value kept from the metadata.
struct GgufValue {
  std::string key;
  uint32_t type = 0;  // GgufValueType
  bool is_int = false, is_float = false, is_str = false;
  int64_t i = 0;      // integers (u64 above INT64_MAX are stored with big = true)
  bool big = false;
  double f = 0.0;
  std::string s;
};

struct GgufTensor {
  std::string name;
  uint32_t n_dims = 0;
  uint64_t ne[4] = {1, 1, 1, 1};
  uint32_t type = 0;    // GgmlType (others are kept, flagged unsupported later)
  uint64_t offset = 0;  // absolute file offset of the data
  uint64_t nbytes = 0;  // 0 when the type is not one we read
};

struct GgufFile {
  uint32_t version = 0;
  uint32_t alignment = 32;
  uint64_t data_start = 0;
  std::vector<GgufValue> kv;  // scalars and short strings of general.*, llama.*, tokenizer.ggml.*
  bool has_tokens = false, has_scores = false, has_types = false;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> token_types;
  bool has_merges = false;            // tokenizer.ggml.merges ("left right" strings, rank order)
  std::vector<std::string> merges;
  bool has_chat_template = false;     // tokenizer.chat_template (at most kMaxChatTemplate bytes;
  std::string chat_template;          // a longer one is skipped and chat_template_skipped set)
  bool chat_template_skipped = false;
  std::vector<GgufTensor> tensors;

  const GgufValue *find(const char *key) const;
  const GgufTensor *tensor(const std::string &name) const;
};

// Limits on the tokenizer arrays and strings kept (checked while parsing).
constexpr uint64_t kMaxMerges = 1u << 23;
constexpr uint64_t kMaxChatTemplate = 1u << 20;

// Parse the header, metadata and tensor directory of an open file.
gb_status gguf_parse(InputFile &f, const Logger &log, GgufFile *out);

}  // namespace gb
