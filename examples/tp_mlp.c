/*
 * tp_mlp.c - the level-3 tensor-parallel MLP example: Y = relu(X W1) W2 over n chips, W1
 * split by columns and W2 by rows (Megatron's column-parallel then row-parallel pair), so
 * each rank computes a partial Y from its slices alone and an allreduce (sum) gives the
 * whole Y on every rank.
 *
 * Shapes: X is M x K (M = --size rows), W1 is K x F and W2 is F x N with F = TP_F n: rank r
 * holds columns [r TP_F, (r + 1) TP_F) of W1 and the same rows of W2. One domain "tp" has
 * the buffers x, w1, w2, h, y on every rank. Per iteration the host writes X, the rank's W1
 * slice and its W2 slice into each rank's window, one group task on the domain runs
 * "tp_mlp.rank" on every rank (h = relu(x w1), y = h w2, then px_comm_allreduce of y inside the
 * kernel, as a real tensor-parallel layer fuses it), and the host reads y back from every
 * rank into its own row of the output.
 *
 * Values are small integers: X[m][k] = (3m + k) mod 5 - 2, W1[k][j] = (k + 2j) mod 3 - 1,
 * W2[j][c] = (2j + c) mod 3 - 1, so |h| <= 2K and |Y| <= 2KF stay far below 2^24, every
 * f32 product and sum is exact in any order, and the check compares each rank's Y for
 * equality with the single-chip result computed on the host in 64-bit integers from the
 * full W1 and W2 (not from the slices).
 *
 * Counts by hand. Tasks per iteration: 3n writes + 1 group task + n reads = 4n + 1. Edges:
 * the group task accesses every rank's whole window (one dense range, which drops the copy
 * views it covers from the tensor map):
 *   iteration 0: the group task after the 3n writes (3n), each read after it (n): 4n;
 *   iteration k > 0: each write after the previous group task (3n); the group task after
 *   the previous one, the 3n writes and the n previous reads (WAR): 3n + n + 1; each read
 *   after the group task (n); in all 8n + 1.
 *   Total: tasks K (4n + 1), edges 4n + (K - 1)(8n + 1).
 */
#include "examples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP_K 32          /* input features */
#define TP_F 16          /* hidden features per rank */
#define TP_N 24          /* output features */
#define TP_MAX_ROWS 65536
#define TP_MAX_ITERS 1000
#define TP_MAX_HOST_BYTES (256ull << 20)

/* Set by tp_reg before px_worker_init: every chip inherits them with the fork. */
static px_kernel_id tp_k_rank;
static px_callable_id tp_c_rank;

typedef struct tp_state {
    int n;              /* ranks: the chips of every host (host-major) */
    int nl, r0;         /* this host's ranks: r0 .. r0 + nl - 1 */
    int chips[PX_COMM_MAX_RANKS];
    int64_t m;          /* rows */
    int iters;
    float *x;           /* [M][K] */
    float *w1s;         /* [nl][K][TP_F]: this host's ranks' columns of W1 */
    float *w2s;         /* [nl][TP_F][N]: their rows of W2 */
    float *y;           /* [iters][nl][M][N] */
    int64_t *golden;    /* [M][N], single chip */
    char info[PX_EXAMPLE_WHY_MAX];
    char reasons[PX_EXAMPLE_REASONS_MAX]; /* the pairs not on direct, and why */
    px_example_opts opts;
} tp_state;

static int64_t tp_x(int64_t m, int64_t k)
{
    return (3 * m + k) % 5 - 2;
}

static int64_t tp_w1(int64_t k, int64_t j)
{
    return (k + 2 * j) % 3 - 1;
}

static int64_t tp_w2(int64_t j, int64_t c)
{
    return (2 * j + c) % 3 - 1;
}

/* ---- chip side ---- */

/* Checks that buffer name of c holds at least want floats; returns it or NULL (message). */
static float *tp_buffer(px_comm *c, const char *name, size_t want)
{
    size_t bytes = 0;
    float *p = px_comm_buffer(c, name, &bytes);

    if (p == NULL || bytes < want * sizeof(float)) {
        px_set_error(PX_EINVAL, "tp_mlp.rank: buffer \"%s\" of domain \"%s\" has %zu bytes, "
                     "needs %zu", name, px_comm_name(c), bytes, want * sizeof(float));
        return NULL;
    }
    return p;
}

/* Rank r: h = relu(x w1), y = h w2, then y = sum over ranks. Args: M, then the domain. */
static px_status tp_rank_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    size_t m = (size_t)px_arg_u64(a, 0);
    float *x, *w1, *w2, *h, *y;

    if (c == NULL)
        return PX_EINVAL;
    if ((x = tp_buffer(c, "x", m * TP_K)) == NULL ||
        (w1 = tp_buffer(c, "w1", TP_K * TP_F)) == NULL ||
        (w2 = tp_buffer(c, "w2", TP_F * TP_N)) == NULL ||
        (h = tp_buffer(c, "h", m * TP_F)) == NULL || (y = tp_buffer(c, "y", m * TP_N)) == NULL)
        return PX_EINVAL;
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < TP_F; j++) {
            float acc = 0;

            for (size_t k = 0; k < TP_K; k++)
                acc += x[i * TP_K + k] * w1[k * TP_F + j];
            h[i * TP_F + j] = acc > 0 ? acc : 0;
        }
        for (size_t col = 0; col < TP_N; col++) {
            float acc = 0;

            for (size_t j = 0; j < TP_F; j++)
                acc += h[i * TP_F + j] * w2[j * TP_N + col];
            y[i * TP_N + col] = acc;
        }
    }
    return px_comm_allreduce(c, y, m * TP_N, PX_F32, PX_OP_SUM);
}

static px_status tp_rank_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, tp_k_rank, &a, NULL);
}

/* ---- host side ---- */

static void tp_fini(void *state)
{
    tp_state *s = state;

    if (s == NULL)
        return;
    free(s->x);
    free(s->w1s);
    free(s->w2s);
    free(s->y);
    free(s->golden);
    free(s);
}

static px_status tp_validate(const px_example_opts *o, const tp_state *s)
{
    size_t bytes;

    if (o->op != NULL || o->dtype != NULL)
        return px_set_error(PX_EINVAL, "tp_mlp: it takes no --op or --dtype (got %s %s); only "
                            "allreduce reduces with a chosen operation and type", o->op ?
                            "--op" : "--dtype", o->op ? o->op : o->dtype);
    if (o->size < 1 || o->size > TP_MAX_ROWS)
        return px_set_error(PX_EINVAL, "tp_mlp: size %lld is out of range; use 1..%d rows",
                            (long long)o->size, TP_MAX_ROWS);
    if (o->iters < 1 || o->iters > TP_MAX_ITERS)
        return px_set_error(PX_EINVAL, "tp_mlp: iters %d is out of range; use 1..%d", o->iters,
                            TP_MAX_ITERS);
    if (__builtin_mul_overflow((size_t)o->size * TP_N * sizeof(float), (size_t)s->n, &bytes) ||
        __builtin_mul_overflow(bytes, (size_t)o->iters, &bytes) || bytes > TP_MAX_HOST_BYTES)
        return px_set_error(PX_EINVAL, "tp_mlp: %d iterations x %d ranks x %lld rows of Y are "
                            "more than the %llu bytes of host data it keeps; lower --size or "
                            "--iters", o->iters, s->n, (long long)o->size,
                            (unsigned long long)TP_MAX_HOST_BYTES);
    return PX_OK;
}

/* Fills X, the slices and the single-chip Y = relu(X W1) W2 (64-bit integers). */
static void tp_fill(tp_state *s)
{
    int64_t f = (int64_t)TP_F * s->n;

    for (int64_t i = 0; i < s->m; i++)
        for (int64_t k = 0; k < TP_K; k++)
            s->x[i * TP_K + k] = (float)tp_x(i, k);
    for (int q = 0; q < s->nl; q++) { /* this host's ranks r0 + q */
        int64_t r = s->r0 + q;

        for (int64_t k = 0; k < TP_K; k++)
            for (int64_t j = 0; j < TP_F; j++)
                s->w1s[((size_t)q * TP_K + k) * TP_F + j] = (float)tp_w1(k, r * TP_F + j);
        for (int64_t j = 0; j < TP_F; j++)
            for (int64_t c = 0; c < TP_N; c++)
                s->w2s[((size_t)q * TP_F + j) * TP_N + c] = (float)tp_w2(r * TP_F + j, c);
    }
    for (int64_t i = 0; i < s->m; i++) {
        for (int64_t c = 0; c < TP_N; c++) {
            int64_t acc = 0;

            for (int64_t j = 0; j < f; j++) {
                int64_t h = 0;

                for (int64_t k = 0; k < TP_K; k++)
                    h += tp_x(i, k) * tp_w1(k, j);
                acc += (h > 0 ? h : 0) * tp_w2(j, c);
            }
            s->golden[i * TP_N + c] = acc;
        }
    }
    for (size_t i = 0; i < (size_t)s->iters * (size_t)s->nl * (size_t)s->m * TP_N; i++)
        s->y[i] = -7.0f; /* a Y that was never read back shows */
}

/* Registration: the kernel (before px_worker_init) and the options; the data is made in
 * tp_run, once the worker knows its hosts. */
static px_status tp_reg(px_worker *w, const px_example_opts *o, void **state)
{
    tp_state *s = calloc(1, sizeof(*s));
    px_status st;

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "tp_mlp: cannot allocate its state");
    s->n = s->nl = px_worker_chips(w);
    s->opts = *o;
    if ((st = tp_validate(o, s)) == PX_OK)
        st = px_kernel_register(w, "tp_mlp.rank", tp_rank_kernel, NULL, &tp_k_rank);
    if (st == PX_OK)
        st = px_callable_register(w, "tp_mlp.rank", tp_rank_callable, &tp_c_rank);
    if (st != PX_OK) {
        tp_fini(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

/* The ranks over every host (host-major), checked again at that size, and this host's data. */
static px_status tp_setup(px_worker *w, tp_state *s)
{
    px_status st = px_example_ranks(w, "tp_mlp", &s->n, &s->nl, &s->r0, s->chips);

    if (st != PX_OK || (st = tp_validate(&s->opts, s)) != PX_OK)
        return st;
    s->m = s->opts.size;
    s->iters = s->opts.iters;
    s->x = malloc((size_t)s->m * TP_K * sizeof(float));
    s->w1s = malloc((size_t)s->nl * TP_K * TP_F * sizeof(float));
    s->w2s = malloc((size_t)s->nl * TP_F * TP_N * sizeof(float));
    s->y = malloc((size_t)s->iters * (size_t)s->nl * (size_t)s->m * TP_N * sizeof(float));
    s->golden = malloc((size_t)s->m * TP_N * sizeof(int64_t));
    if (s->x == NULL || s->w1s == NULL || s->w2s == NULL || s->y == NULL || s->golden == NULL)
        return px_set_error(PX_ENOMEM, "tp_mlp: cannot allocate the host data of %lld rows",
                            (long long)s->m);
    tp_fill(s);
    return PX_OK;
}

/* Writes a dense slice of t (len elements at element offset at) into rank's buffer. */
static px_status tp_write(px_orch *o, px_domain *d, int rank, const char *buffer,
                          const px_tensor *t, int64_t at, int64_t len)
{
    px_tensor v;
    px_status st = px_tensor_view(t, 1, &len, NULL, at, &v);

    return st == PX_OK ? px_submit_domain_write(o, d, rank, buffer, 0, &v, NULL) : st;
}

/* Iteration k: the inputs of every rank, the group task, every rank's Y. */
static px_status tp_step(px_orch *o, const tp_state *s, px_domain *d, const px_task_args *args,
                         int k)
{
    const int64_t w1n = TP_K * TP_F, w2n = TP_F * TP_N, yn = s->m * TP_N;
    px_task_args *per = calloc((size_t)s->n, sizeof(*per));
    px_status st = PX_OK;

    if (per == NULL)
        return px_set_error(PX_ENOMEM, "tp_mlp: out of host memory for %d ranks' args", s->n);
    for (int r = 0; r < s->n; r++) {
        px_args_init(&per[r]);
        px_args_scalar_u64(&per[r], (uint64_t)s->m);
    }
    for (int q = 0; st == PX_OK && q < s->nl; q++) { /* this host's ranks */
        int r = s->r0 + q;

        st = tp_write(o, d, r, "x", px_arg_tensor(args, 0), 0, s->m * TP_K);
        if (st == PX_OK)
            st = tp_write(o, d, r, "w1", px_arg_tensor(args, 1), q * w1n, w1n);
        if (st == PX_OK)
            st = tp_write(o, d, r, "w2", px_arg_tensor(args, 2), q * w2n, w2n);
    }
    if (st == PX_OK)
        st = px_submit_domain_task(o, d, tp_c_rank, per, NULL);
    free(per);
    for (int q = 0; st == PX_OK && q < s->nl; q++) {
        px_tensor v;

        st = px_tensor_view(px_arg_tensor(args, 3), 1, &yn, NULL,
                            ((int64_t)k * s->nl + q) * yn, &v);
        if (st == PX_OK)
            st = px_submit_domain_read(o, d, s->r0 + q, "y", 0, &v, NULL);
    }
    return st;
}

/* The orchestration: args are x, w1s, w2s (IN) and y [iters][n][M][N] (OUT). */
static px_status tp_orchestrate(px_orch *o, const px_task_args *args, void *state)
{
    tp_state *s = state;
    size_t m = (size_t)s->m, f = sizeof(float);
    px_domain_buffer b[5] = {{"x", m * TP_K * f}, {"w1", TP_K * TP_F * f},
                             {"w2", TP_F * TP_N * f}, {"h", m * TP_F * f}, {"y", m * TP_N * f}};
    px_domain_spec spec = {PX_DOMAIN_SPEC_HEADER,
                           .name = "tp", .chips = s->chips, .nchips = s->n,
                           .buffers = b, .nbuffers = 5};
    px_domain *d;
    px_status st;

    for (int i = 0; i < 5; i++)
        spec.window_bytes += (b[i].bytes + 63) / 64 * 64; /* buffers start 64-byte aligned */
    if ((st = px_domain_alloc(o, &spec, &d)) != PX_OK)
        return st;
    px_example_domain_info(d, s->chips, s->info, sizeof(s->info));
    px_example_domain_reasons(d, s->chips, s->reasons, sizeof(s->reasons));
    for (int k = 0; st == PX_OK && k < s->iters; k++)
        st = tp_step(o, s, d, args, k);
    if (st == PX_OK)
        st = px_domain_release(d);
    return st;
}

static px_status tp_run(px_worker *w, void *state, px_example_result *r)
{
    tp_state *s = state;
    px_status st = tp_setup(w, s);
    int64_t xs[2] = {s->m, TP_K}, w1s[3] = {s->nl, TP_K, TP_F}, w2s[3] = {s->nl, TP_F, TP_N};
    int64_t ys[4] = {s->iters, s->nl, s->m, TP_N};
    uint64_t n = (uint64_t)s->n, yb = (uint64_t)s->m * TP_N * sizeof(float);
    uint64_t in = ((uint64_t)s->m * TP_K + TP_K * TP_F + TP_F * TP_N) * sizeof(float);
    px_tensor tx, t1, t2, ty;
    px_task_args args;

    if (st != PX_OK)
        return st;

    px_tensor_make(&tx, s->x, PX_F32, 2, xs);
    px_tensor_make(&t1, s->w1s, PX_F32, 3, w1s);
    px_tensor_make(&t2, s->w2s, PX_F32, 3, w2s);
    px_tensor_make(&ty, s->y, PX_F32, 4, ys);
    px_args_init(&args);
    px_args_in(&args, &tx);
    px_args_in(&args, &t1);
    px_args_in(&args, &t2);
    px_args_out(&args, &ty);
    st = px_example_run_once(w, tp_orchestrate, &args, s, r);
    if (st == PX_OK)
        snprintf(r->comm, sizeof(r->comm), "%.300s; bytes moved %llu per iteration (copies "
                 "in %llu x %llu, out %llu x %llu, allreduce of Y %llu bus bytes = 2(n-1)/n x "
                 "%llu per rank), time %.3f ms for %d iteration%s%s", s->info,
                 (unsigned long long)(n * in + n * yb + 2 * (n - 1) * yb),
                 (unsigned long long)n, (unsigned long long)in, (unsigned long long)n,
                 (unsigned long long)yb, (unsigned long long)(2 * (n - 1) * yb),
                 (unsigned long long)yb, r->seconds * 1e3, s->iters, s->iters == 1 ? "" : "s",
                 s->reasons);
    return st;
}

static int tp_check(void *state, const px_example_result *r, char *why, size_t n)
{
    const tp_state *s = state;
    /* this host's tasks: its ranks' copies and its part of the group task */
    uint64_t nn = (uint64_t)s->nl, k = (uint64_t)s->iters;
    uint64_t want_tasks = k * (4 * nn + 1), want_edges = 4 * nn + (k - 1) * (8 * nn + 1);
    size_t yn = (size_t)s->m * TP_N;

    if (s->y == NULL || s->golden == NULL) {
        snprintf(why, n, "tp_mlp: no data was made (the run did not start)");
        return 0;
    }
    for (int it = 0; it < s->iters; it++) {
        for (int q = 0; q < s->nl; q++) {
            const float *y = s->y + ((size_t)it * (size_t)s->nl + (size_t)q) * yn;
            int rk = s->r0 + q;

            for (size_t i = 0; i < yn; i++) {
                if (y[i] != (float)s->golden[i]) {
                    snprintf(why, n, "iteration %d rank %d: Y[%zu][%zu] = %.9g but the single-"
                             "chip result is %lld", it, rk, i / TP_N, i % TP_N, (double)y[i],
                             (long long)s->golden[i]);
                    return 0;
                }
            }
        }
    }
    if (r->tasks != want_tasks || r->edges != want_edges) {
        snprintf(why, n, "counts differ: tasks %llu, edges %llu; expected %llu x (4 x %llu + 1) "
                 "= %llu tasks and 4 x %llu + (%llu - 1) x (8 x %llu + 1) = %llu edges",
                 (unsigned long long)r->tasks, (unsigned long long)r->edges,
                 (unsigned long long)k, (unsigned long long)nn, (unsigned long long)want_tasks,
                 (unsigned long long)nn, (unsigned long long)k, (unsigned long long)nn,
                 (unsigned long long)want_edges);
        return 0;
    }
    snprintf(why, n, "Y = relu(X W1) W2 (%lld x %d, hidden %d = %d x %d) matches the single-"
             "chip result on every rank, %d iteration%s; tasks %llu = %llu x (4 x %d + 1), "
             "edges %llu = 4 x %d + %llu x (8 x %d + 1)", (long long)s->m, TP_N, TP_F * s->n,
             s->n, TP_F, s->iters, s->iters == 1 ? "" : "s", (unsigned long long)r->tasks,
             (unsigned long long)k, s->nl, (unsigned long long)r->edges, s->nl,
             (unsigned long long)(k - 1), s->nl);
    return 1;
}

const px_example px_example_tp_mlp = {
    .name = "tp_mlp",
    .doc = "level 3: Y = relu(X W1) W2, W1 by columns and W2 by rows over the chips, allreduce",
    .level = 3,
    .default_size = 64,
    .default_tile = 0,
    .size_doc = "rows of X (K 32, hidden 16 per chip, N 24)",
    .reg = tp_reg,
    .orchestrate = tp_orchestrate,
    .run = tp_run,
    .check = tp_check,
    .fini = tp_fini,
};
