"""Tests of the gearbx Python binding (unittest, standard library only).

Environment:
  GEARBX_LIBRARY      path of libgearbx.so (else the binding's own lookup)
  GEARBX_TEST_MODEL   a .gbx converted from stories260K (the .gguf, or the
                      llama2.c .bin with tok512.bin); the model tests skip
                      without it
  GEARBX_TEST_GGUF    stories260K.gguf itself (opened in place); its test
                      skips without it
  GEARBX_INCLUDE_DIR  the folder of gearbx.h (default: the repository's include/)
  CC                  the C compiler of the layout test (default: cc)

Run from the repository root:
  PYTHONPATH=bindings/python python3 -m unittest discover -s bindings/python/tests -v
"""

from __future__ import annotations

import ctypes
import gc
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import gearbx
from gearbx import _capi

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
INCLUDE = os.environ.get("GEARBX_INCLUDE_DIR") or os.path.join(REPO, "include")
HEADER = os.path.join(INCLUDE, "gearbx.h")
MODEL = os.environ.get("GEARBX_TEST_MODEL")
GGUF = os.environ.get("GEARBX_TEST_GGUF")

TIERS = {"low", "mid", "high", "f32"}


def read_header() -> str:
    with open(HEADER, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_defines(text: str) -> dict:
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"#define\s+(\w+)\s+([^\n]*)", text)}


def header_enums(text: str) -> dict:
    """typedef enum NAME { A = 1, ... } NAME;  ->  {NAME: {A: 1, ...}} (int values only)."""
    defines = header_defines(text)
    out = {}
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        vals = {}
        for item in m.group(2).split(","):
            item = item.strip()
            if not item:
                continue
            name, _, value = (x.strip() for x in item.partition("="))
            value = defines.get(value, value)
            vals[name] = int(value, 0)
        out[m.group(3)] = vals
    return out


def header_structs(text: str) -> dict:
    """typedef struct NAME { fields } NAME;  ->  {NAME: [(field, type, dims)]} in order."""
    defines = header_defines(text)
    for vals in header_enums(text).values():
        defines.update({k: str(v) for k, v in vals.items()})
    out = {}
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            first, *rest = [d.strip() for d in decl.split(",")]
            fm = re.match(r"(.*?)(\**)\s*(\w+)\s*((?:\[[^\]]+\]\s*)*)$", first)
            base = (fm.group(1).strip() + " " + fm.group(2)).strip()
            for i, d in enumerate([first] + rest):
                dm = re.match(r"(?:.*?)(\**)\s*(\w+)\s*((?:\[[^\]]+\]\s*)*)$", d)
                name = dm.group(2)
                dims = [int(defines.get(x.strip(), x.strip()), 0) for x in re.findall(r"\[([^\]]+)\]", dm.group(3))]
                fields.append((name, base, dims))
        out[m.group(3)] = fields
    return out


def expected_ctype(ctype: str, enums: set):
    scalar = {
        "uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32, "uint64_t": ctypes.c_uint64,
        "float": ctypes.c_float, "size_t": ctypes.c_size_t, "char": ctypes.c_char, "void *": ctypes.c_void_p,
        "const char *": ctypes.c_char_p, "const float *": ctypes.POINTER(ctypes.c_float),
        "gb_log_fn": _capi.gb_log_fn, "gb_abort_fn": _capi.gb_abort_fn,
        "const gb_logit_bias *": ctypes.POINTER(_capi.gb_logit_bias),
        "const char *const *": ctypes.POINTER(ctypes.c_char_p),
        "const struct gb_session_experimental *": ctypes.POINTER(_capi.gb_session_experimental),
        "const struct gb_grammar *": ctypes.c_void_p,
    }
    if ctype in scalar:
        return scalar[ctype]
    if ctype in enums:
        return ctypes.c_int
    if ctype in _capi.STRUCTS:
        return _capi.STRUCTS[ctype]
    raise AssertionError("no ctypes mapping for C type %r" % ctype)


def ctype_of(cls, field):
    return dict(cls._fields_)[field]


# ---------------------------------------------------------------------------


class TestHeaderMirror(unittest.TestCase):
    """The ctypes mirror against include/gearbx.h and the C compiler."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(HEADER):
            raise unittest.SkipTest("gearbx.h not found at %s (set GEARBX_INCLUDE_DIR)" % HEADER)
        cls.text = read_header()

    def test_struct_fields_and_types_match_header(self):
        structs = header_structs(self.text)
        enums = set(header_enums(self.text))
        self.assertEqual(set(_capi.STRUCTS), set(structs), "mirrored structs vs the header's typedef structs")
        for cname, fields in structs.items():
            cls = _capi.STRUCTS[cname]
            self.assertEqual([f[0] for f in fields], [f[0] for f in cls._fields_], "fields of %s" % cname)
            for name, ctype, dims in fields:
                want = expected_ctype(ctype, enums)
                for d in reversed(dims):
                    want = want * d
                got = ctype_of(cls, name)
                if dims:
                    self.assertEqual((ctypes.sizeof(got), got._length_), (ctypes.sizeof(want), want._length_),
                                     "%s.%s" % (cname, name))
                    g, w = got, want
                    while hasattr(w, "_length_"):
                        self.assertEqual(g._length_, w._length_, "%s.%s dims" % (cname, name))
                        g, w = g._type_, w._type_
                    self.assertIs(g, w, "%s.%s element type" % (cname, name))
                elif want is ctypes.POINTER(ctypes.c_float) or want is _capi.gb_log_fn:
                    self.assertIs(got, want, "%s.%s" % (cname, name))
                else:
                    self.assertIs(got, want, "%s.%s: C %s" % (cname, name, ctype))

    def test_struct_layouts_match_c_compiler(self):
        cc = os.environ.get("CC", "cc")
        if not shutil.which(cc):
            self.skipTest("no C compiler (%s)" % cc)
        lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "gearbx.h"', "int main(void) {"]
        for cname, cls in _capi.STRUCTS.items():
            lines.append('  printf("S %s %%zu %%zu\\n", sizeof(%s), (size_t)_Alignof(%s));' % (cname, cname, cname))
            for fname, _ in cls._fields_:
                lines.append('  printf("F %s %s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                             % (cname, fname, cname, fname, cname, fname))
        for e in sorted(header_enums(self.text)):
            lines.append('  printf("E %s %%zu\\n", sizeof(%s));' % (e, e))
        lines.append('  printf("M tokcap %zu\\n", GB_TOKENIZE_CAPACITY(1000));')
        lines.append('  printf("M utf8cap %zu\\n", GB_UTF8_STREAM_CAPACITY(1000));')
        lines.append('  printf("M version %d\\n", GB_VERSION_NUMBER);')
        lines += ["  return 0;", "}"]
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            r = subprocess.run([cc, "-std=c11", "-I", INCLUDE, src, "-o", exe], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, "compiling the layout probe failed:\n" + r.stderr)
            out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        seen = 0
        for line in out.splitlines():
            kind, *rest = line.split()
            if kind == "S":
                cname, size, align = rest[0], int(rest[1]), int(rest[2])
                cls = _capi.STRUCTS[cname]
                self.assertEqual(ctypes.sizeof(cls), size, "sizeof(%s)" % cname)
                self.assertEqual(ctypes.alignment(cls), align, "_Alignof(%s)" % cname)
            elif kind == "F":
                cname, fname, off, size = rest[0], rest[1], int(rest[2]), int(rest[3])
                desc = getattr(_capi.STRUCTS[cname], fname)
                self.assertEqual((desc.offset, desc.size), (off, size), "offsetof/sizeof %s.%s" % (cname, fname))
                seen += 1
            elif kind == "E":
                self.assertEqual(int(rest[1]), ctypes.sizeof(_capi.c_enum), "sizeof(%s)" % rest[0])
            elif rest[0] == "tokcap":
                self.assertEqual(int(rest[1]), _capi.tokenize_capacity(1000))
            elif rest[0] == "utf8cap":
                self.assertEqual(int(rest[1]), _capi.utf8_stream_capacity(1000))
            elif rest[0] == "version":
                self.assertEqual(int(rest[1]) // 100, BINDING_NUMBER // 100, "binding written for another header")
        self.assertEqual(seen, sum(len(c._fields_) for c in _capi.STRUCTS.values()))

    def test_status_table_matches_header(self):
        status = header_enums(self.text)["gb_status"]
        want = {v: k for k, v in status.items() if not k.endswith("_MAX_ENUM")}
        self.assertEqual(gearbx.STATUS_NAMES, want)

    def test_flags_and_version_match_header(self):
        d = header_defines(self.text)
        for name in ("GB_TOKENIZE_ADD_BOS", "GB_TOKENIZE_NO_DUMMY_PREFIX", "GB_TOKENIZE_PARSE_SPECIAL",
                     "GB_TOKENIZE_ADD_EOS", "GB_DETOKENIZE_SPECIAL", "GB_DETOKENIZE_STRIP_SPACE"):
            self.assertEqual(getattr(_capi, name), int(d[name].rstrip("uU"), 0), name)
        self.assertEqual((int(d["GB_VERSION_MAJOR"]), int(d["GB_VERSION_MINOR"])), gearbx.BINDING_VERSION)

    def test_enum_name_tables_match_header_and_library(self):
        enums = header_enums(self.text)
        lib = _capi.lib()
        gears = {v: k for k, v in enums["gb_gear"].items() if k not in ("GB_GEAR_COUNT", "GB_GEAR_MAX_ENUM")}
        self.assertEqual(set(gears), set(gearbx.GEAR_NAMES))
        for v in gears:
            self.assertEqual(lib.gb_gear_name(v).decode(), gearbx.GEAR_NAMES[v])
        kv = {v for k, v in enums["gb_kv_policy"].items() if k != "GB_KV_POLICY_MAX_ENUM"}
        self.assertEqual(kv, set(gearbx.KV_POLICY_NAMES))
        for v in kv:
            self.assertEqual(lib.gb_kv_policy_name(v).decode(), gearbx.KV_POLICY_NAMES[v])
        chat = {v for k, v in enums["gb_chat_template"].items() if k not in ("GB_CHAT_TEMPLATE_NONE",
                                                                              "GB_CHAT_TEMPLATE_MAX_ENUM")}
        self.assertEqual(chat, set(gearbx.CHAT_TEMPLATE_NAMES))
        for v in chat:
            self.assertEqual(lib.gb_chat_template_name(v).decode(), gearbx.CHAT_TEMPLATE_NAMES[v])
        kinds = {v for k, v in enums["gb_tokenizer_kind"].items() if not k.endswith("_MAX_ENUM")}
        self.assertEqual(kinds, set(gearbx.TOKENIZER_KIND_NAMES))
        self.assertEqual({v for k, v in enums["gb_log_level"].items() if not k.endswith("_MAX_ENUM")},
                         set(_capi.LOG_LEVELS.values()))
        self.assertEqual({v for k, v in enums["gb_verify"].items() if not k.endswith("_MAX_ENUM")},
                         set(_capi.VERIFY_MODES.values()))


BINDING_NUMBER = gearbx.BINDING_VERSION[0] * 10000 + gearbx.BINDING_VERSION[1] * 100


class TestLibrary(unittest.TestCase):
    """Library-level functions that need no model."""

    def test_version(self):
        n = gearbx.version_number()
        self.assertEqual(n // 100, BINDING_NUMBER // 100)
        self.assertEqual(gearbx.version(), "%d.%d.%d" % (n // 10000, n // 100 % 100, n % 100))
        self.assertTrue(gearbx.library_path())

    def test_version_check_refuses_other_versions(self):
        _capi.check_version(BINDING_NUMBER + 7)
        for other in (BINDING_NUMBER + 100, BINDING_NUMBER + 10000, 0 if BINDING_NUMBER else 100):
            with self.assertRaises(gearbx.LibraryError) as cm:
                _capi.check_version(other)
            self.assertIn("written for", str(cm.exception))

    def test_bad_library_path_is_a_clear_error(self):
        env = dict(os.environ, GEARBX_LIBRARY="/nonexistent/libgearbx.so",
                   PYTHONPATH=os.pathsep.join(p for p in [os.path.dirname(HERE), os.environ.get("PYTHONPATH")] if p))
        code = ("import gearbx\ntry:\n  gearbx.version()\nexcept gearbx.LibraryError as e:\n"
                "  print('LibraryError', e)\n")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("LibraryError", r.stdout)
        self.assertIn("GEARBX_LIBRARY", r.stdout)
        self.assertIn("/nonexistent/libgearbx.so", r.stdout)

    def test_library_next_to_package(self):
        real = os.path.realpath(gearbx.library_path())
        if not os.path.isfile(real):
            self.skipTest("library loaded by the system loader, no file path")
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(os.path.join(os.path.dirname(HERE), "gearbx"), os.path.join(d, "gearbx"),
                            ignore=shutil.ignore_patterns("__pycache__", "libgearbx.so*"))
            shutil.copy(real, os.path.join(d, "gearbx", "libgearbx.so"))
            env = {k: v for k, v in os.environ.items() if k not in ("GEARBX_LIBRARY", "PYTHONPATH")}
            env["PYTHONPATH"] = d
            r = subprocess.run([sys.executable, "-c", "import gearbx; gearbx.version(); print(gearbx.library_path())"],
                               env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), os.path.join(d, "gearbx", "libgearbx.so"))

    def test_status_error_fields(self):
        for status, name in gearbx.STATUS_NAMES.items():
            e = gearbx.GearbxError(status, "gb_x")
            self.assertEqual((e.status, e.name), (status, name))
            self.assertTrue(e.message and e.message != "unknown status", name)
            self.assertIn(name, str(e))
        e = gearbx.GearbxError(12345)
        self.assertEqual(e.name, "GB_STATUS_12345")
        self.assertTrue(issubclass(gearbx.GearbxError, Exception))

    def test_utf8_stream_split_characters(self):
        s = gearbx.Utf8Stream()
        text = "a€b日本🙂"
        data = text.encode()
        out = [s.push(data[i:i + 1]) for i in range(len(data))]
        self.assertEqual("".join(out) + s.flush(), text)
        # a character comes whole with the byte that completes it
        self.assertEqual(out[1:4], ["", "", "€"])
        self.assertEqual(s.push(b"\xe2\x82"), "")
        self.assertEqual(s.flush(), "\ufffd")
        self.assertEqual(s.push(b"ok"), "ok")

    def test_utf8_stream_equals_python_replace(self):
        rng = random.Random(1234)
        alphabet = [b"a", b" ", b"\xc3", b"\xa9", b"\xe2", b"\x82", b"\xac", b"\xf0", b"\x9f", b"\x99", b"\x82",
                    b"\xed", b"\xa0", b"\x80", b"\xff", b"\xc0", b"\xf4", b"\x90", b"\xe0"]
        for _ in range(300):
            data = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 24)))
            s = gearbx.Utf8Stream()
            pieces, i = [], 0
            while i < len(data):
                j = i + rng.randrange(1, 4)
                pieces.append(s.push(data[i:j]))
                i = j
            got = "".join(pieces) + s.flush()
            self.assertEqual(got, data.decode("utf-8", "replace"), data)

    def test_chat_templates(self):
        msgs = [{"role": "system", "content": "Be brief."}, ("user", "Hi")]
        self.assertEqual(gearbx.apply_chat_template("chatml", msgs),
                         "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                         "<|im_start|>assistant\n")
        self.assertEqual(gearbx.apply_chat_template("chatml", msgs, add_assistant=False),
                         "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n")
        self.assertEqual(gearbx.apply_chat_template("llama2", [("user", " Hi "), ("assistant", "Hello")],
                                                    add_assistant=False),
                         "<s>[INST] Hi [/INST] Hello </s>")
        self.assertIn("<|im_end|>", gearbx.chat_eot_strings("chatml"))
        self.assertIn("<|eot_id|>", gearbx.chat_eot_strings("llama3"))
        jinja = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}")
        self.assertEqual(gearbx.detect_chat_template(jinja), "chatml")
        self.assertIsNone(gearbx.detect_chat_template("plain text, no template"))

    def test_tool_calls(self):
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}}}]
        text = gearbx.apply_chat_template("qwen2.5", [("user", "Weather in Oslo?")], tools=tools)
        self.assertIn('<tools>\n{"type": "function", "function": {"name": "get_weather", "parameters": '
                      '{"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, '
                      '"required": ["city"]}}}\n</tools>', text)
        self.assertTrue(text.endswith("<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n"))
        l31 = gearbx.apply_chat_template("llama3.1", [("user", "Hi"), ("tool", "21 C")], tools=tools,
                                         date="29 Nov 2026")
        self.assertIn("Today Date: 29 Nov 2026\n", l31)
        self.assertIn('<|start_header_id|>ipython<|end_header_id|>\n\n"21 C"<|eot_id|>', l31)
        self.assertTrue(gearbx.apply_chat_template("qwen3", [("user", "Hi")], thinking=False)
                        .endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"))
        reply = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
        self.assertEqual(gearbx.parse_tool_calls("qwen2.5", reply),
                         ("Sure.\n", [{"name": "get_weather", "arguments": {"city": "Oslo"}}]))
        self.assertEqual(gearbx.parse_tool_calls("llama3.1", "No call."), ("No call.", []))
        # Gemma 4's calls: its own value syntax, arguments returned as parsed JSON.
        g4 = ('<|channel>thought\nok<channel|><|tool_call>call:search{q:<|"|>say "hi"<|"|>,n:3,'
              'f:{to:None,on:[true,false]}}<tool_call|><|tool_response>')
        self.assertEqual(gearbx.parse_tool_calls("gemma4", g4),
                         ("<|channel>thought\nok<channel|>",
                          [{"name": "search", "arguments": {"q": 'say "hi"', "n": 3, "f": {"to": None, "on": [True, False]}}}]))
        with self.assertRaises(gearbx.GearbxError) as cm:
            gearbx.parse_tool_calls("qwen3", "<tool_call>{\"name\": \"x\"")
        self.assertEqual(cm.exception.name, "GB_ERR_SYNTAX")
        g = gearbx.Grammar(gearbx.tools_to_grammar("qwen2.5", tools, "required"))
        self.assertEqual(g.match(reply[len("Sure.\n"):]), "complete")
        self.assertEqual(g.match('<tool_call>\n{"name": "get_weather", "arguments": {}}'), "none")
        self.assertEqual(gearbx.Grammar(gearbx.tools_to_grammar("qwen2.5", tools)).match("Sure."), "complete")
        with self.assertRaises(ValueError):
            gearbx.tools_to_grammar("qwen2.5", tools, "sometimes")
        with self.assertRaises(gearbx.GearbxError) as cm:
            gearbx.apply_chat_template("chatml", [("user", "x")], tools=tools)
        self.assertEqual(cm.exception.name, "GB_ERR_UNSUPPORTED_FEATURE")
        with self.assertRaises(gearbx.GearbxError) as cm:
            gearbx.apply_chat_template("qwen3", [("user", "x")], tools="[{")
        self.assertEqual(cm.exception.name, "GB_ERR_SYNTAX")

    def test_chat_template_errors(self):
        with self.assertRaises(ValueError) as cm:
            gearbx.apply_chat_template("no-such-template", [("user", "x")])
        self.assertIn("chatml", str(cm.exception))
        with self.assertRaises(gearbx.GearbxError) as cm:  # llama2 must start with user
            gearbx.apply_chat_template("llama2", [("assistant", "x")])
        self.assertEqual(cm.exception.name, "GB_ERR_INVALID_ARGUMENT")
        with self.assertRaises(gearbx.GearbxError) as cm:
            gearbx.apply_chat_template("chatml", [])
        self.assertEqual(cm.exception.name, "GB_ERR_INVALID_ARGUMENT")
        with self.assertRaises(ValueError):
            gearbx.apply_chat_template("chatml", [("user", "a\0b")])

    def test_classify_prompt(self):
        gear, score = gearbx.classify_prompt("Prove that x^2 + y^2 >= 2xy for all real x and y.")
        self.assertIn(gear, TIERS)
        self.assertGreater(score, 0)
        self.assertEqual(gearbx.classify_prompt("")[1], 0.0)


# ---------------------------------------------------------------------------


@unittest.skipUnless(MODEL, "GEARBX_TEST_MODEL (a stories260K .gbx) not set")
class ModelCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = gearbx.Model(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()


class TestModel(ModelCase):
    def test_info(self):
        i = self.model.info
        self.assertEqual((i.vocab_size, i.dim, i.hidden_dim, i.n_layers, i.n_heads, i.n_kv_heads, i.head_dim),
                         (512, 64, 172, 5, 8, 4, 8))
        self.assertEqual((i.bos_id, i.eos_id, i.pad_id), (1, 2, -1))
        self.assertEqual(i.rope_type_name, "adjacent")
        self.assertEqual(i.file_bytes, os.path.getsize(MODEL))
        self.assertAlmostEqual(i.norm_eps, 1e-5, delta=1e-9)
        self.assertIn(i.default_gear, TIERS)
        self.assertIn(i.default_gear, i.tiers)
        for g in range(4):
            present = bool(i.gears & (1 << g))
            self.assertEqual(present, i.gear_bytes[g] > 0)
            self.assertEqual(present, bool(i.tier_formats[g]))
        self.assertTrue(i.name)
        self.assertGreater(i.n_params, 0)
        # Every layer of stories260K is attention: no recurrent state.
        self.assertEqual((i.n_attention_layers, i.n_shortconv_layers, i.n_deltanet_layers), (5, 0, 0))
        self.assertEqual((i.conv_kernel, i.recurrent_bytes), (0, 0))

    def test_tokenizer_info(self):
        t = self.model.tokenizer_info
        self.assertEqual(t.n_tokens, 512)
        self.assertIn(t.kind_name, ("llama2c", "spm"))
        self.assertEqual((t.bos_id, t.eos_id), (1, 2))
        self.assertTrue(self.model.is_eog(t.eos_id))
        self.assertFalse(self.model.is_eog(t.bos_id))
        self.assertIsNone(self.model.chat_template)
        self.assertIsNone(self.model.chat_template_name)

    def test_tokenize_round_trip(self):
        m = self.model
        for text in ["Once upon a time", "Hello, world!", "  two leading spaces", "tab\tand\nnewline",
                     "caf\u00e9 \u2603 \u65e5\u672c \U0001f642", "x"]:
            ids = m.tokenize(text)
            self.assertEqual(ids[0], m.info.bos_id, text)
            self.assertTrue(all(0 <= t < 512 for t in ids), text)
            self.assertEqual(m.detokenize(ids), text)
            self.assertEqual(m.detokenize_bytes(ids), text.encode())
            self.assertEqual(m.tokenize(text.encode()), ids)
            self.assertEqual(m.tokenize(text, add_bos=False), ids[1:])
            self.assertEqual(m.tokenize(text, add_eos=True)[-1], m.info.eos_id)
            # without strip_space the SentencePiece space prefix shows
            self.assertEqual(m.detokenize(ids, strip_space=False), " " + text)
        self.assertEqual(m.tokenize(""), [m.info.bos_id])
        self.assertEqual(m.detokenize([]), "")

    def test_detokenize_invalid_utf8_is_replaced(self):
        m = self.model
        # an invalid byte and a cut euro sign become byte tokens (no space after
        # them: SentencePiece tokenizers keep it as the bytes of U+2581 there,
        # as llama.cpp does)
        ids = m.tokenize(b"a\xffb\xe2\x82")
        self.assertEqual(m.detokenize_bytes(ids), b"a\xffb\xe2\x82")
        self.assertEqual(m.detokenize(ids), "a\ufffdb\ufffd")

    def test_token_text(self):
        m = self.model
        ids = m.tokenize("Hello")
        first = ids[1]
        self.assertTrue(m.token_text(-1, first).startswith(b" "))
        self.assertEqual(m.token_text(m.info.bos_id, first), m.token_text(-1, first)[1:])
        self.assertEqual(b"".join(m.token_text(p, t) for p, t in zip(ids, ids[1:])), b"Hello")
        self.assertEqual(m.token_text(-1, m.info.eos_id), b"")

    def test_from_bytes(self):
        with open(MODEL, "rb") as f:
            data = f.read()
        with gearbx.Model.from_bytes(data, verify="all") as m:
            self.assertEqual(m.info, self.model.info)
            self.assertEqual(m.tokenize("Once upon a time"), self.model.tokenize("Once upon a time"))
            with m.session(temperature=0) as s:
                s.prefill([1])
                self.assertEqual(len(list(s.generate(5))), 5)

    def test_verify(self):
        self.model.verify()
        with gearbx.Model(MODEL, verify="metadata") as m:
            m.verify()

    def test_sizes(self):
        n = self.model.session_mem_size("mid", n_ctx=64)
        self.assertGreater(n, 0)
        pool, max_tokens = self.model.kv_pool_size("mid", n_ctx=64)
        self.assertGreater(pool, 0)
        self.assertEqual(max_tokens, 64)


class TestGenerate(ModelCase):
    def run_greedy(self, n=40, prompt=None, **kw):
        m = self.model
        with m.session(temperature=0, **kw) as s:
            s.prefill(m.tokenize(prompt) if prompt is not None else [m.info.bos_id])
            return list(s.generate(n))

    def test_greedy_is_deterministic(self):
        a = self.run_greedy()
        b = self.run_greedy()
        self.assertEqual([x.token for x in a], [x.token for x in b])
        self.assertEqual(len(a), 40)
        text = "".join(x.text for x in a)
        self.assertTrue(text.startswith("Once upon a time, there was a little girl named Lily."), text)

    @unittest.skipUnless(GGUF, "GEARBX_TEST_GGUF not set")
    def test_gguf_opens_in_place(self):
        # The GGUF the .gbx was converted from, opened as it is: one tier
        # (its own f32 values), and the same greedy text as that tier.
        with gearbx.Model(GGUF) as g:
            self.assertEqual(g.info.is_gguf, 1)
            self.assertEqual(g.info.tiers, ("f32",))
            self.assertEqual(self.model.info.is_gguf, 0)
            with g.session(temperature=0) as s:
                s.prefill([g.info.bos_id])
                got = [x.token for x in s.generate(30)]
        self.assertEqual(got, [x.token for x in self.run_greedy(30, gear="f32")])

    def test_gemma4_reports_its_streamed_table(self):
        # The repository's gemma4 fixture: sliding heads of their own shape,
        # layers sharing caches, a per-layer input table streamed from the file.
        path = os.path.join(REPO, "tests", "fixtures", "gemma4-tiny-Q4_K_M.gguf")
        with gearbx.Model(path) as g:
            i = g.info
            self.assertEqual((i.head_dim, i.head_dim_swa, i.n_kv_heads, i.n_kv_heads_swa), (128, 64, 1, 2))
            self.assertEqual(i.n_kv_shared_layers, 3)
            self.assertGreater(i.per_layer_input_bytes, 0)
            self.assertEqual(i.per_layer_input_bytes % i.per_layer_input_row_bytes, 0)
            self.assertEqual(i.per_layer_input_bytes // i.per_layer_input_row_bytes, i.vocab_size)
            with g.session(temperature=0) as s:
                s.prefill([i.bos_id])
                self.assertEqual(len([x.token for x in s.generate(8)]), 8)

    def test_generation_under_a_grammar_and_a_json_schema(self):
        g = gearbx.Grammar('root ::= "Tim is " [0-9]{1,2} " years old."')
        self.assertEqual(g.match("Tim is 7 years old."), "complete")
        self.assertEqual(g.match("Tim is 7"), "prefix")
        self.assertEqual(g.match("Tom"), "none")
        schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                    "happy": {"type": "boolean"}},
                  "required": ["name", "happy"]}
        js = gearbx.Grammar.from_json_schema(schema)
        prompt = self.model.tokenize("Once upon a time")
        for seed in range(5):
            with self.model.session(temperature=1.0, seed=seed, grammar=g, grammar_max_bytes=64 * 1024) as s:
                s.prefill(prompt)
                text = "".join(x.text for x in s.generate(40))
                self.assertEqual(g.match(text), "complete", text)
                # The next answer under a schema, from its start.
                s.prefill(self.model.tokenize(" The end.", add_bos=False))
                steps = list(s.generate(300, json_schema=schema))
                text = "".join(x.text for x in steps)
                self.assertTrue(steps[-1].eog, text)
                self.assertEqual(js.match(text), "complete", text)
                obj = json.loads(text)
                self.assertIsInstance(obj["happy"], bool)
                self.assertLessEqual(len(obj["name"]), 8)
                self.assertGreater(steps[0].info.grammar_allowed, 0)
        with self.assertRaises(gearbx.GearbxError) as e:
            gearbx.Grammar("root ::= missing")
        self.assertEqual(e.exception.name, "GB_ERR_SYNTAX")
        self.assertIn("line 1", e.exception.detail or "")
        with self.model.session() as s, self.assertRaises(gearbx.GearbxError) as e:
            s.set_grammar(g)  # no room reserved
        self.assertEqual(e.exception.name, "GB_ERR_UNAVAILABLE")

    def test_loaded_copy_survives_the_file_changing(self):
        want = [x.token for x in self.run_greedy(12)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "copy.gbx")
            shutil.copyfile(MODEL, path)
            with gearbx.Model(path, load="copy") as m, m.session(temperature=0) as s:
                s.prefill([m.info.bos_id])
                got = [x.token for x in s.generate(4)]
                os.truncate(path, 100)  # a mapping would now fault; the copy does not care
                got += [x.token for x in s.generate(8)]
            self.assertEqual(got, want)
            with self.assertRaises(ValueError):
                gearbx.Model(MODEL, load="stream")

    def test_mapped_file_truncated_raises_file_changed(self):
        want = [x.token for x in self.run_greedy(2)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mapped.gbx")
            shutil.copyfile(MODEL, path)
            os.utime(path, (1e9, 1e9))  # any later change moves the time
            with gearbx.Model(path) as m, m.session(temperature=0) as s:
                s.prefill([m.info.bos_id])
                got = [x.token for x in s.generate(2)]
                os.truncate(path, 0)
                # The tokenizer reads its tables in the mapping: past the new
                # end they read as zeros (the library's SIGBUS guard), and the
                # model is marked changed.
                m.tokenize("Once upon a time")
                for _ in range(2):
                    with self.assertRaises(gearbx.GearbxError) as cm:
                        s.step()
                    self.assertEqual(cm.exception.status, _capi.GB_ERR_FILE_CHANGED)
                    self.assertEqual(cm.exception.name, "GB_ERR_FILE_CHANGED")
                    self.assertIn("mapping faulted", cm.exception.detail or "")
            self.assertEqual(got, want)

    def test_threads_do_not_change_tokens(self):
        a = self.run_greedy(20, gear="mid", threads=1)
        b = self.run_greedy(20, gear="mid", threads=2)
        self.assertEqual([x.token for x in a], [x.token for x in b])

    def test_step_text_equals_detokenize(self):
        m = self.model
        steps = self.run_greedy(60)
        self.assertEqual("".join(x.text for x in steps), m.detokenize([x.token for x in steps]))
        # after a prompt the first piece keeps its space: no BOS-space rule
        steps = self.run_greedy(30, prompt="Once upon a")
        self.assertEqual("".join(x.text for x in steps), m.detokenize([x.token for x in steps], strip_space=False))
        self.assertTrue(steps[0].text.startswith(" "))
        self.assertEqual(b"".join(x.piece for x in steps), m.detokenize_bytes([x.token for x in steps], strip_space=False))

    def test_streamed_text_keeps_characters_whole(self):
        # Near-uniform sampling draws byte tokens (half this vocabulary): lead
        # bytes whose character ends in a later token, and ill-formed runs.
        # Step.text holds a started character back until it is complete, so
        # the texts joined are the pieces' bytes decoded in one go (U+FFFD per
        # maximal ill-formed subpart), not piece by piece.
        m = self.model
        held = 0
        for seed in (1, 2, 3):
            with m.session(temperature=100.0, seed=seed) as s:
                s.prefill([m.info.bos_id])
                steps = list(s.generate(300, stop_at_eog=False))
            self.assertEqual(len(steps), 300)
            prev = m.info.bos_id
            for x in steps:
                self.assertEqual(x.piece, m.token_text(prev, x.token))
                prev = x.token
            whole = b"".join(x.piece for x in steps).decode("utf-8", "replace")
            self.assertEqual("".join(x.text for x in steps), whole)
            held += sum(1 for x in steps if x.piece and not x.text)
            if m.info.bos_id not in [x.token for x in steps]:  # the BOS-space rule aside
                self.assertEqual(whole, m.detokenize([x.token for x in steps]))
        self.assertGreater(held, 0, "no character was split over tokens: the test did not test")

    def test_generate_flush(self):
        # flush=True: each generate() call's texts are complete on their own
        # (a character cut at its end becomes U+FFFD); flush=False: held for
        # the next call, and flush_text() ends the stream.
        m = self.model
        for flush in (True, False):
            with m.session(temperature=100.0, seed=11) as s:
                s.prefill([m.info.bos_id])
                chunks = [list(s.generate(5, stop_at_eog=False, flush=flush)) for _ in range(60)]
                tail = s.flush_text()
            texts = ["".join(x.text for x in c) for c in chunks]
            pieces = [b"".join(x.piece for x in c) for c in chunks]
            if flush:
                self.assertEqual(tail, "")
                self.assertEqual(texts, [p.decode("utf-8", "replace") for p in pieces])
                cut = sum(1 for p in pieces if p.decode("utf-8", "replace") != p.decode("utf-8", "ignore")
                          and p[-1:] >= b"\xc2")
                self.assertGreater(cut, 0, "no chunk ended inside a character: the test did not test")
            else:
                self.assertEqual("".join(texts) + tail, b"".join(pieces).decode("utf-8", "replace"))

    def test_seeded_sampling_repeats(self):
        m = self.model

        def run(seed):
            with m.session(temperature=1.0, top_k=40, top_p=0.95, seed=seed) as s:
                s.prefill([m.info.bos_id])
                return [x.token for x in s.generate(40, stop_at_eog=False)]

        self.assertEqual(run(7), run(7))

    def test_step_info_is_sane(self):
        m = self.model
        with m.session(temperature=0) as s:
            prompt = m.tokenize("Once upon a time")
            s.prefill(prompt)
            self.assertEqual(s.position, len(prompt) - 1)
            for i, st in enumerate(s.generate(20, stop_at_eog=False)):
                info = st.info
                self.assertEqual(info.token, st.token)
                self.assertTrue(0 <= st.token < 512)
                self.assertEqual(info.pos, len(prompt) - 1 + i)
                self.assertIn(info.gear, TIERS)
                self.assertIn(info.next_gear, TIERS)
                self.assertIn(info.predicted_gear, TIERS)
                self.assertEqual(info.shifted, info.gear != info.next_gear)
                self.assertTrue(0 <= info.entropy <= math.log2(512) + 1e-3, info.entropy)
                self.assertGreaterEqual(info.entropy_smoothed, 0)
                self.assertEqual(info.n_vocab, 512)
                self.assertGreater(info.weight_bytes_read, 0)
                self.assertGreater(info.weights_read, 0)
                self.assertGreater(info.step_ns, 0)
                self.assertEqual(info.kv_tokens, info.pos + 1)
                self.assertLessEqual(info.kv_bytes_used, info.kv_pool_bytes)
                self.assertEqual(len(info.kv_tokens_at_bits), 6)
                self.assertFalse(info.spec_round)
                logits = s.logits()
                self.assertEqual(len(logits), 512)
                self.assertEqual(max(range(512), key=logits.__getitem__), st.token)  # greedy = argmax
            self.assertEqual(s.position, len(prompt) - 1 + 20)

    def test_auto_gear(self):
        m = self.model
        with m.session("auto", temperature=0) as s:
            self.assertEqual(s.gear, "auto")
            s.prefill(m.tokenize("Once upon a time there was"))
            for st in s.generate(30, stop_at_eog=False):
                self.assertIn(st.info.gear, {"low", "mid", "high"})
            s.set_gear("low")
            self.assertEqual(next(s.generate(1)).info.gear, "low")
        with m.session("mid") as s:
            with self.assertRaises(gearbx.GearbxError) as cm:
                s.set_gear("low")
            self.assertEqual(cm.exception.name, "GB_ERR_BAD_STATE")

    def test_speculative_equals_verifier(self):
        spec = self.run_greedy(40, gear="spec")
        high = self.run_greedy(40, gear="high")
        self.assertEqual([x.token for x in spec], [x.token for x in high])
        self.assertGreater(sum(x.info.spec_round for x in spec), 0)
        self.assertTrue(all(x.info.spec_accepted <= x.info.spec_drafted for x in spec))

    def test_every_tier(self):
        for gear in self.model.info.tiers:
            steps = self.run_greedy(5, gear=gear)
            self.assertEqual({x.info.gear for x in steps}, {gear})

    def test_reset_and_continue(self):
        m = self.model
        with m.session(temperature=0) as s:
            s.prefill([m.info.bos_id])
            a = [x.token for x in s.generate(10)]
            b = [x.token for x in s.generate(10)]  # continues
            self.assertEqual(s.position, 20)
            s.reset()
            self.assertEqual(s.position, 0)
            with self.assertRaises(gearbx.GearbxError) as cm:
                next(s.generate(1))
            self.assertEqual(cm.exception.name, "GB_ERR_BAD_STATE")
            s.prefill([m.info.bos_id])
            self.assertEqual([x.token for x in s.generate(20)], a + b)
            # prefill after generation runs the pending token first
            more = m.tokenize(" and", add_bos=False)
            s.prefill(more)
            self.assertEqual(s.position, 20 + len(more))

    def test_feed(self):
        m = self.model
        with m.session(temperature=0) as s:
            greedy = self.run_greedy(8)
            s.prefill([m.info.bos_id])
            info = s.feed(greedy[0].token)  # BOS is discarded unrun: position 0 gets the token
            self.assertEqual(info.token, -1)
            self.assertEqual(info.pos, 0)
            self.assertEqual(len(s.logits()), 512)

    def test_eog_stops(self):
        m = self.model
        with m.session(temperature=0, n_ctx=512) as s:
            s.prefill([m.info.bos_id])
            steps = list(s.generate(400))
        if steps[-1].eog:
            self.assertEqual(steps[-1].token, m.info.eos_id)
            self.assertTrue(all(not x.eog for x in steps[:-1]))
        else:
            self.assertEqual(len(steps), 400)

    def test_context_full(self):
        m = self.model
        with m.session(temperature=0, n_ctx=8) as s:
            self.assertEqual(s.n_ctx, 8)
            s.prefill([m.info.bos_id])
            with self.assertRaises(gearbx.GearbxError) as cm:
                for _ in s.generate(20, stop_at_eog=False):
                    pass
            self.assertEqual(cm.exception.name, "GB_ERR_CONTEXT_FULL")
            self.assertEqual(s.position, 8)

    def test_kv_options(self):
        m = self.model
        with m.session(temperature=0, n_ctx=128, kv_policy="window", kv_beta=0.5,
                       options={"kv.window": 8, "monitor.theta_low": 2.0}) as s:
            self.assertEqual(s.options.kv.policy, 8)
            self.assertEqual(s.options.kv.window, 8)
            s.prefill(m.tokenize("Once upon a time"))
            st = list(s.generate(20, stop_at_eog=False))[-1]
            self.assertGreater(st.info.kv_pool_bytes, 0)
            self.assertLess(st.info.kv_bits_per_element, 32)
        with m.session(kv_policy="f16", kv_budget=1 << 20, n_ctx=256) as s:
            self.assertEqual(s.options.kv.pool_bytes, 1 << 20)
        with self.assertRaises(ValueError):
            m.session(kv_policy="bogus")
        with self.assertRaises(ValueError):
            m.session(options={"monitor.no_such_field": 1})
        with self.assertRaises(ValueError):
            m.session(options={"struct_size": 4})


class TestErrors(ModelCase):
    def test_missing_file(self):
        with self.assertRaises(gearbx.GearbxError) as cm:
            gearbx.Model(os.path.join(tempfile.gettempdir(), "no-such-model-%d.gbx" % os.getpid()))
        e = cm.exception
        self.assertEqual((e.name, e.status), ("GB_ERR_FILE_NOT_FOUND", 201))
        self.assertIn("GB_ERR_FILE_NOT_FOUND", str(e))
        self.assertTrue(e.message)

    def test_not_a_model(self):
        with tempfile.NamedTemporaryFile(suffix=".gbx") as f:
            f.write(b"this is not a gearbx model file" * 100)
            f.flush()
            with self.assertRaises(gearbx.GearbxError) as cm:
                gearbx.Model(f.name)
            self.assertEqual(cm.exception.status // 100, 3, cm.exception)

    def test_bad_gear_name(self):
        with self.assertRaises(ValueError) as cm:
            self.model.session("turbo")
        msg = str(cm.exception)
        self.assertIn("turbo", msg)
        self.assertIn("auto", msg)
        with self.assertRaises(gearbx.GearbxError) as cm:
            self.model.session(99)
        self.assertEqual(cm.exception.name, "GB_ERR_INVALID_ARGUMENT")

    def test_token_out_of_range(self):
        m = self.model
        for bad in (512, 99999, -5, 1 << 40):
            with m.session() as s:
                with self.assertRaises(gearbx.GearbxError) as cm:
                    s.prefill([1, bad])
                self.assertEqual(cm.exception.name, "GB_ERR_TOKEN_OUT_OF_RANGE", bad)
                self.assertEqual(s.position, 0)
            with self.assertRaises(gearbx.GearbxError) as cm:
                m.detokenize([1, bad])
            self.assertEqual(cm.exception.name, "GB_ERR_TOKEN_OUT_OF_RANGE")
            if -(1 << 31) <= bad < (1 << 31):
                with self.assertRaises(gearbx.GearbxError) as cm:
                    m.token_text(-1, bad)
                self.assertEqual(cm.exception.name, "GB_ERR_TOKEN_OUT_OF_RANGE")
                with self.assertRaises(gearbx.GearbxError) as cm:
                    m.is_eog(bad)
                self.assertEqual(cm.exception.name, "GB_ERR_TOKEN_OUT_OF_RANGE")

    def test_error_detail_from_log(self):
        with self.model.session() as s:
            with self.assertRaises(gearbx.GearbxError) as cm:
                s.prefill([7777])
        self.assertEqual(cm.exception.call, "gb_prefill")
        self.assertIn("7777", cm.exception.detail or "")

    def test_user_log_callback(self):
        lines = []
        with gearbx.Model(MODEL, log=lambda level, msg: lines.append((level, msg)), log_level="debug") as m:
            with m.session() as s:
                with self.assertRaises(gearbx.GearbxError):
                    s.prefill([])
        self.assertIn("error", [lv for lv, _ in lines])
        self.assertTrue(all(lv in ("error", "warn", "info", "debug") for lv, _ in lines))

    def test_state_errors(self):
        with self.model.session() as s:
            with self.assertRaises(gearbx.GearbxError) as cm:
                s.step()
            self.assertEqual(cm.exception.name, "GB_ERR_BAD_STATE")
            with self.assertRaises(gearbx.GearbxError) as cm:
                s.prefill([])
            self.assertEqual(cm.exception.name, "GB_ERR_INVALID_ARGUMENT")
            with self.assertRaises(ValueError):
                s.logits()

    def test_save_and_load_state(self):
        ids = self.model.tokenize("Once upon a time")
        for gear, temp in (("high", 0.0), ("auto", 0.8)):
            with self.model.session(gear, n_ctx=128, temperature=temp, seed=11) as a, \
                    self.model.session(gear, n_ctx=256, temperature=temp, seed=11) as b:
                a.prefill(ids)
                for _ in range(4):
                    a.step()
                state = a.save_state()
                self.assertIsInstance(state, bytes)
                want = [a.step().token for _ in range(20)]
                b.load_state(state)
                self.assertEqual(b.position, a.position - 20)
                self.assertEqual([b.step().token for _ in range(20)], want)
        with self.model.session("high", n_ctx=128) as c:
            with self.assertRaises(gearbx.GearbxError) as cm:
                c.load_state(b"nonsense" * 8)
            self.assertEqual(cm.exception.name, "GB_ERR_BAD_MAGIC")
            with self.assertRaises(gearbx.GearbxError) as cm:
                c.load_state(state)  # saved by an auto session
            self.assertEqual(cm.exception.name, "GB_ERR_INVALID_ARGUMENT")

    def test_parse_special(self):
        m = self.model
        if m.tokenizer_info.kind_name == "llama2c":
            with self.assertRaises(gearbx.GearbxError) as cm:
                m.tokenize("</s>", parse_special=True)
            self.assertEqual(cm.exception.name, "GB_ERR_UNAVAILABLE")
        else:
            self.assertEqual(m.tokenize("</s>", add_bos=False, parse_special=True), [m.info.eos_id])

    def test_closed_model(self):
        m = gearbx.Model(MODEL)
        s = m.session(temperature=0)
        s.prefill([1])
        gen = s.generate(10)
        next(gen)
        m.close()
        m.close()  # idempotent
        self.assertTrue(m.closed)
        self.assertTrue(s.closed)  # closing the model destroyed its session
        for call in (lambda: m.tokenize("x"), lambda: m.detokenize([1]), lambda: m.token_text(-1, 1),
                     lambda: m.is_eog(1), lambda: m.session(), lambda: m.verify(), lambda: m.chat_template,
                     lambda: s.prefill([1]), lambda: next(gen), lambda: s.position, lambda: s.reset(),
                     lambda: s.generate(3), lambda: s.logits(), lambda: s.feed(1)):
            with self.assertRaises(gearbx.ClosedError) as cm:
                call()
            self.assertIsInstance(cm.exception, gearbx.GearbxError)
            self.assertIsInstance(cm.exception, ValueError)
            self.assertIn("closed", str(cm.exception))
        with self.assertRaises(gearbx.ClosedError):
            with m:
                pass
        s.close()  # no-op
        self.assertIn("closed", repr(m))

    def test_session_keeps_model_alive(self):
        s = gearbx.Model(MODEL).session(temperature=0)
        gc.collect()
        self.assertFalse(s.model.closed)
        s.prefill([1])
        self.assertEqual(len(list(s.generate(3))), 3)
        s.close()
        self.assertFalse(s.model.closed)


if __name__ == "__main__":
    unittest.main()
