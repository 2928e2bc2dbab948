// cmd_perplexity.cpp — `gearbx perplexity`: score a text under a gear
// policy. The text is tokenized with BOS first and cut into windows of --ctx
// tokens (each later window starts again from BOS); every token after a
// window's first is predicted and scored. Reports perplexity, mean NLL in
// nats/token, the token count, the average bits per weight actually read per
// token, the fraction of tokens per gear and the shifts per 100 tokens, and
// the KL divergence of the policy's next-token distribution from the f32
// tier's (a second session run in lockstep on the same tokens; the high tier
// when the file has no f32 tier).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

namespace {
int ppl_usage() {
  fprintf(stderr,
          "usage: gearbx perplexity -m MODEL.gbx -f TEXT [--policy low|mid|high|f32|auto] [--ctx N]\n"
          "                         [--max-tokens N] [--threads N] [--managed all|attn] [--no-kl] [--json FILE]\n"
          "                         [--kv-policy NAME] [--kv-budget BETA | --kv-bytes N] [--kv-window N] [--kv-evict]\n"
          "With a --kv-* option the KL reference is the same gear with an f32 KV cache (else the f32 tier).\n"
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
}  // namespace

int gb_cli_perplexity(int argc, char **argv) {
  const char *C = "perplexity";
  const char *model = nullptr, *text_path = nullptr, *json = nullptr;
  uint32_t ctx = 0, threads = 1;
  uint64_t max_tokens = 0;
  bool want_kl = true;
  gb_session_options so;
  gb_session_options_init(&so);
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (!strcmp(o, "--help")) return ppl_usage(), 0;
    if (!strcmp(o, "--no-kl")) { want_kl = false; continue; }
    const int kr = cli_parse_kv_option(C, o, v, &so.kv);
    if (kr < 0) return 1;
    if (kr == 2) continue;
    if (kr == 1) { i++; continue; }
    if (!v) return cli_error(C, "option %s needs a value", o);
    if (!strcmp(o, "-m")) model = v;
    else if (!strcmp(o, "-f")) text_path = v;
    else if (!strcmp(o, "--policy")) ok = cli_parse_gear(C, v, &so.gear);
    else if (!strcmp(o, "--ctx")) ok = cli_parse_u32(C, o, v, &ctx);
    else if (!strcmp(o, "--max-tokens")) ok = cli_parse_u64(C, o, v, &max_tokens);
    else if (!strcmp(o, "--threads")) ok = cli_parse_u32(C, o, v, &threads);
    else if (!strcmp(o, "--json")) json = v;
    else if (!strcmp(o, "--managed")) {
      if (!strcmp(v, "all")) so.managed = GB_MANAGED_ALL;
      else if (!strcmp(v, "attn") || !strcmp(v, "attention")) so.managed = GB_MANAGED_ATTENTION;
      else return cli_error(C, "--managed must be all or attn, not '%s'", v);
    }
    else return cli_error(C, "unknown option '%s'", o);
    if (!ok) return 1;
    i++;
  }
  if (!model || !text_path) return cli_error(C, "-m MODEL.gbx and -f TEXT are required");
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
  so.n_threads = threads;
  so.sampler.temperature = 0.0f;

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
  if (st == GB_OK && want_kl) {
    gb_session_options ro = so;
    ro.gear = ref_gear;
    if (!kv_mode) ro.managed = GB_MANAGED_ALL;  // every matrix on the reference tier
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
  if (rc == 0 && scored > 0) {
    const double mean = nll / scored, ppl = exp(mean), bpw = weights ? 8.0 * bytes / weights : 0.0;
    const double mkl = kl / scored;
    printf("policy %s: ppl %.4f  nll %.5f nats/token  kl %.6f nats/token (vs %s)  tokens %llu  bits_per_weight %.3f\n",
           gb_gear_name(so.gear), ppl, mean, mkl, gb_gear_name(ref_gear), (unsigned long long)scored, bpw);
    printf("gear fraction: low %.3f mid %.3f high %.3f f32 %.3f   shifts/100 tokens %.2f\n", (double)per_gear[0] / scored,
           (double)per_gear[1] / scored, (double)per_gear[2] / scored, (double)per_gear[3] / scored, 100.0 * shifts / scored);
    if (kv_mode)
      printf("kv %s: pool %llu bytes (beta %.4f of fp16 at ctx %u), %.3f bits/element on average, nll vs f32 cache %+.5f, "
             "evicted %llu\n",
             gb_kv_policy_name(so.kv.policy), (unsigned long long)kv_pool, kv_pool / fp16_kv, ctx, kv_bits / scored,
             ref ? mean - nll_ref / scored : 0.0, (unsigned long long)kv_evicted);
    if (json) {
      FILE *f = fopen(json, "w");
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
                mi.name, gb_gear_name(so.gear), so.managed == GB_MANAGED_ALL ? "all" : "attn", ctx, ppl, mean, mkl,
                kv_mode ? "f32-kv" : gb_gear_name(ref_gear), (unsigned long long)scored, bpw, (double)per_gear[0] / scored,
                (double)per_gear[1] / scored, (double)per_gear[2] / scored, (double)per_gear[3] / scored, 100.0 * shifts / scored,
                gb_kv_policy_name(so.kv.policy), (double)so.kv.beta, (unsigned long long)kv_pool, kv_pool / fp16_kv,
                kv_bits / scored, ref ? nll_ref / scored : 0.0, (unsigned long long)kv_evicted, (unsigned long long)kv_reallocs);
        fclose(f);
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
