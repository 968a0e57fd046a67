/*
 * domain_internal.h - what the parent's side of communication domains shares between its
 * files: the handle and the per-worker state, and the functions one file gives another.
 *   domain.c          the registry of handles, their checks, release, the accessors
 *   domain_attach.c   the worker's comm state, its attachment and hooks
 *   domain_check.c    the checks of a spec (names, members, buffers, memory)
 *   domain_alloc.c    allocation, the pair tables, freeing, forgetting, aborting
 *   domain_pend.c     the tasks submitted on a domain, the sweep, waiting for slots
 *   domain_agree.c    the agreement of the hosts on a domain spanning them
 *   domain_shrink.c   revoke and shrink in the orchestration's name
 *   domain_xshrink.c  the hosts' agreement in a shrink of a domain spanning hosts
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
    uint32_t kgens;                  /* its kernel shrinks as its agreement row said when it was
                                      * freed (the row may be another domain's then) ... */
    uint64_t (*kexcl)[COMM_AGREE_WORDS]; /* ... and their excluded sets (kgens, at most
                                      * COMM_AGREE_GENS), or NULL */
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
    size_t pmem_bytes;               /* the bytes of each (its per_rank transport's prepare) */
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

/* domain.c: PX_OK when d is a live domain handle that is neither revoked nor shrunk, else
 * PX_EINVAL / PX_ESTATE / PX_EREVOKED naming what. */
px_status comm_check_domain(const px_domain *d, const char *what);

/* domain.c: PX_OK when d is a live domain handle (revoked or shrunk or not). */
px_status comm_check_handle(const px_domain *d, const char *what);

/* domain.c: the registry of handles: adds d (PX_ENOMEM when it cannot grow), removes it, and
 * 1 when d is a handle of a worker not destroyed (a lookup that reads nothing of d). */
px_status comm_handle_add(px_domain *d);
void comm_handle_remove(const px_domain *d);
int comm_handle_known(const px_domain *d);

/* domain.c: d's word of the revocation table. */
_Atomic uint32_t *comm_revoke_word(const px_domain *d);

/* domain_attach.c: the comm state of level-3 worker w (its hooks' extension slot), or NULL. */
comm_worker *comm_worker_of(px_worker *w);

/* domain_check.c: copies the caller's spec into *out as this library's (size and version
 * checked; the fields an older spec lacks are 0). PX_OK or PX_EINVAL (message set). */
px_status comm_spec_import(const px_domain_spec *spec, px_domain_spec *out);

/* domain_check.c: checks a name of 1..31 characters; `what` names the field. */
px_status comm_check_name(const char *name, const char *what);

/* domain_check.c: checks the members: chips of the worker (at most 64), each once; or global
 * chips of the job's hosts (*job set to 1); 1..PX_COMM_MAX_RANKS of them. */
px_status comm_check_members(comm_worker *cw, const px_domain_spec *s, int *job);

/* domain_check.c: checks the buffers and lays them out into m. */
px_status comm_layout(const px_domain_spec *s, comm_create_msg *m);

/* domain_check.c: PX_ENOMEM when d's memory on this host is more than PLEXUS_COMM_MEM_MAX or,
 * with that 0, more than the host can back now. */
px_status comm_check_memory(px_worker *w, const px_domain *d);

/* domain_alloc.c: px_domain_alloc, and px_domain_shrink's new domain: carry is the old domain
 * whose window bytes the members copy (NULL: none). */
px_status comm_alloc(px_orch *o, const px_domain_spec *spec, const px_domain *carry,
                     px_domain **out);

/* domain_alloc.c: asks every member to forget d (comm.free); with chips_alive 0 only the
 * parent's part. */
void comm_free_domain(comm_worker *cw, px_domain *d, int chips_alive);

/* domain_alloc.c: asks d's members to forget it at once (comm.forget); 1 when every member
 * did (or is dead). The current message is kept. */
int comm_forget(comm_worker *cw, px_domain *d);

/* domain_alloc.c: after a failed allocation (why: its status, message set), the members
 * forget d at once; the status and message are kept. */
void comm_abort(comm_worker *cw, px_domain *d, px_status why);

/* domain_alloc.c: frees d's per-rank tables. */
void comm_domain_tables_free(px_domain *d);

/* domain_pend.c: 1 when task id of the current run has finished. */
int comm_task_done(px_worker *w, px_task_id id);

/* domain_pend.c: util_wait's ready test of a task (arg: its px_task): 1 once it is done. */
int comm_task_ready(void *arg);

/* domain_pend.c: drops the finished tasks from d->pend; returns how many are left. */
int comm_pend_prune(px_domain *d);

/* domain_pend.c: forgets on the chips every domain released in this run whose tasks have all
 * finished. */
void comm_sweep(comm_worker *cw);

/* domain_pend.c: makes sure every member of s has a free slot, waiting for released domains'
 * tasks; PX_ENOMEM naming the chip when one stays full. */
px_status comm_slots_wait(comm_worker *cw, const px_domain_spec *s);

/* domain_pend.c: waits until every task submitted on d in this run has finished, until
 * deadline (ns); PX_OK or PX_ETIMEDOUT naming the first task left. */
px_status comm_pend_wait(px_domain *d, uint64_t deadline);

/* domain_agree.c: d->hash from spec s, then the agreement as comm_job_sync's, naming the
 * fields of the spec that differ between hosts. */
px_status comm_job_agree(comm_worker *cw, px_domain *d, const px_domain_spec *s,
                         px_status local);

/* domain_agree.c: a spec naming global chips (a domain spanning hosts) failed this host's
 * checks (local, message set) before it was laid out: the host still joins the agreement,
 * so every other host names it and its reason instead of waiting for it. Returns local (cw
 * NULL, not under MPI, or s not a spanning spec: nothing joined). A collective call. */
px_status comm_job_refuse(comm_worker *cw, const px_domain_spec *s, px_status local);

/* domain_pend.c: submits callable c with args a as a group on chips (n) with the dependency-only
 * accesses deps, and keeps its id among d's pending tasks. */
px_status comm_submit(px_orch *o, px_domain *d, px_callable_id c, px_task_args *a,
                      const int *chips, int n, const px_task_args *deps, px_task_id *id);

/* domain_pend.c: comm_submit with hier_submit_group_flags' flags (HIER_GROUP_SURVIVE). */
px_status comm_submit_flags(px_orch *o, px_domain *d, px_callable_id c, px_task_args *a,
                            const int *chips, int n, const px_task_args *deps, unsigned flags,
                            px_task_id *id);

/* domain_alloc.c: sets the transport of ranks a and b (both directions) and why; PX_ENOMEM when
 * the reason is new and cannot be kept. */
px_status comm_pair_set(px_domain *d, int a, int b, int tl, const char *why);

/* domain_alloc.c: why pair (a, b) of d uses its transport ("" before the rule ran). */
const char *comm_pair_why(const px_domain *d, int a, int b);

/* domain_agree.c: for a domain spanning hosts: every host tells the others its status (local: PX_OK
 * or why it failed, message set) and the spec's hash; returns local's failure, else the first
 * host's failure or disagreement (message naming it), else PX_OK. A collective call. */
px_status comm_job_sync(comm_worker *cw, px_domain *d, uint64_t hash, px_status local);

/* domain_xshrink.c: the first step of px_domain_shrink of d spanning hosts (a collective of
 * the hosts' orchestrations): the union of the members each host knows dead (b: this worker's
 * deaths board), the same on every host: their old ranks into ex (*nex, ascending), the
 * survivors' global chips into keep (*nkeep). PX_EINVAL naming a host that shrinks another
 * domain at this point, PX_ENOTSUP when no member of some host survives, the exchange's error
 * (PX_ETIMEDOUT at deadline, px_now_ns, naming a host that did not come). */
px_status comm_xshrink_agree(px_domain *d, const hier_deaths *b, uint64_t deadline, int *ex,
                             int *nex, int *keep, int *nkeep);

/* domain_xshrink.c: the second step, once every host made the successor: PX_EPEERDEAD on
 * every host alike, naming it, when a survivor (a rank of d not in ex, nex) died since as any
 * host knows it; else PX_OK (or the exchange's error). */
px_status comm_xshrink_confirm(px_domain *d, const hier_deaths *b, uint64_t deadline,
                               const int *ex, int nex);

/* domain_xshrink.c: why rank r of d is dead, in the words of the board that told this host
 * (this worker's deaths board b for its chips, the remote deaths for other hosts'). */
const char *comm_xshrink_why(const px_domain *d, const hier_deaths *b, int r);

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
/* d is being freed: its kernel shrinks are copied from its agreement row for dfx.json. */
void comm_dfx_keep_kgens(const comm_worker *cw, px_domain *d);

/* domain_dfx.c: the dfx_events hook: the orchestration's revokes and shrinks of this run as
 * slices on the chips' tracks of the merged trace. */
void comm_dfx_events(void *arg, hier_dfx_event_cb add, void *ctx);

#endif
