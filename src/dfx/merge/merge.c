/*
 * merge.c - one DFX picture of several processes or hosts: the entry of the merge (merge.h)
 * over its plain input, the level-3 sequence, and what every merge frees.
 *
 * Level 3 (src/hier hands the sources in at the end of a run, hier/dfx_l3_merge.c): the host
 * engine's trace.json and dfx.json (written into the output directory by the host's own DFX)
 * merged with every chip's (written into chips/chip<i>/ by the chip's DFX session) into the
 * directory's trace.json, dfx.json and report.html. Level 4 (src/comm hands the hosts in once
 * it gathered their files, comm/dfx_hosts.c): every host's level-3 outputs into one set on
 * host 0's clock (hosts.c). Formats: docs/formats.md.
 *
 * Each room in a file of its own: text.c reads plexus's own text (dfx.json through the one
 * JSON reader, dfx/collectors/json.h), load.c the sources,
 * trace.c, report.c and dfxjson.c write the merged files, adds.c adds the deaths and the
 * layers' slices, hosts.c is level 4. The files are written with the collectors' buffer
 * helpers, atomically (a temporary name, then rename).
 */
#include "dfx/merge/merge_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/log.h"

void mrg_free_src(mrg_src *s)
{
    mrg_obj_free(&s->dfx);
    free(s->dfx_text);
    free(s->trace_text);
    free(s->lines);
    for (size_t i = 0; i < s->nowned; i++)
        free(s->owned[i]);
    free(s->owned);
}

static void mrg_free(mrg *m)
{
    for (int k = 0; m->src != NULL && k < m->nsrc; k++)
        mrg_free_src(&m->src[k]);
    free(m->src);
}

/* Prefixes the current error with what failed. */
static void mrg_fail(px_status st, const char *dir)
{
    char msg[1024];

    snprintf(msg, sizeof(msg), "%s", px_last_error());
    px_set_error(st, "dfx: merging the level-3 outputs in %s failed: %s", dir, msg);
}

/* The level-3 merge: the host and its chips. Returns PX_OK or the error (message set). */
static px_status mrg_l3(mrg *m)
{
    px_status st = mrg_load_all(m);

    if (st == PX_OK && m->src[0].trace_text != NULL)
        st = mrg_additions(m);
    if (st == PX_OK && m->src[0].trace_text != NULL)
        st = mrg_trace(m);
    if (st == PX_OK && m->src[0].trace_text != NULL)
        st = mrg_report(m);
    if (st == PX_OK)
        st = mrg_dfx(m);
    if (st == PX_OK)
        PX_LOG_INFO("dfx: merged the host's and %d chips' outputs into %s/trace.json and "
                    "dfx.json", m->nsrc - 1, m->dir);
    return st;
}

px_status dfx_merge_run(dfx_merge_in *in)
{
    mrg m = {.dir = in->dir, .in = in, .level = in->level, .nsrc = in->nsrc};
    px_status st;

    if ((in->level != 3 && in->level != 4) || in->nsrc < 1 || in->src == NULL)
        return px_set_error(PX_EINVAL, "dfx: a level-%d merge of %d sources (level 3 or 4, "
                            "at least one source)", in->level, in->nsrc);
    m.src = calloc((size_t)m.nsrc, sizeof(*m.src));
    if (m.src == NULL)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory merging %d %s", in->level == 3
                            ? in->nsrc - 1 : in->nsrc, in->level == 3 ? "chips" : "hosts");
    for (int k = 0; k < m.nsrc; k++) {
        mrg_src *s = &m.src[k];

        s->in = &in->src[k];
        if (in->level == 4) {
            s->host = s->in;
            s->pid = s->pid_base = k * DFX_MERGE_HOST_PIDS;
        } else if (k > 0) {
            s->chip = s->in;
            s->pid = k;
        }
    }
    st = in->level == 3 ? mrg_l3(&m) : mrg_hosts(&m);
    if (st != PX_OK)
        mrg_fail(st, in->dir);
    mrg_free(&m);
    return st;
}
