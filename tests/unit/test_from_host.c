/*
 * test_from_host.c - px_tensor_from_host: the runtime decides in place or staged for a host
 * array and copies in and back, the one implementation the Python package uses too.
 *
 * Covers: a strided (non-contiguous) view, a column of a row-major matrix, in place and
 * staged: the kernel sees the array's own address in place and a copy staged, and only the
 * view's elements change; a view inside a staged array is a view of its copy (how says so);
 * an array staged in a scope is copied back when the scope ends and staging its bytes again
 * waits for that copy-back; at level 3 arrays are staged with the reason and copied by host
 * tasks; a host array inside px_run's args is a view of their copy (one version of the
 * bytes per run); the refusals, each with its reason: a read-only array written, an array partly
 * inside a staged one (naming both arguments), two views of one staged array that overlap
 * partially in one task (the submit's rule), negative strides, bad flags.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static px_kernel_id g_add;
static void *g_seen;

/* add: arg 0 INOUT f64 tensor (1-d or 2-d, any strides), arg 1 f64 scalar: += scalar. */
static px_status add_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    double *p = px_tensor_data(t), v = px_arg_f64(args, 1);
    int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->shape[t->ndim - 1];
    int64_t rs = t->ndim == 2 ? t->stride[0] : 0, cs = t->stride[t->ndim - 1];

    (void)ctx;
    g_seen = p;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            p[r * rs + c * cs] += v;
    return PX_OK;
}

static px_worker *worker(void)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 2);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "add", add_kernel, NULL, &g_add));
    return w;
}

static px_status submit_add(px_orch *o, const px_tensor *t, double v)
{
    px_task_args a;

    px_args_init(&a);
    px_args_inout(&a, t);
    px_args_scalar_f64(&a, v);
    return px_submit(o, g_add, &a, NULL);
}

/* An f64 host tensor at base with the given shape and strides (in elements). */
static px_tensor host_view(double *base, int ndim, const int64_t *shape, const int64_t *stride)
{
    px_tensor t;

    memset(&t, 0, sizeof(t));
    t.addr = base;
    t.dtype = PX_F64;
    t.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        t.shape[d] = shape[d];
        t.stride[d] = stride[d];
    }
    return t;
}

typedef struct fh_case {
    double m[8][4];
    int flags;
    int how[3];
    void *col_addr;
    px_status st;
    char msg[1024];
} fh_case;

/* Column 1 of the 8x4 matrix (stride 4) += 1, then rows 2..3 (a view inside the whole) += 10
 * after the whole matrix was used. */
static px_status strided_orch(px_orch *o, const px_task_args *args, void *user)
{
    fh_case *fc = user;
    int64_t cshape[1] = {8}, cstride[1] = {4};
    int64_t wshape[2] = {8, 4}, wstride[2] = {4, 1};
    int64_t rshape[2] = {2, 4};
    px_tensor col = host_view(&fc->m[0][1], 1, cshape, cstride);
    px_tensor whole = host_view(&fc->m[0][0], 2, wshape, wstride);
    px_tensor rows = host_view(&fc->m[2][0], 2, rshape, wstride), t;
    px_status st;

    (void)args;
    fc->col_addr = &fc->m[0][1];
    if ((st = px_tensor_from_host(o, &whole, NULL, PX_TAG_INOUT, fc->flags, "whole", &t,
                                  &fc->how[0])) != PX_OK ||
        (st = submit_add(o, &t, 0.0)) != PX_OK)
        return st;
    if ((st = px_tensor_from_host(o, &col, NULL, PX_TAG_INOUT, fc->flags, "col", &t,
                                  &fc->how[1])) != PX_OK ||
        (st = submit_add(o, &t, 1.0)) != PX_OK)
        return st;
    if ((st = px_tensor_from_host(o, &rows, NULL, PX_TAG_INOUT, fc->flags, "rows", &t,
                                  &fc->how[2])) != PX_OK)
        return st;
    return submit_add(o, &t, 10.0);
}

static void check_strided(int flags, int in_place)
{
    px_worker *w = worker();
    fh_case fc;

    memset(&fc, 0, sizeof(fc));
    fc.flags = flags;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++)
            fc.m[r][c] = r * 4 + c;
    PX_ASSERT_OK(px_run(w, strided_orch, NULL, &fc));
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++)
            assert_true(fc.m[r][c] == r * 4 + c + (c == 1) + 10 * (r == 2 || r == 3));
    if (in_place) {
        assert_int_equal(fc.how[0], PX_HOST_USED_IN_PLACE);
        assert_int_equal(fc.how[1], PX_HOST_USED_IN_PLACE);
    } else {
        assert_int_equal(fc.how[0], PX_HOST_USED_COPY);
        assert_int_equal(fc.how[1], PX_HOST_USED_COPY_VIEW);
        assert_int_equal(fc.how[2], PX_HOST_USED_COPY_VIEW);
    }
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* A non-contiguous view, in place and staged: only its elements change. */
static void test_strided_view(void **state)
{
    (void)state;
    check_strided(PX_HOST_AUTO, 1);
    check_strided(PX_HOST_COPY, 0);
}

/* The column alone, staged: the kernel sees a copy, the copy-back writes only the column. */
static px_status column_orch(px_orch *o, const px_task_args *args, void *user)
{
    fh_case *fc = user;
    int64_t shape[1] = {8}, stride[1] = {4};
    px_tensor col = host_view(&fc->m[0][1], 1, shape, stride), t;
    px_status st;

    (void)args;
    if ((st = px_tensor_from_host(o, &col, NULL, PX_TAG_INOUT, PX_HOST_COPY, "col", &t,
                                  &fc->how[0])) != PX_OK)
        return st;
    return submit_add(o, &t, 1.0);
}

static void test_staged_column_sees_a_copy(void **state)
{
    px_worker *w = worker();
    fh_case fc;

    (void)state;
    memset(&fc, 0, sizeof(fc));
    g_seen = NULL;
    PX_ASSERT_OK(px_run(w, column_orch, NULL, &fc));
    assert_non_null(g_seen);
    assert_ptr_not_equal(g_seen, &fc.m[0][1]);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++)
            assert_true(fc.m[r][c] == (c == 1 ? 1.0 : 0.0));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* x staged in a scope and written; after the scope its copy-back is pending, and staging x
 * again must wait for it (else the new copy reads the old bytes). */
static px_status rescope_orch(px_orch *o, const px_task_args *args, void *user)
{
    fh_case *fc = user;
    int64_t shape[1] = {32}, stride[1] = {1};
    px_tensor x = host_view(&fc->m[0][0], 1, shape, stride), t;
    px_status st;

    (void)args;
    if ((st = px_scope_begin(o)) != PX_OK ||
        (st = px_tensor_from_host(o, &x, NULL, PX_TAG_INOUT, PX_HOST_COPY, "x", &t,
                                  NULL)) != PX_OK)
        return st;
    for (int i = 0; i < 50; i++)
        if ((st = submit_add(o, &t, 1.0)) != PX_OK)
            return st;
    if ((st = px_scope_end(o)) != PX_OK ||
        (st = px_tensor_from_host(o, &x, NULL, PX_TAG_INOUT, PX_HOST_COPY, "x again", &t,
                                  &fc->how[0])) != PX_OK)
        return st;
    return submit_add(o, &t, 100.0);
}

static void test_scope_copy_back_then_again(void **state)
{
    px_worker *w = worker();
    fh_case fc;
    px_run_stats s;

    (void)state;
    memset(&fc, 0, sizeof(fc));
    PX_ASSERT_OK(px_run(w, rescope_orch, NULL, &fc));
    assert_int_equal(fc.how[0], PX_HOST_USED_COPY);
    for (int i = 0; i < 32; i++)
        assert_true(fc.m[i / 4][i % 4] == 150.0);
    PX_ASSERT_OK(px_run_stats_get(w, &s));
    assert_int_equal(s.tasks, 51 + 3); /* two copy-backs and the copy-in after the first */
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* A host array inside px_run's args: a view of their device copy (one version of the bytes),
 * its writes copied back after the drain with the args'. Before, it was used in place while
 * the args' copy-back wrote the old bytes over its results: a lost update with PX_OK. */
static px_status run_arg_orch(px_orch *o, const px_task_args *args, void *user)
{
    fh_case *fc = user;
    const px_tensor *x = px_arg_tensor(args, 0);
    int64_t shape[1] = {8}, stride[1] = {1};
    px_tensor part = host_view(&fc->m[1][0], 1, shape, stride), t;
    px_status st;

    if ((st = submit_add(o, x, 1.0)) != PX_OK ||
        (st = px_tensor_from_host(o, &part, NULL, PX_TAG_INOUT, PX_HOST_AUTO, "part", &t,
                                  &fc->how[0])) != PX_OK)
        return st;
    fc->col_addr = px_tensor_data(&t);
    return submit_add(o, &t, 10.0);
}

static void test_run_args_share_their_copy(void **state)
{
    px_worker *w = worker();
    int64_t shape[1] = {32};
    px_task_args a;
    px_tensor x;
    fh_case fc;

    (void)state;
    memset(&fc, 0, sizeof(fc));
    PX_ASSERT_OK(px_tensor_make(&x, &fc.m[0][0], PX_F64, 1, shape));
    px_args_init(&a);
    px_args_inout(&a, &x);
    PX_ASSERT_OK(px_run(w, run_arg_orch, &a, &fc));
    assert_int_equal(fc.how[0], PX_HOST_USED_COPY_VIEW);
    assert_ptr_not_equal(fc.col_addr, &fc.m[1][0]); /* inside the args' device copy */
    for (int i = 0; i < 32; i++)
        assert_true(fc.m[i / 4][i % 4] == (i >= 4 && i < 12 ? 11.0 : 1.0));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- refusals ---- */

typedef struct refuse_case {
    int which;
    px_status st;
    char msg[1024];
} refuse_case;

static px_status refuse_orch(px_orch *o, const px_task_args *args, void *user)
{
    static double x[64];
    refuse_case *rc = user;
    int64_t n64[1] = {64}, n40[1] = {40}, n8[1] = {8}, one[1] = {1}, back[1] = {-1};
    px_tensor all = host_view(x, 1, n64, one), lo = host_view(x, 1, n40, one);
    px_tensor hi = host_view(x + 8, 1, n40, one), t, u;
    px_task_args a;
    px_status st = PX_OK;

    (void)args;
    switch (rc->which) {
    case 0: /* read-only, written */
        st = px_tensor_from_host(o, &all, NULL, PX_TAG_OUT, PX_HOST_AUTO | PX_HOST_READONLY,
                                 "ro", &t, NULL);
        break;
    case 1: /* partly inside a staged array */
        st = px_tensor_from_host(o, &lo, NULL, PX_TAG_IN, PX_HOST_COPY, "first", &t, NULL);
        if (st == PX_OK)
            st = px_tensor_from_host(o, &hi, NULL, PX_TAG_IN, PX_HOST_COPY, "second", &t,
                                     NULL);
        break;
    case 2: /* two views of one staged array overlapping partially in one task */
        st = px_tensor_from_host(o, &all, NULL, PX_TAG_IN, PX_HOST_COPY, "all", &t, NULL);
        if (st == PX_OK)
            st = px_tensor_from_host(o, &lo, NULL, PX_TAG_IN, PX_HOST_COPY, "lo", &t, NULL);
        if (st == PX_OK)
            st = px_tensor_from_host(o, &hi, NULL, PX_TAG_OUT, PX_HOST_COPY, "hi", &u, NULL);
        if (st == PX_OK) {
            px_args_init(&a);
            px_args_in(&a, &t);
            px_args_out(&a, &u);
            px_args_scalar_f64(&a, 1.0);
            st = px_submit(o, g_add, &a, NULL);
        }
        break;
    case 3: { /* negative strides */
        px_tensor r = host_view(x + 7, 1, n8, back);

        st = px_tensor_from_host(o, &r, NULL, PX_TAG_IN, PX_HOST_AUTO, "rev", &t, NULL);
        break;
    }
    default: /* bad flags */
        st = px_tensor_from_host(o, &all, NULL, PX_TAG_IN, 3, "flags", &t, NULL);
        break;
    }
    rc->st = st;
    snprintf(rc->msg, sizeof(rc->msg), "%s", px_last_error());
    return PX_OK;
}

static void test_refusals(void **state)
{
    static const char *const want[] = {"read-only", "second (bytes", "exactly the same view",
                                       "negative", "flags 0x3"};
    px_worker *w = worker();

    (void)state;
    for (int i = 0; i < 5; i++) {
        refuse_case rc = {.which = i};

        PX_ASSERT_OK(px_run(w, refuse_orch, NULL, &rc));
        assert_int_equal(rc.st, PX_EINVAL);
        if (strstr(rc.msg, want[i]) == NULL)
            fail_msg("case %d: want \"%s\" in: %s", i, want[i], rc.msg);
    }
    { /* "first" is named in case 1's message too */
        refuse_case rc = {.which = 1};

        PX_ASSERT_OK(px_run(w, refuse_orch, NULL, &rc));
        assert_non_null(strstr(rc.msg, "by first"));
    }
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- level 3 ---- */

/* double: arg 0 INOUT 1-d f64 (any stride): *= 2. */
static px_status double_host(const px_task_args *args, void *user)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    double *p = px_tensor_data(t);

    (void)user;
    for (int64_t i = 0; i < t->shape[0]; i++)
        p[i * t->stride[0]] *= 2;
    return PX_OK;
}

static px_status l3_orch(px_orch *o, const px_task_args *args, void *user)
{
    fh_case *fc = user;
    int64_t shape[1] = {8}, stride[1] = {4};
    px_tensor col = host_view(&fc->m[0][1], 1, shape, stride), t;
    px_task_args a;
    const char *why;
    px_status st;

    (void)args;
    if ((st = px_tensor_from_host(o, &col, NULL, PX_TAG_INOUT, PX_HOST_AUTO, "col", &t,
                                  &fc->how[0])) != PX_OK)
        return st;
    why = px_tensor_from_host_reason(o);
    snprintf(fc->msg, sizeof(fc->msg), "%s", why ? why : "(none)");
    px_args_init(&a);
    px_args_inout(&a, &t);
    return px_submit_host(o, double_host, &a, NULL, NULL);
}

static void test_level3_staged_with_reason(void **state)
{
    px_config c;
    px_worker *w = NULL;
    fh_case fc;

    (void)state;
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 1;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    memset(&fc, 0, sizeof(fc));
    for (int r = 0; r < 8; r++)
        for (int k = 0; k < 4; k++)
            fc.m[r][k] = r + 1;
    PX_ASSERT_OK(px_run(w, l3_orch, NULL, &fc));
    assert_int_equal(fc.how[0], PX_HOST_USED_COPY);
    assert_non_null(strstr(fc.msg, "level-3"));
    for (int r = 0; r < 8; r++)
        for (int k = 0; k < 4; k++)
            assert_true(fc.m[r][k] == (r + 1) * (k == 1 ? 2 : 1));
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strided_view),
        cmocka_unit_test(test_staged_column_sees_a_copy),
        cmocka_unit_test(test_scope_copy_back_then_again),
        cmocka_unit_test(test_run_args_share_their_copy),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_level3_staged_with_reason),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
