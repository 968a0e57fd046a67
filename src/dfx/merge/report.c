/*
 * report.html of a merged run, over the first source's own (which its DFX wrote before the
 * merge): every process's tasks, one group of rows per process (level 4: per host, then per
 * process), task ids made unique across the sources, each host task's chip tasks its inner
 * tasks, so that the critical path runs through them.
 */
#include "dfx/merge/merge_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfx/collectors/collectors.h"

/* Adds what line l of source s says about tasks, tracks and edges to the report's model. */
static void mrg_model_line(const mrg_src *s, const mrg_line *l, dfxc_model *m)
{
    const char *end = l->p + l->n, *tail = mrg_find(l->p, end, ",\"ph\":\"", 1);
    int64_t tid = mrg_after_num(tail, end, ",\"tid\":"), id, a, b;
    char name[256];
    const char *dur;
    int64_t dns;

    if (strncmp(l->p, "{\"name\":\"", 9) != 0)
        return;
    mrg_unescape(l->p + 8, tail, name, sizeof(name));
    if (l->meta && strncmp(l->p, "{\"name\":\"thread_name\",\"args\":{\"name\":", 37) == 0) {
        mrg_unescape(l->p + 37, tail, name, sizeof(name));
        dfxc_model_add_track(m, mrg_pid(s, l), (int)tid, name);
    } else if (tail[7] == 'X' && (id = mrg_after_num(l->p, tail, "\"cat\":\"task\",\"args\":"
                                                                "{\"task\":")) >= 0) {
        const char *after;

        dur = mrg_find(tail, end, ",\"dur\":", 0);
        if (dur == NULL || mrg_parse_us(dur + 7, end, &dns, &after) != 0)
            return;
        dfxc_model_add_timed(m, mrg_task(s, l, (uint64_t)id), name, mrg_pid(s, l), (int)tid,
                             (int)mrg_after_num(l->p, tail, ",\"core\":"), mrg_map(s, l->ts),
                             mrg_dur(s, dns));
    } else if (tail[7] == 's' && (a = mrg_after_num(l->p, tail, "\"from\":")) >= 0 &&
               (b = mrg_after_num(l->p, tail, "\"to\":")) >= 0) {
        dfxc_model_add_edge(m, 0, mrg_task(s, l, (uint64_t)a), mrg_task(s, l, (uint64_t)b));
    }
}

/*
 * Makes the chip tasks that each host task's calls ran that host task's inner tasks in the
 * report's model (the input's log of the run's calls; none at level 4). Ids are those of the
 * files (a host task from the host run's first task, a chip's from its session's first task),
 * offset by the source's task_base.
 */
static void mrg_link_calls(const mrg *m, dfxc_model *model)
{
    for (int k = 1; m->in->calls != NULL && k < m->nsrc; k++) {
        const mrg_src *s = &m->src[k];

        if (s->trace_text == NULL || s->chip == NULL)
            continue;
        for (size_t i = 0; i < m->in->ncalls; i++) {
            const dfx_merge_call *c = &m->in->calls[i];

            if (c->chip != s->chip->index)
                continue;
            for (uint64_t t = 0; t < c->ntasks; t++)
                dfxc_model_add_inner(model, c->host_task + m->src[0].task_base,
                                     c->first_task + t + s->task_base);
        }
    }
}

/*
 * Writes report.html of the whole level-3 run over the host's own (which the host's DFX wrote
 * before the merge): every process's tasks, one group of rows per process, task ids made
 * unique by offsetting each chip's past the sources before it, each host task's chip tasks
 * its inner tasks (the critical path runs through them). Returns PX_OK or the error.
 */
px_status mrg_report(mrg *m)
{
    mrg_str clock = mrg_get(&m->src[0].dfx, "clock");
    char ck[16] = "?";
    uint64_t next = 0;
    dfxc_model model;
    px_status st;

    if (clock.n >= 2 && clock.n - 2 < sizeof(ck))
        snprintf(ck, sizeof(ck), "%.*s", (int)(clock.n - 2), clock.p + 1);
    dfxc_model_init(&model, ck);
    model.has_trace = 1;
    for (int k = 0; k < m->nsrc; k++) {
        mrg_src *s = &m->src[k];
        char name[64];

        s->task_base = next;
        next += s->task_top;
        if (s->trace_text == NULL)
            continue;
        if (s->host != NULL) {
            snprintf(name, sizeof(name), "host %d (%.40s)", s->host->index, s->host->label);
            dfxc_model_add_host(&model, s->host->index, s->pid_base, name);
            for (size_t i = 0; i < s->nlines && s->lines[i].meta; i++)
                if (mrg_own_meta(&s->lines[i]))
                    mrg_host_meta(s, &s->lines[i], NULL, &model);
            for (size_t i = 0; i < s->nlines; i++)
                if (!mrg_own_meta(&s->lines[i]))
                    mrg_model_line(s, &s->lines[i], &model);
            mrg_host_calls(s, &model);
            continue;
        }
        dfxc_model_add_process(&model, s->pid, s->in->label);
        for (size_t i = 0; i < s->nlines; i++)
            if (!mrg_own_meta(&s->lines[i]))
                mrg_model_line(s, &s->lines[i], &model);
    }
    mrg_link_calls(m, &model);
    st = px_dfx_report_write(m->dir, &model);
    dfxc_model_free(&model);
    return st;
}

/* Level 4: host source s's "calls" (its level-3 dfx.json) as inner tasks in the report. */
void mrg_host_calls(const mrg_src *s, dfxc_model *model)
{
    mrg_str v = mrg_get(&s->dfx, "calls");
    const char *p = v.p, *end = v.p + v.n;

    while (p != NULL && p < end && (p = memchr(p, '[', (size_t)(end - p))) != NULL) {
        unsigned long long host, first, n;
        int chip;

        if (sscanf(p, "[%llu, %d, %llu, %llu]", &host, &chip, &first, &n) == 4 && chip >= 0 &&
            chip < DFX_MERGE_HOST_PIDS - 1)
            for (unsigned long long t = 0; t < n && t < (1ull << 32); t++)
                dfxc_model_add_inner(model, (uint64_t)s->pid_base << 40 | host,
                                     (uint64_t)(s->pid_base + chip + 1) << 40 | (first + t));
        p++;
    }
}

