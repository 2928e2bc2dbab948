// kv.cpp — see kv.h.
#include "kv.h"

namespace gb {

void kv_carve(KvCache *kv, Arena &a, uint32_t n_layers, uint32_t n_ctx, uint32_t kv_dim) {
  kv->n_layers = n_layers;
  kv->n_ctx = n_ctx;
  kv->kv_dim = kv_dim;
  kv->k = a.array<float>((size_t)n_layers * n_ctx * kv_dim);
  kv->v = a.array<float>((size_t)n_layers * n_ctx * kv_dim);
}

}  // namespace gb
