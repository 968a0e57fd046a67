/*
 * test_mpi_kshrink.c - the kernel-side shrink (px_comm_shrink) of a domain spanning hosts
 * (issue 37), under mpirun: `mpirun -np 2 test_mpi_kshrink CHIPS MODE`. Every host makes a
 * level-3 worker of CHIPS chips (3 or more); one resilient domain task
 * (px_submit_domain_task_resilient) runs over a domain of every host's chips (host-major
 * ranks), and each rank's kernel does every step itself:
 *   1. it writes a marker into its window and allreduces (checked: 7, 1000 and 9001 doubles,
 *      both sides of the one-shot's limit);
 *   2. chip 1 of host 1 dies as it enters the next allreduce; every survivor's allreduce fails
 *      (PX_EPEERDEAD, or PX_EREVOKED when a survivor's shrink revoked it first), and every
 *      survivor shrinks in its kernel (again after a PX_EPEERDEAD: a death during the shrink);
 *   3. on the survivors' communicator (kernel generation 1, its heads at the windows' other
 *      head) each finds its marker (the window carried) and its allreduce is bit for bit the
 *      rank-order fold of the survivors' inputs;
 *   4. chip 0 of host 0 dies the same way: a second shrink (generation 2, the heads back at
 *      the windows' start), checked as in 3;
 *   5. the lowest survivor revokes the generation-2 communicator and every survivor enters a
 *      barrier: every one, on both hosts, gets PX_EREVOKED naming "revoked by rank 0" within
 *      TS_QUICK_S (the kernel generation's revocation crossed the hosts).
 * MODE kernel: as above. MODE during1 / during2: also chip 2 of host 1 exits in the first
 * shrink right after it published its proposal (during1) or its readiness (during2) (the
 * test hook PX_TEST_COMM_SHRINK_EXIT, set on host 1 only): during1 fails the first attempt on
 * every survivor alike or excludes it at once, during2 leaves it in the first generation, whose
 * first allreduce fails, and a further shrink excludes it; either way the survivors end with
 * every chip but the dead ones and the checks of 3 hold at every generation. MODE pair: chip 2
 * of host 0 dies with chip 1 of host 1 (two hosts' deaths at once: each survivor may have seen
 * either first; the agreement excludes both on every host).
 * Prints "host H of 2: ..." and PASS, exit 0, when every step held on this host; else
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

#define TK_QUICK_S 5.0 /* a revoke seen on every host within this (the deadline is 20 s) */
#define TK_COUNT 9001  /* the allreduce's doubles, at most: past the one-shot's 64 KiB */
#define TK_MARK 64     /* marker doubles */
#define TK_BYTES ((TK_MARK + TK_COUNT) * sizeof(double))
#define TK_TRIES 4     /* shrinks of one death, at most (a death during one: again) */

static int g_host, g_chips; /* this worker's host (the launcher's rank), chips per host */
static int g_during;        /* 0, or the phase chip 2 of host 1 exits in (1 or 2) */
static int g_pair;          /* MODE pair: chip 2 of host 0 dies with chip 1 of host 1 */
static px_kernel_id k_step;
static px_callable_id c_step;

static double tk_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The global ids dead once `deaths` of the planned deaths happened (1:1, then 0:0; with
 * g_during, 1:2 with the first), as a mask. */
static uint64_t tk_dead(int deaths)
{
    uint64_t m = 0;

    if (deaths >= 1)
        m |= 1ull << (g_chips + 1) | (g_during ? 1ull << (g_chips + 2) : 0) |
             (g_pair ? 1ull << 2 : 0);
    if (deaths >= 2)
        m |= 1ull;
    return m;
}

/* The survivors' allreduce on c against the serial rank-order fold of the members not in
 * dead, bit for bit, after the marker check. */
static px_status tk_sum(px_comm *c, double *x, int me, uint64_t dead)
{
    /* odd sizes on both sides of the one-shot's limit (PX_COMM_ONESHOT_MAX_DEFAULT: 64 KiB,
     * 8192 doubles), so each generation's allreduce takes both algorithms */
    static const size_t counts[] = {7, 1000, TK_COUNT};
    px_status st = PX_OK;

    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && st == PX_OK; k++)
        st = mpi_fold_check(c, x, TK_MARK, counts[k], me, 2 * g_chips, dead, g_host);
    return st;
}

/* The phase whose survivors c has (0: nobody dead yet, 1: after the first death, 2: after
 * the second), or -1 (a dead rank is still a member: its next collective fails). */
static int tk_phase(const px_comm *c)
{
    for (int k = 0; k <= 2; k++)
        if (px_comm_size(c) == 2 * g_chips - __builtin_popcountll(tk_dead(k)))
            return k;
    return -1;
}

/*
 * The steps, whichever the order in which the survivors see the deaths: in phase k the
 * allreduce is checked against the survivors of k deaths; a chip dies as it enters the phase
 * of its death; a collective that fails on a death or a revocation makes the survivor shrink
 * (again after a PX_EPEERDEAD: a death during the shrink), and the result's size says the
 * phase it is in. Ends with the survivors of 2 deaths checked.
 */
static px_status tk_steps(px_comm **c, double *x, int me)
{
    int done = -1; /* the last phase checked */

    for (int turn = 0; turn < 16; turn++) {
        int k = tk_phase(*c), shrinks = 0;
        px_status st;
        px_comm *nc;

        if (done == 2)
            return PX_OK;
        if (done >= 0 && (tk_dead(done + 1) & ~tk_dead(done) & ~(g_during ? 1ull << (g_chips + 2)
                                                                             : 0)) >> me & 1)
            _exit(9); /* its death: as it enters the next phase */
        if (k >= 0 && k > done) {
            if ((st = tk_sum(*c, x, me, tk_dead(k))) == PX_OK) {
                done = k;
                continue;
            }
        } else {
            st = px_comm_allreduce(*c, x + TK_MARK, TK_COUNT, PX_F64, PX_OP_SUM);
            if (st == PX_OK)
                continue; /* the death is not seen yet */
        }
        if (st != PX_EPEERDEAD && st != PX_EREVOKED)
            return st;
        while ((st = px_comm_shrink(*c, &nc)) == PX_EPEERDEAD && ++shrinks < TK_TRIES)
            ; /* a death during the shrink: every survivor retries alike */
        if (st != PX_OK)
            return px_set_error(st, "host %d chip %d: px_comm_shrink: %s", g_host,
                                px_chip_index(), px_last_error());
        *c = nc;
    }
    return px_set_error(PX_EIO, "host %d chip %d: the survivors did not end with %d ranks (%d "
                        "now)", g_host, px_chip_index(),
                        2 * g_chips - __builtin_popcountll(tk_dead(2)), px_comm_size(*c));
}

/* 1 when msg names the revocation by rank 0 (or a peer's collective call that saw it). */
static int tk_revoked_by_0(const char *msg)
{
    return strstr(msg, "revoked by rank 0") != NULL ||
           strstr(msg, "failed with PX_EREVOKED") != NULL;
}

static px_status tk_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, 0);
    int me = g_host * g_chips + px_chip_index();
    double *x = c != NULL ? px_comm_buffer(c, "x", NULL) : NULL, t0;
    px_status st;

    (void)ctx;
    if (x == NULL)
        return PX_EINVAL;
    for (int i = 0; i < TK_MARK; i++)
        x[i] = 1000.0 * me + i;
    if ((st = px_comm_barrier(c)) != PX_OK || (st = tk_steps(&c, x, me)) != PX_OK)
        return st;
    /* every survivor checked the last generation; rank 0 revokes it once every one is here
     * (a barrier that ends with that revocation is as good), then every one's barrier must
     * end with PX_EREVOKED naming it, on both hosts, quickly */
    t0 = tk_now();
    st = px_comm_barrier(c);
    if (st != PX_OK && !(st == PX_EREVOKED && tk_revoked_by_0(px_last_error())))
        return st;
    if (px_comm_rank(c) == 0 && px_comm_revoke(c) != PX_OK)
        return PX_EIO;
    st = px_comm_barrier(c);
    if (st == PX_EREVOKED && tk_revoked_by_0(px_last_error()) && tk_now() - t0 < TK_QUICK_S)
        return PX_OK;
    return px_set_error(PX_EIO, "host %d chip %d: the revoked generation's barrier ended with "
                        "%s after %.2f s, not PX_EREVOKED naming rank 0 within %.0f s: %s",
                        g_host, px_chip_index(), px_status_name(st), tk_now() - t0,
                        TK_QUICK_S, px_last_error());
}

static px_status tk_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    (void)user;
    return px_submit(o, k_step, &a, NULL);
}

static px_status tk_orch(px_orch *o, const px_task_args *args, void *user)
{
    int chips[64], n = 0, hosts = *(int *)user;
    px_domain_buffer b = {"x", TK_BYTES};
    px_domain_spec s = PX_DOMAIN_SPEC_INIT;
    px_domain *d;
    px_status st;

    (void)args;
    for (int g = 0; g < hosts * g_chips; g++)
        chips[n++] = px_chip_global(g / g_chips, g % g_chips);
    s.name = "ks";
    s.chips = chips;
    s.nchips = n;
    s.window_bytes = TK_BYTES;
    s.buffers = &b;
    s.nbuffers = 1;
    s.nsignals = 1;
    if ((st = px_domain_alloc(o, &s, &d)) != PX_OK)
        return st;
    st = px_submit_domain_task_resilient(o, d, c_step, NULL, NULL);
    (void)px_domain_release(d); /* freed once its task is done */
    return st;
}

int main(int argc, char **argv)
{
    const char *hr = getenv("OMPI_COMM_WORLD_RANK");
    const char *mode = argc > 2 ? argv[2] : "kernel";
    px_config c;
    px_worker *w = NULL;
    int hosts = 0;
    px_status st;

    g_chips = argc > 1 ? atoi(argv[1]) : 3;
    g_host = hr != NULL ? atoi(hr) : 0; /* before the fork, so the chips see it */
    g_during = strcmp(mode, "during1") == 0 ? 1 : strcmp(mode, "during2") == 0 ? 2 : 0;
    g_pair = strcmp(mode, "pair") == 0;
    if (g_chips < 3 || g_chips > 8 ||
        (strcmp(mode, "kernel") != 0 && g_during == 0 && !g_pair)) {
        printf("FAIL: usage: test_mpi_kshrink CHIPS(3..8) kernel|during1|during2|pair\n");
        return 1;
    }
    if (g_during != 0 && g_host == 1) { /* chip 2 of host 1, inside the first shrink */
        char v[16];

        snprintf(v, sizeof(v), "2:%d", g_during);
        setenv("PX_TEST_COMM_SHRINK_EXIT", v, 1);
    }
    px_config_default(&c);
    c.level = 3;
    c.chips = g_chips;
    c.cores = 1;
    c.device_mem = 16ull << 20;
    c.heap_ring = 4ull << 20;
    if ((st = px_worker_create(&c, &w)) == PX_OK &&
        (st = px_kernel_register(w, "tk.step", tk_kernel, NULL, &k_step)) == PX_OK &&
        (st = px_callable_register(w, "tk.step", tk_callable, &c_step)) == PX_OK &&
        (st = px_worker_init(w)) == PX_OK) {
        hosts = px_worker_hosts(w);
        st = hosts == 2 ? px_run(w, tk_orch, NULL, &hosts)
                        : px_set_error(PX_EINVAL, "run it under mpirun -np 2");
    }
    if (st != PX_OK) {
        printf("host %d: FAIL: %s: %s\n", g_host, px_status_name(st), px_last_error());
        px_worker_destroy(w);
        return 1;
    }
    printf("host %d of %d: %d ranks shrunk in their kernels to %d, then %d (%s), windows "
           "carried, each allreduce bit for bit the rank-order fold; the last generation's "
           "revoke seen on every host\nPASS\n", g_host, hosts, 2 * g_chips,
           2 * g_chips - __builtin_popcountll(tk_dead(1)),
           2 * g_chips - __builtin_popcountll(tk_dead(2)),
           g_pair ? "chip 1 of host 1 and chip 2 of host 0 died at once, then chip 0 of host 0"
           : g_during == 0 ? "chip 1 of host 1 died, then chip 0 of host 0"
                         : g_during == 1 ? "chip 1 of host 1 died, chip 2 of host 1 in the first "
                                           "shrink after its proposal, then chip 0 of host 0"
                                         : "chip 1 of host 1 died, chip 2 of host 1 in the first "
                                           "shrink after it was ready, then chip 0 of host 0");
    px_worker_destroy(w);
    return 0;
}
