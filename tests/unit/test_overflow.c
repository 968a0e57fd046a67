/*
 * test_overflow.c - shapes whose element or byte counts overflow, and error messages that say
 * their context once (issue 8 items 1 and 3).
 *
 * Every tensor whose byte span does not fit int64 is refused with PX_EINVAL by the call that
 * meets it first (px_tensor_make, px_tensor_view, px_tensor_span, px_tensor_alloc, px_submit,
 * px_run), and the message names the dimension and its values. The heap ring refuses a
 * request its rounding would wrap. A message that adds context to another message (the
 * argument check around px_tensor_span's reason) holds each part exactly once: px_set_error
 * may be given px_last_error() itself.
 */
#include "testutil.h"

#include <string.h>

#include "runtime/heap.h"

#define BIG (INT64_C(1) << 62)

static px_kernel_id g_noop;

static px_status noop_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    return PX_OK;
}

/* Counts the occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

static px_worker *ov_worker(void)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 1);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "noop", noop_kernel, NULL, &g_noop));
    return w;
}

/* px_tensor_make: an f32 tensor of 2^62 elements (2^64 bytes) and a shape whose element count
 * overflows are refused, naming the dimension; before the fix the first got span [0, 0). */
static void test_make_overflow(void **state)
{
    int64_t big[1] = {BIG}, wide[3] = {INT64_C(1) << 32, INT64_C(1) << 32, 4};
    int64_t ok[1] = {BIG / 8}; /* 2^59 f64 = 2^62 bytes: fits */
    px_tensor t;
    int64_t lo, hi;

    assert_int_equal(px_tensor_make(&t, NULL, PX_F32, 1, big), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "shape[0] = 4611686018427387904"));
    assert_non_null(strstr(px_last_error(), "overflows int64"));
    assert_int_equal(count_of(px_last_error(), "px_tensor_make"), 1);
    assert_int_equal(px_tensor_make(&t, NULL, PX_U8, 3, wide), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "shape[0] = 4294967296"));
    PX_ASSERT_OK(px_tensor_make(&t, NULL, PX_F64, 1, ok));
    PX_ASSERT_OK(px_tensor_span(&t, &lo, &hi));
    assert_int_equal(lo, 0);
    assert_int_equal(hi, BIG);
    assert_int_equal(px_tensor_numel(&t), BIG / 8);
}

/* px_tensor_span on hand-built tensors: overflow in a dimension's extent, in the sum of the
 * extents, and in the offset, each refused and named. */
static void test_span_overflow(void **state)
{
    int64_t n = 4, lo = -1, hi = -1;
    px_tensor t;

    PX_ASSERT_OK(px_tensor_make(&t, NULL, PX_F32, 1, &n));
    t.shape[0] = BIG; /* 2^62 f32 */
    assert_int_equal(px_tensor_span(&t, &lo, &hi), PX_EINVAL);
    assert_string_equal(px_last_error(), "tensor shape[0] = 4611686018427387904 with stride[0] "
                        "= 1 elements of 4 bytes: the byte span overflows int64; use smaller "
                        "dimensions or strides");
    assert_int_equal(lo, -1); /* outputs untouched */
    t.shape[0] = 3;
    t.stride[0] = BIG;
    assert_int_equal(px_tensor_span(&t, &lo, &hi), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "shape[0] = 3 with stride[0] = 4611686018427387904"));

    /* each dimension fits alone; together they do not: the second one is named */
    {
        int64_t s2[2] = {2, 2};
        PX_ASSERT_OK(px_tensor_make(&t, NULL, PX_U8, 2, s2));
    }
    t.shape[0] = BIG;
    t.stride[0] = 2; /* 2^63 - 2 bytes */
    t.shape[1] = BIG;
    t.stride[1] = 1; /* 2^62 - 1 more */
    assert_int_equal(px_tensor_span(&t, &lo, &hi), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "shape[1] = 4611686018427387904"));

    PX_ASSERT_OK(px_tensor_make(&t, NULL, PX_F64, 1, &n));
    t.offset = BIG;
    assert_int_equal(px_tensor_span(&t, &lo, &hi), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "offset 4611686018427387904"));
    t.offset = 0;
    t.shape[0] = INT64_MAX;
    assert_int_equal(px_tensor_numel(&t), INT64_MAX);
    {
        int64_t s2[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
        px_tensor u = t;

        u.ndim = 2;
        u.shape[0] = s2[0];
        u.shape[1] = s2[1];
        u.stride[0] = u.stride[1] = 0;
        assert_int_equal(px_tensor_numel(&u), -1); /* 2^80 elements: does not fit */
    }
}

/* px_tensor_view: a view whose offset overflows, or whose strides reach past int64. */
static void test_view_overflow(void **state)
{
    int64_t n = 16, one = 1, st = BIG;
    px_tensor base, v;

    PX_ASSERT_OK(px_tensor_make(&base, NULL, PX_F32, 1, &n));
    base.offset = INT64_MAX - 4;
    assert_int_equal(px_tensor_view(&base, 1, &one, NULL, 10, &v), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "overflows int64"));
    base.offset = 0;
    n = 4;
    assert_int_equal(px_tensor_view(&base, 1, &n, &st, 0, &v), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "px_tensor_view: tensor shape[0] = 4 with stride[0]"));
    PX_ASSERT_OK(px_tensor_view(&base, 1, &n, NULL, 2, &v));
    assert_int_equal(v.offset, 2);
    {
        /* 2^80 elements that all alias one: the element count overflows, the bytes do not */
        int64_t s2[2] = {INT64_C(1) << 40, INT64_C(1) << 40}, z2[2] = {0, 0}, lo, hi;

        PX_ASSERT_OK(px_tensor_view(&base, 2, s2, z2, 0, &v));
        PX_ASSERT_OK(px_tensor_span(&v, &lo, &hi));
        assert_int_equal(hi - lo, 4);
        assert_int_equal(px_tensor_view(&base, 2, s2, NULL, 0, &v), PX_EINVAL);
    }
}

/* The heap ring refuses a request whose rounding to 64 bytes would wrap to a tiny one. */
static void test_heap_ring_wrap(void **state)
{
    static char mem[4096] __attribute__((aligned(64)));
    px_heap h;
    int oom = 0;

    assert_int_equal(px_heap_init(&h, mem, sizeof(mem)), 0);
    assert_null(px_heap_try_alloc(&h, UINT64_MAX - 10, &oom));
    assert_int_equal(oom, 0);
    assert_int_equal(px_heap_live(&h), 0);
    assert_ptr_equal(px_heap_try_alloc(&h, 100, &oom), mem);
    assert_int_equal(px_heap_live(&h), 128);
    px_heap_fini(&h);
}

typedef struct ov_result {
    px_status alloc_st, submit_st, after_st;
    char alloc_msg[512], submit_msg[512];
    void *a1, *a2;
} ov_result;

/* Allocates f64[2^62] (refused), then two small tensors (distinct, not aliasing), then submits
 * a device tensor whose span overflows (refused with one prefix). */
static px_status ov_orch(px_orch *o, const px_task_args *args, void *user)
{
    ov_result *r = user;
    int64_t big = BIG, small = 8;
    px_tensor t, u, bad;
    px_task_args a;

    r->alloc_st = px_tensor_alloc(o, PX_F64, 1, &big, &t);
    snprintf(r->alloc_msg, sizeof(r->alloc_msg), "%s", px_last_error());
    if (px_tensor_alloc(o, PX_F64, 1, &small, &t) != PX_OK ||
        px_tensor_alloc(o, PX_F64, 1, &small, &u) != PX_OK)
        return PX_EIO;
    r->a1 = t.addr;
    r->a2 = u.addr;
    bad = t;
    bad.shape[0] = BIG; /* at a device address, but 2^65 bytes */
    px_args_init(&a);
    px_args_in(&a, &bad);
    r->submit_st = px_submit(o, g_noop, &a, NULL);
    snprintf(r->submit_msg, sizeof(r->submit_msg), "%s", px_last_error());
    px_args_init(&a);
    px_args_in(&a, &t);
    r->after_st = px_submit(o, g_noop, &a, NULL);
    return PX_OK;
}

static void test_alloc_submit_overflow(void **state)
{
    px_worker *w = ov_worker();
    ov_result r;

    memset(&r, 0, sizeof(r));
    PX_ASSERT_OK(px_run(w, ov_orch, NULL, &r));
    assert_int_equal(r.alloc_st, PX_EINVAL);
    assert_non_null(strstr(r.alloc_msg, "shape[0] = 4611686018427387904"));
    assert_true((char *)r.a2 >= (char *)r.a1 + 64); /* 8 f64 each: no aliasing */
    assert_int_equal(r.submit_st, PX_EINVAL);
    assert_string_equal(r.submit_msg, "kernel \"noop\" argument 0 (in): tensor shape[0] = "
                        "4611686018427387904 with stride[0] = 1 elements of 8 bytes: the byte "
                        "span overflows int64; use smaller dimensions or strides");
    assert_int_equal(r.after_st, PX_OK);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* Writes then reads a view whose unit dimension has a stride near 2^62 (legal: the step is
 * never taken); the tensor map must give one RAW edge. Its byte stride overflowed int64
 * there (caught by the sanitizer build, make test-asan). */
static px_status unit_dim_orch(px_orch *o, const px_task_args *args, void *user)
{
    int64_t n = 4;
    px_tensor t;
    px_task_args a;
    px_status st;

    if ((st = px_tensor_alloc(o, PX_F64, 1, &n, &t)) != PX_OK)
        return st;
    t.ndim = 2;
    t.shape[0] = 1;
    t.stride[0] = BIG;
    t.shape[1] = 4;
    t.stride[1] = 1;
    px_args_init(&a);
    px_args_out(&a, &t);
    if ((st = px_submit(o, g_noop, &a, NULL)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_in(&a, &t);
    return px_submit(o, g_noop, &a, NULL);
}

static void test_unit_dim_huge_stride(void **state)
{
    px_worker *w = ov_worker();
    px_run_stats rs;

    PX_ASSERT_OK(px_run(w, unit_dim_orch, NULL, NULL));
    PX_ASSERT_OK(px_run_stats_get(w, &rs));
    assert_int_equal(rs.tasks, 2);
    assert_int_equal(rs.edges, 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

static px_status empty_orch(px_orch *o, const px_task_args *args, void *user)
{
    return PX_OK;
}

/* px_run with a malformed host tensor: the message has its prefix once (it had it twice and
 * garbled the rest: "px_run argument 0 (in): px_run argument 0 (in): range: ..."). */
static void test_run_messages_once(void **state)
{
    px_worker *w = ov_worker();
    float data[4] = {0};
    int64_t n = 4;
    px_task_args a;
    px_tensor t;

    PX_ASSERT_OK(px_tensor_make(&t, data, PX_F32, 1, &n));
    t.ndim = 7;
    px_args_init(&a);
    px_args_in(&a, &t);
    assert_int_equal(px_run(w, empty_orch, &a, NULL), PX_EINVAL);
    assert_string_equal(px_last_error(),
                        "px_run argument 0 (in): tensor ndim 7 is out of range: expected 1..5");
    t.ndim = 1;
    t.shape[0] = BIG;
    px_args_init(&a);
    px_args_inout(&a, &t);
    assert_int_equal(px_run(w, empty_orch, &a, NULL), PX_EINVAL);
    assert_int_equal(count_of(px_last_error(), "px_run argument 0"), 1);
    assert_non_null(strstr(px_last_error(), "px_run argument 0 (inout): tensor shape[0] = "));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* px_set_error given px_last_error() (or a part of it) formats the old text, not a copy
 * overwritten while it was read; a message at the size limit is cut, not garbled. */
static void test_set_error_self(void **state)
{
    char big[1500];

    px_set_error(PX_EINVAL, "inner %d", 7);
    assert_int_equal(px_set_error(PX_EIO, "outer: %s", px_last_error()), PX_EIO);
    assert_string_equal(px_last_error(), "outer: inner 7");
    px_set_error(PX_EINVAL, "%s / %s", px_last_error(), px_last_error() + 7);
    assert_string_equal(px_last_error(), "outer: inner 7 / inner 7");
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    px_set_error(PX_EINVAL, "%s", big);
    px_set_error(PX_EINVAL, "p: %s", px_last_error());
    assert_int_equal(strlen(px_last_error()), 1023);
    assert_int_equal(strncmp(px_last_error(), "p: xxx", 6), 0);
    assert_int_equal(count_of(px_last_error(), "p: "), 1);
}

/*
 * The data address of a tensor and of an argument (px_tensor_data, px_arg_data, which the
 * kernels call inline): offset 3 of an f64 tensor is 24 bytes on, an offset whose byte count
 * overflows int64 gives NULL, an invalid dtype counts 0 bytes, NULL and out-of-range
 * arguments give NULL.
 */
static void test_data_address(void **state)
{
    static double buf[8];
    int64_t shape[1] = {4};
    px_tensor t;
    px_task_args a;

    (void)state;
    PX_ASSERT_OK(px_tensor_make(&t, buf, PX_F64, 1, shape));
    t.offset = 3;
    assert_ptr_equal(px_tensor_data(&t), (char *)buf + 24);
    px_args_init(&a);
    px_args_in(&a, &t);
    assert_ptr_equal(px_arg_data(&a, 0), (char *)buf + 24);
    assert_null(px_arg_data(&a, 1));
    assert_null(px_arg_data(NULL, 0));
    assert_null(px_tensor_data(NULL));
    a.a[0].v.t.offset = BIG; /* x 8 bytes overflows int64 */
    assert_null(px_arg_data(&a, 0));
    t.offset = BIG;
    assert_null(px_tensor_data(&t));
    t.dtype = (px_dtype)99;
    assert_ptr_equal(px_tensor_data(&t), buf);
    t.dtype = (px_dtype)-1;
    assert_ptr_equal(px_tensor_data(&t), buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_overflow),         cmocka_unit_test(test_span_overflow),
        cmocka_unit_test(test_view_overflow),         cmocka_unit_test(test_heap_ring_wrap),
        cmocka_unit_test(test_alloc_submit_overflow), cmocka_unit_test(test_run_messages_once),
        cmocka_unit_test(test_set_error_self),        cmocka_unit_test(test_unit_dim_huge_stride),
        cmocka_unit_test(test_data_address),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
