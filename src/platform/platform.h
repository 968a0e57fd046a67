/*
 * platform.h - the internal device contract. One backend is linked in (sim/ today; a cuda/
 * backend would implement the same functions), chosen at link time, never through a vtable.
 *
 * A chip owns a device arena. Device memory is only touched by kernels and by the explicit
 * copy calls below; the host gets a view of device memory only through px_plat_host_map*,
 * which enforces the device profile's *effective* flags exactly as a driver would: with
 * host_map_effective == 0 no ordinary-page host mapping is ever handed out.
 */
#ifndef PX_PLATFORM_H
#define PX_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <plexus/caps.h>
#include <plexus/status.h>

typedef struct px_chip px_chip;

/*
 * Opens chip `index` with a device arena of `bytes` (reserved lazily: memfd + MAP_NORESERVE).
 * caps is copied; the host-mapping calls consult its effective flags.
 */
px_status px_plat_chip_open(const px_caps *caps, int index, uint64_t bytes, px_chip **out);

/* Names the chips this process opens after chip `index` of a level-3 worker (a chip process
 * calls it before it builds its engine, which opens its chip as index 0): the arena's memory
 * object is called "plexus-chip<index>-pid<pid>" in /proc/PID/fd. */
void px_plat_name_chips(int index);

/* Unmaps and closes everything the chip holds. NULL is accepted. */
void px_plat_chip_close(px_chip *c);

/* Device arena: base address (as kernels see it) and size in bytes. */
void *px_plat_dev_base(const px_chip *c);
uint64_t px_plat_dev_size(const px_chip *c);

/* The arena's memfd (for passing to other processes); -1 if none. */
int px_plat_arena_fd(const px_chip *c);

/* The capability table the chip was opened with. */
const px_caps *px_plat_caps(const px_chip *c);

/* Explicit copies. dev must lie inside the arena; PX_EINVAL with the range otherwise. */
px_status px_plat_copy_h2d(px_chip *c, void *dev, const void *host, size_t n);
px_status px_plat_copy_d2h(px_chip *c, void *host, const void *dev, size_t n);

/*
 * Maps [dev, dev+n) of the arena into the host with ordinary pages and returns the host's
 * address of the first byte in *host (a distinct virtual mapping of the same memory).
 * Refuses with PX_ENOTSUP and a message naming the profile's flags when host mapping is not
 * effective (bar_mem == 0, or device_page_size != host_page_size).
 */
px_status px_plat_host_map(px_chip *c, void *dev, size_t n, void **host);

/* Undoes px_plat_host_map. */
px_status px_plat_host_unmap(px_chip *c, void *host, size_t n);

/*
 * Allocates n bytes of device memory backed by real huge pages (memfd MFD_HUGETLB) and maps
 * it both for the device (*dev) and for the host (*host). Refuses with PX_ENOTSUP when
 * host_map_huge_effective is 0, and with PX_ENOMEM when the reserved pages cannot back it
 * (the message gives reserved and free counts).
 */
px_status px_plat_huge_alloc(px_chip *c, size_t n, void **dev, void **host);

/* Frees a px_plat_huge_alloc block. */
px_status px_plat_huge_free(px_chip *c, void *dev, void *host, size_t n);

#endif
