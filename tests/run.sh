#!/usr/bin/env bash
# tests/run.sh — the whole test suite on a fresh Debian/Ubuntu machine.
# Installs what it needs, then builds and runs, each under ctest:
#   1. x86-64 Release, the whole suite (warnings as errors; includes the
#      hygiene check and the benchmark smoke tests)
#   2. x86-64 ASan + UBSan, the whole suite; then ThreadSanitizer on the
#      concurrency test (tests/run_tsan.sh) and every libFuzzer target for
#      8 s on the instrumented library (tests/fuzz.sh, two at a time)
#   3. aarch64 cross build under qemu-aarch64: the whole suite on one CPU
#      model (cortex-a76: NEON + dotprod + fp16, the Raspberry Pi 5 class) but
#      a dozen slow tests whose outcome does not depend on the CPU, and the
#      tests labelled `isa` (tests/isa/: SIMD kernels against generic, fused
#      attention variants, the dispatcher's choice, thread invariance) on
#      each of the others: cortex-a53 (NEON), max with SVE off (+i8mm), max
#      with SVE at 128, 256 and 512 bits (at 256 and 512 the kernel-level
#      ones: the SVE code is the same at every vector length, and the
#      whole-model ones run at 128); the greedy stories of both shared
#      models and of the qwen3, smollm3, phi3, gemma3, lfm2, qwen35 and gemma4 fixtures (tests/fixtures/) on
#      every model, compared with x86's
#   4. the none port (aarch64, no OS services): a decode test with the model
#      linked into the program, under qemu (cortex-a53)
# then reports the aarch64 .text size of libgearbx.a at -Os and -O2 and a
# table of every stage's wall time. Ends with one summary line over all
# configurations, in ctest's form.
#   usage: tests/run.sh [--quick]   (--quick: x86 Release only, for iteration)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)
# Wall time of every stage, printed as a table at the end (and on an early
# exit, so a failed build still shows where the time went).
STAGE_NAMES=(); STAGE_SECS=()
timed() {  # name, command...: run it, record its wall time, keep its status
  local name=$1 t0 rc=0; shift
  t0=$(date +%s)
  "$@" || rc=$?
  STAGE_NAMES+=("$name"); STAGE_SECS+=($(( $(date +%s) - t0 )))
  return $rc
}
stage_table() {
  local i
  echo "== wall time per stage (s):"
  for i in "${!STAGE_NAMES[@]}"; do printf '   %-40s %6d\n' "${STAGE_NAMES[$i]}" "${STAGE_SECS[$i]}"; done
  printf '   %-40s %6d\n' "total" "$(( $(date +%s) - START ))"
}
trap 'rc=$?; [ $rc = 0 ] || { echo "!! tests/run.sh stopped early (status $rc)"; stage_table; }' EXIT
JOBS=$(nproc 2>/dev/null || echo 2)
QUICK=0; [ "${1:-}" = "--quick" ] && QUICK=1
SHARED=${GEARBX_SHARED_DIR:-$ROOT/../shared}

# ---- dependencies -------------------------------------------------------------
PKGS="cmake ninja-build g++ clang libgtest-dev zlib1g-dev libbenchmark-dev python3 binutils libopenblas-dev pkg-config bsdutils"
[ $QUICK = 1 ] || PKGS="$PKGS valgrind libclang-rt-14-dev llvm g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user libgtest-dev:arm64 zlib1g-dev:arm64 libopenblas-dev:arm64"
timed "install packages" bash tests/deps.sh $PKGS
# Debian 12's qemu-user hangs in pthread_create of dynamically linked
# programs, so the aarch64 build links its executables statically
# (GEARBX_STATIC_EXES): the thread tests then run under the emulator too.
# OpenBLAS need not start its own thread server (gearbx runs it
# single-threaded anyway).
export OPENBLAS_NUM_THREADS=1

TOTAL_PASS=0
TOTAL_FAIL=0
SUMMARY=()
count_log() {  # name, log, rc: add a ctest log's counts to the totals
  local name=$1 log=$2 rc=$3 line pass total fail
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -1 || true)
  if [ -z "$line" ]; then total=0; fail=1; else
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    fail=$(sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/' <<<"$line")
  fi
  pass=$((total - fail))
  [ "$rc" = 0 ] || [ "$fail" != 0 ] || fail=1
  TOTAL_PASS=$((TOTAL_PASS + pass)); TOTAL_FAIL=$((TOTAL_FAIL + fail))
  SUMMARY+=("$(printf '%-28s %4d passed, %d failed' "$name" "$pass" "$fail")")
  echo "== [$name] $pass passed, $fail failed"
}
build() {  # name, dir, cmake args...
  local name=$1 dir=$2; shift 2
  echo "== [$name] build"
  timed "$name: build" cmake_build "$dir" "$@"
}
cmake_build() {
  local dir=$1; shift
  cmake -S "$ROOT" -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}
run_ctest() {  # name, dir, [env assignments...] [-- ctest arguments...]
  local name=$1 dir=$2; shift 2
  local log="$dir/ctest-$name.log" rc=0 envs=() args=() t0
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# = 0 ] || { shift; args=("$@"); }
  echo "== [$name] ctest ${args[*]}"
  t0=$(date +%s)
  (cd "$dir" && env "${envs[@]}" ctest --output-on-failure -j "$JOBS" --timeout 1500 "${args[@]}") >"$log" 2>&1 || rc=$?
  STAGE_NAMES+=("$name: test ${args[*]}"); STAGE_SECS+=($(( $(date +%s) - t0 )))
  grep -E "^(CPU features|SVE vector length)|tests passed|^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Not Run|Subprocess)" "$log" || true
  [ "$rc" = 0 ] || tail -n 60 "$log"
  count_log "$name" "$log" $rc
}

# 1-2. x86-64 ---------------------------------------------------------------------
build x86-release "$ROOT/build/x86-release" -DCMAKE_BUILD_TYPE=Release -DGEARBX_WERROR=ON
run_ctest x86-release "$ROOT/build/x86-release"
GB="$ROOT/build/x86-release/gearbx"

if [ $QUICK = 0 ]; then
# Line tables only (-g1): the sanitizers' reports name files and lines, and
# the build takes a quarter less time than with full debug information.
build x86-asan-ubsan "$ROOT/build/x86-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARBX_SANITIZE=ON -DGEARBX_WERROR=ON -DGEARBX_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
run_ctest x86-asan-ubsan "$ROOT/build/x86-asan" ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1

# 2b. ThreadSanitizer and fuzzing --------------------------------------------------------
run_script() {  # name, command...: one check that passes or fails, its output in a log
  local name=$1 log="$ROOT/build/$1.log" rc=0 t0; shift
  echo "== [$name] $*"
  t0=$(date +%s)
  "$@" >"$log" 2>&1 || rc=$?
  STAGE_NAMES+=("$name"); STAGE_SECS+=($(( $(date +%s) - t0 )))
  if [ $rc = 0 ]; then
    TOTAL_PASS=$((TOTAL_PASS + 1)); SUMMARY+=("$(printf '%-28s %4d passed, %d failed' "$name" 1 0)")
  else
    TOTAL_FAIL=$((TOTAL_FAIL + 1)); SUMMARY+=("$(printf '%-28s %4d passed, %d failed' "$name" 0 1)"); tail -n 60 "$log"
  fi
}
mkdir -p "$ROOT/build"
run_script tsan-concurrency bash tests/run_tsan.sh "$ROOT/build/tsan"
tail -n 3 "$ROOT/build/tsan-concurrency.log"
# The sanitizer build's replay programs write the seeds (GEARBX_FUZZ_REPLAY_DIR),
# so the fuzzing build compiles the libFuzzer binaries only.
GEARBX_FUZZ_BUILD="$ROOT/build/fuzz" GEARBX_FUZZ_REPLAY_DIR="$ROOT/build/x86-asan/tests" \
  run_script fuzz-8s bash tests/fuzz.sh 8 --jobs "$JOBS"
sed -n '/^== fuzz/,$p' "$ROOT/build/fuzz-8s.log" | grep -v '^{' | tail -n 20

# 3. aarch64 under qemu ---------------------------------------------------------------
A64="$ROOT/build/aarch64"
build aarch64 "$A64" -DCMAKE_TOOLCHAIN_FILE="$ROOT/toolchains/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DGEARBX_WERROR=ON -DGEARBX_BUILD_BENCH=OFF -DGEARBX_STATIC_EXES=ON
QEMU="qemu-aarch64 -L /usr/aarch64-linux-gnu"
MODEL_DIR="$ROOT/build/models"; mkdir -p "$MODEL_DIR"
story() { $1 run -m "$2" -n 200 --gear "${3:-high}" --temp 0 --deterministic --quiet ${4:+-p "$4"} 2>/dev/null | md5sum | cut -c1-12; }
# The architectures beyond llama: the repository's Q4_K_M fixtures (random
# weights), converted, on their own tier, after a short prompt (without one,
# gemma3-tiny's first greedy token is its end of text); greedy text md5s,
# one line (gemma4, which no .gbx holds, from its GGUF in place). A story
# that is only a newline (md5 68b329da9893) is a failure.
arch_stories() {  # gearbx [qemu prefix...]
  local a f m out=""
  for a in qwen3 smollm3 phi3 gemma3 lfm2 qwen35 gemma4; do
    f="$MODEL_DIR/$a-tiny-q4km.gbx"
    [ "$a" = gemma4 ] && f="$ROOT/tests/fixtures/gemma4-tiny-Q4_K_M.gguf"
    m=$(story "$1" "$f" low "Once upon a time")
    [ "$m" = 68b329da9893 ] && m="EMPTY"
    out="$out $a $m"
  done
  echo "${out# }"
}
x86_stories() {
  "$GB" convert "$SHARED/models/stories260K.bin" --tokenizer "$SHARED/models/tok512.bin" -o "$MODEL_DIR/s260k.gbx" --quiet &&
  "$GB" convert "$SHARED/models/stories5M_distilled.bin" --tokenizer "$SHARED/models/tok512.bin" -o "$MODEL_DIR/s5m.gbx" --quiet &&
  X86_260=$(story "$GB" "$MODEL_DIR/s260k.gbx") && X86_5M=$(story "$GB" "$MODEL_DIR/s5m.gbx") &&
  for a in qwen3 smollm3 phi3 gemma3 lfm2 qwen35; do "$GB" convert "$ROOT/tests/fixtures/$a-tiny-Q4_K_M.gguf" -o "$MODEL_DIR/$a-tiny-q4km.gbx" --quiet || return 1; done &&
  X86_ARCH=$(arch_stories "$GB")
}
timed "models + x86 greedy stories" x86_stories
# The two models' stories agree for ~60 tokens (5M is distilled from 260K) but
# not over 200; an empty output (md5 d41d8cd98f00) would make every CPU agree.
if [ "$X86_260" = "$X86_5M" ] || [ "$X86_260" = d41d8cd98f00 ]; then
  echo "!! greedy story check is vacuous: stories260K $X86_260, stories5M $X86_5M"; TOTAL_FAIL=$((TOTAL_FAIL + 1))
fi
STORIES=("x86-64           stories260K $X86_260  stories5M $X86_5M  (md5 of 200 greedy tokens' text)"
         "x86-64           $X86_ARCH  (tests/fixtures, Q4_K_M tier)")
case "$X86_ARCH" in *d41d8cd98f00*|*EMPTY*|"") echo "!! architecture story check is vacuous: $X86_ARCH"; TOTAL_FAIL=$((TOTAL_FAIL + 1)) ;; esac
aarch64_stories() {  # cpu: both models' greedy stories under that CPU model, against x86's
  # The shared models' two stories run next to the fixtures' (two cores).
  local cpu=$1 a b t
  t=$(mktemp -d)
  { QEMU_CPU=$cpu story "$QEMU $A64/gearbx" "$MODEL_DIR/s260k.gbx" >"$t/a"; QEMU_CPU=$cpu story "$QEMU $A64/gearbx" "$MODEL_DIR/s5m.gbx" >"$t/b"; } &
  QEMU_CPU=$cpu arch_stories "$QEMU $A64/gearbx" >"$t/c"
  wait
  a=$(cat "$t/a"); b=$(cat "$t/b")
  STORIES+=("$(printf '%-16s stories260K %s  stories5M %s  %s' "$cpu" "$a" "$b" \
    "$([ "$a" = "$X86_260" ] && [ "$b" = "$X86_5M" ] && echo same-as-x86 || echo DIFFERENT)")")
  if [ "$a" != "$X86_260" ] || [ "$b" != "$X86_5M" ]; then TOTAL_FAIL=$((TOTAL_FAIL + 1)); fi
  a=$(cat "$t/c"); rm -rf "$t"
  STORIES+=("$(printf '%-16s %s  %s' "$cpu" "$a" "$([ "$a" = "$X86_ARCH" ] && echo same-as-x86 || echo DIFFERENT)")")
  [ "$a" = "$X86_ARCH" ] || TOTAL_FAIL=$((TOTAL_FAIL + 1))
}
# CPU model | ISAs the dispatcher must see | SVE bits. The first runs the whole
# suite; the others run the tests whose outcome depends on the CPU (label
# isa, tests/isa/; tests/check_isa_labels.sh keeps the label complete). At
# SVE 256 and 512 bits the whole-model isa tests (thread invariance, the
# prefill's per-position steps on the pool: minutes each under the emulator)
# are left to the 128-bit run: the SVE kernels are one vector-length-agnostic
# code, which the kernel tests check at every length and the greedy stories
# check end to end. The `max,sve=off` run leaves them too: its kernels
# (NEON, SDOT, FP16, I8MM) run them in the cortex-a76 run and in the
# 128-bit run (which adds SVE over the same I8MM kernels).
# The full run on cortex-a76 leaves out the slowest tests whose outcome does
# not depend on the CPU beyond the kernels the rest checks (each over 10 s
# under the emulator): the stories5M twins of tests it runs on stories260K,
# the sampling statistics, the tool grammar's sampled replies, the pool's
# 10 000-step run, the timed speculative rule, the chat CLI, the tokenizer's
# segmented naive comparison, the state fuzz corpus, the memory soak, the
# file changed under running passes and the calibration from a batched
# prefill (whose batched logits the run checks on their own). The native
# runs (Release and sanitizers) run every one of them.
FULL_CPU=cortex-a76
NATIVE_ONLY='^(Prefill\.BatchedMatchesTokenByTokenStories5M|Spec\.GreedyIsTheVerifierBitForBitStories5M|Spec\.SamplingKeepsTheVerifierDistribution|ToolGrammar\.SampledRepliesAreCallsTheParserReads|Kv\.LongGeneration10000StepsInAFixedPool|Spec\.TimedRuleLengthensOneStepAtATime|CliChat\.|TokenizerTok512\.SegmentedEqualsWholeTextNaive|fuzz_state|soak_short|Integrity\.ChangesDuringPassesEndWithTheStatus|Prefill\.CalibrationFromBatchedPrefill)'
MODEL_LEVEL_ISA='^(Threads\.LogitsBitIdentical|PrefillExact\.PerPositionSteps)'
for spec in "cortex-a76|neon,dotprod,fp16|" "cortex-a53|neon|" "max,sve=off|neon,dotprod,i8mm,fp16|" "max,sve-max-vq=1|neon,dotprod,i8mm,sve,fp16|128" \
            "max,sve-max-vq=2|neon,dotprod,i8mm,sve,fp16|256" "max,sve-max-vq=4|neon,dotprod,i8mm,sve,fp16|512"; do
  IFS='|' read -r cpu isa bits <<<"$spec"
  name="aarch64-${cpu//,sve-max-vq=/-vq}"
  envs=(QEMU_CPU="$cpu" GB_EXPECT_ISA="$isa" GB_TEST_SCALE=0.15)
  [ -z "$bits" ] || envs+=(GB_EXPECT_SVE_BITS="$bits")
  if [ "$cpu" = "$FULL_CPU" ]; then
    run_ctest "$name" "$A64" "${envs[@]}" -- -E "$NATIVE_ONLY"
  elif [ "$bits" = 256 ] || [ "$bits" = 512 ] || [ "$cpu" = "max,sve=off" ]; then
    run_ctest "$name" "$A64" "${envs[@]}" -- -L '^isa$' -E "$MODEL_LEVEL_ISA"
  else
    run_ctest "$name" "$A64" "${envs[@]}" -- -L '^isa$'
  fi
  timed "$name: greedy stories" aarch64_stories "$cpu"
done
echo "== greedy stories (deterministic mode), x86 vs aarch64 CPU models:"
printf '   %s\n' "${STORIES[@]}"
echo "   stories260K at high on cortex-a53: $(QEMU_CPU=cortex-a53 $QEMU "$A64/gearbx" run -m "$MODEL_DIR/s260k.gbx" -n 40 --gear high --temp 0 --quiet 2>/dev/null | head -c 200)"

# 4. none port ------------------------------------------------------------------------
build none-port "$ROOT/build/none" -DCMAKE_TOOLCHAIN_FILE="$ROOT/toolchains/aarch64-none.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DGEARBX_WERROR=ON -DGEARBX_NONE_MODEL="$MODEL_DIR/s260k.gbx" -DGEARBX_NONE_GGUF="$SHARED/models/stories260K.gguf"
run_ctest none-port "$ROOT/build/none" -- -V
grep -E "^[0-9]+: (PASS|FAIL|gear|none)" "$ROOT/build/none/ctest-none-port.log" | cut -c1-160 || true

# .text size of libgearbx.a for aarch64 -----------------------------------------------------
echo "== libgearbx.a for aarch64, .text bytes (library only, all kernels included):"
size_build() {  # opt: the library alone (no tools, tests or benchmarks) at -OPT
  local d="$ROOT/build/aarch64-size-$1"
  cmake -S "$ROOT" -B "$d" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$ROOT/toolchains/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-$1 -DNDEBUG" -DGEARBX_BUILD_TOOLS=OFF >/dev/null &&
  cmake --build "$d" --target gearbx >/dev/null &&
  printf '   -%s: %s bytes of .text\n' "$1" "$(aarch64-linux-gnu-size -t "$d/libgearbx.a" | tail -1 | awk '{print $1}')"
}
timed "aarch64 size -Os: build" size_build Os
# The speed build's figure comes from the aarch64 build above (Release: -O3
# and the same kernels), not from a build of its own.
printf '   Release (-O3, the build under test): %s bytes of .text\n' "$(aarch64-linux-gnu-size -t "$A64/libgearbx.a" | tail -1 | awk '{print $1}')"
fi

echo
echo "== configurations:"
printf '   %s\n' "${SUMMARY[@]}"
stage_table
TOTAL=$((TOTAL_PASS + TOTAL_FAIL))
PCT=$(( TOTAL > 0 ? 100 * TOTAL_PASS / TOTAL : 0 ))
echo "$PCT% tests passed, $TOTAL_FAIL tests failed out of $TOTAL"
[ "$TOTAL_FAIL" = 0 ]
