/*
 * scopestats.c - the scopestats collector: how full the task ring, the heap ring and the
 * tensor map are at every scope begin and end, into scope_stats.jsonl (one JSON object per
 * line; the first line is a header with the format's version).
 *
 * SCOPE records come from the orchestration thread in program order; they are kept raw
 * during the run (raw.h), decoded by finish() and written in time order (ties in arrival
 * order). Format: docs/formats.md.
 */
#include "dfx/collectors/collectors.h"

#include <stdlib.h>

#include "dfx/collectors/out.h"
#include "dfx/collectors/raw.h"
#include "dfx/records.h"
#include "util/log.h"

typedef struct scs_entry {
    px_dfx_scope_rec r;
    size_t seq;
} scs_entry;

typedef struct scs_state {
    dfxc_raw raw; /* the entries as received */
    scs_entry *v;
    size_t n, cap;
    uint64_t bad;
    int oom;
} scs_state;

static px_status scs_open(void **state, const px_dfx_run_info *info)
{
    scs_state *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "dfx[scopestats]: cannot allocate its state");
    dfxc_raw_init(&s->raw);
    *state = s;
    return PX_OK;
}

static void scs_on_record(void *state, const px_dfx_rec *r)
{
    scs_state *s = state;

    if (r->kind == PX_DFXK_SCOPE)
        dfxc_raw_add(&s->raw, r);
}

/* Decodes the kept SCOPE entries, numbering them in arrival order. */
static void scs_load(scs_state *s)
{
    const px_dfx_rec *r;
    dfxc_raw_it it;
    scs_entry *e;

    s->oom |= s->raw.oom;
    dfxc_raw_begin(&s->raw, &it);
    while ((r = dfxc_raw_next(&it)) != NULL) {
        e = dfxc_push((void **)&s->v, &s->n, &s->cap, sizeof(*e));
        if (e == NULL) {
            s->oom = 1;
            return;
        }
        e->seq = s->n - 1;
        if (px_dfx_scope_decode(r, &e->r) != 0) {
            s->n--;
            s->bad++;
        }
    }
}

static int scs_cmp(const void *pa, const void *pb)
{
    const scs_entry *a = pa, *b = pb;

    if (a->r.ts != b->r.ts)
        return a->r.ts < b->r.ts ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Appends the file's text: the header line, then one line per scope event. */
static void scs_jsonl(const scs_state *s, const px_dfx_run_info *info, dfxc_buf *b)
{
    dfxc_buf_puts(b, "{\"version\": 1, \"format\": \"plexus scope_stats\", \"clock\": ");
    dfxc_buf_json_str(b, info->clock);
    dfxc_buf_printf(b, ", \"chip\": %d, \"events\": %zu}\n", info->chip, s->n);
    for (size_t i = 0; i < s->n; i++) {
        const px_dfx_scope_rec *r = &s->v[i].r;

        dfxc_buf_puts(b, "{\"ts_us\": ");
        dfxc_buf_us(b, dfxc_ns(info, r->ts));
        dfxc_buf_printf(b,
                        ", \"event\": \"%s\", \"depth\": %d, \"tasks_live\": %llu, "
                        "\"task_slots\": %llu, \"heap_live\": %llu, \"heap_size\": %llu, "
                        "\"tmap_entries\": %llu}\n",
                        r->begin ? "begin" : "end", r->depth, (unsigned long long)r->occ.tasks_live,
                        (unsigned long long)r->occ.task_slots, (unsigned long long)r->occ.heap_live,
                        (unsigned long long)r->occ.heap_size,
                        (unsigned long long)r->occ.tmap_entries);
    }
}

static px_status scs_finish(void *state, const px_dfx_run_info *info)
{
    scs_state *s = state;
    px_status st;
    dfxc_buf b;

    scs_load(s);
    if (s->oom)
        return px_set_error(PX_ENOMEM,
                            "dfx[scopestats]: out of memory keeping %zu scope "
                            "events",
                            s->n);
    if (s->bad > 0)
        PX_LOG_WARN("dfx[scopestats]: %llu SCOPE entries did not decode and were skipped",
                    (unsigned long long)s->bad);
    if (s->n > 0)
        qsort(s->v, s->n, sizeof(*s->v), scs_cmp);
    dfxc_buf_init(&b);
    scs_jsonl(s, info, &b);
    st = dfxc_buf_write_file(&b, info->out_dir, "scope_stats.jsonl", "scopestats");
    dfxc_buf_free(&b);
    return st;
}

static void scs_close(void *state)
{
    scs_state *s = state;

    if (s == NULL)
        return;
    dfxc_raw_free(&s->raw);
    free(s->v);
    free(s);
}

const px_dfx_collector_ops px_dfx_scopestats_ops = {
    .name = "scopestats",
    .bit = PX_DFX_SCOPESTATS,
    .kinds = 1u << PX_DFXK_SCOPE,
    .open = scs_open,
    .on_record = scs_on_record,
    .finish = scs_finish,
    .close = scs_close,
};
