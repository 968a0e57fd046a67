/*
 * test_platform.c - the sim platform (src/platform/sim): the device arena and its copies,
 * host mapping allowed or refused by the device profile's effective flags, and huge-page
 * blocks (refused by the profile, refused for want of free huge pages, or, where the host
 * has free huge pages, allocated and seen from both sides).
 */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/platform.h"

#define ARENA (1u << 20)

static px_chip *open_chip(const char *profile, int hugepages, int index, uint64_t bytes)
{
    px_config c;
    px_caps caps;
    px_chip *chip = NULL;

    px_test_config(&c, 1);
    snprintf(c.device_profile, sizeof(c.device_profile), "%s", profile);
    c.hugepages = hugepages;
    PX_ASSERT_OK(px_caps_probe_with(&c, &caps));
    PX_ASSERT_OK(px_plat_chip_open(&caps, index, bytes, &chip));
    assert_non_null(chip);
    return chip;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + seed);
}

static void assert_error_has(const char *what)
{
    if (strstr(px_last_error(), what) == NULL)
        print_error("message \"%s\" lacks \"%s\"\n", px_last_error(), what);
    assert_non_null(strstr(px_last_error(), what));
}

/* Bytes copied host -> device -> host come back equal, and kernels see them in the arena. */
static void test_round_trip(void **state)
{
    px_chip *c = open_chip("default", 1, 0, ARENA);
    unsigned char *base = px_plat_dev_base(c);
    unsigned char in[4096], out[4096];

    (void)state;
    fill(in, sizeof(in), 3);
    memset(out, 0, sizeof(out));
    PX_ASSERT_OK(px_plat_copy_h2d(c, base + 1000, in, sizeof(in)));
    assert_int_equal(base[1000 + 5], (unsigned char)(5 * 7 + 3));
    PX_ASSERT_OK(px_plat_copy_d2h(c, out, base + 1000, sizeof(out)));
    assert_memory_equal(in, out, sizeof(in));
    /* the last 16 bytes of the arena are still inside it */
    PX_ASSERT_OK(px_plat_copy_h2d(c, base + ARENA - 16, in, 16));
    PX_ASSERT_OK(px_plat_copy_d2h(c, out, base + ARENA - 16, 16));
    assert_memory_equal(in, out, 16);
    assert_int_equal(px_plat_dev_size(c), ARENA);
    px_plat_chip_close(c);
}

/* A copy that leaves the arena at either end, or is not device memory, is PX_EINVAL. */
static void test_copy_out_of_range(void **state)
{
    px_chip *c = open_chip("default", 1, 0, ARENA);
    unsigned char *base = px_plat_dev_base(c);
    unsigned char buf[64] = {0};

    (void)state;
    assert_int_equal(px_plat_copy_h2d(c, base + ARENA - 8, buf, 16), PX_EINVAL);
    assert_error_has("16 bytes");
    assert_error_has("outside device memory");
    assert_int_equal(px_plat_copy_d2h(c, buf, base + ARENA - 8, 16), PX_EINVAL);
    assert_int_equal(px_plat_copy_h2d(c, base - 1, buf, 1), PX_EINVAL);
    assert_int_equal(px_plat_copy_h2d(c, base, buf, (size_t)ARENA + 1), PX_EINVAL);
    assert_int_equal(px_plat_copy_d2h(c, buf, base + 8, SIZE_MAX), PX_EINVAL);
    assert_int_equal(px_plat_copy_h2d(c, buf + 32, buf, 16), PX_EINVAL);
    px_plat_chip_close(c);
}

/* On `default` a host mapping is a distinct address that sees device writes and back. */
static void test_host_map_default(void **state)
{
    px_chip *c = open_chip("default", 1, 0, ARENA);
    unsigned char *base = px_plat_dev_base(c);
    long ps = sysconf(_SC_PAGESIZE);
    unsigned char *host = NULL, *dev = base + 5000;

    (void)state;
    PX_ASSERT_OK(px_plat_host_map(c, dev, 100, (void **)&host));
    assert_non_null(host);
    assert_ptr_not_equal(host, dev);
    assert_int_equal((uintptr_t)host % (uintptr_t)ps, 5000 % ps);
    memset(dev, 0xab, 100);
    for (int i = 0; i < 100; i++)
        assert_int_equal(host[i], 0xab);
    host[50] = 0x11;
    assert_int_equal(dev[50], 0x11);
    PX_ASSERT_OK(px_plat_host_unmap(c, host, 100));

    /* a range that straddles a page boundary */
    dev = base + ps - 10;
    PX_ASSERT_OK(px_plat_host_map(c, dev, 20, (void **)&host));
    host[19] = 0x77;
    assert_int_equal(dev[19], 0x77);
    PX_ASSERT_OK(px_plat_host_unmap(c, host, 20));

    assert_int_equal(px_plat_host_map(c, base + ARENA - 10, 20, (void **)&host), PX_EINVAL);
    assert_int_equal(px_plat_host_unmap(c, base, 20), PX_EINVAL);
    px_plat_chip_close(c);
}

/* host64k (on a non-64K host) and minimal refuse host mapping, naming the profile's flags. */
static void test_host_map_refused(void **state)
{
    px_chip *c;
    void *host = (void *)0x1;
    char want[64];

    (void)state;
    if (sysconf(_SC_PAGESIZE) != 65536) {
        c = open_chip("host64k", 1, 0, ARENA);
        assert_int_equal(px_plat_host_map(c, px_plat_dev_base(c), 64, &host), PX_ENOTSUP);
        assert_ptr_equal(host, (void *)0x1);
        assert_error_has("chip 0: host mapping of device memory refused");
        assert_error_has("profile host64k");
        assert_error_has("bar_mem=1");
        snprintf(want, sizeof(want), "device_page_size 65536 != host_page_size %ld",
                 sysconf(_SC_PAGESIZE));
        assert_error_has(want);
        assert_error_has("shadow");
        px_plat_chip_close(c);
    }
    c = open_chip("minimal", 1, 2, ARENA);
    assert_int_equal(px_plat_host_map(c, px_plat_dev_base(c), 64, &host), PX_ENOTSUP);
    assert_error_has("chip 2");
    assert_error_has("profile minimal");
    assert_error_has("bar_mem=0");
    assert_ptr_equal(host, (void *)0x1);
    px_plat_chip_close(c);
}

/* minimal refuses huge-page blocks too (bar_huge_mem=0). */
static void test_huge_refused_minimal(void **state)
{
    px_chip *c = open_chip("minimal", 1, 0, ARENA);
    void *dev = NULL, *host = NULL;

    (void)state;
    assert_int_equal(px_plat_huge_alloc(c, 4096, &dev, &host), PX_ENOTSUP);
    assert_error_has("bar_huge_mem=0");
    assert_null(dev);
    assert_null(host);
    px_plat_chip_close(c);
}

/* With PLEXUS_HUGEPAGES=0 no huge pages are free, so a block is PX_ENOMEM with a hint. */
static void test_huge_hidden(void **state)
{
    px_chip *c = open_chip("default", 0, 0, ARENA);
    void *dev = NULL, *host = NULL;

    (void)state;
    if (!px_caps_get(px_plat_caps(c), PX_FACT_HOST_MAP_HUGE_EFFECTIVE)) {
        print_message("skipped: %s\n", px_plat_caps(c)->f[PX_FACT_HOST_MAP_HUGE_EFFECTIVE].note);
        px_plat_chip_close(c);
        skip();
    }
    assert_int_equal(px_plat_huge_alloc(c, 4096, &dev, &host), PX_ENOMEM);
    assert_error_has("huge_pages_reserved=0");
    assert_error_has("huge_pages_free=0");
    assert_error_has("PLEXUS_HUGEPAGES=0");
    assert_error_has("echo N > /proc/sys/vm/nr_hugepages");
    assert_null(dev);
    px_plat_chip_close(c);
}

/*
 * A block on real huge pages: both views see the same bytes; copies into it are accepted.
 * A block larger than every free huge page is PX_ENOMEM at allocation, not a later SIGBUS.
 */
static void huge_success(px_chip *c)
{
    int64_t hs = px_caps_get(px_plat_caps(c), PX_FACT_HUGE_PAGE_SIZE);
    int64_t nfree = px_caps_get(px_plat_caps(c), PX_FACT_HUGE_PAGES_FREE);
    unsigned char *dev = NULL, *host = NULL;
    unsigned char in[32], out[32];

    PX_ASSERT_OK(px_plat_huge_alloc(c, 4096, (void **)&dev, (void **)&host));
    assert_ptr_not_equal(dev, host);
    dev[0] = 0x42;
    assert_int_equal(host[0], 0x42);
    host[hs - 1] = 0x24;
    assert_int_equal(dev[hs - 1], 0x24);
    fill(in, sizeof(in), 9);
    PX_ASSERT_OK(px_plat_copy_h2d(c, dev + 100, in, sizeof(in)));
    PX_ASSERT_OK(px_plat_copy_d2h(c, out, dev + 100, sizeof(out)));
    assert_memory_equal(in, out, sizeof(in));
    assert_memory_equal(host + 100, in, sizeof(in));
    PX_ASSERT_OK(px_plat_huge_free(c, dev, host, 4096));
    assert_int_equal(px_plat_huge_free(c, dev, host, 4096), PX_EINVAL);

    assert_int_equal(px_plat_huge_alloc(c, (size_t)((nfree + 1) * hs), (void **)&dev,
                                        (void **)&host), PX_ENOMEM);
    assert_error_has("nr_hugepages");
}

/*
 * With the host's own huge pages: where none are free (this build machine has
 * nr_hugepages=0) the block is PX_ENOMEM with the counts; where some are free it succeeds.
 */
static void test_huge_host(void **state)
{
    px_chip *c = open_chip("default", 1, 0, ARENA);
    const px_caps *caps = px_plat_caps(c);
    void *dev = NULL, *host = NULL;

    (void)state;
    if (!px_caps_get(caps, PX_FACT_HOST_MAP_HUGE_EFFECTIVE)) {
        print_message("skipped: %s\n", caps->f[PX_FACT_HOST_MAP_HUGE_EFFECTIVE].note);
        px_plat_chip_close(c);
        skip();
    }
    if (px_caps_get(caps, PX_FACT_HUGE_PAGES_FREE) > 0) {
        print_message("host has %lld free huge pages: testing the success path\n",
                      (long long)px_caps_get(caps, PX_FACT_HUGE_PAGES_FREE));
        huge_success(c);
    } else {
        assert_int_equal(px_plat_huge_alloc(c, 4096, &dev, &host), PX_ENOMEM);
        assert_error_has("huge_pages_free=0");
        assert_error_has("nr_hugepages");
    }
    assert_int_equal(px_plat_huge_free(c, px_plat_dev_base(c), px_plat_dev_base(c), 16),
                     PX_EINVAL);
    px_plat_chip_close(c);
}

/* The arena is a memfd named plexus-chipN; nothing of ours appears in /dev/shm. */
static void test_arena_memfd(void **state)
{
    px_chip *c = open_chip("default", 1, 3, ARENA);
    char link[64], target[256];
    ssize_t n;
    DIR *d;
    struct dirent *e;

    (void)state;
    assert_true(px_plat_arena_fd(c) >= 0);
    snprintf(link, sizeof(link), "/proc/self/fd/%d", px_plat_arena_fd(c));
    n = readlink(link, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_true(strncmp(target, "/memfd:plexus-chip3", 19) == 0);
    d = opendir("/dev/shm");
    while (d != NULL && (e = readdir(d)) != NULL)
        assert_null(strstr(e->d_name, "plexus-chip"));
    if (d != NULL)
        closedir(d);
    assert_string_equal(px_plat_caps(c)->f[PX_FACT_DEVICE_PROFILE].text, "default");
    px_plat_chip_close(c);
}

/* An 8 GiB arena opens (pages are taken lazily) and its last byte is usable. */
static void test_arena_lazy(void **state)
{
    uint64_t big = 8ull << 30;
    px_chip *c = open_chip("default", 1, 0, big);
    unsigned char *base = px_plat_dev_base(c);
    unsigned char v = 0x5c, r = 0;

    (void)state;
    PX_ASSERT_OK(px_plat_copy_h2d(c, base + big - 1, &v, 1));
    PX_ASSERT_OK(px_plat_copy_d2h(c, &r, base + big - 1, 1));
    assert_int_equal(r, 0x5c);
    px_plat_chip_close(c);
}

/* Bad arguments to chip open are PX_EINVAL; closing NULL is allowed. */
static void test_open_bad_args(void **state)
{
    px_caps caps;
    px_chip *c = NULL;

    (void)state;
    PX_ASSERT_OK(px_caps_probe(&caps));
    assert_int_equal(px_plat_chip_open(&caps, 0, 0, &c), PX_EINVAL);
    assert_int_equal(px_plat_chip_open(&caps, -1, ARENA, &c), PX_EINVAL);
    assert_int_equal(px_plat_chip_open(NULL, 0, ARENA, &c), PX_EINVAL);
    assert_null(c);
    px_plat_chip_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_copy_out_of_range),
        cmocka_unit_test(test_host_map_default),
        cmocka_unit_test(test_host_map_refused),
        cmocka_unit_test(test_huge_refused_minimal),
        cmocka_unit_test(test_huge_hidden),
        cmocka_unit_test(test_huge_host),
        cmocka_unit_test(test_arena_memfd),
        cmocka_unit_test(test_arena_lazy),
        cmocka_unit_test(test_open_bad_args),
    };

    unsetenv("PLEXUS_DEVICE_PROFILE");
    unsetenv("PLEXUS_HUGEPAGES");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
