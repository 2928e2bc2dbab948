#!/usr/bin/env bash
# tests/run.sh — the whole test suite on a fresh Debian/Ubuntu machine:
# installs what the build needs, then builds and runs every configuration
# under ctest (GoogleTest): x86-64 Release (warnings as errors) and
# ASan+UBSan. Ends with one summary line over all configurations.
#   usage: tests/run.sh            (from anywhere; builds under build/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)
JOBS=$(nproc 2>/dev/null || echo 2)

# ---- dependencies -------------------------------------------------------------
bash tests/deps.sh cmake ninja-build g++ clang libgtest-dev zlib1g-dev libbenchmark-dev python3

TOTAL_PASS=0
TOTAL_FAIL=0
run_config() {  # name, cmake args...
  local name=$1; shift
  local dir="$ROOT/build/$name"
  echo "== [$name] configure + build"
  cmake -S "$ROOT" -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
  echo "== [$name] ctest"
  local log="$dir/ctest.log" rc=0
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" --timeout 1200) 2>&1 | tee "$log" || rc=$?
  local line pass total fail
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -1 || true)
  total=$(echo "$line" | sed -E 's/.* out of ([0-9]+).*/\1/')
  fail=$(echo "$line" | sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/')
  if [ -z "$line" ]; then total=0; fail=1; fi
  pass=$((total - fail))
  TOTAL_PASS=$((TOTAL_PASS + pass)); TOTAL_FAIL=$((TOTAL_FAIL + fail))
  echo "== [$name] $pass passed, $fail failed"
  [ "$rc" = 0 ] || [ "$fail" != 0 ] || TOTAL_FAIL=$((TOTAL_FAIL + 1))
}

run_config x86-release -DCMAKE_BUILD_TYPE=Release -DGEARBX_WERROR=ON
run_config x86-asan-ubsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARBX_SANITIZE=ON -DGEARBX_WERROR=ON

echo
echo "== total time $(( $(date +%s) - START )) s"
echo "all configurations: $TOTAL_PASS passed, $TOTAL_FAIL failed"
[ "$TOTAL_FAIL" = 0 ]
