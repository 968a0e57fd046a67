/*
 * barrier.c - the barrier of a domain (px_comm_barrier, and every collective's): each rank
 * announces the epoch it enters in its slot at every peer, with the call's signature in the
 * high half, and waits for every peer's announcement of the same epoch; more than
 * COMM_BAR_FLAT_MAX ranks take a dissemination barrier (log2(n) rounds). A slot holding the
 * failure mark (signature.c) fails the wait at once with the failed peer's status.
 */
#include "comm/coll/coll_internal.h"

#include <stdio.h>

#include "util/clock.h"
#include "util/util.h"

typedef struct comm_bar_wait {
    _Atomic uint64_t *s;
    uint32_t e;
} comm_bar_wait;

/* A peer's slot is ready at epoch e or e + 1 (it passed e already: it cannot pass e + 1
 * without this rank), compared modulo 2^32, or when it holds the failure mark. */
static int comm_bar_ready(void *arg)
{
    comm_bar_wait *w = arg;
    uint64_t v = atomic_load_explicit(w->s, memory_order_acquire);

    return (v & COMM_BAR_FAILED) != 0 || (uint32_t)((uint32_t)v - w->e) <= 1;
}

/* A barrier of more ranks than this is a dissemination barrier (comm_barrier_flush). */
#define COMM_BAR_FLAT_MAX 64

/* After the wait for rank q's barrier e passed its deadline (v: q's slot then, t0: the
 * wait's start): blames the ranks that kept it waiting and says why, PX_ETIMEDOUT. */
static px_status comm_bar_timeout(px_comm *c, int q, uint64_t e, uint64_t v, uint64_t t0)
{
    int dissem = c->n > COMM_BAR_FLAT_MAX;
    char who[128];
    int blamed = 0;

    comm_peer_text(c, q, who, sizeof(who));
    /* the ranks that kept this barrier waiting are silent: the parent kills their chips,
     * so the rest of the group, the drain and the shutdown do not wait for them again */
    /* (a dissemination barrier waits on a few partners only, each of which may itself
     * wait on another: nobody can be told silent from here, so nobody is blamed) */
    for (int r = 0; !dissem && r < c->n; r++)
        if (comm_peer_behind(c, r))
            blamed |= comm_blame(c, r);
    return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %.3g s in %s (call "
                        "%llu) at barrier %llu for %s, which has not reached it (its last "
                        "barrier is %llu%s%s). A rank that skipped the call, or is still "
                        "busy: raise the deadline (PLEXUS_COMM_TIMEOUT_S, now %g s) only "
                        "if it is slow", c->name, c->rank,
                        (double)(px_now_ns() - t0) / 1e9, comm_coll_name(c->coll_kind),
                        (unsigned long long)(c->coll_seq - 1), (unsigned long long)e, who,
                        (unsigned long long)(uint32_t)v, comm_blamed_text(blamed),
                        dissem ? "; a barrier of more than 64 ranks waits on log2(n) "
                        "partners, so that rank may itself wait on another" : "",
                        c->timeout_s);
}

/* What rank q's slot v carries for barrier e once the wait is over: PX_OK, the failure its
 * mark names, or PX_EINVAL for another call's signature. */
static px_status comm_bar_check(px_comm *c, int q, uint64_t e, uint64_t v)
{
    char mine[96], theirs[96], dead[640] = "";

    if ((v & COMM_BAR_FAILED) != 0 && (uint32_t)((uint32_t)e - (uint32_t)v) - 1 >= 1u << 31)
        return PX_OK; /* it passed barrier e, then failed: e was announced */
    if ((v & COMM_BAR_FAILED) != 0) { /* the peer's status */
        px_status pst = (px_status)(int8_t)(uint8_t)(v >> 32);

        comm_sig_text(c->coll_sig, c, 1, mine, sizeof(mine));
        if (pst == PX_EINVAL) /* after the arguments' checks: only a mismatch it saw */
            return px_set_error(PX_EINVAL, "domain \"%s\": mismatched collectives: rank %d "
                                "called %s; rank %d found calls that do not match (its error "
                                "names both); every rank must call the same collectives with "
                                "the same count, dtype, op and root, in the same order",
                                c->name, c->rank, mine, q);
        if (pst == PX_EPEERDEAD)
            comm_dead_note(c, dead, sizeof(dead));
        return px_set_error(pst, "domain \"%s\" rank %d: %s failed because rank %d's "
                            "collective call of this domain failed with %s (its error says "
                            "why)%s", c->name, c->rank, mine, q, px_status_name(pst), dead);
    }
    if ((uint32_t)v == (uint32_t)e && (uint32_t)(v >> 32) != c->coll_sig) {
        comm_sig_text(c->coll_sig, c, 1, mine, sizeof(mine));
        comm_sig_text((uint32_t)(v >> 32), c, 0, theirs, sizeof(theirs));
        return px_set_error(PX_EINVAL, "domain \"%s\": mismatched collectives: rank %d "
                            "called %s, rank %d called %s; every rank must call the same "
                            "collectives with the same count, dtype, op and root, in the same "
                            "order", c->name, c->rank, mine, q, theirs);
    }
    return PX_OK;
}

/* Waits for rank q's barrier e and checks what it carries. */
static px_status comm_bar_wait_peer(px_comm *c, int q, uint64_t e)
{
    px_comm_area *a = c->area[c->rank];
    comm_bar_wait w = {comm_slot(a, c->n, (uint32_t)q), (uint32_t)e};
    uint64_t t0 = px_now_ns(), v;
    px_status st = comm_wait(c, comm_bar_ready, &w, &a->wake, &a->sleepers, 0);

    v = atomic_load_explicit(w.s, memory_order_acquire);
    if (st == PX_ETIMEDOUT)
        return comm_bar_timeout(c, q, e, v, t0);
    if (st != PX_OK)
        return st;
    return comm_bar_check(c, q, e, v);
}

px_status comm_barrier(px_comm *c)
{
    px_status st = comm_check_peer(c, c ? c->rank : 0, "px_comm_barrier");

    if (st == PX_OK && (st = comm_coll_begin(c, COMM_COLL_BARRIER, 0, 0, 0, 0)) == PX_OK)
        st = comm_coll_end(c, comm_barrier_flush(c, 1));
    return st;
}

px_status comm_barrier_flush(px_comm *c, int flush)
{
    uint64_t e;
    px_status st = comm_check_peer(c, c ? c->rank : 0, "px_comm_barrier");

    if (st != PX_OK)
        return st;
    /* every put posted before the barrier is in its target's window after it, for whoever
     * looks (a transport's signals alone order only what goes to the same target) */
    if (flush && (st = comm_flush_all(c)) != PX_OK)
        return st;
    e = ++c->epoch;
    if (c->n > COMM_BAR_FLAT_MAX) {
        /* Dissemination: in round k (distance d = 2^k) signal rank + d and wait for rank - d,
         * ceil(log2 n) rounds, so n log n signals in all, not n(n - 1) (at 1024 ranks over 16
         * hosts, 10 per rank in place of 1023, 960 of them through the MPI proxies). Each
         * source reaches a target in one round only (the distances differ modulo n), so its
         * slot there says the round as it says the barrier; the puts before it were flushed
         * first, and a rank leaves only once every rank has, through the rounds, entered. */
        for (int d = 1; d < c->n; d *= 2) {
            int to = (c->rank + d) % c->n, from = (c->rank + c->n - d) % c->n;

            if ((st = c->tl[to]->signal(c, to, (uint32_t)c->rank, PX_SIG_SET,
                                        (uint64_t)c->coll_sig << 32 | (uint32_t)e)) != PX_OK)
                return st;
            if ((st = comm_bar_wait_peer(c, from, e)) != PX_OK)
                return st;
        }
        c->epoch_done = e;
        return PX_OK;
    }
    for (int i = 1; i < c->n; i++) {
        int q = (c->rank + i) % c->n; /* not everybody at rank 0 first */

        st = c->tl[q]->signal(c, q, (uint32_t)c->rank, PX_SIG_SET,
                              (uint64_t)c->coll_sig << 32 | (uint32_t)e);
        if (st != PX_OK)
            return st;
    }
    for (int i = 1; i < c->n; i++)
        if ((st = comm_bar_wait_peer(c, (c->rank + c->n - i) % c->n, e)) != PX_OK)
            return st;
    c->epoch_done = e;
    return PX_OK;
}
