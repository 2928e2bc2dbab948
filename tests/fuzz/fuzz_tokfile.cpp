// fuzz_tokfile.cpp — fuzz target: the input is a llama2.c tokenizer.bin,
// converted together with a fixed small valid checkpoint of 512 tokens (the
// vocabulary of the shared tok512.bin). Any status is fine; a crash, leak or
// undefined behaviour is not. gb_fuzz_seeds() gives the replay driver its
// starting inputs.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "convert.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_tokfile";
#include "fuzz/fuzz_util.h"

namespace {

constexpr uint32_t kVocab = 512;

void quiet(void *, gb_log_level, const char *) {}

// Per-process scratch files, removed at exit.
struct Scratch {
  std::string dir, ck, in, out;
  Scratch() {
    const char *t = getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/gb-fuzz-tok-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (mkdtemp(buf.data())) dir = buf.data();
    ck = dir + "/ck.bin";
    in = dir + "/tok.bin";
    out = dir + "/out.gbx";
    gb::SampleDims d;
    d.vocab = kVocab;
    d.dim = 8;
    d.hidden = 8;
    d.heads = 2;
    d.kv_heads = 1;
    d.layers = 1;
    d.seq_len = 2;
    const std::vector<uint8_t> c = gb::sample_llama2c_checkpoint(d);
    gb::write_file_bytes(ck, c.data(), c.size());
  }
  ~Scratch() {
    remove(ck.c_str());
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
  opt.tiers = 1u << GB_GEAR_LOW;  // the tokenizer is what is under test
  opt.log.fn = quiet;
  gb::convert_llama2c(s.ck.c_str(), s.in.c_str(), s.out.c_str(), opt);
  remove(s.out.c_str());
  return 0;
}

void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  const std::vector<uint8_t> gen = gb::sample_llama2c_tokenizer(kVocab);
  seeds->push_back(gb::FuzzSeed{gen, gen.size(), 1});
  const std::vector<uint8_t> real = read_all(std::string(GB_SHARED_DIR) + "/models/tok512.bin");
  if (!real.empty()) seeds->push_back(gb::FuzzSeed{real, real.size(), 1});
}
