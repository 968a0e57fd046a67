# setup.cmake - system tests of installing and of a fresh build (included by
# tests/CMakeLists.txt; the script is setup.sh). setup.install runs in `make test`: an install
# into a temporary PREFIX under the build folder (never /usr/local), then the user guide's
# program built with pkg-config against it. setup.fresh rebuilds everything in a clean folder
# and runs every test and quick benchmark there (tens of minutes on 2 CPUs): it has the label
# `setup`, which `make test` leaves out and `make test-setup` runs.
set(PX_SETUP_SH ${CMAKE_CURRENT_SOURCE_DIR}/system/setup.sh)
set(px_setup_cflags "")
if(PX_SANITIZE STREQUAL "address")
  set(px_setup_cflags "-fsanitize=address,undefined")
elseif(PX_SANITIZE STREQUAL "thread")
  set(px_setup_cflags "-fsanitize=thread")
endif()
add_test(NAME setup.install
         COMMAND sh ${PX_SETUP_SH} install ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/setup-install "${px_setup_cflags}")
set_tests_properties(setup.install PROPERTIES TIMEOUT 600 PASS_REGULAR_EXPRESSION "\nPASS\n"
                     FAIL_REGULAR_EXPRESSION "FAIL: " RESOURCE_LOCK build_dir)
# The optimising build types other than the default (RelWithDebInfo) compile the library and
# the command line with warnings as errors (30-45 s of both CPUs): a build matrix check, not a
# test of the runtime, and the longest item of the suite, so it carries the label `setup`
# (`make test-setup`, and .ci/run after `make test`), which keeps `make test` under 4 minutes.
add_test(NAME setup.build_types
         COMMAND sh ${PX_SETUP_SH} build-types ${CMAKE_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/setup-build-types)
set_tests_properties(setup.build_types PROPERTIES TIMEOUT 900 LABELS setup RUN_SERIAL TRUE
                     PASS_REGULAR_EXPRESSION "\nPASS\n"
                     FAIL_REGULAR_EXPRESSION "FAIL: ")
add_test(NAME setup.fresh
         COMMAND sh ${PX_SETUP_SH} fresh ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/setup-fresh)
set_tests_properties(setup.fresh PROPERTIES TIMEOUT 5400 LABELS setup SKIP_RETURN_CODE 77
                     FAIL_REGULAR_EXPRESSION "FAIL: ")
