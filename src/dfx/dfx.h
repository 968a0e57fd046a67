/*
 * dfx.h - the DFX framework as the runtime drives it: per-run lifetime of a chip's DFX
 * state (buffers, transports, drain thread, collectors) and the producers the runtime's
 * threads write through (emit.h).
 *
 * A worker with DFX on reserves px_dfx_region_bytes() of its device arena for DFX buffers
 * and checks with px_dfx_check() that a transport is left before any run (the documented
 * error otherwise). Each px_run then calls px_dfx_create() before the run starts, hands
 * producer 0..ncores-1 to the cores and producer ncores to the orchestration, and calls
 * px_dfx_finish() after the graph drained: it flushes every producer's partial buffer,
 * stops the drain, reconciles counts, lets the collectors write their files and writes
 * dfx.json. px_dfx_destroy() frees what is left.
 */
#ifndef PX_DFX_DFX_H
#define PX_DFX_DFX_H

#include <stdint.h>
#include <plexus/caps.h>
#include <plexus/config.h>

#include "dfx/collector.h"
#include "dfx/emit.h"
#include "platform/platform.h"

typedef struct px_dfx_params {
    const px_config *cfg;
    px_chip *chip;
    int chip_index;
    char *dev_region;                /* px_dfx_region_bytes() of device memory */
    uint64_t dev_region_bytes;
    int ncores;                      /* producers: ncores cores + the orchestration */
    int nkernels;
    const char *const *kernel_names; /* by kernel id; copied */
    const char *core_name;           /* cores are "<core_name> <i>"; NULL: "core" */
    size_t own_from;                 /* the output path's first own_from bytes are the user's
                                      * directory; the components after it are plexus's own
                                      * (a level-3 chip's chips/chip<i>): each must be a real
                                      * directory, a symbolic link planted there is refused */
    int drain_bind;                  /* 1: the drain thread is bound to CPU drain_cpu (the
                                      * runtime's PLEXUS_BIND=cores); 0: unbound */
    int drain_cpu;
} px_dfx_params;

/* The output directory of cfg: cfg->out_dir, or "plexus-dfx" when it is empty. */
const char *px_dfx_out_dir(const px_config *cfg);

/* Bytes of device arena a chip with ncores cores needs for the DFX buffers of cfg (0: off). */
uint64_t px_dfx_region_bytes(const px_config *cfg, int ncores);

/*
 * Checks, from facts alone, that every enabled collector has a transport. Returns PX_OK, or
 * PX_ENOTSUP with the documented message (host and device page sizes, flags, huge pages,
 * how to turn DFX off).
 */
px_status px_dfx_check(const px_caps *caps, const px_config *cfg, int ncores);

/*
 * Creates the DFX state of one run: output directory, transports (logged once each),
 * buffers, collectors (open), the drain thread. Returns PX_OK with *out set, or an error
 * with its message; nothing is left allocated on error.
 */
px_status px_dfx_create(const px_dfx_params *prm, px_dfx **out);

/* Producer id (cores 0..ncores-1, orchestration ncores), or NULL for an invalid id. */
px_dfx_producer *px_dfx_producer_of(px_dfx *d, int id);

/* Returns the records every producer of d has written so far (continuations and dropped
 * records included), 0 for NULL. */
uint64_t px_dfx_records_written(const px_dfx *d);

/* Why a run's records cost what they did: the waits of the writers and of the drain. */
typedef struct px_dfx_counts {
    uint64_t publishes;     /* buffers the producers published (full or flushed) */
    uint64_t writer_waits;  /* times a writer found no free buffer and waited */
    uint64_t writer_sleeps; /* futex waits of those writers */
    uint64_t writer_wait_ns; /* time the writers spent waiting for free buffers */
    uint64_t backstops;     /* writer waits that ended at PLEXUS_DFX_BACKSTOP_S (drops) */
    uint64_t dropped;       /* entries dropped */
    uint64_t drain_wakes;   /* FUTEX_WAKEs the writers sent the sleeping drain */
    uint64_t drain_sleeps;  /* futex waits of the drain */
    uint64_t drained;       /* buffers the drain thread handed to the collectors */
    uint64_t writer_drained; /* buffers a host-side writer drained itself (no free buffer, the
                              * drain thread not draining) */
    uint64_t finish_drained; /* buffers left at the end of the run, drained by the thread
                              * that finished it rather than by the drain thread */
    uint64_t same_cpu;      /* of those, drained on the CPU their producer published from:
                             * the drain took the writer's CPU */
} px_dfx_counts;

/* Fills c with d's counts (exact once px_dfx_finish() returned: the drain has stopped). */
void px_dfx_counts_get(const px_dfx *d, px_dfx_counts *c);

/*
 * Ends the run's DFX: flushes partial buffers (the cores' only when quiescent, i.e. every
 * task finished), drains, reconciles `collected + dropped == produced` and sequence gaps,
 * runs the collectors' finish(), writes dfx.json and report.html. Returns PX_OK; PX_EIO when
 * a collector or dfx.json failed; PX_EIO for a reconcile mismatch under PLEXUS_DFX_STRICT=1
 * (a warning otherwise). When not quiescent, d must stay alive until the cores stopped.
 */
px_status px_dfx_finish(px_dfx *d, int quiescent);

/* Frees everything of d (buffers, transports, producers). NULL is accepted. */
void px_dfx_destroy(px_dfx *d);

/*
 * Hands over the lock px_dfx_create() took on the output directory (util_dir_lock: one run at
 * a time per directory; px_dfx_destroy() releases it otherwise), for a caller that still
 * reads the directory after destroy (the level-3 merge). Returns the fd for util_dir_unlock(),
 * or -1.
 */
int px_dfx_take_out_lock(px_dfx *d);

/* Name of the transport serving collector bit i's buffers ("mapped"), "none" when off. */
const char *px_dfx_transport_name(const px_dfx *d, int i);

/*
 * Replaces the collector table (tests); NULL restores the built-in px_dfx_collectors.
 * Affects runs created afterwards.
 */
void px_dfx_set_collectors(const px_dfx_collector_ops *const *table);

#endif
