// arch.cpp — the architecture table (models.inc) and the common
// hyper-parameters of a GGUF's `<arch>.*` keys.
#include "models/arch.h"

#include <stdio.h>
#include <string.h>

namespace gb {

#define GB_ARCH(def) extern const ArchDef def;
#include "models/models.inc"
#undef GB_ARCH

namespace {

const ArchDef *const kArchs[] = {
#define GB_ARCH(def) &def,
#include "models/models.inc"
#undef GB_ARCH
};

}  // namespace

const ArchDef *arch_by_id(uint32_t id) {
  for (const ArchDef *a : kArchs)
    if (a->id == id) return a;
  return nullptr;
}

const ArchDef *arch_by_name(const char *name) {
  if (!name) return nullptr;
  for (const ArchDef *a : kArchs)
    if (strcmp(a->name, name) == 0) return a;
  return nullptr;
}

void arch_names(char *out, size_t cap) {
  if (!cap) return;
  size_t n = 0;
  out[0] = 0;
  for (const ArchDef *a : kArchs) {
    if (n >= cap) break;
    const int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", a->name);
    if (w < 0) break;
    n += (size_t)w;
  }
}

// An unsigned key of `prefix` + `key`: absent -> def (or CORRUPT when required).
gb_status arch_key_u32(const GgufKeys &k, const char *prefix, const char *key, bool required, uint32_t def, const Logger &log,
                  uint32_t *out) {
  char full[128];
  snprintf(full, sizeof full, "%s%s", prefix, key);
  gb_status st = GB_OK;
  if (k.u32(full, out, &st)) return GB_OK;
  GB_RETURN_IF(st != GB_OK, log, st, "gguf: key '%s' is not an unsigned 32-bit integer", full);
  GB_RETURN_IF(required, log, GB_ERR_CORRUPT, "gguf: required key '%s' is missing", full);
  *out = def;
  return GB_OK;
}

gb_status arch_key_f32(const GgufKeys &k, const char *prefix, const char *key, float def, const Logger &log, float *out) {
  char full[128];
  snprintf(full, sizeof full, "%s%s", prefix, key);
  gb_status st = GB_OK;
  if (k.f32(full, out, &st)) return GB_OK;
  GB_RETURN_IF(st != GB_OK, log, st, "gguf: key '%s' is not a float", full);
  *out = def;
  return GB_OK;
}

namespace {
inline gb_status key_u32(const GgufKeys &k, const char *prefix, const char *key, bool required, uint32_t def, const Logger &log,
                         uint32_t *out) {
  return arch_key_u32(k, prefix, key, required, def, log, out);
}
inline gb_status key_f32(const GgufKeys &k, const char *prefix, const char *key, float def, const Logger &log, float *out) {
  return arch_key_f32(k, prefix, key, def, log, out);
}
// attention.head_count_kv: one value for every layer, or an array of one
// per layer whose entries are one value or 0, the zeros marking the
// architecture's short-convolution layers.
gb_status read_kv_heads(const ArchDef &a, const GgufKeys &keys, const char *p, ArchHparams *hp, const Logger &log) {
  char full[128];
  snprintf(full, sizeof full, "%sattention.head_count_kv", p);
  uint32_t per_layer[kArchMaxLayers];  // 4 KB of stack, at open only
  size_t n = 0;
  gb_status st = GB_OK;
  if (!keys.u32_array(full, per_layer, kArchMaxLayers, &n, &st)) {
    GB_RETURN_IF(st != GB_OK, log, st, "gguf: key '%s' is neither an unsigned integer nor an array of them", full);
    return key_u32(keys, p, "attention.head_count_kv", false, hp->n_heads, log, &hp->n_kv_heads);
  }
  GB_RETURN_IF(n != hp->n_layers, log, GB_ERR_CORRUPT, "gguf: %s has %zu entries for %u layers", full, n, hp->n_layers);
  uint32_t kv = 0, conv = 0;
  for (size_t l = 0; l < n; l++) {
    hp->kv_layer[l] = per_layer[l];
    if (per_layer[l] == 0) {
      conv++;
      hp->layer_kind[l] = kLayerShortConv;
      continue;
    }
    hp->kv_varies = hp->kv_varies || (kv && per_layer[l] != kv);
    if (!kv) kv = per_layer[l];
  }
  GB_RETURN_IF(conv && a.conv_layers == kNever, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %s is 0 in %u layers, which a %s model cannot have", full, conv, a.name);
  GB_RETURN_IF(!kv, log, GB_ERR_UNSUPPORTED_TYPE, "gguf: %s is 0 in every layer (no attention layer): not supported", full);
  hp->n_kv_heads = kv;
  return GB_OK;
}

// feed_forward_length: one value, or an array of one per layer (hidden_dim
// then its largest entry; entries that differ are left to the hook).
gb_status read_ffn_width(const GgufKeys &keys, const char *p, ArchHparams *hp, const Logger &log) {
  char full[128];
  snprintf(full, sizeof full, "%sfeed_forward_length", p);
  size_t n = 0;
  gb_status st = GB_OK;
  if (!keys.u32_array(full, hp->ff_layer, kArchMaxLayers, &n, &st)) {
    GB_RETURN_IF(st != GB_OK, log, st, "gguf: key '%s' is neither an unsigned integer nor an array of them", full);
    return key_u32(keys, p, "feed_forward_length", true, 0, log, &hp->hidden_dim);
  }
  GB_RETURN_IF(n != hp->n_layers, log, GB_ERR_CORRUPT, "gguf: %s has %zu entries for %u layers", full, n, hp->n_layers);
  hp->hidden_dim = 0;
  for (size_t l = 0; l < n; l++) {
    GB_RETURN_IF(hp->ff_layer[l] == 0, log, GB_ERR_CORRUPT, "gguf: %s is 0 in layer %zu", full, l);
    hp->ff_varies = hp->ff_varies || hp->ff_layer[l] != hp->ff_layer[0];
    if (hp->ff_layer[l] > hp->hidden_dim) hp->hidden_dim = hp->ff_layer[l];
  }
  return GB_OK;
}

}  // namespace

gb_status arch_read_hparams(const ArchDef &a, const GgufKeys &keys, ArchHparams *hp, const Logger &log) {
  char p[64];
  snprintf(p, sizeof p, "%s.", a.name);
  GB_TRY(key_u32(keys, p, "embedding_length", true, 0, log, &hp->dim));
  GB_TRY(key_u32(keys, p, "block_count", true, 0, log, &hp->n_layers));
  GB_RETURN_IF(hp->n_layers > kArchMaxLayers, log, GB_ERR_CORRUPT, "gguf: %sblock_count %u out of range", p, hp->n_layers);
  GB_TRY(read_ffn_width(keys, p, hp, log));
  GB_TRY(key_u32(keys, p, "attention.head_count", true, 0, log, &hp->n_heads));
  GB_TRY(read_kv_heads(a, keys, p, hp, log));
  GB_TRY(key_u32(keys, p, "context_length", false, 2048, log, &hp->seq_len));
  GB_RETURN_IF(hp->n_heads == 0, log, GB_ERR_CORRUPT, "gguf: %sattention.head_count is 0", p);
  GB_RETURN_IF(hp->n_kv_heads == 0 || hp->n_heads % hp->n_kv_heads != 0, log, GB_ERR_CORRUPT,
               "gguf: %sattention.head_count_kv %u does not divide head_count %u", p, hp->n_kv_heads, hp->n_heads);
  // The head size: attention.key_length when present (Qwen3 and Gemma heads
  // are wider than embedding_length / head_count), else that quotient.
  uint32_t key_len = 0, value_len = 0;
  GB_TRY(key_u32(keys, p, "attention.key_length", false, 0, log, &key_len));
  GB_TRY(key_u32(keys, p, "attention.value_length", false, key_len, log, &value_len));
  GB_RETURN_IF(!key_len && hp->dim % hp->n_heads != 0, log, GB_ERR_CORRUPT,
               "gguf: %sembedding_length %u is not a multiple of %sattention.head_count %u (and no key_length)", p, hp->dim, p,
               hp->n_heads);
  GB_RETURN_IF(value_len != key_len, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %sattention.value_length %u differs from key_length %u (not supported)", p, value_len, key_len);
  hp->head_dim = key_len ? key_len : hp->dim / hp->n_heads;
  GB_TRY(key_u32(keys, p, "rope.dimension_count", false, hp->head_dim, log, &hp->rope_dim));
  GB_TRY(key_f32(keys, p, "rope.freq_base", 10000.0f, log, &hp->rope_theta));
  GB_TRY(key_f32(keys, p, "attention.layer_norm_rms_epsilon", 1e-5f, log, &hp->norm_eps));
  hp->rope_type = a.rope_type;
  // RoPE scaling: none, or linear (positions divided by the factor), for
  // the architectures that may carry RoPE frequency factors.
  hp->rope_linear = 0.0f;
  char full[128], scaling[32];
  snprintf(full, sizeof full, "%srope.scaling.type", p);
  gb_status st = GB_OK;
  const bool has_scaling = keys.str(full, scaling, sizeof scaling, &st);
  GB_RETURN_IF(st != GB_OK, log, st, "gguf: key '%s' is not a short string", full);
  if (has_scaling && strcmp(scaling, "none") != 0 && scaling[0]) {
    GB_RETURN_IF(strcmp(scaling, "linear") != 0 || a.rope_freqs == kNever, log, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: %srope.scaling.type '%.32s' not supported (none, linear)", p, scaling);
    float f = 0.0f;
    GB_TRY(key_f32(keys, p, "rope.scaling.factor", 0.0f, log, &f));
    GB_RETURN_IF(!(f > 0.0f && f < 1e6f), log, GB_ERR_CORRUPT, "gguf: %srope.scaling.factor %g invalid for linear scaling", p,
                 (double)f);
    if (f != 1.0f) hp->rope_linear = f;
  }
  // LongRoPE's keys (any architecture may carry them, as llama.cpp reads
  // them for all): without original_context_length the model's context
  // counts as the trained one.
  GB_TRY(key_u32(keys, p, "rope.scaling.original_context_length", false, hp->seq_len, log, &hp->rope_orig_ctx));
  GB_TRY(key_f32(keys, p, "rope.scaling.attn_factor", 1.0f, log, &hp->rope_attn_factor));
  GB_RETURN_IF(!(hp->rope_attn_factor > 0.0f && hp->rope_attn_factor <= 16.0f), log, GB_ERR_CORRUPT,
               "gguf: %srope.scaling.attn_factor %g outside (0, 16]", p, (double)hp->rope_attn_factor);
  if (hp->rope_orig_ctx == 0) hp->rope_orig_ctx = hp->seq_len;
  GB_RETURN_IF(hp->rope_orig_ctx > (1u << 22), log, GB_ERR_CORRUPT,
               "gguf: %srope.scaling.original_context_length %u out of range", p, hp->rope_orig_ctx);
  if (a.hparams) GB_TRY(a.hparams(keys, p, hp, log));
  GB_RETURN_IF(hp->kv_varies && !hp->per_layer_resolved, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %sattention.head_count_kv differs between layers: not supported for %s", p, a.name);
  GB_RETURN_IF(hp->ff_varies && !hp->per_layer_resolved, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %sfeed_forward_length differs between layers: not supported for %s", p, a.name);
  return GB_OK;
}

}  // namespace gb
