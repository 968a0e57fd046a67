/*
 * test_trace_model.c - the reader behind `plexus trace summary` (tools/trace_load.c into the
 * task model of src/dfx/collectors/model.c) over damaged files: numbers that no integer can
 * hold.
 *
 * Checks: a deps.json edge whose ends are not task ids (1e25, -1, 1.5, nan-like huge values)
 * is refused as malformed (before, 1e25 was converted to an integer, undefined behaviour,
 * and the edge kept: found by fuzz_trace); trace.json task events with such ids are refused;
 * times of 1e300 us are read as 0, so no sum wraps negative.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "dfx/collectors/model.h"
#include "trace_load.h"

static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static const char trace_head[] = "{\"traceEvents\": [";
static const char trace_tail[] = "], \"otherData\": {\"version\": 1, \"clock\": \"tsc\"}}";

/* An edge [1e25, 1] (or [-1, 1], [1.5, 1]) in deps.json is malformed: PX_EINVAL naming it. */
static void test_edge_ends_not_ids(void **state)
{
    static const char *const bad[] = {"[1e25, 1]", "[-1, 1]", "[1.5, 1]", "[0, 9007199254740992]"};
    char dir[256], text[512];
    dfxc_model m;

    (void)state;
    px_test_mkdtemp(dir, sizeof(dir), "pxmodel");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text),
                 "{\"version\": 1, \"tasks\": [{\"id\": 0, \"kernel\": \"k\"}, {\"id\": 1, "
                 "\"kernel\": \"k\"}], \"edges\": [[0, 1], %s]}", bad[i]);
        put(dir, "deps.json", text);
        assert_int_equal(trace_load_dir(dir, &m), PX_EINVAL);
        assert_non_null(strstr(px_last_error(), "edge 1 is not [producer, consumer]"));
        dfxc_model_free(&m);
    }
    put(dir, "deps.json", "{\"version\": 1, \"tasks\": [{\"id\": 0, \"kernel\": \"k\"}, "
                          "{\"id\": 1, \"kernel\": \"k\"}], \"edges\": [[0, 1]]}");
    PX_ASSERT_OK(trace_load_dir(dir, &m));
    assert_int_equal(m.n, 2);
    assert_int_equal(m.edges.n, 1);
    dfxc_model_free(&m);
    px_test_rmtree(dir);
}

/* Task events whose id is no task id are refused, naming the event; times of 1e300 us are
 * read as 0 (no undefined conversion), so no sum wraps negative. */
static void test_trace_huge_numbers(void **state)
{
    static const char *const bad_ids[] = {"1e25", "-1", "1.5"};
    char dir[256], text[2048];
    dfxc_model m;

    (void)state;
    px_test_mkdtemp(dir, sizeof(dir), "pxmodel");
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
        snprintf(text, sizeof(text), "%s{\"name\": \"k\", \"cat\": \"task\", \"ph\": \"X\", "
                 "\"ts\": 1, \"dur\": 1, \"args\": {\"task\": %s}}%s", trace_head, bad_ids[i],
                 trace_tail);
        put(dir, "trace.json", text);
        assert_int_equal(trace_load_dir(dir, &m), PX_EINVAL);
        assert_non_null(strstr(px_last_error(), "traceEvents[0]"));
        dfxc_model_free(&m);
    }
    snprintf(text, sizeof(text), "%s"
             "{\"name\": \"k\", \"cat\": \"task\", \"ph\": \"X\", \"pid\": 1e20, \"tid\": -5e30, "
             "\"ts\": 1e300, \"dur\": 1e300, \"args\": {\"task\": 0, \"core\": 1e40}},"
             "{\"name\": \"k\", \"cat\": \"task\", \"ph\": \"X\", \"pid\": 0, \"tid\": 0, "
             "\"ts\": 1e300, \"dur\": 1e300, \"args\": {\"task\": 1}},"
             "{\"name\": \"dep\", \"cat\": \"dep\", \"ph\": \"s\", \"args\": {\"from\": 0, \"to\": 1}}"
             "%s", trace_head, trace_tail);
    put(dir, "trace.json", text);
    PX_ASSERT_OK(trace_load_dir(dir, &m));
    assert_int_equal(m.n, 2);
    assert_int_equal(m.nk, 1);
    assert_true(m.k[0].total >= 0); /* out-of-range times read as 0: never a wrap */
    assert_true(m.span >= 0);
    dfxc_model_free(&m);
    px_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edge_ends_not_ids),
        cmocka_unit_test(test_trace_huge_numbers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
