/*
 * comm_mpi_anchor.c - the Open MPI side of bench_comm: MPI_Allreduce bus bandwidth and a
 * put-with-signal ping-pong on a shared-memory window (an ordinary RMA window where the two
 * ranks do not share a node: bench_comm --hosts), timed and verified the way bench_comm times
 * and verifies plexus.
 *
 * This is the only program in the project that links libmpi. It is started by
 * bench_mpi_anchor() (bench/mpi_anchor.c) as
 *     mpirun -np N <pinned options> comm_mpi_anchor full|quick|smoke [allreduce] [put_signal]
 *            [put_peer=K]   (put_signal between ranks 0 and K, default 1)
 * and prints one machine-readable `ANCHOR ...` line per result on stdout (rank 0 only):
 *     ANCHOR config library="<MPI_Get_library_version>" ranks=<n> mode=<m>
 *     ANCHOR op=allreduce ranks=<n> bytes=<b> us=<median> algbw_gbs=<x> busbw_gbs=<x>
 *            iters=<i> reps=<r> verified=<0|1>
 *     ANCHOR op=put_signal ranks=2 bytes=8 half_rtt_us=<median> iters=<i> reps=<r>
 *            verified=<0|1> peer=<K> window=<shared|allocate>
 * Any verification failure is explained on stderr by the rank that saw it and makes every
 * rank exit 1. A put_signal wait that passes its deadline aborts the job (exit non-zero).
 *
 * Test hooks (read from the environment, forwarded by bench_mpi_anchor with mpirun -x):
 *   PLEXUS_MPI_ANCHOR_FAULT=allreduce   the last rank corrupts one element of each checked
 *                                       allreduce result (verification must catch it)
 *   PLEXUS_MPI_ANCHOR_FAULT=put_signal  rank 1 answers with a wrong payload
 *   PLEXUS_MPI_ANCHOR_FAULT=drop_signal rank 0 never raises rank 1's flag (the wait must
 *                                       end at its deadline)
 *   PLEXUS_MPI_ANCHOR_FAULT=hang        rank 0 ignores SIGTERM and sleeps for 10 minutes
 *                                       before starting (the launcher's timeout must kill
 *                                       the job, rank included)
 *   PLEXUS_MPI_ANCHOR_WAIT_S=<s>        deadline of one put_signal wait (default 10 s)
 */
#include "benchutil.h"

#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ANCHOR_MAX_SIZES 32
#define ANCHOR_MAX_REPS 16
#define ANCHOR_MAX_ITERS 1000000
#define ANCHOR_MAX_RECAL 3     /* reruns of the repetitions after a bad calibration */
#define ANCHOR_MAX_REPORTS 4   /* wrong elements reported per rank and check */
#define ANCHOR_SPIN_POLLS 1000 /* polls before a waiting rank starts to yield */
#define ANCHOR_FLAG_OFFSET 64  /* flag on its own cache line, after the payload */
#define ANCHOR_WIN_BYTES 128
#define ANCHOR_PAYLOAD_PING 0x5049000000000000ull /* "PI" + sequence number */
#define ANCHOR_PAYLOAD_PONG 0x504f000000000000ull /* "PO" + sequence number */

/* One run's shape, from the mode. */
typedef struct anchor_plan {
    bench_mode mode;
    size_t sizes[ANCHOR_MAX_SIZES]; /* allreduce message sizes in bytes */
    int nsizes;
    int reps;           /* timed repetitions per size (median over them) */
    double min_rep_s;   /* a repetition runs at least this long (iterations calibrated) */
    int pingpong_iters; /* round trips per put_signal repetition (0: calibrate) */
    double wait_s;      /* deadline of one put_signal wait */
    const char *fault;  /* PLEXUS_MPI_ANCHOR_FAULT or "" */
    int peer;           /* the put_signal partner of rank 0 (put_peer=K; default 1) */
} anchor_plan;

static int anchor_rank;
static int anchor_nranks;

static double anchor_now_s(void)
{
    return (double)bench_now_ns() * 1e-9;
}

/* Fills the plan for mode; returns 0, or -1 after a message on stderr. */
static int anchor_plan_init(anchor_plan *p, bench_mode mode)
{
    static const size_t quick_sizes[] = {8, 1024, 65536, 1u << 20, 8u << 20, 64u << 20};
    static const size_t smoke_sizes[] = {8, 4096};
    const char *wait = getenv("PLEXUS_MPI_ANCHOR_WAIT_S");
    const char *fault = getenv("PLEXUS_MPI_ANCHOR_FAULT");

    memset(p, 0, sizeof(*p));
    p->mode = mode;
    if (mode == BENCH_FULL) {
        for (size_t b = 8; b <= (64u << 20); b *= 2)
            p->sizes[p->nsizes++] = b;
        p->reps = 5;
        p->min_rep_s = 0.020;
    } else if (mode == BENCH_QUICK) {
        memcpy(p->sizes, quick_sizes, sizeof(quick_sizes));
        p->nsizes = (int)(sizeof(quick_sizes) / sizeof(quick_sizes[0]));
        p->reps = 3;
        p->min_rep_s = 0.020;
    } else {
        memcpy(p->sizes, smoke_sizes, sizeof(smoke_sizes));
        p->nsizes = (int)(sizeof(smoke_sizes) / sizeof(smoke_sizes[0]));
        p->reps = 1;
        p->min_rep_s = 0.0;
        p->pingpong_iters = 100;
    }
    p->wait_s = 10.0;
    if (wait != NULL) {
        char *end = NULL;
        double w = strtod(wait, &end);

        if (end == wait || *end != '\0' || !(w > 0.0) || w > 3600.0) {
            fprintf(stderr,
                    "comm_mpi_anchor: PLEXUS_MPI_ANCHOR_WAIT_S='%s' is not a number of seconds "
                    "in (0, 3600]; set it to e.g. 10 or unset it\n",
                    wait);
            return -1;
        }
        p->wait_s = w;
    }
    p->fault = fault != NULL ? fault : "";
    return 0;
}

/* The checked input: exact in float for every rank count up to 64 (see verify). */
static void anchor_fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(i % 97) + 100.0f * (float)anchor_rank;
}

/*
 * Checks the result of one in-place sum of anchor_fill() inputs: element i must be
 * n * (i % 97) + 100 * n (n - 1) / 2. Every value is an integer below 2^24 for n <= 64
 * (64 * 96 + 100 * 2016 = 207744), and so is every partial sum in any order: the float
 * result is exact whatever reduction order Open MPI picks. Returns the number of wrong
 * elements on this rank and reports the first few on stderr.
 */
static long anchor_check(const float *v, size_t n, size_t bytes)
{
    const long nr = anchor_nranks;
    long bad = 0;

    for (size_t i = 0; i < n; i++) {
        const float want = (float)(nr * (long)(i % 97) + 100 * nr * (nr - 1) / 2);

        if (v[i] != want) {
            if (bad < ANCHOR_MAX_REPORTS)
                fprintf(stderr,
                        "comm_mpi_anchor: rank %d: allreduce of %zu bytes on %ld ranks: "
                        "element %zu is %.1f, expected %.1f (n*(i%%97) + 100*n(n-1)/2)\n",
                        anchor_rank, bytes, nr, i, (double)v[i], (double)want);
            bad++;
        }
    }
    return bad;
}

/* One untimed allreduce of fresh inputs, checked on every rank; returns the total bad count. */
static long anchor_allreduce_checked(float *buf, size_t n, size_t bytes, const anchor_plan *p)
{
    long bad = 0, total = 0;

    anchor_fill(buf, n);
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (strcmp(p->fault, "allreduce") == 0 && anchor_rank == anchor_nranks - 1)
        buf[n / 2] += 1.0f;
    bad = anchor_check(buf, n, bytes);
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

/*
 * Times iters in-place allreduces from fresh inputs: a barrier, the loop, and the slowest
 * rank's elapsed time (MPI_Allreduce of MAX, so every rank agrees). Returns seconds.
 */
static double anchor_allreduce_rep(float *buf, size_t n, int iters)
{
    double t0, dt, slowest = 0.0;

    anchor_fill(buf, n);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = anchor_now_s();
    for (int k = 0; k < iters; k++)
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    dt = anchor_now_s() - t0;
    MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/*
 * Iteration-count calibration, shared by both operations. Measurements with a growing count
 * (x4) go on until one lasts min_rep_s or they took 4 min_rep_s together; the count is then
 * min_rep_s over the fastest time per operation seen. On the busy machine one preempted
 * measurement is far too slow: deciding from the fastest keeps it from ending up with a
 * repetition far shorter than min_rep_s.
 */
typedef struct anchor_calib {
    double min_rep_s;
    double best_per_op; /* seconds, over every measurement so far */
    double spent;       /* seconds measured so far */
} anchor_calib;

/* Takes a measurement of iters operations in t seconds; returns the next count, or the
 * final count negated when calibration is done. */
static int anchor_calib_step(anchor_calib *c, int iters, double t)
{
    double per = t / iters, want;

    if (c->best_per_op <= 0.0 || per < c->best_per_op)
        c->best_per_op = per;
    c->spent += t;
    if (t < c->min_rep_s && c->spent < 4.0 * c->min_rep_s && iters < ANCHOR_MAX_ITERS / 4)
        return iters * 4;
    want = c->best_per_op > 0.0 ? c->min_rep_s / c->best_per_op + 1.0 : ANCHOR_MAX_ITERS;
    return want >= ANCHOR_MAX_ITERS ? -ANCHOR_MAX_ITERS : -(int)want;
}

/*
 * After the timed repetitions: when their median lasted under half of min_rep_s (every
 * calibration measurement was preempted, so the count came out too small), returns the
 * count that makes a repetition last min_rep_s, to run them again; else 0. rep_s[] holds
 * each repetition's seconds; at most ANCHOR_MAX_RECAL reruns.
 */
static int anchor_rescale(const double *rep_s, int reps, int iters, double min_rep_s, int *reruns)
{
    double v[ANCHOR_MAX_REPS], med, want;

    memcpy(v, rep_s, sizeof(v[0]) * (size_t)reps);
    med = bench_median(v, reps);
    if (min_rep_s <= 0.0 || med >= 0.5 * min_rep_s || *reruns >= ANCHOR_MAX_RECAL ||
        iters >= ANCHOR_MAX_ITERS)
        return 0;
    ++*reruns;
    want = med > 0.0 ? (double)iters * min_rep_s / med + 1.0 : (double)ANCHOR_MAX_ITERS;
    return want >= ANCHOR_MAX_ITERS ? ANCHOR_MAX_ITERS : (int)want;
}

/* Calibrates the allreduce of n floats (also the warm-up); every rank agrees on the count
 * because each measurement is the slowest rank's. */
static int anchor_calibrate(float *buf, size_t n, double min_rep_s)
{
    anchor_calib c = {.min_rep_s = min_rep_s};
    int iters = 1;

    while (iters > 0)
        iters = anchor_calib_step(&c, iters, anchor_allreduce_rep(buf, n, iters));
    return -iters;
}

/*
 * One allreduce size: a checked call, calibration (also the warm-up), p->reps timed
 * repetitions (the single-iteration ones checked too: they start from fresh inputs), and a
 * checked call after them. Rank 0 prints the row. Returns the number of wrong elements.
 */
static long anchor_allreduce_size(float *buf, size_t bytes, const anchor_plan *p)
{
    const size_t n = bytes / sizeof(float);
    double times[ANCHOR_MAX_REPS], rep_s[ANCHOR_MAX_REPS];
    long bad = anchor_allreduce_checked(buf, n, bytes, p);
    int iters = p->min_rep_s > 0.0 ? anchor_calibrate(buf, n, p->min_rep_s) : 1;
    double us, algbw, busbw;
    int reruns = 0, again;

    do {
        for (int r = 0; r < p->reps; r++) {
            rep_s[r] = anchor_allreduce_rep(buf, n, iters);
            times[r] = rep_s[r] / iters;
            if (iters == 1) {
                long mine = anchor_check(buf, n, bytes), all = 0;

                MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
                bad += all;
            }
        }
        /* rep_s is the slowest rank's on every rank: all ranks decide alike */
        again = anchor_rescale(rep_s, p->reps, iters, p->min_rep_s, &reruns);
        iters = again > 0 ? again : iters;
    } while (again > 0);
    bad += anchor_allreduce_checked(buf, n, bytes, p);
    us = bench_median(times, p->reps) * 1e6;
    algbw = (double)bytes / (us * 1e-6) / 1e9;
    busbw = algbw * 2.0 * (anchor_nranks - 1) / anchor_nranks;
    if (anchor_rank == 0) {
        printf("ANCHOR op=allreduce ranks=%d bytes=%zu us=%.3f algbw_gbs=%.4f busbw_gbs=%.4f "
               "iters=%d reps=%d verified=%d\n",
               anchor_nranks, bytes, us, algbw, busbw, iters, p->reps, bad == 0);
        fflush(stdout);
    }
    return bad;
}

/* Runs every allreduce size; returns the number of wrong elements over all sizes. */
static long anchor_allreduce(const anchor_plan *p)
{
    size_t maxbytes = p->sizes[p->nsizes - 1];
    float *buf = aligned_alloc(64, maxbytes);
    long bad = 0;
    int ok = buf != NULL, all_ok = 0;

    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (!ok)
            fprintf(stderr,
                    "comm_mpi_anchor: rank %d: cannot allocate %zu bytes for the "
                    "allreduce buffer; free memory or run fewer ranks\n",
                    anchor_rank, maxbytes);
        free(buf);
        return 1;
    }
    for (int s = 0; s < p->nsizes; s++)
        bad += anchor_allreduce_size(buf, p->sizes[s], p);
    free(buf);
    return bad;
}

/* The shared window of the ping-pong: payload at 0, flag at ANCHOR_FLAG_OFFSET. */
typedef struct anchor_win {
    MPI_Win win;
    MPI_Comm comm; /* rank 0 and its partner: ranks 0 and 1 of comm */
    int me;        /* this rank in comm */
    int shared;    /* 1: MPI_Win_allocate_shared (one node), 0: MPI_Win_allocate */
    volatile uint64_t *payload;
    volatile uint64_t *flag;
} anchor_win;

/*
 * Waits until this rank's flag reaches seq: MPI_Win_sync and a load, a short spin, then a
 * sched_yield per poll, until the deadline. Returns 0, or -1 after a message on stderr.
 */
static int anchor_wait_flag(anchor_win *w, uint64_t seq, double wait_s)
{
    const double deadline = anchor_now_s() + wait_s;
    uint64_t seen = 0;

    for (long polls = 0;; polls++) {
        MPI_Win_sync(w->win);
        seen = __atomic_load_n(w->flag, __ATOMIC_ACQUIRE);
        if (seen >= seq)
            return 0;
        if (polls >= ANCHOR_SPIN_POLLS) {
            sched_yield();
            if ((polls & 63) == 0 && anchor_now_s() > deadline)
                break;
        }
    }
    fprintf(stderr,
            "comm_mpi_anchor: rank %d: put_signal: timed out after %.1f s waiting for the flag "
            "to reach %llu; it is %llu (the peer's put + flush never arrived; raise "
            "PLEXUS_MPI_ANCHOR_WAIT_S if the machine is overloaded)\n",
            anchor_rank, wait_s, (unsigned long long)seq, (unsigned long long)seen);
    return -1;
}

/* Puts an 8-byte payload, flushes, puts the flag seq, flushes (payload visible first). */
static void anchor_put_signal(anchor_win *w, int peer, uint64_t payload, uint64_t seq,
                              int raise_flag)
{
    MPI_Put(&payload, 1, MPI_UINT64_T, peer, 0, 1, MPI_UINT64_T, w->win);
    MPI_Win_flush(peer, w->win);
    if (raise_flag) {
        MPI_Put(&seq, 1, MPI_UINT64_T, peer, ANCHOR_FLAG_OFFSET, 1, MPI_UINT64_T, w->win);
        MPI_Win_flush(peer, w->win);
    }
}

/* Checks the payload that came with flag seq; returns 0, or 1 after a message on stderr
 * (the first ANCHOR_MAX_REPORTS times). */
static long anchor_check_payload(anchor_win *w, uint64_t want, uint64_t seq)
{
    static int reported;
    uint64_t got = *w->payload;

    if (got == want)
        return 0;
    if (reported++ < ANCHOR_MAX_REPORTS)
        fprintf(stderr,
                "comm_mpi_anchor: rank %d: put_signal round trip %llu: payload is 0x%016llx, "
                "expected 0x%016llx (wrong, or not yet visible when its flag was)\n",
                anchor_rank, (unsigned long long)seq, (unsigned long long)got,
                (unsigned long long)want);
    return 1;
}

/*
 * iters round trips starting at sequence number *seq; returns the wrong payloads seen, or -1
 * when a wait timed out. *elapsed gets rank 0's time for the whole repetition.
 */
static long anchor_pingpong(anchor_win *w, const anchor_plan *p, uint64_t *seq, int iters,
                            double *elapsed)
{
    const int me = w->me;
    const int drop = strcmp(p->fault, "drop_signal") == 0;
    const uint64_t wrong = strcmp(p->fault, "put_signal") == 0 ? 1 : 0;
    long bad = 0;
    double t0;

    MPI_Barrier(w->comm);
    t0 = anchor_now_s();
    for (int k = 0; k < iters; k++) {
        const uint64_t s = ++*seq;

        if (me == 0) {
            anchor_put_signal(w, 1, ANCHOR_PAYLOAD_PING | s, s, !drop);
            if (anchor_wait_flag(w, s, p->wait_s) != 0)
                return -1;
            bad += anchor_check_payload(w, ANCHOR_PAYLOAD_PONG | s, s);
        } else {
            if (anchor_wait_flag(w, s, p->wait_s) != 0)
                return -1;
            bad += anchor_check_payload(w, ANCHOR_PAYLOAD_PING | s, s);
            anchor_put_signal(w, 0, (ANCHOR_PAYLOAD_PONG | s) ^ wrong, s, 1);
        }
    }
    *elapsed = anchor_now_s() - t0;
    return bad;
}

/*
 * Opens the window on rank 0 and its partner (comm already split): a shared-memory window
 * (MPI_Win_allocate_shared, osc sm: a put is a store) when the two share a node, else an
 * ordinary RMA window (MPI_Win_allocate: a put goes over the network). Returns 0 or -1.
 */
static int anchor_win_open(anchor_win *w)
{
    MPI_Comm node;
    char *base = NULL;
    int rc, on_node = 0;

    MPI_Comm_rank(w->comm, &w->me);
    MPI_Comm_split_type(w->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
    w->shared = on_node == 2;
    if (w->shared)
        rc = MPI_Win_allocate_shared(ANCHOR_WIN_BYTES, 1, MPI_INFO_NULL, w->comm, &base,
                                     &w->win);
    else
        rc = MPI_Win_allocate(ANCHOR_WIN_BYTES, 1, MPI_INFO_NULL, w->comm, &base, &w->win);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr,
                "comm_mpi_anchor: rank %d: %s of %d bytes failed (error %d); is the osc "
                "component for it (%s) available?\n",
                anchor_rank, w->shared ? "MPI_Win_allocate_shared" : "MPI_Win_allocate",
                ANCHOR_WIN_BYTES, rc, w->shared ? "sm" : "pt2pt or rdma");
        return -1;
    }
    memset(base, 0, ANCHOR_WIN_BYTES);
    w->payload = (volatile uint64_t *)base;
    w->flag = (volatile uint64_t *)(base + ANCHOR_FLAG_OFFSET);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win);
    MPI_Win_sync(w->win);
    MPI_Barrier(w->comm);
    return 0;
}

/* Calibrates round trips per repetition on ranks 0 and 1 (both agree: each measurement is
 * the slower rank's); returns the count, or -1 when a wait timed out. */
static int anchor_pingpong_calibrate(anchor_win *w, const anchor_plan *p, uint64_t *seq, long *bad)
{
    anchor_calib c = {.min_rep_s = p->min_rep_s};
    int iters = 16;

    while (iters > 0) {
        double t = 0.0, slowest = 0.0;
        long b = anchor_pingpong(w, p, seq, iters, &t);

        if (b < 0)
            return -1;
        *bad += b;
        MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, w->comm);
        iters = anchor_calib_step(&c, iters, slowest);
    }
    return -iters;
}

/*
 * The put_signal ping-pong between rank 0 and rank p->peer of MPI_COMM_WORLD (other ranks
 * only take part in the split and the final agreement). Returns the wrong payloads, or aborts the job
 * when a wait times out (the peer is then stuck in its own wait).
 */
static long anchor_put_signal_run(const anchor_plan *p)
{
    anchor_win w;
    double times[ANCHOR_MAX_REPS];
    uint64_t seq = 0;
    long bad = 0, total = 0;
    int in = anchor_rank == 0 || anchor_rank == p->peer, shared = 1;
    int iters = p->pingpong_iters, reruns = 0;

    memset(&w, 0, sizeof(w));
    MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, anchor_rank, &w.comm);
    if (in) {
        if (anchor_win_open(&w) != 0)
            MPI_Abort(MPI_COMM_WORLD, 2);
        if (iters == 0)
            iters = anchor_pingpong_calibrate(&w, p, &seq, &bad);
        for (int r = 0; r < p->reps && iters > 0; r++) {
            long b = anchor_pingpong(&w, p, &seq, iters, &times[r]);

            if (b < 0) {
                iters = -1;
                break;
            }
            bad += b;
            if (r == p->reps - 1) { /* rank 0's times decide for both */
                int again = anchor_rescale(times, p->reps, iters, p->min_rep_s, &reruns);

                MPI_Bcast(&again, 1, MPI_INT, 0, w.comm);
                if (again > 0) {
                    iters = again;
                    r = -1; /* run the repetitions again */
                }
            }
        }
        if (iters < 0)
            MPI_Abort(MPI_COMM_WORLD, 3);
        shared = w.shared;
        MPI_Win_unlock_all(w.win);
        MPI_Win_free(&w.win);
        MPI_Comm_free(&w.comm);
    }
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (anchor_rank == 0) {
        double half = bench_median(times, p->reps) / iters / 2.0 * 1e6;

        printf("ANCHOR op=put_signal ranks=2 bytes=8 half_rtt_us=%.3f iters=%d reps=%d "
               "verified=%d peer=%d window=%s\n",
               half, iters, p->reps, total == 0, p->peer, shared ? "shared" : "allocate");
        fflush(stdout);
    }
    return total;
}

/* Parses argv: the mode, then the ops (none: both). Returns 0 or -1 with a message. */
static int anchor_args(int argc, char **argv, bench_mode *mode, int *ar, int *ps, int *peer)
{
    int ops = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: mpirun -np N comm_mpi_anchor full|quick|smoke "
                        "[allreduce] [put_signal] [put_peer=K]\n");
        return -1;
    }
    if (strcmp(argv[1], "full") == 0) {
        *mode = BENCH_FULL;
    } else if (strcmp(argv[1], "quick") == 0) {
        *mode = BENCH_QUICK;
    } else if (strcmp(argv[1], "smoke") == 0) {
        *mode = BENCH_SMOKE;
    } else {
        fprintf(stderr, "comm_mpi_anchor: unknown mode '%s'; expected full, quick or smoke\n",
                argv[1]);
        return -1;
    }
    *ar = *ps = 0;
    *peer = 1;
    for (int i = 2; i < argc; i++) {
        char *end = NULL;

        if (strcmp(argv[i], "allreduce") == 0) {
            *ar = ops = 1;
        } else if (strcmp(argv[i], "put_signal") == 0) {
            *ps = ops = 1;
        } else if (strncmp(argv[i], "put_peer=", 9) == 0) {
            long k = strtol(argv[i] + 9, &end, 10);

            if (end == argv[i] + 9 || *end != '\0' || k < 1 || k > 63) {
                fprintf(stderr, "comm_mpi_anchor: %s: expected put_peer=K, K in 1..63 (the "
                        "rank that answers rank 0's puts)\n", argv[i]);
                return -1;
            }
            *peer = (int)k;
        } else {
            fprintf(stderr,
                    "comm_mpi_anchor: unknown operation '%s'; expected allreduce or "
                    "put_signal\n",
                    argv[i]);
            return -1;
        }
    }
    if (!ops)
        *ar = *ps = 1;
    return 0;
}

/* Prints the config line: the library version on one line, quotes replaced. */
static void anchor_print_config(const anchor_plan *p)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    MPI_Get_library_version(lib, &len);
    for (int i = 0; i < len && lib[i] != '\0'; i++)
        if (lib[i] == '\n' || lib[i] == '"' || lib[i] == '\r')
            lib[i] = ' ';
    while (len > 0 && (lib[len - 1] == ' ' || lib[len - 1] == '\0'))
        lib[--len] = '\0';
    printf("ANCHOR config library=\"%s\" ranks=%d mode=%s\n", lib, anchor_nranks,
           bench_mode_name(p->mode));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    anchor_plan plan;
    bench_mode mode = BENCH_SMOKE;
    int do_ar = 0, do_ps = 0, peer = 1;
    long bad = 0;

    if (anchor_args(argc, argv, &mode, &do_ar, &do_ps, &peer) != 0 ||
        anchor_plan_init(&plan, mode) != 0)
        return 2;
    plan.peer = peer;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &anchor_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &anchor_nranks);
    if (do_ps && (anchor_nranks < 2 || plan.peer >= anchor_nranks)) {
        if (anchor_rank == 0)
            fprintf(stderr,
                    "comm_mpi_anchor: put_signal between ranks 0 and %d needs at least %d "
                    "ranks, got %d; run with mpirun -np %d or more\n",
                    plan.peer, plan.peer + 1, anchor_nranks, plan.peer + 1);
        MPI_Finalize();
        return 2;
    }
    if (anchor_rank == 0 && strcmp(plan.fault, "hang") == 0) {
        signal(SIGTERM, SIG_IGN); /* only SIGKILL ends it: the launcher's last resort */
        sleep(600);
    }
    if (anchor_rank == 0)
        anchor_print_config(&plan);
    if (do_ar)
        bad += anchor_allreduce(&plan);
    if (do_ps)
        bad += anchor_put_signal_run(&plan);
    MPI_Finalize();
    return bad == 0 ? 0 : 1;
}
