// import_gguf.cpp — GGUF models of the architectures of src/models/ to .gbx:
// hyper-parameters (the architecture table's readers) and the vocabulary
// from the metadata, tensors by their llama.cpp names.
// Every GGUF type but BF16 is one of our weight formats byte for byte (Q4_0
// and Q8_0 are our q4 / q8; the others are kept as they are), so a quantized
// file's tensors pass unchanged into the tier of its own formats; any other
// tier is made from the values decoded to f32 (ggml_types.h: every common
// GGUF type, exactly as ggml decodes it).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <initializer_list>

#include "bytes.h"
#include "convert.h"
#include "convert_util.h"
#include "gbx_writer.h"
#include "gguf_parse.h"
#include "model.h"
#include "models/arch.h"
#include "quant.h"
#include "tok/tokdata.h"
#include "tokdata_gguf.h"

namespace gb {
namespace {

class GgufSource : public TensorSource {
 public:
  GgufSource(InputFile &f, const Logger &log) : f_(f), log_(log) {}

  // (kind, layer) -> tensor; layer 0 for global tensors. row0: where the
  // tensor's rows begin in a fused GGUF tensor (attn_qkv, a fused ffn_up),
  // whose row ranges are read in place.
  void bind(uint32_t kind, uint32_t layer, const GgufTensor *t, uint32_t row0 = 0) {
    map_[slot(kind, layer)] = t;
    row0_[slot(kind, layer)] = row0;
  }
  void resize(uint32_t n_layers) {
    map_.assign((size_t)(kTensorKindMax + 1) * n_layers, nullptr);
    row0_.assign(map_.size(), 0);
  }

  // Linear RoPE scaling from the metadata becomes frequency factors (every
  // pair's rotation divided by the same factor: positions divided by it).
  void set_linear_rope_factor(float f, uint32_t n_pairs) {
    linear_factor_ = f;
    n_pairs_ = n_pairs;
  }

  gb_status read_f32(uint32_t kind, uint32_t layer, uint32_t row0, uint32_t n_rows, float *out) override {
    const GgufTensor *t = map_[slot(kind, layer)];
    if (!t && kind == kRopeFreqs && linear_factor_ > 0.0f) {
      for (uint32_t i = 0; i < n_pairs_; i++) out[i] = linear_factor_;
      return GB_OK;
    }
    const uint64_t cols = t->ne[0];
    uint64_t rb = 0;
    ggml_row_bytes(t->type, cols, &rb);
    raw_.resize((size_t)(rb * n_rows));
    GB_TRY(read_rows(t, row0_[slot(kind, layer)] + row0, n_rows, rb, raw_.data()));
    for (uint32_t r = 0; r < n_rows; r++)
      ggml_dequantize_row(t->type, raw_.data() + (size_t)r * rb, out + (size_t)r * cols, (size_t)cols);
    return GB_OK;
  }

  // Every GGUF type but BF16 is one of our formats byte for byte (the
  // format table's GGUF type ids); kFmtCount for BF16.
  uint32_t stored_format(uint32_t kind, uint32_t layer) const override {
    const GgufTensor *t = map_[slot(kind, layer)];
    if (!t) return kFmtCount;  // linear RoPE scaling: made up, not stored
    static_assert((uint32_t)GB_FMT_NONE == (uint32_t)kFmtCount, "format_of_ggml's none");
    return format_of_ggml(t->type);
  }

  gb_status read_raw(uint32_t kind, uint32_t layer, uint32_t fmt, uint32_t row0, uint32_t n_rows, uint8_t *out) override {
    const GgufTensor *t = map_[slot(kind, layer)];
    const uint64_t cols = t->ne[0], rb = row_bytes(fmt, cols);
    GB_TRY(read_rows(t, row0_[slot(kind, layer)] + row0, n_rows, rb, out));
    // The bytes are copied unchanged: decode them once to check that every
    // value (every block scale) is finite, as the float path does.
    row_.resize((size_t)cols);
    for (uint32_t r = 0; r < n_rows; r++) {
      ggml_dequantize_row(t->type, out + (size_t)r * rb, row_.data(), (size_t)cols);
      for (uint64_t c = 0; c < cols; c++)
        GB_RETURN_IF(!isfinite(row_[c]), log_, GB_ERR_CORRUPT, "gguf: tensor '%s' row %u has a non-finite value (block scale)",
                     t->name.c_str(), row0 + r);
    }
    return GB_OK;
  }

  bool is_quantized(uint32_t kind, uint32_t layer) const override {
    const GgufTensor *t = map_[slot(kind, layer)];
    return t->type != kGgmlF32 && t->type != kGgmlF16 && t->type != kGgmlBF16;
  }

 private:
  size_t slot(uint32_t kind, uint32_t layer) const { return (size_t)layer * (kTensorKindMax + 1) + kind; }
  gb_status read_rows(const GgufTensor *t, uint32_t row0, uint32_t n_rows, uint64_t rb, uint8_t *out) {
    GB_RETURN_IF(!f_.read_at(t->offset + row0 * rb, out, (size_t)(n_rows * rb)), log_, GB_ERR_IO,
                 "gguf: cannot read tensor '%s' from '%s'", t->name.c_str(), f_.path());
    return GB_OK;
  }

  InputFile &f_;
  Logger log_;
  std::vector<const GgufTensor *> map_;
  std::vector<uint32_t> row0_;
  std::vector<uint8_t> raw_;
  std::vector<float> row_;
  float linear_factor_ = 0.0f;
  uint32_t n_pairs_ = 0;
};

// The tensors of a GGUF as gb_model_open_file opens it in place (file
// layout, one tier): what the architectures from .gbx version 11 on are
// converted from, so that their tensor names and per-layer keys are read by
// the one binder that opens them (model_gguf.cpp).
class ModelSource : public TensorSource {
 public:
  explicit ModelSource(gb_model *m) : m_(m) {}

  gb_status read_f32(uint32_t kind, uint32_t layer, uint32_t row0, uint32_t n_rows, float *out) override {
    const TensorRef &t = ref(kind, layer);
    const uint64_t rb = row_bytes(t.format, t.cols);
    for (uint32_t r = 0; r < n_rows; r++)
      dequantize_row(t.format, out + (size_t)r * t.cols, t.data + (row0 + r) * rb, t.cols);
    return GB_OK;
  }
  uint32_t stored_format(uint32_t kind, uint32_t layer) const override {
    const TensorRef &t = ref(kind, layer);
    return t.data && !is_memory_only_format(t.format) ? t.format : kFmtCount;
  }
  gb_status read_raw(uint32_t kind, uint32_t layer, uint32_t fmt, uint32_t row0, uint32_t n_rows, uint8_t *out) override {
    const TensorRef &t = ref(kind, layer);
    const uint64_t rb = row_bytes(fmt, t.cols);
    memcpy(out, t.data + row0 * rb, (size_t)(n_rows * rb));
    return GB_OK;
  }
  bool is_quantized(uint32_t kind, uint32_t layer) const override {
    const uint32_t f = ref(kind, layer).format;
    return f != kFmtF32 && f != kFmtF16;
  }

 private:
  const TensorRef &ref(uint32_t kind, uint32_t layer) const {
    return *model_tensor_slot(m_, kind, layer, m_->meta.default_gear);
  }
  gb_model *m_;
};

// An unsigned integer key: absent -> def (or CORRUPT when required).
gb_status get_u32(const GgufFile &g, const char *key, bool required, uint32_t def, const Logger &log, uint32_t *out) {
  const GgufValue *v = g.find(key);
  if (!v) {
    GB_RETURN_IF(required, log, GB_ERR_CORRUPT, "gguf: required key '%s' is missing", key);
    *out = def;
    return GB_OK;
  }
  GB_RETURN_IF(!v->is_int || v->big || v->i < 0 || v->i > 0xFFFFFFFFll, log, GB_ERR_CORRUPT,
               "gguf: key '%s' is not an unsigned 32-bit integer", key);
  *out = (uint32_t)v->i;
  return GB_OK;
}

// A special token id: absent -> def when it fits the vocabulary, else -1;
// 0xFFFFFFFF / -1 -> -1 (what llama.cpp writes for "none").
gb_status get_token_id(const GgufFile &g, const char *key, int32_t def, uint32_t vocab, const Logger &log, int32_t *out) {
  const GgufValue *v = g.find(key);
  if (!v) {
    *out = def >= 0 && (uint32_t)def < vocab ? def : -1;
    return GB_OK;
  }
  GB_RETURN_IF(!v->is_int || v->big, log, GB_ERR_CORRUPT, "gguf: key '%s' is not an integer", key);
  if (v->i == -1 || v->i == 0xFFFFFFFFll) {
    *out = -1;
    return GB_OK;
  }
  GB_RETURN_IF(v->i < 0 || v->i >= (int64_t)vocab, log, GB_ERR_CORRUPT, "gguf: %s = %lld is outside the vocabulary of %u", key,
               (long long)v->i, vocab);
  *out = (int32_t)v->i;
  return GB_OK;
}

// A string key: absent -> "".
std::string get_str(const GgufFile &g, const std::string &key) {
  const GgufValue *v = g.find(key.c_str());
  return v && v->is_str ? v->s : std::string();
}

// The metadata as the architecture table's readers see it.
class Keys final : public GgufKeys {
 public:
  explicit Keys(const GgufFile &g) : g_(g) {}
  bool u32(const char *key, uint32_t *out, gb_status *st) const override {
    const GgufValue *v = g_.find(key);
    if (!v) return false;
    if (!v->is_int || v->big || v->i < 0 || v->i > 0xFFFFFFFFll) {
      *st = GB_ERR_CORRUPT;
      return false;
    }
    *out = (uint32_t)v->i;
    return true;
  }
  bool f32(const char *key, float *out, gb_status *st) const override {
    const GgufValue *v = g_.find(key);
    if (!v) return false;
    if (!v->is_float) {
      *st = GB_ERR_CORRUPT;
      return false;
    }
    *out = (float)v->f;
    return true;
  }
  bool str(const char *key, char *out, size_t cap, gb_status *st) const override {
    const GgufValue *v = g_.find(key);
    if (!v) return false;
    if (!v->is_str || v->s.size() >= cap) {
      *st = GB_ERR_CORRUPT;
      return false;
    }
    memcpy(out, v->s.c_str(), v->s.size() + 1);
    return true;
  }
  // The converter's parser keeps scalar keys only (arrays read as absent):
  // the architectures whose keys are per-layer arrays (version 11 on) are
  // converted from the model opened in place (convert_opened) instead.
  bool u32_array(const char *, uint32_t *, size_t, size_t *, gb_status *) const override { return false; }
  bool has_tensor(const char *name) const override { return g_.tensor(name) != nullptr; }

 private:
  const GgufFile &g_;
};

// The architecture (the table of src/models/) and its hyper-parameters.
gb_status read_desc(const GgufFile &g, const char *path, const Logger &log, GbxModelDesc *d, const ArchDef **arch_out,
                    float *rope_linear) {
  const GgufValue *arch = g.find("general.architecture");
  GB_RETURN_IF(!arch || !arch->is_str, log, GB_ERR_CORRUPT, "gguf: general.architecture is missing");
  const ArchDef *a = arch_by_name(arch->s.c_str());
  if (!a) {
    char names[256];
    arch_names(names, sizeof names);
    return fail(log, GB_ERR_UNSUPPORTED_TYPE, "gguf: architecture '%.64s' not supported (%s)", arch->s.c_str(), names);
  }
  GB_RETURN_IF(a->min_gbx_version > kGbxVersion, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: no .gbx version holds a %s model yet; open its GGUF directly (gearbx run -m FILE.gguf)", a->name);
  ArchHparams hp;
  GB_TRY(arch_read_hparams(*a, Keys(g), &hp, log));
  d->arch = a->id;
  d->dim = hp.dim;
  d->hidden_dim = hp.hidden_dim;
  d->n_layers = hp.n_layers;
  d->n_heads = hp.n_heads;
  d->n_kv_heads = hp.n_kv_heads;
  d->head_dim = hp.head_dim;
  d->seq_len = hp.seq_len;
  d->rope_type = hp.rope_type;
  d->rope_dim = hp.rope_dim;
  d->rope_theta = hp.rope_theta;
  d->norm_eps = hp.norm_eps;
  d->rope_orig_ctx = hp.rope_orig_ctx;
  d->rope_attn_factor = hp.rope_attn_factor;
  d->swa_window = hp.swa_window;
  d->swa_period = hp.swa_period;
  d->rope_theta_swa = hp.rope_theta_swa;
  d->logit_softcap = hp.logit_softcap;
  d->ffn_act = a->ffn_act;
  d->embed_scale = a->embed_scale_sqrt ? sqrtf((float)hp.dim) : 1.0f;
  *rope_linear = hp.rope_linear;
  d->source = kSourceGguf;
  const GgufValue *name = g.find("general.name");
  d->name = name && name->is_str && !name->s.empty() ? name->s : file_stem(path);
  *arch_out = a;
  return GB_OK;
}

gb_status read_vocab(const GgufFile &g, GbxModelDesc *d, const Logger &log, GbxVocab *v) {
  const GgufValue *model = g.find("tokenizer.ggml.model");
  GB_RETURN_IF(model && (!model->is_str || model->s != "llama"), log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: tokenizer '%.64s' not supported (only llama / SentencePiece)",
               model && model->is_str ? model->s.c_str() : "?");
  GB_RETURN_IF(!g.has_tokens, log, GB_ERR_CORRUPT, "gguf: tokenizer.ggml.tokens is missing");
  const uint32_t n = d->vocab_size;
  GB_RETURN_IF(g.tokens.size() != n, log, GB_ERR_SHAPE_MISMATCH, "gguf: %zu tokens, but token_embd has %u rows", g.tokens.size(),
               n);
  GB_RETURN_IF(g.has_scores && g.scores.size() != n, log, GB_ERR_CORRUPT, "gguf: %zu token scores for %u tokens", g.scores.size(),
               n);
  GB_RETURN_IF(g.has_types && g.token_types.size() != n, log, GB_ERR_CORRUPT, "gguf: %zu token types for %u tokens",
               g.token_types.size(), n);
  uint32_t vocab_key = n;
  const std::string vkey = get_str(g, "general.architecture") + ".vocab_size";
  GB_TRY(get_u32(g, vkey.c_str(), false, n, log, &vocab_key));
  GB_RETURN_IF(vocab_key != n, log, GB_ERR_SHAPE_MISMATCH, "gguf: %s %u, but %u tokens", vkey.c_str(), vocab_key, n);
  GB_TRY(get_token_id(g, "tokenizer.ggml.bos_token_id", 1, n, log, &d->bos_id));
  GB_TRY(get_token_id(g, "tokenizer.ggml.eos_token_id", 2, n, log, &d->eos_id));
  GB_TRY(get_token_id(g, "tokenizer.ggml.unknown_token_id", 0, n, log, &d->unk_id));
  GB_TRY(get_token_id(g, "tokenizer.ggml.padding_token_id", -1, n, log, &d->pad_id));
  v->pieces.resize(n);
  v->scores.assign(n, 0.0f);
  v->types.assign(n, kTokNormal);
  for (uint32_t i = 0; i < n; i++) {
    // SentencePiece marks spaces with U+2581; the format stores ' '.
    const std::string &src = g.tokens[i];
    std::string &p = v->pieces[i];
    p.reserve(src.size());
    for (size_t k = 0; k < src.size(); k++) {
      if (k + 2 < src.size() && (uint8_t)src[k] == 0xE2 && (uint8_t)src[k + 1] == 0x96 && (uint8_t)src[k + 2] == 0x81) {
        p.push_back(' ');
        k += 2;
      } else {
        p.push_back(src[k]);
      }
    }
    if (g.has_scores) v->scores[i] = g.scores[i];
    if (g.has_types) {
      const int32_t t = g.token_types[i];
      GB_RETURN_IF(t < 1 || t > 6, log, GB_ERR_CORRUPT, "gguf: token %u has type %d (1..6 known)", i, t);
      v->types[i] = (uint8_t)t;  // GGUF's 1..6 are format.h's TokenType values
    } else if ((int32_t)i == d->unk_id) {
      v->types[i] = kTokUnknown;
    } else if ((int32_t)i == d->bos_id || (int32_t)i == d->eos_id) {
      v->types[i] = kTokControl;
    } else if (byte_piece_value(p) >= 0) {
      v->types[i] = kTokByte;
    }
  }
  return GB_OK;
}

// Find and check one tensor: present, a supported type, the expected shape:
// kind's columns, and rows rows (those of every kind it holds, one after the
// other).
gb_status need_tensor(const GgufFile &g, const std::string &name, const GbxModelDesc &d, uint32_t kind, uint32_t rows,
                      const Logger &log, const GgufTensor **out) {
  const GgufTensor *t = g.tensor(name);
  GB_RETURN_IF(!t, log, GB_ERR_MISSING_TENSOR, "gguf: tensor '%s' is missing", name.c_str());
  uint64_t rb;
  GB_RETURN_IF(!ggml_type_supported(t->type), log, GB_ERR_UNSUPPORTED_TYPE, "gguf: tensor '%s' has type %s (%u); supported: %s",
               name.c_str(), ggml_type_name(t->type), t->type, ggml_supported_type_names().c_str());
  GB_RETURN_IF(!ggml_row_bytes(t->type, t->ne[0], &rb), log, GB_ERR_CORRUPT, "gguf: tensor '%s' has bad row size", name.c_str());
  uint32_t kind_rows, cols;
  tensor_shape(d, kind, &kind_rows, &cols);
  GB_RETURN_IF(t->ne[0] != cols || t->ne[1] * t->ne[2] * t->ne[3] != rows || t->ne[2] != 1 || t->ne[3] != 1, log,
               GB_ERR_SHAPE_MISMATCH, "gguf: tensor '%s' is [%llu, %llu, %llu, %llu], expected [%u, %u]", name.c_str(),
               (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
               (unsigned long long)t->ne[3], cols, rows);
  *out = t;
  return GB_OK;
}

// A GGUF of an architecture from version 11 on, through the model opened in
// place: its META fields from the model's, its tokenizer as convert_gguf
// keeps one, its tensors read from the mapping.
gb_status convert_opened(const GgufFile &g, const char *gguf_path, const char *out_path, const ConvertOptions &opt) {
  const Logger &log = opt.log;
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.log = log.fn;
  mo.log_user = log.user;
  mo.log_level = log.level;
  mo.load = GB_MODEL_LOAD_MAP;
  mo.gguf_layout = GB_GGUF_LAYOUT_FILE;  // the file's bytes, row-major, as the writer copies them
  gb_model *m = nullptr;
  GB_TRY(gb_model_open_file(gguf_path, &mo, &m));
  const Meta &mt = m->meta;
  GbxModelDesc d;
  d.arch = mt.arch;
  d.dim = mt.dim;
  d.hidden_dim = mt.hidden_dim;
  d.n_layers = mt.n_layers;
  d.n_heads = mt.n_heads;
  d.n_kv_heads = mt.n_kv_heads;
  d.head_dim = mt.head_dim;
  d.vocab_size = mt.vocab_size;
  d.seq_len = mt.seq_len;
  d.rope_type = mt.rope_type;
  d.rope_dim = mt.rope_dim;
  d.rope_theta = mt.rope_theta;
  d.norm_eps = mt.norm_eps;
  d.bos_id = mt.bos;
  d.eos_id = mt.eos;
  d.unk_id = mt.unk;
  d.pad_id = mt.pad;
  d.shared_classifier = mt.shared_classifier;
  d.source = kSourceGguf;
  d.nope_period = mt.nope_period;
  d.rope_orig_ctx = mt.rope_orig_ctx;
  d.rope_attn_factor = mt.rope_attn_factor;
  d.swa_window = mt.swa_window;
  d.swa_period = mt.swa_period;
  d.rope_theta_swa = mt.rope_theta_swa;
  d.embed_scale = mt.embed_scale;
  d.logit_softcap = mt.logit_softcap;
  d.ffn_act = mt.ffn_act;
  d.conv_kernel = mt.conv_kernel;
  d.conv_channels = mt.conv_channels;
  d.gdn_state = mt.gdn_state;
  d.gdn_k_heads = mt.gdn_k_heads;
  d.gdn_v_heads = mt.gdn_v_heads;
  d.attn_gate = mt.attn_gate;
  if (mt.layer_kind) d.layer_kind.assign(mt.layer_kind, mt.layer_kind + mt.n_layers);
  uint32_t first_attn = 0;
  while (first_attn + 1 < mt.n_layers && mt.conv_layer(first_attn)) first_attn++;
  d.qkv_bias = m->bias[0][first_attn].data != nullptr;
  d.qk_norm = m->qk_norm[0][first_attn].data != nullptr;
  d.post_norms = m->post_norm[0][0].data != nullptr;
  d.rope_freqs = m->rope_freqs.data != nullptr;
  d.rope_freqs_long = m->rope_freqs_long.data != nullptr;
  const GgufValue *name = g.find("general.name");
  d.name = name && name->is_str && !name->s.empty() ? name->s : file_stem(gguf_path);
  GbxVocab v;
  gb_status st = tokdata_from_gguf(g, log, &v.tokenizer);
  TokView tv;
  if (st == GB_OK) st = tokdata_view(v.tokenizer.data(), v.tokenizer.size(), log, &tv);
  if (st == GB_OK && tv.kind == kTokKindSpm) st = read_vocab(g, &d, log, &v);
  if (st == GB_OK && tv.kind == kTokKindSpm) st = check_vocab(v, d, log, "gguf");
  if (st == GB_OK) st = check_model_desc(d, log, GB_ERR_CORRUPT, "gguf");
  if (st == GB_OK) {
    ModelSource src(m);
    ConvertOptions o = opt;
    // An all-f32 file keeps an f32 embedding (as convert_gguf does).
    bool all_f32 = m->embd.format == kFmtF32;
    const uint32_t tier = mt.default_gear;
    for (size_t i = 0; all_f32 && i < (size_t)mt.n_layers * kMatsPerLayer; i++)
      all_f32 = !m->mats[tier][i].data || m->mats[tier][i].format == kFmtF32;
    if (o.embd_format < 0 && all_f32) o.embd_format = kFmtF32;
    st = write_gbx(out_path, d, v, src, o);
  }
  gb_model_close(m);
  return st;
}

}  // namespace

gb_status convert_gguf(const char *gguf_path, const char *out_path, const ConvertOptions &opt) {
  const Logger &log = opt.log;
  GB_TRY(check_options(opt, "gguf"));
  GB_RETURN_IF(!gguf_path || !out_path, log, GB_ERR_NULL_POINTER, "gguf: input and output paths are required");
  InputFile f;
  GB_TRY(f.open(gguf_path, log, "GGUF file"));
  GgufFile g;
  GB_TRY(gguf_parse(f, log, &g));
  const GgufValue *arch_name = g.find("general.architecture");
  const ArchDef *known = arch_name && arch_name->is_str ? arch_by_name(arch_name->s.c_str()) : nullptr;
  if (known && known->min_gbx_version >= kGbxRecurrentVersion && known->min_gbx_version <= kGbxVersion)
    return convert_opened(g, gguf_path, out_path, opt);
  GbxModelDesc d;
  float rope_linear = 0.0f;
  const ArchDef *arch = nullptr;
  GB_TRY(read_desc(g, gguf_path, log, &d, &arch, &rope_linear));

  // The vocabulary size comes from the embedding's rows.
  const GgufTensor *embd = g.tensor("token_embd.weight");
  GB_RETURN_IF(!embd, log, GB_ERR_MISSING_TENSOR, "gguf: tensor 'token_embd.weight' is missing");
  GB_RETURN_IF(embd->ne[1] == 0 || embd->ne[1] > kMaxVocab, log, GB_ERR_CORRUPT, "gguf: token_embd.weight has %llu rows",
               (unsigned long long)embd->ne[1]);
  d.vocab_size = (uint32_t)embd->ne[1];
  GB_TRY(check_model_desc(d, log, GB_ERR_CORRUPT, "gguf"));
  // The tokenizer travels as a TOKENIZER section (what gb_tokenize uses);
  // a SentencePiece vocabulary is also written as VOCAB, as before.
  GbxVocab v;
  GB_TRY(tokdata_from_gguf(g, log, &v.tokenizer));
  TokView tv;
  GB_TRY(tokdata_view(v.tokenizer.data(), v.tokenizer.size(), log, &tv));
  GB_RETURN_IF(tv.n_tokens != d.vocab_size, log, GB_ERR_SHAPE_MISMATCH, "gguf: %u tokens, but token_embd has %u rows",
               tv.n_tokens, d.vocab_size);
  if (tv.kind == kTokKindSpm) {
    GB_TRY(read_vocab(g, &d, log, &v));
    GB_TRY(check_vocab(v, d, log, "gguf"));
  } else {
    d.bos_id = tv.special[kTokBos];
    d.eos_id = tv.special[kTokEos];
    d.unk_id = tv.special[kTokUnk];
    d.pad_id = tv.special[kTokPad];
  }

  GgufSource src(f, log);
  src.resize(d.n_layers);
  bool all_f32 = true;
  std::vector<bool> used(g.tensors.size(), false);
  // Binds a tensor to the kinds it holds: one, or (a fused tensor) several
  // whose row ranges follow one another, read in place (no tensor is split
  // into copies).
  auto bind_fused = [&](const std::string &name, std::initializer_list<uint32_t> kinds, uint32_t layer) -> gb_status {
    uint32_t rows = 0, r, c;
    for (uint32_t k : kinds) {
      tensor_shape(d, k, &r, &c);
      rows += r;
    }
    const GgufTensor *t = nullptr;
    GB_TRY(need_tensor(g, name, d, *kinds.begin(), rows, log, &t));
    uint32_t row0 = 0;
    for (uint32_t k : kinds) {
      src.bind(k, layer, t, row0);
      tensor_shape(d, k, &r, &c);
      row0 += r;
    }
    used[(size_t)(t - g.tensors.data())] = true;
    all_f32 = all_f32 && t->type == kGgmlF32;
    return GB_OK;
  };
  auto bind = [&](const std::string &name, uint32_t kind, uint32_t layer) { return bind_fused(name, {kind}, layer); };
  GB_TRY(bind("token_embd.weight", kTokEmbd, 0));
  GB_TRY(bind("output_norm.weight", kOutNorm, 0));
  if (g.tensor("output.weight")) {
    GB_TRY(bind("output.weight", kClassifier, 0));
  } else {
    GB_TRY(bind("token_embd.weight", kClassifier, 0));
    d.shared_classifier = 1;
  }
  // Fused projections, as the architecture's row allows them: attn_qkv
  // instead of attn_q/k/v; ffn_up holding the gate rows, then the up rows,
  // instead of ffn_gate + ffn_up.
  const bool fused_qkv = arch->fused_qkv != kNever && g.tensor("blk.0.attn_qkv.weight") != nullptr;
  GB_RETURN_IF(arch->fused_qkv == kMust && !fused_qkv, log, GB_ERR_MISSING_TENSOR, "gguf: %s model without blk.0.attn_qkv.weight",
               arch->name);
  const bool fused_gate_up = arch->fused_gate_up == kMust || (arch->fused_gate_up == kMay && !g.tensor("blk.0.ffn_gate.weight"));
  static const struct {
    const char *suffix;
    uint32_t kind;
  } kLayer[] = {{"attn_norm", kAttnNorm}, {"attn_q", kWq},   {"attn_k", kWk},   {"attn_v", kWv}, {"attn_output", kWo},
                {"ffn_norm", kFfnNorm},   {"ffn_gate", kW1}, {"ffn_down", kW2}, {"ffn_up", kW3}};
  for (uint32_t l = 0; l < d.n_layers; l++) {
    char name[64];
    for (const auto &e : kLayer) {
      if (fused_qkv && (e.kind == kWq || e.kind == kWk || e.kind == kWv)) continue;
      if (fused_gate_up && (e.kind == kW1 || e.kind == kW3)) continue;
      snprintf(name, sizeof name, "blk.%u.%s.weight", l, e.suffix);
      GB_TRY(bind(name, e.kind, l));
    }
    if (fused_qkv) {
      snprintf(name, sizeof name, "blk.%u.attn_qkv.weight", l);
      GB_TRY(bind_fused(name, {kWq, kWk, kWv}, l));
    }
    if (fused_gate_up) {
      snprintf(name, sizeof name, "blk.%u.ffn_up.weight", l);
      GB_TRY(bind_fused(name, {kW1, kW3}, l));
    }
  }
  // Optional tensors, as the architecture's row allows them: Q/K/V biases
  // (every layer or none), RoPE frequency factors (Llama 3.1 long-context
  // scaling).
  d.qkv_bias = arch->qkv_bias != kNever && g.tensor("blk.0.attn_q.bias") != nullptr;
  GB_RETURN_IF(arch->qkv_bias == kMust && !d.qkv_bias, log, GB_ERR_MISSING_TENSOR, "gguf: %s model without blk.0.attn_q.bias",
               arch->name);
  if (d.qkv_bias) {
    static const struct {
      const char *suffix;
      uint32_t kind;
    } kBias[] = {{"attn_q", kBiasQ}, {"attn_k", kBiasK}, {"attn_v", kBiasV}};
    for (uint32_t l = 0; l < d.n_layers; l++)
      for (const auto &e : kBias) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.%s.bias", l, e.suffix);
        GB_TRY(bind(name, e.kind, l));
      }
  }
  // Pairs of per-layer norms, every layer, both, or none, as the row says:
  // whether the file has them (the first of layer 0 decides).
  auto bind_norm_pair = [&](ArchNeed need, const char *first, uint32_t k1, const char *second, uint32_t k2,
                            bool *has) -> gb_status {
    char name[64];
    snprintf(name, sizeof name, "blk.0.%s.weight", first);
    *has = need != kNever && g.tensor(name) != nullptr;
    GB_RETURN_IF(need == kMust && !*has, log, GB_ERR_MISSING_TENSOR, "gguf: %s model without %s", arch->name, name);
    for (uint32_t l = 0; *has && l < d.n_layers; l++) {
      snprintf(name, sizeof name, "blk.%u.%s.weight", l, first);
      GB_TRY(bind(name, k1, l));
      snprintf(name, sizeof name, "blk.%u.%s.weight", l, second);
      GB_TRY(bind(name, k2, l));
    }
    return GB_OK;
  };
  // Per-head Q/K norms; post-attention and post-FFN norms.
  GB_TRY(bind_norm_pair(arch->qk_norm, "attn_q_norm", kQNorm, "attn_k_norm", kKNorm, &d.qk_norm));
  GB_TRY(bind_norm_pair(arch->post_norms, "post_attention_norm", kPostAttnNorm, "post_ffw_norm", kPostFfnNorm, &d.post_norms));
  d.nope_period = arch->nope_period;
  // LongRoPE: short factors (the frequency factors of sessions up to the
  // trained context) and long ones, both or neither.
  const bool longrope =
      arch->rope_freqs != kNever && (g.tensor("rope_factors_long.weight") || g.tensor("rope_factors_short.weight"));
  if (longrope) {
    GB_RETURN_IF(rope_linear > 0.0f || g.tensor("rope_freqs.weight"), log, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: LongRoPE factors together with rope_freqs.weight or linear rope scaling (not supported together)");
    GB_TRY(bind("rope_factors_short.weight", kRopeFreqs, 0));
    GB_TRY(bind("rope_factors_long.weight", kRopeFreqsLong, 0));
    d.rope_freqs = d.rope_freqs_long = true;
  } else if (arch->rope_freqs != kNever && g.tensor("rope_freqs.weight")) {
    GB_RETURN_IF(rope_linear > 0.0f, log, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: both rope_freqs.weight and linear rope scaling (not supported together)");
    GB_TRY(bind("rope_freqs.weight", kRopeFreqs, 0));
    d.rope_freqs = true;
  } else if (rope_linear > 0.0f) {
    src.set_linear_rope_factor(rope_linear, d.rope_dim / 2);
    d.rope_freqs = true;
  }
  size_t n_unused = 0, first_unused = 0;
  for (size_t i = 0; i < used.size(); i++)
    if (!used[i] && n_unused++ == 0) first_unused = i;
  if (n_unused)
    log.log(GB_LOG_WARN, "gguf: ignoring %zu tensor(s) a %s model does not use (first: '%.64s')", n_unused, arch->name,
            g.tensors[first_unused].name.c_str());
  ConvertOptions o = opt;
  // All-f32 files keep an f32 embedding; a quantized one stays as stored
  // (the writer's default), anything else becomes f16.
  if (o.embd_format < 0 && all_f32) o.embd_format = kFmtF32;
  return write_gbx(out_path, d, v, src, o);
}

gb_status gguf_tokenizer(const char *gguf_path, const Logger &log, std::vector<uint8_t> *image) {
  GB_RETURN_IF(!gguf_path, log, GB_ERR_NULL_POINTER, "gguf: no input path");
  InputFile f;
  GB_TRY(f.open(gguf_path, log, "GGUF file"));
  GgufFile g;
  GB_TRY(gguf_parse(f, log, &g));
  return tokdata_from_gguf(g, log, image);
}

}  // namespace gb
