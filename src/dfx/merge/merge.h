/*
 * merge.h - the merge of several processes' or hosts' DFX outputs into one set (trace.json,
 * dfx.json, report.html), over a plain input: per source its directory, process, label and
 * clock, plus hooks through which the layer that knows more adds to it (a chip's death, the
 * layers' own slices and dfx.json members, the calls a host task made on the chips).
 *
 * Two shapes of one machinery (formats: docs/output-formats.md):
 *   level 3: the host engine's outputs in DIR and every chip's in DIR/chips/chip<i> (same
 *            clock: each source's own t0_ticks moves it onto the host's time base); src/hier
 *            hands the chips in (hier/dfx_l3_merge.c);
 *   level 4: every host's level-3 outputs in DIR/hosts/host<h>, each on its own clock with
 *            its estimated offset and rate against host 0's; src/comm hands the hosts in after
 *            gathering their files and pinging their clocks (comm/dfx_hosts.c).
 * Files: merge.c (the entry), text.c (reading plexus's own text), load.c (loading the
 * sources), trace.c (trace.json), report.c (report.html), dfxjson.c (level 3's dfx.json),
 * adds.c (deaths and the layers' slices), hosts.c (level 4), host_files.c (a host's files as
 * one blob for the gather across hosts).
 */
#ifndef PX_DFX_MERGE_MERGE_H
#define PX_DFX_MERGE_MERGE_H

#include <stddef.h>
#include <stdint.h>
#include <plexus/status.h>

struct dfxc_buf;

#define DFX_MERGE_HOST_PIDS 1000 /* level 4: host h's processes are pids h * 1000 + their own */
#define DFX_MERGE_MSG_MAX 768    /* bytes of a source's "why it has no files" */

/* One source of a merge: a process (level 3: the host, src[0], or a chip) or a host (level
 * 4). A level-4 source whose files do not load gets st and msg set by the merge. */
typedef struct dfx_merge_src {
    char dir[64];          /* its files, relative to the merge's directory ("" for DIR) */
    int index;             /* chip i or host h; -1 for the level-3 host */
    int pid;               /* its process id (level 4: its parent's) */
    char label[128];       /* level 3: its process's name in trace.json; level 4: its host id */
    px_status st;          /* PX_OK: its files are in dir */
    char msg[DFX_MERGE_MSG_MAX]; /* else why not (it is listed missing with it) */
    /* level 4: its clock against host 0's (level 3 reads t0_ticks from the files) */
    double t0_ns;          /* its DFX run's start, in ns of its own clock */
    int64_t offset_ns;     /* its clock minus host 0's, at at_ns */
    uint64_t uncertainty_ns; /* the offset is within this (half the least round trip) */
    uint64_t at_ns;        /* when offset_ns held (host 0's clock) */
    double rate;           /* its clock's gain per ns of host 0's (two estimates), or 0 */
    double rate_uncertainty;
    uint64_t rate_span_ns; /* host 0's time between the two estimates (0: one only) */
    int rounds;            /* clock rounds answered */
    int clock_ok;          /* 0: no estimate (offset 0 assumed) */
} dfx_merge_src;

/* One trace.json slice a layer adds to a level-3 merge: on thread tid (named thread; pick one
 * no chip producer uses, 1000 and up) of chip's process, from t0 to t1 in the parent's DFX
 * clock (px_dfx_now), with args (the args object's members as JSON, without the braces; ""
 * for none). */
typedef struct dfx_merge_event {
    int chip;
    int tid;
    const char *thread;
    const char *name;
    uint64_t t0, t1;
    const char *args;
} dfx_merge_event;

typedef void (*dfx_merge_event_cb)(void *ctx, const dfx_merge_event *e);

/* One call a level-3 host task made on a chip, in the ids the files use: host_task from the
 * host run's first task, first_task from the chip session's first task. */
typedef struct dfx_merge_call {
    uint64_t host_task;
    int chip;
    uint64_t first_task, ntasks;
} dfx_merge_call;

/* What the layer that hands the sources in adds (level 3; every slot may be NULL). */
typedef struct dfx_merge_hooks {
    /* Why chip c is gone, in the death watch's words, or NULL when it is not. */
    const char *(*death)(void *arg, int chip);
    /* Calls add(ctx, e) for each slice the layers add on the chips' processes. */
    void (*events)(void *arg, dfx_merge_event_cb add, void *ctx);
    /* Appends members (",\n \"name\": value" each) to the merged dfx.json. */
    void (*json)(void *arg, struct dfxc_buf *b);
} dfx_merge_hooks;

/* A merge's input. */
typedef struct dfx_merge_in {
    const char *dir;             /* where the sources' directories are and the merge goes */
    int level;                   /* 3 or 4 */
    int nsrc;                    /* level 3: 1 + chips (src[0] the host); level 4: hosts */
    dfx_merge_src *src;
    const dfx_merge_call *calls; /* level 3: the run's chip calls (may be NULL) */
    size_t ncalls;
    const dfx_merge_hooks *hooks; /* level 3: may be NULL */
    void *arg;                   /* the hooks' */
} dfx_merge_in;

/*
 * Merges the sources' trace.json and dfx.json into in->dir's trace.json, dfx.json and
 * report.html. Level 3: the host's files are required, a chip whose st is not PX_OK is
 * listed in chips_missing with its msg. Level 4: host 0's files are required, a host whose
 * files do not load is listed in hosts_missing (its st and msg are set). Returns PX_OK,
 * PX_EINVAL when a file does not parse or lacks a member, PX_ENOENT / PX_EIO / PX_ENOMEM
 * (message set, prefixed with the directory).
 */
px_status dfx_merge_run(dfx_merge_in *in);

/* ---- a host's files for the gather across hosts (host_files.c) ---- */

/* A host's level-3 trace.json and dfx.json, read back whole. */
typedef struct dfx_merge_files {
    char *trace, *dfx;
    size_t trace_len, dfx_len; /* trace_len 0: no trace.json */
    double t0_ns;              /* its DFX run's start, in ns of this host's clock */
} dfx_merge_files;

/* Reads dir's dfx.json (required) and trace.json (when written). Returns PX_OK with *f (free
 * with dfx_merge_files_free), or PX_ENOENT / PX_EIO / PX_ENOMEM, or PX_EINVAL when dfx.json
 * is not JSON (message set). */
px_status dfx_merge_files_read(const char *dir, dfx_merge_files *f);

/* Frees what f holds and makes it empty. */
void dfx_merge_files_free(dfx_merge_files *f);

/* Byte off .. off + n of f's blob (trace.json then dfx.json) into out; zeros past its end. */
void dfx_merge_files_slice(const dfx_merge_files *f, uint64_t off, char *out, size_t n);

/* Writes host h's gathered blob (trace_len bytes of trace.json, then dfx_len of dfx.json)
 * into job/hosts/host<h>/. Returns PX_OK or PX_EIO / PX_ENOMEM (message set). */
px_status dfx_merge_files_write(const char *job, int h, uint64_t trace_len, uint64_t dfx_len,
                                const char *blob);

#endif
