# dfx_l3.cmake - DFX at level 3 (included by tests/CMakeLists.txt, after cli.cmake): each chip
# records its own data and the parent merges it into one trace.json and one dfx.json.
#
# Every test forks chip processes, so each takes RESOURCE_LOCK "chips" (see l3.cmake).
# dfx.l3_merged: multi_chip on 2 chips with swimlane and depgen, checked by dfx_l3_check.py
# with counts worked out by hand (examples/multi_chip.c): 3 task slices on the host (2
# next-level tasks, 1 host task), 2 on each chip (mc.fma, mc.sum), 2 + 2 x 1 = 4 flows.
# cli.run_multi_chip_dfx: every collector, strict, ends with PASS.
# dfx.l3_report_cp: the merged report's critical path on tp_mlp (below).
set_tests_properties(unit.test_l3_dfx PROPERTIES RESOURCE_LOCK chips)
if(NOT PX_DFX)
  return()
endif()

find_program(PX_PYTHON3_L3 NAMES python3)
if(NOT PX_PYTHON3_L3)
  set(PX_PYTHON3_L3 /nonexistent/python3)
endif()
set(PX_DFX_L3_OUT ${CMAKE_CURRENT_BINARY_DIR}/dfx-l3-out)
add_test(NAME dfx.l3_merged
         COMMAND sh -c [=[[ -x "$1" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$2" && PLEXUS_DFX_STRICT=1 "$0" run multi_chip --chips 2 --dfx swimlane,depgen \
    --out "$2" || exit 1
exec "$1" "$3" "$2" 2 3 2 4]=]
                 $<TARGET_FILE:plexus> ${PX_PYTHON3_L3} ${PX_DFX_L3_OUT}/merged
                 ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_l3_check.py)
set_tests_properties(dfx.l3_merged PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
                     RESOURCE_LOCK chips ENVIRONMENT "PLEXUS_LOG=warn")

# dfx.l3_report_cp: tp_mlp on 4 chips with every collector; the merged report's critical path
# follows the host's edges through each host task into the chip tasks its calls ran
# (dfx_l3_check.py report): more than one task, a tp_mlp.rank on a chip among them.
add_test(NAME dfx.l3_report_cp
         COMMAND sh -c [=[[ -x "$1" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$2" && PLEXUS_DFX_STRICT=1 "$0" run tp_mlp --chips 4 --dfx all --out "$2" || exit 1
exec "$1" "$3" report "$2" 4 tp_mlp.rank]=]
                 $<TARGET_FILE:plexus> ${PX_PYTHON3_L3} ${PX_DFX_L3_OUT}/report-cp
                 ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_l3_check.py)
set_tests_properties(dfx.l3_report_cp PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
                     RESOURCE_LOCK chips ENVIRONMENT "PLEXUS_LOG=warn")

# `plexus trace summary` of a level-3 run (tp_mlp on 4 chips): the critical path follows the
# host's tasks into the chips' (task@pid), as report.html's does, not one host task alone
add_test(NAME dfx.l3_trace_summary
         COMMAND sh -c [=[rm -rf "$1" && "$0" run tp_mlp --chips 4 --dfx all --out "$1" >/dev/null || exit 1
exec "$0" trace summary "$1"]=]
                 $<TARGET_FILE:plexus> ${PX_DFX_L3_OUT}/trace-summary)
set_tests_properties(dfx.l3_trace_summary PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                     ENVIRONMENT "PLEXUS_LOG=warn"
                     PASS_REGULAR_EXPRESSION "critical path: [2-9][0-9]* tasks, [0-9.]+ us: [0-9]+ [0-9]+@[1-4][ \n].*\nlevel 3: the host and 4 chips [^\n]*\nPASS\n$")

# dfx.l3_dead_chip: train_loop with every collector after chip 2 of 4 died (shrunk from the
# orchestration, and in the kernels): the run passes, and its outputs come from the survivors
# with the dead chip named missing (dfx_l3_check.py missing).
foreach(where orchestration kernel)
  add_test(NAME dfx.l3_dead_chip_${where}
           COMMAND sh -c [=[[ -x "$1" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$2" && "$0" run train_loop --chips 4 --cores 1 --kill-chip 2 --at-iter 50 \
    --shrink "$4" --dfx all --out "$2" | tail -1 | grep -x PASS || exit 1
exec "$1" "$3" missing "$2" 4 2]=]
                   $<TARGET_FILE:plexus> ${PX_PYTHON3_L3} ${PX_DFX_L3_OUT}/dead-${where}
                   ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_l3_check.py ${where})
  set_tests_properties(dfx.l3_dead_chip_${where} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK chips ENVIRONMENT "PLEXUS_LOG=error")
endforeach()

px_cli_test(run_multi_chip_dfx
            "\ntasks 3\nedges 2\n.*\ndfx [^\n]*/dfx-l3-out/all\ndfx file [^\n]*/dfx.json\n(dfx file [^\n]*\n)*PASS\nexit status 0\n$"
            "PLEXUS_DFX_STRICT=1" run multi_chip --chips 2 --dfx all --out ${PX_DFX_L3_OUT}/all)
set_tests_properties(cli.run_multi_chip_dfx PROPERTIES RESOURCE_LOCK chips)

# dfx.l3_domains_*: dfx.json "domains" of allreduce's run: every pair of ranks with its
# transport and why, and the domain's summary, checked against the profile's documented facts
# (dfx_l3_check.py domains): all direct, all staged, mixed.
set(px_dom_runs "default;3" "a2a3-pcie;3" "pairs;4")
list(LENGTH px_dom_runs px_dom_len)
math(EXPR px_dom_last "${px_dom_len} - 1")
foreach(i RANGE 0 ${px_dom_last} 2)
  math(EXPR j "${i} + 1")
  list(GET px_dom_runs ${i} prof)
  list(GET px_dom_runs ${j} nchips)
  add_test(NAME dfx.l3_domains_${prof}
           COMMAND sh -c [=[[ -x "$1" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$2" && "$0" run allreduce --chips "$5" --cores 1 --device-profile "$4" --dfx depgen \
    --out "$2" || exit 1
exec "$1" "$3" domains "$2" allreduce "$5" "$4"]=]
                   $<TARGET_FILE:plexus> ${PX_PYTHON3_L3} ${PX_DFX_L3_OUT}/domains-${prof}
                   ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_l3_check.py ${prof} ${nchips})
  set_tests_properties(dfx.l3_domains_${prof} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK chips ENVIRONMENT "PLEXUS_LOG=warn")
endforeach()
