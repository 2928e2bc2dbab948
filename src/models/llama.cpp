// llama.cpp (the architecture, not the project) — Llama 2 / 3.x, SmolLM2,
// TinyLlama, Mistral-style models: plain llama with adjacent-pair RoPE; Llama
// 3.1-style long-context scaling comes as rope_freqs.weight (a divisor per
// rotated pair) or as linear RoPE scaling. Some files carry Q/K/V biases.
#include "models/arch.h"

namespace gb {

extern const ArchDef kArchDefLlama = {
    /*id*/ 1, "llama", /*min_gbx_version*/ 1, GB_ROPE_ADJACENT, /*qkv_bias*/ kMay, /*rope_freqs*/ kMay, /*qk_norm*/ kNever,
    /*nope_period*/ 0, /*fused_qkv*/ kNever, /*fused_gate_up*/ kNever, /*hparams*/ nullptr,
    /*post_norms*/ kNever, kFfnSilu, /*embed_scale_sqrt*/ false, /*conv_layers*/ kNever, "output_norm", "ffn_norm",
    /*layer_scale*/ kNever,
};

}  // namespace gb
