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
# Debian 12's qemu-user (7.2) hangs in pthread_create on this CI's host
# kernel (even a two-line program does). So under the emulator:
# OPENBLAS_NUM_THREADS=1 keeps OpenBLAS from starting its thread server when
# it loads (gearbx runs it single-threaded anyway), and GB_TEST_NO_THREADS=1
# makes the tests that start worker threads skip or run single-threaded.
# GEARBX_STATIC_EXES=ON links the executables (tests, tools) statically:
# Debian 12's qemu-aarch64 (7.2) hangs in pthread_create of dynamically
# linked programs but runs statically linked ones, so only then can the tests
# start threads under the emulator (the worker pool, two-thread runs).
# (The option itself is in the top CMakeLists.txt.)
if(GEARBX_STATIC_EXES)
  set(CMAKE_CROSSCOMPILING_EMULATOR env;OPENBLAS_NUM_THREADS=1;qemu-aarch64)
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR env;OPENBLAS_NUM_THREADS=1;GB_TEST_NO_THREADS=1;qemu-aarch64;-L;/usr/aarch64-linux-gnu)
endif()
