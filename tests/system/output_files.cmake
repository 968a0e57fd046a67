# output_files.cmake - the output files are written safely (included by tests/CMakeLists.txt):
# concurrent runs into one --out, planted symbolic links, a full disk (test hook). See
# output_files.sh for what each checks.
find_program(PX_PYTHON3_OUT NAMES python3)
if(NOT PX_PYTHON3_OUT)
  set(PX_PYTHON3_OUT /nonexistent/python3)
endif()
set(PX_OUT_SH ${CMAKE_CURRENT_SOURCE_DIR}/system/output_files.sh)
set(PX_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/out-files)

add_test(NAME out.concurrent_l2
         COMMAND sh ${PX_OUT_SH} concurrent $<TARGET_FILE:plexus> ${PX_PYTHON3_OUT}
                 ${PX_OUT_DIR}/conc2 6 vector --cores 1)
add_test(NAME out.concurrent_l3
         COMMAND sh ${PX_OUT_SH} concurrent $<TARGET_FILE:plexus> ${PX_PYTHON3_OUT}
                 ${PX_OUT_DIR}/conc3 3 multi_chip --chips 2 --cores 1)
add_test(NAME out.links
         COMMAND sh ${PX_OUT_SH} links $<TARGET_FILE:plexus> ${PX_PYTHON3_OUT} ${PX_OUT_DIR}/links)
add_test(NAME out.enospc
         COMMAND sh ${PX_OUT_SH} enospc $<TARGET_FILE:plexus> ${PX_PYTHON3_OUT}
                 ${PX_OUT_DIR}/enospc)
set_tests_properties(out.concurrent_l2 out.concurrent_l3 out.links out.enospc
                     PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT "PLEXUS_LOG=warn")
set_tests_properties(out.concurrent_l3 out.links PROPERTIES RESOURCE_LOCK chips)
