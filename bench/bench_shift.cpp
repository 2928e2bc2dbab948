// bench_shift.cpp — cost of a gear shift between tiers of the mapped file,
// against the cost of one decode step, in the same run.
//
// A shift is gb_session_set_gear() on an auto session: the pointer swap,
// the madvise hints (WILLNEED for the new tier, DONTNEED for the tiers
// left are queued and released a slice per step). Reported per pair of
// gears: median µs per shift, the first decode step after it (page faults
// of the new tier, first release slice), the steady step at the target
// gear, and shift / steady step.
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
const char *name(int g) { return gb_gear_name((gb_gear)g); }
}  // namespace

int main(int argc, char **argv) {
  std::string model, synthetic = "dim=1024,layers=8,hidden=2816,heads=16,kv_heads=4,vocab=4096,seq_len=256,seed=4", json;
  int reps = 21;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {  // every option takes a value: a lone one (--help too) is a usage error
      return fprintf(stderr, "usage: gearbx-bench-shift [-m MODEL.gbx | --synthetic SPEC] [--reps R] [--json FILE]\n"), 1;
    }
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
  gb_session_experimental sx;
  gb_session_experimental_init(&sx);
  so.experimental = &sx;
  so.gear = GB_GEAR_AUTO;
  sx.monitor.min_gear_duration = 1000000;  // the monitor never shifts by itself here
  sx.monitor.catastrophic_frac = 0.0f;
  sx.monitor.prewarm = 0;                  // each shift finds its tier cold in this process
  gb_session *s = nullptr;
  if (gb_session_create(m, &so, nullptr, 0, &s) != GB_OK) return fprintf(stderr, "session failed\n"), 1;
  const uint32_t settle = (sx.release_steps ? sx.release_steps : 1) + 2;  // steps until the old tier is released
  uint32_t pos = 0, n_ctx = 0;
  auto decode = [&](double *us) {
    gb_session_position(s, &pos, &n_ctx);
    if (pos + 2 >= n_ctx) {  // keep the context short: weights dominate the step
      gb_session_reset(s);
      gb_prefill(s, &mi.bos_id, 1);
    }
    gb_step_info info;
    info.struct_size = sizeof info;
    const uint64_t t0 = gb_port_now_ns();
    gb_decode_step(s, nullptr, &info);
    if (us) *us = (double)(gb_port_now_ns() - t0) * 1e-3;
  };
  gb_prefill(s, &mi.bos_id, 1);

  // For every ordered pair a -> b: settle in a (its tier read, the others
  // released), then time the shift (gb_session_set_gear: pointer swap and a
  // WILLNEED hint), the first step in b (which faults b's pages back in and
  // releases the first slice of a's) and the steady step in b.
  printf("model %s (%llu bytes), %d reps, medians; release spread over %u steps\n\n"
         "| shift | µs per shift | first step after (µs) | steady step at target (µs) | shift / step |\n|---|---:|---:|---:|---:|\n",
         mi.name, (unsigned long long)mi.file_bytes, reps, sx.release_steps);
  std::string js = "[";
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      if (a == b) continue;
      std::vector<double> t_shift, t_first, t_steady;
      for (int r = 0; r < reps + 1; r++) {
        gb_session_set_gear(s, (gb_gear)a);
        for (uint32_t i = 0; i < settle; i++) decode(nullptr);
        const uint64_t t0 = gb_port_now_ns();
        gb_session_set_gear(s, (gb_gear)b);
        const uint64_t t1 = gb_port_now_ns();
        double first = 0, steady = 0;
        decode(&first);
        for (uint32_t i = 0; i < settle; i++) decode(&steady);
        if (r == 0) continue;  // warm-up
        t_shift.push_back((double)(t1 - t0) * 1e-3);
        t_first.push_back(first);
        t_steady.push_back(steady);
      }
      const double us = median(t_shift), f = median(t_first), st_us = median(t_steady);
      printf("| %s -> %s | %.1f | %.1f | %.1f | %.4f |\n", name(a), name(b), us, f, st_us, us / st_us);
      char row[320];
      snprintf(row, sizeof row,
               "%s{\"from\": \"%s\", \"to\": \"%s\", \"shift_us\": %.2f, \"first_step_us\": %.2f, \"step_us\": %.2f}",
               js.size() > 1 ? ", " : "", name(a), name(b), us, f, st_us);
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
