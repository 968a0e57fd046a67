/*
 * probe_mem.c - memory facts of the host: base page size, huge pages (size, reserved, free),
 * transparent huge page mode, memfd and memfd with MFD_HUGETLB, free space in /dev/shm.
 *
 * "Reserved" huge pages are HugePages_Total of /proc/meminfo (vm.nr_hugepages); whether one
 * of them is still free when a block is allocated is checked by the allocation itself, so a
 * snapshot here is only a hint. Each fact that cannot be read is absent with a note.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "caps/caps_internal.h"

#define CAPS_MEMINFO "/proc/meminfo"
#define CAPS_THP_PATH "/sys/kernel/mm/transparent_hugepage/enabled"
#define CAPS_SHM_PATH "/dev/shm"

/* The three /proc/meminfo lines the probe wants; -1 while not seen. */
typedef struct caps_meminfo {
    long long huge_kb;
    long long total;
    long long free_pages;
} caps_meminfo;

static void caps_probe_page_size(px_caps *c)
{
    long ps = sysconf(_SC_PAGESIZE);

    if (ps > 0)
        caps_fact_set(c, PX_FACT_HOST_PAGE_SIZE, ps, PX_SRC_OS, "sysconf(_SC_PAGESIZE)");
    else
        caps_fact_set(c, PX_FACT_HOST_PAGE_SIZE, 0, PX_SRC_OS,
                      "sysconf(_SC_PAGESIZE) failed: %s", strerror(errno));
}

/* Returns 0 with m filled (missing lines stay -1), or the errno of opening the file. */
static int caps_read_meminfo(caps_meminfo *m)
{
    FILE *f = fopen(CAPS_MEMINFO, "re");
    char line[256];

    m->huge_kb = m->total = m->free_pages = -1;
    if (f == NULL)
        return errno;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "Hugepagesize: %lld kB", &m->huge_kb) == 1)
            continue;
        if (sscanf(line, "HugePages_Total: %lld", &m->total) == 1)
            continue;
        sscanf(line, "HugePages_Free: %lld", &m->free_pages);
    }
    fclose(f);
    return 0;
}

/* Sets one meminfo-derived fact, or marks it absent when its line was missing. */
static void caps_meminfo_fact(px_caps *c, px_fact_id id, long long v, int64_t scale,
                              const char *key)
{
    if (v < 0)
        caps_fact_set(c, id, 0, PX_SRC_OS, "no %s line in %s (kernel without hugetlbfs?)", key,
                      CAPS_MEMINFO);
    else
        caps_fact_set(c, id, (int64_t)v * scale, PX_SRC_OS, "%s %s", CAPS_MEMINFO, key);
}

static void caps_probe_huge_pages(px_caps *c)
{
    caps_meminfo m;
    int err = caps_read_meminfo(&m);

    if (err != 0) {
        caps_fact_set(c, PX_FACT_HUGE_PAGE_SIZE, 0, PX_SRC_OS, "cannot read %s: %s",
                      CAPS_MEMINFO, strerror(err));
        c->f[PX_FACT_HUGE_PAGES_RESERVED] = c->f[PX_FACT_HUGE_PAGE_SIZE];
        c->f[PX_FACT_HUGE_PAGES_FREE] = c->f[PX_FACT_HUGE_PAGE_SIZE];
        return;
    }
    caps_meminfo_fact(c, PX_FACT_HUGE_PAGE_SIZE, m.huge_kb, 1024, "Hugepagesize");
    caps_meminfo_fact(c, PX_FACT_HUGE_PAGES_RESERVED, m.total, 1, "HugePages_Total");
    caps_meminfo_fact(c, PX_FACT_HUGE_PAGES_FREE, m.free_pages, 1, "HugePages_Free");
    if (m.total == 0)
        snprintf(c->f[PX_FACT_HUGE_PAGES_RESERVED].note, PX_FACT_NOTE_MAX,
                 "%s HugePages_Total; reserve with `echo N > /proc/sys/vm/nr_hugepages`",
                 CAPS_MEMINFO);
}

/* THP mode is the bracketed word of "always [madvise] never". */
static void caps_probe_thp(px_caps *c)
{
    char line[128];
    char *open_br, *close_br;
    int err = caps_read_line(CAPS_THP_PATH, line, sizeof(line));

    if (err != 0) {
        caps_fact_set_text(c, PX_FACT_THP_MODE, "", PX_SRC_OS, "cannot read %s: %s",
                           CAPS_THP_PATH, strerror(err));
        return;
    }
    open_br = strchr(line, '[');
    close_br = open_br ? strchr(open_br, ']') : NULL;
    if (close_br == NULL) {
        caps_fact_set_text(c, PX_FACT_THP_MODE, "", PX_SRC_OS, "no [mode] in %s: \"%.60s\"",
                           CAPS_THP_PATH, line);
        return;
    }
    *close_br = '\0';
    caps_fact_set_text(c, PX_FACT_THP_MODE, open_br + 1, PX_SRC_OS, "%s", CAPS_THP_PATH);
}

/* Creates (and closes) a memfd with `flags`; sets fact id to whether that worked. */
static void caps_try_memfd(px_caps *c, px_fact_id id, unsigned int flags, const char *what)
{
    int fd = memfd_create("plexus-probe", flags);

    if (fd < 0) {
        caps_fact_set(c, id, 0, PX_SRC_OS, "memfd_create(%s) failed: %s", what,
                      strerror(errno));
        return;
    }
    close(fd);
    caps_fact_set(c, id, 1, PX_SRC_OS, "memfd_create(%s) succeeded", what);
}

static void caps_probe_shm(px_caps *c)
{
    struct statvfs sv;

    if (statvfs(CAPS_SHM_PATH, &sv) != 0) {
        caps_fact_set(c, PX_FACT_SHM_FREE_BYTES, 0, PX_SRC_OS, "statvfs(%s) failed: %s",
                      CAPS_SHM_PATH, strerror(errno));
        return;
    }
    caps_fact_set(c, PX_FACT_SHM_FREE_BYTES, (int64_t)sv.f_bavail * (int64_t)sv.f_frsize,
                  PX_SRC_OS, "statvfs(%s): available blocks x block size", CAPS_SHM_PATH);
}

/* Fills the memory facts of c; never fails. */
void caps_probe_memory(px_caps *c)
{
    caps_probe_page_size(c);
    caps_probe_huge_pages(c);
    caps_probe_thp(c);
    caps_try_memfd(c, PX_FACT_MEMFD, MFD_CLOEXEC, "MFD_CLOEXEC");
    caps_try_memfd(c, PX_FACT_MEMFD_HUGETLB, MFD_CLOEXEC | MFD_HUGETLB, "MFD_HUGETLB");
    caps_probe_shm(c);
}
