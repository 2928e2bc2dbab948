#!/usr/bin/env bash
# tests/fuzz.sh — run every libFuzzer target (tests/fuzz/fuzz_*.cpp) for a
# while, on the instrumented build: the library, the converter and the
# targets compiled by clang with coverage counters, ASan and UBSan
# (GEARBX_FUZZ=ON).
#   usage: tests/fuzz.sh [SECONDS] [--jobs N] [--targets a,b,...]
#     SECONDS   per target (default 30)
#     --jobs N  targets run at the same time (default 1)
#     --targets only these (names with or without the fuzz_ prefix)
# GEARBX_FUZZ_ARGS: more libFuzzer options (e.g. "-rss_limit_mb=4096").
# GEARBX_FUZZ_REPLAY_DIR: a folder holding the targets' replay programs
# (<target>_replay) built by another build of this tree (any compiler):
# they write the seeds, so only the libFuzzer binaries are built here.
# Build directory: $GEARBX_FUZZ_BUILD, else build/fuzz; configured there
# with clang when it has no build yet, then only the fuzz targets are built
# (cmake --build --target fuzz_all; CMAKE_BUILD_PARALLEL_LEVEL sets the
# build's jobs). Needs clang and its libFuzzer runtime (Debian 12: clang,
# libclang-rt-14-dev), cmake, ninja-build (else make), libgtest-dev,
# zlib1g-dev.
# Per target, under BUILD/fuzz/<target>/: seeds/ (the target's seeds as
# files, written again on every run by `<target>_replay --dump`: inputs made
# in code and read from ../shared, never stored in the repository),
# corpus/ (libFuzzer's working corpus, kept between runs so campaigns
# accumulate), artifacts/ (crash, leak, timeout and out-of-memory inputs),
# last.log (libFuzzer's output). The regression inputs of
# tests/corpus/<target>/ are read too. -max_len covers the largest seed.
# Ends with a table (target, executions, exec/s, coverage, corpus size,
# crashes) and the same as one JSON line, which is also appended to
# BUILD/fuzz/history.jsonl. Exit status 1 if any target crashed (the inputs'
# paths are printed), 2 on a usage or build error.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SECONDS_PER=30
JOBS=1
ONLY=""
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) JOBS=${2:?--jobs needs a number}; shift 2 ;;
    --jobs=*) JOBS=${1#--jobs=}; shift ;;
    --targets) ONLY=${2:?--targets needs a list}; shift 2 ;;
    --targets=*) ONLY=${1#--targets=}; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    [0-9]*) SECONDS_PER=$1; shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (usage: tests/fuzz.sh [SECONDS] [--jobs N] [--targets a,b])" >&2; exit 2 ;;
  esac
done
[[ $SECONDS_PER =~ ^[0-9]+$ && $SECONDS_PER -gt 0 ]] || { echo "fuzz.sh: SECONDS must be a positive integer" >&2; exit 2; }
[[ $JOBS =~ ^[0-9]+$ && $JOBS -gt 0 ]] || { echo "fuzz.sh: --jobs must be a positive integer" >&2; exit 2; }

BUILD=${GEARBX_FUZZ_BUILD:-$ROOT/build/fuzz}
WORK=$BUILD/fuzz

# ---- build (only the fuzz targets) ---------------------------------------------
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  command -v clang >/dev/null && command -v clang++ >/dev/null || { echo "fuzz.sh: clang is needed (apt install clang libclang-rt-14-dev)" >&2; exit 2; }
  GEN=()
  command -v ninja >/dev/null && GEN=(-G Ninja)
  echo "== configuring $BUILD (clang, GEARBX_FUZZ=ON)"
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARBX_FUZZ=ON \
    -DGEARBX_BUILD_BENCH=OFF -DGEARBX_BUILD_SHARED=OFF -DGEARBX_WITH_OPENBLAS=OFF >/dev/null || exit 2
fi
grep -q '^GEARBX_FUZZ:BOOL=ON' "$BUILD/CMakeCache.txt" || { echo "fuzz.sh: $BUILD is not a GEARBX_FUZZ=ON build (set GEARBX_FUZZ_BUILD to another directory)" >&2; exit 2; }
REPLAY_DIR=${GEARBX_FUZZ_REPLAY_DIR:-}
BUILD_TARGET=fuzz_all
[ -z "$REPLAY_DIR" ] || BUILD_TARGET=fuzz_targets
echo "== building the fuzz targets in $BUILD ($BUILD_TARGET)"
cmake --build "$BUILD" --target "$BUILD_TARGET" >"$BUILD/fuzz-build.log" 2>&1 || { tail -40 "$BUILD/fuzz-build.log"; echo "fuzz.sh: build failed ($BUILD/fuzz-build.log)" >&2; exit 2; }

TARGETS=()
for src in "$ROOT"/tests/fuzz/fuzz_*.cpp; do
  t=$(basename "$src" .cpp)
  if [ -n "$ONLY" ]; then
    case ",$ONLY," in *",$t,"*|*",${t#fuzz_},"*) ;; *) continue ;; esac
  fi
  TARGETS+=("$t")
done
[ ${#TARGETS[@]} -gt 0 ] || { echo "fuzz.sh: no target matches '$ONLY'" >&2; exit 2; }
BIN_DIR=$(dirname "$(find "$BUILD" -name "${TARGETS[0]}" -type f -perm -u+x -print -quit)")
[ -n "$REPLAY_DIR" ] || REPLAY_DIR=$BIN_DIR
for t in "${TARGETS[@]}"; do
  [ -x "$BIN_DIR/$t" ] || { echo "fuzz.sh: $BIN_DIR/$t was not built (GEARBX_FUZZ=OFF in $BUILD?)" >&2; exit 2; }
  [ -x "$REPLAY_DIR/${t}_replay" ] || { echo "fuzz.sh: no $REPLAY_DIR/${t}_replay" >&2; exit 2; }
done

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# The file-based targets write each input to a scratch file: keep those in
# memory when the machine has /dev/shm.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi

# ---- one target ---------------------------------------------------------------------
# Writes $WORK/<t>/result: execs exec_per_s cov ft corpus crashes rc
run_target() {
  local t=$1 dir=$WORK/$1 max=4096 f sz rc=0 regress=$ROOT/tests/corpus/$1
  mkdir -p "$dir/corpus" "$dir/artifacts"
  rm -rf "$dir/seeds"; mkdir -p "$dir/seeds"
  "$REPLAY_DIR/${t}_replay" --dump "$dir/seeds" >/dev/null
  local inputs=("$dir/corpus" "$dir/seeds")
  [ -d "$regress" ] && inputs+=("$regress")
  # -max_len: the largest seed or regression input (at least libFuzzer's 4096).
  while IFS= read -r sz; do [ "$sz" -gt "$max" ] && max=$sz; done < <(find "$dir/seeds" "${inputs[@]:2}" -type f ! -name README.md -printf '%s\n')
  touch "$dir/.stamp"
  "$BIN_DIR/$t" -max_total_time="$SECONDS_PER" -max_len="$max" -timeout=120 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" ${GEARBX_FUZZ_ARGS:-} "${inputs[@]}" >"$dir/last.log" 2>&1 || rc=$?
  local execs eps cov ft corpus crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/last.log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/last.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$dir/last.log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$dir/last.log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  crashes=$(find "$dir/artifacts" -type f -newer "$dir/.stamp" | wc -l)
  [ "$rc" = 0 ] || [ "$crashes" -gt 0 ] || crashes=1  # died without an artifact (e.g. startup failure)
  echo "${execs:-0} ${eps:-0} ${cov:-0} ${ft:-0} $corpus $crashes $rc" >"$dir/result"
}

echo "== fuzzing ${#TARGETS[@]} targets, ${SECONDS_PER}s each, $JOBS at a time (work: $WORK)"
mkdir -p "$WORK"
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  rm -f "$WORK/$t/result"
  echo "   $t"
  run_target "$t" &
done
wait || true

# ---- report ---------------------------------------------------------------------------
FAILED=0
JSON=""
printf '\n%-16s %14s %10s %8s %8s %8s\n' target executions exec/s coverage corpus crashes
for t in "${TARGETS[@]}"; do
  r=$WORK/$t/result
  if [ -f "$r" ]; then read -r execs eps cov ft corpus crashes rc <"$r"; else execs=0 eps=0 cov=0 ft=0 corpus=0 crashes=1 rc=-1; fi
  printf '%-16s %14s %10s %8s %8s %8s\n' "$t" "$execs" "$eps" "$cov" "$corpus" "$crashes"
  JSON="$JSON${JSON:+,}{\"target\":\"$t\",\"executions\":$execs,\"exec_per_s\":$eps,\"cov\":$cov,\"ft\":$ft,\"corpus\":$corpus,\"crashes\":$crashes}"
  [ "$crashes" = 0 ] || FAILED=$((FAILED + 1))
done
LINE="{\"fuzz\":{\"seconds_per_target\":$SECONDS_PER,\"jobs\":$JOBS,\"date\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"commit\":\"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)\",\"targets\":[$JSON],\"failed\":$FAILED}}"
echo "$LINE"
echo "$LINE" >>"$WORK/history.jsonl"
if [ "$FAILED" != 0 ]; then
  for t in "${TARGETS[@]}"; do
    r=$WORK/$t/result
    [ -f "$r" ] && read -r _ _ _ _ _ crashes _ <"$r" || crashes=1
    [ "$crashes" = 0 ] && continue
    echo "!! $t failed; its log: $WORK/$t/last.log"
    grep -E 'ERROR: |runtime error|SUMMARY|fuzz_[a-z0-9_]+: ' "$WORK/$t/last.log" | head -5 | sed 's/^/   /'
    find "$WORK/$t/artifacts" -type f -newer "$WORK/$t/.stamp" | sed 's/^/   input: /'
  done
  exit 1
fi
