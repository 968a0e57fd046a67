/*
 * matmul.c - the tiled matrix product example: C += A*B in f64, one task per tile product.
 *
 * A, B and C are N x N row-major f64 matrices cut into tiles of edge `tile` (the last row and
 * column of tiles are smaller when N is not a multiple of the tile). For every (i, j, k) the
 * orchestration submits one gemm_acc task: C(i,j) += A(i,k) * B(k,j), where each tile is a
 * strided view (px_tensor_view, row stride N) of the whole matrix; A and B tiles are IN, the
 * C tile is INOUT. C starts at zero (INOUT of px_run); with --iters the whole product is
 * accumulated iters times, so C ends as iters * A*B.
 *
 * Counts by hand, with T = ceil(N / tile): T^3 tasks per iteration. Only C is written, and
 * the tiles of C do not overlap, so the tasks on one C tile form one chain (RAW + WAW on that
 * tile: each waits for the one before) and no edges join different tiles: T^2 chains of
 * T*iters tasks give tasks = iters*T^3 and edges = T^2 * (iters*T - 1). The inputs are
 * multiples of 1/8 and 1/4 with small numerators, so every partial sum is exact in f64; the
 * check still allows a relative error of 1e-9.
 */
#include "examples.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MM_MAX_N 2048
#define MM_MAX_TASKS (1ll << 24)
#define MM_TOLERANCE 1e-9

typedef struct mm_state {
    px_kernel_id k_gemm; /* C(i,j) += A(i,k) * B(k,j) on one tile each */
    int64_t n;           /* matrix edge */
    int64_t tile;        /* tile edge */
    int64_t tiles;       /* T = ceil(n / tile) */
    int iters;           /* times the product is accumulated into C */
    double *a, *b, *c;   /* host matrices, n*n each; c starts at zero */
    double *ref;         /* host product A*B (naive) */
} mm_state;

static const px_signature mm_sig_gemm = {
    .nargs = 3,
    .params = {{PX_TAG_IN, PX_F64}, {PX_TAG_IN, PX_F64}, {PX_TAG_INOUT, PX_F64}},
};

/* Checks that a (m x k), b (k x n) and c (m x n) are 2-D and agree. */
static px_status mm_check_shapes(const px_tensor *a, const px_tensor *b, const px_tensor *c)
{
    if (a->ndim != 2 || b->ndim != 2 || c->ndim != 2 || a->shape[0] != c->shape[0] ||
        a->shape[1] != b->shape[0] || b->shape[1] != c->shape[1])
        return px_set_error(PX_EINVAL,
                            "kernel matmul.gemm_acc: tile shapes do not agree "
                            "(A %lldx%lld, B %lldx%lld, C %lldx%lld); pass 2-D tiles with "
                            "A m x k, B k x n, C m x n",
                            (long long)a->shape[0], (long long)a->shape[1], (long long)b->shape[0],
                            (long long)b->shape[1], (long long)c->shape[0], (long long)c->shape[1]);
    return PX_OK;
}

static px_status mm_gemm_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const px_tensor *ta = px_arg_tensor(args, 0);
    const px_tensor *tb = px_arg_tensor(args, 1);
    const px_tensor *tc = px_arg_tensor(args, 2);
    px_status st = mm_check_shapes(ta, tb, tc);
    const double *a = px_tensor_data(ta), *b = px_tensor_data(tb);
    double *c = px_tensor_data(tc);

    if (st != PX_OK)
        return st;
    for (int64_t r = 0; r < tc->shape[0]; r++) {
        double *crow = c + r * tc->stride[0];

        for (int64_t q = 0; q < ta->shape[1]; q++) {
            double av = a[r * ta->stride[0] + q * ta->stride[1]];
            const double *brow = b + q * tb->stride[0];

            for (int64_t col = 0; col < tc->shape[1]; col++)
                crow[col * tc->stride[1]] += av * brow[col * tb->stride[1]];
        }
    }
    return PX_OK;
}

/* Rejects sizes the example cannot hold, naming the bound. */
static px_status mm_validate(const px_example_opts *o)
{
    int64_t t;

    if (o->size < 1 || o->size > MM_MAX_N)
        return px_set_error(PX_EINVAL,
                            "matmul: size %lld is out of range; use 1..%d (the "
                            "matrix edge N)",
                            (long long)o->size, MM_MAX_N);
    if (o->tile < 1)
        return px_set_error(PX_EINVAL, "matmul: tile %lld must be at least 1", (long long)o->tile);
    if (o->iters < 1)
        return px_set_error(PX_EINVAL, "matmul: iters %d must be at least 1", o->iters);
    t = (o->size + o->tile - 1) / o->tile;
    if (t * t * t > MM_MAX_TASKS / o->iters)
        return px_set_error(PX_EINVAL,
                            "matmul: size %lld with tile %lld and iters %d makes "
                            "%lld^3 x %d tasks, more than %lld; raise --tile or lower --size",
                            (long long)o->size, (long long)o->tile, o->iters, (long long)t,
                            o->iters, (long long)MM_MAX_TASKS);
    return PX_OK;
}

static void mm_fini(void *state)
{
    mm_state *s = state;

    if (s == NULL)
        return;
    free(s->a);
    free(s->b);
    free(s->c);
    free(s->ref);
    free(s);
}

/* Fills A and B deterministically, zeroes C, and computes the naive host product. */
static void mm_host_fill(mm_state *s)
{
    int64_t n = s->n;

    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            s->a[i * n + j] = (double)((i * 7 + j * 3) % 17) / 8.0;
            s->b[i * n + j] = (double)((i * 5 + j * 11) % 13) / 4.0;
        }
    memset(s->c, 0, (size_t)(n * n) * sizeof(double));
    memset(s->ref, 0, (size_t)(n * n) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < n; k++) {
            double av = s->a[i * n + k];

            for (int64_t j = 0; j < n; j++)
                s->ref[i * n + j] += av * s->b[k * n + j];
        }
}

static px_status mm_host_data(mm_state *s)
{
    size_t bytes = (size_t)(s->n * s->n) * sizeof(double);

    s->a = malloc(bytes);
    s->b = malloc(bytes);
    s->c = malloc(bytes);
    s->ref = malloc(bytes);
    if (s->a == NULL || s->b == NULL || s->c == NULL || s->ref == NULL)
        return px_set_error(PX_ENOMEM,
                            "matmul: cannot allocate 4 x %zu host bytes for "
                            "N = %lld; lower --size",
                            bytes, (long long)s->n);
    mm_host_fill(s);
    return PX_OK;
}

static px_status mm_reg(px_worker *w, const px_example_opts *o, void **state)
{
    mm_state *s;
    px_status st = mm_validate(o);

    if (st != PX_OK)
        return st;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return px_set_error(PX_ENOMEM, "matmul: cannot allocate its state");
    s->n = o->size;
    s->tile = o->tile;
    s->tiles = (o->size + o->tile - 1) / o->tile;
    s->iters = o->iters;
    st = mm_host_data(s);
    if (st == PX_OK)
        st = px_kernel_register(w, "matmul.gemm_acc", mm_gemm_kernel, &mm_sig_gemm, &s->k_gemm);
    if (st != PX_OK) {
        mm_fini(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

/* Makes the view of tile (r, c) of the n x n matrix m: a strided 2-D window of m. */
static px_status mm_tile_view(const mm_state *s, const px_tensor *m, int64_t r, int64_t c,
                              px_tensor *out)
{
    int64_t r0 = r * s->tile, c0 = c * s->tile;
    int64_t shape[2] = {s->n - r0 < s->tile ? s->n - r0 : s->tile,
                        s->n - c0 < s->tile ? s->n - c0 : s->tile};
    int64_t stride[2] = {s->n, 1};

    return px_tensor_view(m, 2, shape, stride, r0 * s->n + c0, out);
}

/* Submits C(i,j) += A(i,k) * B(k,j). */
static px_status mm_submit_tile(px_orch *o, const mm_state *s, const px_task_args *mats, int64_t i,
                                int64_t j, int64_t k)
{
    px_tensor ta, tb, tc;
    px_task_args a;
    px_status st;

    st = mm_tile_view(s, px_arg_tensor(mats, 0), i, k, &ta);
    if (st == PX_OK)
        st = mm_tile_view(s, px_arg_tensor(mats, 1), k, j, &tb);
    if (st == PX_OK)
        st = mm_tile_view(s, px_arg_tensor(mats, 2), i, j, &tc);
    if (st != PX_OK)
        return st;
    px_args_init(&a);
    px_args_in(&a, &ta);
    px_args_in(&a, &tb);
    px_args_inout(&a, &tc);
    return px_submit(o, s->k_gemm, &a, NULL);
}

/* k outermost: each step offers T^2 independent tile products to the cores. */
static px_status mm_orchestrate(px_orch *o, const px_task_args *args, void *state)
{
    const mm_state *s = state;
    int64_t t = s->tiles;
    px_status st = PX_OK;

    for (int it = 0; st == PX_OK && it < s->iters; it++)
        for (int64_t k = 0; st == PX_OK && k < t; k++)
            for (int64_t i = 0; st == PX_OK && i < t; i++)
                for (int64_t j = 0; st == PX_OK && j < t; j++)
                    st = mm_submit_tile(o, s, args, i, j, k);
    return st;
}

static px_status mm_run(px_worker *w, void *state, px_example_result *r)
{
    mm_state *s = state;
    int64_t shape[2] = {s->n, s->n};
    px_tensor ta, tb, tc;
    px_task_args args;
    px_status st;

    st = px_tensor_make(&ta, s->a, PX_F64, 2, shape);
    if (st == PX_OK)
        st = px_tensor_make(&tb, s->b, PX_F64, 2, shape);
    if (st == PX_OK)
        st = px_tensor_make(&tc, s->c, PX_F64, 2, shape);
    if (st != PX_OK)
        return st;
    px_args_init(&args);
    px_args_in(&args, &ta);
    px_args_in(&args, &tb);
    px_args_inout(&args, &tc);
    return px_example_run_once(w, mm_orchestrate, &args, s, r);
}

/* Compares C with iters * the host product; writes the worst element into why on failure. */
static int mm_check_data(const mm_state *s, double *worst, char *why, size_t n)
{
    int64_t nn = s->n * s->n, at = 0;

    *worst = 0.0;
    for (int64_t i = 0; i < nn; i++) {
        double want = (double)s->iters * s->ref[i];
        double err = fabs(s->c[i] - want) / (want != 0.0 ? fabs(want) : 1.0);

        if (!(err <= *worst)) { /* also catches NaN */
            *worst = err;
            at = i;
        }
    }
    if (*worst < MM_TOLERANCE)
        return 1;
    snprintf(why, n,
             "C[%lld][%lld] = %.17g but the host computes %.17g (relative error %.3g, "
             "tolerance %g)",
             (long long)(at / s->n), (long long)(at % s->n), s->c[at],
             (double)s->iters * s->ref[at], *worst, MM_TOLERANCE);
    return 0;
}

static int mm_check(void *state, const px_example_result *r, char *why, size_t n)
{
    const mm_state *s = state;
    uint64_t t = (uint64_t)s->tiles, it = (uint64_t)s->iters;
    uint64_t want_tasks = it * t * t * t;
    uint64_t want_edges = t * t * (it * t - 1);
    double worst;

    if (!mm_check_data(s, &worst, why, n))
        return 0;
    if (r->tasks != want_tasks || r->edges != want_edges) {
        snprintf(why, n,
                 "counts differ: tasks %llu, edges %llu; with T = %llu tiles per side "
                 "and %llu iteration(s) expected %llu tasks (iters x T^3) and %llu edges "
                 "(T^2 x (iters x T - 1))",
                 (unsigned long long)r->tasks, (unsigned long long)r->edges, (unsigned long long)t,
                 (unsigned long long)it, (unsigned long long)want_tasks,
                 (unsigned long long)want_edges);
        return 0;
    }
    snprintf(why, n,
             "C = %s matches the host for N = %lld, tile %lld (max relative error "
             "%.3g); tasks %llu = %llu^3 x %d, edges %llu = %llu^2 x (%d x %llu - 1)",
             s->iters == 1 ? "A*B" : "iters*A*B", (long long)s->n, (long long)s->tile, worst,
             (unsigned long long)r->tasks, (unsigned long long)t, s->iters,
             (unsigned long long)r->edges, (unsigned long long)t, s->iters, (unsigned long long)t);
    return 1;
}

const px_example px_example_matmul = {
    .name = "matmul",
    .doc = "tiled f64 C = A*B: one task per (i,j,k) tile product on strided views",
    .level = 2,
    .default_size = 256,
    .default_tile = 64,
    .size_doc = "matrix edge N (any N; need not be a multiple of --tile)",
    .reg = mm_reg,
    .orchestrate = mm_orchestrate,
    .run = mm_run,
    .check = mm_check,
    .fini = mm_fini,
};
