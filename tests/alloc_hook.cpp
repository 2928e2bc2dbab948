// alloc_hook.cpp — the allocator hook: the test binary is linked with
// -Wl,--wrap for malloc, calloc, realloc, free, posix_memalign and
// aligned_alloc, so every call from the library's objects passes here.
#include <stdlib.h>

#include <atomic>
#include <new>

#include "test_util.h"

extern "C" {
void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
void __real_free(void *);
int __real_posix_memalign(void **, size_t, size_t);
void *__real_aligned_alloc(size_t, size_t);
}

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_count{0};
inline void note() {
  if (g_counting.load(std::memory_order_relaxed)) g_count.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void *__wrap_malloc(size_t n) { note(); return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { note(); return __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { note(); return __real_realloc(p, n); }
void __wrap_free(void *p) { __real_free(p); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { note(); return __real_posix_memalign(p, a, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { note(); return __real_aligned_alloc(a, n); }
}

// operator new in the test binary also counts (the library must not use it).
// Every plain and nothrow form is replaced, so each allocation and its
// release meet in the same allocator (the align_val_t forms stay the
// runtime's, pairs included).
namespace {
void *counted_new(size_t n) {
  note();
  return __real_malloc(n ? n : 1);
}
}  // namespace
void *operator new(size_t n) {
  void *p = counted_new(n);
  if (!p) abort();
  return p;
}
void *operator new[](size_t n) { return operator new(n); }
void *operator new(size_t n, const std::nothrow_t &) noexcept { return counted_new(n); }
void *operator new[](size_t n, const std::nothrow_t &) noexcept { return counted_new(n); }
void operator delete(void *p) noexcept { __real_free(p); }
void operator delete(void *p, size_t) noexcept { __real_free(p); }
void operator delete[](void *p) noexcept { __real_free(p); }
void operator delete[](void *p, size_t) noexcept { __real_free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { __real_free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { __real_free(p); }

namespace gbt {
void alloc_count_start() {
  g_count = 0;
  g_counting = true;
}
uint64_t alloc_count_stop() {
  g_counting = false;
  return g_count.load();
}
}  // namespace gbt
