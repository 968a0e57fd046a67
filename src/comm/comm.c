/*
 * comm.c - the kernel-side communication API: argument checks, signals and their waits,
 * barriers, offsets; the bytes themselves move through each peer's transport (transport/).
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
#include "comm/select.h"
#include "hier/ext.h"
#include "util/clock.h"
#include "util/fault.h"
#include "util/util.h"
#include "util/wait.h"

#define PX_COMM_SLICE_NS (50 * 1000 * 1000) /* a sleep's slice: deaths seen within it */
#define PX_COMM_WAIT_MAX_S 10000000          /* the longest wait (as PLEXUS_COMM_TIMEOUT_S) */

static const char *const comm_cmp_names[] = {"==", "!=", ">", ">=", "<", "<="};

/* ---- building ---- */

/* Checks the spec's tables; PX_OK or PX_EINVAL naming the field. */
static px_status comm_spec_check(const px_comm_spec *s)
{
    if (s == NULL || s->links == NULL || s->pairs == NULL)
        return px_set_error(PX_EINVAL, "comm: spec, links and pair table are required");
    if (s->n < 1 || s->n > PX_COMM_MAX_RANKS || s->rank < 0 || s->rank >= s->n)
        return px_set_error(PX_EINVAL, "comm: rank %d of %d ranks; ranks must be 1..%d and "
                            "the rank below them", s->rank, s->n, PX_COMM_MAX_RANKS);
    if (s->nsig > PX_COMM_MAX_SIGNALS || s->nbuffers < 0 || s->nbuffers > PX_COMM_MAX_BUFFERS)
        return px_set_error(PX_EINVAL, "comm: %u signals and %d buffers; at most %d and %d",
                            s->nsig, s->nbuffers, PX_COMM_MAX_SIGNALS, PX_COMM_MAX_BUFFERS);
    if (s->links[s->rank].window == NULL)
        return px_set_error(PX_EINVAL, "comm: rank %d has no window of its own", s->rank);
    if (s->head_bytes != 0 && s->head_bytes < px_comm_area_bytes(s->n, s->nsig))
        return px_set_error(PX_EINVAL, "comm: windows with a head of %zu bytes cannot hold "
                            "the head of %d ranks and %u signals (%zu bytes)", s->head_bytes,
                            s->n, s->nsig, px_comm_area_bytes(s->n, s->nsig));
    for (int a = 0; a < s->n; a++)
        for (int b = 0; b < s->n; b++)
            if (a != b && comm_tl_of(s->pairs[a * s->n + b]) == NULL)
                return px_set_error(PX_EINVAL, "comm: the pair table names no transport for "
                                    "ranks %d and %d (id %u)", a, b,
                                    s->pairs[a * s->n + b]);
    return PX_OK;
}

/* The head of the window at base as c uses it: at its start, or at its spare. */
static px_comm_area *comm_head_of(const px_comm *c, void *base)
{
    return (px_comm_area *)((char *)base +
                            (c->head_at ? comm_spare_head_off(c->head_bytes, c->data_bytes) : 0));
}

/* Connects c's rank to every peer through its pair's transport (comm_build). */
static px_status comm_connect(px_comm *c, const px_comm_spec *s)
{
    px_status st = PX_OK;

    for (int q = 0; q < s->n && st == PX_OK; q++) {
        const px_comm_tl *t = c->tl[q];
        int seen = 0;

        if (q == c->rank)
            continue;
        for (int i = 0; i < c->nused; i++)
            seen |= c->used[i] == t;
        if (!seen) {
            c->used[c->nused++] = t;
            c->progresses |= t->progress != NULL;
        }
        if (t->maps_window) {
            if (s->links[q].window == NULL)
                return px_set_error(PX_EINVAL, "comm: domain \"%s\" rank %d: the %s pair with "
                                    "rank %d has no mapped window", c->name, c->rank, t->name,
                                    q);
            c->area[q] = comm_head_of(c, s->links[q].window);
            c->data[q] = (char *)s->links[q].window + c->head_bytes;
        }
        if (t->connect != NULL)
            st = t->connect(c, q, &s->links[q]);
    }
    return st;
}

/* The domain's sites (comm.h: nsites): runs of ranks whose pairs are all local, every pair of
 * two runs proxied. From the pair table alone, so every rank finds the same. */
static void comm_sites(px_comm *c, const px_comm_spec *s)
{
    int n = s->n, ns = 0, site = 0;

    for (int q = 0; q < n; q++)
        if (q == 0 || comm_tl_of(s->pairs[(q - 1) * n + q])->proxied)
            c->site_start[ns++] = q;
    c->site_start[ns] = n;
    c->nsites = 0;
    if (ns < 2)
        return;
    for (int a = 0; a < n; a++) {
        int sa = 0;

        while (c->site_start[sa + 1] <= a)
            sa++;
        if (a == c->rank)
            site = sa;
        for (int b = 0; b < n; b++) {
            int same = b >= c->site_start[sa] && b < c->site_start[sa + 1];

            if (a != b && comm_tl_of(s->pairs[a * n + b])->proxied == same)
                return; /* interleaved: no sites */
        }
    }
    c->nsites = ns;
    c->site = site;
}

px_status comm_build(px_comm *c, const px_comm_spec *s)
{
    px_status st;

    if (c == NULL)
        return px_set_error(PX_EINVAL, "comm: the communicator is required");
    if ((st = comm_spec_check(s)) != PX_OK)
        return st;
    memset(c, 0, sizeof(*c));
    if ((c->area = calloc((size_t)s->n, sizeof(*c->area))) == NULL ||
        (c->data = calloc((size_t)s->n, sizeof(*c->data))) == NULL ||
        (c->tl = calloc((size_t)s->n, sizeof(*c->tl))) == NULL ||
        (c->tl_state = calloc((size_t)s->n, sizeof(*c->tl_state))) == NULL ||
        (c->member = calloc((size_t)s->n, sizeof(*c->member))) == NULL ||
        (c->site_start = calloc((size_t)s->n + 1, sizeof(*c->site_start))) == NULL ||
        (c->cseq_out = calloc((size_t)s->n, sizeof(*c->cseq_out))) == NULL ||
        (c->cseq_in = calloc((size_t)s->n, sizeof(*c->cseq_in))) == NULL ||
        (c->links = calloc((size_t)s->n, sizeof(*c->links))) == NULL) {
        comm_fini(c);
        return px_set_error(PX_ENOMEM, "comm: rank %d of %d: out of memory for the per-rank "
                            "tables", s->rank, s->n);
    }
    snprintf(c->name, sizeof(c->name), "%s", s->name ? s->name : "");
    c->id = s->id;
    c->rank = s->rank;
    c->n = s->n;
    c->data_bytes = s->data_bytes;
    c->nsig = s->nsig;
    c->head_bytes = s->head_bytes ? s->head_bytes : px_comm_area_bytes(s->n, s->nsig);
    c->head_at = s->head_at != 0;
    memcpy(c->links, s->links, (size_t)s->n * sizeof(*c->links));
    /* the own window through direct's loads and stores; each peer through its pair's */
    c->area[c->rank] = comm_head_of(c, s->links[c->rank].window);
    c->data[c->rank] = (char *)s->links[c->rank].window + c->head_bytes;
    c->all_in_place = 1;
    for (int a = 0; a < s->n; a++)
        for (int b = 0; b < s->n; b++)
            if (a != b && !comm_tl_of(s->pairs[a * s->n + b])->in_place)
                c->all_in_place = 0;
    for (int q = 0; q < s->n; q++)
        c->tl[q] = q == c->rank ? &px_comm_tl_direct : comm_tl_of(s->pairs[c->rank * s->n + q]);
    comm_sites(c, s);
    c->deaths = s->deaths;
    c->rdeaths = s->rdeaths;
    c->revoke = s->revoke != NULL ? s->revoke : &c->revoke_own;
    c->revoke_also = s->revoke_also;
    c->agree = s->agree;
    c->kgen = s->kgen;
    c->shrink_ops = s->shrink_ops;
    c->shrink_arg = s->shrink_arg;
    for (int q = 0; q < s->n; q++)
        c->member[q] = s->member != NULL ? s->member[q] : q;
    c->timeout_s = s->timeout_s > 0 ? s->timeout_s : 60.0;
    c->spin_ns = s->spin_ns;
    c->yield_ns = s->yield_ns;
    c->oneshot_max = s->oneshot_max ? s->oneshot_max : PX_COMM_ONESHOT_MAX_DEFAULT;
    for (int i = 0; i < s->nbuffers; i++)
        c->buffers[i] = s->buffers[i];
    c->nbuffers = s->nbuffers;
    c->last_algo = "";
    if ((st = comm_connect(c, s)) != PX_OK)
        comm_fini(c);
    return st;
}

void comm_fini(px_comm *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < c->nused; i++)
        if (c->used[i]->release != NULL)
            c->used[i]->release(c);
    c->nused = 0;
    c->progresses = 0;
    free(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    free(c->area);
    free(c->data);
    free(c->tl);
    free(c->tl_state);
    free(c->member);
    free(c->site_start);
    free(c->cseq_out);
    free(c->cseq_in);
    free(c->links);
    c->links = NULL;
    c->site_start = NULL;
    c->cseq_out = c->cseq_in = NULL;
    c->area = NULL;
    c->data = NULL;
    c->tl = NULL;
    c->tl_state = NULL;
    c->member = NULL;
}

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
static px_status comm_check_peer(const px_comm *c, int peer, const char *what)
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
    else
        snprintf(by, sizeof(by), "revoked by rank %u", who - COMM_REVOKED_RANK);
    if (c->kgen > 0)
        return px_set_error(PX_EREVOKED, "domain \"%s\" rank %d: its communicator of kernel "
                            "generation %d (px_comm_shrink) was %s; every operation on it fails "
                            "now: shrink it again (px_comm_shrink) to go on with the survivors, "
                            "or return", c->name, c->rank, c->kgen, by);
    return px_set_error(PX_EREVOKED, "domain \"%s\" rank %d: the domain was %s; every "
                        "operation on it fails now: in a kernel, px_comm_shrink goes on with "
                        "the survivors; from the orchestration, shrink it (px_domain_shrink) "
                        "and go on with the survivors, or release it", c->name, c->rank, by);
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
                                "is dead: %s; every wait of this domain fails now: shrink it "
                                "(px_comm_shrink in the kernels of a resilient task, or "
                                "px_domain_shrink from the orchestration) or end the run",
                                c->name, c->rank, q,
                                comm_dead_why(c, q));
    return PX_OK;
}

/* A one-sided call to a dead peer fails on every transport alike (a direct mapping of a dead
 * chip's window would still take the bytes, or hand back stale ones). */
static px_status comm_check_alive(const px_comm *c, int peer, const char *what)
{
    if (!comm_peer_is_dead(c, peer))
        return PX_OK;
    return px_set_error(PX_EPEERDEAD, "%s: domain \"%s\" rank %d: rank %d is dead: %s; "
                        "every call to it fails now: shrink the domain (px_comm_shrink, "
                        "px_domain_shrink) or end the run", what,
                        c->name, c->rank, peer, comm_dead_why(c, peer));
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

static int comm_waiting_ready(void *arg)
{
    comm_waiting *w = arg;

    if (w->ready(w->arg))
        return 1;
    if (comm_revoked(w->c))
        return w->revoked = 1;
    /* one load of the board (read-mostly) per turn: a death ends the wait within a slice */
    if (comm_any_dead(w->c) && comm_check_dead(w->c) != PX_OK)
        return w->dead = 1;
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
    if (comm_revoked(c))
        return comm_check_revoked(c);
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

/* ---- collectives' signatures and failures ---- */

/* A barrier slot's failure mark: bit 63 set (never in a barrier value: the signature's bit
 * 31 is 0), the failed call's status in bits 32-39, in the low half the last epoch whose
 * barrier the failed rank passed (a peer still waiting for that one from it may go on: it
 * was announced, and the mark only overwrote it). */
#define COMM_BAR_FAILED (1ull << 63)

static const char *const comm_coll_names[] = {
    "?", "px_comm_barrier", "px_comm_allreduce", "px_comm_allgather", "px_comm_reduce_scatter",
    "px_comm_broadcast", "px_comm_alltoall", "px_comm_alltoallv",
};
static const char *const comm_op_names[] = {"sum", "prod", "min", "max"};

/* Signature bits: kind 28-30, dtype 24-27, op 22-23, the sequence number's low 6 bits 16-21,
 * a hash of the count and the root 0-15 (two calls that differ only there collide with a
 * chance of 1 in 65536). */
static uint32_t comm_sig_hash(size_t count, int root)
{
    uint64_t h = ((uint64_t)count ^ (uint64_t)(uint32_t)root << 48) * 0x9E3779B97F4A7C15ull;

    return (uint32_t)(h >> 48);
}

static uint32_t comm_sig_make(int kind, size_t count, px_dtype dt, int op, int root,
                              uint64_t seq)
{
    return (uint32_t)(kind & 7) << 28 | ((uint32_t)dt & 15) << 24 | ((uint32_t)op & 3) << 22 |
           (uint32_t)(seq & 63) << 16 | comm_sig_hash(count, root);
}

/* Writes what signature s names, as far as its bits tell; mine: the call itself, which names
 * its count and root (a peer's signature: whether they equal this rank's, from the hash). */
static void comm_sig_text(uint32_t s, const px_comm *c, int mine, char *buf, size_t n)
{
    int kind = (int)(s >> 28 & 7), dt = (int)(s >> 24 & 15), op = (int)(s >> 22 & 3);
    int red = kind == COMM_COLL_ALLREDUCE || kind == COMM_COLL_REDUCE_SCATTER;
    int counted = kind != COMM_COLL_BARRIER && kind != COMM_COLL_ALLTOALLV;
    char cnt[64] = "";

    if (counted && mine)
        snprintf(cnt, sizeof(cnt), kind == COMM_COLL_BROADCAST ? ", count %zu, root %d" :
                 ", count %zu", c->coll_count, c->coll_root);
    else if (counted)
        snprintf(cnt, sizeof(cnt), ", %s count%s", (s & 0xffff) == (c->coll_sig & 0xffff) ?
                 "the same" : "another", kind == COMM_COLL_BROADCAST ? " or root" : "");
    snprintf(buf, n, "%s(%s%s%s%s) as its call %u (mod 64)", comm_coll_names[kind],
             kind == COMM_COLL_BARRIER ? "" : px_dtype_name((px_dtype)dt), red ? ", " : "",
             red ? comm_op_names[op] : "", cnt, s >> 16 & 63);
}

px_status comm_coll_begin(px_comm *c, int kind, size_t count, px_dtype dt, int op, int root)
{
    px_status st = comm_check_revoked(c);

    if (st != PX_OK)
        return st;
    if (c->failed)
        return px_set_error(PX_ESTATE, "domain \"%s\" rank %d: %s refused: %s; the domain's "
                            "barriers are out of step since, so every later collective and "
                            "barrier of it is refused: release the domain and allocate a new "
                            "one", c->name, c->rank, comm_coll_names[kind], c->failed_why);
    c->coll_kind = kind;
    c->coll_count = count;
    c->coll_root = root;
    c->coll_sig = comm_sig_make(kind, count, dt, op, root, c->coll_seq++);
    c->in_coll = 1;
    px_fault_at(PX_FAULT_AT_COLL); /* PLEXUS_TEST_FAULT (tests only) */
    return PX_OK;
}

px_status comm_coll_mismatch(px_comm *c, int q, uint32_t theirs)
{
    char mine[96], other[96];

    comm_sig_text(c->coll_sig, c, 1, mine, sizeof(mine));
    comm_sig_text(theirs, c, 0, other, sizeof(other));
    return px_set_error(PX_EINVAL, "domain \"%s\": mismatched collectives: rank %d called %s, "
                        "rank %d called %s; every rank must call the same collectives with "
                        "the same count, dtype, op and root, in the same order", c->name,
                        c->rank, mine, q, other);
}

px_status comm_coll_end(px_comm *c, px_status st)
{
    char msg[1024];

    if (c == NULL || !c->in_coll)
        return st;
    c->in_coll = 0;
    if (st == PX_OK)
        return st;
    snprintf(msg, sizeof(msg), "%s", px_last_error());
    c->failed = 1;
    snprintf(c->failed_why, sizeof(c->failed_why), "call %llu (%s) failed with %s: %.120s",
             (unsigned long long)(c->coll_seq - 1), comm_coll_names[c->coll_kind],
             px_status_name(st), msg);
    /* Tell every live peer: its barriers waiting on this rank fail at once. */
    for (int i = 1; i < c->n; i++) {
        int q = (c->rank + i) % c->n;

        if (!comm_peer_is_dead(c, q))
            (void)c->tl[q]->signal(c, q, (uint32_t)c->rank, PX_SIG_SET,
                                   COMM_BAR_FAILED | (uint64_t)(uint8_t)(int8_t)st << 32 |
                                   (uint32_t)c->epoch_done);
    }
    return px_set_error(st, "%s", msg); /* the signals may have written messages of their own */
}

int comm_peer_behind(const px_comm *c, int q)
{
    uint64_t v;

    if (c == NULL || q < 0 || q >= c->n || q == c->rank || c->area[c->rank] == NULL)
        return 0;
    v = atomic_load_explicit(comm_slot(c->area[c->rank], c->n, (uint32_t)q), memory_order_acquire);
    return (v & COMM_BAR_FAILED) == 0 && (int32_t)((uint32_t)v - (uint32_t)c->epoch) < 0;
}

/* ---- barrier ---- */

typedef struct comm_bar_wait {
    _Atomic uint64_t *s;
    uint32_t e;
} comm_bar_wait;

/* A peer's slot is ready at epoch e or e + 1 (it passed e already: it cannot pass e + 1
 * without this rank), compared modulo 2^32, or when it holds the failure mark. */
static int comm_bar_ready(void *arg)
{
    comm_bar_wait *w = arg;
    uint64_t v = atomic_load_explicit(w->s, memory_order_acquire);

    return (v & COMM_BAR_FAILED) != 0 || (uint32_t)((uint32_t)v - w->e) <= 1;
}

/* A barrier of more ranks than this is a dissemination barrier (comm_barrier_flush). */
#define COMM_BAR_FLAT_MAX 64

/* Waits for rank q's barrier e and checks what it carries. */
static px_status comm_bar_wait_peer(px_comm *c, int q, uint64_t e)
{
    int dissem = c->n > COMM_BAR_FLAT_MAX;
    px_comm_area *a = c->area[c->rank];
    comm_bar_wait w = {comm_slot(a, c->n, (uint32_t)q), (uint32_t)e};
    uint64_t t0 = px_now_ns(), v;
    px_status st = comm_wait(c, comm_bar_ready, &w, &a->wake, &a->sleepers, 0);
    char mine[96], theirs[96];

    v = atomic_load_explicit(w.s, memory_order_acquire);
    if (st == PX_ETIMEDOUT) {
        char who[128];
        int blamed = 0;

        comm_peer_text(c, q, who, sizeof(who));
        /* the ranks that kept this barrier waiting are silent: the parent kills their chips,
         * so the rest of the group, the drain and the shutdown do not wait for them again */
        /* (a dissemination barrier waits on a few partners only, each of which may itself
         * wait on another: nobody can be told silent from here, so nobody is blamed) */
        for (int r = 0; !dissem && r < c->n; r++)
            if (comm_peer_behind(c, r))
                blamed |= comm_blame(c, r);
        return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %.3g s in %s (call "
                            "%llu) at barrier %llu for %s, which has not reached it (its last "
                            "barrier is %llu%s%s). A rank that skipped the call, or is still "
                            "busy: raise the deadline (PLEXUS_COMM_TIMEOUT_S, now %g s) only "
                            "if it is slow", c->name, c->rank,
                            (double)(px_now_ns() - t0) / 1e9, comm_coll_names[c->coll_kind],
                            (unsigned long long)(c->coll_seq - 1), (unsigned long long)e, who,
                            (unsigned long long)(uint32_t)v, comm_blamed_text(blamed),
                            dissem ? "; a barrier of more than 64 ranks waits on log2(n) "
                            "partners, so that rank may itself wait on another" : "",
                            c->timeout_s);
    }
    if (st != PX_OK)
        return st;
    if ((v & COMM_BAR_FAILED) != 0 && (uint32_t)((uint32_t)e - (uint32_t)v) - 1 >= 1u << 31)
        return PX_OK; /* it passed barrier e, then failed: e was announced */
    if ((v & COMM_BAR_FAILED) != 0) { /* the peer's status */
        px_status pst = (px_status)(int8_t)(uint8_t)(v >> 32);

        comm_sig_text(c->coll_sig, c, 1, mine, sizeof(mine));
        if (pst == PX_EINVAL) /* after the arguments' checks: only a mismatch it saw */
            return px_set_error(PX_EINVAL, "domain \"%s\": mismatched collectives: rank %d "
                                "called %s; rank %d found calls that do not match (its error "
                                "names both); every rank must call the same collectives with "
                                "the same count, dtype, op and root, in the same order",
                                c->name, c->rank, mine, q);
        return px_set_error(pst, "domain \"%s\" rank %d: %s failed because rank %d's "
                            "collective call of this domain failed with %s (its error says "
                            "why)", c->name, c->rank, mine, q, px_status_name(pst));
    }
    if ((uint32_t)v == (uint32_t)e && (uint32_t)(v >> 32) != c->coll_sig) {
        comm_sig_text(c->coll_sig, c, 1, mine, sizeof(mine));
        comm_sig_text((uint32_t)(v >> 32), c, 0, theirs, sizeof(theirs));
        return px_set_error(PX_EINVAL, "domain \"%s\": mismatched collectives: rank %d "
                            "called %s, rank %d called %s; every rank must call the same "
                            "collectives with the same count, dtype, op and root, in the same "
                            "order", c->name, c->rank, mine, q, theirs);
    }
    return PX_OK;
}

px_status comm_barrier(px_comm *c)
{
    px_status st = comm_check_peer(c, c ? c->rank : 0, "px_comm_barrier");

    if (st == PX_OK && (st = comm_coll_begin(c, COMM_COLL_BARRIER, 0, 0, 0, 0)) == PX_OK)
        st = comm_coll_end(c, comm_barrier_flush(c, 1));
    return st;
}

px_status comm_barrier_flush(px_comm *c, int flush)
{
    uint64_t e;
    px_status st = comm_check_peer(c, c ? c->rank : 0, "px_comm_barrier");

    if (st != PX_OK)
        return st;
    /* every put posted before the barrier is in its target's window after it, for whoever
     * looks (a transport's signals alone order only what goes to the same target) */
    if (flush && (st = comm_flush_all(c)) != PX_OK)
        return st;
    e = ++c->epoch;
    if (c->n > COMM_BAR_FLAT_MAX) {
        /* Dissemination: in round k (distance d = 2^k) signal rank + d and wait for rank - d,
         * ceil(log2 n) rounds, so n log n signals in all, not n(n - 1) (at 1024 ranks over 16
         * hosts, 10 per rank in place of 1023, 960 of them through the MPI proxies). Each
         * source reaches a target in one round only (the distances differ modulo n), so its
         * slot there says the round as it says the barrier; the puts before it were flushed
         * first, and a rank leaves only once every rank has, through the rounds, entered. */
        for (int d = 1; d < c->n; d *= 2) {
            int to = (c->rank + d) % c->n, from = (c->rank + c->n - d) % c->n;

            if ((st = c->tl[to]->signal(c, to, (uint32_t)c->rank, PX_SIG_SET,
                                        (uint64_t)c->coll_sig << 32 | (uint32_t)e)) != PX_OK)
                return st;
            if ((st = comm_bar_wait_peer(c, from, e)) != PX_OK)
                return st;
        }
        c->epoch_done = e;
        return PX_OK;
    }
    for (int i = 1; i < c->n; i++) {
        int q = (c->rank + i) % c->n; /* not everybody at rank 0 first */

        st = c->tl[q]->signal(c, q, (uint32_t)c->rank, PX_SIG_SET,
                              (uint64_t)c->coll_sig << 32 | (uint32_t)e);
        if (st != PX_OK)
            return st;
    }
    for (int i = 1; i < c->n; i++)
        if ((st = comm_bar_wait_peer(c, (c->rank + c->n - i) % c->n, e)) != PX_OK)
            return st;
    c->epoch_done = e;
    return PX_OK;
}

/* ---- collective slots (the hierarchical collectives' per-segment signals) ---- */

typedef struct comm_cwait {
    _Atomic uint64_t *s, *bar; /* the collective slot of the source, its barrier slot */
    uint64_t v;
} comm_cwait;

static int comm_cwait_ready(void *arg)
{
    comm_cwait *w = arg;

    return atomic_load_explicit(w->s, memory_order_acquire) >= w->v ||
           (atomic_load_explicit(w->bar, memory_order_acquire) & COMM_BAR_FAILED) != 0;
}

px_status comm_coll_wait(px_comm *c, int src, const char *what)
{
    px_comm_area *a = c->area[c->rank];
    comm_cwait w = {comm_slot(a, c->n, PX_COMM_SLOT_COLL(c->n, c->nsig, src)),
                    comm_slot(a, c->n, (uint32_t)src), c->cseq_in[src] + 1};
    uint64_t t0 = px_now_ns(), bar;
    px_status st = comm_wait(c, comm_cwait_ready, &w, &a->wake, &a->sleepers, 0);
    char who[128], mine[96];
    int blamed;

    if (st == PX_OK && atomic_load_explicit(w.s, memory_order_acquire) >= w.v) {
        c->cseq_in[src]++;
        return PX_OK;
    }
    if (st == PX_EPEERDEAD)
        return st;
    /* a stopped source is named silent, as a barrier names it: the parent kills its chip */
    blamed = comm_peer_text(c, src, who, sizeof(who)) == 'T' && comm_blame(c, src);
    comm_sig_text(c->coll_sig, c, 1, mine, sizeof(mine));
    bar = atomic_load_explicit(w.bar, memory_order_acquire);
    if ((bar & COMM_BAR_FAILED) != 0) {
        px_status pst = (px_status)(int8_t)(uint8_t)(bar >> 32);

        return px_set_error(pst, "domain \"%s\" rank %d: %s failed because rank %d's "
                            "collective call of this domain failed with %s (its error says "
                            "why)", c->name, c->rank, mine, src, px_status_name(pst));
    }
    return px_set_error(PX_ETIMEDOUT, "domain \"%s\" rank %d: waited %.3g s in %s for %s "
                        "from %s (its signal %llu%s). A rank still busy, or stopped: raise the "
                        "deadline (PLEXUS_COMM_TIMEOUT_S, now %g s) only if it is slow",
                        c->name, c->rank, (double)(px_now_ns() - t0) / 1e9, mine, what, who,
                        (unsigned long long)w.v, comm_blamed_text(blamed), c->timeout_s);
}

px_status comm_coll_put_signal(px_comm *c, int q, size_t off, const void *src, size_t n)
{
    uint32_t slot = PX_COMM_SLOT_COLL(c->n, c->nsig, c->rank);
    uint64_t v = c->cseq_out[q] + 1;
    px_status st;

    if (c->tl[q]->put_signal != NULL)
        st = c->tl[q]->put_signal(c, q, off, src, n, slot, PX_SIG_SET, v);
    else if ((st = c->tl[q]->put(c, q, off, src, n)) == PX_OK)
        st = c->tl[q]->signal(c, q, slot, PX_SIG_SET, v);
    if (st == PX_OK)
        c->cseq_out[q] = v;
    return st;
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
