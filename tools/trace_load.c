/*
 * trace_load.c - trace.json, deps.json and dfx.json read back for `plexus trace summary`
 * (trace_load.h), with plexus's one JSON reader (src/dfx/collectors/json.h).
 *
 * trace.json gives the timed tasks ("X" events of category "task", id in args.task), the
 * track names ("thread_name" metadata) and, through its flow starts, the edges; deps.json
 * gives every submitted task and the edges, which win when present (dfxc_model_finish).
 * Times are microseconds with three decimals in the files and nanoseconds in the model.
 *
 * The reader hands the elements of the top-level arrays ("traceEvents", "tasks", "edges") over
 * one at a time (dfxc_json_parse_each), so a 100k-task run's 70 MB trace.json needs memory
 * for one event, not for a tree of a million, whatever its layout.
 */
#include "trace_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfx/collectors/json.h"
#include "util/file.h"

/* Converts microseconds as written in the files back to ns. */
static int64_t trace_us_ns(double us)
{
    return isfinite(us) && fabs(us) < 9e12 ? (int64_t)llround(us * 1000.0) : 0;
}

/* The number member key of o (integer or real), or def when absent or not a number. */
static double trace_num(const dfxc_json *o, const char *key, double def)
{
    return dfxc_json_num(o, key, def);
}

/* The string member key of o, or def. */
static const char *trace_str(const dfxc_json *o, const char *key, const char *def)
{
    return dfxc_json_str(o, key, def);
}

/* 1 when v is an array (a NULL v is not). */
static int trace_is_arr(const dfxc_json *v)
{
    return v != NULL && v->type == DFXC_JARR;
}

/* The number of elements of array v (0 for anything else). */
static size_t trace_size(const dfxc_json *v)
{
    return trace_is_arr(v) ? v->n : 0;
}

/* Element i of array v, or NULL. */
static const dfxc_json *trace_at(const dfxc_json *v, size_t i)
{
    return i < trace_size(v) ? &v->kids[i] : NULL;
}

/* The value of number v, or 0 when v is not a number. */
static double trace_numv(const dfxc_json *v)
{
    return v != NULL && v->type == DFXC_JNUM ? v->num : 0;
}

/* A task id as written (a non-negative integer), or -1. */
static int64_t trace_id(const dfxc_json *o, const char *key)
{
    double v = trace_num(o, key, -1);

    return v >= 0 && v < 9.007199254740992e15 && v == floor(v) ? (int64_t)v : -1;
}

/* Checks a document's "version" member (at top or in otherData). */
static px_status trace_version(const dfxc_json *holder, const char *file)
{
    double v = trace_num(holder, "version", -1);

    if (v != 1)
        return px_set_error(PX_EINVAL, "%s: version %g is not supported (this plexus reads "
                            "version 1); use the plexus that wrote it", file, v);
    return PX_OK;
}

/* Set by trace_load_dir while it loads a merged run's files (dfx.json level 3 or 4): every
 * process numbers its own tasks, so a task is keyed by its process too (trace_key). */
static int trace_merged;

/* The model's id of task id of process pid: the id itself, or in a merged run's files the
 * pid above bit 40 (deps.json there is the host's, pid 0). */
static uint64_t trace_key(int pid, int64_t id)
{
    return trace_merged ? (uint64_t)pid << 40 | (uint64_t)id : (uint64_t)id;
}

/* Adds one trace event to m. Returns PX_OK or PX_EINVAL for a task without an id. */
static px_status trace_event(const dfxc_json *e, size_t i, dfxc_model *m)
{
    const char *ph = trace_str(e, "ph", ""), *cat = trace_str(e, "cat", "");
    const char *name = trace_str(e, "name", "");
    const dfxc_json *args = dfxc_json_get(e, "args");
    int pid = (int)trace_num(e, "pid", 0), tid = (int)trace_num(e, "tid", 0);

    if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0) {
        dfxc_model_add_track(m, pid, tid, trace_str(args, "name", "?"));
    } else if (strcmp(ph, "X") == 0 && strcmp(cat, "task") == 0) {
        int64_t id = trace_id(args, "task");

        if (id < 0)
            return px_set_error(PX_EINVAL, "trace.json: traceEvents[%zu] is a task slice "
                                "without a valid args.task", i);
        dfxc_model_add_timed(m, trace_key(pid, id), name, pid, tid,
                             (int)trace_num(args, "core", -1),
                             trace_us_ns(trace_num(e, "ts", 0)),
                             trace_us_ns(trace_num(e, "dur", 0)));
    } else if (strcmp(ph, "s") == 0 && strcmp(cat, "dep") == 0) {
        int64_t p = trace_id(args, "from"), c = trace_id(args, "to");

        if (p < 0 || c < 0)
            return px_set_error(PX_EINVAL, "trace.json: traceEvents[%zu] is a flow without "
                                "valid args.from and args.to", i);
        dfxc_model_add_edge(m, 0, trace_key(pid, p), trace_key(pid, c));
    }
    return PX_OK;
}

/* One task of deps.json. */
static px_status deps_task(const dfxc_json *t, size_t i, dfxc_model *m)
{
    int64_t id = trace_id(t, "id");

    if (t->type != DFXC_JOBJ)
        return px_set_error(PX_EINVAL, "deps.json: task %zu is not an object", i);
    if (id < 0)
        return px_set_error(PX_EINVAL, "deps.json: task %zu has no valid \"id\"", i);
    dfxc_model_add_task(m, (uint64_t)id, trace_str(t, "kernel", "?"));
    return PX_OK;
}

/* One [producer, consumer] of deps.json (index i). */
static px_status deps_edge(const dfxc_json *e, size_t i, dfxc_model *m)
{
    const dfxc_json *a = e->type == DFXC_JARR && e->n == 2 ? &e->kids[0] : NULL;
    const dfxc_json *b = a != NULL ? &e->kids[1] : NULL;
    double p = a != NULL ? a->num : -1, c = b != NULL ? b->num : -1;

    if (a == NULL || a->type != DFXC_JNUM || b->type != DFXC_JNUM || p < 0 || c < 0 ||
        p != floor(p) || c != floor(c) || p >= 9.007199254740992e15 ||
        c >= 9.007199254740992e15)
        return px_set_error(PX_EINVAL, "deps.json: edge %zu is not [producer, consumer]", i);
    dfxc_model_add_edge(m, 1, (uint64_t)p, (uint64_t)c);
    return PX_OK;
}

/* What the reader's callback needs: the file, the model, each array's count so far. */
typedef struct trace_each {
    trace_file which;
    dfxc_model *m;
    size_t nev, ntask, nedge;
    int failed;        /* a callback refused an element (its message is set) */
} trace_each;

/* dfxc_json_each_cb: one element of a top-level array into the model (the arrays of other
 * names are not read). */
static px_status trace_each_cb(void *ctx, const char *key, const dfxc_json *el)
{
    trace_each *x = ctx;
    px_status st = PX_OK;

    if (x->which == TRACE_FILE_TRACE && strcmp(key, "traceEvents") == 0) {
        st = el->type == DFXC_JOBJ ? trace_event(el, x->nev, x->m)
                                   : px_set_error(PX_EINVAL, "trace.json: traceEvents[%zu] is "
                                                  "not an event object", x->nev);
        x->nev++;
    } else if (x->which == TRACE_FILE_DEPS && strcmp(key, "tasks") == 0) {
        st = deps_task(el, x->ntask++, x->m);
    } else if (x->which == TRACE_FILE_DEPS && strcmp(key, "edges") == 0) {
        st = deps_edge(el, x->nedge++, x->m);
    }
    x->failed |= st != PX_OK;
    return st;
}

/* trace.json's root (its traceEvents read already) into m. */
static px_status trace_root(const dfxc_json *root, dfxc_model *m)
{
    const dfxc_json *other = dfxc_json_get(root, "otherData");
    px_status st = trace_version(other, "trace.json");

    if (st != PX_OK)
        return st;
    if (!trace_is_arr(dfxc_json_get(root, "traceEvents")))
        return px_set_error(PX_EINVAL, "trace.json: no \"traceEvents\" array");
    snprintf(m->clock, sizeof(m->clock), "%s", trace_str(other, "clock", "?"));
    m->has_trace = 1;
    return PX_OK;
}

/* deps.json's root (its tasks and edges read already) into m. */
static px_status deps_root(const dfxc_json *root, dfxc_model *m)
{
    px_status st = trace_version(root, "deps.json");

    if (st != PX_OK)
        return st;
    if (!trace_is_arr(dfxc_json_get(root, "tasks")) ||
        !trace_is_arr(dfxc_json_get(root, "edges")))
        return px_set_error(PX_EINVAL, "deps.json: no \"tasks\" and \"edges\" arrays");
    m->has_deps = 1;
    return PX_OK;
}

px_status trace_load_buf(const char *buf, size_t len, trace_file which, dfxc_model *m)
{
    const char *file = which == TRACE_FILE_TRACE ? "trace.json" : "deps.json";
    trace_each x = {.which = which, .m = m};
    dfxc_json *root = NULL;
    px_status st;

    st = dfxc_json_parse_each(buf != NULL ? buf : "", buf != NULL ? len : 0, file,
                              trace_each_cb, &x, &root);
    if (st == PX_EINVAL && !x.failed) {
        char msg[1024];

        snprintf(msg, sizeof(msg), "%s", px_last_error());
        return px_set_error(PX_EINVAL, "%s: not valid JSON (%s)", file, msg);
    }
    if (st != PX_OK)
        return st;
    if (root->type != DFXC_JOBJ)
        st = px_set_error(PX_EINVAL, "%s: the document is not an object", file);
    else
        st = which == TRACE_FILE_TRACE ? trace_root(root, m) : deps_root(root, m);
    dfxc_json_free(root);
    if (st == PX_OK && m->oom)
        st = px_set_error(PX_ENOMEM, "%s: out of memory building the task model", file);
    return st;
}

/* Reads dir/name whole into *buf (*len bytes; util_file_read). PX_OK, PX_ENOENT (no message),
 * PX_EINVAL (the path is too long), PX_EIO or PX_ENOMEM. */
static px_status trace_read(const char *dir, const char *name, char **buf, size_t *len)
{
    char path[4096];

    *buf = NULL;
    *len = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
        return px_set_error(PX_EINVAL, "path %s/%s is too long", dir, name);
    return util_file_read(path, "trace", buf, len);
}

/* Adds dir/name to m when it exists. */
static px_status trace_load_file(const char *dir, const char *name, trace_file which,
                                 dfxc_model *m)
{
    char *buf;
    size_t len;
    px_status st = trace_read(dir, name, &buf, &len);

    if (st == PX_ENOENT)
        return PX_OK;
    if (st == PX_OK)
        st = trace_load_buf(buf, len, which, m);
    free(buf);
    return st;
}

/* The chip calls of one host (a merged dfx.json's "calls": [host task, chip, first chip task,
 * tasks] each, in the trace's ids) as inner tasks: its processes are pids base + 0 (the
 * host) and base + chip + 1, as in report.html. */
static void trace_calls(const dfxc_json *calls, int base, dfxc_model *m)
{
    for (size_t i = 0; trace_is_arr(calls) && i < trace_size(calls); i++) {
        const dfxc_json *c = trace_at(calls, i);
        double host = trace_numv(trace_at(c, 0));
        double chip = trace_numv(trace_at(c, 1));
        double first = trace_numv(trace_at(c, 2));
        double n = trace_numv(trace_at(c, 3));

        if (trace_size(c) != 4 || host < 0 || chip < 0 || chip > 999 || first < 0 ||
            n < 0 || n > 1e9)
            continue;
        for (uint64_t t = 0; t < (uint64_t)n; t++)
            dfxc_model_add_inner(m, trace_key(base, (int64_t)host),
                                 trace_key(base + (int)chip + 1, (int64_t)first + (int64_t)t));
    }
}

/* A merged run's dfx.json (level 3: "calls"; level 4: each of "hosts" with its calls and
 * trace_pid_base), or NULL for a single engine's (or none). */
static dfxc_json *trace_merged_dfx(const char *dir)
{
    dfxc_json *root = NULL;
    char *buf;
    size_t len;

    if (trace_read(dir, "dfx.json", &buf, &len) != PX_OK)
        return NULL;
    if (dfxc_json_parse(buf, len, "dfx.json", &root) != PX_OK)
        root = NULL;
    free(buf);
    if (root != NULL && trace_num(root, "level", 2) >= 3)
        return root;
    dfxc_json_free(root);
    return NULL;
}

px_status trace_load_dir(const char *dir, dfxc_model *m)
{
    dfxc_json *merged = trace_merged_dfx(dir);
    const dfxc_json *hosts = dfxc_json_get(merged, "hosts");
    px_status st;

    dfxc_model_init(m, NULL);
    trace_merged = merged != NULL;
    st = trace_load_file(dir, "trace.json", TRACE_FILE_TRACE, m);
    if (st == PX_OK)
        st = trace_load_file(dir, "deps.json", TRACE_FILE_DEPS, m);
    if (merged != NULL)
        trace_calls(dfxc_json_get(merged, "calls"), 0, m);
    for (size_t i = 0; trace_is_arr(hosts) && i < trace_size(hosts); i++)
        trace_calls(dfxc_json_get(trace_at(hosts, i), "calls"),
                    (int)trace_num(trace_at(hosts, i), "trace_pid_base", 0), m);
    if (st == PX_OK && (m->has_trace || m->has_deps))
        st = dfxc_model_finish(m);
    trace_merged = 0;
    dfxc_json_free(merged);
    return st;
}

/* Prints one collector's row of the transport table and its refusals. */
static void trace_print_collector(const char *name, const dfxc_json *c)
{
    const dfxc_json *refused = dfxc_json_get(c, "refused");

    printf("%-12s %-12s %10.0f %10.0f %8.0f %13.0f\n", name, trace_str(c, "transport", "?"),
           trace_num(c, "produced", 0), trace_num(c, "collected", 0),
           trace_num(c, "dropped", 0), trace_num(c, "writer_waits", 0));
    for (size_t i = 0; trace_is_arr(refused) && i < trace_size(refused); i++)
        printf("  refused %s: %s\n", trace_str(trace_at(refused, i), "name", "?"),
               trace_str(trace_at(refused, i), "reason", "?"));
}

/* A merged run's processes: level 3 its chips, level 4 its hosts with their clocks and the
 * hosts missing (the table above is the host's, or host 0's, own). */
static void trace_print_hosts(const dfxc_json *root)
{
    const dfxc_json *hosts = dfxc_json_get(root, "hosts"), *miss;

    if (trace_num(root, "level", 2) == 3) {
        const dfxc_json *gone = dfxc_json_get(root, "chips_missing"), *chips;

        printf("level 3: the host and %zu chips (each chip's own table in chips/chip<i>/)\n",
               trace_size(dfxc_json_get(root, "chips")));
        chips = dfxc_json_get(root, "chips");
        for (size_t i = 0; trace_is_arr(gone) && i < trace_size(gone); i++) {
            int c = (int)trace_numv(trace_at(gone, i));

            printf("  chip %d missing: %s\n", c,
                   c >= 0 && (size_t)c < trace_size(chips)
                       ? trace_str(trace_at(chips, (size_t)c), "error", "?") : "?");
        }
    }
    if (trace_num(root, "level", 2) != 4)
        return;
    printf("level 4: %g hosts (each host's own files in hosts/host<h>/)\n",
           trace_num(root, "nhosts", 0));
    for (size_t i = 0; trace_is_arr(hosts) && i < trace_size(hosts); i++) {
        const dfxc_json *h = trace_at(hosts, i);

        printf("  host %g (%s): %zu chips, clock offset %.3f us within %.3f us, rate %.3f ppm\n",
               trace_num(h, "host", -1), trace_str(h, "host_id", "?"),
               trace_size(dfxc_json_get(h, "chips")), trace_num(h, "clock_offset_us", 0),
               trace_num(h, "clock_uncertainty_us", 0), trace_num(h, "clock_rate_ppm", 0));
    }
    miss = dfxc_json_get(root, "hosts_missing");
    for (size_t i = 0; trace_is_arr(miss) && i < trace_size(miss); i++)
        printf("  host %g missing: %s\n", trace_num(trace_at(miss, i), "host", -1),
               trace_str(trace_at(miss, i), "why", "?"));
}

px_status trace_print_dfx(const char *dir)
{
    dfxc_json *root = NULL;
    const dfxc_json *cols;
    char *buf;
    size_t len;
    px_status st = trace_read(dir, "dfx.json", &buf, &len);

    if (st != PX_OK)
        return st;
    if (dfxc_json_parse(buf, len, "dfx.json", &root) != PX_OK)
        root = NULL;
    free(buf);
    cols = dfxc_json_get(root, "collectors");
    if (root == NULL || trace_num(root, "version", -1) != 1 || cols == NULL ||
        cols->type != DFXC_JOBJ) {
        dfxc_json_free(root);
        return px_set_error(PX_EINVAL, "%s/dfx.json: not a version 1 dfx.json with a "
                            "\"collectors\" object", dir);
    }
    printf("transports (dfx.json, clock %s):\n", trace_str(root, "clock", "?"));
    printf("%-12s %-12s %10s %10s %8s %13s\n", "collector", "transport", "produced", "collected",
           "dropped", "writer_waits");
    for (size_t i = 0; i < cols->n; i++)
        trace_print_collector(cols->kids[i].key, &cols->kids[i]);
    trace_print_hosts(root);
    dfxc_json_free(root);
    return PX_OK;
}
