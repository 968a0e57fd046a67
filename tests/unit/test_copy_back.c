/*
 * test_copy_back.c - px_run writes back only the elements of the views it was given, never
 * the bytes between a strided view's rows.
 *
 * A tile of a row-major matrix shares its rows' other bytes with the neighbouring tiles, which
 * another worker or chip may write while this run lasts (issue 36: two chips factoring tiles
 * of the same rows). Each case hands px_run one strided view of a host buffer as INOUT; a
 * kernel fills the view on the device, and the orchestration, standing in for that other
 * writer, stores a marker into every host byte outside the view. After the run the view holds
 * the kernel's value and every other element still holds the marker: a copy-back of the
 * view's whole span would have put the old values back over the markers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "testutil.h"

#define CB_N 64 /* floats in the host buffer */
#define CB_FILL 1.0f
#define CB_OLD 0.0f
#define CB_MARK 7.0f

static px_kernel_id g_fill;
static float g_buf[CB_N];
static unsigned char g_in_view[CB_N]; /* 1 for the elements of the case's view */

/* Sets every element of tensor 0 (f32, any strides) to CB_FILL. */
static px_status fill_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const px_tensor *t = px_arg_tensor(args, 0);
    int64_t idx[PX_MAX_DIMS] = {0}, n = px_tensor_numel(t);
    float *base = px_tensor_data(t);

    (void)ctx;
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;

        for (int d = 0; d < t->ndim; d++)
            off += idx[d] * t->stride[d];
        base[off] = CB_FILL;
        for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--)
            idx[d] = 0;
    }
    return PX_OK;
}

/* Fills the view on the device, then marks every host element outside it. */
static px_status cb_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;
    px_status st;

    (void)user;
    px_args_init(&a);
    px_args_inout(&a, px_arg_tensor(args, 0));
    if ((st = px_submit(o, g_fill, &a, NULL)) != PX_OK)
        return st;
    for (int i = 0; i < CB_N; i++)
        if (!g_in_view[i])
            g_buf[i] = CB_MARK; /* another writer's bytes, between this view's rows */
    return PX_OK;
}

/* Records which elements of g_buf view v covers. */
static void cb_mark_view(const px_tensor *v)
{
    int64_t idx[PX_MAX_DIMS] = {0}, n = px_tensor_numel(v);

    memset(g_in_view, 0, sizeof(g_in_view));
    for (int64_t e = 0; e < n; e++) {
        int64_t off = v->offset;

        for (int d = 0; d < v->ndim; d++)
            off += idx[d] * v->stride[d];
        assert_true(off >= 0 && off < CB_N);
        g_in_view[off] = 1;
        for (int d = v->ndim - 1; d >= 0 && ++idx[d] == v->shape[d]; d--)
            idx[d] = 0;
    }
}

/* Runs cb_orch with the view of g_buf given by shape/stride/offset as the one INOUT argument
 * and checks every element of g_buf afterwards. */
static void cb_case(int ndim, const int64_t *shape, const int64_t *stride, int64_t offset)
{
    int64_t whole[1] = {CB_N};
    px_tensor base, view;
    px_task_args a;
    px_config c;
    px_worker *w = NULL;

    for (int i = 0; i < CB_N; i++)
        g_buf[i] = CB_OLD;
    PX_ASSERT_OK(px_tensor_make(&base, g_buf, PX_F32, 1, whole));
    PX_ASSERT_OK(px_tensor_view(&base, ndim, shape, stride, offset, &view));
    cb_mark_view(&view);
    px_test_config(&c, 1);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "fill", fill_kernel, NULL, &g_fill));
    px_args_init(&a);
    px_args_inout(&a, &view);
    PX_ASSERT_OK(px_run(w, cb_orch, &a, NULL));
    PX_ASSERT_OK(px_worker_destroy(w));
    for (int i = 0; i < CB_N; i++) {
        float want = g_in_view[i] ? CB_FILL : CB_MARK;

        if (g_buf[i] != want)
            fail_msg("element %d is %g after the run, expected %g (%s)", i, (double)g_buf[i],
                     (double)want, g_in_view[i] ? "in the view: not copied back"
                                                : "between the view's rows: overwritten");
    }
}

/* A 4 x 3 tile of an 8 x 8 row-major matrix, rows 1-4, columns 2-4. */
static void test_tile(void **state)
{
    (void)state;
    cb_case(2, (const int64_t[]){4, 3}, (const int64_t[]){8, 1}, 8 + 2);
}

/* One column of the 8 x 8 matrix: no two elements adjacent. */
static void test_column(void **state)
{
    (void)state;
    cb_case(1, (const int64_t[]){8}, (const int64_t[]){8}, 5);
}

/* A 2 x 2 x 3 view of a 4 x 4 x 4 array. */
static void test_three_dims(void **state)
{
    (void)state;
    cb_case(3, (const int64_t[]){2, 2, 3}, (const int64_t[]){16, 4, 1}, 16 + 4 + 1);
}

/* A contiguous range: copied back whole, the bytes around it untouched. */
static void test_contiguous(void **state)
{
    (void)state;
    cb_case(1, (const int64_t[]){20}, NULL, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile),
        cmocka_unit_test(test_column),
        cmocka_unit_test(test_three_dims),
        cmocka_unit_test(test_contiguous),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
