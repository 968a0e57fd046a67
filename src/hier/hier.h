/*
 * hier.h - level 3: one host, many chips (DESIGN 3.4). Internal entry points called by the
 * public lifecycle in api.c, plus what tests and tools may ask about the child processes.
 */
#ifndef PX_HIER_HIER_H
#define PX_HIER_HIER_H

#include <sys/types.h>

#include <plexus/worker.h>

/* Creates the host side of a level-3 worker (no threads yet; chips fork in px_hier_init). */
px_status px_hier_create(const px_config *c, px_worker **w);

/* Forks the chips, then starts the host side's threads. */
px_status px_hier_init(px_worker *w);

/* Stops and reaps every chip, frees everything. */
px_status px_hier_destroy(px_worker *w);

/* Number of kernels the user registered (the chip kernels; internal executors follow them). */
int px_hier_user_kernels(px_worker *w);

/* Registers a kernel for the chips (before px_worker_init). */
px_status px_hier_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                                  const px_signature *sig, px_kernel_id *id);

/* Tests and tools: pid of child proc i (chips 0 .. chips-1, then the host sub-workers), or -1
 * when w is not an initialised level-3 worker or i is out of range. */
pid_t px_hier_proc_pid(px_worker *w, int i);

#endif
