/*
 * rma.c - the remote half of the mpi transport (transport/mpi.c is the chips' half: the ring
 * requester of transport/ring.c over one ring per rank).
 *
 * Forwarding: each new request in a ring of this worker's chips is read once, decoded against
 * the domain's bounds (the ring is the chip's to write: the proxy trusts nothing in it, as a
 * staged target does) and sent to the proxy of the target's worker with the request inside
 * (comm_proxy_msg), a put's bytes after it unless they are inline.
 * Serving: a request from another proxy is decoded once, straight into the operation, and
 * carried out against the target's window (mapped here; a put's bytes received straight into
 * it); a signal is applied and its owner woken (comm_stg_apply_signal), then it is answered,
 * a get's answer followed by its bytes.
 * Answers: each completes its request in the ring (a get's bytes into the request's chunk),
 * and `done` advances over every request answered in order, waking a requester asleep on it.
 */
#include "comm/proxy/proxy_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/wait.h"

/* ---- domains ---- */

void pdom_free(pdom *d)
{
    if (d == NULL)
        return;
    for (int i = 0; d->rings != NULL && i < d->nrings; i++)
        pcoll_free(d->rings[i].coll);
    pdom_views_free(d);
    free(d->chip);
    free(d->agree_told);
    free(d->window);
    free(d->host);
    free(d->rings);
    free(d->ring_of);
    free(d);
}

pdom *pdom_copy(const comm_proxy_dom *s)
{
    pdom *d = calloc(1, sizeof(*d));
    size_t n = (size_t)s->n;

    if (d == NULL)
        return NULL;
    d->id = s->id;
    d->n = s->n;
    d->nsig = s->nsig;
    d->data_bytes = s->data_bytes;
    d->nrings = s->nrings;
    d->revoke = s->revoke;
    d->agree = s->agree;
    d->head0 = px_comm_area_bytes(s->n, s->nsig);
    d->spare = comm_spare_head_off(d->head0, s->data_bytes);
    if ((d->window = calloc(n, sizeof(void *))) == NULL ||
        (d->host = calloc(n, sizeof(int))) == NULL ||
        (d->chip = calloc(n, sizeof(int))) == NULL ||
        (d->agree_told = calloc(COMM_AGREE_MAX_RANKS, sizeof(uint64_t))) == NULL ||
        !pdom_views_init(d) ||
        (d->rings = calloc((size_t)(s->nrings > 0 ? s->nrings : 1), sizeof(pring))) == NULL ||
        (d->ring_of = malloc(n * sizeof(int))) == NULL) {
        pdom_free(d);
        return NULL;
    }
    memcpy(d->window, s->window, n * sizeof(void *));
    memcpy(d->host, s->host, n * sizeof(int));
    for (size_t i = 0; i < n; i++)
        d->chip[i] = s->chip != NULL ? s->chip[i] : -1;
    for (size_t i = 0; i < n; i++)
        d->ring_of[i] = -1;
    for (int i = 0; i < s->nrings; i++) {
        pring *g = &d->rings[i];

        g->a = s->rings[i].a;
        g->chip = d->chip[g->a];
        g->b = s->n == 2 ? 1 - g->a : -1;
        g->r = s->rings[i].ring;
        g->chunk = s->rings[i].chunk;
        g->data = (char *)g->r + COMM_STG_HEAD_BYTES;
        g->sent = g->done = atomic_load_explicit(&g->r->done, memory_order_acquire);
        d->ring_of[g->a] = i;
    }
    return d;
}

pdom *proxy_dom(comm_proxy *p, uint32_t id)
{
    for (int i = 0; i < p->ndoms; i++)
        if (p->doms[i]->id == id)
            return p->doms[i];
    return NULL;
}

/* The bounds of a request in d's current generation (its heads hold cur.n ranks). */
static comm_stg_bounds pdom_bounds(const pdom *d, size_t chunk)
{
    comm_stg_bounds b = {.win_bytes = d->data_bytes + 2 * (size_t)PX_COMM_SLOT_BYTES,
                         .head_bytes = px_comm_area_bytes(d->cur.n, d->nsig),
                         .nslots = comm_slot_count(d->cur.n, d->nsig), .chunk = chunk};

    return b;
}

/* A kernel generation's heads alternate between the window's start and its spare (comm.h:
 * comm_spare_head_off); the data stays after generation 0's head. */
px_comm_area *pdom_area(const pdom *d, int r)
{
    return (px_comm_area *)((char *)d->window[r] + (d->cur.gen & 1 ? d->spare : 0));
}

char *pdom_data(const pdom *d, int r)
{
    return (char *)d->window[r] + d->head0;
}

/* ---- the requester's side: rings of this worker's chips ---- */

/* 1 when slot i of ring g has no send in flight (tests them). */
int pring_sends_done(comm_proxy *p, pring *g, uint32_t i)
{
    for (int k = 0; k < 2; k++) {
        int done = 0, e;

        if (g->sreq[i][k] == NULL)
            continue;
        if ((e = p->ops->test(g->sreq[i][k], &done)) != 0) {
            proxy_mpi_fail(p, e, "MPI_Test of a request");
            return 0;
        }
        if (!done)
            return 0;
        g->sreq[i][k] = NULL;
    }
    return 1;
}

/* Stores done over every request answered in order, and wakes a requester asleep on it. */
void pring_advance(pring *g)
{
    uint32_t d = g->done;

    while (d != g->sent && g->answered[d % COMM_STG_SLOTS]) {
        g->answered[d % COMM_STG_SLOTS] = 0;
        d++;
    }
    if (d == g->done)
        return;
    g->done = d;
    atomic_store_explicit(&g->r->done, d, memory_order_seq_cst);
    util_wake(&g->r->done, &g->r->req_sleep, INT_MAX, 1);
}

/* Sends request i of ring g (its line, checked: op) to the target's proxy; 0 when MPI
 * failed (said). */
static int pring_send(comm_proxy *p, pdom *d, pring *g, uint32_t i, const comm_stg_req *line,
                      const comm_stg_op *op, int dst)
{
    comm_proxy_msg *m = &g->hdr[i];
    int host = d->host[dst], e;

    memset(m, 0, sizeof(*m));
    m->magic = PROXY_MAGIC;
    m->dom = d->id;
    m->src = g->a;
    m->dst = dst;
    m->seq = g->sent;
    m->kgen = (uint32_t)d->cur.gen;
    /* the line as checked: every field its op does not use is 0 (the decoder's rule) */
    memcpy(&m->q, line, sizeof(m->q));
    atomic_init(&m->q.seq, 0);
    m->q.rank = (uint32_t)dst;
    memset(m->q.data, 0, sizeof(m->q.data));
    if (op->inl)
        memcpy(m->q.data, op->data, op->n);
    if ((e = p->ops->isend(m, sizeof(*m), host, PROXY_TAG_REQ, &g->sreq[i][0])) != 0) {
        proxy_mpi_fail(p, e, "MPI_Isend of a request");
        return 0;
    }
    if (op->op == COMM_STG_PUT && !op->inl && op->n > 0 &&
        (e = p->ops->isend(g->data + (size_t)i * g->chunk + op->at, op->n, host,
                           PROXY_TAG_DATA, &g->sreq[i][1])) != 0) {
        proxy_mpi_fail(p, e, "MPI_Isend of a put's bytes");
        return 0;
    }
    return 1;
}

/* Request i of ring g, its line read once: a pair collective's, or sent on (1), or skipped
 * whole when malformed, as a staged target does (0); -1 when it cannot be taken now. */
static int pring_take(comm_proxy *p, pdom *d, pring *g, uint32_t i, const comm_stg_req *line)
{
    comm_stg_bounds b;
    comm_stg_op op;
    uint32_t gen = line->rank >> COMM_STG_GEN_SHIFT, t = line->rank & COMM_STG_RANK_MASK;
    int me;

    /* a request of the next kernel generation: this host's survivors are ready, so the view
     * follows now (agree.c) or at a later sweep */
    if (gen > (uint32_t)d->cur.gen && d->agree != NULL)
        (void)pdom_follow(p, d);
    if (gen > (uint32_t)d->cur.gen)
        return -1;
    b = pdom_bounds(d, g->chunk);
    me = d->cur.pos[g->a];
    if (line->op == COMM_STG_COLL && d->cur.gen == 0) {
        if (!pcoll_take(p, d, g, i, line))
            return -1; /* the one before it is still being carried out */
        g->sent++;
        (void)pcoll_step(p, d, g); /* often all there (an exchange's) */
        pring_advance(g);          /* (a request refused at once) */
        return 1;
    }
    /* the target: another rank of the domain in the generation served (the line's word,
     * checked like the rest; a request of an older generation is a dead one's) */
    if (gen < (uint32_t)d->cur.gen || me < 0 || line->op == COMM_STG_COLL ||
        t >= (uint32_t)d->cur.n || (int)t == me || !comm_stg_decode(line, &b, &op)) {
        d->bad++;
        g->answered[i] = 1;
        g->sent++;
        pring_advance(g);
        return 0;
    }
    if (!pring_send(p, d, g, i, line, &op, d->cur.orig[t]))
        return -1;
    g->sent++;
    p->forwarded++;
    return 1;
}

/* Sends on every new request of ring g; returns how many. */
int pring_forward(comm_proxy *p, pdom *d, pring *g)
{
    int work = g->coll != NULL ? pcoll_step(p, d, g) : 0;

    while (!p->failed && !g->dead && g->sent - g->done < COMM_STG_SLOTS &&
           atomic_load_explicit(&g->r->req[g->sent % COMM_STG_SLOTS].seq,
                                memory_order_acquire) == g->sent + 1) {
        uint32_t i = g->sent % COMM_STG_SLOTS;
        comm_stg_req line;
        int t;

        if (!pring_sends_done(p, g, i))
            break; /* answered, so finishing: the next sweep takes it */
        memcpy(&line, &g->r->req[i], sizeof(line)); /* one read: the chip may write it */
        __asm__ __volatile__("" ::: "memory");
        if ((t = pring_take(p, d, g, i, &line)) < 0)
            break;
        work += t;
    }
    return work;
}

/* ---- answers ---- */

/* The ring an answer from host src is for, or NULL (said; its bytes drained). */
static pring *proxy_answer_ring(comm_proxy *p, int src, const comm_proxy_msg *m, int has_bytes)
{
    pdom *d = proxy_dom(p, m->dom);
    pring *g = NULL;
    int gi = -1;

    if (d != NULL && m->src >= 0 && m->src < d->n && m->dst >= 0 && m->dst < d->n)
        gi = d->ring_of[m->src];
    if (gi >= 0)
        g = &d->rings[gi];
    if (g == NULL && d == NULL) { /* the domain was removed here: nobody waits for it */
        PX_LOG_DEBUG("mpi proxy (host %d): a late answer from host %d for domain %u (removed)",
                     p->rank, src, m->dom);
        if (has_bytes)
            proxy_drain(p, src, m->q.n);
        return NULL;
    }
    if (g == NULL || m->seq - g->done >= g->sent - g->done ||
        g->hdr[m->seq % COMM_STG_SLOTS].seq != m->seq ||
        g->hdr[m->seq % COMM_STG_SLOTS].dst != m->dst || d->host[m->dst] != src) {
        PX_LOG_WARN("mpi proxy (host %d): an answer from host %d for domain %u rank %d -> "
                    "%d request %u matches nothing in flight; dropped", p->rank, src, m->dom,
                    m->src, m->dst, m->seq);
        if (has_bytes)
            proxy_drain(p, src, m->q.n);
        return NULL;
    }
    return g;
}

/* An answer from host src: completes its request (a get's bytes first). */
int proxy_answer(comm_proxy *p, int src, const void *msg, size_t n)
{
    const comm_proxy_msg *m = msg, *q;
    pdom *d;
    int has_bytes = (m->q.op == COMM_STG_GET || m->q.op == COMM_STG_GET_HEAD) &&
                    m->status == PX_OK && m->q.n > 0, e;
    pring *g;
    uint32_t i = m->seq % COMM_STG_SLOTS;
    psrc *ps = &p->src[src];

    (void)n;
    if (!proxy_msg_ok(p, src, m) || (g = proxy_answer_ring(p, src, m, has_bytes)) == NULL)
        return 0;
    if (m->status != PX_OK && (d = proxy_dom(p, m->dom))->revoke != NULL &&
        atomic_load_explicit(d->revoke, memory_order_acquire) != 0) {
        /* revoked: the target's host may have released it already; the requester's wait
         * ends with PX_EREVOKED at its next turn */
        PX_LOG_DEBUG("mpi proxy (host %d): domain %u (revoked) rank %d -> rank %d: request %u "
                     "refused by host %d", p->rank, m->dom, m->src, m->dst, m->seq, src);
        return 0;
    }
    if (m->status != PX_OK) {
        /* the target's proxy skipped it (no such domain there any more, or out of bounds):
         * never completed, so the requester's wait ends at its deadline with an error
         * instead of a get returning bytes that were never fetched */
        PX_LOG_ERROR("mpi proxy (host %d): domain %u rank %d -> rank %d: request %u was refused "
                     "by host %d (%s: the domain is gone there, or the request is out of its "
                     "bounds); the requester's wait ends at its deadline", p->rank, m->dom,
                     m->src, m->dst, m->seq, src, px_status_name((px_status)m->status));
        return 0;
    }
    q = &g->hdr[i]; /* what we sent: its range, not the answer's */
    if (has_bytes && m->q.n != q->q.n) {
        proxy_drain(p, src, m->q.n);
        return 0; /* never completed: the requester's wait ends at its deadline */
    }
    if (!has_bytes) {
        g->answered[i] = 1;
        pring_advance(g);
        return 0;
    }
    ps->kind = PSRC_GET;
    ps->m = *m;
    ps->d = proxy_dom(p, m->dom);
    ps->g = g;
    if ((e = p->ops->irecv(g->data + (size_t)i * g->chunk + comm_stg_at(q->q.off), q->q.n, src,
                           PROXY_TAG_DATA, &ps->req)) != 0)
        proxy_mpi_fail(p, e, "MPI_Irecv of a get's bytes");
    return 0;
}

/* ---- the target's side: requests from proxies for this worker's members ---- */

/* A put's bytes are in (or there were none): its signal, then the answer. */
void proxy_serve_end(comm_proxy *p, int src, const comm_proxy_msg *m, pdom *d, int ok,
                     const comm_stg_op *op, px_comm_area *a)
{
    comm_proxy_msg *ans;
    char *win = ok ? pdom_data(d, m->dst) : NULL;

    if (ok && op->signal)
        comm_stg_apply_signal(a, d->cur.n, op);
    if ((ans = malloc(sizeof(*ans))) == NULL) {
        PX_LOG_ERROR("mpi proxy (host %d): out of memory for an answer", p->rank);
        return;
    }
    *ans = *m;
    ans->status = ok ? PX_OK : PX_EINVAL;
    if (!proxy_send(p, ans, ans, sizeof(*ans), src, PROXY_TAG_REP))
        return;
    if (ok && (op->op == COMM_STG_GET || op->op == COMM_STG_GET_HEAD) && op->n > 0)
        (void)proxy_send(p, op->op == COMM_STG_GET ? win + op->off : (char *)a + op->off, NULL,
                         op->n, src, PROXY_TAG_DATA);
    p->served++;
}

/* Says why request m from host src is refused (d: its domain here, or NULL). */
static void proxy_serve_refused(comm_proxy *p, int src, const comm_proxy_msg *m, const pdom *d)
{
    if (d == NULL) /* released here (a revoked domain's late requests) */
        PX_LOG_DEBUG("mpi proxy (host %d): a request from host %d for domain %u, which is not "
                     "(or no longer) served here: refused", p->rank, src, m->dom);
    else if (m->kgen != (uint32_t)d->cur.gen || (m->dst >= 0 && m->dst < d->n &&
                                                 d->cur.pos[m->dst] < 0) ||
             (m->src >= 0 && m->src < d->n && d->cur.pos[m->src] < 0))
        PX_LOG_DEBUG("mpi proxy (host %d): a request from host %d for domain %u rank %d -> %d "
                     "of kernel generation %u, where generation %d is served (a dead or "
                     "excluded rank's): refused", p->rank, src, m->dom, m->src, m->dst,
                     m->kgen, d->cur.gen);
    else
        PX_LOG_WARN("mpi proxy (host %d): skipped a malformed request from host %d (domain "
                    "%u, rank %d -> %d, op %u)", p->rank, src, m->dom, m->src, m->dst, m->q.op);
}

/* A request from host src: decoded once into the operation, carried out against its target's
 * window (a put's bytes received straight into it), then answered. */
int proxy_serve(comm_proxy *p, int src, const void *msg, size_t n)
{
    const comm_proxy_msg *m = msg;
    pdom *d = proxy_dom(p, m->dom);
    comm_stg_bounds b;
    comm_stg_op op;
    int ok, e;
    px_comm_area *a = NULL;
    psrc *ps = &p->src[src];

    (void)n;
    if (!proxy_msg_ok(p, src, m))
        return 0;
    /* a request of the next kernel generation: this host's survivors are ready (the
     * requester saw their entries, which this proxy sent on after reading them), so the view
     * follows now (agree.c) */
    if (d != NULL && m->kgen > (uint32_t)d->cur.gen)
        (void)pdom_follow(p, d);
    memset(&op, 0, sizeof(op));
    /* both ranks members of the generation served here (generation-0 numbers on the wire):
     * a request of another generation is a dead or revoked one's */
    ok = d != NULL && m->dst >= 0 && m->dst < d->n && m->src >= 0 && m->src < d->n &&
         d->window[m->dst] != NULL && d->host[m->src] == src &&
         m->kgen == (uint32_t)d->cur.gen && d->cur.pos[m->dst] >= 0 &&
         d->cur.pos[m->src] >= 0;
    if (ok) {
        b = pdom_bounds(d, COMM_MPI_CHUNK);
        ok = comm_stg_decode(&m->q, &b, &op);
    }
    if (ok)
        a = pdom_area(d, m->dst);
    else
        proxy_serve_refused(p, src, m, d);
    if (m->q.op == COMM_STG_PUT && !m->q.inl && m->q.n > 0) {
        if (!ok) {
            proxy_drain(p, src, m->q.n);
            ps->m = *m; /* answered (refused) when drained */
            return 0;
        }
        *ps = (psrc){.kind = PSRC_PUT, .m = *m, .d = d, .op = op, .a = a};
        if ((e = p->ops->irecv(pdom_data(d, m->dst) + op.off, op.n, src, PROXY_TAG_DATA,
                               &ps->req)) != 0)
            proxy_mpi_fail(p, e, "MPI_Irecv of a put's bytes");
        return 0;
    }
    if (ok && op.op == COMM_STG_PUT && op.inl)
        memcpy(pdom_data(d, m->dst) + op.off, op.data, op.n);
    proxy_serve_end(p, src, m, d, ok, &op, a);
    return 0;
}
