/*
 * sim_huge.c - device memory backed by real huge pages, mapped for the device and the host.
 *
 * This is the sim stand-in for a driver's huge-page BAR mapping (bar_huge_mem): allowed
 * when host_map_huge_effective, which holds even where ordinary-page mapping is refused
 * (64 KiB device pages on a 4 KiB host). Each block is its own MFD_HUGETLB memfd, sized to
 * a whole number of huge pages and mapped twice. The device view is mapped with
 * MAP_POPULATE, so the kernel reserves and faults in every page at once: a shortage is a
 * PX_ENOMEM here, never a SIGBUS when a kernel first touches the block.
 */
#include "platform/sim/sim_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/log.h"
#include "util/util.h"

static px_status sim_huge_refused(px_chip *c)
{
    return px_set_error(PX_ENOTSUP, "chip %d: huge-page host mapping of device memory refused "
                        "(profile %s: %s); a DFX transport that does not map (shadow) still "
                        "works", c->index, sim_profile(c),
                        c->caps.f[PX_FACT_HOST_MAP_HUGE_EFFECTIVE].note);
}

/* PX_ENOMEM for a block the huge-page pool cannot back; why is the probe's or the kernel's. */
static px_status sim_huge_short(px_chip *c, size_t n, const char *why)
{
    const px_fact *rsv = &c->caps.f[PX_FACT_HUGE_PAGES_RESERVED];

    return px_set_error(PX_ENOMEM, "chip %d: no huge pages for a %zu-byte block (%s; "
                        "huge_pages_reserved=%lld, huge_pages_free=%lld, huge_page_size=%lld"
                        "%s); reserve some with `echo N > /proc/sys/vm/nr_hugepages` (as root) "
                        "or use a DFX transport without huge pages (shadow)", c->index, n, why,
                        (long long)rsv->value,
                        (long long)px_caps_get(&c->caps, PX_FACT_HUGE_PAGES_FREE),
                        (long long)px_caps_get(&c->caps, PX_FACT_HUGE_PAGE_SIZE),
                        rsv->source == PX_SRC_ENV ? ", hidden by PLEXUS_HUGEPAGES=0" : "");
}

/* Creates, sizes and maps the memfd of b (b->bytes set); PX_OK or PX_ENOMEM. */
static px_status sim_huge_map(px_chip *c, sim_huge_block *b, size_t n)
{
    char why[128];

    b->fd = sim_memfd(c, "-huge", MFD_HUGETLB);
    if (b->fd < 0) {
        snprintf(why, sizeof(why), "memfd_create(MFD_HUGETLB) failed: %s", strerror(errno));
        return sim_huge_short(c, n, why);
    }
    if (ftruncate(b->fd, (off_t)b->bytes) != 0) {
        snprintf(why, sizeof(why), "sizing to %zu bytes failed: %s", b->bytes, strerror(errno));
        goto out_close_fd;
    }
    b->dev = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, b->fd, 0);
    if (b->dev == MAP_FAILED) {
        snprintf(why, sizeof(why), "mmap of %zu bytes failed: %s", b->bytes, strerror(errno));
        goto out_close_fd;
    }
    b->host = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
    if (b->host == MAP_FAILED) {
        snprintf(why, sizeof(why), "host mmap of %zu bytes failed: %s", b->bytes,
                 strerror(errno));
        goto out_unmap_dev;
    }
    return PX_OK;

out_unmap_dev:
    munmap(b->dev, b->bytes);
out_close_fd:
    close(b->fd);
    return sim_huge_short(c, n, why);
}

/*
 * Returns PX_OK with *dev and *host set; PX_EINVAL for bad arguments, PX_ENOTSUP when the
 * profile forbids huge-page host mapping, PX_ENOMEM when huge pages cannot back the block.
 */
px_status px_plat_huge_alloc(px_chip *c, size_t n, void **dev, void **host)
{
    int64_t huge_ps;
    sim_huge_block *b;
    px_status st;

    if (c == NULL || dev == NULL || host == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_huge_alloc: chip, dev and host must be set, "
                            "n > 0 (n = %zu)", n);
    huge_ps = px_caps_get(&c->caps, PX_FACT_HUGE_PAGE_SIZE);
    if (!px_caps_get(&c->caps, PX_FACT_HOST_MAP_HUGE_EFFECTIVE) || huge_ps <= 0)
        return sim_huge_refused(c);
    if (px_caps_get(&c->caps, PX_FACT_HUGE_PAGES_FREE) <= 0)
        return sim_huge_short(c, n, "the probe found no free huge pages");
    if (n > SIZE_MAX - (size_t)huge_ps)
        return px_set_error(PX_EINVAL, "chip %d: huge-page block of %zu bytes is too large",
                            c->index, n);
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return px_set_error(PX_ENOMEM, "chip %d: out of host memory for a huge block record",
                            c->index);
    b->bytes = (size_t)px_align_up(n, (uint64_t)huge_ps);
    st = sim_huge_map(c, b, n);
    if (st != PX_OK) {
        free(b);
        return st;
    }
    pthread_mutex_lock(&c->lock);
    b->next = c->huge;
    c->huge = b;
    pthread_mutex_unlock(&c->lock);
    PX_LOG_DEBUG("chip %d: huge-page block of %zu bytes (%zu mapped), device %p, host %p",
                 c->index, n, b->bytes, b->dev, b->host);
    *dev = b->dev;
    *host = b->host;
    return PX_OK;
}

/* Unlinks and returns the block whose device view is dev, or NULL. Caller holds c->lock. */
static sim_huge_block *sim_huge_unlink(px_chip *c, void *dev, void *host, size_t n)
{
    for (sim_huge_block **pp = &c->huge; *pp != NULL; pp = &(*pp)->next) {
        sim_huge_block *b = *pp;

        if (b->dev == dev && b->host == host && n <= b->bytes) {
            *pp = b->next;
            return b;
        }
    }
    return NULL;
}

static void sim_huge_release(sim_huge_block *b)
{
    munmap(b->host, b->bytes);
    munmap(b->dev, b->bytes);
    close(b->fd);
    free(b);
}

/* Returns PX_OK, or PX_EINVAL when (dev, host, n) is not a live block of this chip. */
px_status px_plat_huge_free(px_chip *c, void *dev, void *host, size_t n)
{
    sim_huge_block *b;

    if (c == NULL)
        return px_set_error(PX_EINVAL, "px_plat_huge_free: chip must be set");
    pthread_mutex_lock(&c->lock);
    b = sim_huge_unlink(c, dev, host, n);
    pthread_mutex_unlock(&c->lock);
    if (b == NULL)
        return px_set_error(PX_EINVAL, "chip %d: px_plat_huge_free(device %p, host %p, %zu "
                            "bytes) matches no huge-page block of this chip", c->index, dev,
                            host, n);
    sim_huge_release(b);
    return PX_OK;
}

/* Returns 1 when [dev, dev+n) lies inside one live huge-page block of c, else 0. */
int sim_huge_contains(px_chip *c, const void *dev, size_t n)
{
    int found = 0;

    pthread_mutex_lock(&c->lock);
    for (sim_huge_block *b = c->huge; b != NULL && !found; b = b->next)
        found = sim_inside(dev, n, b->dev, b->bytes);
    pthread_mutex_unlock(&c->lock);
    return found;
}

/* Unmaps and closes every huge-page block of c. */
void sim_huge_release_all(px_chip *c)
{
    while (c->huge != NULL) {
        sim_huge_block *b = c->huge;

        c->huge = b->next;
        sim_huge_release(b);
    }
}
