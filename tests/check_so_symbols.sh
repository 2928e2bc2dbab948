#!/usr/bin/env bash
# tests/check_so_symbols.sh LIBGEARBX_SO GEARBX_H [NM]
# libgearbx.so exports exactly the functions gearbx.h declares: nothing of
# the kernels, the port layer or the C++ internals, and none of the API
# missing. Prints the differences; exit 1 when there are any.
set -euo pipefail
so=$1 header=$2 nm=${3:-nm}
api=$(grep -oE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]gb_[a-z0-9_]+\(' "$header" | grep -oE 'gb_[a-z0-9_]+\($' | tr -d '(' | sort -u)
exported=$("$nm" -D --defined-only "$so" | awk 'NF >= 3 && $2 ~ /^[TtDdBbRrVvWwi]$/ { sub(/@.*/, "", $3); print $3 }' | sort -u)
[ -n "$api" ] || { echo "no API functions found in $header"; exit 1; }
extra=$(comm -13 <(echo "$api") <(echo "$exported") || true)
missing=$(comm -23 <(echo "$api") <(echo "$exported") || true)
n_api=$(echo "$api" | wc -l)
if [ -n "$extra" ] || [ -n "$missing" ]; then
  [ -z "$extra" ] || { echo "exported but not in gearbx.h:"; echo "$extra" | sed 's/^/  /'; }
  [ -z "$missing" ] || { echo "declared in gearbx.h but not exported:"; echo "$missing" | sed 's/^/  /'; }
  exit 1
fi
echo "libgearbx.so exports exactly the $n_api functions of gearbx.h"
