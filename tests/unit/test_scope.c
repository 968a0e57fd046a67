/*
 * test_scope.c - scopes and the memory they own, observed through the public API.
 *
 * Covers px_tensor_alloc inside a scope, the rule that an ended scope's memory is reused only
 * after the tasks using it have finished (observed through addresses while a gated task still
 * holds a buffer), OUT arguments without an address (allocated by the runtime and written back
 * into the args), nested scopes, px_scope_end without a begin, and a one-million-task loop in
 * one scope. Slow tasks wait on an atomic gate with a deadline; nothing sleeps.
 */
#include "testutil.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define SCOPE_GATE_S 10.0

static px_kernel_id g_fill, g_sum, g_hold, g_inc;

/* State of the "hold" kernel: its gate, whether it finished, whether its buffer stayed intact. */
static _Atomic int g_hold_open, g_hold_done, g_hold_intact;

/* fill: arg 0 i64 value, arg 1 i32 tensor (contiguous) set to value. */
static px_status fill_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    int32_t *p = px_arg_data(args, 1);
    int64_t n = px_arg_numel(args, 1);
    int32_t v = (int32_t)px_arg_i64(args, 0);

    for (int64_t i = 0; i < n; i++)
        p[i] = v;
    return PX_OK;
}

/* sum: arg 0 IN i32 tensor (contiguous), arg 1 OUT i64 tensor: element 0 = sum of arg 0. */
static px_status sum_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const int32_t *p = px_arg_data(args, 0);
    int64_t n = px_arg_numel(args, 0), s = 0;

    for (int64_t i = 0; i < n; i++)
        s += p[i];
    *(int64_t *)px_arg_data(args, 1) = s;
    return PX_OK;
}

/*
 * hold: arg 0 INOUT i32 tensor. Fills it with 7, waits for g_hold_open, then checks that it
 * still holds 7 everywhere (no one else was given the same memory) into g_hold_intact.
 */
static px_status hold_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    int32_t *p = px_arg_data(args, 0);
    int64_t n = px_arg_numel(args, 0);
    int intact = 1;

    for (int64_t i = 0; i < n; i++)
        p[i] = 7;
    if (px_test_wait_flag(&g_hold_open, SCOPE_GATE_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "hold: gate not opened within %g s", SCOPE_GATE_S);
    for (int64_t i = 0; i < n; i++)
        intact &= p[i] == 7;
    atomic_store(&g_hold_intact, intact);
    atomic_store(&g_hold_done, 1);
    return PX_OK;
}

/* inc: arg 0 INOUT i64 tensor: element 0 += 1. */
static px_status inc_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    (*(int64_t *)px_arg_data(args, 0))++;
    return PX_OK;
}

static px_worker *scope_worker(const px_config *c)
{
    px_worker *w = NULL;

    PX_ASSERT_OK(px_worker_create(c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "fill", fill_kernel, NULL, &g_fill));
    PX_ASSERT_OK(px_kernel_register(w, "sum", sum_kernel, NULL, &g_sum));
    PX_ASSERT_OK(px_kernel_register(w, "hold", hold_kernel, NULL, &g_hold));
    PX_ASSERT_OK(px_kernel_register(w, "inc", inc_kernel, NULL, &g_inc));
    atomic_store(&g_hold_open, 0);
    atomic_store(&g_hold_done, 0);
    atomic_store(&g_hold_intact, 0);
    return w;
}

static px_status submit_fill(px_orch *o, const px_tensor *t, int32_t v)
{
    px_task_args a;

    px_args_init(&a);
    px_args_scalar_i64(&a, v);
    px_args_out(&a, t);
    return px_submit(o, g_fill, &a, NULL);
}

static px_status submit_sum(px_orch *o, const px_tensor *src, const px_tensor *dst)
{
    px_task_args a;

    px_args_init(&a);
    px_args_in(&a, src);
    px_args_out(&a, dst);
    return px_submit(o, g_sum, &a, NULL);
}

/* Element i of a 1-D device tensor as a 1-element view. */
static px_status scope_elem(const px_tensor *t, int64_t i, px_tensor *out)
{
    int64_t one[1] = {1};

    return px_tensor_view(t, 1, one, NULL, i, out);
}

static px_status scope_alloc1(px_orch *o, px_dtype dt, int64_t n, px_tensor *t)
{
    int64_t shape[1] = {n};

    memset(t, 0, sizeof(*t));
    return px_tensor_alloc(o, dt, 1, shape, t);
}

/* 1 when the byte ranges of two contiguous tensors intersect. */
static int scope_overlap(const px_tensor *a, const px_tensor *b)
{
    const char *a0 = px_tensor_data(a), *b0 = px_tensor_data(b);
    const char *a1 = a0 + px_tensor_numel(a) * px_dtype_size(a->dtype);
    const char *b1 = b0 + px_tensor_numel(b) * px_dtype_size(b->dtype);

    return a0 < b1 && b0 < a1;
}

/* A 1-D i64 host tensor over buf, every element set to v. */
static px_tensor scope_host64(int64_t *buf, int64_t n, int64_t v)
{
    px_tensor t;
    int64_t shape[1] = {n};

    for (int64_t i = 0; i < n; i++)
        buf[i] = v;
    PX_ASSERT_OK(px_tensor_make(&t, buf, PX_I64, 1, shape));
    return t;
}

/* Runs fn with one i64 host tensor as an INOUT argument. Returns px_run's status. */
static px_status scope_run(px_worker *w, px_orch_fn fn, px_tensor *host, void *user)
{
    px_task_args a;

    px_args_init(&a);
    if (host)
        px_args_inout(&a, host);
    return px_run(w, fn, &a, user);
}

/* ---- px_tensor_alloc in a scope ---- */

typedef struct alloc_seen {
    px_tensor t; /* the tensor px_tensor_alloc returned */
} alloc_seen;

static px_status orch_alloc(px_orch *o, const px_task_args *args, void *user)
{
    alloc_seen *seen = user;
    px_tensor res;
    px_status st;

    if ((st = px_scope_begin(o)) != PX_OK ||
        (st = scope_alloc1(o, PX_I32, 1024, &seen->t)) != PX_OK ||
        (st = scope_elem(px_arg_tensor(args, 0), 0, &res)) != PX_OK ||
        (st = submit_fill(o, &seen->t, 3)) != PX_OK ||
        (st = submit_sum(o, &seen->t, &res)) != PX_OK)
        return st;
    return px_scope_end(o);
}

/*
 * px_tensor_alloc inside a scope returns a contiguous 1-D i32 tensor of 1024 elements with an
 * address; filled with 3 and summed, the result is 3 * 1024 = 3072.
 */
static void test_alloc_in_scope(void **state)
{
    px_config c;
    int64_t out[1];
    px_tensor host = scope_host64(out, 1, -1);
    alloc_seen seen;
    px_worker *w;

    px_test_config(&c, 2);
    w = scope_worker(&c);
    memset(&seen, 0, sizeof(seen));
    PX_ASSERT_OK(scope_run(w, orch_alloc, &host, &seen));
    assert_non_null(seen.t.addr);
    assert_int_equal(seen.t.dtype, PX_I32);
    assert_int_equal(seen.t.ndim, 1);
    assert_int_equal(seen.t.shape[0], 1024);
    assert_int_equal(px_tensor_is_contiguous(&seen.t), 1);
    assert_int_equal(out[0], 3072);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- reuse of an ended scope's memory ---- */

#define REUSE_RING (1u << 20)         /* heap ring bytes */
#define REUSE_CHUNK (REUSE_RING / 16) /* bytes per allocation: 64 KiB */
#define REUSE_WHILE_HELD 8            /* allocations while X is held: 8 + 1 chunks < ring */
#define REUSE_MAX_AFTER 64            /* allocations after: 64 chunks = 4 ring turns */

typedef struct reuse_ctx {
    int overlap_while_held; /* allocations overlapping X while its task ran (expected 0) */
    int reused_at;          /* index of the first allocation after release that reused X */
} reuse_ctx;

static px_status reuse_hold_x(px_orch *o, px_tensor *x)
{
    px_task_args a;
    px_status st;

    if ((st = px_scope_begin(o)) != PX_OK ||
        (st = scope_alloc1(o, PX_I32, REUSE_CHUNK / 4, x)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_inout(&a, x);
    if ((st = px_submit(o, g_hold, &a, NULL)) != PX_OK)
        return st;
    return px_scope_end(o);
}

/* Allocates one chunk in its own scope (filled with 9 when fill is set); *y gets it. */
static px_status reuse_one(px_orch *o, int fill, px_tensor *y)
{
    px_status st;

    if ((st = px_scope_begin(o)) != PX_OK ||
        (st = scope_alloc1(o, PX_I32, REUSE_CHUNK / 4, y)) != PX_OK)
        return st;
    if (fill && (st = submit_fill(o, y, 9)) != PX_OK)
        return st;
    return px_scope_end(o);
}

static px_status orch_reuse(px_orch *o, const px_task_args *args, void *user)
{
    reuse_ctx *rc = user;
    px_tensor x, y;
    px_status st;

    if ((st = reuse_hold_x(o, &x)) != PX_OK)
        return st;
    for (int i = 0; i < REUSE_WHILE_HELD; i++) {
        if ((st = reuse_one(o, 1, &y)) != PX_OK)
            return st;
        rc->overlap_while_held += scope_overlap(&x, &y);
    }
    atomic_store(&g_hold_open, 1);
    if (px_test_wait_flag(&g_hold_done, SCOPE_GATE_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "hold task did not finish");
    for (int i = 0; i < REUSE_MAX_AFTER && rc->reused_at < 0; i++) {
        if ((st = reuse_one(o, 0, &y)) != PX_OK)
            return st;
        if (scope_overlap(&x, &y))
            rc->reused_at = i;
    }
    return PX_OK;
}

/*
 * An ended scope's memory is reused only after its tasks finished. Heap ring 1 MiB, chunks of
 * 64 KiB. Buffer X is allocated in a scope that ends while a task (hold) still uses it. While
 * hold waits on its gate, 8 more chunks are allocated in their own scopes (9 chunks = 576 KiB
 * fit in the ring without reuse) and filled with 9: none overlaps X, and hold finds X still all
 * 7. After the gate opens and hold finished, allocating chunks in their own scopes must reach
 * X's bytes again within 64 allocations (4 turns of the ring).
 */
static void test_scope_reuse_after_tasks(void **state)
{
    px_config c;
    px_worker *w;
    reuse_ctx rc = {0, -1};

    px_test_config(&c, 2);
    c.heap_ring = REUSE_RING;
    c.timeout_s = 20.0 * px_test_slack();
    w = scope_worker(&c);
    PX_ASSERT_OK(scope_run(w, orch_reuse, NULL, &rc));
    assert_int_equal(rc.overlap_while_held, 0);
    assert_int_equal(atomic_load(&g_hold_intact), 1);
    if (rc.reused_at < 0)
        print_error("X was never reused in %d allocations after its task finished\n",
                    REUSE_MAX_AFTER);
    assert_true(rc.reused_at >= 0);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- OUT without an address ---- */

typedef struct out_ctx {
    void *addr;   /* the address written back into the args */
    int32_t ndim; /* and the shape it kept */
    int64_t shape0;
} out_ctx;

static px_status orch_out_noaddr(px_orch *o, const px_task_args *args, void *user)
{
    out_ctx *oc = user;
    px_tensor t, res;
    px_task_args a;
    px_status st;

    memset(&t, 0, sizeof(t));
    t.dtype = PX_I32;
    t.ndim = 1;
    t.shape[0] = 256;
    t.stride[0] = 1;
    if ((st = px_scope_begin(o)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_scalar_i64(&a, 11);
    px_args_out(&a, &t);
    if ((st = px_submit(o, g_fill, &a, NULL)) != PX_OK)
        return st;
    oc->addr = px_arg_tensor(&a, 1)->addr;
    oc->ndim = px_arg_tensor(&a, 1)->ndim;
    oc->shape0 = px_arg_tensor(&a, 1)->shape[0];
    if (oc->addr == NULL)
        return px_set_error(PX_EINVAL, "test: OUT without address was not written back");
    if ((st = scope_elem(px_arg_tensor(args, 0), 0, &res)) != PX_OK ||
        (st = submit_sum(o, px_arg_tensor(&a, 1), &res)) != PX_OK)
        return st;
    return px_scope_end(o);
}

/*
 * An OUT tensor without an address is allocated by the runtime; the address is written back
 * into the args (shape kept: 1-D, 256) and a later task can read it: filled with 11 and
 * summed, 11 * 256 = 2816.
 */
static void test_out_without_address(void **state)
{
    px_config c;
    int64_t out[1];
    px_tensor host = scope_host64(out, 1, -1);
    out_ctx oc;
    px_worker *w;

    px_test_config(&c, 2);
    w = scope_worker(&c);
    memset(&oc, 0, sizeof(oc));
    PX_ASSERT_OK(scope_run(w, orch_out_noaddr, &host, &oc));
    assert_non_null(oc.addr);
    assert_int_equal(oc.ndim, 1);
    assert_int_equal(oc.shape0, 256);
    assert_int_equal(out[0], 2816);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- nested scopes ---- */

typedef struct nest_ctx {
    int a_b_overlap, a_c_overlap;
} nest_ctx;

static px_status orch_nested(px_orch *o, const px_task_args *args, void *user)
{
    nest_ctx *nc = user;
    const px_tensor *out = px_arg_tensor(args, 0);
    px_tensor a, b, cc, r0, r1, r2;
    px_status st;

    if ((st = scope_elem(out, 0, &r0)) != PX_OK || (st = scope_elem(out, 1, &r1)) != PX_OK ||
        (st = scope_elem(out, 2, &r2)) != PX_OK)
        return st;
    if ((st = px_scope_begin(o)) != PX_OK || (st = scope_alloc1(o, PX_I32, 512, &a)) != PX_OK ||
        (st = submit_fill(o, &a, 1)) != PX_OK)
        return st;
    if ((st = px_scope_begin(o)) != PX_OK || (st = scope_alloc1(o, PX_I32, 512, &b)) != PX_OK ||
        (st = submit_fill(o, &b, 2)) != PX_OK || (st = submit_sum(o, &b, &r1)) != PX_OK ||
        (st = px_scope_end(o)) != PX_OK)
        return st;
    if ((st = scope_alloc1(o, PX_I32, 512, &cc)) != PX_OK ||
        (st = submit_fill(o, &cc, 3)) != PX_OK || (st = submit_sum(o, &a, &r0)) != PX_OK ||
        (st = submit_sum(o, &cc, &r2)) != PX_OK)
        return st;
    nc->a_b_overlap = scope_overlap(&a, &b);
    nc->a_c_overlap = scope_overlap(&a, &cc);
    return px_scope_end(o);
}

/*
 * Nested scopes: outer allocates A (fill 1); inner allocates B (fill 2, summed) and ends;
 * outer then allocates C (fill 3) and sums A and C. A is live throughout, so neither B nor C
 * overlaps it. Sums: A 512, B 1024, C 1536.
 */
static void test_nested_scopes(void **state)
{
    px_config c;
    int64_t out[3];
    px_tensor host = scope_host64(out, 3, -1);
    nest_ctx nc = {-1, -1};
    px_worker *w;

    px_test_config(&c, 2);
    w = scope_worker(&c);
    PX_ASSERT_OK(scope_run(w, orch_nested, &host, &nc));
    assert_int_equal(nc.a_b_overlap, 0);
    assert_int_equal(nc.a_c_overlap, 0);
    assert_int_equal(out[0], 512);
    assert_int_equal(out[1], 1024);
    assert_int_equal(out[2], 1536);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- px_scope_end without a begin ---- */

typedef struct end_ctx {
    px_status first, balanced_begin, balanced_end, extra;
    char msg[256];
} end_ctx;

static px_status orch_end_unbalanced(px_orch *o, const px_task_args *args, void *user)
{
    end_ctx *ec = user;

    ec->first = px_scope_end(o);
    snprintf(ec->msg, sizeof(ec->msg), "%s", px_last_error());
    ec->balanced_begin = px_scope_begin(o);
    ec->balanced_end = px_scope_end(o);
    ec->extra = px_scope_end(o);
    return PX_OK;
}

/*
 * px_scope_end with no open scope returns PX_ESTATE with a message, both before any begin and
 * after a balanced begin/end pair; the balanced pair itself succeeds; the run is unharmed.
 */
static void test_scope_end_without_begin(void **state)
{
    px_config c;
    end_ctx ec;
    px_worker *w;

    px_test_config(&c, 2);
    w = scope_worker(&c);
    memset(&ec, 0, sizeof(ec));
    PX_ASSERT_OK(scope_run(w, orch_end_unbalanced, NULL, &ec));
    assert_int_equal(ec.first, PX_ESTATE);
    assert_true(ec.msg[0] != '\0');
    assert_int_equal(ec.balanced_begin, PX_OK);
    assert_int_equal(ec.balanced_end, PX_OK);
    assert_int_equal(ec.extra, PX_ESTATE);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- one million tasks in one scope ---- */

#define MILLION 1000000
#define MILLION_TENSORS 4
#define MILLION_SPACING 8 /* elements between counters: one cache line of i64 */

static px_status orch_million(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *buf = px_arg_tensor(args, 0);
    px_tensor v[MILLION_TENSORS];
    px_task_args a;
    px_status st;

    for (int k = 0; k < MILLION_TENSORS; k++)
        if ((st = scope_elem(buf, (int64_t)k * MILLION_SPACING, &v[k])) != PX_OK)
            return st;
    if ((st = px_scope_begin(o)) != PX_OK)
        return st;
    for (int i = 0; i < MILLION; i++) {
        px_args_init(&a);
        px_args_inout(&a, &v[i % MILLION_TENSORS]);
        if ((st = px_submit(o, g_inc, &a, NULL)) != PX_OK)
            return st;
    }
    return px_scope_end(o);
}

/*
 * 1,000,000 tasks in one scope, INOUT round robin on 4 counters (one per cache line of a
 * 32-element i64 buffer): each counter ends at 1,000,000 / 4 = 250,000, the other elements
 * stay 0. Each counter is a chain of 250,000 INOUT tasks: 249,999 edges each, 999,996 in all.
 * Its time is printed, not checked: task throughput is bench_tasks's to measure.
 */
static void test_million_tasks(void **state)
{
    px_config c;
    int64_t out[MILLION_TENSORS * MILLION_SPACING];
    px_tensor host = scope_host64(out, MILLION_TENSORS * MILLION_SPACING, 0);
    px_run_stats st;
    px_worker *w;
    uint64_t t0;

    px_test_config(&c, 2);
    w = scope_worker(&c);
    t0 = px_test_now_ns();
    PX_ASSERT_OK(scope_run(w, orch_million, &host, NULL));
    print_message("million tasks: %.2f s\n", (double)(px_test_now_ns() - t0) / 1e9);
    for (int i = 0; i < MILLION_TENSORS * MILLION_SPACING; i++)
        assert_int_equal(out[i], i % MILLION_SPACING == 0 ? 250000 : 0);
    PX_ASSERT_OK(px_run_stats_get(w, &st));
    assert_int_equal(st.tasks, 1000000);
    assert_int_equal(st.edges, 999996);
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_in_scope),
        cmocka_unit_test(test_scope_reuse_after_tasks),
        cmocka_unit_test(test_out_without_address),
        cmocka_unit_test(test_nested_scopes),
        cmocka_unit_test(test_scope_end_without_begin),
        cmocka_unit_test(test_million_tasks),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
