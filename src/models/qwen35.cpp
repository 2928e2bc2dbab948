// qwen35.cpp — Qwen3.5 (0.8B / 2B / 4B ...): most layers are Gated DeltaNet
// (linear attention with a matrix of state per head) instead of attention;
// by default every full_attention_interval-th layer (4) is attention, or
// attention.recurrent_layers marks them. A Gated DeltaNet layer, per
// position (forward.cpp, delta_net):
//   qkv = W_qkv h (the q, k, v rows), z = W_gate h, beta = sigmoid(W_beta h),
//   g = A * softplus(W_alpha h + dt_bias)               (A < 0: a decay)
//   q, k, v = silu(causal depthwise convolution of qkv, conv_kernel taps)
//   q = l2norm(q) / sqrt(S), k = l2norm(k)              (per key head of S)
//   per value head (key head: value head mod key heads):
//     S <- exp(g) S;  S <- S + k (beta (v - S^T k))^T;  o = S^T q
//   out = W_out (rmsnorm(o) * norm * silu(z))            (per value head)
// The attention layers are gated: their query projection holds, per head,
// the query rows then as many gate rows, and the attention output is
// multiplied by sigmoid(gate) before W_o; per-head Q/K norms, NeoX RoPE over
// the first rope.dimension_count dimensions. Multi-section RoPE
// (rope.dimension_sections) with text positions rotates every pair by the
// position as plain NeoX does when each pair falls in one of the first three
// sections, which the hook checks. The pre-FFN norm is stored as
// post_attention_norm. The multi-token-prediction block (nextn_predict_layers,
// stored after the decoder's layers) is not run.
#include "models/arch.h"

#include <stdio.h>

namespace gb {

namespace {

// Whether interleaved multi-section RoPE over `pairs` pairs with these
// sections rotates each pair by one of the three position streams that
// text positions make equal (not by the fourth, 0 for text).
bool sections_rotate_by_position(const uint32_t *sec, uint32_t pairs) {
  const uint32_t dims = sec[0] + sec[1] + sec[2] + sec[3];
  if (dims == 0 || dims > pairs) return false;
  for (uint32_t i = 0; i < pairs; i++) {
    const uint32_t s = i % dims;
    const bool pos = (s % 3 == 1 && s < 3 * sec[1]) || (s % 3 == 2 && s < 3 * sec[2]) || (s % 3 == 0 && s < 3 * sec[0]);
    if (!pos) return false;
  }
  return true;
}

gb_status qwen35_hparams(const GgufKeys &keys, const char *p, ArchHparams *hp, const Logger &log) {
  uint32_t nextn = 0, inner = 0, interval = 4;
  GB_TRY(arch_key_u32(keys, p, "nextn_predict_layers", false, 0, log, &nextn));
  GB_RETURN_IF(nextn >= hp->n_layers, log, GB_ERR_CORRUPT, "gguf: %snextn_predict_layers %u of %u layers", p, nextn, hp->n_layers);
  const uint32_t all = hp->n_layers;
  hp->n_layers -= nextn;
  GB_TRY(arch_key_u32(keys, p, "ssm.conv_kernel", true, 0, log, &hp->conv_kernel));
  GB_TRY(arch_key_u32(keys, p, "ssm.state_size", true, 0, log, &hp->gdn_state));
  GB_TRY(arch_key_u32(keys, p, "ssm.group_count", true, 0, log, &hp->gdn_k_heads));
  GB_TRY(arch_key_u32(keys, p, "ssm.time_step_rank", true, 0, log, &hp->gdn_v_heads));
  GB_TRY(arch_key_u32(keys, p, "ssm.inner_size", true, 0, log, &inner));
  GB_RETURN_IF(hp->conv_kernel < 2 || hp->conv_kernel > kMaxConvKernel, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %sssm.conv_kernel %u outside 2..%u", p, hp->conv_kernel, kMaxConvKernel);
  GB_RETURN_IF(hp->gdn_state == 0 || hp->gdn_state > 1024 || hp->gdn_k_heads == 0 || hp->gdn_v_heads == 0 ||
                   hp->gdn_v_heads % hp->gdn_k_heads != 0 || hp->gdn_v_heads > 4096,
               log, GB_ERR_CORRUPT, "gguf: %sssm: %u key heads, %u value heads of %u invalid", p, hp->gdn_k_heads, hp->gdn_v_heads,
               hp->gdn_state);
  GB_RETURN_IF(inner != hp->gdn_v_heads * hp->gdn_state, log, GB_ERR_CORRUPT, "gguf: %sssm.inner_size %u is not %u heads of %u", p,
               inner, hp->gdn_v_heads, hp->gdn_state);
  hp->conv_channels = 2 * hp->gdn_k_heads * hp->gdn_state + inner;
  // Which layers are recurrent: the per-layer flags, or all but every
  // interval-th.
  char full[128];
  snprintf(full, sizeof full, "%sattention.recurrent_layers", p);
  uint32_t flags[kArchMaxLayers];
  size_t n = 0;
  gb_status st = GB_OK;
  if (keys.u32_array(full, flags, kArchMaxLayers, &n, &st)) {
    GB_RETURN_IF(n != all, log, GB_ERR_CORRUPT, "gguf: %s has %zu entries for %u layers", full, n, all);
    for (uint32_t l = 0; l < hp->n_layers; l++) {
      GB_RETURN_IF(flags[l] > 1, log, GB_ERR_CORRUPT, "gguf: %s[%u] is %u (a flag)", full, l, flags[l]);
      hp->layer_kind[l] = flags[l] ? kLayerDeltaNet : kLayerAttention;
    }
  } else {
    GB_RETURN_IF(st != GB_OK, log, st, "gguf: key '%s' is not an array of flags", full);
    GB_TRY(arch_key_u32(keys, p, "full_attention_interval", false, 4, log, &interval));
    GB_RETURN_IF(interval == 0 || interval > hp->n_layers, log, GB_ERR_CORRUPT, "gguf: %sfull_attention_interval %u invalid", p,
                 interval);
    for (uint32_t l = 0; l < hp->n_layers; l++) hp->layer_kind[l] = (l + 1) % interval ? kLayerDeltaNet : kLayerAttention;
  }
  bool attn = false;
  for (uint32_t l = 0; l < hp->n_layers; l++) attn = attn || hp->layer_kind[l] == kLayerAttention;
  GB_RETURN_IF(!attn, log, GB_ERR_UNSUPPORTED_TYPE, "gguf: a qwen35 model without attention layers: not supported");
  // Multi-section RoPE, text positions: plain NeoX when every pair takes
  // one of the first three streams.
  uint32_t sec[4] = {0, 0, 0, 0};
  snprintf(full, sizeof full, "%srope.dimension_sections", p);
  n = 0;
  st = GB_OK;
  GB_RETURN_IF(!keys.u32_array(full, sec, 4, &n, &st), log, st != GB_OK ? st : GB_ERR_CORRUPT,
               "gguf: required key '%s' is missing or not an array of integers", full);
  GB_RETURN_IF(n < 3 || n > 4, log, GB_ERR_CORRUPT, "gguf: %s has %zu entries (3 or 4)", full, n);
  if (n == 3) sec[3] = 0;
  GB_RETURN_IF(!sections_rotate_by_position(sec, hp->rope_dim / 2), log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %s [%u, %u, %u, %u] over %u rotated pairs leaves pairs to the fourth position stream: not supported", full,
               sec[0], sec[1], sec[2], sec[3], hp->rope_dim / 2);
  hp->attn_gate = 1;
  return GB_OK;
}

}  // namespace

extern const ArchDef kArchDefQwen35 = {
    /*id*/ 8, "qwen35", /*min_gbx_version*/ kGbxRecurrentVersion, GB_ROPE_NEOX, /*qkv_bias*/ kNever, /*rope_freqs*/ kNever,
    /*qk_norm*/ kMust, /*nope_period*/ 0, /*fused_qkv*/ kNever, /*fused_gate_up*/ kNever, qwen35_hparams,
    /*post_norms*/ kNever, kFfnSilu, /*embed_scale_sqrt*/ false, /*conv_layers*/ kNever, "output_norm", "post_attention_norm",
    /*layer_scale*/ kNever,
};

}  // namespace gb
