# toolchains/aarch64-none.cmake — a bare-metal / RTOS style build: the
# library with port/none (no files, threads, mmap or clock; CPU features
# fixed at build time from -march/-mcpu), no zlib, no tools or tests.
#   cmake -S . -B build/none -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-none.cmake
# The compiler defaults to Debian's aarch64-linux-gnu-g++ (only its compiler
# and C library headers are used by libgearbx.a); point GEARBX_NONE_PREFIX at
# another one, e.g. aarch64-none-elf-, for a newlib toolchain. Add
# -mcpu=cortex-a76 (or similar) to CMAKE_CXX_FLAGS to enable the dotprod /
# i8mm / SVE kernels the target has. GEARBX_NONE_MODEL=path/to/model.gbx
# adds the decode test program (tests/none), runnable under qemu-aarch64.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
if(NOT DEFINED GEARBX_NONE_PREFIX)
  set(GEARBX_NONE_PREFIX aarch64-linux-gnu-)
endif()
set(CMAKE_C_COMPILER ${GEARBX_NONE_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${GEARBX_NONE_PREFIX}g++)
set(CMAKE_ASM_COMPILER ${GEARBX_NONE_PREFIX}gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_C_FLAGS_INIT "-march=armv8-a")
set(CMAKE_CXX_FLAGS_INIT "-march=armv8-a")
set(CMAKE_ASM_FLAGS_INIT "-march=armv8-a")
set(GEARBX_PORT none CACHE STRING "" FORCE)
set(GEARBX_WITH_ZLIB OFF CACHE BOOL "" FORCE)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;cortex-a53)
