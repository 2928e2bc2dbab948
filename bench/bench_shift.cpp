// bench_shift.cpp — cost of a gear shift between tiers of the mapped file,
// against the cost of one decode step, in the same run.
//
// A shift is gb_session_set_gear() on an auto session: the pointer swap,
// the madvise hints (WILLNEED for the new tier, DONTNEED for the tiers
// left) and the residency measurement. Reported: median µs per shift for
// each pair of gears, and the median decode step at each gear, after a
// warm-up; then the ratio shift / decode step.
//   usage: bench_shift [-m MODEL.gbx | --synthetic SPEC] [--reps R] [--json FILE]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "convert.h"
#include "gearbx.h"
#include "gearbx_port.h"

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
const char *name(int g) { return g == 0 ? "low" : g == 1 ? "mid" : "high"; }
}  // namespace

int main(int argc, char **argv) {
  std::string model, synthetic = "dim=1024,layers=8,hidden=2816,heads=16,kv_heads=4,vocab=4096,seq_len=256,seed=4", json;
  int reps = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-m")) model = argv[i + 1];
    else if (!strcmp(argv[i], "--synthetic")) synthetic = argv[i + 1];
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--json")) json = argv[i + 1];
    else return fprintf(stderr, "unknown option %s\n", argv[i]), 1;
  }
  if (reps < 1) return fprintf(stderr, "--reps must be >= 1\n"), 1;
  std::string tmp;
  if (model.empty()) {
    tmp = "/tmp/gearbx-bench-shift-" + std::to_string((long)getpid()) + ".gbx";
    gb::ConvertOptions co;
    co.tiers = 0x7;
    if (gb::convert_synthetic(synthetic.c_str(), tmp.c_str(), co) != GB_OK) return fprintf(stderr, "cannot build %s\n", synthetic.c_str()), 1;
    model = tmp;
  }
  gb_model *m = nullptr;
  const gb_status st = gb_model_open_file(model.c_str(), nullptr, &m);
  if (!tmp.empty()) remove(tmp.c_str());
  if (st != GB_OK) return fprintf(stderr, "cannot open %s: %s\n", model.c_str(), gb_status_str(st)), 1;
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);
  gb_session_options so;
  gb_session_options_init(&so);
  so.gear = GB_GEAR_AUTO;
  so.monitor.min_gear_duration = 1000000;  // the monitor never shifts by itself here
  so.n_ctx = (uint32_t)(3 * reps + 8) < mi.seq_len ? (uint32_t)(3 * reps + 8) : mi.seq_len;
  gb_session *s = nullptr;
  if (gb_session_create(m, &so, nullptr, 0, &s) != GB_OK) return fprintf(stderr, "session failed\n"), 1;

  // Decode step per gear (the context stays short: weights dominate).
  double step_us[3];
  for (int g = 0; g < 3; g++) {
    std::vector<double> t;
    gb_session_reset(s);
    gb_session_set_gear(s, (gb_gear)g);
    gb_prefill(s, &mi.bos_id, 1);
    const int n = (int)so.n_ctx / 3 - 1;
    for (int i = 0; i < n; i++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      if (gb_decode_step(s, nullptr, &info) != GB_OK) break;
      if (i > 0) t.push_back((double)info.step_ns * 1e-3);
    }
    step_us[g] = median(t);
  }
  // Shifts between every ordered pair, each tier touched before (cached in the page cache).
  printf("model %s (%llu bytes), %d reps, medians\n\n| shift | µs per shift | decode step at target (µs) | shift / step |\n|---|---:|---:|---:|\n",
         mi.name, (unsigned long long)mi.file_bytes, reps);
  std::string js = "[";
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      if (a == b) continue;
      std::vector<double> t;
      for (int r = 0; r < reps + 1; r++) {
        gb_session_set_gear(s, (gb_gear)a);
        const uint64_t t0 = gb_port_now_ns();
        gb_session_set_gear(s, (gb_gear)b);
        const uint64_t t1 = gb_port_now_ns();
        if (r > 0) t.push_back((double)(t1 - t0) * 1e-3);
      }
      const double us = median(t);
      printf("| %s -> %s | %.1f | %.1f | %.4f |\n", name(a), name(b), us, step_us[b], us / step_us[b]);
      char row[256];
      snprintf(row, sizeof row, "%s{\"from\": \"%s\", \"to\": \"%s\", \"shift_us\": %.2f, \"step_us\": %.2f}", js.size() > 1 ? ", " : "",
               name(a), name(b), us, step_us[b]);
      js += row;
    }
  js += "]\n";
  if (!json.empty()) {
    FILE *f = fopen(json.c_str(), "w");
    if (!f) return fprintf(stderr, "cannot write %s\n", json.c_str()), 1;
    fputs(js.c_str(), f);
    fclose(f);
  }
  gb_session_destroy(s);
  gb_model_close(m);
  return 0;
}
