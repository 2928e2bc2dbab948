"""gearbx: Python binding (ctypes, standard library only) over libgearbx.so.

    import gearbx
    with gearbx.Model("model.gbx") as model:
        with model.session(temperature=0) as s:
            s.prefill(model.tokenize("Once upon a time"))
            for step in s.generate(64):
                print(step.text, end="", flush=True)

The library is found through GEARBX_LIBRARY, then libgearbx.so* next to this
package, then the system loader (see gearbx._capi.load), on first use.

Conventions:
 - Every non-OK gb_status raises GearbxError (.status, .name, .message,
   .detail: the library's last error log line for the call, when there was one).
 - Gears and KV policies are given and reported by name ("low", "mid",
   "high", "f32", "auto", "spec", "default"; "window", "f16", ...); other
   enum-valued fields stay ints (with *_name helpers).
 - A Session keeps its Model alive. Model.close() first destroys the
   sessions still open on it; any later use of them (or of the model) raises
   ClosedError, never crashes.
 - A Session is used by one thread at a time (as in C); a Model's tokenizer
   may be used from any number of threads.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import threading
import weakref
from typing import Iterable, Iterator, Mapping, Sequence

from . import _capi
from ._capi import (  # noqa: F401  (re-exported)
    BINDING_VERSION,
    CHAT_TEMPLATE_NAMES,
    GEAR_NAMES,
    KV_POLICY_NAMES,
    STATUS_NAMES,
    STATUS_VALUES,
    TOKENIZER_KIND_NAMES,
    LibraryError,
    library_path,
    load,
)

__all__ = [
    "GearbxError", "ClosedError", "LibraryError", "Model", "Session", "Step", "StepInfo", "ModelInfo", "Grammar",
    "json_schema_to_grammar", "tools_to_grammar", "parse_tool_calls", "TOOL_CHOICES",
    "TokenizerInfo", "Utf8Stream", "apply_chat_template", "chat_eot_strings", "detect_chat_template",
    "classify_prompt", "version", "version_number", "load", "library_path", "status_name",
    "GEAR_NAMES", "KV_POLICY_NAMES", "CHAT_TEMPLATE_NAMES", "STATUS_NAMES",
]

_c = ctypes
_log = logging.getLogger("gearbx")

# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def status_name(status: int) -> str:
    """The C enumerator's name of a gb_status ("GB_ERR_FILE_NOT_FOUND");
    "GB_STATUS_<n>" for a value the header does not define."""
    return STATUS_NAMES.get(int(status), "GB_STATUS_%d" % int(status))


class GearbxError(Exception):
    """A gearbx call returned a status other than GB_OK.

    status: the gb_status int; name: its enumerator ("GB_ERR_CONTEXT_FULL");
    message: gb_status_str's description; detail: the last error line the
    library logged during the call (or None); call: the C function."""

    def __init__(self, status: int, call: str | None = None, detail: str | None = None, message: str | None = None):
        self.status = int(status)
        self.name = status_name(self.status)
        if message is None:
            try:
                message = _capi.lib().gb_status_str(self.status).decode("utf-8", "replace")
            except Exception:  # library not loadable: the name says enough
                message = self.name
        self.message = message
        self.detail = detail
        self.call = call
        text = "%s (%d): %s" % (self.name, self.status, message)
        if call:
            text = "%s: %s" % (call, text)
        if detail:
            text += " [%s]" % detail
        super().__init__(text)


class ClosedError(GearbxError, ValueError):
    """Use of a Model or Session after close() (status GB_ERR_BAD_STATE). Also a ValueError,
    as for operations on a closed Python file."""

    def __init__(self, what: str):
        super().__init__(_capi.GB_ERR_BAD_STATE, None, None, "%s is closed" % what)


class _LogSink:
    """Receives the library's log lines for one model (and its sessions):
    remembers the last ERROR line per thread (for GearbxError.detail) and
    forwards every line to the user's callable, or to logging.getLogger("gearbx").
    On the logger, ERROR lines go out at DEBUG level: each one comes with a
    failing call, hence with a GearbxError that carries it as .detail."""

    _PY_LEVELS = {0: logging.DEBUG, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}
    _NAMES = {0: "error", 1: "warn", 2: "info", 3: "debug"}

    def __init__(self, user):
        self.user = user
        self.tls = threading.local()
        # The C function pointer: referenced by the owner for as long as the
        # library may call it (the model's life).
        self.cfn = _capi.gb_log_fn(self._on_log)

    def _on_log(self, _user, level, message):
        text = message.decode("utf-8", "replace") if message else ""
        if level == _capi.GB_LOG_ERROR:
            self.tls.last = text
        try:
            if self.user is not None:
                self.user(self._NAMES.get(level, str(level)), text)
            else:
                _log.log(self._PY_LEVELS.get(level, logging.DEBUG), "%s", text)
        except Exception:  # never let an exception unwind into C
            logging.getLogger("gearbx").exception("gearbx log callback failed")

    def clear(self):
        self.tls.last = None

    def take(self):
        last = getattr(self.tls, "last", None)
        self.tls.last = None
        return last


def _check(status: int, call: str, sink: _LogSink | None = None) -> None:
    if status != _capi.GB_OK:
        raise GearbxError(status, call, sink.take() if sink else None)


def _s(b) -> str:
    return b.decode("utf-8", "replace") if b else ""


def _cstr(value, what: str) -> bytes:
    """str / bytes / PathLike -> NUL-free bytes for a const char * argument."""
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    elif isinstance(value, os.PathLike):
        data = os.fsencode(value)
    else:
        raise TypeError("%s must be str or bytes, not %s" % (what, type(value).__name__))
    if b"\0" in data:
        raise ValueError("%s contains a NUL character" % what)
    return data


# ---------------------------------------------------------------------------
# Library-level functions
# ---------------------------------------------------------------------------


def version() -> str:
    """The library's "MAJOR.MINOR.PATCH" (gb_version_string)."""
    return _s(_capi.lib().gb_version_string())


def version_number() -> int:
    """gb_version(): MAJOR * 10000 + MINOR * 100 + PATCH."""
    return int(_capi.lib().gb_version())


def _enum_from_name(fn_name: str, value, what: str, names: Mapping[int, str]) -> int:
    if isinstance(value, bool):
        raise TypeError("%s must be a name or an int" % what)
    if isinstance(value, int):
        return value
    if not isinstance(value, (str, bytes)):
        raise TypeError("%s must be a name (str) or an int, not %s" % (what, type(value).__name__))
    out = _capi.c_enum()
    data = _cstr(value, what)
    if getattr(_capi.lib(), fn_name)(data, _c.byref(out)) != _capi.GB_OK:
        raise ValueError("unknown %s %r: expected one of %s" % (what, value, ", ".join(names.values())))
    return out.value


def _gear(value, what: str = "gear") -> int:
    return _enum_from_name("gb_gear_from_name", value, what, GEAR_NAMES)


def _gear_name(value: int) -> str:
    return GEAR_NAMES.get(value, "unknown")


def _kv_policy(value) -> int:
    return _enum_from_name("gb_kv_policy_from_name", value, "KV policy", KV_POLICY_NAMES)


def _chat_template(value) -> int:
    return _enum_from_name("gb_chat_template_from_name", value, "chat template", CHAT_TEMPLATE_NAMES)


def _table_value(value, what: str, table: Mapping[int, str]) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    for k, v in table.items():
        if v == value:
            return k
    raise ValueError("unknown %s %r: expected one of %s" % (what, value, ", ".join(table.values())))


def json_schema_to_grammar(schema) -> str:
    """The GBNF text of a JSON Schema (gb_grammar_from_json_schema): schema
    is JSON text (str / bytes) or a JSON-serializable object (dict)."""
    if not isinstance(schema, (str, bytes)):
        schema = json.dumps(schema)
    data = _cstr(schema, "schema")
    lib = _capi.lib()
    n = _c.c_size_t()
    st = lib.gb_grammar_from_json_schema(data, len(data), None, 0, _c.byref(n))
    if st != _capi.GB_ERR_BUFFER_TOO_SMALL:
        _check(st, "gb_grammar_from_json_schema")
    buf = _c.create_string_buffer(n.value)
    _check(lib.gb_grammar_from_json_schema(data, len(data), buf, len(buf), _c.byref(n)), "gb_grammar_from_json_schema")
    return buf.raw[: n.value].decode("utf-8")


def _tools_text(tools) -> bytes:
    if not isinstance(tools, (str, bytes)):
        tools = json.dumps(tools)
    return _cstr(tools, "tools")


def apply_chat_template(template, messages: Iterable, add_assistant: bool = True, *, tools=None,
                        date: str | None = None, thinking: bool = True) -> str:
    """Render chat messages with a built-in template (gb_chat_apply_ex).

    template: a name ("llama2", "llama3", "llama3.1", "chatml", "zephyr", "phi3", "gemma",
    "qwen2", "qwen2.5", "qwen3", "qwen3.5", "phi4-mini", "phi4", "smollm3", "lfm2", "lfm2.5", "gemma4") or its int. messages: mappings with "role" and
    "content", or (role, content) pairs; roles "system", "user", "assistant", and "tool" (a tool's
    result) for qwen2.5, qwen3, smollm3 and llama3.1. add_assistant: append the opening of an
    assistant turn. tools: tool definitions (a list of dicts, or its JSON text) for qwen2.5, qwen3 and
    llama3.1. date: llama3.1's "Today Date" text. thinking=False: qwen3 / smollm3 without reasoning.
    Tokenize the result with parse_special=True, and add_bos=False where the template writes the BOS
    text itself."""
    t = _chat_template(template)
    keep = []
    msgs = []
    for i, m in enumerate(messages):
        if isinstance(m, Mapping):
            role, content = m["role"], m["content"]
        else:
            role, content = m
        r = _cstr(role, "messages[%d] role" % i)
        c = _cstr(content, "messages[%d] content" % i)
        keep += [r, c]
        msgs.append((r, c))
    arr = (_capi.gb_chat_message * max(1, len(msgs)))()
    for i, (r, c) in enumerate(msgs):
        arr[i].role, arr[i].content = r, c
    lib = _capi.lib()
    o = _capi.gb_chat_options()
    lib.gb_chat_options_init(_c.byref(o))
    o.add_assistant_prompt = 1 if add_assistant else 0
    o.thinking = 1 if thinking else 0
    if tools is not None:
        tools_b = _tools_text(tools)
        o.tools, o.tools_len = tools_b, len(tools_b)
    if date is not None:
        date_b = _cstr(date, "date")
        o.date = date_b
    n = _c.c_size_t()
    st = lib.gb_chat_apply_ex(t, arr, len(msgs), _c.byref(o), None, 0, _c.byref(n))
    if st != _capi.GB_ERR_BUFFER_TOO_SMALL:
        _check(st, "gb_chat_apply_ex")
    buf = _c.create_string_buffer(n.value)
    _check(lib.gb_chat_apply_ex(t, arr, len(msgs), _c.byref(o), buf, len(buf), _c.byref(n)), "gb_chat_apply_ex")
    return buf.raw[: n.value].decode("utf-8", "replace")


TOOL_CHOICES = ("required", "auto")


def tools_to_grammar(template, tools, choice: str = "auto", max_calls: int = 1) -> str:
    """The GBNF text of template's tool calls for these tools (gb_grammar_from_tools): each call
    names one of the tools with arguments valid for its "parameters" schema. choice "required":
    the reply is one or more calls (at most max_calls); "auto": a call or a text reply."""
    t = _chat_template(template)
    if choice not in TOOL_CHOICES:
        raise ValueError("choice must be 'required' or 'auto', not %r" % (choice,))
    data = _tools_text(tools)
    lib = _capi.lib()
    n = _c.c_size_t()
    c = TOOL_CHOICES.index(choice)
    st = lib.gb_grammar_from_tools(t, data, len(data), c, max_calls, None, 0, _c.byref(n))
    if st != _capi.GB_ERR_BUFFER_TOO_SMALL:
        _check(st, "gb_grammar_from_tools")
    buf = _c.create_string_buffer(n.value)
    _check(lib.gb_grammar_from_tools(t, data, len(data), c, max_calls, buf, len(buf), _c.byref(n)),
           "gb_grammar_from_tools")
    return buf.raw[: n.value].decode("utf-8")


def parse_tool_calls(template, text) -> tuple[str, list[dict]]:
    """The tool calls in a reply written in template's format (gb_tool_calls_parse): (the text
    before the first call, [{"name": ..., "arguments": dict}, ...]); the arguments through
    gb_tool_call_arguments_json (Gemma 4's own syntax becomes JSON). Raises GearbxError
    (GB_ERR_SYNTAX) for a call that is not well-formed."""
    t = _chat_template(template)
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    lib = _capi.lib()
    n = _c.c_size_t()
    content = _c.c_size_t()
    st = lib.gb_tool_calls_parse(t, data, len(data), None, 0, _c.byref(n), _c.byref(content))
    if st not in (_capi.GB_OK, _capi.GB_ERR_BUFFER_TOO_SMALL):
        _check(st, "gb_tool_calls_parse")
    calls = (_capi.gb_tool_call * max(1, n.value))()
    _check(lib.gb_tool_calls_parse(t, data, len(data), calls, n.value, _c.byref(n), _c.byref(content)),
           "gb_tool_calls_parse")
    out = []
    for i in range(n.value):
        c = calls[i]
        name = data[c.name_offset: c.name_offset + c.name_len].decode("utf-8")
        need = _c.c_size_t()
        st = lib.gb_tool_call_arguments_json(t, data, len(data), _c.byref(c), None, 0, _c.byref(need))
        if st != _capi.GB_ERR_BUFFER_TOO_SMALL:
            _check(st, "gb_tool_call_arguments_json")
        buf = _c.create_string_buffer(need.value)
        _check(lib.gb_tool_call_arguments_json(t, data, len(data), _c.byref(c), buf, need.value, _c.byref(need)),
               "gb_tool_call_arguments_json")
        args = json.loads(buf.raw[: need.value].decode("utf-8"))
        out.append({"name": name, "arguments": args})
    return data[: content.value].decode("utf-8", "replace"), out


def chat_eot_strings(template) -> list[str]:
    """The strings that end an assistant turn for the template (gb_chat_eot_strings)."""
    t = _chat_template(template)
    arr = _c.POINTER(_c.c_char_p)()
    n = _c.c_size_t()
    _check(_capi.lib().gb_chat_eot_strings(t, _c.byref(arr), _c.byref(n)), "gb_chat_eot_strings")
    return [_s(arr[i]) for i in range(n.value)]


def detect_chat_template(text) -> str | None:
    """The built-in template a model's Jinja chat template renders as, or None
    when it is none of them (gb_chat_template_detect)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    out = _capi.c_enum()
    st = _capi.lib().gb_chat_template_detect(data, len(data), _c.byref(out))
    if st == _capi.GB_ERR_UNAVAILABLE:
        return None
    _check(st, "gb_chat_template_detect")
    return CHAT_TEMPLATE_NAMES.get(out.value, _s(_capi.lib().gb_chat_template_name(out.value)))


def classify_prompt(text) -> tuple[str, float]:
    """The cold-start classifier (gb_classify_prompt, default thresholds):
    (gear name to start in, score)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    score = _c.c_float()
    g = _capi.lib().gb_classify_prompt(data, len(data), None, _c.byref(score))
    return _gear_name(g), score.value


class Utf8Stream:
    """gb_utf8_stream: bytes in, pushed a token at a time; text out with only
    complete UTF-8 sequences (a character split over pushes comes out whole
    with the push that completes it; ill-formed bytes become U+FFFD, one per
    maximal ill-formed subpart, as Python's bytes.decode("utf-8", "replace"))."""

    def __init__(self):
        self._lib = _capi.lib()
        self._state = _capi.gb_utf8_stream()
        self._lib.gb_utf8_stream_init(_c.byref(self._state))
        self._buf = _c.create_string_buffer(64)

    def _room(self, need: int):
        if len(self._buf) < need:
            self._buf = _c.create_string_buffer(max(need, 2 * len(self._buf)))
        return self._buf

    def push(self, data: bytes) -> str:
        data = bytes(data)
        buf = self._room(_capi.utf8_stream_capacity(len(data)))
        n = _c.c_size_t()
        _check(self._lib.gb_utf8_stream_push(_c.byref(self._state), data, len(data), buf, len(buf), _c.byref(n)),
               "gb_utf8_stream_push")
        return buf.raw[: n.value].decode("utf-8")

    def flush(self) -> str:
        """End of input: U+FFFD for a held incomplete sequence ('' when none)."""
        buf = self._room(_capi.utf8_stream_capacity(0))
        n = _c.c_size_t()
        _check(self._lib.gb_utf8_stream_flush(_c.byref(self._state), buf, len(buf), _c.byref(n)),
               "gb_utf8_stream_flush")
        return buf.raw[: n.value].decode("utf-8")

    def reset(self) -> None:
        """Discard anything held."""
        self._lib.gb_utf8_stream_init(_c.byref(self._state))


# ---------------------------------------------------------------------------
# Info records
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """gb_model_info (C field names). default_gear is a gear name; gears is
    the C bit mask (bit 1 << gear per tier present: see .tiers); tier_* and
    gear_bytes are 4-tuples indexed low, mid, high, f32; tier_origin holds
    gb_tier_origin ints (see .tier_origin_names)."""

    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    seq_len: int
    rope_type: int
    rope_dim: int
    rope_theta: float
    norm_eps: float
    bos_id: int
    eos_id: int
    unk_id: int
    pad_id: int
    gears: int
    shared_classifier: int
    file_bytes: int
    n_params: int
    gear_bytes: tuple
    name: str
    default_gear: str
    tier_origin: tuple
    tier_bits: tuple
    tier_formats: tuple
    is_gguf: int  # 1: a GGUF file opened in place
    locked_bytes: int  # bytes locked in memory (load="lock")
    n_attention_layers: int  # layers with a KV cache
    n_shortconv_layers: int  # gated short convolutions (lfm2)
    n_deltanet_layers: int  # Gated DeltaNet layers (qwen35)
    conv_kernel: int  # taps of the recurrent layers' convolution (0: none)
    recurrent_bytes: int  # the recurrent layers' fixed state, whatever the context
    head_dim_swa: int  # the sliding-window layers' head size (gemma4: its own)
    n_kv_heads_swa: int  # and their KV heads
    n_kv_shared_layers: int  # layers reading an earlier layer's cache (gemma4)
    per_layer_input_bytes: int  # the per-layer input table, streamed from the file (gemma4)
    per_layer_input_row_bytes: int  # of which each token reads

    @property
    def tiers(self) -> tuple:
        """Names of the tiers present in the file, low to f32."""
        return tuple(GEAR_NAMES[g] for g in range(_capi.GB_GEAR_COUNT) if self.gears & (1 << g))

    @property
    def rope_type_name(self) -> str:
        return _capi.ROPE_NAMES.get(self.rope_type, "unknown")

    @property
    def tier_origin_names(self) -> tuple:
        return tuple(_capi.TIER_ORIGIN_NAMES.get(o, "unknown") for o in self.tier_origin)

    @classmethod
    def _from_c(cls, c: _capi.gb_model_info) -> "ModelInfo":
        kw = {}
        for f in dataclasses.fields(cls):
            v = getattr(c, f.name)
            if f.name == "name":
                v = _s(v)
            elif f.name == "default_gear":
                v = _gear_name(v)
            elif f.name == "tier_formats":
                v = tuple(_s(bytes(x).split(b"\0", 1)[0]) for x in v)
            elif f.name in ("gear_bytes", "tier_origin", "tier_bits"):
                v = tuple(v)
            kw[f.name] = v
        return cls(**kw)


@dataclasses.dataclass(frozen=True)
class TokenizerInfo:
    """gb_tokenizer_info (C field names); kind is the gb_tokenizer_kind int (see .kind_name)."""

    kind: int
    n_tokens: int
    bos_id: int
    eos_id: int
    eot_id: int
    eom_id: int
    unk_id: int
    pad_id: int
    add_bos: int
    add_eos: int
    pre: str
    chat_template_bytes: int

    @property
    def kind_name(self) -> str:
        """"llama2c", "spm" or "bpe"."""
        return TOKENIZER_KIND_NAMES.get(self.kind, "unknown")

    @classmethod
    def _from_c(cls, c: _capi.gb_tokenizer_info) -> "TokenizerInfo":
        kw = {f.name: getattr(c, f.name) for f in dataclasses.fields(cls)}
        kw["pre"] = _s(kw["pre"])
        return cls(**kw)


_STEP_GEAR_FIELDS = ("gear", "next_gear", "predicted_gear")
_STEP_FLAG_FIELDS = ("shifted", "catastrophic", "spec_round")


@dataclasses.dataclass(frozen=True)
class StepInfo:
    """gb_step_info (C field names) without the logits pointer (see
    Session.logits()). gear, next_gear, predicted_gear are gear names;
    shifted, catastrophic, spec_round are bools; kv_tokens_at_bits is a
    6-tuple (2, 3, 4, 8, 16, 32 bits); token is -1 for Session.feed."""

    token: int
    pos: int
    gear: str
    next_gear: str
    shifted: bool
    tokens_in_gear: int
    entropy: float
    entropy_smoothed: float
    n_vocab: int
    weight_bytes_read: int
    weights_read: int
    step_ns: int
    predicted_gear: str
    catastrophic: bool
    resident_weight_bytes: int
    theta_low: float
    theta_high: float
    kv_bytes_used: int
    kv_pool_bytes: int
    kv_tokens: int
    kv_tokens_at_bits: tuple
    kv_bits_per_element: float
    kv_reallocations: int
    kv_requantized: int
    kv_evicted: int
    spec_drafted: int
    spec_accepted: int
    spec_round: bool
    grammar_ns: int = 0
    grammar_allowed: int = 0

    @classmethod
    def _from_c(cls, c: _capi.gb_step_info) -> "StepInfo":
        kw = {}
        for f in dataclasses.fields(cls):
            v = getattr(c, f.name)
            if f.name in _STEP_GEAR_FIELDS:
                v = _gear_name(v)
            elif f.name in _STEP_FLAG_FIELDS:
                v = bool(v)
            elif f.name == "kv_tokens_at_bits":
                v = tuple(v)
            kw[f.name] = v
        return cls(**kw)


@dataclasses.dataclass(frozen=True)
class Step:
    """One generated token. text: the complete UTF-8 text this token finishes
    (a character split over tokens comes whole with the token that completes
    it, so text may be "" for a token that starts one); piece: the token's
    own bytes (gb_token_to_text after the previous token); eog: it ends
    generation (EOS, end of turn); info: the step's StepInfo."""

    token: int
    text: str
    piece: bytes
    eog: bool
    info: StepInfo


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------


class _Closable:
    """Context manager and finalizer of a handle: `with` checks it is open
    and closes it at the end; garbage collection closes it too."""

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Grammar(_Closable):
    """A compiled GBNF grammar (gb_grammar_create): Grammar(text) or
    Grammar.from_json_schema(schema). root: the start rule ("root").
    Sessions copy it (Session.set_grammar, Session.generate(grammar=...),
    Model.session(grammar=...)); match() validates text against it. Raises
    GearbxError (GB_ERR_SYNTAX, GB_ERR_UNSUPPORTED_FEATURE, with the line and
    column in .detail) for a grammar it cannot compile."""

    def __init__(self, text, root: str = "root", *, max_stacks: int | None = None, max_depth: int | None = None):
        self._h = None
        self._sink = _LogSink(None)
        data = _cstr(text, "grammar text")
        self._root = _cstr(root, "root")  # read during the call only; kept for clarity
        lib = _capi.lib()
        self._lib = lib
        o = _capi.gb_grammar_options()
        lib.gb_grammar_options_init(_c.byref(o))
        o.root = self._root
        o.log = self._sink.cfn
        if max_stacks is not None:
            o.max_stacks = max_stacks
        if max_depth is not None:
            o.max_depth = max_depth
        h = _c.c_void_p()
        self._sink.clear()
        _check(lib.gb_grammar_create(data, len(data), _c.byref(o), None, 0, _c.byref(h)), "gb_grammar_create", self._sink)
        self._h = h
        self.text = data.decode("utf-8", "replace")

    @classmethod
    def from_json_schema(cls, schema, **kw) -> "Grammar":
        """The grammar of JSON texts a JSON Schema accepts (str, bytes or dict)."""
        return cls(json_schema_to_grammar(schema), **kw)

    def _handle(self):
        if self._h is None:
            raise ClosedError("gearbx.Grammar")
        return self._h

    @property
    def image_bytes(self) -> int:
        """Bytes of the compiled image (what a session's grammar_max_bytes must hold)."""
        n = _c.c_size_t()
        _check(self._lib.gb_grammar_image_size(self._handle(), _c.byref(n)), "gb_grammar_image_size")
        return n.value

    def match(self, text) -> str:
        """"complete" (text is a string of the grammar), "prefix" (it can be
        continued into one) or "none" (gb_grammar_match)."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        r = _c.c_int()
        self._sink.clear()
        _check(self._lib.gb_grammar_match(self._handle(), data, len(data), _c.byref(r)), "gb_grammar_match", self._sink)
        return {0: "none", 1: "prefix", 2: "complete"}[r.value]

    def close(self) -> None:
        if self._h is not None:
            self._lib.gb_grammar_destroy(self._h)
            self._h = None



class Model(_Closable):
    """A .gbx or GGUF model (gb_model_open_file). Immutable once open; any number of
    sessions and threads may use it. Context manager; close() releases it
    (destroying the sessions still open on it first).

    verify: "auto" (default), "all" or "metadata" (gb_verify).
    log: callable(level, message) receiving the library's log lines (level
    "error", "warn", "info", "debug"); default: logging.getLogger("gearbx").
    log_level: the most verbose level passed on ("warn" by default).
    load: "map" (default: the file is mapped; a call that runs the model
    raises GearbxError with status GB_ERR_FILE_CHANGED once the file is
    truncated, rewritten or unreadable while open, including a change that
    lands during the call's forward pass; open the file again once it is
    complete), "copy" (read into memory: later changes to the file cannot
    reach it) or "lock" (mapped, with what the default gear reads locked in
    memory; GearbxError GB_ERR_LOCK_REFUSED above the system's limit).
    gguf_layout (a GGUF file): "auto" (default), "file" or "repack"
    (gb_gguf_layout)."""

    def __init__(self, path, *, verify=None, log=None, log_level="warn", load="map", gguf_layout="auto"):
        self._h = None
        self._sessions = weakref.WeakSet()
        self.path = os.fspath(path) if isinstance(path, os.PathLike) else path
        data = _cstr(path, "path")
        self._open(lambda opts, out: (_capi.lib().gb_model_open_file(data, opts, out), "gb_model_open_file"),
                   verify, log, log_level, load, gguf_layout)

    @classmethod
    def from_bytes(cls, data, *, verify=None, log=None, log_level="warn", gguf_layout="auto") -> "Model":
        """Open a .gbx or GGUF image held in memory (gb_model_open_memory). The
        bytes are copied once into a 64-byte aligned buffer the model keeps."""
        self = cls.__new__(cls)
        self._h = None
        self._sessions = weakref.WeakSet()
        self.path = None
        data = bytes(data)
        buf = _c.create_string_buffer(len(data) + 64)
        addr = _c.addressof(buf)
        addr += (-addr) % 64
        _c.memmove(addr, data, len(data))
        self._image = buf  # must outlive the model
        self._open(lambda opts, out: (_capi.lib().gb_model_open_memory(addr, len(data), opts, out),
                                      "gb_model_open_memory"), verify, log, log_level, "map", gguf_layout)
        return self

    def _open(self, opener, verify, log, log_level, load="map", gguf_layout="auto"):
        lib = _capi.lib()
        self._lib = lib
        self._sink = _LogSink(log)
        opts = _capi.gb_model_options()
        lib.gb_model_options_init(_c.byref(opts))
        opts.struct_size = _c.sizeof(opts)
        if verify is not None:
            opts.verify = _table_value(verify, "verify mode", {v: k for k, v in _capi.VERIFY_MODES.items()})
        opts.log = self._sink.cfn
        opts.log_user = None
        opts.log_level = _table_value(log_level, "log level", {v: k for k, v in _capi.LOG_LEVELS.items()})
        opts.load = _table_value(load, "load mode", {v: k for k, v in _capi.LOAD_MODES.items()})
        opts.gguf_layout = _table_value(gguf_layout, "GGUF layout", {v: k for k, v in _capi.GGUF_LAYOUTS.items()})
        h = _c.c_void_p()
        self._sink.clear()
        st, call = opener(_c.byref(opts), _c.byref(h))
        _check(st, call, self._sink)
        self._h = h
        try:
            tok = _c.c_void_p()
            self._call("gb_model_tokenizer", self._h, _c.byref(tok))
            self._tok = tok
            mi = _capi.gb_model_info()
            mi.struct_size = _c.sizeof(mi)
            self._call("gb_model_get_info", self._h, _c.byref(mi))
            self.info = ModelInfo._from_c(mi)
            ti = _capi.gb_tokenizer_info()
            ti.struct_size = _c.sizeof(ti)
            self._call("gb_tokenizer_get_info", self._tok, _c.byref(ti))
            self.tokenizer_info = TokenizerInfo._from_c(ti)
        except BaseException:
            self.close()
            raise

    # -- plumbing ---------------------------------------------------------

    def _call(self, name: str, *args) -> int:
        """Call a gb_* function, raising GearbxError (with the logged detail) on failure."""
        self._sink.clear()
        st = getattr(self._lib, name)(*args)
        _check(st, name, self._sink)
        return st

    def _handle(self):
        if self._h is None:
            raise ClosedError("gearbx.Model")
        return self._h

    def _tokenizer(self):
        self._handle()
        return self._tok

    @property
    def closed(self) -> bool:
        return self._h is None

    def close(self) -> None:
        """Destroy the sessions still open on this model, then release it. Idempotent."""
        h = getattr(self, "_h", None)
        if h is None:
            return
        for s in list(self._sessions):
            s.close()
        self._h = None
        self._tok = None
        self._lib.gb_model_close(h)

    def __repr__(self) -> str:
        if self.closed:
            return "<gearbx.Model closed>"
        return "<gearbx.Model %r %s>" % (self.info.name, self.path if self.path is not None else "(memory)")

    def verify(self) -> None:
        """Check every section's CRC32 now (gb_model_verify); GearbxError GB_ERR_CHECKSUM on a mismatch."""
        self._call("gb_model_verify", self._handle())

    # -- tokenizer --------------------------------------------------------

    def tokenize(self, text, add_bos: bool = True, parse_special: bool = False, *, add_eos: bool = False,
                 space_prefix: bool = True) -> list[int]:
        """Token ids of text (str: encoded as UTF-8; bytes: as given, invalid
        UTF-8 falls back to byte tokens). add_bos / add_eos: the BOS / EOS id
        first / last (when the vocabulary has one); parse_special: control
        tokens written in the text become their ids (GGUF tokenizers only:
        GB_ERR_UNAVAILABLE on a llama2.c vocabulary); space_prefix=False:
        GB_TOKENIZE_NO_DUMMY_PREFIX."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        flags = ((_capi.GB_TOKENIZE_ADD_BOS if add_bos else 0) | (_capi.GB_TOKENIZE_PARSE_SPECIAL if parse_special else 0)
                 | (_capi.GB_TOKENIZE_ADD_EOS if add_eos else 0)
                 | (0 if space_prefix else _capi.GB_TOKENIZE_NO_DUMMY_PREFIX))
        tok = self._tokenizer()
        cap = _capi.tokenize_capacity(len(data))
        n = _c.c_size_t()
        for _ in range(2):
            buf = (_c.c_int32 * cap)()
            self._sink.clear()
            st = self._lib.gb_tokenizer_encode(tok, data, len(data), flags, buf, cap, _c.byref(n))
            if st == _capi.GB_ERR_BUFFER_TOO_SMALL and n.value > cap:
                cap = n.value
                continue
            _check(st, "gb_tokenizer_encode", self._sink)
            return buf[: n.value]
        raise GearbxError(_capi.GB_ERR_BUFFER_TOO_SMALL, "gb_tokenizer_encode", self._sink.take())

    def _ids(self, ids: Sequence[int]):
        ids = list(ids)
        for t in ids:
            if not -(1 << 31) <= t < (1 << 31):
                raise GearbxError(_capi.GB_ERR_TOKEN_OUT_OF_RANGE, None, "token %d does not fit an int32" % t)
        return (_c.c_int32 * max(1, len(ids)))(*ids), len(ids)

    def detokenize_bytes(self, ids: Sequence[int], special: bool = False, strip_space: bool = True) -> bytes:
        """The bytes of ids back to back (gb_tokenizer_decode). special: control
        tokens give their text (else nothing); strip_space: drop the
        SentencePiece space prefix (one leading space of the first piece with
        text) so that detokenize(tokenize(s)) == s; no effect on byte-level BPE."""
        tok = self._tokenizer()
        arr, n_ids = self._ids(ids)
        flags = (_capi.GB_DETOKENIZE_SPECIAL if special else 0) | (_capi.GB_DETOKENIZE_STRIP_SPACE if strip_space else 0)
        n = _c.c_size_t()
        cap = 16 * n_ids + 16
        for _ in range(2):
            buf = _c.create_string_buffer(cap)
            self._sink.clear()
            st = self._lib.gb_tokenizer_decode(tok, arr, n_ids, flags, buf, cap, _c.byref(n))
            if st == _capi.GB_ERR_BUFFER_TOO_SMALL and n.value > cap:
                cap = n.value
                continue
            _check(st, "gb_tokenizer_decode", self._sink)
            return buf.raw[: n.value]
        raise GearbxError(_capi.GB_ERR_BUFFER_TOO_SMALL, "gb_tokenizer_decode", self._sink.take())

    def detokenize(self, ids: Sequence[int], special: bool = False, strip_space: bool = True) -> str:
        """detokenize_bytes decoded as UTF-8. Token bytes are not always valid
        UTF-8 (byte tokens, byte-level BPE pieces can cut a character or be
        ill-formed): each maximal ill-formed subpart becomes U+FFFD
        (errors="replace"), exactly as the streamed Step.text does, so the
        texts of generated steps joined equal detokenize of their tokens."""
        return self.detokenize_bytes(ids, special, strip_space).decode("utf-8", "replace")

    def token_text(self, prev: int, tok: int) -> bytes:
        """The bytes of token `tok` following token `prev` (-1 for none: right
        after BOS the SentencePiece space prefix is dropped); control tokens
        give b""; a byte token gives its byte, which may be part of a
        multi-byte character (gb_tokenizer_token_text)."""
        p = _c.c_void_p()
        n = _c.c_size_t()
        self._call("gb_tokenizer_token_text", self._tokenizer(), prev, tok, _c.byref(p), _c.byref(n))
        return _c.string_at(p.value, n.value) if n.value else b""

    def is_eog(self, tok: int) -> bool:
        """True when tok ends generation (EOS, end of turn, end of message)."""
        out = _c.c_int()
        self._call("gb_tokenizer_is_eog", self._tokenizer(), tok, _c.byref(out))
        return bool(out.value)

    @property
    def chat_template(self) -> str | None:
        """The model's own chat template text (GGUF tokenizer.chat_template, Jinja), or None."""
        p = _c.c_void_p()
        n = _c.c_size_t()
        self._sink.clear()
        st = self._lib.gb_tokenizer_chat_template(self._tokenizer(), _c.byref(p), _c.byref(n))
        if st == _capi.GB_ERR_UNAVAILABLE:
            return None
        _check(st, "gb_tokenizer_chat_template", self._sink)
        return _c.string_at(p.value, n.value).decode("utf-8", "replace") if n.value else ""

    @property
    def chat_template_name(self) -> str | None:
        """The built-in template the model's chat template renders as (for
        apply_chat_template), or None (no template, or not a built-in one)."""
        t = self.chat_template
        return detect_chat_template(t) if t else None

    # -- sessions ---------------------------------------------------------

    def _session_options(self, gear="default", n_ctx=None, temperature=None, top_k=None, top_p=None, min_p=None,
                         seed=None, sample_method=None, threads=None, kv_policy=None, kv_budget=None, kv_beta=None,
                         mem_budget=None, deterministic=None, prefill_batch=None, options=None, grammar=None,
                         grammar_max_bytes=None):
        o = _capi.gb_session_options()
        self._lib.gb_session_options_init(_c.byref(o))
        o.struct_size = _c.sizeof(o)
        x = _capi.gb_session_experimental()
        self._lib.gb_session_experimental_init(_c.byref(x))
        o._experimental = x  # kept alive with o, which points to it
        o.experimental = _c.pointer(x)
        o.gear = _gear(gear)
        s = o.sampler
        for name, v, target, field in (
            ("n_ctx", n_ctx, o, "n_ctx"), ("temperature", temperature, s, "temperature"), ("top_k", top_k, s, "top_k"),
            ("top_p", top_p, s, "top_p"), ("min_p", min_p, s, "min_p"), ("seed", seed, s, "seed"),
            ("threads", threads, o, "n_threads"), ("kv_budget", kv_budget, o.kv, "pool_bytes"),
            ("kv_beta", kv_beta, o.kv, "beta"), ("mem_budget", mem_budget, o, "mem_budget"),
            ("prefill_batch", prefill_batch, o, "prefill_batch"),
        ):
            if v is not None:
                _set_field(target, field, v, name)
        if sample_method is not None:
            s.method = _table_value(sample_method, "sample method", _capi.SAMPLE_METHOD_NAMES)
        if kv_policy is not None:
            o.kv.policy = _kv_policy(kv_policy)
        if deterministic is not None:
            o.deterministic = 1 if deterministic else 0
        for path, v in (options or {}).items():
            _set_option(o, path, v)
        if grammar is not None:
            o._grammar = grammar  # read by gb_session_create, which copies it
            o.grammar = grammar._handle()
        if grammar_max_bytes is not None:
            o.grammar_max_bytes = grammar_max_bytes
        return o

    def session(self, gear="default", *, n_ctx: int | None = None, temperature: float | None = None,
                top_k: int | None = None, top_p: float | None = None, min_p: float | None = None,
                seed: int | None = None, sample_method=None, threads: int | None = None, kv_policy=None,
                kv_budget: int | None = None, kv_beta: float | None = None, mem_budget: int | None = None,
                deterministic: bool | None = None, prefill_batch: int | None = None,
                options: Mapping | None = None, grammar: "Grammar | None" = None,
                grammar_max_bytes: int | None = None) -> "Session":
        """Create a session (gb_session_create); the library's defaults
        (gb_session_options_init) for every argument left None.

        gear: "low", "mid", "high", "f32" (fixed tiers), "auto" (entropy
        routing), "spec" (speculative) or "default" (the file's default tier).
        n_ctx: context tokens (0: the model's seq_len). temperature 0 is
        greedy. threads: n_threads. kv_policy: "default", "f32", "f16",
        "uniform8", ..., "seed", "window", "recency"; kv_budget: the KV pool in
        bytes (kv.pool_bytes); kv_beta: the pool as a fraction of an fp16
        cache of n_ctx tokens (kv.beta). mem_budget: bytes for arena +
        resident tiers. options: any other gb_session_options field by its C
        path, e.g. {"kv.window": 32, "spec_verify_gear": "mid"}, or a research
        control of gb_session_experimental by its path there, e.g.
        {"monitor.theta_low": 2.0, "kv.gamma": 0.8} (gear, policy, managed and
        sample-method fields take names). grammar: a Grammar the generated
        text follows (copied); grammar_max_bytes: room for grammars set later
        (Session.set_grammar, generate(grammar=...)); without either the
        session reserves nothing for grammars. Raises ValueError for an unknown name, GearbxError
        from the library (e.g. GB_ERR_UNAVAILABLE for a tier not in the file)."""
        o = self._session_options(gear, n_ctx, temperature, top_k, top_p, min_p, seed, sample_method, threads,
                                  kv_policy, kv_budget, kv_beta, mem_budget, deterministic, prefill_batch, options,
                                  grammar, grammar_max_bytes)
        return Session(self, o)

    def session_mem_size(self, gear="default", **kw) -> int:
        """Arena bytes a session with these arguments (as session()) needs (gb_session_mem_size)."""
        o = self._session_options(gear, **kw)
        n = _c.c_size_t()
        self._call("gb_session_mem_size", self._handle(), _c.byref(o), _c.byref(n))
        return n.value

    def kv_pool_size(self, gear="default", **kw) -> tuple[int, int]:
        """(pool_bytes, max_tokens) of the KV pool for these session arguments (gb_kv_pool_size)."""
        o = self._session_options(gear, **kw)
        b = _c.c_uint64()
        t = _c.c_uint32()
        self._call("gb_kv_pool_size", self._handle(), _c.byref(o), _c.byref(b), _c.byref(t))
        return b.value, t.value


_GEAR_OPTION_FIELDS = {"gear", "base_gear", "spec_verify_gear", "spec_draft_gear", "monitor.initial_gear"}
_LOCKED_OPTION_FIELDS = {"struct_size", "log", "log_user", "experimental"}


def _set_field(target, field: str, value, label: str) -> None:
    try:
        setattr(target, field, value)
    except TypeError as e:
        raise TypeError("session option %s: %s" % (label, e)) from None


def _option_target(root, parts):
    """The struct holding the field parts[-1] along parts from root, or None."""
    target = root
    for p in parts[:-1]:
        sub = dict(type(target)._fields_).get(p)
        if sub is None or not isinstance(sub, type) or not issubclass(sub, _c.Structure):
            return None
        target = getattr(target, p)
    return target if parts[-1] in dict(type(target)._fields_) else None


def _set_option(o: _capi.gb_session_options, path: str, value) -> None:
    if path in _LOCKED_OPTION_FIELDS:
        raise ValueError("session option %r is managed by the binding" % path)
    parts = path.split(".")
    # The stable options first, then the experimental controls.
    target = _option_target(o, parts)
    if target is None:
        target = _option_target(o._experimental, parts)
    if target is None or parts[-1] == "struct_size":
        raise ValueError("unknown session option %r (see gb_session_options and gb_session_experimental in gearbx.h)" % path)
    field = parts[-1]
    if path in _GEAR_OPTION_FIELDS:
        value = _gear(value, path)
    elif path == "kv.policy":
        value = _kv_policy(value)
    elif path == "managed":
        value = _table_value(value, "managed set", _capi.MANAGED_NAMES)
    elif path == "sampler.method":
        value = _table_value(value, "sample method", _capi.SAMPLE_METHOD_NAMES)
    _set_field(target, field, value, path)


# ---------------------------------------------------------------------------
# Session
# ---------------------------------------------------------------------------


class Session(_Closable):
    """A decoding context over a Model (create with Model.session()). Keeps its
    model alive; one thread at a time. Context manager; close() destroys it
    (Model.close() does it too). Typical use:

        s.prefill(model.tokenize(prompt))
        for step in s.generate(100): print(step.text, end="")
    """

    def __init__(self, model: Model, opts: _capi.gb_session_options):
        self._h = None
        self._model = model
        self._lib = model._lib
        self.options = opts  # the gb_session_options it was created with (a copy is kept by the library)
        h = _c.c_void_p()
        model._call("gb_session_create", model._handle(), _c.byref(opts), None, 0, _c.byref(h))
        self._h = h
        model._sessions.add(self)
        self._info = _capi.gb_step_info()
        self._info.struct_size = _c.sizeof(self._info)
        self._logits_n = 0  # valid logits in self._info (0: none since the last prefill / reset)
        self._prev = -1     # the last token of the text so far (for gb_token_to_text)
        self._stream = Utf8Stream()

    @property
    def model(self) -> Model:
        return self._model

    @property
    def gear(self) -> str:
        """The gear (policy) the session was created with."""
        return _gear_name(self.options.gear)

    def _handle(self):
        if self._h is None:
            raise ClosedError("gearbx.Session")
        if self._model._h is None:  # cannot happen: closing the model closes its sessions
            raise ClosedError("gearbx.Model")
        return self._h

    @property
    def closed(self) -> bool:
        return self._h is None

    def close(self) -> None:
        """Destroy the session (gb_session_destroy). Idempotent."""
        h = getattr(self, "_h", None)
        if h is None:
            return
        self._h = None
        self._logits_n = 0
        try:
            self._model._sessions.discard(self)
        except Exception:
            pass
        self._lib.gb_session_destroy(h)

    def __repr__(self) -> str:
        if self.closed:
            return "<gearbx.Session closed>"
        return "<gearbx.Session gear=%s position=%d/%d>" % (self.gear, self.position, self.n_ctx)

    # -- state ------------------------------------------------------------

    def _position(self) -> tuple[int, int]:
        pos = _c.c_uint32()
        n_ctx = _c.c_uint32()
        self._model._call("gb_session_position", self._handle(), _c.byref(pos), _c.byref(n_ctx))
        return pos.value, n_ctx.value

    @property
    def position(self) -> int:
        """Tokens in the KV cache (a pending token is not counted until it runs)."""
        return self._position()[0]

    @property
    def n_ctx(self) -> int:
        """Context capacity in tokens."""
        return self._position()[1]

    def reset(self) -> None:
        """Forget the context (gb_session_reset): position 0, RNG reseeded, nothing pending."""
        self._model._call("gb_session_reset", self._handle())
        self._prev = -1
        self._logits_n = 0
        self._stream.reset()

    def set_gear(self, gear) -> None:
        """Set the gear of the next pass of an "auto" session (gb_session_set_gear)."""
        self._model._call("gb_session_set_gear", self._handle(), _gear(gear))

    def save_state(self) -> bytes:
        """The session's state as bytes (gb_session_state_save): position, KV cache,
        monitor, RNG, penalty and stop-string history. A spec session saves only
        between rounds (GB_ERR_BAD_STATE otherwise)."""
        n = _c.c_size_t()
        self._model._call("gb_session_state_size", self._handle(), _c.byref(n))
        buf = _c.create_string_buffer(max(n.value, 1))
        self._model._call("gb_session_state_save", self._handle(), buf, n.value, _c.byref(n))
        return buf.raw[: n.value]

    def load_state(self, data: bytes) -> None:
        """Restore a state from save_state (gb_session_state_load) into this session
        (same model, compatible options). On an error the session is unchanged."""
        data = bytes(data)
        buf = _c.create_string_buffer(data, max(len(data), 1))
        self._model._call("gb_session_state_load", self._handle(), buf, len(data))
        self._prev = -1
        self._logits_n = 0
        self._stream.reset()

    # -- running ----------------------------------------------------------

    def prefill(self, ids: Sequence[int]) -> None:
        """Feed prompt tokens (gb_prefill): a pending token and all but the last
        new one run into the KV cache; the last becomes pending for the next
        step. Starts a new text: held bytes of an unfinished character from
        earlier steps are dropped."""
        h = self._handle()
        arr, n = self._model._ids(ids)
        self._model._call("gb_prefill", h, arr, n)
        self._prev = arr[n - 1]
        self._logits_n = 0
        self._stream.reset()

    def step(self) -> Step:
        """One decode step (gb_decode_step). Step.text holds only complete
        characters; a character still unfinished stays held for the next
        step (flush_text() ends it)."""
        h = self._handle()
        tok = _c.c_int32()
        self._model._call("gb_decode_step", h, _c.byref(tok), _c.byref(self._info))
        t = tok.value
        self._logits_n = self._info.n_vocab
        info = StepInfo._from_c(self._info)
        piece = self._model.token_text(self._prev, t)
        self._prev = t
        return Step(t, self._stream.push(piece), piece, self._model.is_eog(t), info)

    def flush_text(self) -> str:
        """End the streamed text: U+FFFD for a held incomplete character, else ""."""
        self._handle()
        return self._stream.flush()

    def set_grammar(self, grammar: "Grammar | None") -> None:
        """Follow `grammar` from the next token on (None: free text again)
        (gb_session_set_grammar). The session needs room for it: created
        with grammar= or grammar_max_bytes=."""
        self._model._call("gb_session_set_grammar", self._handle(), grammar._handle() if grammar is not None else None)

    def generate(self, n: int, stop_at_eog: bool = True, flush: bool = True, *, grammar=None,
                 json_schema=None) -> Iterator[Step]:
        """Iterate up to n decode steps. stop_at_eog: the end-of-generation
        token's step (Step.eog) is yielded, then iteration stops. flush: the
        last step's text also carries the end of the stream (U+FFFD for a
        character left unfinished), so the texts of one generate() joined are
        always complete; flush=False keeps it held for the next call (as does
        leaving the loop early: flush_text() ends it). Raises GearbxError like
        step() (GB_ERR_CONTEXT_FULL when the context is full).
        grammar (a Grammar or GBNF text) or json_schema (JSON text or a dict):
        the generated text follows it, from its start (set_grammar); it stays
        in force after the call."""
        if n < 0:
            raise ValueError("n must be >= 0")
        self._handle()  # fail now, not at the first next()
        if grammar is not None and json_schema is not None:
            raise ValueError("give grammar or json_schema, not both")
        if json_schema is not None:
            grammar = Grammar.from_json_schema(json_schema)
        elif grammar is not None and not isinstance(grammar, Grammar):
            grammar = Grammar(grammar)
        if grammar is not None:
            self.set_grammar(grammar)
        return self._generate(n, stop_at_eog, flush)

    def _generate(self, n, stop_at_eog, flush):
        for i in range(n):
            st = self.step()
            end = stop_at_eog and st.eog
            if flush and (end or i == n - 1):
                tail = self._stream.flush()
                if tail:
                    st = dataclasses.replace(st, text=st.text + tail)
            yield st
            if end:
                return

    def feed(self, token: int) -> StepInfo:
        """Teacher forcing (gb_feed): run `token` at the next position (a
        pending token is discarded unrun); Session.logits() then predicts
        the position after it. Starts a new streamed text after `token`."""
        h = self._handle()
        self._model._call("gb_feed", h, token, _c.byref(self._info))
        self._logits_n = self._info.n_vocab
        self._prev = token
        self._stream.reset()
        return StepInfo._from_c(self._info)

    def logits(self) -> list[float]:
        """A copy of the logits of the last step() / feed() (after the NaN/inf
        guard); ValueError when none ran since the last prefill / reset."""
        self._handle()
        if not self._logits_n or not self._info.logits:
            raise ValueError("no logits: call step() or feed() first")
        return self._info.logits[: self._logits_n]
