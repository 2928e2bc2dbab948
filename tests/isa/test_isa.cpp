// test_isa.cpp — the CPU the tests run on is the one CI meant, and the
// dispatcher uses what it has and nothing more. tests/run.sh sets
// GB_EXPECT_ISA for each qemu CPU model (e.g. "neon,dotprod" for
// cortex-a76) and GB_EXPECT_SVE_BITS for the SVE vector lengths; natively
// neither is set and only the invariants are checked.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/prctl.h>
#endif

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gearbx_port.h"
#include "kernels.h"
#include "test_util.h"

namespace {

struct IsaName {
  const char *name;
  uint32_t bit;
};
const IsaName kIsas[] = {{"avx2", GB_ISA_AVX2}, {"avx512", GB_ISA_AVX512}, {"neon", GB_ISA_NEON}, {"dotprod", GB_ISA_DOTPROD},
                         {"i8mm", GB_ISA_I8MM}, {"sve", GB_ISA_SVE}, {"fp16", GB_ISA_FP16}};

std::string isa_list(uint32_t bits) {
  std::string s;
  for (const IsaName &i : kIsas)
    if (bits & i.bit) s += std::string(s.empty() ? "" : ",") + i.name;
  return s.empty() ? "generic" : s;
}

// Bits of every ISA some kernels.inc entry of this build requires.
uint32_t isas_with_kernels() {
  uint32_t m = 0;
#define GB_GEMV(fmt, id, isa, req, prio) m |= (req);
#define GB_GEMVM(fmt, id, isa, req) m |= (req);
#define GB_ROW(fmt, id, isa, req, prio) m |= (req);
#define GB_QUANT_ACT(isa, req, prio) m |= (req);
#define GB_ATTN(isa, req, prio) m |= (req);
#define GB_ATTN_FINISH(isa, req, prio) m |= (req);
#define GB_KV_DEQUANT(isa, req, prio) m |= (req);
#define GB_DELTA(isa, req, prio) m |= (req);
#define GB_GEMM(fmt, id, isa, req, prio) m |= (req);
#include "kernels.inc"
#undef GB_GEMV
#undef GB_GEMVM
#undef GB_ROW
#undef GB_QUANT_ACT
#undef GB_ATTN
#undef GB_ATTN_FINISH
#undef GB_KV_DEQUANT
#undef GB_DELTA
#undef GB_GEMM
  return m & ~(uint32_t)GB_ISA_GENERIC;
}

TEST(Isa, CpuFeaturesAreTheExpectedOnes) {
  const uint32_t cpu = gb_port_cpu_features();
  printf("CPU features: %s; ISAs with kernels in this build: %s\n", isa_list(cpu).c_str(), isa_list(isas_with_kernels()).c_str());
  const char *want = getenv("GB_EXPECT_ISA");
  if (!want) return;  // a native run: nothing to compare against
  uint32_t bits = 0;
  std::string w(want);
  for (const IsaName &i : kIsas)
    if (("," + w + ",").find("," + std::string(i.name) + ",") != std::string::npos) bits |= i.bit;
  EXPECT_EQ(isa_list(cpu & ~(uint32_t)GB_ISA_GENERIC), isa_list(bits)) << "GB_EXPECT_ISA=" << want;
  // Each expected ISA has kernels in this build, so Kernels.EverySimdVariant*
  // runs them on this CPU (a folder that failed to build would show here).
  for (const IsaName &i : kIsas)
    if (bits & i.bit) {
      EXPECT_TRUE(isas_with_kernels() & i.bit) << "no " << i.name << " kernels in this build";
    }
}

// Every ISA the CPU has and the build carries kernels for is used by the
// session's table for at least one slot, or is beaten in every slot it has
// by a later entry the CPU also has; and none the CPU lacks is used.
TEST(Isa, DispatchUsesWhatTheCpuHasAndNothingElse) {
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  gb_kernels k;
  gb_kernels_select(&k, cpu);
  EXPECT_EQ(k.isa_mask & ~cpu, 0u) << "chosen " << isa_list(k.isa_mask) << " on a CPU with " << isa_list(cpu);
  for (int f = 0; f < GB_FMT_COUNT; f++) printf("  %s\n", k.name[f]);
  printf("  %s\n", k.attn_name);
  const uint32_t usable = isas_with_kernels() & cpu;
  // The attention kernel is the GB_ATTN entry of highest priority this CPU
  // can run.
  const char *last_attn = nullptr;
  int best = -1;
#define GB_ATTN(isa, req, prio)                  \
  if (((req) & cpu) == (req) && (prio) > best) { \
    best = (prio);                               \
    last_attn = "attn__" #isa;                   \
  }
#include "kernels.inc"
#undef GB_ATTN
  ASSERT_NE(last_attn, nullptr);
  EXPECT_STREQ(k.attn_name, last_attn);
  if (getenv("GB_EXPECT_ISA")) {
    // The best kernel per slot must come from the most specialised usable ISA
    // that has one: no gemv slot with a SIMD kernel this CPU can run stays
    // generic (formats without one, e.g. GGUF formats no folder has
    // kernels for yet, keep the generic kernel), nor does attention.
    bool runnable[GB_FMT_COUNT] = {};  // per format: a SIMD gemv this CPU can run
#define GB_GEMV(fmt, id, isa, req, prio) \
  if ((req) != GB_ISA_GENERIC && ((req) & cpu) == (req)) runnable[id] = true;
#include "kernels.inc"
#undef GB_GEMV
    if (usable) {
      int simd = 0;
      for (int f = 0; f < GB_FMT_COUNT; f++) {
        if (!runnable[f]) {
          printf("  format %d: no SIMD gemv for this CPU, %s\n", f, k.name[f]);
          continue;
        }
        simd++;
        EXPECT_EQ(strstr(k.name[f], "__generic"), nullptr) << k.name[f] << " chosen although " << isa_list(usable) << " is usable";
      }
      EXPECT_GT(simd, 0) << "no format has a SIMD gemv although " << isa_list(usable) << " is usable";
      EXPECT_EQ(strstr(k.attn_name, "__generic"), nullptr) << k.attn_name << " chosen although " << isa_list(usable) << " is usable";
    }
  }
}

// No two entries of one slot share a priority (the dispatcher's choice must
// not depend on the order of kernels.inc's lines), and every priority is
// non-negative (an empty slot is -1).
TEST(Isa, KernelPrioritiesAreUniquePerSlot) {
  struct E {
    std::string slot, name;
    int prio;
  };
  std::vector<E> v;
#define GB_GEMV(fmt, id, isa, req, prio) v.push_back({"gemv " + std::to_string(id), #fmt "_gemv__" #isa, (prio)});
#define GB_ROW(fmt, id, isa, req, prio) v.push_back({"row " + std::to_string(id), #fmt "_rows_to_f32__" #isa, (prio)});
#define GB_QUANT_ACT(isa, req, prio) v.push_back({"quantize_act", "q8x_quantize__" #isa, (prio)});
#define GB_ATTN(isa, req, prio) v.push_back({"attn", "attn__" #isa, (prio)});
#define GB_ATTN_FINISH(isa, req, prio) v.push_back({"attn_finish", "attn_finish__" #isa, (prio)});
#define GB_KV_DEQUANT(isa, req, prio) v.push_back({"kv_dequant", "kv_dequant__" #isa, (prio)});
#define GB_DELTA(isa, req, prio) v.push_back({"delta_rule", "delta_rule__" #isa, (prio)});
#define GB_GEMM(fmt, id, isa, req, prio) v.push_back({"gemm " + std::to_string(id), #fmt "_gemm__" #isa, (prio)});
#include "kernels.inc"
#undef GB_GEMV
#undef GB_ROW
#undef GB_QUANT_ACT
#undef GB_ATTN
#undef GB_ATTN_FINISH
#undef GB_KV_DEQUANT
#undef GB_DELTA
#undef GB_GEMM
  ASSERT_FALSE(v.empty());
  for (size_t i = 0; i < v.size(); i++) {
    EXPECT_GE(v[i].prio, 0) << v[i].name;
    for (size_t j = i + 1; j < v.size(); j++)
      if (v[i].slot == v[j].slot) {
        EXPECT_NE(v[i].prio, v[j].prio) << v[i].name << " and " << v[j].name << " share a priority";
      }
  }
}

TEST(Isa, SveVectorLengthIsTheExpectedOne) {
  const char *want = getenv("GB_EXPECT_SVE_BITS");
#if defined(__aarch64__) && defined(__linux__) && defined(PR_SVE_GET_VL)
  if (gb_port_cpu_features() & GB_ISA_SVE) {
    const int vl = prctl(PR_SVE_GET_VL);
    ASSERT_GT(vl, 0);
    const int bits = (vl & PR_SVE_VL_LEN_MASK) * 8;
    printf("SVE vector length: %d bits\n", bits);
    if (want) {
      EXPECT_EQ(bits, atoi(want));
    }
    return;
  }
#endif
  if (want) ADD_FAILURE() << "GB_EXPECT_SVE_BITS=" << want << " but this CPU/build has no SVE";
}

}  // namespace
