/*
 * domain.c - communication domains as a level-3 orchestration sees them: the handles, the
 * layer's attachment to a worker, the checks of a spec, allocation, release and lifetime,
 * and the arguments that name a domain. The set-up on the chips is domain_setup.c, the tasks
 * on a domain domain_tasks.c, the built-in kernels domain_kernels.c, the dfx.json part
 * domain_dfx.c (domain_internal.h lists them).
 *
 * The parent never maps a window. It drives the chips through control calls (domain.h) and
 * describes each domain to its host engine's tensor map by an address range it reserves
 * (PROT_NONE, never touched): rank r's window data is vbase + r * window_bytes, so the tasks
 * on a domain's buffers get their dependencies from the same inference as every other task,
 * through accesses that are never sent to a chip (hier_submit_group_deps).
 *
 * Lifetime: a handle stays allocated until the worker is destroyed, so a use after release is
 * an error with a message rather than a use after free, and every handle is looked up in a
 * process-wide registry before it is read, so a use after px_worker_destroy is one too. The
 * chips' part goes once the domain's tasks have finished: a domain released inside a run is
 * forgotten on its members (comm.forget) at the release or at a later allocation or release
 * that finds its tasks finished (outside a run it is freed at once), a failed allocation is
 * forgotten at once, and the end of a run frees whatever is left (all of a failed run's).
 */
#include "comm/domain_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/dfx_hosts.h"
#include "comm/proxy.h"
#include "comm/select.h"
#include "dfx/collectors/out.h"
#include "dfx/emit.h"
#include "mpi/mpi_load.h"
#include "platform/platform.h"
#include "runtime/runtime.h"
#include "util/abi.h"
#include "util/fork.h"
#include "util/log.h"
#include "util/util.h"
#include "util/wait.h"

/*
 * The registry of handles: every handle px_domain_alloc made whose worker is not destroyed,
 * in a process-wide open-addressing set of addresses (COMM_TOMB marks a removed one). A handle
 * is looked up here before anything reads it, so one used after px_worker_destroy is refused
 * without touching freed memory.
 */
#define COMM_TOMB ((px_domain *)(uintptr_t)1)

static px_domain **g_handles;
static size_t g_hcap, g_hfill;   /* slots; slots used or tombs */
static pthread_mutex_t g_handles_lock = PTHREAD_MUTEX_INITIALIZER;

/* Chips' kernels look handles up too: the lock is held across plexus's forks. */
__attribute__((constructor)) static void comm_handles_guard(void)
{
    util_fork_guard(&g_handles_lock);
}

static size_t comm_handle_hash(const px_domain *d)
{
    uint64_t x = (uint64_t)(uintptr_t)d;

    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

/* The slot of d, or of the first free slot where d would go (g_handles_lock held). */
static size_t comm_handle_slot(const px_domain *d, int *found)
{
    size_t i = comm_handle_hash(d) & (g_hcap - 1), tomb = SIZE_MAX;

    for (;; i = (i + 1) & (g_hcap - 1)) {
        if (g_handles[i] == d) {
            *found = 1;
            return i;
        }
        if (g_handles[i] == COMM_TOMB && tomb == SIZE_MAX)
            tomb = i;
        if (g_handles[i] == NULL) {
            *found = 0;
            return tomb != SIZE_MAX ? tomb : i;
        }
    }
}

/* Adds d (PX_ENOMEM when the set cannot grow; message set). */
static px_status comm_handle_add(px_domain *d)
{
    px_status st = PX_OK;
    int found;

    pthread_mutex_lock(&g_handles_lock);
    if ((g_hfill + 1) * 2 > g_hcap) { /* grow (and drop the tombs): at most half full */
        size_t cap = g_hcap ? g_hcap * 2 : 64, old = g_hcap;
        px_domain **prev = g_handles, **next = calloc(cap, sizeof(*next));

        if (next == NULL) {
            st = px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory for the "
                              "registry of %zu handles", g_hfill);
        } else {
            g_handles = next;
            g_hcap = cap;
            g_hfill = 0;
            for (size_t i = 0; i < old; i++) {
                if (prev[i] != NULL && prev[i] != COMM_TOMB) {
                    g_handles[comm_handle_slot(prev[i], &found)] = prev[i];
                    g_hfill++;
                }
            }
            free(prev);
        }
    }
    if (st == PX_OK) {
        size_t i = comm_handle_slot(d, &found);

        if (!found) {
            g_hfill += g_handles[i] == NULL;
            g_handles[i] = d;
        }
    }
    pthread_mutex_unlock(&g_handles_lock);
    return st;
}

static void comm_handle_remove(const px_domain *d)
{
    int found = 0;
    size_t i;

    pthread_mutex_lock(&g_handles_lock);
    i = g_hcap ? comm_handle_slot(d, &found) : 0;
    if (found)
        g_handles[i] = COMM_TOMB;
    pthread_mutex_unlock(&g_handles_lock);
}

/* 1 when d is a handle px_domain_alloc made and its worker is not destroyed (d is not read). */
static int comm_handle_known(const px_domain *d)
{
    int found = 0;

    if (d == NULL)
        return 0;
    pthread_mutex_lock(&g_handles_lock);
    if (g_hcap)
        (void)comm_handle_slot(d, &found);
    pthread_mutex_unlock(&g_handles_lock);
    return found;
}

/* ---- attach, hooks ---- */

static void comm_free_domain(comm_worker *cw, px_domain *d, int chips_alive);
static void comm_domain_tables_free(px_domain *d);
static _Atomic uint32_t *comm_revoke_word(const px_domain *d);

/* The run_end hook: frees what the run released and its chips still hold, after a failed run
 * what it allocated, and the addresses of the domains forgotten during the run. */
static void comm_run_end(void *arg, px_status st)
{
    comm_worker *cw = arg;

    /* under MPI a failed run leaves the job failed: the proxy stops without waiting on the
     * other hosts again (short removals, no MPI_Finalize: mpirun ends the job) */
    if (st != PX_OK && cw->proxy != NULL)
        comm_proxy_fail_job(cw->proxy);

    for (px_domain *d = cw->doms; d != NULL; d = d->next) {
        if (d->state == COMM_RELEASED || (d->state == COMM_LIVE && st != PX_OK &&
                                          d->run == cw->run)) {
            if (d->state == COMM_LIVE)
                PX_LOG_INFO("comm[%s]: freed: the run that allocated it failed", d->msg.name);
            if (d->state == COMM_LIVE && d->from != NULL && d->from->shrunk) {
                /* the shrink's domain is gone with its run: the old one may be shrunk again */
                d->from->shrunk = 0;
                atomic_store_explicit(comm_revoke_word(d->from), COMM_REVOKED_ORCH,
                                      memory_order_release);
            }
            comm_free_domain(cw, d, 1);
        } else if (d->state == COMM_FREED && d->vbase != NULL) {
            comm_free_domain(cw, d, 0); /* forgotten in the run: its addresses now */
        }
        d->draining = 0;
        d->lost = 0;
        d->npend = 0; /* task ids start again with the next run */
    }
    cw->run++;
}

static void comm_destroy(void *arg)
{
    comm_worker *cw = arg;
    px_domain *d = cw->doms, *next;

    for (; d != NULL; d = next) {
        next = d->next;
        if (d->state != COMM_FREED)
            comm_free_domain(cw, d, 0); /* the chips are gone, and their windows with them */
        comm_handle_remove(d);
        d->magic = 0;
        free(d->pend);
        comm_domain_tables_free(d);
        free(d);
    }
    comm_proxy_stop(cw->proxy);
    cw->proxy = NULL;
    if (cw->bells != NULL)
        munmap(cw->bells, COMM_BOARD_BYTES);
    free(cw);
}

/* The init hook: the built-in tasks' kernels and callables, after the user's, through the
 * level-3 registry (ext.h) rather than the public API above it. */
static px_status comm_init(void *arg)
{
    comm_worker *cw = arg;

    /* the chips' doorbells, before the chips are forked (they inherit the mapping) */
    if (cw->bells == NULL) {
        void *b = mmap(NULL, COMM_BOARD_BYTES, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        if (b == MAP_FAILED)
            return px_set_error(PX_ENOMEM, "comm: cannot map the chips' doorbell board: %s",
                                strerror(errno));
        cw->bells = b;
    }
    /* MPI: decided and its plugin loaded before the fork; started after it (comm_started) */
    if (px_mpi_wanted(cw->w->cfg.comm_transport == PX_COMM_TL_MPI, cw->mpi_why,
                      sizeof(cw->mpi_why))) {
        const px_mpi_ops *ops;
        px_status st = px_mpi_load(&ops, NULL, 0);

        if (st != PX_OK)
            return st;
        if (ops->initialized() && px_mpi_state() != PX_MPI_STATE_NONE)
            return px_set_error(PX_ESTATE, "px_worker_init: MPI starts once per process, and "
                                "an earlier worker of this process ran under MPI (%s); Open MPI "
                                "supports neither a second MPI_Init nor fork after MPI_Init, so "
                                "a process has one level-3 worker under MPI: run everything on "
                                "the first worker, or start this one in a process of its own",
                                cw->mpi_why);
        if (ops->initialized())
            return px_set_error(PX_ESTATE, "px_worker_init: MPI is initialised in this process "
                                "already (%s): plexus forks its chips before MPI starts (Open "
                                "MPI does not support fork after MPI_Init) and its proxy "
                                "thread initialises MPI itself; create the level-3 worker "
                                "before MPI_Init and leave MPI to plexus (domains spanning "
                                "hosts talk over the mpi transport)", cw->mpi_why);
        cw->mpi_ops = ops;
        if ((st = comm_dfx_hosts_init(cw->w)) != PX_OK) /* DIR/hosts/host<h>: dfx_hosts.c */
            return st;
    }
    return comm_builtins_register(cw);
}

/* The started hook: the MPI proxy, now that the chips are forked. */
static px_status comm_started(void *arg)
{
    comm_worker *cw = arg;
    px_worker *w = cw->w;

    if (cw->mpi_ops == NULL)
        return PX_OK;
    return comm_proxy_start(cw->mpi_ops, &w->caps, w->cfg.comm_transport, hier_nchips(w),
                            &cw->bells[COMM_BELL_PROXY], hier_deaths_board(w),
                            comm_board_rdeaths(cw->bells), w->cfg.timeout_s, &cw->proxy);
}

/* The stopping hook: the proxy stops watching the deaths board before it is unmapped. */
static void comm_stopping(void *arg)
{
    comm_worker *cw = arg;

    if (cw->proxy != NULL)
        comm_proxy_unwatch(cw->proxy, cw->w->cfg.timeout_s);
}

/* The dfx_merged hook: under MPI, the hosts' outputs are gathered to host 0 (dfx_hosts.c). */
static px_status comm_dfx_merged(void *arg, const char *dir, px_status st)
{
    comm_worker *cw = arg;

    return cw->proxy != NULL ? comm_dfx_hosts_merged(cw->proxy, dir, st, cw->w->cfg.timeout_s)
                             : PX_OK;
}

static const hier_hooks comm_hooks = {.init = comm_init, .started = comm_started,
                                      .stopping = comm_stopping,
                                      .run_end = comm_run_end, .dfx_json = comm_dfx_json,
                                      .dfx_events = comm_dfx_events,
                                      .dfx_merged = comm_dfx_merged, .destroy = comm_destroy};

/* The comm state of level-3 worker w: its hooks' extension slot (no lock, no search beyond
 * the worker's few hook sets), or NULL. */
static comm_worker *comm_worker_of(px_worker *w)
{
    return hier_hooks_arg(w, &comm_hooks);
}

px_status comm_attach(px_worker *w)
{
    comm_worker *cw = calloc(1, sizeof(*cw));
    px_status st;

    if (cw == NULL)
        return px_set_error(PX_ENOMEM, "comm: out of memory for a worker's state");
    cw->w = w;
    cw->next_id = 1;
    st = comm_chip_register(w, cw->kinds, &cw->bells);
    if (st == PX_OK)
        st = hier_hooks_register(w, &comm_hooks, cw);
    if (st != PX_OK)
        free(cw);
    return st;
}

/* ---- checking a spec ---- */

/* sizes[v - 1]: the size of px_domain_spec version v (as config.c's config_sizes). */
static const uint32_t comm_spec_sizes[] = {sizeof(px_domain_spec)};

static const util_abi_type comm_spec_abi = {"px_domain_spec", "PX_DOMAIN_SPEC_INIT",
                                            comm_spec_sizes, PX_ARRAY_SIZE(comm_spec_sizes)};

/* Copies the caller's spec into *out as this library's (size and version checked; the
 * fields an older spec lacks are 0). Returns PX_OK or PX_EINVAL (message set). */
static px_status comm_spec_import(const px_domain_spec *spec, px_domain_spec *out)
{
    px_status st = util_abi_check(&comm_spec_abi, "px_domain_alloc", spec->size,
                                  spec->version);

    if (st != PX_OK)
        return st;
    memset(out, 0, sizeof(*out));
    memcpy(out, spec, spec->size);
    out->size = sizeof(*out);
    out->version = PX_DOMAIN_SPEC_VERSION;
    return PX_OK;
}

/* Checks a name of 1..31 characters; `what` names the field. */
static px_status comm_check_name(const char *name, const char *what)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n >= PX_DOMAIN_NAME_MAX)
        return px_set_error(PX_EINVAL, "px_domain_alloc: %s \"%s\" must have 1..%d characters",
                            what, name ? name : "(null)", PX_DOMAIN_NAME_MAX - 1);
    return PX_OK;
}

/*
 * The members of a spec naming global chips (px_chip_global): every one so, on a host of the
 * job, each once, every host with one at least (each host's part of the set-up and of every
 * collective is its members'). Fills *job with 1.
 */
static px_status comm_check_global(comm_worker *cw, const px_domain_spec *s, int *job)
{
    const comm_proxy *p = cw->proxy;
    int hosts = p != NULL ? comm_proxy_size(p) : 1, with = 0;
    unsigned char *have;
    px_status st = PX_OK;

    *job = 1;
    if (p == NULL)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[0] = %#x names a "
                            "chip of a host (px_chip_global), but this worker does not run "
                            "under MPI (%s); name this worker's chips 0..%d, or run under "
                            "mpirun", s->name, (unsigned)s->chips[0], cw->mpi_why,
                            hier_nchips(cw->w) - 1);
    if ((have = calloc((size_t)hosts, 1)) == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    for (int r = 0; r < s->nchips && st == PX_OK; r++) {
        int g = s->chips[r], h = (g & ~PX_CHIP_GLOBAL_BIT) >> 16, c = g & 0xFFFF;

        if (g < 0 || !(g & PX_CHIP_GLOBAL_BIT))
            st = px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[%d] = %d is "
                              "a chip of this worker while chips[0] names a host's chip "
                              "(px_chip_global): name every member one way", s->name, r, g);
        else if (h >= hosts || c >= comm_proxy_host(p, h)->chips)
            st = px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[%d] names chip "
                              "%d of host %d; the job has %d hosts%s", s->name, r, c, h, hosts,
                              h < hosts ? ", and that one fewer chips" : "");
        else if (!have[h]++)
            with++;
    }
    /* each chip once: a host's chips are < 64 (a worker's), so a mask per host (linear in n,
     * not the n^2 of comparing every pair at 1024 ranks) */
    if (st == PX_OK) {
        uint64_t *seen = calloc((size_t)hosts, sizeof(uint64_t));

        if (seen == NULL)
            st = px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
        for (int r = 0; st == PX_OK && r < s->nchips; r++) {
            int h = (s->chips[r] & ~PX_CHIP_GLOBAL_BIT) >> 16, c = s->chips[r] & 0xFFFF;

            if (c >= 64 || (seen[h] >> c & 1))
                st = c >= 64 ? px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chip "
                                            "%d of host %d: a host has at most 64 chips",
                                            s->name, c, h)
                             : px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chip "
                                            "%d of host %d appears twice in chips", s->name, c,
                                            h);
            else
                seen[h] |= 1ull << c;
        }
        free(seen);
    }
    free(have);
    if (st != PX_OK)
        return st;
    if (with < hosts)
        return px_set_error(PX_ENOTSUP, "px_domain_alloc: domain \"%s\": its members are chips "
                            "of %d of the job's %d hosts; a domain spanning hosts has members "
                            "on every host for now (each host's part of the set-up and of every "
                            "collective is its members')", s->name, with, hosts);
    return PX_OK;
}

/* Checks the members: chips of the worker (at most 64, a worker's), each once; or global
 * chips (comm_check_global); 1..PX_COMM_MAX_RANKS of them. */
static px_status comm_check_members(comm_worker *cw, const px_domain_spec *s, int *job)
{
    px_worker *w = cw->w;
    uint64_t seen = 0;
    int nchips = hier_nchips(w);

    *job = 0;
    if (s->chips == NULL || s->nchips < 1 || s->nchips > PX_COMM_MAX_RANKS)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": nchips %d (chips %s); a "
                            "domain has 1..%d member chips", s->name, s->nchips,
                            s->chips ? "set" : "NULL", PX_COMM_MAX_RANKS);
    if (s->chips[0] >= 0 && (s->chips[0] & PX_CHIP_GLOBAL_BIT))
        return comm_check_global(cw, s, job);
    for (int r = 0; r < s->nchips; r++) {
        int c = s->chips[r];

        if (c < 0 || c >= nchips)
            return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[%d] = %d is "
                                "not a chip of this worker (0..%d)", s->name, r, c, nchips - 1);
        if (seen >> c & 1)
            return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chip %d appears "
                                "twice in chips", s->name, c);
        seen |= 1ull << c;
    }
    return PX_OK;
}

/* Checks the buffers and lays them out into m. */
static px_status comm_layout(const px_domain_spec *s, comm_create_msg *m)
{
    size_t off = 0;

    if (s->window_bytes == 0)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": window_bytes is 0",
                            s->name);
    if (s->buffers == NULL || s->nbuffers < 1 || s->nbuffers > PX_DOMAIN_MAX_BUFFERS)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": nbuffers %d; give "
                            "1..%d buffers", s->name, s->nbuffers, PX_DOMAIN_MAX_BUFFERS);
    if (s->nsignals < 0 || s->nsignals > PX_COMM_MAX_SIGNALS)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": nsignals %d; use "
                            "0..%d", s->name, s->nsignals, PX_COMM_MAX_SIGNALS);
    for (int i = 0; i < s->nbuffers; i++) {
        const px_domain_buffer *b = &s->buffers[i];
        char what[48];
        px_status st;

        snprintf(what, sizeof(what), "buffers[%d].name", i);
        if ((st = comm_check_name(b->name, what)) != PX_OK)
            return st;
        for (int j = 0; j < i; j++)
            if (strcmp(s->buffers[j].name, b->name) == 0)
                return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": buffer name "
                                    "\"%s\" is used twice (buffers[%d] and [%d])", s->name,
                                    b->name, j, i);
        if (b->bytes == 0)
            return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": buffer \"%s\" has "
                                "0 bytes", s->name, b->name);
        off = px_align_up(off, 64);
        if (b->bytes > s->window_bytes || off > s->window_bytes - b->bytes)
            return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": buffer \"%s\" (%zu "
                                "bytes at offset %zu) does not fit in the window of %zu bytes; "
                                "raise window_bytes or shrink the buffers", s->name, b->name,
                                b->bytes, off, s->window_bytes);
        snprintf(m->buffers[i].name, sizeof(m->buffers[i].name), "%s", b->name);
        m->buffers[i].off = off;
        m->buffers[i].bytes = b->bytes;
        off += b->bytes;
    }
    m->nbuffers = s->nbuffers;
    m->nsig = (uint32_t)s->nsignals;
    m->data_bytes = s->window_bytes;
    return PX_OK;
}

/* ---- allocation ---- */

/* The index of reason why in d's table, added when new (-1: out of memory or full). Reasons
 * repeat over runs of pairs (every pair of two hosts has one), so the last is tried first. */
static int comm_why_index(px_domain *d, const char *why)
{
    if (d->nwhy > 0 && strncmp(d->whys[d->last_why], why, COMM_WHY_MAX - 1) == 0)
        return d->last_why;
    for (int i = 0; i < d->nwhy; i++)
        if (strncmp(d->whys[i], why, COMM_WHY_MAX - 1) == 0)
            return d->last_why = i;
    if (d->nwhy == UINT16_MAX + 1)
        return -1;
    if (d->nwhy == d->cwhy) {
        int c = d->cwhy ? 2 * d->cwhy : 16;
        char (*t)[COMM_WHY_MAX] = realloc(d->whys, (size_t)c * sizeof(*t));

        if (t == NULL)
            return -1;
        d->whys = t;
        d->cwhy = c;
    }
    /* the precision bounds the copy (a reason is cut at COMM_WHY_MAX - 1 bytes) */
    snprintf(d->whys[d->nwhy], COMM_WHY_MAX, "%.*s", COMM_WHY_MAX - 1, why);
    return d->last_why = d->nwhy++;
}

/* Sets the transport of ranks a and b (both directions) and why. */
px_status comm_pair_set(px_domain *d, int a, int b, int tl, const char *why)
{
    int n = d->msg.n, i = comm_why_index(d, why);

    if (i < 0)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory for the pairs' "
                            "reasons (%d distinct ones)", d->nwhy);
    d->tl[a * n + b] = d->tl[b * n + a] = (uint8_t)tl;
    d->why_of[a * n + b] = d->why_of[b * n + a] = (uint16_t)i;
    return PX_OK;
}

const char *comm_pair_why(const px_domain *d, int a, int b)
{
    if (d->why_of == NULL || d->whys == NULL)
        return "";
    return d->whys[d->why_of[a * d->msg.n + b]];
}

/* Asks every member to forget d (comm.free, ordered); with chips_alive 0 (destroy, or the
 * chips forgot it already) only the parent's part. A member that fails it (other than by
 * being dead: the dead hold nothing) is reported at warn with its answer. */
static void comm_free_domain(comm_worker *cw, px_domain *d, int chips_alive)
{
    comm_id_msg m = {.id = d->id};
    hier_call_result *res = chips_alive && d->nmem > 0 ? calloc((size_t)d->nmem, sizeof(*res))
                                                       : NULL;

    comm_proxied_drop(cw, d);
    if (res != NULL)
        (void)hier_call_run(cw->w, cw->kinds[COMM_KIND_FREE], &m, sizeof(m), d->mem, d->nmem,
                            0, res);
    for (int r = 0; res != NULL && r < d->nmem; r++)
        if (res[r].st != PX_OK && res[r].st != PX_EPEERDEAD)
            PX_LOG_WARN("comm[%s]: chip %d did not free the domain (%s): %.*s; its window "
                        "stays until the chip ends", d->msg.name, d->mem[r],
                        px_status_name(res[r].st), (int)sizeof(res[r].reply), res[r].reply);
    free(res);
    if (d->vbase != NULL)
        munmap(d->vbase, d->vbytes);
    d->vbase = NULL;
    d->state = COMM_FREED;
}

/*
 * Asks d's members to forget it at once (comm.forget, service route): only when no task can be
 * using it. Returns 1 when every member did (or is dead, and holds nothing any more); 0 leaves
 * d to comm.free at the end of the run. The current message is kept.
 */
static int comm_forget(comm_worker *cw, px_domain *d)
{
    char msg[PX_ERRMSG_MAX];
    comm_id_msg m = {.id = d->id};
    hier_call_result *res = calloc((size_t)(d->nmem > 0 ? d->nmem : 1), sizeof(*res));
    int ok = res != NULL;

    snprintf(msg, sizeof(msg), "%s", px_last_error());
    comm_proxied_drop(cw, d);
    if (res != NULL && d->nmem > 0)
        (void)hier_call_run(cw->w, cw->kinds[COMM_KIND_FORGET], &m, sizeof(m), d->mem,
                            d->nmem, 0, res);
    for (int r = 0; r < d->nmem && ok; r++)
        ok = res[r].st == PX_OK || res[r].st == PX_EPEERDEAD;
    if (!ok)
        PX_LOG_DEBUG("comm[%s]: a member did not forget it; freed at the end of the run",
                     d->msg.name);
    free(res);
    (void)px_set_error(PX_OK, "%s", msg);
    return ok;
}

/* After a failed allocation (why: its status, message set): the members that are alive
 * forget d at once, so no window, mapping or descriptor of it stays in a survivor; the
 * allocation's status and message are kept. */
static void comm_abort(comm_worker *cw, px_domain *d, px_status why)
{
    char msg[PX_ERRMSG_MAX];

    snprintf(msg, sizeof(msg), "%s", px_last_error());
    d->failed = 1;
    if (comm_forget(cw, d))
        comm_free_domain(cw, d, 0);
    else
        d->state = COMM_RELEASED;
    px_set_error(why, "%s", msg);
}

/* ---- the tasks of a domain, and forgetting released ones once they have finished ---- */

/* 1 when task id of the current run has finished (its slot holds it finished, or a later
 * task: a slot is reused only after its task finished). */
static int comm_task_done(px_worker *w, px_task_id id)
{
    const px_task *t = px_task_slot(w, id);

    return t->id != id || atomic_load_explicit(&t->state, memory_order_acquire) == PX_TASK_DONE;
}

/* Drops the finished tasks from d->pend; returns how many are left. */
static int comm_pend_prune(px_domain *d)
{
    int k = 0;

    for (int i = 0; i < d->npend; i++)
        if (!comm_task_done(d->cw->w, d->pend[i]))
            d->pend[k++] = d->pend[i];
    return d->npend = k;
}

/* Remembers task id as submitted on d; out of memory, d is marked lost (freed only at the
 * end of the run, as before anything was tracked). */
static void comm_pend_add(px_domain *d, px_task_id id)
{
    if (d->lost)
        return;
    if (d->npend == d->cap && comm_pend_prune(d) >= d->cap / 2) { /* grow when over half live */
        int cap = d->cap ? d->cap * 2 : 16;
        px_task_id *p = realloc(d->pend, (size_t)cap * sizeof(*p));

        if (p == NULL) {
            PX_LOG_DEBUG("comm[%s]: out of memory for task ids; freed at the end of the run",
                         d->msg.name);
            d->lost = 1;
            return;
        }
        d->pend = p;
        d->cap = cap;
    }
    d->pend[d->npend++] = id;
}

/* Submits a task on d through hier_submit_group_flags and remembers it; *id (when not NULL)
 * gets its id. */
px_status comm_submit_flags(px_orch *o, px_domain *d, px_callable_id c, px_task_args *a,
                            const int *chips, int n, const px_task_args *deps, unsigned flags,
                            px_task_id *id)
{
    px_task_id t = PX_TASK_NONE;
    px_status st = hier_submit_group_flags(o, c, a, chips, n, deps, flags, &t);

    if (st == PX_OK) {
        comm_pend_add(d, t);
        if (id != NULL)
            *id = t;
    }
    return st;
}

px_status comm_submit(px_orch *o, px_domain *d, px_callable_id c, px_task_args *a,
                      const int *chips, int n, const px_task_args *deps, px_task_id *id)
{
    return comm_submit_flags(o, d, c, a, chips, n, deps, 0, id);
}

/* 1 when a member chip of d (this worker's) is on the deaths board: a call of an earlier,
 * failed run may still run on d in a survivor (an orphan of a group the death failed), so
 * only comm.free, ordered behind it, may free d there. */
static int comm_member_dead(const comm_worker *cw, const px_domain *d)
{
    const hier_deaths *b = hier_deaths_board(cw->w);
    uint64_t mask = b != NULL ? atomic_load_explicit(&b->mask, memory_order_acquire) : 0;

    for (int q = 0; mask != 0 && q < d->nmem; q++)
        if (d->mem[q] >= 0 && d->mem[q] < HIER_DEATHS_MAX && (mask >> d->mem[q] & 1))
            return 1;
    return 0;
}

/*
 * Forgets on the chips every domain released in this run whose tasks have all finished, at
 * once (comm.forget), so its slots, windows and mappings go before the run ends; its reserved
 * addresses stay until then (a new domain at the same addresses would get edges to its
 * tasks). Nothing after a failure of the run: a failed group may leave member calls running;
 * nor for a domain with a dead member (such calls may be left from an earlier run).
 */
static void comm_sweep(comm_worker *cw)
{
    for (px_domain *d = cw->doms; d != NULL; d = d->next) {
        if (atomic_load_explicit(&cw->w->failed, memory_order_acquire))
            return;
        if (d->state == COMM_RELEASED && d->draining && !d->lost && comm_pend_prune(d) == 0 &&
            !comm_member_dead(cw, d) && comm_forget(cw, d)) {
            d->state = COMM_FREED;
            d->draining = 0;
        }
    }
}

/* Domains that chip holds now, as far as the parent knows: live, released but not forgotten. */
static int comm_chip_holds(const comm_worker *cw, int chip, int *draining)
{
    int n = 0;

    *draining = 0;
    for (const px_domain *e = cw->doms; e != NULL; e = e->next) {
        for (int q = 0; q < e->nmem; q++) {
            if (e->mem[q] != chip || e->state == COMM_FREED)
                continue;
            n++;
            *draining += e->state == COMM_RELEASED && e->draining;
        }
    }
    return n;
}

/* The first unfinished task of a draining domain on chip, or PX_TASK_NONE. */
static px_task_id comm_chip_pending(comm_worker *cw, int chip)
{
    for (px_domain *e = cw->doms; e != NULL; e = e->next)
        for (int q = 0; e->state == COMM_RELEASED && e->draining && q < e->nmem; q++)
            if (e->mem[q] == chip && comm_pend_prune(e) > 0)
                return e->pend[0];
    return PX_TASK_NONE;
}

static int comm_task_ready(void *arg)
{
    const px_task *t = arg;

    return atomic_load_explicit(&t->state, memory_order_acquire) == PX_TASK_DONE;
}

/*
 * Makes sure every member of spec has a free slot (a chip holds COMM_MAX_DOMAINS domains at
 * once: the live ones and the released ones whose tasks have not finished): while a member is
 * full of released domains, waits for their tasks (at most PLEXUS_TIMEOUT_S in all) and
 * forgets them. PX_ENOMEM naming the chip and the counts when it stays full.
 */
static px_status comm_slots_wait(comm_worker *cw, const px_domain_spec *s)
{
    px_worker *w = cw->w;
    uint64_t deadline = px_now_ns() + (uint64_t)(w->cfg.timeout_s * 1e9);

    int me = cw->proxy != NULL ? comm_proxy_rank(cw->proxy) : 0;

    comm_sweep(cw);
    for (int r = 0; r < s->nchips; r++) {
        int c = s->chips[r], draining, held;

        if (c & PX_CHIP_GLOBAL_BIT) { /* a host's chip: this worker's ones only */
            if (((c & ~PX_CHIP_GLOBAL_BIT) >> 16) != me)
                continue;
            c &= 0xFFFF;
        }

        while ((held = comm_chip_holds(cw, c, &draining)) >= COMM_MAX_DOMAINS && draining > 0 &&
               !atomic_load_explicit(&w->failed, memory_order_acquire) &&
               px_now_ns() < deadline) {
            px_task_id id = comm_chip_pending(cw, c);

            if (id != PX_TASK_NONE) {
                px_task *t = px_task_slot(w, id);
                util_wait uw = {.ready = comm_task_ready, .arg = t, .word = &t->state,
                                .sleeping = &t->waiters, .spin_ticks = w->spin_ticks,
                                .yield_ticks = w->yield_ticks, .deadline_ns = deadline};

                if (t->id == id)
                    (void)util_wait_run(&uw);
            }
            comm_sweep(cw);
            if (id == PX_TASK_NONE && comm_chip_holds(cw, c, &draining) == held)
                break; /* drained but not forgotten (a member did not answer) */
        }
        if (held >= COMM_MAX_DOMAINS)
            return px_set_error(PX_ENOMEM, "px_domain_alloc: domain \"%s\": chip %d holds %d "
                                "domains, at most %d per chip (%d of them released, %s); "
                                "release domains you no longer use", s->name, c, held,
                                COMM_MAX_DOMAINS, draining, draining == 0 ? "none" :
                                atomic_load(&w->failed) ? "not freed before the end of the "
                                "run: the run has failed" : "their tasks did not finish "
                                "within PLEXUS_TIMEOUT_S");
    }
    return PX_OK;
}

/* A revoke slot that no domain of cw still held by chips has (round robin from the last
 * one given), or -1 when all are taken. */
static int comm_revoke_slot(comm_worker *cw)
{
    uint8_t used[COMM_REVOKE_SLOTS];
    int start = cw->next_slot;

    memset(used, 0, sizeof(used));
    for (const px_domain *e = cw->doms; e != NULL; e = e->next)
        if (e->state != COMM_FREED)
            used[e->msg.revoke_slot] = 1;
    for (int i = 0; i < COMM_REVOKE_SLOTS; i++) {
        int s = (start + i) % COMM_REVOKE_SLOTS;

        if (!used[s]) {
            cw->next_slot = (s + 1) % COMM_REVOKE_SLOTS;
            return s;
        }
    }
    return -1;
}

/* Fills d from a checked spec; PX_OK or PX_ENOMEM. */
static px_status comm_fill(comm_worker *cw, px_domain *d, const px_domain_spec *s)
{
    px_worker *w = cw->w;
    int n = s->nchips;

    int job = s->chips[0] & PX_CHIP_GLOBAL_BIT, me = cw->proxy ? comm_proxy_rank(cw->proxy) : 0;

    if ((d->chips = calloc((size_t)n, sizeof(*d->chips))) == NULL ||
        (d->tl = calloc((size_t)n * (size_t)n, sizeof(*d->tl))) == NULL ||
        (d->mem = calloc((size_t)n, sizeof(int))) == NULL ||
        (d->mrank = calloc((size_t)n, sizeof(int))) == NULL ||
        (d->mpos = calloc((size_t)n, sizeof(int))) == NULL ||
        (job && (d->hosts = calloc((size_t)n, sizeof(int))) == NULL))
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory for %d ranks' "
                            "tables", n);

    d->magic = COMM_DOMAIN_MAGIC;
    d->id = cw->next_id++;
    d->cw = cw;
    d->run = cw->run;
    d->need_peer_ptr = s->need_peer_ptr;
    d->msg.id = d->id;
    d->msg.n = s->nchips;
    d->msg.timeout_s = w->cfg.comm_timeout_s;
    d->msg.oneshot_max = w->cfg.comm_oneshot_max;
    d->msg.spin_ns = w->cfg.spin_ns;
    d->forced_direct = w->cfg.comm_transport == PX_COMM_TL_DIRECT;
    d->msg.desc_bytes = comm_desc_bytes(n);
    d->msg.yield_ns = w->cfg.yield_ns;
    snprintf(d->msg.name, sizeof(d->msg.name), "%s", s->name);
    d->wire_id = job ? 0x80000000u | cw->next_job++ : d->id;
    if ((d->msg.revoke_slot = comm_revoke_slot(cw)) < 0)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: every one of the %d revoke slots is "
                            "held by a domain not freed yet; release domains you no longer use",
                            COMM_REVOKE_SLOTS);
    atomic_store_explicit(&comm_board_revokes(cw->bells)->word[d->msg.revoke_slot], 0,
                          memory_order_release);
    /* the kernel-side shrinks' row of the slot: no domain the chips hold uses it now */
    memset((void *)comm_board_agree(cw->bells, d->msg.revoke_slot), 0, sizeof(comm_agree_row));
    for (int r = 0; r < n; r++) {
        int c = s->chips[r], h = job ? (c & ~PX_CHIP_GLOBAL_BIT) >> 16 : me;

        d->chips[r] = job ? c & 0xFFFF : c;
        if (d->hosts != NULL)
            d->hosts[r] = h;
        d->mpos[r] = -1;
        if (h == me) {
            d->mpos[r] = d->nmem;
            d->mrank[d->nmem] = r;
            d->mem[d->nmem++] = d->chips[r];
        }
    }
    return PX_OK;
}

/* MemAvailable + SwapFree of /proc/meminfo in bytes (what the host can back now; the
 * numbers go into *avail and *swap), or 0 when it cannot be read. */
static uint64_t comm_host_backable(uint64_t *avail, uint64_t *swap)
{
    char line[128];
    unsigned long long v;
    FILE *f = fopen("/proc/meminfo", "r");

    *avail = *swap = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
            *avail = (uint64_t)v << 10;
        else if (sscanf(line, "SwapFree: %llu kB", &v) == 1)
            *swap = (uint64_t)v << 10;
    }
    fclose(f);
    return *avail + *swap;
}

/*
 * Refuses a domain whose memory on this host (every rank's window, head and slots included,
 * plus the staging memory of its staged pairs and one mpi ring per member with mpi peers) is
 * more than PLEXUS_COMM_MEM_MAX, or, with that 0 (the default), more than the host can back
 * now (MemAvailable + SwapFree): windows are backed on first touch, and a window the host
 * cannot back would fail there (SIGBUS in a chip), not here.
 */
static px_status comm_check_memory(px_worker *w, const px_domain *d)
{
    uint64_t win = px_comm_window_bytes(d->msg.n, d->msg.nsig, d->msg.data_bytes), need;
    uint64_t avail, swap, limit = w->cfg.comm_mem_max, stage = 0;
    int pairs = 0, n = d->msg.n;
    unsigned char *ringed = calloc((size_t)n, 1); /* rank: its per_rank memory counted */

    if (ringed == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            const px_comm_tl *t = comm_tl_of(d->tl[a * n + b]);
            size_t bytes = t->prepare != NULL ? t->prepare(n) : 0;

            if (d->mpos[a] < 0 && d->mpos[b] < 0)
                continue; /* another host's pair */
            pairs += bytes > 0;
            if (!t->per_rank) {
                stage += bytes;
                continue;
            }
            /* mpi: one ring per member of this host, whatever its peers */
            for (int k = 0; k < 2; k++) {
                int r = k == 0 ? a : b;

                if (d->mpos[r] >= 0 && !ringed[r]) {
                    ringed[r] = 1;
                    stage += bytes;
                }
            }
        }
    }
    free(ringed);
    /* this host's part: its members' windows and its pairs' memory */
    if (__builtin_mul_overflow(win, (uint64_t)d->nmem, &need) ||
        __builtin_add_overflow(need, stage, &need))
        need = UINT64_MAX;
    if (limit != 0) {
        if (need <= limit)
            return PX_OK;
        return px_set_error(PX_ENOMEM, "px_domain_alloc: domain \"%s\": %d windows of %llu "
                            "bytes (%llu with head and slots)%s need %llu bytes of host memory, "
                            "more than PLEXUS_COMM_MEM_MAX (%llu); lower window_bytes or the "
                            "ranks, or raise PLEXUS_COMM_MEM_MAX", d->msg.name, d->nmem,
                            (unsigned long long)d->msg.data_bytes, (unsigned long long)win,
                            pairs ? " and their staging memory" : "",
                            (unsigned long long)need, (unsigned long long)limit);
    }
    limit = comm_host_backable(&avail, &swap);
    if (limit == 0 || need <= limit)
        return PX_OK; /* no /proc/meminfo: nothing to check against */
    return px_set_error(PX_ENOMEM, "px_domain_alloc: domain \"%s\": %d windows of %llu bytes "
                        "(%llu with head and slots)%s need %llu bytes of host memory; this "
                        "host can back %llu now (MemAvailable %llu + SwapFree %llu, "
                        "/proc/meminfo), and a window is backed when first touched: lower "
                        "window_bytes or the ranks, free memory, or set PLEXUS_COMM_MEM_MAX "
                        "to the bytes to allow if the windows will stay mostly untouched",
                        d->msg.name, d->nmem, (unsigned long long)d->msg.data_bytes,
                        (unsigned long long)win, pairs ? " and their staging memory" : "",
                        (unsigned long long)need, (unsigned long long)limit,
                        (unsigned long long)avail, (unsigned long long)swap);
}

/* Logs the domain, then each pair's choice once, in the shape every run-time choice has; past
 * COMM_LOG_PAIRS ranks each distinct choice once, with its count of pairs (a domain of 1024
 * ranks has half a million pairs). */
#define COMM_LOG_PAIRS 64
static void comm_log_choice(const px_domain *d)
{
    int n = d->msg.n, *first = NULL;
    size_t cap = (size_t)n * 12 + 1, len = 0;
    long long *count = NULL;
    char *chips;

    if (px_log_level_g < PX_LOG_INFO || (chips = malloc(cap)) == NULL)
        return;
    chips[0] = '\0';
    for (int r = 0; r < n && len < cap; r++)
        len += d->hosts != NULL
                   ? (size_t)snprintf(chips + len, cap - len, "%s%d:%d", r ? "," : "",
                                      d->hosts[r], d->chips[r])
                   : (size_t)snprintf(chips + len, cap - len, "%s%d", r ? "," : "",
                                      d->chips[r]);
    PX_LOG_INFO("comm[%s]: %d ranks (chips %s), window %llu bytes, %u signals", d->msg.name,
                n, chips, (unsigned long long)d->msg.data_bytes, d->msg.nsig);
    free(chips);
    if (n <= COMM_LOG_PAIRS) {
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                PX_LOG_INFO("comm[%s]: rank %d -> rank %d via %s (%s)", d->msg.name, a, b,
                            comm_tl_name(d->tl[a * n + b]), comm_pair_why(d, a, b));
        return;
    }
    if ((count = calloc((size_t)d->nwhy, sizeof(*count))) == NULL ||
        (first = calloc((size_t)d->nwhy, sizeof(*first))) == NULL) {
        free(count);
        return;
    }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            int w = d->why_of[a * n + b];

            if (count[w]++ == 0)
                first[w] = a * n + b;
        }
    for (int w = 0; w < d->nwhy; w++)
        if (count[w] > 0)
            PX_LOG_INFO("comm[%s]: %lld pairs via %s (%s), the first rank %d -> rank %d",
                        d->msg.name, count[w], comm_tl_name(d->tl[first[w]]), d->whys[w],
                        first[w] / n, first[w] % n);
    free(count);
    free(first);
}

static void comm_domain_tables_free(px_domain *d)
{
    free(d->why_of);
    free(d->whys);
    free(d->chips);
    free(d->tl);
    free(d->hosts);
    free(d->mem);
    free(d->mrank);
    free(d->mpos);
}

/* What every host says of a domain spanning hosts before it makes its part. */
typedef struct comm_job_rec {
    uint32_t magic;
    uint32_t wire_id;
    uint64_t hash;       /* the spec's (comm_spec_hash) */
    int32_t forced;      /* PLEXUS_COMM_TRANSPORT */
    int32_t st;          /* PX_OK, or why this host cannot make its part */
    char msg[200];
} comm_job_rec;

/* FNV-1a over the spec's fields that every host must give alike. */
static uint64_t comm_spec_hash(const px_domain_spec *s)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p;

#define COMM_HASH(ptr, len)                                                                \
    for (p = (const unsigned char *)(ptr); p < (const unsigned char *)(ptr) + (len); p++) \
        h = (h ^ *p) * 1099511628211ull
    COMM_HASH(s->name, strlen(s->name) + 1);
    COMM_HASH(&s->nchips, sizeof(s->nchips));
    COMM_HASH(s->chips, (size_t)s->nchips * sizeof(int));
    COMM_HASH(&s->window_bytes, sizeof(s->window_bytes));
    COMM_HASH(&s->nsignals, sizeof(s->nsignals));
    COMM_HASH(&s->need_peer_ptr, sizeof(s->need_peer_ptr));
    for (int i = 0; i < s->nbuffers; i++) {
        COMM_HASH(s->buffers[i].name, strlen(s->buffers[i].name) + 1);
        COMM_HASH(&s->buffers[i].bytes, sizeof(s->buffers[i].bytes));
    }
#undef COMM_HASH
    return h;
}

/*
 * Every host says the same domain, under the same rule, before any makes its part: one
 * allgather through the proxies of (job id, the spec's hash, PLEXUS_COMM_TRANSPORT).
 * PX_EINVAL naming the first host that differs.
 */
px_status comm_job_sync(comm_worker *cw, px_domain *d, uint64_t hash, px_status local)
{
    comm_proxy *p = cw->proxy;
    int hosts = comm_proxy_size(p);
    comm_job_rec me = {.magic = COMM_DOMAIN_MAGIC, .wire_id = d->wire_id, .hash = hash,
                       .forced = cw->w->cfg.comm_transport, .st = local}, *all;
    px_status st;
    char mine[PX_ERRMSG_MAX];

    snprintf(mine, sizeof(mine), "%s", px_last_error());
    if (local != PX_OK)
        snprintf(me.msg, sizeof(me.msg), "%.199s", mine);
    if ((all = calloc((size_t)hosts, sizeof(*all))) == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    st = comm_proxy_allgather(p, &me, sizeof(me), all, cw->w->cfg.timeout_s);
    if (st == PX_OK && local != PX_OK) {
        free(all);
        return px_set_error(local, "%s", mine); /* this host's own reason first */
    }
    for (int h = 0; st == PX_OK && h < hosts; h++) {
        const comm_job_rec *r = &all[h];

        if (r->magic == me.magic && r->st != PX_OK)
            st = px_set_error(r->st == PX_EPEERDEAD || r->st == PX_ENOMEM ||
                              r->st == PX_ENOTSUP ? r->st : PX_EIO, "host %d could not make "
                              "its part (%s): %.*s", h, px_status_name(r->st),
                              (int)sizeof(r->msg), r->msg);
        else if (r->magic != me.magic || r->wire_id != me.wire_id || r->hash != me.hash)
            st = px_set_error(PX_EINVAL, "host %d allocates another domain at this point (its "
                              "spanning domain number %u, spec hash %016llx; here %u, "
                              "%016llx): every host allocates the domains spanning hosts with "
                              "the same specs, in the same order", h,
                              r->wire_id & 0x7FFFFFFFu, (unsigned long long)r->hash,
                              me.wire_id & 0x7FFFFFFFu, (unsigned long long)me.hash);
        else if (r->forced != me.forced)
            st = px_set_error(PX_EINVAL, "host %d has PLEXUS_COMM_TRANSPORT=%s, this one %s: "
                              "the hosts must apply one rule (set it alike everywhere, e.g. "
                              "mpirun -x PLEXUS_COMM_TRANSPORT)", h,
                              r->forced == 0 ? "auto" : comm_tl_name(r->forced),
                              me.forced == 0 ? "auto" : comm_tl_name(me.forced));
    }
    free(all);
    if (st != PX_OK) {
        char msg[PX_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", px_last_error());
        px_set_error(st, "px_domain_alloc: domain \"%s\": %s", d->msg.name, msg);
    }
    return st;
}

static px_status comm_job_agree(comm_worker *cw, px_domain *d, const px_domain_spec *s,
                                px_status local)
{
    d->hash = comm_spec_hash(s);
    return comm_job_sync(cw, d, d->hash, local);
}

int px_chip_global(int host, int chip)
{
    if (host < 0 || host >= PX_CHIP_HOSTS_MAX || chip < 0 || chip >= PX_CHIP_HOST_CHIPS)
        return -1;
    return PX_CHIP_GLOBAL_BIT | host << 16 | chip;
}

int px_worker_hosts(px_worker *w)
{
    comm_worker *cw = w != NULL ? comm_worker_of(w) : NULL;

    return cw != NULL && cw->proxy != NULL ? comm_proxy_size(cw->proxy) : 1;
}

int px_worker_host(px_worker *w)
{
    comm_worker *cw = w != NULL ? comm_worker_of(w) : NULL;

    return cw != NULL && cw->proxy != NULL ? comm_proxy_rank(cw->proxy) : 0;
}

/* px_domain_alloc, and px_domain_shrink's new domain: carry is the old domain whose window
 * bytes the members copy (NULL: none), which the live-name check passes over. */
static px_status comm_alloc(px_orch *o, const px_domain_spec *spec, const px_domain *carry,
                            px_domain **out)
{
    px_domain_spec spec_in;
    px_worker *w;
    comm_worker *cw;
    px_domain *d;
    px_status st;
    size_t vbytes;
    int job = 0;

    if (spec == NULL || out == NULL)
        return px_set_error(PX_EINVAL, "px_domain_alloc: spec and output are required");
    if ((st = comm_spec_import(spec, &spec_in)) != PX_OK)
        return st;
    spec = &spec_in;
    if ((st = hier_orch_worker(o, "px_domain_alloc", &w)) != PX_OK)
        return st;
    if ((cw = comm_worker_of(w)) == NULL)
        return px_set_error(PX_ESTATE, "px_domain_alloc: this worker has no communication "
                            "state (it was created without level 3)");
    if ((st = comm_check_name(spec->name, "name")) != PX_OK ||
        (st = comm_check_members(cw, spec, &job)) != PX_OK)
        return st;
    for (px_domain *e = cw->doms; e != NULL; e = e->next)
        if (e->state == COMM_LIVE && e != carry && strcmp(e->msg.name, spec->name) == 0)
            return px_set_error(PX_EINVAL, "px_domain_alloc: a live domain is called \"%s\" "
                                "already; release it or choose another name", spec->name);
    if ((st = comm_slots_wait(cw, spec)) != PX_OK)
        return st;
    if ((d = calloc(1, sizeof(*d))) == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    if ((st = comm_layout(spec, &d->msg)) != PX_OK)
        goto out_free;
    if ((st = comm_fill(cw, d, spec)) != PX_OK)
        goto out_free;
    if (carry != NULL) {
        d->msg.carry_id = carry->id;
        d->generation = carry->generation + 1;
    }
    if ((st = comm_select(w, d)) == PX_OK)
        st = comm_check_memory(w, d);
    /* a domain spanning hosts: every host agrees on it (and hears why one cannot make its
     * part) before any makes its part */
    if (d->hosts != NULL)
        st = comm_job_agree(cw, d, spec, st);
    if (st != PX_OK)
        goto out_free;
    if (__builtin_mul_overflow(spec->window_bytes, (size_t)spec->nchips, &vbytes)) {
        st = px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": %d windows of %zu bytes "
                          "overflow the address space", spec->name, spec->nchips,
                          spec->window_bytes);
        goto out_free;
    }
    d->vbase = mmap(NULL, vbytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d->vbase == MAP_FAILED) {
        d->vbase = NULL;
        st = px_set_error(PX_ENOMEM, "px_domain_alloc: domain \"%s\": cannot reserve %zu bytes "
                          "of addresses: %s", spec->name, vbytes, strerror(errno));
        goto out_free;
    }
    d->vbytes = vbytes;
    if ((st = comm_handle_add(d)) != PX_OK)
        goto out_free;
    d->next = cw->doms;
    cw->doms = d;
    if ((st = comm_make(cw, d)) != PX_OK) {
        comm_abort(cw, d, st); /* the handle is not given out */
        return st;
    }
    d->state = COMM_LIVE;
    comm_log_choice(d);
    *out = d;
    return PX_OK;

out_free:
    if (d->vbase != NULL)
        munmap(d->vbase, d->vbytes);
    comm_domain_tables_free(d);
    free(d);
    return st;
}

px_status px_domain_alloc(px_orch *o, const px_domain_spec *spec, px_domain **out)
{
    return comm_alloc(o, spec, NULL, out);
}

/* ---- handles ---- */

/* PX_OK when d is a live domain handle (revoked or shrunk or not). */
static px_status comm_check_handle(const px_domain *d, const char *what)
{
    if (!comm_handle_known(d) || d->magic != COMM_DOMAIN_MAGIC)
        return px_set_error(PX_EINVAL, "%s: not a domain handle (NULL, never made by "
                            "px_domain_alloc, or freed with its worker by px_worker_destroy)",
                            what);
    if (d->state != COMM_LIVE)
        return px_set_error(PX_ESTATE, "%s: domain \"%s\" was %s; allocate a new one", what,
                            d->msg.name, d->state == COMM_RELEASED ? "released" :
                            "freed (released, or its run failed)");
    return PX_OK;
}

/* d's word of the revocation table. */
static _Atomic uint32_t *comm_revoke_word(const px_domain *d)
{
    return &comm_board_revokes(d->cw->bells)->word[d->msg.revoke_slot];
}

/* PX_OK when d is a live domain that is neither revoked nor shrunk. */
px_status comm_check_domain(const px_domain *d, const char *what)
{
    px_status st = comm_check_handle(d, what);
    uint32_t who;

    if (st != PX_OK)
        return st;
    if (d->shrunk)
        return px_set_error(PX_EREVOKED, "%s: domain \"%s\" (generation %d) was shrunk into "
                            "a new domain: use the one px_domain_shrink returned; this one can "
                            "only be released", what, d->msg.name, d->generation);
    if ((who = atomic_load_explicit(comm_revoke_word(d), memory_order_acquire)) != 0) {
        char by[40];

        if (who == COMM_REVOKED_ORCH)
            snprintf(by, sizeof(by), "the orchestration");
        else
            snprintf(by, sizeof(by), "rank %u's kernel", who - COMM_REVOKED_RANK);
        return px_set_error(PX_EREVOKED, "%s: domain \"%s\" was revoked by %s: shrink it "
                            "(px_domain_shrink) to go on with the survivors, or release it",
                            what, d->msg.name, by);
    }
    return PX_OK;
}

px_status px_domain_release(px_domain *d)
{
    px_status st = comm_check_handle(d, "px_domain_release");

    if (st != PX_OK)
        return st;
    d->state = COMM_RELEASED;
    if (!d->cw->w->running) {
        comm_free_domain(d->cw, d, 1); /* no run can be using it */
    } else {
        d->draining = 1;
        if (px_rt_orch_here != NULL && px_rt_orch_here->w == d->cw->w)
            comm_sweep(d->cw); /* from the orchestration (not a host task's thread) */
    }
    return PX_OK;
}

/* Revokes d in the orchestration's name (the first revoker's word stays), and every
 * communicator its members' kernel-side shrinks made from it. Returns 1 when d was not
 * revoked before. */
static int comm_revoke_orch(px_domain *d)
{
    uint32_t zero = 0;
    int first = atomic_compare_exchange_strong_explicit(comm_revoke_word(d), &zero,
                                                        COMM_REVOKED_ORCH, memory_order_acq_rel,
                                                        memory_order_acquire);

    atomic_store_explicit(&comm_board_agree(d->cw->bells, d->msg.revoke_slot)->orch, 1,
                          memory_order_release);
    return first;
}

px_status px_domain_revoke(px_domain *d)
{
    px_status st = comm_check_handle(d, "px_domain_revoke");

    if (st != PX_OK)
        return st;
    if (d->hosts != NULL)
        return px_set_error(PX_ENOTSUP, "px_domain_revoke: domain \"%s\" spans hosts: revoke "
                            "and shrink work inside one host for now (the revocation table is "
                            "this worker's memory; the other hosts' proxies would have to carry "
                            "it); end the run instead", d->msg.name);
    d->dfx_revoke_t = px_dfx_now();
    d->dfx_revoke_first = comm_revoke_orch(d);
    d->dfx_revoke_run = d->cw->run + 1;
    PX_LOG_INFO("comm[%s]: revoked by the orchestration", d->msg.name);
    return PX_OK;
}

/* Waits until every task submitted on d in this run has finished, until deadline (ns).
 * PX_OK or PX_ETIMEDOUT (message naming the first task left). */
static px_status comm_pend_wait(px_domain *d, uint64_t deadline)
{
    px_worker *w = d->cw->w;

    while (!d->lost && comm_pend_prune(d) > 0) {
        px_task_id id = d->pend[0];
        px_task *t = px_task_slot(w, id);
        util_wait uw = {.ready = comm_task_ready, .arg = t, .word = &t->state,
                        .sleeping = &t->waiters, .spin_ticks = w->spin_ticks,
                        .yield_ticks = w->yield_ticks, .deadline_ns = deadline};

        if (t->id == id && util_wait_run(&uw) != PX_OK && !comm_task_done(w, id))
            return px_set_error(PX_ETIMEDOUT, "px_domain_shrink: domain \"%s\": task %llu "
                                "on it did not finish within PLEXUS_TIMEOUT_S (%g s) after "
                                "the domain was revoked: a kernel that does not return; fix "
                                "it or raise PLEXUS_TIMEOUT_S", d->msg.name,
                                (unsigned long long)id, w->cfg.timeout_s);
    }
    return PX_OK;
}

/* The members of d that the deaths board shows dead (one snapshot of its word): their old
 * ranks into ex (returns how many) and the survivors' chips into keep (*nkeep). */
static int comm_agree_excluded(const px_domain *d, const hier_deaths *b, int *ex, int *keep,
                               int *nkeep)
{
    uint64_t mask = b != NULL ? atomic_load_explicit(&b->mask, memory_order_acquire) : 0;
    int nex = 0;

    *nkeep = 0;
    for (int r = 0; r < d->msg.n; r++) {
        int c = d->chips[r];

        if (c >= 0 && c < HIER_DEATHS_MAX && (mask >> c & 1))
            ex[nex++] = r;
        else
            keep[(*nkeep)++] = c;
    }
    return nex;
}

/* 1 when a chip of keep (n) is on the deaths board now. */
static int comm_any_died(const hier_deaths *b, const int *keep, int n, int *chip)
{
    uint64_t mask = b != NULL ? atomic_load_explicit(&b->mask, memory_order_acquire) : 0;

    for (int i = 0; i < n; i++)
        if (keep[i] >= 0 && keep[i] < HIER_DEATHS_MAX && (mask >> keep[i] & 1))
            return *chip = keep[i], 1;
    return 0;
}

/* Logs the agreement: who was excluded and why (the board's words), once, at warn. */
static void comm_log_shrink(const px_domain *d, const hier_deaths *b, const int *ex, int nex,
                            int survivors)
{
    for (int i = 0; i < nex; i++)
        PX_LOG_WARN("comm[%s]: shrink: rank %d (chip %d) excluded: %s", d->msg.name, ex[i],
                    d->chips[ex[i]], b->why[d->chips[ex[i]]]);
    PX_LOG_INFO("comm[%s]: shrink: %d survivors agreed, generation %d -> %d", d->msg.name,
                survivors, d->generation, d->generation + 1);
}

px_status px_domain_shrink(px_orch *o, px_domain *d, px_domain **out)
{
    px_domain_buffer bufs[PX_COMM_MAX_BUFFERS];
    int ex[PX_COMM_MAX_RANKS], keep[PX_COMM_MAX_RANKS], nkeep, nex, died;
    px_domain_spec s = PX_DOMAIN_SPEC_INIT;
    const hier_deaths *b;
    uint64_t t0 = px_now_ns(), deadline, dt[4] = {px_dfx_now()};
    int first;
    px_domain *nd = NULL;
    char what[PX_COMM_NAME_MAX + 32];
    px_worker *w;
    px_status st;

    if (out == NULL)
        return px_set_error(PX_EINVAL, "px_domain_shrink: the output is NULL");
    if ((st = comm_check_handle(d, "px_domain_shrink")) != PX_OK ||
        (st = hier_orch_worker(o, "px_domain_shrink", &w)) != PX_OK)
        return st;
    if (d->cw->w != w)
        return px_set_error(PX_EINVAL, "px_domain_shrink: domain \"%s\" belongs to another "
                            "worker", d->msg.name);
    if (d->shrunk)
        return px_set_error(PX_ESTATE, "px_domain_shrink: domain \"%s\" (generation %d) was "
                            "shrunk already: shrink the domain that shrink returned",
                            d->msg.name, d->generation);
    if (d->hosts != NULL)
        return px_set_error(PX_ENOTSUP, "px_domain_shrink: domain \"%s\" spans hosts: shrink "
                            "works inside one host for now (the survivors of several hosts "
                            "would have to agree through the MPI proxies); end the run and "
                            "allocate a new domain of the survivors instead", d->msg.name);
    /* revoke first: what still runs on d fails at once, and nothing new starts on it */
    first = comm_revoke_orch(d);
    deadline = t0 + (uint64_t)(w->cfg.timeout_s * 1e9);
    snprintf(what, sizeof(what), "px_domain_shrink: domain \"%s\"", d->msg.name);
    /* then wait for what still runs: the tasks on d of this run, and the orphans on its
     * members (the calls of a group task that a death failed, in this run or in the failed
     * one before it), which no task waits for. Only then may the new domain's carry
     * (comm_chip_carry) read d's windows: each orphan's completion has reached us before
     * we post comm.create, so on each chip its kernel's writes come before the carry. */
    if ((st = comm_pend_wait(d, deadline)) != PX_OK ||
        (st = hier_orphans_wait(w, d->chips, d->msg.n, deadline, what)) != PX_OK)
        return st;
    b = hier_deaths_board(w);
    nex = comm_agree_excluded(d, b, ex, keep, &nkeep);
    dt[1] = px_dfx_now();
    if (nkeep == 0)
        return px_set_error(PX_EINVAL, "px_domain_shrink: domain \"%s\": every one of its %d "
                            "members is dead; nothing to shrink to", d->msg.name, d->msg.n);
    for (int i = 0; i < d->msg.nbuffers; i++)
        bufs[i] = (px_domain_buffer){d->msg.buffers[i].name, d->msg.buffers[i].bytes};
    s.name = d->msg.name;
    s.chips = keep;
    s.nchips = nkeep;
    s.window_bytes = d->msg.data_bytes;
    s.buffers = bufs;
    s.nbuffers = d->msg.nbuffers;
    s.nsignals = (int)d->msg.nsig;
    s.need_peer_ptr = d->need_peer_ptr;
    if ((st = comm_alloc(o, &s, d, &nd)) != PX_OK)
        return st; /* a member that died during it: PX_EPEERDEAD, message naming it */
    if (comm_any_died(b, keep, nkeep, &died)) { /* died after its part: the agreement is off */
        (void)px_domain_release(nd);
        return px_set_error(PX_EPEERDEAD, "px_domain_shrink: domain \"%s\": chip %d died "
                            "during the shrink (%s); the survivors did not agree: call "
                            "px_domain_shrink again", d->msg.name, died, b->why[died]);
    }
    dt[2] = px_dfx_now();
    comm_log_shrink(d, b, ex, nex, nkeep);
    nd->nexcluded = nex;
    memcpy(nd->excluded, ex, (size_t)nex * sizeof(int));
    nd->shrink_us = (double)(px_now_ns() - t0) / 1e3;
    nd->from = d;
    dt[3] = px_dfx_now();
    memcpy(nd->dfx_t, dt, sizeof(dt));
    nd->dfx_first = first;
    nd->dfx_shrink_run = nd->cw->run + 1;
    atomic_store_explicit(comm_revoke_word(d), COMM_REVOKED_SHRUNK, memory_order_release);
    d->shrunk = 1;
    *out = nd;
    return PX_OK;
}

int px_domain_chip(const px_domain *d, int rank)
{
    if (!comm_handle_known(d) || rank < 0 || rank >= d->msg.n)
        return -1;
    return d->hosts != NULL ? px_chip_global(d->hosts[rank], d->chips[rank]) : d->chips[rank];
}

int px_domain_generation(const px_domain *d)
{
    return comm_handle_known(d) ? d->generation : -1;
}

int px_domain_size(const px_domain *d)
{
    return comm_handle_known(d) ? d->msg.n : -1;
}

const char *px_domain_name(const px_domain *d)
{
    return comm_handle_known(d) ? d->msg.name : "";
}

const char *px_domain_transport(const px_domain *d, int a, int b)
{
    if (!comm_handle_known(d) || a < 0 || b < 0 || a >= d->msg.n || b >= d->msg.n)
        return NULL;
    return comm_tl_name(d->tl[a * d->msg.n + b]);
}

const char *px_domain_transport_reason(const px_domain *d, int a, int b)
{
    if (!comm_handle_known(d) || a < 0 || b < 0 || a >= d->msg.n || b >= d->msg.n ||
        d->why_of == NULL)
        return NULL;
    return comm_pair_why(d, a, b);
}

px_status px_args_domain(px_task_args *a, const px_domain *d)
{
    px_status st = comm_check_domain(d, "px_args_domain");

    if (st == PX_OK && a == NULL)
        st = px_set_error(PX_EINVAL, "px_args_domain: args is NULL");
    if (st == PX_OK)
        px_args_scalar_u64(a, comm_arg_encode(d->id));
    return st;
}

