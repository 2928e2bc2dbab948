#!/usr/bin/env bash
# bench/gguf_types.sh — every GGUF type of a model, run at its own precision,
# next to gearbx's own gears of the same model, in one run:
#   - bits per weight as stored (gearbx info: the default tier's matrices);
#   - ΔNLL against the F32 file, measured by gearbx over the reference
#     windows of each fixture (gearbx perplexity --ref, f32 KV cache), and
#     the same difference as llama.cpp computed it (the fixture's ref_nll);
#   - decode tokens/s (gearbx-bench-decode, 1 thread, 64 tokens, median of
#     its --reps), the models interleaved round by round, median over rounds;
#     the F32 file's own low / mid / high gears run in each round too.
# Prints a markdown table and writes JSON rows (--json FILE).
#   usage: bench/gguf_types.sh BUILD_DIR [--fixtures DIR] [--model stories5M]
#                              [--rounds R] [--threads T] [--json FILE]
set -euo pipefail
build=${1:?usage: bench/gguf_types.sh BUILD_DIR [--fixtures DIR] [--rounds R] [--threads T] [--json FILE]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
fixtures="$here/../shared/fixtures" model=stories5M rounds=5 threads=1 json=""
while [ $# -gt 0 ]; do
  case $1 in
    --fixtures) fixtures=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cli="$build/gearbx" bench="$build/bench/gearbx-bench-decode"
[ -x "$cli" ] && [ -x "$bench" ] || { echo "build $build lacks gearbx or gearbx-bench-decode" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

types=()
for f in "$fixtures/$model"-*.gguf; do
  t=$(basename "$f" .gguf); t=${t#"$model"-}
  types+=("$t")
  # Float files: gearbx's own tiers (low, mid, high, f32); quantized files:
  # their own formats only (the converter's default).
  "$cli" convert "$f" -o "$work/$t.gbx" --quiet
  "$cli" perplexity --ref "$f.ref.json" -m "$work/$t.gbx" --json --kv-policy f32 \
    $( [ "$t" = F32 ] || [ "$t" = F16 ] || [ "$t" = BF16 ] && echo --policy f32 ) > "$work/$t.ppl.json"
  "$cli" info "$work/$t.gbx" > "$work/$t.info"
done

# Decode speed: every quantized type on its default gear, the F32 file on
# low, mid and high; round-robin, so machine noise falls on every row alike.
for r in $(seq 1 "$rounds"); do
  for t in "${types[@]}"; do
    case $t in F32) gears=low,mid,high ;; F16 | BF16) continue ;; *) gears=default ;; esac
    "$bench" -m "$work/$t.gbx" --gears "$gears" --threads "$threads" --tokens 64 --reps 3 --prefill 1 \
      --json "$work/$t.speed.$r.json" > /dev/null 2>&1
  done
done

python3 - "$work" "$model" "$rounds" "$json" "${types[@]}" <<'EOF'
import json, re, statistics, sys
work, model, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
types = sys.argv[5:]
ppl = {t: json.load(open(f"{work}/{t}.ppl.json")) for t in types}
def info(t):
    tiers = {}
    for line in open(f"{work}/{t}.info"):
        m = re.match(r"tier (\w+)\s+\d+ bytes, ([\w+]+), ([\d.]+) bits/weight, (.*?)( \(default\))?$", line.strip())
        if m: tiers[m.group(1)] = (m.group(2), float(m.group(3)), m.group(5) is not None)
    return tiers
def speed(t, gear):
    vals = []
    for r in range(1, rounds + 1):
        try: rows = json.load(open(f"{work}/{t}.speed.{r}.json"))
        except FileNotFoundError: continue
        vals += [x["tok_s"] for x in rows if x["phase"] == "decode" and x["gear"] == gear]
    return vals
base, base_ref = ppl["F32"]["nll"], ppl["F32"]["ref_nll"]
rows = []
def add(name, gear, fmt, bits, tok):
    p = ppl.get(name.split(" ")[0], {})
    med = statistics.median(tok) if tok else 0.0
    spread = (max(tok) - min(tok)) / med if tok and med else 0.0
    rows.append(dict(model=model, type=name, gear=gear, formats=fmt, bits_per_weight=bits,
                     dnll_gearbx=(p.get("nll", float("nan")) - base) if name in types else None,
                     dnll_llamacpp=(p.get("ref_nll", float("nan")) - base_ref) if name in types else None,
                     nll_diff=p.get("nll_diff") if name in types else None,
                     top1_agreement=p.get("top1_agreement") if name in types else None,
                     decode_tok_s=med, decode_spread=spread, rounds=len(tok)))
for t in types:
    ti = info(t)
    g, (fmt, bits, _) = next(((g, v) for g, v in ti.items() if v[2]), ("mid", ("?", 0.0, True)))
    if t in ("F32", "F16", "BF16"): g, (fmt, bits, _) = "f32", ti.get("f32", ("f32", 32.0, False))
    add(t, g, fmt, bits, speed(t, "default") if t not in ("F32", "F16", "BF16") else [])
f32i = info("F32")
for g in ("low", "mid", "high"):
    fmt, bits, _ = f32i[g]
    add(f"gearbx {g} gear (from F32)", g, fmt, bits, speed("F32", g))
low = next(r["decode_tok_s"] for r in rows if r["type"].startswith("gearbx low"))
print(f"| {model} | gear | formats | bits/weight | ΔNLL vs F32, gearbx | ΔNLL vs F32, llama.cpp | NLL − llama.cpp's | argmax agreement | decode tok/s (1T, median, spread) | time/token vs gearbx low |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    f = lambda v, s: "" if v is None else s % v
    tok = r["decode_tok_s"]
    print(f"| {r['type']} | {r['gear']} | {r['formats']} | {r['bits_per_weight']:.2f} | {f(r['dnll_gearbx'], '%+.4f')} | "
          f"{f(r['dnll_llamacpp'], '%+.4f')} | {f(r['nll_diff'], '%+.4f')} | {f(r['top1_agreement'] and 100 * r['top1_agreement'], '%.2f %%')} | "
          + (f"{tok:.0f} (±{50 * r['decode_spread']:.0f} %) | {low / tok:.2f}× |" if tok else " | |"))
if out:
    json.dump(rows, open(out, "w"), indent=1)
EOF
