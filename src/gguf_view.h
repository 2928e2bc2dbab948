// gguf_view.h — a GGUF file (v2, v3) read in place: the header, the
// key-value metadata and the tensor directory of bytes that are already in
// memory (a mapping or a caller's buffer). Nothing is copied and nothing is
// allocated here: the optional tables (one entry per key and per tensor)
// live in memory the caller carves, so lookups are a scan of a short table;
// without them every lookup walks the metadata again, which is what the
// counting pass of gb_model_mem_size does.
//
// gguf_view_open checks every length, count, type and offset against the
// size before anything is read, so any byte string gets GB_OK or a specific
// status with a log line.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

namespace gb {

enum GgufValueType : uint32_t {
  kGgufU8 = 0, kGgufI8 = 1, kGgufU16 = 2, kGgufI16 = 3, kGgufU32 = 4, kGgufI32 = 5, kGgufF32 = 6,
  kGgufBool = 7, kGgufString = 8, kGgufArray = 9, kGgufU64 = 10, kGgufI64 = 11, kGgufF64 = 12,
};

// Bytes of one scalar of type t (0 for a string, an array or an unknown
// type), and the fewest bytes any value of type t takes (0: unknown type):
// what bounds a count against the bytes left.
uint64_t gguf_scalar_size(uint32_t t);
uint64_t gguf_min_value_size(uint32_t t);

// "GGUF": the first four bytes of every GGUF file.
inline bool gguf_magic(const uint8_t *p, uint64_t size) {
  return size >= 4 && p[0] == 'G' && p[1] == 'G' && p[2] == 'U' && p[3] == 'F';
}

// One metadata pair: the key's bytes and where the value begins (after its
// type field).
struct GgufKv {
  uint64_t key_off = 0, val_off = 0;
  uint32_t key_len = 0, type = 0;  // GgufValueType
};

// One tensor: the name's bytes, the shape (ne[0] is the row length), ggml's
// type id and where its data lies in the file. nbytes is 0 for a type that
// no weight format reads (the tensor cannot be used, only skipped).
struct GgufTensorInfo {
  uint64_t name_off = 0;
  uint32_t name_len = 0, n_dims = 0;
  uint64_t ne[4] = {1, 1, 1, 1};
  uint32_t type = 0;
  uint64_t offset = 0;  // absolute, in the file
  uint64_t nbytes = 0;
  const uint8_t *base = nullptr;  // the file it lies in (GgufView::tensor sets it)
};

// A typed view of one scalar or string value.
struct GgufScalar {
  uint32_t type = 0;
  bool is_int = false, is_float = false, is_str = false, big = false;  // big: a u64 above INT64_MAX
  int64_t i = 0;
  double f = 0.0;
  const uint8_t *s = nullptr;  // string bytes (not NUL-terminated)
  uint64_t len = 0;
};

// An array value: elem type, count, and where its first element begins.
struct GgufArray {
  uint32_t elem = 0;
  uint64_t count = 0, off = 0;
};

// Limits that keep a hostile header from asking for unbounded work.
constexpr uint64_t kGgufMaxKv = 1u << 16;
constexpr uint64_t kGgufMaxTensors = 1u << 16;
constexpr uint64_t kGgufMaxKeyBytes = 65535;
constexpr uint64_t kGgufMaxNameBytes = 1024;
constexpr uint32_t kGgufMaxDepth = 3;  // arrays in arrays

struct GgufView {
  const uint8_t *base = nullptr;
  uint64_t size = 0;
  uint32_t version = 0, alignment = 32;
  uint64_t n_kv = 0, n_tensors = 0;
  uint64_t kv_start = 0, ti_start = 0, data_start = 0;  // first pair, first tensor info, aligned data
  GgufKv *kv = nullptr;                 // n_kv entries, or nullptr (lookups walk)
  GgufTensorInfo *tensors = nullptr;    // n_tensors entries, or nullptr
  // The other parts of a split file, searched by tensor() after this one
  // (each part is a view of its own file; their keys are not searched).
  const GgufView *next_part = nullptr;

  // The pair / tensor of this name (a tensor also in the later parts);
  // false when absent.
  bool find(const char *key, GgufKv *out) const;
  bool tensor(const char *name, GgufTensorInfo *out) const;
  // The tensor whose directory entry is at *pos (ti_start for the first);
  // *pos moves to the next entry.
  GgufTensorInfo next_tensor(uint64_t *pos) const;
  // A scalar or string value; false when the key is absent or an array.
  bool value(const char *key, GgufScalar *out) const;
  bool array(const char *key, GgufArray *out) const;
  // A string element at *off inside an array (advances *off); the view was
  // validated, so this stays inside the file.
  void next_string(uint64_t *off, const uint8_t **s, uint64_t *len) const;
  bool name_is(const GgufTensorInfo &t, const char *name) const;
};

// Scratch the tables' checks need: 4 * max(n_kv, n_tensors) bytes.
size_t gguf_view_scratch_bytes(uint64_t n_kv, uint64_t n_tensors);

// Read the header (counts for the caller's tables): GB_ERR_BAD_MAGIC,
// GB_ERR_TRUNCATED, GB_ERR_UNSUPPORTED_VERSION, GB_ERR_CORRUPT.
gb_status gguf_view_header(const uint8_t *p, uint64_t size, const Logger &log, uint64_t *n_kv, uint64_t *n_tensors);

// Walk and check the whole metadata and tensor directory. With kv, tensors
// and scratch (entries for the header's counts, gguf_view_scratch_bytes),
// also fill the tables and refuse keys or tensor names that appear twice
// and tensors whose data overlap (a small file must not stand for a huge
// model). Statuses as gguf_view_header, each with a log line.
gb_status gguf_view_open(const uint8_t *p, uint64_t size, const Logger &log, GgufKv *kv, GgufTensorInfo *tensors,
                         uint32_t *scratch, GgufView *out);

// Bytes of a row of `cols` values of ggml type `type`: false when no weight
// format reads the type or cols is not whole blocks.
bool gguf_row_bytes(uint32_t type, uint64_t cols, uint64_t *out);

}  // namespace gb
