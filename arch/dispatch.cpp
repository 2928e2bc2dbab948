// dispatch.cpp — builds a session's kernel table from kernels.inc.
#include "kernels.h"

#include <string.h>

namespace {
constexpr int fmt_index(const char *f) {
  return f[0] == 'f' ? (f[1] == '3' ? GB_FMT_F32 : GB_FMT_F16)
                     : (f[1] == '8' ? GB_FMT_Q8 : (f[2] == 'r' ? GB_FMT_Q4R16 : GB_FMT_Q4));
}
}  // namespace

extern "C" void gb_kernels_select(gb_kernels *k, uint32_t isa_available) {
  memset(k, 0, sizeof(*k));
  const uint32_t avail = isa_available | GB_ISA_GENERIC;
  const char *gemv_isa[GB_FMT_COUNT] = {};  // folder of each chosen gemv
  // Pass 1: the last available entry of each slot wins.
#define GB_GEMV(fmt, isa, req)                          \
  if (((req) & avail) == (req)) {                       \
    k->gemv[fmt_index(#fmt)] = gb_##fmt##_gemv__##isa;  \
    k->name[fmt_index(#fmt)] = #fmt "_gemv__" #isa;     \
    gemv_isa[fmt_index(#fmt)] = #isa;                   \
    k->isa_mask |= (req);                               \
  }
#define GB_GEMVM(fmt, isa, req)
#define GB_ROW(fmt, isa, req)                                                            \
  if (((req) & avail) == (req)) {                                                        \
    k->rows_to_f32[fmt_index(#fmt)] = gb_##fmt##_rows_to_f32__##isa;                     \
    k->isa_mask |= (req);                                                                \
  }
#define GB_QUANT_ACT(isa, req)                \
  if (((req) & avail) == (req)) {             \
    k->quantize_act = gb_q8x_quantize__##isa; \
    k->isa_mask |= (req);                     \
  }
#define GB_ATTN(isa, req)                    \
  if (((req) & avail) == (req)) {            \
    k->attn_run = gb_attn_run__##isa;        \
    k->attn_finish = gb_attn_finish__##isa;  \
    k->attn_name = "attn__" #isa;            \
    k->isa_mask |= (req);                    \
  }
#define GB_KV_DEQUANT(isa, req)          \
  if (((req) & avail) == (req)) {        \
    k->kv_dequant = gb_kv_dequant__##isa; \
    k->isa_mask |= (req);                \
  }
#define GB_GEMM(fmt, isa, req)          \
  if (((req) & avail) == (req)) {       \
    k->gemm_f32 = gb_##fmt##_gemm__##isa; \
    k->isa_mask |= (req);               \
  }
#include "kernels.inc"
#undef GB_GEMV
#undef GB_GEMVM
#undef GB_ROW
#undef GB_QUANT_ACT
#undef GB_ATTN
#undef GB_KV_DEQUANT
#undef GB_GEMM
  // Pass 2: gemv and gemvm of each format from the same folder, so that the
  // multi-position pass equals the one-position one bit for bit.
#define GB_GEMV(fmt, isa, req)
#define GB_GEMVM(fmt, isa, req)                                                              \
  if (((req) & avail) == (req) && strcmp(gemv_isa[fmt_index(#fmt)], #isa) == 0) {           \
    k->gemvm[fmt_index(#fmt)] = gb_##fmt##_gemvm__##isa;                                    \
    k->gemvm_name[fmt_index(#fmt)] = #fmt "_gemvm__" #isa;                                  \
    k->isa_mask |= (req);                                                                    \
  }
#define GB_ROW(fmt, isa, req)
#define GB_QUANT_ACT(isa, req)
#include "kernels.inc"
#undef GB_GEMV
#undef GB_GEMVM
#undef GB_ROW
#undef GB_QUANT_ACT
}
