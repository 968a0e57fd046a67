/*
 * sites.c - collectives over a domain of several sites (hosts): the allreduce chain (each
 * rank k of every site carries shard k along the sites, pipelined in segments), and moving a
 * rank's bytes across once per site and fanning them out inside it (allgather, broadcast).
 */
#include "comm/coll/coll_internal.h"

#include <stddef.h>
#include <string.h>

#include "util/util.h"

/* ---- allreduce across sites (hosts): the chain ---- */

/* dst (nb bytes) = rank q's bytes at data offset off (first), or dst op= them; own: this
 * rank's input, saved (its buffer receives others' sums meanwhile). */
static px_status coll_fold_rank(px_comm *c, int q, size_t off, size_t nb, size_t es,
                                px_dtype dt, px_redop op, int first, const char *own,
                                char *dst, char *tmp)
{
    px_status st = PX_OK;

    if (q == c->rank) {
        if (first)
            memcpy(dst, own, nb);
        else
            comm_reduce(dst, own, nb / es, dt, op);
        return PX_OK;
    }
    if (c->tl[q]->get_each != NULL) {
        coll_fold f = {.dst = dst, .es = es, .dt = dt, .op = op, .first = first};

        return c->tl[q]->get_each(c, q, off, nb, coll_fold_piece, &f);
    }
    for (size_t b = 0; b < nb; b += COLL_BLOCK_BYTES) {
        size_t m = PX_MIN((size_t)COLL_BLOCK_BYTES, nb - b);
        const void *v = coll_view(c, q, off + b, m, tmp, &st);

        if (v == NULL)
            return st;
        if (first)
            memcpy(dst + b, v, m);
        else
            comm_reduce(dst + b, v, m / es, dt, op);
    }
    return PX_OK;
}

/*
 * Shard [lo, hi) of the chain, by this rank (local index k of its site g): segment by
 * segment, the partial fold of sites 0..g-1 arrives from the previous site's rank k (pushed
 * into this rank's buffer, with a collective signal), this site's ranks are folded into it in
 * rank order, and the sum goes on to the next site's rank k; the last site's rank k has the
 * result: it sends it back to every earlier site's rank k and writes it into its own site's
 * ranks. Earlier sites' ranks k then write each result segment into their site's ranks.
 */
static px_status coll_hier_shard(px_comm *c, char *buf, size_t off, size_t lo, size_t hi,
                                 size_t es, px_dtype dt, px_redop op, const char *own,
                                 char *tmp)
{
    int ns = c->nsites, g = c->site, k = c->rank - c->site_start[g];
    int s0 = c->site_start[g], s1 = c->site_start[g + 1];
    int last = c->site_start[ns - 1] + k;
    size_t seg = PX_MAX((size_t)1, COLL_SEG_BYTES / es);
    px_status st = PX_OK;

    for (size_t b = lo; b < hi && st == PX_OK; b += seg) {
        size_t nb = PX_MIN(seg, hi - b) * es, o = off + b * es;
        char *d = buf + b * es;

        if (g > 0 && (st = comm_coll_wait(c, c->site_start[g - 1] + k,
                                          "the partial sums of a segment")) != PX_OK)
            return st;
        for (int q = s0; q < s1 && st == PX_OK; q++)
            st = coll_fold_rank(c, q, o, nb, es, dt, op, g == 0 && q == s0,
                                own + (b - lo) * es, d, tmp);
        if (st != PX_OK)
            return st;
        if (g < ns - 1) {
            st = comm_coll_put_signal(c, c->site_start[g + 1] + k, o, d, nb);
            continue;
        }
        for (int h = 0; h < ns - 1 && st == PX_OK; h++)
            st = comm_coll_put_signal(c, c->site_start[h] + k, o, d, nb);
        for (int q = s0; q < s1 && st == PX_OK; q++)
            if (q != c->rank)
                st = comm_coll_put_signal(c, q, o, d, nb);
    }
    for (size_t b = lo; g < ns - 1 && b < hi && st == PX_OK; b += seg) {
        size_t nb = PX_MIN(seg, hi - b) * es, o = off + b * es;

        if ((st = comm_coll_wait(c, last, "the result of a segment")) != PX_OK)
            return st;
        for (int q = s0; q < s1 && st == PX_OK; q++)
            if (q != c->rank)
                st = comm_coll_put_signal(c, q, o, buf + b * es, nb);
    }
    return st;
}

/* The results of the shards other ranks of this site carry: each segment's signal from its
 * carrier (after its bytes: one ring, in order). */
static px_status coll_hier_collect(px_comm *c, size_t count, size_t es, int K)
{
    int g = c->site, k = c->rank - c->site_start[g];
    size_t seg = PX_MAX((size_t)1, COLL_SEG_BYTES / es), lo, hi;
    px_status st = PX_OK;

    for (int j = 0; j < K && st == PX_OK; j++) {
        if (j == k)
            continue;
        coll_chunk(count, K, j, &lo, &hi);
        for (size_t b = lo; b < hi && st == PX_OK; b += seg)
            st = comm_coll_wait(c, c->site_start[g] + j, "the result of a segment");
    }
    return st;
}

/* The rank count of the domain's smallest site. */
int coll_site_min(const px_comm *c)
{
    int K = c->n;

    for (int h = 0; h < c->nsites; h++)
        K = PX_MIN(K, c->site_start[h + 1] - c->site_start[h]);
    return K;
}

/*
 * Allreduce over a domain of several sites (hosts; comm.h: nsites): the buffer is cut into K
 * shards, K the smallest site's rank count, and rank k of every site carries shard k along
 * the chain of sites (coll_hier_shard), pipelined in segments of COLL_SEG_BYTES, so each
 * site's link carries each byte about once each way and the sites work at once. The fold of
 * every element goes rank 0, 1, ..., n-1 (sites are runs of ranks in order): the bits are a
 * serial rank-order fold's, as on one host. Ranks past K in a bigger site only give their
 * input and take the result. Taken where every site has 2 ranks or more: with one, its rank
 * alone would carry the whole buffer both ways, and the flat reduce-scatter + allgather,
 * which moves as many bytes across, splits that work over both ends (2 x 1: 2.6x faster at
 * 64 MiB here). One barrier before (inputs ready, each rank k's shard saved:
 * the previous site writes into it), none after: every segment a rank receives (a partial
 * sum, a result) comes with a collective signal after its bytes, and a rank returns once it
 * has every result segment; nobody reads its buffer after that (remote sites only push), and
 * the next collective's barrier keeps the next pushes out until it saved its input.
 */
px_status coll_allreduce_hier(px_comm *c, char *buf, size_t off, size_t count,
                              size_t es, px_dtype dt, px_redop op)
{
    int K = coll_site_min(c), k = c->rank - c->site_start[c->site];
    size_t lo = 0, hi = 0;
    char *own = NULL, *tmp = NULL;
    px_status st;

    c->last_algo = "chain";
    if (k < K) {
        coll_chunk(count, K, k, &lo, &hi);
        if ((own = coll_scratch(c, (hi - lo) * es, off + lo * es, &tmp)) == NULL)
            return PX_ENOMEM;
        memcpy(own, buf + lo * es, (hi - lo) * es);
    }
    if ((st = comm_barrier_flush(c, 0)) != PX_OK)
        return st;
    if (k < K && (st = coll_hier_shard(c, buf, off, lo, hi, es, dt, op, own, tmp)) != PX_OK)
        return st;
    return coll_hier_collect(c, count, es, K);
}
/* ---- moving bytes across sites once per site ---- */

/*
 * Rank src's n bytes at data offset off reach every rank of this site: rank `via` of this site
 * (the fetcher) gets them into its own buffer at off, segment by segment, and puts each
 * segment into the other ranks of the site, each with its collective signal; the others wait
 * for the signals. src is a rank of another site; every rank of this site calls it alike.
 */
px_status coll_site_fan(px_comm *c, int src, int via, size_t off, size_t n)
{
    int s0 = c->site_start[c->site], s1 = c->site_start[c->site + 1];
    px_status st = PX_OK;

    for (size_t b = 0; b < n && st == PX_OK; b += COLL_SEG_BYTES) {
        size_t m = PX_MIN((size_t)COLL_SEG_BYTES, n - b);

        if (c->rank != via) {
            st = comm_coll_wait(c, via, "a segment another host sent through this one");
            continue;
        }
        if ((st = coll_pull(c, src, off + b, c->data[c->rank] + off + b, m)) != PX_OK)
            return st;
        for (int q = s0; q < s1 && st == PX_OK; q++)
            if (q != c->rank)
                st = comm_coll_put_signal(c, q, off + b, c->data[c->rank] + off + b, m);
    }
    return st;
}

/* Allgather over sites: the blocks of this site's ranks are pulled in place; each other
 * site's blocks cross once, fetched by one rank of this site (site h by its rank h mod L)
 * and fanned out to the rest, instead of once per rank of this site. */
px_status coll_allgather_sites(px_comm *c, char *buf, size_t off, size_t blk)
{
    int g = c->site, s0 = c->site_start[g], s1 = c->site_start[g + 1], L = s1 - s0;
    px_status st = PX_OK;

    c->last_algo = "chain";
    for (int q = s0; q < s1 && st == PX_OK; q++)
        if (q != c->rank)
            st = coll_pull(c, q, off + (size_t)q * blk, buf + (size_t)q * blk, blk);
    for (int h = 0; h < c->nsites && st == PX_OK; h++) {
        if (h == g)
            continue;
        for (int q = c->site_start[h]; q < c->site_start[h + 1] && st == PX_OK; q++)
            st = coll_site_fan(c, q, s0 + h % L, off + (size_t)q * blk, blk);
    }
    return st;
}
