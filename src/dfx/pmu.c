/*
 * pmu.c - per-task counters for the pmu collector, read on the core that runs the task.
 *
 * Each producer opens one perf_event group on its own thread (pid 0, any CPU, user space
 * only) the first time it begins a task in a run, and reads the whole group with one read()
 * at each task boundary; the PMU record carries the deltas. The set is chosen once per run
 * from the probe's facts: hardware counters (cycles, instructions, cache misses, branch
 * misses) when perf_hw, otherwise software counters (task-clock, page faults, context
 * switches) plus the clock delta. A counter that does not open reads as PX_DFX_PMU_NONE.
 */
#include "dfx/dfx_internal.h"

#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dfx/records.h"
#include "util/perf.h"

/* Chooses the counter set of the run from the facts. */
void dfx_pmu_choose(px_dfx *d, const px_caps *caps)
{
    if (px_caps_get(caps, PX_FACT_PERF_HW)) {
        d->pmu_set = PX_DFX_PMU_HARDWARE;
        snprintf(d->pmu_note, sizeof(d->pmu_note), "hardware counters (perf_hw=1)");
    } else {
        d->pmu_set = PX_DFX_PMU_SOFTWARE;
        snprintf(d->pmu_note, sizeof(d->pmu_note), "software counters: perf_hw=0 (%s)%s",
                 caps->f[PX_FACT_PERF_HW].note,
                 px_caps_get(caps, PX_FACT_PERF_SW) ? "" : "; perf_sw=0: only tsc_cycles");
    }
}

/* Opens pr's group on the calling thread; missing counters stay -1. */
void dfx_pmu_open(px_dfx *d, px_dfx_prod *pr)
{
    static const uint64_t hw[PX_DFX_PMU_MAX] = {PERF_COUNT_HW_CPU_CYCLES,
                                                PERF_COUNT_HW_INSTRUCTIONS,
                                                PERF_COUNT_HW_CACHE_MISSES,
                                                PERF_COUNT_HW_BRANCH_MISSES};
    static const uint64_t sw[PX_DFX_PMU_MAX - 1] = {PERF_COUNT_SW_TASK_CLOCK,
                                                    PERF_COUNT_SW_PAGE_FAULTS,
                                                    PERF_COUNT_SW_CONTEXT_SWITCHES};
    int hard = d->pmu_set == PX_DFX_PMU_HARDWARE;
    int n = hard ? PX_DFX_PMU_MAX : PX_DFX_PMU_MAX - 1;

    pr->pmu_tried = 1;
    pr->pmu_leader = -1;
    for (int i = 0; i < PX_DFX_PMU_MAX; i++)
        pr->pmu_fd[i] = -1;
    for (int i = 0; i < n; i++) {
        int group = pr->pmu_leader >= 0 ? pr->pmu_fd[pr->pmu_leader] : -1;

        pr->pmu_fd[i] = px_perf_open(hard ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE,
                                     hard ? hw[i] : sw[i], group, 1, 0);
        if (pr->pmu_fd[i] >= 0 && pr->pmu_leader < 0)
            pr->pmu_leader = i;
    }
}

/* Reads the group into v; the software set's last value is the clock. */
void dfx_pmu_read(px_dfx *d, px_dfx_prod *pr, uint64_t *v)
{
    uint64_t buf[1 + PX_DFX_PMU_MAX];
    int j = 0;
    ssize_t got = -1;

    for (int i = 0; i < PX_DFX_PMU_MAX; i++)
        v[i] = PX_DFX_PMU_NONE;
    if (pr->pmu_leader >= 0)
        got = read(pr->pmu_fd[pr->pmu_leader], buf, sizeof(buf));
    for (int i = 0; got > 0 && i < PX_DFX_PMU_MAX; i++) {
        if (pr->pmu_fd[i] < 0)
            continue;
        if (j < (int)buf[0] && (size_t)(j + 2) * sizeof(uint64_t) <= (size_t)got)
            v[i] = buf[1 + j];
        j++;
    }
    if (d->pmu_set == PX_DFX_PMU_SOFTWARE)
        v[PX_DFX_PMU_MAX - 1] = px_dfx_now();
}

/* Closes pr's counters. */
void dfx_pmu_close(px_dfx_prod *pr)
{
    for (int i = 0; pr->pmu_tried && i < PX_DFX_PMU_MAX; i++)
        if (pr->pmu_fd[i] >= 0)
            close(pr->pmu_fd[i]);
    pr->pmu_tried = 0;
}
