// gemma4.cpp — Gemma 4 E2B / E4B: gemma3 (embedding times sqrt(dim),
// per-head Q/K norms, post-attention and post-FFN norms, GeGLU, sliding
// layers with their own RoPE base, soft-capped logits) plus
//   - two attention shapes: the sliding layers' heads (key_length_swa,
//     their attention.head_count_kv entries, rope.dimension_count_swa
//     rotated) and the global layers' (key_length, their entries,
//     rope.dimension_count rotated, divided by rope_freqs.weight: factors of
//     1e30 leave the dimensions past a quarter of the head unrotated);
//   - values RMS-normalized without a weight, and an attention scale of 1
//     (the Q/K norms bound the logits instead of 1 / sqrt(head size));
//   - cache sharing: the last attention.shared_kv_layers layers compute no
//     keys or values and attend over the cache of the last earlier layer of
//     their kind (Meta::kv_source); their FFN may be wider (an array
//     feed_forward_length: one width for the layers holding a cache, one for
//     the sharing layers);
//   - per-layer inputs (embedding_length_per_layer_input values per layer,
//     forward.cpp): a table row per token plus a projection of the
//     embedding, gated into the residual stream after each layer's FFN;
//   - optionally a per-layer output scale.
// sliding_window_pattern is a boolean array (true: the layer slides); it
// must be periodic with the last layer of each period global, as every
// published size is. The mixture-of-experts size (26B-A4B) is refused.
#include <stdio.h>

#include "models/arch.h"

namespace gb {

namespace {

gb_status gemma4_hparams(const GgufKeys &keys, const char *p, ArchHparams *hp, const Logger &log) {
  const uint32_t L = hp->n_layers;
  uint32_t experts = 0;
  GB_TRY(arch_key_u32(keys, p, "expert_count", false, 0, log, &experts));
  GB_RETURN_IF(experts != 0, log, GB_ERR_UNSUPPORTED_TYPE, "gguf: a gemma4 model with %u experts: not supported", experts);
  GB_TRY(arch_key_u32(keys, p, "attention.sliding_window", true, 0, log, &hp->swa_window));
  GB_RETURN_IF(hp->swa_window == 0 || hp->swa_window > (1u << 22), log, GB_ERR_CORRUPT, "gguf: %sattention.sliding_window %u out of range",
               p, hp->swa_window);
  // The pattern: periodic, the last layer of each period global.
  char full[128];
  snprintf(full, sizeof full, "%sattention.sliding_window_pattern", p);
  uint32_t slide[kArchMaxLayers];
  size_t n = 0;
  gb_status st = GB_OK;
  GB_RETURN_IF(!keys.u32_array(full, slide, kArchMaxLayers, &n, &st), log, GB_ERR_CORRUPT,
               "gguf: %s is missing or not an array of booleans", full);
  GB_RETURN_IF(n != L, log, GB_ERR_CORRUPT, "gguf: %s has %zu entries for %u layers", full, n, L);
  uint32_t period = 0;
  while (period < L && slide[period]) period++;
  period++;
  bool periodic = period >= 2 && period <= L;
  for (uint32_t l = 0; l < L && periodic; l++) periodic = (slide[l] != 0) == (l % period != period - 1);
  GB_RETURN_IF(!periodic, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %s is not periodic with the last layer of each period global (not supported)", full);
  hp->swa_period = period;
  GB_TRY(arch_key_f32(keys, p, "rope.freq_base_swa", 10000.0f, log, &hp->rope_theta_swa));
  GB_RETURN_IF(!(hp->rope_theta_swa > 0.0f && hp->rope_theta_swa < 1e30f), log, GB_ERR_CORRUPT,
               "gguf: %srope.freq_base_swa %g invalid", p, (double)hp->rope_theta_swa);
  GB_TRY(arch_key_f32(keys, p, "final_logit_softcapping", 0.0f, log, &hp->logit_softcap));
  GB_RETURN_IF(!(hp->logit_softcap >= 0.0f && hp->logit_softcap <= 1e6f), log, GB_ERR_CORRUPT,
               "gguf: %sfinal_logit_softcapping %g invalid", p, (double)hp->logit_softcap);
  // The sliding layers' heads.
  uint32_t ks = 0, vs = 0;
  GB_TRY(arch_key_u32(keys, p, "attention.key_length_swa", true, 0, log, &ks));
  GB_TRY(arch_key_u32(keys, p, "attention.value_length_swa", false, ks, log, &vs));
  GB_RETURN_IF(ks != vs, log, GB_ERR_UNSUPPORTED_TYPE, "gguf: %sattention.value_length_swa %u differs from key_length_swa %u", p, vs,
               ks);
  GB_RETURN_IF(ks == 0 || ks % 2 != 0 || ks > hp->head_dim, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %sattention.key_length_swa %u: sliding heads must be even and no wider than the global ones (%u)", p, ks,
               hp->head_dim);
  uint32_t rs = ks;
  GB_TRY(arch_key_u32(keys, p, "rope.dimension_count_swa", false, hp->rope_dim, log, &rs));
  GB_RETURN_IF(rs == 0 || rs > ks || rs % 2 != 0, log, GB_ERR_CORRUPT, "gguf: %srope.dimension_count_swa %u invalid for heads of %u",
               p, rs, ks);
  // KV heads: one value per kind of layer.
  uint32_t kv_swa = 0, kv_global = 0;
  for (uint32_t l = 0; l < L; l++) {
    const uint32_t v = hp->kv_varies ? hp->kv_layer[l] : hp->n_kv_heads;
    uint32_t &want = slide[l] ? kv_swa : kv_global;
    GB_RETURN_IF(want && v != want, log, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: %sattention.head_count_kv differs among the %s layers (%u, %u): not supported", p,
                 slide[l] ? "sliding" : "global", want, v);
    want = v;
  }
  GB_RETURN_IF(hp->n_heads % kv_swa != 0 || hp->n_heads % kv_global != 0, log, GB_ERR_CORRUPT,
               "gguf: %sattention.head_count_kv (%u sliding, %u global) does not divide head_count %u", p, kv_swa, kv_global,
               hp->n_heads);
  hp->n_kv_heads = kv_global;
  hp->head_dim_swa = ks == hp->head_dim ? 0 : ks;
  hp->n_kv_heads_swa = kv_swa == kv_global ? 0 : kv_swa;
  hp->rope_dim_swa = rs == hp->rope_dim ? 0 : rs;
  // Cache sharing: the last layer of each kind before the sharing layers
  // holds the cache they read.
  uint32_t shared = 0;
  GB_TRY(arch_key_u32(keys, p, "attention.shared_kv_layers", false, 0, log, &shared));
  GB_RETURN_IF(shared >= L || (shared && L - shared < 2), log, GB_ERR_CORRUPT,
               "gguf: %sattention.shared_kv_layers %u leaves fewer than 2 of %u layers holding a cache", p, shared, L);
  hp->kv_shared_from = shared ? L - shared : 0;
  // The FFN widths: one for the layers holding a cache, one (the widest)
  // for the sharing layers.
  if (hp->ff_varies) {
    uint32_t own = 0;
    for (uint32_t l = 0; l < L; l++) {
      const bool sharing = hp->kv_shared_from && l >= hp->kv_shared_from;
      const uint32_t want = sharing ? hp->hidden_dim : (own ? own : hp->ff_layer[l]);
      GB_RETURN_IF(hp->ff_layer[l] != want, log, GB_ERR_UNSUPPORTED_TYPE,
                   "gguf: %sfeed_forward_length of layer %u is %u: only one width for the layers holding a cache and the "
                   "largest for the sharing layers are supported",
                   p, l, hp->ff_layer[l]);
      if (!sharing) own = want;
    }
    hp->ff_kv_layers = own;
  }
  GB_TRY(arch_key_u32(keys, p, "embedding_length_per_layer_input", false, 0, log, &hp->ple_dim));
  GB_RETURN_IF(hp->ple_dim > 4096, log, GB_ERR_CORRUPT, "gguf: %sembedding_length_per_layer_input %u out of range", p, hp->ple_dim);
  hp->attn_scale = 1.0f;
  hp->v_norm = 1;
  hp->per_layer_resolved = true;
  return GB_OK;
}

}  // namespace

extern const ArchDef kArchDefGemma4 = {
    /*id*/ 9,
    "gemma4",
    /*min_gbx_version*/ kNoGbxVersion,
    GB_ROPE_NEOX,
    /*qkv_bias*/ kNever,
    /*rope_freqs*/ kMay,
    /*qk_norm*/ kMust,
    /*nope_period*/ 0,
    /*fused_qkv*/ kNever,
    /*fused_gate_up*/ kNever,
    gemma4_hparams,
    /*post_norms*/ kMust,
    kFfnGelu,
    /*embed_scale_sqrt*/ true, /*conv_layers*/ kNever, "output_norm", "ffn_norm",
    /*layer_scale*/ kMay,
};

}  // namespace gb
