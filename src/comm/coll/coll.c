/*
 * coll.c - collectives over a domain, in place on buffers inside the window.
 *
 * Every collective is a fixed sequence of barriers and one-sided reads and writes, the same
 * on every rank, so ranks agree on each step without messages of their own:
 *   allreduce, one-shot   up to PX_COMM_SLOT_BYTES: the input is copied into this rank's slot
 *                         of the call's parity; barrier; every rank reduces every rank's slot
 *                         into scratch, then into its buffer: 1 barrier (comm.h says why the
 *                         parity makes a second one unneeded). Above it, up to oneshot_max:
 *                         barrier (inputs ready); every rank reduces the whole buffer from
 *                         every rank's copy; barrier (reads done); scratch -> buffer.
 *   allreduce, rs_ag      barrier; rank r reduces chunk r from every rank; barrier; rank r
 *                         writes its chunk into every rank's buffer; barrier. For large ones:
 *                         each byte is read once per rank and written once per rank.
 *   reduce_scatter        the first half of rs_ag, written into the own block only.
 *   allgather, broadcast, alltoall(v)
 *                         barrier; each rank pulls what it needs (alltoall: into scratch);
 *                         barrier; (alltoall: scratch -> buffer).
 * A reduction always combines ranks in order 0, 1, ..., n-1 for every element, and each result
 * element is computed once (rs_ag) or the same way by every rank (one-shot), so every rank ends
 * bit-identical. A peer's bytes are read through px_comm_peer_ptr where the transport maps
 * them, else streamed out of the transport with get_each (staged: folded straight from the
 * staging memory, pipelined) or fetched with its get() into scratch first.
 * With staged peers a small allreduce pushes instead (coll_allreduce_push: puts, one barrier,
 * local reduction: no round trip per peer), and only barriers after puts into peers' buffers
 * wait for the staged requests to be carried out (comm_barrier_flush).
 */
#include "comm/comm.h"
#include "comm/tl_list.h"
#include "comm/transport/staged.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dfx/records.h"
#include "util/util.h"

#define COLL_BLOCK_BYTES (32u << 10) /* reductions walk the buffer in blocks of this size */
#define COLL_STREAM_BYTES (1u << 20) /* ... or, with staged peers, in stretches of this size */
#define COLL_SEG_BYTES (256u << 10)  /* the chain across sites moves segments of this size */

/* ---- checks ---- */

/* Element size of dt for a collective, or 0 (message set); reductions take numbers only. */
static size_t coll_esize(const px_comm *c, px_dtype dt, int reduction, const char *what)
{
    size_t es = px_dtype_size(dt);

    if (c == NULL) {
        px_set_error(PX_EINVAL, "%s: the communicator is NULL", what);
        return 0;
    }
    if (es == 0 || (reduction && dt != PX_F32 && dt != PX_F64 && dt != PX_I32 && dt != PX_I64)) {
        px_set_error(PX_EINVAL, "%s: domain \"%s\": dtype %d (%s) is not supported%s", what,
                     c->name, (int)dt, px_dtype_name(dt),
                     reduction ? "; reductions take f32, f64, i32 or i64" : "");
        return 0;
    }
    return es;
}

/* Byte count of `count` elements times `mult`, overflow-checked, and where buf lies. */
static px_status coll_span(const px_comm *c, const void *buf, size_t count, size_t mult,
                           size_t es, const char *what, size_t *bytes, size_t *off)
{
    if (__builtin_mul_overflow(count, mult, bytes) || __builtin_mul_overflow(*bytes, es, bytes))
        return px_set_error(PX_EINVAL, "%s: domain \"%s\": %zu x %zu elements of %zu bytes "
                            "overflow", what, c->name, mult, count, es);
    if (buf == NULL)
        return px_set_error(PX_EINVAL, "%s: domain \"%s\": the buffer is NULL", what, c->name);
    return px_comm_offset(c, buf, *bytes, off);
}

/* A reduction's op, and its buffer aligned to the element (the reductions load elements). */
static px_status coll_check_op(const px_comm *c, px_redop op, const void *buf, size_t es,
                               const char *what)
{
    if (op < PX_OP_SUM || op > PX_OP_MAX)
        return px_set_error(PX_EINVAL, "%s: domain \"%s\": reduction %d is not a px_redop",
                            what, c->name, (int)op);
    if ((uintptr_t)buf % es != 0)
        return px_set_error(PX_EINVAL, "%s: domain \"%s\": the buffer at %p is not aligned to "
                            "its %zu-byte elements; pass an element-aligned offset inside the "
                            "window", what, c->name, buf, es);
    return PX_OK;
}

/* Enters collective `kind` on c (comm_coll_begin). Returns 1 when the call is over, with its
 * status in *st: one rank has nothing to move, and a count of 0 passes the one barrier that
 * checks the call against the peers'; 0 to go on. */
static int coll_enter(px_comm *c, int kind, size_t count, px_dtype dt, int op, int root,
                      px_status *st)
{
    *st = PX_OK;
    if (c->n == 1)
        return 1;
    if ((*st = comm_coll_begin(c, kind, count, dt, op, root)) != PX_OK)
        return 1;
    if (count == 0) {
        *st = comm_barrier_flush(c, 0);
        return 1;
    }
    return 0;
}

/* ---- moving a peer's bytes ---- */

/* n bytes of peer's data at off: this process's mapping of them, or a copy in tmp. */
static const void *coll_view(px_comm *c, int peer, size_t off, size_t n, void *tmp,
                             px_status *st)
{
    void *p = NULL;

    if (peer == c->rank)
        return c->data[peer] + off;
    if (c->tl[peer]->peer_ptr != NULL)
        p = c->tl[peer]->peer_ptr(c, peer, off);
    if (p != NULL)
        return p;
    *st = c->tl[peer]->get(c, peer, off, tmp, n);
    return *st == PX_OK ? tmp : NULL;
}

/* Copies n bytes of peer's data at src_off to local memory dst. */
static px_status coll_pull(px_comm *c, int peer, size_t src_off, void *dst, size_t n)
{
    if (n == 0)
        return PX_OK;
    if (peer == c->rank) {
        memmove(dst, c->data[peer] + src_off, n);
        return PX_OK;
    }
    return c->tl[peer]->get(c, peer, src_off, dst, n);
}

/* A piece of a peer's bytes folded into dst as it arrives (staged get_each). */
typedef struct coll_fold {
    char *dst;
    size_t es;
    px_dtype dt;
    px_redop op;
    int first; /* rank 0's bytes: copied, not combined */
} coll_fold;

static void coll_fold_piece(void *arg, size_t at, const void *piece, size_t len)
{
    coll_fold *f = arg;

    if (f->first)
        memcpy(f->dst + at, piece, len);
    else
        comm_reduce(f->dst + at, piece, len / f->es, f->dt, f->op);
}

/*
 * dst[0 .. hi - lo) = reduction over ranks 0..n-1, in order, of elements [lo, hi) of the
 * buffer at offset off. tmp holds COLL_BLOCK_BYTES for peers whose bytes are not mapped.
 * With staged peers the walk goes rank by rank over stretches of COLL_STREAM_BYTES, folding
 * each staged peer's pieces straight out of the staging memory as they arrive (the gets of a
 * stretch are pipelined); otherwise block by block over every rank (the block stays in cache).
 * Either way each element is combined in rank order, so the bits are the same.
 */
/* 1 when some peer of this rank is reached through a transport that does not map its bytes
 * (a local choice of stretch sizes only: the result's bits do not depend on it). */
static int coll_streams(const px_comm *c)
{
    for (int i = 0; i < c->nused; i++)
        if (!c->used[i]->in_place)
            return 1;
    return 0;
}

static px_status coll_reduce_range(px_comm *c, size_t off, size_t lo, size_t hi, size_t es,
                                   px_dtype dt, px_redop op, char *dst, char *tmp)
{
    size_t blk = (coll_streams(c) ? COLL_STREAM_BYTES : COLL_BLOCK_BYTES) / es;
    px_status st = PX_OK;

    for (size_t b = lo; b < hi; b += blk) {
        size_t m = PX_MIN(blk, hi - b), nb = m * es;
        char *d = dst + (b - lo) * es;

        for (int q = 0; q < c->n; q++) {
            const void *s = NULL;

            if (q != c->rank && c->tl[q]->get_each != NULL) {
                coll_fold f = {.dst = d, .es = es, .dt = dt, .op = op, .first = q == 0};

                if ((st = c->tl[q]->get_each(c, q, off + b * es, nb, coll_fold_piece, &f)) !=
                    PX_OK)
                    return st;
                continue;
            }
            if (nb > COLL_BLOCK_BYTES && q != c->rank && c->tl[q]->peer_ptr == NULL)
                return px_set_error(PX_ENOTSUP, "domain \"%s\": transport %s neither maps "
                                    "rank %d's bytes nor streams them", c->name,
                                    c->tl[q]->name, q);
            if ((s = coll_view(c, q, off + b * es, nb, tmp, &st)) == NULL)
                return st;
            if (q == 0)
                memcpy(d, s, nb);
            else
                comm_reduce(d, s, m, dt, op);
        }
    }
    return PX_OK;
}

/*
 * Scratch for `bytes` of results plus one block for unmapped peers' bytes. The results start
 * at the same offset in their page as the window bytes at data offset `match` that they are
 * computed from or copied to (windows are page aligned): a copy or reduction whose source and
 * destination differ by a little less than a multiple of 4 KiB makes every load wait for an
 * unrelated store (4K aliasing), which cost the 1 MiB allreduce 40 % depending on where
 * malloc happened to put the scratch.
 */
static char *coll_scratch(px_comm *c, size_t bytes, size_t match, char **tmp)
{
    size_t at = match % PX_COMM_DATA_ALIGN;
    char *s = comm_scratch(c, at + px_align_up(bytes, 64) + COLL_BLOCK_BYTES);

    if (s == NULL)
        return NULL;
    *tmp = s + at + px_align_up(bytes, 64);
    return s + at;
}

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

/* Elements [lo, hi) of count owned by rank r of n: an even split, remainder spread left. */
static void coll_chunk(size_t count, int n, int r, size_t *lo, size_t *hi)
{
    *lo = count / (size_t)n * (size_t)r + PX_MIN((size_t)r, count % (size_t)n);
    *hi = *lo + count / (size_t)n + ((size_t)r < count % (size_t)n ? 1 : 0);
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
static int coll_site_min(const px_comm *c)
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
static px_status coll_allreduce_hier(px_comm *c, char *buf, size_t off, size_t count,
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

/*
 * Two ranks whose pair is mpi: the proxies carry the whole allreduce (proxy.c, "the pair
 * allreduce"; a reduce_scatter is its first half, flags COMM_STG_COLL_RS): this rank posts
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
    st = comm_stg_coll(c, peer, off, bytes, COMM_STG_COLL_CODE(c->coll_sig, dt, op) | flags,
                       &a);
    if (st != PX_OK || a.status == PX_OK)
        return st;
    if (a.status == PX_EINVAL)
        return comm_coll_mismatch(c, peer, (uint32_t)a.peer_code);
    return px_set_error((px_status)a.status, "domain \"%s\" rank %d: the MPI proxies could not "
                        "carry out this collective (%s; the proxy's log line says why)",
                        c->name, c->rank, px_status_name((px_status)a.status));
}

/* 1 when the proxies carry c's reductions (coll_proxied): two ranks, their pair on mpi (the
 * pair table's, so both ranks agree). */
static int coll_pair_proxied(const px_comm *c)
{
    return c->n == 2 && c->tl[1 - c->rank]->id == PX_COMM_TL_MPI;
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

/* ---- reduce_scatter, allgather, broadcast ---- */

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

/* ---- moving bytes across sites once per site ---- */

/*
 * Rank src's n bytes at data offset off reach every rank of this site: rank `via` of this site
 * (the fetcher) gets them into its own buffer at off, segment by segment, and puts each
 * segment into the other ranks of the site, each with its collective signal; the others wait
 * for the signals. src is a rank of another site; every rank of this site calls it alike.
 */
static px_status coll_site_fan(px_comm *c, int src, int via, size_t off, size_t n)
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
static px_status coll_allgather_sites(px_comm *c, char *buf, size_t off, size_t blk)
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

static px_status alltoallv_impl(px_comm *c, const void *send, const size_t *send_counts,
                                const size_t *send_offs, void *recv, const size_t *recv_counts,
                                const size_t *recv_offs, px_dtype dt)
{
    size_t es = coll_esize(c, dt, 0, "px_comm_alltoallv"), off;
    px_comm_area *me;
    px_status st = PX_OK, bad = PX_OK;
    char msg[256] = "";

    if (es == 0)
        return PX_EINVAL;
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
    c->last_algo = "pull";
    if (c->n > 1 && (st = comm_coll_begin(c, COMM_COLL_ALLTOALLV, 0, dt, 0, 0)) != PX_OK)
        return st;
    if ((st = comm_barrier_flush(c, 0)) != PX_OK) /* the barrier's release publishes the table */
        return st;
    for (int i = 0; i < c->n; i++) {
        int q = (c->rank + i) % c->n;
        uint64_t qoff, qcount;

        if (q == c->rank) {
            qoff = atomic_load_explicit(&comm_a2av(me, q)->off, memory_order_relaxed);
            qcount = send_counts[q];
        } else if (c->area[q] != NULL) {
            qoff = atomic_load_explicit(&comm_a2av(c->area[q], c->rank)->off,
                                        memory_order_relaxed);
            qcount = atomic_load_explicit(&comm_a2av(c->area[q], c->rank)->count,
                                          memory_order_relaxed);
        } else {
            uint64_t e[2]; /* q's a2av entry for this rank: off, count */

            st = c->tl[q]->get_head(c, q, sizeof(px_comm_area) +
                                    (size_t)c->rank * sizeof(e), e, sizeof(e));
            if (st != PX_OK)
                break;
            qoff = e[0];
            qcount = e[1];
        }
        if (qcount != recv_counts[q]) {
            if (bad == PX_OK)
                snprintf(msg, sizeof(msg), "rank %d sends %llu elements to rank %d, which "
                         "expects %zu", q, (unsigned long long)qcount, c->rank, recv_counts[q]);
            bad = PX_EINVAL;
            continue; /* keep in step with the others: the barriers still come */
        }
        st = coll_pull(c, q, qoff, (char *)recv + recv_offs[q] * es, qcount * es);
        if (st != PX_OK)
            break;
    }
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
