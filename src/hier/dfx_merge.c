/*
 * dfx_merge.c - one DFX picture of a level-3 run: the host's trace.json and dfx.json (written
 * into the output directory by the host engine's own DFX) merged with every chip's (written
 * into chips/chip<i>/ by the chip's DFX session) into the directory's trace.json and dfx.json.
 *
 * trace.json. The host's events get pid 0, on a process named "host (L3 orchestration +
 * dispatch)"; chip i's events get pid i + 1, on a process named "chip i (pid P)" (P the chip's
 * process id). Each side's time stamps count from its own start (t0_ticks in its dfx.json);
 * the clock is the same across the processes of one host (the invariant TSC, or
 * CLOCK_MONOTONIC), so a chip's events move onto the host's time base by
 * (t0_chip - t0_host) / ticks_per_ns_host. Flow ids are offset per source so that no two
 * sources share one; every other member is copied as it is. Metadata first, then every event
 * in time order (ties keep the sources' order). The host's process and thread names replace
 * the chips' own "chip N" process names.
 *
 * dfx.json. The host's members in their order ("chip" becomes -1: the host), then "chips":
 * per chip its index, process id, directory and every member of its own dfx.json but the
 * version (collectors with transports and counts included), or the error that left it
 * without files; and "reconciled": every collector of every side reconciled and every chip
 * delivered its files. Formats: docs/formats.md.
 *
 * The files are read with the DFX collectors' JSON reader (src/dfx/collectors/json.h) and
 * written with their buffer helpers, atomically (a temporary name, then rename).
 */
#include "hier/hier_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfx/collectors/json.h"
#include "dfx/collectors/out.h"
#include "util/log.h"

#define MRG_HOST_NAME "host (L3 orchestration + dispatch)"

/* One side of the merge: the host (chip == NULL) or a chip. */
typedef struct mrg_src {
    const px_hier_dfx_chip *chip;
    dfxc_json *dfx;       /* its dfx.json; NULL for a chip without files */
    dfxc_json *trace;     /* its trace.json; NULL when absent */
    int pid;              /* pid in the merged trace */
    int64_t shift_ns;     /* added to every time stamp */
    uint64_t id_base;     /* added to every flow id */
} mrg_src;

/* One event of the merged trace. */
typedef struct mrg_ev {
    const dfxc_json *e;
    int64_t ts;           /* ns on the host's time base; 0 for metadata */
    uint32_t src, idx;
    int meta;
} mrg_ev;

typedef struct mrg {
    const char *dir;
    int nsrc;             /* 1 + chips */
    mrg_src *src;
    mrg_ev *ev;
    size_t nev, cap;
    uint64_t clamped;
} mrg;

/* ---- writing JSON values back ---- */

/* Appends a number in the shortest form that reads back as the same double. */
static void mrg_num(dfxc_buf *b, double v)
{
    char tmp[40];

    if (!isfinite(v)) {
        dfxc_buf_puts(b, "null");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e18) {
        dfxc_buf_printf(b, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    dfxc_buf_puts(b, tmp);
}

static void mrg_value(dfxc_buf *b, const dfxc_json *v);

/* 1 when key is in the NULL-terminated list skip (NULL: none). */
static int mrg_skipped(const char *key, const char *const *skip)
{
    for (int i = 0; skip != NULL && skip[i] != NULL; i++)
        if (strcmp(key, skip[i]) == 0)
            return 1;
    return 0;
}

/* Appends the members of object o (without braces) but those named in skip. */
static void mrg_members(dfxc_buf *b, const dfxc_json *o, const char *const *skip, int first)
{
    for (size_t i = 0; i < o->n; i++) {
        if (mrg_skipped(o->kids[i].key, skip))
            continue;
        dfxc_buf_puts(b, first ? "" : ",");
        dfxc_buf_json_str(b, o->kids[i].key);
        dfxc_buf_puts(b, ":");
        mrg_value(b, &o->kids[i]);
        first = 0;
    }
}

/* Appends any JSON value. */
static void mrg_value(dfxc_buf *b, const dfxc_json *v)
{
    switch (v->type) {
    case DFXC_JNULL:
        dfxc_buf_puts(b, "null");
        break;
    case DFXC_JBOOL:
        dfxc_buf_puts(b, v->num != 0 ? "true" : "false");
        break;
    case DFXC_JNUM:
        mrg_num(b, v->num);
        break;
    case DFXC_JSTR:
        dfxc_buf_json_str(b, v->str);
        break;
    case DFXC_JARR:
        dfxc_buf_puts(b, "[");
        for (size_t i = 0; i < v->n; i++) {
            dfxc_buf_puts(b, i ? "," : "");
            mrg_value(b, &v->kids[i]);
        }
        dfxc_buf_puts(b, "]");
        break;
    case DFXC_JOBJ:
        dfxc_buf_puts(b, "{");
        mrg_members(b, v, NULL, 1);
        dfxc_buf_puts(b, "}");
        break;
    }
}

/* ---- loading the sources ---- */

/* Loads dir/name (dir/chips/chip<i>/name for a chip). Returns PX_OK with *j, PX_ENOENT (no
 * message needed by the caller when optional), or another error with its message. */
static px_status mrg_load(const mrg *m, const mrg_src *s, const char *name, dfxc_json **j)
{
    char path[PX_DFX_OUT_MAX + 64];

    if (s->chip == NULL)
        snprintf(path, sizeof(path), "%s/%s", m->dir, name);
    else
        snprintf(path, sizeof(path), "%s/chips/chip%d/%s", m->dir, s->chip->chip, name);
    *j = NULL;
    return dfxc_json_load(path, j);
}

/* The time shift of chip source s onto the host's time base (both dfx.json loaded). */
static void mrg_shift(mrg_src *s, const dfxc_json *host)
{
    const char *hc = dfxc_json_str(host, "clock", "?"), *cc = dfxc_json_str(s->dfx, "clock", "?");
    double tpn = dfxc_json_num(host, "ticks_per_ns", 1.0);
    double dt = dfxc_json_num(s->dfx, "t0_ticks", 0) - dfxc_json_num(host, "t0_ticks", 0);

    if (strcmp(hc, cc) != 0 || tpn <= 0) {
        PX_LOG_WARN("dfx: chip %d's clock is %s, the host's %s: its trace events keep their "
                    "own time base", s->chip->chip, cc, hc);
        return;
    }
    s->shift_ns = (int64_t)llround(dt / tpn);
}

/* Loads one source's dfx.json (required) and trace.json (when the host has one). */
static px_status mrg_load_src(mrg *m, mrg_src *s)
{
    px_status st = mrg_load(m, s, "dfx.json", &s->dfx);

    if (st != PX_OK)
        return st;
    if (s->chip != NULL)
        mrg_shift(s, m->src[0].dfx);
    if (s->chip != NULL && m->src[0].trace == NULL)
        return PX_OK;
    st = mrg_load(m, s, "trace.json", &s->trace);
    if (st == PX_ENOENT && s->chip == NULL)
        return PX_OK; /* no trace collector was on */
    if (st == PX_OK && dfxc_json_get(s->trace, "traceEvents") == NULL)
        return px_set_error(PX_EINVAL, "dfx: %s trace.json has no traceEvents array",
                            s->chip ? "a chip's" : "the host's");
    return st;
}

/* Loads every source: the host first, then each chip that delivered its files. */
static px_status mrg_load_all(mrg *m)
{
    px_status st = mrg_load_src(m, &m->src[0]);

    for (int i = 1; st == PX_OK && i < m->nsrc; i++)
        if (m->src[i].chip->st == PX_OK)
            st = mrg_load_src(m, &m->src[i]);
    return st;
}

/* ---- trace.json ---- */

/* 1 for the process metadata the merge writes itself. */
static int mrg_own_meta(const dfxc_json *e)
{
    const char *name = dfxc_json_str(e, "name", "");

    return strcmp(name, "process_name") == 0 || strcmp(name, "process_sort_index") == 0;
}

/* Collects the events of source k; returns PX_OK or PX_ENOMEM. */
static px_status mrg_collect(mrg *m, uint32_t k)
{
    mrg_src *s = &m->src[k];
    const dfxc_json *evs = dfxc_json_get(s->trace, "traceEvents");
    const dfxc_json *od = dfxc_json_get(s->trace, "otherData");

    m->clamped += (uint64_t)dfxc_json_num(od, "clamped", 0);
    for (size_t i = 0; evs != NULL && i < evs->n; i++) {
        const dfxc_json *e = &evs->kids[i];
        int meta = strcmp(dfxc_json_str(e, "ph", ""), "M") == 0;
        mrg_ev *v;

        if (e->type != DFXC_JOBJ || (meta && mrg_own_meta(e)))
            continue;
        v = dfxc_push((void **)&m->ev, &m->nev, &m->cap, sizeof(*v));
        if (v == NULL)
            return px_set_error(PX_ENOMEM, "dfx: out of memory merging %zu trace events",
                                m->nev);
        v->e = e;
        v->src = k;
        v->idx = (uint32_t)i;
        v->meta = meta;
        v->ts = meta ? 0 : llround(dfxc_json_num(e, "ts", 0) * 1000.0) + s->shift_ns;
    }
    return PX_OK;
}

/* Offsets every source's flow ids past the previous sources'. */
static void mrg_flow_bases(mrg *m)
{
    uint64_t next = 0;

    for (int k = 0; k < m->nsrc; k++) {
        const dfxc_json *evs = dfxc_json_get(m->src[k].trace, "traceEvents");
        uint64_t top = 0;

        m->src[k].id_base = next;
        for (size_t i = 0; evs != NULL && i < evs->n; i++)
            if (dfxc_json_get(&evs->kids[i], "id") != NULL)
                top = PX_MAX(top, (uint64_t)dfxc_json_num(&evs->kids[i], "id", 0) + 1);
        next += top;
    }
}

/* Metadata first (by source, then file order), then by time, source, file order. */
static int mrg_ev_cmp(const void *pa, const void *pb)
{
    const mrg_ev *a = pa, *b = pb;

    if (a->meta != b->meta)
        return a->meta ? -1 : 1;
    if (!a->meta && a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Appends one event with its pid, time stamps and flow id moved to the merged trace. */
static void mrg_render_ev(const mrg *m, const mrg_ev *v, dfxc_buf *b)
{
    const mrg_src *s = &m->src[v->src];
    int first = 1;

    dfxc_buf_puts(b, "{");
    for (size_t i = 0; i < v->e->n; i++) {
        const dfxc_json *k = &v->e->kids[i];

        dfxc_buf_puts(b, first ? "" : ",");
        first = 0;
        dfxc_buf_json_str(b, k->key);
        dfxc_buf_puts(b, ":");
        if (strcmp(k->key, "pid") == 0)
            dfxc_buf_printf(b, "%d", s->pid);
        else if (strcmp(k->key, "ts") == 0 && !v->meta)
            dfxc_buf_us(b, v->ts);
        else if (strcmp(k->key, "dur") == 0 && k->type == DFXC_JNUM)
            dfxc_buf_us(b, llround(k->num * 1000.0));
        else if (strcmp(k->key, "id") == 0 && k->type == DFXC_JNUM)
            dfxc_buf_printf(b, "%llu", (unsigned long long)((uint64_t)k->num + s->id_base));
        else
            mrg_value(b, k);
    }
    dfxc_buf_puts(b, "}");
}

/* Appends the process name and sort index of every source (",\n" before each but the first
 * entry of the array; *first tracks it). */
static void mrg_processes(const mrg *m, dfxc_buf *b, int *first)
{
    for (int k = 0; k < m->nsrc; k++) {
        const mrg_src *s = &m->src[k];
        char name[64];

        if (s->trace == NULL)
            continue;
        if (s->chip == NULL)
            snprintf(name, sizeof(name), "%s", MRG_HOST_NAME);
        else
            snprintf(name, sizeof(name), "chip %d (pid %d)", s->chip->chip, (int)s->chip->pid);
        dfxc_buf_puts(b, *first ? "" : ",\n");
        dfxc_buf_puts(b, "{\"name\":\"process_name\",\"args\":{\"name\":");
        dfxc_buf_json_str(b, name);
        dfxc_buf_printf(b, "},\"ph\":\"M\",\"pid\":%d,\"tid\":0},\n", s->pid);
        dfxc_buf_printf(b, "{\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d},"
                        "\"ph\":\"M\",\"pid\":%d,\"tid\":0}", s->pid, s->pid);
        *first = 0;
    }
}

/* Appends otherData: the host's, with the clamps summed and the processes listed. */
static void mrg_other(const mrg *m, dfxc_buf *b)
{
    const dfxc_json *od = dfxc_json_get(m->src[0].trace, "otherData");

    dfxc_buf_puts(b, "\"otherData\": {");
    for (size_t i = 0; od != NULL && od->type == DFXC_JOBJ && i < od->n; i++) {
        if (strcmp(od->kids[i].key, "clamped") == 0)
            continue;
        dfxc_buf_json_str(b, od->kids[i].key);
        dfxc_buf_puts(b, ": ");
        mrg_value(b, &od->kids[i]);
        dfxc_buf_puts(b, ", ");
    }
    dfxc_buf_printf(b, "\"clamped\": %llu, \"level\": 3, \"processes\": [",
                    (unsigned long long)m->clamped);
    for (int k = 0, first = 1; k < m->nsrc; k++) {
        const mrg_src *s = &m->src[k];

        if (s->trace == NULL)
            continue;
        dfxc_buf_printf(b, "%s{\"pid\": %d, \"chip\": %d, \"os_pid\": %d, \"shift_us\": ",
                        first ? "" : ", ", s->pid, s->chip ? s->chip->chip : -1,
                        s->chip ? (int)s->chip->pid : (int)getpid());
        dfxc_buf_us(b, s->shift_ns);
        dfxc_buf_puts(b, "}");
        first = 0;
    }
    dfxc_buf_puts(b, "]}}\n");
}

/* Writes the merged trace.json. Returns PX_OK or the error. */
static px_status mrg_trace(mrg *m)
{
    px_status st = PX_OK;
    int first = 1;
    dfxc_buf b;

    mrg_flow_bases(m);
    for (int k = 0; st == PX_OK && k < m->nsrc; k++)
        if (m->src[k].trace != NULL)
            st = mrg_collect(m, (uint32_t)k);
    if (st != PX_OK)
        return st;
    qsort(m->ev, m->nev, sizeof(*m->ev), mrg_ev_cmp);
    dfxc_buf_init(&b);
    dfxc_buf_puts(&b, "{\"displayTimeUnit\": \"ns\",\n\"traceEvents\": [\n");
    mrg_processes(m, &b, &first);
    for (size_t i = 0; i < m->nev; i++) {
        dfxc_buf_puts(&b, first ? "" : ",\n");
        mrg_render_ev(m, &m->ev[i], &b);
        first = 0;
    }
    dfxc_buf_puts(&b, "\n],\n");
    mrg_other(m, &b);
    st = dfxc_buf_write_file(&b, m->dir, "trace.json", "level-3 merge");
    dfxc_buf_free(&b);
    return st;
}

/* ---- dfx.json ---- */

/* 1 when every collector of dfx.json object j reconciled. */
static int mrg_reconciled(const dfxc_json *j)
{
    const dfxc_json *c = dfxc_json_get(j, "collectors");

    for (size_t i = 0; c != NULL && c->type == DFXC_JOBJ && i < c->n; i++) {
        const dfxc_json *r = dfxc_json_get(&c->kids[i], "reconciled");

        if (r == NULL || r->type != DFXC_JBOOL || r->num == 0)
            return 0;
    }
    return c != NULL;
}

/* Appends one chip's entry of "chips"; clears *ok when it did not reconcile. */
static void mrg_chip_entry(const mrg_src *s, dfxc_buf *b, int *ok)
{
    dfxc_buf_printf(b, "{\"chip\": %d, \"pid\": %d, \"trace_pid\": %d, \"dir\": "
                    "\"chips/chip%d\", \"shift_us\": ", s->chip->chip, (int)s->chip->pid,
                    s->pid, s->chip->chip);
    dfxc_buf_us(b, s->shift_ns);
    if (s->dfx == NULL) {
        dfxc_buf_puts(b, ", \"error\": ");
        dfxc_buf_json_str(b, s->chip->msg);
        *ok = 0;
    } else {
        static const char *const given[] = {"version", "chip", NULL};

        dfxc_buf_puts(b, ",");
        mrg_members(b, s->dfx, given, 1); /* the chip's own index is "chip" already */
        *ok &= mrg_reconciled(s->dfx);
    }
    dfxc_buf_puts(b, "}");
}

/* Writes the merged dfx.json. Returns PX_OK or the error. */
static px_status mrg_dfx(const mrg *m)
{
    const dfxc_json *host = m->src[0].dfx;
    int ok = mrg_reconciled(host);
    px_status st;
    dfxc_buf b;

    dfxc_buf_init(&b);
    dfxc_buf_puts(&b, "{");
    for (size_t i = 0; i < host->n; i++) {
        dfxc_buf_puts(&b, i ? ",\n " : "");
        dfxc_buf_json_str(&b, host->kids[i].key);
        dfxc_buf_puts(&b, ": ");
        if (strcmp(host->kids[i].key, "chip") == 0)
            dfxc_buf_puts(&b, "-1");
        else
            mrg_value(&b, &host->kids[i]);
    }
    dfxc_buf_puts(&b, ",\n \"level\": 3,\n \"chips\": [");
    for (int k = 1; k < m->nsrc; k++) {
        dfxc_buf_puts(&b, k > 1 ? ",\n  " : "\n  ");
        mrg_chip_entry(&m->src[k], &b, &ok);
    }
    dfxc_buf_printf(&b, "],\n \"reconciled\": %s}\n", ok ? "true" : "false");
    st = dfxc_buf_write_file(&b, m->dir, "dfx.json", "level-3 merge");
    dfxc_buf_free(&b);
    return st;
}

/* ---- the merge ---- */

static void mrg_free(mrg *m)
{
    for (int k = 0; m->src != NULL && k < m->nsrc; k++) {
        dfxc_json_free(m->src[k].dfx);
        dfxc_json_free(m->src[k].trace);
    }
    free(m->src);
    free(m->ev);
}

/* Prefixes the current error with what failed. */
static void mrg_fail(px_status st, const char *dir)
{
    char msg[1024];

    snprintf(msg, sizeof(msg), "%s", px_last_error());
    px_set_error(st, "dfx: merging the level-3 outputs in %s failed: %s", dir, msg);
}

px_status px_hier_dfx_merge_files(const char *dir, int nchips, const px_hier_dfx_chip *chips)
{
    mrg m = {.dir = dir, .nsrc = nchips + 1};
    px_status st;

    m.src = calloc((size_t)m.nsrc, sizeof(*m.src));
    if (m.src == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory merging %d chips", nchips);
    for (int i = 0; i < nchips; i++) {
        m.src[i + 1].chip = &chips[i];
        m.src[i + 1].pid = i + 1;
    }
    st = mrg_load_all(&m);
    if (st == PX_OK && m.src[0].trace != NULL)
        st = mrg_trace(&m);
    if (st == PX_OK)
        st = mrg_dfx(&m);
    if (st == PX_OK)
        PX_LOG_INFO("dfx: merged the host's and %d chips' outputs into %s/trace.json and "
                    "dfx.json", nchips, dir);
    else
        mrg_fail(st, dir);
    mrg_free(&m);
    return st;
}
