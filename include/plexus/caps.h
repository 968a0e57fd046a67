/*
 * plexus/caps.h - the capability probe.
 *
 * px_caps_probe() fills a plain, fixed-size table of facts (no pointers, so it can be
 * exchanged as bytes between ranks). Every fact has a value, a source and a note that says
 * how it was found or why it is absent. Device facts come from the sim platform's device
 * profile (the stand-in for a driver's capability report); both the profile's raw flags and
 * the effective flags derived from them are kept. Environment overrides may only remove a
 * capability, never invent one. Selection code compares facts; it never probes.
 */
#ifndef PLEXUS_CAPS_H
#define PLEXUS_CAPS_H

#include <stdint.h>
#include <stdio.h>
#include <plexus/config.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(enum, json name, kind) - kind: B boolean, I integer, S string. Order is print order. */
#define PX_FACT_MAP(X)                                                                     \
    X(PX_FACT_HOST_PAGE_SIZE, "host_page_size", I)                                         \
    X(PX_FACT_HUGE_PAGE_SIZE, "huge_page_size", I)                                         \
    X(PX_FACT_HUGE_PAGES_RESERVED, "huge_pages_reserved", I)                               \
    X(PX_FACT_HUGE_PAGES_FREE, "huge_pages_free", I)                                       \
    X(PX_FACT_THP_MODE, "thp_mode", S)                                                     \
    X(PX_FACT_MEMFD, "memfd", B)                                                           \
    X(PX_FACT_MEMFD_HUGETLB, "memfd_hugetlb", B)                                           \
    X(PX_FACT_SHM_FREE_BYTES, "shm_free_bytes", I)                                         \
    X(PX_FACT_PROCESS_VM_READV, "process_vm_readv", B)                                     \
    X(PX_FACT_PERF_HW, "perf_hw", B)                                                       \
    X(PX_FACT_PERF_SW, "perf_sw", B)                                                       \
    X(PX_FACT_TSC_INVARIANT, "tsc_invariant", B)                                           \
    X(PX_FACT_ONLINE_CPUS, "online_cpus", I)                                               \
    X(PX_FACT_HOSTNAME, "hostname", S)                                                     \
    X(PX_FACT_BOOT_ID, "boot_id", S)                                                       \
    X(PX_FACT_HOST_ID, "host_id", S)                                                       \
    X(PX_FACT_MPI_LIBRARY, "mpi_library", B)                                               \
    X(PX_FACT_MPI_LAUNCHED, "mpi_launched", B)                                             \
    X(PX_FACT_MPI_INITIALIZED, "mpi_initialized", B)                                       \
    X(PX_FACT_DEVICE_PROFILE, "device_profile", S)                                         \
    X(PX_FACT_DEVICE_PAGE_SIZE, "device_page_size", I)                                     \
    X(PX_FACT_PEER_MAP, "peer_map", B)                                                     \
    X(PX_FACT_PEER_MAP_GROUP, "peer_map_group", I)                                         \
    X(PX_FACT_BAR_MEM, "bar_mem", B)                                                       \
    X(PX_FACT_BAR_HUGE_MEM, "bar_huge_mem", B)                                             \
    X(PX_FACT_PEER_MAP_EFFECTIVE, "peer_map_effective", B)                                 \
    X(PX_FACT_HOST_MAP_EFFECTIVE, "host_map_effective", B)                                 \
    X(PX_FACT_HOST_MAP_HUGE_EFFECTIVE, "host_map_huge_effective", B)

typedef enum px_fact_id {
#define PX_FACT_ENUM_(e, n, k) e,
    PX_FACT_MAP(PX_FACT_ENUM_)
#undef PX_FACT_ENUM_
    PX_FACT_COUNT
} px_fact_id;

typedef enum px_fact_source {
    PX_SRC_OS = 0,  /* read from the operating system */
    PX_SRC_PROFILE, /* the device profile's raw flag */
    PX_SRC_DERIVED, /* computed from other facts (effective flags) */
    PX_SRC_MPI,     /* from the MPI library or launcher */
    PX_SRC_ENV      /* an environment override removed it */
} px_fact_source;

#define PX_FACT_TEXT_MAX 64
#define PX_FACT_NOTE_MAX 160

typedef struct px_fact {
    int64_t value;                /* B and I kinds */
    char text[PX_FACT_TEXT_MAX];  /* S kind */
    uint8_t source;               /* px_fact_source */
    char note[PX_FACT_NOTE_MAX];  /* how it was found, or why it is absent */
} px_fact;

typedef struct px_caps {
    px_fact f[PX_FACT_COUNT];
} px_caps;

/* Probes with px_config_default() settings (PLEXUS_DEVICE_PROFILE, PLEXUS_HUGEPAGES). */
PX_API px_status px_caps_probe(px_caps *caps);

/*
 * Probes using c's device profile and overrides. Returns PX_EINVAL for an unknown profile
 * (the message lists the valid names); a host fact that cannot be read is reported absent
 * with a note, not as an error.
 */
PX_API px_status px_caps_probe_with(const px_config *c, px_caps *caps);

/* Value of a B or I fact. */
PX_API int64_t px_caps_get(const px_caps *caps, px_fact_id id);

/* Name of a fact ("host_page_size"), "?" if invalid. */
PX_API const char *px_fact_name(px_fact_id id);

/* Name of a source ("os"). */
PX_API const char *px_fact_source_name(px_fact_source s);

/* Writes the table as one JSON object: {"facts": {"name": {"value":..,"source":..,"note":..}}}. */
PX_API px_status px_caps_write_json(const px_caps *caps, FILE *f);

/* Prints the table as aligned text: fact, value, source, note. */
PX_API void px_caps_print(const px_caps *caps, FILE *f);

/* Names of the built-in device profiles, NULL-terminated. */
PX_API const char *const *px_device_profiles(void);

#ifdef __cplusplus
}
#endif
#endif
