/*
 * test_mpi_shrink.c - revoke (and shrink) of a domain spanning hosts (issue 37), under
 * mpirun: `mpirun -np H test_mpi_shrink CHIPS MODE`. Every host makes a level-3 worker of
 * CHIPS chips; each run allocates a domain of every host's chips (host-major ranks).
 *
 * MODE revoke:
 *   1. a kernel's revoke: rank 0 (chip 0 of host 0) calls px_comm_revoke, then every rank
 *      enters px_comm_barrier (the reproducer). Every rank, on every host, must get
 *      PX_EREVOKED naming "revoked by rank 0" within TS_QUICK_S, far under the deadline
 *      (PLEXUS_COMM_TIMEOUT_S, 20 s in the test): a rank of another host than the revoker's
 *      sees it only if it crossed the hosts through the proxies. Each host's run fails with
 *      that PX_EREVOKED, which must not end the MPI job.
 *   2. an orchestration's revoke: every rank waits on a signal nobody sets, and the last
 *      host's orchestration calls px_domain_revoke; every rank must get PX_EREVOKED naming
 *      "revoked by the orchestration" within TS_QUICK_S.
 * Prints "host H of N: ..." and PASS, exit 0, when every step held on this host; else
 * "FAIL: <why>" and 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <plexus/plexus.h>

#define TS_QUICK_S 2.0 /* a revoke seen on every host within this (the deadline is 20 s) */
#define TS_WAIT_S 30.0 /* a wait only a revoke can end */

enum { M_KREVOKE = 1, M_WAIT };

static int g_host, g_chips; /* this worker's host (the launcher's rank) and chips per host */
static px_kernel_id k_step;
static px_callable_id c_step;

static double ts_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A wait that ended: PX_EREVOKED naming want within TS_QUICK_S of t0 gives PX_EREVOKED (the
 * run fails with it on every host); anything else is said and gives PX_EIO. */
static px_status ts_revoked(px_comm *c, px_status st, double t0, const char *want)
{
    double took = ts_now() - t0;

    if (st == PX_EREVOKED && strstr(px_last_error(), want) != NULL && took < TS_QUICK_S)
        return PX_EREVOKED;
    fprintf(stderr, "host %d rank %d: FAIL: expected PX_EREVOKED naming \"%s\" within %.1f s, "
            "got %s after %.2f s: %s\n", g_host, px_comm_rank(c), want, TS_QUICK_S,
            px_status_name(st), took, px_last_error());
    return px_set_error(PX_EIO, "rank %d: got %s after %.2f s", px_comm_rank(c),
                        px_status_name(st), took);
}

static px_status ts_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int mode = (int)px_arg_u64(a, 0);
    px_comm *c = px_arg_comm(a, 1);
    double t0 = ts_now();

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    switch (mode) {
    case M_KREVOKE: /* the reproducer: no synchronisation before the revoke */
        if (px_comm_rank(c) == 0 && px_comm_revoke(c) != PX_OK)
            return PX_EIO;
        return ts_revoked(c, px_comm_barrier(c), t0, "revoked by rank 0");
    case M_WAIT:
        return ts_revoked(c, px_comm_wait_until(c, 0, PX_CMP_GE, 1, TS_WAIT_S), t0,
                          "revoked by the orchestration");
    default: return PX_EINVAL;
    }
}

static px_status ts_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    (void)user;
    return px_submit(o, k_step, &a, NULL);
}

typedef struct ts_run {
    int hosts, step;
    char info[256];
} ts_run;

/* A domain "name" of every host's chips, host-major. */
static px_status ts_alloc(px_orch *o, const ts_run *t, const char *name, px_domain **d)
{
    int chips[64], n = t->hosts * g_chips;
    px_domain_buffer b = {"x", 4096};
    px_domain_spec s = PX_DOMAIN_SPEC_INIT;

    for (int r = 0; r < n; r++)
        chips[r] = px_chip_global(r / g_chips, r % g_chips);
    s.name = name;
    s.chips = chips;
    s.nchips = n;
    s.window_bytes = 4096;
    s.buffers = &b;
    s.nbuffers = 1;
    s.nsignals = 1;
    return px_domain_alloc(o, &s, d);
}

static px_status ts_submit(px_orch *o, px_domain *d, int mode)
{
    px_task_args per[64];

    for (int r = 0; r < px_domain_size(d); r++) {
        px_args_init(&per[r]);
        px_args_scalar_u64(&per[r], (uint64_t)mode);
    }
    return px_submit_domain_task(o, d, c_step, per, NULL);
}

static px_status ts_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_run *t = user;
    px_domain *d;
    px_status st;

    (void)args;
    if ((st = ts_alloc(o, t, "rv", &d)) != PX_OK)
        return st;
    st = ts_submit(o, d, t->step == 1 ? M_KREVOKE : M_WAIT);
    if (st == PX_OK && t->step == 2 && g_host == t->hosts - 1) {
        usleep(300 * 1000); /* every host's ranks are in their waits */
        st = px_domain_revoke(d);
    }
    if (st != PX_OK) {
        (void)px_domain_release(d);
        return st;
    }
    return px_domain_release(d); /* freed once its tasks are done */
}

/* The revoke steps: each run fails on every host with PX_EREVOKED naming the revoker. */
static px_status ts_revoke_steps(px_worker *w, ts_run *t)
{
    static const char *want[] = {"", "revoked by rank 0", "revoked by the orchestration"};
    px_status st;

    for (t->step = 1; t->step <= 2; t->step++) {
        double t0 = ts_now();

        st = px_run(w, ts_orch, NULL, t);
        if (st != PX_EREVOKED || strstr(px_last_error(), want[t->step]) == NULL)
            return px_set_error(st == PX_OK ? PX_EIO : st, "revoke step %d: the run ended with "
                                "%s, expected PX_EREVOKED naming \"%s\": %s", t->step,
                                px_status_name(st), want[t->step], px_last_error());
        printf("host %d: revoke step %d: every rank here got PX_EREVOKED (%s) in %.2f s\n",
               g_host, t->step, want[t->step], ts_now() - t0);
    }
    snprintf(t->info, sizeof(t->info), "revoked from a kernel of host 0 and from the "
             "orchestration of host %d; every rank saw it within %.0f s", t->hosts - 1,
             TS_QUICK_S);
    return PX_OK;
}

int main(int argc, char **argv)
{
    const char *hr = getenv("OMPI_COMM_WORLD_RANK");
    const char *mode = argc > 2 ? argv[2] : "revoke";
    px_config c;
    px_worker *w = NULL;
    ts_run t;
    px_status st;

    memset(&t, 0, sizeof(t));
    g_chips = argc > 1 ? atoi(argv[1]) : 2;
    g_host = hr != NULL ? atoi(hr) : 0; /* before the fork, so the chips see it */
    if (g_chips < 1 || g_chips > 8 || strcmp(mode, "revoke") != 0) {
        printf("FAIL: usage: test_mpi_shrink CHIPS(1..8) revoke\n");
        return 1;
    }
    px_config_default(&c);
    c.level = 3;
    c.chips = g_chips;
    c.cores = 1;
    c.device_mem = 16ull << 20;
    c.heap_ring = 4ull << 20;
    if ((st = px_worker_create(&c, &w)) == PX_OK &&
        (st = px_kernel_register(w, "ts.step", ts_kernel, NULL, &k_step)) == PX_OK &&
        (st = px_callable_register(w, "ts.step", ts_callable, &c_step)) == PX_OK &&
        (st = px_worker_init(w)) == PX_OK) {
        t.hosts = px_worker_hosts(w);
        if (t.hosts < 2 || t.hosts * g_chips > 64)
            st = px_set_error(PX_EINVAL, "run it under mpirun with 2 hosts or more (64 ranks "
                              "at most)");
        else
            st = ts_revoke_steps(w, &t);
    }
    if (st != PX_OK) {
        printf("host %d: FAIL: %s: %s\n", g_host, px_status_name(st), px_last_error());
        px_worker_destroy(w);
        return 1;
    }
    printf("host %d of %d: %s\nPASS\n", g_host, t.hosts, t.info);
    px_worker_destroy(w);
    return 0;
}
