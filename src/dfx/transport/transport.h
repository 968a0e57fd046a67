/*
 * transport.h - DFX transports: how the records a device writes reach the host.
 *
 * A transport is a small vtable. accept() compares facts (never probes) and says yes or no
 * with a reason; alloc() gives one collector's buffers their device memory and host view;
 * pull() makes the device-owned part of one buffer visible in the host view before the drain
 * reads it; push() writes the host-owned header line back. Mechanics only: the policy (which
 * transport, in which order, what is logged) lives in select.c.
 *
 *   mapped       the host reads device memory through an ordinary-page host mapping
 *   mapped_huge  the same, carved from one huge-page block (px_plat_huge_alloc)
 *   shadow       no host view: a host copy plus explicit copies (px_plat_copy_d2h/h2d)
 */
#ifndef PX_DFX_TRANSPORT_H
#define PX_DFX_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <plexus/caps.h>
#include <plexus/dfx.h>

#include "platform/platform.h"

#define PX_DFX_REASON_MAX 240

/* What one collector asks of a transport. */
typedef struct px_dfx_need {
    uint32_t nbuffers;        /* buffers this collector contributes to the chip's pool */
    size_t buffer_bytes;      /* header + records, a multiple of the cache line */
    size_t bytes;             /* nbuffers * buffer_bytes */
    int64_t huge_pages_taken; /* huge pages promised to collectors planned before this one */
} px_dfx_need;

/* The memory of one collector's buffers. dev and host views of the same bytes. */
typedef struct px_dfx_block {
    const struct px_dfx_transport *t;
    char *dev;          /* device view (what producers write) */
    char *host;         /* host view: a mapping, or a shadow copy */
    size_t bytes;       /* usable bytes (need->bytes) */
    size_t alloc_bytes; /* bytes actually allocated (huge blocks are rounded up) */
} px_dfx_block;

typedef struct px_dfx_transport {
    const char *name;
    px_dfx_transport_id id;
    /* Returns 1 when this transport can serve need on these facts, else 0 with a reason. */
    int (*accept)(const px_caps *facts, const px_dfx_need *need, char *reason, size_t n);
    /* Gives b its memory; dev_slice is this collector's part of the arena's DFX region. */
    px_status (*alloc)(px_chip *chip, char *dev_slice, const px_dfx_need *need,
                       px_dfx_block *b);
    /* Releases what alloc() took. */
    void (*release)(px_chip *chip, px_dfx_block *b);
    /* Makes [off, off + n) of the block's device view visible in its host view. */
    px_status (*pull)(px_chip *chip, const px_dfx_block *b, size_t off, size_t n);
    /* Writes [off, off + n) of the host view (host-owned lines only) back to the device. */
    px_status (*push)(px_chip *chip, const px_dfx_block *b, size_t off, size_t n);
} px_dfx_transport;

extern const px_dfx_transport px_dfx_transport_mapped;
extern const px_dfx_transport px_dfx_transport_mapped_huge;
extern const px_dfx_transport px_dfx_transport_shadow;

/* pull/push of transports whose host view is the device memory itself: nothing to do. */
px_status dfx_transport_nop_sync(px_chip *chip, const px_dfx_block *b, size_t off, size_t n);

/* ---- selection (select.c) ---- */

typedef struct px_dfx_refusal {
    char name[16];
    char reason[PX_DFX_REASON_MAX];
} px_dfx_refusal;

/* The choice for one collector: the transport and every refusal before it. */
typedef struct px_dfx_choice {
    int transport; /* px_dfx_transport_id, -1 while none */
    int nrefused;
    px_dfx_refusal refused[PX_DFXT_COUNT + 1];
} px_dfx_choice;

/* The transport table in fallback order, NULL-terminated. */
extern const px_dfx_transport *const px_dfx_transports[];

/* Returns the transport with this id, or NULL. */
const px_dfx_transport *px_dfx_transport_get(int id);

/*
 * Sizes the request of each enabled collector for a chip with nproducers producers:
 * need[i] for collector bit i (zeroed for collectors that are off). Returns the total
 * number of buffers.
 */
uint32_t px_dfx_size_needs(const px_config *cfg, uint32_t collectors, int nproducers,
                           px_dfx_need need[PX_DFX_NCOLLECTORS]);

/*
 * Chooses, from facts alone, the transport of every collector in `collectors`, walking the
 * transport table in order, skipping what cfg->dfx_transport does not allow and recording
 * each refusal. Returns PX_OK, or PX_ENOTSUP when the allow-list leaves nothing that
 * accepts (the message names host and device page sizes, the profile's flags, huge pages
 * reserved and free, and how to turn DFX off); every choice is filled even then (transport
 * -1 where nothing is left). Never logs: px_dfx_log_choice does.
 */
px_status px_dfx_plan(const px_caps *caps, const px_config *cfg, uint32_t collectors,
                      int nproducers, px_dfx_choice choice[PX_DFX_NCOLLECTORS]);

/*
 * Allocates collector `ci`'s block following its planned choice; when the chosen transport
 * fails at allocation (huge pages taken meanwhile), records the failure as a refusal and
 * tries the next allowed transport that accepts. Returns PX_OK with b filled, or the last
 * failure.
 */
px_status px_dfx_alloc_block(px_chip *chip, const px_config *cfg, int ci, char *dev_slice,
                             const px_dfx_need *need, px_dfx_choice *choice, px_dfx_block *b);

/* Logs the choice once at info in the shape `dfx[pmu]: via shadow (reason; reason)`. */
void px_dfx_log_choice(const char *collector, const px_dfx_choice *choice);

/* Returns the name of collector bit i ("swimlane"), "?" if invalid. */
const char *px_dfx_collector_name(int i);

#endif
