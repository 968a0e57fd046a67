/*
 * model.c - the task model of model.h: built by adds from the collectors (or from the files,
 * by `plexus trace summary`), then merged, sorted, and given its per-kernel statistics and
 * its critical path.
 *
 * Task ids grow in submission order and a producer is always submitted before its consumer,
 * so visiting tasks by id is a topological order: the longest path is one pass over the
 * sorted edges.
 */
#include "dfx/collectors/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dfxc_model_init(dfxc_model *m, const char *clock)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->clock, sizeof(m->clock), "%s", clock ? clock : "?");
}

/* Adds a task; returns it, or NULL when out of memory (m is marked). */
static dfxc_mtask *dfxc_model_task(dfxc_model *m, uint64_t id, const char *kernel)
{
    dfxc_mtask *t = dfxc_push((void **)&m->t, &m->n, &m->cap, sizeof(*t));

    if (t == NULL) {
        m->oom = 1;
        return NULL;
    }
    memset(t, 0, sizeof(*t));
    t->id = id;
    t->kernel = strdup(kernel ? kernel : "?");
    t->pid = t->tid = t->core = -1;
    if (t->kernel == NULL) {
        m->n--;
        m->oom = 1;
        return NULL;
    }
    return t;
}

void dfxc_model_add_timed(dfxc_model *m, uint64_t id, const char *kernel, int pid, int tid,
                          int core, int64_t ts, int64_t dur)
{
    dfxc_mtask *t = dfxc_model_task(m, id, kernel);

    if (t == NULL)
        return;
    t->pid = pid;
    t->tid = tid;
    t->core = core;
    t->ts = ts;
    t->dur = dur;
    t->timed = 1;
}

void dfxc_model_add_task(dfxc_model *m, uint64_t id, const char *kernel)
{
    dfxc_model_task(m, id, kernel);
}

void dfxc_model_add_track(dfxc_model *m, int pid, int tid, const char *name)
{
    dfxc_mtrack *k = dfxc_push((void **)&m->tracks, &m->ntracks, &m->cap_tracks, sizeof(*k));

    if (k == NULL || (k->name = strdup(name ? name : "?")) == NULL) {
        if (k != NULL)
            m->ntracks--;
        m->oom = 1;
        return;
    }
    k->pid = pid;
    k->tid = tid;
}

void dfxc_model_add_process(dfxc_model *m, int pid, const char *name)
{
    dfxc_mtrack *k = dfxc_push((void **)&m->procs, &m->nprocs, &m->cap_procs, sizeof(*k));

    if (k == NULL || (k->name = strdup(name ? name : "?")) == NULL) {
        if (k != NULL)
            m->nprocs--;
        m->oom = 1;
        return;
    }
    k->pid = pid;
    k->tid = 0;
}

void dfxc_model_add_edge(dfxc_model *m, int from_deps, uint64_t producer, uint64_t consumer)
{
    if (dfxc_edges_add(from_deps ? &m->deps_edges : &m->edges, producer, consumer) != 0)
        m->oom = 1;
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

/* a + b, saturated at the int64 limits (times read from a damaged file may be anything). */
static int64_t dfxc_sat_add(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
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

/*
 * Drops the untimed copies of tasks that are timed too (sorted: a timed task sorts before
 * its untimed copy); tasks timed several times (a merged level-3 trace repeats ids across
 * processes) all stay.
 */
static void dfxc_model_dedupe(dfxc_model *m)
{
    size_t o = 0;

    for (size_t i = 0; i < m->n; i++) {
        if (o > 0 && !m->t[i].timed && m->t[o - 1].id == m->t[i].id) {
            free(m->t[i].kernel);
            continue;
        }
        m->t[o++] = m->t[i];
    }
    m->n = o;
}

px_status dfxc_model_finish(dfxc_model *m)
{
    dfxc_idmap map = {0};
    px_status st;

    if (m->oom)
        return px_set_error(PX_ENOMEM, "dfx report: out of memory building the task model");
    if (m->has_deps) {
        dfxc_edges_free(&m->edges);
        m->edges = m->deps_edges;
        memset(&m->deps_edges, 0, sizeof(m->deps_edges));
    }
    if (m->n > 0)
        qsort(m->t, m->n, sizeof(*m->t), dfxc_mtask_cmp);
    dfxc_model_dedupe(m);
    st = dfxc_model_index(m, &map);
    if (st == PX_OK) {
        dfxc_edges_sort(&m->edges);
        st = dfxc_model_kernels(m);
    }
    if (st == PX_OK)
        st = dfxc_model_cp(m, &map);
    dfxc_idmap_free(&map);
    return st;
}

void dfxc_model_free(dfxc_model *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->t[i].kernel);
    for (size_t i = 0; i < m->ntracks; i++)
        free(m->tracks[i].name);
    for (size_t i = 0; i < m->nprocs; i++)
        free(m->procs[i].name);
    free(m->procs);
    free(m->t);
    free(m->tracks);
    free(m->k);
    free(m->cp);
    dfxc_edges_free(&m->edges);
    dfxc_edges_free(&m->deps_edges);
    memset(m, 0, sizeof(*m));
}
