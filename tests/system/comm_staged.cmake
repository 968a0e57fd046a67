# Issue 11: the same collective suites on every transport, with results checked bit for bit
# against folds in rank order (so every transport gives the same bits):
#  - test_comm (ranks as threads, every collective, dtype and op) on staged and mixed;
#  - test_domain's data-moving tests in chip processes under forced staged, forced direct,
#    auto with profile a2a3-pcie (every pair staged) and auto with profile pairs (mixed).
add_test(NAME unit.test_comm_staged COMMAND test_comm staged)
add_test(NAME unit.test_comm_mixed COMMAND test_comm mixed)
set_tests_properties(unit.test_comm_staged unit.test_comm_mixed PROPERTIES TIMEOUT 300
                     ENVIRONMENT "PLEXUS_LOG=warn")
foreach(v "staged;PLEXUS_COMM_TRANSPORT=staged" "direct;PLEXUS_COMM_TRANSPORT=direct"
          "a2a3;PLEXUS_DEVICE_PROFILE=a2a3-pcie" "pairs;PLEXUS_DEVICE_PROFILE=pairs")
  list(GET v 0 tag)
  list(GET v 1 env)
  add_test(NAME unit.test_domain_${tag} COMMAND test_domain transport)
  set_tests_properties(unit.test_domain_${tag} PROPERTIES TIMEOUT 300 RESOURCE_LOCK chips
                       ENVIRONMENT "PLEXUS_LOG=warn;${env}")
endforeach()

# The communication examples under profile a2a3-pcie (no peer mapping, as the seed's machine):
# they pass over staged and say so, with the reason, at info.
foreach(ex allreduce moe tp_mlp)
  px_cli_test(run_${ex}_a2a3_log
              "comm\\[[a-z_]+\\]: rank 0 -> rank 3 via staged \\(peer_map=0 in profile a2a3-pcie\\)\n.*\nPASS\nexit status 0\n$"
              "PLEXUS_LOG=info;PLEXUS_DEVICE_PROFILE=a2a3-pcie"
              run ${ex} --chips 4 --cores 1 --iters 2)
  set_tests_properties(cli.run_${ex}_a2a3_log PROPERTIES RESOURCE_LOCK chips)
endforeach()

# Seed 1 (comm-backend-exbus.txt): TP=8 on a machine whose driver cannot map one card's memory
# into another: tp_mlp on 8 chips under a2a3-pcie passes, every one of the 28 pairs staged.
px_cli_test(seed1_tp_mlp_8_a2a3
            "comm\\[tp\\]: rank 0 -> rank 7 via staged \\(peer_map=0 in profile a2a3-pcie\\)\n.*\ndomain tp: 8 members [^\n]*transport staged \\(28 pairs staged\\)[^\n]*\n.*\nPASS\nexit status 0\n$"
            "PLEXUS_LOG=info" run tp_mlp --chips 8 --cores 1 --device-profile a2a3-pcie)
set_tests_properties(cli.seed1_tp_mlp_8_a2a3 PROPERTIES RESOURCE_LOCK chips)
