/*
 * pykernels.c - the built-in C kernels of the Python package (plexus.builtin), and the model
 * of a kernel library Worker.load_kernels() opens: every kernel is an exported px_kernel_fn
 * found by its symbol name; an exported px_signature called <name>_sig, when present, makes
 * submit check the arguments against it.
 *
 * Kernels: scale (z = x * s), add (z = x + y), add_scalar (z = x + s), mul (z = x * y) on
 * f32, s an int or a float; matmul (C[m,n] = A[m,k] B[k,n], f32, row-major); noop (touches
 * nothing: the tiny task of bench_python); busy (scalar 1, an int or a float: milliseconds to
 * compute for, then writes the number of loop rounds into its i64 output: the GIL test's long
 * C kernel); fail (returns PX_EKERNEL with a message, for the error tests).
 */
#include <plexus/plexus.h>

#include <time.h>

#define PYK_API __attribute__((visibility("default")))

PYK_API const px_signature scale_sig = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_OUT, PX_F32}, {PX_TAG_SCALAR, PX_DTYPE_ANY}},
};
PYK_API const px_signature add_sig = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_IN, PX_F32}, {PX_TAG_OUT, PX_F32}},
};
PYK_API const px_signature mul_sig = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_IN, PX_F32}, {PX_TAG_OUT, PX_F32}},
};
PYK_API const px_signature add_scalar_sig = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_OUT, PX_F32}, {PX_TAG_SCALAR, PX_DTYPE_ANY}},
};
PYK_API const px_signature matmul_sig = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_IN, PX_F32}, {PX_TAG_OUT, PX_F32}},
};

/* Scalar argument i as a number, whatever its kind: Python passes an int as i64 and a float
 * as f64, and a signature's PX_DTYPE_ANY scalar accepts either (busy(1000) used to read the
 * i64 1000's bits as a double, about 5e-321 ms, and return at once). */
static double pyk_number(const px_task_args *a, int i)
{
    if (i < 0 || i >= a->n || a->a[i].tag != PX_TAG_SCALAR)
        return 0.0;
    switch (a->a[i].scalar_kind) {
    case PX_SCALAR_I64: return (double)px_arg_i64(a, i);
    case PX_SCALAR_U64: return (double)px_arg_u64(a, i);
    default: return px_arg_f64(a, i);
    }
}

/* Checks that tensors i and j have the same number of elements. */
static px_status pyk_same(const px_task_args *a, int i, int j, const char *k)
{
    if (px_arg_numel(a, i) != px_arg_numel(a, j))
        return px_set_error(PX_EINVAL, "kernel %s: arguments %d and %d have %lld and %lld "
                            "elements; pass tensors of the same size", k, i, j,
                            (long long)px_arg_numel(a, i), (long long)px_arg_numel(a, j));
    return PX_OK;
}

PYK_API px_status scale(px_core_ctx *ctx, const px_task_args *a)
{
    const float *x = px_arg_data(a, 0);
    float *z = px_arg_data(a, 1);
    float s = (float)pyk_number(a, 2);
    int64_t n = px_arg_numel(a, 1);
    px_status st = pyk_same(a, 0, 1, "scale");

    for (int64_t i = 0; st == PX_OK && i < n; i++)
        z[i] = x[i] * s;
    return st;
}

PYK_API px_status add_scalar(px_core_ctx *ctx, const px_task_args *a)
{
    const float *x = px_arg_data(a, 0);
    float *z = px_arg_data(a, 1);
    double s = pyk_number(a, 2);
    int64_t n = px_arg_numel(a, 1);
    px_status st = pyk_same(a, 0, 1, "add_scalar");

    for (int64_t i = 0; st == PX_OK && i < n; i++)
        z[i] = (float)(x[i] + s);
    return st;
}

PYK_API px_status add(px_core_ctx *ctx, const px_task_args *a)
{
    const float *x = px_arg_data(a, 0), *y = px_arg_data(a, 1);
    float *z = px_arg_data(a, 2);
    int64_t n = px_arg_numel(a, 2);
    px_status st = pyk_same(a, 0, 2, "add");

    if (st == PX_OK)
        st = pyk_same(a, 1, 2, "add");
    for (int64_t i = 0; st == PX_OK && i < n; i++)
        z[i] = x[i] + y[i];
    return st;
}

PYK_API px_status mul(px_core_ctx *ctx, const px_task_args *a)
{
    const float *x = px_arg_data(a, 0), *y = px_arg_data(a, 1);
    float *z = px_arg_data(a, 2);
    int64_t n = px_arg_numel(a, 2);
    px_status st = pyk_same(a, 0, 2, "mul");

    if (st == PX_OK)
        st = pyk_same(a, 1, 2, "mul");
    for (int64_t i = 0; st == PX_OK && i < n; i++)
        z[i] = x[i] * y[i];
    return st;
}

PYK_API px_status matmul(px_core_ctx *ctx, const px_task_args *a)
{
    const px_tensor *ta = px_arg_tensor(a, 0), *tb = px_arg_tensor(a, 1), *tc = px_arg_tensor(a, 2);
    const float *A = px_arg_data(a, 0), *B = px_arg_data(a, 1);
    float *C = px_arg_data(a, 2);
    int64_t m, k, n;

    if (ta->ndim != 2 || tb->ndim != 2 || tc->ndim != 2 || ta->shape[1] != tb->shape[0] ||
        tc->shape[0] != ta->shape[0] || tc->shape[1] != tb->shape[1] ||
        !px_tensor_is_contiguous(ta) || !px_tensor_is_contiguous(tb) ||
        !px_tensor_is_contiguous(tc))
        return px_set_error(PX_EINVAL, "kernel matmul: needs contiguous 2-d A[m,k], B[k,n] "
                            "and C[m,n]; got ndims %d, %d, %d", ta->ndim, tb->ndim, tc->ndim);
    m = ta->shape[0];
    k = ta->shape[1];
    n = tb->shape[1];
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++)
            C[i * n + j] = 0.0f;
        for (int64_t p = 0; p < k; p++) {
            float v = A[i * k + p];

            for (int64_t j = 0; j < n; j++)
                C[i * n + j] += v * B[p * n + j];
        }
    }
    return PX_OK;
}

PYK_API px_status noop(px_core_ctx *ctx, const px_task_args *a)
{
    return PX_OK;
}

PYK_API const px_signature busy_sig = {
    .nargs = 2,
    .params = {{PX_TAG_OUT, PX_I64}, {PX_TAG_SCALAR, PX_DTYPE_ANY}},
};

PYK_API px_status busy(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *out = px_arg_data(a, 0);
    double ms = pyk_number(a, 1);
    struct timespec t0, t;
    int64_t rounds = 0;
    double el;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        rounds++;
        clock_gettime(CLOCK_MONOTONIC, &t);
        el = (double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) / 1e6;
    } while (el < ms);
    *out = rounds;
    return PX_OK;
}

PYK_API px_status fail(px_core_ctx *ctx, const px_task_args *a)
{
    return px_set_error(PX_EKERNEL, "kernel fail: failed on purpose (the error tests' kernel)");
}
