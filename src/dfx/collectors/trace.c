/*
 * trace.c - the shared trace.json builder (see trace.h).
 *
 * Traces live in a small process-wide list keyed by output directory, guarded by one mutex;
 * each trace counts its members. Events are kept as numbers (ts, dur, pid, tid) plus their
 * other JSON members in one text arena, so nesting can be repaired and events sorted before
 * the file is written: metadata first, then by time stamp, ties in insertion order.
 */
#include "dfx/collectors/trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dfx/collectors/out.h"
#include "util/fork.h"
#include "util/log.h"

#define DFXC_TRACE_WHO_MAX 4

typedef struct dfxc_tev {
    int64_t ts, dur;
    int32_t pid, tid;
    uint32_t seq;
    char ph;
    size_t off, len; /* members in the text arena */
} dfxc_tev;

struct dfxc_trace {
    dfxc_trace *next;
    char *out_dir;
    char clock[16];
    double ticks_per_ns;
    int refs, finished;
    const char *who[DFXC_TRACE_WHO_MAX];
    int nwho;
    pthread_mutex_t lock;
    dfxc_tev *ev;
    size_t nev, cap;
    dfxc_buf text;
    int oom;
    uint64_t named_chips; /* bit per chip (< 64) whose track names were added */
};

static pthread_mutex_t dfxc_traces_lock = PTHREAD_MUTEX_INITIALIZER;

/* A chip's DFX session attaches its trace under this lock: held across plexus's forks. */
__attribute__((constructor)) static void dfxc_traces_guard(void)
{
    util_fork_guard(&dfxc_traces_lock);
}
static dfxc_trace *dfxc_traces;

/* Finds the trace of dir in the list; the list lock is held. */
static dfxc_trace *dfxc_trace_find(const char *dir)
{
    for (dfxc_trace *t = dfxc_traces; t != NULL; t = t->next)
        if (strcmp(t->out_dir, dir) == 0)
            return t;
    return NULL;
}

/* Makes a trace for info's directory; returns it or NULL when out of memory. */
static dfxc_trace *dfxc_trace_new(const px_dfx_run_info *info)
{
    dfxc_trace *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->out_dir = strdup(info->out_dir);
    if (t->out_dir == NULL) {
        free(t);
        return NULL;
    }
    snprintf(t->clock, sizeof(t->clock), "%s", info->clock ? info->clock : "?");
    t->ticks_per_ns = info->ticks_per_ns;
    pthread_mutex_init(&t->lock, NULL);
    dfxc_buf_init(&t->text);
    return t;
}

px_status dfxc_trace_attach(const px_dfx_run_info *info, const char *who, dfxc_trace **t)
{
    dfxc_trace *tr;

    pthread_mutex_lock(&dfxc_traces_lock);
    tr = dfxc_trace_find(info->out_dir);
    if (tr == NULL) {
        tr = dfxc_trace_new(info);
        if (tr != NULL) {
            tr->next = dfxc_traces;
            dfxc_traces = tr;
        }
    }
    if (tr != NULL) {
        tr->refs++;
        if (tr->nwho < DFXC_TRACE_WHO_MAX)
            tr->who[tr->nwho++] = who;
    }
    pthread_mutex_unlock(&dfxc_traces_lock);
    if (tr == NULL)
        return px_set_error(PX_ENOMEM, "dfx[%s]: cannot allocate the trace builder", who);
    *t = tr;
    return PX_OK;
}

void dfxc_trace_add(dfxc_trace *t, char ph, int pid, int tid, int64_t ts, int64_t dur,
                    const char *members)
{
    dfxc_tev *e;

    pthread_mutex_lock(&t->lock);
    e = dfxc_push((void **)&t->ev, &t->nev, &t->cap, sizeof(*e));
    if (e == NULL) {
        t->oom = 1;
    } else {
        *e = (dfxc_tev){.ts = ts,
                        .dur = dur < 0 ? 0 : dur,
                        .pid = pid,
                        .tid = tid,
                        .seq = (uint32_t)(t->nev - 1),
                        .ph = ph,
                        .off = t->text.len,
                        .len = strlen(members)};
        dfxc_buf_put(&t->text, members, e->len);
    }
    pthread_mutex_unlock(&t->lock);
}

void dfxc_trace_names(dfxc_trace *t, const px_dfx_run_info *info)
{
    uint64_t bit = info->chip >= 0 && info->chip < 64 ? 1ull << info->chip : 0;
    dfxc_buf m;
    char tmp[32];
    int done;

    pthread_mutex_lock(&t->lock);
    done = (t->named_chips & bit) != 0;
    t->named_chips |= bit;
    pthread_mutex_unlock(&t->lock);
    if (done)
        return;
    dfxc_buf_init(&m);
    dfxc_buf_printf(&m, "\"name\":\"process_name\",\"args\":{\"name\":\"chip %d\"}", info->chip);
    dfxc_trace_add(t, 'M', info->chip, 0, 0, 0, m.p ? m.p : "");
    for (int p = 0; p < info->nproducers; p++) {
        m.len = 0;
        dfxc_buf_puts(&m, "\"name\":\"thread_name\",\"args\":{\"name\":");
        dfxc_buf_json_str(&m, dfxc_producer_name(info, (unsigned)p, tmp, sizeof(tmp)));
        dfxc_buf_puts(&m, "}");
        dfxc_trace_add(t, 'M', info->chip, p, 0, 0, m.p ? m.p : "");
        m.len = 0;
        dfxc_buf_printf(&m, "\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}", p);
        dfxc_trace_add(t, 'M', info->chip, p, 0, 0, m.p ? m.p : "");
    }
    if (m.oom)
        t->oom = 1;
    dfxc_buf_free(&m);
}

/* Orders slices by track, then start, longer first (parents before children), then seq. */
static int dfxc_nest_cmp(const void *pa, const void *pb)
{
    const dfxc_tev *a = *(const dfxc_tev *const *)pa, *b = *(const dfxc_tev *const *)pb;

    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    if (a->dur != b->dur)
        return a->dur > b->dur ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * Clamps every X slice that overlaps its enclosing slice's end. `order` holds pointers to the
 * X events sorted by dfxc_nest_cmp. Returns the number of slices clamped.
 */
static uint64_t dfxc_trace_nest(dfxc_tev **order, size_t n)
{
    dfxc_tev *stack[64];
    uint64_t clamped = 0;
    int depth = 0;

    for (size_t i = 0; i < n; i++) {
        dfxc_tev *s = order[i];

        while (depth > 0 && (stack[depth - 1]->pid != s->pid || stack[depth - 1]->tid != s->tid ||
                             stack[depth - 1]->ts + stack[depth - 1]->dur <= s->ts))
            depth--;
        if (depth > 0 && s->ts + s->dur > stack[depth - 1]->ts + stack[depth - 1]->dur) {
            s->dur = stack[depth - 1]->ts + stack[depth - 1]->dur - s->ts;
            clamped++;
        }
        if (depth < (int)PX_ARRAY_SIZE(stack))
            stack[depth++] = s;
    }
    return clamped;
}

/* Orders events for the file: metadata first (by pid, tid, seq), then by ts, then seq. */
static int dfxc_file_cmp(const void *pa, const void *pb)
{
    const dfxc_tev *a = *(const dfxc_tev *const *)pa, *b = *(const dfxc_tev *const *)pb;
    int ma = a->ph == 'M', mb = b->ph == 'M';

    if (ma != mb)
        return ma ? -1 : 1;
    if (ma && a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (ma && a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (!ma && a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Appends one event object to out. */
static void dfxc_trace_render(const dfxc_trace *t, const dfxc_tev *e, dfxc_buf *out)
{
    char ph[8] = {'"', 'p', 'h', '"', ':', '"', e->ph, '"'};

    dfxc_buf_put(out, "{", 1);
    dfxc_buf_put(out, t->text.p + e->off, e->len);
    if (e->len)
        dfxc_buf_put(out, ",", 1);
    dfxc_buf_put(out, ph, sizeof(ph));
    dfxc_buf_puts(out, ",\"pid\":");
    dfxc_buf_i64(out, e->pid);
    dfxc_buf_puts(out, ",\"tid\":");
    dfxc_buf_i64(out, e->tid);
    if (e->ph != 'M') {
        dfxc_buf_puts(out, ",\"ts\":");
        dfxc_buf_us(out, e->ts);
    }
    if (e->ph == 'X') {
        dfxc_buf_puts(out, ",\"dur\":");
        dfxc_buf_us(out, e->dur);
    }
    dfxc_buf_puts(out, "}");
}

/* Appends the otherData object. */
static void dfxc_trace_other(const dfxc_trace *t, uint64_t clamped, dfxc_buf *out)
{
    dfxc_buf_puts(out, "\"otherData\": {\"version\": 1, \"generator\": \"plexus\", \"clock\": ");
    dfxc_buf_json_str(out, t->clock);
    dfxc_buf_printf(out, ", \"ticks_per_ns\": %.6f, \"clamped\": %llu, \"collectors\": [",
                    t->ticks_per_ns, (unsigned long long)clamped);
    for (int i = 0; i < t->nwho; i++) {
        dfxc_buf_puts(out, i ? ", " : "");
        dfxc_buf_json_str(out, t->who[i]);
    }
    dfxc_buf_puts(out, "]}}\n");
}

/* Repairs nesting, sorts and writes trace.json. Returns PX_OK or the write's error. */
static px_status dfxc_trace_write(dfxc_trace *t)
{
    dfxc_tev **order = malloc((t->nev ? t->nev : 1) * sizeof(*order));
    uint64_t clamped;
    size_t nx = 0;
    px_status st;
    dfxc_buf out;

    if (order == NULL || t->oom || t->text.oom) {
        free(order);
        return px_set_error(PX_ENOMEM,
                            "dfx[trace]: out of memory building trace.json (%zu "
                            "events); profile a smaller run",
                            t->nev);
    }
    for (size_t i = 0; i < t->nev; i++)
        if (t->ev[i].ph == 'X')
            order[nx++] = &t->ev[i];
    qsort(order, nx, sizeof(*order), dfxc_nest_cmp);
    clamped = dfxc_trace_nest(order, nx);
    if (clamped > 0)
        PX_LOG_DEBUG("dfx[trace]: %llu slices clamped to their parent's end",
                     (unsigned long long)clamped);
    for (size_t i = 0; i < t->nev; i++)
        order[i] = &t->ev[i];
    qsort(order, t->nev, sizeof(*order), dfxc_file_cmp);
    dfxc_buf_init(&out);
    dfxc_buf_puts(&out, "{\"displayTimeUnit\": \"ns\",\n\"traceEvents\": [\n");
    for (size_t i = 0; i < t->nev; i++) {
        dfxc_trace_render(t, order[i], &out);
        dfxc_buf_puts(&out, i + 1 < t->nev ? ",\n" : "\n");
    }
    dfxc_buf_puts(&out, "],\n");
    dfxc_trace_other(t, clamped, &out);
    free(order);
    st = dfxc_buf_write_file(&out, t->out_dir, "trace.json", "trace");
    dfxc_buf_free(&out);
    return st;
}

/* Unlinks t from the list; the list lock is held. */
static void dfxc_trace_unlink(dfxc_trace *t)
{
    for (dfxc_trace **pp = &dfxc_traces; *pp != NULL; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            return;
        }
}

static void dfxc_trace_free(dfxc_trace *t)
{
    pthread_mutex_destroy(&t->lock);
    dfxc_buf_free(&t->text);
    free(t->ev);
    free(t->out_dir);
    free(t);
}

px_status dfxc_trace_release(dfxc_trace *t, int finished)
{
    px_status st = PX_OK;
    int last;

    if (t == NULL)
        return PX_OK;
    pthread_mutex_lock(&dfxc_traces_lock);
    t->finished += finished ? 1 : 0;
    last = --t->refs == 0;
    if (last)
        dfxc_trace_unlink(t);
    pthread_mutex_unlock(&dfxc_traces_lock);
    if (!last)
        return PX_OK;
    if (t->finished > 0)
        st = dfxc_trace_write(t);
    dfxc_trace_free(t);
    return st;
}
