/*
 * model.h - the task model of one run: the tasks (kernel, track, start, duration), the
 * edges, per-kernel statistics and the critical path. The report writer (report.c) and
 * `plexus trace summary` share it, so both tell the same story.
 *
 * It is built, not read: at the end of a run swimlane adds its timed tasks and their flow
 * edges and depgen every submitted task and every edge, from their records in memory, and
 * the framework adds the track names (px_dfx_finish then writes report.html from it, without
 * reading a file back); `plexus trace summary` fills the same model from trace.json and
 * deps.json (tools/trace_load.c). dfxc_model_finish() then merges what the two sources gave
 * the way the files are meant: a task from both counts once, with its timing; the edges of
 * depgen win over swimlane's (which only knows edges between tasks that both ran).
 *
 * The critical path is the longest path through the dependency graph where a task weighs its
 * duration; without any timing each task weighs 1, and the path is the longest chain by task
 * count (`cp_by_count` says which). A task may have inner tasks (dfxc_model_add_inner: at
 * level 3 the chip tasks that a host task's calls ran): it then weighs its own duration plus
 * the longest chain through its inner tasks (over the edges between inner tasks of that one
 * task), and the path lists that chain right after it. Inner tasks are on no other path: the
 * outer graph's edges (between tasks that are nobody's inner task) carry the order.
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
    int has_trace, has_deps; /* trace.json / deps.json (is being) written for this model */
    char clock[16];
    dfxc_mtask *t; /* sorted by id after dfxc_model_finish */
    size_t n, cap;
    dfxc_mtrack *tracks; /* thread names of trace.json */
    size_t ntracks, cap_tracks;
    dfxc_mtrack *procs;  /* process names (tid unused): the merged level-3 report's groups */
    size_t nprocs, cap_procs;
    dfxc_mtrack *hosts;  /* level 4: hosts (pid: the first pid of the host's processes, tid:
                          * the host), the groups above the processes' */
    size_t nhosts, cap_hosts;
    dfxc_edges edges; /* renumbered ids, sorted, unique (after finish: the winning source) */
    dfxc_edges deps_edges; /* depgen's, moved into edges by finish */
    dfxc_mkernel *k;  /* in order of first task */
    size_t nk, cap_k;
    dfxc_edges inner; /* (outer, inner) task id pairs, see dfxc_model_add_inner */
    int64_t first; /* earliest task start, ns (0 without timed tasks) */
    int64_t span; /* latest task end, ns */
    uint64_t *cp; /* critical path, task ids in order */
    uint64_t *cp_outer; /* per cp task: the id of the task it is inner to, or UINT64_MAX */
    size_t ncp;
    int64_t cp_len; /* ns (or tasks when cp_by_count) */
    int cp_by_count;
    int oom;      /* an add ran out of memory: finish fails */
} dfxc_model;

/* Makes m empty, with clock name `clock` ("tsc", "monotonic"; NULL: "?"). */
void dfxc_model_init(dfxc_model *m, const char *clock);

/* Adds a timed task (a slice of trace.json). Out of memory marks m (see oom). */
void dfxc_model_add_timed(dfxc_model *m, uint64_t id, const char *kernel, int pid, int tid,
                          int core, int64_t ts, int64_t dur);

/* Adds a submitted task (deps.json); one that is also timed counts once, with its timing. */
void dfxc_model_add_task(dfxc_model *m, uint64_t id, const char *kernel);

/* Adds a track name. */
void dfxc_model_add_track(dfxc_model *m, int pid, int tid, const char *name);

/* Names process pid (a group of rows in report.html; level 3: the host and each chip). */
void dfxc_model_add_process(dfxc_model *m, int pid, const char *name);

/* Names host `host`, whose processes are pids pid_base and up to the next host's (a group of
 * process groups in report.html; level 4). */
void dfxc_model_add_host(dfxc_model *m, int host, int pid_base, const char *name);

/* Adds an edge producer -> consumer, from deps.json (from_deps) or trace.json's flows. */
void dfxc_model_add_edge(dfxc_model *m, int from_deps, uint64_t producer, uint64_t consumer);

/* Makes task `inner` part of task `outer`'s work (a chip task that a host task's call ran);
 * a task has at most one outer task (the first given counts). */
void dfxc_model_add_inner(dfxc_model *m, uint64_t outer, uint64_t inner);

/*
 * Merges the sources, sorts, and derives the kernel statistics and the critical path.
 * Returns PX_OK, or PX_ENOMEM (also when an add ran out of memory).
 */
px_status dfxc_model_finish(dfxc_model *m);

/* Frees what m holds and zeroes it. */
void dfxc_model_free(dfxc_model *m);

#endif
