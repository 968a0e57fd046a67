/*
 * runtime.h - internal structures of the single-chip runtime (level 2).
 *
 * Threads: the orchestration runs on the caller of px_run; each core is a thread, started and
 * joined through the platform (px_plat_core_start), which also launches and polls its
 * kernels (px_plat_launch, px_plat_poll). There is no scheduler thread. A task lives in a
 * slot of the task ring from submit until the watermark (every older task finished) passes
 * it. Edges are records in the dep ring, pushed lock-free
 * onto the producer's fanout list; a finishing task closes its list with one exchange,
 * releases its consumers, keeps one newly ready task for its core and queues the rest.
 */
#ifndef PX_RUNTIME_RUNTIME_H
#define PX_RUNTIME_RUNTIME_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include <plexus/caps.h>
#include <plexus/level3.h>
#include <plexus/worker.h>

#include "dfx/emit.h"
#include "heap.h"
#include "platform/platform.h"
#include "readyq.h"
#include "tensormap.h"
#include "util/argcheck.h"
#include "util/util.h"

#define PX_MAX_KERNELS 1024
#define PX_MAX_SCOPES 64
#define PX_ERRMSG_MAX 1024

struct px_task;

/* One dependency: `consumer` waits for the task whose fanout list holds this record. */
typedef struct px_edge {
    struct px_task *consumer;
    struct px_edge *next;
} px_edge;

#define PX_FANOUT_CLOSED ((px_edge *)(uintptr_t)1)

enum { PX_TASK_PENDING = 0, PX_TASK_DONE = 1 };

/*
 * A task's fanin while its submit wires it: every producer wired decrements it once, so it
 * cannot reach 0 before the submit has counted the edges (at most PLEXUS_DEP_RING, 2^28, far
 * below) and subtracts the guard less that count in one locked instruction.
 */
#define PX_FANIN_GUARD (INT32_C(1) << 30)

/* Slots a full task ring of `ring` slots waits to have free before submitting goes on: a
 * sixteenth of the ring, at least 1 (orch.c, px_orch_ring_full). */
#define PX_RING_BATCH(ring) ((ring) >= 16 ? (ring) / 16 : 1)

typedef struct px_task {
    /* written at submit by the orchestration */
    px_task_id id;
    px_kernel_id kernel;
    uint64_t dep_end;               /* dep ring position after this task's edges */
    px_task_id counted_by;          /* the last consumer that counted this task among its
                                     * producers (orchestration only: a submit's dedup) */
    /* shared with the cores */
    PX_ALIGNED_CL _Atomic int32_t fanin;   /* producers not yet finished; while wiring,
                                     * PX_FANIN_GUARD less the wired producers finished */
    _Atomic uint32_t poisoned;      /* a producer failed: do not run the kernel */
    _Atomic(px_edge *) fanout;      /* consumers, or PX_FANOUT_CLOSED once released */
    _Atomic uint32_t state;         /* futex word: PX_TASK_PENDING / PX_TASK_DONE */
    _Atomic uint32_t waiters;       /* the orchestration sleeps on state */
    px_task_args args;              /* only args.a[0 .. n) are copied */
} px_task;

struct px_worker;

/*
 * A dispatch function stands in for a kernel that only hands its task to someone else and
 * returns PX_TASK_ASYNC (level 3's executors post a call to a child process). It never blocks
 * and must not call px_task_complete with PX_OK for a task other than id while holding a lock
 * it takes itself. With DFX off the engine calls it right in the thread that makes the task
 * ready (the orchestration at submit, or whoever completes a producer) instead of queueing the
 * task for a core: one thread hand-off fewer per task. Poisoned tasks and runs recording DFX
 * take the queue and the kernel as usual.
 */
typedef void (*px_dispatch_fn)(struct px_worker *w, px_task_id id);

typedef struct px_kernel {
    char name[PX_KERNEL_NAME_MAX];
    px_kernel_fn fn;
    px_dispatch_fn dispatch;        /* or NULL: see px_dispatch_fn */
    px_signature sig;
    int has_sig;
} px_kernel;

struct px_core_ctx {
    struct px_worker *w;
    int index;
    px_task_id task;
    px_plat_core core;              /* the platform's core (its thread on sim) */
    int joined;                     /* its core has been joined, or never started
                                     * (px_cores_stop) */
    _Atomic int in_kernel;          /* inside the kernel of `task` now (px_cores_stop names it) */
    uint64_t executed;
    _Atomic(px_dfx_producer *) dfx; /* DFX producer of the current run, or NULL (rt_dfx.c) */
    uint64_t dfx_t0;                /* DFX time stamp of the current task's begin (rt_dfx.c) */
    uint64_t dfx_t2;                /* the last TASK entry's release end, 0 once used: the
                                     * start of the core's next wait (core.c), or the begin
                                     * of the task it runs next without one (rt_dfx.c) */
    int dfx_handed_off;             /* an async kernel wrote its end records (or had none to
                                     * write): the core leaves the DFX state alone after it */
    uint64_t idle_slice_ns;         /* 0: work in sight (spin first); else no work in sight:
                                     * sleep at once for this long (core.c) */
} PX_ALIGNED_CL;

typedef struct px_scope {
    uint64_t first_rec;             /* heap record sequence number at scope begin */
} px_scope;

#define PX_DEDUP_SMALL 8

/* Deduplicates the producers of one submit whose slots were reused (those still in their
 * slots are stamped there, px_task.counted_by): the first PX_DEDUP_SMALL in `small`, searched
 * in order when their bit in `bits` says one may match; past that all of them in a hash set
 * (open addressing, stamped by the consumer id). */
typedef struct px_dedup {
    px_task_id small[PX_DEDUP_SMALL];
    uint64_t bits;                  /* bit (id & 63) of each id in small */
    uint32_t n;                     /* producers inserted (n > PX_DEDUP_SMALL: in the hash) */
    uint32_t hn;                    /* producers in the hash set */
    px_task_id *keys;
    px_task_id *stamps;
    uint32_t cap;
} px_dedup;

/* A host array staged this run (stage.c, px_tensor_from_host): dev the device copy of host
 * bytes [lo, hi), t its 1-d tensor, depth the scope count when made (copied back, when
 * written, as that scope ends). The arrays used in place are px_orch.host's ranges. */
typedef struct px_stage_group {
    uintptr_t lo, hi;
    void *dev;
    px_tensor t;
    int depth;
    int written;
    int contiguous;                 /* the first array's elements are all of [lo, hi) */
    int run_arg;                    /* a block of px_run's args (run area, depth 0): copied
                                     * back after the drain (rt_stage_run_args_back) */
    px_tensor *views;               /* strided: the written views, copied back one by one */
    int nviews, capviews;
    char name[64];                  /* the argument that staged it, for messages */
} px_stage_group;

/* A copy-back task submitted this run, for the host bytes [lo, hi). */
typedef struct px_stage_pend {
    uintptr_t lo, hi;
    px_task_id id;
} px_stage_pend;

typedef struct px_stage {
    px_stage_group *groups;
    int ngroups, capgroups;
    px_stage_pend *pend;
    int npend, cappend;
    char reason[PX_ERRMSG_MAX];     /* the first refusal of in place this run, or "" */
} px_stage;

struct px_orch {
    struct px_worker *w;
    px_task *cur;                   /* the task being submitted */
    px_task_id next_id;             /* id of the next task */
    px_task_id first_id;            /* first id of this run */
    px_task_id wm;                  /* watermark: every task below it has finished */
    uint64_t dep_head, dep_tail;    /* dep ring positions */
    uint64_t dep_pos;               /* dep_head % the dep ring's size: the next record */
    px_scope scopes[PX_MAX_SCOPES];
    int nscopes;
    px_dedup dedup;
    px_status dep_err;              /* error raised inside a tensor-map callback */
    px_run_stats stats;
    px_dfx_producer *dfx;           /* DFX producer of the current run, or NULL (rt_dfx.c) */
    uint32_t submit_polls;          /* submits since the poller last read at one */
    args_rules rules;               /* a submit's argument rules, set for the run (all but
                                     * the kernel's name) */
    args_cache arg_cache;           /* tensors the submits of this run have accepted */
    struct {
        void *lo;
        size_t n;
    } host[PX_HOST_RANGES_MAX];     /* host memory registered this run (px_tensor_host) */
    int nhost;
    px_stage stage;                 /* host arrays of this run (stage.c) */
};

/*
 * The extension interface of an engine: what the level above (src/hier) fills so that an
 * engine can serve as a level-3 host or chip, without src/runtime calling up into it. All zero
 * at level 2. A new user (the communication domains) hangs its state off `owner` or adds a
 * hook here: one member, not a field per feature in px_worker.
 *
 * Hooks (ops, all optional; every one gets `owner`):
 *   poll, polling, alone: the host engine's orchestration thread reads the children's
 *     completions itself instead of waiting for the watch thread. polling(owner, 1) when the
 *     orchestration starts and after it wakes from a sleep; polling(owner, 0) before it sleeps
 *     and once the run has drained; poll(owner) at every 8th submit and on every turn of a
 *     wait's spin and yield phases (returns how many completions it handled). alone() returns
 *     0 when a process with work in flight last ran on this CPU: a wait then skips its spin.
 *   dfx_flush, dfx_merge: the end of the host engine's DFX run. dfx_flush runs before the
 *     host's own px_dfx_finish (the chips finish their DFX sessions), dfx_merge after the
 *     host's files are written (wait for the chips, merge); it returns PX_OK or its error,
 *     with the message set.
 *   task_late: task `id`, still in flight, passed its deadline (PLEXUS_TIMEOUT_S): writes
 *     where it runs (" on chip 1 (pid 42, stopped)") into where (nw bytes) and what the level
 *     above did about it ("; chip 2 (pid 43, stopped) had task 7 in flight past the deadline:
 *     plexus killed it (SIGKILL)") into done (nd bytes), for the timeout's message. Level 3
 *     kills the chips that had calls in flight past the deadline, so no later wait (the
 *     drain, the run's end, the shutdown) waits for them again.
 *   run_end: px_run is about to return st (the graph has drained, or never started).
 *   host_task: submits host task fn(a, NULL) after deps (px_submit_host with explicit
 *     edges): the copies of staged host arrays at level 3 (stage.c).
 */
typedef struct px_rt_ext_ops {
    int (*poll)(void *owner);
    void (*polling)(void *owner, int on);
    int (*alone)(void *owner);
    void (*dfx_flush)(void *owner);
    px_status (*dfx_merge)(void *owner);
    void (*task_late)(void *owner, px_task_id id, char *where, char *done, size_t nw,
                      size_t nd);
    void (*run_end)(void *owner, px_status st);
    px_status (*host_task)(void *owner, px_orch *o, px_host_fn fn, px_task_args *a,
                           const px_task_id *deps, int ndeps, px_task_id *id);
} px_rt_ext_ops;

typedef struct px_rt_ext {
    void *owner;                    /* the level above's state (level 3: its px_hier) */
    const px_rt_ext_ops *ops;       /* hooks, or NULL */
    int caller_core;                /* core 0 has no thread: the caller of px_run runs its
                                     * tasks while the orchestration waits (level-3 chips) */
    int bind_first;                 /* PLEXUS_BIND=cores: the bind slot of core 0 (a level-3
                                     * chip: its index x its cores, so chips do not share) */
    int no_wall_time;               /* px_run leaves last.wall_ns 0: two TSC reads saved per
                                     * call of a level-3 chip, whose stats nobody reads */
    int dfx_chip;                   /* chip index written into the DFX outputs */
    int dfx_session;                /* a chip engine: one DFX state spans its runs until
                                     * px_rt_dfx_session_end (the parent's flush call) */
    const char *dfx_core_name;      /* producer name of the cores; NULL: "core" */
    size_t dfx_own_from;            /* a chip engine: its DFX path's length that is the user's
                                     * output directory (px_dfx_params.own_from) */
} px_rt_ext;

/* extra device ranges of an engine (px_rt_device_range_add): communication windows and the
 * host memory a run registers (px_tensor_host, at most PX_HOST_RANGES_MAX of them) */
#define PX_RT_DEV_EXTRA (32 + PX_HOST_RANGES_MAX)

struct px_worker {
    px_config cfg;
    int level;                      /* 2, or 3 for the host side of a level-3 worker */
    int bind_ncpu;                  /* PLEXUS_BIND=cores: CPUs in bind_set; 0: no binding */
    cpu_set_t bind_set;             /* the CPUs the process could use at worker create */
    int cores_started;
    px_rt_ext ext;                  /* what the level above sets (level 3); zero at level 2 */
    px_caps caps;
    px_chip *chip;
    int ncores;
    px_core_ctx *cores;

    px_kernel kernels[PX_MAX_KERNELS];
    int nkernels;
    px_kernel_id stage_copy_kid;    /* 1 + the id of "plexus.copy" (stage.c), 0: none yet */

    /* task ring, dep ring, ready queue */
    px_task *tasks;
    uint64_t task_mask;
    px_edge *edges;
    uint64_t dep_size;
    int ndispatch;                  /* kernels with a dispatch function (level-3 host) */
    px_readyq readyq;

    /* idle cores sleep on wake_seq; pushers wake them only when sleepers > 0. Every push
     * reads sleepers: it shares no line with spinning, which an idle core changes twice per
     * wait, so that a push does not miss on a line the core just wrote. */
    PX_ALIGNED_CL _Atomic uint32_t wake_seq;
    _Atomic uint32_t sleepers;
    PX_ALIGNED_CL _Atomic uint32_t spinning; /* idle cores spinning on the ready queue */
    _Atomic int shutdown;
    uint64_t spin_ticks;            /* busy-wait budget of a waiter (PLEXUS_SPIN_NS) */
    uint64_t yield_ticks;           /* then polling with sched_yield (PLEXUS_YIELD_NS) */

    /* device memory: run args at the arena's start, heap ring at its end */
    char *dev_base;
    uint64_t run_area;              /* bytes before the heap ring */
    px_heap heap;
    px_tmap tmap;
    px_orch orch;
    int running;                    /* inside px_run */
    int broken;                     /* a run timed out with tasks still running */

    /* first failure of the current run */
    PX_ALIGNED_CL _Atomic int failed;
    pthread_mutex_t fail_lock;
    px_status fail_status;
    px_task_id fail_task;
    char fail_msg[PX_ERRMSG_MAX];

    px_run_stats last;

    /* extra device memory (px_rt_device_range_add): lo 0 marks a free entry */
    struct {
        _Atomic uintptr_t lo, hi;
    } dev_extra[PX_RT_DEV_EXTRA];

    /* DFX (rt_dfx.c): the arena region of its buffers and the current run's state */
    char *dfx_region;
    uint64_t dfx_region_bytes;
    struct px_dfx *dfx;
};

/* A kernel returning this leaves its task running; px_task_complete() finishes it. */
#define PX_TASK_ASYNC ((px_status)1)

/* worker.c: creates a worker from c (NULL: defaults and environment) with its chip arena;
 * starts the core threads only if start_cores (level 3 forks its chips first). */
px_status px_rt_worker_create(const px_config *c, int start_cores, px_worker **out);
px_status px_rt_worker_destroy(px_worker *w);
px_status px_rt_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                                const px_signature *sig, px_kernel_id *id);

/* worker.c: gives kernel k a dispatch function (see px_dispatch_fn). */
void px_rt_kernel_set_dispatch(px_worker *w, px_kernel_id k, px_dispatch_fn fn);

/* worker.c: finds a kernel by name among the first `limit` registered. */
px_status px_rt_kernel_lookup(px_worker *w, const char *name, int limit, px_kernel_id *id);

/* orch.c: submit without the level check (level 3 submits its own executors' kernels). */
px_status px_rt_submit(px_orch *o, px_kernel_id k, px_task_args *a, const px_task_id *deps,
                       int ndeps, px_task_id *id);

/*
 * orch.c: the orchestration that px_run runs on this thread, or NULL (on core threads, in
 * kernels that core 0 runs on its caller's thread, in host tasks, outside px_run). Set by
 * px_run around its orchestration (saved and restored, so a nested px_run on another worker
 * is fine). Initial-exec TLS: one load, no call, on every orchestration call.
 */
extern _Thread_local px_orch *px_rt_orch_here __attribute__((tls_model("initial-exec")));

/* orch.c: the message of px_rt_orch_check's refusal. */
px_status px_rt_orch_misplaced(const px_orch *o, const char *what);

/*
 * The one check of every orchestration call (submits, scopes, px_tensor_alloc, level 3's
 * submits): o must be the orchestration running on this thread. Returns PX_OK, PX_EINVAL for
 * NULL, or PX_ESTATE (a kernel, a host task, another thread, a handle whose run returned or
 * whose worker was destroyed), without dereferencing o.
 */
static inline px_status px_rt_orch_check(const px_orch *o, const char *what)
{
    if (PX_LIKELY(o != NULL && o == px_rt_orch_here))
        return PX_OK;
    return px_rt_orch_misplaced(o, what);
}

/* stage.c: the host-array table of a run: emptied at the run's begin (px_run, before it
 * places its args), freed with the worker;
 * rt_stage_scope_end submits the copy-backs of the written copies made at scope depth `depth`
 * or deeper (px_scope_end, and the run's end with depth 1) and forgets them; once a task of
 * the run has failed it submits nothing (the run is lost). Returns PX_OK or the first
 * submit's error. */
/* stage.c: registers the staging copy kernel "plexus.copy" on level-2 worker w unless it is
 * (on first need, or before a DFX run so that its traces name the copies). Returns PX_OK or
 * px_kernel_register's error. */
px_status rt_stage_copy_kernel(px_worker *w);
void rt_stage_reset(px_stage *s);
/* stage.c: calls fn(arg, off, n) for each run of view t's elements, off being the run's byte
 * offset from t's first element and n its bytes: one run for a contiguous view, one per row
 * where the last stride is 1, else one per element; never the bytes between them. Returns
 * PX_OK, or fn's first error (the runs after it are not visited). */
px_status rt_stage_view_runs(const px_tensor *t, px_status (*fn)(void *arg, size_t off,
                                                                size_t n), void *arg);
void rt_stage_free(px_stage *s);
px_status rt_stage_scope_end(px_orch *o, int depth);

/* stage.c: px_run's arg blocks join the run's table (a host array inside one is a view of
 * it: bytes have one device copy per run); rt_stage_run_arg adds the block at host [lo, hi),
 * device dev (PX_OK or PX_ENOMEM). After the drain rt_stage_run_args_back copies back the
 * views px_tensor_from_host wrote inside them, each view's own elements, through copy(arg,
 * host, dev, n); returns PX_OK or copy's first error. */
px_status rt_stage_run_arg(px_stage *s, uintptr_t lo, uintptr_t hi, char *dev);
px_status rt_stage_run_args_back(px_stage *s, px_status (*copy)(void *arg, char *host,
                                                              const char *dev, size_t n),
                                 void *arg);

/* orch.c: allocates every OUT tensor of a that has no address in the enclosing scope,
 * writing the address back. Returns PX_OK or px_tensor_alloc's error. */
px_status px_rt_alloc_outputs(px_orch *o, px_task_args *a);

/* core.c: finishes a task whose kernel returned PX_TASK_ASYNC (any thread). A non-zero st
 * fails the run with msg, as a failing kernel does. */
void px_task_complete(struct px_worker *w, px_task_id id, px_status st, const char *msg);

/* core.c: a worker with ext.caller_core: runs ready tasks as core 0 on the calling thread until
 * the ready queue is empty. Returns how many ran. */
int px_core_help(struct px_worker *w);

/*
 * core.c: starts and stops the core threads (not core 0's when w->ext.caller_core). Start returns
 * PX_OK, or PX_ENOMEM with no thread left running. Stop tells the cores to exit and joins each
 * until grace_s seconds have passed; a core still inside a kernel then is left running and
 * stop returns PX_ETIMEDOUT naming it and its kernel (calling stop again later joins what
 * has exited since). Stop on stopped cores returns PX_OK.
 */
px_status px_cores_start(struct px_worker *w);

/*
 * limits.c: threads a worker is about to start: `procs` new processes of `per_proc` threads
 * each, `cores` of them core threads (per process; procs 0: of `here`), and `here` new threads
 * in this process. px_rt_threads_fit returns PX_OK when the system can hold them, or
 * PX_ENOMEM naming the limit they would pass (kernel.pid_max, kernel.threads-max,
 * RLIMIT_NPROC, RLIMIT_AS, vm.max_map_count, the commit limit, available memory), the
 * numbers, how many cores per `unit` would fit, and what to lower (`lower`) or raise.
 * px_cores_start checks a level-2 worker's cores; level 3 checks every chip's before forking.
 */
typedef struct px_thread_plan {
    const char *what;   /* "level 3: 32 chips x 1024 cores" */
    const char *unit;   /* "chip" */
    const char *lower;  /* "--cores / PLEXUS_CORES or --chips / PLEXUS_CHIPS" */
    int procs, per_proc, cores, here;
} px_thread_plan;

px_status px_rt_threads_fit(const px_thread_plan *p);

/*
 * core.c, thread placement (PLEXUS_BIND=cores, level 2 and chips): px_bind_init records the
 * CPUs the process may use (sched_getaffinity) or logs why binding is off; px_bind_cpu returns
 * the CPU of bind slot `core` (ext.bind_first + core, modulo the CPUs), or -1 when binding is
 * off. Core i takes slot i; the orchestration takes slot ncores (a CPU of its own) when the
 * process has more CPUs than cores, else core 0's. px_bind_self binds the calling thread to
 * the orchestration's CPU and saves its old mask in *old (returns 1), or does nothing
 * (returns 0); px_bind_restore puts the saved mask back.
 */
void px_bind_init(struct px_worker *w);
int px_bind_cpu(const struct px_worker *w, int core);
int px_bind_self(const struct px_worker *w, cpu_set_t *old);
void px_bind_restore(const cpu_set_t *old);

/* core.c: the CPU for the DFX drain under PLEXUS_BIND=cores, -1 when binding is off: a CPU of
 * its own after the cores' and the orchestration's when there is one, else the last core's
 * (the orchestration, the serial part of a run, keeps its CPU to itself or to core 0). */
int px_bind_drain_cpu(const struct px_worker *w);
px_status px_cores_stop(struct px_worker *w, double grace_s);

/* core.c: makes a task runnable (queue + wake). Called by the orchestration and by cores. */
void px_task_ready(struct px_worker *w, px_task *t);

/* Returns the slot of task id. */
static inline px_task *px_task_slot(struct px_worker *w, px_task_id id)
{
    return &w->tasks[id & w->task_mask];
}

/* orch.c: per-run setup and the drain at the end. */
px_status px_orch_begin(struct px_worker *w);
px_status px_orch_drain(struct px_orch *o);
void px_orch_end(struct px_orch *o);

/* ---- rt_dfx.c: the runtime's side of DFX (each returns PX_OK when DFX is off) ---- */

/* Worker creation: reserves the DFX region of the arena, checks a transport is left. */
px_status px_rt_dfx_setup(struct px_worker *w);

/* px_run start: creates the run's DFX state and hands each thread its producer. */
px_status px_rt_dfx_begin(struct px_worker *w);

/* px_run end: flush, files, dfx.json; quiescent when every task finished. */
px_status px_rt_dfx_end(struct px_worker *w, int quiescent);

/*
 * A chip engine (w->ext.dfx_session): ends the DFX session its runs recorded into (one with no
 * run yet is created first, so every chip writes its files): flush, files, dfx.json. Returns
 * PX_OK, px_dfx_create's or px_dfx_finish's error, or PX_ESTATE for a broken engine.
 */
px_status px_rt_dfx_session_end(struct px_worker *w);

/* Worker free (cores stopped): frees a DFX state a run that did not drain left behind. */
void px_rt_dfx_release(struct px_worker *w);

/* Core: records a task's start (args data, PMU start values); returns the kernel's t0. */
uint64_t px_rt_dfx_task_begin(px_dfx_producer *p, px_core_ctx *ctx, const px_task *t);

/* Core: the task's one TASK entry (run [t0, t1) when ran, release [t1, now)), PMU, data. */
void px_rt_dfx_task_end(px_dfx_producer *p, px_core_ctx *ctx, const px_task *t, uint64_t t0,
                        uint64_t t1, px_status st, int ran);

/*
 * Core, the same split around the release (px_dfx_task_outputs / _record): outputs at the
 * kernel's end t1 before the consumers are released, the TASK entry after, its release end
 * kept in ctx->dfx_t2 as the start of the core's next wait, or of its next task.
 */
void px_rt_dfx_task_outputs(px_dfx_producer *p, px_core_ctx *ctx, const px_task *t,
                            uint64_t t1);
void px_rt_dfx_task_record(px_dfx_producer *p, px_core_ctx *ctx, const px_task *t, uint64_t t0,
                           uint64_t t1, px_status st, int ran);

/*
 * Core, inside a kernel that will return PX_TASK_ASYNC, before it lets another thread complete
 * its task (level 3's executors post a call): writes the core's end records of the task now
 * (its TASK entry, the run ending now, status PX_OK; written args' data) and marks them
 * written, so that the core touches nothing of the run's DFX state after the kernel returns.
 * Every record of the task then precedes its completion, which the end-of-run flush of the
 * cores' buffers relies on, and the state may be freed as soon as the run drained.
 */
void px_rt_dfx_async_handoff(px_core_ctx *ctx);

/* Orchestration: scope occupancy at depth (begin or end). */
void px_rt_dfx_scope(struct px_orch *o, int depth, int begin);

/* A core's producer for the current run (NULL when DFX is off or compiled out). */
#if PX_DFX
#define PX_RT_DFX_PRODUCER(ctx) atomic_load_explicit(&(ctx)->dfx, memory_order_relaxed)
#else
#define PX_RT_DFX_PRODUCER(ctx) ((px_dfx_producer *)NULL)
#endif

/* core.c: the DFX producer of the kernel running on this thread while a collector that
 * records communication is on, else NULL (src/comm writes its spans there). */
extern _Thread_local px_dfx_producer *px_rt_dfx_here __attribute__((tls_model("initial-exec")));

/*
 * worker.c: more device memory than the arena: [lo, hi) (a communication window mapped into
 * this chip) may hold tensors of this engine's tasks from now on, until removed. Returns
 * PX_OK, or PX_ENOMEM when PX_RT_DEV_EXTRA ranges are in use. Any thread; a range is visible
 * to a submit that happens after the add.
 */
px_status px_rt_device_range_add(struct px_worker *w, const void *lo, size_t n);
void px_rt_device_range_remove(struct px_worker *w, const void *lo);

/* worker.c: 1 when [lo, hi) lies inside one of w's extra device ranges (args_rules.also). */
int px_rt_device_range_has(const void *w, uintptr_t lo, uintptr_t hi);

/* worker.c: records the first failure of a run (thread-safe). */
void px_worker_fail(struct px_worker *w, px_status st, px_task_id id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
