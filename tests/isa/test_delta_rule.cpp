// The Gated DeltaNet kernels (kernels.inc GB_DELTA) against the generic one:
// several updates in a row on random states, heads of the sizes models use
// and of sizes that leave a tail of every vector width; with and without the
// read-out (a replay must update the state to the same bits as the pass).
#include <math.h>
#include <string.h>

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gearbx_port.h"
#include "kernels.h"

namespace {

struct DeltaEntry {
  std::string name;
  uint32_t req;
  gb_delta_rule_fn fn;
};

uint32_t name_seed(const std::string &name) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ (uint8_t)c) * 16777619u;
  return h;
}

// The largest |a - b| / (1 + |a|) (a plain loop of comparisons: the
// aarch64 cross compiler's vectorizer fails on an fmax reduction).
double rel_diff(const std::vector<float> &a, const std::vector<float> &b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); i++) {
    const double r = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)a[i]));
    if (r > worst) worst = r;
  }
  return worst;
}

TEST(DeltaRule, EverySimdVariantMatchesGeneric) {
  std::vector<DeltaEntry> all;
#define GB_DELTA(isa, req, prio) all.push_back({"delta_rule__" #isa, req, gb_delta_rule__##isa});
#include "kernels.inc"
#undef GB_DELTA
  ASSERT_FALSE(all.empty());
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  uint32_t tested = 0;
  for (const DeltaEntry &e : all) {
    if (e.req == GB_ISA_GENERIC) continue;
    if ((e.req & cpu) != e.req) {
      printf("skipping %s: this CPU lacks its ISA\n", e.name.c_str());
      continue;
    }
    tested++;
    std::mt19937 rng(name_seed(e.name));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), gd(-2.0f, 0.0f), bd(0.0f, 1.0f);
    for (uint32_t d : {1u, 7u, 8u, 15u, 16u, 17u, 32u, 64u, 100u, 128u}) {
      std::vector<float> S0((size_t)d * d), k(d), v(d), q(d);
      for (float &x : S0) x = u(rng);
      std::vector<float> Sg = S0, Sv = S0, Sr = S0, og(d), ov(d);
      double worst_s = 0, worst_o = 0;
      for (int step = 0; step < 6; step++) {
        // Unit keys and scaled queries, as the model feeds them.
        double nk = 0, nq = 0;
        for (uint32_t i = 0; i < d; i++) k[i] = u(rng), v[i] = u(rng), q[i] = u(rng);
        for (uint32_t i = 0; i < d; i++) nk += (double)k[i] * k[i], nq += (double)q[i] * q[i];
        for (uint32_t i = 0; i < d; i++) k[i] /= (float)sqrt(nk), q[i] /= (float)sqrt(nq * d);
        const float g = gd(rng), beta = bd(rng);
        gb_delta_rule__generic(Sg.data(), k.data(), v.data(), q.data(), g, beta, d, og.data());
        e.fn(Sv.data(), k.data(), v.data(), q.data(), g, beta, d, ov.data());
        e.fn(Sr.data(), k.data(), v.data(), nullptr, g, beta, d, nullptr);  // a replay: q unread
        ASSERT_EQ(memcmp(Sr.data(), Sv.data(), Sv.size() * sizeof(float)), 0) << e.name << " d " << d << " step " << step;
        worst_s = fmax(worst_s, rel_diff(Sg, Sv));
        worst_o = fmax(worst_o, rel_diff(og, ov));
      }
      // Float summation order only: a few units in the last place of
      // values near 1 (the state stays bounded: unit keys, rates below 1).
      EXPECT_LT(worst_s, 2e-6) << e.name << " d " << d;
      EXPECT_LT(worst_o, 2e-6) << e.name << " d " << d;
      // The generic kernel also leaves the state alone but for the update
      // when o is NULL.
      std::vector<float> G1 = S0, G2 = S0;
      gb_delta_rule__generic(G1.data(), k.data(), v.data(), q.data(), -0.5f, 0.5f, d, og.data());
      gb_delta_rule__generic(G2.data(), k.data(), v.data(), nullptr, -0.5f, 0.5f, d, nullptr);
      EXPECT_EQ(memcmp(G1.data(), G2.data(), G1.size() * sizeof(float)), 0) << "generic d " << d;
    }
    printf("%s matches generic\n", e.name.c_str());
  }
  // Every build has one SIMD entry for its architecture (AVX2 / AVX-512 on
  // x86-64, NEON on aarch64) the CPUs it is tested on can run.
#if defined(__x86_64__) || defined(__aarch64__)
  EXPECT_GE(tested, 1u);
#endif
}

// The dispatcher picks the kernel of highest priority this CPU runs.
TEST(DeltaRule, DispatchPicksAKernel) {
  gb_kernels k;
  gb_kernels_select(&k, gb_port_cpu_features());
  ASSERT_NE(k.delta_rule, nullptr);
  ASSERT_NE(k.delta_name, nullptr);
  printf("delta_rule: %s\n", k.delta_name);
  gb_kernels g;
  gb_kernels_select(&g, GB_ISA_GENERIC);
  EXPECT_EQ(g.delta_rule, &gb_delta_rule__generic);
}

}  // namespace
