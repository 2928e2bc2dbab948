/* gearbx_port.h — everything gearbx needs from a platform, in one C header.
 *
 * src/ reaches the operating system only through these functions; arch/
 * never calls them. Two implementations ship: port/posix (Linux, macOS,
 * any POSIX system) and port/none (no OS: no files, no threads, no mmap;
 * models come from a caller's memory pointer). A board support package can
 * provide its own by compiling a file that defines these symbols.
 */
#ifndef GEARBX_PORT_H
#define GEARBX_PORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Results of port calls: 0 on success, or one of these. */
enum {
  GB_PORT_OK = 0,
  GB_PORT_ENOENT = 1,      /* no such file                       */
  GB_PORT_EIO = 2,         /* any other open/stat/map failure    */
  GB_PORT_ENOSYS = 3,      /* the platform has no such service   */
  GB_PORT_ENOMEM = 4,
  GB_PORT_ECHANGED = 5     /* a mapped file changed since it was mapped */
};

/* ---- files -------------------------------------------------------------- */
typedef struct gb_port_mapping {
  const void *data; /* read-only view of the whole file       */
  size_t size;
  void *handle;     /* private to the port                    */
  int loaded;       /* 1: a copy in memory (gb_port_load_file), 0: a mapping */
  int file;         /* private to the port (posix: descriptor + 1; 0 = none,
                       so a zeroed struct owns nothing) */
  uint64_t ident[3];/* private to the port: what gb_port_check_file compares */
  int guard;        /* private to the port (posix: its SIGBUS guard; 0 = none) */
} gb_port_mapping;

/* Map a whole file read-only. The port keeps what it needs to notice later
 * that the file changed under the mapping (gb_port_check_file), and makes
 * sure that a read of the mapping which faults because the file changed
 * under it (truncated: pages past the new end; or pages the system cannot
 * read back) does not end the process: the read yields zeros, in whichever
 * thread it ran, and gb_port_mapping_faulted says so from then on. The
 * posix port does this with a process-wide SIGBUS handler that chains to the
 * one installed before it (docs/RELIABILITY.md). GB_PORT_ENOMEM when the
 * port cannot guard another mapping. */
int gb_port_map_file(const char *path, gb_port_mapping *out);
/* Read a whole file into memory the port allocates (64-byte aligned): no
 * mapping, so later changes to the file cannot reach the reader. Released by
 * gb_port_unmap_file. GB_PORT_ENOMEM when the allocation fails. */
int gb_port_load_file(const char *path, gb_port_mapping *out);
/* GB_PORT_OK while the mapped file still is what was mapped: same size and
 * same modification time as when it was mapped (one fstat); GB_PORT_ECHANGED
 * when it was truncated, extended or written since; GB_PORT_EIO if it cannot
 * be examined. Always GB_PORT_OK for a loaded copy. Cheap enough to call
 * before every forward pass (about a microsecond). */
int gb_port_check_file(const gb_port_mapping *m);
/* 1 once a read of the mapping faulted (see gb_port_map_file): what it read
 * and everything it reads later are zeros, not the file. 0 before, and
 * always for a loaded copy or a port without files. One atomic load: safe
 * to call from any thread at any time. */
int gb_port_mapping_faulted(const gb_port_mapping *m);
void gb_port_unmap_file(gb_port_mapping *m);

enum {
  GB_PORT_ADVISE_WILLNEED = 1,   /* start reading these pages in       */
  GB_PORT_ADVISE_DONTNEED = 2,   /* drop these pages from residency    */
  GB_PORT_ADVISE_SEQUENTIAL = 3,
  GB_PORT_ADVISE_RANDOM = 4
};
/* A hint about [addr, addr + len) of a mapping; rounded inward to whole
 * pages. Returns GB_PORT_ENOSYS where hints do not exist (harmless). */
int gb_port_advise(const void *addr, size_t len, int advice);
/* Lock [addr, addr + len) (rounded outward to whole pages) in memory: its
 * pages are read in now and never evicted until gb_port_unlock or the
 * mapping goes. GB_PORT_ENOMEM when the system refuses (a limit on locked
 * memory, or no memory), GB_PORT_ENOSYS where locking does not exist. */
int gb_port_lock(const void *addr, size_t len);
void gb_port_unlock(const void *addr, size_t len);
/* Bytes of [addr, addr + len) resident in this process now (mapped in its
 * page tables, not merely cached by the OS), or -1 if unknown. */
int64_t gb_port_resident_bytes(const void *addr, size_t len);
/* The system page size (4096 when unknown). */
size_t gb_port_page_size(void);

/* ---- memory: obtained once per object, never per step ------------------- */
void *gb_port_aligned_alloc(size_t size, size_t alignment);
void gb_port_aligned_free(void *p);

/* ---- time --------------------------------------------------------------- */
/* Monotonic nanoseconds (0 forever where there is no clock). */
uint64_t gb_port_now_ns(void);

/* ---- threads ------------------------------------------------------------ */
typedef void (*gb_port_task_fn)(void *ctx, uint32_t task, uint32_t n_tasks);
/* Run fn(ctx, i, n_tasks) for every i in [0, n_tasks) on up to n_threads
 * threads (the caller's included) and return when all are done. The none
 * port runs them in order on the caller's thread. */
void gb_port_parallel_for(uint32_t n_threads, uint32_t n_tasks, gb_port_task_fn fn, void *ctx);

/* A persistent pool: workers started once (at session creation) and reused
 * by every parallel section, so a GEMV does not pay for thread creation.
 * The pool lives in caller memory (the session arena): starting it places
 * its state there and starts n_threads - 1 workers (creating a thread may
 * allocate inside the OS / C library, at start only); running a section
 * allocates nothing. */
typedef struct gb_port_pool gb_port_pool;
/* Bytes of memory (64-byte aligned) a pool of n_threads needs (the caller's
 * thread included; 0 and 1 mean the caller only). Never 0. */
size_t gb_port_pool_mem_size(uint32_t n_threads);
/* Place a pool in mem (gb_port_pool_mem_size(n_threads) bytes) and start its
 * workers. Never fails: workers that cannot be started are left out, and
 * their share of the tasks runs on the threads that exist (see
 * gb_port_pool_threads). Ports without threads run everything inline. */
gb_port_pool *gb_port_pool_start(void *mem, uint32_t n_threads);
/* Threads that run tasks, the caller's included (>= 1). */
uint32_t gb_port_pool_threads(const gb_port_pool *pool);
/* Run fn(ctx, i, n_tasks) once for every i in [0, n_tasks) on the pool's
 * workers and the calling thread; returns when all are done. Which thread
 * runs which task is unspecified. One caller at a time (a session is used
 * by one thread at a time). n_tasks <= 1 runs inline without waking anyone. */
void gb_port_pool_run(gb_port_pool *pool, uint32_t n_tasks, gb_port_task_fn fn, void *ctx);
/* Stop and join the workers; the memory may be reused afterwards. NULL is a
 * no-op. */
void gb_port_pool_stop(gb_port_pool *pool);

/* ---- CPU features (GB_ISA_* bits of arch/kernels.h) --------------------- */
uint32_t gb_port_cpu_features(void);

/* ---- logging ------------------------------------------------------------ */
/* The default sink: one line to the platform's diagnostic stream. */
void gb_port_log_write(int level, const char *line);

#ifdef __cplusplus
}
#endif

#endif /* GEARBX_PORT_H */
