# cli.cmake - system tests of the `plexus` command line (included by tests/CMakeLists.txt).
#
# Each test runs the real binary through `sh -c` and appends "exit status N", so one regular
# expression checks both the output (the last line is PASS or FAIL: <reason>) and the exit
# status; ctest ignores the exit status once PASS_REGULAR_EXPRESSION is set. Needs a POSIX sh;
# the JSON test also needs python3 (found at configure time; skipped with a reason if absent).

find_program(PX_PYTHON3 NAMES python3)

# px_cli_test(NAME REGEX ENV ARG...): runs `plexus ARG...` with ENV ("" for none) and passes
# when the output followed by "exit status N" matches REGEX.
function(px_cli_test name regex env)
  add_test(NAME cli.${name}
           COMMAND sh -c [=["$0" "$@"; echo "exit status $?"]=] $<TARGET_FILE:plexus> ${ARGN})
  set(vars "PLEXUS_LOG=warn")
  if(env)
    list(APPEND vars "${env}")
  endif()
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}" TIMEOUT 300
                       ENVIRONMENT "${vars}")
endfunction()

# Results: the default vector run and a matmul whose size is not a multiple of the tile.
px_cli_test(run_vector
            "\ntasks 5\nedges 6\ntime_ms [0-9.]+\ncheck ok: [^\n]*\nPASS\nexit status 0\n$"
            "" run vector)
px_cli_test(run_vector_iters "\ntasks 15\nedges 18\n.*\nPASS\nexit status 0\n$" ""
            run vector --iters=3 --size 1000 --cores 2)
px_cli_test(run_matmul_remainder "\ntasks 64\nedges 48\n.*\nPASS\nexit status 0\n$" ""
            run matmul --size 100 --tile 32)
px_cli_test(demo "== vector\n.*== matmul\n.*\nPASS\nexit status 0\n$" "" demo --cores 2)
# demo --out DIR (documented) runs with DFX on and writes each example's files under DIR/<name>;
# it used to fail with "no DFX collector is on; add --dfx all" while demo refuses --dfx.
px_cli_test(demo_out
            "dfx file [^\n]*/cli-demo-out/vector/trace.json\n.*dfx file [^\n]*/cli-demo-out/matmul/report.html\n.*dfx file [^\n]*/cli-demo-out/multi_chip/dfx.json\n.*\nPASS\nexit status 0\n$"
            "" demo --cores 2 --out ${CMAKE_CURRENT_BINARY_DIR}/cli-demo-out)

# Options are applied on top of the PLEXUS_* environment, and win over it.
px_cli_test(env_cores "cores 1, .*\nPASS\nexit status 0\n$" "PLEXUS_CORES=1" run vector)
px_cli_test(option_beats_env "cores 2, .*\nPASS\nexit status 0\n$" "PLEXUS_CORES=1"
            run vector --cores 2)

# Usage errors end with FAIL: <reason> and exit status 1.
px_cli_test(run_unknown_example "(^|\n)FAIL: unknown example \"nosuch\"[^\n]*\nexit status 1\n$" ""
            run nosuch)
px_cli_test(run_bad_number "(^|\n)FAIL: option --size: \"abc\" is not valid[^\n]*\nexit status 1\n$"
            "" run vector --size abc)
px_cli_test(run_unknown_option "(^|\n)FAIL: unknown option \"--bogus\"[^\n]*\nexit status 1\n$" ""
            run vector --bogus)
px_cli_test(run_missing_example "(^|\n)FAIL: [^\n]*needs more arguments[^\n]*\nexit status 1\n$" ""
            run)
px_cli_test(run_bad_profile "(^|\n)FAIL: [^\n]*nosuch[^\n]*\nexit status 1\n$" ""
            run vector --device-profile nosuch)
px_cli_test(bad_env "(^|\n)FAIL: environment: [^\n]*PLEXUS_CORES[^\n]*\nexit status 1\n$"
            "PLEXUS_CORES=abc" run vector)
px_cli_test(unknown_command "(^|\n)FAIL: unknown command \"frobnicate\"[^\n]*\nexit status 1\n$" ""
            frobnicate)
# The list of commands in the message is every command (it used to omit trace).
px_cli_test(unknown_command_lists_all
            "(^|\n)FAIL: unknown command \"frobnicate\" \\(commands: run, demo, doctor, trace, help;[^\n]*\nexit status 1\n$"
            "" frobnicate)
px_cli_test(help_unknown_command_lists_all
            "(^|\n)FAIL: unknown command \"frobnicate\" \\(commands: run, demo, doctor, trace, help\\)\nexit status 1\n$"
            "" help frobnicate)
# --help and --version take no argument: an extra one is a usage error (they ignored it).
px_cli_test(help_extra "(^|\n)FAIL: unexpected argument \"extra\" after --help[^\n]*\nexit status 1\n$"
            "" --help extra)
px_cli_test(version_extra
            "(^|\n)FAIL: unexpected argument \"extra\" after --version[^\n]*\nexit status 1\n$"
            "" --version extra)
# Options follow the knobs' text rule: decimal digits only, no spaces, no '+'.
px_cli_test(run_spaced_number
            "(^|\n)FAIL: option --size: \" 5\" is not valid[^\n]*\nexit status 1\n$" ""
            run vector "--size= 5")
px_cli_test(env_spaced_knob
            "(^|\n)FAIL: environment: [^\n]*PLEXUS_CORES=\" 4\"[^\n]*whitespace[^\n]*\nexit status 1\n$"
            "PLEXUS_CORES= 4" run vector)
px_cli_test(env_timeout_range
            "(^|\n)FAIL: environment: [^\n]*PLEXUS_TIMEOUT_S=\"1e8\"[^\n]*at most 10000000[^\n]*\nexit status 1\n$"
            "PLEXUS_TIMEOUT_S=1e8" run vector)

# Help and version exit 0.
px_cli_test(help "usage: plexus COMMAND.*plexus run EXAMPLE.*exit status 0\n$" "" --help)
px_cli_test(help_command "usage: plexus doctor.*--json.*exit status 0\n$" "" help doctor)
px_cli_test(run_help "usage: plexus run EXAMPLE.*--device-profile P.*matmul.*exit status 0\n$"
            "" run --help)
px_cli_test(version "^plexus ${PROJECT_VERSION}\nexit status 0\n$" "" --version)

# doctor: the text report has the paths section; --json is one valid document, version 1.
px_cli_test(doctor "\npaths \\(from the effective facts\\):\n  host mapping, ordinary pages +\
(available|refused: )[^\n]*\n.*exit status 0\n$" "" doctor)
px_cli_test(doctor_minimal "  peer mapping between chips +refused: .*exit status 0\n$" ""
            doctor --device-profile minimal)
px_cli_test(doctor_config "PLEXUS_CORES.*exit status 0\n$" "" doctor --config)

if(PX_PYTHON3)
  add_test(NAME cli.doctor_json
           COMMAND sh -c [=[out=$("$0" doctor --json) || exit 1
printf '%s\n' "$out" | "$1" -c 'import json, sys
d = json.load(sys.stdin)
ok = d["version"] == 1 and "host_page_size" in d["facts"] and "host_map" in d["paths"]
sys.exit(0 if ok else 1)']=] $<TARGET_FILE:plexus> ${PX_PYTHON3})
else()
  add_test(NAME cli.doctor_json
           COMMAND sh -c "echo 'skipped: python3 not found; cannot parse doctor --json'; exit 77")
endif()
set_tests_properties(cli.doctor_json PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
                     ENVIRONMENT "PLEXUS_LOG=warn")

# ---- comm transports: --comm-transport and plexus doctor --comm ----
# Expectations that name staged's acceptance (with the words the rule gives). Tests that fork
# chips take RESOURCE_LOCK chips.
set(px_staged_alt "; the alternative: staged would work \\(same host, [^\n]*\\); set PLEXUS_COMM_TRANSPORT=auto \\(or --comm-transport auto\\)")
set(px_cli_chips_tests "")

# --comm-transport: parsed into PLEXUS_COMM_TRANSPORT (the header says the force), beats the
# variable, refused with the accepted forms, refused for a level-2 example.
px_cli_test(run_comm_transport_direct
            "chips 2, [^\n]*, profile default, comm transport direct\n.*\ncheck ok: [^\n]*\nPASS\nexit status 0\n$"
            "" run allreduce --chips 2 --cores 1 --comm-transport direct)
px_cli_test(run_comm_transport_beats_env
            "chips 2, [^\n]*, profile default, comm transport direct\n.*\nPASS\nexit status 0\n$"
            "PLEXUS_COMM_TRANSPORT=staged" run allreduce --chips 2 --cores 1 --comm-transport=direct)
px_cli_test(run_comm_transport_auto
            "chips 2, [^\n]*, profile default\ntasks .*\nPASS\nexit status 0\n$"
            "PLEXUS_COMM_TRANSPORT=direct" run allreduce --chips 2 --cores 1 --comm-transport auto)
list(APPEND px_cli_chips_tests cli.run_comm_transport_direct cli.run_comm_transport_beats_env
     cli.run_comm_transport_auto)
px_cli_test(run_comm_transport_bad
            "^FAIL: option --comm-transport: PLEXUS_COMM_TRANSPORT=\"bogus\" is not valid: expected one of auto, direct, staged, mpi\nexit status 1\n$"
            "" run allreduce --comm-transport bogus)
# The help names what the parser accepts (the same list, util/tl_list.h; it used to leave out
# mpi): the option's line and run's description.
px_cli_test(run_help_comm_transport
            "--comm-transport T \\(level-3 examples; T: auto, direct, staged, mpi\\).*\n  --comm-transport T +comm transport of every pair of chips: auto, direct, staged, mpi; .*exit status 0\n$"
            "" run --help)
px_cli_test(env_comm_transport_bad
            "^FAIL: environment: PX_EINVAL: PLEXUS_COMM_TRANSPORT=\"bogus\" is not valid: expected one of auto, direct, staged, mpi\nexit status 1\n$"
            "PLEXUS_COMM_TRANSPORT=bogus" run allreduce)
px_cli_test(run_comm_transport_level2
            "^FAIL: option --comm-transport does not apply to example vector \\(level 2: [^\n]*\nexit status 1\n$"
            "" run vector --comm-transport direct)
px_cli_test(run_comm_transport_needs_value
            "^FAIL: option --comm-transport needs a value T\nexit status 1\n$" "" run allreduce
            --comm-transport)
# Forced direct where peers cannot map each other: the run fails naming the pair, peer_map=0,
# the profile and the alternative (or staged's own refusal before it is built).
px_cli_test(run_comm_transport_refused
            "(^|\n)FAIL: allreduce: PX_ENOTSUP: domain \"allreduce\": rank 0 \\(chip 0\\) -> rank 1 \\(chip 1\\): no transport: forced direct \\(PLEXUS_COMM_TRANSPORT=direct\\) refused: peer_map=0 in profile a2a3-pcie${px_staged_alt}\nexit status 1\n$"
            "" run allreduce --chips 2 --cores 1 --device-profile a2a3-pcie --comm-transport direct)
list(APPEND px_cli_chips_tests cli.run_comm_transport_refused)
set_tests_properties(${px_cli_chips_tests} PROPERTIES RESOURCE_LOCK chips)

# doctor --comm (text): one line per pair in the log's shape, every refusal, a summary; the
# rule is px_domain_alloc's (comm_choose), so these expectations are the profiles' documented
# facts: default maps every pair, a2a3-pcie none, pairs only 0-1 and 2-3.
set(px_direct_default "")
foreach(p "0;1" "0;2" "0;3" "1;2" "1;3" "2;3")
  list(GET p 0 a)
  list(GET p 1 b)
  string(APPEND px_direct_default "  rank ${a} -> rank ${b} via direct \\(peer_map=1 in profile default\\)[^\n]*\n")
endforeach()
px_cli_test(doctor_comm
            "^comm transports \\(device profile default, PLEXUS_COMM_TRANSPORT auto; a domain of chips 0\\.\\.3, [^\n]*\n${px_direct_default}  4 chips: 6 pairs direct\nexit status 0\n$"
            "" doctor --comm)
px_cli_test(doctor_comm_chips_env "^comm transports [^\n]*chips 0\\.\\.2, [^\n]*\n  rank [^\n]*\n  rank [^\n]*\n  rank [^\n]*\n  3 chips: 3 pairs direct\nexit status 0\n$"
            "PLEXUS_CHIPS=3" doctor --comm)
px_cli_test(doctor_comm_one_chip "\n  1 chip: no pairs [^\n]*\nexit status 0\n$" "" doctor --comm --chips 1)
set(px_a2a3_pair "via staged \\(peer_map=0 in profile a2a3-pcie\\); refused: direct \\(peer_map=0 in profile a2a3-pcie\\)\n")
set(px_a2a3_sum "  4 chips: 6 pairs staged\n")
set(px_group_pair "via staged \\(peer_map_group=2 in profile pairs: chips map each other only inside groups of 2 \\(0-1, 2-3, \\.\\.\\.\\)\\); refused: direct \\(peer_map_group=2 [^\n]*\n")
set(px_pairs_sum "  4 chips: 2 pairs direct, 4 staged\n")
set(px_a2a3_lines "")
set(px_pairs_lines "")
foreach(p "0;1" "0;2" "0;3" "1;2" "1;3" "2;3")
  list(GET p 0 a)
  list(GET p 1 b)
  string(APPEND px_a2a3_lines "  rank ${a} -> rank ${b} ${px_a2a3_pair}")
  if(p STREQUAL "0;1" OR p STREQUAL "2;3")
    string(APPEND px_pairs_lines "  rank ${a} -> rank ${b} via direct \\(peer_map=1 in profile pairs\\)[^\n]*\n")
  else()
    string(APPEND px_pairs_lines "  rank ${a} -> rank ${b} ${px_group_pair}")
  endif()
endforeach()
px_cli_test(doctor_comm_a2a3
            "^comm transports \\(device profile a2a3-pcie, [^\n]*\n${px_a2a3_lines}${px_a2a3_sum}exit status 0\n$"
            "" doctor --comm --device-profile a2a3-pcie)
px_cli_test(doctor_comm_pairs
            "^comm transports \\(device profile pairs, [^\n]*\n${px_pairs_lines}${px_pairs_sum}exit status 0\n$"
            "" doctor --comm --device-profile pairs --chips 4)
# A forced transport that is refused: doctor shows the refusal and the alternatives, exit 0.
px_cli_test(doctor_comm_forced_direct_a2a3
            "^comm transports \\(device profile a2a3-pcie, PLEXUS_COMM_TRANSPORT direct; [^\n]*\n  rank 0 -> rank 1 via none; refused: direct \\(peer_map=0 in profile a2a3-pcie\\)[^\n]*\n    px_domain_alloc fails \\(PX_ENOTSUP\\): forced direct \\(PLEXUS_COMM_TRANSPORT=direct\\) refused: peer_map=0 in profile a2a3-pcie${px_staged_alt}\n  2 chips: 1 pair with no transport; [^\n]*\nexit status 0\n$"
            "PLEXUS_COMM_TRANSPORT=direct" doctor --comm --device-profile a2a3-pcie --chips 2)
px_cli_test(doctor_comm_option_forced
            "^comm transports \\(device profile default, PLEXUS_COMM_TRANSPORT direct; [^\n]*\n  rank 0 -> rank 1 via direct \\(peer_map=1 in profile default\\)[^\n]*\n  2 chips: 1 pair direct\nexit status 0\n$"
            "PLEXUS_COMM_TRANSPORT=staged" doctor --comm --chips 2 --comm-transport direct)
px_cli_test(doctor_comm_bad_env
            "^FAIL: environment: PX_EINVAL: PLEXUS_COMM_TRANSPORT=\"bogus\" is not valid: expected one of auto, direct, staged, mpi\nexit status 1\n$"
            "PLEXUS_COMM_TRANSPORT=bogus" doctor --comm)
px_cli_test(doctor_comm_bad_option
            "^FAIL: option --comm-transport: PLEXUS_COMM_TRANSPORT=\"rdma\" is not valid: expected one of auto, direct, staged, mpi\nexit status 1\n$"
            "" doctor --comm --comm-transport rdma)
px_cli_test(doctor_chips_without_comm
            "^FAIL: doctor: option --chips applies only with --comm [^\n]*\nexit status 1\n$" ""
            doctor --chips 4)
px_cli_test(doctor_comm_with_dfx
            "^FAIL: doctor: --comm and --dfx cannot be combined[^\n]*\nexit status 1\n$" ""
            doctor --comm --dfx all)
# doctor without --comm is unchanged but for its last line, a hint at --comm.
px_cli_test(doctor_comm_hint
            "\ndfx transports [^\n]*\n.*\n\ncomm transports: `plexus doctor --comm \\[--chips N\\]` shows each pair of chips' transport and why\nexit status 0\n$"
            "" doctor)
if(PX_PYTHON3)
  add_test(NAME cli.doctor_comm_json
           COMMAND ${PX_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/system/doctor_comm_check.py
                   $<TARGET_FILE:plexus> 1)
else()
  add_test(NAME cli.doctor_comm_json
           COMMAND sh -c "echo 'skipped: python3 not found; cannot parse doctor --comm --json'; exit 77")
endif()
set_tests_properties(cli.doctor_comm_json PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
                     ENVIRONMENT "PLEXUS_LOG=warn")

# The demo's domain lines count the pairs per transport and give each distinct reason of the
# pairs not on direct once (the all-direct lines are checked by comm_examples.cmake's
# cli.demo_comm, the shapes of every case by unit.test_example_domain).
px_cli_test(demo_comm_pairs "\n== allreduce\n.*\ndomain allreduce: 4 members \\(chips 0,1,2,3\\), \
transport mixed \\(2 pairs direct, 4 staged\\); bytes moved [^\n]*\n  staged for 4 pairs: \
peer_map_group=2 in profile pairs: chips map each other only inside groups of 2 \\(0-1, 2-3, \
\\.\\.\\.\\)\ncheck ok: [^\n]*\n.*\n== tp_mlp\n.*\ndomain tp: 4 members \\(chips 0,1,2,3\\), \
transport mixed \\(2 pairs direct, 4 staged\\); [^\n]*\n  staged for 4 pairs: [^\n]*\ncheck ok: \
[^\n]*\n.*\nPASS\nexit status 0\n$" "" demo --cores 1 --device-profile pairs)
px_cli_test(run_allreduce_a2a3 "\ndomain allreduce: 3 members \\(chips 0,1,2\\), transport \
staged \\(3 pairs staged\\); bytes moved [^\n]*\n  staged for 3 pairs: peer_map=0 in profile \
a2a3-pcie\ncheck ok: [^\n]*\nPASS\nexit status 0\n$" "" run allreduce --chips 3 --cores 1
            --device-profile a2a3-pcie)
set_tests_properties(cli.demo_comm_pairs cli.run_allreduce_a2a3 PROPERTIES RESOURCE_LOCK chips)

# train_loop (issue 23): chip 2 of 4 kills itself at iteration 50; the survivors shrink the
# domain and finish, bit-identical to a 3-chip run from iteration 50 and to the host.
px_cli_test(run_train_loop_kill "train_loop: iteration 50: [^\n]*chip 2 \\(pid [0-9]+\\) died: \
killed by signal 9 \\(SIGKILL\\)[^\n]*\ntrain_loop: shrunk to 3 survivors \\(generation 1\\); \
going on from iteration 50\n.*check ok: 100 iterations of 1024 parameters: chip 2 killed at \
iteration 50, 3 survivors bit-identical to a 3-chip run from iteration 50 and to the host\n\
PASS\nexit status 0\n$" "" run train_loop --chips 4 --cores 1 --kill-chip 2 --at-iter 50)
px_cli_test(run_train_loop_staged "check ok: [^\n]*3 survivors bit-identical[^\n]*\nPASS\n\
exit status 0\n$" "" run train_loop --chips 4 --cores 1 --kill-chip 1 --at-iter 7 --iters 20
            --device-profile a2a3-pcie)
px_cli_test(run_train_loop_bad_kill "FAIL: [^\n]*--kill-chip 9 is not a chip \\(0..3\\)\nexit \
status 1\n$" "" run train_loop --chips 4 --cores 1 --kill-chip 9)
# H:C names a chip of host H: without mpirun the job has one host
px_cli_test(run_train_loop_bad_kill_host "FAIL: [^\n]*--kill-chip 1:1 is not a chip: the job \
has one host [^\n]*pass --kill-chip C \\(0..3\\)\nexit status 1\n$" "" run train_loop --chips 4
            --cores 1 --kill-chip 1:1)
px_cli_test(run_train_loop_bad_kill_form "FAIL: option --kill-chip: \"x:1\" is not valid; expected \
C or H:C[^\n]*\nexit status 1\n$" "" run train_loop --chips 4 --cores 1 --kill-chip x:1)
px_cli_test(run_train_loop_bad_kill_chip "FAIL: option --kill-chip: \"1:64\" is not valid; \
expected C or H:C \\(chip C 0..63 of host H 0..16383\\)\nexit status 1\n$" "" run train_loop
            --chips 4 --cores 1 --kill-chip 1:64)
# --shrink kernel: the whole loop is one resilient task; the survivors shrink inside their
# kernels (px_comm_shrink) and finish, bit-identical to a 3-chip run from iteration 50.
px_cli_test(run_train_loop_kernel "train_loop: chip 2 died at iteration 50; the 3 survivors \
shrank inside the loop's kernel \\(px_comm_shrink, 1 shrink\\) and went on\n.*check ok: 100 \
iterations of 1024 parameters: chip 2 killed at iteration 50, 3 survivors \\(shrunk in the \
kernel\\) bit-identical to a 3-chip run from iteration 50 and to the host\nPASS\nexit status 0\n$"
            "" run train_loop --chips 4 --cores 1 --kill-chip 2 --at-iter 50 --shrink kernel)
px_cli_test(run_train_loop_kernel_staged "check ok: [^\n]*3 survivors \\(shrunk in the kernel\\) \
bit-identical[^\n]*\nPASS\nexit status 0\n$" "" run train_loop --chips 4 --cores 1
            --kill-chip 1 --at-iter 7 --iters 20 --device-profile a2a3-pcie --shrink kernel)
px_cli_test(run_train_loop_bad_shrink "FAIL: [^\n]*--shrink nowhere is not a place to shrink: \
use orchestration or kernel\nexit status 1\n$" "" run train_loop --chips 2 --shrink nowhere)
set_tests_properties(cli.run_train_loop_kill cli.run_train_loop_staged
                     cli.run_train_loop_bad_kill cli.run_train_loop_bad_kill_host
                     cli.run_train_loop_bad_kill_form cli.run_train_loop_bad_kill_chip
                     cli.run_train_loop_kernel
                     cli.run_train_loop_kernel_staged cli.run_train_loop_bad_shrink
                     PROPERTIES RESOURCE_LOCK chips)
