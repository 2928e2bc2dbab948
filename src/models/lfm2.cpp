// lfm2.cpp — LFM2 / LFM2.5 (350M .. 2.6B): most layers are gated short
// convolutions instead of attention. In such a layer (the zeros of the
// per-layer attention.head_count_kv array) the mixer is
//   B, C, X = rows [0, d), [d, 2d), [2d, 3d) of W_in h   (shortconv.in_proj)
//   y_t[c]  = sum_{j < L} w[c][j] * (B * X)_{t - L + 1 + j}[c]   (shortconv.conv;
//             positions before the first count as 0)
//   out     = W_out (C * y_t)                         (shortconv.out_proj)
// with L = shortconv.l_cache taps: its state is the last L - 1 products
// B * X of each channel, not a cache that grows with the context. The other
// layers are attention with a per-head RMSNorm of queries and keys and NeoX
// RoPE; every layer has the SwiGLU FFN. The final norm is stored as
// token_embd_norm. A sliding-window variant (attention.sliding_window) is
// refused: no published size uses it.
#include "models/arch.h"

namespace gb {

namespace {

gb_status lfm2_hparams(const GgufKeys &keys, const char *p, ArchHparams *hp, const Logger &log) {
  GB_TRY(arch_key_u32(keys, p, "shortconv.l_cache", true, 0, log, &hp->conv_kernel));
  uint32_t window = 0;
  GB_TRY(arch_key_u32(keys, p, "attention.sliding_window", false, 0, log, &window));
  GB_RETURN_IF(window != 0, log, GB_ERR_UNSUPPORTED_TYPE, "gguf: %sattention.sliding_window %u: not supported for lfm2", p, window);
  bool any = false;
  for (uint32_t l = 0; l < hp->n_layers; l++) any = any || hp->layer_kind[l];
  GB_RETURN_IF(!any, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: an lfm2 model without short-convolution layers (%sattention.head_count_kv has no 0): not supported", p);
  GB_RETURN_IF(hp->conv_kernel < 2 || hp->conv_kernel > kMaxConvKernel, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: %sshortconv.l_cache %u outside 2..%u", p, hp->conv_kernel, kMaxConvKernel);
  hp->conv_channels = hp->dim;
  GB_RETURN_IF(hp->head_dim * hp->n_heads != hp->dim, log, GB_ERR_CORRUPT,
               "gguf: lfm2 attention needs head_count x head size = embedding_length (%u x %u, %u)", hp->n_heads, hp->head_dim,
               hp->dim);
  return GB_OK;
}

}  // namespace

extern const ArchDef kArchDefLfm2 = {
    /*id*/ 7, "lfm2", /*min_gbx_version*/ kGbxRecurrentVersion, GB_ROPE_NEOX, /*qkv_bias*/ kNever, /*rope_freqs*/ kNever,
    /*qk_norm*/ kMust, /*nope_period*/ 0, /*fused_qkv*/ kNever, /*fused_gate_up*/ kNever, lfm2_hparams,
    /*post_norms*/ kNever, kFfnSilu, /*embed_scale_sqrt*/ false, /*conv_layers*/ kMust, "token_embd_norm", "ffn_norm",
    /*layer_scale*/ kNever,
};

}  // namespace gb
