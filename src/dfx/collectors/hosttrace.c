/*
 * hosttrace.c - the hosttrace collector: host-side spans (px_run, copy in, the orchestration
 * function, the drain, copy out) as "X" slices of category "host" in trace.json, on the
 * track of the producer that recorded them.
 *
 * It contributes to the same trace builder as swimlane (trace.h), so with both on there is
 * one trace.json; with hosttrace alone it writes the file itself. The span's detail word is
 * kept as args.detail with its unit (args.unit: "tasks" or "bytes"). During the run it only
 * keeps the raw entries (raw.h); finish() decodes them. Format: docs/formats.md.
 */
#include "dfx/collectors/collectors.h"

#include <stdlib.h>

#include "dfx/collectors/out.h"
#include "dfx/collectors/raw.h"
#include "dfx/collectors/trace.h"
#include "dfx/records.h"
#include "util/log.h"

typedef struct hst_span {
    uint64_t t0, ticks, detail;
    uint16_t producer;
    uint8_t id;
} hst_span;

typedef struct hst_state {
    dfxc_raw raw; /* the entries as received */
    hst_span *v;
    size_t n, cap;
    int oom;
    dfxc_trace *trace;
} hst_state;

static px_status hst_open(void **state, const px_dfx_run_info *info)
{
    hst_state *s = calloc(1, sizeof(*s));
    px_status st;

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "dfx[hosttrace]: cannot allocate its state");
    dfxc_raw_init(&s->raw);
    st = dfxc_trace_attach(info, "hosttrace", &s->trace);
    if (st != PX_OK) {
        free(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

static void hst_on_record(void *state, const px_dfx_rec *r)
{
    hst_state *s = state;

    if (r->kind == PX_DFXK_HOST)
        dfxc_raw_add(&s->raw, r);
}

/* Decodes the kept HOST entries into spans, in arrival order. */
static void hst_load(hst_state *s)
{
    const px_dfx_rec *r;
    dfxc_raw_it it;
    px_dfx_span d;
    hst_span *h;

    s->oom |= s->raw.oom;
    dfxc_raw_begin(&s->raw, &it);
    while ((r = dfxc_raw_next(&it)) != NULL) {
        if (px_dfx_span_decode(r, &d) != 0)
            continue;
        h = dfxc_push((void **)&s->v, &s->n, &s->cap, sizeof(*h));
        if (h == NULL) {
            s->oom = 1;
            return;
        }
        *h = (hst_span){d.t0, d.t1 - d.t0, d.b, r->producer, (uint8_t)d.id};
    }
}

/* Returns the unit of a span's detail word. */
static const char *hst_unit(int id)
{
    return id == PX_HOST_COPY_IN || id == PX_HOST_COPY_OUT ? "bytes" : "tasks";
}

static px_status hst_finish(void *state, const px_dfx_run_info *info)
{
    hst_state *s = state;
    px_status st;
    dfxc_buf m;

    hst_load(s);
    dfxc_trace_names(s->trace, info);
    dfxc_buf_init(&m);
    for (size_t i = 0; i < s->n; i++) {
        const hst_span *h = &s->v[i];

        m.len = 0;
        dfxc_buf_puts(&m, "\"name\":");
        dfxc_buf_json_str(&m, px_dfx_host_span_name(h->id));
        dfxc_buf_printf(&m, ",\"cat\":\"host\",\"args\":{\"detail\":%llu,\"unit\":\"%s\"}",
                        (unsigned long long)h->detail, hst_unit(h->id));
        dfxc_trace_add(s->trace, 'X', info->chip, h->producer, dfxc_ns(info, h->t0),
                       dfxc_dur_ns(info, h->t0, h->ticks), m.p ? m.p : "");
    }
    s->oom |= m.oom;
    dfxc_buf_free(&m);
    st = dfxc_trace_release(s->trace, !s->oom);
    s->trace = NULL;
    if (s->oom)
        return px_set_error(PX_ENOMEM, "dfx[hosttrace]: out of memory keeping %zu host spans",
                            s->n);
    return st;
}

static void hst_close(void *state)
{
    hst_state *s = state;

    if (s == NULL)
        return;
    if (s->trace != NULL && dfxc_trace_release(s->trace, 0) != PX_OK)
        PX_LOG_WARN("dfx[hosttrace]: %s", px_last_error());
    dfxc_raw_free(&s->raw);
    free(s->v);
    free(s);
}

const px_dfx_collector_ops px_dfx_hosttrace_ops = {
    .name = "hosttrace",
    .bit = PX_DFX_HOSTTRACE,
    .kinds = 1u << PX_DFXK_HOST,
    .open = hst_open,
    .on_record = hst_on_record,
    .finish = hst_finish,
    .close = hst_close,
};
