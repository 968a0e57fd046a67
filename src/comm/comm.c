/*
 * comm.c - the kernel-side communication API: argument checks, deaths and revocation,
 * signals and their waits, offsets, and the public calls with their DFX spans; the bytes
 * themselves move through each peer's transport (transport/). A rank's communicator is built
 * by comm_build.c; the barrier, the collectives' signatures and their slots are coll/
 * (barrier.c, signature.c, slots.c), the collectives themselves coll/ too.
 *
 * A wait looks at one slot of this rank's own area. It is the one bounded wait
 * (util/wait.h, util_wait_run): it spins briefly, polls with sched_yield, then sleeps on the
 * area's wake word in slices of at most PX_COMM_SLICE_NS, checking the deadline and the
 * domain's deaths at every turn, so a dead member is noticed within a slice and nothing ever
 * waits without an end. While it spins or yields it carries out its rank's incoming staged
 * requests (the wait's progress hook); asleep, the progress thread does.
 */
#include "comm/comm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfx/emit.h"
#include "dfx/records.h"
#include "runtime/runtime.h"
#include "hier/ext.h"
#include "util/clock.h"
#include "util/fault.h"
#include "util/util.h"
#include "util/wait.h"

#define PX_COMM_SLICE_NS (5 * 1000 * 1000) /* a sleep's slice: deaths and revokes seen within it
                                             * (50 ms made every shrink wait out one) */
#define PX_COMM_WAIT_MAX_S 10000000          /* the longest wait (as PLEXUS_COMM_TIMEOUT_S) */

static const char *const comm_cmp_names[] = {"==", "!=", ">", ">=", "<", "<="};

/* ---- the transports in use ---- */

int comm_progress_all(px_comm *c)
{
    int work = 0;

    for (int i = 0; i < c->nused; i++)
        if (c->used[i]->progress != NULL)
            work += c->used[i]->progress(c);
    return work;
}

px_status comm_flush_all(px_comm *c)
{
    px_status st = PX_OK;

    for (int i = 0; i < c->nused && st == PX_OK; i++)
        if (c->used[i]->flush != NULL)
            st = c->used[i]->flush(c);
    return st;
}

/* This thread starts (on 1) or stops polling c's transports. */
static void comm_poll_mark(px_comm *c, int on)
{
    for (int i = 0; i < c->nused; i++) {
        void (*f)(px_comm *) = on ? c->used[i]->poll_enter : c->used[i]->poll_leave;

        if (f != NULL)
            f(c);
    }
}

void *comm_scratch(px_comm *c, size_t n)
{
    void *p;

    if (n <= c->scratch_bytes)
        return c->scratch;
    if (posix_memalign(&p, PX_COMM_DATA_ALIGN, n) != 0) { /* page aligned: coll_scratch */
        px_set_error(PX_ENOMEM, "domain \"%s\" rank %d: cannot allocate %zu bytes of "
                     "collective scratch", c->name, c->rank, n);
        return NULL;
    }
    free(c->scratch);
    c->scratch = p;
    c->scratch_bytes = n;
    return p;
}

/* ---- small accessors ---- */

int px_comm_rank(const px_comm *c)
{
    return c ? c->rank : -1;
}

int px_comm_size(const px_comm *c)
{
    return c ? c->n : -1;
}

const char *px_comm_name(const px_comm *c)
{
    return c ? c->name : "";
}

const char *px_comm_transport(const px_comm *c, int peer)
{
    return c && peer >= 0 && peer < c->n ? c->tl[peer]->name : NULL;
}

const char *px_comm_last_algorithm(const px_comm *c)
{
    return c ? c->last_algo : "";
}

void *px_comm_buffer(px_comm *c, const char *name, size_t *bytes)
{
    for (int i = 0; c != NULL && name != NULL && i < c->nbuffers; i++) {
        if (strcmp(c->buffers[i].name, name) == 0) {
            if (bytes != NULL)
                *bytes = c->buffers[i].bytes;
            return c->data[c->rank] + c->buffers[i].off;
        }
    }
    if (bytes != NULL)
        *bytes = 0;
    return NULL;
}

px_status px_comm_buffer_tensor(px_comm *c, const char *name, px_dtype dt, int ndim,
                                const int64_t *shape, px_tensor *t)
{
    size_t bytes;
    int64_t lo, hi;
    void *p = px_comm_buffer(c, name, &bytes);
    px_status st;

    if (p == NULL)
        return px_set_error(PX_EINVAL, "px_comm_buffer_tensor: domain \"%s\" has no buffer "
                            "\"%s\"", px_comm_name(c), name ? name : "(null)");
    if ((st = px_tensor_make(t, p, dt, ndim, shape)) != PX_OK ||
        (st = px_tensor_span(t, &lo, &hi)) != PX_OK)
        return st;
    if ((uint64_t)hi > bytes)
        return px_set_error(PX_EINVAL, "px_comm_buffer_tensor: a %lld-byte tensor does not fit "
                            "buffer \"%s\" of domain \"%s\" (%zu bytes)", (long long)hi, name,
                            c->name, bytes);
    return PX_OK;
}

px_status px_comm_offset(const px_comm *c, const void *ptr, size_t n, size_t *off)
{
    uintptr_t p = (uintptr_t)ptr, base, end;

    if (c == NULL || off == NULL)
        return px_set_error(PX_EINVAL, "px_comm_offset: communicator and output are required");
    base = (uintptr_t)c->data[c->rank];
    if (p < base || p - base > c->data_bytes || n > c->data_bytes - (p - base) ||
        __builtin_add_overflow(p, n, &end))
        return px_set_error(PX_EINVAL, "domain \"%s\" rank %d: %zu bytes at %p are not inside "
                            "this rank's window (%zu bytes at %p); pass a pointer from "
                            "px_comm_buffer", c->name, c->rank, n, ptr, c->data_bytes,
                            (void *)base);
    *off = (size_t)(p - base);
    return PX_OK;
}

void *px_comm_peer_ptr(px_comm *c, int peer, const void *local)
{
    size_t off;

    if (c == NULL || peer < 0 || peer >= c->n || c->tl[peer]->peer_ptr == NULL)
        return NULL;
    if (px_comm_offset(c, local, 1, &off) != PX_OK) /* one past the end maps nothing */
        return NULL;
    return c->tl[peer]->peer_ptr(c, peer, off);
}

/* ---- checks ---- */

/* PX_OK when c is usable and peer is one of its ranks. */
px_status comm_check_peer(const px_comm *c, int peer, const char *what)
{
    if (c == NULL)
        return px_set_error(PX_EINVAL, "%s: the communicator is NULL", what);
    if (peer < 0 || peer >= c->n)
        return px_set_error(PX_EINVAL, "%s: domain \"%s\" rank %d: peer %d is not a rank "
                            "(0..%d)", what, c->name, c->rank, peer, c->n - 1);
    return comm_check_revoked(c);
}

/* PX_OK when [off, off + n) lies inside a window's data. */
static px_status comm_check_range(const px_comm *c, size_t off, size_t n, const char *what)
{
    size_t end;

    if (__builtin_add_overflow(off, n, &end) || end > c->data_bytes)
        return px_set_error(PX_EINVAL, "%s: domain \"%s\" rank %d: %zu bytes at offset %zu "
                            "end past the window's %zu bytes", what, c->name, c->rank, n, off,
                            c->data_bytes);
    return PX_OK;
}

static px_status comm_check_sig(const px_comm *c, int sig, const char *what)
{
    if (sig < 0 || (uint32_t)sig >= c->nsig)
        return px_set_error(PX_EINVAL, "%s: domain \"%s\" rank %d: signal %d does not exist "
                            "(the domain has %u)", what, c->name, c->rank, sig, c->nsig);
    return PX_OK;
}

/* 1 when rank q is on the deaths board. */
static int comm_peer_is_dead(const px_comm *c, int q)
{
    int b = c->member[q];

    if (b <= -2) { /* another host's chip: what its proxy told ours */
        int h = (-2 - b) >> 16, chip = (-2 - b) & 0xFFFF;

        return c->rdeaths != NULL && h < COMM_RDEATH_HOSTS && chip < HIER_DEATHS_MAX &&
               (atomic_load_explicit(&c->rdeaths->mask[h], memory_order_acquire) >> chip & 1);
    }
    return c->deaths != NULL && b >= 0 && b < HIER_DEATHS_MAX &&
           (atomic_load_explicit(&c->deaths->mask, memory_order_acquire) >> b & 1);
}

/* Why the board says dead rank q died. */
/* 1 when some member of c is a chip of another host (a domain that spans hosts). */
static int comm_spans_hosts(const px_comm *c)
{
    for (int q = 0; q < c->n; q++)
        if (c->member[q] <= -2)
            return 1;
    return 0;
}

/* What a member can do after a death or a revocation of c: shrink it, from the kernels or
 * the orchestrations (of every host at the same point, when c spans hosts; a kernel-side
 * shrink agrees among at most COMM_AGREE_MAX_RANKS), so the advice is what works there. */
static const char *comm_go_on(const px_comm *c)
{
    if (c->n > COMM_AGREE_MAX_RANKS)
        return comm_spans_hosts(c)
                   ? "return, and shrink it from every host's orchestration at the same point "
                     "(px_domain_shrink) or end the run"
                   : "return, and shrink it from the orchestration (px_domain_shrink) or end "
                     "the run";
    return comm_spans_hosts(c)
               ? "shrink it (px_comm_shrink in the kernels of a resilient task, or "
                 "px_domain_shrink from every host's orchestration at the same point) or end "
                 "the run"
               : "shrink it (px_comm_shrink in the kernels of a resilient task, or "
                 "px_domain_shrink from the orchestration) or end the run";
}

static const char *comm_dead_why(const px_comm *c, int q)
{
    const char *why = c->member[q] <= -2 ? c->rdeaths->why[(-2 - c->member[q]) >> 16]
                                         : c->deaths->why[c->member[q]];

    return why[0] ? why : "no reason known";
}

int comm_peer_dead(const px_comm *c, int q)
{
    return comm_peer_is_dead(c, q);
}

const char *comm_peer_why(const px_comm *c, int q)
{
    return comm_dead_why(c, q);
}

const char *comm_dead_note(const px_comm *c, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int q = 0; q < c->n; q++) {
        if (q != c->rank && comm_peer_is_dead(c, q)) {
            snprintf(buf, n, ": rank %d of the domain is dead: %s; every wait of this domain "
                     "fails now: %s", q, comm_dead_why(c, q), comm_go_on(c));
            break;
        }
    }
    return buf;
}

/* 1 when c's domain is revoked (one load; two for a kernel generation). */
static int comm_revoked(const px_comm *c)
{
    return c->shrunk || (c->revoke != NULL && atomic_load_explicit(c->revoke, memory_order_acquire) != 0) ||
           (c->revoke_also != NULL &&
            atomic_load_explicit(c->revoke_also, memory_order_acquire) != 0);
}

px_status comm_check_revoked(const px_comm *c)
{
    uint32_t who = c->revoke != NULL ? atomic_load_explicit(c->revoke, memory_order_acquire) : 0;
    char by[48];

    if (c->shrunk)
        return px_set_error(PX_EREVOKED, "domain \"%s\" rank %d: this communicator%s was "
                            "shrunk into a new one (px_comm_shrink); use the one it returned "
                            "(later tasks: shrink the domain from the orchestration, "
                            "px_domain_shrink)", c->name, c->rank,
                            c->kgen > 0 ? " (a kernel generation)" : "");
    if (who == 0 && c->revoke_also != NULL &&
        atomic_load_explicit(c->revoke_also, memory_order_acquire) != 0)
        who = COMM_REVOKED_ORCH;
    if (who == 0)
        return PX_OK;
    if (who == COMM_REVOKED_SHRUNK)
        snprintf(by, sizeof(by), "shrunk by the orchestration");
    else if (who == COMM_REVOKED_ORCH)
        snprintf(by, sizeof(by), "revoked by the orchestration");
    else if (who >= COMM_REVOKED_HOST)
        snprintf(by, sizeof(by), "revoked by the orchestration of host %u",
                 who - COMM_REVOKED_HOST);
    else
        snprintf(by, sizeof(by), "revoked by rank %u", who - COMM_REVOKED_RANK);
    if (c->kgen > 0)
        return px_set_error(PX_EREVOKED, "domain \"%s\" rank %d: its communicator of kernel "
                            "generation %d (px_comm_shrink) was %s; every operation on it fails "
                            "now: shrink it again (px_comm_shrink) to go on with the survivors, "
                            "or return", c->name, c->rank, c->kgen, by);
    return px_set_error(PX_EREVOKED, "domain \"%s\" rank %d: the domain was %s; every "
                        "operation on it fails now: %s", c->name, c->rank, by, comm_go_on(c));
}

int comm_revoke_rank(px_comm *c, uint64_t t0)
{
    uint32_t zero = 0;
    /* the first revoker's word stays; the waits of every member see it at their next turn */
    int first = atomic_compare_exchange_strong_explicit(c->revoke, &zero,
                                                        COMM_REVOKED_RANK + (uint32_t)c->rank,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire);

    if (t0 != 0) {
        uint64_t w[3] = {first ? COMM_REVOKED_RANK + (uint32_t)c->rank : zero, (uint64_t)first,
                         (uint64_t)c->kgen};

        comm_dfx_words(c, PX_DFX_COMM_REVOKE, t0, w, 3);
    }
    return first;
}

px_status px_comm_revoke(px_comm *c)
{
    if (c == NULL)
        return px_set_error(PX_EINVAL, "px_comm_revoke: the communicator is NULL");
    (void)comm_revoke_rank(c, comm_dfx_t0());
    return PX_OK;
}

/* Some death is announced: on this worker's board or another host's. */
static int comm_any_dead(const px_comm *c)
{
    return (c->deaths != NULL && atomic_load_explicit(&c->deaths->mask, memory_order_acquire)) ||
           (c->rdeaths != NULL && atomic_load_explicit(&c->rdeaths->any, memory_order_acquire));
}

px_status comm_check_dead(const px_comm *c)
{
    if (!comm_any_dead(c))
        return PX_OK;
    for (int q = 0; q < c->n; q++)
        if (comm_peer_is_dead(c, q))
            return px_set_error(PX_EPEERDEAD, "domain \"%s\" rank %d: rank %d of the domain "
                                "is dead: %s; every wait of this domain fails now: %s",
                                c->name, c->rank, q, comm_dead_why(c, q), comm_go_on(c));
    return PX_OK;
}

/* A one-sided call to a dead peer fails on every transport alike (a direct mapping of a dead
 * chip's window would still take the bytes, or hand back stale ones). */
static px_status comm_check_alive(const px_comm *c, int peer, const char *what)
{
    if (!comm_peer_is_dead(c, peer))
        return PX_OK;
    return px_set_error(PX_EPEERDEAD, "%s: domain \"%s\" rank %d: rank %d is dead: %s; "
                        "every call to it fails now: %s", what, c->name, c->rank, peer,
                        comm_dead_why(c, peer), comm_go_on(c));
}

int comm_peer_text(const px_comm *c, int q, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "rank %d", q);

    if (c->member[q] < 0) { /* a chip of another host (-2 - host): its worker watches it */
        if (c->member[q] <= -2)
            snprintf(buf + len, n - len, " (chip %d of host %d)", (-2 - c->member[q]) & 0xFFFF,
                     (-2 - c->member[q]) >> 16);
        else
            snprintf(buf + len, n - len, " (a chip of another host)");
        return 0;
    }
    if (c->deaths == NULL || len + 4 >= n)
        return 0;
    snprintf(buf + len, n - len, " on ");
    return hier_chip_text(c->deaths, c->member[q], buf + len + 4, n - len - 4);
}

int comm_blame(const px_comm *c, int q)
{
    return q != c->rank && c->member[q] >= 0 && !comm_peer_is_dead(c, q) &&
           hier_blame(c->member[q]);
}

const char *comm_blamed_text(int blamed)
{
    return blamed ? "; named silent: plexus kills its chip" : "";
}

/* ---- DFX ---- */

uint64_t comm_dfx_t0(void)
{
    return PX_DFX && px_rt_dfx_here != NULL ? px_dfx_now() | 1 : 0;
}

/* The index of name in list (n names), 0 when it is not there. */
static int comm_dfx_index(const char *const *list, int n, const char *name)
{
    for (int i = 1; name != NULL && i < n; i++)
        if (strcmp(list[i], name) == 0)
            return i;
    return 0;
}

void comm_dfx_words(const px_comm *c, int op, uint64_t t0, const uint64_t *w, uint32_t nw)
{
    px_dfx_producer *p = px_rt_dfx_here;

    if (!PX_DFX || p == NULL || t0 == 0 || c == NULL)
        return;
    px_dfx_comm_words(p, op, 0, c->tl[(c->rank + 1) % c->n]->id, 0xff, t0, px_dfx_now(), 0,
                      c->id, w, nw);
}

px_status comm_dfx_end(const px_comm *c, int op, int peer, size_t bytes, uint64_t t0,
                       px_status st)
{
    if (t0 != 0 && st == PX_OK)
        comm_dfx_span(c, op, peer, bytes, t0);
    return st;
}

void comm_dfx_span(const px_comm *c, int op, int peer, size_t bytes, uint64_t t0)
{
    static const char *const algos[PX_DFX_COMM_NALGOS] = PX_DFX_COMM_ALGOS;
    px_dfx_producer *p = px_rt_dfx_here;
    int coll = op >= PX_DFX_COMM_ALLREDUCE, tl;

    if (!PX_DFX || p == NULL || t0 == 0 || c == NULL)
        return;
    /* the record carries the transport's id of the one list (tl_list.h), no name lookup */
    tl = c->tl[peer >= 0 && peer < c->n ? peer : (c->rank + 1) % c->n]->id;
    px_dfx_comm(p, op, coll ? comm_dfx_index(algos, PX_DFX_COMM_NALGOS, c->last_algo) : 0, tl,
                peer < 0 ? 0xff : peer, t0, px_dfx_now(), bytes, c->id);
}

/* ---- signals ---- */

void comm_wake(px_comm_area *a)
{
    atomic_thread_fence(memory_order_seq_cst); /* the slot's store before the announcement */
    util_bump_wake_sleepers(&a->wake, &a->sleepers, INT_MAX, 1);
}

static int comm_holds(uint64_t x, px_cmp cmp, uint64_t v)
{
    switch (cmp) {
    case PX_CMP_EQ:
        return x == v;
    case PX_CMP_NE:
        return x != v;
    case PX_CMP_GT:
        return x > v;
    case PX_CMP_GE:
        return x >= v;
    case PX_CMP_LT:
        return x < v;
    case PX_CMP_LE:
        return x <= v;
    }
    return 0;
}

/* comm_wait's state for util_wait's hooks: the caller's condition, the deaths, the
 * transports' progress. */
typedef struct comm_waiting {
    px_comm *c;
    int (*ready)(void *arg);
    void *arg;
    int dead;     /* a member died: the wait is over (with PX_EPEERDEAD) */
    int revoked;  /* the domain was revoked: the wait is over (with PX_EREVOKED) */
    int polling;  /* this thread polls c's transports (comm_poll_mark) */
} comm_waiting;

/* 1 when some request a peer posted to this rank has not been carried out yet (by any thread
 * of this rank: one may be carrying it out now). */
static int comm_in_flight(px_comm *c)
{
    for (int q = 0; q < c->n; q++)
        if (q != c->rank && c->tl[q]->drained != NULL && !c->tl[q]->drained(c, q))
            return 1;
    return 0;
}

/*
 * Before a death or a revocation ends a wait on c: carries out what reached this rank already
 * and says whether the wait is over as it is (1: nothing is in flight any more, ready() has
 * the last word; 0: another thread of this rank carries requests out now, look again). What
 * a member posted before it died, or before a survivor revoked to shrink, may be exactly what
 * the wait waits for (the last signal of a barrier that member passed): ending the wait
 * before it is carried out would fail a call that its peers saw succeed, and the survivors
 * would go on one call apart. A shrunk communicator's rings are its successor's: never here.
 */
static int comm_settled(px_comm *c)
{
    if (!c->progresses || c->shrunk)
        return 1;
    (void)comm_progress_all(c);
    return !comm_in_flight(c);
}

static int comm_waiting_ready(void *arg)
{
    comm_waiting *w = arg;

    if (w->ready(w->arg))
        return 1;
    if (comm_revoked(w->c)) {
        if (!comm_settled(w->c))
            return 0;
        return w->ready(w->arg) ? 1 : (w->revoked = 1);
    }
    /* one load of the board (read-mostly) per turn: a death ends the wait within a slice */
    if (comm_any_dead(w->c) && comm_check_dead(w->c) != PX_OK) {
        if (!comm_settled(w->c))
            return 0;
        return w->ready(w->arg) ? 1 : (w->dead = 1);
    }
    return 0;
}

/* Spinning or yielding, this thread carries out what reached its rank through the
 * transports (nonzero: it did, so the spin starts again); asleep, the progress thread does. */
static int comm_waiting_progress(void *arg, int asleep)
{
    comm_waiting *w = arg;

    return !asleep && w->polling && comm_progress_all(w->c) > 0;
}

static void comm_waiting_sleep(void *arg, int asleep)
{
    comm_waiting *w = arg;

    if (asleep && w->polling) { /* asleep, the progress thread carries the requests out */
        comm_poll_mark(w->c, 0);
        w->polling = 0;
    }
}

px_status comm_wait(px_comm *c, int (*ready)(void *arg), void *arg, _Atomic uint32_t *word,
                    _Atomic uint32_t *sleepers, double timeout_s)
{
    comm_waiting cw = {.c = c, .ready = ready, .arg = arg};
    util_wait w = {.ready = comm_waiting_ready, .arg = &cw, .word = word, .sleeping = sleepers,
                   .count_sleepers = 1, .shared = 1, .spin_ticks = px_ns_to_ticks(c->spin_ns),
                   .yield_ticks = px_ns_to_ticks(c->yield_ns), .slice_ns = PX_COMM_SLICE_NS,
                   .progress = comm_waiting_progress, .sleep_cb = comm_waiting_sleep};
    px_status st;

    if (ready(arg))
        return PX_OK;
    /* revoked: over at once, once what reached this rank is carried out (comm_settled) */
    if (comm_revoked(c) && comm_settled(c))
        return ready(arg) ? PX_OK : comm_check_revoked(c);
    if (timeout_s <= 0)
        timeout_s = c->timeout_s;
    w.deadline_ns = px_now_ns() + (uint64_t)(timeout_s * 1e9);
    if (c->progresses) {
        comm_poll_mark(c, 1);
        cw.polling = 1;
    }
    st = util_wait_run(&w);
    if (cw.polling)
        comm_poll_mark(c, 0);
    atomic_fetch_add_explicit(&c->wait_sleeps, w.sleeps, memory_order_relaxed);
    if (cw.revoked && !ready(arg))
        return comm_check_revoked(c);
    if (cw.dead && !ready(arg))
        return comm_check_dead(c); /* its message names the dead member */
    return st == PX_OK || ready(arg) ? PX_OK : PX_ETIMEDOUT;
}

typedef struct comm_slot_wait {
    _Atomic uint64_t *s;
    px_cmp cmp;
    uint64_t v;
} comm_slot_wait;

static int comm_slot_ready(void *arg)
{
    comm_slot_wait *w = arg;

    return comm_holds(atomic_load_explicit(w->s, memory_order_acquire), w->cmp, w->v);
}

/*
 * After a wait for a signal timed out (nobody knows which peer should have changed it): the
 * peers whose process is stopped cannot have, so each is named silent (comm_blame: the parent
 * kills its chip). Writes "A stopped peer cannot change it: rank 1 on chip 1 (pid 42,
 * stopped); named silent: plexus kills its chip" into buf, or "" when no peer is stopped.
 */
static void comm_stopped_peers(const px_comm *c, char *buf, size_t n)
{
    size_t len = 0;
    int blamed = 0;

    buf[0] = '\0';
    for (int q = 0; q < c->n && len < n; q++) {
        char who[128];

        if (q == c->rank || comm_peer_is_dead(c, q) ||
            comm_peer_text(c, q, who, sizeof(who)) != 'T')
            continue;
        blamed |= comm_blame(c, q);
        len += (size_t)snprintf(buf + len, n - len, "%s%s",
                                len ? ", " : "A stopped peer cannot change it: ", who);
    }
    if (len > 0 && len < n)
        snprintf(buf + len, n - len, "%s", comm_blamed_text(blamed));
}

/* Waits until slot of this rank's area compares to v; `what` names it in messages. */
static px_status comm_wait_slot(px_comm *c, uint32_t slot, px_cmp cmp, uint64_t v,
                                double timeout_s, const char *what)
{
    px_comm_area *a = c->area[c->rank];
    comm_slot_wait sw = {comm_slot(a, c->n, slot), cmp, v};
    char stopped[512];
    uint64_t t0 = px_now_ns(), x;
    px_status st = comm_wait(c, comm_slot_ready, &sw, &a->wake, &a->sleepers, timeout_s);

    if (st != PX_ETIMEDOUT)
        return st;
    x = atomic_load_explicit(sw.s, memory_order_acquire);
    comm_stopped_peers(c, stopped, sizeof(stopped));
    return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %.3g s for %s to be %s "
                        "%llu; it is %llu. %s. Raise the deadline (PLEXUS_COMM_TIMEOUT_S, now "
                        "%g s) only if it is slow", c->name, c->rank,
                        (double)(px_now_ns() - t0) / 1e9, what, comm_cmp_names[cmp],
                        (unsigned long long)v, (unsigned long long)x,
                        stopped[0] ? stopped : "The peer that should change it has not (a "
                        "missing signal, or a peer still busy)", c->timeout_s);
}

static px_status comm_signal_impl(px_comm *c, int peer, int sig, px_sig_op op, uint64_t v)
{
    px_status st = comm_check_peer(c, peer, "px_comm_signal");

    if (st == PX_OK)
        st = comm_check_sig(c, sig, "px_comm_signal");
    if (st == PX_OK)
        st = comm_check_alive(c, peer, "px_comm_signal");
    if (st == PX_OK && op != PX_SIG_SET && op != PX_SIG_ADD)
        st = px_set_error(PX_EINVAL, "px_comm_signal: op %d is neither PX_SIG_SET nor "
                          "PX_SIG_ADD", (int)op);
    if (st != PX_OK)
        return st;
    return c->tl[peer]->signal(c, peer, PX_COMM_SLOT_SIG(c->n, sig), op, v);
}

static px_status comm_wait_until_impl(px_comm *c, int sig, px_cmp cmp, uint64_t v, double timeout_s)
{
    char what[32];
    px_status st = comm_check_peer(c, c ? c->rank : 0, "px_comm_wait_until");

    if (st == PX_OK)
        st = comm_check_sig(c, sig, "px_comm_wait_until");
    if (st == PX_OK && (cmp < PX_CMP_EQ || cmp > PX_CMP_LE))
        st = px_set_error(PX_EINVAL, "px_comm_wait_until: comparison %d is not a px_cmp",
                          (int)cmp);
    if (st == PX_OK && !(timeout_s <= PX_COMM_WAIT_MAX_S)) /* NaN too */
        st = px_set_error(PX_EINVAL, "px_comm_wait_until: domain \"%s\" rank %d: timeout %g "
                          "s is out of range: pass a number of seconds up to %g, or 0 for the "
                          "domain's deadline (PLEXUS_COMM_TIMEOUT_S)", c->name, c->rank,
                          timeout_s, (double)PX_COMM_WAIT_MAX_S);
    if (st != PX_OK)
        return st;
    snprintf(what, sizeof(what), "signal %d", sig);
    return comm_wait_slot(c, PX_COMM_SLOT_SIG(c->n, sig), cmp, v, timeout_s, what);
}

uint64_t px_comm_signal_read(const px_comm *c, int sig)
{
    if (c == NULL || sig < 0 || (uint32_t)sig >= c->nsig)
        return 0;
    return atomic_load_explicit(comm_slot(c->area[c->rank], c->n, PX_COMM_SLOT_SIG(c->n, sig)),
                                memory_order_acquire);
}

/* ---- one-sided data ---- */

static px_status comm_put_impl(px_comm *c, int peer, size_t dst_off, const void *src, size_t n)
{
    px_status st = comm_check_peer(c, peer, "px_comm_put");

    if (st == PX_OK)
        st = comm_check_alive(c, peer, "px_comm_put");
    if (st == PX_OK)
        st = comm_check_range(c, dst_off, n, "px_comm_put");
    if (st == PX_OK && src == NULL && n > 0)
        st = px_set_error(PX_EINVAL, "px_comm_put: the source is NULL");
    if (st != PX_OK || n == 0)
        return st;
    return c->tl[peer]->put(c, peer, dst_off, src, n);
}

static px_status comm_get_impl(px_comm *c, int peer, size_t src_off, void *dst, size_t n)
{
    px_status st = comm_check_peer(c, peer, "px_comm_get");

    if (st == PX_OK)
        st = comm_check_alive(c, peer, "px_comm_get");
    if (st == PX_OK)
        st = comm_check_range(c, src_off, n, "px_comm_get");
    if (st == PX_OK && dst == NULL && n > 0)
        st = px_set_error(PX_EINVAL, "px_comm_get: the destination is NULL");
    if (st != PX_OK || n == 0)
        return st;
    return c->tl[peer]->get(c, peer, src_off, dst, n);
}

static px_status comm_put_signal_impl(px_comm *c, int peer, size_t dst_off, const void *src,
                                      size_t n, int sig, px_sig_op op, uint64_t v)
{
    px_status st = comm_check_peer(c, peer, "px_comm_put_signal");

    /* the same checks and messages whichever transport carries it */
    if (st == PX_OK)
        st = comm_check_sig(c, sig, "px_comm_put_signal");
    if (st == PX_OK)
        st = comm_check_alive(c, peer, "px_comm_put_signal");
    if (st == PX_OK)
        st = comm_check_range(c, dst_off, n, "px_comm_put_signal");
    if (st == PX_OK && src == NULL && n > 0)
        st = px_set_error(PX_EINVAL, "px_comm_put_signal: the source is NULL");
    if (st == PX_OK && op != PX_SIG_SET && op != PX_SIG_ADD)
        st = px_set_error(PX_EINVAL, "px_comm_put_signal: op %d is neither PX_SIG_SET nor "
                          "PX_SIG_ADD", (int)op);
    if (st != PX_OK)
        return st;
    if (c->tl[peer]->put_signal != NULL)
        return c->tl[peer]->put_signal(c, peer, dst_off, src, n, PX_COMM_SLOT_SIG(c->n, sig),
                                       op, v);
    if (n > 0 && (st = c->tl[peer]->put(c, peer, dst_off, src, n)) != PX_OK)
        return st;
    return c->tl[peer]->signal(c, peer, PX_COMM_SLOT_SIG(c->n, sig), op, v);
}

/* ---- the public calls: the work above, plus a DFX span when recorded ---- */

px_status px_comm_signal(px_comm *c, int peer, int sig, px_sig_op op, uint64_t v)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_SIGNAL, peer, 8, t0, comm_signal_impl(c, peer, sig, op, v));
}

px_status px_comm_wait_until(px_comm *c, int sig, px_cmp cmp, uint64_t v, double timeout_s)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_WAIT, -1, 0, t0,
                        comm_wait_until_impl(c, sig, cmp, v, timeout_s));
}

px_status px_comm_put(px_comm *c, int peer, size_t dst_off, const void *src, size_t n)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_PUT, peer, n, t0, comm_put_impl(c, peer, dst_off, src, n));
}

px_status px_comm_get(px_comm *c, int peer, size_t src_off, void *dst, size_t n)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_GET, peer, n, t0, comm_get_impl(c, peer, src_off, dst, n));
}

px_status px_comm_put_signal(px_comm *c, int peer, size_t dst_off, const void *src, size_t n,
                             int sig, px_sig_op op, uint64_t v)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_PUT_SIGNAL, peer, n, t0,
                        comm_put_signal_impl(c, peer, dst_off, src, n, sig, op, v));
}

px_status px_comm_barrier(px_comm *c)
{
    uint64_t t0 = comm_dfx_t0();

    return comm_dfx_end(c, PX_DFX_COMM_BARRIER, -1, 0, t0, comm_barrier(c));
}
