// sample_files.h — small, valid input files built in memory: llama2.c
// checkpoints and tokenizers, and GGUF files from an editable description.
// The malformed-input tests and the fuzz seeds start from these and break
// them in controlled ways, so no binary test corpus is stored.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

namespace gb {

struct SampleDims {
  uint32_t dim = 16, hidden = 40, layers = 2, heads = 4, kv_heads = 2, vocab = 300, seq_len = 16;
  bool shared_classifier = true;
  uint64_t seed = 7;
};

// llama2.c checkpoint: 7 x i32 header then f32 tensors (vocab_size negated
// when the classifier is separate).
std::vector<uint8_t> sample_llama2c_checkpoint(const SampleDims &d);
// Byte offsets of the 7 header fields are 0, 4, ..., 24; the tensors follow.
// Offsets (bytes) of each llama2.c array in such a checkpoint, in file order:
// embd, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_real,
// freq_imag, [wcls], end.
std::vector<uint64_t> sample_llama2c_offsets(const SampleDims &d);

// llama2.c tokenizer.bin with `vocab` tokens (vocab >= 259): <unk>, BOS, EOS,
// the 256 byte tokens, then short normal pieces.
std::vector<uint8_t> sample_llama2c_tokenizer(uint32_t vocab);

// ---- GGUF --------------------------------------------------------------------
struct GgufKvSpec {
  std::string key;
  uint32_t type;               // GGUF value type
  std::vector<uint8_t> value;  // encoded value bytes (after the type field)
};

struct GgufTensorSpec {
  std::string name;
  std::vector<uint64_t> ne;   // ne[0] = columns
  uint32_t type;              // ggml type
  std::vector<uint8_t> data;  // stored bytes
  bool fixed_offset = false;  // use `offset` instead of the packed one
  uint64_t offset = 0;        // relative to the data start
};

struct GgufSpec {
  uint32_t version = 3;
  uint32_t layout_alignment = 32;  // used to place data (general.alignment is a key)
  std::vector<GgufKvSpec> kv;
  std::vector<GgufTensorSpec> tensors;

  void set(const std::string &key, uint32_t type, std::vector<uint8_t> value);  // replace or append
  void set_u32(const std::string &key, uint32_t v);
  void set_f32(const std::string &key, float v);
  void set_str(const std::string &key, const std::string &v);
  void remove(const std::string &key);
  GgufTensorSpec *tensor(const std::string &name);
  void remove_tensor(const std::string &name);
};

// Where things landed in a serialized file (for byte-level corruption).
struct GgufLayout {
  size_t counts_off = 0;                   // u64 tensor_count, then u64 kv_count
  std::vector<size_t> kv_off;              // start of each key-value pair
  std::vector<size_t> tensor_info_off;     // start of each tensor info
  size_t infos_end = 0, data_start = 0;
};

std::vector<uint8_t> gguf_serialize(const GgufSpec &s, GgufLayout *layout = nullptr);

// A llama GGUF with the given ggml tensor type for the matrices (F32, F16,
// Q4_0, Q8_0; quantized types need dim and hidden multiples of 32) and F32
// norms, its tokenizer embedded. output.weight is omitted when
// d.shared_classifier.
GgufSpec sample_gguf_spec(const SampleDims &d, uint32_t ggml_type);

// The llama2.c-style SentencePiece tokenizer keys of sample_gguf_spec
// (`vocab` tokens: <unk>, BOS, EOS, 256 byte tokens, short pieces).
void sample_spm_tokenizer(GgufSpec *s, uint32_t vocab);

// The random-weight F32 fixtures of the architectures beyond llama and
// qwen2 (GGUF keys and tensor names as llama.cpp reads them), from a fixed
// seed: the same bytes on every machine, so references computed by llama.cpp
// on a file written once stay valid for the file written at test time.
//   "qwen3":   dim 256, 2 layers, 4 heads of 128 (wider than dim / heads),
//              2 KV heads, ffn 512, per-head Q/K norms, NeoX RoPE base 1e6,
//              tied classifier
//   "smollm3": dim 256, 4 layers (layer 3 takes no RoPE), 4 heads of 64,
//              1 KV head (GQA 4:1), ffn 256, RoPE base 1e5, own classifier
//   "phi3", "phi3-short", "gemma3": tests/fixtures/README.md
//   "lfm2":    dim 256, 6 layers: short convolutions of 3 taps in layers 0,
//              1, 3, 4 (attention.head_count_kv an array, 0 there),
//              attention (4 heads of 64, 2 KV heads, per-head Q/K norms,
//              NeoX RoPE base 1e6) in layers 2 and 5; ffn 256; final norm
//              token_embd_norm; tied classifier
//   "lfm2-small": the same shape at dim 64, 3 layers (2 heads of 32): a
//              fuzz seed
// All: vocabulary 512 (sample_spm_tokenizer), context 256. Another name:
// an empty spec.
struct ArchFixtureDims {
  uint32_t dim, hidden, layers, heads, kv_heads, head_dim, vocab, seq_len;
  float rope_base, eps;
  bool tied;
  uint64_t seed;
};
GgufSpec arch_fixture_spec(const std::string &arch);

// Encoders for GgufKvSpec values.
std::vector<uint8_t> gguf_enc_u32(uint32_t v);
std::vector<uint8_t> gguf_enc_str(const std::string &s);

bool write_file_bytes(const std::string &path, const uint8_t *data, size_t size);

// A fuzz seed: mutations land in [0, focus) most of the time (the header
// and metadata, where parsing decisions are made); weight sets how often the
// replay driver picks it.
struct FuzzSeed {
  std::vector<uint8_t> data;
  size_t focus;
  uint32_t weight;
};

}  // namespace gb
