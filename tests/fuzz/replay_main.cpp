// replay_main.cpp — a deterministic stand-in for libFuzzer, linked with one
// fuzz_*.cpp: it first runs every file of the target's regression corpus
// (tests/corpus/<target>/, GB_FUZZ_CORPUS_DIR: inputs that once crashed or
// tripped a sanitizer), then the target's seeds (gb_fuzz_seeds) unchanged,
// then N mutations of them (bit flips, bytes set to 0 / 0xFF / random,
// truncation, chunk duplication and deletion, u32 / u64 fields set to
// extreme values), mostly inside each seed's focus region. A crash or
// sanitizer report ends the process, so reaching the end means every input
// passed.
//   usage: fuzz_X_replay [N] [SEED]
//          fuzz_X_replay --dump DIR   write the seeds as DIR/seed-NNNN and
//                                     exit (libFuzzer's starting corpus,
//                                     tests/fuzz.sh)
// With GB_FUZZ_LAST_INPUT=FILE every input is written to FILE before it
// runs: after a crash, FILE holds the input that crashed (a regression
// input for tests/corpus/, or one to hand to the libFuzzer binary).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sample_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds);

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }
};

// A position: nine times in ten inside the focus region.
size_t pick(Rng &r, size_t size, size_t focus) {
  if (size == 0) return 0;
  const size_t lim = focus && focus < size && r.below(10) != 0 ? focus : size;
  return r.below(lim);
}

void put_le(std::vector<uint8_t> &b, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes && at + i < b.size(); i++) b[at + i] = (uint8_t)(v >> (8 * i));
}

void mutate(Rng &r, std::vector<uint8_t> &b, size_t focus) {
  static const uint64_t k32[] = {0, 1, 2, 3, 31, 32, 64, 255, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 0xFFFFFFFEu, 1u << 16, 1u << 24};
  static const uint64_t k64[] = {0, 1, 1ull << 32, 1ull << 62, 1ull << 63, ~0ull, ~0ull - 31, 0x7FFFFFFFFFFFFFFFull};
  const size_t at = pick(r, b.size(), focus);
  switch (r.below(10)) {
    case 0:  // bit flip
      if (!b.empty()) b[at] ^= (uint8_t)(1u << r.below(8));
      break;
    case 1:  // byte to 0 / 0xFF / random
      if (!b.empty()) {
        const size_t k = r.below(3);
        b[at] = k == 0 ? 0 : k == 1 ? 0xFF : (uint8_t)r.next();
      }
      break;
    case 2:  // truncation
      b.resize(at);
      break;
    case 3: {  // duplicate a chunk somewhere else
      if (b.empty()) break;
      const size_t len = 1 + r.below(64);
      const size_t end = at + len < b.size() ? at + len : b.size();
      const std::vector<uint8_t> chunk(b.begin() + (long)at, b.begin() + (long)end);
      const size_t to = pick(r, b.size(), focus);
      b.insert(b.begin() + (long)to, chunk.begin(), chunk.end());
      break;
    }
    case 4: {  // delete a chunk
      const size_t len = 1 + r.below(32);
      const size_t end = at + len < b.size() ? at + len : b.size();
      b.erase(b.begin() + (long)at, b.begin() + (long)end);
      break;
    }
    case 5: case 6:  // a u32 field to an extreme or small value (aligned or not)
      put_le(b, r.below(2) ? at & ~(size_t)3 : at, r.below(4) ? k32[r.below(sizeof k32 / sizeof k32[0])] : r.below(1024), 4);
      break;
    case 7:  // a u64 field to an extreme value
      put_le(b, r.below(2) ? at & ~(size_t)7 : at, r.below(5) ? k64[r.below(sizeof k64 / sizeof k64[0])] : b.size() + r.below(64), 8);
      break;
    case 8:  // a few random bytes inserted
      for (size_t n = 1 + r.below(8); n > 0; n--) b.insert(b.begin() + (long)pick(r, b.size() + 1, focus), (uint8_t)r.next());
      break;
    default:  // negate a 32-bit word (turns counts and dims negative)
      if (b.size() >= 4 && at + 4 <= b.size()) {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) v |= (uint32_t)b[at + i] << (8 * i);
        put_le(b, at, (uint32_t)(0u - v), 4);
      }
      break;
  }
}

uint64_t weight_of(const gb::FuzzSeed &s) { return s.weight ? s.weight : 1; }

bool read_file(const std::string &path, std::vector<uint8_t> *out) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) return false;
  uint8_t buf[65536];
  size_t k;
  out->clear();
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) out->insert(out->end(), buf, buf + k);
  const bool ok = !ferror(f);
  fclose(f);
  return ok;
}

// The regression inputs, in name order (README.md and dot files skipped).
std::vector<std::string> corpus_files(const char *dir) {
  std::vector<std::string> names;
  DIR *d = opendir(dir);
  if (!d) return names;
  while (const struct dirent *e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.empty() || n[0] == '.' || n == "README.md") continue;
    names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

int dump(const std::vector<gb::FuzzSeed> &seeds, const char *dir) {
  for (size_t i = 0; i < seeds.size(); i++) {
    char name[32];
    snprintf(name, sizeof name, "/seed-%04zu", i);
    const std::string path = std::string(dir) + name;
    FILE *f = fopen(path.c_str(), "wb");
    const std::vector<uint8_t> &b = seeds[i].data;
    const bool ok = f && (b.empty() || fwrite(b.data(), 1, b.size(), f) == b.size());
    if (!f || fclose(f) != 0 || !ok) {
      fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  printf("%zu seeds written to %s\n", seeds.size(), dir);
  return 0;
}

// The input about to run, to $GB_FUZZ_LAST_INPUT when set.
void run(const uint8_t *data, size_t size) {
  static const char *last = getenv("GB_FUZZ_LAST_INPUT");
  if (last && *last) {
    FILE *f = fopen(last, "wb");
    if (f) {
      if (size) fwrite(data, 1, size, f);
      fclose(f);
    }
  }
  LLVMFuzzerTestOneInput(data, size);
}

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--dump") == 0) {
    std::vector<gb::FuzzSeed> seeds;
    gb_fuzz_seeds(&seeds);
    return dump(seeds, argv[2]);
  }
  const long n = argc > 1 ? strtol(argv[1], nullptr, 10) : 1000;
  Rng rng{argc > 2 ? strtoull(argv[2], nullptr, 10) : 20240601ull};
  if (n < 0 || (argc > 1 && argv[1][0] == '-')) {
    fprintf(stderr, "usage: %s [iterations] [seed]\n       %s --dump DIR\n", argv[0], argv[0]);
    return 2;
  }
  const double t0 = now_s();
  // Regression inputs first: each once crashed the target.
  size_t n_corpus = 0;
#ifdef GB_FUZZ_CORPUS_DIR
  for (const std::string &name : corpus_files(GB_FUZZ_CORPUS_DIR)) {
    std::vector<uint8_t> b;
    const std::string path = std::string(GB_FUZZ_CORPUS_DIR) + "/" + name;
    if (!read_file(path, &b)) {
      fprintf(stderr, "cannot read %s\n", path.c_str());
      return 1;
    }
    fprintf(stderr, "corpus: %s (%zu bytes)\n", name.c_str(), b.size());
    run(b.data(), b.size());
    n_corpus++;
  }
#endif
  std::vector<gb::FuzzSeed> seeds;
  gb_fuzz_seeds(&seeds);
  if (seeds.empty()) {
    fprintf(stderr, "no seeds\n");
    return 1;
  }
  uint64_t total_weight = 0;
  for (const gb::FuzzSeed &s : seeds) {
    run(s.data.data(), s.data.size());
    total_weight += weight_of(s);
  }
  long passed = 0;
  for (long i = 0; i < n; i++) {
    uint64_t w = rng.next() % total_weight;
    size_t k = 0;
    while (w >= weight_of(seeds[k])) w -= weight_of(seeds[k++]);
    std::vector<uint8_t> b = seeds[k].data;
    for (size_t m = 1 + rng.below(3); m > 0; m--) mutate(rng, b, seeds[k].focus);
    run(b.data(), b.size());
    passed++;
  }
  printf("%zu corpus files, %zu seeds, %ld mutations passed, 0 failed (%.1f s)\n", n_corpus, seeds.size(), passed,
         now_s() - t0);
  return 0;
}
