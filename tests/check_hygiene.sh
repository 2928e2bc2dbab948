#!/usr/bin/env bash
# tests/check_hygiene.sh BUILD_DIR NM OBJDUMP — static-library hygiene of
# libgearbx.a's objects (the core in CMakeFiles/gearbx_objs.dir, the kernels in
# CMakeFiles/gearbx_isa_*.dir), and of the sources:
#   - no exceptions (__cxa_throw, __cxa_begin_catch, personality, _Unwind_Resume)
#   - no RTTI (typeinfo _ZTI / _ZTS, __dynamic_cast)
#   - no operator new / delete
#   - malloc & co. only in port/ (the documented allocation point:
#     gb_port_aligned_alloc, called once per model and per session)
#   - no static constructors (.init_array / .ctors sections, _GLOBAL__sub_I_)
#   - kernel objects define no weak (COMDAT) symbols: the linker could pick
#     such a copy, compiled for a newer ISA, for a baseline caller
#   - src/ (with src/tok/ and src/models/; not the converter's src/convert/)
#     includes no OS header; arch/ never includes or calls port/
#   - no comment or string in the code cites a work session or an issue
#     number (facts are stated where they are used; docs/RESULTS.md holds the
#     current measurements, docs/journal/ the history)
set -uo pipefail
B=$1; NM=${2:-nm}; OBJDUMP=${3:-objdump}
SRC=$(cd "$(dirname "$0")/.." && pwd)
fail=0
bad() { echo "HYGIENE FAIL: $*"; fail=1; }

mapfile -t core < <(find "$B/CMakeFiles/gearbx_objs.dir" -name '*.o' | sort)
mapfile -t isa < <(find "$B/CMakeFiles" -path '*gearbx_isa_*.dir*' -name '*.o' | sort)
[ ${#core[@]} -gt 0 ] || { echo "HYGIENE FAIL: no objects under $B/CMakeFiles/gearbx_objs.dir"; exit 1; }
echo "checking ${#core[@]} core and ${#isa[@]} kernel objects"

# One nm and one objdump over all the objects (a process per object and
# symbol took most of a minute), checked by awk.
all=("${core[@]}" "${isa[@]}")
isa_list=$(printf '%s\n' "${isa[@]}")
found=$(
  { $NM -A -u "${all[@]}" 2>/dev/null | sed 's/^/U /'
    $NM -A --defined-only "${all[@]}" 2>/dev/null | sed 's/^/D /'
    $OBJDUMP -h "${all[@]}" 2>/dev/null | sed 's/^/H /'; } |
  awk -v pre="$B/CMakeFiles/" -v isa_list="$isa_list" '
    BEGIN {
      n = split("__cxa_throw __cxa_begin_catch __cxa_allocate_exception __gxx_personality_v0 _Unwind_Resume __dynamic_cast " \
                "_Znwm _Znam _ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZnwmRKSt9nothrow_t _ZnwmSt11align_val_t", e, " ")
      for (i = 1; i <= n; i++) exc[e[i]] = 1
      n = split("malloc calloc realloc free aligned_alloc posix_memalign memalign mmap", a, " ")
      for (i = 1; i <= n; i++) alloc[a[i]] = 1
      n = split(isa_list, l, "\n")
      for (i = 1; i <= n; i++) is_isa[l[i]] = 1
    }
    function rel(f) { return index(f, pre) == 1 ? substr(f, length(pre) + 1) : f }
    $1 == "H" && / file format / { obj = $2; sub(/:$/, "", obj); next }
    $1 == "H" { if ($0 ~ / \.(init_array|ctors)/) print rel(obj) " has an .init_array/.ctors section"; next }
    {
      line = substr($0, 3); c = index(line, ":"); f = substr(line, 1, c - 1); sym = $NF; type = $(NF - 1)
      if ($1 == "U") {
        if (sym in exc) print rel(f) " references " sym
        if (sym ~ /^_ZT[IS]/) print rel(f) " references RTTI"
        if ((sym in alloc) && rel(f) !~ /port_/) print rel(f) " calls " sym " (only port/ may allocate)"
      } else {
        if (sym ~ /^_ZT[IS]/) print rel(f) " defines RTTI: " sym
        if (sym ~ /_GLOBAL__sub_I_/) print rel(f) " has a static constructor"
        if ((f in is_isa) && type ~ /^[WVu]$/) print rel(f) " defines a weak symbol: " sym
      }
    }')
while IFS= read -r line; do [ -z "$line" ] || bad "$line"; done <<<"$found"

# Sources: src/ (not src/convert, which is tooling) includes no OS header.
allowed='^(stddef|stdint|stdarg|stdbool|string|math|float|limits|stdio|assert|zlib)\.h$|^(new|type_traits|utility|algorithm|limits)$'
while IFS= read -r line; do
  f=${line%%:*}; h=$(sed -E 's/.*#include <([^>]+)>.*/\1/' <<<"$line")
  [[ $h =~ $allowed ]] || bad "$f includes <$h>"
done < <(grep -H '#include <' "$SRC"/src/*.h "$SRC"/src/*.cpp "$SRC"/src/tok/*.h "$SRC"/src/tok/*.cpp "$SRC"/src/models/*.h \
           "$SRC"/src/models/*.cpp)
grep -rnE 'gearbx_port\.h|gb_port_' "$SRC/arch" && bad "arch/ reaches port/"

# Citations of work sessions or issues in the code (the corpus of fuzz
# regression inputs is data, not code).
cites=$(grep -rnE '[Ss]ession [0-9]+([^0-9]|$)|[Ii]ssue #?[0-9]+|RESULTS\.md,? "?[Ss]ession' \
  "$SRC"/src "$SRC"/arch "$SRC"/port "$SRC"/include "$SRC"/tests "$SRC"/bench "$SRC"/examples "$SRC"/bindings \
  --include='*.c' --include='*.cpp' --include='*.h' --include='*.inc' --include='*.py' --include='*.sh' \
  --include='*.cmake' --include='CMakeLists.txt' 2>/dev/null | grep -v '/tests/corpus/')
[ -z "$cites" ] || bad "code cites a work session or an issue: $(head -3 <<<"$cites")"

[ $fail = 0 ] && echo "hygiene: ok"
exit $fail
