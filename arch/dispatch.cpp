// dispatch.cpp — builds a session's kernel table from kernels.inc.
#include "kernels.h"

#include <string.h>

namespace {
// Whether an entry of priority `prio` requiring `req` replaces the slot's
// current choice (priority `*best`, -1 while empty).
inline bool takes(uint32_t req, uint32_t avail, int prio, int *best) {
  if ((req & avail) != req || prio <= *best) return false;
  *best = prio;
  return true;
}
}  // namespace

extern "C" void gb_kernels_select(gb_kernels *k, uint32_t isa_available) {
  memset(k, 0, sizeof(*k));
  const uint32_t avail = isa_available | GB_ISA_GENERIC;
  const char *gemv_isa[GB_FMT_COUNT] = {};  // folder of each chosen gemv
  uint32_t gemv_req[GB_FMT_COUNT] = {}, row_req[GB_FMT_COUNT] = {};
  uint32_t qa_req = 0, attn_req = 0, fin_req = 0, deq_req = 0, delta_req = 0, gemm_req = 0, pgemm_req[GB_FMT_COUNT] = {};
  int gemv_best[GB_FMT_COUNT], row_best[GB_FMT_COUNT], pgemm_best[GB_FMT_COUNT];
  for (int f = 0; f < GB_FMT_COUNT; f++) gemv_best[f] = row_best[f] = pgemm_best[f] = -1;
  int qa_best = -1, attn_best = -1, fin_best = -1, deq_best = -1, delta_best = -1, gemm_best = -1;
  // Pass 1: per slot, the available entry of highest priority.
#define GB_GEMV(fmt, id, isa, req, prio)           \
  if (takes((req), avail, (prio), &gemv_best[id])) { \
    k->gemv[id] = gb_##fmt##_gemv__##isa;           \
    k->name[id] = #fmt "_gemv__" #isa;              \
    gemv_isa[id] = #isa;                            \
    gemv_req[id] = (req);                           \
  }
#define GB_GEMVM(fmt, id, isa, req)
#define GB_ROW(fmt, id, isa, req, prio)                 \
  if (takes((req), avail, (prio), &row_best[id])) {     \
    k->rows_to_f32[id] = gb_##fmt##_rows_to_f32__##isa; \
    row_req[id] = (req);                                \
  }
#define GB_QUANT_ACT(isa, req, prio)               \
  if (takes((req), avail, (prio), &qa_best)) {     \
    k->quantize_act = gb_q8x_quantize__##isa;      \
    qa_req = (req);                                \
  }
#define GB_ATTN(isa, req, prio)                    \
  if (takes((req), avail, (prio), &attn_best)) {   \
    k->attn_run = gb_attn_run__##isa;              \
    k->attn_name = "attn__" #isa;                  \
    attn_req = (req);                              \
  }
#define GB_ATTN_FINISH(isa, req, prio)             \
  if (takes((req), avail, (prio), &fin_best)) {    \
    k->attn_finish = gb_attn_finish__##isa;        \
    fin_req = (req);                               \
  }
#define GB_KV_DEQUANT(isa, req, prio)              \
  if (takes((req), avail, (prio), &deq_best)) {    \
    k->kv_dequant = gb_kv_dequant__##isa;          \
    deq_req = (req);                               \
  }
#define GB_DELTA(isa, req, prio)                   \
  if (takes((req), avail, (prio), &delta_best)) {  \
    k->delta_rule = gb_delta_rule__##isa;          \
    k->delta_name = "delta_rule__" #isa;           \
    delta_req = (req);                             \
  }
#define GB_GEMM(fmt, id, isa, req, prio)           \
  if (takes((req), avail, (prio), &gemm_best)) {   \
    k->gemm_f32 = gb_##fmt##_gemm__##isa;          \
    gemm_req = (req);                              \
  }
#define GB_PGEMM(fmt, id, isa, req, prio)             \
  if (takes((req), avail, (prio), &pgemm_best[id])) {  \
    k->pgemm[id] = gb_##fmt##_pgemm__##isa;            \
    k->pgemm_name[id] = #fmt "_pgemm__" #isa;          \
    pgemm_req[id] = (req);                             \
  }
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
#undef GB_PGEMM
  // Pass 2: gemv and gemvm of each format from the same folder, so that the
  // multi-position pass equals the one-position one bit for bit.
  uint32_t gemvm_req[GB_FMT_COUNT] = {};
#define GB_GEMVM(fmt, id, isa, req)                                                \
  if (((req) & avail) == (req) && gemv_isa[id] && strcmp(gemv_isa[id], #isa) == 0) { \
    k->gemvm[id] = gb_##fmt##_gemvm__##isa;                                        \
    k->gemvm_name[id] = #fmt "_gemvm__" #isa;                                      \
    k->gemvm_isa[id] = (req);                                                      \
    gemvm_req[id] = (req);                                                         \
  }
#include "kernels.inc"
#undef GB_GEMVM
  k->isa_mask = qa_req | attn_req | fin_req | deq_req | delta_req | gemm_req;
  for (int f = 0; f < GB_FMT_COUNT; f++) k->isa_mask |= gemv_req[f] | row_req[f] | gemvm_req[f] | pgemm_req[f];
}
