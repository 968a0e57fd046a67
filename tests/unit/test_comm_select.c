/*
 * test_comm_select.c - the one rule that picks a pair of chips' comm transport
 * (src/comm/select.c): comm_choose's verdicts and reasons under the device profiles, forced
 * transports, need_peer_ptr, and comm_choice_error's words (the refusal, the profile, the
 * alternatives).
 *
 * Expected verdicts are worked out from the profiles' documented facts (profiles.c: default
 * maps every peer, a2a3-pcie none, pairs only 0-1, 2-3, ...), not read back from the rule.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "caps/caps_internal.h"
#include "comm/select.h"

/* Probes the facts under profile prof; skips when the host has no memfd (no transport at all). */
static void probe(const char *prof, px_caps *caps)
{
    px_config c;

    px_test_config(&c, 1);
    snprintf(c.device_profile, sizeof(c.device_profile), "%s", prof);
    PX_ASSERT_OK(px_caps_probe_with(&c, caps));
    if (px_caps_get(caps, PX_FACT_MEMFD) == 0)
        px_test_skip("memfd_create fails on this host: neither direct nor staged can accept");
}

/* Asserts that haystack contains needle, printing both when it does not. */
static void assert_has(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) == NULL)
        print_error("expected \"%s\" in \"%s\"\n", needle, haystack);
    assert_non_null(strstr(haystack, needle));
}

/* default: every pair direct with peer_map=1 and the profile in the reason; staged is the
 * fallback the rule would also accept. */
static void test_default_direct(void **state)
{
    px_caps caps;
    comm_choice ch;

    (void)state;
    probe("default", &caps);
    comm_choose(&caps, PX_COMM_TL_AUTO, 0, 0, 3, &ch);
    assert_int_equal(ch.tl, PX_COMM_TL_DIRECT);
    assert_int_equal(ch.accepts[PX_COMM_TL_DIRECT], 1);
    assert_string_equal(comm_choice_reason(&ch), "peer_map=1 in profile default");
    assert_int_equal(ch.accepts[PX_COMM_TL_STAGED], 1);
    assert_has(ch.why[PX_COMM_TL_STAGED], "host staging memory");
}

/* a2a3-pcie under auto: direct refused naming peer_map=0 and the profile; staged taken with
 * that refusal as its reason (the log line's words). */
static void test_a2a3_auto(void **state)
{
    px_caps caps;
    comm_choice ch;

    (void)state;
    probe("a2a3-pcie", &caps);
    comm_choose(&caps, PX_COMM_TL_AUTO, 0, 0, 1, &ch);
    assert_int_equal(ch.accepts[PX_COMM_TL_DIRECT], 0);
    assert_string_equal(ch.why[PX_COMM_TL_DIRECT], "peer_map=0 in profile a2a3-pcie");
    assert_int_equal(ch.tl, PX_COMM_TL_STAGED);
    assert_string_equal(comm_choice_reason(&ch), "peer_map=0 in profile a2a3-pcie");
}

/* Forced direct under a2a3-pcie: refused; the error names the force, peer_map=0 and the
 * profile, and staged as the alternative that would work. */
static void test_forced_direct_a2a3(void **state)
{
    px_caps caps;
    comm_choice ch;
    char err[640];

    (void)state;
    probe("a2a3-pcie", &caps);
    comm_choose(&caps, PX_COMM_TL_DIRECT, 0, 0, 1, &ch);
    assert_int_equal(ch.tl, PX_COMM_TL_NONE);
    comm_choice_error(&ch, PX_COMM_TL_DIRECT, 0, err, sizeof(err));
    assert_has(err, "forced direct (PLEXUS_COMM_TRANSPORT=direct) refused: peer_map=0 in "
                    "profile a2a3-pcie");
    assert_has(err, "; the alternative: staged would work (");
    assert_has(err, "set PLEXUS_COMM_TRANSPORT=auto (or --comm-transport auto)");
}

/* Forced staged where direct works: staged taken, the reason says it was forced
 * and that direct would work; a force never takes a transport that refuses. */
static void test_forced_staged_default(void **state)
{
    px_caps caps;
    comm_choice ch;

    (void)state;
    probe("default", &caps);
    comm_choose(&caps, PX_COMM_TL_STAGED, 0, 1, 2, &ch);
    assert_int_equal(ch.accepts[PX_COMM_TL_DIRECT], 1);
    assert_int_equal(ch.tl, PX_COMM_TL_STAGED);
    assert_string_equal(comm_choice_reason(&ch), "forced by PLEXUS_COMM_TRANSPORT=staged "
                                                 "(direct would work: peer_map=1 in "
                                                 "profile default)");
}

/* need_peer_ptr: staged refused with that reason on every build and profile; direct still
 * taken where it maps; where direct is refused too the error says what to do. */
static void test_need_peer_ptr(void **state)
{
    px_caps caps;
    comm_choice ch;
    char err[640];

    (void)state;
    probe("default", &caps);
    comm_choose(&caps, PX_COMM_TL_AUTO, 1, 0, 1, &ch);
    assert_int_equal(ch.tl, PX_COMM_TL_DIRECT);
    assert_int_equal(ch.accepts[PX_COMM_TL_STAGED], 0);
    assert_string_equal(ch.why[PX_COMM_TL_STAGED], "the domain needs peer pointers "
                                                   "(need_peer_ptr) and staged maps no peer "
                                                   "window");
    probe("a2a3-pcie", &caps);
    comm_choose(&caps, PX_COMM_TL_AUTO, 1, 0, 1, &ch);
    assert_int_equal(ch.tl, PX_COMM_TL_NONE);
    comm_choice_error(&ch, PX_COMM_TL_AUTO, 1, err, sizeof(err));
    assert_has(err, "direct refused (peer_map=0 in profile a2a3-pcie), staged refused (the "
                    "domain needs peer pointers (need_peer_ptr)");
    assert_has(err, "drop need_peer_ptr and use put/get");
}

/* pairs: chips 0,1 and 2,3 direct; 0,2 and 1,3 not (the group size and the profile in the
 * reason), so they go staged. */
static void test_pairs_profile(void **state)
{
    static const int expect_direct[4][4] = {
        {1, 1, 0, 0}, {1, 1, 0, 0}, {0, 0, 1, 1}, {0, 0, 1, 1}};
    px_caps caps;
    comm_choice ch;

    (void)state;
    probe("pairs", &caps);
    for (int a = 0; a < 4; a++) {
        for (int b = a + 1; b < 4; b++) {
            comm_choose(&caps, PX_COMM_TL_AUTO, 0, a, b, &ch);
            assert_int_equal(ch.accepts[PX_COMM_TL_DIRECT], expect_direct[a][b]);
            if (expect_direct[a][b]) {
                assert_int_equal(ch.tl, PX_COMM_TL_DIRECT);
                continue;
            }
            assert_has(ch.why[PX_COMM_TL_DIRECT], "peer_map_group=2 in profile pairs: chips "
                                                  "map each other only inside groups of 2 "
                                                  "(0-1, 2-3, ...)");
            assert_int_equal(ch.tl, PX_COMM_TL_STAGED);
            assert_string_equal(comm_choice_reason(&ch), ch.why[PX_COMM_TL_DIRECT]);
        }
    }
}

/* No memfd: direct refused as "peer_map=1 but memfd=0", staged as "memfd=0" (no staging
 * memory), and the error lists both with no alternative. */
static void test_no_memfd(void **state)
{
    px_caps caps;
    comm_choice ch;
    char err[640];

    (void)state;
    probe("default", &caps);
    caps_fact_set(&caps, PX_FACT_MEMFD, 0, PX_SRC_ENV, "test: memfd hidden");
    caps_fact_set(&caps, PX_FACT_PEER_MAP_EFFECTIVE, 0, PX_SRC_ENV, "test: memfd hidden");
    comm_choose(&caps, PX_COMM_TL_AUTO, 0, 0, 1, &ch);
    assert_int_equal(ch.tl, PX_COMM_TL_NONE);
    assert_string_equal(ch.why[PX_COMM_TL_DIRECT], "peer_map=1 but memfd=0 in profile default");
    assert_has(ch.why[PX_COMM_TL_STAGED], "memfd=0 on this host");
    assert_string_equal(comm_choice_reason(&ch), "no transport");
    comm_choice_error(&ch, PX_COMM_TL_AUTO, 0, err, sizeof(err));
    assert_has(err, "no path between these chips exists on this host");
}

/* A short buffer truncates the error cleanly (terminated, within its size). */
static void test_error_truncates(void **state)
{
    px_caps caps;
    comm_choice ch;
    char err[40];

    (void)state;
    probe("a2a3-pcie", &caps);
    comm_choose(&caps, PX_COMM_TL_DIRECT, 0, 0, 1, &ch);
    memset(err, 'x', sizeof(err));
    comm_choice_error(&ch, PX_COMM_TL_DIRECT, 0, err, sizeof(err));
    assert_int_equal(strlen(err), sizeof(err) - 1);
    assert_memory_equal(err, "forced direct (PLEXUS_COMM_TRANSPORT=di", sizeof(err) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_direct),       cmocka_unit_test(test_a2a3_auto),
        cmocka_unit_test(test_forced_direct_a2a3),   cmocka_unit_test(test_forced_staged_default),
        cmocka_unit_test(test_need_peer_ptr),        cmocka_unit_test(test_pairs_profile),
        cmocka_unit_test(test_no_memfd),             cmocka_unit_test(test_error_truncates),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
