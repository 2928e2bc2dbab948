// export_gguf.cpp — one tier of a .gbx written back as a GGUF file (version 3,
// alignment 32) that the importer and llama.cpp's reader conventions accept:
// architecture keys, the tokenizer (a GGUF's own TOKENIZER as it came, or a
// llama2.c vocabulary as SentencePiece), and the tier's tensors in their own
// block formats, byte for byte (q4 is GGUF's Q4_0, q8 its Q8_0; 16-row
// interleaved matrices are put back into plain rows). Tensor data streams from
// the mapped model; only one de-interleaved matrix is held at a time.
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "bytes.h"
#include "convert.h"
#include "convert_util.h"
#include "ggml_types.h"
#include "krows16.h"
#include "model.h"
#include "models/arch.h"
#include "quant.h"
#include "tok/pretok.h"

namespace gb {
namespace {

// GGUF value types.
enum : uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kStr = 8, kArr = 9 };
constexpr uint32_t kAlign = 32;

struct Kv {
  std::vector<uint8_t> b;
  uint64_t n = 0;
  void key(const std::string &k, uint32_t type) {
    str(k);
    u32(type);
    n++;
  }
  void u32(uint32_t v) { st_u32(grow(4), v); }
  void u64(uint64_t v) { st_u64(grow(8), v); }
  void f32(float v) { st_f32(grow(4), v); }
  void str(const std::string &s) { bytes(s.data(), s.size()); }
  void bytes(const void *p, size_t len) {
    u64(len);
    const uint8_t *c = static_cast<const uint8_t *>(p);
    b.insert(b.end(), c, c + len);
  }
  uint8_t *grow(size_t k) {
    b.resize(b.size() + k);
    return b.data() + b.size() - k;
  }
  void put_u32(const std::string &k, uint32_t v) {
    key(k, kU32);
    u32(v);
  }
  void put_i32(const std::string &k, int32_t v) {
    key(k, kI32);
    u32((uint32_t)v);
  }
  void put_f32(const std::string &k, float v) {
    key(k, kF32);
    f32(v);
  }
  void put_bool(const std::string &k, bool v) {
    key(k, kBool);
    b.push_back(v ? 1 : 0);
  }
  void put_str(const std::string &k, const std::string &v) {
    key(k, kStr);
    str(v);
  }
  void array_head(const std::string &k, uint32_t elem, uint64_t count) {
    key(k, kArr);
    u32(elem);
    u64(count);
  }
};

// A tensor to write: where its bytes are and how GGUF names and types them.
struct Out {
  std::string name;
  uint32_t ggml = 0;
  uint32_t fmt = 0;           // the .gbx format (memory id: rows16 ones are de-interleaved)
  uint64_t ne0 = 0, ne1 = 0;  // ne1 == 0: one dimension
  const uint8_t *data = nullptr;
  uint64_t nbytes = 0, offset = 0;
  const TensorRef *second = nullptr;  // a fused tensor's second part (its rows follow), same format
};

// GGUF's type of a format (a 16-row one: of its row-major bytes).
gb_status ggml_type_of(uint32_t fmt, uint32_t *out) {
  const FormatInfo *f = format_info(file_format(fmt));
  if (!f || f->ggml == GB_GGML_NONE) return GB_ERR_UNSUPPORTED_TYPE;
  *out = f->ggml;
  return GB_OK;
}

// A matrix's bytes in plain rows (16-row interleaved ones put back).
const uint8_t *row_major(uint32_t fmt, const uint8_t *data, uint64_t rows, uint64_t cols, uint64_t nbytes,
                         std::vector<uint8_t> *buf) {
  if (!is_memory_only_format(fmt)) return data;
  buf->resize((size_t)nbytes);
  if (fmt == kFmtQ4R16)
    q4_rows_from_rows16(buf->data(), data, (size_t)rows, (size_t)cols);
  else
    gb_krows16::to_rows(buf->data(), data, (size_t)rows, (size_t)cols, format_block_bytes(fmt));
  return buf->data();
}

// SentencePiece text of a llama2.c piece: spaces as U+2581.
std::string spm_text(const uint8_t *p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == ' ')
      s += "\xE2\x96\x81";
    else
      s += (char)p[i];
  }
  return s;
}

void put_tokenizer(const gb_model &m, Kv *kv) {
  const gb_tokenizer &t = m.tokenizer;
  if (t.kind == GB_TOKENIZER_LLAMA2C) {
    const VocabView &v = m.vocab;
    kv->put_str("tokenizer.ggml.model", "llama");
    kv->array_head("tokenizer.ggml.tokens", kStr, v.n);
    for (uint32_t i = 0; i < v.n; i++) {
      size_t n;
      const uint8_t *p = v.piece(i, &n);
      kv->str(spm_text(p, n));
    }
    kv->array_head("tokenizer.ggml.scores", kF32, v.n);
    for (uint32_t i = 0; i < v.n; i++) kv->f32(v.score(i));
    kv->array_head("tokenizer.ggml.token_type", kI32, v.n);
    for (uint32_t i = 0; i < v.n; i++) kv->u32(v.type(i));
    if (t.bos >= 0) kv->put_u32("tokenizer.ggml.bos_token_id", (uint32_t)t.bos);
    if (t.eos >= 0) kv->put_u32("tokenizer.ggml.eos_token_id", (uint32_t)t.eos);
    if (t.unk >= 0) kv->put_u32("tokenizer.ggml.unknown_token_id", (uint32_t)t.unk);
    kv->put_bool("tokenizer.ggml.add_bos_token", true);
    kv->put_bool("tokenizer.ggml.add_eos_token", false);
    return;
  }
  const TokView &v = t.tok.v;
  const bool spm = v.kind == kTokKindSpm;
  kv->put_str("tokenizer.ggml.model", spm ? "llama" : v.kind == kTokKindBpe ? "gpt2" : "gemma4");
  if (!spm) kv->put_str("tokenizer.ggml.pre", pretok_name(v.pre));
  kv->array_head("tokenizer.ggml.tokens", kStr, v.n_tokens);
  for (uint32_t i = 0; i < v.n_tokens; i++) {
    uint32_t n;
    const uint8_t *p = v.piece(i, &n);
    kv->bytes(p, n);
  }
  if (spm) {
    kv->array_head("tokenizer.ggml.scores", kF32, v.n_tokens);
    for (uint32_t i = 0; i < v.n_tokens; i++) kv->f32(v.score(i));
  }
  kv->array_head("tokenizer.ggml.token_type", kI32, v.n_tokens);
  for (uint32_t i = 0; i < v.n_tokens; i++) kv->u32(v.type(i));
  if (v.n_merges) {
    kv->array_head("tokenizer.ggml.merges", kStr, v.n_merges);
    for (uint32_t r = 0; r < v.n_merges; r++) {
      uint32_t l, rr, ln, rn;
      int32_t res;
      v.merge(r, &l, &rr, &res);
      const uint8_t *lp = v.piece(l, &ln), *rp = v.piece(rr, &rn);
      std::string s(reinterpret_cast<const char *>(lp), ln);
      s += ' ';
      s.append(reinterpret_cast<const char *>(rp), rn);
      kv->str(s);
    }
  }
  static const char *const kSpecialKeys[kTokSpecialCount] = {
      "tokenizer.ggml.bos_token_id",       "tokenizer.ggml.eos_token_id",
      "tokenizer.ggml.eot_token_id",       "tokenizer.ggml.eom_token_id",
      "tokenizer.ggml.unknown_token_id",   "tokenizer.ggml.padding_token_id",
      "tokenizer.ggml.seperator_token_id", nullptr};
  for (uint32_t k = 0; k < kTokSpecialCount; k++)
    if (kSpecialKeys[k] && v.special[k] >= 0) kv->put_u32(kSpecialKeys[k], (uint32_t)v.special[k]);
  kv->put_bool("tokenizer.ggml.add_bos_token", (v.flags & kTokFlagAddBos) != 0);
  kv->put_bool("tokenizer.ggml.add_eos_token", (v.flags & kTokFlagAddEos) != 0);
  if (spm) kv->put_bool("tokenizer.ggml.add_space_prefix", (v.flags & kTokFlagAddSpacePrefix) != 0);
  if (v.chat_template_len)
    kv->put_str("tokenizer.chat_template",
                std::string(reinterpret_cast<const char *>(v.chat_template), (size_t)v.chat_template_len));
}

}  // namespace

gb_status export_gguf(const char *gbx_path, const char *out_path, int tier, const Logger &log) {
  GB_RETURN_IF(!gbx_path || !out_path, log, GB_ERR_NULL_POINTER, "export: input and output paths are required");
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.log = log.fn;
  mo.log_user = log.user;
  mo.log_level = log.level;
  mo.verify = GB_VERIFY_ALL;
  gb_model *m = nullptr;
  GB_TRY(gb_model_open_file(gbx_path, &mo, &m));
  if (m->gguf_meta_bytes) {  // gearbx opens a GGUF in place: it is what the export would write
    gb_model_close(m);
    return fail(log, GB_ERR_BAD_MAGIC, "export: '%s' is a GGUF file already (the export reads a .gbx)", gbx_path);
  }
  struct Close {
    gb_model *m;
    ~Close() { gb_model_close(m); }
  } close_model{m};
  const Meta &mt = m->meta;
  const uint32_t g = tier < 0 ? mt.default_gear : (uint32_t)tier;
  GB_RETURN_IF(g >= GB_GEAR_COUNT || !(m->gears >> g & 1), log, GB_ERR_UNAVAILABLE, "export: '%s' has no %s tier", gbx_path,
               g < GB_GEAR_COUNT ? gb_gear_name((gb_gear)g) : "such");
  const ArchDef *ad = arch_by_id(mt.arch);  // the model opened: a known architecture
  GB_RETURN_IF(mt.rope_type != ad->rope_type, log, GB_ERR_UNSUPPORTED_TYPE,
               "export: %s RoPE pairing in a %s model has no GGUF spelling", mt.rope_type == GB_ROPE_NEOX ? "NeoX" : "adjacent",
               ad->name);
  const bool qk_norm = m->qk_norm[0][0].data != nullptr;
  GB_RETURN_IF(mt.nope_period != ad->nope_period || (qk_norm && ad->qk_norm == kNever) || (!qk_norm && ad->qk_norm == kMust), log,
               GB_ERR_UNSUPPORTED_TYPE, "export: the model's NoPE layers or Q/K norms differ from what a %s GGUF implies",
               ad->name);
  // What version 7 added (sliding windows, post-norms, GeGLU, a scaled
  // embedding, capped logits: gemma3) has no writer here yet.
  GB_RETURN_IF(mt.swa_window || m->post_norm[0][0].data || mt.ffn_act != kFfnSilu || mt.embed_scale != 1.0f ||
                   mt.logit_softcap != 0.0f,
               log, GB_ERR_UNSUPPORTED_TYPE, "export: %s models (sliding windows, post-norms, GeGLU) cannot be exported to GGUF yet",
               ad->name);
  const std::string arch = ad->name;

  // Tensors, in the order llama.cpp's converters write them.
  std::vector<Out> ts;
  auto add = [&](const std::string &name, const TensorRef &r, bool one_dim) -> gb_status {
    Out o;
    o.name = name;
    o.fmt = r.format;
    GB_RETURN_IF(ggml_type_of(r.format, &o.ggml) != GB_OK, log, GB_ERR_UNSUPPORTED_TYPE, "export: %s has format %s, no GGUF type",
                 name.c_str(), format_name(r.format));
    const uint32_t blk = format_block(r.format);
    GB_RETURN_IF(blk > 1 && r.cols % blk != 0, log, GB_ERR_UNSUPPORTED_TYPE,
                 "export: %s has %u columns, not whole %s blocks of %u (GGUF holds whole blocks only; export an f16 or f32 tier)",
                 name.c_str(), r.cols, format_name(r.format), blk);
    o.ne0 = r.cols;
    o.ne1 = one_dim ? 0 : r.rows;
    o.data = r.data;
    o.nbytes = r.nbytes;
    ts.push_back(o);
    return GB_OK;
  };
  GB_TRY(add("token_embd.weight", m->embd, false));
  const TensorRef &cls = m->classifier[g];
  // A tied classifier stays tied when the tier's copy is the embedding's bytes.
  std::vector<uint8_t> buf;
  const bool tied = mt.shared_classifier && file_format(cls.format) == m->embd.format && cls.nbytes == m->embd.nbytes &&
                    memcmp(row_major(cls.format, cls.data, cls.rows, cls.cols, cls.nbytes, &buf), m->embd.data, cls.nbytes) == 0;
  GB_TRY(add("output_norm.weight", m->out_norm, true));
  if (!tied) GB_TRY(add("output.weight", cls, false));
  if (m->rope_freqs_long.data) {
    GB_TRY(add("rope_factors_long.weight", m->rope_freqs_long, true));
    GB_TRY(add("rope_factors_short.weight", m->rope_freqs, true));
  } else if (m->rope_freqs.data) {
    GB_TRY(add("rope_freqs.weight", m->rope_freqs, true));
  }
  // Architectures whose GGUF holds gate and up as one tensor (ffn_up: the
  // gate rows, then the up rows); their fused Q/K/V may be written apart.
  const bool fuse_gate_up = ad->fused_gate_up == kMust;
  static const char *const kMat[kMatsPerLayer] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"};
  static const char *const kBias[3] = {"attn_q", "attn_k", "attn_v"};
  for (uint32_t l = 0; l < mt.n_layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    GB_TRY(add(p + "attn_norm.weight", m->attn_norm[l], true));
    const TensorRef *mats = m->mats[g] + (size_t)l * kMatsPerLayer;
    for (uint32_t i = 0; i < kMatsPerLayer; i++) {
      if (fuse_gate_up && i == kMat1) continue;
      if (fuse_gate_up && i == kMat3) {
        GB_RETURN_IF(mats[kMat1].format != mats[kMat3].format || mats[kMat1].cols != mats[kMat3].cols, log,
                     GB_ERR_UNSUPPORTED_TYPE,
                     "export: layer %u's gate and up matrices are of different formats (%s, %s); a fused ffn_up needs one", l,
                     format_name(mats[kMat1].format), format_name(mats[kMat3].format));
        GB_TRY(add(p + "ffn_up.weight", mats[kMat1], false));
        ts.back().second = &mats[kMat3];
        ts.back().ne1 += mats[kMat3].rows;
        ts.back().nbytes += mats[kMat3].nbytes;
        continue;
      }
      GB_TRY(add(p + kMat[i] + ".weight", mats[i], false));
    }
    for (uint32_t b = 0; b < 3; b++)
      if (m->bias[b][l].data) GB_TRY(add(p + kBias[b] + ".bias", m->bias[b][l], true));
    if (m->qk_norm[0][l].data) {
      GB_TRY(add(p + "attn_q_norm.weight", m->qk_norm[0][l], true));
      GB_TRY(add(p + "attn_k_norm.weight", m->qk_norm[1][l], true));
    }
    GB_TRY(add(p + "ffn_norm.weight", m->ffn_norm[l], true));
  }

  // Metadata.
  Kv kv;
  kv.put_str("general.architecture", arch);
  kv.put_str("general.name", mt.name);
  kv.put_u32("general.alignment", kAlign);
  kv.put_u32(arch + ".context_length", mt.seq_len);
  kv.put_u32(arch + ".embedding_length", mt.dim);
  kv.put_u32(arch + ".block_count", mt.n_layers);
  kv.put_u32(arch + ".feed_forward_length", mt.hidden_dim);
  kv.put_u32(arch + ".attention.head_count", mt.n_heads);
  kv.put_u32(arch + ".attention.head_count_kv", mt.n_kv_heads);
  if (mt.head_dim * mt.n_heads != mt.dim) {
    kv.put_u32(arch + ".attention.key_length", mt.head_dim);
    kv.put_u32(arch + ".attention.value_length", mt.head_dim);
  }
  kv.put_u32(arch + ".rope.dimension_count", mt.rope_dim);
  kv.put_f32(arch + ".rope.freq_base", mt.rope_theta);
  if (m->rope_freqs_long.data) kv.put_u32(arch + ".rope.scaling.original_context_length", mt.rope_orig_ctx);
  if (mt.rope_attn_factor != 1.0f) kv.put_f32(arch + ".rope.scaling.attn_factor", mt.rope_attn_factor);
  kv.put_f32(arch + ".attention.layer_norm_rms_epsilon", mt.norm_eps);
  kv.put_u32(arch + ".vocab_size", mt.vocab_size);
  put_tokenizer(*m, &kv);

  // Tensor infos; data offsets aligned to 32 from the data start.
  std::vector<uint8_t> head;
  Kv infos;
  uint64_t off = 0;
  for (Out &t : ts) {
    t.offset = off;
    infos.str(t.name);
    infos.u32(t.ne1 ? 2 : 1);
    infos.u64(t.ne0);
    if (t.ne1) infos.u64(t.ne1);
    infos.u32(t.ggml);
    infos.u64(t.offset);
    off = (t.offset + t.nbytes + kAlign - 1) / kAlign * kAlign;
  }
  head.resize(24);
  memcpy(head.data(), "GGUF", 4);
  st_u32(head.data() + 4, 3);
  st_u64(head.data() + 8, ts.size());
  st_u64(head.data() + 16, kv.n);
  head.insert(head.end(), kv.b.begin(), kv.b.end());
  head.insert(head.end(), infos.b.begin(), infos.b.end());
  head.resize((head.size() + kAlign - 1) / kAlign * kAlign, 0);

  const std::string tmp = std::string(out_path) + ".tmp";
  FILE *f = fopen(tmp.c_str(), "wb");
  GB_RETURN_IF(!f, log, GB_ERR_IO, "export: cannot create '%s'", tmp.c_str());
  bool ok = fwrite(head.data(), 1, head.size(), f) == head.size();
  uint64_t pos = 0;
  std::vector<uint8_t> rows;
  static const uint8_t zeros[kAlign] = {0};
  for (const Out &t : ts) {
    if (!ok) break;
    ok = fwrite(zeros, 1, (size_t)(t.offset - pos), f) == t.offset - pos;
    if (t.second) {  // a fused tensor: its parts' rows, one after the other
      const uint64_t n1 = t.nbytes - t.second->nbytes;
      const uint8_t *p = row_major(t.fmt, t.data, t.ne1 - t.second->rows, t.ne0, n1, &rows);
      ok = ok && fwrite(p, 1, (size_t)n1, f) == n1;
      p = row_major(t.fmt, t.second->data, t.second->rows, t.ne0, t.second->nbytes, &rows);
      ok = ok && fwrite(p, 1, (size_t)t.second->nbytes, f) == t.second->nbytes;
    } else {
      const uint8_t *p = row_major(t.fmt, t.data, t.ne1, t.ne0, t.nbytes, &rows);
      ok = ok && fwrite(p, 1, (size_t)t.nbytes, f) == t.nbytes;
    }
    pos = t.offset + t.nbytes;
  }
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp.c_str(), out_path) != 0) {
    remove(tmp.c_str());
    return fail(log, GB_ERR_IO, "export: cannot write '%s'", out_path);
  }
  return GB_OK;
}

}  // namespace gb
