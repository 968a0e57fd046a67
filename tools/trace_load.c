/*
 * trace_load.c - trace.json, deps.json and dfx.json read back for `plexus trace summary`
 * (trace_load.h), with libjansson.
 *
 * trace.json gives the timed tasks ("X" events of category "task", id in args.task), the
 * track names ("thread_name" metadata) and, through its flow starts, the edges; deps.json
 * gives every submitted task and the edges, which win when present (dfxc_model_finish).
 * Times are microseconds with three decimals in the files and nanoseconds in the model.
 *
 * A file in the layout plexus writes (trace.json: one event per line; deps.json: one task per
 * line, edges a line at a time) is parsed a line at a time, each line with libjansson, so a
 * 100k-task run's 70 MB trace.json needs memory for one event, not for a tree of a million
 * (parsed whole it took 1.1 GB and 6 s, against 80 MB and 0.4 s for the reader this
 * replaced); any other text is parsed as one document. Both paths give the same model.
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

static px_status deps_task(const json_t *t, size_t i, dfxc_model *m);
static px_status deps_edge(const json_t *e, size_t i, dfxc_model *m);

/* deps.json's root into m. */
static px_status deps_root(const json_t *root, dfxc_model *m)
{
    const json_t *tasks = json_object_get(root, "tasks"), *edges = json_object_get(root, "edges");
    px_status st = trace_version(root, "deps.json");

    if (st != PX_OK)
        return st;
    if (!json_is_array(tasks) || !json_is_array(edges))
        return px_set_error(PX_EINVAL, "deps.json: no \"tasks\" and \"edges\" arrays");
    for (size_t i = 0; i < json_array_size(tasks) && st == PX_OK; i++)
        st = deps_task(json_array_get(tasks, i), i, m);
    for (size_t i = 0; i < json_array_size(edges) && st == PX_OK; i++)
        st = deps_edge(json_array_get(edges, i), i, m);
    m->has_deps = st == PX_OK;
    return st;
}

/* One line of text: [p, p + n) without its newline, its trailing comma and its indent. */
typedef struct trace_line {
    const char *p;
    size_t n;
} trace_line;

/* Takes the next line from [*at, end) into *l; 0 at the end. */
static int trace_next_line(const char **at, const char *end, trace_line *l)
{
    const char *p = *at, *nl;

    if (p >= end)
        return 0;
    nl = memchr(p, '\n', (size_t)(end - p));
    *at = nl ? nl + 1 : end;
    l->p = p;
    l->n = (size_t)((nl ? nl : end) - p);
    while (l->n > 0 && l->p[0] == ' ') {
        l->p++;
        l->n--;
    }
    if (l->n > 0 && l->p[l->n - 1] == ',')
        l->n--;
    return 1;
}

/* 1 when line l is exactly s. */
static int trace_line_is(const trace_line *l, const char *s)
{
    return l->n == strlen(s) && memcmp(l->p, s, l->n) == 0;
}

/* Parses one line as a JSON value (wrapped in [ ] when wrap); NULL with the error set. */
static json_t *trace_line_json(const trace_line *l, int wrap, const char *file, size_t no)
{
    json_error_t err;
    json_t *v;

    if (!wrap) {
        v = json_loadb(l->p, l->n, JSON_REJECT_DUPLICATES, &err);
    } else {
        char *tmp = malloc(l->n + 2);

        if (tmp == NULL) {
            px_set_error(PX_ENOMEM, "%s: out of memory", file);
            return NULL;
        }
        tmp[0] = '[';
        memcpy(tmp + 1, l->p, l->n);
        tmp[l->n + 1] = ']';
        v = json_loadb(tmp, l->n + 2, JSON_REJECT_DUPLICATES, &err);
        free(tmp);
    }
    if (v == NULL)
        px_set_error(PX_EINVAL, "%s: line %zu is not valid JSON (column %d: %s)", file, no,
                     err.column, err.text);
    return v;
}

static const char trace_head[] = "{\"displayTimeUnit\": \"ns\",\n\"traceEvents\": [\n";
static const char deps_head[] = "{\"version\": 1, \"tasks\": [\n";

/* trace.json in plexus's layout, a line at a time. */
static px_status trace_by_lines(const char *buf, size_t len, dfxc_model *m)
{
    const char *at = buf + sizeof(trace_head) - 1, *end = buf + len;
    size_t no = 2, i = 0;
    px_status st = PX_OK;
    trace_line l;
    json_t *v;

    while (st == PX_OK && trace_next_line(&at, end, &l)) {
        no++;
        if (l.n >= 1 && l.p[0] == ']') { /* "]," then {"otherData": ...} as the rest */
            trace_line rest = {"", 0};
            char *doc;

            rest.p = at;
            rest.n = (size_t)(end - at);
            if ((doc = malloc(rest.n + 2)) == NULL)
                return px_set_error(PX_ENOMEM, "trace.json: out of memory");
            doc[0] = '{';
            memcpy(doc + 1, rest.p, rest.n);
            rest.p = doc;
            rest.n++;
            v = trace_line_json(&rest, 0, "trace.json", no + 1);
            free(doc);
            if (v == NULL)
                return PX_EINVAL;
            st = trace_version(json_object_get(v, "otherData"), "trace.json");
            if (st == PX_OK)
                snprintf(m->clock, sizeof(m->clock), "%s",
                         trace_str(json_object_get(v, "otherData"), "clock", "?"));
            json_decref(v);
            m->has_trace = st == PX_OK;
            return st;
        }
        if ((v = trace_line_json(&l, 0, "trace.json", no)) == NULL)
            return PX_EINVAL;
        st = json_is_object(v) ? trace_event(v, i++, m)
                               : px_set_error(PX_EINVAL, "trace.json: line %zu is not an "
                                              "event object", no);
        json_decref(v);
    }
    return st != PX_OK ? st : px_set_error(PX_EINVAL, "trace.json: ends inside traceEvents");
}

/* One task line of deps.json. */
static px_status deps_task(const json_t *t, size_t i, dfxc_model *m)
{
    int64_t id = trace_id(t, "id");

    if (id < 0)
        return px_set_error(PX_EINVAL, "deps.json: task %zu has no valid \"id\"", i);
    dfxc_model_add_task(m, (uint64_t)id, trace_str(t, "kernel", "?"));
    return PX_OK;
}

/* One [producer, consumer] of deps.json (index i). */
static px_status deps_edge(const json_t *e, size_t i, dfxc_model *m)
{
    const json_t *a = json_array_get(e, 0), *b = json_array_get(e, 1);
    double p = json_number_value(a), c = json_number_value(b);

    if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_number(a) ||
        !json_is_number(b) || p < 0 || c < 0 || p != floor(p) || c != floor(c) ||
        p >= 9.007199254740992e15 || c >= 9.007199254740992e15)
        return px_set_error(PX_EINVAL, "deps.json: edge %zu is not [producer, consumer]", i);
    dfxc_model_add_edge(m, 1, (uint64_t)p, (uint64_t)c);
    return PX_OK;
}

/* deps.json in plexus's layout, a line at a time (tasks one per line, edges several). */
static px_status deps_by_lines(const char *buf, size_t len, dfxc_model *m)
{
    const char *at = buf + sizeof(deps_head) - 1, *end = buf + len;
    size_t no = 1, ntask = 0, nedge = 0;
    int in_edges = 0;
    px_status st = PX_OK;
    trace_line l;

    while (st == PX_OK && trace_next_line(&at, end, &l)) {
        json_t *v;

        no++;
        if (!in_edges && trace_line_is(&l, "]")) {
            if (!trace_next_line(&at, end, &l) || !trace_line_is(&l, "\"edges\": ["))
                return px_set_error(PX_EINVAL, "deps.json: no \"edges\" array after the tasks");
            no++;
            in_edges = 1;
            continue;
        }
        if (in_edges && trace_line_is(&l, "]}")) {
            m->has_deps = 1;
            return PX_OK;
        }
        if ((v = trace_line_json(&l, in_edges, "deps.json", no)) == NULL)
            return PX_EINVAL;
        if (!in_edges)
            st = json_is_object(v) ? deps_task(v, ntask++, m)
                                   : px_set_error(PX_EINVAL, "deps.json: task %zu is not an "
                                                  "object", ntask);
        for (size_t k = 0; in_edges && st == PX_OK && k < json_array_size(v); k++)
            st = deps_edge(json_array_get(v, k), nedge++, m);
        json_decref(v);
    }
    return st != PX_OK ? st : px_set_error(PX_EINVAL, "deps.json: ends before its edges end");
}

px_status trace_load_buf(const char *buf, size_t len, trace_file which, dfxc_model *m)
{
    const char *file = which == TRACE_FILE_TRACE ? "trace.json" : "deps.json";
    const char *head = which == TRACE_FILE_TRACE ? trace_head : deps_head;
    json_error_t err;
    json_t *root;
    px_status st;

    if (buf != NULL && len >= strlen(head) && memcmp(buf, head, strlen(head)) == 0) {
        st = which == TRACE_FILE_TRACE ? trace_by_lines(buf, len, m) : deps_by_lines(buf, len, m);
        if (st == PX_OK && m->oom)
            st = px_set_error(PX_ENOMEM, "%s: out of memory building the task model", file);
        return st;
    }
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
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

/* The chip calls of one host (a merged dfx.json's "calls": [host task, chip, first chip task,
 * tasks] each, in the trace's ids) as inner tasks: its processes are pids base + 0 (the
 * host) and base + chip + 1, as in report.html. */
static void trace_calls(const json_t *calls, int base, dfxc_model *m)
{
    for (size_t i = 0; json_is_array(calls) && i < json_array_size(calls); i++) {
        const json_t *c = json_array_get(calls, i);
        double host = json_number_value(json_array_get(c, 0));
        double chip = json_number_value(json_array_get(c, 1));
        double first = json_number_value(json_array_get(c, 2));
        double n = json_number_value(json_array_get(c, 3));

        if (json_array_size(c) != 4 || host < 0 || chip < 0 || chip > 999 || first < 0 ||
            n < 0 || n > 1e9)
            continue;
        for (uint64_t t = 0; t < (uint64_t)n; t++)
            dfxc_model_add_inner(m, trace_key(base, (int64_t)host),
                                 trace_key(base + (int)chip + 1, (int64_t)first + (int64_t)t));
    }
}

/* A merged run's dfx.json (level 3: "calls"; level 4: each of "hosts" with its calls and
 * trace_pid_base), or NULL for a single engine's (or none). */
static json_t *trace_merged_dfx(const char *dir)
{
    char *buf;
    size_t len;
    json_error_t err;
    json_t *root;

    if (trace_read(dir, "dfx.json", &buf, &len) != PX_OK)
        return NULL;
    root = json_loadb(buf, len, 0, &err);
    free(buf);
    if (root != NULL && trace_num(root, "level", 2) >= 3)
        return root;
    json_decref(root);
    return NULL;
}

px_status trace_load_dir(const char *dir, dfxc_model *m)
{
    json_t *merged = trace_merged_dfx(dir), *hosts = json_object_get(merged, "hosts");
    px_status st;

    dfxc_model_init(m, NULL);
    trace_merged = merged != NULL;
    st = trace_load_file(dir, "trace.json", TRACE_FILE_TRACE, m);
    if (st == PX_OK)
        st = trace_load_file(dir, "deps.json", TRACE_FILE_DEPS, m);
    if (merged != NULL)
        trace_calls(json_object_get(merged, "calls"), 0, m);
    for (size_t i = 0; json_is_array(hosts) && i < json_array_size(hosts); i++)
        trace_calls(json_object_get(json_array_get(hosts, i), "calls"),
                    (int)trace_num(json_array_get(hosts, i), "trace_pid_base", 0), m);
    if (st == PX_OK && (m->has_trace || m->has_deps))
        st = dfxc_model_finish(m);
    trace_merged = 0;
    json_decref(merged);
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

/* A merged run's processes: level 3 its chips, level 4 its hosts with their clocks and the
 * hosts missing (the table above is the host's, or host 0's, own). */
static void trace_print_hosts(const json_t *root)
{
    const json_t *hosts = json_object_get(root, "hosts"), *miss;

    if (trace_num(root, "level", 2) == 3) {
        const json_t *gone = json_object_get(root, "chips_missing"), *chips;

        printf("level 3: the host and %zu chips (each chip's own table in chips/chip<i>/)\n",
               json_array_size(json_object_get(root, "chips")));
        chips = json_object_get(root, "chips");
        for (size_t i = 0; json_is_array(gone) && i < json_array_size(gone); i++) {
            int c = (int)json_number_value(json_array_get(gone, i));

            printf("  chip %d missing: %s\n", c,
                   c >= 0 && (size_t)c < json_array_size(chips)
                       ? trace_str(json_array_get(chips, (size_t)c), "error", "?") : "?");
        }
    }
    if (trace_num(root, "level", 2) != 4)
        return;
    printf("level 4: %g hosts (each host's own files in hosts/host<h>/)\n",
           trace_num(root, "nhosts", 0));
    for (size_t i = 0; json_is_array(hosts) && i < json_array_size(hosts); i++) {
        const json_t *h = json_array_get(hosts, i);

        printf("  host %g (%s): %zu chips, clock offset %.3f us within %.3f us, rate %.3f ppm\n",
               trace_num(h, "host", -1), trace_str(h, "host_id", "?"),
               json_array_size(json_object_get(h, "chips")), trace_num(h, "clock_offset_us", 0),
               trace_num(h, "clock_uncertainty_us", 0), trace_num(h, "clock_rate_ppm", 0));
    }
    miss = json_object_get(root, "hosts_missing");
    for (size_t i = 0; json_is_array(miss) && i < json_array_size(miss); i++)
        printf("  host %g missing: %s\n", trace_num(json_array_get(miss, i), "host", -1),
               trace_str(json_array_get(miss, i), "why", "?"));
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
    trace_print_hosts(root);
    json_decref(root);
    return PX_OK;
}
