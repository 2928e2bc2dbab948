#!/usr/bin/env bash
# examples/demo.sh — the main job: build gearbx, convert the shared
# stories260K model (llama2.c checkpoint + tokenizer) to .gbx, and generate a
# story with entropy-routed gears. The text goes to stdout; the gear of every
# step (L/M/H) and a summary go to stderr, and the per-step telemetry to
# build/demo/trace.csv.
#   usage: examples/demo.sh [extra `gearbx run` options, e.g. -p "Once upon a time" --temp 0]
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${GEARBX_SHARED_DIR:-$PWD/../shared}
bash tests/deps.sh cmake ninja-build g++ zlib1g-dev libgtest-dev
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEARBX_BUILD_TESTS=OFF -DGEARBX_BUILD_BENCH=OFF >/dev/null
cmake --build build/demo --target gearbx_cli >/dev/null
GB=build/demo/gearbx
MODEL=build/demo/stories260K.gbx
[ -f "$MODEL" ] || $GB convert "$SHARED/models/stories260K.bin" --tokenizer "$SHARED/models/tok512.bin" -o "$MODEL" --quiet
$GB info "$MODEL" >&2
echo "== gearbx run --gear auto (text on stdout, gears on stderr)" >&2
$GB run -m "$MODEL" --gear auto -n 200 --temp 0.8 --top-p 0.95 --seed 7 --trace build/demo/trace.csv "$@"
