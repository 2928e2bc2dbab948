// gbx_writer.h — streams a .gbx file (layout: format.h) from a model
// description, a vocabulary and a TensorSource. Tensors are pulled from the
// source in row chunks and written one at a time, so memory stays bounded by
// the chunk size whatever the model size; CRCs are computed as bytes are
// produced. The file is written to OUT.tmp and renamed over OUT on success;
// on failure OUT.tmp is removed and OUT is left as it was.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "common.h"
#include "convert.h"
#include "format.h"

namespace gb {

// The META fields (format.h) an importer fills in.
struct GbxModelDesc {
  uint32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  uint32_t vocab_size = 0, seq_len = 0;
  uint32_t rope_type = 0;  // gb_rope_type
  uint32_t rope_dim = 0;
  float rope_theta = 10000.0f, norm_eps = 1e-5f;
  int32_t bos_id = 1, eos_id = 2, unk_id = 0, pad_id = -1;
  uint32_t shared_classifier = 0;
  uint32_t source = 0;  // SourceKind
  uint32_t arch = 1;    // the architecture table's id (src/models/; 1: llama)
  bool qkv_bias = false;    // the source has kBiasQ/K/V for every layer
  bool rope_freqs = false;  // the source has kRopeFreqs
  bool qk_norm = false;     // the source has kQNorm and kKNorm for every layer
  uint32_t nope_period = 0; // META nope_period (format.h)
  bool rope_freqs_long = false;  // the source has kRopeFreqsLong (with kRopeFreqs)
  uint32_t rope_orig_ctx = 0;    // META rope_orig_ctx
  float rope_attn_factor = 1.0f; // META rope_attn_factor
  bool post_norms = false;       // the source has kPostAttnNorm and kPostFfnNorm for every layer
  uint32_t swa_window = 0, swa_period = 0;  // META sliding-window fields
  float rope_theta_swa = 0.0f;   // META rope_theta_swa
  float embed_scale = 1.0f;      // META embed_scale
  float logit_softcap = 0.0f;    // META logit_softcap
  uint32_t ffn_act = 0;          // META ffn_act (FfnAct)
  // Recurrent layers (version 11): what each layer is (LayerKind; empty:
  // every layer is attention), and META's convolution, Gated DeltaNet and
  // gated-attention fields.
  std::vector<uint8_t> layer_kind;
  uint32_t conv_kernel = 0, conv_channels = 0;
  uint32_t gdn_state = 0, gdn_k_heads = 0, gdn_v_heads = 0;
  uint32_t attn_gate = 0;
  uint32_t kind(uint32_t l) const { return l < layer_kind.size() ? layer_kind[l] : (uint32_t)kLayerAttention; }
  std::string name;     // truncated to 63 bytes in the file
};

// The VOCAB section content; pieces hold plain spaces (never U+2581).
// Empty pieces: no VOCAB section (then tokenizer must be set). tokenizer:
// the TOKENIZER section's image (src/tok/tokdata.h), empty for none.
struct GbxVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<uint8_t> types;  // TokenType
  std::vector<uint8_t> tokenizer;
};

// Where the weights come from. Shapes are those of format.h (rows, cols) for
// (kind, layer); the writer asks for row ranges in file order, possibly more
// than once per tensor (the shared classifier reads the embedding again).
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // Rows [row0, row0 + n_rows) of tensor (kind, layer) as floats, row-major,
  // n_rows * cols values. Non-finite values are rejected by the writer.
  virtual gb_status read_f32(uint32_t kind, uint32_t layer, uint32_t row0, uint32_t n_rows, float *out) = 0;
  // The WeightFormat whose rows the source holds (kind, layer) in byte for
  // byte (read_raw copies them), or kFmtCount when it has none (values are
  // then read with read_f32 only).
  virtual uint32_t stored_format(uint32_t kind, uint32_t layer) const { return kFmtCount; }
  bool has_raw(uint32_t kind, uint32_t layer, uint32_t fmt) const { return stored_format(kind, layer) == fmt; }
  // Rows in that native format: n_rows * row_bytes(fmt, cols) bytes.
  virtual gb_status read_raw(uint32_t kind, uint32_t layer, uint32_t fmt, uint32_t row0, uint32_t n_rows, uint8_t *out) {
    return GB_ERR_INTERNAL;
  }
  // True when (kind, layer) is stored in a block-quantized format, so making a
  // different block format from it quantizes twice (the writer warns once).
  virtual bool is_quantized(uint32_t kind, uint32_t layer) const { return false; }
};

// Write `out_path`. desc and vocab must already be validated by the importer
// (the writer re-checks only what its own arithmetic relies on).
// Tiers: opt.tiers selects the gear sections; 0 chooses them. When the
// source's matrices are already quantized (is_quantized), its own formats
// form one tier, copied byte for byte, in the slot nearest its bits per
// weight (under 6.5: low; under 12: mid; else high), and by default it is
// the only tier; any other tier asked for is rounded again from the
// source's values (a warning gives the error this adds). Otherwise 0 means
// low | mid | high | f32.
// opt.embd_format: kFmtF32, kFmtF16 or the embedding's stored format;
// negative: the stored format when the embedding is quantized, else kFmtF16.
// Returns GB_ERR_IO when the output cannot be written, or the first error of
// the source.
gb_status write_gbx(const char *out_path, const GbxModelDesc &desc, const GbxVocab &vocab, TensorSource &src,
                    const ConvertOptions &opt);

// Format stored for each tier: low q4, mid q8, high f16, f32 f32.
uint32_t tier_format(uint32_t gear);
// Expected (rows, cols) of a tensor kind for a model.
void tensor_shape(const GbxModelDesc &d, uint32_t kind, uint32_t *rows, uint32_t *cols);
// The tier matrices of layer l, in file order (their kinds): attention's
// seven, or a recurrent layer's projections then the FFN's three.
uint32_t layer_matrices(const GbxModelDesc &d, uint32_t l, uint32_t out[7]);
// "wq", "token_embd", ... for log lines.
const char *tensor_kind_name(uint32_t kind);

}  // namespace gb
