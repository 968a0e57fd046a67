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
 * The requester's side (post, put/get/signal, flush) is the ring requester (ring.c), which
 * mpi shares; this file is the pair's memory, its connect and the target's side.
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
#include "comm/transport/ring.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

typedef comm_ring_peer stg_peer;

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

/* This rank's staged peers. */
static comm_ring_list *stg_of(const px_comm *c)
{
    return comm_ring_list_of(c, &px_comm_tl_staged);
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

static px_status staged_connect(px_comm *c, int peer, const comm_link *l)
{
    return comm_ring_connect(c, peer, l, &px_comm_tl_staged);
}

uint32_t comm_stg_skipped(const px_comm *c, int peer)
{
    const stg_peer *p;

    if (peer < 0 || peer >= c->n || c->tl[peer] != &px_comm_tl_staged ||
        (p = c->tl_state[peer]) == NULL)
        return 0;
    return atomic_load_explicit(&p->bad, memory_order_relaxed);
}

static void staged_release(px_comm *c)
{
    comm_ring_release(c, &px_comm_tl_staged);
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
        op->at = comm_stg_at(q.off);
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

void comm_stg_apply_signal(px_comm_area *a, int n, const comm_stg_op *op)
{
    _Atomic uint64_t *s = comm_slot(a, n, op->slot);

    if (op->sigop == PX_SIG_ADD)
        atomic_fetch_add_explicit(s, op->v, memory_order_release);
    else
        atomic_store_explicit(s, op->v, memory_order_release);
    comm_wake(a);
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
    if (op.signal)
        comm_stg_apply_signal(a, c->n, &op);
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
    comm_ring_list *sc = stg_of(c);
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
    comm_ring_list *sc = stg_of(c);

    for (int i = 0; i < sc->n; i++) {
        stg_peer *p = c->tl_state[sc->peers[i]];

        atomic_fetch_add_explicit(&p->in->pollers, 1, memory_order_seq_cst);
    }
}

static void staged_poll_leave(px_comm *c)
{
    comm_ring_list *sc = stg_of(c);

    for (int i = 0; i < sc->n; i++) {
        stg_peer *p = c->tl_state[sc->peers[i]];

        atomic_fetch_sub_explicit(&p->in->pollers, 1, memory_order_seq_cst);
    }
    (void)staged_progress(c); /* whatever came while requesters saw us polling */
}

static px_status staged_flush(px_comm *c)
{
    return comm_ring_flush(c, &px_comm_tl_staged);
}

/* 1 when every request peer posted to this rank so far has been carried out: the request
 * after the last one carried out is not there (a request is posted when its sequence word
 * is stored; `head` comes after it, and a peer that died between the two never stores it).
 * A kernel-side shrink reads it after the peer's proposal, which the peer publishes after its
 * last request; a wait that a death or a revocation ends reads it after it carried out what
 * was there (comm.c: comm_settled). */
static int staged_drained(px_comm *c, int peer)
{
    const stg_peer *p = c->tl_state[peer];

    return p == NULL || !stg_ready(p->in, atomic_load_explicit(&p->in->done,
                                                               memory_order_acquire),
                                   memory_order_acquire);
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
    .put = comm_ring_put,
    .get = comm_ring_get,
    .get_head = comm_ring_get_head,
    .get_each = comm_ring_get_each,
    .signal = comm_ring_signal,
    .put_signal = comm_ring_put_signal,
    .peer_ptr = NULL,
    .pair_coll = NULL,
};
