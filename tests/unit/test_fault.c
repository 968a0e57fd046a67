/*
 * test_fault.c - PLEXUS_TEST_FAULT, the test-only fault a level-3 chip inflicts on itself at a
 * named point of its work (src/util/fault.h; issue 33, "faults at known points"): the grammar
 * (every malformed text refused, naming the part that is wrong and the expected form, as a
 * knob too); a chip killing itself at its 3rd collective fails an allreduce example with
 * PX_EPEERDEAD naming that chip, whatever the machine's speed (the example runs 20); a chip
 * killed at its first call fails multi_chip alike; a fault naming another host never lands
 * in a job without MPI; unset, the same runs pass. Multi-process: ctest runs it under
 * RESOURCE_LOCK "chips" (tests/system/l3.cmake).
 */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples.h"
#include "util/fault.h"

static void fault_parses(const char *text, int host, int chip, int signo, int to_parent,
                         px_fault_point point, uint64_t n)
{
    px_fault_spec f;

    PX_ASSERT_OK(px_fault_parse(text, &f));
    assert_int_equal(f.host, host);
    assert_int_equal(f.chip, chip);
    assert_int_equal(f.signo, signo);
    assert_int_equal(f.to_parent, to_parent);
    assert_int_equal(f.point, point);
    assert_true(f.n == n);
}

/* Every part of the grammar, good and bad. */
static void test_parse(void **state)
{
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"", "chip:C"},
        {"chip:1", "action"},
        {"chip:1:kill", "action"},
        {"chip:1:kill:coll", "point"},
        {"chip:1:kill:coll:", "count N"},
        {"chip:1:kill:coll:0", "count N"},
        {"chip:1:kill:coll:5x", "count N"},
        {"chip:1:kill:coll:5:more", "count N"},
        {"chip:1:kill:coll:-5", "count N"},
        {"chip:1:kill:coll:99999999999999999999999", "count N"},
        {"chip:-1:kill:coll:5", "chip:C"},
        {"chip:1024:kill:coll:5", "chip:C"},
        {"chip::kill:coll:5", "chip:C"},
        {"host:x:chip:1:kill:coll:5", "host:H"},
        {"host:1:kill:coll:5", "chip:C"},
        {"chip:1:boom:coll:5", "not one of kill, stop"},
        {"chip:1:killer:coll:5", "not one of kill, stop"},
        {"chip:1:kill:iter:5", "not coll or call"},
        {"CHIP:1:kill:coll:5", "chip:C"},
    };

    (void)state;
    fault_parses("chip:1:kill:coll:50", 0, 1, SIGKILL, 0, PX_FAULT_AT_COLL, 50);
    fault_parses("host:3:chip:0:stop-worker:call:1", 3, 0, SIGSTOP, 1, PX_FAULT_AT_CALL, 1);
    fault_parses("host:0:chip:63:stop:coll:7", 0, 63, SIGSTOP, 0, PX_FAULT_AT_COLL, 7);
    fault_parses("chip:2:kill-worker:call:1000000", 0, 2, SIGKILL, 1, PX_FAULT_AT_CALL, 1000000);
    for (size_t i = 0; i < PX_ARRAY_SIZE(bad); i++) {
        px_fault_spec f;
        char want[128];

        px_clear_error();
        if (px_fault_parse(bad[i].text, &f) != PX_EINVAL)
            print_error("\"%s\" was taken\n", bad[i].text);
        assert_int_equal(px_fault_parse(bad[i].text, &f), PX_EINVAL);
        snprintf(want, sizeof(want), "PLEXUS_TEST_FAULT=\"%s\" is not valid", bad[i].text);
        assert_non_null(strstr(px_last_error(), want));
        if (strstr(px_last_error(), bad[i].says) == NULL)
            print_error("\"%s\": %s\n", bad[i].text, px_last_error());
        assert_non_null(strstr(px_last_error(), bad[i].says));
        assert_non_null(strstr(px_last_error(), "expected [host:H:]chip:C:ACTION:POINT:N"));
        assert_non_null(strstr(px_last_error(), "test-only"));
    }
}

/* As a knob: empty is unset; malformed refused by px_config_set and at px_worker_create. */
static void test_knob(void **state)
{
    px_config c;
    px_worker *w = NULL;

    (void)state;
    px_config_default(&c);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TEST_FAULT", ""));
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TEST_FAULT", "chip:0:kill:coll:1"));
    assert_int_equal(px_config_set(&c, "PLEXUS_TEST_FAULT", "chip:0:kill"), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "PLEXUS_TEST_FAULT=\"chip:0:kill\""));
    setenv("PLEXUS_TEST_FAULT", "chip:0:kill:col:1", 1);
    assert_int_equal(px_worker_create(NULL, &w), PX_EINVAL);
    assert_null(w);
    assert_non_null(strstr(px_last_error(), "the point after the action is not coll or call"));
    unsetenv("PLEXUS_TEST_FAULT");
}

/* Runs example name on 2 chips with fault (NULL: none); returns its status. */
static px_status fault_run(const char *name, const char *fault, int iters,
                           px_example_result *r)
{
    const px_example *ex = px_example_find(name);
    px_example_opts o = {.size = 4099, .iters = iters};
    px_config c;
    px_status st;

    assert_non_null(ex);
    px_test_config(&c, 1);
    c.chips = 2;
    if (fault != NULL)
        setenv("PLEXUS_TEST_FAULT", fault, 1);
    st = px_example_exec(ex, &c, &o, r);
    unsetenv("PLEXUS_TEST_FAULT");
    return st;
}

/* chip 1 kills itself at its 3rd collective of a 20-iteration allreduce: the run fails with
 * PX_EPEERDEAD naming chip 1 and SIGKILL; without the fault, or with one naming host 1 (no
 * MPI here: this is host 0), the same run passes. */
static void test_coll_kill(void **state)
{
    px_example_result r;
    int shm = px_test_shm_plexus_entries();

    (void)state;
    assert_int_equal(fault_run("allreduce", "chip:1:kill:coll:3", 20, &r), PX_EPEERDEAD);
    print_message("failed as it should: %s\n", px_last_error());
    assert_non_null(strstr(px_last_error(), "chip 1"));
    assert_non_null(strstr(px_last_error(), "SIGKILL"));
    PX_ASSERT_OK(fault_run("allreduce", NULL, 20, &r));
    assert_true(r.check_ok);
    PX_ASSERT_OK(fault_run("allreduce", "host:1:chip:1:kill:coll:3", 20, &r));
    assert_true(r.check_ok);
    assert_int_equal(px_test_shm_plexus_entries(), shm);
}

/* chip 0 kills itself as it starts the first call its worker posts: multi_chip fails with
 * PX_EPEERDEAD naming chip 0. */
static void test_call_kill(void **state)
{
    px_example_result r;

    (void)state;
    assert_int_equal(fault_run("multi_chip", "chip:0:kill:call:1", 1, &r), PX_EPEERDEAD);
    print_message("failed as it should: %s\n", px_last_error());
    assert_non_null(strstr(px_last_error(), "chip 0"));
    PX_ASSERT_OK(fault_run("multi_chip", NULL, 1, &r));
    assert_true(r.check_ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_knob),
        cmocka_unit_test(test_coll_kill),
        cmocka_unit_test(test_call_kill),
    };

    px_test_clear_env(NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
