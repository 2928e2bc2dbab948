#!/usr/bin/env bash
# tests/run_example.sh GEARBX MINIMAL MODEL.gguf [EMULATOR...]
# examples/minimal end to end: the model converted by the built gearbx, then
# the example generates from it (under the emulator when cross-compiled);
# its output must continue the prompt.
set -euo pipefail
cli=$1 example=$2 gguf=$3; shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$@" "$cli" convert "$gguf" -o "$work/model.gbx" --quiet
out=$("$@" "$example" "$work/model.gbx" "Once upon a time")
case $out in
  "Once upon a time"?*) echo "minimal: ${out:0:80}..." ;;
  *) echo "minimal: unexpected output: $out"; exit 1 ;;
esac
