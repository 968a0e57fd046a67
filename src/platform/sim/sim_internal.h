/*
 * sim_internal.h - what the sim backend's files share: the chip structure and the huge-page
 * block list. sim.c owns the arena, copies and ordinary host mappings; sim_huge.c owns the
 * huge-page blocks. Nothing outside src/platform/sim/ includes this header.
 */
#ifndef PX_PLATFORM_SIM_INTERNAL_H
#define PX_PLATFORM_SIM_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/platform.h"

/* One px_plat_huge_alloc block: a hugetlb memfd mapped for the device and for the host. */
typedef struct sim_huge_block {
    struct sim_huge_block *next;
    void *dev;
    void *host;
    size_t bytes; /* mapped length: a whole number of huge pages */
    int fd;
} sim_huge_block;

struct px_chip {
    px_caps caps;
    int index;
    int fd;               /* arena memfd */
    char *base;           /* arena as kernels see it */
    uint64_t size;        /* arena bytes, as requested */
    size_t page;          /* host page size used to align host mappings */
    pthread_mutex_t lock; /* guards huge */
    sim_huge_block *huge; /* live huge-page blocks */
};

/* sim.c: makes a memory object for chip c's memory (its name: "plexus-chip<i>-pid<pid>" then
 * suffix, i the level-3 chip index when px_plat_name_chips set one), mode 0600, close-on-exec;
 * flags adds memfd_create flags (MFD_HUGETLB). Returns the descriptor, or -1 with errno. */
int sim_memfd(const px_chip *c, const char *suffix, unsigned flags);

/* Returns 1 when [p, p+n) lies inside [lo, lo+len), else 0; nothing can overflow. */
int sim_inside(const void *p, size_t n, const void *lo, uint64_t len);

/* Returns the name of the chip's device profile. */
const char *sim_profile(const px_chip *c);

/* Returns 1 when [dev, dev+n) lies inside one live huge-page block of c, else 0. */
int sim_huge_contains(px_chip *c, const void *dev, size_t n);

/* Unmaps and closes every huge-page block of c (chip close). */
void sim_huge_release_all(px_chip *c);

#endif
