/*
 * shadow.c - DFX transport `shadow`: no host view of device memory at all. Each collector's
 * buffers live in the arena; the host keeps a copy (the shadow) and moves bytes only with
 * the platform's explicit copies: before draining a buffer, its device-owned header line and
 * filled records are copied device -> host; after draining, only the host-owned header line
 * is copied host -> device, so the host never overwrites what the device owns.
 *
 * Needs nothing from the profile, so it always accepts; it is the last resort of the table.
 */
#include "dfx/transport/transport.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static int shadow_accept(const px_caps *f, const px_dfx_need *need, char *reason, size_t n)
{
    (void)f, (void)need, (void)reason, (void)n;
    return 1;
}

static px_status shadow_alloc(px_chip *chip, char *dev_slice, const px_dfx_need *need,
                              px_dfx_block *b)
{
    char *host = aligned_alloc(PX_CACHELINE, px_align_up(need->bytes, PX_CACHELINE));

    (void)chip;
    if (host == NULL)
        return px_set_error(PX_ENOMEM, "dfx shadow: out of host memory for a %zu-byte shadow "
                            "of the DFX buffers; lower PLEXUS_DFX_BUFFER_RECORDS or "
                            "PLEXUS_DFX_BUFFERS", need->bytes);
    memset(host, 0, need->bytes);
    b->dev = dev_slice;
    b->host = host;
    b->bytes = need->bytes;
    b->alloc_bytes = need->bytes;
    return PX_OK;
}

static void shadow_release(px_chip *chip, px_dfx_block *b)
{
    (void)chip;
    free(b->host);
    b->host = NULL;
}

/* Copies [off, off + n) device -> shadow. Returns the platform's status. */
static px_status shadow_pull(px_chip *chip, const px_dfx_block *b, size_t off, size_t n)
{
    return px_plat_copy_d2h(chip, b->host + off, b->dev + off, n);
}

/* Copies [off, off + n) shadow -> device (the caller passes host-owned lines only). */
static px_status shadow_push(px_chip *chip, const px_dfx_block *b, size_t off, size_t n)
{
    return px_plat_copy_h2d(chip, b->dev + off, b->host + off, n);
}

const px_dfx_transport px_dfx_transport_shadow = {
    .name = "shadow",
    .id = PX_DFXT_SHADOW,
    .accept = shadow_accept,
    .alloc = shadow_alloc,
    .release = shadow_release,
    .pull = shadow_pull,
    .push = shadow_push,
};
