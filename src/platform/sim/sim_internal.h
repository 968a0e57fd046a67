/*
 * sim_internal.h - what the sim backend's files share: the chip structure, the huge-page
 * block list and the window list. sim.c owns the arena, copies, memset and ordinary host
 * mappings; sim_huge.c owns the huge-page blocks; sim_share.c the windows, shared host
 * memory and the peer-access query; sim_core.c the cores. Nothing outside src/platform/sim/
 * includes this header (sim_inline.h is the part platform.h includes).
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

/* One window of a chip (px_plat_win_create or _import): a memfd mapping. */
typedef struct sim_win {
    struct sim_win *next;
    void *addr;
    size_t bytes;
    int peer; /* the chip whose window it is (this chip's for its own) */
} sim_win;

struct px_chip {
    px_caps caps;
    int index;
    int fd;               /* arena memfd */
    char *base;           /* arena as kernels see it */
    uint64_t size;        /* arena bytes, as requested */
    size_t page;          /* host page size used to align host mappings */
    pthread_mutex_t lock; /* guards huge and win */
    sim_huge_block *huge; /* live huge-page blocks */
    sim_win *win;         /* live windows, own and imported */
};

/* sim.c: makes a memory object for chip c's memory (its name: "plexus-chip<i>-pid<pid>" then
 * suffix, i the level-3 chip index when px_plat_name_chips set one), mode 0600, close-on-exec;
 * flags adds memfd_create flags (MFD_HUGETLB). Returns the descriptor, or -1 with errno. */
int sim_memfd(const px_chip *c, const char *suffix, unsigned flags);

/* sim.c: makes a memory object named name, mode 0600, close-on-exec, with the extra
 * memfd_create flags; returns the descriptor, or -1 with errno. */
int sim_memfd_named(const char *name, unsigned flags);

/* sim.c: the chip's identity among its level-3 siblings: the index px_plat_name_chips set
 * for this process, else the one it was opened with. */
int sim_chip_id(const px_chip *c);

/* Returns 1 when [p, p+n) lies inside [lo, lo+len), else 0; nothing can overflow. */
int sim_inside(const void *p, size_t n, const void *lo, uint64_t len);

/* Returns the name of the chip's device profile. */
const char *sim_profile(const px_chip *c);

/* Returns 1 when [dev, dev+n) lies inside one live huge-page block of c, else 0. */
int sim_huge_contains(px_chip *c, const void *dev, size_t n);

/* Unmaps and closes every huge-page block of c (chip close). */
void sim_huge_release_all(px_chip *c);

/* sim_share.c: returns 1 when [dev, dev+n) lies inside one live window of c, else 0. */
int sim_win_contains(px_chip *c, const void *dev, size_t n);

/* sim_share.c: unmaps every window of c left (chip close), with a debug line per window. */
void sim_win_release_all(px_chip *c);

#endif
