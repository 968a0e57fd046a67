/*
 * collector.h - the contract between the DFX drain (src/dfx/drain.c) and the collectors
 * (src/dfx/collectors/): each collector turns the records of the kinds it wants into files.
 *
 * The drain thread calls on_record() for every complete record entry (an entry spans r->nrec
 * records; continuation records follow r in memory) in per-producer sequence order within a
 * buffer. At the end of a run the drain calls finish() once, on the thread that ends the run,
 * after every buffer has been drained; finish() writes the collector's files into out_dir.
 * Collectors are listed in one ordered static table (collectors.c); the order is the order in
 * which dfx.json lists them.
 */
#ifndef PX_DFX_COLLECTOR_H
#define PX_DFX_COLLECTOR_H

#include <stdint.h>
#include <stdio.h>
#include <plexus/status.h>

#include "dfx/emit.h"

/* What the drain knows about the run, handed to every collector. */
typedef struct px_dfx_run_info {
    const char *out_dir;          /* existing directory for output files */
    double ticks_per_ns;          /* to convert record time stamps */
    uint64_t t0_ticks;            /* start of the run (time zero in outputs) */
    const char *clock;            /* "tsc" or "monotonic" */
    int chip;                     /* chip index (level 3: one drain per chip) */
    int nproducers;
    const char *const *producer_names; /* "core 0", "orchestration", ... by producer id */
    int nkernels;
    const char *const *kernel_names;   /* by kernel id */
    int dropped;                  /* records were dropped: depgen must not write */
    /* added by the DFX framework (additive): */
    uint32_t enabled;             /* PX_DFX_* bits of the collectors on in this run */
    int args_level;               /* argsdump level 1..3 (PLEXUS_DFX_ARGS_LEVEL) */
    int pmu_set;                  /* PX_DFX_PMU_HARDWARE or _SOFTWARE (records.h) */
    const char *pmu_note;         /* why that set: "perf_hw=0: ..." or "hardware counters" */
    const char *device_profile;   /* device profile of the chip */
    const char *host_id;          /* the host's identity (caps' host_id) */
    /* the task model report.html is written from (model.h): swimlane and depgen add to it
     * in finish(); NULL when no report is wanted */
    struct dfxc_model *model;
    /* the entries the framework kept once for every collector with shares_raw (raw.h), in
     * arrival order, set before finish(); NULL when no such collector is on (or in a test
     * that feeds on_record itself: the collector then reads its own store) */
    const struct dfxc_raw *raw;
} px_dfx_run_info;

typedef struct px_dfx_collector_ops {
    const char *name;             /* "swimlane" */
    uint32_t bit;                 /* PX_DFX_SWIMLANE */
    uint32_t kinds;               /* bit (1 << kind) per record kind it consumes */
    /* 1: the drain keeps this collector's entries in one store shared with the other such
     * collectors (info->raw) instead of calling on_record: a SUBMIT that swimlane, depgen
     * and argsdump all read is copied once, not three times */
    int shares_raw;
    /* Allocates the collector's state for one run; returns PX_OK or an error with message. */
    px_status (*open)(void **state, const px_dfx_run_info *info);
    /* Consumes one record entry. Never fails: a collector that runs out of memory marks
     * itself broken and reports it from finish(). */
    void (*on_record)(void *state, const px_dfx_rec *r);
    /* Writes the output files; returns PX_OK or PX_EIO with a message. */
    px_status (*finish)(void *state, const px_dfx_run_info *info);
    /* Frees the state. */
    void (*close)(void *state);
} px_dfx_collector_ops;

#endif
