/*
 * platform.h - the internal device contract. One backend is linked in (sim/ today; a cuda/
 * backend would implement the same functions), chosen at link time, never through a vtable.
 * docs/architecture.md, "The device contract", lists every function with the CUDA driver
 * call it maps to.
 *
 * A chip owns a device arena. Device memory is only touched by kernels and by the explicit
 * copy calls below; the host gets a view of device memory only through px_plat_host_map*,
 * which enforces the device profile's *effective* flags exactly as a driver would: with
 * host_map_effective == 0 no ordinary-page host mapping is ever handed out.
 *
 * Besides the arena the contract has: device memory that other processes can import
 * (communication windows) and host memory shared between processes (staging rings), both
 * passed as a shareable handle that is an int file descriptor; the peer-access query;
 * memset; and the chip's cores: started and joined here, each running a kernel by launch
 * and then poll until it completes. Launch and poll are on every task's path, so the
 * backend gives them as static inline functions (its *_inline.h, included at the end).
 *
 * Threads: every function may be called from any thread unless its comment says otherwise;
 * the calls on one chip's memory lists (huge blocks, windows) serialise on the chip's lock.
 */
#ifndef PX_PLATFORM_H
#define PX_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <plexus/caps.h>
#include <plexus/status.h>
#include <plexus/worker.h>

typedef struct px_chip px_chip;

/* One core of a chip, and a launched kernel's completion token: defined by the backend's
 * inline header (sim: a host thread, and the kernel's status). */
typedef struct px_plat_core px_plat_core;
typedef struct px_plat_token px_plat_token;

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
 * Registers n bytes of host memory at host for c's kernels (the pages pinned and mapped into
 * the device's address space) and returns the address kernels use in *dev. The same
 * ordinary-page mapping as px_plat_host_map, the other way: refused with PX_ENOTSUP naming the
 * profile's flags when host_map_effective is 0. PX_EINVAL for device memory or n == 0. On sim
 * the kernels of a level-2 chip share the caller's address space, so *dev == host.
 */
px_status px_plat_host_register(px_chip *c, void *host, size_t n, void **dev);

/* Undoes px_plat_host_register (host and n as registered). */
px_status px_plat_host_unregister(px_chip *c, void *host, size_t n);

/*
 * Allocates n bytes of device memory backed by real huge pages (memfd MFD_HUGETLB) and maps
 * it both for the device (*dev) and for the host (*host). Refuses with PX_ENOTSUP when
 * host_map_huge_effective is 0, and with PX_ENOMEM when the reserved pages cannot back it
 * (the message gives reserved and free counts).
 */
px_status px_plat_huge_alloc(px_chip *c, size_t n, void **dev, void **host);

/* Frees a px_plat_huge_alloc block. */
px_status px_plat_huge_free(px_chip *c, void *dev, void *host, size_t n);

/*
 * Sets n bytes of device memory at dev (arena, huge block or window of c) to (unsigned
 * char)value. Returns PX_OK, or PX_EINVAL with the range when it is not device memory of c.
 * Called by the host side of a chip (comm zeroing a window's area, the runtime), never from
 * a kernel, which writes its own memory directly.
 */
px_status px_plat_memset(px_chip *c, void *dev, int value, size_t n);

/* ---- communication windows: device memory other processes can import ---- */

/*
 * Creates n bytes of chip c's device memory that other processes can map, maps it here and
 * returns its address in *addr (what c's kernels and c's host threads use; on sim one
 * address serves both) and its shareable handle in *handle: an int file descriptor that
 * the caller owns, passes to other processes (SCM_RIGHTS: hier's fd passing) and closes
 * once passed; the memory lives until every process has freed its mapping. The memory
 * reads as zeros. On sim the handle is a memfd (mode 0600, close-on-exec) named
 * "plexus-window-chip<i>-pid<pid>" (i as px_plat_name_chips set it); on CUDA it is the
 * descriptor cuMemExportToShareableHandle gives for CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
 * Returns PX_OK; PX_EINVAL for a NULL argument or n == 0, PX_ENOMEM when the memory cannot
 * be made or mapped (the message says which and what to lower). Called by comm in the chip
 * process that owns the window (comm.create); free it with px_plat_win_free before
 * px_plat_chip_close, which releases any left.
 */
px_status px_plat_win_create(px_chip *c, size_t n, void **addr, int *handle);

/*
 * Maps the window of chip `peer` (its level-3 index) that another process made with
 * px_plat_win_create and whose handle this process received, n bytes, for chip c; *addr is
 * where c's kernels and host threads reach it. The handle stays the caller's (close it
 * after). Returns PX_OK; PX_ENOTSUP when c may not access peer's memory
 * (px_plat_peer_access says no, with its reason: the profile forbids what is not mapped);
 * PX_EINVAL when handle is not a memory object of at least n bytes (not open, not a memory
 * object, or smaller: the exporter and importer disagree on the size); PX_ENOMEM when the
 * mapping fails. Called by comm in a chip process (comm.map, direct pairs).
 */
px_status px_plat_win_import(px_chip *c, int peer, int handle, size_t n, void **addr);

/*
 * Unmaps a window of c made by px_plat_win_create or px_plat_win_import (addr and n as
 * given or returned there). Returns PX_OK, or PX_EINVAL when (addr, n) is no window of c.
 */
px_status px_plat_win_free(px_chip *c, void *addr, size_t n);

/*
 * Maps a chip's window (a handle made by px_plat_win_create, n bytes) into this host process
 * for a host agent of the worker, with no chip of its own: the MPI proxy (comm/proxy/)
 * carries other hosts' requests out against the window and hands its bytes to MPI. *addr is
 * host-addressable. sim: the window's memory object mapped. A device backend maps the
 * allocation for the host (CUDA: the exported handle mapped with host access, or a pinned
 * host mirror with device copies; with GPUDirect RDMA the window is registered with the
 * network instead). Returns PX_OK; PX_EINVAL when handle is no memory object of at least n
 * bytes; PX_ENOMEM when the mapping fails. Free with px_plat_win_host_free.
 */
px_status px_plat_win_host_map(int handle, size_t n, void **addr);
px_status px_plat_win_host_free(void *addr, size_t n);

/*
 * The peer-access query: returns 1 when chip a may map chip b's exported memory, else 0 with
 * the reason in why (n bytes; why may be NULL). A pure function of the capability table
 * (peer_map_effective and peer_map_group, which a CUDA probe fills from
 * cuDeviceCanAccessPeer), so the parent, which has no px_chip of its chips, can ask it; the
 * reasons read as comm's direct transport words them. a == b is always 1 (a chip's own
 * memory). Any thread.
 */
int px_plat_peer_access(const px_caps *caps, int a, int b, char *why, size_t n);

/* ---- host memory shared between processes (staging rings) ---- */

/*
 * Creates n bytes of host memory that other processes can map and returns its handle in
 * *handle (an int file descriptor the caller owns and closes once passed); when addr is not
 * NULL it is also mapped here (*addr). c may be NULL: the parent of a level-3 worker makes
 * staging memory for two chips it has no px_chip for; a chip given registers the memory
 * for that chip's device (sim: nothing to do; CUDA: cuMemHostRegister). what names the
 * memory ("staging": "plexus-staging-pid<pid>", at most 32 characters used; NULL: "shm").
 * The memory reads as zeros. Returns PX_OK; PX_EINVAL for a NULL handle or n == 0,
 * PX_ENOMEM when it cannot be made or mapped.
 */
px_status px_plat_shm_create(px_chip *c, const char *what, size_t n, void **addr, int *handle);

/*
 * Maps n bytes of host memory another process made with px_plat_shm_create, whose handle
 * this process received (the handle stays the caller's); c may be NULL, as above. Returns
 * PX_OK with *addr; PX_EINVAL when handle is not a memory object of at least n bytes,
 * PX_ENOMEM when the mapping fails.
 */
px_status px_plat_shm_import(px_chip *c, int handle, size_t n, void **addr);

/* Unmaps host memory mapped by px_plat_shm_create or px_plat_shm_import (c as given there).
 * Returns PX_OK, or PX_EINVAL when the range cannot be unmapped. */
px_status px_plat_shm_free(px_chip *c, void *addr, size_t n);

/* ---- cores: start, join, launch a kernel, poll for its completion ---- */

/* What a core runs from its start until it returns: the runtime's core loop. */
typedef void (*px_plat_core_main_fn)(void *arg);

/*
 * Starts core `index` of chip c (c may be NULL: the core is the host's, e.g. the runtime's
 * engine at level 3): core is the caller's storage, which must stay put until
 * px_plat_core_join returned PX_OK; fn(arg) runs on the core until it returns. cpu >= 0
 * binds the core's host thread to that CPU (a failure is a warning: it stays unbound).
 * Sim: a host thread; CUDA: a host thread that owns one stream of c's context. Returns
 * PX_OK, or PX_ENOMEM when the core cannot be started (the message has the system's reason;
 * nothing is left running). Called by the runtime's px_cores_start only.
 */
px_status px_plat_core_start(px_chip *c, px_plat_core *core, int index, int cpu,
                             px_plat_core_main_fn fn, void *arg);

/*
 * Waits until a started core's fn has returned, at most until deadline (CLOCK_REALTIME;
 * NULL: no limit). Returns PX_OK once it has (the core is gone), PX_ETIMEDOUT when it is
 * still running at the deadline (no message: the caller names what the core is doing; the
 * core may be joined again later). Called by whoever started the core, from another thread.
 */
px_status px_plat_core_join(px_plat_core *core, const struct timespec *deadline);

/*
 * Inline, from the backend's header (every task takes this path):
 *
 *   px_status px_plat_launch(px_plat_core *core, px_kernel_fn fn, px_core_ctx *ctx,
 *                            const px_task_args *args, px_plat_token *tok);
 *     Launches kernel fn(ctx, args) on core and fills *tok. Returns PX_OK when launched, or
 *     a status with its message when the device refused the launch (the kernel did not
 *     run). Sim runs the kernel right here, on the calling thread, which is core's thread
 *     (or the chip's thread that stands in for core 0: a level-3 chip's main thread, an
 *     orchestration helping), and the token holds its status.
 *
 *   int px_plat_poll(px_plat_token *tok, px_status *st);
 *     Returns 1 when the launched kernel has completed, with the kernel's own status in *st
 *     (PX_OK, its error, or PX_TASK_ASYNC), and 0 while it runs (never blocks; poll again).
 *     Sim: always 1. Called by the thread that launched, as often as it likes until 1.
 */
#include "platform/sim/sim_inline.h"

#endif
