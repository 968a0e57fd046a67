/*
 * common.c - the steps every collective shares: the checks of a call's arguments, its entry,
 * moving a peer's bytes (mapped, streamed with get_each, or fetched), reducing a range of the
 * buffer over every rank in rank order, scratch placed against 4K aliasing, and chunks.
 * coll_internal.h gives the algorithms' overview.
 */
#include "comm/coll/coll_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

/* ---- checks ---- */

/* Element size of dt for a collective, or 0 (message set); reductions take numbers only. */
size_t coll_esize(const px_comm *c, px_dtype dt, int reduction, const char *what)
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
px_status coll_span(const px_comm *c, const void *buf, size_t count, size_t mult,
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
px_status coll_check_op(const px_comm *c, px_redop op, const void *buf, size_t es,
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
int coll_enter(px_comm *c, int kind, size_t count, px_dtype dt, int op, int root,
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
const void *coll_view(px_comm *c, int peer, size_t off, size_t n, void *tmp,
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
px_status coll_pull(px_comm *c, int peer, size_t src_off, void *dst, size_t n)
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

void coll_fold_piece(void *arg, size_t at, const void *piece, size_t len)
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

px_status coll_reduce_range(px_comm *c, size_t off, size_t lo, size_t hi, size_t es,
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
char *coll_scratch(px_comm *c, size_t bytes, size_t match, char **tmp)
{
    size_t at = match % PX_COMM_DATA_ALIGN;
    char *s = comm_scratch(c, at + px_align_up(bytes, 64) + COLL_BLOCK_BYTES);

    if (s == NULL)
        return NULL;
    *tmp = s + at + px_align_up(bytes, 64);
    return s + at;
}


/* Elements [lo, hi) of count owned by rank r of n: an even split, remainder spread left. */
void coll_chunk(size_t count, int n, int r, size_t *lo, size_t *hi)
{
    *lo = count / (size_t)n * (size_t)r + PX_MIN((size_t)r, count % (size_t)n);
    *hi = *lo + count / (size_t)n + ((size_t)r < count % (size_t)n ? 1 : 0);
}
