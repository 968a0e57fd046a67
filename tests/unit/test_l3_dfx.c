/*
 * test_l3_dfx.c - DFX at level 3: every chip records its own data over the whole level-3 run,
 * the parent merges it with its own into one trace.json and one dfx.json.
 *
 * Counts by hand (examples/multi_chip.c): per level-3 run, the host submits 2 next-level
 * tasks (4 tensor args each: a, b, y slices and s[i]) and 1 host task (2 args: s, total), with
 * 2 edges (each chip's s[i] -> the host task): host depgen entries 3 SUBMIT (each holds its
 * args and edges) = 3. Each chip runs one call, whose orchestration submits mc.fma (3 args)
 * then mc.sum (2 args) with 1 edge (y): 2 task slices and depgen entries 2 SUBMIT = 2.
 * The "many calls" test runs K = 5 calls per chip in one level-3 run, each an orchestration of
 * one kernel with one argument: per chip K task slices, K px_run spans and K depgen entries,
 * all in one set of files.
 *
 * Chip pids come from px_hier_proc_pid; time stamps are checked against causality (a chip's
 * work lies between the host's dispatch of its call and the host task that reads its result),
 * which only holds when the chips' events were moved onto the host's time base. Multi-process:
 * ctest runs it under RESOURCE_LOCK "chips" (tests/system/dfx_l3.cmake).
 */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfx/collectors/json.h"
#include "examples.h"
#include "hier/hier.h"

#define L3D_K 5 /* calls per chip in the "many calls" test */

static char outdir[256];

/* ---- helpers ---- */

static void fresh_dir(void)
{
    px_test_mkdtemp(outdir, sizeof(outdir), "px_l3dfx");
}

static void remove_dir(const char *dir)
{
    px_test_rmtree(dir);
}

/* A level-3 config with `chips` chips of 1 core, collectors `dfx` into outdir, strict. */
static void l3d_config(px_config *c, int chips, uint32_t dfx)
{
    px_test_config(c, 1);
    c->level = 3;
    c->chips = chips;
    c->subs = 0;
    c->device_mem = 64ull << 20;
    c->heap_ring = 16ull << 20;
    c->dfx = dfx;
    c->dfx_strict = 1;
    snprintf(c->out_dir, sizeof(c->out_dir), "%s", outdir);
}

static dfxc_json *load(const char *name)
{
    char path[400];
    dfxc_json *j = NULL;

    snprintf(path, sizeof(path), "%s/%s", outdir, name);
    PX_ASSERT_OK(dfxc_json_load(path, &j));
    return j;
}

static const dfxc_json *trace_events(const dfxc_json *t)
{
    const dfxc_json *ev = dfxc_json_get(t, "traceEvents");

    assert_non_null(ev);
    assert_int_equal(ev->type, DFXC_JARR);
    return ev;
}

/* Number of complete slices on pid with category cat and (unless NULL) name. */
static int count_slices(const dfxc_json *ev, int pid, const char *cat, const char *name)
{
    int n = 0;

    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];

        if (strcmp(dfxc_json_str(e, "ph", ""), "X") == 0 && dfxc_json_num(e, "pid", -1) == pid &&
            strcmp(dfxc_json_str(e, "cat", ""), cat) == 0 &&
            (name == NULL || strcmp(dfxc_json_str(e, "name", ""), name) == 0))
            n++;
    }
    return n;
}

/* The process name of pid, or "" when it has none. Asserts there is at most one. */
static const char *process_name(const dfxc_json *ev, int pid)
{
    const char *name = "";
    int n = 0;

    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];

        if (strcmp(dfxc_json_str(e, "name", ""), "process_name") == 0 &&
            dfxc_json_num(e, "pid", -1) == pid) {
            name = dfxc_json_str(dfxc_json_get(e, "args"), "name", "");
            n++;
        }
    }
    assert_true(n <= 1);
    return name;
}

/* Number of distinct pids carrying a process_name. */
static int count_processes(const dfxc_json *ev)
{
    int n = 0;

    for (size_t i = 0; i < ev->n; i++)
        n += strcmp(dfxc_json_str(&ev->kids[i], "name", ""), "process_name") == 0;
    return n;
}

/* The first slice on pid named name whose args.task is task (-1: any). */
static const dfxc_json *find_slice(const dfxc_json *ev, int pid, const char *name, int task)
{
    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];

        if (strcmp(dfxc_json_str(e, "ph", ""), "X") == 0 && dfxc_json_num(e, "pid", -1) == pid &&
            strcmp(dfxc_json_str(e, "name", ""), name) == 0 &&
            (task < 0 || dfxc_json_num(dfxc_json_get(e, "args"), "task", -1) == task))
            return e;
    }
    return NULL;
}

/* Earliest start and latest end (us) of the task slices on pid. */
static void task_span(const dfxc_json *ev, int pid, double *lo, double *hi)
{
    *lo = 1e300;
    *hi = -1;
    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];
        double ts = dfxc_json_num(e, "ts", 0), dur = dfxc_json_num(e, "dur", 0);

        if (strcmp(dfxc_json_str(e, "ph", ""), "X") != 0 || dfxc_json_num(e, "pid", -1) != pid ||
            strcmp(dfxc_json_str(e, "cat", ""), "task") != 0)
            continue;
        *lo = ts < *lo ? ts : *lo;
        *hi = ts + dur > *hi ? ts + dur : *hi;
    }
}

/* The collector `name` of a dfx.json object (the host's or a chip's entry). */
static const dfxc_json *collector(const dfxc_json *d, const char *name)
{
    const dfxc_json *c = dfxc_json_get(dfxc_json_get(d, "collectors"), name);

    assert_non_null(c);
    return c;
}

/* Asserts collector c used a real transport, reconciled, and produced `produced` entries
 * (-1: any), all of them collected. */
static void check_collector(const dfxc_json *c, double produced)
{
    const char *t = dfxc_json_str(c, "transport", "");
    const dfxc_json *rec = dfxc_json_get(c, "reconciled");

    assert_true(strcmp(t, "mapped") == 0 || strcmp(t, "mapped_huge") == 0 ||
                strcmp(t, "shadow") == 0);
    if (produced >= 0)
        assert_true(dfxc_json_num(c, "produced", -1) == produced);
    assert_true(dfxc_json_num(c, "collected", -1) == dfxc_json_num(c, "produced", -2));
    assert_non_null(rec);
    assert_int_equal(rec->type, DFXC_JBOOL);
    assert_true(rec->num == 1);
}

/* The "chips" array of a merged dfx.json, asserted to hold n entries. */
static const dfxc_json *chips_of(const dfxc_json *d, size_t n)
{
    const dfxc_json *chips = dfxc_json_get(d, "chips");

    assert_non_null(chips);
    assert_int_equal(chips->type, DFXC_JARR);
    assert_int_equal(chips->n, n);
    return chips;
}

static int is_true(const dfxc_json *o, const char *key)
{
    const dfxc_json *b = dfxc_json_get(o, key);

    return b != NULL && b->type == DFXC_JBOOL && b->num == 1;
}

/* ---- the multi_chip example, driven step by step to learn the chips' pids ---- */

typedef struct mc_run {
    pid_t pids[2];
    px_status st;
    char msg[1024];
} mc_run;

/* Runs multi_chip on 2 chips (iters runs, 1000 floats) with collectors dfx into outdir. */
static mc_run run_multi_chip(uint32_t dfx, int iters)
{
    const px_example *ex = px_example_find("multi_chip");
    px_example_opts o, want = {.size = 1000, .iters = iters};
    px_example_result r;
    char why[PX_EXAMPLE_WHY_MAX];
    mc_run m = {{0}, PX_OK, ""};
    void *st = NULL;
    px_worker *w;
    px_config c;

    assert_non_null(ex);
    memset(&r, 0, sizeof(r));
    l3d_config(&c, 2, dfx);
    PX_ASSERT_OK(px_example_defaults(ex, &want, &o));
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(ex->reg(w, &o, &st));
    PX_ASSERT_OK(px_worker_init(w));
    for (int i = 0; i < 2; i++)
        m.pids[i] = px_hier_proc_pid(w, i);
    m.st = ex->run(w, st, &r);
    snprintf(m.msg, sizeof(m.msg), "%s", px_last_error());
    if (m.st == PX_OK && !ex->check(st, &r, why, sizeof(why)))
        fail_msg("multi_chip check: %s", why);
    ex->fini(st);
    PX_ASSERT_OK(px_worker_destroy(w));
    return m;
}

/* The merged trace of multi_chip on 2 chips (swimlane and depgen, 2 level-3 runs, the files
 * of the last one): one process per chip named with its pid plus the host's, 2 task slices
 * per chip (mc.fma, mc.sum) and 3 on the host (2 l3.next_level, 1 l3.host) with one
 * l3.dispatch phase per next-level task; each chip's slices lie after the host dispatched its
 * call (task i goes to chip i) and before the host task that reads its result starts. */
static void test_multi_chip_trace(void **state)
{
    mc_run m;
    dfxc_json *t;
    const dfxc_json *ev;
    char want[64];

    fresh_dir();
    m = run_multi_chip(PX_DFX_SWIMLANE | PX_DFX_DEPGEN, 2);
    if (m.st != PX_OK)
        fail_msg("multi_chip run: %s: %s", px_status_name(m.st), m.msg);
    t = load("trace.json");
    ev = trace_events(t);
    assert_int_equal(count_processes(ev), 3);
    assert_string_equal(process_name(ev, 0), "host (L3 orchestration + dispatch)");
    assert_int_equal(count_slices(ev, 0, "task", "l3.next_level"), 2);
    assert_int_equal(count_slices(ev, 0, "task", "l3.host"), 1);
    assert_int_equal(count_slices(ev, 0, "task", NULL), 3);
    assert_int_equal(count_slices(ev, 0, "phase", "l3.dispatch"), 2);
    for (int i = 0; i < 2; i++) {
        const dfxc_json *disp = find_slice(ev, 0, "l3.dispatch", i);
        const dfxc_json *host = find_slice(ev, 0, "l3.host", -1);
        double lo, hi;

        snprintf(want, sizeof(want), "chip %d (pid %d)", i, (int)m.pids[i]);
        assert_string_equal(process_name(ev, i + 1), want);
        assert_int_equal(count_slices(ev, i + 1, "task", "mc.fma"), 1);
        assert_int_equal(count_slices(ev, i + 1, "task", "mc.sum"), 1);
        assert_int_equal(count_slices(ev, i + 1, "task", NULL), 2);
        assert_non_null(disp);
        assert_non_null(host);
        task_span(ev, i + 1, &lo, &hi);
        if (!(dfxc_json_num(disp, "ts", 1e300) <= lo && hi <= dfxc_json_num(host, "ts", -1)))
            fail_msg("chip %d's tasks [%.3f, %.3f] us are not between the host's dispatch of "
                     "its call (%.3f us) and the host task (%.3f us)", i, lo, hi,
                     dfxc_json_num(disp, "ts", 0), dfxc_json_num(host, "ts", 0));
    }
    dfxc_json_free(t);
    remove_dir(outdir);
}

/* The merged dfx.json of the same run: the host's collectors (depgen 15 entries) and a
 * "chips" array with chip 0 and 1, their pids and directories, each chip's swimlane and
 * depgen with a transport and depgen 8 entries (the last level-3 run only: the session ends
 * with each run), everything reconciled; each chip's own deps.json has its 2 tasks. */
static void test_multi_chip_dfx_json(void **state)
{
    const dfxc_json *chips;
    dfxc_json *d, *deps;
    char name[64];
    mc_run m;

    fresh_dir();
    m = run_multi_chip(PX_DFX_SWIMLANE | PX_DFX_DEPGEN, 2);
    if (m.st != PX_OK)
        fail_msg("multi_chip run: %s: %s", px_status_name(m.st), m.msg);
    d = load("dfx.json");
    assert_true(dfxc_json_num(d, "version", 0) == 1);
    assert_true(dfxc_json_num(d, "level", 0) == 3);
    assert_true(dfxc_json_num(d, "chip", 0) == -1);
    check_collector(collector(d, "depgen"), 3);
    check_collector(collector(d, "swimlane"), -1);
    chips = chips_of(d, 2);
    for (int i = 0; i < 2; i++) {
        const dfxc_json *c = &chips->kids[i];

        assert_true(dfxc_json_num(c, "chip", -1) == i);
        assert_true(dfxc_json_num(c, "pid", -1) == m.pids[i]);
        snprintf(name, sizeof(name), "chips/chip%d", i);
        assert_string_equal(dfxc_json_str(c, "dir", ""), name);
        check_collector(collector(c, "depgen"), 2);
        check_collector(collector(c, "swimlane"), -1);
        snprintf(name, sizeof(name), "chips/chip%d/deps.json", i);
        deps = load(name);
        assert_int_equal(dfxc_json_get(deps, "tasks")->n, 2);
        dfxc_json_free(deps);
    }
    assert_true(is_true(d, "reconciled"));
    dfxc_json_free(d);
    remove_dir(outdir);
}

/* ---- many calls per chip in one level-3 run ---- */

static px_kernel_id k_fill, k_die;
static px_callable_id c_fill, c_die;

/* fill: writes the chip index into its i64 output (arg 0). */
static px_status fill_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int64_t *out = px_arg_data(a, 0);

    for (int64_t i = 0; i < px_arg_numel(a, 0); i++)
        out[i] = px_chip_index();
    return PX_OK;
}

/* die: the chip process kills itself (a crash in a kernel). */
static px_status die_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    raise(SIGKILL);
    return PX_OK;
}

/* A chip's orchestration: one task of kernel k writing the call's tensor (arg 0). */
static px_status one_kernel(px_orch *o, const px_task_args *args, px_kernel_id k)
{
    px_task_args a;

    px_args_init(&a);
    px_args_out(&a, px_arg_tensor(args, 0));
    return px_submit(o, k, &a, NULL);
}

static px_status fill_part(px_orch *o, const px_task_args *args, void *user)
{
    return one_kernel(o, args, k_fill);
}

static px_status die_part(px_orch *o, const px_task_args *args, void *user)
{
    return one_kernel(o, args, k_die);
}

/* Level-3 orchestration: element j of arg 0 goes to chip j % 2 with callable *user. */
static px_status spread_orch(px_orch *o, const px_task_args *args, void *user)
{
    const px_tensor *out = px_arg_tensor(args, 0);
    px_status st = PX_OK;

    for (int64_t j = 0; st == PX_OK && j < out->shape[0]; j++) {
        int64_t one[1] = {1};
        px_callable_id c = j % 2 == 1 && user != NULL ? *(const px_callable_id *)user : c_fill;
        px_task_args a;
        px_tensor v;

        if ((st = px_tensor_view(out, 1, one, NULL, j, &v)) != PX_OK)
            break;
        px_args_init(&a);
        px_args_out(&a, &v);
        st = px_submit_next_level(o, c, &a, (int)(j % 2), NULL);
    }
    return st;
}

/* A 2-chip worker with fill and die registered, initialised. */
static px_worker *spread_worker(uint32_t dfx)
{
    px_worker *w;
    px_config c;

    l3d_config(&c, 2, dfx);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "t.fill", fill_kernel, NULL, &k_fill));
    PX_ASSERT_OK(px_kernel_register(w, "t.die", die_kernel, NULL, &k_die));
    PX_ASSERT_OK(px_callable_register(w, "t.fill_part", fill_part, &c_fill));
    PX_ASSERT_OK(px_callable_register(w, "t.die_part", die_part, &c_die));
    PX_ASSERT_OK(px_worker_init(w));
    return w;
}

/* K = 5 calls per chip in one level-3 run land in one session per chip: chip i's own
 * trace.json has K t.fill slices numbered 0..K-1 and K px_run spans, its deps.json K tasks,
 * its depgen K entries (one SUBMIT per call); the merged trace has the same K slices
 * per chip and 2K l3.next_level slices and l3.dispatch phases on the host. */
static void test_many_calls_one_session(void **state)
{
    int64_t out[2 * L3D_K];
    int64_t n = 2 * L3D_K;
    px_worker *w;
    px_tensor t;
    px_task_args args;
    dfxc_json *tr, *d;
    char name[64];

    fresh_dir();
    w = spread_worker(PX_DFX_SWIMLANE | PX_DFX_DEPGEN | PX_DFX_HOSTTRACE);
    memset(out, 0xff, sizeof(out));
    PX_ASSERT_OK(px_tensor_make(&t, out, PX_I64, 1, &n));
    px_args_init(&args);
    px_args_out(&args, &t);
    PX_ASSERT_OK(px_run(w, spread_orch, &args, NULL));
    PX_ASSERT_OK(px_worker_destroy(w));
    for (int j = 0; j < 2 * L3D_K; j++)
        assert_int_equal(out[j], j % 2);
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof(name), "chips/chip%d/trace.json", i);
        tr = load(name);
        assert_int_equal(count_slices(trace_events(tr), i, "task", "t.fill"), L3D_K);
        assert_int_equal(count_slices(trace_events(tr), i, "host", "px_run"), L3D_K);
        for (int k = 0; k < L3D_K; k++)
            assert_non_null(find_slice(trace_events(tr), i, "t.fill", k));
        dfxc_json_free(tr);
        snprintf(name, sizeof(name), "chips/chip%d/deps.json", i);
        d = load(name);
        assert_int_equal(dfxc_json_get(d, "tasks")->n, L3D_K);
        dfxc_json_free(d);
    }
    tr = load("trace.json");
    assert_int_equal(count_slices(trace_events(tr), 0, "task", "l3.next_level"), 2 * L3D_K);
    assert_int_equal(count_slices(trace_events(tr), 0, "phase", "l3.dispatch"), 2 * L3D_K);
    for (int i = 0; i < 2; i++)
        assert_int_equal(count_slices(trace_events(tr), i + 1, "task", "t.fill"), L3D_K);
    dfxc_json_free(tr);
    d = load("dfx.json");
    for (int i = 0; i < 2; i++)
        check_collector(collector(&chips_of(d, 2)->kids[i], "depgen"), L3D_K);
    assert_true(is_true(d, "reconciled"));
    dfxc_json_free(d);
    remove_dir(outdir);
}

/* ---- DFX off, and chips that cannot record ---- */

/* With DFX off on the parent the chips record nothing either: the output directory is never
 * created. */
static void test_off_writes_nothing(void **state)
{
    struct stat sb;
    mc_run m;

    fresh_dir();
    remove_dir(outdir); /* the name is free now; nobody may create it */
    m = run_multi_chip(0, 1);
    if (m.st != PX_OK)
        fail_msg("multi_chip run: %s: %s", px_status_name(m.st), m.msg);
    assert_int_not_equal(stat(outdir, &sb), 0);
}

/* A chip whose DFX cannot write (its directory is taken by a file) fails its calls; the run
 * returns the error naming chip 1 and the path, and the merged dfx.json lists chip 1 with that
 * error, chip 0 with its collectors, and reconciled false. */
static void test_chip_cannot_write(void **state)
{
    int64_t out[2];
    int64_t n = 2;
    const dfxc_json *chips;
    char path[400];
    px_task_args args;
    px_worker *w;
    px_tensor t;
    px_status st;
    dfxc_json *d;
    FILE *f;

    fresh_dir();
    snprintf(path, sizeof(path), "%s/chips", outdir);
    assert_int_equal(mkdir(path, 0777), 0);
    snprintf(path, sizeof(path), "%s/chips/chip1", outdir);
    assert_non_null(f = fopen(path, "w"));
    fclose(f);
    w = spread_worker(PX_DFX_SWIMLANE | PX_DFX_DEPGEN);
    PX_ASSERT_OK(px_tensor_make(&t, out, PX_I64, 1, &n));
    px_args_init(&args);
    px_args_out(&args, &t);
    st = px_run(w, spread_orch, &args, NULL);
    assert_int_not_equal(st, PX_OK);
    if (strstr(px_last_error(), "chip 1") == NULL || strstr(px_last_error(), "chips/chip1") == NULL)
        fail_msg("the error does not name chip 1 and its directory: %s", px_last_error());
    PX_ASSERT_OK(px_worker_destroy(w));
    d = load("dfx.json");
    chips = chips_of(d, 2);
    check_collector(collector(&chips->kids[0], "depgen"), 1);
    assert_non_null(strstr(dfxc_json_str(&chips->kids[1], "error", ""), "chips/chip1"));
    assert_null(dfxc_json_get(&chips->kids[1], "collectors"));
    assert_false(is_true(d, "reconciled"));
    dfxc_json_free(d);
    remove_dir(outdir);
}

/* A chip killed mid-run with DFX on: the run returns PX_EPEERDEAD naming chip 1, the merged
 * files still come out (the host and chip 0; chip 1 listed with its death), and the worker is
 * destroyed cleanly. */
static void test_chip_dies(void **state)
{
    int64_t out[2];
    int64_t n = 2;
    const dfxc_json *chips;
    px_task_args args;
    px_worker *w;
    px_tensor t;
    px_status st;
    dfxc_json *d, *tr;

    fresh_dir();
    w = spread_worker(PX_DFX_SWIMLANE | PX_DFX_DEPGEN);
    PX_ASSERT_OK(px_tensor_make(&t, out, PX_I64, 1, &n));
    px_args_init(&args);
    px_args_out(&args, &t);
    st = px_run(w, spread_orch, &args, &c_die);
    assert_int_equal(st, PX_EPEERDEAD);
    assert_non_null(strstr(px_last_error(), "chip 1"));
    PX_ASSERT_OK(px_worker_destroy(w));
    d = load("dfx.json");
    chips = chips_of(d, 2);
    check_collector(collector(&chips->kids[0], "depgen"), 1);
    assert_non_null(strstr(dfxc_json_str(&chips->kids[1], "error", ""), "died"));
    assert_false(is_true(d, "reconciled"));
    dfxc_json_free(d);
    tr = load("trace.json");
    assert_int_equal(count_processes(trace_events(tr)), 2); /* the host and chip 0 */
    assert_int_equal(count_slices(trace_events(tr), 1, "task", "t.fill"), 1);
    dfxc_json_free(tr);
    remove_dir(outdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_chip_trace),
        cmocka_unit_test(test_multi_chip_dfx_json),
        cmocka_unit_test(test_many_calls_one_session),
        cmocka_unit_test(test_off_writes_nothing),
        cmocka_unit_test(test_chip_cannot_write),
        cmocka_unit_test(test_chip_dies),
    };

    if (!px_dfx_compiled_in())
        px_test_skip("DFX is compiled out (PX_DFX=OFF)");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
