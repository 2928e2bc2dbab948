// fuzz_llama2c.cpp — fuzz target: the input is a llama2.c checkpoint,
// converted with a fixed valid tokenizer: one of 512 tokens (the shared
// tok512.bin, else one made here) when the header's vocabulary size is
// +-512, else one of 300 tokens made here. Any status is fine; a crash, leak
// or undefined behaviour is not. gb_fuzz_seeds() gives the replay driver
// (replay_main.cpp) its starting inputs: two small checkpoints made here and
// the real stories260K.bin (focus: the header).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "convert.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_llama2c";
#include "fuzz/fuzz_util.h"

namespace {

constexpr uint32_t kVocab = 300;
constexpr uint32_t kVocabReal = 512;  // stories260K / stories5M_distilled

void quiet(void *, gb_log_level, const char *) {}

// Per-process scratch files, removed at exit.
struct Scratch {
  std::string dir, in, tok, tok512, out;
  Scratch() {
    const char *t = getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/gb-fuzz-l2c-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (mkdtemp(buf.data())) dir = buf.data();
    in = dir + "/in.bin";
    tok = dir + "/tok.bin";
    tok512 = dir + "/tok512.bin";
    out = dir + "/out.gbx";
    const std::vector<uint8_t> t2 = gb::sample_llama2c_tokenizer(kVocab);
    gb::write_file_bytes(tok, t2.data(), t2.size());
    std::vector<uint8_t> t5 = read_all(std::string(GB_SHARED_DIR) + "/models/tok512.bin");
    if (t5.empty()) t5 = gb::sample_llama2c_tokenizer(kVocabReal);
    gb::write_file_bytes(tok512, t5.data(), t5.size());
  }
  ~Scratch() {
    remove(in.c_str());
    remove(tok.c_str());
    remove(tok512.c_str());
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
  // Header field 5: vocab_size, negative for a separate classifier.
  const int32_t vocab = size >= 28 ? (int32_t)(data[20] | data[21] << 8 | data[22] << 16 | (uint32_t)data[23] << 24) : 0;
  const bool real = vocab == (int32_t)kVocabReal || vocab == -(int32_t)kVocabReal;
  gb::convert_llama2c(s.in.c_str(), real ? s.tok512.c_str() : s.tok.c_str(), s.out.c_str(), opt);
  remove(s.out.c_str());
  return 0;
}

void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  gb::SampleDims d;
  d.vocab = kVocab;
  d.dim = 8;
  d.hidden = 12;
  d.heads = 2;
  d.kv_heads = 1;
  d.layers = 1;
  d.seq_len = 4;
  std::vector<uint8_t> a = gb::sample_llama2c_checkpoint(d);
  seeds->push_back(gb::FuzzSeed{a, 28, 3});
  d.shared_classifier = false;
  d.layers = 2;
  d.kv_heads = 2;
  std::vector<uint8_t> b = gb::sample_llama2c_checkpoint(d);
  seeds->push_back(gb::FuzzSeed{b, b.size(), 1});
  for (const char *name : {"stories260K.bin"}) {
    const std::vector<uint8_t> real = read_all(std::string(GB_SHARED_DIR) + "/models/" + name);
    if (!real.empty()) seeds->push_back(gb::FuzzSeed{real, 28, 1});
  }
}
