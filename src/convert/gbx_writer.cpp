// gbx_writer.cpp — the .gbx writer (see gbx_writer.h). The whole layout is
// planned first (every section and tensor offset follows from the shapes), so
// the metadata sections can be written before any weight is read; the header
// goes last because it holds the data sections' CRCs.
#include "gbx_writer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bytes.h"
#include "crc32.h"
#include "krows16.h"
#include "quant.h"

namespace gb {

uint32_t tier_format(uint32_t gear) {
  static const uint32_t f[GB_GEAR_COUNT] = {kFmtQ4, kFmtQ8, kFmtF16, kFmtF32};
  return gear < GB_GEAR_COUNT ? f[gear] : kFmtF32;
}

void tensor_shape(const GbxModelDesc &d, uint32_t kind, uint32_t *rows, uint32_t *cols) {
  const uint32_t q = d.n_heads * d.head_dim, kv = d.n_kv_heads * d.head_dim, gv = d.gdn_v_heads * d.gdn_state;
  *rows = d.dim;
  *cols = d.dim;
  switch (kind) {
    case kTokEmbd: case kClassifier: *rows = d.vocab_size; break;
    case kAttnNorm: case kFfnNorm: case kOutNorm: case kPostAttnNorm: case kPostFfnNorm: *rows = 1; break;
    case kBiasQ: *rows = 1; *cols = q; break;
    case kBiasK: case kBiasV: *rows = 1; *cols = kv; break;
    case kRopeFreqs: case kRopeFreqsLong: *rows = 1; *cols = d.rope_dim / 2; break;
    case kQNorm: case kKNorm: *rows = 1; *cols = d.head_dim; break;
    case kWq: *rows = q * (d.attn_gate ? 2 : 1); break;
    case kWk: case kWv: *rows = kv; break;
    case kWo: *cols = q; break;
    case kW1: case kW3: *rows = d.hidden_dim; break;
    case kW2: *cols = d.hidden_dim; break;
    case kConvIn: *rows = 3 * d.dim; break;
    case kConvKernel: *rows = d.conv_channels; *cols = d.conv_kernel; break;
    case kGdnQkv: *rows = 2 * d.gdn_k_heads * d.gdn_state + gv; break;
    case kGdnGate: *rows = gv; break;
    case kGdnOut: *cols = gv; break;
    case kGdnAlpha: case kGdnBeta: *rows = d.gdn_v_heads; break;
    case kGdnDtBias: case kGdnA: *rows = 1; *cols = d.gdn_v_heads; break;
    case kGdnNorm: *rows = 1; *cols = d.gdn_state; break;
    default: break;
  }
}

uint32_t layer_matrices(const GbxModelDesc &d, uint32_t l, uint32_t out[7]) {
  static const uint32_t kConv[5] = {kConvIn, kConvOut, kW1, kW2, kW3};
  static const uint32_t kDelta[6] = {kGdnQkv, kGdnGate, kGdnOut, kW1, kW2, kW3};
  const uint32_t k = d.kind(l);
  const uint32_t *src = k == kLayerShortConv ? kConv : k == kLayerDeltaNet ? kDelta : kLayerMatrices;
  const uint32_t n = k == kLayerShortConv ? 5 : k == kLayerDeltaNet ? 6 : 7;
  for (uint32_t i = 0; i < n; i++) out[i] = src[i];
  return n;
}

const char *tensor_kind_name(uint32_t kind) {
  switch (kind) {
    case kTokEmbd: return "token_embd";
    case kAttnNorm: return "attn_norm";
    case kWq: return "wq";
    case kWk: return "wk";
    case kWv: return "wv";
    case kWo: return "wo";
    case kFfnNorm: return "ffn_norm";
    case kW1: return "w1";
    case kW2: return "w2";
    case kW3: return "w3";
    case kOutNorm: return "output_norm";
    case kClassifier: return "classifier";
    case kBiasQ: return "bq";
    case kBiasK: return "bk";
    case kBiasV: return "bv";
    case kRopeFreqs: return "rope_freqs";
    case kRopeFreqsLong: return "rope_freqs_long";
    case kQNorm: return "q_norm";
    case kKNorm: return "k_norm";
    case kPostAttnNorm: return "post_attention_norm";
    case kPostFfnNorm: return "post_ffw_norm";
    case kConvIn: return "conv_in";
    case kConvOut: return "conv_out";
    case kConvKernel: return "conv_kernel";
    case kGdnQkv: return "gdn_qkv";
    case kGdnGate: return "gdn_gate";
    case kGdnOut: return "gdn_out";
    case kGdnAlpha: return "gdn_alpha";
    case kGdnBeta: return "gdn_beta";
    case kGdnDtBias: return "gdn_dt_bias";
    case kGdnA: return "gdn_a";
    case kGdnNorm: return "gdn_norm";
    default: return "?";
  }
}

namespace {

constexpr size_t kChunkValues = size_t(1) << 22;  // floats per read: 16 MiB

struct Planned {
  uint32_t kind, layer, tier, fmt, layout, rows, cols, section;
  uint64_t offset, nbytes;
};

// Rows read per step: as many as fit kChunkValues, at least one, and a
// multiple of 16 when that many fit (a 16-row interleaved tensor is written
// in whole groups).
uint32_t chunk_rows(const Planned &t) {
  uint64_t fit = kChunkValues / t.cols;
  if (fit >= kRows16) fit -= fit % kRows16;
  return fit == 0 ? 1 : (fit < t.rows ? (uint32_t)fit : t.rows);
}

struct Sec {
  uint32_t kind;
  uint64_t offset, size;
  uint32_t crc;
};

class OutFile {
 public:
  ~OutFile() {
    if (f_) fclose(f_);
  }
  bool open(const char *path) {
    f_ = fopen(path, "wb");
    return f_ != nullptr;
  }
  bool write_at(uint64_t off, const void *p, size_t n) {
    if (!f_ || !ok_) return false;
    if (off != pos_ && fseeko(f_, (off_t)off, SEEK_SET) != 0) return ok_ = false;
    if (n && fwrite(p, 1, n, f_) != n) return ok_ = false;
    pos_ = off + n;
    return true;
  }
  bool zeros_at(uint64_t off, uint64_t n) {
    static const uint8_t z[4096] = {0};
    while (n > 0) {
      const size_t k = n < sizeof z ? (size_t)n : sizeof z;
      if (!write_at(off, z, k)) return false;
      off += k;
      n -= k;
    }
    return true;
  }
  bool close() {
    if (!f_) return false;
    const bool flushed = fflush(f_) == 0;
    const bool closed = fclose(f_) == 0;
    f_ = nullptr;
    return ok_ && flushed && closed;
  }

 private:
  FILE *f_ = nullptr;
  uint64_t pos_ = 0;
  bool ok_ = true;
};

class Writer {
 public:
  Writer(const GbxModelDesc &d, const GbxVocab &v, TensorSource &src, const ConvertOptions &opt)
      : d_(d), v_(v), src_(src), opt_(opt), log_(opt.log) {}
  gb_status run(const char *tmp_path);

 private:
  void plan();
  void plan_tiers();
  uint32_t tier_fmt(uint32_t g, uint32_t kind, uint32_t layer) const;
  void report_requant() const;
  void build_meta(std::vector<uint8_t> *b) const;
  void build_layers(std::vector<uint8_t> *b) const;
  void build_vocab(std::vector<uint8_t> *b) const;
  void build_tensors(std::vector<uint8_t> *b) const;
  gb_status write_meta_section(size_t si, const std::vector<uint8_t> &b);
  gb_status write_common();
  gb_status write_gears();
  gb_status fetch_f32(const Planned &t, uint32_t row0, uint32_t n);
  gb_status io_error() const { return fail(log_, GB_ERR_IO, "convert: cannot write '%s'", tmp_path_); }
  void progress(uint64_t bytes);

  const GbxModelDesc &d_;
  const GbxVocab &v_;
  TensorSource &src_;
  const ConvertOptions &opt_;
  Logger log_;
  const char *tmp_path_ = "";
  OutFile out_;
  std::vector<Sec> secs_;
  std::vector<Planned> tensors_;
  size_t n_common_ = 0;
  size_t sec_tensors_ = 0, sec_common_ = 0, sec_gear0_ = 0;  // indexes in secs_
  size_t sec_layers_ = 0;  // index of LAYERS in secs_; 0: none
  uint32_t gears_[GB_GEAR_COUNT] = {0};  // present gears, in order
  uint32_t n_gears_ = 0;
  size_t gear_first_[GB_GEAR_COUNT] = {0};  // index in tensors_ of each present gear's first tensor
  uint32_t embd_fmt_ = kFmtF16;
  std::vector<float> f32_;
  std::vector<uint8_t> buf_;
  std::vector<uint8_t> ilv_;  // a chunk in the 16-row interleaved layout
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
  uint32_t tensors_done_ = 0;
  int shown_pct_ = -1;
  bool warned_requant_ = false;
  // The source's own quantization (plan()).
  bool quantized_ = false;      // some tier matrix is stored quantized in the source
  int native_ = -1;             // the gear slot of the source's own formats, or -1
  uint32_t tiers_ = 0;          // tiers written
  uint32_t default_gear_ = GB_GEAR_MID;
  uint8_t origin_[GB_GEAR_COUNT] = {0};
  double err2_[GB_GEAR_COUNT] = {0}, ref2_[GB_GEAR_COUNT] = {0};  // re-rounding error of derived tiers
  std::vector<float> back_;     // a re-rounded row decoded again
};

// The format tier g stores matrix (kind, layer) in: the source's own format
// in its native slot (f32 where the source has none to copy), else the tier's.
uint32_t Writer::tier_fmt(uint32_t g, uint32_t kind, uint32_t layer) const {
  if ((int)g != native_) return tier_format(g);
  const uint32_t f = src_.stored_format(kind, layer);
  return f < kFmtCount ? f : kFmtF32;
}

void Writer::plan_tiers() {
  // Bits per weight of the source's own formats over the tier matrices.
  uint64_t bytes = 0, weights = 0;
  quantized_ = false;
  auto count = [&](uint32_t kind, uint32_t layer) {
    uint32_t rows, cols;
    tensor_shape(d_, kind, &rows, &cols);
    const uint32_t f = src_.stored_format(kind, layer);
    quantized_ = quantized_ || src_.is_quantized(kind, layer);
    bytes += (uint64_t)rows * row_bytes(f < kFmtCount ? f : kFmtF32, cols);
    weights += (uint64_t)rows * cols;
  };
  uint32_t mats[7];
  for (uint32_t l = 0; l < d_.n_layers; l++)
    for (uint32_t i = 0, n = layer_matrices(d_, l, mats); i < n; i++) count(mats[i], l);
  count(kClassifier, 0);
  const double bits = weights ? (double)bytes * 8.0 / (double)weights : 32.0;
  native_ = !quantized_ ? -1 : bits < 6.5 ? GB_GEAR_LOW : bits < 12.0 ? GB_GEAR_MID : GB_GEAR_HIGH;
  tiers_ = opt_.tiers != 0 ? opt_.tiers : quantized_ ? 1u << native_ : 0xFu;
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
    if (!(tiers_ >> g & 1)) continue;
    // f32 holds any source exactly; the native slot copies the source.
    origin_[g] = (int)g == native_ || tier_format(g) == kFmtF32 ? GB_TIER_ORIGIN_SOURCE
                 : quantized_                                    ? GB_TIER_ORIGIN_REQUANTIZED
                                                                 : GB_TIER_ORIGIN_ROUNDED;
  }
  if (!quantized_ && (tiers_ >> GB_GEAR_HIGH & 1)) {
    // An f16 tier copies an f16 source exactly.
    bool all = true;
    for (uint32_t l = 0; l < d_.n_layers && all; l++)
      for (uint32_t i = 0, n = layer_matrices(d_, l, mats); i < n; i++) all = all && src_.has_raw(mats[i], l, kFmtF16);
    if (all && src_.has_raw(kClassifier, 0, kFmtF16)) origin_[GB_GEAR_HIGH] = GB_TIER_ORIGIN_SOURCE;
  }
  if (native_ >= 0 && (tiers_ >> native_ & 1)) {
    default_gear_ = (uint32_t)native_;
  } else if (tiers_ >> GB_GEAR_MID & 1) {
    default_gear_ = GB_GEAR_MID;
  } else {
    default_gear_ = 0;
    while (!(tiers_ >> default_gear_ & 1)) default_gear_++;
  }
}

void Writer::plan() {
  plan_tiers();
  n_gears_ = 0;
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++)
    if (tiers_ & (1u << g)) gears_[n_gears_++] = g;
  secs_.clear();
  // META, VOCAB (when the source has a llama2.c-style vocabulary), TOKENIZER
  // (when it has a GGUF tokenizer), TENSORS, COMMON, then the gears.
  secs_.push_back(Sec{kSecMeta, 0, 0, 0});
  sec_layers_ = d_.layer_kind.empty() ? 0 : secs_.size();
  if (sec_layers_) secs_.push_back(Sec{kSecLayers, 0, 0, 0});
  if (!v_.pieces.empty()) secs_.push_back(Sec{kSecVocab, 0, 0, 0});
  if (!v_.tokenizer.empty()) secs_.push_back(Sec{kSecTokenizer, 0, 0, 0});
  sec_tensors_ = secs_.size();
  secs_.push_back(Sec{kSecTensors, 0, 0, 0});
  sec_common_ = secs_.size();
  secs_.push_back(Sec{kSecCommon, 0, 0, 0});
  sec_gear0_ = secs_.size();
  for (uint32_t i = 0; i < n_gears_; i++) secs_.push_back(Sec{kSecGearBase + gears_[i], 0, 0, 0});

  // Tensors, in file order; offsets are relative to their section.
  tensors_.clear();
  uint64_t cursor = 0;
  auto add = [&](uint32_t kind, uint32_t layer, uint32_t tier, uint32_t fmt, uint32_t sec) {
    Planned t{};
    t.kind = kind;
    t.layer = layer;
    t.tier = tier;
    t.fmt = fmt;
    tensor_shape(d_, kind, &t.rows, &t.cols);
    t.layout = rows16_format(fmt) != kFmtCount && tier != kTierCommon && opt_.q4_layout == kLayoutRows16 && t.rows % kRows16 == 0 &&
                       kChunkValues / t.cols >= kRows16
                   ? kLayoutRows16
                   : kLayoutRowMajor;
    t.section = sec;
    t.offset = align_up(cursor, 64);
    t.nbytes = (uint64_t)t.rows * row_bytes(fmt, t.cols);
    cursor = t.offset + t.nbytes;
    tensors_.push_back(t);
  };
  add(kTokEmbd, 0, kTierCommon, embd_fmt_, (uint32_t)sec_common_);
  for (uint32_t l = 0; l < d_.n_layers; l++) {
    add(kAttnNorm, l, kTierCommon, kFmtF32, (uint32_t)sec_common_);
    add(kFfnNorm, l, kTierCommon, kFmtF32, (uint32_t)sec_common_);
  }
  add(kOutNorm, 0, kTierCommon, kFmtF32, (uint32_t)sec_common_);
  if (d_.qkv_bias)
    for (uint32_t l = 0; l < d_.n_layers; l++)
      for (uint32_t k : {kBiasQ, kBiasK, kBiasV}) add(k, l, kTierCommon, kFmtF32, (uint32_t)sec_common_);
  if (d_.rope_freqs) add(kRopeFreqs, 0, kTierCommon, kFmtF32, (uint32_t)sec_common_);
  if (d_.rope_freqs_long) add(kRopeFreqsLong, 0, kTierCommon, kFmtF32, (uint32_t)sec_common_);
  if (d_.qk_norm)
    for (uint32_t l = 0; l < d_.n_layers; l++)
      for (uint32_t k : {kQNorm, kKNorm})
        if (d_.kind(l) == kLayerAttention) add(k, l, kTierCommon, kFmtF32, (uint32_t)sec_common_);
  if (d_.post_norms)
    for (uint32_t l = 0; l < d_.n_layers; l++)
      for (uint32_t k : {kPostAttnNorm, kPostFfnNorm}) add(k, l, kTierCommon, kFmtF32, (uint32_t)sec_common_);
  // Recurrent layers: the convolution's taps; a Gated DeltaNet's alpha and
  // beta projections as the source stores them (f32 when it has no format
  // of ours), its three vectors f32.
  for (uint32_t l = 0; l < d_.n_layers; l++) {
    if (d_.kind(l) == kLayerAttention) continue;
    add(kConvKernel, l, kTierCommon, kFmtF32, (uint32_t)sec_common_);
    if (d_.kind(l) != kLayerDeltaNet) continue;
    for (uint32_t k : {kGdnAlpha, kGdnBeta}) {
      const uint32_t f = src_.stored_format(k, l);
      add(k, l, kTierCommon, f < kFmtCount ? f : kFmtF32, (uint32_t)sec_common_);
    }
    for (uint32_t k : {kGdnDtBias, kGdnA, kGdnNorm}) add(k, l, kTierCommon, kFmtF32, (uint32_t)sec_common_);
  }
  n_common_ = tensors_.size();
  secs_[sec_common_].size = cursor;
  uint32_t mats[7];
  for (uint32_t i = 0; i < n_gears_; i++) {
    const uint32_t g = gears_[i];
    cursor = 0;
    gear_first_[i] = tensors_.size();
    for (uint32_t l = 0; l < d_.n_layers; l++)
      for (uint32_t j = 0, n = layer_matrices(d_, l, mats); j < n; j++)
        add(mats[j], l, g, tier_fmt(g, mats[j], l), (uint32_t)(sec_gear0_ + i));
    add(kClassifier, 0, g, tier_fmt(g, kClassifier, 0), (uint32_t)(sec_gear0_ + i));
    secs_[sec_gear0_ + i].size = cursor;
  }

  // Section sizes of the metadata, then offsets.
  uint64_t blob = 0;
  for (const std::string &p : v_.pieces) blob += p.size();
  const uint64_t n = d_.vocab_size;
  secs_[0].size = kMetaBytes;
  for (Sec &sec : secs_) {
    if (sec.kind == kSecLayers) sec.size = align_up(8ull + d_.n_layers, 8);
    if (sec.kind == kSecVocab) sec.size = 16 + 4 * n + 4 * (n + 1) + align_up(n, 4) + blob;
    if (sec.kind == kSecTokenizer) sec.size = v_.tokenizer.size();
  }
  secs_[sec_tensors_].size = 16 + (uint64_t)tensors_.size() * kTensorEntryBytes;
  uint64_t end = kHeaderFixedBytes + (uint64_t)secs_.size() * kSectionEntryBytes;
  for (Sec &s : secs_) {
    const bool data = s.kind == kSecCommon || s.kind >= kSecGearBase;
    s.offset = align_up(end, data ? opt_.page_align : kMetaAlign);
    end = s.offset + s.size;
  }
  total_bytes_ = 0;
  for (const Planned &t : tensors_) total_bytes_ += t.nbytes;
}

void Writer::build_meta(std::vector<uint8_t> *b) const {
  b->assign(kMetaBytes, 0);
  uint8_t *p = b->data();
  const uint32_t u[10] = {d_.dim, d_.hidden_dim, d_.n_layers, d_.n_heads, d_.n_kv_heads,
                          d_.head_dim, d_.vocab_size, d_.seq_len, d_.rope_type, d_.rope_dim};
  st_u32(p, kMetaBytes);
  st_u32(p + 4, d_.arch);
  for (int i = 0; i < 10; i++) st_u32(p + 8 + 4 * i, u[i]);
  st_f32(p + 48, d_.rope_theta);
  st_f32(p + 52, d_.norm_eps);
  st_u32(p + 56, (uint32_t)d_.bos_id);
  st_u32(p + 60, (uint32_t)d_.eos_id);
  st_u32(p + 64, (uint32_t)d_.unk_id);
  st_u32(p + 68, (uint32_t)d_.pad_id);
  st_u32(p + 72, d_.shared_classifier);
  st_u32(p + 76, d_.source);
  memcpy(p + 80, d_.name.data(), d_.name.size() < 63 ? d_.name.size() : 63);
  st_u32(p + 144, default_gear_);
  memcpy(p + 148, origin_, GB_GEAR_COUNT);
  st_u32(p + 152, quantized_ ? 1u : 0u);
  st_u32(p + 156, d_.nope_period);
  st_u32(p + 160, d_.rope_orig_ctx);
  st_f32(p + 164, d_.rope_attn_factor);
  st_u32(p + 168, d_.swa_window);
  st_u32(p + 172, d_.swa_period);
  st_f32(p + 176, d_.rope_theta_swa);
  st_f32(p + 180, d_.embed_scale);
  st_f32(p + 184, d_.logit_softcap);
  st_u32(p + 188, d_.ffn_act);
  st_u32(p + 192, d_.conv_kernel);
  st_u32(p + 196, d_.conv_channels);
  st_u32(p + 200, d_.gdn_state);
  st_u32(p + 204, d_.gdn_k_heads);
  st_u32(p + 208, d_.gdn_v_heads);
  st_u32(p + 212, d_.attn_gate);
}

void Writer::build_layers(std::vector<uint8_t> *b) const {
  b->assign(secs_[sec_layers_].size, 0);
  st_u32(b->data(), d_.n_layers);
  for (uint32_t l = 0; l < d_.n_layers; l++) (*b)[8 + l] = (uint8_t)d_.kind(l);
}

void Writer::build_vocab(std::vector<uint8_t> *b) const {
  const uint32_t n = d_.vocab_size;
  b->assign(secs_[sec_layers_ + 1].size, 0);  // VOCAB follows META (and LAYERS) when present
  uint8_t *p = b->data();
  uint32_t blob = 0, max_piece = 0;
  for (const std::string &s : v_.pieces) {
    blob += (uint32_t)s.size();
    if (s.size() > max_piece) max_piece = (uint32_t)s.size();
  }
  st_u32(p, n);
  st_u32(p + 4, max_piece);
  st_u32(p + 8, blob);
  uint8_t *scores = p + 16, *offsets = scores + 4ull * n, *types = offsets + 4ull * (n + 1);
  uint8_t *blob_p = types + align_up(n, 4);
  uint32_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    st_f32(scores + 4ull * i, v_.scores[i]);
    st_u32(offsets + 4ull * i, off);
    types[i] = v_.types[i];
    memcpy(blob_p + off, v_.pieces[i].data(), v_.pieces[i].size());
    off += (uint32_t)v_.pieces[i].size();
  }
  st_u32(offsets + 4ull * n, off);
}

void Writer::build_tensors(std::vector<uint8_t> *b) const {
  b->assign(secs_[sec_tensors_].size, 0);
  uint8_t *p = b->data();
  st_u32(p, (uint32_t)tensors_.size());
  st_u32(p + 4, kTensorEntryBytes);
  for (size_t i = 0; i < tensors_.size(); i++) {
    const Planned &t = tensors_[i];
    uint8_t *e = p + 16 + i * kTensorEntryBytes;
    const uint32_t u[8] = {t.kind, t.layer, t.tier, t.fmt, t.layout, t.rows, t.cols, t.section};
    for (int k = 0; k < 8; k++) st_u32(e + 4 * k, u[k]);
    st_u64(e + 32, t.offset);
    st_u64(e + 40, t.nbytes);
  }
}

gb_status Writer::write_meta_section(size_t si, const std::vector<uint8_t> &b) {
  secs_[si].crc = crc32_update(0, b.data(), b.size());
  if (!out_.write_at(secs_[si].offset, b.data(), b.size())) return io_error();
  return GB_OK;
}

void Writer::progress(uint64_t bytes) {
  done_bytes_ += bytes;
  if (!opt_.progress || total_bytes_ == 0) return;
  const int pct = (int)(done_bytes_ * 100 / total_bytes_);
  if (pct == shown_pct_) return;
  shown_pct_ = pct;
  fprintf(stderr, "\rconvert: %3d%% (tensor %u/%zu)", pct, tensors_done_, tensors_.size());
  if (pct == 100) fputc('\n', stderr);
  fflush(stderr);
}

// Rows of a tensor as floats into f32_, checked finite.
gb_status Writer::fetch_f32(const Planned &t, uint32_t row0, uint32_t n) {
  float *x = f32_.data();
  GB_TRY(src_.read_f32(t.kind, t.layer, row0, n, x));
  const size_t count = (size_t)n * t.cols;
  for (size_t i = 0; i < count; i++)
    GB_RETURN_IF(!isfinite(x[i]), log_, GB_ERR_CORRUPT, "convert: %s (layer %u) row %zu has a non-finite weight",
                 tensor_kind_name(t.kind), t.layer, (size_t)row0 + i / t.cols);
  return GB_OK;
}

gb_status Writer::write_common() {
  Sec &s = secs_[sec_common_];
  uint32_t crc = 0;
  uint64_t pos = 0;
  for (size_t i = 0; i < n_common_; i++) {
    const Planned &t = tensors_[i];
    if (t.offset > pos) {
      if (!out_.zeros_at(s.offset + pos, t.offset - pos)) return io_error();
      static const uint8_t z[64] = {0};
      crc = crc32_update(crc, z, (size_t)(t.offset - pos));
    }
    const uint64_t rb = row_bytes(t.fmt, t.cols);
    const uint32_t chunk = chunk_rows(t);
    const bool raw = src_.has_raw(t.kind, t.layer, t.fmt);
    for (uint32_t r = 0; r < t.rows; r += chunk) {
      const uint32_t n = t.rows - r < chunk ? t.rows - r : chunk;
      if (raw) {
        GB_TRY(src_.read_raw(t.kind, t.layer, t.fmt, r, n, buf_.data()));
      } else {
        GB_TRY(fetch_f32(t, r, n));
        for (uint32_t k = 0; k < n; k++) quantize_row(t.fmt, buf_.data() + k * rb, f32_.data() + (size_t)k * t.cols, t.cols);
      }
      if (!out_.write_at(s.offset + t.offset + r * rb, buf_.data(), n * rb)) return io_error();
      crc = crc32_update(crc, buf_.data(), n * rb);
      progress(n * rb);
    }
    pos = t.offset + t.nbytes;
    tensors_done_++;
  }
  s.crc = crc;
  return GB_OK;
}

// All tier sections advance together: each source tensor is read once per
// row chunk and written to every tier, so a section's bytes are produced in
// order and its CRC can be computed on the fly.
gb_status Writer::write_gears() {
  if (n_gears_ == 0) return GB_OK;
  const size_t per_gear = (tensors_.size() - n_common_) / n_gears_;
  uint32_t crc[GB_GEAR_COUNT] = {0};
  uint64_t pos[GB_GEAR_COUNT] = {0};
  static const uint8_t z[64] = {0};
  for (size_t p = 0; p < per_gear; p++) {
    const Planned &t0 = tensors_[gear_first_[0] + p];
    bool raw[GB_GEAR_COUNT] = {false};
    bool need_f32 = false;
    for (uint32_t i = 0; i < n_gears_; i++) {
      const Planned &t = tensors_[gear_first_[i] + p];
      raw[i] = src_.has_raw(t.kind, t.layer, t.fmt);
      need_f32 = need_f32 || !raw[i];
      // A quantized source is exact in f32; any narrower tier rounds it again.
      if (!raw[i] && t.fmt != kFmtF32 && !warned_requant_ && src_.is_quantized(t.kind, t.layer)) {
        warned_requant_ = true;
        log_.log(GB_LOG_WARN, "convert: re-quantizing already quantized tensors (first: %s layer %u to %s): errors compound",
                 tensor_kind_name(t.kind), t.layer, format_name(t.fmt));
      }
      const uint64_t pad = t.offset - pos[i];
      if (pad) {
        if (!out_.zeros_at(secs_[sec_gear0_ + i].offset + pos[i], pad)) return io_error();
        crc[i] = crc32_update(crc[i], z, (size_t)pad);
      }
    }
    const uint32_t chunk = chunk_rows(t0);
    for (uint32_t r = 0; r < t0.rows; r += chunk) {
      const uint32_t n = t0.rows - r < chunk ? t0.rows - r : chunk;
      if (need_f32) GB_TRY(fetch_f32(t0, r, n));
      for (uint32_t i = 0; i < n_gears_; i++) {
        const Planned &t = tensors_[gear_first_[i] + p];
        const uint64_t rb = row_bytes(t.fmt, t.cols);
        if (raw[i]) {
          GB_TRY(src_.read_raw(t.kind, t.layer, t.fmt, r, n, buf_.data()));
        } else {
          const bool requant = src_.is_quantized(t.kind, t.layer) && t.fmt != kFmtF32;
          for (uint32_t k = 0; k < n; k++) {
            const float *x = f32_.data() + (size_t)k * t.cols;
            quantize_row(t.fmt, buf_.data() + k * rb, x, t.cols);
            if (!requant) continue;
            // The error the second rounding adds, against the source's values.
            dequantize_row(t.fmt, back_.data(), buf_.data() + k * rb, t.cols);
            for (uint32_t c = 0; c < t.cols; c++) {
              const double e = (double)back_[c] - x[c];
              err2_[t.tier] += e * e;
              ref2_[t.tier] += (double)x[c] * x[c];
            }
          }
        }
        const uint8_t *bytes = buf_.data();
        if (t.layout == kLayoutRows16) {
          // r and n are multiples of 16 (chunk_rows): whole groups, which
          // start at the same byte offsets as their first rows do row-major.
          if (t.fmt == kFmtQ4)
            q4_rows16_from_rows(ilv_.data(), buf_.data(), n, t.cols);
          else
            gb_krows16::from_rows(ilv_.data(), buf_.data(), n, t.cols, format_block_bytes(t.fmt));
          bytes = ilv_.data();
        }
        if (!out_.write_at(secs_[sec_gear0_ + i].offset + t.offset + r * rb, bytes, n * rb)) return io_error();
        crc[i] = crc32_update(crc[i], bytes, n * rb);
        progress(n * rb);
      }
    }
    for (uint32_t i = 0; i < n_gears_; i++) {
      const Planned &t = tensors_[gear_first_[i] + p];
      pos[i] = t.offset + t.nbytes;
      tensors_done_++;
    }
  }
  for (uint32_t i = 0; i < n_gears_; i++) secs_[sec_gear0_ + i].crc = crc[i];
  report_requant();
  return GB_OK;
}

// What rounding already quantized weights again cost, per derived tier.
void Writer::report_requant() const {
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++)
    if (origin_[g] == GB_TIER_ORIGIN_REQUANTIZED && ref2_[g] > 0.0)
      log_.log(GB_LOG_WARN,
               "convert: tier %s (%s) was rounded again from the source's quantized weights: relative RMS error %.3f%% "
               "against the source's values",
               gb_gear_name((gb_gear)g), format_name(tier_format(g)), 100.0 * sqrt(err2_[g] / ref2_[g]));
}

gb_status Writer::run(const char *tmp_path) {
  tmp_path_ = tmp_path;
  if (opt_.embd_format >= 0) {
    embd_fmt_ = (uint32_t)opt_.embd_format;
  } else {
    const uint32_t f = src_.stored_format(kTokEmbd, 0);
    embd_fmt_ = src_.is_quantized(kTokEmbd, 0) && f < kFmtCount ? f : kFmtF16;
  }
  GB_RETURN_IF(embd_fmt_ != kFmtF32 && embd_fmt_ != kFmtF16 && !src_.has_raw(kTokEmbd, 0, embd_fmt_), log_, GB_ERR_INVALID_ARGUMENT,
               "convert: embedding format %s: only f32, f16 or the source's own format", format_name(embd_fmt_));
  plan();
  // Buffers for the largest row chunk of any tensor in any format.
  size_t chunk_values = 1, chunk_bytes = 1;
  for (const Planned &t : tensors_) {
    const size_t v = (size_t)chunk_rows(t) * t.cols, b = (size_t)chunk_rows(t) * row_bytes(t.fmt, t.cols);
    chunk_values = v > chunk_values ? v : chunk_values;
    chunk_bytes = b > chunk_bytes ? b : chunk_bytes;
  }
  f32_.resize(chunk_values);
  back_.resize(chunk_values);
  buf_.resize(chunk_bytes);
  ilv_.resize(chunk_bytes);

  if (!out_.open(tmp_path)) return fail(log_, GB_ERR_IO, "convert: cannot create '%s'", tmp_path);
  std::vector<uint8_t> b;
  build_meta(&b);
  GB_TRY(write_meta_section(0, b));
  size_t si = 1;
  if (sec_layers_) {
    build_layers(&b);
    GB_TRY(write_meta_section(si++, b));
  }
  if (!v_.pieces.empty()) {
    build_vocab(&b);
    GB_TRY(write_meta_section(si++, b));
  }
  if (!v_.tokenizer.empty()) GB_TRY(write_meta_section(si++, v_.tokenizer));
  build_tensors(&b);
  GB_TRY(write_meta_section(sec_tensors_, b));
  std::vector<uint8_t>().swap(b);
  GB_TRY(write_common());
  GB_TRY(write_gears());

  // Zero every gap explicitly (header tail to META, between sections).
  const uint64_t header_bytes = kHeaderFixedBytes + (uint64_t)secs_.size() * kSectionEntryBytes;
  uint64_t end = header_bytes;
  for (const Sec &s : secs_) {
    if (!out_.zeros_at(end, s.offset - end)) return io_error();
    end = s.offset + s.size;
  }
  std::vector<uint8_t> h(header_bytes, 0);
  memcpy(h.data(), kGbxMagic, 8);
  st_u32(h.data() + 8, kGbxVersion);
  st_u32(h.data() + 12, (uint32_t)header_bytes);
  st_u32(h.data() + 16, (uint32_t)secs_.size());
  st_u32(h.data() + 20, opt_.page_align);
  st_u64(h.data() + 24, end);
  for (size_t i = 0; i < secs_.size(); i++) {
    uint8_t *e = h.data() + kHeaderFixedBytes + i * kSectionEntryBytes;
    st_u32(e, secs_[i].kind);
    st_u64(e + 8, secs_[i].offset);
    st_u64(e + 16, secs_[i].size);
    st_u32(e + 24, secs_[i].crc);
  }
  st_u32(h.data() + 36, crc32_update(0, h.data(), h.size()));
  if (!out_.write_at(0, h.data(), h.size())) return io_error();
  if (!out_.close()) return io_error();
  return GB_OK;
}

}  // namespace

gb_status write_gbx(const char *out_path, const GbxModelDesc &desc, const GbxVocab &vocab, TensorSource &src,
                    const ConvertOptions &opt) {
  const Logger &log = opt.log;
  GB_RETURN_IF(!out_path || !*out_path, log, GB_ERR_NULL_POINTER, "convert: no output path");
  GB_RETURN_IF((opt.tiers & ~0xFu) != 0, log, GB_ERR_INVALID_ARGUMENT,
               "convert: tiers 0x%x invalid (bits 0..3: low, mid, high, f32; 0: chosen from the source)", opt.tiers);
  GB_RETURN_IF(!is_pow2(opt.page_align) || opt.page_align < 64 || opt.page_align > (1u << 24), log,
               GB_ERR_INVALID_ARGUMENT, "convert: page_align %u must be a power of two in [64, 16 MiB]", opt.page_align);
  GB_RETURN_IF(opt.q4_layout >= kLayoutCount, log, GB_ERR_INVALID_ARGUMENT, "convert: q4 layout %u invalid (0 row-major, 1 rows16)",
               opt.q4_layout);
  GB_RETURN_IF(vocab.pieces.size() != vocab.scores.size() || vocab.pieces.size() != vocab.types.size() ||
                   (!vocab.pieces.empty() && vocab.pieces.size() != desc.vocab_size) ||
                   (vocab.pieces.empty() && vocab.tokenizer.empty()),
               log, GB_ERR_INTERNAL, "convert: vocabulary arrays do not match vocab_size %u", desc.vocab_size);
  std::string tmp = std::string(out_path) + ".tmp";
  gb_status st;
  {
    Writer w(desc, vocab, src, opt);
    st = w.run(tmp.c_str());
  }  // the writer's FILE is closed here, before the rename or the removal
  if (st == GB_OK && rename(tmp.c_str(), out_path) != 0) st = fail(log, GB_ERR_IO, "convert: cannot rename '%s' to '%s'", tmp.c_str(), out_path);
  if (st != GB_OK) remove(tmp.c_str());
  return st;
}

}  // namespace gb
