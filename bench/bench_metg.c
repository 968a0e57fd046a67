/*
 * bench_metg.c - task granularity, Task Bench's way: METG(50 %), the smallest average task
 * granularity (wall time x cores / tasks) at which a system still reaches half of its best
 * flop rate, for plexus and two anchors (StarPU 1.3 and OpenMP tasks with depend clauses),
 * each with 2 threads running tasks. The method follows the description in Slaughter et al.,
 * "Task Bench" (SC20); no code is taken from it.
 *
 * Two graphs over width W = 2 x threads points and S steps: task (t, i) depends on the tasks
 * (t-1, j) for j in [i - r/2, i + r/2] clipped to [0, W), with radix r = 3 (`stencil_1d`: the
 * point itself and both neighbours) or r = 5 (`nearest`). Step t writes its records into
 * buffer t mod 2 and reads step t-1's from the other, so the three systems infer the same
 * dependencies from the same accesses. The kernel is compute-bound: `iter` iterations of a
 * multiply and an add on 64 doubles plus a 64-element sum, 2*64*iter + 64 flops. Each record
 * carries its producer's step, point and kernel result; every task checks that each of its
 * inputs came from the right producer and its output slot from the task two steps back
 * (a missing edge shows up as a counted violation), every task counts its executions, and
 * after each run every task must have run exactly once and the last two steps' records must
 * be in place. plexus's edge count is checked against the hand-computed one.
 *
 * The sweep halves `iter` from 16384, where every system is near 100 %, down to 1, where every
 * system is far below 50 % (a task is then 192 flops). Running the whole range rather than
 * stopping at the first points below 50 % keeps a burst of load from other processes from
 * ending the sweep early; the small points are cheap. The sweep runs in `reps` rounds, each
 * a pass over every point per system (plexus, then OpenMP, then each StarPU scheduler in one
 * StarPU session per round), the points' order reversed every other round; a point's wall
 * time is the median of its rounds. Efficiency = flop rate at the point / the system's peak,
 * the best (median) flop rate of any point of its sweep on that graph (printed). METG is
 * picked as Task Bench's scripts pick it: the smallest granularity at or above 50 %,
 * interpolated linearly at exactly 50 % towards the next point of the sweep when that one is
 * smaller. docs/benchmarks.md describes the output; an SVG plot of the efficiency curves is
 * written next to the build's bin/ directory.
 */
#include "benchutil.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <plexus/plexus.h>

#include "dfx/collectors/out.h" /* dfxc_buf and the atomic whole-file write */

#ifdef PX_HAVE_STARPU
#include <starpu.h>
#endif
#ifdef PX_HAVE_OPENMP
#include <omp.h>
#endif

#define BM_NAME "metg"
#define BM_THREADS 2               /* threads running tasks, in every system */
#define BM_WIDTH (2 * BM_THREADS)  /* points per step */
#define BM_MAXDEPS 5               /* the largest radix */
#define BM_LANES 64                /* doubles the kernel works on */
#define BM_MAX_REPS 16
#define BM_MAX_POINTS 24
#define BM_NSCHED 3
#define BM_FIXED_ARGS 5            /* plexus args before the inputs: out, t, i, lo, iter */
#define BM_EMPTY (-1)              /* step and point of a slot nobody has written */

typedef enum bm_graph { BM_STENCIL = 0, BM_NEAREST, BM_GRAPHS } bm_graph;

static const char *const bm_graph_names[BM_GRAPHS] = {"stencil_1d", "nearest"};
static const int bm_radix[BM_GRAPHS] = {3, 5};

/* What is run at every point: plexus, StarPU with each scheduler, OpenMP. */
typedef enum bm_runner { BM_PX = 0, BM_SP0, BM_OMP = BM_SP0 + BM_NSCHED, BM_RUNNERS } bm_runner;

static const char *const bm_sched_names[BM_NSCHED] = {"lws", "eager", "ws"};

/* One record: what a task wrote, one cache line, so no two records share a line. */
typedef struct bm_rec {
    int64_t step;  /* the producer's step, BM_EMPTY before any */
    int64_t point; /* the producer's point */
    double value;  /* the producer's kernel result */
    int64_t pad[5];
} bm_rec;

#define BM_REC_I64 ((int64_t)(sizeof(bm_rec) / sizeof(int64_t)))

/* One graph at one granularity. */
typedef struct bm_case {
    bm_graph graph;
    int steps;
    uint64_t iter;   /* kernel iterations */
    uint64_t ntasks; /* steps x width */
    uint64_t edges;  /* hand-computed, see bm_expected_edges() */
    double flops;    /* per task */
} bm_case;

/* Sizes of one mode. */
typedef struct bm_params {
    bench_mode mode;
    int steps;
    int reps;
    uint64_t iter_start; /* the sweep's first point */
    int fixed_points;    /* --smoke: only this many points; else 0 (down to iter 1) */
} bm_params;

/* The records, double-buffered by step (host memory; plexus copies them in and out). */
static bm_rec bm_buf[2][BM_WIDTH] __attribute__((aligned(64)));

/* Verification state written by the kernels of every system. */
static uint32_t *bm_ran;       /* executions per task */
static uint64_t bm_violations; /* input checks that failed (atomic) */
static double bm_expect;       /* the kernel's result for the run's iter */

/* ---- the graphs ---- */

/* The inputs of point i: points lo .. lo + *n - 1 of the previous step. */
static void bm_deps(bm_graph g, int i, int *lo, int *n)
{
    int h = bm_radix[g] / 2;
    int a = i - h < 0 ? 0 : i - h;
    int b = i + h > BM_WIDTH - 1 ? BM_WIDTH - 1 : i + h;

    *lo = a;
    *n = b - a + 1;
}

/*
 * Returns the number of edges of the graph under sequential consistency, counted as distinct
 * (producer, consumer) pairs. Task (t, i) with t >= 1 reads (t-1, j) for each of its n(i)
 * inputs (RAW). Its output slot (buffer t mod 2, point i) was last written by (t-2, i) when
 * t >= 2 (WAW) and read since by the tasks (t-1, k) that have i among their inputs (WAR);
 * the windows are symmetric, so those are exactly its own inputs' producers. So (t, i) has
 * n(i) producers, plus 1 when t >= 2, and the graph has
 *   (S - 1) x sum_i n(i) + (S - 2) x W   edges for S >= 2 steps (0 for S = 1).
 * W = 4: stencil_1d sum n(i) = 2 + 3 + 3 + 2 = 10, nearest = 3 + 4 + 4 + 3 = 14;
 * 1000 steps: 999 x 10 + 998 x 4 = 13982 and 999 x 14 + 998 x 4 = 17978.
 */
static uint64_t bm_expected_edges(bm_graph g, int steps)
{
    uint64_t sum = 0;
    int lo, n;

    if (steps < 2)
        return 0;
    for (int i = 0; i < BM_WIDTH; i++) {
        bm_deps(g, i, &lo, &n);
        sum += (uint64_t)n;
    }
    return (uint64_t)(steps - 1) * sum + (uint64_t)(steps - 2) * BM_WIDTH;
}

static bm_case bm_case_make(bm_graph g, int steps, uint64_t iter)
{
    bm_case c = {.graph = g, .steps = steps, .iter = iter};

    c.ntasks = (uint64_t)steps * BM_WIDTH;
    c.edges = bm_expected_edges(g, steps);
    c.flops = 2.0 * BM_LANES * (double)iter + BM_LANES;
    return c;
}

/* ---- the kernel, shared by every system ---- */

/*
 * The compute-bound kernel: iter rounds of a[k] = a[k] * m + c over 64 doubles (2 flops
 * each), then their sum (64 flops). Its result depends on iter only, so the producer's result
 * is known to every consumer. Not inlined, so every system runs the same machine code, and
 * aligned to 64 bytes, so that code runs at the same speed in every build: its inner loop
 * then sits in one 32-byte fetch block. Where the link happened to place that loop across
 * two, the kernel ran at half speed on the AMD EPYC VMs this was measured on, and the peak and
 * every point's granularity moved with unrelated changes elsewhere in the binary.
 */
__attribute__((noinline, aligned(64))) static double bm_compute(uint64_t iter)
{
    double a[BM_LANES], s = 0.0;

    for (int k = 0; k < BM_LANES; k++)
        a[k] = 1.0 + (double)k / BM_LANES;
    for (uint64_t n = 0; n < iter; n++)
        for (int k = 0; k < BM_LANES; k++)
            a[k] = a[k] * 0.9990234375 + 0.0009765625;
    for (int k = 0; k < BM_LANES; k++)
        s += a[k];
    return s;
}

static inline void bm_violation(void)
{
    __atomic_fetch_add(&bm_violations, 1, __ATOMIC_RELAXED);
}

/*
 * Task (t, i): in[k] must be (t-1, lo + k) with the kernel's result, and out must still hold
 * (t-2, i) (or be empty for t < 2); then the kernel runs and out becomes (t, i).
 */
static void bm_body(bm_rec *out, const bm_rec *const *in, int nin, int64_t t, int64_t i,
                    int64_t lo, uint64_t iter)
{
    int64_t old = t >= 2 ? t - 2 : BM_EMPTY;

    for (int k = 0; k < nin; k++)
        if (in[k]->step != t - 1 || in[k]->point != lo + k || in[k]->value != bm_expect)
            bm_violation();
    if (out->step != old || out->point != (old == BM_EMPTY ? BM_EMPTY : i))
        bm_violation();
    out->value = bm_compute(iter);
    out->step = t;
    out->point = i;
    __atomic_fetch_add(&bm_ran[(uint64_t)t * BM_WIDTH + (uint64_t)i], 1, __ATOMIC_RELAXED);
}

/* ---- verification ---- */

/* Puts the records and counts back to their state before a run of c. */
static void bm_reset(const bm_case *c)
{
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < BM_WIDTH; i++)
            bm_buf[s][i] = (bm_rec){.step = BM_EMPTY, .point = BM_EMPTY};
    memset(bm_ran, 0, c->ntasks * sizeof(bm_ran[0]));
    __atomic_store_n(&bm_violations, 0, __ATOMIC_RELAXED);
    bm_expect = bm_compute(c->iter);
}

/* Checks one run of c by sys; records a failure for each thing wrong. Returns 0 if clean. */
static int bm_verify(const bm_case *c, const char *sys, int rep)
{
    const char *g = bm_graph_names[c->graph];
    uint64_t viol = __atomic_load_n(&bm_violations, __ATOMIC_RELAXED);
    int before = bench_failures();

    if (viol != 0)
        bench_fail(BM_NAME, "graph %s system %s iter %" PRIu64 " rep %d: %" PRIu64 " input "
                   "checks failed (a task ran before a task it depends on)", g, sys, c->iter,
                   rep, viol);
    for (uint64_t t = 0; t < c->ntasks; t++) {
        if (bm_ran[t] != 1) {
            bench_fail(BM_NAME, "graph %s system %s iter %" PRIu64 " rep %d: task (step %"
                       PRIu64 ", point %" PRIu64 ") ran %u times, expected exactly once", g,
                       sys, c->iter, rep, t / BM_WIDTH, t % BM_WIDTH, bm_ran[t]);
            break;
        }
    }
    for (int64_t t = c->steps - 2 < 0 ? 0 : c->steps - 2; t < c->steps; t++) {
        for (int i = 0; i < BM_WIDTH; i++) {
            const bm_rec *r = &bm_buf[t % 2][i];
            if (r->step != t || r->point != i || r->value != bm_expect) {
                bench_fail(BM_NAME, "graph %s system %s iter %" PRIu64 " rep %d: buffer %d "
                           "point %d holds step %" PRId64 " point %" PRId64 " value %.17g after "
                           "the run, expected step %" PRId64 " point %d value %.17g", g, sys,
                           c->iter, rep, (int)(t % 2), i, r->step, r->point, r->value, t, i,
                           bm_expect);
                return -1;
            }
        }
    }
    return bench_failures() != before;
}

/* ---- plexus ---- */

typedef struct bm_plexus {
    px_worker *w;
    px_kernel_id k[BM_MAXDEPS + 1]; /* by number of inputs */
} bm_plexus;

/* What the orchestration of one run needs, and the time it started submitting. */
typedef struct bm_px_run {
    const bm_plexus *px;
    const bm_case *c;
    uint64_t t0;
} bm_px_run;

/* Args: INOUT out, scalars t, i, lo, iter, then IN for each input. */
static px_status bm_px_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    const bm_rec *in[BM_MAXDEPS];
    int nin = px_arg_count(a) - BM_FIXED_ARGS;

    for (int k = 0; k < nin; k++)
        in[k] = px_arg_data(a, BM_FIXED_ARGS + k);
    bm_body(px_arg_data(a, 0), in, nin, (int64_t)px_arg_u64(a, 1), (int64_t)px_arg_u64(a, 2),
            (int64_t)px_arg_u64(a, 3), px_arg_u64(a, 4));
    return PX_OK;
}

/* Registers one kernel per number of inputs, each with its exact signature. */
static px_status bm_px_register(bm_plexus *p)
{
    px_status st = PX_OK;

    for (int n = 0; n <= BM_MAXDEPS && st == PX_OK; n++) {
        px_signature sig = {.nargs = BM_FIXED_ARGS + n};
        char name[32];

        sig.params[0] = (px_param){.tag = PX_TAG_INOUT, .dtype = PX_I64};
        for (int k = 1; k < BM_FIXED_ARGS; k++)
            sig.params[k] = (px_param){.tag = PX_TAG_SCALAR, .dtype = PX_DTYPE_ANY};
        for (int k = 0; k < n; k++)
            sig.params[BM_FIXED_ARGS + k] = (px_param){.tag = PX_TAG_IN, .dtype = PX_I64};
        snprintf(name, sizeof(name), "metg_in%d", n);
        st = px_kernel_register(p->w, name, bm_px_kernel, &sig, &p->k[n]);
    }
    return st;
}

/* Creates a 2-core worker with the benchmark's kernels. Returns 0, or -1 after a failure. */
static int bm_px_open(bm_plexus *p)
{
    px_config cfg;
    px_status st;

    memset(p, 0, sizeof(*p));
    st = px_config_default(&cfg);
    if (st == PX_OK) {
        cfg.cores = BM_THREADS;
        st = px_worker_create(&cfg, &p->w);
    }
    if (st == PX_OK)
        st = bm_px_register(p);
    if (st != PX_OK) {
        bench_fail(BM_NAME, "plexus setup failed: %s: %s", px_status_name(st), px_last_error());
        px_worker_destroy(p->w);
        p->w = NULL;
        return -1;
    }
    return 0;
}

/* The orchestration of one run: slices the host block into record views, submits the graph. */
static px_status bm_px_orch(px_orch *o, const px_task_args *args, void *user)
{
    bm_px_run *r = user;
    const bm_case *c = r->c;
    const px_tensor *block = px_arg_tensor(args, 0);
    const int64_t shape[1] = {BM_REC_I64};
    px_tensor v[2][BM_WIDTH];
    px_status st = PX_OK;

    r->t0 = bench_now_ns();
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < BM_WIDTH && st == PX_OK; i++)
            st = px_tensor_view(block, 1, shape, NULL, (int64_t)(s * BM_WIDTH + i) * BM_REC_I64,
                                &v[s][i]);
    for (int t = 0; t < c->steps && st == PX_OK; t++) {
        for (int i = 0; i < BM_WIDTH && st == PX_OK; i++) {
            px_task_args a;
            int lo = 0, n = 0;

            if (t > 0)
                bm_deps(c->graph, i, &lo, &n);
            px_args_init(&a);
            px_args_inout(&a, &v[t % 2][i]);
            px_args_scalar_u64(&a, (uint64_t)t);
            px_args_scalar_u64(&a, (uint64_t)i);
            px_args_scalar_u64(&a, (uint64_t)lo);
            px_args_scalar_u64(&a, c->iter);
            for (int k = 0; k < n; k++)
                px_args_in(&a, &v[(t + 1) % 2][lo + k]);
            st = px_submit(o, r->px->k[n], &a, NULL);
        }
    }
    return st;
}

/* Checks the run's statistics against the graph. Returns 0 if they match. */
static int bm_px_check_stats(const bm_plexus *p, const bm_case *c, int rep)
{
    px_run_stats rs;
    px_status st = px_run_stats_get(p->w, &rs);

    if (st != PX_OK) {
        bench_fail(BM_NAME, "px_run_stats_get failed: %s: %s", px_status_name(st),
                   px_last_error());
        return -1;
    }
    if (rs.tasks != c->ntasks || rs.edges != c->edges) {
        bench_fail(BM_NAME, "graph %s system plexus iter %" PRIu64 " rep %d: px_run_stats has "
                   "tasks=%" PRIu64 " edges=%" PRIu64 ", the graph has tasks=%" PRIu64
                   " edges=%" PRIu64 " (the tensor map inferred the wrong dependencies)",
                   bm_graph_names[c->graph], c->iter, rep, rs.tasks, rs.edges, c->ntasks,
                   c->edges);
        return -1;
    }
    return 0;
}

/* Runs c once on plexus. Returns the wall time in ns, or -1 after a failure. */
static double bm_px_rep(const bm_plexus *p, const bm_case *c, int rep)
{
    bm_px_run r = {.px = p, .c = c};
    const int64_t shape[1] = {2 * BM_WIDTH * BM_REC_I64};
    px_tensor host;
    px_task_args args;
    px_status st;
    uint64_t t1;

    bm_reset(c);
    st = px_tensor_make(&host, bm_buf, PX_I64, 1, shape);
    if (st != PX_OK) {
        bench_fail(BM_NAME, "px_tensor_make failed: %s: %s", px_status_name(st), px_last_error());
        return -1;
    }
    px_args_init(&args);
    px_args_inout(&args, &host);
    st = px_run(p->w, bm_px_orch, &args, &r);
    t1 = bench_now_ns();
    if (st != PX_OK) {
        bench_fail(BM_NAME, "graph %s system plexus iter %" PRIu64 " rep %d: px_run failed: "
                   "%s: %s", bm_graph_names[c->graph], c->iter, rep, px_status_name(st),
                   px_last_error());
        return -1;
    }
    if (bm_verify(c, "plexus", rep) != 0 || bm_px_check_stats(p, c, rep) != 0)
        return -1;
    return (double)(t1 - r.t0);
}

/* ---- StarPU ---- */

#ifdef PX_HAVE_STARPU

/* The scalars of one StarPU task, passed by value. */
typedef struct bm_sp_arg {
    int64_t t, i, lo;
    int32_t nin;
    uint64_t iter;
} bm_sp_arg;

/* Buffers: the output (RW), then each input (R). */
static void bm_sp_kernel(void *buffers[], void *cl_arg)
{
    const bm_rec *in[BM_MAXDEPS];
    bm_sp_arg a;

    starpu_codelet_unpack_args(cl_arg, &a);
    for (int k = 0; k < a.nin; k++)
        in[k] = (const bm_rec *)STARPU_VARIABLE_GET_PTR(buffers[1 + k]);
    bm_body((bm_rec *)STARPU_VARIABLE_GET_PTR(buffers[0]), in, a.nin, a.t, a.i, a.lo, a.iter);
}

static struct starpu_codelet bm_sp_cl = {
    .cpu_funcs = {bm_sp_kernel},
    .nbuffers = STARPU_VARIABLE_NBUFFERS, /* modes come with each task */
    .name = "bm_metg",
};

/* Inserts c's graph over the handles h. Returns 0, or starpu_task_insert's error. */
static int bm_sp_insert_all(const bm_case *c, starpu_data_handle_t h[2][BM_WIDTH],
                            uint64_t *failed_task)
{
    for (int t = 0; t < c->steps; t++) {
        for (int i = 0; i < BM_WIDTH; i++) {
            struct starpu_data_descr d[1 + BM_MAXDEPS];
            bm_sp_arg a = {.t = t, .i = i, .iter = c->iter};
            int lo = 0, n = 0, ret;

            if (t > 0)
                bm_deps(c->graph, i, &lo, &n);
            a.lo = lo;
            a.nin = n;
            d[0] = (struct starpu_data_descr){.handle = h[t % 2][i], .mode = STARPU_RW};
            for (int k = 0; k < n; k++)
                d[1 + k] = (struct starpu_data_descr){.handle = h[(t + 1) % 2][lo + k],
                                                      .mode = STARPU_R};
            ret = starpu_task_insert(&bm_sp_cl, STARPU_DATA_MODE_ARRAY, d, 1 + n, STARPU_VALUE,
                                     &a, sizeof(a), 0);
            if (ret != 0) {
                *failed_task = (uint64_t)t * BM_WIDTH + (uint64_t)i;
                return ret;
            }
        }
    }
    return 0;
}

/* Runs c once in the started StarPU. Returns the wall time in ns, or -1 after a failure. */
static double bm_sp_rep(const bm_case *c, const char *sched, int rep)
{
    starpu_data_handle_t h[2][BM_WIDTH];
    uint64_t t0, t1, failed = 0;
    int ret;

    bm_reset(c); /* before registering: StarPU owns registered data */
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < BM_WIDTH; i++)
            starpu_variable_data_register(&h[s][i], STARPU_MAIN_RAM, (uintptr_t)&bm_buf[s][i],
                                          sizeof(bm_rec));
    t0 = bench_now_ns();
    ret = bm_sp_insert_all(c, h, &failed);
    starpu_task_wait_for_all();
    t1 = bench_now_ns();
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < BM_WIDTH; i++)
            starpu_data_unregister(h[s][i]);
    if (ret != 0) {
        bench_fail(BM_NAME, "graph %s system starpu sched %s iter %" PRIu64 " rep %d: "
                   "starpu_task_insert failed for task %" PRIu64 ": %s",
                   bm_graph_names[c->graph], sched, c->iter, rep, failed, strerror(-ret));
        return -1;
    }
    if (bm_verify(c, "starpu", rep) != 0)
        return -1;
    return (double)(t1 - t0);
}

/*
 * Runs one round of a sweep on StarPU with scheduler sched: each point of cases once, in the
 * order of `order`, between one starpu_init and starpu_shutdown (outside the timed regions;
 * they cost 20-45 ms, so a session per run would take most of --quick's minute). Writes each
 * run's wall time in ns, or -1, to ns[point].
 */
static void bm_sp_round(const bm_case *cases, const int *order, int n, const char *sched,
                        int rep, double *ns)
{
    int ret;

    for (int k = 0; k < n; k++)
        ns[k] = -1;
    setenv("STARPU_SCHED", sched, 1);
    ret = starpu_init(NULL);
    if (ret != 0) {
        bench_fail(BM_NAME, "starpu_init with STARPU_SCHED=%s failed: %s", sched,
                   strerror(-ret));
        return;
    }
    if (starpu_cpu_worker_get_count() != BM_THREADS)
        bench_fail(BM_NAME, "StarPU started %u CPU workers, the benchmark pins %d "
                   "(STARPU_NCPU)", starpu_cpu_worker_get_count(), BM_THREADS);
    for (int k = 0; k < n; k++)
        ns[order[k]] = bm_sp_rep(&cases[order[k]], sched, rep);
    starpu_shutdown();
}

#endif /* PX_HAVE_STARPU */

/* ---- OpenMP ---- */

#ifdef PX_HAVE_OPENMP

/* The body of an OpenMP task: the inputs come as a padded list of BM_MAXDEPS pointers. */
static void bm_omp_body(bm_rec *out, bm_rec *p0, bm_rec *p1, bm_rec *p2, bm_rec *p3,
                        bm_rec *p4, int nin, int64_t t, int64_t i, int64_t lo, uint64_t iter)
{
    const bm_rec *in[BM_MAXDEPS] = {p0, p1, p2, p3, p4};

    bm_body(out, in, nin, t, i, lo, iter);
}

/*
 * Creates task (t, i) with depend clauses: inout on its output, in on each input. A clause
 * has a fixed list, so the unused places of the list repeat the first input (the same
 * storage twice in a task's depend list is allowed and adds no dependency); radix 3 uses a
 * 3-place list, radix 5 a 5-place one.
 */
static void bm_omp_task(const bm_case *c, int t, int i)
{
    bm_rec *out = &bm_buf[t % 2][i], *p[BM_MAXDEPS];
    bm_rec *p0, *p1, *p2, *p3, *p4;
    int64_t tt = t, ii = i, lo64;
    uint64_t iter = c->iter;
    int lo = 0, n = 0;

    if (t == 0) {
#pragma omp task firstprivate(out, tt, ii, iter) depend(inout : out[0])
        bm_omp_body(out, NULL, NULL, NULL, NULL, NULL, 0, tt, ii, 0, iter);
        return;
    }
    bm_deps(c->graph, i, &lo, &n);
    for (int k = 0; k < BM_MAXDEPS; k++)
        p[k] = &bm_buf[(t + 1) % 2][lo + (k < n ? k : 0)];
    p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3], p4 = p[4];
    lo64 = lo;
    if (bm_radix[c->graph] <= 3) {
#pragma omp task firstprivate(out, p0, p1, p2, n, tt, ii, lo64, iter) \
    depend(inout : out[0]) depend(in : p0[0], p1[0], p2[0])
        bm_omp_body(out, p0, p1, p2, NULL, NULL, n, tt, ii, lo64, iter);
    } else {
#pragma omp task firstprivate(out, p0, p1, p2, p3, p4, n, tt, ii, lo64, iter) \
    depend(inout : out[0]) depend(in : p0[0], p1[0], p2[0], p3[0], p4[0])
        bm_omp_body(out, p0, p1, p2, p3, p4, n, tt, ii, lo64, iter);
    }
}

/*
 * Runs c once with OpenMP tasks: 2 threads, one of which creates every task inside
 * `single`; the time runs from the first task creation to the end of the taskwait.
 * Returns the wall time in ns, or -1.
 */
static double bm_omp_rep(const bm_case *c, int rep)
{
    uint64_t t0 = 0, t1 = 0;

    bm_reset(c);
    omp_set_num_threads(BM_THREADS);
#pragma omp parallel num_threads(BM_THREADS)
#pragma omp single
    {
        t0 = bench_now_ns();
        for (int t = 0; t < c->steps; t++)
            for (int i = 0; i < BM_WIDTH; i++)
                bm_omp_task(c, t, i);
#pragma omp taskwait
        t1 = bench_now_ns();
    }
    if (bm_verify(c, "openmp", rep) != 0)
        return -1;
    return (double)(t1 - t0);
}

#endif /* PX_HAVE_OPENMP */

/* ---- the sweep ---- */

/* One point of a sweep: per runner, the median wall time. */
typedef struct bm_point {
    uint64_t iter;
    double wall_ns[BM_RUNNERS]; /* median; < 0: a run failed */
} bm_point;

/* A sweep of one graph, and per runner what was derived from it. */
typedef struct bm_sweep {
    bm_graph graph;
    int n;
    bm_point pt[BM_MAX_POINTS];
    uint64_t ntasks;
    double flops_at[BM_MAX_POINTS]; /* per task */
    double peak[BM_RUNNERS];        /* flop/s: the best point's median rate */
    double gran_us[BM_RUNNERS][BM_MAX_POINTS];
    double eff[BM_RUNNERS][BM_MAX_POINTS];
    double metg_us[BM_RUNNERS]; /* < 0: not bracketed */
    const char *why[BM_RUNNERS];
} bm_sweep;

/* Returns 1 when runner r is compiled in (and, for plexus, its worker started). */
static int bm_runner_on(const bm_plexus *px, int r)
{
    if (r == BM_PX)
        return px->w != NULL;
    if (r == BM_OMP)
        return bench_have_openmp();
    return bench_have_starpu();
}

static const char *bm_runner_name(int r)
{
    return r == BM_PX ? "plexus" : r == BM_OMP ? "openmp" : "starpu";
}

/*
 * Measures every point of cases `reps` times, in rounds: round k runs each point once on
 * plexus, then each once on OpenMP, then each once per StarPU scheduler (one session per
 * scheduler and round), the points in falling granularity on even rounds and rising on odd
 * ones. A point's median then draws on runs spread over the whole sweep, so a machine whose
 * speed drifts over seconds (this VM's does, by up to 2x) no longer hands one point the slow
 * minute and its neighbour the fast one. The systems take turns by pass, not by run: after
 * an OpenMP run libgomp's idle thread spins for milliseconds (GOMP_SPINCOUNT) before it
 * sleeps, which took a CPU from a plexus run started right after it (a quarter of the time
 * at 7 us tasks); the anchors keep their own defaults.
 */
static void bm_measure_rounds(const bm_plexus *px, const bm_case *cases, int n, int reps,
                              bm_point *pts)
{
    static double ns[BM_MAX_POINTS][BM_RUNNERS][BM_MAX_REPS];
    int order[BM_MAX_POINTS];

    for (int p = 0; p < n; p++) {
        pts[p].iter = cases[p].iter;
        for (int r = 0; r < BM_RUNNERS; r++)
            for (int k = 0; k < reps; k++)
                ns[p][r][k] = -1;
    }
    for (int k = 0; k < reps; k++) {
        for (int q = 0; q < n; q++)
            order[q] = k % 2 == 0 ? q : n - 1 - q;
        for (int q = 0; q < n && bm_runner_on(px, BM_PX); q++)
            ns[order[q]][BM_PX][k] = bm_px_rep(px, &cases[order[q]], k);
#ifdef PX_HAVE_OPENMP
        for (int q = 0; q < n; q++)
            ns[order[q]][BM_OMP][k] = bm_omp_rep(&cases[order[q]], k);
#endif
#ifdef PX_HAVE_STARPU
        for (int sc = 0; sc < BM_NSCHED; sc++) {
            double round[BM_MAX_POINTS];

            bm_sp_round(cases, order, n, bm_sched_names[sc], k, round);
            for (int p = 0; p < n; p++)
                ns[p][BM_SP0 + sc][k] = round[p];
        }
#endif
    }
    for (int p = 0; p < n; p++)
        for (int r = 0; r < BM_RUNNERS; r++)
            pts[p].wall_ns[r] = bench_median_ok(ns[p][r], reps);
}

/* Returns the flop rate of runner r at point p (from the median), or -1. */
static double bm_rate(const bm_sweep *sw, int r, int p)
{
    double ns = sw->pt[p].wall_ns[r];

    return ns > 0 ? (double)sw->ntasks * sw->flops_at[p] * 1e9 / ns : -1;
}

/*
 * METG(50 %) of one curve, points in sweep order (iterations falling), the way Task Bench's
 * scripts pick it: of the points at or above 50 % efficiency, the one with the smallest
 * granularity; when the next point of the sweep has a smaller granularity still (it is then
 * below 50 %), the granularity at exactly 50 % is interpolated linearly between the two.
 * Load from other processes only slows runs down, so a point at or above 50 % is real, while
 * one below it may be noise: taking the smallest granularity that reached 50 %, rather than
 * the first drop, keeps a slow point early in the sweep from deciding the result. Returns the
 * METG in us, or -1 with *why set when the sweep does not bracket 50 %.
 */
static double bm_metg(const double *gran, const double *eff, int n, const char **why)
{
    int m = -1;

    for (int p = 0; p < n; p++)
        if (eff[p] >= 0.5 && (m < 0 || gran[p] < gran[m]))
            m = p;
    if (m < 0) {
        *why = "no_point_at_or_above_50pct";
        return -1;
    }
    if (m + 1 >= n) {
        *why = "no_point_after_the_last_one_above_50pct";
        return -1;
    }
    if (gran[m + 1] >= gran[m])
        return gran[m];
    return gran[m + 1] + (0.5 - eff[m + 1]) / (eff[m] - eff[m + 1]) * (gran[m] - gran[m + 1]);
}

/* Derives every runner's peak, granularity and efficiency curve and METG from the sweep. */
static void bm_analyse(bm_sweep *sw)
{
    for (int r = 0; r < BM_RUNNERS; r++) {
        int ok = 1;

        sw->peak[r] = -1;
        sw->metg_us[r] = -1;
        sw->why[r] = "failed";
        for (int p = 0; p < sw->n; p++) {
            if (bm_rate(sw, r, p) > sw->peak[r])
                sw->peak[r] = bm_rate(sw, r, p);
            if (sw->pt[p].wall_ns[r] <= 0)
                ok = 0;
        }
        if (!ok || sw->peak[r] <= 0)
            continue;
        for (int p = 0; p < sw->n; p++) {
            sw->gran_us[r][p] = sw->pt[p].wall_ns[r] / 1e3 * BM_THREADS / (double)sw->ntasks;
            sw->eff[r][p] = bm_rate(sw, r, p) / sw->peak[r];
        }
        sw->metg_us[r] = bm_metg(sw->gran_us[r], sw->eff[r], sw->n, &sw->why[r]);
    }
}

/* Runs the sweep of graph g: the points, halving iter from the start, then their rounds. */
static void bm_sweep_run(const bm_plexus *px, const bm_params *prm, bm_graph g, bm_sweep *sw)
{
    static bm_case cases[BM_MAX_POINTS];
    uint64_t iter = prm->iter_start;

    memset(sw, 0, sizeof(*sw));
    sw->graph = g;
    for (;;) {
        cases[sw->n] = bm_case_make(g, prm->steps, iter);
        sw->ntasks = cases[sw->n].ntasks;
        sw->flops_at[sw->n] = cases[sw->n].flops;
        sw->n++;
        if (iter <= 1 || sw->n >= BM_MAX_POINTS ||
            (prm->fixed_points > 0 && sw->n >= prm->fixed_points))
            break;
        iter /= 2;
    }
    bm_measure_rounds(px, cases, sw->n, prm->reps, sw->pt);
    bm_analyse(sw);
}

/* ---- output ---- */

/* The StarPU scheduler with the smallest METG (ties and unbracketed ones: the first). */
static int bm_best_sched(const bm_sweep *sw)
{
    int best = BM_SP0;

    for (int r = BM_SP0 + 1; r < BM_SP0 + BM_NSCHED; r++)
        if (sw->metg_us[r] > 0 && (sw->metg_us[best] < 0 || sw->metg_us[r] < sw->metg_us[best]))
            best = r;
    return best;
}

/* Writes "%.3f" of v, or "none" when v < 0, into buf. */
static const char *bm_fmt(char *buf, size_t n, double v)
{
    if (v < 0)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%.3f", v);
    return buf;
}

static void bm_print_points(const bm_sweep *sw, int r, const char *label)
{
    const char *g = bm_graph_names[sw->graph];

    if (sw->peak[r] <= 0)
        return;
    for (int p = 0; p < sw->n; p++)
        bench_line(BM_NAME, "graph=%s system=%s%s iter=%" PRIu64 " granularity_us=%.3f "
                   "efficiency=%.4f gflops=%.4f", g, bm_runner_name(r), label, sw->pt[p].iter,
                   sw->gran_us[r][p], sw->eff[r][p], bm_rate(sw, r, p) / 1e9);
}

static void bm_print_metg(const bm_sweep *sw, int r, const char *label, const char *tail)
{
    char m[32];

    bench_line(BM_NAME, "graph=%s system=%s%s metg_us=%s peak_gflops=%.4f points=%d%s",
               bm_graph_names[sw->graph], bm_runner_name(r), label,
               bm_fmt(m, sizeof(m), sw->metg_us[r]), sw->peak[r] / 1e9, sw->n, tail);
}

/* Writes "<key>=<ratio of METGs, other / plexus>" into buf. */
static void bm_ratio(char *buf, size_t n, const char *key, const bm_sweep *sw, int r,
                     int have)
{
    if (!have)
        snprintf(buf, n, "%s=skipped", key);
    else if (sw->metg_us[r] <= 0 || sw->metg_us[BM_PX] <= 0)
        snprintf(buf, n, "%s=none", key);
    else
        snprintf(buf, n, "%s=%.2f", key, sw->metg_us[r] / sw->metg_us[BM_PX]);
}

/* Prints one graph's lines; outside --smoke, a METG the sweep did not bracket is a failure. */
static void bm_print_sweep(const bm_sweep *sw, bench_mode mode)
{
    const char *g = bm_graph_names[sw->graph];
    int best = bm_best_sched(sw);
    char label[32], tail[48], sp[64], omp[64];

    for (int r = 0; r < BM_RUNNERS; r++) {
        snprintf(label, sizeof(label), "%s%s", r >= BM_SP0 && r < BM_OMP ? " sched=" : "",
                 r >= BM_SP0 && r < BM_OMP ? bm_sched_names[r - BM_SP0] : "");
        bm_print_points(sw, r, label);
    }
    for (int r = 0; r < BM_RUNNERS; r++) {
        int sp_r = r >= BM_SP0 && r < BM_OMP;

        if ((sp_r && !bench_have_starpu()) || (r == BM_OMP && !bench_have_openmp()))
            continue;
        snprintf(label, sizeof(label), "%s%s", sp_r ? " sched=" : "",
                 sp_r ? bm_sched_names[r - BM_SP0] : "");
        if (sp_r)
            bm_print_metg(sw, r, label, "");
        if (sw->metg_us[r] < 0 && mode != BENCH_SMOKE && (!sp_r || r == best))
            bench_fail(BM_NAME, "graph %s system %s%s: no METG: %s (sweep from iter %" PRIu64
                       " to %" PRIu64 "); the sweep must start where the system is near "
                       "100 %% and end where it is below 50 %%", g, bm_runner_name(r), label,
                       sw->why[r], sw->pt[0].iter, sw->pt[sw->n - 1].iter);
    }
    bm_print_metg(sw, BM_PX, "", "");
    if (bench_have_starpu()) {
        snprintf(tail, sizeof(tail), " best_sched=%s", bm_sched_names[best - BM_SP0]);
        bm_print_metg(sw, best, "", tail);
    }
    if (bench_have_openmp())
        bm_print_metg(sw, BM_OMP, "", "");
    bm_ratio(sp, sizeof(sp), "starpu_over_plexus", sw, best, bench_have_starpu());
    bm_ratio(omp, sizeof(omp), "openmp_over_plexus", sw, BM_OMP, bench_have_openmp());
    bench_line(BM_NAME, "graph=%s %s %s", g, sp, omp);
}

/* ---- the SVG plot ---- */

#define BM_SVG_W 440.0 /* one panel */
#define BM_SVG_H 300.0
#define BM_SVG_L 56.0  /* plot area margins */
#define BM_SVG_R 16.0
#define BM_SVG_T 30.0
#define BM_SVG_B 44.0

static const char *const bm_svg_colors[3] = {"#d62728", "#1f77b4", "#2ca02c"};

/* The x range of the plot: whole decades around every granularity of both sweeps. */
static void bm_svg_xrange(const bm_sweep *sw, int nsw, double *lo, double *hi)
{
    double mn = 1e30, mx = -1e30;

    for (int s = 0; s < nsw; s++)
        for (int r = 0; r < BM_RUNNERS; r++)
            for (int p = 0; p < sw[s].n && sw[s].peak[r] > 0; p++) {
                double l = log10(sw[s].gran_us[r][p]);
                mn = l < mn ? l : mn;
                mx = l > mx ? l : mx;
            }
    if (mn > mx)
        mn = 0, mx = 1;
    *lo = floor(mn);
    *hi = ceil(mx) > floor(mn) ? ceil(mx) : floor(mn) + 1;
}

/* Appends one curve of panel x0 as a polyline with dots. */
static void bm_svg_curve(dfxc_buf *b, const bm_sweep *sw, int r, const char *color, double x0,
                         double xlo, double xhi)
{
    double pw = BM_SVG_W - BM_SVG_L - BM_SVG_R, ph = BM_SVG_H - BM_SVG_T - BM_SVG_B;

    if (sw->peak[r] <= 0)
        return;
    dfxc_buf_printf(b, "<polyline fill='none' stroke='%s' stroke-width='1.8' points='", color);
    for (int p = 0; p < sw->n; p++) {
        double x = x0 + BM_SVG_L + (log10(sw->gran_us[r][p]) - xlo) / (xhi - xlo) * pw;
        double e = sw->eff[r][p] > 1.1 ? 1.1 : sw->eff[r][p];
        dfxc_buf_printf(b, "%.1f,%.1f ", x, BM_SVG_T + (1.1 - e) / 1.1 * ph);
    }
    dfxc_buf_puts(b, "'/>\n");
    for (int p = 0; p < sw->n; p++) {
        double x = x0 + BM_SVG_L + (log10(sw->gran_us[r][p]) - xlo) / (xhi - xlo) * pw;
        double e = sw->eff[r][p] > 1.1 ? 1.1 : sw->eff[r][p];
        dfxc_buf_printf(b, "<circle cx='%.1f' cy='%.1f' r='2.5' fill='%s'/>\n", x,
                        BM_SVG_T + (1.1 - e) / 1.1 * ph, color);
    }
}

/* Appends one panel: axes, grid, the 50 % line, three curves and the legend. */
static void bm_svg_panel(dfxc_buf *b, const bm_sweep *sw, double x0, double xlo, double xhi)
{
    double pw = BM_SVG_W - BM_SVG_L - BM_SVG_R, ph = BM_SVG_H - BM_SVG_T - BM_SVG_B;
    double left = x0 + BM_SVG_L, bottom = BM_SVG_T + ph;
    int curves[3] = {BM_PX, bm_best_sched(sw), BM_OMP};
    char m[32];

    dfxc_buf_printf(b, "<text x='%.1f' y='18' font-size='13' text-anchor='middle'>%s "
                    "(width %d, %" PRIu64 " tasks)</text>\n", left + pw / 2,
                    bm_graph_names[sw->graph], BM_WIDTH, sw->ntasks);
    for (int d = (int)xlo; d <= (int)xhi; d++) {
        double x = left + (d - xlo) / (xhi - xlo) * pw;
        dfxc_buf_printf(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n"
                        "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%g</text>\n",
                        x, BM_SVG_T, x, bottom, x, bottom + 14, pow(10.0, d));
    }
    for (int k = 0; k <= 5; k++) {
        double e = k * 0.2, y = BM_SVG_T + (1.1 - e) / 1.1 * ph;
        dfxc_buf_printf(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s'%s/>\n"
                        "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%.0f%%</text>\n",
                        left, y, left + pw, y, "#ddd", "", left - 4, y + 4, e * 100);
    }
    dfxc_buf_printf(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#555' "
                    "stroke-dasharray='4 3'/>\n", left, BM_SVG_T + 0.6 / 1.1 * ph, left + pw,
                    BM_SVG_T + 0.6 / 1.1 * ph);
    dfxc_buf_printf(b, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' "
                    "stroke='#333'/>\n", left, BM_SVG_T, pw, ph);
    dfxc_buf_printf(b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>task "
                    "granularity (us, wall x cores / tasks)</text>\n", left + pw / 2,
                    bottom + 30);
    dfxc_buf_printf(b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle' "
                    "transform='rotate(-90 %.1f %.1f)'>efficiency</text>\n", x0 + 14,
                    BM_SVG_T + ph / 2, x0 + 14, BM_SVG_T + ph / 2);
    for (int k = 0; k < 3; k++) {
        int r = curves[k];
        if ((r == BM_OMP && !bench_have_openmp()) || (r != BM_PX && r != BM_OMP &&
                                                      !bench_have_starpu()))
            continue;
        bm_svg_curve(b, sw, r, bm_svg_colors[k], x0, xlo, xhi);
        dfxc_buf_printf(b, "<text x='%.1f' y='%.1f' font-size='11' fill='%s'>%s%s%s%s METG "
                        "%s us</text>\n", left + 8, BM_SVG_T + 14 + 14 * k, bm_svg_colors[k],
                        bm_runner_name(r), r == BM_PX || r == BM_OMP ? "" : " (",
                        r == BM_PX || r == BM_OMP ? "" : bm_sched_names[r - BM_SP0],
                        r == BM_PX || r == BM_OMP ? "" : ")",
                        bm_fmt(m, sizeof(m), sw->metg_us[r]));
    }
}

/*
 * Returns the directory above the one holding this program (the build directory for
 * build/bin/bench_metg) in out, or -1 after a failure.
 */
static int bm_build_dir(char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (len <= 0) {
        bench_fail(BM_NAME, "cannot find this program's path (readlink /proc/self/exe: %s), "
                   "so cannot place the SVG plot", strerror(errno));
        return -1;
    }
    exe[len] = '\0';
    for (int k = 0; k < 2; k++) {
        slash = strrchr(exe, '/');
        if (slash == NULL || slash == exe) {
            bench_fail(BM_NAME, "this program's path %s has no parent directory for the SVG "
                       "plot", exe);
            return -1;
        }
        *slash = '\0';
    }
    snprintf(out, n, "%s", exe);
    return 0;
}

/* Writes the efficiency curves of both graphs as one SVG into the build directory. */
static void bm_write_svg(const bm_sweep *sw, int nsw, bench_mode mode)
{
    char dir[PATH_MAX], name[64];
    double xlo, xhi;
    dfxc_buf b;
    px_status st;

    if (bm_build_dir(dir, sizeof(dir)) != 0)
        return;
    snprintf(name, sizeof(name), "bench_metg%s%s.svg", mode == BENCH_FULL ? "" : "-",
             mode == BENCH_FULL ? "" : bench_mode_name(mode));
    bm_svg_xrange(sw, nsw, &xlo, &xhi);
    dfxc_buf_init(&b);
    dfxc_buf_printf(&b, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
                    "font-family='sans-serif'>\n<rect width='100%%' height='100%%' "
                    "fill='white'/>\n", BM_SVG_W * nsw, BM_SVG_H);
    for (int s = 0; s < nsw; s++)
        bm_svg_panel(&b, &sw[s], BM_SVG_W * s, xlo, xhi);
    dfxc_buf_puts(&b, "</svg>\n");
    st = dfxc_buf_write_file(&b, dir, name, "bench_metg");
    if (st != PX_OK)
        bench_fail(BM_NAME, "cannot write the plot: %s: %s", px_status_name(st),
                   px_last_error());
    else
        bench_line(BM_NAME, "plot=%s/%s", dir, name);
    dfxc_buf_free(&b);
}

/* ---- the driver ---- */

static bm_params bm_params_for(bench_mode mode)
{
    switch (mode) {
    case BENCH_QUICK:
        return (bm_params){.mode = mode, .steps = 100, .reps = 5, .iter_start = 1u << 14};
    case BENCH_SMOKE:
        return (bm_params){.mode = mode, .steps = 6, .reps = 1, .iter_start = 64,
                           .fixed_points = 3};
    case BENCH_FULL:
        break;
    }
    return (bm_params){.mode = BENCH_FULL, .steps = 1000, .reps = 7, .iter_start = 1u << 14};
}

/* Prints the pinned configuration; in smoke mode also a line per anchor not compiled in. */
static void bm_print_config(const bm_params *p)
{
    char sp[32], omp[48];

    bench_anchor_versions(sp, sizeof(sp), omp, sizeof(omp));
    bench_line(BM_NAME, "config graphs=stencil_1d,nearest radix=3,5 width=%d steps=%d "
               "threads=%d reps=%d iter_start=%" PRIu64 " flops_per_task=2*%d*iter+%d "
               "starpu=%s schedulers=lws,eager,ws omp=%s plexus=%s mode=%s", BM_WIDTH,
               p->steps, BM_THREADS, p->reps, p->iter_start, BM_LANES, BM_LANES, sp, omp,
               PX_VERSION_STRING, bench_mode_name(p->mode));
    bench_print_skipped(BM_NAME, p->mode);
}

int main(int argc, char **argv)
{
    static bm_sweep sw[BM_GRAPHS];
    bm_params p;
    bm_plexus px;
    bench_mode mode = BENCH_FULL;
    int rc;

    if ((rc = bench_start(argc, argv, "bench_metg",
                          "METG(50%) of plexus, StarPU and OpenMP on stencil_1d and nearest",
                          &mode)) >= 0)
        return rc;
    p = bm_params_for(mode);
    bm_print_config(&p);
    if (bench_check_anchors("bench_metg", mode) != 0)
        return 1;
    bm_ran = calloc((size_t)p.steps * BM_WIDTH, sizeof(bm_ran[0]));
    if (bm_ran == NULL) {
        fprintf(stderr, "bench_metg: out of memory for %d x %d task counters\n", p.steps,
                BM_WIDTH);
        return 1;
    }
    bench_starpu_pin_env(BM_THREADS);
    bm_px_open(&px);
    for (int g = 0; g < BM_GRAPHS; g++) {
        bm_sweep_run(&px, &p, (bm_graph)g, &sw[g]);
        bm_print_sweep(&sw[g], mode);
    }
    bm_write_svg(sw, BM_GRAPHS, mode);
    px_worker_destroy(px.w);
    free(bm_ran);
    return bench_finish();
}
