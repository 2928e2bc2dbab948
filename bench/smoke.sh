#!/usr/bin/env bash
# bench/smoke.sh — run each benchmark program once on tiny inputs and check
# that it succeeds and that its --json rows carry the keys docs/RESULTS.md
# reports (ctest: bench_smoke, bench_mca_smoke). Output shape only:
# timings are never asserted.
#   usage: bench/smoke.sh GEMV DECODE SHIFT ATTENTION   (the four executables)
#          bench/smoke.sh --mca SOURCE_DIR               (bench/mca.sh --quick)
set -euo pipefail
work=$(mktemp -d)
# On failure, show what the programs printed (ctest --output-on-failure shows this script's output only).
trap 'rc=$?; [ $rc = 0 ] || tail -n 20 "$work"/*.txt "$work"/*.err 2>/dev/null; rm -rf "$work"; exit $rc' EXIT

if [ "${1:-}" = "--mca" ]; then
  bash "$2/bench/mca.sh" --quick --json "$work/mca.json" > "$work/mca.txt"
  python3 - "$work/mca.json" <<'EOF'
import json, math, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list) and rows, "mca: no rows"
need = {"kernel", "format", "isa", "cpu"}
gemv = [r for r in rows if r.get("op") == "gemv"]
assert gemv, "mca: no gemv rows"
cpus = {r["cpu"] for r in gemv}
for c in ("cortex-a55", "cortex-a76", "neoverse-n1", "neoverse-v1"):
    assert c in cpus, "mca: no rows for " + c
kernels = {r["kernel"] for r in gemv}
for k in ("q4_gemv__dotprod", "q4r16_gemv__dotprod"):
    assert k in kernels, "mca: no row for " + k
for r in gemv:
    missing = need - r.keys()
    assert not missing, "mca row %s lacks %s" % (r.get("kernel"), missing)
    for k in ("cycles_per_32w", "dram_cycles_per_32w", "compute_over_dram"):
        v = r.get(k)
        assert isinstance(v, (int, float)) and math.isfinite(v) and v > 0, "mca row %s: %s = %r" % (r["kernel"], k, v)
print("mca: %d gemv rows, %d kernels, cpus %s" % (len(gemv), len(kernels), ",".join(sorted(cpus))))
EOF
  exit 0
fi

gemv=$1 decode=$2 shift_=$3 attention=$4
tiny="dim=64,layers=2,hidden=172,heads=4,kv_heads=2,vocab=512,seq_len=64,seed=3"

"$gemv" --quick --threads 1,2 --shape 260K --reps 1 --max-ws-mib 64 --json "$work/gemv.json" > "$work/gemv.txt"
"$decode" --synthetic "$tiny" --gears low,mid,high,auto,spec --threads 1,2 --tokens 8 --reps 1 --prefill 4 --quick \
  --json "$work/decode.json" > "$work/decode.txt" 2> "$work/decode.err"
"$shift_" --synthetic "$tiny" --reps 2 --json "$work/shift.json" > "$work/shift.txt"
"$attention" --max-context 256 --reps 1 --mode both --evict-mib 16 --json "$work/attention.json" > "$work/attention.txt"
# Each prints its table: markdown rows, or (attention) aligned columns under a header.
for t in gemv decode shift; do
  grep -q '^|---' "$work/$t.txt" || { echo "$t: no table printed"; cat "$work/$t.txt"; exit 1; }
done
grep -q '^ *context *hd *mode *path' "$work/attention.txt" || { echo "attention: no table printed"; cat "$work/attention.txt"; exit 1; }

python3 - "$work" <<'EOF'
import json, math, os, sys
d = sys.argv[1]
def load(name):
    rows = json.load(open(os.path.join(d, name + ".json")))
    assert isinstance(rows, list) and rows, name + ": not a non-empty list of rows"
    return rows
def num(r, k, name, positive=False):
    v = r.get(k)
    assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "%s: %s is %r in %r" % (name, k, v, r)
    assert not positive or v > 0, "%s: %s = %r, not > 0" % (name, k, v)

# gemv: kernel, format, k, n, threads, mode (hot|cold), ms, gbps, pct_bw (percent of measured bandwidth)
g = load("gemv")
for r in g:
    for k in ("kernel", "format"):
        assert isinstance(r.get(k), str) and r[k], "gemv: %s missing in %r" % (k, r)
    for k in ("k", "n", "threads", "ms", "gbps", "pct_bw"):
        num(r, k, "gemv", positive=True)
    assert r["mode"] in ("hot", "cold"), "gemv: mode %r" % r.get("mode")
assert {r["threads"] for r in g} == {1, 2}, "gemv: threads 1 and 2 asked"
assert {r["mode"] for r in g} == {"hot", "cold"}, "gemv: hot and cold asked"
assert any(r["kernel"].endswith("__generic") for r in g), "gemv: no generic kernel rows"
for f in ("f16", "q8", "q4"):
    assert any(r["format"] == f for r in g), "gemv: no %s rows" % f

# decode: gear, threads, phase (decode|prefill), tok_s; decode rows the
# share of the adjacent probes' bandwidth (pct_bw, its range, those
# probes' GB/s); spec rows add
# tokens_per_verify, acceptance (drafts kept), acceptance_rate, bits_per_token
r2 = load("decode")
seen = set()
for r in r2:
    assert r.get("phase") in ("decode", "prefill"), "decode: phase %r" % r.get("phase")
    num(r, "threads", "decode", positive=True)
    num(r, "tok_s", "decode", positive=True)
    seen.add((r["gear"], r["threads"], r["phase"]))
    if r["phase"] == "decode":  # the share of the probes right before and after each timed run
        for k in ("pct_bw", "pct_bw_min", "pct_bw_max", "bw_adjacent_gbps"):
            num(r, k, "decode", positive=True)
        assert r["pct_bw_min"] <= r["pct_bw"] <= r["pct_bw_max"], "decode: pct_bw outside its range in %r" % r
    if r["gear"] == "spec" and r["phase"] == "decode":
        for k in ("tokens_per_verify", "acceptance", "acceptance_rate", "bits_per_token"):
            num(r, k, "decode spec")
        assert r["tokens_per_verify"] >= 1 and 0 <= r["acceptance"] <= r["acceptance_rate"] <= 1 and r["bits_per_token"] > 0, \
            "decode spec: %r" % r
for gear in ("low", "mid", "high", "auto", "spec"):
    for t in (1, 2):
        for ph in ("decode", "prefill"):
            assert (gear, t, ph) in seen, "decode: no %s row for %s at %d threads" % (ph, gear, t)

s = load("shift")
for r in s:
    assert r.get("from") in ("low", "mid", "high") and r.get("to") in ("low", "mid", "high") and r["from"] != r["to"], "shift: %r" % r
    for k in ("shift_us", "first_step_us", "step_us"):
        num(r, k, "shift", positive=True)
assert len(s) == 6, "shift: %d rows, 6 shifts expected" % len(s)

a = load("attention")
for r in a:
    assert isinstance(r.get("path"), str) and r["path"], "attention: %r" % r
    for k in ("context", "head_dim", "us"):
        num(r, k, "attention", positive=True)
    if not r["path"].startswith("alloc_"):  # allocator rows: a cost per call, no mode, no bytes
        assert r.get("mode") in ("hot", "cold"), "attention: mode of %r" % r
        num(r, "bytes", "attention", positive=True)
paths = {r["path"] for r in a}
assert {"f16", "fused"} <= paths, "attention: f16 and fused paths expected, got %s" % paths
assert {r["mode"] for r in a if r.get("mode")} == {"hot", "cold"}, "attention: both modes asked"
print("bench smoke: gemv %d, decode %d, shift %d, attention %d rows" % (len(g), len(r2), len(s), len(a)))
EOF
