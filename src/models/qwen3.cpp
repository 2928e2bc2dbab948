// qwen3.cpp — Qwen3 (0.6B / 1.7B / 4B ...): qwen2 without the Q/K/V biases
// and with a per-head RMSNorm of every query and key head (its own weight
// vector of head_dim per layer, blk.N.attn_{q,k}_norm) before NeoX RoPE. The
// heads are attention.key_length wide, wider than embedding_length /
// head_count in the published sizes.
#include "models/arch.h"

namespace gb {

extern const ArchDef kArchDefQwen3 = {
    /*id*/ 3, "qwen3", /*min_gbx_version*/ 5, GB_ROPE_NEOX, /*qkv_bias*/ kNever, /*rope_freqs*/ kMay, /*qk_norm*/ kMust,
    /*nope_period*/ 0, /*fused_qkv*/ kNever, /*fused_gate_up*/ kNever, /*hparams*/ nullptr,
    /*post_norms*/ kNever, kFfnSilu, /*embed_scale_sqrt*/ false, /*conv_layers*/ kNever, "output_norm", "ffn_norm",
    /*layer_scale*/ kNever,
};

}  // namespace gb
