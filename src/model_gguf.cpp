// model_gguf.cpp — a GGUF file opened as a model in place: no conversion,
// no copy of any weight. The hyper-parameters come from the architecture
// table's readers over the file's keys, the tokenizer image is built from
// its tokenizer.* keys into the model's memory, and every tensor view points
// into the file's own bytes (row-major, its own block formats; a fused
// attn_qkv or gate+up tensor is viewed as row ranges).
//
// The file's quantization is the model's one tier, in the gear slot nearest
// its bits per weight (as `gearbx convert` would place it), and its default
// gear. Validation follows a .gbx's: every count, offset, shape and type is
// checked before it is used; what a .gbx's section CRCs give is given here
// by a scan of every stored scale and float (GB_VERIFY_ALL, or AUTO up to
// verify_auto_limit bytes), and the metadata's CRC identifies the model in
// saved states.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bytes.h"
#include "crc32.h"
#include "f16.h"
#include "gguf_view.h"
#include "krows16.h"
#include "model.h"
#include "models/arch.h"
#include "quant.h"
#include "tok/tokdata.h"
#include "tok/tokdata_build.h"

namespace gb {
namespace {

// The metadata as the architecture table's readers see it.
class ViewKeys final : public GgufKeys {
 public:
  explicit ViewKeys(const GgufView &g) : g_(g) {}
  bool u32(const char *key, uint32_t *out, gb_status *st) const override {
    GgufScalar v;
    if (!g_.value(key, &v)) return absent_or_array(key, st);
    if (!v.is_int || v.big || v.i < 0 || v.i > 0xFFFFFFFFll) {
      *st = GB_ERR_CORRUPT;
      return false;
    }
    *out = (uint32_t)v.i;
    return true;
  }
  bool f32(const char *key, float *out, gb_status *st) const override {
    GgufScalar v;
    if (!g_.value(key, &v)) return absent_or_array(key, st);
    if (!v.is_float) {
      *st = GB_ERR_CORRUPT;
      return false;
    }
    *out = (float)v.f;
    return true;
  }
  bool str(const char *key, char *out, size_t cap, gb_status *st) const override {
    GgufScalar v;
    if (!g_.value(key, &v)) return absent_or_array(key, st);
    if (!v.is_str || v.len >= cap) {
      *st = GB_ERR_CORRUPT;
      return false;
    }
    memcpy(out, v.s, (size_t)v.len);
    out[v.len] = 0;
    return true;
  }
  bool u32_array(const char *key, uint32_t *out, size_t cap, size_t *n, gb_status *st) const override {
    GgufArray a;
    if (!g_.array(key, &a)) {
      GgufScalar v;
      if (g_.value(key, &v) && !v.is_int) *st = GB_ERR_CORRUPT;
      return false;
    }
    const uint64_t w = a.elem == kGgufU8 || a.elem == kGgufI8 || a.elem == kGgufBool ? 1
                       : a.elem == kGgufU16 || a.elem == kGgufI16 ? 2
                       : a.elem == kGgufU32 || a.elem == kGgufI32 ? 4
                       : a.elem == kGgufU64 || a.elem == kGgufI64 ? 8
                                                                  : 0;
    if (!w) {
      *st = GB_ERR_CORRUPT;
      return false;
    }
    *n = (size_t)a.count;
    // The view was validated: the array's elements lie inside the file.
    for (uint64_t i = 0; i < a.count && i < cap; i++) {
      const uint8_t *e = g_.base + a.off + i * w;
      const bool sgn = a.elem == kGgufI8 || a.elem == kGgufI16 || a.elem == kGgufI32 || a.elem == kGgufI64;
      const uint64_t u = w == 1 ? e[0] : w == 2 ? ld_u16(e) : w == 4 ? ld_u32(e) : ld_u64(e);
      const int64_t sv = w == 1 ? (int64_t)(int8_t)u : w == 2 ? (int64_t)(int16_t)u : w == 4 ? (int64_t)(int32_t)u : (int64_t)u;
      if ((sgn && sv < 0) || (!sgn && u > 0xFFFFFFFFull) || (sgn && sv > 0xFFFFFFFFll)) {
        *st = GB_ERR_CORRUPT;
        return false;
      }
      out[i] = (uint32_t)(sgn ? (uint64_t)sv : u);
    }
    return true;
  }
  bool has_tensor(const char *name) const override {
    GgufTensorInfo t;
    return g_.tensor(name, &t);
  }

 private:
  // An array where a scalar is expected is a key of another type.
  bool absent_or_array(const char *key, gb_status *st) const {
    GgufArray a;
    if (g_.array(key, &a)) *st = GB_ERR_CORRUPT;
    return false;
  }
  const GgufView &g_;
};

// What the header and keys say, before any memory is placed.
struct Plan {
  const ArchDef *arch = nullptr;
  Meta meta{};
  float rope_linear = 0.0f;
  TokBuildSizes tok;
  uint8_t layer_kind[kArchMaxLayers] = {};  // what meta.layer_kind points to until the model has its own copy
};

gb_status read_plan(const GgufView &g, const Logger &log, Plan *pl) {
  GgufScalar av;
  GB_RETURN_IF(!g.value("general.architecture", &av) || !av.is_str, log, GB_ERR_CORRUPT,
               "gguf: general.architecture is missing");
  char aname[64];
  const size_t an = av.len < sizeof aname - 1 ? (size_t)av.len : sizeof aname - 1;
  memcpy(aname, av.s, an);
  aname[an] = 0;
  const ArchDef *a = av.len < sizeof aname && !memchr(aname, 0, an) ? arch_by_name(aname) : nullptr;
  if (!a) {
    char names[256];
    arch_names(names, sizeof names);
    return fail(log, GB_ERR_UNSUPPORTED_TYPE, "gguf: architecture '%s' not supported (%s)", aname, names);
  }
  ArchHparams hp;
  GB_TRY(arch_read_hparams(*a, ViewKeys(g), &hp, log));
  GgufTensorInfo embd;
  GB_RETURN_IF(!g.tensor("token_embd.weight", &embd), log, GB_ERR_MISSING_TENSOR, "gguf: tensor 'token_embd.weight' is missing");
  GB_RETURN_IF(embd.n_dims != 2 || embd.ne[1] == 0 || embd.ne[1] > (1u << 22), log, GB_ERR_CORRUPT,
               "gguf: token_embd.weight is not a matrix of at most 4M rows");
  Meta &m = pl->meta;
  memset(&m, 0, sizeof m);
  m.version = kGbxVersion;
  m.arch = a->id;
  m.dim = hp.dim;
  m.hidden_dim = hp.hidden_dim;
  m.n_layers = hp.n_layers;
  m.n_heads = hp.n_heads;
  m.n_kv_heads = hp.n_kv_heads;
  m.head_dim = hp.head_dim;
  m.vocab_size = (uint32_t)embd.ne[1];
  m.seq_len = hp.seq_len;
  m.rope_type = hp.rope_type;
  m.rope_dim = hp.rope_dim;
  m.rope_theta = hp.rope_theta;
  m.norm_eps = hp.norm_eps;
  m.bos = m.eos = m.unk = m.pad = -1;  // from the tokenizer, once built
  m.source = kSourceGguf;
  GgufScalar name;
  if (g.value("general.name", &name) && name.is_str) {
    const size_t k = name.len < sizeof m.name - 1 ? (size_t)name.len : sizeof m.name - 1;
    memcpy(m.name, name.s, k);
    for (size_t i = 0; i < k; i++)
      if (m.name[i] == 0) m.name[i] = ' ';
  }
  m.nope_period = a->nope_period;
  m.rope_orig_ctx = hp.rope_orig_ctx;
  m.rope_attn_factor = hp.rope_attn_factor;
  m.swa_window = hp.swa_window;
  m.swa_period = hp.swa_period;
  m.rope_theta_swa = hp.rope_theta_swa;
  m.embed_scale = a->embed_scale_sqrt ? sqrtf((float)hp.dim) : 1.0f;
  m.logit_softcap = hp.logit_softcap;
  m.ffn_act = a->ffn_act;
  m.gdn_state = hp.gdn_state;
  m.gdn_k_heads = hp.gdn_k_heads;
  m.gdn_v_heads = hp.gdn_v_heads;
  m.attn_gate = hp.attn_gate;
  m.head_dim_swa = hp.head_dim_swa;
  m.n_kv_heads_swa = hp.n_kv_heads_swa;
  m.rope_dim_swa = hp.rope_dim_swa;
  m.kv_shared_from = hp.kv_shared_from;
  m.ff_kv_layers = hp.ff_kv_layers;
  m.ple_dim = hp.ple_dim;
  m.attn_scale = hp.attn_scale;
  m.v_norm = hp.v_norm;
  if (hp.conv_kernel) {
    m.conv_kernel = hp.conv_kernel;
    m.conv_channels = hp.conv_channels;
    memcpy(pl->layer_kind, hp.layer_kind, sizeof pl->layer_kind);
    m.layer_kind = pl->layer_kind;
  }
  m.default_gear = GB_GEAR_LOW;  // placed once the tier's bits are known
  GB_TRY(check_meta(&m, log));
  // The architecture's own vocabulary size, when the file states it.
  char vkey[96];
  snprintf(vkey, sizeof vkey, "%s.vocab_size", a->name);
  uint32_t vk = m.vocab_size;
  GB_TRY(arch_key_u32(ViewKeys(g), "", vkey, false, m.vocab_size, log, &vk));
  GB_RETURN_IF(vk != m.vocab_size, log, GB_ERR_SHAPE_MISMATCH, "gguf: %s %u, but token_embd has %u rows", vkey, vk, m.vocab_size);
  pl->arch = a;
  pl->rope_linear = hp.rope_linear;
  return tokdata_build(g, log, nullptr, nullptr, &pl->tok);
}

class Binder {
 public:
  Binder(const GgufView &g, gb_model *m, const Logger &log) : g_(g), m_(m), log_(log) {}
  uint32_t tier = GB_GEAR_LOW;
  uint64_t bound = 0;  // distinct GGUF tensors in use

  bool has(const char *name) const {
    GgufTensorInfo t;
    return g_.tensor(name, &t);
  }

  // The tensor `name` holds `kinds` (one, or several whose row ranges follow
  // one another), each of layer `layer`.
  gb_status bind(const char *name, const uint32_t *kinds, uint32_t n_kinds, uint32_t layer) {
    GgufTensorInfo t;
    GB_RETURN_IF(!g_.tensor(name, &t), log_, GB_ERR_MISSING_TENSOR, "gguf: tensor '%s' is missing", name);
    const uint32_t fmt = format_of_ggml(t.type);
    GB_RETURN_IF(fmt >= kFmtCount || !t.nbytes, log_, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: tensor '%s' has ggml type %u, which gearbx does not read (convert the file with `gearbx convert`)",
                 name, t.type);
    uint32_t rows = 0, r, c;
    for (uint32_t i = 0; i < n_kinds; i++) {
      expected_shape(m_->meta, kinds[i], &r, &c, layer);
      rows += r;
    }
    expected_shape(m_->meta, kinds[0], &r, &c, layer);
    GB_RETURN_IF(t.ne[0] != c || t.ne[1] * t.ne[2] * t.ne[3] != rows || t.ne[2] != 1 || t.ne[3] != 1, log_,
                 GB_ERR_SHAPE_MISMATCH, "gguf: tensor '%s' is [%llu, %llu, %llu, %llu], expected [%u, %u]", name,
                 (unsigned long long)t.ne[0], (unsigned long long)t.ne[1], (unsigned long long)t.ne[2],
                 (unsigned long long)t.ne[3], c, rows);
    GB_RETURN_IF((uintptr_t)(t.base + t.offset) % 4 != 0, log_, GB_ERR_ALIGNMENT,
                 "gguf: tensor '%s' data at offset %llu is not 4-byte aligned (general.alignment below 4)", name,
                 (unsigned long long)t.offset);
    const uint64_t rb = row_bytes(fmt, c);
    uint64_t row0 = 0;
    for (uint32_t i = 0; i < n_kinds; i++) {
      expected_shape(m_->meta, kinds[i], &r, &c, layer);
      TensorRef ref{t.base + t.offset + row0 * rb, fmt, r, c, (uint64_t)r * rb};
      GB_TRY(place(kinds[i], layer, ref, name));
      row0 += r;
    }
    bound++;
    return GB_OK;
  }
  gb_status bind1(const char *name, uint32_t kind, uint32_t layer) { return bind(name, &kind, 1, layer); }

  // A fixed view (linear RoPE scaling made into frequency factors).
  gb_status place(uint32_t kind, uint32_t layer, const TensorRef &ref, const char *name) {
    // (The embedding, read a row at a time, and the DeltaNet's alpha and beta
    // projections, multiplied as the matrices are, may take any format.)
    const bool any_format = kind == kTokEmbd || kind == kGdnAlpha || kind == kGdnBeta || kind == kPleEmbd || kind == kPleModelProj ||
                            kind == kPleGate || kind == kPleProj;
    GB_RETURN_IF(is_common_kind(kind) && !any_format && ref.format != kFmtF32, log_, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: tensor '%s' is stored as %s; norms, biases and RoPE factors must be F32", name, format_name(ref.format));
    TensorRef *slot = model_tensor_slot(m_, kind, layer, tier);
    *slot = ref;
    return GB_OK;
  }

 private:
  const GgufView &g_;
  gb_model *m_;
  const Logger &log_;
};

// Every tensor the architecture's row asks for, by llama.cpp's names.
gb_status bind_all(const GgufView &g, const ArchDef &a, float rope_linear, float *linear_factors, gb_model *m, Binder &b,
                   const Logger &log) {
  Meta &d = m->meta;
  char name[64];
  GB_TRY(b.bind1("token_embd.weight", kTokEmbd, 0));
  snprintf(name, sizeof name, "%s.weight", a.output_norm);
  GB_TRY(b.bind1(name, kOutNorm, 0));
  const bool shared = !b.has("output.weight");
  d.shared_classifier = shared;
  if (shared) {
    TensorRef cls = m->embd;
    GB_TRY(b.place(kClassifier, 0, cls, "token_embd.weight"));
  } else {
    GB_TRY(b.bind1("output.weight", kClassifier, 0));
  }
  const bool fused_qkv = a.fused_qkv != kNever && b.has("blk.0.attn_qkv.weight");
  GB_RETURN_IF(a.fused_qkv == kMust && !fused_qkv, log, GB_ERR_MISSING_TENSOR, "gguf: %s model without blk.0.attn_qkv.weight",
               a.name);
  const bool fused_gate_up = a.fused_gate_up == kMust || (a.fused_gate_up == kMay && !b.has("blk.0.ffn_gate.weight"));
  static const struct {
    const char *suffix;
    uint32_t kind;
  } kLayer[] = {{"attn_norm", kAttnNorm}, {"attn_q", kWq},   {"attn_k", kWk},   {"attn_v", kWv}, {"attn_output", kWo},
                {"ffn_norm", kFfnNorm},   {"ffn_gate", kW1}, {"ffn_down", kW2}, {"ffn_up", kW3}};
  static const uint32_t kQkv[3] = {kWq, kWk, kWv}, kGateUp[2] = {kW1, kW3};
  static const struct {
    const char *name;  // "blk.N." + this
    uint32_t kind;
  } kConv[] = {{"shortconv.in_proj.weight", kConvIn}, {"shortconv.conv.weight", kConvKernel}, {"shortconv.out_proj.weight", kConvOut}},
    kDelta[] = {{"attn_qkv.weight", kGdnQkv},   {"attn_gate.weight", kGdnGate}, {"ssm_conv1d.weight", kConvKernel},
                {"ssm_out.weight", kGdnOut},    {"ssm_alpha.weight", kGdnAlpha}, {"ssm_beta.weight", kGdnBeta},
                {"ssm_dt.bias", kGdnDtBias},    {"ssm_a", kGdnA},              {"ssm_norm.weight", kGdnNorm}};
  for (uint32_t l = 0; l < d.n_layers; l++) {
    const bool conv = d.conv_layer(l);
    for (const auto &e : kConv) {
      if (!d.shortconv_layer(l)) break;
      snprintf(name, sizeof name, "blk.%u.%s", l, e.name);
      GB_TRY(b.bind1(name, e.kind, l));
    }
    for (const auto &e : kDelta) {
      if (!d.delta_layer(l)) break;
      snprintf(name, sizeof name, "blk.%u.%s", l, e.name);
      GB_TRY(b.bind1(name, e.kind, l));
    }
    for (const auto &e : kLayer) {
      if (conv && (e.kind == kWq || e.kind == kWk || e.kind == kWv || e.kind == kWo)) continue;
      if (d.kv_shared(l) && (e.kind == kWk || e.kind == kWv)) continue;  // reads an earlier layer's cache
      if (e.kind == kFfnNorm) {
        snprintf(name, sizeof name, "blk.%u.%s.weight", l, a.ffn_norm);
        GB_TRY(b.bind1(name, e.kind, l));
        continue;
      }
      if (fused_qkv && (e.kind == kWq || e.kind == kWk || e.kind == kWv)) continue;
      if (fused_gate_up && (e.kind == kW1 || e.kind == kW3)) continue;
      snprintf(name, sizeof name, "blk.%u.%s.weight", l, e.suffix);
      GB_TRY(b.bind1(name, e.kind, l));
    }
    if (fused_qkv && !conv) {
      snprintf(name, sizeof name, "blk.%u.attn_qkv.weight", l);
      GB_TRY(b.bind(name, kQkv, 3, l));
    }
    if (fused_gate_up) {
      snprintf(name, sizeof name, "blk.%u.ffn_up.weight", l);
      GB_TRY(b.bind(name, kGateUp, 2, l));
    }
  }
  const bool bias = a.qkv_bias != kNever && b.has("blk.0.attn_q.bias");
  GB_RETURN_IF(a.qkv_bias == kMust && !bias, log, GB_ERR_MISSING_TENSOR, "gguf: %s model without blk.0.attn_q.bias", a.name);
  static const struct {
    const char *suffix;
    uint32_t kind;
  } kBias[] = {{"attn_q", kBiasQ}, {"attn_k", kBiasK}, {"attn_v", kBiasV}};
  for (uint32_t l = 0; bias && l < d.n_layers; l++)
    for (const auto &e : kBias) {
      snprintf(name, sizeof name, "blk.%u.%s.bias", l, e.suffix);
      GB_TRY(b.bind1(name, e.kind, l));
    }
  // Pairs of per-layer norms: every (attention) layer, both, or none, as
  // the row says.
  uint32_t first_attn = 0;
  while (first_attn < d.n_layers && d.conv_layer(first_attn)) first_attn++;
  auto pair = [&](ArchNeed need, const char *first, uint32_t k1, const char *second, uint32_t k2, bool attn_only) -> gb_status {
    snprintf(name, sizeof name, "blk.%u.%s.weight", attn_only ? first_attn : 0, first);
    const bool has = need != kNever && b.has(name);
    GB_RETURN_IF(need == kMust && !has, log, GB_ERR_MISSING_TENSOR, "gguf: %s model without %s", a.name, name);
    for (uint32_t l = 0; has && l < d.n_layers; l++) {
      if (attn_only && d.conv_layer(l)) continue;
      snprintf(name, sizeof name, "blk.%u.%s.weight", l, first);
      GB_TRY(b.bind1(name, k1, l));
      if (k2 == kKNorm && d.kv_shared(l)) continue;  // no keys of its own
      snprintf(name, sizeof name, "blk.%u.%s.weight", l, second);
      GB_TRY(b.bind1(name, k2, l));
    }
    return GB_OK;
  };
  GB_TRY(pair(a.qk_norm, "attn_q_norm", kQNorm, "attn_k_norm", kKNorm, true));
  GB_TRY(pair(a.post_norms, "post_attention_norm", kPostAttnNorm, "post_ffw_norm", kPostFfnNorm, false));
  // RoPE: LongRoPE's short and long factors, or frequency factors, or
  // linear scaling made into factors.
  const bool longrope = a.rope_freqs != kNever && (b.has("rope_factors_long.weight") || b.has("rope_factors_short.weight"));
  if (longrope) {
    GB_RETURN_IF(rope_linear > 0.0f || b.has("rope_freqs.weight"), log, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: LongRoPE factors together with rope_freqs.weight or linear rope scaling (not supported together)");
    GB_TRY(b.bind1("rope_factors_short.weight", kRopeFreqs, 0));
    GB_TRY(b.bind1("rope_factors_long.weight", kRopeFreqsLong, 0));
  } else if (a.rope_freqs != kNever && b.has("rope_freqs.weight")) {
    GB_RETURN_IF(rope_linear > 0.0f, log, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: both rope_freqs.weight and linear rope scaling (not supported together)");
    GB_TRY(b.bind1("rope_freqs.weight", kRopeFreqs, 0));
  } else if (rope_linear > 0.0f) {
    for (uint32_t i = 0; i < d.rope_dim / 2; i++) linear_factors[i] = rope_linear;
    TensorRef f{reinterpret_cast<const uint8_t *>(linear_factors), kFmtF32, 1, d.rope_dim / 2, 2ull * d.rope_dim};
    GB_TRY(b.place(kRopeFreqs, 0, f, "rope scaling"));
  }
  // Per-layer inputs (gemma4): three tables, four tensors per layer (the
  // output scale optional, in every layer or none).
  if (d.ple_dim) {
    GB_TRY(b.bind1("per_layer_token_embd.weight", kPleEmbd, 0));
    GB_TRY(b.bind1("per_layer_model_proj.weight", kPleModelProj, 0));
    GB_TRY(b.bind1("per_layer_proj_norm.weight", kPleProjNorm, 0));
    static const struct {
      const char *name;  // "blk.N." + this
      uint32_t kind;
    } kPle[] = {{"inp_gate.weight", kPleGate}, {"proj.weight", kPleProj}, {"post_norm.weight", kPlePostNorm}};
    for (uint32_t l = 0; l < d.n_layers; l++)
      for (const auto &e : kPle) {
        snprintf(name, sizeof name, "blk.%u.%s", l, e.name);
        GB_TRY(b.bind1(name, e.kind, l));
      }
  }
  GB_RETURN_IF(a.layer_scale == kMust && !b.has("blk.0.layer_output_scale.weight"), log, GB_ERR_MISSING_TENSOR,
               "gguf: %s model without blk.0.layer_output_scale.weight", a.name);
  if (a.layer_scale != kNever && b.has("blk.0.layer_output_scale.weight"))
    for (uint32_t l = 0; l < d.n_layers; l++) {
      snprintf(name, sizeof name, "blk.%u.layer_output_scale.weight", l);
      GB_TRY(b.bind1(name, kLayerScale, l));
    }
  uint64_t n_tensors = 0;
  for (const GgufView *v = &g; v; v = v->next_part) n_tensors += v->n_tensors;
  if (b.bound < n_tensors)
    log.log(GB_LOG_WARN, "gguf: ignoring %llu tensor(s) a %s model does not use", (unsigned long long)(n_tensors - b.bound),
            a.name);
  return GB_OK;
}

// Bits per weight of the tier matrices and classifier, and whether any is
// block-quantized.
void tier_bits(const gb_model &m, uint32_t tier, double *bits, bool *quantized) {
  uint64_t bytes = 0, weights = 0;
  *quantized = false;
  const size_t nm = (size_t)m.meta.n_layers * kMatsPerLayer;
  for (size_t i = 0; i <= nm; i++) {
    const TensorRef &w = i < nm ? m.mats[tier][i] : m.classifier[tier];
    bytes += w.nbytes;
    weights += (uint64_t)w.rows * w.cols;
    *quantized = *quantized || (w.format != kFmtF32 && w.format != kFmtF16);
  }
  *bits = weights ? (double)bytes * 8.0 / (double)weights : 32.0;
}

// Every stored scale (a block's f16 d and min) and every f32 / f16 value
// of a tensor finite.
bool tensor_finite(const TensorRef &t) {
  if (!t.data) return true;
  const FormatInfo &f = kFormats[t.format];
  if (t.format == kFmtF32) {
    for (uint64_t i = 0; i < t.nbytes / 4; i++)
      if (!isfinite(ld_f32(t.data + 4 * i))) return false;
    return true;
  }
  if (t.format == kFmtF16) {
    for (uint64_t i = 0; i < t.nbytes / 2; i++)
      if ((ld_u16(t.data + 2 * i) & 0x7C00) == 0x7C00) return false;
    return true;
  }
  auto finite16 = [](const uint8_t *p) { return (ld_u16(p) & 0x7C00) != 0x7C00; };
  if (t.format == kFmtQ4R16) {  // per group of 16 blocks: the 16 scales first
    for (uint64_t g = 0; g < t.nbytes / (kRows16 * f.bytes); g++)
      for (uint32_t i = 0; i < kRows16; i++)
        if (!finite16(t.data + g * kRows16 * f.bytes + 2 * i)) return false;
    return true;
  }
  uint8_t blk[256];  // one super-block gathered back (krows16.h)
  const bool krows = t.format == kFmtQ4KR16 || t.format == kFmtQ6KR16;
  for (uint64_t b = 0; b < t.nbytes / f.bytes; b++) {
    const uint8_t *p = t.data + b * f.bytes;
    if (krows) {
      gb_krows16::gather(blk, t.data + b / kRows16 * kRows16 * f.bytes, f.bytes, b % kRows16);
      p = blk;
    }
    if (f.d_at >= 0 && !finite16(p + f.d_at)) return false;
    if (f.m_at >= 0 && !finite16(p + f.m_at)) return false;
    if (t.format == kFmtIq1m) {  // d: the top nibbles of the four scale words at +48, lowest first
      const uint16_t d = (uint16_t)((ld_u16(p + 48) >> 12) | ((ld_u16(p + 50) >> 8) & 0x00f0) |
                                    ((ld_u16(p + 52) >> 4) & 0x0f00) | (ld_u16(p + 54) & 0xf000));
      if ((d & 0x7C00) == 0x7C00) return false;
    }
  }
  return true;
}

gb_status scan_values(const gb_model &m, const Logger &log) {
  const Meta &d = m.meta;
  auto check = [&](const TensorRef &t, const char *what, uint32_t layer) -> gb_status {
    GB_RETURN_IF(!tensor_finite(t), log, GB_ERR_CORRUPT, "gguf: %s of layer %u has a non-finite value or block scale", what, layer);
    return GB_OK;
  };
  GB_TRY(check(m.embd, "the token embedding", 0));
  GB_TRY(check(m.out_norm, "the output norm", 0));
  GB_TRY(check(m.rope_freqs, "the RoPE factors", 0));
  GB_TRY(check(m.rope_freqs_long, "the long RoPE factors", 0));
  GB_TRY(check(m.classifier[d.default_gear], "the classifier", 0));
  GB_TRY(check(m.ple_embd, "the per-layer input table", 0));
  GB_TRY(check(m.ple_model_proj, "the per-layer input projection", 0));
  GB_TRY(check(m.ple_proj_norm, "the per-layer input norm", 0));
  for (uint32_t l = 0; l < d.n_layers; l++) {
    GB_TRY(check(m.attn_norm[l], "the attention norm", l));
    GB_TRY(check(m.ffn_norm[l], "the FFN norm", l));
    for (uint32_t k = 0; k < 3; k++) GB_TRY(check(m.bias[k][l], "a bias", l));
    for (uint32_t k = 0; k < 2; k++) GB_TRY(check(m.qk_norm[k][l], "a Q/K norm", l));
    for (uint32_t k = 0; k < 2; k++) GB_TRY(check(m.post_norm[k][l], "a post norm", l));
    GB_TRY(check(m.conv_kernel[l], "the convolution's taps", l));
    for (uint32_t k = 0; k < 4; k++) GB_TRY(check(m.ple[k][l], "a per-layer input tensor", l));
    for (uint32_t k = 0; k < 5; k++) GB_TRY(check(m.gdn[k][l], "a Gated DeltaNet tensor", l));
    for (uint32_t k = 0; k < kMatsPerLayer; k++)
      GB_TRY(check(m.mats[d.default_gear][(size_t)l * kMatsPerLayer + k], "a weight matrix", l));
  }
  return GB_OK;
}

// How the 4-bit and 6-bit matrices are laid out after open (gb_gguf_layout).
enum Repack { kKeepRows = 0, kRepackInPlace = 1, kRepackIntoMemory = 2 };

Repack repack_mode(const gb_model_options &opt, const gb_port_mapping *mapping) {
  const bool loaded = mapping && mapping->loaded;
  switch (opt.gguf_layout) {
    case GB_GGUF_LAYOUT_FILE: return kKeepRows;
    case GB_GGUF_LAYOUT_REPACK: return loaded ? kRepackInPlace : kRepackIntoMemory;
    default: return !mapping ? kKeepRows : loaded ? kRepackInPlace : opt.mem ? kKeepRows : kRepackIntoMemory;
  }
}

bool has_rows16(uint32_t ggml_type) { return rows16_format(format_of_ggml(ggml_type)) != kFmtCount; }

// An upper bound of the bytes a repack into memory places: every tensor of
// a type with a 16-row variant but the embedding, and the embedding again
// when the classifier shares it (the copy is interleaved, the embedding's
// row lookups keep the file's rows); each 64-byte aligned.
uint64_t repack_bytes(const GgufView &first) {
  uint64_t total = 0;
  bool tied = true, embd_rows16 = false;
  uint64_t embd_bytes = 0;
  for (const GgufView *v = &first; v; v = v->next_part) {
    const GgufView &g = *v;
    uint64_t pos = g.ti_start;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
      const GgufTensorInfo t = g.next_tensor(&pos);
      if (g.name_is(t, "output.weight")) tied = false;
      if (!has_rows16(t.type) || !t.nbytes) continue;
      if (g.name_is(t, "token_embd.weight")) {
        embd_rows16 = true;
        embd_bytes = t.nbytes;
        continue;
      }
      total += align_up(t.nbytes, 64);
    }
  }
  if (tied && embd_rows16) total += align_up(embd_bytes, 64);
  return total;
}

// Interleaves every view of the tier (matrices, classifier) whose format
// has a 16-row variant and whose rows are whole groups: in place (a loaded
// copy, group by group through a 16-row scratch), or into region (a
// mapping's pages are released once copied). A view the scratch cannot be
// had for stays row-major (logged).
void repack_tier(gb_model *m, Repack mode, uint8_t *region, uint64_t region_bytes, const Logger &log) {
  const uint32_t tier = m->meta.default_gear;
  const size_t nm = (size_t)m->meta.n_layers * kMatsPerLayer;
  uint64_t used = 0, done = 0;
  uint8_t *scratch = nullptr;
  size_t scratch_bytes = 0;
  for (size_t i = 0; i <= nm; i++) {
    TensorRef &t = i < nm ? m->mats[tier][i] : m->classifier[tier];
    const uint32_t f16 = rows16_format(t.format);
    if (!t.data || f16 == kFmtCount || t.rows % kRows16 != 0) continue;
    // A classifier tied to the embedding, in place: the embedding itself is
    // interleaved (its row lookups decode the 16-row layout).
    const bool shared_in_place = i == nm && t.data == m->embd.data && mode == kRepackInPlace;
    const uint64_t rb = row_bytes(t.format, t.cols), group = kRows16 * rb;
    auto interleave = [&](uint8_t *dst, const uint8_t *src, size_t rows) {
      if (t.format == kFmtQ4) q4_rows16_from_rows(dst, src, rows, t.cols);
      else gb_krows16::from_rows(dst, src, rows, t.cols, format_block_bytes(t.format));
    };
    uint8_t *dst;
    if (mode == kRepackInPlace) {
      if (scratch_bytes < group) {
        gb_port_aligned_free(scratch);
        scratch = static_cast<uint8_t *>(gb_port_aligned_alloc(group, 64));
        scratch_bytes = scratch ? group : 0;
      }
      if (!scratch) {
        log.log(GB_LOG_WARN, "gguf: no %llu bytes of scratch to interleave a matrix: it stays row-major",
                (unsigned long long)group);
        continue;
      }
      dst = const_cast<uint8_t *>(t.data);
      for (uint32_t r = 0; r < t.rows; r += kRows16) {
        memcpy(scratch, dst + (uint64_t)r * rb, group);
        interleave(dst + (uint64_t)r * rb, scratch, kRows16);
      }
    } else {
      used = align_up(used, 64);
      if (used + t.nbytes > region_bytes) continue;  // cannot happen: the region is an upper bound
      dst = region + used;
      used += t.nbytes;
      interleave(dst, t.data, t.rows);
      if (model_mapped(m)) gb_port_advise(t.data, t.nbytes, GB_PORT_ADVISE_DONTNEED);
    }
    t.data = dst;
    t.format = f16;
    if (shared_in_place) m->embd = t;
    done++;
  }
  gb_port_aligned_free(scratch);
  log.log(GB_LOG_INFO, "gguf: %llu matrices interleaved in 16-row groups (%s)", (unsigned long long)done,
          mode == kRepackInPlace ? "in place" : "into the model's memory");
}

// The split keys of one file: "split.no" (which file, from 0),
// "split.count" (how many; absent: 1) and "split.tensors.count" (tensors of
// all of them; -1 when absent). Any integer type is taken.
gb_status split_keys(const GgufView &g, const Logger &log, uint32_t *no, uint32_t *count, int64_t *tensors) {
  GgufScalar v;
  *no = 0, *count = 1, *tensors = -1;
  auto get = [&](const char *key, int64_t lo, int64_t hi, int64_t *out) -> gb_status {
    GgufArray a;
    if (g.array(key, &a)) return fail(log, GB_ERR_CORRUPT, "gguf: '%s' is an array", key);
    if (!g.value(key, &v)) return GB_OK;
    GB_RETURN_IF(!v.is_int || v.big || v.i < lo || v.i > hi, log, GB_ERR_CORRUPT, "gguf: '%s' is not an integer in [%lld, %lld]",
                 key, (long long)lo, (long long)hi);
    *out = v.i;
    return GB_OK;
  };
  int64_t n = 0, c = 1;
  GB_TRY(get("split.no", 0, 65535, &n));
  GB_TRY(get("split.count", 0, 65535, &c));
  GB_TRY(get("split.tensors.count", 0, (int64_t)kGgufMaxTensors * kMaxSplitParts, tensors));
  if (c == 0) c = 1;  // a writer's placeholder
  GB_RETURN_IF(n >= c, log, GB_ERR_CORRUPT, "gguf: split.no %lld of split.count %lld", (long long)n, (long long)c);
  *no = (uint32_t)n;
  *count = (uint32_t)c;
  return GB_OK;
}

// The parts of a split file after the first: each a GGUF whose split keys
// say it is that part of the same count, tensor names unique over all the
// parts, the count of tensors the first part announces. views[k] is part
// k + 1, chained after `first` (tables as given, or walked).
gb_status open_parts(GgufView *first, uint32_t count, int64_t announced, const GgufPart *parts, uint32_t n_parts,
                     GgufView *views, GgufKv *const *kv, GgufTensorInfo *const *ti, uint32_t *scratch, const Logger &log) {
  GB_RETURN_IF(count > 1 && n_parts == 0, log, GB_ERR_INVALID_ARGUMENT,
               "gguf: this is the first of %u files of a split model: open it by its path with gb_model_open_file, which "
               "opens the others",
               count);
  GB_RETURN_IF(n_parts + 1 != count, log, GB_ERR_CORRUPT, "gguf: split.count %u, but %u files given", count, n_parts + 1);
  uint64_t total = first->n_tensors;
  const GgufView *prev = first;
  for (uint32_t k = 0; k < n_parts; k++) {
    const gb_status st =
        gguf_view_open(parts[k].p, parts[k].size, log, kv ? kv[k] : nullptr, ti ? ti[k] : nullptr, scratch, &views[k]);
    GB_RETURN_IF(st != GB_OK, log, st, "gguf: part %u of %u of the split model is malformed", k + 2, count);
    uint32_t no, c;
    int64_t t;
    GB_TRY(split_keys(views[k], log, &no, &c, &t));
    GB_RETURN_IF(no != k + 1 || c != count, log, GB_ERR_CORRUPT,
                 "gguf: file %u of the split model says it is part %u of %u", k + 2, no + 1, c);
    total += views[k].n_tensors;
    const_cast<GgufView *>(prev)->next_part = &views[k];
    prev = &views[k];
  }
  GB_RETURN_IF(announced >= 0 && (uint64_t)announced != total, log, GB_ERR_CORRUPT,
               "gguf: split.tensors.count %lld, but the %u files hold %llu tensors", (long long)announced, count,
               (unsigned long long)total);
  // A tensor in two parts would make the model depend on which one is found.
  for (uint32_t k = 0; k < n_parts; k++) {
    uint64_t pos = views[k].ti_start;
    for (uint64_t i = 0; i < views[k].n_tensors; i++) {
      const GgufTensorInfo t = views[k].next_tensor(&pos);
      char name[kGgufMaxNameBytes + 1];
      memcpy(name, views[k].base + t.name_off, t.name_len);
      name[t.name_len] = 0;
      for (const GgufView *v = first; v != &views[k]; v = v->next_part) {
        GgufTensorInfo other;
        const GgufView *saved = v->next_part;
        const_cast<GgufView *>(v)->next_part = nullptr;  // this file only
        const bool dup = v->tensor(name, &other);
        const_cast<GgufView *>(v)->next_part = saved;
        GB_RETURN_IF(dup, log, GB_ERR_CORRUPT, "gguf: tensor '%s' is in two files of the split model", name);
      }
    }
  }
  return GB_OK;
}

}  // namespace

gb_status gguf_split_of(const uint8_t *p, uint64_t size, const Logger &log, uint32_t *no, uint32_t *count) {
  GgufView g;
  GB_TRY(gguf_view_open(p, size, log, nullptr, nullptr, nullptr, &g));
  int64_t t;
  return split_keys(g, log, no, count, &t);
}

gb_status model_open_gguf(const uint8_t *p, uint64_t size, const gb_model_options &opt, const Logger &log,
                          const gb_port_mapping *mapping, gb_model **out, size_t *mem_bytes_out, const GgufPart *parts,
                          uint32_t n_parts) {
  GgufView g;
  GB_TRY(gguf_view_open(p, size, log, nullptr, nullptr, nullptr, &g));
  // A split file: its first part here, the others in parts, one view each.
  uint32_t split_no, split_count;
  int64_t split_tensors;
  GB_TRY(split_keys(g, log, &split_no, &split_count, &split_tensors));
  GB_RETURN_IF(split_no != 0, log, GB_ERR_INVALID_ARGUMENT,
               "gguf: this is part %u of %u of a split model: open the first part (NAME-00001-of-%05u.gguf)", split_no + 1,
               split_count, split_count);
  GB_RETURN_IF(split_count > kMaxSplitParts, log, GB_ERR_UNSUPPORTED_FEATURE, "gguf: a model split in %u files (at most %u)",
               split_count, kMaxSplitParts);
  GgufView pv[kMaxSplitParts];
  GB_TRY(open_parts(&g, split_count, split_tensors, parts, n_parts, pv, nullptr, nullptr, nullptr, log));
  Plan pl;
  GB_TRY(read_plan(g, log, &pl));
  const Meta &meta = pl.meta;
  const Repack repack = repack_mode(opt, mapping);
  const uint64_t region_bytes = repack == kRepackIntoMemory ? repack_bytes(g) : 0;
  // The model, the tokenizer's tables, the view's tables, the tokenizer
  // image, one scratch for the checks and the build, linear RoPE factors.
  // Each part's tables, and the mappings the model keeps.
  GgufKv *part_kv[kMaxSplitParts];
  GgufTensorInfo *part_ti[kMaxSplitParts];
  gb_port_mapping *part_maps = nullptr;
  uint64_t most_kv = g.n_kv, most_tensors = g.n_tensors;
  for (uint32_t k = 0; k < n_parts; k++) {
    if (pv[k].n_kv > most_kv) most_kv = pv[k].n_kv;
    if (pv[k].n_tensors > most_tensors) most_tensors = pv[k].n_tensors;
  }
  auto layout = [&](Arena &a, void **tok_mem, GgufKv **kv, GgufTensorInfo **ti, uint8_t **img, uint32_t **scratch,
                    float **factors, uint8_t **region) {
    gb_model *m = model_carve(a, meta, pl.tok.tables_bytes, tok_mem);
    *region = region_bytes ? a.array<uint8_t>((size_t)region_bytes) : nullptr;
    *kv = a.array<GgufKv>((size_t)g.n_kv);
    *ti = a.array<GgufTensorInfo>((size_t)g.n_tensors);
    for (uint32_t k = 0; k < n_parts; k++) {
      part_kv[k] = a.array<GgufKv>((size_t)pv[k].n_kv);
      part_ti[k] = a.array<GgufTensorInfo>((size_t)pv[k].n_tensors);
    }
    part_maps = n_parts ? a.array<gb_port_mapping>(n_parts) : nullptr;
    *img = a.array<uint8_t>(pl.tok.image_bytes, 8);
    const size_t sv = gguf_view_scratch_bytes(most_kv, most_tensors);
    *scratch = a.array<uint32_t>((sv > pl.tok.scratch_bytes ? sv : pl.tok.scratch_bytes) / 4 + 1);
    *factors = pl.rope_linear > 0.0f ? a.array<float>(meta.rope_dim / 2 + 1) : nullptr;
    return m;
  };
  Arena counter;
  void *tok_mem;
  GgufKv *kv;
  GgufTensorInfo *ti;
  uint8_t *img;
  uint32_t *scratch;
  float *factors;
  uint8_t *region;
  GB_RETURN_IF(region_bytes > (uint64_t)SIZE_MAX / 2, log, GB_ERR_OUT_OF_MEMORY, "gguf: %llu bytes to interleave the weights into",
               (unsigned long long)region_bytes);
  layout(counter, &tok_mem, &kv, &ti, &img, &scratch, &factors, &region);
  if (mem_bytes_out) {
    *mem_bytes_out = counter.used();
    return GB_OK;
  }
  void *mem = nullptr;
  GB_TRY(model_mem(opt, counter.used(), log, &mem));
  Arena arena(mem, counter.used());
  gb_model *m = layout(arena, &tok_mem, &kv, &ti, &img, &scratch, &factors, &region);
  m->mem = opt.mem ? nullptr : mem;
  m->mem_bytes = counter.used();
  m->locked_bytes = 0;
  m->log = log;
  m->base = p;
  m->size = size;
  model_set_meta(m, meta);
  if (mapping) m->mapping = *mapping;
  gb_status st = gguf_view_open(p, size, log, kv, ti, scratch, &g);
  // The parts again, with their tables (their data checked not to overlap).
  uint64_t parts_data = 0;
  if (st == GB_OK) st = open_parts(&g, split_count, split_tensors, parts, n_parts, pv, part_kv, part_ti, scratch, log);
  for (uint32_t k = 0; k < n_parts && st == GB_OK; k++) parts_data += parts[k].size - (pv[k].data_start < parts[k].size ? pv[k].data_start : parts[k].size);
  TokView tv;
  if (st == GB_OK) st = tokdata_build(g, log, img, scratch, &pl.tok);
  if (st == GB_OK) st = tokdata_view(img, pl.tok.image_bytes, log, &tv);
  if (st == GB_OK) {
    m->meta.bos = tv.special[kTokBos];
    m->meta.eos = tv.special[kTokEos];
    m->meta.unk = tv.special[kTokUnk];
    m->meta.pad = tv.special[kTokPad];
    if (tv.n_tokens != meta.vocab_size)
      st = fail(log, GB_ERR_SHAPE_MISMATCH, "gguf: %u tokens, but token_embd has %u rows", tv.n_tokens, meta.vocab_size);
  }
  if (st == GB_OK) st = tokenizer_obj_init_gguf(&m->tokenizer, tv, tok_mem, pl.tok.tables_bytes, log);
  Binder b(g, m, log);
  // A first pass at the low slot gives the tier's bits; the views then move
  // to the slot `gearbx convert` would choose.
  if (st == GB_OK) st = bind_all(g, *pl.arch, pl.rope_linear, factors, m, b, log);
  if (st == GB_OK) {
    double bits;
    bool quantized;
    tier_bits(*m, GB_GEAR_LOW, &bits, &quantized);
    const uint32_t tier = bits < 6.5 ? GB_GEAR_LOW : bits < 12.0 ? GB_GEAR_MID : bits < 24.0 ? GB_GEAR_HIGH : GB_GEAR_F32;
    if (tier != GB_GEAR_LOW) {
      const size_t nm = (size_t)meta.n_layers * kMatsPerLayer;
      for (size_t i = 0; i < nm; i++) {
        m->mats[tier][i] = m->mats[GB_GEAR_LOW][i];
        m->mats[GB_GEAR_LOW][i] = TensorRef();
      }
      m->classifier[tier] = m->classifier[GB_GEAR_LOW];
      m->classifier[GB_GEAR_LOW] = TensorRef();
    }
    m->gears = 1u << tier;
    m->meta.default_gear = tier;
    m->meta.tier_origin[tier] = GB_TIER_ORIGIN_SOURCE;
    m->meta.quantized_source = quantized ? 1 : 0;
    // One section stands for the file's tensor data: the tier's range for
    // residency hints and budgets (it holds the embedding and norms too),
    // its CRC the metadata's (the model's identity in saved states).
    m->gguf_meta_bytes = g.data_start < size ? g.data_start : size;
    m->gguf_meta_crc = crc32_update(0, p, m->gguf_meta_bytes);
    const SectionRef data{kSecGearBase + tier, m->gguf_meta_bytes, size - m->gguf_meta_bytes + parts_data, m->gguf_meta_crc};
    m->n_sections = 1;
    m->sections[0] = data;
    m->gear_section[tier] = data;
    st = check_model_tensors(m, log);
  }
  const bool scan = opt.verify == GB_VERIFY_ALL || (opt.verify == GB_VERIFY_AUTO && size + parts_data <= opt.verify_auto_limit);
  if (st == GB_OK && scan) st = scan_values(*m, log);
  if (st == GB_OK && repack != kKeepRows) repack_tier(m, repack, region, region_bytes, log);
  if (st != GB_OK) {
    if (!opt.mem) gb_port_aligned_free(mem);
    return st;
  }
  // The model owns the parts' mappings from here.
  for (uint32_t k = 0; k < n_parts; k++) {
    part_maps[k] = parts[k].mapping;
    m->parts_bytes += parts[k].size;
  }
  m->parts = part_maps;
  m->n_parts = n_parts;
  model_count_params(m);
  *out = m;
  return GB_OK;
}

gb_status verify_gguf(const gb_model &m) {
  const uint32_t crc = crc32_update(0, m.base, m.gguf_meta_bytes);
  GB_RETURN_IF(crc != m.gguf_meta_crc, m.log, GB_ERR_CHECKSUM, "gguf: the metadata changed since the model was opened");
  return scan_values(m, m.log);
}

}  // namespace gb
