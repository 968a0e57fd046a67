/*
 * pcoll.c - the pair collectives of the mpi transport (transport/mpi.c's pair_coll; coll.c
 * takes them for a domain of two ranks whose pair is mpi).
 *
 * A domain of two ranks whose pair is mpi: each rank posts one COMM_STG_COLL request (v: its
 * call's signature, dtype and op) and its proxy carries the allreduce out with the peer's,
 * in segments of PCOLL_SEG bytes, each a header (the call: bytes, signature, dtype, op; the
 * segment's index) and its bytes, sent straight from and received into the windows:
 *   halves   sent when the request is taken: this side's copy of the half the other folds
 *            (up to PCOLL_EXCHANGE_MAX the whole buffer, and each side folds all of it: one
 *            exchange, no results). Each side compares the two calls: a mismatch ends both
 *            requests with PX_EINVAL and the other's call. (As with every algorithm, a put
 *            into a rank's buffer is in its input only when a barrier separates them.)
 *   fold     each segment as it is in, rank 0's element first, into the window (rank 1
 *            folds into the copy received, then copies it in): the bits of rs_ag and of a
 *            serial rank-order fold;
 *   results  each folded segment to the peer, received into a copy and put into the window
 *            once this side's half segment has gone out of that range.
 * The request is done once every send from the window has finished: the chip may write its
 * buffer then. The copies are kept between calls (no page faults after the first). A
 * reduce_scatter (COMM_STG_COLL_RS) is the halves and the fold: each rank's half is its block.
 */
#include "comm/proxy/proxy_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

enum { PCOLL_HALF = 1, PCOLL_RESULT };
#define PCOLL_EXCHANGE_MAX (64u << 10)
#define PCOLL_SEG (256u << 10) /* a multiple of every element size */

typedef struct pcoll_in {        /* what the peer sent for one call */
    int hello;                   /* its first segment's header came */
    uint32_t k, nin;             /* the call's number on the ring; its segments in */
    uint64_t off, n, code;
    char *buf;                   /* its copy of this rank's part (kept between calls) */
    size_t cap;
} pcoll_in;

typedef struct pcoll {
    int active;                  /* the chip's request is being carried out */
    uint32_t slot, k;            /* its ring slot; the call's number on the ring */
    uint64_t off, n, code;
    uint32_t nfold, nres, ncopy; /* segments folded; results in; results in the window */
    int direct;                  /* the result coming in goes straight into the window */
    px_mpi_req **hreq, **rreq;   /* per segment: the half's and the result's send */
    uint32_t nreq;               /* entries of each */
    char *rbuf;                  /* the peer's results (kept between calls) */
    size_t rcap;
    pcoll_in in[2];              /* by the call's number, mod 2 */
} pcoll;

void pcoll_free(pcoll *c)
{
    if (c == NULL)
        return;
    free(c->in[0].buf);
    free(c->in[1].buf);
    free(c->rbuf);
    free(c->hreq);
    free(c->rreq);
    free(c);
}

static size_t pcoll_es(uint64_t code)
{
    int dt = (int)(code >> 32 & 0xff);

    return dt == PX_F32 || dt == PX_F64 || dt == PX_I32 || dt == PX_I64 ?
           px_dtype_size((px_dtype)dt) : 0;
}

/* 1 for a reduce_scatter (COMM_STG_COLL_RS): halves only, and never the whole buffer (the
 * other rank's block stays as it was here). */
static int pcoll_rs(uint64_t code)
{
    return (code & COMM_STG_COLL_RS) != 0;
}

static int pcoll_whole(uint64_t n, uint64_t code)
{
    return !pcoll_rs(code) && (n <= PCOLL_EXCHANGE_MAX || n / pcoll_es(code) < 2);
}

/* Bytes [lo, hi) of a call of n bytes that rank r folds: the whole buffer for an exchange,
 * else its half (rank 0 the first ceil(count / 2) elements). */
static void pcoll_part(uint64_t n, uint64_t code, int r, size_t *lo, size_t *hi)
{
    size_t es = pcoll_es(code), count = (size_t)n / es, h0 = count - count / 2;

    if (pcoll_whole(n, code)) {
        *lo = 0;
        *hi = (size_t)n;
        return;
    }
    *lo = r == 0 ? 0 : h0 * es;
    *hi = r == 0 ? h0 * es : count * es;
}

static uint32_t pcoll_nseg(size_t bytes)
{
    return (uint32_t)((bytes + PCOLL_SEG - 1) / PCOLL_SEG);
}

/* Bytes of segment j of a part of `bytes`. */
static size_t pcoll_seglen(size_t bytes, uint32_t j)
{
    return PX_MIN((size_t)PCOLL_SEG, bytes - (size_t)j * PCOLL_SEG);
}

/* 1 when *r is no send in flight (tested; NULL once finished). */
static int pcoll_sent(comm_proxy *p, px_mpi_req **r)
{
    int done = 0, e;

    if (*r == NULL)
        return 1;
    if ((e = p->ops->test(*r, &done)) != 0) {
        proxy_mpi_fail(p, e, "MPI_Test of an allreduce's send");
        return 0;
    }
    if (done)
        *r = NULL;
    return done;
}

/* 1 when no send of c from a window is in flight. */
int pcoll_idle(comm_proxy *p, pcoll *c)
{
    for (uint32_t j = 0; j < c->nreq; j++)
        if (!pcoll_sent(p, &c->hreq[j]) || !pcoll_sent(p, &c->rreq[j]))
            return 0;
    return 1;
}

/* Grows *buf to hold n bytes (kept: its pages stay mapped for the next call). */
static int pcoll_room(char **buf, size_t *cap, size_t n)
{
    char *b;

    if (*cap >= n)
        return 1;
    if ((b = malloc(n)) == NULL)
        return 0;
    free(*buf);
    *buf = b;
    *cap = n;
    return 1;
}

/* Sends segment j of kind `kind` of ring g's call: its header, then its nb bytes (*req). */
static int pcoll_send(comm_proxy *p, pdom *d, pring *g, int kind, uint32_t j, const void *bytes,
                      size_t nb, px_mpi_req **req)
{
    pcoll *c = g->coll;
    comm_proxy_msg *m = calloc(1, sizeof(*m));
    int host = d->host[g->b], e;

    if (m == NULL) {
        PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce's message", p->rank);
        p->failed = 1;
        return 0;
    }
    m->magic = PROXY_MAGIC;
    m->q.op = (uint8_t)kind;
    m->dom = d->id;
    m->src = g->a;
    m->dst = g->b;
    m->q.slot = j;
    m->seq = c->k;
    m->q.off = c->off;
    m->q.n = c->n;
    m->q.v = c->code;
    if (nb <= PCOLL_INLINE) { /* small: its bytes in the header's message, copied */
        comm_proxy_msg *w = realloc(m, sizeof(*m) + nb);

        if (w == NULL) {
            free(m);
            PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce's message",
                         p->rank);
            p->failed = 1;
            return 0;
        }
        memcpy(w + 1, bytes, nb);
        *req = NULL;
        return proxy_send(p, w, w, sizeof(*w) + nb, host, PROXY_TAG_COLL);
    }
    if (!proxy_send(p, m, m, sizeof(*m), host, PROXY_TAG_COLL))
        return 0;
    if ((e = p->ops->isend(bytes, nb, host, PROXY_TAG_DATA, req)) != 0) {
        proxy_mpi_fail(p, e, "MPI_Isend of an allreduce's bytes");
        return 0;
    }
    return 1;
}

/* Ends ring g's call: its outcome into the ring (the caller advances done). */
static void pcoll_finish(pring *g, px_status st, uint64_t peer_code)
{
    pcoll *c = g->coll;
    pcoll_in *in = &c->in[c->k & 1];
    comm_stg_ans *a = &g->r->ans[c->slot];
    char *buf = in->buf;
    size_t cap = in->cap;

    a->status = st;
    a->pad_ = 0;
    a->peer_code = peer_code;
    memset(in, 0, sizeof(*in));
    in->buf = buf;
    in->cap = cap;
    c->active = 0;
    c->nfold = c->nres = c->ncopy = 0;
    g->answered[c->slot] = 1;
}

/* 1 when a COMM_STG_COLL request (its line q) is well-formed for ring g of domain d. */
static int pcoll_valid(const pdom *d, const pring *g, const comm_stg_req *q)
{
    size_t es = pcoll_es(q->v);
    int op = (int)(q->v >> 40 & 0xff);

    return d->n == 2 && (int)q->rank == g->b && q->flags == 0 && q->inl == 0 && q->slot == 0 &&
           q->sigop == 0 && q->v >> 49 == 0 && es != 0 && op >= PX_OP_SUM && op <= PX_OP_MAX &&
           q->n != 0 && q->n % (pcoll_rs(q->v) ? 2 * es : es) == 0 && q->off % es == 0 &&
           q->off <= d->data_bytes && q->n <= d->data_bytes - q->off;
}

/* Room for the sends of a call of ns segments a side; 0 when out of memory. */
static int pcoll_reqs(pcoll *c, uint32_t ns)
{
    px_mpi_req **h, **r;

    if (ns <= c->nreq)
        return 1;
    h = realloc(c->hreq, ns * sizeof(*h));
    if (h != NULL)
        c->hreq = h;
    r = h != NULL ? realloc(c->rreq, ns * sizeof(*r)) : NULL;
    if (r != NULL)
        c->rreq = r;
    if (h == NULL || r == NULL)
        return 0;
    for (uint32_t j = c->nreq; j < ns; j++)
        c->hreq[j] = c->rreq[j] = NULL;
    c->nreq = ns;
    return 1;
}

/* Starts ring g's call (c: its state, the line taken): its half goes out. */
static void pcoll_start(comm_proxy *p, pdom *d, pring *g, const comm_stg_req *q)
{
    pcoll *c = g->coll;
    size_t lo, hi, plo, phi;
    char *win;

    if (!pcoll_valid(d, g, q)) {
        d->bad++; /* the chip's request is malformed: a defect */
        PX_LOG_ERROR("mpi proxy (host %d): domain %u rank %d: a malformed allreduce request "
                     "(%llu bytes at %llu, code %#llx) is refused", p->rank, d->id, g->a,
                     (unsigned long long)q->n, (unsigned long long)q->off,
                     (unsigned long long)q->v);
        pcoll_finish(g, PX_EIO, 0);
        return;
    }
    pcoll_part(c->n, c->code, g->b, &plo, &phi);
    pcoll_part(c->n, c->code, g->a, &lo, &hi);
    if (!pcoll_reqs(c, PX_MAX(pcoll_nseg(phi - plo), pcoll_nseg(hi - lo)))) {
        PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce", p->rank);
        pcoll_finish(g, PX_ENOMEM, 0);
        return;
    }
    if (!pcoll_whole(c->n, c->code) && !pcoll_room(&c->rbuf, &c->rcap, phi - plo)) {
        PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce of %llu bytes",
                     p->rank, (unsigned long long)c->n);
        pcoll_finish(g, PX_ENOMEM, 0);
        return;
    }
    win = (char *)d->window[g->a] + px_comm_area_bytes(d->n, d->nsig) + c->off + plo;
    for (uint32_t j = 0; j < pcoll_nseg(phi - plo); j++)
        if (!pcoll_send(p, d, g, PCOLL_HALF, j, win + (size_t)j * PCOLL_SEG,
                        pcoll_seglen(phi - plo, j), &c->hreq[j]))
            break;
}

/* Takes request i of ring g, a COMM_STG_COLL (its line q, read once): its half goes out;
 * 0 while the ring's previous call is still being carried out. The caller counts it sent,
 * then steps it (a call finished before it counts as sent would not advance done). */
int pcoll_take(comm_proxy *p, pdom *d, pring *g, uint32_t i, const comm_stg_req *q)
{
    pcoll *c = g->coll;

    if (c == NULL && (c = g->coll = calloc(1, sizeof(*c))) == NULL) {
        PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce", p->rank);
        g->r->ans[i] = (comm_stg_ans){.status = PX_ENOMEM};
        g->answered[i] = 1;
        return 1;
    }
    if (c->active || !pcoll_idle(p, c))
        return 0;
    c->active = 1;
    c->slot = i;
    c->k = g->ncoll++;
    c->off = q->off;
    c->n = q->n;
    c->code = q->v;
    pcoll_start(p, d, g, q);
    return 1;
}

/* The peer's call differs from ring g's: once the peer's bytes are in (its stream's) and this
 * side's are out of the window, both end with PX_EINVAL and the other's call. */
static int pcoll_mismatch(comm_proxy *p, pring *g, const pcoll_in *in)
{
    size_t ilo, ihi;

    pcoll_part(in->n, in->code, g->a, &ilo, &ihi); /* its segments, as it cut them */
    if (in->nin < pcoll_nseg(ihi - ilo) || !pcoll_idle(p, g->coll))
        return 0;
    pcoll_finish(g, PX_EINVAL, in->code);
    pring_advance(g);
    return 1;
}

/* Folds every segment of the peer's that is in into the window (win: the call's bytes), rank
 * 0's element first, and sends each result on when results; *stop when a send failed. */
static int pcoll_fold(comm_proxy *p, pdom *d, pring *g, char *win, int results, int *stop)
{
    pcoll *c = g->coll;
    const pcoll_in *in = &c->in[c->k & 1];
    size_t es = pcoll_es(c->code), lo, hi;
    px_dtype dt = (px_dtype)(c->code >> 32 & 0xff);
    px_redop op = (px_redop)(c->code >> 40 & 0xff);
    int work = 0, whole = pcoll_whole(c->n, c->code);

    pcoll_part(c->n, c->code, g->a, &lo, &hi);
    while (c->nfold < in->nin) {
        uint32_t j = c->nfold;
        size_t at = lo + (size_t)j * PCOLL_SEG, len = pcoll_seglen(hi - lo, j);
        char *from = in->buf + (size_t)j * PCOLL_SEG;

        if (whole && !pcoll_idle(p, c))
            break; /* an exchange writes the bytes it sends: once they are out */
        if (g->a == 0) {
            comm_reduce(win + at, from, len / es, dt, op);
        } else {
            comm_reduce(from, win + at, len / es, dt, op);
            memcpy(win + at, from, len);
        }
        c->nfold++;
        work = 1;
        if (results && !pcoll_send(p, d, g, PCOLL_RESULT, j, win + at, len, &c->rreq[j])) {
            *stop = 1;
            break;
        }
    }
    return work;
}

/* Moves ring g's call on as far as what has come allows; returns 1 when it did something. */
int pcoll_step(comm_proxy *p, pdom *d, pring *g)
{
    pcoll *c = g->coll;
    pcoll_in *in;
    size_t lo, hi, plo, phi;
    char *win;
    int work, results, stop = 0;

    if (c == NULL || !c->active || p->failed)
        return 0;
    in = &c->in[c->k & 1];
    if (!in->hello || in->k != c->k)
        return 0;
    if (in->code != c->code || in->n != c->n) /* the two calls differ */
        return pcoll_mismatch(p, g, in);
    results = !pcoll_whole(c->n, c->code) && !pcoll_rs(c->code);
    win = (char *)d->window[g->a] + px_comm_area_bytes(d->n, d->nsig) + c->off;
    pcoll_part(c->n, c->code, g->a, &lo, &hi);
    pcoll_part(c->n, c->code, g->b, &plo, &phi);
    if ((work = pcoll_fold(p, d, g, win, results, &stop)) && stop)
        return work;
    while (results && c->ncopy < c->nres && pcoll_sent(p, &c->hreq[c->ncopy])) {
        size_t at = (size_t)c->ncopy * PCOLL_SEG;

        memcpy(win + plo + at, c->rbuf + at, pcoll_seglen(phi - plo, c->ncopy));
        c->ncopy++;
        work = 1;
    }
    if (c->nfold < pcoll_nseg(hi - lo) || (results && c->ncopy < pcoll_nseg(phi - plo)) ||
        !pcoll_idle(p, c))
        return work;
    pcoll_finish(g, PX_OK, 0);
    pring_advance(g);
    return 1;
}

/* The ring a pair collective's message from host h is for (g->coll made), or NULL: no pair
 * served here (*oom: out of memory, said). */
static pring *pcoll_ring_of(comm_proxy *p, int h, const comm_proxy_msg *m, int *oom)
{
    pdom *d = proxy_dom(p, m->dom);
    pring *g = NULL;

    *oom = 0;
    if (d != NULL && d->n == 2 && m->src >= 0 && m->src < 2 && m->dst == 1 - m->src &&
        d->host[m->src] == h && d->window[m->dst] != NULL && d->ring_of[m->dst] >= 0)
        g = &d->rings[d->ring_of[m->dst]];
    if (g != NULL && g->coll == NULL && (g->coll = calloc(1, sizeof(pcoll))) == NULL) {
        PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce", p->rank);
        p->failed = 1;
        *oom = 1;
        return NULL;
    }
    return g;
}

/* A half's segment: where its bytes go (the call's copy), or NULL when out of step. [lo, hi):
 * the part it belongs to, len its bytes. */
static void *pcoll_half_dst(pcoll *c, const pdom *d, const comm_proxy_msg *m, size_t len,
                            size_t lo, size_t hi)
{
    pcoll_in *in = &c->in[m->seq & 1];

    if (len == 0 || m->q.n > d->data_bytes || m->q.slot != in->nin ||
        !(m->q.slot == 0 ? !in->hello && pcoll_room(&in->buf, &in->cap, hi - lo)
                         : in->hello && in->k == m->seq && in->n == m->q.n &&
                               in->code == m->q.v))
        return NULL;
    if (m->q.slot == 0) {
        in->hello = 1;
        in->k = m->seq;
        in->off = m->q.off;
        in->n = m->q.n;
        in->code = m->q.v;
    }
    return in->buf + (size_t)m->q.slot * PCOLL_SEG;
}

/* A result's segment: where its bytes go (the results, or straight into the window when in
 * order behind every earlier one and this side's half there has gone out), or NULL. */
static void *pcoll_result_dst(comm_proxy *p, pcoll *c, const pdom *d, const comm_proxy_msg *m,
                              size_t len)
{
    size_t at = (size_t)m->q.slot * PCOLL_SEG, lo, hi;

    if (len == 0 || !c->active || c->k != m->seq || m->q.n != c->n || m->q.v != c->code ||
        m->q.slot != c->nres || pcoll_whole(c->n, c->code) || pcoll_rs(c->code) ||
        at + len > c->rcap)
        return NULL;
    if (c->ncopy == c->nres && pcoll_sent(p, &c->hreq[m->q.slot])) {
        pcoll_part(c->n, c->code, m->src, &lo, &hi);
        c->direct = 1;
        return (char *)d->window[m->dst] + px_comm_area_bytes(d->n, d->nsig) + c->off + lo +
               at;
    }
    return c->rbuf + at;
}

/* A message out of step (a defect): dropped, its bytes drained, or (nothing to drain by)
 * serving stops. */
static void pcoll_refuse(comm_proxy *p, int h, pcoll *c, const comm_proxy_msg *m, size_t len,
                         const void *inl)
{
    PX_LOG_ERROR("mpi proxy (host %d): an allreduce message (kind %u, call %u, segment "
                 "%u) from host %d for domain %u rank %d -> %d is out of step or "
                 "malformed; %s", p->rank, m->q.op, m->seq, m->q.slot, h, m->dom, m->src,
                 m->dst, len > 0 || inl != NULL ?
                 "dropped (the call's wait ends at its deadline)" :
                 "the mpi transport of this worker stops here");
    c->direct = 0;
    if (inl != NULL)
        return;
    if (len > 0)
        proxy_drain(p, h, len);
    else
        p->failed = 1;
}

/* A pair allreduce's message from host h: a header, whose segment's bytes follow as the
 * stream's next receive (a half's into the call's copy, a result's into the results), or
 * (inl: plen bytes) came in the same message. */
static void pcoll_recv(comm_proxy *p, int h, const comm_proxy_msg *m, const void *inl,
                       size_t plen)
{
    psrc *ps = &p->src[h];
    size_t es = pcoll_es(m->q.v), lo = 0, hi = 0, len = 0;
    pdom *d = proxy_dom(p, m->dom);
    pring *g;
    void *dst = NULL;
    int e, oom, kind = m->q.op == PCOLL_HALF ? PSRC_CHALF : PSRC_CRESULT,
        ok = es != 0 && m->q.n > 0 && m->q.n % es == 0 && m->dst >= 0 && m->dst < 2;

    if (ok)
        pcoll_part(m->q.n, m->q.v, m->q.op == PCOLL_HALF ? m->dst : m->src, &lo, &hi);
    if (ok && m->q.slot < pcoll_nseg(hi - lo))
        len = pcoll_seglen(hi - lo, m->q.slot); /* as the sender cut it */
    if ((g = pcoll_ring_of(p, h, m, &oom)) == NULL) {
        if (oom)
            return;
        /* a removed domain's (its bytes, sized as the sender cut them) */
        PX_LOG_DEBUG("mpi proxy (host %d): an allreduce message from host %d for domain %u "
                     "rank %d -> %d matches no pair served here; dropped", p->rank, h, m->dom,
                     m->src, m->dst);
        if (inl == NULL && len > 0)
            proxy_drain(p, h, len);
        else if (inl == NULL)
            p->failed = ok ? p->failed : 1;
        return;
    }
    if (m->q.op == PCOLL_HALF)
        dst = pcoll_half_dst(g->coll, d, m, len, lo, hi);
    else if (m->q.op == PCOLL_RESULT)
        dst = pcoll_result_dst(p, g->coll, d, m, len);
    if (dst != NULL && inl != NULL && plen != len) {
        if (kind == PSRC_CHALF && m->q.slot == 0)
            g->coll->in[m->seq & 1].hello = 0;
        dst = NULL;
    }
    if (dst == NULL) {
        pcoll_refuse(p, h, g->coll, m, len, inl);
        return;
    }
    if (inl != NULL) {
        psrc q = {.kind = kind, .m = *m, .d = d, .g = g};

        memcpy(dst, inl, len);
        pcoll_got(p, &q);
        return;
    }
    *ps = (psrc){.kind = kind, .m = *m, .d = d, .g = g};
    if ((e = p->ops->irecv(dst, len, h, PROXY_TAG_DATA, &ps->req)) != 0)
        proxy_mpi_fail(p, e, "MPI_Irecv of an allreduce's bytes");
}

/* A pair collective's header (its bytes follow), and one with its bytes inline. */
int pcoll_on_header(comm_proxy *p, int h, const void *msg, size_t n)
{
    (void)n;
    if (proxy_msg_ok(p, h, msg))
        pcoll_recv(p, h, msg, NULL, 0);
    return 0;
}

int pcoll_on_inline(comm_proxy *p, int h, const void *msg, size_t n)
{
    const comm_proxy_msg *m = msg;

    if (m->magic == PROXY_MAGIC)
        pcoll_recv(p, h, m, m + 1, n - sizeof(*m));
    return 0;
}

/* The bytes after a pair allreduce's message are in. */
void pcoll_got(comm_proxy *p, const psrc *q)
{
    pcoll *c = q->g->coll;

    if (q->kind == PSRC_CHALF) {
        c->in[q->m.seq & 1].nin++;
    } else {
        c->nres++;
        c->ncopy += c->direct; /* it went straight into the window */
        c->direct = 0;
    }
    (void)pcoll_step(p, q->d, q->g);
}

