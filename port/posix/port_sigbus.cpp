// port_sigbus.cpp — reads of a mapped model file never end the process.
//
// A file truncated while it is mapped raises SIGBUS on every read of a page
// past its new end; so does a page the OS cannot read back (an I/O error, a
// network file that went away). A forward pass streams hundreds of megabytes
// of the mapping over tens of milliseconds (seconds on a small board), so a
// check of the file between passes cannot close that window. Instead:
//
//   - every mapping the port makes is entered in a fixed table of slots
//     (atomics only: the signal handler reads it, and may run in any thread
//     at any moment, so nothing here takes a lock or allocates);
//   - one SIGBUS handler for the process (SA_SIGINFO | SA_ONSTACK), installed
//     when the first file is mapped. On a fault whose address lies in a
//     guarded mapping it maps anonymous zero pages over the whole mapping
//     (one mmap with MAP_FIXED, no memory until read, and then the shared
//     zero page) and marks the slot faulted, then returns: the faulting
//     instruction runs again and reads zeros, in whichever thread it was,
//     and so does every later read of that mapping. The library reports the
//     mark as GB_ERR_FILE_CHANGED after the pass (gb_port_mapping_faulted);
//     the model is unusable from then on and must be opened again.
//   - any other SIGBUS goes to the handler that was installed before this
//     one (SA_SIGINFO or plain); if that was the default action, the default
//     is restored and the signal raised again, so the process ends exactly as
//     it would have without the library; an ignored SIGBUS sent by kill()
//     stays ignored.
//
// The slot table and the saved handler are the library's only process-wide
// state: a signal handler has nowhere else to look.
#include "port_sigbus.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

namespace {

// Mappings guarded at once (models open through gb_port_map_file at the
// same time). A handler that scans a fixed table needs a bound.
constexpr uint32_t kSlots = 256;

enum : uint32_t { kFree = 0, kBusy = 1, kLive = 2 };

struct Slot {
  std::atomic<uint32_t> state;             // kFree, kBusy (being filled or emptied), kLive
  std::atomic<uintptr_t> begin, end;       // [begin, end), whole pages
  std::atomic<uint32_t> faulted;           // 1 once a read faulted
};
static_assert(std::atomic<uintptr_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the SIGBUS handler needs lock-free atomics");

// Zero-initialized static storage: no constructor runs.
Slot g_slot[kSlots];
std::atomic<uint32_t> g_used;  // slots [0, g_used) were ever taken: the handler looks no further
struct sigaction g_prev;       // the SIGBUS disposition before ours
std::atomic<bool> g_installed;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

// Zeros over the guarded mapping that holds addr; false if none holds it.
bool repair(uintptr_t addr) {
  const uint32_t n = g_used.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; i++) {
    Slot &s = g_slot[i];
    if (s.state.load(std::memory_order_acquire) != kLive) continue;
    const uintptr_t b = s.begin.load(std::memory_order_relaxed), e = s.end.load(std::memory_order_relaxed);
    if (addr < b || addr >= e) continue;
    // mmap is a plain system call (async-signal-safe in practice on every
    // posix system, if not on POSIX's list). The whole mapping at once: a
    // truncated file would otherwise fault once per page for the rest of
    // the pass, thousands of signals, and each replaced page would split
    // the mapping in the kernel's tables.
    if (mmap((void *)b, e - b, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) return false;
    s.faulted.store(1, std::memory_order_release);
    return true;
  }
  return false;
}

// What would have happened without this handler.
void chain(int sig, siginfo_t *si, void *uc) {
  const struct sigaction &p = g_prev;
  if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
    if (p.sa_flags & SA_SIGINFO) p.sa_sigaction(sig, si, uc);
    else p.sa_handler(sig);
    return;
  }
  // An ignored SIGBUS from kill() stays ignored; a fault cannot be ignored
  // (the kernel ends the process), so it takes the default path.
  if (p.sa_handler == SIG_IGN && si && si->si_code <= 0) return;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  // Blocked while this handler runs: delivered, with the default action, as
  // it returns (a fault's context is then the faulting instruction's).
  raise(sig);
}

void on_sigbus(int sig, siginfo_t *si, void *uc) {
  const int saved = errno;
  // si_code > 0: raised by the kernel for an access (si_addr is meaningful);
  // <= 0: sent by a process, whose si_addr is not an address.
  const bool fixed = si && si->si_code > 0 && repair((uintptr_t)si->si_addr);
  errno = saved;
  if (!fixed) chain(sig, si, uc);
}

void install() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  // SA_ONSTACK: on the thread's alternate stack when it has one (the
  // handler needs a few hundred bytes).
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  g_installed.store(sigaction(SIGBUS, &sa, &g_prev) == 0, std::memory_order_release);
}

}  // namespace

int gb_posix_guard_add(const void *p, size_t size) {
  pthread_once(&g_once, install);
  if (!p || !size || !g_installed.load(std::memory_order_acquire)) return 0;
  long ps = sysconf(_SC_PAGESIZE);
  const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
  const uintptr_t b = (uintptr_t)p, e = (b + size + page - 1) & ~(page - 1);
  for (uint32_t i = 0; i < kSlots; i++) {
    Slot &s = g_slot[i];
    uint32_t want = kFree;
    if (!s.state.compare_exchange_strong(want, kBusy, std::memory_order_acq_rel)) continue;
    s.begin.store(b, std::memory_order_relaxed);
    s.end.store(e, std::memory_order_relaxed);
    s.faulted.store(0, std::memory_order_relaxed);
    uint32_t used = g_used.load(std::memory_order_relaxed);
    while (used < i + 1 && !g_used.compare_exchange_weak(used, i + 1, std::memory_order_acq_rel)) {
    }
    s.state.store(kLive, std::memory_order_release);
    return (int)i + 1;
  }
  return 0;
}

void gb_posix_guard_remove(int guard) {
  if (guard <= 0 || guard > (int)kSlots) return;
  Slot &s = g_slot[guard - 1];
  s.state.store(kBusy, std::memory_order_release);
  s.begin.store(0, std::memory_order_relaxed);
  s.end.store(0, std::memory_order_relaxed);
  s.state.store(kFree, std::memory_order_release);
}

int gb_posix_guard_faulted(int guard) {
  if (guard <= 0 || guard > (int)kSlots) return 0;
  return g_slot[guard - 1].faulted.load(std::memory_order_acquire) ? 1 : 0;
}
