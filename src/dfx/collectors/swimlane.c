/*
 * swimlane.c - the swimlane collector: when each task ran on which core, the phases of every
 * producer thread (DESIGN 3.6), and the dependencies as flow arrows, into trace.json.
 *
 * During the run it only keeps the raw entries (raw.h: the drain thread must keep up with
 * every producer). finish() decodes them in arrival order: one TASK entry per execution (the
 * task's slice and its core.pop or core.idle, core.run and core.release phases), one SUBMIT
 * per submit (the orch.submit phase and the task's edges), PHASE spans and EDGE entries, and
 * turns them into Chrome Trace Event objects for the shared trace builder
 * (trace.h): one "X" slice per task (named by its kernel, on its core's track), one per phase,
 * and per edge a flow start ("s") inside the producer's slice just before its end and a flow
 * end ("f", binding point "e") at the consumer's start. Task ids are renumbered from the run's
 * first task so the file is the same across runs and transports. Format: docs/formats.md.
 */
#include "dfx/collectors/collectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfx/collectors/model.h"
#include "dfx/collectors/out.h"
#include "dfx/collectors/raw.h"
#include "dfx/collectors/trace.h"
#include "dfx/records.h"
#include "util/log.h"

enum { SWL_BEGUN = 1, SWL_ENDED = 2 };

typedef struct swl_task {
    uint64_t id;
    uint64_t t_begin, t_end; /* ticks */
    uint32_t kernel;
    int32_t core;
    int32_t status;
    uint16_t producer;
    uint8_t poisoned;
    uint8_t seen; /* SWL_BEGUN | SWL_ENDED */
} swl_task;

typedef struct swl_phase {
    uint64_t ts, ticks, task;
    uint16_t producer;
    uint8_t phase;
} swl_phase;

typedef struct swl_comm {
    px_dfx_comm_rec c;
    uint16_t producer;
} swl_comm;

typedef struct swl_state {
    dfxc_raw raw; /* the entries as received */
    swl_comm *comms; /* communication spans of kernels (src/comm) */
    size_t ncomms, cap_comms;
    swl_task *tasks;
    size_t ntasks, cap_tasks;
    dfxc_idmap ids;
    swl_phase *phases;
    size_t nphases, cap_phases;
    dfxc_edges edges;
    uint64_t min_id;
    int oom;
    dfxc_trace *trace;
} swl_state;

static px_status swl_open(void **state, const px_dfx_run_info *info)
{
    swl_state *s = calloc(1, sizeof(*s));
    px_status st;

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "dfx[swimlane]: cannot allocate its state");
    dfxc_raw_init(&s->raw);
    s->min_id = UINT64_MAX;
    st = dfxc_trace_attach(info, "swimlane", &s->trace);
    if (st != PX_OK) {
        free(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

/* Returns the task entry of id, creating it; NULL when out of memory (marks the state). */
static swl_task *swl_task_get(swl_state *s, uint64_t id)
{
    int64_t i = dfxc_idmap_get(&s->ids, id);
    swl_task *t;

    if (i >= 0)
        return &s->tasks[i];
    t = dfxc_push((void **)&s->tasks, &s->ntasks, &s->cap_tasks, sizeof(*t));
    if (t == NULL || dfxc_idmap_put(&s->ids, id, (uint32_t)(s->ntasks - 1)) != 0) {
        if (t != NULL)
            s->ntasks--;
        s->oom = 1;
        return NULL;
    }
    t->id = id;
    s->min_id = PX_MIN(s->min_id, id);
    return t;
}

/* Keeps a phase span [ts, ts + ticks) of producer for task (0: none). */
static void swl_phase_add(swl_state *s, int phase, uint64_t ts, uint64_t ticks, uint64_t task,
                          uint16_t producer)
{
    swl_phase *ph = dfxc_push((void **)&s->phases, &s->nphases, &s->cap_phases, sizeof(*ph));

    if (ph == NULL) {
        s->oom = 1;
        return;
    }
    *ph = (swl_phase){ts, ticks, task, producer, (uint8_t)phase};
    if (task != 0)
        s->min_id = PX_MIN(s->min_id, task);
}

/* Keeps a TASK entry: the task's slice and its wait, run and release phases. */
static void swl_on_task(swl_state *s, const px_dfx_rec *r)
{
    px_dfx_task d;
    swl_task *t;

    if (px_dfx_task_decode(r, &d) != 0 || (t = swl_task_get(s, d.task)) == NULL)
        return;
    t->t_begin = d.ts;
    t->t_end = px_dfx_task_t_end(&d);
    t->kernel = (uint32_t)d.kernel;
    t->core = d.core;
    t->producer = r->producer;
    t->status = (int32_t)d.status;
    t->poisoned = (uint8_t)((d.flags & PX_DFX_TASK_POISONED) != 0);
    t->seen = SWL_BEGUN | SWL_ENDED;
    if (d.flags & PX_DFX_TASK_WAITED)
        swl_phase_add(s, (d.flags & PX_DFX_TASK_SLEPT) ? PX_PHASE_CORE_IDLE : PX_PHASE_CORE_POP,
                      d.ts - d.wait, d.wait, d.task, r->producer);
    if (d.flags & PX_DFX_TASK_RAN)
        swl_phase_add(s, PX_PHASE_CORE_RUN, d.ts, d.run, d.task, r->producer);
    if (d.flags & PX_DFX_TASK_RELEASE)
        swl_phase_add(s, PX_PHASE_CORE_RELEASE, d.ts + d.run, d.release, d.task, r->producer);
}

/* Keeps a PHASE span. */
static void swl_on_phase(swl_state *s, const px_dfx_rec *r)
{
    px_dfx_span d;

    if (px_dfx_span_decode(r, &d) == 0)
        swl_phase_add(s, d.id, d.t0, d.t1 - d.t0, d.b, r->producer);
}

/* Keeps n edges producer[i] -> consumer. */
static void swl_edges(swl_state *s, const px_task_id *producers, uint32_t n, uint64_t consumer)
{
    for (uint32_t i = 0; i < n; i++) {
        if (dfxc_edges_add(&s->edges, producers[i], consumer) != 0)
            s->oom = 1;
        s->min_id = PX_MIN(s->min_id, PX_MIN(producers[i], consumer));
    }
}

/* Keeps a SUBMIT: its orch.submit phase and its edges. */
static void swl_on_submit(swl_state *s, const px_dfx_rec *r)
{
    px_dfx_submit_rec d;

    if (px_dfx_submit_decode(r, &d) != 0 || d.more)
        return;
    swl_phase_add(s, PX_PHASE_ORCH_SUBMIT, d.ts, d.dur, d.task, r->producer);
    swl_edges(s, d.edges, (uint32_t)d.nedges, d.task);
}

/* Keeps a COMM span. */
static void swl_on_comm(swl_state *s, const px_dfx_rec *r)
{
    swl_comm *c;
    px_dfx_comm_rec d;

    if (px_dfx_comm_decode(r, &d) != 0)
        return;
    if ((c = dfxc_push((void **)&s->comms, &s->ncomms, &s->cap_comms, sizeof(*c))) == NULL) {
        s->oom = 1;
        return;
    }
    c->c = d;
    c->producer = r->producer;
}

/* Decodes one kept entry. */
static void swl_decode(swl_state *s, const px_dfx_rec *r)
{
    px_dfx_edge_rec e;

    if (r->kind == PX_DFXK_COMM)
        swl_on_comm(s, r);
    else if (r->kind == PX_DFXK_TASK)
        swl_on_task(s, r);
    else if (r->kind == PX_DFXK_PHASE)
        swl_on_phase(s, r);
    else if (r->kind == PX_DFXK_SUBMIT)
        swl_on_submit(s, r);
    else if (px_dfx_edge_decode(r, &e) == 0)
        swl_edges(s, e.producers, e.n, e.consumer);
}

/* Decodes every kept entry of its kinds in arrival order. */
static void swl_load(swl_state *s, const px_dfx_run_info *info)
{
    const dfxc_raw *src = dfxc_raw_source(info->raw, &s->raw);
    const px_dfx_rec *r;
    dfxc_raw_it it;

    dfxc_raw_begin(src, &it);
    while ((r = dfxc_raw_next(&it)) != NULL)
        if (px_dfx_swimlane_ops.kinds & (1u << r->kind))
            swl_decode(s, r);
    if (src->oom)
        s->oom = 1;
}

static void swl_on_record(void *state, const px_dfx_rec *r)
{
    swl_state *s = state;

    dfxc_raw_add(&s->raw, r);
}

/* Returns the span of t in ns since the run's start: *t0 and a non-negative *dur. */
static void swl_task_span(const swl_task *t, const px_dfx_run_info *info, int64_t *t0, int64_t *dur)
{
    *t0 = dfxc_ns(info, t->t_begin);
    *dur = PX_MAX(dfxc_ns(info, t->t_end) - *t0, 0);
}

/* Adds one X slice per task that both began and ended; counts the others. */
static void swl_tasks(swl_state *s, const px_dfx_run_info *info, uint64_t *incomplete)
{
    dfxc_buf m;
    char tmp[32];

    dfxc_buf_init(&m);
    for (size_t i = 0; i < s->ntasks; i++) {
        const swl_task *t = &s->tasks[i];
        int64_t t0, dur;

        if (t->seen != (SWL_BEGUN | SWL_ENDED)) {
            (*incomplete)++;
            continue;
        }
        swl_task_span(t, info, &t0, &dur);
        m.len = 0;
        dfxc_buf_puts(&m, "\"name\":");
        dfxc_buf_json_str(&m, dfxc_kernel_name(info, t->kernel, tmp, sizeof(tmp)));
        dfxc_buf_puts(&m, ",\"cat\":\"task\",\"args\":{\"task\":");
        dfxc_buf_u64(&m, t->id - s->min_id);
        dfxc_buf_puts(&m, ",\"core\":");
        dfxc_buf_i64(&m, t->core);
        dfxc_buf_puts(&m, ",\"status\":");
        dfxc_buf_i64(&m, t->status);
        dfxc_buf_puts(&m, ",\"poisoned\":");
        dfxc_buf_i64(&m, t->poisoned);
        dfxc_buf_puts(&m, "}");
        dfxc_trace_add(s->trace, 'X', info->chip, t->producer, t0, dur, m.p ? m.p : "");
        if (info->model != NULL)
            dfxc_model_add_timed(info->model, t->id - s->min_id,
                                 dfxc_kernel_name(info, t->kernel, tmp, sizeof(tmp)),
                                 info->chip, t->producer, t->core, t0, dur);
    }
    if (m.oom)
        s->oom = 1;
    dfxc_buf_free(&m);
}

/* Adds one X slice per phase span. */
static void swl_phases(swl_state *s, const px_dfx_run_info *info)
{
    dfxc_buf m;

    dfxc_buf_init(&m);
    for (size_t i = 0; i < s->nphases; i++) {
        const swl_phase *p = &s->phases[i];

        m.len = 0;
        dfxc_buf_puts(&m, "\"name\":");
        dfxc_buf_json_str(&m, px_dfx_phase_name(p->phase));
        dfxc_buf_puts(&m, ",\"cat\":\"phase\",\"args\":{");
        if (p->task != 0) {
            dfxc_buf_puts(&m, "\"task\":");
            dfxc_buf_u64(&m, p->task - s->min_id);
        }
        dfxc_buf_puts(&m, "}");
        dfxc_trace_add(s->trace, 'X', info->chip, p->producer, dfxc_ns(info, p->ts),
                       dfxc_dur_ns(info, p->ts, p->ticks), m.p ? m.p : "");
    }
    if (m.oom)
        s->oom = 1;
    dfxc_buf_free(&m);
}

/* The args of a revoke, agree or shrink span from its words (records.h), after "op". */
static void swl_shrink_args(dfxc_buf *m, const px_dfx_comm_rec *c)
{
    const uint64_t *w = c->w;
    int k = 0;

    if (c->op == PX_DFX_COMM_REVOKE) {
        dfxc_buf_puts(m, ",\"by\":");
        if (w[0] >= 2)
            dfxc_buf_printf(m, "\"rank %llu\"", (unsigned long long)(w[0] - 2));
        else
            dfxc_buf_json_str(m, "the orchestration");
        dfxc_buf_printf(m, ",\"first\":%s,\"generation\":%u", w[1] ? "true" : "false",
                        (unsigned)w[2]);
        return;
    }
    if (c->op == PX_DFX_COMM_SHRINK) {
        dfxc_buf_printf(m, ",\"generation\":%u,\"to_generation\":%u,\"ranks\":%u,"
                        "\"survivors\":%u,\"rank\":%u,\"status\":", (unsigned)(w[0] & 0xffff),
                        (unsigned)(w[0] & 0xffff) + 1, (unsigned)(w[0] >> 16 & 0xffff),
                        (unsigned)(w[0] >> 32 & 0xffff), (unsigned)(w[0] >> 48 & 0xffff));
        dfxc_buf_json_str(m, px_status_name((px_status)(int32_t)(uint32_t)w[1]));
        return;
    }
    /* agree: who was excluded (ranks and chips; the level-3 merge adds why) */
    dfxc_buf_printf(m, ",\"generation\":%u,\"attempt\":%u,\"ranks\":%u,\"survivors\":%u,"
                    "\"status\":", (unsigned)(w[2] & 0xffff), (unsigned)(w[1] >> 32),
                    (unsigned)(w[2] >> 16 & 0xffff), (unsigned)(w[2] >> 32 & 0xffff));
    dfxc_buf_json_str(m, px_status_name((px_status)(int32_t)(uint32_t)w[1]));
    dfxc_buf_puts(m, ",\"excluded\":[");
    for (int r = 0; r < 64; r++) {
        uint64_t chip = 63;

        if (!(w[0] >> r & 1))
            continue;
        if (k < 5 * PX_DFX_COMM_CHIPS_PER_WORD)
            chip = w[3 + k / PX_DFX_COMM_CHIPS_PER_WORD] >>
                   (6 * (k % PX_DFX_COMM_CHIPS_PER_WORD)) & 63;
        dfxc_buf_printf(m, "%s{\"rank\":%d,\"chip\":%d}", k ? "," : "", r,
                        chip == 63 ? -1 : (int)chip);
        k++;
    }
    dfxc_buf_puts(m, "]");
}

/* Adds one X slice per communication span: "comm.<op>" with op, bytes, peer, algorithm,
 * transport and the domain's id in its args (a revoke, agreement or shrink: its own). */
static void swl_comms(swl_state *s, const px_dfx_run_info *info)
{
    static const char *const algos[PX_DFX_COMM_NALGOS] = PX_DFX_COMM_ALGOS;
    static const char *const tls[PX_DFX_COMM_NTRANSPORTS] = PX_DFX_COMM_TRANSPORTS;
    char name[48];
    dfxc_buf m;

    dfxc_buf_init(&m);
    for (size_t i = 0; i < s->ncomms; i++) {
        const px_dfx_comm_rec *c = &s->comms[i].c;

        m.len = 0;
        snprintf(name, sizeof(name), "comm.%s", px_dfx_comm_op_name(c->op));
        dfxc_buf_puts(&m, "\"name\":");
        dfxc_buf_json_str(&m, name);
        dfxc_buf_puts(&m, ",\"cat\":\"comm\",\"args\":{\"op\":");
        dfxc_buf_json_str(&m, px_dfx_comm_op_name(c->op));
        if (c->op >= PX_DFX_COMM_REVOKE && c->nw >= 4) {
            swl_shrink_args(&m, c);
            dfxc_buf_puts(&m, ",\"domain\":");
            dfxc_buf_u64(&m, c->domain);
            dfxc_buf_puts(&m, "}");
            dfxc_trace_add(s->trace, 'X', info->chip, s->comms[i].producer,
                           dfxc_ns(info, c->t0), dfxc_dur_ns(info, c->t0, c->t1 - c->t0),
                           m.p ? m.p : "");
            continue;
        }
        dfxc_buf_puts(&m, ",\"bytes\":");
        dfxc_buf_u64(&m, c->bytes);
        dfxc_buf_puts(&m, ",\"peer\":");
        dfxc_buf_i64(&m, c->peer);
        dfxc_buf_puts(&m, ",\"algorithm\":");
        dfxc_buf_json_str(&m, c->algo >= 0 && c->algo < PX_DFX_COMM_NALGOS ? algos[c->algo] : "?");
        dfxc_buf_puts(&m, ",\"transport\":");
        dfxc_buf_json_str(&m, c->transport >= 0 && c->transport < PX_DFX_COMM_NTRANSPORTS
                                  ? tls[c->transport] : "?");
        dfxc_buf_puts(&m, ",\"domain\":");
        dfxc_buf_u64(&m, c->domain);
        dfxc_buf_puts(&m, "}");
        dfxc_trace_add(s->trace, 'X', info->chip, s->comms[i].producer, dfxc_ns(info, c->t0),
                       dfxc_dur_ns(info, c->t0, c->t1 - c->t0), m.p ? m.p : "");
    }
    if (m.oom)
        s->oom = 1;
    dfxc_buf_free(&m);
}

/*
 * Adds the flow pair of every edge whose two tasks have slices: "s" 1 ns before the
 * producer's end (inside its slice), "f" at the consumer's start. Ids are the edge's index in
 * the sorted edge list. Returns the number of edges without two slices.
 */
static uint64_t swl_flows(swl_state *s, const px_dfx_run_info *info)
{
    uint64_t missing = 0;
    dfxc_buf m;

    dfxc_buf_init(&m);
    for (size_t k = 0; k < s->edges.n; k++) {
        int64_t ip = dfxc_idmap_get(&s->ids, s->edges.v[k].p);
        int64_t ic = dfxc_idmap_get(&s->ids, s->edges.v[k].c);
        const swl_task *tp = ip >= 0 ? &s->tasks[ip] : NULL, *tc = ic >= 0 ? &s->tasks[ic] : NULL;
        int64_t p0, pd, c0, cd;

        if (tp == NULL || tc == NULL || tp->seen != (SWL_BEGUN | SWL_ENDED) ||
            tc->seen != (SWL_BEGUN | SWL_ENDED)) {
            missing++;
            continue;
        }
        swl_task_span(tp, info, &p0, &pd);
        swl_task_span(tc, info, &c0, &cd);
        m.len = 0;
        dfxc_buf_puts(&m, "\"name\":\"dep\",\"cat\":\"dep\",\"id\":");
        dfxc_buf_u64(&m, k);
        dfxc_buf_puts(&m, ",\"bp\":\"e\",\"args\":{\"from\":");
        dfxc_buf_u64(&m, tp->id - s->min_id);
        dfxc_buf_puts(&m, ",\"to\":");
        dfxc_buf_u64(&m, tc->id - s->min_id);
        dfxc_buf_puts(&m, "}");
        dfxc_trace_add(s->trace, 's', info->chip, tp->producer, p0 + PX_MAX(pd - 1, 0), 0,
                       m.p ? m.p : "");
        dfxc_trace_add(s->trace, 'f', info->chip, tc->producer, c0, 0, m.p ? m.p : "");
        if (info->model != NULL)
            dfxc_model_add_edge(info->model, 0, tp->id - s->min_id, tc->id - s->min_id);
    }
    if (m.oom)
        s->oom = 1;
    dfxc_buf_free(&m);
    return missing;
}

static px_status swl_finish(void *state, const px_dfx_run_info *info)
{
    swl_state *s = state;
    uint64_t incomplete = 0, missing;
    px_status st;

    swl_load(s, info);
    if (s->min_id == UINT64_MAX)
        s->min_id = 0;
    dfxc_edges_sort(&s->edges);
    dfxc_trace_names(s->trace, info);
    swl_tasks(s, info, &incomplete);
    swl_phases(s, info);
    swl_comms(s, info);
    missing = swl_flows(s, info);
    if (incomplete > 0 || missing > 0)
        PX_LOG_INFO("dfx[swimlane]: %llu tasks without both begin and end, %llu edges "
                    "without two task slices (records dropped, or tasks poisoned)",
                    (unsigned long long)incomplete, (unsigned long long)missing);
    if (s->oom) {
        dfxc_trace_release(s->trace, 0);
        s->trace = NULL;
        return px_set_error(PX_ENOMEM,
                            "dfx[swimlane]: out of memory keeping %zu tasks and "
                            "%zu phases; profile a smaller run",
                            s->ntasks, s->nphases);
    }
    st = dfxc_trace_release(s->trace, 1);
    s->trace = NULL;
    return st;
}

static void swl_close(void *state)
{
    swl_state *s = state;

    if (s == NULL)
        return;
    if (s->trace != NULL && dfxc_trace_release(s->trace, 0) != PX_OK)
        PX_LOG_WARN("dfx[swimlane]: %s", px_last_error());
    dfxc_raw_free(&s->raw);
    dfxc_idmap_free(&s->ids);
    dfxc_edges_free(&s->edges);
    free(s->tasks);
    free(s->phases);
    free(s->comms);
    free(s);
}

const px_dfx_collector_ops px_dfx_swimlane_ops = {
    .name = "swimlane",
    .bit = PX_DFX_SWIMLANE,
    .kinds = 1u << PX_DFXK_TASK | 1u << PX_DFXK_PHASE | 1u << PX_DFXK_SUBMIT |
             1u << PX_DFXK_EDGE | 1u << PX_DFXK_COMM,
    .shares_raw = 1,
    .open = swl_open,
    .on_record = swl_on_record,
    .finish = swl_finish,
    .close = swl_close,
};
