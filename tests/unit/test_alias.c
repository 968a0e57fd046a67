/*
 * test_alias.c - an input and an output of ONE task that overlap (issue 38).
 *
 * A kernel that reads x[0:40] and writes x[8:48] reads elements it has already overwritten:
 * the result depends on its loop order (scale gave x[16:20] = 0, 4, 8, 12 where numpy's
 * x[8:48] = 2 * x[0:40] gives 16, 18, 20, 22) and the submit succeeded. Such a task is now
 * refused with PX_EINVAL naming both arguments, at level 2 on device memory, on host memory
 * used in place (px_tensor_host), through px_submit_batch, and at level 3 (a host task's
 * tensors in the host heap). What stays allowed: exactly the same bytes as input and output
 * (the element-wise in-place update; also a dense reshape of them), strided views whose
 * elements never meet (even and odd elements), NO_DEP tensors, and px_run's own args (copied
 * in and out as merged ranges).
 * Forks chip processes (the level-3 case): ctest runs it under RESOURCE_LOCK chips.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static px_kernel_id k_scale;

/* y = 2 * x over the elements in row-major order (f32, any shape, any strides). */
static px_status scale_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const px_tensor *x = px_arg_tensor(args, 0), *y = px_arg_tensor(args, 1);
    int64_t n = px_tensor_numel(x);

    (void)ctx;
    for (int64_t i = 0; i < n; i++) {
        float *src = (float *)x->addr + x->offset + i * x->stride[x->ndim - 1];
        float *dst = (float *)y->addr + y->offset + i * y->stride[y->ndim - 1];

        *dst = 2.0f * *src; /* 1-D strided or contiguous N-D: one step per element */
    }
    return PX_OK;
}

typedef struct alias_result {
    px_status partial, partial_inout, same, reshape, evens_odds, nodep, host, host_same, batch;
    char msg[512], host_msg[512], batch_msg[512];
} alias_result;

static px_status submit2(px_orch *o, int tin, const px_tensor *x, int tout, const px_tensor *y)
{
    px_task_args a;

    px_args_init(&a);
    if (tin == PX_TAG_INOUT)
        px_args_inout(&a, x);
    else if (tin == PX_TAG_NO_DEP)
        px_args_no_dep(&a, x);
    else
        px_args_in(&a, x);
    if (tout == PX_TAG_NO_DEP)
        px_args_no_dep(&a, y);
    else
        px_args_out(&a, y);
    return px_submit(o, k_scale, &a, NULL);
}

static px_status alias_orch(px_orch *o, const px_task_args *args, void *user)
{
    alias_result *r = user;
    int64_t n64 = 64, n40 = 40, n32 = 32, two = 2, sq[2] = {8, 8};
    px_tensor x, lo, hi, x2, ev, od, xn, nlo, nhi;
    static float host[64];
    px_tensor h, hlo, hhi;

    (void)args;
    PX_ASSERT_OK(px_tensor_alloc(o, PX_F32, 1, &n64, &x));
    PX_ASSERT_OK(px_tensor_view(&x, 1, &n40, NULL, 0, &lo));
    PX_ASSERT_OK(px_tensor_view(&x, 1, &n40, NULL, 8, &hi));
    r->partial = submit2(o, PX_TAG_IN, &lo, PX_TAG_OUT, &hi);
    snprintf(r->msg, sizeof(r->msg), "%s", px_last_error());
    r->partial_inout = submit2(o, PX_TAG_INOUT, &hi, PX_TAG_OUT, &lo);
    r->same = submit2(o, PX_TAG_IN, &x, PX_TAG_OUT, &x);
    PX_ASSERT_OK(px_tensor_view(&x, 2, sq, NULL, 0, &x2));
    r->reshape = submit2(o, PX_TAG_IN, &x, PX_TAG_OUT, &x2);
    PX_ASSERT_OK(px_tensor_view(&x, 1, &n32, &two, 0, &ev));
    PX_ASSERT_OK(px_tensor_view(&x, 1, &n32, &two, 1, &od));
    r->evens_odds = submit2(o, PX_TAG_IN, &ev, PX_TAG_OUT, &od);
    /* NO_DEP: overlapping views of a tensor of their own (the task has no edges, so on x it
     * would race the tasks above, a defect of the test that TSan reports) */
    PX_ASSERT_OK(px_tensor_alloc(o, PX_F32, 1, &n64, &xn));
    PX_ASSERT_OK(px_tensor_view(&xn, 1, &n40, NULL, 0, &nlo));
    PX_ASSERT_OK(px_tensor_view(&xn, 1, &n40, NULL, 8, &nhi));
    r->nodep = submit2(o, PX_TAG_NO_DEP, &nlo, PX_TAG_NO_DEP, &nhi);

    /* host memory in place, where the profile maps it */
    if (px_tensor_host(o, host, PX_F32, 1, &n64, &h) == PX_OK) {
        PX_ASSERT_OK(px_tensor_view(&h, 1, &n40, NULL, 0, &hlo));
        PX_ASSERT_OK(px_tensor_view(&h, 1, &n40, NULL, 8, &hhi));
        r->host = submit2(o, PX_TAG_IN, &hlo, PX_TAG_OUT, &hhi);
        snprintf(r->host_msg, sizeof(r->host_msg), "%s", px_last_error());
        r->host_same = submit2(o, PX_TAG_IN, &hlo, PX_TAG_OUT, &hlo);
    } else {
        r->host = PX_EINVAL; /* not reachable here: nothing to check */
        snprintf(r->host_msg, sizeof(r->host_msg), "argument 0 argument 1 (skipped)");
    }

    /* a batch: task 1 overlaps, task 0 does not */
    {
        px_tensor ins[2] = {lo, lo}, outs[2] = {lo, hi};
        int64_t idx[2] = {0, 1};
        px_batch_arg b[2];
        px_task_id ids[2];
        int64_t done = -1;

        memset(b, 0, sizeof(b));
        b[0].tag = PX_TAG_IN;
        b[0].tensors = ins;
        b[0].count = 1;
        b[1].tag = PX_TAG_OUT;
        b[1].tensors = outs;
        b[1].count = 2;
        b[1].index = idx;
        b[1].step = 1;
        r->batch = px_submit_batch(o, k_scale, b, 2, NULL, 0, 2, ids, &done);
        snprintf(r->batch_msg, sizeof(r->batch_msg), "%s (done %lld)", px_last_error(),
                 (long long)done);
    }
    return PX_OK;
}

static void test_level2(void **state)
{
    px_config c;
    px_worker *w = NULL;
    alias_result r;

    (void)state;
    px_test_config(&c, 2);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "scale", scale_kernel, NULL, &k_scale));
    memset(&r, 0, sizeof(r));
    PX_ASSERT_OK(px_run(w, alias_orch, NULL, &r));
    assert_int_equal(r.partial, PX_EINVAL);
    assert_non_null(strstr(r.msg, "kernel \"scale\": input argument 0 (in, bytes"));
    assert_non_null(strstr(r.msg, "output argument 1 (out"));
    assert_non_null(strstr(r.msg, "exactly the same view"));
    assert_int_equal(r.partial_inout, PX_EINVAL);
    assert_int_equal(r.same, PX_OK);
    assert_int_equal(r.reshape, PX_OK);
    assert_int_equal(r.evens_odds, PX_OK);
    assert_int_equal(r.nodep, PX_OK);
    assert_int_equal(r.host, PX_EINVAL);
    assert_non_null(strstr(r.host_msg, "argument 0"));
    assert_non_null(strstr(r.host_msg, "argument 1"));
    assert_int_equal(r.host_same, PX_OK);
    assert_int_equal(r.batch, PX_EINVAL);
    assert_non_null(strstr(r.batch_msg, "output argument 1"));
    assert_non_null(strstr(r.batch_msg, "(done 1)"));
    px_worker_destroy(w);
}

/* px_run's args: copied in and out as merged ranges, so overlapping ones are fine. */
static px_status run_args_orch(px_orch *o, const px_task_args *args, void *user)
{
    (void)user;
    return submit2(o, PX_TAG_IN, px_arg_tensor(args, 0), PX_TAG_OUT, px_arg_tensor(args, 0));
}

static void test_run_args_may_overlap(void **state)
{
    px_config c;
    px_worker *w = NULL;
    float x[64];
    int64_t n40 = 40;
    px_tensor lo, hi;
    px_task_args a;

    (void)state;
    for (int i = 0; i < 64; i++)
        x[i] = (float)i;
    px_test_config(&c, 1);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "scale", scale_kernel, NULL, &k_scale));
    PX_ASSERT_OK(px_tensor_make(&lo, x, PX_F32, 1, &n40));
    PX_ASSERT_OK(px_tensor_make(&hi, x + 8, PX_F32, 1, &n40));
    px_args_init(&a);
    px_args_inout(&a, &lo);
    px_args_inout(&a, &hi);
    PX_ASSERT_OK(px_run(w, run_args_orch, &a, NULL));
    assert_true(x[0] == 0.0f && x[1] == 2.0f && x[39] == 78.0f && x[47] == 47.0f);
    px_worker_destroy(w);
}

/* ---- level 3: a host task's tensors in the host heap ---- */

static px_status host_fn(const px_task_args *args, void *user)
{
    (void)args;
    (void)user;
    return PX_OK;
}

typedef struct l3_result {
    px_status partial, same;
    char msg[512];
} l3_result;

static px_status l3_orch(px_orch *o, const px_task_args *args, void *user)
{
    l3_result *r = user;
    int64_t n64 = 64, n40 = 40;
    px_tensor x, lo, hi;
    px_task_args a;

    (void)args;
    PX_ASSERT_OK(px_tensor_alloc(o, PX_F32, 1, &n64, &x));
    PX_ASSERT_OK(px_tensor_view(&x, 1, &n40, NULL, 0, &lo));
    PX_ASSERT_OK(px_tensor_view(&x, 1, &n40, NULL, 8, &hi));
    px_args_init(&a);
    px_args_in(&a, &lo);
    px_args_out(&a, &hi);
    r->partial = px_submit_host(o, host_fn, &a, NULL, NULL);
    snprintf(r->msg, sizeof(r->msg), "%s", px_last_error());
    px_args_init(&a);
    px_args_in(&a, &lo);
    px_args_out(&a, &lo);
    r->same = px_submit_host(o, host_fn, &a, NULL, NULL);
    return PX_OK;
}

static void test_level3(void **state)
{
    px_config c;
    px_worker *w = NULL;
    l3_result r;

    (void)state;
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 1;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    memset(&r, 0, sizeof(r));
    PX_ASSERT_OK(px_run(w, l3_orch, NULL, &r));
    assert_int_equal(r.partial, PX_EINVAL);
    assert_non_null(strstr(r.msg, "px_submit_host: input argument 0 (in"));
    assert_non_null(strstr(r.msg, "output argument 1 (out"));
    assert_int_equal(r.same, PX_OK);
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_level2),
        cmocka_unit_test(test_run_args_may_overlap),
        cmocka_unit_test(test_level3),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
