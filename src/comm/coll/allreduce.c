/*
 * allreduce.c - px_comm_allreduce and px_comm_reduce_scatter: the choice of an algorithm from
 * the domain's agreed data (so every rank takes the same), the one-shots (through the slots,
 * from every rank's buffer, or pushed), reduce-scatter + allgather (rs_ag), and the pair whose
 * proxies carry the whole call. The chain across sites is sites.c; coll_internal.h gives the
 * algorithms' overview.
 */
#include "comm/coll/coll_internal.h"
#include "comm/transport/staged.h"
#include "util/tl_list.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dfx/records.h"
#include "util/util.h"

/* ---- allreduce ---- */

static px_status coll_allreduce_oneshot(px_comm *c, char *buf, size_t off, size_t count,
                                        size_t es, px_dtype dt, px_redop op)
{
    char *tmp, *res = coll_scratch(c, count * es, off, &tmp);
    px_status st;

    c->last_algo = "oneshot_large";
    if (res == NULL)
        return PX_ENOMEM;
    if ((st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    st = coll_reduce_range(c, off, 0, count, es, dt, op, res, tmp);
    if (st == PX_OK)
        st = comm_barrier_flush(c, 0);
    if (st == PX_OK)
        memcpy(buf, res, count * es);
    return st;
}

/* One-shot through the slots: copy in, one barrier, reduce every rank's slot into buf. */
static px_status coll_allreduce_slots(px_comm *c, char *buf, size_t count, size_t es,
                                      px_dtype dt, px_redop op)
{
    size_t slot = c->data_bytes + (size_t)(c->small_seq++ & 1) * PX_COMM_SLOT_BYTES;
    char *tmp;
    px_status st;

    c->last_algo = "oneshot";
    if (coll_scratch(c, 0, 0, &tmp) == NULL)
        return PX_ENOMEM;
    memcpy(c->data[c->rank] + slot, buf, count * es);
    if ((st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    /* Peers read only the slots, so the result goes straight into buf. */
    return coll_reduce_range(c, slot, 0, count, es, dt, op, buf, tmp);
}

/*
 * One-shot by pushing, for domains with staged peers (a pull there is a round trip per peer):
 * every rank puts its input into every rank's slot of the call's parity at its own place
 * (rank r at r x bytes: n x bytes must fit the slot), one barrier (which carries the puts out
 * first), then every rank reduces its own slot in rank order into buf. The parity argument of
 * the pull one-shot holds unchanged: a slot is written again only two calls later, after a
 * barrier its owner enters once it has read it.
 */
static px_status coll_allreduce_push(px_comm *c, char *buf, size_t count, size_t es,
                                     px_dtype dt, px_redop op)
{
    size_t bytes = count * es;
    size_t slot = c->data_bytes + (size_t)(c->small_seq++ & 1) * PX_COMM_SLOT_BYTES;
    char *mine = c->data[c->rank] + slot;
    px_status st = PX_OK;

    c->last_algo = "oneshot";
    memcpy(mine + (size_t)c->rank * bytes, buf, bytes);
    for (int i = 1; i < c->n && st == PX_OK; i++) {
        int q = (c->rank + i) % c->n;

        st = c->tl[q]->put(c, q, slot + (size_t)c->rank * bytes, buf, bytes);
    }
    if (st == PX_OK)
        st = comm_barrier_flush(c, 0);
    if (st != PX_OK)
        return st;
    memcpy(buf, mine, bytes);
    for (int q = 1; q < c->n; q++)
        comm_reduce(buf, mine + (size_t)q * bytes, count, dt, op);
    return PX_OK;
}
/*
 * rs_ag where every peer's bytes are mapped (all_in_place): chunk r of every rank is read by
 * rank r alone, so rank r folds it block by block in a cache-sized accumulator (rank order)
 * and writes each block straight into chunk r of every rank, its own included, with no
 * barrier between the reduction and the writes and no result buffer: per rank each byte of
 * its chunk is read once from every rank and written once to every rank (rs_ag through a
 * result buffer reads and writes it twice more).
 */
static px_status coll_allreduce_rs_ag_mapped(px_comm *c, size_t off, size_t count, size_t es,
                                             px_dtype dt, px_redop op)
{
    size_t lo, hi, blk = COLL_BLOCK_BYTES / es;
    char *acc, *unused;
    px_status st;

    c->last_algo = "rs_ag";
    coll_chunk(count, c->n, c->rank, &lo, &hi);
    if ((acc = coll_scratch(c, PX_MIN(blk, hi - lo) * es, off + lo * es, &unused)) == NULL)
        return PX_ENOMEM;
    if ((st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    for (size_t b = lo; b < hi; b += blk) {
        size_t m = PX_MIN(blk, hi - b), nb = m * es, at = off + b * es;

        for (int q = 0; q < c->n; q++) {
            const char *s = q == c->rank ? c->data[q] + at : c->tl[q]->peer_ptr(c, q, at);

            if (s == NULL || (q != c->rank && c->tl[q]->peer_ptr(c, q, at + nb - 1) == NULL))
                return px_set_error(PX_EINVAL, "domain \"%s\": rank %d's bytes [%zu, %zu) are "
                                    "not mapped although its pair reads in place (a defect)",
                                    c->name, q, at, at + nb);
            if (q == 0)
                memcpy(acc, s, nb);
            else
                comm_reduce(acc, s, m, dt, op);
        }
        for (int i = 0; i < c->n; i++) {
            int q = (c->rank + i) % c->n;

            memcpy(q == c->rank ? c->data[q] + at : c->tl[q]->peer_ptr(c, q, at), acc, nb);
        }
    }
    return comm_barrier_flush(c, 1); /* every chunk has arrived everywhere */
}

static px_status coll_allreduce_rs_ag(px_comm *c, char *buf, size_t off, size_t count,
                                      size_t es, px_dtype dt, px_redop op)
{
    size_t lo, hi;
    char *tmp, *res;
    px_status st;

    if (c->all_in_place)
        return coll_allreduce_rs_ag_mapped(c, off, count, es, dt, op);
    c->last_algo = "rs_ag";
    coll_chunk(count, c->n, c->rank, &lo, &hi);
    if ((res = coll_scratch(c, (hi - lo) * es, off + lo * es, &tmp)) == NULL)
        return PX_ENOMEM;
    if ((st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    /* chunk r of every rank is read by rank r alone (here, done when the fold returns): its
     * result may go into every rank's chunk r at once, with no barrier in between */
    st = coll_reduce_range(c, off, lo, hi, es, dt, op, res, tmp);
    for (int i = 0; st == PX_OK && i < c->n; i++) {
        int q = (c->rank + i) % c->n;

        if (q == c->rank)
            memcpy(buf + lo * es, res, (hi - lo) * es);
        else if (hi > lo)
            st = c->tl[q]->put(c, q, off + lo * es, res, (hi - lo) * es);
    }
    if (st == PX_OK)
        st = comm_barrier_flush(c, 1); /* every chunk has arrived everywhere */
    return st;
}


/*
 * Two ranks whose pair is mpi: the proxies carry the whole allreduce (the row's pair_coll,
 * comm/proxy/pcoll.c; a reduce_scatter is its first half, flags COMM_STG_COLL_RS): this rank posts
 * one request and waits; its proxy and the peer's exchange a
 * hello, then the halves (or, small, the whole buffers), fold them in rank order (rank 0's
 * element first) and swap the results, straight from and into the windows. One request here
 * in place of the barriers and the ring's chunks of rs_ag, each a round trip between hosts.
 * Both ranks take it or neither (the pair table), and the bits are rs_ag's.
 */
static px_status coll_proxied(px_comm *c, size_t off, size_t bytes, px_dtype dt, px_redop op,
                              uint64_t flags)
{
    int peer = 1 - c->rank;
    comm_stg_ans a;
    px_status st;

    c->last_algo = "proxy";
    st = c->tl[peer]->pair_coll(c, peer, off, bytes,
                                COMM_STG_COLL_CODE(c->coll_sig, dt, op) | flags, &a);
    if (st != PX_OK || a.status == PX_OK)
        return st;
    if (a.status == PX_EINVAL)
        return comm_coll_mismatch(c, peer, (uint32_t)a.peer_code);
    return px_set_error((px_status)a.status, "domain \"%s\" rank %d: the MPI proxies could not "
                        "carry out this collective (%s; the proxy's log line says why)",
                        c->name, c->rank, px_status_name((px_status)a.status));
}

/* 1 when the transport carries c's reductions (coll_proxied): two ranks, their pair on a
 * transport with pair_coll (mpi; the pair table's, so both ranks agree), of the domain itself
 * (the proxies' pair collectives know the domain's own ranks: a kernel generation, which
 * every member has alike, takes the one-sided algorithms). */
static int coll_pair_proxied(const px_comm *c)
{
    return c->n == 2 && c->kgen == 0 && c->tl[1 - c->rank]->pair_coll != NULL;
}

static px_status allreduce_impl(px_comm *c, void *buf, size_t count, px_dtype dt, px_redop op)
{
    size_t es = coll_esize(c, dt, 1, "px_comm_allreduce"), bytes, off;
    int few, oneshot;
    px_status st;

    if (es == 0)
        return PX_EINVAL;
    if ((st = coll_check_op(c, op, buf, es, "px_comm_allreduce")) != PX_OK ||
        (st = coll_span(c, buf, count, 1, es, "px_comm_allreduce", &bytes, &off)) != PX_OK)
        return st;
    c->last_algo = "local"; /* one rank or nothing to reduce (still checked: coll_enter) */
    if (coll_enter(c, COMM_COLL_ALLREDUCE, count, dt, op, 0, &st))
        return st;
    /* From the domain's pair table, so every rank takes the same algorithm. Where some pair
     * does not read in place, a one-shot above the push's sizes pulls every peer's whole
     * buffer through the transport's requests (each rank n - 1 of them), which costs 3 to 5
     * times reduce-scatter + allgather at 32 and 64 KiB over 4 staged ranks (each rank pulls
     * 1/n of every peer's): so only direct domains take the slots and the one-shot there. */
    if (coll_pair_proxied(c))
        return coll_proxied(c, off, bytes, dt, op, 0);
    few = count < (size_t)c->n; /* reduce-scatter needs an element per rank */
    oneshot = bytes <= c->oneshot_max || few;
    if (!c->all_in_place && oneshot && bytes <= PX_COMM_SLOT_BYTES / (size_t)c->n)
        return coll_allreduce_push(c, buf, count, es, dt, op);
    if (c->nsites > 1 && !few && coll_site_min(c) > 1)
        return coll_allreduce_hier(c, buf, off, count, es, dt, op);
    if (!(c->all_in_place || few) || !oneshot)
        return coll_allreduce_rs_ag(c, buf, off, count, es, dt, op);
    if (bytes <= PX_COMM_SLOT_BYTES)
        return coll_allreduce_slots(c, buf, count, es, dt, op);
    return coll_allreduce_oneshot(c, buf, off, count, es, dt, op);
}

static px_status reduce_scatter_impl(px_comm *c, void *buf, size_t count, px_dtype dt, px_redop op)
{
    size_t es = coll_esize(c, dt, 1, "px_comm_reduce_scatter"), bytes, off, blk;
    char *tmp, *res;
    px_status st;

    if (es == 0)
        return PX_EINVAL;
    if ((st = coll_check_op(c, op, buf, es, "px_comm_reduce_scatter")) != PX_OK ||
        (st = coll_span(c, buf, count, (size_t)c->n, es, "px_comm_reduce_scatter", &bytes, &off)) !=
            PX_OK)
        return st;
    c->last_algo = "pull";
    if (coll_enter(c, COMM_COLL_REDUCE_SCATTER, count, dt, op, 0, &st))
        return st;
    if (coll_pair_proxied(c)) /* the halves are the blocks */
        return coll_proxied(c, off, bytes, dt, op, COMM_STG_COLL_RS);
    blk = (size_t)c->rank * count;
    if ((res = coll_scratch(c, count * es, off + blk * es, &tmp)) == NULL)
        return PX_ENOMEM;
    if ((st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    st = coll_reduce_range(c, off, blk, blk + count, es, dt, op, res, tmp);
    if (st == PX_OK)
        st = comm_barrier_flush(c, 0);
    if (st == PX_OK)
        memcpy((char *)buf + blk * es, res, count * es);
    return st;
}

/* ---- the public calls: the work above, plus a DFX span when recorded ---- */

px_status px_comm_allreduce(px_comm *c, void *buf, size_t count, px_dtype dt, px_redop op)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_ALLREDUCE, -1, count * px_dtype_size(dt), t0,
                        comm_coll_end(c, allreduce_impl(c, buf, count, dt, op)));
}

px_status px_comm_reduce_scatter(px_comm *c, void *buf, size_t count, px_dtype dt, px_redop op)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_REDUCE_SCATTER, -1, count * px_dtype_size(dt), t0,
                        comm_coll_end(c, reduce_scatter_impl(c, buf, count, dt, op)));
}
