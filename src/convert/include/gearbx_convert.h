/* gearbx_convert.h — the converter's interface for tools (the `gearbx`
 * command, bindings): llama2.c checkpoints, GGUF files and synthetic specs to
 * .gbx model files. Tooling, not the embedded core: it allocates, and it lives
 * in its own library (gearbx_convert). It never crashes or aborts on a
 * malformed input file — every problem is a gb_status plus a log line — and
 * it never damages an existing output file (it writes OUT.tmp and renames).
 */
#ifndef GEARBX_CONVERT_H
#define GEARBX_CONVERT_H

#include <stdint.h>

#include "gearbx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Storage of the token embedding table (the common section). */
typedef enum gb_convert_embd {
  GB_CONVERT_EMBD_AUTO = 0, /* f32 when every source tensor is f32, else f16 */
  GB_CONVERT_EMBD_F32 = 1,
  GB_CONVERT_EMBD_F16 = 2,
  GB_CONVERT_EMBD_MAX_ENUM = 0x7fffffff /* int-sized */
} gb_convert_embd;

/* Layout of the q4 tier matrices, and of a GGUF source's own q4k / q6k
 * ones (the 16-row interleave is the same idea for both, kernels.h). */
typedef enum gb_convert_q4_layout {
  GB_CONVERT_Q4_ROWS16 = 0, /* 16 rows' blocks interleaved, what the fastest
                               q4 kernels stream (matrices whose row count is
                               not a multiple of 16 stay row-major)          */
  GB_CONVERT_Q4_ROW_MAJOR = 1,
  GB_CONVERT_Q4_MAX_ENUM = 0x7fffffff /* int-sized */
} gb_convert_q4_layout;

typedef struct gb_convert_options {
  uint32_t tiers;             /* bit (1u << gb_gear) per tier to write; 0: low|mid|high|f32
                                 from float weights, and from already quantized weights
                                 only the tier of the source's own formats, copied as they
                                 are (other tiers on request: rounded twice, with a warning
                                 giving the error that adds) */
  gb_convert_embd embd;
  gb_convert_q4_layout q4_layout;
  uint32_t page_align;        /* power of two in [64, 2^24]; 0: 65536              */
  int progress;               /* nonzero: a progress display on stderr             */
  gb_log_fn log;              /* NULL: stderr via the port                         */
  void *log_user;
  gb_log_level log_level;     /* messages above this level are dropped             */
} gb_convert_options;

/* The defaults above (log level WARN). */
void gb_convert_default_options(gb_convert_options *opt);

/* llama2.c "legacy v0" checkpoint plus its tokenizer.bin. */
gb_status gb_convert_llama2c(const char *checkpoint_path, const char *tokenizer_path, const char *out_path,
                             const gb_convert_options *opt);
/* GGUF v3 (v2 accepted), architecture "llama". */
gb_status gb_convert_gguf(const char *gguf_path, const char *out_path, const gb_convert_options *opt);
/* One tier of a .gbx written back as a GGUF file (version 3, architecture
 * llama or qwen2): its hyper-parameters, its tokenizer (a GGUF's own as it
 * came; a llama2.c vocabulary as a SentencePiece one), and the tier's
 * tensors in their own formats byte for byte: f32 as F32, f16 as F16, q8 as
 * Q8_0, q4 as Q4_0, a GGUF's formats as themselves (16-row interleaved
 * matrices back in plain rows). Importing the result gives the same tensors.
 * tier: GB_GEAR_LOW..GB_GEAR_F32, or GB_GEAR_DEFAULT (the file's default).
 * The output is written to OUT.tmp and renamed. Errors: GB_ERR_NULL_POINTER,
 * the model's open errors, GB_ERR_UNAVAILABLE (no such tier in the file),
 * GB_ERR_UNSUPPORTED_TYPE (a matrix whose rows are not whole blocks of its
 * format, which GGUF cannot hold — such tiers export as f16 or f32 only; the
 * log names the tensor), GB_ERR_INVALID_ARGUMENT (tier), GB_ERR_IO. */
gb_status gb_convert_to_gguf(const char *gbx_path, const char *out_path, gb_gear tier, const gb_convert_options *opt);
/* The tokenizer of a GGUF file (a vocabulary-only one with no tensors is
 * fine) as a TOKENIZER image, the bytes gb_convert_gguf stores in the .gbx,
 * for gb_tokenizer_open_memory. *image is allocated here; release it with
 * gb_convert_free. opt: NULL for defaults (its log fields are used).
 * Errors: GB_ERR_NULL_POINTER, GB_ERR_FILE_NOT_FOUND, GB_ERR_IO, the GGUF
 * parser's 3xx statuses, GB_ERR_UNSUPPORTED_TYPE (a tokenizer model or
 * pre-tokenizer this build does not know; the log names it),
 * GB_ERR_OUT_OF_MEMORY. Nothing is written to *image / *size on error. */
gb_status gb_convert_gguf_tokenizer(const char *gguf_path, const gb_convert_options *opt, void **image, size_t *size);
/* Release memory the converter returned. NULL is a no-op. */
void gb_convert_free(void *p);
/* Random weights from a spec: a preset ("tinyllama-1.1b") or
 * "dim=..,layers=..,hidden=..,heads=..,kv_heads=..,vocab=..,seed=..[,seq_len=..]". */
gb_status gb_convert_synthetic(const char *spec, const char *out_path, const gb_convert_options *opt);

#ifdef __cplusplus
}
#endif

#endif /* GEARBX_CONVERT_H */
