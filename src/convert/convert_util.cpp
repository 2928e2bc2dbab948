// convert_util.cpp — input files, the bounded cursor, and the checks shared
// by the importers (see convert_util.h).
#include "convert_util.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "bytes.h"

namespace gb {

InputFile::~InputFile() {
  if (f_) fclose(f_);
}

gb_status InputFile::open(const char *path, const Logger &log, const char *what) {
  GB_RETURN_IF(!path || !*path, log, GB_ERR_NULL_POINTER, "convert: no %s path", what);
  path_ = path;
  f_ = fopen(path, "rb");
  if (!f_) {
    const int e = errno;
    GB_RETURN_IF(e == ENOENT, log, GB_ERR_FILE_NOT_FOUND, "convert: %s '%s' not found", what, path);
    return fail(log, GB_ERR_IO, "convert: cannot open %s '%s': %s", what, path, strerror(e));
  }
  struct stat sb;
  GB_RETURN_IF(fstat(fileno(f_), &sb) != 0 || !S_ISREG(sb.st_mode), log, GB_ERR_IO, "convert: %s '%s' is not a regular file",
               what, path);
  size_ = (uint64_t)sb.st_size;
  return GB_OK;
}

void InputFile::open_memory(const void *p, uint64_t n, const char *name) {
  mem_ = static_cast<const uint8_t *>(p);
  size_ = n;
  path_ = name ? name : "";
}

bool InputFile::read_at(uint64_t off, void *dst, size_t n) {
  if ((!f_ && !mem_) || !in_range(off, n, size_)) return false;
  if (n == 0) return true;
  if (mem_) {
    memcpy(dst, mem_ + off, n);
    return true;
  }
  if (fseeko(f_, (off_t)off, SEEK_SET) != 0) return false;
  return fread(dst, 1, n, f_) == n;
}

bool Cursor::read(void *dst, size_t n) {
  if (!in_range(pos_, n, f_.size())) {
    pos_ = f_.size();
    return false;
  }
  uint8_t *out = static_cast<uint8_t *>(dst);
  while (n > 0) {
    if (pos_ >= buf_start_ && pos_ < buf_start_ + buf_len_) {
      const size_t at = (size_t)(pos_ - buf_start_);
      const size_t k = buf_len_ - at < n ? buf_len_ - at : n;
      memcpy(out, buf_.data() + at, k);
      out += k;
      pos_ += k;
      n -= k;
      continue;
    }
    if (n >= buf_.size()) {  // large reads bypass the buffer
      if (!f_.read_at(pos_, out, n)) return !(io_error_ = true);
      pos_ += n;
      return true;
    }
    const uint64_t left = f_.size() - pos_;
    const size_t fill = left < buf_.size() ? (size_t)left : buf_.size();
    if (!f_.read_at(pos_, buf_.data(), fill)) return !(io_error_ = true);
    buf_start_ = pos_;
    buf_len_ = fill;
  }
  return true;
}

bool Cursor::skip(uint64_t n) {
  if (!in_range(pos_, n, f_.size())) {
    pos_ = f_.size();
    return false;
  }
  pos_ += n;
  return true;
}

bool Cursor::u32(uint32_t *v) {
  uint8_t b[4];
  if (!read(b, 4)) return false;
  *v = ld_u32(b);
  return true;
}

bool Cursor::u64(uint64_t *v) {
  uint8_t b[8];
  if (!read(b, 8)) return false;
  *v = ld_u64(b);
  return true;
}

gb_status check_options(const ConvertOptions &opt, const char *what) {
  const Logger &log = opt.log;
  GB_RETURN_IF((opt.tiers & ~0xFu) != 0, log, GB_ERR_INVALID_ARGUMENT,
               "%s: tiers 0x%x invalid (bits 0..3: low, mid, high, f32; 0: chosen from the source)", what, opt.tiers);
  GB_RETURN_IF(opt.embd_format != -1 && opt.embd_format != (int)kFmtF32 && opt.embd_format != (int)kFmtF16, log,
               GB_ERR_INVALID_ARGUMENT, "%s: embedding format %d invalid (F32 or F16)", what, opt.embd_format);
  GB_RETURN_IF(!is_pow2(opt.page_align) || opt.page_align < 64 || opt.page_align > (1u << 24), log, GB_ERR_INVALID_ARGUMENT,
               "%s: page_align %u must be a power of two in [64, 16 MiB]", what, opt.page_align);
  GB_RETURN_IF(opt.q4_layout >= kLayoutCount, log, GB_ERR_INVALID_ARGUMENT, "%s: q4 layout %u invalid (0 row-major, 1 rows16)",
               what, opt.q4_layout);
  return GB_OK;
}

gb_status check_model_desc(const GbxModelDesc &d, const Logger &log, gb_status bad, const char *what) {
  GB_RETURN_IF(d.dim == 0 || d.dim > kMaxDim, log, bad, "%s: dim %u out of range [1, %u]", what, d.dim, kMaxDim);
  GB_RETURN_IF(d.hidden_dim == 0 || d.hidden_dim > kMaxHidden, log, bad, "%s: hidden_dim %u out of range [1, %u]", what,
               d.hidden_dim, kMaxHidden);
  GB_RETURN_IF(d.n_layers == 0 || d.n_layers > kMaxLayers, log, bad, "%s: n_layers %u out of range [1, %u]", what, d.n_layers,
               kMaxLayers);
  GB_RETURN_IF(d.n_heads == 0 || d.n_kv_heads == 0 || d.n_kv_heads > d.n_heads || d.n_heads % d.n_kv_heads != 0, log, bad,
               "%s: n_heads %u / n_kv_heads %u inconsistent (need n_heads %% n_kv_heads == 0)", what, d.n_heads, d.n_kv_heads);
  GB_RETURN_IF(d.head_dim == 0 || d.head_dim % 2 != 0 || d.head_dim > kMaxHeadDim, log, bad,
               "%s: head_dim %u invalid (even, at most %u)", what, d.head_dim, kMaxHeadDim);
  GB_RETURN_IF((uint64_t)d.n_heads * d.head_dim > kMaxHidden, log, bad, "%s: n_heads * head_dim too large", what);
  GB_RETURN_IF(d.vocab_size == 0 || d.vocab_size > kMaxVocab, log, bad, "%s: vocab_size %u out of range [1, %u]", what,
               d.vocab_size, kMaxVocab);
  GB_RETURN_IF(d.seq_len == 0 || d.seq_len > kMaxSeqLen, log, bad, "%s: seq_len %u out of range [1, %u]", what, d.seq_len,
               kMaxSeqLen);
  GB_RETURN_IF(d.rope_dim == 0 || d.rope_dim > d.head_dim || d.rope_dim % 2 != 0, log, bad,
               "%s: rope dimension %u invalid for head_dim %u", what, d.rope_dim, d.head_dim);
  GB_RETURN_IF(!(isfinite(d.rope_theta) && d.rope_theta > 0.0f), log, bad, "%s: rope theta %g invalid", what,
               (double)d.rope_theta);
  GB_RETURN_IF(!(isfinite(d.norm_eps) && d.norm_eps > 0.0f), log, bad, "%s: norm epsilon %g invalid", what, (double)d.norm_eps);
  return GB_OK;
}

std::string file_stem(const char *path) {
  std::string s = path ? path : "";
  const size_t slash = s.find_last_of('/');
  if (slash != std::string::npos) s = s.substr(slash + 1);
  const size_t dot = s.find_last_of('.');
  if (dot != std::string::npos && dot > 0) s = s.substr(0, dot);
  return s;
}

int byte_piece_value(const std::string &p) {
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    const char c = p[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

gb_status check_vocab(const GbxVocab &v, const GbxModelDesc &d, const Logger &log, const char *what) {
  GB_RETURN_IF(v.pieces.size() != d.vocab_size || v.scores.size() != d.vocab_size || v.types.size() != d.vocab_size, log,
               GB_ERR_SHAPE_MISMATCH, "%s: vocabulary has %zu tokens, the model %u", what, v.pieces.size(), d.vocab_size);
  // The .gbx tokenizer refuses what follows, so a file is never written
  // that cannot be opened: byte tokens must name their byte, pieces that
  // take part in merges must not be empty, and every byte must be encodable.
  bool byte_ok[256] = {false};
  for (size_t i = 0; i < v.pieces.size(); i++) {
    const std::string &p = v.pieces[i];
    const uint8_t t = v.types[i];
    GB_RETURN_IF(p.size() > kMaxPieceBytes, log, GB_ERR_UNSUPPORTED_TYPE, "%s: token %zu is %zu bytes long (the format allows %u)",
                 what, i, p.size(), kMaxPieceBytes);
    GB_RETURN_IF(!isfinite(v.scores[i]), log, GB_ERR_CORRUPT, "%s: token %zu has a non-finite score", what, i);
    GB_RETURN_IF(t < kTokNormal || t > kTokByte, log, GB_ERR_CORRUPT, "%s: token %zu has type %u", what, i, t);
    if (t == kTokByte) {
      const int b = byte_piece_value(p);
      GB_RETURN_IF(b < 0, log, GB_ERR_CORRUPT, "%s: byte token %zu is not of the form <0xHH>", what, i);
      byte_ok[b] = true;
    } else if (t == kTokNormal || t == kTokUserDefined) {
      GB_RETURN_IF(p.empty(), log, GB_ERR_CORRUPT, "%s: token %zu is an empty piece", what, i);
      if (p.size() == 1 && (uint8_t)p[0] < 128) byte_ok[(uint8_t)p[0]] = true;
    }
  }
  for (int b = 0; b < 256 && d.unk_id < 0; b++)
    GB_RETURN_IF(!byte_ok[b], log, GB_ERR_CORRUPT, "%s: byte 0x%02X has no byte token and there is no unknown token", what, b);
  const int32_t ids[4] = {d.bos_id, d.eos_id, d.unk_id, d.pad_id};
  static const char *const names[4] = {"bos", "eos", "unk", "pad"};
  for (int i = 0; i < 4; i++)
    GB_RETURN_IF(ids[i] < -1 || ids[i] >= (int32_t)d.vocab_size, log, GB_ERR_CORRUPT, "%s: %s token id %d outside the vocabulary",
                 what, names[i], ids[i]);
  return GB_OK;
}

}  // namespace gb
