/*
 * test_dfx_merge.c - the level-3 merge of DFX outputs (src/dfx/merge/) on files written
 * by hand in the formats plexus writes (docs/formats.md), without forking chips: the merged
 * trace.json moves the chip's events onto the host's time base and pid, offsets its flow
 * ids, keeps metadata first and time order; the merged dfx.json lists the chip; the merged
 * report.html holds both processes' tasks with unique ids; a chip's trace.json line that
 * is not in the writer's layout fails the merge with PX_EINVAL (no crash).
 *
 * Numbers: host t0_ticks 1000, chip t0_ticks 3000, 2 ticks per ns: the chip is 1000 ns = 1 us
 * later, so its task at 0.500 us lands at 1.500 us. The host has flow id 0 (ids 0..0), so
 * the chip's flow 0 becomes 1. Task ids: host 0..1, chip 0..1 -> 2..3 in the report.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dfx/merge/merge.h"
#include "hier/ext.h"
#include "hier/hier_internal.h"
#include "dfx/collectors/json.h"

static const char host_dfx[] =
    "{\"version\": 1, \"clock\": \"tsc\", \"ticks_per_ns\": 2.000000, \"t0_ticks\": 1000, "
    "\"chip\": 0, \"device_profile\": \"default\", \"records_version\": 2, \"collectors\": {\n"
    "    \"swimlane\": {\"transport\": \"mapped\", \"refused\": [], \"produced\": 4, "
    "\"collected\": 4, \"dropped\": 0, \"writer_waits\": 0, \"seq_gaps\": 0, "
    "\"reconciled\": true}\n}}\n";

static const char chip_dfx[] =
    "{\"version\": 1, \"clock\": \"tsc\", \"ticks_per_ns\": 2.000000, \"t0_ticks\": 3000, "
    "\"chip\": 0, \"device_profile\": \"default\", \"records_version\": 2, \"collectors\": {\n"
    "    \"swimlane\": {\"transport\": \"shadow\", \"refused\": [{\"name\": \"mapped\", "
    "\"reason\": \"a, b\"}], \"produced\": 4, \"collected\": 4, \"dropped\": 0, "
    "\"writer_waits\": 0, \"seq_gaps\": 0, \"reconciled\": true}\n}}\n";

/* A trace.json with two tasks (ids 0, 1, the second at 0.5 us) and the flow 0 -> 1. */
static const char trace_text[] =
    "{\"displayTimeUnit\": \"ns\",\n\"traceEvents\": [\n"
    "{\"name\":\"process_name\",\"args\":{\"name\":\"chip 0\"},\"ph\":\"M\",\"pid\":0,\"tid\":0},\n"
    "{\"name\":\"thread_name\",\"args\":{\"name\":\"core 0\"},\"ph\":\"M\",\"pid\":0,\"tid\":0},\n"
    "{\"name\":\"k.a\",\"cat\":\"task\",\"args\":{\"task\":0,\"core\":0,\"status\":0,"
    "\"poisoned\":0},\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0.000,\"dur\":0.400},\n"
    "{\"name\":\"dep\",\"cat\":\"dep\",\"id\":0,\"bp\":\"e\",\"args\":{\"from\":0,\"to\":1},"
    "\"ph\":\"s\",\"pid\":0,\"tid\":0,\"ts\":0.399},\n"
    "{\"name\":\"k.b\",\"cat\":\"task\",\"args\":{\"task\":1,\"core\":0,\"status\":0,"
    "\"poisoned\":0},\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0.500,\"dur\":0.250},\n"
    "{\"name\":\"dep\",\"cat\":\"dep\",\"id\":0,\"bp\":\"e\",\"args\":{\"from\":0,\"to\":1},"
    "\"ph\":\"f\",\"pid\":0,\"tid\":0,\"ts\":0.500}\n"
    "],\n\"otherData\": {\"version\": 1, \"generator\": \"plexus\", \"clock\": \"tsc\", "
    "\"ticks_per_ns\": 2.000000, \"clamped\": 1, \"collectors\": [\"swimlane\"]}}\n";

static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* Makes dir with the host's files and chips/chip0 with the chip's (trace: chip_trace). */
static void make_sources(char *dir, size_t n, const char *chip_trace)
{
    char chip[400];

    px_test_mkdtemp(dir, n, "px_merge");
    snprintf(chip, sizeof(chip), "%s/chips", dir);
    assert_int_equal(mkdir(chip, 0755), 0);
    snprintf(chip, sizeof(chip), "%s/chips/chip0", dir);
    assert_int_equal(mkdir(chip, 0755), 0);
    put(dir, "dfx.json", host_dfx);
    put(dir, "trace.json", trace_text);
    put(chip, "dfx.json", chip_dfx);
    put(chip, "trace.json", chip_trace);
}

static dfxc_json *load(const char *dir, const char *name)
{
    char path[512];
    dfxc_json *j = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    PX_ASSERT_OK(dfxc_json_load(path, &j));
    return j;
}

/* The merged trace.json, dfx.json and report.html of the host and one chip. */
static void test_merge(void **state)
{
    px_hier_dfx_chip chips[1] = {{.chip = 0, .pid = 4242, .st = PX_OK}};
    const dfxc_json *ev, *other, *c;
    double last = -1;
    int chip_tasks = 0, flows1 = 0, meta_done = 0;
    dfxc_json *t, *d;
    char dir[256], path[512], *html;
    FILE *f;
    long n;

    make_sources(dir, sizeof(dir), trace_text);
    PX_ASSERT_OK(px_hier_dfx_merge_files(dir, 1, chips, NULL));
    t = load(dir, "trace.json");
    ev = dfxc_json_get(t, "traceEvents");
    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];
        int meta = strcmp(dfxc_json_str(e, "ph", ""), "M") == 0;

        assert_false(meta && meta_done); /* metadata first */
        meta_done |= !meta;
        if (!meta) {
            assert_true(dfxc_json_num(e, "ts", -1) >= last);
            last = dfxc_json_num(e, "ts", -1);
        }
        if (dfxc_json_num(e, "pid", -1) == 1 && strcmp(dfxc_json_str(e, "cat", ""), "task") == 0) {
            chip_tasks++;
            if (dfxc_json_num(dfxc_json_get(e, "args"), "task", -1) == 1)
                assert_true(dfxc_json_num(e, "ts", -1) == 1.5 &&
                            dfxc_json_num(e, "dur", -1) == 0.25);
        }
        if (dfxc_json_num(e, "pid", -1) == 1 && strcmp(dfxc_json_str(e, "cat", ""), "dep") == 0)
            flows1 += dfxc_json_num(e, "id", -1) == 1;
    }
    assert_int_equal(chip_tasks, 2);
    assert_int_equal(flows1, 2);
    other = dfxc_json_get(t, "otherData");
    assert_int_equal(dfxc_json_num(other, "clamped", -1), 2);
    assert_int_equal(dfxc_json_num(other, "level", -1), 3);
    assert_int_equal(dfxc_json_get(other, "processes")->n, 2);
    dfxc_json_free(t);
    d = load(dir, "dfx.json");
    assert_int_equal(dfxc_json_num(d, "chip", 0), -1);
    assert_true(dfxc_json_get(d, "reconciled")->num == 1);
    c = &dfxc_json_get(d, "chips")->kids[0];
    assert_int_equal(dfxc_json_num(c, "pid", -1), 4242);
    assert_true(dfxc_json_num(c, "shift_us", -1) == 1.0);
    assert_string_equal(dfxc_json_str(dfxc_json_get(dfxc_json_get(c, "collectors"), "swimlane"),
                                      "transport", ""), "shadow");
    dfxc_json_free(d);
    snprintf(path, sizeof(path), "%s/report.html", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    html = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(html, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    assert_non_null(strstr(html, "\"processes\": {\"0\": \"host (L3 orchestration + dispatch)\", "
                                 "\"1\": \"chip 0 (pid 4242)\"}"));
    assert_non_null(strstr(html, "{\"id\": 3, \"kernel\": \"k.b\", \"pid\": 1"));
    assert_non_null(strstr(html, "\"edges\": [[0, 1], [2, 3]]"));
    free(html);
    px_test_rmtree(dir);
}

/* A chip line without the writer's fixed members (here: no "pid", "tid") fails the merge
 * with its reason instead of reading past them. */
static void test_merge_bad_line(void **state)
{
    px_hier_dfx_chip chips[1] = {{.chip = 0, .pid = 4242, .st = PX_OK}};
    static const char bad[] =
        "{\"displayTimeUnit\": \"ns\",\n\"traceEvents\": [\n"
        "{\"name\":\"k.a\",\"cat\":\"task\",\"ph\":\"X\",\"ts\":0.000,\"dur\":1.000},\n"
        "],\n\"otherData\": {\"version\": 1, \"clamped\": 0}}\n";
    char dir[256];

    make_sources(dir, sizeof(dir), bad);
    assert_int_equal(px_hier_dfx_merge_files(dir, 1, chips, NULL), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "not an event line"));
    px_test_rmtree(dir);
}

/* ---- level 4 (dfx_merge_run with the hosts) ---- */

/* The level-4 merge of two hosts in dir. */
static px_status merge_hosts(const char *dir, dfx_merge_src *hosts)
{
    dfx_merge_in in = {.dir = dir, .level = 4, .nsrc = 2, .src = hosts};

    return dfx_merge_run(&in);
}

/* A host's level-3 dfx.json: host_dfx's members (with the probe's host_id, which the level-4
 * entry writes first and so must not repeat: the strict reader refuses a name twice), then
 * what the level-3 merge adds. */
static const char host_l3_dfx[] =
    "{\"version\": 1, \"clock\": \"tsc\", \"ticks_per_ns\": 2.000000, \"t0_ticks\": 1000, "
    "\"chip\": -1, \"device_profile\": \"default\", \"host_id\": \"h\", \"records_version\": 2, "
    "\"collectors\": {\n"
    "    \"swimlane\": {\"transport\": \"mapped\", \"refused\": [], \"produced\": 4, "
    "\"collected\": 4, \"dropped\": 0, \"writer_waits\": 0, \"seq_gaps\": 0, "
    "\"reconciled\": true}\n},\n \"level\": 3,\n \"chips\": [],\n \"calls\": [],\n"
    " \"reconciled\": true}\n";

/* Makes dir/hosts/host0 and host1, each with host_l3_dfx and trace_text. */
static void make_hosts(char *dir, size_t n)
{
    char sub[400];

    px_test_mkdtemp(dir, n, "px_merge4");
    snprintf(sub, sizeof(sub), "%s/hosts", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    for (int h = 0; h < 2; h++) {
        snprintf(sub, sizeof(sub), "%s/hosts/host%d", dir, h);
        assert_int_equal(mkdir(sub, 0755), 0);
        put(sub, "dfx.json", host_l3_dfx);
        put(sub, "trace.json", trace_text);
    }
}

/* The ts (us) of task `task` on merged pid `pid`, or -1. */
static double task_ts(const dfxc_json *t, int pid, int task)
{
    const dfxc_json *ev = dfxc_json_get(t, "traceEvents");

    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];

        if (dfxc_json_num(e, "pid", -1) == pid &&
            strcmp(dfxc_json_str(e, "cat", ""), "task") == 0 &&
            dfxc_json_num(dfxc_json_get(e, "args"), "task", -1) == task)
            return dfxc_json_num(e, "ts", -1);
    }
    return -1;
}

/*
 * Two hosts: host 1's clock runs 1 ms ahead of host 0's and its run started 1 us after host
 * 0's (t0 1000 ns later on its own clock, less the offset), so its task at 0.5 us lands at
 * 1.5 us on host 0's time base, on pid 1000 named "host 1 (b): chip 0"; the level-4 dfx.json
 * has both hosts with their clocks, no host missing. With a clock rate of +1000 ppm (host 1's
 * clock gains 1 us per ms from host 0's time 0) the same task lands at (2000 / 1.001 - 500)
 * ns = 1.498 us.
 */
static void test_merge_hosts(void **state)
{
    dfx_merge_src hosts[2] = {
        {.index = 0, .dir = "hosts/host0", .label = "a", .pid = 10, .st = PX_OK, .t0_ns = 500,
         .rounds = 16, .clock_ok = 1},
        {.index = 1, .dir = "hosts/host1", .label = "b", .pid = 11, .st = PX_OK,
         .t0_ns = 1001500, .offset_ns = 1000000, .uncertainty_ns = 1500, .rounds = 16,
         .clock_ok = 1}};
    const dfxc_json *hs, *ev;
    dfxc_json *t, *d;
    char dir[256];
    int named = 0;

    (void)state;
    make_hosts(dir, sizeof(dir));
    PX_ASSERT_OK(merge_hosts(dir, hosts));
    t = load(dir, "trace.json");
    assert_true(task_ts(t, 0, 1) == 0.5);
    assert_true(task_ts(t, 1000, 1) == 1.5);
    ev = dfxc_json_get(t, "traceEvents");
    for (size_t i = 0; i < ev->n; i++)
        if (strcmp(dfxc_json_str(&ev->kids[i], "name", ""), "process_name") == 0)
            named += strcmp(dfxc_json_str(dfxc_json_get(&ev->kids[i], "args"), "name", ""),
                            dfxc_json_num(&ev->kids[i], "pid", -1) == 1000
                                ? "host 1 (b): chip 0" : "host 0 (a): chip 0") == 0;
    assert_int_equal(named, 2);
    assert_int_equal(dfxc_json_num(dfxc_json_get(t, "otherData"), "level", -1), 4);
    dfxc_json_free(t);
    d = load(dir, "dfx.json");
    assert_int_equal(dfxc_json_num(d, "level", -1), 4);
    assert_true(dfxc_json_get(d, "reconciled")->num == 1);
    assert_int_equal(dfxc_json_get(d, "hosts_missing")->n, 0);
    hs = dfxc_json_get(d, "hosts");
    assert_int_equal(hs->n, 2);
    assert_true(dfxc_json_num(&hs->kids[1], "clock_offset_us", -1) == 1000.0);
    assert_true(dfxc_json_num(&hs->kids[1], "clock_uncertainty_us", -1) == 1.5);
    assert_true(dfxc_json_num(&hs->kids[1], "shift_us", -1) == 1.0);
    assert_string_equal(dfxc_json_str(&hs->kids[1], "host_id", ""), "b");
    assert_int_equal(dfxc_json_num(&hs->kids[1], "level", -1), 3);
    dfxc_json_free(d);
    hosts[1].rate = 1e-3;
    PX_ASSERT_OK(merge_hosts(dir, hosts));
    t = load(dir, "trace.json");
    assert_true(task_ts(t, 1000, 1) == 1.498);
    dfxc_json_free(t);
    px_test_rmtree(dir);
}

/* Host 1 sent nothing: host 0's outputs are merged alone, host 1 listed in hosts_missing
 * with why, reconciled false; no event on host 1's pids. */
static void test_merge_hosts_missing(void **state)
{
    dfx_merge_src hosts[2] = {
        {.index = 0, .dir = "hosts/host0", .label = "a", .pid = 10, .st = PX_OK, .t0_ns = 500,
         .clock_ok = 1},
        {.index = 1, .dir = "hosts/host1", .label = "b", .pid = 11, .st = PX_ETIMEDOUT,
         .msg = "it did not join"}};
    const dfxc_json *miss;
    dfxc_json *t, *d;
    char dir[256];

    (void)state;
    make_hosts(dir, sizeof(dir));
    PX_ASSERT_OK(merge_hosts(dir, hosts));
    d = load(dir, "dfx.json");
    assert_true(dfxc_json_get(d, "reconciled")->num == 0);
    assert_int_equal(dfxc_json_get(d, "hosts")->n, 1);
    miss = dfxc_json_get(d, "hosts_missing");
    assert_int_equal(miss->n, 1);
    assert_int_equal(dfxc_json_num(&miss->kids[0], "host", -1), 1);
    assert_string_equal(dfxc_json_str(&miss->kids[0], "why", ""), "it did not join");
    dfxc_json_free(d);
    t = load(dir, "trace.json");
    assert_true(task_ts(t, 0, 1) == 0.5);
    assert_true(task_ts(t, 1000, 1) == -1);
    dfxc_json_free(t);
    px_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_bad_line),
        cmocka_unit_test(test_merge_hosts),
        cmocka_unit_test(test_merge_hosts_missing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
