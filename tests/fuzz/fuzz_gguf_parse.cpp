// fuzz_gguf_parse.cpp — fuzz target for the GGUF reader alone, fast enough
// for long campaigns: the header, every key-value pair (scalars, strings,
// arrays of strings), the tensor directory (with the tables that catch
// names and keys given twice and overlapping data), the split keys, and the
// sizing pass of a direct open (gb_model_mem_size: architecture keys,
// hyper-parameters, tokenizer keys), with no weights placed and nothing
// decoded. Inputs are small: synthetic models of every tensor type, the
// real fixtures cut where their tensor data starts (their whole metadata and
// tokenizer; the directory's ranges then run past the end, which the reader
// must refuse), a gemma4 (UTF-8 BPE) vocabulary, and the parts of a split
// model.
// Checks: every walk stays inside the input (ASan), every tensor the reader
// accepts lies inside the file and is found again by its name, the walk
// without tables accepts what the full read accepts, and a successful
// sizing pass only follows a successful walk. Any failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gearbx.h"
#include "gguf_view.h"
#include "model.h"

static const char kFuzzName[] = "fuzz_gguf_parse";
#include "fuzz/fuzz_util.h"
#include "fuzz/gguf_seeds.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  g_in = data;
  g_in_size = size;
  // A tight, 64-byte aligned copy: ASan sees any read past the end.
  uint8_t *buf = static_cast<uint8_t *>(aligned_alloc(64, (size + 63) / 64 * 64 + 64));
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  const gb::Logger log{quiet, nullptr, GB_LOG_ERROR};
  uint64_t n_kv = 0, n_tensors = 0;
  bool read_ok = false;
  if (gb::gguf_view_header(buf, size, log, &n_kv, &n_tensors) == GB_OK && n_kv <= gb::kGgufMaxKv &&
      n_tensors <= gb::kGgufMaxTensors) {
    std::vector<gb::GgufKv> kv((size_t)n_kv + 1);
    std::vector<gb::GgufTensorInfo> ti((size_t)n_tensors + 1);
    std::vector<uint32_t> scratch(gb::gguf_view_scratch_bytes(n_kv, n_tensors) / 4 + 1);
    gb::GgufView v;
    if (gb::gguf_view_open(buf, size, log, kv.data(), ti.data(), scratch.data(), &v) == GB_OK) {
      read_ok = true;
      // Every pair: its value, or its array's elements.
      for (uint64_t i = 0; i < v.n_kv; i++) {
        char key[gb::kGgufMaxKeyBytes + 1];
        const gb::GgufKv &e = v.kv[i];
        if (e.key_off + e.key_len > size || e.val_off > size) fuzz_fail("a key outside the file");
        memcpy(key, buf + e.key_off, e.key_len);
        key[e.key_len] = 0;
        if (strlen(key) != e.key_len) continue;  // a NUL inside: lookups by C string cannot name it
        gb::GgufScalar s;
        gb::GgufArray a;
        if (v.value(key, &s)) {
          if (s.is_str && (s.s < buf || s.s + s.len > buf + size)) fuzz_fail("a string outside the file");
        } else if (v.array(key, &a)) {
          if (a.off > size) fuzz_fail("an array outside the file");
          if (a.elem == gb::kGgufString) {
            uint64_t off = a.off;
            for (uint64_t k = 0; k < a.count; k++) {
              const uint8_t *p;
              uint64_t len;
              v.next_string(&off, &p, &len);
              if (p < buf || p + len > buf + size) fuzz_fail("an array string outside the file");
            }
          }
        } else {
          fuzz_fail("a key the reader listed cannot be read");
        }
      }
      // Every tensor: inside the file, and found again by name.
      uint64_t pos = v.ti_start;
      for (uint64_t i = 0; i < v.n_tensors; i++) {
        const gb::GgufTensorInfo t = v.next_tensor(&pos);
        if (t.nbytes && (t.offset > size || t.nbytes > size - t.offset)) fuzz_fail("tensor data outside the file");
        if (t.name_off + t.name_len > size) fuzz_fail("a tensor name outside the file");
        char name[gb::kGgufMaxNameBytes + 1];
        memcpy(name, buf + t.name_off, t.name_len);
        name[t.name_len] = 0;
        if (strlen(name) != t.name_len) continue;
        gb::GgufTensorInfo again;
        if (!v.tensor(name, &again) || again.offset != t.offset || again.nbytes != t.nbytes)
          fuzz_fail("a tensor is not found again by its name");
      }
      uint32_t no = 0, count = 0;
      const gb_status ss = gb::gguf_split_of(buf, size, log, &no, &count);
      if (ss == GB_OK && (count == 0 || no >= count)) fuzz_fail("split keys out of range accepted");
    }
  }
  // The sizing pass of a direct open walks the file without the tables (it
  // cannot see names given twice): it may accept what the full read refuses,
  // never what the walk alone refuses.
  gb_model_options o;
  gb_model_options_init(&o);
  o.log = quiet;
  size_t need = 0;
  gb::GgufView walk;
  const bool walk_ok = gb::gguf_view_open(buf, size, log, nullptr, nullptr, nullptr, &walk) == GB_OK;
  if (read_ok && !walk_ok) fuzz_fail("the walk refused what the full read accepted");
  if (gb_model_mem_size(buf, size, &o, &need) == GB_OK && gb::gguf_magic(buf, size) && !walk_ok)
    fuzz_fail("the model was sized although the reader refused the file");
  free(buf);
  return 0;
}

// Seeds: small synthetic models of every type, the real fixtures cut at
// their tensor data, and the parts of a model split in three.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  const uint32_t kTypes[] = {gb::kGgmlF32,  gb::kGgmlF16,  gb::kGgmlBF16,  gb::kGgmlQ4_0, gb::kGgmlQ4_1,
                             gb::kGgmlQ5_0, gb::kGgmlQ5_1, gb::kGgmlQ8_0,  gb::kGgmlIQ4_NL, gb::kGgmlQ2_K,
                             gb::kGgmlQ3_K, gb::kGgmlQ4_K, gb::kGgmlQ5_K,  gb::kGgmlQ6_K};
  for (uint32_t t : kTypes) {
    size_t data_start = 0;
    const std::vector<uint8_t> b = typed_gguf({t}, &data_start);
    seeds->push_back(gb::FuzzSeed{b, data_start, 3});
  }
  const gb::Logger log{quiet, nullptr, GB_LOG_ERROR};
  const std::string models = std::string(GB_SHARED_DIR) + "/models/", fix = std::string(GB_SHARED_DIR) + "/fixtures/";
  for (const std::string &path :
       {models + "stories260K.gguf", fix + "qwen2-tiny-Q4_K_M.gguf", fix + "llama3-tiny-Q4_K_M.gguf", fix + "stories5M-Q8_0.gguf",
        std::string(GB_TEST_SOURCE_DIR) + "/fixtures/vocab/ggml-vocab-gemma4-synth.gguf"}) {
    std::vector<uint8_t> b = read_all(path);
    gb::GgufView v;
    if (b.empty() || gb::gguf_view_open(b.data(), b.size(), log, nullptr, nullptr, nullptr, &v) != GB_OK) continue;
    b.resize((size_t)v.data_start);
    seeds->push_back(gb::FuzzSeed{b, b.size(), 2});
  }
  // lfm2 (a per-layer array of head_count_kv) and qwen35 (ssm keys,
  // multi-section RoPE): two kinds of layer each; gemma4 (boolean and
  // per-layer arrays, sliding-head keys). Cut at their tensor data, as the
  // real files above.
  for (const char *arch : {"lfm2-small", "qwen35-small", "gemma4-small"}) {
    gb::GgufLayout lay;
    std::vector<uint8_t> b = gb::gguf_serialize(gb::arch_fixture_spec(arch), &lay);
    b.resize(lay.data_start);
    seeds->push_back(gb::FuzzSeed{b, b.size(), 2});
  }
  // A small model in three parts (the first holds every key).
  gb::SampleDims d;
  gb::GgufSpec whole = gb::sample_gguf_spec(d, gb::kGgmlF32);
  const size_t T = whole.tensors.size();
  for (uint16_t k = 0; k < 3; k++) {
    gb::GgufSpec p;
    if (k == 0) p.kv = whole.kv;
    p.set("split.no", 2, {(uint8_t)k, 0});
    p.set("split.count", 2, {3, 0});
    p.set("split.tensors.count", 5, {(uint8_t)T, (uint8_t)(T >> 8), 0, 0});
    const size_t end = k == 2 ? T : (k + 1u) * T / 3;
    for (size_t i = k * T / 3; i < end; i++) p.tensors.push_back(whole.tensors[i]);
    const std::vector<uint8_t> b = gb::gguf_serialize(p);
    seeds->push_back(gb::FuzzSeed{b, b.size(), 1});
  }
}
