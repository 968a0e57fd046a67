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
    const char *clock = dfxc_json_str(m->src[0].dfx.root, "clock", "?");
    char ck[16];
    uint64_t next = 0;
    dfxc_model model;
    px_status st;

    snprintf(ck, sizeof(ck), "%s", strlen(clock) < sizeof(ck) ? clock : "?");
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

/* Level 4: host source s's "calls" (its level-3 dfx.json: [host task, chip, first chip task,
 * tasks] each) as inner tasks in the report. */
void mrg_host_calls(const mrg_src *s, dfxc_model *model)
{
    const dfxc_json *calls = dfxc_json_get(s->dfx.root, "calls");

    for (size_t i = 0; calls != NULL && calls->type == DFXC_JARR && i < calls->n; i++) {
        const dfxc_json *c = &calls->kids[i];
        double host, chip, first, n;

        if (c->type != DFXC_JARR || c->n != 4 || c->kids[0].type != DFXC_JNUM ||
            c->kids[1].type != DFXC_JNUM || c->kids[2].type != DFXC_JNUM ||
            c->kids[3].type != DFXC_JNUM)
            continue;
        host = c->kids[0].num, chip = c->kids[1].num, first = c->kids[2].num;
        n = c->kids[3].num;
        if (host < 0 || first < 0 || n < 0 || chip < 0 || chip >= DFX_MERGE_HOST_PIDS - 1)
            continue;
        for (uint64_t t = 0; t < (uint64_t)n && t < (1ull << 32); t++)
            dfxc_model_add_inner(model, (uint64_t)s->pid_base << 40 | (uint64_t)host,
                                 (uint64_t)(s->pid_base + (int)chip + 1) << 40 |
                                     ((uint64_t)first + t));
    }
}
