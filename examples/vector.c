/*
 * vector.c - the vector example: f = (a+b+1)*(a+b+2) + (a+b) as five dependent tasks.
 *
 * Each iteration submits c = a+b; d = c+1; e = c+2; g = d*e; f = g+c with three kernels
 * (add, add_scalar with an f64 scalar, mul). The intermediates c, d, e and g are allocated
 * with px_tensor_alloc inside one scope per iteration; a and b are IN and f is OUT of px_run.
 * Iteration i writes row i of f (shape [iters, size]), so iterations share no written bytes.
 *
 * Counts by hand, per iteration: 5 tasks. Edges: d and e each read c (2 RAW), g reads d and
 * e (2 RAW), f reads g and c (2 RAW): 6. a and b are never written by a task and each row of
 * f is written once, so iterations add no edges between them: tasks = 5*iters, edges =
 * 6*iters. a[i] = i % 13 and b[i] = (7*i) % 11 keep every value a small integer, so float
 * results are exact and the check compares for equality.
 */
#include "examples.h"

#include <stdio.h>
#include <stdlib.h>

#define VEC_MAX_FLOATS (1ll << 26) /* bound on size and on iters*size (f's floats) */
#define VEC_MAX_ITERS (1 << 20)

typedef struct vec_state {
    px_kernel_id k_add;        /* z = x + y */
    px_kernel_id k_add_scalar; /* z = x + s */
    px_kernel_id k_mul;        /* z = x * y */
    int64_t size;              /* floats per vector */
    int iters;                 /* iterations, one row of f each */
    float *a, *b, *f;          /* host data: a, b [size]; f [iters][size] */
} vec_state;

static const px_signature vec_sig_binary = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_IN, PX_F32}, {PX_TAG_OUT, PX_F32}},
};

static const px_signature vec_sig_scalar = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F32}, {PX_TAG_SCALAR, PX_DTYPE_ANY}, {PX_TAG_OUT, PX_F32}},
};

/* Checks that tensor arguments x and z have n elements; y too unless it is -1. */
static px_status vec_check_len(const px_task_args *args, int y, const char *kernel)
{
    int64_t n = px_arg_numel(args, 2);

    if (px_arg_numel(args, 0) != n || (y >= 0 && px_arg_numel(args, y) != n))
        return px_set_error(PX_EINVAL,
                            "kernel %s: argument lengths differ (output %lld); "
                            "every tensor argument must have the same number of floats",
                            kernel, (long long)n);
    return PX_OK;
}

static px_status vec_add_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const float *x = px_arg_data(args, 0), *y = px_arg_data(args, 1);
    float *z = px_arg_data(args, 2);
    int64_t n = px_arg_numel(args, 2);
    px_status st = vec_check_len(args, 1, "vector.add");

    for (int64_t i = 0; st == PX_OK && i < n; i++)
        z[i] = x[i] + y[i];
    return st;
}

static px_status vec_add_scalar_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const float *x = px_arg_data(args, 0);
    double s = px_arg_f64(args, 1);
    float *z = px_arg_data(args, 2);
    int64_t n = px_arg_numel(args, 2);
    px_status st = vec_check_len(args, -1, "vector.add_scalar");

    for (int64_t i = 0; st == PX_OK && i < n; i++)
        z[i] = (float)(x[i] + s);
    return st;
}

static px_status vec_mul_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const float *x = px_arg_data(args, 0), *y = px_arg_data(args, 1);
    float *z = px_arg_data(args, 2);
    int64_t n = px_arg_numel(args, 2);
    px_status st = vec_check_len(args, 1, "vector.mul");

    for (int64_t i = 0; st == PX_OK && i < n; i++)
        z[i] = x[i] * y[i];
    return st;
}

/* Rejects sizes the example cannot hold, naming the bound. */
static px_status vec_validate(const px_example_opts *o)
{
    if (o->size < 1 || o->size > VEC_MAX_FLOATS)
        return px_set_error(PX_EINVAL, "vector: size %lld is out of range; use 1..%lld floats",
                            (long long)o->size, (long long)VEC_MAX_FLOATS);
    if (o->iters < 1 || o->iters > VEC_MAX_ITERS)
        return px_set_error(PX_EINVAL, "vector: iters %d is out of range; use 1..%d", o->iters,
                            VEC_MAX_ITERS);
    if (o->size * o->iters > VEC_MAX_FLOATS)
        return px_set_error(PX_EINVAL,
                            "vector: size %lld x iters %d = %lld output floats "
                            "exceeds %lld; lower --size or --iters",
                            (long long)o->size, o->iters, (long long)(o->size * o->iters),
                            (long long)VEC_MAX_FLOATS);
    return PX_OK;
}

/* Allocates and fills the host vectors; f starts at -1 so a missing copy-back shows. */
static px_status vec_host_data(vec_state *s)
{
    size_t nf = (size_t)s->size * (size_t)s->iters;

    s->a = malloc((size_t)s->size * sizeof(float));
    s->b = malloc((size_t)s->size * sizeof(float));
    s->f = malloc(nf * sizeof(float));
    if (s->a == NULL || s->b == NULL || s->f == NULL)
        return px_set_error(PX_ENOMEM,
                            "vector: cannot allocate %zu host bytes for size %lld "
                            "x iters %d; lower --size or --iters",
                            (2 * (size_t)s->size + nf) * sizeof(float), (long long)s->size,
                            s->iters);
    for (int64_t i = 0; i < s->size; i++) {
        s->a[i] = (float)(i % 13);
        s->b[i] = (float)((7 * i) % 11);
    }
    for (size_t i = 0; i < nf; i++)
        s->f[i] = -1.0f;
    return PX_OK;
}

static void vec_fini(void *state)
{
    vec_state *s = state;

    if (s == NULL)
        return;
    free(s->a);
    free(s->b);
    free(s->f);
    free(s);
}

/* Run area: a, b and f; heap ring: the four temporaries of one iteration (one scope). */
static void vec_memory(const px_example_opts *o, uint64_t *run, uint64_t *heap)
{
    uint64_t row = ((uint64_t)o->size * sizeof(float) + 63) / 64 * 64; /* validated sizes */

    *run = (2 + (uint64_t)o->iters) * row;
    *heap = 4 * row;
}

static px_status vec_register_kernels(px_worker *w, vec_state *s)
{
    px_status st = px_kernel_register(w, "vector.add", vec_add_kernel, &vec_sig_binary, &s->k_add);

    if (st == PX_OK)
        st = px_kernel_register(w, "vector.add_scalar", vec_add_scalar_kernel, &vec_sig_scalar,
                                &s->k_add_scalar);
    if (st == PX_OK)
        st = px_kernel_register(w, "vector.mul", vec_mul_kernel, &vec_sig_binary, &s->k_mul);
    return st;
}

static px_status vec_reg(px_worker *w, const px_example_opts *o, void **state)
{
    vec_state *s;
    px_status st = vec_validate(o);

    if (st != PX_OK)
        return st;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return px_set_error(PX_ENOMEM, "vector: cannot allocate its state");
    s->size = o->size;
    s->iters = o->iters;
    st = vec_host_data(s);
    if (st == PX_OK)
        st = vec_register_kernels(w, s);
    if (st != PX_OK) {
        vec_fini(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

/* Submits z = x op y (kernel k). */
static px_status vec_submit2(px_orch *o, px_kernel_id k, const px_tensor *x, const px_tensor *y,
                             const px_tensor *z)
{
    px_task_args a;

    px_args_init(&a);
    px_args_in(&a, x);
    px_args_in(&a, y);
    px_args_out(&a, z);
    return px_submit(o, k, &a, NULL);
}

/* Submits z = x + v. */
static px_status vec_submit_scalar(px_orch *o, px_kernel_id k, const px_tensor *x, double v,
                                   const px_tensor *z)
{
    px_task_args a;

    px_args_init(&a);
    px_args_in(&a, x);
    px_args_scalar_f64(&a, v);
    px_args_out(&a, z);
    return px_submit(o, k, &a, NULL);
}

/* One iteration: five tasks writing row `it` of f; intermediates live in this scope. */
static px_status vec_iteration(px_orch *o, const vec_state *s, const px_tensor *a,
                               const px_tensor *b, const px_tensor *f, int it)
{
    int64_t shape[1] = {s->size};
    px_tensor c, d, e, g, fi;
    px_status st, st_end;

    st = px_scope_begin(o);
    if (st != PX_OK)
        return st;
    st = px_tensor_alloc(o, PX_F32, 1, shape, &c);
    if (st == PX_OK)
        st = px_tensor_alloc(o, PX_F32, 1, shape, &d);
    if (st == PX_OK)
        st = px_tensor_alloc(o, PX_F32, 1, shape, &e);
    if (st == PX_OK)
        st = px_tensor_alloc(o, PX_F32, 1, shape, &g);
    if (st == PX_OK)
        st = px_tensor_view(f, 1, shape, NULL, (int64_t)it * s->size, &fi);
    if (st == PX_OK)
        st = vec_submit2(o, s->k_add, a, b, &c);
    if (st == PX_OK)
        st = vec_submit_scalar(o, s->k_add_scalar, &c, 1.0, &d);
    if (st == PX_OK)
        st = vec_submit_scalar(o, s->k_add_scalar, &c, 2.0, &e);
    if (st == PX_OK)
        st = vec_submit2(o, s->k_mul, &d, &e, &g);
    if (st == PX_OK)
        st = vec_submit2(o, s->k_add, &g, &c, &fi);
    st_end = px_scope_end(o);
    return st != PX_OK ? st : st_end;
}

static px_status vec_orchestrate(px_orch *o, const px_task_args *args, void *state)
{
    const vec_state *s = state;
    const px_tensor *a = px_arg_tensor(args, 0);
    const px_tensor *b = px_arg_tensor(args, 1);
    const px_tensor *f = px_arg_tensor(args, 2);
    px_status st = PX_OK;

    for (int it = 0; st == PX_OK && it < s->iters; it++)
        st = vec_iteration(o, s, a, b, f, it);
    return st;
}

static px_status vec_run(px_worker *w, void *state, px_example_result *r)
{
    vec_state *s = state;
    int64_t vshape[1] = {s->size};
    int64_t fshape[2] = {s->iters, s->size};
    px_tensor ta, tb, tf;
    px_task_args args;
    px_status st;

    st = px_tensor_make(&ta, s->a, PX_F32, 1, vshape);
    if (st == PX_OK)
        st = px_tensor_make(&tb, s->b, PX_F32, 1, vshape);
    if (st == PX_OK)
        st = px_tensor_make(&tf, s->f, PX_F32, 2, fshape);
    if (st != PX_OK)
        return st;
    px_args_init(&args);
    px_args_in(&args, &ta);
    px_args_in(&args, &tb);
    px_args_out(&args, &tf);
    return px_example_run_once(w, vec_orchestrate, &args, s, r);
}

/* Compares every row of f with the host formula; writes the first difference into why. */
static int vec_check_data(const vec_state *s, char *why, size_t n)
{
    for (int it = 0; it < s->iters; it++) {
        const float *row = s->f + (size_t)it * (size_t)s->size;

        for (int64_t i = 0; i < s->size; i++) {
            float c = s->a[i] + s->b[i];
            float want = (c + 1.0f) * (c + 2.0f) + c;

            if (row[i] != want) {
                snprintf(why, n,
                         "f[%d][%lld] = %g but the host computes %g "
                         "(a = %g, b = %g)",
                         it, (long long)i, (double)row[i], (double)want, (double)s->a[i],
                         (double)s->b[i]);
                return 0;
            }
        }
    }
    return 1;
}

static int vec_check(void *state, const px_example_result *r, char *why, size_t n)
{
    const vec_state *s = state;
    uint64_t want_tasks = 5ull * (uint64_t)s->iters;
    uint64_t want_edges = 6ull * (uint64_t)s->iters;

    if (!vec_check_data(s, why, n))
        return 0;
    if (r->tasks != want_tasks || r->edges != want_edges) {
        snprintf(why, n,
                 "counts differ: tasks %llu, edges %llu; expected 5 x %d = %llu "
                 "tasks and 6 x %d = %llu edges",
                 (unsigned long long)r->tasks, (unsigned long long)r->edges, s->iters,
                 (unsigned long long)want_tasks, s->iters, (unsigned long long)want_edges);
        return 0;
    }
    snprintf(why, n,
             "f = (a+b+1)*(a+b+2)+(a+b) matches the host for %lld floats x %d "
             "iteration%s; tasks %llu = 5 x %d, edges %llu = 6 x %d",
             (long long)s->size, s->iters, s->iters == 1 ? "" : "s", (unsigned long long)r->tasks,
             s->iters, (unsigned long long)r->edges, s->iters);
    return 1;
}

const px_example px_example_vector = {
    .name = "vector",
    .doc = "f = (a+b+1)*(a+b+2)+(a+b) as 5 tasks and 6 edges per iteration",
    .level = 2,
    .default_size = 16384,
    .default_tile = 0,
    .size_doc = "floats per vector",
    .memory = vec_memory,
    .reg = vec_reg,
    .orchestrate = vec_orchestrate,
    .run = vec_run,
    .check = vec_check,
    .fini = vec_fini,
};
