# Mapped model files that change under the process (tests/filechange/);
# included by tests/CMakeLists.txt.
#
#   gearbx_filechange   chain: the port's SIGBUS handler next to the
#                       application's, in child processes. ctest
#                       `sigbus_chain` (a second or less).
#                       stress: below.
add_executable(gearbx_filechange ${CMAKE_CURRENT_LIST_DIR}/filechange.cpp)
target_include_directories(gearbx_filechange PRIVATE ${GB_TEST_INCLUDES})
target_compile_options(gearbx_filechange PRIVATE ${GB_WARN})
target_link_libraries(gearbx_filechange PRIVATE gearbx_convert gearbx)
add_dependencies(gearbx_filechange gearbx_cli)
add_test(NAME sigbus_chain COMMAND gearbx_filechange chain)
set_tests_properties(sigbus_chain PROPERTIES TIMEOUT 120)

# The real timing (see filechange.cpp): a 714 MB synthetic model made into
# this directory at the first run, decoding in a child while this process
# truncates, rewrites or replaces the file. ctest `filechange_short` (label
# filechange): 2 trials per kind at 1 and 2 threads, 64 steps, and one trial
# per kind and thread count through `gearbx run`; with
# GEARBX_FILECHANGE_FULL=1 in the environment it runs the full campaign (20
# trials per kind and thread count, 160 steps). Sanitizer builds decode
# about 2.5 times slower: there the model has 4 of the 22 layers (~200 MB,
# still far beyond any cache). Native builds only: under an emulator a
# model this size decodes too slowly.
if(NOT CMAKE_CROSSCOMPILING)
  set(GB_FILECHANGE_SPEC tinyllama-1.1b)
  if(GEARBX_SANITIZE)
    set(GB_FILECHANGE_SPEC tinyllama-1.1b,layers=4)
  endif()
  add_test(NAME filechange_short COMMAND gearbx_filechange stress --ci --spec ${GB_FILECHANGE_SPEC}
    --model-dir ${CMAKE_CURRENT_BINARY_DIR} --cli $<TARGET_FILE:gearbx_cli> --cli-trials 1)
  # It starts first and shares the cores with the other tests: a slower decode
  # only makes the change more certain to land inside a pass.
  set_tests_properties(filechange_short PROPERTIES TIMEOUT 900 LABELS filechange COST 100)
endif()
