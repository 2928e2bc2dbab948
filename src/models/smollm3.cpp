// smollm3.cpp — SmolLM3: llama with adjacent-pair RoPE, except that every
// fourth layer (layers 3, 7, 11, ...) rotates nothing: its queries and keys
// carry no position ("NoPE" layers; the period is fixed by the architecture,
// not stored in its GGUF files).
#include "models/arch.h"

namespace gb {

extern const ArchDef kArchDefSmollm3 = {
    /*id*/ 4, "smollm3", /*min_gbx_version*/ 5, GB_ROPE_ADJACENT, /*qkv_bias*/ kMay, /*rope_freqs*/ kMay, /*qk_norm*/ kNever,
    /*nope_period*/ 4, /*fused_qkv*/ kNever, /*fused_gate_up*/ kNever, /*hparams*/ nullptr,
    /*post_norms*/ kNever, kFfnSilu, /*embed_scale_sqrt*/ false, /*conv_layers*/ kNever, "output_norm", "ffn_norm",
    /*layer_scale*/ kNever,
};

}  // namespace gb
