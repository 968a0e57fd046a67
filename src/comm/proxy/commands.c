/*
 * commands.c - the parent's commands to the proxy thread (proxy.h: add and remove a domain,
 * an allgather of the hosts, a clock estimate; the deaths board's unwatch) and the thread's
 * side of them. One command at a time: the parent posts it under the lock, bumps the
 * command number, rings the proxy's doorbell and waits until the thread has taken it (or
 * carried it out: an allgather, a clock estimate, a removal once MPI let go of the domain's
 * memory). What a parent that gave up leaves (an allgather's buffers, an estimate) is freed
 * by the thread when it is done with it.
 */
#include "comm/proxy/proxy_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/wait.h"

/* 1 while something of d is in flight: a request's sends, a pair allreduce's sends from its
 * windows, bytes coming into its memory. */
static int pdom_busy(comm_proxy *p, pdom *d)
{
    for (int r = 0; r < d->nrings; r++)
        for (uint32_t i = 0; i < COMM_STG_SLOTS; i++)
            if (!pring_sends_done(p, &d->rings[r], i))
                return 1;
    for (int r = 0; r < d->nrings; r++)
        if (d->rings[r].coll != NULL && !pcoll_idle(p, d->rings[r].coll))
            return 1;
    for (int h = 0; h < p->size; h++)
        if (p->src[h].req != NULL && p->src[h].d == d)
            return 1;
    return 0;
}

static int pdom_revoked(const pdom *d)
{
    return (d->revoke != NULL && atomic_load_explicit(d->revoke, memory_order_acquire) != 0) ||
           (d->agree != NULL && atomic_load_explicit(&d->agree->orch, memory_order_acquire));
}

/*
 * The domain being removed: once every send from its memory has finished, it is dropped and
 * its command is done. A revoked domain's sends may never finish: a call that the revocation
 * cut off (a pair allreduce's segments, sent by rendezvous) waits for a receive that the
 * other host, which gave the call up or ended, never posts. After PROXY_REVOKED_CLOSE_NS its
 * removal leaves them: the domain is kept here, out of the sweeps, and its memory stays
 * mapped (comm_proxy_remove says so), so a send that ends later reads mapped memory.
 */
int proxy_close_poll(comm_proxy *p)
{
    pdom *d = p->closing;
    int left = 0;

    if (d == NULL)
        return 0;
    /* its revocation (and its kernel generation's, and its last agreement entries) is told
     * before it goes: a member that revoked it may have returned, and this host released
     * it, before a sweep told the other hosts */
    if (!p->failed)
        (void)(pdom_revoke_tell(p, d) + pdom_agree_closing(p, d));
    if (!p->failed && pdom_busy(p, d)) {
        if (!pdom_revoked(d) || p->nleft == PROXY_DOMS ||
            px_now_ns() - p->closing_since < PROXY_REVOKED_CLOSE_NS)
            return 0;
        PX_LOG_WARN("mpi proxy (host %d): domain %u (revoked): its sends to another host did "
                    "not finish within %.0f s of its removal (a call the revocation cut off, "
                    "which that host gave up); left in flight, its memory stays mapped",
                    p->rank, d->id & 0x7FFFFFFFu, PROXY_REVOKED_CLOSE_NS / 1e9);
        left = 1;
    }
    for (int i = 0; i < p->ndoms; i++) {
        if (p->doms[i] == d) {
            p->doms[i] = p->doms[--p->ndoms];
            break;
        }
    }
    if (d->bad > 0)
        PX_LOG_WARN("mpi proxy (host %d): domain %u: skipped %u malformed requests of this "
                    "worker's chips (a defect)", p->rank, d->id, d->bad);
    if (left)
        p->left[p->nleft++] = d; /* freed when the proxy stops */
    else
        pdom_free(d);
    atomic_store_explicit(&p->closing_left, left, memory_order_relaxed);
    p->closing = NULL;
    proxy_cmd_finish(p, p->closing_seq);
    return 1;
}

/* Marks command seq done and wakes the parent. */
void proxy_cmd_finish(comm_proxy *p, uint32_t seq)
{
    atomic_store_explicit(&p->cmd_done, seq, memory_order_seq_cst);
    util_wake(&p->cmd_done, &p->cmd_sleep, INT_MAX, 0);
}

/* The allgather in flight: tested; finished, its command is done. */
int proxy_gather_poll(comm_proxy *p)
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

int proxy_command(comm_proxy *p)
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
        proxy_revoke_pending(p, p->cmd_dom);
        p->cmd_dom = NULL;
    } else if (p->cmd == CMD_REMOVE) {
        /* closed in the sweeps: every request its chips posted is sent on first, and the
         * command is done once MPI has finished every send from the domain's memory (the
         * parent unmaps it then) */
        for (int i = 0; i < p->ndoms; i++) {
            if (p->doms[i]->id == p->cmd_id) {
                p->closing = p->doms[i];
                p->closing_seq = seq;
                p->closing_since = px_now_ns();
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
    if (st == PX_OK && atomic_exchange_explicit(&p->closing_left, 0, memory_order_acquire))
        st = px_set_error(PX_EREVOKED, "the revoked domain's sends to another host did not "
                          "finish (a call the revocation cut off)");
    if (st != PX_OK) {
        PX_LOG_WARN("mpi proxy: domain %u: %s; its memory stays mapped (MPI may still read "
                    "it)", id, px_last_error());
        (void)px_set_error(st, "%s", keep); /* the caller's message stays what went wrong */
    }
    return st;
}

/* The parent is about to unmap the deaths board: the thread stops reading it (it reads it
 * only in proxy_deaths_tell, later in this same sweep). */
int proxy_unwatch_poll(comm_proxy *p)
{
    if (atomic_load_explicit(&p->unwatch, memory_order_acquire) == 0 ||
        atomic_load_explicit(&p->unwatched, memory_order_relaxed) != 0)
        return 0;
    atomic_store_explicit(&p->deaths, NULL, memory_order_release);
    atomic_store_explicit(&p->unwatched, 1, memory_order_seq_cst);
    util_wake(&p->unwatched, &p->unwatch_sleep, INT_MAX, 0);
    return 1;
}
