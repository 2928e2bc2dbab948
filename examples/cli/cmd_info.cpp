// cmd_info.cpp — `gearbx info MODEL.gbx [--ctx N] [KV options]`:
// hyper-parameters, tiers, and the memory a session needs per gear for that
// context and KV budget (what sizing a board takes: the session's one
// allocation plus the weights it maps).
#include <string.h>

#include "cli.h"

namespace {
const char kInfoUsage[] =
    "usage: gearbx info MODEL.gbx|MODEL.gguf [--ctx N] [--threads N] [KV options]\n"
    "  prints the model, its tiers, and per gear the session memory (one allocation, KV pool\n"
    "  included) and the weight bytes it maps, for a context of N tokens (default: the model's)\n" CLI_LOAD_USAGE
    CLI_KV_USAGE;

double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }
}  // namespace

int gb_cli_info(int argc, char **argv) {
  const char *C = "info", *path = nullptr;
  gb_session_options so;
  gb_session_options_init(&so);
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(o, "--help") || !strcmp(o, "-h")) return fputs(kInfoUsage, stdout), 0;
    const int kr = cli_parse_kv_option(C, o, v, &so.kv);
    if (kr < 0) return 1;
    if (kr == 2) continue;
    if (kr == 1) { i++; continue; }
    if (!strcmp(o, "--load")) {
      if (!v) return cli_error(C, "option %s needs a value", o);
      if (!cli_parse_load(C, v)) return 1;
      i++;
    } else if (!strcmp(o, "--ctx") || !strcmp(o, "--threads")) {
      if (!v) return cli_error(C, "option %s needs a value", o);
      if (!cli_parse_u32(C, o, v, !strcmp(o, "--ctx") ? &so.n_ctx : &so.n_threads)) return 1;
      i++;
    } else if (o[0] == '-' && o[1]) {
      return cli_error(C, "unknown option '%s' (see gearbx info --help)", o);
    } else if (!path) {
      path = o;
    } else {
      return cli_error(C, "unexpected argument '%s' (one model)", o);
    }
  }
  if (!path) return cli_error(C, "usage: gearbx info MODEL.gbx|MODEL.gguf [--ctx N] [KV options]");
  gb_model *m = cli_open_model(C, path);
  if (!m) return 1;
  gb_model_info i;
  i.struct_size = sizeof i;
  gb_model_get_info(m, &i);
  printf("model        %s\n", i.name);
  printf("file         %llu bytes%s\n", (unsigned long long)i.file_bytes,
         i.is_gguf ? ", GGUF opened in place (one tier, its own layout; `gearbx convert` adds gears and packed layouts)" : "");
  printf("params       %llu\n", (unsigned long long)i.n_params);
  printf("dim          %u\nhidden_dim   %u\nn_layers     %u\nn_heads      %u\nn_kv_heads   %u\nhead_dim     %u\n", i.dim,
         i.hidden_dim, i.n_layers, i.n_heads, i.n_kv_heads, i.head_dim);
  printf("vocab_size   %u\nseq_len      %u\n", i.vocab_size, i.seq_len);
  printf("rope         %s, %u dims, theta %g\nnorm_eps     %g\n", i.rope_type == GB_ROPE_NEOX ? "neox" : "adjacent", i.rope_dim,
         (double)i.rope_theta, (double)i.norm_eps);
  printf("special      bos %d eos %d unk %d pad %d\n", i.bos_id, i.eos_id, i.unk_id, i.pad_id);
  printf("classifier   %s\n", i.shared_classifier ? "shared with embedding" : "separate");
  if (i.n_shortconv_layers || i.n_deltanet_layers)
    printf("layers       %u attention (KV cache), %u short-convolution, %u Gated DeltaNet: a recurrent state of %.1f KiB\n"
           "             whatever the context (each recurrent layer's last %u convolution inputs, each DeltaNet\n"
           "             head's matrix; f32), in the session's pool beside the KV cache\n",
           i.n_attention_layers, i.n_shortconv_layers, i.n_deltanet_layers, (double)i.recurrent_bytes / 1024.0, i.conv_kernel - 1);
  if (i.n_kv_shared_layers || i.head_dim_swa != i.head_dim || i.n_kv_heads_swa != i.n_kv_heads)
    printf("attention    sliding layers %u KV heads of %u; %u layers read an earlier layer's cache (no KV of their own)\n",
           i.n_kv_heads_swa, i.head_dim_swa, i.n_kv_shared_layers);
  if (i.per_layer_input_bytes)
    printf("per-layer    input table %llu bytes, streamed from the file (%llu bytes per token), not in the budget\n",
           (unsigned long long)i.per_layer_input_bytes, (unsigned long long)i.per_layer_input_row_bytes);
  static const char *const kOrigin[] = {"source not recorded", "rounded from the source's float weights",
                                         "the source's own values", "rounded again from quantized weights"};
  for (int g = 0; g < GB_GEAR_COUNT; g++)
    if (i.gears >> g & 1)
      printf("tier %-7s %llu bytes, %s, %.2f bits/weight, %s%s\n", gb_gear_name((gb_gear)g), (unsigned long long)i.gear_bytes[g],
             i.tier_formats[g], (double)i.tier_bits[g], i.tier_origin[g] <= 3 ? kOrigin[i.tier_origin[g]] : "?",
             g == (int)i.default_gear ? " (default)" : "");

  // Memory per gear: the session's one allocation (KV pool, scratch, state)
  // and the weights it reads through the mapping (common tensors plus the
  // tiers that gear can enter; pages of other tiers need not be resident).
  uint64_t tiers_bytes = 0;
  for (int g = 0; g < GB_GEAR_COUNT; g++) tiers_bytes += i.gear_bytes[g];
  const uint64_t common = i.file_bytes - tiers_bytes;
  const uint32_t n_ctx = so.n_ctx ? so.n_ctx : i.seq_len;
  printf("memory       context %u tokens, kv policy %s%s (session: the one allocation; tiers: mapped, read every\n"
         "             token; common: mapped, the embedding read one row per token)\n", n_ctx,
         gb_kv_policy_name(so.kv.policy), so.kv.beta > 0 || so.kv.pool_bytes ? " with a budget" : "");
  const gb_gear gears[] = {GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32, GB_GEAR_DEFAULT, GB_GEAR_AUTO, GB_GEAR_SPEC};
  for (gb_gear g : gears) {
    so.gear = g;
    size_t bytes = 0;
    uint64_t pool = 0;
    uint32_t max_tokens = 0;
    const gb_status st = gb_session_mem_size(m, &so, &bytes);
    if (st != GB_OK) {
      printf("  %-8s not available (%s)\n", gb_gear_name(g), gb_status_str(st));
      continue;
    }
    gb_kv_pool_size(m, &so, &pool, &max_tokens);
    // Weights a gear reads: its tier (auto and spec may use low, mid and
    // high), read whole every token, and the common tensors (embedding,
    // norms), of which a token reads one embedding row.
    uint64_t w = 0;
    if (g == GB_GEAR_AUTO || g == GB_GEAR_SPEC) {
      for (int t = GB_GEAR_LOW; t <= GB_GEAR_HIGH; t++) w += i.gear_bytes[t];
      if (i.default_gear <= GB_GEAR_HIGH) w -= i.per_layer_input_bytes;
    } else {
      w += i.gear_bytes[g == GB_GEAR_DEFAULT ? i.default_gear : g];
      if ((g == GB_GEAR_DEFAULT ? i.default_gear : g) == i.default_gear) w -= i.per_layer_input_bytes;  // streamed, above
    }
    printf("  %-8s session %10zu bytes (%7.1f MiB; KV pool %.1f MiB, %u tokens)  tiers %7.1f MiB  common %6.1f MiB  "
           "total %7.1f MiB\n",
           gb_gear_name(g), bytes, mib(bytes), mib(pool), max_tokens, mib(w), mib(common), mib(bytes + w + common));
  }
  // How the weights stay in memory, and what that costs on a device under
  // memory pressure.
  const gb_model_load load = cli_load_mode();
  if (load == GB_MODEL_LOAD_LOCK)
    printf("residency    locked: %.1f MiB of the default gear's weights and tables are pinned in memory (counted\n"
           "             as resident by the session budget); other tiers stay mapped\n",
           mib(i.locked_bytes));
  else if (load == GB_MODEL_LOAD_COPY)
    printf("residency    copied: the whole file (%.1f MiB) is in memory, every tier; file changes cannot reach it\n",
           mib(i.file_bytes));
  else
    printf("residency    mapped: weight pages may be dropped under memory pressure and read again from the file,\n"
           "             which slows decoding; --load lock pins the default gear (%.1f MiB + common), --load copy\n"
           "             reads the whole file into memory\n",
           mib(i.gear_bytes[i.default_gear]));
  gb_model_close(m);
  return 0;
}
