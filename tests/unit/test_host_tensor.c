/*
 * test_host_tensor.c - px_tensor_host: tensors over host memory the caller owns, read and
 * written in place by a run's tasks (no copy), observed through the public API.
 *
 * Covers: a kernel sees the caller's own address and its writes land in the caller's buffer
 * while the run is still going (no copy-back); dependencies between tasks on host tensors and
 * on views inside them are inferred from the bytes; the registration ends with the run (a task
 * of the next run naming the same bytes without registering them is refused); registering the
 * same bytes again adds nothing; the limit of PX_HOST_RANGES_MAX ranges; the refusals: NULL,
 * an empty shape, device memory, outside an orchestration, a level-3 worker, and a profile
 * without ordinary-page host mapping (host64k), each with its reason.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static px_kernel_id g_add, g_seen;
static void *g_seen_addr;

/* add: arg 0 INOUT i64 tensor, arg 1 i64 scalar: every element += the scalar. */
static px_status add_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    int64_t *p = px_arg_data(args, 0);
    int64_t n = px_arg_numel(args, 0), v = px_arg_i64(args, 1);

    (void)ctx;
    for (int64_t i = 0; i < n; i++)
        p[i] += v;
    return PX_OK;
}

/* seen: arg 0 IN tensor: records the address the kernel was given. */
static px_status seen_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    (void)ctx;
    g_seen_addr = px_arg_data(args, 0);
    return PX_OK;
}

static px_worker *host_worker(const char *profile)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 2);
    if (profile != NULL)
        snprintf(c.device_profile, sizeof(c.device_profile), "%s", profile);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "add", add_kernel, NULL, &g_add));
    PX_ASSERT_OK(px_kernel_register(w, "seen", seen_kernel, NULL, &g_seen));
    return w;
}

static px_status submit_add(px_orch *o, const px_tensor *t, int64_t v)
{
    px_task_args a;

    px_args_init(&a);
    px_args_inout(&a, t);
    px_args_scalar_i64(&a, v);
    return px_submit(o, g_add, &a, NULL);
}

typedef struct host_case {
    int64_t *buf;
    int64_t n;
    px_status st; /* what the call under test returned */
    char msg[512];
} host_case;

/* 100 adds on the whole buffer (through two tensors over the same bytes) and 10 on a view of
 * its second half, then a kernel that records its address: the adds on one element are
 * ordered only by the dependencies inferred from the host bytes. */
static px_status inplace_orch(px_orch *o, const px_task_args *args, void *user)
{
    host_case *hc = user;
    int64_t half = hc->n / 2;
    px_tensor t, v, again;
    px_task_args a;
    px_status st;

    (void)args;
    if ((st = px_tensor_host(o, hc->buf, PX_I64, 1, &hc->n, &t)) != PX_OK)
        return st;
    /* the same bytes again, and a view inside them: nothing new registered */
    if ((st = px_tensor_host(o, hc->buf, PX_I64, 1, &hc->n, &again)) != PX_OK ||
        (st = px_tensor_host(o, hc->buf + half, PX_I64, 1, &half, &v)) != PX_OK)
        return st;
    for (int i = 0; i < 100; i++)
        if ((st = submit_add(o, i % 2 ? &t : &again, 1)) != PX_OK)
            return st;
    for (int i = 0; i < 10; i++)
        if ((st = submit_add(o, &v, 1000)) != PX_OK)
            return st;
    px_args_init(&a);
    px_args_in(&a, &t);
    return px_submit(o, g_seen, &a, NULL);
}

static void test_in_place(void **state)
{
    enum { N = 1000 };
    static int64_t buf[N];
    px_worker *w = host_worker(NULL);
    host_case hc = {.buf = buf, .n = N};

    (void)state;
    for (int i = 0; i < N; i++)
        buf[i] = i;
    g_seen_addr = NULL;
    PX_ASSERT_OK(px_run(w, inplace_orch, NULL, &hc));
    assert_ptr_equal(g_seen_addr, buf); /* the kernel read the caller's memory itself */
    for (int i = 0; i < N; i++)
        assert_int_equal(buf[i], i + 100 + (i >= N / 2 ? 10000 : 0));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* The registration ends with the run: a tensor made by px_tensor_make over the same bytes
 * in the next run is refused as not device memory. */
static px_status unregistered_orch(px_orch *o, const px_task_args *args, void *user)
{
    host_case *hc = user;
    px_tensor t;

    (void)args;
    PX_ASSERT_OK(px_tensor_make(&t, hc->buf, PX_I64, 1, &hc->n));
    hc->st = submit_add(o, &t, 1);
    snprintf(hc->msg, sizeof(hc->msg), "%s", px_last_error());
    return PX_OK;
}

static void test_ends_with_the_run(void **state)
{
    int64_t buf[16] = {0}, n = 16;
    px_worker *w = host_worker(NULL);
    host_case hc = {.buf = buf, .n = n};

    (void)state;
    PX_ASSERT_OK(px_run(w, inplace_orch, NULL, &hc));
    PX_ASSERT_OK(px_run(w, unregistered_orch, NULL, &hc));
    assert_int_equal(hc.st, PX_EINVAL);
    assert_non_null(strstr(hc.msg, "are not device memory"));
    for (int i = 0; i < 16; i++) /* nothing ran on the refused submit */
        assert_int_equal(buf[i], 100 + (i >= 8 ? 10000 : 0));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* PX_HOST_RANGES_MAX distinct ranges register; the next one is PX_ENOMEM naming the limit; a
 * range inside a registered one still works. */
static px_status limit_orch(px_orch *o, const px_task_args *args, void *user)
{
    host_case *hc = user;
    int64_t one = 1;
    px_tensor t;
    px_status st;

    (void)args;
    for (int i = 0; i < PX_HOST_RANGES_MAX; i++)
        if ((st = px_tensor_host(o, hc->buf + 2 * i, PX_I64, 1, &one, &t)) != PX_OK)
            return st;
    hc->st = px_tensor_host(o, hc->buf + 2 * PX_HOST_RANGES_MAX, PX_I64, 1, &one, &t);
    snprintf(hc->msg, sizeof(hc->msg), "%s", px_last_error());
    if ((st = px_tensor_host(o, hc->buf + 2, PX_I64, 1, &one, &t)) != PX_OK)
        return st;
    return submit_add(o, &t, 5);
}

static void test_range_limit(void **state)
{
    int64_t buf[2 * PX_HOST_RANGES_MAX + 2] = {0};
    px_worker *w = host_worker(NULL);
    host_case hc = {.buf = buf};

    (void)state;
    PX_ASSERT_OK(px_run(w, limit_orch, NULL, &hc));
    assert_int_equal(hc.st, PX_ENOMEM);
    assert_non_null(strstr(hc.msg, "PX_HOST_RANGES_MAX"));
    assert_int_equal(buf[2], 5);
    /* the next run starts with none registered */
    memset(&hc, 0, sizeof(hc));
    hc.buf = buf;
    PX_ASSERT_OK(px_run(w, limit_orch, NULL, &hc));
    assert_int_equal(hc.st, PX_ENOMEM);
    assert_int_equal(buf[2], 10);
    PX_ASSERT_OK(px_worker_destroy(w));
}

typedef struct refusal {
    px_status null_addr, null_t, empty, device, wrap;
    char device_msg[512];
} refusal;

static px_status refusal_orch(px_orch *o, const px_task_args *args, void *user)
{
    refusal *r = user;
    int64_t buf[4], n = 4, zero = 0;
    px_tensor t, d;

    (void)args;
    r->null_addr = px_tensor_host(o, NULL, PX_I64, 1, &n, &t);
    r->null_t = px_tensor_host(o, buf, PX_I64, 1, &n, NULL);
    r->empty = px_tensor_host(o, buf, PX_I64, 1, &zero, &t);
    r->wrap = px_tensor_host(o, (void *)(UINTPTR_MAX - 15), PX_I64, 1, &n, &t);
    PX_ASSERT_OK(px_tensor_alloc(o, PX_I64, 1, &n, &d));
    r->device = px_tensor_host(o, px_tensor_data(&d), PX_I64, 1, &n, &t);
    snprintf(r->device_msg, sizeof(r->device_msg), "%s", px_last_error());
    return PX_OK;
}

static void test_refusals(void **state)
{
    px_worker *w = host_worker(NULL);
    int64_t buf[4], n = 4;
    px_tensor t;
    refusal r;

    (void)state;
    assert_int_equal(px_tensor_host(NULL, buf, PX_I64, 1, &n, &t), PX_EINVAL);
    memset(&r, 0, sizeof(r));
    PX_ASSERT_OK(px_run(w, refusal_orch, NULL, &r));
    assert_int_equal(r.null_addr, PX_EINVAL);
    assert_int_equal(r.null_t, PX_EINVAL);
    assert_int_equal(r.empty, PX_EINVAL);
    assert_int_equal(r.wrap, PX_EINVAL);
    assert_int_equal(r.device, PX_EINVAL);
    assert_non_null(strstr(r.device_msg, "is device memory"));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* Records what px_tensor_host answers for the case's buffer. */
static px_status try_host_orch(px_orch *o, const px_task_args *args, void *user)
{
    host_case *hc = user;
    px_tensor t;

    (void)args;
    hc->st = px_tensor_host(o, hc->buf, PX_I64, 1, &hc->n, &t);
    snprintf(hc->msg, sizeof(hc->msg), "%s", px_last_error());
    return PX_OK;
}

/* host64k: device pages of 64 KiB on a host of smaller pages: no ordinary-page mapping, so
 * no registration (the reason names the profile); the caller copies. */
static void test_profile_without_host_mapping(void **state)
{
    int64_t buf[4] = {0};
    px_worker *w;
    host_case hc = {.buf = buf, .n = 4};

    (void)state;
    if (sysconf(_SC_PAGESIZE) >= 65536)
        px_test_skip("the host's pages are 64 KiB already: host64k maps here");
    w = host_worker("host64k");
    PX_ASSERT_OK(px_run(w, try_host_orch, NULL, &hc));
    assert_int_equal(hc.st, PX_ENOTSUP);
    assert_non_null(strstr(hc.msg, "host64k"));
    assert_non_null(strstr(hc.msg, "registering host memory"));
    PX_ASSERT_OK(px_worker_destroy(w));
}

static void test_level3_refused(void **state)
{
    int64_t buf[4] = {0};
    px_config c;
    px_worker *w = NULL;
    host_case hc = {.buf = buf, .n = 4};

    (void)state;
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    PX_ASSERT_OK(px_run(w, try_host_orch, NULL, &hc));
    assert_int_equal(hc.st, PX_ENOTSUP);
    assert_non_null(strstr(hc.msg, "level-3"));
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_ends_with_the_run),
        cmocka_unit_test(test_range_limit),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_profile_without_host_mapping),
        cmocka_unit_test(test_level3_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
