// phi3.cpp — Phi-4-mini and Phi-3.x: llama with NeoX RoPE over part of each
// head (rope.dimension_count, 96 of 128 in Phi-4-mini), the Q, K and V
// projections fused into one matrix (blk.N.attn_qkv) and the gate and up
// projections into one (blk.N.ffn_up, gate rows first), both used as stored.
// LongRoPE: rope_factors_short.weight divides the rotation frequencies of
// sessions up to rope.scaling.original_context_length,
// rope_factors_long.weight those of longer ones, and the rotated dimensions
// of queries and keys are multiplied by rope.scaling.attn_factor. The
// models' sliding_window key is not applied (llama.cpp does not apply it
// either; Phi-4-mini writes 0).
#include "models/arch.h"

namespace gb {

extern const ArchDef kArchDefPhi3 = {
    /*id*/ 5,
    "phi3",
    /*min_gbx_version*/ 6,
    GB_ROPE_NEOX,
    /*qkv_bias*/ kNever,
    /*rope_freqs*/ kMay,
    /*qk_norm*/ kNever,
    /*nope_period*/ 0,
    /*fused_qkv*/ kMay,
    /*fused_gate_up*/ kMust,
    /*hparams*/ nullptr,
    /*post_norms*/ kNever,
    kFfnSilu,
    /*embed_scale_sqrt*/ false, /*conv_layers*/ kNever, "output_norm", "ffn_norm",
    /*layer_scale*/ kNever,
};

}  // namespace gb
