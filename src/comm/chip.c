/*
 * chip.c - the chips' side of communication domains: each member's window, the mappings of its
 * peers' windows and its communicator, made and undone by the parent's control calls
 * (domain.h), and the lookup through which kernels find their communicator.
 *
 * comm.create and comm.map run on the chip's service thread, so a domain is set up while the
 * chip's cores are busy. comm.free takes the ordered route: the chip's main thread runs it
 * after every call posted before it has finished, so no kernel of an earlier call (say one
 * still inside a collective after its group failed because a member died) can be using the
 * windows it unmaps. A kernel looks a domain up without a lock: an entry is filled completely
 * before the answer to comm.map reaches the parent, who submits the tasks that use it only
 * then.
 */
#include "comm/domain.h"
#include "comm/select.h"

#include <errno.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "util/log.h"
#include "util/util.h"

/* One domain as this chip holds it. */
typedef struct comm_chip_dom {
    _Atomic uint32_t id;         /* 0: free */
    int rank, n;
    size_t win_len;              /* head + data of every window */
    px_worker *engine;           /* the chip engine its window's data is device memory of */
    void *win[PX_COMM_MAX_RANKS]; /* mapped windows (own and direct peers'), NULL where none */
    void *stage[PX_COMM_MAX_RANKS]; /* staging memory shared with each staged peer */
    size_t stage_chunk;          /* its chunk (the mapping is comm_stg_pair_bytes of it) */
    int built;                   /* comm is built (and on the progress thread if staged) */
    px_comm comm;
} comm_chip_dom;

static comm_chip_dom g_doms[COMM_MAX_DOMAINS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* handlers against each other */
static comm_stg_bell **g_bells;  /* the worker's doorbell board (one bell per chip) */
static comm_progress *g_prog;    /* started with the first staged domain (g_lock) */

static comm_chip_dom *comm_chip_find(uint32_t id)
{
    for (int i = 0; id != 0 && i < COMM_MAX_DOMAINS; i++)
        if (atomic_load_explicit(&g_doms[i].id, memory_order_acquire) == id)
            return &g_doms[i];
    return NULL;
}

px_comm *comm_chip_lookup(uint32_t id)
{
    comm_chip_dom *d = comm_chip_find(id);

    return d != NULL ? &d->comm : NULL;
}

/* Closes every descriptor of domain id still in the chip's table: its own window's offer
 * that nobody fetched, peers' windows and staging memory it never mapped (an allocation that
 * failed half-way, or a one-member domain). */
static void comm_chip_discard(uint32_t id)
{
    hier_chip *chip = hier_chip_self();

    (void)hier_chip_fd_discard(chip, comm_fd_tag(id, 0), ~0xFFull);
    (void)hier_chip_fd_discard(chip, comm_stage_tag(id, 0, 0), ~0xFFFFull);
}

/* Unmaps every window of d, closes its descriptors and frees its entry (g_lock held). */
static void comm_chip_drop(comm_chip_dom *d)
{
    size_t stage_len = comm_stg_pair_bytes(d->stage_chunk);

    if (d->built && d->comm.nstaged > 0 && g_prog != NULL)
        comm_progress_remove(g_prog, &d->comm); /* after its sweep: nobody touches it now */
    d->built = 0;
    if (d->engine != NULL && d->win[d->rank] != NULL)
        px_rt_device_range_remove(d->engine, d->comm.data[d->rank]);
    d->engine = NULL;
    comm_fini(&d->comm); /* before the unmaps: it reads the staged rings */
    for (int q = 0; q < d->n; q++) {
        if (d->win[q] != NULL)
            munmap(d->win[q], d->win_len);
        if (d->stage[q] != NULL)
            munmap(d->stage[q], stage_len);
        d->win[q] = NULL;
        d->stage[q] = NULL;
    }
    comm_chip_discard(atomic_load_explicit(&d->id, memory_order_relaxed));
    atomic_store_explicit(&d->id, 0, memory_order_release);
}

/* Maps window fd (len bytes); returns the address or NULL (message set). */
static void *comm_chip_map(int fd, size_t len, const char *what, int q)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    if (p == MAP_FAILED) {
        px_set_error(PX_ENOMEM, "%s: cannot map rank %d's window (%zu bytes): %s", what, q,
                     len, strerror(errno));
        return NULL;
    }
    return p;
}

/* comm.create: make this rank's window, map it, offer its descriptor. */
static px_status comm_chip_create(hier_chip *chip, void *arg, const void *payload, size_t n,
                                  void *reply, size_t *reply_n)
{
    const comm_create_msg *m = payload;
    comm_chip_dom *d = NULL;
    int me = hier_chip_index(chip), rank = -1, fd = -1;
    char what[64];
    px_status st;

    if (n != sizeof(*m))
        return px_set_error(PX_EINVAL, "comm.create: payload of %zu bytes, expected %zu", n,
                            sizeof(*m));
    for (int q = 0; q < m->n && q < PX_COMM_MAX_RANKS; q++)
        if (m->chips[q] == me)
            rank = q;
    snprintf(what, sizeof(what), "domain \"%.31s\" on chip %d", m->name, me);
    if (rank < 0)
        return px_set_error(PX_EINVAL, "%s: this chip is not a member", what);
    pthread_mutex_lock(&g_lock);
    if (comm_chip_find(m->id) != NULL) {
        pthread_mutex_unlock(&g_lock);
        return px_set_error(PX_ESTATE, "%s: domain id %u exists already", what, m->id);
    }
    for (int i = 0; i < COMM_MAX_DOMAINS && d == NULL; i++)
        if (atomic_load_explicit(&g_doms[i].id, memory_order_relaxed) == 0)
            d = &g_doms[i];
    if (d == NULL) {
        pthread_mutex_unlock(&g_lock);
        return px_set_error(PX_ENOMEM, "%s: %d domains live on this chip already", what,
                            COMM_MAX_DOMAINS);
    }
    memset(d->win, 0, sizeof(d->win));
    memset(d->stage, 0, sizeof(d->stage));
    d->stage_chunk = m->stage_chunk;
    memset(&d->comm, 0, sizeof(d->comm));
    d->built = 0;
    d->rank = rank;
    d->n = m->n;
    d->win_len = px_comm_window_bytes(m->nsig, m->data_bytes);
    st = hier_memfd_create("plexus-window", d->win_len, &fd);
    if (st == PX_OK && (d->win[rank] = comm_chip_map(fd, d->win_len, what, rank)) == NULL)
        st = PX_ENOMEM;
    if (st == PX_OK) {
        /* Zero before anybody can see it: a fast peer's first signal must not be lost. */
        memset(d->win[rank], 0, px_comm_area_bytes(m->nsig));
        ((px_comm_area *)d->win[rank])->nsig = m->nsig;
        /* a one-member domain has no peer to fetch it: the mapping is all it needs */
        if (m->n > 1)
            st = hier_chip_fd_offer(chip, comm_fd_tag(m->id, rank), fd);
    }
    if (fd >= 0)
        close(fd);
    if (st == PX_OK) {
        d->comm.rank = rank; /* the rest at comm.map */
        atomic_store_explicit(&d->id, m->id, memory_order_release);
    } else if (d->win[rank] != NULL) {
        munmap(d->win[rank], d->win_len);
        d->win[rank] = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    *reply_n = 0;
    return st;
}

/* Checks that a control call's payload is a comm_create_msg and names the domain on this chip
 * in what (for messages). */
static px_status comm_chip_msg(hier_chip *chip, const char *kind, size_t n, const void *payload,
                               char *what, size_t wn)
{
    const comm_create_msg *m = payload;

    if (n != sizeof(*m))
        return px_set_error(PX_EINVAL, "%s: payload of %zu bytes, expected %zu", kind, n,
                            sizeof(*m));
    snprintf(what, wn, "domain \"%.31s\" on chip %d", m->name, hier_chip_index(chip));
    return PX_OK;
}

/*
 * The test hook PX_TEST_COMM_MAP_FAIL=<chip>:<peer chip>: chip <chip> fails to map the
 * window of <peer chip> as a driver would that refused it, to prove the fallback.
 */
static int comm_chip_hook_fails(int me, int peer)
{
    const char *v = getenv("PX_TEST_COMM_MAP_FAIL");
    int a, b;

    return v != NULL && sscanf(v, "%d:%d", &a, &b) == 2 && a == me && b == peer;
}

/* Maps direct peer q's window into d; 0 with the reason in why when it cannot. */
static int comm_chip_map_direct(hier_chip *chip, comm_chip_dom *d, const comm_create_msg *m,
                                int q, char *why, size_t n, px_status *fatal)
{
    px_worker *eng = hier_chip_engine(chip);
    int me = hier_chip_index(chip), fd;
    comm_choice ch;

    if ((*fatal = hier_chip_fd_take(chip, comm_fd_tag(m->id, q), &fd)) != PX_OK)
        return 0;
    /* the one rule (select.c) on this chip's own facts: what they forbid is not mapped */
    comm_choose(&eng->caps, eng->cfg.device_profile, PX_COMM_TL_DIRECT, 0, me, m->chips[q], &ch);
    if (!ch.accepts[PX_COMM_TL_DIRECT])
        snprintf(why, n, "chip %d may not map chip %d's memory (%s)", me, m->chips[q],
                 ch.why[PX_COMM_TL_DIRECT]);
    else if (comm_chip_hook_fails(me, m->chips[q]))
        snprintf(why, n, "chip %d could not map chip %d's window: refused by the test hook "
                 "PX_TEST_COMM_MAP_FAIL", me, m->chips[q]);
    else if ((d->win[q] = mmap(NULL, d->win_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
             MAP_FAILED) {
        d->win[q] = NULL;
        snprintf(why, n, "chip %d could not map chip %d's window (%zu bytes): %s", me,
                 m->chips[q], d->win_len, strerror(errno));
    }
    close(fd);
    return d->win[q] != NULL;
}

/* comm.map: map what every pair needs (direct: the peer's window; staged: the pair's staging
 * memory); answer which direct mappings failed. Idempotent: the parent sends it again after
 * moving failed pairs to staged. */
static px_status comm_chip_map_all(hier_chip *chip, void *arg, const void *payload, size_t n,
                                   void *reply, size_t *reply_n)
{
    const comm_create_msg *m = payload;
    comm_map_reply *out = reply;
    comm_chip_dom *d;
    char what[64];
    px_status st = PX_OK;

    *reply_n = 0;
    if ((st = comm_chip_msg(chip, "comm.map", n, payload, what, sizeof(what))) != PX_OK)
        return st;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&g_lock);
    if ((d = comm_chip_find(m->id)) == NULL) {
        pthread_mutex_unlock(&g_lock);
        return px_set_error(PX_ESTATE, "%s: comm.map before comm.create", what);
    }
    for (int q = 0; st == PX_OK && q < m->n; q++) {
        char why[256];

        if (q == d->rank)
            continue;
        if (m->staged[d->rank] >> q & 1) {
            int fd;
            void *p;

            if (d->win[q] != NULL) { /* the pair fell back: the peer could not map ours */
                munmap(d->win[q], d->win_len);
                d->win[q] = NULL;
            }
            if (d->stage[q] != NULL)
                continue;
            if ((st = hier_chip_fd_take(chip, comm_stage_tag(m->id, PX_MIN(q, d->rank),
                                                             PX_MAX(q, d->rank)), &fd)) != PX_OK)
                break;
            p = mmap(NULL, comm_stg_pair_bytes(m->stage_chunk), PROT_READ | PROT_WRITE,
                     MAP_SHARED, fd, 0);
            close(fd);
            if (p == MAP_FAILED) {
                st = px_set_error(PX_ENOMEM, "%s: cannot map the staging memory of rank %d "
                                  "(%zu bytes): %s", what, q,
                                  comm_stg_pair_bytes(m->stage_chunk),
                                  strerror(errno));
            } else {
                d->stage[q] = p;
                if (d->rank < q) /* the lower rank formats it; comm.ready comes after */
                    comm_stg_pair_init(p, m->stage_chunk);
            }
        } else if (d->win[q] == NULL &&
                   !comm_chip_map_direct(chip, d, m, q, why, sizeof(why), &st) && st == PX_OK) {
            if (out->failed == 0)
                snprintf(out->why, sizeof(out->why), "%s", why);
            out->failed |= 1ull << q;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (st == PX_OK)
        *reply_n = sizeof(*out);
    return st;
}

/* comm.ready: build the communicator over the pairs as they are mapped now. */
static px_status comm_chip_ready(hier_chip *chip, void *arg, const void *payload, size_t n,
                                 void *reply, size_t *reply_n)
{
    const comm_create_msg *m = payload;
    px_worker *eng = hier_chip_engine(chip);
    const px_comm_tl *tl[PX_COMM_MAX_RANKS], **pairs = NULL;
    comm_chip_dom *d;
    char what[64];
    px_status st = PX_OK;

    *reply_n = 0;
    if ((st = comm_chip_msg(chip, "comm.ready", n, payload, what, sizeof(what))) != PX_OK)
        return st;
    pthread_mutex_lock(&g_lock);
    if ((d = comm_chip_find(m->id)) == NULL || d->built) {
        pthread_mutex_unlock(&g_lock);
        return px_set_error(PX_ESTATE, "%s: comm.ready %s", what,
                            d == NULL ? "before comm.create" : "twice");
    }
    for (int q = 0; q < m->n; q++) {
        int staged = q != d->rank && (m->staged[d->rank] >> q & 1);

        tl[q] = &px_comm_tl_direct;
        if (q != d->rank && (staged ? d->stage[q] == NULL : d->win[q] == NULL))
            st = px_set_error(PX_ESTATE, "%s: comm.ready: rank %d is not mapped (%s)", what, q,
                              staged ? "staged" : "direct");
    }
    /* The domain's pair table as every member got it (the collectives choose from it). */
    if (st == PX_OK && (pairs = calloc((size_t)m->n * (size_t)m->n, sizeof(*pairs))) == NULL)
        st = px_set_error(PX_ENOMEM, "%s: comm.ready: out of memory for the pair table", what);
    for (int a = 0; st == PX_OK && a < m->n; a++)
        for (int b = 0; b < m->n; b++)
            pairs[a * m->n + b] = (m->staged[a] >> b & 1) ? &px_comm_tl_staged
                                                          : &px_comm_tl_direct;
    if (st == PX_OK) {
        px_comm_spec s = {.name = m->name, .id = m->id, .rank = d->rank, .n = m->n,
                          .data_bytes = m->data_bytes, .nsig = m->nsig, .windows = d->win,
                          .tl = tl, .pairs = pairs, .deaths = hier_chip_deaths(chip),
                          .member = m->chips,
                          .timeout_s = m->timeout_s, .spin_ns = m->spin_ns,
                          .yield_ns = m->yield_ns, .oneshot_max = m->oneshot_max,
                          .buffers = m->buffers, .nbuffers = m->nbuffers};

        st = comm_build(&d->comm, &s);
        free(pairs);
    }
    for (int q = 0; st == PX_OK && q < m->n; q++)
        if (q != d->rank && (m->staged[d->rank] >> q & 1))
            st = comm_stg_connect(&d->comm, q, d->stage[q], comm_stg_pair_bytes(m->stage_chunk),
                                  &(*g_bells)[m->chips[q]]);
    /* Its own window's data is device memory of this chip: tasks may take tensors there. */
    if (st == PX_OK &&
        (st = px_rt_device_range_add(eng, d->comm.data[d->rank], m->data_bytes)) == PX_OK)
        d->engine = eng;
    if (st == PX_OK && d->comm.nstaged > 0 && g_prog == NULL) {
        char name[16];

        snprintf(name, sizeof(name), "px-comm%d", hier_chip_index(chip));
        st = comm_progress_start(&(*g_bells)[hier_chip_index(chip)], name, &g_prog);
    }
    if (st == PX_OK && d->comm.nstaged > 0)
        st = comm_progress_add(g_prog, &d->comm);
    if (st == PX_OK)
        d->built = 1;
    else
        comm_chip_drop(d);
    pthread_mutex_unlock(&g_lock);
    return st;
}

/* comm.free: forget the domain (a chip that never made it answers PX_OK too). */
static px_status comm_chip_free(hier_chip *chip, void *arg, const void *payload, size_t n,
                                void *reply, size_t *reply_n)
{
    const comm_id_msg *m = payload;
    comm_chip_dom *d;

    *reply_n = 0;
    if (n != sizeof(*m))
        return px_set_error(PX_EINVAL, "comm.free: payload of %zu bytes, expected %zu", n,
                            sizeof(*m));
    pthread_mutex_lock(&g_lock);
    if ((d = comm_chip_find(m->id)) != NULL)
        comm_chip_drop(d);
    else
        comm_chip_discard(m->id); /* descriptors sent to a chip whose comm.create failed */
    pthread_mutex_unlock(&g_lock);
    return PX_OK;
}

/* The service's stop(): the chip leaves; unmap whatever is left. */
static void comm_chip_stop(hier_chip *chip, void *arg)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < COMM_MAX_DOMAINS; i++)
        if (atomic_load_explicit(&g_doms[i].id, memory_order_relaxed) != 0)
            comm_chip_drop(&g_doms[i]);
    comm_progress_stop(g_prog);
    g_prog = NULL;
    pthread_mutex_unlock(&g_lock);
}

/* The service's start(): remember the doorbell board this chip was forked with. */
static px_status comm_chip_start(hier_chip *chip, void *arg)
{
    g_bells = arg;
    if (*g_bells == NULL)
        return px_set_error(PX_ESTATE, "comm: chip %d has no doorbell board",
                            hier_chip_index(chip));
    return PX_OK;
}

px_status comm_chip_register(px_worker *w, int kinds[COMM_NKINDS], comm_stg_bell **bells)
{
    px_status st = hier_ctl_register(w, "comm.create", HIER_CTL_SERVICE, comm_chip_create,
                                     NULL, &kinds[COMM_KIND_CREATE]);

    if (st == PX_OK)
        st = hier_ctl_register(w, "comm.map", HIER_CTL_SERVICE, comm_chip_map_all, NULL,
                               &kinds[COMM_KIND_MAP]);
    if (st == PX_OK)
        st = hier_ctl_register(w, "comm.ready", HIER_CTL_SERVICE, comm_chip_ready, NULL,
                               &kinds[COMM_KIND_READY]);
    if (st == PX_OK)
        st = hier_ctl_register(w, "comm.free", HIER_CTL_ORDERED, comm_chip_free, NULL,
                               &kinds[COMM_KIND_FREE]);
    if (st == PX_OK)
        st = hier_ctl_register(w, "comm.forget", HIER_CTL_SERVICE, comm_chip_free, NULL,
                               &kinds[COMM_KIND_FORGET]);
    if (st == PX_OK)
        st = hier_service_register(w, "comm", comm_chip_start, comm_chip_stop, bells);
    return st;
}
