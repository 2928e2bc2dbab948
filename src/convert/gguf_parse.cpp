// gguf_parse.cpp — the bounded GGUF reader (see gguf_parse.h). Counts are
// checked against the bytes left in the file (every element occupies at
// least a known number of bytes) before a loop runs or a vector grows, and
// vectors grow only with data actually read, so a hostile header cannot make
// the converter allocate more than the file's own size.
#include "gguf_parse.h"

#include "models/arch.h"

#include <string.h>

#include <algorithm>
#include <set>
#include <utility>

#include "bytes.h"
#include "format.h"

namespace gb {

const GgufValue *GgufFile::find(const char *key) const {
  for (const GgufValue &v : kv)
    if (v.key == key) return &v;
  return nullptr;
}

const GgufTensor *GgufFile::tensor(const std::string &name) const {
  for (const GgufTensor &t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

constexpr uint32_t kMaxDepth = 3;            // nesting of arrays in arrays
constexpr uint64_t kMaxKeyBytes = 65535;
constexpr uint64_t kMaxKeptString = 4096;    // longer strings are skipped (templates)
constexpr uint64_t kMaxTokenBytes = 4 * kMaxPieceBytes;  // before U+2581 -> ' '
constexpr uint64_t kMaxNameBytes = 1024;
constexpr uint64_t kMaxTensors = 1u << 20;


class Parser {
 public:
  Parser(InputFile &f, const Logger &log, GgufFile *out) : f_(f), c_(f), log_(log), g_(out) {}
  gb_status run();

 private:
  gb_status short_read(const char *what) const {
    if (c_.io_error()) return fail(log_, GB_ERR_IO, "gguf: cannot read '%s'", f_.path());
    return fail(log_, GB_ERR_TRUNCATED, "gguf: '%s' ends inside %s", f_.path(), what);
  }
  // A u64 length that fits in the rest of the file (else TRUNCATED).
  gb_status length(uint64_t *len, const char *what);
  // A string of at most `limit` bytes (TRUNCATED first, then CORRUPT).
  gb_status string(std::string *s, uint64_t limit, const char *what);
  // The len bytes of a string whose length was just read.
  gb_status chars(std::string *s, uint64_t len, const char *what);
  gb_status skip_value(uint32_t type, uint32_t depth, const char *key);
  gb_status scalar(uint32_t type, GgufValue *v, const char *key);
  gb_status array_header(uint32_t *elem, uint64_t *count, const char *key);
  gb_status kv_pair(std::set<std::string> *seen);
  gb_status tensor_info(std::set<std::string> *seen);

  InputFile &f_;
  Cursor c_;
  const Logger &log_;
  GgufFile *g_;
};

gb_status Parser::length(uint64_t *len, const char *what) {
  if (!c_.u64(len)) return short_read(what);
  GB_RETURN_IF(*len > c_.remaining(), log_, GB_ERR_TRUNCATED, "gguf: %s of %llu bytes runs past the end of the file", what,
               (unsigned long long)*len);
  return GB_OK;
}

gb_status Parser::string(std::string *s, uint64_t limit, const char *what) {
  uint64_t len;
  GB_TRY(length(&len, what));
  GB_RETURN_IF(len > limit, log_, GB_ERR_CORRUPT, "gguf: %s of %llu bytes is too long (limit %llu)", what,
               (unsigned long long)len, (unsigned long long)limit);
  return chars(s, len, what);
}

gb_status Parser::chars(std::string *s, uint64_t len, const char *what) {
  s->resize((size_t)len);
  if (len && !c_.read(&(*s)[0], (size_t)len)) return short_read(what);
  return GB_OK;
}

gb_status Parser::array_header(uint32_t *elem, uint64_t *count, const char *key) {
  if (!c_.u32(elem) || !c_.u64(count)) return short_read("an array header");
  const uint64_t m = gguf_min_value_size(*elem);
  GB_RETURN_IF(m == 0, log_, GB_ERR_CORRUPT, "gguf: key '%s': array element type %u unknown", key, *elem);
  GB_RETURN_IF(*count > c_.remaining() / m, log_, GB_ERR_TRUNCATED, "gguf: key '%s': array of %llu elements runs past the end",
               key, (unsigned long long)*count);
  return GB_OK;
}

gb_status Parser::skip_value(uint32_t type, uint32_t depth, const char *key) {
  if (type == kGgufString) {
    uint64_t len;
    if (!c_.u64(&len)) return short_read("a string");
    if (!c_.skip(len)) return fail(log_, GB_ERR_TRUNCATED, "gguf: key '%s': string runs past the end of the file", key);
    return GB_OK;
  }
  if (type == kGgufArray) {
    GB_RETURN_IF(depth >= kMaxDepth, log_, GB_ERR_CORRUPT, "gguf: key '%s': arrays nested deeper than %u", key, kMaxDepth);
    uint32_t elem;
    uint64_t count;
    GB_TRY(array_header(&elem, &count, key));
    if (elem != kGgufString && elem != kGgufArray) {
      if (!c_.skip(count * gguf_scalar_size(elem))) return short_read("an array");
      return GB_OK;
    }
    for (uint64_t i = 0; i < count; i++) GB_TRY(skip_value(elem, depth + 1, key));
    return GB_OK;
  }
  const uint64_t n = gguf_scalar_size(type);
  GB_RETURN_IF(n == 0, log_, GB_ERR_CORRUPT, "gguf: key '%s' has value type %u (unknown)", key, type);
  if (!c_.skip(n)) return short_read("a value");
  return GB_OK;
}

gb_status Parser::scalar(uint32_t type, GgufValue *v, const char *key) {
  uint8_t b[8] = {0};
  const uint64_t n = gguf_scalar_size(type);
  GB_RETURN_IF(n == 0, log_, GB_ERR_CORRUPT, "gguf: key '%s' has value type %u (unknown)", key, type);
  if (!c_.read(b, (size_t)n)) return short_read("a value");
  v->type = type;
  v->is_int = true;
  switch (type) {
    case kGgufU8: case kGgufBool: v->i = b[0]; break;
    case kGgufI8: v->i = (int8_t)b[0]; break;
    case kGgufU16: v->i = ld_u16(b); break;
    case kGgufI16: v->i = (int16_t)ld_u16(b); break;
    case kGgufU32: v->i = ld_u32(b); break;
    case kGgufI32: v->i = ld_i32(b); break;
    case kGgufU64: {
      const uint64_t u = ld_u64(b);
      v->big = u > (uint64_t)INT64_MAX;
      v->i = v->big ? INT64_MAX : (int64_t)u;
      break;
    }
    case kGgufI64: v->i = (int64_t)ld_u64(b); break;
    case kGgufF32: v->is_int = false; v->is_float = true; v->f = ld_f32(b); break;
    case kGgufF64: v->is_int = false; v->is_float = true; v->f = ld_f64(b); break;
    default: break;
  }
  return GB_OK;
}

// general.*, tokenizer.ggml.* and the keys of every architecture gearbx runs.
bool kept_prefix(const std::string &k) {
  if (k.compare(0, 8, "general.") == 0 || k.compare(0, 15, "tokenizer.ggml.") == 0) return true;
  const size_t dot = k.find('.');
  return dot != std::string::npos && arch_by_name(k.substr(0, dot).c_str()) != nullptr;
}

gb_status Parser::kv_pair(std::set<std::string> *seen) {
  std::string key;
  GB_TRY(string(&key, kMaxKeyBytes, "a metadata key"));
  GB_RETURN_IF(!seen->insert(key).second, log_, GB_ERR_CORRUPT, "gguf: key '%s' appears twice", key.c_str());
  uint32_t type;
  if (!c_.u32(&type)) return short_read("a metadata value type");
  const char *k = key.c_str();

  if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type") {
    GB_RETURN_IF(type != kGgufArray, log_, GB_ERR_CORRUPT, "gguf: key '%s' is not an array (type %u)", k, type);
    uint32_t elem;
    uint64_t count;
    GB_TRY(array_header(&elem, &count, k));
    GB_RETURN_IF(count > kMaxVocab, log_, GB_ERR_CORRUPT, "gguf: key '%s' has %llu entries (at most %u)", k,
                 (unsigned long long)count, kMaxVocab);
    if (key == "tokenizer.ggml.tokens") {
      GB_RETURN_IF(elem != kGgufString, log_, GB_ERR_CORRUPT, "gguf: tokenizer.ggml.tokens holds type %u, not strings", elem);
      g_->has_tokens = true;
      for (uint64_t i = 0; i < count; i++) {
        uint64_t len;
        GB_TRY(length(&len, "a token"));
        GB_RETURN_IF(len > kMaxTokenBytes, log_, GB_ERR_UNSUPPORTED_TYPE, "gguf: token %llu is %llu bytes long (limit %llu)",
                     (unsigned long long)i, (unsigned long long)len, (unsigned long long)kMaxTokenBytes);
        std::string s;
        GB_TRY(chars(&s, len, "a token"));
        g_->tokens.push_back(std::move(s));
      }
    } else if (key == "tokenizer.ggml.scores") {
      GB_RETURN_IF(elem != kGgufF32, log_, GB_ERR_CORRUPT, "gguf: tokenizer.ggml.scores holds type %u, not float32", elem);
      g_->has_scores = true;
      for (uint64_t i = 0; i < count; i++) {
        uint32_t u;
        if (!c_.u32(&u)) return short_read("the token scores");
        float f;
        memcpy(&f, &u, 4);
        g_->scores.push_back(f);
      }
    } else {
      GB_RETURN_IF(elem != kGgufI32 && elem != kGgufU32, log_, GB_ERR_CORRUPT,
                   "gguf: tokenizer.ggml.token_type holds type %u, not int32", elem);
      g_->has_types = true;
      for (uint64_t i = 0; i < count; i++) {
        uint32_t u;
        if (!c_.u32(&u)) return short_read("the token types");
        g_->token_types.push_back((int32_t)u);
      }
    }
    return GB_OK;
  }

  if (key == "tokenizer.ggml.merges") {
    GB_RETURN_IF(type != kGgufArray, log_, GB_ERR_CORRUPT, "gguf: key '%s' is not an array (type %u)", k, type);
    uint32_t elem;
    uint64_t count;
    GB_TRY(array_header(&elem, &count, k));
    GB_RETURN_IF(elem != kGgufString, log_, GB_ERR_CORRUPT, "gguf: tokenizer.ggml.merges holds type %u, not strings", elem);
    GB_RETURN_IF(count > kMaxMerges, log_, GB_ERR_CORRUPT, "gguf: key '%s' has %llu entries (at most %llu)", k,
                 (unsigned long long)count, (unsigned long long)kMaxMerges);
    g_->has_merges = true;
    for (uint64_t i = 0; i < count; i++) {
      std::string s;
      GB_TRY(string(&s, 2 * kMaxTokenBytes + 1, "a merge"));
      g_->merges.push_back(std::move(s));
    }
    return GB_OK;
  }
  if (key == "tokenizer.chat_template") {
    GB_RETURN_IF(type != kGgufString, log_, GB_ERR_CORRUPT, "gguf: key '%s' is not a string (type %u)", k, type);
    uint64_t len;
    GB_TRY(length(&len, "the chat template"));
    if (len > kMaxChatTemplate) {  // kept out; the converter says so
      c_.skip(len);
      g_->chat_template_skipped = true;
      return GB_OK;
    }
    GB_TRY(chars(&g_->chat_template, len, "the chat template"));
    g_->has_chat_template = true;
    return GB_OK;
  }
  if (!kept_prefix(key) || type == kGgufArray) return skip_value(type, 0, k);
  GgufValue v;
  v.key = key;
  if (type == kGgufString) {
    uint64_t len;
    GB_TRY(length(&len, "a string value"));
    if (len > kMaxKeptString) {  // not needed by the importer: skip it
      c_.skip(len);
      return GB_OK;
    }
    GB_TRY(chars(&v.s, len, "a string value"));
    v.type = type;
    v.is_str = true;
  } else {
    GB_TRY(scalar(type, &v, k));
  }
  g_->kv.push_back(std::move(v));
  return GB_OK;
}

gb_status Parser::tensor_info(std::set<std::string> *seen) {
  GgufTensor t;
  GB_TRY(string(&t.name, kMaxNameBytes, "a tensor name"));
  const char *n = t.name.c_str();
  GB_RETURN_IF(!seen->insert(t.name).second, log_, GB_ERR_CORRUPT, "gguf: tensor '%s' appears twice", n);
  if (!c_.u32(&t.n_dims)) return short_read("a tensor's dimensions");
  GB_RETURN_IF(t.n_dims == 0 || t.n_dims > 4, log_, GB_ERR_CORRUPT, "gguf: tensor '%s' has %u dimensions (1..4)", n, t.n_dims);
  uint64_t elems = 1;
  for (uint32_t i = 0; i < t.n_dims; i++) {
    if (!c_.u64(&t.ne[i])) return short_read("a tensor's dimensions");
    GB_RETURN_IF(t.ne[i] == 0 || t.ne[i] > (1ull << 40) || !mul_ok(elems, t.ne[i], &elems) || elems > (1ull << 48), log_,
                 GB_ERR_CORRUPT, "gguf: tensor '%s' dimension %u = %llu invalid", n, i, (unsigned long long)t.ne[i]);
  }
  if (!c_.u32(&t.type) || !c_.u64(&t.offset)) return short_read("a tensor's type and offset");
  g_->tensors.push_back(std::move(t));
  return GB_OK;
}

gb_status Parser::run() {
  uint8_t magic[4] = {0};
  const uint64_t have = f_.size() < 4 ? f_.size() : 4;
  if (have && !c_.read(magic, (size_t)have)) return short_read("the magic");
  if (have < 4) {
    GB_RETURN_IF(memcmp(magic, "GGUF", (size_t)have) != 0, log_, GB_ERR_BAD_MAGIC, "gguf: '%s' is not a GGUF file", f_.path());
    return fail(log_, GB_ERR_TRUNCATED, "gguf: '%s' is %llu bytes, too small for a header", f_.path(), (unsigned long long)have);
  }
  GB_RETURN_IF(memcmp(magic, "GGUF", 4) != 0, log_, GB_ERR_BAD_MAGIC, "gguf: '%s' is not a GGUF file (bad magic)", f_.path());
  if (!c_.u32(&g_->version)) return short_read("the header");
  GB_RETURN_IF(g_->version != 2 && g_->version != 3, log_, GB_ERR_UNSUPPORTED_VERSION,
               "gguf: version %u not supported (2 and 3 are)", g_->version);
  uint64_t n_tensors, n_kv;
  if (!c_.u64(&n_tensors) || !c_.u64(&n_kv)) return short_read("the header");
  // A key-value pair takes at least 13 bytes, a tensor info at least 32.
  GB_RETURN_IF(n_kv > c_.remaining() / 13, log_, GB_ERR_TRUNCATED, "gguf: %llu metadata pairs cannot fit in the file",
               (unsigned long long)n_kv);
  GB_RETURN_IF(n_tensors > c_.remaining() / 32, log_, GB_ERR_TRUNCATED, "gguf: %llu tensors cannot fit in the file",
               (unsigned long long)n_tensors);
  GB_RETURN_IF(n_tensors > kMaxTensors, log_, GB_ERR_CORRUPT, "gguf: %llu tensors (at most %llu)", (unsigned long long)n_tensors,
               (unsigned long long)kMaxTensors);

  std::set<std::string> seen;
  for (uint64_t i = 0; i < n_kv; i++) GB_TRY(kv_pair(&seen));
  if (const GgufValue *a = g_->find("general.alignment")) {
    GB_RETURN_IF(!a->is_int || a->i <= 0 || a->i > (1 << 24) || !is_pow2((uint64_t)a->i), log_, GB_ERR_CORRUPT,
                 "gguf: general.alignment %lld is not a power of two in [1, 16 MiB]", (long long)a->i);
    g_->alignment = (uint32_t)a->i;
  }
  seen.clear();
  for (uint64_t i = 0; i < n_tensors; i++) GB_TRY(tensor_info(&seen));
  g_->data_start = align_up(c_.pos(), g_->alignment);
  GB_RETURN_IF(n_tensors > 0 && g_->data_start > f_.size(), log_, GB_ERR_TRUNCATED, "gguf: '%s' ends before its tensor data",
               f_.path());

  for (GgufTensor &t : g_->tensors) {
    const char *n = t.name.c_str();
    GB_RETURN_IF(t.offset % g_->alignment != 0, log_, GB_ERR_CORRUPT, "gguf: tensor '%s' offset %llu is not %u-aligned", n,
                 (unsigned long long)t.offset, g_->alignment);
    GB_RETURN_IF(t.offset > f_.size() - g_->data_start, log_, GB_ERR_TRUNCATED, "gguf: tensor '%s' starts past the end of the file",
                 n);
    t.offset += g_->data_start;
    uint64_t rb;
    if (!ggml_row_bytes(t.type, t.ne[0], &rb)) {
      GB_RETURN_IF(ggml_type_supported(t.type), log_, GB_ERR_CORRUPT,
                   "gguf: tensor '%s' (%s) has %llu columns, not a multiple of its block of %u", n, ggml_type_name(t.type),
                   (unsigned long long)t.ne[0], ggml_block(t.type).block);
      continue;  // a type we do not read: checked when the tensor is needed
    }
    const uint64_t rows = t.ne[1] * t.ne[2] * t.ne[3];  // bounded by the element limit above
    GB_RETURN_IF(!mul_ok(rows, rb, &t.nbytes), log_, GB_ERR_CORRUPT, "gguf: tensor '%s' is too large", n);
    GB_RETURN_IF(!in_range(t.offset, t.nbytes, f_.size()), log_, GB_ERR_TRUNCATED,
                 "gguf: tensor '%s' (%llu bytes at %llu) runs past the end of the file", n, (unsigned long long)t.nbytes,
                 (unsigned long long)t.offset);
  }
  // Overlapping tensors would let a small file stand for a huge model (every
  // layer pointing at the same bytes); real files never share data.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const GgufTensor &t : g_->tensors)
    if (t.nbytes) ranges.emplace_back(t.offset, t.nbytes);
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); i++)
    GB_RETURN_IF(ranges[i - 1].first + ranges[i - 1].second > ranges[i].first, log_, GB_ERR_CORRUPT,
                 "gguf: tensor data ranges overlap at offset %llu", (unsigned long long)ranges[i].first);
  return GB_OK;
}

}  // namespace

gb_status gguf_parse(InputFile &f, const Logger &log, GgufFile *out) {
  *out = GgufFile();
  Parser p(f, log, out);
  return p.run();
}

}  // namespace gb
