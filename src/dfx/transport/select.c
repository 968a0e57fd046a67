/*
 * select.c - the policy above the DFX transports: how big each collector's request is,
 * which transport serves it, and what is said about the choice.
 *
 * Every collector's buffers come from here (px_dfx_plan, then px_dfx_alloc_block). The
 * transport table is walked in its fallback order (mapped, mapped_huge, shadow); a transport
 * the allow-list (PLEXUS_DFX_TRANSPORT, --dfx-transport) excludes or whose accept() says no
 * is recorded as a refusal with its reason, and the first that accepts serves. Planning uses
 * facts only, so `plexus doctor` calls the same code and shows the same answer without
 * allocating. When nothing is left, the error names every fact a user needs to fix it.
 */
#include "dfx/transport/transport.h"

#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "util/util.h"

#define DFX_HDR_BYTES 128 /* px_dfx_bufhdr: one device-owned and one host-owned line */

const px_dfx_transport *const px_dfx_transports[] = {
    &px_dfx_transport_mapped,
    &px_dfx_transport_mapped_huge,
    &px_dfx_transport_shadow,
    NULL,
};

_Static_assert(PX_ARRAY_SIZE(px_dfx_transports) == PX_DFXT_COUNT + 1,
               "px_dfx_transports lists every PX_DFX_TRANSPORT_MAP row");

static const char *const dfx_collector_names[] = {
#define DFX_CNAME_(n, b, s) s,
    PX_DFX_COLLECTOR_MAP(DFX_CNAME_)
#undef DFX_CNAME_
};

/* Returns the name of collector bit i, "?" if invalid. */
const char *px_dfx_collector_name(int i)
{
    return i >= 0 && i < (int)PX_ARRAY_SIZE(dfx_collector_names) ? dfx_collector_names[i] : "?";
}

/* Returns the transport with this id, or NULL. */
const px_dfx_transport *px_dfx_transport_get(int id)
{
    return id >= 0 && id < PX_DFXT_COUNT ? px_dfx_transports[id] : NULL;
}

/* Bits (1 << id) of the transports cfg allows; "" allows all. Names were checked by config. */
static uint32_t dfx_allowed(const px_config *cfg)
{
    uint32_t bits = 0;
    const char *p = cfg->dfx_transport;

    if (p[0] == '\0' || strcmp(p, "auto") == 0)
        return (1u << PX_DFXT_COUNT) - 1;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");

        for (int i = 0; i < PX_DFXT_COUNT; i++)
            if (strlen(px_dfx_transports[i]->name) == len &&
                strncmp(px_dfx_transports[i]->name, p, len) == 0)
                bits |= 1u << i;
        p += len + (p[len] == ',');
    }
    return bits;
}

/* Returns the total number of buffers (see transport.h). */
uint32_t px_dfx_size_needs(const px_config *cfg, uint32_t collectors, int nproducers,
                           px_dfx_need need[PX_DFX_NCOLLECTORS])
{
    uint32_t total = cfg->dfx_buffers ? cfg->dfx_buffers : 4u * (uint32_t)nproducers + 8;
    uint32_t k = (uint32_t)__builtin_popcount(collectors & PX_DFX_ALL), per, sum = 0;
    size_t bb = DFX_HDR_BYTES + (size_t)cfg->dfx_buffer_records * 32;

    if (total < (uint32_t)nproducers + 2)
        total = (uint32_t)nproducers + 2; /* every producer holds one, the drain one more */
    per = k ? (total + k - 1) / k : 0;
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++) {
        memset(&need[i], 0, sizeof(need[i]));
        if (!(collectors & (1u << i)))
            continue;
        need[i].nbuffers = per;
        need[i].buffer_bytes = bb;
        need[i].bytes = bb * per;
        sum += per;
    }
    return sum;
}

static void dfx_refuse(px_dfx_choice *c, const char *name, const char *reason)
{
    px_dfx_refusal *r;

    if (c->nrefused >= (int)PX_ARRAY_SIZE(c->refused))
        return;
    r = &c->refused[c->nrefused++];
    snprintf(r->name, sizeof(r->name), "%s", name);
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
}

/* Huge pages a collector served by mapped_huge takes from the pool. */
static int64_t dfx_huge_pages(const px_caps *caps, const px_dfx_need *need)
{
    int64_t ps = px_caps_get(caps, PX_FACT_HUGE_PAGE_SIZE);

    return ps > 0 ? (int64_t)((need->bytes + (size_t)ps - 1) / (size_t)ps) : 0;
}

/*
 * Walks the table from transport `from` for one collector; returns the first allowed
 * transport that accepts (refusals recorded in c), or -1.
 */
static int dfx_choose(const px_caps *caps, uint32_t allowed, const char *list,
                      const px_dfx_need *need, int from, px_dfx_choice *c)
{
    char why[PX_DFX_REASON_MAX];

    for (int i = from; i < PX_DFXT_COUNT; i++) {
        const px_dfx_transport *t = px_dfx_transports[i];

        if (!(allowed & (1u << i))) {
            snprintf(why, sizeof(why), "not in the allow-list \"%s\" (PLEXUS_DFX_TRANSPORT, "
                     "--dfx-transport)", list);
            dfx_refuse(c, t->name, why);
            continue;
        }
        why[0] = '\0';
        if (t->accept(caps, need, why, sizeof(why)))
            return i;
        dfx_refuse(c, t->name, why[0] ? why : "refused");
    }
    return -1;
}

/* The error when a collector has no transport left; returns PX_ENOTSUP. */
static px_status dfx_nothing_left(const px_caps *caps, const char *list, const char *coll,
                                  const px_dfx_choice *c)
{
    char refusals[768] = "";
    size_t used = 0;
    const px_fact *rsv = &caps->f[PX_FACT_HUGE_PAGES_RESERVED];

    for (int i = 0; i < c->nrefused && used < sizeof(refusals); i++)
        used += (size_t)snprintf(refusals + used, sizeof(refusals) - used, "%s%s: %s",
                                 i ? "; " : "", c->refused[i].name, c->refused[i].reason);
    return px_set_error(
        PX_ENOTSUP,
        "dfx[%s]: no DFX transport is left by the allow-list \"%s\" (--dfx-transport, "
        "PLEXUS_DFX_TRANSPORT): %s. Facts: host page %lld, device page %lld, profile %s "
        "(bar_mem=%lld, bar_huge_mem=%lld, host_map_effective=%lld, "
        "host_map_huge_effective=%lld), huge pages reserved %lld%s, free %lld. Allow "
        "`shadow` (it needs no mapping), reserve huge pages for `mapped_huge`, or turn DFX "
        "off with --dfx 0 / PLEXUS_DFX=0",
        coll, list[0] ? list : "auto", refusals,
        (long long)px_caps_get(caps, PX_FACT_HOST_PAGE_SIZE),
        (long long)px_caps_get(caps, PX_FACT_DEVICE_PAGE_SIZE),
        caps->f[PX_FACT_DEVICE_PROFILE].text, (long long)px_caps_get(caps, PX_FACT_BAR_MEM),
        (long long)px_caps_get(caps, PX_FACT_BAR_HUGE_MEM),
        (long long)px_caps_get(caps, PX_FACT_HOST_MAP_EFFECTIVE),
        (long long)px_caps_get(caps, PX_FACT_HOST_MAP_HUGE_EFFECTIVE), (long long)rsv->value,
        rsv->source == PX_SRC_ENV ? " (hidden by PLEXUS_HUGEPAGES=0)" : "",
        (long long)px_caps_get(caps, PX_FACT_HUGE_PAGES_FREE));
}

/* Returns PX_OK, or PX_ENOTSUP when a collector has no transport left (see transport.h). */
px_status px_dfx_plan(const px_caps *caps, const px_config *cfg, uint32_t collectors,
                      int nproducers, px_dfx_choice choice[PX_DFX_NCOLLECTORS])
{
    px_dfx_need need[PX_DFX_NCOLLECTORS];
    uint32_t allowed = dfx_allowed(cfg);
    int64_t taken = 0;
    int failed = -1;

    px_dfx_size_needs(cfg, collectors, nproducers, need);
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++) {
        px_dfx_choice *c = &choice[i];

        memset(c, 0, sizeof(*c));
        c->transport = -1;
        if (!(collectors & (1u << i)))
            continue;
        need[i].huge_pages_taken = taken;
        c->transport = dfx_choose(caps, allowed, cfg->dfx_transport, &need[i], 0, c);
        if (c->transport < 0 && failed < 0)
            failed = i;
        if (c->transport == PX_DFXT_MAPPED_HUGE)
            taken += dfx_huge_pages(caps, &need[i]);
    }
    if (failed >= 0)
        return dfx_nothing_left(caps, cfg->dfx_transport, px_dfx_collector_name(failed),
                                &choice[failed]);
    return PX_OK;
}

/* Returns PX_OK with b filled, or the status of the last failed allocation. */
px_status px_dfx_alloc_block(px_chip *chip, const px_config *cfg, int ci, char *dev_slice,
                             const px_dfx_need *need, px_dfx_choice *choice, px_dfx_block *b)
{
    const px_caps *caps = px_plat_caps(chip);
    uint32_t allowed = dfx_allowed(cfg);
    char why[PX_DFX_REASON_MAX];
    px_status st = PX_ENOTSUP;
    int i = choice->transport;

    while (i >= 0) {
        const px_dfx_transport *t = px_dfx_transports[i];

        memset(b, 0, sizeof(*b));
        st = t->alloc(chip, dev_slice, need, b);
        if (st == PX_OK) {
            b->t = t;
            choice->transport = i;
            return PX_OK;
        }
        snprintf(why, sizeof(why), "allocation failed: %s", px_last_error());
        dfx_refuse(choice, t->name, why);
        PX_LOG_DEBUG("dfx[%s]: %s refused: %s", px_dfx_collector_name(ci), t->name, why);
        i = dfx_choose(caps, allowed, cfg->dfx_transport, need, i + 1, choice);
    }
    choice->transport = -1;
    return dfx_nothing_left(caps, cfg->dfx_transport, px_dfx_collector_name(ci), choice);
}

/* Logs `dfx[<collector>]: via <t> (<reason>; <reason>)` once, refusals at debug. */
void px_dfx_log_choice(const char *collector, const px_dfx_choice *c)
{
    char why[768] = "";
    size_t used = 0;
    const px_dfx_transport *t = px_dfx_transport_get(c->transport);

    for (int i = 0; i < c->nrefused; i++) {
        PX_LOG_DEBUG("dfx[%s]: %s refused: %s", collector, c->refused[i].name,
                     c->refused[i].reason);
        if (used < sizeof(why))
            used += (size_t)snprintf(why + used, sizeof(why) - used, "%s%s", i ? "; " : "",
                                     c->refused[i].reason);
    }
    if (c->nrefused > 0)
        PX_LOG_INFO("dfx[%s]: via %s (%s)", collector, t ? t->name : "none", why);
    else
        PX_LOG_INFO("dfx[%s]: via %s", collector, t ? t->name : "none");
}
