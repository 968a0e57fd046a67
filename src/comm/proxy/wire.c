/*
 * wire.c - the proxy's messages (proxy_int.h): sends and their reaping, and the receiving
 * side: each host's stream taken in order (the bytes after a header before that host's next
 * message), every message dispatched by proxy_handlers, one row per tag and size.
 */
#include "comm/proxy/proxy_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define PROXY_RECV_BURST 64 /* messages taken per sweep at most */

/* Frees the answers' sends MPI has finished; returns how many. */
int proxy_reap(comm_proxy *p)
{
    int k = 0;

    for (int i = 0; i < p->nps;) {
        int done = 0, e = p->ops->test(p->ps[i].req, &done);

        if (e != 0) {
            proxy_mpi_fail(p, e, "MPI_Test of an answer");
            done = 1; /* forget it: serving has stopped */
        }
        if (done) {
            free(p->ps[i].buf);
            p->ps[i] = p->ps[--p->nps];
            k++;
        } else {
            i++;
        }
    }
    return k;
}

/* Sends n bytes at buf (owned: freed when sent, or NULL for bytes that outlive the send) to
 * rank dst; 0 on failure (said). */
int proxy_send(comm_proxy *p, const void *bytes, void *owned, size_t n, int dst, int tag)
{
    px_mpi_req *r = NULL;
    int e;

    if (p->nps == p->cps) {
        int c = p->cps ? 2 * p->cps : 64;
        psend *q = realloc(p->ps, (size_t)c * sizeof(*q));

        if (q == NULL) {
            free(owned);
            PX_LOG_ERROR("mpi proxy (host %d): out of memory for an answer", p->rank);
            return 0;
        }
        p->ps = q;
        p->cps = c;
    }
    if ((e = p->ops->isend(bytes, n, dst, tag, &r)) != 0) {
        free(owned);
        proxy_mpi_fail(p, e, "MPI_Isend of an answer");
        return 0;
    }
    p->ps[p->nps++] = (psend){r, owned};
    return 1;
}

/* Sends a copy of the n bytes of msg to every other host (each copy the send's to free). */
void proxy_send_others(comm_proxy *p, const void *msg, size_t n, int tag)
{
    for (int h = 0; h < p->size; h++) {
        void *m;

        if (h == p->rank || (m = malloc(n)) == NULL)
            continue;
        memcpy(m, msg, n);
        (void)proxy_send(p, m, m, n, h, tag);
    }
}

/* Starts receiving n bytes from src into nothing (a message that cannot be used). */
void proxy_drain(comm_proxy *p, int src, size_t n)
{
    psrc *q = &p->src[src];
    int e;

    if (n > ((size_t)1 << 30) || (q->junk = malloc(n > 0 ? n : 1)) == NULL) {
        PX_LOG_ERROR("mpi proxy (host %d): cannot drain %zu bytes from host %d", p->rank, n,
                     src);
        p->failed = 1;
        return;
    }
    q->kind = PSRC_DRAIN;
    if ((e = p->ops->irecv(q->junk, n, src, PROXY_TAG_DATA, &q->req)) != 0) {
        free(q->junk);
        q->junk = NULL;
        proxy_mpi_fail(p, e, "MPI_Irecv");
    }
}

/* The bytes in flight from host h: tested; when in, what follows them is done. */
static int proxy_src_poll(comm_proxy *p, int h)
{
    psrc *q = &p->src[h];
    int done = 0, e;

    if (q->req == NULL)
        return 0;
    if ((e = p->ops->test(q->req, &done)) != 0) {
        proxy_mpi_fail(p, e, "MPI_Test of a receive");
        return 0;
    }
    if (!done)
        return 0;
    q->req = NULL;
    switch (q->kind) {
    case PSRC_PUT:
        proxy_serve_end(p, h, &q->m, q->d, 1, &q->op, q->a);
        break;
    case PSRC_GET:
        q->g->answered[q->m.seq % COMM_STG_SLOTS] = 1;
        pring_advance(q->g);
        break;
    case PSRC_CHALF:
    case PSRC_CRESULT:
        pcoll_got(p, q);
        break;
    default:
        free(q->junk);
        q->junk = NULL;
        if (q->m.magic == PROXY_MAGIC && q->m.q.op == COMM_STG_PUT) /* a refused put */
            proxy_serve_end(p, h, &q->m, NULL, 0, &q->op, NULL);
        break;
    }
    memset(q, 0, sizeof(*q));
    return 1;
}

int proxy_msg_ok(comm_proxy *p, int src, const comm_proxy_msg *m)
{
    if (m->magic == PROXY_MAGIC)
        return 1;
    PX_LOG_WARN("mpi proxy (host %d): dropped a message from host %d with a bad magic",
                p->rank, src);
    return 0;
}

/* A request, an answer, a pair collective's header: taken, then that host's bytes that
 * follow it, which are often in already. */
static int proxy_on_req(comm_proxy *p, int h, const void *msg, size_t n)
{
    return proxy_serve(p, h, msg, n) + proxy_src_poll(p, h);
}

static int proxy_on_rep(comm_proxy *p, int h, const void *msg, size_t n)
{
    return proxy_answer(p, h, msg, n) + proxy_src_poll(p, h);
}

static int proxy_on_coll(comm_proxy *p, int h, const void *msg, size_t n)
{
    return pcoll_on_header(p, h, msg, n) + proxy_src_poll(p, h);
}

/*
 * The messages a proxy takes: a message of tag `tag` and of min to max bytes goes to its
 * handler (p, source host, the message, its bytes), which returns further work done. A
 * message that fits no row is drained and dropped, said. Adding a message is a tag in
 * proxy_int.h, its handler and its row here.
 */
typedef struct proxy_handler {
    int tag;
    size_t min, max;
    int (*fn)(comm_proxy *p, int h, const void *msg, size_t n);
} proxy_handler;

static const proxy_handler proxy_handlers[] = {
    {PROXY_TAG_REQ, sizeof(comm_proxy_msg), sizeof(comm_proxy_msg), proxy_on_req},
    {PROXY_TAG_REP, sizeof(comm_proxy_msg), sizeof(comm_proxy_msg), proxy_on_rep},
    {PROXY_TAG_COLL, sizeof(comm_proxy_msg), sizeof(comm_proxy_msg), proxy_on_coll},
    {PROXY_TAG_COLL, sizeof(comm_proxy_msg) + 1, sizeof(comm_proxy_msg) + PCOLL_INLINE,
     pcoll_on_inline},
    {PROXY_TAG_DEATH, sizeof(proxy_death), sizeof(proxy_death), proxy_on_death},
    {PROXY_TAG_REVOKE, sizeof(proxy_revoke), sizeof(proxy_revoke), proxy_on_revoke},
    {PROXY_TAG_AGREE, sizeof(proxy_agree), sizeof(proxy_agree), proxy_on_agree},
    {PROXY_TAG_ARRIVE, sizeof(proxy_arrive), sizeof(proxy_arrive), proxy_on_arrive},
    {PROXY_TAG_CLOCK, sizeof(proxy_clock_msg), sizeof(proxy_clock_msg), proxy_on_clock},
    {PROXY_TAG_CLOCK_REP, sizeof(proxy_clock_msg), sizeof(proxy_clock_msg), proxy_on_clock_rep},
};

static const proxy_handler *proxy_handler_of(int tag, size_t n)
{
    for (size_t i = 0; i < sizeof(proxy_handlers) / sizeof(proxy_handlers[0]); i++)
        if (proxy_handlers[i].tag == tag && n >= proxy_handlers[i].min &&
            n <= proxy_handlers[i].max)
            return &proxy_handlers[i];
    return NULL;
}

/* Takes host h's next message, if one is there: 1 when one was, -1 when MPI failed. */
static int proxy_take(comm_proxy *p, int h, int *work)
{
    _Alignas(comm_proxy_msg) unsigned char buf[sizeof(comm_proxy_msg) + PCOLL_INLINE];
    const proxy_handler *hd;
    int flag = 0, src = 0, tag = 0, e;
    size_t n = 0;

    if ((e = p->ops->iprobe(h, &flag, &src, &tag, &n)) != 0) {
        proxy_mpi_fail(p, e, "MPI_Iprobe");
        return -1;
    }
    if (!flag)
        return 0;
    (*work)++;
    if ((hd = proxy_handler_of(tag, n)) == NULL) {
        PX_LOG_WARN("mpi proxy (host %d): dropped a message of %zu bytes, tag %d, from "
                    "host %d that is no proxy request or answer", p->rank, n, tag, h);
        if ((e = p->ops->irecv(p->src[h].junk = malloc(n > 0 ? n : 1), n, h, tag,
                               &p->src[h].req)) != 0)
            proxy_mpi_fail(p, e, "MPI_Irecv");
        p->src[h].kind = PSRC_DRAIN;
        return 1;
    }
    /* every row's message is small: it is here once probed (eager) */
    if ((e = p->ops->recv(buf, n, h, tag)) != 0) {
        proxy_mpi_fail(p, e, "MPI_Recv");
        return -1;
    }
    *work += hd->fn(p, h, buf, n);
    return 1;
}

/* Takes what other proxies sent, each host's stream in order; returns how many messages. */
int proxy_receive(comm_proxy *p)
{
    int work = 0;

    for (int h = 0; h < p->size; h++)
        work += proxy_src_poll(p, h);
    for (int k = 0; k < PROXY_RECV_BURST && !p->failed; k++) {
        int any = 0, got = 0;

        for (int h = 0; h < p->size && !p->failed; h++) {
            if (p->src[h].req != NULL)
                continue; /* its bytes first */
            if ((got = proxy_take(p, h, &work)) < 0)
                break;
            any |= got;
        }
        if (!any)
            break;
    }
    return work;
}
