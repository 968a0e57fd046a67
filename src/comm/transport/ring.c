/*
 * ring.c - the ring requester (ring.h), shared by every transport whose requests travel
 * through rings of staged.h's format (staged: a pair's two rings, the target rank consumes;
 * mpi: the rank's one ring, the worker's MPI proxy consumes). What differs between them the
 * requester reads from the transport's row (per_rank, proxied), never from its id.
 *
 * Posting: request i uses request slot and chunk i % COMM_STG_SLOTS; the line is written,
 * then its sequence word stored last (seq_cst), then the head; the consumer's doorbell is
 * rung only when no thread of the consumer polls the ring (its progress thread may sleep).
 * A put of at most COMM_STG_INLINE bytes travels inside its request, and a request's bytes
 * sit in their chunk at the offset in a page that they have in the window (no 4K aliasing
 * between window, staging memory and a collective's scratch). The requester re-reads `done`
 * only when its cached copy says the ring is full; every wait on `done` is the comm wait
 * (deadline PLEXUS_COMM_TIMEOUT_S, deaths of members checked).
 */
#include "comm/transport/ring.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/tsan.h"
#include "util/util.h"

typedef comm_stg_req stg_req;
typedef comm_stg_ring stg_ring;
typedef comm_ring_peer stg_peer;

/* The largest piece of a request at data offset off: the chunk less that offset in a page. */
static inline size_t stg_piece(size_t chunk, uint64_t off, size_t left)
{
    return PX_MIN(chunk - comm_stg_at(off), left);
}

/* ---- connect and release ---- */

/* This rank's list of peers on t, made at its first peer. */
static comm_ring_list *ring_list(px_comm *c, const px_comm_tl *t)
{
    comm_ring_list *sc = comm_ring_list_of(c, t);

    if (sc == NULL &&
        (sc = c->tl_comm[t->id] = calloc(1, sizeof(*sc) + (size_t)c->n * sizeof(int))) == NULL)
        (void)px_set_error(PX_ENOMEM, "comm: domain \"%s\" rank %d: out of memory for the "
                           "%s peers", c->name, c->rank, t->name);
    return sc;
}

static stg_peer *ring_peer_new(px_comm *c, int peer, const comm_link *l, const px_comm_tl *t)
{
    stg_peer *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        (void)px_set_error(PX_ENOMEM, "comm: domain \"%s\" rank %d: out of memory for the "
                           "%s state of rank %d", c->name, c->rank, t->name, peer);
        return NULL;
    }
    p->t = t;
    p->bell = l->bell;
    pthread_mutex_init(&p->plock, NULL);
    return p;
}

/*
 * per_rank: the rank's one ring (l->shared: t->prepare(n) bytes), the same stg_peer for every
 * peer on t (one lock, one sequence: each request names its target), made at the first and
 * checked to be the same memory at the others.
 */
static px_status ring_connect_rank(px_comm *c, int peer, const comm_link *l,
                                   const px_comm_tl *t)
{
    stg_ring *r = l->shared;
    comm_ring_list *sc = comm_ring_list_of(c, t);
    stg_peer *p = sc != NULL && sc->n > 0 ? c->tl_state[sc->peers[0]] : NULL;
    size_t bytes = t->prepare(c->n), chunk = (bytes - COMM_STG_HEAD_BYTES) / COMM_STG_SLOTS;

    if (p != NULL && p->out != r)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: rank %d's link names "
                            "another ring than its other %s peers' (a defect of the set-up)",
                            c->name, c->rank, peer, t->name);
    if (p == NULL && (l->shared_bytes != bytes || r->magic != COMM_STG_MAGIC ||
                      r->chunk != chunk))
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: its %s ring (%zu bytes, "
                            "magic %#x, chunk %u) is not formatted as one (%zu bytes, chunk "
                            "%zu); a defect of the set-up", c->name, c->rank, t->name,
                            l->shared_bytes, r->magic, r->chunk, bytes, chunk);
    if ((sc = ring_list(c, t)) == NULL)
        return PX_ENOMEM;
    if (p == NULL) {
        if ((p = ring_peer_new(c, peer, l, t)) == NULL)
            return PX_ENOMEM;
        p->out = r;
        p->out_data = (char *)r + COMM_STG_HEAD_BYTES;
        p->chunk = chunk;
    }
    c->tl_state[peer] = p;
    sc->peers[sc->n++] = peer;
    return PX_OK;
}

/* A pair's memory: ring 0 the lower rank's requests, ring 1 the higher's. The header is the
 * formatting rank's to write: its chunk is read once, here, and must describe exactly the
 * bytes mapped, in both rings. */
static px_status ring_connect_pair(px_comm *c, int peer, const comm_link *l,
                                   const px_comm_tl *t)
{
    stg_ring *r0 = l->shared, *r1;
    comm_ring_list *sc;
    stg_peer *p;
    size_t chunk = r0->chunk, bytes = l->shared_bytes;
    int mine = c->rank < peer ? 0 : 1;

    if (bytes < 2 * (size_t)COMM_STG_HEAD_BYTES || r0->magic != COMM_STG_MAGIC || chunk == 0 ||
        chunk % PX_COMM_DATA_ALIGN != 0 || comm_stg_pair_bytes(chunk) != bytes)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the staging memory for "
                            "rank %d (%zu bytes) is not formatted for its size (magic %#x, "
                            "chunk %zu: chunks must be multiples of %d bytes filling the "
                            "mapping); a defect of the rank that formatted it", c->name,
                            c->rank, peer, bytes, r0->magic, chunk, PX_COMM_DATA_ALIGN);
    r1 = comm_stg_ring_at(l->shared, chunk, 1);
    if (r1->magic != COMM_STG_MAGIC || r1->chunk != chunk)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the staging memory for "
                            "rank %d has rings of different formats (chunk %zu and %u); a "
                            "defect of the rank that formatted it", c->name, c->rank, peer,
                            chunk, r1->chunk);
    if ((sc = ring_list(c, t)) == NULL || (p = ring_peer_new(c, peer, l, t)) == NULL)
        return PX_ENOMEM;
    p->out = comm_stg_ring_at(l->shared, chunk, mine);
    p->in = comm_stg_ring_at(l->shared, chunk, 1 - mine);
    p->out_data = (char *)p->out + COMM_STG_HEAD_BYTES;
    p->in_data = (char *)p->in + COMM_STG_HEAD_BYTES;
    p->chunk = chunk;
    c->tl_state[peer] = p;
    sc->peers[sc->n++] = peer;
    return PX_OK;
}

px_status comm_ring_connect(px_comm *c, int peer, const comm_link *l, const px_comm_tl *t)
{
    if (l->shared == NULL || peer == c->rank || peer < 0 || peer >= c->n || l->bell == NULL ||
        c->tl_state[peer] != NULL)
        return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the %s memory or "
                            "doorbell for rank %d is missing, or the rank is not a peer not "
                            "yet connected", c->name, c->rank, t->name, peer);
    return t->per_rank ? ring_connect_rank(c, peer, l, t) : ring_connect_pair(c, peer, l, t);
}

void comm_ring_release(px_comm *c, const px_comm_tl *t)
{
    comm_ring_list *sc = comm_ring_list_of(c, t);

    for (int i = 0; sc != NULL && i < sc->n; i++) {
        stg_peer *p = c->tl_state[sc->peers[i]];
        uint32_t bad;

        c->tl_state[sc->peers[i]] = NULL;
        if (t->per_rank && i > 0)
            continue; /* every peer's is the first's (the rank's one ring) */
        bad = p != NULL ? atomic_load_explicit(&p->bad, memory_order_relaxed) : 0;
        if (bad > 0)
            PX_LOG_WARN("comm[%s]: rank %d skipped %u malformed %s requests from rank %d "
                        "(a defect: requests are checked before they are posted)", c->name,
                        c->rank, bad, t->name, sc->peers[i]);
        if (p != NULL)
            pthread_mutex_destroy(&p->plock);
        free(p);
    }
    free(sc);
    c->tl_comm[t->id] = NULL;
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
    if (p->t->proxied) /* the MPI proxies carry it out, not the peer: nobody to kill here */
        return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %g s for the MPI "
                            "proxies to carry out an %s %s to %s (it has done %u of %u "
                            "requests): a host of the job is stopped or stuck; raise "
                            "PLEXUS_COMM_TIMEOUT_S only if it is slow", c->name, c->rank,
                            c->timeout_s, p->t->name, what, who,
                            atomic_load_explicit(&p->out->done, memory_order_relaxed),
                            atomic_load_explicit(&p->out->head, memory_order_relaxed));
    blamed = comm_blame(c, peer); /* its progress thread is silent: the parent kills it */
    return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %g s for %s to carry "
                        "out a %s %s (it has done %u of %u requests); its kernels and its "
                        "progress thread have not taken it (a stopped or stuck chip%s): raise "
                        "PLEXUS_COMM_TIMEOUT_S only if it is slow", c->name, c->rank,
                        c->timeout_s, who, p->t->name, what,
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
    /* one ring for all: it names the target, and the kernel generation whose numbering the
     * target is in (the proxy follows a kernel-side shrink: comm/proxy/agree.c) */
    q->rank = p->t->per_rank ? (uint32_t)peer | (uint32_t)c->kgen << COMM_STG_GEN_SHIFT : 0;
    q->inl = src != NULL && rq->n <= COMM_STG_INLINE;
    if (q->inl)
        memcpy(q->data, src, rq->n);
    else if (src != NULL)
        memcpy(p->out_data + (size_t)i * p->chunk + comm_stg_at(rq->off), src, rq->n);
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

px_status comm_ring_put(px_comm *c, int peer, size_t off, const void *src, size_t n)
{
    stg_peer *p = c->tl_state[peer];
    px_status st = PX_OK;
    uint32_t idx;

    pthread_mutex_lock(&p->plock);
    for (size_t at = 0, m; at < n && st == PX_OK; at += m) {
        stg_req rq = {.op = COMM_STG_PUT, .off = off + at};

        rq.n = m = stg_piece(p->chunk, off + at, n - at);
        st = stg_post(c, peer, p, &rq, (const char *)src + at, &idx, "put");
    }
    pthread_mutex_unlock(&p->plock);
    return st;
}

/* A put whose last request carries the signal: one request for a small put_signal. */
px_status comm_ring_put_signal(px_comm *c, int peer, size_t off, const void *src, size_t n,
                              uint32_t slot, px_sig_op op, uint64_t v)
{
    stg_peer *p = c->tl_state[peer];
    px_status st = PX_OK;
    size_t at = 0;
    uint32_t idx;

    pthread_mutex_lock(&p->plock);
    do {
        size_t m = stg_piece(p->chunk, off + at, n - at);
        stg_req rq = {.op = COMM_STG_PUT, .off = off + at, .n = m};

        if (at + m == n)
            rq = (stg_req){.op = COMM_STG_PUT, .off = off + at, .n = m, .slot = slot,
                           .sigop = (uint32_t)op, .flags = COMM_STG_F_SIGNAL, .v = v};
        st = stg_post(c, peer, p, &rq, m ? (const char *)src + at : NULL, &idx, "put_signal");
        at += m;
    } while (st == PX_OK && at < n);
    pthread_mutex_unlock(&p->plock);
    return st;
}

/* A get of n bytes at off (op COMM_STG_GET: data-relative, COMM_STG_GET_HEAD: head-relative),
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
                                comm_stg_at(off + copied), m);
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

px_status comm_ring_get(px_comm *c, int peer, size_t off, void *dst, size_t n)
{
    return stg_get(c, peer, COMM_STG_GET, off, n, stg_copy_out, dst);
}

px_status comm_ring_get_head(px_comm *c, int peer, size_t off, void *dst, size_t n)
{
    return stg_get(c, peer, COMM_STG_GET_HEAD, off, n, stg_copy_out, dst);
}

px_status comm_ring_get_each(px_comm *c, int peer, size_t off, size_t n,
                            void (*fn)(void *arg, size_t at, const void *piece, size_t len),
                            void *arg)
{
    return stg_get(c, peer, COMM_STG_GET, off, n, fn, arg);
}

px_status comm_ring_signal(px_comm *c, int peer, uint32_t slot, px_sig_op op, uint64_t v)
{
    stg_peer *p = c->tl_state[peer];
    stg_req rq = {.op = COMM_STG_SIGNAL, .slot = slot, .sigop = (uint32_t)op, .v = v};
    uint32_t idx;
    px_status st;

    pthread_mutex_lock(&p->plock);
    st = stg_post(c, peer, p, &rq, NULL, &idx, "signal");
    pthread_mutex_unlock(&p->plock);
    return st;
}

px_status comm_ring_pair_coll(px_comm *c, int peer, size_t off, size_t n, uint64_t code,
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

px_status comm_ring_flush(px_comm *c, const px_comm_tl *t)
{
    comm_ring_list *sc = comm_ring_list_of(c, t);
    px_status st = PX_OK;

    /* per_rank: every peer is on the one ring, so the first's wait is all of them */
    for (int i = 0; i < (t->per_rank && sc->n > 0 ? 1 : sc->n) && st == PX_OK; i++) {
        int q = sc->peers[i];
        stg_peer *p = c->tl_state[q];
        uint32_t h = atomic_load_explicit(&p->out->head, memory_order_relaxed);

        if (atomic_load_explicit(&p->out->done, memory_order_acquire) != h)
            st = stg_wait_done(c, q, p, h, "flush before a barrier");
    }
    return st;
}
