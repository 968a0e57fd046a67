/*
 * test_l3_misuse.c - the level-3 API used from the wrong place or with bad arguments (issue 8
 * items 3, 4 and 10).
 *
 * - A host task calling px_submit_next_level gets PX_ESTATE (it used to succeed, touching the
 *   orchestration's state from a host core thread).
 * - A chip kernel run by core 0 on the chip's main thread (the thread of the chip's own
 *   px_run) calling px_submit, px_scope_begin or px_tensor_alloc on the chip's orchestration
 *   gets PX_ESTATE: the kernel is not the orchestration although it shares its thread.
 * - px_submit_host with NULL args is PX_EINVAL, as px_submit_next_level is; so is every other
 *   NULL pointer of the level-3 submits.
 * - A malformed tensor given to a level-3 submit is refused with a message that has its
 *   prefix once ("px_submit_next_level argument 0 (in): tensor ndim 7 ...").
 * Forks chip processes: ctest runs it under RESOURCE_LOCK chips.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static px_kernel_id k_noop, k_meddle;
static px_callable_id c_meddle;
static px_orch *g_chip_orch; /* in a chip process: the orchestration of its current call */
static px_orch *g_host_orch; /* in the parent: the level-3 orchestration */

static px_status noop_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    return PX_OK;
}

/* Runs on a chip's core 0: every orchestration call must refuse it. */
static px_status meddle_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    int64_t n = 4;
    px_task_args a;
    px_tensor t;
    px_status st[3];

    px_args_init(&a);
    st[0] = px_submit(g_chip_orch, k_noop, &a, NULL);
    st[1] = px_scope_begin(g_chip_orch);
    st[2] = px_tensor_alloc(g_chip_orch, PX_F32, 1, &n, &t);
    for (int i = 0; i < 3; i++)
        if (st[i] != PX_ESTATE)
            return px_set_error(PX_EKERNEL, "orchestration call %d from a chip kernel returned "
                                "%s, not PX_ESTATE", i, px_status_name(st[i]));
    return PX_OK;
}

static px_status meddle_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;

    g_chip_orch = o;
    px_args_init(&a);
    return px_submit(o, k_meddle, &a, NULL);
}

/* A host task trying to submit: must be refused. */
static px_status meddle_host(const px_task_args *args, void *user)
{
    px_task_args a;
    px_status st;

    px_args_init(&a);
    st = px_submit_next_level(g_host_orch, c_meddle, &a, 0, NULL);
    if (st != PX_ESTATE)
        return px_set_error(PX_EKERNEL, "px_submit_next_level from a host task returned %s, "
                            "not PX_ESTATE", px_status_name(st));
    return PX_OK;
}

typedef struct l3m_result {
    px_status host_null_st, next_bad_st, group_bad_st;
    px_status null_st[4]; /* next-level NULL args, group NULL per_chip / chips, host NULL fn */
    char next_bad_msg[512], group_bad_msg[512];
} l3m_result;

static px_status l3m_orch(px_orch *o, const px_task_args *args, void *user)
{
    l3m_result *r = user;
    px_task_args a, per[2], empty;
    px_tensor bad = *px_arg_tensor(args, 0);
    int chips[2] = {0, 1};
    px_status st;

    g_host_orch = o;
    px_args_init(&empty);
    r->host_null_st = px_submit_host(o, meddle_host, NULL, NULL, NULL);
    r->null_st[0] = px_submit_next_level(o, c_meddle, NULL, 0, NULL);
    r->null_st[1] = px_submit_group(o, c_meddle, NULL, chips, 1, NULL);
    r->null_st[2] = px_submit_group(o, c_meddle, &empty, NULL, 1, NULL);
    r->null_st[3] = px_submit_host(o, NULL, &empty, NULL, NULL);
    bad.ndim = 7;
    px_args_init(&a);
    px_args_in(&a, &bad);
    r->next_bad_st = px_submit_next_level(o, c_meddle, &a, 0, NULL);
    snprintf(r->next_bad_msg, sizeof(r->next_bad_msg), "%s", px_last_error());
    px_args_init(&per[0]);
    px_args_init(&per[1]);
    px_args_in(&per[1], &bad);
    r->group_bad_st = px_submit_group(o, c_meddle, per, chips, 2, NULL);
    snprintf(r->group_bad_msg, sizeof(r->group_bad_msg), "%s", px_last_error());
    if ((st = px_submit_next_level(o, c_meddle, &empty, 0, NULL)) != PX_OK)
        return st;
    return px_submit_host(o, meddle_host, &empty, NULL, NULL);
}

static void test_l3_wrong_places(void **state)
{
    px_config c;
    px_worker *w = NULL;
    float x[4] = {0};
    int64_t n = 4;
    px_tensor t;
    px_task_args a;
    l3m_result r;

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "noop", noop_kernel, NULL, &k_noop));
    PX_ASSERT_OK(px_kernel_register(w, "meddle", meddle_kernel, NULL, &k_meddle));
    PX_ASSERT_OK(px_callable_register(w, "meddle", meddle_callable, &c_meddle));
    PX_ASSERT_OK(px_worker_init(w));
    PX_ASSERT_OK(px_tensor_make(&t, x, PX_F32, 1, &n));
    px_args_init(&a);
    px_args_in(&a, &t);
    memset(&r, 0, sizeof(r));
    PX_ASSERT_OK(px_run(w, l3m_orch, &a, &r)); /* the chip kernel and the host task agree */
    assert_int_equal(r.host_null_st, PX_EINVAL);
    for (int i = 0; i < 4; i++)
        assert_int_equal(r.null_st[i], PX_EINVAL);
    assert_int_equal(r.next_bad_st, PX_EINVAL);
    assert_string_equal(r.next_bad_msg, "px_submit_next_level argument 0 (in): tensor ndim 7 is "
                        "out of range: expected 1..5");
    assert_int_equal(r.group_bad_st, PX_EINVAL);
    assert_string_equal(r.group_bad_msg, "px_submit_group (chip 1) argument 0 (in): tensor ndim "
                        "7 is out of range: expected 1..5");
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_l3_wrong_places),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
