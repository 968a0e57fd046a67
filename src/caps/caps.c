/*
 * caps.c - the capability probe's entry points.
 *
 * px_caps_probe_with() checks the device profile first (so a bad name changes nothing), then
 * fills the host and MPI facts, applies the environment overrides (which may only remove a
 * capability) and finally the device profile with its derived effective flags. Every fact
 * ends up with a value, a source and a note; a fact the host does not let us read is absent
 * (value 0) with a note saying why, never an error.
 */
#include <plexus/caps.h>

#include <stdarg.h>
#include <string.h>

#include "caps/caps_internal.h"
#include "util/abi.h"
#include "util/log.h"

static const char *const caps_fact_names[PX_FACT_COUNT] = {
#define PX_FACT_NAME_(e, n, k) [e] = n,
    PX_FACT_MAP(PX_FACT_NAME_)
#undef PX_FACT_NAME_
};

static const char *const caps_source_names[] = {
    [PX_SRC_OS] = "os",
    [PX_SRC_PROFILE] = "profile",
    [PX_SRC_DERIVED] = "derived",
    [PX_SRC_MPI] = "mpi",
    [PX_SRC_ENV] = "env",
};

/* Returns the fact's JSON name, or "?" for an id outside the table. */
const char *px_fact_name(px_fact_id id)
{
    if ((unsigned)id >= PX_FACT_COUNT)
        return "?";
    return caps_fact_names[id];
}

/* Returns the source's name ("os"), or "?" for a value outside the enum. */
const char *px_fact_source_name(px_fact_source s)
{
    if ((unsigned)s >= sizeof(caps_source_names) / sizeof(caps_source_names[0]))
        return "?";
    return caps_source_names[s];
}

/* Returns the value of a B or I fact; 0 for an S fact, a NULL table or an invalid id. */
int64_t px_caps_get(const px_caps *caps, px_fact_id id)
{
    if (caps == NULL || (unsigned)id >= PX_FACT_COUNT)
        return 0;
    return caps->f[id].value;
}

static void caps_fact_vnote(px_fact *f, px_fact_source src, const char *fmt, va_list ap)
{
    f->source = (uint8_t)src;
    vsnprintf(f->note, sizeof(f->note), fmt, ap);
}

/* Sets a B or I fact: value, source and note (the text is cleared). */
void caps_fact_set(px_caps *c, px_fact_id id, int64_t value, px_fact_source src,
                   const char *fmt, ...)
{
    px_fact *f = &c->f[id];
    va_list ap;

    f->value = value;
    f->text[0] = '\0';
    va_start(ap, fmt);
    caps_fact_vnote(f, src, fmt, ap);
    va_end(ap);
}

/* Sets an S fact: text (truncated to fit), source and note; the value is 0. */
void caps_fact_set_text(px_caps *c, px_fact_id id, const char *text, px_fact_source src,
                        const char *fmt, ...)
{
    px_fact *f = &c->f[id];
    va_list ap;

    f->value = 0;
    snprintf(f->text, sizeof(f->text), "%s", text);
    va_start(ap, fmt);
    caps_fact_vnote(f, src, fmt, ap);
    va_end(ap);
}

/* PLEXUS_HUGEPAGES=0 hides the reserved huge pages; nothing can make absent pages appear. */
static void caps_apply_env(const px_config *cfg, px_caps *c)
{
    int64_t reserved = c->f[PX_FACT_HUGE_PAGES_RESERVED].value;
    int64_t free_pages = c->f[PX_FACT_HUGE_PAGES_FREE].value;

    if (cfg->hugepages != 0)
        return;
    caps_fact_set(c, PX_FACT_HUGE_PAGES_RESERVED, 0, PX_SRC_ENV,
                  "hidden by PLEXUS_HUGEPAGES=0 (%lld reserved)", (long long)reserved);
    caps_fact_set(c, PX_FACT_HUGE_PAGES_FREE, 0, PX_SRC_ENV,
                  "hidden by PLEXUS_HUGEPAGES=0 (%lld free)", (long long)free_pages);
}

/*
 * The host's identity, what makes two ranks one host (several hosts under MPI): PLEXUS_HOST_ID
 * when set, else the hostname and the first 8 characters of the boot id (two containers of
 * one machine share the boot id; two machines may share a hostname, not both).
 */
static void caps_host_id(const px_config *cfg, px_caps *c)
{
    char id[PX_FACT_TEXT_MAX];
    const char *host = c->f[PX_FACT_HOSTNAME].text, *boot = c->f[PX_FACT_BOOT_ID].text;

    if (cfg->host_id[0] != '\0') {
        caps_fact_set_text(c, PX_FACT_HOST_ID, cfg->host_id, PX_SRC_ENV, "PLEXUS_HOST_ID");
        return;
    }
    snprintf(id, sizeof(id), "%.40s-%.8s", host[0] ? host : "unknown", boot[0] ? boot : "noboot");
    caps_fact_set_text(c, PX_FACT_HOST_ID, id, PX_SRC_DERIVED,
                       "hostname-boot id%s (PLEXUS_HOST_ID overrides)",
                       host[0] && boot[0] ? "" : ", one of them unknown");
}

/* Returns PX_OK, or PX_EINVAL for a NULL argument or an unknown device profile. */
px_status px_caps_probe_with(const px_config *user, px_caps *caps)
{
    px_config c;
    const px_config *cfg = &c;
    px_caps tmp;
    px_status st;

    if (user == NULL || caps == NULL)
        return px_set_error(PX_EINVAL, "px_caps_probe_with: config and caps must not be NULL");
    if ((st = util_config_import(user, &c, "px_caps_probe_with")) != PX_OK)
        return st;
    st = caps_profile_check(cfg->device_profile);
    if (st != PX_OK)
        return st;
    memset(&tmp, 0, sizeof(tmp));
    caps_probe_host(&tmp);
    caps_probe_mpi(&tmp);
    caps_apply_env(cfg, &tmp);
    caps_host_id(cfg, &tmp);
    caps_apply_profile(&tmp, cfg->device_profile);
    *caps = tmp;
    PX_LOG_DEBUG("caps: probed with device profile %s", cfg->device_profile);
    return PX_OK;
}

/*
 * Returns PX_OK; PX_EINVAL when a PLEXUS_* variable has a bad value or names an unknown
 * profile (px_last_error() says which).
 */
px_status px_caps_probe(px_caps *caps)
{
    px_config cfg;
    px_status st;

    if (caps == NULL)
        return px_set_error(PX_EINVAL, "px_caps_probe: caps must not be NULL");
    st = px_config_default(&cfg);
    if (st != PX_OK)
        return st;
    return px_caps_probe_with(&cfg, caps);
}
