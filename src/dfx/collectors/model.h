/*
 * model.h - a DFX output directory read back into one task model: the tasks (kernel, track,
 * start, duration) from trace.json and/or deps.json, the edges, per-kernel statistics and the
 * critical path. The report writer (report.c) and `plexus trace summary` share it, so both
 * tell the same story.
 *
 * The critical path is the longest path through the dependency graph where a task weighs its
 * duration; without any timing (no trace.json) each task weighs 1, and the path is the
 * longest chain by task count (`cp_by_count` says which).
 */
#ifndef PX_DFX_COLLECTORS_MODEL_H
#define PX_DFX_COLLECTORS_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <plexus/status.h>

#include "dfx/collectors/out.h"

typedef struct dfxc_mtask {
    uint64_t id; /* renumbered task id, as in the files */
    char *kernel;
    int pid, tid, core; /* -1 when untimed */
    int64_t ts, dur;    /* ns since the run's start; untimed: 0 */
    int timed;          /* it has a slice in trace.json */
} dfxc_mtask;

typedef struct dfxc_mtrack {
    int pid, tid;
    char *name;
} dfxc_mtrack;

typedef struct dfxc_mkernel {
    char *name; /* points into a task's kernel */
    uint64_t count, timed;
    int64_t total, max; /* ns over the timed tasks */
} dfxc_mkernel;

typedef struct dfxc_model {
    int has_trace, has_deps;
    char clock[16];
    dfxc_mtask *t; /* sorted by id */
    size_t n, cap;
    dfxc_mtrack *tracks; /* thread names of trace.json */
    size_t ntracks, cap_tracks;
    dfxc_edges edges; /* renumbered ids, sorted, unique */
    dfxc_mkernel *k;  /* in order of first task */
    size_t nk, cap_k;
    int64_t span; /* latest task end, ns */
    uint64_t *cp; /* critical path, task ids in order */
    size_t ncp;
    int64_t cp_len; /* ns (or tasks when cp_by_count) */
    int cp_by_count;
} dfxc_model;

/*
 * Loads dir/trace.json and dir/deps.json (each optional). Returns PX_OK (m->has_trace and
 * m->has_deps say what was found), PX_EINVAL when a file does not parse or has the wrong
 * shape or version (the message names it), or PX_ENOMEM. m is valid for dfxc_model_free
 * either way.
 */
px_status dfxc_model_load(const char *dir, dfxc_model *m);

/* Frees what m holds and zeroes it. */
void dfxc_model_free(dfxc_model *m);

#endif
