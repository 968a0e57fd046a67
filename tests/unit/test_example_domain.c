/*
 * test_example_domain.c - the domain lines `plexus run` and `plexus demo` print for the
 * communication examples (examples/comm_common.c): per domain how many pairs of ranks use
 * each transport, and one line per distinct reason of the pairs not on direct (not one per
 * pair), for all-direct, all-staged and mixed domains, and the cap on reason lines.
 *
 * The pairs come from tables here (px_example_pairs), so every shape is checked without
 * chips; real domains of each shape are checked by the command-line tests (cli.demo_comm,
 * cli.run_allreduce_*, cli.run_*_a2a3_log, cli.run_allreduce_fallback_*).
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "examples.h"

#define GROUP_WHY "peer_map_group=2 in profile pairs: chips map each other only inside groups of 2"

typedef struct pair_table {
    const char *profile; /* "default", "a2a3-pcie", "pairs" or "distinct" */
    char why[16][16][128];
} pair_table;

/* direct where the profile maps the pair, else staged (as the profiles' facts say). */
static const char *table_transport(const void *ctx, int a, int b)
{
    const pair_table *t = ctx;

    if (strcmp(t->profile, "default") == 0)
        return "direct";
    if (strcmp(t->profile, "pairs") == 0 && a / 2 == b / 2)
        return "direct";
    return "staged";
}

static const char *table_reason(const void *ctx, int a, int b)
{
    const pair_table *t = ctx;

    return t->why[a][b];
}

/* Fills t's reasons for profile prof: "distinct" gives every pair a reason of its own. */
static void table_fill(pair_table *t, const char *prof)
{
    t->profile = prof;
    for (int a = 0; a < 16; a++) {
        for (int b = 0; b < 16; b++) {
            if (strcmp(prof, "distinct") == 0)
                snprintf(t->why[a][b], sizeof(t->why[a][b]), "reason %d-%d", a, b);
            else if (strcmp(table_transport(t, a, b), "direct") == 0)
                snprintf(t->why[a][b], sizeof(t->why[a][b]), "peer_map=1 in profile %s", prof);
            else if (strcmp(prof, "pairs") == 0)
                snprintf(t->why[a][b], sizeof(t->why[a][b]), "%s", GROUP_WHY);
            else
                snprintf(t->why[a][b], sizeof(t->why[a][b]), "peer_map=0 in profile %s", prof);
        }
    }
}

static const int chips16[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static px_example_pairs pairs_of(const pair_table *t, const char *name, int size)
{
    px_example_pairs p = {.name = name, .size = size, .chips = chips16, .ctx = t,
                          .transport = table_transport, .reason = table_reason};

    return p;
}

/* All direct: the reason and the pair count on the domain's line, no reason lines. */
static void test_all_direct(void **state)
{
    static pair_table t;
    px_example_pairs p;
    char info[512], why[1024];

    (void)state;
    table_fill(&t, "default");
    p = pairs_of(&t, "allreduce", 4);
    px_example_pairs_info(&p, info, sizeof(info));
    px_example_pairs_reasons(&p, why, sizeof(why));
    assert_string_equal(info, "domain allreduce: 4 members (chips 0,1,2,3), transport direct "
                              "(peer_map=1 in profile default: 6 pairs direct, peers' windows "
                              "mapped, load/store)");
    assert_string_equal(why, "");
    p.size = 1;
    px_example_pairs_info(&p, info, sizeof(info));
    assert_string_equal(info, "domain allreduce: 1 member (chips 0), transport direct (one "
                              "rank: no peer to reach)");
}

/* All staged (a2a3-pcie): the count on the line, the one shared reason once. */
static void test_all_staged(void **state)
{
    static pair_table t;
    px_example_pairs p;
    char info[512], why[1024];

    (void)state;
    table_fill(&t, "a2a3-pcie");
    p = pairs_of(&t, "tp", 4);
    px_example_pairs_info(&p, info, sizeof(info));
    px_example_pairs_reasons(&p, why, sizeof(why));
    assert_string_equal(info, "domain tp: 4 members (chips 0,1,2,3), transport staged (6 pairs "
                              "staged)");
    assert_string_equal(why, "\n  staged for 6 pairs: peer_map=0 in profile a2a3-pcie");
}

/* Mixed (pairs, 4 chips): 2 direct and 4 staged pairs; the staged pairs' one reason once. */
static void test_mixed(void **state)
{
    static pair_table t;
    px_example_pairs p;
    char info[512], why[1024];

    (void)state;
    table_fill(&t, "pairs");
    p = pairs_of(&t, "tp", 4);
    px_example_pairs_info(&p, info, sizeof(info));
    px_example_pairs_reasons(&p, why, sizeof(why));
    assert_string_equal(info, "domain tp: 4 members (chips 0,1,2,3), transport mixed (2 pairs "
                              "direct, 4 staged)");
    assert_string_equal(why, "\n  staged for 4 pairs: " GROUP_WHY);
    p.size = 3; /* 0-1 direct; 0-2, 1-2 staged */
    px_example_pairs_info(&p, info, sizeof(info));
    assert_string_equal(info, "domain tp: 3 members (chips 0,1,2), transport mixed (1 pair "
                              "direct, 2 staged)");
}

/* A reason per pair: 8 lines, then one counting the rest (28 pairs at 8 ranks: 20 more). */
static void test_reason_cap(void **state)
{
    static pair_table t;
    px_example_pairs p;
    char why[2048];
    int lines = 0;

    (void)state;
    table_fill(&t, "distinct");
    p = pairs_of(&t, "wide", 8);
    px_example_pairs_reasons(&p, why, sizeof(why));
    for (const char *c = why; (c = strchr(c, '\n')) != NULL; c++)
        lines++;
    assert_int_equal(lines, 9);
    assert_non_null(strstr(why, "\n  staged for 1 pair: reason 0-1\n"));
    assert_non_null(strstr(why, "\n  and 20 more pairs with other reasons (plexus doctor "
                                "--comm, or dfx.json's \"pairs\", lists each)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_direct),
        cmocka_unit_test(test_all_staged),
        cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_reason_cap),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
