/*
 * test_abi.c - the versioned public structs (issue 19 item 8): px_config and px_domain_spec
 * open with size and version, set by PX_CONFIG_INIT / px_config_default() and
 * PX_DOMAIN_SPEC_INIT. A zeroed struct (never initialised), one whose size does not match its
 * version (garbage) and one from a newer header (larger size, later version) are refused with
 * PX_EINVAL and a message saying which and what to do; a PX_CONFIG_INIT config gives every
 * field px_config_default()'s value (environment included) unless the caller set it.
 * Multi-process (the domain test forks chips): ctest runs it under RESOURCE_LOCK "chips"
 * (tests/system/abi.cmake).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Removes every PLEXUS_* variable but PLEXUS_LOG and PLEXUS_TEST_SLACK. */
static void ta_clear_env(void)
{
    static const char *const keep[] = {"PLEXUS_LOG", "PLEXUS_TEST_SLACK", NULL};

    px_test_clear_env(keep);
}

static void ta_error_has(const char *what)
{
    if (strstr(px_last_error(), what) == NULL)
        print_error("message \"%s\" lacks \"%s\"\n", px_last_error(), what);
    assert_non_null(strstr(px_last_error(), what));
}

/* ---- px_domain_spec ---- */

#define TA_CASES 5

typedef struct ta_spec {
    px_status st[TA_CASES];
    char msg[TA_CASES][512];
} ta_spec;

/* Allocates a 2-rank domain from: a zeroed spec, one from a newer header (size + 8), a later
 * version, a size that is not version 1's, and PX_DOMAIN_SPEC_INIT (released again). */
static px_status ta_spec_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[2] = {0, 1};
    px_domain_buffer b = {"x", 64};
    px_domain_spec good = PX_DOMAIN_SPEC_INIT, s[TA_CASES];
    ta_spec *t = user;
    px_domain *d = NULL;

    (void)args;
    good.name = "abi";
    good.chips = chips;
    good.nchips = 2;
    good.window_bytes = 4096;
    good.buffers = &b;
    good.nbuffers = 1;
    for (int i = 0; i < TA_CASES; i++)
        s[i] = good;
    s[0].size = 0;
    s[0].version = 0;
    s[1].size = sizeof(px_domain_spec) + 8;
    s[2].version = PX_DOMAIN_SPEC_VERSION + 1;
    s[3].size = 12;
    for (int i = 0; i < TA_CASES; i++) {
        d = NULL;
        t->st[i] = px_domain_alloc(o, &s[i], &d);
        snprintf(t->msg[i], sizeof(t->msg[i]), "%s", px_last_error());
        if (t->st[i] == PX_OK && px_domain_release(d) != PX_OK)
            return PX_EIO;
    }
    return PX_OK;
}

/* A zeroed, newer or garbage spec is refused with PX_EINVAL saying which; the macro's works.
 * First in this program: px_worker_init forks, so no other test's threads may run yet. */
static void test_domain_spec_versions(void **state)
{
    static const char *const want[TA_CASES - 1] = {
        "never initialised; initialise it with PX_DOMAIN_SPEC_INIT",
        "built against a newer plexus header", "built against a newer plexus header",
        "holds garbage",
    };
    px_config c;
    px_worker *w = NULL;
    ta_spec t;

    (void)state;
    memset(&t, 0, sizeof(t));
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    PX_ASSERT_OK(px_run(w, ta_spec_orch, NULL, &t));
    for (int i = 0; i < TA_CASES - 1; i++) {
        if (t.st[i] != PX_EINVAL || strstr(t.msg[i], want[i]) == NULL)
            print_error("case %d: %s: \"%s\" lacks \"%s\"\n", i, px_status_name(t.st[i]),
                        t.msg[i], want[i]);
        assert_int_equal(t.st[i], PX_EINVAL);
        assert_non_null(strstr(t.msg[i], "px_domain_spec"));
        assert_non_null(strstr(t.msg[i], want[i]));
    }
    if (t.st[TA_CASES - 1] != PX_OK)
        print_error("PX_DOMAIN_SPEC_INIT: %s\n", t.msg[TA_CASES - 1]);
    assert_int_equal(t.st[TA_CASES - 1], PX_OK);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- px_config ---- */

/* Each bad header is refused by px_worker_create, px_config_validate and px_config_set with
 * PX_EINVAL and the message `want`; nothing is created. */
static void ta_config_refused(const px_config *c, const char *want)
{
    px_config copy = *c;
    px_worker *w = NULL;

    assert_int_equal(px_worker_create(c, &w), PX_EINVAL);
    assert_null(w);
    ta_error_has("px_worker_create");
    ta_error_has("px_config");
    ta_error_has(want);
    assert_int_equal(px_config_validate(c), PX_EINVAL);
    ta_error_has(want);
    assert_int_equal(px_config_set(&copy, "PLEXUS_CORES", "1"), PX_EINVAL);
    ta_error_has(want);
}

/* A zeroed config, one from a newer header (size or version) and one whose size is not its
 * version's are refused, each with its reason and what to do. */
static void test_config_bad_headers(void **state)
{
    px_config c;

    (void)state;
    ta_clear_env();
    memset(&c, 0, sizeof(c));
    ta_config_refused(&c, "never initialised; initialise it with PX_CONFIG_INIT or "
                          "px_config_default()");
    PX_ASSERT_OK(px_config_default(&c));
    c.size = sizeof(px_config) + 8;
    ta_config_refused(&c, "built against a newer plexus header than the library");
    PX_ASSERT_OK(px_config_default(&c));
    c.version = PX_CONFIG_VERSION + 1;
    {
        char want[64];

        snprintf(want, sizeof(want), "knows it up to version %d", PX_CONFIG_VERSION);
        ta_config_refused(&c, want);
    }
    PX_ASSERT_OK(px_config_default(&c));
    c.size = 24;
    ta_config_refused(&c, "holds garbage");
    memset(&c, 0xa5, sizeof(c));
    ta_config_refused(&c, "newer plexus header"); /* 0xa5a5a5a5: neither size nor version */
}

/* px_config_default sets size and version, so its config works as before. */
static void test_config_default_sets_header(void **state)
{
    px_config c;
    px_worker *w = NULL;

    (void)state;
    ta_clear_env();
    memset(&c, 0, sizeof(c));
    px_test_config(&c, 1);
    assert_int_equal(c.size, sizeof(px_config));
    assert_int_equal(c.version, PX_CONFIG_VERSION);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    assert_int_equal(px_worker_cores(w), 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* Prints c's knob table into buf (px_config_print). */
static void ta_print(const px_config *c, char *buf, size_t n)
{
    FILE *f = fmemopen(buf, n, "w");

    assert_non_null(f);
    px_config_print(c, f);
    fclose(f);
}

/* PX_CONFIG_INIT leaves every field unset: its knob table is px_config_default()'s (so every
 * field has an unset value the library fills), it validates, and a worker made from it gets
 * the environment's values for the fields left unset and the caller's for the others. */
static void test_config_init_macro(void **state)
{
    static char a[8192], b[8192];
    px_config init = PX_CONFIG_INIT, dflt, c;
    px_worker *w = NULL;

    (void)state;
    ta_clear_env();
    assert_int_equal(init.size, sizeof(px_config));
    assert_int_equal(init.version, PX_CONFIG_VERSION);
    PX_ASSERT_OK(px_config_default(&dflt));
    ta_print(&init, a, sizeof(a));
    ta_print(&dflt, b, sizeof(b));
    assert_string_equal(a, b);
    assert_true(strlen(a) > 100);
    PX_ASSERT_OK(px_config_validate(&init));

    /* unset fields follow the environment; set ones are the caller's */
    setenv("PLEXUS_CORES", "3", 1);
    setenv("PLEXUS_DEVICE_MEM", "64M", 1);
    setenv("PLEXUS_HEAP_RING", "16M", 1);
    c = init;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    assert_int_equal(px_worker_cores(w), 3);
    PX_ASSERT_OK(px_worker_destroy(w));
    c = init;
    c.cores = 2;
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_HEAP_RING", "8M"));
    PX_ASSERT_OK(px_worker_create(&c, &w));
    assert_int_equal(px_worker_cores(w), 2);
    PX_ASSERT_OK(px_worker_destroy(w));
    ta_clear_env();

    /* a mistaken value is still refused, not taken for "unset" */
    c = init;
    c.cores = -1;
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    ta_error_has("PLEXUS_CORES");
    c = init;
    c.spin_ns = (uint32_t)-1;
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    ta_error_has("PLEXUS_SPIN_NS");
    c = init;
    c.device_profile[0] = '\0';
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    ta_error_has("device_profile");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_domain_spec_versions),
        cmocka_unit_test(test_config_bad_headers),
        cmocka_unit_test(test_config_default_sets_header),
        cmocka_unit_test(test_config_init_macro),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
