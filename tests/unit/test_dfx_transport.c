/*
 * test_dfx_transport.c - DFX transport selection on real runs: which transport each
 * collector gets under each device profile and allow-list, the refusals recorded in
 * dfx.json with their reasons, the error before launch when the allow-list leaves nothing,
 * huge-page accounting across collectors, and identical outputs whichever transport
 * carried the records.
 *
 * Expected transports are worked out from the profile table (docs/formats.md): `default`
 * maps device memory with ordinary pages, so mapped; `host64k` has 64 KiB device pages, so
 * on a 4 KiB host ordinary mapping is refused and, with PLEXUS_HUGEPAGES=0 hiding huge
 * pages, only shadow is left; `minimal` has bar_mem=0 and bar_huge_mem=0, so shadow. Every
 * run is strict (PLEXUS_DFX_STRICT=1): a reconcile mismatch would fail the run itself.
 */
#include "dfx_testgraph.h"

#include <unistd.h>

#include "dfx/transport/transport.h"

static const uint32_t tg_some = PX_DFX_DEPGEN | PX_DFX_SWIMLANE | PX_DFX_ARGSDUMP;

/* Skips when the host's own pages are 64 KiB: host64k then maps ordinary pages. */
static void need_4k_host(void)
{
    if (sysconf(_SC_PAGESIZE) != 4096)
        px_test_skip("host page size is %ld, the host64k expectations assume 4096",
                     sysconf(_SC_PAGESIZE));
}

/* Profile default: every collector via mapped, nothing refused. */
static void test_default_mapped(void **state)
{
    char dir[256], why[400];
    px_config c;

    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 2, tg_some, dir, "default", NULL);
    PX_ASSERT_OK(tg_run_small(&c));
    tg_expect_transport(dir, "depgen", "mapped");
    tg_expect_transport(dir, "swimlane", "mapped");
    tg_expect_transport(dir, "argsdump", "mapped");
    assert_string_equal(tg_refusal(dir, "depgen", 0, why, sizeof(why)), "");
    tg_rmdir(dir);
}

/* host64k with huge pages hidden: shadow, after mapped and mapped_huge refused. */
static void test_host64k_no_huge_shadow(void **state)
{
    char dir[256], why[400];
    px_config c;

    need_4k_host();
    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 2, tg_some, dir, "host64k", NULL);
    c.hugepages = 0;
    PX_ASSERT_OK(tg_run_small(&c));
    tg_expect_transport(dir, "depgen", "shadow");
    tg_expect_transport(dir, "argsdump", "shadow");
    assert_string_equal(tg_refusal(dir, "depgen", 0, why, sizeof(why)),
                        "mapped: device page 65536 != host page 4096");
    tg_refusal(dir, "depgen", 1, why, sizeof(why));
    assert_non_null(strstr(why, "mapped_huge: no huge pages reserved"));
    assert_string_equal(tg_refusal(dir, "depgen", 2, why, sizeof(why)), "");
    tg_rmdir(dir);
}

/* Profile minimal: no host mapping of any kind, so shadow. */
static void test_minimal_shadow(void **state)
{
    char dir[256], why[400];
    px_config c;

    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 2, tg_some, dir, "minimal", NULL);
    PX_ASSERT_OK(tg_run_small(&c));
    tg_expect_transport(dir, "swimlane", "shadow");
    assert_string_equal(tg_refusal(dir, "swimlane", 0, why, sizeof(why)),
                        "mapped: bar_mem=0 in profile minimal");
    tg_refusal(dir, "swimlane", 1, why, sizeof(why));
    assert_non_null(strstr(why, "mapped_huge: huge-page host mapping not effective: "
                                "bar_huge_mem=0"));
    tg_rmdir(dir);
}

/* An allow-list of shadow on default: the two mapping transports are refused by the list. */
static void test_allow_list_shadow(void **state)
{
    char dir[256], why[400];
    px_config c;

    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 1, PX_DFX_DEPGEN, dir, "default", "shadow");
    PX_ASSERT_OK(tg_run_small(&c));
    tg_expect_transport(dir, "depgen", "shadow");
    tg_refusal(dir, "depgen", 0, why, sizeof(why));
    assert_non_null(strstr(why, "mapped: not in the allow-list \"shadow\""));
    tg_refusal(dir, "depgen", 1, why, sizeof(why));
    assert_non_null(strstr(why, "mapped_huge: not in the allow-list \"shadow\""));
    tg_rmdir(dir);
}

/*
 * An allow-list that leaves nothing (host64k, huge pages hidden, "mapped,mapped_huge"):
 * the worker is not created, and the error names every fact a user needs.
 */
static void test_allow_list_nothing_left(void **state)
{
    static const char *const words[] = {
        "no DFX transport is left", "\"mapped,mapped_huge\"", "host page 4096",
        "device page 65536", "profile host64k", "bar_mem=1", "bar_huge_mem=1",
        "huge pages reserved 0", "free 0", "PLEXUS_DFX=0", "--dfx 0"};
    char dir[256];
    px_worker *w = NULL;
    px_config c;

    need_4k_host();
    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 1, PX_DFX_DEPGEN, dir, "host64k", "mapped,mapped_huge");
    c.hugepages = 0;
    assert_int_equal(px_worker_create(&c, &w), PX_ENOTSUP);
    assert_null(w);
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strstr(px_last_error(), words[i]) == NULL)
            fail_msg("error lacks \"%s\": %s", words[i], px_last_error());
    tg_rmdir(dir);
}

/*
 * Huge pages are shared between collectors: with 2 free huge pages and one page per
 * collector, swimlane and hosttrace (first in table order) get mapped_huge, the rest
 * shadow with the count in the reason. Facts are set by hand: selection only reads them.
 */
static void test_plan_huge_pages_accounted(void **state)
{
    px_dfx_choice ch[PX_DFX_NCOLLECTORS];
    px_config c;
    px_caps caps;

    px_test_config(&c, 2);
    snprintf(c.device_profile, sizeof(c.device_profile), "host64k");
    c.dfx_buffer_records = 64; /* 2 buffers of 2 KiB each per collector: one huge page */
    PX_ASSERT_OK(px_caps_probe_with(&c, &caps));
    caps.f[PX_FACT_HOST_PAGE_SIZE].value = 4096;
    caps.f[PX_FACT_DEVICE_PAGE_SIZE].value = 65536;
    caps.f[PX_FACT_HOST_MAP_EFFECTIVE].value = 0;
    caps.f[PX_FACT_HOST_MAP_HUGE_EFFECTIVE].value = 1;
    caps.f[PX_FACT_HUGE_PAGE_SIZE].value = 2 << 20;
    caps.f[PX_FACT_HUGE_PAGES_RESERVED].value = 2;
    caps.f[PX_FACT_HUGE_PAGES_FREE].value = 2;
    PX_ASSERT_OK(px_dfx_plan(&caps, &c, PX_DFX_ALL, 3, ch));
    assert_int_equal(ch[0].transport, PX_DFXT_MAPPED_HUGE);
    assert_int_equal(ch[1].transport, PX_DFXT_MAPPED_HUGE);
    for (int i = 2; i < PX_DFX_NCOLLECTORS; i++) {
        assert_int_equal(ch[i].transport, PX_DFXT_SHADOW);
        assert_int_equal(ch[i].nrefused, 2);
        assert_string_equal(ch[i].refused[1].reason, "2 huge pages free (2 reserved, 2 taken "
                                                     "by other collectors), 1 needed");
    }
}

/* Reads a whole file into a NUL-terminated buffer (free it); *len gets its size. */
static char *slurp(const char *dir, const char *name, long *len)
{
    char path[400];
    FILE *f;
    long n;
    char *s;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("%s was not written", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    *len = n;
    return s;
}

/* The task slices of trace.json as "kernel/task" words, sorted, plus the flow count. */
static char *trace_tasks(const char *dir, size_t *flows)
{
    char path[400], *out = calloc(1, 4096);
    dfxc_json *j;
    const dfxc_json *ev;

    snprintf(path, sizeof(path), "%s/trace.json", dir);
    PX_ASSERT_OK(dfxc_json_load(path, &j));
    ev = dfxc_json_get(j, "traceEvents");
    assert_non_null(ev);
    *flows = 0;
    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *x = &ev->kids[i];
        char word[128];

        *flows += strcmp(dfxc_json_str(x, "ph", ""), "s") == 0;
        if (strcmp(dfxc_json_str(x, "cat", ""), "task") != 0)
            continue;
        snprintf(word, sizeof(word), "%s/%.0f ", dfxc_json_str(x, "name", "?"),
                 dfxc_json_num(dfxc_json_get(x, "args"), "task", -1));
        strcat(out, word);
    }
    dfxc_json_free(j);
    return out;
}

/* Runs the small graph with every collector but pmu through `t` into dir. */
static void run_through(const char *t, char *dir, size_t n)
{
    px_config c;

    tg_tmpdir(dir, n);
    tg_config(&c, 2, PX_DFX_ALL & ~PX_DFX_PMU, dir, "default", t);
    c.dfx_args_level = 3;
    PX_ASSERT_OK(tg_run_small(&c));
    tg_expect_transport(dir, "depgen", t);
}

/*
 * deps.json, deps.dot, args/args_dump.json and args/args.bin are byte-identical, and
 * trace.json has the same task slices (3, the hand-worked count) and flows (3 edges),
 * whether the records came through mapped or shadow.
 */
static void test_outputs_identical_across_transports(void **state)
{
    static const char *const files[] = {"deps.json", "deps.dot", "args/args_dump.json",
                                        "args/args.bin"};
    char dm[256], ds[256];
    size_t fm, fs;
    char *tm, *ts;

    run_through("mapped", dm, sizeof(dm));
    run_through("shadow", ds, sizeof(ds));
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        long na, nb;
        char *a = slurp(dm, files[i], &na), *b = slurp(ds, files[i], &nb);

        if (na != nb || na == 0 || memcmp(a, b, (size_t)na) != 0)
            fail_msg("%s differs between mapped and shadow (or is empty)", files[i]);
        free(a);
        free(b);
    }
    tm = trace_tasks(dm, &fm);
    ts = trace_tasks(ds, &fs);
    assert_string_equal(tm, ts);
    assert_int_equal(fm, 3);
    assert_int_equal(fs, 3);
    assert_non_null(strstr(tm, "tg.scale/1 "));
    free(tm);
    free(ts);
    tg_rmdir(dm);
    tg_rmdir(ds);
}

/*
 * The DFX knobs: collector lists become bits (depgen is bit 2, pmu bit 4: 0x14), `all` is
 * 0x3f, `0` is off; a wrong word, an empty word or a wrong transport name is refused with
 * the expected form; a validated config refuses a buffer of fewer than 8 records.
 */
static void test_knobs(void **state)
{
    px_config c;

    px_test_config(&c, 1);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DFX", "depgen,pmu"));
    assert_int_equal(c.dfx, 0x14);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DFX", "all"));
    assert_int_equal(c.dfx, 0x3f);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DFX", "0"));
    assert_int_equal(c.dfx, 0);
    assert_int_equal(px_config_set(&c, "PLEXUS_DFX", "depgen,bogus"), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "swimlane, hosttrace, depgen"));
    assert_int_equal(px_config_set(&c, "PLEXUS_DFX", "depgen,"), PX_EINVAL);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DFX_TRANSPORT", "mapped,mapped_huge"));
    assert_string_equal(c.dfx_transport, "mapped,mapped_huge");
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_DFX_TRANSPORT", "auto"));
    assert_string_equal(c.dfx_transport, "");
    assert_int_equal(px_config_set(&c, "PLEXUS_DFX_TRANSPORT", "mapped,bar"), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "mapped, mapped_huge, shadow"));
    assert_int_equal(px_config_set(&c, "PLEXUS_DFX_ARGS_LEVEL", "4"), PX_EINVAL);
    c.dfx = PX_DFX_DEPGEN;
    c.dfx_buffer_records = 4;
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "PLEXUS_DFX_BUFFER_RECORDS"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knobs),
        cmocka_unit_test(test_default_mapped),
        cmocka_unit_test(test_host64k_no_huge_shadow),
        cmocka_unit_test(test_minimal_shadow),
        cmocka_unit_test(test_allow_list_shadow),
        cmocka_unit_test(test_allow_list_nothing_left),
        cmocka_unit_test(test_plan_huge_pages_accounted),
        cmocka_unit_test(test_outputs_identical_across_transports),
    };

    if (!PX_DFX)
        px_test_skip("DFX is compiled out of this build (CMake option PX_DFX=OFF)");
    setenv("PLEXUS_DFX_STRICT", "1", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
