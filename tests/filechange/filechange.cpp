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
//
//   gearbx_filechange stress [--trials N] [--threads 1,2] [--kinds truncate,rewrite,replace]
//                            [--steps N] [--delay-ms LO-HI] [--spec SPEC] [--model-dir DIR]
//                            [--seed S] [--json FILE] [--cli GEARBX --cli-trials N] [--ci]
//       The bug this guards against, at its real timing: a DRAM-sized
//       synthetic model (default the TinyLlama-1.1B shape, low tier only:
//       714 MB, generated into --model-dir on first use and kept there)
//       decodes greedily in a child process while this process, LO..HI ms
//       after the child's first token (default 50..1200), changes the file:
//         truncate  to 0 bytes, to half, or to a random size;
//         rewrite   in place, same size: random bytes over the whole file, or
//                   over one random 4 MiB region, or truncated and written
//                   back (what cp does);
//         replace   another file renamed over the path.
//       A decode pass takes tens of milliseconds here, so most changes land
//       inside one. Every trial must end without a signal. truncate and
//       rewrite: the step returns GB_ERR_FILE_CHANGED, every token handed out
//       before it equals an untouched run's (none was computed from changed
//       bytes), later steps keep returning the status, gb_model_verify says
//       it too, the tokenizer still answers over the changed vocabulary, and
//       the process opens the original model again and decodes it. replace:
//       the mapping keeps the old file, so decoding goes on and every token
//       equals the untouched run's. --cli runs some trials through
//       `gearbx run` too (one error line, exit status 1; replace: exit 0 and
//       the untouched run's tokens). --ci: 2 trials per kind and thread
//       count, 64 steps, changes within 600 ms, unless GEARBX_FILECHANGE_FULL=1
//       is set (then the defaults: 20 trials, 160 steps). Exit status 0 when
//       every trial ends as expected.
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "gearbx.h"
#include "gearbx_convert.h"
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
// Not 1: a sanitizer that reports the fault exits with 1 by default.
enum : int { kCaseFellThrough = 89, kGuardFailed = 90, kSetupFailed = 91 };

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

// ---- stress: the real timing ------------------------------------------------------

enum Kind { kTruncate = 0, kRewrite, kReplace, kKinds };
const char *const kKindName[kKinds] = {"truncate", "rewrite", "replace"};

struct StressOpt {
  std::string model_dir = ".", spec = "tinyllama-1.1b", json, cli;
  int trials = 20, steps = 160, delay_lo = 50, delay_hi = 1200, cli_trials = 0;
  std::vector<int> threads = {1, 2};
  std::vector<int> kinds = {kTruncate, kRewrite, kReplace};
  uint64_t seed = 1;
};

uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double now_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

uint64_t file_size(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? (uint64_t)st.st_size : 0;
}

bool copy_file(const std::string &from, const std::string &to) {
  const int in = open(from.c_str(), O_RDONLY);
  const int out = open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  bool ok = in >= 0 && out >= 0;
  std::vector<char> buf(4 << 20);
  while (ok) {
    const ssize_t n = read(in, buf.data(), buf.size());
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    ok = write(out, buf.data(), (size_t)n) == n;
  }
  if (in >= 0) close(in);
  if (out >= 0 && close(out) != 0) ok = false;
  return ok;
}

// A file's modification time set far in the past: any later write moves it,
// whatever the clock's granularity (as for a model written long before).
void age(const std::string &path) {
  const struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  utimensat(AT_FDCWD, path.c_str(), old, 0);
}

void fill_random(std::vector<char> &b, uint64_t *rng) {
  for (size_t i = 0; i + 8 <= b.size(); i += 8) {
    const uint64_t r = splitmix(rng);
    memcpy(&b[i], &r, 8);
  }
}

char g_last_error[1024];
void keep_error(void *, gb_log_level level, const char *msg) {
  if (level == GB_LOG_ERROR) snprintf(g_last_error, sizeof g_last_error, "%s", msg);
}

// The synthetic model, generated once into the model directory.
std::string prepare_model(const StressOpt &o) {
  std::string name = o.spec;
  for (char &c : name)
    if (!isalnum((unsigned char)c) && c != '-' && c != '.') c = '_';
  const std::string path = o.model_dir + "/filechange-" + name + "-low.gbx";
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.verify = GB_VERIFY_METADATA;
  mo.log = keep_error;
  gb_model *m = nullptr;
  if (gb_model_open_file(path.c_str(), &mo, &m) == GB_OK) {
    gb_model_close(m);
    return path;
  }
  struct statvfs vs;
  if (statvfs(o.model_dir.c_str(), &vs) == 0 && (uint64_t)vs.f_bavail * vs.f_frsize < (3ull << 30)) {
    fprintf(stderr, "stress: less than 3 GiB free in %s (the model and a working copy need ~1.5 GB)\n", o.model_dir.c_str());
    return "";
  }
  gb_convert_options co;
  gb_convert_default_options(&co);
  co.tiers = 1u << GB_GEAR_LOW;
  const std::string tmp = path + ".tmp";
  const double t0 = now_ms();
  const gb_status st = gb_convert_synthetic(o.spec.c_str(), tmp.c_str(), &co);
  if (st != GB_OK || rename(tmp.c_str(), path.c_str()) != 0) {
    fprintf(stderr, "stress: cannot make the model %s: %s\n", path.c_str(), gb_status_str(st));
    remove(tmp.c_str());
    return "";
  }
  printf("stress: made %s (%llu bytes, spec %s, low tier) in %.1f s\n", path.c_str(), (unsigned long long)file_size(path),
         o.spec.c_str(), (now_ms() - t0) / 1e3);
  return path;
}

// ---- the decoding child ----

struct ChildResult {
  int32_t status = -1;         // of the call that ended the run; GB_OK: every step ran
  int32_t steps = 0;           // tokens handed out
  int32_t ran_then_refused = 0;  // the failing step advanced the position: its pass ran, its token was withheld
  int32_t faulted = 0;         // the status said a read of the mapping faulted
  int32_t prefix_ok = 0;       // the tokens handed out equal the untouched run's (as far as it goes)
  int32_t unchecked = 0;       // tokens handed out past the untouched run's length (the change came late)
  int32_t sticky = 0;          // the next step returned the status again
  int32_t verify = -1;         // gb_model_verify afterwards
  int32_t tokenizer_ok = 0;    // tokenize and every token's text answered afterwards
  int32_t reopened_ok = 0;     // the original model opened again decodes the untouched run's first tokens
};

struct Decoder {
  gb_model *m = nullptr;
  gb_session *s = nullptr;
  gb_status open(const std::string &path, int threads, uint32_t n_ctx) {
    gb_model_options mo;
    gb_model_options_init(&mo);
    mo.verify = GB_VERIFY_METADATA;
    mo.log = keep_error;
    gb_status st = gb_model_open_file(path.c_str(), &mo, &m);
    if (st != GB_OK) return st;
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = GB_GEAR_LOW;
    so.sampler.temperature = 0.0f;
    so.n_threads = (uint32_t)threads;
    so.n_ctx = n_ctx;
    so.log = keep_error;
    st = gb_session_create(m, &so, nullptr, 0, &s);
    if (st != GB_OK) return st;
    gb_model_info mi;
    mi.struct_size = sizeof mi;
    gb_model_get_info(m, &mi);
    const int32_t bos = mi.bos_id >= 0 ? mi.bos_id : 1;
    return gb_prefill(s, &bos, 1);
  }
  ~Decoder() {
    gb_session_destroy(s);
    gb_model_close(m);
  }
};

void write_all(int fd, const void *p, size_t n) {
  const char *c = static_cast<const char *>(p);
  while (n > 0) {
    const ssize_t k = write(fd, c, n);
    if (k <= 0 && errno != EINTR) _exit(kSetupFailed);
    if (k > 0) c += k, n -= (size_t)k;
  }
}

// Decode up to max_steps tokens of `path`; 'R' on the pipe after the first.
// With ref (a previous untouched run) the checks of ChildResult.
[[noreturn]] void decode_child(const std::string &path, const std::string &original, int threads, int max_steps,
                               const std::vector<int32_t> *ref, int fd) {
  alarm(600);  // a hang ends as SIGALRM, which the parent counts as a failure
  ChildResult r;
  std::vector<int32_t> toks;
  {
    Decoder d;
    gb_status st = d.open(path, threads, (uint32_t)max_steps + 8);
    if (st != GB_OK) {
      fprintf(stderr, "stress child: cannot open %s: %s (%s)\n", path.c_str(), gb_status_str(st), g_last_error);
      _exit(kSetupFailed);
    }
    for (int i = 0; i < max_steps; i++) {
      uint32_t p0 = 0, p1 = 0;
      gb_session_position(d.s, &p0, nullptr);
      int32_t t = -1;
      st = gb_decode_step(d.s, &t, nullptr);
      if (st != GB_OK) {
        gb_session_position(d.s, &p1, nullptr);
        r.ran_then_refused = p1 > p0;
        break;
      }
      toks.push_back(t);
      if (i == 0) write_all(fd, "R", 1);
    }
    if (toks.empty() && st != GB_OK) write_all(fd, "R", 1);
    r.status = st;
    r.steps = (int32_t)toks.size();
    r.faulted = strstr(g_last_error, "a read of its mapping faulted") != nullptr;
    if (!ref) {  // the untouched run: its tokens are the result
      const int32_t n = r.steps;
      write_all(fd, &r, sizeof r);
      write_all(fd, &n, sizeof n);
      write_all(fd, toks.data(), toks.size() * sizeof(int32_t));
      exit(0);
    }
    const size_t common = std::min(toks.size(), ref->size());
    r.prefix_ok = std::equal(toks.begin(), toks.begin() + common, ref->begin());
    r.unchecked = (int32_t)(toks.size() - common);
    if (st != GB_OK) {
      r.sticky = gb_decode_step(d.s, nullptr, nullptr) == st;
      r.verify = gb_model_verify(d.m);
      // The vocabulary is read in place: whatever it holds now, these answer.
      std::string text;
      for (int k = 0; k < 64; k++) text += "Once upon a time, tok4000 met <0x41> and \xe2\x96\x81 tok31999. ";
      std::vector<int32_t> ids(text.size() + 8);
      size_t n = 0;
      const gb_status ts = gb_tokenize(d.m, text.c_str(), text.size(), GB_TOKENIZE_ADD_BOS, ids.data(), ids.size(), &n);
      gb_model_info mi;
      mi.struct_size = sizeof mi;
      gb_model_get_info(d.m, &mi);
      size_t bytes = 0;
      for (uint32_t id = 0; id < mi.vocab_size; id++) {
        const char *tx;
        size_t len = 0;
        if (gb_token_to_text(d.m, -1, (int32_t)id, &tx, &len) == GB_OK)
          for (size_t k = 0; k < len; k++) bytes += (unsigned char)tx[k];
      }
      r.tokenizer_ok = ts == GB_OK || ts == GB_ERR_BUFFER_TOO_SMALL;
      (void)bytes;
    }
  }
  // The process is unharmed: the original opens and decodes as before.
  if (r.status != GB_OK) {
    Decoder d;
    std::vector<int32_t> again;
    if (d.open(original, threads, 16) == GB_OK)
      for (int i = 0; i < 3; i++) {
        int32_t t = -1;
        if (gb_decode_step(d.s, &t, nullptr) != GB_OK) break;
        again.push_back(t);
      }
    r.reopened_ok = again.size() == 3 && std::equal(again.begin(), again.end(), ref->begin());
  }
  write_all(fd, &r, sizeof r);
  exit(0);
}

// Read exactly n bytes (false on end of file or a timeout).
bool read_all(int fd, void *p, size_t n, int timeout_ms) {
  char *c = static_cast<char *>(p);
  while (n > 0) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, timeout_ms) <= 0) return false;
    const ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

struct Spawned {
  pid_t pid = -1;
  int fd = -1;
};
Spawned spawn_decoder(const std::string &path, const std::string &original, int threads, int max_steps,
                      const std::vector<int32_t> *ref) {
  int p[2];
  Spawned sp;
  if (pipe(p) != 0) return sp;
  fflush(nullptr);  // the child exits through exit(): nothing buffered here may be written twice
  sp.pid = fork();
  if (sp.pid == 0) {
    close(p[0]);
    decode_child(path, original, threads, max_steps, ref, p[1]);
  }
  close(p[1]);
  sp.fd = p[0];
  return sp;
}

// ---- the change, made by this process ----

struct Change {
  std::string what;
  double at_ms = 0, took_ms = 0;  // after the child's first token; how long the change took
};

bool change_file(int kind, int variant, const std::string &path, const std::string &original, const std::string &replacement,
                 uint64_t *rng, Change *c) {
  const uint64_t size = file_size(path);
  const double t0 = now_ms();
  bool ok = true;
  char what[128];
  if (kind == kTruncate) {
    const uint64_t to = variant == 0 ? 0 : variant == 1 ? size / 2 : splitmix(rng) % size;
    ok = truncate(path.c_str(), (off_t)to) == 0;
    snprintf(what, sizeof what, "truncated to %llu", (unsigned long long)to);
  } else if (kind == kRewrite && variant < 2) {
    const int fd = open(path.c_str(), O_WRONLY);
    std::vector<char> buf(4 << 20);
    const uint64_t from = variant == 0 ? 0 : (splitmix(rng) % (size / buf.size())) * buf.size();
    const uint64_t to = variant == 0 ? size : from + buf.size();
    for (uint64_t at = from; ok && at < to; at += buf.size()) {
      fill_random(buf, rng);
      const size_t n = (size_t)std::min<uint64_t>(buf.size(), to - at);
      ok = fd >= 0 && pwrite(fd, buf.data(), n, (off_t)at) == (ssize_t)n;
    }
    if (fd >= 0) close(fd);
    snprintf(what, sizeof what, variant == 0 ? "random bytes over all %llu bytes" : "random bytes at %llu + 4 MiB",
             (unsigned long long)(variant == 0 ? size : from));
  } else if (kind == kRewrite) {
    ok = copy_file(original, path);  // O_TRUNC, then the same bytes again
    snprintf(what, sizeof what, "truncated and written back (cp)");
  } else {
    ok = rename(replacement.c_str(), path.c_str()) == 0;
    snprintf(what, sizeof what, "another file renamed over it");
  }
  c->took_ms = now_ms() - t0;
  c->what = what;
  return ok;
}

// A trial's files: a fresh copy of the model to change (aged), and for
// replace the file renamed over it (1 MiB of random bytes); when the change
// comes, and how many steps the run may take (truncate / rewrite decode
// until the status, with room to spare; replace runs the untouched run's
// steps). delay < 0: the files could not be written.
struct Trial {
  int delay = -1, max_steps = 0;
};
Trial prepare_trial(const StressOpt &o, int kind, const std::string &model, const std::string &work, const std::string &replacement,
                    uint64_t *rng) {
  Trial t;
  splitmix(rng);
  if (!copy_file(model, work)) return fprintf(stderr, "stress: cannot copy the model to %s\n", work.c_str()), t;
  age(work);
  if (kind == kReplace) {
    std::vector<char> junk(1 << 20);
    fill_random(junk, rng);
    FILE *f = fopen(replacement.c_str(), "wb");
    const bool ok = f && fwrite(junk.data(), 1, junk.size(), f) == junk.size();
    if ((f && fclose(f) != 0) || !ok) return fprintf(stderr, "stress: cannot write %s\n", replacement.c_str()), t;
  }
  t.delay = o.delay_lo + (int)(splitmix(rng) % (uint64_t)(o.delay_hi - o.delay_lo + 1));
  t.max_steps = kind == kReplace ? o.steps : 4 * o.steps + 200;
  return t;
}

// ---- the same through `gearbx run` ----

struct CliRun {
  int status = 0;
  std::vector<int32_t> tokens;
  std::string err;
  Change change;
  bool changed = false;
};

// `gearbx run --json` on path; when kind >= 0, the change delay ms after its
// first token's line.
CliRun cli_run(const StressOpt &o, const std::string &path, int threads, int n, int kind, int variant, int delay,
               const std::string &original, const std::string &replacement, uint64_t *rng) {
  CliRun r;
  const std::string err_path = path + ".stderr";
  int p[2];
  if (pipe(p) != 0) return r;
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e >= 0) dup2(e, 2);
    close(p[0]);
    const std::string ns = std::to_string(n), ts = std::to_string(threads);
    execl(o.cli.c_str(), o.cli.c_str(), "run", "-m", path.c_str(), "-n", ns.c_str(), "--gear", "low", "--temp", "0", "--threads",
          ts.c_str(), "--json", "--quiet", (char *)nullptr);
    _exit(127);
  }
  close(p[1]);
  std::string out;
  char buf[4096];
  double t_first = -1;
  for (;;) {
    const ssize_t k = read(p[0], buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    out.append(buf, (size_t)k);
    if (kind >= 0 && t_first < 0 && out.find('\n') != std::string::npos) {
      t_first = now_ms();
      while (now_ms() - t_first < delay) usleep(1000);
      r.change.at_ms = now_ms() - t_first;
      r.changed = change_file(kind, variant, path, original, replacement, rng, &r.change);
    }
  }
  close(p[0]);
  waitpid(pid, &r.status, 0);
  for (size_t at = out.find("\"token\":"); at != std::string::npos; at = out.find("\"token\":", at + 1))
    r.tokens.push_back((int32_t)atoi(out.c_str() + at + 8));
  FILE *f = fopen(err_path.c_str(), "rb");
  if (f) {
    while (size_t k = fread(buf, 1, sizeof buf, f)) r.err.append(buf, k);
    fclose(f);
  }
  remove(err_path.c_str());
  return r;
}

int count_lines_with(const std::string &s, const char *needle) {
  int n = 0;
  size_t at = 0;
  while ((at = s.find(needle, at)) != std::string::npos) n++, at++;
  return n;
}

// Trials through the tool: the one error line and exit status 1, or (replace)
// exit 0 with the untouched run's tokens.
int run_cli_trials(const StressOpt &o, const std::string &model, const std::string &work, const std::string &replacement) {
  int failures = 0;
  for (int threads : o.threads) {
    uint64_t rng0 = o.seed;
    const CliRun ref = cli_run(o, model, threads, o.steps, -1, 0, 0, model, replacement, &rng0);
    if (!WIFEXITED(ref.status) || WEXITSTATUS(ref.status) != 0 || (int)ref.tokens.size() != o.steps) {
      printf("cli: the untouched run at %d threads failed (%s, %zu tokens): %s\n", threads, describe(ref.status).c_str(),
             ref.tokens.size(), ref.err.c_str());
      return 1;
    }
    for (int kind : o.kinds)
      for (int trial = 0; trial < o.cli_trials; trial++) {
        uint64_t rng = o.seed * 7777ull + (uint64_t)(threads * 131 + kind * 17 + trial);
        const Trial t = prepare_trial(o, kind, model, work, replacement, &rng);
        if (t.delay < 0) return 1;
        const CliRun r = cli_run(o, work, threads, t.max_steps, kind, trial % 3, t.delay, model, replacement, &rng);
        const size_t common = std::min(r.tokens.size(), ref.tokens.size());
        const bool prefix = std::equal(r.tokens.begin(), r.tokens.begin() + common, ref.tokens.begin());
        bool ok = r.changed && WIFEXITED(r.status);
        if (ok && kind == kReplace)
          ok = WEXITSTATUS(r.status) == 0 && r.tokens == ref.tokens;
        else if (ok)
          ok = WEXITSTATUS(r.status) == 1 && prefix && count_lines_with(r.err, "\n") == 1 &&
               count_lines_with(r.err, "gearbx run: error: the model file") == 1 && count_lines_with(r.err, "changed while in use") == 1;
        failures += !ok;
        std::string line = r.err.substr(0, r.err.find('\n'));
        printf("cli %-8s %dT #%-2d %-4s %-18s change at %6.0f ms: %-42s %3zu tokens%s%s\n", kKindName[kind], threads, trial, ok ? "ok" : "FAIL",
               describe(r.status).c_str(), r.change.at_ms, r.change.what.c_str(), r.tokens.size(), line.empty() ? "" : ", stderr: ",
               line.c_str());
      }
  }
  return failures;
}

// ---- the run ----

struct Tally {
  int trials = 0, signals = 0, failed = 0, status[4] = {0, 0, 0, 0};  // OK, FILE_CHANGED, other, none
  int in_pass = 0, faulted = 0, prefix_ok = 0, sticky = 0, verify_changed = 0, tokenizer_ok = 0, reopened_ok = 0;
  double at_lo = 1e30, at_hi = 0;
};

int run_stress(int argc, char **argv) {
  StressOpt o;
  bool ci = false;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto list = [](const char *s) {
      std::vector<std::string> out;
      std::string cur;
      for (const char *p = s; ; p++) {
        if (!*p || *p == ',') {
          if (!cur.empty()) out.push_back(cur);
          cur.clear();
          if (!*p) break;
        } else {
          cur += *p;
        }
      }
      return out;
    };
    if (!strcmp(a, "--ci")) { ci = true; continue; }
    if (!v) return fprintf(stderr, "stress: %s needs a value\n", a), 2;
    i++;
    if (!strcmp(a, "--trials")) o.trials = atoi(v);
    else if (!strcmp(a, "--steps")) o.steps = atoi(v);
    else if (!strcmp(a, "--spec")) o.spec = v;
    else if (!strcmp(a, "--model-dir")) o.model_dir = v;
    else if (!strcmp(a, "--seed")) o.seed = strtoull(v, nullptr, 10);
    else if (!strcmp(a, "--json")) o.json = v;
    else if (!strcmp(a, "--cli")) o.cli = v;
    else if (!strcmp(a, "--cli-trials")) o.cli_trials = atoi(v);
    else if (!strcmp(a, "--delay-ms")) {
      if (sscanf(v, "%d-%d", &o.delay_lo, &o.delay_hi) != 2 || o.delay_lo < 0 || o.delay_hi < o.delay_lo)
        return fprintf(stderr, "stress: --delay-ms LO-HI\n"), 2;
    } else if (!strcmp(a, "--threads")) {
      o.threads.clear();
      for (const std::string &t : list(v)) o.threads.push_back(atoi(t.c_str()));
    } else if (!strcmp(a, "--kinds")) {
      o.kinds.clear();
      for (const std::string &k : list(v))
        for (int j = 0; j < kKinds; j++)
          if (k == kKindName[j]) o.kinds.push_back(j);
    } else {
      return fprintf(stderr, "stress: unknown option %s\n", a), 2;
    }
  }
  const char *full = getenv("GEARBX_FILECHANGE_FULL");
  if (ci && !(full && *full && strcmp(full, "0"))) {
    o.trials = 2;
    o.steps = 64;
    o.delay_hi = std::min(o.delay_hi, 600);
  }
  if (o.trials < 1 || o.steps < 2 || o.threads.empty() || o.kinds.empty()) return fprintf(stderr, "stress: nothing to run\n"), 2;
  const double t_start = now_ms();
  const std::string model = prepare_model(o);
  if (model.empty()) return 1;
  const std::string work = model + ".work", replacement = model + ".other";
  const uint64_t size = file_size(model);
  printf("stress: %s, %llu bytes; %d trials per kind and thread count, %d steps, change %d..%d ms after the first token, seed %llu\n",
         model.c_str(), (unsigned long long)size, o.trials, o.steps, o.delay_lo, o.delay_hi, (unsigned long long)o.seed);
  int failures = 0;
  std::vector<Tally> tally(kKinds * o.threads.size());
  FILE *jf = o.json.empty() ? nullptr : fopen(o.json.c_str(), "w");
  if (jf) fprintf(jf, "{\"model\":\"%s\",\"model_bytes\":%llu,\"trials\":[\n", model.c_str(), (unsigned long long)size);
  bool first_json = true;
  for (size_t ti = 0; ti < o.threads.size(); ti++) {
    const int threads = o.threads[ti];
    // The untouched run: the tokens every trial is held to.
    std::vector<int32_t> ref;
    {
      const Spawned sp = spawn_decoder(model, model, threads, o.steps, nullptr);
      char ready;
      ChildResult r;
      int32_t n = 0;
      const double t0 = now_ms();
      bool ok = sp.pid > 0 && read_all(sp.fd, &ready, 1, 600000) && read_all(sp.fd, &r, sizeof r, 600000) &&
                read_all(sp.fd, &n, sizeof n, 10000) && n == o.steps;
      if (ok) {
        ref.resize((size_t)n);
        ok = read_all(sp.fd, ref.data(), ref.size() * sizeof(int32_t), 10000);
      }
      int status = 0;
      if (sp.pid > 0) waitpid(sp.pid, &status, 0);
      close(sp.fd);
      if (!ok || r.status != GB_OK) {
        fprintf(stderr, "stress: the untouched run at %d threads failed (%s)\n", threads, describe(status).c_str());
        return 1;
      }
      printf("stress: untouched run, %d thread%s: %d tokens in %.1f s (%.1f tok/s with open and exit)\n", threads, threads > 1 ? "s" : "",
             n, (now_ms() - t0) / 1e3, n / ((now_ms() - t0) / 1e3));
    }
    for (int kind : o.kinds) {
      Tally &T = tally[ti * kKinds + kind];
      for (int trial = 0; trial < o.trials; trial++) {
        uint64_t rng = o.seed * 1000003ull + (uint64_t)(ti * 7919 + kind * 104729 + trial);
        const int variant = trial % 3;
        const Trial t = prepare_trial(o, kind, model, work, replacement, &rng);
        if (t.delay < 0) return 1;
        const int delay = t.delay;
        const Spawned sp = spawn_decoder(work, model, threads, t.max_steps, &ref);
        char ready = 0;
        Change c;
        bool changed = false;
        if (sp.pid > 0 && read_all(sp.fd, &ready, 1, 600000)) {
          const double t_ready = now_ms();
          while (now_ms() - t_ready < delay) usleep(1000);
          c.at_ms = now_ms() - t_ready;
          changed = change_file(kind, variant, work, model, replacement, &rng, &c);
        }
        ChildResult r;
        const bool got = sp.pid > 0 && read_all(sp.fd, &r, sizeof r, 600000);
        int status = 0;
        if (sp.pid > 0) waitpid(sp.pid, &status, 0);
        close(sp.fd);
        const bool signaled = WIFSIGNALED(status);
        bool ok = changed && got && !signaled && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (ok && kind == kReplace) {
          ok = r.status == GB_OK && r.steps == o.steps && r.prefix_ok;
        } else if (ok) {
          ok = r.status == GB_ERR_FILE_CHANGED && r.prefix_ok && r.sticky && r.verify == GB_ERR_FILE_CHANGED && r.tokenizer_ok &&
               r.reopened_ok;
        }
        T.trials++;
        T.signals += signaled;
        T.failed += !ok;
        T.status[!got ? 3 : r.status == GB_OK ? 0 : r.status == GB_ERR_FILE_CHANGED ? 1 : 2]++;
        if (got) {
          const bool in_pass = r.status != GB_OK && (r.ran_then_refused || r.faulted);
          T.in_pass += in_pass;
          T.faulted += r.faulted;
          T.prefix_ok += r.prefix_ok;
          T.sticky += r.sticky;
          T.verify_changed += r.verify == GB_ERR_FILE_CHANGED;
          T.tokenizer_ok += r.tokenizer_ok;
          T.reopened_ok += r.reopened_ok;
        }
        T.at_lo = std::min(T.at_lo, c.at_ms);
        T.at_hi = std::max(T.at_hi, c.at_ms);
        failures += !ok;
        const char *caught = !got || r.status == GB_OK ? "-" : r.faulted ? "in a pass (faulted read)"
                             : r.ran_then_refused      ? "in a pass (after it)"
                                                       : "before a pass";
        printf("%-8s %dT #%-2d %-4s %-18s change at %6.0f ms (%5.0f ms): %-42s status %-26s after %3d tokens, caught %s%s\n",
               kKindName[kind], threads, trial, ok ? "ok" : "FAIL", describe(status).c_str(), c.at_ms, c.took_ms, c.what.c_str(),
               got ? gb_status_str((gb_status)r.status) : "(no result)", got ? r.steps : -1, caught,
               got && r.unchecked ? " (tokens past the untouched run's not compared)" : "");
        if (jf) {
          fprintf(jf, "%s{\"kind\":\"%s\",\"threads\":%d,\"trial\":%d,\"ok\":%s,\"exit\":\"%s\",\"signal\":%d,\"change\":\"%s\",\"at_ms\":%.1f,"
                      "\"change_ms\":%.1f,\"status\":%d,\"tokens\":%d,\"ran_then_refused\":%d,\"faulted\":%d,\"prefix_ok\":%d,\"sticky\":%d,"
                      "\"unchecked\":%d,\"verify\":%d,\"tokenizer_ok\":%d,\"reopened_ok\":%d}",
                  first_json ? "" : ",\n", kKindName[kind], threads, trial, ok ? "true" : "false", describe(status).c_str(),
                  signaled ? WTERMSIG(status) : 0, c.what.c_str(), c.at_ms, c.took_ms, got ? r.status : -1, got ? r.steps : -1,
                  r.ran_then_refused, r.faulted, r.prefix_ok, r.sticky, r.unchecked, r.verify, r.tokenizer_ok, r.reopened_ok);
          first_json = false;
        }
      }
    }
  }
  remove(work.c_str());
  remove(replacement.c_str());
  int cli_failures = 0;
  if (!o.cli.empty() && o.cli_trials > 0) cli_failures = run_cli_trials(o, model, work, replacement);
  printf("\nstress summary (%s, %llu bytes; %.0f s):\n", model.c_str(), (unsigned long long)size, (now_ms() - t_start) / 1e3);
  printf("  kind     threads trials signals  ok/changed/other/none  caught in a pass (faulted)  prefix ok  sticky  verify  tokenizer  reopened  change at (ms)  failed\n");
  for (size_t ti = 0; ti < o.threads.size(); ti++)
    for (int kind : o.kinds) {
      const Tally &T = tally[ti * kKinds + kind];
      printf("  %-8s %7d %6d %7d  %4d/%d/%d/%d %19d (%d) %17d %7d %7d %10d %9d  %5.0f..%-5.0f %7d\n", kKindName[kind], o.threads[ti], T.trials,
             T.signals, T.status[0], T.status[1], T.status[2], T.status[3], T.in_pass, T.faulted, T.prefix_ok, T.sticky, T.verify_changed,
             T.tokenizer_ok, T.reopened_ok, T.at_lo, T.at_hi, T.failed);
    }
  if (jf) {
    fprintf(jf, "\n],\"failures\":%d,\"cli_failures\":%d}\n", failures, cli_failures);
    fclose(jf);
  }
  printf("stress: %d failed trial%s%s\n", failures + cli_failures, failures + cli_failures == 1 ? "" : "s",
         failures + cli_failures ? "" : ", no signal");
  return failures + cli_failures ? 1 : 0;
}

void usage() {
  fprintf(stderr,
          "usage: gearbx_filechange chain\n"
          "       gearbx_filechange stress [--trials N] [--threads 1,2] [--kinds truncate,rewrite,replace] [--steps N]\n"
          "                                [--delay-ms LO-HI] [--spec SPEC] [--model-dir DIR] [--seed S] [--json FILE]\n"
          "                                [--cli GEARBX --cli-trials N] [--ci]\n");
}

}  // namespace

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "chain")) return run_chain();
  if (argc >= 2 && !strcmp(argv[1], "stress")) return run_stress(argc, argv);
  usage();
  return 2;
}
