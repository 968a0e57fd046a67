/*
 * moe.c - the level-3 mixture-of-experts example: expert-parallel dispatch and combine.
 *
 * n chips, one expert per chip (expert e lives on rank e). Rank r has T tokens (--size) of
 * width MOE_H; token t goes to expert
 *     e(r, t) = (floor(t^2 / (r + 3)) + r) mod n,
 * which gives every rank a different, uneven split (with 4 ranks and 64 tokens rank 0 sends
 * 32, 21, 0 and 11 tokens to experts 0..3: a count of 0 is exchanged too). Token values are
 * small integers x[r][t][h] = (31 r + 7 t + 3 h) mod 17 - 8, and expert e computes
 * y = x (e + 1) + e, so every result is exact in f32.
 *
 * One domain "moe" holds, per rank: tok (the rank's tokens, written by the host), res (its
 * tokens' results, read back by the host), send (tokens sorted by expert), scnt (tokens this
 * rank sends to each expert), cnt (tokens it receives from each rank), recv and eout (the
 * tokens this rank's expert got and its outputs, room for n T tokens), back (outputs
 * returned in send's order). Per iteration:
 *   1. n copy tasks write each rank's tokens into tok;
 *   2. group task moe.route: counts per expert into scnt and cnt, tokens sorted into send;
 *   3. px_submit_alltoall on cnt (one i64 per peer): afterwards cnt[j] is what rank j sends;
 *   4. group task moe.dispatch: px_comm_alltoallv send -> recv with per-peer counts scnt / cnt,
 *      then the rank's expert turns recv into eout;
 *   5. group task moe.combine: px_comm_alltoallv eout -> back (the counts reversed), then every
 *      token's result is put back at its original place in res;
 *   6. n copy tasks read res of each rank into the iteration's row of the output.
 * The check compares every result with the same routing and experts computed in this one
 * process on the host, for every iteration (--iters K repeats steps 1-6).
 *
 * Counts by hand. Tasks per iteration: n + 3 + n = 2n + 4. Edges: the group tasks access
 * every rank's whole window (one dense range that drops the views it covers from the map);
 * the alltoall's view of cnt on every rank is strided, so it is kept apart:
 *   iteration 0: route after the n writes (n); alltoall after route (1); dispatch after
 *   route and the alltoall (2); combine after dispatch (1); each read after combine (n):
 *   2n + 4;
 *   iteration k > 0: each write after the previous combine (n); route after the previous
 *   combine, the n writes and the n previous reads (2n + 1); then 1 + 2 + 1 + n as above:
 *   4n + 5.
 *   Total: tasks K (2n + 4), edges 2n + 4 + (K - 1)(4n + 5).
 */
#include "examples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOE_H 8                       /* token width */
#define MOE_MAX_RECV_BYTES (32u << 20) /* n T MOE_H floats: recv and eout, per rank */
#define MOE_MAX_ITERS 1000
#define MOE_MAX_HOST_BYTES (256ull << 20)

/* Set by moe_reg before px_worker_init: every chip inherits them with the fork. */
static px_kernel_id moe_k_route, moe_k_dispatch, moe_k_combine;
static px_callable_id moe_c_route, moe_c_dispatch, moe_c_combine;

typedef struct moe_state {
    int n;           /* ranks: the chips of every host (host-major) */
    int nl, r0;      /* this host's ranks: r0 .. r0 + nl - 1 */
    int chips[PX_COMM_MAX_RANKS];
    int64_t t;       /* tokens per rank */
    int iters;
    float *in;       /* [nl][T][H]: this host's ranks */
    float *out;      /* [iters][nl][T][H] */
    uint64_t remote; /* tokens routed to another rank, over all ranks */
    char info[PX_EXAMPLE_WHY_MAX];
    char reasons[PX_EXAMPLE_REASONS_MAX]; /* the pairs not on direct, and why */
    px_example_opts opts;
} moe_state;

static int moe_expert(int r, int64_t t, int n)
{
    return (int)((t * t / (r + 3) + r) % n);
}

static float moe_token(int r, int64_t t, int h)
{
    return (float)((31 * (int64_t)r + 7 * t + 3 * h) % 17 - 8);
}

/* ---- chip side: kernel args are T, then the domain ---- */

typedef struct moe_bufs {
    px_comm *c;
    int r, n;
    size_t t;
    float *tok, *res, *send, *recv, *eout, *back;
    int64_t *scnt, *cnt;
} moe_bufs;

/* Looks up buffer name, checking it holds bytes; NULL with a message otherwise. */
static void *moe_buffer(px_comm *c, const char *name, size_t want)
{
    size_t bytes = 0;
    void *p = px_comm_buffer(c, name, &bytes);

    if (p == NULL || bytes < want)
        px_set_error(PX_EINVAL, "moe: buffer \"%s\" of domain \"%s\" has %zu bytes, needs %zu",
                     name, px_comm_name(c), bytes, want);
    return p != NULL && bytes >= want ? p : NULL;
}

static px_status moe_bufs_get(const px_task_args *a, moe_bufs *b)
{
    size_t tok, all;

    b->c = px_arg_comm(a, px_arg_count(a) - 1);
    if (b->c == NULL)
        return PX_EINVAL;
    b->r = px_comm_rank(b->c);
    b->n = px_comm_size(b->c);
    b->t = (size_t)px_arg_u64(a, 0);
    tok = b->t * MOE_H * sizeof(float);
    all = tok * (size_t)b->n;
    if ((b->tok = moe_buffer(b->c, "tok", tok)) == NULL ||
        (b->res = moe_buffer(b->c, "res", tok)) == NULL ||
        (b->send = moe_buffer(b->c, "send", tok)) == NULL ||
        (b->back = moe_buffer(b->c, "back", tok)) == NULL ||
        (b->recv = moe_buffer(b->c, "recv", all)) == NULL ||
        (b->eout = moe_buffer(b->c, "eout", all)) == NULL ||
        (b->scnt = moe_buffer(b->c, "scnt", (size_t)b->n * 8)) == NULL ||
        (b->cnt = moe_buffer(b->c, "cnt", (size_t)b->n * 8)) == NULL)
        return PX_EINVAL;
    return PX_OK;
}

/* Element counts (tokens x MOE_H) and their prefix offsets from per-peer token counts. */
static void moe_counts(const int64_t *tokens, int n, size_t *count, size_t *off)
{
    size_t at = 0;

    for (int j = 0; j < n; j++) {
        count[j] = (size_t)tokens[j] * MOE_H;
        off[j] = at;
        at += count[j];
    }
}

/* Route: scnt[e] = tokens for expert e (cnt too, for the alltoall); send = tokens by expert. */
static px_status moe_route_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    size_t count[PX_COMM_MAX_RANKS], off[PX_COMM_MAX_RANKS];
    moe_bufs b;
    px_status st = moe_bufs_get(a, &b);

    if (st != PX_OK)
        return st;
    memset(b.scnt, 0, (size_t)b.n * sizeof(int64_t));
    for (size_t t = 0; t < b.t; t++)
        b.scnt[moe_expert(b.r, (int64_t)t, b.n)]++;
    memcpy(b.cnt, b.scnt, (size_t)b.n * sizeof(int64_t));
    moe_counts(b.scnt, b.n, count, off);
    for (size_t t = 0; t < b.t; t++) {
        int e = moe_expert(b.r, (int64_t)t, b.n);

        memcpy(b.send + off[e], b.tok + t * MOE_H, MOE_H * sizeof(float));
        off[e] += MOE_H;
    }
    return PX_OK;
}

/* Dispatch: the tokens go to their experts; this rank's expert (e = rank) computes eout. */
static px_status moe_dispatch_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    size_t sc[PX_COMM_MAX_RANKS], so[PX_COMM_MAX_RANKS];
    size_t rc[PX_COMM_MAX_RANKS], ro[PX_COMM_MAX_RANKS];
    moe_bufs b;
    px_status st = moe_bufs_get(a, &b);
    float e;
    size_t got;

    if (st != PX_OK)
        return st;
    moe_counts(b.scnt, b.n, sc, so);
    moe_counts(b.cnt, b.n, rc, ro);
    got = ro[b.n - 1] + rc[b.n - 1];
    if (got > b.t * MOE_H * (size_t)b.n)
        return px_set_error(PX_EKERNEL, "moe.dispatch: rank %d would receive %zu elements, room "
                            "for %zu: the exchanged counts are wrong", b.r, got,
                            b.t * MOE_H * (size_t)b.n);
    if ((st = px_comm_alltoallv(b.c, b.send, sc, so, b.recv, rc, ro, PX_F32)) != PX_OK)
        return st;
    e = (float)b.r;
    for (size_t i = 0; i < got; i++)
        b.eout[i] = b.recv[i] * (e + 1.0f) + e;
    return PX_OK;
}

/* Combine: the outputs go back to the tokens' ranks, then into the tokens' own places. */
static px_status moe_combine_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    size_t sc[PX_COMM_MAX_RANKS], so[PX_COMM_MAX_RANKS];
    size_t rc[PX_COMM_MAX_RANKS], ro[PX_COMM_MAX_RANKS];
    moe_bufs b;
    px_status st = moe_bufs_get(a, &b);

    if (st != PX_OK)
        return st;
    moe_counts(b.scnt, b.n, sc, so);
    moe_counts(b.cnt, b.n, rc, ro);
    if ((st = px_comm_alltoallv(b.c, b.eout, rc, ro, b.back, sc, so, PX_F32)) != PX_OK)
        return st;
    for (size_t t = 0; t < b.t; t++) {
        int e = moe_expert(b.r, (int64_t)t, b.n);

        memcpy(b.res + t * MOE_H, b.back + so[e], MOE_H * sizeof(float));
        so[e] += MOE_H;
    }
    return PX_OK;
}

static px_status moe_route_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, moe_k_route, &a, NULL);
}

static px_status moe_dispatch_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, moe_k_dispatch, &a, NULL);
}

static px_status moe_combine_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, moe_k_combine, &a, NULL);
}

/* ---- host side ---- */

static void moe_fini(void *state)
{
    moe_state *s = state;

    if (s == NULL)
        return;
    free(s->in);
    free(s->out);
    free(s);
}

static px_status moe_validate(const px_example_opts *o, const moe_state *s)
{
    size_t recv, host;

    if (o->op != NULL || o->dtype != NULL)
        return px_set_error(PX_EINVAL, "moe: it takes no --op or --dtype (got %s %s); only "
                            "allreduce reduces with a chosen operation and type", o->op ?
                            "--op" : "--dtype", o->op ? o->op : o->dtype);
    if (o->iters < 1 || o->iters > MOE_MAX_ITERS)
        return px_set_error(PX_EINVAL, "moe: iters %d is out of range; use 1..%d", o->iters,
                            MOE_MAX_ITERS);
    if (o->size < 1 ||
        __builtin_mul_overflow((size_t)o->size, (size_t)s->n * MOE_H * sizeof(float), &recv) ||
        recv > MOE_MAX_RECV_BYTES)
        return px_set_error(PX_EINVAL, "moe: size %lld is out of range; use 1..%llu tokens per "
                            "rank with %d ranks (an expert has room for every rank's tokens: "
                            "%d x size x %d floats, at most %u bytes)", (long long)o->size,
                            (unsigned long long)(MOE_MAX_RECV_BYTES /
                                                 ((size_t)s->n * MOE_H * sizeof(float))),
                            s->n, s->n, MOE_H, MOE_MAX_RECV_BYTES);
    if (__builtin_mul_overflow(recv, (size_t)o->iters + 1, &host) || host > MOE_MAX_HOST_BYTES)
        return px_set_error(PX_EINVAL, "moe: %d iterations of %d ranks x %lld tokens are more "
                            "than the %llu bytes of host data it keeps; lower --size or --iters",
                            o->iters, s->n, (long long)o->size,
                            (unsigned long long)MOE_MAX_HOST_BYTES);
    return PX_OK;
}

static px_status moe_register(px_worker *w)
{
    px_status st = px_kernel_register(w, "moe.route", moe_route_kernel, NULL, &moe_k_route);

    if (st == PX_OK)
        st = px_kernel_register(w, "moe.dispatch", moe_dispatch_kernel, NULL, &moe_k_dispatch);
    if (st == PX_OK)
        st = px_kernel_register(w, "moe.combine", moe_combine_kernel, NULL, &moe_k_combine);
    if (st == PX_OK)
        st = px_callable_register(w, "moe.route", moe_route_callable, &moe_c_route);
    if (st == PX_OK)
        st = px_callable_register(w, "moe.dispatch", moe_dispatch_callable, &moe_c_dispatch);
    if (st == PX_OK)
        st = px_callable_register(w, "moe.combine", moe_combine_callable, &moe_c_combine);
    return st;
}

/* Registration: the kernels (before px_worker_init, so every chip has them) and the options;
 * the data is made in moe_run, once the worker knows its hosts. */
static px_status moe_reg(px_worker *w, const px_example_opts *o, void **state)
{
    moe_state *s = calloc(1, sizeof(*s));
    px_status st;

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "moe: cannot allocate its state");
    s->n = s->nl = px_worker_chips(w);
    s->opts = *o;
    if ((st = moe_validate(o, s)) == PX_OK)
        st = moe_register(w);
    if (st != PX_OK) {
        moe_fini(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

/* The ranks over every host (host-major), checked again at that size, and this host's data. */
static px_status moe_setup(px_worker *w, moe_state *s)
{
    px_status st = px_example_ranks(w, "moe", &s->n, &s->nl, &s->r0, s->chips);
    size_t tok;

    if (st != PX_OK || (st = moe_validate(&s->opts, s)) != PX_OK)
        return st;
    s->t = s->opts.size;
    s->iters = s->opts.iters;
    tok = (size_t)s->nl * (size_t)s->t * MOE_H;
    s->in = malloc(tok * sizeof(float));
    s->out = malloc(tok * (size_t)s->iters * sizeof(float));
    if (s->in == NULL || s->out == NULL)
        return px_set_error(PX_ENOMEM, "moe: cannot allocate %zu floats of host data",
                            tok * ((size_t)s->iters + 1));
    for (int j = 0; j < s->nl; j++)
        for (int64_t t = 0; t < s->t; t++)
            for (int h = 0; h < MOE_H; h++)
                s->in[((size_t)j * (size_t)s->t + (size_t)t) * MOE_H + (size_t)h] =
                    moe_token(s->r0 + j, t, h);
    for (int r = 0; r < s->n; r++) /* over every host's ranks: the bytes moved */
        for (int64_t t = 0; t < s->t; t++)
            s->remote += moe_expert(r, t, s->n) != r;
    for (size_t i = 0; i < tok * (size_t)s->iters; i++)
        s->out[i] = 0.5f; /* every expert output is an integer: a missing one shows */
    return PX_OK;
}

/* Iteration k: steps 1-6 of the file comment. */
static px_status moe_step(px_orch *o, const moe_state *s, px_domain *d, const px_task_args *args,
                          int k)
{
    const int64_t row = s->t * MOE_H;
    px_task_args *per = calloc((size_t)s->n, sizeof(*per));
    px_status st = PX_OK;

    if (per == NULL)
        return px_set_error(PX_ENOMEM, "moe: out of host memory for %d ranks' args", s->n);
    for (int r = 0; r < s->n; r++) {
        px_args_init(&per[r]);
        px_args_scalar_u64(&per[r], (uint64_t)s->t);
    }
    for (int j = 0; st == PX_OK && j < s->nl; j++) { /* this host's ranks */
        px_tensor v;

        st = px_tensor_view(px_arg_tensor(args, 0), 1, &row, NULL, j * row, &v);
        if (st == PX_OK)
            st = px_submit_domain_write(o, d, s->r0 + j, "tok", 0, &v, NULL);
    }
    if (st == PX_OK)
        st = px_submit_domain_task(o, d, moe_c_route, per, NULL);
    if (st == PX_OK)
        st = px_submit_alltoall(o, d, "cnt", 1, PX_I64, NULL);
    if (st == PX_OK)
        st = px_submit_domain_task(o, d, moe_c_dispatch, per, NULL);
    if (st == PX_OK)
        st = px_submit_domain_task(o, d, moe_c_combine, per, NULL);
    for (int j = 0; st == PX_OK && j < s->nl; j++) {
        px_tensor v;

        st = px_tensor_view(px_arg_tensor(args, 1), 1, &row, NULL,
                            ((int64_t)k * s->nl + j) * row, &v);
        if (st == PX_OK)
            st = px_submit_domain_read(o, d, s->r0 + j, "res", 0, &v, NULL);
    }
    free(per);
    return st;
}

/* The orchestration: args are in [n][T][H] (IN) and out [iters][n][T][H] (OUT). */
static px_status moe_orchestrate(px_orch *o, const px_task_args *args, void *state)
{
    moe_state *s = state;
    size_t tok = (size_t)s->t * MOE_H * sizeof(float), all = tok * (size_t)s->n;
    size_t cnt = (size_t)s->n * sizeof(int64_t);
    px_domain_buffer b[8] = {{"tok", tok}, {"res", tok}, {"send", tok}, {"scnt", cnt},
                             {"cnt", cnt}, {"recv", all}, {"eout", all}, {"back", tok}};
    px_domain_spec spec = {PX_DOMAIN_SPEC_HEADER,
                           .name = "moe", .chips = s->chips, .nchips = s->n, .buffers = b,
                           .nbuffers = 8};
    px_domain *d;
    px_status st;

    for (int i = 0; i < 8; i++)
        spec.window_bytes += (b[i].bytes + 63) / 64 * 64; /* buffers start 64-byte aligned */
    if ((st = px_domain_alloc(o, &spec, &d)) != PX_OK)
        return st;
    px_example_domain_info(d, s->chips, s->info, sizeof(s->info));
    px_example_domain_reasons(d, s->chips, s->reasons, sizeof(s->reasons));
    for (int k = 0; st == PX_OK && k < s->iters; k++)
        st = moe_step(o, s, d, args, k);
    if (st == PX_OK)
        st = px_domain_release(d);
    return st;
}

static px_status moe_run(px_worker *w, void *state, px_example_result *r)
{
    moe_state *s = state;
    px_status st = moe_setup(w, s);
    int64_t is[3] = {s->nl, s->t, MOE_H}, os[4] = {s->iters, s->nl, s->t, MOE_H};
    uint64_t n = (uint64_t)s->n, tb = (uint64_t)s->t * MOE_H * sizeof(float);
    uint64_t payload = s->remote * MOE_H * sizeof(float), counts = n * (n - 1) * 8;
    px_tensor tin, tout;
    px_task_args args;

    if (st != PX_OK)
        return st;

    px_tensor_make(&tin, s->in, PX_F32, 3, is);
    px_tensor_make(&tout, s->out, PX_F32, 4, os);
    px_args_init(&args);
    px_args_in(&args, &tin);
    px_args_out(&args, &tout);
    st = px_example_run_once(w, moe_orchestrate, &args, s, r);
    if (st == PX_OK)
        snprintf(r->comm, sizeof(r->comm), "%.300s; bytes moved %llu per iteration (copies 2 x "
                 "%llu x %llu, counts alltoall %llu, dispatch and combine 2 x %llu: %llu tokens "
                 "leave their rank), time %.3f ms for %d iteration%s%s", s->info,
                 (unsigned long long)(2 * n * tb + counts + 2 * payload), (unsigned long long)n,
                 (unsigned long long)tb, (unsigned long long)counts,
                 (unsigned long long)payload, (unsigned long long)s->remote, r->seconds * 1e3,
                 s->iters, s->iters == 1 ? "" : "s", s->reasons);
    return st;
}

static int moe_check(void *state, const px_example_result *r, char *why, size_t n)
{
    const moe_state *s = state;
    /* this host's tasks: its ranks' copies and its part of each group task */
    uint64_t nn = (uint64_t)s->nl, k = (uint64_t)s->iters;
    uint64_t want_tasks = k * (2 * nn + 4), want_edges = 2 * nn + 4 + (k - 1) * (4 * nn + 5);

    if (s->in == NULL || s->out == NULL) {
        snprintf(why, n, "moe: no data was made (the run did not start)");
        return 0;
    }
    for (int it = 0; it < s->iters; it++) {
        for (int j = 0; j < s->nl; j++) {
            int rk = s->r0 + j;

            for (int64_t t = 0; t < s->t; t++) {
                int e = moe_expert(rk, t, s->n);

                for (int h = 0; h < MOE_H; h++) {
                    size_t at = (((size_t)it * (size_t)s->nl + (size_t)j) * (size_t)s->t +
                                 (size_t)t) * MOE_H + (size_t)h;
                    float want = moe_token(rk, t, h) * (float)(e + 1) + (float)e;

                    if (s->out[at] != want) {
                        snprintf(why, n, "iteration %d rank %d token %lld (expert %d) element "
                                 "%d: %g, the host computes %g", it, rk, (long long)t, e, h,
                                 (double)s->out[at], (double)want);
                        return 0;
                    }
                }
            }
        }
    }
    if (r->tasks != want_tasks || r->edges != want_edges) {
        snprintf(why, n, "counts differ: tasks %llu, edges %llu; expected %llu x (2 x %llu + 4) "
                 "= %llu tasks and 2 x %llu + 4 + (%llu - 1) x (4 x %llu + 5) = %llu edges",
                 (unsigned long long)r->tasks, (unsigned long long)r->edges,
                 (unsigned long long)k, (unsigned long long)nn, (unsigned long long)want_tasks,
                 (unsigned long long)nn, (unsigned long long)k, (unsigned long long)nn,
                 (unsigned long long)want_edges);
        return 0;
    }
    snprintf(why, n, "%lld tokens x %d per rank routed to %d expert%s (%llu leave their rank), "
             "dispatched, computed and combined back: every result matches the host, %d "
             "iteration%s; tasks %llu = %llu x (2 x %d + 4), edges %llu = 2 x %d + 4 + %llu x "
             "(4 x %d + 5)", (long long)s->t, MOE_H, s->n, s->n == 1 ? "" : "s",
             (unsigned long long)s->remote, s->iters, s->iters == 1 ? "" : "s",
             (unsigned long long)r->tasks, (unsigned long long)k, s->nl,
             (unsigned long long)r->edges, s->nl, (unsigned long long)(k - 1), s->nl);
    return 1;
}

const px_example px_example_moe = {
    .name = "moe",
    .doc = "level 3: expert-parallel dispatch (alltoall counts, alltoallv tokens) and combine",
    .level = 3,
    .default_size = 64,
    .default_tile = 0,
    .size_doc = "tokens per rank (width 8; one expert per chip)",
    .reg = moe_reg,
    .orchestrate = moe_orchestrate,
    .run = moe_run,
    .check = moe_check,
    .fini = moe_fini,
};
