// fuzz_llama2c.cpp — fuzz target: the input is a llama2.c checkpoint,
// converted with a fixed valid tokenizer. Any status is fine; a crash, leak
// or undefined behaviour is not. gb_fuzz_seeds() gives the replay driver
// (replay_main.cpp) its starting inputs.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "convert.h"
#include "sample_files.h"

namespace {

constexpr uint32_t kVocab = 300;

void quiet(void *, gb_log_level, const char *) {}

// Per-process scratch files, removed at exit.
struct Scratch {
  std::string dir, in, tok, out;
  Scratch() {
    const char *t = getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/gb-fuzz-l2c-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (mkdtemp(buf.data())) dir = buf.data();
    in = dir + "/in.bin";
    tok = dir + "/tok.bin";
    out = dir + "/out.gbx";
    const std::vector<uint8_t> t2 = gb::sample_llama2c_tokenizer(kVocab);
    gb::write_file_bytes(tok, t2.data(), t2.size());
  }
  ~Scratch() {
    remove(in.c_str());
    remove(tok.c_str());
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
  gb::convert_llama2c(s.in.c_str(), s.tok.c_str(), s.out.c_str(), opt);
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
}
