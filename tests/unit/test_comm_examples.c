/*
 * test_comm_examples.c - the communication examples (allreduce, moe, tp_mlp) run through the
 * example table on level-3 workers of 1, 2, 3 and 4 chips, as `plexus run` runs them.
 *
 * Checks: each example's own check passes (every rank's result equals the host's) and its
 * task and edge counts equal the ones worked out by hand here, per example (n ranks, K
 * iterations):
 *   allreduce  tasks K (2n + 1)   edges 2n + (K - 1)(4n + e), e = 1 for n > 1, 0 for n = 1
 *   tp_mlp     tasks K (4n + 1)   edges 4n + (K - 1)(8n + 1)
 *   moe        tasks K (2n + 4)   edges 2n + 4 + (K - 1)(4n + 5)
 * (the derivations are in each example's file comment); allreduce with every reduction and
 * element type on 2 chips, and once large enough for reduce-scatter + allgather; bad --op /
 * --dtype values and inexact sizes refused with PX_EINVAL and a sentence naming them, --op
 * refused by moe and tp_mlp; a check fed one task too many fails; the domain line that
 * `plexus run` and `plexus demo` print names the domain and its transport. Multi-process: ctest runs it under RESOURCE_LOCK
 * "chips" (tests/system/comm_examples.cmake).
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "examples.h"

/* Runs example name on n chips with 1 core each; asserts it ran and returns the result. */
static px_example_result ce_run(const char *name, int n, int64_t size, int iters,
                                const char *op, const char *dtype)
{
    const px_example *ex = px_example_find(name);
    px_example_opts o = {.size = size, .iters = iters, .op = op, .dtype = dtype};
    px_example_result r;
    px_config c;

    assert_non_null(ex);
    px_test_config(&c, 1);
    c.chips = n;
    PX_ASSERT_OK(px_example_exec(ex, &c, &o, &r));
    if (!r.check_ok)
        print_error("%s on %d chips: %s\n", name, n, r.check);
    return r;
}

/* The three examples are in the table after multi_chip, and they are level 3. */
static void test_table_rows(void **state)
{
    static const char *const names[] = {"allreduce", "moe", "tp_mlp"};

    for (int i = 0; i < 3; i++) {
        const px_example *ex = px_example_find(names[i]);

        assert_non_null(ex);
        assert_int_equal(ex->level, 3);
    }
    assert_int_equal(px_example_find("allreduce")->reduces, 1);
    assert_int_equal(px_example_find("moe")->reduces, 0);
}

/* allreduce (sum, f32) at 1..4 chips, 3 iterations of 1000 elements. */
static void test_allreduce_chips(void **state)
{
    for (int n = 1; n <= 4; n++) {
        px_example_result r = ce_run("allreduce", n, 1000, 3, NULL, NULL);
        uint64_t e = n > 1;

        assert_true(r.check_ok);
        assert_int_equal(r.tasks, 3 * (2 * n + 1));
        assert_int_equal(r.edges, 2 * n + 2 * (4 * n + e));
        assert_non_null(strstr(r.comm, "domain allreduce:"));
        assert_non_null(strstr(r.comm, "transport direct"));
    }
}

/* Every reduction with every element type on 2 chips, 257 elements (not a multiple of 2). */
static void test_allreduce_ops_dtypes(void **state)
{
    static const char *const ops[] = {"sum", "prod", "min", "max"};
    static const char *const dts[] = {"f32", "f64", "i32", "i64"};

    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++) {
            px_example_result r = ce_run("allreduce", 2, 257, 1, ops[i], dts[j]);

            assert_true(r.check_ok);
            assert_non_null(strstr(r.check, ops[i]));
            assert_non_null(strstr(r.check, dts[j]));
            assert_int_equal(r.tasks, 5);
            assert_int_equal(r.edges, 4);
        }
    }
}

/* tp_mlp at 1..4 chips, 2 iterations of 17 rows. */
static void test_tp_mlp_chips(void **state)
{
    for (int n = 1; n <= 4; n++) {
        px_example_result r = ce_run("tp_mlp", n, 17, 2, NULL, NULL);

        assert_true(r.check_ok);
        assert_int_equal(r.tasks, 2 * (4 * n + 1));
        assert_int_equal(r.edges, 4 * n + (8 * n + 1));
        assert_non_null(strstr(r.comm, "domain tp:"));
    }
}

/* moe at 1..4 chips, 2 iterations of 50 tokens per rank. */
static void test_moe_chips(void **state)
{
    for (int n = 1; n <= 4; n++) {
        px_example_result r = ce_run("moe", n, 50, 2, NULL, NULL);

        assert_true(r.check_ok);
        assert_int_equal(r.tasks, 2 * (2 * n + 4));
        assert_int_equal(r.edges, 2 * n + 4 + (4 * n + 5));
        assert_non_null(strstr(r.comm, "domain moe:"));
    }
}

/* Bad values are refused with PX_EINVAL and a sentence naming the value and the choices. */
static void test_bad_values_refused(void **state)
{
    static const struct {
        const char *op, *dtype;
        int64_t size;
        const char *want;
    } cases[] = {
        {"nosuch", NULL, 16, "--op \"nosuch\" is not a reduction; use sum, prod, min or max"},
        {NULL, "u8", 16, "--dtype \"u8\" is not an element type it reduces"},
        {"sum", "f32", 9000000, "beyond the 16777216 that f32 holds exactly"},
    };
    const px_example *ex = px_example_find("allreduce");
    px_example_result r;
    px_config c;

    px_test_config(&c, 1);
    c.chips = 2;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        px_example_opts o = {.size = cases[i].size, .op = cases[i].op, .dtype = cases[i].dtype};

        assert_int_equal(px_example_exec(ex, &c, &o, &r), PX_EINVAL);
        if (strstr(px_last_error(), cases[i].want) == NULL)
            print_error("case %zu: \"%s\" lacks \"%s\"\n", i, px_last_error(), cases[i].want);
        assert_non_null(strstr(px_last_error(), cases[i].want));
        assert_int_equal(r.tasks, 0);
    }
}

/* moe and tp_mlp take no reduction or element type: refused by the library, not ignored. */
static void test_op_refused_by_non_reducing(void **state)
{
    static const char *const names[] = {"moe", "tp_mlp"};
    px_example_opts o = {.op = "max"};
    px_example_result r;
    px_config c;

    px_test_config(&c, 1);
    c.chips = 2;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(px_example_exec(px_example_find(names[i]), &c, &o, &r), PX_EINVAL);
        assert_non_null(strstr(px_last_error(), "takes no --op or --dtype (got --op max)"));
    }
}

/* A large allreduce (262147 f64 per rank, 2 MiB: reduce-scatter + allgather) on 3 chips. */
static void test_allreduce_large(void **state)
{
    px_example_result r = ce_run("allreduce", 3, 262147, 1, "sum", "f64");

    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 7);
    assert_int_equal(r.edges, 6);
}

/* Each example's check fails when the run's task count is one more than worked out. */
static void test_check_rejects_wrong_counts(void **state)
{
    static const char *const names[] = {"allreduce", "moe", "tp_mlp"};

    for (int i = 0; i < 3; i++) {
        const px_example *ex = px_example_find(names[i]);
        px_example_opts o = {0}, eo;
        px_example_result r = {0};
        char why[PX_EXAMPLE_WHY_MAX];
        px_worker *w = NULL;
        void *st = NULL;
        px_config c;

        px_test_config(&c, 1);
        c.level = 3;
        c.chips = 2;
        px_example_defaults(ex, &o, &eo);
        PX_ASSERT_OK(px_worker_create(&c, &w));
        PX_ASSERT_OK(ex->reg(w, &eo, &st));
        PX_ASSERT_OK(px_worker_init(w));
        PX_ASSERT_OK(ex->run(w, st, &r));
        assert_int_equal(ex->check(st, &r, why, sizeof(why)), 1);
        r.tasks += 1;
        assert_int_equal(ex->check(st, &r, why, sizeof(why)), 0);
        assert_non_null(strstr(why, "counts differ"));
        ex->fini(st);
        PX_ASSERT_OK(px_worker_destroy(w));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_rows),
        cmocka_unit_test(test_allreduce_chips),
        cmocka_unit_test(test_allreduce_ops_dtypes),
        cmocka_unit_test(test_tp_mlp_chips),
        cmocka_unit_test(test_moe_chips),
        cmocka_unit_test(test_bad_values_refused),
        cmocka_unit_test(test_op_refused_by_non_reducing),
        cmocka_unit_test(test_allreduce_large),
        cmocka_unit_test(test_check_rejects_wrong_counts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
