// bench_grammar.cpp — what constrained decoding costs: for a model and a
// grammar (GBNF, a JSON Schema converted by gb_grammar_from_json_schema, or
// tool definitions: the prompt rendered with them by a chat template and the
// grammar of their calls, gb_grammar_from_tools), sampled generations with and without the grammar, interleaved, at one
// thread count. Reports per token the decode step's time without a grammar,
// the time the grammar's token mask took (gb_step_info.grammar_ns), its
// share of the step, the tokens the mask allowed, how many generations
// ended as complete strings of the grammar, and how many of the
// unconstrained ones (the same prompt and seeds) happen to be strings of
// it. Prints a table and, with --json FILE, one JSON row per
// configuration. Timings are medians over every step of every repetition.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "bench_common.h"
#include "gearbx.h"

namespace {

int usage() {
  fprintf(stderr,
          "usage: gearbx-bench-grammar -m MODEL (--grammar FILE | --json-schema FILE | --tools FILE --template NAME)\n"
          "                            [--prompt TEXT]\n"
          "                            [--tokens N] [--reps R] [--threads T] [--temp T] [--load map|copy]\n"
          "                            [--seed S] [--json FILE]\n"
          "  --tools F    the prompt is a user message rendered with these tool definitions by the chat template\n"
          "               NAME; the grammar: one or more calls of them (gb_grammar_from_tools, choice required)\n"
          "  --tokens N   most tokens per generation (default 64)\n"
          "  --reps R     generations with and without the grammar, seeds S, S+1, ... (default 5, S 1000)\n");
  return 1;
}

std::string read_text(const char *path) {
  std::string s;
  FILE *f = fopen(path, "rb");
  if (!f) return s;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  fclose(f);
  return s;
}

struct Gen {
  std::vector<double> step_us, mask_us, allowed;
  std::string text;
  bool eog = false;
};

// One generation of up to n tokens from the prompt with this seed.
bool generate(gb_model *m, gb_grammar *g, const std::vector<int32_t> &prompt, uint32_t n, uint64_t seed, uint32_t threads,
              float temp, Gen *out) {
  gb_session_options so;
  gb_session_options_init(&so);
  so.grammar = g;
  so.n_threads = threads;
  so.sampler.temperature = temp;
  so.sampler.seed = seed;
  so.n_ctx = (uint32_t)prompt.size() + n + 8;
  gb_session *s = nullptr;
  if (gb_session_create(m, &so, nullptr, 0, &s) != GB_OK) return false;
  if (gb_prefill(s, prompt.data(), prompt.size()) != GB_OK) return false;
  int32_t prev = -1;
  for (uint32_t i = 0; i < n; i++) {
    gb_step_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    int32_t t;
    if (gb_decode_step(s, &t, &info) != GB_OK) break;
    out->step_us.push_back((double)info.step_ns / 1e3);
    if (g) {
      out->mask_us.push_back((double)info.grammar_ns / 1e3);
      out->allowed.push_back((double)info.grammar_allowed);
    }
    if (info.end == GB_STEP_END_EOG) {
      out->eog = true;
      break;
    }
    const char *p;
    size_t len;
    if (gb_token_to_text(m, prev, t, &p, &len) == GB_OK) out->text.append(p, len);
    prev = t;
  }
  gb_session_destroy(s);
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  const char *model = nullptr, *gpath = nullptr, *spath = nullptr, *json = nullptr, *tpath = nullptr, *tname = nullptr;
  std::string prompt = "Write a JSON object describing a person:";
  uint32_t tokens = 64, reps = 5, threads = 1;
  uint64_t seed0 = 1000;
  float temp = 1.0f;
  gb_model_load load = GB_MODEL_LOAD_COPY;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) return usage();
    if (!strcmp(o, "-m")) model = v;
    else if (!strcmp(o, "--grammar")) gpath = v;
    else if (!strcmp(o, "--json-schema")) spath = v;
    else if (!strcmp(o, "--tools")) tpath = v;
    else if (!strcmp(o, "--template")) tname = v;
    else if (!strcmp(o, "--prompt")) prompt = v;
    else if (!strcmp(o, "--tokens")) tokens = (uint32_t)atoi(v);
    else if (!strcmp(o, "--reps")) reps = (uint32_t)atoi(v);
    else if (!strcmp(o, "--threads")) threads = (uint32_t)atoi(v);
    else if (!strcmp(o, "--temp")) temp = (float)atof(v);
    else if (!strcmp(o, "--seed")) seed0 = strtoull(v, nullptr, 10);
    else if (!strcmp(o, "--json")) json = v;
    else if (!strcmp(o, "--load")) load = strcmp(v, "map") ? GB_MODEL_LOAD_COPY : GB_MODEL_LOAD_MAP;
    else return usage();
    i++;
  }
  if (!model || (!!gpath + !!spath + !!tpath) != 1 || (tpath && !tname) || tokens == 0 || reps == 0) return usage();
  const char *path = gpath ? gpath : spath ? spath : tpath;
  std::string text = read_text(path);
  if (text.empty()) return fprintf(stderr, "cannot read %s\n", path), 1;
  // --tools: the prompt is a user message rendered with the tools by the
  // template; the grammar makes every reply calls of the tools.
  gb_chat_template tmpl = GB_CHAT_TEMPLATE_NONE;
  uint32_t tokenize_flags = GB_TOKENIZE_ADD_BOS;
  if (tpath) {
    if (gb_chat_template_from_name(tname, &tmpl) != GB_OK) return fprintf(stderr, "unknown template %s\n", tname), 1;
    gb_chat_options co;
    gb_chat_options_init(&co);
    co.tools = text.data();
    co.tools_len = text.size();
    const gb_chat_message msg = {"user", prompt.c_str()};
    size_t need = 0;
    if (gb_chat_apply_ex(tmpl, &msg, 1, &co, nullptr, 0, &need) != GB_ERR_BUFFER_TOO_SMALL) return 1;
    std::string rendered(need, '\0');
    if (gb_chat_apply_ex(tmpl, &msg, 1, &co, &rendered[0], need, &need) != GB_OK) return 1;
    rendered.resize(need);
    prompt = rendered;
    tokenize_flags = GB_TOKENIZE_PARSE_SPECIAL;
    const uint32_t max_calls = tmpl == GB_CHAT_TEMPLATE_LLAMA31 ? 1 : 4;
    if (gb_grammar_from_tools(tmpl, text.data(), text.size(), GB_TOOL_CHOICE_REQUIRED, max_calls, nullptr, 0, &need) !=
        GB_ERR_BUFFER_TOO_SMALL)
      return 1;
    std::string g(need, '\0');
    if (gb_grammar_from_tools(tmpl, text.data(), text.size(), GB_TOOL_CHOICE_REQUIRED, max_calls, &g[0], need, &need) !=
        GB_OK)
      return 1;
    g.resize(need);
    text = g;
  }
  if (spath) {
    size_t need = 0;
    if (gb_grammar_from_json_schema(text.data(), text.size(), nullptr, 0, &need) != GB_ERR_BUFFER_TOO_SMALL) return 1;
    std::string g(need, '\0');
    size_t len = 0;
    if (gb_grammar_from_json_schema(text.data(), text.size(), &g[0], need, &len) != GB_OK) return 1;
    g.resize(len);
    text = g;
  }
  gb_grammar *g = nullptr;
  if (gb_grammar_create(text.data(), text.size(), nullptr, nullptr, 0, &g) != GB_OK) return 1;
  gb_model_options mo;
  gb_model_options_init(&mo);
  mo.load = load;
  gb_model *m = nullptr;
  if (gb_model_open_file(model, &mo, &m) != GB_OK) return 1;
  std::vector<int32_t> ids(GB_TOKENIZE_CAPACITY(prompt.size()) + 4);
  size_t n_ids = 0;
  if (gb_tokenize(m, prompt.data(), prompt.size(), tokenize_flags, ids.data(), ids.size(), &n_ids) != GB_OK) return 1;
  ids.resize(n_ids);
  gb_model_info mi;
  memset(&mi, 0, sizeof mi);
  mi.struct_size = sizeof mi;
  gb_model_get_info(m, &mi);

  // Interleaved: each seed without, then with the grammar.
  std::vector<double> free_us, gram_us, mask_us, allowed;
  uint32_t complete = 0, free_complete = 0, at_limit = 0, invalid = 0;
  for (uint32_t r = 0; r < reps; r++) {
    Gen a, b;
    if (!generate(m, nullptr, ids, tokens, seed0 + r, threads, temp, &a)) return fprintf(stderr, "generation failed\n"), 1;
    if (!generate(m, g, ids, tokens, seed0 + r, threads, temp, &b)) return fprintf(stderr, "generation failed\n"), 1;
    free_us.insert(free_us.end(), a.step_us.begin(), a.step_us.end());
    gram_us.insert(gram_us.end(), b.step_us.begin(), b.step_us.end());
    mask_us.insert(mask_us.end(), b.mask_us.begin(), b.mask_us.end());
    allowed.insert(allowed.end(), b.allowed.begin(), b.allowed.end());
    gb_grammar_match_result res;
    // Constrained: complete when it ended; otherwise the token limit cut a
    // valid prefix. Anything else would be a bug.
    if (gb_grammar_match(g, b.text.data(), b.text.size(), &res) != GB_OK) res = GB_GRAMMAR_MATCH_NONE;
    // With tools, a complete reply must also parse into at least one call.
    size_t n_calls = 0, content = 0;
    const bool calls_ok = !tpath || (gb_tool_calls_parse(tmpl, b.text.data(), b.text.size(), nullptr, 0, &n_calls,
                                                         &content) == GB_ERR_BUFFER_TOO_SMALL &&
                                     content == 0);
    if (b.eog && res == GB_GRAMMAR_MATCH_COMPLETE && calls_ok) complete++;
    else if (!b.eog && res != GB_GRAMMAR_MATCH_NONE) at_limit++;
    else invalid++;
    if (gb_grammar_match(g, a.text.data(), a.text.size(), &res) == GB_OK && res == GB_GRAMMAR_MATCH_COMPLETE) free_complete++;
  }
  const double step = gbbench::median(free_us), gstep = gbbench::median(gram_us), mask = gbbench::median(mask_us);
  double mask_mean = 0, allowed_mean = 0;
  for (double x : mask_us) mask_mean += x;
  for (double x : allowed) allowed_mean += x;
  mask_mean /= mask_us.empty() ? 1 : (double)mask_us.size();
  allowed_mean /= allowed.empty() ? 1 : (double)allowed.size();
  printf("model %s (vocab %u), grammar %s, %u threads, %u generations of up to %u tokens each way, T = %.2f\n\n", model,
         mi.vocab_size, gpath ? gpath : spath, threads, reps, tokens, (double)temp);
  printf("| step us (free) | step us (grammar) | mask us median | mask us mean | mask / step | allowed tokens (mean) | complete | cut at the limit | invalid | free complete |\n");
  printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  printf("| %.0f | %.0f | %.1f | %.1f | %.2f %% | %.0f | %u / %u | %u | %u | %u / %u |\n", step, gstep, mask, mask_mean,
         100.0 * mask / step, allowed_mean, complete, reps, at_limit, invalid, free_complete, reps);
  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) return 1;
    fprintf(f,
            "[{\"model\": %s, \"vocab\": %u, \"grammar\": %s, \"threads\": %u, \"tokens\": %u, \"reps\": %u, "
            "\"step_us\": %.1f, \"step_grammar_us\": %.1f, \"mask_us\": %.2f, \"mask_mean_us\": %.2f, \"mask_share\": %.5f, "
            "\"allowed_mean\": %.1f, \"complete\": %u, \"at_limit\": %u, \"invalid\": %u, \"free_complete\": %u, \"steps\": %zu}]\n",
            gbbench::json_str(model).c_str(), mi.vocab_size, gbbench::json_str(gpath ? gpath : spath).c_str(), threads, tokens,
            reps, step, gstep, mask, mask_mean, mask / step, allowed_mean, complete, at_limit, invalid, free_complete,
            mask_us.size());
    fclose(f);
  }
  gb_model_close(m);
  gb_grammar_destroy(g);
  return 0;
}
