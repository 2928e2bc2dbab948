#!/usr/bin/env bash
# tests/check_install.sh BUILD_DIR SOURCE_DIR MODEL.gguf [--toolchain FILE --emulator CMD --static-exe]
# What a user of the installed package gets, checked end to end:
#   1. `cmake --install` into a fresh prefix lays out the header, libgearbx.a,
#      libgearbx.so (when built), the gearbx tool, the CMake package and
#      gearbx.pc; the installed tool converts MODEL.gguf;
#   2. examples/consumer (its own CMake project) configures against that
#      prefix with find_package(gearbx CONFIG), builds examples/simple.c, and
#      its program generates text from MODEL (under the emulator when
#      cross-compiled); with the shared library too, when installed;
#   3. on the host, the one-line pkg-config build of examples/simple.c.
set -euo pipefail
build=$1 src=$2 model=$3; shift 3
toolchain="" emulator="" static_exe=OFF
while [ $# -gt 0 ]; do
  case $1 in
    --toolchain) toolchain=$2; shift 2 ;;
    --emulator) emulator=$2; shift 2 ;;
    --static-exe) static_exe=ON; shift ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; exit 1; }
libdir=$(cd "$prefix" && ls -d lib*/cmake/gearbx | head -1 | cut -d/ -f1)
for f in include/gearbx.h "$libdir/libgearbx.a" bin/gearbx "$libdir/cmake/gearbx/gearbxConfig.cmake" \
         "$libdir/cmake/gearbx/gearbxConfigVersion.cmake" "$libdir/cmake/gearbx/gearbxTargets.cmake" \
         "$libdir/pkgconfig/gearbx.pc"; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
shared=OFF
[ -e "$prefix/$libdir/libgearbx.so" ] && shared=ON
gguf=$model
model=$work/model.gbx
$emulator "$prefix/bin/gearbx" convert "$gguf" -o "$model" --quiet || { echo "the installed gearbx cannot convert $gguf"; exit 1; }
echo "installed: header, libgearbx.a$([ $shared = ON ] && echo ", libgearbx.so"), gearbx, CMake package, gearbx.pc"

run_consumer() {  # name, extra cmake args...
  local name=$1; shift
  local d="$work/$name"
  cmake -S "$src/examples/consumer" -B "$d" -Dgearbx_DIR="$prefix/$libdir/cmake/gearbx" \
    ${toolchain:+-DCMAKE_TOOLCHAIN_FILE="$toolchain"} -DCONSUMER_STATIC_EXE=$static_exe "$@" > "$d.log" 2>&1 \
    && cmake --build "$d" >> "$d.log" 2>&1 || { cat "$d.log"; echo "$name: consumer project failed to build"; exit 1; }
  local out
  out=$($emulator "$d/consumer" "$model" "Once upon a time" | head -c 4000)
  case $out in
    "Once upon a time"?*) echo "$name: ${out:0:60}..." ;;
    *) echo "$name: unexpected output: $out"; exit 1 ;;
  esac
}
run_consumer consumer-static
[ $shared = OFF ] || run_consumer consumer-shared -DCONSUMER_SHARED=ON

if [ -z "$toolchain" ] && command -v pkg-config > /dev/null; then
  export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
  cc "$src/examples/simple.c" $(pkg-config --cflags --libs gearbx) -Wl,-rpath,"$prefix/$libdir" -o "$work/simple-pc"
  out=$("$work/simple-pc" "$model" "Once upon a time" | head -c 4000)
  case $out in
    "Once upon a time"?*) echo "pkg-config build: ${out:0:60}..." ;;
    *) echo "pkg-config build: unexpected output: $out"; exit 1 ;;
  esac
fi
echo "install check passed"
