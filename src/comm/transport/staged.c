/*
 * staged.c - the "staged" comm transport: same host, no peer window mapped. Each pair of
 * ranks shares staging memory holding two rings, one per direction; a requester writes a
 * request (and a put's bytes) into its outgoing ring, and the target rank carries it out
 * against its own window: a put's bytes are copied in, a get's copied out into the request's
 * chunk, a signal is applied to the target's slot (release, then the owner is woken).
 *
 * Who carries requests out: any thread of the target that holds the ring's consumer lock,
 * i.e. a kernel of the target that waits in the domain (comm_wait polls the incoming rings
 * while it spins) or the target's progress thread. A requester rings the target's doorbell
 * only when no thread of the target polls the ring and the progress thread announced a
 * sleep, so a ping-pong between two waiting kernels makes no system call.
 *
 * Ordering: requests of one direction are carried out in order by one consumer at a time, and
 * `done` is stored with release after each, so a signal is applied after every byte of the
 * puts before it. A request is one cache line whose sequence word is stored last, and a put
 * of at most STG_INLINE bytes (a put_signal's token) travels inside it, so the consumer reads
 * one line per request; each header line is written by one side only, and the requester
 * re-reads `done` only when its cached copy says the ring is full. Lost wake-ups: the
 * requester stores the sequence word, then (seq_cst) reads pollers and the bell's sleeping
 * flag; a poller that stops decrements pollers, then (seq_cst) polls once more; a consumer
 * that unlocks looks at the next request again; so every request posted has a consumer.
 *
 * Layout of a pair (comm_stg_pair_bytes): ring 0 carries the lower rank's requests to the
 * higher one, ring 1 the other way; each ring is one page of header (five cache lines of
 * counters, then the requests) followed by COMM_STG_SLOTS chunks of `chunk` bytes. Request i
 * uses request slot and chunk i % COMM_STG_SLOTS (the format: staged.h).
 *
 * Trust: the staging memory is shared with the peer, so a buggy or hostile peer can write
 * any of it at any time. Connect reads the chunk size once and checks it against the bytes
 * mapped; the target copies each request line once and checks every field of the copy
 * against its own communicator (comm_stg_decode) before it carries the copy out; a malformed
 * request is skipped whole and counted in this process's memory, and the transport's release
 * says how many. Indices into the ring are taken modulo its size, never trusted as they are read.
 */
#include "comm/transport/staged.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/tl_list.h"
#include "util/clock.h"
#include "util/wait.h"
#include "util/log.h"
#include "util/tsan.h"
#include "util/util.h"

typedef comm_stg_req stg_req;
typedef comm_stg_ring stg_ring;

#define STG_MAGIC COMM_STG_MAGIC
#define STG_HEAD_BYTES COMM_STG_HEAD_BYTES
#define STG_INLINE COMM_STG_INLINE
#define STG_F_SIGNAL COMM_STG_F_SIGNAL
enum { STG_PUT = COMM_STG_PUT, STG_GET = COMM_STG_GET, STG_SIGNAL = COMM_STG_SIGNAL,
       STG_GET_HEAD = COMM_STG_GET_HEAD };

/* This rank's side of one staged peer (private to the process). */
typedef struct stg_peer {
    stg_ring *out, *in;
    char *out_data, *in_data;      /* the rings' chunks */
    size_t chunk;
    comm_bell *bell;               /* the peer's doorbell */
    pthread_mutex_t plock;         /* threads of this rank posting to the peer */
    uint32_t done_seen;            /* out->done as last read (plock): space known free */
    _Atomic int clock;             /* a thread of this rank carrying out the peer's requests */
    _Atomic uint32_t bad;          /* malformed requests of the peer skipped (a defect) */
    int proxied;                   /* the worker's MPI proxy carries requests out (mpi.c) */
} stg_peer;

/*
 * A request's bytes sit in its chunk at the offset in a page that they have in the window
 * (data offset off), so every copy between window, staging memory and a collective's scratch
 * runs with source and destination at one page offset (no 4K aliasing); a piece is then at
 * most the chunk less that offset.
 */
static inline size_t stg_at(uint64_t off)
{
    return (size_t)(off % PX_COMM_DATA_ALIGN);
}

static inline size_t stg_piece(size_t chunk, uint64_t off, size_t left)
{
    return PX_MIN(chunk - stg_at(off), left);
}

size_t comm_stg_pair_bytes(size_t chunk)
{
    if (chunk == 0)
        chunk = COMM_STG_CHUNK;
    return 2 * (STG_HEAD_BYTES + COMM_STG_SLOTS * chunk);
}

static stg_ring *stg_ring_at(void *pair, size_t chunk, int i)
{
    return comm_stg_ring_at(pair, chunk, i);
}

void comm_stg_pair_init(void *mem, size_t chunk)
{
    if (chunk == 0)
        chunk = COMM_STG_CHUNK;
    for (int i = 0; i < 2; i++) {
        stg_ring *r = stg_ring_at(mem, chunk, i);

        r->chunk = (uint32_t)chunk;
        r->magic = STG_MAGIC;
    }
}

/* The peers of a communicator on a transport whose requests go through rings
 * (c->tl_comm[id]: staged's, and mpi's, whose rings the worker's proxy serves). */
typedef struct stg_comm {
    int n;
    int peers[]; /* c->n entries at most */
} stg_comm;

static stg_comm *stg_list(const px_comm *c, int id)
{
    return c->tl_comm[id];
}

static stg_comm *stg_of(const px_comm *c)
{
    return stg_list(c, PX_COMM_TL_STAGED);
}

static size_t staged_prepare(int n)
{
    return comm_stg_pair_bytes(comm_stg_chunk_for(n));
}

static void staged_format(void *shared, size_t bytes, int n)
{
    (void)bytes;
    comm_stg_pair_init(shared, comm_stg_chunk_for(n));
}

/*
 * mpi's end of peer: the rank's one ring to the proxy (l->shared: comm_mpi_ring_bytes), the
 * same stg_peer for every mpi peer (one lock, one sequence: each request names its target),
 * made at the first and checked to be the same memory at the others.
 */
static px_status stg_connect_ring(px_comm *c, int peer, const comm_link *l, int id)
{
    stg_ring *r = l->shared;
    stg_comm *sc = stg_list(c, id);
    stg_peer *p = sc != NULL && sc->n > 0 ? c->tl_state[sc->peers[0]] : NULL;

    if (r == NULL || peer == c->rank || peer < 0 || peer >= c->n || l->bell == NULL ||
        c->tl_state[peer] != NULL)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the ring or doorbell for "
                            "rank %d is missing, or the rank is not a peer not yet connected",
                            c->name, c->rank, peer);
    if (p != NULL && p->out != r)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: rank %d's link names "
                            "another ring than its other %s peers' (a defect of the set-up)",
                            c->name, c->rank, peer, px_comm_tl_name(id));
    if (p == NULL && (l->shared_bytes != comm_mpi_ring_bytes() || r->magic != STG_MAGIC ||
                      r->chunk != COMM_MPI_CHUNK))
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: its %s ring (%zu bytes, "
                            "magic %#x, chunk %u) is not formatted as one (%zu bytes, chunk "
                            "%u); a defect of the set-up", c->name, c->rank, px_comm_tl_name(id),
                            l->shared_bytes, r->magic, r->chunk, comm_mpi_ring_bytes(),
                            (unsigned)COMM_MPI_CHUNK);
    if (sc == NULL &&
        (sc = c->tl_comm[id] = calloc(1, sizeof(*sc) + (size_t)c->n * sizeof(int))) == NULL)
        return px_set_error(PX_ENOMEM, "comm: domain \"%s\" rank %d: out of memory for the "
                            "%s peers", c->name, c->rank, px_comm_tl_name(id));
    if (p == NULL) {
        if ((p = calloc(1, sizeof(*p))) == NULL)
            return px_set_error(PX_ENOMEM, "comm: domain \"%s\" rank %d: out of memory for "
                                "its ring", c->name, c->rank);
        p->out = r;
        p->out_data = (char *)r + STG_HEAD_BYTES;
        p->chunk = COMM_MPI_CHUNK;
        p->bell = l->bell;
        p->proxied = 1;
        pthread_mutex_init(&p->plock, NULL);
    }
    c->tl_state[peer] = p;
    sc->peers[sc->n++] = peer;
    return PX_OK;
}

px_status comm_stg_connect_as(px_comm *c, int peer, const comm_link *l, int id)
{
    stg_ring *r0 = l->shared, *r1;
    stg_comm *sc = stg_list(c, id);
    stg_peer *p;
    size_t chunk, bytes = l->shared_bytes;
    int mine;

    if (id != PX_COMM_TL_STAGED) /* mpi: one ring per rank */
        return stg_connect_ring(c, peer, l, id);
    if (r0 == NULL || peer == c->rank || peer < 0 || peer >= c->n || l->bell == NULL ||
        c->tl_state[peer] != NULL)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the staging memory or "
                            "doorbell for rank %d is missing, or the rank is not a peer not "
                            "yet connected", c->name, c->rank, peer);
    /* The header is the formatting rank's to write: its chunk is read once, here, and must
     * describe exactly the bytes mapped, in both rings. */
    chunk = r0->chunk;
    if (bytes < 2 * (size_t)STG_HEAD_BYTES || r0->magic != STG_MAGIC || chunk == 0 ||
        chunk % PX_COMM_DATA_ALIGN != 0 || comm_stg_pair_bytes(chunk) != bytes)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the staging memory for "
                            "rank %d (%zu bytes) is not formatted for its size (magic %#x, "
                            "chunk %zu: chunks must be multiples of %d bytes filling the "
                            "mapping); a defect of the rank that formatted it", c->name,
                            c->rank, peer, bytes, r0->magic, chunk, PX_COMM_DATA_ALIGN);
    r1 = stg_ring_at(l->shared, chunk, 1);
    if (r1->magic != STG_MAGIC || r1->chunk != chunk)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the staging memory for "
                            "rank %d has rings of different formats (chunk %zu and %u); a "
                            "defect of the rank that formatted it", c->name, c->rank, peer,
                            chunk, r1->chunk);
    if (sc == NULL &&
        (sc = c->tl_comm[id] =
             calloc(1, sizeof(*sc) + (size_t)c->n * sizeof(int))) == NULL)
        return px_set_error(PX_ENOMEM, "comm: domain \"%s\" rank %d: out of memory for the "
                            "staged peers", c->name, c->rank);
    if ((p = calloc(1, sizeof(*p))) == NULL)
        return px_set_error(PX_ENOMEM, "comm: domain \"%s\" rank %d: out of memory for the "
                            "staged state of rank %d", c->name, c->rank, peer);
    mine = c->rank < peer ? 0 : 1;
    p->out = stg_ring_at(l->shared, chunk, mine);
    p->in = stg_ring_at(l->shared, chunk, 1 - mine);
    p->out_data = (char *)p->out + STG_HEAD_BYTES;
    p->in_data = (char *)p->in + STG_HEAD_BYTES;
    p->chunk = chunk;
    p->bell = l->bell;
    p->proxied = id != PX_COMM_TL_STAGED;
    pthread_mutex_init(&p->plock, NULL);
    c->tl_state[peer] = p;
    sc->peers[sc->n++] = peer;
    return PX_OK;
}

static px_status staged_connect(px_comm *c, int peer, const comm_link *l)
{
    return comm_stg_connect_as(c, peer, l, PX_COMM_TL_STAGED);
}

uint32_t comm_stg_skipped(const px_comm *c, int peer)
{
    const stg_peer *p;

    if (peer < 0 || peer >= c->n || c->tl[peer] != &px_comm_tl_staged ||
        (p = c->tl_state[peer]) == NULL)
        return 0;
    return atomic_load_explicit(&p->bad, memory_order_relaxed);
}

/* Frees c's state of transport id (comm_fini). */
void comm_stg_release_as(px_comm *c, int id)
{
    stg_comm *sc = stg_list(c, id);

    for (int i = 0; sc != NULL && i < sc->n; i++) {
        stg_peer *p = c->tl_state[sc->peers[i]];
        uint32_t bad;

        c->tl_state[sc->peers[i]] = NULL;
        if (id != PX_COMM_TL_STAGED && i > 0)
            continue; /* mpi: every peer's is the first's (the rank's one ring) */
        bad = p != NULL ? atomic_load_explicit(&p->bad, memory_order_relaxed) : 0;

        if (bad > 0)
            PX_LOG_WARN("comm[%s]: rank %d skipped %u malformed staged requests from rank %d "
                        "(a defect: requests are checked before they are posted)", c->name,
                        c->rank, bad, sc->peers[i]);
        if (p != NULL)
            pthread_mutex_destroy(&p->plock);
        free(p);
    }
    free(sc);
    c->tl_comm[id] = NULL;
}

static void staged_release(px_comm *c)
{
    comm_stg_release_as(c, PX_COMM_TL_STAGED);
}

/* ---- the target's side ---- */

comm_stg_bounds comm_stg_bounds_of(const px_comm *c, size_t chunk)
{
    comm_stg_bounds b = {.win_bytes = c->data_bytes + 2 * (size_t)PX_COMM_SLOT_BYTES,
                         .head_bytes = px_comm_area_bytes(c->n, c->nsig),
                         .nslots = comm_slot_count(c->n, c->nsig), .chunk = chunk};

    return b;
}

/* 1 when bytes [off, off + n) lie inside [0, limit). */
static inline int stg_in(uint64_t off, uint64_t n, size_t limit)
{
    return off <= limit && n <= limit - off;
}

int comm_stg_decode(const void *line, const comm_stg_bounds *b, comm_stg_op *op)
{
    stg_req q;
    int sig;

    /* One read of the line: what is checked below is what is carried out, whatever the peer
     * writes there meanwhile. The barrier keeps the compiler from reading a field from the
     * line again in place of the copy. */
    memcpy(&q, line, sizeof(q));
    __asm__ __volatile__("" ::: "memory");
    memset(op, 0, sizeof(*op));
    switch (q.op) {
    case STG_PUT:
        if ((q.flags & ~STG_F_SIGNAL) != 0 || q.inl > 1)
            return 0;
        break;
    case STG_GET:
    case STG_GET_HEAD:
    case STG_SIGNAL:
        if (q.flags != 0 || q.inl != 0)
            return 0;
        break;
    default:
        return 0;
    }
    sig = q.op == STG_SIGNAL || (q.flags & STG_F_SIGNAL);
    if (sig) {
        if (q.slot >= b->nslots || (q.sigop != PX_SIG_SET && q.sigop != PX_SIG_ADD))
            return 0;
    } else if (q.slot != 0 || q.sigop != 0 || q.v != 0) {
        return 0;
    }
    if (q.op == STG_SIGNAL) {
        if (q.off != 0 || q.n != 0)
            return 0;
    } else if (q.inl) { /* a put of its bytes in the request */
        if (q.n > STG_INLINE || !stg_in(q.off, q.n, b->win_bytes))
            return 0;
        memcpy(op->data, q.data, (size_t)q.n);
    } else { /* bytes in the chunk, at their offset in a page */
        op->at = stg_at(q.off);
        if (!stg_in(op->at, q.n, b->chunk) ||
            !stg_in(q.off, q.n, q.op == STG_GET_HEAD ? b->head_bytes : b->win_bytes))
            return 0;
    }
    op->op = q.op;
    op->off = (size_t)q.off;
    op->n = (size_t)q.n;
    op->inl = q.inl;
    op->signal = sig;
    op->slot = q.slot;
    op->sigop = q.sigop;
    op->v = q.v;
    return 1;
}

/* Carries out request rq (its chunk: data) against c's own window; 0 when it is malformed
 * (then nothing of it is carried out). */
static int stg_do(px_comm *c, const stg_req *rq, char *data, size_t chunk)
{
    px_comm_area *a = c->area[c->rank];
    char *win = c->data[c->rank];
    comm_stg_bounds b = comm_stg_bounds_of(c, chunk);
    comm_stg_op op;

    if (!comm_stg_decode(rq, &b, &op))
        return 0;
    switch (op.op) {
    case STG_GET_HEAD:
        memcpy(data + op.at, (char *)a + op.off, op.n);
        break;
    case STG_GET:
        memcpy(data + op.at, win + op.off, op.n);
        break;
    case STG_PUT:
        memcpy(win + op.off, op.inl ? op.data : (const uint8_t *)data + op.at, op.n);
        break;
    }
    if (op.signal) {
        _Atomic uint64_t *s = comm_slot(a, c->n, op.slot);

        if (op.sigop == PX_SIG_ADD)
            atomic_fetch_add_explicit(s, op.v, memory_order_release);
        else
            atomic_store_explicit(s, op.v, memory_order_release);
        comm_wake(a);
    }
    return 1;
}

/* 1 when request number `done` of ring r is there. */
static inline int stg_ready(stg_ring *r, uint32_t done, memory_order mo)
{
    return atomic_load_explicit(&r->req[done % COMM_STG_SLOTS].seq, mo) == done + 1;
}

/* Carries out what peer p posted, if no other thread of this rank does. Returns the count. */
static int stg_consume(px_comm *c, stg_peer *p)
{
    stg_ring *r = p->in;
    int work = 0;

    for (;;) {
        uint32_t done;

        if (atomic_exchange_explicit(&p->clock, 1, memory_order_acquire) != 0)
            return work;
        done = atomic_load_explicit(&r->done, memory_order_relaxed);
        while (stg_ready(r, done, memory_order_acquire)) {
            uint32_t i = done % COMM_STG_SLOTS;

            PX_TSAN_ACQUIRE(&r->req[i].seq);
            PX_TSAN_ACQUIRE(c->area[c->rank]);
            if (!stg_do(c, &r->req[i], p->in_data + (size_t)i * p->chunk, p->chunk))
                atomic_fetch_add_explicit(&p->bad, 1, memory_order_relaxed);
            /* A later request, carried out by another thread of this rank, may follow from
             * this one through other processes (the requester's get done, its barrier, a
             * third rank's put): TSan sees none of that, so it is told here, with the word
             * every consumer acquires. */
            PX_TSAN_RELEASE(c->area[c->rank]);
            PX_TSAN_RELEASE(&r->done);
            atomic_store_explicit(&r->done, ++done, memory_order_seq_cst);
            util_wake(&r->done, &r->req_sleep, INT_MAX, 1);
            work++;
        }
        atomic_store_explicit(&p->clock, 0, memory_order_seq_cst);
        /* A request posted while we held the lock may have found another poller locked out. */
        if (!stg_ready(r, done, memory_order_seq_cst))
            return work;
    }
}

static int staged_progress(px_comm *c)
{
    stg_comm *sc = stg_of(c);
    int work = 0;

    for (int i = 0; i < sc->n; i++) {
        stg_peer *p = c->tl_state[sc->peers[i]];

        if (stg_ready(p->in, atomic_load_explicit(&p->in->done, memory_order_relaxed),
                      memory_order_relaxed))
            work += stg_consume(c, p);
    }
    return work;
}

static void staged_poll_enter(px_comm *c)
{
    stg_comm *sc = stg_of(c);

    for (int i = 0; i < sc->n; i++) {
        stg_peer *p = c->tl_state[sc->peers[i]];

        atomic_fetch_add_explicit(&p->in->pollers, 1, memory_order_seq_cst);
    }
}

static void staged_poll_leave(px_comm *c)
{
    stg_comm *sc = stg_of(c);

    for (int i = 0; i < sc->n; i++) {
        stg_peer *p = c->tl_state[sc->peers[i]];

        atomic_fetch_sub_explicit(&p->in->pollers, 1, memory_order_seq_cst);
    }
    (void)staged_progress(c); /* whatever came while requesters saw us polling */
}

/* ---- the requester's side ---- */

typedef struct stg_until {
    stg_ring *r;
    uint32_t done; /* wait until r->done has passed this count */
} stg_until;

static int stg_reached(void *arg)
{
    stg_until *u = arg;
    uint32_t d = atomic_load_explicit(&u->r->done, memory_order_acquire);

    if ((int32_t)(d - u->done) >= 0) {
        PX_TSAN_ACQUIRE(&u->r->done);
        return 1;
    }
    return 0;
}

/* Waits until p's outgoing ring has carried out `done` requests. */
static px_status stg_wait_done(px_comm *c, int peer, stg_peer *p, uint32_t done,
                               const char *what)
{
    stg_until u = {p->out, done};
    px_status st = comm_wait(c, stg_reached, &u, &p->out->done, &p->out->req_sleep, 0);
    char who[128];
    int blamed;

    if (st != PX_ETIMEDOUT)
        return st;
    comm_peer_text(c, peer, who, sizeof(who));
    if (p->proxied) /* the MPI proxies carry it out, not the peer: nobody to kill here */
        return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %g s for the MPI "
                            "proxies to carry out an mpi %s to %s (it has done %u of %u "
                            "requests): a host of the job is stopped or stuck; raise "
                            "PLEXUS_COMM_TIMEOUT_S only if it is slow", c->name, c->rank,
                            c->timeout_s, what, who,
                            atomic_load_explicit(&p->out->done, memory_order_relaxed),
                            atomic_load_explicit(&p->out->head, memory_order_relaxed));
    blamed = comm_blame(c, peer); /* its progress thread is silent: the parent kills it */
    return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %g s for %s to carry "
                        "out a staged %s (it has done %u of %u requests); its kernels and its "
                        "progress thread have not taken it (a stopped or stuck chip%s): raise "
                        "PLEXUS_COMM_TIMEOUT_S only if it is slow", c->name, c->rank,
                        c->timeout_s, who, what,
                        atomic_load_explicit(&p->out->done, memory_order_relaxed),
                        atomic_load_explicit(&p->out->head, memory_order_relaxed),
                        comm_blamed_text(blamed));
}

/* The ring's done count, acquired: the slots it frees may be written after this. */
static uint32_t stg_done_acquire(stg_ring *r)
{
    uint32_t d = atomic_load_explicit(&r->done, memory_order_acquire);

    PX_TSAN_ACQUIRE(&r->done);
    return d;
}

/*
 * Posts rq (with n bytes of src into its chunk when src is not NULL) to peer, waiting while
 * the ring is full. A caller that still needs chunks of earlier gets keeps the ring's head
 * within COMM_STG_SLOTS of the oldest of them itself. Caller holds p->plock. *idx receives the
 * request's number.
 */
static px_status stg_post(px_comm *c, int peer, stg_peer *p, const stg_req *rq,
                          const void *src, uint32_t *idx, const char *what)
{
    stg_ring *r = p->out;
    uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed), i = h % COMM_STG_SLOTS;
    stg_req *q = &r->req[i];
    px_status st;

    if (h - p->done_seen >= COMM_STG_SLOTS && h - (p->done_seen = stg_done_acquire(r)) >=
                                                  COMM_STG_SLOTS) {
        if ((st = stg_wait_done(c, peer, p, h - COMM_STG_SLOTS + 1, what)) != PX_OK)
            return st;
        p->done_seen = stg_done_acquire(r);
    }
    q->op = rq->op;
    q->flags = rq->flags;
    q->sigop = rq->sigop;
    q->slot = rq->slot;
    q->off = rq->off;
    q->n = rq->n;
    q->v = rq->v;
    q->rank = p->proxied ? (uint32_t)peer : 0; /* mpi: the rank's one ring names the target */
    q->inl = src != NULL && rq->n <= STG_INLINE;
    if (q->inl)
        memcpy(q->data, src, rq->n);
    else if (src != NULL)
        memcpy(p->out_data + (size_t)i * p->chunk + stg_at(rq->off), src, rq->n);
    PX_TSAN_RELEASE(&q->seq);
    /* A peer's later request may follow from this one (its barrier after our signal): what
     * this rank did so far happens before our own consumers carry that request out. TSan does
     * not see the other process; this tells it (stg_consume acquires the same word). */
    PX_TSAN_RELEASE(c->area[c->rank]);
    atomic_store_explicit(&q->seq, h + 1, memory_order_seq_cst);
    atomic_store_explicit(&r->head, h + 1, memory_order_relaxed);
    if (atomic_load_explicit(&r->pollers, memory_order_seq_cst) == 0)
        comm_bell_ring(p->bell); /* a system call only when its progress thread sleeps */
    *idx = h;
    return PX_OK;
}

px_status comm_stg_put(px_comm *c, int peer, size_t off, const void *src, size_t n)
{
    stg_peer *p = c->tl_state[peer];
    px_status st = PX_OK;
    uint32_t idx;

    pthread_mutex_lock(&p->plock);
    for (size_t at = 0, m; at < n && st == PX_OK; at += m) {
        stg_req rq = {.op = STG_PUT, .off = off + at};

        rq.n = m = stg_piece(p->chunk, off + at, n - at);
        st = stg_post(c, peer, p, &rq, (const char *)src + at, &idx, "put");
    }
    pthread_mutex_unlock(&p->plock);
    return st;
}

/* A put whose last request carries the signal: one request for a small put_signal. */
px_status comm_stg_put_signal(px_comm *c, int peer, size_t off, const void *src, size_t n,
                              uint32_t slot, px_sig_op op, uint64_t v)
{
    stg_peer *p = c->tl_state[peer];
    px_status st = PX_OK;
    size_t at = 0;
    uint32_t idx;

    pthread_mutex_lock(&p->plock);
    do {
        size_t m = stg_piece(p->chunk, off + at, n - at);
        stg_req rq = {.op = STG_PUT, .off = off + at, .n = m};

        if (at + m == n)
            rq = (stg_req){.op = STG_PUT, .off = off + at, .n = m, .slot = slot,
                           .sigop = (uint32_t)op, .flags = STG_F_SIGNAL, .v = v};
        st = stg_post(c, peer, p, &rq, m ? (const char *)src + at : NULL, &idx, "put_signal");
        at += m;
    } while (st == PX_OK && at < n);
    pthread_mutex_unlock(&p->plock);
    return st;
}

/* A get of n bytes at off (op STG_GET: data-relative, STG_GET_HEAD: head-relative),
 * pipelined over the ring's slots: fn(arg, at, piece, len) sees each piece in order while it is
 * still in the staging chunk (at: its offset from off). */
static px_status stg_get(px_comm *c, int peer, uint32_t op, size_t off, size_t n,
                         void (*fn)(void *arg, size_t at, const void *piece, size_t len),
                         void *arg)
{
    stg_peer *p = c->tl_state[peer];
    stg_ring *r = p->out;
    size_t posted = 0, copied = 0;
    uint32_t next, idx;
    px_status st = PX_OK;

    pthread_mutex_lock(&p->plock);
    next = atomic_load_explicit(&r->head, memory_order_relaxed);
    while (st == PX_OK && copied < n) {
        /* post while a slot is free of chunks not yet taken out */
        while (st == PX_OK && posted < n &&
               atomic_load_explicit(&r->head, memory_order_relaxed) - next < COMM_STG_SLOTS) {
            stg_req rq = {.op = op, .off = off + posted,
                          .n = stg_piece(p->chunk, off + posted, n - posted)};

            st = stg_post(c, peer, p, &rq, NULL, &idx, "get");
            posted += rq.n;
        }
        if (st == PX_OK)
            st = stg_wait_done(c, peer, p, next + 1, "get");
        if (st == PX_OK) {
            size_t m = stg_piece(p->chunk, off + copied, n - copied);

            fn(arg, copied, p->out_data + (size_t)(next % COMM_STG_SLOTS) * p->chunk +
                                stg_at(off + copied), m);
            copied += m;
            next++;
        }
    }
    pthread_mutex_unlock(&p->plock);
    return st;
}

static void stg_copy_out(void *arg, size_t at, const void *piece, size_t len)
{
    memcpy((char *)arg + at, piece, len);
}

px_status comm_stg_get(px_comm *c, int peer, size_t off, void *dst, size_t n)
{
    return stg_get(c, peer, STG_GET, off, n, stg_copy_out, dst);
}

px_status comm_stg_get_head(px_comm *c, int peer, size_t off, void *dst, size_t n)
{
    return stg_get(c, peer, STG_GET_HEAD, off, n, stg_copy_out, dst);
}

px_status comm_stg_get_each(px_comm *c, int peer, size_t off, size_t n,
                            void (*fn)(void *arg, size_t at, const void *piece, size_t len),
                            void *arg)
{
    return stg_get(c, peer, STG_GET, off, n, fn, arg);
}

px_status comm_stg_signal(px_comm *c, int peer, uint32_t slot, px_sig_op op, uint64_t v)
{
    stg_peer *p = c->tl_state[peer];
    stg_req rq = {.op = STG_SIGNAL, .slot = slot, .sigop = (uint32_t)op, .v = v};
    uint32_t idx;
    px_status st;

    pthread_mutex_lock(&p->plock);
    st = stg_post(c, peer, p, &rq, NULL, &idx, "signal");
    pthread_mutex_unlock(&p->plock);
    return st;
}

px_status comm_stg_coll(px_comm *c, int peer, size_t off, size_t n, uint64_t code,
                        comm_stg_ans *ans)
{
    stg_peer *p = c->tl_state[peer];
    stg_req rq = {.op = COMM_STG_COLL, .off = off, .n = n, .v = code};
    uint32_t idx;
    px_status st;

    pthread_mutex_lock(&p->plock);
    st = stg_post(c, peer, p, &rq, NULL, &idx, "allreduce");
    if (st == PX_OK)
        st = stg_wait_done(c, peer, p, idx + 1, "allreduce");
    if (st == PX_OK) /* written before done, which stg_reached acquired */
        *ans = p->out->ans[idx % COMM_STG_SLOTS];
    pthread_mutex_unlock(&p->plock);
    return st;
}

px_status comm_stg_flush_as(px_comm *c, int id)
{
    stg_comm *sc = stg_list(c, id);
    px_status st = PX_OK;

    /* mpi: every peer is on the one ring, so the first's wait is all of them */
    for (int i = 0; i < (id != PX_COMM_TL_STAGED && sc->n > 0 ? 1 : sc->n) && st == PX_OK; i++) {
        int q = sc->peers[i];
        stg_peer *p = c->tl_state[q];
        uint32_t h = atomic_load_explicit(&p->out->head, memory_order_relaxed);

        if (atomic_load_explicit(&p->out->done, memory_order_acquire) != h)
            st = stg_wait_done(c, q, p, h, "flush before a barrier");
    }
    return st;
}

static px_status staged_flush(px_comm *c)
{
    return comm_stg_flush_as(c, PX_COMM_TL_STAGED);
}

/* 1 when every request peer posted to this rank so far has been carried out (its head is
 * final once the peer stopped posting: a kernel-side shrink reads it after the peer's
 * proposal, which the peer publishes after its last request). */
static int staged_drained(px_comm *c, int peer)
{
    const stg_peer *p = c->tl_state[peer];

    return p == NULL || atomic_load_explicit(&p->in->done, memory_order_acquire) ==
                            atomic_load_explicit(&p->in->head, memory_order_acquire);
}

/* staged: host memory both chips map (a memfd); the chips of one worker share the host. */
static int staged_accept(const comm_pair_facts *f, char *why, size_t n)
{
    if (comm_pair_apart(f, why, n))
        return 0;
    if (px_caps_get(f->caps, PX_FACT_MEMFD) == 0) {
        snprintf(why, n, "memfd=0 on this host: no shared staging memory");
        return 0;
    }
    snprintf(why, n, "same host, host staging memory (memfd=1)");
    return 1;
}

const px_comm_tl px_comm_tl_staged = {
    .name = "staged",
    .id = PX_COMM_TL_STAGED,
    .in_place = 0,
    .maps_window = 0,
    .accept = staged_accept,
    .prepare = staged_prepare,
    .format = staged_format,
    .connect = staged_connect,
    .release = staged_release,
    .progress = staged_progress,
    .poll_enter = staged_poll_enter,
    .poll_leave = staged_poll_leave,
    .flush = staged_flush,
    .drained = staged_drained,
    .put = comm_stg_put,
    .get = comm_stg_get,
    .get_head = comm_stg_get_head,
    .get_each = comm_stg_get_each,
    .signal = comm_stg_signal,
    .put_signal = comm_stg_put_signal,
    .peer_ptr = NULL,
};
