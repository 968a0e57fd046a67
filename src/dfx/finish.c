/*
 * finish.c - the end of a run's DFX: flush, drain, reconcile, collectors' files, dfx.json.
 *
 * Reconcile. Per producer: records the drain collected plus records dropped equal the
 * records written (the final sequence number), and the sequence gaps the drain saw equal
 * the dropped records (anything else was lost or damaged). Per collector, over the kinds it
 * consumes: entries collected plus dropped equal entries produced. A mismatch is a warning,
 * and an error under PLEXUS_DFX_STRICT=1. dfx.json (docs/formats.md) records the counts,
 * each collector's transport and every refusal.
 */
#include "dfx/dfx_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps/caps_internal.h"
#include "dfx/collectors/collectors.h"
#include "dfx/records.h"
#include "util/file.h"
#include "util/log.h"


/* Per-collector totals of a run. */
typedef struct dfx_tally {
    uint64_t produced, collected, dropped, waits;
} dfx_tally;

static void dfx_tally_of(const px_dfx *d, uint32_t kinds, dfx_tally *t)
{
    memset(t, 0, sizeof(*t));
    for (int k = 1; k < PX_DFXK_COUNT; k++) {
        if (!(kinds & (1u << k)))
            continue;
        t->collected += d->collected[k];
        for (int p = 0; p < d->nprod; p++) {
            t->produced += d->prods[p].p.produced[k];
            t->dropped += d->prods[p].dropped[k];
            t->waits += d->prods[p].waits[k];
        }
    }
}

/* Kinds collector i is accounted over (its ops' kinds, else the kinds written for it). */
static uint32_t dfx_kinds(const px_dfx *d, int i)
{
    uint32_t kinds = 0;

    if (d->ops[i] != NULL)
        return d->ops[i]->kinds;
    for (int k = 1; k < PX_DFXK_COUNT; k++)
        if (px_dfx_kind_for(k) & (1u << i))
            kinds |= 1u << k;
    return kinds;
}

/*
 * Checks one producer; returns the records unaccounted for (0 when it reconciles). Gaps are
 * the sequence numbers the drain never saw: between buffers, and after the last one.
 */
static uint64_t dfx_check_producer(px_dfx *d, int p, char *why, size_t n)
{
    const px_dfx_prod *pr = &d->prods[p];
    const px_dfx_dstate *ds = &d->dstate[p];
    uint32_t written = pr->p.seq;
    uint64_t gaps = ds->gap_records + (uint32_t)(written - ds->expect);
    uint64_t lost = (uint32_t)(written - (uint32_t)(ds->collected_records + pr->dropped_records));

    if (lost == 0 && gaps != pr->dropped_records)
        lost = gaps > pr->dropped_records ? gaps - pr->dropped_records
                                          : pr->dropped_records - gaps;
    lost += ds->bad + ds->backwards;
    if (lost != 0)
        snprintf(why, n, "%s wrote %u records, the drain collected %llu, %llu were dropped, "
                 "sequence gaps %llu, damaged %llu, out of order %llu",
                 d->producer_names[p], written, (unsigned long long)ds->collected_records,
                 (unsigned long long)pr->dropped_records, (unsigned long long)gaps,
                 (unsigned long long)ds->bad, (unsigned long long)ds->backwards);
    return lost;
}

/* Reconciles producers and collectors; returns PX_OK or PX_EIO (message set) on mismatch. */
static px_status dfx_reconcile(px_dfx *d, uint64_t *unexplained)
{
    char why[512] = "", first[512] = "";
    dfx_tally t;

    *unexplained = 0;
    for (int p = 0; p < d->nprod; p++) {
        uint64_t lost = dfx_check_producer(d, p, why, sizeof(why));

        if (lost != 0 && first[0] == '\0')
            snprintf(first, sizeof(first), "%s", why);
        *unexplained += lost;
    }
    for (int i = 0; i < PX_DFX_NCOLLECTORS && first[0] == '\0'; i++) {
        if (!(d->enabled & (1u << i)))
            continue;
        dfx_tally_of(d, dfx_kinds(d, i), &t);
        if (t.collected + t.dropped != t.produced)
            snprintf(first, sizeof(first), "dfx[%s]: produced %llu entries but collected %llu "
                     "and dropped %llu", px_dfx_collector_name(i),
                     (unsigned long long)t.produced, (unsigned long long)t.collected,
                     (unsigned long long)t.dropped);
    }
    if (first[0] == '\0')
        return PX_OK;
    return px_set_error(PX_EIO, "dfx: records do not reconcile: %s", first);
}

/* Writes {"name": ..., "reason": ...} refusals of collector i. */
static void dfx_json_refused(FILE *f, const px_dfx_choice *c)
{
    fputc('[', f);
    for (int r = 0; r < c->nrefused; r++) {
        fprintf(f, "%s{\"name\": ", r ? ", " : "");
        px_caps_json_string(f, c->refused[r].name);
        fputs(", \"reason\": ", f);
        px_caps_json_string(f, c->refused[r].reason);
        fputc('}', f);
    }
    fputc(']', f);
}

static void dfx_json_collector(px_dfx *d, FILE *f, int i, uint64_t gaps, int *first)
{
    const px_dfx_transport *t = px_dfx_transport_get(d->choice[i].transport);
    dfx_tally c;

    dfx_tally_of(d, dfx_kinds(d, i), &c);
    fprintf(f, "%s\n    \"%s\": {\"transport\": \"%s\", \"refused\": ", *first ? "" : ",",
            px_dfx_collector_name(i), t ? t->name : "none");
    dfx_json_refused(f, &d->choice[i]);
    fprintf(f, ", \"produced\": %llu, \"collected\": %llu, \"dropped\": %llu, "
            "\"writer_waits\": %llu, \"seq_gaps\": %llu, \"reconciled\": %s",
            (unsigned long long)c.produced, (unsigned long long)c.collected,
            (unsigned long long)c.dropped, (unsigned long long)c.waits,
            (unsigned long long)gaps,
            c.collected + c.dropped == c.produced && gaps == 0 ? "true" : "false");
    if (i == __builtin_ctz(PX_DFX_PMU)) {
        fprintf(f, ", \"counters\": \"%s\", \"counters_reason\": ",
                d->pmu_set == PX_DFX_PMU_HARDWARE ? "hardware" : "software");
        px_caps_json_string(f, d->pmu_note);
    }
    fputc('}', f);
    *first = 0;
}

/* Writes out_dir/dfx.json (built in memory, then util_file_replace). Returns PX_OK, PX_ENOMEM
 * or PX_EIO with the path. */
static px_status dfx_json_write(px_dfx *d, uint64_t gaps)
{
    char path[PX_DFX_OUT_MAX + 16];
    char *text = NULL;
    size_t len = 0;
    int first = 1, bad;
    px_status st;
    FILE *f;

    snprintf(path, sizeof(path), "%s/dfx.json", d->out_dir);
    f = open_memstream(&text, &len);
    if (f == NULL)
        return px_set_error(PX_ENOMEM, "dfx: cannot build %s in memory: %s", path,
                            strerror(errno));
    fprintf(f, "{\"version\": 1, \"clock\": \"%s\", \"ticks_per_ns\": %.6f, \"t0_ticks\": %llu, "
            "\"chip\": %d, \"device_profile\": ", d->info.clock, d->ticks_per_ns,
            (unsigned long long)d->t0, d->chip_index);
    px_caps_json_string(f, d->info.device_profile);
    fputs(", \"host_id\": ", f);
    px_caps_json_string(f, d->info.host_id != NULL ? d->info.host_id : "");
    fprintf(f, ", \"records_version\": %d, \"drain_cpu_ns\": %llu, \"collectors\": {",
            PX_DFX_RECORDS_VERSION, (unsigned long long)d->drain_cpu_ns);
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++)
        if (d->enabled & (1u << i))
            dfx_json_collector(d, f, i, gaps, &first);
    fputs("\n}}\n", f);
    bad = ferror(f) | (fclose(f) != 0);
    if (bad || text == NULL)
        st = px_set_error(PX_ENOMEM, "dfx: building %s in memory failed (out of memory)", path);
    else
        st = util_file_replace(path, text, len, "dfx");
    free(text);
    return st;
}

/* Runs every open collector's finish(); returns the first failure. */
static px_status dfx_collectors_finish(px_dfx *d)
{
    px_status first = PX_OK;
    char msg[1024] = "";

    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++) {
        px_status st;

        if (d->state[i] == NULL)
            continue;
        st = d->ops[i]->finish(d->state[i], &d->info);
        if (st != PX_OK && first == PX_OK) {
            first = st;
            snprintf(msg, sizeof(msg), "%s", px_last_error());
        }
    }
    if (first != PX_OK)
        px_set_error(first, "%s", msg);
    return first;
}

static uint64_t dfx_total_dropped(const px_dfx *d)
{
    uint64_t n = 0;

    for (int p = 0; p < d->nprod; p++)
        n += d->prods[p].dropped_records;
    return n;
}

/*
 * report.html from the model the collectors filled, plus the track names trace.json has (one
 * per producer of this chip). Returns PX_OK, or the writer's error.
 */
static px_status dfx_report(px_dfx *d)
{
    char tmp[32];

    if (d->info.model == NULL)
        return PX_OK;
    for (int p = 0; d->model.has_trace && p < d->nprod; p++)
        dfxc_model_add_track(&d->model, d->chip_index, p,
                             dfxc_producer_name(&d->info, (unsigned)p, tmp, sizeof(tmp)));
    return px_dfx_report_write(d->out_dir, &d->model);
}

/* Keeps the first failure: st replaces *first (and its message is saved) only once. */
static void dfx_keep(px_status st, px_status *first, char *msg, size_t n)
{
    if (st != PX_OK && *first == PX_OK) {
        *first = st;
        snprintf(msg, n, "%s", px_last_error());
    }
}

/* Returns PX_OK or the first failure (see dfx.h). */
px_status px_dfx_finish(px_dfx *d, int quiescent)
{
    px_status first = PX_OK, st;
    char msg[1024] = "";
    uint64_t gaps = 0, dropped;

    dfx_flush_producer(d, &d->prods[d->ncores]);
    for (int p = 0; quiescent && p < d->ncores; p++)
        dfx_flush_producer(d, &d->prods[p]);
    dfx_drain_help(d, NULL, 1); /* this thread drains what is left */
    dfx_drain_stop(d);
    d->finished = 1;
    if (d->drain_error != PX_OK)
        dfx_keep(px_set_error(d->drain_error, "dfx: the drain failed: %s", d->drain_msg),
                 &first, msg, sizeof(msg));
    st = dfx_reconcile(d, &gaps);
    if (st != PX_OK && d->strict)
        dfx_keep(st, &first, msg, sizeof(msg));
    else if (st != PX_OK)
        PX_LOG_WARN("%s (PLEXUS_DFX_STRICT=1 makes this an error)", px_last_error());
    dropped = dfx_total_dropped(d);
    d->info.dropped = dropped > 0;
    if (dropped > 0 && (d->enabled & PX_DFX_DEPGEN))
        PX_LOG_WARN("dfx: %llu records were dropped (writers waited longer than "
                    "PLEXUS_DFX_BACKSTOP_S); depgen writes no deps.json or deps.dot",
                    (unsigned long long)dropped);
    dfx_clean_outputs(d->out_dir);
    d->info.raw = d->raw_kinds ? &d->raw : NULL;
    dfx_keep(dfx_collectors_finish(d), &first, msg, sizeof(msg));
    dfx_keep(dfx_json_write(d, gaps), &first, msg, sizeof(msg));
    dfx_keep(dfx_report(d), &first, msg, sizeof(msg));
    if (first != PX_OK)
        px_set_error(first, "%s", msg);
    return first;
}
