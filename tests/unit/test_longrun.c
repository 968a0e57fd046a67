/*
 * test_longrun.c - what a long run keeps: state must grow with the tasks in flight and the
 * program's distinct views, never with the allocations made since the run began.
 *
 * The vector example's shape (a scope per iteration, temporaries from the heap ring, one new
 * output row per iteration) once made the tensor map keep an entry for every temporary ever
 * allocated until the ring wrapped, so inserting an output row moved all of them and long runs
 * slowed down superlinearly. Here the orchestration looks at the map (internal state) after
 * every iteration: its entries may be the output rows written so far plus one per live
 * heap-ring allocation, and no more. Results are checked too.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/heap.h"
#include "runtime/runtime.h"
#include "runtime/tensormap.h"

#define LR_ITERS 20000

static px_kernel_id g_make, g_use;

/* OUT tmp = i (arg 1). */
static px_status lr_make(px_core_ctx *ctx, const px_task_args *a)
{
    *(int64_t *)px_arg_data(a, 0) = (int64_t)px_arg_u64(a, 1);
    return PX_OK;
}

/* IN tmp, OUT row = 2 tmp + 1. */
static px_status lr_use(px_core_ctx *ctx, const px_task_args *a)
{
    *(int64_t *)px_arg_data(a, 1) = 2 * *(const int64_t *)px_arg_data(a, 0) + 1;
    return PX_OK;
}

typedef struct lr_state {
    uint32_t worst_excess; /* most entries above rows + live allocations seen */
    uint32_t worst_at;     /* the iteration where it was seen */
} lr_state;

/* One iteration: scope, temporary, two tasks, row i; then the bound on the map's size. */
static px_status lr_iteration(px_orch *o, const px_tensor *out, int64_t i, lr_state *s)
{
    const int64_t one[1] = {1};
    px_tensor tmp, row;
    px_task_args a;
    px_status st = px_scope_begin(o);
    uint32_t entries, bound;

    if (st == PX_OK)
        st = px_tensor_alloc(o, PX_I64, 1, one, &tmp);
    if (st == PX_OK)
        st = px_tensor_view(out, 1, one, NULL, i, &row);
    if (st == PX_OK) {
        px_args_init(&a);
        px_args_out(&a, &tmp);
        px_args_scalar_u64(&a, (uint64_t)i);
        st = px_submit(o, g_make, &a, NULL);
    }
    if (st == PX_OK) {
        px_args_init(&a);
        px_args_in(&a, &tmp);
        px_args_out(&a, &row);
        st = px_submit(o, g_use, &a, NULL);
    }
    if (st == PX_OK)
        st = px_scope_end(o);
    entries = px_tmap_size(&o->w->tmap);
    bound = (uint32_t)(i + 1) + px_heap_live_records(&o->w->heap);
    if (entries > bound && entries - bound > s->worst_excess) {
        s->worst_excess = entries - bound;
        s->worst_at = (uint32_t)i;
    }
    return st;
}

static px_status lr_orch(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *out = px_arg_tensor(args, 0);
    px_status st = PX_OK;

    for (int64_t i = 0; i < LR_ITERS && st == PX_OK; i++)
        st = lr_iteration(o, out, i, user);
    return st;
}

/* A long scoped run keeps map entries for rows and live allocations only; results right. */
static void test_map_forgets_freed_heap_memory(void **state)
{
    px_config cfg;
    px_worker *w;
    px_tensor host;
    px_task_args args;
    const int64_t shape[1] = {LR_ITERS};
    int64_t *out = calloc(LR_ITERS, sizeof(*out));
    lr_state s = {0, 0};
    px_run_stats rs;

    assert_non_null(out);
    px_test_config(&cfg, 2);
    PX_ASSERT_OK(px_worker_create(&cfg, &w));
    PX_ASSERT_OK(px_kernel_register(w, "lr.make", lr_make, NULL, &g_make));
    PX_ASSERT_OK(px_kernel_register(w, "lr.use", lr_use, NULL, &g_use));
    PX_ASSERT_OK(px_tensor_make(&host, out, PX_I64, 1, shape));
    px_args_init(&args);
    px_args_out(&args, &host);
    PX_ASSERT_OK(px_run(w, lr_orch, &args, &s));
    if (s.worst_excess != 0)
        print_error("iteration %u: the map held %u entries more than the rows written plus "
                    "the live heap allocations\n", s.worst_at, s.worst_excess);
    assert_int_equal(s.worst_excess, 0);
    for (int64_t i = 0; i < LR_ITERS; i++)
        assert_int_equal(out[i], 2 * i + 1);
    PX_ASSERT_OK(px_run_stats_get(w, &rs));
    assert_int_equal(rs.tasks, 2 * LR_ITERS);
    assert_int_equal(rs.edges, LR_ITERS); /* use reads make's temporary; rows are distinct */
    PX_ASSERT_OK(px_worker_destroy(w));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_forgets_freed_heap_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
