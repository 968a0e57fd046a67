/*
 * bench_tasks.c - task throughput: how many microseconds one empty task costs, from the start
 * of submission to the end of the drain, in plexus and in two anchors (StarPU 1.3 and OpenMP
 * tasks with depend clauses), each with 2 threads running tasks.
 *
 * Three graphs, with the same accesses (and so the same edges) in every system:
 *   independent  every task reads one shared tensor (IN): 0 edges
 *   chain        task i reads and writes T[i mod 8] (INOUT): 8 chains
 *   stencil      in-place sweeps over 64 tensors: task (sweep s, j) is INOUT T[j] and IN
 *                T[j-1], T[j+1] where they exist
 * Kernels are empty apart from their checks: each tensor holds a sequence number that the
 * kernel compares with the value its position in the graph implies, so a missing edge shows
 * up as a counted violation; every task also counts its executions, and after each run every
 * task must have run exactly once. Repetitions are interleaved (rep r runs plexus, StarPU,
 * OpenMP in turn) and medians are printed as BENCH lines; docs/benchmarks.md describes them.
 * Tensors are int64 counters one cache line apart, so no two share a line in any system.
 *
 * A fourth graph, plexus only, checks that a task's cost does not grow with the length of a
 * run (examples/vector's shape, issue: runs of 1M iterations slowed down superlinearly):
 *   scoped       iteration i opens a scope, allocates a temporary with px_tensor_alloc, task
 *                A writes i into it (OUT), task B reads it (IN) and writes 3i+1 into row i of
 *                an output block (OUT): 2 tasks and 1 edge per iteration, one new output view
 *                per iteration, heap memory reused all the time
 * It runs once with the short task count and once with a long one (20x, 2M tasks in full
 * mode) and prints long_over_short, the ratio of their microseconds per task.
 */
#include "benchutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plexus/plexus.h>

#ifdef PX_HAVE_STARPU
#include <starpu.h>
#endif
#ifdef PX_HAVE_OPENMP
#include <omp.h>
#endif

#define BT_NAME "tasks"
#define BT_THREADS 2       /* threads running tasks, in every system */
#define BT_TENSORS_MAX 64  /* the stencil's width */
#define BT_CHAINS 8        /* the chain graph's chains */
#define BT_PAD 8           /* int64 slots per tensor: one cache line each */
#define BT_MAX_REPS 16
#define BT_MAGIC INT64_C(0x5eed5eed5eed) /* the independent graph's shared value */

typedef enum bt_graph { BT_INDEPENDENT = 0, BT_CHAIN, BT_STENCIL, BT_GRAPHS } bt_graph;
typedef enum bt_system { BT_PLEXUS = 0, BT_STARPU, BT_OPENMP, BT_SYSTEMS } bt_system;

static const char *const bt_graph_names[BT_GRAPHS] = {"independent", "chain", "stencil"};
static const char *const bt_system_names[BT_SYSTEMS] = {"plexus", "starpu", "openmp"};

#define BT_NSCHED 3
static const char *const bt_sched_names[BT_NSCHED] = {"lws", "eager", "ws"};

/* One graph at one size. */
typedef struct bt_case {
    bt_graph graph;
    int tensors;     /* tensors the graph touches */
    uint64_t ntasks; /* tasks in the graph */
    uint64_t edges;  /* hand-computed, see bt_expected_edges() */
} bt_case;

/* Sizes of one mode. */
typedef struct bt_params {
    bench_mode mode;
    uint64_t ntasks;
    int reps;
    uint64_t long_ntasks; /* the scoped graph's long run */
    int long_reps;
} bt_params;

/* The tensors (host memory; plexus copies them to device memory for a run). */
static int64_t bt_tensors[BT_TENSORS_MAX * BT_PAD] __attribute__((aligned(64)));

/* Verification state written by the kernels of every system. */
static uint32_t *bt_ran;        /* executions per task */
static uint64_t bt_violations;  /* sequence checks that failed (atomic) */

/* ---- the graphs ---- */

/*
 * Returns the number of edges of c's graph: distinct (producer, consumer) pairs under
 * sequential consistency (IN: RAW to the last writer; INOUT: RAW/WAW to the last writer and
 * WAR from every reader since that write), counted per consumer.
 *   independent: nobody writes the shared tensor: 0.
 *   chain: task i >= 8 has one edge, to task i-8 (its chain's last writer): N - 8.
 *   stencil: task t is (s, j) = (t / 64, t % 64). Before it, in program order:
 *     T[j-1] was last written by (s, j-1), and nobody has read it since;
 *     T[j] was last written by (s-1, j) and read since by (s-1, j+1) and (s, j-1);
 *     T[j+1] was last written by (s-1, j+1), and read since by (s-1, j+2).
 *   So (s, j) has the producers (s, j-1) if j > 0 (RAW on T[j-1], WAR on T[j]), (s-1, j) if
 *   s > 0 (WAW), and (s-1, j+1) if s > 0 and j < 63 (WAR on T[j], RAW on T[j+1]).
 *   A sweep with n tasks (j = 0 .. n-1) has n-1 edges if it is sweep 0, else
 *   (n-1) + n + min(n, 63); a full sweep s > 0 has 63 + 64 + 63 = 190.
 *   With N = 64 F + R (F >= 1 full sweeps, 0 <= R < 64 tasks left):
 *     63 + 190 (F - 1) + (R > 0 ? 3R - 1 : 0); with N < 64: N - 1.
 *   100000 tasks: 63 + 190 * 1561 + 95 = 296748; 200 tasks: 63 + 380 + 23 = 466.
 */
static uint64_t bt_expected_edges(bt_graph g, uint64_t n)
{
    uint64_t w = BT_TENSORS_MAX, full = n / w, rest = n % w;

    switch (g) {
    case BT_INDEPENDENT:
        return 0;
    case BT_CHAIN:
        return n > BT_CHAINS ? n - BT_CHAINS : 0;
    case BT_STENCIL:
        if (full == 0)
            return n > 0 ? n - 1 : 0;
        return (w - 1) + (3 * w - 2) * (full - 1) + (rest > 0 ? 3 * rest - 1 : 0);
    case BT_GRAPHS:
        break;
    }
    return 0;
}

static bt_case bt_case_make(bt_graph g, uint64_t ntasks)
{
    static const int tensors[BT_GRAPHS] = {1, BT_CHAINS, BT_TENSORS_MAX};
    bt_case c = {.graph = g, .tensors = tensors[g], .ntasks = ntasks};

    c.edges = bt_expected_edges(g, ntasks);
    return c;
}

/* Address of tensor k's counter in a block laid out like bt_tensors. */
static inline int64_t *bt_slot(int64_t *base, int k)
{
    return base + (size_t)k * BT_PAD;
}

/* Puts the tensors and counts back to their state before a run. */
static void bt_reset(const bt_case *c)
{
    memset(bt_tensors, 0, sizeof(bt_tensors));
    if (c->graph == BT_INDEPENDENT)
        *bt_slot(bt_tensors, 0) = BT_MAGIC;
    memset(bt_ran, 0, c->ntasks * sizeof(bt_ran[0]));
    __atomic_store_n(&bt_violations, 0, __ATOMIC_RELAXED);
}

/* ---- kernel bodies, shared by every system ---- */

static inline void bt_count_run(uint64_t t)
{
    __atomic_fetch_add(&bt_ran[t], 1, __ATOMIC_RELAXED);
}

static inline void bt_violation(void)
{
    __atomic_fetch_add(&bt_violations, 1, __ATOMIC_RELAXED);
}

static inline void bt_body_independent(const int64_t *shared, uint64_t t)
{
    if (*shared != BT_MAGIC)
        bt_violation();
    bt_count_run(t);
}

/* Task t of a chain is the expect-th writer of its tensor. */
static inline void bt_body_chain(int64_t *x, uint64_t t, uint64_t expect)
{
    if (*x != (int64_t)expect)
        bt_violation();
    *x = (int64_t)expect + 1;
    bt_count_run(t);
}

/* Task (s, j): T[j-1] already written in sweep s, T[j] and T[j+1] not yet. */
static inline void bt_body_stencil(int64_t *x, const int64_t *left, const int64_t *right,
                                   uint64_t t, uint64_t s)
{
    if (left && *left != (int64_t)s + 1)
        bt_violation();
    if (*x != (int64_t)s)
        bt_violation();
    if (right && *right != (int64_t)s)
        bt_violation();
    *x = (int64_t)s + 1;
    bt_count_run(t);
}

/* ---- verification after each run ---- */

/* Returns what tensor k must hold after a correct run of c. */
static int64_t bt_expected_value(const bt_case *c, int k)
{
    uint64_t n = c->ntasks, w = BT_TENSORS_MAX;

    switch (c->graph) {
    case BT_INDEPENDENT:
        return BT_MAGIC;
    case BT_CHAIN:
        return (int64_t)((n + BT_CHAINS - 1 - (uint64_t)k) / BT_CHAINS);
    case BT_STENCIL:
        return (int64_t)(n / w + ((uint64_t)k < n % w ? 1 : 0));
    case BT_GRAPHS:
        break;
    }
    return 0;
}

/* Checks one run of c by sys; records a failure for each thing wrong. Returns 0 if clean. */
static int bt_verify(const bt_case *c, const char *sys, int rep)
{
    const char *g = bt_graph_names[c->graph];
    uint64_t viol = __atomic_load_n(&bt_violations, __ATOMIC_RELAXED);
    int before = bench_failures();

    if (viol != 0)
        bench_fail(BT_NAME, "graph %s system %s rep %d: %" PRIu64 " sequence checks failed "
                   "(a task ran before a task it depends on)", g, sys, rep, viol);
    for (uint64_t t = 0; t < c->ntasks; t++) {
        if (bt_ran[t] != 1) {
            bench_fail(BT_NAME, "graph %s system %s rep %d: task %" PRIu64 " ran %u times, "
                       "expected exactly once", g, sys, rep, t, bt_ran[t]);
            break;
        }
    }
    for (int k = 0; k < c->tensors; k++) {
        int64_t have = *bt_slot(bt_tensors, k), want = bt_expected_value(c, k);
        if (have != want) {
            bench_fail(BT_NAME, "graph %s system %s rep %d: tensor %d holds %" PRId64
                       " after the run, expected %" PRId64, g, sys, rep, k, have, want);
            break;
        }
    }
    return bench_failures() != before;
}

/* ---- plexus ---- */

typedef struct bt_plexus {
    px_worker *w;
    px_kernel_id k_independent, k_chain, k_stencil_first, k_stencil_mid, k_stencil_last;
    px_kernel_id k_scoped_make, k_scoped_use;
} bt_plexus;

/* What the orchestration of one run needs, and the time it started submitting. */
typedef struct bt_px_run {
    const bt_plexus *px;
    const bt_case *c;
    uint64_t t0;
} bt_px_run;

static px_status bt_px_independent(px_core_ctx *ctx, const px_task_args *a)
{
    bt_body_independent(px_arg_data(a, 0), px_arg_u64(a, 1));
    return PX_OK;
}

static px_status bt_px_chain(px_core_ctx *ctx, const px_task_args *a)
{
    bt_body_chain(px_arg_data(a, 0), px_arg_u64(a, 1), px_arg_u64(a, 2));
    return PX_OK;
}

/* Args: INOUT T[j], t, s, j, then IN T[j-1] if j > 0, then IN T[j+1] if j < 63. */
static px_status bt_px_stencil(px_core_ctx *ctx, const px_task_args *a)
{
    uint64_t j = px_arg_u64(a, 3);
    int next = 4;
    const int64_t *left = j > 0 ? px_arg_data(a, next++) : NULL;
    const int64_t *right = j < BT_TENSORS_MAX - 1 ? px_arg_data(a, next) : NULL;

    bt_body_stencil(px_arg_data(a, 0), left, right, px_arg_u64(a, 1), px_arg_u64(a, 2));
    return PX_OK;
}

/* Scoped graph, task A of iteration i: OUT tmp = i; args tmp, i, t. */
static px_status bt_px_scoped_make(px_core_ctx *ctx, const px_task_args *a)
{
    *(int64_t *)px_arg_data(a, 0) = (int64_t)px_arg_u64(a, 1);
    bt_count_run(px_arg_u64(a, 2));
    return PX_OK;
}

/* Task B: IN tmp (must hold i), OUT row = 3 tmp + 1; args tmp, row, i, t. */
static px_status bt_px_scoped_use(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t v = *(const int64_t *)px_arg_data(a, 0);

    if (v != (int64_t)px_arg_u64(a, 2))
        bt_violation();
    *(int64_t *)px_arg_data(a, 1) = 3 * v + 1;
    bt_count_run(px_arg_u64(a, 3));
    return PX_OK;
}

/* Builds a signature from tags: 'i' IN i64, 'x' INOUT i64, 'o' OUT i64, 's' scalar. */
static px_signature bt_px_sig(const char *tags)
{
    px_signature sig = {.nargs = (int32_t)strlen(tags)};

    for (int i = 0; i < sig.nargs; i++) {
        sig.params[i].dtype = tags[i] == 's' ? PX_DTYPE_ANY : PX_I64;
        sig.params[i].tag = tags[i] == 'i'   ? PX_TAG_IN
                            : tags[i] == 'x' ? PX_TAG_INOUT
                            : tags[i] == 'o' ? PX_TAG_OUT
                                             : PX_TAG_SCALAR;
    }
    return sig;
}

static px_status bt_px_register(bt_plexus *p)
{
    px_signature s_ind = bt_px_sig("is"), s_chain = bt_px_sig("xss");
    px_signature s_first = bt_px_sig("xsssi"), s_mid = bt_px_sig("xsssii");
    px_signature s_make = bt_px_sig("oss"), s_use = bt_px_sig("ioss");
    px_status st;

    st = px_kernel_register(p->w, "bt_independent", bt_px_independent, &s_ind,
                            &p->k_independent);
    if (st == PX_OK)
        st = px_kernel_register(p->w, "bt_chain", bt_px_chain, &s_chain, &p->k_chain);
    if (st == PX_OK)
        st = px_kernel_register(p->w, "bt_stencil_first", bt_px_stencil, &s_first,
                                &p->k_stencil_first);
    if (st == PX_OK)
        st = px_kernel_register(p->w, "bt_stencil_mid", bt_px_stencil, &s_mid,
                                &p->k_stencil_mid);
    if (st == PX_OK)
        st = px_kernel_register(p->w, "bt_stencil_last", bt_px_stencil, &s_first,
                                &p->k_stencil_last);
    if (st == PX_OK)
        st = px_kernel_register(p->w, "bt_scoped_make", bt_px_scoped_make, &s_make,
                                &p->k_scoped_make);
    if (st == PX_OK)
        st = px_kernel_register(p->w, "bt_scoped_use", bt_px_scoped_use, &s_use,
                                &p->k_scoped_use);
    return st;
}

/* Creates a 2-core worker with the benchmark's kernels. Returns 0, or -1 after a failure. */
static int bt_px_open(bt_plexus *p)
{
    px_config cfg;
    px_status st;

    memset(p, 0, sizeof(*p));
    st = px_config_default(&cfg);
    if (st == PX_OK) {
        cfg.cores = BT_THREADS;
        st = px_worker_create(&cfg, &p->w);
    }
    if (st == PX_OK)
        st = bt_px_register(p);
    if (st != PX_OK) {
        bench_fail(BT_NAME, "plexus setup failed: %s: %s", px_status_name(st), px_last_error());
        px_worker_destroy(p->w);
        p->w = NULL;
        return -1;
    }
    return 0;
}

/* Submits task t of c's graph over the device views v. Returns px_submit's status. */
static px_status bt_px_submit_one(px_orch *o, const bt_px_run *r, const px_tensor *v,
                                  uint64_t t)
{
    const bt_plexus *p = r->px;
    px_task_args a;
    uint64_t s = t / BT_TENSORS_MAX, j = t % BT_TENSORS_MAX;
    px_kernel_id k;

    px_args_init(&a);
    switch (r->c->graph) {
    case BT_INDEPENDENT:
        px_args_in(&a, &v[0]);
        px_args_scalar_u64(&a, t);
        return px_submit(o, p->k_independent, &a, NULL);
    case BT_CHAIN:
        px_args_inout(&a, &v[t % BT_CHAINS]);
        px_args_scalar_u64(&a, t);
        px_args_scalar_u64(&a, t / BT_CHAINS);
        return px_submit(o, p->k_chain, &a, NULL);
    default:
        break;
    }
    px_args_inout(&a, &v[j]);
    px_args_scalar_u64(&a, t);
    px_args_scalar_u64(&a, s);
    px_args_scalar_u64(&a, j);
    if (j > 0)
        px_args_in(&a, &v[j - 1]);
    if (j < BT_TENSORS_MAX - 1)
        px_args_in(&a, &v[j + 1]);
    k = j == 0 ? p->k_stencil_first
               : j == BT_TENSORS_MAX - 1 ? p->k_stencil_last : p->k_stencil_mid;
    return px_submit(o, k, &a, NULL);
}

/* The orchestration of one run: slices the device block into views, submits every task. */
static px_status bt_px_orch(px_orch *o, const px_task_args *args, void *user)
{
    bt_px_run *r = user;
    const px_tensor *block = px_arg_tensor(args, 0);
    px_tensor v[BT_TENSORS_MAX];
    const int64_t one[1] = {1};
    px_status st = PX_OK;

    r->t0 = bench_now_ns();
    for (int k = 0; k < r->c->tensors && st == PX_OK; k++)
        st = px_tensor_view(block, 1, one, NULL, (int64_t)k * BT_PAD, &v[k]);
    for (uint64_t t = 0; t < r->c->ntasks && st == PX_OK; t++)
        st = bt_px_submit_one(o, r, v, t);
    return st;
}

/* Checks the run's statistics against the graph. Returns 0 if they match. */
static int bt_px_check_stats(const bt_plexus *p, const bt_case *c, int rep)
{
    px_run_stats rs;
    px_status st = px_run_stats_get(p->w, &rs);

    if (st != PX_OK) {
        bench_fail(BT_NAME, "px_run_stats_get failed: %s: %s", px_status_name(st),
                   px_last_error());
        return -1;
    }
    if (rs.tasks != c->ntasks || rs.edges != c->edges) {
        bench_fail(BT_NAME, "graph %s system plexus rep %d: px_run_stats has tasks=%" PRIu64
                   " edges=%" PRIu64 ", the graph has tasks=%" PRIu64 " edges=%" PRIu64
                   " (the tensor map inferred the wrong dependencies)",
                   bt_graph_names[c->graph], rep, rs.tasks, rs.edges, c->ntasks, c->edges);
        return -1;
    }
    return 0;
}

/* Runs c once on plexus. Returns microseconds per task, or -1 after a failure. */
static double bt_px_rep(const bt_plexus *p, const bt_case *c, int rep)
{
    bt_px_run r = {.px = p, .c = c};
    const int64_t shape[1] = {BT_TENSORS_MAX * BT_PAD};
    px_tensor host;
    px_task_args args;
    px_status st;
    uint64_t t1;

    bt_reset(c);
    st = px_tensor_make(&host, bt_tensors, PX_I64, 1, shape);
    if (st != PX_OK) {
        bench_fail(BT_NAME, "px_tensor_make failed: %s: %s", px_status_name(st), px_last_error());
        return -1;
    }
    px_args_init(&args);
    if (c->graph == BT_INDEPENDENT)
        px_args_in(&args, &host);
    else
        px_args_inout(&args, &host);
    st = px_run(p->w, bt_px_orch, &args, &r);
    t1 = bench_now_ns();
    if (st != PX_OK) {
        bench_fail(BT_NAME, "graph %s system plexus rep %d: px_run failed: %s: %s",
                   bt_graph_names[c->graph], rep, px_status_name(st), px_last_error());
        return -1;
    }
    if (bt_verify(c, "plexus", rep) != 0 || bt_px_check_stats(p, c, rep) != 0)
        return -1;
    return (double)(t1 - r.t0) / 1e3 / (double)c->ntasks;
}

/* ---- the scoped graph (plexus only): cost per task over a long run ---- */

/* One scoped run: n tasks over an output block of n / 2 rows. */
typedef struct bt_scoped_run {
    const bt_plexus *px;
    uint64_t ntasks;
    uint64_t t0;
} bt_scoped_run;

/* Iteration i: a scope with one temporary, task A writes it, task B reads it into row i. */
static px_status bt_scoped_iteration(px_orch *o, const bt_scoped_run *r, const px_tensor *out,
                                     uint64_t i)
{
    const int64_t one[1] = {1};
    px_tensor tmp, row;
    px_task_args a;
    px_status st = px_scope_begin(o), st_end;

    if (st != PX_OK)
        return st;
    st = px_tensor_alloc(o, PX_I64, 1, one, &tmp);
    if (st == PX_OK)
        st = px_tensor_view(out, 1, one, NULL, (int64_t)i, &row);
    if (st == PX_OK) {
        px_args_init(&a);
        px_args_out(&a, &tmp);
        px_args_scalar_u64(&a, i);
        px_args_scalar_u64(&a, 2 * i);
        st = px_submit(o, r->px->k_scoped_make, &a, NULL);
    }
    if (st == PX_OK) {
        px_args_init(&a);
        px_args_in(&a, &tmp);
        px_args_out(&a, &row);
        px_args_scalar_u64(&a, i);
        px_args_scalar_u64(&a, 2 * i + 1);
        st = px_submit(o, r->px->k_scoped_use, &a, NULL);
    }
    st_end = px_scope_end(o);
    return st != PX_OK ? st : st_end;
}

static px_status bt_scoped_orch(px_orch *o, const px_task_args *args, void *user)
{
    bt_scoped_run *r = user;
    const px_tensor *out = px_arg_tensor(args, 0);
    px_status st = PX_OK;

    r->t0 = bench_now_ns();
    for (uint64_t i = 0; i < r->ntasks / 2 && st == PX_OK; i++)
        st = bt_scoped_iteration(o, r, out, i);
    return st;
}

/* Checks a scoped run: every task once, no violation, every row, the run's statistics. */
static int bt_scoped_verify(const bt_plexus *p, const int64_t *out, uint64_t n, int rep)
{
    uint64_t viol = __atomic_load_n(&bt_violations, __ATOMIC_RELAXED);
    px_run_stats rs;
    px_status st;

    if (viol != 0)
        bench_fail(BT_NAME, "graph scoped tasks %" PRIu64 " rep %d: %" PRIu64 " tasks read a "
                   "temporary before its producer wrote it", n, rep, viol);
    for (uint64_t t = 0; t < n && viol == 0; t++) {
        if (bt_ran[t] != 1) {
            bench_fail(BT_NAME, "graph scoped tasks %" PRIu64 " rep %d: task %" PRIu64
                       " ran %u times, expected exactly once", n, rep, t, bt_ran[t]);
            return -1;
        }
    }
    for (uint64_t i = 0; i < n / 2; i++) {
        if (out[i] != 3 * (int64_t)i + 1) {
            bench_fail(BT_NAME, "graph scoped tasks %" PRIu64 " rep %d: row %" PRIu64
                       " holds %" PRId64 ", expected %" PRId64, n, rep, i, out[i],
                       3 * (int64_t)i + 1);
            return -1;
        }
    }
    st = px_run_stats_get(p->w, &rs);
    if (st != PX_OK || rs.tasks != n || rs.edges != n / 2) {
        bench_fail(BT_NAME, "graph scoped tasks %" PRIu64 " rep %d: px_run_stats has tasks=%"
                   PRIu64 " edges=%" PRIu64 ", the graph has tasks=%" PRIu64 " edges=%" PRIu64
                   " (%s)", n, rep, rs.tasks, rs.edges, n, n / 2,
                   st == PX_OK ? "wrong dependencies" : px_last_error());
        return -1;
    }
    return viol != 0 ? -1 : 0;
}

/* Runs the scoped graph once with n tasks (even). Returns us per task, or -1 on failure. */
static double bt_scoped_rep(const bt_plexus *p, int64_t *out, uint64_t n, int rep)
{
    bt_scoped_run r = {.px = p, .ntasks = n};
    const int64_t shape[1] = {(int64_t)(n / 2)};
    px_tensor host;
    px_task_args args;
    px_status st;
    uint64_t t1;

    memset(out, 0xff, n / 2 * sizeof(*out));
    memset(bt_ran, 0, n * sizeof(bt_ran[0]));
    __atomic_store_n(&bt_violations, 0, __ATOMIC_RELAXED);
    st = px_tensor_make(&host, out, PX_I64, 1, shape);
    if (st == PX_OK) {
        px_args_init(&args);
        px_args_out(&args, &host);
        st = px_run(p->w, bt_scoped_orch, &args, &r);
    }
    t1 = bench_now_ns();
    if (st != PX_OK) {
        bench_fail(BT_NAME, "graph scoped tasks %" PRIu64 " rep %d: px_run failed: %s: %s", n,
                   rep, px_status_name(st), px_last_error());
        return -1;
    }
    if (bt_scoped_verify(p, out, n, rep) != 0)
        return -1;
    return (double)(t1 - r.t0) / 1e3 / (double)n;
}

/* Median us per task of reps scoped runs with n tasks, or -1 after a failure. */
static double bt_scoped_measure(const bt_plexus *p, int64_t *out, uint64_t n, int reps)
{
    double us[BT_MAX_REPS];

    for (int r = 0; r < reps; r++)
        if ((us[r] = bt_scoped_rep(p, out, n, r)) < 0)
            return -1;
    return bench_median(us, reps);
}

/* The scoped graph at the short and the long task count, and their ratio. */
static void bt_scoped(const bt_plexus *p, const bt_params *prm)
{
    int64_t *out = malloc(prm->long_ntasks / 2 * sizeof(*out));
    double s, l;

    if (out == NULL || p->w == NULL) {
        bench_fail(BT_NAME, "graph scoped: %s", p->w ? "out of memory for the output rows"
                                                     : "no plexus worker");
        free(out);
        return;
    }
    s = bt_scoped_measure(p, out, prm->ntasks, prm->reps);
    l = s < 0 ? -1 : bt_scoped_measure(p, out, prm->long_ntasks, prm->long_reps);
    free(out);
    if (l < 0)
        return;
    bench_line(BT_NAME, "graph=scoped system=plexus tasks=%" PRIu64 " us_per_task=%.3f edges=%"
               PRIu64, prm->ntasks, s, prm->ntasks / 2);
    bench_line(BT_NAME, "graph=scoped system=plexus tasks=%" PRIu64 " us_per_task=%.3f edges=%"
               PRIu64, prm->long_ntasks, l, prm->long_ntasks / 2);
    bench_line(BT_NAME, "graph=scoped long_over_short=%.2f", l / s);
}

/* ---- StarPU ---- */

#ifdef PX_HAVE_STARPU

static void bt_sp_independent(void *buffers[], void *cl_arg)
{
    uint64_t t;

    starpu_codelet_unpack_args(cl_arg, &t);
    bt_body_independent((const int64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]), t);
}

static void bt_sp_chain(void *buffers[], void *cl_arg)
{
    uint64_t t, expect;

    starpu_codelet_unpack_args(cl_arg, &t, &expect);
    bt_body_chain((int64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]), t, expect);
}

/* Buffers: T[j] (RW), then T[j-1] (R) if j > 0, then T[j+1] (R) if j < 63. */
static void bt_sp_stencil(void *buffers[], void *cl_arg)
{
    uint64_t t, s, j;
    int next = 1;
    const int64_t *left = NULL, *right = NULL;

    starpu_codelet_unpack_args(cl_arg, &t, &s, &j);
    if (j > 0)
        left = (const int64_t *)STARPU_VARIABLE_GET_PTR(buffers[next++]);
    if (j < BT_TENSORS_MAX - 1)
        right = (const int64_t *)STARPU_VARIABLE_GET_PTR(buffers[next]);
    bt_body_stencil((int64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]), left, right, t, s);
}

static struct starpu_codelet bt_sp_cl_independent = {
    .cpu_funcs = {bt_sp_independent},
    .nbuffers = 1,
    .modes = {STARPU_R},
    .name = "bt_independent",
};
static struct starpu_codelet bt_sp_cl_chain = {
    .cpu_funcs = {bt_sp_chain},
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .name = "bt_chain",
};
static struct starpu_codelet bt_sp_cl_stencil = {
    .cpu_funcs = {bt_sp_stencil},
    .nbuffers = STARPU_VARIABLE_NBUFFERS, /* modes come with each task */
    .name = "bt_stencil",
};

/* Inserts task t of c's graph. Returns starpu_task_insert's result (0 on success). */
static int bt_sp_insert(const bt_case *c, starpu_data_handle_t *h, uint64_t t)
{
    uint64_t s = t / BT_TENSORS_MAX, j = t % BT_TENSORS_MAX, e = t / BT_CHAINS;
    const size_t u = sizeof(uint64_t);

    switch (c->graph) {
    case BT_INDEPENDENT:
        return starpu_task_insert(&bt_sp_cl_independent, STARPU_R, h[0], STARPU_VALUE, &t, u,
                                  0);
    case BT_CHAIN:
        return starpu_task_insert(&bt_sp_cl_chain, STARPU_RW, h[t % BT_CHAINS], STARPU_VALUE,
                                  &t, u, STARPU_VALUE, &e, u, 0);
    default:
        break;
    }
    if (j == 0)
        return starpu_task_insert(&bt_sp_cl_stencil, STARPU_RW, h[j], STARPU_R, h[j + 1],
                                  STARPU_VALUE, &t, u, STARPU_VALUE, &s, u, STARPU_VALUE, &j,
                                  u, 0);
    if (j == BT_TENSORS_MAX - 1)
        return starpu_task_insert(&bt_sp_cl_stencil, STARPU_RW, h[j], STARPU_R, h[j - 1],
                                  STARPU_VALUE, &t, u, STARPU_VALUE, &s, u, STARPU_VALUE, &j,
                                  u, 0);
    return starpu_task_insert(&bt_sp_cl_stencil, STARPU_RW, h[j], STARPU_R, h[j - 1], STARPU_R,
                              h[j + 1], STARPU_VALUE, &t, u, STARPU_VALUE, &s, u, STARPU_VALUE,
                              &j, u, 0);
}

/* Submits c's graph and drains it. Returns elapsed ns, or 0 after a failure. */
static uint64_t bt_sp_timed(const bt_case *c, starpu_data_handle_t *h, const char *sched,
                            int rep)
{
    uint64_t t0 = bench_now_ns(), t1;
    int ret = 0;
    uint64_t t;

    for (t = 0; t < c->ntasks && ret == 0; t++)
        ret = bt_sp_insert(c, h, t);
    starpu_task_wait_for_all();
    t1 = bench_now_ns();
    if (ret != 0) {
        bench_fail(BT_NAME, "graph %s system starpu sched %s rep %d: starpu_task_insert "
                   "failed for task %" PRIu64 ": %s", bt_graph_names[c->graph], sched, rep,
                   t - 1, strerror(-ret));
        return 0;
    }
    return t1 - t0;
}

/*
 * Runs c once on StarPU with scheduler sched, between its own starpu_init and
 * starpu_shutdown (outside the timed region). Returns microseconds per task, or -1.
 */
static double bt_sp_rep(const bt_case *c, const char *sched, int rep)
{
    starpu_data_handle_t h[BT_TENSORS_MAX];
    uint64_t ns;
    int ret;

    bt_reset(c);
    setenv("STARPU_SCHED", sched, 1);
    ret = starpu_init(NULL);
    if (ret != 0) {
        bench_fail(BT_NAME, "starpu_init with STARPU_SCHED=%s failed: %s", sched,
                   strerror(-ret));
        return -1;
    }
    if (starpu_cpu_worker_get_count() != BT_THREADS)
        bench_fail(BT_NAME, "StarPU started %u CPU workers, the benchmark pins %d "
                   "(STARPU_NCPU)", starpu_cpu_worker_get_count(), BT_THREADS);
    for (int k = 0; k < c->tensors; k++)
        starpu_variable_data_register(&h[k], STARPU_MAIN_RAM, (uintptr_t)bt_slot(bt_tensors, k),
                                      sizeof(int64_t));
    ns = bt_sp_timed(c, h, sched, rep);
    for (int k = 0; k < c->tensors; k++)
        starpu_data_unregister(h[k]);
    starpu_shutdown();
    if (ns == 0 || bt_verify(c, "starpu", rep) != 0)
        return -1;
    return (double)ns / 1e3 / (double)c->ntasks;
}

#endif /* PX_HAVE_STARPU */

/* ---- OpenMP ---- */

#ifdef PX_HAVE_OPENMP

/* Creates task t of c's graph with depend clauses on the tensors x. */
static void bt_omp_task(const bt_case *c, int64_t *x, uint64_t t)
{
    uint64_t s = t / BT_TENSORS_MAX, j = t % BT_TENSORS_MAX, e = t / BT_CHAINS;
    int64_t *me, *l, *r;

    switch (c->graph) {
    case BT_INDEPENDENT:
        me = bt_slot(x, 0);
#pragma omp task firstprivate(me, t) depend(in : me[0])
        bt_body_independent(me, t);
        return;
    case BT_CHAIN:
        me = bt_slot(x, (int)(t % BT_CHAINS));
#pragma omp task firstprivate(me, t, e) depend(inout : me[0])
        bt_body_chain(me, t, e);
        return;
    default:
        break;
    }
    me = bt_slot(x, (int)j);
    l = j > 0 ? bt_slot(x, (int)j - 1) : NULL;
    r = j < BT_TENSORS_MAX - 1 ? bt_slot(x, (int)j + 1) : NULL;
    if (l == NULL) {
#pragma omp task firstprivate(me, r, t, s) depend(inout : me[0]) depend(in : r[0])
        bt_body_stencil(me, NULL, r, t, s);
    } else if (r == NULL) {
#pragma omp task firstprivate(me, l, t, s) depend(inout : me[0]) depend(in : l[0])
        bt_body_stencil(me, l, NULL, t, s);
    } else {
#pragma omp task firstprivate(me, l, r, t, s) depend(inout : me[0]) depend(in : l[0], r[0])
        bt_body_stencil(me, l, r, t, s);
    }
}

/*
 * Runs c once with OpenMP tasks: 2 threads, one of which creates every task inside
 * `single`; the time runs from the first task creation to the end of the taskwait.
 * Returns microseconds per task, or -1.
 */
static double bt_omp_rep(const bt_case *c, int rep)
{
    uint64_t t0 = 0, t1 = 0;

    bt_reset(c);
    omp_set_num_threads(BT_THREADS);
#pragma omp parallel num_threads(BT_THREADS)
#pragma omp single
    {
        t0 = bench_now_ns();
        for (uint64_t t = 0; t < c->ntasks; t++)
            bt_omp_task(c, bt_tensors, t);
#pragma omp taskwait
        t1 = bench_now_ns();
    }
    if (bt_verify(c, "openmp", rep) != 0)
        return -1;
    return (double)(t1 - t0) / 1e3 / (double)c->ntasks;
}

#endif /* PX_HAVE_OPENMP */

/* ---- the driver ---- */

/* Medians of one graph: per system, and per StarPU scheduler. A value < 0 means none. */
typedef struct bt_result {
    double us[BT_SYSTEMS];
    double sched_us[BT_NSCHED];
} bt_result;

/* Returns 1 when sys is compiled in. */
static int bt_have(bt_system sys)
{
    switch (sys) {
    case BT_PLEXUS:
        return 1;
    case BT_STARPU:
        return bench_have_starpu();
    case BT_OPENMP:
        return bench_have_openmp();
    case BT_SYSTEMS:
        break;
    }
    return 0;
}

/* One repetition of one graph in every system, in the fixed order. */
static void bt_rep(const bt_plexus *px, const bt_case *c, int rep, double us[BT_SYSTEMS],
                   double sched_us[BT_NSCHED])
{
    us[BT_PLEXUS] = px->w ? bt_px_rep(px, c, rep) : -1;
#ifdef PX_HAVE_STARPU
    for (int s = 0; s < BT_NSCHED; s++)
        sched_us[s] = bt_sp_rep(c, bt_sched_names[s], rep);
#endif
#ifdef PX_HAVE_OPENMP
    us[BT_OPENMP] = bt_omp_rep(c, rep);
#endif
}

/* Runs every repetition of c and returns the medians. */
static bt_result bt_measure(const bt_plexus *px, const bt_case *c, int reps)
{
    double us[BT_SYSTEMS][BT_MAX_REPS], sched_us[BT_NSCHED][BT_MAX_REPS];
    double one[BT_SYSTEMS] = {-1, -1, -1}, one_sched[BT_NSCHED] = {-1, -1, -1};
    bt_result res;

    for (int r = 0; r < reps; r++) {
        bt_rep(px, c, r, one, one_sched);
        for (int i = 0; i < BT_SYSTEMS; i++)
            us[i][r] = one[i];
        for (int s = 0; s < BT_NSCHED; s++)
            sched_us[s][r] = one_sched[s];
    }
    for (int i = 0; i < BT_SYSTEMS; i++)
        res.us[i] = bench_median_ok(us[i], reps);
    res.us[BT_STARPU] = -1;
    for (int s = 0; s < BT_NSCHED; s++) {
        res.sched_us[s] = bench_median_ok(sched_us[s], reps);
        if (res.sched_us[s] >= 0 && (res.us[BT_STARPU] < 0 || res.sched_us[s] <
                                                                  res.us[BT_STARPU]))
            res.us[BT_STARPU] = res.sched_us[s];
    }
    return res;
}

/* Prints "<key>=<ratio>" text for other / plexus into buf. */
static void bt_ratio(char *buf, size_t n, const char *key, const bt_result *res, bt_system sys)
{
    if (!bt_have(sys))
        snprintf(buf, n, "%s=skipped", key);
    else if (res->us[sys] < 0 || res->us[BT_PLEXUS] <= 0)
        snprintf(buf, n, "%s=failed", key);
    else
        snprintf(buf, n, "%s=%.2f", key, res->us[sys] / res->us[BT_PLEXUS]);
}

static void bt_print_system(const bt_case *c, const bt_result *res, bt_system sys)
{
    const char *g = bt_graph_names[c->graph];

    if (!bt_have(sys))
        return;
    if (sys == BT_STARPU)
        for (int s = 0; s < BT_NSCHED; s++)
            bench_line(BT_NAME, "graph=%s system=starpu sched=%s us_per_task=%.3f", g,
                       bt_sched_names[s], res->sched_us[s]);
    bench_line(BT_NAME, "graph=%s system=%s us_per_task=%.3f edges=%" PRIu64, g,
               bt_system_names[sys], res->us[sys], c->edges);
}

static void bt_print_result(const bt_case *c, const bt_result *res)
{
    char sp[64], omp[64];

    for (int i = 0; i < BT_SYSTEMS; i++)
        bt_print_system(c, res, (bt_system)i);
    bt_ratio(sp, sizeof(sp), "starpu_over_plexus", res, BT_STARPU);
    bt_ratio(omp, sizeof(omp), "openmp_over_plexus", res, BT_OPENMP);
    bench_line(BT_NAME, "graph=%s %s %s", bt_graph_names[c->graph], sp, omp);
}

static bt_params bt_params_for(bench_mode mode)
{
    switch (mode) {
    case BENCH_QUICK:
        return (bt_params){.mode = mode, .ntasks = 20000, .reps = 5, .long_ntasks = 400000,
                           .long_reps = 3};
    case BENCH_SMOKE:
        return (bt_params){.mode = mode, .ntasks = 200, .reps = 1, .long_ntasks = 4000,
                           .long_reps = 1};
    case BENCH_FULL:
        break;
    }
    return (bt_params){.mode = BENCH_FULL, .ntasks = 100000, .reps = 7, .long_ntasks = 2000000,
                       .long_reps = 3};
}

/* Prints the pinned configuration; in smoke mode also a line per anchor not compiled in. */
static void bt_print_config(const bt_params *p)
{
    char sp[32], omp[48];

    bench_anchor_versions(sp, sizeof(sp), omp, sizeof(omp));
    bench_line(BT_NAME, "config tasks=%" PRIu64 " reps=%d threads=%d starpu=%s "
               "schedulers=lws,eager,ws omp=%s plexus=%s mode=%s chains=%d stencil_width=%d "
               "long_tasks=%" PRIu64 " long_reps=%d",
               p->ntasks, p->reps, BT_THREADS, sp, omp, PX_VERSION_STRING,
               bench_mode_name(p->mode), BT_CHAINS, BT_TENSORS_MAX, p->long_ntasks,
               p->long_reps);
    bench_print_skipped(BT_NAME, p->mode);
}

int main(int argc, char **argv)
{
    int rc;
    bt_params p;
    bt_plexus px;
    bench_mode mode = BENCH_FULL;

    if ((rc = bench_start(argc, argv, "bench_tasks",
                             "task throughput of plexus, StarPU and OpenMP on 3 graphs", &mode)) >= 0)
        return rc;
    p = bt_params_for(mode);
    bt_print_config(&p);
    if (bench_check_anchors("bench_tasks", mode) != 0)
        return 1;
    bt_ran = calloc(p.long_ntasks, sizeof(bt_ran[0])); /* the longest run's tasks */
    if (bt_ran == NULL) {
        fprintf(stderr, "bench_tasks: out of memory for %" PRIu64 " task counters\n",
                p.long_ntasks);
        return 1;
    }
    bench_starpu_pin_env(BT_THREADS);
    bt_px_open(&px);
    for (int g = 0; g < BT_GRAPHS; g++) {
        bt_case c = bt_case_make((bt_graph)g, p.ntasks);
        bt_result res = bt_measure(&px, &c, p.reps);
        bt_print_result(&c, &res);
    }
    bt_scoped(&px, &p);
    px_worker_destroy(px.w);
    free(bt_ran);
    return bench_finish();
}
