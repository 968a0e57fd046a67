/*
 * domain_attach.c - the communication layer's attachment to a level-3 worker: its state
 * (comm_worker), the doorbell board, MPI's start when the job runs under MPI, and the
 * worker's hooks (init, started, stopping, run end, DFX, destroy).
 */
#include "comm/domain_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "comm/dfx_hosts.h"
#include "comm/proxy.h"
#include "mpi/mpi_load.h"
#include "runtime/runtime.h"
#include "util/log.h"
#include "util/util.h"

/* The run_end hook: frees what the run released and its chips still hold, after a failed run
 * what it allocated, and the addresses of the domains forgotten during the run. */
static void comm_run_end(void *arg, px_status st)
{
    comm_worker *cw = arg;

    /* under MPI a failed run leaves the job failed: the proxy stops without waiting on the
     * other hosts again (short removals, no MPI_Finalize: mpirun ends the job); not a run
     * failed by a chip's death or a revocation: every host is still there (a host that died
     * ends the job by itself, one that is stopped fails its peers' waits with PX_ETIMEDOUT),
     * and the next run may shrink the domain and go on */
    if (st != PX_OK && st != PX_EPEERDEAD && st != PX_EREVOKED && cw->proxy != NULL)
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
    comm_job_facts job;

    if (cw->mpi_ops == NULL)
        return PX_OK;
    comm_job_facts_fill(&w->cfg, 3, &job);
    return comm_proxy_start(cw->mpi_ops, &w->caps, &job, hier_nchips(w),
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
comm_worker *comm_worker_of(px_worker *w)
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
