/*
 * dfx.json of a level-3 merge: the host's members in their order ("chip" becomes -1: the
 * host), then "chips": per chip its index, process id, directory and every member of its own
 * dfx.json but the version (collectors with transports and counts included), or the error
 * that left it without files; "chips_missing", "calls" (each chip call of the run), the
 * members the layers add (dfx_merge_hooks.json) and "reconciled": every collector of every
 * side reconciled and every chip delivered its files.
 */
#include "dfx/merge/merge_internal.h"

#include <stdio.h>
#include <string.h>

/* Appends "calls": each chip call of the run as [host task, chip, first chip task, tasks],
 * in the ids of the trace (each process's own), so that a level-4 merge can follow each host
 * task into the chip tasks it ran as the level-3 report does. */
static void mrg_calls_json(const mrg *m, dfxc_buf *b)
{
    int first = 1;

    dfxc_buf_puts(b, ",\n \"calls\": [");
    for (int k = 1; m->in->calls != NULL && k < m->nsrc; k++) {
        const mrg_src *s = &m->src[k];

        if (s->trace_text == NULL)
            continue;
        for (size_t i = 0; i < m->in->ncalls; i++) {
            const dfx_merge_call *c = &m->in->calls[i];

            if (c->chip != s->chip->index)
                continue;
            dfxc_buf_printf(b, "%s[%llu, %d, %llu, %llu]", first ? "" : ", ",
                            (unsigned long long)c->host_task, c->chip,
                            (unsigned long long)c->first_task, (unsigned long long)c->ntasks);
            first = 0;
        }
    }
    dfxc_buf_puts(b, "]");
}

/* 1 when every collector of dfx.json o reconciled (each says "reconciled": true). */
static int mrg_reconciled(const mrg_obj *o)
{
    const dfxc_json *cols = dfxc_json_get(o->root, "collectors");

    if (cols == NULL || cols->type != DFXC_JOBJ)
        return 0;
    for (size_t i = 0; i < cols->n; i++)
        if (!mrg_true(&cols->kids[i], "reconciled"))
            return 0;
    return 1;
}

/* Appends the members of o (as "key": value) but version and chip. */
static void mrg_members(dfxc_buf *b, const mrg_obj *o)
{
    for (size_t i = 0; i < o->root->n; i++) {
        const char *key = o->root->kids[i].key;
        mrg_str v = mrg_value(o, i);

        if (strcmp(key, "version") == 0 || strcmp(key, "chip") == 0)
            continue;
        dfxc_buf_puts(b, ", \"");
        dfxc_buf_puts(b, key);
        dfxc_buf_puts(b, "\": ");
        dfxc_buf_put(b, v.p, v.n);
    }
}

/* Appends one chip's entry of "chips"; clears *ok when it did not reconcile. */
static void mrg_chip_entry(const mrg_src *s, dfxc_buf *b, int *ok)
{
    dfxc_buf_printf(b, "{\"chip\": %d, \"pid\": %d, \"trace_pid\": %d, \"dir\": "
                    "\"chips/chip%d\", \"shift_us\": ", s->chip->index, s->chip->pid,
                    s->pid, s->chip->index);
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
px_status mrg_dfx(const mrg *m)
{
    const mrg_obj *host = &m->src[0].dfx;
    int ok = mrg_reconciled(host);
    px_status st;
    dfxc_buf b;

    if (!mrg_str_is(host, "clock", "tsc") && !mrg_str_is(host, "clock", "monotonic"))
        return px_set_error(PX_EINVAL, "dfx: the host's dfx.json names no clock");
    dfxc_buf_init(&b);
    dfxc_buf_puts(&b, "{");
    for (size_t i = 0; i < host->root->n; i++) {
        mrg_str v = mrg_value(host, i);

        dfxc_buf_puts(&b, i ? ",\n \"" : "\"");
        dfxc_buf_puts(&b, host->root->kids[i].key);
        dfxc_buf_puts(&b, "\": ");
        if (strcmp(host->root->kids[i].key, "chip") == 0)
            dfxc_buf_puts(&b, "-1");
        else
            dfxc_buf_put(&b, v.p, v.n);
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
        dfxc_buf_printf(&b, "%s%d", first ? "" : ", ", m->src[k].chip->index);
        first = 0;
    }
    dfxc_buf_puts(&b, "]");
    mrg_calls_json(m, &b);
    if (m->in->hooks != NULL && m->in->hooks->json != NULL)
        m->in->hooks->json(m->in->arg, &b);
    dfxc_buf_printf(&b, ",\n \"reconciled\": %s}\n", ok ? "true" : "false");
    st = dfxc_buf_write_file(&b, m->dir, "dfx.json", "level-3 merge");
    dfxc_buf_free(&b);
    return st;
}
