/*
 * test_dfx_collectors.c - every DFX collector fed synthetic records of one small run, then its
 * files parsed back and compared with values worked out by hand; plus the JSON reader (whole
 * and element by element), the raw record store, the text output helpers, the report writer
 * and the collector table.
 *
 * The synthetic run is the vector example's graph with task ids 101..105 (so renumbering to
 * 0..4 is visible): t0 = add(a, b) -> c, t1 = add_scalar(c, 1.0) -> d, t2 = add_scalar(c,
 * 2.0) -> e, t3 = mul(d, e) -> g, t4 = add(g, c) -> f. Edges: 0->1, 0->2, 1->3, 2->3, 3->4,
 * 0->4 (6), with 0->1 recorded twice. The clock runs 2 ticks per ns from t0_ticks = 1000;
 * task i begins 1000*i ns and ends 500 ns later, on core 0 (tasks 0, 1, 3) or core 1 (2, 4).
 * Tensors a b c d e g f live at distinct addresses: buffers 0..6 in order of first use.
 */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfx/collectors/collectors.h"
#include "dfx/collectors/json.h"
#include "dfx/collectors/model.h"
#include "dfx/collectors/out.h"
#include "dfx/collectors/raw.h"
#include "dfx/records.h"

#define T0 1000ull /* t0_ticks */
#define TPN 2      /* ticks per ns */
#define ID0 101ull /* first task id */
#define MAXREC 1024

typedef struct recs {
    px_dfx_rec r[MAXREC];
    int n;
} recs;

static const char *const kernels[] = {"vector.add", "vector.add_scalar", "vector.mul"};
static const char *const producers[] = {"core 0", "core 1", "orchestration"};
static char outdir[256];

/* Makes a fresh empty output directory. */
static void fresh_dir(void)
{
    px_test_mkdtemp(outdir, sizeof(outdir), "px_dfxc");
}

/* Removes the output directory and what is in it. */
static void remove_dir(void)
{
    px_test_rmtree(outdir);
}

static px_dfx_run_info run_info(void)
{
    px_dfx_run_info i = {
        .out_dir = outdir,
        .ticks_per_ns = TPN,
        .t0_ticks = T0,
        .clock = "tsc",
        .chip = 0,
        .nproducers = 3,
        .producer_names = producers,
        .nkernels = 3,
        .kernel_names = kernels,
        .dropped = 0,
        .enabled = PX_DFX_ALL,
        .args_level = 2,
        .pmu_set = PX_DFX_PMU_SOFTWARE,
        .pmu_note = "perf_hw=0: perf_event_paranoid 3",
        .device_profile = "default",
    };

    return i;
}

/* Appends an entry of nrec records; returns its first record. */
static px_dfx_rec *add(recs *b, int kind, int nrec, uint64_t ns, int producer, uint64_t a,
                       uint64_t bb)
{
    px_dfx_rec *r = &b->r[b->n];

    assert_true(b->n + nrec <= MAXREC);
    memset(r, 0, (size_t)nrec * sizeof(*r));
    r->ts = T0 + TPN * ns;
    r->producer = (uint16_t)producer;
    r->kind = (uint8_t)kind;
    r->nrec = (uint8_t)nrec;
    r->a = a;
    r->b = bb;
    b->n += nrec;
    return r;
}

static const int task_core[5] = {0, 0, 1, 0, 1};
static const int task_kernel[5] = {0, 1, 1, 2, 0};

/* Sets argument index of a to a tensor of 4 floats at addr (marked when m). */
static void tensor_arg(px_task_args *a, int index, int tag, uint64_t addr, int m)
{
    px_arg *x = &a->a[index];
    int64_t shape[1] = {4};

    memset(x, 0, sizeof(*x));
    x->tag = (uint8_t)tag;
    x->marked = (uint8_t)m;
    px_tensor_make(&x->v.t, (void *)(uintptr_t)addr, PX_F32, 1, shape);
}

static void scalar_arg(px_task_args *a, int index, double v)
{
    px_arg *x = &a->a[index];

    memset(x, 0, sizeof(*x));
    x->tag = PX_TAG_SCALAR;
    x->scalar_kind = PX_SCALAR_F64;
    x->v.f64 = v;
}

/* One SUBMIT of task i at 200 + 10 i ns, 5 ns long, with its 3 args and n edges' producers. */
static void add_submit(recs *b, int i, int kernel, px_task_args *a, const int *prod, int n)
{
    px_task_id p[4];
    px_dfx_rec *r;

    a->n = 3;
    for (int k = 0; k < n; k++)
        p[k] = ID0 + (uint64_t)prod[k];
    r = add(b, PX_DFXK_SUBMIT,
            (int)px_dfx_nrec_for_words(px_dfx_submit_words(a, (uint32_t)n)),
            200 + 10ull * (uint64_t)i, 2, 0, 0);
    px_dfx_submit_put(r, ID0 + (uint64_t)i, kernel, TPN * 5, a, p, (uint32_t)n);
}

/*
 * The five SUBMITs (addresses: a b c d e g f) with their edges: 0->1 twice, 0->2, 1->3,
 * 2->3, 3->4; 0->4 comes in an EDGE entry (a task whose SUBMIT had no room left).
 */
static void add_submits(recs *b)
{
    const uint64_t A = 0x10000, B = 0x20000, C = 0x30000, D = 0x31000, E = 0x32000, G = 0x33000,
                   F = 0x40000;
    static const int e1[2] = {0, 0}, e2[1] = {0}, e3[2] = {1, 2}, e4[1] = {3};
    const px_task_id e4b[1] = {ID0};
    px_task_args a;

    tensor_arg(&a, 0, PX_TAG_IN, A, 1);
    tensor_arg(&a, 1, PX_TAG_IN, B, 0);
    tensor_arg(&a, 2, PX_TAG_OUT, C, 0);
    add_submit(b, 0, 0, &a, NULL, 0);
    tensor_arg(&a, 0, PX_TAG_IN, C, 0);
    scalar_arg(&a, 1, 1.0);
    tensor_arg(&a, 2, PX_TAG_OUT, D, 0);
    add_submit(b, 1, 1, &a, e1, 2);
    tensor_arg(&a, 0, PX_TAG_IN, C, 0);
    scalar_arg(&a, 1, 2.0);
    tensor_arg(&a, 2, PX_TAG_OUT, E, 0);
    add_submit(b, 2, 1, &a, e2, 1);
    tensor_arg(&a, 0, PX_TAG_IN, D, 0);
    tensor_arg(&a, 1, PX_TAG_IN, E, 0);
    tensor_arg(&a, 2, PX_TAG_OUT, G, 0);
    add_submit(b, 3, 2, &a, e3, 2);
    px_dfx_edge_put(add(b, PX_DFXK_EDGE, (int)px_dfx_nrec_for_words(1), 240, 2, 0, 0),
                    ID0 + 4, e4b, 1);
    tensor_arg(&a, 0, PX_TAG_IN, G, 0);
    tensor_arg(&a, 1, PX_TAG_IN, C, 0);
    tensor_arg(&a, 2, PX_TAG_OUT, F, 0);
    add_submit(b, 4, 0, &a, e4, 1);
}

/* One TASK per task: run from 1000 i ns for 500 ns (core.run), no wait, no release. */
static void add_tasks(recs *b)
{
    for (int i = 0; i < 5; i++) {
        px_dfx_rec *r = add(b, PX_DFXK_TASK, (int)px_dfx_nrec_for_words(PX_DFX_TASK_WORDS),
                            1000ull * (uint64_t)i, task_core[i], 0, 0);

        px_dfx_task_put(r, ID0 + (uint64_t)i, task_kernel[i], task_core[i], PX_OK, 0, TPN * 500,
                        0, PX_DFX_TASK_RAN);
    }
}

/* px_run [0, 6000) ns with 5 tasks; copy_in [1, 101) ns of 4096 bytes. */
static void add_host(recs *b)
{
    px_dfx_rec *r = add(b, PX_DFXK_HOST, 1, 0, 2, 0, 5);

    r->a = PX_HOST_RUN | (uint64_t)(TPN * 6000) << 8;
    r = add(b, PX_DFXK_HOST, 1, 1, 2, 0, 4096);
    r->a = PX_HOST_COPY_IN | (uint64_t)(TPN * 100) << 8;
}

static void add_scopes(recs *b)
{
    px_dfx_occupancy o1 = {.tasks_live = 0,
                           .task_slots = 1024,
                           .heap_live = 0,
                           .heap_size = 1 << 20,
                           .tmap_entries = 0};
    px_dfx_occupancy o2 = {.tasks_live = 5,
                           .task_slots = 1024,
                           .heap_live = 256,
                           .heap_size = 1 << 20,
                           .tmap_entries = 7};
    int n = (int)px_dfx_nrec_for_words(PX_DFX_SCOPE_WORDS);

    px_dfx_scope_put(add(b, PX_DFXK_SCOPE, n, 5, 2, 0, 0), 2, 1, &o1);
    px_dfx_scope_put(add(b, PX_DFXK_SCOPE, n, 5600, 2, 0, 0), 2, 0, &o2);
}

/* One PMU entry per task: task_clock 100*i+1, faults 0, ctx switches not counted, tsc 7. */
static void add_pmu(recs *b)
{
    int n = (int)px_dfx_nrec_for_words(PX_DFX_PMU_WORDS);

    for (int i = 4; i >= 0; i--) {
        uint64_t v[4] = {100ull * (uint64_t)i + 1, 0, PX_DFX_PMU_NONE, 7};

        px_dfx_pmu_put(add(b, PX_DFXK_PMU, n, 1000ull * (uint64_t)i + 500, task_core[i], 0, 0),
                       ID0 + (uint64_t)i, PX_DFX_PMU_SOFTWARE, task_core[i], v);
    }
}

/* Task 0 arg 0 (marked): 16 bytes 0..15 in two chunks; task 3 arg 2: 40 bytes of 0xab, cut
 * short (truncated), after the kernel, in one chunk. Chunks of the two interleave. */
static void add_argdata(recs *b)
{
    uint8_t bytes[40];
    px_dfx_rec *r;

    for (int i = 0; i < 16; i++)
        bytes[i] = (uint8_t)i;
    r = add(b, PX_DFXK_ARGDATA, 2, 0, 0, 0, 0);
    px_dfx_argdata_put(r, ID0, 0, 0, 8, 0);
    memcpy(r + 1, bytes, 8);
    memset(bytes, 0xab, sizeof(bytes));
    r = add(b, PX_DFXK_ARGDATA, 3, 3500, 0, 0, 0);
    px_dfx_argdata_put(r, ID0 + 3, 2, 0, 40,
                       PX_DFX_ARGDATA_LAST | PX_DFX_ARGDATA_TRUNCATED | PX_DFX_ARGDATA_AFTER);
    memcpy(r + 1, bytes, 40);
    for (int i = 0; i < 16; i++)
        bytes[i] = (uint8_t)i;
    r = add(b, PX_DFXK_ARGDATA, 2, 0, 0, 0, 0);
    px_dfx_argdata_put(r, ID0, 0, 8, 8, PX_DFX_ARGDATA_LAST);
    memcpy(r + 1, bytes + 8, 8);
}

static void all_records(recs *b)
{
    b->n = 0;
    add_submits(b);
    add_tasks(b);
    add_host(b);
    add_scopes(b);
    add_pmu(b);
    add_argdata(b);
}

/* Opens the collectors of table `ops` (NULL-terminated), feeds b to each (only the kinds it
 * asks for, as the drain does), finishes and closes them. */
static void run_collectors(const px_dfx_collector_ops *const *ops, const recs *b,
                           const px_dfx_run_info *info)
{
    void *st[8] = {0};
    int n = 0;

    for (; ops[n] != NULL; n++)
        PX_ASSERT_OK(ops[n]->open(&st[n], info));
    for (int i = 0; i < b->n; i += b->r[i].nrec)
        for (int k = 0; k < n; k++)
            if (ops[k]->kinds & (1u << b->r[i].kind))
                ops[k]->on_record(st[k], &b->r[i]);
    for (int k = 0; k < n; k++)
        PX_ASSERT_OK(ops[k]->finish(st[k], info));
    for (int k = 0; k < n; k++)
        ops[k]->close(st[k]);
}

static dfxc_json *load(const char *name)
{
    char path[400];
    dfxc_json *j = NULL;

    snprintf(path, sizeof(path), "%s/%s", outdir, name);
    PX_ASSERT_OK(dfxc_json_load(path, &j));
    return j;
}

static int exists(const char *name)
{
    char path[400];

    snprintf(path, sizeof(path), "%s/%s", outdir, name);
    return access(path, F_OK) == 0;
}

/* Counts trace events with phase ph and (unless NULL) category cat. */
static int count_events(const dfxc_json *ev, const char *ph, const char *cat)
{
    int n = 0;

    for (size_t i = 0; i < ev->n; i++)
        if (strcmp(dfxc_json_str(&ev->kids[i], "ph", ""), ph) == 0 &&
            (cat == NULL || strcmp(dfxc_json_str(&ev->kids[i], "cat", ""), cat) == 0))
            n++;
    return n;
}

/* The X event of category task whose args.task is id. */
static const dfxc_json *task_event(const dfxc_json *ev, int id)
{
    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];

        if (strcmp(dfxc_json_str(e, "cat", ""), "task") == 0 &&
            dfxc_json_num(dfxc_json_get(e, "args"), "task", -1) == id)
            return e;
    }
    fail_msg("no task event for task %d", id);
    return NULL;
}

/*
 * swimlane + hosttrace write one trace.json: 5 task slices (task i at i us for 0.5 us on
 * core 0,0,1,0,1, named by kernel), 10 phase slices, 2 host slices, 6 flow pairs (the
 * duplicate edge once), 3 thread names; version 1 in otherData.
 */
static void test_trace_swimlane_hosttrace(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_swimlane_ops, &px_dfx_hosttrace_ops, NULL};
    px_dfx_run_info info;
    static recs b;
    dfxc_json *j;
    const dfxc_json *ev;

    fresh_dir();
    info = run_info();
    all_records(&b);
    run_collectors(ops, &b, &info);
    j = load("trace.json");
    assert_int_equal(dfxc_json_num(dfxc_json_get(j, "otherData"), "version", 0), 1);
    assert_string_equal(dfxc_json_str(j, "displayTimeUnit", ""), "ns");
    assert_int_equal(dfxc_json_num(dfxc_json_get(j, "otherData"), "clamped", -1), 0);
    ev = dfxc_json_get(j, "traceEvents");
    assert_non_null(ev);
    assert_int_equal(count_events(ev, "X", "task"), 5);
    assert_int_equal(count_events(ev, "X", "phase"), 10);
    assert_int_equal(count_events(ev, "X", "host"), 2);
    assert_int_equal(count_events(ev, "s", "dep"), 6);
    assert_int_equal(count_events(ev, "f", "dep"), 6);
    assert_int_equal(count_events(ev, "M", NULL), 1 + 2 * 3); /* process + 3 x (name, sort) */
    for (int i = 0; i < 5; i++) {
        const dfxc_json *e = task_event(ev, i);

        assert_true(dfxc_json_num(e, "ts", -1) == (double)i);
        assert_true(dfxc_json_num(e, "dur", -1) == 0.5);
        assert_int_equal(dfxc_json_num(e, "tid", -1), task_core[i]);
        assert_int_equal(dfxc_json_num(e, "pid", -1), 0);
        assert_string_equal(dfxc_json_str(e, "name", ""), kernels[task_kernel[i]]);
    }
    dfxc_json_free(j);
    remove_dir();
}

/* The flow of edge 0->1: "s" 1 ns before task 0's end (0.499 us) on core 0, "f" with
 * binding point "e" at task 1's start (1.000 us) on core 0; ids are 0..5 by sorted edge. */
static void test_trace_flows(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_swimlane_ops, NULL};
    px_dfx_run_info info;
    static recs b;
    dfxc_json *j;
    const dfxc_json *ev;
    int seen = 0;

    fresh_dir();
    info = run_info();
    all_records(&b);
    run_collectors(ops, &b, &info);
    assert_false(exists("deps.json"));
    j = load("trace.json");
    ev = dfxc_json_get(j, "traceEvents");
    assert_int_equal(count_events(ev, "X", "host"), 0);
    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];
        const char *ph = dfxc_json_str(e, "ph", "");

        if (dfxc_json_num(e, "id", -1) != 0)
            continue;
        assert_true(dfxc_json_num(dfxc_json_get(e, "args"), "from", -1) == 0);
        assert_true(dfxc_json_num(dfxc_json_get(e, "args"), "to", -1) == 1);
        assert_string_equal(dfxc_json_str(e, "bp", ""), "e");
        if (strcmp(ph, "s") == 0)
            assert_true(dfxc_json_num(e, "ts", -1) == 0.499);
        else
            assert_true(dfxc_json_num(e, "ts", -1) == 1.0);
        seen++;
    }
    assert_int_equal(seen, 2);
    dfxc_json_free(j);
    remove_dir();
}

/*
 * Slices on one track must nest: an orch.submit phase [400, 700) ns on core 0's track that
 * starts inside task 0's slice [0, 500) and ends after it is clamped to [400, 500): 0.1 us,
 * clamped 1.
 */
static void test_trace_nesting(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_swimlane_ops, NULL};
    px_dfx_run_info info;
    static recs b;
    dfxc_json *j;
    const dfxc_json *ev;
    px_dfx_rec *r;
    int seen = 0;

    fresh_dir();
    info = run_info();
    b.n = 0;
    r = add(&b, PX_DFXK_TASK, (int)px_dfx_nrec_for_words(PX_DFX_TASK_WORDS), 0, 0, 0, 0);
    px_dfx_task_put(r, ID0, 0, 0, PX_OK, 0, TPN * 500, 0, PX_DFX_TASK_RAN);
    r = add(&b, PX_DFXK_PHASE, 1, 400, 0, 0, ID0);
    r->a = PX_PHASE_ORCH_SUBMIT | (uint64_t)(TPN * 300) << 8;
    run_collectors(ops, &b, &info);
    j = load("trace.json");
    assert_int_equal(dfxc_json_num(dfxc_json_get(j, "otherData"), "clamped", -1), 1);
    ev = dfxc_json_get(j, "traceEvents");
    for (size_t i = 0; i < ev->n; i++) {
        if (strcmp(dfxc_json_str(&ev->kids[i], "name", ""), "orch.submit") != 0)
            continue;
        assert_true(dfxc_json_num(&ev->kids[i], "ts", -1) == 0.4);
        assert_true(dfxc_json_num(&ev->kids[i], "dur", -1) == 0.1);
        seen++;
    }
    assert_int_equal(seen, 1);
    dfxc_json_free(j);
    remove_dir();
}

/* hosttrace alone still writes trace.json: 2 host slices, nothing else but names. */
static void test_trace_hosttrace_alone(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_hosttrace_ops, NULL};
    px_dfx_run_info info;
    static recs b;
    dfxc_json *j;
    const dfxc_json *ev, *run = NULL;

    fresh_dir();
    info = run_info();
    all_records(&b);
    run_collectors(ops, &b, &info);
    j = load("trace.json");
    ev = dfxc_json_get(j, "traceEvents");
    assert_int_equal(count_events(ev, "X", NULL), 2);
    assert_int_equal(count_events(ev, "s", NULL), 0);
    for (size_t i = 0; i < ev->n; i++)
        if (strcmp(dfxc_json_str(&ev->kids[i], "name", ""), "px_run") == 0)
            run = &ev->kids[i];
    assert_non_null(run);
    assert_true(dfxc_json_num(run, "dur", -1) == 6.0);
    assert_int_equal(dfxc_json_num(run, "tid", -1), 2);
    assert_true(dfxc_json_num(dfxc_json_get(run, "args"), "detail", -1) == 5);
    dfxc_json_free(j);
    remove_dir();
}

/*
 * Checks task 0's first argument in deps.json: in, f32, buffer 0, shape [4], stride [1];
 * buffers are numbered by first use: a 0, b 1, c 2 (task 1's first argument).
 */
static void check_first_arg(const dfxc_json *tasks)
{
    const dfxc_json *a = &dfxc_json_get(&tasks->kids[0], "args")->kids[0];
    const dfxc_json *c = &dfxc_json_get(&tasks->kids[1], "args")->kids[0];
    const dfxc_json *s = &dfxc_json_get(&tasks->kids[1], "args")->kids[1];

    assert_string_equal(dfxc_json_str(a, "tag", ""), "in");
    assert_string_equal(dfxc_json_str(a, "dtype", ""), "f32");
    assert_true(dfxc_json_num(a, "buffer", -1) == 0);
    assert_true(dfxc_json_get(a, "marked")->num == 1);
    assert_int_equal(dfxc_json_get(a, "shape")->n, 1);
    assert_true(dfxc_json_get(a, "shape")->kids[0].num == 4);
    assert_true(dfxc_json_get(a, "stride")->kids[0].num == 1);
    assert_true(dfxc_json_num(c, "buffer", -1) == 2); /* a, b, c by first use */
    assert_string_equal(dfxc_json_str(s, "tag", ""), "scalar");
    assert_string_equal(dfxc_json_str(s, "kind", ""), "f64");
    assert_true(dfxc_json_num(s, "value", -1) == 1.0);
}

/* Reads deps.dot and counts its "->" lines; checks the first edge line. */
static int dot_edges(void)
{
    char path[400], line[256];
    int n = 0, first = 1;
    FILE *f;

    snprintf(path, sizeof(path), "%s/deps.dot", outdir);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "->") == NULL)
            continue;
        if (first)
            assert_string_equal(line, "  t0 -> t1;\n");
        first = 0;
        n++;
    }
    fclose(f);
    return n;
}

/* depgen: 5 tasks 0..4 with kernels and args, the 6 edges sorted, and deps.dot with 6. */
static void test_depgen(void **state)
{
    static const int want[6][2] = {{0, 1}, {0, 2}, {0, 4}, {1, 3}, {2, 3}, {3, 4}};
    const px_dfx_collector_ops *ops[] = {&px_dfx_depgen_ops, NULL};
    px_dfx_run_info info;
    static recs b;
    dfxc_json *j;
    const dfxc_json *tasks, *edges;

    fresh_dir();
    info = run_info();
    all_records(&b);
    run_collectors(ops, &b, &info);
    j = load("deps.json");
    assert_int_equal(dfxc_json_num(j, "version", 0), 1);
    tasks = dfxc_json_get(j, "tasks");
    edges = dfxc_json_get(j, "edges");
    assert_int_equal(tasks->n, 5);
    assert_int_equal(edges->n, 6);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(dfxc_json_num(&tasks->kids[i], "id", -1), i);
        assert_string_equal(dfxc_json_str(&tasks->kids[i], "kernel", ""), kernels[task_kernel[i]]);
        assert_int_equal(dfxc_json_get(&tasks->kids[i], "args")->n, 3);
    }
    for (int i = 0; i < 6; i++) {
        assert_int_equal(edges->kids[i].kids[0].num, want[i][0]);
        assert_int_equal(edges->kids[i].kids[1].num, want[i][1]);
    }
    check_first_arg(tasks);
    assert_int_equal(dot_edges(), 6);
    dfxc_json_free(j);
    remove_dir();
}

/* With records dropped, depgen writes nothing and removes the files of an earlier run. */
static void test_depgen_dropped(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_depgen_ops, NULL};
    px_dfx_run_info info;
    static recs b;

    fresh_dir();
    info = run_info();
    all_records(&b);
    run_collectors(ops, &b, &info);
    assert_true(exists("deps.json") && exists("deps.dot"));
    info.dropped = 1;
    run_collectors(ops, &b, &info);
    assert_false(exists("deps.json"));
    assert_false(exists("deps.dot"));
    remove_dir();
}

/* Reads args/args.bin whole into buf (n bytes at most); returns its size. */
static size_t read_bin(uint8_t *buf, size_t n)
{
    char path[400];
    size_t got;
    FILE *f;

    snprintf(path, sizeof(path), "%s/args/args.bin", outdir);
    f = fopen(path, "rb");
    assert_non_null(f);
    got = fread(buf, 1, n, f);
    fclose(f);
    return got;
}

/* The data list of task t's argument a in args_dump.json. */
static const dfxc_json *arg_data(const dfxc_json *j, int t, int a)
{
    const dfxc_json *tasks = dfxc_json_get(j, "tasks");

    return dfxc_json_get(&dfxc_json_get(&tasks->kids[t], "args")->kids[a], "data");
}

/*
 * argsdump level 2: args_dump.json lists 5 tasks with 3 args each; task 0 arg 0 has one
 * dump (begin, offset 0, 16 bytes, complete), task 3 arg 2 one (end, offset 16, 40 bytes,
 * truncated); the others none. args.bin is 0..15 then 40 x 0xab (56 bytes).
 */
static void test_argsdump(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_argsdump_ops, NULL};
    px_dfx_run_info info;
    static recs b;
    uint8_t bin[128];
    const dfxc_json *d0, *d3;
    dfxc_json *j;

    fresh_dir();
    info = run_info();
    all_records(&b);
    run_collectors(ops, &b, &info);
    j = load("args/args_dump.json");
    assert_int_equal(dfxc_json_num(j, "version", 0), 1);
    assert_int_equal(dfxc_json_num(j, "level", 0), 2);
    assert_int_equal(dfxc_json_get(j, "tasks")->n, 5);
    d0 = arg_data(j, 0, 0);
    d3 = arg_data(j, 3, 2);
    assert_int_equal(d0->n, 1);
    assert_int_equal(d3->n, 1);
    assert_int_equal(arg_data(j, 0, 1)->n, 0);
    assert_string_equal(dfxc_json_str(&d0->kids[0], "when", ""), "begin");
    assert_int_equal(dfxc_json_num(&d0->kids[0], "offset", -1), 0);
    assert_int_equal(dfxc_json_num(&d0->kids[0], "bytes", -1), 16);
    assert_true(dfxc_json_get(&d0->kids[0], "complete")->num == 1);
    assert_true(dfxc_json_get(&d0->kids[0], "truncated")->num == 0);
    assert_string_equal(dfxc_json_str(&d3->kids[0], "when", ""), "end");
    assert_int_equal(dfxc_json_num(&d3->kids[0], "offset", -1), 16);
    assert_int_equal(dfxc_json_num(&d3->kids[0], "bytes", -1), 40);
    assert_true(dfxc_json_get(&d3->kids[0], "truncated")->num == 1);
    assert_int_equal(read_bin(bin, sizeof(bin)), 56);
    for (int i = 0; i < 16; i++)
        assert_int_equal(bin[i], i);
    for (int i = 16; i < 56; i++)
        assert_int_equal(bin[i], 0xab);
    dfxc_json_free(j);
    remove_dir();
}

/* Reads a text file of the output directory into buf. */
static void read_text(const char *name, char *buf, size_t n)
{
    char path[400];
    size_t got;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", outdir, name);
    f = fopen(path, "r");
    assert_non_null(f);
    got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* pmu.csv: version and counter-set comments, the software header, rows by task 0..4. */
static void test_pmu(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_pmu_ops, NULL};
    px_dfx_run_info info;
    static recs b;
    char text[2048];

    fresh_dir();
    info = run_info();
    all_records(&b);
    run_collectors(ops, &b, &info);
    read_text("pmu.csv", text, sizeof(text));
    assert_string_equal(text, "# plexus pmu.csv version 1\n"
                              "# counters: software (perf_hw absent: perf_event_paranoid 3)\n"
                              "task,core,task_clock_ns,page_faults,context_switches,tsc_cycles\n"
                              "0,0,1,0,,7\n"
                              "1,0,101,0,,7\n"
                              "2,1,201,0,,7\n"
                              "3,0,301,0,,7\n"
                              "4,1,401,0,,7\n");
    remove_dir();
}

/* scope_stats.jsonl: a header (version 1, 2 events) and the begin (0.005 us) and end lines. */
static void test_scopestats(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_scopestats_ops, NULL};
    px_dfx_run_info info;
    static recs b;
    char text[2048], *line, *save = NULL;
    int n = 0;

    fresh_dir();
    info = run_info();
    all_records(&b);
    run_collectors(ops, &b, &info);
    read_text("scope_stats.jsonl", text, sizeof(text));
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        dfxc_json *j = NULL;

        PX_ASSERT_OK(dfxc_json_parse(line, strlen(line), "line", &j));
        if (n == 0) {
            assert_int_equal(dfxc_json_num(j, "version", 0), 1);
            assert_int_equal(dfxc_json_num(j, "events", 0), 2);
        } else {
            assert_string_equal(dfxc_json_str(j, "event", ""), n == 1 ? "begin" : "end");
            assert_true(dfxc_json_num(j, "ts_us", -1) == (n == 1 ? 0.005 : 5.6));
            assert_int_equal(dfxc_json_num(j, "tasks_live", -1), n == 1 ? 0 : 5);
            assert_int_equal(dfxc_json_num(j, "tmap_entries", -1), n == 1 ? 0 : 7);
            assert_int_equal(dfxc_json_num(j, "heap_size", -1), 1 << 20);
            assert_int_equal(dfxc_json_num(j, "depth", -1), 2);
        }
        dfxc_json_free(j);
    }
    assert_int_equal(n, 3);
    remove_dir();
}

/* Asserts the page loads nothing: no src= or <link, and "http" only as the SVG namespace. */
static void assert_self_contained(const char *text)
{
    const char *ns = "http://www.w3.org/2000/svg";

    assert_null(strstr(text, "src="));
    assert_null(strstr(text, "<link"));
    for (const char *p = strstr(text, "http"); p != NULL; p = strstr(p + 1, "http"))
        assert_int_equal(strncmp(p, ns, strlen(ns)), 0);
}

/*
 * Extracts and parses the JSON of <script ... id="plexus-data"> from report.html, after
 * checking that the page is self-contained.
 */
static dfxc_json *report_data(void)
{
    static char text[1 << 16];
    const char *tag = "id=\"plexus-data\">";
    char *p, *q;
    dfxc_json *j = NULL;

    read_text("report.html", text, sizeof(text));
    assert_self_contained(text);
    p = strstr(text, tag);
    assert_non_null(p);
    p += strlen(tag);
    q = strstr(p, "</script>");
    assert_non_null(q);
    PX_ASSERT_OK(dfxc_json_parse(p, (size_t)(q - p), "plexus-data", &j));
    return j;
}

/*
 * The report of swimlane + depgen: 5 tasks, 6 edges; critical path 0 -> 1 -> 3 -> 4 of
 * 4 x 0.5 = 2 us (0 -> 2 -> 3 -> 4 ties; the first producer wins); kernels in order of first
 * task: vector.add 2 tasks 1 us total, add_scalar 2, mul 1.
 */
static void test_report(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_swimlane_ops, &px_dfx_depgen_ops, NULL};
    static const int cp_want[4] = {0, 1, 3, 4};
    px_dfx_run_info info;
    dfxc_model model;
    static recs b;
    dfxc_json *j;
    const dfxc_json *cp, *k;

    fresh_dir();
    info = run_info();
    dfxc_model_init(&model, info.clock);
    model.has_trace = 1; /* swimlane is on: the framework says so */
    info.model = &model;
    all_records(&b);
    run_collectors(ops, &b, &info);
    PX_ASSERT_OK(px_dfx_report_write(outdir, &model));
    dfxc_model_free(&model);
    j = report_data();
    assert_int_equal(dfxc_json_num(j, "version", 0), 1);
    assert_int_equal(dfxc_json_get(j, "tasks")->n, 5);
    assert_int_equal(dfxc_json_get(j, "edges")->n, 6);
    cp = dfxc_json_get(j, "critical_path");
    assert_string_equal(dfxc_json_str(cp, "by", ""), "duration");
    assert_true(dfxc_json_num(cp, "length_us", -1) == 2.0);
    assert_int_equal(dfxc_json_get(cp, "tasks")->n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(dfxc_json_get(cp, "tasks")->kids[i].num, cp_want[i]);
    k = dfxc_json_get(j, "kernels");
    assert_int_equal(k->n, 3);
    assert_string_equal(dfxc_json_str(&k->kids[0], "name", ""), "vector.add");
    assert_int_equal(dfxc_json_num(&k->kids[0], "count", 0), 2);
    assert_true(dfxc_json_num(&k->kids[0], "total_us", 0) == 1.0);
    assert_true(dfxc_json_num(&k->kids[0], "max_us", 0) == 0.5);
    assert_int_equal(dfxc_json_num(&k->kids[2], "count", 0), 1);
    dfxc_json_free(j);
    remove_dir();
}

/* depgen alone: the report lists the 5 tasks untimed and the path by count (4 tasks). */
static void test_report_untimed(void **state)
{
    const px_dfx_collector_ops *ops[] = {&px_dfx_depgen_ops, NULL};
    px_dfx_run_info info;
    dfxc_model model;
    static recs b;
    dfxc_json *j;

    fresh_dir();
    info = run_info();
    dfxc_model_init(&model, info.clock);
    info.model = &model;
    all_records(&b);
    run_collectors(ops, &b, &info);
    PX_ASSERT_OK(px_dfx_report_write(outdir, &model));
    dfxc_model_free(&model);
    j = report_data();
    assert_int_equal(dfxc_json_get(j, "tasks")->n, 5);
    assert_true(dfxc_json_get(j, "timed")->num == 0);
    assert_string_equal(dfxc_json_str(dfxc_json_get(j, "critical_path"), "by", ""), "count");
    assert_int_equal(dfxc_json_get(dfxc_json_get(j, "critical_path"), "tasks")->n, 4);
    dfxc_json_free(j);
    remove_dir();
}

/* The table lists the six collectors in dfx.json order, each with its own bit. */
static void test_table(void **state)
{
    static const char *names[] = {"swimlane", "hosttrace", "depgen",
                                  "argsdump", "pmu",       "scopestats"};
    static const uint32_t bits[] = {PX_DFX_SWIMLANE, PX_DFX_HOSTTRACE, PX_DFX_DEPGEN,
                                    PX_DFX_ARGSDUMP, PX_DFX_PMU,       PX_DFX_SCOPESTATS};
    int n = 0;

    for (; px_dfx_collectors[n] != NULL; n++) {
        assert_true(n < 6);
        assert_string_equal(px_dfx_collectors[n]->name, names[n]);
        assert_int_equal(px_dfx_collectors[n]->bit, bits[n]);
        assert_true(px_dfx_collectors[n]->kinds != 0);
    }
    assert_int_equal(n, 6);
}

/* The JSON reader takes escapes and nesting, and names line and column of an error. */
static void test_json_reader(void **state)
{
    const char ok[] = "{\"a\": [1, -2.5e1, true, null], \"s\": \"x\\u003cy\\n\\ud83d\\ude00\"}";
    const char bad[] = "{\"a\": 1,\n \"b\" 2}";
    dfxc_json *j = NULL;

    PX_ASSERT_OK(dfxc_json_parse(ok, strlen(ok), "ok", &j));
    assert_int_equal(dfxc_json_get(j, "a")->n, 4);
    assert_true(dfxc_json_get(j, "a")->kids[1].num == -25.0);
    assert_string_equal(dfxc_json_str(j, "s", ""), "x<y\n\xf0\x9f\x98\x80");
    dfxc_json_free(j);
    assert_int_equal(dfxc_json_parse(bad, strlen(bad), "bad", &j), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "line 2 column 6"));
    assert_int_equal(dfxc_json_parse("[1,]", 4, "bad", &j), PX_EINVAL);
    assert_int_equal(dfxc_json_parse("01", 2, "bad", &j), PX_EINVAL);
    assert_int_equal(dfxc_json_parse("\"a", 2, "bad", &j), PX_EINVAL);
}

/* Counts the elements dfxc_json_parse_each hands over, per array, and sums their "v". */
static px_status json_each_count(void *ctx, const char *key, const dfxc_json *el)
{
    double *sum = ctx;

    sum[strcmp(key, "x") == 0 ? 0 : 1] += dfxc_json_num(el, "v", 0);
    return el->type == DFXC_JOBJ ? PX_OK : px_set_error(PX_EINVAL, "not an object");
}

/*
 * What the merge and `plexus trace summary` need of the one reader: a member name twice in one
 * object is refused (in a nested object too; the same name in two objects is fine), each
 * value knows where its text is (the merge copies members as written: "2.000000" stays), and
 * the elements of top-level arrays are handed over one at a time, a callback's error
 * stopping the parse with its status.
 */
static void test_json_reader_merge_needs(void **state)
{
    const char dup[] = "{\"a\": {\"b\": 1, \"c\": 2, \"b\": 3}}";
    const char two[] = "[{\"b\": 1}, {\"b\": 2}]";
    const char text[] = "{\"t\": 2.000000, \"o\": {\"k\": [1, 2]}}";
    const char arrs[] = "{\"x\": [{\"v\": 1}, {\"v\": 2}], \"n\": 7, \"y\": [{\"v\": 4}]}";
    double sum[2] = {0, 0};
    const dfxc_json *o;
    dfxc_json *j = NULL;

    assert_int_equal(dfxc_json_parse(dup, strlen(dup), "dup", &j), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "not used before"));
    PX_ASSERT_OK(dfxc_json_parse(two, strlen(two), "two", &j));
    dfxc_json_free(j);
    PX_ASSERT_OK(dfxc_json_parse(text, strlen(text), "text", &j));
    o = dfxc_json_get(j, "t");
    assert_int_equal(o->len, 8);
    assert_memory_equal(text + o->at, "2.000000", 8);
    o = dfxc_json_get(j, "o");
    assert_int_equal(o->len, strlen("{\"k\": [1, 2]}"));
    assert_memory_equal(text + o->at, "{\"k\": [1, 2]}", o->len);
    dfxc_json_free(j);
    PX_ASSERT_OK(dfxc_json_parse_each(arrs, strlen(arrs), "arrs", json_each_count, sum, &j));
    assert_true(sum[0] == 3 && sum[1] == 4);
    assert_int_equal(dfxc_json_get(j, "x")->n, 0); /* handed over, not kept */
    assert_true(dfxc_json_num(j, "n", 0) == 7);
    dfxc_json_free(j);
    assert_int_equal(dfxc_json_parse_each("{\"x\": [1]}", 10, "cb", json_each_count, sum, &j),
                     PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "not an object"));
}

/*
 * The raw store keeps entries whole and in order across chunks: 5000 entries alternating 1
 * and 3 records (10000 records, so several 2048-record chunks are crossed) come back with
 * their a word 0..4999, their nrec and their continuation words (a + 1, a + 2, ...) intact; a
 * second store, built from the first one's chunks, reads back its own entries only.
 */
static void test_raw_store(void **state)
{
    static px_dfx_rec e[3];
    const px_dfx_rec *r;
    dfxc_raw_it it;
    dfxc_raw s;
    uint64_t i;

    for (int round = 0; round < 2; round++) {
        dfxc_raw_init(&s);
        for (i = 0; i < 5000; i++) {
            memset(e, 0, sizeof(e));
            e[0].kind = PX_DFXK_SUBMIT;
            e[0].nrec = (uint8_t)(i % 2 ? 3 : 1);
            e[0].a = i + 1000 * (uint64_t)round;
            for (int w = 0; w < 8; w++)
                px_dfx_words_w(e)[w] = e[0].a + 1 + (uint64_t)w;
            dfxc_raw_add(&s, e);
        }
        assert_false(s.oom);
        assert_int_equal(s.entries, 5000);
        assert_int_equal(s.records, 10000);
        dfxc_raw_begin(&s, &it);
        for (i = 0; (r = dfxc_raw_next(&it)) != NULL; i++) {
            assert_int_equal(r->a, i + 1000 * (uint64_t)round);
            assert_int_equal(r->nrec, i % 2 ? 3 : 1);
            for (int w = 0; i % 2 && w < 8; w++)
                assert_int_equal(px_dfx_words(r)[w], r->a + 1 + (uint64_t)w);
        }
        assert_int_equal(i, 5000);
        dfxc_raw_free(&s);
    }
}

/* Number and string output helpers write what printf and the JSON escaping rules would. */
static void test_buf_format(void **state)
{
    dfxc_buf b;

    dfxc_buf_init(&b);
    dfxc_buf_u64(&b, 0);
    dfxc_buf_puts(&b, " ");
    dfxc_buf_u64(&b, UINT64_MAX);
    dfxc_buf_puts(&b, " ");
    dfxc_buf_i64(&b, INT64_MIN);
    dfxc_buf_puts(&b, " ");
    dfxc_buf_i64(&b, -7);
    dfxc_buf_puts(&b, " ");
    dfxc_buf_us(&b, 5);
    dfxc_buf_puts(&b, " ");
    dfxc_buf_us(&b, -1234567);
    dfxc_buf_puts(&b, " ");
    dfxc_buf_json_str(&b, "a<b\"c\\d\x01" "e&");
    dfxc_buf_puts(&b, " ");
    dfxc_buf_printf(&b, "%s|%05d", "x", 42);
    assert_false(b.oom);
    assert_string_equal(b.p, "0 18446744073709551615 -9223372036854775808 -7 0.005 -1234.567 "
                             "\"a\\u003cb\\\"c\\\\d\\u0001e\\u0026\" x|00042");
    dfxc_buf_free(&b);
}

/*
 * Appends that grow the buffer many times (the inline path, and the call that grows) keep
 * every byte; dfxc_buf_u64 writes what "%llu" writes at every digit count and for 20000
 * pseudo-random values.
 */
static void test_buf_appends(void **state)
{
    uint64_t x = 88172645463325252ull, v;
    char ref[32];
    dfxc_buf b;

    dfxc_buf_init(&b);
    for (int i = 0; i < 30000; i++) {
        dfxc_buf_put(&b, "abc", (size_t)(i % 4));
        dfxc_buf_put(&b, NULL, 0);
    }
    assert_false(b.oom);
    assert_int_equal(b.len, 30000 / 4 * 6);
    for (size_t i = 0, at = 0; i < 30000; i++)
        for (size_t k = 0; k < i % 4; k++, at++)
            assert_int_equal(b.p[at], "abc"[k]);
    assert_int_equal(b.p[b.len], '\0');
    for (int i = 0; i < 20040; i++) {
        if (i < 40) { /* 10^k - 1 and 10^k, k = 0 .. 19 */
            v = 1;
            for (int k = 0; k < i / 2; k++)
                v *= 10;
            v -= (uint64_t)(i % 2 == 0);
        } else {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v = x >> (x % 64);
        }
        b.len = 0;
        dfxc_buf_u64(&b, v);
        snprintf(ref, sizeof(ref), "%llu", (unsigned long long)v);
        assert_string_equal(b.p, ref);
    }
    dfxc_buf_free(&b);
}

/* Numbers read back equal strtod's value, on the fast path and off it (exponent, 16+ digits). */
static void test_json_numbers(void **state)
{
    static const char *const nums[] = {"0", "-0", "7", "0.1", "123.456", "-0.001", "1234.567",
                                       "9007199254740.993", "123456789012345",
                                       "1234567890123456789", "0.30000000000000004", "1e3",
                                       "-2.5E-3", "1.7976931348623157e308"};
    char text[64];

    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        dfxc_json *j = NULL;

        snprintf(text, sizeof(text), "[%s]", nums[i]);
        PX_ASSERT_OK(dfxc_json_parse(text, strlen(text), "num", &j));
        assert_int_equal(j->n, 1);
        assert_true(j->kids[0].num == strtod(nums[i], NULL));
        dfxc_json_free(j);
    }
}

typedef struct each_seen {
    int n;         /* elements seen */
    char log[256]; /* "key:value " per element, values as the test writes them */
    int stop_at;   /* element at which the callback fails (0: never) */
} each_seen;

static px_status each_cb(void *ctx, const char *key, const dfxc_json *e)
{
    each_seen *s = ctx;
    size_t len = strlen(s->log);

    if (++s->n == s->stop_at)
        return px_set_error(PX_EINVAL, "stopped at element %d", s->n);
    if (e->type == DFXC_JNUM)
        snprintf(s->log + len, sizeof(s->log) - len, "%s:%g ", key, e->num);
    else if (e->type == DFXC_JOBJ)
        snprintf(s->log + len, sizeof(s->log) - len, "%s:{x=%s} ", key,
                 dfxc_json_str(e, "x", "?"));
    else
        snprintf(s->log + len, sizeof(s->log) - len, "%s:[%zu] ", key, e->n);
    return PX_OK;
}

/*
 * dfxc_json_load_each hands over the elements of top-level arrays in order and leaves those
 * arrays empty; nested arrays and other members stay in the tree; a callback's failure stops
 * the parse with its status.
 */
static void test_json_each(void **state)
{
    const char doc[] = "{\"version\": 1, \"a\": [1, {\"x\": \"y\"}, [2, 3]], "
                       "\"o\": {\"b\": [4]}, \"e\": [], \"c\": [5.5]}";
    each_seen seen = {0};
    dfxc_json *j = NULL;
    char path[400];
    FILE *f;

    fresh_dir();
    snprintf(path, sizeof(path), "%s/doc.json", outdir);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(doc, 1, strlen(doc), f), strlen(doc));
    assert_int_equal(fclose(f), 0);
    PX_ASSERT_OK(dfxc_json_load_each(path, each_cb, &seen, &j));
    assert_int_equal(seen.n, 4);
    assert_string_equal(seen.log, "a:1 a:{x=y} a:[2] c:5.5 ");
    assert_int_equal(dfxc_json_num(j, "version", 0), 1);
    assert_int_equal(dfxc_json_get(j, "a")->type, DFXC_JARR);
    assert_int_equal(dfxc_json_get(j, "a")->n, 0);
    assert_int_equal(dfxc_json_get(dfxc_json_get(j, "o"), "b")->n, 1);
    dfxc_json_free(j);
    seen = (each_seen){.stop_at = 2};
    j = NULL;
    assert_int_equal(dfxc_json_load_each(path, each_cb, &seen, &j), PX_EINVAL);
    assert_null(j);
    assert_non_null(strstr(px_last_error(), "stopped at element 2"));
    remove_dir();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_json_reader),
        cmocka_unit_test(test_json_reader_merge_needs),
        cmocka_unit_test(test_json_numbers),
        cmocka_unit_test(test_json_each),
        cmocka_unit_test(test_buf_format), cmocka_unit_test(test_buf_appends),
        cmocka_unit_test(test_raw_store),
        cmocka_unit_test(test_trace_swimlane_hosttrace),
        cmocka_unit_test(test_trace_flows),
        cmocka_unit_test(test_trace_nesting),
        cmocka_unit_test(test_trace_hosttrace_alone),
        cmocka_unit_test(test_depgen),
        cmocka_unit_test(test_depgen_dropped),
        cmocka_unit_test(test_argsdump),
        cmocka_unit_test(test_pmu),
        cmocka_unit_test(test_scopestats),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_report_untimed),
    };

    setenv("PLEXUS_DFX_STRICT", "1", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
