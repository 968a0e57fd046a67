/*
 * sim.c - the sim backend of the platform contract (platform.h): a chip is a device arena in
 * this process, and the rules a real driver enforces are enforced here from the capability
 * table the chip was opened with.
 *
 * The arena is one memfd ("plexus-chipN", MAP_SHARED | MAP_NORESERVE), so its pages are
 * taken lazily, it can be passed to other processes, and nothing is ever named in /dev/shm.
 * A host mapping is a second, distinct mapping of the same memfd pages: the host sees
 * device writes and the other way round, exactly like a BAR mapping. It is handed out only
 * when host_map_effective says so. Huge-page blocks are separate memfds with MFD_HUGETLB,
 * mapped twice (device view and host view) and populated at once, so a shortage of huge
 * pages is an error at allocation and never a SIGBUS later; a small list keeps their fds.
 * Copies and memset accept any device memory of the chip: the arena, a huge block, or a
 * window (sim_share.c); the cores are sim_core.c's.
 */
#include "platform/platform.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/sim/sim_internal.h"
#include "util/log.h"
#include "util/util.h"

/* The page size host mappings are aligned to: the kernel's own, else the probe's. */
static size_t sim_host_page(const px_caps *caps)
{
    long sys = sysconf(_SC_PAGESIZE);
    int64_t ps = px_caps_get(caps, PX_FACT_HOST_PAGE_SIZE);

    if (sys > 0)
        return (size_t)sys;
    return ps > 0 ? (size_t)ps : 4096;
}

/* Returns the name of the chip's device profile. */
const char *sim_profile(const px_chip *c)
{
    return c->caps.f[PX_FACT_DEVICE_PROFILE].text;
}

/* The level-3 chip index the arenas of this process are named after; -1: the index given. */
static int g_chip_name = -1;

void px_plat_name_chips(int index)
{
    g_chip_name = index;
}

/* Returns the chip's level-3 index (px_plat_name_chips), else the index it was opened with. */
int sim_chip_id(const px_chip *c)
{
    return g_chip_name >= 0 ? g_chip_name : c->index;
}

int sim_memfd(const px_chip *c, const char *suffix, unsigned flags)
{
    char name[64];

    snprintf(name, sizeof(name), "plexus-chip%d-pid%d%s", sim_chip_id(c), (int)getpid(),
             suffix);
    return sim_memfd_named(name, flags);
}

/* Returns the new memfd (mode 0600, close-on-exec), or -1 with errno. */
int sim_memfd_named(const char *name, unsigned flags)
{
    int fd, err;

    if ((fd = memfd_create(name, MFD_CLOEXEC | flags)) < 0)
        return -1;
    if (fchmod(fd, 0600) != 0) { /* memfd_create makes it 0777 */
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* Returns PX_OK with *out set, or PX_EINVAL / PX_ENOMEM with the reason. */
px_status px_plat_chip_open(const px_caps *caps, int index, uint64_t bytes, px_chip **out)
{
    px_chip *c;

    if (caps == NULL || out == NULL || index < 0 || bytes == 0 || bytes > (uint64_t)SIZE_MAX ||
        bytes > (uint64_t)INT64_MAX) /* ftruncate takes an off_t */
        return px_set_error(PX_EINVAL, "chip %d: cannot open with %llu bytes of device memory "
                            "(caps and out must be set, index >= 0, 0 < bytes <= 2^63 - 1)", index,
                            (unsigned long long)bytes);
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return px_set_error(PX_ENOMEM, "chip %d: out of host memory for the chip", index);
    c->caps = *caps;
    c->index = index;
    c->size = bytes;
    c->page = sim_host_page(caps);
    pthread_mutex_init(&c->lock, NULL);
    c->fd = sim_memfd(c, "", 0);
    if (c->fd < 0) {
        px_set_error(PX_ENOMEM, "chip %d: making the memory object of the device arena "
                     "(memfd_create, mode 0600) failed: %s", index, strerror(errno));
        goto out_free;
    }
    if (ftruncate(c->fd, (off_t)bytes) != 0) {
        px_set_error(PX_ENOMEM, "chip %d: sizing the device arena to %llu bytes failed: %s; "
                     "lower PLEXUS_DEVICE_MEM", index, (unsigned long long)bytes,
                     strerror(errno));
        goto out_close_fd;
    }
    c->base = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                   c->fd, 0);
    if (c->base == MAP_FAILED) {
        px_set_error(PX_ENOMEM, "chip %d: mapping the %llu-byte device arena failed: %s; "
                     "lower PLEXUS_DEVICE_MEM", index, (unsigned long long)bytes,
                     strerror(errno));
        goto out_close_fd;
    }
    PX_LOG_DEBUG("chip %d: device arena of %llu bytes at %p (profile %s)", index,
                 (unsigned long long)bytes, (void *)c->base, sim_profile(c));
    *out = c;
    return PX_OK;

out_close_fd:
    close(c->fd);
out_free:
    pthread_mutex_destroy(&c->lock);
    free(c);
    return PX_ENOMEM;
}

/* Releases the arena, every huge-page block and the chip itself. */
void px_plat_chip_close(px_chip *c)
{
    if (c == NULL)
        return;
    sim_huge_release_all(c);
    sim_win_release_all(c);
    munmap(c->base, (size_t)c->size);
    close(c->fd);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Returns the arena's base address as kernels see it. */
void *px_plat_dev_base(const px_chip *c)
{
    return c->base;
}

/* Returns the arena's size in bytes. */
uint64_t px_plat_dev_size(const px_chip *c)
{
    return c->size;
}

/* Returns the arena's memfd. */
int px_plat_arena_fd(const px_chip *c)
{
    return c->fd;
}

/* Returns the capability table the chip was opened with. */
const px_caps *px_plat_caps(const px_chip *c)
{
    return &c->caps;
}

/* Returns 1 when [p, p+n) lies inside [lo, lo+len), else 0; nothing can overflow. */
int sim_inside(const void *p, size_t n, const void *lo, uint64_t len)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)lo;

    return a >= b && n <= len && a - b <= len - n;
}

/* True when [dev, dev+n) is device memory: inside the arena, one huge block or one window. */
static int sim_is_device(px_chip *c, const void *dev, size_t n)
{
    return sim_inside(dev, n, c->base, c->size) || sim_huge_contains(c, dev, n) ||
           sim_win_contains(c, dev, n);
}

static px_status sim_range_error(px_chip *c, const char *what, const void *dev, size_t n)
{
    return px_set_error(PX_EINVAL, "chip %d: %s of %zu bytes at device address %p lies "
                        "outside device memory (arena %p..%p, %llu bytes)", c->index, what, n,
                        dev, (void *)c->base, (void *)(c->base + c->size),
                        (unsigned long long)c->size);
}

/* Returns PX_OK, or PX_EINVAL when the device range is not device memory. */
px_status px_plat_copy_h2d(px_chip *c, void *dev, const void *host, size_t n)
{
    if (c == NULL || (n > 0 && (dev == NULL || host == NULL)))
        return px_set_error(PX_EINVAL, "px_plat_copy_h2d: chip, dev and host must be set");
    if (!sim_is_device(c, dev, n))
        return sim_range_error(c, "copy to device", dev, n);
    if (n > 0)
        memcpy(dev, host, n);
    return PX_OK;
}

/* Returns PX_OK, or PX_EINVAL when the device range is not device memory. */
px_status px_plat_copy_d2h(px_chip *c, void *host, const void *dev, size_t n)
{
    if (c == NULL || (n > 0 && (dev == NULL || host == NULL)))
        return px_set_error(PX_EINVAL, "px_plat_copy_d2h: chip, dev and host must be set");
    if (!sim_is_device(c, dev, n))
        return sim_range_error(c, "copy from device", dev, n);
    if (n > 0)
        memcpy(host, dev, n);
    return PX_OK;
}

/* Returns PX_OK, or PX_EINVAL when the device range is not device memory. */
px_status px_plat_memset(px_chip *c, void *dev, int value, size_t n)
{
    if (c == NULL || (n > 0 && dev == NULL))
        return px_set_error(PX_EINVAL, "px_plat_memset: chip and dev must be set");
    if (!sim_is_device(c, dev, n))
        return sim_range_error(c, "memset", dev, n);
    if (n > 0)
        memset(dev, value, n);
    return PX_OK;
}

static px_status sim_host_map_refused(px_chip *c)
{
    const char *alt = px_caps_get(&c->caps, PX_FACT_HOST_MAP_HUGE_EFFECTIVE)
                          ? "a DFX transport that does not map (shadow) or huge-page mapping "
                            "(mapped_huge) still works"
                          : "a DFX transport that does not map (shadow) still works";

    return px_set_error(PX_ENOTSUP, "chip %d: host mapping of device memory refused (profile "
                        "%s: %s); %s", c->index, sim_profile(c),
                        c->caps.f[PX_FACT_HOST_MAP_EFFECTIVE].note, alt);
}

/*
 * Returns PX_OK with *host set; PX_EINVAL for a range outside the arena, PX_ENOTSUP when the
 * profile forbids host mapping, PX_ENOMEM when mmap fails.
 */
px_status px_plat_host_map(px_chip *c, void *dev, size_t n, void **host)
{
    size_t off, start, len;
    char *p;

    if (c == NULL || host == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_host_map: chip and host must be set, n > 0");
    if (!sim_inside(dev, n, c->base, c->size))
        return sim_range_error(c, "host mapping", dev, n);
    if (!px_caps_get(&c->caps, PX_FACT_HOST_MAP_EFFECTIVE))
        return sim_host_map_refused(c);
    off = (size_t)((char *)dev - c->base);
    start = off & ~(c->page - 1);
    len = (size_t)px_align_up(off + n, c->page) - start;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, (off_t)start);
    if (p == MAP_FAILED)
        return px_set_error(PX_ENOMEM, "chip %d: host mapping of %zu bytes at arena offset %zu "
                            "failed: %s", c->index, n, off, strerror(errno));
    *host = p + (off - start);
    return PX_OK;
}

/*
 * Returns PX_OK with *dev set; PX_EINVAL for device memory, PX_ENOTSUP when the profile
 * forbids ordinary-page host mapping. Nothing to pin on sim: the chip's kernels are this
 * process's threads.
 */
px_status px_plat_host_register(px_chip *c, void *host, size_t n, void **dev)
{
    if (c == NULL || host == NULL || dev == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_host_register: chip, host and dev must be set, "
                            "n > 0");
    if ((char *)host < c->base + c->size && c->base < (char *)host + n)
        return px_set_error(PX_EINVAL, "chip %d: px_plat_host_register given device memory "
                            "(%p, %zu bytes overlap the arena); it registers host memory",
                            c->index, host, n);
    if (!px_caps_get(&c->caps, PX_FACT_HOST_MAP_EFFECTIVE))
        return px_set_error(PX_ENOTSUP, "chip %d: registering host memory for the device "
                            "refused (profile %s: %s)", c->index, sim_profile(c),
                            c->caps.f[PX_FACT_HOST_MAP_EFFECTIVE].note);
    *dev = host;
    return PX_OK;
}

px_status px_plat_host_unregister(px_chip *c, void *host, size_t n)
{
    if (c == NULL || host == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_host_unregister: chip and host must be set, "
                            "n > 0");
    return PX_OK;
}

/* Returns PX_OK, or PX_EINVAL for an address that cannot be a host mapping of this chip. */
px_status px_plat_host_unmap(px_chip *c, void *host, size_t n)
{
    uintptr_t a = (uintptr_t)host, start;
    size_t len;

    if (c == NULL || host == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_host_unmap: chip and host must be set, n > 0");
    if (sim_inside(host, 1, c->base, c->size))
        return px_set_error(PX_EINVAL, "chip %d: px_plat_host_unmap given device address %p, "
                            "not a host mapping", c->index, host);
    start = a & ~(uintptr_t)(c->page - 1);
    len = (size_t)px_align_up(a + n, c->page) - start;
    if (munmap((void *)start, len) != 0)
        return px_set_error(PX_EINVAL, "chip %d: unmapping host view %p (%zu bytes) failed: %s",
                            c->index, host, n, strerror(errno));
    return PX_OK;
}
