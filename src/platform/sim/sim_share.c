/*
 * sim_share.c - memory that crosses processes on sim: communication windows (device memory
 * of a chip that its peers import), host memory shared between processes (staging rings),
 * and the peer-access query that says which chip may import which chip's windows.
 *
 * Both kinds are memfds, mode 0600 and close-on-exec, mapped MAP_SHARED: the descriptor is
 * the shareable handle, passed with SCM_RIGHTS, and nothing is ever named in /dev/shm, so
 * a crash leaks nothing. A window is device memory of its chip: it joins the chip's window
 * list, so the copies and memset accept it, and chip close unmaps what is left. Importing
 * a window asks the peer-access query first, so a profile that forbids peer mapping is
 * physically so: no window of another chip is mapped where the facts say it cannot be.
 */
#include "platform/sim/sim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "util/util.h"

/* ---- the peer-access query ---- */

/* Returns 1 when chip a may map chip b's memory, else 0 with the reason (direct's words). */
int px_plat_peer_access(const px_caps *caps, int a, int b, char *why, size_t n)
{
    const char *prof = caps->f[PX_FACT_DEVICE_PROFILE].text;
    int64_t group = px_caps_get(caps, PX_FACT_PEER_MAP_GROUP);
    char dummy[1];

    if (why == NULL || n == 0) {
        why = dummy;
        n = sizeof(dummy);
    }
    if (a == b) {
        snprintf(why, n, "chip %d's own memory", a);
        return 1;
    }
    if (px_caps_get(caps, PX_FACT_PEER_MAP_EFFECTIVE) == 0) {
        snprintf(why, n, "%s in profile %s",
                 px_caps_get(caps, PX_FACT_PEER_MAP) ? "peer_map=1 but memfd=0" : "peer_map=0",
                 prof);
        return 0;
    }
    if (group > 0 && a / group != b / group) {
        snprintf(why, n, "peer_map_group=%lld in profile %s: chips map each other only inside "
                 "groups of %lld (0-%lld, %lld-%lld, ...)", (long long)group, prof,
                 (long long)group, (long long)group - 1, (long long)group,
                 2 * (long long)group - 1);
        return 0;
    }
    snprintf(why, n, "peer_map=1 in profile %s", prof);
    return 1;
}

/* ---- making, checking and mapping the memory objects ---- */

/* Makes a memfd named name of n bytes in *fd. PX_OK or PX_ENOMEM (what names it). */
static px_status sim_share_make(const char *name, size_t n, const char *what, int *fd)
{
    int f;

    if (n > (size_t)INT64_MAX) /* ftruncate takes an off_t */
        return px_set_error(PX_ENOMEM, "%s: %zu bytes is more than a memory object holds "
                            "(2^63 - 1)", what, n);
    if ((f = sim_memfd_named(name, 0)) < 0)
        return px_set_error(PX_ENOMEM, "%s: making memory object \"%s\" (memfd_create, mode "
                            "0600) failed: %s", what, name, strerror(errno));
    if (ftruncate(f, (off_t)n) != 0) {
        px_set_error(PX_ENOMEM, "%s: sizing memory object \"%s\" to %zu bytes failed: %s; "
                     "free memory (or /dev/shm's limit) is short: make it smaller", what, name,
                     n, strerror(errno));
        close(f);
        return PX_ENOMEM;
    }
    *fd = f;
    return PX_OK;
}

/* Checks that handle is a memory object of at least n bytes. PX_OK or PX_EINVAL. */
static px_status sim_share_check(int handle, size_t n, const char *what)
{
    struct stat sb;

    if (handle < 0 || fstat(handle, &sb) != 0)
        return px_set_error(PX_EINVAL, "%s: handle %d is not an open descriptor (%s); pass the "
                            "descriptor received from the process that made the memory",
                            what, handle, handle < 0 ? "negative" : strerror(errno));
    if (fcntl(handle, F_GET_SEALS) < 0)
        return px_set_error(PX_EINVAL, "%s: handle %d is not a memory object (F_GET_SEALS: "
                            "%s); pass the descriptor that px_plat_win_create or "
                            "px_plat_shm_create returned in the exporting process", what,
                            handle, strerror(errno));
    if (sb.st_size < 0 || (uint64_t)sb.st_size < (uint64_t)n)
        return px_set_error(PX_EINVAL, "%s: handle %d holds %lld bytes, fewer than the %zu "
                            "asked for; the exporter and the importer must agree on the size",
                            what, handle, (long long)sb.st_size, n);
    return PX_OK;
}

/* Maps n bytes of fd shared, read-write, into *addr. PX_OK or PX_ENOMEM. */
static px_status sim_share_map(int fd, size_t n, const char *what, void **addr)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    if (p == MAP_FAILED)
        return px_set_error(PX_ENOMEM, "%s: mapping %zu bytes failed: %s; the address space "
                            "or vm.max_map_count is short", what, n, strerror(errno));
    *addr = p;
    return PX_OK;
}

/* ---- windows ---- */

/* Records the mapping [addr, addr+n) of peer's window in c. PX_OK or PX_ENOMEM (unmapped). */
static px_status sim_win_add(px_chip *c, void *addr, size_t n, int peer)
{
    sim_win *w = calloc(1, sizeof(*w));

    if (w == NULL) {
        munmap(addr, n);
        return px_set_error(PX_ENOMEM, "chip %d: out of host memory for a window record",
                            sim_chip_id(c));
    }
    w->addr = addr;
    w->bytes = n;
    w->peer = peer;
    pthread_mutex_lock(&c->lock);
    w->next = c->win;
    c->win = w;
    pthread_mutex_unlock(&c->lock);
    return PX_OK;
}

/* Returns PX_OK with *addr and *handle, PX_EINVAL for bad arguments, PX_ENOMEM otherwise. */
px_status px_plat_win_create(px_chip *c, size_t n, void **addr, int *handle)
{
    char name[64], what[48];
    void *p = NULL;
    int fd = -1;
    px_status st;

    if (c == NULL || addr == NULL || handle == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_win_create: chip, addr and handle must be set, "
                            "n > 0 (n = %zu)", n);
    snprintf(name, sizeof(name), "plexus-window-chip%d-pid%d", sim_chip_id(c), (int)getpid());
    snprintf(what, sizeof(what), "chip %d: window of %zu bytes", sim_chip_id(c), n);
    if ((st = sim_share_make(name, n, what, &fd)) != PX_OK)
        return st;
    if ((st = sim_share_map(fd, n, what, &p)) != PX_OK)
        goto out_close_fd;
    if ((st = sim_win_add(c, p, n, sim_chip_id(c))) != PX_OK)
        goto out_close_fd;
    PX_LOG_DEBUG("chip %d: window of %zu bytes at %p, handle %d", sim_chip_id(c), n, p, fd);
    *addr = p;
    *handle = fd;
    return PX_OK;

out_close_fd:
    close(fd);
    return st;
}

/* Returns PX_OK with *addr; PX_ENOTSUP, PX_EINVAL or PX_ENOMEM with the reason. */
px_status px_plat_win_import(px_chip *c, int peer, int handle, size_t n, void **addr)
{
    char what[64], why[256];
    void *p = NULL;
    px_status st;

    if (c == NULL || addr == NULL || n == 0 || peer < 0)
        return px_set_error(PX_EINVAL, "px_plat_win_import: chip and addr must be set, peer "
                            ">= 0, n > 0 (peer %d, n = %zu)", peer, n);
    snprintf(what, sizeof(what), "chip %d: importing chip %d's window", sim_chip_id(c), peer);
    if (!px_plat_peer_access(&c->caps, sim_chip_id(c), peer, why, sizeof(why)))
        return px_set_error(PX_ENOTSUP, "%s refused: chip %d may not access chip %d's memory "
                            "(%s); move the data through host memory (comm's staged "
                            "transport)", what, sim_chip_id(c), peer, why);
    if ((st = sim_share_check(handle, n, what)) != PX_OK ||
        (st = sim_share_map(handle, n, what, &p)) != PX_OK)
        return st;
    if ((st = sim_win_add(c, p, n, peer)) != PX_OK)
        return st;
    PX_LOG_DEBUG("%s: %zu bytes at %p", what, n, p);
    *addr = p;
    return PX_OK;
}

/* Unlinks and returns c's window at addr of n bytes, or NULL. Caller holds c->lock. */
static sim_win *sim_win_unlink(px_chip *c, void *addr, size_t n)
{
    for (sim_win **pp = &c->win; *pp != NULL; pp = &(*pp)->next) {
        sim_win *w = *pp;

        if (w->addr == addr && w->bytes == n) {
            *pp = w->next;
            return w;
        }
    }
    return NULL;
}

/* Returns PX_OK, or PX_EINVAL when (addr, n) is no window of c. */
px_status px_plat_win_free(px_chip *c, void *addr, size_t n)
{
    sim_win *w;

    if (c == NULL)
        return px_set_error(PX_EINVAL, "px_plat_win_free: chip must be set");
    pthread_mutex_lock(&c->lock);
    w = sim_win_unlink(c, addr, n);
    pthread_mutex_unlock(&c->lock);
    if (w == NULL)
        return px_set_error(PX_EINVAL, "chip %d: px_plat_win_free(%p, %zu bytes) matches no "
                            "window of this chip (give the address and size that "
                            "px_plat_win_create or px_plat_win_import gave)", sim_chip_id(c),
                            addr, n);
    munmap(w->addr, w->bytes);
    free(w);
    return PX_OK;
}

px_status px_plat_win_host_map(int handle, size_t n, void **addr)
{
    const char *what = "mapping a chip's window for the host";
    px_status st;

    if (addr == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_win_host_map: addr must be set and n > 0 "
                            "(n = %zu)", n);
    if ((st = sim_share_check(handle, n, what)) != PX_OK)
        return st;
    return sim_share_map(handle, n, what, addr);
}

px_status px_plat_win_host_free(void *addr, size_t n)
{
    if (addr == NULL || n == 0 || munmap(addr, n) != 0)
        return px_set_error(PX_EINVAL, "px_plat_win_host_free(%p, %zu bytes): not a mapping "
                            "of px_plat_win_host_map", addr, n);
    return PX_OK;
}

/* Returns 1 when [dev, dev+n) lies inside one live window of c, else 0. */
int sim_win_contains(px_chip *c, const void *dev, size_t n)
{
    int found = 0;

    pthread_mutex_lock(&c->lock);
    for (sim_win *w = c->win; w != NULL && !found; w = w->next)
        found = sim_inside(dev, n, w->addr, w->bytes);
    pthread_mutex_unlock(&c->lock);
    return found;
}

/* Unmaps every window of c (chip close). */
void sim_win_release_all(px_chip *c)
{
    while (c->win != NULL) {
        sim_win *w = c->win;

        c->win = w->next;
        PX_LOG_DEBUG("chip %d: window of chip %d (%zu bytes at %p) still mapped at chip "
                     "close: unmapped", sim_chip_id(c), w->peer, w->bytes, w->addr);
        munmap(w->addr, w->bytes);
        free(w);
    }
}

/* ---- shared host memory ---- */

/* Returns PX_OK with *handle (and *addr when asked); PX_EINVAL or PX_ENOMEM otherwise. */
px_status px_plat_shm_create(px_chip *c, const char *what, size_t n, void **addr, int *handle)
{
    char name[64], msg[64];
    void *p = NULL;
    int fd = -1;
    px_status st;

    (void)c; /* sim: host memory is every chip's already */
    if (handle == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_shm_create: handle must be set, n > 0 "
                            "(n = %zu)", n);
    snprintf(name, sizeof(name), "plexus-%.32s-pid%d", what != NULL ? what : "shm",
             (int)getpid());
    snprintf(msg, sizeof(msg), "shared host memory \"%.32s\"", what != NULL ? what : "shm");
    if ((st = sim_share_make(name, n, msg, &fd)) != PX_OK)
        return st;
    if (addr != NULL && (st = sim_share_map(fd, n, msg, &p)) != PX_OK) {
        close(fd);
        return st;
    }
    if (addr != NULL)
        *addr = p;
    *handle = fd;
    return PX_OK;
}

/* Returns PX_OK with *addr; PX_EINVAL for a bad handle, PX_ENOMEM when mapping fails. */
px_status px_plat_shm_import(px_chip *c, int handle, size_t n, void **addr)
{
    const char *what = "importing shared host memory";
    px_status st;

    (void)c;
    if (addr == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_shm_import: addr must be set, n > 0 (n = %zu)",
                            n);
    if ((st = sim_share_check(handle, n, what)) != PX_OK)
        return st;
    return sim_share_map(handle, n, what, addr);
}

/* Returns PX_OK, or PX_EINVAL when munmap refuses the range. */
px_status px_plat_shm_free(px_chip *c, void *addr, size_t n)
{
    (void)c;
    if (addr == NULL || n == 0)
        return px_set_error(PX_EINVAL, "px_plat_shm_free: addr must be set, n > 0 (n = %zu)",
                            n);
    if (munmap(addr, n) != 0)
        return px_set_error(PX_EINVAL, "unmapping shared host memory %p (%zu bytes) failed: %s",
                            addr, n, strerror(errno));
    return PX_OK;
}
