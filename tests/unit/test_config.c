/*
 * test_config.c - the PLEXUS_* knob table (src/util/config.c): defaults, every knob's good
 * and bad values (a bad value is PX_EINVAL with the expected form in the message), size
 * suffixes, unknown knob names, the environment (overrides, bad values, an unknown PLEXUS_*
 * variable that only draws a warning) and the cross-field checks of px_config_validate.
 */
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

/* Removes every PLEXUS_* variable, so each test starts from the built-in defaults. */
static void clear_plexus_env(void)
{
    px_test_clear_env(NULL);
}

static int setup(void **state)
{
    (void)state;
    clear_plexus_env();
    return 0;
}

static void assert_error_has(const char *what)
{
    if (strstr(px_last_error(), what) == NULL)
        print_error("message \"%s\" lacks \"%s\"\n", px_last_error(), what);
    assert_non_null(strstr(px_last_error(), what));
}

/* Sets name=bad and expects PX_EINVAL naming the knob, the value and the expected form. */
static void expect_bad(px_config *c, const char *name, const char *bad, const char *form)
{
    px_config before = *c;
    char quoted[128];

    px_clear_error();
    assert_int_equal(px_config_set(c, name, bad), PX_EINVAL);
    snprintf(quoted, sizeof(quoted), "%s=\"%s\"", name, bad);
    assert_error_has(quoted);
    assert_error_has(form);
    assert_memory_equal(c, &before, sizeof(*c));
}

/* With no PLEXUS_* variables every field holds the documented default. */
static void test_defaults(void **state)
{
    px_config c;

    (void)state;
    PX_ASSERT_OK(px_config_default(&c));
    assert_int_equal(c.log_level, 1); /* warn */
    assert_int_equal(c.level, 2);
    assert_int_equal(c.cores, 0);
    assert_int_equal(c.chips, 2);
    assert_string_equal(c.device_profile, "default");
    assert_int_equal(c.device_mem, 1073741824ull);
    assert_int_equal(c.heap_ring, 268435456ull);
    assert_int_equal(c.task_ring, 4096);
    assert_int_equal(c.dep_ring, 262144);
    assert_true(c.timeout_s == 600.0);
    assert_int_equal(c.spin_ns, 2000);
    assert_int_equal(c.hugepages, 1);
    PX_ASSERT_OK(px_config_validate(&c));
}

/* PLEXUS_LOG takes the four level names, PLEXUS_LEVEL 2 or 3. */
static void test_log_and_level(void **state)
{
    px_config c;

    (void)state;
    px_config_default(&c);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_LOG", "debug"));
    assert_int_equal(c.log_level, 3);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_LOG", "error"));
    assert_int_equal(c.log_level, 0);
    expect_bad(&c, "PLEXUS_LOG", "loud", "one of error, warn, info, debug");
    expect_bad(&c, "PLEXUS_LOG", "", "one of error, warn, info, debug");
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_LEVEL", "3"));
    assert_int_equal(c.level, 3);
    expect_bad(&c, "PLEXUS_LEVEL", "4", "2 or 3");
    expect_bad(&c, "PLEXUS_LEVEL", "1", "2 or 3");
    expect_bad(&c, "PLEXUS_LEVEL", "2.5", "2 or 3");
}

/* PLEXUS_CORES is 0..1024, PLEXUS_CHIPS 1..64; signs, text and overflow are rejected. */
static void test_cores_and_chips(void **state)
{
    px_config c;

    (void)state;
    px_config_default(&c);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_CORES", "8"));
    assert_int_equal(c.cores, 8);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_CORES", "1024"));
    assert_int_equal(c.cores, 1024);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_CORES", "0"));
    assert_int_equal(c.cores, 0);
    expect_bad(&c, "PLEXUS_CORES", "-1", "an integer 0..1024");
    expect_bad(&c, "PLEXUS_CORES", "1025", "an integer 0..1024");
    expect_bad(&c, "PLEXUS_CORES", "eight", "an integer 0..1024");
    expect_bad(&c, "PLEXUS_CORES", "4x", "an integer 0..1024");
    expect_bad(&c, "PLEXUS_CORES", "99999999999999999999", "an integer 0..1024");
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_CHIPS", "64"));
    assert_int_equal(c.chips, 64);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_CHIPS", "1"));
    assert_int_equal(c.chips, 1);
    expect_bad(&c, "PLEXUS_CHIPS", "0", "an integer 1..64");
    expect_bad(&c, "PLEXUS_CHIPS", "65", "an integer 1..64");
}

/* PLEXUS_DEVICE_PROFILE takes any non-empty name that fits; the probe checks the name. */
static void test_profile_knob(void **state)
{
    px_config c;
    char longname[PX_PROFILE_NAME_MAX + 1];

    (void)state;
    px_config_default(&c);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DEVICE_PROFILE", "host64k"));
    assert_string_equal(c.device_profile, "host64k");
    memset(longname, 'x', PX_PROFILE_NAME_MAX);
    longname[PX_PROFILE_NAME_MAX] = '\0';
    expect_bad(&c, "PLEXUS_DEVICE_PROFILE", "", "a device profile name");
    expect_bad(&c, "PLEXUS_DEVICE_PROFILE", longname, "a device profile name");
}

/* Byte sizes: plain numbers and K/M/G (powers of 1024, either case, optional iB or B). */
static void test_sizes(void **state)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"1048576", 1048576ull}, {"64K", 65536ull},        {"64k", 65536ull},
        {"256M", 268435456ull},  {"1G", 1073741824ull},    {"2g", 2147483648ull},
        {"4KiB", 4096ull},       {"4KB", 4096ull},         {"1", 1ull},
    };
    static const char *const bad[] = {"0", "-1", "", "12X", "1T", "K", "1.5G", "+1K",
                                      "0x10", "99999999999G"};
    const char *form = "a decimal byte size 1..9223372036854775807";
    px_config c;

    (void)state;
    px_config_default(&c);
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DEVICE_MEM", good[i].text));
        assert_int_equal(c.device_mem, good[i].bytes);
        PX_ASSERT_OK(px_config_set(&c, "PLEXUS_HEAP_RING", good[i].text));
        assert_int_equal(c.heap_ring, good[i].bytes);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect_bad(&c, "PLEXUS_DEVICE_MEM", bad[i], form);
        expect_bad(&c, "PLEXUS_HEAP_RING", bad[i], form);
    }
}

/* Task ring: a power of two in 64..16M; dep ring: 1024..268435456. */
static void test_rings(void **state)
{
    px_config c;

    (void)state;
    px_config_default(&c);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TASK_RING", "64"));
    assert_int_equal(c.task_ring, 64);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TASK_RING", "16777216"));
    assert_int_equal(c.task_ring, 16777216);
    expect_bad(&c, "PLEXUS_TASK_RING", "100", "a power of two from 64 to 16777216");
    expect_bad(&c, "PLEXUS_TASK_RING", "32", "a power of two from 64 to 16777216");
    expect_bad(&c, "PLEXUS_TASK_RING", "33554432", "a power of two from 64 to 16777216");
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DEP_RING", "1024"));
    assert_int_equal(c.dep_ring, 1024);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DEP_RING", "268435456"));
    assert_int_equal(c.dep_ring, 268435456);
    expect_bad(&c, "PLEXUS_DEP_RING", "1023", "an integer from 1024 to 268435456");
    expect_bad(&c, "PLEXUS_DEP_RING", "268435457", "an integer from 1024 to 268435456");
}

/* Timeouts are positive finite seconds; spin is 0..1000000 ns; hugepages is 0 or 1. */
static void test_time_and_flags(void **state)
{
    static const char *const bad_s[] = {"0", "-1", "inf", "nan", "abc", "1e8", "",
                                            "0x10", "+5", "1e", ".", "5s"};
    const char *form_s = "seconds, a decimal number above 0 and at most 10000000";
    px_config c;

    (void)state;
    px_config_default(&c);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TIMEOUT_S", "0.5"));
    assert_true(c.timeout_s == 0.5);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TIMEOUT_S", "30"));
    assert_true(c.timeout_s == 30.0);
    for (size_t i = 0; i < sizeof(bad_s) / sizeof(bad_s[0]); i++)
        expect_bad(&c, "PLEXUS_TIMEOUT_S", bad_s[i], form_s);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_SPIN_NS", "0"));
    assert_int_equal(c.spin_ns, 0);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_SPIN_NS", "1000000"));
    assert_int_equal(c.spin_ns, 1000000);
    expect_bad(&c, "PLEXUS_SPIN_NS", "1000001", "nanoseconds, an integer 0..1000000");
    expect_bad(&c, "PLEXUS_SPIN_NS", "-5", "nanoseconds, an integer 0..1000000");
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_HUGEPAGES", "0"));
    assert_int_equal(c.hugepages, 0);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_HUGEPAGES", "1"));
    assert_int_equal(c.hugepages, 1);
    expect_bad(&c, "PLEXUS_HUGEPAGES", "2", "0 or 1");
    expect_bad(&c, "PLEXUS_HUGEPAGES", "yes", "0 or 1");
    /* PLEXUS_TEST_SLACK is checked but stored nowhere in px_config */
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TEST_SLACK", "2"));
    expect_bad(&c, "PLEXUS_TEST_SLACK", "0", form_s);
}

/*
 * One text rule for every knob: leading or trailing whitespace is refused (the message says
 * so) whatever the knob's parser, and numbers are decimal only (0x10 and +4 are refused, with
 * the accepted range in the message). Before this rule " 4" was accepted by PLEXUS_CORES but
 * " warn" refused by PLEXUS_LOG, and PLEXUS_TIMEOUT_S took 0x10 as 16 seconds.
 */
static void test_text_rules(void **state)
{
    static const struct {
        const char *name, *good;
    } knobs[] = {
        {"PLEXUS_LOG", "warn"},          {"PLEXUS_LEVEL", "2"},
        {"PLEXUS_CORES", "4"},           {"PLEXUS_CHIPS", "2"},
        {"PLEXUS_SUBS", "0"},            {"PLEXUS_DEVICE_PROFILE", "default"},
        {"PLEXUS_DEVICE_MEM", "1G"},     {"PLEXUS_HEAP_RING", "64M"},
        {"PLEXUS_TASK_RING", "4096"},    {"PLEXUS_DEP_RING", "262144"},
        {"PLEXUS_TIMEOUT_S", "30"},      {"PLEXUS_SPIN_NS", "2000"},
        {"PLEXUS_YIELD_NS", "50000"},    {"PLEXUS_HUGEPAGES", "1"},
        {"PLEXUS_DFX", "all"},           {"PLEXUS_DFX_OUT", "plexus-dfx"},
        {"PLEXUS_DFX_TRANSPORT", "auto"}, {"PLEXUS_DFX_ARGS_LEVEL", "1"},
        {"PLEXUS_DFX_ARGS_ARENA", "1M"}, {"PLEXUS_DFX_STRICT", "0"},
        {"PLEXUS_DFX_BACKSTOP_S", "30"}, {"PLEXUS_DFX_BUFFER_RECORDS", "2048"},
        {"PLEXUS_DFX_BUFFERS", "0"},     {"PLEXUS_TEST_SLACK", "1"},
    };
    static const char *const pads[][2] = {{" ", ""}, {"", " "}, {"\t", ""}, {"", "\n"}};
    px_config c;

    (void)state;
    px_config_default(&c);
    for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
        PX_ASSERT_OK(px_config_set(&c, knobs[i].name, knobs[i].good));
        for (size_t p = 0; p < sizeof(pads) / sizeof(pads[0]); p++) {
            char text[64];

            snprintf(text, sizeof(text), "%s%s%s", pads[p][0], knobs[i].good, pads[p][1]);
            expect_bad(&c, knobs[i].name, text, "leading or trailing whitespace is refused");
        }
    }
    expect_bad(&c, "PLEXUS_TIMEOUT_S", "0x10", "at most 10000000");
    expect_bad(&c, "PLEXUS_TIMEOUT_S", "1e8", "at most 10000000");
    expect_bad(&c, "PLEXUS_CORES", "0x10", "an integer 0..1024");
    expect_bad(&c, "PLEXUS_CORES", "+4", "an integer 0..1024");
    expect_bad(&c, "PLEXUS_TASK_RING", "0x1000", "a power of two from 64 to 16777216");
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TIMEOUT_S", "1e3"));
    assert_true(c.timeout_s == 1000.0);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_TIMEOUT_S", "10000000"));
    assert_true(c.timeout_s == 1e7);
}

/* An unknown knob name is PX_ENOENT naming it. */
static void test_unknown_knob(void **state)
{
    px_config c;

    (void)state;
    px_config_default(&c);
    assert_int_equal(px_config_set(&c, "PLEXUS_NOPE", "1"), PX_ENOENT);
    assert_error_has("PLEXUS_NOPE");
    assert_int_equal(px_config_set(&c, "CORES", "1"), PX_ENOENT);
}

/* PLEXUS_* variables override the defaults when px_config_default runs. */
static void test_env_overrides(void **state)
{
    px_config c;

    (void)state;
    setenv("PLEXUS_CORES", "3", 1);
    setenv("PLEXUS_DEVICE_MEM", "64M", 1);
    setenv("PLEXUS_DEVICE_PROFILE", "minimal", 1);
    PX_ASSERT_OK(px_config_default(&c));
    assert_int_equal(c.cores, 3);
    assert_int_equal(c.device_mem, 64ull << 20);
    assert_string_equal(c.device_profile, "minimal");
    assert_int_equal(c.chips, 2);
    clear_plexus_env();
}

/* A bad variable is PX_EINVAL with its form; that field keeps its default, others apply. */
static void test_env_bad_value(void **state)
{
    px_config c;

    (void)state;
    setenv("PLEXUS_CORES", "abc", 1);
    setenv("PLEXUS_CHIPS", "4", 1);
    assert_int_equal(px_config_default(&c), PX_EINVAL);
    assert_error_has("PLEXUS_CORES=\"abc\"");
    assert_error_has("an integer 0..1024");
    assert_int_equal(c.cores, 0);
    assert_int_equal(c.chips, 4);
    clear_plexus_env();
}

/* Returns what fn wrote to stderr (file descriptor 2) while it ran, as a new string. */
static char *capture_stderr(px_status (*fn)(px_config *), px_config *c, px_status *st)
{
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);
    long n;
    char *s;

    assert_non_null(tmp);
    assert_true(saved >= 0);
    fflush(stderr);
    dup2(fileno(tmp), STDERR_FILENO);
    *st = fn(c);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    n = lseek(fileno(tmp), 0, SEEK_END);
    s = calloc(1, (size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(pread(fileno(tmp), s, (size_t)n, 0), n);
    fclose(tmp);
    return s;
}

/* An unknown PLEXUS_FOO only draws a warning that names it; the call still succeeds. */
static void test_env_unknown_warns(void **state)
{
    px_config c;
    px_status st;
    char *err;

    (void)state;
    px_log_set_level(PX_LOG_WARN);
    setenv("PLEXUS_FOO", "1", 1);
    err = capture_stderr(px_config_default, &c, &st);
    clear_plexus_env();
    assert_int_equal(st, PX_OK);
    if (strstr(err, "PLEXUS_FOO") == NULL)
        print_error("stderr was \"%s\"\n", err);
    assert_non_null(strstr(err, "PLEXUS_FOO"));
    assert_non_null(strstr(err, "warn"));
    free(err);
    assert_int_equal(c.cores, 0);
}

/* Cross-field rules: the heap ring must fit inside device memory. */
static void test_validate(void **state)
{
    px_config c;

    (void)state;
    px_config_default(&c);
    c.heap_ring = c.device_mem;
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    assert_error_has("PLEXUS_HEAP_RING");
    px_config_default(&c);
    c.task_ring = 100;
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    assert_error_has("PLEXUS_TASK_RING");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, setup),
        cmocka_unit_test_setup(test_log_and_level, setup),
        cmocka_unit_test_setup(test_cores_and_chips, setup),
        cmocka_unit_test_setup(test_profile_knob, setup),
        cmocka_unit_test_setup(test_sizes, setup),
        cmocka_unit_test_setup(test_rings, setup),
        cmocka_unit_test_setup(test_time_and_flags, setup),
        cmocka_unit_test_setup(test_text_rules, setup),
        cmocka_unit_test_setup(test_unknown_knob, setup),
        cmocka_unit_test_setup(test_env_overrides, setup),
        cmocka_unit_test_setup(test_env_bad_value, setup),
        cmocka_unit_test_setup(test_env_unknown_warns, setup),
        cmocka_unit_test_setup(test_validate, setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
