/*
 * test_job_start.c - what the hosts of an MPI job compare when they first meet
 * (comm/job_start.c, issue 37), without MPI: the records every host would receive, built
 * from configs, and the verdict every host computes from them. Alike: PX_OK; a knob that must
 * agree differs: PX_EINVAL naming both hosts, each field with both values, why and what to
 * do, the same words whichever host reads them; a level-2 rank among level-3 ones is named;
 * level-2 ranks alone agree whatever their knobs; what may differ (chips, PLEXUS_TIMEOUT_S,
 * the DFX directory) is not compared.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plexus/dfx.h>

#include "comm/job_start.h"
#include "comm/proxy.h"

static void tj_error_has(const char *what)
{
    if (strstr(px_last_error(), what) == NULL)
        print_error("message \"%s\" lacks \"%s\"\n", px_last_error(), what);
    assert_non_null(strstr(px_last_error(), what));
}

/* Host h's record from config c at level `level`. */
static void tj_host(comm_host *hosts, int h, const px_config *c, int level)
{
    memset(&hosts[h], 0, sizeof(hosts[h]));
    snprintf(hosts[h].id, sizeof(hosts[h].id), "host-%c", 'a' + h);
    hosts[h].pid = 100 + h;
    hosts[h].chips = 2;
    comm_job_facts_fill(c, level, &hosts[h].job);
}

/* Three hosts from one config agree; chips, PLEXUS_TIMEOUT_S and the DFX directory may differ. */
static void test_alike(void **state)
{
    comm_host hosts[3];
    px_config c, d;

    (void)state;
    PX_ASSERT_OK(px_config_default(&c));
    d = c;
    d.timeout_s = c.timeout_s + 5;
    snprintf(d.out_dir, sizeof(d.out_dir), "elsewhere");
    tj_host(hosts, 0, &c, 3);
    tj_host(hosts, 1, &c, 3);
    tj_host(hosts, 2, &d, 3);
    hosts[2].chips = 5;
    assert_int_equal(comm_job_facts_agree(hosts, 3), PX_OK);
}

/* DFX on host 0 only and another one-shot size on host 1: both named, with both values and
 * hosts, and the same message whatever host computes it (the records are the same). */
static void test_knobs_differ(void **state)
{
    comm_host hosts[2];
    px_config c, d;
    char first[1024];

    (void)state;
    PX_ASSERT_OK(px_config_default(&c));
    d = c;
    c.dfx = PX_DFX_ALL;
    d.dfx = 0;
    d.comm_oneshot_max = 1024;
    c.comm_oneshot_max = 65536;
    tj_host(hosts, 0, &c, 3);
    tj_host(hosts, 1, &d, 3);
    assert_int_equal(comm_job_facts_agree(hosts, 2), PX_EINVAL);
    tj_error_has("host 0 (id host-a, pid 100) vs host 1 (id host-b, pid 101)");
    tj_error_has("PLEXUS_COMM_ONESHOT_MAX 65536 vs 1024 (");
    tj_error_has("PLEXUS_DFX all vs 0 (host 0 gathers");
    tj_error_has("set each alike on every rank");
    snprintf(first, sizeof(first), "%s", px_last_error());
    assert_int_equal(comm_job_facts_agree(hosts, 2), PX_EINVAL);
    assert_string_equal(first, px_last_error());
}

/* PLEXUS_COMM_TRANSPORT and PLEXUS_COMM_TIMEOUT_S on a third host: named against host 0. */
static void test_third_host(void **state)
{
    comm_host hosts[3];
    px_config c, d;

    (void)state;
    PX_ASSERT_OK(px_config_default(&c));
    d = c;
    PX_ASSERT_OK(px_config_set(&d, "PLEXUS_COMM_TRANSPORT", "mpi"));
    d.comm_timeout_s = c.comm_timeout_s * 2;
    tj_host(hosts, 0, &c, 3);
    tj_host(hosts, 1, &c, 3);
    tj_host(hosts, 2, &d, 3);
    assert_int_equal(comm_job_facts_agree(hosts, 3), PX_EINVAL);
    tj_error_has("vs host 2 (id host-c, pid 102)");
    tj_error_has("PLEXUS_COMM_TRANSPORT auto vs mpi (");
    tj_error_has("PLEXUS_COMM_TIMEOUT_S ");
}

/* A level-2 rank among level-3 ones is named with what to do; level-2 ranks alone agree
 * whatever their knobs; another plexus version is named before anything else. */
static void test_level_and_version(void **state)
{
    comm_host hosts[2];
    px_config c, d;

    (void)state;
    PX_ASSERT_OK(px_config_default(&c));
    d = c;
    d.dfx = PX_DFX_ALL;
    tj_host(hosts, 0, &c, 3);
    tj_host(hosts, 1, &d, 2);
    assert_int_equal(comm_job_facts_agree(hosts, 2), PX_EINVAL);
    tj_error_has("worker level 3 vs 2 (a level-2 worker");
    tj_error_has("PLEXUS_MPI=off");
    assert_null(strstr(px_last_error(), "PLEXUS_DFX"));
    tj_host(hosts, 0, &c, 2);
    assert_int_equal(comm_job_facts_agree(hosts, 2), PX_OK);
    tj_host(hosts, 0, &c, 3);
    tj_host(hosts, 1, &c, 3);
    snprintf(hosts[1].job.version, sizeof(hosts[1].job.version), "9.9.9");
    assert_int_equal(comm_job_facts_agree(hosts, 2), PX_EINVAL);
    tj_error_has("plexus version " PX_VERSION_STRING " (wire ");
    tj_error_has("vs 9.9.9 (wire ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alike),
        cmocka_unit_test(test_knobs_differ),
        cmocka_unit_test(test_third_host),
        cmocka_unit_test(test_level_and_version),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
