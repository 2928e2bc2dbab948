// port_none.cpp — the platform layer for systems without an OS: no files,
// no threads, no mmap, no clock. Models come from gb_model_open_memory();
// the arena from caller memory or from the C library's aligned allocator
// (define GB_PORT_NONE_NO_HEAP to have none at all). CPU features are fixed
// at build time from the compiler's target macros.
#include <stdlib.h>

#include "../../arch/kernels.h"
#include "../gearbx_port.h"

extern "C" {

int gb_port_map_file(const char *, gb_port_mapping *) { return GB_PORT_ENOSYS; }
int gb_port_load_file(const char *, gb_port_mapping *) { return GB_PORT_ENOSYS; }
int gb_port_check_file(const gb_port_mapping *) { return GB_PORT_OK; }
int gb_port_mapping_faulted(const gb_port_mapping *) { return 0; }
void gb_port_unmap_file(gb_port_mapping *m) {
  m->data = nullptr;
  m->size = 0;
  m->handle = nullptr;
}
int gb_port_advise(const void *, size_t, int) { return GB_PORT_ENOSYS; }
int gb_port_lock(const void *, size_t) { return GB_PORT_ENOSYS; }
void gb_port_unlock(const void *, size_t) {}
int64_t gb_port_resident_bytes(const void *, size_t) { return -1; }
size_t gb_port_page_size(void) { return 4096; }

void *gb_port_aligned_alloc(size_t size, size_t alignment) {
#ifdef GB_PORT_NONE_NO_HEAP
  (void)size;
  (void)alignment;
  return nullptr;
#else
  // aligned_alloc needs size to be a multiple of the alignment.
  const size_t rounded = (size + alignment - 1) / alignment * alignment;
  return aligned_alloc(alignment, rounded ? rounded : alignment);
#endif
}
void gb_port_aligned_free(void *p) {
#ifndef GB_PORT_NONE_NO_HEAP
  free(p);
#else
  (void)p;
#endif
}

uint64_t gb_port_now_ns(void) { return 0; }

void gb_port_parallel_for(uint32_t, uint32_t n_tasks, gb_port_task_fn fn, void *ctx) {
  for (uint32_t t = 0; t < n_tasks; t++) fn(ctx, t, n_tasks);
}

// No threads: a pool is one counter, and sections run on the caller.
struct gb_port_pool {
  uint32_t n_threads;
};
size_t gb_port_pool_mem_size(uint32_t) { return sizeof(gb_port_pool); }
gb_port_pool *gb_port_pool_start(void *mem, uint32_t) {
  gb_port_pool *p = static_cast<gb_port_pool *>(mem);
  p->n_threads = 1;
  return p;
}
uint32_t gb_port_pool_threads(const gb_port_pool *) { return 1; }
void gb_port_pool_run(gb_port_pool *, uint32_t n_tasks, gb_port_task_fn fn, void *ctx) {
  for (uint32_t t = 0; t < n_tasks; t++) fn(ctx, t, n_tasks);
}
void gb_port_pool_stop(gb_port_pool *) {}

uint32_t gb_port_cpu_features(void) {
  uint32_t f = GB_ISA_GENERIC;
#if defined(__aarch64__) && defined(__ARM_NEON)
  f |= GB_ISA_NEON;
#endif
#if defined(__ARM_FEATURE_DOTPROD)
  f |= GB_ISA_DOTPROD;
#endif
#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
  f |= GB_ISA_FP16;
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
  f |= GB_ISA_I8MM;
#endif
#if defined(__ARM_FEATURE_SVE)
  f |= GB_ISA_SVE;
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  f |= GB_ISA_AVX2;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
  f |= GB_ISA_AVX512;
#endif
#endif
  return f;
}

// No diagnostic stream: a board can route logs through the options' callback.
void gb_port_log_write(int, const char *) {}

}  // extern "C"
