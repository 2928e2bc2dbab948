// sample_files.cpp — in-memory builders of small valid input files (see
// sample_files.h).
#include "sample_files.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <initializer_list>
#include <utility>

#include "bytes.h"
#include "f16.h"
#include "quant.h"

namespace gb {
namespace {

uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// n weights in [-0.5, 0.5) * scale (norm weights: around 1).
std::vector<float> weights(uint64_t *st, size_t n, float scale, float offset) {
  std::vector<float> w(n);
  for (size_t i = 0; i < n; i++) w[i] = offset + scale * ((float)(mix(st) >> 40) / 16777216.0f - 0.5f);
  return w;
}

// Appends grow the vector first and store in place (GCC 12 warns falsely
// about inserting small arrays at -O3).
uint8_t *grow(std::vector<uint8_t> &b, size_t n) {
  const size_t at = b.size();
  b.resize(at + n);
  return b.data() + at;
}
void put_u32(std::vector<uint8_t> &b, uint32_t v) { st_u32(grow(b, 4), v); }
void put_u64(std::vector<uint8_t> &b, uint64_t v) { st_u64(grow(b, 8), v); }
void put_f32(std::vector<uint8_t> &b, float v) { st_f32(grow(b, 4), v); }
void put_str(std::vector<uint8_t> &b, const std::string &s) {
  put_u64(b, s.size());
  if (!s.empty()) memcpy(grow(b, s.size()), s.data(), s.size());
}

// Tensor element counts of a llama2.c checkpoint, in file order.
std::vector<uint64_t> llama2c_counts(const SampleDims &d) {
  const uint64_t dim = d.dim, hid = d.hidden, L = d.layers, V = d.vocab, kv = (uint64_t)d.kv_heads * (d.dim / d.heads);
  const uint64_t freq = (uint64_t)d.seq_len * (d.dim / d.heads) / 2;
  std::vector<uint64_t> c = {V * dim,       L * dim,       L * dim * dim, L * kv * dim, L * kv * dim, L * dim * dim, L * dim,
                             L * hid * dim, L * dim * hid, L * hid * dim, dim,          freq,         freq};
  if (!d.shared_classifier) c.push_back(V * dim);
  return c;
}

std::vector<uint8_t> encode(const std::vector<float> &w, uint32_t ggml_type, size_t cols) {
  std::vector<uint8_t> out;
  const size_t rows = w.size() / cols;
  if (ggml_type == 0) {
    for (float x : w) put_f32(out, x);
  } else if (ggml_type == 1) {
    for (float x : w) st_u16(grow(out, 2), f32_to_f16(x));
  } else {
    const uint32_t fmt = ggml_type == 2 ? 3u /* q4 */ : 2u /* q8 */;
    const size_t rb = (cols + 31) / 32 * (fmt == 3 ? 18 : 34);
    out.resize(rows * rb);
    for (size_t r = 0; r < rows; r++) quantize_row(fmt, out.data() + r * rb, w.data() + r * cols, cols);
  }
  return out;
}

std::string sample_piece(uint32_t i, bool gguf) {
  char buf[32];
  if (i == 0) return "<unk>";
  if (i == 1) return gguf ? "<s>" : "\n<s>\n";
  if (i == 2) return gguf ? "</s>" : "\n</s>\n";
  if (i < 259) {
    snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
    return buf;
  }
  snprintf(buf, sizeof buf, "%s%c%u", gguf ? "\xE2\x96\x81" : " ", 'a' + (char)(i % 26), i);
  return buf;
}

}  // namespace

std::vector<uint64_t> sample_llama2c_offsets(const SampleDims &d) {
  std::vector<uint64_t> off;
  uint64_t at = 28;
  for (uint64_t c : llama2c_counts(d)) {
    off.push_back(at);
    at += c * 4;
  }
  off.push_back(at);
  return off;
}

std::vector<uint8_t> sample_llama2c_checkpoint(const SampleDims &d) {
  std::vector<uint8_t> b;
  const int32_t vocab = d.shared_classifier ? (int32_t)d.vocab : -(int32_t)d.vocab;
  const int32_t h[7] = {(int32_t)d.dim, (int32_t)d.hidden, (int32_t)d.layers, (int32_t)d.heads, (int32_t)d.kv_heads,
                        vocab,          (int32_t)d.seq_len};
  for (int32_t v : h) put_u32(b, (uint32_t)v);
  uint64_t st = d.seed;
  const std::vector<uint64_t> counts = llama2c_counts(d);
  for (size_t i = 0; i < counts.size(); i++) {
    const bool norm = i == 1 || i == 6 || i == 10;
    for (float x : weights(&st, counts[i], norm ? 0.2f : 0.5f, norm ? 1.0f : 0.0f)) put_f32(b, x);
  }
  return b;
}

std::vector<uint8_t> sample_llama2c_tokenizer(uint32_t vocab) {
  std::vector<uint8_t> b;
  put_u32(b, 16);
  for (uint32_t i = 0; i < vocab; i++) {
    const std::string p = sample_piece(i, false);
    put_f32(b, i < 259 ? 0.0f : -(float)i);
    put_u32(b, (uint32_t)p.size());
    memcpy(grow(b, p.size()), p.data(), p.size());
  }
  return b;
}

std::vector<uint8_t> gguf_enc_u32(uint32_t v) {
  std::vector<uint8_t> b;
  put_u32(b, v);
  return b;
}

std::vector<uint8_t> gguf_enc_str(const std::string &s) {
  std::vector<uint8_t> b;
  put_str(b, s);
  return b;
}

void GgufSpec::set(const std::string &key, uint32_t type, std::vector<uint8_t> value) {
  for (GgufKvSpec &k : kv)
    if (k.key == key) {
      k.type = type;
      k.value = std::move(value);
      return;
    }
  kv.push_back(GgufKvSpec{key, type, std::move(value)});
}
void GgufSpec::set_u32(const std::string &key, uint32_t v) { set(key, 4, gguf_enc_u32(v)); }
void GgufSpec::set_f32(const std::string &key, float v) {
  std::vector<uint8_t> b;
  put_f32(b, v);
  set(key, 6, b);
}
void GgufSpec::set_str(const std::string &key, const std::string &v) { set(key, 8, gguf_enc_str(v)); }
void GgufSpec::remove(const std::string &key) {
  for (size_t i = 0; i < kv.size(); i++)
    if (kv[i].key == key) {
      kv.erase(kv.begin() + (long)i);
      return;
    }
}
GgufTensorSpec *GgufSpec::tensor(const std::string &name) {
  for (GgufTensorSpec &t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}
void GgufSpec::remove_tensor(const std::string &name) {
  for (size_t i = 0; i < tensors.size(); i++)
    if (tensors[i].name == name) {
      tensors.erase(tensors.begin() + (long)i);
      return;
    }
}

std::vector<uint8_t> gguf_serialize(const GgufSpec &s, GgufLayout *layout) {
  GgufLayout l;
  std::vector<uint8_t> b;
  memcpy(grow(b, 4), "GGUF", 4);
  put_u32(b, s.version);
  l.counts_off = b.size();
  put_u64(b, s.tensors.size());
  put_u64(b, s.kv.size());
  for (const GgufKvSpec &k : s.kv) {
    l.kv_off.push_back(b.size());
    put_str(b, k.key);
    put_u32(b, k.type);
    if (!k.value.empty()) memcpy(grow(b, k.value.size()), k.value.data(), k.value.size());
  }
  const uint64_t a = s.layout_alignment ? s.layout_alignment : 32;
  std::vector<uint64_t> offs;
  uint64_t cur = 0;
  for (const GgufTensorSpec &t : s.tensors) {
    l.tensor_info_off.push_back(b.size());
    put_str(b, t.name);
    put_u32(b, (uint32_t)t.ne.size());
    for (uint64_t n : t.ne) put_u64(b, n);
    put_u32(b, t.type);
    const uint64_t off = t.fixed_offset ? t.offset : (cur + a - 1) / a * a;
    if (!t.fixed_offset) cur = off + t.data.size();
    offs.push_back(off);
    put_u64(b, off);
  }
  l.infos_end = b.size();
  l.data_start = (size_t)((b.size() + a - 1) / a * a);
  b.resize(l.data_start, 0);
  for (size_t i = 0; i < s.tensors.size(); i++) {
    const std::vector<uint8_t> &d = s.tensors[i].data;
    if (d.empty()) continue;  // offsets may point anywhere (malformed-file tests)
    const size_t at = l.data_start + (size_t)offs[i];
    if (at + d.size() > b.size()) b.resize(at + d.size(), 0);
    memcpy(b.data() + at, d.data(), d.size());
  }
  if (layout) *layout = l;
  return b;
}

GgufSpec sample_gguf_spec(const SampleDims &d, uint32_t ggml_type) {
  GgufSpec s;
  const uint32_t head = d.dim / d.heads, q = d.heads * head, kv = d.kv_heads * head;
  s.set_str("general.architecture", "llama");
  s.set_str("general.name", "sample");
  s.set_u32("llama.context_length", d.seq_len);
  s.set_u32("llama.embedding_length", d.dim);
  s.set_u32("llama.feed_forward_length", d.hidden);
  s.set_u32("llama.block_count", d.layers);
  s.set_u32("llama.attention.head_count", d.heads);
  s.set_u32("llama.attention.head_count_kv", d.kv_heads);
  s.set_u32("llama.rope.dimension_count", head);
  s.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  sample_spm_tokenizer(&s, d.vocab);

  uint64_t st = d.seed;
  auto mat = [&](const std::string &name, uint32_t rows, uint32_t cols) {
    s.tensors.push_back(
        GgufTensorSpec{name, {cols, rows}, ggml_type, encode(weights(&st, (size_t)rows * cols, 0.5f, 0.0f), ggml_type, cols)});
  };
  auto norm = [&](const std::string &name) {
    s.tensors.push_back(GgufTensorSpec{name, {d.dim}, 0, encode(weights(&st, d.dim, 0.2f, 1.0f), 0, d.dim)});
  };
  mat("token_embd.weight", d.vocab, d.dim);
  norm("output_norm.weight");
  if (!d.shared_classifier) mat("output.weight", d.vocab, d.dim);
  for (uint32_t l = 0; l < d.layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight");
    mat(p + "attn_q.weight", q, d.dim);
    mat(p + "attn_k.weight", kv, d.dim);
    mat(p + "attn_v.weight", kv, d.dim);
    mat(p + "attn_output.weight", d.dim, q);
    norm(p + "ffn_norm.weight");
    mat(p + "ffn_gate.weight", d.hidden, d.dim);
    mat(p + "ffn_down.weight", d.dim, d.hidden);
    mat(p + "ffn_up.weight", d.hidden, d.dim);
  }
  return s;
}

void sample_spm_tokenizer(GgufSpec *sp, uint32_t vocab) {
  GgufSpec &s = *sp;
  s.set_str("tokenizer.ggml.model", "llama");
  std::vector<uint8_t> toks, scores, types;
  put_u32(toks, 8);
  put_u64(toks, vocab);
  put_u32(scores, 6);
  put_u64(scores, vocab);
  put_u32(types, 5);
  put_u64(types, vocab);
  for (uint32_t i = 0; i < vocab; i++) {
    put_str(toks, sample_piece(i, true));
    put_f32(scores, i < 259 ? 0.0f : -(float)i);
    put_u32(types, i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1);
  }
  s.set("tokenizer.ggml.tokens", 9, toks);
  s.set("tokenizer.ggml.scores", 9, scores);
  s.set("tokenizer.ggml.token_type", 9, types);
  s.set_u32("tokenizer.ggml.bos_token_id", 1);
  s.set_u32("tokenizer.ggml.eos_token_id", 2);
  s.set_u32("tokenizer.ggml.unknown_token_id", 0);
}

namespace {

// An array key's value: element type, count, then the elements (u32 or bool).
std::vector<uint8_t> gguf_array(uint32_t elem, const std::vector<uint32_t> &v) {
  std::vector<uint8_t> a = gguf_enc_u32(elem);
  put_u64(a, v.size());
  for (uint32_t x : v) {
    if (elem == 7) {
      a.push_back((uint8_t)x);
    } else {
      const std::vector<uint8_t> e = gguf_enc_u32(x);
      a.insert(a.end(), e.begin(), e.end());
    }
  }
  return a;
}

// gemma4-tiny (weights as the other fixtures', the Q/K norms below apart):
// layers [S, S, G, S, S, G] (the sliding pattern as a boolean
// array, period 3), sliding heads 2 x 64 over 2 KV heads rotated whole (base
// 1e4), global heads 2 x 128 over 1 KV head rotated over their first 32
// dimensions (rope_freqs: 16 factors of 1, then 1e30; base 1e6); the last 3
// layers share the caches of layers 1 (sliding) and 2 (global), with an FFN
// twice as wide (512 against 256); per-layer inputs of 32 values per layer;
// layer output scales near 1; window 16; logits soft-capped at 30.
// gemma4-small: the same shape at dim 64 (the fuzz targets' seed).
GgufSpec gemma4_fixture_spec(bool small, uint64_t seed) {
  GgufSpec s;
  const uint32_t dim = small ? 64 : 256, L = 6, heads = 2, hd = small ? 32 : 128, hs = hd / 2, kvg = 1, kvs = 2, vocab = 512;
  const uint32_t ff = dim, ffw = 2 * dim, P = small ? 8 : 32, shared = 3;
  auto slides = [](uint32_t l) { return l % 3 != 2; };
  const std::string a = "gemma4.";
  s.set_str("general.architecture", "gemma4");
  s.set_str("general.name", small ? "gemma4-small" : "gemma4-tiny");
  s.set_u32(a + "context_length", 1024);
  s.set_u32(a + "embedding_length", dim);
  s.set_u32(a + "block_count", L);
  std::vector<uint32_t> ffs, kvh, pattern;
  for (uint32_t l = 0; l < L; l++) {
    ffs.push_back(l >= L - shared ? ffw : ff);
    kvh.push_back(slides(l) ? kvs : kvg);
    pattern.push_back(slides(l) ? 1 : 0);
  }
  s.set(a + "feed_forward_length", 9, gguf_array(4, ffs));
  s.set_u32(a + "attention.head_count", heads);
  s.set(a + "attention.head_count_kv", 9, gguf_array(4, kvh));
  s.set_u32(a + "attention.key_length", hd);
  s.set_u32(a + "attention.value_length", hd);
  s.set_u32(a + "attention.key_length_swa", hs);
  s.set_u32(a + "attention.value_length_swa", hs);
  s.set_u32(a + "rope.dimension_count", hd);
  s.set_u32(a + "rope.dimension_count_swa", hs);
  s.set_f32(a + "rope.freq_base", 1e6f);
  s.set_f32(a + "rope.freq_base_swa", 1e4f);
  s.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  s.set_u32(a + "attention.sliding_window", 16);
  s.set(a + "attention.sliding_window_pattern", 9, gguf_array(7, pattern));
  s.set_u32(a + "attention.shared_kv_layers", shared);
  s.set_u32(a + "embedding_length_per_layer_input", P);
  s.set_f32(a + "final_logit_softcapping", 30.0f);
  sample_spm_tokenizer(&s, vocab);
  uint64_t st = seed;
  const float sd = 3.4641016f;
  auto mat = [&](const std::string &name, uint32_t rows, uint32_t cols, float stdev) {
    s.tensors.push_back(
        GgufTensorSpec{name, {cols, rows}, 0, encode(weights(&st, (size_t)rows * cols, stdev * sd, 0.0f), 0, cols)});
  };
  auto norm = [&](const std::string &name, uint32_t n) {
    s.tensors.push_back(GgufTensorSpec{name, {n}, 0, encode(weights(&st, n, 0.1f * sd, 1.0f), 0, n)});
  };
  mat("token_embd.weight", vocab, dim, 0.05f);
  norm("output_norm.weight", dim);
  std::vector<float> factors(hd / 2, 1e30f);
  for (uint32_t i = 0; i < hd / 8; i++) factors[i] = 1.0f;
  s.tensors.push_back(GgufTensorSpec{"rope_freqs.weight", {hd / 2}, 0, encode(factors, 0, hd / 2)});
  mat("per_layer_token_embd.weight", vocab, L * P, 0.05f);
  mat("per_layer_model_proj.weight", L * P, dim, 0.05f);
  norm("per_layer_proj_norm.weight", P);
  for (uint32_t l = 0; l < L; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const uint32_t h = slides(l) ? hs : hd, kv = slides(l) ? kvs : kvg, f = l >= L - shared ? ffw : ff;
    const bool own = l < L - shared;
    norm(p + "attn_norm.weight", dim);
    mat(p + "attn_q.weight", heads * h, dim, 0.1f);
    if (own) {
      mat(p + "attn_k.weight", kv * h, dim, 0.1f);
      mat(p + "attn_v.weight", kv * h, dim, 0.05f);
    }
    mat(p + "attn_output.weight", dim, heads * h, 0.05f);
    // Q/K norm weights near h^(-1/4): the attention scale is 1, so this
    // gives the logits of a 1/sqrt(h) attention over unit-RMS heads (a
    // trained model's norms set that spread; weights near 1 would make
    // every query's softmax a near one-hot choice).
    const float c = 1.0f / sqrtf(sqrtf((float)h));
    s.tensors.push_back(GgufTensorSpec{p + "attn_q_norm.weight", {h}, 0, encode(weights(&st, h, 0.1f * sd * c, c), 0, h)});
    if (own)
      s.tensors.push_back(GgufTensorSpec{p + "attn_k_norm.weight", {h}, 0, encode(weights(&st, h, 0.1f * sd * c, c), 0, h)});
    norm(p + "post_attention_norm.weight", dim);
    norm(p + "ffn_norm.weight", dim);
    mat(p + "ffn_gate.weight", f, dim, 0.05f);
    mat(p + "ffn_down.weight", dim, f, 0.05f);
    mat(p + "ffn_up.weight", f, dim, 0.05f);
    norm(p + "post_ffw_norm.weight", dim);
    mat(p + "inp_gate.weight", P, dim, 0.05f);
    mat(p + "proj.weight", dim, P, 0.05f);
    norm(p + "post_norm.weight", dim);
    norm(p + "layer_output_scale.weight", 1);
  }
  return s;
}

}  // namespace

GgufSpec arch_fixture_spec(const std::string &arch) {
  if (arch == "gemma4" || arch == "gemma4-small") return gemma4_fixture_spec(arch == "gemma4-small", 20261207 + (arch != "gemma4"));
  GgufSpec s;
  ArchFixtureDims d;
  if (arch == "qwen3") {
    d = ArchFixtureDims{256, 512, 2, 4, 2, 128, 512, 256, 1e6f, 1e-6f, true, 20261128};
  } else if (arch == "smollm3") {
    d = ArchFixtureDims{256, 256, 4, 4, 1, 64, 512, 256, 1e5f, 1e-5f, false, 20261129};
  } else if (arch == "phi3" || arch == "phi3-short") {
    d = ArchFixtureDims{256, 256, 2, 4, 2, 64, 512, 256, 1e4f, 1e-5f, true, 20261130};
  } else if (arch == "gemma3") {
    d = ArchFixtureDims{256, 256, 4, 2, 1, 64, 512, 1024, 1e6f, 1e-6f, true, 20261201};
  } else if (arch == "lfm2") {
    d = ArchFixtureDims{256, 256, 6, 4, 2, 64, 512, 256, 1e6f, 1e-5f, true, 20261202};
  } else if (arch == "lfm2-small") {  // the fuzz targets' seed: 200 KB
    d = ArchFixtureDims{64, 64, 3, 2, 1, 32, 512, 64, 1e6f, 1e-5f, true, 20261203};
  } else if (arch == "qwen35") {
    d = ArchFixtureDims{256, 256, 4, 4, 2, 64, 512, 256, 1e7f, 1e-6f, true, 20261204};
  } else if (arch == "qwen35-small") {  // the fuzz targets' seed
    d = ArchFixtureDims{64, 64, 4, 2, 1, 32, 512, 64, 1e7f, 1e-6f, true, 20261205};
  } else {
    return s;
  }
  // phi3-short: the phi3 file trained at 256 positions, so that the
  // references' context takes the short LongRoPE factors.
  const bool phi3 = arch == "phi3" || arch == "phi3-short";
  const std::string family = phi3 ? std::string("phi3")
                             : arch == "lfm2-small" ? std::string("lfm2")
                             : arch == "qwen35-small" ? std::string("qwen35")
                                                      : arch;
  // qwen35: Gated DeltaNet in layers 0..2 (every fourth layer is attention),
  // 2 key heads and 4 value heads of state dimension d / 8 (32 at dim 256),
  // convolutions of 4 taps; gated attention with per-head Q/K norms and
  // NeoX RoPE over a quarter of each head (multi-section [3, 3, 2, 0] at
  // head 64); the pre-FFN norm named post_attention_norm.
  const bool qwen35 = family == "qwen35";
  const uint32_t gs = d.dim / 8, ghk = 2, ghv = 4, gqk = ghk * gs, gvd = ghv * gs;
  auto delta_layer = [&](uint32_t l) { return qwen35 && (l + 1) % 4 != 0; };
  const std::string a = family + ".";
  s.set_str("general.architecture", family);
  // (llama.cpp marks tokens of a model whose name contains "phi3" by their
  // text, which the sample vocabulary lacks.)
  s.set_str("general.name", phi3 ? std::string("tiny-random-phi") : arch + "-tiny");
  s.set_u32(a + "context_length", d.seq_len);
  s.set_u32(a + "embedding_length", d.dim);
  s.set_u32(a + "block_count", d.layers);
  s.set_u32(a + "feed_forward_length", d.hidden);
  s.set_u32(a + "attention.head_count", d.heads);
  // lfm2: short-convolution layers 0, 1, 3 and 4 (head_count_kv 0 in its
  // per-layer form), attention layers 2 and 5, three taps.
  const bool lfm2 = family == "lfm2";
  auto conv_layer = [&](uint32_t l) { return lfm2 && l % 3 != 2; };
  if (lfm2) {
    std::vector<uint8_t> arr = gguf_enc_u32(4);  // element type u32
    const std::vector<uint8_t> n = {(uint8_t)d.layers, 0, 0, 0, 0, 0, 0, 0};
    arr.insert(arr.end(), n.begin(), n.end());
    for (uint32_t l = 0; l < d.layers; l++) {
      const std::vector<uint8_t> v = gguf_enc_u32(conv_layer(l) ? 0 : d.kv_heads);
      arr.insert(arr.end(), v.begin(), v.end());
    }
    s.set(a + "attention.head_count_kv", 9, arr);
    s.set_u32(a + "shortconv.l_cache", 3);
  } else if (qwen35) {
    s.set_u32(a + "attention.head_count_kv", d.kv_heads);
    s.set_u32(a + "ssm.conv_kernel", 4);
    s.set_u32(a + "ssm.state_size", gs);
    s.set_u32(a + "ssm.group_count", ghk);
    s.set_u32(a + "ssm.time_step_rank", ghv);
    s.set_u32(a + "ssm.inner_size", gvd);
    s.set_u32(a + "full_attention_interval", 4);
    std::vector<uint8_t> sec = gguf_enc_u32(5);  // element type i32
    const std::vector<uint8_t> n = {4, 0, 0, 0, 0, 0, 0, 0};
    sec.insert(sec.end(), n.begin(), n.end());
    for (uint32_t v : {d.head_dim / 16 - 1, d.head_dim / 16 - 1, d.head_dim / 32, 0u}) {
      const std::vector<uint8_t> e = gguf_enc_u32(v);
      sec.insert(sec.end(), e.begin(), e.end());
    }
    s.set(a + "rope.dimension_sections", 9, sec);
  } else {
    s.set_u32(a + "attention.head_count_kv", d.kv_heads);
  }
  if (d.head_dim * d.heads != d.dim) {
    s.set_u32(a + "attention.key_length", d.head_dim);
    s.set_u32(a + "attention.value_length", d.head_dim);
  }
  // phi3: RoPE over 48 of the 64 dimensions of a head, LongRoPE trained at
  // 128 positions (the references' 256-token context takes the long
  // factors), its attention factor sqrt(1 + ln(256 / 128) / ln 128) as
  // Phi's converter computes it.
  const uint32_t rope_dim = phi3 ? 48 : qwen35 ? d.head_dim / 4 : d.head_dim;
  s.set_u32(a + "rope.dimension_count", rope_dim);
  if (phi3) {
    s.set_u32(a + "rope.scaling.original_context_length", arch == "phi3" ? 128 : 256);
    s.set_f32(a + "rope.scaling.attn_factor", 1.0690450f);
  }
  s.set_f32(a + "rope.freq_base", d.rope_base);
  s.set_f32(a + "attention.layer_norm_rms_epsilon", d.eps);
  // gemma3: layers 0, 1 and 3 slide over 16 positions (a period of 3, the
  // last layer of each period global), with their own RoPE base; the global
  // layer scales positions linearly by 8 (as Gemma 3 4B does); logits are
  // soft-capped at 30.
  if (arch == "gemma3") {
    s.set_u32(a + "attention.sliding_window", 16);
    s.set_u32(a + "attention.sliding_window_pattern", 3);
    s.set_f32(a + "rope.freq_base_swa", 1e4f);
    s.set_str(a + "rope.scaling.type", "linear");
    s.set_f32(a + "rope.scaling.factor", 8.0f);
    s.set_f32(a + "final_logit_softcapping", 30.0f);
  }
  sample_spm_tokenizer(&s, d.vocab);
  // Uniform weights: matrices of standard deviation 0.05, Q and K 0.1 (so
  // that attention is far from uniform and RoPE, its absence and the Q/K
  // norms move the logits), norm weights 1 +- 0.17.
  uint64_t st = d.seed;
  const float sd = 3.4641016f;  // width of a uniform of standard deviation 1
  auto mat = [&](const std::string &name, uint32_t rows, uint32_t cols, float stdev) {
    s.tensors.push_back(
        GgufTensorSpec{name, {cols, rows}, 0, encode(weights(&st, (size_t)rows * cols, stdev * sd, 0.0f), 0, cols)});
  };
  auto norm = [&](const std::string &name, uint32_t n) {
    s.tensors.push_back(GgufTensorSpec{name, {n}, 0, encode(weights(&st, n, 0.1f * sd, 1.0f), 0, n)});
  };
  // A fused projection: the parts' rows one after the other, each drawn at
  // its own standard deviation.
  auto fused = [&](const std::string &name, std::initializer_list<std::pair<uint32_t, float>> parts, uint32_t cols) {
    std::vector<float> w;
    uint32_t rows = 0;
    for (const auto &p : parts) {
      const std::vector<float> part = weights(&st, (size_t)p.first * cols, p.second * sd, 0.0f);
      w.insert(w.end(), part.begin(), part.end());
      rows += p.first;
    }
    s.tensors.push_back(GgufTensorSpec{name, {cols, rows}, 0, encode(w, 0, cols)});
  };
  const uint32_t q = d.heads * d.head_dim, kv = d.kv_heads * d.head_dim;
  mat("token_embd.weight", d.vocab, d.dim, 0.05f);
  norm(lfm2 ? "token_embd_norm.weight" : "output_norm.weight", d.dim);
  if (!d.tied) mat("output.weight", d.vocab, d.dim, 0.05f);
  if (phi3) {
    // LongRoPE factors: short ones near 1, long ones rising from 1 to 8.
    std::vector<float> shortf = weights(&st, rope_dim / 2, 0.2f, 1.1f), longf(rope_dim / 2);
    for (uint32_t i = 0; i < rope_dim / 2; i++) longf[i] = 1.0f + 7.0f * (float)i / (float)(rope_dim / 2 - 1);
    s.tensors.push_back(GgufTensorSpec{"rope_factors_long.weight", {rope_dim / 2}, 0, encode(longf, 0, rope_dim / 2)});
    s.tensors.push_back(GgufTensorSpec{"rope_factors_short.weight", {rope_dim / 2}, 0, encode(shortf, 0, rope_dim / 2)});
  }
  for (uint32_t l = 0; l < d.layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight", d.dim);
    if (delta_layer(l)) {
      // Gated DeltaNet: q and k rows at 0.1, v at 0.05; the output gate;
      // convolution taps at 0.5; decay rates A in [-1.5, -0.1]; the rest
      // small.
      fused(p + "attn_qkv.weight", {{gqk, 0.1f}, {gqk, 0.1f}, {gvd, 0.05f}}, d.dim);
      mat(p + "attn_gate.weight", gvd, d.dim, 0.05f);
      s.tensors.push_back(GgufTensorSpec{p + "ssm_conv1d.weight", {4, 2 * gqk + gvd}, 0,
                                         encode(weights(&st, (size_t)4 * (2 * gqk + gvd), 0.5f * sd, 0.0f), 0, 4)});
      s.tensors.push_back(GgufTensorSpec{p + "ssm_dt.bias", {ghv}, 0, encode(weights(&st, ghv, 0.5f * sd, 0.0f), 0, ghv)});
      s.tensors.push_back(GgufTensorSpec{p + "ssm_a", {ghv}, 0, encode(weights(&st, ghv, 0.4f * sd, -0.8f), 0, ghv)});
      mat(p + "ssm_beta.weight", ghv, d.dim, 0.05f);
      mat(p + "ssm_alpha.weight", ghv, d.dim, 0.05f);
      norm(p + "ssm_norm.weight", gs);
      mat(p + "ssm_out.weight", d.dim, gvd, 0.05f);
    } else if (qwen35) {
      // Gated attention: per head its 64 query rows (0.1), then 64 gate
      // rows (0.5: gates far from one half).
      std::vector<float> w;
      for (uint32_t h = 0; h < d.heads; h++) {
        const std::vector<float> qh = weights(&st, (size_t)d.head_dim * d.dim, 0.1f * sd, 0.0f);
        const std::vector<float> gh = weights(&st, (size_t)d.head_dim * d.dim, 0.5f * sd, 0.0f);
        w.insert(w.end(), qh.begin(), qh.end());
        w.insert(w.end(), gh.begin(), gh.end());
      }
      s.tensors.push_back(GgufTensorSpec{p + "attn_q.weight", {d.dim, 2 * q}, 0, encode(w, 0, d.dim)});
      mat(p + "attn_k.weight", kv, d.dim, 0.1f);
      mat(p + "attn_v.weight", kv, d.dim, 0.05f);
    } else if (conv_layer(l)) {
      // The gated short convolution: B, C, X rows, the taps (3 per channel,
      // standard deviation 0.5, so that the previous positions' products
      // move the output), the output projection.
      mat(p + "shortconv.in_proj.weight", 3 * d.dim, d.dim, 0.05f);
      s.tensors.push_back(GgufTensorSpec{p + "shortconv.conv.weight", {3, d.dim}, 0,
                                         encode(weights(&st, (size_t)3 * d.dim, 0.5f * sd, 0.0f), 0, 3)});
      mat(p + "shortconv.out_proj.weight", d.dim, d.dim, 0.05f);
    } else if (phi3) {
      fused(p + "attn_qkv.weight", {{q, 0.1f}, {kv, 0.1f}, {kv, 0.05f}}, d.dim);
    } else {
      mat(p + "attn_q.weight", q, d.dim, 0.1f);
      mat(p + "attn_k.weight", kv, d.dim, 0.1f);
      mat(p + "attn_v.weight", kv, d.dim, 0.05f);
    }
    if (!conv_layer(l) && !delta_layer(l)) mat(p + "attn_output.weight", d.dim, q, 0.05f);
    if (arch == "qwen3" || arch == "gemma3" || ((lfm2 || qwen35) && !conv_layer(l) && !delta_layer(l))) {
      norm(p + "attn_q_norm.weight", d.head_dim);
      norm(p + "attn_k_norm.weight", d.head_dim);
    }
    if (arch == "gemma3") norm(p + "post_attention_norm.weight", d.dim);
    norm(p + (qwen35 ? "post_attention_norm.weight" : "ffn_norm.weight"), d.dim);
    if (phi3) {
      fused(p + "ffn_up.weight", {{d.hidden, 0.05f}, {d.hidden, 0.05f}}, d.dim);  // gate rows, then up rows
      mat(p + "ffn_down.weight", d.dim, d.hidden, 0.05f);
    } else {
      mat(p + "ffn_gate.weight", d.hidden, d.dim, 0.05f);
      mat(p + "ffn_down.weight", d.dim, d.hidden, 0.05f);
      mat(p + "ffn_up.weight", d.hidden, d.dim, 0.05f);
    }
    if (arch == "gemma3") norm(p + "post_ffw_norm.weight", d.dim);
  }
  return s;
}

bool write_file_bytes(const std::string &path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = size == 0 || fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

}  // namespace gb
