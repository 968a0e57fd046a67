/*
 * pmu.c - the pmu collector: per-task counter deltas, read by the framework with one grouped
 * perf_event_open read at each task boundary on the core, into pmu.csv.
 *
 * The counter set is the run's (info->pmu_set): hardware (cycles, instructions, cache and
 * branch misses) where the machine has them, else software (task-clock, page faults, context
 * switches) plus TSC cycles. The file opens with comment lines saying the version, which set
 * and why (info->pmu_note), then one header row and one row per task in task order; a counter
 * of the set that could not be opened is an empty cell. During the run it only keeps the raw
 * entries (raw.h); finish() decodes them. Format: docs/formats.md.
 */
#include "dfx/collectors/collectors.h"

#include <stdlib.h>
#include <string.h>

#include "dfx/collectors/out.h"
#include "dfx/collectors/raw.h"
#include "dfx/records.h"
#include "util/log.h"

typedef struct pmu_state {
    dfxc_raw raw; /* the entries as received */
    px_dfx_pmu_rec *v;
    size_t n, cap;
    uint64_t bad, min_id;
    int sets_seen; /* bit per set that records carried */
    int oom;
} pmu_state;

static px_status pmu_open(void **state, const px_dfx_run_info *info)
{
    pmu_state *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "dfx[pmu]: cannot allocate its state");
    dfxc_raw_init(&s->raw);
    s->min_id = UINT64_MAX;
    *state = s;
    return PX_OK;
}

static void pmu_on_record(void *state, const px_dfx_rec *r)
{
    pmu_state *s = state;

    if (r->kind == PX_DFXK_PMU)
        dfxc_raw_add(&s->raw, r);
}

/* Decodes the kept PMU entries, in arrival order. */
static void pmu_load(pmu_state *s)
{
    const px_dfx_rec *r;
    px_dfx_pmu_rec *p;
    dfxc_raw_it it;

    s->oom |= s->raw.oom;
    dfxc_raw_begin(&s->raw, &it);
    while ((r = dfxc_raw_next(&it)) != NULL) {
        p = dfxc_push((void **)&s->v, &s->n, &s->cap, sizeof(*p));
        if (p == NULL) {
            s->oom = 1;
            return;
        }
        if (px_dfx_pmu_decode(r, p) != 0) {
            s->n--;
            s->bad++;
            continue;
        }
        s->min_id = PX_MIN(s->min_id, p->task);
        s->sets_seen |= 1 << (p->set & 1);
    }
}

static int pmu_cmp(const void *pa, const void *pb)
{
    const px_dfx_pmu_rec *a = pa, *b = pb;

    return a->task < b->task ? -1 : a->task > b->task;
}

/* Returns s past prefix p when s starts with it, else s. */
static const char *pmu_skip(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0 ? s + strlen(p) : s;
}

/*
 * Appends why the software set is in use: the framework's note without the words the line
 * already says ("software counters: ", "perf_hw=0 (...)" or "perf_hw=0: ").
 */
static void pmu_reason(dfxc_buf *b, const char *note)
{
    size_t n;

    note = pmu_skip(note, "software counters: ");
    note = pmu_skip(note, "perf_hw=0: ");
    n = strlen(note);
    if (strncmp(note, "perf_hw=0 (", 11) == 0 && n > 12 && note[n - 1] == ')')
        dfxc_buf_put(b, note + 11, n - 12);
    else
        dfxc_buf_puts(b, note[0] ? note : "no reason given");
}

/* Appends the comment line naming the set and why, with newlines flattened. */
static void pmu_counters_line(dfxc_buf *b, const px_dfx_run_info *info)
{
    const char *note = info->pmu_note ? info->pmu_note : "";
    size_t start = b->len;

    if (info->pmu_set == PX_DFX_PMU_HARDWARE) {
        dfxc_buf_printf(b, "# counters: hardware (%s)", note[0] ? note : "perf_hw available");
    } else {
        dfxc_buf_puts(b, "# counters: software (perf_hw absent: ");
        pmu_reason(b, note);
        dfxc_buf_puts(b, ")");
    }
    for (size_t i = start; !b->oom && i < b->len; i++)
        if (b->p[i] == '\n' || b->p[i] == '\r')
            b->p[i] = ' ';
    dfxc_buf_puts(b, "\n");
}

/* Appends pmu.csv's text. */
static void pmu_csv(const pmu_state *s, const px_dfx_run_info *info, dfxc_buf *b)
{
    int set = info->pmu_set == PX_DFX_PMU_HARDWARE ? PX_DFX_PMU_HARDWARE : PX_DFX_PMU_SOFTWARE;

    dfxc_buf_puts(b, "# plexus pmu.csv version 1\n");
    pmu_counters_line(b, info);
    dfxc_buf_puts(b, "task,core");
    for (int i = 0; i < PX_DFX_PMU_WORDS; i++)
        dfxc_buf_printf(b, ",%s", px_dfx_pmu_counter_name(set, i));
    dfxc_buf_puts(b, "\n");
    for (size_t k = 0; k < s->n; k++) {
        const px_dfx_pmu_rec *p = &s->v[k];

        dfxc_buf_printf(b, "%llu,%d", (unsigned long long)(p->task - s->min_id), p->core);
        for (int i = 0; i < PX_DFX_PMU_WORDS; i++) {
            if (p->v[i] == PX_DFX_PMU_NONE)
                dfxc_buf_puts(b, ",");
            else
                dfxc_buf_printf(b, ",%llu", (unsigned long long)p->v[i]);
        }
        dfxc_buf_puts(b, "\n");
    }
}

static px_status pmu_finish(void *state, const px_dfx_run_info *info)
{
    pmu_state *s = state;
    px_status st;
    dfxc_buf b;

    pmu_load(s);
    if (s->oom)
        return px_set_error(PX_ENOMEM, "dfx[pmu]: out of memory keeping %zu task counters", s->n);
    if (s->bad > 0)
        PX_LOG_WARN("dfx[pmu]: %llu PMU entries did not decode and were skipped",
                    (unsigned long long)s->bad);
    if (s->sets_seen & ~(1 << (info->pmu_set & 1)))
        PX_LOG_WARN("dfx[pmu]: records carry a counter set other than the run's (%s)",
                    info->pmu_set == PX_DFX_PMU_HARDWARE ? "hardware" : "software");
    if (s->n > 0)
        qsort(s->v, s->n, sizeof(*s->v), pmu_cmp);
    dfxc_buf_init(&b);
    pmu_csv(s, info, &b);
    st = dfxc_buf_write_file(&b, info->out_dir, "pmu.csv", "pmu");
    dfxc_buf_free(&b);
    return st;
}

static void pmu_close(void *state)
{
    pmu_state *s = state;

    if (s == NULL)
        return;
    dfxc_raw_free(&s->raw);
    free(s->v);
    free(s);
}

const px_dfx_collector_ops px_dfx_pmu_ops = {
    .name = "pmu",
    .bit = PX_DFX_PMU,
    .kinds = 1u << PX_DFXK_PMU,
    .open = pmu_open,
    .on_record = pmu_on_record,
    .finish = pmu_finish,
    .close = pmu_close,
};
