# dfx.cmake - ctest wiring of the DFX transport tests (included by tests/CMakeLists.txt).
#
# unit.test_dfx_huge needs free huge pages: the fixture `hugepages` reserves them through
# /proc/sys/vm/nr_hugepages before it (dfx.hugepages_reserve) and restores the old value
# after it (dfx.hugepages_restore). All three hold RESOURCE_LOCK hugepages so no other test
# changes the pool meanwhile. When the pages cannot be reserved the test exits 77 (skipped)
# with the probe's numbers.
set(PX_HUGE_STATE ${CMAKE_CURRENT_BINARY_DIR}/hugepages.state)
add_test(NAME dfx.hugepages_reserve
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/system/hugepages.sh reserve 16 ${PX_HUGE_STATE})
add_test(NAME dfx.hugepages_restore
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/system/hugepages.sh restore ${PX_HUGE_STATE})
set_tests_properties(dfx.hugepages_reserve PROPERTIES FIXTURES_SETUP hugepages
                     RESOURCE_LOCK hugepages TIMEOUT 60)
set_tests_properties(dfx.hugepages_restore PROPERTIES FIXTURES_CLEANUP hugepages
                     RESOURCE_LOCK hugepages TIMEOUT 60)
if(TEST unit.test_dfx_huge)
  set_tests_properties(unit.test_dfx_huge PROPERTIES FIXTURES_REQUIRED hugepages
                       RESOURCE_LOCK hugepages)
endif()

# Tests that read or use the huge-page pool must not overlap the fixture above, which changes
# it: their probes would see a different count than their own read of /proc/meminfo. (This
# holds with DFX compiled out too: the fixture still runs.)
foreach(t unit.test_caps unit.test_platform unit.test_dfx_transport)
  if(TEST ${t})
    set_tests_properties(${t} PROPERTIES RESOURCE_LOCK hugepages)
  endif()
endforeach()

# The command line with DFX: files are listed after the run, the allow-list error comes
# before launch and names the way out, doctor shows the run's own transport choice. (A build
# with DFX compiled out, -DPX_DFX=OFF, refuses --dfx, so these need DFX.)
if(NOT PX_DFX)
  return()
endif()
px_cli_test(run_dfx
            "\ndfx [^\n]*/dfx-cli-out\ndfx file [^\n]*/dfx.json\n(dfx file [^\n]*\n)*PASS\nexit status 0\n$"
            "PLEXUS_DFX_STRICT=1" run vector --cores 2 --dfx all
            --out ${CMAKE_CURRENT_BINARY_DIR}/dfx-cli-out)
px_cli_test(run_dfx_nothing_left
            "(^|\n)FAIL: [^\n]*no DFX transport is left[^\n]*device page 65536[^\n]*PLEXUS_DFX=0\nexit status 1\n$"
            "PLEXUS_HUGEPAGES=0" run vector --dfx depgen --dfx-transport mapped
            --device-profile host64k --out ${CMAKE_CURRENT_BINARY_DIR}/dfx-cli-none)
px_cli_test(doctor_dfx
            "\ndfx transports [^\n]*\n(.*\n)?  pmu +via shadow\n +refused mapped: bar_mem=0 in profile minimal\n"
            "" doctor --device-profile minimal)
