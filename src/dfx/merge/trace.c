/*
 * trace.json of a merge. Level 3: the host's events get pid 0, on a process named "host (L3
 * orchestration + dispatch)"; chip i's events get pid i + 1, on a process named "chip i (pid
 * P)" (the sources' labels; P the chip's process id). Level 4: host h's processes keep their
 * own pids plus h * DFX_MERGE_HOST_PIDS, named "host h (id): <its own name>", its comm spans
 * name the host. Each source's time stamps move onto the merge's time base (mrg_map); flow
 * ids are offset per source so that no two sources share one; every other member is copied
 * as it is. Metadata first, then every event in time order (ties keep the sources' order).
 * The merge's process names replace the sources' own. otherData is the first source's with
 * the clamps summed and the processes (level 3) or hosts (level 4) listed.
 */
#include "dfx/merge/merge_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 for the process metadata the merge writes itself. */
int mrg_own_meta(const mrg_line *l)
{
    return l->meta && (strncmp(l->p, "{\"name\":\"process_name\",", 23) == 0 ||
                       strncmp(l->p, "{\"name\":\"process_sort_index\",", 29) == 0);
}

/* The pid of line l in the merge: the source's, or at level 4 the host's own plus its base. */
int mrg_pid(const mrg_src *s, const mrg_line *l)
{
    const char *tail, *at;

    if (s->host == NULL)
        return s->pid;
    tail = mrg_find(l->p, l->p + l->n, ",\"ph\":\"", 1);
    at = tail ? mrg_find(tail, l->p + l->n, ",\"pid\":", 0) : NULL;
    return s->pid_base + (at ? atoi(at + 7) : 0);
}

/* A task id of source s, unique in the merge's report: at level 4 the process's pid in the
 * merge above bit 40 (each process numbers its own tasks), else offset by the source's base. */
uint64_t mrg_task(const mrg_src *s, const mrg_line *l, uint64_t id)
{
    return s->host != NULL ? (uint64_t)mrg_pid(s, l) << 40 | id : id + s->task_base;
}

/* Time stamp ts (ns) of source s on the merge's time base. */
int64_t mrg_map(const mrg_src *s, int64_t ts)
{
    return s->scale != 0 ? (int64_t)llround(s->scale * (double)ts + s->shift)
                         : ts + s->shift_ns;
}

/* A duration of source s in the merge's ns (a clock rate scales it). */
int64_t mrg_dur(const mrg_src *s, int64_t d)
{
    return s->scale != 0 ? (int64_t)llround(s->scale * (double)d) : d;
}

/* Appends line l of source s with its pid, time stamp and flow id moved to the merge. */
static void mrg_render(const mrg_src *s, const mrg_line *l, dfxc_buf *b)
{
    const char *end = l->p + l->n, *tail = mrg_find(l->p, end, ",\"ph\":\"", 1);
    const char *id = (tail[7] == 's' || tail[7] == 'f')
                         ? mrg_find(l->p, tail, "\"cat\":\"dep\",\"id\":", 0) : NULL;
    const char *pid = mrg_find(tail, end, ",\"pid\":", 0), *tid, *ts, *after = end, *dur;
    const char *dur_end;
    int64_t ns;

    const char *comm = s->host != NULL && tail[7] == 'X'
                           ? mrg_find(l->p, tail, "\"cat\":\"comm\",\"args\":{", 0) : NULL;

    if (comm != NULL) { /* level 4: a comm span names its host */
        comm += 21;
        dfxc_buf_put(b, l->p, (size_t)(comm - l->p));
        dfxc_buf_printf(b, "\"host\":%d,", s->host->index);
        dfxc_buf_put(b, comm, (size_t)(pid - comm));
    } else if (id != NULL) {
        char *num_end;
        uint64_t v = strtoull(id + 17, &num_end, 10);

        dfxc_buf_put(b, l->p, (size_t)(id + 17 - l->p));
        dfxc_buf_u64(b, v + s->id_base);
        dfxc_buf_put(b, num_end, (size_t)(pid - num_end));
    } else {
        dfxc_buf_put(b, l->p, (size_t)(pid - l->p));
    }
    dfxc_buf_printf(b, ",\"pid\":%d", mrg_pid(s, l));
    tid = mrg_find(pid + 1, end, ",", 0);
    ts = l->meta ? NULL : mrg_find(pid, end, ",\"ts\":", 0);
    if (ts == NULL) {
        dfxc_buf_put(b, tid, (size_t)(end - tid));
        return;
    }
    dfxc_buf_put(b, tid, (size_t)(ts + 6 - tid));
    mrg_parse_us(ts + 6, end, &ns, &after);
    dfxc_buf_us(b, mrg_map(s, ns));
    dur = s->scale != 0 ? mrg_find(after, end, ",\"dur\":", 0) : NULL;
    if (dur != NULL && mrg_parse_us(dur + 7, end, &ns, &dur_end) == 0) {
        dfxc_buf_put(b, after, (size_t)(dur + 7 - after));
        dfxc_buf_us(b, mrg_dur(s, ns));
        after = dur_end;
    }
    dfxc_buf_put(b, after, (size_t)(end - after));
}

/* Appends the process name and sort index of every source (",\n" before each but the first
 * entry of the array; *first tracks it). */
static void mrg_processes(const mrg *m, dfxc_buf *b, int *first)
{
    for (int k = 0; k < m->nsrc; k++) {
        const mrg_src *s = &m->src[k];

        if (s->trace_text == NULL)
            continue;
        dfxc_buf_puts(b, *first ? "" : ",\n");
        dfxc_buf_puts(b, "{\"name\":\"process_name\",\"args\":{\"name\":");
        dfxc_buf_json_str(b, s->in->label);
        dfxc_buf_printf(b, "},\"ph\":\"M\",\"pid\":%d,\"tid\":0},\n", s->pid);
        dfxc_buf_printf(b, "{\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d},"
                        "\"ph\":\"M\",\"pid\":%d,\"tid\":0}", s->pid, s->pid);
        *first = 0;
    }
}

/* Level 4: a host's process metadata line l (its level-3 merge's process name or sort
 * index) under the merge's pid, the name prefixed with the host; into b, or, with model,
 * the process's name into the report's model. */
void mrg_host_meta(const mrg_src *s, const mrg_line *l, dfxc_buf *b, dfxc_model *model)
{
    static const char pn[] = "{\"name\":\"process_name\",\"args\":{\"name\":";
    char name[160], full[320];
    int pid = mrg_pid(s, l);

    if (strncmp(l->p, pn, sizeof(pn) - 1) != 0) {
        if (b != NULL)
            dfxc_buf_printf(b, "{\"name\":\"process_sort_index\",\"args\":{\"sort_index\":"
                            "%d},\"ph\":\"M\",\"pid\":%d,\"tid\":0}", pid, pid);
        return;
    }
    mrg_unescape(l->p + sizeof(pn) - 1, l->p + l->n, name, sizeof(name));
    snprintf(full, sizeof(full), "host %d (%s): %s", s->host->index, s->host->label, name);
    if (model != NULL) {
        dfxc_model_add_process(model, pid, full);
        return;
    }
    dfxc_buf_puts(b, "{\"name\":\"process_name\",\"args\":{\"name\":");
    dfxc_buf_json_str(b, full);
    dfxc_buf_printf(b, "},\"ph\":\"M\",\"pid\":%d,\"tid\":0}", pid);
}

/* Appends every source's metadata lines, source by source, then every timed line merged by
 * (time on the host's base, source, file order): each source's lines are in time order. */
static void mrg_events(mrg *m, dfxc_buf *b, int *first)
{
    size_t *at = m->nsrc > 0 ? calloc((size_t)m->nsrc, sizeof(*at)) : NULL;

    if (at == NULL) {
        b->oom = 1;
        return;
    }
    for (int k = 0; k < m->nsrc; k++)
        for (; at[k] < m->src[k].nlines && m->src[k].lines[at[k]].meta; at[k]++) {
            const mrg_line *l = &m->src[k].lines[at[k]];

            if (mrg_own_meta(l) && m->src[k].host == NULL)
                continue;
            dfxc_buf_puts(b, *first ? "" : ",\n");
            if (mrg_own_meta(l))
                mrg_host_meta(&m->src[k], l, b, NULL);
            else
                mrg_render(&m->src[k], l, b);
            *first = 0;
        }
    for (;;) {
        int best = -1;
        int64_t best_ts = 0;

        for (int k = 0; k < m->nsrc; k++) {
            const mrg_src *s = &m->src[k];
            int64_t ts;

            if (at[k] >= s->nlines)
                continue;
            ts = mrg_map(s, s->lines[at[k]].ts);
            if (best < 0 || ts < best_ts) {
                best = k;
                best_ts = ts;
            }
        }
        if (best < 0)
            break;
        dfxc_buf_puts(b, *first ? "" : ",\n");
        mrg_render(&m->src[best], &m->src[best].lines[at[best]++], b);
        *first = 0;
    }
    free(at);
}

/* Appends otherData: the host's, with the clamps summed and the processes listed. */
static void mrg_other(const mrg *m, dfxc_buf *b)
{
    const mrg_src *h = &m->src[0];
    const char *p = h->other.p, *end = h->other.p + h->other.n;
    const char *cl = mrg_find(p, end, "\"clamped\": ", 0), *close = mrg_find(p, end, "}}", 1);
    const char *cl_end = cl ? mrg_find(cl, end, ", ", 0) : NULL;

    if (close == NULL)
        close = end;
    if (m->level == 4 && (cl = mrg_find(p, close, ", \"clamped\": ", 1)) != NULL) {
        dfxc_buf_put(b, p, (size_t)(cl - p)); /* host 0's own, without its level-3 members */
        dfxc_buf_printf(b, ", \"clamped\": %llu, \"level\": 4, \"hosts\": [",
                        (unsigned long long)m->clamped);
        for (int k = 0, first = 1; k < m->nsrc; k++) {
            if (m->src[k].trace_text == NULL)
                continue;
            dfxc_buf_printf(b, "%s{\"host\": %d, \"pid_base\": %d, \"shift_us\": ",
                            first ? "" : ", ", m->src[k].host->index, m->src[k].pid_base);
            dfxc_buf_us(b, m->src[k].shift_ns);
            dfxc_buf_puts(b, "}");
            first = 0;
        }
        dfxc_buf_puts(b, "]}}\n");
        return;
    }
    if (cl != NULL && cl_end != NULL && cl_end < close) { /* the host's members but clamped */
        dfxc_buf_put(b, p, (size_t)(cl - p));
        dfxc_buf_put(b, cl_end + 2, (size_t)(close - cl_end - 2));
    } else {
        dfxc_buf_put(b, p, (size_t)(close - p));
    }
    dfxc_buf_printf(b, ", \"clamped\": %llu, \"level\": 3, \"processes\": [",
                    (unsigned long long)m->clamped);
    for (int k = 0, first = 1; k < m->nsrc; k++) {
        const mrg_src *s = &m->src[k];

        if (s->trace_text == NULL)
            continue;
        dfxc_buf_printf(b, "%s{\"pid\": %d, \"chip\": %d, \"os_pid\": %d, \"shift_us\": ",
                        first ? "" : ", ", s->pid, s->in->index,
                        s->in->pid);
        dfxc_buf_us(b, s->shift_ns);
        dfxc_buf_puts(b, "}");
        first = 0;
    }
    dfxc_buf_puts(b, "]}}\n");
}

/* Writes the merged trace.json. Returns PX_OK or the error. */
px_status mrg_trace(mrg *m)
{
    uint64_t next = 0;
    px_status st;
    int first = 1;
    dfxc_buf b;

    for (int k = 0; k < m->nsrc; k++) {
        m->src[k].id_base = next;
        next += m->src[k].id_top;
    }
    dfxc_buf_init(&b);
    dfxc_buf_puts(&b, "{\"displayTimeUnit\": \"ns\",\n\"traceEvents\": [\n");
    if (m->level == 3)
        mrg_processes(m, &b, &first); /* level 4: the hosts' own, renamed (mrg_host_meta) */
    mrg_events(m, &b, &first);
    dfxc_buf_puts(&b, "\n],\n");
    mrg_other(m, &b);
    st = dfxc_buf_write_file(&b, m->dir, "trace.json",
                             m->level == 3 ? "level-3 merge" : "level-4 merge");
    dfxc_buf_free(&b);
    return st;
}
