/*
 * allreduce.c - the level-3 allreduce example: every chip is a rank of one domain, the host
 * writes each rank's input into its window, one orchestration-level allreduce combines them
 * in place, and the host reads every rank's result back.
 *
 * With n chips and N elements (--size) of type --dtype, rank r's element i is:
 *   sum       i + 100 r                 -> every rank ends with n i + 100 n (n - 1) / 2
 *   max, min  i + 100 ((r + i) mod n)   -> i + 100 (n - 1) and i; the rank holding the
 *                                          extreme changes with i, so taking one rank's
 *                                          buffer for the result fails the check
 *   prod      2 if (i + r) mod 4 == 0, -1 if it is 1, else 1
 *                                       -> (-1)^a 2^b, a and b the number of ranks with
 *                                          (i + r) mod 4 == 1 and == 0 (b <= 16 for 64 ranks)
 * All values are integers; the example refuses sizes whose largest value would not be exact
 * in the type (2^24 for f32, 2^31 - 1 for i32, 2^53 for f64), so every result, whatever the
 * order of the additions, is exact and the check compares for equality. The check computes
 * the expected value from the closed forms above, not by reducing the inputs again.
 *
 * --iters K repeats the main step K times in the one orchestration: write the inputs again,
 * allreduce, read every rank's result into its own row of the output (K x n x N), so every
 * iteration is checked.
 *
 * Counts by hand. Tasks per iteration: n writes + 1 allreduce + n reads = 2n + 1. Edges
 * (distinct producer/consumer pairs; the window holds only buffer x, so the allreduce's view
 * of x on every rank is one dense range that covers each rank's copy views):
 *   iteration 0: the allreduce after the n writes (n), each read after the allreduce (n): 2n;
 *   iteration k > 0: write r after the previous allreduce (WAW) and the previous read of rank
 *   r (WAR): 2n; the allreduce after the n writes and the previous allreduce: n + 1; each
 *   read after the allreduce: n; in all 4n + 1. With one rank the copy view of rank 0 is
 *   the whole domain, so the write covers the previous allreduce's view and the map drops it
 *   (the write still waits for that allreduce): the next allreduce has no edge to the
 *   previous one, 4n = 4 edges. Write e = 1 for n > 1, 0 for n = 1.
 *   Total: tasks K (2n + 1), edges 2n + (K - 1)(4n + e).
 */
#include "examples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AR_MAX_ELEMS (1ll << 24)
#define AR_MAX_HOST_BYTES (256ull << 20) /* inputs plus every iteration's outputs */
#define AR_MAX_ITERS 1000

typedef struct ar_state {
    int n;               /* ranks: the chips of every host (host-major: rank = host * nl + chip) */
    int nl, r0;          /* this host's ranks: r0 .. r0 + nl - 1 (its chips) */
    int chips[PX_COMM_MAX_RANKS];
    int64_t size;        /* elements per rank */
    int iters;
    px_redop op;
    px_dtype dt;
    size_t es;           /* element bytes */
    void *in;            /* [nl][size]: this host's ranks */
    void *out;           /* [iters][nl][size] */
    char info[PX_EXAMPLE_WHY_MAX]; /* the domain, from the orchestration */
    char reasons[PX_EXAMPLE_REASONS_MAX]; /* the pairs not on direct, and why */
    px_example_opts opts;
} ar_state;

/* Rank r's input element i (see the file comment). */
static int64_t ar_input(const ar_state *s, int r, int64_t i)
{
    switch (s->op) {
    case PX_OP_SUM:
        return i + 100 * (int64_t)r;
    case PX_OP_MIN:
    case PX_OP_MAX:
        return i + 100 * ((r + i) % s->n);
    default:
        switch ((i + r) % 4) {
        case 0:
            return 2;
        case 1:
            return -1;
        default:
            return 1;
        }
    }
}

/* How many r in [0, n) have r mod 4 == c. */
static int64_t ar_ranks_mod4(int n, int64_t c)
{
    return c < n ? (n - 1 - c) / 4 + 1 : 0;
}

/* The expected element i on every rank, from the closed forms. */
static int64_t ar_expected(const ar_state *s, int64_t i)
{
    int64_t n = s->n, a, b;

    switch (s->op) {
    case PX_OP_SUM:
        return n * i + 100 * n * (n - 1) / 2;
    case PX_OP_MAX:
        return i + 100 * (n - 1);
    case PX_OP_MIN:
        return i;
    default:
        b = ar_ranks_mod4(s->n, (4 - i % 4) % 4); /* (i + r) mod 4 == 0 */
        a = ar_ranks_mod4(s->n, (5 - i % 4) % 4); /* (i + r) mod 4 == 1 */
        return (a % 2 ? -1 : 1) * ((int64_t)1 << b);
    }
}

/* The largest value any input or result takes. */
static int64_t ar_largest(const ar_state *s)
{
    int64_t n = s->n, last = s->size - 1;

    switch (s->op) {
    case PX_OP_SUM:
        return n * last + 100 * n * (n - 1) / 2;
    case PX_OP_MIN:
    case PX_OP_MAX:
        return last + 100 * (n - 1);
    default:
        return (int64_t)1 << 16;
    }
}

/* The largest integer exactly representable (and not overflowing) in dt. */
static int64_t ar_exact_limit(px_dtype dt)
{
    switch (dt) {
    case PX_F32:
        return 1ll << 24;
    case PX_F64:
        return 1ll << 53;
    case PX_I32:
        return INT32_MAX;
    default:
        return INT64_MAX;
    }
}

static void ar_fini(void *state)
{
    ar_state *s = state;

    if (s == NULL)
        return;
    free(s->in);
    free(s->out);
    free(s);
}

static px_status ar_validate(const px_example_opts *o, ar_state *s)
{
    size_t bytes;
    px_status st;

    if ((st = px_example_redop("allreduce", o->op, &s->op)) != PX_OK ||
        (st = px_example_dtype("allreduce", o->dtype, &s->dt)) != PX_OK)
        return st;
    s->es = px_dtype_size(s->dt);
    if (o->size < 1 || o->size > AR_MAX_ELEMS)
        return px_set_error(PX_EINVAL, "allreduce: size %lld is out of range; use 1..%lld "
                            "elements per rank", (long long)o->size, (long long)AR_MAX_ELEMS);
    if (o->iters < 1 || o->iters > AR_MAX_ITERS)
        return px_set_error(PX_EINVAL, "allreduce: iters %d is out of range; use 1..%d",
                            o->iters, AR_MAX_ITERS);
    s->size = o->size;
    s->iters = o->iters;
    if (ar_largest(s) > ar_exact_limit(s->dt))
        return px_set_error(PX_EINVAL, "allreduce: with %d ranks and size %lld the %s result "
                            "reaches %lld, beyond the %lld that %s holds exactly; lower --size "
                            "or use --dtype f64 or i64", s->n, (long long)s->size,
                            px_example_redop_name(s->op), (long long)ar_largest(s),
                            (long long)ar_exact_limit(s->dt), px_dtype_name(s->dt));
    if (__builtin_mul_overflow((size_t)s->nl * s->es, (size_t)s->size, &bytes) ||
        __builtin_mul_overflow(bytes, (size_t)s->iters + 1, &bytes) || bytes > AR_MAX_HOST_BYTES)
        return px_set_error(PX_EINVAL, "allreduce: %d ranks x %lld elements of %s x (%d "
                            "iterations + 1) is more than the %llu bytes of host data it keeps; "
                            "lower --size or --iters", s->nl, (long long)s->size,
                            px_dtype_name(s->dt), s->iters,
                            (unsigned long long)AR_MAX_HOST_BYTES);
    return PX_OK;
}

/* Registration: the options are kept; the data is made in ar_run, once the worker knows its
 * hosts (under mpirun every host runs this program with the same options). */
static px_status ar_reg(px_worker *w, const px_example_opts *o, void **state)
{
    ar_state *s = calloc(1, sizeof(*s));
    px_status st;

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "allreduce: cannot allocate its state");
    s->n = s->nl = px_worker_chips(w);
    s->opts = *o;
    if ((st = ar_validate(o, s)) != PX_OK) {
        ar_fini(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

/* The ranks over every host (known after px_worker_init), checked again at that size, and
 * this host's data: the inputs of its ranks and the results, -7 until read back. */
static px_status ar_setup(px_worker *w, ar_state *s, const px_example_opts *o)
{
    px_status st = px_example_ranks(w, "allreduce", &s->n, &s->nl, &s->r0, s->chips);
    size_t row;

    if (st != PX_OK || (st = ar_validate(o, s)) != PX_OK)
        return st;
    row = (size_t)s->size * s->es;
    s->in = malloc((size_t)s->nl * row);
    s->out = malloc((size_t)s->iters * (size_t)s->nl * row);
    if (s->in == NULL || s->out == NULL)
        return px_set_error(PX_ENOMEM, "allreduce: cannot allocate %d x %lld elements of host "
                            "data", s->nl, (long long)s->size);
    for (int j = 0; j < s->nl; j++)
        for (int64_t i = 0; i < s->size; i++)
            px_example_elem_set(s->in, s->dt, (size_t)j * (size_t)s->size + (size_t)i,
                                ar_input(s, s->r0 + j, i));
    /* a result that was never read back shows as -7 */
    for (size_t i = 0; i < (size_t)s->iters * (size_t)s->nl * (size_t)s->size; i++)
        px_example_elem_set(s->out, s->dt, i, -7);
    return PX_OK;
}

/* Submits iteration k: write every rank's input, allreduce, read every rank's result. */
static px_status ar_step(px_orch *o, const ar_state *s, px_domain *d, const px_tensor *in,
                         const px_tensor *out, int k)
{
    const int64_t row[1] = {s->size};
    px_status st = PX_OK;

    for (int j = 0; st == PX_OK && j < s->nl; j++) { /* this host's ranks */
        px_tensor v;

        st = px_tensor_view(in, 1, row, NULL, (int64_t)j * s->size, &v);
        if (st == PX_OK)
            st = px_submit_domain_write(o, d, s->r0 + j, "x", 0, &v, NULL);
    }
    if (st == PX_OK)
        st = px_submit_allreduce(o, d, "x", (size_t)s->size, s->dt, s->op, NULL);
    for (int j = 0; st == PX_OK && j < s->nl; j++) {
        px_tensor v;

        st = px_tensor_view(out, 1, row, NULL, ((int64_t)k * s->nl + j) * s->size, &v);
        if (st == PX_OK)
            st = px_submit_domain_read(o, d, s->r0 + j, "x", 0, &v, NULL);
    }
    return st;
}

/* The orchestration: args are in [n][size] (IN) and out [iters][n][size] (OUT). */
static px_status ar_orchestrate(px_orch *o, const px_task_args *args, void *state)
{
    ar_state *s = state;
    size_t bytes = (size_t)s->size * s->es;
    px_domain_buffer b = {"x", bytes};
    px_domain_spec spec = {PX_DOMAIN_SPEC_HEADER,
                           .name = "allreduce", .chips = s->chips, .nchips = s->n,
                           .window_bytes = bytes, .buffers = &b, .nbuffers = 1};
    px_domain *d;
    px_status st = px_domain_alloc(o, &spec, &d);

    if (st != PX_OK)
        return st;
    px_example_domain_info(d, s->chips, s->info, sizeof(s->info));
    px_example_domain_reasons(d, s->chips, s->reasons, sizeof(s->reasons));
    for (int k = 0; st == PX_OK && k < s->iters; k++)
        st = ar_step(o, s, d, px_arg_tensor(args, 0), px_arg_tensor(args, 1), k);
    if (st == PX_OK)
        st = px_domain_release(d);
    return st;
}

static px_status ar_run(px_worker *w, void *state, px_example_result *r)
{
    ar_state *s = state;
    px_status st = ar_setup(w, s, &s->opts);
    int64_t ishape[2] = {s->nl, s->size}, oshape[3] = {s->iters, s->nl, s->size};
    uint64_t b = (uint64_t)s->size * s->es, n = (uint64_t)s->n;
    px_tensor tin, tout;
    px_task_args args;

    if (st != PX_OK)
        return st;

    px_tensor_make(&tin, s->in, s->dt, 2, ishape);
    px_tensor_make(&tout, s->out, s->dt, 3, oshape);
    px_args_init(&args);
    px_args_in(&args, &tin);
    px_args_out(&args, &tout);
    st = px_example_run_once(w, ar_orchestrate, &args, s, r);
    if (st == PX_OK)
        snprintf(r->comm, sizeof(r->comm), "%.300s; bytes moved %llu per iteration (copies "
                 "2 x %llu x %llu, allreduce %llu bus bytes = 2(n-1)/n x %llu per rank), "
                 "time %.3f ms for %d iteration%s%s", s->info,
                 (unsigned long long)(2 * n * b + 2 * (n - 1) * b), (unsigned long long)n,
                 (unsigned long long)b, (unsigned long long)(2 * (n - 1) * b),
                 (unsigned long long)b, r->seconds * 1e3, s->iters, s->iters == 1 ? "" : "s",
                 s->reasons);
    return st;
}

static int ar_check(void *state, const px_example_result *r, char *why, size_t n)
{
    const ar_state *s = state;
    /* this host's tasks: its ranks' copies and its part of each allreduce */
    uint64_t nn = (uint64_t)s->nl, k = (uint64_t)s->iters;
    /* e: each allreduce waits for the one before it once the domain has two ranks, on this
     * host or another (its slots and the peers' bytes) */
    uint64_t e = s->n > 1, want_tasks = k * (2 * nn + 1);
    uint64_t want_edges = 2 * nn + (k - 1) * (4 * nn + e);

    if (s->in == NULL || s->out == NULL) {
        snprintf(why, n, "allreduce: no data was made (the run did not start)");
        return 0;
    }
    for (int it = 0; it < s->iters; it++) {
        for (int j = 0; j < s->nl; j++) {
            int rk = s->r0 + j;

            for (int64_t i = 0; i < s->size; i++) {
                size_t at = ((size_t)it * (size_t)s->nl + (size_t)j) * (size_t)s->size +
                            (size_t)i;
                double got = px_example_elem_get(s->out, s->dt, at);
                int64_t want = ar_expected(s, i);

                if (got != (double)want) {
                    snprintf(why, n, "iteration %d rank %d element %lld: %s gave %.17g, "
                             "expected %lld", it, rk, (long long)i,
                             px_example_redop_name(s->op), got, (long long)want);
                    return 0;
                }
            }
        }
    }
    if (r->tasks != want_tasks || r->edges != want_edges) {
        snprintf(why, n, "counts differ: tasks %llu, edges %llu; expected %llu x (2 x %llu + 1) "
                 "= %llu tasks and 2 x %llu + (%llu - 1) x (4 x %llu + %llu) = %llu edges",
                 (unsigned long long)r->tasks, (unsigned long long)r->edges,
                 (unsigned long long)k, (unsigned long long)nn, (unsigned long long)want_tasks,
                 (unsigned long long)nn, (unsigned long long)k, (unsigned long long)nn,
                 (unsigned long long)e, (unsigned long long)want_edges);
        return 0;
    }
    snprintf(why, n, "allreduce %s of %lld %s on %d rank%s, %d iteration%s: every rank holds "
             "the expected value (element 0: %lld); tasks %llu = %llu x (2 x %d + 1), edges "
             "%llu = 2 x %d + %llu x (4 x %d + %llu)", px_example_redop_name(s->op),
             (long long)s->size, px_dtype_name(s->dt), s->n, s->n == 1 ? "" : "s", s->iters,
             s->iters == 1 ? "" : "s", (long long)ar_expected(s, 0),
             (unsigned long long)r->tasks, (unsigned long long)k, s->nl,
             (unsigned long long)r->edges, s->nl, (unsigned long long)(k - 1), s->nl,
             (unsigned long long)e);
    return 1;
}

const px_example px_example_allreduce = {
    .name = "allreduce",
    .doc = "level 3: every chip a rank; inputs i + 100 r, allreduce (--op, --dtype), read back",
    .level = 3,
    .default_size = 4096,
    .default_tile = 0,
    .size_doc = "elements per rank (--chips N ranks)",
    .reduces = 1,
    .reg = ar_reg,
    .orchestrate = ar_orchestrate,
    .run = ar_run,
    .check = ar_check,
    .fini = ar_fini,
};
