/*
 * chip.c - the chips' side of communication domains: each member's window, the mappings of its
 * peers' windows and of its pairs' shared memory, and its communicator, made and undone by the
 * parent's control calls (domain.h), and the lookup through which kernels find their
 * communicator. It knows transports only through their contract: which pairs map windows
 * (maps_window), which share memory (prepare) and who formats it (format); comm_build
 * connects them.
 *
 * comm.create, comm.map and comm.ready run on the chip's service thread, so a domain is set up
 * while the chip's cores are busy. comm.free takes the ordered route: the chip's main thread
 * runs it after every call posted before it has finished, so no kernel of an earlier call
 * (say one still inside a collective after its group failed because a member died) can be
 * using the windows it unmaps. A kernel looks a domain up without a lock: an entry is filled
 * completely before the answer to comm.ready reaches the parent, who submits the tasks that
 * use it only then.
 */
#include "comm/domain.h"
#include "comm/select.h"

#include <errno.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "platform/platform.h"
#include "runtime/runtime.h"
#include "util/log.h"
#include "util/util.h"

/* One domain as this chip holds it. */
typedef struct comm_chip_dom {
    _Atomic uint32_t id;         /* 0: free */
    int rank, n;
    size_t win_len;              /* head + data + slots of every window */
    px_worker *engine;           /* the chip engine its window's data is device memory of */
    comm_desc *desc;             /* the description, mapped from comm.create to comm.ready */
    size_t desc_len;
    void **win;                  /* n: mapped windows (own and peers'), NULL where none */
    void **shared;               /* n: the shared memory of each pair, NULL where none */
    size_t *shared_len;          /* n: its bytes */
    void *ring;                  /* a per_rank transport's memory of this rank (mpi: its one
                                  * ring to the proxy, every mpi peer's link), or NULL */
    size_t ring_len;
    int built;                   /* comm is built (and on the progress thread if it needs) */
    px_comm comm;
    px_comm **gens;              /* the communicators kernel-side shrinks made from it (and
                                  * from each other), ngens of cap: freed with the domain */
    int ngens, capgens;
} comm_chip_dom;

static comm_chip_dom g_doms[COMM_MAX_DOMAINS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* handlers against each other */
static comm_bell **g_bells;      /* the worker's doorbell board (one bell per chip) */
static comm_progress *g_prog;    /* started with the first domain that needs one (g_lock) */

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
 * that nobody fetched, peers' windows, shared memory and descriptions it never mapped (an
 * allocation that failed half-way, or a one-member domain). */
static void comm_chip_discard(uint32_t id)
{
    (void)hier_chip_fd_discard(hier_chip_self(), comm_tag_domain(id), COMM_TAG_DOMAIN);
}

/* This chip's device (windows are its memory, through the platform). */
static px_chip *comm_chip_dev(void)
{
    return hier_chip_engine(hier_chip_self())->chip;
}

/* The progress thread lets d's communicators go, its own and the kernel-side shrinks' (g_lock
 * held): a removal waits for the sweep in progress, so nothing of that thread touches them
 * after it (a second removal finds nothing). */
static void comm_chip_unprogress(comm_chip_dom *d)
{
    if (g_prog == NULL)
        return;
    if (d->built && d->comm.progresses)
        comm_progress_remove(g_prog, &d->comm);
    for (int i = 0; i < d->ngens; i++)
        if (d->gens[i]->progresses)
            comm_progress_remove(g_prog, d->gens[i]);
}

/* Unmaps every mapping of d, closes its descriptors and frees its entry (g_lock held). */
static void comm_chip_drop(comm_chip_dom *d)
{
    px_chip *dev = comm_chip_dev();

    comm_chip_unprogress(d);
    for (int i = 0; i < d->ngens; i++) { /* the kernel-side shrinks' communicators */
        comm_fini(d->gens[i]);
        free(d->gens[i]);
    }
    free(d->gens);
    d->gens = NULL;
    d->ngens = d->capgens = 0;
    d->built = 0;
    if (d->engine != NULL && d->win != NULL && d->win[d->rank] != NULL)
        px_rt_device_range_remove(d->engine, d->comm.data[d->rank]);
    d->engine = NULL;
    comm_fini(&d->comm); /* before the unmaps: the transports' release may read them */
    for (int q = 0; q < d->n; q++) {
        if (d->win != NULL && d->win[q] != NULL)
            (void)px_plat_win_free(dev, d->win[q], d->win_len);
        if (d->shared != NULL && d->shared[q] != NULL)
            (void)px_plat_shm_free(dev, d->shared[q], d->shared_len[q]);
    }
    if (d->ring != NULL)
        (void)px_plat_shm_free(dev, d->ring, d->ring_len);
    d->ring = NULL;
    if (d->desc != NULL)
        (void)px_plat_shm_free(dev, d->desc, d->desc_len);
    free(d->win);
    free(d->shared);
    free(d->shared_len);
    d->desc = NULL;
    d->win = NULL;
    d->shared = NULL;
    d->shared_len = NULL;
    comm_chip_discard(atomic_load_explicit(&d->id, memory_order_relaxed));
    atomic_store_explicit(&d->id, 0, memory_order_release);
}

/* Takes and maps the description of m's domain into d, checks it and finds this chip's
 * rank. */
static px_status comm_chip_desc(hier_chip *chip, comm_chip_dom *d, const comm_create_msg *m,
                                const char *what)
{
    int fd, me = hier_chip_index(chip);
    px_status st;

    if (m->n < 1 || m->n > PX_COMM_MAX_RANKS || m->desc_bytes != comm_desc_bytes(m->n))
        return px_set_error(PX_EINVAL, "%s: %d ranks with a %llu-byte description (a defect "
                            "of the parent)", what, m->n, (unsigned long long)m->desc_bytes);
    if ((st = hier_chip_fd_take(chip, comm_desc_tag(m->id), &fd)) != PX_OK)
        return st;
    st = px_plat_shm_import(comm_chip_dev(), fd, m->desc_bytes, (void **)&d->desc);
    close(fd);
    if (st != PX_OK)
        return px_set_error(st, "%s: the domain's description: %s", what, px_last_error());
    d->desc_len = m->desc_bytes;
    if (d->desc->magic != COMM_DESC_MAGIC || d->desc->id != m->id || d->desc->n != m->n)
        return px_set_error(PX_EINVAL, "%s: the description is not the domain's (a defect of "
                            "the parent)", what);
    d->rank = -1;
    for (int q = 0; q < m->n; q++)
        if (comm_desc_chips(d->desc)[q] == me)
            d->rank = q;
    if (d->rank < 0)
        return px_set_error(PX_EINVAL, "%s: this chip is not a member", what);
    return PX_OK;
}

/* A free entry for domain m->id (g_lock held): PX_ESTATE when the id exists on this chip
 * already, PX_ENOMEM when every entry is taken. */
static px_status comm_chip_slot(const comm_create_msg *m, const char *what, comm_chip_dom **out)
{
    comm_chip_dom *d = NULL;

    if (comm_chip_find(m->id) != NULL)
        return px_set_error(PX_ESTATE, "%s: domain id %u exists already", what, m->id);
    for (int i = 0; i < COMM_MAX_DOMAINS && d == NULL; i++)
        if (atomic_load_explicit(&g_doms[i].id, memory_order_relaxed) == 0)
            d = &g_doms[i];
    if (d == NULL)
        return px_set_error(PX_ENOMEM, "%s: %d domains live on this chip already", what,
                            COMM_MAX_DOMAINS);
    *out = d;
    return PX_OK;
}

/* Fills entry d of domain m: the description mapped, the per-rank tables, this rank's window
 * made, zeroed and its descriptor offered to the peers. */
static px_status comm_chip_window(hier_chip *chip, comm_chip_dom *d, const comm_create_msg *m,
                                  const char *what)
{
    int fd = -1;
    px_status st = comm_chip_desc(chip, d, m, what);

    if (st == PX_OK && ((d->win = calloc((size_t)m->n, sizeof(*d->win))) == NULL ||
                        (d->shared = calloc((size_t)m->n, sizeof(*d->shared))) == NULL ||
                        (d->shared_len = calloc((size_t)m->n, sizeof(size_t))) == NULL))
        st = px_set_error(PX_ENOMEM, "%s: out of memory for %d ranks' tables", what, m->n);
    d->win_len = px_comm_window_bytes(m->n, m->nsig, m->data_bytes);
    /* the window is device memory of this chip that its peers may map (the platform's) */
    if (st == PX_OK &&
        (st = px_plat_win_create(comm_chip_dev(), d->win_len, &d->win[d->rank], &fd)) != PX_OK)
        st = px_set_error(st, "%s: its window: %s", what, px_last_error());
    if (st == PX_OK) {
        px_comm_area *a = d->win[d->rank];

        /* Zero before anybody can see it: a fast peer's first signal must not be lost. */
        memset(a, 0, px_comm_area_bytes(m->n, m->nsig));
        a->nsig = m->nsig;
        a->n = (uint32_t)m->n;
        /* a one-member domain has no peer to fetch it: the mapping is all it needs */
        if (m->n > 1)
            st = hier_chip_fd_offer(chip, comm_fd_tag(m->id, d->rank), fd);
    }
    if (fd >= 0)
        close(fd);
    return st;
}

/* comm.create: map the description, make this rank's window, map it, offer its descriptor. */
static px_status comm_chip_create(hier_chip *chip, void *arg, const void *payload, size_t n,
                                  void *reply, size_t *reply_n)
{
    const comm_create_msg *m = payload;
    comm_chip_dom *d = NULL;
    int me = hier_chip_index(chip);
    char what[64];
    px_status st;

    (void)arg, (void)reply;
    *reply_n = 0;
    if (n != sizeof(*m))
        return px_set_error(PX_EINVAL, "comm.create: payload of %zu bytes, expected %zu", n,
                            sizeof(*m));
    snprintf(what, sizeof(what), "domain \"%.31s\" on chip %d", m->name, me);
    if (m->batch != 0 && (st = hier_chip_fd_receive(chip, m->batch)) != PX_OK)
        return st; /* what came of it is the domain's: comm.forget closes it */
    pthread_mutex_lock(&g_lock);
    if ((st = comm_chip_slot(m, what, &d)) != PX_OK) {
        pthread_mutex_unlock(&g_lock);
        return st;
    }
    memset(d, 0, sizeof(*d));
    d->n = m->n;
    st = comm_chip_window(chip, d, m, what);
    if (st == PX_OK) {
        d->comm.rank = d->rank; /* the rest at comm.ready */
        atomic_store_explicit(&d->id, m->id, memory_order_release);
    } else {
        atomic_store_explicit(&d->id, m->id, memory_order_relaxed);
        comm_chip_drop(d); /* unmaps what it mapped, frees the entry */
    }
    pthread_mutex_unlock(&g_lock);
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
    if (m->revoke_slot < 0 || m->revoke_slot >= COMM_REVOKE_SLOTS)
        return px_set_error(PX_EINVAL, "%s: revoke slot %d out of range (0..%d)", kind,
                            (int)m->revoke_slot, COMM_REVOKE_SLOTS - 1);
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

/* Maps peer q's window into d; 0 with the reason in why when it cannot. The platform's
 * import applies the peer-access rule on this chip's own facts (what they forbid is not
 * mapped) in the words of the rule. */
static int comm_chip_map_window(hier_chip *chip, comm_chip_dom *d, const comm_create_msg *m,
                                int q, char *why, size_t n, px_status *fatal)
{
    int me = hier_chip_index(chip), peer = comm_desc_chips(d->desc)[q], fd;

    if ((*fatal = hier_chip_fd_take(chip, comm_fd_tag(m->id, q), &fd)) != PX_OK)
        return 0;
    if (comm_chip_hook_fails(me, peer))
        snprintf(why, n, "chip %d could not map chip %d's window: refused by the test hook "
                 "PX_TEST_COMM_MAP_FAIL", me, peer);
    else if (px_plat_win_import(hier_chip_engine(chip)->chip, peer, fd, d->win_len,
                                &d->win[q]) != PX_OK)
        snprintf(why, n, "chip %d could not map chip %d's window (%zu bytes): %s", me, peer,
                 d->win_len, px_last_error());
    close(fd);
    return d->win[q] != NULL;
}

/* Takes and maps the shared memory of pair (rank, q) (t's prepare asked for bytes); the
 * lower rank formats it (comm.ready comes after both mapped), or this rank when q is another
 * host's. */
static px_status comm_chip_map_shared(hier_chip *chip, comm_chip_dom *d,
                                      const comm_create_msg *m, int q, const px_comm_tl *t,
                                      size_t bytes, const char *what)
{
    int fd;
    px_status st = hier_chip_fd_take(chip, comm_pair_tag(m->id, PX_MIN(q, d->rank),
                                                         PX_MAX(q, d->rank)), &fd);

    if (st != PX_OK)
        return st;
    st = px_plat_shm_import(comm_chip_dev(), fd, bytes, &d->shared[q]);
    close(fd);
    if (st != PX_OK)
        return px_set_error(st, "%s: the %s memory shared with rank %d (%zu bytes): %s", what,
                            t->name, q, bytes, px_last_error());
    d->shared_len[q] = bytes;
    /* the lower rank formats it; with the peer on another host this rank has a copy of its
     * own (made by its worker) and formats it */
    if ((d->rank < q || comm_desc_chips(d->desc)[q] < 0) && t->format != NULL)
        t->format(d->shared[q], bytes, m->n);
    return PX_OK;
}

/* Takes and maps this rank's memory of per_rank transport t (the set-up sends it once, under
 * comm_ring_tag) and formats it: it is this rank's alone. */
static px_status comm_chip_map_ring(hier_chip *chip, comm_chip_dom *d,
                                    const comm_create_msg *m, const px_comm_tl *t, size_t bytes,
                                    const char *what)
{
    int fd;
    px_status st = hier_chip_fd_take(chip, comm_ring_tag(m->id, d->rank), &fd);

    if (st != PX_OK)
        return st;
    st = px_plat_shm_import(comm_chip_dev(), fd, bytes, &d->ring);
    close(fd);
    if (st != PX_OK)
        return px_set_error(st, "%s: its %s ring (%zu bytes): %s", what, t->name, bytes,
                            px_last_error());
    d->ring_len = bytes;
    if (t->format != NULL)
        t->format(d->ring, bytes, m->n);
    return PX_OK;
}

/* comm.map: map what every pair needs (a peer's window, a pair's shared memory); mark in the
 * description which window mappings failed and answer why. Idempotent: the parent sends it
 * again after moving failed pairs to the fallback. */
static px_status comm_chip_map_all(hier_chip *chip, void *arg, const void *payload, size_t n,
                                   void *reply, size_t *reply_n)
{
    const comm_create_msg *m = payload;
    comm_map_reply *out = reply;
    comm_chip_dom *d;
    char what[64];
    px_status st = PX_OK;

    (void)arg;
    *reply_n = 0;
    if ((st = comm_chip_msg(chip, "comm.map", n, payload, what, sizeof(what))) != PX_OK)
        return st;
    if (m->batch != 0 && (st = hier_chip_fd_receive(chip, m->batch)) != PX_OK)
        return st;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&g_lock);
    if ((d = comm_chip_find(m->id)) == NULL || d->desc == NULL) {
        pthread_mutex_unlock(&g_lock);
        return px_set_error(PX_ESTATE, "%s: comm.map before comm.create", what);
    }
    for (int q = 0; st == PX_OK && q < m->n; q++) {
        const px_comm_tl *t = comm_tl_of(comm_desc_pairs(d->desc)[d->rank * m->n + q]);
        uint8_t *fail = &comm_desc_mapfail(d->desc)[d->rank * m->n + q];
        size_t bytes;
        char why[256];

        *fail = 0;
        if (q == d->rank)
            continue;
        if (t == NULL) {
            st = px_set_error(PX_EINVAL, "%s: the description names no transport for rank "
                              "%d (a defect of the parent)", what, q);
            break;
        }
        if (!t->maps_window && d->win[q] != NULL) { /* it fell back: the peer could not map
                                                      * ours */
            (void)px_plat_win_free(comm_chip_dev(), d->win[q], d->win_len);
            d->win[q] = NULL;
        }
        bytes = t->prepare != NULL ? t->prepare(m->n) : 0;
        if (bytes > 0 && t->per_rank && d->ring == NULL)
            st = comm_chip_map_ring(chip, d, m, t, bytes, what);
        else if (bytes > 0 && !t->per_rank && d->shared[q] == NULL)
            st = comm_chip_map_shared(chip, d, m, q, t, bytes, what);
        if (st == PX_OK && t->maps_window && d->win[q] == NULL &&
            !comm_chip_map_window(chip, d, m, q, why, sizeof(why), &st) && st == PX_OK) {
            if (out->failed++ == 0)
                snprintf(out->why, sizeof(out->why), "%s", why);
            *fail = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (st == PX_OK)
        *reply_n = sizeof(*out);
    return st;
}

/*
 * A shrink's new domain d: this member's window data becomes the bytes of its window in the
 * old domain (m->carry_id), when this chip holds it (g_lock held).
 *
 * Nothing writes the old window while it is copied. px_domain_shrink revoked the old domain,
 * then waited for its tasks of the run and for the orphans on its members (hier_orphans_wait:
 * the calls of a group task that a death failed, which may still be inside a collective on
 * it, on this chip or on a peer that maps this window), and only then posted the calls that
 * lead here: every kernel that wrote the window had returned, and its call's completion had
 * reached the parent, before this call was posted. Within this process TSan sees that order
 * through hier_xproc_token: the main thread releases it after each call it ran, before it
 * publishes the completion (px_child_loop), and this service thread acquired it in
 * hier_ctl_run before it ran this handler. What the progress thread might still carry out
 * into the window (a staged request a peer posted before it saw the revoke) is stopped first:
 * the old communicators leave that thread, whose last sweep ends before the copy.
 */
static void comm_chip_carry(comm_chip_dom *d, const comm_create_msg *m)
{
    comm_chip_dom *old = comm_chip_find(m->carry_id);
    size_t n = m->data_bytes;

    if (old == NULL || !old->built)
        return;
    comm_chip_unprogress(old);
    if (old->comm.data_bytes < n)
        n = old->comm.data_bytes;
    memcpy(d->comm.data[d->rank], old->comm.data[old->rank], n);
}

/* The test hook PX_TEST_COMM_PROGRESS_OFF=<chip>: that chip's progress thread is given no
 * communicator, so only its kernels' waits carry out what reaches it (and a kernel that
 * sleeps in a wait carries out nothing): the tests put a request in flight exactly when a
 * wait sees a death. */
static int comm_chip_progress_off(int chip)
{
    const char *v = getenv("PX_TEST_COMM_PROGRESS_OFF");

    return v != NULL && v[0] != '\0' && atoi(v) == chip;
}

/* The progress thread of this chip, started with the first communicator that needs one
 * (g_lock held). */
static px_status comm_chip_progress(int chip, px_comm *c)
{
    px_status st = PX_OK;

    if (!c->progresses || comm_chip_progress_off(chip))
        return PX_OK;
    if (g_prog == NULL) {
        char name[16];

        snprintf(name, sizeof(name), "px-comm%d", chip);
        st = comm_progress_start(&(*g_bells)[chip], name, &g_prog);
    }
    return st == PX_OK ? comm_progress_add(g_prog, c) : st;
}

/* A kernel-side shrink lets c go (comm/shrink.c): the progress thread no longer carries out
 * its requests (the pairs' rings pass to the new communicator). */
static void comm_chip_retire(void *arg, px_comm *c)
{
    (void)arg;
    pthread_mutex_lock(&g_lock);
    if (c->progresses && g_prog != NULL)
        comm_progress_remove(g_prog, c);
    pthread_mutex_unlock(&g_lock);
}

/* ... and nc, made from c, is kept with the domain (arg: its entry) until it is freed. */
static px_status comm_chip_adopt(void *arg, px_comm *c, px_comm *nc)
{
    comm_chip_dom *d = arg;
    px_status st = PX_OK;

    (void)c;
    pthread_mutex_lock(&g_lock);
    if (d->ngens == d->capgens) {
        int cap = d->capgens ? 2 * d->capgens : 4;
        px_comm **g = realloc(d->gens, (size_t)cap * sizeof(*g));

        if (g == NULL)
            st = px_set_error(PX_ENOMEM, "px_comm_shrink: domain \"%s\": out of memory for "
                              "its communicators", nc->name);
        else
            d->gens = g, d->capgens = cap;
    }
    if (st == PX_OK && (st = comm_chip_progress(hier_chip_index(hier_chip_self()), nc)) == PX_OK)
        d->gens[d->ngens++] = nc;
    pthread_mutex_unlock(&g_lock);
    return st;
}

static const comm_shrink_ops comm_chip_shrink_ops = {.retire = comm_chip_retire,
                                                     .adopt = comm_chip_adopt};

/* The links of d's communicator (m->n of them), from the pair table as every member got it:
 * each peer's window, the pair's shared memory (a per_rank transport's: this rank's ring) and
 * the doorbell its requests ring. NULL (message set) when out of memory. */
static comm_link *comm_chip_links(const comm_chip_dom *d, const comm_create_msg *m,
                                  const char *what)
{
    comm_link *links = calloc((size_t)m->n, sizeof(*links));

    if (links == NULL) {
        px_set_error(PX_ENOMEM, "%s: comm.ready: out of memory for the links", what);
        return NULL;
    }
    for (int q = 0; q < m->n; q++) {
        const px_comm_tl *t = comm_tl_of(comm_desc_pairs(d->desc)[d->rank * m->n + q]);

        links[q].window = d->win[q];
        links[q].shared = t != NULL && t->per_rank && q != d->rank ? d->ring : d->shared[q];
        links[q].shared_bytes = t != NULL && t->per_rank && q != d->rank ? d->ring_len
                                                                         : d->shared_len[q];
        /* a proxied pair's requests go to the worker's MPI proxy, not to the peer */
        links[q].bell = t != NULL && t->proxied ? &(*g_bells)[COMM_BELL_PROXY]
                                                : &(*g_bells)[comm_desc_chips(d->desc)[q]];
    }
    return links;
}

/* Builds d's communicator over links with the pair table as every member got it: the
 * transports, and the collectives' choices. */
static px_status comm_chip_build(hier_chip *chip, comm_chip_dom *d, const comm_create_msg *m,
                                 const comm_link *links)
{
    px_comm_spec s = {.name = m->name, .id = m->id, .rank = d->rank, .n = m->n,
                      .data_bytes = m->data_bytes, .nsig = m->nsig,
                      .pairs = comm_desc_pairs(d->desc), .links = links,
                      .deaths = hier_chip_deaths(chip),
                      .rdeaths = comm_board_rdeaths(*g_bells),
                      .revoke = &comm_board_revokes(*g_bells)->word[m->revoke_slot],
                      .member = comm_desc_chips(d->desc), .timeout_s = m->timeout_s,
                      .spin_ns = m->spin_ns, .yield_ns = m->yield_ns,
                      .oneshot_max = m->oneshot_max, .buffers = m->buffers,
                      .nbuffers = m->nbuffers,
                      .agree = comm_board_agree(*g_bells, m->revoke_slot),
                      .shrink_ops = &comm_chip_shrink_ops, .shrink_arg = d};

    return comm_build(&d->comm, &s);
}

/* comm.ready: build the communicator over the pairs as they are mapped now. */
static px_status comm_chip_ready(hier_chip *chip, void *arg, const void *payload, size_t n,
                                 void *reply, size_t *reply_n)
{
    const comm_create_msg *m = payload;
    px_worker *eng = hier_chip_engine(chip);
    comm_link *links = NULL;
    comm_chip_dom *d;
    char what[64];
    px_status st = PX_OK;

    (void)arg, (void)reply;
    *reply_n = 0;
    if ((st = comm_chip_msg(chip, "comm.ready", n, payload, what, sizeof(what))) != PX_OK)
        return st;
    pthread_mutex_lock(&g_lock);
    if ((d = comm_chip_find(m->id)) == NULL || d->built || d->desc == NULL) {
        pthread_mutex_unlock(&g_lock);
        return px_set_error(PX_ESTATE, "%s: comm.ready %s", what,
                            d == NULL || d->desc == NULL ? "before comm.create" : "twice");
    }
    if ((links = comm_chip_links(d, m, what)) == NULL)
        st = PX_ENOMEM;
    if (st == PX_OK)
        st = comm_chip_build(chip, d, m, links);
    free(links);
    if (st == PX_OK && m->carry_id != 0)
        comm_chip_carry(d, m);
    /* Its own window's data is device memory of this chip: tasks may take tensors there. */
    if (st == PX_OK &&
        (st = px_rt_device_range_add(eng, d->comm.data[d->rank], m->data_bytes)) == PX_OK)
        d->engine = eng;
    if (st == PX_OK)
        st = comm_chip_progress(hier_chip_index(chip), &d->comm);
    if (st == PX_OK) {
        /* what the description said is in the communicator now */
        (void)px_plat_shm_free(comm_chip_dev(), d->desc, d->desc_len);
        d->desc = NULL;
        d->built = 1;
    } else {
        comm_chip_drop(d);
    }
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

px_status comm_chip_register(px_worker *w, int kinds[COMM_NKINDS], comm_bell **bells)
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
