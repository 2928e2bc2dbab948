// fuzz_gguf.cpp — fuzz target: the input is a GGUF file, converted with the
// default tiers (every tier from float weights; the source's own tier from
// quantized ones). Any status is fine; a crash, leak or undefined behaviour
// is not.
// gb_fuzz_seeds() gives the replay driver (and, dumped, libFuzzer) its
// starting inputs: those of gguf_seeds.h (small files of every type, which
// convert in milliseconds, and real files).
// GB_FUZZ_STATS=1 prints, at exit, how many inputs converted and, per tensor
// type, how many converted inputs held it: the check that each type's code
// is reached.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bytes.h"
#include "convert.h"
#include "convert_util.h"
#include "formats.h"
#include "ggml_types.h"
#include "gguf_parse.h"
#include "quant.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_gguf";
#include "fuzz/fuzz_util.h"
#include "fuzz/gguf_seeds.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

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

// ---- GB_FUZZ_STATS ----------------------------------------------------------
constexpr uint32_t kTypeSlots = 32;
long g_inputs, g_converted, g_with_type[kTypeSlots];

void print_stats() {
  fprintf(stderr, "fuzz_gguf: %ld inputs, %ld converted; converted inputs per tensor type:", g_inputs, g_converted);
  for (uint32_t t = 0; t < kTypeSlots; t++)
    if (gb::ggml_type_supported(t)) fprintf(stderr, " %s %ld", gb::ggml_type_name(t), g_with_type[t]);
  fprintf(stderr, "\n");
}

bool stats_on() {
  static const bool on = [] {
    const char *e = getenv("GB_FUZZ_STATS");
    if (e && *e == '1') {
      atexit(print_stats);
      return true;
    }
    return false;
  }();
  return on;
}

void count_types(const std::string &path) {
  gb::Logger log;
  log.fn = quiet;
  gb::InputFile f;
  gb::GgufFile g;
  if (f.open(path.c_str(), log, "GGUF") != GB_OK || gb::gguf_parse(f, log, &g) != GB_OK) return;
  bool seen[kTypeSlots] = {};
  for (const gb::GgufTensor &t : g.tensors)
    if (t.type < kTypeSlots) seen[t.type] = true;
  for (uint32_t t = 0; t < kTypeSlots; t++) g_with_type[t] += seen[t];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Scratch &s = scratch();
  if (!gb::write_file_bytes(s.in, data, size)) return 0;
  gb::ConvertOptions opt;
  opt.page_align = 64;
  opt.log.fn = quiet;
  const gb_status st = gb::convert_gguf(s.in.c_str(), s.out.c_str(), opt);
  if (stats_on()) {
    g_inputs++;
    if (st == GB_OK) {
      g_converted++;
      count_types(s.in);
    }
  }
  remove(s.out.c_str());
  return 0;
}

void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) { gguf_fuzz_seeds(seeds, scratch().in); }
