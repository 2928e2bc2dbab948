// cmd_plan.cpp — `gearbx plan -m MODEL --budget SIZE [--ctx N] [--threads N]`:
// the configuration gb_plan() chooses for a byte budget, with its byte
// breakdown and what it gave up (gearbx run --budget SIZE runs it).
#include <string.h>

#include "cli.h"

int gb_cli_plan(int argc, char **argv) {
  const char *C = "plan", *model = nullptr;
  uint64_t budget = 0;
  uint32_t ctx = 0, threads = 1;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      puts("usage: gearbx plan -m MODEL.gbx --budget SIZE [--ctx N] [--threads N]\n"
           "  the best session for SIZE bytes (arena + resident weights; 512M, 1G, ...) and a context of\n"
           "  N tokens (default: the model's), in gb_plan's preference order; gearbx run --budget uses it");
      return 0;
    }
    if (!v) return cli_error(C, "option %s needs a value", o);
    bool ok = true;
    if (!strcmp(o, "-m")) model = v;
    else if (!strcmp(o, "--budget")) ok = cli_parse_bytes(C, o, v, &budget);
    else if (!strcmp(o, "--ctx")) ok = cli_parse_u32(C, o, v, &ctx);
    else if (!strcmp(o, "--threads")) ok = cli_parse_u32(C, o, v, &threads);
    else return cli_error(C, "unknown option '%s'", o);
    if (!ok) return 1;
    i++;
  }
  if (!model) return cli_error(C, "-m MODEL.gbx is required");
  if (!budget) return cli_error(C, "--budget SIZE is required (e.g. 512M)");
  gb_model *m = cli_open_model(C, model);
  if (!m) return 1;
  gb_session_options so;
  gb_session_options_init(&so);
  so.n_threads = threads;
  so.log = cli_log;
  gb_plan_report r;
  r.struct_size = sizeof r;
  const gb_status st = gb_plan(m, budget, ctx, &so, &r);
  gb_model_close(m);
  if (st != GB_OK) return cli_error(C, "%s", cli_detail(st));
  cli_print_plan(stdout, r);
  return 0;
}
