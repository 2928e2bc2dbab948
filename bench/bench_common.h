// bench_common.h — what the bench/ programs share: medians, the last-level
// cache size, a streaming-read bandwidth measured on 1..n threads, comma
// lists and JSON string escaping. Header-only; benchmarks are tooling, not
// the embedded core (they may allocate and print).
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gearbx_port.h"

namespace gbbench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// "1,2,4" -> {1, 2, 4}; false on anything else (or an empty list / a zero).
inline bool parse_uint_list(const char *s, std::vector<uint32_t> *out) {
  out->clear();
  while (*s) {
    char *e = nullptr;
    const unsigned long v = strtoul(s, &e, 10);
    if (e == s || v == 0 || v > 64) return false;
    out->push_back((uint32_t)v);
    s = e;
    if (*s == ',') s++;
    else if (*s) return false;
  }
  return !out->empty();
}

// "a,b" -> {"a", "b"}.
inline std::vector<std::string> split(const std::string &s, char sep = ',') {
  std::vector<std::string> v;
  size_t at = 0;
  while (at <= s.size()) {
    size_t e = s.find(sep, at);
    if (e == std::string::npos) e = s.size();
    if (e > at) v.push_back(s.substr(at, e - at));
    at = e + 1;
  }
  return v;
}

inline std::string json_str(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if ((unsigned char)c < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}

// Size of the largest cache level in bytes, and where the number came from.
// glibc's sysconf and the kernel's /sys can disagree (in a VM sysconf may
// report the whole socket's L3, /sys the slice this CPU sees): the larger
// is taken, so a working set sized from it is "far larger" under either.
inline size_t llc_bytes(std::string *source) {
  size_t sc = 0, sys = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  const long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (v > 0) sc = (size_t)v;
#endif
  int best_level = -1;
  for (int i = 0; i < 8; i++) {
    char path[128], buf[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (!f) break;
    const int level = fgets(buf, sizeof buf, f) ? atoi(buf) : -1;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!(f = fopen(path, "r"))) continue;
    if (fgets(buf, sizeof buf, f) && level >= best_level) {
      char *e = nullptr;
      size_t b = strtoull(buf, &e, 10);
      if (e && (*e == 'K' || *e == 'k')) b <<= 10;
      else if (e && *e == 'M') b <<= 20;
      best_level = level;
      sys = b;
    }
    fclose(f);
  }
  char desc[160];
  snprintf(desc, sizeof desc, "sysconf L3 %zu MiB, /sys L%d %zu MiB", sc >> 20, best_level, sys >> 20);
  *source = desc;
  const size_t b = std::max(sc, sys);
  if (b == 0) {
    *source = "unknown (assumed 64 MiB)";
    return (size_t)64 << 20;
  }
  return b;
}

// ---- streaming read bandwidth --------------------------------------------------
// Each of n threads sums its contiguous share of a buffer of u64, through
// gb_port_parallel_for as the library's matrix-vector products are. The
// buffer is far larger than the last-level cache, so this is DRAM read
// bandwidth. A single sequential stream does not always reach the peak (the
// hardware prefetchers of some cores keep too few lines in flight), so each
// share is also read as four interleaved streams (like a kernel's four rows),
// with and without software prefetch 2 KiB ahead, and on x86 with AVX2 also
// with 32-byte loads; the machine's read bandwidth is the best of these probes (median of `reps` passes each after a
// warm-up pass).
typedef uint64_t u64x4 __attribute__((vector_size(32)));

template <int kStreams, size_t kPrefetch>
__attribute__((always_inline)) inline uint64_t sum_streams(const uint64_t *b, size_t n) {
  const size_t q = n / kStreams / 8 * 8;  // u64 per stream, whole 64-byte lines
  u64x4 acc[kStreams];
  for (int s = 0; s < kStreams; s++) acc[s] = u64x4{0, 0, 0, 0};
  for (size_t i = 0; i < q; i += 8)
    for (int s = 0; s < kStreams; s++) {
      if (kPrefetch) __builtin_prefetch(b + s * q + i + kPrefetch / sizeof(uint64_t));
      u64x4 v0, v1;
      memcpy(&v0, b + s * q + i, sizeof v0);
      memcpy(&v1, b + s * q + i + 4, sizeof v1);
      acc[s] += v0 + v1;
    }
  u64x4 t = acc[0];
  for (int s = 1; s < kStreams; s++) t += acc[s];
  return t[0] + t[1] + t[2] + t[3];
}

typedef uint64_t (*sum_fn)(const uint64_t *, size_t);
inline uint64_t sum_1(const uint64_t *b, size_t n) { return sum_streams<1, 0>(b, n); }
inline uint64_t sum_4(const uint64_t *b, size_t n) { return sum_streams<4, 0>(b, n); }
inline uint64_t sum_4_pf(const uint64_t *b, size_t n) { return sum_streams<4, 2048>(b, n); }
#if defined(__x86_64__)
__attribute__((target("avx2"))) inline uint64_t sum_1_avx2(const uint64_t *b, size_t n) { return sum_streams<1, 0>(b, n); }
__attribute__((target("avx2"))) inline uint64_t sum_4_avx2(const uint64_t *b, size_t n) { return sum_streams<4, 0>(b, n); }
__attribute__((target("avx2"))) inline uint64_t sum_4_pf_avx2(const uint64_t *b, size_t n) { return sum_streams<4, 2048>(b, n); }
#endif

struct ReadTask {
  sum_fn fn;
  const uint64_t *buf;
  size_t n;
  uint64_t sums[64];
};

inline void read_task(void *ctx, uint32_t t, uint32_t nt) {
  ReadTask *r = static_cast<ReadTask *>(ctx);
  const size_t i0 = r->n * t / nt / 64 * 64, i1 = r->n * (t + 1) / nt / 64 * 64;
  r->sums[t] = r->fn(r->buf + i0, i1 - i0);
}

struct Bandwidth {
  double bytes_per_s;  // the best probe
  std::string probe;   // which one
  int index = -1;      // its place in ReadProbe's list (-1: none ran)
};

// The probes over one buffer, kept for passes between other measurements
// (ReadProbe::pass: one pass of a given probe, e.g. right before and after
// a timed run, so that the share of the bandwidth a run reached is taken
// against what the memory gave at that moment, not minutes earlier).
class ReadProbe {
 public:
  explicit ReadProbe(size_t bytes) : n_(bytes / sizeof(uint64_t) / 64 * 64) {
    buf_ = static_cast<uint64_t *>(gb_port_aligned_alloc(n_ * sizeof(uint64_t), 4096));
    if (!buf_) return;
    for (size_t i = 0; i < n_; i++) buf_[i] = i * 0x9E3779B97F4A7C15ull;
    probes_ = {{"1 stream", sum_1}, {"4 streams", sum_4}, {"4 streams + prefetch", sum_4_pf}};
#if defined(__x86_64__)
    if (gb_port_cpu_features() & (1u << 1)) {  // GB_ISA_AVX2
      probes_.push_back({"1 stream avx2", sum_1_avx2});
      probes_.push_back({"4 streams avx2", sum_4_avx2});
      probes_.push_back({"4 streams + prefetch avx2", sum_4_pf_avx2});
    }
#endif
  }
  ~ReadProbe() { gb_port_aligned_free(buf_); }
  ReadProbe(const ReadProbe &) = delete;
  ReadProbe &operator=(const ReadProbe &) = delete;

  // Bytes per second of one pass of probe `index` on `threads` threads (0
  // when there is no buffer).
  double pass(uint32_t threads, int index) {
    if (!buf_ || index < 0 || (size_t)index >= probes_.size()) return 0.0;
    ReadTask task;
    task.fn = probes_[(size_t)index].fn;
    task.buf = buf_;
    task.n = n_;
    const uint64_t t0 = gb_port_now_ns();
    gb_port_parallel_for(threads, threads, read_task, &task);
    const uint64_t t1 = gb_port_now_ns();
    for (uint32_t k = 0; k < threads; k++) sink_ = sink_ + task.sums[k];
    return (double)(n_ * sizeof(uint64_t)) / ((double)(t1 - t0) * 1e-9);  // chunks cover n exactly
  }

  // The best probe on `threads` threads: the median of `reps` passes of
  // each after a warm-up pass.
  Bandwidth best(uint32_t threads, int reps) {
    if (!buf_) return Bandwidth{0.0, "none", -1};
    Bandwidth b{0.0, "", -1};
    for (size_t p = 0; p < probes_.size(); p++) {
      std::vector<double> bw;
      for (int r = 0; r < reps + 1; r++) {
        const double v = pass(threads, (int)p);
        if (r > 0) bw.push_back(v);
      }
      const double m = median(bw);
      if (m > b.bytes_per_s) b = Bandwidth{m, probes_[p].name, (int)p};
    }
    return b;
  }

 private:
  struct Probe {
    const char *name;
    sum_fn fn;
  };
  size_t n_;
  uint64_t *buf_ = nullptr;
  std::vector<Probe> probes_;
  volatile uint64_t sink_ = 0;
};

// The read bandwidth for each thread count in `threads` (same order).
inline std::vector<Bandwidth> read_bandwidth(size_t bytes, const std::vector<uint32_t> &threads, int reps) {
  ReadProbe probe(bytes);
  std::vector<Bandwidth> out;
  for (uint32_t t : threads) out.push_back(probe.best(t, reps));
  return out;
}

// The 1-minute load average (-1 if unknown): printed next to timings, since
// other processes on the machine share its cores and memory bandwidth.
inline double loadavg() {
  FILE *f = fopen("/proc/loadavg", "r");
  double l = -1;
  if (f) {
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
  }
  return l;
}

}  // namespace gbbench
