/*
 * python_c_graphs.c - bench_python's C side (libbench_python_c.so): the kernels of
 * bench_tasks' independent and chain graphs, exported so that bench_python submits them by
 * name from Python (Worker.load_kernels), and bp_run_c(), which runs the same graph from C
 * on a worker of its own, so the two per-task costs come from one process and one kernel.
 *
 *   independent  task t reads the shared tensor (IN) and checks it holds BP_MAGIC: 0 edges
 *   chain        task t reads and writes T[t mod 8] (INOUT) and checks that it holds t / 8,
 *                the number of earlier tasks of its chain, then increments it: 8 chains,
 *                ntasks - 8 edges
 * A kernel that sees a wrong value counts a violation (a missing edge); every kernel counts
 * its runs. bp_counts() reads and clears both.
 */
#include <plexus/plexus.h>

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define BP_API __attribute__((visibility("default")))
#define BP_CHAINS 8
#define BP_PAD 8 /* int64 per tensor: one cache line */
#define BP_MAGIC INT64_C(0x5eed5eed5eed)

static atomic_uint_fast64_t bp_runs, bp_violations;

BP_API px_status bp_independent(px_core_ctx *ctx, const px_task_args *a)
{
    const int64_t *x = px_arg_data(a, 0);

    if (*x != BP_MAGIC)
        atomic_fetch_add_explicit(&bp_violations, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&bp_runs, 1, memory_order_relaxed);
    return PX_OK;
}

BP_API px_status bp_chain(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *x = px_arg_data(a, 0);

    if ((uint64_t)*x != px_arg_u64(a, 2))
        atomic_fetch_add_explicit(&bp_violations, 1, memory_order_relaxed);
    (*x)++;
    atomic_fetch_add_explicit(&bp_runs, 1, memory_order_relaxed);
    return PX_OK;
}

/* Runs and violations since the last call; clears both. */
BP_API void bp_counts(uint64_t *runs, uint64_t *violations)
{
    *runs = atomic_exchange(&bp_runs, 0);
    *violations = atomic_exchange(&bp_violations, 0);
}

typedef struct bp_run {
    int graph; /* 0 independent, 1 chain */
    uint64_t ntasks;
    px_kernel_id k;
} bp_run;

static px_status bp_orch(px_orch *o, const px_task_args *args, void *user)
{
    const bp_run *r = user;
    const px_tensor *block = px_arg_tensor(args, 0);
    px_tensor v[BP_CHAINS];
    int64_t shape[1] = {1};
    px_status st = PX_OK;

    for (int j = 0; j < BP_CHAINS && st == PX_OK; j++)
        st = px_tensor_view(block, 1, shape, NULL, (int64_t)j * BP_PAD, &v[j]);
    for (uint64_t t = 0; t < r->ntasks && st == PX_OK; t++) {
        px_task_args a;

        px_args_init(&a);
        if (r->graph == 0) {
            px_args_in(&a, &v[0]);
            px_args_scalar_u64(&a, t);
        } else {
            px_args_inout(&a, &v[t % BP_CHAINS]);
            px_args_scalar_u64(&a, t);
            px_args_scalar_u64(&a, t / BP_CHAINS);
        }
        st = px_submit(o, r->k, &a, NULL);
    }
    return st;
}

/*
 * Runs graph (0 independent, 1 chain) of ntasks tasks from C on a new worker with `cores`
 * core threads: *seconds is the wall time of px_run (submission to drain), *edges the edges
 * it inferred. Returns PX_OK or the failure (px_last_error() says why).
 */
BP_API px_status bp_run_c(int graph, uint64_t ntasks, int cores, double *seconds,
                          uint64_t *edges)
{
    static int64_t block[BP_CHAINS * BP_PAD] __attribute__((aligned(64)));
    px_config cfg;
    px_worker *w = NULL;
    px_task_args args;
    px_tensor t;
    int64_t shape[1] = {BP_CHAINS * BP_PAD};
    px_run_stats s;
    bp_run r = {.graph = graph, .ntasks = ntasks};
    struct timespec t0, t1;
    px_status st = px_config_default(&cfg);

    memset(block, 0, sizeof(block));
    block[0] = graph == 0 ? BP_MAGIC : 0;
    if (st == PX_OK) {
        cfg.cores = cores;
        st = px_worker_create(&cfg, &w);
    }
    if (st == PX_OK)
        st = px_kernel_register(w, graph == 0 ? "bp_independent" : "bp_chain",
                                graph == 0 ? bp_independent : bp_chain, NULL, &r.k);
    if (st == PX_OK)
        st = px_tensor_make(&t, block, PX_I64, 1, shape);
    if (st == PX_OK) {
        px_args_init(&args);
        if (graph == 0)
            px_args_in(&args, &t);
        else
            px_args_inout(&args, &t);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = px_run(w, bp_orch, &args, &r);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        *seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    }
    if (st == PX_OK)
        st = px_run_stats_get(w, &s);
    if (st == PX_OK)
        *edges = s.edges;
    if (st == PX_OK && graph == 1)
        for (int j = 0; j < BP_CHAINS; j++)
            if ((uint64_t)block[j * BP_PAD] != ntasks / BP_CHAINS + (j < (int)(ntasks % BP_CHAINS)))
                st = px_set_error(PX_EIO, "bench_python: chain %d ended at %lld, expected %llu",
                                  j, (long long)block[j * BP_PAD],
                                  (unsigned long long)(ntasks / BP_CHAINS +
                                                       (j < (int)(ntasks % BP_CHAINS))));
    px_worker_destroy(w);
    return st;
}
