// cmd_convert.cpp — `gearbx convert`: llama2.c checkpoints, GGUF files and
// synthetic specs to .gbx, through the converter library (src/convert).
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "gearbx_convert.h"

namespace {

const char kUsage[] =
    "usage: gearbx convert IN.bin --tokenizer TOK.bin -o OUT.gbx | IN.gguf -o OUT.gbx | --synthetic SPEC -o OUT.gbx\n"
    "       [--tiers low,mid,high,f32] [--embd f32|f16] [--page-align N]\n"
    "       [--q4-layout rows16|row] [--quiet]\n"
    "       gearbx convert MODEL.gbx --to-gguf OUT.gguf [--tier low|mid|high|f32|default]\n"
    "  --tiers: default low,mid,high,f32 from float weights; from an already quantized GGUF\n"
    "           only its own formats (copied as they are), as the tier nearest their bits per\n"
    "           weight; naming other tiers rounds its weights again (a warning gives the error)\n"
    "  --q4-layout: rows16 (default) interleaves the blocks of 16 rows of q4 matrices (and of a\n"
    "               GGUF's own q4k / q6k ones), the layout the fastest kernels stream; row keeps\n"
    "               plain row-major rows\n"
    "  --to-gguf: write one tier of a .gbx (default: the file's default tier) as a GGUF with its\n"
    "             tokenizer: f32 as F32, f16 as F16, q8 as Q8_0, q4 as Q4_0, a GGUF's own formats as\n"
    "             themselves, byte for byte\n"
    "  --synthetic: random weights; SPEC = tinyllama-1.1b or dim=,layers=,hidden=,heads=,kv_heads=,\n"
    "               vocab= (and seed=, seq_len=), then optionally q4grid=1 (weights on the q4 grid:\n"
    "               the low tier equals the high tier exactly) and noise=N (N/1000 of a block's q4\n"
    "               step of uniform noise: sets the speculative gear's acceptance)\n";

int err(const char *fmt, const char *arg) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, arg);
  return cli_error("convert", "%s", msg);
}

// "low,mid,high" -> tier bits.
bool parse_tiers(const char *s, uint32_t *out) {
  uint32_t bits = 0;
  const char *p = s;
  while (*p) {
    const char *e = strchr(p, ',');
    const size_t n = e ? (size_t)(e - p) : strlen(p);
    int g = -1;
    for (int i = 0; i < GB_GEAR_COUNT; i++) {
      const char *name = gb_gear_name((gb_gear)i);
      if (strlen(name) == n && strncmp(p, name, n) == 0) g = i;
    }
    if (g < 0) return false;
    bits |= 1u << g;
    p += n;
    if (*p == ',') p++;
  }
  *out = bits;
  return bits != 0;
}

bool is_gguf(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  char m[4] = {0};
  const bool yes = fread(m, 1, 4, f) == 4 && memcmp(m, "GGUF", 4) == 0;
  fclose(f);
  return yes;
}

uint64_t file_size(const char *path) {
  struct stat sb;
  return path && stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

// The library's first error line becomes part of the one-line error the
// command prints; warnings and info pass straight through.
struct LogCapture {
  char first_error[512];
};

void capture_log(void *user, gb_log_level level, const char *msg) {
  LogCapture *c = static_cast<LogCapture *>(user);
  if (level == GB_LOG_ERROR) {
    if (!c->first_error[0]) snprintf(c->first_error, sizeof c->first_error, "%s", msg);
    return;
  }
  fprintf(stderr, "gearbx convert: %s: %s\n", level == GB_LOG_WARN ? "warning" : "info", msg);
}

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

}  // namespace

int gb_cli_convert(int argc, char **argv) {
  const char *in = nullptr, *tok = nullptr, *out = nullptr, *synth = nullptr, *to_gguf = nullptr;
  gb_gear tier = GB_GEAR_DEFAULT;
  bool quiet = false, tiers_given = false;
  gb_convert_options opt;
  gb_convert_default_options(&opt);
  opt.tiers = 0;  // chosen from the source: low, mid, high and f32, or a quantized file's own
  opt.page_align = 65536;
  LogCapture cap;
  cap.first_error[0] = 0;
  opt.log = capture_log;
  opt.log_user = &cap;
  opt.log_level = GB_LOG_WARN;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const bool has_val = i + 1 < argc;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(kUsage, stdout);
      return 0;
    } else if (!strcmp(a, "--tokenizer") || !strcmp(a, "-t")) {
      if (!has_val) return err("%s needs a path", a);
      tok = argv[++i];
    } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (!has_val) return err("%s needs a path", a);
      out = argv[++i];
    } else if (!strcmp(a, "--to-gguf")) {
      if (!has_val) return err("%s needs a path", a);
      to_gguf = argv[++i];
    } else if (!strcmp(a, "--tier")) {
      if (!has_val) return err("%s needs a tier (low, mid, high, f32, default)", a);
      const char *v = argv[++i];
      if (strcmp(v, "default") != 0 && (gb_gear_from_name(v, &tier) != GB_OK || tier >= GB_GEAR_COUNT))
        return err("--tier: '%s' is not low, mid, high, f32 or default", v);
      if (!strcmp(v, "default")) tier = GB_GEAR_DEFAULT;
    } else if (!strcmp(a, "--synthetic")) {
      if (!has_val) return err("%s needs a spec (e.g. tinyllama-1.1b)", a);
      synth = argv[++i];
    } else if (!strcmp(a, "--tiers")) {
      if (!has_val || !parse_tiers(argv[i + 1], &opt.tiers))
        return err("--tiers: '%s' is not a list of low, mid, high, f32", has_val ? argv[i + 1] : "");
      tiers_given = true;
      i++;
    } else if (!strcmp(a, "--embd")) {
      const char *v = has_val ? argv[++i] : "";
      if (!strcmp(v, "f32")) opt.embd = GB_CONVERT_EMBD_F32;
      else if (!strcmp(v, "f16")) opt.embd = GB_CONVERT_EMBD_F16;
      else return err("--embd: '%s' is not f32 or f16", v);
    } else if (!strcmp(a, "--page-align")) {
      if (!has_val || !cli_parse_u32("convert", a, argv[i + 1], &opt.page_align)) return has_val ? 1 : err("%s needs a number", a);
      i++;
      if (opt.page_align < 64 || (opt.page_align & (opt.page_align - 1)) || opt.page_align > (1u << 24))
        return err("--page-align: %s is not a power of two in [64, 16777216]", argv[i]);
    } else if (!strcmp(a, "--q4-layout")) {
      const char *v = has_val ? argv[++i] : "";
      if (!strcmp(v, "rows16")) opt.q4_layout = GB_CONVERT_Q4_ROWS16;
      else if (!strcmp(v, "row")) opt.q4_layout = GB_CONVERT_Q4_ROW_MAJOR;
      else return err("--q4-layout: '%s' is not rows16 or row", v);
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
      quiet = true;
    } else if (a[0] == '-' && a[1] != 0) {
      return err("unknown option '%s' (see gearbx convert --help)", a);
    } else if (!in) {
      in = a;
    } else {
      return err("unexpected argument '%s' (one input file)", a);
    }
  }
  if (to_gguf) {
    if (!in || synth || tok || out) return cli_error("convert", "--to-gguf takes one MODEL.gbx and no -o, --tokenizer or --synthetic");
    if (is_gguf(in)) return err("'%s' is already a GGUF; --to-gguf reads a .gbx", in);
    const gb_status st = gb_convert_to_gguf(in, to_gguf, tier, &opt);
    if (st != GB_OK) {
      char msg[1100];
      snprintf(msg, sizeof msg, "export of '%s' failed: %s%s%s", in, gb_status_str(st), cap.first_error[0] ? ": " : "",
               cap.first_error);
      return cli_error("convert", "%s", msg);
    }
    if (!quiet) fprintf(stderr, "gearbx convert: wrote %s (%llu bytes)\n", to_gguf, (unsigned long long)file_size(to_gguf));
    return 0;
  }
  if (!out) return cli_error("convert", "no output: give -o OUT.gbx (see gearbx convert --help)");
  if (synth && in) return err("give either an input file or --synthetic, not both ('%s')", in);
  if (!synth && !in) return cli_error("convert", "no input: give IN.bin --tokenizer TOK.bin, IN.gguf or --synthetic SPEC");
  if (synth && !tiers_given) opt.tiers = 0x7;  // random weights gain nothing from an f32 tier
  opt.progress = !quiet && (isatty(2) || file_size(in) > (64ull << 20));

  const double t0 = now_s();
  gb_status st;
  const char *kind;
  if (synth) {
    kind = "synthetic";
    st = gb_convert_synthetic(synth, out, &opt);
  } else if (is_gguf(in)) {
    kind = "GGUF";
    if (tok) return err("--tokenizer is for llama2.c checkpoints; '%s' is GGUF (its vocabulary is inside)", in);
    st = gb_convert_gguf(in, out, &opt);
  } else {
    kind = "llama2.c";
    if (!tok) return err("'%s' is not GGUF, so it is read as a llama2.c checkpoint: give --tokenizer TOK.bin", in);
    st = gb_convert_llama2c(in, tok, out, &opt);
  }
  if (st != GB_OK) {
    if (opt.progress) fputc('\n', stderr);  // end a progress line cut short
    char msg[1100];
    snprintf(msg, sizeof msg, "%s conversion of '%s' failed: %s%s%s", kind, synth ? synth : in, gb_status_str(st),
             cap.first_error[0] ? ": " : "", cap.first_error);
    return cli_error("convert", "%s", msg);
  }
  if (!quiet) {
    // The tiers as written (the converter chooses them when none were named).
    char tiers[160] = "";
    gb_model_options mo;
    gb_model_options_init(&mo);
    mo.verify = GB_VERIFY_METADATA;
    gb_model *m = nullptr;
    if (gb_model_open_file(out, &mo, &m) == GB_OK) {
      gb_model_info i;
      i.struct_size = sizeof i;
      gb_model_get_info(m, &i);
      for (int g = 0; g < GB_GEAR_COUNT; g++)
        if (i.gears >> g & 1)
          snprintf(tiers + strlen(tiers), sizeof tiers - strlen(tiers), "%s%s (%s)", tiers[0] ? ", " : "", gb_gear_name((gb_gear)g),
                   i.tier_formats[g]);
      gb_model_close(m);
    }
    fprintf(stderr, "gearbx convert: wrote %s (%llu bytes, tiers %s) in %.1f s\n", out, (unsigned long long)file_size(out), tiers,
            now_s() - t0);
  }
  return 0;
}
