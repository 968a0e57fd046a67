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
 *      host's orchestration calls px_domain_revoke; every rank must get PX_EREVOKED within
 *      TS_QUICK_S naming "the orchestration" there and "the orchestration of host H" (the
 *      last host) on the other hosts.
 * MODE shrink (PLEXUS_TEST_FAULT, set here: chip 1 of host 1 kills itself as it enters its
 * second collective):
 *   1. every rank writes a marker into its window (then a barrier: its first collective);
 *   2. every rank loops on allreduces; chip 1 of host 1 dies in the first: the run fails with
 *      PX_EPEERDEAD (or PX_EREVOKED) on every host, which must not end the MPI job;
 *   3. every host's orchestration shrinks the domain (again after a PX_EPEERDEAD): the new
 *      domain is generation 1 with every chip but the dead one, in the old order;
 *   4. on it every survivor finds its marker (the window carried) and its allreduce is bit
 *      for bit the rank-order fold of the survivors' inputs; so is the allreduce of a fresh
 *      domain of the same chips (results identical to a domain that never lost a member);
 *   5. the shrink's domain is shrunk again (no death: generation 2, the same members, the
 *      markers carried once more, the allreduce checked again), the older ones not released;
 *   6. every domain is released.
 * MODE during (3 chips a host): as shrink, and host 0's parent kills its chip 2 once the
 * hosts made the successor, before they confirm it (the test hook PX_TEST_XSHRINK_KILL=0:2,
 * set here): the first shrink fails with PX_EPEERDEAD on every host alike naming that chip,
 * the second excludes both dead chips and the survivors go on as above.
 * MODE mismatch: host 0 shrinks domain "a" while host 1 shrinks domain "b": both fail with
 * PX_EINVAL naming the other host, and the job goes on (both released).
 * MODE hostgone: every chip of host 1 dies in the allreduces: the shrink fails on every host
 * with PX_ENOTSUP saying that no member of host 1 survives.
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

#include "mpi_fold.h"

#define TS_QUICK_S 5.0 /* a revoke seen on every host within this (the deadline is 20 s; measured:
                         * 0.05 s, plus the 0.3 s before the orchestration revokes) */
#define TS_WAIT_S 30.0 /* a wait only a revoke can end */
#define TS_COUNT 1000  /* the allreduce's doubles (with the markers in one 12 KiB buffer) */
#define TS_MARK 64     /* marker doubles */
#define TS_BYTES ((TS_MARK + TS_COUNT) * sizeof(double))

enum { M_KREVOKE = 1, M_WAIT, M_FILL, M_DIE, M_SUM, M_SUM_FRESH };

static int g_host, g_hosts, g_chips; /* this worker's host and the job's (the launcher's rank
                                      * and size), chips per host */
static char g_orch_want[64];         /* MODE revoke: what step 2's error names */
static uint64_t g_dead;     /* the global ids (host * chips + chip) that die, as a mask */
static int g_exit_dead;     /* the dead exit in M_DIE (else the fault hook kills them) */
static int g_during;        /* MODE during: a death between the hosts' steps of the shrink */
static px_kernel_id k_step;
static px_callable_id c_step;

static double ts_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* 1 when msg, a PX_EREVOKED error, names the revoker want, or says that another member's call
 * of the same collective failed with PX_EREVOKED (a member whose peer saw the revocation
 * first: "rank 1's collective call of this domain failed with PX_EREVOKED"). */
static int ts_names_revoke(const char *msg, const char *want)
{
    return strstr(msg, want) != NULL ||
           strstr(msg, "collective call of this domain failed with PX_EREVOKED") != NULL;
}

/* A wait that ended: PX_EREVOKED naming want within TS_QUICK_S of t0 gives PX_EREVOKED (the
 * run fails with it on every host); anything else is said and gives PX_EIO. */
static px_status ts_revoked(px_comm *c, px_status st, double t0, const char *want)
{
    double took = ts_now() - t0;

    if (st == PX_EREVOKED && ts_names_revoke(px_last_error(), want) && took < TS_QUICK_S)
        return PX_EREVOKED;
    fprintf(stderr, "host %d rank %d: FAIL: expected PX_EREVOKED naming \"%s\" within %.1f s, "
            "got %s after %.2f s: %s\n", g_host, px_comm_rank(c), want, TS_QUICK_S,
            px_status_name(st), took, px_last_error());
    return px_set_error(PX_EIO, "rank %d: got %s after %.2f s", px_comm_rank(c),
                        px_status_name(st), took);
}

/* The survivors' allreduce against the serial rank-order fold, bit for bit (fresh: the
 * domain was just made, no marker to find). */
static px_status ts_sum(px_comm *c, double *x, int me, int fresh)
{
    if (!fresh)
        return mpi_fold_check(c, x, TS_MARK, TS_COUNT, me, g_hosts * g_chips, g_dead, g_host);
    return mpi_fold_check(c, x + TS_MARK, 0, TS_COUNT, me, g_hosts * g_chips, g_dead, g_host);
}

/* The shrink modes' steps on rank px_comm_rank(c). */
static px_status ts_shrink_kernel(px_comm *c, int mode)
{
    int me = g_host * g_chips + px_chip_index();
    double *x = px_comm_buffer(c, "x", NULL);
    px_status st = PX_OK;

    if (x == NULL)
        return PX_EINVAL;
    switch (mode) {
    case M_FILL:
        for (int i = 0; i < TS_MARK; i++)
            x[i] = 1000.0 * me + i;
        return px_comm_barrier(c);
    case M_DIE:
        if (g_exit_dead && (g_dead >> me & 1))
            _exit(9);
        for (int k = 0; k < 1000 && st == PX_OK; k++) {
            for (size_t i = 0; i < TS_COUNT; i++)
                x[TS_MARK + i] = mpi_fold_in(me, i);
            st = px_comm_allreduce(c, x + TS_MARK, TS_COUNT, PX_F64, PX_OP_SUM);
        }
        return st == PX_OK ? px_set_error(PX_EIO, "1000 allreduces passed with a member dead")
                           : st;
    case M_SUM:
    case M_SUM_FRESH: return ts_sum(c, x, me, mode == M_SUM_FRESH);
    default: return PX_EINVAL;
    }
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
                          g_orch_want);
    default: return ts_shrink_kernel(c, mode);
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
    px_domain *d, *nd, *nd2, *fresh; /* the shrink modes' domain, its shrink and that one's, a
                                      * fresh one */
    int shrinks;
    px_status shrink_st; /* MODE mismatch, hostgone: what the shrink returned ... */
    char shrink_msg[512]; /* ... and said */
    char info[256];
} ts_run;

/* A domain "name" of every host's chips, host-major, but the dead ones when survivors. */
static px_status ts_alloc_of(px_orch *o, const ts_run *t, const char *name, int survivors,
                             px_domain **d)
{
    int chips[64], n = 0;
    px_domain_buffer b = {"x", TS_BYTES};
    px_domain_spec s = PX_DOMAIN_SPEC_INIT;

    for (int g = 0; g < t->hosts * g_chips; g++)
        if (!survivors || !(g_dead >> g & 1))
            chips[n++] = px_chip_global(g / g_chips, g % g_chips);
    s.name = name;
    s.chips = chips;
    s.nchips = n;
    s.window_bytes = TS_BYTES;
    s.buffers = &b;
    s.nbuffers = 1;
    s.nsignals = 1;
    return px_domain_alloc(o, &s, d);
}

static px_status ts_alloc(px_orch *o, const ts_run *t, const char *name, px_domain **d)
{
    return ts_alloc_of(o, t, name, 0, d);
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

/* The shrunk domain's ranks are every global id not in g_dead, in order, generation 1. */
static px_status ts_check_members(const ts_run *t, px_domain *d)
{
    int r = 0;

    for (int g = 0; g < t->hosts * g_chips; g++) {
        if (g_dead >> g & 1)
            continue;
        if (r >= px_domain_size(d) ||
            px_domain_chip(d, r) != px_chip_global(g / g_chips, g % g_chips))
            return px_set_error(PX_EIO, "rank %d of the shrunk domain is chip %#x, expected "
                                "chip %d of host %d", r, r < px_domain_size(d) ?
                                (unsigned)px_domain_chip(d, r) : 0u, g % g_chips, g / g_chips);
        r++;
    }
    if (r != px_domain_size(d) || px_domain_generation(d) != 1)
        return px_set_error(PX_EIO, "the shrunk domain has %d ranks, generation %d; expected "
                            "%d ranks, generation 1", px_domain_size(d),
                            px_domain_generation(d), r);
    return PX_OK;
}

/* The shrink modes' runs, step by step. */
static px_status ts_shrink_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_run *t = user;
    px_status st;

    (void)args;
    switch (t->step) {
    case 1:
        if ((st = ts_alloc(o, t, "sh", &t->d)) != PX_OK)
            return st;
        return ts_submit(o, t->d, M_FILL);
    case 2: return ts_submit(o, t->d, M_DIE);
    case 3:
        t->shrinks++;
        if ((st = px_domain_shrink(o, t->d, &t->nd)) != PX_OK)
            return st;
        return ts_check_members(t, t->nd);
    case 4:
        if ((st = ts_submit(o, t->nd, M_SUM)) != PX_OK ||
            (st = ts_alloc_of(o, t, "fresh", 1, &t->fresh)) != PX_OK)
            return st;
        return ts_submit(o, t->fresh, M_SUM_FRESH);
    case 5: /* a shrink of the shrink's domain, its predecessors not released (no death:
             * the same members, generation 2, the markers carried once more) */
        if ((st = px_domain_shrink(o, t->nd, &t->nd2)) != PX_OK)
            return st;
        if (px_domain_generation(t->nd2) != 2 || px_domain_size(t->nd2) != px_domain_size(t->nd))
            return px_set_error(PX_EIO, "the second shrink gave generation %d of %d ranks; "
                                "expected generation 2 of %d", px_domain_generation(t->nd2),
                                px_domain_size(t->nd2), px_domain_size(t->nd));
        return ts_submit(o, t->nd2, M_SUM);
    case 6:
        if ((st = px_domain_release(t->d)) != PX_OK || (st = px_domain_release(t->nd)) != PX_OK ||
            (st = px_domain_release(t->nd2)) != PX_OK)
            return st;
        return px_domain_release(t->fresh);
    default: return PX_EINVAL;
    }
}

/* MODE shrink: the steps of ts_shrink_orch, each its own run. */
static px_status ts_shrink_steps(px_worker *w, ts_run *t)
{
    static const char *what[] = {"", "the fill", "the death", "the shrink", "the allreduces",
                                 "the second shrink", "the release"};
    px_status st = PX_OK;

    for (t->step = 1; t->step <= 6; t->step++) {
        st = px_run(w, ts_shrink_orch, NULL, t);
        if (t->step == 2) { /* the death fails the run on every host */
            if (st != PX_EPEERDEAD && st != PX_EREVOKED)
                return px_set_error(PX_EIO, "the run with a dead member ended with %s, not "
                                    "PX_EPEERDEAD or PX_EREVOKED: %s", px_status_name(st),
                                    px_last_error());
            printf("host %d: the run with a member dead failed: %s\n", g_host,
                   px_last_error());
            continue;
        }
        if (t->step == 3 && st == PX_EPEERDEAD && t->shrinks < 3) { /* a death during it */
            printf("host %d: shrink %d: %s; again\n", g_host, t->shrinks, px_last_error());
            if (g_during && (t->shrinks != 1 || strstr(px_last_error(), "rank 2 (chip 2 of "
                                                       "host 0) died during the shrink") == NULL))
                return px_set_error(PX_EIO, "shrink %d failed, not as the death between the "
                                    "hosts' steps must fail the first", t->shrinks);
            t->step--;
            continue;
        }
        if (st != PX_OK)
            return px_set_error(st, "%s: %s", what[t->step], px_last_error());
    }
    if (t->shrinks != 1 + g_during)
        return px_set_error(PX_EIO, "%d shrinks; expected %d", t->shrinks, 1 + g_during);
    snprintf(t->info, sizeof(t->info), "%d ranks shrunk to %d by every host (%s), windows "
             "carried, the allreduce bit for bit the rank-order fold, as a fresh domain's, and "
             "again after a second shrink",
             t->hosts * g_chips, t->hosts * g_chips - 1 - g_during, g_during ? "chip 1 of host "
             "1 dead, then chip 2 of host 0 between the hosts' steps: the first shrink failed "
             "alike" : "chip 1 of host 1 dead");
    return PX_OK;
}

/* MODE mismatch and hostgone: the shrink fails alike on every host, saying why. */
static px_status ts_fail_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_run *t = user;
    px_status st;

    (void)args;
    switch (t->step) {
    case 1:
        if ((st = ts_alloc(o, t, "a", &t->d)) != PX_OK)
            return st;
        return g_dead != 0 ? PX_OK : ts_alloc(o, t, "b", &t->fresh);
    case 2: return ts_submit(o, t->d, M_DIE); /* hostgone: host 1's chips die */
    case 3: /* its failure is kept: a run that fails so would end the MPI job */
        t->shrink_st = px_domain_shrink(o, g_host == 1 && g_dead == 0 ? t->fresh : t->d, &t->nd);
        snprintf(t->shrink_msg, sizeof(t->shrink_msg), "%s", px_last_error());
        return PX_OK;
    case 4:
        if ((st = px_domain_release(t->d)) != PX_OK)
            return st;
        return t->fresh != NULL ? px_domain_release(t->fresh) : PX_OK;
    default: return PX_EINVAL;
    }
}

static px_status ts_fail_steps(px_worker *w, ts_run *t)
{
    const char *want = g_dead != 0 ? "no member of host 1 survives"
                                   : g_host == 0 ? "host 1 shrinks another domain at this point"
                                                 : "host 0 shrinks another domain at this point";
    px_status want_st = g_dead != 0 ? PX_ENOTSUP : PX_EINVAL, st;

    t->step = 1;
    if ((st = px_run(w, ts_fail_orch, NULL, t)) != PX_OK)
        return st;
    t->step = 2;
    st = g_dead != 0 ? px_run(w, ts_fail_orch, NULL, t) : PX_EPEERDEAD;
    if (st != PX_EPEERDEAD && st != PX_EREVOKED)
        return px_set_error(PX_EIO, "the run with host 1's chips dead ended with %s: %s",
                            px_status_name(st), px_last_error());
    t->step = 3;
    if ((st = px_run(w, ts_fail_orch, NULL, t)) != PX_OK)
        return st;
    if (t->shrink_st != want_st || strstr(t->shrink_msg, want) == NULL)
        return px_set_error(PX_EIO, "the shrink ended with %s, expected %s saying \"%s\": %s",
                            px_status_name(t->shrink_st), px_status_name(want_st), want,
                            t->shrink_msg);
    printf("host %d: the shrink failed as it must: %s\n", g_host, t->shrink_msg);
    t->step = 4;
    if ((st = px_run(w, ts_fail_orch, NULL, t)) != PX_OK)
        return st;
    snprintf(t->info, sizeof(t->info), "the shrink failed with %s on this host, saying \"%s\"",
             px_status_name(want_st), want);
    return PX_OK;
}

/* The revoke steps: each run fails on every host with PX_EREVOKED naming the revoker. */
static px_status ts_revoke_steps(px_worker *w, ts_run *t)
{
    const char *want[] = {"", "revoked by rank 0", g_orch_want};
    px_status st;

    for (t->step = 1; t->step <= 2; t->step++) {
        double t0 = ts_now();

        st = px_run(w, ts_orch, NULL, t);
        if (st != PX_EREVOKED || !ts_names_revoke(px_last_error(), want[t->step]))
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
    g_hosts = getenv("OMPI_COMM_WORLD_SIZE") != NULL ? atoi(getenv("OMPI_COMM_WORLD_SIZE")) : 1;
    if (g_host == g_hosts - 1) /* the revoker's host; the others name it */
        snprintf(g_orch_want, sizeof(g_orch_want), "revoked by the orchestration;");
    else
        snprintf(g_orch_want, sizeof(g_orch_want), "revoked by the orchestration of host %d",
                 g_hosts - 1);
    if (g_chips < 1 || g_chips > 8 ||
        (strcmp(mode, "revoke") != 0 && strcmp(mode, "mismatch") != 0 &&
         strcmp(mode, "hostgone") != 0 && (strcmp(mode, "shrink") != 0 || g_chips < 2) &&
         (strcmp(mode, "during") != 0 || g_chips < 3))) {
        printf("FAIL: usage: test_mpi_shrink CHIPS(1..8) revoke|shrink|during|mismatch|"
               "hostgone (shrink: 2 chips or more, during: 3)\n");
        return 1;
    }
    g_during = strcmp(mode, "during") == 0;
    if (strcmp(mode, "shrink") == 0 || g_during) { /* chip 1 of host 1, at its 1st allreduce */
        g_dead = 1ull << (g_chips + 1);
        setenv("PLEXUS_TEST_FAULT", "host:1:chip:1:kill:coll:2", 1);
    }
    if (g_during) { /* and chip 2 of host 0, between the hosts' steps of the first shrink */
        g_dead |= 1ull << 2;
        setenv("PX_TEST_XSHRINK_KILL", "0:2", 1);
    } else if (strcmp(mode, "hostgone") == 0) { /* every chip of host 1 */
        g_dead = ((1ull << g_chips) - 1) << g_chips;
        g_exit_dead = 1;
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
        else if (strcmp(mode, "revoke") == 0)
            st = ts_revoke_steps(w, &t);
        else if (strcmp(mode, "shrink") == 0 || g_during)
            st = ts_shrink_steps(w, &t);
        else
            st = ts_fail_steps(w, &t);
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
