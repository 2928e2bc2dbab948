// fuzz_util.h — what the fuzz targets share: the input being run, printed as
// hex when a target finds a fault (fuzz_fail), and reading a file whole.
// Include after defining `static const char kFuzzName[]`.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace {

const uint8_t *g_in = nullptr;  // the input being run (printed on failure)
size_t g_in_size = 0;

[[noreturn]] inline void fuzz_fail(const char *what) {
  fprintf(stderr, "%s: %s; input (%zu bytes):", kFuzzName, what, g_in_size);
  for (size_t i = 0; i < g_in_size; i++) fprintf(stderr, " %02x", g_in[i]);
  fprintf(stderr, "\n");
  abort();
}

// The file's bytes; empty when it cannot be read (the seeds from ../shared
// are optional).
inline std::vector<uint8_t> read_all(const std::string &path) {
  std::vector<uint8_t> b;
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) return b;
  uint8_t buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) b.insert(b.end(), buf, buf + n);
  fclose(f);
  return b;
}

}  // namespace
