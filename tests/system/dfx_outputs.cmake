# dfx_outputs.cmake - end-to-end checks of the files the DFX collectors write (included by
# tests/CMakeLists.txt): every collector on vector (5 tasks, 6 edges) and on matmul with 4 tiles
# per side (4^3 = 64 tasks, 4^2 x 3 = 48 edges), `plexus trace summary`, and report.html
# rendered by headless Chromium (one data-task element per task, the time axis). Counts are
# worked out by hand.
find_program(PX_PYTHON3_DFX NAMES python3)
find_program(PX_CHROMIUM NAMES chromium chromium-browser)
if(NOT PX_PYTHON3_DFX)
  set(PX_PYTHON3_DFX /nonexistent/python3)
endif()
if(NOT PX_CHROMIUM)
  set(PX_CHROMIUM /nonexistent/chromium)
endif()
set(PX_DFX_SH ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_outputs.sh)
set(PX_DFX_OUT ${CMAKE_CURRENT_BINARY_DIR}/dfx-out)

add_test(NAME dfx.outputs_vector
         COMMAND sh ${PX_DFX_SH} check $<TARGET_FILE:plexus> ${PX_PYTHON3_DFX} ${PX_DFX_OUT}/vector
                 vector 5 6 --cores 2)
add_test(NAME dfx.outputs_matmul
         COMMAND sh ${PX_DFX_SH} check $<TARGET_FILE:plexus> ${PX_PYTHON3_DFX} ${PX_DFX_OUT}/matmul
                 matmul 64 48 --size 128 --tile 32 --cores 2)
add_test(NAME dfx.trace_summary
         COMMAND sh ${PX_DFX_SH} summary $<TARGET_FILE:plexus> ${PX_PYTHON3_DFX}
                 ${PX_DFX_OUT}/summary)
# report.html of vector (5 tasks, one chip: 1 group) and of multi_chip at level 3 (the merged
# report: 3 host tasks + 2 per chip = 7 tasks, host + 2 chips = 3 groups).
# Both opened zoomed 4x; tp_mlp on 4 chips (17 host tasks + 5 per chip = 37 tasks, host + 4
# chips = 5 groups) opened whole (zoom 1), so that every task must lie between the axis labels.
add_test(NAME dfx.report_chromium
         COMMAND sh ${PX_DFX_SH} chromium $<TARGET_FILE:plexus> ${PX_PYTHON3_DFX}
                 ${PX_DFX_OUT}/report ${PX_CHROMIUM} 5 1 4 vector --cores 2)
add_test(NAME dfx.report_chromium_l3
         COMMAND sh ${PX_DFX_SH} chromium $<TARGET_FILE:plexus> ${PX_PYTHON3_DFX}
                 ${PX_DFX_OUT}/report_l3 ${PX_CHROMIUM} 7 3 4 multi_chip --chips 2)
add_test(NAME dfx.report_chromium_l3_axis
         COMMAND sh ${PX_DFX_SH} chromium $<TARGET_FILE:plexus> ${PX_PYTHON3_DFX}
                 ${PX_DFX_OUT}/report_l3_axis ${PX_CHROMIUM} 37 5 1 tp_mlp --chips 4)
set_tests_properties(dfx.outputs_vector dfx.outputs_matmul dfx.trace_summary
                     PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 ENVIRONMENT "PLEXUS_LOG=warn")
set_tests_properties(dfx.report_chromium dfx.report_chromium_l3 dfx.report_chromium_l3_axis
                     PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 ENVIRONMENT "PLEXUS_LOG=warn")
set_tests_properties(dfx.report_chromium_l3 dfx.report_chromium_l3_axis
                     PROPERTIES RESOURCE_LOCK chips)
