/*
 * test_mpi_suite.c - the collective suite on a domain spanning hosts, under mpirun (or on one
 * host with PLEXUS_COMM_TRANSPORT=mpi): `mpirun -np H test_mpi_suite CHIPS`. Every host makes
 * a level-3 worker of CHIPS chips and allocates one domain of every host's chips (host-major
 * ranks; `test_mpi_suite CHIPS uneven`: all but host 1's last chip, so hosts have different
 * member counts; `late`: host 1 reaches the allocation its deadline (PLEXUS_TIMEOUT_S) plus
 * 1 s x PLEXUS_TEST_SLACK late, so host 0's fails naming it; `wide`: a domain of more than
 * 64 ranks, e.g. 2 hosts x 64 chips, with the cases
 * below cut to a few whose folds the parent works out once before the fork); a kernel on every
 * member runs, checked inside the chip:
 *   - allreduce of counts 1, 7, 4096 and 262147, every dtype and op, the result compared
 *     byte for byte with a serial fold in rank order 0..n-1 (float inputs are not integers,
 *     so the order shows in the bits); the biggest must take the chain across hosts
 *     where every host has 2 members or more;
 *   - allgather and broadcast from the last rank (both through the chain: each host's bytes
 *     cross once) and from rank 0, alltoall, reduce_scatter (every
 *     dtype and op, byte for byte) and alltoallv with counts that differ per pair.
 * Prints PASS and exits 0 when every rank of this host passed, else FAIL: <why> and 1. Links
 * libplexus only: MPI is the plugin's (the proxy's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <plexus/plexus.h>

#define TS_BIG 262147
#define TS_MOVE 1000

static int g_chain; /* every host has 2 members or more: the big allreduce takes the chain */
static int g_wide;  /* `wide`: the cut suite of a domain of more than 64 ranks */

/* wide: the allreduces run, each with its rank-order fold over the domain's n ranks, worked
 * out by the parent before the fork (128 chips each folding 128 ranks' inputs of 262147
 * elements would take minutes on a small machine; the chips inherit the tables) */
typedef struct ts_case {
    size_t cnt;
    px_dtype dt;
    px_redop op;
    unsigned char *want;
} ts_case;

static ts_case g_cases[] = {{7, PX_F64, PX_OP_SUM, NULL},    {4096, PX_F32, PX_OP_SUM, NULL},
                            {4096, PX_I64, PX_OP_MAX, NULL}, {4096, PX_F64, PX_OP_PROD, NULL},
                            {4096, PX_I32, PX_OP_MIN, NULL}, {TS_BIG, PX_F32, PX_OP_SUM, NULL}};
#define TS_NCASES (sizeof(g_cases) / sizeof(g_cases[0]))
static px_kernel_id k_suite;
static px_callable_id c_suite;

static double ts_real(int r, size_t i, px_redop op)
{
    if (op == PX_OP_PROD)
        return 0.75 + 0.125 * (double)((i + (size_t)r) % 5); /* 0.75 .. 1.25 */
    return ((double)((i * 7 + (size_t)r * 13) % 101) - 50.0) * 0.37;
}

static int64_t ts_int(int r, size_t i, px_redop op)
{
    if (op == PX_OP_PROD)
        return 1 + (int64_t)((i + (size_t)r) % 3);
    return (int64_t)((i * 7 + (size_t)r * 13) % 101) - 50;
}

/* Element i of rank r's input in dt, stored at p. */
static void ts_input(void *p, px_dtype dt, int r, size_t i, px_redop op)
{
    switch (dt) {
    case PX_F32: *(float *)p = (float)ts_real(r, i, op); break;
    case PX_F64: *(double *)p = ts_real(r, i, op); break;
    case PX_I32: *(int32_t *)p = (int32_t)ts_int(r, i, op); break;
    default: *(int64_t *)p = ts_int(r, i, op); break;
    }
}

#define TS_FOLD(T, acc, v, op)                                                              \
    do {                                                                                    \
        T a_ = *(T *)(acc), v_ = *(const T *)(v);                                           \
        *(T *)(acc) = (op) == PX_OP_SUM ? a_ + v_ : (op) == PX_OP_PROD ? a_ * v_             \
                    : (op) == PX_OP_MIN ? (v_ < a_ ? v_ : a_) : (v_ > a_ ? v_ : a_);         \
    } while (0)

/* The serial fold in rank order of element i over n ranks, into acc (dt's bytes). */
static void ts_expected(void *acc, px_dtype dt, int n, size_t i, size_t shift, px_redop op)
{
    unsigned char v[8];

    ts_input(acc, dt, 0, i + shift, op);
    for (int r = 1; r < n; r++) {
        ts_input(v, dt, r, i + shift, op);
        switch (dt) {
        case PX_F32: TS_FOLD(float, acc, v, op); break;
        case PX_F64: TS_FOLD(double, acc, v, op); break;
        case PX_I32: TS_FOLD(int32_t, acc, v, op); break;
        default: TS_FOLD(int64_t, acc, v, op); break;
        }
    }
}

static px_status ts_fail(int r, const char *what, size_t i)
{
    return px_set_error(PX_EKERNEL, "rank %d: %s: element %zu differs from the rank-order fold",
                        r, what, i);
}

static int64_t ts_mv(int r, int b, size_t i)
{
    return (int64_t)r * 1000003 + (int64_t)b * 1009 + (int64_t)i;
}

/* wide: g_cases, then reduce_scatter of TS_MOVE-element blocks for two dtypes and ops */
static px_status ts_wide_reductions(px_comm *c, unsigned char *buf, int r, int n)
{
    unsigned char want[8];
    char what[96];
    px_status st;

    for (size_t k = 0; k < TS_NCASES; k++) {
        const ts_case *t = &g_cases[k];
        size_t es = px_dtype_size(t->dt);

        if (t->want == NULL)
            return px_set_error(PX_EKERNEL, "rank %d: the parent made no expected table", r);
        for (size_t i = 0; i < t->cnt; i++)
            ts_input(buf + i * es, t->dt, r, i, t->op);
        if ((st = px_comm_allreduce(c, buf, t->cnt, t->dt, t->op)) != PX_OK)
            return st;
        if (t->cnt == TS_BIG && (strcmp(px_comm_last_algorithm(c), "chain") == 0) != g_chain)
            return px_set_error(PX_EKERNEL, "rank %d: allreduce of %zu elements took \"%s\", "
                                "expected %s", r, t->cnt, px_comm_last_algorithm(c),
                                g_chain ? "the chain across hosts" : "a flat one");
        for (size_t i = 0; i < t->cnt; i++)
            if (memcmp(buf + i * es, t->want + i * es, es) != 0) {
                snprintf(what, sizeof(what), "allreduce count %zu %s op %d", t->cnt,
                         px_dtype_name(t->dt), (int)t->op);
                return ts_fail(r, what, i);
            }
    }
    for (int k = 0; k < 2; k++) {
        px_dtype dt = k == 0 ? PX_F32 : PX_I32;
        px_redop op = k == 0 ? PX_OP_SUM : PX_OP_MIN;
        size_t es = px_dtype_size(dt), bc = TS_MOVE;

        for (int b = 0; b < n; b++)
            for (size_t i = 0; i < bc; i++)
                ts_input(buf + ((size_t)b * bc + i) * es, dt, r, i + (size_t)b, op);
        if ((st = px_comm_reduce_scatter(c, buf, bc, dt, op)) != PX_OK)
            return st;
        for (int b = 0; b < n; b++)
            for (size_t i = 0; i < bc; i++) {
                if (b == r)
                    ts_expected(want, dt, n, i, (size_t)r, op);
                else
                    ts_input(want, dt, r, i + (size_t)b, op);
                if (memcmp(buf + ((size_t)b * bc + i) * es, want, es) != 0) {
                    snprintf(what, sizeof(what), "reduce_scatter of %zu %s, block %d", bc,
                             px_dtype_name(dt), b);
                    return ts_fail(r, what, i);
                }
            }
    }
    return PX_OK;
}

static px_status ts_reductions(px_comm *c, unsigned char *buf, int r, int n)
{
    static const size_t counts[] = {1, 7, 4096, TS_BIG};
    static const px_dtype dts[] = {PX_F32, PX_F64, PX_I32, PX_I64};
    static const px_redop ops[] = {PX_OP_SUM, PX_OP_PROD, PX_OP_MIN, PX_OP_MAX};
    unsigned char want[8];
    char what[96];
    px_status st;

    for (int k = 0; k < 64; k++) {
        size_t cnt = counts[k / 16], es;
        px_dtype dt = dts[(k / 4) % 4];
        px_redop op = ops[k % 4];

        es = px_dtype_size(dt);
        for (size_t i = 0; i < cnt; i++)
            ts_input(buf + i * es, dt, r, i, op);
        if ((st = px_comm_allreduce(c, buf, cnt, dt, op)) != PX_OK)
            return st;
        /* every pair across hosts is mpi: where every host has 2 members or more, the big
         * ones go along the chain of hosts */
        /* two ranks on mpi: the proxies carry every allreduce (an exchange up to 64 KiB,
         * halves above) */
        if (n == 2 && strcmp(px_comm_transport(c, 1 - r), "mpi") == 0 &&
            strcmp(px_comm_last_algorithm(c), "proxy") != 0)
            return px_set_error(PX_EKERNEL, "rank %d: allreduce of %zu elements over an mpi "
                                "pair took \"%s\", not the proxies' one", r, cnt,
                                px_comm_last_algorithm(c));
        if (cnt == TS_BIG && (strcmp(px_comm_last_algorithm(c), "chain") == 0) != g_chain)
            return px_set_error(PX_EKERNEL, "rank %d: allreduce of %zu elements took \"%s\", "
                                "expected %s", r, cnt, px_comm_last_algorithm(c),
                                g_chain ? "the chain across hosts" : "a flat one");
        for (size_t i = 0; i < cnt; i++) {
            ts_expected(want, dt, n, i, 0, op);
            if (memcmp(buf + i * es, want, es) != 0) {
                snprintf(what, sizeof(what), "allreduce count %zu %s op %d", cnt,
                         px_dtype_name(dt), (int)op);
                return ts_fail(r, what, i);
            }
        }
    }
    /* reduce_scatter: block r of rank r is the fold of every rank's block r, the other
     * blocks stay as they were; blocks of TS_MOVE elements, and of TS_BIG / n (several
     * segments of the proxies' halves at 2 ranks) */
    for (int k = 0; k < 32; k++) {
        px_dtype dt = dts[(k / 4) % 4];
        px_redop op = ops[k % 4];
        size_t es = px_dtype_size(dt), bc = k < 16 ? TS_MOVE : TS_BIG / (size_t)n;

        for (int b = 0; b < n; b++)
            for (size_t i = 0; i < bc; i++)
                ts_input(buf + ((size_t)b * bc + i) * es, dt, r, i + (size_t)b, op);
        if ((st = px_comm_reduce_scatter(c, buf, bc, dt, op)) != PX_OK)
            return st;
        if (n == 2 && strcmp(px_comm_transport(c, 1 - r), "mpi") == 0 &&
            strcmp(px_comm_last_algorithm(c), "proxy") != 0)
            return px_set_error(PX_EKERNEL, "rank %d: reduce_scatter over an mpi pair took "
                                "\"%s\", not the proxies' one", r, px_comm_last_algorithm(c));
        for (int b = 0; b < n; b++) {
            for (size_t i = 0; i < bc; i++) {
                if (b == r)
                    ts_expected(want, dt, n, i, (size_t)r, op);
                else
                    ts_input(want, dt, r, i + (size_t)b, op);
                if (memcmp(buf + ((size_t)b * bc + i) * es, want, es) != 0) {
                    snprintf(what, sizeof(what), "reduce_scatter of %zu %s op %d, block %d%s",
                             bc, px_dtype_name(dt), (int)op, b,
                             b == r ? "" : " (not its own: must stay)");
                    return ts_fail(r, what, i);
                }
            }
        }
    }
    return PX_OK;
}

static px_status ts_moves_in(px_comm *c, int64_t *buf, int r, int n, size_t *sc, size_t *so,
                             size_t *rc, size_t *ro);

/* allgather, broadcast, alltoall, alltoallv and a barrier (tables of n entries) */
static px_status ts_moves(px_comm *c, int64_t *buf, int r, int n)
{
    size_t *t = calloc(4 * (size_t)n, sizeof(size_t));
    px_status st;

    if (t == NULL)
        return px_set_error(PX_ENOMEM, "rank %d: no memory for the alltoallv tables", r);
    st = ts_moves_in(c, buf, r, n, t, t + n, t + 2 * n, t + 3 * n);
    free(t);
    return st;
}

static px_status ts_moves_in(px_comm *c, int64_t *buf, int r, int n, size_t *sc, size_t *so,
                             size_t *rc, size_t *ro)
{
    size_t cnt = TS_MOVE, at = 0;
    int64_t *send;
    px_status st;

    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < cnt; i++)
            buf[(size_t)b * cnt + i] = b == r ? ts_mv(r, b, i) : -1;
    if ((st = px_comm_allgather(c, buf, cnt, PX_I64)) != PX_OK)
        return st;
    if (strcmp(px_comm_last_algorithm(c), "chain") != 0) /* each host's blocks cross once */
        return px_set_error(PX_EKERNEL, "rank %d: allgather took \"%s\", not the chain",
                            r, px_comm_last_algorithm(c));
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < cnt; i++)
            if (buf[(size_t)b * cnt + i] != ts_mv(b, b, i))
                return ts_fail(r, "allgather", (size_t)b * cnt + i);
    for (int root = n - 1; root >= 0; root = root == 0 ? -1 : 0) {
        for (size_t i = 0; i < cnt; i++)
            buf[i] = ts_mv(r, 7, i);
        if ((st = px_comm_broadcast(c, buf, cnt, PX_I64, root)) != PX_OK)
            return st;
        if (r == 0 && root == n - 1 && strcmp(px_comm_last_algorithm(c), "chain") != 0)
            return px_set_error(PX_EKERNEL, "rank 0: broadcast from another host's rank %d "
                                "took \"%s\", not the chain", root, px_comm_last_algorithm(c));
        for (size_t i = 0; i < cnt; i++)
            if (buf[i] != ts_mv(root, 7, i))
                return ts_fail(r, "broadcast", i);
        if (root == 0)
            break;
    }
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < cnt; i++)
            buf[(size_t)b * cnt + i] = ts_mv(r, b, i);
    if ((st = px_comm_alltoall(c, buf, cnt, PX_I64)) != PX_OK)
        return st;
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < cnt; i++)
            if (buf[(size_t)b * cnt + i] != ts_mv(b, r, i))
                return ts_fail(r, "alltoall", (size_t)b * cnt + i);
    /* alltoallv: rank r sends 1 + (r + 3j) % 17 elements to rank j (both tables in the
     * window: the send one after the receive one) */
    send = buf + (size_t)n * 17; /* after the receive table (17 elements a peer at most) */
    for (int j = 0; j < n; j++) {
        sc[j] = 1 + (size_t)(r + 3 * j) % 17;
        so[j] = at;
        for (size_t i = 0; i < sc[j]; i++)
            send[at + i] = ts_mv(r, j, i);
        at += sc[j];
    }
    at = 0;
    for (int j = 0; j < n; j++) {
        rc[j] = 1 + (size_t)(j + 3 * r) % 17;
        ro[j] = at;
        at += rc[j];
    }
    if ((st = px_comm_alltoallv(c, send, sc, so, buf, rc, ro, PX_I64)) != PX_OK)
        return st;
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < rc[j]; i++)
            if (buf[ro[j] + i] != ts_mv(j, r, i))
                return ts_fail(r, "alltoallv", ro[j] + i);
    return px_comm_barrier(c);
}

static px_status ts_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    void *buf;
    px_status st;

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    buf = px_comm_buffer(c, "x", NULL);
    if ((st = (g_wide ? ts_wide_reductions : ts_reductions)(c, buf, px_comm_rank(c),
                                                           px_comm_size(c))) != PX_OK)
        return st;
    return ts_moves(c, buf, px_comm_rank(c), px_comm_size(c));
}

static px_status ts_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    (void)user;
    return px_submit(o, k_suite, &a, NULL);
}

typedef struct ts_run {
    int hosts, chips, host;
    int uneven; /* the domain leaves out host 1's last chip: hosts of 2 and 1 members */
    int late;   /* host 1 reaches the allocation late_s late */
    double late_s; /* the deadline (PLEXUS_TIMEOUT_S, 2 s in its test) + 1 s x the slack */
    char info[512];
} ts_run;

static px_status ts_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_run *t = user;
    int n = 0, *chips = calloc((size_t)t->hosts * (size_t)t->chips, sizeof(int));
    px_domain_buffer b = {"x", TS_BIG * 8};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER, .name = "suite", .chips = chips, .nchips = n,
                        .window_bytes = TS_BIG * 8, .buffers = &b, .nbuffers = 1};
    px_domain *d;
    px_status st;

    (void)args;
    if (chips == NULL)
        return px_set_error(PX_ENOMEM, "no memory for the members");
    for (int r = 0; r < t->hosts * t->chips; r++)
        if (!(t->uneven && r / t->chips == 1 && r % t->chips == t->chips - 1))
            chips[n++] = t->hosts == 1 ? r : px_chip_global(r / t->chips, r % t->chips);
    s.nchips = n;
    if (t->late && t->host == 1) {
        struct timespec late = {(time_t)t->late_s,
                                (long)((t->late_s - (double)(time_t)t->late_s) * 1e9)};

        nanosleep(&late, NULL);
    }
    st = px_domain_alloc(o, &s, &d);
    free(chips);
    if (st != PX_OK)
        return st;
    snprintf(t->info, sizeof(t->info), "%d ranks, rank 0 -> rank %d via %s", n, n - 1,
             px_domain_transport(d, 0, n - 1));
    if ((st = px_submit_domain_task(o, d, c_suite, NULL, NULL)) != PX_OK)
        return st;
    return px_domain_release(d);
}

int main(int argc, char **argv)
{
    px_config c;
    px_worker *w = NULL;
    ts_run t = {.chips = argc > 1 ? atoi(argv[1]) : 2,
                .uneven = argc > 2 && strcmp(argv[2], "uneven") == 0,
                .late = argc > 2 && strcmp(argv[2], "late") == 0};
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    int hosts = ws != NULL && atoi(ws) > 0 ? atoi(ws) : 1;
    px_status st;

    g_wide = argc > 2 && strcmp(argv[2], "wide") == 0;
    for (size_t k = 0; g_wide && k < TS_NCASES; k++) { /* before the fork: the chips' tables */
        ts_case *tc = &g_cases[k];
        size_t es = px_dtype_size(tc->dt);

        if ((tc->want = malloc(tc->cnt * es)) == NULL) {
            printf("FAIL: no memory for the expected folds\n");
            return 1;
        }
        for (size_t i = 0; i < tc->cnt; i++)
            ts_expected(tc->want + i * es, tc->dt, hosts * t.chips, i, 0, tc->op);
    }

    /* before the fork, so the chips see it: hosts from the launcher */
    g_chain = getenv("OMPI_COMM_WORLD_SIZE") != NULL && atoi(getenv("OMPI_COMM_WORLD_SIZE")) > 1 &&
              t.chips - t.uneven >= 2;
    px_config_default(&c);
    c.level = 3;
    c.chips = t.chips;
    c.cores = 1;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    if ((st = px_worker_create(&c, &w)) == PX_OK &&
        (st = px_kernel_register(w, "ts.suite", ts_kernel, NULL, &k_suite)) == PX_OK &&
        (st = px_callable_register(w, "ts.suite", ts_callable, &c_suite)) == PX_OK &&
        (st = px_worker_init(w)) == PX_OK) {
        const char *slack = getenv("PLEXUS_TEST_SLACK");

        t.hosts = px_worker_hosts(w);
        t.host = px_worker_host(w);
        t.late_s = c.timeout_s + (slack != NULL && atof(slack) > 1.0 ? atof(slack) : 1.0);
        st = px_run(w, ts_orch, NULL, &t);
    }
    if (st != PX_OK) {
        printf("host %d: FAIL: %s: %s\n", w != NULL ? px_worker_host(w) : -1,
               px_status_name(st), px_last_error());
        px_worker_destroy(w);
        return 1;
    }
    printf("host %d of %d: %s: every collective matches the rank-order fold\nPASS\n",
           px_worker_host(w), t.hosts, t.info);
    px_worker_destroy(w);
    return 0;
}
