/*
 * test_caps.c - the capability probe (src/caps): host facts against what the test reads from
 * the OS itself, every device profile's raw and effective flags worked out by hand for this
 * host's page size, unknown profiles, the PLEXUS_HUGEPAGES=0 override, MPI facts, and the
 * JSON and text writers (the JSON is parsed by python3 when it is installed).
 */
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "caps/caps_internal.h"

/* ---- what the test reads from the OS itself, without the probe ---- */

/* Returns the number on the /proc/meminfo line starting with key, or -1. */
static long long meminfo_value(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long v = -1;
    size_t n = strlen(key);

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = atoll(line + n + 1);
    fclose(f);
    return v;
}

static int memfd_works(unsigned int flags)
{
    int fd = memfd_create("test-caps", flags);

    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static void probe_profile(const char *name, int hugepages, px_caps *caps)
{
    px_config c;

    px_test_config(&c, 1);
    snprintf(c.device_profile, sizeof(c.device_profile), "%s", name);
    c.hugepages = hugepages;
    PX_ASSERT_OK(px_caps_probe_with(&c, caps));
}

static void unset_mpi_env(void)
{
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
    unsetenv("PMIX_RANK");
}

/* ---- names ---- */

/* Fact and source names come from the one list; out-of-range ids give "?". */
static void test_names(void **state)
{
    const char *const *p = px_device_profiles();

    (void)state;
    assert_string_equal(px_fact_name(PX_FACT_HOST_PAGE_SIZE), "host_page_size");
    assert_string_equal(px_fact_name(PX_FACT_TSC_INVARIANT), "tsc_invariant");
    assert_string_equal(px_fact_name(PX_FACT_HOST_MAP_HUGE_EFFECTIVE),
                        "host_map_huge_effective");
    assert_string_equal(px_fact_name(PX_FACT_COUNT), "?");
    assert_string_equal(px_fact_name((px_fact_id)-1), "?");
    assert_string_equal(px_fact_source_name(PX_SRC_OS), "os");
    assert_string_equal(px_fact_source_name(PX_SRC_PROFILE), "profile");
    assert_string_equal(px_fact_source_name(PX_SRC_DERIVED), "derived");
    assert_string_equal(px_fact_source_name(PX_SRC_MPI), "mpi");
    assert_string_equal(px_fact_source_name(PX_SRC_ENV), "env");
    assert_string_equal(px_fact_source_name((px_fact_source)99), "?");
    assert_string_equal(p[0], "default");
    assert_string_equal(p[1], "a2a3-pcie");
    assert_string_equal(p[2], "host64k");
    assert_string_equal(p[3], "minimal");
    assert_string_equal(p[4], "pairs");
    assert_null(p[5]);
}

/* ---- host facts ---- */

/* Host facts match what the test reads from sysconf, /proc and gethostname; all from os. */
static void test_host_facts(void **state)
{
    px_caps caps;
    char host[256], boot[64] = "";
    FILE *f;

    (void)state;
    probe_profile("default", 1, &caps);
    assert_int_equal(px_caps_get(&caps, PX_FACT_HOST_PAGE_SIZE), sysconf(_SC_PAGESIZE));
    assert_int_equal(caps.f[PX_FACT_HOST_PAGE_SIZE].source, PX_SRC_OS);
    assert_int_equal(px_caps_get(&caps, PX_FACT_ONLINE_CPUS), sysconf(_SC_NPROCESSORS_ONLN));
    assert_int_equal(px_caps_get(&caps, PX_FACT_MEMFD), memfd_works(MFD_CLOEXEC));
    assert_int_equal(px_caps_get(&caps, PX_FACT_MEMFD_HUGETLB),
                     memfd_works(MFD_CLOEXEC | MFD_HUGETLB));
    if (meminfo_value("Hugepagesize") > 0)
        assert_int_equal(px_caps_get(&caps, PX_FACT_HUGE_PAGE_SIZE),
                         meminfo_value("Hugepagesize") * 1024);
    if (meminfo_value("HugePages_Total") >= 0)
        assert_int_equal(px_caps_get(&caps, PX_FACT_HUGE_PAGES_RESERVED),
                         meminfo_value("HugePages_Total"));
    assert_int_equal(caps.f[PX_FACT_HUGE_PAGES_RESERVED].source, PX_SRC_OS);
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    host[PX_FACT_TEXT_MAX - 1] = '\0';
    assert_string_equal(caps.f[PX_FACT_HOSTNAME].text, host);
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        assert_non_null(fgets(boot, sizeof(boot), f));
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
        assert_int_equal(strlen(caps.f[PX_FACT_BOOT_ID].text), 36);
        assert_string_equal(caps.f[PX_FACT_BOOT_ID].text, boot);
    }
#if !defined(__x86_64__) && !defined(__i386__)
    assert_int_equal(px_caps_get(&caps, PX_FACT_TSC_INVARIANT), 0);
#endif
}

/* Every fact has a note, a known source, and B facts hold 0 or 1. */
static void test_every_fact_explained(void **state)
{
    static const px_fact_id bools[] = {
        PX_FACT_MEMFD, PX_FACT_MEMFD_HUGETLB, PX_FACT_PROCESS_VM_READV, PX_FACT_PERF_HW,
        PX_FACT_PERF_SW, PX_FACT_TSC_INVARIANT, PX_FACT_MPI_LIBRARY, PX_FACT_MPI_LAUNCHED,
        PX_FACT_MPI_INITIALIZED, PX_FACT_PEER_MAP, PX_FACT_BAR_MEM, PX_FACT_BAR_HUGE_MEM,
        PX_FACT_PEER_MAP_EFFECTIVE, PX_FACT_HOST_MAP_EFFECTIVE,
        PX_FACT_HOST_MAP_HUGE_EFFECTIVE};
    px_caps caps;

    (void)state;
    probe_profile("default", 1, &caps);
    for (int i = 0; i < PX_FACT_COUNT; i++) {
        if (caps.f[i].note[0] == '\0')
            print_error("fact %s has no note\n", px_fact_name((px_fact_id)i));
        assert_true(caps.f[i].note[0] != '\0');
        assert_true(caps.f[i].source <= PX_SRC_ENV);
    }
    for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
        assert_true(caps.f[bools[i]].value == 0 || caps.f[bools[i]].value == 1);
}

/* ---- device profiles ---- */

typedef struct expect {
    const char *name;
    int64_t dev_ps;
    int peer, bar, bar_huge;       /* raw flags, from the profile table in DESIGN §3.2 */
    int peer_eff, host_eff, huge_eff; /* worked out below from the derivation rules */
} expect;

static void check_profile(const expect *e)
{
    px_caps caps;

    probe_profile(e->name, 1, &caps);
    print_message("profile %s\n", e->name);
    assert_string_equal(caps.f[PX_FACT_DEVICE_PROFILE].text, e->name);
    assert_int_equal(px_caps_get(&caps, PX_FACT_DEVICE_PAGE_SIZE), e->dev_ps);
    assert_int_equal(px_caps_get(&caps, PX_FACT_PEER_MAP), e->peer);
    assert_int_equal(px_caps_get(&caps, PX_FACT_BAR_MEM), e->bar);
    assert_int_equal(px_caps_get(&caps, PX_FACT_BAR_HUGE_MEM), e->bar_huge);
    assert_int_equal(px_caps_get(&caps, PX_FACT_PEER_MAP_EFFECTIVE), e->peer_eff);
    assert_int_equal(px_caps_get(&caps, PX_FACT_HOST_MAP_EFFECTIVE), e->host_eff);
    assert_int_equal(px_caps_get(&caps, PX_FACT_HOST_MAP_HUGE_EFFECTIVE), e->huge_eff);
    assert_int_equal(caps.f[PX_FACT_DEVICE_PAGE_SIZE].source, PX_SRC_PROFILE);
    assert_int_equal(caps.f[PX_FACT_PEER_MAP].source, PX_SRC_PROFILE);
    assert_int_equal(caps.f[PX_FACT_BAR_MEM].source, PX_SRC_PROFILE);
    assert_int_equal(caps.f[PX_FACT_BAR_HUGE_MEM].source, PX_SRC_PROFILE);
    assert_int_equal(caps.f[PX_FACT_PEER_MAP_EFFECTIVE].source, PX_SRC_DERIVED);
    assert_int_equal(caps.f[PX_FACT_HOST_MAP_EFFECTIVE].source, PX_SRC_DERIVED);
    assert_int_equal(caps.f[PX_FACT_HOST_MAP_HUGE_EFFECTIVE].source, PX_SRC_DERIVED);
}

/*
 * Each profile's raw flags and effective flags. By hand, with ps the host page (4096 here),
 * hs the huge page (2 MiB here), h = memfd with MFD_HUGETLB works, m = memfd works:
 *   default:   dev page ps,    peer 1 bar 1 huge 1 -> peer m, host 1,          huge h && hs%ps==0
 *   a2a3-pcie: dev page ps,    peer 0 bar 1 huge 1 -> peer 0, host 1,          huge as default
 *   host64k:   dev page 65536, peer 1 bar 1 huge 1 -> peer m, host ps==65536,  huge h && hs%64K==0
 *   minimal:   dev page ps,    peer 0 bar 0 huge 0 -> peer 0, host 0,          huge 0
 * On a 4 KiB host with 2 MiB huge pages: host64k refuses ordinary host mapping, allows huge.
 */
static void test_profiles(void **state)
{
    int64_t ps = sysconf(_SC_PAGESIZE);
    int64_t hs = meminfo_value("Hugepagesize") * 1024;
    int h = memfd_works(MFD_CLOEXEC | MFD_HUGETLB) && hs > 0;
    int m = memfd_works(MFD_CLOEXEC);
    const expect e[] = {
        {"default", ps, 1, 1, 1, m, 1, h && hs % ps == 0},
        {"a2a3-pcie", ps, 0, 1, 1, 0, 1, h && hs % ps == 0},
        {"host64k", 65536, 1, 1, 1, m, ps == 65536, h && hs % 65536 == 0},
        {"minimal", ps, 0, 0, 0, 0, 0, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
        check_profile(&e[i]);
}

/* The notes of derived flags say why, with the values (host64k on a 4 KiB host). */
static void test_derived_notes(void **state)
{
    px_caps caps;
    char want[128];

    (void)state;
    if (sysconf(_SC_PAGESIZE) == 65536) {
        print_message("skipped: host pages are 64 KiB, host64k maps like default here\n");
        skip();
    }
    probe_profile("host64k", 1, &caps);
    snprintf(want, sizeof(want), "bar_mem=1 but device_page_size 65536 != host_page_size %ld",
             sysconf(_SC_PAGESIZE));
    assert_string_equal(caps.f[PX_FACT_HOST_MAP_EFFECTIVE].note, want);
    probe_profile("minimal", 1, &caps);
    assert_string_equal(caps.f[PX_FACT_HOST_MAP_EFFECTIVE].note, "bar_mem=0");
    assert_string_equal(caps.f[PX_FACT_HOST_MAP_HUGE_EFFECTIVE].note, "bar_huge_mem=0");
    assert_string_equal(caps.f[PX_FACT_PEER_MAP_EFFECTIVE].note, "peer_map=0");
}

/* An unknown profile is PX_EINVAL naming the four valid profiles; caps stay untouched. */
static void test_unknown_profile(void **state)
{
    px_config c;
    px_caps caps, before;
    const char *msg;

    (void)state;
    px_test_config(&c, 1);
    snprintf(c.device_profile, sizeof(c.device_profile), "bogus");
    memset(&caps, 0x5a, sizeof(caps));
    before = caps;
    assert_int_equal(px_caps_probe_with(&c, &caps), PX_EINVAL);
    msg = px_last_error();
    assert_non_null(strstr(msg, "bogus"));
    assert_non_null(strstr(msg, "default"));
    assert_non_null(strstr(msg, "a2a3-pcie"));
    assert_non_null(strstr(msg, "host64k"));
    assert_non_null(strstr(msg, "minimal"));
    assert_memory_equal(&caps, &before, sizeof(caps));
    assert_int_equal(px_caps_probe_with(NULL, &caps), PX_EINVAL);
    assert_int_equal(px_caps_probe_with(&c, NULL), PX_EINVAL);
}

/* px_caps_probe follows PLEXUS_DEVICE_PROFILE, and a bad name there is PX_EINVAL. */
static void test_probe_env_profile(void **state)
{
    px_caps caps;

    (void)state;
    setenv("PLEXUS_DEVICE_PROFILE", "minimal", 1);
    PX_ASSERT_OK(px_caps_probe(&caps));
    assert_string_equal(caps.f[PX_FACT_DEVICE_PROFILE].text, "minimal");
    assert_int_equal(px_caps_get(&caps, PX_FACT_BAR_MEM), 0);
    setenv("PLEXUS_DEVICE_PROFILE", "nosuch", 1);
    assert_int_equal(px_caps_probe(&caps), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "nosuch"));
    unsetenv("PLEXUS_DEVICE_PROFILE");
    assert_int_equal(px_caps_probe(NULL), PX_EINVAL);
}

/* PLEXUS_HUGEPAGES=0 hides reserved and free pages (source env); 1 leaves the OS values. */
static void test_hugepages_override(void **state)
{
    long long total = meminfo_value("HugePages_Total");
    px_caps caps;
    char want[96];

    (void)state;
    probe_profile("default", 0, &caps);
    assert_int_equal(px_caps_get(&caps, PX_FACT_HUGE_PAGES_RESERVED), 0);
    assert_int_equal(px_caps_get(&caps, PX_FACT_HUGE_PAGES_FREE), 0);
    assert_int_equal(caps.f[PX_FACT_HUGE_PAGES_RESERVED].source, PX_SRC_ENV);
    assert_int_equal(caps.f[PX_FACT_HUGE_PAGES_FREE].source, PX_SRC_ENV);
    if (total >= 0) {
        snprintf(want, sizeof(want), "hidden by PLEXUS_HUGEPAGES=0 (%lld reserved)", total);
        assert_string_equal(caps.f[PX_FACT_HUGE_PAGES_RESERVED].note, want);
    }

    setenv("PLEXUS_HUGEPAGES", "0", 1);
    PX_ASSERT_OK(px_caps_probe(&caps));
    unsetenv("PLEXUS_HUGEPAGES");
    assert_int_equal(px_caps_get(&caps, PX_FACT_HUGE_PAGES_RESERVED), 0);
    assert_int_equal(caps.f[PX_FACT_HUGE_PAGES_RESERVED].source, PX_SRC_ENV);

    probe_profile("default", 1, &caps);
    assert_int_equal(caps.f[PX_FACT_HUGE_PAGES_RESERVED].source, PX_SRC_OS);
    assert_int_equal(caps.f[PX_FACT_HUGE_PAGES_FREE].source, PX_SRC_OS);
}

/* ---- MPI ---- */

/* mpi_launched follows the launcher's variables; nothing loads libmpi, so not initialised. */
static void test_mpi_facts(void **state)
{
    void *h = dlopen("libmpi.so.40", RTLD_LAZY | RTLD_LOCAL);
    int have_lib;
    px_caps caps;

    (void)state;
    if (h == NULL)
        h = dlopen("libmpi.so.12", RTLD_LAZY | RTLD_LOCAL);
    have_lib = h != NULL;
    if (h != NULL)
        dlclose(h);

    unset_mpi_env();
    probe_profile("default", 1, &caps);
    assert_int_equal(px_caps_get(&caps, PX_FACT_MPI_LIBRARY), have_lib);
    assert_int_equal(px_caps_get(&caps, PX_FACT_MPI_LAUNCHED), 0);
    assert_int_equal(px_caps_get(&caps, PX_FACT_MPI_INITIALIZED), 0);
    assert_string_equal(caps.f[PX_FACT_MPI_INITIALIZED].note,
                        "libmpi not loaded in this process");
    assert_int_equal(caps.f[PX_FACT_MPI_LAUNCHED].source, PX_SRC_MPI);

    setenv("PMI_SIZE", "2", 1);
    probe_profile("default", 1, &caps);
    unset_mpi_env();
    assert_int_equal(px_caps_get(&caps, PX_FACT_MPI_LAUNCHED), 1);
    assert_non_null(strstr(caps.f[PX_FACT_MPI_LAUNCHED].note, "PMI_SIZE"));
}

/* ---- output ---- */

/* Returns everything written to the (tmpfile) stream f so far, as a new string. */
static char *slurp(FILE *f)
{
    long n;
    char *s;

    fflush(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    s = calloc(1, (size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

/* The escaper quotes, escapes quote, backslash and control characters, keeps UTF-8. */
static void test_json_string(void **state)
{
    FILE *f = tmpfile();
    char *s;

    (void)state;
    assert_non_null(f);
    PX_ASSERT_OK(px_caps_json_string(f, "a\"b\\c\nd\te\x01\xc3\xa9"));
    s = slurp(f);
    assert_string_equal(s, "\"a\\\"b\\\\c\\nd\\te\\u0001\xc3\xa9\"");
    free(s);
    fclose(f);
}

static int have_python3(void)
{
    return system("python3 -c pass >/dev/null 2>&1") == 0;
}

/* python3 loads the document, finds version 1 and every fact with the right JSON type. */
static void check_json_with_python(const char *path)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd),
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); f=d[\"facts\"]; "
             "assert d[\"version\"] == 1; "
             "assert len(f) == %d, len(f); "
             "assert all(set(v) == {\"value\",\"source\",\"note\"} for v in f.values()); "
             "assert f[\"host_page_size\"][\"value\"] == %ld; "
             "assert f[\"peer_map\"][\"value\"] is True; "
             "assert type(f[\"tsc_invariant\"][\"value\"]) is bool; "
             "assert type(f[\"huge_pages_reserved\"][\"value\"]) is int; "
             "assert f[\"device_profile\"][\"value\"] == \"default\"; "
             "assert f[\"bar_mem\"][\"source\"] == \"profile\"' %s",
             PX_FACT_COUNT, sysconf(_SC_PAGESIZE), path);
    assert_int_equal(system(cmd), 0);
}

/* px_caps_write_json writes version 1 and every named key; python3 parses it if present. */
static void test_write_json(void **state)
{
    static const char *const keys[] = {"host_page_size", "device_page_size",
                                       "huge_pages_reserved", "peer_map", "bar_mem",
                                       "bar_huge_mem", "tsc_invariant"};
    char path[] = "/tmp/plexus-test-caps-XXXXXX";
    char want[64];
    px_caps caps;
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w+");
    char *s;

    (void)state;
    assert_non_null(f);
    probe_profile("default", 1, &caps);
    PX_ASSERT_OK(px_caps_write_json(&caps, f));
    s = slurp(f);
    assert_non_null(strstr(s, "\"version\": 1"));
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        snprintf(want, sizeof(want), "\"%s\": {\"value\": ", keys[i]);
        assert_non_null(strstr(s, want));
    }
    assert_non_null(strstr(s, "\"peer_map\": {\"value\": true, \"source\": \"profile\""));
    if (have_python3())
        check_json_with_python(path);
    else
        print_message("python3 not found: JSON checked by string search only\n");
    free(s);
    fclose(f);
    unlink(path);
    assert_int_equal(px_caps_write_json(NULL, stdout), PX_EINVAL);
}

/* The facts object alone starts with "{", indents facts by indent+2 and ends "<indent>}". */
static void test_write_json_facts(void **state)
{
    FILE *f = tmpfile();
    px_caps caps;
    char *s;
    size_t n;

    (void)state;
    probe_profile("default", 1, &caps);
    PX_ASSERT_OK(px_caps_write_json_facts(&caps, f, 4));
    s = slurp(f);
    n = strlen(s);
    assert_true(strncmp(s, "{\n      \"host_page_size\": {", 27) == 0);
    assert_true(n > 6 && strcmp(s + n - 6, "\n    }") == 0);
    free(s);
    fclose(f);
}

/* Text output: a header and one row per fact, each row naming the fact and its source. */
static void test_print(void **state)
{
    FILE *f = tmpfile();
    px_caps caps;
    char *s, *line, *save = NULL;
    int rows = 0;
    char want[64];

    (void)state;
    probe_profile("host64k", 1, &caps);
    px_caps_print(&caps, f);
    s = slurp(f);
    assert_true(strncmp(s, "fact ", 5) == 0);
    for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        rows++;
    assert_int_equal(rows, 1 + PX_FACT_COUNT);
    free(s);
    s = slurp(f);
    snprintf(want, sizeof(want), "\nhost_page_size ");
    assert_non_null(strstr(s, want));
    assert_non_null(strstr(s, "\ndevice_page_size "));
    assert_non_null(strstr(s, " 65536 "));
    assert_non_null(strstr(s, " host64k "));
    free(s);
    fclose(f);
}

/* px_caps_get returns 0 for an out-of-range id or a NULL table. */
static void test_get_invalid(void **state)
{
    px_caps caps;

    (void)state;
    probe_profile("default", 1, &caps);
    assert_int_equal(px_caps_get(&caps, PX_FACT_COUNT), 0);
    assert_int_equal(px_caps_get(NULL, PX_FACT_HOST_PAGE_SIZE), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_host_facts),
        cmocka_unit_test(test_every_fact_explained),
        cmocka_unit_test(test_profiles),
        cmocka_unit_test(test_derived_notes),
        cmocka_unit_test(test_unknown_profile),
        cmocka_unit_test(test_probe_env_profile),
        cmocka_unit_test(test_hugepages_override),
        cmocka_unit_test(test_mpi_facts),
        cmocka_unit_test(test_json_string),
        cmocka_unit_test(test_write_json),
        cmocka_unit_test(test_write_json_facts),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_get_invalid),
    };

    unsetenv("PLEXUS_DEVICE_PROFILE");
    unsetenv("PLEXUS_HUGEPAGES");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
