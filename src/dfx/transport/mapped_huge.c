/*
 * mapped_huge.c - DFX transport `mapped_huge`: one huge-page block per collector
 * (px_plat_huge_alloc: memfd MFD_HUGETLB, mapped for the device and for the host), carved
 * into that collector's buffers.
 *
 * Needs host_map_huge_effective and enough free huge pages: the block of `need->bytes` is
 * rounded up to whole huge pages, and collectors planned earlier may already have promised
 * some (need->huge_pages_taken). The free count is the probe's hint; px_plat_huge_alloc
 * checks again and a refusal there falls back to the next transport (select.c).
 */
#include "dfx/transport/transport.h"

#include <stdio.h>

/* Huge pages a block of `bytes` takes, 0 when the page size is unknown. */
static int64_t huge_pages_for(const px_caps *f, size_t bytes)
{
    int64_t ps = px_caps_get(f, PX_FACT_HUGE_PAGE_SIZE);

    return ps > 0 ? (int64_t)((bytes + (size_t)ps - 1) / (size_t)ps) : 0;
}

static int huge_accept(const px_caps *f, const px_dfx_need *need, char *reason, size_t n)
{
    const px_fact *rsv = &f->f[PX_FACT_HUGE_PAGES_RESERVED];
    int64_t free_pages = px_caps_get(f, PX_FACT_HUGE_PAGES_FREE);
    int64_t want = huge_pages_for(f, need->bytes);

    if (!px_caps_get(f, PX_FACT_HOST_MAP_HUGE_EFFECTIVE)) {
        snprintf(reason, n, "huge-page host mapping not effective: %s",
                 f->f[PX_FACT_HOST_MAP_HUGE_EFFECTIVE].note);
        return 0;
    }
    if (rsv->value <= 0) {
        snprintf(reason, n, "no huge pages reserved%s",
                 rsv->source == PX_SRC_ENV ? " (hidden by PLEXUS_HUGEPAGES=0)" : "");
        return 0;
    }
    if (free_pages - need->huge_pages_taken < want) {
        snprintf(reason, n, "%lld huge pages free (%lld reserved, %lld taken by other "
                 "collectors), %lld needed", (long long)free_pages, (long long)rsv->value,
                 (long long)need->huge_pages_taken, (long long)want);
        return 0;
    }
    return 1;
}

static px_status huge_alloc(px_chip *chip, char *dev_slice, const px_dfx_need *need,
                            px_dfx_block *b)
{
    void *dev = NULL, *host = NULL;
    px_status st = px_plat_huge_alloc(chip, need->bytes, &dev, &host);

    (void)dev_slice;
    if (st != PX_OK)
        return st;
    b->dev = dev;
    b->host = host;
    b->bytes = need->bytes;
    b->alloc_bytes = need->bytes;
    return PX_OK;
}

static void huge_release(px_chip *chip, px_dfx_block *b)
{
    if (b->dev != NULL)
        px_plat_huge_free(chip, b->dev, b->host, b->bytes);
    b->dev = b->host = NULL;
}

const px_dfx_transport px_dfx_transport_mapped_huge = {
    .name = "mapped_huge",
    .id = PX_DFXT_MAPPED_HUGE,
    .accept = huge_accept,
    .alloc = huge_alloc,
    .release = huge_release,
    .pull = dfx_transport_nop_sync,
    .push = dfx_transport_nop_sync,
};
