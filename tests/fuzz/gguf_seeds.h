// gguf_seeds.h — the GGUF inputs the GGUF fuzz targets start from: small
// files made here, one per GGUF tensor type the readers take (F32, F16,
// BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K..Q6_K), one mixing
// nine types, a small lfm2 and a small qwen35 (layers of two kinds); stories260K and the two 1 MB fixtures of ../shared as they
// are; and every fixture of ../shared/fixtures (each type as llama.cpp's
// quantizer writes it) cut to one layer, with the mutations focused on the
// metadata and tensor directory. Include after fuzz_util.h.
#pragma once

#include <dirent.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bytes.h"
#include "convert_util.h"
#include "formats.h"
#include "ggml_types.h"
#include "gguf_parse.h"
#include "quant.h"
#include "sample_files.h"

namespace {

inline void seed_quiet(void *, gb_log_level, const char *) {}

// ---- seeds made here ----------------------------------------------------------

struct Rng {
  uint64_t s;
  uint8_t byte() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint8_t)(s >> 56);
  }
};

// The rows x cols f32 values `f32` (a sample tensor) in ggml type `type`.
std::vector<uint8_t> encode_as(uint32_t type, const std::vector<uint8_t> &f32, uint64_t rows, uint64_t cols, Rng &rng) {
  uint64_t rb = 0;
  if (!gb::ggml_row_bytes(type, cols, &rb)) fuzz_fail("a seed tensor's columns do not fit its type");
  std::vector<uint8_t> out((size_t)(rb * rows));
  std::vector<float> x((size_t)cols);
  for (uint64_t r = 0; r < rows; r++) {
    for (uint64_t c = 0; c < cols; c++) x[c] = gb::ld_f32(&f32[(size_t)(4 * (r * cols + c))]);
    uint8_t *o = out.data() + r * rb;
    switch (type) {
      case gb::kGgmlF32: memcpy(o, x.data(), (size_t)cols * 4); break;
      case gb::kGgmlF16: gb::quantize_row_f16(o, x.data(), (size_t)cols); break;
      case gb::kGgmlQ4_0: gb::quantize_row_q4(o, x.data(), (size_t)cols); break;
      case gb::kGgmlQ8_0: gb::quantize_row_q8(o, x.data(), (size_t)cols); break;
      case gb::kGgmlBF16:
        for (uint64_t c = 0; c < cols; c++) gb::st_u16(o + 2 * c, (uint16_t)(gb::ld_u32(&f32[(size_t)(4 * (r * cols + c))]) >> 16));
        break;
      default: {
        // The other block formats: random bytes are valid codes; the fp16
        // scale d and, where the format has one, the fp16 min (its offsets
        // in the format table) are set to small finite values so that the
        // block decodes to finite weights.
        const gb::FormatInfo *f = gb::format_info(gb::format_of_ggml(type));
        if (!f || f->d_at < 0) fuzz_fail("no block layout for a seed type");
        for (uint64_t i = 0; i < rb; i++) o[i] = rng.byte();
        for (uint64_t at = 0; at < rb; at += f->bytes) {
          gb::st_u16(o + at + f->d_at, 0x2000);                    // 2^-7
          if (f->m_at >= 0) gb::st_u16(o + at + f->m_at, 0x1c00);  // 2^-8
        }
      }
    }
  }
  return out;
}

// A one-layer llama GGUF whose matrices take types[i % types.size()] in file
// order (norms stay F32): K-quants need 256 columns, the others 32.
std::vector<uint8_t> typed_gguf(const std::vector<uint32_t> &types, size_t *data_start) {
  bool k_quant = false;
  for (uint32_t t : types) k_quant = k_quant || gb::ggml_block(t).block == 256;
  gb::SampleDims d;
  d.dim = k_quant ? 256 : 32;
  d.hidden = k_quant ? 256 : 64;
  d.heads = 2;
  d.kv_heads = 1;
  d.layers = 1;
  d.vocab = 260;
  d.seq_len = 8;
  d.shared_classifier = types.size() < 9;
  gb::GgufSpec spec = gb::sample_gguf_spec(d, gb::kGgmlF32);
  Rng rng{types[0] * 977u + types.size()};
  size_t i = 0;
  for (gb::GgufTensorSpec &t : spec.tensors) {
    if (t.ne.size() != 2) continue;
    t.type = types[i++ % types.size()];
    t.data = encode_as(t.type, t.data, t.ne[1], t.ne[0], rng);
  }
  gb::GgufLayout lay;
  std::vector<uint8_t> b = gb::gguf_serialize(spec, &lay);
  *data_start = lay.data_start;
  return b;
}

// ---- real files, made small ---------------------------------------------------
// A real GGUF cut to one layer and, where its feed-forward width is a larger
// multiple of 256, to a width of 256 (ffn_gate / ffn_up keep their first 256
// rows, ffn_down the first 256 columns of each row: whole blocks of every
// type). Every key (the real tokenizer, hyper-parameters, template) is kept
// byte for byte but block_count and feed_forward_length; the data is the
// file's own. Empty when the file is not as expected.
struct Walk {
  const std::vector<uint8_t> &b;
  size_t o = 0;
  bool ok = true;
  bool need(uint64_t n) {
    ok = ok && n <= b.size() - o;
    return ok;
  }
  uint32_t u32() {
    if (!need(4)) return 0;
    o += 4;
    return gb::ld_u32(&b[o - 4]);
  }
  uint64_t u64() {
    if (!need(8)) return 0;
    o += 8;
    return gb::ld_u64(&b[o - 8]);
  }
  std::string str() {
    const uint64_t n = u64();
    if (!need(n)) return std::string();
    o += (size_t)n;
    return std::string(reinterpret_cast<const char *>(&b[o - n]), (size_t)n);
  }
  void value(uint32_t type, int depth) {
    static const uint8_t kSize[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      str();
    } else if (type == 9 && depth == 0) {
      const uint32_t at = u32();
      const uint64_t n = u64();
      for (uint64_t i = 0; i < n && ok; i++) value(at, 1);
    } else if (type < 13 && kSize[type]) {
      if (need(kSize[type])) o += kSize[type];
    } else {
      ok = false;
    }
  }
};

bool ends_with(const std::string &s, const char *suffix) {
  const size_t k = strlen(suffix);
  return s.size() >= k && s.compare(s.size() - k, k, suffix) == 0;
}

std::vector<uint8_t> one_layer(const std::vector<uint8_t> &in) {
  Walk w{in};
  std::vector<uint8_t> out;
  if (in.size() < 24 || memcmp(in.data(), "GGUF", 4) != 0) return out;
  w.o = 8;
  const uint64_t n_tensors = w.u64(), n_kv = w.u64();
  out.assign(in.begin(), in.begin() + 24);
  uint32_t align = 32, ffn = 0;
  for (uint64_t i = 0; i < n_kv && w.ok; i++) {
    const size_t start = w.o;
    const std::string key = w.str();
    const uint32_t type = w.u32();
    const size_t val = w.o;
    w.value(type, 0);
    if (!w.ok) return {};
    out.insert(out.end(), in.begin() + (long)start, in.begin() + (long)w.o);
    uint8_t *v = &out[out.size() - (w.o - val)];
    if (type == 4 && key == "general.alignment") align = gb::ld_u32(v);
    if (type == 4 && ends_with(key, ".block_count")) gb::st_u32(v, 1);
    if (type == 4 && ends_with(key, ".feed_forward_length") && gb::ld_u32(v) > 256 && gb::ld_u32(v) % 256 == 0) {
      ffn = gb::ld_u32(v);
      gb::st_u32(v, 256);
    }
  }
  if (align == 0 || (align & (align - 1)) != 0) return {};
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    uint64_t off;
  };
  std::vector<T> ts;
  for (uint64_t i = 0; i < n_tensors && w.ok; i++) {
    T t;
    t.name = w.str();
    const uint32_t nd = w.u32();
    if (nd == 0 || nd > 4) return {};
    for (uint32_t d = 0; d < nd; d++) t.ne.push_back(w.u64());
    t.type = w.u32();
    t.off = w.u64();
    if (t.name.compare(0, 4, "blk.") != 0 || t.name.compare(0, 6, "blk.0.") == 0) ts.push_back(t);
  }
  if (!w.ok) return {};
  const uint64_t data_start = (w.o + align - 1) / align * align;
  // Each kept tensor: its rows, cut to the first `rows` rows of `keep` bytes.
  std::vector<uint8_t> data;
  std::vector<uint64_t> new_off;
  for (T &t : ts) {
    uint64_t rb = 0;
    if (!gb::ggml_row_bytes(t.type, t.ne[0], &rb)) return {};
    uint64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); d++) rows *= t.ne[d];
    uint64_t keep_rows = rows, keep = rb;
    if (ffn && t.ne.size() == 2 && (ends_with(t.name, "ffn_gate.weight") || ends_with(t.name, "ffn_up.weight")) && t.ne[1] == ffn)
      keep_rows = t.ne[1] = 256;
    if (ffn && t.ne.size() == 2 && ends_with(t.name, "ffn_down.weight") && t.ne[0] == ffn) {
      t.ne[0] = 256;
      if (!gb::ggml_row_bytes(t.type, 256, &keep)) return {};
    }
    if (t.off > in.size() || data_start > in.size() - t.off || rows * rb > in.size() - data_start - t.off) return {};
    data.resize((data.size() + align - 1) / align * align);
    new_off.push_back(data.size());
    for (uint64_t r = 0; r < keep_rows; r++) {
      const uint8_t *row = &in[(size_t)(data_start + t.off + r * rb)];
      data.insert(data.end(), row, row + keep);
    }
  }
  auto put_u32 = [&](uint32_t v) {
    out.resize(out.size() + 4);
    gb::st_u32(&out[out.size() - 4], v);
  };
  auto put_u64 = [&](uint64_t v) {
    out.resize(out.size() + 8);
    gb::st_u64(&out[out.size() - 8], v);
  };
  gb::st_u64(&out[8], ts.size());
  for (size_t i = 0; i < ts.size(); i++) {
    put_u64(ts[i].name.size());
    out.insert(out.end(), ts[i].name.begin(), ts[i].name.end());
    put_u32((uint32_t)ts[i].ne.size());
    for (uint64_t n : ts[i].ne) put_u64(n);
    put_u32(ts[i].type);
    put_u64(new_off[i]);
  }
  out.resize((out.size() + align - 1) / align * align);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}


// scratch_in: a file the seeds may be written to (each real seed is parsed
// once to find where its tensor data begins).
inline void gguf_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds, const std::string &scratch_in) {
  // Made here: each type alone, then nine types in one file. Mutations mostly
  // in the metadata, a quarter of the time anywhere (block scales, codes).
  const uint32_t kTypes[] = {gb::kGgmlF32,  gb::kGgmlF16,  gb::kGgmlBF16, gb::kGgmlQ4_0, gb::kGgmlQ4_1,
                             gb::kGgmlQ5_0, gb::kGgmlQ5_1, gb::kGgmlQ8_0, gb::kGgmlIQ4_NL, gb::kGgmlQ2_K,
                             gb::kGgmlQ3_K, gb::kGgmlQ4_K, gb::kGgmlQ5_K, gb::kGgmlQ6_K};
  std::vector<std::vector<uint32_t>> sets;
  for (uint32_t t : kTypes) sets.push_back({t});
  sets.push_back({gb::kGgmlQ2_K, gb::kGgmlQ3_K, gb::kGgmlQ4_K, gb::kGgmlQ5_K, gb::kGgmlQ6_K, gb::kGgmlIQ4_NL, gb::kGgmlQ5_1,
                  gb::kGgmlQ8_0, gb::kGgmlBF16});
  for (const std::vector<uint32_t> &set : sets) {
    size_t data_start = 0;
    const std::vector<uint8_t> b = typed_gguf(set, &data_start);
    seeds->push_back(gb::FuzzSeed{b, data_start, 6});
    seeds->push_back(gb::FuzzSeed{b, b.size(), 2});
  }
  // An lfm2 model (short-convolution layers marked by the zeros of a
  // per-layer attention.head_count_kv array), small.
  {
    gb::GgufLayout lay;
    const std::vector<uint8_t> b = gb::gguf_serialize(gb::arch_fixture_spec("lfm2-small"), &lay);
    seeds->push_back(gb::FuzzSeed{b, lay.data_start, 6});
  }
  {  // qwen35: Gated DeltaNet and gated attention layers
    gb::GgufLayout lay;
    const std::vector<uint8_t> b = gb::gguf_serialize(gb::arch_fixture_spec("qwen35-small"), &lay);
    seeds->push_back(gb::FuzzSeed{b, lay.data_start, 6});
  }
  {  // gemma4: two head shapes, layers sharing caches, per-layer inputs (900 KB)
    gb::GgufLayout lay;
    const std::vector<uint8_t> b = gb::gguf_serialize(gb::arch_fixture_spec("gemma4-small"), &lay);
    seeds->push_back(gb::FuzzSeed{b, lay.data_start, 4});
  }
  // Real files: stories260K and the two 1 MB fixtures (qwen2 with Q/K/V
  // biases, Llama 3 with RoPE factors; K-quant mixes) as they are, and every
  // fixture of ../shared/fixtures (llama.cpp's quantizer: each type) cut to
  // one layer (one_layer: their own metadata, tokenizer and data, a fifth
  // of the bytes to convert). Focus: each file's metadata and tensor
  // directory.
  const std::string models = std::string(GB_SHARED_DIR) + "/models/", fix = std::string(GB_SHARED_DIR) + "/fixtures/";
  std::vector<std::vector<uint8_t>> real;
  for (const std::string &path : {models + "stories260K.gguf", fix + "qwen2-tiny-Q4_K_M.gguf", fix + "llama3-tiny-Q4_K_M.gguf"})
    real.push_back(read_all(path));
  if (DIR *dir = opendir(fix.c_str())) {
    std::vector<std::string> names;
    while (const struct dirent *e = readdir(dir)) {
      const std::string n = e->d_name;
      if (ends_with(n, ".gguf")) names.push_back(n);
    }
    closedir(dir);
    std::sort(names.begin(), names.end());
    for (const std::string &n : names) {
      std::vector<uint8_t> b = one_layer(read_all(fix + n));
      if (b.empty()) fuzz_fail("a fixture could not be cut to one layer");
      real.push_back(std::move(b));
    }
  }
  for (const std::vector<uint8_t> &b : real) {
    if (b.empty()) continue;
    gb::InputFile f;
    gb::GgufFile g;
    gb::Logger log;
    log.fn = seed_quiet;
    if (!gb::write_file_bytes(scratch_in, b.data(), b.size()) || f.open(scratch_in.c_str(), log, "seed") != GB_OK ||
        gb::gguf_parse(f, log, &g) != GB_OK)
      fuzz_fail("a real seed does not parse");
    seeds->push_back(gb::FuzzSeed{b, (size_t)g.data_start, 1});
  }
}

}  // namespace
