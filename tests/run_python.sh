#!/usr/bin/env bash
# tests/run_python.sh PYTHON3 GEARBX LIBGEARBX_SO MODEL.gguf SOURCE_DIR
# The Python binding's unittest suite (bindings/python/tests) with the
# system interpreter over the built libgearbx.so, on stories260K converted
# by the built gearbx (the tests assert that model's shape).
set -euo pipefail
py=$1 cli=$2 so=$3 gguf=$4 src=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cli" convert "$gguf" -o "$work/stories260K.gbx" --quiet
cd "$src"
GEARBX_LIBRARY="$so" GEARBX_TEST_MODEL="$work/stories260K.gbx" GEARBX_TEST_GGUF="$gguf" GEARBX_INCLUDE_DIR="$src/include" \
  PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/bindings/python" \
  "$py" -m unittest discover -s bindings/python/tests -v 2>&1 | tail -n 60
exit "${PIPESTATUS[0]}"
