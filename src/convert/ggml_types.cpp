// ggml_types.cpp — GGUF's tensor types: names, block geometry and decoding.
// A type is read as the weight format with its GGUF type id in the format
// table (arch/formats.inc), decoded by that format's generic decoder (the
// same float operations as ggml's, in the same order; the library compiles
// it with -ffp-contract=off); BF16, which is no weight format of ours, is
// decoded here.
#include "ggml_types.h"

#include <string.h>

#include "bytes.h"
#include "formats.h"

namespace gb {

static_assert(kFormats[GB_FMT_F32].ggml == kGgmlF32 && kFormats[GB_FMT_F16].ggml == kGgmlF16 &&
                  kFormats[GB_FMT_Q8].ggml == kGgmlQ8_0 && kFormats[GB_FMT_Q4].ggml == kGgmlQ4_0 &&
                  kFormats[GB_FMT_Q4_1].ggml == kGgmlQ4_1 && kFormats[GB_FMT_Q5_0].ggml == kGgmlQ5_0 &&
                  kFormats[GB_FMT_Q5_1].ggml == kGgmlQ5_1 && kFormats[GB_FMT_IQ4NL].ggml == kGgmlIQ4_NL &&
                  kFormats[GB_FMT_Q2K].ggml == kGgmlQ2_K && kFormats[GB_FMT_Q3K].ggml == kGgmlQ3_K &&
                  kFormats[GB_FMT_Q4K].ggml == kGgmlQ4_K && kFormats[GB_FMT_Q5K].ggml == kGgmlQ5_K &&
                  kFormats[GB_FMT_Q6K].ggml == kGgmlQ6_K && kFormats[GB_FMT_IQ4XS].ggml == kGgmlIQ4_XS &&
                  kFormats[GB_FMT_IQ2XXS].ggml == kGgmlIQ2_XXS && kFormats[GB_FMT_IQ2XS].ggml == kGgmlIQ2_XS &&
                  kFormats[GB_FMT_IQ2S].ggml == kGgmlIQ2_S && kFormats[GB_FMT_IQ3XXS].ggml == kGgmlIQ3_XXS &&
                  kFormats[GB_FMT_IQ3S].ggml == kGgmlIQ3_S && kFormats[GB_FMT_IQ1S].ggml == kGgmlIQ1_S &&
                  kFormats[GB_FMT_IQ1M].ggml == kGgmlIQ1_M && kFormats[GB_FMT_MXFP4].ggml == kGgmlMXFP4 &&
                  kFormats[GB_FMT_Q1_0].ggml == kGgmlQ1_0 && kFormats[GB_FMT_Q2_0].ggml == kGgmlQ2_0 &&
                  kFormats[GB_FMT_NVFP4].ggml == kGgmlNVFP4 &&
                  format_of_ggml(kGgmlBF16) == GB_FMT_NONE,
              "GGUF's type ids: formats.inc's ggml column and GgmlType agree");

namespace {
const char *const kTypeNames[] = {"F32",  "F16",  "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
                                  "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
                                  "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
                                  "IQ1_M", "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4",
                                  "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4", "NVFP4", "Q1_0", "Q2_0"};
constexpr uint32_t kTypeCount = sizeof kTypeNames / sizeof kTypeNames[0];
}  // namespace

GgmlBlock ggml_block(uint32_t type) {
  if (type == kGgmlBF16) return {1, 2};
  const FormatInfo *f = format_info(format_of_ggml(type));
  return f ? GgmlBlock{f->weights, f->bytes} : GgmlBlock{0, 0};
}

const char *ggml_type_name(uint32_t type) { return type < kTypeCount ? kTypeNames[type] : "unknown"; }

std::string ggml_supported_type_names() {
  std::string s;
  for (uint32_t t = 0; t < kTypeCount; t++)
    if (ggml_type_supported(t)) s += (s.empty() ? "" : ", ") + std::string(kTypeNames[t]);
  return s;
}

bool ggml_row_bytes(uint32_t type, uint64_t cols, uint64_t *out) {
  const GgmlBlock b = ggml_block(type);
  if (b.block == 0 || cols % b.block != 0) return false;
  *out = cols / b.block * b.bytes;
  return true;
}

void ggml_dequantize_row(uint32_t type, const uint8_t *src, float *dst, size_t cols) {
  if (type == kGgmlBF16) {
    for (size_t i = 0; i < cols; i++) {
      const uint32_t u = (uint32_t)ld_u16(src + 2 * i) << 16;
      memcpy(dst + i, &u, 4);
    }
    return;
  }
  // One row of a row-major matrix: rows [0, 1) of the matrix at src.
  if (const FormatInfo *f = format_info(format_of_ggml(type))) f->to_f32(dst, src, 0, 1, cols);
}

}  // namespace gb
