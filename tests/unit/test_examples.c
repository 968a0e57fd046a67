/*
 * test_examples.c - the example programs, run through the example table as the CLI runs them.
 *
 * Every expected task and edge count below is worked out by hand in the comment next to it
 * (vector: 5 tasks and 6 edges per iteration; matmul: T^3 tasks and T^2*(T-1) edges with
 * T = ceil(N / tile)), never read back from the runtime or from the example's own check.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "examples.h"

/* Runs example `name` on configuration c; returns its result, asserting it ran. */
static px_example_result run_example_with(const px_config *c, const char *name, int64_t size,
                                          int iters, int64_t tile)
{
    const px_example *ex = px_example_find(name);
    px_example_opts o = {.size = size, .iters = iters, .tile = tile};
    px_example_result r;

    assert_non_null(ex);
    PX_ASSERT_OK(px_example_exec(ex, c, &o, &r));
    if (!r.check_ok)
        print_error("%s check: %s\n", name, r.check);
    return r;
}

/* Runs example `name` on a test configuration with `cores` cores. */
static px_example_result run_example(const char *name, int cores, int64_t size, int iters,
                                     int64_t tile)
{
    px_config c;

    px_test_config(&c, cores);
    return run_example_with(&c, name, size, iters, tile);
}

/* The table lists vector then matmul, finds them by name, and knows no "nosuch". */
static void test_table_order_and_lookup(void **state)
{
    assert_non_null(px_examples[0]);
    assert_non_null(px_examples[1]);
    assert_string_equal(px_examples[0]->name, "vector");
    assert_string_equal(px_examples[1]->name, "matmul");
    assert_ptr_equal(px_example_find("matmul"), px_examples[1]);
    assert_null(px_example_find("nosuch"));
    assert_null(px_example_find(NULL));
}

/* vector on one core: 1 iteration gives 5 tasks and 6 edges; 3 give 15 and 18. */
static void test_vector_one_core(void **state)
{
    px_example_result r = run_example("vector", 1, 1000, 1, 0);

    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 5);
    assert_int_equal(r.edges, 6);
    assert_int_equal(r.cores, 1);

    r = run_example("vector", 1, 1000, 3, 0);
    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 15); /* 5 x 3 */
    assert_int_equal(r.edges, 18); /* 6 x 3 */
}

/* vector on two cores, 4 iterations of 4096 floats: 20 tasks, 24 edges, one px_run. */
static void test_vector_two_cores(void **state)
{
    px_example_result r = run_example("vector", 2, 4096, 4, 0);

    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 20); /* 5 x 4 */
    assert_int_equal(r.edges, 24); /* 6 x 4 */
    assert_int_equal(r.cores, 2);
    assert_int_equal(r.runs, 1);
    assert_int_equal(r.size, 4096);
    assert_int_equal(r.iters, 4);
}

/* vector with size 0 and iters 0 takes the defaults: 16384 floats, 1 iteration. */
static void test_vector_defaults(void **state)
{
    px_example_result r = run_example("vector", 2, 0, 0, 0);

    assert_true(r.check_ok);
    assert_int_equal(r.size, 16384);
    assert_int_equal(r.iters, 1);
    assert_int_equal(r.tasks, 5);
    assert_int_equal(r.edges, 6);
}

/*
 * vector with a 1 MiB heap ring: each iteration holds 4 x 16384 floats = 256 KiB, so later
 * iterations reuse the memory of earlier ones. Reused bytes must not add edges: 50
 * iterations still give 5 x 50 = 250 tasks and 6 x 50 = 300 edges.
 */
static void test_vector_heap_reuse(void **state)
{
    px_example_result r;
    px_config c;

    px_test_config(&c, 2);
    c.heap_ring = 1ull << 20;
    r = run_example_with(&c, "vector", 16384, 50, 0);
    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 250);
    assert_int_equal(r.edges, 300);
}

/* matmul N=128, tile 32 (a multiple): T=4, 4^3 = 64 tasks, 4^2 x 3 = 48 edges. */
static void test_matmul_tile_multiple(void **state)
{
    px_example_result r = run_example("matmul", 2, 128, 1, 32);

    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 64);
    assert_int_equal(r.edges, 48);
}

/* matmul N=100, tile 32 (not a multiple; edge tiles are 4 wide): T=4, 64 tasks, 48 edges. */
static void test_matmul_tile_remainder(void **state)
{
    px_example_result r = run_example("matmul", 2, 100, 1, 32);

    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 64);
    assert_int_equal(r.edges, 48);

    r = run_example("matmul", 1, 70, 1, 32); /* T=3: 27 tasks, 3^2 x 2 = 18 edges */
    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 27);
    assert_int_equal(r.edges, 18);
}

/* matmul N=64, tile 32, 2 iterations: T=2, 2 x 8 = 16 tasks, chains of 4: 4 x 3 = 12 edges. */
static void test_matmul_iterations(void **state)
{
    px_example_result r = run_example("matmul", 2, 64, 2, 32);

    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 16);
    assert_int_equal(r.edges, 12);
}

/* The check fails when the counts differ from the hand-worked ones (one task too many). */
static void test_check_rejects_wrong_counts(void **state)
{
    const px_example *ex = px_example_find("vector");
    px_example_opts o = {.size = 256, .iters = 1};
    px_example_result r = {0};
    char why[PX_EXAMPLE_WHY_MAX];
    px_worker *w = NULL;
    void *st = NULL;
    px_config c;

    px_test_config(&c, 1);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(ex->reg(w, &o, &st));
    PX_ASSERT_OK(ex->run(w, st, &r));
    assert_int_equal(ex->check(st, &r, why, sizeof(why)), 1);
    r.tasks += 1;
    assert_int_equal(ex->check(st, &r, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "counts differ"));
    ex->fini(st);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* Sizes out of range are refused with PX_EINVAL before any task runs. */
static void test_bad_sizes_refused(void **state)
{
    px_example_opts neg = {.size = -5};
    px_example_opts huge = {.size = 100000};
    px_example_result r;
    px_config c;

    px_test_config(&c, 1);
    assert_int_equal(px_example_exec(px_example_find("vector"), &c, &neg, &r), PX_EINVAL);
    assert_int_equal(px_example_exec(px_example_find("matmul"), &c, &huge, &r), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "matmul"));
    assert_int_equal(r.tasks, 0);
}

/*
 * A size whose four temporaries (one scope) exceed the heap ring runs when the user left
 * PLEXUS_HEAP_RING unset (the driver raises the ring and the arena), and is refused before the
 * run, naming the knob and the bytes needed, when the user set it. 100000 floats: a 400000-byte
 * tensor (6250 cache lines), 4 of them = 1600000 bytes > the 1 MiB ring.
 */
static void test_vector_sizes_memory_from_request(void **state)
{
    const px_example *ex = px_example_find("vector");
    px_example_opts o = {.size = 100000, .iters = 1};
    px_example_result r;
    px_config c;

    unsetenv("PLEXUS_HEAP_RING");
    px_test_config(&c, 2);
    c.heap_ring = 1ull << 20;
    c.device_mem = 4ull << 20;
    PX_ASSERT_OK(px_example_exec(ex, &c, &o, &r));
    assert_true(r.check_ok);
    assert_int_equal(r.tasks, 5);

    setenv("PLEXUS_HEAP_RING", "1M", 1);
    assert_int_equal(px_example_exec(ex, &c, &o, &r), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "PLEXUS_HEAP_RING >= 2097152"));
    unsetenv("PLEXUS_HEAP_RING");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_order_and_lookup),
        cmocka_unit_test(test_vector_one_core),
        cmocka_unit_test(test_vector_two_cores),
        cmocka_unit_test(test_vector_defaults),
        cmocka_unit_test(test_vector_heap_reuse),
        cmocka_unit_test(test_vector_sizes_memory_from_request),
        cmocka_unit_test(test_matmul_tile_multiple),
        cmocka_unit_test(test_matmul_tile_remainder),
        cmocka_unit_test(test_matmul_iterations),
        cmocka_unit_test(test_check_rejects_wrong_counts),
        cmocka_unit_test(test_bad_sizes_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
