/*
 * model.c - reads trace.json and deps.json back into the task model of model.h and derives
 * per-kernel statistics and the critical path.
 *
 * trace.json gives the timed tasks ("X" events of category "task", id in args.task), the
 * track names ("thread_name" metadata) and, through its flow starts, the edges; deps.json
 * gives every submitted task and the edges and wins for edges when present. Task ids grow in
 * submission order and a producer is always submitted before its consumer, so visiting tasks
 * by id is a topological order: the longest path is one pass over the sorted edges. Both
 * files are read event by event (dfxc_json_load_each): a 100k-task trace.json holds close to
 * a million events, and only the tasks, tracks and edges are kept.
 */
#include "dfx/collectors/model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfx/collectors/json.h"

/*
 * The files are read back as they are, possibly edited or damaged, so every number is checked
 * before it becomes an integer (a double out of the integer's range is undefined behaviour in
 * C; found by fuzz_trace), and sums of times saturate.
 */
#define DFXC_NS_LIMIT 4611686018427387904.0 /* 2^62 ns: about 146 years */
#define DFXC_ID_LIMIT 9007199254740992.0    /* 2^53: the doubles that are exact integers */

/* Converts microseconds as written in the files back to ns, clamped to +-2^62 (NaN: 0). */
static int64_t dfxc_us_ns(double us)
{
    double ns = us * 1000.0;

    if (!(ns == ns))
        return 0;
    if (ns >= DFXC_NS_LIMIT || ns <= -DFXC_NS_LIMIT)
        return ns > 0 ? (int64_t)DFXC_NS_LIMIT : -(int64_t)DFXC_NS_LIMIT;
    return (int64_t)llround(ns);
}

/* a + b, saturated at the int64 limits. */
static int64_t dfxc_sat_add(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* A number as a task id: 1 with *id for a whole number in [0, 2^53), else 0 (malformed). */
static int dfxc_num_id(double v, uint64_t *id)
{
    if (!(v >= 0 && v < DFXC_ID_LIMIT) || v != floor(v))
        return 0;
    *id = (uint64_t)v;
    return 1;
}

/* A number as an int (pid, tid, core): v when it is a whole number in int's range, else dflt. */
static int dfxc_num_int(double v, int dflt)
{
    if (!(v >= INT_MIN && v <= INT_MAX) || v != floor(v))
        return dflt;
    return (int)v;
}

/* Adds a task; returns it, or NULL when out of memory. */
static dfxc_mtask *dfxc_model_task(dfxc_model *m, uint64_t id, const char *kernel)
{
    dfxc_mtask *t = dfxc_push((void **)&m->t, &m->n, &m->cap, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->id = id;
    t->kernel = strdup(kernel ? kernel : "?");
    t->pid = t->tid = t->core = -1;
    if (t->kernel == NULL) {
        m->n--;
        return NULL;
    }
    return t;
}

/* Reads one trace event into m. Returns PX_OK or PX_ENOMEM. */
static px_status dfxc_model_event(dfxc_model *m, const dfxc_json *e)
{
    const char *ph = dfxc_json_str(e, "ph", ""), *cat = dfxc_json_str(e, "cat", "");
    const char *name = dfxc_json_str(e, "name", "");
    const dfxc_json *args = dfxc_json_get(e, "args");
    int pid = dfxc_num_int(dfxc_json_num(e, "pid", 0), 0);
    int tid = dfxc_num_int(dfxc_json_num(e, "tid", 0), 0);
    uint64_t id, to;

    if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0) {
        dfxc_mtrack *k = dfxc_push((void **)&m->tracks, &m->ntracks, &m->cap_tracks, sizeof(*k));

        if (k == NULL || (k->name = strdup(dfxc_json_str(args, "name", "?"))) == NULL)
            return px_set_error(PX_ENOMEM, "trace.json: out of memory");
        k->pid = pid;
        k->tid = tid;
    } else if (strcmp(ph, "X") == 0 && strcmp(cat, "task") == 0) {
        dfxc_mtask *t;

        if (!dfxc_num_id(dfxc_json_num(args, "task", 0), &id))
            return PX_OK; /* not a task id: the event is ignored */
        t = dfxc_model_task(m, id, name);
        if (t == NULL)
            return px_set_error(PX_ENOMEM, "trace.json: out of memory");
        t->pid = pid;
        t->tid = tid;
        t->core = dfxc_num_int(dfxc_json_num(args, "core", -1), -1);
        t->ts = dfxc_us_ns(dfxc_json_num(e, "ts", 0));
        t->dur = dfxc_us_ns(dfxc_json_num(e, "dur", 0));
        t->timed = 1;
    } else if (strcmp(ph, "s") == 0 && strcmp(cat, "dep") == 0) {
        if (!dfxc_num_id(dfxc_json_num(args, "from", 0), &id) ||
            !dfxc_num_id(dfxc_json_num(args, "to", 0), &to))
            return PX_OK; /* not task ids: the arrow is ignored */
        if (dfxc_edges_add(&m->edges, id, to) != 0)
            return px_set_error(PX_ENOMEM, "trace.json: out of memory");
    }
    return PX_OK;
}

/* Checks a document's "version" member (at top or in otherData). Returns PX_OK or EINVAL. */
static px_status dfxc_model_version(const dfxc_json *holder, const char *file)
{
    double v = dfxc_json_num(holder, "version", -1);

    if (v != 1)
        return px_set_error(PX_EINVAL,
                            "%s: version %g is not supported (this plexus reads "
                            "version 1); use the plexus that wrote it",
                            file, v);
    return PX_OK;
}

/* What the callbacks of one file need. */
typedef struct dfxc_mload {
    dfxc_model *m;
    const dfxc_idmap *have; /* deps.json: tasks trace.json already gave (id + 1 -> index) */
    dfxc_edges edges;       /* deps.json's edges, which replace those of trace.json */
    size_t nedges;          /* deps.json's edge elements seen */
    size_t bad_edge;        /* index + 1 of the first malformed edge; 0: none */
} dfxc_mload;

/* Takes one element of trace.json's traceEvents. Returns PX_OK or PX_ENOMEM. */
static px_status dfxc_model_trace_cb(void *ctx, const char *key, const dfxc_json *e)
{
    dfxc_mload *ld = ctx;

    return strcmp(key, "traceEvents") == 0 ? dfxc_model_event(ld->m, e) : PX_OK;
}

/* Checks trace.json's shape after its events were read into m. */
static px_status dfxc_model_trace(dfxc_model *m, const dfxc_json *root)
{
    const dfxc_json *ev = dfxc_json_get(root, "traceEvents");
    const dfxc_json *other = dfxc_json_get(root, "otherData");
    px_status st = dfxc_model_version(other, "trace.json");

    if (st != PX_OK)
        return st;
    if (ev == NULL || ev->type != DFXC_JARR)
        return px_set_error(PX_EINVAL, "trace.json: no \"traceEvents\" array");
    snprintf(m->clock, sizeof(m->clock), "%s", dfxc_json_str(other, "clock", "?"));
    return PX_OK;
}

/* Takes one edge of deps.json: keeps it, or remembers the first malformed one. */
static px_status dfxc_model_edge(dfxc_mload *ld, const dfxc_json *e)
{
    uint64_t p, c;

    ld->nedges++;
    if (e->type != DFXC_JARR || e->n != 2 || e->kids[0].type != DFXC_JNUM ||
        e->kids[1].type != DFXC_JNUM || !dfxc_num_id(e->kids[0].num, &p) ||
        !dfxc_num_id(e->kids[1].num, &c)) {
        if (ld->bad_edge == 0)
            ld->bad_edge = ld->nedges;
        return PX_OK;
    }
    if (dfxc_edges_add(&ld->edges, p, c) != 0)
        return px_set_error(PX_ENOMEM, "deps.json: out of memory");
    return PX_OK;
}

/* Takes one element of deps.json's tasks (those trace.json lacked) or edges. */
static px_status dfxc_model_deps_cb(void *ctx, const char *key, const dfxc_json *e)
{
    dfxc_mload *ld = ctx;
    uint64_t id;

    if (strcmp(key, "edges") == 0)
        return dfxc_model_edge(ld, e);
    if (strcmp(key, "tasks") != 0)
        return PX_OK;
    if (!dfxc_num_id(dfxc_json_num(e, "id", 0), &id))
        return PX_OK; /* not a task id: ignored */
    if (dfxc_idmap_get(ld->have, id + 1) < 0 &&
        dfxc_model_task(ld->m, id, dfxc_json_str(e, "kernel", "?")) == NULL)
        return px_set_error(PX_ENOMEM, "deps.json: out of memory");
    return PX_OK;
}

/* Checks deps.json's shape after its elements were read; its edges replace m's. */
static px_status dfxc_model_deps(dfxc_model *m, const dfxc_json *root, dfxc_mload *ld)
{
    const dfxc_json *tasks = dfxc_json_get(root, "tasks"), *edges = dfxc_json_get(root, "edges");
    px_status st = dfxc_model_version(root, "deps.json");

    if (st != PX_OK)
        return st;
    if (tasks == NULL || tasks->type != DFXC_JARR || edges == NULL || edges->type != DFXC_JARR)
        return px_set_error(PX_EINVAL, "deps.json: no \"tasks\" and \"edges\" arrays");
    if (ld->bad_edge != 0)
        return px_set_error(PX_EINVAL, "deps.json: edge %zu is not [producer, consumer]",
                            ld->bad_edge - 1);
    dfxc_edges_free(&m->edges);
    m->edges = ld->edges;
    memset(&ld->edges, 0, sizeof(ld->edges));
    return PX_OK;
}

/*
 * Reads dir/name, handing its top-level arrays' elements to each, into *root; *found = 0
 * when the file does not exist.
 */
static px_status dfxc_model_file(const char *dir, const char *name, dfxc_json_each_cb each,
                                 dfxc_mload *ld, dfxc_json **root, int *found)
{
    char path[4096];
    px_status st = dfxc_path(path, sizeof(path), dir, name);

    *found = 0;
    *root = NULL;
    if (st != PX_OK)
        return st;
    st = dfxc_json_load_each(path, each, ld, root);
    if (st == PX_ENOENT) {
        px_clear_error();
        return PX_OK;
    }
    *found = st == PX_OK;
    return st;
}

static int dfxc_mtask_cmp(const void *pa, const void *pb)
{
    const dfxc_mtask *a = pa, *b = pb;

    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return b->timed - a->timed;
}

/* Sorts tasks by id and fills map (id + 1 -> index). Returns PX_OK or PX_ENOMEM. */
static px_status dfxc_model_index(dfxc_model *m, dfxc_idmap *map)
{
    if (m->n > 0)
        qsort(m->t, m->n, sizeof(*m->t), dfxc_mtask_cmp);
    dfxc_idmap_free(map);
    for (size_t i = 0; i < m->n; i++)
        if (dfxc_idmap_get(map, m->t[i].id + 1) < 0 &&
            dfxc_idmap_put(map, m->t[i].id + 1, (uint32_t)i) != 0)
            return px_set_error(PX_ENOMEM, "dfx report: out of memory indexing %zu tasks", m->n);
    return PX_OK;
}

/* Fills the per-kernel statistics and the span. Returns PX_OK or PX_ENOMEM. */
static px_status dfxc_model_kernels(dfxc_model *m)
{
    for (size_t i = 0; i < m->n; i++) {
        const dfxc_mtask *t = &m->t[i];
        dfxc_mkernel *k = NULL;

        for (size_t j = 0; j < m->nk && k == NULL; j++)
            if (strcmp(m->k[j].name, t->kernel) == 0)
                k = &m->k[j];
        if (k == NULL && (k = dfxc_push((void **)&m->k, &m->nk, &m->cap_k, sizeof(*k))) == NULL)
            return px_set_error(PX_ENOMEM, "dfx report: out of memory");
        k->name = t->kernel;
        k->count++;
        if (!t->timed)
            continue;
        k->timed++;
        k->total = dfxc_sat_add(k->total, t->dur);
        k->max = PX_MAX(k->max, t->dur);
        m->span = PX_MAX(m->span, dfxc_sat_add(t->ts, t->dur));
    }
    return PX_OK;
}

/* Finds the critical path (see model.h). Returns PX_OK or PX_ENOMEM. */
static px_status dfxc_model_cp(dfxc_model *m, const dfxc_idmap *map)
{
    int64_t *dist = calloc(m->n ? m->n : 1, sizeof(*dist));
    int64_t *pred = malloc((m->n ? m->n : 1) * sizeof(*pred));
    size_t best = 0, len = 0;
    int timed = 0;

    if (dist == NULL || pred == NULL) {
        free(dist);
        free(pred);
        return px_set_error(PX_ENOMEM, "dfx report: out of memory");
    }
    for (size_t i = 0; i < m->n; i++)
        timed |= m->t[i].timed;
    m->cp_by_count = !timed;
    for (size_t i = 0; i < m->n; i++) {
        dist[i] = timed ? m->t[i].dur : 1;
        pred[i] = -1;
    }
    /* edges are sorted by producer id; producer ids precede consumers, so a producer's
     * dist is final before any of its edges is relaxed */
    for (size_t e = 0; e < m->edges.n; e++) {
        int64_t p = dfxc_idmap_get(map, m->edges.v[e].p + 1);
        int64_t c = dfxc_idmap_get(map, m->edges.v[e].c + 1);
        int64_t w;

        if (p < 0 || c < 0 || m->edges.v[e].p >= m->edges.v[e].c)
            continue;
        w = dfxc_sat_add(dist[p], timed ? m->t[c].dur : 1);
        if (w > dist[c]) {
            dist[c] = w;
            pred[c] = p;
        }
    }
    for (size_t i = 1; i < m->n; i++)
        if (dist[i] > dist[best])
            best = i;
    for (int64_t i = m->n ? (int64_t)best : -1; i >= 0; i = pred[i])
        len++;
    m->cp = calloc(len ? len : 1, sizeof(*m->cp));
    if (m->cp != NULL) {
        m->ncp = len;
        m->cp_len = m->n ? dist[best] : 0;
        for (int64_t i = m->n ? (int64_t)best : -1; i >= 0; i = pred[i])
            m->cp[--len] = m->t[i].id;
    }
    free(dist);
    free(pred);
    return m->cp ? PX_OK : px_set_error(PX_ENOMEM, "dfx report: out of memory");
}

px_status dfxc_model_load(const char *dir, dfxc_model *m)
{
    dfxc_json *trace = NULL, *deps = NULL;
    dfxc_mload ld = {.m = m};
    dfxc_idmap map = {0};
    px_status st;

    memset(m, 0, sizeof(*m));
    snprintf(m->clock, sizeof(m->clock), "?");
    st = dfxc_model_file(dir, "trace.json", dfxc_model_trace_cb, &ld, &trace, &m->has_trace);
    if (st == PX_OK && trace != NULL)
        st = dfxc_model_trace(m, trace);
    if (st == PX_OK)
        st = dfxc_model_index(m, &map);
    ld.have = &map;
    if (st == PX_OK)
        st = dfxc_model_file(dir, "deps.json", dfxc_model_deps_cb, &ld, &deps, &m->has_deps);
    if (st == PX_OK && deps != NULL)
        st = dfxc_model_deps(m, deps, &ld);
    if (st == PX_OK)
        st = dfxc_model_index(m, &map);
    if (st == PX_OK) {
        dfxc_edges_sort(&m->edges);
        st = dfxc_model_kernels(m);
    }
    if (st == PX_OK)
        st = dfxc_model_cp(m, &map);
    dfxc_edges_free(&ld.edges);
    dfxc_idmap_free(&map);
    dfxc_json_free(trace);
    dfxc_json_free(deps);
    return st;
}

void dfxc_model_free(dfxc_model *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->t[i].kernel);
    for (size_t i = 0; i < m->ntracks; i++)
        free(m->tracks[i].name);
    free(m->t);
    free(m->tracks);
    free(m->k);
    free(m->cp);
    dfxc_edges_free(&m->edges);
    memset(m, 0, sizeof(*m));
}
