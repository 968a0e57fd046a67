/*
 * trace_load.c - trace.json, deps.json and dfx.json read back for `plexus trace summary`
 * (trace_load.h), with libjansson.
 *
 * trace.json gives the timed tasks ("X" events of category "task", id in args.task), the
 * track names ("thread_name" metadata) and, through its flow starts, the edges; deps.json
 * gives every submitted task and the edges, which win when present (dfxc_model_finish).
 * Times are microseconds with three decimals in the files and nanoseconds in the model.
 */
#include "trace_load.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Converts microseconds as written in the files back to ns. */
static int64_t trace_us_ns(double us)
{
    return isfinite(us) && fabs(us) < 9e12 ? (int64_t)llround(us * 1000.0) : 0;
}

/* The number member key of o (integer or real), or def when absent or not a number. */
static double trace_num(const json_t *o, const char *key, double def)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;

    return json_is_number(v) ? json_number_value(v) : def;
}

/* The string member key of o, or def. */
static const char *trace_str(const json_t *o, const char *key, const char *def)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;

    return json_is_string(v) ? json_string_value(v) : def;
}

/* A task id as written (a non-negative integer), or -1. */
static int64_t trace_id(const json_t *o, const char *key)
{
    double v = trace_num(o, key, -1);

    return v >= 0 && v < 9.007199254740992e15 && v == floor(v) ? (int64_t)v : -1;
}

/* Checks a document's "version" member (at top or in otherData). */
static px_status trace_version(const json_t *holder, const char *file)
{
    double v = trace_num(holder, "version", -1);

    if (v != 1)
        return px_set_error(PX_EINVAL, "%s: version %g is not supported (this plexus reads "
                            "version 1); use the plexus that wrote it", file, v);
    return PX_OK;
}

/* Adds one trace event to m. Returns PX_OK or PX_EINVAL for a task without an id. */
static px_status trace_event(const json_t *e, size_t i, dfxc_model *m)
{
    const char *ph = trace_str(e, "ph", ""), *cat = trace_str(e, "cat", "");
    const char *name = trace_str(e, "name", "");
    const json_t *args = json_object_get(e, "args");
    int pid = (int)trace_num(e, "pid", 0), tid = (int)trace_num(e, "tid", 0);

    if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0) {
        dfxc_model_add_track(m, pid, tid, trace_str(args, "name", "?"));
    } else if (strcmp(ph, "X") == 0 && strcmp(cat, "task") == 0) {
        int64_t id = trace_id(args, "task");

        if (id < 0)
            return px_set_error(PX_EINVAL, "trace.json: traceEvents[%zu] is a task slice "
                                "without a valid args.task", i);
        dfxc_model_add_timed(m, (uint64_t)id, name, pid, tid, (int)trace_num(args, "core", -1),
                             trace_us_ns(trace_num(e, "ts", 0)),
                             trace_us_ns(trace_num(e, "dur", 0)));
    } else if (strcmp(ph, "s") == 0 && strcmp(cat, "dep") == 0) {
        int64_t p = trace_id(args, "from"), c = trace_id(args, "to");

        if (p < 0 || c < 0)
            return px_set_error(PX_EINVAL, "trace.json: traceEvents[%zu] is a flow without "
                                "valid args.from and args.to", i);
        dfxc_model_add_edge(m, 0, (uint64_t)p, (uint64_t)c);
    }
    return PX_OK;
}

/* trace.json's root into m. */
static px_status trace_root(const json_t *root, dfxc_model *m)
{
    const json_t *ev = json_object_get(root, "traceEvents");
    const json_t *other = json_object_get(root, "otherData");
    px_status st = trace_version(other, "trace.json");

    if (st != PX_OK)
        return st;
    if (!json_is_array(ev))
        return px_set_error(PX_EINVAL, "trace.json: no \"traceEvents\" array");
    snprintf(m->clock, sizeof(m->clock), "%s", trace_str(other, "clock", "?"));
    for (size_t i = 0; i < json_array_size(ev) && st == PX_OK; i++)
        st = trace_event(json_array_get(ev, i), i, m);
    m->has_trace = st == PX_OK;
    return st;
}

/* deps.json's root into m. */
static px_status deps_root(const json_t *root, dfxc_model *m)
{
    const json_t *tasks = json_object_get(root, "tasks"), *edges = json_object_get(root, "edges");
    px_status st = trace_version(root, "deps.json");

    if (st != PX_OK)
        return st;
    if (!json_is_array(tasks) || !json_is_array(edges))
        return px_set_error(PX_EINVAL, "deps.json: no \"tasks\" and \"edges\" arrays");
    for (size_t i = 0; i < json_array_size(tasks); i++) {
        const json_t *t = json_array_get(tasks, i);
        int64_t id = trace_id(t, "id");

        if (id < 0)
            return px_set_error(PX_EINVAL, "deps.json: task %zu has no valid \"id\"", i);
        dfxc_model_add_task(m, (uint64_t)id, trace_str(t, "kernel", "?"));
    }
    for (size_t i = 0; i < json_array_size(edges); i++) {
        const json_t *e = json_array_get(edges, i);
        double p = json_number_value(json_array_get(e, 0)), c = json_number_value(
                                                                json_array_get(e, 1));

        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_number(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)) || p < 0 || c < 0 || p != floor(p) ||
            c != floor(c) || p >= 9.007199254740992e15 || c >= 9.007199254740992e15)
            return px_set_error(PX_EINVAL, "deps.json: edge %zu is not [producer, consumer]", i);
        dfxc_model_add_edge(m, 1, (uint64_t)p, (uint64_t)c);
    }
    m->has_deps = 1;
    return PX_OK;
}

px_status trace_load_buf(const char *buf, size_t len, trace_file which, dfxc_model *m)
{
    const char *file = which == TRACE_FILE_TRACE ? "trace.json" : "deps.json";
    json_error_t err;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    px_status st;

    if (root == NULL)
        return px_set_error(PX_EINVAL, "%s: not valid JSON at line %d, column %d: %s", file,
                            err.line, err.column, err.text);
    if (!json_is_object(root))
        st = px_set_error(PX_EINVAL, "%s: the document is not an object", file);
    else
        st = which == TRACE_FILE_TRACE ? trace_root(root, m) : deps_root(root, m);
    json_decref(root);
    if (st == PX_OK && m->oom)
        st = px_set_error(PX_ENOMEM, "%s: out of memory building the task model", file);
    return st;
}

/* Reads dir/name whole into *buf (*len bytes). PX_OK, PX_ENOENT, PX_EIO or PX_ENOMEM. */
static px_status trace_read(const char *dir, const char *name, char **buf, size_t *len)
{
    char path[4096];
    FILE *f;
    long n;

    *buf = NULL;
    *len = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
        return px_set_error(PX_EINVAL, "path %s/%s is too long", dir, name);
    f = fopen(path, "rb");
    if (f == NULL)
        return errno == ENOENT ? PX_ENOENT
                               : px_set_error(PX_EIO, "cannot open %s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return px_set_error(PX_EIO, "cannot read %s: %s", path, strerror(errno));
    }
    *buf = malloc((size_t)n + 1);
    if (*buf == NULL) {
        fclose(f);
        return px_set_error(PX_ENOMEM, "out of memory reading %s (%ld bytes)", path, n);
    }
    if (fread(*buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(*buf);
        *buf = NULL;
        return px_set_error(PX_EIO, "cannot read %s: short read", path);
    }
    fclose(f);
    *len = (size_t)n;
    return PX_OK;
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

px_status trace_load_dir(const char *dir, dfxc_model *m)
{
    px_status st;

    dfxc_model_init(m, NULL);
    st = trace_load_file(dir, "trace.json", TRACE_FILE_TRACE, m);
    if (st == PX_OK)
        st = trace_load_file(dir, "deps.json", TRACE_FILE_DEPS, m);
    if (st == PX_OK && (m->has_trace || m->has_deps))
        st = dfxc_model_finish(m);
    return st;
}

/* Prints one collector's row of the transport table and its refusals. */
static void trace_print_collector(const char *name, const json_t *c)
{
    const json_t *refused = json_object_get(c, "refused");

    printf("%-12s %-12s %10.0f %10.0f %8.0f %13.0f\n", name, trace_str(c, "transport", "?"),
           trace_num(c, "produced", 0), trace_num(c, "collected", 0),
           trace_num(c, "dropped", 0), trace_num(c, "writer_waits", 0));
    for (size_t i = 0; json_is_array(refused) && i < json_array_size(refused); i++)
        printf("  refused %s: %s\n", trace_str(json_array_get(refused, i), "name", "?"),
               trace_str(json_array_get(refused, i), "reason", "?"));
}

px_status trace_print_dfx(const char *dir)
{
    char *buf;
    size_t len;
    json_error_t err;
    json_t *root, *cols;
    const char *name;
    json_t *c;
    px_status st = trace_read(dir, "dfx.json", &buf, &len);

    if (st != PX_OK)
        return st;
    root = json_loadb(buf, len, 0, &err);
    free(buf);
    cols = root ? json_object_get(root, "collectors") : NULL;
    if (root == NULL || trace_num(root, "version", -1) != 1 || !json_is_object(cols)) {
        json_decref(root);
        return px_set_error(PX_EINVAL, "%s/dfx.json: not a version 1 dfx.json with a "
                            "\"collectors\" object", dir);
    }
    printf("transports (dfx.json, clock %s):\n", trace_str(root, "clock", "?"));
    printf("%-12s %-12s %10s %10s %8s %13s\n", "collector", "transport", "produced", "collected",
           "dropped", "writer_waits");
    json_object_foreach(cols, name, c)
        trace_print_collector(name, c);
    json_decref(root);
    return PX_OK;
}
