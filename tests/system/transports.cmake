# The per-transport suites, made from the one list of transports (src/util/tl_list.h), so a
# new transport's row brings its tests along: every transport of the list runs test_domain's
# data-moving tests ("test_domain transport") in chip processes with PLEXUS_COMM_TRANSPORT
# forcing it, as unit.test_domain_<name> (issue 11: results checked bit for bit against folds
# in rank order, so every transport gives the same bits). A transport that needs more than
# that says so in the table below, and only there:
#   px_tl_requires_<name>  a variable that must be true for its tests (none are added without)
#   px_tl_env_<name>       the environment besides the force (default: PLEXUS_LOG=warn)
#   px_tl_split_<name>     test_domain's tests to run one per process instead, each named
#                          unit.test_domain_<name>_<test>
# This file sorts after mpi.cmake, which sets PX_MPI_ENV.

# mpi (issue 21): the forced mpi transport, every pair through the worker's MPI proxy, MPI
# started as a singleton; one process per test (MPI starts once per process). Only where the
# plugin is built (MPI found, not under sanitizers).
set(px_tl_requires_mpi PX_MPI_FOUND)
set(px_tl_env_mpi "${PX_MPI_ENV}")
set(px_tl_split_mpi test_allreduce_end_to_end test_overlapping_domains
    test_collective_matrix_processes test_member_dies_in_collective
    test_window_buffer_as_device_tensor test_domain_across_runs test_one_sided_progress
    test_failed_collective_pair)

# The names of the list's rows, in its order: X(PX_COMM_TL_<ID>, "<name>", <contract>). (Each
# row ends with a backslash, which would escape a CMake list's separator: the rows are matched
# in the file's text, not read as lines.)
set(px_tl_row_re "X\\(PX_COMM_TL_[A-Z0-9_]+, \"([a-z0-9_]+)\", [a-z0-9_]+\\)")
file(READ ${CMAKE_SOURCE_DIR}/src/util/tl_list.h px_tl_text)
string(REGEX MATCHALL "${px_tl_row_re}" px_tl_rows "${px_tl_text}")
set(PX_COMM_TRANSPORTS "")
foreach(row ${px_tl_rows})
  string(REGEX REPLACE "${px_tl_row_re}" "\\1" name "${row}")
  list(APPEND PX_COMM_TRANSPORTS ${name})
endforeach()
if(NOT PX_COMM_TRANSPORTS)
  message(FATAL_ERROR "tests/system/transports.cmake: found no row X(PX_COMM_TL_<ID>, \"<name>\", "
                      "<contract>) in src/util/tl_list.h; keep each row of PX_COMM_TL_MAP in that "
                      "shape, or update px_tl_row_re here")
endif()

foreach(tl ${PX_COMM_TRANSPORTS})
  if(DEFINED px_tl_requires_${tl} AND NOT ${px_tl_requires_${tl}})
    continue()
  endif()
  set(env "PLEXUS_LOG=warn")
  if(DEFINED px_tl_env_${tl})
    set(env "${px_tl_env_${tl}}")
  endif()
  if(DEFINED px_tl_split_${tl})
    foreach(t ${px_tl_split_${tl}})
      add_test(NAME unit.test_domain_${tl}_${t} COMMAND test_domain transport ${t})
      set_tests_properties(unit.test_domain_${tl}_${t} PROPERTIES TIMEOUT 300
                           RESOURCE_LOCK chips
                           ENVIRONMENT "${env};PLEXUS_COMM_TRANSPORT=${tl}")
    endforeach()
  else()
    add_test(NAME unit.test_domain_${tl} COMMAND test_domain transport)
    set_tests_properties(unit.test_domain_${tl} PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                         ENVIRONMENT "${env};PLEXUS_COMM_TRANSPORT=${tl}")
  endif()
endforeach()
