/*
 * ring.h - the ring requester (ring.c): the requester's side of every transport whose
 * requests travel through rings of staged.h's format, today staged and mpi. A rank posts a
 * request (and a put's bytes) into its outgoing ring, rings the consumer's doorbell when no
 * thread of it polls the ring, and waits on the ring's `done` for what it needs back.
 *
 * Who consumes a ring is the transport's business, never the requester's: the target rank
 * itself (staged.c: a pair's memory holds a ring each way), or the worker's MPI proxy
 * (mpi.c, comm/proxy/). The requester reads only the transport's row (transport.h):
 *   per_rank  one ring per rank for all its peers on the transport (each request names its
 *             target rank; one lock and one sequence for all of them), not one per pair
 *   proxied   a proxy carries the requests out: a wait that times out blames the hosts, not
 *             the peer (nothing of the peer is here to kill)
 * A transport of this kind fills its row with these functions and its own connect/release/
 * flush wrappers naming its row; it writes no other requester code.
 */
#ifndef PX_COMM_TRANSPORT_RING_H
#define PX_COMM_TRANSPORT_RING_H

#include <pthread.h>

#include "comm/transport/staged.h"

/* This rank's side of one peer on a ring transport (private to the process; per_rank: one
 * for every peer on the transport). */
typedef struct comm_ring_peer {
    const px_comm_tl *t;           /* the transport's row */
    comm_stg_ring *out, *in;       /* in: the peer's requests to this rank (a pair's), or NULL */
    char *out_data, *in_data;      /* the rings' chunks */
    size_t chunk;
    comm_bell *bell;               /* the consumer's doorbell (the peer's, or the proxy's) */
    pthread_mutex_t plock;         /* threads of this rank posting on the ring */
    uint32_t done_seen;            /* out->done as last read (plock): space known free */
    _Atomic int clock;             /* a thread of this rank carrying out the peer's requests */
    _Atomic uint32_t bad;          /* malformed requests of the peer skipped (a defect) */
} comm_ring_peer;

/* The peers of a communicator on one ring transport (c->tl_comm[t->id]). */
typedef struct comm_ring_list {
    int n;
    int peers[]; /* c->n entries at most */
} comm_ring_list;

static inline comm_ring_list *comm_ring_list_of(const px_comm *c, const px_comm_tl *t)
{
    return c->tl_comm[t->id];
}

/*
 * Connects this rank's end of the pair (rank, peer) on transport t over link l: a pair's
 * memory (two rings, l->shared of comm_stg_pair_bytes) or, per_rank, the rank's one ring
 * (l->shared of t->prepare(n) bytes, the same for every peer). Checks the format once (the
 * memory is shared: its header is read once, here). PX_OK, PX_EINVAL, PX_ENOMEM.
 */
px_status comm_ring_connect(px_comm *c, int peer, const comm_link *l, const px_comm_tl *t);
/* Frees c's state on t (says how many malformed requests a peer's ring carried). */
void comm_ring_release(px_comm *c, const px_comm_tl *t);
/* Waits until every request this rank posted on t has been carried out. */
px_status comm_ring_flush(px_comm *c, const px_comm_tl *t);

/* The data operations of the contract (transport.h), for any peer connected so. */
px_status comm_ring_put(px_comm *c, int peer, size_t off, const void *src, size_t n);
px_status comm_ring_put_signal(px_comm *c, int peer, size_t off, const void *src, size_t n,
                               uint32_t slot, px_sig_op op, uint64_t v);
px_status comm_ring_get(px_comm *c, int peer, size_t off, void *dst, size_t n);
px_status comm_ring_get_head(px_comm *c, int peer, size_t off, void *dst, size_t n);
px_status comm_ring_get_each(px_comm *c, int peer, size_t off, size_t n,
                             void (*fn)(void *arg, size_t at, const void *piece, size_t len),
                             void *arg);
px_status comm_ring_signal(px_comm *c, int peer, uint32_t slot, px_sig_op op, uint64_t v);
/* Posts a pair collective (COMM_STG_COLL: n bytes at data offset off, code its v), waits
 * until its consumer carried it out and gives its outcome in *ans (the pair_coll op). */
px_status comm_ring_pair_coll(px_comm *c, int peer, size_t off, size_t n, uint64_t code,
                              comm_stg_ans *ans);

#endif
