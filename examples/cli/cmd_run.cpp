// cmd_run.cpp — `gearbx run`: generate text, streaming it to stdout. Gear
// routing goes to stderr: a strip of one letter per token (L/M/H/F) and a
// summary; --trace writes every step's telemetry as CSV.
#include <stdlib.h>
#include <string.h>

#include "cli.h"

namespace {
struct RunArgs {
  const char *model = nullptr, *prompt = "", *trace = nullptr;
  uint32_t n = 256, ctx = 0, threads = 1;
  bool quiet = false;
};

int run_usage() {
  fprintf(stderr,
          "usage: gearbx run -m MODEL.gbx [-p PROMPT] [-n TOKENS] [--gear low|mid|high|f32|auto]\n"
          "                  [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--gumbel]\n"
          "                  [--ctx N] [--threads N] [--trace FILE.csv] [--quiet] [--deterministic]\n"
          "  --deterministic  portable generic kernels only: the same tokens on every CPU\n");
  return 1;
}
}  // namespace

int gb_cli_run(int argc, char **argv) {
  const char *C = "run";
  RunArgs a;
  gb_session_options so;
  gb_session_options_init(&so);
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (!strcmp(o, "--help")) return run_usage(), 0;
    if (!strcmp(o, "--quiet")) { a.quiet = true; continue; }
    if (!strcmp(o, "--gumbel")) { so.sampler.method = GB_SAMPLE_GUMBEL; continue; }
    if (!strcmp(o, "--deterministic")) { so.deterministic = 1; continue; }
    if (!v) return cli_error(C, "option %s needs a value", o);
    if (!strcmp(o, "-m")) a.model = v;
    else if (!strcmp(o, "-p")) a.prompt = v;
    else if (!strcmp(o, "-n")) ok = cli_parse_u32(C, o, v, &a.n);
    else if (!strcmp(o, "--gear")) ok = cli_parse_gear(C, v, &so.gear);
    else if (!strcmp(o, "--temp")) ok = cli_parse_f32(C, o, v, &so.sampler.temperature);
    else if (!strcmp(o, "--top-k")) ok = cli_parse_u32(C, o, v, &so.sampler.top_k);
    else if (!strcmp(o, "--top-p")) ok = cli_parse_f32(C, o, v, &so.sampler.top_p);
    else if (!strcmp(o, "--min-p")) ok = cli_parse_f32(C, o, v, &so.sampler.min_p);
    else if (!strcmp(o, "--seed")) ok = cli_parse_u64(C, o, v, &so.sampler.seed);
    else if (!strcmp(o, "--ctx")) ok = cli_parse_u32(C, o, v, &a.ctx);
    else if (!strcmp(o, "--threads")) ok = cli_parse_u32(C, o, v, &a.threads);
    else if (!strcmp(o, "--trace")) a.trace = v;
    else return cli_error(C, "unknown option '%s'", o);
    if (!ok) return 1;
    i++;
  }
  if (!a.model) return cli_error(C, "-m MODEL.gbx is required");
  so.n_ctx = a.ctx;
  so.n_threads = a.threads;

  gb_model *m = cli_open_model(C, a.model);
  if (!m) return 1;
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);
  int rc = 0;
  gb_session *s = nullptr;
  FILE *trace = nullptr;
  const size_t plen = strlen(a.prompt);
  size_t cap = GB_TOKENIZE_CAPACITY(plen), n_prompt = 0;
  int32_t *prompt = static_cast<int32_t *>(malloc(cap * sizeof(int32_t)));
  char *strip = static_cast<char *>(malloc((size_t)a.n + 1));
  gb_status st = prompt && strip ? GB_OK : GB_ERR_OUT_OF_MEMORY;
  if (st == GB_OK) st = gb_tokenize(m, a.prompt, plen, GB_TOKENIZE_ADD_BOS, prompt, cap, &n_prompt);
  if (st == GB_OK) st = gb_session_create(m, &so, nullptr, 0, &s);
  if (st == GB_OK) st = gb_prefill(s, prompt, n_prompt);
  if (st != GB_OK) {
    rc = cli_error(C, "%s", cli_detail(st));
  } else if (a.trace && !(trace = fopen(a.trace, "w"))) {
    rc = cli_error(C, "cannot write trace file '%s'", a.trace);
  }
  if (rc == 0) {
    if (trace) fprintf(trace, "step,pos,token,gear,next_gear,shifted,tokens_in_gear,entropy,entropy_smoothed,weight_bytes,step_us\n");
    // Echo the prompt (after BOS), then stream the generation.
    int32_t prev = prompt[0];
    for (size_t i = 1; i < n_prompt; i++) {
      const char *t;
      size_t l;
      if (gb_token_to_text(m, prev, prompt[i], &t, &l) == GB_OK) fwrite(t, 1, l, stdout);
      prev = prompt[i];
    }
    uint32_t per_gear[GB_GEAR_COUNT] = {0}, shifts = 0, made = 0;
    uint64_t total_ns = 0;
    for (uint32_t step = 0; step < a.n; step++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      int32_t tok;
      st = gb_decode_step(s, &tok, &info);
      if (st == GB_ERR_CONTEXT_FULL) {
        fprintf(stderr, "gearbx run: context full after %u tokens\n", made);
        break;
      }
      if (st != GB_OK) { rc = cli_error(C, "%s", cli_detail(st)); break; }
      per_gear[info.gear]++;
      shifts += info.shifted;
      total_ns += info.step_ns;
      strip[made++] = "LMHF"[info.gear];
      if (trace)
        fprintf(trace, "%u,%u,%d,%s,%s,%u,%u,%.5f,%.5f,%llu,%.1f\n", step, info.pos, tok, cli_gear_name(info.gear),
                cli_gear_name(info.next_gear), info.shifted, info.tokens_in_gear, (double)info.entropy, (double)info.entropy_smoothed,
                (unsigned long long)info.weight_bytes_read, info.step_ns / 1e3);
      if (tok == mi.eos_id || tok == mi.bos_id) break;
      const char *t;
      size_t l;
      if (gb_token_to_text(m, prev, tok, &t, &l) == GB_OK) fwrite(t, 1, l, stdout);
      fflush(stdout);
      prev = tok;
    }
    fputc('\n', stdout);
    strip[made] = 0;
    if (!a.quiet && made > 0) {
      fprintf(stderr, "gears (L=low M=mid H=high F=f32, one letter per token):\n%s\n", strip);
      fprintf(stderr, "policy %s: %u tokens, low %.0f%% mid %.0f%% high %.0f%% f32 %.0f%%, %u shifts, %.1f tok/s\n",
              cli_gear_name(so.gear), made, 100.0 * per_gear[0] / made, 100.0 * per_gear[1] / made, 100.0 * per_gear[2] / made,
              100.0 * per_gear[3] / made, shifts, total_ns ? made / (total_ns / 1e9) : 0.0);
    }
  }
  if (trace) fclose(trace);
  gb_session_destroy(s);
  gb_model_close(m);
  free(prompt);
  free(strip);
  return rc;
}
