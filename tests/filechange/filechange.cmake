# Mapped model files that change under the process (tests/filechange/);
# included by tests/CMakeLists.txt.
#
#   gearbx_filechange   chain: the port's SIGBUS handler next to the
#                       application's, in child processes. ctest
#                       `sigbus_chain` (a second or less).
add_executable(gearbx_filechange ${CMAKE_CURRENT_LIST_DIR}/filechange.cpp)
target_include_directories(gearbx_filechange PRIVATE ${GB_TEST_INCLUDES})
target_compile_options(gearbx_filechange PRIVATE ${GB_WARN})
target_link_libraries(gearbx_filechange PRIVATE gearbx_convert gearbx)
add_test(NAME sigbus_chain COMMAND gearbx_filechange chain)
set_tests_properties(sigbus_chain PROPERTIES TIMEOUT 120)
