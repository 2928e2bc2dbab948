# Fuzz targets: each tests/fuzz/fuzz_*.cpp defines LLVMFuzzerTestOneInput
# and gb_fuzz_seeds(). Always built as a deterministic replay test
# (replay_main.cpp: the regression inputs of tests/corpus/<target>/, then the
# generated seeds and their mutations); with GEARBX_FUZZ=ON (clang) also as
# libFuzzer binaries, which tests/fuzz.sh runs. `fuzz_all` builds only these;
# `fuzz_targets` only the libFuzzer binaries (the replays' seeds can come
# from another build's replay programs: tests/fuzz.sh GEARBX_FUZZ_REPLAY_DIR).
file(GLOB GB_FUZZ_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz_*.cpp)
add_custom_target(fuzz_all)
add_custom_target(fuzz_targets)
foreach(src ${GB_FUZZ_SRC})
  get_filename_component(name ${src} NAME_WE)
  # replay_main.cpp is compiled per target: it carries the target's corpus path.
  add_executable(${name}_replay ${src} ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp)
  target_include_directories(${name}_replay PRIVATE ${GB_TEST_INCLUDES})
  target_compile_definitions(${name}_replay PRIVATE GB_SHARED_DIR="${GEARBX_SHARED_DIR}"
    GB_TEST_SOURCE_DIR="${CMAKE_CURRENT_LIST_DIR}/.."
    GB_FUZZ_CORPUS_DIR="${CMAKE_CURRENT_LIST_DIR}/../corpus/${name}")
  target_link_libraries(${name}_replay PRIVATE gearbx_testsupport gearbx_convert gearbx)
  add_dependencies(fuzz_all ${name}_replay)
  # 3000 mutations of the seeds; 1000 in sanitizer builds, where the
  # libFuzzer targets (tests/fuzz.sh) also run, instrumented the same way.
  if(GEARBX_SANITIZE)
    add_test(NAME ${name} COMMAND ${name}_replay 1000)
  else()
    add_test(NAME ${name} COMMAND ${name}_replay 3000)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT 900)
  if(GEARBX_FUZZ)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${GB_TEST_INCLUDES})
    target_compile_definitions(${name} PRIVATE GB_SHARED_DIR="${GEARBX_SHARED_DIR}" GB_TEST_SOURCE_DIR="${CMAKE_CURRENT_LIST_DIR}/..")
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(${name} PRIVATE gearbx_testsupport gearbx_convert gearbx)
    add_dependencies(fuzz_all ${name})
    add_dependencies(fuzz_targets ${name})
  endif()
endforeach()
