// cmd_info.cpp — `gearbx info MODEL.gbx`: hyper-parameters and tiers.
#include <string.h>

#include "cli.h"

int gb_cli_info(int argc, char **argv) {
  if (argc != 2 || !strcmp(argv[1], "--help")) return cli_error("info", "usage: gearbx info MODEL.gbx");
  gb_model *m = cli_open_model("info", argv[1]);
  if (!m) return 1;
  gb_model_info i;
  i.struct_size = sizeof i;
  gb_model_get_info(m, &i);
  printf("model        %s\n", i.name);
  printf("file         %llu bytes\n", (unsigned long long)i.file_bytes);
  printf("params       %llu\n", (unsigned long long)i.n_params);
  printf("dim          %u\nhidden_dim   %u\nn_layers     %u\nn_heads      %u\nn_kv_heads   %u\nhead_dim     %u\n", i.dim,
         i.hidden_dim, i.n_layers, i.n_heads, i.n_kv_heads, i.head_dim);
  printf("vocab_size   %u\nseq_len      %u\n", i.vocab_size, i.seq_len);
  printf("rope         %s, %u dims, theta %g\nnorm_eps     %g\n", i.rope_type == GB_ROPE_NEOX ? "neox" : "adjacent", i.rope_dim,
         (double)i.rope_theta, (double)i.norm_eps);
  printf("special      bos %d eos %d unk %d pad %d\n", i.bos_id, i.eos_id, i.unk_id, i.pad_id);
  printf("classifier   %s\n", i.shared_classifier ? "shared with embedding" : "separate");
  static const char *const kOrigin[] = {"source not recorded", "rounded from the source's float weights",
                                         "the source's own values", "rounded again from quantized weights"};
  for (int g = 0; g < GB_GEAR_COUNT; g++)
    if (i.gears >> g & 1)
      printf("tier %-7s %llu bytes, %s, %.2f bits/weight, %s%s\n", gb_gear_name((gb_gear)g), (unsigned long long)i.gear_bytes[g],
             i.tier_formats[g], (double)i.tier_bits[g], i.tier_origin[g] <= 3 ? kOrigin[i.tier_origin[g]] : "?",
             g == (int)i.default_gear ? " (default)" : "");
  gb_model_close(m);
  return 0;
}
