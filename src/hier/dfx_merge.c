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
 * No JSON tree is built: the files are plexus's own (src/dfx/collectors/trace.c writes one
 * event per line, metadata first, then in time order, each ending in the fixed members
 * "ph", "pid", "tid", "ts", "dur"; finish.c writes dfx.json as one object of members). The
 * merge takes each source's lines as they are, rewrites pid, ts and a flow's id in place and
 * merges the sources' time-ordered lines (one pass, k sources compared per line); dfx.json's
 * top-level members are found by a scanner that only skips strings and brackets. Time and
 * memory are linear in the events (the files' bytes and one pointer per line). Written with
 * the collectors' buffer helpers, atomically (a temporary name, then rename).
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfx/collectors/collectors.h"
#include "dfx/collectors/model.h"
#include "dfx/collectors/out.h"
#include "util/file.h"
#include "util/log.h"

#define MRG_HOST_NAME "host (L3 orchestration + dispatch)"
#define MRG_MAX_MEMBERS 32

/* A span of text. */
typedef struct mrg_str {
    const char *p;
    size_t n;
} mrg_str;

/* dfx.json's top-level members, as spans of its text. */
typedef struct mrg_obj {
    int n;
    mrg_str key[MRG_MAX_MEMBERS];   /* without quotes */
    mrg_str value[MRG_MAX_MEMBERS]; /* the value's text */
} mrg_obj;

/* One event line of a source's trace.json. */
typedef struct mrg_line {
    const char *p;
    size_t n;       /* without the separating ",", the newline */
    int64_t ts;     /* ns on the source's own time base; 0 for metadata */
    int meta;
} mrg_line;

/* One side of the merge: the host (chip == NULL) or a chip. */
typedef struct mrg_src {
    const px_hier_dfx_chip *chip;
    const hier_dfx_host *host; /* level 4: a host's level-3 outputs (chip NULL) */
    int pid_base;         /* level 4: added to the host's own pids */
    char *dfx_text;       /* its dfx.json; NULL for a chip without files */
    size_t dfx_len;
    mrg_obj dfx;
    char *trace_text;     /* its trace.json; NULL when absent */
    size_t trace_len;
    mrg_line *lines;      /* the traceEvents lines, in file order */
    size_t nlines, cap;
    mrg_str other;        /* the otherData line */
    int pid;              /* pid in the merged trace */
    int64_t shift_ns;     /* added to every time stamp */
    double scale;         /* level 4, with a clock rate: ts -> scale * ts + shift (0: none) */
    double shift;         /* ... in ns, unrounded (shift_ns is it rounded) */
    uint64_t id_base;     /* added to every flow id */
    uint64_t id_top;      /* largest flow id + 1 */
    uint64_t task_base;   /* added to its task ids in the merged report (ids repeat across
                           * processes; the merged trace.json keeps each process's own) */
    uint64_t task_top;    /* largest task id + 1 */
    char **owned;         /* lines the merge wrote itself (annotated or added), nowned */
    size_t nowned, cap_owned;
} mrg_src;

typedef struct mrg {
    const char *dir;
    const px_hier *h;     /* its hooks add members to dfx.json; NULL: none */
    int level;            /* 3: a host and its chips; 4: the hosts of an MPI job */
    int nsrc;             /* 1 + chips, or the hosts */
    mrg_src *src;
    uint64_t clamped;
} mrg;

/* ---- reading plexus's own text ---- */

/* Returns the end of the JSON string starting at s (after its closing quote), or NULL. */
static const char *mrg_skip_string(const char *s, const char *end)
{
    for (s++; s < end; s++) {
        if (*s == '\\')
            s++;
        else if (*s == '"')
            return s + 1;
    }
    return NULL;
}

/* Returns the end of the JSON value at s (a string, a bracketed value or a scalar). */
static const char *mrg_skip_value(const char *s, const char *end)
{
    int depth = 0;

    while (s < end) {
        if (*s == '"') {
            if ((s = mrg_skip_string(s, end)) == NULL)
                return NULL;
            if (depth == 0)
                return s;
            continue;
        }
        if (*s == '{' || *s == '[') {
            depth++;
        } else if (*s == '}' || *s == ']') {
            if (depth == 0)
                return s; /* the end of the enclosing object */
            if (--depth == 0)
                return s + 1;
        } else if (depth == 0 && (*s == ',' || *s == '\n')) {
            return s;
        }
        s++;
    }
    return depth == 0 ? s : NULL;
}

static const char *mrg_skip_space(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r'))
        s++;
    return s;
}

/* Finds the top-level members of the object in text[0..n). Returns PX_OK or PX_EINVAL. */
static px_status mrg_obj_scan(const char *text, size_t n, const char *what, mrg_obj *o)
{
    const char *s = mrg_skip_space(text, text + n), *end = text + n;

    o->n = 0;
    if (s == end || *s++ != '{')
        return px_set_error(PX_EINVAL, "dfx: %s is not a JSON object", what);
    for (;;) {
        const char *k, *v;

        s = mrg_skip_space(s, end);
        if (s < end && *s == '}')
            return PX_OK;
        if (s == end || *s != '"' || (k = mrg_skip_string(s, end)) == NULL ||
            o->n == MRG_MAX_MEMBERS)
            break;
        o->key[o->n] = (mrg_str){s + 1, (size_t)(k - s - 2)};
        s = mrg_skip_space(k, end);
        if (s == end || *s++ != ':')
            break;
        s = mrg_skip_space(s, end);
        if ((v = mrg_skip_value(s, end)) == NULL || v == s)
            break;
        o->value[o->n++] = (mrg_str){s, (size_t)(v - s)};
        s = mrg_skip_space(v, end);
        if (s < end && *s == ',')
            s++;
    }
    return px_set_error(PX_EINVAL, "dfx: %s: member %d is not \"key\": value (not a dfx.json "
                        "written by this plexus?)", what, o->n);
}

/* The value of member key, or a span of n 0. */
static mrg_str mrg_get(const mrg_obj *o, const char *key)
{
    for (int i = 0; i < o->n; i++)
        if (o->key[i].n == strlen(key) && memcmp(o->key[i].p, key, o->key[i].n) == 0)
            return o->value[i];
    return (mrg_str){NULL, 0};
}

/* The number value of key, or def. */
static double mrg_num(const mrg_obj *o, const char *key, double def)
{
    mrg_str v = mrg_get(o, key);
    char tmp[64], *e;
    double d;

    if (v.n == 0 || v.n >= sizeof(tmp))
        return def;
    memcpy(tmp, v.p, v.n);
    tmp[v.n] = '\0';
    d = strtod(tmp, &e);
    return e == tmp + v.n ? d : def;
}

/* 1 when the string value of key is s. */
static int mrg_str_is(const mrg_obj *o, const char *key, const char *s)
{
    mrg_str v = mrg_get(o, key);

    return v.n == strlen(s) + 2 && v.p[0] == '"' && memcmp(v.p + 1, s, v.n - 2) == 0;
}

/* Parses microseconds with up to three decimals (as dfxc_buf_us writes them) into ns. */
static int mrg_parse_us(const char *s, const char *end, int64_t *ns, const char **after)
{
    int neg = s < end && *s == '-', digits = 0;
    int64_t v = 0, frac = 0;

    s += neg;
    for (; s < end && *s >= '0' && *s <= '9' && v < INT64_MAX / 10000; s++, digits++)
        v = v * 10 + (*s - '0');
    if (digits == 0)
        return -1;
    if (s < end && *s == '.') {
        int f = 0;

        for (s++; s < end && *s >= '0' && *s <= '9'; s++)
            if (f++ < 3)
                frac = frac * 10 + (*s - '0');
        for (; f < 3; f++)
            frac *= 10;
    }
    *ns = (neg ? -1 : 1) * (v * 1000 + frac);
    *after = s;
    return 0;
}

/* Finds needle in [s, end), the last occurrence when last; NULL when absent. */
static const char *mrg_find(const char *s, const char *end, const char *needle, int last)
{
    size_t n = strlen(needle);
    const char *hit = NULL;

    for (; s + n <= end; s++)
        if (memcmp(s, needle, n) == 0) {
            hit = s;
            if (!last)
                return hit;
        }
    return hit;
}

/* Reads dir/name (dir/chips/chip<i>/name for a chip) whole. PX_OK, PX_ENOENT or PX_EIO. */
static px_status mrg_read(const mrg *m, const mrg_src *s, const char *name, char **text,
                          size_t *len)
{
    char path[PX_DFX_OUT_MAX + 64];
    px_status st;

    if (s->host != NULL)
        snprintf(path, sizeof(path), "%s/hosts/host%d/%s", m->dir, s->host->host, name);
    else if (s->chip == NULL)
        snprintf(path, sizeof(path), "%s/%s", m->dir, name);
    else
        snprintf(path, sizeof(path), "%s/chips/chip%d/%s", m->dir, s->chip->chip, name);
    if ((st = util_file_read(path, "dfx", text, len)) == PX_ENOENT)
        return px_set_error(PX_ENOENT, "dfx: %s does not exist", path);
    return st;
}

/* ---- loading the sources ---- */

/* The time shift of chip source s onto the host's time base (both dfx.json loaded). */
static void mrg_shift(mrg_src *s, const mrg_obj *host)
{
    double tpn = mrg_num(host, "ticks_per_ns", 1.0);
    double dt = mrg_num(&s->dfx, "t0_ticks", 0) - mrg_num(host, "t0_ticks", 0);
    mrg_str hc = mrg_get(host, "clock"), cc = mrg_get(&s->dfx, "clock");

    if (hc.n != cc.n || memcmp(hc.p, cc.p, hc.n) != 0 || tpn <= 0) {
        PX_LOG_WARN("dfx: chip %d's clock is %.*s, the host's %.*s: its trace events keep "
                    "their own time base", s->chip->chip, (int)cc.n, cc.p, (int)hc.n, hc.p);
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
static px_status mrg_load_src(mrg *m, mrg_src *s)
{
    px_status st = mrg_read(m, s, "dfx.json", &s->dfx_text, &s->dfx_len);

    if (st == PX_OK)
        st = mrg_obj_scan(s->dfx_text, s->dfx_len, "dfx.json", &s->dfx);
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
static int mrg_own_meta(const mrg_line *l)
{
    return l->meta && (strncmp(l->p, "{\"name\":\"process_name\",", 23) == 0 ||
                       strncmp(l->p, "{\"name\":\"process_sort_index\",", 29) == 0);
}

/* The pid of line l in the merge: the source's, or at level 4 the host's own plus its base. */
static int mrg_pid(const mrg_src *s, const mrg_line *l)
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
static uint64_t mrg_task(const mrg_src *s, const mrg_line *l, uint64_t id)
{
    return s->host != NULL ? (uint64_t)mrg_pid(s, l) << 40 | id : id + s->task_base;
}

/* Time stamp ts (ns) of source s on the merge's time base. */
static int64_t mrg_map(const mrg_src *s, int64_t ts)
{
    return s->scale != 0 ? (int64_t)llround(s->scale * (double)ts + s->shift)
                         : ts + s->shift_ns;
}

/* A duration of source s in the merge's ns (a clock rate scales it). */
static int64_t mrg_dur(const mrg_src *s, int64_t d)
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
        dfxc_buf_printf(b, "\"host\":%d,", s->host->host);
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
        char name[64];

        if (s->trace_text == NULL)
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

static void mrg_unescape(const char *s, const char *end, char *out, size_t n);
static void mrg_host_calls(const mrg_src *s, dfxc_model *model);

/* Level 4: a host's process metadata line l (its level-3 merge's process name or sort
 * index) under the merge's pid, the name prefixed with the host; into b, or, with model,
 * the process's name into the report's model. */
static void mrg_host_meta(const mrg_src *s, const mrg_line *l, dfxc_buf *b, dfxc_model *model)
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
    snprintf(full, sizeof(full), "host %d (%s): %s", s->host->host, s->host->id, name);
    if (model != NULL) {
        dfxc_model_add_process(model, pid, full);
        return;
    }
    dfxc_buf_puts(b, "{\"name\":\"process_name\",\"args\":{\"name\":");
    dfxc_buf_json_str(b, full);
    dfxc_buf_printf(b, "},\"ph\":\"M\",\"pid\":%d,\"tid\":0}", pid);
}

/* ---- report.html of the merged run ---- */

/*
 * Copies the JSON string starting at s (at its opening quote) into out (n bytes), decoding
 * the escapes plexus writes (\" \\ \/ \n \t \r \b \f and \u00XX); others become '?'.
 */
static void mrg_unescape(const char *s, const char *end, char *out, size_t n)
{
    size_t o = 0;

    for (s++; s < end && *s != '"' && o + 1 < n; s++) {
        char c = *s;

        if (c == '\\' && s + 1 < end) {
            c = *++s;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'r' || c == 'b' || c == 'f')
                c = ' ';
            else if (c == 'u' && s + 4 < end && s[1] == '0' && s[2] == '0') {
                char hex[3] = {s[3], s[4], 0};

                c = (char)strtol(hex, NULL, 16);
                s += 4;
            } else if (c != '"' && c != '\\' && c != '/')
                c = '?';
        }
        out[o++] = c;
    }
    out[o] = '\0';
}

/* The unsigned number after needle in [p, end), or -1 when absent. */
static int64_t mrg_after_num(const char *p, const char *end, const char *needle)
{
    const char *at = mrg_find(p, end, needle, 0);

    return at ? strtoll(at + strlen(needle), NULL, 10) : -1;
}

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
 * report's model (h's log of the run's calls; h NULL: none). Ids are renumbered as the files
 * do: a host task from the host run's first task, a chip's from its session's first task (the
 * first task of the chip's first call in the run), then offset by the source's task_base.
 */
static void mrg_link_calls(const mrg *m, const px_hier *h, dfxc_model *model)
{
    px_task_id host0 = h != NULL ? h->w->orch.first_id : 0;

    for (int k = 1; h != NULL && k < m->nsrc; k++) {
        const mrg_src *s = &m->src[k];
        uint64_t chip0 = UINT64_MAX;

        if (s->trace_text == NULL)
            continue;
        for (size_t i = 0; i < h->ndfx_calls; i++)
            if (h->dfx_calls[i].chip == s->chip->chip && h->dfx_calls[i].host_task >= host0)
                chip0 = PX_MIN(chip0, h->dfx_calls[i].first_task);
        for (size_t i = 0; i < h->ndfx_calls; i++) {
            const px_hier_dfx_call *c = &h->dfx_calls[i];

            if (c->chip != s->chip->chip || c->host_task < host0)
                continue;
            for (uint64_t t = 0; t < c->ntasks; t++)
                dfxc_model_add_inner(model, c->host_task - host0 + m->src[0].task_base,
                                     c->first_task - chip0 + t + s->task_base);
        }
    }
}

/*
 * Writes report.html of the whole level-3 run over the host's own (which the host's DFX wrote
 * before the merge): every process's tasks, one group of rows per process, task ids made
 * unique by offsetting each chip's past the sources before it, each host task's chip tasks
 * its inner tasks (the critical path runs through them). Returns PX_OK or the error.
 */
static px_status mrg_report(mrg *m)
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
            snprintf(name, sizeof(name), "host %d (%.40s)", s->host->host, s->host->id);
            dfxc_model_add_host(&model, s->host->host, s->pid_base, name);
            for (size_t i = 0; i < s->nlines && s->lines[i].meta; i++)
                if (mrg_own_meta(&s->lines[i]))
                    mrg_host_meta(s, &s->lines[i], NULL, &model);
            for (size_t i = 0; i < s->nlines; i++)
                if (!mrg_own_meta(&s->lines[i]))
                    mrg_model_line(s, &s->lines[i], &model);
            mrg_host_calls(s, &model);
            continue;
        }
        if (s->chip == NULL)
            snprintf(name, sizeof(name), "%s", MRG_HOST_NAME);
        else
            snprintf(name, sizeof(name), "chip %d (pid %d)", s->chip->chip, (int)s->chip->pid);
        dfxc_model_add_process(&model, s->pid, name);
        for (size_t i = 0; i < s->nlines; i++)
            if (!mrg_own_meta(&s->lines[i]))
                mrg_model_line(s, &s->lines[i], &model);
    }
    mrg_link_calls(m, m->h, &model);
    st = px_dfx_report_write(m->dir, &model);
    dfxc_model_free(&model);
    return st;
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
                            first ? "" : ", ", m->src[k].host->host, m->src[k].pid_base);
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

/* ---- dfx.json ---- */

/* The first task id of chip s's session in the run's call log (see mrg_link_calls). */
static uint64_t mrg_chip0(const px_hier *h, int chip, px_task_id host0)
{
    uint64_t chip0 = UINT64_MAX;

    for (size_t i = 0; i < h->ndfx_calls; i++)
        if (h->dfx_calls[i].chip == chip && h->dfx_calls[i].host_task >= host0)
            chip0 = PX_MIN(chip0, h->dfx_calls[i].first_task);
    return chip0;
}

/* Appends "calls": each chip call of the run as [host task, chip, first chip task, tasks],
 * in the ids of the trace (each process's own), so that a level-4 merge can follow each host
 * task into the chip tasks it ran as the level-3 report does. */
static void mrg_calls_json(const mrg *m, dfxc_buf *b)
{
    px_task_id host0 = m->h != NULL ? m->h->w->orch.first_id : 0;
    int first = 1;

    dfxc_buf_puts(b, ",\n \"calls\": [");
    for (int k = 1; m->h != NULL && k < m->nsrc; k++) {
        const mrg_src *s = &m->src[k];
        uint64_t chip0;

        if (s->trace_text == NULL)
            continue;
        chip0 = mrg_chip0(m->h, s->chip->chip, host0);
        for (size_t i = 0; i < m->h->ndfx_calls; i++) {
            const px_hier_dfx_call *c = &m->h->dfx_calls[i];

            if (c->chip != s->chip->chip || c->host_task < host0)
                continue;
            dfxc_buf_printf(b, "%s[%llu, %d, %llu, %llu]", first ? "" : ", ",
                            (unsigned long long)(c->host_task - host0), c->chip,
                            (unsigned long long)(c->first_task - chip0),
                            (unsigned long long)c->ntasks);
            first = 0;
        }
    }
    dfxc_buf_puts(b, "]");
}

/* Level 4: host source s's "calls" (its level-3 dfx.json) as inner tasks in the report. */
static void mrg_host_calls(const mrg_src *s, dfxc_model *model)
{
    mrg_str v = mrg_get(&s->dfx, "calls");
    const char *p = v.p, *end = v.p + v.n;

    while (p != NULL && p < end && (p = memchr(p, '[', (size_t)(end - p))) != NULL) {
        unsigned long long host, first, n;
        int chip;

        if (sscanf(p, "[%llu, %d, %llu, %llu]", &host, &chip, &first, &n) == 4 && chip >= 0 &&
            chip < HIER_DFX_HOST_PIDS - 1)
            for (unsigned long long t = 0; t < n && t < (1ull << 32); t++)
                dfxc_model_add_inner(model, (uint64_t)s->pid_base << 40 | host,
                                     (uint64_t)(s->pid_base + chip + 1) << 40 | (first + t));
        p++;
    }
}

/* 1 when every collector of dfx.json o reconciled (each says "reconciled": true). */
static int mrg_reconciled(const mrg_obj *o)
{
    mrg_str c = mrg_get(o, "collectors");
    mrg_obj cols;

    if (c.n == 0 || mrg_obj_scan(c.p, c.n, "dfx.json collectors", &cols) != PX_OK)
        return 0;
    for (int i = 0; i < cols.n; i++) {
        mrg_obj col;

        if (mrg_obj_scan(cols.value[i].p, cols.value[i].n, "a dfx.json collector", &col) !=
                PX_OK ||
            mrg_get(&col, "reconciled").n != 4 ||
            memcmp(mrg_get(&col, "reconciled").p, "true", 4) != 0)
            return 0;
    }
    return 1;
}

/* Appends the members of o (as "key": value) but version and chip. */
static void mrg_members(dfxc_buf *b, const mrg_obj *o)
{
    for (int i = 0; i < o->n; i++) {
        if ((o->key[i].n == 7 && memcmp(o->key[i].p, "version", 7) == 0) ||
            (o->key[i].n == 4 && memcmp(o->key[i].p, "chip", 4) == 0))
            continue;
        dfxc_buf_puts(b, ", \"");
        dfxc_buf_put(b, o->key[i].p, o->key[i].n);
        dfxc_buf_puts(b, "\": ");
        dfxc_buf_put(b, o->value[i].p, o->value[i].n);
    }
}

/* Appends one chip's entry of "chips"; clears *ok when it did not reconcile. */
static void mrg_chip_entry(const mrg_src *s, dfxc_buf *b, int *ok)
{
    dfxc_buf_printf(b, "{\"chip\": %d, \"pid\": %d, \"trace_pid\": %d, \"dir\": "
                    "\"chips/chip%d\", \"shift_us\": ", s->chip->chip, (int)s->chip->pid,
                    s->pid, s->chip->chip);
    dfxc_buf_us(b, s->shift_ns);
    if (s->dfx_text == NULL) {
        dfxc_buf_puts(b, ", \"error\": ");
        dfxc_buf_json_str(b, s->chip->msg);
        *ok = 0;
    } else {
        mrg_members(b, &s->dfx); /* the chip's own index is "chip" already */
        *ok &= mrg_reconciled(&s->dfx);
    }
    dfxc_buf_puts(b, "}");
}

/* Writes the merged dfx.json. Returns PX_OK or the error. */
static px_status mrg_dfx(const mrg *m)
{
    const mrg_obj *host = &m->src[0].dfx;
    int ok = mrg_reconciled(host);
    px_status st;
    dfxc_buf b;

    if (!mrg_str_is(host, "clock", "tsc") && !mrg_str_is(host, "clock", "monotonic"))
        return px_set_error(PX_EINVAL, "dfx: the host's dfx.json names no clock");
    dfxc_buf_init(&b);
    dfxc_buf_puts(&b, "{");
    for (int i = 0; i < host->n; i++) {
        dfxc_buf_puts(&b, i ? ",\n \"" : "\"");
        dfxc_buf_put(&b, host->key[i].p, host->key[i].n);
        dfxc_buf_puts(&b, "\": ");
        if (host->key[i].n == 4 && memcmp(host->key[i].p, "chip", 4) == 0)
            dfxc_buf_puts(&b, "-1");
        else
            dfxc_buf_put(&b, host->value[i].p, host->value[i].n);
    }
    dfxc_buf_puts(&b, ",\n \"level\": 3,\n \"chips\": [");
    for (int k = 1; k < m->nsrc; k++) {
        dfxc_buf_puts(&b, k > 1 ? ",\n  " : "\n  ");
        mrg_chip_entry(&m->src[k], &b, &ok);
    }
    dfxc_buf_puts(&b, "],\n \"chips_missing\": [");
    for (int k = 1, first = 1; k < m->nsrc; k++) {
        if (m->src[k].chip->st == PX_OK)
            continue;
        dfxc_buf_printf(&b, "%s%d", first ? "" : ", ", m->src[k].chip->chip);
        first = 0;
    }
    dfxc_buf_puts(&b, "]");
    mrg_calls_json(m, &b);
    for (int i = 0; m->h != NULL && i < m->h->nhooks; i++)
        if (m->h->hooks[i].hooks->dfx_json != NULL)
            m->h->hooks[i].hooks->dfx_json(m->h->hooks[i].arg, &b);
    dfxc_buf_printf(&b, ",\n \"reconciled\": %s}\n", ok ? "true" : "false");
    st = dfxc_buf_write_file(&b, m->dir, "dfx.json", "level-3 merge");
    dfxc_buf_free(&b);
    return st;
}

/* ---- the merge ---- */

static void mrg_free(mrg *m)
{
    for (int k = 0; m->src != NULL && k < m->nsrc; k++) {
        free(m->src[k].dfx_text);
        free(m->src[k].trace_text);
        free(m->src[k].lines);
        for (size_t i = 0; i < m->src[k].nowned; i++)
            free(m->src[k].owned[i]);
        free(m->src[k].owned);
    }
    free(m->src);
}

/* ---- what the merge adds: why a chip was excluded, the layers' own slices ---- */

/* Keeps text b (its bytes, copied) as a line of s owned by the merge; NULL when out of
 * memory. */
static char *mrg_own(mrg_src *s, const dfxc_buf *b)
{
    char *p = b->oom ? NULL : malloc(b->len + 1), **slot;

    if (p == NULL)
        return NULL;
    memcpy(p, b->p, b->len);
    p[b->len] = '\0';
    if ((slot = dfxc_push((void **)&s->owned, &s->nowned, &s->cap_owned, sizeof(*slot))) ==
        NULL) {
        free(p);
        return NULL;
    }
    return *slot = p;
}

/* Why chip c is gone, in the death watch's words (h's), or NULL when it is not. */
static const char *mrg_death(const px_hier *h, int c)
{
    return h != NULL && c >= 0 && c < h->nchips && h->procs[c].dead ? h->procs[c].death : NULL;
}

/*
 * A chip's comm span naming excluded chips (a kernel-side agreement: "excluded":[{"rank":r,
 * "chip":c},...]) gets each chip's death next to it ("why"), which only the parent knows:
 * line l is replaced by an annotated copy owned by s.
 */
static void mrg_annotate(const mrg *m, mrg_src *s, mrg_line *l)
{
    static const char key[] = "\"excluded\":[{";
    const char *end = l->p + l->n, *at = mrg_find(l->p, end, key, 0), *p, *close;
    dfxc_buf b;
    char *line;

    if (at == NULL || (close = memchr(at, ']', (size_t)(end - at))) == NULL)
        return;
    dfxc_buf_init(&b);
    dfxc_buf_put(&b, l->p, (size_t)(at - l->p));
    for (p = at; p < close;) {
        const char *chip = mrg_find(p, close, "\"chip\":", 0), *why;
        char *num_end;
        long c;

        if (chip == NULL)
            break;
        c = strtol(chip + 7, &num_end, 10);
        dfxc_buf_put(&b, p, (size_t)(num_end - p));
        if ((why = mrg_death(m->h, (int)c)) != NULL) {
            dfxc_buf_puts(&b, ",\"why\":");
            dfxc_buf_json_str(&b, why);
        }
        p = num_end;
    }
    dfxc_buf_put(&b, p, (size_t)(end - p));
    if ((line = mrg_own(s, &b)) != NULL)
        *l = (mrg_line){line, b.len, l->ts, l->meta};
    dfxc_buf_free(&b);
}

/* What the layers' slices need: the merge, and the host's clock. */
typedef struct mrg_adding {
    mrg *m;
    double t0_ticks, ticks_per_ns;
    px_status st;
} mrg_adding;

/* Inserts line (owned) into s's lines at its time (metadata first). */
static px_status mrg_insert(mrg_src *s, const char *line, size_t n, int64_t ts, int meta)
{
    size_t i;

    if (dfxc_push((void **)&s->lines, &s->nlines, &s->cap, sizeof(*s->lines)) == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of memory merging trace events");
    for (i = s->nlines - 1; i > 0; i--) {
        const mrg_line *p = &s->lines[i - 1];

        if (meta ? p->meta : (p->meta || p->ts <= ts))
            break;
        s->lines[i] = *p;
    }
    s->lines[i] = (mrg_line){line, n, ts, meta};
    return PX_OK;
}

/* hier_dfx_event_cb of the merge: e as a line of chip e->chip's source, the thread's name the
 * first time its tid is seen there. */
static void mrg_add_event(void *ctx, const hier_dfx_event *e)
{
    mrg_adding *a = ctx;
    mrg_src *s = e->chip >= 0 && e->chip + 1 < a->m->nsrc ? &a->m->src[e->chip + 1] : NULL;
    char needle[48], *line;
    int64_t t0, t1;
    int named = 0;
    dfxc_buf b;

    if (s == NULL || s->trace_text == NULL || a->st != PX_OK)
        return;
    t0 = (int64_t)llround(((double)e->t0 - a->t0_ticks) / a->ticks_per_ns) - s->shift_ns;
    t1 = (int64_t)llround(((double)e->t1 - a->t0_ticks) / a->ticks_per_ns) - s->shift_ns;
    dfxc_buf_init(&b);
    snprintf(needle, sizeof(needle), ",\"tid\":%d}", e->tid);
    for (size_t i = 0; i < s->nowned && !named; i++)
        named = strstr(s->owned[i], "\"thread_name\"") && strstr(s->owned[i], needle);
    if (!named) {
        dfxc_buf_puts(&b, "{\"name\":\"thread_name\",\"args\":{\"name\":");
        dfxc_buf_json_str(&b, e->thread);
        dfxc_buf_printf(&b, "},\"ph\":\"M\",\"pid\":%d,\"tid\":%d}", s->pid, e->tid);
        if ((line = mrg_own(s, &b)) == NULL)
            a->st = px_set_error(PX_ENOMEM, "dfx: out of memory merging trace events");
        else
            a->st = mrg_insert(s, line, b.len, 0, 1);
        if (a->st != PX_OK) {
            dfxc_buf_free(&b);
            return;
        }
    }
    b.len = 0;
    dfxc_buf_puts(&b, "{\"name\":");
    dfxc_buf_json_str(&b, e->name);
    dfxc_buf_printf(&b, ",\"cat\":\"comm\",\"args\":{%s},\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                    "\"ts\":", e->args != NULL ? e->args : "", s->pid, e->tid);
    dfxc_buf_us(&b, t0);
    dfxc_buf_puts(&b, ",\"dur\":");
    dfxc_buf_us(&b, t1 > t0 ? t1 - t0 : 0);
    dfxc_buf_puts(&b, "}");
    if ((line = mrg_own(s, &b)) == NULL)
        a->st = px_set_error(PX_ENOMEM, "dfx: out of memory merging trace events");
    else
        a->st = mrg_insert(s, line, b.len, t0, 0);
    dfxc_buf_free(&b);
}

/* Level 3: the chips' agreement spans get their excluded chips' deaths, and the layers above
 * add their slices (hier_hooks.dfx_events). */
static px_status mrg_additions(mrg *m)
{
    mrg_adding a = {.m = m, .t0_ticks = mrg_num(&m->src[0].dfx, "t0_ticks", 0),
                    .ticks_per_ns = mrg_num(&m->src[0].dfx, "ticks_per_ns", 1.0), .st = PX_OK};

    if (a.ticks_per_ns <= 0)
        a.ticks_per_ns = 1.0;
    for (int k = 1; k < m->nsrc; k++)
        for (size_t i = 0; m->src[k].trace_text != NULL && i < m->src[k].nlines; i++)
            if (!m->src[k].lines[i].meta)
                mrg_annotate(m, &m->src[k], &m->src[k].lines[i]);
    for (int i = 0; m->h != NULL && i < m->h->nhooks && a.st == PX_OK; i++)
        if (m->h->hooks[i].hooks->dfx_events != NULL)
            m->h->hooks[i].hooks->dfx_events(m->h->hooks[i].arg, mrg_add_event, &a);
    return a.st;
}

/* Prefixes the current error with what failed. */
static void mrg_fail(px_status st, const char *dir)
{
    char msg[1024];

    snprintf(msg, sizeof(msg), "%s", px_last_error());
    px_set_error(st, "dfx: merging the level-3 outputs in %s failed: %s", dir, msg);
}

px_status px_hier_dfx_merge_files(const char *dir, int nchips, const px_hier_dfx_chip *chips,
                                  const px_hier *h)
{
    mrg m = {.dir = dir, .h = h, .level = 3, .nsrc = nchips + 1};
    px_status st;

    m.src = calloc((size_t)m.nsrc, sizeof(*m.src));
    if (m.src == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory merging %d chips", nchips);
    for (int i = 0; i < nchips; i++) {
        m.src[i + 1].chip = &chips[i];
        m.src[i + 1].pid = i + 1;
    }
    st = mrg_load_all(&m);
    if (st == PX_OK && m.src[0].trace_text != NULL)
        st = mrg_additions(&m);
    if (st == PX_OK && m.src[0].trace_text != NULL)
        st = mrg_trace(&m);
    if (st == PX_OK && m.src[0].trace_text != NULL)
        st = mrg_report(&m);
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

/* ---- level 4: the hosts of an MPI job ---- */

/* Host source s onto host 0's time base: its start and host 0's, each in ns of its own clock,
 * and its clock's estimated offset from host 0's (comm/dfx_hosts.c). */
static void mrg_host_shift(mrg_src *s, const hier_dfx_host *h0)
{
    const hier_dfx_host *h = s->host;
    double r = h->rate;

    /* host h's time T_h is host 0's T_0 = T_h - offset - rate * (T_0 - at), so
     * T_0 = (T_h - offset + rate * at) / (1 + rate); T_h = t0_h + ts */
    if (r == 0 || r <= -0.5 || r >= 0.5) {
        s->shift_ns = (int64_t)llround(h->t0_ns - (double)h->offset_ns - h0->t0_ns);
        return;
    }
    s->scale = 1.0 / (1.0 + r);
    s->shift = (h->t0_ns - (double)h->offset_ns + r * (double)h->at_ns) / (1.0 + r) - h0->t0_ns;
    s->shift_ns = (int64_t)llround(s->shift);
}

/* 1 when dfx.json o says "reconciled": true. */
static int mrg_true(const mrg_obj *o, const char *key)
{
    mrg_str v = mrg_get(o, key);

    return v.n == 4 && memcmp(v.p, "true", 4) == 0;
}

/* Appends one host's entry of "hosts" (it delivered its files); clears *ok when it did not
 * reconcile. */
static void mrg_host_entry(const mrg_src *s, dfxc_buf *b, int *ok)
{
    const hier_dfx_host *h = s->host;

    dfxc_buf_printf(b, "{\"host\": %d, \"host_id\": ", h->host);
    dfxc_buf_json_str(b, h->id);
    dfxc_buf_printf(b, ", \"pid\": %d, \"dir\": \"hosts/host%d\", \"trace_pid_base\": %d, "
                    "\"clock_offset_us\": ", (int)h->pid, h->host, s->pid_base);
    dfxc_buf_us(b, h->offset_ns);
    dfxc_buf_puts(b, ", \"clock_uncertainty_us\": ");
    dfxc_buf_us(b, (int64_t)h->uncertainty_ns);
    dfxc_buf_printf(b, ", \"clock_rounds\": %d, \"clock_estimated\": %s, \"clock_rate_ppm\": "
                    "%.3f, \"clock_rate_uncertainty_ppm\": %.3f, \"clock_rate_span_us\": ",
                    h->rounds, h->clock_ok ? "true" : "false", h->rate * 1e6,
                    h->rate_uncertainty * 1e6);
    dfxc_buf_us(b, (int64_t)h->rate_span_ns);
    dfxc_buf_puts(b, ", \"shift_us\": ");
    dfxc_buf_us(b, s->shift_ns);
    for (int i = 0; i < s->dfx.n; i++) {
        if (s->dfx.key[i].n == 7 && memcmp(s->dfx.key[i].p, "version", 7) == 0)
            continue;
        dfxc_buf_puts(b, ", \"");
        dfxc_buf_put(b, s->dfx.key[i].p, s->dfx.key[i].n);
        dfxc_buf_puts(b, "\": ");
        dfxc_buf_put(b, s->dfx.value[i].p, s->dfx.value[i].n);
    }
    *ok &= mrg_true(&s->dfx, "reconciled");
    dfxc_buf_puts(b, "}");
}

/* 1 for host 0's members that the level-4 dfx.json writes itself. */
static int mrg_l4_own(const mrg_str *k)
{
    static const char *const own[] = {"level", "chips", "calls", "reconciled"};

    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (k->n == strlen(own[i]) && memcmp(k->p, own[i], k->n) == 0)
            return 1;
    return 0;
}

/* Writes the level-4 dfx.json. Returns PX_OK or the error. */
static px_status mrg_dfx_hosts(const mrg *m)
{
    const mrg_obj *h0 = &m->src[0].dfx;
    int ok = 1, first = 1;
    px_status st;
    dfxc_buf b;

    dfxc_buf_init(&b);
    dfxc_buf_puts(&b, "{");
    for (int i = 0; i < h0->n; i++) {
        if (mrg_l4_own(&h0->key[i]))
            continue;
        dfxc_buf_puts(&b, first ? "\"" : ",\n \"");
        dfxc_buf_put(&b, h0->key[i].p, h0->key[i].n);
        dfxc_buf_puts(&b, "\": ");
        dfxc_buf_put(&b, h0->value[i].p, h0->value[i].n);
        first = 0;
    }
    dfxc_buf_printf(&b, ",\n \"level\": 4,\n \"nhosts\": %d,\n \"hosts\": [", m->nsrc);
    for (int k = 0, f = 1; k < m->nsrc; k++) {
        if (m->src[k].dfx_text == NULL)
            continue;
        dfxc_buf_puts(&b, f ? "\n  " : ",\n  ");
        mrg_host_entry(&m->src[k], &b, &ok);
        f = 0;
    }
    dfxc_buf_puts(&b, "],\n \"hosts_missing\": [");
    for (int k = 0, f = 1; k < m->nsrc; k++) {
        if (m->src[k].dfx_text != NULL)
            continue;
        dfxc_buf_printf(&b, "%s{\"host\": %d, \"host_id\": ", f ? "\n  " : ",\n  ",
                        m->src[k].host->host);
        dfxc_buf_json_str(&b, m->src[k].host->id);
        dfxc_buf_puts(&b, ", \"why\": ");
        dfxc_buf_json_str(&b, m->src[k].host->msg);
        dfxc_buf_puts(&b, "}");
        ok = 0;
        f = 0;
    }
    dfxc_buf_printf(&b, "],\n \"reconciled\": %s}\n", ok ? "true" : "false");
    st = dfxc_buf_write_file(&b, m->dir, "dfx.json", "level-4 merge");
    dfxc_buf_free(&b);
    return st;
}

/* Loads host k's level-3 outputs; a host other than 0 whose files do not load is left out
 * (listed missing with why). Returns PX_OK, or host 0's error. */
static px_status mrg_load_host(mrg *m, int k, hier_dfx_host *hosts)
{
    mrg_src *s = &m->src[k];
    px_status st = hosts[k].st;

    if (st == PX_OK)
        st = mrg_load_src(m, s);
    if (st == PX_OK && m->src[0].trace_text != NULL && s->trace_text == NULL && k > 0)
        st = px_set_error(PX_ENOENT, "its trace.json is missing");
    if (st == PX_OK || k == 0)
        return st;
    if (hosts[k].st == PX_OK)
        snprintf(hosts[k].msg, sizeof(hosts[k].msg), "its outputs in %s/hosts/host%d do not "
                 "load: %.400s", m->dir, k, px_last_error());
    PX_LOG_WARN("dfx: host %d is missing from the merge: %s", k, hosts[k].msg);
    free(s->dfx_text);
    free(s->trace_text);
    free(s->lines);
    *s = (mrg_src){.host = &hosts[k], .pid = s->pid, .pid_base = s->pid_base};
    px_clear_error();
    return PX_OK;
}

px_status hier_dfx_merge_hosts(const char *dir, int nhosts, hier_dfx_host *hosts)
{
    mrg m = {.dir = dir, .level = 4, .nsrc = nhosts};
    px_status st = PX_OK;
    int missing = 0;

    if (nhosts < 1)
        return px_set_error(PX_EINVAL, "dfx: a level-4 merge of %d hosts", nhosts);
    m.src = calloc((size_t)nhosts, sizeof(*m.src));
    if (m.src == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory merging %d hosts", nhosts);
    for (int k = 0; k < nhosts; k++) {
        m.src[k].host = &hosts[k];
        m.src[k].pid = m.src[k].pid_base = k * HIER_DFX_HOST_PIDS;
    }
    for (int k = 0; st == PX_OK && k < nhosts; k++)
        st = mrg_load_host(&m, k, hosts);
    for (int k = 0; st == PX_OK && k < nhosts; k++) {
        missing += m.src[k].dfx_text == NULL;
        if (m.src[k].dfx_text != NULL)
            mrg_host_shift(&m.src[k], &hosts[0]);
    }
    if (st == PX_OK && m.src[0].trace_text != NULL)
        st = mrg_trace(&m);
    if (st == PX_OK && m.src[0].trace_text != NULL)
        st = mrg_report(&m);
    if (st == PX_OK)
        st = mrg_dfx_hosts(&m);
    if (st == PX_OK)
        PX_LOG_INFO("dfx: merged %d hosts' outputs into %s/trace.json and dfx.json%s", nhosts,
                    dir, missing ? " (some hosts missing: see hosts_missing)" : "");
    else
        mrg_fail(st, dir);
    mrg_free(&m);
    return st;
}
