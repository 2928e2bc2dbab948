// test_attention.cpp — the fused attention kernels over packed KV records
// (arch/kernels.h): the generic kernel against a double-precision reference
// that decodes the documented layouts itself, the quantizer against its
// definition, and every SIMD variant of kernels.inc against the generic one
// (scores of quantized keys bit for bit, outputs and attention mass within a
// tolerance), on random data from printed seeds, over every level, head
// dims, GQA groupings and run splits.
#include <math.h>
#include <string.h>

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "f16.h"
#include "gearbx_port.h"
#include "kernels.h"
#include "kv.h"

namespace {

uint32_t seed_for(const char *name) {
  uint32_t h = 2166136261u;
  for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  return h;
}

// Decode element j of a packed row, independently of arch/ (kernels.h layout).
int ref_elem(const uint8_t *row, uint32_t d, uint32_t bits, uint32_t j) {
  if (bits == 8) return (int8_t)row[j];
  if (bits == 4) return j < d / 2 ? (row[j] & 15) - 8 : (row[j - d / 2] >> 4) - 8;
  if (bits == 2) return ((row[j % (d / 4)] >> (2 * (j / (d / 4)))) & 3) - 2;
  const int lo = (row[j % (d / 4)] >> (2 * (j / (d / 4)))) & 3;
  const int hi = (row[d / 4 + j % (d / 8)] >> (j / (d / 8))) & 1;
  return (lo | hi << 2) - 4;
}

struct Case {
  uint32_t H, R, d, kb, vb, n;
};

// Random records of n tokens at (kb, vb); scales per slot (slot = 3 * i + 1).
struct Cache {
  std::vector<uint8_t> rec;
  std::vector<uint16_t> scales;
  std::vector<uint32_t> slots;
  std::vector<float> raw;  // (n, 2, R, d) the values before quantization
  uint32_t rb = 0;
};

Cache make_cache(const Case &c, std::mt19937 &rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Cache k;
  k.rb = c.R * (c.d * c.kb / 8 + c.d * c.vb / 8);
  k.rec.assign((size_t)c.n * k.rb + 64, 0xCD);
  const uint32_t max_slot = 3 * c.n + 2;
  k.scales.assign((size_t)max_slot * 2 * c.R, 0);
  k.raw.resize((size_t)c.n * 2 * c.R * c.d);
  for (uint32_t i = 0; i < c.n; i++) {
    const uint32_t slot = 3 * i + 1;
    k.slots.push_back(slot);
    uint8_t *p = k.rec.data() + (size_t)i * k.rb;
    for (uint32_t kv = 0; kv < 2; kv++) {
      const uint32_t bits = kv ? c.vb : c.kb;
      for (uint32_t r = 0; r < c.R; r++) {
        float *x = k.raw.data() + (((size_t)i * 2 + kv) * c.R + r) * c.d;
        const float mag = (i % 7 == 3) ? 4.0f : 1.0f;
        for (uint32_t j = 0; j < c.d; j++) x[j] = mag * nd(rng);
        if (i % 11 == 5 && kv == 1) memset(x, 0, sizeof(float) * c.d);  // zero row: tiny scale
        if (bits == 32) {
          memcpy(p, x, 4 * c.d);
        } else if (bits == 16) {
          for (uint32_t j = 0; j < c.d; j++) {
            const uint16_t h = gb::f32_to_f16(x[j]);
            memcpy(p + 2 * j, &h, 2);
          }
        } else {
          k.scales[(size_t)slot * 2 * c.R + kv * c.R + r] = gb::kv_quantize_row(p, x, c.d, bits);
        }
        p += c.d * bits / 8;
      }
    }
  }
  return k;
}

// Decoded value of (token i, kv, head r, element j), in double.
double ref_value(const Case &c, const Cache &k, uint32_t i, uint32_t kv, uint32_t r, uint32_t j) {
  const uint32_t bits = kv ? c.vb : c.kb;
  const uint8_t *p = k.rec.data() + (size_t)i * k.rb + (kv ? (size_t)c.R * c.d * c.kb / 8 : 0) + (size_t)r * c.d * bits / 8;
  if (bits == 32) {
    float f;
    memcpy(&f, p + 4 * j, 4);
    return f;
  }
  if (bits == 16) {
    uint16_t h;
    memcpy(&h, p + 2 * j, 2);
    return gb::f16_to_f32(h);
  }
  return (double)gb::f16_to_f32(k.scales[(size_t)k.slots[i] * 2 * c.R + kv * c.R + r]) * ref_elem(p, c.d, bits, j);
}

struct Query {
  std::vector<float> q, q8_d;
  std::vector<int8_t> q8;
};

Query make_query(const Case &c, std::mt19937 &rng) {
  std::normal_distribution<float> nd(0.0f, 1.5f);
  Query q;
  q.q.resize((size_t)c.H * c.d);
  for (auto &v : q.q) v = nd(rng);
  q.q8.resize(q.q.size());
  q.q8_d.resize(c.H);
  for (uint32_t h = 0; h < c.H; h++) {
    float amax = 0;
    for (uint32_t j = 0; j < c.d; j++) amax = fabsf(q.q[h * c.d + j]) > amax ? fabsf(q.q[h * c.d + j]) : amax;
    q.q8_d[h] = amax / 127.0f;
    for (uint32_t j = 0; j < c.d; j++) q.q8[h * c.d + j] = (int8_t)roundf(q.q[h * c.d + j] / q.q8_d[h]);
  }
  return q;
}

struct Result {
  std::vector<float> out, scores, mass, wmass, head_mean;
};

// Run a kernel over the cache split into runs of at most `split` records.
Result run_kernel(gb_attn_run_fn run, gb_attn_finish_fn finish, const Case &c, const Cache &k, const Query &q, uint32_t split) {
  const uint32_t stride = c.n + 5;
  std::vector<float> m(c.H), l(c.H), acc((size_t)c.H * c.d, 0.0f), scores((size_t)c.H * stride + 16, -99.0f), head_w(c.H);
  for (uint32_t h = 0; h < c.H; h++) {
    m[h] = -INFINITY;
    l[h] = 0;
    head_w[h] = 0.5f + (float)h / (float)c.H;
  }
  gb_attn_state st;
  st.n_heads = c.H;
  st.n_kv_heads = c.R;
  st.head_dim = c.d;
  st.scale = 1.0f / sqrtf((float)c.d);
  st.q = q.q.data();
  st.q8 = q.q8.data();
  st.q8_d = q.q8_d.data();
  st.scales = k.scales.data();
  st.m = m.data();
  st.l = l.data();
  st.acc = acc.data();
  st.scores = scores.data();
  st.score_stride = stride;
  for (uint32_t i = 0; i < c.n; i += split) {
    const uint32_t cnt = c.n - i < split ? c.n - i : split;
    run(&st, k.rec.data() + (size_t)i * k.rb, k.slots.data() + i, cnt, c.kb, c.vb, i);
  }
  Result r;
  r.out.assign((size_t)c.H * c.d + 8, 7.0f);
  r.mass.assign(c.n + 8, 7.0f);
  r.wmass.assign(c.n + 8, 7.0f);
  r.head_mean.assign(c.H, 0.0f);
  finish(&st, c.n, head_w.data(), r.out.data(), r.mass.data(), r.wmass.data(), r.head_mean.data());
  for (uint32_t i = 0; i < 8; i++) {
    EXPECT_EQ(r.out[(size_t)c.H * c.d + i], 7.0f) << "wrote past out";
    EXPECT_EQ(r.mass[c.n + i], 7.0f) << "wrote past mass";
  }
  for (uint32_t h = 0; h < c.H; h++) {
    for (uint32_t i = c.n; i < stride; i++) EXPECT_EQ(scores[(size_t)h * stride + i], -99.0f) << "wrote past the scores";
    r.scores.insert(r.scores.end(), scores.begin() + (size_t)h * stride, scores.begin() + (size_t)h * stride + c.n);
  }
  return r;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  const uint32_t levels[][2] = {{2, 2}, {3, 2}, {3, 3}, {4, 4}, {8, 8}, {16, 16}, {32, 32}};
  for (auto &lv : levels)
    for (uint32_t d : {8u, 16u, 64u, 128u})
      for (uint32_t R : {1u, 2u})
        for (uint32_t G : {1u, 3u})
          for (uint32_t n : {1u, 7u, 40u, 97u}) v.push_back({R * G, R, d, lv[0], lv[1], n});
  // Head dims whose SIMD paths differ from 64 / 128 (rows of 32, 96 and 256
  // elements: other plane widths), and keys and values at different levels.
  const uint32_t more[][2] = {{2, 2}, {3, 3}, {4, 4}, {8, 8}, {16, 16}, {4, 2}, {8, 4}, {3, 8}};
  for (auto &lv : more)
    for (uint32_t d : {32u, 96u, 256u})
      for (uint32_t n : {9u, 70u}) v.push_back({4, 2, d, lv[0], lv[1], n});
  return v;
}

// The SIMD variants against generic: cases() plus every quantized (K, V)
// pair at head dims that are not multiples of 32 or 64 (the register and
// buffer paths of the packed planes), and GQA groups of 2, 4, 5 and 9 query
// heads (SIMD kernels keep 4 or 8 heads in registers per pass, pairs of
// heads for SMMLA: a last odd head, a second pass) over chunk tails.
std::vector<Case> variant_cases() {
  std::vector<Case> v = cases();
  const uint32_t rg[][2] = {{2, 1}, {1, 2}, {2, 4}};  // (kv heads, group size)
  for (uint32_t kb : {2u, 3u, 4u, 8u})
    for (uint32_t vb : {2u, 3u, 4u, 8u})
      for (uint32_t d : {24u, 40u, 96u, 128u})
        for (auto &x : rg) v.push_back({x[0] * x[1], x[0], d, kb, vb, 33});
  const uint32_t levels[][2] = {{2, 2}, {3, 3}, {4, 4}, {8, 8}, {16, 16}, {32, 32}, {4, 8}};
  for (auto &lv : levels)
    for (uint32_t G : {2u, 4u, 5u, 9u})
      for (uint32_t R : {1u, 2u})
        for (uint32_t d : {64u, 128u})
          for (uint32_t n : {2u, 32u, 65u}) v.push_back({R * G, R, d, lv[0], lv[1], n});
  return v;
}

TEST(Attention, QuantizeRowMatchesDefinition) {
  std::mt19937 rng(seed_for("quantize_row"));
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (uint32_t bits : {2u, 3u, 4u, 8u})
    for (uint32_t d : {8u, 64u, 128u}) {
      std::vector<float> x(d);
      for (auto &v : x) v = nd(rng);
      std::vector<uint8_t> row(d * bits / 8 + 16, 0xAB);
      const uint16_t h = gb::kv_quantize_row(row.data(), x.data(), d, bits);
      const int qmax = (1 << (bits - 1)) - 1;
      float amax = 0;
      for (float v : x) amax = fabsf(v) > amax ? fabsf(v) : amax;
      const float s = gb::f16_to_f32(h);
      EXPECT_EQ(h, gb::f32_to_f16(amax / qmax)) << "scale is fp16(amax / qmax) (per-head symmetric)";
      for (uint32_t j = 0; j < d; j++) {
        const int q = ref_elem(row.data(), d, bits, j);
        EXPECT_GE(q, -qmax - 1);
        EXPECT_LE(q, qmax);
        EXPECT_NEAR(q * s, x[j], 0.5f * s * 1.002f + 1e-6f) << "bits " << bits << " d " << d << " j " << j;
      }
      for (size_t i = d * bits / 8; i < row.size(); i++) ASSERT_EQ(row[i], 0xAB) << "wrote past the row";
    }
}

// The generic kernel against a double reference on the decoded records and
// the int8 query (what the kernel contract computes), and against the raw
// float values (quantization error shrinking with the bits).
TEST(Attention, GenericMatchesDoubleReference) {
  std::mt19937 rng(seed_for("attn_generic"));
  for (const Case &c : variant_cases()) {
    const Cache k = make_cache(c, rng);
    const Query q = make_query(c, rng);
    const Result r = run_kernel(gb_attn_run__generic, gb_attn_finish__generic, c, k, q, 13);
    const uint32_t G = c.H / c.R;
    std::vector<double> ref_out((size_t)c.H * c.d, 0.0), p((size_t)c.H * c.n);
    for (uint32_t h = 0; h < c.H; h++) {
      const uint32_t r0 = h / G;
      double mx = -INFINITY;
      std::vector<double> sc(c.n);
      for (uint32_t i = 0; i < c.n; i++) {
        double dot = 0;
        for (uint32_t j = 0; j < c.d; j++) {
          const double qv = c.kb <= 8 ? (double)q.q8_d[h] * q.q8[h * c.d + j] : q.q[h * c.d + j];
          dot += qv * ref_value(c, k, i, 0, r0, j);
        }
        sc[i] = dot / sqrt((double)c.d);
        mx = sc[i] > mx ? sc[i] : mx;
        ASSERT_NEAR(r.scores[(size_t)h * c.n + i], sc[i], 1e-4 * (1 + fabs(sc[i])));
      }
      double sum = 0;
      for (uint32_t i = 0; i < c.n; i++) sum += exp(sc[i] - mx);
      for (uint32_t i = 0; i < c.n; i++) {
        p[(size_t)h * c.n + i] = exp(sc[i] - mx) / sum;
        for (uint32_t j = 0; j < c.d; j++) ref_out[h * c.d + j] += p[(size_t)h * c.n + i] * ref_value(c, k, i, 1, r0, j);
      }
      for (uint32_t j = 0; j < c.d; j++)
        ASSERT_NEAR(r.out[h * c.d + j], ref_out[h * c.d + j], 1e-4 * (1 + fabs(ref_out[h * c.d + j])))
            << "kb " << c.kb << " d " << c.d << " H " << c.H << " R " << c.R << " n " << c.n;
    }
    double total = 0;
    for (uint32_t i = 0; i < c.n; i++) {
      double m = 0;
      for (uint32_t h = 0; h < c.H; h++) m += p[(size_t)h * c.n + i];
      ASSERT_NEAR(r.mass[i], m / c.H, 1e-5);
      total += r.mass[i];
    }
    ASSERT_NEAR(total, 1.0, 1e-4) << "attention mass sums to 1 over the tokens";
  }
}

// Quantization error against the unquantized float attention falls with the bits.
TEST(Attention, ErrorAgainstFloatFallsWithBits) {
  const uint32_t levels[][2] = {{2, 2}, {3, 3}, {4, 4}, {8, 8}, {16, 16}, {32, 32}};
  double prev = INFINITY;
  for (auto &lv : levels) {
    std::mt19937 rng(seed_for("attn_float"));
    const Case c{4, 2, 64, lv[0], lv[1], 200};
    const Cache k = make_cache(c, rng);
    const Query q = make_query(c, rng);
    const Result r = run_kernel(gb_attn_run__generic, gb_attn_finish__generic, c, k, q, 64);
    double err = 0, mag = 0;
    for (uint32_t h = 0; h < c.H; h++) {
      const uint32_t r0 = h / (c.H / c.R);
      std::vector<double> sc(c.n);
      double mx = -INFINITY, sum = 0;
      for (uint32_t i = 0; i < c.n; i++) {
        double dot = 0;
        for (uint32_t j = 0; j < c.d; j++) dot += (double)q.q[h * c.d + j] * k.raw[(((size_t)i * 2) * c.R + r0) * c.d + j];
        sc[i] = dot / 8.0;
        mx = sc[i] > mx ? sc[i] : mx;
      }
      for (uint32_t i = 0; i < c.n; i++) sum += exp(sc[i] - mx);
      for (uint32_t j = 0; j < c.d; j++) {
        double o = 0;
        for (uint32_t i = 0; i < c.n; i++) o += exp(sc[i] - mx) / sum * k.raw[(((size_t)i * 2 + 1) * c.R + r0) * c.d + j];
        err += (r.out[h * c.d + j] - o) * (r.out[h * c.d + j] - o);
        mag += o * o;
      }
    }
    const double nmse = err / mag;
    printf("level K%u/V%u: NMSE of the attention output vs float %.3g\n", lv[0], lv[1], nmse);
    EXPECT_LT(nmse, prev * 1.01) << "more bits must not be worse";
    prev = nmse;
  }
  EXPECT_LT(prev, 1e-9);  // f32 records: exact up to float rounding
}

struct AttnEntry {
  std::string name;
  uint32_t req;
  gb_attn_run_fn run;
  gb_attn_finish_fn finish;
};
struct DequantEntry {
  std::string name;
  uint32_t req;
  gb_kv_dequant_fn fn;
};

TEST(Attention, EverySimdVariantMatchesGeneric) {
  std::vector<AttnEntry> attn;
  std::vector<DequantEntry> deq;
#define GB_GEMV(fmt, id, isa, req, prio)
#define GB_ROW(fmt, id, isa, req, prio)
#define GB_QUANT_ACT(isa, req, prio)
  std::vector<AttnEntry> fin;  // finishing steps, paired below
#define GB_ATTN(isa, req, prio) attn.push_back({"attn__" #isa, req, gb_attn_run__##isa, nullptr});
#define GB_ATTN_FINISH(isa, req, prio) fin.push_back({"attn_finish__" #isa, req, nullptr, gb_attn_finish__##isa});
#define GB_KV_DEQUANT(isa, req, prio) deq.push_back({"kv_dequant__" #isa, req, gb_kv_dequant__##isa});
#include "kernels.inc"
#undef GB_GEMV
#undef GB_ROW
#undef GB_QUANT_ACT
#undef GB_ATTN
#undef GB_ATTN_FINISH
#undef GB_KV_DEQUANT
  // A pass runs with its own folder's finishing step where the folder has
  // one, else generic's (as the dispatcher would pair them on a CPU with
  // only that folder); a finishing step of its own is also tested after the
  // generic pass.
  for (AttnEntry &e : attn) {
    e.finish = gb_attn_finish__generic;
    for (const AttnEntry &f : fin)
      if (f.name.substr(strlen("attn_finish__")) == e.name.substr(strlen("attn__"))) e.finish = f.finish;
  }
  for (const AttnEntry &f : fin) attn.push_back({f.name, f.req, gb_attn_run__generic, f.finish});
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  for (const AttnEntry &e : attn) {
    if (e.req == GB_ISA_GENERIC) continue;
    if ((e.req & cpu) != e.req) {
      printf("skipping %s: this CPU lacks its ISA\n", e.name.c_str());
      continue;
    }
    const uint32_t seed = seed_for(e.name.c_str());
    printf("testing %s (seed %u)\n", e.name.c_str(), seed);
    std::mt19937 rng(seed);
    for (const Case &c : variant_cases())
      for (uint32_t split : {1u, 5u, 64u}) {
        const Cache k = make_cache(c, rng);
        const Query q = make_query(c, rng);
        const Result a = run_kernel(gb_attn_run__generic, gb_attn_finish__generic, c, k, q, split);
        const Result b = run_kernel(e.run, e.finish, c, k, q, split);
        for (size_t i = 0; i < a.scores.size(); i++) {
          if (c.kb <= 8)
            ASSERT_EQ(a.scores[i], b.scores[i]) << e.name << " kb " << c.kb << " vb " << c.vb << " d " << c.d << " H " << c.H
                                                << " R " << c.R << " n " << c.n << " split " << split << " i " << i;
          else
            ASSERT_NEAR(a.scores[i], b.scores[i], 1e-5 * (1 + fabs(a.scores[i]))) << e.name;
        }
        // Outputs: both kernels sit within ~1.5e-5 of a double-precision
        // reference on these cases (float sums in different orders, FMA).
        for (size_t i = 0; i < a.out.size(); i++)
          ASSERT_NEAR(a.out[i], b.out[i], 4e-5 * (1 + fabs(a.out[i]))) << e.name << " kb " << c.kb << " vb " << c.vb << " d " << c.d
                                                                       << " H " << c.H << " R " << c.R << " n " << c.n << " i " << i;
        for (uint32_t i = 0; i < c.n; i++) {
          ASSERT_NEAR(a.mass[i], b.mass[i], 1e-5 * (1e-3 + a.mass[i]) + 1e-7) << e.name;
          ASSERT_NEAR(a.wmass[i], b.wmass[i], 1e-5 * (1e-3 + a.wmass[i]) + 1e-7) << e.name;
        }
        for (uint32_t h = 0; h < c.H; h++) ASSERT_NEAR(a.head_mean[h], b.head_mean[h], 1e-5) << e.name;
      }
  }
  for (const DequantEntry &e : deq) {
    if (e.req == GB_ISA_GENERIC || (e.req & cpu) != e.req) continue;
    printf("testing %s\n", e.name.c_str());
    std::mt19937 rng(seed_for(e.name.c_str()));
    for (const Case &c : cases()) {
      const Cache k = make_cache(c, rng);
      std::vector<float> a((size_t)c.n * 2 * c.R * c.d + 4, 3.0f), b(a.size(), 3.0f);
      gb_kv_dequant__generic(a.data(), k.rec.data(), k.slots.data(), k.scales.data(), c.n, c.R, c.d, c.kb, c.vb);
      e.fn(b.data(), k.rec.data(), k.slots.data(), k.scales.data(), c.n, c.R, c.d, c.kb, c.vb);
      ASSERT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float))) << e.name << " kb " << c.kb << " d " << c.d;
    }
  }
}

// Generic dequantization decodes the documented layout.
TEST(Attention, GenericDequantMatchesLayout) {
  std::mt19937 rng(seed_for("dequant"));
  for (const Case &c : variant_cases()) {
    if (c.n > 40) continue;
    const Cache k = make_cache(c, rng);
    std::vector<float> out((size_t)c.n * 2 * c.R * c.d);
    gb_kv_dequant__generic(out.data(), k.rec.data(), k.slots.data(), k.scales.data(), c.n, c.R, c.d, c.kb, c.vb);
    for (uint32_t i = 0; i < c.n; i++)
      for (uint32_t kv = 0; kv < 2; kv++)
        for (uint32_t r = 0; r < c.R; r++)
          for (uint32_t j = 0; j < c.d; j++)
            ASSERT_EQ(out[(((size_t)i * 2 + kv) * c.R + r) * c.d + j], (float)ref_value(c, k, i, kv, r, j));
  }
}

}  // namespace
