// cmd_perplexity.cpp — `gearbx perplexity`, two modes.
//
// -f TEXT: score a text under a gear policy. The text is tokenized with BOS
// first and cut into windows of --ctx tokens (each later window starts again
// from BOS); every token after a window's first is predicted and scored.
// Reports perplexity, mean NLL in nats/token, the token count, the average
// bits per weight actually read per token, the fraction of tokens per gear
// and the shifts per 100 tokens, and the KL divergence of the policy's
// next-token distribution from the f32 tier's (a second session run in
// lockstep on the same tokens; the high tier when the file has no f32 tier).
//
// --ref FILE.ref.json: score exactly the token windows of a reference file
// (the fixtures' schema: `windows`, lists of token ids, position p
// predicting token p + 1; optional `nll_per_window`, `argmax`, `logits_w0`)
// and compare with it: mean NLL against the reference's (weighted by
// positions), top-1 agreement with its argmax, and the largest logit
// difference over the positions of window 0 that logits_w0 holds. No
// tokenizer is involved, so another tool's outputs compare directly.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "cli.h"
#include "json_min.h"

namespace {
int ppl_usage() {
  fprintf(stderr,
          "usage: gearbx perplexity -m MODEL.gbx -f TEXT [--policy GEAR] [--ctx N]\n"
          "                         [--max-tokens N] [--threads N] [--managed all|attn] [--no-kl] [--json [FILE]]\n"
          "                         [--kv-policy NAME] [--kv-budget BETA | --kv-bytes N] [--kv-window N] [--kv-evict]\n"
          "                         [--budget SIZE]  (the session gb_plan chooses for SIZE bytes, e.g. 512M)\n"
          "       gearbx perplexity -m MODEL.gbx --ref FILE.ref.json [--windows N] [--policy GEAR] [--ctx N]\n"
          "                         [--threads N] [--managed all|attn] [--json [FILE]] [--kv-* options]\n"
          "GEAR: low, mid, high, f32, auto, default (the file's default tier; the default).\n"
          "-f: with a --kv-* option the KL reference is the same gear with an f32 KV cache (else the f32 tier).\n"
          "--ref: score the reference file's token windows (all, or the first N) and compare NLL, argmax\n"
          "       and window 0's logits with it. --json without FILE (or with -) prints JSON instead of text.\n"
          CLI_KV_USAGE);
  return 1;
}

double logsumexp(const float *z, uint32_t n) {
  float mx = z[0];
  for (uint32_t i = 1; i < n; i++) mx = z[i] > mx ? z[i] : mx;
  double s = 0.0;
  for (uint32_t i = 0; i < n; i++) s += exp((double)z[i] - mx);
  return (double)mx + log(s);
}

// KL(p || q) in nats for logits zp (reference) and zq.
double kl_of(const float *zp, const float *zq, uint32_t n) {
  const double lp = logsumexp(zp, n), lq = logsumexp(zq, n);
  double kl = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    const double a = (double)zp[i] - lp, b = (double)zq[i] - lq;
    kl += exp(a) * (a - b);
  }
  return kl > 0.0 ? kl : 0.0;
}

double nll_of(const float *logits, uint32_t n, int32_t target) {
  float mx = logits[0];
  for (uint32_t i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
  double s = 0.0;
  for (uint32_t i = 0; i < n; i++) s += exp((double)logits[i] - mx);
  return (double)mx + log(s) - (double)logits[target];
}

// --ref mode ---------------------------------------------------------------

// The parts of a .ref.json the comparison uses, checked against the model.
struct RefFile {
  std::vector<std::vector<int32_t>> windows;   // (n_windows, len_w) token ids
  std::vector<double> nll;                     // (n_windows) mean NLL per window; empty: absent
  std::vector<std::vector<int32_t>> argmax;    // (n_windows, len_w - 1); empty: absent
  std::vector<std::vector<double>> logits_w0;  // (rows, vocab_size), window 0; empty: absent
};

// A token id of the reference: 0 = *out set, 1 = not an integer, 2 = outside
// [0, n_vocab).
int token_of(const gbjson::Json &j, uint32_t n_vocab, int32_t *out) {
  if (j.kind != gbjson::Json::kNumber || j.text.find_first_of(".eE") != std::string::npos) return 1;
  long long v;
  if (!j.integer(&v) || v < 0 || v >= (long long)n_vocab) return 2;
  *out = (int32_t)v;
  return 0;
}

// Reads and checks the windows (the first n_windows; 0 = all) and the
// reference outputs present; false after printing the error.
bool read_ref(const char *C, const char *path, const gbjson::Json &doc, uint32_t n_vocab, uint32_t n_ctx,
              uint32_t n_windows, RefFile *r) {
  using gbjson::Json;
  if (doc.kind != Json::kObject) return cli_error(C, "'%s': expected a JSON object", path), false;
  const Json *win = doc.get("windows");
  if (!win) return cli_error(C, "'%s' has no \"windows\" (lists of token ids)", path), false;
  if (win->kind != Json::kArray || win->items.empty())
    return cli_error(C, "'%s': \"windows\" must be a non-empty list of lists of token ids", path), false;
  const size_t n_win = win->items.size();
  if (n_windows > n_win)
    return cli_error(C, "--windows %u: '%s' has %zu windows", n_windows, path, n_win), false;
  for (size_t w = 0; w < n_win; w++) {
    const Json &tw = win->items[w];
    if (tw.kind != Json::kArray || tw.items.empty())
      return cli_error(C, "'%s': window %zu is not a non-empty list of token ids", path, w), false;
    if (tw.items.size() > n_ctx)
      return cli_error(C, "'%s': window %zu has %zu tokens, more than the context of %u", path, w, tw.items.size(), n_ctx),
             false;
    std::vector<int32_t> ids(tw.items.size());
    for (size_t p = 0; p < ids.size(); p++) {
      const int k = token_of(tw.items[p], n_vocab, &ids[p]);
      if (k == 1) return cli_error(C, "'%s': window %zu, position %zu: not a token id (an integer)", path, w, p), false;
      if (k == 2)
        return cli_error(C, "'%s': window %zu, position %zu: token id %s is outside the model's vocabulary (0..%u)", path, w,
                         p, tw.items[p].text.c_str(), n_vocab - 1),
               false;
    }
    r->windows.push_back(ids);
  }
  if (const Json *nl = doc.get("nll_per_window")) {
    if (nl->kind != Json::kArray || nl->items.size() != n_win)
      return cli_error(C, "'%s': \"nll_per_window\" must be a list of %zu numbers (one per window)", path, n_win), false;
    for (size_t w = 0; w < n_win; w++) {
      double v;
      if (!nl->items[w].finite(&v)) return cli_error(C, "'%s': nll_per_window[%zu] is not a finite number", path, w), false;
      r->nll.push_back(v);
    }
  }
  if (const Json *am = doc.get("argmax")) {
    if (am->kind != Json::kArray || am->items.size() != n_win)
      return cli_error(C, "'%s': \"argmax\" must be a list of %zu lists (one per window)", path, n_win), false;
    for (size_t w = 0; w < n_win; w++) {
      const Json &aw = am->items[w];
      const size_t want = r->windows[w].size() - 1;
      if (aw.kind != Json::kArray || aw.items.size() != want)
        return cli_error(C, "'%s': argmax[%zu] must list %zu token ids (one per scored position)", path, w, want), false;
      std::vector<int32_t> ids(want);
      for (size_t p = 0; p < want; p++)
        if (token_of(aw.items[p], n_vocab, &ids[p]) != 0)
          return cli_error(C, "'%s': argmax[%zu][%zu] is not a token id of the model's vocabulary (0..%u)", path, w, p,
                           n_vocab - 1),
                 false;
      r->argmax.push_back(ids);
    }
  }
  if (const Json *lw = doc.get("logits_w0")) {
    const size_t rows = r->windows[0].size() - 1;
    if (lw->kind != Json::kArray || lw->items.size() > rows)
      return cli_error(C, "'%s': \"logits_w0\" must be a list of at most %zu rows (window 0's positions)", path, rows), false;
    for (size_t p = 0; p < lw->items.size(); p++) {
      const Json &row = lw->items[p];
      if (row.kind != Json::kArray) return cli_error(C, "'%s': logits_w0[%zu] is not a list of logits", path, p), false;
      if (row.items.size() != n_vocab)
        return cli_error(C, "'%s': logits_w0[%zu] has %zu logits but the model's vocabulary has %u (vocabulary size mismatch)",
                         path, p, row.items.size(), n_vocab),
               false;
      std::vector<double> v(n_vocab);
      for (uint32_t j = 0; j < n_vocab; j++)
        if (!row.items[j].finite(&v[j]))
          return cli_error(C, "'%s': logits_w0[%zu][%u] is not a finite number", path, p, j), false;
      r->logits_w0.push_back(v);
    }
  }
  if (n_windows > 0) {  // keep the first n_windows
    r->windows.resize(n_windows);
    if (!r->nll.empty()) r->nll.resize(n_windows);
    if (!r->argmax.empty()) r->argmax.resize(n_windows);
  }
  return true;
}

struct RefScore {
  uint64_t positions = 0, agree = 0;
  double nll = 0.0;       // mean NLL (nats) over every scored position
  double ref_nll = 0.0;   // the reference's: nll_per_window weighted by positions
  double max_diff = 0.0;  // max |logit - logits_w0| over window 0's rows
  size_t diff_rows = 0;   // rows of logits_w0 compared
};

// Each window from an empty cache: position p is fed window[p] and predicts
// window[p + 1].
gb_status score_ref(gb_session *s, const RefFile &ref, RefScore *r) {
  double ref_sum = 0.0;
  for (size_t w = 0; w < ref.windows.size(); w++) {
    const std::vector<int32_t> &t = ref.windows[w];
    gb_status st = gb_session_reset(s);
    if (st != GB_OK) return st;
    for (size_t p = 0; p + 1 < t.size(); p++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      st = gb_feed(s, t[p], &info);
      if (st != GB_OK) return st;
      const float *lg = info.logits;  // (n_vocab)
      r->nll += nll_of(lg, info.n_vocab, t[p + 1]);
      uint32_t best = 0;  // lowest index on ties, as the references
      for (uint32_t j = 1; j < info.n_vocab; j++) best = lg[j] > lg[best] ? j : best;
      if (!ref.argmax.empty()) r->agree += (int32_t)best == ref.argmax[w][p];
      if (w == 0 && p < ref.logits_w0.size()) {
        const std::vector<double> &want = ref.logits_w0[p];
        for (uint32_t j = 0; j < info.n_vocab && j < want.size(); j++) {
          const double d = fabs((double)lg[j] - want[j]);
          r->max_diff = d > r->max_diff ? d : r->max_diff;
        }
        r->diff_rows++;
      }
      r->positions++;
    }
    if (!ref.nll.empty()) ref_sum += ref.nll[w] * (double)(t.size() - 1);
  }
  if (r->positions > 0) {
    r->nll /= (double)r->positions;
    r->ref_nll = ref_sum / (double)r->positions;
  }
  return GB_OK;
}

void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    const unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

// A number, or null when the reference lacks what it compares with.
void json_num(FILE *f, const char *key, bool present, double v, const char *fmt) {
  fprintf(f, ", \"%s\": ", key);
  if (present) fprintf(f, fmt, v);
  else fputs("null", f);
}

// The tiers as "low q4k+q6k 4.87" entries, the file's default marked.
std::string tiers_of(const gb_model_info &mi) {
  std::string s;
  for (int g = 0; g < GB_GEAR_COUNT; g++) {
    if (!(mi.gears >> g & 1)) continue;
    char b[96];
    snprintf(b, sizeof b, "%s%s %s %.2f b/w%s", s.empty() ? "" : ", ", gb_gear_name((gb_gear)g), mi.tier_formats[g],
             (double)mi.tier_bits[g], (gb_gear)g == mi.default_gear ? " (default)" : "");
    s += b;
  }
  return s;
}

// The KV policy a session runs: GB_KV_DEFAULT resolved as gearbx.h says.
gb_kv_policy kv_in_use(const gb_kv_options &kv) {
  if (kv.policy != GB_KV_DEFAULT) return kv.policy;
  return kv.beta > 0.0f || kv.pool_bytes > 0 ? GB_KV_WINDOW : GB_KV_F32;
}

int report_ref(const char *C, const char *ref_path, const char *json, const gb_model_info &mi, const gb_session_options &so,
               const RefFile &ref, const RefScore &r) {
  const gb_gear gear = so.gear == GB_GEAR_DEFAULT ? mi.default_gear : so.gear;
  const bool tier = gear < GB_GEAR_COUNT, has_nll = !ref.nll.empty(), has_arg = !ref.argmax.empty(),
             has_w0 = r.diff_rows > 0;
  const double agreement = r.positions ? (double)r.agree / (double)r.positions : 0.0;
  const bool to_stdout = json && !strcmp(json, "-");
  if (!to_stdout) {
    printf("model %s: tiers %s; gear %s, kv %s\n", mi.name, tiers_of(mi).c_str(), gb_gear_name(gear),
           gb_kv_policy_name(kv_in_use(so.kv)));
    printf("ref %s: %zu window%s, %llu positions: nll %.6f", ref_path, ref.windows.size(), ref.windows.size() == 1 ? "" : "s",
           (unsigned long long)r.positions, r.nll);
    if (has_nll) printf(" (ref %.6f, diff %+.3e)", r.ref_nll, r.nll - r.ref_nll);
    if (has_arg) printf("  top-1 agreement %.2f%%", 100.0 * agreement);
    if (has_w0) printf("  max |logit diff| %.4g (window 0, %zu positions)", r.max_diff, r.diff_rows);
    printf("\n");
  }
  if (!json) return 0;
  FILE *f = to_stdout ? stdout : fopen(json, "w");
  if (!f) return cli_error(C, "cannot write '%s'", json);
  fputs("{\"model\": ", f);
  json_str(f, mi.name);
  fputs(", \"ref\": ", f);
  json_str(f, ref_path);
  fprintf(f, ", \"gear\": \"%s\"", gb_gear_name(gear));
  if (tier) {
    fputs(", \"tier_format\": ", f);
    json_str(f, mi.tier_formats[gear]);
    fprintf(f, ", \"tier_bits\": %.4f", (double)mi.tier_bits[gear]);
  }
  fprintf(f, ", \"kv_policy\": \"%s\", \"windows\": %zu, \"positions\": %llu, \"nll\": %.17g", gb_kv_policy_name(kv_in_use(so.kv)),
          ref.windows.size(), (unsigned long long)r.positions, r.nll);
  json_num(f, "ref_nll", has_nll, r.ref_nll, "%.17g");
  json_num(f, "nll_diff", has_nll, r.nll - r.ref_nll, "%.17g");
  json_num(f, "top1_agreement", has_arg, agreement, "%.9g");
  json_num(f, "max_logit_diff_w0", has_w0, r.max_diff, "%.9g");
  fputs("}\n", f);
  const bool ok = !ferror(f);
  if (!to_stdout && fclose(f) != 0) return cli_error(C, "cannot write '%s'", json);
  return ok ? 0 : cli_error(C, "cannot write '%s'", to_stdout ? "stdout" : json);
}

int perplexity_ref(const char *C, const char *model_path, const char *ref_path, gb_session_options so, uint32_t ctx,
                   uint32_t n_windows, const char *json) {
  size_t len = 0;
  char *bytes = cli_read_file(ref_path, &len);
  if (!bytes) return cli_error(C, "cannot read the reference file '%s'", ref_path);
  const std::string text(bytes, len);
  free(bytes);
  gbjson::Json doc;
  gbjson::JsonReader reader(text);
  if (!reader.parse(&doc)) return cli_error(C, "'%s' is not valid JSON: %s", ref_path, reader.error().c_str());
  gb_model *m = cli_open_model(C, model_path);
  if (!m) return 1;
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);
  so.n_ctx = ctx ? ctx : mi.seq_len;
  RefFile ref;
  int rc = read_ref(C, ref_path, doc, mi.vocab_size, so.n_ctx, n_windows, &ref) ? 0 : 1;
  gb_session *s = nullptr;
  RefScore r;
  if (rc == 0) {
    gb_status st = gb_session_create(m, &so, nullptr, 0, &s);
    if (st == GB_OK) st = score_ref(s, ref, &r);
    if (st != GB_OK) rc = cli_error(C, "%s", cli_detail(st));
    else if (r.positions == 0) rc = cli_error(C, "'%s': no window has a position to score (2 tokens or more)", ref_path);
  }
  if (rc == 0) rc = report_ref(C, ref_path, json, mi, so, ref, r);
  gb_session_destroy(s);
  gb_model_close(m);
  return rc;
}
}  // namespace

int gb_cli_perplexity(int argc, char **argv) {
  const char *C = "perplexity";
  const char *model = nullptr, *text_path = nullptr, *ref_path = nullptr, *json = nullptr;
  uint32_t ctx = 0, threads = 1, n_windows = 0;
  uint64_t max_tokens = 0, budget = 0;
  bool want_kl = true, windows_set = false;
  gb_session_options so;
  gb_session_options_init(&so);
  gb_session_experimental sx;  // --managed
  gb_session_experimental_init(&sx);
  so.experimental = &sx;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (!strcmp(o, "--help")) return ppl_usage(), 0;
    if (!strcmp(o, "--no-kl")) { want_kl = false; continue; }
    // --json [FILE]: without a file (next is an option or nothing) or with
    // "-", the JSON goes to stdout in place of the text summary.
    if (!strcmp(o, "--json") && (!v || (v[0] == '-' && v[1] != 0))) { json = "-"; continue; }
    const int kr = cli_parse_kv_option(C, o, v, &so.kv);
    if (kr < 0) return 1;
    if (kr == 2) continue;
    if (kr == 1) { i++; continue; }
    if (!v) return cli_error(C, "option %s needs a value", o);
    if (!strcmp(o, "-m")) model = v;
    else if (!strcmp(o, "-f")) text_path = v;
    else if (!strcmp(o, "--ref")) ref_path = v;
    else if (!strcmp(o, "--windows")) {
      ok = cli_parse_u32(C, o, v, &n_windows);
      if (ok && n_windows == 0) return cli_error(C, "--windows must be at least 1");
      windows_set = true;
    }
    else if (!strcmp(o, "--policy")) ok = cli_parse_gear(C, v, &so.gear);
    else if (!strcmp(o, "--ctx")) ok = cli_parse_u32(C, o, v, &ctx);
    else if (!strcmp(o, "--max-tokens")) ok = cli_parse_u64(C, o, v, &max_tokens);
    else if (!strcmp(o, "--budget")) ok = cli_parse_bytes(C, o, v, &budget);
    else if (!strcmp(o, "--threads")) ok = cli_parse_u32(C, o, v, &threads);
    else if (!strcmp(o, "--json")) json = v;
    else if (!strcmp(o, "--managed")) {
      if (!strcmp(v, "all")) sx.managed = GB_MANAGED_ALL;
      else if (!strcmp(v, "attn") || !strcmp(v, "attention")) sx.managed = GB_MANAGED_ATTENTION;
      else return cli_error(C, "--managed must be all or attn, not '%s'", v);
    }
    else return cli_error(C, "unknown option '%s'", o);
    if (!ok) return 1;
    i++;
  }
  if (text_path && ref_path) return cli_error(C, "-f and --ref are exclusive: score a text or a reference file's windows");
  if (!model || (!text_path && !ref_path)) return cli_error(C, "-m MODEL.gbx and -f TEXT (or --ref FILE.ref.json) are required");
  so.n_threads = threads;
  if (ref_path) {
    if (max_tokens || !want_kl) return cli_error(C, "--max-tokens and --no-kl apply to -f only (--ref: --windows N)");
    return perplexity_ref(C, model, ref_path, so, ctx, n_windows, json);
  }
  if (windows_set) return cli_error(C, "--windows applies to --ref only (-f: --max-tokens N)");
  size_t text_len = 0;
  char *text = cli_read_file(text_path, &text_len);
  if (!text) return cli_error(C, "cannot read '%s'", text_path);
  gb_model *m = cli_open_model(C, model);
  if (!m) { free(text); return 1; }
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);
  if (ctx == 0) ctx = mi.seq_len;
  if (ctx < 2) { free(text); gb_model_close(m); return cli_error(C, "--ctx must be at least 2"); }
  so.n_ctx = ctx;
  so.sampler.temperature = 0.0f;
  // --budget: score the session gb_plan chooses for that many bytes.
  if (budget && !cli_plan(C, m, budget, ctx, &so, false)) {
    free(text);
    gb_model_close(m);
    return 1;
  }

  const size_t cap = GB_TOKENIZE_CAPACITY(text_len);
  int32_t *toks = static_cast<int32_t *>(malloc(cap * sizeof(int32_t)));
  size_t n_tok = 0;
  gb_session *s = nullptr, *ref = nullptr;
  gb_status st = toks ? gb_tokenize(m, text, text_len, GB_TOKENIZE_ADD_BOS, toks, cap, &n_tok) : GB_ERR_OUT_OF_MEMORY;
  if (st == GB_OK) st = gb_session_create(m, &so, nullptr, 0, &s);
  // The reference of the KL: the f32 tier (else high), same tokens, lockstep;
  // with KV options: the same gear with an f32 KV cache (no budget).
  const bool kv_mode = so.kv.policy != GB_KV_DEFAULT || so.kv.beta > 0.0f || so.kv.pool_bytes > 0;
  const gb_gear ref_gear = kv_mode ? so.gear : (mi.gears >> GB_GEAR_F32 & 1) ? GB_GEAR_F32 : GB_GEAR_HIGH;
  want_kl = want_kl && (kv_mode || so.gear != ref_gear);
  if (want_kl && !kv_mode && !(mi.gears >> ref_gear & 1)) {
    // A file with one quantized tier (a converted Q4_K_M GGUF) has no float
    // tier to compare with: score it without the KL.
    fprintf(stderr, "gearbx perplexity: no KL: the file has no f32 or high tier to compare with\n");
    want_kl = false;
  }
  if (st == GB_OK && want_kl) {
    gb_session_options ro = so;
    gb_session_experimental rx = sx;
    ro.experimental = &rx;
    ro.gear = ref_gear;
    ro.mem_budget = 0;  // the reference is outside the budget
    if (!kv_mode) rx.managed = GB_MANAGED_ALL;  // every matrix on the reference tier
    gb_session_options dflt;
    gb_session_options_init(&dflt);
    ro.kv = dflt.kv;
    st = gb_session_create(m, &ro, nullptr, 0, &ref);
  }
  uint64_t kv_pool = 0;
  if (st == GB_OK) st = gb_kv_pool_size(m, &so, &kv_pool, nullptr);
  const double fp16_kv = 2.0 * mi.n_layers * ctx * mi.n_kv_heads * mi.head_dim * 2.0;
  double kv_bits = 0.0, nll_ref = 0.0;
  uint64_t kv_evicted = 0, kv_reallocs = 0;
  int rc = 0;
  double nll = 0.0, kl = 0.0;
  uint64_t scored = 0, bytes = 0, weights = 0, per_gear[GB_GEAR_COUNT] = {0}, shifts = 0;
  if (st != GB_OK) rc = cli_error(C, "%s", cli_detail(st));
  // Windows: [BOS, t_a, ..., t_b], each scoring its own continuation.
  size_t next = 1;  // first text token not yet scored
  while (rc == 0 && next < n_tok && (max_tokens == 0 || scored < max_tokens)) {
    gb_session_reset(s);
    if (ref) gb_session_reset(ref);
    int32_t prev = toks[0];  // BOS
    const size_t end = next + (ctx - 1) < n_tok ? next + (ctx - 1) : n_tok;
    for (size_t i = next; i < end && (max_tokens == 0 || scored < max_tokens); i++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      st = gb_feed(s, prev, &info);
      if (st != GB_OK) { rc = cli_error(C, "%s", cli_detail(st)); break; }
      nll += nll_of(info.logits, info.n_vocab, toks[i]);
      if (ref) {
        gb_step_info ri;
        ri.struct_size = sizeof ri;
        st = gb_feed(ref, prev, &ri);
        if (st != GB_OK) { rc = cli_error(C, "%s", cli_detail(st)); break; }
        kl += kl_of(ri.logits, info.logits, info.n_vocab);
        nll_ref += nll_of(ri.logits, ri.n_vocab, toks[i]);
      }
      kv_bits += info.kv_bits_per_element;
      kv_evicted = info.kv_evicted > kv_evicted ? info.kv_evicted : kv_evicted;
      kv_reallocs = info.kv_reallocations > kv_reallocs ? info.kv_reallocations : kv_reallocs;
      scored++;
      bytes += info.weight_bytes_read;
      weights += info.weights_read;
      per_gear[info.gear]++;
      shifts += info.shifted;
      prev = toks[i];
    }
    next = end;
  }
  const bool json_stdout = json && !strcmp(json, "-");
  if (rc == 0 && scored > 0) {
    const double mean = nll / scored, ppl = exp(mean), bpw = weights ? 8.0 * bytes / weights : 0.0;
    const double mkl = kl / scored;
    if (!json_stdout) {
      printf("policy %s: ppl %.4f  nll %.5f nats/token  kl %.6f nats/token (vs %s)  tokens %llu  bits_per_weight %.3f\n",
             gb_gear_name(so.gear), ppl, mean, mkl, gb_gear_name(ref_gear), (unsigned long long)scored, bpw);
      printf("gear fraction: low %.3f mid %.3f high %.3f f32 %.3f   shifts/100 tokens %.2f\n", (double)per_gear[0] / scored,
             (double)per_gear[1] / scored, (double)per_gear[2] / scored, (double)per_gear[3] / scored, 100.0 * shifts / scored);
      if (kv_mode)
        printf("kv %s: pool %llu bytes (beta %.4f of fp16 at ctx %u), %.3f bits/element on average, nll vs f32 cache %+.5f, "
               "evicted %llu\n",
               gb_kv_policy_name(so.kv.policy), (unsigned long long)kv_pool, kv_pool / fp16_kv, ctx, kv_bits / scored,
               ref ? mean - nll_ref / scored : 0.0, (unsigned long long)kv_evicted);
    }
    if (json) {
      FILE *f = json_stdout ? stdout : fopen(json, "w");
      if (!f) {
        rc = cli_error(C, "cannot write '%s'", json);
      } else {
        fprintf(f,
                "{\"model\": \"%s\", \"policy\": \"%s\", \"managed\": \"%s\", \"ctx\": %u, \"ppl\": %.6f, \"nll\": %.6f, "
                "\"kl\": %.8f, \"kl_ref\": \"%s\", \"tokens\": %llu, "
                "\"bits_per_weight\": %.4f, \"gear_fraction\": {\"low\": %.4f, \"mid\": %.4f, \"high\": %.4f, \"f32\": %.4f}, "
                "\"shifts_per_100\": %.3f, \"kv_policy\": \"%s\", \"kv_beta\": %.4f, \"kv_pool_bytes\": %llu, "
                "\"kv_pool_beta\": %.5f, \"kv_bits_per_element\": %.4f, \"nll_ref\": %.6f, \"kv_evicted\": %llu, "
                "\"kv_reallocations\": %llu}\n",
                mi.name, gb_gear_name(so.gear), sx.managed == GB_MANAGED_ALL ? "all" : "attn", ctx, ppl, mean, mkl,
                kv_mode ? "f32-kv" : gb_gear_name(ref_gear), (unsigned long long)scored, bpw, (double)per_gear[0] / scored,
                (double)per_gear[1] / scored, (double)per_gear[2] / scored, (double)per_gear[3] / scored, 100.0 * shifts / scored,
                gb_kv_policy_name(so.kv.policy), (double)so.kv.beta, (unsigned long long)kv_pool, kv_pool / fp16_kv,
                kv_bits / scored, ref ? nll_ref / scored : 0.0, (unsigned long long)kv_evicted, (unsigned long long)kv_reallocs);
        if (!json_stdout) fclose(f);
      }
    }
  } else if (rc == 0) {
    rc = cli_error(C, "the text has no token to score");
  }
  gb_session_destroy(s);
  gb_session_destroy(ref);
  gb_model_close(m);
  free(toks);
  free(text);
  return rc;
}
