// bench_attention.cpp — gearbx-bench-attention: one decode step's attention
// of one layer (n_heads query heads over `context` cached tokens) three ways:
//   fused    the session's fused kernel over packed buckets (2/3/4/8-bit
//            records at the mix a pool of `beta` holds: the top affordable
//            uniform level plus part of the tokens one level up), with the
//            importance statistics gathered;
//   f16      the same streaming kernel over binary16 rows (the fp16 cache);
//   dequant  dequantize the packed buckets into an f32 copy, then attend
//            over it (the unfused dequantize-then-attend baseline).
// Plus the allocators' cost per call: the SEED policy's greedy heap re-plan of one
// layer (alloc_seed) and the window policy's room-making per token
// (alloc_window), on a pool of `context` tokens.
// Each attention path runs hot (the same records called again and again)
// and cold (a buffer far larger than the LLC read before every call: the
// records come from DRAM, as in decoding); --mode picks one.
// Prints a table (median of --reps timed calls after warm-up; ratios to f16
// of the same mode) and, with --json FILE, rows {context, head_dim, path,
// mode, beta, us}.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "f16.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "kv.h"
#include "model.h"

namespace {

struct Row {
  uint32_t context, head_dim;
  std::string path;
  double beta, us, bytes;
  std::string mode;  // "hot" / "cold"; empty for the allocator rows
};

// Cold calls: before each timed call, read a buffer far larger than the
// last-level cache, so the call finds its KV records in DRAM, as a decode
// step does (every layer's cache and the weights pass through the LLC
// between two visits of one layer's cache).
struct Evict {
  std::vector<uint64_t> buf;
  volatile uint64_t sink = 0;
  void operator()() {
    uint64_t s = 0;
    for (size_t i = 0; i < buf.size(); i += 8) s += buf[i];  // one word per 64-byte line
    sink = sink + s;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_us(F &&f, int reps, Evict *evict = nullptr) {
  for (int i = 0; i < 3; i++) f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    if (evict) (*evict)();
    const uint64_t t0 = gb_port_now_ns();
    f();
    t.push_back((gb_port_now_ns() - t0) / 1e3);
  }
  return median(t);
}

struct Bucket {
  uint32_t kb, vb, n;
  std::vector<uint8_t> rec;
  std::vector<uint32_t> slots;
};

// Records of n tokens at bits b (slots base..base+n), scales into `scales`.
Bucket make_bucket(uint32_t bits, uint32_t n, uint32_t R, uint32_t d, uint32_t slot0, std::vector<uint16_t> &scales,
                   std::mt19937 &rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Bucket b{bits, bits, n, {}, {}};
  const uint32_t rb = R * 2 * d * bits / 8;
  b.rec.resize((size_t)n * rb);
  std::vector<float> x(d);
  for (uint32_t i = 0; i < n; i++) {
    b.slots.push_back(slot0 + i);
    uint8_t *p = b.rec.data() + (size_t)i * rb;
    for (uint32_t kv = 0; kv < 2; kv++)
      for (uint32_t r = 0; r < R; r++, p += d * bits / 8) {
        for (auto &v : x) v = nd(rng);
        if (bits == 16) {
          for (uint32_t j = 0; j < d; j++) {
            const uint16_t h = gb::f32_to_f16(x[j]);
            memcpy(p + 2 * j, &h, 2);
          }
        } else {
          scales[(size_t)(slot0 + i) * 2 * R + kv * R + r] = gb::kv_quantize_row(p, x.data(), d, bits);
        }
      }
  }
  return b;
}

struct Attn {
  uint32_t H, R, d, cap;
  std::vector<float> q, q8_d, m, l, acc, scores, out, mass, wmass, head_w, head_mean;
  std::vector<int8_t> q8;
  gb_attn_state st;
  Attn(uint32_t H_, uint32_t R_, uint32_t d_, uint32_t cap_, std::mt19937 &rng) : H(H_), R(R_), d(d_), cap(cap_) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    q.resize((size_t)H * d);
    for (auto &v : q) v = nd(rng);
    q8.resize(q.size());
    q8_d.resize(H);
    for (uint32_t h = 0; h < H; h++) {
      float amax = 0;
      for (uint32_t j = 0; j < d; j++) amax = std::max(amax, fabsf(q[h * d + j]));
      q8_d[h] = amax / 127.0f;
      for (uint32_t j = 0; j < d; j++) q8[h * d + j] = (int8_t)roundf(q[h * d + j] / q8_d[h]);
    }
    m.resize(H);
    l.resize(H);
    acc.resize((size_t)H * d);
    scores.resize((size_t)H * cap);
    out.resize((size_t)H * d);
    mass.resize(cap);
    wmass.resize(cap);
    head_w.assign(H, 1.0f);
    head_mean.resize(H);
  }
  void begin(const uint16_t *scales) {
    st.n_heads = H;
    st.n_kv_heads = R;
    st.head_dim = d;
    st.scale = 1.0f / sqrtf((float)d);
    st.q = q.data();
    st.q8 = q8.data();
    st.q8_d = q8_d.data();
    st.scales = scales;
    st.m = m.data();
    st.l = l.data();
    st.acc = acc.data();
    st.scores = scores.data();
    st.score_stride = cap;
    std::fill(m.begin(), m.end(), -INFINITY);
    std::fill(l.begin(), l.end(), 0.0f);
    std::fill(acc.begin(), acc.end(), 0.0f);
  }
};

// Tokens per level for a pool of beta x the fp16 bytes (scales included):
// the highest uniform level that fits, the rest of the bytes lifting tokens
// to the next level.
void level_mix(double beta, uint32_t n, uint32_t d, uint32_t *lo_bits, uint32_t *n_lo, uint32_t *hi_bits, uint32_t *n_hi) {
  const uint32_t bits[] = {2, 3, 4, 8};
  const double budget = beta * 16.0 * n, scale = 16.0 / d;  // bits per element, all tokens
  int lo = 0;
  for (int i = 0; i < 4; i++)
    if ((bits[i] + scale) * n <= budget) lo = i;
  *lo_bits = bits[lo];
  *hi_bits = bits[lo < 3 ? lo + 1 : 3];
  const double extra = budget - (bits[lo] + scale) * n;
  uint32_t up = lo < 3 ? (uint32_t)std::min<double>(n, extra / (bits[lo + 1] - bits[lo])) : 0;
  *n_hi = up;
  *n_lo = n - up;
}

}  // namespace

int main(int argc, char **argv) {
  const char *json = nullptr;
  uint32_t H = 8, R = 8;
  int reps = 21;
  std::vector<uint32_t> contexts = {256, 512, 1024, 2048, 4096, 8192};
  std::vector<uint32_t> dims = {64, 128};
  std::vector<double> betas = {0.25, 0.4, 0.5};
  bool generic = false;
  std::vector<std::string> modes = {"hot", "cold"};
  size_t evict_mib = 256;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(o, "--json") && v) json = argv[++i];
    else if (!strcmp(o, "--heads") && v) H = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(o, "--kv-heads") && v) R = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(o, "--reps") && v) reps = atoi(argv[++i]);
    else if (!strcmp(o, "--generic")) generic = true;
    else if (!strcmp(o, "--mode") && v) {
      const std::string m = argv[++i];
      if (m == "hot" || m == "cold") modes = {m};
      else if (m != "both") return fprintf(stderr, "--mode: hot, cold or both\n"), 1;
    } else if (!strcmp(o, "--evict-mib") && v) evict_mib = (size_t)atoi(argv[++i]);
    else if (!strcmp(o, "--max-context") && v) {
      const uint32_t mx = (uint32_t)atoi(argv[++i]);
      contexts.erase(std::remove_if(contexts.begin(), contexts.end(), [mx](uint32_t c) { return c > mx; }), contexts.end());
    } else {
      fprintf(stderr,
              "usage: gearbx-bench-attention [--json FILE] [--heads H] [--kv-heads R] [--reps N] [--max-context N] [--generic]\n"
              "                              [--mode hot|cold|both] [--evict-mib M]\n");
      return 1;
    }
  }
  if (R == 0 || H % R != 0 || H > 64) return fprintf(stderr, "heads must be a multiple of kv-heads, at most 64\n"), 1;
  gb_kernels k;
  gb_kernels_select(&k, generic ? (uint32_t)GB_ISA_GENERIC : gb_port_cpu_features());
  printf("gearbx-bench-attention: %u query heads, %u kv heads, kernel %s; median of %d calls (us), one layer, one query\n", H, R,
         k.attn_name, reps);
  printf("hot: the same layer's records called again and again (cache-resident while they fit); cold: a %zu MiB\n"
         "buffer read before every timed call, so the records come from DRAM as in a decode step\n", evict_mib);
  printf("%8s %5s %-5s %-12s %5s %10s %9s %8s %8s\n", "context", "hd", "mode", "path", "beta", "us", "MB read", "GB/s",
         "vs f16");
  Evict evict;
  evict.buf.assign(evict_mib * 1024 * 1024 / 8, 1);
  std::vector<Row> rows;
  std::mt19937 rng(1234);
  for (uint32_t d : dims)
    for (uint32_t n : contexts) {
      std::vector<uint16_t> scales((size_t)n * 2 * R);
      Attn a(H, R, d, n, rng);
      // f16, and the level mix of each beta
      Bucket f = make_bucket(16, n, R, d, 0, scales, rng);
      struct Mix {
        uint32_t lb, nl, hb, nh;
        Bucket b1, b2;
      };
      std::vector<Mix> mixes;
      for (double beta : betas) {
        Mix x;
        level_mix(beta, n, d, &x.lb, &x.nl, &x.hb, &x.nh);
        x.b1 = make_bucket(x.lb, x.nl, R, d, 0, scales, rng);
        x.b2 = make_bucket(x.hb, x.nh, R, d, x.nl, scales, rng);
        mixes.push_back(std::move(x));
      }
      std::vector<float> deq((size_t)n * 2 * R * d);
      for (const std::string &mode : modes) {
        Evict *ev = mode == "cold" ? &evict : nullptr;
        const double us16 = time_us(
            [&] {
              a.begin(scales.data());
              k.attn_run(&a.st, f.rec.data(), f.slots.data(), n, 16, 16, 0);
              k.attn_finish(&a.st, n, a.head_w.data(), a.out.data(), nullptr, nullptr, nullptr);
            },
            reps, ev);
        rows.push_back({n, d, "f16", 1.0, us16, (double)f.rec.size(), mode});
        for (size_t bi = 0; bi < betas.size(); bi++) {
          const Mix &x = mixes[bi];
          const double bytes = (double)x.b1.rec.size() + x.b2.rec.size() + 4.0 * R * n;
          const double usf = time_us(
              [&] {
                a.begin(scales.data());
                if (x.nl) k.attn_run(&a.st, x.b1.rec.data(), x.b1.slots.data(), x.nl, x.lb, x.lb, 0);
                if (x.nh) k.attn_run(&a.st, x.b2.rec.data(), x.b2.slots.data(), x.nh, x.hb, x.hb, x.nl);
                k.attn_finish(&a.st, n, a.head_w.data(), a.out.data(), a.mass.data(), a.wmass.data(),
                              a.head_mean.data());
              },
              reps, ev);
          rows.push_back({n, d, "fused", betas[bi], usf, bytes, mode});
          const double usd = time_us(
              [&] {
                if (x.nl) k.kv_dequant(deq.data(), x.b1.rec.data(), x.b1.slots.data(), scales.data(), x.nl, R, d, x.lb, x.lb);
                if (x.nh)
                  k.kv_dequant(deq.data() + (size_t)x.nl * 2 * R * d, x.b2.rec.data(), x.b2.slots.data(), scales.data(),
                               x.nh, R, d, x.hb, x.hb);
                a.begin(scales.data());
                k.attn_run(&a.st, reinterpret_cast<const uint8_t *>(deq.data()), f.slots.data(), n, 32, 32, 0);
                k.attn_finish(&a.st, n, a.head_w.data(), a.out.data(), nullptr, nullptr, nullptr);
              },
              reps, ev);
          rows.push_back({n, d, "dequant", betas[bi], usd, bytes + 2.0 * deq.size() * 4, mode});
        }
      }
    }
  // Allocator cost: a one-layer pool of `context` tokens.
  for (uint32_t d : dims)
    for (uint32_t n : contexts) {
      for (int pol : {GB_KV_SEED, GB_KV_WINDOW}) {
        gb::Meta c;
        memset(&c, 0, sizeof c);
        c.n_layers = 1;
        c.n_heads = H;
        c.n_kv_heads = R;
        c.head_dim = d;
        c.dim = H * d;
        gb_session_options so;
        gb_session_options_init(&so);
        gb_session_experimental sx;
        gb_session_experimental_init(&sx);
        so.n_ctx = n;
        so.kv.policy = (gb_kv_policy)pol;
        so.kv.beta = 0.4f;
        sx.kv.rank_intervals = 0;  // every token may move: the heap's worst case
        gb::SessionConfig o;
        gb::session_config(so, sx, &o);
        gb::Logger log;
        log.level = GB_LOG_ERROR;
        gb::KvPlan plan;
        if (gb::kv_plan(c, o, log, &plan) != GB_OK) continue;
        gb::Arena counter;
        gb::KvPool kv;
        gb::kv_carve(&kv, counter, c, o, plan);
        void *mem = aligned_alloc(64, (counter.used() + 63) / 64 * 64);
        gb::Arena arena(mem, counter.used());
        gb::kv_carve(&kv, arena, c, o, plan);
        gb::kv_reset(&kv);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> key((size_t)R * d), val((size_t)R * d);
        std::vector<double> per_token;
        for (uint32_t t = 0; t + 1 < n && t + 1 < plan.max_tokens; t++) {
          const uint64_t t0 = gb_port_now_ns();
          if (gb::kv_begin(&kv, k, t, log) != GB_OK) break;
          per_token.push_back((gb_port_now_ns() - t0) / 1e3);
          for (auto &v : key) v = nd(rng);
          for (auto &v : val) v = nd(rng);
          gb::kv_store_slot(&kv, 0, kv.cur_slot, key.data(), val.data());
          for (uint32_t i = 0; i < kv.plan.cap; i++)
            if (kv.layers[0].level[i] != gb::kLvNone) kv.layers[0].ema[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
          gb::kv_end(&kv);
        }
        double us;
        if (pol == GB_KV_SEED) {
          us = time_us([&] { gb::kv_seed_realloc(&kv, k, 0, 1); }, reps);
        } else {
          std::vector<double> tail(per_token.end() - std::min<size_t>(per_token.size(), 64), per_token.end());
          us = median(tail);  // room-making of the last tokens (pool full)
        }
        rows.push_back({n, d, pol == GB_KV_SEED ? "alloc_seed" : "alloc_window", 0.4, us, 0.0, ""});
        free(mem);
      }
    }
  for (const Row &r : rows) {
    double f16 = 0;
    for (const Row &x : rows)
      if (x.context == r.context && x.head_dim == r.head_dim && x.path == "f16" && x.mode == r.mode) f16 = x.us;
    const bool attn = r.path == "fused" || r.path == "f16" || r.path == "dequant";
    printf("%8u %5u %-5s %-12s %5.2f %10.2f %9.3f %8.2f %8s\n", r.context, r.head_dim,
           r.mode.empty() ? "-" : r.mode.c_str(), r.path.c_str(), r.beta, r.us,
           r.bytes / 1e6, attn && r.us > 0 ? r.bytes / r.us / 1e3 : 0.0,
           attn ? (std::to_string(f16 / r.us).substr(0, 5) + "x").c_str() : "-");
  }
  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) return fprintf(stderr, "cannot write %s\n", json), 1;
    fprintf(f, "[\n");
    for (size_t i = 0; i < rows.size(); i++)
      fprintf(f,
              "  {\"context\": %u, \"head_dim\": %u, \"path\": \"%s\", \"mode\": \"%s\", \"beta\": %.3f, \"us\": %.3f, "
              "\"bytes\": %.0f, \"kernel\": \"%s\"}%s\n",
              rows[i].context, rows[i].head_dim, rows[i].path.c_str(), rows[i].mode.c_str(), rows[i].beta, rows[i].us,
              rows[i].bytes, k.attn_name,
              i + 1 < rows.size() ? "," : "");
    fprintf(f, "]\n");
    fclose(f);
  }
  return 0;
}
