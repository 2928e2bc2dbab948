// fuzz_gguf.cpp — fuzz target: the input is a GGUF file, converted to every
// tier. Any status is fine; a crash, leak or undefined behaviour is not.
// gb_fuzz_seeds() gives the replay driver its starting inputs: the shared
// stories260K.gguf and small generated files of each tensor type, with the
// mutations focused on their metadata.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "convert.h"
#include "convert_util.h"
#include "gguf_parse.h"
#include "sample_files.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

std::vector<uint8_t> read_all(const std::string &path) {
  std::vector<uint8_t> b;
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) return b;
  uint8_t buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) b.insert(b.end(), buf, buf + n);
  fclose(f);
  return b;
}

// Per-process scratch files, removed at exit.
struct Scratch {
  std::string dir, in, out;
  Scratch() {
    const char *t = getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/gb-fuzz-gguf-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (mkdtemp(buf.data())) dir = buf.data();
    in = dir + "/in.gguf";
    out = dir + "/out.gbx";
  }
  ~Scratch() {
    remove(in.c_str());
    remove(out.c_str());
    rmdir(dir.c_str());
  }
};

Scratch &scratch() {
  static Scratch s;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Scratch &s = scratch();
  if (!gb::write_file_bytes(s.in, data, size)) return 0;
  gb::ConvertOptions opt;
  opt.page_align = 64;
  opt.log.fn = quiet;
  gb::convert_gguf(s.in.c_str(), s.out.c_str(), opt);
  remove(s.out.c_str());
  return 0;
}

void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  gb::SampleDims d;
  d.dim = 32;
  d.hidden = 32;
  d.heads = 2;
  d.kv_heads = 1;
  d.layers = 1;
  d.vocab = 260;
  d.seq_len = 8;
  for (uint32_t type : {0u, 1u, 2u, 8u}) {
    d.shared_classifier = type != 8;
    gb::GgufLayout lay;
    const std::vector<uint8_t> b = gb::gguf_serialize(gb::sample_gguf_spec(d, type), &lay);
    seeds->push_back(gb::FuzzSeed{b, lay.data_start, 4});
  }
  const std::vector<uint8_t> real = read_all(std::string(GB_SHARED_DIR) + "/models/stories260K.gguf");
  if (!real.empty()) seeds->push_back(gb::FuzzSeed{real, 14176, 1});  // 14176: its data start
  // Files made by llama.cpp's quantizer: K-quant mixes (Q4_K + Q6_K with
  // qwen2 biases or Llama 3 RoPE factors; Q2_K + Q3_K + Q6_K) and a legacy
  // 32-block type, so every GGUF block format meets the mutations. Focus:
  // each file's metadata and tensor directory (up to its data start).
  for (const char *name : {"qwen2-tiny-Q4_K_M.gguf", "llama3-tiny-Q4_K_M.gguf", "stories5M-Q2_K.gguf", "stories5M-Q5_1.gguf"}) {
    const std::string path = std::string(GB_SHARED_DIR) + "/fixtures/" + name;
    const std::vector<uint8_t> b = read_all(path);
    if (b.empty()) continue;
    gb::InputFile f;
    gb::GgufFile g;
    gb::Logger log;
    log.fn = quiet;
    if (f.open(path.c_str(), log, "fixture") != GB_OK || gb::gguf_parse(f, log, &g) != GB_OK) continue;
    seeds->push_back(gb::FuzzSeed{b, (size_t)g.data_start, 1});
  }
}
