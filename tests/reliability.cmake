# Concurrency and soak checks; included by
# tests/CMakeLists.txt.
#
#   gearbx_concurrency  tests/concurrency/: one model, many sessions on many
#                       threads, results equal to the single-threaded run.
#                       ctest `concurrency`; tests/run_tsan.sh builds and runs
#                       it alone under ThreadSanitizer (GEARBX_TSAN).
#   gearbx_soak         tests/soak.cpp: N decode steps (default 100 000) with
#                       resets, gear shifts, the spec gear and fixed KV pools;
#                       not installed. ctest `soak_short` (20 000 steps, 10 000 under an emulator) and,
#                       when valgrind is found, `soak_valgrind` (memcheck on a
#                       short run: any error or definite leak fails).
# gearbx_soak links tests/alloc_hook.cpp with the allocation wrappers of
# gb_test_exe.
set(GB_ALLOC_WRAP -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=free
  -Wl,--wrap=posix_memalign -Wl,--wrap=aligned_alloc)

# The helpers without the allocation hook: clang's ThreadSanitizer runtime
# defines operator new itself (and this test counts no allocations).
add_executable(gearbx_concurrency ${CMAKE_CURRENT_LIST_DIR}/concurrency/concurrency.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_util.cpp)
target_include_directories(gearbx_concurrency PRIVATE ${GB_TEST_INCLUDES})
target_compile_options(gearbx_concurrency PRIVATE ${GB_WARN})
target_compile_definitions(gearbx_concurrency PRIVATE GB_SHARED_DIR="${GEARBX_SHARED_DIR}"
  GB_CLI_PATH="${GB_CLI_PREFIX}$<TARGET_FILE:gearbx_cli>")
target_link_libraries(gearbx_concurrency PRIVATE gearbx_convert gearbx GTest::gtest GTest::gtest_main)
add_test(NAME concurrency COMMAND gearbx_concurrency)
set_tests_properties(concurrency PROPERTIES TIMEOUT 600 COST 20)

# The soak: not in ThreadSanitizer or fuzzing builds, where clang's runtime
# defines operator new, which alloc_hook.cpp replaces too.
if(NOT GEARBX_TSAN AND NOT GEARBX_FUZZ)
  add_executable(gearbx_soak ${CMAKE_CURRENT_LIST_DIR}/soak.cpp ${CMAKE_CURRENT_LIST_DIR}/alloc_hook.cpp)
  target_include_directories(gearbx_soak PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_compile_options(gearbx_soak PRIVATE ${GB_WARN})
  target_compile_definitions(gearbx_soak PRIVATE GB_SHARED_DIR="${GEARBX_SHARED_DIR}")
  target_link_options(gearbx_soak PRIVATE ${GB_ALLOC_WRAP})
  target_link_libraries(gearbx_soak PRIVATE gearbx_convert gearbx)
  # Under an emulator /proc/self/statm measures the emulator (its translation
  # cache grows with the code it meets): RSS is reported, not checked.
  # Under an emulator half the steps (of which GB_TEST_SCALE keeps a part).
  set(GB_SOAK_ARGS --steps 20000)
  if(CMAKE_CROSSCOMPILING)
    set(GB_SOAK_ARGS --steps 10000 --no-rss-check)
  endif()
  add_test(NAME soak_short COMMAND gearbx_soak ${GB_SOAK_ARGS})
  set_tests_properties(soak_short PROPERTIES TIMEOUT 600 COST 60)

  # memcheck on a short soak (about a minute): native builds without
  # sanitizers (valgrind cannot run a sanitizer's runtime, nor an aarch64
  # binary here). Any error, or a definite leak, is exit status 99.
  find_program(GB_VALGRIND valgrind)
  if(GB_VALGRIND AND NOT GEARBX_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
    add_test(NAME soak_valgrind COMMAND ${GB_VALGRIND} --error-exitcode=99 --leak-check=full
      --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-origins=yes -q
      $<TARGET_FILE:gearbx_soak> --steps 1000 --no-rss-check)
    set_tests_properties(soak_valgrind PROPERTIES TIMEOUT 600 COST 55)
  endif()
endif()
