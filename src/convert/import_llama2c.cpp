// import_llama2c.cpp — llama2.c "legacy v0" checkpoints and tokenizer.bin
// files to .gbx. The checkpoint has no magic and no per-tensor sizes, so the
// header is checked field by field and the file size must match the size the
// header implies exactly; weights are then streamed by offset.
#include <string.h>

#include "bytes.h"
#include "convert.h"
#include "convert_util.h"
#include "gbx_writer.h"

namespace gb {
namespace {

// Element offsets (in floats, after the 28-byte header) of llama2.c's arrays.
struct Llama2cLayout {
  uint64_t embd, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_real, freq_imag, wcls, end;
};

class Llama2cSource : public TensorSource {
 public:
  Llama2cSource(InputFile &f, const GbxModelDesc &d, const Llama2cLayout &l, const Logger &log)
      : f_(f), d_(d), l_(l), log_(log) {}

  gb_status read_f32(uint32_t kind, uint32_t layer, uint32_t row0, uint32_t n_rows, float *out) override {
    uint32_t rows, cols;
    tensor_shape(d_, kind, &rows, &cols);
    uint64_t base = 0;
    switch (kind) {
      case kTokEmbd: base = l_.embd; break;
      case kClassifier: base = l_.wcls; break;
      case kAttnNorm: base = l_.rms_att; break;
      case kFfnNorm: base = l_.rms_ffn; break;
      case kOutNorm: base = l_.rms_final; break;
      case kWq: base = l_.wq; break;
      case kWk: base = l_.wk; break;
      case kWv: base = l_.wv; break;
      case kWo: base = l_.wo; break;
      case kW1: base = l_.w1; break;
      case kW2: base = l_.w2; break;
      case kW3: base = l_.w3; break;
      default: return fail(log_, GB_ERR_INTERNAL, "llama2c: no tensor kind %u", kind);
    }
    // Per-layer arrays are stacked (n_layers, rows, cols); the size check at
    // open guarantees every such range lies inside the file.
    const uint64_t first = base + (uint64_t)layer * rows * cols + (uint64_t)row0 * cols;
    const size_t bytes = (size_t)n_rows * cols * 4;
    GB_RETURN_IF(!f_.read_at(28 + first * 4, out, bytes), log_, GB_ERR_IO, "llama2c: cannot read %s (layer %u) from '%s'",
                 tensor_kind_name(kind), layer, f_.path());
    uint8_t *p = reinterpret_cast<uint8_t *>(out);
    for (size_t i = 0; i < (size_t)n_rows * cols; i++) out[i] = ld_f32(p + 4 * i);  // no-op on little-endian hosts
    return GB_OK;
  }

 private:
  InputFile &f_;
  const GbxModelDesc &d_;
  Llama2cLayout l_;
  Logger log_;
};

// The header's model and the arrays' layout; file_size: the checkpoint's bytes.
gb_status parse_header_bytes(const uint8_t *h, uint64_t file_size, const char *path, const Logger &log, GbxModelDesc *d,
                             Llama2cLayout *l) {
  GB_RETURN_IF(file_size < 28, log, GB_ERR_TRUNCATED, "llama2c: '%s' is %llu bytes, too small for the 28-byte header", path,
               (unsigned long long)file_size);
  int32_t v[7];
  for (int i = 0; i < 7; i++) v[i] = ld_i32(h + 4 * i);
  static const char *const names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; i++)
    GB_RETURN_IF(i == 5 ? v[i] == 0 : v[i] <= 0, log, GB_ERR_CORRUPT, "llama2c: header field %s = %d invalid", names[i], v[i]);
  const int64_t vocab = v[5] < 0 ? -(int64_t)v[5] : v[5];
  GB_RETURN_IF(vocab < 3 || vocab > kMaxVocab, log, GB_ERR_CORRUPT, "llama2c: vocab_size %lld out of range [3, %u]",
               (long long)vocab, kMaxVocab);
  GB_RETURN_IF(v[0] % v[3] != 0, log, GB_ERR_CORRUPT, "llama2c: dim %d is not a multiple of n_heads %d", v[0], v[3]);
  d->dim = (uint32_t)v[0];
  d->hidden_dim = (uint32_t)v[1];
  d->n_layers = (uint32_t)v[2];
  d->n_heads = (uint32_t)v[3];
  d->n_kv_heads = (uint32_t)v[4];
  d->head_dim = d->dim / d->n_heads;
  d->vocab_size = (uint32_t)vocab;
  d->seq_len = (uint32_t)v[6];
  d->rope_type = GB_ROPE_ADJACENT;
  d->rope_dim = d->head_dim;
  d->rope_theta = 10000.0f;
  d->norm_eps = 1e-5f;
  d->bos_id = 1;
  d->eos_id = 2;
  d->unk_id = 0;
  d->pad_id = -1;
  d->shared_classifier = v[5] > 0 ? 1 : 0;
  d->source = kSourceLlama2c;
  d->name = file_stem(path);
  GB_TRY(check_model_desc(*d, log, GB_ERR_CORRUPT, "llama2c"));

  // Every factor is bounded by check_model_desc, so these products fit in u64.
  const uint64_t dim = d->dim, hid = d->hidden_dim, L = d->n_layers, V = d->vocab_size;
  const uint64_t kv = (uint64_t)d->n_kv_heads * d->head_dim;
  uint64_t at = 0;
  auto take = [&](uint64_t n) {
    const uint64_t o = at;
    at += n;
    return o;
  };
  l->embd = take(V * dim);
  l->rms_att = take(L * dim);
  l->wq = take(L * dim * dim);
  l->wk = take(L * kv * dim);
  l->wv = take(L * kv * dim);
  l->wo = take(L * dim * dim);
  l->rms_ffn = take(L * dim);
  l->w1 = take(L * hid * dim);
  l->w2 = take(L * dim * hid);
  l->w3 = take(L * hid * dim);
  l->rms_final = take(dim);
  l->freq_real = take((uint64_t)d->seq_len * d->head_dim / 2);
  l->freq_imag = take((uint64_t)d->seq_len * d->head_dim / 2);
  l->wcls = d->shared_classifier ? l->embd : take(V * dim);
  l->end = at;
  const uint64_t want = 28 + at * 4;
  GB_RETURN_IF(file_size < want, log, GB_ERR_TRUNCATED, "llama2c: '%s' is %llu bytes, its header needs %llu", path,
               (unsigned long long)file_size, (unsigned long long)want);
  GB_RETURN_IF(file_size > want, log, GB_ERR_CORRUPT, "llama2c: '%s' has %llu bytes past the last tensor", path,
               (unsigned long long)(file_size - want));
  return GB_OK;
}

gb_status parse_header(InputFile &f, const Logger &log, GbxModelDesc *d, Llama2cLayout *l) {
  uint8_t h[28];
  GB_RETURN_IF(f.size() < 28, log, GB_ERR_TRUNCATED, "llama2c: '%s' is %llu bytes, too small for the 28-byte header", f.path(),
               (unsigned long long)f.size());
  GB_RETURN_IF(!f.read_at(0, h, 28), log, GB_ERR_IO, "llama2c: cannot read '%s'", f.path());
  return parse_header_bytes(h, f.size(), f.path(), log, d, l);
}

gb_status cursor_error(const Cursor &c, const Logger &log, const char *path, const char *what) {
  if (c.io_error()) return fail(log, GB_ERR_IO, "tokenizer: cannot read '%s'", path);
  return fail(log, GB_ERR_TRUNCATED, "tokenizer: '%s' ends inside %s", path, what);
}

}  // namespace

// tokenizer.bin: i32 max_token_length, then per token f32 score, i32 len,
// len bytes. The file has no count: it must hold exactly n_vocab tokens.
gb_status parse_llama2c_header(const uint8_t *h, uint64_t file_size, const char *name, const Logger &log, GbxModelDesc *d) {
  Llama2cLayout l{};
  return parse_header_bytes(h, file_size, name ? name : "", log, d, &l);
}

gb_status read_llama2c_tokenizer(const char *path, uint32_t n_vocab, const Logger &log, GbxVocab *v) {
  InputFile f;
  GB_TRY(f.open(path, log, "tokenizer"));
  return read_llama2c_tokenizer(f, n_vocab, log, v);
}

gb_status read_llama2c_tokenizer(InputFile &f, uint32_t n_vocab, const Logger &log, GbxVocab *v) {
  const char *path = f.path();
  Cursor c(f);
  uint32_t max_len_u;
  if (!c.u32(&max_len_u)) return cursor_error(c, log, path, "the header");
  const int32_t max_len = (int32_t)max_len_u;
  GB_RETURN_IF(max_len < 0, log, GB_ERR_CORRUPT, "tokenizer: '%s' max_token_length %d is negative", path, max_len);
  v->pieces.clear();
  v->scores.clear();
  v->types.clear();
  char piece[kMaxPieceBytes];
  for (uint32_t i = 0; i < n_vocab; i++) {
    GB_RETURN_IF(c.remaining() == 0, log, GB_ERR_SHAPE_MISMATCH, "tokenizer: '%s' has %u tokens, the checkpoint %u", path, i,
                 n_vocab);
    uint8_t e[8];
    if (!c.read(e, 8)) return cursor_error(c, log, path, "a token header");
    const float score = ld_f32(e);
    const int32_t len = ld_i32(e + 4);
    GB_RETURN_IF(len < 0 || len > max_len, log, GB_ERR_CORRUPT, "tokenizer: token %u length %d outside [0, max_token_length %d]",
                 i, len, max_len);
    GB_RETURN_IF(len > (int32_t)kMaxPieceBytes, log, GB_ERR_UNSUPPORTED_TYPE,
                 "tokenizer: token %u is %d bytes long (the format allows %u)", i, len, kMaxPieceBytes);
    if (!c.read(piece, (size_t)len)) return cursor_error(c, log, path, "a token's bytes");
    v->pieces.emplace_back(piece, (size_t)len);
    v->scores.push_back(score);
    uint8_t type = kTokNormal;
    if (i == 0) type = kTokUnknown;
    else if (i == 1 || i == 2) type = kTokControl;
    else if (byte_piece_value(v->pieces.back()) >= 0) type = kTokByte;
    v->types.push_back(type);
  }
  GB_RETURN_IF(c.remaining() >= 8, log, GB_ERR_SHAPE_MISMATCH, "tokenizer: '%s' has more than the checkpoint's %u tokens", path,
               n_vocab);
  GB_RETURN_IF(c.remaining() > 0, log, GB_ERR_CORRUPT, "tokenizer: '%s' has %llu stray bytes at the end", path,
               (unsigned long long)c.remaining());
  return GB_OK;
}

gb_status convert_llama2c(const char *checkpoint_path, const char *tokenizer_path, const char *out_path,
                          const ConvertOptions &opt) {
  const Logger &log = opt.log;
  GB_TRY(check_options(opt, "llama2c"));
  GB_RETURN_IF(!checkpoint_path || !tokenizer_path || !out_path, log, GB_ERR_NULL_POINTER,
               "llama2c: checkpoint, tokenizer and output paths are required");
  InputFile f;
  GB_TRY(f.open(checkpoint_path, log, "checkpoint"));
  GbxModelDesc d;
  Llama2cLayout l{};
  GB_TRY(parse_header(f, log, &d, &l));
  GbxVocab v;
  GB_TRY(read_llama2c_tokenizer(tokenizer_path, d.vocab_size, log, &v));
  GB_TRY(check_vocab(v, d, log, "tokenizer"));
  ConvertOptions o = opt;
  if (o.embd_format < 0) o.embd_format = kFmtF32;  // every llama2.c tensor is f32
  Llama2cSource src(f, d, l, log);
  return write_gbx(out_path, d, v, src, o);
}

}  // namespace gb
