/*
 * adds.c - what a level-3 merge adds to the chips' own events: a chip's comm span naming
 * excluded chips gets each one's death next to it (which only the parent knows), and the
 * layers above add slices of their own on the chips' processes (a revoke, an agreement, a
 * shrink of the orchestration), each as a line of the chip's source at its time.
 */
#include "dfx/merge/merge_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Why chip c is gone, in the death watch's words (the input's hook), or NULL when it is not. */
static const char *mrg_death(const mrg *m, int c)
{
    const dfx_merge_hooks *hk = m->in->hooks;

    return hk != NULL && hk->death != NULL ? hk->death(m->in->arg, c) : NULL;
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
        if ((why = mrg_death(m, (int)c)) != NULL) {
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

/* dfx_merge_event_cb of the merge: e as a line of chip e->chip's source, the thread's name the
 * first time its tid is seen there. */
static void mrg_add_event(void *ctx, const dfx_merge_event *e)
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
 * add their slices (dfx_merge_hooks.events). */
px_status mrg_additions(mrg *m)
{
    mrg_adding a = {.m = m, .t0_ticks = mrg_num(&m->src[0].dfx, "t0_ticks", 0),
                    .ticks_per_ns = mrg_num(&m->src[0].dfx, "ticks_per_ns", 1.0), .st = PX_OK};

    if (a.ticks_per_ns <= 0)
        a.ticks_per_ns = 1.0;
    for (int k = 1; k < m->nsrc; k++)
        for (size_t i = 0; m->src[k].trace_text != NULL && i < m->src[k].nlines; i++)
            if (!m->src[k].lines[i].meta)
                mrg_annotate(m, &m->src[k], &m->src[k].lines[i]);
    if (m->in->hooks != NULL && m->in->hooks->events != NULL)
        m->in->hooks->events(m->in->arg, mrg_add_event, &a);
    return a.st;
}

