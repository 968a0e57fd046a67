/*
 * domain.c - communication domains as a level-3 orchestration sees them: the registry of
 * handles, the checks of a handle, release, and the calls that read a domain or name it in a
 * task's arguments. The other rooms of the parent's side are files of their own
 * (domain_internal.h lists them): the worker's attachment and hooks domain_attach.c, the
 * checks of a spec domain_check.c, allocation and the pair tables domain_alloc.c, the tasks
 * submitted on a domain domain_pend.c, the agreement of the hosts on a domain spanning them
 * domain_agree.c, revoke and shrink domain_shrink.c; the set-up on the chips domain_setup.c,
 * the tasks on a domain domain_tasks.c, the built-in kernels domain_kernels.c, the dfx.json
 * part domain_dfx.c.
 *
 * The parent's own view of the windows: for the tasks, it describes each domain to its host
 * engine's tensor map by an address range it reserves (PROT_NONE, never touched): rank r's
 * window data is vbase + r * window_bytes, so the tasks on a domain's buffers get their
 * dependencies from the same inference as every other task, through accesses that are never
 * sent to a chip (hier_submit_group_deps). It drives the chips through control calls
 * (domain.h), and maps the members' windows itself only for the MPI proxy, which serves the
 * proxied pairs from them (domain_setup.c, comm_proxied_drop unmaps them).
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

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/runtime.h"
#include "util/fork.h"
#include "util/util.h"

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
px_status comm_handle_add(px_domain *d)
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

void comm_handle_remove(const px_domain *d)
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
int comm_handle_known(const px_domain *d)
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

/* PX_OK when d is a live domain handle (revoked or shrunk or not). */
px_status comm_check_handle(const px_domain *d, const char *what)
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
_Atomic uint32_t *comm_revoke_word(const px_domain *d)
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
        else if (who >= COMM_REVOKED_HOST && who != COMM_REVOKED_SHRUNK)
            snprintf(by, sizeof(by), "the orchestration of host %u", who - COMM_REVOKED_HOST);
        else
            snprintf(by, sizeof(by), "rank %u's kernel", who - COMM_REVOKED_RANK);
        return px_set_error(PX_EREVOKED, "%s: domain \"%s\" was revoked by %s: %s",
                            what, d->msg.name, by,
                            d->hosts != NULL ? "shrink it (px_domain_shrink, from every "
                            "host's orchestration at the same point: it spans hosts) to go on "
                            "with the survivors, or release it"
                                             : "shrink it (px_domain_shrink) to go on with the "
                            "survivors, or release it");
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
