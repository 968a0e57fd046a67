/*
 * plexus/level3.h - one host, many chips (level 3): callables, next-level, group and host tasks.
 *
 * A level-3 worker (px_config.level = 3, px_config.chips = N) runs every chip in a process of
 * its own, forked by px_worker_init. The host side keeps a host heap: a shared memory region
 * mapped at the same address in the parent and in every chip, so the tensors a level-3
 * orchestration sees (px_run's args, px_tensor_alloc, runtime-allocated outputs) are valid in
 * every process. A level-3 orchestration, run by px_run on the caller's thread, submits:
 *   - next-level tasks: a callable (an L2 orchestration registered with px_callable_register
 *     before px_worker_init) with tagged args, run on one chip (px_submit_next_level). The
 *     chip runs px_run on its own engine: IN/INOUT tensors are copied into its device memory,
 *     OUT/INOUT copied back into the host heap when its graph has drained;
 *   - group tasks: one callable on several chips that must start together, e.g. because their
 *     kernels wait for each other (px_submit_group): dispatched only when every chip of the
 *     group is free, then to all of them at once;
 *   - host tasks: a plain C function (px_submit_host), run on a host core thread of the
 *     parent, or in one of px_config.subs sub-worker processes when subs > 0.
 * Dependencies between all of them are inferred from the tags exactly as at level 2. Kernels
 * registered with px_kernel_register on a level-3 worker are chip kernels: every chip registers
 * them in the same order, so the ids returned are valid inside every callable.
 *
 * A chip whose kernel fails fails its task; a chip process that dies is noticed through its
 * pidfd within a second, every task in flight on it fails with PX_EPEERDEAD naming the chip,
 * its pid, the signal and the task, and later tasks for it fail the same way. The worker can
 * still be destroyed cleanly: no process and no shared-memory object remains.
 */
#ifndef PLEXUS_LEVEL3_H
#define PLEXUS_LEVEL3_H

#include <stdint.h>
#include <plexus/args.h>
#include <plexus/worker.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t px_callable_id;

/*
 * A host task's function. args hold host-heap tensors, read and written in place (no copies);
 * in a sub-worker process, user points into that process's copy of the parent's memory as it
 * was at px_worker_init, so results must go through the tensors. Returning non-zero fails the
 * task (see px_set_error); px_last_error() becomes the task's message.
 */
typedef px_status (*px_host_fn)(const px_task_args *args, void *user);

/*
 * Registers an L2 orchestration that next-level and group tasks run on a chip (it is called
 * with user = NULL). Only before px_worker_init: afterwards PX_ESTATE, since the chips exist
 * already. PX_EINVAL for a level-2 worker, a duplicate or over-long name. id may be NULL.
 */
PX_API px_status px_callable_register(px_worker *w, const char *name, px_orch_fn fn,
                                      px_callable_id *id);

/*
 * Submits callable c with args a to chip `chip` (0 .. chips-1). Tensors of a must lie in the
 * host heap; OUT tensors without an address are allocated there (the address is written back
 * into a). Returns PX_EINVAL for a chip out of range, an unknown callable or bad args;
 * PX_ESTATE outside an active level-3 run (including after the worker was destroyed, as far
 * as that is detectable); PX_EABORTED once a task of the run has failed. id may be NULL.
 */
PX_API px_status px_submit_next_level(px_orch *o, px_callable_id c, px_task_args *a, int chip,
                                      px_task_id *id);

/*
 * Submits callable c on n distinct chips at once: chips[i] runs it with per_chip[i]. The task
 * depends on the union of every per_chip's accesses and finishes when every chip has finished
 * (the first error wins). It is dispatched only when no call is queued or running on any of
 * its chips, then to all of them together. Errors as px_submit_next_level.
 */
PX_API px_status px_submit_group(px_orch *o, px_callable_id c, px_task_args *per_chip,
                                 const int *chips, int n, px_task_id *id);

/*
 * Submits a host task: fn(args, user) on a host core thread, or in a sub-worker process when
 * the worker has subs. Errors as px_submit_next_level; a NULL a is PX_EINVAL (pass an empty
 * px_task_args for a task without arguments). fn must not submit tasks: orchestration calls
 * from a host task return PX_ESTATE.
 */
PX_API px_status px_submit_host(px_orch *o, px_host_fn fn, px_task_args *a, void *user,
                                px_task_id *id);

/* Number of chips of a level-3 worker (after px_worker_create); 1 for a level-2 worker. */
PX_API int px_worker_chips(const px_worker *w);

/*
 * Several hosts under MPI (level 4). Under mpirun each MPI rank is one level-3 worker, a
 * *host* of the job: px_worker_hosts is the job's hosts (1 for a worker that runs alone) and
 * px_worker_host this worker's (0 .. hosts-1), both known after px_worker_init.
 *
 * A domain spans hosts when its spec names its chips with px_chip_global(host, chip): chip
 * `chip` (0 .. that host's chips - 1) of host `host`. Such a spec names every member that
 * way; its ranks are the order given (document yours: the examples take host-major order,
 * rank = host * chips + chip). Every host of the job allocates it, with the same spec, in
 * the same order among its spanning domains (a collective call, as MPI_Comm_create); each
 * host's tasks on it (copies, collectives, domain tasks) run on that host's members. A plain
 * chip index names a chip of this worker, as on one host.
 */
#define PX_CHIP_GLOBAL_BIT 0x40000000
#define PX_CHIP_HOSTS_MAX 16384   /* hosts a global chip name can hold */
#define PX_CHIP_HOST_CHIPS 65536  /* chips per host it can hold */

PX_API int px_worker_hosts(px_worker *w);
PX_API int px_worker_host(px_worker *w);

/* The global name of chip `chip` of host `host` (PX_CHIP_GLOBAL_BIT | host << 16 | chip);
 * -1 when either is out of range. */
PX_API int px_chip_global(int host, int chip);

/* Core threads of each chip: for a level-3 worker the cores of every chip's engine (the host
 * side has its own, see px_worker_cores); for a level-2 worker px_worker_cores. */
PX_API int px_worker_chip_cores(const px_worker *w);

/*
 * Index of the chip this process runs, for code inside callables and kernels: 0 .. chips-1 in
 * a chip process of a level-3 worker, -1 elsewhere (the parent, sub-workers, level 2).
 */
PX_API int px_chip_index(void);

#ifdef __cplusplus
}
#endif
#endif
