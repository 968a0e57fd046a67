/*
 * load.c - loading a merge's sources: each one's dfx.json (its top-level members) and
 * trace.json (split into its event lines, each checked to be in the layout plexus writes,
 * with its time stamp, flow id and task id noted), and at level 3 a chip's time shift onto
 * the host's time base: the clock is the same across the processes of one host (the
 * invariant TSC, or CLOCK_MONOTONIC), so a chip's events move by (t0_chip - t0_host) /
 * ticks_per_ns_host.
 */
#include "dfx/merge/merge_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plexus/dfx.h>

#include "util/file.h"
#include "util/log.h"
#include "util/util.h"

/* The path of s's file name (in m's directory, or the source's directory there) into path. */
static void mrg_path(const mrg *m, const mrg_src *s, const char *name, char *path, size_t n)
{
    if (s->in->dir[0] == '\0')
        snprintf(path, n, "%s/%s", m->dir, name);
    else
        snprintf(path, n, "%s/%s/%s", m->dir, s->in->dir, name);
}

/* "dfx: PATH" of s's dfx.json, for the reader's messages, into what (n bytes); returns it. */
static const char *mrg_what(const mrg *m, const mrg_src *s, char *what, size_t n)
{
    memcpy(what, "dfx: ", 6);
    mrg_path(m, s, "dfx.json", what + 5, n - 5);
    return what;
}

/* Reads s's file name whole. PX_OK, PX_ENOENT or PX_EIO. */
static px_status mrg_read(const mrg *m, const mrg_src *s, const char *name, char **text,
                          size_t *len)
{
    char path[PX_DFX_OUT_MAX + 128];
    px_status st;

    mrg_path(m, s, name, path, sizeof(path));
    if ((st = util_file_read(path, "dfx", text, len)) == PX_ENOENT)
        return px_set_error(PX_ENOENT, "dfx: %s does not exist", path);
    return st;
}

/* The time shift of chip source s onto the host's time base (both dfx.json loaded). */
static void mrg_shift(mrg_src *s, const mrg_obj *host)
{
    double tpn = mrg_num(host, "ticks_per_ns", 1.0);
    double dt = mrg_num(&s->dfx, "t0_ticks", 0) - mrg_num(host, "t0_ticks", 0);
    mrg_str hc = mrg_get(host, "clock"), cc = mrg_get(&s->dfx, "clock");

    if (hc.n != cc.n || memcmp(hc.p, cc.p, hc.n) != 0 || tpn <= 0) {
        PX_LOG_WARN("dfx: chip %d's clock is %.*s, the host's %.*s: its trace events keep "
                    "their own time base", s->chip->index, (int)cc.n, cc.p, (int)hc.n, hc.p);
        return;
    }
    s->shift_ns = (int64_t)llround(dt / tpn);
}

/* Checks one event line and notes its time stamp and flow id. Returns PX_OK or EINVAL. */
static px_status mrg_line_add(mrg_src *s, const char *p, size_t n, size_t no)
{
    const char *end = p + n, *tail = mrg_find(p, end, ",\"ph\":\"", 1), *ts, *id, *after;
    const char *pid = tail ? mrg_find(tail, end, ",\"pid\":", 0) : NULL;
    mrg_line *l;

    if (n < 2 || p[0] != '{' || p[n - 1] != '}' || tail == NULL || tail + 8 > end ||
        pid == NULL || mrg_find(pid + 1, end, ",\"tid\":", 0) == NULL)
        return px_set_error(PX_EINVAL, "dfx: event %zu of a trace.json is not an event line "
                            "of this plexus's writer (\"ph\", \"pid\", \"tid\" last)", no);
    l = dfxc_push((void **)&s->lines, &s->nlines, &s->cap, sizeof(*l));
    if (l == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of memory merging trace events");
    *l = (mrg_line){p, n, 0, tail[7] == 'M'};
    ts = mrg_find(tail, end, ",\"ts\":", 0);
    if (!l->meta && (ts == NULL || mrg_parse_us(ts + 6, end, &l->ts, &after) != 0))
        return px_set_error(PX_EINVAL, "dfx: event %zu of a trace.json has no time stamp", no);
    id = (tail[7] == 's' || tail[7] == 'f') ? mrg_find(p, tail, "\"cat\":\"dep\",\"id\":", 0)
                                            : NULL;
    if (id != NULL)
        s->id_top = PX_MAX(s->id_top, strtoull(id + 17, NULL, 10) + 1);
    id = tail[7] == 'X' ? mrg_find(p, tail, "\"cat\":\"task\",\"args\":{\"task\":", 0) : NULL;
    if (id != NULL)
        s->task_top = PX_MAX(s->task_top, strtoull(id + 28, NULL, 10) + 1);
    return PX_OK;
}

/* Splits a source's trace.json into its event lines and its otherData line. */
static px_status mrg_lines(mrg_src *s)
{
    static const char head[] = "{\"displayTimeUnit\": \"ns\",\n\"traceEvents\": [\n";
    const char *p = s->trace_text, *end = s->trace_text + s->trace_len;
    px_status st = PX_OK;

    if (s->trace_len < sizeof(head) - 1 || memcmp(p, head, sizeof(head) - 1) != 0)
        return px_set_error(PX_EINVAL, "dfx: %s trace.json does not start as this plexus "
                            "writes it", s->chip ? "a chip's" : "the host's");
    p += sizeof(head) - 1;
    while (p < end && st == PX_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

        if (n >= 2 && p[0] == ']' && p[1] == ',') {
            s->other = (mrg_str){nl ? nl + 1 : end, 0};
            s->other.n = (size_t)(end - s->other.p);
            return PX_OK;
        }
        if (n > 0 && p[n - 1] == ',')
            n--;
        if (n > 0)
            st = mrg_line_add(s, p, n, s->nlines);
        p = nl ? nl + 1 : end;
    }
    return st != PX_OK ? st : px_set_error(PX_EINVAL, "dfx: a trace.json ends before its "
                                           "otherData");
}

/* The number after "key": in the otherData line of s, or 0. */
static uint64_t mrg_other_num(const mrg_src *s, const char *key)
{
    char needle[64];
    const char *at;

    snprintf(needle, sizeof(needle), "\"%s\": ", key);
    at = mrg_find(s->other.p, s->other.p + s->other.n, needle, 0);
    return at ? strtoull(at + strlen(needle), NULL, 10) : 0;
}

/* Loads one source's dfx.json (required) and trace.json (when the host has one). */
px_status mrg_load_src(mrg *m, mrg_src *s)
{
    char what[PX_DFX_OUT_MAX + 160];
    px_status st = mrg_read(m, s, "dfx.json", &s->dfx_text, &s->dfx_len);

    if (st == PX_OK)
        st = mrg_obj_parse(s->dfx_text, s->dfx_len, mrg_what(m, s, what, sizeof(what)),
                           &s->dfx);
    if (st != PX_OK)
        return st;
    if (s->chip != NULL)
        mrg_shift(s, &m->src[0].dfx);
    if (s->chip != NULL && m->src[0].trace_text == NULL)
        return PX_OK;
    st = mrg_read(m, s, "trace.json", &s->trace_text, &s->trace_len);
    if (st == PX_ENOENT && s->chip == NULL) {
        px_clear_error();
        return PX_OK; /* no trace collector was on */
    }
    if (st == PX_OK)
        st = mrg_lines(s);
    if (st == PX_OK)
        m->clamped += mrg_other_num(s, "clamped");
    return st;
}

/* Loads every source: the host first, then each chip that delivered its files. */
px_status mrg_load_all(mrg *m)
{
    px_status st = mrg_load_src(m, &m->src[0]);

    for (int i = 1; st == PX_OK && i < m->nsrc; i++)
        if (m->src[i].chip->st == PX_OK)
            st = mrg_load_src(m, &m->src[i]);
    return st;
}
