/*
 * hosts.c - the level-4 merge: the level-3 outputs of every host of an MPI job (each in
 * DIR/hosts/host<h>, on its own clock) into one set in DIR, on host 0's time base. A host's
 * time stamps move by its run's start and its clock's estimated offset (and rate, when two
 * estimates far enough apart gave one) against host 0's, which the layer that gathered the
 * files measured (comm/dfx_hosts.c, the proxy's clock ping). dfx.json keeps host 0's members
 * but the level-3 ones, then "hosts" (each host's clock and its own level-3 dfx.json) and
 * "hosts_missing" (each with why).
 */
#include "dfx/merge/merge_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* Host source s onto host 0's time base: its start and host 0's, each in ns of its own clock,
 * and its clock's estimated offset from host 0's (comm/dfx_hosts.c). */
static void mrg_host_shift(mrg_src *s, const dfx_merge_src *h0)
{
    const dfx_merge_src *h = s->host;
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

/* Appends one host's entry of "hosts" (it delivered its files): its clock, then its own
 * dfx.json's members but version and host_id (written first already: a member name appears
 * once in an object); clears *ok when it did not reconcile. */
static void mrg_host_entry(const mrg_src *s, dfxc_buf *b, int *ok)
{
    const dfx_merge_src *h = s->host;

    dfxc_buf_printf(b, "{\"host\": %d, \"host_id\": ", h->index);
    dfxc_buf_json_str(b, h->label);
    dfxc_buf_printf(b, ", \"pid\": %d, \"dir\": \"hosts/host%d\", \"trace_pid_base\": %d, "
                    "\"clock_offset_us\": ", h->pid, h->index, s->pid_base);
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
    for (size_t i = 0; i < s->dfx.root->n; i++) {
        mrg_str v = mrg_value(&s->dfx, i);

        if (strcmp(s->dfx.root->kids[i].key, "version") == 0 ||
            strcmp(s->dfx.root->kids[i].key, "host_id") == 0) /* the entry's own */
            continue;
        dfxc_buf_puts(b, ", \"");
        dfxc_buf_puts(b, s->dfx.root->kids[i].key);
        dfxc_buf_puts(b, "\": ");
        dfxc_buf_put(b, v.p, v.n);
    }
    *ok &= mrg_true(s->dfx.root, "reconciled");
    dfxc_buf_puts(b, "}");
}

/* 1 for host 0's members that the level-4 dfx.json writes itself. */
static int mrg_l4_own(const char *k)
{
    static const char *const own[] = {"level", "chips", "calls", "reconciled"};

    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcmp(k, own[i]) == 0)
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
    for (size_t i = 0; i < h0->root->n; i++) {
        mrg_str v = mrg_value(h0, i);

        if (mrg_l4_own(h0->root->kids[i].key))
            continue;
        dfxc_buf_puts(&b, first ? "\"" : ",\n \"");
        dfxc_buf_puts(&b, h0->root->kids[i].key);
        dfxc_buf_puts(&b, "\": ");
        dfxc_buf_put(&b, v.p, v.n);
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
                        m->src[k].host->index);
        dfxc_buf_json_str(&b, m->src[k].host->label);
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
 * (listed missing with why: its input's st and msg). Returns PX_OK, or host 0's error. */
static px_status mrg_load_host(mrg *m, int k)
{
    mrg_src *s = &m->src[k];
    dfx_merge_src *in = s->in;
    px_status st = in->st;

    if (st == PX_OK)
        st = mrg_load_src(m, s);
    if (st == PX_OK && m->src[0].trace_text != NULL && s->trace_text == NULL && k > 0)
        st = px_set_error(PX_ENOENT, "its trace.json is missing");
    if (st == PX_OK || k == 0)
        return st;
    if (in->st == PX_OK)
        snprintf(in->msg, sizeof(in->msg), "its outputs in %s/%s do not load: %.400s", m->dir,
                 in->dir, px_last_error());
    PX_LOG_WARN("dfx: host %d is missing from the merge: %s", k, in->msg);
    mrg_free_src(s);
    *s = (mrg_src){.in = in, .host = in, .pid = s->pid, .pid_base = s->pid_base};
    px_clear_error();
    return PX_OK;
}

px_status mrg_hosts(mrg *m)
{
    px_status st = PX_OK;
    int missing = 0;

    for (int k = 0; st == PX_OK && k < m->nsrc; k++)
        st = mrg_load_host(m, k);
    for (int k = 0; st == PX_OK && k < m->nsrc; k++) {
        missing += m->src[k].dfx_text == NULL;
        if (m->src[k].dfx_text != NULL)
            mrg_host_shift(&m->src[k], m->src[0].host);
    }
    if (st == PX_OK && m->src[0].trace_text != NULL)
        st = mrg_trace(m);
    if (st == PX_OK && m->src[0].trace_text != NULL)
        st = mrg_report(m);
    if (st == PX_OK)
        st = mrg_dfx_hosts(m);
    if (st == PX_OK)
        PX_LOG_INFO("dfx: merged %d hosts' outputs into %s/trace.json and dfx.json%s", m->nsrc,
                    m->dir, missing ? " (some hosts missing: see hosts_missing)" : "");
    return st;
}
