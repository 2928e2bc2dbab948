// convert_util.h — helpers shared by the importers: input files opened and
// read with bounds checks, a buffered forward cursor for header parsing, the
// model-shape checks every source must pass, and token-type helpers.
#pragma once

#include <stdint.h>
#include <stdio.h>

#include <string>
#include <vector>

#include "common.h"
#include "convert.h"
#include "gbx_writer.h"

namespace gb {

// Limits a converted model must respect: the .gbx reader rejects anything
// larger, so an importer refuses it early with the file's own status.
constexpr uint32_t kMaxDim = 1u << 16;
constexpr uint32_t kMaxHidden = 1u << 18;
constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxHeadDim = 1024;
constexpr uint32_t kMaxVocab = 1u << 22;
constexpr uint32_t kMaxSeqLen = 1u << 22;

// An input file; closes itself.
class InputFile {
 public:
  InputFile() = default;
  ~InputFile();
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;

  // FILE_NOT_FOUND when absent, IO when it cannot be opened or is not a file.
  gb_status open(const char *path, const Logger &log, const char *what);
  // The n bytes at p (the caller keeps them) read as a file named `name`.
  void open_memory(const void *p, uint64_t n, const char *name);
  uint64_t size() const { return size_; }
  const char *path() const { return path_.c_str(); }
  // Exactly n bytes at off; false on a short read (callers check ranges
  // against size() first, so a false here is an I/O error).
  bool read_at(uint64_t off, void *dst, size_t n);

 private:
  FILE *f_ = nullptr;
  const uint8_t *mem_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

// Forward reader over an InputFile with a small buffer. Every read is checked
// against the file size first: past the end -> false with truncated() set.
class Cursor {
 public:
  explicit Cursor(InputFile &f, uint64_t pos = 0) : f_(f), pos_(pos), buf_(65536) {}
  bool read(void *dst, size_t n);
  bool skip(uint64_t n);
  bool u32(uint32_t *v);
  bool u64(uint64_t *v);
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return pos_ <= f_.size() ? f_.size() - pos_ : 0; }
  bool io_error() const { return io_error_; }

 private:
  InputFile &f_;
  uint64_t pos_;
  std::vector<uint8_t> buf_;
  uint64_t buf_start_ = 0;
  size_t buf_len_ = 0;
  bool io_error_ = false;
};

// Options check shared by the three importers (INVALID_ARGUMENT).
gb_status check_options(const ConvertOptions &opt, const char *what);

// Shape sanity of a model description; `bad` is the status to report
// (CORRUPT for a file header, INVALID_ARGUMENT for a synthetic spec).
gb_status check_model_desc(const GbxModelDesc &d, const Logger &log, gb_status bad, const char *what);

// "dir/stories260K.bin" -> "stories260K".
std::string file_stem(const char *path);

// The byte of a piece of the exact form "<0xHH>", else -1.
int byte_piece_value(const std::string &piece);

// Common vocabulary checks: every score finite, piece lengths within
// kMaxPieceBytes, special ids in range (or -1).
gb_status check_vocab(const GbxVocab &v, const GbxModelDesc &d, const Logger &log, const char *what);

// A llama2.c tokenizer.bin holding exactly n_vocab tokens (import_llama2c.cpp).
gb_status read_llama2c_tokenizer(const char *path, uint32_t n_vocab, const Logger &log, GbxVocab *v);
gb_status read_llama2c_tokenizer(InputFile &f, uint32_t n_vocab, const Logger &log, GbxVocab *v);

// A llama2.c checkpoint's 28-byte header h, for a checkpoint of file_size
// bytes named `name`: the model it describes (every field checked, the
// arrays' total size against file_size: TRUNCATED when short, CORRUPT when
// long). Reads nothing but h.
gb_status parse_llama2c_header(const uint8_t *h, uint64_t file_size, const char *name, const Logger &log, GbxModelDesc *d);

}  // namespace gb
