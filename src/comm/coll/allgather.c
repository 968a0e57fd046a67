/*
 * allgather.c - px_comm_allgather and px_comm_broadcast: a barrier, each rank pulls what it
 * needs (across sites: once per site, sites.c), a barrier.
 */
#include "comm/coll/coll_internal.h"

#include <stddef.h>

#include "dfx/records.h"
#include "util/util.h"

static px_status allgather_impl(px_comm *c, void *buf, size_t count, px_dtype dt)
{
    size_t es = coll_esize(c, dt, 0, "px_comm_allgather"), bytes, off;
    px_status st;

    if (es == 0)
        return PX_EINVAL;
    if ((st = coll_span(c, buf, count, (size_t)c->n, es, "px_comm_allgather", &bytes, &off)) !=
        PX_OK)
        return st;
    c->last_algo = "pull";
    if (coll_enter(c, COMM_COLL_ALLGATHER, count, dt, 0, 0, &st) ||
        (st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    if (c->nsites > 1) { /* the final barrier: others still read this rank's block */
        st = coll_allgather_sites(c, buf, off, count * es);
        return st == PX_OK ? comm_barrier_flush(c, 0) : st;
    }
    for (int i = 1; st == PX_OK && i < c->n; i++) {
        int q = (c->rank + i) % c->n;
        size_t b = (size_t)q * count * es;

        st = coll_pull(c, q, off + b, (char *)buf + b, count * es);
    }
    if (st == PX_OK)
        st = comm_barrier_flush(c, 0);
    return st;
}

static px_status broadcast_impl(px_comm *c, void *buf, size_t count, px_dtype dt, int root)
{
    size_t es = coll_esize(c, dt, 0, "px_comm_broadcast"), bytes, off;
    px_status st;

    if (es == 0)
        return PX_EINVAL;
    if (root < 0 || root >= c->n)
        return px_set_error(PX_EINVAL, "px_comm_broadcast: domain \"%s\": root %d is not a rank "
                            "(0..%d)", c->name, root, c->n - 1);
    if ((st = coll_span(c, buf, count, 1, es, "px_comm_broadcast", &bytes, &off)) != PX_OK)
        return st;
    c->last_algo = "pull";
    if (coll_enter(c, COMM_COLL_BROADCAST, count, dt, 0, root, &st) ||
        (st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    if (c->nsites > 1 && (root < c->site_start[c->site] ||
                          root >= c->site_start[c->site + 1])) {
        /* another site's root: its bytes cross once, to this site's first rank */
        c->last_algo = "chain";
        st = coll_site_fan(c, root, c->site_start[c->site], off, bytes);
    } else if (c->rank != root) {
        st = coll_pull(c, root, off, buf, bytes);
    }
    if (st == PX_OK)
        st = comm_barrier_flush(c, 0);
    return st;
}

px_status px_comm_allgather(px_comm *c, void *buf, size_t count, px_dtype dt)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_ALLGATHER, -1, count * px_dtype_size(dt), t0,
                        comm_coll_end(c, allgather_impl(c, buf, count, dt)));
}

px_status px_comm_broadcast(px_comm *c, void *buf, size_t count, px_dtype dt, int root)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_BROADCAST, -1, count * px_dtype_size(dt), t0,
                        comm_coll_end(c, broadcast_impl(c, buf, count, dt, root)));
}
