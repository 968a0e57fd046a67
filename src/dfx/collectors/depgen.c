/*
 * depgen.c - the depgen collector: the run's task graph as submitted, every task with its
 * kernel and arguments (tags, tensors, scalars) and every dependency, into deps.json and
 * deps.dot (Graphviz).
 *
 * During the run it only keeps the raw entries (raw.h); finish() decodes them: tasks and their
 * arguments from SUBMIT entries (submits.h), edges from the SUBMIT entries and from EDGE
 * entries (a task with more edges than a SUBMIT holds), sorted and without duplicates.
 * A graph with a hole is worse than no graph: when the run dropped records (info->dropped)
 * neither file is written and earlier ones are removed (the framework warns about the drops;
 * this collector says at info what it skipped). Formats: docs/formats.md.
 */
#include "dfx/collectors/collectors.h"

#include <stdlib.h>

#include "dfx/collectors/model.h"
#include "dfx/collectors/out.h"
#include "dfx/collectors/raw.h"
#include "dfx/collectors/submits.h"
#include "util/log.h"

typedef struct dep_state {
    dfxc_raw raw; /* the entries as received */
    dfxc_submits sub;
    dfxc_edges edges;
    int oom;
} dep_state;

static px_status dep_open(void **state, const px_dfx_run_info *info)
{
    dep_state *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "dfx[depgen]: cannot allocate its state");
    dfxc_raw_init(&s->raw);
    dfxc_submits_init(&s->sub);
    *state = s;
    return PX_OK;
}

static void dep_on_record(void *state, const px_dfx_rec *r)
{
    dep_state *s = state;

    dfxc_raw_add(&s->raw, r);
}

/* Keeps n edges producers[i] -> consumer. */
static void dep_edges(dep_state *s, const px_task_id *producers, uint32_t n, uint64_t consumer)
{
    for (uint32_t i = 0; i < n; i++)
        if (dfxc_edges_add(&s->edges, producers[i], consumer) != 0)
            s->oom = 1;
}

/* Decodes every kept entry in arrival order into tasks, arguments and edges. */
static void dep_load(dep_state *s, const px_dfx_run_info *info)
{
    const dfxc_raw *src = dfxc_raw_source(info->raw, &s->raw);
    const px_dfx_rec *r;
    px_dfx_submit_rec d;
    px_dfx_edge_rec e;
    dfxc_raw_it it;

    dfxc_raw_begin(src, &it);
    while ((r = dfxc_raw_next(&it)) != NULL) {
        if (r->kind == PX_DFXK_SUBMIT) {
            dfxc_submits_on_record(&s->sub, r);
            if (px_dfx_submit_decode(r, &d) == 0)
                dep_edges(s, d.edges, (uint32_t)d.nedges, d.task);
        } else if (px_dfx_edge_decode(r, &e) == 0) {
            dep_edges(s, e.producers, e.n, e.consumer);
        }
    }
    if (src->oom)
        s->oom = 1;
}

/* Appends deps.json's text to b. */
static void dep_json(const dep_state *s, const px_dfx_run_info *info, dfxc_buf *b)
{
    char tmp[32];

    dfxc_buf_printf(b, "{\"version\": 1, \"tasks\": [");
    for (size_t i = 0; i < s->sub.n; i++) {
        const dfxc_subtask *t = &s->sub.t[i];
        size_t first;
        int n;

        dfxc_buf_puts(b, i ? ",\n  {\"id\": " : "\n  {\"id\": ");
        dfxc_buf_u64(b, dfxc_submits_rid(&s->sub, t->id));
        dfxc_buf_puts(b, ", \"kernel\": ");
        dfxc_buf_json_str(b, dfxc_kernel_name(info, (uint64_t)t->kernel, tmp, sizeof(tmp)));
        dfxc_buf_puts(b, ", \"args\": [");
        dfxc_submits_args(&s->sub, i, &first, &n);
        for (int k = 0; k < n; k++) {
            dfxc_buf_puts(b, k ? ", " : "");
            dfxc_submits_arg_json(b, &s->sub, first + (size_t)k);
            dfxc_buf_puts(b, "}");
        }
        dfxc_buf_puts(b, "]}");
    }
    dfxc_buf_puts(b, "\n],\n\"edges\": [");
    for (size_t k = 0; k < s->edges.n; k++) {
        dfxc_buf_puts(b, k ? (k % 8 ? ", [" : ",\n  [") : "\n  [");
        dfxc_buf_u64(b, dfxc_submits_rid(&s->sub, s->edges.v[k].p));
        dfxc_buf_puts(b, ", ");
        dfxc_buf_u64(b, dfxc_submits_rid(&s->sub, s->edges.v[k].c));
        dfxc_buf_puts(b, "]");
    }
    dfxc_buf_puts(b, "\n]}\n");
}

/* Appends s as the inside of a DOT double-quoted string. */
static void dep_dot_str(dfxc_buf *b, const char *s)
{
    for (const char *run = s;; s++) {
        if (*s != '\0' && *s != '"' && *s != '\\')
            continue;
        dfxc_buf_put(b, run, (size_t)(s - run));
        if (*s == '\0')
            return;
        dfxc_buf_put(b, "\\", 1);
        run = s; /* the quote or backslash itself goes out with the next run */
    }
}

/* Appends deps.dot's text to b. */
static void dep_dot(const dep_state *s, const px_dfx_run_info *info, dfxc_buf *b)
{
    char tmp[32];

    dfxc_buf_puts(b, "// plexus deps.dot version 1: tasks of one run and their dependencies\n"
                     "digraph plexus_deps {\n  node [shape=box, fontname=\"monospace\"];\n");
    for (size_t i = 0; i < s->sub.n; i++) {
        uint64_t id = dfxc_submits_rid(&s->sub, s->sub.t[i].id);

        dfxc_buf_puts(b, "  t");
        dfxc_buf_u64(b, id);
        dfxc_buf_puts(b, " [label=\"");
        dfxc_buf_u64(b, id);
        dfxc_buf_puts(b, ": ");
        dep_dot_str(b, dfxc_kernel_name(info, (uint64_t)s->sub.t[i].kernel, tmp, sizeof(tmp)));
        dfxc_buf_puts(b, "\"];\n");
    }
    for (size_t k = 0; k < s->edges.n; k++) {
        dfxc_buf_puts(b, "  t");
        dfxc_buf_u64(b, dfxc_submits_rid(&s->sub, s->edges.v[k].p));
        dfxc_buf_puts(b, " -> t");
        dfxc_buf_u64(b, dfxc_submits_rid(&s->sub, s->edges.v[k].c));
        dfxc_buf_puts(b, ";\n");
    }
    dfxc_buf_puts(b, "}\n");
}

/* Adds every task and edge, as deps.json has them, to the report's model. */
static void dep_model(const dep_state *s, const px_dfx_run_info *info, dfxc_model *m)
{
    char tmp[32];

    m->has_deps = 1;
    for (size_t i = 0; i < s->sub.n; i++)
        dfxc_model_add_task(m, dfxc_submits_rid(&s->sub, s->sub.t[i].id),
                            dfxc_kernel_name(info, (uint64_t)s->sub.t[i].kernel, tmp,
                                             sizeof(tmp)));
    for (size_t k = 0; k < s->edges.n; k++)
        dfxc_model_add_edge(m, 1, dfxc_submits_rid(&s->sub, s->edges.v[k].p),
                            dfxc_submits_rid(&s->sub, s->edges.v[k].c));
}

/* Builds one file with fn and writes it. Returns PX_OK or the write's error. */
static px_status dep_write(const dep_state *s, const px_dfx_run_info *info, const char *name,
                           void (*fn)(const dep_state *, const px_dfx_run_info *, dfxc_buf *))
{
    px_status st;
    dfxc_buf b;

    dfxc_buf_init(&b);
    fn(s, info, &b);
    st = dfxc_buf_write_file(&b, info->out_dir, name, "depgen");
    dfxc_buf_free(&b);
    return st;
}

static px_status dep_finish(void *state, const px_dfx_run_info *info)
{
    dep_state *s = state;
    px_status st;

    if (info->dropped) {
        dfxc_remove(info->out_dir, "deps.json");
        dfxc_remove(info->out_dir, "deps.dot");
        PX_LOG_INFO("dfx[depgen]: deps.json and deps.dot not written: records were dropped "
                    "in this run, so the graph would be incomplete (counts in dfx.json)");
        return PX_OK;
    }
    dep_load(s, info);
    if (s->oom)
        return px_set_error(PX_ENOMEM,
                            "dfx[depgen]: out of memory keeping %zu edges; "
                            "profile a smaller run",
                            s->edges.n);
    st = dfxc_submits_sort(&s->sub, "depgen");
    if (st != PX_OK)
        return st;
    if (s->sub.bad > 0)
        PX_LOG_WARN("dfx[depgen]: %llu SUBMIT entries did not decode and were skipped",
                    (unsigned long long)s->sub.bad);
    dfxc_edges_sort(&s->edges);
    st = dep_write(s, info, "deps.json", dep_json);
    if (st == PX_OK)
        st = dep_write(s, info, "deps.dot", dep_dot);
    if (st == PX_OK && info->model != NULL)
        dep_model(s, info, info->model);
    return st;
}

static void dep_close(void *state)
{
    dep_state *s = state;

    if (s == NULL)
        return;
    dfxc_raw_free(&s->raw);
    dfxc_submits_free(&s->sub);
    dfxc_edges_free(&s->edges);
    free(s);
}

const px_dfx_collector_ops px_dfx_depgen_ops = {
    .name = "depgen",
    .bit = PX_DFX_DEPGEN,
    .kinds = 1u << PX_DFXK_SUBMIT | 1u << PX_DFXK_EDGE,
    .shares_raw = 1,
    .open = dep_open,
    .on_record = dep_on_record,
    .finish = dep_finish,
    .close = dep_close,
};
