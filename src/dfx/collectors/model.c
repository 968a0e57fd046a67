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

void dfxc_model_add_host(dfxc_model *m, int host, int pid_base, const char *name)
{
    dfxc_mtrack *k = dfxc_push((void **)&m->hosts, &m->nhosts, &m->cap_hosts, sizeof(*k));

    if (k == NULL || (k->name = strdup(name ? name : "?")) == NULL) {
        if (k != NULL)
            m->nhosts--;
        m->oom = 1;
        return;
    }
    k->pid = pid_base;
    k->tid = host;
}

void dfxc_model_add_edge(dfxc_model *m, int from_deps, uint64_t producer, uint64_t consumer)
{
    if (dfxc_edges_add(from_deps ? &m->deps_edges : &m->edges, producer, consumer) != 0)
        m->oom = 1;
}

void dfxc_model_add_inner(dfxc_model *m, uint64_t outer, uint64_t inner)
{
    if (dfxc_edges_add(&m->inner, outer, inner) != 0)
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
    int first_seen = 0;

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
        m->first = first_seen ? PX_MIN(m->first, t->ts) : t->ts;
        first_seen = 1;
        m->span = PX_MAX(m->span, dfxc_sat_add(t->ts, t->dur));
    }
    return PX_OK;
}

/* The critical path's working arrays, one entry per task (index into m->t). */
typedef struct dfxc_cp {
    int64_t *dist;  /* longest chain ending at the task (inner: inside its outer task) */
    int64_t *pred;  /* the chain's previous task, or -1 */
    int64_t *outer; /* the task it is inner to, or -1 */
    int64_t *inner; /* an outer task: the end of its longest inner chain, or -1 */
    int64_t *ilen;  /* an outer task: that chain's length (0: none) */
} dfxc_cp;

static void dfxc_cp_free(dfxc_cp *c)
{
    free(c->dist);
    free(c->pred);
    free(c->outer);
    free(c->inner);
    free(c->ilen);
}

/* Allocates c for n tasks. Returns 0, or -1 when out of memory. */
static int dfxc_cp_alloc(dfxc_cp *c, size_t n)
{
    size_t k = n ? n : 1;

    c->dist = calloc(k, sizeof(int64_t));
    c->pred = calloc(k, sizeof(int64_t));
    c->outer = calloc(k, sizeof(int64_t));
    c->inner = calloc(k, sizeof(int64_t));
    c->ilen = calloc(k, sizeof(int64_t));
    return c->dist && c->pred && c->outer && c->inner && c->ilen ? 0 : -1;
}

/* Relaxes every edge whose ends are both inner tasks of one task (inner: 1) or both outer
 * (nobody's inner task; inner: 0), in producer order: producer ids precede consumers, so a
 * producer's dist is final before any of its edges is relaxed. */
static void dfxc_cp_relax(const dfxc_model *m, const dfxc_idmap *map, dfxc_cp *c, int timed,
                          int inner)
{
    for (size_t e = 0; e < m->edges.n; e++) {
        int64_t p = dfxc_idmap_get(map, m->edges.v[e].p + 1);
        int64_t q = dfxc_idmap_get(map, m->edges.v[e].c + 1);
        int64_t w;

        if (p < 0 || q < 0 || m->edges.v[e].p >= m->edges.v[e].c ||
            c->outer[p] != c->outer[q] || (c->outer[p] >= 0) != inner)
            continue;
        w = dfxc_sat_add(c->dist[p], timed ? m->t[q].dur : 1);
        if (!inner)
            w = dfxc_sat_add(w, c->ilen[q]);
        if (w > c->dist[q]) {
            c->dist[q] = w;
            c->pred[q] = p;
        }
    }
}

/* Links inner tasks to their outer task and finds each outer task's longest inner chain. */
static void dfxc_cp_inner(const dfxc_model *m, const dfxc_idmap *map, dfxc_cp *c, int timed)
{
    for (size_t i = 0; i < m->inner.n; i++) {
        int64_t o = dfxc_idmap_get(map, m->inner.v[i].p + 1);
        int64_t k = dfxc_idmap_get(map, m->inner.v[i].c + 1);

        if (o >= 0 && k >= 0 && o != k && c->outer[k] < 0 && c->outer[o] < 0)
            c->outer[k] = o;
    }
    for (size_t i = 0; i < m->n; i++) /* an outer task's own outer link is dropped */
        if (c->outer[i] >= 0 && c->outer[c->outer[i]] >= 0)
            c->outer[i] = -1;
    dfxc_cp_relax(m, map, c, timed, 1);
    for (size_t i = 0; i < m->n; i++) { /* ties: the chain ending at the lower id */
        int64_t o = c->outer[i];

        if (o >= 0 && c->dist[i] > c->ilen[o]) {
            c->ilen[o] = c->dist[i];
            c->inner[o] = (int64_t)i;
        }
    }
}

/* Appends the chain ending at task i (by pred) to m->cp / cp_outer, first task first. */
static void dfxc_cp_emit(dfxc_model *m, const dfxc_cp *c, int64_t i, uint64_t outer)
{
    size_t from = m->ncp;

    for (; i >= 0; i = c->pred[i]) {
        m->cp[m->ncp] = m->t[i].id;
        m->cp_outer[m->ncp++] = outer;
    }
    for (size_t a = from, b = m->ncp; a + 1 < b; a++, b--) {
        uint64_t t = m->cp[a];

        m->cp[a] = m->cp[b - 1];
        m->cp[b - 1] = t;
    }
}

/* Finds the critical path (see model.h). Returns PX_OK or PX_ENOMEM. */
static px_status dfxc_model_cp(dfxc_model *m, const dfxc_idmap *map)
{
    dfxc_cp c = {0};
    int64_t *top = NULL;
    size_t best = 0, ntop = 0;
    int timed = 0, any = 0;

    if (dfxc_cp_alloc(&c, m->n) != 0 || (top = calloc(m->n ? m->n : 1, sizeof(*top))) == NULL ||
        (m->cp = calloc(m->n ? m->n : 1, sizeof(*m->cp))) == NULL ||
        (m->cp_outer = calloc(m->n ? m->n : 1, sizeof(*m->cp_outer))) == NULL) {
        dfxc_cp_free(&c);
        free(top);
        return px_set_error(PX_ENOMEM, "dfx report: out of memory");
    }
    for (size_t i = 0; i < m->n; i++)
        timed |= m->t[i].timed;
    m->cp_by_count = !timed;
    for (size_t i = 0; i < m->n; i++) {
        c.dist[i] = timed ? m->t[i].dur : 1;
        c.pred[i] = c.outer[i] = c.inner[i] = -1;
    }
    dfxc_cp_inner(m, map, &c, timed);
    for (size_t i = 0; i < m->n; i++)
        if (c.outer[i] < 0)
            c.dist[i] = dfxc_sat_add(c.dist[i], c.ilen[i]);
    dfxc_cp_relax(m, map, &c, timed, 0);
    for (size_t i = 0; i < m->n; i++)
        if (c.outer[i] < 0 && (!any || c.dist[i] > c.dist[best])) {
            best = i;
            any = 1;
        }
    for (int64_t i = any ? (int64_t)best : -1; i >= 0; i = c.pred[i])
        top[ntop++] = i;
    m->cp_len = any ? c.dist[best] : 0;
    while (ntop > 0) { /* each outer task, then its inner chain */
        int64_t i = top[--ntop];

        m->cp[m->ncp] = m->t[i].id;
        m->cp_outer[m->ncp++] = UINT64_MAX;
        dfxc_cp_emit(m, &c, c.inner[i], m->t[i].id);
    }
    dfxc_cp_free(&c);
    free(top);
    return PX_OK;
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
        dfxc_edges_sort(&m->inner);
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
    for (size_t i = 0; i < m->nhosts; i++)
        free(m->hosts[i].name);
    free(m->hosts);
    free(m->t);
    free(m->tracks);
    free(m->k);
    free(m->cp);
    free(m->cp_outer);
    dfxc_edges_free(&m->inner);
    dfxc_edges_free(&m->edges);
    dfxc_edges_free(&m->deps_edges);
    memset(m, 0, sizeof(*m));
}
