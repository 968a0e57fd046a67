/*
 * plexus/worker.h - workers, kernels, runs and the orchestration API (level 2).
 *
 * A worker owns one chip: a device arena and its core threads. A run copies the host tensors
 * of its args into device memory, calls the orchestration on the caller's thread (it submits
 * tasks while cores execute earlier ones), waits for the graph to drain, and copies OUT and
 * INOUT tensors back.
 *
 * Threads: different workers may be used from different threads at once. One worker is used
 * by one thread at a time (the caller serialises its calls on it): a nested px_run (from
 * inside a run on the same worker) returns PX_ESTATE, but two threads calling px_run on one
 * worker at the same moment are not detected reliably; create, init and destroy must not
 * overlap any other call on the same worker. Kernels run on the worker's core threads and may call only what their
 * own headers allow (px_set_error, the px_arg_* accessors, plexus/comm.h's kernel side).
 */
#ifndef PLEXUS_WORKER_H
#define PLEXUS_WORKER_H

#include <stdint.h>
#include <plexus/args.h>
#include <plexus/config.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct px_worker px_worker;
typedef struct px_orch px_orch;
typedef struct px_core_ctx px_core_ctx;
typedef int32_t px_kernel_id;
typedef uint64_t px_task_id;

#define PX_KERNEL_NAME_MAX 48

/* A kernel runs on one core. Returning non-zero fails the task (see px_set_error). */
typedef px_status (*px_kernel_fn)(px_core_ctx *ctx, const px_task_args *args);

/* An orchestration submits tasks; args hold device tensors. */
typedef px_status (*px_orch_fn)(px_orch *o, const px_task_args *args, void *user);

/* Statistics of a worker's most recent run. */
typedef struct px_run_stats {
    uint64_t tasks;            /* tasks submitted */
    uint64_t edges;            /* dependencies inferred: distinct (producer, consumer) pairs */
    uint64_t edges_wired;      /* of those, producers still running when wired */
    uint64_t task_ring_waits;  /* times the orchestration waited for a task slot */
    uint64_t heap_ring_waits;  /* times it waited for heap memory */
    uint64_t dep_ring_waits;   /* times it waited for dependency records */
    uint64_t heap_peak;        /* most heap-ring bytes live at once */
    uint64_t wall_ns;          /* from px_run entry to its return */
    uint64_t dfx_records;      /* 32-byte DFX records the run wrote (0 with DFX off) */
    uint64_t dfx_buffers;      /* DFX buffers the run's writers published */
    uint64_t dfx_writer_waits; /* times a DFX writer found no free buffer and waited */
    uint64_t dfx_writer_drained; /* DFX buffers the orchestration drained itself (no free
                                  * buffer and the drain thread busy elsewhere) */
    uint64_t dfx_drain_wakes;  /* FUTEX_WAKEs the writers sent the sleeping DFX drain */
} px_run_stats;

/* Creates a worker from c (NULL: px_config_default()). Starts its core threads. c must come
 * from px_config_default() or PX_CONFIG_INIT (plexus/config.h): a config without its size and
 * version, or from a newer header, is PX_EINVAL saying which; unset fields take their
 * defaults. */
PX_API px_status px_worker_create(const px_config *c, px_worker **w);

/* Level 3: forks the chips. At level 2 it only checks the worker; calling it is optional. */
PX_API px_status px_worker_init(px_worker *w);

/* Stops the core threads and frees the worker. NULL is accepted. */
PX_API px_status px_worker_destroy(px_worker *w);

/*
 * Registers a kernel under a unique name. sig may be NULL (arguments are then not checked).
 * Returns PX_EINVAL for a duplicate or over-long name.
 */
PX_API px_status px_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                                    const px_signature *sig, px_kernel_id *id);

/* Looks a kernel up by name; PX_ENOENT if none. */
PX_API px_status px_kernel_lookup(px_worker *w, const char *name, px_kernel_id *id);

/*
 * Runs fn on this thread with device copies of args' host tensors, waits for every task,
 * copies OUT/INOUT back. Returns the orchestration's error, else the first task error (its
 * message names task id and kernel), else PX_OK. The next run starts clean either way.
 */
PX_API px_status px_run(px_worker *w, px_orch_fn fn, const px_task_args *args, void *user);

/* Copies the statistics of the worker's most recent run into s. */
PX_API px_status px_run_stats_get(const px_worker *w, px_run_stats *s);

/* Number of core threads of the worker's chip. */
PX_API int px_worker_cores(const px_worker *w);

/* ---- orchestration side ----
 *
 * These calls work only inside the orchestration px_run runs, on px_run's thread, with the
 * handle px_run passed to it. From a kernel, a host task, another thread, or with a handle
 * whose px_run has returned they return PX_ESTATE and touch nothing; a NULL handle is
 * PX_EINVAL.
 */

/*
 * Allocates a contiguous device tensor owned by the enclosing scope. Its memory returns to
 * the heap ring once the scope has ended and every task submitted before that has finished.
 */
PX_API px_status px_tensor_alloc(px_orch *o, px_dtype dt, int ndim, const int64_t *shape,
                                 px_tensor *t);

/* Host memory ranges one run may register with px_tensor_host. */
#define PX_HOST_RANGES_MAX 32

/*
 * Fills t with a contiguous tensor over host memory the caller owns (addr, dtype, shape as
 * px_tensor_make) that this run's tasks read and write in place, without a copy: its bytes
 * are registered for the chip's kernels (pinned and mapped into the device's address space)
 * until the run ends. Registering the same bytes again, or bytes inside a range this run
 * registered, adds nothing. Do not touch the memory from the host while the run uses it.
 * Returns PX_ENOTSUP, saying why, where the device cannot reach host memory (a level-3 worker,
 * whose chips are other processes; a profile without ordinary-page host mapping,
 * host_map_effective 0): copy instead (px_tensor_alloc, or px_run's args). PX_ENOMEM once
 * PX_HOST_RANGES_MAX ranges of the run are registered; PX_EINVAL for a NULL addr or t, an
 * empty shape, or device memory.
 */
PX_API px_status px_tensor_host(px_orch *o, void *addr, px_dtype dt, int ndim,
                                const int64_t *shape, px_tensor *t);

/* px_tensor_from_host's flags: how it may reach the array (one of the first three), plus
 * PX_HOST_READONLY. */
#define PX_HOST_AUTO 0      /* in place where the device reaches host memory, else a copy */
#define PX_HOST_IN_PLACE 1  /* in place, or px_tensor_host's refusal */
#define PX_HOST_COPY 2      /* always a device copy */
#define PX_HOST_MODE_MASK 3
#define PX_HOST_READONLY 16 /* the array may not be written: a writing tag is PX_EINVAL */

/* What px_tensor_from_host did (*how). */
#define PX_HOST_USED_IN_PLACE 1  /* the array's own bytes (registered as px_tensor_host does) */
#define PX_HOST_USED_COPY 2      /* a new device copy of its bytes */
#define PX_HOST_USED_COPY_VIEW 3 /* a view of a device copy made earlier in this run */

/*
 * Fills t with the tensor a task argument tagged `tag` uses for host array `host` (a tensor
 * over host memory: any non-negative strides), deciding in place or staged:
 *   - in place (PX_HOST_AUTO, PX_HOST_IN_PLACE) at level 2 where the device reaches host
 *     pages, while the bytes meet no copy of this run: as px_tensor_host, *t is host itself.
 *     `whole` (may be NULL) is the buffer host is a view of: it is registered whole, so its
 *     other views take no range of their own (PX_HOST_RANGES_MAX).
 *   - else staged (PX_HOST_AUTO, PX_HOST_COPY): the first use copies the array's byte span
 *     into device memory of the current scope (the host heap at level 3), later uses of
 *     bytes inside it are views of that copy (same dtype, aligned), and a copy that a writing
 *     tag used is copied back by a task when its scope ends (px_scope_end, the run's end),
 *     after the tasks that write it; a copy made over bytes whose copy-back is pending waits
 *     for it. The first refusal of in place is kept (px_tensor_from_host_reason).
 * Either way the host array holds the results when px_run returns; do not touch it meanwhile.
 * PX_EINVAL, saying why: an array partly inside an earlier copy, bytes used both in place and
 * staged in one run, a view of a copy with another dtype or misaligned, a writing tag with
 * PX_HOST_READONLY, a malformed or empty tensor (negative strides included). In place refused
 * with PX_HOST_IN_PLACE: px_tensor_host's error. *how (may be NULL) receives
 * PX_HOST_USED_*. name (may be NULL) names the argument in messages ("submit argument 1"),
 * which start with it. Inside one task, overlapping arguments meet px_submit's rule (an
 * input and an output share bytes only as exactly the same view), staged or not.
 */
PX_API px_status px_tensor_from_host(px_orch *o, const px_tensor *host, const px_tensor *whole,
                                     int tag, int flags, const char *name, px_tensor *t,
                                     int *how);

/* Why host arrays of the running orchestration were staged (the first refusal of in place,
 * valid until the run ends), or NULL when none was. */
PX_API const char *px_tensor_from_host_reason(px_orch *o);

/*
 * Submits a task. Checks a against the kernel's signature, allocates OUT tensors that have
 * no address (writing the address back into a), infers dependencies, and publishes the task.
 * Waits (bounded) when the task, heap or dependency ring is full. Returns PX_EABORTED once a
 * task of this run has failed. id may be NULL.
 */
PX_API px_status px_submit(px_orch *o, px_kernel_id k, px_task_args *a, px_task_id *id);

/* As px_submit, plus explicit edges from each task in deps (earlier tasks of this run). */
PX_API px_status px_submit_after(px_orch *o, px_kernel_id k, px_task_args *a,
                                 const px_task_id *deps, int ndeps, px_task_id *id);

/*
 * One argument of a batch of tasks (px_submit_batch): a table of `count` entries, tensors
 * for a tensor tag, scalars (u64, i64 or f64 by scalar_kind) for PX_TAG_SCALAR, and the
 * entry each task takes: task i takes entry index[i] when index is not NULL, else entry
 * i * step (step 0: entry 0 for every task; step 1: entry i).
 */
typedef struct px_batch_arg {
    uint8_t tag;              /* px_tag: a tensor tag, or PX_TAG_SCALAR */
    uint8_t scalar_kind;      /* px_scalar_kind of a PX_TAG_SCALAR argument */
    int64_t count;            /* entries in the table (at least 1 when tasks are submitted) */
    int64_t step;             /* without index: task i takes entry i * step (0 or more) */
    const int64_t *index;     /* NULL, or one entry number per task */
    const px_tensor *tensors; /* the table of a tensor argument (OUT tensors need an addr) */
    const void *values;       /* the table of a scalar argument: uint64_t, int64_t or double */
} px_batch_arg;

/*
 * Submits n tasks of kernel k in one call. Task i gets nargs arguments, argument j being the
 * entry of args[j]'s table that task i takes, plus explicit edges from the ndeps tasks of
 * deps (as px_submit_after; NULL and 0 for none). Each task is submitted as px_submit would
 * submit it after the ones before: the same checks, dependencies inferred from its bytes,
 * ids in order into ids[0 .. n) (ids may be NULL). *submitted (may be NULL) receives the
 * number of tasks submitted, n on success.
 *
 * The descriptions are checked before any task: n < 0, nargs outside 0 .. PX_MAX_ARGS, a
 * NULL args with nargs > 0, a bad tag or scalar kind, a NULL or empty table, a step whose
 * last entry lies past the table or an OUT tensor without an address are PX_EINVAL and
 * submit nothing. A task that fails (its entry index outside the table, its arguments
 * refused, the run aborted...) stops the batch there: the tasks before it stay submitted
 * (their ids written), *submitted is its index, and the message starts with
 * "px_submit_batch: task I of N". The failing task is not submitted, unless it failed while
 * its edges were wired (out of memory, a dep-ring wait timed out), which fails the run as it
 * does for px_submit. n == 0 submits nothing and is PX_OK.
 */
PX_API px_status px_submit_batch(px_orch *o, px_kernel_id k, const px_batch_arg *args,
                                 int nargs, const px_task_id *deps, int ndeps, int64_t n,
                                 px_task_id *ids, int64_t *submitted);

/* Opens a scope: memory allocated until the matching end belongs to it. */
PX_API px_status px_scope_begin(px_orch *o);

/* Ends the innermost scope. PX_ESTATE when no scope is open. */
PX_API px_status px_scope_end(px_orch *o);

/* The worker an orchestration runs on. */
PX_API px_worker *px_orch_worker(px_orch *o);

/* ---- kernel side ---- */

/* Index of the core running the kernel (0 .. cores-1); -1 for a NULL ctx. */
PX_API int px_core_index(const px_core_ctx *ctx);

/* Id of the task the kernel runs for; UINT64_MAX for a NULL ctx. */
PX_API px_task_id px_core_task_id(const px_core_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
