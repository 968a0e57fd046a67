/*
 * alltoall.c - px_comm_alltoall (in place, through scratch) and px_comm_alltoallv (from a send
 * buffer into a recv buffer, each rank publishing its send table in its own area's head).
 */
#include "comm/coll/coll_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dfx/records.h"
#include "util/util.h"

/* ---- alltoall ---- */

static px_status alltoall_impl(px_comm *c, void *buf, size_t count, px_dtype dt)
{
    size_t es = coll_esize(c, dt, 0, "px_comm_alltoall"), bytes, off, blk;
    char *tmp, *res;
    px_status st;

    if (es == 0)
        return PX_EINVAL;
    if ((st = coll_span(c, buf, count, (size_t)c->n, es, "px_comm_alltoall", &bytes, &off)) !=
        PX_OK)
        return st;
    c->last_algo = "pull";
    if (coll_enter(c, COMM_COLL_ALLTOALL, count, dt, 0, 0, &st))
        return st;
    blk = count * es;
    if ((res = coll_scratch(c, bytes, off, &tmp)) == NULL)
        return PX_ENOMEM;
    if ((st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    for (int q = 0; st == PX_OK && q < c->n; q++) /* q's block for me is its block `rank` */
        st = coll_pull(c, q, off + (size_t)c->rank * blk, res + (size_t)q * blk, blk);
    if (st == PX_OK)
        st = comm_barrier_flush(c, 0);
    if (st == PX_OK)
        memcpy(buf, res, bytes);
    return st;
}

/* Checks that count elements at element offset eoff of base stay inside the window. */
static px_status coll_v_range(px_comm *c, const void *base, size_t eoff, size_t count,
                              size_t es, const char *what, size_t *off)
{
    size_t b, n;

    if (__builtin_mul_overflow(eoff, es, &b) || __builtin_mul_overflow(count, es, &n) ||
        (uintptr_t)base + b < (uintptr_t)base)
        return px_set_error(PX_EINVAL, "px_comm_alltoallv: domain \"%s\": %s offset %zu or count "
                            "%zu overflows", c->name, what, eoff, count);
    return px_comm_offset(c, (const char *)base + b, n, off);
}

/* PX_OK when no block of send overlaps a block of recv (empty blocks overlap nothing). */
static px_status coll_v_disjoint(px_comm *c, const void *send, const size_t *sc,
                                 const size_t *so, const void *recv, const size_t *rc,
                                 const size_t *ro, size_t es)
{
    uintptr_t s0 = (uintptr_t)send, r0 = (uintptr_t)recv;

    for (int i = 0; i < c->n; i++) {
        uintptr_t slo = s0 + so[i] * es, shi = slo + sc[i] * es;

        for (int j = 0; j < c->n && sc[i] > 0; j++) {
            uintptr_t rlo = r0 + ro[j] * es, rhi = rlo + rc[j] * es;

            if (rc[j] > 0 && slo < rhi && rlo < shi)
                return px_set_error(PX_EINVAL, "px_comm_alltoallv: domain \"%s\" rank %d: the "
                                    "send block for rank %d overlaps the recv block from rank "
                                    "%d; send and recv must not overlap (use two buffers, or "
                                    "px_comm_alltoall in place)", c->name, c->rank, i, j);
        }
    }
    return PX_OK;
}

/* Checks alltoallv's blocks (es: the element size) and publishes this rank's send table in
 * its own area's head (where block j for rank j lies in the window, and its count), which the
 * peers read after the next barrier. */
static px_status coll_v_publish(px_comm *c, const void *send, const size_t *send_counts,
                                const size_t *send_offs, void *recv, const size_t *recv_counts,
                                const size_t *recv_offs, size_t es)
{
    px_comm_area *me;
    size_t off;
    px_status st;

    if (send == NULL || recv == NULL || send_counts == NULL || send_offs == NULL ||
        recv_counts == NULL || recv_offs == NULL)
        return px_set_error(PX_EINVAL, "px_comm_alltoallv: domain \"%s\": buffers, counts and "
                            "offsets are required", c->name);
    me = c->area[c->rank];
    for (int j = 0; j < c->n; j++) {
        if ((st = coll_v_range(c, recv, recv_offs[j], recv_counts[j], es, "recv", &off)) !=
            PX_OK ||
            (st = coll_v_range(c, send, send_offs[j], send_counts[j], es, "send", &off)) !=
            PX_OK)
            return st; /* off: where block j of send starts */
    }
    if ((st = coll_v_disjoint(c, send, send_counts, send_offs, recv, recv_counts, recv_offs,
                              es)) != PX_OK)
        return st;
    for (int j = 0; j < c->n; j++) {
        (void)coll_v_range(c, send, send_offs[j], send_counts[j], es, "send", &off);
        atomic_store_explicit(&comm_a2av(me, j)->off, off, memory_order_relaxed);
        atomic_store_explicit(&comm_a2av(me, j)->count, send_counts[j], memory_order_relaxed);
    }
    return PX_OK;
}

/* Rank q's entry for this rank in q's send table: where its block lies in q's window, and its
 * count (this rank's own: from its send_counts). */
static px_status coll_v_entry(px_comm *c, int q, const size_t *send_counts, uint64_t *qoff,
                              uint64_t *qcount)
{
    px_comm_area *me = c->area[c->rank];
    uint64_t e[2]; /* q's a2av entry for this rank: off, count */
    px_status st;

    if (q == c->rank) {
        *qoff = atomic_load_explicit(&comm_a2av(me, q)->off, memory_order_relaxed);
        *qcount = send_counts[q];
    } else if (c->area[q] != NULL) {
        *qoff = atomic_load_explicit(&comm_a2av(c->area[q], c->rank)->off,
                                     memory_order_relaxed);
        *qcount = atomic_load_explicit(&comm_a2av(c->area[q], c->rank)->count,
                                       memory_order_relaxed);
    } else {
        st = c->tl[q]->get_head(c, q, sizeof(px_comm_area) + (size_t)c->rank * sizeof(e), e,
                                sizeof(e));
        if (st != PX_OK)
            return st;
        *qoff = e[0];
        *qcount = e[1];
    }
    return PX_OK;
}

/* Pulls every rank's block for this rank into recv. A count that differs from recv_counts
 * sets *bad and msg (the first one) and its block is skipped: the pulls and the barriers go
 * on, so the ranks stay in step. */
static px_status coll_v_pull(px_comm *c, const size_t *send_counts, void *recv,
                             const size_t *recv_counts, const size_t *recv_offs, size_t es,
                             px_status *bad, char *msg, size_t msg_n)
{
    px_status st = PX_OK;

    for (int i = 0; i < c->n; i++) {
        int q = (c->rank + i) % c->n;
        uint64_t qoff, qcount;

        if ((st = coll_v_entry(c, q, send_counts, &qoff, &qcount)) != PX_OK)
            break;
        if (qcount != recv_counts[q]) {
            if (*bad == PX_OK)
                snprintf(msg, msg_n, "rank %d sends %llu elements to rank %d, which "
                         "expects %zu", q, (unsigned long long)qcount, c->rank, recv_counts[q]);
            *bad = PX_EINVAL;
            continue; /* keep in step with the others: the barriers still come */
        }
        st = coll_pull(c, q, qoff, (char *)recv + recv_offs[q] * es, qcount * es);
        if (st != PX_OK)
            break;
    }
    return st;
}

static px_status alltoallv_impl(px_comm *c, const void *send, const size_t *send_counts,
                                const size_t *send_offs, void *recv, const size_t *recv_counts,
                                const size_t *recv_offs, px_dtype dt)
{
    size_t es = coll_esize(c, dt, 0, "px_comm_alltoallv");
    px_status st = PX_OK, bad = PX_OK;
    char msg[256] = "";

    if (es == 0)
        return PX_EINVAL;
    if ((st = coll_v_publish(c, send, send_counts, send_offs, recv, recv_counts, recv_offs,
                             es)) != PX_OK)
        return st;
    c->last_algo = "pull";
    if (c->n > 1 && (st = comm_coll_begin(c, COMM_COLL_ALLTOALLV, 0, dt, 0, 0)) != PX_OK)
        return st;
    if ((st = comm_barrier_flush(c, 0)) != PX_OK) /* the barrier's release publishes the table */
        return st;
    st = coll_v_pull(c, send_counts, recv, recv_counts, recv_offs, es, &bad, msg, sizeof(msg));
    if (st == PX_OK)
        st = comm_barrier_flush(c, 0);
    if (st == PX_OK && bad != PX_OK) {
        c->in_coll = 0; /* every barrier passed: the domain stays in step, only this rank's
                         * counts were wrong (the others' calls returned PX_OK) */
        st = px_set_error(bad, "px_comm_alltoallv: domain \"%s\": %s; every rank's recv_counts[j] "
                          "must equal rank j's send_counts for it", c->name, msg);
    }
    return st;
}

/* ---- the public calls: the work above, plus a DFX span when recorded ---- */

px_status px_comm_alltoall(px_comm *c, void *buf, size_t count, px_dtype dt)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_ALLTOALL, -1, count * px_dtype_size(dt), t0,
                        comm_coll_end(c, alltoall_impl(c, buf, count, dt)));
}

px_status px_comm_alltoallv(px_comm *c, const void *send, const size_t *send_counts,
                            const size_t *send_offs, void *recv, const size_t *recv_counts,
                            const size_t *recv_offs, px_dtype dt)
{
    uint64_t t0 = comm_dfx_t0();
    px_status st = comm_coll_end(c, alltoallv_impl(c, send, send_counts, send_offs, recv,
                                                   recv_counts, recv_offs, dt));
    size_t n = 0;

    for (int j = 0; t0 != 0 && st == PX_OK && j < c->n; j++)
        n += send_counts[j] * px_dtype_size(dt);
    if (t0 != 0 && st == PX_OK)
        comm_dfx_span(c, PX_DFX_COMM_ALLTOALLV, -1, n, t0);
    return st;
}
