"""Low-level ctypes mirror of include/gearbx.h (version 0.6).

Everything here follows the C header one to one: the enums as tables of
ints, the structs as ctypes.Structure subclasses with the C field names in
the C order (enums are C ints: 4 bytes), and the prototypes of every
exported function. The public, Pythonic API lives in gearbx/__init__.py;
this module is for it and for callers who need the raw C API.

Layouts are checked against the C compiler by tests/test_gearbx.py.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading

# The C API version this binding mirrors (GB_VERSION_MAJOR / _MINOR).
BINDING_VERSION = (0, 6)

# ---------------------------------------------------------------------------
# Enums (values of include/gearbx.h; never renumbered there)
# ---------------------------------------------------------------------------

GB_OK = 0
STATUS_NAMES = {
    0: "GB_OK",
    100: "GB_ERR_INVALID_ARGUMENT",
    101: "GB_ERR_NULL_POINTER",
    102: "GB_ERR_STRUCT_SIZE",
    103: "GB_ERR_BUFFER_TOO_SMALL",
    104: "GB_ERR_BAD_STATE",
    105: "GB_ERR_TOKEN_OUT_OF_RANGE",
    106: "GB_ERR_ALIGNMENT",
    107: "GB_ERR_UNAVAILABLE",
    108: "GB_ERR_BAD_HANDLE",
    109: "GB_ERR_SYNTAX",
    110: "GB_ERR_UNSUPPORTED_FEATURE",
    200: "GB_ERR_IO",
    201: "GB_ERR_FILE_NOT_FOUND",
    202: "GB_ERR_FILE_CHANGED",
    300: "GB_ERR_BAD_MAGIC",
    301: "GB_ERR_UNSUPPORTED_VERSION",
    302: "GB_ERR_TRUNCATED",
    303: "GB_ERR_CHECKSUM",
    304: "GB_ERR_CORRUPT",
    305: "GB_ERR_UNSUPPORTED_TYPE",
    306: "GB_ERR_MISSING_TENSOR",
    307: "GB_ERR_SHAPE_MISMATCH",
    400: "GB_ERR_OUT_OF_MEMORY",
    401: "GB_ERR_BUDGET_EXCEEDED",
    402: "GB_ERR_ARENA_TOO_SMALL",
    403: "GB_ERR_LOCK_REFUSED",
    500: "GB_ERR_CONTEXT_FULL",
    501: "GB_ERR_ABORTED",
    502: "GB_ERR_GRAMMAR_LIMIT",
    503: "GB_ERR_GRAMMAR_NO_TOKEN",
    599: "GB_ERR_INTERNAL",
}
STATUS_VALUES = {name: value for value, name in STATUS_NAMES.items()}
# Module-level constants: GB_ERR_FILE_NOT_FOUND = 201, ...
globals().update(STATUS_VALUES)

GB_LOG_ERROR, GB_LOG_WARN, GB_LOG_INFO, GB_LOG_DEBUG = 0, 1, 2, 3
LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}

GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32 = 0, 1, 2, 3
GB_GEAR_COUNT = 4
GB_GEAR_AUTO, GB_GEAR_SPEC, GB_GEAR_DEFAULT = 16, 17, 18
GEAR_NAMES = {0: "low", 1: "mid", 2: "high", 3: "f32", 16: "auto", 17: "spec", 18: "default"}

GB_TIER_ORIGIN_UNKNOWN, GB_TIER_ORIGIN_ROUNDED, GB_TIER_ORIGIN_SOURCE, GB_TIER_ORIGIN_REQUANTIZED = 0, 1, 2, 3
TIER_ORIGIN_NAMES = {0: "unknown", 1: "rounded", 2: "source", 3: "requantized"}

GB_VERIFY_AUTO, GB_VERIFY_ALL, GB_VERIFY_METADATA = 0, 1, 2
VERIFY_MODES = {"auto": 0, "all": 1, "metadata": 2}
LOAD_MODES = {"map": 0, "copy": 1, "lock": 2}
GGUF_LAYOUTS = {"auto": 0, "file": 1, "repack": 2}

GB_ROPE_ADJACENT, GB_ROPE_NEOX = 0, 1
ROPE_NAMES = {0: "adjacent", 1: "neox"}

GB_TOKENIZER_LLAMA2C, GB_TOKENIZER_SPM, GB_TOKENIZER_BPE, GB_TOKENIZER_BPE_UTF8 = 1, 2, 3, 4
TOKENIZER_KIND_NAMES = {1: "llama2c", 2: "spm", 3: "bpe", 4: "bpe-utf8"}

GB_TOKENIZE_ADD_BOS = 1
GB_TOKENIZE_NO_DUMMY_PREFIX = 2
GB_TOKENIZE_PARSE_SPECIAL = 4
GB_TOKENIZE_ADD_EOS = 8
GB_DETOKENIZE_SPECIAL = 1
GB_DETOKENIZE_STRIP_SPACE = 2

GB_MANAGED_ALL, GB_MANAGED_ATTENTION = 0, 1
MANAGED_NAMES = {0: "all", 1: "attention"}

GB_SAMPLE_MULTINOMIAL, GB_SAMPLE_GUMBEL = 0, 1
SAMPLE_METHOD_NAMES = {0: "multinomial", 1: "gumbel"}

KV_POLICY_NAMES = {
    0: "default", 1: "f32", 2: "f16", 3: "uniform8", 4: "uniform4", 5: "uniform3", 6: "uniform2",
    7: "seed", 8: "window", 9: "recency",
}

CHAT_TEMPLATE_NAMES = {
    1: "llama2", 2: "llama3", 3: "chatml", 4: "zephyr", 5: "phi3", 6: "gemma", 7: "qwen2", 8: "qwen2.5", 9: "qwen3", 10: "phi4-mini", 11: "phi4", 12: "smollm3",
    13: "llama3.1", 14: "lfm2", 15: "lfm2.5", 16: "qwen3.5", 17: "gemma4",
}


def tokenize_capacity(n_bytes: int) -> int:
    """GB_TOKENIZE_CAPACITY(len): ids gb_tokenize needs for n_bytes of text."""
    return n_bytes * 28 + 64


def utf8_stream_capacity(n_bytes: int) -> int:
    """GB_UTF8_STREAM_CAPACITY(len)."""
    return n_bytes * 3 + 3


# ---------------------------------------------------------------------------
# Structs (field names and order exactly as in the header)
# ---------------------------------------------------------------------------

c_enum = ctypes.c_int  # every gb_* enum is 32 bits (each ends in *_MAX_ENUM = 0x7fffffff)

gb_log_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
gb_abort_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class gb_model_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("verify", c_enum),
        ("verify_auto_limit", ctypes.c_uint64),
        ("log", gb_log_fn),
        ("log_user", ctypes.c_void_p),
        ("log_level", c_enum),
        ("mem", ctypes.c_void_p),
        ("mem_bytes", ctypes.c_size_t),
        ("load", c_enum),
        ("gguf_layout", c_enum),
    ]


class gb_model_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dim", ctypes.c_uint32),
        ("hidden_dim", ctypes.c_uint32),
        ("n_layers", ctypes.c_uint32),
        ("n_heads", ctypes.c_uint32),
        ("n_kv_heads", ctypes.c_uint32),
        ("head_dim", ctypes.c_uint32),
        ("vocab_size", ctypes.c_uint32),
        ("seq_len", ctypes.c_uint32),
        ("rope_type", ctypes.c_uint32),
        ("rope_dim", ctypes.c_uint32),
        ("rope_theta", ctypes.c_float),
        ("norm_eps", ctypes.c_float),
        ("bos_id", ctypes.c_int32),
        ("eos_id", ctypes.c_int32),
        ("unk_id", ctypes.c_int32),
        ("pad_id", ctypes.c_int32),
        ("gears", ctypes.c_uint32),
        ("shared_classifier", ctypes.c_uint32),
        ("file_bytes", ctypes.c_uint64),
        ("n_params", ctypes.c_uint64),
        ("gear_bytes", ctypes.c_uint64 * GB_GEAR_COUNT),
        ("name", ctypes.c_char * 64),
        ("default_gear", c_enum),
        ("tier_origin", ctypes.c_uint32 * GB_GEAR_COUNT),
        ("tier_bits", ctypes.c_float * GB_GEAR_COUNT),
        ("tier_formats", (ctypes.c_char * 32) * GB_GEAR_COUNT),
        ("is_gguf", ctypes.c_uint32),
        ("locked_bytes", ctypes.c_uint64),
        ("n_attention_layers", ctypes.c_uint32),
        ("n_shortconv_layers", ctypes.c_uint32),
        ("n_deltanet_layers", ctypes.c_uint32),
        ("conv_kernel", ctypes.c_uint32),
        ("recurrent_bytes", ctypes.c_uint64),
        ("head_dim_swa", ctypes.c_uint32),
        ("n_kv_heads_swa", ctypes.c_uint32),
        ("n_kv_shared_layers", ctypes.c_uint32),
        ("per_layer_input_bytes", ctypes.c_uint64),
        ("per_layer_input_row_bytes", ctypes.c_uint64),
    ]


class gb_tokenizer_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", c_enum),
        ("n_tokens", ctypes.c_uint32),
        ("bos_id", ctypes.c_int32),
        ("eos_id", ctypes.c_int32),
        ("eot_id", ctypes.c_int32),
        ("eom_id", ctypes.c_int32),
        ("unk_id", ctypes.c_int32),
        ("pad_id", ctypes.c_int32),
        ("add_bos", ctypes.c_uint32),
        ("add_eos", ctypes.c_uint32),
        ("pre", ctypes.c_char * 32),
        ("chat_template_bytes", ctypes.c_uint64),
    ]


class gb_sampler_options(ctypes.Structure):
    _fields_ = [
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_uint32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("seed", ctypes.c_uint64),
        ("method", c_enum),
    ]


class gb_monitor_options(ctypes.Structure):
    _fields_ = [
        ("window", ctypes.c_uint32),
        ("theta_low", ctypes.c_float),
        ("theta_high", ctypes.c_float),
        ("hysteresis", ctypes.c_float),
        ("min_gear_duration", ctypes.c_uint32),
        ("vocab_ref", ctypes.c_uint32),
        ("initial_gear", c_enum),
        ("lookahead", ctypes.c_uint32),
        ("prewarm", ctypes.c_uint32),
        ("catastrophic_frac", ctypes.c_float),
        ("catastrophic_run", ctypes.c_uint32),
        ("calibrate", ctypes.c_uint32),
        ("calib_min_samples", ctypes.c_uint32),
        ("calib_p_low", ctypes.c_float),
        ("calib_p_high", ctypes.c_float),
        ("calib_cap_low", ctypes.c_float),
        ("calib_cap_high", ctypes.c_float),
        ("calib_min_band", ctypes.c_float),
        ("classify_high", ctypes.c_float),
        ("classify_mid", ctypes.c_float),
    ]


class gb_kv_options(ctypes.Structure):
    _fields_ = [
        ("policy", c_enum),
        ("pool_bytes", ctypes.c_uint64),
        ("beta", ctypes.c_float),
        ("evict", ctypes.c_uint32),
        ("asymmetric", ctypes.c_uint32),
        ("k_critical", ctypes.c_uint32),
        ("k_tail", ctypes.c_uint32),
        ("window", ctypes.c_uint32),
    ]


class gb_kv_experimental(ctypes.Structure):
    _fields_ = [
        ("gamma", ctypes.c_float),
        ("gamma_head", ctypes.c_float),
        ("recency_T", ctypes.c_float),
        ("alpha", ctypes.c_float),
        ("eps_importance", ctypes.c_float),
        ("f_base", ctypes.c_uint32),
        ("rank_threshold", ctypes.c_float),
        ("rank_intervals", ctypes.c_uint32),
        ("drift_kl", ctypes.c_float),
    ]


class gb_logit_bias(ctypes.Structure):
    _fields_ = [
        ("token", ctypes.c_int32),
        ("bias", ctypes.c_float),
    ]


class gb_session_experimental(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("managed", c_enum),
        ("base_gear", c_enum),
        ("monitor", gb_monitor_options),
        ("lazy_tiers", ctypes.c_uint32),
        ("release_steps", ctypes.c_uint32),
        ("measure_residency", ctypes.c_uint32),
        ("kv", gb_kv_experimental),
        ("prefill_panel_rows", ctypes.c_uint32),
        ("prefill_blas", ctypes.c_uint32),
        ("spec_stop_entropy", ctypes.c_float),
        ("spec_adapt", ctypes.c_uint32),
    ]


class gb_session_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("n_ctx", ctypes.c_uint32),
        ("gear", c_enum),
        ("n_threads", ctypes.c_uint32),
        ("mem_budget", ctypes.c_uint64),
        ("sampler", gb_sampler_options),
        ("log", gb_log_fn),
        ("log_user", ctypes.c_void_p),
        ("deterministic", ctypes.c_uint32),
        ("kv", gb_kv_options),
        ("prefill_batch", ctypes.c_uint32),
        ("spec_k", ctypes.c_uint32),
        ("spec_verify_gear", c_enum),
        ("spec_draft_gear", c_enum),
        ("repeat_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
        ("presence_penalty", ctypes.c_float),
        ("penalty_window", ctypes.c_uint32),
        ("logit_bias", ctypes.POINTER(gb_logit_bias)),
        ("n_logit_bias", ctypes.c_uint32),
        ("stop_strings", ctypes.POINTER(ctypes.c_char_p)),
        ("n_stop_strings", ctypes.c_uint32),
        ("abort_callback", gb_abort_fn),
        ("abort_user", ctypes.c_void_p),
        ("experimental", ctypes.POINTER(gb_session_experimental)),
        ("grammar", ctypes.c_void_p),
        ("grammar_max_bytes", ctypes.c_uint32),
        ("grammar_max_stacks", ctypes.c_uint32),
        ("grammar_max_depth", ctypes.c_uint32),
    ]


class gb_step_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("token", ctypes.c_int32),
        ("pos", ctypes.c_uint32),
        ("gear", c_enum),
        ("next_gear", c_enum),
        ("shifted", ctypes.c_uint32),
        ("tokens_in_gear", ctypes.c_uint32),
        ("entropy", ctypes.c_float),
        ("entropy_smoothed", ctypes.c_float),
        ("logits", ctypes.POINTER(ctypes.c_float)),
        ("n_vocab", ctypes.c_uint32),
        ("weight_bytes_read", ctypes.c_uint64),
        ("weights_read", ctypes.c_uint64),
        ("step_ns", ctypes.c_uint64),
        ("predicted_gear", c_enum),
        ("catastrophic", ctypes.c_uint32),
        ("resident_weight_bytes", ctypes.c_uint64),
        ("theta_low", ctypes.c_float),
        ("theta_high", ctypes.c_float),
        ("kv_bytes_used", ctypes.c_uint64),
        ("kv_pool_bytes", ctypes.c_uint64),
        ("kv_tokens", ctypes.c_uint32),
        ("kv_tokens_at_bits", ctypes.c_uint32 * 6),
        ("kv_bits_per_element", ctypes.c_float),
        ("kv_reallocations", ctypes.c_uint64),
        ("kv_requantized", ctypes.c_uint64),
        ("kv_evicted", ctypes.c_uint64),
        ("spec_drafted", ctypes.c_uint32),
        ("spec_accepted", ctypes.c_uint32),
        ("spec_round", ctypes.c_uint32),
        ("end", ctypes.c_uint32),
        ("stop_index", ctypes.c_uint32),
        ("stop_trim", ctypes.c_uint32),
        ("grammar_ns", ctypes.c_uint64),
        ("grammar_allowed", ctypes.c_uint32),
    ]


class gb_plan_report(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("budget_bytes", ctypes.c_uint64),
        ("arena_bytes", ctypes.c_uint64),
        ("kv_pool_bytes", ctypes.c_uint64),
        ("weight_bytes", ctypes.c_uint64),
        ("n_ctx", ctypes.c_uint32),
        ("gear", c_enum),
        ("kv_policy", c_enum),
        ("kv_beta", ctypes.c_float),
        ("kv_evict", ctypes.c_uint32),
        ("prefill_batch", ctypes.c_uint32),
        ("gave_up", ctypes.c_uint32),
        ("candidates_tried", ctypes.c_uint32),
        ("streamed_bytes", ctypes.c_uint64),
    ]


class gb_grammar_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("root", ctypes.c_char_p),
        ("log", gb_log_fn),
        ("log_user", ctypes.c_void_p),
        ("max_stacks", ctypes.c_uint32),
        ("max_depth", ctypes.c_uint32),
    ]


class gb_chat_message(ctypes.Structure):
    _fields_ = [
        ("role", ctypes.c_char_p),
        ("content", ctypes.c_char_p),
    ]


class gb_chat_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("add_assistant_prompt", ctypes.c_int32),
        ("tools", ctypes.c_char_p),
        ("tools_len", ctypes.c_size_t),
        ("date", ctypes.c_char_p),
        ("thinking", ctypes.c_int32),
    ]


class gb_tool_call(ctypes.Structure):
    _fields_ = [
        ("name_offset", ctypes.c_size_t),
        ("name_len", ctypes.c_size_t),
        ("arguments_offset", ctypes.c_size_t),
        ("arguments_len", ctypes.c_size_t),
    ]


class gb_utf8_stream(ctypes.Structure):
    _fields_ = [
        ("opaque_", ctypes.c_uint32 * 2),
    ]


# Every mirrored struct, by its C name (the layout test walks this).
STRUCTS = {
    cls.__name__: cls
    for cls in (
        gb_model_options, gb_model_info, gb_tokenizer_info, gb_sampler_options, gb_monitor_options,
        gb_kv_options, gb_kv_experimental, gb_session_experimental, gb_logit_bias, gb_session_options, gb_step_info,
        gb_plan_report, gb_grammar_options, gb_chat_message, gb_chat_options, gb_tool_call, gb_utf8_stream,
    )
}

# ---------------------------------------------------------------------------
# Prototypes
# ---------------------------------------------------------------------------

_P = ctypes.POINTER
_vp = ctypes.c_void_p  # opaque handles (gb_model *, gb_session *, gb_tokenizer *)
_st = ctypes.c_int     # gb_status
_sz = ctypes.c_size_t
_i32 = ctypes.c_int32
_u32 = ctypes.c_uint32
_u64 = ctypes.c_uint64
_ccp = ctypes.c_char_p

PROTOTYPES = {
    # name: (restype, argtypes)
    "gb_version": (_u32, []),
    "gb_version_string": (_ccp, []),
    "gb_status_str": (_ccp, [_st]),
    "gb_gear_name": (_ccp, [c_enum]),
    "gb_gear_from_name": (_st, [_ccp, _P(c_enum)]),
    "gb_model_options_init": (None, [_P(gb_model_options)]),
    "gb_model_open_file": (_st, [_ccp, _P(gb_model_options), _P(_vp)]),
    "gb_model_open_memory": (_st, [_vp, _sz, _P(gb_model_options), _P(_vp)]),
    "gb_model_mem_size": (_st, [_vp, _sz, _P(gb_model_options), _P(_sz)]),
    "gb_model_get_info": (_st, [_vp, _P(gb_model_info)]),
    "gb_model_verify": (_st, [_vp]),
    "gb_model_close": (None, [_vp]),
    "gb_model_tokenizer": (_st, [_vp, _P(_vp)]),
    "gb_tokenizer_mem_size": (_st, [_vp, _sz, _P(_sz)]),
    "gb_tokenizer_open_memory": (_st, [_vp, _sz, _P(gb_model_options), _P(_vp)]),
    "gb_tokenizer_close": (None, [_vp]),
    "gb_tokenizer_get_info": (_st, [_vp, _P(gb_tokenizer_info)]),
    "gb_tokenizer_encode": (_st, [_vp, _ccp, _sz, _u32, _P(_i32), _sz, _P(_sz)]),
    "gb_tokenizer_token_text": (_st, [_vp, _i32, _i32, _P(_vp), _P(_sz)]),
    "gb_tokenizer_decode": (_st, [_vp, _P(_i32), _sz, _u32, _vp, _sz, _P(_sz)]),
    "gb_tokenizer_is_eog": (_st, [_vp, _i32, _P(ctypes.c_int)]),
    "gb_tokenizer_chat_template": (_st, [_vp, _P(_vp), _P(_sz)]),
    "gb_tokenize": (_st, [_vp, _ccp, _sz, _u32, _P(_i32), _sz, _P(_sz)]),
    "gb_token_to_text": (_st, [_vp, _i32, _i32, _P(_vp), _P(_sz)]),
    "gb_kv_policy_name": (_ccp, [c_enum]),
    "gb_kv_policy_from_name": (_st, [_ccp, _P(c_enum)]),
    "gb_session_options_init": (None, [_P(gb_session_options)]),
    "gb_session_experimental_init": (None, [_P(gb_session_experimental)]),
    "gb_session_mem_size": (_st, [_vp, _P(gb_session_options), _P(_sz)]),
    "gb_plan": (_st, [_vp, _u64, _u32, _P(gb_session_options), _P(gb_plan_report)]),
    "gb_session_create": (_st, [_vp, _P(gb_session_options), _vp, _sz, _P(_vp)]),
    "gb_session_reset": (_st, [_vp]),
    "gb_session_destroy": (None, [_vp]),
    "gb_prefill": (_st, [_vp, _P(_i32), _sz]),
    "gb_decode_step": (_st, [_vp, _P(_i32), _P(gb_step_info)]),
    "gb_feed": (_st, [_vp, _i32, _P(gb_step_info)]),
    "gb_classify_prompt": (c_enum, [_ccp, _sz, _P(gb_monitor_options), _P(ctypes.c_float)]),
    "gb_session_set_gear": (_st, [_vp, c_enum]),
    "gb_kv_pool_size": (_st, [_vp, _P(gb_session_options), _P(_u64), _P(_u32)]),
    "gb_session_position": (_st, [_vp, _P(_u32), _P(_u32)]),
    "gb_session_state_size": (_st, [_vp, _P(_sz)]),
    "gb_session_state_max_size": (_st, [_vp, _P(_sz)]),
    "gb_session_state_save": (_st, [_vp, _vp, _sz, _P(_sz)]),
    "gb_session_state_load": (_st, [_vp, _vp, _sz]),
    "gb_chat_template_name": (_ccp, [c_enum]),
    "gb_chat_template_from_name": (_st, [_ccp, _P(c_enum)]),
    "gb_chat_template_detect": (_st, [_ccp, _sz, _P(c_enum)]),
    "gb_chat_apply": (_st, [c_enum, _P(gb_chat_message), _sz, ctypes.c_int, _vp, _sz, _P(_sz)]),
    "gb_chat_eot_strings": (_st, [c_enum, _P(_P(_ccp)), _P(_sz)]),
    "gb_chat_options_init": (None, [_P(gb_chat_options)]),
    "gb_chat_apply_ex": (_st, [c_enum, _P(gb_chat_message), _sz, _P(gb_chat_options), _vp, _sz, _P(_sz)]),
    "gb_tool_calls_parse": (_st, [c_enum, _ccp, _sz, _P(gb_tool_call), _sz, _P(_sz), _P(_sz)]),
    "gb_tool_call_arguments_json": (_st, [c_enum, _ccp, _sz, _P(gb_tool_call), _vp, _sz, _P(_sz)]),
    "gb_grammar_from_tools": (_st, [c_enum, _ccp, _sz, c_enum, _u32, _vp, _sz, _P(_sz)]),
    "gb_grammar_options_init": (None, [_P(gb_grammar_options)]),
    "gb_grammar_mem_size": (_st, [_ccp, _sz, _P(gb_grammar_options), _P(_sz)]),
    "gb_grammar_create": (_st, [_ccp, _sz, _P(gb_grammar_options), _vp, _sz, _P(_vp)]),
    "gb_grammar_destroy": (None, [_vp]),
    "gb_grammar_image_size": (_st, [_vp, _P(_sz)]),
    "gb_grammar_match": (_st, [_vp, _ccp, _sz, _P(c_enum)]),
    "gb_session_set_grammar": (_st, [_vp, _vp]),
    "gb_grammar_from_json_schema": (_st, [_ccp, _sz, _vp, _sz, _P(_sz)]),
    "gb_utf8_stream_init": (None, [_P(gb_utf8_stream)]),
    "gb_utf8_stream_push": (_st, [_P(gb_utf8_stream), _ccp, _sz, _vp, _sz, _P(_sz)]),
    "gb_utf8_stream_flush": (_st, [_P(gb_utf8_stream), _vp, _sz, _P(_sz)]),
}

# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


class LibraryError(OSError):
    """libgearbx.so could not be found or loaded, or is not the API version
    this binding was written for."""


_lib = None
_lib_path = None
_lock = threading.Lock()


def _candidates():
    """Paths to try, in order, when GEARBX_LIBRARY is not set."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for d in (here, os.path.dirname(here)):
        exact = [os.path.join(d, n) for n in ("libgearbx.so", "libgearbx.so.0")]
        others = sorted(set(glob.glob(os.path.join(d, "libgearbx.so.*"))) - set(exact), reverse=True)
        out += [p for p in exact + others if os.path.exists(p)]
    found = ctypes.util.find_library("gearbx")
    if found:
        out.append(found)
    out.append("libgearbx.so.0")
    return out


def check_version(number: int) -> None:
    """Raise LibraryError unless gb_version() `number` is BINDING_VERSION's major.minor."""
    major, minor = number // 10000, (number // 100) % 100
    if (major, minor) != BINDING_VERSION:
        raise LibraryError(
            "libgearbx reports version %d.%d.%d (gb_version() = %d) but this binding was written for %d.%d.x; "
            "use the gearbx Python package that ships with that library"
            % (major, minor, number % 100, number, BINDING_VERSION[0], BINDING_VERSION[1]))


def _bind(lib):
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryError("libgearbx at %s does not export %s: not a gearbx %d.%d library"
                               % (_describe(lib), name, *BINDING_VERSION)) from None
        fn.restype = restype
        fn.argtypes = argtypes


def _describe(lib):
    return getattr(lib, "_name", "?")


def load(path: str | os.PathLike | None = None):
    """Load libgearbx (once per process) and return the ctypes.CDLL.

    path: an explicit file; otherwise the GEARBX_LIBRARY environment variable,
    then libgearbx.so* next to this package (gearbx/ or its parent folder),
    then the system loader (ctypes.util.find_library("gearbx"), then
    "libgearbx.so.0"). Raises LibraryError when nothing loads or the
    library's version is not BINDING_VERSION (major.minor). A second call with
    a different explicit path after the library is loaded is refused."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            if path is not None and os.fspath(path) != _lib_path:
                raise LibraryError("libgearbx is already loaded from %s" % _lib_path)
            return _lib
        env = os.environ.get("GEARBX_LIBRARY")
        if path is not None:
            tries, source = [os.fspath(path)], "the path given to gearbx.load()"
        elif env:
            tries, source = [env], "GEARBX_LIBRARY"
        else:
            tries, source = _candidates(), None
        errors = []
        lib = None
        for p in tries:
            try:
                lib = ctypes.CDLL(p)
                break
            except OSError as e:
                errors.append("%s: %s" % (p, e))
        if lib is None:
            where = ("from %s" % source) if source else "(searched GEARBX_LIBRARY, the package folder, the loader)"
            raise LibraryError("cannot load libgearbx %s:\n  %s\nSet GEARBX_LIBRARY to the path of libgearbx.so."
                               % (where, "\n  ".join(errors)))
        try:
            version = lib.gb_version
        except AttributeError:
            raise LibraryError("%s is not libgearbx (no gb_version)" % p) from None
        version.restype = ctypes.c_uint32
        version.argtypes = []
        check_version(int(version()))
        _bind(lib)
        _lib, _lib_path = lib, p
        return lib


def library_path() -> str | None:
    """The path (or loader name) libgearbx was loaded from; None before load()."""
    return _lib_path


def lib():
    """The loaded library (loading it on first use)."""
    return _lib if _lib is not None else load()
