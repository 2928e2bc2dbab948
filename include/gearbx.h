/*
 * gearbx.h — the public C ABI of gearbx, an embedded LLM decoding library.
 *
 * gearbx runs Llama-family decoder models one token per gb_decode_step() call,
 * under a fixed memory budget. Every managed linear layer exists in the model
 * file (.gbx, see docs/FORMAT.md) in precision tiers ("gears": low = 4-bit
 * blocks, mid = 8-bit blocks, high = fp16, plus an optional f32 reference
 * tier); per token, the entropy of the logits can pick the gear of the next
 * step.
 *
 * Conventions (they hold for every function below unless its comment says
 * otherwise):
 *  - Every fallible call returns a gb_status; GB_OK is 0. Results come back
 *    through out-parameters, which are written only on success.
 *  - Handles are opaque. A gb_model is immutable after it is opened and may be
 *    shared by any number of sessions and threads. A gb_session is used by one
 *    thread at a time (no internal locking).
 *  - Option structs are filled by their gb_*_options_init() function first;
 *    they carry struct_size so fields can be appended in later versions
 *    without breaking callers compiled against this header.
 *  - The library never aborts, exits or prints to stdout; diagnostics go to
 *    the log callback given in the options (default: stderr through the
 *    platform port, errors and warnings only). Every error status comes with
 *    a log line naming the function, except GB_ERR_BUFFER_TOO_SMALL (the size
 *    query) and the "unknown" answer of a lookup (*_from_name,
 *    gb_chat_template_detect). A NULL handle, or one that is not a live
 *    object of the expected kind, is refused (GB_ERR_NULL_POINTER,
 *    GB_ERR_BAD_HANDLE) with a line through the default sink; void
 *    functions given NULL do nothing.
 *  - Nothing allocates after gb_session_create(): prefill and decode run in
 *    the session's arena.
 */
#ifndef GEARBX_H
#define GEARBX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

#define GB_VERSION_MAJOR 0
#define GB_VERSION_MINOR 6
#define GB_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define GB_VERSION_NUMBER (GB_VERSION_MAJOR * 10000 + GB_VERSION_MINOR * 100 + GB_VERSION_PATCH)

/* The version the library was built as (GB_VERSION_NUMBER of its header).
 * Compare with GB_VERSION_NUMBER to detect a header/library mismatch. */
uint32_t gb_version(void);
/* "MAJOR.MINOR.PATCH"; static storage, never NULL. */
const char *gb_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

/* Values are grouped by hundreds and never renumbered. Every public enum
 * ends in a *_MAX_ENUM = 0x7fffffff member: it fixes the type's size to 32
 * bits in C and C++, and makes any non-negative int a valid value to store,
 * so the library can reject unknown values rather than assume them away. */
typedef enum gb_status {
  GB_OK = 0,

  /* 1xx: the caller's arguments */
  GB_ERR_INVALID_ARGUMENT = 100, /* a value out of its documented range   */
  GB_ERR_NULL_POINTER = 101,     /* a required pointer was NULL            */
  GB_ERR_STRUCT_SIZE = 102,      /* options struct_size unknown / too small */
  GB_ERR_BUFFER_TOO_SMALL = 103, /* caller buffer too small; nothing written */
  GB_ERR_BAD_STATE = 104,        /* call not valid in the object's state   */
  GB_ERR_TOKEN_OUT_OF_RANGE = 105, /* token id outside [0, vocab_size)     */
  GB_ERR_ALIGNMENT = 106,        /* a caller pointer is not aligned enough */
  GB_ERR_UNAVAILABLE = 107,      /* feature absent (gear tier not in file, */
                                 /* platform without files, ...)           */
  GB_ERR_BAD_HANDLE = 108,       /* not a live object of the expected kind:
                                    another kind of handle, or one destroyed
                                    in caller memory (a freed one cannot be
                                    told apart: do not reuse it)            */
  GB_ERR_SYNTAX = 109,           /* a grammar or JSON schema text is
                                    malformed; the log line names the line
                                    and column                              */
  GB_ERR_UNSUPPORTED_FEATURE = 110, /* well-formed grammar or schema text that
                                    uses something this library does not do
                                    (named in the log line): a left-recursive
                                    rule, an unknown schema keyword, ...    */

  /* 2xx: files and the platform */
  GB_ERR_IO = 200,               /* open/read/map failed                    */
  GB_ERR_FILE_NOT_FOUND = 201,
  GB_ERR_FILE_CHANGED = 202,     /* the mapped model file was truncated or
                                    written after it was opened: nothing ran */

  /* 3xx: malformed or unsupported model data (any parser) */
  GB_ERR_BAD_MAGIC = 300,        /* not a file of the expected kind         */
  GB_ERR_UNSUPPORTED_VERSION = 301,
  GB_ERR_TRUNCATED = 302,        /* data ends before a structure it announces */
  GB_ERR_CHECKSUM = 303,         /* a CRC32 does not match                  */
  GB_ERR_CORRUPT = 304,          /* inconsistent fields (offsets, sizes, dims) */
  GB_ERR_UNSUPPORTED_TYPE = 305, /* tensor type / architecture not supported */
  GB_ERR_MISSING_TENSOR = 306,   /* a required tensor is absent             */
  GB_ERR_SHAPE_MISMATCH = 307,   /* a tensor's shape disagrees with the config */

  /* 4xx: memory */
  GB_ERR_OUT_OF_MEMORY = 400,    /* the platform refused the one allocation */
  GB_ERR_BUDGET_EXCEEDED = 401,  /* options do not fit the byte budget      */
  GB_ERR_ARENA_TOO_SMALL = 402,  /* caller memory smaller than gb_session_mem_size() */
  GB_ERR_LOCK_REFUSED = 403,     /* the system refused to lock the model's pages
                                    in memory (GB_MODEL_LOAD_LOCK)          */

  /* 5xx: running */
  GB_ERR_CONTEXT_FULL = 500,     /* no room for another token in the context */
  GB_ERR_ABORTED = 501,          /* the abort callback asked to stop; the
                                    session is usable (see abort_callback) */
  GB_ERR_GRAMMAR_LIMIT = 502,    /* the grammar's parse state would outgrow
                                    the limits it was given (max_stacks,
                                    max_depth); nothing changed             */
  GB_ERR_GRAMMAR_NO_TOKEN = 503, /* no token of the vocabulary can continue
                                    the grammar here; nothing changed       */
  GB_ERR_INTERNAL = 599,         /* a bug: please report                     */
  GB_STATUS_MAX_ENUM = 0x7fffffff
} gb_status;

/* A short English description of s; static storage, never NULL (unknown
 * values give "unknown status"). */
const char *gb_status_str(gb_status s);

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum gb_log_level {
  GB_LOG_ERROR = 0,
  GB_LOG_WARN = 1,
  GB_LOG_INFO = 2,
  GB_LOG_DEBUG = 3,
  GB_LOG_LEVEL_MAX_ENUM = 0x7fffffff
} gb_log_level;

/* Receives one line (no trailing newline), valid only during the call. May be
 * called from any thread that calls into the library with that object. */
typedef void (*gb_log_fn)(void *user, gb_log_level level, const char *message);

/* ------------------------------------------------------------------------ */
/* Model                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct gb_model gb_model;

/* Gears: the precision tiers of managed matrices. A file made by gearbx
 * from float weights uses the formats below; a file converted from an
 * already quantized GGUF keeps that file's own blocks (Q4_K, Q6_K, ...,
 * byte for byte) as one tier, in the slot nearest its bits per weight
 * (gb_model_info.tier_formats and tier_bits say what each tier holds). */
typedef enum gb_gear {
  GB_GEAR_LOW = 0,  /* q4: 32-weight blocks, fp16 scale (4.5 bits/weight);
                       or a GGUF source's own blocks under 6.5 bits/weight */
  GB_GEAR_MID = 1,  /* q8: 32-weight blocks, fp16 scale (8.5 bits/weight);
                       or a GGUF source's own blocks under 12 bits/weight  */
  GB_GEAR_HIGH = 2, /* fp16; its activations are rounded to fp16 too      */
  GB_GEAR_F32 = 3,  /* f32 reference tier (optional in a .gbx)            */
  GB_GEAR_COUNT = 4,
  /* Session policies, not tiers: */
  GB_GEAR_AUTO = 16, /* entropy-routed among low / mid / high             */
  GB_GEAR_SPEC = 17, /* speculative: drafts on spec_draft_gear, verified in
                        one batched pass by spec_verify_gear; the verifier's
                        exact tokens (greedy) or distribution (sampling)  */
  GB_GEAR_DEFAULT = 18, /* the file's default tier (gb_model_info.default_gear):
                        a GGUF source's own quantization, else mid     */
  GB_GEAR_MAX_ENUM = 0x7fffffff
} gb_gear;

/* Where a tier's weights come from (gb_model_info.tier_origin). */
typedef enum gb_tier_origin {
  GB_TIER_ORIGIN_UNKNOWN = 0,     /* not recorded (files before version 3)     */
  GB_TIER_ORIGIN_ROUNDED = 1,     /* rounded once from the source's float weights */
  GB_TIER_ORIGIN_SOURCE = 2,      /* the source's own values, exactly (its float
                                     weights, or its quantized blocks as stored) */
  GB_TIER_ORIGIN_REQUANTIZED = 3, /* rounded again from an already quantized
                                     source: errors compound (on request only) */
  GB_TIER_ORIGIN_MAX_ENUM = 0x7fffffff
} gb_tier_origin;

/* The gear's name as the tools and logs spell it: "low", "mid", "high",
 * "f32", "auto", "spec", "default"; "unknown" for any other value. Static storage,
 * never NULL; thread-safe. */
const char *gb_gear_name(gb_gear gear);

/* The reverse of gb_gear_name (exact spelling). Errors: GB_ERR_NULL_POINTER,
 * GB_ERR_INVALID_ARGUMENT for any other name; *out is written only on
 * success. Thread-safe. */
gb_status gb_gear_from_name(const char *name, gb_gear *out);

typedef enum gb_verify {
  GB_VERIFY_AUTO = 0,     /* metadata always; tensor data when the file is
                             at most verify_auto_limit bytes             */
  GB_VERIFY_ALL = 1,      /* every section's CRC32 at open               */
  GB_VERIFY_METADATA = 2, /* header, metadata, vocabulary and directory  */
  GB_VERIFY_MAX_ENUM = 0x7fffffff
} gb_verify;

/* How gb_model_open_file reaches the file's bytes. */
typedef enum gb_model_load {
  /* Map the file read-only: weights are read in place and tiers the session
   * does not use cost no memory. The mapping reflects the file, so a file
   * that is truncated or rewritten while it is open could make the process
   * fault: before every forward pass (gb_prefill, gb_decode_step, gb_feed)
   * the session compares the file's size and
   * modification time with those at open (one fstat) and returns
   * GB_ERR_FILE_CHANGED, running nothing, if they differ. A change that lands
   * during a pass is not caught (docs/RELIABILITY.md). Replacing the file by
   * renaming another over its path is harmless: the mapping keeps the old
   * file. */
  GB_MODEL_LOAD_MAP = 0,
  /* Read the whole file into memory the port allocates (the file's size, 64-
   * byte aligned): later changes to the file cannot reach the model, at the
   * price of resident memory for every tier. */
  GB_MODEL_LOAD_COPY = 1,
  /* Since 0.5: map the file as GB_MODEL_LOAD_MAP does, then lock in memory
   * (the platform's mlock) what a session at the default gear reads: the
   * common tensors, the default tier's matrices and classifier, and the
   * model's own memory (tables; matrices a GGUF repacks). Those pages are
   * then never evicted, so decoding keeps its speed on a device under
   * memory pressure, where a mapped file's cold pages are dropped and read
   * again. Other tiers stay mapped and unlocked. The locked bytes are
   * gb_model_info.locked_bytes; they are the resident weights the session
   * budget and gb_plan already count. When the system refuses (a limit on
   * locked memory: RLIMIT_MEMLOCK, `ulimit -l`; or not enough memory),
   * GB_ERR_LOCK_REFUSED and nothing stays open; a port without the service:
   * GB_ERR_UNAVAILABLE. Changes to the file are handled as for a mapping. */
  GB_MODEL_LOAD_LOCK = 2,
  GB_MODEL_LOAD_MAX_ENUM = 0x7fffffff
} gb_model_load;

/* The layout a GGUF's 4-bit and 6-bit matrices (q4_0, q4_K, q6_K with rows
 * a multiple of 16) run in. The file stores rows one after the other; the
 * fastest kernels read 16 rows' blocks interleaved (what `gearbx convert`
 * writes): on the 2-core x86 host of docs/RESULTS.md, 1.9x decode and 2.6x
 * prefill for a 1.1B Q4_0 model. */
typedef enum gb_gguf_layout {
  /* gb_model_open_file: REPACK (GB_MODEL_LOAD_COPY: in place; a mapping:
   * into the model's memory, unless gb_model_options.mem is given, then
   * FILE); gb_model_open_memory and gb_model_mem_size: FILE. */
  GB_GGUF_LAYOUT_AUTO = 0,
  /* The file's rows, read in place: no memory beyond the model's tables. */
  GB_GGUF_LAYOUT_FILE = 1,
  /* Interleave those matrices once at open: in place in a loaded copy
   * (GB_MODEL_LOAD_COPY), else into the model's memory, which
   * gb_model_mem_size then counts (about the weights' size; a mapping's
   * pages are released after they are copied). */
  GB_GGUF_LAYOUT_REPACK = 2,
  GB_GGUF_LAYOUT_MAX_ENUM = 0x7fffffff
} gb_gguf_layout;

typedef struct gb_model_options {
  uint32_t struct_size;       /* = sizeof(gb_model_options)              */
  gb_verify verify;           /* default GB_VERIFY_AUTO                  */
  uint64_t verify_auto_limit; /* default 256 MiB                          */
  gb_log_fn log;              /* default: stderr via the port, WARN and up */
  void *log_user;
  gb_log_level log_level;     /* messages above this level are dropped    */
  void *mem;                  /* optional: 64-byte aligned memory for the
                                 model's own tables (gb_model_mem_size()
                                 bytes), so opening allocates nothing; NULL:
                                 the port's allocator, once               */
  size_t mem_bytes;
  gb_model_load load;         /* gb_model_open_file only; default
                                 GB_MODEL_LOAD_MAP                         */
  /* Since 0.3: */
  gb_gguf_layout gguf_layout; /* GGUF files only; default GB_GGUF_LAYOUT_AUTO */
} gb_model_options;

void gb_model_options_init(gb_model_options *opts);

typedef enum gb_rope_type {
  GB_ROPE_ADJACENT = 0, /* rotate pairs (2i, 2i+1): llama2.c, GGUF llama   */
  GB_ROPE_NEOX = 1,     /* rotate pairs (i, i + rope_dim/2): NeoX style    */
  GB_ROPE_MAX_ENUM = 0x7fffffff
} gb_rope_type;

typedef struct gb_model_info {
  uint32_t struct_size; /* set by the caller to sizeof(gb_model_info)      */
  uint32_t dim;         /* model (residual) width                          */
  uint32_t hidden_dim;  /* SwiGLU inner width                              */
  uint32_t n_layers;
  uint32_t n_heads;
  uint32_t n_kv_heads;  /* < n_heads for grouped-query attention           */
  uint32_t head_dim;
  uint32_t vocab_size;
  uint32_t seq_len;     /* trained context length                          */
  uint32_t rope_type;   /* gb_rope_type                                    */
  uint32_t rope_dim;    /* rotated dims per head (<= head_dim)             */
  float rope_theta;     /* base frequency                                  */
  float norm_eps;       /* RMSNorm epsilon                                 */
  int32_t bos_id, eos_id, unk_id, pad_id; /* -1 when absent              */
  uint32_t gears;       /* bit (1u << gb_gear) per tier present in the file */
  uint32_t shared_classifier; /* 1 when the source tied classifier and embedding */
  uint64_t file_bytes;
  uint64_t n_params;    /* weights of the model (one tier)                 */
  uint64_t gear_bytes[GB_GEAR_COUNT]; /* bytes of each tier's section (0 = absent) */
  char name[64];        /* NUL-terminated                                  */
  /* Since version 3 files (older files: default_gear is mid when present,
   * else the lowest tier present; origins GB_TIER_ORIGIN_UNKNOWN): */
  gb_gear default_gear; /* the tier GB_GEAR_DEFAULT runs                   */
  uint32_t tier_origin[GB_GEAR_COUNT]; /* gb_tier_origin of each tier       */
  float tier_bits[GB_GEAR_COUNT];  /* bits per weight of the tier's matrices
                                      and classifier as stored (0 = absent) */
  char tier_formats[GB_GEAR_COUNT][32]; /* formats of the tier's matrices,
                                      e.g. "q4k+q6k", NUL-terminated       */
  /* Since 0.3: */
  uint32_t is_gguf;     /* 1: a GGUF file opened in place (its one tier, its
                           own row-major layout); 0: a .gbx               */
  /* Since 0.5: */
  uint64_t locked_bytes; /* bytes locked in memory (GB_MODEL_LOAD_LOCK; 0
                            otherwise): the tensors locked plus the model's
                            own memory                                     */
  /* Since 0.6: what mixes positions in each layer (a GGUF of a recurrent
   * architecture opened in place; a .gbx holds attention layers only). */
  uint32_t n_attention_layers;  /* layers with a KV cache                  */
  uint32_t n_shortconv_layers;  /* gated short convolutions (lfm2)          */
  uint32_t n_deltanet_layers;   /* Gated DeltaNet (qwen35)                  */
  uint32_t conv_kernel;         /* taps of the recurrent layers' causal
                                   convolution (0: none)                   */
  uint64_t recurrent_bytes;     /* the fixed state of those layers, whatever
                                   the context: each one's last
                                   conv_kernel - 1 convolution inputs and
                                   each DeltaNet value head's matrix, f32 (a
                                   session's pool holds this plus the rows of
                                   its longest batch, and with the
                                   speculative gear a checkpoint and a log
                                   of update inputs; gb_kv_pool_size)       */
  /* Also since 0.6: attention shapes that differ between layers, shared
   * caches and per-layer inputs (gemma4; otherwise head_dim_swa and
   * n_kv_heads_swa equal head_dim and n_kv_heads, the others are 0). */
  uint32_t head_dim_swa;        /* the sliding-window layers' head size    */
  uint32_t n_kv_heads_swa;      /* and their KV heads                      */
  uint32_t n_kv_shared_layers;  /* attention layers storing no KV: each
                                   reads an earlier layer's cache          */
  uint64_t per_layer_input_bytes;     /* the per-layer input table: read one
                                   row per token through the mapping,
                                   never copied into a session (streamed
                                   weights, not counted in a budget)       */
  uint64_t per_layer_input_row_bytes; /* of which each token reads         */
} gb_model_info;

/* Open a model by mapping the file read-only (the platform's mmap): a .gbx,
 * or a GGUF file as downloaded (recognised by its magic; opened in place,
 * nothing converted or copied: its quantization is the one tier and the
 * default gear, its tokenizer and chat template are the file's; a tensor
 * type gearbx does not read is GB_ERR_UNSUPPORTED_TYPE, naming the tensor).
 * A GGUF split in several files (llama.cpp's gguf-split:
 * "NAME-00001-of-00003.gguf", ...) opens from its first file's path: the
 * others are found by their names and mapped the same way (at most 64
 * files; each checked to be the part it should be, tensors in one file
 * each; a change to any of them is caught as for one file). Another part's
 * path, or a first part whose name does not end in -00001-of-NNNNN.gguf:
 * GB_ERR_INVALID_ARGUMENT; a missing part: GB_ERR_FILE_NOT_FOUND naming it.
 * gb_model_open_memory and gb_model_mem_size refuse a split file
 * (GB_ERR_INVALID_ARGUMENT). path: NUL-terminated. opts: NULL for defaults.
 * On success *out owns the mapping until gb_model_close(). Errors:
 * GB_ERR_NULL_POINTER, GB_ERR_FILE_NOT_FOUND, GB_ERR_IO, GB_ERR_UNAVAILABLE
 * (port without files), any 3xx for a malformed file, GB_ERR_OUT_OF_MEMORY,
 * GB_ERR_LOCK_REFUSED (GB_MODEL_LOAD_LOCK). */
gb_status gb_model_open_file(const char *path, const gb_model_options *opts, gb_model **out);

/* Open a .gbx or GGUF model that is already in memory (flash, execute-in-place, a
 * caller's buffer). data must be 16-byte aligned (64 recommended) and stay
 * valid and unchanged until gb_model_close(); it is never written. Weights are
 * read in place, not copied. Errors as gb_model_open_file, plus
 * GB_ERR_ALIGNMENT. */
gb_status gb_model_open_memory(const void *data, size_t size, const gb_model_options *opts,
                               gb_model **out);

/* Bytes of memory a model opened from this image needs for its own tables
 * (the weights stay in place): what gb_model_options.mem must hold. Reads
 * the header and metadata only. Errors: as gb_model_open_memory for the
 * header and metadata. */
gb_status gb_model_mem_size(const void *data, size_t size, const gb_model_options *opts, size_t *out_bytes);

/* Fill *info (info->struct_size must be set; fields past it are untouched). */
gb_status gb_model_get_info(const gb_model *model, gb_model_info *info);

/* Check every section's CRC32 now (for files opened without it).
 * Returns GB_ERR_CHECKSUM naming the section in the log on a mismatch. */
gb_status gb_model_verify(const gb_model *model);

/* Release the model. All sessions created from it must be destroyed first.
 * NULL is a no-op. */
void gb_model_close(gb_model *model);

/* ------------------------------------------------------------------------ */
/* Tokenizer                                                                 */
/* ------------------------------------------------------------------------ */

/* A model's tokenizer is one of three kinds: the llama2.c scheme of the
 * shared stories models (a .gbx VOCAB section), or one carried over from a
 * GGUF file (a TOKENIZER section, version 4 files): SentencePiece
 * (tokenizer.ggml.model "llama": Llama 2, TinyLlama, Mistral, Phi-3) or
 * byte-level BPE ("gpt2": Llama 3, Qwen2, SmolLM, DeepSeek, Falcon,
 * StarCoder), which tokenize exactly as llama.cpp does. A file with both
 * sections uses the TOKENIZER one. */
typedef enum gb_tokenizer_kind {
  GB_TOKENIZER_LLAMA2C = 1, /* byte-fallback BPE over scores (llama2.c)     */
  GB_TOKENIZER_SPM = 2,     /* SentencePiece from a GGUF                    */
  GB_TOKENIZER_BPE = 3,     /* byte-level BPE from a GGUF                   */
  GB_TOKENIZER_BPE_UTF8 = 4, /* BPE over UTF-8 characters, spaces as U+2581,
                                <0xHH> byte tokens (Gemma 4) from a GGUF */
  GB_TOKENIZER_MAX_ENUM = 0x7fffffff
} gb_tokenizer_kind;

#define GB_TOKENIZE_ADD_BOS 1u         /* put the BOS id first (when there is one) */
#define GB_TOKENIZE_NO_DUMMY_PREFIX 2u /* do not prepend the SentencePiece
                                          space to non-empty text          */
#define GB_TOKENIZE_PARSE_SPECIAL 4u   /* control tokens written in the text
                                          (<|eot_id|>, </s>) become their ids;
                                          GGUF tokenizers only              */
#define GB_TOKENIZE_ADD_EOS 8u         /* put the EOS id last (when there is one) */

/* The capacity gb_tokenize() needs for `len` bytes of text, for every kind
 * of tokenizer (the GGUF tokenizers work in the output buffer: an invalid
 * byte can become up to six ids, and the merge state of the text needs room
 * too). `len` must be below SIZE_MAX / 32. */
#define GB_TOKENIZE_CAPACITY(len) ((size_t)(len) * 28u + 64u)

/* Decoding flags. */
#define GB_DETOKENIZE_SPECIAL 1u     /* control tokens give their text (else nothing) */
#define GB_DETOKENIZE_STRIP_SPACE 2u /* SentencePiece: drop the leading space of the
                                        first piece with text (the space prefix) */

typedef struct gb_tokenizer gb_tokenizer;

typedef struct gb_tokenizer_info {
  uint32_t struct_size; /* set by the caller to sizeof(gb_tokenizer_info)   */
  gb_tokenizer_kind kind;
  uint32_t n_tokens;
  int32_t bos_id, eos_id, eot_id, eom_id, unk_id, pad_id; /* -1 when absent */
  uint32_t add_bos;     /* 1 when the model wants BOS first (GB_TOKENIZE_ADD_BOS) */
  uint32_t add_eos;     /* 1 when it wants EOS last                         */
  char pre[32];         /* BPE pre-tokenizer ("llama-bpe", "qwen2", ...); "" otherwise */
  uint64_t chat_template_bytes; /* length of the model's chat template text (0: none) */
} gb_tokenizer_info;

/* The model's tokenizer (owned by the model: valid until gb_model_close, never
 * passed to gb_tokenizer_close). Errors: GB_ERR_NULL_POINTER. */
gb_status gb_model_tokenizer(const gb_model *model, const gb_tokenizer **out);

/* Bytes of memory gb_tokenizer_open_memory needs for this TOKENIZER image
 * (what gb_convert_gguf_tokenizer produces, or a .gbx TOKENIZER section's
 * bytes). Validates the image. Errors: GB_ERR_NULL_POINTER, GB_ERR_BAD_MAGIC,
 * GB_ERR_UNSUPPORTED_VERSION, GB_ERR_TRUNCATED, GB_ERR_CORRUPT. */
gb_status gb_tokenizer_mem_size(const void *image, size_t size, size_t *out_bytes);

/* A tokenizer without a model, over a TOKENIZER image that stays valid and
 * unchanged until gb_tokenizer_close (any alignment). opts: NULL for
 * defaults; its log fields are used, and mem / mem_bytes (8-byte aligned,
 * gb_tokenizer_mem_size bytes) replace the one allocation when set. Errors
 * as gb_tokenizer_mem_size, plus GB_ERR_ALIGNMENT, GB_ERR_ARENA_TOO_SMALL,
 * GB_ERR_OUT_OF_MEMORY, GB_ERR_STRUCT_SIZE. *out is written only on success. */
gb_status gb_tokenizer_open_memory(const void *image, size_t size, const gb_model_options *opts,
                                   gb_tokenizer **out);

/* Release a tokenizer from gb_tokenizer_open_memory. NULL, and a model's own
 * tokenizer, are no-ops. */
void gb_tokenizer_close(gb_tokenizer *tok);

/* Fill *info (info->struct_size must be set; fields past it are untouched). */
gb_status gb_tokenizer_get_info(const gb_tokenizer *tok, gb_tokenizer_info *info);

/* Split text[0..len) (any bytes; invalid UTF-8 falls back to byte tokens)
 * into ids. tokens: capacity `cap` ids, at least GB_TOKENIZE_CAPACITY(len)
 * (the GGUF tokenizers use the buffer as work space); otherwise
 * GB_ERR_BUFFER_TOO_SMALL, *n_tokens receives the capacity needed and the
 * buffer's contents are unspecified. On success tokens[0..*n_tokens) are the
 * ids. Errors: GB_ERR_NULL_POINTER, GB_ERR_INVALID_ARGUMENT (unknown flags),
 * GB_ERR_UNAVAILABLE (GB_TOKENIZE_PARSE_SPECIAL on a llama2.c vocabulary).
 * Thread-safe; does not allocate. */
gb_status gb_tokenizer_encode(const gb_tokenizer *tok, const char *text, size_t len, uint32_t flags, int32_t *tokens,
                              size_t cap, size_t *n_tokens);

/* The text of one token. prev_token is the token before it (-1 for none):
 * right after BOS a SentencePiece space prefix is dropped. Byte tokens give
 * their byte (which may be part of a multi-byte character: see
 * gb_utf8_stream), byte-level BPE tokens their bytes, control tokens an
 * empty string. *out points into the tokenizer (valid until it is closed),
 * not NUL-terminated; *len is its length. Errors: GB_ERR_NULL_POINTER,
 * GB_ERR_TOKEN_OUT_OF_RANGE. */
gb_status gb_tokenizer_token_text(const gb_tokenizer *tok, int32_t prev_token, int32_t token, const char **out,
                                  size_t *len);

/* The text of ids[0..n) into buf[0..cap), not NUL-terminated; flags
 * GB_DETOKENIZE_*. *n_out is its length; when it does not fit,
 * GB_ERR_BUFFER_TOO_SMALL with *n_out = the bytes needed, and buf is not
 * written. Errors: GB_ERR_NULL_POINTER, GB_ERR_TOKEN_OUT_OF_RANGE,
 * GB_ERR_INVALID_ARGUMENT (unknown flags). Thread-safe; does not allocate. */
gb_status gb_tokenizer_decode(const gb_tokenizer *tok, const int32_t *ids, size_t n, uint32_t flags, char *buf,
                              size_t cap, size_t *n_out);

/* *out = 1 when token ends generation (EOS, end of turn, end of message),
 * else 0. Errors: GB_ERR_NULL_POINTER, GB_ERR_TOKEN_OUT_OF_RANGE. */
gb_status gb_tokenizer_is_eog(const gb_tokenizer *tok, int32_t token, int *out);

/* The model's chat template text (GGUF tokenizer.chat_template; Jinja, for
 * gb_chat_template_detect), not NUL-terminated, valid while the tokenizer
 * is. Errors: GB_ERR_NULL_POINTER, GB_ERR_UNAVAILABLE (the file has none). */
gb_status gb_tokenizer_chat_template(const gb_tokenizer *tok, const char **text, size_t *len);

/* gb_tokenizer_encode / gb_tokenizer_token_text with the model's tokenizer. */
gb_status gb_tokenize(const gb_model *model, const char *text, size_t len, uint32_t flags, int32_t *tokens, size_t cap,
                      size_t *n_tokens);
gb_status gb_token_to_text(const gb_model *model, int32_t prev_token, int32_t token, const char **out, size_t *len);

/* ------------------------------------------------------------------------ */
/* Session                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct gb_session gb_session;

typedef enum gb_sample_method {
  GB_SAMPLE_MULTINOMIAL = 0, /* inverse CDF over the filtered distribution */
  GB_SAMPLE_GUMBEL = 1,      /* argmax(log p + Gumbel noise)               */
  GB_SAMPLE_MAX_ENUM = 0x7fffffff
} gb_sample_method;

typedef struct gb_sampler_options {
  float temperature; /* 0 = greedy (argmax); default 1                      */
  uint32_t top_k;    /* 0 = off                                             */
  float top_p;       /* 1 = off; (0, 1]                                     */
  float min_p;       /* 0 = off; [0, 1)                                     */
  uint64_t seed;     /* same seed and inputs -> same tokens                 */
  gb_sample_method method;
} gb_sampler_options;

/* KV cache policies. The cache is a fixed pool of bytes
 * inside the session arena; every cached token of every layer is stored at
 * one precision level: 8, 4, 3 or 2 bits per element (per-head symmetric
 * quantization, one fp16 scale per head for K and one for V), or as fp16 /
 * f32 rows. Tokens of one level are kept contiguous (per-level buckets) and
 * attention reads them in place (no dequantized copy). */
typedef enum gb_kv_policy {
  GB_KV_DEFAULT = 0,  /* no budget (kv_bytes = kv_beta = 0): GB_KV_F32;
                         with a budget: GB_KV_WINDOW (the measured best)  */
  GB_KV_F32 = 1,      /* f32 rows: the reference cache                    */
  GB_KV_F16 = 2,      /* binary16 rows                                    */
  GB_KV_UNIFORM8 = 3, /* every token at 8 bits                            */
  GB_KV_UNIFORM4 = 4,
  GB_KV_UNIFORM3 = 5,
  GB_KV_UNIFORM2 = 6,
  GB_KV_SEED = 7,     /* tokens enter at 8 bits; periodic (per-layer clock,
                         drift trigger) marginal-gain greedy over
                         2->3->4->8 with the concave utility b^alpha, the
                         importance floor and rank hysteresis; a token's level
                         only goes down (its original values are gone)     */
  GB_KV_WINDOW = 8,   /* the `window` most recent tokens stay at 8 bits;
                         older tokens step down, when the pool needs room,
                         in order of importance x quantization error
                         (4^-bits) per byte saved                          */
  GB_KV_RECENCY = 9,  /* as WINDOW with importance replaced by recency
                         exp(-age / T) alone (no attention statistics)     */
  GB_KV_POLICY_MAX_ENUM = 0x7fffffff
} gb_kv_policy;

/* The policy's name as the tools and logs spell it: "default", "f32", "f16",
 * "uniform8", "uniform4", "uniform3", "uniform2", "seed", "window",
 * "recency"; "unknown" for any other value. Static storage, never NULL;
 * thread-safe. */
const char *gb_kv_policy_name(gb_kv_policy policy);

/* The reverse of gb_kv_policy_name (exact spelling). Errors:
 * GB_ERR_NULL_POINTER, GB_ERR_INVALID_ARGUMENT for any other name; *out is
 * written only on success. Thread-safe. */
gb_status gb_kv_policy_from_name(const char *name, gb_kv_policy *out);

/* KV pool options (inside gb_session_options; defaults from
 * gb_session_options_init). */
typedef struct gb_kv_options {
  gb_kv_policy policy;     /* default GB_KV_DEFAULT                        */
  uint64_t pool_bytes;     /* the pool (payload + scales, all layers); 0:
                              from beta                                   */
  float beta;              /* pool = beta x the fp16 cache of n_ctx tokens
                              (2 x n_layers x n_ctx x kv_dim x 2 bytes;
                              sliding-window layers count their ring, not
                              n_ctx, kv.h); 0
                              with pool_bytes 0 = no budget: room for n_ctx
                              tokens at the policy's entry precision       */
  uint32_t evict;          /* 1: when the next token cannot fit even with
                              every unprotected token at the minimum, evict
                              the least important unprotected token (the
                              StreamingLLM / H2O way) instead of returning
                              GB_ERR_CONTEXT_FULL; default 0              */
  uint32_t asymmetric;     /* 1: keys never below 3 bits: the levels are
                              K/V = 3/2, 3/3, 4/4, 8/8 bits; default 0    */
  uint32_t k_critical;     /* prefix tokens kept at 8 bits; default 4     */
  uint32_t k_tail;         /* most recent tokens kept at 8 bits; default 0 */
  uint32_t window;         /* WINDOW / RECENCY: recent tokens kept at 8
                              bits while room allows, also never evicted;
                              default 16                                  */
} gb_kv_options;

/* One logit bias: `bias` is added to token's logit before sampling at every
 * step (-INFINITY bans the token). */
typedef struct gb_logit_bias {
  int32_t token;
  float bias;
} gb_logit_bias;

/* Polled by the session between units of work; nonzero stops the call with
 * GB_ERR_ABORTED. Runs on the calling thread; must not call into the
 * session. */
typedef int (*gb_abort_fn)(void *user);


typedef struct gb_session_options {
  uint32_t struct_size;   /* = sizeof(gb_session_options)                   */
  uint32_t n_ctx;         /* context length in tokens; 0 = the model's seq_len */
  gb_gear gear;           /* LOW, MID, HIGH, F32 (fixed), AUTO (entropy
                             routing), SPEC, or DEFAULT (the default): the
                             file's default tier, which is MID for files
                             made from float weights (MID beat AUTO in loss
                             and bits read on both shared models) and a
                             quantized GGUF source's own tier otherwise    */
  uint32_t n_threads;     /* threads running GEMVs and prefill GEMMs, the
                             calling thread included; 0 or 1 = the calling
                             thread only; at most 256. The workers are
                             started once by gb_session_create (a persistent
                             pool: no thread is created per step) and stopped
                             by gb_session_destroy. Each output row is
                             computed by one thread, so logits never depend
                             on n_threads. Matrices too small to be worth a
                             hand-off stay on the calling thread. Batched
                             passes (prefill chunks, verification) also
                             split norms, activations and attention between
                             the threads; attention takes one scratch set
                             (n_heads x context floats) per thread beyond
                             the first, up to 7. Default 1 */
  uint64_t mem_budget;    /* bytes for arena + resident weight tiers; 0 = none */
  gb_sampler_options sampler;
  gb_log_fn log;          /* NULL: the model's log callback                 */
  void *log_user;
  uint32_t deterministic; /* 1: the portable generic kernels only, so logits
                             do not depend on the CPU model (they never depend
                             on n_threads: each output row is computed by one
                             thread), and the spec gear's draft lengths do
                             not depend on the clock (spec_adapt 2 acts as
                             1); default 0 = fastest kernels present, whose
                             rounding differs by CPU (e.g. on ARM cores with
                             half-precision arithmetic the f16 gear rounds
                             products and sums of four to binary16)         */
  gb_kv_options kv;       /* the KV pool                                   */
  /* Batched prefill (prefill_panel_rows and prefill_blas, below, are in
   * gb_session_experimental). gb_prefill runs its positions in chunks of up to
   * prefill_batch; each weight matrix then multiplies the whole chunk at
   * once. Quantized and f16 matrices go through the multi-position GEMV
   * kernels when the CPU has SIMD ones (AVX-512 here): every weight read
   * from memory once per chunk, integer products for the quantized formats, and
   * each position's result bit for bit that of token-by-token decoding.
   * Except, with prefill_blas 0-2 (not 3) and deterministic = 0, f16
   * matrices where the CPU has a prefill GEMM for them (AVX-512): it sums
   * in another order (results equal decoding's up to float rounding, which
   * can flip the f16 rounding of a later activation: differences of the
   * gear's own size) and runs the 1.1B model's prefill about 1.1x faster;
   * its results do not depend on the chunk size or n_threads.
   * Other matrices (f32 tiers, formats without SIMD multi-position
   * kernels, every matrix with deterministic = 1) go through panels:
   * prefill_panel_rows weight rows of the current gear's tier are expanded
   * to f32 in the arena and multiplied by OpenBLAS (cblas_sgemm) or by the
   * built-in GEMM; or, with prefill_blas 3 (and 1 where OpenBLAS is not
   * built in or deterministic = 1), they too go through the multi-position
   * kernels (generic ones where the CPU has no SIMD ones) and no panels are
   * carved; activations of q8/q4 matrices are quantized exactly as
   * the decode kernels quantize them, so prefill matches token-by-token
   * decoding up to float summation order. Attention runs per position,
   * causally, over the KV cache. Each output row is computed by one thread,
   * so results do not depend on n_threads (they do depend on the kernels:
   * SIMD, built-in GEMM or OpenBLAS). */
  uint32_t prefill_batch;      /* positions per chunk, 1..4096 (capped at
                                  n_ctx); 1 = token by token through the
                                  decode kernels, no scratch. A chunk of one
                                  position always runs that way. The arena
                                  grows by about prefill_batch * (5 * dim +
                                  4 * hidden_dim) floats (per position, one
                                  hidden_dim-wide row holds the activations
                                  rounded for the f16 tier) and 40 bytes
                                  per 32 columns of max(dim, q_dim,
                                  hidden_dim) per position (the activations
                                  quantized for the q8/q4 tiers), plus
                                  prefill_batch * vocab_size floats of logits
                                  for sessions that calibrate the monitor
                                  (GB_GEAR_AUTO, monitor.calibrate = 1: the
                                  calibration needs the entropy of every
                                  prefill position). Default 64              */
  /* GB_GEAR_SPEC (speculative decoding). Each round drafts up to spec_k tokens on the
   * draft tier (with its own KV pool in the arena), runs the verifying tier
   * once over the k + 1 positions (multi-position GEMV kernels: each weight
   * read once), keeps the longest agreeing prefix plus the verifier's own
   * next token and rolls both KV pools back past it. Greedy output equals
   * the verifying tier's alone bit for bit; with sampling the acceptance
   * rule of speculative sampling keeps the verifier's distribution.
   * gb_decode_step still returns one token per call. Needs a single-level
   * KV policy (f32, f16, uniformN) without eviction. */
  uint32_t spec_k;             /* most drafted tokens per round, 1..15; default 15 */
  gb_gear spec_verify_gear;    /* HIGH (default), MID or F32                  */
  gb_gear spec_draft_gear;     /* LOW (default) or MID; below the verifier    */
  /* Generation control (all off by default). Penalties and bias change the
   * logits the sampler draws from (and gb_step_info.logits), after the NaN
   * guard and after the entropy the gear monitor reads; bias first, then
   * penalties. Penalties look at the last penalty_window tokens that ran
   * through the model (prompt included). Not with GB_GEAR_SPEC, whose
   * verification compares unmodified distributions (GB_ERR_INVALID_ARGUMENT). */
  float repeat_penalty;        /* 1 = off, in (0, 100]: a token in the window
                                  has a positive logit divided by it and a
                                  negative one multiplied by it. Default 1  */
  float frequency_penalty;     /* 0 = off, in [-100, 100]: logit -= this x
                                  the token's count in the window            */
  float presence_penalty;      /* 0 = off, in [-100, 100]: logit -= this once
                                  for a token present in the window          */
  uint32_t penalty_window;     /* tokens the penalties look at, 1..65536
                                  (capped at n_ctx). Default 64              */
  const gb_logit_bias *logit_bias; /* n_logit_bias entries, tokens in range,
                                  bias not NaN nor +infinity; copied into the
                                  arena at creation (read only then)         */
  uint32_t n_logit_bias;       /* 0..65536                                    */
  /* Stop strings: gb_decode_step reports (gb_step_info.end = GB_STEP_END_STOP)
   * the step whose token completes one of them in the generated text (the
   * text of the tokens handed out since the last gb_prefill / gb_feed /
   * reset, through the model's tokenizer). The session goes on if called
   * again; the caller stops. */
  const char *const *stop_strings; /* n_stop_strings NUL-terminated strings of
                                  1..256 bytes; copied at creation           */
  uint32_t n_stop_strings;     /* 0..64                                       */
  gb_abort_fn abort_callback;  /* NULL = none. Polled before each decode pass
                                  (gb_decode_step, gb_feed: then nothing has
                                  changed) and before each prefill chunk
                                  (gb_prefill: the chunks already run stay in
                                  the KV cache, gb_session_position tells how
                                  far it got, no token is pending, and the
                                  rest can be given to gb_prefill again)     */
  void *abort_user;            /* passed to abort_callback                    */
  const struct gb_session_experimental *experimental; /* research controls (the
                                  experimental section below); NULL = their
                                  defaults, the measured best. Read at
                                  creation only                               */
  /* Since 0.4: constrained decoding (gb_grammar, below). A session that may hold a
   * grammar reserves at creation: room for a compiled grammar of
   * grammar_max_bytes, its parse state (about 16 x grammar_max_stacks x
   * grammar_max_depth bytes), and an index of the vocabulary's token texts
   * sorted by bytes (16 bytes per token plus the masks). Each
   * gb_decode_step then lets the sampler pick only tokens whose text can
   * continue the grammar, and end-of-generation tokens only where the
   * grammar may end. gb_prefill and gb_feed do not move the grammar: it
   * constrains the tokens gb_decode_step hands out, from the start of the
   * grammar (creation, gb_session_set_grammar, gb_session_reset). */
  const struct gb_grammar *grammar; /* NULL: none at creation. Copied into the
                                  arena; the caller may destroy it after
                                  gb_session_create                          */
  uint32_t grammar_max_bytes;  /* room for grammars set later by
                                  gb_session_set_grammar; 0 = the size of
                                  `grammar` (none: no constrained decoding,
                                  nothing reserved); at most 64 MiB          */
  uint32_t grammar_max_stacks; /* parse stacks alive at once (alternatives
                                  the grammar keeps open), 1..65536;
                                  default 64                                 */
  uint32_t grammar_max_depth;  /* rules nested in one stack, 1..65536;
                                  default 128                                */
} gb_session_options;

void gb_session_options_init(gb_session_options *opts);

/* Bytes of arena a session with these options needs (64-byte aligned
 * memory). The same carving code runs at creation, so the number is exact.
 * Errors: GB_ERR_INVALID_ARGUMENT (with a log line naming the option),
 * GB_ERR_UNAVAILABLE (a requested tier is not in the file),
 * GB_ERR_BUDGET_EXCEEDED (naming the part that does not fit; also when the
 * KV pool cannot hold the protected tokens at 8 bits plus one token at the
 * minimum precision). */
gb_status gb_session_mem_size(const gb_model *model, const gb_session_options *opts,
                              size_t *out_bytes);

/* Create a session. mem: caller memory of mem_bytes (64-byte aligned, at
 * least gb_session_mem_size()), owned by the caller and untouched after
 * gb_session_destroy(); or NULL, and the library obtains the arena once from
 * the platform. The model must outlive the session. After this call nothing
 * allocates. Errors: those of gb_session_mem_size, GB_ERR_ARENA_TOO_SMALL,
 * GB_ERR_ALIGNMENT, GB_ERR_OUT_OF_MEMORY. */
gb_status gb_session_create(const gb_model *model, const gb_session_options *opts, void *mem,
                            size_t mem_bytes, gb_session **out);

/* Forget the context (KV cache, position, monitor history, RNG reseeded from
 * the options' seed). Keeps the arena. */
gb_status gb_session_reset(gb_session *s);

/* Stops the session's worker threads (n_threads > 1), so it must be called
 * for sessions in caller memory too. NULL is a no-op. Frees the arena only
 * if the library obtained it. */
void gb_session_destroy(gb_session *s);

/* One decode step's report. The caller sets struct_size: at least
 * offsetof(gb_step_info, predicted_gear) (the first published layout, which
 * ended at step_ns) and at most sizeof(gb_step_info); the library writes the
 * fields up to it. Any other value: GB_ERR_STRUCT_SIZE from the step, which
 * then runs nothing. logits stays valid until the next call on the session. */
typedef struct gb_step_info {
  uint32_t struct_size;
  int32_t token;            /* sampled token (-1 for gb_feed)                */
  uint32_t pos;             /* position of the forward pass that ran        */
  gb_gear gear;             /* tier the managed matrices used in this pass  */
  gb_gear next_gear;        /* tier chosen for the next pass                */
  uint32_t shifted;         /* 1 if next_gear != gear                       */
  uint32_t tokens_in_gear;  /* consecutive passes in `gear`, this one included */
  float entropy;            /* bits, of the model's distribution (T = 1)    */
  float entropy_smoothed;   /* rolling mean the monitor used                */
  const float *logits;      /* (vocab_size) after the NaN/inf guard          */
  uint32_t n_vocab;
  uint64_t weight_bytes_read; /* bytes of weight matrices streamed this pass */
  uint64_t weights_read;      /* weights in those matrices                  */
  uint64_t step_ns;           /* wall time of the call                       */
  gb_gear predicted_gear;     /* slope forecast of the gear                  */
  uint32_t catastrophic;      /* 1 if the catastrophic-entropy rule fired     */
  uint64_t resident_weight_bytes; /* weight tier bytes resident in this process,
                                 measured from the OS at creation and when a
                                 shift's release completes (cached in
                                 between); 0 = unknown or measure_residency
                                 off                                        */
  float theta_low, theta_high;    /* thresholds in force (bits, after scaling
                                     or calibration)                        */
  /* KV pool, after this pass's token was stored: */
  uint64_t kv_bytes_used;     /* payload + scales of the cached tokens, all
                                 layers                                     */
  uint64_t kv_pool_bytes;     /* the fixed pool (never exceeded)            */
  uint32_t kv_tokens;         /* tokens in the cache                        */
  uint32_t kv_tokens_at_bits[6]; /* (token, layer) pairs stored at 2, 3, 4,
                                 8, 16 and 32 bits per element (keys' bits
                                 when K/V are asymmetric)                   */
  float kv_bits_per_element;  /* (payload + scale) bits / cached elements  */
  uint64_t kv_reallocations;  /* allocator runs since creation / reset      */
  uint64_t kv_requantized;    /* (token, layer) step-downs since reset      */
  uint64_t kv_evicted;        /* tokens evicted since creation / reset      */
  /* GB_GEAR_SPEC: the round this token came from (reported with each of
   * its tokens); weight_bytes_read is the round's drafting + verification
   * on the call that ran it and 0 on the calls that hand out its tokens. */
  uint32_t spec_drafted;      /* tokens the draft proposed                   */
  uint32_t spec_accepted;     /* of those, accepted by the verifier          */
  uint32_t spec_round;        /* 1 if this call ran a round                  */
  /* Generation control (gb_decode_step; 0 for gb_feed): */
  uint32_t end;               /* gb_step_end: why generation should end here */
  uint32_t stop_index;        /* GB_STEP_END_STOP: which stop string matched  */
  uint32_t stop_trim;         /* GB_STEP_END_STOP: bytes at the end of the
                                 generated text (this token's text included)
                                 that belong to the stop string: drop them */
  /* Since 0.4, constrained decoding (0 without a grammar): */
  uint64_t grammar_ns;        /* time this call spent finding the grammar's
                                 token masks (all the positions of a
                                 speculative round on the call that ran it) */
  uint32_t grammar_allowed;   /* tokens the last mask of this call allowed */
} gb_step_info;

/* gb_step_info.end. */
typedef enum gb_step_end {
  GB_STEP_END_NONE = 0,
  GB_STEP_END_EOG = 1,  /* the token is end-of-generation for the tokenizer
                           (EOS, end of turn, end of message)              */
  GB_STEP_END_STOP = 2, /* the generated text now contains a stop string  */
  GB_STEP_END_MAX_ENUM = 0x7fffffff
} gb_step_end;

/* Feed prompt tokens. All but the last are run through the model into the KV
 * cache (batched: see prefill_batch); the last becomes the pending input of
 * the next gb_decode_step(). The first prefill of a GB_GEAR_AUTO session
 * with monitor.calibrate computes the logits of those positions to
 * calibrate the monitor's thresholds. Runs on the current gear; does not
 * allocate.
 * May be called repeatedly to extend the context. Errors:
 * GB_ERR_TOKEN_OUT_OF_RANGE (nothing fed), GB_ERR_CONTEXT_FULL (nothing fed
 * if the tokens would not fit: past n_ctx, or more tokens than the KV pool
 * holds with every unprotected token at its minimum precision, unless
 * kv.evict is set), GB_ERR_INVALID_ARGUMENT for n_tokens == 0. */
gb_status gb_prefill(gb_session *s, const int32_t *tokens, size_t n_tokens);

/* One decode step: run the pending token through the model (one forward
 * pass on the current gear), compute the entropy, update the gear monitor,
 * sample the next token, make it pending, and report it in *info (info may
 * be NULL; *token_out may be NULL). Before the pass the KV pool makes room
 * for the token by lowering the precision of older tokens (per the kv
 * policy). Errors: GB_ERR_BAD_STATE (nothing pending: call gb_prefill
 * first), GB_ERR_CONTEXT_FULL (position n_ctx reached, or the token cannot
 * fit in the KV pool even with every unprotected token at the minimum
 * precision and kv.evict is 0; nothing changed, the pending token stays),
 * GB_ERR_STRUCT_SIZE (info's struct_size outside the range gb_step_info
 * documents; nothing run, nothing written). */
gb_status gb_decode_step(gb_session *s, int32_t *token_out, gb_step_info *info);

/* Teacher forcing: run `token` (instead of a sampled one) through the model
 * at the next position, update the monitor exactly as gb_decode_step does,
 * and report the logits predicting the position after it. Any pending token
 * is discarded first without being run. Used for scoring text. Errors:
 * GB_ERR_TOKEN_OUT_OF_RANGE, GB_ERR_CONTEXT_FULL, GB_ERR_STRUCT_SIZE (as for
 * gb_decode_step); nothing changed on any of them. */
gb_status gb_feed(gb_session *s, int32_t token, gb_step_info *info);

/* The KV pool as sized for these options, without creating a session:
 * *pool_bytes (payload + scales, all layers: the global layers' pool and
 * the sliding-window layers' rings, which hold their window plus the
 * longest batch of positions) and *max_tokens (tokens it
 * holds with every unprotected token at the minimum precision; at most
 * n_ctx). Either pointer may be NULL. Errors: as gb_session_mem_size. */
gb_status gb_kv_pool_size(const gb_model *model, const gb_session_options *opts, uint64_t *pool_bytes,
                          uint32_t *max_tokens);

/* ------------------------------------------------------------------------ */
/* Session state                                                             */
/* ------------------------------------------------------------------------ */

/* A session's state as a byte image: position, pending token, the KV pool's
 * tokens (records at their bit levels, scales, importance statistics, free
 * lists), the monitor (gear, window, thresholds, tokens in gear), the
 * sampler's RNG, the penalty ring and stop-string tail, and for the spec gear
 * the draft's pool and the token history. Loading it into a session of the
 * same model with compatible options and decoding gives the tokens and
 * logits the saved session would have given. The image is little-endian,
 * carries a magic, a version, a CRC32 of its body and a hash of the model
 * (the .gbx metadata and section checksums). A fresh session (nothing
 * prefilled) may be saved and loaded too.
 *
 * gb_session_state_size: *out_bytes = the bytes a save needs now (it grows
 * with the tokens in the KV pool). gb_session_state_max_size: an upper bound
 * for any state of this session (every slot of the pool filled), for sizing
 * one buffer once. Errors: GB_ERR_NULL_POINTER; GB_ERR_BAD_STATE (spec gear
 * in the middle of a round, see below). */
gb_status gb_session_state_size(const gb_session *s, size_t *out_bytes);
gb_status gb_session_state_max_size(const gb_session *s, size_t *out_bytes);

/* Serialize into buf (cap bytes). No allocation. *n_out = bytes written; on
 * GB_ERR_BUFFER_TOO_SMALL *n_out = bytes needed and nothing is written.
 * A spec-gear session can be saved only between rounds (every token of the
 * last verify round handed out; always true right after gb_prefill / gb_feed):
 * GB_ERR_BAD_STATE otherwise, decode on and try again. Errors:
 * GB_ERR_NULL_POINTER (s or n_out NULL, or buf NULL with cap > 0). */
gb_status gb_session_state_save(const gb_session *s, void *buf, size_t cap, size_t *n_out);

/* Restore an image into s. The whole image is checked before anything of
 * s changes: on any error s is exactly as before (and the log names the
 * cause). Errors: GB_ERR_NULL_POINTER; GB_ERR_BAD_MAGIC; GB_ERR_UNSUPPORTED_VERSION;
 * GB_ERR_TRUNCATED (len shorter than the image announces); GB_ERR_CHECKSUM
 * (body CRC); GB_ERR_CORRUPT (inconsistent fields behind a valid CRC);
 * GB_ERR_INVALID_ARGUMENT (another model, or options that change the state's
 * meaning: gear policy, spec settings, monitor window, penalty window, stop
 * strings' length, KV policy, its levels or parameters); GB_ERR_CONTEXT_FULL
 * (s's n_ctx is below the saved position: a larger n_ctx is fine);
 * GB_ERR_BUDGET_EXCEEDED (s's KV pool cannot hold the saved tokens' slots or
 * pages). Sampler options (temperature, top-k, ...) and the abort callback
 * are s's own; the RNG state comes from the image. */
gb_status gb_session_state_load(gb_session *s, const void *buf, size_t len);

/* Current position (tokens in the KV cache) and context capacity. */
gb_status gb_session_position(const gb_session *s, uint32_t *pos, uint32_t *n_ctx);

/* ------------------------------------------------------------------------ */
/* Budget planner                                                            */
/* ------------------------------------------------------------------------ */

/* What a plan gave up against the best configuration (bits of
 * gb_plan_report.gave_up). */
#define GB_PLAN_GAVE_UP_PREFILL 1u   /* a smaller prefill batch: slower prompts   */
#define GB_PLAN_GAVE_UP_KV 2u        /* a KV cache below f32 (f16, or a budgeted pool) */
#define GB_PLAN_GAVE_UP_KV_LOSSY 4u  /* a pool small enough to cost quality
                                        (beta < 0.25, measured) or evicting  */
#define GB_PLAN_GAVE_UP_GEAR 8u      /* a weight tier below the file's default  */

typedef struct gb_plan_report {
  uint32_t struct_size;     /* set by the caller to sizeof(gb_plan_report)   */
  uint64_t budget_bytes;    /* the budget planned for                        */
  uint64_t arena_bytes;     /* the session's one allocation                  */
  uint64_t kv_pool_bytes;   /* of which the KV pool                          */
  uint64_t weight_bytes;    /* resident weights counted against the budget:
                               the common section and the tiers the gear
                               enters (as the session's budget check counts) */
  uint32_t n_ctx;           /* context planned                               */
  gb_gear gear;             /* chosen gear (a tier: LOW, MID, HIGH, F32)    */
  gb_kv_policy kv_policy;   /* chosen KV policy                              */
  float kv_beta;            /* chosen pool fraction (0: no budget)           */
  uint32_t kv_evict;        /* 1: the pool evicts when full                  */
  uint32_t prefill_batch;   /* chosen prefill batch                          */
  uint32_t gave_up;         /* GB_PLAN_GAVE_UP_* bits                        */
  uint32_t candidates_tried;/* configurations checked before this one fit   */
  /* Since 0.6: */
  uint64_t streamed_bytes;  /* weights read through the mapping a row per
                               token and not counted against the budget
                               (the per-layer input table of gemma4)     */
} gb_plan_report;

/* Fill *opts with the best configuration of `model` that fits `budget_bytes`
 * (session arena + resident weights, the accounting of
 * gb_session_options.mem_budget, which the plan sets) for a context of n_ctx
 * tokens (0: the model's). *opts comes in initialised (gb_session_options_init)
 * with the caller's other choices (threads, sampler, log, generation
 * control, experimental controls), which are kept; the planner sets gear, kv
 * (policy, beta, evict), prefill_batch, n_ctx and mem_budget. Lower tiers the
 * file lacks count where the session could build them (the experimental
 * lazy_tiers, on by default).
 *
 * Preference order (quality first, from the measurements in docs/RESULTS.md:
 * the file's default tier is the best measured trade; a KV pool of beta >=
 * 0.25 with the window policy costs no measurable NLL; the lower tier, beta
 * 0.2 and beta 0.16 each cost some): for each step the largest prefill batch
 * of 64, 16, 1 that fits (speed is given up before quality), then
 *   1. default tier, KV f32, f16, window beta 0.5, 0.25 (lossless)
 *   2. default tier, window beta 0.2
 *   3. each lower tier (by bits per weight; built lazily when the file lacks
 *      it and has a source for it), KV as in 1 and then beta 0.2
 *   4. every tier from the default down, window beta 0.16, then beta 0.14
 *      with eviction
 * The first that fits wins. report (NULL allowed; struct_size must be set)
 * gets its byte breakdown and what was given up. Errors: GB_ERR_NULL_POINTER,
 * GB_ERR_STRUCT_SIZE, GB_ERR_INVALID_ARGUMENT (opts invalid apart from the
 * planned fields, budget 0), GB_ERR_BUDGET_EXCEEDED (nothing fits: the log
 * names the smallest configuration's bytes); *opts is written only on
 * success. Does not allocate. */
gb_status gb_plan(const gb_model *model, uint64_t budget_bytes, uint32_t n_ctx, gb_session_options *opts,
                  gb_plan_report *report);

/* ------------------------------------------------------------------------ */
/* Chat templates                                                            */
/* ------------------------------------------------------------------------ */

/* Built-in chat templates: each renders exactly what the model family's own
 * Jinja template (tokenizer.chat_template) renders for plain text messages,
 * including the BOS text where that template writes it (so tokenize the
 * result without GB_TOKENIZE_ADD_BOS where the template already writes it,
 * and with special-token parsing so the markers become their ids). */
typedef enum gb_chat_template {
  GB_CHAT_TEMPLATE_NONE = 0,   /* not a template (never returned on success) */
  GB_CHAT_TEMPLATE_LLAMA2 = 1, /* "llama2": <s>[INST] <<SYS>>\n..\n<</SYS>>\n\n.. [/INST] .. </s> */
  GB_CHAT_TEMPLATE_LLAMA3 = 2, /* "llama3": <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\n..<|eot_id|> */
  GB_CHAT_TEMPLATE_CHATML = 3, /* "chatml": <|im_start|>role\n..<|im_end|>\n, no default system */
  GB_CHAT_TEMPLATE_ZEPHYR = 4, /* "zephyr": <|user|>\n..</s>\n (also TinyLlama chat) */
  GB_CHAT_TEMPLATE_PHI3 = 5,   /* "phi3": <|user|>\n..<|end|>\n */
  GB_CHAT_TEMPLATE_GEMMA = 6,  /* "gemma": <bos><start_of_turn>user\n..<end_of_turn>\n, role "model" */
  GB_CHAT_TEMPLATE_QWEN2 = 7,  /* "qwen2": ChatML with Qwen2's default system message */
  GB_CHAT_TEMPLATE_QWEN25 = 8, /* "qwen2.5": ChatML with Qwen2.5's default system message */
  GB_CHAT_TEMPLATE_QWEN3 = 9,  /* "qwen3": ChatML, no default system message, <think>
                                  reasoning blocks kept after the last user turn */
  GB_CHAT_TEMPLATE_PHI4_MINI = 10, /* "phi4-mini": <|user|>..<|end|> with no newlines
                                      (Phi-4-mini-instruct) */
  GB_CHAT_TEMPLATE_PHI4 = 11,  /* "phi4": <|im_start|>role<|im_sep|>..<|im_end|> (Phi-4) */
  GB_CHAT_TEMPLATE_SMOLLM3 = 12, /* "smollm3": ChatML behind SmolLM3's metadata system turn
                                    ("Reasoning Mode: /think" or "/no_think") */
  GB_CHAT_TEMPLATE_LLAMA31 = 13, /* "llama3.1": Llama 3.1 / 3.2 / 3.3: llama3 with a system
                                    turn that always carries the knowledge and today's
                                    date (gb_chat_options.date) */
  /* Since 0.6: */
  GB_CHAT_TEMPLATE_LFM2 = 14,  /* "lfm2": <|startoftext|> then ChatML; tools listed in the
                                  system turn between <|tool_list_start|> and
                                  <|tool_list_end|>, tool results between
                                  <|tool_response_start|> and <|tool_response_end|> */
  GB_CHAT_TEMPLATE_LFM25 = 15, /* "lfm2.5": <|startoftext|> then ChatML; tools listed in
                                  the system turn; reasoning dropped from assistant
                                  turns but the last */
  GB_CHAT_TEMPLATE_QWEN35 = 16, /* "qwen3.5": Qwen3's reasoning blocks (every assistant
                                   turn after the last user query gets one), tools in
                                   an XML function format, the generation prompt opens
                                   a <think> block */
  GB_CHAT_TEMPLATE_GEMMA4 = 17, /* "gemma4": <bos><|turn>user\n..<turn|>\n, role "model",
                                   a system turn (with <|think|> when thinking is on);
                                   the reasoning channel <|channel>..<channel|> dropped
                                   from model turns; no tool role or definitions */
  GB_CHAT_TEMPLATE_MAX_ENUM = 0x7fffffff
} gb_chat_template;

/* One message: role is "system", "user", "assistant" or "tool" (exact
 * spelling); both strings NUL-terminated UTF-8, owned by the caller, read
 * only during the call that receives them. "tool" (the result of a tool
 * call, as text) is taken by the templates that have such a turn: qwen2.5,
 * qwen3 and smollm3 write it inside a user turn (qwen's between
 * <tool_response> tags, consecutive results in one turn), llama3.1 as an
 * "ipython" turn holding the text as a JSON string. An assistant turn that
 * called tools is passed as the text the model wrote, its tool-call markup
 * included: that is what these templates render for the calls. */
typedef struct gb_chat_message {
  const char *role;
  const char *content;
} gb_chat_message;

/* The template's name as listed above ("llama2", ..., "qwen3"); "unknown"
 * for any other value. Static storage, never NULL; thread-safe. */
const char *gb_chat_template_name(gb_chat_template t);

/* The reverse of gb_chat_template_name (exact spelling). Errors:
 * GB_ERR_NULL_POINTER, GB_ERR_INVALID_ARGUMENT for any other name; *out is
 * written only on success. Thread-safe; does not allocate. */
gb_status gb_chat_template_from_name(const char *name, gb_chat_template *out);

/* Recognise a model's chat template from its Jinja text (the GGUF key
 * tokenizer.chat_template; `len` bytes, need not be NUL-terminated) by the
 * markers that distinguish the families. A template that is none of the
 * built-in ones, or one of their relatives that renders differently (for
 * example Llama 3.1's dated system header, Mistral's [INST] without <<SYS>>,
 * a ChatML template with an unknown default system message or with
 * reasoning blocks other than Qwen3's, such as Qwen3.5's or QwQ's), is not
 * guessed:
 * GB_ERR_UNAVAILABLE (gb_chat_template_from_name can still pick one). Errors also: GB_ERR_NULL_POINTER (text NULL
 * with len > 0, or out NULL). *out is written only on success. Thread-safe;
 * does not allocate. */
gb_status gb_chat_template_detect(const char *text, size_t len, gb_chat_template *out);

/* Render msgs[0..n) with template t into buf as NUL-terminated UTF-8.
 * add_assistant_prompt (0 or 1): append the template's opening of an
 * assistant turn, where the template has one (llama2's has none; phi3's
 * template writes its end-of-text marker instead when it is 0). Contents are
 * copied as given, except where the model's template trims them (llama2,
 * llama3, gemma strip leading and trailing Unicode white space as Python's
 * str.strip() does). Roles: llama2 and gemma take an optional first system
 * message, then user and assistant alternating, starting with user (their
 * templates refuse anything else: GB_ERR_INVALID_ARGUMENT); gemma folds the
 * system text into the first user turn as Gemma 3's template does; the other
 * templates take the three roles in any order. qwen3 splits an assistant
 * text at "</think>" as Qwen3's template does: turns before the last user
 * message keep only the answer after it; later ones are written with their
 * reasoning in a <think> block (the last one always, with an empty block
 * when it has none); the assistant prompt leaves the model free to think.
 * smollm3 always writes its system turn (metadata, reasoning mode, the
 * system text without its "/think" and "/no_think" tags, or the template's
 * default instructions) and writes only the first message's system text.
 * On success *n_out is the text's length (without the NUL). When cap is too
 * small (it must be at least length + 1), GB_ERR_BUFFER_TOO_SMALL: *n_out
 * receives the capacity needed and nothing is written (buf may be NULL when
 * cap is 0, to ask for the size). Errors: GB_ERR_NULL_POINTER (msgs, a role
 * or a content NULL, n_out NULL, buf NULL with cap > 0),
 * GB_ERR_INVALID_ARGUMENT (n == 0, an unknown template or role, roles out of
 * the template's order, add_assistant_prompt not 0 or 1). Thread-safe; does
 * not allocate. */
gb_status gb_chat_apply(gb_chat_template t, const gb_chat_message *msgs, size_t n, int add_assistant_prompt,
                        char *buf, size_t cap, size_t *n_out);

/* Since 0.5: rendering with options (gb_chat_apply_ex). */
typedef struct gb_chat_options {
  uint32_t struct_size;         /* = sizeof(gb_chat_options)                     */
  int32_t add_assistant_prompt; /* 0 or 1 (default 1), as in gb_chat_apply       */
  /* Tool definitions: a JSON array (tools_len bytes, need not be
   * NUL-terminated) of objects as chat APIs take them, either
   * {"type": "function", "function": {"name": ..., "description": ...,
   * "parameters": JSON Schema}} or the inner object alone. Every name is 1-64
   * characters of [A-Za-z0-9_-]; "parameters", when present, is an object.
   * NULL: no tools. The templates that define tools render each entry as
   * written here (re-serialized as Python's json.dumps does): qwen2.5 and
   * qwen3 in the system turn inside <tools></tools> (no tools block for an
   * empty array), llama3.1 in the first user turn, indented by 4. */
  const char *tools;
  size_t tools_len;
  /* llama3.1's "Today Date" text (for example "29 Nov 2026": Llama 3.2's
   * template writes the day of rendering, 3.1's and 3.3's this default).
   * NULL: "26 Jul 2024". Other templates ignore it. */
  const char *date;
  /* 1 (default): the model may reason first; 0: qwen3's assistant prompt
   * closes an empty <think> block, smollm3 runs in "/no_think" mode unless
   * the system text says "/think", gemma4 writes no <|think|> and its
   * assistant prompt holds an empty thought channel (their
   * enable_thinking=false). Other templates ignore it. */
  int32_t thinking;
} gb_chat_options;

void gb_chat_options_init(gb_chat_options *opts);

/* gb_chat_apply with options (NULL: the defaults). Errors: those of
 * gb_chat_apply, GB_ERR_STRUCT_SIZE, GB_ERR_SYNTAX (tools is not JSON:
 * the log line names the offset), GB_ERR_INVALID_ARGUMENT (tools not an
 * array of tool objects, a bad name, thinking not 0 or 1, llama3.1 with
 * tools but no message to carry them), GB_ERR_UNSUPPORTED_FEATURE (tools
 * for a template that defines none). Thread-safe; does not allocate. */
gb_status gb_chat_apply_ex(gb_chat_template t, const gb_chat_message *msgs, size_t n, const gb_chat_options *opts,
                           char *buf, size_t cap, size_t *n_out);

/* ---- tool calls ---- */

/* One call found by gb_tool_calls_parse: offsets into the parsed text. The
 * name is the JSON string's content (names have no escapes; gemma4: the
 * name after "call:"); arguments is the object text as the model wrote it
 * (JSON; gemma4: its own value syntax, which gb_tool_call_arguments_json
 * turns into JSON). */
typedef struct gb_tool_call {
  size_t name_offset, name_len;
  size_t arguments_offset, arguments_len;
} gb_tool_call;

/* The tool calls in an assistant reply `text` (len bytes) written in the
 * format of template t: qwen2.5 and qwen3, one or more
 * "<tool_call>" {"name": NAME, "arguments": {...}} "</tool_call>" blocks
 * (any JSON white space inside the tags, line breaks between blocks);
 * llama3.1, a reply that is (after an optional "<|python_tag|>" and white
 * space) one JSON object {"name": NAME, "parameters": {...}} ("arguments"
 * also taken), or several separated by ';'; gemma4, one or more
 * "<|tool_call>call:NAME{...}<tool_call|>" (white space between them; after
 * the last, "<|tool_response>" may end the reply), the arguments in Gemma
 * 4's syntax: strings between <|"|> markers, bare keys, None for null.
 * The text before the first call
 * is the reply's content: *content_len receives its length (len when there
 * is no call). A reply with no call is not an error: *n_calls = 0. On
 * GB_ERR_BUFFER_TOO_SMALL *n_calls receives the number of calls and nothing
 * is written. Errors: GB_ERR_NULL_POINTER, GB_ERR_SYNTAX (a call that is not
 * well-formed: the log line names the offset), GB_ERR_UNSUPPORTED_FEATURE
 * (a template without tool calls). Thread-safe; does not allocate. */
gb_status gb_tool_calls_parse(gb_chat_template t, const char *text, size_t len, gb_tool_call *calls, size_t cap,
                              size_t *n_calls, size_t *content_len);

/* The arguments of a call gb_tool_calls_parse found in `text` (the same
 * text and template) as JSON text, NUL-terminated, into buf (cap bytes):
 * for the JSON formats the object as written; for gemma4 its values
 * converted (strings escaped as JSON, keys quoted, None as null, white
 * space between parts dropped, the order kept). *n_out receives the length
 * without the NUL; on GB_ERR_BUFFER_TOO_SMALL the bytes needed with it,
 * and nothing is written. Errors: GB_ERR_NULL_POINTER,
 * GB_ERR_INVALID_ARGUMENT (a call whose arguments are not inside text),
 * GB_ERR_SYNTAX (the span is not one well-formed object), GB_ERR_UNSUPPORTED_FEATURE
 * (a template without tool calls). Thread-safe; does not allocate. */
gb_status gb_tool_call_arguments_json(gb_chat_template t, const char *text, size_t len, const gb_tool_call *call, char *buf,
                                      size_t cap, size_t *n_out);

/* How gb_grammar_from_tools constrains a reply. */
typedef enum gb_tool_choice {
  GB_TOOL_CHOICE_REQUIRED = 0, /* the reply is one or more tool calls */
  GB_TOOL_CHOICE_AUTO = 1,     /* a tool call, or a text reply that does not start
                                  with the call format's first character ('<' for
                                  qwen, '{' for llama3.1) */
  GB_TOOL_CHOICE_MAX_ENUM = 0x7fffffff
} gb_tool_choice;

/* GBNF text (for gb_grammar_create) whose start rule "root" matches the
 * tool calls of template t (qwen2.5, qwen3, llama3.1; gemma4's call syntax
 * has no grammar yet: GB_ERR_UNSUPPORTED_FEATURE) for the tools (the
 * JSON array described at gb_chat_options.tools): each call names one of
 * the tools and its arguments match that tool's "parameters" schema, as
 * gb_grammar_from_json_schema converts it (no "parameters": any object);
 * the call is written exactly as the template writes a call in the
 * conversation. max_calls (>= 1) bounds the calls in one reply (llama3.1: 1
 * only). Output, statuses and sizes as gb_grammar_from_json_schema; also
 * GB_ERR_INVALID_ARGUMENT (an empty tools array, max_calls 0 or > 1 for
 * llama3.1, an unknown tool_choice), GB_ERR_UNSUPPORTED_FEATURE (a template
 * without tool calls, or a schema keyword the converter does not take: the
 * log line names the tool). Thread-safe; does not allocate. */
gb_status gb_grammar_from_tools(gb_chat_template t, const char *tools, size_t tools_len, gb_tool_choice choice,
                                uint32_t max_calls, char *buf, size_t cap, size_t *n_out);

/* The strings that end the assistant's turn for template t (stop generating
 * when the output ends with one of them): e.g. "<|eot_id|>" for llama3,
 * "<|im_end|>" for chatml, "<end_of_turn>" for gemma, "<|end|>" for phi3,
 * "</s>" for llama2 and zephyr, plus the family's end-of-text token where it
 * differs. *strings receives a static array of *count NUL-terminated
 * strings (followed by a NULL entry), never freed. Errors:
 * GB_ERR_NULL_POINTER, GB_ERR_INVALID_ARGUMENT (unknown template); nothing
 * written on error. Thread-safe. */
gb_status gb_chat_eot_strings(gb_chat_template t, const char *const **strings, size_t *count);

/* ------------------------------------------------------------------------ */
/* Streaming UTF-8                                                           */
/* ------------------------------------------------------------------------ */

/* Turns token bytes, pushed one token at a time, into text that contains
 * only complete UTF-8 sequences: the start of a multi-byte character that a
 * token leaves unfinished is held until the next push completes it.
 * Ill-formed input is never dropped and never passed through: each maximal
 * ill-formed subpart (a byte that cannot start a sequence, an overlong or
 * surrogate or out-of-range form, a sequence cut short by a byte that cannot
 * continue it or by the flush) becomes one U+FFFD (EF BF BD), the
 * replacement practice Unicode recommends (chapter 3, "U+FFFD
 * Substitution of Maximal Subparts"). The state is small and owned by the
 * caller (stack, struct member); its contents are private. One stream per
 * thread at a time; nothing allocates. */
typedef struct gb_utf8_stream {
  uint32_t opaque_[2];
} gb_utf8_stream;

/* Output capacity that always suffices for a push of `len` bytes (and, with
 * len 0, for a flush). */
#define GB_UTF8_STREAM_CAPACITY(len) ((size_t)(len) * 3u + 3u)

/* Start (or restart) a stream, discarding anything held. NULL is a no-op. */
void gb_utf8_stream_init(gb_utf8_stream *s);

/* Feed len bytes (bytes may be NULL when len is 0) and write the complete
 * text they finish into out (no NUL added); *n_out is its length. When cap
 * is smaller than the text, GB_ERR_BUFFER_TOO_SMALL: *n_out receives the
 * capacity needed, nothing is written and the stream is unchanged (out may
 * be NULL when cap is 0). Errors: GB_ERR_NULL_POINTER (s or n_out NULL,
 * bytes NULL with len > 0, out NULL with cap > 0), GB_ERR_BAD_STATE (the
 * contents of *s are not a state gb_utf8_stream_init started: a struct never
 * initialised or overwritten is refused when it does not look like one). */
gb_status gb_utf8_stream_push(gb_utf8_stream *s, const char *bytes, size_t len, char *out, size_t cap,
                              size_t *n_out);

/* End of input: write U+FFFD for a held incomplete sequence (0 or 3 bytes)
 * and leave the stream initialised for new input. Errors: as
 * gb_utf8_stream_push (GB_ERR_BUFFER_TOO_SMALL: nothing written, nothing
 * discarded). */
gb_status gb_utf8_stream_flush(gb_utf8_stream *s, char *out, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Experimental: research controls                                           */
/* ------------------------------------------------------------------------ */
/* Everything above this section is the stable interface: it keeps its
 * meaning, names and layout (structs only grow at the end, with struct_size)
 * within a major version. What follows tunes the mechanisms gearbx was built
 * to study (entropy-routed gears, which matrices follow the gear, lazy tiers
 * and residency, the KV importance statistics and the SEED allocator, the
 * prefill panels, the speculative gear's draft-length rule). Their defaults
 * are the measured best and integrators need not set any of them; names,
 * meanings and layout may change in any minor version. A session reads them
 * through gb_session_options.experimental (NULL: the defaults). */

typedef enum gb_managed_set {
  GB_MANAGED_ALL = 0,       /* every linear layer and the classifier follow the gear */
  GB_MANAGED_ATTENTION = 1, /* only Q, K, V, O follow it; the rest stay at base_gear */
  GB_MANAGED_MAX_ENUM = 0x7fffffff
} gb_managed_set;

/* Entropy monitor: picks each pass's gear from the Shannon entropy (bits) of
 * the logits. Thresholds are for the reference vocabulary and scale by
 * log2(V) / log2(vocab_ref). */
typedef struct gb_monitor_options {
  uint32_t window;            /* rolling mean window; default 5            */
  float theta_low;            /* bits, default 1.8                          */
  float theta_high;           /* bits, default 3.5                          */
  float hysteresis;           /* bits, default 0.1                          */
  uint32_t min_gear_duration; /* tokens a gear is held; default 4           */
  uint32_t vocab_ref;         /* default 32768                              */
  gb_gear initial_gear;       /* gear before any entropy is seen; default HIGH */
  /* prediction and safety */
  uint32_t lookahead;         /* L of the slope forecast H + L*dH; default 2, 0 = off */
  uint32_t prewarm;           /* 1: hint the predicted gear's tier in (WILLNEED); default 1 */
  float catastrophic_frac;    /* fall back to high when the last catastrophic_run
                                 entropies exceed this fraction of log2 V;
                                 default 0.9, 0 = off */
  uint32_t catastrophic_run;  /* default 2                                   */
  /* percentile calibration from the prefill's logits (gb_prefill) */
  uint32_t calibrate;         /* 1: calibrate at the first prefill; default 1 */
  uint32_t calib_min_samples; /* fewer prefill entropies: keep the defaults; 5 */
  float calib_p_low;          /* percentile of theta_low; default 0.30      */
  float calib_p_high;         /* percentile of theta_high; default 0.60     */
  float calib_cap_low;        /* theta_low <= this * log2 V; default 0.06   */
  float calib_cap_high;       /* theta_high <= this * log2 V; default 0.12  */
  float calib_min_band;       /* narrower bands widen around their centre; 0.2 bits */
  /* cold-start prompt classifier (gb_classify_prompt) */
  float classify_high;        /* score >= this starts in high; default 4.0 */
  float classify_mid;         /* score >= this starts in mid; default 1.5  */
} gb_monitor_options;

/* The KV pool's research parameters: the importance statistics and the
 * SEED allocator (inside gb_session_experimental). */
typedef struct gb_kv_experimental {
  float gamma;             /* token importance EMA decay; default 0.9     */
  float gamma_head;        /* head importance EMA decay; default 0.95     */
  float recency_T;         /* recency temperature in steps; default 512   */
  float alpha;             /* SEED: utility exponent; default 0.6         */
  float eps_importance;    /* SEED: importance floor; default 1e-6        */
  uint32_t f_base;         /* SEED: base reallocation interval; default 16 */
  float rank_threshold;    /* SEED hysteresis: percentile move r; 0.05    */
  uint32_t rank_intervals; /* SEED hysteresis: checks m; default 2        */
  float drift_kl;          /* SEED: KL(I_t || I_last) triggering an early
                              reallocation; default 0.02                  */
} gb_kv_experimental;

typedef struct gb_session_experimental {
  uint32_t struct_size;   /* = sizeof(gb_session_experimental)               */
  gb_managed_set managed; /* default GB_MANAGED_ALL                          */
  gb_gear base_gear;      /* tier of unmanaged matrices (managed other than
                             ALL; unused, so not required, with ALL);
                             default HIGH                                  */
  gb_monitor_options monitor;
  uint32_t lazy_tiers;    /* 1: a low or mid tier missing from the file is
                             quantized from its f32 or high tier into the
                             session's arena on first entry and cached (a
                             warning is logged when the source looks already
                             quantized); 0: such a tier is
                             GB_ERR_UNAVAILABLE. Default 1                   */
  uint32_t release_steps; /* a shift returns the pages of the tiers left
                             behind to the OS (MADV_DONTNEED on a mapped
                             file) spread over this many decode steps, so no
                             single step pays for a whole tier; 0 or 1 = all
                             at the shift. Default 16                        */
  uint32_t measure_residency; /* 1: gb_step_info.resident_weight_bytes is
                             measured from the OS (/proc/self/pagemap) at
                             creation and whenever a release completes; it
                             reads 8 bytes per 4 KiB page of the file's
                             tiers (tens of µs per 10 MB). Default 0: the
                             field reads 0                                  */
  gb_kv_experimental kv;  /* the KV pool's research parameters              */
  uint32_t prefill_panel_rows; /* weight rows expanded per panel, 1..65536;
                                  the arena holds max(1, n_threads) panels of
                                  prefill_panel_rows * max(dim, q_dim,
                                  hidden_dim) floats (none when prefill_blas
                                  runs as 3). Default 64                     */
  uint32_t prefill_blas;       /* for the panels (above): 0: the built-in
                                  GEMM (portable, same results on every CPU
                                  with deterministic = 1, but slow: about a
                                  third of token-by-token speed for q4/q8
                                  tiers on an AVX2 host); 1: OpenBLAS when
                                  the library was built with it (CMake
                                  GEARBX_WITH_OPENBLAS, posix builds), else
                                  the panels' matrices go as with 3 (the f16
                                  prefill GEMM still runs); 2: OpenBLAS, or
                                  GB_ERR_UNAVAILABLE
                                  when it is not built in; 3: no panels,
                                  every matrix through the multi-position
                                  kernels: each position's result is bit for
                                  bit token-by-token decoding's, and the
                                  arena holds no panels (nor does the f16
                                  prefill GEMM run). With deterministic
                                  = 1, 1 runs as 3 on the generic kernels
                                  (and 2 is GB_ERR_INVALID_ARGUMENT).
                                  OpenBLAS allocates its own buffers outside
                                  the arena (at its load and first use, not
                                  counted by gb_session_mem_size), and a
                                  session that uses it calls
                                  openblas_set_num_threads(1) at creation,
                                  for the whole process: gearbx divides the
                                  panels among its own n_threads. Default 1  */
  float spec_stop_entropy;     /* stop drafting at a draft position whose
                                  entropy (bits, T = 1) exceeds this: it is
                                  likely rejected; 0 = never. Default 0      */
  uint32_t spec_adapt;         /* 1: each round drafts the k <= spec_k that
                                  minimizes the expected weight bytes per
                                  token, from the acceptance rate so far
                                  (per-position acceptance a: a round of k
                                  drafts yields 1 + a(1 - a^k)/(1 - a) tokens
                                  for k draft passes and one verify pass);
                                  k may be 0 (the verifier's own decode step)
                                  when drafts do not pay, with a one-draft
                                  probe every 16th such round. The rate
                                  starts, after create and reset, at 3/4
                                  with the weight of two judged drafts,
                                  decayed with the measured ones (one early
                                  rejection does not stop drafting).
                                  2: the same rule on measured times instead
                                  of bytes (running estimates of one draft
                                  position's pass and of the verify pass per
                                  draft length, from the port's clock; bytes
                                  where the port has no clock). It starts at
                                  one draft and tries one length more than
                                  it has measured at a time, and counts that
                                  a verify pass of k + 1 positions costs more
                                  than one of a single position where the
                                  CPU, not memory, is the limit. The draft
                                  lengths then depend on timing, so sampled
                                  (T > 0) output is not reproducible from
                                  the seed alone (greedy output is the
                                  verifier's either way); with
                                  deterministic = 1 it acts as 1.
                                  0: always spec_k. Default 2 (measured:
                                  1.3-1.6x the high gear's tokens/s on a
                                  DRAM-bound 1.1B model where 1 gave
                                  1.1-1.4x, and equal on the shared models) */
} gb_session_experimental;

/* Fill *x with the defaults (what a NULL gb_session_options.experimental
 * means). NULL is a no-op. */
void gb_session_experimental_init(gb_session_experimental *x);

/* ------------------------------------------------------------------------ */
/* Constrained decoding: grammars                                            */
/* ------------------------------------------------------------------------ */

/* A compiled grammar in the GBNF notation llama.cpp users write:
 *   name ::= alternative | alternative ...     (one rule per definition; a
 *            newline ends it except after "|", "::=" or inside parentheses)
 *   "literal" with escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH,
 *   [a-z0-9_] character classes with ranges, escapes and [^...] negation,
 *   . (any character), rule names, ( groups ), and the repetitions x* x+ x?
 *   x{m} x{m,} x{m,n} x{,n}; # starts a comment to the end of the line.
 * Characters are Unicode code points; the grammar is compiled to an
 * automaton over their UTF-8 bytes, so a token that ends inside a
 * multi-byte character is allowed exactly when its bytes can still be
 * completed. Left recursion (a rule that can reach itself before reading a
 * character) is refused with GB_ERR_UNSUPPORTED_FEATURE. A gb_grammar is
 * read-only after creation except for gb_grammar_match's work space: one
 * thread at a time per grammar for that call; sessions copy the image. */
typedef struct gb_grammar gb_grammar;

typedef struct gb_grammar_options {
  uint32_t struct_size; /* = sizeof(gb_grammar_options)                    */
  const char *root;     /* NUL-terminated name of the start rule; NULL = "root" */
  gb_log_fn log;        /* where syntax errors are reported; NULL: the default sink */
  void *log_user;
  uint32_t max_stacks;  /* gb_grammar_match's limits, as the session's
                           grammar_max_stacks / _depth; defaults 64 / 128  */
  uint32_t max_depth;
} gb_grammar_options;

void gb_grammar_options_init(gb_grammar_options *opts);

/* Bytes of memory (8-byte aligned) gb_grammar_create needs for this text:
 * the compiled image plus gb_grammar_match's work space. Parses and checks
 * the whole grammar. Errors: GB_ERR_NULL_POINTER, GB_ERR_STRUCT_SIZE,
 * GB_ERR_INVALID_ARGUMENT (limits out of range, text over 16 MiB),
 * GB_ERR_SYNTAX (line and column in the log line: unknown escape, missing
 * "::=", unclosed quote, class or group, an undefined rule, a rule defined
 * twice, no root rule), GB_ERR_UNSUPPORTED_FEATURE (left recursion, a
 * repetition count over 1000, a grammar over 16M words compiled). */
gb_status gb_grammar_mem_size(const char *text, size_t len, const gb_grammar_options *opts, size_t *out_bytes);

/* Compile text into mem (mem_bytes >= gb_grammar_mem_size, 8-byte aligned,
 * owned by the caller and untouched after gb_grammar_destroy), or into
 * memory the library obtains once when mem is NULL. The text is not kept.
 * Errors: those of gb_grammar_mem_size, GB_ERR_ALIGNMENT,
 * GB_ERR_ARENA_TOO_SMALL, GB_ERR_OUT_OF_MEMORY. */
gb_status gb_grammar_create(const char *text, size_t len, const gb_grammar_options *opts, void *mem, size_t mem_bytes,
                            gb_grammar **out);

/* NULL is a no-op; frees the memory only if the library obtained it. */
void gb_grammar_destroy(gb_grammar *g);

/* Bytes of the compiled image (what a session's grammar_max_bytes must
 * hold for it). Errors: GB_ERR_NULL_POINTER, GB_ERR_BAD_HANDLE. */
gb_status gb_grammar_image_size(const gb_grammar *g, size_t *out_bytes);

/* gb_grammar_match results. */
typedef enum gb_grammar_match_result {
  GB_GRAMMAR_MATCH_NONE = 0,     /* no string of the grammar starts with the text */
  GB_GRAMMAR_MATCH_PREFIX = 1,   /* the text can be continued into one       */
  GB_GRAMMAR_MATCH_COMPLETE = 2, /* the text is a string of the grammar (it may
                                    also continue)                          */
  GB_GRAMMAR_MATCH_MAX_ENUM = 0x7fffffff
} gb_grammar_match_result;

/* Whether text[0..len) (bytes) is in the grammar's language, or a prefix of
 * a string in it: what the session's token mask is built from, for
 * validating text outside a session. Errors: GB_ERR_NULL_POINTER,
 * GB_ERR_BAD_HANDLE, GB_ERR_GRAMMAR_LIMIT (the parse state outgrew the
 * grammar's max_stacks / max_depth). Not thread-safe on one grammar. */
gb_status gb_grammar_match(gb_grammar *g, const char *text, size_t len, gb_grammar_match_result *out);

/* Replace the session's grammar (NULL: none; decoding is unconstrained
 * again). The image is copied into the room the session reserved
 * (gb_session_options.grammar_max_bytes), and the grammar starts afresh:
 * the next token gb_decode_step hands out is its first. A session of the
 * speculative gear drops the tokens of its current round not handed out
 * yet, as gb_prefill does. Errors: GB_ERR_BAD_HANDLE, GB_ERR_UNAVAILABLE
 * (the session reserved no room: grammar_max_bytes 0 and no grammar at
 * creation), GB_ERR_BUDGET_EXCEEDED (the image is larger than the room):
 * then nothing changed; GB_ERR_GRAMMAR_LIMIT (the grammar's start outgrew
 * the session's grammar_max_stacks / _depth): the session is left without
 * a grammar. */
gb_status gb_session_set_grammar(gb_session *s, const gb_grammar *g);

/* Convert a JSON Schema (len bytes of JSON) into GBNF text for
 * gb_grammar_create, whose root rule "root" matches JSON texts the schema
 * accepts. See docs/GRAMMAR.md for the keywords covered. buf receives the
 * text, NUL-terminated; *n_out its length. When cap is too small:
 * GB_ERR_BUFFER_TOO_SMALL with *n_out = the capacity needed (length + 1)
 * and nothing written (buf may be NULL with cap 0). Errors:
 * GB_ERR_NULL_POINTER, GB_ERR_SYNTAX (malformed JSON: the log line names
 * line and column), GB_ERR_UNSUPPORTED_FEATURE (a keyword or value it does
 * not convert, named), GB_ERR_INVALID_ARGUMENT (an inconsistent schema:
 * minItems > maxItems, a $ref that does not resolve). Uses the default log
 * sink; thread-safe; does not allocate (recursion depth at most 64). */
gb_status gb_grammar_from_json_schema(const char *schema, size_t len, char *buf, size_t cap, size_t *n_out);

/* Cold-start prompt classifier (a cheap heuristic for the first gear before
 * any entropy is seen): score = 2*math symbols +
 * 1.5*code/reasoning keywords + 0.3*min(words/50, 3) + 1.5*[mean word
 * length > 6.5]. Returns the gear to start in (opts: the session's monitor
 * thresholds classify_high / classify_mid; NULL = defaults) and the score. */
gb_gear gb_classify_prompt(const char *text, size_t len, const gb_monitor_options *opts, float *score);

/* Set the gear of the next forward pass of an `auto` session (e.g. from
 * gb_classify_prompt); the monitor takes over from there. Errors:
 * GB_ERR_BAD_STATE for a fixed-gear session, GB_ERR_INVALID_ARGUMENT. */
gb_status gb_session_set_gear(gb_session *s, gb_gear gear);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GEARBX_H */
