// kv.h — the session's key/value cache. This version stores f32 rows
// (n_layers, n_ctx, kv_dim) for keys and values; the budgeted, per-token
// precision pool of seed 002 replaces the storage behind the same calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"

namespace gb {

struct KvCache {
  uint32_t n_layers = 0, n_ctx = 0, kv_dim = 0;
  float *k = nullptr;  // (n_layers, n_ctx, kv_dim)
  float *v = nullptr;  // (n_layers, n_ctx, kv_dim)

  float *key(uint32_t layer, uint32_t pos) { return k + ((size_t)layer * n_ctx + pos) * kv_dim; }
  float *value(uint32_t layer, uint32_t pos) { return v + ((size_t)layer * n_ctx + pos) * kv_dim; }
  uint64_t bytes() const { return 2ull * n_layers * n_ctx * kv_dim * sizeof(float); }
};

// Carve the cache from the arena (counting or placing).
void kv_carve(KvCache *kv, Arena &a, uint32_t n_layers, uint32_t n_ctx, uint32_t kv_dim);

}  // namespace gb
