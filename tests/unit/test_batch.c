/*
 * test_batch.c - px_submit_batch: many tasks of described arguments in one call.
 *
 * The "step" kernel takes an INOUT i64 counter, the value the counter must hold when the task
 * runs (u64) and a weight (f64); it counts a violation when the counter differs (a missing or
 * wrong edge), adds 1 and records the task id it ran for. Chains of such tasks over a few
 * counters, with the counter picked per task through an index array, check that every task
 * of a batch is a real task with its dependencies inferred from its bytes: the counters end
 * at their chain lengths, no violation, px_run_stats' edges equal to the graph's. The other
 * tests cover a constant argument (step 0), explicit deps, a bad task in the middle (the
 * earlier tasks stay submitted and run), zero tasks and the descriptions refused before any
 * task is submitted (PX_EINVAL, nothing submitted).
 */
#include "testutil.h"

#include <stdatomic.h>
#include <string.h>

#define BATCH_ROWS 4
#define BATCH_PAD 8 /* int64 per counter: one cache line each */
#define BATCH_TASKS 1000

static px_kernel_id g_step;
static _Atomic int64_t g_runs, g_violations;
static _Atomic double g_weights;
static px_task_id g_ran[BATCH_TASKS];

/* step: arg 0 INOUT i64 counter, arg 1 u64 expected value, arg 2 f64 weight (summed). */
static px_status step_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *x = px_arg_data(a, 0);
    int64_t r = atomic_fetch_add(&g_runs, 1);
    double w = atomic_load(&g_weights);

    if ((uint64_t)*x != px_arg_u64(a, 1))
        atomic_fetch_add(&g_violations, 1);
    (*x)++;
    while (!atomic_compare_exchange_weak(&g_weights, &w, w + px_arg_f64(a, 2)))
        ;
    if (r < BATCH_TASKS)
        g_ran[r] = px_core_task_id(ctx);
    return PX_OK;
}

/* What a test's orchestration is given and what it reports back. */
typedef struct batch_case {
    int64_t n;         /* tasks in the batch */
    int64_t bad_at;    /* -1, or the task whose index entry is out of its table */
    int host_at;       /* -1, or the counter table entry replaced by a host tensor */
    px_status st;      /* px_submit_batch's status */
    int64_t submitted; /* its *submitted */
    px_task_id ids[BATCH_TASKS];
    px_task_id first;  /* the id of a task submitted before the batch */
    char msg[512];     /* px_last_error() after the batch */
} batch_case;

static px_worker *batch_worker(void)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 2);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "step", step_kernel, NULL, &g_step));
    atomic_store(&g_runs, 0);
    atomic_store(&g_violations, 0);
    atomic_store(&g_weights, 0.0);
    return w;
}

/* Runs fn (with user) over the counters block (BATCH_ROWS counters, zeroed); s: its stats. */
static void batch_run(px_orch_fn fn, void *user, int64_t *block, px_run_stats *s)
{
    px_worker *w = batch_worker();
    int64_t shape[1] = {BATCH_ROWS * BATCH_PAD};
    px_tensor t;
    px_task_args a;

    memset(block, 0, BATCH_ROWS * BATCH_PAD * sizeof(*block));
    PX_ASSERT_OK(px_tensor_make(&t, block, PX_I64, 1, shape));
    px_args_init(&a);
    px_args_inout(&a, &t);
    PX_ASSERT_OK(px_run(w, fn, &a, user));
    PX_ASSERT_OK(px_run_stats_get(w, s));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* The counters of the run's block as a table of 1-element views. */
static void batch_rows(const px_task_args *args, px_tensor *rows)
{
    int64_t one[1] = {1};

    for (int j = 0; j < BATCH_ROWS; j++)
        PX_ASSERT_OK(px_tensor_view(px_arg_tensor(args, 0), 1, one, NULL,
                                    (int64_t)j * BATCH_PAD, &rows[j]));
}

/*
 * The chain batch: task i increments counter i % ROWS (picked through an index array), expects
 * i / ROWS there (a u64 column, one entry per task) and adds a weight of 0.5 (one f64 for
 * every task, step 0). bad_at and host_at break one task in the middle.
 */
static px_status orch_chain(px_orch *o, const px_task_args *args, void *user)
{
    static int64_t index[BATCH_TASKS];
    static uint64_t expect[BATCH_TASKS];
    static int64_t host_counter;
    batch_case *bc = user;
    px_tensor rows[BATCH_ROWS + 1];
    int64_t one[1] = {1};
    double weight = 0.5;

    batch_rows(args, rows);
    PX_ASSERT_OK(px_tensor_make(&rows[BATCH_ROWS], &host_counter, PX_I64, 1, one));
    for (int64_t i = 0; i < bc->n; i++) {
        index[i] = i % BATCH_ROWS;
        expect[i] = (uint64_t)(i / BATCH_ROWS);
    }
    if (bc->bad_at >= 0)
        index[bc->bad_at] = BATCH_ROWS + 5;
    if (bc->host_at >= 0)
        index[bc->host_at] = BATCH_ROWS; /* a host tensor: the argument check refuses it */
    px_batch_arg b[3] = {
        {.tag = PX_TAG_INOUT, .count = BATCH_ROWS + 1, .index = index, .tensors = rows},
        {.tag = PX_TAG_SCALAR, .scalar_kind = PX_SCALAR_U64, .count = bc->n, .step = 1,
         .values = expect},
        {.tag = PX_TAG_SCALAR, .scalar_kind = PX_SCALAR_F64, .count = 1, .values = &weight},
    };
    memset(bc->ids, 0xff, sizeof(bc->ids));
    bc->st = px_submit_batch(o, g_step, b, 3, NULL, 0, bc->n, bc->ids, &bc->submitted);
    snprintf(bc->msg, sizeof(bc->msg), "%s", px_last_error());
    return PX_OK;
}

/* Good path: 1000 tasks in 4 chains; ids consecutive; 996 edges; counters at 250. */
static void test_chain_batch(void **state)
{
    static batch_case bc = {.n = BATCH_TASKS, .bad_at = -1, .host_at = -1};
    int64_t block[BATCH_ROWS * BATCH_PAD];
    px_run_stats s;

    (void)state;
    batch_run(orch_chain, &bc, block, &s);
    PX_ASSERT_OK(bc.st);
    assert_int_equal(bc.submitted, BATCH_TASKS);
    for (int64_t i = 1; i < BATCH_TASKS; i++)
        assert_int_equal(bc.ids[i], bc.ids[0] + (px_task_id)i);
    assert_int_equal(s.tasks, BATCH_TASKS);
    assert_int_equal(s.edges, BATCH_TASKS - BATCH_ROWS);
    assert_int_equal(atomic_load(&g_runs), BATCH_TASKS);
    assert_int_equal(atomic_load(&g_violations), 0);
    assert_true(atomic_load(&g_weights) == 0.5 * BATCH_TASKS);
    for (int j = 0; j < BATCH_ROWS; j++)
        assert_int_equal(block[j * BATCH_PAD], BATCH_TASKS / BATCH_ROWS);
    /* every task ran for one of the ids the batch returned */
    for (int64_t r = 0; r < BATCH_TASKS; r++)
        assert_true(g_ran[r] >= bc.ids[0] && g_ran[r] < bc.ids[0] + BATCH_TASKS);
}

/* A bad index at task 7 and a host tensor at task 9: the tasks before stay submitted and run. */
static void test_bad_task_in_the_middle(void **state)
{
    static batch_case bad = {.n = 20, .bad_at = 7, .host_at = -1};
    static batch_case host = {.n = 20, .bad_at = -1, .host_at = 9};
    int64_t block[BATCH_ROWS * BATCH_PAD];
    px_run_stats s;

    (void)state;
    batch_run(orch_chain, &bad, block, &s);
    assert_int_equal(bad.st, PX_EINVAL);
    assert_int_equal(bad.submitted, 7);
    assert_non_null(strstr(bad.msg, "px_submit_batch: task 7 of 20"));
    assert_non_null(strstr(bad.msg, "entry 9 of a table of 5"));
    for (int64_t i = 1; i < 7; i++)
        assert_int_equal(bad.ids[i], bad.ids[0] + (px_task_id)i);
    assert_int_equal(bad.ids[7], UINT64_MAX); /* not written */
    assert_int_equal(s.tasks, 7);
    assert_int_equal(atomic_load(&g_runs), 7);
    assert_int_equal(atomic_load(&g_violations), 0);

    batch_run(orch_chain, &host, block, &s);
    assert_int_equal(host.st, PX_EINVAL);
    assert_int_equal(host.submitted, 9);
    assert_non_null(strstr(host.msg, "px_submit_batch: task 9 of 20"));
    assert_non_null(strstr(host.msg, "device memory"));
    assert_int_equal(s.tasks, 9);
    assert_int_equal(atomic_load(&g_runs), 9);
    assert_int_equal(block[0], 3); /* tasks 0, 4, 8 */
}

/* Refusals before any task, and zero tasks; counts what was not refused in *user. */
static px_status orch_refusals(px_orch *o, const px_task_args *args, void *user)
{
    int *failures = user;
    px_tensor rows[BATCH_ROWS], noaddr;
    int64_t one[1] = {1}, sub = -1;
    uint64_t v[2] = {0, 0};
    px_task_id ids[4];
    px_batch_arg ok[2] = {
        {.tag = PX_TAG_INOUT, .count = 1, .tensors = rows},
        {.tag = PX_TAG_SCALAR, .scalar_kind = PX_SCALAR_U64, .count = 1, .values = v},
    };
    px_batch_arg b[2];

    batch_rows(args, rows);
    PX_ASSERT_OK(px_tensor_make(&noaddr, NULL, PX_I64, 1, one));
#define BATCH_REFUSED(expr)                                                                \
    do {                                                                                   \
        sub = -1;                                                                          \
        if ((expr) != PX_EINVAL || sub != 0)                                               \
            (*failures)++, print_error("not refused: %s (%s)\n", #expr, px_last_error());  \
    } while (0)
    BATCH_REFUSED(px_submit_batch(o, g_step, NULL, 2, NULL, 0, 4, ids, &sub));
    BATCH_REFUSED(px_submit_batch(o, g_step, ok, 2, NULL, 0, -1, ids, &sub));
    BATCH_REFUSED(px_submit_batch(o, g_step, ok, PX_MAX_ARGS + 1, NULL, 0, 4, ids, &sub));
    BATCH_REFUSED(px_submit_batch(o, 999, ok, 2, NULL, 0, 4, ids, &sub));
    memcpy(b, ok, sizeof(b));
    b[0].tag = 42;
    BATCH_REFUSED(px_submit_batch(o, g_step, b, 2, NULL, 0, 4, ids, &sub));
    memcpy(b, ok, sizeof(b));
    b[1].scalar_kind = 9;
    BATCH_REFUSED(px_submit_batch(o, g_step, b, 2, NULL, 0, 4, ids, &sub));
    memcpy(b, ok, sizeof(b));
    b[0].tensors = NULL;
    BATCH_REFUSED(px_submit_batch(o, g_step, b, 2, NULL, 0, 4, ids, &sub));
    memcpy(b, ok, sizeof(b));
    b[1].values = NULL;
    BATCH_REFUSED(px_submit_batch(o, g_step, b, 2, NULL, 0, 4, ids, &sub));
    memcpy(b, ok, sizeof(b));
    b[1].step = 1; /* task 3 would take entry 3 of a table of 1 */
    BATCH_REFUSED(px_submit_batch(o, g_step, b, 2, NULL, 0, 4, ids, &sub));
    memcpy(b, ok, sizeof(b));
    b[0].count = 0;
    BATCH_REFUSED(px_submit_batch(o, g_step, b, 2, NULL, 0, 4, ids, &sub));
    memcpy(b, ok, sizeof(b));
    b[0].tag = PX_TAG_OUT;
    b[0].tensors = &noaddr;
    BATCH_REFUSED(px_submit_batch(o, g_step, b, 2, NULL, 0, 4, ids, &sub));
    /* NULL handle: PX_EINVAL as for px_submit */
    BATCH_REFUSED(px_submit_batch(NULL, g_step, ok, 2, NULL, 0, 4, ids, &sub));
    /* zero tasks: nothing submitted, PX_OK, even with no argument table */
    sub = -1;
    if (px_submit_batch(o, g_step, NULL, 0, NULL, 0, 0, NULL, &sub) != PX_OK || sub != 0)
        (*failures)++, print_error("zero tasks: %s\n", px_last_error());
    if (px_submit_batch(o, g_step, ok, 2, NULL, 0, 0, ids, NULL) != PX_OK)
        (*failures)++, print_error("zero tasks with args: %s\n", px_last_error());
#undef BATCH_REFUSED
    return PX_OK;
}

/* Bad descriptions are PX_EINVAL with nothing submitted; zero tasks are PX_OK. */
static void test_refusals_and_zero_tasks(void **state)
{
    int64_t block[BATCH_ROWS * BATCH_PAD];
    px_run_stats s;
    int failures = 0;

    (void)state;
    batch_run(orch_refusals, &failures, block, &s);
    assert_int_equal(failures, 0);
    assert_int_equal(s.tasks, 0);
    assert_int_equal(atomic_load(&g_runs), 0);
}

/*
 * Explicit deps and a constant tensor: one task increments counter 0 (id d), then a batch of
 * 8 tasks, each after d, increments counter 1 (step 0: the same tensor for all: a chain of
 * 8). Edges: 7 along the chain, 8 to d. Then a batch whose dep is not an earlier task fails
 * at task 0 and submits nothing.
 */
static px_status orch_deps(px_orch *o, const px_task_args *args, void *user)
{
    batch_case *bc = user;
    px_tensor rows[BATCH_ROWS];
    uint64_t zero = 0, expect[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    double weight = 1.0;
    px_task_args a;
    px_task_id d, later;

    batch_rows(args, rows);
    px_args_init(&a);
    px_args_inout(&a, &rows[0]);
    px_args_scalar_u64(&a, zero);
    px_args_scalar_f64(&a, weight);
    PX_ASSERT_OK(px_submit(o, g_step, &a, &d));
    bc->first = d;
    px_batch_arg b[3] = {
        {.tag = PX_TAG_INOUT, .count = 1, .tensors = &rows[1]},
        {.tag = PX_TAG_SCALAR, .scalar_kind = PX_SCALAR_U64, .count = 8, .step = 1,
         .values = expect},
        {.tag = PX_TAG_SCALAR, .scalar_kind = PX_SCALAR_F64, .count = 1, .values = &weight},
    };
    bc->st = px_submit_batch(o, g_step, b, 3, &d, 1, 8, bc->ids, &bc->submitted);
    later = bc->ids[7] + 1000;
    if (px_submit_batch(o, g_step, b, 3, &later, 1, 8, NULL, &bc->n) == PX_EINVAL)
        snprintf(bc->msg, sizeof(bc->msg), "%s", px_last_error());
    return PX_OK;
}

static void test_explicit_deps(void **state)
{
    static batch_case bc = {.bad_at = -1, .host_at = -1};
    int64_t block[BATCH_ROWS * BATCH_PAD];
    px_run_stats s;

    (void)state;
    batch_run(orch_deps, &bc, block, &s);
    PX_ASSERT_OK(bc.st);
    assert_int_equal(bc.submitted, 8);
    assert_int_equal(bc.ids[0], bc.first + 1);
    assert_int_equal(bc.n, 0); /* the second batch's *submitted */
    assert_non_null(strstr(bc.msg, "px_submit_batch: task 0 of 8"));
    assert_non_null(strstr(bc.msg, "not an earlier task"));
    assert_int_equal(s.tasks, 9);
    assert_int_equal(s.edges, 7 + 8);
    assert_int_equal(atomic_load(&g_violations), 0);
    assert_int_equal(block[0], 1);
    assert_int_equal(block[BATCH_PAD], 8);
    /* d ran before every task of the batch */
    assert_int_equal(g_ran[0], bc.first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_batch),
        cmocka_unit_test(test_bad_task_in_the_middle),
        cmocka_unit_test(test_refusals_and_zero_tasks),
        cmocka_unit_test(test_explicit_deps),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
