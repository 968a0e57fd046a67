# netns.cmake - several hosts on this machine (issue 21): one network namespace per host, made
# and removed by tests/system/netns/mpi_hosts.sh, one MPI job across them (included by
# tests/CMakeLists.txt). Each test goes through netns_check.sh (beside the harness), which
# says what it checks. Not root, no `ip netns`: the harness prints why and they skip (77).
# Only where the MPI plugin is built and mpirun was found, as tests/system/mpi.cmake.
if(NOT PX_MPI_FOUND OR NOT MPIEXEC_EXECUTABLE)
  return()
endif()
set(PX_NETNS_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/system/netns/netns_check.sh)
set(PX_NETNS_ENV "PLEXUS_LOG=warn")

# px_netns_test(NAME HOSTS WANT... -- COMMAND...): COMMAND under the harness at HOSTS hosts
# exits 0 with a line matching each WANT (an extended regular expression; one line per copy).
function(px_netns_test name hosts)
  set(args)
  set(in_cmd FALSE)
  foreach(a ${ARGN})
    if(in_cmd)
      list(APPEND args ${a})
    elseif(a STREQUAL "--")
      list(APPEND args --)
      set(in_cmd TRUE)
    else()
      list(APPEND args --want ${a})
    endif()
  endforeach()
  add_test(NAME netns.${name}
           COMMAND sh ${PX_NETNS_CHECK} expect ${MPIEXEC_EXECUTABLE} ${hosts} ${args})
  set_tests_properties(netns.${name} PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK chips ENVIRONMENT "${PX_NETNS_ENV}")
endfunction()

# doctor on each host: its own host id and hostname, and that it runs under MPI
set(doctor_mpi "a level-3 worker +runs under MPI \\(OMPI_COMM_WORLD_SIZE=2")
px_netns_test(two_hosts_doctor 2
              "^host_id +host-0 +env +PLEXUS_HOST_ID" "^host_id +host-1 +env +PLEXUS_HOST_ID"
              "^hostname +host-0 " "^hostname +host-1 " "${doctor_mpi}" "${doctor_mpi}"
              -- $<TARGET_FILE:plexus> doctor)

# allreduce over every host (one domain of hosts x 2 ranks, pairs across hosts on mpi over
# TCP between the namespaces): every host's MPI line, the domain over all hosts with the
# reason of a pair across hosts, and a PASS each
foreach(h 2 3)
  set(wants)
  math(EXPR last "${h} - 1")
  math(EXPR n "${h} * 2")
  foreach(i RANGE ${last})
    list(APPEND wants "mpi: host ${i} of ${h} \\(host-${i}\\), Open MPI v"
         "^domain allreduce: ${n} members \\(chips 0:0,0:1,1:0,1:1.*transport mixed"
         "comm\\[allreduce\\]: rank 0 -> rank 2 via mpi \\(different host id: host-0 vs host-1\\)"
         "^PASS$")
  endforeach()
  if(h EQUAL 2)
    set(name two_hosts_allreduce)
  else()
    set(name three_hosts_allreduce)
  endif()
  px_netns_test(${name} ${h} ${wants}
                -- env PLEXUS_LOG=info $<TARGET_FILE:plexus> run allreduce --chips 2 --cores 1)
endforeach()

# revoke and shrink of a domain spanning two namespace hosts (issue 37; tests/mpi/
# test_mpi_shrink.c): a kernel's and an orchestration's revoke reach the other host at once;
# chip 1 of host 1 dies, both hosts' orchestrations shrink the domain, windows carried, the
# survivors' allreduce bit for bit the rank-order fold
px_netns_test(two_hosts_revoke 2
              "^host 0 of 2: revoked from a kernel of host 0 and from the orchestration of host 1"
              "^host 1 of 2: revoked from a kernel of host 0" "^PASS$" "^PASS$"
              -- env PLEXUS_COMM_TIMEOUT_S=20 $<TARGET_FILE:test_mpi_shrink> 2 revoke)
px_netns_test(two_hosts_shrink 2 "^host 0 of 2: 4 ranks shrunk to 3 by every host"
              "^host 1 of 2: 4 ranks shrunk to 3 by every host" "^PASS$" "^PASS$"
              -- env PLEXUS_COMM_TIMEOUT_S=20 $<TARGET_FILE:test_mpi_shrink> 2 shrink)

# DFX across two namespace hosts (issue 21): host 0 writes one set of outputs for both
# (tests/system/dfx_hosts_check.py: host ids host-0 and host-1, clocks aligned over MPI on the
# veth); the harness's skip (77) passes through
find_program(PX_PYTHON3_NETNS NAMES python3)
if(NOT PX_PYTHON3_NETNS)
  set(PX_PYTHON3_NETNS /nonexistent/python3)
endif()
add_test(NAME netns.two_hosts_dfx
         COMMAND sh -c [=[[ -x "$3" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$4"
sh "$0" --mpirun "$1" --hosts 2 --timeout 100 -- "$2" run allreduce --chips 2 --cores 1 --iters 1 --dfx all --out "$4"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: the job exited $rc"; exit 1; }
exec "$3" "$5" "$4" 2 2 comm.allreduce]=]
                 ${CMAKE_CURRENT_SOURCE_DIR}/system/netns/mpi_hosts.sh ${MPIEXEC_EXECUTABLE}
                 $<TARGET_FILE:plexus> ${PX_PYTHON3_NETNS} ${CMAKE_CURRENT_BINARY_DIR}/dfx-netns-out
                 ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_hosts_check.py)
set_tests_properties(netns.two_hosts_dfx PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77
                     RESOURCE_LOCK chips ENVIRONMENT "${PX_NETNS_ENV}"
                     PASS_REGULAR_EXPRESSION "\nPASS\n$")

# a failed job and a job ended by the harness's timeout: non-zero, nothing left behind
# (about 13 s; its jobs' own limits, 60 s and 3 s plus 10 s each to kill, fit in the TIMEOUT)
add_test(NAME netns.cleanup
         COMMAND sh ${PX_NETNS_CHECK} cleanup ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus>)
set_tests_properties(netns.cleanup PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     RESOURCE_LOCK chips ENVIRONMENT "${PX_NETNS_ENV}")

# not root (uid 65534; root of a user namespace): refused with a reason, exit 77
add_test(NAME netns.refused_unprivileged COMMAND sh ${PX_NETNS_CHECK} unprivileged)
set_tests_properties(netns.refused_unprivileged PROPERTIES TIMEOUT 30 SKIP_RETURN_CODE 77)

# train_loop over every host's chips (issue 37): one domain of 2 hosts x 2 chips, host-major
# ranks; each host checks its own ranks against the host computation and passes
px_netns_test(two_hosts_train_loop 2
              "check ok: 20 iterations of 1024 parameters on 4 chips, bit-identical to the host \\(host 0 checked its 2 ranks\\)"
              "check ok: 20 iterations of 1024 parameters on 4 chips, bit-identical to the host \\(host 1 checked its 2 ranks\\)"
              "^PASS$" "^PASS$"
              -- $<TARGET_FILE:plexus> run train_loop --chips 2 --cores 1 --iters 20)

# train_loop over 2 hosts x 2 chips with a chip killed (issue 37): chip 1 of host 1, then chip
# 0 of host 0, dies at iteration 7; every host's orchestration shrinks the domain spanning
# both, the survivors finish, and each host checks its survivors bit-identical to a 3-chip
# run from iteration 7 and to the host computation
foreach(v "1:1;2;1" "0:0;1;2")
  list(GET v 0 kill)
  list(GET v 1 mine0)
  list(GET v 2 mine1)
  string(REPLACE ":" "_" tag ${kill})
  string(REGEX REPLACE "^([0-9]+):([0-9]+)$" "chip \\2 of host \\1" killed ${kill})
  set(ok "check ok: 20 iterations of 1024 parameters: ${killed} killed at iteration 7, 3 survivors bit-identical to a 3-chip run from iteration 7 and to the host")
  set(s0 "s")
  set(s1 "s")
  if(mine0 EQUAL 1)
    set(s0 "")
  endif()
  if(mine1 EQUAL 1)
    set(s1 "")
  endif()
  px_netns_test(two_hosts_train_loop_kill_${tag} 2
                "^train_loop: shrunk to 3 survivors \\(generation 1\\); going on from iteration 7$"
                "^train_loop: shrunk to 3 survivors \\(generation 1\\); going on from iteration 7$"
                "${ok} \\(host 0 checked its ${mine0} rank${s0}\\)$"
                "${ok} \\(host 1 checked its ${mine1} rank${s1}\\)$"
                "^PASS$" "^PASS$"
                -- $<TARGET_FILE:plexus> run train_loop --chips 2 --cores 1 --iters 20
                   --kill-chip ${kill} --at-iter 7)
endforeach()

# the same with --shrink kernel (issue 37): the survivors of both hosts shrink inside the
# loop's kernel (px_comm_shrink through the proxies) and finish bit-identical
px_netns_test(two_hosts_train_loop_kernel_1_1 2
              "^train_loop: chip 1 of host 1 died at iteration 7; the 3 survivors shrank inside the loop's kernel"
              "^train_loop: chip 1 of host 1 died at iteration 7; the 3 survivors shrank inside the loop's kernel"
              "check ok: 20 iterations of 1024 parameters: chip 1 of host 1 killed at iteration 7, 3 survivors \\(shrunk in the kernel\\) bit-identical to a 3-chip run from iteration 7 and to the host \\(host 0 checked its 2 ranks\\)$"
              "check ok: 20 iterations of 1024 parameters: chip 1 of host 1 killed at iteration 7, 3 survivors \\(shrunk in the kernel\\) bit-identical to a 3-chip run from iteration 7 and to the host \\(host 1 checked its 1 rank\\)$"
              "^PASS$" "^PASS$"
              -- $<TARGET_FILE:plexus> run train_loop --chips 2 --cores 1 --iters 20
                 --kill-chip 1:1 --at-iter 7 --shrink kernel)
