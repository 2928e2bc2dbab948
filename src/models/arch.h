// arch.h — the decoder architectures gearbx runs, as one table.
//
// Every architecture is plain llama (RMSNorm, attention with RoPE over
// grouped-query heads, a SwiGLU FFN, optionally a classifier tied to the
// embedding) plus what its row of the table says: the RoPE pairing, which
// optional tensors it must, may or must not carry (fused projections
// included), and a hook for the
// hyper-parameters its GGUF metadata adds, whether its layers normalize
// each query and key head, and which layers skip RoPE. The row, and the hook when there
// is one, live in one file per architecture (src/models/<name>.cpp), listed
// once in models.inc. The forward pass reads what the row implies from the
// model (which tensors are present, meta.rope_type), never the architecture
// id: docs/HOWTO.md says what to touch when an architecture needs more.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "format.h"

namespace gb {

// Whether an architecture carries an optional tensor group.
enum ArchNeed : uint8_t { kNever = 0, kMay = 1, kMust = 2 };

// The hyper-parameters every architecture has (GGUF `<arch>.*` keys, the
// .gbx META fields), as the readers of a model file fill them in. head_dim
// is attention.key_length when the file has it (it may differ from
// dim / n_heads), else dim / n_heads.
constexpr uint32_t kArchMaxLayers = 1024;
// min_gbx_version of an architecture no .gbx version holds yet: it opens in
// place from its GGUF only, and `gearbx convert` refuses it.
constexpr uint32_t kNoGbxVersion = 0xffffffffu;

struct ArchHparams {
  uint32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  uint32_t seq_len = 0;
  uint32_t rope_type = 0;  // gb_rope_type
  uint32_t rope_dim = 0;
  float rope_theta = 10000.0f, norm_eps = 1e-5f;
  float rope_linear = 0.0f;  // linear RoPE scaling factor (positions divided by it); 0: none
  // LongRoPE (rope.scaling.*): the context the model was trained at (beyond
  // it the long factors apply; the context length when the key is absent),
  // and the factor of the rotated dimensions of queries and keys.
  uint32_t rope_orig_ctx = 0;
  float rope_attn_factor = 1.0f;
  // Sliding-window attention (the .gbx META fields of the same names), read
  // by the hooks of the architectures that have it.
  uint32_t swa_window = 0, swa_period = 0;
  float rope_theta_swa = 0.0f;
  float logit_softcap = 0.0f;  // 0, or c: logits c * tanh(logit / c)
  // Recurrent layers: what each layer is (LayerKind; short convolutions:
  // ArchDef::conv_layers, the zeros of a per-layer
  // attention.head_count_kv; Gated DeltaNet: the architecture's hook), and
  // their convolution (Meta's fields of the same names).
  uint32_t conv_kernel = 0, conv_channels = 0;
  uint8_t layer_kind[kArchMaxLayers] = {};
  uint32_t gdn_state = 0, gdn_k_heads = 0, gdn_v_heads = 0;
  uint32_t attn_gate = 0;  // queries interleaved with their output gates (Meta::attn_gate)
  // Per-layer arrays a hook may resolve: attention.head_count_kv with
  // different non-zero entries, feed_forward_length as an array of
  // different entries (kv_layer / ff_layer: the entries; hidden_dim is then
  // the largest, n_kv_heads the first layer's). Unless the hook sets
  // per_layer_resolved, such a file is refused.
  uint32_t kv_layer[kArchMaxLayers] = {}, ff_layer[kArchMaxLayers] = {};
  bool kv_varies = false, ff_varies = false, per_layer_resolved = false;
  // Gemma 4 (Meta's fields of the same names).
  uint32_t head_dim_swa = 0, n_kv_heads_swa = 0, rope_dim_swa = 0, kv_shared_from = 0, ff_kv_layers = 0, ple_dim = 0;
  float attn_scale = 0.0f;
  uint32_t v_norm = 0;
};

// A GGUF file's metadata, as the architecture hooks read it (the converter's
// parser implements it today). Each getter is false when the key is absent
// and reports a key of another type as GB_ERR_CORRUPT through *st.
class GgufKeys {
 public:
  virtual bool u32(const char *key, uint32_t *out, gb_status *st) const = 0;
  virtual bool f32(const char *key, float *out, gb_status *st) const = 0;
  // A string key of at most cap - 1 bytes, NUL-terminated (longer: CORRUPT).
  virtual bool str(const char *key, char *out, size_t cap, gb_status *st) const = 0;
  // An array of unsigned integers (any integer element type, every value
  // in 0..2^32-1): its length into *n and up to cap values into out; false
  // when the key is absent or not such an array (then *st is GB_ERR_CORRUPT
  // unless absent).
  virtual bool u32_array(const char *key, uint32_t *out, size_t cap, size_t *n, gb_status *st) const = 0;
  // (Boolean arrays read as 0 / 1.)
  // Whether the file has a tensor of this name.
  virtual bool has_tensor(const char *name) const = 0;

 protected:
  ~GgufKeys() = default;
};

struct ArchDef {
  uint32_t id;                // the .gbx META arch id (format.h Arch): never reused
  const char *name;           // GGUF general.architecture
  uint32_t min_gbx_version;   // the first .gbx version that can hold it
  uint32_t rope_type;         // gb_rope_type: adjacent pairs or NeoX halves
  ArchNeed qkv_bias;          // blk.N.attn_{q,k,v}.bias (every layer or none)
  ArchNeed rope_freqs;        // rope_freqs.weight, or linear RoPE scaling made into factors
  ArchNeed qk_norm;           // blk.N.attn_{q,k}_norm.weight: per-head RMSNorm of Q and K before RoPE
  uint32_t nope_period;       // 0, or P: layers l with (l + 1) % P == 0 take no RoPE (fixed by the architecture)
  // Fused projections, used as stored: blk.N.attn_qkv (the Q, K and V rows
  // one after the other) instead of attn_q/k/v, and blk.N.ffn_up of twice
  // the hidden rows (gate rows, then up rows) instead of ffn_gate + ffn_up.
  ArchNeed fused_qkv, fused_gate_up;
  // Hyper-parameters beyond the common keys (read by arch_read_hparams
  // first), with prefix "<name>."; nullptr when there are none.
  gb_status (*hparams)(const GgufKeys &keys, const char *prefix, ArchHparams *hp, const Logger &log);
  // blk.N.post_attention_norm and blk.N.post_ffw_norm: the attention and FFN
  // outputs are RMS-normalized by them before joining the residual stream.
  ArchNeed post_norms;
  uint32_t ffn_act;         // FfnAct: the gate's activation (SiLU or tanh-GELU)
  bool embed_scale_sqrt;    // embedding rows are multiplied by sqrt(dim)
  // Layers whose attention.head_count_kv entry is 0 (the key then being an
  // array with one entry per layer) are gated short-convolution layers
  // (blk.N.shortconv.{in_proj,conv,out_proj}); kNever: such a layer is refused.
  ArchNeed conv_layers;
  const char *output_norm;  // the final norm's tensor name (without ".weight")
  const char *ffn_norm;     // the pre-FFN norm's per-layer name ("ffn_norm"; qwen35: "post_attention_norm")
  // blk.N.layer_output_scale: one factor per layer that multiplies the
  // layer's output (every layer or none).
  ArchNeed layer_scale;
};

// Keys of `prefix` + `key` for the hooks: absent -> def (an unsigned key
// also CORRUPT when required); a key of another type is CORRUPT.
gb_status arch_key_u32(const GgufKeys &k, const char *prefix, const char *key, bool required, uint32_t def, const Logger &log,
                       uint32_t *out);
gb_status arch_key_f32(const GgufKeys &k, const char *prefix, const char *key, float def, const Logger &log, float *out);

// The architecture with this .gbx id / GGUF name; nullptr when unknown.
const ArchDef *arch_by_id(uint32_t id);
const ArchDef *arch_by_name(const char *name);
// The names of all architectures, comma-separated, into out (cap bytes,
// NUL-terminated, truncated to fit), for log lines.
void arch_names(char *out, size_t cap);

// The common hyper-parameters of architecture a from a GGUF's keys, then
// its hook: GB_ERR_CORRUPT for a missing required key or an inconsistent
// value, GB_ERR_UNSUPPORTED_TYPE for a setting gearbx does not run.
gb_status arch_read_hparams(const ArchDef &a, const GgufKeys &keys, ArchHparams *hp, const Logger &log);

}  // namespace gb
