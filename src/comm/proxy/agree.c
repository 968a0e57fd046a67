/*
 * agree.c - kernel-side shrinks (px_comm_shrink, comm/shrink.c) of a domain spanning hosts,
 * as the MPI proxies carry them.
 *
 * The agreement runs on each host's agreement row (comm.h: comm_agree_row), which holds an
 * entry for every rank of the domain, by its generation-0 number (the same chip's in every
 * kernel generation): this host's ranks write theirs, and the proxy copies each new tag to
 * every other host (proxy_agree: the tag and both proposal sets, so a tag read later than the
 * proposal it follows still carries it), whose proxy stores the sets, then the tag, if newer,
 * and wakes the survivors asleep on the row. So every survivor reads every rank's entry on its
 * own board, as on one host. What makes it the same agreement on every host:
 *   - an entry goes out only when its rank's ring holds no request not yet sent on (the rank
 *     writes its requests, then its tag), and each host's messages are taken in order: where
 *     a rank's proposal is seen, its requests to that host were carried out (the drain of
 *     shrink.c's phase 2, for proxied pairs);
 *   - a chip's death is told only after what its ring held was sent on (at most
 *     PROXY_DEAD_FLUSH_NS) and after its last entry (proxy_agree_dead, called by
 *     proxy_deaths_tell before it tells); nothing of its ring is sent on after: where the
 *     death is seen, its last signals and its last entry are there, as on one host ("its last
 *     writes are visible once its death is").
 * The view: requests travel with generation-0 rank numbers and the requester's kernel
 * generation (comm_proxy_msg.kgen; the chips stamp it into each ring request), and the proxy
 * serves one generation per domain (pdom.cur; pdom.prev the one before). The lowest survivor
 * of this host records each shrink's outcome (shrink.c: shr_record: xtag, the READY tag of
 * its attempt, and xexcl, generation-0 numbers); once every survivor of this host is ready on
 * that attempt, the view moves to the next generation (the survivors in order; its heads at
 * the windows' other head). A retry that excludes more (a survivor died before it was ready,
 * on any host) moves it again from the generation before. Nothing of the next generation can
 * come before: a survivor goes on only when every survivor is ready, and a request, an entry
 * or a revocation of the next generation makes the proxy follow first (pdom_follow: their
 * senders saw this host's survivors ready).
 * The kernel generations' revocation words (comm_agree_row.revoke) are told like a domain's
 * own (proxy_revoke with its generation), and an orchestration's revocation that comes from
 * another host revokes every kernel generation here too (orch).
 */
#include "comm/proxy/proxy_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/wait.h"

/* ---- views ---- */

static int pview_alloc(pview *v, int n)
{
    v->orig = calloc((size_t)n, sizeof(int));
    v->pos = calloc((size_t)n, sizeof(int));
    return v->orig != NULL && v->pos != NULL;
}

int pdom_views_init(pdom *d)
{
    if (!pview_alloc(&d->cur, d->n) || !pview_alloc(&d->prev, d->n))
        return 0;
    d->cur.n = d->n;
    for (int r = 0; r < d->n; r++)
        d->cur.orig[r] = d->cur.pos[r] = r;
    d->prev.gen = -1; /* none yet */
    return 1;
}

void pdom_views_free(pdom *d)
{
    free(d->cur.orig);
    free(d->cur.pos);
    free(d->prev.orig);
    free(d->prev.pos);
}

static inline int pset_has(const uint64_t *s, int q)
{
    return (int)(s[q >> 6] >> (q & 63) & 1);
}

/* 1 when every rank of this host in view b outside excl (generation-0 numbers) is ready on
 * (gen, at), or later. */
static int pview_here_ready(const comm_proxy *p, const pdom *d, const pview *b, int gen,
                            uint32_t at, const uint64_t *excl)
{
    uint64_t want = COMM_AGREE_TAG(gen, at, COMM_AGREE_READY);

    for (int i = 0; i < b->n; i++) {
        int r = b->orig[i];

        if (d->host[r] == p->rank && !pset_has(excl, r) &&
            atomic_load_explicit(&d->agree->rank[r].tag, memory_order_seq_cst) < want)
            return 0;
    }
    return 1;
}

int pdom_follow(comm_proxy *p, pdom *d)
{
    comm_agree_row *row = d->agree;
    uint64_t t1, excl[COMM_AGREE_WORDS];
    const pview *b;
    int gen, n2 = 0;
    uint32_t at;

    if (row == NULL || (t1 = atomic_load_explicit(&row->xtag, memory_order_seq_cst)) == 0)
        return 0;
    gen = COMM_AGREE_TAG_GEN(t1);
    at = COMM_AGREE_TAG_ATT(t1);
    if (gen == d->cur.gen)
        b = &d->cur; /* the next generation */
    else if (gen == d->cur.gen - 1 && gen == d->prev.gen && at != d->cur.att)
        b = &d->prev; /* a retry of the shrink that made this one: again from the one before */
    else
        return 0;
    for (int i = 0; i < COMM_AGREE_WORDS; i++)
        excl[i] = atomic_load_explicit(&row->xexcl[i], memory_order_seq_cst);
    if (atomic_load_explicit(&row->xtag, memory_order_seq_cst) != t1 ||
        !pview_here_ready(p, d, b, gen, at, excl))
        return 0; /* rewritten meanwhile, or not every survivor here is ready yet */
    if (b == &d->cur) {
        pview t = d->prev;

        d->prev = d->cur;
        d->cur = t;
        b = &d->prev;
    }
    for (int r = 0; r < d->n; r++)
        d->cur.pos[r] = -1;
    for (int i = 0; i < b->n; i++)
        if (!pset_has(excl, b->orig[i])) {
            d->cur.orig[n2] = b->orig[i];
            d->cur.pos[b->orig[i]] = n2++;
        }
    d->cur.n = n2;
    d->cur.gen = gen + 1;
    d->cur.att = at;
    PX_LOG_DEBUG("mpi proxy (host %d): domain %u: kernel generation %d served (%d ranks, "
                 "attempt %u)", p->rank, d->id & 0x7FFFFFFFu, gen + 1, n2, at);
    return 1;
}

/* ---- entries ---- */

/* 1 when ring g holds a request not yet sent on. */
static int pring_untaken(const pring *g)
{
    return atomic_load_explicit(&g->r->req[g->sent % COMM_STG_SLOTS].seq,
                                memory_order_acquire) == g->sent + 1;
}

/* Rank r's entry (generation-0 numbers, as the row), if r is of this host and its tag is
 * new: told to every other host, both proposals' sets with it (a tag read later than the
 * proposal it follows still carries that proposal's set). */
static int pdom_agree_tell_one(comm_proxy *p, pdom *d, int r)
{
    comm_agree_entry *e = &d->agree->rank[r];
    uint64_t tag = atomic_load_explicit(&e->tag, memory_order_acquire);
    proxy_agree am;
    int gi;

    if (tag == d->agree_told[r] || d->host[r] != p->rank)
        return 0;
    gi = d->ring_of[r];
    if (gi >= 0 && !d->rings[gi].dead && pring_untaken(&d->rings[gi])) {
        d->agree_defer = 1; /* its requests before it go first: read again next sweep */
        return 0;
    }
    memset(&am, 0, sizeof(am)); /* padding too: the bytes go on the wire */
    am.magic = PROXY_MAGIC;
    am.dom = d->id;
    am.idx = (uint32_t)r;
    am.tag = tag;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < COMM_AGREE_WORDS; i++)
            am.mask[k][i] = atomic_load_explicit(&e->mask[k][i], memory_order_seq_cst);
    proxy_send_others(p, &am, sizeof(am), PROXY_TAG_AGREE);
    d->agree_told[r] = tag;
    return 1;
}

static int pdom_agrees_tell(comm_proxy *p, pdom *d)
{
    int work = 0, n = d->n < COMM_AGREE_MAX_RANKS ? d->n : COMM_AGREE_MAX_RANKS;
    uint32_t seen;

    if (d->agree == NULL)
        return 0;
    work += pdom_follow(p, d);
    /* this host's ranks count every tag they store after it: the entries are read only when
     * the count moved, or an entry waited for its requests (not at every sweep) */
    seen = atomic_load_explicit(&d->agree->published, memory_order_acquire);
    if (p->size < 2 || (seen == d->agree_seen && !d->agree_defer))
        return work;
    d->agree_seen = seen;
    d->agree_defer = 0;
    for (int r = 0; r < n; r++)
        work += pdom_agree_tell_one(p, d, r);
    return work;
}

int proxy_agrees_tell(comm_proxy *p)
{
    int work = 0;

    for (int i = 0; i < p->ndoms; i++)
        work += pdom_agrees_tell(p, p->doms[i]);
    return work;
}

uint64_t proxy_agree_dead(comm_proxy *p, uint64_t chips)
{
    uint64_t ready = chips, now = px_now_ns();

    if (chips == 0)
        return 0;
    for (int c = 0; c < HIER_DEATHS_MAX; c++)
        if ((chips >> c & 1) && p->dead_since[c] == 0)
            p->dead_since[c] = now;
    /* what it posted before it died goes first (the sweep sent on what it could), as a
     * dead chip's staged requests are carried out: its peers see its last signals */
    for (int i = 0; i < p->ndoms; i++)
        for (int r = 0; r < p->doms[i]->nrings; r++) {
            pring *g = &p->doms[i]->rings[r];

            if (g->chip >= 0 && g->chip < HIER_DEATHS_MAX && (chips >> g->chip & 1) &&
                !g->dead && pring_untaken(g) &&
                now - p->dead_since[g->chip] < PROXY_DEAD_FLUSH_NS)
                ready &= ~(1ull << g->chip);
        }
    for (int i = 0; ready != 0 && i < p->ndoms; i++)
        for (int r = 0; r < p->doms[i]->nrings; r++) {
            pring *g = &p->doms[i]->rings[r];

            if (g->chip >= 0 && g->chip < HIER_DEATHS_MAX && (ready >> g->chip & 1))
                g->dead = 1;
        }
    for (int i = 0; ready != 0 && i < p->ndoms; i++)
        p->doms[i]->agree_defer = 1; /* read every entry: a chip dead between its tag and
                                      * its count left the count behind */
    if (ready != 0)
        (void)proxy_agrees_tell(p);
    return ready;
}

int proxy_on_agree(comm_proxy *p, int h, const void *msg, size_t n)
{
    const proxy_agree *am = msg;
    pdom *d = proxy_dom(p, am->dom);
    comm_agree_entry *e;

    (void)n;
    if (am->magic != PROXY_MAGIC || am->idx >= COMM_AGREE_MAX_RANKS || d == NULL ||
        d->agree == NULL) {
        PX_LOG_DEBUG("mpi proxy (host %d): an agreement entry from host %d for domain %u, "
                     "which is not served here: dropped", p->rank, h, am->dom);
        return 0;
    }
    e = &d->agree->rank[am->idx];
    if (am->idx >= (uint32_t)d->n || d->host[am->idx] != h ||
        am->tag <= atomic_load_explicit(&e->tag, memory_order_acquire))
        return 0; /* not that host's rank, or older than what is there */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < COMM_AGREE_WORDS; i++)
            atomic_store_explicit(&e->mask[k][i], am->mask[k][i], memory_order_seq_cst);
    atomic_store_explicit(&e->tag, am->tag, memory_order_seq_cst);
    d->agree_told[am->idx] = am->tag; /* not told back */
    util_bump_wake_sleepers(&d->agree->bell, &d->agree->sleepers, INT_MAX, 1);
    return 1;
}

int pdom_agree_closing(comm_proxy *p, pdom *d)
{
    d->agree_defer = 1; /* every entry read once more */
    return pdom_agrees_tell(p, d) + pdom_krevoke_tell(p, d);
}

/* ---- kernel generations' revocations ---- */

int pdom_krevoke_tell(comm_proxy *p, pdom *d)
{
    proxy_revoke rm;
    uint32_t who;

    if (p->size < 2 || d->agree == NULL || d->cur.gen == 0 || d->krevoke_told == d->cur.gen ||
        (who = atomic_load_explicit(&d->agree->revoke[d->cur.gen & 1],
                                    memory_order_acquire)) == 0)
        return 0;
    memset(&rm, 0, sizeof(rm));
    rm.magic = PROXY_MAGIC;
    rm.dom = d->id;
    rm.who = who;
    rm.kgen = (uint32_t)d->cur.gen;
    proxy_send_others(p, &rm, sizeof(rm), PROXY_TAG_REVOKE);
    d->krevoke_told = d->cur.gen;
    PX_LOG_DEBUG("mpi proxy (host %d): told the other hosts that domain %u kernel generation "
                 "%d was revoked (%#x)", p->rank, d->id & 0x7FFFFFFFu, d->cur.gen, who);
    return 1;
}

void pdom_krevoke(comm_proxy *p, pdom *d, int h, uint32_t who, uint32_t kgen)
{
    uint32_t zero = 0;

    /* a revocation of the next generation: this host's survivors are ready (the revoker saw
     * them), so the view follows first */
    if (d->agree != NULL && kgen > (uint32_t)d->cur.gen)
        (void)pdom_follow(p, d);
    if (d->agree == NULL || kgen != (uint32_t)d->cur.gen || who < COMM_REVOKED_RANK ||
        who >= COMM_REVOKED_HOST) {
        PX_LOG_DEBUG("mpi proxy (host %d): domain %u: host %d's revocation of kernel "
                     "generation %u ignored (generation %d served here)", p->rank,
                     d->id & 0x7FFFFFFFu, h, kgen, d->cur.gen);
        return; /* (another generation's: its word is not this one's) */
    }
    d->krevoke_told = d->cur.gen; /* it came from a host: not told back */
    if (!atomic_compare_exchange_strong_explicit(&d->agree->revoke[kgen & 1], &zero, who,
                                                 memory_order_acq_rel, memory_order_acquire))
        PX_LOG_DEBUG("mpi proxy (host %d): domain %u kernel generation %u was revoked here "
                     "already (%#x)", p->rank, d->id & 0x7FFFFFFFu, kgen, zero);
    else
        PX_LOG_INFO("mpi proxy (host %d): domain %u kernel generation %u revoked by host %d "
                    "(rank %u)", p->rank, d->id & 0x7FFFFFFFu, kgen, h,
                    who - COMM_REVOKED_RANK);
}
