// gemma3.cpp — Gemma 3 (270M / 1B / 4B ...): llama with
//   - the embedding rows multiplied by sqrt(dim);
//   - a per-head RMSNorm of queries and keys (as qwen3) before NeoX RoPE;
//   - the attention output and the FFN output each RMS-normalized by their
//     own weight (blk.N.post_attention_norm, blk.N.post_ffw_norm) before
//     joining the residual stream;
//   - a GeGLU FFN (tanh-approximated GELU of the gate times the up rows);
//   - sliding-window layers: all but the last layer of every period of
//     attention.sliding_window_pattern (default 6) attend to the newest
//     attention.sliding_window positions only, with their own RoPE base
//     (rope.freq_base_swa, default 10000) and no frequency scaling; the
//     global layers take rope.freq_base and the linear rope.scaling, if any;
//   - optionally, final logits soft-capped: c * tanh(logit / c).
// The norm weights are used as stored (the GGUF converter already folds
// Gemma's 1 + w into them). The attention scale is 1/sqrt(head_dim), as in
// every published size up to 12B (the 27B model scales by
// 1/sqrt(dim / heads), which gearbx does not run: its hook refuses it).
#include "models/arch.h"

namespace gb {

namespace {

gb_status gemma3_hparams(const GgufKeys &keys, const char *p, ArchHparams *hp, const Logger &log) {
  GB_TRY(arch_key_u32(keys, p, "attention.sliding_window", false, 0, log, &hp->swa_window));
  GB_TRY(arch_key_u32(keys, p, "attention.sliding_window_pattern", false, 6, log, &hp->swa_period));
  GB_TRY(arch_key_f32(keys, p, "rope.freq_base_swa", 10000.0f, log, &hp->rope_theta_swa));
  GB_TRY(arch_key_f32(keys, p, "final_logit_softcapping", 0.0f, log, &hp->logit_softcap));
  GB_RETURN_IF(hp->n_layers == 62 && hp->head_dim * hp->n_heads != hp->dim, log, GB_ERR_UNSUPPORTED_TYPE,
               "gguf: a 62-layer gemma3 (27B) scales attention by its embedding width per head; not supported");
  if (hp->swa_window == 0) {
    hp->swa_period = 0;
  } else {
    GB_RETURN_IF(hp->swa_window > (1u << 22), log, GB_ERR_CORRUPT, "gguf: %sattention.sliding_window %u out of range", p,
                 hp->swa_window);
    GB_RETURN_IF(hp->swa_period < 2 || hp->swa_period > hp->n_layers, log, GB_ERR_UNSUPPORTED_TYPE,
                 "gguf: %sattention.sliding_window_pattern %u leaves no global layer among %u (not supported)", p,
                 hp->swa_period, hp->n_layers);
    GB_RETURN_IF(!(hp->rope_theta_swa > 0.0f && hp->rope_theta_swa < 1e30f), log, GB_ERR_CORRUPT,
                 "gguf: %srope.freq_base_swa %g invalid", p, (double)hp->rope_theta_swa);
  }
  GB_RETURN_IF(!(hp->logit_softcap >= 0.0f && hp->logit_softcap <= 1e6f), log, GB_ERR_CORRUPT,
               "gguf: %sfinal_logit_softcapping %g invalid", p, (double)hp->logit_softcap);
  return GB_OK;
}

}  // namespace

extern const ArchDef kArchDefGemma3 = {
    /*id*/ 6,
    "gemma3",
    /*min_gbx_version*/ 7,
    GB_ROPE_NEOX,
    /*qkv_bias*/ kNever,
    /*rope_freqs*/ kMay,
    /*qk_norm*/ kMust,
    /*nope_period*/ 0,
    /*fused_qkv*/ kNever,
    /*fused_gate_up*/ kNever,
    gemma3_hparams,
    /*post_norms*/ kMust,
    kFfnGelu,
    /*embed_scale_sqrt*/ true, /*conv_layers*/ kNever, "output_norm", "ffn_norm",
    /*layer_scale*/ kNever,
};

}  // namespace gb
