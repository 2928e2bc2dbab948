#!/usr/bin/env bash
# tests/check_isa_labels.sh SRC_DIR BUILD_DIR — the `isa` label is complete.
#
# tests/run.sh runs the whole suite on one emulated aarch64 CPU model and only
# the tests labelled `isa` on the other models. A test whose outcome depends
# on the CPU's instruction sets but lacks the label would then run on one CPU
# model only, and nothing would say so. The label comes from the folder: every
# test in tests/isa/ is built into gearbx_tests_isa and labelled there
# (tests/CMakeLists.txt). This check fails when
#   - a test source outside tests/isa/ touches the kernel table: iterates the
#     kernel list (kernels.inc), selects a table (gb_kernels_select), reads
#     the CPU's features (gb_port_cpu_features, GB_ISA_* bits, GB_EXPECT_ISA),
#     or drives the worker pool directly (gb_port_pool_start);
#   - one of those names no longer exists where it is defined (a rename would
#     otherwise make this check pass vacuously);
#   - the build lists no test with the label, or a test of gearbx_tests_isa
#     without it.
set -uo pipefail
S=$1; B=$2
fail=0
bad() { echo "ISA LABEL FAIL: $*"; fail=1; }

# name|file that defines it
defs=(
  "kernels.inc|arch/kernels.inc"
  "gb_kernels_select|arch/kernels.h"
  "GB_ISA_|arch/kernels.h"
  "gb_port_cpu_features|port/gearbx_port.h"
  "gb_port_pool_start|port/gearbx_port.h"
  "GB_EXPECT_ISA|tests/run.sh"
)
pattern=""
for d in "${defs[@]}"; do
  IFS='|' read -r name file <<<"$d"
  if [ ! -f "$S/$file" ]; then bad "$file is gone: update this check"; continue; fi
  if [ "$name" != kernels.inc ] && ! grep -q "$name" "$S/$file"; then
    bad "$name no longer appears in $file: update this check"
  fi
  pattern="$pattern${pattern:+|}${name//./\\.}"
done

n_isa=0
while IFS= read -r f; do
  rel=${f#"$S"/}
  case "$rel" in
    tests/isa/*) n_isa=$((n_isa + 1)); continue ;;
    tests/test_util.cpp | tests/alloc_hook.cpp) continue ;;  # helpers, not tests
  esac
  hits=$(grep -nE "$pattern" "$f" || true)
  if [ -n "$hits" ]; then
    bad "$rel touches the kernel table or the CPU's features but is not in tests/isa/ (label isa):"
    printf '    %s\n' "$hits"
  fi
done < <(find "$S/tests" -name '*.cpp' | sort)
[ "$n_isa" -gt 0 ] || bad "tests/isa/ holds no test source"

# The build's own view: labelled tests exist, and every test of the isa
# executable carries the label.
labelled=$(cd "$B" && ctest -N -L '^isa$' 2>/dev/null | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p' | sort)
[ -n "$labelled" ] || bad "no test in $B carries the label isa"
if [ -f "$B/tests/gearbx_tests_isa[1]_tests.cmake" ]; then
  all=$(sed -nE 's/^add_test\(\[=\[([^]]*)\]=\].*/\1/p' "$B/tests/gearbx_tests_isa[1]_tests.cmake" | sort)
  missing=$(comm -23 <(echo "$all") <(echo "$labelled"))
  [ -z "$missing" ] || bad "tests of gearbx_tests_isa without the label: $missing"
else
  bad "gtest discovery file of gearbx_tests_isa not found in $B/tests"
fi

if [ $fail = 0 ]; then
  echo "isa labels: $(echo "$labelled" | wc -l) tests labelled isa from $n_isa sources in tests/isa/; no other test touches the kernel table"
fi
exit $fail
