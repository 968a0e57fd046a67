/*
 * merge_internal.h - what the files of the DFX merge (merge.h) share: a merge's state, one
 * entry per source, and the functions each room gives the others. Internal names carry the
 * merge's short area prefix, mrg_.
 *
 * No JSON tree of trace.json is built: the files are plexus's own (src/dfx/collectors/trace.c
 * writes one event per line, metadata first, then in time order, each ending in the fixed
 * members "ph", "pid", "tid", "ts", "dur"). The merge takes each source's lines as they are,
 * rewrites pid, ts and a flow's id in place and merges the sources' time-ordered lines (one
 * pass, k sources compared per line). Time and memory are linear in the events (the files'
 * bytes and one pointer per line).
 */
#ifndef PX_DFX_MERGE_INTERNAL_H
#define PX_DFX_MERGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <plexus/status.h>

#include "dfx/collectors/json.h"
#include "dfx/collectors/model.h"
#include "dfx/collectors/out.h"
#include "dfx/merge/merge.h"

/* A span of text. */
typedef struct mrg_str {
    const char *p;
    size_t n;
} mrg_str;

/* A source's dfx.json: its text and its tree (the one JSON reader's), whose nodes know where
 * their values are in the text, so that the merge copies a member's value as it was written. */
typedef struct mrg_obj {
    const char *text;
    dfxc_json *root;      /* an object; NULL before it is parsed */
} mrg_obj;

/* One event line of a source's trace.json. */
typedef struct mrg_line {
    const char *p;
    size_t n;       /* without the separating ",", the newline */
    int64_t ts;     /* ns on the source's own time base; 0 for metadata */
    int meta;
} mrg_line;

/* One side of the merge: the level-3 host (chip and host NULL), a chip, or a level-4 host. */
typedef struct mrg_src {
    dfx_merge_src *in;    /* its entry of the input */
    const dfx_merge_src *chip; /* level 3: a chip (NULL: the host) */
    const dfx_merge_src *host; /* level 4: a host's level-3 outputs (chip NULL) */
    int pid_base;         /* level 4: added to the host's own pids */
    char *dfx_text;       /* its dfx.json; NULL for a chip without files */
    size_t dfx_len;
    mrg_obj dfx;
    char *trace_text;     /* its trace.json; NULL when absent */
    size_t trace_len;
    mrg_line *lines;      /* the traceEvents lines, in file order */
    size_t nlines, cap;
    mrg_str other;        /* the otherData line */
    int pid;              /* pid in the merged trace */
    int64_t shift_ns;     /* added to every time stamp */
    double scale;         /* level 4, with a clock rate: ts -> scale * ts + shift (0: none) */
    double shift;         /* ... in ns, unrounded (shift_ns is it rounded) */
    uint64_t id_base;     /* added to every flow id */
    uint64_t id_top;      /* largest flow id + 1 */
    uint64_t task_base;   /* added to its task ids in the merged report (ids repeat across
                           * processes; the merged trace.json keeps each process's own) */
    uint64_t task_top;    /* largest task id + 1 */
    char **owned;         /* lines the merge wrote itself (annotated or added), nowned */
    size_t nowned, cap_owned;
} mrg_src;

typedef struct mrg {
    const char *dir;
    const dfx_merge_in *in; /* its calls and hooks */
    int level;            /* 3: a host and its chips; 4: the hosts of an MPI job */
    int nsrc;             /* 1 + chips, or the hosts */
    mrg_src *src;
    uint64_t clamped;
} mrg;

/* ---- text.c: reading plexus's own text ---- */

/* Parses text[0..n) (a dfx.json; what names it in messages) into o, which keeps text. Returns
 * PX_OK, or PX_EINVAL when it is not a JSON object, or PX_ENOMEM. */
px_status mrg_obj_parse(const char *text, size_t n, const char *what, mrg_obj *o);
/* Frees o's tree. */
void mrg_obj_free(mrg_obj *o);
/* The value of o's member i as written. */
mrg_str mrg_value(const mrg_obj *o, size_t i);
/* The value of member key as written, or a span of n 0. */
mrg_str mrg_get(const mrg_obj *o, const char *key);
/* The number value of key, or def. */
double mrg_num(const mrg_obj *o, const char *key, double def);
/* 1 when the string value of key is s. */
int mrg_str_is(const mrg_obj *o, const char *key, const char *s);
/* 1 when member key of object o is true. */
int mrg_true(const dfxc_json *o, const char *key);
/* Parses microseconds with up to three decimals (as dfxc_buf_us writes them) into ns;
 * returns 0 with *ns and *after, or -1. */
int mrg_parse_us(const char *s, const char *end, int64_t *ns, const char **after);
/* Finds needle in [s, end), the last occurrence when last; NULL when absent. */
const char *mrg_find(const char *s, const char *end, const char *needle, int last);
/* Copies the JSON string at s (its opening quote) into out (n bytes), decoded. */
void mrg_unescape(const char *s, const char *end, char *out, size_t n);
/* The unsigned number after needle in [p, end), or -1 when absent. */
int64_t mrg_after_num(const char *p, const char *end, const char *needle);

/* ---- load.c ---- */

/* Loads one source's dfx.json (required) and trace.json (when the host has one). */
px_status mrg_load_src(mrg *m, mrg_src *s);
/* Level 3: loads the host, then each chip that delivered its files. */
px_status mrg_load_all(mrg *m);

/* ---- trace.c ---- */

/* 1 for the process metadata the merge writes itself. */
int mrg_own_meta(const mrg_line *l);
/* The pid of line l in the merge. */
int mrg_pid(const mrg_src *s, const mrg_line *l);
/* A task id of source s, unique in the merge's report. */
uint64_t mrg_task(const mrg_src *s, const mrg_line *l, uint64_t id);
/* Time stamp ts (ns) of source s on the merge's time base. */
int64_t mrg_map(const mrg_src *s, int64_t ts);
/* A duration of source s in the merge's ns. */
int64_t mrg_dur(const mrg_src *s, int64_t d);
/* Level 4: a host's process metadata line under the merge's pid (into b or model). */
void mrg_host_meta(const mrg_src *s, const mrg_line *l, dfxc_buf *b, dfxc_model *model);
/* Writes the merged trace.json. Returns PX_OK or the error. */
px_status mrg_trace(mrg *m);

/* ---- report.c ---- */

/* Writes report.html of the merged run. Returns PX_OK or the error. */
px_status mrg_report(mrg *m);
/* Level 4: host source s's "calls" as inner tasks in the report. */
void mrg_host_calls(const mrg_src *s, dfxc_model *model);

/* ---- dfxjson.c ---- */

/* Writes level 3's merged dfx.json. Returns PX_OK or the error. */
px_status mrg_dfx(const mrg *m);

/* ---- adds.c ---- */

/* Level 3: the chips' agreement spans get their excluded chips' deaths, and the layers above
 * add their slices. Returns PX_OK or PX_ENOMEM. */
px_status mrg_additions(mrg *m);

/* ---- hosts.c ---- */

/* Level 4: merges in->src, the hosts. Returns PX_OK or the error (message set). */
px_status mrg_hosts(mrg *m);

/* ---- merge.c ---- */

/* Frees what the sources of m hold. */
void mrg_free_src(mrg_src *s);

#endif
