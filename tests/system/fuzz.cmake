# fuzz.cmake - the fuzz targets of tests/fuzz (included by tests/CMakeLists.txt).
#
# Always: replay_<target>, built with the ordinary compiler from tests/fuzz/replay.c and the
# target's entry, feeds every file of tests/fuzz/corpus/<target>/ to it once (ctest
# fuzz.replay_<target>), so every input that ever found a defect stays a regression test.
# With -DPX_FUZZ=ON and clang (`make fuzz`, build-fuzz/): fuzz_<target>, the same entry
# linked with libFuzzer (-fsanitize=fuzzer; the whole build has address,undefined and
# fuzzer-no-link instrumentation).
set(PX_FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)
set(PX_FUZZ_TARGETS knob cli trace stgreq)
set(PX_FUZZ_EXTRA_cli ${CMAKE_SOURCE_DIR}/tools/cli_opts.c)

foreach(t ${PX_FUZZ_TARGETS})
  set(srcs ${PX_FUZZ_DIR}/fuzz_${t}.c ${PX_FUZZ_EXTRA_${t}})
  if(PX_FUZZ)
    add_executable(fuzz_${t} ${srcs})
    target_link_libraries(fuzz_${t} PRIVATE plexus_examples plexus_internal plexus_trace_load)
    target_include_directories(fuzz_${t} PRIVATE ${PX_FUZZ_DIR} ${CMAKE_SOURCE_DIR}/tools)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(replay_${t} ${PX_FUZZ_DIR}/replay.c ${srcs})
    target_link_libraries(replay_${t} PRIVATE plexus_examples plexus_internal plexus_trace_load)
    target_include_directories(replay_${t} PRIVATE ${PX_FUZZ_DIR} ${CMAKE_SOURCE_DIR}/tools)
    add_test(NAME fuzz.replay_${t} COMMAND replay_${t} ${PX_FUZZ_DIR}/corpus/${t})
    set_tests_properties(fuzz.replay_${t} PROPERTIES TIMEOUT 300
                         ENVIRONMENT "PLEXUS_LOG=error")
  endif()
endforeach()
