/*
 * bench_dfx.c - what DFX costs: per record, when off, and per task for the collectors.
 *
 *   floor     a TSC read plus a 32-byte store into a ring, per record: the least a record
 *             can cost
 *   enabled   records through the real path (px_dfx_emit into paired buffers, ready queue,
 *             drain thread, a counting collector): time from the first emit until the
 *             collector has received all N records, over at least 100 buffers, divided by N;
 *             printed with the transport that carried them; enabled_worst gives the waits of
 *             the slowest repetition against its floor (drain wake-ups and sleeps, buffers
 *             drained on their writer's CPU, writer waits for a free buffer, backstops, the
 *             writer's share of the CPU and its involuntary context switches), so a slow run
 *             says why; --records-only runs floor and enabled alone and prints
 *             every repetition (case=enabled_rep)
 *   disabled  the `chain` graph of bench_tasks (dfx_chain.c) with DFX off in this build
 *             against the same graph in a build with DFX compiled out (bench_dfx_off, built
 *             with PX_DFX=0); both run as child processes, interleaved, in alternating
 *             order
 *   timeline  the chain with swimlane, hosttrace, depgen and scopestats on against off, in
 *             this process, interleaved; every run's outputs are validated (dfx.json counts
 *             reconcile; trace.json and deps.json hold every task and edge); also the 32-byte
 *             records the run wrote per task (px_run_stats.dfx_records), and the
 *             orchestration thread's CPU time per task over its submits, off and on
 *   timeline_serial  the same collectors' cost with the two threads apart: the submits
 *             while a gate task holds the core, then the core's run of the whole chain
 *   pmu, argsdump  added microseconds per task of the pmu collector and of argsdump level 2
 *
 * Run times are px_run_stats.wall_ns, which ends before the DFX files are written; the time
 * to write them is printed separately (case=timeline_files). Targets: enabled <= 2x floor,
 * disabled overhead <= 2 %, timeline slowdown <= 10 %. docs/benchmarks.md has the details.
 */
#include "benchutil.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <plexus/plexus.h>

#include "dfx/collectors/json.h"
#include "dfx/dfx.h"
#include "dfx/records.h"
#include "dfx/transport/transport.h"
#include "dfx_chain.h"
#include "platform/platform.h"

#define BD "dfx"
#define BD_MAX_REPS 16
#define BD_RING 4096

typedef struct bd_sizes {
    uint64_t records;     /* floor and enabled: records per repetition */
    uint32_t buf_records; /* enabled: records per buffer (records / buf_records >= 100) */
    int reps;             /* floor and enabled repetitions */
    uint64_t chain;       /* chain tasks */
    int chain_reps;       /* chain repetition pairs */
    uint64_t serial;      /* timeline_serial's chain (below the default task ring's 4096) */
} bd_sizes;

static const bd_sizes bd_full = {1024 * 1024, 1024, 9, 100000, 9, 4000};
static const bd_sizes bd_quick = {256 * 1024, 1024, 5, 20000, 5, 4000};
static const bd_sizes bd_smoke = {6400, 64, 1, 200, 1, 200};

static char bd_out[200];

/* ---- floor ---- */

static px_dfx_rec bd_ring[BD_RING] __attribute__((aligned(64)));

/* Returns ns per record of a TSC read plus a 32-byte store into a ring, or -1. */
static double bd_floor(uint64_t n)
{
    uint64_t t0 = bench_now_ns(), t1;

    for (uint64_t i = 0; i < n; i++) {
        px_dfx_rec *r = &bd_ring[i & (BD_RING - 1)];

        r->ts = px_ticks();
        r->seq = (uint32_t)i;
        r->producer = 0;
        r->kind = PX_DFXK_PHASE;
        r->nrec = 1;
        r->a = i;
        r->b = i + 1;
        __asm__ __volatile__("" ::: "memory");
    }
    t1 = bench_now_ns();
    if (bd_ring[(n - 1) & (BD_RING - 1)].a != n - 1) {
        bench_fail(BD, "floor: the ring's last record holds %" PRIu64 ", expected %" PRIu64,
                   bd_ring[(n - 1) & (BD_RING - 1)].a, n - 1);
        return -1;
    }
    return (double)(t1 - t0) / (double)n;
}

/* ---- enabled: a counting collector ---- */

typedef struct bd_count {
    uint64_t n, sum_a, want;
    uint64_t t_last; /* bench_now_ns() when the want-th record arrived */
} bd_count;

static bd_count bd_cnt;

static px_status bd_open(void **state, const px_dfx_run_info *info)
{
    *state = &bd_cnt;
    return PX_OK;
}

static void bd_record(void *state, const px_dfx_rec *r)
{
    bd_count *c = state;

    c->sum_a += r->a;
    if (++c->n == c->want)
        c->t_last = bench_now_ns();
}

static px_status bd_finish(void *state, const px_dfx_run_info *info)
{
    return PX_OK;
}

static void bd_close(void *state)
{
}

static const px_dfx_collector_ops bd_ops = {
    .name = "swimlane",
    .bit = PX_DFX_SWIMLANE,
    .kinds = 1u << PX_DFXK_PHASE,
    .open = bd_open,
    .on_record = bd_record,
    .finish = bd_finish,
    .close = bd_close,
};

static const px_dfx_collector_ops *const bd_table[] = {&bd_ops, NULL};

/* What the scheduler did to the writer during one repetition. */
typedef struct bd_sched {
    double cpu_pct;       /* the writer's CPU time over the repetition's wall time, percent */
    long preempted;       /* the writer's involuntary context switches */
} bd_sched;

/* The calling thread's CPU time (ns) and involuntary context switches. */
static void bd_thread_use(uint64_t *cpu_ns, long *nivcsw)
{
    struct rusage ru;

    *cpu_ns = dfx_chain_thread_ns();
    *nivcsw = getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

/* Emits n 1-record PHASE entries through d's orchestration producer; ns per record or -1.
 * *k gets the run's waits (px_dfx_counts), *sc what the scheduler did to the writer. */
static double bd_enabled_rep(px_dfx *d, uint64_t n, px_dfx_counts *k, bd_sched *sc)
{
    px_dfx_producer *p = px_dfx_producer_of(d, 1);
    uint64_t t0, cpu0, cpu1;
    long cs0, cs1;
    px_status st;

    memset(&bd_cnt, 0, sizeof(bd_cnt));
    bd_cnt.want = n;
    bd_thread_use(&cpu0, &cs0);
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++)
        px_dfx_emit(p, PX_DFXK_PHASE, i, i + 1);
    st = px_dfx_finish(d, 1);
    bd_thread_use(&cpu1, &cs1);
    sc->cpu_pct = 100.0 * (double)(cpu1 - cpu0) / (double)(bench_now_ns() - t0);
    sc->preempted = cs1 - cs0;
    px_dfx_counts_get(d, k);
    if (st != PX_OK || bd_cnt.n != n || bd_cnt.sum_a != n * (n - 1) / 2) {
        bench_fail(BD, "enabled: %s: the collector got %" PRIu64 " of %" PRIu64 " records "
                   "(sum of a %" PRIu64 ", expected %" PRIu64 ")", st ? px_last_error() : "ok",
                   bd_cnt.n, n, bd_cnt.sum_a, n * (n - 1) / 2);
        return -1;
    }
    return (double)(bd_cnt.t_last - t0) / (double)n;
}

/* Opens a chip and a DFX state with the counting collector; returns d or NULL. */
static px_dfx *bd_enabled_open(px_chip **chip, px_config *c, const bd_sizes *sz)
{
    px_dfx_params prm = {0};
    px_caps caps;
    px_dfx *d = NULL;
    px_status st = px_config_default(c);

    c->dfx = PX_DFX_SWIMLANE;
    c->dfx_strict = 1;
    c->dfx_buffer_records = sz->buf_records;
    snprintf(c->out_dir, sizeof(c->out_dir), "%s/enabled", bd_out);
    if (st == PX_OK)
        st = px_caps_probe_with(c, &caps);
    if (st == PX_OK)
        st = px_plat_chip_open(&caps, 0, 64 << 20, chip);
    prm.cfg = c;
    prm.chip = *chip;
    prm.dev_region = *chip ? px_plat_dev_base(*chip) : NULL;
    prm.dev_region_bytes = px_dfx_region_bytes(c, 1);
    prm.ncores = 1;
    px_dfx_set_collectors(bd_table);
    if (st == PX_OK)
        st = px_dfx_create(&prm, &d);
    px_dfx_set_collectors(NULL);
    if (st != PX_OK)
        bench_fail(BD, "enabled: setup failed: %s: %s", px_status_name(st), px_last_error());
    return st == PX_OK ? d : NULL;
}

/* The waits of the slowest enabled repetition (against its own floor): why it was slow. */
static void bd_worst(const double *fl, const double *en, const px_dfx_counts *k,
                     const bd_sched *sc, int reps)
{
    int w = 0;

    for (int r = 1; r < reps; r++)
        if (en[r] / fl[r] > en[w] / fl[w])
            w = r;
    bench_line(BD, "case=enabled_worst over_floor=%.2f publishes=%" PRIu64 " drained=%" PRIu64
               " drain_wakes=%" PRIu64 " drain_sleeps=%" PRIu64 " same_cpu=%" PRIu64
               " writer_drained=%" PRIu64 " finish_drained=%" PRIu64 " writer_waits=%" PRIu64
               " writer_sleeps=%" PRIu64 " writer_wait_ms=%.2f backstops=%" PRIu64
               " writer_cpu_pct=%.0f writer_preempted=%ld", en[w] / fl[w], k[w].publishes,
               k[w].drained, k[w].drain_wakes, k[w].drain_sleeps, k[w].same_cpu,
               k[w].writer_drained, k[w].finish_drained, k[w].writer_waits,
               k[w].writer_sleeps, (double)k[w].writer_wait_ns / 1e6, k[w].backstops,
               sc[w].cpu_pct, sc[w].preempted);
}

/* floor and enabled, interleaved; prints both lines and the slowest repetition's waits
 * (detail: every repetition's). */
static void bd_records(const bd_sizes *sz, int detail)
{
    double fl[BD_MAX_REPS], en[BD_MAX_REPS], fl_rep[BD_MAX_REPS], en_rep[BD_MAX_REPS];
    px_dfx_counts k[BD_MAX_REPS];
    bd_sched sc[BD_MAX_REPS];
    char transport[32] = "none";
    px_chip *chip = NULL;
    px_config c;
    int ok = 1;

    for (int r = 0; r < sz->reps && ok; r++) {
        px_dfx *d = bd_enabled_open(&chip, &c, sz);

        fl[r] = bd_floor(sz->records);
        en[r] = d ? bd_enabled_rep(d, sz->records, &k[r], &sc[r]) : -1;
        if (d)
            snprintf(transport, sizeof(transport), "%s", px_dfx_transport_name(d, 0));
        ok = d != NULL && fl[r] >= 0 && en[r] >= 0;
        if (detail && ok)
            bench_line(BD, "case=enabled_rep rep=%d floor=%.2f enabled=%.2f over_floor=%.2f "
                       "drain_wakes=%" PRIu64 " drain_sleeps=%" PRIu64 " same_cpu=%" PRIu64
                       " writer_drained=%" PRIu64 " finish_drained=%" PRIu64 " writer_waits=%"
                       PRIu64 " writer_wait_ms=%.2f writer_cpu_pct=%.0f writer_preempted=%ld",
                       r, fl[r], en[r], en[r] / fl[r], k[r].drain_wakes, k[r].drain_sleeps,
                       k[r].same_cpu, k[r].writer_drained, k[r].finish_drained,
                       k[r].writer_waits,
                       (double)k[r].writer_wait_ns / 1e6, sc[r].cpu_pct, sc[r].preempted);
        px_dfx_destroy(d);
        px_plat_chip_close(chip);
        chip = NULL;
    }
    if (!ok)
        return;
    memcpy(fl_rep, fl, sizeof(fl));
    memcpy(en_rep, en, sizeof(en));
    bench_line(BD, "case=floor ns_per_record=%.2f transport=none", bench_median(fl, sz->reps));
    bench_line(BD, "case=enabled ns_per_record=%.2f transport=%s", bench_median(en, sz->reps),
               transport);
    bd_worst(fl_rep, en_rep, k, sc, sz->reps); /* bench_median sorted fl and en */
}

/* ---- disabled: two builds as child processes ---- */

/* Runs `prog --chain n --reps 3` and returns the median us per task it printed, or -1. */
static double bd_child(const char *prog, uint64_t n)
{
    char cmd[PATH_MAX + 64], line[256];
    double v[8];
    int k = 0;
    FILE *f;

    snprintf(cmd, sizeof(cmd), "PLEXUS_DFX=0 '%s' --chain %" PRIu64 " --reps 3", prog, n);
    f = popen(cmd, "r");
    if (f == NULL) {
        bench_fail(BD, "disabled: cannot run %s", prog);
        return -1;
    }
    while (fgets(line, sizeof(line), f) && k < 8)
        if (sscanf(line, "CHAIN us_per_task=%lf", &v[k]) == 1)
            k++;
    if (pclose(f) != 0 || k != 3) {
        bench_fail(BD, "disabled: %s --chain %" PRIu64 " failed (%d results)", prog, n, k);
        return -1;
    }
    return bench_median(v, k);
}

/* The path of this program's sibling `name` (same directory). */
static void bd_sibling(const char *name, char *out, size_t n)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    self[len > 0 ? len : 0] = '\0';
    slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, n, "%s/%s", slash ? self : ".", name);
}

static void bd_disabled(const bd_sizes *sz)
{
    char self[PATH_MAX + 32], off[PATH_MAX + 32];
    double pct[BD_MAX_REPS];

    bd_sibling("bench_dfx", self, sizeof(self));
    bd_sibling("bench_dfx_off", off, sizeof(off));
    if (access(off, X_OK) != 0) {
        bench_fail(BD, "disabled: %s is missing; `make bench` builds it (bench/CMakeLists.txt)",
                   off);
        return;
    }
    for (int r = 0; r < sz->chain_reps; r++) {
        /* the order alternates, so neither build always runs first after the other */
        double on = r % 2 == 0 ? bd_child(self, sz->chain) : -1;
        double out = bd_child(off, sz->chain);

        if (r % 2 != 0)
            on = bd_child(self, sz->chain);

        if (on < 0 || out <= 0)
            return;
        pct[r] = (on - out) / out * 100.0;
    }
    bench_line(BD, "case=disabled overhead_pct=%.2f", bench_median(pct, sz->chain_reps));
}

/* ---- timeline, pmu, argsdump: the chain in this process ---- */

/* Checks dir/dfx.json: collector name reconciled, nothing dropped, `want` entries if > 0;
 * *drain_ns (when not NULL) receives its drain_cpu_ns, which must be there. */
static int bd_check_json_drain(const char *dir, const char *name, double want,
                               double *drain_ns)
{
    char path[400];
    dfxc_json *j = NULL;
    const dfxc_json *c;
    int ok;

    snprintf(path, sizeof(path), "%s/dfx.json", dir);
    if (dfxc_json_load(path, &j) != PX_OK) {
        bench_fail(BD, "%s", px_last_error());
        return -1;
    }
    c = dfxc_json_get(dfxc_json_get(j, "collectors"), name);
    ok = c != NULL && dfxc_json_num(c, "dropped", -1) == 0 &&
         dfxc_json_num(c, "collected", -1) == dfxc_json_num(c, "produced", -2) &&
         (want <= 0 || dfxc_json_num(c, "produced", -1) == want);
    if (!ok)
        bench_fail(BD, "%s: collector %s does not reconcile or has %.0f entries, expected %.0f",
                   path, name, c ? dfxc_json_num(c, "produced", -1) : -1, want);
    if (ok && drain_ns != NULL && (*drain_ns = dfxc_json_num(j, "drain_cpu_ns", -1)) < 0) {
        bench_fail(BD, "%s has no drain_cpu_ns", path);
        ok = 0;
    }
    dfxc_json_free(j);
    return ok ? 0 : -1;
}

static int bd_check_json(const char *dir, const char *name, double want)
{
    return bd_check_json_drain(dir, name, want, NULL);
}

/* Checks trace.json (n task slices, n - 8 flows) and deps.json (n tasks, n - 8 edges). */
static int bd_check_files(const char *dir, uint64_t n)
{
    char path[400];
    dfxc_json *j = NULL;
    const dfxc_json *ev, *tasks, *edges;
    size_t slices = 0, flows = 0;
    int ok;

    snprintf(path, sizeof(path), "%s/trace.json", dir);
    if (dfxc_json_load(path, &j) != PX_OK || (ev = dfxc_json_get(j, "traceEvents")) == NULL) {
        bench_fail(BD, "timeline: %s does not parse: %s", path, px_last_error());
        dfxc_json_free(j);
        return -1;
    }
    for (size_t i = 0; i < ev->n; i++) {
        slices += strcmp(dfxc_json_str(&ev->kids[i], "cat", ""), "task") == 0;
        flows += strcmp(dfxc_json_str(&ev->kids[i], "ph", ""), "s") == 0;
    }
    dfxc_json_free(j);
    snprintf(path, sizeof(path), "%s/deps.json", dir);
    ok = dfxc_json_load(path, &j) == PX_OK && (tasks = dfxc_json_get(j, "tasks")) != NULL &&
         (edges = dfxc_json_get(j, "edges")) != NULL && tasks->n == n &&
         edges->n == n - DFX_CHAIN_CHAINS && slices == n && flows == n - DFX_CHAIN_CHAINS;
    if (!ok)
        bench_fail(BD, "timeline: %zu task slices and %zu flows in trace.json, deps.json %s; "
                   "expected %" PRIu64 " tasks and %" PRIu64 " edges", slices, flows,
                   j ? "has other counts" : "does not parse", n, n - DFX_CHAIN_CHAINS);
    dfxc_json_free(j);
    return ok ? 0 : -1;
}

/* A chain worker with the collectors `dfx` (0: off) writing into bd_out/<name>. */
static int bd_chain_open(dfx_chain *c, uint32_t dfx, int args_level, const char *name)
{
    char why[1024];
    px_config cfg;

    if (px_config_default(&cfg) != PX_OK) {
        bench_fail(BD, "configuration: %s", px_last_error());
        return -1;
    }
    cfg.dfx = dfx;
    cfg.dfx_strict = 1;
    cfg.dfx_args_level = args_level;
    snprintf(cfg.out_dir, sizeof(cfg.out_dir), "%s/%.40s", bd_out, name);
    if (dfx_chain_open(c, &cfg, why, sizeof(why)) != 0) {
        bench_fail(BD, "%s: %s", name, why);
        return -1;
    }
    return 0;
}

/* One chain run; returns us per task from px_run_stats (before DFX files) or -1. */
static double bd_chain_rep(dfx_chain *c, uint64_t n, double *total_us)
{
    char why[1024];
    px_run_stats rs;
    uint64_t t0 = bench_now_ns();
    double us = dfx_chain_run(c, n, why, sizeof(why));

    *total_us = (double)(bench_now_ns() - t0) / 1e3;
    if (us < 0) {
        bench_fail(BD, "%s", why);
        return -1;
    }
    px_run_stats_get(c->w, &rs);
    return (double)rs.wall_ns / 1e3 / (double)n;
}

/* Runs off and on chains interleaved; fills per-task times; checks each on-run with chk. */
typedef int (*bd_check_fn)(uint64_t n, int rep);

static int bd_pairs(const bd_sizes *sz, dfx_chain *off, dfx_chain *on, double *t_off,
                    double *t_on, double *write_ms, bd_check_fn chk, double *cpu_off,
                    double *cpu_on)
{
    double total;

    for (int r = 0; r < sz->chain_reps; r++) {
        t_off[r] = bd_chain_rep(off, sz->chain, &total);
        cpu_off[r] = (double)off->orch_cpu_ns / (double)sz->chain;
        t_on[r] = bd_chain_rep(on, sz->chain, &total);
        cpu_on[r] = (double)on->orch_cpu_ns / (double)sz->chain;
        if (t_off[r] < 0 || t_on[r] < 0 || chk(sz->chain, r) != 0)
            return -1;
        write_ms[r] = total / 1e3 - t_on[r] * (double)sz->chain / 1e3;
    }
    return 0;
}

/* Where the timeline case's worker writes. */
static const char *bd_timeline_dir(void)
{
    static char dir[300];

    snprintf(dir, sizeof(dir), "%s/timeline", bd_out);
    return dir;
}

static int bd_check_timeline(uint64_t n, int rep)
{
    static const char *const colls[] = {"swimlane", "hosttrace", "depgen", "scopestats"};
    const char *dir = bd_timeline_dir();

    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++)
        if (bd_check_json(dir, colls[i], 0) != 0)
            return -1;
    return rep == 0 ? bd_check_files(dir, n) : 0;
}

static int bd_check_pmu(uint64_t n, int rep)
{
    char dir[300];

    snprintf(dir, sizeof(dir), "%s/pmu", bd_out);
    return bd_check_json(dir, "pmu", (double)n); /* one PMU entry per task */
}

/* Level 2 on the chain: SUBMIT (with its 3 args) + 1 ARGDATA (the marked INOUT, after) per
 * task. */
static int bd_check_args(uint64_t n, int rep)
{
    char dir[300];

    snprintf(dir, sizeof(dir), "%s/argsdump", bd_out);
    return bd_check_json(dir, "argsdump", 2.0 * (double)n);
}

/*
 * The timeline's cost with the chain's two sides apart (dfx_chain_run_serial): the submits
 * while a gate task holds the core, then the core's run of the whole chain. Neither side
 * waits for the other, so each part is that thread's own work per task, and the on/off
 * difference is what the collectors add to it; the chain's own timing instead follows how the
 * two threads hand cache lines back and forth, which DFX perturbs in either direction. The
 * drain runs on the core's CPU (bind=cores keeps it off the orchestration's): during the
 * submits it is free, during the execution it is counted.
 */
static void bd_serial(const bd_sizes *sz, dfx_chain *off, dfx_chain *on)
{
    double so[BD_MAX_REPS], sn[BD_MAX_REPS], eo[BD_MAX_REPS], en[BD_MAX_REPS];
    double pct[BD_MAX_REPS], dr[BD_MAX_REPS];
    uint64_t n = sz->serial;
    char why[1024];

    for (int r = 0; r < sz->chain_reps; r++) {
        dfx_chain *c[2] = {r % 2 ? on : off, r % 2 ? off : on};

        for (int k = 0; k < 2; k++)
            if (dfx_chain_run_serial(c[k], n, why, sizeof(why)) != 0) {
                bench_fail(BD, "timeline_serial: %s", why);
                return;
            }
        if (bd_check_json_drain(bd_timeline_dir(), "swimlane", 0, &dr[r]) != 0)
            return;
        dr[r] /= (double)n;
        so[r] = (double)off->submit_ns / (double)n;
        sn[r] = (double)on->submit_ns / (double)n;
        eo[r] = (double)off->exec_ns / (double)n;
        en[r] = (double)on->exec_ns / (double)n;
        pct[r] = (sn[r] + en[r] - so[r] - eo[r]) / (so[r] + eo[r]) * 100.0;
    }
    bench_line(BD, "case=timeline_serial tasks=%" PRIu64 " submit_off_ns=%.1f submit_on_ns=%.1f "
               "exec_off_ns=%.1f exec_on_ns=%.1f added_pct=%.2f drain_cpu_ns=%.1f", n,
               bench_median(so, sz->chain_reps), bench_median(sn, sz->chain_reps),
               bench_median(eo, sz->chain_reps), bench_median(en, sz->chain_reps),
               bench_median(pct, sz->chain_reps), bench_median(dr, sz->chain_reps));
}

/* The three in-process cases. */
static void bd_collectors(const bd_sizes *sz)
{
    static const struct {
        const char *name;
        uint32_t dfx;
        int level;
        bd_check_fn chk;
    } cases[] = {
        {"timeline", PX_DFX_SWIMLANE | PX_DFX_HOSTTRACE | PX_DFX_DEPGEN | PX_DFX_SCOPESTATS, 1,
         bd_check_timeline},
        {"pmu", PX_DFX_PMU, 1, bd_check_pmu},
        {"argsdump", PX_DFX_ARGSDUMP, 2, bd_check_args},
    };
    double t_off[BD_MAX_REPS], t_on[BD_MAX_REPS], w[BD_MAX_REPS], v[BD_MAX_REPS];
    double c_off[BD_MAX_REPS], c_on[BD_MAX_REPS], c_pct[BD_MAX_REPS];
    dfx_chain off, on;

    if (bd_chain_open(&off, 0, 1, "off") != 0)
        return;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        if (bd_chain_open(&on, cases[k].dfx, cases[k].level, cases[k].name) != 0)
            break;
        if (bd_pairs(sz, &off, &on, t_off, t_on, w, cases[k].chk, c_off, c_on) == 0) {
            for (int r = 0; r < sz->chain_reps; r++)
                v[r] = k == 0 ? (t_on[r] - t_off[r]) / t_off[r] * 100.0 : t_on[r] - t_off[r];
            if (k == 0) {
                px_run_stats rs;

                bench_line(BD, "case=timeline slowdown_pct=%.2f",
                           bench_median(v, sz->chain_reps));
                for (int r = 0; r < sz->chain_reps; r++)
                    c_pct[r] = (c_on[r] - c_off[r]) / c_off[r] * 100.0;
                bench_line(BD, "case=timeline_orch_cpu off_ns_per_task=%.1f on_ns_per_task=%.1f "
                           "added_pct=%.2f", bench_median(c_off, sz->chain_reps),
                           bench_median(c_on, sz->chain_reps),
                           bench_median(c_pct, sz->chain_reps));
                if (px_run_stats_get(on.w, &rs) == PX_OK) {
                    bench_line(BD, "case=timeline_records records_per_task=%.2f",
                               (double)rs.dfx_records / (double)sz->chain);
                    bench_line(BD, "case=timeline_waits buffers=%" PRIu64 " drain_wakes=%"
                               PRIu64 " writer_drained=%" PRIu64 " writer_waits=%" PRIu64,
                               rs.dfx_buffers, rs.dfx_drain_wakes, rs.dfx_writer_drained,
                               rs.dfx_writer_waits);
                }
                bench_line(BD, "case=timeline_files ms_to_write=%.2f",
                           bench_median(w, sz->chain_reps));
                bd_serial(sz, &off, &on);
            } else {
                bench_line(BD, "case=%s us_per_task_added=%.3f", cases[k].name,
                           bench_median(v, sz->chain_reps));
            }
        }
        dfx_chain_close(&on);
    }
    dfx_chain_close(&off);
}

/* Prints the pinned configuration, the transport first. */
static void bd_config(const bd_sizes *sz, bench_mode mode)
{
    px_dfx_choice ch[PX_DFX_NCOLLECTORS];
    px_config c;
    px_caps caps;
    int tp = -1;

    if (px_config_default(&c) == PX_OK && px_caps_probe_with(&c, &caps) == PX_OK &&
        px_dfx_plan(&caps, &c, PX_DFX_ALL, DFX_CHAIN_CORES + 1, ch) == PX_OK)
        tp = ch[0].transport;
    bench_line(BD, "config transport=%s profile=%s records=%" PRIu64 " buffer_records=%u "
               "reps=%d chain_tasks=%" PRIu64 " chain_reps=%d cores=%d bind=%s clock=%s "
               "mode=%s", tp >= 0 ? px_dfx_transport_get(tp)->name : "none", c.device_profile,
               sz->records, sz->buf_records, sz->reps, sz->chain, sz->chain_reps,
               DFX_CHAIN_CORES, c.bind ? "cores" : "none",
               px_caps_get(&caps, PX_FACT_TSC_INVARIANT) ? "tsc" : "monotonic",
               bench_mode_name(mode));
}

int main(int argc, char **argv)
{
    int rc, records_only = 0;
    const bd_sizes *sz;
    bench_mode mode;
    char cmd[320];

    /* --records-only: the floor and enabled cases alone, each repetition printed (for many
     * runs of the per-record cost) */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--records-only") == 0) {
            records_only = 1;
            memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(*argv));
            argc--;
            break;
        }
    if (argc > 1 && strcmp(argv[1], "--chain") == 0)
        return dfx_chain_main(argc, argv);
    if ((rc = bench_start(argc, argv, "bench_dfx", "what DFX records cost: per record, "
                             "when off, and per task for the collectors\n  "
                             "(--records-only with any mode: the floor and enabled cases "
                             "alone, every repetition printed)", &mode)) >= 0)
        return rc;
    if (!PX_DFX) {
        printf("BENCH dfx skipped=dfx_compiled_out (CMake option PX_DFX=OFF)\n");
        return 77;
    }
    sz = mode == BENCH_FULL ? &bd_full : mode == BENCH_QUICK ? &bd_quick : &bd_smoke;
    snprintf(bd_out, sizeof(bd_out), "%s/px_bench_dfx_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(bd_out) == NULL) {
        bench_fail(BD, "cannot create a temporary directory %s", bd_out);
        return bench_finish();
    }
    /* The chain compares workers and processes: their threads must sit on the same CPUs in
     * every one of them (unbound, the OS's placement alone moved the chain by 2x; see
     * docs/benchmarks.md): its core on the first CPU, the orchestration on the second. The
     * children inherit it; PLEXUS_BIND=none in the environment wins. */
    setenv("PLEXUS_BIND", "cores", 0);
    bd_config(sz, mode);
    bd_records(sz, records_only);
    if (!records_only) {
        bd_disabled(sz);
        bd_collectors(sz);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", bd_out);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_dfx: could not remove %s\n", bd_out);
    return bench_finish();
}
