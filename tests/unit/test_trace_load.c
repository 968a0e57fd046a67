/*
 * test_trace_load.c - the reader of `plexus trace summary` (tools/trace_load.c, plexus's JSON
 * reader): trace.json and deps.json text into the task model, as whole documents and in the
 * layout plexus writes (a line per event), and every malformed input refused with PX_EINVAL and a
 * message saying what is wrong, never a crash.
 *
 * The documents are small hand-written files in the documented formats (docs/formats.md):
 * 3 tasks on 2 tracks, task 1 and 2 after task 0; task 0 runs 0..2 us, task 1 2..3 us, task 2
 * 2..6 us, so the critical path is 0 -> 2 (6 us).
 */
#include "testutil.h"

#include <string.h>

#include "trace_load.h"

static const char trace_ok[] =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"core 0\"}},\n"
    "{\"ph\":\"M\",\"pid\":0,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"core 1\"}},\n"
    "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0.000,\"dur\":2.000,\"name\":\"k.a\",\"cat\":\"task\","
    "\"args\":{\"task\":0,\"core\":0,\"status\":0,\"poisoned\":0}},\n"
    "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":2.000,\"dur\":1.000,\"name\":\"k.b\",\"cat\":\"task\","
    "\"args\":{\"task\":1,\"core\":0,\"status\":0,\"poisoned\":0}},\n"
    "{\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":2.000,\"dur\":4.000,\"name\":\"k.b\",\"cat\":\"task\","
    "\"args\":{\"task\":2,\"core\":1,\"status\":0,\"poisoned\":0}},\n"
    "{\"ph\":\"s\",\"pid\":0,\"tid\":0,\"ts\":1.999,\"name\":\"dep\",\"cat\":\"dep\",\"id\":0,"
    "\"args\":{\"from\":0,\"to\":2}}\n"
    "],\n\"otherData\": {\"version\": 1, \"clock\": \"tsc\"}}\n";

static const char deps_ok[] =
    "{\"version\": 1, \"tasks\": [{\"id\": 0, \"kernel\": \"k.a\", \"args\": []},\n"
    "{\"id\": 1, \"kernel\": \"k.b\", \"args\": []}, {\"id\": 2, \"kernel\": \"k.b\", "
    "\"args\": []}],\n\"edges\": [[0, 1], [0, 2]]}\n";

/* The same two files in the layout plexus writes (read a line at a time). */
static const char trace_lines_ok[] =
    "{\"displayTimeUnit\": \"ns\",\n\"traceEvents\": [\n"
    "{\"name\":\"thread_name\",\"args\":{\"name\":\"core 0\"},\"ph\":\"M\",\"pid\":0,\"tid\":0},\n"
    "{\"name\":\"thread_name\",\"args\":{\"name\":\"core 1\"},\"ph\":\"M\",\"pid\":0,\"tid\":1},\n"
    "{\"name\":\"k.a\",\"cat\":\"task\",\"args\":{\"task\":0,\"core\":0},\"ph\":\"X\",\"pid\":0,"
    "\"tid\":0,\"ts\":0.000,\"dur\":2.000},\n"
    "{\"name\":\"dep\",\"cat\":\"dep\",\"id\":0,\"bp\":\"e\",\"args\":{\"from\":0,\"to\":2},"
    "\"ph\":\"s\",\"pid\":0,\"tid\":0,\"ts\":1.999},\n"
    "{\"name\":\"k.b\",\"cat\":\"task\",\"args\":{\"task\":1,\"core\":0},\"ph\":\"X\",\"pid\":0,"
    "\"tid\":0,\"ts\":2.000,\"dur\":1.000},\n"
    "{\"name\":\"k.b\",\"cat\":\"task\",\"args\":{\"task\":2,\"core\":1},\"ph\":\"X\",\"pid\":0,"
    "\"tid\":1,\"ts\":2.000,\"dur\":4.000}\n"
    "],\n\"otherData\": {\"version\": 1, \"generator\": \"plexus\", \"clock\": \"tsc\"}}\n";

static const char deps_lines_ok[] =
    "{\"version\": 1, \"tasks\": [\n"
    "  {\"id\": 0, \"kernel\": \"k.a\", \"args\": []},\n"
    "  {\"id\": 1, \"kernel\": \"k.b\", \"args\": []},\n"
    "  {\"id\": 2, \"kernel\": \"k.b\", \"args\": []}\n"
    "],\n\"edges\": [\n"
    "  [0, 1], [0, 2]\n"
    "]}\n";

/* Checks the model of both files (either layout): see the file's header. */
static void check_model(dfxc_model *m)
{
    PX_ASSERT_OK(dfxc_model_finish(m));
    assert_true(m->has_trace && m->has_deps);
    assert_string_equal(m->clock, "tsc");
    assert_int_equal(m->n, 3);
    assert_int_equal(m->ntracks, 2);
    assert_string_equal(m->tracks[1].name, "core 1");
    assert_int_equal(m->edges.n, 2);
    for (size_t i = 0; i < m->n; i++)
        assert_true(m->t[i].timed && m->t[i].id == i);
    assert_true(m->t[2].ts == 2000 && m->t[2].dur == 4000 && m->t[2].core == 1);
    assert_int_equal(m->nk, 2);
    assert_string_equal(m->k[1].name, "k.b");
    assert_int_equal(m->k[1].count, 2);
    assert_int_equal(m->ncp, 2);
    assert_true(m->cp[0] == 0 && m->cp[1] == 2 && m->cp_len == 6000 && !m->cp_by_count);
    dfxc_model_free(m);
}

/* Both files as whole documents: 3 tasks (each once, timed), deps.json's 2 edges win. */
static void test_both_files(void **state)
{
    dfxc_model m;

    dfxc_model_init(&m, NULL);
    PX_ASSERT_OK(trace_load_buf(trace_ok, strlen(trace_ok), TRACE_FILE_TRACE, &m));
    PX_ASSERT_OK(trace_load_buf(deps_ok, strlen(deps_ok), TRACE_FILE_DEPS, &m));
    check_model(&m);
}

/* The same files in plexus's own layout, read a line at a time: the same model. */
static void test_both_files_by_lines(void **state)
{
    dfxc_model m;

    dfxc_model_init(&m, NULL);
    PX_ASSERT_OK(trace_load_buf(trace_lines_ok, strlen(trace_lines_ok), TRACE_FILE_TRACE, &m));
    PX_ASSERT_OK(trace_load_buf(deps_lines_ok, strlen(deps_lines_ok), TRACE_FILE_DEPS, &m));
    check_model(&m);
}

/* Loads text as `which` into a fresh model; returns the status, the message in px_last_error. */
static px_status load_one(const char *text, size_t len, trace_file which)
{
    dfxc_model m;
    px_status st;

    dfxc_model_init(&m, NULL);
    st = trace_load_buf(text, len, which, &m);
    dfxc_model_free(&m);
    return st;
}

/* Each malformed document is PX_EINVAL with a message naming the file and the problem. */
static void test_malformed(void **state)
{
    static const struct {
        const char *text;
        trace_file which;
        const char *msg;
    } bad[] = {
        {"{\"traceEvents\":[", TRACE_FILE_TRACE, "trace.json: not valid JSON"},
        {"[1, 2]", TRACE_FILE_TRACE, "not an object"},
        {"{\"traceEvents\":[], \"otherData\": {\"version\": 2}}", TRACE_FILE_TRACE, "version 2"},
        {"{\"otherData\": {\"version\": 1}}", TRACE_FILE_TRACE, "no \"traceEvents\""},
        {"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"task\",\"args\":{\"task\":-1}}], "
         "\"otherData\": {\"version\": 1}}", TRACE_FILE_TRACE, "without a valid args.task"},
        {"{\"traceEvents\":[{\"ph\":\"s\",\"cat\":\"dep\",\"args\":{\"from\":\"x\"}}], "
         "\"otherData\": {\"version\": 1}}", TRACE_FILE_TRACE, "args.from and args.to"},
        {"{\"version\": 1, \"tasks\": []}", TRACE_FILE_DEPS, "no \"tasks\" and \"edges\""},
        {"{\"version\": 1, \"tasks\": [{\"kernel\": \"k\"}], \"edges\": []}", TRACE_FILE_DEPS,
         "task 0 has no valid \"id\""},
        {"{\"version\": 1, \"tasks\": [], \"edges\": [[0]]}", TRACE_FILE_DEPS,
         "edge 0 is not [producer, consumer]"},
        {"{\"version\": 1, \"tasks\": [], \"edges\": [[0, 1.5]]}", TRACE_FILE_DEPS,
         "edge 0 is not"},
        {"{\"version\": 1, \"version\": 1, \"tasks\": [], \"edges\": []}", TRACE_FILE_DEPS,
         "not valid JSON"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(load_one(bad[i].text, strlen(bad[i].text), bad[i].which), PX_EINVAL);
        if (strstr(px_last_error(), bad[i].msg) == NULL)
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, px_last_error(), bad[i].msg);
    }
}

/* Every prefix of a valid file, and bytes that are not text, are refused without a crash. */
static void test_truncated_and_binary(void **state)
{
    static const char junk[] = {'{', 0, '"', (char)0xff, ':', (char)0x80, '}'};

    for (size_t n = 0; n < strlen(trace_ok) - 2; n++)
        assert_int_equal(load_one(trace_ok, n, TRACE_FILE_TRACE), PX_EINVAL);
    for (size_t n = 0; n < strlen(deps_ok) - 2; n++)
        assert_int_equal(load_one(deps_ok, n, TRACE_FILE_DEPS), PX_EINVAL);
    for (size_t n = 0; n < strlen(trace_lines_ok) - 3; n++)
        assert_int_equal(load_one(trace_lines_ok, n, TRACE_FILE_TRACE), PX_EINVAL);
    for (size_t n = 0; n < strlen(deps_lines_ok) - 3; n++)
        assert_int_equal(load_one(deps_lines_ok, n, TRACE_FILE_DEPS), PX_EINVAL);
    assert_int_equal(load_one(junk, sizeof(junk), TRACE_FILE_DEPS), PX_EINVAL);
    assert_int_equal(load_one(NULL, 0, TRACE_FILE_TRACE), PX_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_both_files),
        cmocka_unit_test(test_both_files_by_lines),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_truncated_and_binary),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
