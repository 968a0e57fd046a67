/*
 * coll_internal.h - what the files of coll/ share: the collectives' common steps (checks,
 * moving and folding a peer's bytes, scratch, chunks), the steps across sites, and the
 * barrier slots' failure mark and the signatures' text.
 *   common.c     checks of a call's arguments, moving a peer's bytes, reducing a range, scratch
 *   allreduce.c  allreduce and reduce_scatter (one-shot, push, rs_ag, the proxies' pair path)
 *   sites.c      across sites (hosts): the allreduce chain, fetching once per site
 *   allgather.c  allgather and broadcast
 *   alltoall.c   alltoall and alltoallv
 *   signature.c  the collectives' signatures, their entry and end, the failure mark
 *   barrier.c    the barrier (flat, or dissemination past COMM_BAR_FLAT_MAX ranks)
 *   slots.c      the collective slots (the per-segment signals across sites)
 *   reduce.c     the element-wise reductions
 *
 * Collectives over a domain run in place on buffers inside the window.
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
#ifndef PX_COMM_COLL_INTERNAL_H
#define PX_COMM_COLL_INTERNAL_H

#include "comm/comm.h"

#define COLL_BLOCK_BYTES (32u << 10) /* reductions walk the buffer in blocks of this size */
#define COLL_STREAM_BYTES (1u << 20) /* ... or, with staged peers, in stretches of this size */
#define COLL_SEG_BYTES (256u << 10)  /* the chain across sites moves segments of this size */

/* A barrier slot's failure mark: bit 63 set (never in a barrier value: the signature's bit
 * 31 is 0), the failed call's status in bits 32-39, in the low half the last epoch whose
 * barrier the failed rank passed (a peer still waiting for that one from it may go on: it
 * was announced, and the mark only overwrote it). */
#define COMM_BAR_FAILED (1ull << 63)

/* ---- signature.c ---- */

/* The public name of collective kind (COMM_COLL_*), "?" for none. */
const char *comm_coll_name(int kind);

/* Writes what signature s names, as far as its bits tell; mine: the call itself, which names
 * its count and root (a peer's signature: whether they equal this rank's, from the hash). */
void comm_sig_text(uint32_t s, const px_comm *c, int mine, char *buf, size_t n);

/* ---- common.c ---- */

/* A piece of a peer's bytes folded into dst as it arrives (staged get_each). */
typedef struct coll_fold {
    char *dst;
    size_t es;
    px_dtype dt;
    px_redop op;
    int first; /* rank 0's bytes: copied, not combined */
} coll_fold;

/* Element size of dt for a collective, or 0 (message set); reductions take numbers only. */
size_t coll_esize(const px_comm *c, px_dtype dt, int reduction, const char *what);

/* Byte count of `count` elements times `mult`, overflow-checked, and where buf lies. */
px_status coll_span(const px_comm *c, const void *buf, size_t count, size_t mult, size_t es,
                    const char *what, size_t *bytes, size_t *off);

/* A reduction's op, and its buffer aligned to the element (the reductions load elements). */
px_status coll_check_op(const px_comm *c, px_redop op, const void *buf, size_t es,
                        const char *what);

/* Enters collective `kind` on c (comm_coll_begin). Returns 1 when the call is over, with its
 * status in *st: one rank has nothing to move, and a count of 0 passes the one barrier that
 * checks the call against the peers'; 0 to go on. */
int coll_enter(px_comm *c, int kind, size_t count, px_dtype dt, int op, int root,
               px_status *st);

/* n bytes of peer's data at off: this process's mapping of them, or a copy in tmp. */
const void *coll_view(px_comm *c, int peer, size_t off, size_t n, void *tmp, px_status *st);

/* Copies n bytes of peer's data at src_off to local memory dst. */
px_status coll_pull(px_comm *c, int peer, size_t src_off, void *dst, size_t n);

/* get_each's callback: folds a piece of a peer's bytes into f->dst (a coll_fold). */
void coll_fold_piece(void *arg, size_t at, const void *piece, size_t len);

/* dst[0 .. hi - lo) = reduction over ranks 0..n-1, in order, of elements [lo, hi) of the
 * buffer at offset off (common.c says how it walks); tmp holds COLL_BLOCK_BYTES. */
px_status coll_reduce_range(px_comm *c, size_t off, size_t lo, size_t hi, size_t es,
                            px_dtype dt, px_redop op, char *dst, char *tmp);

/* Scratch for `bytes` of results plus one block (*tmp) for unmapped peers' bytes, placed
 * against 4K aliasing with the window bytes at data offset match; NULL when out of memory. */
char *coll_scratch(px_comm *c, size_t bytes, size_t match, char **tmp);

/* Elements [lo, hi) of count owned by rank r of n: an even split, remainder spread left. */
void coll_chunk(size_t count, int n, int r, size_t *lo, size_t *hi);

/* ---- sites.c ---- */

/* The rank count of the domain's smallest site. */
int coll_site_min(const px_comm *c);

/* Allreduce over a domain of several sites, every site with 2 ranks or more: the chain. */
px_status coll_allreduce_hier(px_comm *c, char *buf, size_t off, size_t count, size_t es,
                              px_dtype dt, px_redop op);

/* Rank src's n bytes at data offset off reach every rank of this site through rank via. */
px_status coll_site_fan(px_comm *c, int src, int via, size_t off, size_t n);

/* Allgather over sites: each other site's blocks cross once, then fan out in this site. */
px_status coll_allgather_sites(px_comm *c, char *buf, size_t off, size_t blk);

#endif
