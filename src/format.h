// format.h — the on-disk layout of a .gbx model file (docs/FORMAT.md is the
// prose version; this header is the normative one for the code).
//
// Everything is little-endian. Readers never cast file bytes to these structs
// through unaligned pointers: they use the load helpers in bytes.h, so a file
// that lies about its sizes cannot make the reader touch memory outside it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "formats.h"  // the formats the kernels define (ids, block sizes, names: arch/formats.inc)

namespace gb {

// ---- header ---------------------------------------------------------------
// offset 0   u8[8]  magic "GEARBX\0\x1a"
// offset 8   u32    version (kGbxVersion)
// offset 12  u32    header_bytes = kHeaderFixedBytes + n_sections * kSectionEntryBytes
// offset 16  u32    n_sections (1..kMaxSections)
// offset 20  u32    page_align: alignment of data sections (power of two, >= 64)
// offset 24  u64    file_size: the exact size of the file
// offset 32  u32    flags (0)
// offset 36  u32    header_crc: CRC32 of bytes [0, header_bytes) with this field as 0
// offset 40  u8[24] reserved, 0
// offset 64  section table: n_sections entries of kSectionEntryBytes
constexpr uint8_t kGbxMagic[8] = {'G', 'E', 'A', 'R', 'B', 'X', 0, 0x1a};
// Version 2 added the optional tensor kinds 13..16 (Q/K/V biases, RoPE
// frequency factors) and the qwen2 architecture id; version 3 the GGUF block
// formats 5..13 (tiers may mix formats, the embedding may use any) and the
// META fields at +144; version 4 the TOKENIZER section (kind 4), with
// which the VOCAB section becomes optional; version 5 the per-head Q/K
// norms (kinds 17, 18) and META's nope_period (+156), with the qwen3 and
// smollm3 architecture ids; version 6 the long-context RoPE factors (kind
// 19) and META's rope_orig_ctx and rope_attn_factor (+160, +164), with the
// phi3 architecture id; version 7 the post-attention and post-FFN norms
// (kinds 20, 21) and META's sliding-window, embedding-scale, logit-cap and
// FFN-activation fields (+168 .. +188), with the gemma3 architecture id;
// version 8 weight format 16 (GGUF's IQ4_XS blocks); version 9 formats
// 17..24 (GGUF's i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M and MXFP4); version 10 formats 25, 26 (GGUF's Q1_0 and Q2_0);
// version 11 recurrent layers: the LAYERS section (kind 5), the tensor
// kinds 22..32 and META's convolution, Gated DeltaNet and gated-attention
// fields (+192 .. +212), with the lfm2 and qwen35 architecture ids; and
// weight format 27 (GGUF's NVFP4).
// Readers accept 1..11.
constexpr uint32_t kGbxVersion = 11;
// The first version holding recurrent layers; the architectures it added,
// and any later, are converted from the model as it opens in place.
constexpr uint32_t kGbxRecurrentVersion = 11;
constexpr uint32_t kGbxMinVersion = 1;
constexpr uint32_t kHeaderFixedBytes = 64;
constexpr uint32_t kSectionEntryBytes = 32;
constexpr uint32_t kMaxSections = 64;
constexpr uint32_t kMetaAlign = 64;        // metadata sections
constexpr uint32_t kDefaultPageAlign = 65536;  // covers 4K, 16K and 64K pages

// Section entry:
// +0 u32 kind (SectionKind)   +4 u32 flags (0)
// +8 u64 offset (aligned: 64 for metadata kinds, page_align for data kinds)
// +16 u64 size                +24 u32 crc32 of the section bytes  +28 u32 reserved 0
enum SectionKind : uint32_t {
  kSecMeta = 1,
  kSecVocab = 2,
  kSecTensors = 3,
  kSecTokenizer = 4,   // version 4: a GGUF tokenizer (src/tok/tokdata.h image)
  kSecLayers = 5,      // version 11: what each layer is (present iff META's conv_kernel != 0)
  kSecCommon = 16,     // tensors every gear uses: embedding, norms
  kSecGearBase = 32,   // kSecGearBase + gb_gear: one section per tier present
};

// ---- META section (kind 1): kMetaBytes, fixed fields ----------------------
// +0   u32 meta_bytes (= kMetaBytes)   +4 u32 arch (Arch)
// +8   u32 dim        +12 u32 hidden_dim  +16 u32 n_layers  +20 u32 n_heads
// +24  u32 n_kv_heads +28 u32 head_dim    +32 u32 vocab_size +36 u32 seq_len
// +40  u32 rope_type (gb_rope_type)       +44 u32 rope_dim
// +48  f32 rope_theta +52 f32 norm_eps
// +56  i32 bos_id     +60 i32 eos_id      +64 i32 unk_id     +68 i32 pad_id
// +72  u32 shared_classifier (0/1)        +76 u32 source (SourceKind)
// +80  char name[64] (NUL-padded)
// Version 3:
// +144 u32 default_gear (gb_gear 0..3, a tier present in the file)
// +148 u8  tier_origin[4] (gb_tier_origin per tier; 0 for an absent tier)
// +152 u32 quantized_source (1: converted from already quantized weights)
// Version 5:
// +156 u32 nope_period: 0, or P > 0: the layers l with (l + 1) % P == 0 take
//          no RoPE (their queries and keys are not rotated)
// Version 6:
// +160 u32 rope_orig_ctx: 0, or the context length the model was trained
//          at: a session with a longer context rotates by the long factors
//          (kind 19) instead of the short ones (kind 16), when the file has both
// +164 f32 rope_attn_factor: the rotated dimensions of queries and keys are
//          multiplied by it; 0 means 1
// Version 7:
// +168 u32 swa_window: 0, or W > 0: the sliding-window layers attend to the
//          keys of the W newest positions only (the query's own included)
// +172 u32 swa_period: with swa_window, layer l slides iff
//          swa_period == 0 or l % swa_period < swa_period - 1 (the last layer
//          of each period is global; at least one layer must be)
// +176 f32 rope_theta_swa: the RoPE base of the sliding layers, which take
//          no frequency factors (kind 16 applies to the global layers only)
// +180 f32 embed_scale: embedding rows are multiplied by it; 0 means 1
// +184 f32 logit_softcap: 0, or c > 0: logits become c * tanh(logit / c)
// +188 u32 ffn_act: 0 SwiGLU (silu(W1 x) * W3 x), 1 GeGLU (gelu(W1 x) * W3 x,
//          the tanh approximation of GELU with its input rounded to binary16,
//          as the reference implementation computes it)
// Version 11 (0 in a model without recurrent layers):
// +192 u32 conv_kernel: 0, or the taps (2..kMaxConvKernel) of the recurrent
//          layers' causal convolution; nonzero iff the file has a LAYERS
//          section
// +196 u32 conv_channels: the channels of that convolution (lfm2: dim; a
//          Gated DeltaNet: 2 * gdn_k_heads * gdn_state + gdn_v_heads * gdn_state)
// +200 u32 gdn_state  +204 u32 gdn_k_heads  +208 u32 gdn_v_heads: a Gated
//          DeltaNet layer's head size, key heads and value heads
// +212 u32 attn_gate (0/1): the query projection's rows are, per head, the
//          head's query then its output gate (kWq has 2 * n_heads * head_dim rows)
// +216 .. kMetaBytes reserved, 0
constexpr uint32_t kMetaBytes = 256;
// arch: an id of the architecture table (src/models/, arch_by_id), which
// also gives the first file version that may hold it. The differences the
// forward pass needs (optional tensors, the RoPE pairing) are recorded in
// the file itself.
// META ffn_act.
enum FfnAct : uint32_t { kFfnSilu = 0, kFfnGelu = 1 };
enum SourceKind : uint32_t { kSourceLlama2c = 1, kSourceGguf = 2, kSourceSynthetic = 3 };

// ---- VOCAB section (kind 2) -----------------------------------------------
// +0  u32 n_tokens (== meta.vocab_size)   +4 u32 max_piece_bytes (<= kMaxPieceBytes)
// +8  u32 blob_bytes                      +12 u32 reserved 0
// +16 f32 scores[n_tokens]
//     u32 offsets[n_tokens + 1]   (offsets[0] = 0, non-decreasing, last = blob_bytes)
//     u8  types[n_tokens]         (TokenType), then zero padding to 4 bytes
//     u8  blob[blob_bytes]        piece bytes; spaces are ' ' (not U+2581)
constexpr uint32_t kMaxPieceBytes = 256;

// ---- TOKENIZER section (kind 4, version 4) ---------------------------------
// The tokenizer image of src/tok/tokdata.h ('GBTK', its own version), byte for
// byte: vocabulary, scores or merges, token types, special ids, add-BOS/EOS
// and space-prefix flags, pre-tokenizer id, chat template text. n_tokens ==
// meta.vocab_size. A file has VOCAB, TOKENIZER or both (then TOKENIZER is
// the one used; VOCAB keeps the file readable by version-3 readers' code).
enum TokenType : uint8_t {
  kTokNormal = 1,
  kTokUnknown = 2,
  kTokControl = 3,
  kTokUserDefined = 4,
  kTokUnused = 5,
  kTokByte = 6,  // piece is "<0xHH>"; encodes/decodes as the raw byte HH
};

// ---- LAYERS section (kind 5, version 11) -----------------------------------
// +0 u32 n_layers (== meta.n_layers)  +4 u32 reserved 0
// +8 u8 kind[n_layers] (LayerKind), then zero padding to 8 bytes.
// The tensors of a layer follow its kind: an attention layer has kWq..kWo
// (and the optional attention tensors); a short-convolution layer kConvIn,
// kConvOut (tier matrices) and kConvKernel; a Gated DeltaNet layer kGdnQkv,
// kGdnGate, kGdnOut (tier matrices), kConvKernel and kGdnAlpha..kGdnNorm.
// Every layer has the FFN and its norms.

// ---- TENSORS section (kind 3) ---------------------------------------------
// +0 u32 n_tensors  +4 u32 entry_bytes (= kTensorEntryBytes)  +8 u64 reserved 0
// +16 entries:
//   +0 u32 kind (TensorKind)  +4 u32 layer  +8 u32 tier (gb_gear, or kTierCommon)
//   +12 u32 format (WeightFormat)  +16 u32 layout (WeightLayout)
//   +20 u32 rows  +24 u32 cols  +28 u32 section (index into the section table)
//   +32 u64 offset within the section (64-aligned)  +40 u64 nbytes
//   +48 u8[16] reserved 0
// A matrix is W[rows][cols] and computes y[rows] = W x[cols].
// Block formats store ceil(cols / 32) blocks per row; weights past cols are 0.
constexpr uint32_t kTensorEntryBytes = 64;
constexpr uint32_t kTierCommon = 255;
enum TensorKind : uint32_t {
  kTokEmbd = 1,    // (vocab, dim)            common, F32 or F16
  kAttnNorm = 2,   // (1, dim) per layer      common, F32
  kWq = 3,         // (n_heads*head_dim, dim)
  kWk = 4,         // (n_kv_heads*head_dim, dim)
  kWv = 5,         // (n_kv_heads*head_dim, dim)
  kWo = 6,         // (dim, n_heads*head_dim)
  kFfnNorm = 7,    // (1, dim) per layer      common, F32
  kW1 = 8,         // (hidden, dim)  gate
  kW2 = 9,         // (dim, hidden)  down
  kW3 = 10,        // (hidden, dim)  up
  kOutNorm = 11,   // (1, dim)                common, F32
  kClassifier = 12,// (vocab, dim)
  // Optional (version 2), common, F32:
  kBiasQ = 13,     // (1, n_heads*head_dim) per layer, added to Wq x
  kBiasK = 14,     // (1, n_kv_heads*head_dim) per layer
  kBiasV = 15,     // (1, n_kv_heads*head_dim) per layer
  kRopeFreqs = 16, // (1, rope_dim/2): pair i rotates by pos * theta^(-2i/rope_dim) / factor[i]
  // Optional (version 5), common, F32, every layer or none, both or neither:
  kQNorm = 17,     // (1, head_dim) per layer: each query head h = rmsnorm(h) * weight, before RoPE
  kKNorm = 18,     // (1, head_dim) per layer: the same for each key head
  // Optional (version 6), common, F32, only with kind 16:
  kRopeFreqsLong = 19,  // (1, rope_dim/2): kind 16's factors for sessions longer than rope_orig_ctx
  // Optional (version 7), common, F32, every layer or none, both or neither:
  kPostAttnNorm = 20,   // (1, dim) per layer: the attention output is rmsnorm(Wo xb) * weight before the residual add
  kPostFfnNorm = 21,    // (1, dim) per layer: the same for the FFN output
  // Short-convolution layers (version 11): in such a layer the mixer is
  // the gated short convolution (forward.cpp) instead of attention, and its
  // two projections take the attention matrices' places (MatIndex kMatQ and
  // kMatO; kMatK and kMatV stay empty).
  kConvIn = 22,      // (3 * dim, dim) tier matrix: the B, C and X rows, in that order
  kConvOut = 23,     // (dim, dim) tier matrix
  kConvKernel = 24,  // (conv_channels, conv_kernel) per layer, common, F32: each channel's taps, oldest first
  // Gated DeltaNet layers (qwen35; version 11). Tier matrices in the
  // attention matrices' places: the q, k, v rows before their convolution
  // (kMatQ), the output gate z (kMatK), the output projection (kMatO).
  kGdnQkv = 25,      // (2 * gdn_qk_dim + gdn_v_dim, dim)
  kGdnGate = 26,     // (gdn_v_dim, dim)
  kGdnOut = 27,      // (dim, gdn_v_dim)
  // ... and per layer, common: the decay and update-rate projections (any
  // stored format, like the embedding: read a row at a time), F32 vectors.
  kGdnAlpha = 28,    // (gdn_v_heads, dim)
  kGdnBeta = 29,     // (gdn_v_heads, dim)
  kGdnDtBias = 30,   // (1, gdn_v_heads) added to alpha's rows before softplus
  kGdnA = 31,        // (1, gdn_v_heads) the decay rate: negative
  kGdnNorm = 32,     // (1, gdn_state) RMSNorm weight of each value head's output
  kTensorKindMaxV1 = 12,
  kTensorKindMaxV4 = 16,
  kTensorKindMaxV5 = 18,
  kTensorKindMaxV6 = 19,
  kTensorKindMaxV10 = 21,
  kTensorKindMax = 32,
  // Kinds no .gbx version holds (a GGUF opened in place only): Gemma 4's
  // per-layer embedding inputs. The embedding-like table and the matrices
  // may take any stored format (read a row at a time, or multiplied as the
  // tier matrices are); the norms and the layer scale are F32.
  kPleEmbd = 33,       // (vocab, n_layers * ple_dim) per token: each layer's ple_dim inputs
  kPleModelProj = 34,  // (n_layers * ple_dim, dim) the same inputs projected from the embedding
  kPleProjNorm = 35,   // (1, ple_dim) RMSNorm weight of each layer's projected inputs
  kPleGate = 36,       // (ple_dim, dim) per layer: the gate over the residual stream
  kPleProj = 37,       // (dim, ple_dim) per layer: back to the residual stream
  kPlePostNorm = 38,   // (1, dim) per layer
  kLayerScale = 39,    // (1, 1) per layer: the layer's output scale
};
// The most taps a causal convolution (kConvKernel) may have.
constexpr uint32_t kMaxConvKernel = 16;
// What mixes positions in a layer (a .gbx: its LAYERS section, version 11).
enum LayerKind : uint8_t { kLayerAttention = 0, kLayerShortConv = 1, kLayerDeltaNet = 2 };
// File format ids: values written to .gbx files, so spelled out here; they
// are also the kernel tables' indexes. 4 is not a file id (q4 in the 16-row
// layout, in memory only). 5..13 (version 3) are GGUF's own block formats,
// kept byte for byte so a file's quantization runs at its own precision.
enum WeightFormat : uint32_t {
  kFmtF32 = 0,
  kFmtF16 = 1,
  kFmtQ8 = 2,
  kFmtQ4 = 3,
  kFmtQ4_1 = 5,
  kFmtQ5_0 = 6,
  kFmtQ5_1 = 7,
  kFmtIq4nl = 8,
  kFmtQ2K = 9,
  kFmtQ3K = 10,
  kFmtQ4K = 11,
  kFmtQ5K = 12,
  kFmtQ6K = 13,
  kFmtCountV3 = 14,  // files of version 3 use 0..13 (but 4)
  kFmtCountV2 = 4,   // files of version 1 and 2 use 0..3 only
  kFmtIq4xs = 16,    // version 8: GGUF's IQ4_XS blocks
  kFmtIq2xxs = 17,   // version 9: GGUF's i-quants and MXFP4, 17..24
  kFmtIq2xs = 18,
  kFmtIq2s = 19,
  kFmtIq3xxs = 20,
  kFmtIq3s = 21,
  kFmtIq1s = 22,
  kFmtIq1m = 23,
  kFmtMxfp4 = 24,
  kFmtQ1_0 = 25,
  kFmtQ2_0 = 26,
  kFmtNvfp4 = 27,    // version 11: GGUF's NVFP4 blocks
  kFmtCount = 28,    // one past the largest id, memory-only ids included
};
static_assert((int)kFmtF32 == GB_FMT_F32 && (int)kFmtF16 == GB_FMT_F16 && (int)kFmtQ8 == GB_FMT_Q8 && (int)kFmtQ4 == GB_FMT_Q4,
              "file format ids are the kernel tables' indexes");
static_assert((int)kFmtQ4_1 == GB_FMT_Q4_1 && (int)kFmtQ5_0 == GB_FMT_Q5_0 && (int)kFmtQ5_1 == GB_FMT_Q5_1 &&
                  (int)kFmtIq4nl == GB_FMT_IQ4NL && (int)kFmtQ2K == GB_FMT_Q2K && (int)kFmtQ3K == GB_FMT_Q3K &&
                  (int)kFmtQ4K == GB_FMT_Q4K && (int)kFmtQ5K == GB_FMT_Q5K && (int)kFmtQ6K == GB_FMT_Q6K &&
                  (int)kFmtCountV3 == GB_FMT_Q4KR16 && (int)kFmtIq4xs == GB_FMT_IQ4XS && (int)kFmtIq2xxs == GB_FMT_IQ2XXS &&
                  (int)kFmtIq1m == GB_FMT_IQ1M && (int)kFmtMxfp4 == GB_FMT_MXFP4 && (int)kFmtQ1_0 == GB_FMT_Q1_0 &&
                  (int)kFmtQ2_0 == GB_FMT_Q2_0 && (int)kFmtNvfp4 == GB_FMT_NVFP4 && (int)kFmtCount == GB_FMT_COUNT,
              "file format ids are the kernel tables' indexes");
// Layouts: row-major (any format), or kLayoutRows16 = blocks of 16 rows
// interleaved: q4 (version 1+), q4k and q6k (version 3) tier matrices only,
// rows % 16 == 0 (arch/kernels.h and docs/FORMAT.md give the byte order).
// Same bytes per matrix as row-major.
enum WeightLayout : uint32_t { kLayoutRowMajor = 0, kLayoutRows16 = 1, kLayoutCount = 2 };
// In memory only (TensorRef::format, the kernel tables' index): q4, q4k and
// q6k stored in kLayoutRows16. Never written to a file's format field.
constexpr uint32_t kFmtQ4R16 = GB_FMT_Q4R16;
constexpr uint32_t kFmtQ4KR16 = GB_FMT_Q4KR16;
constexpr uint32_t kFmtQ6KR16 = GB_FMT_Q6KR16;
constexpr uint32_t kRows16 = GB_Q4R16_ROWS;
static_assert(GB_Q4R16_ROWS == 16, "one 16-row group size for every interleaved format (krows16.h)");
// The id a file stores with kLayoutRows16 for each memory-only id, and back
// (kFmtCount: the format has no 16-row variant).
inline uint32_t file_format(uint32_t fmt) { return fmt < kFmtCount ? kFormats[fmt].file : fmt; }
inline uint32_t rows16_format(uint32_t fmt) { return fmt < kFmtCount ? kFormats[fmt].rows16 : kFmtCount; }
inline bool is_memory_only_format(uint32_t fmt) { return file_format(fmt) != fmt; }
// Whether a file of `version` may store format id fmt.
inline bool file_format_known(uint32_t fmt, uint32_t version) {
  if (version < 3) return fmt < kFmtCountV2;
  if (fmt < kFmtCountV3) return !is_memory_only_format(fmt);
  if (fmt == kFmtIq4xs) return version >= 8;
  if (fmt >= kFmtIq2xxs && fmt <= kFmtMxfp4) return version >= 9;
  if (fmt == kFmtNvfp4) return version >= 11;
  return version >= 10 && (fmt == kFmtQ1_0 || fmt == kFmtQ2_0);
}
static_assert((uint32_t)GB_FMT_NONE == (uint32_t)kFmtCount, "rows16_format's none");

// Block formats (layout kLayoutRowMajor: rows of blocks, blocks back to back).
// q4 block: u16 fp16 scale d, u8 qs[16]; weight j (0..15) = d * ((qs[j] & 15) - 8),
//           weight j + 16 = d * ((qs[j] >> 4) - 8). 18 bytes per 32 weights.
// q8 block: u16 fp16 scale d, i8 qs[32]; weight j = d * qs[j]. 34 bytes per 32.
// The GGUF formats: arch/kernels.h (their rows hold whole blocks only).
constexpr uint32_t kBlock = GB_QBLOCK;
constexpr uint32_t kQ4BlockBytes = GB_Q4_BLOCK_BYTES;
constexpr uint32_t kQ8BlockBytes = GB_Q8_BLOCK_BYTES;
static_assert(kQ4BlockBytes == 2 + kBlock / 2 && kQ8BlockBytes == 2 + kBlock, "block = fp16 scale + codes");

// Weights per block and bytes per block of a format (f32 / f16: 1 and 4 / 2);
// 0 for an id that is no format.
inline uint32_t format_block(uint32_t fmt) { return fmt < kFmtCount ? kFormats[fmt].weights : 0; }
inline uint32_t format_block_bytes(uint32_t fmt) { return fmt < kFmtCount ? kFormats[fmt].bytes : 0; }
// Formats whose kernels take quantized activations (gb_q8x_block).
inline bool is_block_format(uint32_t fmt) { return fmt < kFmtCount && kFormats[fmt].act; }
// GGUF's own formats (no quantizer here: they are only ever copied).
inline bool is_gguf_format(uint32_t fmt) { return fmt < kFmtCount && kFormats[fmt].gguf; }
// Whether a row of `cols` weights is whole blocks of the format: q8 / q4 pad
// the last block with zeros, the GGUF formats hold whole blocks only.
inline bool format_fits(uint32_t fmt, uint64_t cols) { return !is_gguf_format(fmt) || cols % format_block(fmt) == 0; }

// Bytes of one row of `cols` weights in `fmt` (0 for an unknown id or a
// row a GGUF format cannot hold).
inline uint64_t row_bytes(uint32_t fmt, uint64_t cols) {
  const uint32_t blk = format_block(fmt);
  if (blk == 0 || !format_fits(fmt, cols)) return 0;
  return (cols + blk - 1) / blk * format_block_bytes(fmt);
}

// The format's name as tools print it ("q4k", ...); "?" for another id.
inline const char *format_name(uint32_t fmt) { return fmt < kFmtCount ? kFormats[fmt].name : "?"; }

// Managed matrices per layer, in the order they are written to a gear section.
constexpr uint32_t kLayerMatrices[7] = {kWq, kWk, kWv, kWo, kW1, kW2, kW3};

}  // namespace gb
