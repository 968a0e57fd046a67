# l3.cmake - level-3 (one host, many chips) system tests (included by tests/CMakeLists.txt,
# after cli.cmake, whose px_cli_test() it uses).
#
# Every test that forks chip processes takes the ctest RESOURCE_LOCK "chips", so two of them
# never run at once: their timing bounds (a dead chip noticed by the watch's next look, 100 ms,
# plus PX_TEST_LATE_S x PLEXUS_TEST_SLACK) and the checks for leftover processes assume the
# machine is not shared with another multi-process test.

set_tests_properties(unit.test_l3 unit.test_l3_threads unit.test_threads unit.test_l3_misuse unit.test_l3_ext unit.test_domain
                     unit.test_fault unit.test_alias
                     PROPERTIES RESOURCE_LOCK chips)

# The multi_chip example: chips compute their parts, a host task combines them.
px_cli_test(run_multi_chip
            "multi_chip: [^\n]*chips 2, [^\n]*\ntasks 3\nedges 2\n.*\nPASS\nexit status 0\n$" ""
            run multi_chip)
px_cli_test(run_multi_chip_4
            "chips 4, cores 1, [^\n]*\ntasks 15\nedges 12\n.*\nPASS\nexit status 0\n$" ""
            run multi_chip --chips 4 --cores 1 --size 1000 --iters 3)
px_cli_test(run_multi_chip_env "chips 3, [^\n]*\ntasks 4\nedges 3\n.*\nPASS\nexit status 0\n$"
            "PLEXUS_CHIPS=3" run multi_chip)
px_cli_test(run_multi_chip_subs "\ntasks 3\nedges 2\n.*\nPASS\nexit status 0\n$"
            "PLEXUS_SUBS=2" run multi_chip --size 4096)
px_cli_test(run_chips_level2
            "(^|\n)FAIL: option --chips does not apply to example vector[^\n]*\nexit status 1\n$"
            "" run vector --chips 2)
px_cli_test(run_bad_chips "(^|\n)FAIL: option --chips: \"0\" is not valid[^\n]*\nexit status 1\n$"
            "" run multi_chip --chips 0)
px_cli_test(run_multi_chip_too_small
            "(^|\n)FAIL: multi_chip: [^\n]*size 2 is out of range[^\n]*\nexit status 1\n$" ""
            run multi_chip --chips 3 --size 2)

set_tests_properties(cli.run_multi_chip cli.run_multi_chip_4 cli.run_multi_chip_env
                     cli.run_multi_chip_subs cli.run_multi_chip_too_small cli.demo
                     cli.demo_out
                     PROPERTIES RESOURCE_LOCK chips)
