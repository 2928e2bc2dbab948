# toolchains/aarch64-linux-gnu.cmake — cross build for 64-bit ARM Linux with
# Debian's g++-aarch64-linux-gnu and the arm64 multiarch libraries
# (libopenblas-dev:arm64, zlib1g-dev:arm64, libgtest-dev:arm64).
#   cmake -S . -B build/aarch64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake
# Tests run under qemu-aarch64 through CMAKE_CROSSCOMPILING_EMULATOR; the
# environment variable QEMU_CPU picks the CPU model at test time (e.g.
# QEMU_CPU=cortex-a53, cortex-a76, "max,sve-max-vq=2"; qemu's default is max).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The baseline is ARMv8-A (Cortex-A53): per-ISA kernels get their own -march
# flags in arch/ and are chosen at run time.
set(CMAKE_C_FLAGS_INIT "-march=armv8-a")
set(CMAKE_CXX_FLAGS_INIT "-march=armv8-a")
# Tests run under qemu-user. Debian 12's qemu-aarch64 (7.2) hangs in
# pthread_create of dynamically linked programs (even a two-line one) but
# runs statically linked ones: with GEARBX_STATIC_EXES=ON (the option is in
# the top CMakeLists.txt; tests/run.sh sets it) the executables are linked
# statically and the thread tests run; without it, GB_TEST_NO_THREADS=1
# makes them skip or run single-threaded. OPENBLAS_NUM_THREADS=1 keeps
# OpenBLAS from starting its thread server when it loads (gearbx runs it
# single-threaded anyway).
if(GEARBX_STATIC_EXES)
  set(CMAKE_CROSSCOMPILING_EMULATOR env;OPENBLAS_NUM_THREADS=1;qemu-aarch64)
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR env;OPENBLAS_NUM_THREADS=1;GB_TEST_NO_THREADS=1;qemu-aarch64;-L;/usr/aarch64-linux-gnu)
endif()
