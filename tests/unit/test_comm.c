/*
 * test_comm.c - the communicator with ranks as threads of one process, on the transport the
 * first argument names: "direct" (default: the ranks share their windows, what mapped windows
 * give chip processes), "staged" (no rank sees another's window: every pair shares staging
 * memory with small 16 KiB chunks, so large transfers are cut up, and every rank has its
 * progress thread), "mixed" (direct inside ranks 0-1, 2-3, ..., staged across them), or the
 * fallbacks, where some ranks have no staged peer at all while others do, as after a direct
 * mapping failed on a chip: "fallback1" (only the last pair, n-2 and n-1, is staged) and
 * "fallback2" (pairs 0 and n-1, 1 and n-1).
 *
 * Checks every collective at 1, 2, 3, 4 and 8 ranks with counts 1, 7, 4096 and 262147, every
 * reduction dtype and op (and an allreduce at 64 ranks, the most a domain has), against values
 * worked out here in rank order; that every rank ends bit-identical to rank 0; which algorithm
 * a size picks; put/get and put-then-signal ordering; a wait that times out (naming the
 * signal, the value waited for and the value seen); a death announced while a rank waits
 * (PX_EPEERDEAD within the wait's 50 ms slice, naming the rank); one-sided progress (a get
 * from and a put + signal to a rank that computes without calling in); bad input.
 */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/transport/staged.h"
#include "util/futex.h"
#include "util/util.h"

#define TC_MAX_RANKS 8
#define TC_GROUP_MAX 64 /* the largest group (the 64-rank case: 64 threads on one host) */
#define TC_NSIG 16
#define TC_BIG 262147

/* A group of ranks as threads: their windows, communicators and the shared death board. */
typedef struct tc_group {
    int n;
    size_t data_bytes;
    void *win[TC_GROUP_MAX];
    px_comm comm[TC_GROUP_MAX];
    hier_deaths deaths;
    double timeout_s;
    void *pair[TC_GROUP_MAX][TC_GROUP_MAX];  /* staging memory of ranks a < b */
    comm_bell bell[TC_GROUP_MAX];
    comm_progress *prog[TC_GROUP_MAX];
    uint8_t pairs[TC_GROUP_MAX * TC_GROUP_MAX]; /* the pair table every rank gets */
} tc_group;

enum { TC_DIRECT, TC_STAGED, TC_MIXED, TC_FALLBACK1, TC_FALLBACK2 };
static int tc_mode = TC_DIRECT;

#define TC_STG_CHUNK (16u << 10)

/* 1 when ranks a and b talk through staged in this run's mode. */
static int tc_staged(int a, int b, int n)
{
    int lo = a < b ? a : b, hi = a < b ? b : a;

    if (a == b)
        return 0;
    switch (tc_mode) {
    case TC_STAGED: return 1;
    case TC_MIXED: return a / 2 != b / 2;
    case TC_FALLBACK1: return hi == n - 1 && lo == n - 2; /* the last pair fell back */
    case TC_FALLBACK2: return n > 2 && hi == n - 1 && lo < 2; /* 0-(n-1) and 1-(n-1) did */
    default: return 0;
    }
}

typedef struct tc_thread {
    tc_group *g;
    int rank;
    int (*body)(px_comm *c, void *arg); /* returns failures counted */
    void *arg;
    int failures;
    pthread_t t;
} tc_thread;

static void tc_group_init_with(tc_group *g, int n, size_t data_bytes, double timeout_s,
                               size_t oneshot_max)
{
    size_t wb = px_comm_window_bytes(n, TC_NSIG, data_bytes);
    px_comm_buffer_desc buf = {.name = "buf", .off = 0, .bytes = data_bytes};

    memset(g, 0, sizeof(*g));
    g->n = n;
    g->data_bytes = data_bytes;
    g->timeout_s = timeout_s;
    for (int r = 0; r < n; r++) {
        assert_int_equal(posix_memalign(&g->win[r], 4096, wb), 0);
        memset(g->win[r], 0, wb);
    }
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            if (!tc_staged(a, b, n))
                continue;
            g->pair[a][b] = calloc(1, comm_stg_pair_bytes(TC_STG_CHUNK));
            assert_non_null(g->pair[a][b]);
            comm_stg_pair_init(g->pair[a][b], TC_STG_CHUNK);
        }
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            g->pairs[a * n + b] = tc_staged(a, b, n) ? PX_COMM_TL_STAGED : PX_COMM_TL_DIRECT;
    for (int r = 0; r < n; r++) {
        comm_link links[TC_GROUP_MAX];
        px_comm_spec s = {.name = "test", .rank = r, .n = n, .data_bytes = data_bytes,
                          .nsig = TC_NSIG, .pairs = g->pairs, .links = links,
                          .deaths = &g->deaths, .timeout_s = timeout_s, .spin_ns = 2000,
                          .yield_ns = 20000, .oneshot_max = oneshot_max, .buffers = &buf,
                          .nbuffers = 1};
        int staged = 0;

        memset(links, 0, sizeof(links));
        for (int q = 0; q < n; q++) { /* a staged peer's window is out of reach */
            if (q == r || !tc_staged(r, q, n)) {
                links[q].window = g->win[q];
            } else {
                links[q] = (comm_link){.shared = g->pair[PX_MIN(r, q)][PX_MAX(r, q)],
                                       .shared_bytes = comm_stg_pair_bytes(TC_STG_CHUNK),
                                       .bell = &g->bell[q]};
                staged++;
            }
        }
        /* the one connect routine, as the chips call it */
        PX_ASSERT_OK(comm_build(&g->comm[r], &s));
        if (staged > 0) {
            PX_ASSERT_OK(comm_progress_start(&g->bell[r], "tc-progress", &g->prog[r]));
            PX_ASSERT_OK(comm_progress_add(g->prog[r], &g->comm[r]));
        }
    }
}

static void tc_group_init(tc_group *g, int n, size_t data_bytes, double timeout_s)
{
    tc_group_init_with(g, n, data_bytes, timeout_s, 0);
}

static void tc_group_fini(tc_group *g)
{
    for (int r = 0; r < g->n; r++)
        comm_progress_stop(g->prog[r]);
    for (int r = 0; r < g->n; r++) {
        comm_fini(&g->comm[r]);
        free(g->win[r]);
    }
    for (int a = 0; a < g->n; a++)
        for (int b = a + 1; b < g->n; b++)
            free(g->pair[a][b]);
}

static void *tc_main(void *arg)
{
    tc_thread *t = arg;

    t->failures = t->body(&t->g->comm[t->rank], t->arg);
    return NULL;
}

/* Runs body on every rank at once; returns the failures of all ranks. */
static int tc_run(tc_group *g, int (*body)(px_comm *, void *), void *arg)
{
    tc_thread t[TC_GROUP_MAX];
    int failures = 0;

    for (int r = 0; r < g->n; r++) {
        t[r] = (tc_thread){.g = g, .rank = r, .body = body, .arg = arg};
        assert_int_equal(pthread_create(&t[r].t, NULL, tc_main, &t[r]), 0);
    }
    for (int r = 0; r < g->n; r++) {
        pthread_join(t[r].t, NULL);
        failures += t[r].failures;
    }
    return failures;
}

/* ---- expected values, worked out here ---- */

/* Rank r's input element i: small integers, so sums and products are exact in floats. */
static int64_t tc_input(int r, size_t i, px_redop op)
{
    if (op == PX_OP_PROD)
        return 1 + (int64_t)((i + (size_t)r) % 3); /* 1..3: 3^8 fits every type */
    return (int64_t)((i * 7 + (size_t)r * 13) % 101) - 50;
}

static void tc_store(void *buf, size_t i, px_dtype dt, int64_t v)
{
    switch (dt) {
    case PX_F32: ((float *)buf)[i] = (float)v; break;
    case PX_F64: ((double *)buf)[i] = (double)v; break;
    case PX_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case PX_I64: ((int64_t *)buf)[i] = v; break;
    default: break;
    }
}

static int64_t tc_load(const void *buf, size_t i, px_dtype dt)
{
    switch (dt) {
    case PX_F32: return (int64_t)((const float *)buf)[i];
    case PX_F64: return (int64_t)((const double *)buf)[i];
    case PX_I32: return ((const int32_t *)buf)[i];
    case PX_I64: return ((const int64_t *)buf)[i];
    default: return 0;
    }
}

static int64_t tc_expected(int n, size_t i, px_redop op)
{
    int64_t acc = tc_input(0, i, op);

    for (int r = 1; r < n; r++) {
        int64_t v = tc_input(r, i, op);

        switch (op) {
        case PX_OP_SUM: acc += v; break;
        case PX_OP_PROD: acc *= v; break;
        case PX_OP_MIN: acc = v < acc ? v : acc; break;
        case PX_OP_MAX: acc = v > acc ? v : acc; break;
        }
    }
    return acc;
}

/* ---- allreduce over every count, dtype and op ---- */

static const size_t tc_counts[] = {1, 7, 4096, TC_BIG};
static const px_dtype tc_dtypes[] = {PX_F32, PX_F64, PX_I32, PX_I64};
static const px_redop tc_ops[] = {PX_OP_SUM, PX_OP_PROD, PX_OP_MIN, PX_OP_MAX};

#define TC_NCASES (4 * 4 * 4)

/* After every case, rank 0's copy of each rank's result (bit-identity check). */
static int tc_bits_fail;

static int tc_body_allreduce(px_comm *c, void *arg)
{
    tc_group *g = arg;
    int r = px_comm_rank(c), n = px_comm_size(c), fails = 0;
    void *buf = px_comm_buffer(c, "buf", NULL);

    for (int k = 0; k < TC_NCASES; k++) {
        size_t count = tc_counts[k / 16];
        px_dtype dt = tc_dtypes[(k / 4) % 4];
        px_redop op = tc_ops[k % 4];
        size_t es = px_dtype_size(dt);
        px_status st;

        for (size_t i = 0; i < count; i++)
            tc_store(buf, i, dt, tc_input(r, i, op));
        st = px_comm_allreduce(c, buf, count, dt, op);
        if (st != PX_OK) {
            print_error("rank %d allreduce count %zu %s op %d: %s: %s\n", r, count,
                        px_dtype_name(dt), op, px_status_name(st), px_last_error());
            return fails + 1;
        }
        for (size_t i = 0; i < count; i++) {
            int64_t have = tc_load(buf, i, dt), want = tc_expected(n, i, op);

            if (dt == PX_I32)
                want = (int32_t)want;
            if (have != want) {
                print_error("rank %d of %d: allreduce count %zu %s op %d element %zu: %lld, "
                            "expected %lld\n", r, n, count, px_dtype_name(dt), op, i,
                            (long long)have, (long long)want);
                fails++;
                break;
            }
        }
        /* every rank's bits equal rank 0's: compare now, before the next case overwrites */
        if (px_comm_barrier(c) != PX_OK)
            return fails + 1;
        if (r != 0 && memcmp(buf, g->comm[0].data[0], count * es) != 0)
            __atomic_fetch_add(&tc_bits_fail, 1, __ATOMIC_RELAXED);
        if (px_comm_barrier(c) != PX_OK)
            return fails + 1;
    }
    return fails;
}

static void tc_allreduce_at(int n)
{
    tc_group g;

    tc_group_init(&g, n, TC_BIG * 8, 30.0 * px_test_slack());
    tc_bits_fail = 0;
    assert_int_equal(tc_run(&g, tc_body_allreduce, &g), 0);
    assert_int_equal(tc_bits_fail, 0);
    tc_group_fini(&g);
}

/* allreduce: 1, 2, 3, 4 and 8 ranks, counts 1, 7, 4096, 262147, 4 dtypes, 4 ops. */
static void test_allreduce_matrix(void **state)
{
    static const int ranks[] = {1, 2, 3, 4, 8};

    for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++)
        tc_allreduce_at(ranks[i]);
}

/* 64 ranks, the most a domain has: allreduce (sum, f64 and i32) of 1 and 4099 elements, every
 * rank's result checked against the fold worked out here, and the ranks bit-identical. */
static int tc_body_64(px_comm *c, void *arg)
{
    tc_group *g = arg;
    int r = px_comm_rank(c), n = px_comm_size(c), f = 0;
    void *buf = px_comm_buffer(c, "buf", NULL);
    static const size_t counts[2] = {1, 4099};
    static const px_dtype dts[2] = {PX_F64, PX_I32};

    for (int k = 0; k < 4 && !f; k++) {
        size_t cnt = counts[k / 2];
        px_dtype dt = dts[k % 2];

        for (size_t i = 0; i < cnt; i++)
            tc_store(buf, i, dt, tc_input(r, i, PX_OP_SUM));
        if (px_comm_allreduce(c, buf, cnt, dt, PX_OP_SUM) != PX_OK)
            return print_error("rank %d: %s\n", r, px_last_error()), 1;
        for (size_t i = 0; i < cnt && !f; i++)
            f += tc_load(buf, i, dt) != tc_expected(n, i, PX_OP_SUM);
        f += px_comm_barrier(c) != PX_OK;
        f += r != 0 && memcmp(buf, g->comm[0].data[0], cnt * px_dtype_size(dt)) != 0;
        f += px_comm_barrier(c) != PX_OK;
    }
    return f;
}

static void test_allreduce_64_ranks(void **state)
{
    tc_group g;

    tc_group_init(&g, TC_GROUP_MAX, 4099 * 8, 60.0 * px_test_slack());
    assert_int_equal(tc_run(&g, tc_body_64, &g), 0);
    tc_group_fini(&g);
}

/* ---- the data-movement collectives ---- */

typedef struct tc_move {
    tc_group *g;
    size_t count;
} tc_move;

/* Value of block b element i as rank r wrote it. */
static int64_t tc_mv(int r, int b, size_t i)
{
    return (int64_t)r * 1000003 + (int64_t)b * 1009 + (int64_t)(i % 997);
}

static int tc_check_i64(const int64_t *buf, size_t i, int64_t want, const char *what, int r)
{
    if (buf[i] == want)
        return 0;
    print_error("rank %d %s element %zu: %lld, expected %lld\n", r, what, i, (long long)buf[i],
                (long long)want);
    return 1;
}

static int tc_body_moves(px_comm *c, void *arg)
{
    tc_move *m = arg;
    int r = px_comm_rank(c), n = px_comm_size(c);
    int64_t *buf = px_comm_buffer(c, "buf", NULL);
    size_t cnt = m->count;
    px_status st;
    int f = 0;

    /* allgather: block r is mine; afterwards block b holds rank b's */
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < cnt; i++)
            buf[(size_t)b * cnt + i] = b == r ? tc_mv(r, b, i) : -1;
    if ((st = px_comm_allgather(c, buf, cnt, PX_I64)) != PX_OK)
        return print_error("allgather: %s\n", px_last_error()), 1;
    for (int b = 0; b < n && !f; b++)
        for (size_t i = 0; i < cnt && !f; i++)
            f += tc_check_i64(buf, (size_t)b * cnt + i, tc_mv(b, b, i), "allgather", r);

    /* broadcast from the last rank and from rank 0 */
    for (int root = n - 1; root >= 0 && !f; root = root == 0 ? -1 : 0) {
        for (size_t i = 0; i < cnt; i++)
            buf[i] = tc_mv(r, 7, i);
        if ((st = px_comm_broadcast(c, buf, cnt, PX_I64, root)) != PX_OK)
            return print_error("broadcast: %s\n", px_last_error()), f + 1;
        for (size_t i = 0; i < cnt && !f; i++)
            f += tc_check_i64(buf, i, tc_mv(root, 7, i), "broadcast", r);
    }

    /* alltoall: block b of rank r goes to block r of rank b */
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < cnt; i++)
            buf[(size_t)b * cnt + i] = tc_mv(r, b, i);
    if ((st = px_comm_alltoall(c, buf, cnt, PX_I64)) != PX_OK)
        return print_error("alltoall: %s\n", px_last_error()), f + 1;
    for (int b = 0; b < n && !f; b++)
        for (size_t i = 0; i < cnt && !f; i++)
            f += tc_check_i64(buf, (size_t)b * cnt + i, tc_mv(b, r, i), "alltoall", r);

    /* reduce_scatter, every dtype and op: block r of rank r is the fold over ranks, in rank
     * order, of their block r (inputs as the allreduce's, element index within the block) */
    for (int k = 0; k < 16 && !f; k++) {
        px_dtype dt = tc_dtypes[k / 4];
        px_redop op = tc_ops[k % 4];
        void *vb = buf;

        for (int b = 0; b < n; b++)
            for (size_t i = 0; i < cnt; i++)
                tc_store(vb, (size_t)b * cnt + i, dt, tc_input(r, i + (size_t)b, op));
        if ((st = px_comm_reduce_scatter(c, vb, cnt, dt, op)) != PX_OK)
            return print_error("reduce_scatter %s op %d: %s\n", px_dtype_name(dt), op,
                               px_last_error()), f + 1;
        for (size_t i = 0; i < cnt && !f; i++) {
            int64_t have = tc_load(vb, (size_t)r * cnt + i, dt);
            int64_t want = tc_expected(n, i + (size_t)r, op);

            if (dt == PX_I32)
                want = (int32_t)want;
            if (have != want) {
                print_error("rank %d: reduce_scatter %s op %d element %zu: %lld, expected "
                            "%lld\n", r, px_dtype_name(dt), op, i, (long long)have,
                            (long long)want);
                f++;
            }
        }
    }

    /* reduce_scatter (sum): block r of rank r is the sum over ranks of their block r */
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < cnt; i++)
            buf[(size_t)b * cnt + i] = tc_mv(r, b, i);
    if ((st = px_comm_reduce_scatter(c, buf, cnt, PX_I64, PX_OP_SUM)) != PX_OK)
        return print_error("reduce_scatter: %s\n", px_last_error()), f + 1;
    for (size_t i = 0; i < cnt && !f; i++) {
        int64_t want = 0;

        for (int q = 0; q < n; q++)
            want += tc_mv(q, r, i);
        f += tc_check_i64(buf, (size_t)r * cnt + i, want, "reduce_scatter", r);
    }
    return f + (px_comm_barrier(c) != PX_OK);
}

/* allgather, broadcast (two roots), alltoall, reduce_scatter (every dtype and op) at 1, 2, 3, 4
 * and 8 ranks, counts 1, 7, 4096 and 262147 per block. */
static void test_moves_matrix(void **state)
{
    static const int ranks[] = {1, 2, 3, 4, 8};

    for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
        for (size_t k = 0; k < 4; k++) {
            size_t cnt = tc_counts[k];
            tc_group g;
            tc_move m = {.g = &g, .count = cnt};

            tc_group_init(&g, ranks[i], (size_t)ranks[i] * cnt * 8, 30.0 * px_test_slack());
            assert_int_equal(tc_run(&g, tc_body_moves, &m), 0);
            tc_group_fini(&g);
        }
    }
}

/* ---- alltoallv ---- */

/* Rank r sends (r + 2 j) % 5 + 1 elements to rank j: distinct, uneven counts. */
static size_t tc_vcount(int r, int j)
{
    return (size_t)((r + 2 * j) % 5 + 1);
}

static int tc_body_a2av(px_comm *c, void *arg)
{
    int r = px_comm_rank(c), n = px_comm_size(c), f = 0;
    int64_t *buf = px_comm_buffer(c, "buf", NULL), *send = buf, *recv = buf + 64 * 8;
    size_t sc[TC_MAX_RANKS], so[TC_MAX_RANKS], rc[TC_MAX_RANKS], ro[TC_MAX_RANKS], o = 0;

    for (int j = 0; j < n; j++) {
        sc[j] = tc_vcount(r, j);
        so[j] = o;
        for (size_t i = 0; i < sc[j]; i++)
            send[o + i] = tc_mv(r, j, i);
        o += sc[j];
    }
    o = 0;
    for (int j = 0; j < n; j++) {
        rc[j] = tc_vcount(j, r);
        ro[j] = o;
        o += rc[j] + 1; /* a gap that must stay untouched */
        recv[o - 1] = -7;
    }
    if (px_comm_alltoallv(c, send, sc, so, recv, rc, ro, PX_I64) != PX_OK)
        return print_error("alltoallv: %s\n", px_last_error()), 1;
    for (int j = 0; j < n && !f; j++) {
        for (size_t i = 0; i < rc[j] && !f; i++)
            f += tc_check_i64(recv, ro[j] + i, tc_mv(j, r, i), "alltoallv", r);
        f += tc_check_i64(recv, ro[j] + rc[j], -7, "alltoallv gap", r);
    }
    /* a count mismatch: rank 0 expects one element too many from the last rank */
    if (n > 1) {
        px_status st;

        if (r == 0)
            rc[n - 1]++;
        st = px_comm_alltoallv(c, send, sc, so, recv, rc, ro, PX_I64);
        if (r == 0 && (st != PX_EINVAL || strstr(px_last_error(), "which expects") == NULL)) {
            print_error("mismatch: %s: %s\n", px_status_name(st), px_last_error());
            f++;
        }
        if (r != 0 && st != PX_OK)
            f++;
    }
    return f;
}

/* alltoallv with uneven per-peer counts and gaps, and a count mismatch reported, 1..8 ranks. */
static void test_alltoallv(void **state)
{
    for (int n = 1; n <= TC_MAX_RANKS; n++) {
        tc_group g;

        tc_group_init(&g, n, 64 * 8 * 8 * 2, 30.0 * px_test_slack());
        assert_int_equal(tc_run(&g, tc_body_a2av, NULL), 0);
        tc_group_fini(&g);
    }
}

/* ---- algorithm choice ---- */

static int tc_body_algo(px_comm *c, void *arg)
{
    float *buf = px_comm_buffer(c, "buf", NULL);
    int f = 0;

    memset(buf, 0, 4096 * sizeof(float));
    f += px_comm_allreduce(c, buf, 4096, PX_F32, PX_OP_SUM) != PX_OK;
    f += strcmp(px_comm_last_algorithm(c), "oneshot") != 0;
    f += px_comm_allreduce(c, buf, TC_BIG, PX_F32, PX_OP_SUM) != PX_OK;
    f += strcmp(px_comm_last_algorithm(c), "rs_ag") != 0;
    f += px_comm_allreduce(c, buf, 3, PX_F32, PX_OP_SUM) != PX_OK; /* fewer elements than ranks */
    f += strcmp(px_comm_last_algorithm(c), "oneshot") != 0;
    return f;
}

static int tc_body_algo_large(px_comm *c, void *arg)
{
    float *buf = px_comm_buffer(c, "buf", NULL);
    int r = px_comm_rank(c), f = 0;

    for (size_t i = 0; i < TC_BIG; i++)
        buf[i] = (float)(i % 101 + (size_t)r);
    f += px_comm_allreduce(c, buf, TC_BIG, PX_F32, PX_OP_SUM) != PX_OK;
    /* a domain with a pair that does not read in place takes reduce-scatter + allgather
     * above the push's sizes, whatever the threshold (coll/allreduce.c, allreduce_impl) */
    f += strcmp(px_comm_last_algorithm(c), c->all_in_place ? "oneshot_large" : "rs_ag") != 0;
    for (size_t i = 0; i < TC_BIG && !f; i++)
        f += buf[i] != (float)(4 * (i % 101) + 6); /* ranks 0..3 add 0 + 1 + 2 + 3 */
    return f;
}

/* 16 KiB picks one-shot through the slots (or the push, staged), 1 MiB reduce-scatter +
 * allgather (threshold 64 KiB), 4 ranks; with the threshold raised to 2 MiB, 1 MiB is a
 * two-barrier one-shot where every pair reads in place, and still rs_ag where one does not. */
static void test_algorithm_by_size(void **state)
{
    tc_group g;

    tc_group_init(&g, 4, TC_BIG * 4, 30.0 * px_test_slack());
    assert_int_equal(tc_run(&g, tc_body_algo, NULL), 0);
    tc_group_fini(&g);
    tc_group_init_with(&g, 4, TC_BIG * 4, 30.0 * px_test_slack(), 2u << 20);
    assert_int_equal(tc_run(&g, tc_body_algo_large, NULL), 0);
    tc_group_fini(&g);
}

/* ---- one-sided ordering, timeouts, deaths, bad input ---- */

#define TC_ROUNDS 2000

/* Rank 0 puts round k's bytes then signals k; rank 1 waits for k and must see the bytes;
 * then rank 1 gets rank 0's bytes back and checks them. */
static int tc_body_order(px_comm *c, void *arg)
{
    int r = px_comm_rank(c), f = 0;
    uint64_t *buf = px_comm_buffer(c, "buf", NULL);
    uint64_t local[64], got[64];
    size_t off;

    if (px_comm_offset(c, buf, sizeof(local), &off) != PX_OK)
        return 1;
    for (uint64_t k = 1; k <= TC_ROUNDS && !f; k++) {
        if (r == 0) {
            for (int i = 0; i < 64; i++)
                local[i] = k * 64 + (uint64_t)i;
            f += px_comm_put_signal(c, 1, off, local, sizeof(local), 3, PX_SIG_SET, k) != PX_OK;
            f += px_comm_wait_until(c, 4, PX_CMP_GE, k, 0) != PX_OK; /* rank 1 has read */
        } else {
            f += px_comm_wait_until(c, 3, PX_CMP_GE, k, 0) != PX_OK;
            for (int i = 0; i < 64 && !f; i++)
                f += buf[i] != k * 64 + (uint64_t)i;
            f += px_comm_signal(c, 0, 4, PX_SIG_ADD, 1) != PX_OK;
        }
    }
    if (r == 0) {
        for (int i = 0; i < 64; i++)
            buf[i] = 5000 + (uint64_t)i;
    }
    f += px_comm_barrier(c) != PX_OK;
    if (r == 1) {
        f += px_comm_get(c, 0, off, got, sizeof(got)) != PX_OK;
        for (int i = 0; i < 64; i++)
            f += got[i] != 5000 + (uint64_t)i;
    }
    return f;
}

/* 2000 rounds of put-then-signal: the bytes are there when the signal is; get reads back. */
static void test_put_signal_ordering(void **state)
{
    tc_group g;

    tc_group_init(&g, 2, 4096, 30.0 * px_test_slack());
    assert_int_equal(tc_run(&g, tc_body_order, NULL), 0);
    /* direct maps peers: rank 1 reaches rank 0's buffer through a peer pointer; staged
     * maps nothing of the peer's */
    if (tc_staged(0, 1, 2))
        assert_null(px_comm_peer_ptr(&g.comm[1], 0, g.comm[1].data[1] + 8));
    else
        assert_ptr_equal(px_comm_peer_ptr(&g.comm[1], 0, g.comm[1].data[1] + 8),
                         g.comm[0].data[0] + 8);
    assert_string_equal(px_comm_transport(&g.comm[1], 0), tc_staged(0, 1, 2) ? "staged" : "direct");
    assert_null(px_comm_peer_ptr(&g.comm[1], 2, g.comm[1].data[1]));
    tc_group_fini(&g);
}

/* One-sided progress: rank 2 computes for 1.5 s without calling into the domain; meanwhile
 * rank 0 gets 1 MiB from it and puts 1 MiB + a signal to it. On staged the target's progress
 * thread carries them out: the get returns in well under the busy time, and when rank 2 looks
 * (without waiting) the bytes and the signal are already in its window. */
#define TC_PROG_BYTES (1u << 20)

typedef struct tc_prog {
    double get_s;
    _Atomic int started;
} tc_prog;

static int tc_body_progress(px_comm *c, void *arg)
{
    tc_prog *p = arg;
    int r = px_comm_rank(c), f = 0;
    uint8_t *buf = px_comm_buffer(c, "buf", NULL), *mine;
    size_t half = TC_PROG_BYTES;
    uint64_t t0;

    if (r == 2)
        for (size_t i = 0; i < half; i++)
            buf[i] = (uint8_t)(i * 7 + 1);
    f += px_comm_barrier(c) != PX_OK;
    if (r == 2) {
        atomic_store(&p->started, 1);
        t0 = px_test_now_ns();
        while (px_test_now_ns() - t0 < (uint64_t)(1.5e9 * px_test_slack()))
            ; /* a long kernel: no comm call */
        if (px_comm_signal_read(c, 1) != 77) {
            print_error("rank 2: the signal is %llu after the busy time, expected 77\n",
                        (unsigned long long)px_comm_signal_read(c, 1));
            f++;
        }
        for (size_t i = 0; i < half && !f; i++)
            f += buf[half + i] != (uint8_t)(i * 3 + 5);
    } else if (r == 0) {
        if ((mine = malloc(half)) == NULL)
            return 1;
        while (!atomic_load(&p->started))
            sched_yield();
        t0 = px_test_now_ns();
        f += px_comm_get(c, 2, 0, mine, half) != PX_OK;
        p->get_s = (double)(px_test_now_ns() - t0) / 1e9;
        for (size_t i = 0; i < half && !f; i++)
            f += mine[i] != (uint8_t)(i * 7 + 1);
        for (size_t i = 0; i < half; i++)
            mine[i] = (uint8_t)(i * 3 + 5);
        f += px_comm_put_signal(c, 2, half, mine, half, 1, PX_SIG_SET, 77) != PX_OK;
        free(mine);
    }
    return f + (px_comm_barrier(c) != PX_OK);
}

static void test_one_sided_progress(void **state)
{
    tc_group g;
    tc_prog p = {0};

    tc_group_init(&g, 3, 2 * TC_PROG_BYTES, 30.0 * px_test_slack());
    assert_int_equal(tc_run(&g, tc_body_progress, &p), 0);
    print_message("get of 1 MiB from a busy rank over %s: %.3f s\n",
                  px_comm_transport(&g.comm[0], 2), p.get_s);
    /* the target is busy 1.5 s (times the slack): a get served by its progress thread (rung
     * at once) ends by deadline 0 + slack, one that waited for the target's kernel would take
     * the whole busy time */
    PX_ASSERT_BY(p.get_s, 0.0);
    tc_group_fini(&g);
}

/* A wait nobody answers: PX_ETIMEDOUT after about its deadline, naming the signal, the value
 * waited for and the value seen. */
static void test_wait_times_out(void **state)
{
    tc_group g;
    uint64_t t0;
    double took;

    tc_group_init(&g, 2, 4096, 30.0);
    PX_ASSERT_OK(px_comm_signal(&g.comm[1], 0, 5, PX_SIG_SET, 3));
    t0 = px_test_now_ns();
    assert_int_equal(px_comm_wait_until(&g.comm[0], 5, PX_CMP_GE, 9, 0.2), PX_ETIMEDOUT);
    took = (double)(px_test_now_ns() - t0) / 1e9;
    assert_true(took >= 0.19);
    PX_ASSERT_BY(took, 0.2); /* the wait's own 0.2 s timeout */
    assert_non_null(strstr(px_last_error(), "signal 5 to be >= 9; it is 3"));
    /* deadlines that overflowed to "at once" (seconds to nanoseconds) are refused */
    assert_int_equal(px_comm_wait_until(&g.comm[0], 5, PX_CMP_GE, 9, INFINITY), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "timeout inf s is out of range"));
    assert_int_equal(px_comm_wait_until(&g.comm[0], 5, PX_CMP_GE, 9, DBL_MAX), PX_EINVAL);
    assert_int_equal(px_comm_wait_until(&g.comm[0], 5, PX_CMP_GE, 9, 1e12), PX_EINVAL);
    assert_int_equal(px_comm_wait_until(&g.comm[0], 5, PX_CMP_GE, 9, NAN), PX_EINVAL);
    /* the longest one allowed is a real wait: it ends by the signal, not at once */
    PX_ASSERT_OK(px_comm_signal(&g.comm[1], 0, 5, PX_SIG_SET, 9));
    PX_ASSERT_OK(px_comm_wait_until(&g.comm[0], 5, PX_CMP_GE, 9, 1e7));
    tc_group_fini(&g);
}

/* Returns once a waiter of c's rank has announced its sleep on the rank's area (10 s times
 * the slack at most, then fails the test). */
static void tc_wait_asleep(px_comm *c)
{
    uint64_t t0 = px_test_now_ns();

    while (atomic_load(&c->area[c->rank]->sleepers) == 0 &&
           px_test_now_ns() - t0 < (uint64_t)(10e9 * px_test_slack()))
        sched_yield();
    assert_int_not_equal(atomic_load(&c->area[c->rank]->sleepers), 0);
}

typedef struct tc_death {
    tc_group *g;
    _Atomic int waiting;
    px_status st;
    double took;
} tc_death;

static void *tc_death_waiter(void *arg)
{
    tc_death *d = arg;
    uint64_t t0 = px_test_now_ns();

    atomic_store(&d->waiting, 1);
    d->st = px_comm_wait_until(&d->g->comm[0], 0, PX_CMP_EQ, 1, 20.0);
    d->took = (double)(px_test_now_ns() - t0) / 1e9;
    if (d->st == PX_EPEERDEAD && strstr(px_last_error(), "rank 2 of the domain is dead: "
                                        "chip 5 (pid 1) killed") == NULL)
        d->st = PX_EIO;
    return NULL;
}

/* A member's death announced while rank 0 sleeps in a 20 s wait: PX_EPEERDEAD within the
 * sleep's slice (PX_COMM_SLICE_NS, 50 ms, src/comm/comm.c), naming the dead rank and why. */
static void test_death_ends_wait(void **state)
{
    tc_group g;
    tc_death d = {.g = &g};
    pthread_t t;

    tc_group_init(&g, 3, 4096, 30.0);
    assert_int_equal(pthread_create(&t, NULL, tc_death_waiter, &d), 0);
    assert_int_equal(px_test_wait_flag(&d.waiting, 10.0), 0);
    tc_wait_asleep(&g.comm[0]); /* it really sleeps, not just "probably, after a while" */
    snprintf(g.deaths.why[2], sizeof(g.deaths.why[2]), "chip 5 (pid 1) killed by signal 9");
    atomic_fetch_or(&g.deaths.mask, 1ull << 2);
    pthread_join(t, NULL);
    assert_int_equal(d.st, PX_EPEERDEAD);
    PX_ASSERT_BY(d.took, 0.05); /* seen within one 50 ms slice of the sleep */
    tc_group_fini(&g);
}

/* A waiter that really slept (its futex waits counted) and the signal that woke it. */
typedef struct tc_sleeper {
    px_comm *c;
    _Atomic int started;
    px_status st;
    uint64_t sleeps;
} tc_sleeper;

static void *tc_sleeper_main(void *arg)
{
    tc_sleeper *t = arg;
    uint64_t before = atomic_load(&t->c->wait_sleeps);

    atomic_store(&t->started, 1);
    t->st = px_comm_wait_until(t->c, 3, PX_CMP_EQ, 1, 20.0);
    t->sleeps = atomic_load(&t->c->wait_sleeps) - before;
    return NULL;
}

/* The wait is util_wait's (issue 19): a signal to a rank nobody waits on makes no futex call
 * (direct: the signalling thread does it all); one to a rank whose waiter announced its sleep
 * makes exactly the one wake, and the waiter, which really slept (its futex waits counted,
 * not assumed after a pause), returns PX_OK. */
static void test_wake_only_sleepers(void **state)
{
    tc_group g;
    tc_sleeper t = {0};
    px_futex_counts a, b;
    pthread_t th;

    tc_group_init(&g, 2, 4096, 30.0);
    px_futex_counts_get(&a);
    for (int i = 0; i < 100; i++)
        PX_ASSERT_OK(px_comm_signal(&g.comm[1], 0, 2, PX_SIG_ADD, 1));
    px_futex_counts_get(&b);
    if (!tc_staged(0, 1, 2)) /* staged: the progress thread of rank 0 changes the slot */
        assert_int_equal(b.wakes - a.wakes, 0);
    t.c = &g.comm[0];
    assert_int_equal(pthread_create(&th, NULL, tc_sleeper_main, &t), 0);
    tc_wait_asleep(&g.comm[0]);
    px_futex_counts_get(&a);
    PX_ASSERT_OK(px_comm_signal(&g.comm[1], 0, 3, PX_SIG_SET, 1));
    px_futex_counts_get(&b);
    if (!tc_staged(0, 1, 2))
        assert_int_equal(b.wakes - a.wakes, 1);
    pthread_join(th, NULL);
    PX_ASSERT_OK(t.st);
    assert_true(t.sleeps >= 1);
    tc_group_fini(&g);
}

/* One-sided calls to a dead rank fail with PX_EPEERDEAD on every transport alike (direct
 * took the bytes and returned PX_OK, its get stale bytes); calls to live ranks still work. */
static void test_dead_peer_one_sided(void **state)
{
    tc_group g;
    px_comm *c;
    char b[64] = {0};

    tc_group_init(&g, 3, 4096, 5.0);
    c = &g.comm[0];
    snprintf(g.deaths.why[2], sizeof(g.deaths.why[2]), "chip 5 (pid 1) killed by signal 9");
    atomic_fetch_or(&g.deaths.mask, 1ull << 2);
    assert_int_equal(px_comm_put(c, 2, 0, b, sizeof(b)), PX_EPEERDEAD);
    assert_non_null(strstr(px_last_error(), "px_comm_put: domain \"test\" rank 0: rank 2 is "
                                            "dead: chip 5 (pid 1) killed by signal 9"));
    assert_int_equal(px_comm_get(c, 2, 0, b, sizeof(b)), PX_EPEERDEAD);
    assert_int_equal(px_comm_signal(c, 2, 0, PX_SIG_SET, 1), PX_EPEERDEAD);
    assert_int_equal(px_comm_put_signal(c, 2, 0, b, 8, 0, PX_SIG_SET, 1), PX_EPEERDEAD);
    assert_non_null(strstr(px_last_error(), "px_comm_put_signal: domain \"test\" rank 0: "
                                            "rank 2 is dead"));
    PX_ASSERT_OK(px_comm_put(c, 1, 0, b, sizeof(b)));
    PX_ASSERT_OK(px_comm_signal(c, 1, 0, PX_SIG_SET, 1));
    tc_group_fini(&g);
}

/* Misuse that returned PX_OK with wrong bytes or read out of bounds (issue 20): an
 * overlapping put to self, a misaligned reduction buffer, alltoallv with send == recv, a
 * peer pointer one past the window, put_signal's messages on every transport. */
static void test_small_misuse(void **state)
{
    tc_group g;
    px_comm *c;
    char *d;
    size_t cnt[2] = {4, 4}, offs[2] = {0, 4};

    tc_group_init(&g, 2, 4096, 5.0);
    c = &g.comm[0];
    d = px_comm_buffer(c, "buf", NULL);
    for (int i = 0; i < 128; i++)
        d[i] = (char)i;
    PX_ASSERT_OK(px_comm_put(c, 0, 8, d, 64)); /* to self, overlapping */
    for (int i = 0; i < 64; i++)
        assert_int_equal(d[8 + i], i);
    PX_ASSERT_OK(px_comm_get(c, 0, 0, d + 4, 64)); /* from self, overlapping */
    assert_int_equal(d[4], 0);
    assert_int_equal(d[67], 55); /* the old d[63], which the put made 55 */
    assert_int_equal(px_comm_allreduce(c, d + 2, 4, PX_F32, PX_OP_SUM), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "not aligned to its 4-byte elements"));
    assert_int_equal(px_comm_reduce_scatter(c, d + 4, 2, PX_F64, PX_OP_SUM), PX_EINVAL);
    assert_int_equal(px_comm_alltoallv(c, d, cnt, offs, d, cnt, offs, PX_I32), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "overlaps the recv block"));
    assert_null(px_comm_peer_ptr(c, 1, d + 4096));
    if (!tc_staged(0, 1, 2))
        assert_non_null(px_comm_peer_ptr(c, 1, d + 4095));
    assert_int_equal(px_comm_put_signal(c, 1, 4090, d, 64, 0, PX_SIG_SET, 1), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "px_comm_put_signal: "));
    assert_int_equal(px_comm_put_signal(c, 1, 0, d, 8, 0, (px_sig_op)7, 1), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "px_comm_put_signal: op 7"));
    tc_group_fini(&g);
}

/* ---- mismatched collectives (issue 20) ---- */

/* What the odd rank (the last) calls instead of the others' allreduce(16, f32, sum). */
enum { TC_MM_COUNT, TC_MM_DTYPE, TC_MM_OP, TC_MM_KIND, TC_MM_BARRIER, TC_MM_ROOT,
       TC_MM_ZERO, TC_MM_NCASES };

typedef struct tc_mm {
    int kase;
    double secs[TC_GROUP_MAX];  /* how long each rank's failing call took */
    px_status st[TC_GROUP_MAX], later[TC_GROUP_MAX];
    char msg[TC_GROUP_MAX][256];
} tc_mm;

static int tc_body_mismatch(px_comm *c, void *arg)
{
    tc_mm *m = arg;
    int r = px_comm_rank(c), odd = r == px_comm_size(c) - 1, f = 0;
    float *buf = px_comm_buffer(c, "buf", NULL);
    struct timespec t0, t1;
    px_status st;

    for (int i = 0; i < 64; i++)
        buf[i] = (float)(r + i);
    /* a matched call first: the domain works until the mismatch */
    f += px_comm_allreduce(c, buf, 16, PX_F32, PX_OP_SUM) != PX_OK;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!odd && m->kase == TC_MM_ROOT)
        st = px_comm_broadcast(c, buf, 16, PX_F32, 0);
    else if (!odd)
        st = px_comm_allreduce(c, buf, 16, PX_F32, PX_OP_SUM);
    else if (m->kase == TC_MM_COUNT)
        st = px_comm_allreduce(c, buf, 17, PX_F32, PX_OP_SUM);
    else if (m->kase == TC_MM_DTYPE)
        st = px_comm_allreduce(c, buf, 16, PX_I32, PX_OP_SUM);
    else if (m->kase == TC_MM_OP)
        st = px_comm_allreduce(c, buf, 16, PX_F32, PX_OP_MAX);
    else if (m->kase == TC_MM_KIND)
        st = px_comm_allgather(c, buf, 4, PX_F32);
    else if (m->kase == TC_MM_BARRIER) /* a lone extra barrier before the allreduce */
        st = px_comm_barrier(c);
    else if (m->kase == TC_MM_ROOT)
        st = px_comm_broadcast(c, buf, 16, PX_F32, 1);
    else
        st = px_comm_allreduce(c, buf, 0, PX_F32, PX_OP_SUM);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    m->st[r] = st;
    m->secs[r] = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    snprintf(m->msg[r], sizeof(m->msg[r]), "%s", px_last_error());
    /* the domain is out of step now: a later collective is refused at once, saying why */
    m->later[r] = px_comm_allreduce(c, buf, 16, PX_F32, PX_OP_SUM);
    if (f > 0) print_error("case %d n %d rank %d first call failed: %s\n", m->kase, px_comm_size(c), r, px_last_error());
    if (m->later[r] != PX_ESTATE || strstr(px_last_error(), "release the domain") == NULL) {
        print_error("rank %d: later call: %s: %s\n", r, px_status_name(m->later[r]),
                    px_last_error());
        f++;
    }
    return f;
}

/* Every way of calling another collective than the peers (count, dtype, op, kind, a lone
 * barrier, root, count 0) fails on every rank with PX_EINVAL naming both calls, well before
 * the deadline, and later calls are refused; at 2, 3 and 4 ranks. */
static void test_mismatch(void **state)
{
    static const int ranks[] = {2, 3, 4};

    for (size_t ri = 0; ri < sizeof(ranks) / sizeof(ranks[0]); ri++) {
        for (int k = 0; k < TC_MM_NCASES; k++) {
            tc_group g;
            tc_mm m = {.kase = k};
            int n = ranks[ri];

            tc_group_init(&g, n, 4096, 20.0);
            assert_int_equal(tc_run(&g, tc_body_mismatch, &m), 0);
            for (int r = 0; r < n; r++) {
                /* at once (deadline 0): the failure is announced in the peers' barrier
                 * slots, so nobody waits for the 20 s deadline */
                if (m.st[r] != PX_EINVAL || strstr(m.msg[r], "mismatched collectives") == NULL ||
                    !(m.secs[r] <= px_test_bound_s(0.0))) {
                    print_error("%d ranks, case %d, rank %d: %s after %.3f s (bound %.3f s): "
                                "%s\n",
                                n, k, r, px_status_name(m.st[r]), m.secs[r], px_test_bound_s(0.0),
                                m.msg[r]);
                    fail();
                }
            }
            if (n == 2 && k == TC_MM_COUNT) /* both calls named, as far as each knows */
                assert_non_null(strstr(m.msg[1], "px_comm_allreduce(f32, sum, count 17)"));
            tc_group_fini(&g);
        }
    }
}

/* Bad peers, signals, ranges, buffers outside the window, dtypes and ops: PX_EINVAL. */
static void test_bad_input(void **state)
{
    tc_group g;
    px_comm *c;
    char outside[64];
    uint8_t *buf;

    tc_group_init(&g, 2, 4096, 30.0);
    c = &g.comm[0];
    buf = px_comm_buffer(c, "buf", NULL);
    assert_non_null(buf);
    assert_null(px_comm_buffer(c, "nosuch", NULL));
    assert_int_equal(px_comm_put(c, 2, 0, outside, 8), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "peer 2 is not a rank"));
    assert_int_equal(px_comm_put(c, 1, 4090, outside, 8), PX_EINVAL);
    assert_int_equal(px_comm_put(c, 1, SIZE_MAX, outside, 8), PX_EINVAL);
    assert_int_equal(px_comm_get(c, -1, 0, outside, 8), PX_EINVAL);
    assert_int_equal(px_comm_signal(c, 1, TC_NSIG, PX_SIG_SET, 1), PX_EINVAL);
    assert_int_equal(px_comm_signal(c, 1, 0, (px_sig_op)7, 1), PX_EINVAL);
    assert_int_equal(px_comm_wait_until(c, 0, (px_cmp)9, 1, 1), PX_EINVAL);
    assert_int_equal(px_comm_allreduce(c, outside, 4, PX_F32, PX_OP_SUM), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "not inside this rank's window"));
    assert_int_equal(px_comm_allreduce(c, buf, 4096, PX_F32, PX_OP_SUM), PX_EINVAL);
    assert_int_equal(px_comm_allreduce(c, buf, 4, PX_U8, PX_OP_SUM), PX_EINVAL);
    assert_int_equal(px_comm_allreduce(c, buf, 4, PX_F32, (px_redop)9), PX_EINVAL);
    assert_int_equal(px_comm_allgather(c, buf, SIZE_MAX / 2, PX_F64), PX_EINVAL);
    assert_int_equal(px_comm_broadcast(c, buf, 4, PX_F32, 2), PX_EINVAL);
    assert_int_equal(px_comm_allreduce(NULL, buf, 4, PX_F32, PX_OP_SUM), PX_EINVAL);
    assert_int_equal(px_comm_barrier(NULL), PX_EINVAL);
    assert_int_equal(px_comm_rank(NULL), -1);
    tc_group_fini(&g);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "direct";

    if (strcmp(mode, "staged") == 0)
        tc_mode = TC_STAGED;
    else if (strcmp(mode, "mixed") == 0)
        tc_mode = TC_MIXED;
    else if (strcmp(mode, "fallback1") == 0)
        tc_mode = TC_FALLBACK1;
    else if (strcmp(mode, "fallback2") == 0)
        tc_mode = TC_FALLBACK2;
    else if (strcmp(mode, "direct") != 0)
        return fprintf(stderr, "test_comm: transport %s: use direct, staged, mixed, fallback1 "
                       "or fallback2\n", mode), 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_matrix),
        cmocka_unit_test(test_allreduce_64_ranks),
        cmocka_unit_test(test_moves_matrix),
        cmocka_unit_test(test_alltoallv),
        cmocka_unit_test(test_algorithm_by_size),
        cmocka_unit_test(test_put_signal_ordering),
        cmocka_unit_test(test_one_sided_progress),
        cmocka_unit_test(test_wait_times_out),
        cmocka_unit_test(test_death_ends_wait),
        cmocka_unit_test(test_dead_peer_one_sided),
        cmocka_unit_test(test_wake_only_sleepers),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_small_misuse),
    };

    return _cmocka_run_group_tests(mode, tests, sizeof(tests) / sizeof(tests[0]), NULL, NULL);
}
