/*
 * hier_internal.h - what the files of the level-3 engine share.
 *
 * The host side of a level-3 worker is the level-2 engine (src/runtime) with its arena used as
 * the host heap and three internal kernels as executors ("l3.next_level", "l3.group",
 * "l3.host"); w->ext.owner points at the px_hier below. Child processes (chips, then host
 * sub-workers) are "procs": procs[0 .. nchips) are the chips, procs[nchips ..) the subs.
 *
 * Files: hier.c (create, init, destroy, registration), chip.c (a child's main loop),
 * mailbox.c (shared rings and waits), submit.c (the level-3 orchestration API), dispatch.c
 * (executors, the pending queue, completions), watch.c (reading completions: the
 * orchestration's poller and the completion and death-watch thread), ctl.c (control calls),
 * service.c (the chip context, chip services, the chip's service thread), fdpass.c
 * (descriptors over the socketpairs), dfx_l3.c (the chips' DFX sessions: a flush control
 * call at the end of a run) and dfx_l3_merge.c (the host's and the chips' outputs handed to
 * the DFX merge, dfx/merge/). ext.h is what upper layers may call of these.
 *
 * Locking: h->lock guards the dispatcher state (every proc's posted/completed counts and
 * in-flight table, the pending queue, group records and dead flags). It is taken by
 * executors (inline in the thread that readies a task, or on a host core with DFX on) and by
 * whoever reads completions (the orchestration or the watch thread). The side table is not
 * under it: only the orchestration writes an entry, and only for a task not yet submitted,
 * whose entry no other thread reads any more (PX_L3_ORPHAN). px_task_complete is called
 * under it only with a failure (whose dependents are poisoned and so never dispatched
 * inline): a successful completion may dispatch a dependent inline, which takes the lock.
 * h->drain_lock, taken before h->lock, makes one thread at a time the reader of the
 * completion rings (it owns every proc's done_read).
 */
#ifndef PX_HIER_HIER_INTERNAL_H
#define PX_HIER_HIER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include <plexus/plexus.h>

#include "hier/ext.h"
#include "hier/hier.h"
#include "hier/mailbox.h"
#include "runtime/runtime.h"

#define PX_HIER_MAX_CALLABLES 256
#define PX_HIER_MAX_SUBS 64
#define PX_HIER_MAX_PROCS (64 + PX_HIER_MAX_SUBS)
#define PX_HIER_HOST_CORES 2     /* host core threads: run dispatches and host functions */
#define PX_HIER_DEATH_MAX 256
#define PX_HIER_CHECK_NS 100000000ull /* the watch thread asks every child this often (a
                                       * backup: the death watch hears a pidfd at once) */
#define PX_HIER_BACKUP_NS 1000000ull  /* and the completion rings, while the orchestration
                                       * polls them itself (ext.ops->poll) */

typedef struct px_hier_callable {
    char name[PX_KERNEL_NAME_MAX];
    px_orch_fn fn;
    void *arg;                    /* its calls' user pointer (hier_callable_register) */
} px_hier_callable;

/* One child process and the parent's bookkeeping for it. */
typedef struct px_hier_proc {
    int index;           /* chip index, or sub index */
    int is_sub;
    pid_t pid;           /* 0 until forked */
    int pidfd;           /* -1 when none */
    int sock;            /* the parent's end of the socketpair (fd passing, fdpass.c) */
    int child_sock;      /* the child's end; closed in the parent after the fork */
    int memfd;
    px_mailbox *mb;
    size_t mb_len;
    /* dispatcher state, under h->lock */
    uint64_t posted;                  /* calls posted (== mb->call_head) */
    uint64_t completed;               /* completions consumed or failed */
    _Atomic uint64_t done_read;       /* completions read (written under drain_lock; read
                                       * without it to see whether anything is new) */
    px_task_id inflight[PX_MB_DEPTH]; /* task id of call position p % PX_MB_DEPTH;
                                       * PX_L3_CONTROL: a control call; PX_L3_ORPHAN */
    int dead;                         /* exited or killed: fail everything sent to it */
    int dfx_told;                     /* dead: the DFX merge said once that its data is
                                       * missing (later runs say it at info) */
    int reaped;                       /* waitid has collected it */
    char death[PX_HIER_DEATH_MAX];    /* "chip 1 (pid 42) died: killed by signal 9 (SIGKILL)" */
    char killed[160];                 /* why the parent killed it ("" when it did not) */
    /* control calls (ctl.c), under h->lock: whose answer each position in flight is */
    struct hier_call *ord_call[PX_MB_DEPTH];     /* call ring (PX_L3_CONTROL positions) */
    struct hier_call *ctl_call[PX_MB_CTL_DEPTH]; /* control ring; NULL: answer dropped */
    uint64_t ctl_posted, ctl_completed;          /* control ring positions */
    uint64_t ctl_read;                           /* answers read (drain_lock) */
} px_hier_proc;

/* DFX: one callable call a chip ran during the run: which host task it was and which of the
 * chip engine's task ids its px_run gave (raw ids; the merge renumbers them as the files do). */
typedef struct px_hier_dfx_call {
    px_task_id host_task;
    int chip;
    uint64_t first_task, ntasks;
} px_hier_dfx_call;

enum px_l3_kind { PX_L3_NEXT = 1, PX_L3_GROUP, PX_L3_HOST };

/* An in-flight table entry whose call belongs to a group that has finished already (another
 * member died): its completion is counted and otherwise ignored. Together with completions
 * consuming their entries, this keeps the rule that no thread but the orchestration reads the
 * side-table entry of a finished task, so the orchestration rewrites entries without a lock. */
#define PX_L3_ORPHAN (PX_TASK_NONE - 1)

/* An in-flight table entry of a control call of the ordered route (ord_call has the call). */
#define PX_L3_CONTROL (PX_TASK_NONE - 2)

/* A group task's per-chip calls and progress (malloc'd; freed when its slot is reused). */
typedef struct px_l3_group {
    int n;
    int remaining;           /* chips whose part has not completed (under h->lock) */
    int finished;            /* px_task_complete was called (early, on a death) */
    px_status st;            /* the first error */
    char msg[PX_MB_MSG_MAX + 128];
    int survive;             /* HIER_GROUP_SURVIVE: a member's death fails only its part */
    int ndead;               /* members that died while it ran (survive) */
    char death[PX_MB_MSG_MAX]; /* the first one's death, for the messages */
    int *chips;              /* n entries, after the struct */
    px_task_args *args;      /* n entries */
} px_l3_group;

/* What one level-3 task needs beyond its px_task slot; indexed by id & side_mask. */
typedef struct px_l3_slot {
    int32_t kind;            /* px_l3_kind */
    int32_t callable;
    int32_t chip;            /* next-level: target chip */
    px_host_fn fn;           /* host */
    void *user;
    px_l3_group *group;      /* group */
    px_task_id next_pending; /* link of the pending queue; PX_TASK_NONE ends it */
} px_l3_slot;

enum px_hier_state { PX_HIER_CREATED = 0, PX_HIER_INITED, PX_HIER_FAILED };

/* A row of the control table (ctl.c). */
typedef struct hier_ctl_kind {
    char name[PX_KERNEL_NAME_MAX];
    int route;                    /* hier_ctl_route */
    hier_ctl_cb fn;
    void *arg;
} hier_ctl_kind;

/* A chip service (service.c). */
typedef struct hier_service {
    char name[PX_KERNEL_NAME_MAX];
    hier_service_start_cb start;
    hier_service_stop_cb stop;
    void *arg;
} hier_service;

/* One control call in flight (ctl.c): per chip its answer and whether it is still owed. */
typedef struct hier_call {
    struct px_hier *h;
    int kind;
    int n;
    int remaining;                /* answers still owed (under h->lock) */
    hier_call_result *res;        /* n entries, after the struct */
    char *owed;                   /* n flags */
} hier_call;

typedef struct px_hier {
    px_worker *w;                 /* the host engine */
    px_config cfg;                /* the user's configuration (chips, cores per chip, subs) */
    int state;                    /* px_hier_state */
    int nchips, nsubs, nprocs;
    int chip_cores;               /* core threads of each chip's engine */
    pid_t parent_pid;
    int pdeath;                   /* children ask for SIGKILL at the forking thread's end
                                   * (PR_SET_PDEATHSIG follows that thread, not the process):
                                   * only when it is the main thread */

    px_hier_callable callables[PX_HIER_MAX_CALLABLES];
    int ncallables;
    int nkernels;                 /* chip kernels: the host engine's first nkernels */
    px_kernel_id k_next, k_group, k_host; /* executors on the host engine */

    px_hier_proc procs[PX_HIER_MAX_PROCS];
    px_doorbell *bell;            /* shared with every child */
    size_t bell_len;
    int bell_fd;
    struct {
        const hier_hooks *hooks;
        void *arg;
    } hooks[HIER_HOOKS_MAX];      /* the layers above's (hier_hooks_register) */
    int nhooks;
    int user_kernels;             /* kernels the user registered (the first ones) */
    hier_deaths *deaths;          /* shared with every child: who died, and how */
    size_t deaths_len;
    int deaths_fd;

    pthread_mutex_t lock;
    px_l3_slot *side;             /* 2 x task ring entries */
    uint64_t side_mask;
    px_task_id pend_head, pend_tail; /* pending queue of dispatches, FIFO */
    uint64_t npending;

    int dfx;                      /* DFX on: chips record sessions, a run ends by merging */
    px_hier_dfx_call *dfx_calls;  /* DFX: the chips' completed callable calls of the run, in
                                   * completion order (lock); the merge reads and clears it */
    size_t ndfx_calls, cap_dfx_calls;
    hier_call *dfx_flush;         /* the flush call of the run ending now (dfx_l3.c) */
    int k_dfx_flush;              /* its control kind */

    hier_ctl_kind ctl[HIER_CTL_MAX]; /* the control table (ctl.c) */
    int nctl;
    pthread_cond_t ctl_cv;        /* broadcast (under lock) when a control call is answered */
    pthread_cond_t orphan_cv;     /* broadcast (under lock) when an orphan's call completes or
                                   * a child dies (hier_orphans_wait) */
    _Atomic uint32_t ctl_open;    /* service-route calls posted and not yet answered or
                                   * failed: the readers of completions skip the control
                                   * rings (another page of each mailbox) while it is 0 */
    int k_fd_in, k_fd_out;        /* fd passing's own control kinds (fdpass.c) */
    pthread_mutex_t fd_lock;      /* one descriptor transfer at a time (fdpass.c) */
    uint64_t fd_batch;            /* batches sent so far (fd_lock) */
    hier_service services[HIER_SERVICE_MAX];
    int nservices;

    pthread_mutex_t drain_lock;   /* one reader of the completion rings at a time: the
                                   * watch thread, or the orchestration while it waits */
    pthread_t watch;
    int watch_started;
    _Atomic int watch_stop;
    pthread_t deathwatch;         /* sleeps in poll() on the children's pidfds (watch.c) */
    int deathwatch_started;
    int death_efd;                /* the eventfd that ends the death watch's poll; -1: none */
    uint64_t spin_ticks;
    uint64_t yield_ticks;
} px_hier;

/* forksafe.c: the libraries of the process around the chips' fork. */
#define HIER_FORK_BLAS_MAX 4
#define HIER_FORK_RANGES 4

typedef struct hier_fork_blas {
    char path[256];
    void (*set)(int);             /* its openblas_set_num_threads */
    int saved;                    /* its thread count before the fork */
    int pool;                     /* its pool workers */
    int asleep;                   /* of them seen asleep at the last look */
    uintptr_t lo[HIER_FORK_RANGES], hi[HIER_FORK_RANGES]; /* its writable segments */
    int nranges;
} hier_fork_blas;

typedef struct hier_fork_libs {
    int threads;                  /* this process's threads before the fork */
    hier_fork_blas blas[HIER_FORK_BLAS_MAX];
    int nblas;
    double idle_ms;               /* how long the pools took to go idle */
    int unreadable;               /* /proc/self/task/N/syscall could not be read */
    int locked;                   /* between prepare and finish (one init at a time) */
} hier_fork_libs;

/*
 * Before the first fork of px_worker_init: refuses what cannot be forked safely (MPI
 * initialised, GNU OpenMP beside other threads) and quiesces OpenBLAS's pools (one thread,
 * then bounded wait until its workers sleep). Returns PX_OK with *fl to be given to
 * hier_fork_finish after the forks, or PX_ESTATE naming the library and what to do (nothing
 * left changed).
 */
px_status hier_fork_prepare(hier_fork_libs *fl);

/* After the forks (in the parent): gives every quiesced OpenBLAS its thread count back. */
void hier_fork_finish(hier_fork_libs *fl);

/* In a child, first thing: the one-init-at-a-time lock afresh (the forking init holds it). */
void hier_fork_child(void);

/* One line for the log: the threads, and each quiesced library. */
void hier_fork_describe(const hier_fork_libs *fl, char *buf, size_t n);

/* What a chip's threads hand each other through the parent (util/tsan.h); service.c. */
extern char hier_xproc_token;

/* The level-3 state of a worker. */
static inline px_hier *px_hier_of(px_worker *w)
{
    return (px_hier *)w->ext.owner;
}

/* The side-table entry of task id. */
static inline px_l3_slot *px_hier_side(px_hier *h, px_task_id id)
{
    return &h->side[id & h->side_mask];
}

/* The context of a chip process (service.c, chip.c): what the chip owns. It reads the
 * parent's px_hier as copied at fork only for the tables registered before the fork
 * (configuration, callables, kernels, control kinds, services). */
struct hier_chip {
    px_hier *h;                   /* the parent's state as of the fork (read only) */
    px_hier_proc *proc;
    int index;
    pid_t pid;
    px_mailbox *mb;
    int sock;                     /* this chip's end of the socketpair */
    px_worker *engine;            /* the chip's level-2 engine */
    int nstarted;                 /* services started (stopped in reverse order) */
    pthread_t service;            /* the service thread: answers the control ring */
    int service_started;
    _Atomic int stop;
    pthread_mutex_t fd_lock;      /* the descriptor table (service thread and handlers) */
    struct { uint64_t tag; int fd; int offered; } fds[HIER_CHIP_FDS]; /* fd -1: free */
    _Atomic uint64_t silent;      /* chips the current call found silent (hier_chip_blame) */
};

/* service.c: builds the chip context, starts the services and the service thread. Returns
 * PX_OK, or the first failure (message set). */
px_status hier_chip_start(hier_chip *chip);

/* service.c: stops the service thread and the services (reverse order). */
void hier_chip_stop(hier_chip *chip);

/* ctl.c: runs control call c (a call ring or control ring entry) in the chip; fills d. */
void hier_ctl_run(hier_chip *chip, const px_mb_call *c, px_mb_done *d);

/* ctl.c: an ordered-route answer read from p's call ring at position pos (h->lock held). */
void hier_ctl_ordered_done(px_hier *h, px_hier_proc *p, uint64_t pos, const px_mb_done *d);

/* ctl.c: reads p's control-ring answers (drain_lock held); returns how many. */
int hier_ctl_drain(px_hier *h, px_hier_proc *p);

/* ctl.c: p died: fails its control calls in flight (h->lock held). */
void hier_ctl_on_death(px_hier *h, px_hier_proc *p);

/* fdpass.c: registers fd passing's control kinds (px_hier_create). */
px_status hier_fd_setup(px_hier *h);

/* chip.c: the main function of a forked child; never returns. */
void px_hier_child_main(px_hier *h, px_hier_proc *p) __attribute__((noreturn));

/* chip.c: PX_OK when the system can hold the threads of every chip, sub-worker and the host
 * (px_rt_threads_fit), else PX_ENOMEM naming the limit: checked before the first fork. A
 * chip's threads beside its cores: its service thread, comm progress thread and DFX drain; a
 * sub-worker's: its main and service threads; the host's: its cores, watch and drain. */
#define PX_HIER_CHIP_THREADS 3
#define PX_HIER_SUB_THREADS 2
#define PX_HIER_HOST_THREADS (PX_HIER_HOST_CORES + 2)
px_status px_hier_threads_fit(const px_hier *h);

/* dispatch.c: the executors, registered on the host engine at px_hier_init. */
px_status px_hier_register_executors(px_hier *h);

/* dispatch.c: handles one completion read from proc p's ring (drain_lock held, h->lock not). */
void px_hier_on_done(px_hier *h, px_hier_proc *p, const px_mb_done *d);

/* dispatch.c: marks p dead and fails its calls in flight and pending (watch thread, drain_lock
 * held). */
void px_hier_on_death(px_hier *h, px_hier_proc *p, const char *death);

/* watch.c: starts and stops the completion and death-watch thread. */
px_status px_hier_watch_start(px_hier *h);
/* Around a blocking wait of the orchestration's thread on what the children answer (a
 * condition variable that only a reader of the rings signals): lowers the doorbell's polling
 * flag, so the children ring and the watch thread reads their completions at once, not at its
 * next periodic look (the orchestration does not poll while it sleeps); returns the flag as it
 * was, for px_hier_polling_resume. Called without h->lock and drain_lock held. */
uint32_t px_hier_polling_pause(px_hier *h);
void px_hier_polling_resume(px_hier *h, uint32_t was);
void px_hier_watch_stop(px_hier *h);

/* watch.c: reads proc p's completions posted so far (drain_lock held). */
int px_hier_drain_done(px_hier *h, px_hier_proc *p);

/* watch.c: fills the host engine's extension interface (w->ext.ops): the orchestration's
 * polling of the completion rings, and the DFX flush and merge at the end of a run. */
void px_hier_poller_setup(px_hier *h);

/*
 * watch.c (h->lock held): kills proc p, which the parent found silent (why: what waited for it
 * past its deadline, e.g. "control call \"x\" waited for it past its deadline"), once:
 * SIGKILL ends a stopped process too, the death watch then fails everything sent to it with
 * PX_EPEERDEAD at once, and its death message carries "killed by plexus: <why>". Logged at
 * warn with its pid and state. Returns 1 when it killed p now, 0 when p was dead or killed.
 */
int px_hier_silence(px_hier *h, px_hier_proc *p, const char *why);

/* watch.c: describes how p ended ("killed by signal 9 (SIGKILL)") if it has; reaps it. Returns
 * 1 when it had ended, 0 when it still runs. */
int px_hier_reap(px_hier_proc *p, int block, char *how, size_t n);

/* hier.c: finds the level-3 worker whose active run owns orchestration o, without touching
 * o. Returns PX_OK with *h, or PX_ESTATE with a message naming `what`. */
px_status px_hier_from_orch(px_orch *o, const char *what, px_hier **h);

/* submit.c: the host engine's host_task hook (px_rt_ext_ops): px_submit_host with explicit
 * edges and no user pointer, for the runtime's staging copies. Returns px_submit_host's
 * status. */
px_status px_l3_host_task(void *owner, px_orch *o, px_host_fn fn, px_task_args *a,
                          const px_task_id *deps, int ndeps, px_task_id *id);

/* Name of a proc for messages: "chip 1" or "sub-worker 0". */
const char *px_hier_proc_kind(const px_hier_proc *p);

/* ---- DFX at level 3 (dfx_l3.c, dfx_l3_merge.c) ---- */

/* dfx_l3.c: at create, when the host engine records DFX: checks that the chips' output
 * directories fit and hooks the flush and the merge into the end of the host's runs. Returns
 * PX_OK or PX_EINVAL (message set). */
px_status px_hier_dfx_setup(px_hier *h);

/* dfx_l3.c: the host engine's dfx_flush and dfx_merge hooks (px_rt_ext_ops; owner: the
 * px_hier). Both do nothing when the worker records no DFX. */
void px_hier_dfx_flush(void *owner);
px_status px_hier_dfx_merge(void *owner);

/* dfx_l3.c: writes chip `chip`'s output directory (OUT/chips/chip<i>) into out (n bytes). */
void px_hier_dfx_chip_dir(const px_hier *h, int chip, char *out, size_t n);

/* What the merge knows about one chip. */
typedef struct px_hier_dfx_chip {
    int chip;
    pid_t pid;
    px_status st;                 /* its flush: PX_OK, or why it has no usable files */
    char msg[PX_MB_MSG_MAX];
} px_hier_dfx_chip;

/* dfx_l3_merge.c: merges the host's outputs in dir with every chip's (from chips/chip<i>/)
 * through the DFX merge (dfx_merge_run, level 3), with the call log, the deaths and the
 * additions of h's layers above (h may be NULL: none). Returns PX_OK, PX_EINVAL when a file
 * does not parse or lacks a member, PX_ENOENT / PX_EIO / PX_ENOMEM (message set). */
px_status px_hier_dfx_merge_files(const char *dir, int nchips, const px_hier_dfx_chip *chips,
                                  const px_hier *h);

#endif
