/*
 * mapped.c - DFX transport `mapped`: the host reads the device buffers through an
 * ordinary-page host mapping of the arena (px_plat_host_map), like a BAR mapping.
 *
 * Needs host_map_effective (bar_mem and device page size == host page size). Device and
 * host views are two mappings of the same pages, so neither pull nor push copies anything;
 * the queues' release/acquire ordering is the only synchronisation the drain needs.
 */
#include "dfx/transport/transport.h"

#include <stdio.h>

static int mapped_accept(const px_caps *f, const px_dfx_need *need, char *reason, size_t n)
{
    int64_t dev_ps = px_caps_get(f, PX_FACT_DEVICE_PAGE_SIZE);
    int64_t host_ps = px_caps_get(f, PX_FACT_HOST_PAGE_SIZE);

    (void)need;
    if (px_caps_get(f, PX_FACT_HOST_MAP_EFFECTIVE))
        return 1;
    if (!px_caps_get(f, PX_FACT_BAR_MEM))
        snprintf(reason, n, "bar_mem=0 in profile %s", f->f[PX_FACT_DEVICE_PROFILE].text);
    else if (dev_ps != host_ps)
        snprintf(reason, n, "device page %lld != host page %lld", (long long)dev_ps,
                 (long long)host_ps);
    else
        snprintf(reason, n, "host mapping not effective: %s",
                 f->f[PX_FACT_HOST_MAP_EFFECTIVE].note);
    return 0;
}

static px_status mapped_alloc(px_chip *chip, char *dev_slice, const px_dfx_need *need,
                              px_dfx_block *b)
{
    void *host = NULL;
    px_status st = px_plat_host_map(chip, dev_slice, need->bytes, &host);

    if (st != PX_OK)
        return st;
    b->dev = dev_slice;
    b->host = host;
    b->bytes = need->bytes;
    b->alloc_bytes = need->bytes;
    return PX_OK;
}

static void mapped_release(px_chip *chip, px_dfx_block *b)
{
    if (b->host != NULL)
        px_plat_host_unmap(chip, b->host, b->bytes);
    b->host = NULL;
}

/* Returns PX_OK: a mapping needs no copy in either direction. */
px_status dfx_transport_nop_sync(px_chip *chip, const px_dfx_block *b, size_t off, size_t n)
{
    (void)chip, (void)b, (void)off, (void)n;
    return PX_OK;
}

const px_dfx_transport px_dfx_transport_mapped = {
    .name = "mapped",
    .id = PX_DFXT_MAPPED,
    .accept = mapped_accept,
    .alloc = mapped_alloc,
    .release = mapped_release,
    .pull = dfx_transport_nop_sync,
    .push = dfx_transport_nop_sync,
};
