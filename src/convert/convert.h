// convert.h — writing .gbx model files from other formats. Used by the
// `gearbx convert` command and by the tests. This is tooling, not part of the
// embedded core: it may allocate, but it must never crash or abort on a
// malformed input file — every problem is a gb_status plus a log line — and
// it never damages an existing output file (it writes OUT.tmp and renames).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "common.h"

namespace gb {

struct ConvertOptions {
  // Tiers to write, bit (1u << gb_gear). 0 (the default): low | mid | high |
  // f32 from float weights; from already quantized weights (a K-quant GGUF),
  // only the tier of the source's own formats (gbx_writer.h).
  uint32_t tiers = 0;
  // Format of the token embedding table in the common section: kFmtF32 or kFmtF16.
  // Default: F32 when every source tensor is F32, else F16.
  int embd_format = -1;
  uint32_t page_align = 65536;  // power of two, >= 64
  // Layout of the low (q4) tier's matrices: kLayoutRows16 (the default: 16
  // rows interleaved, what the fastest q4 kernels read; matrices whose row
  // count is not a multiple of 16 stay row-major) or kLayoutRowMajor.
  uint32_t q4_layout = 1;
  bool progress = false;        // progress display on stderr for long conversions
  Logger log;
};

// llama2.c "legacy v0" checkpoint (7 x i32 header, f32 tensors; a negative
// vocab_size means a separate classifier) plus its tokenizer.bin.
gb_status convert_llama2c(const char *checkpoint_path, const char *tokenizer_path, const char *out_path,
                          const ConvertOptions &opt);

// GGUF v3 (v2 accepted) with architecture "llama": F32, F16, Q8_0 and Q4_0
// tensors; tokenizer from tokenizer.ggml.* (model "llama").
gb_status convert_gguf(const char *gguf_path, const char *out_path, const ConvertOptions &opt);
// One tier of a .gbx (gb_gear 0..3, or -1 for the file's default tier) as a
// GGUF file: its tokenizer and its tensors in their own block formats, byte
// for byte (gb_convert_to_gguf).
gb_status export_gguf(const char *gbx_path, const char *out_path, int tier, const Logger &log);

// The TOKENIZER image of a GGUF file (tensors are not read), as convert_gguf
// stores it (gb_convert_gguf_tokenizer).
gb_status gguf_tokenizer(const char *gguf_path, const Logger &log, std::vector<uint8_t> *image);

// Random weights from a spec: a preset ("tinyllama-1.1b") or
// "dim=..,layers=..,hidden=..,heads=..,kv_heads=..,vocab=..,seed=..[,seq_len=..]".
gb_status convert_synthetic(const char *spec, const char *out_path, const ConvertOptions &opt);

}  // namespace gb
