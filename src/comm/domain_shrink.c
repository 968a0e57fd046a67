/*
 * domain_shrink.c - revoking a domain in the orchestration's name (px_domain_revoke) and
 * shrinking it to its survivors (px_domain_shrink): revoke, wait for what still runs on it,
 * agree on the dead (on one host: one snapshot of the deaths board; across hosts: the hosts'
 * agreement through the proxies, domain_xshrink.c), and allocate the successor, which
 * carries the survivors' window bytes.
 */
#include "comm/domain_internal.h"

#include <stdio.h>
#include <string.h>

#include "dfx/emit.h"
#include "runtime/runtime.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/util.h"

/* Revokes d in the orchestration's name (the first revoker's word stays), and every
 * communicator its members' kernel-side shrinks made from it. Returns 1 when d was not
 * revoked before. */
static int comm_revoke_orch(px_domain *d)
{
    uint32_t zero = 0;
    int first = atomic_compare_exchange_strong_explicit(comm_revoke_word(d), &zero,
                                                        COMM_REVOKED_ORCH, memory_order_acq_rel,
                                                        memory_order_acquire);

    atomic_store_explicit(&comm_board_agree(d->cw->bells, d->msg.revoke_slot)->orch, 1,
                          memory_order_release);
    return first;
}

px_status px_domain_revoke(px_domain *d)
{
    px_status st = comm_check_handle(d, "px_domain_revoke");

    if (st != PX_OK)
        return st;
    d->dfx_revoke_t = px_dfx_now();
    d->dfx_revoke_first = comm_revoke_orch(d);
    d->dfx_revoke_run = d->cw->run + 1;
    /* spanning hosts: this worker's MPI proxy tells the other hosts' (comm/proxy/notices.c) */
    PX_LOG_INFO("comm[%s]: revoked by the orchestration%s", d->msg.name,
                d->hosts != NULL ? " (told to the other hosts through the MPI proxies)" : "");
    return PX_OK;
}

/* The members of d that the deaths board shows dead (one snapshot of its word): their old
 * ranks into ex (returns how many) and the survivors' chips into keep (*nkeep). */
static int comm_agree_excluded(const px_domain *d, const hier_deaths *b, int *ex, int *keep,
                               int *nkeep)
{
    uint64_t mask = b != NULL ? atomic_load_explicit(&b->mask, memory_order_acquire) : 0;
    int nex = 0;

    *nkeep = 0;
    for (int r = 0; r < d->msg.n; r++) {
        int c = d->chips[r];

        if (c >= 0 && c < HIER_DEATHS_MAX && (mask >> c & 1))
            ex[nex++] = r;
        else
            keep[(*nkeep)++] = c;
    }
    return nex;
}

/* 1 when a chip of keep (n) is on the deaths board now. */
static int comm_any_died(const hier_deaths *b, const int *keep, int n, int *chip)
{
    uint64_t mask = b != NULL ? atomic_load_explicit(&b->mask, memory_order_acquire) : 0;

    for (int i = 0; i < n; i++)
        if (keep[i] >= 0 && keep[i] < HIER_DEATHS_MAX && (mask >> keep[i] & 1))
            return *chip = keep[i], 1;
    return 0;
}

/* Logs the agreement: who was excluded and why (the board's words), once, at warn. */
static void comm_log_shrink(const px_domain *d, const hier_deaths *b, const int *ex, int nex,
                            int survivors)
{
    for (int i = 0; i < nex; i++)
        if (d->hosts != NULL)
            PX_LOG_WARN("comm[%s]: shrink: rank %d (chip %d of host %d) excluded: %s",
                        d->msg.name, ex[i], d->chips[ex[i]], d->hosts[ex[i]],
                        comm_xshrink_why(d, b, ex[i]));
        else
            PX_LOG_WARN("comm[%s]: shrink: rank %d (chip %d) excluded: %s", d->msg.name, ex[i],
                        d->chips[ex[i]], b->why[d->chips[ex[i]]]);
    PX_LOG_INFO("comm[%s]: shrink: %d survivors agreed%s, generation %d -> %d", d->msg.name,
                survivors, d->hosts != NULL ? " by every host" : "", d->generation,
                d->generation + 1);
}

/* The members to exclude: their old ranks into ex (*nex of them), the survivors' chips
 * (global ones across hosts) into keep (*nkeep). PX_EINVAL when none survives. */
static px_status comm_shrink_agree(px_domain *d, const hier_deaths *b, uint64_t deadline,
                                   int *ex, int *nex, int *keep, int *nkeep)
{
    px_status st;

    if (d->hosts == NULL)
        *nex = comm_agree_excluded(d, b, ex, keep, nkeep);
    else if ((st = comm_xshrink_agree(d, b, deadline, ex, nex, keep, nkeep)) != PX_OK)
        return st;
    if (*nkeep == 0)
        return px_set_error(PX_EINVAL, "px_domain_shrink: domain \"%s\": every one of its %d "
                            "members is dead; nothing to shrink to", d->msg.name, d->msg.n);
    return PX_OK;
}

/* After nd was made: PX_EPEERDEAD (nd released) when a survivor died meanwhile, so the
 * agreement is off (across hosts: as any host knows it, on every host alike). */
static px_status comm_shrink_confirm(px_domain *d, px_domain *nd, const hier_deaths *b,
                                     uint64_t deadline, const int *ex, int nex,
                                     const int *keep, int nkeep)
{
    char msg[PX_ERRMSG_MAX];
    px_status st = PX_OK;
    int died;

    if (d->hosts != NULL)
        st = comm_xshrink_confirm(d, b, deadline, ex, nex);
    else if (comm_any_died(b, keep, nkeep, &died))
        st = px_set_error(PX_EPEERDEAD, "px_domain_shrink: domain \"%s\": chip %d died "
                          "during the shrink (%s); the survivors did not agree: call "
                          "px_domain_shrink again", d->msg.name, died, b->why[died]);
    if (st != PX_OK) {
        snprintf(msg, sizeof(msg), "%s", px_last_error());
        (void)px_domain_release(nd);
        px_set_error(st, "%s", msg);
    }
    return st;
}

/* The checks of px_domain_shrink's arguments; *w: the orchestration's worker. */
static px_status comm_shrink_check(px_orch *o, px_domain *d, px_domain **out, px_worker **w)
{
    px_status st;

    if (out == NULL)
        return px_set_error(PX_EINVAL, "px_domain_shrink: the output is NULL");
    if ((st = comm_check_handle(d, "px_domain_shrink")) != PX_OK ||
        (st = hier_orch_worker(o, "px_domain_shrink", w)) != PX_OK)
        return st;
    if (d->cw->w != *w)
        return px_set_error(PX_EINVAL, "px_domain_shrink: domain \"%s\" belongs to another "
                            "worker", d->msg.name);
    if (d->shrunk)
        return px_set_error(PX_ESTATE, "px_domain_shrink: domain \"%s\" (generation %d) was "
                            "shrunk already: shrink the domain that shrink returned",
                            d->msg.name, d->generation);
    return PX_OK;
}

/* The spec of d's successor: d's name, buffers (into bufs) and sizes, the chips keep (n). */
static void comm_shrink_spec(const px_domain *d, int *keep, int n, px_domain_buffer *bufs,
                             px_domain_spec *s)
{
    for (int i = 0; i < d->msg.nbuffers; i++)
        bufs[i] = (px_domain_buffer){d->msg.buffers[i].name, d->msg.buffers[i].bytes};
    s->name = d->msg.name;
    s->chips = keep;
    s->nchips = n;
    s->window_bytes = d->msg.data_bytes;
    s->buffers = bufs;
    s->nbuffers = d->msg.nbuffers;
    s->nsignals = (int)d->msg.nsig;
    s->need_peer_ptr = d->need_peer_ptr;
}

/* Records on nd what the shrink from d did (the excluded ranks ex (nex), how long it took
 * since t0, the DFX times dt[0..2] and this end; first: it revoked d first) and marks d
 * shrunk. */
static void comm_shrink_done(px_domain *nd, px_domain *d, const int *ex, int nex, uint64_t t0,
                             uint64_t *dt, int first)
{
    nd->nexcluded = nex;
    memcpy(nd->excluded, ex, (size_t)nex * sizeof(int));
    nd->shrink_us = (double)(px_now_ns() - t0) / 1e3;
    nd->from = d;
    dt[3] = px_dfx_now();
    memcpy(nd->dfx_t, dt, sizeof(nd->dfx_t));
    nd->dfx_first = first;
    nd->dfx_shrink_run = nd->cw->run + 1;
    atomic_store_explicit(comm_revoke_word(d), COMM_REVOKED_SHRUNK, memory_order_release);
    d->shrunk = 1;
}

px_status px_domain_shrink(px_orch *o, px_domain *d, px_domain **out)
{
    px_domain_buffer bufs[PX_COMM_MAX_BUFFERS];
    int ex[PX_COMM_MAX_RANKS], keep[PX_COMM_MAX_RANKS], nkeep = 0, nex = 0;
    px_domain_spec s = PX_DOMAIN_SPEC_INIT;
    const hier_deaths *b;
    uint64_t t0 = px_now_ns(), deadline, dt[4] = {px_dfx_now()};
    int first;
    px_domain *nd = NULL;
    char what[PX_COMM_NAME_MAX + 32];
    px_worker *w;
    px_status st;

    if ((st = comm_shrink_check(o, d, out, &w)) != PX_OK)
        return st;
    /* revoke first: what still runs on d fails at once, and nothing new starts on it */
    first = comm_revoke_orch(d);
    deadline = t0 + (uint64_t)(w->cfg.timeout_s * 1e9);
    snprintf(what, sizeof(what), "px_domain_shrink: domain \"%s\"", d->msg.name);
    /* then wait for what still runs: the tasks on d of this run, and the orphans on its
     * members of this host (the calls of a group task that a death failed, in this run or in
     * the failed one before it), which no task waits for. Only then may the new domain's
     * carry (comm_chip_carry) read d's windows: each orphan's completion has reached us
     * before we post comm.create, so on each chip its kernel's writes come before the carry
     * (each host waits for its own members: the carry copies each chip's own window). */
    if ((st = comm_pend_wait(d, deadline)) != PX_OK ||
        (st = hier_orphans_wait(w, d->mem, d->nmem, deadline, what)) != PX_OK)
        return st;
    b = hier_deaths_board(w);
    if ((st = comm_shrink_agree(d, b, deadline, ex, &nex, keep, &nkeep)) != PX_OK)
        return st;
    dt[1] = px_dfx_now();
    comm_shrink_spec(d, keep, nkeep, bufs, &s);
    if ((st = comm_alloc(o, &s, d, &nd)) != PX_OK)
        return st; /* a member that died during it: PX_EPEERDEAD, message naming it */
    /* died after its part: the agreement is off */
    if ((st = comm_shrink_confirm(d, nd, b, deadline, ex, nex, keep, nkeep)) != PX_OK)
        return st;
    dt[2] = px_dfx_now();
    comm_log_shrink(d, b, ex, nex, nkeep);
    comm_shrink_done(nd, d, ex, nex, t0, dt, first);
    *out = nd;
    return PX_OK;
}
