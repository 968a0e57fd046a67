/*
 * plexus/config.h - run-time configuration of a worker.
 *
 * px_config_default() fills every field with its default and then applies the PLEXUS_*
 * environment variables (one table in src/util/config.c lists them all; `plexus doctor
 * --config` prints it). Command-line tools apply their options on top of that.
 */
#ifndef PLEXUS_CONFIG_H
#define PLEXUS_CONFIG_H

#include <stdint.h>
#include <stdio.h>
#include <plexus/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PX_PROFILE_NAME_MAX 32

typedef struct px_config {
    int level;                                 /* 2: one chip (default); 3: chips per host */
    int cores;                                 /* core threads per chip; 0: online CPUs */
    int chips;                                 /* chips of a level-3 worker (default 2) */
    int subs;                                  /* level 3: host sub-worker processes (PLEXUS_SUBS) */
    char device_profile[PX_PROFILE_NAME_MAX];  /* sim device profile (PLEXUS_DEVICE_PROFILE) */
    uint64_t device_mem;                       /* device arena bytes (PLEXUS_DEVICE_MEM) */
    uint64_t heap_ring;                        /* heap ring bytes (PLEXUS_HEAP_RING) */
    uint32_t task_ring;                        /* task slots, a power of two (PLEXUS_TASK_RING) */
    uint32_t dep_ring;                         /* dependency records (PLEXUS_DEP_RING) */
    double timeout_s;                          /* deadline of every runtime wait */
    uint32_t spin_ns;                          /* spin before sleeping on a futex */
    uint32_t yield_ns;                         /* then poll with sched_yield this long */
    int hugepages;                             /* 0 hides reserved huge pages from the probe */
    int log_level;                             /* 0 error, 1 warn, 2 info, 3 debug */
    int bind;                                  /* PLEXUS_BIND: 0 none (the OS places the
                                                * threads), 1 cores (core i on the i-th
                                                * allowed CPU, the orchestration with core 0) */
    /* DFX (plexus/dfx.h; docs/user-guide.md) */
    uint32_t dfx;                              /* PX_DFX_* collector bits; 0: off (PLEXUS_DFX) */
    char out_dir[256];                         /* DFX output directory (PLEXUS_DFX_OUT) */
    char dfx_transport[64];                    /* allow-list "mapped,shadow"; "": all, in order */
    int dfx_args_level;                        /* argsdump level 1..3 (PLEXUS_DFX_ARGS_LEVEL) */
    int dfx_strict;                            /* 1: a reconcile mismatch fails the run */
    double dfx_backstop_s;                     /* a blocked writer drops records after this */
    uint32_t dfx_buffer_records;               /* records per DFX buffer */
    uint32_t dfx_buffers;                      /* DFX buffers per chip; 0: 2 per producer + 4 */
    uint64_t dfx_args_arena;                   /* argsdump bytes kept per argument */
    /* communication domains (plexus/comm.h) */
    double comm_timeout_s;                     /* default deadline of a comm wait */
    uint64_t comm_oneshot_max;                 /* allreduce: one-shot up to this many bytes */
    int comm_transport;                        /* PLEXUS_COMM_TRANSPORT: 0 auto, 1 direct,
                                                * 2 staged (PX_COMM_TL_*) */
    uint64_t comm_mem_max;                     /* PLEXUS_COMM_MEM_MAX: host bytes one domain's
                                                * windows and staging may take; 0: what the
                                                * host can back now (MemAvailable + SwapFree) */
} px_config;

/*
 * Fills c with defaults, then applies PLEXUS_* environment variables. Returns PX_OK, or
 * PX_EINVAL when a variable has a bad value (px_last_error() shows the expected form; the
 * other fields still hold valid values). Unknown PLEXUS_* variables draw a warning.
 */
PX_API px_status px_config_default(px_config *c); /* PX_EINVAL for a NULL c */

/*
 * Sets one knob by its environment name ("PLEXUS_CORES") from text. Returns PX_EINVAL with
 * the expected form on a bad value or any NULL argument, PX_ENOENT for an unknown name.
 */
PX_API px_status px_config_set(px_config *c, const char *name, const char *value);

/*
 * Checks every field against the range its PLEXUS_* knob accepts (one table serves both) and
 * the cross-field rules (heap ring inside device memory). Returns PX_OK, or PX_EINVAL naming
 * the field, its value, the range and the knob; PX_EINVAL for a NULL c.
 */
PX_API px_status px_config_validate(const px_config *c);

/* Prints the knob table (name, value, default, description) to f; nothing for NULLs. */
PX_API void px_config_print(const px_config *c, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
