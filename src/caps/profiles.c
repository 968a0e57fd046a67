/*
 * profiles.c - the sim platform's device profiles and the effective flags derived from them.
 *
 * A device profile stands in for a driver's capability report: the device page size and the
 * raw flags peer_map (another chip's memory can be mapped), bar_mem (device memory can be
 * mapped into the host with ordinary pages) and bar_huge_mem (the same with huge pages).
 * Real drivers do not hand these flags out as-is; they derive what works from them and from
 * the host, e.g. ordinary-page mapping only when device and host pages have the same size
 * (seed dfx-paired-buffers-64k.txt). The effective flags below are derived the same way, and
 * each one's note says why, with the values involved.
 */
#include <stdio.h>
#include <string.h>

#include "caps/caps_internal.h"
#include "util/util.h"

typedef struct caps_profile {
    const char *name;
    const char *doc;
    int64_t device_page_size; /* 0: the host's page size */
    int peer_map;
    int peer_map_group; /* peer mapping works only inside groups of this many chips (0: all) */
    int bar_mem;
    int bar_huge_mem;
} caps_profile;

static const caps_profile caps_profiles[] = {
    {.name = "default",
     .doc = "everything the OS allows: device pages of host size, peer and host mapping",
     .device_page_size = 0,
     .peer_map = 1,
     .bar_mem = 1,
     .bar_huge_mem = 1},
    {.name = "a2a3-pcie",
     .doc = "a PCIe box without the exbus shmem-map capability: no peer mapping",
     .device_page_size = 0,
     .peer_map = 0,
     .bar_mem = 1,
     .bar_huge_mem = 1},
    {.name = "host64k",
     .doc = "64 KiB device pages: ordinary host mapping only on a 64 KiB host, huge pages ok",
     .device_page_size = 65536,
     .peer_map = 1,
     .bar_mem = 1,
     .bar_huge_mem = 1},
    {.name = "minimal",
     .doc = "no peer mapping and no host mapping of device memory at all",
     .device_page_size = 0,
     .peer_map = 0,
     .bar_mem = 0,
     .bar_huge_mem = 0},
    {.name = "pairs",
     .doc = "chips linked two by two: peer mapping only inside pairs 0-1, 2-3, ...",
     .device_page_size = 0,
     .peer_map = 1,
     .peer_map_group = 2,
     .bar_mem = 1,
     .bar_huge_mem = 1},
};

static const char *const caps_profile_names[] = {"default", "a2a3-pcie", "host64k", "minimal",
                                                 "pairs", NULL};

_Static_assert(PX_ARRAY_SIZE(caps_profile_names) == PX_ARRAY_SIZE(caps_profiles) + 1,
               "caps_profile_names must list every row of caps_profiles");

static const caps_profile *caps_profile_find(const char *name)
{
    for (size_t i = 0; i < PX_ARRAY_SIZE(caps_profiles); i++)
        if (strcmp(caps_profiles[i].name, name) == 0)
            return &caps_profiles[i];
    return NULL;
}

/* Returns the built-in profile names, NULL-terminated, in table order. */
const char *const *px_device_profiles(void)
{
    return caps_profile_names;
}

/* Returns PX_OK for a built-in profile name, else PX_EINVAL listing the valid names. */
px_status caps_profile_check(const char *name)
{
    char list[256] = "";
    size_t len = 0;

    if (name != NULL && caps_profile_find(name) != NULL)
        return PX_OK;
    for (size_t i = 0; i < PX_ARRAY_SIZE(caps_profiles) && len < sizeof(list); i++)
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
                                caps_profiles[i].name);
    return px_set_error(PX_EINVAL,
                        "unknown device profile \"%s\": expected one of %s "
                        "(PLEXUS_DEVICE_PROFILE)", name ? name : "(null)", list);
}

/* Returns the profile's one-line description, or NULL for an unknown name. */
const char *caps_profile_describe(const char *name)
{
    const caps_profile *p = caps_profile_find(name);

    return p ? p->doc : NULL;
}

static void caps_set_raw(px_caps *c, const caps_profile *p)
{
    int64_t host_ps = c->f[PX_FACT_HOST_PAGE_SIZE].value;

    caps_fact_set_text(c, PX_FACT_DEVICE_PROFILE, p->name, PX_SRC_PROFILE, "%s", p->doc);
    if (p->device_page_size != 0)
        caps_fact_set(c, PX_FACT_DEVICE_PAGE_SIZE, p->device_page_size, PX_SRC_PROFILE,
                      "fixed by profile %s", p->name);
    else
        caps_fact_set(c, PX_FACT_DEVICE_PAGE_SIZE, host_ps, PX_SRC_PROFILE,
                      "profile %s: the host page size", p->name);
    caps_fact_set(c, PX_FACT_PEER_MAP, p->peer_map, PX_SRC_PROFILE,
                  "another chip's memory can%s be mapped", p->peer_map ? "" : "not");
    if (p->peer_map_group > 0)
        caps_fact_set(c, PX_FACT_PEER_MAP_GROUP, p->peer_map_group, PX_SRC_PROFILE,
                      "peer mapping only between chips i and j with i / %d == j / %d",
                      p->peer_map_group, p->peer_map_group);
    else
        caps_fact_set(c, PX_FACT_PEER_MAP_GROUP, 0, PX_SRC_PROFILE,
                      "no grouping: any chip may map any other's memory when peer_map=1");
    caps_fact_set(c, PX_FACT_BAR_MEM, p->bar_mem, PX_SRC_PROFILE,
                  "device memory can%s be mapped into the host with ordinary pages",
                  p->bar_mem ? "" : "not");
    caps_fact_set(c, PX_FACT_BAR_HUGE_MEM, p->bar_huge_mem, PX_SRC_PROFILE,
                  "device memory can%s be mapped into the host with huge pages",
                  p->bar_huge_mem ? "" : "not");
}

/* peer_map_effective = peer_map && memfd (windows are shared as memfds). */
static void caps_derive_peer_map(px_caps *c)
{
    int64_t peer = c->f[PX_FACT_PEER_MAP].value;
    int64_t memfd = c->f[PX_FACT_MEMFD].value;

    if (!peer)
        caps_fact_set(c, PX_FACT_PEER_MAP_EFFECTIVE, 0, PX_SRC_DERIVED, "peer_map=0");
    else if (!memfd)
        caps_fact_set(c, PX_FACT_PEER_MAP_EFFECTIVE, 0, PX_SRC_DERIVED,
                      "peer_map=1 but memfd=0: windows cannot be shared");
    else
        caps_fact_set(c, PX_FACT_PEER_MAP_EFFECTIVE, 1, PX_SRC_DERIVED,
                      "peer_map=1 and memfd=1");
}

/* host_map_effective = bar_mem && device_page_size == host_page_size. */
static void caps_derive_host_map(px_caps *c)
{
    int64_t bar = c->f[PX_FACT_BAR_MEM].value;
    int64_t dev_ps = c->f[PX_FACT_DEVICE_PAGE_SIZE].value;
    int64_t host_ps = c->f[PX_FACT_HOST_PAGE_SIZE].value;

    if (!bar)
        caps_fact_set(c, PX_FACT_HOST_MAP_EFFECTIVE, 0, PX_SRC_DERIVED, "bar_mem=0");
    else if (host_ps <= 0)
        caps_fact_set(c, PX_FACT_HOST_MAP_EFFECTIVE, 0, PX_SRC_DERIVED,
                      "bar_mem=1 but host_page_size is unknown");
    else if (dev_ps != host_ps)
        caps_fact_set(c, PX_FACT_HOST_MAP_EFFECTIVE, 0, PX_SRC_DERIVED,
                      "bar_mem=1 but device_page_size %lld != host_page_size %lld",
                      (long long)dev_ps, (long long)host_ps);
    else
        caps_fact_set(c, PX_FACT_HOST_MAP_EFFECTIVE, 1, PX_SRC_DERIVED,
                      "bar_mem=1 and device_page_size %lld == host_page_size %lld",
                      (long long)dev_ps, (long long)host_ps);
}

/*
 * host_map_huge_effective = bar_huge_mem && memfd_hugetlb && huge_page_size > 0 &&
 * huge_page_size % device_page_size == 0. Whether a page is free is the allocation's check.
 */
static void caps_derive_host_map_huge(px_caps *c)
{
    int64_t bar = c->f[PX_FACT_BAR_HUGE_MEM].value;
    int64_t hugetlb = c->f[PX_FACT_MEMFD_HUGETLB].value;
    int64_t huge_ps = c->f[PX_FACT_HUGE_PAGE_SIZE].value;
    int64_t dev_ps = c->f[PX_FACT_DEVICE_PAGE_SIZE].value;
    px_fact_id id = PX_FACT_HOST_MAP_HUGE_EFFECTIVE;

    if (!bar)
        caps_fact_set(c, id, 0, PX_SRC_DERIVED, "bar_huge_mem=0");
    else if (!hugetlb)
        caps_fact_set(c, id, 0, PX_SRC_DERIVED, "bar_huge_mem=1 but memfd_hugetlb=0");
    else if (huge_ps <= 0 || dev_ps <= 0)
        caps_fact_set(c, id, 0, PX_SRC_DERIVED,
                      "bar_huge_mem=1 but huge_page_size %lld or device_page_size %lld unknown",
                      (long long)huge_ps, (long long)dev_ps);
    else if (huge_ps % dev_ps != 0)
        caps_fact_set(c, id, 0, PX_SRC_DERIVED,
                      "bar_huge_mem=1 but huge_page_size %lld is not a multiple of "
                      "device_page_size %lld", (long long)huge_ps, (long long)dev_ps);
    else
        caps_fact_set(c, id, 1, PX_SRC_DERIVED,
                      "bar_huge_mem=1, memfd_hugetlb=1, huge_page_size %lld is a multiple of "
                      "device_page_size %lld (free pages checked at allocation)",
                      (long long)huge_ps, (long long)dev_ps);
}

/* Fills the device facts of profile `name` (already checked) and derives the effective ones. */
void caps_apply_profile(px_caps *c, const char *name)
{
    const caps_profile *p = caps_profile_find(name);

    if (p == NULL)
        p = &caps_profiles[0];
    caps_set_raw(c, p);
    caps_derive_peer_map(c);
    caps_derive_host_map(c);
    caps_derive_host_map_huge(c);
}
