/*
 * plexus/config.h - run-time configuration of a worker.
 *
 * px_config_default() fills every field with its default and then applies the PLEXUS_*
 * environment variables (one table in src/util/config.c lists them all; `plexus doctor
 * --config` prints it). Command-line tools apply their options on top of that.
 *
 * The struct can grow without breaking programs built against an older header: it opens with
 * its size and version, which px_config_default() and PX_CONFIG_INIT set and every function
 * taking a px_config checks first (docs/user-guide.md, "Versioned structs"):
 *   - size 0 or version 0 (never initialised), a size that is not the one of its version
 *     (garbage), or a size or version newer than the library knows (built against a newer
 *     header than the libplexus it runs with) are refused with PX_EINVAL saying which and
 *     what to do;
 *   - an older, smaller struct (an earlier PX_CONFIG_VERSION) is accepted: the fields it
 *     lacks take their defaults, environment included, as if they were left unset.
 * Two ways to start one:
 *     px_config c;  px_config_default(&c);   every field its default, then PLEXUS_*
 *     px_config c = PX_CONFIG_INIT;          every field unset: px_worker_create (and the
 *                                            other calls taking a config) give each unset
 *                                            field what px_config_default() would
 * and then set the fields you want. A field is unset while it holds its type's
 * PX_CONFIG_UNSET_* value (below).
 */
#ifndef PLEXUS_CONFIG_H
#define PLEXUS_CONFIG_H

#include <stdint.h>
#include <stdio.h>
#include <plexus/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PX_PROFILE_NAME_MAX 32

/* The version of px_config this header declares: 1 is the first with size and version; 2
 * adds host_id. */
#define PX_CONFIG_VERSION 2

#define PX_HOST_ID_MAX 48 /* a host id's bytes, its terminating NUL included */

/* "Unset" for each field type (PX_CONFIG_INIT; the library gives the field its default): an
 * integer field holding its sign bit alone, a real -1e308, a string whose first byte is
 * 0xff. Each lies far outside every knob's range, and none is a likely mistake, so a
 * mistaken setting (a -1, (uint32_t)-1, an empty string) is still refused, never taken for
 * "unset". */
#define PX_CONFIG_UNSET_INT INT32_MIN
#define PX_CONFIG_UNSET_U32 UINT32_C(0x80000000)
#define PX_CONFIG_UNSET_U64 UINT64_C(0x8000000000000000)
#define PX_CONFIG_UNSET_REAL (-1e308)
#define PX_CONFIG_UNSET_STR "\xff"

typedef struct px_config {
    uint32_t size;                             /* sizeof(px_config) in the caller's header */
    uint32_t version;                          /* PX_CONFIG_VERSION in the caller's header */
    int level;                                 /* 2: one chip (default); 3: chips per host */
    int cores;                                 /* core threads per chip; 0: online CPUs */
    int chips;                                 /* chips of a level-3 worker (default 2) */
    int subs;                                  /* level 3: host sub-worker processes (PLEXUS_SUBS) */
    char device_profile[PX_PROFILE_NAME_MAX];  /* sim device profile (PLEXUS_DEVICE_PROFILE) */
    uint64_t device_mem;                       /* device arena bytes (PLEXUS_DEVICE_MEM) */
    uint64_t heap_ring;                        /* heap ring bytes (PLEXUS_HEAP_RING) */
    uint32_t task_ring;                        /* task slots, a power of two (PLEXUS_TASK_RING) */
    uint32_t dep_ring;                         /* dependency records (PLEXUS_DEP_RING) */
    double timeout_s;                          /* deadline of every runtime wait */
    uint32_t spin_ns;                          /* spin before sleeping on a futex */
    uint32_t yield_ns;                         /* then poll with sched_yield this long */
    int hugepages;                             /* 0 hides reserved huge pages from the probe */
    int log_level;                             /* 0 error, 1 warn, 2 info, 3 debug */
    int bind;                                  /* PLEXUS_BIND: 0 none (the OS places the
                                                * threads), 1 cores (core i on the i-th
                                                * allowed CPU, the orchestration with core 0) */
    /* DFX (plexus/dfx.h; docs/user-guide.md) */
    uint32_t dfx;                              /* PX_DFX_* collector bits; 0: off (PLEXUS_DFX) */
    char out_dir[256];                         /* DFX output directory (PLEXUS_DFX_OUT) */
    char dfx_transport[64];                    /* allow-list "mapped,shadow"; "": all, in order */
    int dfx_args_level;                        /* argsdump level 1..3 (PLEXUS_DFX_ARGS_LEVEL) */
    int dfx_strict;                            /* 1: a reconcile mismatch fails the run */
    double dfx_backstop_s;                     /* a blocked writer drops records after this */
    uint32_t dfx_buffer_records;               /* records per DFX buffer */
    uint32_t dfx_buffers;                      /* DFX buffers per chip; 0: 2 per producer + 4 */
    uint64_t dfx_args_arena;                   /* argsdump bytes kept per argument */
    /* communication domains (plexus/comm.h) */
    double comm_timeout_s;                     /* default deadline of a comm wait */
    uint64_t comm_oneshot_max;                 /* allreduce: one-shot up to this many bytes */
    int comm_transport;                        /* PLEXUS_COMM_TRANSPORT: 0 auto, 1 direct,
                                                * 2 staged (PX_COMM_TL_*) */
    uint64_t comm_mem_max;                     /* PLEXUS_COMM_MEM_MAX: host bytes one domain's
                                                * windows and staging may take; 0: what the
                                                * host can back now (MemAvailable + SwapFree) */
    /* version 2 */
    char host_id[PX_HOST_ID_MAX];              /* PLEXUS_HOST_ID: what makes two ranks one
                                                * host; "": the hostname and the boot id */
} px_config;

/*
 * A px_config of this header with every field unset (see the top of this file):
 *     px_config c = PX_CONFIG_INIT;  c.level = 3;  c.chips = 4;
 * Fields in declaration order, so C++20 designated initialisers accept it too.
 */
#define PX_CONFIG_INIT                                                                             \
    {                                                                                              \
        .size = sizeof(px_config), .version = PX_CONFIG_VERSION, .level = PX_CONFIG_UNSET_INT,     \
        .cores = PX_CONFIG_UNSET_INT, .chips = PX_CONFIG_UNSET_INT, .subs = PX_CONFIG_UNSET_INT,   \
        .device_profile = PX_CONFIG_UNSET_STR, .device_mem = PX_CONFIG_UNSET_U64,                  \
        .heap_ring = PX_CONFIG_UNSET_U64, .task_ring = PX_CONFIG_UNSET_U32,                        \
        .dep_ring = PX_CONFIG_UNSET_U32, .timeout_s = PX_CONFIG_UNSET_REAL,                        \
        .spin_ns = PX_CONFIG_UNSET_U32, .yield_ns = PX_CONFIG_UNSET_U32,                           \
        .hugepages = PX_CONFIG_UNSET_INT, .log_level = PX_CONFIG_UNSET_INT,                        \
        .bind = PX_CONFIG_UNSET_INT, .dfx = PX_CONFIG_UNSET_U32, .out_dir = PX_CONFIG_UNSET_STR,   \
        .dfx_transport = PX_CONFIG_UNSET_STR, .dfx_args_level = PX_CONFIG_UNSET_INT,               \
        .dfx_strict = PX_CONFIG_UNSET_INT, .dfx_backstop_s = PX_CONFIG_UNSET_REAL,                 \
        .dfx_buffer_records = PX_CONFIG_UNSET_U32, .dfx_buffers = PX_CONFIG_UNSET_U32,             \
        .dfx_args_arena = PX_CONFIG_UNSET_U64, .comm_timeout_s = PX_CONFIG_UNSET_REAL,             \
        .comm_oneshot_max = PX_CONFIG_UNSET_U64, .comm_transport = PX_CONFIG_UNSET_INT,            \
        .comm_mem_max = PX_CONFIG_UNSET_U64, .host_id = PX_CONFIG_UNSET_STR,                       \
    }

/*
 * Fills c with defaults (size and version included: c need not be initialised), then
 * applies PLEXUS_* environment variables. Returns PX_OK, or
 * PX_EINVAL when a variable has a bad value (px_last_error() shows the expected form; the
 * other fields still hold valid values). Unknown PLEXUS_* variables draw a warning.
 */
PX_API px_status px_config_default(px_config *c); /* PX_EINVAL for a NULL c */

/*
 * Sets one knob by its environment name ("PLEXUS_CORES") from text. Returns PX_EINVAL with
 * the expected form on a bad value or any NULL argument, or for a c refused by its size and
 * version (above; an older c refuses a knob whose field it lacks), PX_ENOENT for an unknown
 * name.
 */
PX_API px_status px_config_set(px_config *c, const char *name, const char *value);

/*
 * Checks size and version (above), then every field against the range its PLEXUS_* knob
 * accepts (one table serves both) and the cross-field rules (heap ring inside device
 * memory); an unset field counts as its built-in default. Returns PX_OK, or PX_EINVAL naming
 * the field, its value, the range and the knob; PX_EINVAL for a NULL c.
 */
PX_API px_status px_config_validate(const px_config *c);

/* Prints the knob table (name, value, default, description) to f, an unset field as its
 * built-in default; nothing for NULLs or a c refused by its size and version. */
PX_API void px_config_print(const px_config *c, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
