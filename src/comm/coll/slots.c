/*
 * slots.c - the collective slots (comm.h, "Collective slots"): the per-segment signals of the
 * collectives across sites, each pair counting its own sequence, waited for with the domain's
 * deadline and failing at once on a peer's failure mark.
 */
#include "comm/coll/coll_internal.h"

#include "util/clock.h"
#include "util/util.h"

typedef struct comm_cwait {
    _Atomic uint64_t *s, *bar; /* the collective slot of the source, its barrier slot */
    uint64_t v;
} comm_cwait;

static int comm_cwait_ready(void *arg)
{
    comm_cwait *w = arg;

    return atomic_load_explicit(w->s, memory_order_acquire) >= w->v ||
           (atomic_load_explicit(w->bar, memory_order_acquire) & COMM_BAR_FAILED) != 0;
}

px_status comm_coll_wait(px_comm *c, int src, const char *what)
{
    px_comm_area *a = c->area[c->rank];
    comm_cwait w = {comm_slot(a, c->n, PX_COMM_SLOT_COLL(c->n, c->nsig, src)),
                    comm_slot(a, c->n, (uint32_t)src), c->cseq_in[src] + 1};
    uint64_t t0 = px_now_ns(), bar;
    px_status st = comm_wait(c, comm_cwait_ready, &w, &a->wake, &a->sleepers, 0);
    char who[128], mine[96];
    int blamed;

    if (st == PX_OK && atomic_load_explicit(w.s, memory_order_acquire) >= w.v) {
        c->cseq_in[src]++;
        return PX_OK;
    }
    if (st != PX_OK && st != PX_ETIMEDOUT)
        return st; /* a death or a revocation: its own error says so (not a timeout) */
    /* a stopped source is named silent, as a barrier names it: the parent kills its chip */
    blamed = comm_peer_text(c, src, who, sizeof(who)) == 'T' && comm_blame(c, src);
    comm_sig_text(c->coll_sig, c, 1, mine, sizeof(mine));
    bar = atomic_load_explicit(w.bar, memory_order_acquire);
    if ((bar & COMM_BAR_FAILED) != 0) {
        px_status pst = (px_status)(int8_t)(uint8_t)(bar >> 32);
        char dead[640] = "";

        if (pst == PX_EPEERDEAD)
            comm_dead_note(c, dead, sizeof(dead));
        return px_set_error(pst, "domain \"%s\" rank %d: %s failed because rank %d's "
                            "collective call of this domain failed with %s (its error says "
                            "why)%s", c->name, c->rank, mine, src, px_status_name(pst), dead);
    }
    return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %.3g s in %s for %s "
                        "from %s (its signal %llu%s). A rank still busy, or stopped: raise the "
                        "deadline (PLEXUS_COMM_TIMEOUT_S, now %g s) only if it is slow",
                        c->name, c->rank, (double)(px_now_ns() - t0) / 1e9, mine, what, who,
                        (unsigned long long)w.v, comm_blamed_text(blamed), c->timeout_s);
}

px_status comm_coll_put_signal(px_comm *c, int q, size_t off, const void *src, size_t n)
{
    uint32_t slot = PX_COMM_SLOT_COLL(c->n, c->nsig, c->rank);
    uint64_t v = c->cseq_out[q] + 1;
    px_status st;

    if (c->tl[q]->put_signal != NULL)
        st = c->tl[q]->put_signal(c, q, off, src, n, slot, PX_SIG_SET, v);
    else if ((st = c->tl[q]->put(c, q, off, src, n)) == PX_OK)
        st = c->tl[q]->signal(c, q, slot, PX_SIG_SET, v);
    if (st == PX_OK)
        c->cseq_out[q] = v;
    return st;
}
