# Fuzz targets: each tests/fuzz/fuzz_*.cpp defines LLVMFuzzerTestOneInput.
# Always built as a deterministic replay test (mutations of generated seeds);
# with GEARBX_FUZZ=ON and clang also as libFuzzer binaries.
file(GLOB GB_FUZZ_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz_*.cpp)
add_library(gearbx_fuzz_replay OBJECT ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp)
target_include_directories(gearbx_fuzz_replay PRIVATE ${GB_TEST_INCLUDES})
foreach(src ${GB_FUZZ_SRC})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name}_replay ${src} $<TARGET_OBJECTS:gearbx_fuzz_replay>)
  target_include_directories(${name}_replay PRIVATE ${GB_TEST_INCLUDES})
  target_compile_definitions(${name}_replay PRIVATE GB_SHARED_DIR="${GEARBX_SHARED_DIR}")
  target_link_libraries(${name}_replay PRIVATE gearbx_convert gearbx)
  add_test(NAME ${name} COMMAND ${name}_replay 3000)
  set_tests_properties(${name} PROPERTIES TIMEOUT 900)
  if(GEARBX_FUZZ)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${GB_TEST_INCLUDES})
    target_compile_definitions(${name} PRIVATE GB_SHARED_DIR="${GEARBX_SHARED_DIR}")
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(${name} PRIVATE gearbx_convert gearbx)
  endif()
endforeach()

