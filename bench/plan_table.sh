#!/usr/bin/env bash
# bench/plan_table.sh — gb_plan at several budgets, each plan measured:
#   the plan (gearbx plan: gear, KV, prefill batch, arena + resident weights),
#   the resident weight-tier bytes the OS reports after 32 decoded tokens
#   (gearbx run --budget --trace: resident_weight_bytes), the decode speed of
#   that run, and, with --text, the NLL of the planned session over the text
#   (gearbx perplexity --budget, f32 reference for KL).
# Prints a markdown table and, with --json FILE, one JSON object per budget.
#   usage: bench/plan_table.sh BUILD_DIR MODEL.gbx --ctx N [--text FILE --max-tokens N] [--json FILE] BUDGET...
set -euo pipefail
build=${1:?usage: bench/plan_table.sh BUILD_DIR MODEL.gbx --ctx N [--text FILE] [--json FILE] BUDGET...}
model=${2:?model}
shift 2
ctx=0 text="" max_tokens=4096 json="" budgets=()
while [ $# -gt 0 ]; do
  case $1 in
    --ctx) ctx=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    *) budgets+=("$1"); shift ;;
  esac
done
cli="$build/gearbx"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -z "$json" ] || : > "$json"
base=""
if [ -n "$text" ]; then  # the unconstrained reference: f32 tier, f32 KV cache
  "$cli" perplexity -m "$model" -f "$text" --ctx "$ctx" --max-tokens "$max_tokens" --policy f32 --no-kl --json "$work/base.json" \
    > /dev/null 2>&1
  base=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['nll'])" "$work/base.json")
  echo "f32 tier, f32 KV cache: NLL $base over $max_tokens tokens of $(basename "$text")"
  echo
fi
echo "| budget | gear | KV | prefill batch | arena + resident weights (plan) | resident tiers measured | decode tok/s | NLL | ΔNLL vs f32 |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for b in "${budgets[@]}"; do
  if ! "$cli" plan -m "$model" --budget "$b" --ctx "$ctx" > "$work/plan" 2> "$work/err"; then
    echo "| $b | nothing fits: $(cut -c1-120 "$work/err") | | | | | | | |"
    continue
  fi
  line1=$(head -1 "$work/plan") line2=$(sed -n 2p "$work/plan")
  gear=$(sed -E 's/.*gear ([a-z0-9]+),.*/\1/' <<<"$line1")
  kv=$(sed -E 's/.*, kv (.*), prefill batch.*/\1/' <<<"$line1")
  pb=$(sed -E 's/.*prefill batch ([0-9]+).*/\1/' <<<"$line1")
  total=$(sed -E 's/.*= ([0-9.]+) MiB of.*/\1/' <<<"$line2")
  "$cli" run -m "$model" --budget "$b" --ctx "$ctx" -n 32 --temp 0 --trace "$work/trace.csv" > /dev/null 2> "$work/run"
  resident=$(tail -1 "$work/trace.csv" | cut -d, -f15)
  toks=$(grep -oE '[0-9.]+ tok/s' "$work/run" | head -1 | cut -d' ' -f1)
  nll="" dnll=""
  if [ -n "$text" ]; then
    "$cli" perplexity -m "$model" -f "$text" --ctx "$ctx" --max-tokens "$max_tokens" --budget "$b" --json "$work/ppl.json" \
      > /dev/null 2>&1
    read -r nll dnll < <(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.5f %+.5f' % (d['nll'], d['nll'] - float(sys.argv[2])))" "$work/ppl.json" "$base")
  fi
  printf '| %s | %s | %s | %s | %s MiB | %.1f MiB | %s | %s | %s |\n' "$b" "$gear" "$kv" "$pb" "$total" \
    "$(python3 -c "print($resident/1048576)")" "$toks" "${nll:--}" "${dnll:--}"
  [ -z "$json" ] || printf '{"budget": "%s", "gear": "%s", "kv": "%s", "prefill_batch": %s, "plan_mib": %s, "resident_tier_bytes": %s, "tok_s": %s, "nll": %s}\n' \
    "$b" "$gear" "$kv" "$pb" "$total" "$resident" "${toks:-null}" "${nll:-null}" >> "$json"
done
