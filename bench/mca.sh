#!/usr/bin/env bash
# mca.sh — llvm-mca estimates of the hot loop of every arm64 GEMV kernel, in
# cycles per 32 weights, on Cortex-A55, Cortex-A76, Neoverse-N1 and
# Neoverse-V1, set against the cycles a Cortex-A76 core needs to receive the
# same weight bytes from DRAM. No ARM board is at hand: this is a static
# model of the loops, not a measurement.
#
# How: each arch/arm64/<isa>/*.cpp is compiled to assembly with the cross
# g++ -O3 and that folder's flags, read from gb_isa_folder() in the top
# CMakeLists.txt (the flags the library is built with). For every GB_GEMV
# entry of arch/kernels.inc in that folder, the function's hot loop is found
# in the assembly (no markers in arch/: the loops are the backward branches;
# from each innermost loop the enclosing loops are taken while they store
# nothing (a row loop always stores y[r]), and the largest result is the
# hot loop; loops nested in it, such as SVE q8's vector-length loops over a
# block, are counted once, i.e. at a vector length of 256 bits and more)
# and run through
#   llvm-mca -mtriple=aarch64 -mcpu=CPU [-mattr=+dotprod|+i8mm|+sve|+fullfp16].
# cycles/iteration = Total Cycles / Iterations; cycles per 32 weights =
# cycles/iteration * 32 / weights per iteration (from the kernel source; the
# table says so, and the weight-pointer step found in the loop is checked).
# q4r16 (16-row interleaved q4) kernels do a whole group-block per
# iteration: 16 rows x 32 weights, 288 bytes, so their cycles per 32 weights
# are per row-block as for q4.
#
# Multi-position kernels (GB_GEMVM) whose hot loops are position tiles (one
# loop per tile width P, each loop weights x P positions; f32 / f16 in the
# neon folder): every innermost loop of the function that steps the weight
# pointer like the gemv's hot loop is a tile; P = its fmla count / that of
# the gemv's hot loop. For m positions the kernel runs ceil(m / Pmax) tiles
# of near-equal width (the kernel's chunking, arch/arm64/neon/gemv_float.h);
# cycles per 32 weights of the pass = the sum over its tiles, shown also per
# position and against m calls of the gemv. Kernels whose position loop is a
# run-time loop inside the block loop (q8 / q4, SVE) are listed as not
# modelled. A kernel that only tail-calls a local function is read through
# that function.
#
# Caveats the table repeats: the core models are LLVM's (in LLVM 14 the
# Cortex-A76, Neoverse-N1 and Neoverse-V1 all use the Cortex-A57 model and
# nothing models SVE; LLVM 19 has Cortex-A55, Neoverse-N1 and Neoverse-V1
# models with SVE but still maps Cortex-A76 to the A57 model: the newest
# llvm-mca found is used, and a CPU whose numbers equal cortex-a57's is
# flagged). Neoverse-N1 is the server derivative of Cortex-A76, so its model
# is the better estimate for an A76. Only CPUs that have a folder's ISA are
# modelled (SVE and I8MM: Neoverse-V1 only). llvm-mca assumes every load
# hits L1.
#
# DRAM bound: bytes per 32 weights / (DRAM GB/s / core GHz). Default: a
# Raspberry Pi 5 (BCM2712: 4x Cortex-A76 at 2.4 GHz, 32-bit LPDDR4X-4267,
# 4267e6 x 4 B = 17.07 GB/s peak). That is the whole SoC's theoretical peak;
# one core reaches less, so the real DRAM time per weight is longer than
# this bound (a kernel faster than the bound is memory-bound with margin).
# RK3588 (4x A76 at 2.4 GHz, 64-bit LPDDR4X/5): give --dram-gbs for it.
#
#   usage: bench/mca.sh [--quick] [--json FILE] [--cpus a,b] [--dram-gbs 17.07] [--ghz 2.4]
#                       [--asm-dir DIR] [--iterations N] [--positions 1,2,4,8,9,16]
#   env:   AARCH64_CXX (default aarch64-linux-gnu-g++), LLVM_MCA (default: newest llvm-mca found)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
quick=0
json=""
cpus="cortex-a55,cortex-a76,neoverse-n1,neoverse-v1"
dram_gbs="17.07"
ghz="2.4"
asm_dir=""
iterations=""
positions="1,2,4,8,9,16"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --json) json="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --dram-gbs) dram_gbs="$2"; shift 2 ;;
    --ghz) ghz="$2"; shift 2 ;;
    --asm-dir) asm_dir="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --positions) positions="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "mca.sh: unknown option $1" >&2; exit 1 ;;
  esac
done
[ -n "$iterations" ] || iterations=$([ "$quick" = 1 ] && echo 100 || echo 1000)

cxx="${AARCH64_CXX:-aarch64-linux-gnu-g++}"
command -v "$cxx" >/dev/null || { echo "mca.sh: $cxx not found (apt-get install g++-aarch64-linux-gnu)" >&2; exit 1; }
mca="${LLVM_MCA:-}"
if [ -z "$mca" ]; then
  for v in 25 24 23 22 21 20 19 18 17 16 15 14; do
    if command -v "llvm-mca-$v" >/dev/null; then mca="llvm-mca-$v"; break; fi
  done
  [ -n "$mca" ] || mca="llvm-mca"
fi
command -v "$mca" >/dev/null || { echo "mca.sh: llvm-mca not found (apt-get install llvm)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "mca.sh: python3 not found" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
[ -n "$asm_dir" ] && mkdir -p "$asm_dir" || true

# Folder flags exactly as the top CMakeLists.txt gives them to gb_isa_folder().
folders=()
while read -r name dir flags; do
  folders+=("$name|$dir|$flags")
done < <(sed -n 's/^ *gb_isa_folder(\([a-z0-9_]*\) \(arch\/arm64\/[a-z0-9_]*\) "\([^"]*\)").*/\1 \2 \3/p' "$root/CMakeLists.txt")
[ ${#folders[@]} -gt 0 ] || { echo "mca.sh: no arm64 gb_isa_folder() lines in CMakeLists.txt" >&2; exit 1; }

for f in "${folders[@]}"; do
  IFS='|' read -r name dir flags <<<"$f"
  up="$(echo "$name" | tr a-z A-Z)"
  for src in "$root/$dir"/*.cpp; do
    [ -e "$src" ] || continue
    # shellcheck disable=SC2086
    "$cxx" -O3 -DNDEBUG -std=c++17 -march=armv8-a $flags -fno-exceptions -fno-rtti -fno-threadsafe-statics \
      -ffp-contract=off -I"$root/arch" -DGB_KERNELS_$up=1 -S -o "$work/$name.$(basename "$src" .cpp).s" "$src"
  done
done

GB_ROOT="$root" GB_WORK="$work" GB_MCA="$mca" GB_CXX="$cxx" GB_CPUS="$cpus" GB_QUICK="$quick" GB_JSON="$json" \
GB_DRAM="$dram_gbs" GB_GHZ="$ghz" GB_ASM_DIR="$asm_dir" GB_ITER="$iterations" GB_FOLDERS="${folders[*]}" \
GB_POSITIONS="$positions" \
python3 - <<'PY'
import glob, json, os, re, subprocess, sys

root, work, mca = os.environ["GB_ROOT"], os.environ["GB_WORK"], os.environ["GB_MCA"]
cpus = [c for c in os.environ["GB_CPUS"].split(",") if c]
quick = os.environ["GB_QUICK"] == "1"
dram_gbs, ghz = float(os.environ["GB_DRAM"]), float(os.environ["GB_GHZ"])
asm_dir, iters = os.environ["GB_ASM_DIR"], int(os.environ["GB_ITER"])
positions = [int(v) for v in os.environ["GB_POSITIONS"].split(",") if v]
folders = {f.split("|")[0]: f.split("|")[2] for f in os.environ["GB_FOLDERS"].split(" ") if f}

# ISA folders each CPU has (Arm TRMs: A55/A76/N1 are Armv8.2-A with the dot
# product and half-precision arithmetic; V1 is Armv8.4-A with those, SVE
# (256-bit) and Int8 matrix multiply).
CPU_ISAS = {
    "cortex-a55": {"neon", "dotprod", "fp16"},
    "cortex-a76": {"neon", "dotprod", "fp16"},
    "neoverse-n1": {"neon", "dotprod", "fp16"},
    "neoverse-v1": {"neon", "dotprod", "i8mm", "sve", "fp16"},
}
MATTR = {"neon": [], "dotprod": ["-mattr=+dotprod"], "i8mm": ["-mattr=+dotprod,+i8mm"], "sve": ["-mattr=+sve"],
         "fp16": ["-mattr=+fullfp16"]}
SVE_VL_BITS = 256  # Neoverse-V1
BYTES_PER_32 = {"f32": 128, "f16": 64, "q8": 34, "q4": 18, "q4r16": 18}

# Weights one iteration of the hot loop consumes, from the kernel sources,
# and the weight-pointer step (bytes) that shows it in the assembly.
def weights_per_iter(fmt, isa):
    if fmt == "q4r16":  # one block of a 16-row group (288 bytes) per iteration
        return 512, "16 rows x 1 block of 32", [16 * BYTES_PER_32[fmt]]
    if fmt in ("q8", "q4"):
        return 128, "4 rows x 1 block of 32", [BYTES_PER_32[fmt], 2 * BYTES_PER_32[fmt]]
    if isa == "fp16":  # f16: FMLA on eight binary16 lanes, 8 rows x one block of 32 columns
        return 256, "8 rows x 32 columns", [64]
    if isa == "sve":
        lanes = SVE_VL_BITS // (32 if fmt == "f32" else 16)
        return 4 * lanes, "4 rows x svcnt%s() = %d (VL %d)" % ("w" if fmt == "f32" else "h", lanes, SVE_VL_BITS), []
    return 32, "4 rows x 8 columns", [8 * (4 if fmt == "f32" else 2)]

# ---- the kernels of kernels.inc in the arm64 folders ----------------------------
kernels, gemvm_kernels = [], []
for line in open(os.path.join(root, "arch", "kernels.inc")):
    m = re.match(r"\s*GB_GEMV(M?)\((\w+),\s*\w+,\s*(\w+),", line)
    if m and m.group(3) in folders:
        (gemvm_kernels if m.group(1) else kernels).append((m.group(2), m.group(3)))
# Formats whose block layout and hot-loop shape this script does not model
# (the K-quants, q4_1 / q5_*, iq4nl): listed as such, not guessed.
unmodelled = sorted({"gb_%s_gemv%s__%s" % (f, m, i) for f, i in kernels for m in ("",) if f not in BYTES_PER_32} |
                    {"gb_%s_gemvm__%s" % (f, i) for f, i in gemvm_kernels if f not in BYTES_PER_32})
kernels = [k for k in kernels if k[0] in BYTES_PER_32]
gemvm_kernels = [k for k in gemvm_kernels if k[0] in BYTES_PER_32]
if quick:
    kernels = [k for k in kernels if k[0] in ("q4", "q4r16")]
    gemvm_kernels = [k for k in gemvm_kernels if k[0] in ("q4", "q4r16")]

BRANCH = re.compile(r"^(b(\.\w+)?|b(eq|ne|cs|cc|hs|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)|cbn?z|tbn?z)$")

def function_lines(asm, fn):
    out, on = [], False
    for line in asm:
        if line.startswith(fn + ":"):
            on = True
            continue
        if on and (line.strip().startswith(".size\t" + fn) or line.strip() == ".cfi_endproc"):
            break
        if on:
            out.append(line.rstrip("\n"))
    return out

# The function's lines; a function whose body only tail-calls a local
# function (b SYMBOL, e.g. a kernel template instantiated out of line) is read
# through that function.
def kernel_lines(asm, fn, depth=0):
    lines = function_lines(asm, fn)
    insns = [l.strip() for l in lines if l.strip() and not l.strip().startswith((".", "//")) and not re.match(r"^[.\w$]+:", l.strip())]
    if depth < 2 and insns and len(insns) <= 8 and re.match(r"^b\s+[A-Za-z_]", insns[-1]):
        target = insns[-1].split()[-1]
        if any(l.startswith(target + ":") for l in asm):
            return kernel_lines(asm, target, depth + 1)
    return lines

def hot_loop(lines, steps, all_stepped=False):
    step_re = re.compile(r"(, #?(%s)\]?$|\], #?(%s)$)" % ("|".join(map(str, steps)), "|".join(map(str, steps)))) if steps else None
    labels = {}
    items = []  # (kind, text) kind: label / insn
    for line in lines:
        s = line.strip()
        if not s or s.startswith(("//", "#")):
            continue  # comments, and GCC's #APP / #NO_APP around asm statements
        m = re.match(r"^([.\w$]+):", s)
        if m:
            labels[m.group(1)] = len(items)
            items.append(("label", m.group(1) + ":"))
            continue
        if s.startswith("."):
            continue  # directives
        items.append(("insn", s))
    loops = []  # (first item, last item, label, instructions, stores other than stack spills)
    for i, (kind, s) in enumerate(items):
        if kind != "insn":
            continue
        op = s.split()[0]
        if not BRANCH.match(op):
            continue
        target = s.split(",")[-1].split()[-1]
        if target in labels and labels[target] < i:
            insns = [t for k, t in items[labels[target]: i + 1] if k == "insn"]
            if any(t.split()[0] in ("ret", "bl", "blr", "br") for t in insns):
                continue  # a jump back to an epilogue or a call path, not a loop body
            stores = any(re.match(r"^st(r|p|u|1|2|3|4|n)", t.split()[0]) and "[sp" not in t for t in insns)
            loops.append((labels[target], i, target, len(insns), stores))
    if not loops:
        return None
    inside = lambda x, y: y[0] <= x[0] and x[1] <= y[1] and x != y  # x nested in y
    body = lambda l: [t for k, t in items[l[0]: l[1] + 1]]
    # 1. Loops that advance a weight pointer by the step the source gives
    #    (e.g. 18 bytes a q4 block); the innermost of them (a row loop holds
    #    its block loop) and, of those, the largest (the 4-row loop, not the
    #    1-row tail loop with the same step).
    stepped = [l for l in loops if steps and any(step_re.search(t) for t in body(l))]
    stepped = [l for l in stepped if not any(inside(o, l) for o in stepped)]
    if all_stepped:
        return [(l[2], body(l), l[3]) for l in stepped]
    if stepped:
        a, b, label, n, _ = max(stepped, key=lambda l: (l[3], -l[0]))
        return label, body((a, b)), n, True
    # 2. Otherwise (vector-length-scaled steps): from each innermost loop,
    #    climb while the enclosing loop stores nothing (a row loop always
    #    stores y[r]), so SVE q8's block loop is taken with the vector-length
    #    loops it holds; of those, the one with the most multiply(-add)s.
    cands = []
    for l in loops:
        if any(inside(o, l) for o in loops):
            continue
        cur = l
        while True:
            parents = [o for o in loops if inside(cur, o)]
            if not parents:
                break
            p = min(parents, key=lambda o: o[1] - o[0])
            if p[4]:
                break
            cur = p
        cands.append(cur)
    macs = lambda l: sum(1 for t in body(l) if re.match(r"^(fmla|fmul|sdot|udot|smmla|mla|mul|fmad)\b", t.split()[0]))
    a, b, label, n, _ = max(cands, key=lambda l: (macs(l), l[3], -l[0]))
    return label, body((a, b)), n, False

def mca_run(path, cpu, isa):
    cmd = [mca, "-mtriple=aarch64", "-mcpu=" + cpu, "-iterations=%d" % iters] + MATTR[isa] + [path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["llvm-mca failed"])[0]
    get = lambda key: float(re.search(r"^%s:\s+([\d.]+)" % key, p.stdout, re.M).group(1))
    return {"iterations": get("Iterations"), "total_cycles": get("Total Cycles"), "rthroughput": get("Block RThroughput"),
            "dispatch_width": get("Dispatch Width")}, None

version = subprocess.run([mca, "--version"], capture_output=True, text=True).stdout
version = (re.search(r"LLVM version ([\d.]+)", version) or re.search(r"([\d.]+)", version)).group(1)

# A CPU whose model gives cortex-a57's numbers on a probe uses LLVM's A57 model.
probe = os.path.join(work, "probe.s")
open(probe, "w").write("ldr q0, [x0]\nmul x1, x1, x2\nfmla v1.4s, v0.4s, v2.4s\naddp v3.4s, v1.4s, v1.4s\nadd x0, x0, #16\n")
def fingerprint(cpu):
    r, _ = mca_run(probe, cpu, "neon")
    return r and (r["total_cycles"], r["dispatch_width"], r["rthroughput"])
a57 = fingerprint("cortex-a57")
model_note = {c: ("LLVM %s: Cortex-A57 model" % version) if c != "cortex-a57" and fingerprint(c) == a57 else "own model" for c in cpus}

dram_bpc = dram_gbs / ghz  # bytes per core cycle
FMLA = re.compile(r"^fmla\b")

def folder_asm(isa, fn):
    for s in glob.glob(os.path.join(work, isa + ".*.s")):
        lines = open(s).read().splitlines()
        if any(l.startswith(fn + ":") for l in lines):
            return lines
    return None

rows, mrows, skipped, notes = [], [], [], []
gemv_loop = {}  # (fmt, isa) -> (fmla count of the gemv's hot loop, {cpu: cycles per 32 w})
for fmt, isa in kernels:
    fn = "gb_%s_gemv__%s" % (fmt, isa)
    asm = folder_asm(isa, fn)
    if asm is None:
        notes.append("%s: not found in the assembly of arch/arm64/%s" % (fn, isa))
        continue
    wpi, why, steps = weights_per_iter(fmt, isa)
    loop = hot_loop(kernel_lines(asm, fn), steps)
    if loop is None:
        notes.append("%s: no loop found" % fn)
        continue
    label, body, n_insns, stepped = loop
    path = os.path.join(work, fn + ".s")
    open(path, "w").write("\n".join(body) + "\n")
    if asm_dir:
        open(os.path.join(asm_dir, fn + ".s"), "w").write("# hot loop of %s (%s), %d instructions\n" % (fn, label, n_insns) + "\n".join(body) + "\n")
    step_ok = "n/a (VL-scaled)" if not steps else ("yes" if stepped else "NOT FOUND")
    gemv_loop[(fmt, isa)] = (sum(1 for t in body if FMLA.match(t)) if stepped else 0, {})
    for cpu in cpus:
        if isa not in CPU_ISAS.get(cpu, {"neon"}):
            skipped.append("%s on %s" % (fn, cpu))
            continue
        r, err = mca_run(path, cpu, isa)
        if r is None:
            notes.append("%s on %s: %s" % (fn, cpu, err))
            continue
        cpi = r["total_cycles"] / r["iterations"]
        c32 = cpi * 32.0 / wpi
        b32 = BYTES_PER_32[fmt]
        d32 = b32 / dram_bpc
        gemv_loop[(fmt, isa)][1][cpu] = c32
        rows.append({"op": "gemv", "kernel": fn.replace("gb_", "", 1), "format": fmt, "isa": isa, "cpu": cpu, "llvm_mca": version,
                     "model": model_note[cpu], "loop_label": label, "loop_insns": n_insns, "weights_per_iter": wpi,
                     "weights_per_iter_source": why, "step_check": step_ok, "cycles_per_iter": round(cpi, 3),
                     "block_rthroughput": r["rthroughput"], "cycles_per_32w": round(c32, 3), "bytes_per_32w": b32,
                     "dram_cycles_per_32w": round(d32, 3), "dram_gbs": dram_gbs, "core_ghz": ghz,
                     "compute_over_dram": round(c32 / d32, 3)})

# ---- multi-position kernels: one stepped loop per tile width P -------------------
def chunks(m, pmax):
    n = (m + pmax - 1) // pmax
    return [m // n + (1 if i < m % n else 0) for i in range(n)]

for fmt, isa in gemvm_kernels:
    fn = "gb_%s_gemvm__%s" % (fmt, isa)
    per_fmla, gemv_c32 = gemv_loop.get((fmt, isa), (0, {}))
    asm = folder_asm(isa, fn)
    wpi, why, steps = weights_per_iter(fmt, isa)
    if asm is None or not per_fmla or not steps or isa == "fp16":
        why_not = ("not in the assembly" if asm is None else "vector-length-scaled loops" if not steps else
                   "tiles of 4 rows for two positions where the gemv's loop has 8 rows for one: the FMLA ratio "
                   "is not the tile's position count" if isa == "fp16" else
                   "its position loop is a run-time loop, not position tiles")
        notes.append("%s: not modelled (%s)" % (fn, why_not))
        continue
    tiles = {}
    for label, body, n_insns in hot_loop(kernel_lines(asm, fn), steps, all_stepped=True) or []:
        f = sum(1 for t in body if FMLA.match(t))
        if f and f % per_fmla == 0 and f // per_fmla not in tiles:
            tiles[f // per_fmla] = (label, body, n_insns)
    if 1 not in tiles:
        notes.append("%s: not modelled (no position tiles found)" % fn)
        continue
    pmax = max(tiles)
    if sorted(tiles) != list(range(1, pmax + 1)):
        notes.append("%s: tiles found for P = %s only" % (fn, sorted(tiles)))
        continue
    if asm_dir:
        for P, (label, body, n_insns) in sorted(tiles.items()):
            open(os.path.join(asm_dir, "%s.P%d.s" % (fn, P)), "w").write(
                "# %d-position tile of %s (%s), %d instructions\n" % (P, fn, label, n_insns) + "\n".join(body) + "\n")
    for cpu in cpus:
        if isa not in CPU_ISAS.get(cpu, {"neon"}) or cpu not in gemv_c32:
            continue
        tile_c32 = {}
        for P, (label, body, n_insns) in tiles.items():
            path = os.path.join(work, "%s.P%d.s" % (fn, P))
            open(path, "w").write("\n".join(body) + "\n")
            r, err = mca_run(path, cpu, isa)
            if r is None:
                notes.append("%s P=%d on %s: %s" % (fn, P, cpu, err))
                break
            tile_c32[P] = r["total_cycles"] / r["iterations"] * 32.0 / wpi
        if len(tile_c32) != len(tiles):
            continue
        d32 = BYTES_PER_32[fmt] / dram_bpc
        for m in positions:
            ch = chunks(m, pmax)
            total = sum(tile_c32[P] for P in ch)
            mrows.append({"op": "gemvm", "kernel": fn.replace("gb_", "", 1), "format": fmt, "isa": isa, "cpu": cpu,
                          "llvm_mca": version, "model": model_note[cpu], "positions": m,
                          "tiles": "+".join(map(str, ch)),
                          "tile_loops": {str(P): {"label": tiles[P][0], "insns": tiles[P][2],
                                                  "cycles_per_32w": round(tile_c32[P], 3)} for P in sorted(set(ch))},
                          "weights_per_iter_per_position": wpi, "weights_per_iter_source": why,
                          "cycles_per_32w_pass": round(total, 3), "cycles_per_32w": round(total / m, 3),
                          "gemv_cycles_per_32w": round(gemv_c32[cpu], 3),
                          "pass_over_m_gemv": round(total / (m * gemv_c32[cpu]), 3),
                          "bytes_per_32w": BYTES_PER_32[fmt], "dram_cycles_per_32w": round(d32, 3),
                          "dram_gbs": dram_gbs, "core_ghz": ghz, "compute_over_dram": round(total / d32, 3)})

print("bench/mca.sh%s: %s (LLVM %s), cross compiler %s, %d iterations" % (" --quick" if quick else "", mca, version, os.environ["GB_CXX"], iters))
print("models: " + "; ".join("%s: %s" % (c, model_note[c]) for c in cpus))
print("DRAM bound: a Cortex-A76 at %.2f GHz receiving %.2f GB/s (Raspberry Pi 5 BCM2712, 32-bit LPDDR4X-4267 peak, unless --dram-gbs/--ghz say otherwise) = %.2f bytes/cycle" % (ghz, dram_gbs, dram_bpc))
print("cycles/32 w = (Total Cycles / Iterations) x 32 / weights per iteration; SVE at VL %d bits (Neoverse-V1); loads assumed to hit L1\n" % SVE_VL_BITS)
print("| kernel | cpu | model | loop insns | weights/iter | step check | cycles/iter | cycles/32 w | bytes/32 w | DRAM cycles/32 w (A76) | compute / DRAM |")
print("|---|---|---|---:|---|---|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %s | %s | %s | %d | %d (%s) | %s | %.2f | %.2f | %d | %.2f | %.2f |" % (
        r["kernel"], r["cpu"], r["model"], r["loop_insns"], r["weights_per_iter"], r["weights_per_iter_source"], r["step_check"],
        r["cycles_per_iter"], r["cycles_per_32w"], r["bytes_per_32w"], r["dram_cycles_per_32w"], r["compute_over_dram"]))
if mrows:
    print("\nMulti-position GEMV: one pass over the weights for m positions, in tiles of P positions (loop of P per tile, instructions)")
    print("cycles/32 w of the pass = sum over its tiles; per position = that / m; vs m gemv = pass / (m x the gemv's cycles/32 w); compute / DRAM: the pass against one read of the weights\n")
    print("| kernel | cpu | model | m | tiles | tile loops (P: insns) | cycles/32 w, pass | cycles/32 w per position | vs m gemv | DRAM cycles/32 w (A76) | compute / DRAM |")
    print("|---|---|---|---:|---|---|---:|---:|---:|---:|---:|")
    for r in mrows:
        print("| %s | %s | %s | %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
            r["kernel"], r["cpu"], r["model"], r["positions"], r["tiles"],
            ", ".join("%s: %d" % (P, t["insns"]) for P, t in r["tile_loops"].items()), r["cycles_per_32w_pass"],
            r["cycles_per_32w"], r["pass_over_m_gemv"], r["dram_cycles_per_32w"], r["compute_over_dram"]))
if skipped:
    print("\nnot modelled (the CPU lacks the ISA): " + ", ".join(skipped))
for n in notes:
    print("note: " + n)
if unmodelled:
    print("\nnot modelled (block layout not described to this script): " + ", ".join(unmodelled))
if os.environ["GB_JSON"]:
    with open(os.environ["GB_JSON"], "w") as f:
        json.dump(rows + mrows, f, indent=1)
        f.write("\n")
PY
