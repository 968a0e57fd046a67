/*
 * test_mailbox.c - the packed arguments of a level-3 call (src/hier/mailbox.c).
 *
 * A call carries its arguments packed: what px_mb_unpack_args gives the child must be the
 * arguments the parent packed, field for field, for every tag, scalar kind and tensor rank,
 * strided views included, and the packing must be smaller than the px_arg array it replaces
 * (that is its point) yet fit the slot in the worst case.
 */
#include "testutil.h"

#include <string.h>

#include "hier/mailbox.h"

/* Asserts that unpacked argument u equals the packed original o. */
static void assert_same_arg(const px_arg *o, const px_arg *u)
{
    assert_int_equal(u->tag, o->tag);
    assert_int_equal(u->marked, o->marked);
    assert_int_equal(u->null_tensor, o->null_tensor);
    if (o->tag == PX_TAG_SCALAR) {
        assert_int_equal(u->scalar_kind, o->scalar_kind);
        assert_memory_equal(&u->v.u64, &o->v.u64, sizeof(uint64_t));
        return;
    }
    assert_ptr_equal(u->v.t.addr, o->v.t.addr);
    assert_int_equal(u->v.t.dtype, o->v.t.dtype);
    assert_int_equal(u->v.t.ndim, o->v.t.ndim);
    assert_int_equal(u->v.t.offset, o->v.t.offset);
    for (int d = 0; d < o->v.t.ndim; d++) {
        assert_int_equal(u->v.t.shape[d], o->v.t.shape[d]);
        assert_int_equal(u->v.t.stride[d], o->v.t.stride[d]);
    }
    for (int d = o->v.t.ndim; d < PX_MAX_DIMS; d++) { /* unused extents are zero */
        assert_int_equal(u->v.t.shape[d], 0);
        assert_int_equal(u->v.t.stride[d], 0);
    }
}

/* Packs a into a call, unpacks it again and compares; returns the packed bytes. */
static uint32_t round_trip(const px_task_args *a)
{
    static px_mb_call c; /* about 1.8 KiB */
    px_task_args u;

    memset(&c, 0xa5, sizeof(c));
    memset(&u, 0x5a, sizeof(u));
    px_mb_pack_args(&c, a);
    assert_int_equal(c.nargs, a->n);
    assert_true(c.bytes <= PX_MB_ARGS_MAX);
    assert_int_equal(px_mb_unpack_args(&c, &u), 0);
    assert_int_equal(u.n, a->n);
    assert_int_equal(u.overflow, 0);
    for (int i = 0; i < a->n; i++)
        assert_same_arg(&a->a[i], &u.a[i]);
    return c.bytes;
}

/* Every tag and scalar kind, a 1-D view with an offset, a transposed 2-D view and a 3-D
 * strided view: the fields survive, and the packing is far smaller than the array. */
static void test_pack_kinds(void **state)
{
    static float m[6][8][4];
    int64_t s1[1] = {16}, s2[2] = {8, 6}, st2[2] = {32, 1}, s3[3] = {3, 4, 2},
            st3[3] = {64, 8, 2};
    px_tensor flat, t1, t2, t3;
    px_task_args a;

    PX_ASSERT_OK(px_tensor_make(&flat, m, PX_F32, 1, (int64_t[]){6 * 8 * 4}));
    PX_ASSERT_OK(px_tensor_view(&flat, 1, s1, NULL, 20, &t1));
    PX_ASSERT_OK(px_tensor_view(&flat, 2, s2, st2, 1, &t2));
    PX_ASSERT_OK(px_tensor_view(&flat, 3, s3, st3, 5, &t3));
    px_args_init(&a);
    px_args_in(&a, &t1);
    px_args_out(&a, &t2);
    px_args_mark(&a);
    px_args_inout(&a, &t3);
    px_args_output_existing(&a, &t1);
    px_args_no_dep(&a, &flat);
    px_args_scalar_u64(&a, 0xfedcba9876543210ull);
    px_args_scalar_i64(&a, -42);
    px_args_scalar_f64(&a, -0.15625);
    assert_int_equal(a.n, 8);
    assert_true(round_trip(&a) < (uint32_t)(a.n * sizeof(px_arg)) / 2);
}

/* One 1-D tensor and one scalar (a typical next-level call) pack into 64 bytes: with the
 * call's header, two cache lines. */
static void test_pack_typical(void **state)
{
    int64_t x[4];
    px_tensor t;
    px_task_args a;

    PX_ASSERT_OK(px_tensor_make(&t, x, PX_I64, 1, (int64_t[]){4}));
    px_args_init(&a);
    px_args_out(&a, &t);
    px_args_scalar_u64(&a, 7);
    assert_int_equal(round_trip(&a), 64);
    assert_true(offsetof(px_mb_call, args) + 64 <= 2 * PX_CACHELINE);
}

/* The worst case, PX_MAX_ARGS tensors of PX_MAX_DIMS dimensions, fits the slot exactly; no
 * arguments at all pack into nothing. */
static void test_pack_limits(void **state)
{
    static double big[2 * 2 * 2 * 2 * 2];
    int64_t shape[PX_MAX_DIMS] = {2, 2, 2, 2, 2};
    px_tensor t;
    px_task_args a;

    PX_ASSERT_OK(px_tensor_make(&t, big, PX_F64, PX_MAX_DIMS, shape));
    px_args_init(&a);
    for (int i = 0; i < PX_MAX_ARGS; i++)
        px_args_inout(&a, &t);
    assert_int_equal(a.n, PX_MAX_ARGS);
    assert_int_equal(round_trip(&a), PX_MB_ARGS_MAX);
    px_args_init(&a);
    assert_int_equal(round_trip(&a), 0);
}

/* A corrupt call (an extent count past PX_MAX_DIMS, a byte count shorter than its arguments,
 * too many arguments) is refused by the unpacker instead of writing past a tensor's shape. */
static void test_unpack_corrupt(void **state)
{
    static px_mb_call c;
    int64_t x[4];
    px_tensor t;
    px_task_args a, u;
    int32_t ndim;

    PX_ASSERT_OK(px_tensor_make(&t, x, PX_I64, 1, (int64_t[]){4}));
    px_args_init(&a);
    px_args_in(&a, &t);
    px_mb_pack_args(&c, &a);
    assert_int_equal(px_mb_unpack_args(&c, &u), 0);
    ndim = 99; /* the packed tensor's ndim follows the 8-byte header */
    memcpy(c.args + 8, &ndim, sizeof(ndim));
    assert_int_equal(px_mb_unpack_args(&c, &u), -1);
    px_mb_pack_args(&c, &a);
    c.bytes = 16;
    assert_int_equal(px_mb_unpack_args(&c, &u), -1);
    px_mb_pack_args(&c, &a);
    c.nargs = PX_MAX_ARGS + 1;
    assert_int_equal(px_mb_unpack_args(&c, &u), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_kinds),
        cmocka_unit_test(test_pack_typical),
        cmocka_unit_test(test_pack_limits),
        cmocka_unit_test(test_unpack_corrupt),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
