// qwen2.cpp — Qwen2 / Qwen2.5 (and DeepSeek-R1-Distill-Qwen): llama with
// NeoX RoPE (pairs i, i + rope_dim / 2) and Q/K/V biases in every layer.
#include "models/arch.h"

namespace gb {

extern const ArchDef kArchDefQwen2 = {
    /*id*/ 2, "qwen2", /*min_gbx_version*/ 2, GB_ROPE_NEOX, /*qkv_bias*/ kMust, /*rope_freqs*/ kMay, /*qk_norm*/ kNever,
    /*nope_period*/ 0, /*fused_qkv*/ kNever, /*fused_gate_up*/ kNever, /*hparams*/ nullptr,
    /*post_norms*/ kNever, kFfnSilu, /*embed_scale_sqrt*/ false, /*conv_layers*/ kNever, "output_norm", "ffn_norm",
    /*layer_scale*/ kNever,
};

}  // namespace gb
