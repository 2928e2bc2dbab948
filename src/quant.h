// quant.h — weight quantizers: f32 rows -> the block formats of format.h.
// Used by the converter and (later) by lazy tiers built inside a session.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gb {

// Quantize one row of `cols` floats into ceil(cols/32) q4 blocks at `out`
// (row_bytes(kFmtQ4, cols) bytes). Symmetric, GGUF Q4_0-compatible: the value
// of largest magnitude m maps to -8, d = m / -8 (rounded to fp16 first).
void quantize_row_q4(uint8_t *out, const float *x, size_t cols);
// q8: d = amax / 127 (fp16), q = round(x / d).
void quantize_row_q8(uint8_t *out, const float *x, size_t cols);
// f16: round to nearest even.
void quantize_row_f16(uint8_t *out, const float *x, size_t cols);
// Dispatch by WeightFormat (kFmtF32 copies).
void quantize_row(uint32_t fmt, uint8_t *out, const float *x, size_t cols);
// Expand a stored row of a row-major format back to floats: the format's
// one decoder (arch/formats.h), bit-exact with ggml's for GGUF's formats.
// A 16-row id (no row on its own) or an unknown one gives zeros.
void dequantize_row(uint32_t fmt, float *out, const uint8_t *row, size_t cols);
// q4 rows (row-major, `rows` a multiple of 16) to the 16-row interleaved
// layout kLayoutRows16 (arch/kernels.h), and back. Same byte count; out and
// in must not overlap.
void q4_rows16_from_rows(uint8_t *out, const uint8_t *in, size_t rows, size_t cols);
void q4_rows_from_rows16(uint8_t *out, const uint8_t *in, size_t rows, size_t cols);
}  // namespace gb
