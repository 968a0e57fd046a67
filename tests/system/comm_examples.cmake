# comm_examples.cmake - the communication examples through the command line (included by
# tests/CMakeLists.txt after cli.cmake, whose px_cli_test() it uses): allreduce, moe and tp_mlp
# at 1..4 chips with the task and edge counts worked out by hand (see each example's file
# comment: allreduce K(2n+1) tasks and 2n+(K-1)(4n+e) edges, e = (n > 1); tp_mlp K(4n+1) and
# 4n+(K-1)(8n+1); moe K(2n+4) and 2n+4+(K-1)(4n+5)), allreduce with each --op and each --dtype,
# bad values refused with one FAIL line, and the demo's domain lines and its --out.
#
# They fork chip processes, so they take the ctest RESOURCE_LOCK "chips" like l3.cmake's.

set(px_comm_cli_tests "")

# allreduce at 1..4 chips, 2 iterations: tasks 2(2n+1), edges 2n + 4n + e.
foreach(spec "1;6;6" "2;10;13" "3;14;19" "4;18;25")
  list(GET spec 0 n)
  list(GET spec 1 tasks)
  list(GET spec 2 edges)
  px_cli_test(run_allreduce_${n}
              "allreduce: [^\n]*chips ${n}, [^\n]*\ntasks ${tasks}\nedges ${edges}\ntime_ms [0-9.]+\n\
domain allreduce: ${n} members? \\(chips [0-9,]+\\), transport direct \\([^\n]+\\); bytes moved [0-9]+\
[^\n]*\ncheck ok: [^\n]*\nPASS\nexit status 0\n$"
              "" run allreduce --chips ${n} --cores 1 --iters 2 --size 1001)
  list(APPEND px_comm_cli_tests cli.run_allreduce_${n})
endforeach()

# Each reduction and each element type on 2 chips (the unit test runs every pair).
foreach(op sum prod min max)
  px_cli_test(run_allreduce_op_${op} "chips 2, op ${op}, dtype f64, [^\n]*\n.*\n\
check ok: allreduce ${op} of 333 f64 [^\n]*\nPASS\nexit status 0\n$"
              "" run allreduce --chips 2 --cores 1 --size 333 --op ${op} --dtype f64)
  list(APPEND px_comm_cli_tests cli.run_allreduce_op_${op})
endforeach()
foreach(dt f32 f64 i32 i64)
  px_cli_test(run_allreduce_dtype_${dt} "check ok: allreduce max of 333 ${dt} [^\n]*\nPASS\nexit status 0\n$"
              "" run allreduce --chips 2 --cores 1 --size 333 --op=max --dtype=${dt})
  list(APPEND px_comm_cli_tests cli.run_allreduce_dtype_${dt})
endforeach()

# tp_mlp and moe at 1..4 chips, 2 iterations.
foreach(spec "1;10;13" "2;18;25" "3;26;37" "4;34;49")
  list(GET spec 0 n)
  list(GET spec 1 tasks)
  list(GET spec 2 edges)
  px_cli_test(run_tp_mlp_${n} "chips ${n}, [^\n]*\ntasks ${tasks}\nedges ${edges}\n.*\ndomain tp: \
${n} members?[^\n]*\ncheck ok: [^\n]*\nPASS\nexit status 0\n$"
              "" run tp_mlp --chips ${n} --cores 1 --iters 2)
  list(APPEND px_comm_cli_tests cli.run_tp_mlp_${n})
endforeach()
foreach(spec "1;12;15" "2;16;21" "3;20;27" "4;24;33")
  list(GET spec 0 n)
  list(GET spec 1 tasks)
  list(GET spec 2 edges)
  px_cli_test(run_moe_${n} "chips ${n}, [^\n]*\ntasks ${tasks}\nedges ${edges}\n.*\ndomain moe: \
${n} members?[^\n]*\ncheck ok: [^\n]*\nPASS\nexit status 0\n$"
              "" run moe --chips ${n} --cores 1 --iters 2)
  list(APPEND px_comm_cli_tests cli.run_moe_${n})
endforeach()

# Bad values: one FAIL line naming the value and the choices, exit status 1, no chip started.
px_cli_test(run_allreduce_bad_op
            "^FAIL: allreduce: --op \"nosuch\" is not a reduction; use sum, prod, min or max\nexit status 1\n$"
            "" run allreduce --op nosuch)
px_cli_test(run_allreduce_bad_dtype
            "^FAIL: allreduce: --dtype \"u8\" is not an element type it reduces; use f32, f64, i32 or i64\n\
exit status 1\n$" "" run allreduce --dtype u8)
px_cli_test(run_op_not_reducing
            "^FAIL: option --op does not apply to example tp_mlp [^\n]*\nexit status 1\n$" ""
            run tp_mlp --op sum)
px_cli_test(run_allreduce_inexact
            "(^|\n)FAIL: allreduce: [^\n]*beyond the 16777216 that f32 holds exactly[^\n]*\nexit status 1\n$"
            "" run allreduce --chips 2 --size 9000000)
list(APPEND px_comm_cli_tests cli.run_allreduce_inexact)

# The demo runs allreduce and tp_mlp on 4 chips with DFX on and prints their domains.
px_cli_test(demo_comm "\n== allreduce\nexample allreduce: [^\n]*chips 4, [^\n]*\n.*\
\ndomain allreduce: 4 members \\(chips 0,1,2,3\\), transport direct \\(peer_map=1[^\n]*\\); bytes \
moved [0-9]+ [^\n]*, time [0-9.]+ ms[^\n]*\n.*\ndfx file [^\n]*allreduce/trace.json\n.*\
\n== tp_mlp\nexample tp_mlp: [^\n]*chips 4, [^\n]*\n.*\ndomain tp: 4 members \\(chips 0,1,2,3\\), \
transport direct [^\n]*\n.*\nPASS\nexit status 0\n$" "" demo --cores 1)
list(APPEND px_comm_cli_tests cli.demo_comm)

# The demo takes --out DIR alone (it turns DFX on itself) and writes DIR/<example>.
px_cli_test(demo_comm_out "\n== allreduce\n.*\ndfx demo-out-test/allreduce\n.*\ndfx demo-out-test/tp_mlp\n\
.*\nPASS\nexit status 0\n$" "" demo --cores 1 --out demo-out-test)
list(APPEND px_comm_cli_tests cli.demo_comm_out)

set_tests_properties(unit.test_comm_examples ${px_comm_cli_tests} PROPERTIES RESOURCE_LOCK chips)
