#!/usr/bin/env bash
# tests/run_tsan.sh [BUILD_DIR] — the concurrency test (tests/concurrency/)
# under ThreadSanitizer: one model shared by sessions decoding, prefilling,
# saving and restoring on eight threads (two of them with their own worker
# pools), with the tokenizer, model info and chat templates called beside
# them.
#
# Configures BUILD_DIR (default build/tsan) with GEARBX_TSAN=ON (clang when
# installed, else gcc), builds only gearbx_concurrency (the library, the
# converter it converts stories260K with in-process, the test helpers), runs
# it with halt_on_error=1 and fails on any report. JOBS=N sets the build's
# parallelism (default: every core). OpenBLAS is left out: it is not
# instrumented, so TSan could not see its accesses anyway, and the prefill
# then runs the library's own GEMM on its worker pools, which TSan does see.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
B=${1:-$ROOT/build/tsan}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
T0=$(date +%s)

COMPILERS=()
if command -v clang >/dev/null && command -v clang++ >/dev/null; then
  COMPILERS=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi
cmake -S "$ROOT" -B "$B" -G Ninja "${COMPILERS[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARBX_TSAN=ON \
  -DGEARBX_WITH_OPENBLAS=OFF -DGEARBX_BUILD_BENCH=OFF -DGEARBX_BUILD_SHARED=OFF >/dev/null
cmake --build "$B" --target gearbx_concurrency -j "$JOBS"
T1=$(date +%s)

LOG="$B/tsan.log"
rc=0
# halt_on_error: the first report ends the run with status 66.
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}" \
  "$B/tests/gearbx_concurrency" >"$LOG" 2>&1 || rc=$?
T2=$(date +%s)
grep -E "^concurrency:|PASSED|FAILED" "$LOG" || true
reports=$(grep -c "WARNING: ThreadSanitizer" "$LOG" || true)
echo "tsan: build $((T1 - T0)) s, run $((T2 - T1)) s, status $rc, reports $reports (log: $LOG)"
if [ "$rc" != 0 ] || [ "$reports" != 0 ]; then
  grep -A 40 -m 1 "WARNING: ThreadSanitizer" "$LOG" || tail -n 40 "$LOG"
  exit 1
fi
