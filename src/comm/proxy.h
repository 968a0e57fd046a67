/*
 * proxy.h - the MPI proxy of a level-3 worker (comm/proxy/; its rooms: proxy/proxy_int.h): the
 * one thread of the worker that calls MPI. It initialises MPI after the chips are forked (Open MPI does not support a fork
 * after MPI_Init), learns the other workers (hosts) of the job, and serves the rings of the
 * mpi transport (transport/mpi.c): requests of this worker's chips go to the proxies of the
 * targets' workers, requests from other proxies are carried out against this worker's
 * members' windows.
 *
 * Wire protocol between proxies (on the plugin's own duplicate of MPI_COMM_WORLD): a request
 * is a comm_proxy_msg with tag PROXY_TAG_REQ, followed for a put whose bytes are not inline
 * by its bytes (PROXY_TAG_DATA); the target's proxy answers every request with a
 * comm_proxy_msg (PROXY_TAG_REP), followed for a get by the bytes (PROXY_TAG_DATA). A clock
 * ping (PROXY_TAG_CLOCK) is answered at once with the answerer's clock (PROXY_TAG_CLOCK_REP;
 * comm_proxy_clock). A chip's death (PROXY_TAG_DEATH) and a domain's revocation
 * (PROXY_TAG_REVOKE) are told to every other host once, unanswered. Messages between two
 * proxies are not overtaken (MPI's order), so a ring's requests are carried out in order;
 * `done` is stored as each answer arrives.
 */
#ifndef PX_COMM_PROXY_H
#define PX_COMM_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include <plexus/status.h>

#include <plexus/caps.h>

#include "comm/comm.h"
#include "comm/job_start.h"

#define COMM_HOST_ID_MAX PX_FACT_TEXT_MAX

/* What every worker of the job tells the others at start (one MPI allgather, job_start.c). */
typedef struct comm_host {
    char id[COMM_HOST_ID_MAX]; /* host id (caps' host_id) */
    int32_t chips;             /* its chips */
    int32_t pid;               /* its parent's pid */
    comm_job_facts job;        /* what must agree between hosts (compared at start) */
    px_caps caps;              /* its probe: the rule runs on the union of the hosts' facts */
} comm_host;

typedef struct comm_proxy comm_proxy;

/*
 * Starts the proxy thread of a worker with nchips chips on host host_id: it initialises MPI
 * through the plugin ops, exchanges comm_host records (job: what must agree) with every
 * worker and refuses a difference (comm_job_exchange; MPI then ends), then serves rings.
 * bell is its doorbell (the board's COMM_BELL_PROXY). deaths (this worker's board, or NULL)
 * is watched: a chip's death is told to every other host, whose proxies write it into their
 * rdeaths (the board's remote deaths, or NULL), so waits on another host's chip end with
 * PX_EPEERDEAD as on one host. Returns once MPI is up (within timeout_s), PX_OK with *out;
 * else the error (MPI's words).
 */
px_status comm_proxy_start(const void *ops, const px_caps *caps, const comm_job_facts *job,
                           int nchips, comm_bell *bell, const hier_deaths *deaths, comm_rdeaths *rdeaths,
                           double timeout_s, comm_proxy **out);

/*
 * An allgather over the job's hosts (a collective: every host calls it, in the same order):
 * n bytes of in from each host into out (size * n bytes, host order), carried out by the
 * proxy thread while it goes on serving. PX_OK, or PX_ETIMEDOUT after timeout_s (a host did
 * not join: it is gone, stuck, or did not make the same call; MPI's collective cannot say
 * which), PX_EIO (MPI's words).
 */
px_status comm_proxy_allgather(comm_proxy *p, const void *in, size_t n, void *out,
                               double timeout_s);

/* This worker's host (MPI rank), the job's hosts, and host r's record. */
int comm_proxy_rank(const comm_proxy *p);
int comm_proxy_size(const comm_proxy *p);
const comm_host *comm_proxy_host(const comm_proxy *p, int r);
const char *comm_proxy_library(const comm_proxy *p);

/* The clock of one host against this host's (comm_proxy_clock). */
typedef struct comm_proxy_clock_est {
    int64_t offset_ns;   /* its DFX clock minus this host's, in the best round (ns) */
    uint64_t rtt_min_ns; /* the best round's round trip: the offset is within half of it */
    uint64_t at_ns;      /* when (this host's clock, ns): the best round's middle */
    int rounds;          /* answers taken (this host: every round) */
    int lost;            /* 1: a ping went unanswered within its share of the deadline, and
                          * the host was given up (gone or stopped) */
} comm_proxy_clock_est;

/*
 * Estimates every other host's DFX clock (the TSC over its ticks per ns, or CLOCK_MONOTONIC:
 * the clock of its trace events) against this host's: the proxy thread sends each other host
 * `rounds` pings, one at a time; each host's proxy answers a ping at once with its clock
 * (no call on that host), and the round with the least round trip gives the offset. Not a
 * collective: the other hosts need only be running. est: comm_proxy_size entries. A host
 * whose ping goes unanswered for its share of timeout_s (at most 1 s) is given up (lost).
 * Returns PX_OK, or PX_ETIMEDOUT / PX_ENOMEM.
 */
px_status comm_proxy_clock(comm_proxy *p, int rounds, double timeout_s,
                           comm_proxy_clock_est *est);

/* The first estimate comm_proxy_clock made (host 0 makes one when its proxy starts), or
 * NULL: with a later one it gives each clock's rate against host 0's. */
const comm_proxy_clock_est *comm_proxy_clock_first(const comm_proxy *p);

/* One ring the proxy serves: rank a's requests to every mpi peer (a a member of this worker;
 * each request names its target rank, transport/mpi.c). */
typedef struct comm_proxy_ring {
    int a;
    void *ring;            /* the rank's ring memory (comm_mpi_ring_bytes) */
    size_t chunk;          /* COMM_MPI_CHUNK */
} comm_proxy_ring;

/* A domain with proxied pairs, as the proxy sees it (copied by comm_proxy_add). */
typedef struct comm_proxy_dom {
    uint32_t id;
    int n;
    uint32_t nsig;
    size_t data_bytes;     /* a window's data part (px_comm_window_bytes' data_bytes) */
    void *const *window;   /* n: this worker's members' windows (mapped here), else NULL */
    const int *host;       /* n: the host (MPI rank) of each rank's chip */
    int nrings;
    const comm_proxy_ring *rings;
    _Atomic uint32_t *revoke; /* its revocation word on this worker's board, or NULL: once it
                               * is nonzero the proxy tells every other host, whose proxies
                               * store it into theirs unless revoked there already (the first
                               * revoker's word stays), so a revoke on one host reaches every
                               * member of every host */
    comm_agree_row *agree; /* its kernel-side shrinks' agreement row on this worker's
                                   * board, or NULL: the proxy copies this host's entries to
                                   * every other host's row and theirs here, and follows the
                                   * kernel generations (comm/proxy/agree.c) */
    const int *chip;       /* n: the chip of each rank on its host (this host's are watched) */
} comm_proxy_dom;

/* Adds / removes a domain; return once the proxy thread has taken it (deadline timeout_s).
 * remove sends on every request the domain's rings hold first and returns once MPI has
 * finished every send from its memory: with PX_OK nothing of the domain is touched after it
 * returns (else its memory must stay mapped). */
px_status comm_proxy_add(comm_proxy *p, const comm_proxy_dom *d, double timeout_s);
px_status comm_proxy_remove(comm_proxy *p, uint32_t id, double timeout_s);

/*
 * The job has failed here (a run of the worker failed): from now on a domain's removal waits
 * for MPI's sends at most a second (a stopped host may never take them; what they read then
 * stays mapped), and with several hosts MPI_Finalize moves to the process's exit, at most
 * 2 s (comm_job_finalize_at_exit: it waits for every host, so each has printed why before any
 * leaves; a stopped one never answers): the process then ends without it and mpirun ends the
 * job, the other hosts included.
 */
void comm_proxy_fail_job(comm_proxy *p);

/* The proxy stops reading the deaths board given at start (it is about to be unmapped);
 * returns once the thread took it. */
void comm_proxy_unwatch(comm_proxy *p, double timeout_s);

/* Stops the thread, which finalises MPI (it starts once per process), and frees p. */
void comm_proxy_stop(comm_proxy *p);

#endif
