/*
 * shrink.c - the kernel-side shrink (px_comm_shrink): every survivor of a communicator calls
 * it in its kernel; the survivors agree among themselves on the members to exclude and each
 * builds a communicator over the survivors on the very same windows, usable at once in the
 * same kernel.
 *
 * The agreement runs on the worker's board (comm.h: comm_agree_row, one row per domain, which
 * every process of the worker maps), not on the communicator's transports: those are the
 * revoked communicator's, and a staged pair's rings need the target's progress. A rank's
 * entry is its generation-0 number's (c->orig), so it is the same chip's in every kernel
 * generation and on every host; sets of ranks in the row are bitsets of generation-0 numbers.
 * Rank r writes only its own entry and reads everyone's; in a domain spanning hosts the MPI
 * proxies copy each host's entries into the other hosts' rows, an entry only after the
 * requests its rank posted before it, a chip's death only after its last entry
 * (comm/proxy/agree.c), so every survivor reads the same on its own board. The deaths boards
 * are the failure detector (a chip on them is dead, and a dead chip is on them within a
 * second). One attempt, of generation g (the kernel shrinks that led to c) and number a (the
 * calls of px_comm_shrink on c and its predecessors so far, the same on every survivor as
 * long as they all fail alike), has two phases:
 *   1. propose: rank r stores the ranks it sees dead now into mask[a & 1], then its tag
 *      (g, a, PROPOSED), and waits until every rank has proposed (a later tag says it too)
 *      or is dead. The excluded set U is the union of the proposals. A rank dead without a
 *      proposal and not in U died during the shrink: every survivor sees the same (a dead
 *      process writes nothing more, and its last writes are visible once its death is: the
 *      proposals are re-read after the board says dead), so every survivor fails with
 *      PX_EPEERDEAD; the next attempt proposes it. Otherwise every survivor has read the same
 *      proposals, hence the same U.
 *   2. ready: rank r waits until every survivor's requests to it have been carried out (the
 *      survivors stopped posting before they proposed), lets the old communicator go (the
 *      chip's progress thread no longer carries out its requests: the pairs' rings pass to
 *      the new communicator), zeroes its window's other head (the new communicator's slots;
 *      the old head keeps whatever late requests of the dead still write), and stores its tag
 *      (g, a, READY); then it waits until every survivor is ready. A survivor dead without
 *      READY fails the attempt on every survivor alike; one dead after it is simply dead in
 *      the new communicator (its first wait says so: shrink again).
 * Proposals alternate between mask[0] and mask[1] by attempt (numbered across generations):
 * a writer cannot be two attempts ahead of a reader (it needs the reader's next proposal to
 * finish the next attempt), nor in the next generation before every survivor has read the
 * masks (READY comes after).
 *
 * The new communicator: ranks are the survivors in old order; its windows and pairs' memory
 * are the old ones (comm_build over c->links), its heads at the windows' other head region
 * (head_at flipped: the data stays where it is, so every survivor's bytes are carried without
 * a copy), its revocation word the row's for generation g + 1 (zeroed by the lowest survivor
 * before it is ready), revoked as well by the orchestration's word. Every rank knows only its
 * own row of the pair table; the collectives choose their algorithm from whether every pair
 * reads in place, which is the old communicator's answer (the same on every rank), unless two
 * survivors remain (their one pair is known to both).
 */
#include "comm/comm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/select.h"
#include "dfx/records.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/util.h"
#include "util/wait.h"

#define SHR_SLICE_NS (5 * 1000 * 1000) /* a sleep's slice: deaths are seen within it */

/* A set of ranks of the communicator being shrunk (at most COMM_AGREE_MAX_RANKS). */
typedef struct shr_set {
    uint64_t w[COMM_AGREE_WORDS];
} shr_set;

static inline int shr_has(const shr_set *s, int q)
{
    return (int)(s->w[q >> 6] >> (q & 63) & 1);
}

static inline void shr_add(shr_set *s, int q)
{
    s->w[q >> 6] |= 1ull << (q & 63);
}

static inline int shr_empty(const shr_set *s)
{
    uint64_t any = 0;

    for (int i = 0; i < COMM_AGREE_WORDS; i++)
        any |= s->w[i];
    return any == 0;
}

/* The set with rank q alone. */
static inline shr_set shr_one(int q)
{
    shr_set s = {{0}};

    shr_add(&s, q);
    return s;
}

/* Rank q's entry in the row: its generation-0 number's, whatever the kernel generation (so
 * an entry is always the same chip's, on every host). */
static inline comm_agree_entry *shr_entry(const px_comm *c, int q)
{
    return &c->agree->rank[c->orig[q]];
}

/* The ranks of c on the deaths boards now (this host's, and the other hosts' as their
 * proxies told this one), as generation-0 numbers (the proposals' sets). */
static shr_set shr_dead_now(const px_comm *c)
{
    shr_set m = {{0}};

    for (int q = 0; q < c->n; q++)
        if (q != c->rank && comm_peer_dead(c, q))
            shr_add(&m, c->orig[q]);
    return m;
}

/* Stores s into the shared words w (seq_cst: the proxy reads them, comm/proxy/agree.c). */
static void shr_store(_Atomic uint64_t *w, const shr_set *s)
{
    for (int i = 0; i < COMM_AGREE_WORDS; i++)
        atomic_store_explicit(&w[i], s->w[i], memory_order_seq_cst);
}

/* ORs the shared words w into *s. */
static void shr_or_load(shr_set *s, _Atomic uint64_t *w)
{
    for (int i = 0; i < COMM_AGREE_WORDS; i++)
        s->w[i] |= atomic_load_explicit(&w[i], memory_order_seq_cst);
}

/*
 * The test hook PX_TEST_COMM_SHRINK_EXIT=<chip>:<phase>: the process of chip <chip> exits
 * (status 9, as a crash) right after it published its tag of that phase (1: its proposal,
 * 2: ready), so the tests can put a death exactly between the agreement's steps.
 */
static void shr_hook(const px_comm *c, int phase)
{
    const char *v = getenv("PX_TEST_COMM_SHRINK_EXIT");
    int chip, ph;

    if (v != NULL && sscanf(v, "%d:%d", &chip, &ph) == 2 && chip == c->member[c->rank] &&
        ph == phase)
        _exit(9);
}

/* Publishes this rank's tag, then wakes the survivors asleep on the row. */
static void shr_publish(px_comm *c, uint64_t tag)
{
    atomic_store_explicit(&shr_entry(c, c->rank)->tag, tag, memory_order_seq_cst);
    atomic_fetch_add_explicit(&c->agree->published, 1, memory_order_release);
    util_bump_wake_sleepers(&c->agree->bell, &c->agree->sleepers, INT_MAX, 1);
}

/* One phase's wait: until every rank not in skip has reached tag `want` (done) or is dead
 * without it (gone); drain: also until every survivor's requests here are carried out. */
typedef struct shr_wait {
    px_comm *c;
    uint64_t want;
    shr_set done, gone, skip;
    int progress; /* carry out c's requests meanwhile (c is not retired yet) */
    int drain;    /* phase 2's first part: wait for c's incoming requests from done ranks */
} shr_wait;

/* 1 when rank q's requests to this rank have all been carried out (or q is dead). */
static int shr_drained(const px_comm *c, int q)
{
    return q == c->rank || c->tl[q]->drained == NULL || c->tl[q]->drained((px_comm *)c, q) ||
           comm_peer_dead(c, q);
}

static int shr_ready(void *arg)
{
    shr_wait *w = arg;
    const px_comm *c = w->c;
    int all = 1;

    for (int q = 0; q < c->n; q++) {
        uint64_t tag;

        if (shr_has(&w->done, q) || shr_has(&w->gone, q) || shr_has(&w->skip, q))
            continue;
        tag = atomic_load_explicit(&shr_entry(c, q)->tag, memory_order_acquire);
        if (tag >= w->want) {
            shr_add(&w->done, q);
        } else if (comm_peer_dead(c, q)) {
            /* its last writes are visible now that its death is (another host's proxy
             * copies them here before it tells the death): read once more */
            tag = atomic_load_explicit(&shr_entry(c, q)->tag, memory_order_acquire);
            if (tag >= w->want)
                shr_add(&w->done, q);
            else
                shr_add(&w->gone, q);
        } else {
            all = 0;
        }
    }
    if (!all)
        return 0;
    for (int q = 0; w->drain && q < c->n; q++)
        if (shr_has(&w->done, q) && !shr_drained(c, q))
            return 0;
    return 1;
}

static int shr_progress(void *arg, int asleep)
{
    shr_wait *w = arg;

    return !asleep && w->progress && comm_progress_all(w->c) > 0;
}

/*
 * Runs phase wait w until deadline (ns). PX_OK, or PX_ETIMEDOUT naming the ranks that have
 * not reached it (what: the phase, in words), each named silent (the parent kills it).
 */
static px_status shr_wait_run(shr_wait *w, uint64_t deadline, const char *what)
{
    px_comm *c = w->c;
    util_wait uw = {.ready = shr_ready, .arg = w, .word = &c->agree->bell,
                    .sleeping = &c->agree->sleepers, .count_sleepers = 1, .shared = 1,
                    .spin_ticks = px_ns_to_ticks(c->spin_ns),
                    .yield_ticks = px_ns_to_ticks(c->yield_ns), .slice_ns = SHR_SLICE_NS,
                    .deadline_ns = deadline, .progress = shr_progress};
    char who[512];
    size_t len = 0;
    int blamed = 0;

    if (util_wait_run(&uw) == PX_OK || shr_ready(w))
        return PX_OK;
    who[0] = '\0';
    for (int q = 0; q < c->n && len < sizeof(who); q++) {
        char t[128];

        if (shr_has(&w->done, q) || shr_has(&w->gone, q) || shr_has(&w->skip, q))
            continue;
        comm_peer_text(c, q, t, sizeof(t));
        blamed |= comm_blame(c, q);
        len += (size_t)snprintf(who + len, sizeof(who) - len, "%s%s", len ? ", " : "", t);
    }
    if (len == 0) /* every rank is there: what is missing is a survivor's requests */
        snprintf(who, sizeof(who), "a survivor's requests to this rank were not carried out");
    return px_set_error(PX_ETIMEDOUT, "px_comm_shrink: domain \"%s\" rank %d: waited %g s for "
                        "%s of %s%s; every survivor calls px_comm_shrink (raise "
                        "PLEXUS_COMM_TIMEOUT_S only if one is slow)", c->name, c->rank,
                        c->timeout_s, what, who, comm_blamed_text(blamed));
}

/* "rank 2 (chip 2)" list of the ranks in m, into buf. */
static void shr_ranks_text(const px_comm *c, const shr_set *m, char *buf, size_t n)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int q = 0; q < c->n && len < n; q++)
        if (shr_has(m, q))
            len += (size_t)snprintf(buf + len, n - len, "%srank %d (%s)", len ? ", " : "", q,
                                    comm_peer_why(c, q));
}

/* The new communicator's pair table (n2 x n2): this rank's row as it is, the rest such that
 * every pair reads in place exactly when every pair of c does (what each rank knows alike):
 * the first transport of the list, not proxied, that reads in place or not as c's pairs. */
static void shr_pairs(const px_comm *c, const int *keep, int n2, int me2, uint8_t *pairs)
{
    uint8_t other = (uint8_t)comm_tl_like(c->all_in_place, 0), self = (uint8_t)comm_tl_self();

    for (int a = 0; a < n2; a++)
        for (int b = 0; b < n2; b++)
            pairs[a * n2 + b] = a == b ? self : other;
    for (int j = 0; j < n2; j++) {
        if (j == me2)
            continue;
        pairs[me2 * n2 + j] = pairs[j * n2 + me2] = (uint8_t)c->tl[keep[j]]->id;
    }
}

/* Builds *out over the survivors keep (n2, old ranks in order) on c's windows. */
static px_status shr_build(px_comm *c, const int *keep, int n2, px_comm **out)
{
    uint8_t *pairs = calloc((size_t)n2 * (size_t)n2, 1);
    comm_link *links = calloc((size_t)n2, sizeof(*links));
    int *member = calloc((size_t)n2, sizeof(*member)), me2 = -1;
    int *orig = calloc((size_t)n2, sizeof(*orig));
    px_comm *nc = calloc(1, sizeof(*nc));
    px_status st = PX_OK;

    if (pairs == NULL || links == NULL || member == NULL || orig == NULL || nc == NULL)
        st = px_set_error(PX_ENOMEM, "px_comm_shrink: domain \"%s\" rank %d: out of memory "
                          "for a communicator of %d ranks", c->name, c->rank, n2);
    for (int i = 0; st == PX_OK && i < n2; i++) {
        links[i] = c->links[keep[i]];
        member[i] = c->member[keep[i]];
        orig[i] = c->orig[keep[i]];
        if (keep[i] == c->rank)
            me2 = i;
    }
    if (st == PX_OK) {
        px_comm_spec s = {.name = c->name, .id = c->id, .rank = me2, .n = n2,
                          .data_bytes = c->data_bytes, .nsig = c->nsig, .pairs = pairs,
                          .links = links, .deaths = c->deaths, .rdeaths = c->rdeaths,
                          .revoke = &c->agree->revoke[(c->kgen + 1) & 1],
                          .revoke_also = &c->agree->orch, .member = member,
                          .timeout_s = c->timeout_s, .spin_ns = c->spin_ns,
                          .yield_ns = c->yield_ns, .oneshot_max = c->oneshot_max,
                          .buffers = c->buffers, .nbuffers = c->nbuffers,
                          .head_bytes = c->head_bytes, .head_at = !c->head_at,
                          .agree = c->agree, .kgen = c->kgen + 1, .orig = orig,
                          .shrink_ops = c->shrink_ops,
                          .shrink_arg = c->shrink_arg};

        shr_pairs(c, keep, n2, me2, pairs);
        if ((st = comm_build(nc, &s)) == PX_OK)
            nc->shrink_attempts = c->shrink_attempts; /* the tags grow across generations */
    }
    if (st == PX_OK && c->shrink_ops != NULL &&
        (st = c->shrink_ops->adopt(c->shrink_arg, c, nc)) != PX_OK)
        comm_fini(nc);
    free(pairs);
    free(links);
    free(member);
    free(orig);
    if (st != PX_OK) {
        free(nc);
        return st;
    }
    *out = nc;
    return PX_OK;
}

/* Zeroes this rank's other head (the new communicator's) and writes what its owner word says
 * for a reader of a dump. */
static void shr_zero_head(px_comm *c, int n2)
{
    char *base = c->links[c->rank].window;
    px_comm_area *a = (px_comm_area *)(base + (c->head_at ? 0 : comm_spare_head_off(
                                                                    c->head_bytes,
                                                                    c->data_bytes)));

    memset(a, 0, c->head_bytes);
    a->nsig = c->nsig;
    a->n = (uint32_t)n2;
}

/* Checks what px_comm_shrink can do on c; PX_OK or the refusal (message set). */
static px_status shr_check(const px_comm *c, px_comm **out)
{
    if (c == NULL || out == NULL)
        return px_set_error(PX_EINVAL, "px_comm_shrink: the communicator and the output are "
                            "required");
    if (c->shrunk)
        return px_set_error(PX_ESTATE, "px_comm_shrink: domain \"%s\" rank %d: this "
                            "communicator was shrunk already; shrink the one that shrink "
                            "returned", c->name, c->rank);
    if (c->n > COMM_AGREE_MAX_RANKS)
        return px_set_error(PX_ENOTSUP, "px_comm_shrink: domain \"%s\" rank %d: %d ranks; a "
                            "kernel-side shrink agrees among at most %d; return, and shrink "
                            "the domain from the orchestration (from every host's, at the same "
                            "point, when it spans hosts: px_domain_shrink)", c->name, c->rank,
                            c->n, COMM_AGREE_MAX_RANKS);
    if (c->agree == NULL)
        return px_set_error(PX_ENOTSUP, "px_comm_shrink: domain \"%s\" rank %d: this "
                            "communicator has no agreement table (only a level-3 chip's "
                            "domain has one); shrink from the orchestration instead",
                            c->name, c->rank);
    return PX_OK;
}

/* Phase 1: proposes, waits for every proposal, agrees. *excl: the excluded ranks (of c). */
static px_status shr_propose(px_comm *c, uint32_t at, uint64_t deadline, shr_set *excl)
{
    shr_wait w = {.c = c, .want = COMM_AGREE_TAG(c->kgen, at, COMM_AGREE_PROPOSED),
                  .done = shr_one(c->rank), .progress = 1};
    shr_set u0 = {{0}}, u = {{0}}, missing = {{0}}, dead = shr_dead_now(c);
    char who[512];
    px_status st;

    shr_store(shr_entry(c, c->rank)->mask[at & 1], &dead);
    shr_publish(c, w.want);
    shr_hook(c, 1);
    if ((st = shr_wait_run(&w, deadline, "the proposals")) != PX_OK)
        return st;
    for (int q = 0; q < c->n; q++)
        if (shr_has(&w.done, q))
            shr_or_load(&u0, shr_entry(c, q)->mask[at & 1]);
    for (int q = 0; q < c->n; q++) /* generation-0 numbers to this communicator's */
        if (q != c->rank && shr_has(&u0, c->orig[q]))
            shr_add(&u, q);
    for (int q = 0; q < c->n; q++)
        if (shr_has(&w.gone, q) && !shr_has(&u, q))
            shr_add(&missing, q);
    if (!shr_empty(&missing)) {
        shr_ranks_text(c, &missing, who, sizeof(who));
        return px_set_error(PX_EPEERDEAD, "px_comm_shrink: domain \"%s\" rank %d: %s died "
                            "during the shrink, before it had proposed; every survivor fails "
                            "this attempt alike: call px_comm_shrink again (the retry "
                            "excludes it)", c->name, c->rank, who);
    }
    *excl = u;
    return PX_OK;
}

/*
 * The lowest survivor of this host records the outcome in the row before it says it is
 * ready: the next generation's revocation word zeroed, and the excluded ranks (generation-0
 * numbers) for dfx.json (the first generations) and for this host's MPI proxy, whose view of
 * a domain spanning hosts follows the generations (comm/proxy/agree.c: it reads xtag, then
 * xexcl, then xtag again; a record is rewritten with xtag 0 first).
 */
static void shr_record(px_comm *c, uint32_t at, const shr_set *excl)
{
    comm_agree_row *row = c->agree;
    shr_set ex0 = {{0}};

    for (int q = 0; q < c->n; q++)
        if (shr_has(excl, q))
            shr_add(&ex0, c->orig[q]);
    atomic_store_explicit(&row->revoke[(c->kgen + 1) & 1], 0, memory_order_relaxed);
    if (c->kgen < COMM_AGREE_GENS)
        shr_store(row->kexcluded[c->kgen], &ex0);
    atomic_store_explicit(&row->kgens, (uint32_t)c->kgen + 1, memory_order_relaxed);
    atomic_store_explicit(&row->xtag, 0, memory_order_seq_cst);
    shr_store(row->xexcl, &ex0);
    atomic_store_explicit(&row->xtag, COMM_AGREE_TAG(c->kgen, at, COMM_AGREE_READY),
                          memory_order_seq_cst);
}

/* Phase 2: drains, lets c go, zeroes the new head, says ready and waits for the survivors.
 * lowest: this host's lowest survivor (a chip of this worker). */
static px_status shr_ready_all(px_comm *c, uint32_t at, const shr_set *excl, int n2,
                               int lowest, uint64_t deadline)
{
    shr_wait w = {.c = c, .want = COMM_AGREE_TAG(c->kgen, at, COMM_AGREE_PROPOSED),
                  .skip = *excl, .progress = 1, .drain = 1};
    char who[512];
    px_status st;

    for (int q = 0; q < c->n; q++)
        if (!shr_has(excl, q))
            shr_add(&w.done, q);
    if ((st = shr_wait_run(&w, deadline, "the survivors' last requests")) != PX_OK)
        return st;
    if (c->shrink_ops != NULL)
        c->shrink_ops->retire(c->shrink_arg, c);
    shr_zero_head(c, n2);
    if (c->rank == lowest)
        shr_record(c, at, excl);
    shr_publish(c, COMM_AGREE_TAG(c->kgen, at, COMM_AGREE_READY));
    shr_hook(c, 2);
    w = (shr_wait){.c = c, .want = COMM_AGREE_TAG(c->kgen, at, COMM_AGREE_READY),
                   .done = shr_one(c->rank), .skip = *excl};
    if ((st = shr_wait_run(&w, deadline, "the survivors' readiness")) != PX_OK)
        return st;
    if (!shr_empty(&w.gone)) {
        shr_ranks_text(c, &w.gone, who, sizeof(who));
        return px_set_error(PX_EPEERDEAD, "px_comm_shrink: domain \"%s\" rank %d: %s died "
                            "during the shrink, before it was ready; every survivor fails "
                            "this attempt alike: call px_comm_shrink again (the retry "
                            "excludes it)", c->name, c->rank, who);
    }
    return PX_OK;
}

/* Logs the agreement once per host (by its lowest survivor): who was excluded and why, at
 * warn. */
static void shr_log(const px_comm *c, const shr_set *excl, int n2)
{
    for (int q = 0; q < c->n; q++) {
        char t[128];

        if (!shr_has(excl, q))
            continue;
        comm_peer_text(c, q, t, sizeof(t));
        PX_LOG_WARN("comm[%s]: kernel-side shrink: %s excluded: %s", c->name, t,
                    comm_peer_why(c, q));
    }
    PX_LOG_INFO("comm[%s]: kernel-side shrink: %d survivors agreed, kernel generation %d -> %d",
                c->name, n2, c->kgen, c->kgen + 1);
}

/* DFX: the agreement's span (from t0) with who was excluded (the first 64 ranks' bits), the
 * outcome and the sizes; and the whole shrink's (from s0). Words: dfx/records.h. */
static void shr_dfx(const px_comm *c, uint64_t s0, uint64_t t0, uint32_t at,
                    const shr_set *excl, int n2, int rank2, px_status st)
{
    uint64_t w[PX_DFX_COMM_WORDS] = {excl->w[0], (uint32_t)(int32_t)st | (uint64_t)at << 32,
                                     (uint64_t)(uint16_t)c->kgen |
                                         (uint64_t)(uint16_t)c->n << 16 |
                                         (uint64_t)(uint16_t)n2 << 32};
    int k = 0;

    if (t0 == 0)
        return;
    for (int q = 0; q < c->n; q++) {
        if (!shr_has(excl, q))
            continue;
        if (k < 5 * PX_DFX_COMM_CHIPS_PER_WORD)
            w[3 + k / PX_DFX_COMM_CHIPS_PER_WORD] |=
                (uint64_t)(c->member[q] >= 0 && c->member[q] < 63 ? c->member[q] : 63)
                << (6 * (k % PX_DFX_COMM_CHIPS_PER_WORD));
        k++;
    }
    comm_dfx_words(c, PX_DFX_COMM_AGREE, t0, w, PX_DFX_COMM_WORDS);
    w[0] = w[2] | (uint64_t)(uint16_t)rank2 << 48;
    w[1] = (uint32_t)(int32_t)st;
    comm_dfx_words(c, PX_DFX_COMM_SHRINK, s0, w, 2);
}

/* This host's lowest rank outside excl (a chip of this worker: member >= 0), or -1. */
static int shr_lowest_here(const px_comm *c, const shr_set *excl)
{
    for (int q = 0; q < c->n; q++)
        if (!shr_has(excl, q) && c->member[q] >= 0)
            return q;
    return -1;
}

px_status px_comm_shrink(px_comm *c, px_comm **out)
{
    int keep[PX_COMM_MAX_RANKS], n2 = 0, lowest = -1;
    uint64_t deadline, s0 = comm_dfx_t0(), t0;
    shr_set excl = {{0}};
    uint32_t at;
    px_status st = shr_check(c, out);

    if (st != PX_OK)
        return st;
    deadline = px_now_ns() + (uint64_t)(c->timeout_s * 1e9);
    at = c->shrink_attempts++;
    /* the survivors' pending calls on c end, so that they come here too (on every host:
     * the proxies tell a revocation) */
    (void)comm_revoke_rank(c, s0);
    t0 = comm_dfx_t0();
    if ((st = shr_propose(c, at, deadline, &excl)) == PX_OK) {
        for (int q = 0; q < c->n; q++)
            if (!shr_has(&excl, q))
                keep[n2++] = q;
        lowest = shr_lowest_here(c, &excl);
        st = shr_ready_all(c, at, &excl, n2, lowest, deadline);
    }
    if (st == PX_OK)
        st = shr_build(c, keep, n2, out);
    shr_dfx(c, s0, t0, at, &excl, n2, st == PX_OK ? px_comm_rank(*out) : -1, st);
    if (st != PX_OK)
        return st;
    c->shrunk = 1;
    if (c->rank == lowest)
        shr_log(c, &excl, n2);
    return PX_OK;
}
