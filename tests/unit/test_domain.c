/*
 * test_domain.c - communication domains on a level-3 worker: chips as processes, windows passed
 * as memfds and mapped (direct transport), tasks on a domain's buffers. Expected values are
 * worked out here: rank r's input element i is i + 100 r, so an allreduce (sum) over n ranks
 * gives n i + 100 n (n - 1) / 2 on every rank, exactly in f32 for these sizes. Checks: the
 * allreduce and the other collectives end to end through copy tasks whose dependencies are
 * inferred; every allreduce count (1, 7, 4096, 262147), dtype and op checked inside the chips
 * at 1, 2, 3, 4 and 8 ranks; two overlapping domains in one run; a user's group task whose
 * kernels pass a token round the ring with put_signal / wait_until; every bad spec refused
 * before anything is allocated, naming the field; release and later use; a member killed inside
 * a collective (the survivors fail with PX_EPEERDEAD within the deadline, the worker destroys
 * cleanly); nothing left in /dev/shm and no descriptor leaked; with DFX on, the allreduce as a
 * "comm" span in trace.json and the domain in dfx.json; a window buffer used as a device tensor
 * by the tasks a callable submits on each chip. Multi-process: ctest runs it under
 * RESOURCE_LOCK "chips" (tests/system/l3.cmake).
 */
#include "testutil.h"
#include "dfx/collectors/json.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TD_N 4099 /* elements: odd, not a multiple of the rank count */
#define TD_MAX_RANKS 4
#define COMM_WHY 192

/* The transport the ring domains must report: "direct" by default, "staged" when the run
 * forces it or its profile has no peer mapping, NULL (not checked) for profile pairs. */
static const char *td_expect_tl = "direct";

/* Under PLEXUS_COMM_TRANSPORT=mpi: MPI starts once per process, so a test makes one worker
 * under MPI at most, and the descriptors Open MPI keeps after MPI_Finalize (its shared memory
 * segment, a pipe) are not the library's. */
static int td_one_worker;

/* Descriptors open now, less those Open MPI keeps under mpi. */
static int td_fds(void)
{
    return td_one_worker ? px_test_open_fds_except("open_mpi|pipe:") : px_test_open_fds();
}

static px_kernel_id k_ring, k_die, k_matrix, k_busy, k_mism;
static px_callable_id c_ring, c_die, c_matrix, c_busy, c_mism;
static px_status matrix_kernel(px_core_ctx *ctx, const px_task_args *a);
static px_status matrix_callable(px_orch *o, const px_task_args *args, void *user);
static px_status busy_kernel(px_core_ctx *ctx, const px_task_args *a);
static px_status busy_callable(px_orch *o, const px_task_args *args, void *user);

/* ---- helpers ---- */


/* A ring step on every rank: rank 0 starts; each rank waits for the token, adds its rank,
 * puts the value into the next rank's buffer and signals it. Kernel args: domain (last). */
static px_status ring_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    int r, n;
    uint64_t *buf;
    size_t off;
    px_status st;

    if (c == NULL)
        return PX_EINVAL;
    r = px_comm_rank(c);
    n = px_comm_size(c);
    buf = px_comm_buffer(c, "x", NULL);
    if ((st = px_comm_offset(c, buf, 8, &off)) != PX_OK)
        return st;
    if (r == 0)
        buf[0] = 1000;
    else if ((st = px_comm_wait_until(c, 0, PX_CMP_EQ, 1, 10.0)) != PX_OK)
        return st;
    buf[0] += (uint64_t)r;
    if (r == n - 1 && n > 1) {
        /* back to rank 0 so it can check the whole ring */
        return px_comm_put_signal(c, 0, off + 8, buf, 8, 1, PX_SIG_SET, 1);
    }
    if (n > 1 && (st = px_comm_put_signal(c, r + 1, off, buf, 8, 0, PX_SIG_SET, 1)) != PX_OK)
        return st;
    if (r == 0 && n > 1) {
        if ((st = px_comm_wait_until(c, 1, PX_CMP_EQ, 1, 10.0)) != PX_OK)
            return st;
        if (buf[1] != 1000 + (uint64_t)(n * (n - 1) / 2))
            return px_set_error(PX_EKERNEL, "ring: rank 0 got %llu back, expected %llu",
                                (unsigned long long)buf[1],
                                (unsigned long long)(1000 + n * (n - 1) / 2));
    }
    return PX_OK;
}

static px_status ring_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, k_ring, &a, NULL);
}

/* Rank 1 dies at once; the others enter an allreduce that cannot finish. */
static px_status die_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    float *x;

    if (c == NULL)
        return PX_EINVAL;
    if (px_comm_rank(c) == 1)
        _exit(9);
    x = px_comm_buffer(c, "x", NULL);
    return px_comm_allreduce(c, x, 16, PX_F32, PX_OP_SUM);
}

static px_status die_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, k_die, &a, NULL);
}

/* The last rank calls allreduce with one element more than the others: a mismatch. */
static px_status mism_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    float *x;

    if (c == NULL)
        return PX_EINVAL;
    x = px_comm_buffer(c, "x", NULL);
    return px_comm_allreduce(c, x, px_comm_rank(c) == px_comm_size(c) - 1 ? 17 : 16, PX_F32,
                             PX_OP_SUM);
}

static px_status mism_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, k_mism, &a, NULL);
}

static px_worker *td_worker(int chips)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = chips;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    c.timeout_s = 30.0 * px_test_slack();
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "td.ring", ring_kernel, NULL, &k_ring));
    PX_ASSERT_OK(px_callable_register(w, "td.ring", ring_callable, &c_ring));
    PX_ASSERT_OK(px_kernel_register(w, "td.die", die_kernel, NULL, &k_die));
    PX_ASSERT_OK(px_callable_register(w, "td.die", die_callable, &c_die));
    PX_ASSERT_OK(px_kernel_register(w, "td.matrix", matrix_kernel, NULL, &k_matrix));
    PX_ASSERT_OK(px_kernel_register(w, "td.busy", busy_kernel, NULL, &k_busy));
    PX_ASSERT_OK(px_callable_register(w, "td.busy", busy_callable, &c_busy));
    PX_ASSERT_OK(px_callable_register(w, "td.matrix", matrix_callable, &c_matrix));
    PX_ASSERT_OK(px_kernel_register(w, "td.mism", mism_kernel, NULL, &k_mism));
    PX_ASSERT_OK(px_callable_register(w, "td.mism", mism_callable, &c_mism));
    PX_ASSERT_OK(px_worker_init(w));
    return w;
}

/* ---- allreduce end to end ---- */

typedef struct td_ar {
    int n;
    int chips[TD_MAX_RANKS];
    const char *name;
    int64_t count; /* elements per rank */
} td_ar;

/* Orchestration: in [n][count] (IN), out [n][count] (OUT): write, allreduce, read back. */
static px_status td_ar_orch(px_orch *o, const px_task_args *args, void *user)
{
    const td_ar *t = user;
    const px_tensor *in = px_arg_tensor(args, 0), *out = px_arg_tensor(args, 1);
    px_domain_buffer b = {"x", (size_t)t->count * sizeof(float)};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = t->name, .chips = t->chips, .nchips = t->n,
                        .window_bytes = (size_t)t->count * sizeof(float), .buffers = &b,
                        .nbuffers = 1};
    const int64_t row[1] = {t->count};
    px_domain *d;
    px_status st = px_domain_alloc(o, &s, &d);

    for (int r = 0; st == PX_OK && r < t->n; r++) {
        px_tensor v;

        st = px_tensor_view(in, 1, row, NULL, (int64_t)r * t->count, &v);
        if (st == PX_OK)
            st = px_submit_domain_write(o, d, r, "x", 0, &v, NULL);
    }
    if (st == PX_OK)
        st = px_submit_allreduce(o, d, "x", t->count, PX_F32, PX_OP_SUM, NULL);
    for (int r = 0; st == PX_OK && r < t->n; r++) {
        px_tensor v;

        st = px_tensor_view(out, 1, row, NULL, (int64_t)r * t->count, &v);
        if (st == PX_OK)
            st = px_submit_domain_read(o, d, r, "x", 0, &v, NULL);
    }
    if (st == PX_OK)
        st = px_domain_release(d);
    return st;
}

static void td_allreduce_on(px_worker *w, const td_ar *t)
{
    float *in = malloc((size_t)t->n * (size_t)t->count * sizeof(float));
    float *out = calloc((size_t)t->n * t->count, sizeof(float));
    const int64_t shape[2] = {t->n, t->count};
    px_tensor tin, tout;
    px_task_args args;

    assert_non_null(in);
    assert_non_null(out);
    for (int r = 0; r < t->n; r++)
        for (int i = 0; i < t->count; i++)
            in[(size_t)r * t->count + i] = (float)(i + 100 * r);
    PX_ASSERT_OK(px_tensor_make(&tin, in, PX_F32, 2, shape));
    PX_ASSERT_OK(px_tensor_make(&tout, out, PX_F32, 2, shape));
    px_args_init(&args);
    px_args_in(&args, &tin);
    px_args_out(&args, &tout);
    PX_ASSERT_OK(px_run(w, td_ar_orch, &args, (void *)t));
    for (int r = 0; r < t->n; r++) {
        for (int i = 0; i < t->count; i++) {
            float want = (float)(t->n * i + 100 * t->n * (t->n - 1) / 2);

            if (out[(size_t)r * t->count + i] != want)
                print_error("rank %d element %d: %g, expected %g\n", r, i,
                            out[(size_t)r * t->count + i], want);
            assert_true(out[(size_t)r * t->count + i] == want);
        }
        assert_memory_equal(out, out + (size_t)r * t->count,
                            (size_t)t->count * sizeof(float));
    }
    free(in);
    free(out);
}

/* An allreduce over 4 chips (one-shot) and one of 1 MiB over chips 2, 0 (ranks in that order;
 * reduce-scatter + allgather), in two runs of one worker; nothing in /dev/shm afterwards and
 * no descriptor left open. */
static void test_allreduce_end_to_end(void **state)
{
    int shm0 = px_test_shm_plexus_entries(), fd0 = td_fds();
    px_worker *w = td_worker(4);
    td_ar all = {.n = 4, .chips = {0, 1, 2, 3}, .name = "all", .count = TD_N};
    td_ar two = {.n = 2, .chips = {2, 0}, .name = "two", .count = 262147}; /* rs_ag */

    td_allreduce_on(w, &all);
    td_allreduce_on(w, &two);
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    assert_int_equal(td_fds(), fd0);
}

/* ---- overlapping domains and the user's ring ---- */

static px_status td_overlap_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int ca[3] = {0, 1, 2}, cb[3] = {3, 2, 1};
    px_domain_buffer b[2] = {{"x", 64}, {"y", 4096}};
    px_domain_spec sa = {PX_DOMAIN_SPEC_HEADER,
                         .name = "a", .chips = ca, .nchips = 3, .window_bytes = 8192,
                         .buffers = b, .nbuffers = 2, .nsignals = 2};
    px_domain_spec sb = sa;
    px_domain *da, *db;
    px_status st;

    sb.name = "b";
    sb.chips = cb;
    if ((st = px_domain_alloc(o, &sa, &da)) != PX_OK ||
        (st = px_domain_alloc(o, &sb, &db)) != PX_OK)
        return st;
    if (px_domain_size(da) != 3 ||
        (td_expect_tl != NULL && strcmp(px_domain_transport(da, 0, 2), td_expect_tl) != 0))
        return px_set_error(PX_EKERNEL, "domain a: size %d transport %s", px_domain_size(da),
                            px_domain_transport(da, 0, 2));
    if ((st = px_submit_domain_task(o, da, c_ring, NULL, NULL)) != PX_OK ||
        (st = px_submit_domain_task(o, db, c_ring, NULL, NULL)) != PX_OK ||
        (st = px_submit_allreduce(o, da, "y", 1024, PX_I32, PX_OP_MAX, NULL)) != PX_OK ||
        (st = px_submit_allgather(o, db, "y", 100, PX_F64, NULL)) != PX_OK ||
        (st = px_submit_broadcast(o, da, "y", 7, PX_U8, 2, NULL)) != PX_OK ||
        (st = px_submit_alltoall(o, db, "y", 5, PX_I64, NULL)) != PX_OK ||
        (st = px_submit_reduce_scatter(o, da, "y", 3, PX_F32, PX_OP_SUM, NULL)) != PX_OK)
        return st;
    /* a second ring on a: its signals are still 1 from the first, so it reuses the token
     * protocol with values 2 would need; release instead and check use after release */
    if ((st = px_domain_release(da)) != PX_OK)
        return st;
    if (px_submit_domain_task(o, da, c_ring, NULL, NULL) != PX_ESTATE ||
        strstr(px_last_error(), "domain \"a\" was released") == NULL)
        return px_set_error(PX_EKERNEL, "use after release was not refused: %s",
                            px_last_error());
    if (px_domain_release(da) != PX_ESTATE)
        return px_set_error(PX_EKERNEL, "a second release was not refused");
    return px_domain_release(db);
}

/* Two domains over overlapping chips in one run: rings with put_signal / wait_until on each,
 * then every collective once, dependencies inferred; use after release refused. */
static void test_overlapping_domains(void **state)
{
    px_worker *w = td_worker(4);

    PX_ASSERT_OK(px_run(w, td_overlap_orch, NULL, NULL));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- every collective, dtype and op, across processes ---- */

#define TD_BIG 262147

static int64_t td_in(int r, size_t i, px_redop op)
{
    return op == PX_OP_PROD ? 1 + (int64_t)((i + (size_t)r) % 3)
                            : (int64_t)((i * 7 + (size_t)r * 13) % 101) - 50;
}

static void td_put(void *b, size_t i, px_dtype dt, int64_t v)
{
    switch (dt) {
    case PX_F32: ((float *)b)[i] = (float)v; break;
    case PX_F64: ((double *)b)[i] = (double)v; break;
    case PX_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    default: ((int64_t *)b)[i] = v; break;
    }
}

static int64_t td_get(const void *b, size_t i, px_dtype dt)
{
    switch (dt) {
    case PX_F32: return (int64_t)((const float *)b)[i];
    case PX_F64: return (int64_t)((const double *)b)[i];
    case PX_I32: return ((const int32_t *)b)[i];
    default: return ((const int64_t *)b)[i];
    }
}

/* Rank r's element i for the bit-identity checks: values whose sums round, so the result
 * depends on the order of the additions. */
static double td_noise(int r, size_t i)
{
    uint32_t h = (uint32_t)r * 2654435761u ^ (uint32_t)i * 40503u;

    h ^= h >> 13;
    h *= 0x5bd1e995u;
    return (double)(h % 1000003u) / 7.77 - 64.3;
}

/*
 * The results every transport must give bit for bit: f32 and f64 sums of rounding values
 * (allreduce at 7, 4096 and 262147 elements: one-shot and reduce-scatter + allgather;
 * reduce_scatter of 4099 per rank) compared with memcmp against the fold in rank order 0, 1,
 * ..., n-1 worked out here, which does not depend on the transport; then allgather, broadcast
 * from the last rank and alltoallv with uneven counts, exact.
 */
static px_status td_bits_and_moves(px_comm *c, void *buf)
{
    static const size_t counts[] = {7, 4096, TD_BIG};
    int r = px_comm_rank(c), n = px_comm_size(c);
    size_t blk = 4099;
    px_status st;

    for (int k = 0; k < 6; k++) {
        size_t cnt = counts[k / 2];
        int f64 = k % 2;

        for (size_t i = 0; i < cnt; i++) {
            if (f64)
                ((double *)buf)[i] = td_noise(r, i);
            else
                ((float *)buf)[i] = (float)td_noise(r, i);
        }
        if ((st = px_comm_allreduce(c, buf, cnt, f64 ? PX_F64 : PX_F32, PX_OP_SUM)) != PX_OK)
            return st;
        for (size_t i = 0; i < cnt; i++) {
            double wd = td_noise(0, i);
            float wf = (float)td_noise(0, i);

            for (int q = 1; q < n; q++) {
                wd = wd + td_noise(q, i);
                wf = wf + (float)td_noise(q, i);
            }
            if (f64 ? memcmp(&((double *)buf)[i], &wd, 8) != 0
                    : memcmp(&((float *)buf)[i], &wf, 4) != 0)
                return px_set_error(PX_EKERNEL, "rank %d of %d: %s allreduce of %zu element "
                                    "%zu is not bit-identical to the rank-order fold (%s)", r,
                                    n, f64 ? "f64" : "f32", cnt, i, px_comm_last_algorithm(c));
        }
    }
    for (size_t i = 0; i < blk * (size_t)n; i++)
        ((double *)buf)[i] = td_noise(r, i);
    if ((st = px_comm_reduce_scatter(c, buf, blk, PX_F64, PX_OP_SUM)) != PX_OK)
        return st;
    for (size_t i = (size_t)r * blk; i < (size_t)(r + 1) * blk; i++) {
        double w = td_noise(0, i);

        for (int q = 1; q < n; q++)
            w = w + td_noise(q, i);
        if (memcmp(&((double *)buf)[i], &w, 8) != 0)
            return px_set_error(PX_EKERNEL, "rank %d: reduce_scatter element %zu is not "
                                "bit-identical", r, i);
    }
    for (size_t i = 0; i < blk; i++)
        ((int64_t *)buf)[(size_t)r * blk + i] = r * 7919 + (int64_t)i;
    if ((st = px_comm_allgather(c, buf, blk, PX_I64)) != PX_OK)
        return st;
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < blk; i++)
            if (((int64_t *)buf)[(size_t)q * blk + i] != q * 7919 + (int64_t)i)
                return px_set_error(PX_EKERNEL, "rank %d: allgather block %d element %zu", r,
                                    q, i);
    for (size_t i = 0; i < blk; i++)
        ((int64_t *)buf)[i] = r == n - 1 ? 5 * (int64_t)i + 3 : -1;
    if ((st = px_comm_broadcast(c, buf, blk, PX_I64, n - 1)) != PX_OK)
        return st;
    for (size_t i = 0; i < blk; i++)
        if (((int64_t *)buf)[i] != 5 * (int64_t)i + 3)
            return px_set_error(PX_EKERNEL, "rank %d: broadcast element %zu", r, i);
    {
        /* alltoallv: rank r sends (r + 2 j) % 5 + 1 elements to rank j */
        int64_t *send = buf, *recv = (int64_t *)buf + 4096;
        size_t sc[8], so[8], rc[8], ro[8], o = 0, p = 0;

        for (int j = 0; j < n; j++) {
            sc[j] = (size_t)((r + 2 * j) % 5 + 1);
            so[j] = o;
            for (size_t i = 0; i < sc[j]; i++)
                send[o + i] = r * 1000 + j * 10 + (int64_t)i;
            o += sc[j];
            rc[j] = (size_t)((j + 2 * r) % 5 + 1);
            ro[j] = p;
            p += rc[j];
        }
        if ((st = px_comm_alltoallv(c, send, sc, so, recv, rc, ro, PX_I64)) != PX_OK)
            return st;
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < rc[j]; i++)
                if (recv[ro[j] + i] != j * 1000 + r * 10 + (int64_t)i)
                    return px_set_error(PX_EKERNEL, "rank %d: alltoallv from rank %d element "
                                        "%zu", r, j, i);
    }
    return px_comm_barrier(c);
}

/* In every member: allreduce over counts 1, 7, 4096, 262147, four dtypes and four ops, each
 * checked against the fold worked out here; then allgather and alltoall of i64 blocks. */
static px_status matrix_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    static const size_t counts[] = {1, 7, 4096, TD_BIG};
    static const px_dtype dts[] = {PX_F32, PX_F64, PX_I32, PX_I64};
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    void *buf;
    int r, n;
    px_status st;

    if (c == NULL)
        return PX_EINVAL;
    r = px_comm_rank(c);
    n = px_comm_size(c);
    buf = px_comm_buffer(c, "x", NULL);
    for (int k = 0; k < 64; k++) {
        size_t cnt = counts[k / 16];
        px_dtype dt = dts[(k / 4) % 4];
        px_redop op = (px_redop)(k % 4);

        for (size_t i = 0; i < cnt; i++)
            td_put(buf, i, dt, td_in(r, i, op));
        if ((st = px_comm_allreduce(c, buf, cnt, dt, op)) != PX_OK)
            return st;
        for (size_t i = 0; i < cnt; i++) {
            int64_t want = td_in(0, i, op), have = td_get(buf, i, dt);

            for (int q = 1; q < n; q++) {
                int64_t v = td_in(q, i, op);

                want = op == PX_OP_SUM ? want + v : op == PX_OP_PROD ? want * v
                       : op == PX_OP_MIN ? (v < want ? v : want) : (v > want ? v : want);
            }
            if (have != want)
                return px_set_error(PX_EKERNEL, "rank %d of %d: allreduce %zu %s op %d element "
                                    "%zu: %lld, expected %lld", r, n, cnt, px_dtype_name(dt),
                                    op, i, (long long)have, (long long)want);
        }
    }
    if ((st = td_bits_and_moves(c, buf)) != PX_OK)
        return st;
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < 1000; i++)
            ((int64_t *)buf)[(size_t)b * 1000 + i] = r * 100000 + b * 1000 + (int64_t)i;
    if ((st = px_comm_alltoall(c, buf, 1000, PX_I64)) != PX_OK)
        return st;
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < 1000; i++)
            if (((int64_t *)buf)[(size_t)b * 1000 + i] != b * 100000 + r * 1000 + (int64_t)i)
                return px_set_error(PX_EKERNEL, "rank %d: alltoall block %d element %zu", r, b,
                                    i);
    return px_comm_barrier(c);
}

static px_status matrix_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, k_matrix, &a, NULL);
}

static px_status td_matrix_orch(px_orch *o, const px_task_args *args, void *user)
{
    int n = *(const int *)user, chips[8];
    px_domain_buffer b = {"x", TD_BIG * 8};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "matrix", .chips = chips, .nchips = n,
                        .window_bytes = TD_BIG * 8, .buffers = &b, .nbuffers = 1};
    px_domain *d;
    px_status st;

    for (int i = 0; i < n; i++)
        chips[i] = n - 1 - i; /* ranks in reverse chip order */
    if ((st = px_domain_alloc(o, &s, &d)) != PX_OK)
        return st;
    if ((st = px_submit_domain_task(o, d, c_matrix, NULL, NULL)) != PX_OK)
        return st;
    return px_domain_release(d);
}

/* Every allreduce dtype, op and count (1, 7, 4096, 262147) and an alltoall, checked inside
 * the chip processes, at 1, 2, 3, 4 and 8 ranks (one core each). */
static void test_collective_matrix_processes(void **state)
{
    static const int ranks[] = {1, 2, 3, 4, 8};
    px_worker *w = NULL;

    for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
        int n = ranks[i];

        /* a worker per rank count; under mpi one of 8 chips for all (MPI starts once per
         * process), its domains on chips 0..n-1 */
        if (w == NULL)
            w = td_worker(td_one_worker ? 8 : n);
        PX_ASSERT_OK(px_run(w, td_matrix_orch, NULL, &n));
        if (!td_one_worker) {
            PX_ASSERT_OK(px_worker_destroy(w));
            w = NULL;
        }
    }
    if (w != NULL)
        PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- bad specs ---- */

typedef struct td_bad {
    int cases;
    px_status st[16];
    char msg[16][256];
} td_bad;

static px_status td_bad_orch(px_orch *o, const px_task_args *args, void *user)
{
    td_bad *b = user;
    static const int two[2] = {0, 1}, dup[2] = {1, 1}, far[2] = {0, 9};
    px_domain_buffer ok = {"x", 64}, big = {"x", 1 << 20}, zero = {"x", 0};
    px_domain_buffer twice[2] = {{"x", 64}, {"x", 64}}, noname = {"", 64};
    px_domain_spec base = {PX_DOMAIN_SPEC_HEADER,
                           .name = "d", .chips = two, .nchips = 2, .window_bytes = 4096,
                           .buffers = &ok, .nbuffers = 1};
    px_domain_spec s[11];
    px_domain *d = NULL, *live;
    px_status st;

    for (int i = 0; i < 11; i++)
        s[i] = base;
    s[0].buffers = &big;
    s[1].buffers = &zero;
    s[2].buffers = twice;
    s[2].nbuffers = 2;
    s[3].chips = dup;
    s[4].chips = far;
    s[5].nchips = PX_COMM_MAX_RANKS + 1; /* past the limit: refused, nothing read */
    s[6].window_bytes = 0;
    s[7].name = "";
    s[8].buffers = &noname;
    s[9].nsignals = -1;
    s[10].nbuffers = 0;
    for (int i = 0; i < 11; i++) {
        b->st[i] = px_domain_alloc(o, &s[i], &d);
        snprintf(b->msg[i], sizeof(b->msg[i]), "%s", px_last_error());
    }
    /* a duplicate live name */
    if ((st = px_domain_alloc(o, &base, &live)) != PX_OK)
        return st;
    b->st[11] = px_domain_alloc(o, &base, &d);
    snprintf(b->msg[11], sizeof(b->msg[11]), "%s", px_last_error());
    b->st[12] = px_submit_allreduce(o, live, "nosuch", 4, PX_F32, PX_OP_SUM, NULL);
    snprintf(b->msg[12], sizeof(b->msg[12]), "%s", px_last_error());
    b->st[13] = px_submit_allreduce(o, live, "x", 17, PX_F32, PX_OP_SUM, NULL);
    snprintf(b->msg[13], sizeof(b->msg[13]), "%s", px_last_error());
    b->st[14] = px_submit_allreduce(o, live, "x", 4, PX_U8, PX_OP_SUM, NULL);
    snprintf(b->msg[14], sizeof(b->msg[14]), "%s", px_last_error());
    b->st[15] = px_submit_broadcast(o, live, "x", 4, PX_F32, 2, NULL);
    snprintf(b->msg[15], sizeof(b->msg[15]), "%s", px_last_error());
    b->cases = 16;
    return px_domain_release(live);
}

/* Every bad spec is refused with PX_EINVAL naming the field, before anything is allocated. */
static void test_bad_specs(void **state)
{
    static const char *const want[16] = {
        "does not fit in the window", "has 0 bytes", "is used twice", "appears twice",
        "is not a chip of this worker", "a domain has 1..1024 member chips", "window_bytes is 0",
        "name \"\" must have 1..31 characters", "buffers[0].name", "nsignals -1",
        "nbuffers 0", "a live domain is called \"d\"", "has no buffer \"nosuch\"",
        "do not fit buffer \"x\"", "reductions take sum, prod, min or max",
        "root 2 is not a rank",
    };
    int shm0 = px_test_shm_plexus_entries();
    px_worker *w = td_worker(2);
    td_bad b = {0};

    PX_ASSERT_OK(px_run(w, td_bad_orch, NULL, &b));
    assert_int_equal(b.cases, 16);
    for (int i = 0; i < 16; i++) {
        if (b.st[i] != PX_EINVAL || strstr(b.msg[i], want[i]) == NULL)
            print_error("case %d: %s: \"%s\" lacks \"%s\"\n", i, px_status_name(b.st[i]),
                        b.msg[i], want[i]);
        assert_int_equal(b.st[i], PX_EINVAL);
        assert_non_null(strstr(b.msg[i], want[i]));
    }
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
}

/* ---- one-sided progress while the target computes ---- */

/*
 * Rank 1 computes for 1.5 s (times the slack) without calling into the domain; rank 0
 * meanwhile gets 1 MiB from it and puts 1 MiB + a signal to it, and fails unless the get
 * returned at once (deadline 0 + slack, less than the busy time). Rank 1
 * then finds the bytes and the signal in its window without waiting. On staged the target's
 * progress thread carries the requests out; on direct they are loads and stores.
 */
static px_status busy_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    uint8_t *buf, *tmp;
    size_t half = 1u << 20, off;
    uint64_t t0;
    px_status st;

    if (c == NULL)
        return PX_EINVAL;
    buf = px_comm_buffer(c, "x", NULL);
    if ((st = px_comm_offset(c, buf, 2 * half, &off)) != PX_OK)
        return st;
    if (px_comm_rank(c) == 1)
        for (size_t i = 0; i < half; i++)
            buf[i] = (uint8_t)(i * 7 + 1);
    if ((st = px_comm_barrier(c)) != PX_OK)
        return st;
    t0 = px_test_now_ns();
    if (px_comm_rank(c) == 1) {
        while (px_test_now_ns() - t0 < (uint64_t)(1.5e9 * px_test_slack()))
            ; /* a long kernel */
        if (px_comm_signal_read(c, 0) != 5)
            return px_set_error(PX_EKERNEL, "rank 1: signal %llu after computing, expected 5",
                                (unsigned long long)px_comm_signal_read(c, 0));
        for (size_t i = 0; i < half; i++)
            if (buf[half + i] != (uint8_t)(i * 3 + 2))
                return px_set_error(PX_EKERNEL, "rank 1: put byte %zu missing", i);
    } else if (px_comm_rank(c) == 0) {
        if ((tmp = malloc(half)) == NULL)
            return PX_ENOMEM;
        st = px_comm_get(c, 1, off, tmp, half);
        for (size_t i = 0; st == PX_OK && i < half; i++)
            if (tmp[i] != (uint8_t)(i * 7 + 1))
                st = px_set_error(PX_EKERNEL, "rank 0: got byte %zu wrong", i);
        /* at once: the target's progress thread (staged) or proxy (mpi) serves it, or it is
         * loads (direct); waiting for the target's kernel would take the busy time */
        if (st == PX_OK && (double)(px_test_now_ns() - t0) / 1e9 > px_test_bound_s(0.0))
            st = px_set_error(PX_EKERNEL,
                              "rank 0: the get from a computing rank took %.2f s "
                              "over %s, past its bound %.2f s",
                              (double)(px_test_now_ns() - t0) / 1e9, px_comm_transport(c, 1),
                              px_test_bound_s(0.0));
        for (size_t i = 0; st == PX_OK && i < half; i++)
            tmp[i] = (uint8_t)(i * 3 + 2);
        if (st == PX_OK)
            st = px_comm_put_signal(c, 1, off + half, tmp, half, 0, PX_SIG_SET, 5);
        free(tmp);
        if (st != PX_OK)
            return st;
    }
    return px_comm_barrier(c);
}

static px_status busy_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, k_busy, &a, NULL);
}

static px_status td_busy_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[2] = {0, 1};
    px_domain_buffer b = {"x", 2u << 20};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "busy", .chips = chips, .nchips = 2, .window_bytes = 2u << 20,
                        .buffers = &b, .nbuffers = 1, .nsignals = 1};
    px_domain *d;
    px_status st = px_domain_alloc(o, &s, &d);

    if (st == PX_OK)
        st = px_submit_domain_task(o, d, c_busy, NULL, NULL);
    if (st == PX_OK)
        st = px_domain_release(d);
    return st;
}

static void test_one_sided_progress(void **state)
{
    px_worker *w = td_worker(2);

    PX_ASSERT_OK(px_run(w, td_busy_orch, NULL, NULL));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- a member dies inside a collective ---- */

static px_status td_die_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[3] = {0, 1, 2};
    px_domain_buffer b = {"x", 64};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "dies", .chips = chips, .nchips = 3, .window_bytes = 64,
                        .buffers = &b, .nbuffers = 1};
    px_domain *d;
    px_status st = px_domain_alloc(o, &s, &d);

    if (st == PX_OK)
        st = px_submit_domain_task(o, d, c_die, NULL, NULL);
    return st;
}

/* Chip 1 exits inside the domain task; the survivors' allreduce fails with PX_EPEERDEAD (not
 * the 60 s deadline), the run reports the dead chip, and the worker destroys cleanly, leaving
 * nothing in /dev/shm and no descriptor open (on every transport: see transports.cmake). */
static void test_member_dies_in_collective(void **state)
{
    int shm0 = px_test_shm_plexus_entries(), fd0 = td_fds();
    px_worker *w = td_worker(3);
    uint64_t t0 = px_test_now_ns();
    px_status st = px_run(w, td_die_orch, NULL, NULL);
    double took = (double)(px_test_now_ns() - t0) / 1e9;

    assert_int_equal(st, PX_EPEERDEAD);
    assert_non_null(strstr(px_last_error(), "chip 1"));
    /* the death is seen by the watch's pidfd poll (PX_HIER_CHECK_NS, 100 ms) and then by the
     * survivors' comm wait within its slice (PX_COMM_SLICE_NS, 50 ms) */
    PX_ASSERT_BY(took, 0.1 + 0.05);
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    assert_int_equal(td_fds(), fd0);
}

/* ---- window buffers as device tensors of chip tasks ---- */

static px_kernel_id k_fill, k_sum, k_check;
static px_callable_id c_chain;

#define TD_CHAIN_N 1000

/* OUT x: x[i] = 1000 rank + i. Args: x, rank. */
static px_status fill_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    float *x = px_arg_data(a, 0);

    for (int i = 0; i < TD_CHAIN_N; i++)
        x[i] = (float)(1000 * (int)px_arg_u64(a, 1) + i);
    return PX_OK;
}

/* INOUT x: allreduce (sum) over the domain. Args: x, domain. */
static px_status sum_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, 1);

    return c != NULL ? px_comm_allreduce(c, px_arg_data(a, 0), TD_CHAIN_N, PX_F32, PX_OP_SUM)
                     : PX_EINVAL;
}

/* IN x: x[i] == 1000 n (n - 1) / 2 + n i. Args: x, n. */
static px_status check_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    const float *x = px_arg_data(a, 0);
    int n = (int)px_arg_u64(a, 1);

    for (int i = 0; i < TD_CHAIN_N; i++)
        if (x[i] != (float)(1000 * n * (n - 1) / 2 + n * i))
            return px_set_error(PX_EKERNEL, "chain: x[%d] = %g, expected %d", i, x[i],
                                1000 * n * (n - 1) / 2 + n * i);
    return PX_OK;
}

/* On each member chip: x as a device tensor of the window, fill -> sum -> check, the order
 * inferred by the chip's tensor map (two cores, so a missing edge would show). */
static px_status chain_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_comm *c = px_arg_comm(args, px_arg_count(args) - 1);
    const int64_t shape[1] = {TD_CHAIN_N}, too_big[1] = {TD_CHAIN_N + 1};
    px_task_args a;
    px_tensor x;
    px_status st;

    if (c == NULL)
        return PX_EINVAL;
    if (px_comm_buffer_tensor(c, "x", PX_F32, 1, too_big, &x) != PX_EINVAL ||
        strstr(px_last_error(), "does not fit buffer \"x\"") == NULL)
        return px_set_error(PX_EKERNEL, "a tensor larger than the buffer was not refused");
    if ((st = px_comm_buffer_tensor(c, "x", PX_F32, 1, shape, &x)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_out(&a, &x);
    px_args_scalar_u64(&a, (uint64_t)px_comm_rank(c));
    if ((st = px_submit(o, k_fill, &a, NULL)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_inout(&a, &x);
    a.a[a.n++] = args->a[px_arg_count(args) - 1]; /* the domain scalar, passed on */
    if ((st = px_submit(o, k_sum, &a, NULL)) != PX_OK)
        return st;
    px_args_init(&a);
    px_args_in(&a, &x);
    px_args_scalar_u64(&a, (uint64_t)px_comm_size(c));
    return px_submit(o, k_check, &a, NULL);
}

static px_status td_chain_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[3] = {2, 0, 1};
    px_domain_buffer b = {"x", TD_CHAIN_N * sizeof(float)};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "chain", .chips = chips, .nchips = 3,
                        .window_bytes = TD_CHAIN_N * sizeof(float), .buffers = &b,
                        .nbuffers = 1};
    px_tensor out = *px_arg_tensor(args, 0);
    px_domain *d;
    px_status st = px_domain_alloc(o, &s, &d);

    if (st == PX_OK)
        st = px_submit_domain_task(o, d, c_chain, NULL, NULL);
    if (st == PX_OK)
        st = px_submit_domain_read(o, d, 1, "x", 0, &out, NULL);
    if (st == PX_OK)
        st = px_domain_release(d);
    return st;
}

/* A callable on each member submits kernels on its window buffer as a device tensor (fill,
 * allreduce, check) with the chip's own dependencies; the parent reads the result back. A
 * tensor larger than the buffer is refused. */
static void test_window_buffer_as_device_tensor(void **state)
{
    px_config c;
    px_worker *w = NULL;
    float out[TD_CHAIN_N];
    const int64_t shape[1] = {TD_CHAIN_N};
    px_tensor t;
    px_task_args args;

    px_test_config(&c, 2);
    c.level = 3;
    c.chips = 3;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "td.fill", fill_kernel, NULL, &k_fill));
    PX_ASSERT_OK(px_kernel_register(w, "td.sum", sum_kernel, NULL, &k_sum));
    PX_ASSERT_OK(px_kernel_register(w, "td.check", check_kernel, NULL, &k_check));
    PX_ASSERT_OK(px_callable_register(w, "td.chain", chain_callable, &c_chain));
    PX_ASSERT_OK(px_worker_init(w));
    memset(out, 0, sizeof(out));
    PX_ASSERT_OK(px_tensor_make(&t, out, PX_F32, 1, shape));
    px_args_init(&args);
    px_args_out(&args, &t);
    PX_ASSERT_OK(px_run(w, td_chain_orch, &args, NULL));
    for (int i = 0; i < TD_CHAIN_N; i++)
        assert_true(out[i] == (float)(3000 + 3 * i)); /* 1000 (0 + 1 + 2) + 3 i */
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- a domain kept across runs ---- */

static px_status td_keep_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[2] = {0, 1};
    px_domain_buffer b = {"x", 4096};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "kept", .chips = chips, .nchips = 2, .window_bytes = 4096,
                        .buffers = &b, .nbuffers = 1};
    px_domain **d = user;

    if (*d == NULL)
        return px_domain_alloc(o, &s, d); /* run 1: allocate, keep */
    return px_submit_allreduce(o, *d, "x", 1024, PX_F32, PX_OP_SUM, NULL); /* run 2: use it */
}

/* Allocates "kept" and then fails the run. */
static px_status td_fail_after_alloc_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_status st = td_keep_orch(o, args, user);

    return st != PX_OK ? st : px_set_error(PX_EKERNEL, "the orchestration fails on purpose");
}

/* A domain allocated in one run and not released lives on into the next run, is released
 * between runs (freed at once: no run is using it), and later use is refused; a run that
 * fails frees the domains it allocated, and their handles are refused afterwards. */
static void test_domain_across_runs(void **state)
{
    px_worker *w = td_worker(2);
    px_domain *d = NULL;

    PX_ASSERT_OK(px_run(w, td_keep_orch, NULL, &d));
    assert_non_null(d);
    PX_ASSERT_OK(px_run(w, td_keep_orch, NULL, &d));
    PX_ASSERT_OK(px_domain_release(d));
    assert_int_equal(px_run(w, td_keep_orch, NULL, &d), PX_ESTATE);
    assert_non_null(strstr(px_last_error(), "domain \"kept\" was"));
    /* a run that fails frees the domains it allocated: the handle is refused afterwards */
    d = NULL;
    assert_int_equal(px_run(w, td_fail_after_alloc_orch, NULL, &d), PX_EKERNEL);
    assert_non_null(d);
    assert_int_equal(px_run(w, td_keep_orch, NULL, &d), PX_ESTATE);
    assert_non_null(strstr(px_last_error(), "its run failed"));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* Run 2 of a kept domain: the group task's ranks call mismatched allreduces. */
static px_status td_mism_orch(px_orch *o, const px_task_args *args, void *user)
{
    return px_submit_domain_task(o, *(px_domain **)user, c_mism, NULL, NULL);
}

/* A collective that fails (here: mismatched) in one run fails at once, on every rank, with
 * PX_EINVAL naming the mismatch; a later run's collective on the kept domain is refused at
 * once (it timed out after the full deadline before, its barriers out of step), saying to
 * release it; releasing it works. The deadline is the default 60 s: each run ends by
 * TD_AT_ONCE_S + slack instead. */
#define TD_AT_ONCE_S 0.1 /* at once; on an mpi pair a proxy sweeps every PROXY_SLICE_NS, 100 ms */
static void td_failed_collective(int chips)
{
    px_worker *w = td_worker(chips);
    px_domain *d = NULL;
    uint64_t t0;

    PX_ASSERT_OK(px_run(w, td_keep_orch, NULL, &d)); /* run 1: allocate, keep */
    t0 = px_test_now_ns();
    assert_int_equal(px_run(w, td_mism_orch, NULL, &d), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "mismatched collectives"));
    assert_non_null(strstr(px_last_error(), "allreduce(f32, sum, "));
    PX_ASSERT_BY((double)(px_test_now_ns() - t0) / 1e9, TD_AT_ONCE_S);
    t0 = px_test_now_ns();
    assert_int_not_equal(px_run(w, td_keep_orch, NULL, &d), PX_OK);
    assert_non_null(strstr(px_last_error(), "release the domain"));
    PX_ASSERT_BY((double)(px_test_now_ns() - t0) / 1e9, TD_AT_ONCE_S);
    PX_ASSERT_OK(px_domain_release(d));
    PX_ASSERT_OK(px_worker_destroy(w));
}

static void test_failed_collective_across_runs(void **state)
{
    (void)state;
    td_failed_collective(3);
}

/* Two ranks: on an mpi pair the proxies carry the allreduce and find the mismatch. */
static void test_failed_collective_pair(void **state)
{
    (void)state;
    td_failed_collective(2);
}

/* ---- transports per pair ---- */

typedef struct td_sel {
    int need_peer_ptr;
    px_status st[3];
    char msg[3][640];
    char tl[3][4][4][8];   /* px_domain_transport of each pair */
    char why[3][4][4][COMM_WHY];
} td_sel;

/* Domains of chips {2, 3}, {0, 2} and {0, 1, 2, 3}: each allocated, its pairs' transports and
 * reasons kept, a token passed round its ring (put_signal / wait_until) and an allreduce. */
static px_status td_select_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int same[2] = {2, 3}, across[2] = {0, 2}, four[4] = {0, 1, 2, 3};
    static const int *const sets[3] = {same, across, four};
    static const int ns[3] = {2, 2, 4};
    td_sel *t = user;
    px_domain_buffer b = {"x", 64};

    for (int i = 0; i < 3; i++) {
        char name[8];
        px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                            .name = name, .chips = sets[i], .nchips = ns[i],
                            .window_bytes = 64, .buffers = &b, .nbuffers = 1, .nsignals = 2,
                            .need_peer_ptr = t->need_peer_ptr};
        px_domain *d = NULL;

        snprintf(name, sizeof(name), "sel%d", i);
        t->st[i] = px_domain_alloc(o, &s, &d);
        snprintf(t->msg[i], sizeof(t->msg[i]), "%s", px_last_error());
        if (t->st[i] != PX_OK)
            continue;
        for (int a = 0; a < ns[i]; a++) {
            for (int q = 0; q < ns[i]; q++) {
                snprintf(t->tl[i][a][q], sizeof(t->tl[i][a][q]), "%s",
                         px_domain_transport(d, a, q));
                snprintf(t->why[i][a][q], sizeof(t->why[i][a][q]), "%s",
                         px_domain_transport_reason(d, a, q));
            }
        }
        if ((t->st[i] = px_submit_domain_task(o, d, c_ring, NULL, NULL)) == PX_OK &&
            (t->st[i] = px_submit_allreduce(o, d, "x", 16, PX_F32, PX_OP_SUM, NULL)) == PX_OK)
            t->st[i] = px_domain_release(d);
    }
    return PX_OK;
}

/* Runs td_select_orch on 4 chips of profile prof, transport forced (0: auto). */
static px_status td_select(const char *prof, int forced, int need_peer_ptr, td_sel *t)
{
    px_config c;
    px_worker *w = NULL;
    px_status st;

    memset(t, 0, sizeof(*t));
    t->need_peer_ptr = need_peer_ptr;
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 4;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    c.comm_transport = forced;
    snprintf(c.device_profile, sizeof(c.device_profile), "%s", prof);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "td.ring", ring_kernel, NULL, &k_ring));
    PX_ASSERT_OK(px_callable_register(w, "td.ring", ring_callable, &c_ring));
    PX_ASSERT_OK(px_worker_init(w));
    st = px_run(w, td_select_orch, NULL, t);
    PX_ASSERT_OK(px_worker_destroy(w));
    return st;
}

/*
 * The transport of every pair, chosen at run time and explained:
 * - profile pairs (peer mapping only inside chips 0-1, 2-3): {2, 3} direct, {0, 2} staged, and
 *   {0, 1, 2, 3} mixed, each staged pair saying why direct was refused; the rings and
 *   allreduces run on all three;
 * - profile a2a3-pcie: every pair staged because peer_map=0;
 * - forced direct under a2a3-pcie: PX_ENOTSUP naming the pair, peer_map=0, the profile and
 *   that staged would work;
 * - need_peer_ptr under a2a3-pcie: PX_ENOTSUP saying only direct gives peer pointers;
 * - forced staged under default: staged everywhere.
 */
static void test_transport_per_pair(void **state)
{
    td_sel t;

    PX_ASSERT_OK(td_select("pairs", 0, 0, &t));
    for (int i = 0; i < 3; i++)
        if (t.st[i] != PX_OK)
            fail_msg("pairs, domain %d: %s: %s", i, px_status_name(t.st[i]), t.msg[i]);
    assert_string_equal(t.tl[0][0][1], "direct");
    assert_string_equal(t.tl[1][0][1], "staged");
    assert_non_null(strstr(t.why[1][0][1], "peer_map_group=2 in profile pairs: chips map each "
                                           "other only inside groups of 2"));
    assert_string_equal(t.tl[2][0][1], "direct");
    assert_string_equal(t.tl[2][2][3], "direct");
    assert_string_equal(t.tl[2][0][2], "staged");
    assert_string_equal(t.tl[2][3][1], "staged");

    PX_ASSERT_OK(td_select("a2a3-pcie", 0, 0, &t));
    for (int i = 0; i < 3; i++)
        if (t.st[i] != PX_OK)
            fail_msg("a2a3-pcie, domain %d: %s: %s", i, px_status_name(t.st[i]), t.msg[i]);
    assert_string_equal(t.tl[2][1][3], "staged");
    assert_string_equal(t.why[2][1][3], "peer_map=0 in profile a2a3-pcie");

    PX_ASSERT_OK(td_select("a2a3-pcie", 1, 0, &t));
    assert_int_equal(t.st[0], PX_ENOTSUP);
    assert_non_null(strstr(t.msg[0], "rank 0 (chip 2) -> rank 1 (chip 3): no transport: "
                                     "forced direct (PLEXUS_COMM_TRANSPORT=direct) refused: "
                                     "peer_map=0 in profile a2a3-pcie"));
    assert_non_null(strstr(t.msg[0], "staged would work"));

    PX_ASSERT_OK(td_select("a2a3-pcie", 0, 1, &t));
    assert_int_equal(t.st[1], PX_ENOTSUP);
    assert_non_null(strstr(t.msg[1], "need_peer_ptr"));

    PX_ASSERT_OK(td_select("default", 2, 0, &t));
    for (int i = 0; i < 3; i++)
        assert_int_equal(t.st[i], PX_OK);
    assert_string_equal(t.tl[2][0][1], "staged");
    assert_non_null(strstr(t.why[2][0][1], "forced by PLEXUS_COMM_TRANSPORT=staged"));
}

/*
 * Confirm by doing: under profile default the facts allow direct everywhere, but the test hook
 * makes chip 3 fail to map chip 2's window. Pair (2, 3) falls back to staged with that reason
 * (in both directions: chip 2 drops its mapping of chip 3), the other pairs stay direct, the
 * allocation succeeds and the rings and allreduce run; forced direct turns the same failure
 * into PX_ENOTSUP with the reason.
 */
static void test_direct_failure_falls_back(void **state)
{
    td_sel t;

    setenv("PX_TEST_COMM_MAP_FAIL", "3:2", 1);
    PX_ASSERT_OK(td_select("default", 0, 0, &t));
    for (int i = 0; i < 3; i++)
        if (t.st[i] != PX_OK)
            fail_msg("domain %d: %s: %s", i, px_status_name(t.st[i]), t.msg[i]);
    assert_string_equal(t.tl[0][0][1], "staged"); /* chips 2, 3 */
    assert_non_null(strstr(t.why[0][0][1], "direct mapping failed: chip 3 could not map chip "
                                           "2's window: refused by the test hook"));
    assert_string_equal(t.tl[0][1][0], "staged");
    assert_string_equal(t.tl[1][0][1], "direct"); /* chips 0, 2 */
    assert_string_equal(t.tl[2][2][3], "staged");
    assert_string_equal(t.tl[2][0][1], "direct");
    assert_string_equal(t.tl[2][1][2], "direct");

    PX_ASSERT_OK(td_select("default", 1, 0, &t));
    unsetenv("PX_TEST_COMM_MAP_FAIL");
    assert_int_equal(t.st[0], PX_ENOTSUP);
    assert_non_null(strstr(t.msg[0], "the facts allow direct but the mapping failed"));
    assert_int_equal(t.st[1], PX_OK);
}

/* ---- DFX ---- */

/* Reads dir/name into a NUL-terminated malloc'd string (asserts). */
static char *td_slurp(const char *dir, const char *name)
{
    char path[512];
    FILE *f;
    long n;
    char *p;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    p[n] = '\0';
    fclose(f);
    return p;
}

/* With the swimlane on, a run's allreduce appears on the chips' tracks of trace.json as a
 * "comm" span with op, bytes, algorithm and transport, and dfx.json lists the domain with its
 * members (in rank order), window, transport and each pair of ranks' transport and why. */
static void test_dfx_comm_spans_and_domains(void **state)
{
    char dir[256];
    px_config c;
    px_worker *w = NULL;
    td_ar two = {.n = 2, .chips = {1, 0}, .name = "traced", .count = 262147};
    char *trace, path[320];
    dfxc_json *root = NULL;
    const dfxc_json *doms, *dom, *pairs;

    px_test_mkdtemp(dir, sizeof(dir), "pxcommdfx");
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    c.dfx = PX_DFX_SWIMLANE;
    snprintf(c.out_dir, sizeof(c.out_dir), "%s", dir);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    td_allreduce_on(w, &two);
    PX_ASSERT_OK(px_worker_destroy(w));
    trace = td_slurp(dir, "trace.json");
    assert_non_null(strstr(trace, "\"name\":\"comm.allreduce\",\"cat\":\"comm\",\"args\":{"
                                  "\"op\":\"allreduce\",\"bytes\":1048588,\"peer\":-1,"
                                  "\"algorithm\":\"rs_ag\",\"transport\":\"direct\""));
    free(trace);
    /* dfx.json read as JSON (its spacing is not the contract): the domain with its members
     * in rank order, window, transport, and every pair of ranks with its own (here one) */
    snprintf(path, sizeof(path), "%s/dfx.json", dir);
    PX_ASSERT_OK(dfxc_json_load(path, &root));
    doms = dfxc_json_get(root, "domains");
    assert_non_null(doms);
    assert_int_equal(doms->type, DFXC_JARR);
    assert_int_equal(doms->n, 1);
    dom = &doms->kids[0];
    assert_string_equal(dfxc_json_str(dom, "name", ""), "traced");
    assert_non_null(dfxc_json_get(dom, "members"));
    assert_int_equal(dfxc_json_get(dom, "members")->n, 2);
    assert_int_equal((int)dfxc_json_get(dom, "members")->kids[0].num, 1);
    assert_int_equal((int)dfxc_json_get(dom, "members")->kids[1].num, 0);
    assert_int_equal((int64_t)dfxc_json_num(dom, "window_bytes", -1), 1048588);
    assert_string_equal(dfxc_json_str(dom, "transport", ""), "direct");
    assert_string_equal(dfxc_json_str(dom, "why", ""), "peer_map=1 in profile default");
    pairs = dfxc_json_get(dom, "pairs");
    assert_non_null(pairs);
    assert_int_equal(pairs->n, 1);
    assert_int_equal((int)dfxc_json_num(&pairs->kids[0], "a", -1), 0);
    assert_int_equal((int)dfxc_json_num(&pairs->kids[0], "b", -1), 1);
    assert_string_equal(dfxc_json_str(&pairs->kids[0], "transport", ""), "direct");
    assert_string_equal(dfxc_json_str(&pairs->kids[0], "why", ""),
                        "peer_map=1 in profile default");
    dfxc_json_free(root);
    px_test_rmtree(dir);
}

/*
 * The first argument picks the run: "all" (default) runs every test; "transport" runs the
 * tests that move data (end to end, overlapping domains, the matrix, a member killed in a
 * collective, window buffers, domains across runs, a mismatch of two ranks) again under whatever PLEXUS_COMM_TRANSPORT
 * and PLEXUS_DEVICE_PROFILE the environment gives (tests/system/transports.cmake and
 * comm_staged.cmake).
 */
int main(int argc, char **argv)
{
    const struct CMUnitTest moves[] = {
        cmocka_unit_test(test_allreduce_end_to_end),
        cmocka_unit_test(test_overlapping_domains),
        cmocka_unit_test(test_collective_matrix_processes),
        cmocka_unit_test(test_member_dies_in_collective),
        cmocka_unit_test(test_window_buffer_as_device_tensor),
        cmocka_unit_test(test_domain_across_runs),
        cmocka_unit_test(test_one_sided_progress),
        cmocka_unit_test(test_failed_collective_pair),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_end_to_end),
        cmocka_unit_test(test_overlapping_domains),
        cmocka_unit_test(test_collective_matrix_processes),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_member_dies_in_collective),
        cmocka_unit_test(test_dfx_comm_spans_and_domains),
        cmocka_unit_test(test_window_buffer_as_device_tensor),
        cmocka_unit_test(test_domain_across_runs),
        cmocka_unit_test(test_failed_collective_across_runs),
        cmocka_unit_test(test_failed_collective_pair),
        cmocka_unit_test(test_transport_per_pair),
        cmocka_unit_test(test_direct_failure_falls_back),
        cmocka_unit_test(test_one_sided_progress),
    };
    const char *tl = getenv("PLEXUS_COMM_TRANSPORT"), *prof = getenv("PLEXUS_DEVICE_PROFILE");

    if (argc > 1 && strcmp(argv[1], "transport") == 0) {
        td_expect_tl = prof != NULL && strcmp(prof, "pairs") == 0 ? NULL
                       : tl != NULL && strcmp(tl, "mpi") == 0 ? "mpi"
                       : (tl != NULL && strcmp(tl, "staged") == 0) ||
                         (prof != NULL && strcmp(prof, "a2a3-pcie") == 0) ? "staged" : "direct";
        /* MPI starts once per process: under mpi each test runs in a process of its own,
         * chosen by name (ctest runs one per test) */
        td_one_worker = tl != NULL && strcmp(tl, "mpi") == 0;
        if (argc > 2)
            cmocka_set_test_filter(argv[2]);
        return cmocka_run_group_tests_name("transport", moves, NULL, NULL);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
