/*
 * notices.c - what a proxy tells every other host unasked (proxy_int.h): its chips' deaths,
 * so waits on them end with PX_EPEERDEAD there too; the revocation of a domain spanning
 * hosts, so every host's members see it as the revoker's host does; and its arrival at each
 * allgather, so a host that waits too long names the hosts it has not heard from; and the
 * clock ping, which any proxy answers at once with its clock (comm_proxy_clock: one ping in
 * flight at a time).
 */
#include "comm/proxy/proxy_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

_Static_assert(HIER_DEATHS_MAX <= 64, "a host's chips' deaths fit a 64-bit mask");

/* Tells every other host each new death on this worker's board (once each), after the dead
 * chips' last agreement entries (agree.c: nothing of their rings is sent on after). */
int proxy_deaths_tell(comm_proxy *p)
{
    const hier_deaths *b = atomic_load_explicit(&p->deaths, memory_order_acquire);
    uint64_t m, fresh;
    int work = 0;

    if (b == NULL)
        return 0;
    m = atomic_load_explicit(&b->mask, memory_order_acquire);
    fresh = proxy_agree_dead(p, m & ~p->deaths_told); /* its last requests and entries first */
    if (p->size < 2) {
        p->deaths_told |= fresh;
        return 0;
    }
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
    p->deaths_told |= fresh;
    return work;
}

/* Host h's chip died: on the remote board, for this worker's waits on it. */
int proxy_on_death(comm_proxy *p, int h, const void *msg, size_t n)
{
    const proxy_death *dm = msg;

    (void)n;
    if (p->rdeaths == NULL || h >= COMM_RDEATH_HOSTS || dm->chip < 0 ||
        dm->chip >= HIER_DEATHS_MAX || dm->magic != PROXY_MAGIC)
        return 0;
    if (atomic_load_explicit(&p->rdeaths->mask[h], memory_order_relaxed) == 0)
        snprintf(p->rdeaths->why[h], sizeof(p->rdeaths->why[h]), "chip %d of host %d: %.120s",
                 dm->chip, h, dm->why);
    atomic_fetch_or_explicit(&p->rdeaths->mask[h], 1ull << dm->chip, memory_order_release);
    atomic_store_explicit(&p->rdeaths->any, 1, memory_order_release);
    PX_LOG_INFO("mpi proxy (host %d): host %d says its chip %d died (%s)", p->rank, h,
                dm->chip, dm->why);
    return 0;
}

/* Revokes d here in the name of host h's revoker (word who: its orchestration's is stored as
 * COMM_REVOKED_HOST + h, a kernel's rank is the domain's everywhere), unless d is revoked here
 * already: the first revoker's word stays. The members' waits see it at their next turn. */
static void pdom_revoke(comm_proxy *p, pdom *d, int h, uint32_t who)
{
    uint32_t zero = 0, w = who == COMM_REVOKED_ORCH ? COMM_REVOKED_HOST + (uint32_t)h : who;

    d->revoke_told = 1; /* it came from a host: not told back */
    if (d->revoke == NULL || who < COMM_REVOKED_ORCH || who >= COMM_REVOKED_HOST)
        return;
    if (who == COMM_REVOKED_ORCH && d->agree != NULL) /* every kernel generation too */
        atomic_store_explicit(&d->agree->orch, 1, memory_order_release);
    if (atomic_compare_exchange_strong_explicit(d->revoke, &zero, w, memory_order_acq_rel,
                                                memory_order_acquire))
        PX_LOG_INFO("mpi proxy (host %d): domain %u revoked by host %d (%s %u)", p->rank,
                    d->id & 0x7FFFFFFFu, h, who == COMM_REVOKED_ORCH ? "its orchestration" :
                    "rank", who == COMM_REVOKED_ORCH ? 0u : who - COMM_REVOKED_RANK);
}

/* Tells every other host d's revocation here (by the orchestration, a member's kernel or a
 * shrink), once: their proxies store it into their boards. */
int pdom_revoke_tell(comm_proxy *p, pdom *d)
{
    proxy_revoke rm;
    uint32_t who;

    if (p->size < 2 || d->revoke == NULL || d->revoke_told ||
        (who = atomic_load_explicit(d->revoke, memory_order_acquire)) == 0)
        return 0;
    memset(&rm, 0, sizeof(rm)); /* padding too: the bytes go on the wire */
    rm.magic = PROXY_MAGIC;
    rm.dom = d->id;
    rm.who = who == COMM_REVOKED_SHRUNK ? COMM_REVOKED_ORCH : who;
    proxy_send_others(p, &rm, sizeof(rm), PROXY_TAG_REVOKE);
    d->revoke_told = 1;
    PX_LOG_DEBUG("mpi proxy (host %d): told the other hosts that domain %u was revoked",
                 p->rank, d->id & 0x7FFFFFFFu);
    return 1;
}

int proxy_revokes_tell(comm_proxy *p)
{
    int work = 0;

    for (int i = 0; i < p->ndoms; i++)
        work += pdom_revoke_tell(p, p->doms[i]) + pdom_krevoke_tell(p, p->doms[i]);
    return work;
}

/* Host h revoked a domain: stored here now, or kept until the domain is added (a host may
 * add it a little later); the oldest kept one goes when the table is full (a domain released
 * here already is never added again: its entry just waits to go). */
int proxy_on_revoke(comm_proxy *p, int h, const void *msg, size_t n)
{
    const proxy_revoke *rm = msg;
    pdom *d;

    (void)n;
    if (rm->magic != PROXY_MAGIC || !(rm->dom & PROXY_DOM_JOB))
        return 0; /* a domain of one host has no other host's word */
    if ((d = proxy_dom(p, rm->dom)) != NULL) {
        if (rm->kgen > 0)
            pdom_krevoke(p, d, h, rm->who, rm->kgen);
        else
            pdom_revoke(p, d, h, rm->who);
        return 0;
    }
    if (rm->kgen > 0)
        return 0; /* a kernel generation's: its domain was released here */
    if (p->nrpend == PROXY_RPEND) {
        memmove(&p->rpend[0], &p->rpend[1], (PROXY_RPEND - 1) * sizeof(p->rpend[0]));
        p->nrpend--;
    }
    p->rpend[p->nrpend].dom = rm->dom;
    p->rpend[p->nrpend].who = rm->who;
    p->rpend[p->nrpend++].h = h;
    return 0;
}

void proxy_revoke_pending(comm_proxy *p, pdom *d)
{
    for (int i = 0; i < p->nrpend;) {
        if (p->rpend[i].dom != d->id) {
            i++;
            continue;
        }
        pdom_revoke(p, d, p->rpend[i].h, p->rpend[i].who);
        memmove(&p->rpend[i], &p->rpend[i + 1],
                (size_t)(p->nrpend - i - 1) * sizeof(p->rpend[0]));
        p->nrpend--;
    }
}

/* Tells every other host that this one entered its next allgather (proxy_arrive). */
void proxy_arrive_tell(comm_proxy *p)
{
    proxy_arrive m;

    memset(&m, 0, sizeof(m));
    m.magic = PROXY_MAGIC;
    m.seq = atomic_fetch_add_explicit(&p->ag_started, 1, memory_order_relaxed) + 1;
    proxy_send_others(p, &m, sizeof(m), PROXY_TAG_ARRIVE);
}

int proxy_on_arrive(comm_proxy *p, int h, const void *msg, size_t n)
{
    const proxy_arrive *am = msg;

    (void)n;
    if (am->magic == PROXY_MAGIC &&
        am->seq > atomic_load_explicit(&p->arrived[h], memory_order_relaxed))
        atomic_store_explicit(&p->arrived[h], am->seq, memory_order_release);
    return 0;
}

/* Now on this host's DFX clock, in ns: the clock DFX chooses from the same fact (dfx.c). */
static uint64_t proxy_clock_ns(const comm_proxy *p)
{
    return p->tsc ? (uint64_t)((double)px_ticks() / px_ticks_per_ns()) : px_now_ns();
}

/* Another host's ping: answered at once with this host's clock (any time: no command). */
int proxy_on_clock(comm_proxy *p, int h, const void *msg, size_t n)
{
    const proxy_clock_msg *cm = msg;
    proxy_clock_msg *a;

    (void)n;
    if (cm->magic != PROXY_MAGIC || (a = malloc(sizeof(*a))) == NULL)
        return 0;
    *a = *cm;
    a->peer_ns = proxy_clock_ns(p);
    (void)proxy_send(p, a, a, sizeof(*a), h, PROXY_TAG_CLOCK_REP);
    return 0;
}

/* The answer to this host's ping in flight: one round of host h; the round with the least
 * round trip gives the offset (the answer was taken at the round trip's middle, within half
 * of it). A late answer to a ping given up is dropped. */
int proxy_on_clock_rep(comm_proxy *p, int h, const void *msg, size_t n)
{
    const proxy_clock_msg *cm = msg;
    pclock *c = p->clk;
    uint64_t now = proxy_clock_ns(p), rtt;
    comm_proxy_clock_est *e;

    (void)n;
    if (c == NULL || cm->magic != PROXY_MAGIC || c->seq == 0 || cm->seq != c->seq || h != c->h)
        return 0;
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
    return 0;
}

/* The estimate's end: its command is done (the parent frees it, or here if it gave up). */
static int proxy_clock_end(comm_proxy *p, pclock *c)
{
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

/* The clock estimate in flight: the next ping, a ping given up, or the end (its command is
 * done). One ping in flight at a time, so a round trip measures the network, not a queue. */
int proxy_clock_poll(comm_proxy *p)
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
    if (c->h == p->size)
        return proxy_clock_end(p, c);
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
