// port_posix.cpp — the platform layer on POSIX systems (Linux first).
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif

#include <atomic>
#include <new>

#include "../../arch/kernels.h"
#include "../gearbx_port.h"
#include "port_sigbus.h"

extern "C" {

namespace {
uint64_t mtime_ns(const struct stat &st) {
#if defined(__APPLE__)
  return (uint64_t)st.st_mtimespec.tv_sec * 1000000000ull + (uint64_t)st.st_mtimespec.tv_nsec;
#else
  return (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
#endif
}
// Open a regular file for reading; its status in *st.
int open_regular(const char *path, struct stat *st, int *fd_out) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? GB_PORT_ENOENT : GB_PORT_EIO;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    close(fd);
    return GB_PORT_EIO;
  }
  *fd_out = fd;
  return GB_PORT_OK;
}
}  // namespace

// The file stays open while it is mapped, so gb_port_check_file can fstat
// the very file the mapping shows (renaming another file over the path does
// not touch the mapping, and is not reported). The mapping is guarded
// (port_sigbus.cpp): a read that faults reads zeros and is reported by
// gb_port_mapping_faulted instead of ending the process.
int gb_port_map_file(const char *path, gb_port_mapping *out) {
  struct stat st;
  int fd = -1;
  const int rc = open_regular(path, &st, &fd);
  if (rc != GB_PORT_OK) return rc;
  const size_t size = (size_t)st.st_size;
  void *p = nullptr;
  if (size > 0) {
    p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return GB_PORT_EIO;
    }
  }
  const int guard = gb_posix_guard_add(p, size);
  if (size > 0 && guard == 0) {  // an unguarded mapping could end the process
    munmap(p, size);
    close(fd);
    return GB_PORT_ENOMEM;
  }
  out->data = p;
  out->size = size;
  out->handle = p;
  out->loaded = 0;
  out->file = fd + 1;
  out->ident[0] = (uint64_t)st.st_size;
  out->ident[1] = mtime_ns(st);
  out->ident[2] = (uint64_t)st.st_ino;
  out->guard = guard;
  return GB_PORT_OK;
}

int gb_port_load_file(const char *path, gb_port_mapping *out) {
  struct stat st;
  int fd = -1;
  const int rc = open_regular(path, &st, &fd);
  if (rc != GB_PORT_OK) return rc;
  const size_t size = (size_t)st.st_size;
  uint8_t *p = size ? static_cast<uint8_t *>(gb_port_aligned_alloc(size, 64)) : nullptr;
  if (size && !p) {
    close(fd);
    return GB_PORT_ENOMEM;
  }
  size_t got = 0;
  while (got < size) {
    const ssize_t n = read(fd, p + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // error, or the file shrank while it was read
    got += (size_t)n;
  }
  close(fd);
  if (got != size) {
    gb_port_aligned_free(p);
    return GB_PORT_EIO;
  }
  out->data = p;
  out->size = size;
  out->handle = p;
  out->loaded = 1;
  out->file = 0;
  out->ident[0] = out->ident[1] = out->ident[2] = 0;
  out->guard = 0;
  return GB_PORT_OK;
}

int gb_port_check_file(const gb_port_mapping *m) {
  if (m->loaded || m->file <= 0) return GB_PORT_OK;
  struct stat st;
  if (fstat(m->file - 1, &st) != 0) return GB_PORT_EIO;
  return (uint64_t)st.st_size == m->ident[0] && mtime_ns(st) == m->ident[1] ? GB_PORT_OK : GB_PORT_ECHANGED;
}

int gb_port_mapping_faulted(const gb_port_mapping *m) { return m->loaded ? 0 : gb_posix_guard_faulted(m->guard); }

void gb_port_unmap_file(gb_port_mapping *m) {
  if (m->loaded) {
    gb_port_aligned_free(m->handle);
  } else {
    gb_posix_guard_remove(m->guard);  // before the pages go: no read may fault in between
    if (m->handle && m->size) munmap(m->handle, m->size);
    if (m->file > 0) close(m->file - 1);
  }
  m->data = nullptr;
  m->handle = nullptr;
  m->size = 0;
  m->loaded = 0;
  m->file = 0;
  m->guard = 0;
}

size_t gb_port_page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

int gb_port_advise(const void *addr, size_t len, int advice) {
  const uintptr_t page = gb_port_page_size();
  uintptr_t a = ((uintptr_t)addr + page - 1) & ~(page - 1);
  uintptr_t b = ((uintptr_t)addr + len) & ~(page - 1);
  if (b <= a) return GB_PORT_OK;
  int adv = POSIX_MADV_NORMAL;
  switch (advice) {
    case GB_PORT_ADVISE_WILLNEED: adv = POSIX_MADV_WILLNEED; break;
    case GB_PORT_ADVISE_DONTNEED:
#ifdef MADV_DONTNEED
      // For a read-only file mapping this drops the pages; they are re-read on touch.
      return madvise((void *)a, b - a, MADV_DONTNEED) == 0 ? GB_PORT_OK : GB_PORT_EIO;
#else
      adv = POSIX_MADV_DONTNEED;
#endif
      break;
    case GB_PORT_ADVISE_SEQUENTIAL: adv = POSIX_MADV_SEQUENTIAL; break;
    case GB_PORT_ADVISE_RANDOM: adv = POSIX_MADV_RANDOM; break;
    default: return GB_PORT_ENOSYS;
  }
  return posix_madvise((void *)a, b - a, adv) == 0 ? GB_PORT_OK : GB_PORT_EIO;
}

int gb_port_lock(const void *addr, size_t len) {
  if (len == 0) return GB_PORT_OK;
  return mlock(addr, len) == 0 ? GB_PORT_OK : GB_PORT_ENOMEM;
}

void gb_port_unlock(const void *addr, size_t len) {
  if (len) munlock(addr, len);
}

int64_t gb_port_resident_bytes(const void *addr, size_t len) {
#if defined(__linux__)
  // Pages mapped in this process: /proc/self/pagemap's "present" bit (63).
  // That is what a shift releases (MADV_DONTNEED unmaps pages of a file
  // mapping; they may stay in the page cache, which mincore would count).
  // Falls back to mincore where pagemap cannot be read.
  const uintptr_t page = gb_port_page_size();
  uintptr_t a = (uintptr_t)addr & ~(page - 1);
  uintptr_t b = ((uintptr_t)addr + len + page - 1) & ~(page - 1);
  if (b <= a) return 0;
  int64_t resident = 0;
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    uint64_t ent[512];
    bool ok = true;
    for (uintptr_t p = a; p < b && ok;) {
      size_t pages = (b - p) / page;
      if (pages > 512) pages = 512;
      const off_t at = (off_t)(p / page * sizeof(uint64_t));
      ok = pread(fd, ent, pages * sizeof(uint64_t), at) == (ssize_t)(pages * sizeof(uint64_t));
      for (size_t i = 0; ok && i < pages; i++) resident += (ent[i] >> 63) ? (int64_t)page : 0;
      p += pages * page;
    }
    close(fd);
    if (ok) return resident;
    resident = 0;
  }
  unsigned char vec[256];
  for (uintptr_t p = a; p < b;) {
    size_t pages = (b - p) / page;
    if (pages > sizeof vec) pages = sizeof vec;
    if (mincore((void *)p, pages * page, vec) != 0) return -1;
    for (size_t i = 0; i < pages; i++) resident += (vec[i] & 1) ? (int64_t)page : 0;
    p += pages * page;
  }
  return resident;
#else
  (void)addr;
  (void)len;
  return -1;
#endif
}

void *gb_port_aligned_alloc(size_t size, size_t alignment) {
  void *p = nullptr;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (posix_memalign(&p, alignment, size ? size : 1) != 0) return nullptr;
  return p;
}

void gb_port_aligned_free(void *p) { free(p); }

uint64_t gb_port_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

namespace {
struct ThreadJob {
  gb_port_task_fn fn;
  void *ctx;
  uint32_t first, step, n_tasks;
};
void *thread_main(void *arg) {
  ThreadJob *j = static_cast<ThreadJob *>(arg);
  for (uint32_t t = j->first; t < j->n_tasks; t += j->step) j->fn(j->ctx, t, j->n_tasks);
  return nullptr;
}
}  // namespace

void gb_port_parallel_for(uint32_t n_threads, uint32_t n_tasks, gb_port_task_fn fn, void *ctx) {
  if (n_threads > 64) n_threads = 64;
  if (n_threads > n_tasks) n_threads = n_tasks;
  if (n_threads <= 1) {
    for (uint32_t t = 0; t < n_tasks; t++) fn(ctx, t, n_tasks);
    return;
  }
  pthread_t th[64];
  ThreadJob jobs[64];
  uint32_t started = 1;
  for (uint32_t i = 1; i < n_threads; i++) {
    jobs[i] = ThreadJob{fn, ctx, i, n_threads, n_tasks};
    if (pthread_create(&th[i], nullptr, thread_main, &jobs[i]) != 0) break;
    started++;
  }
  // Tasks of threads that failed to start run here, so every task runs once.
  jobs[0] = ThreadJob{fn, ctx, 0, n_threads, n_tasks};
  thread_main(&jobs[0]);
  for (uint32_t i = started; i < n_threads; i++) {
    jobs[i] = ThreadJob{fn, ctx, i, n_threads, n_tasks};
    thread_main(&jobs[i]);
  }
  for (uint32_t i = 1; i < started; i++) pthread_join(th[i], nullptr);
}

// ---- the persistent pool ----------------------------------------------------
// A section is published by bumping `gen`; idle workers poll it for a short
// while (decode runs one GEMV after another, microseconds apart), then
// sleep on the condition variable. Tasks are claimed from `claim`, which
// holds the section's generation next to the next task index, so a worker
// that arrives late (descheduled, still waking up) can never claim a task
// of a section other than the one it read: the caller claims tasks too and
// waits only for the tasks that were claimed, never for a worker to show up.
// The section's function and context sit in one of two slots (by generation
// parity); a slot is rewritten only after every task of the section two
// generations back has finished.
struct gb_port_pool {
  uint32_t n_threads;  // the caller's included
  uint32_t n_workers;  // started
  uint32_t cur;        // generation of the last section (caller only)
  std::atomic<uint32_t> gen;       // published generation (wake-ups)
  std::atomic<uint64_t> claim;     // (generation << 32) | next task index
  std::atomic<uint32_t> finished;  // tasks of the current section done
  std::atomic<uint32_t> sleeping;  // workers blocked on cv
  std::atomic<bool> stop;
  struct Section {
    std::atomic<gb_port_task_fn> fn;
    std::atomic<void *> ctx;
    std::atomic<uint32_t> n_tasks;
  } sec[2];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t *threads;  // (n_workers) right after this struct
};

namespace {
constexpr uint64_t kSpinNs = 100000;  // how long an idle worker polls before sleeping

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  // isb, not yield: yield is a no-op on most cores, isb waits a few cycles
  // (Rust's spin_loop hint made the same choice).
  __asm__ __volatile__("isb" ::: "memory");
#endif
}

// Claim and run tasks of section g until none is left (or the pool moved on).
void pool_work(gb_port_pool *p, uint32_t g) {
  const gb_port_pool::Section &S = p->sec[g & 1];
  for (;;) {
    uint64_t c = p->claim.load(std::memory_order_acquire);
    if ((uint32_t)(c >> 32) != g) return;
    const uint32_t n = S.n_tasks.load(std::memory_order_relaxed);
    const uint32_t t = (uint32_t)c;
    if (t >= n) return;
    if (!p->claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    // The claim succeeded, so section g is unfinished and its slot is stable.
    S.fn.load(std::memory_order_relaxed)(S.ctx.load(std::memory_order_relaxed), t, n);
    p->finished.fetch_add(1, std::memory_order_release);
  }
}

void *pool_worker(void *arg) {
  gb_port_pool *p = static_cast<gb_port_pool *>(arg);
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = p->gen.load(std::memory_order_acquire);
    if (g == seen) {
      const uint64_t t0 = gb_port_now_ns();
      for (uint32_t i = 1; (g = p->gen.load(std::memory_order_acquire)) == seen; i++) {
        if (p->stop.load(std::memory_order_acquire)) return nullptr;
        cpu_relax();
        if (i % 64 == 0 && gb_port_now_ns() - t0 > kSpinNs) break;
      }
      if (g == seen) {
        pthread_mutex_lock(&p->mu);
        // seq_cst pairs with the caller's gen store / sleeping load: either
        // this thread sees the new section or the caller sees it asleep.
        p->sleeping.fetch_add(1);
        while ((g = p->gen.load()) == seen && !p->stop.load()) pthread_cond_wait(&p->cv, &p->mu);
        p->sleeping.fetch_sub(1);
        pthread_mutex_unlock(&p->mu);
      }
    }
    if (p->stop.load(std::memory_order_acquire)) return nullptr;
    seen = g;
    pool_work(p, g);
  }
}
}  // namespace

size_t gb_port_pool_mem_size(uint32_t n_threads) {
  const uint32_t workers = n_threads > 1 ? n_threads - 1 : 0;
  return sizeof(gb_port_pool) + workers * sizeof(pthread_t);
}

gb_port_pool *gb_port_pool_start(void *mem, uint32_t n_threads) {
  gb_port_pool *p = new (mem) gb_port_pool();
  p->threads = reinterpret_cast<pthread_t *>(p + 1);
  p->n_workers = 0;
  p->cur = 0;
  p->gen.store(0);
  p->claim.store(0);
  p->finished.store(0);
  p->sleeping.store(0);
  p->stop.store(false);
  for (gb_port_pool::Section &S : p->sec) {
    S.fn.store(nullptr);
    S.ctx.store(nullptr);
    S.n_tasks.store(0);
  }
  pthread_mutex_init(&p->mu, nullptr);
  pthread_cond_init(&p->cv, nullptr);
  for (uint32_t i = 1; i < n_threads; i++) {
    if (pthread_create(&p->threads[p->n_workers], nullptr, pool_worker, p) != 0) break;
    p->n_workers++;
  }
  p->n_threads = p->n_workers + 1;
  return p;
}

uint32_t gb_port_pool_threads(const gb_port_pool *p) { return p ? p->n_threads : 1; }

void gb_port_pool_run(gb_port_pool *p, uint32_t n_tasks, gb_port_task_fn fn, void *ctx) {
  if (!p || p->n_workers == 0 || n_tasks <= 1) {
    for (uint32_t t = 0; t < n_tasks; t++) fn(ctx, t, n_tasks);
    return;
  }
  const uint32_t g = ++p->cur;
  gb_port_pool::Section &S = p->sec[g & 1];
  S.fn.store(fn, std::memory_order_relaxed);
  S.ctx.store(ctx, std::memory_order_relaxed);
  S.n_tasks.store(n_tasks, std::memory_order_relaxed);
  p->finished.store(0, std::memory_order_relaxed);
  p->claim.store((uint64_t)g << 32, std::memory_order_release);
  p->gen.store(g);  // seq_cst: publishes the section
  if (p->sleeping.load() > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  pool_work(p, g);
  for (uint32_t i = 1; p->finished.load(std::memory_order_acquire) < n_tasks; i++) {
    cpu_relax();
    if (i % 1024 == 0) sched_yield();  // the worker running the last task may be descheduled
  }
}

void gb_port_pool_stop(gb_port_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop.store(true);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (uint32_t i = 0; i < p->n_workers; i++) pthread_join(p->threads[i], nullptr);
  p->n_workers = 0;
  p->n_threads = 1;
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  p->~gb_port_pool();
}

uint32_t gb_port_cpu_features(void) {
  uint32_t f = GB_ISA_GENERIC;
#if defined(__x86_64__) || defined(__i386__)
  // AVX2 kernels need AVX2, FMA and F16C, and the OS saving YMM state.
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    unsigned xcr0 = 0;
    if (osxsave) {
      unsigned hi;
      __asm__("xgetbv" : "=a"(xcr0), "=d"(hi) : "c"(0));
    }
    const bool ymm = (xcr0 & 6u) == 6u;
    if (fma && avx && f16c && ymm && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5))) {
      f |= GB_ISA_AVX2;
      // AVX-512 F (b16), BW (b30), VL (b31), VNNI (c11), and the OS saving
      // opmask and ZMM state (XCR0 bits 5..7).
      const bool zmm = (xcr0 & 0xE6u) == 0xE6u;
      if (zmm && (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (c & (1u << 11))) f |= GB_ISA_AVX512;
    }
  }
#elif defined(__aarch64__) && defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
  if (hw & (1ul << 1)) f |= GB_ISA_NEON;       /* HWCAP_ASIMD */
  if (hw & (1ul << 10)) f |= GB_ISA_FP16;      /* HWCAP_ASIMDHP */
  if (hw & (1ul << 20)) f |= GB_ISA_DOTPROD;   /* HWCAP_ASIMDDP */
  if (hw & (1ul << 22)) f |= GB_ISA_SVE;       /* HWCAP_SVE */
  if (hw2 & (1ul << 13)) f |= GB_ISA_I8MM;     /* HWCAP2_I8MM */
#endif
  return f;
}

void gb_port_log_write(int level, const char *line) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "gearbx %s: %s\n", (level >= 0 && level <= 3) ? names[level] : "log", line);
}

}  // extern "C"
