// bench_gemv.cpp — every GEMV kernel of arch/kernels.inc that this CPU can
// run, on every weight format and shape, 1..n threads, hot and cold, against
// the machine's read bandwidth measured by this program (before and after
// the kernels, with the same thread counts; the better of the two is used).
//
// Shapes follow the Llama convention "k x n" = k inputs (columns)
// by n outputs (rows): 4096x11008 is an FFN up-projection, 11008x4096 the
// down-projection; stories260K's FFN matrices (64x172, 172x64) show the
// small-matrix regime. Weights are random floats quantized with the
// library's own quantizers (src/quant.h) into the layout the kernels read
// (arch/kernels.h): q4r16 is q4 with 16 rows interleaved, as `gearbx
// convert` writes the low tier (shapes whose row count is not a multiple of
// 16 have no q4r16 cells). GGUF's block formats (q4_1 .. q6k) are random
// blocks (random code bytes, scales of a model's magnitude); shapes
// whose k is not a multiple of their block (32, or 256 for the K-quants)
// have no cells of them.
//
// hot:  the same matrix every call (cache-resident when it fits the LLC).
// cold: the calls rotate through enough copies of the matrix that the
//       working set is >= 4x the last-level cache (capped by --max-ws-mib,
//       default 1024; the table says how many copies and MiB were used), so
//       every call streams its weights from DRAM.
// Threads split the rows the way src/forward.cpp matmul() does: n chunks of
// whole row tiles on a persistent worker pool (the session's kind, started
// once per thread count), and only for matrices of at least 2^16 weights
// (smaller ones run on the calling thread: marked '*').
// q8/q4 time the kernel only: the activations are quantized once, outside.
//
// Reported per cell: median ms per call over --reps samples (each sample
// repeats the call until it lasts >= 10 ms, 2 ms with --quick; the cells of
// one matrix sample in turns, so a burst of load from another process hits
// one sample of many cells rather than all of one cell), GB/s of
// weight bytes, % of the read bandwidth measured here with the same thread
// count, and the speed relative to the generic kernel of the format.
//   usage: gearbx-bench-gemv [--quick] [--json FILE] [--threads 1,2] [--reps R]
//                            [--max-ws-mib M] [--kernel SUBSTR] [--shape SUBSTR]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "bench_common.h"
#include "f16.h"
#include "format.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "krows16.h"
#include "quant.h"

namespace {

using gbbench::median;

// GGUF's block formats: the format table's row (the 16-row K layouts: their
// row-major format's row); nullptr for another format.
const gb::FormatInfo *gguf(uint32_t fmt) {
  const gb::FormatInfo *f = gb::format_info(gb::file_format(fmt));
  return f && f->gguf ? f : nullptr;
}
// Whether format fmt has rows of k weights (GGUF: whole blocks).
bool fits(uint32_t fmt, size_t k) { return gb::format_fits(fmt, k); }
size_t fmt_row_bytes(uint32_t fmt, size_t cols) { return gb::row_bytes(fmt, cols); }


struct Kernel {
  std::string name, isa;
  uint32_t fmt, req;
  gb_gemv_fn fn;
};

// The GEMV entries of kernels.inc whose ISA this CPU has.
std::vector<Kernel> kernels_for(uint32_t cpu) {
  std::vector<Kernel> v;
#define GB_GEMV(fmt, id, isa, req, prio) v.push_back({#fmt "_gemv__" #isa, #isa, (uint32_t)(id), req, gb_##fmt##_gemv__##isa});
#define GB_ROW(fmt, id, isa, req, prio)
#define GB_QUANT_ACT(isa, req, prio)
#include "kernels.inc"
#undef GB_GEMV
#undef GB_ROW
#undef GB_QUANT_ACT
  std::vector<Kernel> ok;
  for (const Kernel &k : v)
    if ((k.req & cpu) == k.req) ok.push_back(k);
  return ok;
}

struct Shape {
  const char *name;
  size_t k, n;  // k inputs (cols), n outputs (rows)
};
const Shape kShapes[] = {
    {"4096x4096", 4096, 4096},
    {"4096x11008", 4096, 11008},
    {"11008x4096", 11008, 4096},
    {"260K:64x172", 64, 172},
    {"260K:172x64", 172, 64},
};

uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void random_floats(float *x, size_t n, uint64_t *st) {
  for (size_t i = 0; i < n; i++) x[i] = (float)(splitmix64(st) >> 40) * (2.0f / 16777216.0f) - 1.0f;  // [-1, 1)
}

// `copies` matrices of rows x cols in format fmt, each at a 4 KiB-aligned
// stride of one allocation; copy 0 quantized, the others memcpy'd (every
// page written, so none is a shared zero page).
struct Matrices {
  uint8_t *base = nullptr;
  size_t bytes = 0, stride = 0, copies = 0;
  ~Matrices() { gb_port_aligned_free(base); }
  const uint8_t *at(size_t i) const { return base + (i % copies) * stride; }
};

bool make_matrices(Matrices *m, uint32_t fmt, size_t rows, size_t cols, size_t copies, uint64_t seed) {
  const size_t rb = fmt_row_bytes(fmt, cols);
  m->bytes = rb * rows;
  m->stride = (m->bytes + 4095) / 4096 * 4096;
  m->copies = copies;
  m->base = static_cast<uint8_t *>(gb_port_aligned_alloc(m->stride * copies, 4096));
  if (!m->base) return false;
  std::vector<float> row(cols);
  const uint32_t qfmt = gb::file_format(fmt);
  if (const gb::FormatInfo *g = gguf(fmt)) {
    for (size_t b = 0; b < m->bytes / g->bytes; b++) {
      uint8_t *blk = m->base + b * g->bytes;
      for (uint32_t i = 0; i < g->bytes; i++) blk[i] = (uint8_t)splitmix64(&seed);
      for (int at : {g->d_at, g->m_at}) {
        if (at < 0) continue;
        float v;
        random_floats(&v, 1, &seed);
        const uint16_t h = gb::f32_to_f16(v * (g->weights == 32 ? 0.05f : 0.005f));
        blk[at] = (uint8_t)h;
        blk[at + 1] = (uint8_t)(h >> 8);
      }
      if (g->id == GB_FMT_IQ1M) {  // d in the top nibbles of the scale words at 48..55
        float v;
        random_floats(&v, 1, &seed);
        const uint16_t h = gb::f32_to_f16(v * 0.005f);
        for (int k = 0; k < 4; k++) blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 0x0f) | (((h >> (4 * k)) & 15) << 4));
      }
      if (g->id == GB_FMT_MXFP4) blk[0] = (uint8_t)(116 + splitmix64(&seed) % 9);  // 2^-12 .. 2^-4
    }
  } else {
    for (size_t r = 0; r < rows; r++) {
      random_floats(row.data(), cols, &seed);
      gb::quantize_row(qfmt, m->base + r * rb, row.data(), cols);
    }
  }
  if (fmt == GB_FMT_Q4R16) {
    std::vector<uint8_t> rm(m->base, m->base + m->bytes);
    gb::q4_rows16_from_rows(m->base, rm.data(), rows, cols);
  }
  if (gb::is_memory_only_format(fmt) && gguf(fmt)) {  // q4kr16, q6kr16
    std::vector<uint8_t> rm(m->base, m->base + m->bytes);
    gb_krows16::from_rows(m->base, rm.data(), rows, cols, gguf(fmt)->bytes);
  }
  for (size_t c = 1; c < copies; c++) memcpy(m->base + c * m->stride, m->base, m->bytes);
  return true;
}

// One matrix-vector product split as src/forward.cpp matmul() splits it.
struct GemvTask {
  gb_gemv_fn fn;
  const uint8_t *W;
  float *y;
  const float *x;
  const gb_q8x_block *xq;
  size_t rows, cols;
};

void gemv_task(void *ctx, uint32_t t, uint32_t n) {
  const GemvTask *g = static_cast<const GemvTask *>(ctx);
  // Whole row tiles, as src/session.h task_rows() splits.
  const size_t tiles = (g->rows + GB_GEMV_ROW_TILE - 1) / GB_GEMV_ROW_TILE;
  const size_t r0 = std::min(g->rows, tiles * t / n * GB_GEMV_ROW_TILE);
  const size_t r1 = std::min(g->rows, tiles * (t + 1) / n * GB_GEMV_ROW_TILE);
  g->fn(g->y, g->W, g->x, g->xq, r0, r1, g->cols);
}

// forward.cpp's rule: threads only for matrices of >= 2^16 weights.
uint32_t threads_used(uint32_t threads, size_t rows, size_t cols) {
  return threads > 1 && (uint64_t)rows * cols >= (1u << 16) ? threads : 1;
}

struct Row {
  std::string kernel, isa, shape;
  uint32_t fmt;
  size_t k, n, bytes, copies;
  uint32_t threads, threads_used;
  bool cold;
  double ms, gbps, pct_bw, bw_gbps, vs_generic = 0;
};

// One cell of the table: a kernel on the matrices, hot or cold, on some threads.
struct Cell {
  GemvTask task;
  bool cold;
  uint32_t threads;
  gb_port_pool *pool = nullptr;  // started with `threads` threads
  size_t next = 0, iters = 1;
  std::vector<double> samples;  // ms per call
};

void call(Cell &c, const Matrices &m) {
  c.task.W = m.at(c.cold ? c.next++ : 0);
  if (c.threads > 1) gb_port_pool_run(c.pool, c.threads, gemv_task, &c.task);
  else gemv_task(&c.task, 0, 1);
}

// Warm-up: two calls (the first may fault in code and pages); a sample is
// sized from the second to last >= min_sample_ms.
void calibrate(Cell &c, const Matrices &m, double min_sample_ms) {
  call(c, m);
  const uint64_t t0 = gb_port_now_ns();
  call(c, m);
  const double one_ms = (double)(gb_port_now_ns() - t0) * 1e-6;
  c.iters = one_ms >= min_sample_ms ? 1 : (size_t)(min_sample_ms / (one_ms > 1e-6 ? one_ms : 1e-6)) + 1;
}

// One sample (a hot cell first re-reads its matrix: the cell before may
// have been a cold one that evicted it).
void sample(Cell &c, const Matrices &m) {
  if (!c.cold) call(c, m);
  const uint64_t t0 = gb_port_now_ns();
  for (size_t i = 0; i < c.iters; i++) call(c, m);
  c.samples.push_back((double)(gb_port_now_ns() - t0) * 1e-6 / (double)c.iters);
}

}  // namespace

int main(int argc, char **argv) {
  std::string json, kernel_filter, shape_filter;
  std::vector<uint32_t> threads = {1, 2};
  bool quick = false;
  int reps = 0;
  size_t max_ws_mib = 1024;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--quick")) {
      quick = true;
      continue;
    }
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
      printf("usage: gearbx-bench-gemv [--quick] [--json FILE] [--threads 1,2] [--reps R] [--max-ws-mib M]\n"
             "                         [--kernel SUBSTR] [--shape SUBSTR]\n");
      return 0;
    }
    const char *v = i + 1 < argc ? argv[++i] : nullptr;
    if (!v) return fprintf(stderr, "option %s needs a value\n", o), 1;
    if (!strcmp(o, "--json")) json = v;
    else if (!strcmp(o, "--threads")) {
      if (!gbbench::parse_uint_list(v, &threads)) return fprintf(stderr, "--threads: a list like 1,2\n"), 1;
    } else if (!strcmp(o, "--reps")) reps = atoi(v);
    else if (!strcmp(o, "--max-ws-mib")) max_ws_mib = (size_t)atol(v);
    else if (!strcmp(o, "--kernel")) kernel_filter = v;
    else if (!strcmp(o, "--shape")) shape_filter = v;
    else return fprintf(stderr, "unknown option %s\n", o), 1;
  }
  if (reps <= 0) reps = quick ? 3 : 7;
  if (max_ws_mib < 64) return fprintf(stderr, "--max-ws-mib must be >= 64\n"), 1;
  const double min_sample_ms = quick ? 2.0 : 10.0;

  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  std::vector<Kernel> kernels;
  for (const Kernel &k : kernels_for(cpu))
    if (kernel_filter.empty() || k.name.find(kernel_filter) != std::string::npos) kernels.push_back(k);
  std::string llc_src;
  const size_t llc = gbbench::llc_bytes(&llc_src);
  const size_t cap = max_ws_mib << 20;
  const size_t ws_target = std::min(4 * llc, cap);

  // The read bandwidth every cell is compared with: same thread counts, a
  // buffer as large as the cold working set (at least 256 MiB).
  const double load0 = gbbench::loadavg();
  const size_t bw_bytes = std::max(ws_target, (size_t)256 << 20);
  std::vector<gbbench::Bandwidth> bw = gbbench::read_bandwidth(bw_bytes, threads, reps);

  // Activations (shared by every cell; the largest k).
  gb_kernels best;
  gb_kernels_select(&best, cpu);
  size_t kmax = 0;
  for (const Shape &s : kShapes) kmax = std::max(kmax, s.k);
  std::vector<float> x(kmax), y(20000);
  uint64_t seed = 12345;
  random_floats(x.data(), kmax, &seed);
  std::vector<gb_q8x_block> xq((kmax + 31) / 32);
  // One persistent pool per thread count (as a session has one).
  std::vector<std::vector<uint8_t>> pool_mem(threads.size());
  std::vector<gb_port_pool *> pools(threads.size(), nullptr);
  for (size_t ti = 0; ti < threads.size(); ti++) {
    pool_mem[ti].resize(gb_port_pool_mem_size(threads[ti]) + 64);
    void *mem = pool_mem[ti].data() + (64 - reinterpret_cast<uintptr_t>(pool_mem[ti].data()) % 64) % 64;
    pools[ti] = gb_port_pool_start(mem, threads[ti]);
  }

  std::vector<Row> rows;
  for (uint32_t fmt = 0; fmt < GB_FMT_COUNT; fmt++) {
    bool any = false;
    for (const Kernel &k : kernels) any |= k.fmt == fmt;
    if (!any) continue;
    for (const Shape &s : kShapes) {
      if (!shape_filter.empty() && std::string(s.name).find(shape_filter) == std::string::npos) continue;
      if (gb::is_memory_only_format(fmt) && s.n % 16 != 0) continue;
      if (!fits(fmt, s.k)) continue;
      const size_t bytes = fmt_row_bytes(fmt, s.k) * s.n;
      const size_t stride = (bytes + 4095) / 4096 * 4096;
      const size_t copies = std::max((size_t)2, std::min((ws_target + stride - 1) / stride, cap / stride));
      Matrices m;
      if (!make_matrices(&m, fmt, s.n, s.k, copies, 1000 + fmt * 16 + (uint64_t)(&s - kShapes))) {
        fprintf(stderr, "cannot allocate %zu x %zu bytes\n", copies, stride);
        return 1;
      }
      best.quantize_act(xq.data(), x.data(), s.k);
      // The cells of this matrix take their samples in turns, so each
      // cell's median spans the group's whole run: a burst of load from
      // another process spoils one sample of many cells, not one cell.
      std::vector<Cell> cells;
      std::vector<Row> group;
      for (const Kernel &k : kernels) {
        if (k.fmt != fmt) continue;
        for (size_t ti = 0; ti < threads.size(); ti++)
          for (int mode = 0; mode < 2; mode++) {
            Cell c;
            c.task = GemvTask{k.fn, nullptr, y.data(), x.data(), xq.data(), s.n, s.k};
            c.cold = mode == 1;
            c.threads = threads_used(threads[ti], s.n, s.k);
            c.pool = pools[ti];
            calibrate(c, m, min_sample_ms);
            cells.push_back(c);
            Row r;
            r.kernel = k.name;
            r.isa = k.isa;
            r.shape = s.name;
            r.fmt = fmt;
            r.k = s.k;
            r.n = s.n;
            r.bytes = bytes;
            r.copies = c.cold ? copies : 1;
            r.threads = threads[ti];
            r.threads_used = c.threads;
            r.cold = c.cold;
            r.bw_gbps = bw[ti].bytes_per_s * 1e-9;
            group.push_back(r);
          }
      }
      for (int rep = 0; rep < reps; rep++) {
        fprintf(stderr, "\r%-4s %-12s sample %d/%d   ", gb::format_name(fmt), s.name, rep + 1, reps);
        for (Cell &c : cells) sample(c, m);
      }
      for (size_t i = 0; i < cells.size(); i++) {
        Row &r = group[i];
        r.ms = median(cells[i].samples);
        r.gbps = (double)bytes / (r.ms * 1e-3) * 1e-9;
        r.pct_bw = r.bw_gbps > 0 ? 100.0 * r.gbps / r.bw_gbps : 0.0;
        rows.push_back(r);
      }
    }
  }
  fprintf(stderr, "\r%70s\r", "");
  // Measured again after the cells: the machine's bandwidth is the better
  // of the two (other processes' load drifts over a run), every % uses it.
  const std::vector<gbbench::Bandwidth> bw_end = gbbench::read_bandwidth(bw_bytes, threads, reps);
  std::vector<double> bw_start(threads.size());
  for (size_t ti = 0; ti < threads.size(); ti++) {
    bw_start[ti] = bw[ti].bytes_per_s;
    if (bw_end[ti].bytes_per_s > bw[ti].bytes_per_s) bw[ti] = bw_end[ti];
  }
  for (Row &r : rows) {
    for (size_t ti = 0; ti < threads.size(); ti++)
      if (threads[ti] == r.threads) r.bw_gbps = bw[ti].bytes_per_s * 1e-9;
    r.pct_bw = r.bw_gbps > 0 ? 100.0 * r.gbps / r.bw_gbps : 0.0;
  }
  for (Row &r : rows)
    for (const Row &g : rows)
      if (g.isa == "generic" && g.fmt == r.fmt && g.shape == r.shape && g.threads == r.threads && g.cold == r.cold)
        r.vs_generic = r.ms > 0 ? g.ms / r.ms : 0;

  printf("gearbx-bench-gemv%s: CPU features 0x%x; %zu kernels; %d samples per cell (median)\n", quick ? " --quick" : "", cpu,
         kernels.size(), reps);
  printf("last-level cache %zu MiB (%s); cold working set target %zu MiB (4x LLC, capped at %zu MiB)\n", llc >> 20,
         llc_src.c_str(), ws_target >> 20, max_ws_mib);
  for (size_t ti = 0; ti < threads.size(); ti++)
    printf("measured streaming read bandwidth, %u thread%s: %.2f GB/s (best probe: %s; before the cells %.2f, after %.2f)\n",
           threads[ti], threads[ti] > 1 ? "s" : "", bw[ti].bytes_per_s * 1e-9, bw[ti].probe.c_str(), bw_start[ti] * 1e-9,
           bw_end[ti].bytes_per_s * 1e-9);
  printf("load average (1 min) at start %.2f, at end %.2f on %ld online CPUs: other processes share the cores and the memory bus\n",
         load0, gbbench::loadavg(), sysconf(_SC_NPROCESSORS_ONLN));
  printf("\nshape = k x n: k inputs (columns) by n outputs (rows), the Llama convention (4096x11008 = 4096 in, 11008 out).\n"
         "ms per call; GB/s of weight bytes; %% of the read bandwidth measured above with the same thread count;\n"
         "'*' = below forward.cpp's 2^16-weight threshold, run on one thread as the library runs it.\n\n");
  printf("| kernel | format | shape k x n | MiB | threads | mode | copies | ms | GB/s | %% read bw | x generic |\n");
  printf("|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
  for (const Row &r : rows) {
    char vg[16] = "-";
    if (r.vs_generic > 0) snprintf(vg, sizeof vg, "%.2f", r.vs_generic);
    printf("| %s | %s | %s | %.3f | %u%s | %s | %zu | %.4f | %.2f | %.1f%% | %s |\n", r.kernel.c_str(), gb::format_name(r.fmt),
           r.shape.c_str(), (double)r.bytes / (1 << 20), r.threads, r.threads_used != r.threads ? "*" : "", r.cold ? "cold" : "hot",
           r.copies, r.ms, r.gbps, r.pct_bw, vg);
  }

  // Summary: the kernel the dispatcher picks for each format, cold, % of bandwidth per thread count.
  printf("\nSummary: cold, the kernel the dispatcher picks (%% of measured read bandwidth)\n\n| kernel | shape k x n |");
  for (uint32_t t : threads) printf(" %ut |", t);
  printf("\n|---|---|");
  for (size_t i = 0; i < threads.size(); i++) printf("---:|");
  printf("\n");
  for (uint32_t fmt = 0; fmt < GB_FMT_COUNT; fmt++) {
    if (!best.name[fmt]) continue;
    for (const Shape &s : kShapes) {
      std::string line;
      int found = 0;
      for (uint32_t t : threads)
        for (const Row &r : rows)
          if (r.kernel == best.name[fmt] && r.shape == s.name && r.threads == t && r.cold) {
            char c[32];
            snprintf(c, sizeof c, " %.1f%%%s |", r.pct_bw, r.threads_used != t ? "*" : "");
            line += c;
            found++;
          }
      if (found) printf("| %s | %s |%s\n", best.name[fmt], s.name, line.c_str());
    }
  }

  if (!json.empty()) {
    FILE *f = fopen(json.c_str(), "w");
    if (!f) return fprintf(stderr, "cannot write %s\n", json.c_str()), 1;
    fprintf(f, "[\n");
    for (size_t i = 0; i < rows.size(); i++) {
      const Row &r = rows[i];
      fprintf(f,
              "  {\"kernel\": %s, \"isa\": %s, \"format\": \"%s\", \"shape\": %s, \"k\": %zu, \"n\": %zu, \"threads\": %u, "
              "\"threads_used\": %u, \"mode\": \"%s\", \"ms\": %.6f, \"gbps\": %.4f, \"pct_bw\": %.3f, \"bw_gbps\": %.4f, "
              "\"weight_bytes\": %zu, \"copies\": %zu, \"working_set_mib\": %.1f, \"vs_generic\": %.4f, \"llc_mib\": %zu, "
              "\"quick\": %s}%s\n",
              gbbench::json_str(r.kernel).c_str(), gbbench::json_str(r.isa).c_str(), gb::format_name(r.fmt),
              gbbench::json_str(r.shape).c_str(), r.k, r.n, r.threads, r.threads_used, r.cold ? "cold" : "hot", r.ms, r.gbps,
              r.pct_bw, r.bw_gbps, r.bytes, r.copies, (double)r.copies * r.bytes / (1 << 20), r.vs_generic, llc >> 20,
              quick ? "true" : "false", i + 1 < rows.size() ? "," : "");
    }
    fprintf(f, "]\n");
    fclose(f);
  }
  for (gb_port_pool *p : pools) gb_port_pool_stop(p);
  return 0;
}
