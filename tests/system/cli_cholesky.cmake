# cli_cholesky.cmake - `plexus run cholesky` at small sizes (included by tests/CMakeLists.txt
# after cli.cmake, whose px_cli_test it uses). Counts by hand (examples/cholesky.c), with
# T = ceil(N / NB): tasks T + T(T-1) + C(T,3), edges (T-1)(2T-1) + 2 C(T,3) + C(T-1,3):
#   T = 1: 1, 0   T = 3: 10, 12   T = 4: 20, 30   T = 5: 35, 60   T = 7: 84, 168
# N in {1, 7, 300}, NB dividing N and not, f32 and f64, level 2 and level 3 on 2, 3 and 4
# chips (1 x 2, 1 x 3, 2 x 2 grids);
# the indefinite matrix FAILs naming the tile, the step and the row. A few seconds in all.

set(px_chol_pass "scaled residual [0-9.e+-]+ < 16[^\n]*\nPASS\nexit status 0\n$")

# px_chol_test(NAME TASKS EDGES ARG...): run cholesky ARG... must PASS with these counts.
function(px_chol_test name tasks edges)
  px_cli_test(cholesky_${name} "\ntasks ${tasks}\nedges ${edges}\n.*${px_chol_pass}" ""
              run cholesky ${ARGN})
endfunction()

# level 2: views of the row-major matrix
px_chol_test(l2_n1_f64 1 0 --size 1 --tile 1 --cores 2)
px_chol_test(l2_n7_divides_f32 1 0 --size 7 --tile 7 --dtype f32 --cores 2)
px_chol_test(l2_n7_remainder_f64 20 30 --size 7 --tile 2 --cores 2)
px_chol_test(l2_n300_divides_f32 10 12 --size 300 --tile 100 --dtype f32 --cores 2)
px_chol_test(l2_n300_remainder_f64 35 60 --size 300 --tile 64 --dtype f64 --cores 2)

# level 3: next-level tasks on the owner of the tile written, tiles 2-D block-cyclic
px_chol_test(l3_2chips_n1_f32 1 0 --size 1 --tile 2 --dtype f32 --chips 2 --cores 1)
px_chol_test(l3_2chips_n7_remainder_f32 10 12 --size 7 --tile 3 --dtype f32 --chips 2 --cores 1)
px_chol_test(l3_2chips_n300_divides_f64 35 60 --size 300 --tile 60 --chips 2 --cores 1)
px_chol_test(l3_3chips_n7_divides_f64 84 168 --size 7 --tile 1 --chips 3 --cores 1)
px_chol_test(l3_3chips_n300_remainder_f32 35 60 --size 300 --tile 64 --dtype f32 --chips 3
             --cores 1)
# 4 chips: a 2 x 2 grid, so the owner depends on the tile's row too
px_chol_test(l3_4chips_grid_n300_remainder_f64 35 60 --size 300 --tile 64 --chips 4 --cores 1)
px_cli_test(cholesky_l3_4chips_grid_line "\nlevel3 grid 2x2 [^\n]*\n.*PASS\nexit status 0\n$" ""
            run cholesky --size 100 --tile 30 --chips 4 --cores 1)
# the bytes line: N = 1 on 2 chips copies the one element in and back, the minimum
px_cli_test(cholesky_l3_bytes
            "\nbytes_copied 16 \\(host heap <-> chips\\), minimum 16, factor 1.00\n.*PASS\nexit status 0\n$"
            "" run cholesky --size 1 --tile 1 --chips 2 --cores 1)

# not positive definite: FAIL naming the tile, the step and the row, at both levels
px_cli_test(cholesky_indefinite_l2
            "^FAIL: cholesky: [^\n]*cholesky.potrf_f64[^\n]*not positive definite: POTRF of diagonal tile \\(2,2\\) at step 2 [^\n]*\\(matrix row 150\\)\nexit status 1\n$"
            "" run cholesky --size 300 --tile 64 --indefinite 150 --cores 2)
px_cli_test(cholesky_indefinite_l3
            "^FAIL: cholesky: [^\n]*chip 0 [^\n]*cholesky.potrf_f32[^\n]*not positive definite: POTRF of diagonal tile \\(0,0\\) at step 0 [^\n]*\\(matrix row 0\\)\nexit status 1\n$"
            "" run cholesky --size 7 --tile 3 --dtype f32 --indefinite 0 --chips 3 --cores 1)

# mistakes are refused before anything runs
px_cli_test(cholesky_indefinite_out_of_range
            "^FAIL: cholesky: PX_EINVAL: cholesky: --indefinite 300 is not a row of the matrix; use 0..299\nexit status 1\n$"
            "" run cholesky --size 300 --indefinite 300)
px_cli_test(cholesky_bad_dtype
            "^FAIL: cholesky: PX_EINVAL: cholesky: dtype \"i32\" is not supported; use f32 or f64\nexit status 1\n$"
            "" run cholesky --dtype i32)
px_cli_test(cholesky_indefinite_elsewhere
            "^FAIL: option --indefinite does not apply to example matmul \\(only cholesky takes it\\)\nexit status 1\n$"
            "" run matmul --indefinite 3)

set_tests_properties(cli.cholesky_l3_2chips_n1_f32 cli.cholesky_l3_2chips_n7_remainder_f32
                     cli.cholesky_l3_2chips_n300_divides_f64 cli.cholesky_l3_3chips_n7_divides_f64
                     cli.cholesky_l3_3chips_n300_remainder_f32 cli.cholesky_l3_bytes
                     cli.cholesky_l3_4chips_grid_n300_remainder_f64
                     cli.cholesky_l3_4chips_grid_line
                     cli.cholesky_indefinite_l3
                     PROPERTIES RESOURCE_LOCK chips LABELS cholesky)
set_tests_properties(cli.cholesky_l2_n1_f64 cli.cholesky_l2_n7_divides_f32
                     cli.cholesky_l2_n7_remainder_f64 cli.cholesky_l2_n300_divides_f32
                     cli.cholesky_l2_n300_remainder_f64 cli.cholesky_indefinite_l2
                     cli.cholesky_indefinite_out_of_range cli.cholesky_bad_dtype
                     cli.cholesky_indefinite_elsewhere
                     PROPERTIES LABELS cholesky)
