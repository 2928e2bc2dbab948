// bench_decode.cpp — decode and prefill speed per gear (and for `auto`), per
// thread count, against the machine's read bandwidth and the fp16 (high) gear.
//
// decode:  for each gear, a warm-up run, then --reps runs of --tokens greedy
//          (or sampled: --temp T, --seed S)
//          gb_decode_step() calls from BOS (session reset between runs); the
//          median tokens/s is kept. Weight bytes per token come from
//          gb_step_info, so the table shows the effective weight bandwidth
//          (bytes/token x tokens/s) as a fraction of a streaming-read
//          bandwidth measured in the same run with the same thread count:
//          the best probe is chosen once at the start, then two passes of it
//          run right before and two right after every timed run, and each
//          run is set against the median of its four passes (the column is the
//          median of those shares, with their range: a shared machine's
//          bandwidth moves within seconds, so a probe taken minutes earlier
//          can be far off).
//          For `auto` the gears the monitor actually chose are counted.
// prefill: gb_prefill() of BOS + --prefill random tokens (that many forward
//          passes), warm-up + --reps runs, median tokens/s. On an `auto`
//          session the first prefill also calibrates the monitor, as in use.
//          Three times, by gb_session_experimental.prefill_blas: 1 ("on":
//          OpenBLAS sgemm on panels, or no panels when the library was built
//          without OpenBLAS), 0 ("off": the built-in GEMM on panels) and 3
//          ("none": no panels, every matrix through the multi-position
//          kernels). Quantized and f16 matrices use the multi-position
//          kernels in all three where the CPU has SIMD ones.
// Model: -m/--model FILE, else --synthetic SPEC converted to a temporary
// .gbx (tiers --tiers, default low,mid,high), deleted after opening unless
// --keep. `--synthetic tinyllama-1.1b` is TinyLlama-1.1B's shape with random
// weights (~3.9 GB for low,mid,high: free disk space is checked first).
//   usage: gearbx-bench-decode [-m|--model MODEL.gbx | --synthetic SPEC] [--tiers low,mid,high]
//                              [--gears low,mid,high,f32,auto,spec] [--threads 1,2] [--tokens N]
//                              [--prompt-file TEXT] [--prompt-tokens N]
//                              [--prefill N] [--prefill-batch B] [--reps R] [--quick] [--keep] [--json FILE]
// --prefill-batch sets gb_session_options.prefill_batch (default: the library's).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "convert.h"
#include "gearbx.h"
#include "gearbx_port.h"

namespace {

using gbbench::median;

// Probe passes right before and right after each timed decode run.
constexpr int kAdjacentPasses = 2;

// ---- the prefill modes (gb_session_experimental.prefill_blas) -----------------------
const char *blas_label(int mode) { return mode == 1 ? "on" : mode == 3 ? "none" : "off"; }

struct Row {
  std::string gear, phase, blas = "n/a";
  uint32_t threads = 1;
  double tok_s = 0, bytes_per_tok = 0, bits_per_weight = 0, bw = 0;
  // decode: the share of the adjacent probes' bandwidth each timed run
  // reached (median, min, max) and those probes' median bandwidth
  double pct = 0, pct_lo = 0, pct_hi = 0, bw_adj = 0;
  uint64_t mix[3] = {0, 0, 0};  // auto: decode steps per gear (low, mid, high)
  double vs_high = 0, vs_1t = 0;
  // spec: tokens per verify pass; drafts kept (accepted / drafted); the
  // acceptance rate (accepted / drafts the verifier judged: the drafts after
  // a round's first rejection are never judged); and the weight bits read
  // per generated token per weight of one pass (= bits/weight for the other
  // gears).
  double tokens_per_verify = 0, acceptance = 0, acceptance_rate = 0, bits_per_token = 0;
};

// Bytes of a synthetic model's file, from its spec (preset and key=value
// overrides); 0 if the spec does not parse (the converter will say why).
uint64_t estimate_synthetic_bytes(const std::string &spec, uint32_t tiers) {
  uint64_t dim = 0, layers = 0, hidden = 0, heads = 0, kv = 0, vocab = 0;
  for (const std::string &item : gbbench::split(spec)) {
    if (item == "tinyllama-1.1b") {
      dim = 2048, layers = 22, hidden = 5632, heads = 32, kv = 4, vocab = 32000;
      continue;
    }
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return 0;
    const std::string k = item.substr(0, eq);
    const uint64_t v = strtoull(item.c_str() + eq + 1, nullptr, 10);
    if (k == "dim")
      dim = v;
    else if (k == "layers")
      layers = v;
    else if (k == "hidden")
      hidden = v;
    else if (k == "heads")
      heads = v;
    else if (k == "kv_heads")
      kv = v;
    else if (k == "vocab")
      vocab = v;
  }
  if (!dim || !heads) return 0;
  const uint64_t kv_dim = dim / heads * kv;
  const uint64_t w = layers * (2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden) + vocab * dim;  // + classifier
  const double per_weight[4] = {18.0 / 32, 34.0 / 32, 2.0, 4.0};
  double b = (double)vocab * dim * 2;  // f16 embedding table
  for (int g = 0; g < 4; g++)
    if (tiers >> g & 1) b += per_weight[g] * (double)w;
  return (uint64_t)b;
}

bool parse_tiers(const std::string &s, uint32_t *out) {
  *out = 0;
  for (const std::string &t : gbbench::split(s)) {
    int g = -1;
    for (int i = 0; i < GB_GEAR_COUNT; i++)
      if (t == gb_gear_name((gb_gear)i)) g = i;
    if (g < 0) return false;
    *out |= 1u << g;
  }
  return *out != 0;
}

void print_usage() {
  printf(
      "usage: gearbx-bench-decode [-m|--model MODEL.gbx | --synthetic SPEC] [--tiers low,mid,high]\n"
      "                           [--gears low,mid,high,f32,auto,spec] [--threads 1,2] [--tokens N]\n"
      "                           [--prompt-file TEXT] [--prompt-tokens N] [--spec-k K] [--spec-stop BITS]\n"
      "                           [--spec-adapt 0|1|2] [--temp T] [--seed S]\n"
      "                           [--prefill N] [--prefill-batch B] [--reps R] [--quick] [--keep] [--json FILE]\n"
      "                           [--load map|copy]  (copy: the weights read into memory at open, as\n"
      "                           llama.cpp's --mmap 0; map, the default: read from the mapped file)\n"
      "SPEC: tinyllama-1.1b, or dim=..,layers=..,hidden=..,heads=..,kv_heads=..,vocab=..,seed=..[,seq_len=..];\n"
      "      then optionally q4grid=1 (low tier = high tier exactly), noise=N (per mille of a q4 step)\n");
}

}  // namespace

int main(int argc, char **argv) {
  std::string model, synthetic, json, gear_list = "low,mid,high,f32,auto,spec", tier_list = "low,mid,high", prompt_file;
  int prompt_tokens = 16, spec_k = 0;
  float spec_stop = -1.0f;
  int spec_adapt = -1;
  float temp = 0.0f;
  uint64_t seed = 1;
  int tokens = -1, prefill = -1, reps = -1, prefill_batch = 0;
  bool quick = false, keep = false;
  gb_model_load load = GB_MODEL_LOAD_MAP;
  std::vector<uint32_t> threads = {1, 2};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--quick")) {
      quick = true;
      continue;
    }
    if (!strcmp(o, "--keep")) {
      keep = true;
      continue;
    }
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) return print_usage(), 0;
    const char *v = i + 1 < argc ? argv[++i] : nullptr;
    if (!v) return fprintf(stderr, "option %s needs a value\n", o), 1;
    if (!strcmp(o, "-m") || !strcmp(o, "--model"))
      model = v;
    else if (!strcmp(o, "--synthetic"))
      synthetic = v;
    else if (!strcmp(o, "--load")) {
      if (strcmp(v, "map") && strcmp(v, "copy")) return fprintf(stderr, "--load: map or copy\n"), 1;
      load = strcmp(v, "copy") ? GB_MODEL_LOAD_MAP : GB_MODEL_LOAD_COPY;
    } else if (!strcmp(o, "--tiers"))
      tier_list = v;
    else if (!strcmp(o, "--gears"))
      gear_list = v;
    else if (!strcmp(o, "--tokens"))
      tokens = atoi(v);
    else if (!strcmp(o, "--prefill"))
      prefill = atoi(v);
    else if (!strcmp(o, "--prefill-batch"))
      prefill_batch = atoi(v);
    else if (!strcmp(o, "--reps"))
      reps = atoi(v);
    else if (!strcmp(o, "--json"))
      json = v;
    else if (!strcmp(o, "--prompt-file"))
      prompt_file = v;
    else if (!strcmp(o, "--prompt-tokens"))
      prompt_tokens = atoi(v);
    else if (!strcmp(o, "--spec-k"))
      spec_k = atoi(v);
    else if (!strcmp(o, "--spec-stop"))
      spec_stop = (float)atof(v);
    else if (!strcmp(o, "--spec-adapt"))
      spec_adapt = atoi(v);
    else if (!strcmp(o, "--temp"))
      temp = (float)atof(v);
    else if (!strcmp(o, "--seed"))
      seed = strtoull(v, nullptr, 10);
    else if (!strcmp(o, "--threads")) {
      if (!gbbench::parse_uint_list(v, &threads)) return fprintf(stderr, "--threads: a list like 1,2\n"), 1;
    } else
      return fprintf(stderr, "unknown option %s\n", o), 1;
  }
  if (tokens < 0) tokens = quick ? 16 : 64;
  if (prefill < 0) prefill = quick ? 8 : 32;
  if (reps < 0) reps = quick ? 2 : 5;
  if (tokens < 1 || reps < 1 || prefill < 1) return fprintf(stderr, "--tokens, --prefill and --reps must be >= 1\n"), 1;
  if (!model.empty() && !synthetic.empty()) return fprintf(stderr, "give either --model or --synthetic\n"), 1;
  uint32_t tiers = 0;
  if (!parse_tiers(tier_list, &tiers)) return fprintf(stderr, "--tiers: a list of low, mid, high, f32\n"), 1;
  std::vector<gb_gear> gears;
  for (const std::string &name : gbbench::split(gear_list)) {
    gb_gear g;
    if (gb_gear_from_name(name.c_str(), &g) != GB_OK)
      return fprintf(stderr, "--gears: unknown gear '%s' (low, mid, high, f32, auto, spec)\n", name.c_str()), 1;
    gears.push_back(g);
  }

  // ---- the model -----------------------------------------------------------------
  std::string tmp;
  if (model.empty()) {
    if (synthetic.empty()) synthetic = "dim=512,layers=8,hidden=1376,heads=8,kv_heads=4,vocab=512,seq_len=256,seed=3";
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    tmp = std::string(dir) + "/gearbx-bench-" + std::to_string((long)getpid()) + ".gbx";
    const uint64_t need = estimate_synthetic_bytes(synthetic, tiers);
    struct statvfs sv;
    if (need && statvfs(dir, &sv) == 0) {
      const uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
      if (avail < need + (512ull << 20))
        return fprintf(stderr, "not enough disk in %s for %s: about %.2f GB needed (+0.5 GB margin), %.2f GB free\n", dir,
                       synthetic.c_str(), need * 1e-9, avail * 1e-9),
               1;
    }
    const long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (need && pages > 0 && (uint64_t)pages * (uint64_t)psz < need)
      fprintf(stderr, "warning: the model (%.2f GB) is larger than the free memory (%.2f GB): decode will read from disk\n",
              need * 1e-9, (double)pages * psz * 1e-9);
    fprintf(stderr, "converting --synthetic %s (tiers %s, about %.2f GB) to %s ...\n", synthetic.c_str(), tier_list.c_str(),
            need * 1e-9, tmp.c_str());
    gb::ConvertOptions co;
    co.tiers = tiers;
    const uint64_t t0 = gb_port_now_ns();
    if (gb::convert_synthetic(synthetic.c_str(), tmp.c_str(), co) != GB_OK) {
      remove(tmp.c_str());
      return fprintf(stderr, "cannot build %s\n", synthetic.c_str()), 1;
    }
    fprintf(stderr, "converted in %.1f s\n", (double)(gb_port_now_ns() - t0) * 1e-9);
    model = tmp;
  }
  gb_model *m = nullptr;
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.load = load;
  gb_status st = gb_model_open_file(model.c_str(), &mo, &m);
  if (!tmp.empty()) {
    if (keep)
      fprintf(stderr, "kept %s (pass it with --model next time)\n", tmp.c_str());
    else
      remove(tmp.c_str());  // the mapping stays valid; the space is freed at close
  }
  if (st != GB_OK) return fprintf(stderr, "cannot open %s: %s\n", model.c_str(), gb_status_str(st)), 1;
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);

  const double load0 = gbbench::loadavg();
  std::string llc_src;
  const size_t llc = gbbench::llc_bytes(&llc_src);
  gbbench::ReadProbe probe(std::max(std::min(4 * llc, (size_t)1 << 30), (size_t)256 << 20));
  std::vector<gbbench::Bandwidth> bw;
  for (uint32_t t : threads) bw.push_back(probe.best(t, quick ? 2 : reps));

  // Prefill tokens: BOS, then fixed pseudo-random ids past the specials.
  std::vector<int32_t> prompt(1, mi.bos_id >= 0 ? mi.bos_id : 1);
  uint64_t rs = 7;
  for (int i = 0; i < prefill; i++) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    prompt.push_back((int32_t)(3 + (rs >> 33) % (mi.vocab_size > 3 ? mi.vocab_size - 3 : 1)));
  }
  // Decode prompts: BOS alone, or (--prompt-file) BOS + prompt_tokens tokens
  // of the text, a different slice for each run.
  std::vector<int32_t> text_tokens;
  if (!prompt_file.empty()) {
    FILE *f = fopen(prompt_file.c_str(), "rb");
    if (!f) return fprintf(stderr, "cannot read %s\n", prompt_file.c_str()), 1;
    std::string text(1 << 16, '\0');
    text.resize(fread(&text[0], 1, text.size(), f));
    fclose(f);
    const size_t nl = text.rfind('\n');  // whole lines: no UTF-8 sequence cut in two
    if (nl != std::string::npos) text.resize(nl + 1);
    text_tokens.resize(GB_TOKENIZE_CAPACITY(text.size()));
    size_t n = 0;
    if (gb_tokenize(m, text.data(), text.size(), 0, text_tokens.data(), text_tokens.size(), &n) != GB_OK || prompt_tokens < 1)
      return fprintf(stderr, "cannot tokenize %s\n", prompt_file.c_str()), 1;
    text_tokens.resize(n);
  }
  auto decode_prompt = [&](int run) {
    std::vector<int32_t> p(1, mi.bos_id >= 0 ? mi.bos_id : 1);
    if (!text_tokens.empty()) {
      const size_t at = ((size_t)run * (size_t)prompt_tokens * 7) %
                        (text_tokens.size() > (size_t)prompt_tokens ? text_tokens.size() - prompt_tokens : 1);
      for (int i = 0; i < prompt_tokens && at + i < text_tokens.size(); i++) p.push_back(text_tokens[at + i]);
    }
    return p;
  };
  double w_pass = 0;  // weights of one forward pass, from a plain gear's row
  const std::vector<int> blas_modes = {0, 1, 3};

  std::vector<Row> rows;
  for (size_t ti = 0; ti < threads.size(); ti++)
    for (const gb_gear g : gears) {
      if ((unsigned)g < GB_GEAR_COUNT && !(mi.gears & (1u << g))) continue;
      if (g == GB_GEAR_AUTO && (mi.gears & 7u) != 7u) continue;  // auto routes among low / mid / high
      if (g == GB_GEAR_SPEC && (mi.gears & 5u) != 5u) continue;  // drafts on low, verifies on high
      for (int blas : blas_modes) {
        gb_session_options so;
        gb_session_options_init(&so);
        gb_session_experimental sx;
        gb_session_experimental_init(&sx);
        so.experimental = &sx;
        so.gear = g;
        so.n_threads = threads[ti];
        if (spec_k > 0) so.spec_k = (uint32_t)spec_k;
        if (spec_stop >= 0.0f) sx.spec_stop_entropy = spec_stop;
        if (spec_adapt >= 0) sx.spec_adapt = (uint32_t)spec_adapt;
        const uint32_t want = (uint32_t)std::max(tokens + prompt_tokens + 16, prefill) + 2;
        so.n_ctx = want < mi.seq_len ? want : mi.seq_len;
        so.sampler.temperature = temp;
        so.sampler.seed = seed;
        if (blas >= 0) sx.prefill_blas = (uint32_t)blas;
        if (prefill_batch > 0) so.prefill_batch = (uint32_t)prefill_batch;
        gb_session *s = nullptr;
        if ((st = gb_session_create(m, &so, nullptr, 0, &s)) != GB_OK)
          return fprintf(stderr, "session (%s, %u threads): %s\n", gb_gear_name(g), threads[ti], gb_status_str(st)), 1;
        fprintf(stderr, "\r%-5s %u thread(s) ...", gb_gear_name(g), threads[ti]);

        // decode (once, whatever the BLAS setting: it never uses BLAS)
        if (blas <= 0) {
          Row row;
          row.gear = gb_gear_name(g);
          row.phase = "decode";
          row.threads = threads[ti];
          row.bw = bw[ti].bytes_per_s;
          std::vector<double> rates, shares, adjacent;
          uint64_t rounds = 0, drafted = 0, accepted = 0, judged = 0, made = 0, bytes_all = 0;
          for (int r = 0; r < reps + 1; r++) {  // run 0 warms up
            gb_session_reset(s);
            const std::vector<int32_t> dp = decode_prompt(r);
            gb_prefill(s, dp.data(), dp.size());
            const int steps = std::min(tokens, (int)so.n_ctx - 1 - (int)dp.size());
            uint64_t bytes = 0, weights = 0, mix[3] = {0, 0, 0};
            int done = 0;
            std::vector<double> passes;
            for (int k = 0; r > 0 && k < kAdjacentPasses; k++) passes.push_back(probe.pass(threads[ti], bw[ti].index));
            const uint64_t t0 = gb_port_now_ns();
            for (; done < steps; done++) {
              gb_step_info info;
              info.struct_size = sizeof info;
              if (gb_decode_step(s, nullptr, &info) != GB_OK) break;
              bytes += info.weight_bytes_read;
              weights += info.weights_read;
              if ((unsigned)info.gear < 3) mix[info.gear]++;
              if (r > 0 && info.spec_round) {
                rounds++;
                drafted += info.spec_drafted;
                accepted += info.spec_accepted;
                judged += info.spec_accepted + (info.spec_accepted < info.spec_drafted ? 1 : 0);
              }
            }
            const uint64_t t1 = gb_port_now_ns();
            if (done == 0) return fprintf(stderr, "decode failed (%s)\n", gb_gear_name(g)), 1;
            if (r > 0) {
              for (int k = 0; k < kAdjacentPasses; k++) passes.push_back(probe.pass(threads[ti], bw[ti].index));
              const double bw_run = median(passes);
              rates.push_back(done / ((double)(t1 - t0) * 1e-9));
              if (bw_run > 0) {
                shares.push_back((double)bytes / ((double)(t1 - t0) * 1e-9) / bw_run);
                adjacent.push_back(bw_run);
              }
              for (int k = 0; k < 3; k++) row.mix[k] += mix[k];
              made += done;
              bytes_all += bytes;
            }
            row.bytes_per_tok = (double)bytes / done;
            row.bits_per_weight = weights ? 8.0 * bytes / weights : 0;
            if (g != GB_GEAR_SPEC && weights) w_pass = (double)weights / done;
          }
          row.tok_s = median(rates);
          if (made) row.bytes_per_tok = (double)bytes_all / made;
          if (!shares.empty()) {
            row.pct = median(shares);
            row.pct_lo = *std::min_element(shares.begin(), shares.end());
            row.pct_hi = *std::max_element(shares.begin(), shares.end());
            row.bw_adj = median(adjacent);
          }
          if (g == GB_GEAR_SPEC) {
            row.tokens_per_verify = rounds ? (double)made / rounds : 0;
            row.acceptance = drafted ? (double)accepted / drafted : 0;
            row.acceptance_rate = judged ? (double)accepted / judged : 0;
            row.bits_per_weight = w_pass > 0 ? 8.0 * row.bytes_per_tok / w_pass : 0;
          }
          row.bits_per_token = row.bits_per_weight;
          rows.push_back(row);
        }

        // prefill: prefill forward passes (BOS + prefill tokens, the last left pending)
        {
          Row row;
          row.gear = gb_gear_name(g);
          row.phase = "prefill";
          row.threads = threads[ti];
          row.bw = bw[ti].bytes_per_s;
          if (blas >= 0) row.blas = blas_label(blas);
          std::vector<double> rates;
          for (int r = 0; r < reps + 1; r++) {
            gb_session_reset(s);
            const uint64_t t0 = gb_port_now_ns();
            if ((st = gb_prefill(s, prompt.data(), prompt.size())) != GB_OK)
              return fprintf(stderr, "prefill (%s): %s\n", gb_gear_name(g), gb_status_str(st)), 1;
            const uint64_t t1 = gb_port_now_ns();
            if (r > 0) rates.push_back((double)prefill / ((double)(t1 - t0) * 1e-9));
          }
          row.tok_s = median(rates);
          rows.push_back(row);
        }
        gb_session_destroy(s);
      }
    }
  fprintf(stderr, "\r%40s\r", "");
  for (Row &r : rows)
    for (const Row &o : rows) {
      if (o.phase != r.phase || o.blas != r.blas) continue;
      if (o.gear == "high" && o.threads == r.threads && o.tok_s > 0) r.vs_high = r.tok_s / o.tok_s;
      if (o.gear == r.gear && o.threads == threads[0] && o.tok_s > 0) r.vs_1t = r.tok_s / o.tok_s;
    }

  printf("gearbx-bench-decode%s: model %s: dim %u, layers %u, hidden %u, heads %u/%u kv, vocab %u, %.3f G weights/tier\n",
         quick ? " --quick" : "", mi.name, mi.dim, mi.n_layers, mi.hidden_dim, mi.n_heads, mi.n_kv_heads, mi.vocab_size,
         (double)mi.n_params * 1e-9);
  printf(
      "decode: %d tokens after %s; prefill: %d tokens; %d reps after a warm-up (median); prefill BLAS toggle: %s; weights %s\n",
      tokens, prompt_file.empty() ? "BOS" : "BOS + a slice of the prompt file per run", prefill, reps,
      "gb_session_experimental.prefill_blas", load == GB_MODEL_LOAD_COPY ? "read into memory (--load copy)" : "mapped");
  for (size_t ti = 0; ti < threads.size(); ti++)
    printf("measured streaming read bandwidth, %u thread%s: %.2f GB/s (best probe: %s)\n", threads[ti],
           threads[ti] > 1 ? "s" : "", bw[ti].bytes_per_s * 1e-9, bw[ti].probe.c_str());
  printf("load average (1 min) at start %.2f, at end %.2f on %ld online CPUs\n\n", load0, gbbench::loadavg(),
         sysconf(_SC_NPROCESSORS_ONLN));
  printf(
      "%% read bw: each timed run's weight bytes per second against the median of the probe passes right before and after it "
      "(median of the runs; range; the probes' median GB/s)\n\n");
  printf(
      "| phase | gear | blas | threads | bits/weight | weight MB/token | tokens/s | weight GB/s | %% read bw | range | probe "
      "GB/s | vs high | vs %ut | auto: low/mid/high steps; spec: tokens/verify, drafts kept, acceptance rate |\n",
      threads[0]);
  printf("|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n");
  for (const Row &r : rows) {
    const double gbs = r.bytes_per_tok * r.tok_s;
    char mix[64] = "";
    if (r.gear == "auto" && r.phase == "decode")
      snprintf(mix, sizeof mix, "%llu/%llu/%llu", (unsigned long long)r.mix[0], (unsigned long long)r.mix[1],
               (unsigned long long)r.mix[2]);
    if (r.gear == "spec" && r.phase == "decode")
      snprintf(mix, sizeof mix, "%.2f, %.1f%%, %.1f%%", r.tokens_per_verify, 100.0 * r.acceptance, 100.0 * r.acceptance_rate);
    if (r.phase == "decode")
      printf("| decode | %s | %s | %u | %.2f | %.2f | %.2f | %.2f | %.1f%% | %.1f-%.1f%% | %.2f | %.2fx | %.2fx | %s |\n",
             r.gear.c_str(), r.blas.c_str(), r.threads, r.bits_per_weight, r.bytes_per_tok * 1e-6, r.tok_s, gbs * 1e-9,
             100.0 * r.pct, 100.0 * r.pct_lo, 100.0 * r.pct_hi, r.bw_adj * 1e-9, r.vs_high, r.vs_1t, mix);
    else
      printf("| prefill | %s | %s | %u | | | %.2f | | | | | %.2fx | %.2fx | |\n", r.gear.c_str(), r.blas.c_str(), r.threads,
             r.tok_s, r.vs_high, r.vs_1t);
  }
  if (!json.empty()) {
    FILE *f = fopen(json.c_str(), "w");
    if (!f) return fprintf(stderr, "cannot write %s\n", json.c_str()), 1;
    fprintf(f, "[\n");
    for (size_t i = 0; i < rows.size(); i++) {
      const Row &r = rows[i];
      const double gbs = r.phase == "decode" ? r.bytes_per_tok * r.tok_s : 0.0;
      fprintf(f,
              "  {\"gear\": \"%s\", \"threads\": %u, \"phase\": \"%s\", \"tok_s\": %.4f, \"blas\": \"%s\", \"model\": %s, "
              "\"tokens\": %d, \"reps\": %d, \"bytes_per_token\": %.0f, \"bits_per_weight\": %.4f, \"weight_gbps\": %.4f, "
              "\"pct_bw\": %.3f, \"pct_bw_min\": %.3f, \"pct_bw_max\": %.3f, \"bw_adjacent_gbps\": %.4f, \"bw_gbps\": %.4f, "
              "\"vs_high\": %.4f, \"vs_threads_%u\": %.4f, \"auto_steps\": [%llu, %llu, %llu], "
              "\"tokens_per_verify\": %.4f, \"acceptance\": %.4f, \"acceptance_rate\": %.4f, \"bits_per_token\": %.4f, "
              "\"quick\": %s}%s\n",
              r.gear.c_str(), r.threads, r.phase.c_str(), r.tok_s, r.blas.c_str(), gbbench::json_str(mi.name).c_str(),
              r.phase == "decode" ? tokens : prefill, reps, r.phase == "decode" ? r.bytes_per_tok : 0.0, r.bits_per_weight,
              gbs * 1e-9, 100.0 * r.pct, 100.0 * r.pct_lo, 100.0 * r.pct_hi, r.bw_adj * 1e-9, r.bw * 1e-9, r.vs_high, threads[0],
              r.vs_1t, (unsigned long long)r.mix[0], (unsigned long long)r.mix[1], (unsigned long long)r.mix[2],
              r.tokens_per_verify, r.acceptance, r.acceptance_rate, r.phase == "decode" ? r.bits_per_token : 0.0,
              quick ? "true" : "false", i + 1 < rows.size() ? "," : "");
    }
    fprintf(f, "]\n");
    fclose(f);
  }
  gb_model_close(m);
  return 0;
}
