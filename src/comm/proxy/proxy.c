/*
 * proxy.c - the MPI proxy of a level-3 worker (comm/proxy.h): its thread, start and stop.
 *
 * One thread per worker, started after the chips are forked. It is the only thread of the
 * process that calls MPI (the plugin's ops, MPI_THREAD_FUNNELED). Its loop, in one sweep:
 *   1. the parent's command (add or remove a domain), if one is posted;
 *   2. every ring it serves: each new request of this worker's chips is decoded against the
 *      domain's bounds (the ring is the chip's to write, so the proxy trusts nothing in it,
 *      as a staged target does) and sent to the proxy of the target's worker;
 *   3. every message waiting from a proxy (itself included): a request is carried out
 *      against the target's window (mapped here) and answered; an answer completes its
 *      request in the ring (a get's bytes into the request's chunk), and `done` advances over
 *      every request answered in order, waking a requester asleep on it;
 *   4. sends of answers that MPI has finished are freed;
 *   5. the notices: a removal whose sends have finished, kernel-side shrinks' agreement
 *      entries (agree.c), new deaths and revocations told to the other hosts.
 * Step 1 is commands.c's, 2 rma.c's and pcoll.c's, 3 and 4 wire.c's (its table dispatches
 * each message to rma.c, pcoll.c or notices.c), 5 commands.c's and notices.c's.
 * Between sweeps it waits the one wait (util/wait.h) on its doorbell, which this worker's
 * requesters ring: a yield phase (20 us; 2 ms when the job has several hosts, whose messages
 * ring nothing: a cross-host put_signal half round trip went from about 200 to 85 us with it),
 * then sleeps. While the job has several hosts, or answers are awaited, a sleep lasts at most
 * PROXY_POLL_NS; with one host and nothing in flight nothing can arrive unrung, and it sleeps
 * in long slices.
 */
#include "comm/proxy/proxy_int.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpi/mpi_load.h"
#include "runtime/runtime.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/wait.h"

#define PROXY_HOT_YIELD_NS 2000000            /* the yield phase with several hosts */
#define PROXY_POLL_NS 200000                  /* a sleep while messages may come unrung */
#define PROXY_SLICE_NS (100 * 1000 * 1000)    /* a sleep when nothing can come unrung */

void proxy_mpi_fail(comm_proxy *p, int e, const char *what)
{
    char s[256];

    if (p->failed)
        return;
    p->failed = 1;
    p->ops->error(e, s, sizeof(s));
    PX_LOG_ERROR("mpi proxy (host %d): %s failed: %s; the mpi transport of this worker stops "
                 "here and its requests end at their deadline", p->rank, what, s);
}

/*
 * MPI starts once per process: the proxy of the first worker under MPI initialises it and
 * finalises it when that worker is destroyed (or at the process's exit, for a worker never
 * destroyed: mpirun counts a rank that never finalised as failed). A later level-3 worker of
 * the process cannot run under MPI: MPI cannot start again, and Open MPI does not support the
 * fork of its chips after MPI_Init (px_worker_init refuses it: hier/forksafe.c).
 */
static pthread_mutex_t g_mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static comm_proxy *g_live;   /* the proxy running now */
static pid_t g_mpi_pid;

static void proxy_stop_thread(comm_proxy *p);

static void proxy_atexit(void)
{
    comm_proxy *p;

    if (getpid() != g_mpi_pid)
        return;
    pthread_mutex_lock(&g_mpi_lock);
    p = g_live;
    pthread_mutex_unlock(&g_mpi_lock);
    if (p != NULL && !p->abandoned) /* a worker not destroyed: its proxy stops, finalises */
        proxy_stop_thread(p);
    comm_job_finalize_deferred(); /* (a failed job's, deferred by that stop) */
}

/* ---- the thread ---- */

/* Any request of this worker's chips waiting for an answer. */
static int proxy_in_flight(const comm_proxy *p)
{
    for (int i = 0; i < p->ndoms; i++)
        for (int r = 0; r < p->doms[i]->nrings; r++)
            if (p->doms[i]->rings[r].sent != p->doms[i]->rings[r].done)
                return 1;
    for (int h = 0; h < p->size; h++)
        if (p->src[h].req != NULL)
            return 1;
    return p->nps > 0 || p->ag != NULL || p->closing != NULL || p->clk != NULL;
}

/* The domains served, and those a removal left with sends in flight (MPI is finalised
 * after: what was left ends with it). */
static void proxy_free_doms(comm_proxy *p)
{
    for (int i = 0; i < p->ndoms; i++)
        pdom_free(p->doms[i]);
    p->ndoms = 0;
    for (int i = 0; i < p->nleft; i++)
        pdom_free(p->left[i]);
    p->nleft = 0;
}

static int proxy_sweep(comm_proxy *p)
{
    int work = proxy_unwatch_poll(p) + proxy_command(p) + proxy_gather_poll(p) +
               proxy_clock_poll(p);

    for (int i = 0; i < p->ndoms; i++)
        for (int r = 0; r < p->doms[i]->nrings; r++)
            work += pring_forward(p, p->doms[i], &p->doms[i]->rings[r]);
    if (p->nps > 0)
        work += proxy_reap(p);
    work += proxy_receive(p);
    work += proxy_close_poll(p);
    work += proxy_agrees_tell(p);
    work += proxy_deaths_tell(p);
    work += proxy_revokes_tell(p);
    return work;
}

static int proxy_ready(void *arg)
{
    comm_proxy *p = arg;

    return p->woke || atomic_load_explicit(&p->stop, memory_order_acquire);
}

static int proxy_progress(void *arg, int asleep)
{
    comm_proxy *p = arg;
    int work = proxy_sweep(p);

    if (asleep && work > 0)
        p->woke = 1;
    return work > 0;
}

static void proxy_sleep_cb(void *arg, int asleep)
{
    comm_proxy *p = arg;

    if (asleep)
        p->seen = atomic_load_explicit(&p->bell->bell, memory_order_seq_cst);
}

static void proxy_up(comm_proxy *p, uint32_t v)
{
    atomic_store_explicit(&p->up, v, memory_order_seq_cst);
    util_wake(&p->up, &p->up_sleep, INT_MAX, 0);
}

/* Start: MPI up, then the hosts' records (job_start.c compares what must agree). */
static px_status proxy_init(comm_proxy *p)
{
    comm_host me;
    char s[256];
    int e;

    if (px_mpi_state() == PX_MPI_STATE_DONE)
        return px_set_error(PX_ESTATE, "MPI starts once per process, and an earlier worker of "
                            "this process ran under MPI: run one worker under MPI per process "
                            "(PLEXUS_MPI=off for a level-2 worker that needs no other host)");
    if ((e = p->ops->init(&p->rank, &p->size)) != 0) {
        p->ops->error(e, s, sizeof(s));
        return px_set_error(PX_EIO, "MPI_Init_thread failed: %s", s);
    }
    px_mpi_state_set(PX_MPI_STATE_UP);
    pthread_mutex_lock(&g_mpi_lock);
    g_live = p;
    if (g_mpi_pid == 0)
        atexit(proxy_atexit);
    g_mpi_pid = getpid();
    pthread_mutex_unlock(&g_mpi_lock);
    p->ops->version(p->lib, sizeof(p->lib));
    if ((p->src = calloc((size_t)p->size, sizeof(*p->src))) == NULL ||
        (p->hosts = calloc((size_t)p->size, sizeof(*p->hosts))) == NULL ||
        (p->arrived = calloc((size_t)p->size, sizeof(*p->arrived))) == NULL)
        return px_set_error(PX_ENOMEM, "out of host memory for %d hosts", p->size);
    memset(&me, 0, sizeof(me));
    snprintf(me.id, sizeof(me.id), "%s", p->host_id);
    me.chips = p->nchips;
    me.pid = (int32_t)getpid();
    me.job = p->job;
    me.caps = *p->caps;
    return comm_job_exchange(p->ops, &me, p->hosts, p->size, p->timeout_s, &p->met);
}

static void *proxy_main(void *arg)
{
    comm_proxy *p = arg;
    px_status st;
    util_wait w = {.ready = proxy_ready, .arg = p, .word = &p->bell->bell,
                   .sleeping = &p->bell->sleeping, .shared = 1, .spin_ticks = 0,
                   .yield_ticks = px_ns_to_ticks(PROXY_YIELD_NS), .sleep_once = 1,
                   .progress = proxy_progress, .sleep_cb = proxy_sleep_cb};

    pthread_setname_np(pthread_self(), "px-mpi-proxy");
    if ((st = proxy_init(p)) != PX_OK) {
        if (p->met) /* refused alike on every host: MPI ends at exit, once each has said */
            comm_job_finalize_at_exit(p->ops);
        pthread_mutex_lock(&g_mpi_lock);
        if (g_live == p)
            g_live = NULL;
        pthread_mutex_unlock(&g_mpi_lock);
        p->start_st = st;
        snprintf(p->start_err, sizeof(p->start_err), "%s", px_last_error());
        proxy_up(p, 2);
        return NULL;
    }
    PX_LOG_INFO("mpi: host %d of %d (%s), %s", p->rank, p->size, p->host_id, p->lib);
    if (p->size > 1) /* messages from other hosts ring nothing: poll longer before a sleep */
        w.yield_ticks = px_ns_to_ticks(PROXY_HOT_YIELD_NS);
    proxy_up(p, 1);
    while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
        uint64_t slice = p->size > 1 || proxy_in_flight(p) ? PROXY_POLL_NS : PROXY_SLICE_NS;

        p->woke = 0;
        w.deadline_ns = 0;
        w.timeout_ns = slice;
        w.slice_ns = slice;
        (void)util_wait_run(&w);
    }
    while (proxy_command(p))
        ;
    proxy_free_doms(p);
    for (int i = 0; i < p->nps; i++) {
        p->ops->cancel(p->ps[i].req);
        free(p->ps[i].buf);
    }
    p->nps = 0;
    PX_LOG_DEBUG("mpi proxy (host %d): sent on %llu requests, served %llu", p->rank,
                 (unsigned long long)p->forwarded, (unsigned long long)p->served);
    /* after a failure too (Open MPI's shared-memory segments go with it); after a failed
     * job at the process's exit, once this host has printed why (MPI_Finalize waits for
     * every host, so none leaves, and makes mpirun end the job, before each has said it),
     * waiting briefly: a stopped host would hold it forever, and mpirun ends the job */
    if (!p->failed && atomic_load_explicit(&p->job_failed, memory_order_acquire) &&
        p->size > 1)
        comm_job_finalize_at_exit(p->ops);
    else if (!p->failed)
        (void)p->ops->finalize();
    px_mpi_state_set(PX_MPI_STATE_DONE);
    return NULL;
}

static int proxy_is_up(void *arg)
{
    comm_proxy *p = arg;

    return atomic_load_explicit(&p->up, memory_order_acquire) != 0;
}

/* Host 0's first clock estimate, kept: with a later one it gives each clock's rate. */
static void proxy_first_clock(comm_proxy *p, double timeout_s)
{
    comm_proxy_clock_est *est = calloc((size_t)p->size, sizeof(*est));

    if (est == NULL || comm_proxy_clock(p, PROXY_CLOCK_ROUNDS, timeout_s, est) != PX_OK)
        PX_LOG_WARN("mpi proxy (host 0): no first estimate of the other hosts' clocks (%s): "
                    "DFX aligns them by an offset alone", est ? px_last_error() : "out of "
                    "host memory");
    free(est);
}

px_status comm_proxy_start(const void *ops, const px_caps *caps, const comm_job_facts *job,
                           int nchips, comm_bell *bell, const hier_deaths *deaths, comm_rdeaths *rdeaths,
                           double timeout_s, comm_proxy **out)
{
    const char *host_id = caps->f[PX_FACT_HOST_ID].text;
    comm_proxy *p = calloc(1, sizeof(*p));
    util_wait w = {.ready = proxy_is_up, .word = NULL, .count_sleepers = 1, .shared = 0,
                   .spin_ticks = 0, .yield_ticks = px_ns_to_ticks(PROXY_YIELD_NS)};
    int e;
    px_status st;

    if (p == NULL)
        return px_set_error(PX_ENOMEM, "out of host memory for the MPI proxy");
    p->ops = ops;
    p->bell = bell;
    p->timeout_s = timeout_s;
    p->nchips = nchips;
    p->job = *job;
    p->caps = caps;
    p->tsc = px_caps_get(caps, PX_FACT_TSC_INVARIANT) != 0;
    atomic_init(&p->deaths, deaths);
    p->rdeaths = rdeaths;
    snprintf(p->host_id, sizeof(p->host_id), "%s", host_id);
    pthread_mutex_init(&p->lock, NULL);
    if ((e = pthread_create(&p->thread, NULL, proxy_main, p)) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return px_set_error(PX_ENOMEM, "cannot start the MPI proxy thread: %s", strerror(e));
    }
    w.arg = p;
    w.word = &p->up;
    w.sleeping = &p->up_sleep;
    w.timeout_ns = (uint64_t)(timeout_s * 1e9) + 1000000000ull; /* its own deadline first */
    if (util_wait_run(&w) != PX_OK) {
        /* stuck inside MPI_Init: it cannot be joined; the process should end */
        pthread_detach(p->thread);
        return px_set_error(PX_ETIMEDOUT, "MPI_Init_thread did not return within %g s "
                            "(PLEXUS_TIMEOUT_S): is every rank of the job started (mpirun -np "
                            "H), and can the hosts reach each other?", timeout_s);
    }
    if (atomic_load_explicit(&p->up, memory_order_acquire) != 1) {
        st = p->start_st;
        pthread_join(p->thread, NULL);
        if (p->met) /* the hosts met and refused each other: the same words on every host */
            px_set_error(st, "px_worker_init: %s", p->start_err);
        else
            px_set_error(st, "the worker's MPI proxy could not start: %s", p->start_err);
        free(p->hosts);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return st;
    }
    if (p->rank == 0 && p->size > 1)
        proxy_first_clock(p, timeout_s);
    *out = p;
    return PX_OK;
}

int comm_proxy_rank(const comm_proxy *p)
{
    return p->rank;
}

int comm_proxy_size(const comm_proxy *p)
{
    return p->size;
}

const comm_host *comm_proxy_host(const comm_proxy *p, int r)
{
    return r >= 0 && r < p->size ? &p->hosts[r] : NULL;
}

const char *comm_proxy_library(const comm_proxy *p)
{
    return p->lib;
}

/* Stops p's thread (it finalises MPI); p->stopped when it ended. */
static void proxy_stop_thread(comm_proxy *p)
{
    struct timespec until;

    atomic_store_explicit(&p->stop, 1, memory_order_release);
    util_bump_wake(&p->bell->bell, NULL, INT_MAX, 1);
    double wait_s = atomic_load_explicit(&p->job_failed, memory_order_acquire) && p->size > 1
                        ? PROXY_FAILED_FINALIZE_S : p->timeout_s + 1;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)wait_s;
    if (pthread_timedjoin_np(p->thread, NULL, &until) != 0) {
        PX_LOG_WARN("mpi proxy (host %d): did not stop within %g s (inside MPI_Finalize: %s); "
                    "leaving it", p->rank, wait_s,
                    wait_s == PROXY_FAILED_FINALIZE_S ? "the job failed and another host does "
                    "not answer; mpirun ends the job" : "another host of the job is gone or "
                    "stuck");
        pthread_detach(p->thread);
        p->abandoned = 1; /* the exit does not wait again (nor ring a bell that is gone) */
        return; /* it stays live: MPI is not finalised under it */
    }
    pthread_mutex_lock(&g_mpi_lock);
    if (g_live == p)
        g_live = NULL;
    pthread_mutex_unlock(&g_mpi_lock);
    p->stopped = 1;
}

void comm_proxy_stop(comm_proxy *p)
{
    if (p == NULL)
        return;
    proxy_stop_thread(p);
    if (!p->stopped)
        return; /* p stays: the thread still uses it */
    free(p->hosts);
    free((void *)p->arrived);
    free(p->src);
    free(p->ps);
    free(p->clk_first);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
