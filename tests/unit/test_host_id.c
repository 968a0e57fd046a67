/*
 * test_host_id.c - the host's identity (issue 21: what makes two ranks one host): the caps
 * fact host_id is the hostname and the first 8 characters of the boot id, PLEXUS_HOST_ID (or
 * the config's host_id) overrides it, and a malformed one is refused with what is expected.
 * Also px_config version 2 (which added host_id) against a version-1 caller: its config is
 * accepted, the field it lacks is unset (the derived id), and the bytes past its size are
 * never read.
 */
#include "testutil.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plexus/caps.h>

static void th_error_has(const char *what)
{
    if (strstr(px_last_error(), what) == NULL)
        print_error("message \"%s\" lacks \"%s\"\n", px_last_error(), what);
    assert_non_null(strstr(px_last_error(), what));
}

/* The host id the probe gives under c, and its source. */
static const char *th_probe(const px_config *c, px_fact_source *src)
{
    static px_caps caps;

    PX_ASSERT_OK(px_caps_probe_with(c, &caps));
    *src = caps.f[PX_FACT_HOST_ID].source;
    return caps.f[PX_FACT_HOST_ID].text;
}

/* Without PLEXUS_HOST_ID: "<hostname>-<boot id's first 8>", derived. */
static void test_derived(void **state)
{
    px_config c;
    px_caps caps;
    px_fact_source src;
    char want[PX_FACT_TEXT_MAX];

    (void)state;
    unsetenv("PLEXUS_HOST_ID");
    PX_ASSERT_OK(px_config_default(&c));
    assert_string_equal(c.host_id, "");
    PX_ASSERT_OK(px_caps_probe_with(&c, &caps));
    snprintf(want, sizeof(want), "%.40s-%.8s", caps.f[PX_FACT_HOSTNAME].text,
             caps.f[PX_FACT_BOOT_ID].text);
    assert_true(caps.f[PX_FACT_HOSTNAME].text[0] != '\0');
    assert_true(strlen(caps.f[PX_FACT_BOOT_ID].text) >= 8);
    assert_string_equal(th_probe(&c, &src), want);
    assert_int_equal(src, PX_SRC_DERIVED);
}

/* PLEXUS_HOST_ID and the config's field override it; malformed ones are refused. */
static void test_override(void **state)
{
    static const char *const bad[] = {"two words", "a/b", "x\ty",
                                      "0123456789012345678901234567890123456789012345678"};
    px_config c;
    px_fact_source src;

    (void)state;
    setenv("PLEXUS_HOST_ID", "node-a.rack:3", 1);
    PX_ASSERT_OK(px_config_default(&c));
    assert_string_equal(th_probe(&c, &src), "node-a.rack:3");
    assert_int_equal(src, PX_SRC_ENV);
    unsetenv("PLEXUS_HOST_ID");
    PX_ASSERT_OK(px_config_default(&c));
    snprintf(c.host_id, sizeof(c.host_id), "%s", "host_b");
    assert_string_equal(th_probe(&c, &src), "host_b");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("PLEXUS_HOST_ID", bad[i], 1);
        assert_int_equal(px_config_default(&c), PX_EINVAL);
        th_error_has("PLEXUS_HOST_ID");
        th_error_has("letters, digits and . _ : -");
        unsetenv("PLEXUS_HOST_ID");
        PX_ASSERT_OK(px_config_default(&c));
        memset(c.host_id, 0, sizeof(c.host_id));
        memcpy(c.host_id, bad[i], strlen(bad[i]) < sizeof(c.host_id) ? strlen(bad[i]) :
                                                                         sizeof(c.host_id));
        assert_int_equal(px_config_validate(&c), PX_EINVAL);
        th_error_has("host_id");
    }
}

/* A caller built against version 1 (no host_id): accepted; the field it lacks is unset, and
 * what lies past its size is not read (here: junk a newer caller would never leave). */
static void test_version1_caller(void **state)
{
    px_config c;
    px_fact_source src;
    px_worker *w = NULL;
    const char *id;

    (void)state;
    unsetenv("PLEXUS_HOST_ID");
    px_test_config(&c, 1);
    c.size = (uint32_t)offsetof(px_config, host_id);
    c.version = 1;
    memset(c.host_id, 'Z', sizeof(c.host_id)); /* not terminated: would be refused if read */
    PX_ASSERT_OK(px_config_validate(&c));
    id = th_probe(&c, &src);
    assert_int_equal(src, PX_SRC_DERIVED);
    assert_null(strchr(id, 'Z'));
    /* a knob of a field the caller's config does not have is refused, saying so */
    assert_int_equal(px_config_set(&c, "PLEXUS_HOST_ID", "x"), PX_EINVAL);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_destroy(w));
    /* and a version-1 size under the version-2 number is garbage */
    c.version = 2;
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    th_error_has("holds garbage");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_derived),
        cmocka_unit_test(test_override),
        cmocka_unit_test(test_version1_caller),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
