/*
 * bench_comm.c - communication between chips: allreduce bus bandwidth from 8 B to 64 MiB and
 * the half round trip of put_with_signal, plexus against Open MPI in the same run.
 *
 * plexus: a level-3 worker with N chip processes (one core each) and one domain over all of
 * them. One group task on the domain runs the whole sweep inside the chips, as the anchor does
 * inside its ranks: per size, every rank fills its buffer (input[i] = i % 97 + 100 rank), runs
 * one allreduce (sum, f32, in place) and checks every element against n (i % 97) +
 * 100 n (n - 1) / 2; then the ranks agree on an iteration count (about 20 ms of allreduces,
 * from a timed one whose slowest rank counts), and each repetition times that many
 * allreduces after a barrier, the slowest rank's time counting (an allreduce of the times
 * with max). Repeated allreduces keep summing: the data grow by a factor n each time, which
 * changes no instruction (n is 2 or 4: exact until it overflows to inf, which costs nothing
 * extra on x86). busbw = algbw * 2 (n - 1) / n (NCCL's definition), algbw = bytes / time.
 * put_signal: rank 0 puts 8 bytes with a signal to rank 1, which checks them and answers the
 * same way; half round trip = time / round trips / 2.
 * case=domain_alloc: px_domain_alloc of a domain over every chip of a worker of 2, 4, 8, 16
 * and 64 chips (one allocation per run; the median of the runs after an untimed one), and the
 * ratio of 64 to 4 ranks, which set-up linear in the ranks keeps at 16 or below.
 * case=shrink / case=recreate (issue 23): at 4 and 8 ranks, the last rank's chip kills itself
 * (SIGKILL) at the start of a domain task whose other ranks enter an allreduce; detection is
 * the time until that run returns PX_EPEERDEAD. shrink: detection + a run that shrinks the
 * domain and allreduces on the survivors' domain; recreate: detection + tearing the worker
 * down and making one of the survivors' chips from scratch (worker, chips, domain) up to its
 * first allreduce, which is what a job without shrink does. Each checks its allreduce.
 * case=kshrink: the same death inside a resilient task whose survivors shrink in the kernel
 * (px_comm_shrink) and allreduce on the survivors' communicator: from the run's start (the
 * death is immediate) to its end, detection included.
 *
 * The anchor is Open MPI (bench/mpi_anchor.c runs bench/comm_mpi_anchor.c under mpirun with
 * pinned options): MPI_Allreduce in place and MPI_Put + MPI_Win_flush on a shared window. The
 * single-thread memcpy floor of each size comes from the same run.
 * --hosts 2 (issue 21, as root): the same sweep on a domain spanning 2 hosts made as network
 * namespaces by tests/system/netns/mpi_hosts.sh, at 2 x 1 and 2 x 2 chips, against the anchor
 * on 2 and 4 ranks over the same namespaces; each is one job under the harness, whose ranks
 * are this program again (--hosts-rank CHIPS) or the anchor. Lines: see docs/benchmarks.md.
 */
#include "benchutil.h"
#include "mpi_anchor.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <plexus/plexus.h>

#define BC_NAME "comm"
#define BC_MAX_SIZES 32
#define BC_MAX_REPS 9
#define BC_REP_NS 20000000ull /* a repetition runs about this long */
#define BC_MAX_ITERS 200000
#define BC_WARMUP 1000 /* untimed allreduces before the sweep */

typedef struct bc_plan {
    int nsizes;
    uint64_t bytes[BC_MAX_SIZES];
    int reps;
    int pp_iters; /* put_signal round trips per repetition */
} bc_plan;

/* What the chips write back: per size the median microseconds of one allreduce, then the
 * put_signal half round trip, and a failure count. */
typedef struct bc_result {
    double us[BC_MAX_SIZES];
    double iters[BC_MAX_SIZES]; /* allreduces per repetition */
    double half_rtt_us;
    double failures; /* wrong elements and payloads over every rank */
} bc_result;

static bc_plan g_plan;
static int g_peer = 1; /* rank 0's put_signal partner (--hosts: the first rank of host 1) */
static px_kernel_id k_sweep;
static px_callable_id c_sweep;

static bc_plan bc_plan_for(bench_mode mode)
{
    bc_plan p = {0};

    if (mode == BENCH_SMOKE) {
        p = (bc_plan){.nsizes = 2, .bytes = {8, 4096}, .reps = 1, .pp_iters = 100};
    } else if (mode == BENCH_QUICK) {
        p = (bc_plan){.nsizes = 6, .bytes = {8, 1024, 65536, 1u << 20, 8u << 20, 64u << 20},
                      .reps = 3, .pp_iters = 2000}; /* the anchor's quick sizes */
    } else {
        p.reps = 5;
        p.pp_iters = 20000;
        for (uint64_t b = 8; b <= (64u << 20); b *= 2)
            p.bytes[p.nsizes++] = b;
    }
    return p;
}

/* ---- inside the chips ---- */

/* v folded over every rank with op (an allreduce on the domain's "t" buffer). */
static double bc_fold(px_comm *c, double v, px_redop op, px_status *st)
{
    double *t = px_comm_buffer(c, "t", NULL);

    t[0] = v;
    *st = px_comm_allreduce(c, t, 1, PX_F64, op);
    return t[0];
}

/* The slowest rank's value of v. */
static double bc_slowest(px_comm *c, double v, px_status *st)
{
    return bc_fold(c, v, PX_OP_MAX, st);
}

/* Fills x, runs one allreduce and checks it; returns the wrong elements (0: right). */
static uint64_t bc_check_one(px_comm *c, float *x, size_t count, px_status *st)
{
    int r = px_comm_rank(c), n = px_comm_size(c);
    uint64_t bad = 0;

    for (size_t i = 0; i < count; i++)
        x[i] = (float)(i % 97 + 100 * (size_t)r);
    if ((*st = px_comm_allreduce(c, x, count, PX_F32, PX_OP_SUM)) != PX_OK)
        return 1;
    for (size_t i = 0; i < count; i++)
        bad += x[i] != (float)((size_t)n * (i % 97) + 100 * (size_t)(n * (n - 1) / 2));
    return bad;
}

/* Median microseconds of one allreduce of count floats, the slowest rank counting; the
 * allreduces per repetition into *iters_out. */
static double bc_time_size(px_comm *c, float *x, size_t count, int reps, double *iters_out,
                           px_status *st)
{
    double us[BC_MAX_REPS], one;
    uint64_t t0, iters;

    if ((*st = px_comm_barrier(c)) != PX_OK)
        return -1;
    t0 = bench_now_ns();
    *st = px_comm_allreduce(c, x, count, PX_F32, PX_OP_SUM);
    one = bc_slowest(c, (double)(bench_now_ns() - t0), st);
    if (*st != PX_OK)
        return -1;
    iters = one > 0 ? (uint64_t)((double)BC_REP_NS / one) : BC_MAX_ITERS;
    iters = iters < 1 ? 1 : iters > BC_MAX_ITERS ? BC_MAX_ITERS : iters;
    *iters_out = (double)iters;
    for (int rep = 0; rep < reps; rep++) {
        if ((*st = px_comm_barrier(c)) != PX_OK)
            return -1;
        t0 = bench_now_ns();
        for (uint64_t k = 0; k < iters && *st == PX_OK; k++)
            *st = px_comm_allreduce(c, x, count, PX_F32, PX_OP_SUM);
        us[rep] = bc_slowest(c, (double)(bench_now_ns() - t0), st) / 1e3 / (double)iters;
        if (*st != PX_OK)
            return -1;
    }
    return bench_median(us, reps);
}

/* Median half round trip of put_signal between ranks 0 and g_peer (others wait at the
 * barrier). */
static double bc_ping_pong(px_comm *c, int iters, int reps, double *failures, px_status *st)
{
    int r = px_comm_rank(c), peer = g_peer;
    uint64_t *x = px_comm_buffer(c, "pp", NULL), v, k = 0;
    double us[BC_MAX_REPS];
    size_t off;

    if ((*st = px_comm_offset(c, x, 16, &off)) != PX_OK)
        return -1;
    for (int rep = 0; rep < reps; rep++) {
        uint64_t t0;

        if ((*st = px_comm_barrier(c)) != PX_OK)
            return -1;
        t0 = bench_now_ns();
        for (int i = 0; (r == 0 || r == peer) && i < iters && *st == PX_OK; i++) {
            v = ++k * 2654435761u;
            if (r == 0) {
                *st = px_comm_put_signal(c, peer, off, &v, 8, 0, PX_SIG_SET, k);
                if (*st == PX_OK)
                    *st = px_comm_wait_until(c, 1, PX_CMP_GE, k, 0);
                *failures += *st == PX_OK && x[1] != v + 1;
            } else {
                *st = px_comm_wait_until(c, 0, PX_CMP_GE, k, 0);
                *failures += *st == PX_OK && x[0] != v;
                v++;
                if (*st == PX_OK)
                    *st = px_comm_put_signal(c, 0, off + 8, &v, 8, 1, PX_SIG_SET, k);
            }
        }
        us[rep] = (double)(bench_now_ns() - t0) / 1e3 / iters / 2;
        if (*st != PX_OK)
            return -1;
    }
    return bench_median(us, reps);
}

/* The sweep, in every member; rank 0 writes the results into its "res" buffer. */
static px_status bc_sweep_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    bc_result res = {0};
    float *x;
    px_status st = PX_OK;

    if (c == NULL)
        return PX_EINVAL;
    x = px_comm_buffer(c, "x", NULL);
    /* warm-up, untimed: the first allreduces of a fresh process pay for page faults and
     * wake-ups that no later one does (the anchor warms up the same way) */
    for (int k = 0; k < BC_WARMUP && st == PX_OK; k++)
        st = px_comm_allreduce(c, x, 2, PX_F32, PX_OP_SUM);
    for (int s = 0; s < g_plan.nsizes && st == PX_OK; s++) {
        size_t count = g_plan.bytes[s] / sizeof(float);

        res.failures += (double)bc_check_one(c, x, count, &st);
        if (st == PX_OK)
            res.us[s] = bc_time_size(c, x, count, g_plan.reps, &res.iters[s], &st);
    }
    if (st == PX_OK && px_comm_size(c) > g_peer)
        res.half_rtt_us = bc_ping_pong(c, g_plan.pp_iters, g_plan.reps, &res.failures, &st);
    if (st == PX_OK) /* every rank checked its own elements: rank 0 reports them all */
        res.failures = bc_fold(c, res.failures, PX_OP_SUM, &st);
    if (st == PX_OK && px_comm_rank(c) == 0)
        memcpy(px_comm_buffer(c, "res", NULL), &res, sizeof(res));
    return st;
}

static px_status bc_sweep_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, k_sweep, &a, NULL);
}

/* ---- the host side ---- */

typedef struct bc_run {
    int n;          /* chips of this worker */
    int hosts;      /* hosts of the job (1: not under MPI); the domain has hosts x n ranks */
    int host;       /* this worker's */
    bc_result *res; /* host copy of rank 0's results (host 0) */
    char info[160]; /* the transports of rank 0's pairs with rank 1 and with g_peer */
} bc_run;

static px_status bc_orch(px_orch *o, const px_task_args *args, void *user)
{
    bc_run *r = user;
    int chips[64], nr = r->n * r->hosts;
    uint64_t top = g_plan.bytes[g_plan.nsizes - 1];
    px_domain_buffer b[4] = {{"x", top}, {"t", 64}, {"pp", 64}, {"res", sizeof(bc_result)}};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "bench", .chips = chips, .nchips = nr,
                        .window_bytes = top + 4096, .buffers = b, .nbuffers = 4,
                        .nsignals = 2};
    px_tensor out = *px_arg_tensor(args, 0);
    px_domain *d;
    px_status st;

    if (nr > 64)
        return px_set_error(PX_EINVAL, "bench_comm: %d ranks; at most 64", nr);
    for (int i = 0; i < nr; i++) /* host-major: rank = host x chips + chip */
        chips[i] = r->hosts > 1 ? px_chip_global(i / r->n, i % r->n) : i;
    if ((st = px_domain_alloc(o, &s, &d)) != PX_OK)
        return st;
    if (nr > g_peer && g_peer > 1)
        snprintf(r->info, sizeof(r->info), "rank 0 -> rank 1 via %s, rank 0 -> rank %d via %s",
                 px_domain_transport(d, 0, 1), g_peer, px_domain_transport(d, 0, g_peer));
    else if (nr > 1)
        snprintf(r->info, sizeof(r->info), "rank 0 -> rank 1 via %s",
                 px_domain_transport(d, 0, 1));
    st = px_submit_domain_task(o, d, c_sweep, NULL, NULL);
    if (st == PX_OK && r->host == 0) /* rank 0 is host 0's */
        st = px_submit_domain_read(o, d, 0, "res", 0, &out, NULL);
    if (st == PX_OK)
        st = px_domain_release(d);
    return st;
}

/* A level-3 configuration of n chips with one core each and dev bytes of device memory (a
 * quarter of it the heap ring). */
static px_status bc_config(px_config *cfg, int n, uint64_t dev)
{
    px_status st = px_config_default(cfg);

    if (st == PX_OK) {
        cfg->level = 3;
        cfg->chips = n;
        cfg->cores = 1;
        cfg->device_mem = dev;
        cfg->heap_ring = dev / 4;
    }
    return st;
}

/* Runs the plexus side on n chips into res. Returns 0, or -1 after bench_fail. */
/* Transports measured: forced direct, forced staged, and auto under profile pairs (4 ranks:
 * chips 0-1 and 2-3 direct, the other pairs staged). */
enum { BC_AUTO = -1, BC_DIRECT, BC_STAGED, BC_MIXED, BC_NTL };
static const char *const bc_tl_names[BC_NTL] = {"direct", "staged", "mixed"};

/* tl's name; BC_AUTO (--hosts: the rule chooses every pair) is "auto". */
static const char *bc_tl_name(int tl)
{
    return tl == BC_AUTO ? "auto" : bc_tl_names[tl];
}

static int bc_plexus_run(int n, int tl, bc_result *res, bc_run *out)
{
    px_config cfg;
    px_worker *w = NULL;
    px_tensor t;
    px_task_args args;
    int64_t shape[1] = {sizeof(*res)};
    bc_run r = {.n = n, .hosts = 1, .res = res};
    px_status st = bc_config(&cfg, n, 64ull << 20);

    memset(res, 0, sizeof(*res));
    if (st == PX_OK) {
        cfg.comm_transport = tl == BC_STAGED ? 2 : tl == BC_DIRECT ? 1 : 0;
        if (tl == BC_MIXED)
            snprintf(cfg.device_profile, sizeof(cfg.device_profile), "pairs");
        st = px_worker_create(&cfg, &w);
    }
    if (st == PX_OK)
        st = px_kernel_register(w, "bench_comm.sweep", bc_sweep_kernel, NULL, &k_sweep);
    if (st == PX_OK)
        st = px_callable_register(w, "bench_comm.sweep", bc_sweep_callable, &c_sweep);
    if (st == PX_OK)
        st = px_worker_init(w);
    if (st == PX_OK) {
        r.hosts = px_worker_hosts(w);
        r.host = px_worker_host(w);
        st = px_tensor_make(&t, res, PX_U8, 1, shape);
    }
    if (st == PX_OK) {
        px_args_init(&args);
        px_args_out(&args, &t);
        st = px_run(w, bc_orch, &args, &r);
    }
    if (st != PX_OK)
        bench_fail(BC_NAME, "plexus on %d chips (%s): %s: %s", n, bc_tl_name(tl),
                   px_status_name(st), px_last_error());
    else if (res->failures != 0)
        bench_fail(BC_NAME, "plexus on %d chips (%s): %.0f results were wrong", n,
                   bc_tl_name(tl), res->failures);
    if (w != NULL)
        px_worker_destroy(w);
    if (out != NULL)
        *out = r;
    return st == PX_OK && res->failures == 0 ? 0 : -1;
}

static int bc_plexus(int n, int tl, bc_result *res)
{
    return bc_plexus_run(n, tl, res, NULL);
}

/* The anchor's row for op and bytes, or NULL. */
static const bench_mpi_row *bc_row(const bench_mpi_row *rows, int nrows, bench_mpi_op op,
                                   uint64_t bytes)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].op == op && (op == BENCH_MPI_PUT_SIGNAL || rows[i].bytes == bytes))
            return &rows[i];
    return NULL;
}

static double bc_busbw(uint64_t bytes, double us, int n)
{
    return us > 0 ? (double)bytes / (us * 1e3) * 2.0 * (n - 1) / n : 0;
}

/* Open MPI's two runs (as installed, and with glibc's malloc tuned) and the better of the two
 * per size, which is what plexus is compared with. */
typedef struct bc_mpi {
    bench_mpi_row rows[2][BENCH_MPI_MAX_ROWS];
    int nrows[2];
} bc_mpi;

static const char *const bc_mpi_names[2] = {"openmpi_default", "openmpi_malloc"};

/* The better (faster) of the two runs' rows for op and bytes, and which it was; NULL when
 * neither has one. */
static const bench_mpi_row *bc_best(const bc_mpi *m, bench_mpi_op op, uint64_t bytes,
                                    int *which)
{
    const bench_mpi_row *a = bc_row(m->rows[0], m->nrows[0], op, bytes);
    const bench_mpi_row *b = bc_row(m->rows[1], m->nrows[1], op, bytes);

    *which = b != NULL && (a == NULL || b->us < a->us);
    return *which ? b : a;
}

/* Prints every line for n ranks: each transport's rows, Open MPI's (both runs and the better
 * one) beside direct's, and the time of staged and mixed over direct's in the same run. */
static void bc_print(int n, const bc_result *res, const int *have, const bc_mpi *mpi, int ping)
{
    for (int s = 0; s < g_plan.nsizes; s++) {
        uint64_t b = g_plan.bytes[s];
        int which;
        const bench_mpi_row *m = bc_best(mpi, BENCH_MPI_ALLREDUCE, b, &which);
        double pbw = bc_busbw(b, res[BC_DIRECT].us[s], n), floor = bench_memcpy_floor((size_t)b);
        char ratio[48] = "plexus_over_openmpi=skipped";

        for (int t = 0; t < BC_NTL; t++)
            if (have[t])
                bench_line(BC_NAME, "op=allreduce ranks=%d bytes=%" PRIu64 " transport=%s "
                           "system=plexus busbw_gbs=%.3f us=%.3f", n, b, bc_tl_names[t],
                           bc_busbw(b, res[t].us[s], n), res[t].us[s]);
        if (!have[BC_DIRECT])
            continue;
        for (int v = 0; v < 2; v++) {
            const bench_mpi_row *mv = bc_row(mpi->rows[v], mpi->nrows[v], BENCH_MPI_ALLREDUCE, b);

            if (mv != NULL)
                bench_line(BC_NAME, "op=allreduce ranks=%d bytes=%" PRIu64 " transport=openmpi "
                           "system=%s busbw_gbs=%.3f us=%.3f", n, b, bc_mpi_names[v],
                           mv->busbw_gbs, mv->us);
        }
        if (m != NULL) {
            bench_line(BC_NAME, "op=allreduce ranks=%d bytes=%" PRIu64 " transport=openmpi "
                       "system=openmpi busbw_gbs=%.3f us=%.3f best_of=%s", n, b, m->busbw_gbs,
                       m->us, bc_mpi_names[which]);
            snprintf(ratio, sizeof(ratio), "plexus_over_openmpi=%.2f",
                     m->busbw_gbs > 0 ? pbw / m->busbw_gbs : 0);
        }
        bench_line(BC_NAME, "op=allreduce ranks=%d bytes=%" PRIu64 " %s busbw_over_memcpy=%.2f "
                   "memcpy_gbs=%.3f", n, b, ratio, floor > 0 ? pbw / floor : 0, floor);
        for (int t = BC_STAGED; t < BC_NTL; t++)
            if (have[t] && res[BC_DIRECT].us[s] > 0)
                bench_line(BC_NAME, "op=allreduce ranks=%d bytes=%" PRIu64 " %s_over_direct="
                           "%.2f", n, b, bc_tl_names[t], res[t].us[s] / res[BC_DIRECT].us[s]);
    }
    if (!ping)
        return;
    for (int t = 0; t < BC_NTL; t++)
        if (have[t])
            bench_line(BC_NAME, "op=put_signal transport=%s system=plexus half_rtt_us=%.3f",
                       bc_tl_names[t], res[t].half_rtt_us);
    if (have[BC_DIRECT] && have[BC_STAGED] && res[BC_DIRECT].half_rtt_us > 0)
        bench_line(BC_NAME, "op=put_signal staged_over_direct=%.2f",
                   res[BC_STAGED].half_rtt_us / res[BC_DIRECT].half_rtt_us);
    for (int v = 0; v < 2; v++)
        if (bc_row(mpi->rows[v], mpi->nrows[v], BENCH_MPI_PUT_SIGNAL, 0) != NULL)
            bench_line(BC_NAME, "op=put_signal transport=openmpi system=%s half_rtt_us=%.3f",
                       bc_mpi_names[v],
                       bc_row(mpi->rows[v], mpi->nrows[v], BENCH_MPI_PUT_SIGNAL, 0)->us);
    {
        int which;
        const bench_mpi_row *m = bc_best(mpi, BENCH_MPI_PUT_SIGNAL, 0, &which);

        if (m != NULL)
            bench_line(BC_NAME, "op=put_signal transport=openmpi system=openmpi half_rtt_us=%.3f "
                       "best_of=%s", m->us, bc_mpi_names[which]);
    }
}

/* ---- case=loaded: small and 1 MiB allreduces beside a busy process ---- */

static void *bc_hog_spin(void *arg)
{
    volatile uint64_t *x = arg;

    for (;;)
        (*x)++;
    return NULL;
}

/* Starts a process with one busy thread per online CPU (it ends itself after 300 s, should
 * this one die first); returns its pid, or -1 after bench_fail. */
static pid_t bc_hog_start(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t pid;

    fflush(NULL);
    if ((pid = fork()) < 0) {
        bench_fail(BC_NAME, "case=loaded: fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        static volatile uint64_t counts[64 * 8];
        pthread_t t;

        alarm(300);
        for (long i = 1; i < ncpu && i < 64; i++)
            if (pthread_create(&t, NULL, bc_hog_spin, (void *)&counts[i * 8]) != 0)
                break;
        bc_hog_spin((void *)&counts[0]);
        _exit(0);
    }
    return pid;
}

static void bc_hog_stop(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* case=loaded: the 8 B and 1 MiB allreduce of 2 ranks (direct) and Open MPI's, each while
 * a process keeps every CPU busy; target: plexus at most 1.5x Open MPI's time. */
static void bc_loaded_case(bench_mode mode, int have_mpi)
{
    bc_plan saved = g_plan;
    bc_result res;
    static bc_mpi mpi;
    pid_t hog;
    int ok;

    /* --smoke: 8 B once (a check that the case runs; a loaded 1 MiB takes long) */
    g_plan = (bc_plan){.nsizes = mode == BENCH_SMOKE ? 1 : 2, .bytes = {8, 1u << 20},
                       .reps = mode == BENCH_FULL ? 5 : mode == BENCH_QUICK ? 3 : 1,
                       .pp_iters = 100};
    bench_line(BC_NAME, "config case=loaded ranks=2 transport=direct load=one_busy_thread_per_cpu "
               "cpus=%ld sizes=8%s reps=%d", sysconf(_SC_NPROCESSORS_ONLN),
               g_plan.nsizes > 1 ? ",1048576" : "", g_plan.reps);
    memset(&mpi, 0, sizeof(mpi));
    if ((hog = bc_hog_start()) < 0) {
        g_plan = saved;
        return;
    }
    ok = bc_plexus(2, BC_DIRECT, &res) == 0;
    for (int v = 0; have_mpi && v < 2; v++) {
        mpi.nrows[v] = bench_mpi_anchor_variant(2, mode == BENCH_SMOKE ? BENCH_SMOKE :
                                                BENCH_QUICK, BENCH_MPI_ALLREDUCE, v,
                                                mpi.rows[v], BENCH_MPI_MAX_ROWS, NULL, 0);
        if (mpi.nrows[v] < 0) {
            bench_fail(BC_NAME, "case=loaded: the Open MPI anchor (%s) failed",
                       bc_mpi_names[v]);
            mpi.nrows[v] = 0;
        }
    }
    bc_hog_stop(hog);
    for (int s = 0; ok && s < g_plan.nsizes; s++) {
        uint64_t b = g_plan.bytes[s];
        int which;
        const bench_mpi_row *m = bc_best(&mpi, BENCH_MPI_ALLREDUCE, b, &which);

        bench_line(BC_NAME, "case=loaded bytes=%" PRIu64 " system=plexus us=%.3f", b,
                   res.us[s]);
        if (m == NULL)
            continue;
        bench_line(BC_NAME, "case=loaded bytes=%" PRIu64 " system=openmpi us=%.3f best_of=%s",
                   b, m->us, bc_mpi_names[which]);
        bench_line(BC_NAME, "case=loaded bytes=%" PRIu64 " plexus_over_openmpi_time=%.2f "
                   "target=1.5", b, m->us > 0 ? res.us[s] / m->us : 0);
    }
    g_plan = saved;
}

/* ---- case=domain_alloc: the set-up of a domain over every chip ---- */

#define BC_DA_MAX 64

typedef struct bc_da {
    int n;
    double us;
} bc_da;

/* One run: allocate a domain of all n chips (timed), release it (freed at the run's end). */
static px_status bc_da_orch(px_orch *o, const px_task_args *args, void *user)
{
    bc_da *r = user;
    int chips[BC_DA_MAX];
    px_domain_buffer b = {"x", 4096};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "alloc", .chips = chips, .nchips = r->n, .window_bytes = 4096,
                        .buffers = &b, .nbuffers = 1, .nsignals = 2};
    px_domain *d;
    uint64_t t0;
    px_status st;

    for (int i = 0; i < r->n; i++)
        chips[i] = i;
    t0 = bench_now_ns();
    st = px_domain_alloc(o, &s, &d);
    r->us = (double)(bench_now_ns() - t0) / 1e3;
    return st == PX_OK ? px_domain_release(d) : st;
}

/* Median microseconds of px_domain_alloc on a level-3 worker of n chips (one core each),
 * after one untimed allocation; -1 after bench_fail. */
static double bc_domain_alloc(int n, int reps)
{
    double us[BC_MAX_REPS];
    px_config cfg;
    px_worker *w = NULL;
    bc_da r = {.n = n};
    px_status st = bc_config(&cfg, n, 16ull << 20);

    if (st == PX_OK)
        st = px_worker_create(&cfg, &w);
    if (st == PX_OK)
        st = px_worker_init(w);
    for (int k = -1; st == PX_OK && k < reps; k++) {
        st = px_run(w, bc_da_orch, NULL, &r);
        if (k >= 0)
            us[k] = r.us;
    }
    if (st != PX_OK)
        bench_fail(BC_NAME, "case=domain_alloc on %d chips: %s: %s", n, px_status_name(st),
                   px_last_error());
    if (w != NULL)
        px_worker_destroy(w);
    return st == PX_OK ? bench_median(us, reps) : -1;
}

/* Prints case=domain_alloc at 2, 4, 8, 16 and 64 ranks (2 and 4 in --smoke), and the ratio of
 * 64 to 4 ranks (linear in ranks: 16). */
static void bc_domain_alloc_case(bench_mode mode)
{
    static const int ns[5] = {2, 4, 8, 16, 64};
    int count = mode == BENCH_SMOKE ? 2 : 5, reps = mode == BENCH_FULL ? 5 : 3;
    double us[5] = {0};

    bench_line(BC_NAME, "config case=domain_alloc window_bytes=4096 buffers=1 signals=2 "
               "cores_per_chip=1 reps=%d transport=auto", reps);
    for (int i = 0; i < count; i++) {
        if ((us[i] = bc_domain_alloc(ns[i], reps)) < 0)
            return;
        bench_line(BC_NAME, "case=domain_alloc ranks=%d us=%.1f", ns[i], us[i]);
    }
    if (count == 5 && us[1] > 0)
        bench_line(BC_NAME, "case=domain_alloc ranks_64_over_4=%.1f linear=16", us[4] / us[1]);
}

/* ---- case=shrink, case=recreate: going on after a member's death (issue 23) ---- */

#define BC_SH_COUNT 1024 /* floats of the allreduce */

static px_kernel_id k_shdie, k_shar, k_shk;
static px_callable_id c_shdie, c_shar, c_shk;

static px_status bc_shar_check(px_comm *c);

/* case=kshrink: the last rank dies at once; the others' allreduce fails, they shrink in the
 * kernel (px_comm_shrink) and allreduce on the survivors' communicator, checked. */
static px_status bc_shk_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1), *nc;
    px_status st;

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    if (px_comm_rank(c) == px_comm_size(c) - 1)
        raise(SIGKILL);
    st = px_comm_allreduce(c, px_comm_buffer(c, "x", NULL), BC_SH_COUNT, PX_F32, PX_OP_SUM);
    if (st != PX_EPEERDEAD && st != PX_EREVOKED)
        return st == PX_OK ? px_set_error(PX_ESTATE, "bench kshrink: the allreduce with a "
                                          "dead rank succeeded") : st;
    while ((st = px_comm_shrink(c, &nc)) == PX_EPEERDEAD)
        ;
    if (st != PX_OK)
        return st;
    return bc_shar_check(nc); /* the survivors' first collective, checked */
}

static px_status bc_shk_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    (void)user;
    return px_submit(o, k_shk, &a, NULL);
}

/* The last rank dies (SIGKILL) at once; the others enter an allreduce that cannot finish. */
static px_status bc_shdie_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    if (px_comm_rank(c) == px_comm_size(c) - 1)
        raise(SIGKILL);
    return px_comm_allreduce(c, px_comm_buffer(c, "x", NULL), BC_SH_COUNT, PX_F32, PX_OP_SUM);
}

/* Every rank sets x to rank + 1 and allreduces it on c: each element must be n (n + 1) / 2. */
static px_status bc_shar_check(px_comm *c)
{
    float *x;
    int n;
    px_status st;

    if (c == NULL)
        return PX_EINVAL;
    x = px_comm_buffer(c, "x", NULL);
    n = px_comm_size(c);
    for (int i = 0; i < BC_SH_COUNT; i++)
        x[i] = (float)(px_comm_rank(c) + 1);
    if ((st = px_comm_allreduce(c, x, BC_SH_COUNT, PX_F32, PX_OP_SUM)) != PX_OK)
        return st;
    for (int i = 0; i < BC_SH_COUNT; i++)
        if (x[i] != (float)(n * (n + 1) / 2))
            return px_set_error(PX_EKERNEL, "bench shrink: element %d is %g, expected %d", i,
                                x[i], n * (n + 1) / 2);
    return PX_OK;
}

static px_status bc_shar_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    (void)ctx;
    return bc_shar_check(px_arg_comm(a, px_arg_count(a) - 1));
}

static px_status bc_shdie_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    (void)user;
    return px_submit(o, k_shdie, &a, NULL);
}

static px_status bc_shar_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    (void)user;
    return px_submit(o, k_shar, &a, NULL);
}

typedef struct bc_sh {
    int n;
    px_domain *d, *nd;
} bc_sh;

static px_status bc_sh_alloc_orch(px_orch *o, const px_task_args *args, void *user)
{
    bc_sh *r = user;
    int chips[BC_DA_MAX];
    px_domain_buffer b = {"x", BC_SH_COUNT * sizeof(float)};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER, .name = "shrink", .chips = chips,
                        .nchips = r->n, .window_bytes = BC_SH_COUNT * sizeof(float),
                        .buffers = &b, .nbuffers = 1};
    px_status st;

    (void)args;
    for (int i = 0; i < r->n; i++)
        chips[i] = i;
    if ((st = px_domain_alloc(o, &s, &r->d)) == PX_OK)
        st = px_submit_domain_task(o, r->d, c_shar, NULL, NULL);
    return st;
}

static px_status bc_sh_die_orch(px_orch *o, const px_task_args *args, void *user)
{
    bc_sh *r = user;

    (void)args;
    return px_submit_domain_task(o, r->d, c_shdie, NULL, NULL);
}

static px_status bc_sh_kshrink_orch(px_orch *o, const px_task_args *args, void *user)
{
    bc_sh *r = user;

    (void)args;
    return px_submit_domain_task_resilient(o, r->d, c_shk, NULL, NULL);
}

static px_status bc_sh_shrink_orch(px_orch *o, const px_task_args *args, void *user)
{
    bc_sh *r = user;
    px_status st = px_domain_shrink(o, r->d, &r->nd);

    (void)args;
    if (st == PX_OK)
        st = px_submit_domain_task(o, r->nd, c_shar, NULL, NULL);
    return st;
}

/* A worker of n chips (one core each) with the case's kernels, and its domain of all of them
 * after one checked allreduce. */
static px_status bc_sh_worker(int n, px_worker **w, bc_sh *r)
{
    px_config cfg;
    px_status st = bc_config(&cfg, n, 16ull << 20);

    *w = NULL;
    r->n = n;
    if (st == PX_OK)
        st = px_worker_create(&cfg, w);
    if (st == PX_OK)
        st = px_kernel_register(*w, "bench.shdie", bc_shdie_kernel, NULL, &k_shdie);
    if (st == PX_OK)
        st = px_kernel_register(*w, "bench.shar", bc_shar_kernel, NULL, &k_shar);
    if (st == PX_OK)
        st = px_callable_register(*w, "bench.shdie", bc_shdie_callable, &c_shdie);
    if (st == PX_OK)
        st = px_callable_register(*w, "bench.shar", bc_shar_callable, &c_shar);
    if (st == PX_OK)
        st = px_kernel_register(*w, "bench.shk", bc_shk_kernel, NULL, &k_shk);
    if (st == PX_OK)
        st = px_callable_register(*w, "bench.shk", bc_shk_callable, &c_shk);
    if (st == PX_OK)
        st = px_worker_init(*w);
    if (st == PX_OK)
        st = px_run(*w, bc_sh_alloc_orch, NULL, r);
    return st;
}

/* One trial on n chips: detection and then shrink (recreate 0) or recreate (1), in us; or
 * (recreate 2) the kernel-side shrink: one resilient run in which the last rank dies and the
 * others shrink in the kernel and allreduce on the survivors (no detection apart). */
static px_status bc_sh_trial(int n, int recreate, double *detect_us, double *total_us)
{
    px_worker *w = NULL;
    bc_sh r = {0};
    uint64_t t0;
    px_status st = bc_sh_worker(n, &w, &r);

    if (st != PX_OK)
        goto out;
    t0 = bench_now_ns();
    if (recreate == 2) {
        st = px_run(w, bc_sh_kshrink_orch, NULL, &r);
        *total_us = (double)(bench_now_ns() - t0) / 1e3;
        *detect_us = 0;
        goto out;
    }
    if ((st = px_run(w, bc_sh_die_orch, NULL, &r)) != PX_EPEERDEAD) {
        st = st == PX_OK ? px_set_error(PX_ESTATE, "the dying rank's run succeeded") : st;
        goto out;
    }
    *detect_us = (double)(bench_now_ns() - t0) / 1e3;
    if (!recreate) {
        st = px_run(w, bc_sh_shrink_orch, NULL, &r);
    } else { /* from scratch: the job ends, a new one of the survivors starts */
        px_worker_destroy(w);
        w = NULL;
        st = bc_sh_worker(n - 1, &w, &r);
    }
    *total_us = (double)(bench_now_ns() - t0) / 1e3;
out:
    if (w != NULL)
        px_worker_destroy(w);
    return st;
}

/* Prints case=shrink and case=recreate at 4 and 8 ranks (4 in --smoke), the detection alone,
 * and the ratio shrink / recreate (target: 0.5 or below; detection under 1 s). */
static void bc_shrink_case(bench_mode mode)
{
    static const int ns[2] = {4, 8};
    int count = mode == BENCH_SMOKE ? 1 : 2, reps = mode == BENCH_FULL ? 3 : 1;

    bench_line(BC_NAME, "config case=shrink allreduce_floats=%d cores_per_chip=1 reps=%d "
               "transport=auto death=SIGKILL_in_a_collective", BC_SH_COUNT, reps);
    for (int i = 0; i < count; i++) {
        double det[3][BC_MAX_REPS], tot[3][BC_MAX_REPS], med[3][2];

        for (int k = 0; k < 3; k++) {
            for (int rep = 0; rep < reps; rep++) {
                px_status st = bc_sh_trial(ns[i], k, &det[k][rep], &tot[k][rep]);

                if (st != PX_OK) {
                    bench_fail(BC_NAME, "case=%s on %d ranks: %s: %s",
                               k == 2 ? "kshrink" : k ? "recreate" : "shrink", ns[i],
                               px_status_name(st), px_last_error());
                    return;
                }
            }
            med[k][0] = bench_median(det[k], reps);
            med[k][1] = bench_median(tot[k], reps);
        }
        bench_line(BC_NAME, "case=shrink ranks=%d system=plexus us=%.1f detect_us=%.1f",
                   ns[i], med[0][1], med[0][0]);
        bench_line(BC_NAME, "case=recreate ranks=%d system=plexus us=%.1f detect_us=%.1f",
                   ns[i], med[1][1], med[1][0]);
        bench_line(BC_NAME, "case=shrink ranks=%d shrink_over_recreate=%.2f target=0.5 "
                   "detect_s=%.3f target_s=0.01", ns[i], med[0][1] / med[1][1],
                   med[0][0] / 1e6);
        bench_line(BC_NAME, "case=kshrink ranks=%d system=plexus us=%.1f "
                   "kshrink_over_recreate=%.2f", ns[i], med[2][1], med[2][1] / med[1][1]);
    }
}

/* ---- --hosts 2: several hosts over network namespaces (issue 21) ---- */

#define BC_HOSTS 2
#ifndef PX_NETNS_HARNESS
#define PX_NETNS_HARNESS "tests/system/netns/mpi_hosts.sh"
#endif

/*
 * One rank of the job (`bench_comm --hosts-rank CHIPS [--quick|--smoke]`, started under the
 * harness by the driver below): a level-3 worker of CHIPS chips under MPI, the sweep on one
 * domain of every host's chips (host-major), the put_signal between rank 0 and the first rank
 * of host 1. Host 0 prints the results in the anchor's line protocol (ANCHOR lines, parsed by
 * bench_mpi_hosts_run), verified = no wrong element or payload on any rank. Returns the exit
 * status.
 */
static int bc_hosts_rank(int chips, bench_mode mode)
{
    bc_result res;
    bc_run r;
    int ok, n;

    g_peer = chips;
    ok = bc_plexus_run(chips, BC_AUTO, &res, &r) == 0;
    n = r.hosts * chips;
    if (r.host != 0)
        return ok ? 0 : 1;
    if (r.hosts < 2) {
        fprintf(stderr, "bench_comm --hosts-rank: not under an MPI job of 2 or more hosts "
                "(px_worker_hosts is %d): run bench_comm --hosts 2\n", r.hosts);
        return 1;
    }
    printf("ANCHOR config library=\"plexus %s, %d ranks (%d hosts x %d chip%s), %s\" ranks=%d "
           "mode=%s\n", PX_VERSION_STRING, n, r.hosts, chips, chips == 1 ? "" : "s", r.info, n,
           bench_mode_name(mode));
    for (int s = 0; ok && s < g_plan.nsizes; s++) {
        uint64_t b = g_plan.bytes[s];

        printf("ANCHOR op=allreduce ranks=%d bytes=%" PRIu64 " us=%.3f algbw_gbs=%.4f "
               "busbw_gbs=%.4f iters=%.0f reps=%d verified=%d\n", n, b, res.us[s],
               res.us[s] > 0 ? (double)b / (res.us[s] * 1e3) : 0, bc_busbw(b, res.us[s], n),
               res.iters[s], g_plan.reps, res.failures == 0);
    }
    if (ok)
        printf("ANCHOR op=put_signal ranks=2 bytes=8 half_rtt_us=%.3f iters=%d reps=%d "
               "verified=%d peer=%d\n", res.half_rtt_us, g_plan.pp_iters, g_plan.reps,
               res.failures == 0, g_peer);
    fflush(stdout);
    return ok ? 0 : 1;
}

/* What one shape of the hosts mode measured: plexus's rows and Open MPI's two runs. */
typedef struct bc_hosts_shape {
    int per_host; /* chips per host (plexus) = MPI ranks per host (Open MPI) */
    bench_mpi_row plexus[BENCH_MPI_MAX_ROWS];
    int nplexus;
    bc_mpi mpi;
} bc_hosts_shape;

/* The harness: PLEXUS_NETNS_HARNESS, else the source tree's (PX_NETNS_HARNESS). */
static const char *bc_harness(void)
{
    const char *env = getenv("PLEXUS_NETNS_HARNESS");

    return env != NULL && env[0] != '\0' ? env : PX_NETNS_HARNESS;
}

/* "skipped: not root (uid 1000): ..." -> "not_root_(uid_1000):_..." (one token of a BENCH
 * line). */
static void bc_token(char *s)
{
    for (; *s != '\0'; s++)
        if (*s == ' ' || *s == '\t' || *s == '"' || *s == '=')
            *s = '_';
}

/* Runs plexus's job of one shape; returns 0, 1 when the harness cannot run here (why in
 * skip), or -1 after bench_fail. */
static int bc_hosts_plexus(bc_hosts_shape *sh, bench_mode mode, char *skip, size_t skipn)
{
    bench_mpi_hosts h = {.harness = bc_harness(), .hosts = BC_HOSTS, .per_host = 1};
    char self[4096], chips[16], cfg[2048];
    const char *argv[5] = {self, "--hosts-rank", chips, NULL, NULL};
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (len <= 0) {
        bench_fail(BC_NAME, "--hosts: cannot read /proc/self/exe: %s", strerror(errno));
        return -1;
    }
    self[len] = '\0';
    snprintf(chips, sizeof(chips), "%d", sh->per_host);
    argv[3] = mode == BENCH_QUICK ? "--quick" : mode == BENCH_SMOKE ? "--smoke" : NULL;
    sh->nplexus = bench_mpi_hosts_run(&h, mode, argv, sh->plexus, BENCH_MPI_MAX_ROWS, cfg,
                                      sizeof(cfg), skip, skipn);
    if (sh->nplexus == -2)
        return 1;
    if (sh->nplexus < 0) {
        bench_fail(BC_NAME, "--hosts: plexus on %d hosts x %d chips failed (reason above)",
                   BC_HOSTS, sh->per_host);
        sh->nplexus = 0;
        return -1;
    }
    bench_line(BC_NAME, "config hosts=%d ranks=%d system=plexus namespaces=%d mpi_ranks_per_host=1 "
               "chips_per_host=%d transport=auto %s", BC_HOSTS, BC_HOSTS * sh->per_host,
               BC_HOSTS, sh->per_host, cfg);
    return 0;
}

/* Runs Open MPI's two jobs of one shape (as installed, malloc tuned); returns 0, 1 when the
 * harness cannot run here, or -1 after bench_fail. */
static int bc_hosts_openmpi(bc_hosts_shape *sh, bench_mode mode, char *skip, size_t skipn)
{
    bench_mpi_hosts h = {.harness = bc_harness(), .hosts = BC_HOSTS, .per_host = sh->per_host};
    char cfg[2048];
    int bad = 0;

    for (int v = 0; v < 2; v++) {
        sh->mpi.nrows[v] = bench_mpi_anchor_hosts(&h, mode, BENCH_MPI_ALL, v, sh->mpi.rows[v],
                                                  BENCH_MPI_MAX_ROWS, cfg, sizeof(cfg), skip,
                                                  skipn);
        if (sh->mpi.nrows[v] == -2)
            return 1;
        if (sh->mpi.nrows[v] < 0) {
            bench_fail(BC_NAME, "--hosts: the Open MPI anchor (%s) failed on %d hosts x %d "
                       "ranks", bc_mpi_names[v], BC_HOSTS, sh->per_host);
            sh->mpi.nrows[v] = 0;
            bad = 1;
            continue;
        }
        bench_line(BC_NAME, "config hosts=%d ranks=%d system=%s namespaces=%d "
                   "mpi_ranks_per_host=%d btl=self,vader,tcp btl_tcp_if_include=10.213.0.0/24 "
                   "link=pxh0(veth) put_signal_peer=%d %s", BC_HOSTS, BC_HOSTS * sh->per_host,
                   bc_mpi_names[v], BC_HOSTS, sh->per_host, sh->per_host, cfg);
    }
    return bad ? -1 : 0;
}

/* The ratio line: plexus's time over Open MPI's, with the target where it has one. */
static void bc_hosts_ratio(const char *what, double pus, double mus, double target)
{
    char t[48] = "";

    if (!(pus > 0) || !(mus > 0))
        return;
    if (target > 0)
        snprintf(t, sizeof(t), " target=%.1f met=%s", target,
                 pus / mus <= target ? "yes" : "no");
    bench_line(BC_NAME, "%s plexus_over_openmpi_time=%.2f%s", what, pus / mus, t);
}

/* Prints one shape's lines: per size plexus, Open MPI's two runs, the better of them, and the
 * ratio; then put_signal the same way. */
static void bc_hosts_print(const bc_hosts_shape *sh)
{
    int n = BC_HOSTS * sh->per_host, which;
    char what[96];

    for (int s = 0; s < g_plan.nsizes; s++) {
        uint64_t b = g_plan.bytes[s];
        const bench_mpi_row *p = bc_row(sh->plexus, sh->nplexus, BENCH_MPI_ALLREDUCE, b);
        const bench_mpi_row *m = bc_best(&sh->mpi, BENCH_MPI_ALLREDUCE, b, &which);
        int big = b == (1u << 20) || b == (64u << 20);

        snprintf(what, sizeof(what), "op=allreduce hosts=%d ranks=%d bytes=%" PRIu64, BC_HOSTS,
                 n, b);
        if (p != NULL)
            bench_line(BC_NAME, "%s system=plexus busbw_gbs=%.3f us=%.3f", what, p->busbw_gbs,
                       p->us);
        for (int v = 0; v < 2; v++) {
            const bench_mpi_row *mv = bc_row(sh->mpi.rows[v], sh->mpi.nrows[v],
                                             BENCH_MPI_ALLREDUCE, b);

            if (mv != NULL)
                bench_line(BC_NAME, "%s system=%s busbw_gbs=%.3f us=%.3f", what,
                           bc_mpi_names[v], mv->busbw_gbs, mv->us);
        }
        if (m == NULL)
            continue;
        bench_line(BC_NAME, "%s system=openmpi busbw_gbs=%.3f us=%.3f best_of=%s", what,
                   m->busbw_gbs, m->us, bc_mpi_names[which]);
        if (p != NULL) /* 2 x 1: within 1.1x; 2 x 2: no slower than the flat 4 ranks */
            bc_hosts_ratio(what, p->us, m->us, !big ? 0 : sh->per_host == 1 ? 1.1 : 1.0);
    }
    snprintf(what, sizeof(what), "op=put_signal hosts=%d ranks=%d", BC_HOSTS, n);
    {
        const bench_mpi_row *p = bc_row(sh->plexus, sh->nplexus, BENCH_MPI_PUT_SIGNAL, 0);
        const bench_mpi_row *m = bc_best(&sh->mpi, BENCH_MPI_PUT_SIGNAL, 0, &which);

        if (p != NULL)
            bench_line(BC_NAME, "%s peer=%d system=plexus half_rtt_us=%.3f", what,
                       sh->per_host, p->us);
        for (int v = 0; v < 2; v++) {
            const bench_mpi_row *mv = bc_row(sh->mpi.rows[v], sh->mpi.nrows[v],
                                             BENCH_MPI_PUT_SIGNAL, 0);

            if (mv != NULL)
                bench_line(BC_NAME, "%s peer=%d system=%s half_rtt_us=%.3f", what,
                           sh->per_host, bc_mpi_names[v], mv->us);
        }
        if (m != NULL) {
            bench_line(BC_NAME, "%s peer=%d system=openmpi half_rtt_us=%.3f best_of=%s", what,
                       sh->per_host, m->us, bc_mpi_names[which]);
            if (p != NULL)
                bc_hosts_ratio(what, p->us, m->us, 1.2);
        }
    }
}

/*
 * `bench_comm --hosts 2`: 2 hosts x 1 chip and 2 hosts x 2 chips of plexus, Open MPI on 2
 * ranks (1 per host) and 4 (2 per host), each a job under the namespace harness, interleaved
 * (plexus, then Open MPI, per shape). Where the harness cannot run (not root, no ip netns):
 * `BENCH comm hosts=2 skipped=<why>` and 77 in every mode, since nothing was measured. A full
 * or quick run without Open MPI refuses to start, as bench_comm's does. Returns the exit
 * status.
 */
static int bc_hosts_main(bench_mode mode)
{
    static bc_hosts_shape shapes[2] = {{.per_host = 1}, {.per_host = 2}};
    char why[512] = "";
    int rc = 0;

    bench_line(BC_NAME, "config hosts=%d shapes=2x1,2x2 sizes=%d reps=%d cores_per_chip=1 "
               "dtype=f32 op=sum transport=auto pp_iters=%d plexus=%s mode=%s harness=%s",
               BC_HOSTS, g_plan.nsizes, g_plan.reps, g_plan.pp_iters, PX_VERSION_STRING,
               bench_mode_name(mode), bc_harness());
    if (!bench_mpi_available(why, sizeof(why))) {
        if (mode != BENCH_SMOKE) {
            fprintf(stderr, "bench_comm --hosts: the Open MPI anchor cannot run (%s): run "
                    "`make deps-bench`\n", why);
            return 1;
        }
        snprintf(why, sizeof(why), "openmpi_not_installed");
        rc = 1;
    }
    for (int i = 0; rc == 0 && i < 2; i++) {
        rc = bc_hosts_plexus(&shapes[i], mode, why, sizeof(why));
        if (rc != 1)
            rc = bc_hosts_openmpi(&shapes[i], mode, why, sizeof(why)) == 1 ? 1 : 0;
        if (rc == 0)
            bc_hosts_print(&shapes[i]);
    }
    if (rc == 1) {
        bc_token(why);
        bench_line(BC_NAME, "hosts=%d skipped=%s", BC_HOSTS, why);
        return 77;
    }
    return bench_finish();
}

/* Takes `--hosts H` and `--hosts-rank CHIPS` out of argv (the rest goes to bench_start);
 * returns 0, or -1 after a message. */
static int bc_hosts_args(int *argc, char **argv, int *hosts, int *rank_chips)
{
    int k = 1;

    for (int i = 1; i < *argc; i++) {
        int is_hosts = strcmp(argv[i], "--hosts") == 0;

        if (!is_hosts && strcmp(argv[i], "--hosts-rank") != 0) {
            argv[k++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc || (is_hosts && strcmp(argv[i + 1], "2") != 0) ||
            (!is_hosts && (atoi(argv[i + 1]) < 1 || atoi(argv[i + 1]) > 8))) {
            fprintf(stderr, "bench_comm: %s: expected %s\n", argv[i],
                    is_hosts ? "--hosts 2 (2 hosts as network namespaces)"
                             : "--hosts-rank CHIPS (1..8; started by --hosts)");
            return -1;
        }
        *(is_hosts ? hosts : rank_chips) = atoi(argv[++i]);
    }
    *argc = k;
    argv[k] = NULL;
    return 0;
}

/* Takes `--case shrink` out of argv: only the shrink/recreate/kshrink cases run (what a change
 * to death detection is measured with). Returns 1 when given, 0 when not, -1 after a message. */
static int bc_case_arg(int *argc, char **argv)
{
    int k = 1, only = 0;

    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--case") != 0) {
            argv[k++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc || strcmp(argv[i + 1], "shrink") != 0) {
            fprintf(stderr, "bench_comm: --case: expected --case shrink\n");
            return -1;
        }
        only = 1;
        i++;
    }
    *argc = k;
    argv[k] = NULL;
    return only;
}

int main(int argc, char **argv)
{
    static const int ranks[2] = {2, 4};
    bench_mode mode = BENCH_FULL;
    char why[256] = "", cfg[1024] = "";
    int rc, have_mpi, hosts = 0, rank_chips = 0, only_shrink;

    if (bc_hosts_args(&argc, argv, &hosts, &rank_chips) != 0 ||
        (only_shrink = bc_case_arg(&argc, argv)) < 0)
        return 1;
    if ((rc = bench_start(argc, argv, "bench_comm",
                          "allreduce bus bandwidth and put_signal latency of plexus domains "
                          "against Open MPI (--hosts 2: across 2 hosts made as network "
                          "namespaces, as root)", &mode)) >= 0)
        return rc;
    g_plan = bc_plan_for(mode);
    if (rank_chips > 0)
        return bc_hosts_rank(rank_chips, mode);
    if (hosts > 0)
        return bc_hosts_main(mode);
    if (only_shrink) {
        bc_shrink_case(mode);
        return bench_finish();
    }
    have_mpi = bench_mpi_available(why, sizeof(why));
    bench_line(BC_NAME, "config ranks=2,4 sizes=%d reps=%d cores_per_chip=1 dtype=f32 op=sum "
               "transports=direct,staged,mixed(4 ranks, profile pairs) pp_iters=%d plexus=%s "
               "mode=%s openmpi=%s", g_plan.nsizes, g_plan.reps,
               g_plan.pp_iters, PX_VERSION_STRING, bench_mode_name(mode),
               have_mpi ? "yes" : "no");
    if (!have_mpi) {
        if (mode != BENCH_SMOKE) {
            fprintf(stderr, "bench_comm: the Open MPI anchor cannot run (%s): run `make "
                    "deps-bench`\n", why);
            return 1;
        }
        bench_line(BC_NAME, "system=openmpi skipped=%s", "openmpi_not_installed");
    }
    for (int i = 0; i < 2; i++) {
        static bc_mpi mpi;
        bc_result res[BC_NTL];
        int have[BC_NTL] = {0};

        for (int t = 0; t < BC_NTL; t++)
            if (t != BC_MIXED || ranks[i] == 4) /* mixed needs two groups of chips */
                have[t] = bc_plexus(ranks[i], t, &res[t]) == 0;
        if (!have[BC_DIRECT])
            continue;
        memset(&mpi, 0, sizeof(mpi));
        for (int v = 0; have_mpi && v < 2; v++) { /* as installed, then with malloc tuned */
            mpi.nrows[v] = bench_mpi_anchor_variant(ranks[i], mode, BENCH_MPI_ALL, v,
                                                    mpi.rows[v], BENCH_MPI_MAX_ROWS, cfg,
                                                    sizeof(cfg));
            if (mpi.nrows[v] < 0) {
                bench_fail(BC_NAME, "the Open MPI anchor (%s) failed on %d ranks",
                           bc_mpi_names[v], ranks[i]);
                mpi.nrows[v] = 0;
            } else if (i == 0) {
                bench_line(BC_NAME, "config %s %s", bc_mpi_names[v], cfg);
            }
        }
        bc_print(ranks[i], res, have, &mpi, i == 0);
    }
    bc_loaded_case(mode, have_mpi);
    bc_domain_alloc_case(mode);
    bc_shrink_case(mode);
    return bench_finish();
}
