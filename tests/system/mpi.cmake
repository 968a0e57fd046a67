# Issue 21, first step: the MPI plugin, the proxy and the mpi transport on one host.
#  - the forced mpi transport (PLEXUS_COMM_TRANSPORT=mpi: every pair through the worker's
#    MPI proxy, MPI started as a singleton) passes test_domain's data-moving tests, one
#    process per test (MPI starts once per process: transports.cmake, from the transport
#    list), and the examples at several sizes;
#  - two workers under mpirun each run their own domains;
#  - without the plugin: a run that does not need MPI still runs levels 2 and 3, one that does
#    fails saying what to do; a program that initialised MPI itself is refused clearly.
# Only where the plugin is built (MPI found, not under sanitizers).
if(NOT PX_MPI_FOUND)
  return()
endif()
set(PX_MPI_ENV "PLEXUS_LOG=warn;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_btl=self,vader,tcp;OMPI_MCA_rmaps_base_oversubscribe=1")

foreach(v "7;f32" "16385;f64" "300001;i64")
  list(GET v 0 size)
  list(GET v 1 dt)
  px_cli_test(run_allreduce_mpi_${size}_${dt}
              "transport mpi \\(6 pairs mpi\\)[^\n]*\n  mpi for 6 pairs: forced by PLEXUS_COMM_TRANSPORT=mpi[^\n]*\n.*\nPASS\nexit status 0\n$"
              "${PX_MPI_ENV};PLEXUS_COMM_TRANSPORT=mpi"
              run allreduce --chips 4 --cores 1 --size ${size} --dtype ${dt} --iters 2)
  set_tests_properties(cli.run_allreduce_mpi_${size}_${dt} PROPERTIES RESOURCE_LOCK chips)
endforeach()
foreach(ex moe tp_mlp)
  px_cli_test(run_${ex}_mpi "\nPASS\nexit status 0\n$" "${PX_MPI_ENV};PLEXUS_COMM_TRANSPORT=mpi"
              run ${ex} --chips 4 --cores 1 --iters 2)
  set_tests_properties(cli.run_${ex}_mpi PROPERTIES RESOURCE_LOCK chips)
endforeach()

# No plugin: nothing needs MPI, so levels 2 and 3 run; forcing MPI fails with what to do.
px_cli_test(run_multi_chip_no_plugin "\nPASS\nexit status 0\n$"
            "PLEXUS_MPI_PLUGIN=/nonexistent/libplexus-mpi.so" run multi_chip --chips 2 --cores 1)
px_cli_test(run_vector_no_plugin "\nPASS\nexit status 0\n$"
            "PLEXUS_MPI_PLUGIN=/nonexistent/libplexus-mpi.so" run vector)
px_cli_test(run_allreduce_mpi_no_plugin
            "FAIL: [^\n]*MPI is in use but the MPI plugin libplexus-mpi.so could not be loaded \\(/nonexistent/libplexus-mpi.so: cannot open shared object file[^\n]*set PLEXUS_MPI_PLUGIN[^\n]*PLEXUS_MPI=off[^\n]*\nexit status 1\n$"
            "PLEXUS_MPI_PLUGIN=/nonexistent/libplexus-mpi.so;PLEXUS_COMM_TRANSPORT=mpi"
            run allreduce --chips 2 --cores 1)
px_cli_test(knob_mpi_bad "PLEXUS_MPI=\"maybe\" is not valid: expected auto, on or off\n.*exit status 1\n$"
            "PLEXUS_MPI=maybe" run vector)

if(MPIEXEC_EXECUTABLE)
  # two workers (hosts 0 and 1 of the job), each with its own domain of its own chips
  add_test(NAME mpi.two_workers_allreduce
           COMMAND sh -c [=["$0" -np 2 "$1" run allreduce --chips 2 --cores 1 --iters 2; echo "exit status $?"]=]
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus>)
  set_tests_properties(mpi.two_workers_allreduce PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV};PLEXUS_LOG=info"
                       PASS_REGULAR_EXPRESSION "mpi: host [01] of 2 .*mpi: host [01] of 2 .*PASS\n.*PASS\n.*exit status 0\n$")
  # domains spanning hosts (issue 21, second step): the collective suite, checked in the
  # chips byte for byte against rank-order folds, at 2 hosts x 1 and 2 chips, 3 hosts x 1
  # and 2 chips; and on one host with every pair forced onto mpi
  add_executable(test_mpi_suite ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_mpi_suite.c)
  target_link_libraries(test_mpi_suite PRIVATE plexus_internal)
  foreach(v "2;1" "2;2" "3;1" "3;2")
    list(GET v 0 hosts)
    list(GET v 1 chips)
    add_test(NAME mpi.suite_${hosts}x${chips}
             COMMAND ${MPIEXEC_EXECUTABLE} -np ${hosts} $<TARGET_FILE:test_mpi_suite> ${chips})
    set_tests_properties(mpi.suite_${hosts}x${chips} PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV}" FAIL_REGULAR_EXPRESSION "FAIL"
                         PASS_REGULAR_EXPRESSION "via mpi: every collective")
  endforeach()
  # hosts with different member counts (2 + 1: flat; 3 + 2 + 3: the chain over 2 shards),
  # and staged pairs inside each host
  # (a2a3-pcie: no peer mapping) under the chain across hosts
  add_test(NAME mpi.suite_2x2_uneven
           COMMAND ${MPIEXEC_EXECUTABLE} -np 2 $<TARGET_FILE:test_mpi_suite> 2 uneven)
  add_test(NAME mpi.suite_3x3_uneven
           COMMAND ${MPIEXEC_EXECUTABLE} -np 3 $<TARGET_FILE:test_mpi_suite> 3 uneven)
  add_test(NAME mpi.suite_2x2_staged
           COMMAND ${MPIEXEC_EXECUTABLE} -np 2 $<TARGET_FILE:test_mpi_suite> 2)
  foreach(t mpi.suite_2x2_uneven mpi.suite_3x3_uneven mpi.suite_2x2_staged)
    set_tests_properties(${t} PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV}" FAIL_REGULAR_EXPRESSION "FAIL"
                         PASS_REGULAR_EXPRESSION "via mpi: every collective")
  endforeach()
  set_property(TEST mpi.suite_2x2_staged APPEND PROPERTY ENVIRONMENT
               "PLEXUS_DEVICE_PROFILE=a2a3-pcie")
  # revoke across hosts (issue 37): a kernel's px_comm_revoke on host 0 and host 1's
  # px_domain_revoke reach every rank of every host well under the deadline (20 s), naming the
  # revoker; the runs that fail with PX_EREVOKED do not end the MPI job
  add_executable(test_mpi_shrink ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_mpi_shrink.c)
  target_link_libraries(test_mpi_shrink PRIVATE plexus_internal)
  add_test(NAME mpi.revoke_2x2
           COMMAND ${MPIEXEC_EXECUTABLE} -np 2 $<TARGET_FILE:test_mpi_shrink> 2 revoke)
  set_tests_properties(mpi.revoke_2x2 PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV};PLEXUS_COMM_TIMEOUT_S=20"
                       FAIL_REGULAR_EXPRESSION "FAIL|non-zero status|exited on signal"
                       PASS_REGULAR_EXPRESSION "host 0 of 2: revoked from a kernel of host 0 and from the orchestration of host 1[^\n]*\nPASS\n.*host 1 of 2: revoked|host 1 of 2: revoked[^\n]*\nPASS\n.*host 0 of 2: revoked from a kernel of host 0 and from the orchestration of host 1")
  # shrink across hosts (issue 37): chip 1 of host 1 dies (PLEXUS_TEST_FAULT), every host's
  # orchestration shrinks the domain, windows carried, the survivors' allreduce bit for bit
  # the rank-order fold as a fresh domain's, the MPI job not ended by the failed run; hosts that
  # shrink different domains are named (PX_EINVAL); a host with no survivor (PX_ENOTSUP);
  # during: a survivor dies between the hosts' agreement and their confirmation (the test hook
  # PX_TEST_XSHRINK_KILL): the first shrink fails alike on both hosts, the second passes
  foreach(v "shrink;2;host 0 of 2: 4 ranks shrunk to 3 by every host"
            "during;3;host 0 of 2: 6 ranks shrunk to 4 by every host"
            "mismatch;2;host 0 of 2: the shrink failed with PX_EINVAL on this host, saying .host 1 shrinks another domain"
            "hostgone;2;host 0 of 2: the shrink failed with PX_ENOTSUP on this host, saying .no member of host 1 survives")
    list(GET v 0 mode)
    list(GET v 1 chips)
    list(GET v 2 want)
    add_test(NAME mpi.${mode}_2x${chips}
             COMMAND ${MPIEXEC_EXECUTABLE} -np 2 $<TARGET_FILE:test_mpi_shrink> ${chips} ${mode})
    set_tests_properties(mpi.${mode}_2x${chips} PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV};PLEXUS_COMM_TIMEOUT_S=20"
                         FAIL_REGULAR_EXPRESSION "FAIL|non-zero status|exited on signal"
                         PASS_REGULAR_EXPRESSION "${want}[^\n]*\nPASS\n.*host 1 of 2: [^\n]*\nPASS\n|host 1 of 2: [^\n]*\nPASS\n.*${want}[^\n]*\nPASS\n")
  endforeach()
  # the same from Python (python/tests/mpi_shrink.py): a domain over every host's chips
  # (w.job_chips(), kept across runs), chip 1 of host 1 dies (PLEXUS_TEST_FAULT), the run
  # raises PeerDead on both hosts, d.shrink(o) on every host, the survivors' allreduce bit for
  # bit the rank-order fold, then host 1's d.revoke() makes host 0's allreduce raise Revoked
  if(PX_PYTHON)
    add_test(NAME mpi.python_shrink_2x2
             COMMAND ${MPIEXEC_EXECUTABLE} -np 2 ${PX_PYTHON_EXE}
                     ${CMAKE_SOURCE_DIR}/python/tests/mpi_shrink.py)
    set_tests_properties(mpi.python_shrink_2x2 PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                         LABELS "mpi;python"
                         ENVIRONMENT "${PX_MPI_ENV};PLEXUS_COMM_TIMEOUT_S=20;PYTHONPATH=${CMAKE_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1"
                         FAIL_REGULAR_EXPRESSION "FAIL|Traceback|non-zero status|exited on signal"
                         PASS_REGULAR_EXPRESSION "host 0 of 2: 4 ranks shrunk to 3 [^\n]*\nPASS\n.*host 1 of 2: [^\n]*\nPASS\n|host 1 of 2: [^\n]*\nPASS\n.*host 0 of 2: 4 ranks shrunk to 3 [^\n]*\nPASS\n")
  endif()
  # a host that does not reach a spanning allocation in time is named by the others
  add_test(NAME mpi.alloc_late_host
           COMMAND ${MPIEXEC_EXECUTABLE} -np 2 $<TARGET_FILE:test_mpi_suite> 1 late)
  set_tests_properties(mpi.alloc_late_host PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV};PLEXUS_TIMEOUT_S=2"
                       PASS_REGULAR_EXPRESSION "host 0: FAIL: PX_ETIMEDOUT: [^\n]*did not all join within 2 s \\(PLEXUS_TIMEOUT_S\\), not heard from host 1 \\(pid [0-9]+, id ")
  # two ranks on one host forced onto mpi: the proxies' allreduce, sent to itself
  add_test(NAME mpi.suite_1x2_forced COMMAND $<TARGET_FILE:test_mpi_suite> 2)
  set_tests_properties(mpi.suite_1x2_forced PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV};PLEXUS_COMM_TRANSPORT=mpi"
                       PASS_REGULAR_EXPRESSION "host 0 of 1: 2 ranks, rank 0 -> rank 1 via mpi: every collective[^\n]*\nPASS\n")
  # more than 64 ranks in one domain: 2 hosts x 64 chips (128 ranks, per-rank state sized at
  # allocation, one mpi ring per rank), the cut suite byte for byte, nothing left behind
  add_test(NAME mpi.wide_2x64
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/system/mpi_wide.sh ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:test_mpi_suite> 2 64)
  set_tests_properties(mpi.wide_2x64 PROPERTIES TIMEOUT 200 RESOURCE_LOCK chips LABELS mpi
                       ENVIRONMENT "${PX_MPI_ENV}"
                       PASS_REGULAR_EXPRESSION "PASS: 128 ranks in one domain")
  add_test(NAME mpi.suite_1x4_forced COMMAND $<TARGET_FILE:test_mpi_suite> 4)
  set_tests_properties(mpi.suite_1x4_forced PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV};PLEXUS_COMM_TRANSPORT=mpi"
                       PASS_REGULAR_EXPRESSION "host 0 of 1: 4 ranks, rank 0 -> rank 3 via mpi: every collective[^\n]*\nPASS\n")
  # the allreduce example over hosts: 4 and 6 ranks, sizes on both sides of the one-shot
  foreach(v "2;7;f32" "2;300001;i64" "3;16385;f64")
    list(GET v 0 hosts)
    list(GET v 1 size)
    list(GET v 2 dt)
    add_test(NAME mpi.allreduce_${hosts}hosts_${size}_${dt}
             COMMAND sh -c [=["$0" -np "$1" "$2" run allreduce --chips 2 --cores 1 --iters 2 --size "$3" --dtype "$4"; echo "exit status $?"]=]
                     ${MPIEXEC_EXECUTABLE} ${hosts} $<TARGET_FILE:plexus> ${size} ${dt})
    set_tests_properties(mpi.allreduce_${hosts}hosts_${size}_${dt} PROPERTIES TIMEOUT 300
                         RESOURCE_LOCK chips ENVIRONMENT "${PX_MPI_ENV}" FAIL_REGULAR_EXPRESSION "FAIL"
                         PASS_REGULAR_EXPRESSION "chips 0:0,0:1,1:0,1:1[^\n]*transport mixed.*PASS\n.*PASS\n.*exit status 0\n$")
  endforeach()
  # one chip per host, several iterations: each allreduce follows the previous one (an edge
  # of its own, as soon as the domain has two ranks, wherever they are)
  add_test(NAME mpi.allreduce_2x1_iters
           COMMAND sh -c [=["$0" -np 2 "$1" run allreduce --chips 1 --cores 1 --iters 3 --size 1000; echo "exit status $?"]=]
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus>)
  set_tests_properties(mpi.allreduce_2x1_iters PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV}" FAIL_REGULAR_EXPRESSION "FAIL"
                       PASS_REGULAR_EXPRESSION "PASS\n.*PASS\n.*exit status 0\n$")
  # moe and tp_mlp over 2 hosts x 2 chips: each host checks its ranks against the host's
  # golden (tp_mlp: the single-chip result)
  foreach(ex moe tp_mlp)
    add_test(NAME mpi.${ex}_2hosts
             COMMAND sh -c [=["$0" -np 2 "$1" run "$2" --chips 2 --cores 1 --iters 2; echo "exit status $?"]=]
                     ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus> ${ex})
    set_tests_properties(mpi.${ex}_2hosts PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV}" FAIL_REGULAR_EXPRESSION "FAIL"
                         PASS_REGULAR_EXPRESSION "4 members \\(chips 0:0,0:1,1:0,1:1\\).*PASS\n.*PASS\n.*exit status 0\n$")
  endforeach()
  # doctor --comm under mpirun: the job's table, printed by host 0, with two host ids (each
  # rank started through env with its own PLEXUS_HOST_ID)
  add_test(NAME mpi.doctor_comm_2hosts
           COMMAND ${MPIEXEC_EXECUTABLE} -np 1 env PLEXUS_HOST_ID=host-a $<TARGET_FILE:plexus>
                   doctor --comm --chips 2 : -np 1 env PLEXUS_HOST_ID=host-b
                   $<TARGET_FILE:plexus> doctor --comm --chips 2)
  set_tests_properties(mpi.doctor_comm_2hosts PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV}"
                       PASS_REGULAR_EXPRESSION "a domain of 2 hosts x chips 0..1[^\n]*\n  rank 0 -> rank 1 via direct [^\n]*\n  rank 0 -> rank 2 via mpi \\(different host id: host-a vs host-b\\)[^\n]*refused: direct \\(different host id: host-a vs host-b\\), staged \\(different host id: host-a vs host-b\\).*  4 chips: 2 pairs direct, 4 mpi\n")
  # direct forced across two hosts: both hosts refuse the domain, naming each chip of the pair
  # as "chip C of host H" (issue 37)
  add_test(NAME mpi.forced_direct_2hosts
           COMMAND sh -c [=["$0" -np 1 env PLEXUS_HOST_ID=host-a "$1" run allreduce --chips 2 --cores 1 --iters 1 --comm-transport direct : -np 1 env PLEXUS_HOST_ID=host-b "$1" run allreduce --chips 2 --cores 1 --iters 1 --comm-transport direct; echo "exit status $?"]=]
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus>)
  set_tests_properties(mpi.forced_direct_2hosts PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV}"
                       PASS_REGULAR_EXPRESSION "FAIL: allreduce: PX_ENOTSUP: domain \"allreduce\": rank 0 \\(chip 0 of host 0\\) -> rank 2 \\(chip 0 of host 1\\): no transport: forced direct[^\n]*\n(.*\n)?FAIL: allreduce: PX_ENOTSUP: domain \"allreduce\": rank 0 \\(chip 0 of host 0\\) -> rank 2 \\(chip 0 of host 1\\): no transport.*exit status [1-9]")
  # what must agree between hosts, refused on every host within seconds (issue 37), each
  # rank's last line sorted by mpi_mismatch.sh: at worker start, DFX on one host only and a
  # different PLEXUS_COMM_ONESHOT_MAX (both named, with both values and hosts; it waited out
  # PLEXUS_TIMEOUT_S before); a level-2 rank among level-3 ones (it joins the start exchange
  # as level 2: both told at once); every rank level 2 (each runs on its own); a spanning
  # domain's spec that differs (--size: the fields named on both hosts); a different --chips
  # per host (host 0's check names the chip host 1 lacks, and host 1 hears it)
  set(PX_MISMATCH sh ${CMAKE_CURRENT_SOURCE_DIR}/system/mpi_mismatch.sh ${MPIEXEC_EXECUTABLE})
  set(PX_MM_RUN $<TARGET_FILE:plexus> run allreduce --chips 2 --cores 1 --iters 1)
  set(PX_MM_HOSTS "host 0 \\(id [^\n]*, pid [0-9]+\\) vs host 1 \\(id [^\n]*, pid [0-9]+\\)")
  add_test(NAME mpi.mismatch_start_knobs
           COMMAND ${PX_MISMATCH} -np 1 ${PX_MM_RUN} --dfx all --out
                   ${CMAKE_CURRENT_BINARY_DIR}/mismatch-dfx : -np 1 env
                   PLEXUS_COMM_ONESHOT_MAX=1K ${PX_MM_RUN})
  set(PX_MM_L_mismatch_start_knobs "FAIL: allreduce: PX_EINVAL: [^\n]*differ in what must be alike, ${PX_MM_HOSTS}: PLEXUS_COMM_ONESHOT_MAX 65536 vs 1024 \\([^\n]*. PLEXUS_DFX all vs 0 \\(host 0 gathers [^\n]*. set each alike on every rank[^\n]*\n")
  set_tests_properties(mpi.mismatch_start_knobs PROPERTIES PASS_REGULAR_EXPRESSION
                       "final lines, sorted:\n${PX_MM_L_mismatch_start_knobs}${PX_MM_L_mismatch_start_knobs}exit status [1-9]")
  add_test(NAME mpi.mismatch_level2
           COMMAND ${PX_MISMATCH} -np 1 ${PX_MM_RUN} : -np 1 $<TARGET_FILE:plexus> run vector)
  set_tests_properties(mpi.mismatch_level2 PROPERTIES PASS_REGULAR_EXPRESSION
                       "final lines, sorted:\nFAIL: allreduce: PX_EINVAL: [^\n]*${PX_MM_HOSTS}: worker level 3 vs 2 \\(a level-2 worker[^\n]*PLEXUS_MPI=off\\)\nFAIL: vector: PX_EINVAL: px_worker_init: this level-2 worker is rank 1 of 2 of an MPI job: [^\n]*worker level 3 vs 2 [^\n]*\nexit status [1-9]")
  add_test(NAME mpi.level2_all
           COMMAND ${PX_MISMATCH} -np 2 $<TARGET_FILE:plexus> run vector)
  set_tests_properties(mpi.level2_all PROPERTIES PASS_REGULAR_EXPRESSION
                       "final lines, sorted:\nPASS\nPASS\nexit status 0\n")
  add_test(NAME mpi.mismatch_size
           COMMAND ${PX_MISMATCH} -np 1 ${PX_MM_RUN} --size 100 : -np 1 ${PX_MM_RUN} --size 200)
  set(PX_MM_L_mismatch_size "FAIL: allreduce: PX_EINVAL: px_domain_alloc: domain \"allreduce\": host 0 and host 1 give it different specs: window bytes 400 vs 800. buffer \"x\" bytes 400 vs 800 \\(host 0's first[^\n]*\n")
  set_tests_properties(mpi.mismatch_size PROPERTIES PASS_REGULAR_EXPRESSION
                       "final lines, sorted:\n${PX_MM_L_mismatch_size}${PX_MM_L_mismatch_size}exit status [1-9]")
  # (before issue 37 only host 0 said anything: host 1 waited in the agreement until killed)
  add_test(NAME mpi.chips_mismatch_2hosts
           COMMAND ${PX_MISMATCH} -np 1 $<TARGET_FILE:plexus> run allreduce --chips 3 --cores 1
                   --iters 1 : -np 1 ${PX_MM_RUN})
  set_tests_properties(mpi.chips_mismatch_2hosts PROPERTIES PASS_REGULAR_EXPRESSION
                       "final lines, sorted:\nFAIL: allreduce: PX_EINVAL: px_domain_alloc: domain \"allreduce\": chips\\[5\\] names chip 2 of host 1, which has 2 chips \\(0\\.\\.1\\): name a chip it has, or start every host with as many chips \\(--chips\\)\nFAIL: allreduce: PX_EINVAL: px_domain_alloc: domain \"allreduce\": host 0 could not make its part \\(PX_EINVAL\\): chips\\[5\\] names chip 2 of host 1, which has 2 chips [^\n]*\nexit status [1-9]")
  foreach(t mpi.mismatch_start_knobs mpi.mismatch_level2 mpi.level2_all mpi.mismatch_size
          mpi.chips_mismatch_2hosts)
    set_tests_properties(${t} PROPERTIES TIMEOUT 60 RESOURCE_LOCK chips LABELS mpi
                         ENVIRONMENT "${PX_MPI_ENV}")
  endforeach()
  # a host killed or stopped, or one of its chips killed or stopped, in the middle of a spanning
  # domain's collectives: the fault lands at chip 0 of host 1's 50th collective
  # (PLEXUS_TEST_FAULT), but for kill, host 1's worker killed by the script at any moment of a
  # job that cannot end before; mpirun ends the job non-zero within the deadlines it goes
  # through plus a slack (mpi_fault.sh says which), a stopped host named by the other at its
  # 2 s deadline, a dead chip named at once (PX_EPEERDEAD, told by host 1's proxy), nothing
  # left behind
  foreach(mode kill stop chip chipstop)
    add_test(NAME mpi.fault_${mode}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/system/mpi_fault.sh ${MPIEXEC_EXECUTABLE}
                     $<TARGET_FILE:plexus> ${mode})
    set_tests_properties(mpi.fault_${mode} PROPERTIES TIMEOUT 240 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV}" PASS_REGULAR_EXPRESSION "\nPASS\n$")
  endforeach()
  # the same at one chip per host: the collective is the proxies' pair allreduce
  foreach(mode stop chip chipstop)
    add_test(NAME mpi.fault_${mode}_2x1
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/system/mpi_fault.sh ${MPIEXEC_EXECUTABLE}
                     $<TARGET_FILE:plexus> ${mode} 1)
    set_tests_properties(mpi.fault_${mode}_2x1 PROPERTIES TIMEOUT 240 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV}" PASS_REGULAR_EXPRESSION "\nPASS\n$")
  endforeach()
  # issue 21, DFX across hosts: mpi.dfx_hosts_missing is mpi_fault.sh dfxstop (host 1 stopped:
  # host 0 still writes the outputs, host 1 in hosts_missing, the job non-zero in time)
  add_test(NAME mpi.dfx_hosts_missing
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/system/mpi_fault.sh ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:plexus> dfxstop)
  set_tests_properties(mpi.dfx_hosts_missing PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV}" PASS_REGULAR_EXPRESSION "\nPASS\n$")
  # one set of outputs by host 0 (dfx_hosts_check.py): tp_mlp on 2 hosts x 2 chips with every
  # collector (a group per host and chip, comm spans with host, peer and transport, the
  # hosts' allreduce spans overlapping once the clocks are aligned, the critical path from a
  # host task into a chip's tp_mlp.rank); and one host with every pair forced onto mpi
  find_program(PX_PYTHON3_HOSTS NAMES python3)
  if(NOT PX_PYTHON3_HOSTS)
    set(PX_PYTHON3_HOSTS /nonexistent/python3)
  endif()
  set(PX_DFX_HOSTS_OUT ${CMAKE_CURRENT_BINARY_DIR}/dfx-hosts-out)
  add_test(NAME mpi.dfx_hosts_mpi
           COMMAND sh -c [=[[ -x "$2" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$3" && "$0" -np 2 "$1" run tp_mlp --chips 2 --cores 1 --iters 1 --dfx all --out "$3" || exit 1
"$2" "$4" "$3" 2 2 comm.allreduce tp_mlp.rank || exit 1
"$1" trace summary "$3"]=]
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus> ${PX_PYTHON3_HOSTS}
                   ${PX_DFX_HOSTS_OUT}/mpi ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_hosts_check.py)
  add_test(NAME mpi.dfx_hosts_forced
           COMMAND sh -c [=[[ -x "$1" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$2" && "$0" run allreduce --chips 2 --cores 1 --iters 1 --dfx all --out "$2" || exit 1
exec "$1" "$3" "$2" 1 2 comm.allreduce]=]
                   $<TARGET_FILE:plexus> ${PX_PYTHON3_HOSTS} ${PX_DFX_HOSTS_OUT}/forced
                   ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_hosts_check.py)
  # issue 37: train_loop over 2 hosts x 2 chips with chip 1 of host 1 killed at iteration 7:
  # the outputs left are the shrink's run's, so on every survivor's track of both hosts the
  # orchestration's revoke, agreement (chip 1 of host 1 excluded, with why) and shrink, then
  # the 13 steps left; dfx.json names the excluded chip by host and chip with why, and the
  # spanning domain's members as {host, chip}, at the top and in both hosts' entries
  add_test(NAME mpi.dfx_hosts_dead_chip
           COMMAND sh -c [=[[ -x "$2" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$3" && "$0" -np 2 "$1" run train_loop --chips 2 --cores 1 --iters 20 --kill-chip 1:1 \
    --at-iter 7 --dfx all --out "$3" >/dev/null || exit 1
exec "$2" "$4" dead "$3" 2 2 1:1 train.step 13]=]
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus> ${PX_PYTHON3_HOSTS}
                   ${PX_DFX_HOSTS_OUT}/dead ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_hosts_check.py)
  # the same with --shrink kernel (issue 37): every survivor's track of both hosts shows the
  # kernel's revoke, its agreement (the dead chip of host 1 excluded, with why) and its shrink
  # (the loop is one train.loop task around them: no task after)
  add_test(NAME mpi.dfx_hosts_dead_chip_kernel
           COMMAND sh -c [=[[ -x "$2" ] || { echo "skipped: python3 not found"; exit 77; }
rm -rf "$3" && "$0" -np 2 "$1" run train_loop --chips 2 --cores 1 --iters 20 --kill-chip 1:1 \
    --at-iter 7 --shrink kernel --dfx all --out "$3" >/dev/null || exit 1
exec "$2" "$4" dead "$3" 2 2 1:1 train.loop 0]=]
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus> ${PX_PYTHON3_HOSTS}
                   ${PX_DFX_HOSTS_OUT}/dead_kernel ${CMAKE_CURRENT_SOURCE_DIR}/system/dfx_hosts_check.py)
  foreach(t mpi.dfx_hosts_mpi mpi.dfx_hosts_forced mpi.dfx_hosts_dead_chip
            mpi.dfx_hosts_dead_chip_kernel)
    set_tests_properties(${t} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV}" PASS_REGULAR_EXPRESSION "\nPASS\n$")
  endforeach()
  set_property(TEST mpi.dfx_hosts_forced APPEND PROPERTY ENVIRONMENT
               "PLEXUS_COMM_TRANSPORT=mpi")
  # issue 37: under mpirun each host prints the DFX outputs it wrote and where host 0's merged
  # set is (two hosts, each with its own --out), never another host's files as its own
  add_test(NAME mpi.dfx_hosts_print
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/system/mpi_dfx_print.sh ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:plexus> ${PX_DFX_HOSTS_OUT}/print)
  set_tests_properties(mpi.dfx_hosts_print PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips LABELS mpi
                       ENVIRONMENT "${PX_MPI_ENV}" PASS_REGULAR_EXPRESSION "\nPASS\n$")
  # ... and `plexus trace summary` reads the level-4 outputs: a critical path from a host
  # task (of either host: pid 0 or 1000) into a chip's tasks (task@pid), both hosts with
  # their clocks
  set_property(TEST mpi.dfx_hosts_mpi PROPERTY PASS_REGULAR_EXPRESSION
               "\nPASS\ntrace summary of [^\n]*\n.*critical path: [0-9]+ tasks, [0-9.]+ us: [0-9]+(@[1-9]000)? [0-9]+@[0-9]*[1-9] .*\nlevel 4: 2 hosts [^\n]*\n  host 0 \\([^)]*\\): 2 chips, clock offset 0.000 us[^\n]*\n  host 1 \\([^)]*\\): 2 chips, clock offset [^\n]*\nPASS\n$")
  add_executable(test_mpi_preinit ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_mpi_preinit.c)
  target_link_libraries(test_mpi_preinit PRIVATE plexus_internal MPI::MPI_C)
  add_test(NAME mpi.preinit_refused COMMAND ${MPIEXEC_EXECUTABLE} -np 1 $<TARGET_FILE:test_mpi_preinit>)
  set_tests_properties(mpi.preinit_refused PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV}" PASS_REGULAR_EXPRESSION "\nPASS\n")
  # two level-3 workers one after the other in one process (issue 34): the first runs under
  # MPI, the second is refused with why and what to do (MPI once per process, no fork after
  # MPI_Init), whether it wants MPI or has PLEXUS_MPI=off
  add_executable(test_mpi_two_workers ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_mpi_two_workers.c)
  target_link_libraries(test_mpi_two_workers PRIVATE plexus_internal plexus_examples)
  add_test(NAME mpi.two_workers_in_one_process
           COMMAND ${MPIEXEC_EXECUTABLE} -np 2 $<TARGET_FILE:test_mpi_two_workers>)
  set_tests_properties(mpi.two_workers_in_one_process PROPERTIES TIMEOUT 120
                       RESOURCE_LOCK chips ENVIRONMENT "${PX_MPI_ENV}"
                       FAIL_REGULAR_EXPRESSION "FAIL"
                       PASS_REGULAR_EXPRESSION "rank [01]: PASS\n.*rank [01]: PASS\n")
  # train_loop --shrink kernel over 2 hosts (issue 37): the survivors of both hosts shrink
  # inside the loop's kernel, through the proxies, and finish bit-identical to a 3-chip run
  add_test(NAME mpi.train_loop_kernel_2hosts
           COMMAND sh -c [=["$0" -np 2 "$1" run train_loop --chips 2 --cores 1 --iters 20 --kill-chip 1:0 --at-iter 7 --shrink kernel; echo "exit status $?"]=]
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:plexus>)
  set(tlk "check ok: 20 iterations of 1024 parameters: chip 0 of host 1 killed at iteration 7, 3 survivors \\(shrunk in the kernel\\) bit-identical to a 3-chip run from iteration 7 and to the host")
  set_tests_properties(mpi.train_loop_kernel_2hosts PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                       ENVIRONMENT "${PX_MPI_ENV};PLEXUS_TIMEOUT_S=20"
                       FAIL_REGULAR_EXPRESSION "FAIL|exit status [1-9]"
                       PASS_REGULAR_EXPRESSION "${tlk} \\(host [01] checked its [12] ranks?\\)\nPASS\n.*${tlk} \\(host [01] checked its [12] ranks?\\)\nPASS\n")
  # the same past 64 ranks (the agreement's sets are bitsets: rank 65, chip 32 of host 1,
  # dies) and over 3 hosts (a survivor whose last allreduce failed while its peers' passed
  # takes their iteration: tl_realign)
  foreach(v "66;2;33;1:32;65;host 1 checked its 32 ranks|host 0 checked its 33 ranks"
            "3hosts;3;3;2:1;8;host [012] checked its [23] ranks")
    list(GET v 0 tag)
    list(GET v 1 np)
    list(GET v 2 chips)
    list(GET v 3 kill)
    list(GET v 4 nsurv)
    list(GET v 5 mine)
    add_test(NAME mpi.train_loop_kernel_${tag}
             COMMAND ${MPIEXEC_EXECUTABLE} -np ${np} $<TARGET_FILE:plexus> run train_loop
                     --chips ${chips} --cores 1 --iters 8 --kill-chip ${kill} --at-iter 3
                     --shrink kernel --size 256)
    set_tests_properties(mpi.train_loop_kernel_${tag} PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV};PLEXUS_TIMEOUT_S=30;PLEXUS_COMM_TIMEOUT_S=20"
                         FAIL_REGULAR_EXPRESSION "FAIL|non-zero status|exited on signal"
                         PASS_REGULAR_EXPRESSION "${nsurv} survivors \\(shrunk in the kernel\\) bit-identical to a ${nsurv}-chip run from iteration 3 and to the host \\((${mine})\\)\nPASS\n")
  endforeach()
  # the kernel-side shrink across hosts (issue 37): 2 hosts x 3 chips, one resilient task;
  # two deaths, each shrunk in the kernels (generations 1 and 2: the heads at the windows'
  # other head, then back), windows carried, allreduces bit for bit the rank-order fold, the
  # last generation revoked from host 0 and seen on host 1; during1/2: a survivor dies inside
  # the first shrink after its proposal / its readiness (PX_TEST_COMM_SHRINK_EXIT on host 1);
  # pair: a chip of each host dies at once
  add_executable(test_mpi_kshrink ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_mpi_kshrink.c)
  target_link_libraries(test_mpi_kshrink PRIVATE plexus_internal)
  foreach(v "kernel;6 ranks shrunk in their kernels to 5, then 4"
            "during1;6 ranks shrunk in their kernels to 4, then 3"
            "during2;6 ranks shrunk in their kernels to 4, then 3"
            "pair;6 ranks shrunk in their kernels to 4, then 3")
    list(GET v 0 mode)
    list(GET v 1 want)
    add_test(NAME mpi.kshrink_${mode}_2x3
             COMMAND ${MPIEXEC_EXECUTABLE} -np 2 $<TARGET_FILE:test_mpi_kshrink> 3 ${mode})
    set_tests_properties(mpi.kshrink_${mode}_2x3 PROPERTIES TIMEOUT 120 RESOURCE_LOCK chips
                         ENVIRONMENT "${PX_MPI_ENV};PLEXUS_COMM_TIMEOUT_S=20;PLEXUS_TIMEOUT_S=30"
                         FAIL_REGULAR_EXPRESSION "FAIL|non-zero status|exited on signal"
                         PASS_REGULAR_EXPRESSION "host [01] of 2: ${want}[^\n]*\nPASS\n.*host [01] of 2: ${want}[^\n]*\nPASS\n")
  endforeach()
endif()
