/*
 * abi.h - the check every versioned public struct (px_config, px_domain_spec) gets before the
 * library reads it, and the import of a px_config.
 *
 * A versioned struct opens with {uint32_t size; uint32_t version;}, set by its initialiser
 * (PX_CONFIG_INIT, px_config_default(), PX_DOMAIN_SPEC_INIT). The library keeps the size of
 * every version it knows; a struct whose size and version are not one of those pairs is
 * refused with a message that says which case it is (never initialised, garbage, or from a
 * newer header than this library) and what to do. An older version's struct is accepted and
 * the caller gives the fields it lacks their defaults.
 */
#ifndef PX_UTIL_ABI_H
#define PX_UTIL_ABI_H

#include <stddef.h>
#include <stdint.h>

#include <plexus/config.h>

/* What a versioned struct's check needs to know about its type. */
typedef struct util_abi_type {
    const char *name;      /* "px_config" */
    const char *init;      /* how to initialise it: "PX_CONFIG_INIT or px_config_default()" */
    const uint32_t *sizes; /* sizes[v - 1]: the size of version v */
    uint32_t versions;     /* versions known: 1 .. versions */
} util_abi_type;

/*
 * Checks the size and version of a struct of type t passed to `who`. Returns PX_OK (the
 * struct is version `version`, of sizes[version - 1] bytes), or PX_EINVAL with the message.
 */
px_status util_abi_check(const util_abi_type *t, const char *who, uint32_t size,
                         uint32_t version);

/*
 * config.c: copies the caller's config c into *out (another struct) as this library's
 * px_config: checks size and version (util_abi_check; `who` names the caller), gives the
 * fields an older c lacks and every unset field (PX_CONFIG_INIT) px_config_default()'s value
 * (environment included; computed only when a field needs one), and sets out's size and
 * version. Returns PX_OK, or PX_EINVAL (message set; *out unspecified).
 */
px_status util_config_import(const px_config *c, px_config *out, const char *who);

/* config.c: knob `name`'s value in c into buf, as px_config_print shows it. Returns PX_OK, or
 * PX_EINVAL for a name of no knob (buf then empty). */
px_status util_config_format(const px_config *c, const char *name, char *buf, size_t n);

#endif
