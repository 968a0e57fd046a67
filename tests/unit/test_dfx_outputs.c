/*
 * test_dfx_outputs.c - every DFX collector on real runs of the vector and matmul examples:
 * the files it writes are parsed back and compared with counts worked out by hand.
 *
 * Counts by hand (see examples/vector.c and examples/matmul.c):
 *   vector, 1 iteration: 5 tasks (add, add_scalar, add_scalar, mul, add) and 6 edges
 *   0->1, 0->2, 0->4, 1->3, 2->3, 3->4; 13 tensor arguments (3 + 2 + 2 + 3 + 3).
 *   matmul N=128, tile 32: T = 4, T^3 = 64 tasks; k is the outer loop, so task
 *   k*T^2 + i*T + j updates tile (i, j) and waits for task (k-1)*T^2 + i*T + j: the edges are
 *   x -> x + 16 for x = 0..47, T^2 * (T-1) = 48 of them.
 * Every slice must lie inside the run: 0 <= ts and ts + dur <= the run's wall time (plus
 * 1 us for rounding). Every test runs under PLEXUS_DFX_STRICT=1, so a reconcile mismatch
 * fails the run itself.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfx/collectors/collectors.h"
#include "dfx/collectors/json.h"
#include "examples.h"

static char outdir[256];

typedef struct run_case {
    const char *example;
    int64_t size, tile;
    int iters, cores;
    uint32_t dfx;
    int args_level;
    uint64_t args_arena;   /* 0: default */
    const char *transport; /* NULL: default */
} run_case;

static void fresh_dir(void)
{
    px_test_mkdtemp(outdir, sizeof(outdir), "px_dfxo");
}

static void remove_dir(const char *dir)
{
    px_test_rmtree(dir);
}

/* Runs one example with DFX into a fresh outdir; returns its result (check passed). */
static px_example_result run_dfx(const run_case *rc)
{
    px_example_opts o = {.size = rc->size, .iters = rc->iters, .tile = rc->tile};
    px_example_result r;
    px_config c;

    fresh_dir();
    px_test_config(&c, rc->cores);
    c.dfx = rc->dfx;
    snprintf(c.out_dir, sizeof(c.out_dir), "%s", outdir);
    c.dfx_strict = 1;
    if (rc->args_level)
        c.dfx_args_level = rc->args_level;
    if (rc->args_arena)
        c.dfx_args_arena = rc->args_arena;
    if (rc->transport)
        snprintf(c.dfx_transport, sizeof(c.dfx_transport), "%s", rc->transport);
    PX_ASSERT_OK(px_example_exec(px_example_find(rc->example), &c, &o, &r));
    if (!r.check_ok)
        print_error("%s check: %s\n", rc->example, r.check);
    assert_true(r.check_ok);
    return r;
}

static dfxc_json *load(const char *name)
{
    char path[400];
    dfxc_json *j = NULL;

    snprintf(path, sizeof(path), "%s/%s", outdir, name);
    PX_ASSERT_OK(dfxc_json_load(path, &j));
    return j;
}

static long file_size(const char *name)
{
    char path[400];
    struct stat sb;

    snprintf(path, sizeof(path), "%s/%s", outdir, name);
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static const run_case vector1 = {"vector", 4096, 0, 1, 2, 0, 0, 0, NULL};
static const run_case matmul4 = {"matmul", 128, 32, 1, 2, 0, 0, 0, NULL};

/* Asserts the edges array equals the hand-worked edges of rc (vector or matmul T=4). */
static void check_edges(const run_case *rc, const dfxc_json *edges, size_t n)
{
    static const int vec[6][2] = {{0, 1}, {0, 2}, {0, 4}, {1, 3}, {2, 3}, {3, 4}};

    assert_int_equal(edges->n, n);
    for (size_t i = 0; i < n; i++) {
        int p = (int)edges->kids[i].kids[0].num, c = (int)edges->kids[i].kids[1].num;

        if (strcmp(rc->example, "vector") == 0) {
            assert_int_equal(p, vec[i][0]);
            assert_int_equal(c, vec[i][1]);
        } else {
            assert_int_equal(p, (int)i);
            assert_int_equal(c, (int)i + 16);
        }
    }
}

/* Checks trace.json's task slices and flows against n tasks and e edges inside wall_us. */
static void check_trace(const dfxc_json *j, size_t n, size_t e, double wall_us)
{
    const dfxc_json *ev = dfxc_json_get(j, "traceEvents");
    char *seen = calloc(n, 1);
    size_t tasks = 0, s = 0, f = 0;

    assert_non_null(ev);
    assert_true(dfxc_json_num(dfxc_json_get(j, "otherData"), "version", 0) == 1);
    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *x = &ev->kids[i];
        const char *ph = dfxc_json_str(x, "ph", "");
        double ts = dfxc_json_num(x, "ts", 0), dur = dfxc_json_num(x, "dur", 0);

        s += strcmp(ph, "s") == 0;
        f += strcmp(ph, "f") == 0;
        if (strcmp(ph, "X") != 0)
            continue;
        assert_true(ts >= 0 && dur >= 0);
        if (ts + dur > wall_us + 1.0)
            fail_msg("slice %s at %.3f + %.3f us ends after the run (%.3f us)",
                     dfxc_json_str(x, "name", "?"), ts, dur, wall_us);
        if (strcmp(dfxc_json_str(x, "cat", ""), "task") == 0) {
            size_t id = (size_t)dfxc_json_num(dfxc_json_get(x, "args"), "task", -1);

            assert_true(id < n && !seen[id]);
            seen[id] = 1;
            tasks++;
        }
    }
    assert_int_equal(tasks, n);
    assert_int_equal(s, e);
    assert_int_equal(f, e);
    free(seen);
}

/* Counts the trace's task slices of one kernel. */
static int count_kernel(const dfxc_json *j, const char *kernel)
{
    const dfxc_json *ev = dfxc_json_get(j, "traceEvents");
    int n = 0;

    for (size_t i = 0; i < ev->n; i++)
        n += strcmp(dfxc_json_str(&ev->kids[i], "cat", ""), "task") == 0 &&
             strcmp(dfxc_json_str(&ev->kids[i], "name", ""), kernel) == 0;
    return n;
}

/* swimlane on vector: 5 task slices (add 2, add_scalar 2, mul 1) inside the run, 6 flows. */
static void test_swimlane_vector(void **state)
{
    run_case rc = vector1;
    px_example_result r;
    dfxc_json *j;

    rc.dfx = PX_DFX_SWIMLANE;
    r = run_dfx(&rc);
    assert_int_equal(r.tasks, 5);
    j = load("trace.json");
    check_trace(j, 5, 6, r.seconds * 1e6);
    assert_int_equal(count_kernel(j, "vector.add"), 2);
    assert_int_equal(count_kernel(j, "vector.add_scalar"), 2);
    assert_int_equal(count_kernel(j, "vector.mul"), 1);
    dfxc_json_free(j);
    remove_dir(outdir);
}

/* swimlane on matmul T=4: 64 gemm slices and 48 flows. */
static void test_swimlane_matmul(void **state)
{
    run_case rc = matmul4;
    px_example_result r;
    dfxc_json *j;

    rc.dfx = PX_DFX_SWIMLANE;
    r = run_dfx(&rc);
    j = load("trace.json");
    check_trace(j, 64, 48, r.seconds * 1e6);
    assert_int_equal(count_kernel(j, "matmul.gemm_acc"), 64);
    dfxc_json_free(j);
    remove_dir(outdir);
}

/* hosttrace alone on vector: trace.json with one px_run span whose detail is 5 tasks. */
static void test_hosttrace_vector(void **state)
{
    run_case rc = vector1;
    const dfxc_json *ev;
    px_example_result r;
    dfxc_json *j;
    int runs = 0;

    rc.dfx = PX_DFX_HOSTTRACE;
    r = run_dfx(&rc);
    j = load("trace.json");
    check_trace(j, 0, 0, r.seconds * 1e6);
    ev = dfxc_json_get(j, "traceEvents");
    for (size_t i = 0; i < ev->n; i++)
        if (strcmp(dfxc_json_str(&ev->kids[i], "name", ""), "px_run") == 0) {
            assert_true(dfxc_json_num(dfxc_json_get(&ev->kids[i], "args"), "detail", 0) == 5);
            runs++;
        }
    assert_int_equal(runs, 1);
    dfxc_json_free(j);
    remove_dir(outdir);
}

/* depgen: deps.json has tasks 0..n-1 with 3 args each and exactly the hand-worked edges. */
static void check_depgen(const run_case *rc, size_t n, size_t e, const char *kernel0)
{
    run_case c = *rc;
    const dfxc_json *tasks;
    dfxc_json *j;

    c.dfx = PX_DFX_DEPGEN;
    run_dfx(&c);
    j = load("deps.json");
    assert_true(dfxc_json_num(j, "version", 0) == 1);
    tasks = dfxc_json_get(j, "tasks");
    assert_int_equal(tasks->n, n);
    for (size_t i = 0; i < n; i++) {
        assert_true(dfxc_json_num(&tasks->kids[i], "id", -1) == (double)i);
        assert_int_equal(dfxc_json_get(&tasks->kids[i], "args")->n, 3);
    }
    assert_string_equal(dfxc_json_str(&tasks->kids[0], "kernel", ""), kernel0);
    check_edges(rc, dfxc_json_get(j, "edges"), e);
    assert_true(file_size("deps.dot") > 0);
    dfxc_json_free(j);
    remove_dir(outdir);
}

static void test_depgen_vector(void **state)
{
    check_depgen(&vector1, 5, 6, "vector.add");
}

static void test_depgen_matmul(void **state)
{
    check_depgen(&matmul4, 64, 48, "matmul.gemm_acc");
}

/* Sums the dump bytes of args_dump.json and counts dumps and truncated ones. */
static void sum_dumps(const dfxc_json *j, long *bytes, int *dumps, int *truncated)
{
    const dfxc_json *tasks = dfxc_json_get(j, "tasks");

    *bytes = 0;
    *dumps = *truncated = 0;
    for (size_t t = 0; t < tasks->n; t++) {
        const dfxc_json *args = dfxc_json_get(&tasks->kids[t], "args");

        for (size_t a = 0; a < args->n; a++) {
            const dfxc_json *d = dfxc_json_get(&args->kids[a], "data");

            for (size_t k = 0; d != NULL && k < d->n; k++) {
                *bytes += (long)dfxc_json_num(&d->kids[k], "bytes", 0);
                *dumps += 1;
                *truncated += dfxc_json_get(&d->kids[k], "truncated")->num != 0;
            }
        }
    }
}

/*
 * argsdump level 3 on vector, 256 floats: 13 tensor dumps of 256 * 4 = 1024 bytes each,
 * 13312 bytes in args.bin; the first dump is a = i % 13.
 */
static void test_argsdump_vector_level3(void **state)
{
    run_case rc = vector1;
    dfxc_json *j;
    long bytes;
    int dumps, trunc;
    float a[256];
    char path[400];
    FILE *f;

    rc.dfx = PX_DFX_ARGSDUMP;
    rc.size = 256;
    rc.args_level = 3;
    run_dfx(&rc);
    j = load("args/args_dump.json");
    assert_true(dfxc_json_num(j, "level", 0) == 3);
    assert_int_equal(dfxc_json_get(j, "tasks")->n, 5);
    sum_dumps(j, &bytes, &dumps, &trunc);
    assert_int_equal(dumps, 13);
    assert_int_equal(bytes, 13 * 1024);
    assert_int_equal(trunc, 0);
    assert_int_equal(file_size("args/args.bin"), 13 * 1024);
    snprintf(path, sizeof(path), "%s/args/args.bin", outdir);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(a, sizeof(float), 256, f), 256);
    fclose(f);
    for (int i = 0; i < 256; i++)
        assert_true(a[i] == (float)(i % 13));
    dfxc_json_free(j);
    remove_dir(outdir);
}

/* argsdump level 1 on matmul: 64 tasks of metadata, no dumps, args.bin empty. */
static void test_argsdump_matmul_level1(void **state)
{
    run_case rc = matmul4;
    dfxc_json *j;
    long bytes;
    int dumps, trunc;

    rc.dfx = PX_DFX_ARGSDUMP;
    rc.args_level = 1;
    run_dfx(&rc);
    j = load("args/args_dump.json");
    assert_int_equal(dfxc_json_get(j, "tasks")->n, 64);
    sum_dumps(j, &bytes, &dumps, &trunc);
    assert_int_equal(dumps, 0);
    assert_int_equal(file_size("args/args.bin"), 0);
    dfxc_json_free(j);
    remove_dir(outdir);
}

/*
 * argsdump level 3 on matmul T=4 with a 64-byte arena: 64 tasks x 3 tile args = 192 dumps,
 * each a 32x32 f64 tile (8192 bytes) cut to 64 bytes and marked truncated.
 */
static void test_argsdump_matmul_truncated(void **state)
{
    run_case rc = matmul4;
    dfxc_json *j;
    long bytes;
    int dumps, trunc;

    rc.dfx = PX_DFX_ARGSDUMP;
    rc.args_level = 3;
    rc.args_arena = 64;
    run_dfx(&rc);
    j = load("args/args_dump.json");
    sum_dumps(j, &bytes, &dumps, &trunc);
    assert_int_equal(dumps, 192);
    assert_int_equal(trunc, 192);
    assert_int_equal(bytes, 192 * 64);
    assert_int_equal(file_size("args/args.bin"), 192 * 64);
    dfxc_json_free(j);
    remove_dir(outdir);
}

/* y = x over float tensors (the level-2 test's kernel). */
static px_status copy_kernel(px_core_ctx *ctx, const px_task_args *args)
{
    const float *x = px_arg_data(args, 0);
    float *y = px_arg_data(args, 1);

    for (int64_t i = 0; i < px_arg_numel(args, 1); i++)
        y[i] = x[i];
    return PX_OK;
}

typedef struct copy_prog {
    px_kernel_id k;
} copy_prog;

/* y = copy(x) with x marked, then z = copy(y) with nothing marked. */
static px_status copy_orch(px_orch *o, const px_task_args *args, void *user)
{
    const copy_prog *p = user;
    px_task_args a;
    px_status st;

    px_args_init(&a);
    px_args_in(&a, px_arg_tensor(args, 0));
    px_args_mark(&a);
    px_args_out(&a, px_arg_tensor(args, 1));
    st = px_submit(o, p->k, &a, NULL);
    if (st != PX_OK)
        return st;
    px_args_init(&a);
    px_args_in(&a, px_arg_tensor(args, 1));
    px_args_out(&a, px_arg_tensor(args, 2));
    return px_submit(o, p->k, &a, NULL);
}

/*
 * argsdump level 2 dumps only marked arguments: of the two copies of 64 floats only x (task 0,
 * argument 0) is marked, so there is one dump, "begin", 64 x 4 = 256 bytes, equal to x.
 */
static void test_argsdump_level2_marked(void **state)
{
    float x[64], y[64], z[64], back[64];
    int64_t shape[1] = {64};
    px_tensor tx, ty, tz;
    px_task_args args;
    px_worker *w = NULL;
    copy_prog prog;
    px_config c;
    dfxc_json *j;
    long bytes;
    int dumps, trunc;
    char path[400];
    FILE *f;

    for (int i = 0; i < 64; i++)
        x[i] = (float)(3 * i + 1);
    fresh_dir();
    px_test_config(&c, 2);
    c.dfx = PX_DFX_ARGSDUMP;
    c.dfx_args_level = 2;
    c.dfx_strict = 1;
    snprintf(c.out_dir, sizeof(c.out_dir), "%s", outdir);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "test.copy", copy_kernel, NULL, &prog.k));
    PX_ASSERT_OK(px_tensor_make(&tx, x, PX_F32, 1, shape));
    PX_ASSERT_OK(px_tensor_make(&ty, y, PX_F32, 1, shape));
    PX_ASSERT_OK(px_tensor_make(&tz, z, PX_F32, 1, shape));
    px_args_init(&args);
    px_args_in(&args, &tx);
    px_args_inout(&args, &ty);
    px_args_out(&args, &tz);
    PX_ASSERT_OK(px_run(w, copy_orch, &args, &prog));
    PX_ASSERT_OK(px_worker_destroy(w));
    j = load("args/args_dump.json");
    assert_int_equal(dfxc_json_get(j, "tasks")->n, 2);
    sum_dumps(j, &bytes, &dumps, &trunc);
    assert_int_equal(dumps, 1);
    assert_int_equal(bytes, 256);
    assert_int_equal(file_size("args/args.bin"), 256);
    snprintf(path, sizeof(path), "%s/args/args.bin", outdir);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(back, sizeof(float), 64, f), 64);
    fclose(f);
    assert_memory_equal(back, x, sizeof(x));
    dfxc_json_free(j);
    remove_dir(outdir);
}

/* Reads the output file name into buf. */
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

/* Counts the lines of text. */
static int count_lines(const char *text)
{
    int n = 0;

    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* pmu on vector and matmul: the two comment lines, the header, one row per task. */
static void check_pmu(const run_case *base, int tasks)
{
    static char text[1 << 16];
    run_case rc = *base;

    rc.dfx = PX_DFX_PMU;
    run_dfx(&rc);
    read_text("pmu.csv", text, sizeof(text));
    assert_int_equal(strncmp(text, "# plexus pmu.csv version 1\n# counters: ", 39), 0);
    assert_non_null(strstr(text, "\ntask,core,"));
    assert_int_equal(count_lines(text), 3 + tasks);
    remove_dir(outdir);
}

static void test_pmu_vector(void **state)
{
    check_pmu(&vector1, 5);
}

static void test_pmu_matmul(void **state)
{
    check_pmu(&matmul4, 64);
}

/*
 * scopestats: vector with 3 iterations opens the run's scope and one scope per iteration:
 * (1 + 3) x (begin + end) = 8 events; matmul opens only the run's scope: 2.
 */
static void check_scopes(const run_case *base, int iters, int events)
{
    static char text[1 << 16];
    run_case rc = *base;
    dfxc_json *h = NULL;
    char *nl;

    rc.dfx = PX_DFX_SCOPESTATS;
    rc.iters = iters;
    run_dfx(&rc);
    read_text("scope_stats.jsonl", text, sizeof(text));
    nl = strchr(text, '\n');
    assert_non_null(nl);
    PX_ASSERT_OK(dfxc_json_parse(text, (size_t)(nl - text), "header", &h));
    assert_true(dfxc_json_num(h, "version", 0) == 1);
    dfxc_json_free(h);
    assert_int_equal(count_lines(text), 1 + events);
    for (char *line = nl + 1; *line; line = strchr(line, '\n') + 1) {
        dfxc_json *j = NULL;

        PX_ASSERT_OK(dfxc_json_parse(line, (size_t)(strchr(line, '\n') - line), "line", &j));
        assert_true(dfxc_json_num(j, "heap_live", -1) <= dfxc_json_num(j, "heap_size", -1));
        assert_true(dfxc_json_num(j, "tasks_live", -1) <= dfxc_json_num(j, "task_slots", -1));
        dfxc_json_free(j);
    }
    remove_dir(outdir);
}

static void test_scopestats_vector(void **state)
{
    check_scopes(&vector1, 3, 8);
}

static void test_scopestats_matmul(void **state)
{
    check_scopes(&matmul4, 1, 2);
}

/* Parses the JSON embedded in report.html; returns the number of tasks it lists. */
static size_t report_tasks(void)
{
    static char text[1 << 20];
    const char *tag = "id=\"plexus-data\">";
    dfxc_json *j = NULL;
    char *p, *q;
    size_t n;

    read_text("report.html", text, sizeof(text));
    p = strstr(text, tag);
    assert_non_null(p);
    p += strlen(tag);
    q = strstr(p, "</script>");
    assert_non_null(q);
    PX_ASSERT_OK(dfxc_json_parse(p, (size_t)(q - p), "plexus-data", &j));
    n = dfxc_json_get(j, "tasks")->n;
    dfxc_json_free(j);
    return n;
}

/* Every collector at once on matmul: all files, and report.html's data lists 64 tasks. */
static void test_all_matmul(void **state)
{
    static const char *files[] = {"trace.json",          "deps.json",     "deps.dot",
                                  "args/args_dump.json", "args/args.bin", "pmu.csv",
                                  "scope_stats.jsonl",   "report.html"};
    run_case rc = matmul4;
    px_example_result r;
    dfxc_json *j;

    rc.dfx = PX_DFX_ALL;
    r = run_dfx(&rc);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (file_size(files[i]) < 0)
            fail_msg("%s was not written", files[i]);
    j = load("trace.json");
    check_trace(j, 64, 48, r.seconds * 1e6);
    dfxc_json_free(j);
    assert_int_equal(report_tasks(), 64);
    remove_dir(outdir);
}

/* Compares two files byte for byte; returns 1 when equal. */
static int same_file(const char *a, const char *b)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

/* deps.json, deps.dot and the args files of vector are identical under mapped and shadow. */
static void test_identical_across_transports(void **state)
{
    static const char *files[] = {"deps.json", "deps.dot", "args/args_dump.json", "args/args.bin"};
    char first[256], a[400], b[400];
    run_case rc = vector1;

    rc.dfx = PX_DFX_DEPGEN | PX_DFX_ARGSDUMP;
    rc.size = 512;
    rc.args_level = 3;
    rc.transport = "mapped";
    run_dfx(&rc);
    snprintf(first, sizeof(first), "%s", outdir);
    rc.transport = "shadow";
    run_dfx(&rc);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(a, sizeof(a), "%s/%s", first, files[i]);
        snprintf(b, sizeof(b), "%s/%s", outdir, files[i]);
        if (!same_file(a, b))
            fail_msg("%s differs between transports mapped (%s) and shadow (%s)", files[i],
                     first, outdir);
    }
    remove_dir(first);
    remove_dir(outdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swimlane_vector),
        cmocka_unit_test(test_swimlane_matmul),
        cmocka_unit_test(test_hosttrace_vector),
        cmocka_unit_test(test_depgen_vector),
        cmocka_unit_test(test_depgen_matmul),
        cmocka_unit_test(test_argsdump_vector_level3),
        cmocka_unit_test(test_argsdump_matmul_level1),
        cmocka_unit_test(test_argsdump_matmul_truncated),
        cmocka_unit_test(test_argsdump_level2_marked),
        cmocka_unit_test(test_pmu_vector),
        cmocka_unit_test(test_pmu_matmul),
        cmocka_unit_test(test_scopestats_vector),
        cmocka_unit_test(test_scopestats_matmul),
        cmocka_unit_test(test_all_matmul),
        cmocka_unit_test(test_identical_across_transports),
    };

    if (!px_dfx_compiled_in())
        px_test_skip("DFX is compiled out of this library (CMake option PX_DFX=OFF): "
                     "no collector writes files");
    setenv("PLEXUS_DFX_STRICT", "1", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
