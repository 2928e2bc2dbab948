// bench_decode.cpp — decode speed per gear against the machine's memory
// bandwidth and against the fp16 (high) gear.
//
// For each gear: a warm-up run, then --reps runs of --tokens greedy decode
// steps from BOS (session reset between runs); the median tokens/s is kept.
// Weight bytes read per token come from gb_step_info, so the table shows the
// effective weight bandwidth (bytes/token x tokens/s) as a fraction of a
// measured streaming-read bandwidth (median of --reps sums over a buffer
// larger than the last-level cache), measured in the same run.
//   usage: bench_decode [-m MODEL.gbx | --synthetic SPEC] [--tokens N] [--reps R]
//                       [--threads T] [--json FILE]
#include <math.h>
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
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Streaming read bandwidth in bytes/s: sum a 256 MiB buffer of u64.
double read_bandwidth(int reps) {
  const size_t n = (256u << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
  for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
  std::vector<double> bw;
  volatile uint64_t sink = 0;
  for (int r = 0; r < reps + 1; r++) {
    const uint64_t t0 = gb_port_now_ns();
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < n; i += 4) {
      s0 += buf[i];
      s1 += buf[i + 1];
      s2 += buf[i + 2];
      s3 += buf[i + 3];
    }
    sink = sink + s0 + s1 + s2 + s3;
    const uint64_t t1 = gb_port_now_ns();
    if (r > 0) bw.push_back((double)(n * sizeof(uint64_t)) / ((double)(t1 - t0) * 1e-9));
  }
  return median(bw);
}

struct Row {
  const char *gear;
  double tok_s = 0, bytes_per_tok = 0, bits_per_weight = 0;
};

}  // namespace

int main(int argc, char **argv) {
  std::string model, synthetic = "dim=512,layers=8,hidden=1376,heads=8,kv_heads=4,vocab=512,seq_len=256,seed=3", json;
  int tokens = 64, reps = 5;
  uint32_t threads = 1;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) {
      fprintf(stderr, "option %s needs a value\n", o);
      return 1;
    }
    if (!strcmp(o, "-m")) model = v;
    else if (!strcmp(o, "--synthetic")) synthetic = v;
    else if (!strcmp(o, "--tokens")) tokens = atoi(v);
    else if (!strcmp(o, "--reps")) reps = atoi(v);
    else if (!strcmp(o, "--threads")) threads = (uint32_t)atoi(v);
    else if (!strcmp(o, "--json")) json = v;
    else {
      fprintf(stderr, "unknown option %s\n", o);
      return 1;
    }
    i++;
  }
  if (tokens < 1 || reps < 1) return fprintf(stderr, "--tokens and --reps must be >= 1\n"), 1;
  std::string tmp;
  if (model.empty()) {
    tmp = "/tmp/gearbx-bench-" + std::to_string((long)getpid()) + ".gbx";
    gb::ConvertOptions co;
    if (gb::convert_synthetic(synthetic.c_str(), tmp.c_str(), co) != GB_OK) return fprintf(stderr, "cannot build %s\n", synthetic.c_str()), 1;
    model = tmp;
  }
  gb_model *m = nullptr;
  gb_status st = gb_model_open_file(model.c_str(), nullptr, &m);
  if (!tmp.empty()) remove(tmp.c_str());  // the mapping stays valid
  if (st != GB_OK) return fprintf(stderr, "cannot open %s: %s\n", model.c_str(), gb_status_str(st)), 1;
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);

  const double bw = read_bandwidth(reps);
  std::vector<Row> rows;
  const gb_gear gears[] = {GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32};
  const char *names[] = {"low", "mid", "high", "f32"};
  for (int gi = 0; gi < 4; gi++) {
    if (!(mi.gears & (1u << gears[gi]))) continue;
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = gears[gi];
    so.n_threads = threads;
    so.n_ctx = (uint32_t)tokens + 1 < mi.seq_len ? (uint32_t)tokens + 1 : mi.seq_len;
    so.sampler.temperature = 0.0f;
    gb_session *s = nullptr;
    if ((st = gb_session_create(m, &so, nullptr, 0, &s)) != GB_OK) return fprintf(stderr, "session: %s\n", gb_status_str(st)), 1;
    Row row;
    row.gear = names[gi];
    std::vector<double> rates;
    const int steps = (int)so.n_ctx - 1;
    for (int r = 0; r < reps + 1; r++) {  // run 0 warms up
      gb_session_reset(s);
      gb_prefill(s, &mi.bos_id, 1);
      uint64_t bytes = 0, weights = 0;
      const uint64_t t0 = gb_port_now_ns();
      for (int k = 0; k < steps; k++) {
        gb_step_info info;
        info.struct_size = sizeof info;
        if (gb_decode_step(s, nullptr, &info) != GB_OK) break;
        bytes += info.weight_bytes_read;
        weights += info.weights_read;
      }
      const uint64_t t1 = gb_port_now_ns();
      if (r > 0) rates.push_back(steps / ((double)(t1 - t0) * 1e-9));
      row.bytes_per_tok = (double)bytes / steps;
      row.bits_per_weight = weights ? 8.0 * bytes / weights : 0;
    }
    row.tok_s = median(rates);
    rows.push_back(row);
    gb_session_destroy(s);
  }
  double high_tok_s = 0;
  for (const Row &r : rows)
    if (!strcmp(r.gear, "high")) high_tok_s = r.tok_s;

  printf("model %s: dim %u, layers %u, hidden %u, vocab %u; threads %u; %d tokens x %d reps (median)\n", mi.name, mi.dim,
         mi.n_layers, mi.hidden_dim, mi.vocab_size, threads, tokens, reps);
  printf("measured streaming read bandwidth: %.2f GB/s\n\n", bw * 1e-9);
  printf("| gear | bits/weight | weight MB/token | tokens/s | weight GB/s | of bandwidth | speed vs high (fp16) |\n");
  printf("|------|------------:|----------------:|---------:|------------:|-------------:|---------------------:|\n");
  for (const Row &r : rows) {
    const double gbs = r.bytes_per_tok * r.tok_s;
    printf("| %-4s | %11.2f | %15.3f | %8.1f | %11.2f | %11.1f%% | %19.2fx |\n", r.gear, r.bits_per_weight, r.bytes_per_tok * 1e-6,
           r.tok_s, gbs * 1e-9, 100.0 * gbs / bw, high_tok_s > 0 ? r.tok_s / high_tok_s : 0.0);
  }
  if (!json.empty()) {
    FILE *f = fopen(json.c_str(), "w");
    if (!f) return fprintf(stderr, "cannot write %s\n", json.c_str()), 1;
    fprintf(f, "{\"model\": \"%s\", \"threads\": %u, \"tokens\": %d, \"reps\": %d, \"bandwidth_gbs\": %.3f, \"gears\": [", mi.name,
            threads, tokens, reps, bw * 1e-9);
    for (size_t i = 0; i < rows.size(); i++) {
      const Row &r = rows[i];
      const double gbs = r.bytes_per_tok * r.tok_s;
      fprintf(f, "%s{\"gear\": \"%s\", \"bits_per_weight\": %.4f, \"bytes_per_token\": %.0f, \"tok_s\": %.3f, \"weight_gbs\": %.4f, "
                 "\"of_bandwidth\": %.4f, \"vs_high\": %.4f}",
              i ? ", " : "", r.gear, r.bits_per_weight, r.bytes_per_tok, r.tok_s, gbs * 1e-9, gbs / bw,
              high_tok_s > 0 ? r.tok_s / high_tok_s : 0.0);
    }
    fprintf(f, "]}\n");
    fclose(f);
  }
  gb_model_close(m);
  return 0;
}
