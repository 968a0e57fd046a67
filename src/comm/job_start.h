/*
 * job_start.h - what the hosts of an MPI job must agree on, told and compared when the
 * workers first meet (job_start.c): the proxies' wire version, the worker's level, and the
 * knobs that change what travels between hosts or when each host expects it. A difference
 * is refused on every host alike, within the start's exchange, naming the field, both
 * values and both hosts.
 */
#ifndef PX_COMM_JOB_START_H
#define PX_COMM_JOB_START_H

#include <stdint.h>

#include <plexus/config.h>
#include <plexus/status.h>

#include "mpi/mpi_ops.h"

#define COMM_JOB_WIRE 3u       /* the proxies' wire format (raise it when a message changes) */
#define COMM_JOB_KNOBS 4       /* knobs compared: comm_job_knobs[] in job_start.c */
#define COMM_JOB_VAL_MAX 40
#define COMM_JOB_FINALIZE_S 2  /* a refused job's MPI_Finalize at exit, at most */

/* What must agree between the hosts of a job: plain bytes, exchanged as they are. */
typedef struct comm_job_facts {
    uint32_t wire;                          /* COMM_JOB_WIRE */
    int32_t level;                          /* 3; 2: a level-2 worker under a launcher */
    char version[16];                       /* PX_VERSION_STRING */
    char val[COMM_JOB_KNOBS][COMM_JOB_VAL_MAX]; /* each knob's value, as doctor prints it */
} comm_job_facts;

struct comm_host;

/* Fills f from config c for a worker of the given level (f zeroed first). */
void comm_job_facts_fill(const px_config *c, int level, comm_job_facts *f);

/*
 * Compares the facts of the job's n hosts (records in host order). Returns PX_OK when every
 * host agrees with host 0, else PX_EINVAL with the message: every field that differs between
 * host 0 and the first host that differs from it, with both values, both hosts (rank and id)
 * and what to do. Every host computes the same answer from the same records.
 */
px_status comm_job_facts_agree(const struct comm_host *hosts, int n);

/*
 * The start exchange: me allgathered into hosts (size records, host order) through the
 * plugin's ops within timeout_s, then compared (comm_job_facts_agree). *met is 1 once every
 * host's record is in (MPI may then end alike on every host). Returns PX_OK, PX_EINVAL (a
 * difference, said alike on every host), PX_ETIMEDOUT or PX_EIO.
 */
px_status comm_job_exchange(const px_mpi_ops *ops, const struct comm_host *me,
                            struct comm_host *hosts, int size, double timeout_s, int *met);

/*
 * The hosts met and refused each other, or the job failed (MPI is up, nothing else of it is
 * used): MPI is finalised at the process's exit, at most COMM_JOB_FINALIZE_S, so that every
 * rank has said why before any leaves and mpirun ends the job.
 */
void comm_job_finalize_at_exit(const px_mpi_ops *ops);

/* The finalisation comm_job_finalize_at_exit deferred, now (an exit handler registered
 * before it calls this after its own work); nothing when none is pending. */
void comm_job_finalize_deferred(void);

/*
 * A level-2 worker (px_worker_init) started by an MPI launcher among other ranks (the
 * launcher's world size > 1) and PLEXUS_MPI not off: it joins the start exchange as level 2
 * (MPI up and down on this thread, bounded by c->timeout_s), so that the level-3 ranks hear
 * of it at once. Returns PX_OK when it is not under such a launcher or every rank is level 2
 * (each then runs on its own), else the error (PX_EINVAL naming the ranks at another level,
 * or why MPI could not start).
 */
px_status comm_job_level2_check(const px_config *c, const void *caps);

#endif
