// model.h — an opened .gbx: validated metadata, the tokenizer, and views of
// every tensor, pointing into the mapped file (weights are never copied).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "format.h"
#include "gearbx_port.h"
#include "tok/tokenizer_obj.h"
#include "vocab.h"

namespace gb {

struct TensorRef {
  const uint8_t *data = nullptr;  // row 0 of the matrix, inside the mapping
  uint32_t format = 0;            // WeightFormat
  uint32_t rows = 0, cols = 0;
  uint64_t nbytes = 0;
};

struct Meta {
  uint32_t version, arch;  // file format version, Arch
  uint32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, seq_len;
  uint32_t rope_type, rope_dim;
  float rope_theta, norm_eps;
  int32_t bos, eos, unk, pad;
  uint32_t shared_classifier, source;
  char name[64];
  // Version 3 (older files: derived at open, origins 0).
  uint32_t default_gear;             // gb_gear the file recommends
  uint8_t tier_origin[GB_GEAR_COUNT];  // gb_tier_origin
  uint32_t quantized_source;         // 1: converted from already quantized weights
  // Version 5 (older files: 0).
  uint32_t nope_period;  // 0, or P: layers l with (l + 1) % P == 0 take no RoPE
  bool rope_layer(uint32_t l) const { return nope_period == 0 || (l + 1) % nope_period != 0; }
  // Version 6 (older files: 0 and 1).
  uint32_t rope_orig_ctx;   // 0, or the trained context: longer sessions take rope_freqs_long
  float rope_attn_factor;   // scales the rotated dimensions of q and k
  // Version 7 (older files: 0, 0, 0, 1, 0, 0).
  uint32_t swa_window;      // 0, or the keys a sliding layer's query sees (newest positions)
  uint32_t swa_period;      // which layers slide (format.h)
  float rope_theta_swa;     // the sliding layers' RoPE base (no frequency factors)
  float embed_scale;        // embedding rows times it
  float logit_softcap;      // 0, or c: logits c * tanh(logit / c)
  uint32_t ffn_act;         // FfnAct
  bool swa_layer(uint32_t l) const {
    return swa_window > 0 && !conv_layer(l) && (swa_period == 0 || l % swa_period < swa_period - 1);
  }
  // Recurrent layers (a GGUF opened in place): layer_kind points into the
  // model's memory, one LayerKind per layer (nullptr: every layer is
  // attention). Both recurrent kinds run a causal convolution of
  // conv_kernel taps over conv_channels channels (0: the model has none):
  // the short convolution's B * X products (lfm2: dim channels), or the
  // Gated DeltaNet's q, k, v rows before their convolution (qwen35).
  uint32_t conv_kernel;        // 0, or 2..kMaxConvKernel
  uint32_t conv_channels;
  const uint8_t *layer_kind;
  // Gated DeltaNet layers: gdn_k_heads key heads and gdn_v_heads value
  // heads (a multiple) of gdn_state values each; per value head a
  // gdn_state x gdn_state matrix of state.
  uint32_t gdn_state, gdn_k_heads, gdn_v_heads;
  // Gated attention (qwen35): the query projection's rows are, per head,
  // the head's query then its gate; the attention output is multiplied by
  // sigmoid(gate) before the output projection.
  uint32_t attn_gate;
  // Gemma 4 (a GGUF opened in place; .gbx files: all 0). Sliding layers
  // may have their own head size, KV heads and rotated dimensions
  // (head_dim_swa, n_kv_heads_swa, rope_dim_swa; 0: the global layers'
  // values, which are the largest). Layers from kv_shared_from on (0: none)
  // compute no keys and values: each attends over the cache of the last
  // earlier layer of its kind (kv_source). ff_kv_layers: the FFN width of
  // the layers that hold their own cache when it differs from hidden_dim
  // (the widest, that of the sharing layers); 0: every layer hidden_dim.
  // ple_dim: per-layer embedding inputs of ple_dim values per layer (0:
  // none). attn_scale: the attention logits' scale (0: 1 / sqrt(head
  // size)). v_norm: values RMS-normalized without a weight.
  uint32_t head_dim_swa, n_kv_heads_swa, rope_dim_swa;
  uint32_t kv_shared_from, ff_kv_layers, ple_dim;
  float attn_scale;
  uint32_t v_norm;
  uint32_t layer_head_dim(uint32_t l) const { return head_dim_swa && swa_layer(l) ? head_dim_swa : head_dim; }
  uint32_t layer_kv_heads(uint32_t l) const { return n_kv_heads_swa && swa_layer(l) ? n_kv_heads_swa : n_kv_heads; }
  uint32_t layer_rope_dim(uint32_t l) const { return rope_dim_swa && swa_layer(l) ? rope_dim_swa : rope_dim; }
  uint32_t layer_hidden(uint32_t l) const { return ff_kv_layers && !kv_shared(l) ? ff_kv_layers : hidden_dim; }
  bool kv_shared(uint32_t l) const { return kv_shared_from && l >= kv_shared_from; }
  // How many layers read another layer's cache (they hold none of their own).
  uint32_t n_kv_shared() const { return kv_shared_from ? n_layers - kv_shared_from : 0; }
  // The layer whose cache layer l attends over (itself, unless it shares).
  uint32_t kv_source(uint32_t l) const { return kv_shared(l) ? kv_shared_from - (swa_layer(l) ? 2 : 1) : l; }
  uint32_t swa_head_dim() const { return head_dim_swa ? head_dim_swa : head_dim; }
  uint32_t swa_kv_heads() const { return n_kv_heads_swa ? n_kv_heads_swa : n_kv_heads; }
  uint32_t swa_rope_dim() const { return rope_dim_swa ? rope_dim_swa : rope_dim; }
  // The widest layer's key (and value) rows, for buffers.
  uint32_t max_kv_dim() const {
    const uint32_t s = swa_kv_heads() * swa_head_dim();
    return s > kv_dim() ? s : kv_dim();
  }
  uint32_t kind(uint32_t l) const { return layer_kind ? layer_kind[l] : 0; }
  bool conv_layer(uint32_t l) const { return kind(l) != kLayerAttention; }  // recurrent: a convolution ring in the pool
  bool shortconv_layer(uint32_t l) const { return kind(l) == kLayerShortConv; }
  bool delta_layer(uint32_t l) const { return kind(l) == kLayerDeltaNet; }
  uint32_t gdn_qk_dim() const { return gdn_k_heads * gdn_state; }
  uint32_t gdn_v_dim() const { return gdn_v_heads * gdn_state; }
  uint32_t q_dim() const { return n_heads * head_dim; }  // the widest layer's (head_dim is the largest head size)
  uint32_t kv_dim() const { return n_kv_heads * head_dim; }  // the global layers'
  uint32_t layer_q_dim(uint32_t l) const { return n_heads * layer_head_dim(l); }
  uint32_t layer_kv_dim(uint32_t l) const { return layer_kv_heads(l) * layer_head_dim(l); }
};

struct SectionRef {
  uint32_t kind;
  uint64_t offset, size;
  uint32_t crc;
};

// Index of a managed matrix within a layer (order of kLayerMatrices). A
// short-convolution layer holds its input projection at kMatQ and its output
// projection at kMatO (kMatK and kMatV empty).
enum MatIndex { kMatQ = 0, kMatK, kMatV, kMatO, kMat1, kMat2, kMat3, kMatsPerLayer };

}  // namespace gb

struct gb_model {
  uint32_t handle = gb::kHandleModel;  // first: see gb::HandleKind
  gb::Logger log;
  gb_port_mapping mapping;  // data == nullptr when opened from memory; loaded: a copy
  const uint8_t *base;      // the whole file
  uint64_t size;
  gb::Meta meta;
  uint32_t n_sections;
  gb::SectionRef sections[gb::kMaxSections];
  uint32_t gears;  // bit per tier present
  gb::SectionRef gear_section[GB_GEAR_COUNT];
  gb::VocabView vocab;       // n == 0 when the file has no VOCAB section
  gb_tokenizer tokenizer;    // over TOKENIZER when present, else VOCAB
  // Common tensors.
  gb::TensorRef embd;
  gb::TensorRef *attn_norm;  // (n_layers)
  gb::TensorRef *ffn_norm;   // (n_layers)
  gb::TensorRef out_norm;
  gb::TensorRef *bias[3];    // Q, K, V biases (n_layers each); data == nullptr: none
  gb::TensorRef rope_freqs;  // (rope_dim / 2) frequency factors; data == nullptr: none
  gb::TensorRef rope_freqs_long;  // the factors for contexts beyond meta.rope_orig_ctx; data == nullptr: none
  gb::TensorRef *qk_norm[2]; // per-head Q, K norm weights (n_layers each, head_dim); data == nullptr: none
  gb::TensorRef *post_norm[2]; // post-attention, post-FFN norm weights (n_layers each, dim); data == nullptr: none
  gb::TensorRef *conv_kernel; // (n_layers) a recurrent layer's convolution taps (conv_channels, conv_kernel); else data == nullptr
  gb::TensorRef *gdn[5];      // (n_layers each) Gated DeltaNet alpha, beta, dt bias, A, norm (kGdnAlpha..kGdnNorm); else data == nullptr
  gb::TensorRef ple_embd, ple_model_proj, ple_proj_norm;  // kPleEmbd..kPleProjNorm; data == nullptr: no per-layer inputs
  gb::TensorRef *ple[4];      // (n_layers each) kPleGate, kPleProj, kPlePostNorm, kLayerScale; data == nullptr: none
  uint8_t *layer_kinds;       // (n_layers) what meta.layer_kind points to; nullptr without conv layers
  uint16_t *gelu_f16;        // (65536) GELU of each binary16 value, as binary16 (FFN_GELU models; else nullptr)
  // Tier tensors: mats[gear] is (n_layers * kMatsPerLayer), classifier per gear.
  gb::TensorRef *mats[GB_GEAR_COUNT];
  gb::TensorRef classifier[GB_GEAR_COUNT];
  uint64_t n_params;
  // A GGUF opened in place: its metadata is [0, gguf_meta_bytes), whose
  // CRC is gguf_meta_crc (the state image's model identity); 0 for a .gbx.
  uint64_t gguf_meta_bytes;
  uint32_t gguf_meta_crc;
  void *mem;  // the one allocation holding this struct and its arrays
  size_t mem_bytes;       // its size (also when the caller gave it)
  // A split GGUF: the files after the first (in this model's memory), and
  // their bytes.
  gb_port_mapping *parts;
  uint32_t n_parts;
  uint64_t parts_bytes;
  uint64_t locked_bytes;  // GB_MODEL_LOAD_LOCK: bytes locked (0: nothing locked)
};

namespace gb {
// The files after the first of a split GGUF ("NAME-00001-of-00003.gguf"
// and its siblings), mapped or loaded by gb_model_open_file.
constexpr uint32_t kMaxSplitParts = 64;
struct GgufPart {
  const uint8_t *p;
  uint64_t size;
  gb_port_mapping mapping;
};
// Parse and validate `size` bytes at `base` (a mapping or caller memory).
// With mem_bytes_out, only count the bytes the model's tables need (header
// and metadata checked, nothing placed, *out untouched).
gb_status model_open(const uint8_t *base, uint64_t size, const gb_model_options &opt,
                     const gb_port_mapping *mapping, gb_model **out, size_t *mem_bytes_out = nullptr,
                     const GgufPart *parts = nullptr, uint32_t n_parts = 0);
// Options with defaults filled in; GB_ERR_STRUCT_SIZE / GB_ERR_INVALID_ARGUMENT.
// Logs its failures naming fn.
gb_status read_model_options(const gb_model_options *in, gb_model_options *o, const char *fn);
// GB_ERR_FILE_CHANGED (with a log line naming fn) when the mapped file was
// truncated or written since it was opened, or a read of its mapping
// faulted (it then reads as zeros: gb_port_mapping_faulted); GB_OK for
// anything else. Sessions call it before every forward pass (so that nothing
// runs on a file known to have changed) and after it (so that no token
// computed from changed bytes is handed out).
gb_status model_check_file(const gb_model &m, const Logger &log, const char *fn);
// Weights read through the mapping one row per token and never counted as
// resident (a session's budget, the planner): Gemma 4's per-layer input
// table, inside the file's one tier section.
inline uint64_t streamed_bytes(const gb_model *m) { return m->ple_embd.data ? m->ple_embd.nbytes : 0; }
// A file mapping (not a loaded copy or caller memory): residency hints apply.
inline bool model_mapped(const gb_model *m) { return m->mapping.data && !m->mapping.loaded; }
// Check the CRC of one section; logs the section on mismatch.
gb_status verify_section(const gb_model &m, const SectionRef &s);

// The parts of opening that a .gbx and a GGUF share (model.cpp):
// Lay out the model struct and its arrays (counting or placing); tok_bytes:
// the tokenizer's tables.
gb_model *model_carve(Arena &a, const Meta &meta, size_t tok_bytes, void **tok_mem);
// m->meta = meta, its layer_kind pointed at the model's own copy of the flags.
inline void model_set_meta(gb_model *m, const Meta &meta) {
  m->meta = meta;
  m->meta.layer_kind = m->layer_kinds;
}
// The model's view of tensor kind (TensorKind) of a layer (0 for a global
// one) and tier (for tier matrices and the classifier); nullptr for a kind
// that is none of these.
TensorRef *model_tensor_slot(gb_model *m, uint32_t kind, uint32_t layer, uint32_t tier);
// Tensors outside the tiers: the embedding, norms, biases, RoPE factors
// (every one f32 but the embedding).
inline bool is_common_kind(uint32_t kind) {
  return kind == kTokEmbd || kind == kAttnNorm || kind == kFfnNorm || kind == kOutNorm || kind == kBiasQ || kind == kBiasK ||
         kind == kBiasV || kind == kQNorm || kind == kKNorm || kind == kPostAttnNorm || kind == kPostFfnNorm ||
         kind == kRopeFreqs || kind == kRopeFreqsLong || kind == kConvKernel || (kind >= kGdnAlpha && kind <= kGdnNorm) ||
         (kind >= kPleEmbd && kind <= kLayerScale);
}
// The (rows, cols) a tensor of kind (TensorKind) has in this model.
// Per-layer kinds take the shape of layer `layer` (models whose layers
// differ: Gemma 4).
void expected_shape(const Meta &m, uint32_t kind, uint32_t *rows, uint32_t *cols, uint32_t layer = 0);
// Every hyper-parameter in range and consistent (GB_ERR_CORRUPT, or
// GB_ERR_UNSUPPORTED_TYPE for a setting not run), with a log line.
gb_status check_meta(const Meta *m, const Logger &log);
// Every tensor the model needs is there, optional groups whole (every layer
// or none), RoPE factors positive, the default tier present.
gb_status check_model_tensors(gb_model *m, const Logger &log);
// The model's memory: opt.mem (checked against bytes) or the port's.
gb_status model_mem(const gb_model_options &opt, size_t bytes, const Logger &log, void **mem);
void model_count_params(gb_model *m);
// A GGUF opened in place (model_gguf.cpp): model_open's contract; parts:
// the other files of a split one (the model takes their mappings on
// success).
gb_status model_open_gguf(const uint8_t *p, uint64_t size, const gb_model_options &opt, const Logger &log,
                          const gb_port_mapping *mapping, gb_model **out, size_t *mem_bytes_out,
                          const GgufPart *parts = nullptr, uint32_t n_parts = 0);
// The number of files of the GGUF at p (its "split.count", 1 when it has
// none) and which one it is ("split.no", from 0). Statuses of the GGUF
// parser; GB_ERR_CORRUPT for a split key out of range.
gb_status gguf_split_of(const uint8_t *p, uint64_t size, const Logger &log, uint32_t *no, uint32_t *count);
// The bytes of section s that lie in the first file (a split GGUF's tier
// spans several): what residency hints and measurements may touch.
inline uint64_t section_span_in_file(const gb_model *m, const SectionRef &s) {
  return s.offset >= m->size ? 0 : (s.size < m->size - s.offset ? s.size : m->size - s.offset);
}
// gb_model_verify of a GGUF opened in place: the metadata's CRC taken at
// open, and every stored scale and float of the tensors in use finite.
gb_status verify_gguf(const gb_model &m);
}  // namespace gb
