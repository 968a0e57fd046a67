/*
 * proxy.c - the MPI proxy of a level-3 worker (proxy.h).
 *
 * One thread per worker, started after the chips are forked. It is the only thread of the
 * process that calls MPI (the plugin's ops, MPI_THREAD_FUNNELED). Its loop, in one sweep:
 *   1. the parent's command (add or remove a domain), if one is posted;
 *   2. every ring it serves: each new request of this worker's chips is decoded against the
 *      domain's bounds (the ring is the chip's to write, so the proxy trusts nothing in it,
 *      as a staged target does) and sent to the proxy of the target's worker;
 *   3. every message waiting from a proxy (itself included): a request is carried out
 *      against the target's window (mapped here) and answered; an answer completes its
 *      request in the ring (a get's bytes into the request's chunk), and `done` advances over
 *      every request answered in order, waking a requester asleep on it;
 *   4. sends of answers that MPI has finished are freed.
 * Between sweeps it waits the one wait (util/wait.h) on its doorbell, which this worker's
 * requesters ring: a yield phase (20 us; 2 ms when the job has several hosts, whose messages
 * ring nothing: a cross-host put_signal half round trip went from about 200 to 85 us with it),
 * then sleeps. While the job has several hosts, or answers are awaited, a sleep lasts at most
 * PROXY_POLL_NS; with one host and nothing in flight nothing can arrive unrung, and it sleeps
 * in long slices.
 */
#include "comm/proxy.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/transport/staged.h"
#include "hier/ext.h"
#include "mpi/mpi_load.h"
#include "mpi/mpi_ops.h"
#include "runtime/runtime.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/wait.h"

#define PROXY_MAGIC 0x50584d31u /* "PXM1" */
#define PROXY_TAG_REQ 0x5201
#define PROXY_TAG_REP 0x5202
#define PROXY_TAG_DATA 0x5203
#define PROXY_TAG_DEATH 0x5204                /* a chip of the sender died: proxy_death */
#define PROXY_TAG_ARRIVE 0x5205               /* the sender entered an allgather: proxy_arrive */
#define PROXY_TAG_CLOCK 0x5206                /* a clock ping: proxy_clock_msg */
#define PROXY_TAG_CLOCK_REP 0x5207            /* its answer, with the answerer's clock */
#define PROXY_CLOCK_ROUNDS 16                 /* pings per host of a clock estimate */
#define PROXY_TAG_COLL 0x5208                 /* the pair allreduce: a segment's header */
#define PROXY_DOMS 64
#define PROXY_YIELD_NS 20000
#define PROXY_HOT_YIELD_NS 2000000            /* the yield phase with several hosts */
#define PROXY_POLL_NS 200000                  /* a sleep while messages may come unrung */
#define PROXY_SLICE_NS (100 * 1000 * 1000)    /* a sleep when nothing can come unrung */
#define PROXY_RECV_BURST 64                   /* messages taken per sweep at most */
#define PROXY_FAILED_FINALIZE_S 2             /* a failed job's MPI_Finalize, at most */

/* A request or an answer between proxies. */
typedef struct comm_proxy_msg {
    uint32_t magic;
    uint8_t op, flags, sigop, inl;
    uint32_t dom;
    int32_t src, dst;     /* requesting rank, target rank (of the domain) */
    uint32_t slot;
    uint32_t seq;         /* the request's number in src's ring to dst */
    int32_t status;       /* answer: PX_OK, or PX_EINVAL when the target skipped it */
    uint32_t pad_;
    uint64_t off, n, v;
    uint8_t data[COMM_STG_INLINE];
} comm_proxy_msg;

/* A ring this proxy serves: rank a's one ring, its requests to every mpi peer (each names its
 * target rank, transport/mpi.c). */
typedef struct pring {
    int a;
    int b;                            /* a pair allreduce's peer (a domain of 2: 1 - a) */
    comm_stg_ring *r;
    char *data;                       /* its chunks */
    size_t chunk;
    uint32_t sent, done;              /* requests sent on / answered in order */
    uint8_t answered[COMM_STG_SLOTS];
    comm_proxy_msg hdr[COMM_STG_SLOTS];    /* what was sent for each slot */
    px_mpi_req *sreq[COMM_STG_SLOTS][2];   /* its sends not yet seen finished */
    struct pcoll *coll;               /* its pair allreduce (COMM_STG_COLL), once it had one */
    uint32_t ncoll;                   /* COMM_STG_COLL requests taken so far */
} pring;

typedef struct pdom {
    uint32_t id;
    int n;
    uint32_t nsig;
    size_t data_bytes;
    void **window;
    int *host;
    int nrings;
    pring *rings;
    int *ring_of;                     /* n: rank -> index of its ring in rings, or -1 */
    uint32_t bad;                     /* malformed requests skipped (from this worker's chips) */
} pdom;

/* A send of an answer in flight: buf is freed when MPI is done with it. */
typedef struct psend {
    px_mpi_req *req;
    void *buf;
} psend;

enum { CMD_NONE, CMD_ADD, CMD_REMOVE, CMD_ALLGATHER, CMD_CLOCK };

/* An allgather the parent asked for: the proxy's own buffers, so that a parent that gave up
 * waiting leaves nothing the thread still writes. */
typedef struct pgather {
    void *in, *out;
    size_t n;
    px_mpi_req *req;
    int done, err, abandoned;
} pgather;

/* A clock estimate the parent asked for (comm_proxy_clock): the thread pings each other host
 * in turn, one ping in flight; like pgather, the proxy's own, so a parent that gave up leaves
 * nothing the thread still writes. */
typedef struct pclock {
    int rounds;
    uint64_t ping_ns;          /* a ping unanswered this long: the host is given up */
    int h, round;              /* the host being pinged (size: done), its next round */
    uint32_t seq;              /* the ping in flight's number (0: none in flight) */
    uint64_t sent_ns;          /* when it was sent (this host's DFX clock, ns) */
    comm_proxy_clock_est *est; /* size */
    int done, abandoned;
} pclock;

struct comm_proxy {
    const px_mpi_ops *ops;
    pthread_t thread;
    comm_bell *bell;
    double timeout_s;
    int rank, size, nchips, comm_transport;
    const px_caps *caps;
    _Atomic(const hier_deaths *) deaths; /* this worker's chips' deaths (watched; NULL once
                                          * its board is about to go) */
    comm_rdeaths *rdeaths;            /* other hosts' (written) */
    uint64_t deaths_told;             /* the deaths sent on so far */
    char host_id[COMM_HOST_ID_MAX];
    comm_host *hosts;
    char lib[160];
    /* start */
    _Atomic uint32_t up;              /* 0 starting, 1 up, 2 failed (futex word) */
    _Atomic uint32_t up_sleep;
    px_status start_st;
    char start_err[PX_ERRMSG_MAX];
    /* commands */
    pthread_mutex_t lock;
    int cmd;
    pdom *cmd_dom;
    uint32_t cmd_id;
    pgather *cmd_ag;
    pclock *cmd_clk;
    pclock *clk;                      /* the clock estimate in flight (thread) ... */
    uint32_t clk_seq, clk_cmd;        /* ... its last ping's number, its command's number */
    int tsc;                          /* DFX's clock is the TSC (the caps' invariant TSC) */
    comm_proxy_clock_est *clk_first;  /* size: the first estimate (at start, host 0) */
    pgather *ag;                      /* the allgather in flight (thread) ... */
    uint32_t ag_seq;                  /* ... and its command's number */
    pdom *closing;             /* the domain being removed (thread) ... */
    uint32_t closing_seq;             /* ... and its command's number */
    _Atomic uint32_t cmd_seq, cmd_done, cmd_sleep;
    _Atomic uint32_t unwatch, unwatched, unwatch_sleep; /* the board goes: asked, done
                                          * (futex word); not a command, so a command still
                                          * carried out (a removal waiting on MPI) does not
                                          * hold it up */
    _Atomic int stop;
    /* the proxy thread's own */
    pdom *doms[PROXY_DOMS];
    int ndoms;
    psend *ps;
    int nps, cps;
    struct psrc *src;                 /* size: each host's stream */
    int woke;
    uint32_t seen;
    int failed;                       /* an MPI call failed: serving stopped, said once */
    int stopped;                      /* its thread has ended */
    int abandoned;                    /* it did not end in time: left inside MPI */
    _Atomic int job_failed;           /* comm_proxy_fail_job */
    _Atomic uint64_t ag_started;      /* allgathers the thread started (the parent's ones) */
    _Atomic uint64_t *arrived;        /* size: the latest arrival notice of each host */
    uint64_t forwarded, served;
};

static void proxy_mpi_fail(comm_proxy *p, int e, const char *what)
{
    char s[256];

    if (p->failed)
        return;
    p->failed = 1;
    p->ops->error(e, s, sizeof(s));
    PX_LOG_ERROR("mpi proxy (host %d): %s failed: %s; the mpi transport of this worker stops "
                 "here and its requests end at their deadline", p->rank, what, s);
}

/*
 * MPI starts once per process: the proxy of the first worker under MPI initialises it and
 * finalises it when that worker is destroyed (or at the process's exit, for a worker never
 * destroyed: mpirun counts a rank that never finalised as failed). A later level-3 worker of
 * the process cannot run under MPI: MPI cannot start again, and Open MPI does not support the
 * fork of its chips after MPI_Init (px_worker_init refuses it: hier/forksafe.c).
 */
static pthread_mutex_t g_mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static comm_proxy *g_live;   /* the proxy running now */
static pid_t g_mpi_pid;

static void proxy_stop_thread(comm_proxy *p);

static void proxy_atexit(void)
{
    comm_proxy *p;

    if (getpid() != g_mpi_pid)
        return;
    pthread_mutex_lock(&g_mpi_lock);
    p = g_live;
    pthread_mutex_unlock(&g_mpi_lock);
    if (p != NULL && !p->abandoned) /* a worker not destroyed: its proxy stops, finalises */
        proxy_stop_thread(p);
}

/* ---- domains ---- */

static void pcoll_free(struct pcoll *c);

static void pdom_free(pdom *d)
{
    if (d == NULL)
        return;
    for (int i = 0; d->rings != NULL && i < d->nrings; i++)
        pcoll_free(d->rings[i].coll);
    free(d->window);
    free(d->host);
    free(d->rings);
    free(d->ring_of);
    free(d);
}

static pdom *pdom_copy(const comm_proxy_dom *s)
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
    if ((d->window = calloc(n, sizeof(void *))) == NULL ||
        (d->host = calloc(n, sizeof(int))) == NULL ||
        (d->rings = calloc((size_t)(s->nrings > 0 ? s->nrings : 1), sizeof(pring))) == NULL ||
        (d->ring_of = malloc(n * sizeof(int))) == NULL) {
        pdom_free(d);
        return NULL;
    }
    memcpy(d->window, s->window, n * sizeof(void *));
    memcpy(d->host, s->host, n * sizeof(int));
    for (size_t i = 0; i < n; i++)
        d->ring_of[i] = -1;
    for (int i = 0; i < s->nrings; i++) {
        pring *g = &d->rings[i];

        g->a = s->rings[i].a;
        g->b = s->n == 2 ? 1 - g->a : -1;
        g->r = s->rings[i].ring;
        g->chunk = s->rings[i].chunk;
        g->data = (char *)g->r + COMM_STG_HEAD_BYTES;
        g->sent = g->done = atomic_load_explicit(&g->r->done, memory_order_acquire);
        d->ring_of[g->a] = i;
    }
    return d;
}

static pdom *proxy_dom(comm_proxy *p, uint32_t id)
{
    for (int i = 0; i < p->ndoms; i++)
        if (p->doms[i]->id == id)
            return p->doms[i];
    return NULL;
}

static comm_stg_bounds pdom_bounds(const pdom *d, size_t chunk)
{
    comm_stg_bounds b = {.win_bytes = d->data_bytes + 2 * (size_t)PX_COMM_SLOT_BYTES,
                         .head_bytes = px_comm_area_bytes(d->n, d->nsig),
                         .nslots = comm_slot_count(d->n, d->nsig), .chunk = chunk};

    return b;
}

/* ---- sends ---- */

/* Frees the answers' sends MPI has finished; returns how many. */
static int proxy_reap(comm_proxy *p)
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
static int proxy_send(comm_proxy *p, const void *bytes, void *owned, size_t n, int dst, int tag)
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
static void proxy_send_others(comm_proxy *p, const void *msg, size_t n, int tag)
{
    for (int h = 0; h < p->size; h++) {
        void *m;

        if (h == p->rank || (m = malloc(n)) == NULL)
            continue;
        memcpy(m, msg, n);
        (void)proxy_send(p, m, m, n, h, tag);
    }
}

/* 1 when slot i of ring g has no send in flight (tests them). */
static int pring_sends_done(comm_proxy *p, pring *g, uint32_t i)
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

/* ---- the requester's side: rings of this worker's chips ---- */

/* Stores done over every request answered in order, and wakes a requester asleep on it. */
static void pring_advance(pring *g)
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

/* Sends on every new request of ring g; returns how many. */
static int pcoll_take(comm_proxy *p, pdom *d, pring *g, uint32_t i, const comm_stg_req *q);
static int pcoll_step(comm_proxy *p, pdom *d, pring *g);

static int pring_forward(comm_proxy *p, pdom *d, pring *g)
{
    comm_stg_bounds b = pdom_bounds(d, g->chunk);
    int work = g->coll != NULL ? pcoll_step(p, d, g) : 0;

    while (!p->failed && g->sent - g->done < COMM_STG_SLOTS &&
           atomic_load_explicit(&g->r->req[g->sent % COMM_STG_SLOTS].seq,
                                memory_order_acquire) == g->sent + 1) {
        uint32_t i = g->sent % COMM_STG_SLOTS;
        comm_proxy_msg *m = &g->hdr[i];
        int host, e;
        comm_stg_op op;
        comm_stg_req line;

        if (!pring_sends_done(p, g, i))
            break; /* answered, so finishing: the next sweep takes it */
        memcpy(&line, &g->r->req[i], sizeof(line)); /* one read: the chip may write it */
        __asm__ __volatile__("" ::: "memory");
        if (line.op == COMM_STG_COLL) {
            if (!pcoll_take(p, d, g, i, &line))
                break; /* the one before it is still being carried out */
            g->sent++;
            work++;
            (void)pcoll_step(p, d, g); /* often all there (an exchange's) */
            pring_advance(g);          /* (a request refused at once) */
            continue;
        }
        /* the target: another rank of the domain (the line's word, checked like the rest) */
        if (line.rank >= (uint32_t)d->n || (int)line.rank == g->a ||
            !comm_stg_decode(&line, &b, &op)) {
            d->bad++; /* skipped whole, as a staged target does */
            g->answered[i] = 1;
            g->sent++;
            pring_advance(g);
            continue;
        }
        host = d->host[line.rank];
        memset(m, 0, sizeof(*m));
        m->magic = PROXY_MAGIC;
        m->op = (uint8_t)op.op;
        m->flags = op.signal && op.op == COMM_STG_PUT ? COMM_STG_F_SIGNAL : 0;
        m->sigop = op.signal ? (uint8_t)op.sigop : 0;
        m->inl = (uint8_t)(op.op == COMM_STG_PUT && op.inl);
        m->dom = d->id;
        m->src = g->a;
        m->dst = (int32_t)line.rank;
        m->slot = op.signal ? op.slot : 0;
        m->seq = g->sent;
        m->off = op.off;
        m->n = op.op == COMM_STG_SIGNAL ? 0 : op.n;
        m->v = op.signal ? op.v : 0;
        if (m->inl)
            memcpy(m->data, op.data, op.n);
        if ((e = p->ops->isend(m, sizeof(*m), host, PROXY_TAG_REQ, &g->sreq[i][0])) != 0) {
            proxy_mpi_fail(p, e, "MPI_Isend of a request");
            break;
        }
        if (op.op == COMM_STG_PUT && !op.inl && op.n > 0 &&
            (e = p->ops->isend(g->data + (size_t)i * g->chunk + op.at, op.n, host,
                               PROXY_TAG_DATA, &g->sreq[i][1])) != 0) {
            proxy_mpi_fail(p, e, "MPI_Isend of a put's bytes");
            break;
        }
        g->sent++;
        p->forwarded++;
        work++;
    }
    return work;
}

/*
 * Every source host's messages are taken in order: while the bytes that follow one of its
 * headers are on their way (a put's into the window, a get's answer into the chunk), nothing
 * else of that host is taken (a signal after a put is applied after its bytes), and the
 * receive is nonblocking, so a host that stops mid-message stalls its own stream only: the
 * proxy goes on serving every other host and its own chips, whose waits end at their
 * deadlines.
 */
enum { PSRC_PUT = 1, PSRC_GET, PSRC_DRAIN, PSRC_CHALF, PSRC_CRESULT };

typedef struct psrc {
    px_mpi_req *req;          /* the bytes in flight from this host, or NULL */
    int kind;
    comm_proxy_msg m;         /* the header they follow */
    pdom *d;                  /* PSRC_PUT: the target's domain; PSRC_GET: the ring's */
    pring *g;                 /* PSRC_GET */
    comm_stg_op op;           /* PSRC_PUT: the request as decoded */
    px_comm_area *a;
    void *junk;               /* PSRC_DRAIN */
} psrc;

/* Starts receiving n bytes from src into nothing (a message that cannot be used). */
static void proxy_drain(comm_proxy *p, int src, size_t n)
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

/* An answer from host src: completes its request (a get's bytes first). */
static void proxy_answer(comm_proxy *p, int src, const comm_proxy_msg *m)
{
    pdom *d = proxy_dom(p, m->dom);
    pring *g = NULL;
    int gi = -1, has_bytes = (m->op == COMM_STG_GET || m->op == COMM_STG_GET_HEAD) &&
                            m->status == PX_OK && m->n > 0, e;

    if (d != NULL && m->src >= 0 && m->src < d->n && m->dst >= 0 && m->dst < d->n)
        gi = d->ring_of[m->src];
    if (gi >= 0)
        g = &d->rings[gi];
    if (g == NULL && d == NULL) { /* the domain was removed here: nobody waits for it */
        PX_LOG_DEBUG("mpi proxy (host %d): a late answer from host %d for domain %u (removed)",
                     p->rank, src, m->dom);
        if (has_bytes)
            proxy_drain(p, src, m->n);
        return;
    }
    if (g == NULL || m->seq - g->done >= g->sent - g->done ||
        g->hdr[m->seq % COMM_STG_SLOTS].seq != m->seq ||
        g->hdr[m->seq % COMM_STG_SLOTS].dst != m->dst || d->host[m->dst] != src) {
        PX_LOG_WARN("mpi proxy (host %d): an answer from host %d for domain %u rank %d -> "
                    "%d request %u matches nothing in flight; dropped", p->rank, src, m->dom,
                    m->src, m->dst, m->seq);
        if (has_bytes)
            proxy_drain(p, src, m->n);
        return;
    }
    if (m->status != PX_OK) {
        /* the target's proxy skipped it (no such domain there any more, or out of bounds):
         * never completed, so the requester's wait ends at its deadline with an error
         * instead of a get returning bytes that were never fetched */
        PX_LOG_ERROR("mpi proxy (host %d): domain %u rank %d -> rank %d: request %u was refused "
                     "by host %d (%s: the domain is gone there, or the request is out of its "
                     "bounds); the requester's wait ends at its deadline", p->rank, m->dom,
                     m->src, m->dst, m->seq, src, px_status_name((px_status)m->status));
        return;
    }
    {
        uint32_t i = m->seq % COMM_STG_SLOTS;
        const comm_proxy_msg *q = &g->hdr[i]; /* what we sent: its range, not the answer's */
        psrc *ps = &p->src[src];

        if (has_bytes && m->n != q->n) {
            proxy_drain(p, src, m->n);
            return; /* never completed: the requester's wait ends at its deadline */
        }
        if (has_bytes) {
            ps->kind = PSRC_GET;
            ps->m = *m;
            ps->d = d;
            ps->g = g;
            if ((e = p->ops->irecv(g->data + (size_t)i * g->chunk + comm_stg_at(q->off), q->n,
                                   src, PROXY_TAG_DATA, &ps->req)) != 0)
                proxy_mpi_fail(p, e, "MPI_Irecv of a get's bytes");
            return;
        }
        g->answered[i] = 1;
        pring_advance(g);
    }
}

/* ---- the target's side: requests from proxies for this worker's members ---- */

/* A put's bytes are in (or there were none): its signal, then the answer. */
static void proxy_serve_end(comm_proxy *p, int src, const comm_proxy_msg *m, pdom *d, int ok,
                            const comm_stg_op *op, px_comm_area *a)
{
    comm_proxy_msg *ans;
    char *win = ok ? (char *)a + px_comm_area_bytes(d->n, d->nsig) : NULL;

    if (ok && op->signal) {
        _Atomic uint64_t *s = comm_slot(a, d->n, op->slot);

        if (op->sigop == PX_SIG_ADD)
            atomic_fetch_add_explicit(s, op->v, memory_order_release);
        else
            atomic_store_explicit(s, op->v, memory_order_release);
        comm_wake(a);
    }
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

/* A request from host src: checked, carried out against its target's window (a put's bytes
 * received straight into it), then answered. */
static void proxy_serve(comm_proxy *p, int src, const comm_proxy_msg *m)
{
    pdom *d = proxy_dom(p, m->dom);
    comm_stg_req line;
    comm_stg_bounds b;
    comm_stg_op op;
    int ok, e;
    px_comm_area *a = NULL;

    memset(&line, 0, sizeof(line));
    memset(&op, 0, sizeof(op));
    line.op = m->op;
    line.flags = m->flags;
    line.sigop = m->sigop;
    line.inl = m->inl;
    line.slot = m->slot;
    line.off = m->off;
    line.n = m->n;
    line.v = m->v;
    if (m->inl)
        memcpy(line.data, m->data, sizeof(line.data));
    ok = d != NULL && m->dst >= 0 && m->dst < d->n && m->src >= 0 && m->src < d->n &&
         d->window[m->dst] != NULL && d->host[m->src] == src;
    if (ok) {
        b = pdom_bounds(d, COMM_MPI_CHUNK);
        ok = comm_stg_decode(&line, &b, &op);
    }
    if (ok)
        a = d->window[m->dst];
    else
        PX_LOG_WARN("mpi proxy (host %d): skipped a malformed request from host %d (domain "
                    "%u, rank %d -> %d, op %u)", p->rank, src, m->dom, m->src, m->dst, m->op);
    if (m->op == COMM_STG_PUT && !m->inl && m->n > 0) {
        psrc *ps = &p->src[src];

        if (!ok) {
            proxy_drain(p, src, m->n);
            ps->m = *m; /* answered (refused) when drained */
            return;
        }
        ps->kind = PSRC_PUT;
        ps->m = *m;
        ps->d = d;
        ps->op = op;
        ps->a = a;
        if ((e = p->ops->irecv((char *)a + px_comm_area_bytes(d->n, d->nsig) + op.off, op.n,
                               src, PROXY_TAG_DATA, &ps->req)) != 0)
            proxy_mpi_fail(p, e, "MPI_Irecv of a put's bytes");
        return;
    }
    if (ok && op.op == COMM_STG_PUT && op.inl)
        memcpy((char *)a + px_comm_area_bytes(d->n, d->nsig) + op.off, op.data, op.n);
    proxy_serve_end(p, src, m, d, ok, &op, a);
}

static void pcoll_got(comm_proxy *p, const psrc *q);

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
        if (q->m.magic == PROXY_MAGIC && q->m.op == COMM_STG_PUT) /* a refused put */
            proxy_serve_end(p, h, &q->m, NULL, 0, &q->op, NULL);
        break;
    }
    memset(q, 0, sizeof(*q));
    return 1;
}

/* ---- the pair allreduce (COMM_STG_COLL; coll.c: coll_allreduce_proxied) ----
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
enum { PCOLL_HALF = 1, PCOLL_RESULT };
#define PCOLL_EXCHANGE_MAX (64u << 10)
#define PCOLL_SEG (256u << 10) /* a multiple of every element size */
#define PCOLL_INLINE 4096u     /* a segment up to this travels in its header's message */

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

static void pcoll_free(pcoll *c)
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
static int pcoll_idle(comm_proxy *p, pcoll *c)
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
    m->op = (uint8_t)kind;
    m->dom = d->id;
    m->src = g->a;
    m->dst = g->b;
    m->slot = j;
    m->seq = c->k;
    m->off = c->off;
    m->n = c->n;
    m->v = c->code;
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

/* Takes request i of ring g, a COMM_STG_COLL (its line q, read once): its half goes out;
 * 0 while the ring's previous call is still being carried out. The caller counts it sent,
 * then steps it (a call finished before it counts as sent would not advance done). */
static int pcoll_take(comm_proxy *p, pdom *d, pring *g, uint32_t i, const comm_stg_req *q)
{
    size_t es = pcoll_es(q->v), lo, hi, plo, phi;
    int op = (int)(q->v >> 40 & 0xff);
    pcoll *c = g->coll;
    char *win;
    uint32_t ns;

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
    if (d->n != 2 || (int)q->rank != g->b || q->flags != 0 || q->inl != 0 || q->slot != 0 ||
        q->sigop != 0 || q->v >> 49 != 0 || es == 0 || op < PX_OP_SUM || op > PX_OP_MAX ||
        q->n == 0 ||
        q->n % (pcoll_rs(q->v) ? 2 * es : es) != 0 || q->off % es != 0 || q->off > d->data_bytes ||
        q->n > d->data_bytes - q->off) {
        d->bad++; /* the chip's request is malformed: a defect */
        PX_LOG_ERROR("mpi proxy (host %d): domain %u rank %d: a malformed allreduce request "
                     "(%llu bytes at %llu, code %#llx) is refused", p->rank, d->id, g->a,
                     (unsigned long long)q->n, (unsigned long long)q->off,
                     (unsigned long long)q->v);
        pcoll_finish(g, PX_EIO, 0);
        return 1;
    }
    pcoll_part(c->n, c->code, g->b, &plo, &phi);
    pcoll_part(c->n, c->code, g->a, &lo, &hi);
    ns = PX_MAX(pcoll_nseg(phi - plo), pcoll_nseg(hi - lo));
    if (ns > c->nreq) {
        px_mpi_req **h = realloc(c->hreq, ns * sizeof(*h)), **r;

        if (h != NULL)
            c->hreq = h;
        r = h != NULL ? realloc(c->rreq, ns * sizeof(*r)) : NULL;
        if (r != NULL)
            c->rreq = r;
        if (h == NULL || r == NULL) {
            PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce", p->rank);
            pcoll_finish(g, PX_ENOMEM, 0);
            return 1;
        }
        for (uint32_t j = c->nreq; j < ns; j++)
            c->hreq[j] = c->rreq[j] = NULL;
        c->nreq = ns;
    }
    if (!pcoll_whole(c->n, c->code) && !pcoll_room(&c->rbuf, &c->rcap, phi - plo)) {
        PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce of %llu bytes",
                     p->rank, (unsigned long long)c->n);
        pcoll_finish(g, PX_ENOMEM, 0);
        return 1;
    }
    win = (char *)d->window[g->a] + px_comm_area_bytes(d->n, d->nsig) + c->off + plo;
    for (uint32_t j = 0; j < pcoll_nseg(phi - plo); j++)
        if (!pcoll_send(p, d, g, PCOLL_HALF, j, win + (size_t)j * PCOLL_SEG,
                        pcoll_seglen(phi - plo, j), &c->hreq[j]))
            break;
    return 1;
}

/* Moves ring g's call on as far as what has come allows; returns 1 when it did something. */
static int pcoll_step(comm_proxy *p, pdom *d, pring *g)
{
    pcoll *c = g->coll;
    pcoll_in *in;
    size_t es, lo, hi, plo, phi;
    uint32_t nmine, npeer;
    px_dtype dt;
    px_redop op;
    char *win;
    int work = 0, whole, results;

    if (c == NULL || !c->active || p->failed)
        return 0;
    in = &c->in[c->k & 1];
    if (!in->hello || in->k != c->k)
        return 0;
    es = pcoll_es(c->code);
    dt = (px_dtype)(c->code >> 32 & 0xff);
    op = (px_redop)(c->code >> 40 & 0xff);
    whole = pcoll_whole(c->n, c->code);
    results = !whole && !pcoll_rs(c->code);
    win = (char *)d->window[g->a] + px_comm_area_bytes(d->n, d->nsig) + c->off;
    pcoll_part(c->n, c->code, g->a, &lo, &hi);
    pcoll_part(c->n, c->code, g->b, &plo, &phi);
    nmine = pcoll_nseg(hi - lo);
    npeer = pcoll_nseg(phi - plo);
    if (in->code != c->code || in->n != c->n) { /* the two calls differ */
        size_t ilo, ihi;

        pcoll_part(in->n, in->code, g->a, &ilo, &ihi); /* its segments, as it cut them */
        if (in->nin < pcoll_nseg(ihi - ilo) || !pcoll_idle(p, c))
            return 0; /* its bytes first (the stream's), and this side's out of the window */
        pcoll_finish(g, PX_EINVAL, in->code);
        pring_advance(g);
        return 1;
    }
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
        if (results && !pcoll_send(p, d, g, PCOLL_RESULT, j, win + at, len, &c->rreq[j]))
            return work;
    }
    while (results && c->ncopy < c->nres && pcoll_sent(p, &c->hreq[c->ncopy])) {
        size_t at = (size_t)c->ncopy * PCOLL_SEG;

        memcpy(win + plo + at, c->rbuf + at, pcoll_seglen(phi - plo, c->ncopy));
        c->ncopy++;
        work = 1;
    }
    if (c->nfold < nmine || (results && c->ncopy < npeer) || !pcoll_idle(p, c))
        return work;
    pcoll_finish(g, PX_OK, 0);
    pring_advance(g);
    return 1;
}

/* A pair allreduce's message from host h: a header, whose segment's bytes follow as the
 * stream's next receive (a half's into the call's copy, a result's into the results), or
 * (inl: plen bytes) came in the same message. */
static void pcoll_recv(comm_proxy *p, int h, const comm_proxy_msg *m, const void *inl,
                       size_t plen)
{
    pdom *d = proxy_dom(p, m->dom);
    pring *g = NULL;
    pcoll *c;
    pcoll_in *in;
    psrc *ps = &p->src[h];
    size_t es = pcoll_es(m->v), lo = 0, hi = 0, len = 0;
    void *dst = NULL;
    int gi = -1, e, kind = 0, ok = es != 0 && m->n > 0 && m->n % es == 0 && m->dst >= 0 &&
                                   m->dst < 2;

    if (ok)
        pcoll_part(m->n, m->v, m->op == PCOLL_HALF ? m->dst : m->src, &lo, &hi);
    if (ok && m->slot < pcoll_nseg(hi - lo))
        len = pcoll_seglen(hi - lo, m->slot); /* as the sender cut it */
    if (d != NULL && d->n == 2 && m->src >= 0 && m->src < 2 && m->dst == 1 - m->src &&
        d->host[m->src] == h && d->window[m->dst] != NULL)
        gi = d->ring_of[m->dst];
    if (gi >= 0)
        g = &d->rings[gi];
    if (g != NULL && g->coll == NULL && (g->coll = calloc(1, sizeof(pcoll))) == NULL) {
        PX_LOG_ERROR("mpi proxy (host %d): out of memory for an allreduce", p->rank);
        p->failed = 1;
        return;
    }
    if (g == NULL) { /* a removed domain's (its bytes, sized as the sender cut them) */
        PX_LOG_DEBUG("mpi proxy (host %d): an allreduce message from host %d for domain %u "
                     "rank %d -> %d matches no pair served here; dropped", p->rank, h, m->dom,
                     m->src, m->dst);
        if (inl == NULL && len > 0)
            proxy_drain(p, h, len);
        else if (inl == NULL)
            p->failed = ok ? p->failed : 1;
        return;
    }
    c = g->coll;
    in = &c->in[m->seq & 1];
    if (m->op == PCOLL_HALF && len > 0 && m->n <= d->data_bytes && m->slot == in->nin &&
        (m->slot == 0 ? !in->hello && pcoll_room(&in->buf, &in->cap, hi - lo)
                      : in->hello && in->k == m->seq && in->n == m->n && in->code == m->v)) {
        if (m->slot == 0) {
            in->hello = 1;
            in->k = m->seq;
            in->off = m->off;
            in->n = m->n;
            in->code = m->v;
        }
        kind = PSRC_CHALF;
        dst = in->buf + (size_t)m->slot * PCOLL_SEG;
    } else if (m->op == PCOLL_RESULT && len > 0 && c->active && c->k == m->seq &&
               m->n == c->n && m->v == c->code && m->slot == c->nres &&
               !pcoll_whole(c->n, c->code) && !pcoll_rs(c->code) && (size_t)m->slot * PCOLL_SEG + len <= c->rcap) {
        size_t at = (size_t)m->slot * PCOLL_SEG;

        kind = PSRC_CRESULT;
        dst = c->rbuf + at;
        /* in order behind every earlier one, and this side's half there has gone out: the
         * result goes straight into the window */
        if (c->ncopy == c->nres && pcoll_sent(p, &c->hreq[m->slot])) {
            pcoll_part(c->n, c->code, m->src, &lo, &hi);
            dst = (char *)d->window[m->dst] + px_comm_area_bytes(d->n, d->nsig) + c->off + lo +
                  at;
            c->direct = 1;
        }
    }
    if (dst != NULL && inl != NULL && plen != len) {
        if (kind == PSRC_CHALF && m->slot == 0)
            in->hello = 0;
        dst = NULL;
    }
    if (dst == NULL) { /* out of step: a defect */
        PX_LOG_ERROR("mpi proxy (host %d): an allreduce message (kind %u, call %u, segment "
                     "%u) from host %d for domain %u rank %d -> %d is out of step or "
                     "malformed; %s", p->rank, m->op, m->seq, m->slot, h, m->dom, m->src,
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
        return;
    }
    if (inl != NULL) {
        psrc q = {.kind = kind, .m = *m, .d = d, .g = g};

        memcpy(dst, inl, len);
        pcoll_got(p, &q);
        return;
    }
    ps->kind = kind;
    ps->m = *m;
    ps->d = d;
    ps->g = g;
    if ((e = p->ops->irecv(dst, len, h, PROXY_TAG_DATA, &ps->req)) != 0)
        proxy_mpi_fail(p, e, "MPI_Irecv of an allreduce's bytes");
}

/* The bytes after a pair allreduce's message are in. */
static void pcoll_got(comm_proxy *p, const psrc *q)
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

/* A chip of the sender's worker died. */
typedef struct proxy_death {
    uint32_t magic;
    int32_t chip;
    char why[160];
} proxy_death;

/* An allgather's arrival notice, sent to every other host when one starts: a host that waits
 * too long then names the hosts it has not heard from. */
typedef struct proxy_arrive {
    uint32_t magic, pad_;
    uint64_t seq; /* the sender's allgathers started so far, this one included */
} proxy_arrive;

/* A clock ping and its answer: t_ns the pinger's clock when it sent the ping, peer_ns the
 * answerer's when it answered (each host's DFX clock in ns: the TSC over its ticks per ns, or
 * CLOCK_MONOTONIC, the clock its trace events count in). */
typedef struct proxy_clock_msg {
    uint32_t magic, seq;
    uint64_t t_ns, peer_ns;
} proxy_clock_msg;

static void proxy_cmd_finish(comm_proxy *p, uint32_t seq);

/* Now on this host's DFX clock, in ns: the clock DFX chooses from the same fact (dfx.c). */
static uint64_t proxy_clock_ns(const comm_proxy *p)
{
    return p->tsc ? (uint64_t)((double)px_ticks() / px_ticks_per_ns()) : px_now_ns();
}

/* Another host's ping: answered at once with this host's clock (any time: no command). */
static void proxy_clock_answer(comm_proxy *p, int h, const proxy_clock_msg *cm)
{
    proxy_clock_msg *a;

    if (cm->magic != PROXY_MAGIC || (a = malloc(sizeof(*a))) == NULL)
        return;
    *a = *cm;
    a->peer_ns = proxy_clock_ns(p);
    (void)proxy_send(p, a, a, sizeof(*a), h, PROXY_TAG_CLOCK_REP);
}

/* The answer to this host's ping in flight: one round of host h; the round with the least
 * round trip gives the offset (the answer was taken at the round trip's middle, within half
 * of it). A late answer to a ping given up is dropped. */
static void proxy_clock_take(comm_proxy *p, int h, const proxy_clock_msg *cm)
{
    pclock *c = p->clk;
    uint64_t now = proxy_clock_ns(p), rtt;
    comm_proxy_clock_est *e;

    if (c == NULL || cm->magic != PROXY_MAGIC || c->seq == 0 || cm->seq != c->seq || h != c->h)
        return;
    e = &c->est[h];
    rtt = now - c->sent_ns;
    if (e->rounds == 0 || rtt < e->rtt_min_ns) {
        e->rtt_min_ns = rtt;
        e->at_ns = c->sent_ns + rtt / 2;
        e->offset_ns = (int64_t)cm->peer_ns - (int64_t)e->at_ns;
    }
    e->rounds++;
    c->seq = 0;
    c->round++;
}

/* The clock estimate in flight: the next ping, a ping given up, or the end (its command is
 * done). One ping in flight at a time, so a round trip measures the network, not a queue. */
static int proxy_clock_poll(comm_proxy *p)
{
    pclock *c = p->clk;
    proxy_clock_msg *m;

    if (c == NULL)
        return 0;
    if (c->seq != 0) {
        if (proxy_clock_ns(p) - c->sent_ns < c->ping_ns)
            return 0;
        c->est[c->h].lost = 1; /* gone or stopped: the next host */
        c->seq = 0;
        c->round = c->rounds;
    }
    while (c->h < p->size && (c->h == p->rank || c->round >= c->rounds)) {
        c->h++;
        c->round = 0;
    }
    if (c->h == p->size) {
        p->clk = NULL;
        pthread_mutex_lock(&p->lock);
        c->done = 1;
        if (c->abandoned) {
            free(c->est);
            free(c);
        }
        pthread_mutex_unlock(&p->lock);
        proxy_cmd_finish(p, p->clk_cmd);
        return 1;
    }
    if ((m = calloc(1, sizeof(*m))) == NULL) {
        c->est[c->h].lost = 1;
        c->round = c->rounds;
        return 1;
    }
    m->magic = PROXY_MAGIC;
    m->seq = c->seq = ++p->clk_seq != 0 ? p->clk_seq : ++p->clk_seq;
    m->t_ns = c->sent_ns = proxy_clock_ns(p);
    if (!proxy_send(p, m, m, sizeof(*m), c->h, PROXY_TAG_CLOCK)) {
        c->est[c->h].lost = 1;
        c->seq = 0;
        c->round = c->rounds;
    }
    return 1;
}

_Static_assert(HIER_DEATHS_MAX <= 64, "a host's chips' deaths fit a 64-bit mask");

/* Tells every other host each new death on this worker's board (once each). */
static int proxy_deaths_tell(comm_proxy *p)
{
    const hier_deaths *b = atomic_load_explicit(&p->deaths, memory_order_acquire);
    uint64_t m, fresh;
    int work = 0;

    if (b == NULL || p->size < 2)
        return 0;
    m = atomic_load_explicit(&b->mask, memory_order_acquire);
    fresh = m & ~p->deaths_told;
    for (int c = 0; fresh != 0 && c < HIER_DEATHS_MAX; c++) { /* a worker's chips */
        if (!(fresh >> c & 1))
            continue;
        proxy_death dm;

        memset(&dm, 0, sizeof(dm)); /* padding too: the bytes go on the wire */
        dm.magic = PROXY_MAGIC;
        dm.chip = c;
        snprintf(dm.why, sizeof(dm.why), "%.159s", b->why[c]);
        proxy_send_others(p, &dm, sizeof(dm), PROXY_TAG_DEATH);
        PX_LOG_DEBUG("mpi proxy (host %d): told the other hosts that chip %d died", p->rank, c);
        work++;
    }
    p->deaths_told = m;
    return work;
}

/* Host h's chip died: on the remote board, for this worker's waits on it. */
static void proxy_death_take(comm_proxy *p, int h, const proxy_death *dm)
{
    if (p->rdeaths == NULL || h >= COMM_RDEATH_HOSTS || dm->chip < 0 ||
        dm->chip >= HIER_DEATHS_MAX || dm->magic != PROXY_MAGIC)
        return;
    if (atomic_load_explicit(&p->rdeaths->mask[h], memory_order_relaxed) == 0)
        snprintf(p->rdeaths->why[h], sizeof(p->rdeaths->why[h]), "chip %d of host %d: %.120s",
                 dm->chip, h, dm->why);
    atomic_fetch_or_explicit(&p->rdeaths->mask[h], 1ull << dm->chip, memory_order_release);
    atomic_store_explicit(&p->rdeaths->any, 1, memory_order_release);
    PX_LOG_INFO("mpi proxy (host %d): host %d says its chip %d died (%s)", p->rank, h,
                dm->chip, dm->why);
}

/* Takes what other proxies sent, each host's stream in order; returns how many messages. */
static int proxy_receive(comm_proxy *p)
{
    int work = 0;

    for (int h = 0; h < p->size; h++)
        work += proxy_src_poll(p, h);
    for (int k = 0; k < PROXY_RECV_BURST && !p->failed; k++) {
        int any = 0;

        for (int h = 0; h < p->size && !p->failed; h++) {
            comm_proxy_msg m;
            int flag = 0, src = 0, tag = 0, e;
            size_t n = 0;

            if (p->src[h].req != NULL)
                continue; /* its bytes first */
            if ((e = p->ops->iprobe(h, &flag, &src, &tag, &n)) != 0) {
                proxy_mpi_fail(p, e, "MPI_Iprobe");
                break;
            }
            if (!flag)
                continue;
            any = 1;
            work++;
            if (tag == PROXY_TAG_DEATH && n == sizeof(proxy_death)) {
                proxy_death dm;

                if ((e = p->ops->recv(&dm, sizeof(dm), h, tag)) != 0) {
                    proxy_mpi_fail(p, e, "MPI_Recv");
                    break;
                }
                proxy_death_take(p, h, &dm);
                continue;
            }
            if (tag == PROXY_TAG_ARRIVE && n == sizeof(proxy_arrive)) {
                proxy_arrive am;

                if ((e = p->ops->recv(&am, sizeof(am), h, tag)) != 0) {
                    proxy_mpi_fail(p, e, "MPI_Recv");
                    break;
                }
                if (am.magic == PROXY_MAGIC &&
                    am.seq > atomic_load_explicit(&p->arrived[h], memory_order_relaxed))
                    atomic_store_explicit(&p->arrived[h], am.seq, memory_order_release);
                continue;
            }
            if ((tag == PROXY_TAG_CLOCK || tag == PROXY_TAG_CLOCK_REP) &&
                n == sizeof(proxy_clock_msg)) {
                proxy_clock_msg cm;

                if ((e = p->ops->recv(&cm, sizeof(cm), h, tag)) != 0) {
                    proxy_mpi_fail(p, e, "MPI_Recv");
                    break;
                }
                if (tag == PROXY_TAG_CLOCK)
                    proxy_clock_answer(p, h, &cm);
                else
                    proxy_clock_take(p, h, &cm);
                continue;
            }
            if (tag == PROXY_TAG_COLL && n > sizeof(m) && n <= sizeof(m) + PCOLL_INLINE) {
                _Alignas(comm_proxy_msg) unsigned char cm[sizeof(m) + PCOLL_INLINE];

                if ((e = p->ops->recv(cm, n, h, tag)) != 0) {
                    proxy_mpi_fail(p, e, "MPI_Recv");
                    break;
                }
                memcpy(&m, cm, sizeof(m));
                if (m.magic == PROXY_MAGIC)
                    pcoll_recv(p, h, &m, cm + sizeof(m), n - sizeof(m));
                continue;
            }
            if ((tag != PROXY_TAG_REQ && tag != PROXY_TAG_REP && tag != PROXY_TAG_COLL) ||
                n != sizeof(m)) {
                PX_LOG_WARN("mpi proxy (host %d): dropped a message of %zu bytes, tag %d, from "
                            "host %d that is no proxy request or answer", p->rank, n, tag, h);
                if ((e = p->ops->irecv(p->src[h].junk = malloc(n > 0 ? n : 1), n, h, tag,
                                       &p->src[h].req)) != 0)
                    proxy_mpi_fail(p, e, "MPI_Irecv");
                p->src[h].kind = PSRC_DRAIN;
                continue;
            }
            /* a header is small: it is here once probed (eager) */
            if ((e = p->ops->recv(&m, sizeof(m), h, tag)) != 0) {
                proxy_mpi_fail(p, e, "MPI_Recv");
                break;
            }
            if (m.magic != PROXY_MAGIC) {
                PX_LOG_WARN("mpi proxy (host %d): dropped a message from host %d with a bad "
                            "magic", p->rank, h);
                continue;
            }
            if (tag == PROXY_TAG_REQ)
                proxy_serve(p, h, &m);
            else if (tag == PROXY_TAG_COLL)
                pcoll_recv(p, h, &m, NULL, 0);
            else
                proxy_answer(p, h, &m);
            work += proxy_src_poll(p, h); /* often in already */
        }
        if (!any)
            break;
    }
    return work;
}

/* ---- commands ---- */

static int pring_sends_done(comm_proxy *p, pring *g, uint32_t i);
static void proxy_cmd_finish(comm_proxy *p, uint32_t seq);

/* The domain being removed: once every send from its memory has finished, it is dropped and
 * its command is done. */
static int proxy_close_poll(comm_proxy *p)
{
    pdom *d = p->closing;

    if (d == NULL)
        return 0;
    for (int r = 0; r < d->nrings; r++)
        for (uint32_t i = 0; i < COMM_STG_SLOTS; i++)
            if (!p->failed && !pring_sends_done(p, &d->rings[r], i))
                return 0;
    for (int r = 0; r < d->nrings; r++) { /* a pair allreduce's sends from its windows */
        pcoll *c = d->rings[r].coll;

        if (!p->failed && c != NULL && !pcoll_idle(p, c))
            return 0;
    }
    for (int h = 0; h < p->size; h++) /* bytes still coming into its memory */
        if (!p->failed && p->src[h].req != NULL && p->src[h].d == d)
            return 0;
    for (int i = 0; i < p->ndoms; i++) {
        if (p->doms[i] == d) {
            p->doms[i] = p->doms[--p->ndoms];
            break;
        }
    }
    if (d->bad > 0)
        PX_LOG_WARN("mpi proxy (host %d): domain %u: skipped %u malformed requests of this "
                    "worker's chips (a defect)", p->rank, d->id, d->bad);
    pdom_free(d);
    p->closing = NULL;
    proxy_cmd_finish(p, p->closing_seq);
    return 1;
}

/* Marks command seq done and wakes the parent. */
static void proxy_cmd_finish(comm_proxy *p, uint32_t seq)
{
    atomic_store_explicit(&p->cmd_done, seq, memory_order_seq_cst);
    util_wake(&p->cmd_done, &p->cmd_sleep, INT_MAX, 0);
}

/* The allgather in flight: tested; finished, its command is done. */
static int proxy_gather_poll(comm_proxy *p)
{
    pgather *g = p->ag;
    int done = 0, e;

    if (g == NULL)
        return 0;
    if ((e = p->ops->test(g->req, &done)) != 0) {
        g->err = e;
        done = 1;
    }
    if (!done)
        return 0;
    p->ag = NULL;
    pthread_mutex_lock(&p->lock);
    g->done = 1;
    if (g->abandoned) {
        free(g->in);
        free(g->out);
        free(g);
    }
    pthread_mutex_unlock(&p->lock);
    proxy_cmd_finish(p, p->ag_seq);
    return 1;
}

/* Tells every other host that this one entered its next allgather (proxy_arrive). */
static void proxy_arrive_tell(comm_proxy *p)
{
    proxy_arrive m;

    memset(&m, 0, sizeof(m));
    m.magic = PROXY_MAGIC;
    m.seq = atomic_fetch_add_explicit(&p->ag_started, 1, memory_order_relaxed) + 1;
    proxy_send_others(p, &m, sizeof(m), PROXY_TAG_ARRIVE);
}

static int proxy_command(comm_proxy *p)
{
    uint32_t seq = atomic_load_explicit(&p->cmd_seq, memory_order_acquire);

    if (seq == atomic_load_explicit(&p->cmd_done, memory_order_relaxed) || p->ag != NULL ||
        p->closing != NULL || p->clk != NULL)
        return 0;
    pthread_mutex_lock(&p->lock);
    if (p->cmd == CMD_CLOCK) {
        p->clk = p->cmd_clk;
        p->clk_cmd = seq;
        p->cmd = CMD_NONE;
        pthread_mutex_unlock(&p->lock);
        return proxy_clock_poll(p) + 1;
    }
    if (p->cmd == CMD_ALLGATHER) {
        pgather *g = p->cmd_ag;
        int e = p->ops->iallgather(g->in, g->out, g->n, &g->req);

        p->cmd = CMD_NONE;
        if (e != 0) {
            g->err = e;
            g->done = 1;
            pthread_mutex_unlock(&p->lock);
            proxy_cmd_finish(p, seq);
            return 1;
        }
        p->ag = g;
        p->ag_seq = seq;
        pthread_mutex_unlock(&p->lock);
        proxy_arrive_tell(p);
        return 1;
    }
    if (p->cmd == CMD_ADD && p->ndoms < PROXY_DOMS) {
        p->doms[p->ndoms++] = p->cmd_dom;
        p->cmd_dom = NULL;
    } else if (p->cmd == CMD_REMOVE) {
        /* closed in the sweeps: every request its chips posted is sent on first, and the
         * command is done once MPI has finished every send from the domain's memory (the
         * parent unmaps it then) */
        for (int i = 0; i < p->ndoms; i++) {
            if (p->doms[i]->id == p->cmd_id) {
                p->closing = p->doms[i];
                p->closing_seq = seq;
                p->cmd = CMD_NONE;
                pthread_mutex_unlock(&p->lock);
                return 1;
            }
        }
    }
    p->cmd = CMD_NONE;
    pthread_mutex_unlock(&p->lock);
    proxy_cmd_finish(p, seq);
    return 1;
}

/* Posts a command and waits until the thread took it. */
static px_status proxy_post(comm_proxy *p, int cmd, pdom *d, uint32_t id, double timeout_s);

static int proxy_cmd_taken(void *arg)
{
    comm_proxy *p = arg;

    return atomic_load_explicit(&p->cmd_done, memory_order_acquire) ==
           atomic_load_explicit(&p->cmd_seq, memory_order_relaxed);
}

static px_status proxy_post_ag(comm_proxy *p, int cmd, pdom *d, uint32_t id, pgather *g,
                               pclock *c, double timeout_s);

static px_status proxy_post(comm_proxy *p, int cmd, pdom *d, uint32_t id, double timeout_s)
{
    return proxy_post_ag(p, cmd, d, id, NULL, NULL, timeout_s);
}

/* After an allgather timed out: ", not heard from host 1 (pid 42, id h1)" naming the hosts
 * whose arrival notice for this allgather has not come, or "" when the thread never started
 * it or every notice came. */
static void proxy_missing_text(comm_proxy *p, char *buf, size_t n)
{
    uint64_t seq = atomic_load_explicit(&p->ag_started, memory_order_acquire);
    size_t len = 0;

    buf[0] = '\0';
    for (int h = 0; seq > 0 && h < p->size && len + 1 < n; h++)
        if (h != p->rank && atomic_load_explicit(&p->arrived[h], memory_order_acquire) < seq)
            len += (size_t)snprintf(buf + len, n - len, "%s host %d (pid %d, id %s)",
                                    len == 0 ? ", not heard from" : ",", h,
                                    (int)p->hosts[h].pid, p->hosts[h].id);
}

px_status comm_proxy_allgather(comm_proxy *p, const void *in, size_t n, void *out,
                               double timeout_s)
{
    pgather *g = calloc(1, sizeof(*g));
    px_status st;
    char s[256];

    if (g == NULL || (g->in = malloc(n)) == NULL ||
        (g->out = malloc((size_t)p->size * n)) == NULL) {
        if (g != NULL)
            free(g->in);
        free(g);
        return px_set_error(PX_ENOMEM, "out of host memory for an allgather of %zu bytes", n);
    }
    memcpy(g->in, in, n);
    g->n = n;
    st = proxy_post_ag(p, CMD_ALLGATHER, NULL, 0, g, NULL, timeout_s);
    pthread_mutex_lock(&p->lock);
    if (st != PX_OK || !g->done) {
        g->abandoned = 1; /* the thread frees it when MPI is done with it */
        pthread_mutex_unlock(&p->lock);
        proxy_missing_text(p, s, sizeof(s));
        return px_set_error(PX_ETIMEDOUT, "the %d hosts of the job did not all join within %g "
                            "s (PLEXUS_TIMEOUT_S)%s: a host is gone, stopped or stuck, or "
                            "did not make the same call (every host allocates a domain "
                            "spanning hosts, in the same order)", p->size, timeout_s, s);
    }
    pthread_mutex_unlock(&p->lock);
    if (g->err != 0) {
        p->ops->error(g->err, s, sizeof(s));
        st = px_set_error(PX_EIO, "MPI_Iallgather between the hosts failed: %s", s);
    } else {
        memcpy(out, g->out, (size_t)p->size * n);
    }
    free(g->in);
    free(g->out);
    free(g);
    return st;
}

static px_status proxy_post_ag(comm_proxy *p, int cmd, pdom *d, uint32_t id, pgather *g,
                               pclock *c, double timeout_s)
{
    util_wait w = {.ready = proxy_cmd_taken, .arg = p, .word = &p->cmd_done,
                   .sleeping = &p->cmd_sleep, .count_sleepers = 1, .shared = 0,
                   .spin_ticks = 0, .yield_ticks = px_ns_to_ticks(PROXY_YIELD_NS),
                   .timeout_ns = (uint64_t)(timeout_s * 1e9)};
    px_status st;

    pthread_mutex_lock(&p->lock); /* one command at a time: the caller's lock is the parent's */
    if (atomic_load_explicit(&p->cmd_done, memory_order_acquire) !=
        atomic_load_explicit(&p->cmd_seq, memory_order_relaxed)) {
        pthread_mutex_unlock(&p->lock); /* an earlier one timed out and is not done yet */
        return px_set_error(PX_ETIMEDOUT, "the worker's MPI proxy is still carrying out an "
                            "earlier command that timed out (an allgather of the hosts or a "
                            "removal waiting on MPI: a host of the job is gone, stopped or "
                            "stuck)");
    }
    p->cmd = cmd;
    p->cmd_dom = d;
    p->cmd_id = id;
    p->cmd_ag = g;
    p->cmd_clk = c;
    atomic_fetch_add_explicit(&p->cmd_seq, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&p->lock);
    util_bump_wake(&p->bell->bell, NULL, 1, 1);
    st = util_wait_run(&w);
    if (st != PX_OK)
        return px_set_error(PX_ETIMEDOUT, "the worker's MPI proxy did not take a command "
                            "within %g s (it is stuck inside MPI: a host of the job is gone "
                            "or stopped)", timeout_s);
    return PX_OK;
}

px_status comm_proxy_clock(comm_proxy *p, int rounds, double timeout_s,
                           comm_proxy_clock_est *est)
{
    pclock *c = calloc(1, sizeof(*c));
    double ping_s = PX_MAX(0.05, PX_MIN(1.0, timeout_s / (2.0 * PX_MAX(1, p->size))));
    px_status st;

    if (c == NULL || (c->est = calloc((size_t)p->size, sizeof(*c->est))) == NULL) {
        free(c);
        return px_set_error(PX_ENOMEM, "out of host memory for a clock estimate of %d hosts",
                            p->size);
    }
    c->rounds = PX_MAX(1, rounds);
    c->ping_ns = (uint64_t)(ping_s * 1e9);
    c->est[p->rank].rounds = c->rounds; /* this host: offset 0, exactly */
    st = proxy_post_ag(p, CMD_CLOCK, NULL, 0, NULL, c, timeout_s);
    pthread_mutex_lock(&p->lock);
    if (st != PX_OK || !c->done) {
        c->abandoned = 1; /* the thread frees it when it ends the estimate */
        pthread_mutex_unlock(&p->lock);
        return px_set_error(PX_ETIMEDOUT, "the clock estimate of the %d hosts did not end "
                            "within %g s (PLEXUS_TIMEOUT_S): the worker's MPI proxy is stuck "
                            "(a host of the job is gone or stopped)", p->size, timeout_s);
    }
    pthread_mutex_unlock(&p->lock);
    memcpy(est, c->est, (size_t)p->size * sizeof(*est));
    if (p->clk_first == NULL) /* the parent's calls are serialised: no lock */
        p->clk_first = c->est;
    else
        free(c->est);
    free(c);
    return PX_OK;
}

const comm_proxy_clock_est *comm_proxy_clock_first(const comm_proxy *p)
{
    return p->clk_first;
}

px_status comm_proxy_add(comm_proxy *p, const comm_proxy_dom *s, double timeout_s)
{
    pdom *d = pdom_copy(s);
    px_status st;

    if (d == NULL)
        return px_set_error(PX_ENOMEM, "out of host memory for the MPI proxy's domain");
    if (p->ndoms >= PROXY_DOMS) { /* read racily: the parent's calls are serialised */
        pdom_free(d);
        return px_set_error(PX_ENOMEM, "the worker's MPI proxy serves %d domains already; "
                            "release one first", PROXY_DOMS);
    }
    if (!proxy_cmd_taken(p)) { /* refused below: d would stay with no one */
        pdom_free(d);
        return proxy_post(p, CMD_ADD, NULL, 0, timeout_s);
    }
    if ((st = proxy_post(p, CMD_ADD, d, 0, timeout_s)) != PX_OK)
        return st; /* d stays with the command: the thread may still take it */
    return PX_OK;
}

void comm_proxy_fail_job(comm_proxy *p)
{
    atomic_store_explicit(&p->job_failed, 1, memory_order_release);
}

static int proxy_unwatched(void *arg)
{
    comm_proxy *p = arg;

    return atomic_load_explicit(&p->unwatched, memory_order_acquire) != 0;
}

void comm_proxy_unwatch(comm_proxy *p, double timeout_s)
{
    util_wait w = {.ready = proxy_unwatched, .arg = p, .word = &p->unwatched,
                   .sleeping = &p->unwatch_sleep, .count_sleepers = 1, .shared = 0,
                   .spin_ticks = 0, .yield_ticks = px_ns_to_ticks(PROXY_YIELD_NS)};

    /* the thread answers in its next sweep (a slice at most) unless it is inside a blocking
     * MPI call: after a failed job that is not waited for long */
    if (atomic_load_explicit(&p->job_failed, memory_order_acquire) &&
        timeout_s > PROXY_FAILED_FINALIZE_S)
        timeout_s = PROXY_FAILED_FINALIZE_S;
    w.timeout_ns = (uint64_t)(timeout_s * 1e9);
    atomic_store_explicit(&p->unwatch, 1, memory_order_seq_cst);
    util_bump_wake(&p->bell->bell, NULL, 1, 1);
    if (util_wait_run(&w) != PX_OK) {
        /* it is stuck inside MPI and reads nothing meanwhile; it reads the board only in a
         * sweep, after looking at the field again */
        PX_LOG_WARN("mpi proxy (host %d): did not let go of the deaths board within %g s (it "
                    "is stuck inside MPI: a host of the job is gone or stopped)", p->rank,
                    timeout_s);
        atomic_store_explicit(&p->deaths, NULL, memory_order_release);
    }
}

px_status comm_proxy_remove(comm_proxy *p, uint32_t id, double timeout_s)
{
    px_status st;

    char keep[PX_ERRMSG_MAX];

    if (atomic_load_explicit(&p->job_failed, memory_order_acquire) && timeout_s > 1.0)
        timeout_s = 1.0;
    snprintf(keep, sizeof(keep), "%s", px_last_error()); /* a failed set-up's own reason */
    st = proxy_post(p, CMD_REMOVE, NULL, id, timeout_s);

    if (st != PX_OK) {
        PX_LOG_WARN("mpi proxy: domain %u: %s; its memory stays mapped (MPI may still read "
                    "it)", id, px_last_error());
        (void)px_set_error(st, "%s", keep); /* the caller's message stays what went wrong */
    }
    return st;
}

/* ---- the thread ---- */

/* Any request of this worker's chips waiting for an answer. */
static int proxy_in_flight(const comm_proxy *p)
{
    for (int i = 0; i < p->ndoms; i++)
        for (int r = 0; r < p->doms[i]->nrings; r++)
            if (p->doms[i]->rings[r].sent != p->doms[i]->rings[r].done)
                return 1;
    for (int h = 0; h < p->size; h++)
        if (p->src[h].req != NULL)
            return 1;
    return p->nps > 0 || p->ag != NULL || p->closing != NULL || p->clk != NULL;
}

/* The parent is about to unmap the deaths board: the thread stops reading it (it reads it
 * only in proxy_deaths_tell, later in this same sweep). */
static int proxy_unwatch_poll(comm_proxy *p)
{
    if (atomic_load_explicit(&p->unwatch, memory_order_acquire) == 0 ||
        atomic_load_explicit(&p->unwatched, memory_order_relaxed) != 0)
        return 0;
    atomic_store_explicit(&p->deaths, NULL, memory_order_release);
    atomic_store_explicit(&p->unwatched, 1, memory_order_seq_cst);
    util_wake(&p->unwatched, &p->unwatch_sleep, INT_MAX, 0);
    return 1;
}

static int proxy_sweep(comm_proxy *p)
{
    int work = proxy_unwatch_poll(p) + proxy_command(p) + proxy_gather_poll(p) +
               proxy_clock_poll(p);

    for (int i = 0; i < p->ndoms; i++)
        for (int r = 0; r < p->doms[i]->nrings; r++)
            work += pring_forward(p, p->doms[i], &p->doms[i]->rings[r]);
    if (p->nps > 0)
        work += proxy_reap(p);
    work += proxy_receive(p);
    work += proxy_close_poll(p);
    work += proxy_deaths_tell(p);
    return work;
}

static int proxy_ready(void *arg)
{
    comm_proxy *p = arg;

    return p->woke || atomic_load_explicit(&p->stop, memory_order_acquire);
}

static int proxy_progress(void *arg, int asleep)
{
    comm_proxy *p = arg;
    int work = proxy_sweep(p);

    if (asleep && work > 0)
        p->woke = 1;
    return work > 0;
}

static void proxy_sleep_cb(void *arg, int asleep)
{
    comm_proxy *p = arg;

    if (asleep)
        p->seen = atomic_load_explicit(&p->bell->bell, memory_order_seq_cst);
}

static void proxy_up(comm_proxy *p, uint32_t v)
{
    atomic_store_explicit(&p->up, v, memory_order_seq_cst);
    util_wake(&p->up, &p->up_sleep, INT_MAX, 0);
}

/* Start: MPI up, then the hosts' records. */
static px_status proxy_init(comm_proxy *p)
{
    comm_host me;
    px_mpi_req *r = NULL;
    char s[256];
    uint64_t until;
    int e, done = 0;

    if (px_mpi_state() == PX_MPI_STATE_DONE)
        return px_set_error(PX_ESTATE, "MPI starts once per process, and an earlier worker of "
                            "this process ran under MPI: run one worker under MPI per process "
                            "(PLEXUS_MPI=off for a level-2 worker that needs no other host)");
    if ((e = p->ops->init(&p->rank, &p->size)) != 0) {
        p->ops->error(e, s, sizeof(s));
        return px_set_error(PX_EIO, "MPI_Init_thread failed: %s", s);
    }
    px_mpi_state_set(PX_MPI_STATE_UP);
    pthread_mutex_lock(&g_mpi_lock);
    g_live = p;
    if (g_mpi_pid == 0)
        atexit(proxy_atexit);
    g_mpi_pid = getpid();
    pthread_mutex_unlock(&g_mpi_lock);
    p->ops->version(p->lib, sizeof(p->lib));
    if ((p->src = calloc((size_t)p->size, sizeof(*p->src))) == NULL ||
        (p->hosts = calloc((size_t)p->size, sizeof(*p->hosts))) == NULL ||
        (p->arrived = calloc((size_t)p->size, sizeof(*p->arrived))) == NULL)
        return px_set_error(PX_ENOMEM, "out of host memory for %d hosts", p->size);
    memset(&me, 0, sizeof(me));
    snprintf(me.id, sizeof(me.id), "%s", p->host_id);
    me.chips = p->nchips;
    me.pid = (int32_t)getpid();
    me.comm_transport = p->comm_transport;
    me.caps = *p->caps;
    if ((e = p->ops->iallgather(&me, p->hosts, sizeof(me), &r)) != 0) {
        p->ops->error(e, s, sizeof(s));
        return px_set_error(PX_EIO, "MPI_Iallgather of the hosts failed: %s", s);
    }
    until = px_now_ns() + (uint64_t)(p->timeout_s * 1e9);
    while ((e = p->ops->test(r, &done)) == 0 && !done) {
        if (px_now_ns() > until) {
            p->ops->cancel(r);
            return px_set_error(PX_ETIMEDOUT, "the %d workers of the MPI job did not all "
                                "tell their hosts within %g s (PLEXUS_TIMEOUT_S): a worker "
                                "did not start or is stuck", p->size, p->timeout_s);
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    if (e != 0) {
        p->ops->error(e, s, sizeof(s));
        return px_set_error(PX_EIO, "MPI_Iallgather of the hosts failed: %s", s);
    }
    for (int h = 0; h < p->size; h++)
        p->hosts[h].id[COMM_HOST_ID_MAX - 1] = '\0';
    return PX_OK;
}

static void *proxy_main(void *arg)
{
    comm_proxy *p = arg;
    px_status st;
    util_wait w = {.ready = proxy_ready, .arg = p, .word = &p->bell->bell,
                   .sleeping = &p->bell->sleeping, .shared = 1, .spin_ticks = 0,
                   .yield_ticks = px_ns_to_ticks(PROXY_YIELD_NS), .sleep_once = 1,
                   .progress = proxy_progress, .sleep_cb = proxy_sleep_cb};

    pthread_setname_np(pthread_self(), "px-mpi-proxy");
    if ((st = proxy_init(p)) != PX_OK) {
        pthread_mutex_lock(&g_mpi_lock);
        if (g_live == p)
            g_live = NULL;
        pthread_mutex_unlock(&g_mpi_lock);
        p->start_st = st;
        snprintf(p->start_err, sizeof(p->start_err), "%s", px_last_error());
        proxy_up(p, 2);
        return NULL;
    }
    PX_LOG_INFO("mpi: host %d of %d (%s), %s", p->rank, p->size, p->host_id, p->lib);
    if (p->size > 1) /* messages from other hosts ring nothing: poll longer before a sleep */
        w.yield_ticks = px_ns_to_ticks(PROXY_HOT_YIELD_NS);
    proxy_up(p, 1);
    while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
        uint64_t slice = p->size > 1 || proxy_in_flight(p) ? PROXY_POLL_NS : PROXY_SLICE_NS;

        p->woke = 0;
        w.deadline_ns = 0;
        w.timeout_ns = slice;
        w.slice_ns = slice;
        (void)util_wait_run(&w);
    }
    while (proxy_command(p))
        ;
    for (int i = 0; i < p->ndoms; i++)
        pdom_free(p->doms[i]);
    p->ndoms = 0;
    for (int i = 0; i < p->nps; i++) {
        p->ops->cancel(p->ps[i].req);
        free(p->ps[i].buf);
    }
    p->nps = 0;
    PX_LOG_DEBUG("mpi proxy (host %d): sent on %llu requests, served %llu", p->rank,
                 (unsigned long long)p->forwarded, (unsigned long long)p->served);
    /* after a failure too (Open MPI's shared-memory segments go with it), but the stop then
     * waits for it briefly: a stopped host would hold it forever, and mpirun ends the job */
    if (!p->failed)
        (void)p->ops->finalize();
    px_mpi_state_set(PX_MPI_STATE_DONE);
    return NULL;
}

static int proxy_is_up(void *arg)
{
    comm_proxy *p = arg;

    return atomic_load_explicit(&p->up, memory_order_acquire) != 0;
}

px_status comm_proxy_start(const void *ops, const px_caps *caps, int comm_transport, int nchips,
                           comm_bell *bell, const hier_deaths *deaths, comm_rdeaths *rdeaths,
                           double timeout_s, comm_proxy **out)
{
    const char *host_id = caps->f[PX_FACT_HOST_ID].text;
    comm_proxy *p = calloc(1, sizeof(*p));
    util_wait w = {.ready = proxy_is_up, .word = NULL, .count_sleepers = 1, .shared = 0,
                   .spin_ticks = 0, .yield_ticks = px_ns_to_ticks(PROXY_YIELD_NS)};
    int e;
    px_status st;

    if (p == NULL)
        return px_set_error(PX_ENOMEM, "out of host memory for the MPI proxy");
    p->ops = ops;
    p->bell = bell;
    p->timeout_s = timeout_s;
    p->nchips = nchips;
    p->comm_transport = comm_transport;
    p->caps = caps;
    p->tsc = px_caps_get(caps, PX_FACT_TSC_INVARIANT) != 0;
    atomic_init(&p->deaths, deaths);
    p->rdeaths = rdeaths;
    snprintf(p->host_id, sizeof(p->host_id), "%s", host_id);
    pthread_mutex_init(&p->lock, NULL);
    if ((e = pthread_create(&p->thread, NULL, proxy_main, p)) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return px_set_error(PX_ENOMEM, "cannot start the MPI proxy thread: %s", strerror(e));
    }
    w.arg = p;
    w.word = &p->up;
    w.sleeping = &p->up_sleep;
    w.timeout_ns = (uint64_t)(timeout_s * 1e9) + 1000000000ull; /* its own deadline first */
    if (util_wait_run(&w) != PX_OK) {
        /* stuck inside MPI_Init: it cannot be joined; the process should end */
        pthread_detach(p->thread);
        return px_set_error(PX_ETIMEDOUT, "MPI_Init_thread did not return within %g s "
                            "(PLEXUS_TIMEOUT_S): is every rank of the job started (mpirun -np "
                            "H), and can the hosts reach each other?", timeout_s);
    }
    if (atomic_load_explicit(&p->up, memory_order_acquire) != 1) {
        st = p->start_st;
        pthread_join(p->thread, NULL);
        px_set_error(st, "the worker's MPI proxy could not start: %s", p->start_err);
        free(p->hosts);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return st;
    }
    if (p->rank == 0 && p->size > 1) { /* the first clock estimate: rates from two */
        comm_proxy_clock_est *est = calloc((size_t)p->size, sizeof(*est));

        if (est == NULL || comm_proxy_clock(p, PROXY_CLOCK_ROUNDS, timeout_s, est) != PX_OK)
            PX_LOG_WARN("mpi proxy (host 0): no first estimate of the other hosts' clocks (%s): "
                        "DFX aligns them by an offset alone", est ? px_last_error() : "out of "
                        "host memory");
        free(est);
    }
    *out = p;
    return PX_OK;
}

int comm_proxy_rank(const comm_proxy *p)
{
    return p->rank;
}

int comm_proxy_size(const comm_proxy *p)
{
    return p->size;
}

const comm_host *comm_proxy_host(const comm_proxy *p, int r)
{
    return r >= 0 && r < p->size ? &p->hosts[r] : NULL;
}

const char *comm_proxy_library(const comm_proxy *p)
{
    return p->lib;
}

/* Stops p's thread (it finalises MPI); p->stopped when it ended. */
static void proxy_stop_thread(comm_proxy *p)
{
    struct timespec until;

    atomic_store_explicit(&p->stop, 1, memory_order_release);
    util_bump_wake(&p->bell->bell, NULL, INT_MAX, 1);
    double wait_s = atomic_load_explicit(&p->job_failed, memory_order_acquire) && p->size > 1
                        ? PROXY_FAILED_FINALIZE_S : p->timeout_s + 1;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)wait_s;
    if (pthread_timedjoin_np(p->thread, NULL, &until) != 0) {
        PX_LOG_WARN("mpi proxy (host %d): did not stop within %g s (inside MPI_Finalize: %s); "
                    "leaving it", p->rank, wait_s,
                    wait_s == PROXY_FAILED_FINALIZE_S ? "the job failed and another host does "
                    "not answer; mpirun ends the job" : "another host of the job is gone or "
                    "stuck");
        pthread_detach(p->thread);
        p->abandoned = 1; /* the exit does not wait again (nor ring a bell that is gone) */
        return; /* it stays live: MPI is not finalised under it */
    }
    pthread_mutex_lock(&g_mpi_lock);
    if (g_live == p)
        g_live = NULL;
    pthread_mutex_unlock(&g_mpi_lock);
    p->stopped = 1;
}

void comm_proxy_stop(comm_proxy *p)
{
    if (p == NULL)
        return;
    proxy_stop_thread(p);
    if (!p->stopped)
        return; /* p stays: the thread still uses it */
    free(p->hosts);
    free((void *)p->arrived);
    free(p->src);
    free(p->ps);
    free(p->clk_first);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
