// soak.cpp — gearbx_soak: a long run of decode steps over sessions that
// exercise everything that could drift with time.
//
//   gearbx_soak [--steps N] [--model FILE.gbx | --stories5m] [--no-rss-check]
//
// (GB_TEST_SCALE in (0, 1) multiplies N, as it shortens the long tests.)
// Three sessions of one model, created up front in caller memory (each
// arena followed by a guard zone), take turns in stretches of steps:
//   auto   GB_GEAR_AUTO, sampled: the entropy monitor shifts gears (and
//          releases the tiers left behind); a WINDOW KV pool small enough
//          that tokens step down and are evicted;
//   spec   GB_GEAR_SPEC, sampled: speculative rounds, f16 KV;
//   seed   mid tier, two threads (the session's worker pool), a SEED KV pool
//          that requantizes and fills up (GB_ERR_CONTEXT_FULL: a refill).
// Each session is reset and re-prefilled periodically, gets extra prompt
// text mid-generation (re-prefill), and is refilled when its context is full.
// Checked, and printed as a table and one JSON line:
//   - non-finite logits (must be 0), on every step;
//   - heap allocations after the sessions exist (must be 0), counted by
//     tests/alloc_hook.cpp (this program is linked with its --wrap flags);
//   - process RSS (/proc/self/statm) at 1 %, 50 % and 100 % of the run, in
//     all and anonymous (without file pages: the model's tiers are mapped
//     and released as gears shift); the anonymous growth from 50 % to 100 %
//     must stay under kRssSlack (--no-rss-check: reported only, e.g. under
//     valgrind);
//   - each arena's high-water mark: the highest byte of the caller memory
//     the library has written (memory filled with a pattern before
//     creation), never past gb_session_mem_size(), and the guard zone
//     after it untouched;
//   - the KV pool's bytes in use never above its fixed size;
//   - gear shifts, spec rounds with drafts, KV step-downs and evictions
//     (must all be > 0: the run is not vacuous).
// Exit status 0 when every check holds, 1 otherwise, 2 on a setup error.
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "gearbx.h"
#include "gearbx_convert.h"
#include "test_util.h"

namespace {

constexpr size_t kGuard = 4096;           // bytes after each arena, must stay untouched
constexpr uint8_t kFill = 0xA5;           // pattern of fresh caller memory
constexpr uint64_t kRssSlack = 1u << 20;  // anonymous RSS growth allowed from 50 % to 100 % of the run

const char *const kPrompts[] = {
    "Once upon a time, there was a little girl named Lily. She",
    "The cat sat on the mat and looked at the big red ball.",
    "Tom and his dog went to the park. They played all day, and",
    "One day, a bird flew into the garden. It was sad because",
    "x = 3 * (y + 2) / 7; if (x > 1) return sqrt(x);",
};
const char *const kExtra[] = {
    " Then the sun came out and everyone was happy.",
    " But the little boy did not want to share his toy.",
    " \"Can I play too?\" asked the bunny.",
};
constexpr int kNPrompts = sizeof kPrompts / sizeof kPrompts[0];
constexpr int kNExtra = sizeof kExtra / sizeof kExtra[0];
constexpr int kMaxTok = 128;

struct Tokens {
  int32_t ids[kMaxTok];
  size_t n = 0;
};

void quiet(void *, gb_log_level, const char *) {}

// Resident bytes of this process, without allocating (open/read): all of
// them, and the anonymous ones (resident minus file-backed and shared pages:
// what a leak grows, without the model's mapped tiers coming and going).
struct Rss {
  uint64_t total = 0, anon = 0;
};
Rss rss_bytes() {
  Rss r;
  char buf[128];
  const int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return r;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return r;
  buf[n] = 0;
  unsigned long long size = 0, resident = 0, shared = 0;
  if (sscanf(buf, "%llu %llu %llu", &size, &resident, &shared) != 3) return r;
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  r.total = resident * page;
  r.anon = (resident - (shared < resident ? shared : resident)) * page;
  return r;
}

unsigned long long u(uint64_t v) { return v; }  // for %llu

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One session and its schedule.
struct Lane {
  const char *name = "";
  gb_session_options so;
  gb_session_experimental x;  // so.experimental
  uint8_t *mem = nullptr;  // arena + kGuard bytes
  size_t arena = 0;        // gb_session_mem_size()
  gb_session *s = nullptr;
  // schedule (own steps)
  uint64_t stretch = 0, reset_every = 0, extra_every = 0;
  // progress
  uint64_t steps = 0, since_reset = 0, resets = 0, refills = 0, extras = 0;
  int prompt = 0;            // restarts so far: picks the next prompt
  int32_t buf[kMaxTok + 1];  // the prompt being prefilled
  gb_step_info last;
  bool have_last = false;
  uint64_t requantized = 0, evicted = 0;  // totals over resets
  uint64_t kv_used_max = 0, kv_pool = 0;
  uint64_t shifts = 0;
  double secs = 0;  // wall time of its stretches
};

struct Totals {
  uint64_t steps = 0, nonfinite = 0, shifts = 0, spec_rounds = 0, spec_drafted = 0, spec_accepted = 0;
  uint64_t gear_steps[GB_GEAR_COUNT] = {};
  uint64_t errors = 0;
  char first_error[256] = "";
};

void error(Totals &t, const char *lane, const char *what, gb_status st) {
  if (t.errors++ == 0) snprintf(t.first_error, sizeof t.first_error, "%s: %s: %s", lane, what, gb_status_str(st));
}

// Forget the context and start again from the lane's next prompt: one of the
// texts plus a token that changes with every restart (a reset reseeds the
// sampler, so the same prompt would replay the same story).
void restart(Lane &L, Totals &t, const Tokens *prompts, uint32_t vocab) {
  if (L.have_last) {
    L.requantized += L.last.kv_requantized;
    L.evicted += L.last.kv_evicted;
    L.have_last = false;
  }
  gb_status st = gb_session_reset(L.s);
  if (st != GB_OK) return error(t, L.name, "gb_session_reset", st);
  const Tokens &p = prompts[L.prompt % kNPrompts];
  memcpy(L.buf, p.ids, p.n * sizeof(int32_t));
  const uint32_t first = vocab > 512 ? 512 : vocab / 2;  // past the byte tokens of a 512-token vocabulary
  L.buf[p.n] = (int32_t)(first + (uint32_t)L.prompt * 37u % (vocab - first));
  L.prompt++;
  st = gb_prefill(L.s, L.buf, p.n + 1);
  if (st != GB_OK) return error(t, L.name, "gb_prefill after reset", st);
  L.since_reset = 0;
}

// One decode step of the lane, with its periodic reset / extra prompt text.
void step(Lane &L, Totals &t, const Tokens *prompts, const Tokens *extra, uint32_t vocab) {
  if (L.since_reset >= L.reset_every) {
    restart(L, t, prompts, vocab);
    L.resets++;
  } else if (L.since_reset > 0 && L.since_reset % L.extra_every == 0) {
    const Tokens &e = extra[L.extras++ % kNExtra];
    const gb_status st = gb_prefill(L.s, e.ids, e.n);
    if (st == GB_ERR_CONTEXT_FULL) {
      restart(L, t, prompts, vocab);
      L.refills++;
    } else if (st != GB_OK) {
      return error(t, L.name, "gb_prefill (extra text)", st);
    }
  }
  gb_step_info info;
  info.struct_size = sizeof info;
  int32_t tok = -1;
  gb_status st = gb_decode_step(L.s, &tok, &info);
  if (st == GB_ERR_CONTEXT_FULL) {  // context or pool full: start over
    restart(L, t, prompts, vocab);
    L.refills++;
    st = gb_decode_step(L.s, &tok, &info);
  }
  if (st != GB_OK) return error(t, L.name, "gb_decode_step", st);
  if (tok < 0 || (uint32_t)tok >= vocab) return error(t, L.name, "token out of range", GB_ERR_INTERNAL);
  for (uint32_t v = 0; v < vocab; v++) t.nonfinite += !isfinite(info.logits[v]);
  t.nonfinite += !isfinite(info.entropy);
  t.shifts += info.shifted;
  L.shifts += info.shifted;
  if (info.spec_round) {
    t.spec_rounds++;
    t.spec_drafted += info.spec_drafted;
    t.spec_accepted += info.spec_accepted;
  }
  if ((unsigned)info.gear < GB_GEAR_COUNT) t.gear_steps[info.gear]++;
  if (info.kv_bytes_used > L.kv_used_max) L.kv_used_max = info.kv_bytes_used;
  L.kv_pool = info.kv_pool_bytes;
  if (info.kv_bytes_used > info.kv_pool_bytes) error(t, L.name, "KV pool bytes in use above the pool", GB_ERR_INTERNAL);
  L.last = info;
  L.have_last = true;
  L.steps++;
  L.since_reset++;
  t.steps++;
}

// Highest byte of the lane's memory that differs from the fill pattern (+1),
// and how many bytes differ (the arena's bytes written so far).
size_t arena_high_water(const Lane &L) {
  size_t i = L.arena;
  while (i > 0 && L.mem[i - 1] == kFill) i--;
  return i;
}
size_t arena_touched(const Lane &L) {
  size_t n = 0;
  for (size_t i = 0; i < L.arena; i++) n += L.mem[i] != kFill;
  return n;
}
bool guard_intact(const Lane &L) {
  for (size_t i = 0; i < kGuard; i++)
    if (L.mem[L.arena + i] != kFill) return false;
  return true;
}

struct Checkpoint {
  const char *name = "";
  uint64_t at_step = 0;
  double secs = 0;
  Rss rss;
  size_t high_water[3] = {}, touched[3] = {};
  bool guards = true;
  uint64_t allocs = 0;
};

int usage() {
  fprintf(stderr, "usage: gearbx_soak [--steps N] [--model FILE.gbx | --stories5m] [--no-rss-check]\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  uint64_t n_steps = 100000;
  std::string model_path, source = "stories260K";
  bool use_5m = false, rss_check = true;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
      n_steps = strtoull(argv[++i], nullptr, 10);
    } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
      model_path = argv[++i];
      source = model_path;
    } else if (!strcmp(argv[i], "--stories5m")) {
      use_5m = true;
      source = "stories5M";
    } else if (!strcmp(argv[i], "--no-rss-check")) {
      rss_check = false;
    } else {
      return usage();
    }
  }
  // GB_TEST_SCALE (tests/run.sh sets it for the emulated runs) shortens the run.
  const char *scale = getenv("GB_TEST_SCALE");
  if (scale && atof(scale) > 0.0 && atof(scale) < 1.0) n_steps = (uint64_t)((double)n_steps * atof(scale));
  if (n_steps < 100) return usage();

  // The model: a .gbx given, or one of the shared checkpoints converted into
  // a temporary file (removed again at the end).
  std::string tmp_dir;
  if (model_path.empty()) {
    char tmpl[] = "/tmp/gearbx-soak-XXXXXX";
    if (!mkdtemp(tmpl)) return fprintf(stderr, "soak: mkdtemp failed\n"), 2;
    tmp_dir = tmpl;
    model_path = tmp_dir + "/model.gbx";
    const std::string dir = GB_SHARED_DIR "/models/";
    gb_convert_options co;
    gb_convert_default_options(&co);
    co.page_align = 4096;
    co.log = quiet;
    const gb_status st = gb_convert_llama2c((dir + (use_5m ? "stories5M_distilled.bin" : "stories260K.bin")).c_str(),
                                            (dir + "tok512.bin").c_str(), model_path.c_str(), &co);
    if (st != GB_OK) return fprintf(stderr, "soak: converting the model failed: %s\n", gb_status_str(st)), 2;
  }
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.log = quiet;
  gb_model *m = nullptr;
  gb_status st = gb_model_open_file(model_path.c_str(), &mo, &m);
  if (st != GB_OK) return fprintf(stderr, "soak: opening %s failed: %s\n", model_path.c_str(), gb_status_str(st)), 2;
  gb_model_info mi;
  memset(&mi, 0, sizeof mi);
  mi.struct_size = sizeof mi;
  st = gb_model_get_info(m, &mi);
  if (st != GB_OK) return fprintf(stderr, "soak: gb_model_get_info: %s\n", gb_status_str(st)), 2;
  const uint32_t n_ctx = mi.seq_len < 256 ? mi.seq_len : 256;

  static Tokens prompts[kNPrompts], extra[kNExtra];
  for (int i = 0; i < kNPrompts + kNExtra; i++) {
    Tokens &t = i < kNPrompts ? prompts[i] : extra[i - kNPrompts];
    const char *text = i < kNPrompts ? kPrompts[i] : kExtra[i - kNPrompts];
    st = gb_tokenize(m, text, strlen(text), i < kNPrompts ? GB_TOKENIZE_ADD_BOS : 0, t.ids, kMaxTok, &t.n);
    if (st != GB_OK) return fprintf(stderr, "soak: gb_tokenize: %s\n", gb_status_str(st)), 2;
  }

  // The sessions. Stretch lengths and periods shrink for short runs so that
  // every lane still runs, resets and refills.
  const auto sched = [&](uint64_t full, uint64_t div, uint64_t least) {
    const uint64_t v = n_steps / div;
    return v > full ? full : v < least ? least : v;
  };
  Lane lanes[3];
  for (Lane &L : lanes) {
    gb_session_options_init(&L.so);
    gb_session_experimental_init(&L.x);
    L.so.experimental = &L.x;
    L.so.n_ctx = n_ctx;
    L.so.log = quiet;
    L.so.sampler.seed = 1234;
  }
  // spec and seed are only restarted when full (refills); auto also resets.
  Lane &au = lanes[0], &sp = lanes[1], &sd = lanes[2];
  au.name = "auto";
  au.so.gear = GB_GEAR_AUTO;
  au.so.sampler.temperature = 0.7f;
  au.so.sampler.top_p = 0.95f;
  au.x.release_steps = 4;
  // Fixed thresholds in the middle of the story models' entropies (1 to 5
  // bits over 512 tokens), so the monitor shifts often among the three tiers
  // (the default calibration, capped low for a 512-token vocabulary, keeps a
  // sampled story in the high tier).
  au.x.monitor.calibrate = 0;
  au.x.monitor.vocab_ref = mi.vocab_size;
  au.x.monitor.theta_low = 2.0f;
  au.x.monitor.theta_high = 3.2f;
  au.so.kv.policy = GB_KV_WINDOW;
  au.so.kv.beta = 0.08f;
  au.so.kv.evict = 1;
  au.stretch = sched(700, 10, 20), au.reset_every = sched(200, 100, 40), au.extra_every = sched(80, 250, 15);
  sp.name = "spec";
  sp.so.gear = GB_GEAR_SPEC;
  sp.so.sampler.temperature = 0.8f;
  sp.so.spec_k = 6;
  sp.so.kv.policy = GB_KV_F16;
  sp.stretch = sched(200, 30, 10), sp.reset_every = ~0ull, sp.extra_every = sched(100, 200, 15);
  sd.name = "seed";
  sd.so.gear = GB_GEAR_MID;
  sd.so.n_threads = 2;
  sd.so.sampler.temperature = 0.9f;
  sd.so.kv.policy = GB_KV_SEED;
  sd.so.kv.beta = 0.2f;
  sd.stretch = sched(100, 50, 10), sd.reset_every = ~0ull, sd.extra_every = sched(60, 300, 15);
  for (Lane &L : lanes) {
    st = gb_session_mem_size(m, &L.so, &L.arena);
    if (st != GB_OK) return fprintf(stderr, "soak: %s: gb_session_mem_size: %s\n", L.name, gb_status_str(st)), 2;
    if (posix_memalign((void **)&L.mem, 64, L.arena + kGuard) != 0) return fprintf(stderr, "soak: out of memory\n"), 2;
    memset(L.mem, kFill, L.arena + kGuard);
    st = gb_session_create(m, &L.so, L.mem, L.arena, &L.s);
    if (st != GB_OK) return fprintf(stderr, "soak: %s: gb_session_create: %s\n", L.name, gb_status_str(st)), 2;
  }
  printf(
      "gearbx_soak: %s, %llu steps, n_ctx %u; arenas: auto %zu B, spec %zu B, seed %zu B; written at creation: %zu, "
      "%zu, %zu B\n",
      source.c_str(), u(n_steps), n_ctx, au.arena, sp.arena, sd.arena, arena_touched(au), arena_touched(sp),
      arena_touched(sd));
  fflush(stdout);

  // The run. Nothing below allocates (counted from here on).
  Totals t;
  Checkpoint cp[3];
  cp[0].name = "1%", cp[1].name = "50%", cp[2].name = "100%";
  const uint64_t marks[3] = {n_steps / 100 > 0 ? n_steps / 100 : 1, n_steps / 2, n_steps};
  int next_cp = 0;
  const double t0 = now_s();
  gbt::alloc_count_start();
  for (Lane &L : lanes) restart(L, t, prompts, mi.vocab_size);
  uint64_t allocs = 0;
  for (size_t cur = 0; t.steps < n_steps && t.errors == 0; cur = (cur + 1) % 3) {
    Lane &L = lanes[cur];
    const double ts = now_s();
    for (uint64_t k = 0; k < L.stretch && t.steps < n_steps && t.errors == 0; k++) {
      step(L, t, prompts, extra, mi.vocab_size);
      if (next_cp < 3 && t.steps == marks[next_cp]) {
        allocs += gbt::alloc_count_stop();
        Checkpoint &c = cp[next_cp++];
        c.at_step = t.steps;
        c.secs = now_s() - t0;
        c.rss = rss_bytes();
        for (int i = 0; i < 3; i++) {
          c.high_water[i] = arena_high_water(lanes[i]);
          c.touched[i] = arena_touched(lanes[i]);
          c.guards = c.guards && guard_intact(lanes[i]);
        }
        c.allocs = allocs;
        gbt::alloc_count_start();
      }
    }
    L.secs += now_s() - ts;
  }
  allocs += gbt::alloc_count_stop();
  const double secs = now_s() - t0;
  for (Lane &L : lanes)
    if (L.have_last) L.requantized += L.last.kv_requantized, L.evicted += L.last.kv_evicted;

  // Report.
  uint64_t resets = 0, refills = 0, extras = 0, requant = 0, evicted = 0;
  for (const Lane &L : lanes) {
    resets += L.resets, refills += L.refills, extras += L.extras;
    requant += L.requantized, evicted += L.evicted;
  }
  printf("\n%-6s %8s %8s %8s %8s %8s %11s %11s %10s %10s %10s %8s\n", "lane", "steps", "resets", "refills", "extras",
         "shifts", "kv step-dn", "kv evicted", "arena B", "kv max B", "kv pool B", "us/step");
  for (const Lane &L : lanes)
    printf("%-6s %8llu %8llu %8llu %8llu %8llu %11llu %11llu %10zu %10llu %10llu %8.1f\n", L.name, u(L.steps),
           u(L.resets), u(L.refills), u(L.extras), u(L.shifts), u(L.requantized), u(L.evicted), L.arena,
           u(L.kv_used_max), u(L.kv_pool), 1e6 * L.secs / (double)(L.steps ? L.steps : 1));
  printf("\n(arena written: bytes of each arena that differ from the fill pattern; high-water: the highest of them)\n");
  printf("%-5s %9s %8s %9s %9s %24s %24s %24s %7s %7s\n", "at", "step", "s", "RSS KiB", "anon KiB",
         "auto written/high-water", "spec written/high-water", "seed written/high-water", "guards", "allocs");
  for (int i = 0; i < next_cp; i++)
    printf("%-5s %9llu %8.2f %9llu %9llu %13zu/%10zu %13zu/%10zu %13zu/%10zu %7s %7llu\n", cp[i].name, u(cp[i].at_step),
           cp[i].secs, u(cp[i].rss.total >> 10), u(cp[i].rss.anon >> 10), cp[i].touched[0], cp[i].high_water[0],
           cp[i].touched[1], cp[i].high_water[1], cp[i].touched[2], cp[i].high_water[2], cp[i].guards ? "ok" : "HIT",
           u(cp[i].allocs));
  printf(
      "\nsteps %llu in %.2f s (%.1f us/step); gear steps low %llu mid %llu high %llu f32 %llu; shifts %llu; "
      "spec rounds %llu (drafted %llu, accepted %llu); non-finite logits %llu; heap allocations after creation %llu\n",
      u(t.steps), secs, 1e6 * secs / (double)(t.steps ? t.steps : 1), u(t.gear_steps[0]), u(t.gear_steps[1]),
      u(t.gear_steps[2]), u(t.gear_steps[3]), u(t.shifts), u(t.spec_rounds), u(t.spec_drafted), u(t.spec_accepted),
      u(t.nonfinite), u(allocs));

  // The invariants.
  int fails = 0;
  auto check = [&](bool ok, const char *what) {
    if (!ok) printf("FAIL: %s\n", what), fails++;
  };
  if (t.errors) printf("FAIL: %llu errors, first: %s\n", u(t.errors), t.first_error), fails++;
  check(t.steps == n_steps, "the run stopped early");
  check(next_cp == 3, "not every checkpoint was reached");
  check(t.nonfinite == 0, "non-finite logits or entropies");
  check(allocs == 0, "heap allocations after the sessions were created");
  check(t.shifts > 0, "no gear shift (auto lane)");
  check(t.spec_rounds > 0 && t.spec_drafted > 0, "no speculative round with drafts (spec lane)");
  check(requant > 0, "no KV step-down (the pools never filled)");
  check(evicted > 0, "no KV eviction (auto lane)");
  check(resets > 0 && refills > 0 && extras > 0, "no reset, refill or extra prompt text");
  for (int i = 0; i < next_cp; i++) {
    check(cp[i].guards, "a write past an arena (guard zone changed)");
    for (int l = 0; l < 3; l++) check(cp[i].high_water[l] <= lanes[l].arena, "arena high-water mark past the arena");
  }
  const int64_t growth = next_cp == 3 ? (int64_t)cp[2].rss.anon - (int64_t)cp[1].rss.anon : 0;
  if (rss_check) check(growth <= (int64_t)kRssSlack, "anonymous RSS grew from 50 % to 100 % of the run");
  // One JSON line; per-checkpoint figures as arrays over 1 %, 50 %, 100 %.
  printf("{\"soak\":{\"model\":\"%s\",\"steps\":%llu,\"seconds\":%.3f,", source.c_str(), u(t.steps), secs);
  printf("\"rss_bytes\":[%llu,%llu,%llu],\"rss_anon_bytes\":[%llu,%llu,%llu],", u(cp[0].rss.total), u(cp[1].rss.total),
         u(cp[2].rss.total), u(cp[0].rss.anon), u(cp[1].rss.anon), u(cp[2].rss.anon));
  for (int l = 0; l < 3; l++)
    printf(
        "\"%s\":{\"arena_bytes\":%zu,\"arena_written\":[%zu,%zu,%zu],\"arena_high_water\":[%zu,%zu,%zu],"
        "\"kv_pool_bytes\":%llu,\"kv_max_bytes\":%llu},",
        lanes[l].name, lanes[l].arena, cp[0].touched[l], cp[1].touched[l], cp[2].touched[l], cp[0].high_water[l],
        cp[1].high_water[l], cp[2].high_water[l], u(lanes[l].kv_pool), u(lanes[l].kv_used_max));
  printf(
      "\"guards_intact\":%s,\"nonfinite_logits\":%llu,\"allocations\":%llu,\"gear_shifts\":%llu,"
      "\"gear_steps\":[%llu,%llu,%llu,%llu],\"spec_rounds\":%llu,\"spec_drafted\":%llu,\"spec_accepted\":%llu,"
      "\"kv_requantized\":%llu,\"kv_evicted\":%llu,\"resets\":%llu,\"refills\":%llu,\"extra_prefills\":%llu,"
      "\"errors\":%llu,\"ok\":%s}}\n",
      cp[0].guards && cp[1].guards && cp[2].guards ? "true" : "false", u(t.nonfinite), u(allocs), u(t.shifts),
      u(t.gear_steps[0]), u(t.gear_steps[1]), u(t.gear_steps[2]), u(t.gear_steps[3]), u(t.spec_rounds),
      u(t.spec_drafted), u(t.spec_accepted), u(requant), u(evicted), u(resets), u(refills), u(extras), u(t.errors),
      fails ? "false" : "true");

  for (Lane &L : lanes) {
    gb_session_destroy(L.s);
    free(L.mem);
  }
  gb_model_close(m);
  if (!tmp_dir.empty()) {
    unlink(model_path.c_str());
    rmdir(tmp_dir.c_str());
  }
  return fails ? 1 : 0;
}
