/*
 * dfx_chain.c - the chain graph for bench_dfx (see dfx_chain.h). Built with DFX_CHAIN_MAIN
 * defined it is the whole of bench_dfx_off.
 */
#include "dfx_chain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define DFX_CHAIN_PAD 8 /* int64 slots per tensor: one cache line each */

/* Page-aligned, so the chain's tensors sit at the same page offset in bench_dfx and
 * bench_dfx_off: at 64-byte alignment their address modulo 4 KiB differed between the two
 * binaries, and the chain (whose pace is cache-line hand-offs) ran 5-10 % apart with equal
 * instruction counts, which `disabled` then reported as DFX's cost. */

static int64_t dfx_chain_t[DFX_CHAIN_CHAINS * DFX_CHAIN_PAD] __attribute__((aligned(4096)));
static uint64_t dfx_chain_bad;

/* dfx_chain_run_serial: the gate, when the core left it, the task whose kernel end is timed
 * (UINT64_MAX: none) and that end. */
static int dfx_chain_open_gate;
static uint64_t dfx_chain_gate_left_ns, dfx_chain_last, dfx_chain_last_ns;

#define DFX_CHAIN_GATE_S 30 /* the gate's deadline */

static uint64_t dfx_chain_clock_ns(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t dfx_chain_now_ns(void)
{
    return dfx_chain_clock_ns(CLOCK_MONOTONIC);
}

/* Task t is the (t / 8)-th writer of its tensor: checks and bumps the sequence number. */
static px_status dfx_chain_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *x = px_arg_data(a, 0);
    uint64_t expect = px_arg_u64(a, 2);

    if (*x != (int64_t)expect)
        __atomic_fetch_add(&dfx_chain_bad, 1, __ATOMIC_RELAXED);
    *x = (int64_t)expect + 1;
    if (__builtin_expect(px_arg_u64(a, 1) == dfx_chain_last, 0))
        dfx_chain_last_ns = dfx_chain_now_ns();
    return PX_OK;
}

/* Holds the core until the orchestration opens the gate, sleeping 20 us at a time; fails
 * after DFX_CHAIN_GATE_S. */
static px_status dfx_chain_gate_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    const struct timespec step = {0, 20000};
    uint64_t deadline = dfx_chain_now_ns() + DFX_CHAIN_GATE_S * 1000000000ull;

    while (!__atomic_load_n(&dfx_chain_open_gate, __ATOMIC_ACQUIRE)) {
        if (dfx_chain_now_ns() > deadline) {
            fprintf(stderr, "dfx_chain: the gate was not opened within %d s\n",
                    DFX_CHAIN_GATE_S);
            return PX_ETIMEDOUT;
        }
        nanosleep(&step, NULL);
    }
    dfx_chain_gate_left_ns = dfx_chain_now_ns();
    return PX_OK;
}

/* Returns 0, or -1 with the reason in why (see dfx_chain.h). */
int dfx_chain_open(dfx_chain *c, const px_config *cfg, char *why, size_t n)
{
    px_signature sig = {.nargs = 3};
    px_config k = *cfg;
    px_status st;

    sig.params[0] = (px_param){PX_TAG_INOUT, PX_I64};
    sig.params[1] = (px_param){PX_TAG_SCALAR, PX_DTYPE_ANY};
    sig.params[2] = (px_param){PX_TAG_SCALAR, PX_DTYPE_ANY};
    k.cores = DFX_CHAIN_CORES;
    memset(c, 0, sizeof(*c));
    c->ring = k.task_ring;
    st = px_worker_create(&k, &c->w);
    if (st == PX_OK)
        st = px_kernel_register(c->w, "chain", dfx_chain_kernel, &sig, &c->k);
    if (st == PX_OK)
        st = px_kernel_register(c->w, "chain_gate", dfx_chain_gate_kernel, NULL, &c->gate);
    if (st != PX_OK) {
        snprintf(why, n, "chain setup failed: %s: %s", px_status_name(st), px_last_error());
        px_worker_destroy(c->w);
        c->w = NULL;
        return -1;
    }
    return 0;
}

typedef struct dfx_chain_run_arg {
    dfx_chain *c;
    uint64_t ntasks;
    int serial; /* a gate first; the submits timed; the gate opened after them */
} dfx_chain_run_arg;

uint64_t dfx_chain_thread_ns(void)
{
    return dfx_chain_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static px_status dfx_chain_orch(px_orch *o, const px_task_args *args, void *user)
{
    const dfx_chain_run_arg *r = user;
    const px_tensor *block = px_arg_tensor(args, 0);
    px_tensor v[DFX_CHAIN_CHAINS];
    const int64_t one[1] = {1};
    px_status st = PX_OK;

    uint64_t cpu0;

    uint64_t t0 = 0;

    for (int k = 0; k < DFX_CHAIN_CHAINS && st == PX_OK; k++)
        st = px_tensor_view(block, 1, one, NULL, (int64_t)k * DFX_CHAIN_PAD, &v[k]);
    if (r->serial && st == PX_OK) {
        px_task_args g;

        px_args_init(&g);
        st = px_submit(o, r->c->gate, &g, NULL);
        t0 = dfx_chain_now_ns();
    }
    cpu0 = dfx_chain_thread_ns();
    for (uint64_t t = 0; t < r->ntasks && st == PX_OK; t++) {
        px_task_args a;

        px_args_init(&a);
        px_args_inout(&a, &v[t % DFX_CHAIN_CHAINS]);
        px_args_mark(&a); /* argsdump level 2 dumps it; nothing else looks at marks */
        px_args_scalar_u64(&a, t);
        px_args_scalar_u64(&a, t / DFX_CHAIN_CHAINS);
        st = px_submit(o, r->c->k, &a, NULL);
    }
    r->c->orch_cpu_ns = dfx_chain_thread_ns() - cpu0;
    if (r->serial) {
        r->c->submit_ns = dfx_chain_now_ns() - t0;
        __atomic_store_n(&dfx_chain_open_gate, 1, __ATOMIC_RELEASE); /* also after a failure */
    }
    return st;
}

/* Verifies the tensors and the run's statistics (`extra` tasks besides the chain's). 0, or
 * -1 with why. */
static int dfx_chain_verify(const dfx_chain *c, uint64_t ntasks, uint64_t extra, char *why,
                            size_t n)
{
    px_run_stats rs;

    for (int k = 0; k < DFX_CHAIN_CHAINS; k++) {
        int64_t want = (int64_t)((ntasks + DFX_CHAIN_CHAINS - 1 - (uint64_t)k) /
                                 DFX_CHAIN_CHAINS);

        if (dfx_chain_t[k * DFX_CHAIN_PAD] != want) {
            snprintf(why, n, "chain %d ends at %" PRId64 ", expected %" PRId64, k,
                     dfx_chain_t[k * DFX_CHAIN_PAD], want);
            return -1;
        }
    }
    if (dfx_chain_bad != 0 || px_run_stats_get(c->w, &rs) != PX_OK ||
        rs.tasks != ntasks + extra || rs.edges != ntasks - DFX_CHAIN_CHAINS) {
        snprintf(why, n, "chain of %" PRIu64 " tasks: %" PRIu64 " order violations, stats "
                 "tasks %" PRIu64 " edges %" PRIu64 " (expected %" PRIu64 ")", ntasks,
                 dfx_chain_bad, rs.tasks, rs.edges, ntasks - DFX_CHAIN_CHAINS);
        return -1;
    }
    return 0;
}

/* Runs and verifies the chain as r says. 0, or -1 with why. */
static int dfx_chain_go(dfx_chain_run_arg *r, char *why, size_t n)
{
    const int64_t shape[1] = {DFX_CHAIN_CHAINS * DFX_CHAIN_PAD};
    px_task_args args;
    px_tensor host;
    px_status st;

    memset(dfx_chain_t, 0, sizeof(dfx_chain_t));
    dfx_chain_bad = 0;
    __atomic_store_n(&dfx_chain_open_gate, 0, __ATOMIC_RELAXED);
    dfx_chain_last = r->serial ? r->ntasks - 1 : UINT64_MAX;
    dfx_chain_last_ns = dfx_chain_gate_left_ns = 0;
    px_tensor_make(&host, dfx_chain_t, PX_I64, 1, shape);
    px_args_init(&args);
    px_args_inout(&args, &host);
    st = px_run(r->c->w, dfx_chain_orch, &args, r);
    if (st != PX_OK) {
        snprintf(why, n, "px_run of the chain failed: %s: %s", px_status_name(st),
                 px_last_error());
        return -1;
    }
    return dfx_chain_verify(r->c, r->ntasks, r->serial ? 1 : 0, why, n);
}

/* Returns us per task of the verified run (px_run_stats.wall_ns), or -1 with why. */
double dfx_chain_run(dfx_chain *c, uint64_t ntasks, char *why, size_t n)
{
    dfx_chain_run_arg r = {c, ntasks, 0};
    px_run_stats rs;

    if (dfx_chain_go(&r, why, n) != 0 || px_run_stats_get(c->w, &rs) != PX_OK)
        return -1;
    return (double)rs.wall_ns / 1e3 / (double)ntasks; /* ends before DFX writes its files */
}

/* Returns 0 or -1 with why (see dfx_chain.h). */
int dfx_chain_run_serial(dfx_chain *c, uint64_t ntasks, char *why, size_t n)
{
    dfx_chain_run_arg r = {c, ntasks, 1};

    if (ntasks <= DFX_CHAIN_CHAINS || ntasks >= c->ring) {
        snprintf(why, n, "serial chain of %llu tasks: needs more than %d and fewer than the "
                 "task ring's %u slots (the gate holds one, and a full ring would wait for "
                 "the held core)", (unsigned long long)ntasks, DFX_CHAIN_CHAINS, c->ring);
        return -1;
    }
    if (dfx_chain_go(&r, why, n) != 0)
        return -1;
    if (dfx_chain_last_ns < dfx_chain_gate_left_ns || dfx_chain_gate_left_ns == 0) {
        snprintf(why, n, "serial chain: the last task's end (%llu) is not after the gate's "
                 "opening (%llu)", (unsigned long long)dfx_chain_last_ns,
                 (unsigned long long)dfx_chain_gate_left_ns);
        return -1;
    }
    c->exec_ns = dfx_chain_last_ns - dfx_chain_gate_left_ns;
    return 0;
}

/* Destroys the chain's worker; returns nothing. */
void dfx_chain_close(dfx_chain *c)
{
    px_worker_destroy(c->w);
    c->w = NULL;
}

/* Returns the exit status of `--chain N --reps R` (see dfx_chain.h). */
int dfx_chain_main(int argc, char **argv)
{
    long long ntasks = 0, reps = 1;
    char why[1024];
    px_config cfg;
    dfx_chain c;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--chain") == 0)
            ntasks = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoll(argv[i + 1]);
    }
    if (ntasks <= DFX_CHAIN_CHAINS || reps < 1) {
        fprintf(stderr, "usage: %s --chain N --reps R (N > %d, R >= 1)\n", argv[0],
                DFX_CHAIN_CHAINS);
        return 1;
    }
    if (px_config_default(&cfg) != PX_OK || dfx_chain_open(&c, &cfg, why, sizeof(why)) != 0) {
        fprintf(stderr, "%s: %s\n", argv[0], px_last_error());
        return 1;
    }
    for (long long r = 0; r < reps; r++) {
        double us = dfx_chain_run(&c, (uint64_t)ntasks, why, sizeof(why));

        if (us < 0) {
            fprintf(stderr, "%s: %s\n", argv[0], why);
            dfx_chain_close(&c);
            return 1;
        }
        printf("CHAIN us_per_task=%.6f\n", us);
    }
    fflush(stdout);
    dfx_chain_close(&c);
    return 0;
}

#ifdef DFX_CHAIN_MAIN
int main(int argc, char **argv)
{
    return dfx_chain_main(argc, argv);
}
#endif
