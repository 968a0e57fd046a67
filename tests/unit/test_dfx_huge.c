/*
 * test_dfx_huge.c - the mapped_huge row of the DFX transport matrix, with huge pages
 * reserved by the ctest fixture `hugepages` (tests/system/dfx.cmake).
 *
 * Worked out from the profile table: `host64k` has 64 KiB device pages, so on a 4 KiB host
 * ordinary mapping is refused ("device page 65536 != host page 4096") and, with free huge
 * pages, every collector's buffers are carved from a huge-page block: mapped_huge. Each
 * collector of a 2-core run asks for 10 / 5 = 2 buffers of 64 KiB + 128 bytes, one 2 MiB
 * page, so 5 collectors need 5 free pages. Without them (the fixture could not reserve) the
 * test exits 77 and says why. Outputs through mapped_huge equal those through shadow.
 */
#include "dfx_testgraph.h"

#include <unistd.h>

#define NEED_PAGES 5

static const uint32_t tg_five = PX_DFX_ALL & ~PX_DFX_PMU;

/* Skips unless host64k here can use mapped_huge with NEED_PAGES free pages. */
static void need_huge_pages(void)
{
    px_config c;
    px_caps caps;

    px_test_config(&c, 2);
    snprintf(c.device_profile, sizeof(c.device_profile), "host64k");
    PX_ASSERT_OK(px_caps_probe_with(&c, &caps));
    if (px_caps_get(&caps, PX_FACT_HOST_PAGE_SIZE) != 4096)
        px_test_skip("host page size is %lld, the expectations assume 4096",
                     (long long)px_caps_get(&caps, PX_FACT_HOST_PAGE_SIZE));
    if (!px_caps_get(&caps, PX_FACT_HOST_MAP_HUGE_EFFECTIVE))
        px_test_skip("huge-page host mapping not effective here: %s",
                     caps.f[PX_FACT_HOST_MAP_HUGE_EFFECTIVE].note);
    if (px_caps_get(&caps, PX_FACT_HUGE_PAGE_SIZE) != 2 << 20 ||
        px_caps_get(&caps, PX_FACT_HUGE_PAGES_FREE) < NEED_PAGES)
        px_test_skip("%lld huge pages of %lld bytes free (%lld reserved), %d of 2 MiB needed; "
                     "the fixture dfx.hugepages_reserve could not reserve them (root is "
                     "needed to write /proc/sys/vm/nr_hugepages)",
                     (long long)px_caps_get(&caps, PX_FACT_HUGE_PAGES_FREE),
                     (long long)px_caps_get(&caps, PX_FACT_HUGE_PAGE_SIZE),
                     (long long)px_caps_get(&caps, PX_FACT_HUGE_PAGES_RESERVED), NEED_PAGES);
}

/* host64k with free huge pages: every collector via mapped_huge, mapped refused. */
static void test_host64k_mapped_huge(void **state)
{
    static const char *const colls[] = {"swimlane", "hosttrace", "depgen", "argsdump",
                                        "scopestats"};
    char dir[256], why[400];
    px_config c;

    tg_tmpdir(dir, sizeof(dir));
    tg_config(&c, 2, tg_five, dir, "host64k", NULL);
    PX_ASSERT_OK(tg_run_small(&c));
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
        tg_expect_transport(dir, colls[i], "mapped_huge");
        assert_string_equal(tg_refusal(dir, colls[i], 0, why, sizeof(why)),
                            "mapped: device page 65536 != host page 4096");
        assert_string_equal(tg_refusal(dir, colls[i], 1, why, sizeof(why)), "");
    }
    tg_rmdir(dir);
}

/* Returns 1 when dir1/name and dir2/name hold the same bytes. */
static int same(const char *d1, const char *d2, const char *name)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "cmp -s '%s/%s' '%s/%s'", d1, name, d2, name);
    return system(cmd) == 0;
}

/* deps.json, deps.dot and the args files are byte-identical through mapped_huge and shadow. */
static void test_identical_huge_and_shadow(void **state)
{
    static const char *const files[] = {"deps.json", "deps.dot", "args/args_dump.json",
                                        "args/args.bin"};
    char dh[256], ds[256];
    px_config c;

    tg_tmpdir(dh, sizeof(dh));
    tg_config(&c, 2, tg_five, dh, "default", "mapped_huge");
    c.dfx_args_level = 3;
    PX_ASSERT_OK(tg_run_small(&c));
    tg_expect_transport(dh, "depgen", "mapped_huge");
    tg_tmpdir(ds, sizeof(ds));
    tg_config(&c, 2, tg_five, ds, "default", "shadow");
    c.dfx_args_level = 3;
    PX_ASSERT_OK(tg_run_small(&c));
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (!same(dh, ds, files[i]))
            fail_msg("%s differs between mapped_huge and shadow", files[i]);
    tg_rmdir(dh);
    tg_rmdir(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host64k_mapped_huge),
        cmocka_unit_test(test_identical_huge_and_shadow),
    };

    if (!PX_DFX)
        px_test_skip("DFX is compiled out of this build (CMake option PX_DFX=OFF)");
    setenv("PLEXUS_DFX_STRICT", "1", 1);
    need_huge_pages();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
