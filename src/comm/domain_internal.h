/*
 * domain_internal.h - what the parent's side of communication domains shares between its
 * files: the handle and the per-worker state, and the functions one file gives another.
 *   domain.c          handles, attach and hooks, spec checks, allocation, release, lifetime
 *   domain_setup.c    selection of every pair's transport and the set-up on the chips
 *   domain_tasks.c    the tasks on a domain (copies, collectives, the user's group tasks)
 *   domain_kernels.c  the built-in tasks' kernels and callables (they run in the chips)
 *   domain_dfx.c      the domains' part of dfx.json
 */
#ifndef PX_COMM_DOMAIN_INTERNAL_H
#define PX_COMM_DOMAIN_INTERNAL_H

#include "comm/domain.h"
#include "comm/select.h"
#include "hier/ext.h"

#define COMM_DOMAIN_MAGIC 0x50584f4du /* "PXOM" */

enum { COMM_LIVE = 1, COMM_RELEASED, COMM_FREED };
enum { COMM_OP_ALLREDUCE = 1, COMM_OP_ALLGATHER, COMM_OP_REDUCE_SCATTER, COMM_OP_BROADCAST,
       COMM_OP_ALLTOALL };

typedef struct comm_worker comm_worker;

struct px_domain {
    uint32_t magic;
    uint32_t id;
    comm_worker *cw;
    int state;
    uint64_t run;                    /* the run that allocated it */
    comm_create_msg msg;             /* name, ranks, sizes, buffers: what every chip got */
    int *chips;                      /* n: rank -> chip (on the rank's host) */
    int *hosts;                      /* n: rank -> host, for a domain spanning hosts; NULL:
                                      * every rank is a chip of this worker */
    int *mem, *mrank, *mpos;         /* this worker's members: nmem chips and their ranks;
                                      * mpos: n, rank -> index in mem or -1 */
    int nmem;
    uint32_t wire_id;                /* the id the MPI proxies know it by (the job's, the same
                                      * on every host, for a domain spanning hosts) */
    uint64_t hash;                   /* a spanning domain's spec, as every host agreed on it */
    int need_peer_ptr;
    int forced_direct;               /* a failed direct mapping is fatal, not a fallback */
    int failed;                      /* its allocation failed (kept only to be freed) */
    int generation;                  /* shrinks that led to it (0: px_domain_alloc made it) */
    int shrunk;                      /* px_domain_shrink replaced it: only release is left */
    px_domain *from;                 /* the domain a shrink made it from, or NULL */
    double shrink_us;                /* how long the shrink that made it took (dfx.json) */
    int excluded[PX_COMM_MAX_RANKS]; /* that shrink's excluded old ranks (nexcluded) */
    int nexcluded;
    /* DFX (the orchestration's slices on the chips' tracks, domain_dfx.c), in the parent's
     * DFX clock: for a shrink's domain, the shrink's start (its revoke of the old one), the
     * deaths board's snapshot, the agreement confirmed after the new domain was made, and its
     * end, in run dfx_shrink_run - 1; for a px_domain_revoke, when, in run dfx_revoke_run - 1 */
    uint64_t dfx_t[4];
    uint64_t dfx_shrink_run, dfx_revoke_t, dfx_revoke_run;
    int dfx_first, dfx_revoke_first; /* that revoke was the first (not revoked before) */
    int draining;                    /* released in a run: forgotten once pend has finished */
    px_task_id *pend;                /* the tasks submitted on it in this run, not all seen
                                      * finished yet (npend of cap) */
    int npend, cap;
    int lost;                        /* a task id could not be kept: only the run end frees it */
    uint8_t *tl;                     /* n * n: transport of each pair (a * n + b, symmetric) */
    uint16_t *why_of;                /* n * n: why pair (a, b) uses tl[a][b], an index into
                                      * whys (comm_pair_why) */
    char (*whys)[COMM_WHY_MAX];      /* the distinct reasons (nwhy of cwhy): a few per host
                                      * pair, so 1024 ranks keep 2 MiB here, not 192 MiB */
    int nwhy, cwhy, last_why;
    void **pmem;                     /* n: this worker's mapping of each member's mpi ring
                                      * (transport/mpi.c: one per rank, all its mpi peers),
                                      * or NULL: the MPI proxy serves them */
    void **hwin;                     /* n: the members' windows mapped here for the proxy */
    int in_proxy;                    /* the proxy serves it (comm_proxy_add took it) */
    char *vbase;                     /* reserved addresses standing for the windows' data */
    size_t vbytes;
    px_domain *next;                 /* the worker's handles */
};

struct comm_proxy;

struct comm_worker {
    px_worker *w;
    const void *mpi_ops;             /* the MPI plugin's table when MPI is in use, else NULL */
    char mpi_why[160];               /* why MPI is (not) in use */
    struct comm_proxy *proxy;        /* the MPI proxy (started after the fork), or NULL */
    int kinds[COMM_NKINDS];          /* comm.create, .map, .ready, .free */
    comm_bell *bells;                /* the doorbell board (shared with the chips) */
    px_kernel_id k_write, k_read, k_coll;
    px_callable_id c_write, c_read, c_coll;
    uint32_t next_id;
    int next_slot;                   /* where the search for a free revoke slot starts */
    uint32_t next_job;               /* domains spanning hosts allocated so far (every host
                                      * counts alike: they are allocated collectively) */
    uint64_t run;                    /* runs ended so far */
    px_domain *doms;
};

struct dfxc_buf;

/* domain.c: PX_OK when d is a live domain handle, else PX_EINVAL / PX_ESTATE naming what. */
px_status comm_check_domain(const px_domain *d, const char *what);

/* domain.c: submits callable c with args a as a group on chips (n) with the dependency-only
 * accesses deps, and keeps its id among d's pending tasks. */
px_status comm_submit(px_orch *o, px_domain *d, px_callable_id c, px_task_args *a,
                      const int *chips, int n, const px_task_args *deps, px_task_id *id);

/* domain.c: comm_submit with hier_submit_group_flags' flags (HIER_GROUP_SURVIVE). */
px_status comm_submit_flags(px_orch *o, px_domain *d, px_callable_id c, px_task_args *a,
                            const int *chips, int n, const px_task_args *deps, unsigned flags,
                            px_task_id *id);

/* domain.c: sets the transport of ranks a and b (both directions) and why; PX_ENOMEM when
 * the reason is new and cannot be kept. */
px_status comm_pair_set(px_domain *d, int a, int b, int tl, const char *why);

/* domain.c: why pair (a, b) of d uses its transport ("" before the rule ran). */
const char *comm_pair_why(const px_domain *d, int a, int b);

/* domain.c: for a domain spanning hosts: every host tells the others its status (local: PX_OK
 * or why it failed, message set) and the spec's hash; returns local's failure, else the first
 * host's failure or disagreement (message naming it), else PX_OK. A collective call. */
px_status comm_job_sync(comm_worker *cw, px_domain *d, uint64_t hash, px_status local);

/* domain_setup.c: the site of ranks a and b of d (hosts and MPI) for the rule. */
void comm_site_of(const comm_worker *cw, const px_domain *d, int a, int b, comm_site *s);

/* domain_setup.c: the MPI proxy stops serving d and this worker unmaps what it mapped for
 * it (the pairs' memory, the windows); nothing when d has no proxied pair. */
void comm_proxied_drop(comm_worker *cw, px_domain *d);

/* domain_setup.c: applies the rule to every pair of d (d->tl, d->why); PX_ENOTSUP naming the
 * first pair that has no transport. */
px_status comm_select(px_worker *w, px_domain *d);

/* domain_setup.c: sets d up on its chips; on failure the message says why (every member
 * forgets it through the caller's abort). */
px_status comm_make(comm_worker *cw, px_domain *d);

/* domain_kernels.c: registers the built-in tasks' kernels and callables on cw's worker
 * (the init hook, after the user's, through the level-3 registry). */
px_status comm_builtins_register(comm_worker *cw);

/* domain_dfx.c: the dfx_json hook: the domains and their pairs' transports. */
void comm_dfx_json(void *arg, struct dfxc_buf *b);

/* domain_dfx.c: the dfx_events hook: the orchestration's revokes and shrinks of this run as
 * slices on the chips' tracks of the merged trace.json. */
void comm_dfx_events(void *arg, hier_dfx_event_cb add, void *ctx);

#endif
