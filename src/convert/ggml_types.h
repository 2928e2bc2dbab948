// ggml_types.h — the tensor types of GGUF files: ggml's type ids and names,
// and the types this reader decodes to f32. Every such type but BF16 is one
// of our weight formats byte for byte (arch/formats.inc gives its GGUF type
// id, block geometry and decoder, which equals ggml's to_float bit for bit:
// tests/test_gguf_fixtures.cpp checks every type against values computed by
// llama.cpp's gguf-py).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>

namespace gb {

// ggml type ids as stored in a GGUF tensor directory.
enum GgmlType : uint32_t {
  kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ5_0 = 6, kGgmlQ5_1 = 7, kGgmlQ8_0 = 8,
  kGgmlQ2_K = 10, kGgmlQ3_K = 11, kGgmlQ4_K = 12, kGgmlQ5_K = 13, kGgmlQ6_K = 14, kGgmlIQ4_NL = 20,
  kGgmlIQ2_XXS = 16, kGgmlIQ2_XS = 17, kGgmlIQ3_XXS = 18, kGgmlIQ1_S = 19, kGgmlIQ3_S = 21, kGgmlIQ2_S = 22,
  kGgmlIQ4_XS = 23, kGgmlIQ1_M = 29, kGgmlBF16 = 30, kGgmlMXFP4 = 39, kGgmlNVFP4 = 40, kGgmlQ1_0 = 41, kGgmlQ2_0 = 42,
};

// Block geometry of a type: `block` values in `bytes` bytes. {0, 0} for a
// type this reader does not decode.
struct GgmlBlock {
  uint32_t block, bytes;
};
GgmlBlock ggml_block(uint32_t type);

// Whether ggml_dequantize_row decodes this type.
inline bool ggml_type_supported(uint32_t type) { return ggml_block(type).block != 0; }

// ggml's name of a type id ("Q4_K", "BF16", ... "unknown").
const char *ggml_type_name(uint32_t type);

// The names of the types ggml_dequantize_row decodes, comma separated, in
// type id order.
std::string ggml_supported_type_names();

// Bytes of a row of `cols` values; false when the type is not supported or
// cols is not a multiple of its block.
bool ggml_row_bytes(uint32_t type, uint64_t cols, uint64_t *out);

// Decode one row of `cols` values (a multiple of the block) to f32. The type
// must be supported. Non-finite block scales decode to non-finite values
// (the caller checks).
void ggml_dequantize_row(uint32_t type, const uint8_t *src, float *dst, size_t cols);

}  // namespace gb
