// filechange.cpp — mapped model files that change under the process, in
// processes of their own (a signal that escapes ends only the child, and the
// parent sees it; the port installs its SIGBUS handler once per process, at
// the first mapping, and the parent never maps a file through the port, so
// every forked child starts without it).
//
//   gearbx_filechange chain
//       The port's SIGBUS handler and the application's: for each
//       disposition an application may have set before the library mapped
//       its first file (an SA_SIGINFO handler, a plain handler, the default,
//       ignored) and for a handler installed after it, a child process maps
//       a file through the port, truncates it and reads it past the new end
//       (zeros, the mapping marked faulted), then raises a SIGBUS of its own
//       (a truncated file it mapped itself, or raise()): that one must reach
//       the application's disposition exactly as without the library. Also a
//       read from another thread, one on an alternate signal stack, and the
//       disposition the process started with (a sanitizer's handler in a
//       sanitizer build). Exit status 0 when every case ends as expected.

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "gearbx_port.h"

// AddressSanitizer and ThreadSanitizer install a SIGBUS handler of their own
// at start-up, which reports the fault and exits with a status of its own.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GB_TEST_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GB_TEST_SANITIZER 1
#endif
#endif
#ifndef GB_TEST_SANITIZER
#define GB_TEST_SANITIZER 0
#endif

namespace {

// ---- chain: one case per fresh process ------------------------------------------

constexpr size_t kFileBytes = 64 * 1024;

// Exit statuses of a case process (besides the expected ones).
enum : int { kCaseFellThrough = 1, kGuardFailed = 90, kSetupFailed = 91 };

bool make_file(const std::string &path) {
  std::vector<char> bytes(kFileBytes, 'x');
  FILE *f = fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return fclose(f) == 0 && ok;
}

// Map `path` through the port, truncate it and read every page of the mapping
// (from another thread when asked): each read must give zeros and the mapping
// must be marked faulted. Without the guard the first read raises SIGBUS.
void guarded_read_survives(const std::string &path, bool other_thread) {
  gb_port_mapping m{};
  if (!make_file(path) || gb_port_map_file(path.c_str(), &m) != GB_PORT_OK) _exit(kSetupFailed);
  if (gb_port_mapping_faulted(&m) != 0 || truncate(path.c_str(), 0) != 0) _exit(kSetupFailed);
  unsigned sum = 0;
  auto read_all = [&] {
    const volatile unsigned char *p = static_cast<const volatile unsigned char *>(m.data);
    for (size_t i = 0; i < m.size; i += 512) sum += p[i];
  };
  if (other_thread) {
    std::thread t(read_all);
    t.join();
  } else {
    read_all();
  }
  if (sum != 0 || gb_port_mapping_faulted(&m) != 1) _exit(kGuardFailed);
  gb_port_unmap_file(&m);
}

// A SIGBUS the library has nothing to do with: a truncated file this process
// mapped itself, read past its new end.
volatile uintptr_t g_own_begin, g_own_end;
void own_fault(const std::string &path) {
  if (!make_file(path)) _exit(kSetupFailed);
  const int fd = open(path.c_str(), O_RDWR);
  void *p = fd >= 0 ? mmap(nullptr, kFileBytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (p == MAP_FAILED || ftruncate(fd, 0) != 0) _exit(kSetupFailed);
  g_own_begin = (uintptr_t)p;
  g_own_end = (uintptr_t)p + kFileBytes;
  const volatile unsigned char *q = static_cast<const volatile unsigned char *>(p);
  (void)q[kFileBytes / 2];
}

void set_disposition(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, nullptr) != 0) _exit(kSetupFailed);
}

constexpr int kSiginfoOwn = 42, kSiginfoOther = 41, kPlain = 43, kIgnoredKill = 44, kAfter = 45, kSurvived = 46;
constexpr int kSanitizerReport = 1000;  // expected: some non-zero exit status that is none of the above

void on_bus_siginfo(int, siginfo_t *si, void *) {
  const uintptr_t a = (uintptr_t)si->si_addr;
  _exit(si->si_code > 0 && a >= g_own_begin && a < g_own_end ? kSiginfoOwn : kSiginfoOther);
}
void on_bus_plain(int) { _exit(kPlain); }

struct sigaction g_before_app;  // case "after": what the application found installed
void on_bus_chaining(int sig, siginfo_t *si, void *uc) {
  const uintptr_t a = (uintptr_t)si->si_addr;
  if (si->si_code > 0 && a >= g_own_begin && a < g_own_end) _exit(kAfter);
  if (g_before_app.sa_flags & SA_SIGINFO) g_before_app.sa_sigaction(sig, si, uc);
  else if (g_before_app.sa_handler != SIG_DFL && g_before_app.sa_handler != SIG_IGN) g_before_app.sa_handler(sig);
  else _exit(kSiginfoOther);
}

struct ChainCase {
  const char *name;
  int status;  // expected exit status, or -signal
  const char *what;
};
const ChainCase kChain[] = {
    {"siginfo-before", kSiginfoOwn, "SA_SIGINFO handler installed first: gets the fault that is not the library's, with its si_addr"},
    {"plain-before", kPlain, "plain handler installed first: gets raise(SIGBUS)"},
    {"default", -SIGBUS, "default action: a fault that is not the library's still ends the process by SIGBUS"},
    {"ignored-kill", kIgnoredKill, "SIG_IGN: raise(SIGBUS) stays ignored"},
    {"ignored-fault", -SIGBUS, "SIG_IGN: a fault still ends the process by SIGBUS (as the kernel does)"},
    {"handler-after", kAfter, "a handler installed after the library that chains to it: the library's faults repaired through it"},
    {"other-thread", kSurvived, "the guarded read in another thread"},
    {"altstack", kSurvived, "the guarded read on a thread with an alternate signal stack"},
#if GB_TEST_SANITIZER
    {"inherited", kSanitizerReport, "the disposition found at start-up (the sanitizer's handler) reports the fault that is not the library's"},
#else
    {"inherited", -SIGBUS, "the disposition found at start-up (the default) ends the process by SIGBUS"},
#endif
};
constexpr int kChainCases = (int)(sizeof kChain / sizeof kChain[0]);

// One case, in this fresh process. Never returns.
[[noreturn]] void chain_case(int c, const std::string &dir) {
  const std::string guarded = dir + "/guarded.bin", own = dir + "/own.bin";
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  switch (c) {
    case 0:
      sa.sa_sigaction = on_bus_siginfo;
      sa.sa_flags = SA_SIGINFO;
      if (sigaction(SIGBUS, &sa, nullptr) != 0) _exit(kSetupFailed);
      guarded_read_survives(guarded, false);
      own_fault(own);
      break;
    case 1:
      set_disposition(on_bus_plain);
      guarded_read_survives(guarded, false);
      raise(SIGBUS);
      break;
    case 2:
      set_disposition(SIG_DFL);
      guarded_read_survives(guarded, false);
      own_fault(own);
      break;
    case 3:
      set_disposition(SIG_IGN);
      guarded_read_survives(guarded, false);
      raise(SIGBUS);
      _exit(kIgnoredKill);
    case 4:
      set_disposition(SIG_IGN);
      guarded_read_survives(guarded, false);
      own_fault(own);
      break;
    case 5: {
      // The library's handler goes in with the first mapping; the
      // application's after it, keeping what it replaced.
      gb_port_mapping first{};
      if (!make_file(dir + "/first.bin") || gb_port_map_file((dir + "/first.bin").c_str(), &first) != GB_PORT_OK) _exit(kSetupFailed);
      sa.sa_sigaction = on_bus_chaining;
      sa.sa_flags = SA_SIGINFO;
      if (sigaction(SIGBUS, &sa, &g_before_app) != 0) _exit(kSetupFailed);
      guarded_read_survives(guarded, false);
      own_fault(own);
      break;
    }
    case 6:
      set_disposition(SIG_DFL);
      guarded_read_survives(guarded, true);
      _exit(kSurvived);
    case 7: {
      set_disposition(SIG_DFL);
      static char stack_mem[64 * 1024];
      stack_t ss;
      memset(&ss, 0, sizeof ss);
      ss.ss_sp = stack_mem;
      ss.ss_size = sizeof stack_mem;
      if (sigaltstack(&ss, nullptr) != 0) _exit(kSetupFailed);
      guarded_read_survives(guarded, false);
      _exit(kSurvived);
    }
    case 8: {
      const int null = open("/dev/null", O_WRONLY);  // ASan's report of it is expected
      if (GB_TEST_SANITIZER && null >= 0) dup2(null, 2);
      guarded_read_survives(guarded, false);
      own_fault(own);
      break;
    }
    default: break;
  }
  _exit(kCaseFellThrough);
}

std::string describe(int status) {
  char b[64];
  if (WIFSIGNALED(status)) snprintf(b, sizeof b, "killed by signal %d", WTERMSIG(status));
  else if (WIFEXITED(status)) snprintf(b, sizeof b, "exit %d", WEXITSTATUS(status));
  else snprintf(b, sizeof b, "status 0x%x", status);
  return b;
}

int run_chain() {
  char tmpl[] = "/tmp/gearbx-chain-XXXXXX";
  if (!mkdtemp(tmpl)) return perror("mkdtemp"), 1;
  const std::string dir = tmpl;
  int failed = 0;
  for (int c = 0; c < kChainCases; c++) {
    const std::string sub = dir + "/" + kChain[c].name;
    mkdir(sub.c_str(), 0700);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) chain_case(c, sub);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return perror("fork/waitpid"), 1;
    const int want = kChain[c].status;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    const bool ok = want < 0                  ? WIFSIGNALED(status) && WTERMSIG(status) == -want
                    : want == kSanitizerReport ? code > 0 && code != kCaseFellThrough && code != kGuardFailed && code != kSetupFailed &&
                                                     (code < kSiginfoOther || code > kSurvived)
                                               : code == want;
    printf("chain %-15s %-4s %-22s %s\n", kChain[c].name, ok ? "ok" : "FAIL", describe(status).c_str(), kChain[c].what);
    failed += !ok;
    for (const char *f : {"/guarded.bin", "/own.bin", "/first.bin"}) remove((sub + f).c_str());
    rmdir(sub.c_str());
  }
  rmdir(dir.c_str());
  printf("chain: %d of %d cases as expected\n", kChainCases - failed, kChainCases);
  return failed ? 1 : 0;
}

void usage() { fprintf(stderr, "usage: gearbx_filechange chain\n"); }

}  // namespace

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "chain")) return run_chain();
  usage();
  return 2;
}
