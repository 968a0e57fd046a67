/*
 * config.c - the one table of PLEXUS_* knobs: name, default, description, parser.
 *
 * px_config_default() applies the defaults and then the environment. A bad value is an error
 * that shows the expected form; an unknown PLEXUS_* variable draws a warning (a typo should
 * never be silently ignored); every override is echoed at info.
 */
#include <plexus/config.h>
#include <plexus/dfx.h>

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/tl_list.h" /* the transports' names: data only */
#include "log.h"
#include "util.h"
#include "util/abi.h"
#include "util/fault.h"

extern char **environ;

typedef px_status (*px_knob_parse_fn)(void *field, const char *name, const char *text);

typedef struct px_knob {
    const char *name;      /* environment variable */
    size_t offset;         /* of the field in px_config; SIZE_MAX: validated, not stored */
    const char *dflt;      /* default, as text (parsed like any value) */
    const char *form;      /* expected form, shown on error */
    px_knob_parse_fn parse;
    const char *doc;
} px_knob;

#define PX_NOFIELD ((size_t)-1)

static px_status px_bad_value(const char *name, const char *text, const char *form)
{
    return px_set_error(PX_EINVAL, "%s=\"%s\" is not valid: expected %s", name, text, form);
}

/*
 * The text rules every knob shares: a value never has leading or trailing whitespace (checked
 * once, in px_knob_apply, for every knob), and numbers are decimal: integers are an optional
 * '-' and digits (no '+', no 0x, no exponent); seconds are digits with an optional fraction
 * and exponent (no hex, inf or nan). No knob documents hex.
 */
static int px_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int px_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Returns 1 when text is a decimal real: digits, optionally '.' digits, optionally e[+-]digits. */
static int px_is_decimal_real(const char *t)
{
    int digits = 0;

    for (; px_is_digit(*t); t++)
        digits++;
    if (*t == '.')
        for (t++; px_is_digit(*t); t++)
            digits++;
    if (digits == 0)
        return 0;
    if (*t == 'e' || *t == 'E') {
        t += (t[1] == '+' || t[1] == '-') ? 2 : 1;
        if (!px_is_digit(*t))
            return 0;
        while (px_is_digit(*t))
            t++;
    }
    return *t == '\0';
}

/* ---- the ranges: what each numeric knob accepts, and so what px_config_validate accepts ---- */

typedef enum { PX_R_INT, PX_R_U32, PX_R_U64, PX_R_DBL } px_range_kind;

typedef struct px_range {
    const char *name;   /* the knob */
    const char *field;  /* its field in px_config */
    size_t offset;      /* of that field */
    px_range_kind kind; /* the field's type */
    int64_t lo, hi;     /* inclusive; for PX_R_DBL: lo is in thousandths, 0 meaning
                         * "above 0" */
    int pow2;           /* the value must also be a power of two */
} px_range;

#define PX_RF(field) #field, offsetof(px_config, field)

static const px_range px_ranges[] = {
    {"PLEXUS_LOG", PX_RF(log_level), PX_R_INT, 0, 3, 0},
    {"PLEXUS_LEVEL", PX_RF(level), PX_R_INT, 2, 3, 0},
    {"PLEXUS_CORES", PX_RF(cores), PX_R_INT, 0, 1024, 0},
    {"PLEXUS_CHIPS", PX_RF(chips), PX_R_INT, 1, 64, 0},
    {"PLEXUS_SUBS", PX_RF(subs), PX_R_INT, 0, 64, 0},
    {"PLEXUS_DEVICE_MEM", PX_RF(device_mem), PX_R_U64, 1, INT64_MAX, 0},
    {"PLEXUS_HEAP_RING", PX_RF(heap_ring), PX_R_U64, 1, INT64_MAX, 0},
    {"PLEXUS_TASK_RING", PX_RF(task_ring), PX_R_U32, 64, 1 << 24, 1},
    {"PLEXUS_DEP_RING", PX_RF(dep_ring), PX_R_U32, 1024, 1 << 28, 0},
    {"PLEXUS_TIMEOUT_S", PX_RF(timeout_s), PX_R_DBL, 0, 10000000, 0},
    {"PLEXUS_SPIN_NS", PX_RF(spin_ns), PX_R_U32, 0, 1000000, 0},
    {"PLEXUS_YIELD_NS", PX_RF(yield_ns), PX_R_U32, 0, 1000000, 0},
    {"PLEXUS_HUGEPAGES", PX_RF(hugepages), PX_R_INT, 0, 1, 0},
    {"PLEXUS_BIND", PX_RF(bind), PX_R_INT, 0, 1, 0},
    {"PLEXUS_DFX_ARGS_LEVEL", PX_RF(dfx_args_level), PX_R_INT, 1, 3, 0},
    {"PLEXUS_DFX_ARGS_ARENA", PX_RF(dfx_args_arena), PX_R_U64, 1, INT64_MAX, 0},
    {"PLEXUS_DFX_STRICT", PX_RF(dfx_strict), PX_R_INT, 0, 1, 0},
    {"PLEXUS_DFX_BACKSTOP_S", PX_RF(dfx_backstop_s), PX_R_DBL, 0, 10000000, 0},
    {"PLEXUS_DFX_BUFFER_RECORDS", PX_RF(dfx_buffer_records), PX_R_U32, 8, 1 << 20, 0},
    {"PLEXUS_DFX_BUFFERS", PX_RF(dfx_buffers), PX_R_U32, 0, 65536, 0},
    /* 10 ms at least: a shorter deadline fails waits that are merely descheduled */
    {"PLEXUS_COMM_TIMEOUT_S", PX_RF(comm_timeout_s), PX_R_DBL, 10, 10000000, 0},
    {"PLEXUS_COMM_ONESHOT_MAX", PX_RF(comm_oneshot_max), PX_R_U64, 1, 1 << 30, 0},
    {"PLEXUS_COMM_TRANSPORT", PX_RF(comm_transport), PX_R_INT, 0, PX_COMM_TL_COUNT - 1, 0},
    {"PLEXUS_COMM_MEM_MAX", PX_RF(comm_mem_max), PX_R_U64, 0, INT64_MAX, 0},
    {"PLEXUS_TEST_SLACK", "", (size_t)-1, PX_R_DBL, 0, 10000000, 0}, /* no field: PX_NOFIELD */
};

/* Returns the range of knob `name` (every numeric knob has one). */
static const px_range *px_range_of(const char *name)
{
    for (size_t i = 0; i < sizeof(px_ranges) / sizeof(px_ranges[0]); i++)
        if (strcmp(px_ranges[i].name, name) == 0)
            return &px_ranges[i];
    return NULL;
}

/* 1 when the double v lies in r (above 0 when r->lo is 0, at most r->hi). */
static int px_range_has_dbl(const px_range *r, double v)
{
    return isfinite(v) && (r->lo == 0 ? v > 0 : v >= (double)r->lo / 1000) &&
           v <= (double)r->hi;
}

/* "above 0 and at most" or "from 0.01 to": a PX_R_DBL range in words, up to its high end. */
static const char *px_range_dbl_low(const px_range *r, char *buf, size_t n)
{
    if (r->lo == 0)
        snprintf(buf, n, "above 0 and at most");
    else
        snprintf(buf, n, "from %g to", (double)r->lo / 1000);
    return buf;
}

/* Checks field r of c; returns PX_OK or PX_EINVAL naming the field, value, range and knob. */
static px_status px_range_check(const px_config *c, const px_range *r)
{
    const char *f = (const char *)c + r->offset;
    const char *field = r->field;
    int64_t v;

    if (r->kind == PX_R_DBL) {
        double d = *(const double *)(const void *)f;

        if (px_range_has_dbl(r, d))
            return PX_OK;
        char low[32];

        return px_set_error(PX_EINVAL, "config %s %g is out of range: expected a number %s "
                            "%lld (what %s accepts)", field, d,
                            px_range_dbl_low(r, low, sizeof(low)), (long long)r->hi, r->name);
    }
    if (r->kind == PX_R_U64) {
        uint64_t u = *(const uint64_t *)(const void *)f;

        if (u >= (uint64_t)r->lo && u <= (uint64_t)r->hi)
            return PX_OK;
        return px_set_error(PX_EINVAL, "config %s %llu is out of range: expected %lld..%lld "
                            "bytes (what %s accepts)", field, (unsigned long long)u,
                            (long long)r->lo, (long long)r->hi, r->name);
    }
    if (r->kind == PX_R_INT)
        v = *(const int *)(const void *)f;
    else
        v = *(const uint32_t *)(const void *)f;
    if (v >= r->lo && v <= r->hi && (!r->pow2 || (v & (v - 1)) == 0))
        return PX_OK;
    return px_set_error(PX_EINVAL, "config %s %lld is out of range: expected %s%lld..%lld (what "
                        "%s accepts)", field, (long long)v, r->pow2 ? "a power of two " : "",
                        (long long)r->lo, (long long)r->hi, r->name);
}

static px_status px_parse_i64(const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v;

    if (!px_is_digit(text[text[0] == '-']))
        return PX_EINVAL; /* not decimal: a sign other than '-', a space, or nothing */
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < lo || v > hi)
        return PX_EINVAL;
    *out = v;
    return PX_OK;
}

/* Parses "123", "64K", "256M", "1G" (powers of 1024) into bytes. */
static px_status px_parse_size(const char *text, uint64_t *out)
{
    char *end;
    unsigned long long v;
    uint64_t mul = 1;

    errno = 0;
    if (!px_is_digit(text[0]))
        return PX_EINVAL; /* a sign, a space or nothing */
    v = strtoull(text, &end, 10);
    if (errno || end == text)
        return PX_EINVAL;
    switch (*end) {
    case '\0':
        break;
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default:
        return PX_EINVAL;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end += (*end == 'i' && (end[1] == 'B' || end[1] == 'b')) ? 2 : 1;
    if (*end != '\0' || v > UINT64_MAX / mul)
        return PX_EINVAL;
    *out = v * mul;
    return PX_OK;
}

static px_status px_knob_log(void *field, const char *name, const char *text)
{
    int lvl = px_log_parse_level(text);

    if (lvl < 0)
        return px_bad_value(name, text, "one of error, warn, info, debug");
    *(int *)field = lvl;
    return PX_OK;
}

static px_status px_knob_profile(void *field, const char *name, const char *text)
{
    if (text[0] == '\0' || strlen(text) >= PX_PROFILE_NAME_MAX)
        return px_bad_value(name, text, "a device profile name (see `plexus doctor --help`)");
    strcpy((char *)field, text);
    return PX_OK;
}

/* 1 when text is a host id: 1..PX_HOST_ID_MAX-1 bytes of letters, digits and . _ : - */
static int px_host_id_ok(const char *text)
{
    size_t n = strlen(text);

    if (n == 0 || n >= PX_HOST_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= 'A' && text[i] <= 'Z') ||
              (text[i] >= '0' && text[i] <= '9') || strchr("._:-", text[i]) != NULL))
            return 0;
    return 1;
}

/* PLEXUS_HOST_ID: empty (the hostname and the boot id) or a host id. */
static px_status px_knob_host_id(void *field, const char *name, const char *text)
{
    if (text[0] != '\0' && !px_host_id_ok(text))
        return px_bad_value(name, text, "a host id of 1..47 letters, digits and . _ : - "
                            "(or empty: the hostname and the boot id)");
    strcpy((char *)field, text);
    return PX_OK;
}

/* PLEXUS_COMM_TRANSPORT: auto or a transport of the one list (util/tl_list.h). */
static px_status px_knob_comm_tl(void *field, const char *name, const char *text)
{
    int id = px_comm_tl_parse(text);

    if (id < 0)
        return px_bad_value(name, text, "one of " PX_COMM_TL_CHOICES);
    *(int *)field = id;
    return PX_OK;
}

/* PLEXUS_MPI (no field: mpi/mpi_load.c reads it where the worker decides). */
static px_status px_knob_mpi(void *field, const char *name, const char *text)
{
    (void)field;
    if (strcmp(text, "auto") == 0 || strcmp(text, "on") == 0 || strcmp(text, "off") == 0 ||
        text[0] == '\0')
        return PX_OK;
    return px_bad_value(name, text, "auto, on or off");
}

/* PLEXUS_TEST_FAULT: checked here, read by each chip process (util/fault.h). */
static px_status px_knob_fault(void *field, const char *name, const char *text)
{
    px_fault_spec f;

    (void)field;
    (void)name;
    return text[0] == '\0' ? PX_OK : px_fault_parse(text, &f);
}

/* A file path knob without a field (PLEXUS_MPI_PLUGIN). */
static px_status px_knob_path(void *field, const char *name, const char *text)
{
    (void)field;
    if (strlen(text) >= 512)
        return px_bad_value(name, text, "a file path of at most 511 bytes (or empty)");
    return PX_OK;
}

static px_status px_knob_bind(void *field, const char *name, const char *text)
{
    if (strcmp(text, "none") == 0 || strcmp(text, "cores") == 0) {
        *(int *)field = text[0] == 'c';
        return PX_OK;
    }
    return px_bad_value(name, text, "none or cores");
}

static px_status px_knob_int(void *field, const char *name, const char *text, const char *form)
{
    const px_range *r = px_range_of(name);
    int64_t v;

    if (px_parse_i64(text, r->lo, r->hi, &v) != PX_OK)
        return px_bad_value(name, text, form);
    *(int *)field = (int)v;
    return PX_OK;
}

static px_status px_knob_cores(void *field, const char *name, const char *text)
{
    return px_knob_int(field, name, text, "an integer 0..1024 (0: online CPUs)");
}

static px_status px_knob_chips(void *field, const char *name, const char *text)
{
    return px_knob_int(field, name, text, "an integer 1..64");
}

static px_status px_knob_subs(void *field, const char *name, const char *text)
{
    return px_knob_int(field, name, text, "an integer 0..64 (0: host tasks run in the "
                       "parent process)");
}

static px_status px_knob_level(void *field, const char *name, const char *text)
{
    return px_knob_int(field, name, text, "2 or 3");
}

static px_status px_knob_bool(void *field, const char *name, const char *text)
{
    return px_knob_int(field, name, text, "0 or 1");
}

static px_status px_knob_bytes(void *field, const char *name, const char *text)
{
    const px_range *r = px_range_of(name);
    uint64_t v;

    if (px_parse_size(text, &v) != PX_OK || v < (uint64_t)r->lo || v > (uint64_t)r->hi) {
        char form[192];

        snprintf(form, sizeof(form), "a decimal byte size %llu..%llu, optionally with K, M or G "
                 "(powers of 1024; also k, KB, KiB), such as 1048576, 64K, 256M or 1G",
                 (unsigned long long)r->lo, (unsigned long long)r->hi);
        return px_bad_value(name, text, form);
    }
    *(uint64_t *)field = v;
    return PX_OK;
}

static px_status px_knob_slots(void *field, const char *name, const char *text)
{
    const px_range *r = px_range_of(name);
    int64_t v;

    if (px_parse_i64(text, r->lo, r->hi, &v) != PX_OK || (v & (v - 1)) != 0)
        return px_bad_value(name, text, "a power of two from 64 to 16777216");
    *(uint32_t *)field = (uint32_t)v;
    return PX_OK;
}

static px_status px_knob_count(void *field, const char *name, const char *text)
{
    const px_range *r = px_range_of(name);
    int64_t v;

    if (px_parse_i64(text, r->lo, r->hi, &v) != PX_OK)
        return px_bad_value(name, text, "an integer from 1024 to 268435456");
    *(uint32_t *)field = (uint32_t)v;
    return PX_OK;
}

static px_status px_knob_ns(void *field, const char *name, const char *text)
{
    const px_range *r = px_range_of(name);
    int64_t v;

    if (px_parse_i64(text, r->lo, r->hi, &v) != PX_OK)
        return px_bad_value(name, text, "nanoseconds, an integer 0..1000000");
    *(uint32_t *)field = (uint32_t)v;
    return PX_OK;
}

static px_status px_knob_seconds(void *field, const char *name, const char *text)
{
    const px_range *r = px_range_of(name);
    char *end, low[32], form[128];
    double v;

    snprintf(form, sizeof(form), "seconds, a decimal number %s %lld (such as 30, 0.5 or "
             "1e3)", px_range_dbl_low(r, low, sizeof(low)), (long long)r->hi);
    if (!px_is_decimal_real(text))
        return px_bad_value(name, text, form);
    errno = 0;
    v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !px_range_has_dbl(r, v))
        return px_bad_value(name, text, form);
    if (field)
        *(double *)field = v;
    return PX_OK;
}

/* ---- DFX knobs ---- */

static const char *const px_dfx_names[] = {
#define PX_DFX_NAME_(n, b, s) s,
    PX_DFX_COLLECTOR_MAP(PX_DFX_NAME_)
#undef PX_DFX_NAME_
};

static const char *const px_dfxt_names[] = {
#define PX_DFXT_NAME_(n, s) s,
    PX_DFX_TRANSPORT_MAP(PX_DFXT_NAME_)
#undef PX_DFXT_NAME_
};

/* Returns the index of the len-byte word w in names[0..n), or -1. */
static int px_word_index(const char *const *names, size_t n, const char *w, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncmp(names[i], w, len) == 0)
            return (int)i;
    return -1;
}

/*
 * Parses a comma-separated list of words from names[0..n) into bits (1 << index). Returns
 * PX_OK, or PX_EINVAL for an unknown or empty word.
 */
static px_status px_parse_word_list(const char *text, const char *const *names, size_t n,
                                    uint32_t *bits)
{
    uint32_t v = 0;

    for (const char *p = text; *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int i = px_word_index(names, n, p, len);

        if (i < 0)
            return PX_EINVAL;
        v |= 1u << i;
        p += len + (comma != NULL);
        if (comma != NULL && *p == '\0')
            return PX_EINVAL;
    }
    *bits = v;
    return PX_OK;
}

static px_status px_knob_dfx(void *field, const char *name, const char *text)
{
    uint32_t bits = 0;

    if (strcmp(text, "0") == 0 || strcmp(text, "off") == 0 || strcmp(text, "none") == 0)
        bits = 0;
    else if (strcmp(text, "all") == 0 || strcmp(text, "1") == 0)
        bits = PX_DFX_ALL;
    else if (text[0] == '\0' || px_parse_word_list(text, px_dfx_names,
                                                    PX_ARRAY_SIZE(px_dfx_names), &bits) != PX_OK)
        return px_bad_value(name, text, "all, 0 (off), or a comma-separated list of swimlane, "
                            "hosttrace, depgen, argsdump, pmu, scopestats");
    *(uint32_t *)field = bits;
    return PX_OK;
}

static px_status px_knob_dir(void *field, const char *name, const char *text)
{
    if (text[0] == '\0' || strlen(text) >= PX_DFX_OUT_MAX)
        return px_bad_value(name, text, "a directory path of 1..255 bytes");
    strcpy((char *)field, text);
    return PX_OK;
}

static px_status px_knob_transports(void *field, const char *name, const char *text)
{
    uint32_t bits;

    int listed = strcmp(text, "auto") != 0 && text[0] != '\0';

    if (strlen(text) >= PX_DFX_TRANSPORT_LIST_MAX ||
        (listed && px_parse_word_list(text, px_dfxt_names, PX_ARRAY_SIZE(px_dfxt_names),
                                      &bits) != PX_OK))
        return px_bad_value(name, text, "auto, or a comma-separated allow-list of mapped, "
                            "mapped_huge, shadow (tried in that order)");
    strcpy((char *)field, strcmp(text, "auto") == 0 ? "" : text);
    return PX_OK;
}

static px_status px_knob_args_level(void *field, const char *name, const char *text)
{
    return px_knob_int(field, name, text, "1 (scalars and tensor metadata), 2 (plus "
                       "data of args marked with px_args_mark) or 3 (plus data of all args)");
}

static px_status px_knob_records(void *field, const char *name, const char *text)
{
    const px_range *r = px_range_of(name);
    int64_t v;

    if (px_parse_i64(text, r->lo, r->hi, &v) != PX_OK)
        return px_bad_value(name, text, "records per buffer, an integer 8..1048576");
    *(uint32_t *)field = (uint32_t)v;
    return PX_OK;
}

static px_status px_knob_buffers(void *field, const char *name, const char *text)
{
    const px_range *r = px_range_of(name);
    int64_t v;

    if (px_parse_i64(text, r->lo, r->hi, &v) != PX_OK)
        return px_bad_value(name, text, "buffers per chip, an integer 0..65536 (0: automatic)");
    *(uint32_t *)field = (uint32_t)v;
    return PX_OK;
}

#define PX_F(field) offsetof(px_config, field)

static const px_knob px_knobs[] = {
    {"PLEXUS_LOG", PX_F(log_level), "warn", "error|warn|info|debug", px_knob_log,
     "log level on stderr"},
    {"PLEXUS_LEVEL", PX_F(level), "2", "2 or 3", px_knob_level,
     "worker level: 2 one chip, 3 several chips on this host"},
    {"PLEXUS_CORES", PX_F(cores), "0", "0..1024", px_knob_cores,
     "core threads per chip (0: online CPUs)"},
    {"PLEXUS_CHIPS", PX_F(chips), "2", "1..64", px_knob_chips, "chips of a level-3 worker"},
    {"PLEXUS_SUBS", PX_F(subs), "0", "0..64", px_knob_subs,
     "host sub-worker processes of a level-3 worker (0: host tasks run in the parent)"},
    {"PLEXUS_DEVICE_PROFILE", PX_F(device_profile), "default", "profile name", px_knob_profile,
     "sim device profile: default, a2a3-pcie, host64k, minimal, pairs"},
    {"PLEXUS_DEVICE_MEM", PX_F(device_mem), "1G", "bytes", px_knob_bytes,
     "device arena per chip (reserved lazily)"},
    {"PLEXUS_HEAP_RING", PX_F(heap_ring), "256M", "bytes", px_knob_bytes,
     "heap ring for scope memory and runtime-allocated outputs (inside the arena)"},
    {"PLEXUS_TASK_RING", PX_F(task_ring), "4096", "power of two", px_knob_slots,
     "task slots in flight per chip"},
    {"PLEXUS_DEP_RING", PX_F(dep_ring), "262144", "count", px_knob_count,
     "dependency records of tasks in flight"},
    {"PLEXUS_TIMEOUT_S", PX_F(timeout_s), "600", "seconds", px_knob_seconds,
     "deadline of every runtime wait (ring space, drain)"},
    {"PLEXUS_SPIN_NS", PX_F(spin_ns), "2000", "ns", px_knob_ns,
     "how long a waiter spins before sleeping on a futex"},
    {"PLEXUS_YIELD_NS", PX_F(yield_ns), "50000", "ns", px_knob_ns,
     "after spinning, how long a waiter polls with sched_yield before sleeping"},
    {"PLEXUS_HUGEPAGES", PX_F(hugepages), "1", "0 or 1", px_knob_bool,
     "0 hides reserved huge pages from the probe (can only remove a capability)"},
    {"PLEXUS_BIND", PX_F(bind), "none", "none or cores", px_knob_bind,
     "thread placement: none (the OS decides) or cores (core i on the i-th allowed CPU, the "
     "orchestration on core 0's)"},
    {"PLEXUS_DFX", PX_F(dfx), "0", "collector list", px_knob_dfx,
     "DFX collectors: all, 0, or swimlane,hosttrace,depgen,argsdump,pmu,scopestats"},
    {"PLEXUS_DFX_OUT", PX_F(out_dir), "plexus-dfx", "directory", px_knob_dir,
     "directory for DFX output files (created if missing)"},
    {"PLEXUS_DFX_TRANSPORT", PX_F(dfx_transport), "auto", "allow-list", px_knob_transports,
     "DFX transports allowed, tried in order mapped, mapped_huge, shadow"},
    {"PLEXUS_DFX_ARGS_LEVEL", PX_F(dfx_args_level), "1", "1..3", px_knob_args_level,
     "argsdump: 1 metadata, 2 plus marked args' data, 3 plus all args' data"},
    {"PLEXUS_DFX_ARGS_ARENA", PX_F(dfx_args_arena), "1M", "bytes", px_knob_bytes,
     "argsdump: bytes kept per argument; larger data is truncated (and marked)"},
    {"PLEXUS_DFX_STRICT", PX_F(dfx_strict), "0", "0 or 1", px_knob_bool,
     "1: a DFX reconcile mismatch (lost or unexplained records) fails the run"},
    {"PLEXUS_DFX_BACKSTOP_S", PX_F(dfx_backstop_s), "30", "seconds", px_knob_seconds,
     "a DFX writer waits this long for a free buffer before dropping records"},
    {"PLEXUS_DFX_BUFFER_RECORDS", PX_F(dfx_buffer_records), "2048", "8..1048576",
     px_knob_records, "records (32 bytes each) per DFX buffer"},
    {"PLEXUS_DFX_BUFFERS", PX_F(dfx_buffers), "0", "count", px_knob_buffers,
     "DFX buffers per chip (0: four per producer plus eight)"},
    {"PLEXUS_COMM_TIMEOUT_S", PX_F(comm_timeout_s), "60", "seconds", px_knob_seconds,
     "default deadline of a communication wait (signals, barriers, collectives)"},
    {"PLEXUS_COMM_ONESHOT_MAX", PX_F(comm_oneshot_max), "64K", "bytes", px_knob_bytes,
     "allreduce: one-shot up to this size, reduce-scatter + allgather above"},
    {"PLEXUS_COMM_TRANSPORT", PX_F(comm_transport), "auto", PX_COMM_TL_CHOICES,
     px_knob_comm_tl,
     "comm transport of every rank pair: auto (direct, else staged; mpi between MPI workers) "
     "or forced"},
    {"PLEXUS_COMM_MEM_MAX", PX_F(comm_mem_max), "0", "bytes", px_knob_bytes,
     "host memory one domain may take (windows + staging); 0: what the host can back now"},
    {"PLEXUS_HOST_ID", PX_F(host_id), "", "host id", px_knob_host_id,
     "what makes two ranks one host (several hosts under MPI); empty: hostname and boot id"},
    {"PLEXUS_MPI", PX_NOFIELD, "auto", "auto, on or off", px_knob_mpi,
     "level 3 under MPI: auto (when started by mpirun or with PLEXUS_COMM_TRANSPORT=mpi), on, "
     "off"},
    {"PLEXUS_MPI_PLUGIN", PX_NOFIELD, "", "file path", px_knob_path,
     "the MPI plugin to load (empty: libplexus-mpi.so beside libplexus, then the install's)"},
    {"PLEXUS_TEST_SLACK", PX_NOFIELD, "1", "seconds factor", px_knob_seconds,
     "tests: multiplies every deadline (raised under sanitizers)"},
    {"PLEXUS_TEST_FAULT", PX_NOFIELD, "", "fault spec", px_knob_fault,
     "tests only: a level-3 chip's fault at a named point, [host:H:]chip:C:ACTION:POINT:N "
     "(ACTION kill, stop, kill-worker, stop-worker; POINT coll, call)"},
};

#define PX_NKNOBS (sizeof(px_knobs) / sizeof(px_knobs[0]))

static const px_knob *px_knob_find(const char *name, size_t len)
{
    for (size_t i = 0; i < PX_NKNOBS; i++)
        if (strlen(px_knobs[i].name) == len && strncmp(px_knobs[i].name, name, len) == 0)
            return &px_knobs[i];
    return NULL;
}

static px_status px_knob_apply(px_config *c, const px_knob *k, const char *text)
{
    void *field = k->offset == PX_NOFIELD ? NULL : (char *)c + k->offset;
    size_t len = text != NULL ? strlen(text) : 0;

    if (len > 0 && (px_is_space(text[0]) || px_is_space(text[len - 1])))
        return px_set_error(PX_EINVAL, "%s=\"%s\" is not valid: leading or trailing whitespace "
                            "is refused by every PLEXUS_* knob; remove it (expected %s)",
                            k->name, text, k->form);

    return k->parse(field, k->name, text);
}

/* ---- size, version and unset fields (util/abi.h) ---- */

/* sizes[v - 1]: the size of px_config version v. A version that adds fields appends its
 * sizeof here and turns the previous last row into offsetof(px_config, <its first field>). */
static const uint32_t config_sizes[] = {offsetof(px_config, host_id), sizeof(px_config)};

static const util_abi_type config_abi = {"px_config", "PX_CONFIG_INIT or px_config_default()",
                                         config_sizes, PX_ARRAY_SIZE(config_sizes)};

_Static_assert(PX_ARRAY_SIZE(config_sizes) == PX_CONFIG_VERSION,
               "config_sizes needs one row per px_config version");

typedef enum { CF_INT, CF_U32, CF_U64, CF_DBL, CF_STR } config_kind;

typedef struct config_field {
    size_t off, size;
    config_kind kind;
} config_field;

#define CF(field, kind) {offsetof(px_config, field), sizeof(((px_config *)0)->field), kind}

/* Every field after size and version, with its type: what an unset field looks like
 * (PX_CONFIG_INIT). A new field gets a row here and its unset value in PX_CONFIG_INIT. */
static const config_field config_fields[] = {
    CF(level, CF_INT), CF(cores, CF_INT), CF(chips, CF_INT), CF(subs, CF_INT),
    CF(device_profile, CF_STR), CF(device_mem, CF_U64), CF(heap_ring, CF_U64),
    CF(task_ring, CF_U32), CF(dep_ring, CF_U32), CF(timeout_s, CF_DBL), CF(spin_ns, CF_U32),
    CF(yield_ns, CF_U32), CF(hugepages, CF_INT), CF(log_level, CF_INT), CF(bind, CF_INT),
    CF(dfx, CF_U32), CF(out_dir, CF_STR), CF(dfx_transport, CF_STR),
    CF(dfx_args_level, CF_INT), CF(dfx_strict, CF_INT), CF(dfx_backstop_s, CF_DBL),
    CF(dfx_buffer_records, CF_U32), CF(dfx_buffers, CF_U32), CF(dfx_args_arena, CF_U64),
    CF(comm_timeout_s, CF_DBL), CF(comm_oneshot_max, CF_U64), CF(comm_transport, CF_INT),
    CF(comm_mem_max, CF_U64), CF(host_id, CF_STR),
};

/* 1 when field f of c holds its type's unset value. */
static int config_unset(const px_config *c, const config_field *f)
{
    const char *p = (const char *)c + f->off;

    switch (f->kind) {
    case CF_INT:
        return *(const int *)p == PX_CONFIG_UNSET_INT;
    case CF_U32:
        return *(const uint32_t *)p == PX_CONFIG_UNSET_U32;
    case CF_U64:
        return *(const uint64_t *)p == PX_CONFIG_UNSET_U64;
    case CF_DBL:
        return *(const double *)p == PX_CONFIG_UNSET_REAL;
    case CF_STR:
        return (unsigned char)p[0] == (unsigned char)PX_CONFIG_UNSET_STR[0];
    }
    return 0;
}

/* The row of the field at offset off, or NULL. */
static const config_field *config_field_at(size_t off)
{
    for (size_t i = 0; i < PX_ARRAY_SIZE(config_fields); i++)
        if (config_fields[i].off == off)
            return &config_fields[i];
    return NULL;
}

/* The built-in defaults (no environment), size and version set. */
static void config_builtin(px_config *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < PX_NKNOBS; i++)
        px_knob_apply(c, &px_knobs[i], px_knobs[i].dflt);
    c->size = sizeof(*c);
    c->version = PX_CONFIG_VERSION;
}

/* util_config_import with the defaults of env: 1 px_config_default(), 0 the built-in ones. */
static px_status config_import(const px_config *c, int env, px_config *out, const char *who)
{
    px_config base;
    int have = 0;
    px_status st;

    if (c == NULL)
        return px_set_error(PX_EINVAL, "%s: config is NULL", who);
    if ((st = util_abi_check(&config_abi, who, c->size, c->version)) != PX_OK)
        return st;
    *out = (px_config)PX_CONFIG_INIT;
    memcpy(out, c, c->size); /* an older c: the fields past its end stay unset */
    out->size = sizeof(*out);
    out->version = PX_CONFIG_VERSION;
    for (size_t i = 0; i < PX_ARRAY_SIZE(config_fields); i++) {
        const config_field *f = &config_fields[i];

        if (!config_unset(out, f))
            continue;
        if (!have && env && (st = px_config_default(&base)) != PX_OK)
            return st;
        if (!have && !env)
            config_builtin(&base);
        have = 1;
        memcpy((char *)out + f->off, (const char *)&base + f->off, f->size);
    }
    return PX_OK;
}

px_status util_config_import(const px_config *c, px_config *out, const char *who)
{
    return config_import(c, 1, out, who);
}

px_status px_config_set(px_config *c, const char *name, const char *value)
{
    const config_field *f;
    const px_knob *k;
    px_status st;

    if (c == NULL || name == NULL || value == NULL)
        return px_set_error(PX_EINVAL, "px_config_set: config, name and value are required (got "
                            "%s, %s%s%s, %s%s%s)", c ? "a config" : "NULL",
                            name ? "\"" : "", name ? name : "NULL", name ? "\"" : "",
                            value ? "\"" : "", value ? value : "NULL", value ? "\"" : "");
    if ((st = util_abi_check(&config_abi, "px_config_set", c->size, c->version)) != PX_OK)
        return st;
    k = px_knob_find(name, strlen(name));
    if (k == NULL)
        return px_set_error(PX_ENOENT, "unknown configuration knob \"%s\"", name);
    f = k->offset == PX_NOFIELD ? NULL : config_field_at(k->offset);
    if (f != NULL && f->off + f->size > c->size)
        return px_set_error(PX_EINVAL, "px_config_set: %s has no field in this px_config "
                            "(version %u, size %u, from an older header); it takes its "
                            "default", name, c->version, c->size);
    return px_knob_apply(c, k, value);
}

px_status px_config_default(px_config *c)
{
    px_status first = PX_OK;
    char msg[1024] = "";

    if (c == NULL)
        return px_set_error(PX_EINVAL, "px_config_default: config is NULL; pass the px_config "
                            "to fill");
    config_builtin(c);

    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        const px_knob *k;

        if (strncmp(*e, "PLEXUS_", 7) != 0 || eq == NULL)
            continue;
        k = px_knob_find(*e, (size_t)(eq - *e));
        if (k == NULL) {
            PX_LOG_WARN("unknown environment variable %.*s ignored; `plexus doctor --config` "
                        "lists the known PLEXUS_* knobs", (int)(eq - *e), *e);
            continue;
        }
        if (px_knob_apply(c, k, eq + 1) != PX_OK) {
            if (first == PX_OK) {
                first = PX_EINVAL;
                snprintf(msg, sizeof(msg), "%s", px_last_error());
            }
            px_knob_apply(c, k, k->dflt);
            continue;
        }
        if (k->offset == offsetof(px_config, log_level))
            px_log_set_level(c->log_level);
        PX_LOG_INFO("config: %s=%s (from the environment)", k->name, eq + 1);
    }
    px_log_set_level(c->log_level);
    if (first != PX_OK)
        px_set_error(first, "%s", msg);
    return first;
}

/* The DFX fields beyond their ranges. */
static px_status px_config_validate_dfx(const px_config *c)
{
    uint32_t tbits;

    if (c->dfx & ~(uint32_t)PX_DFX_ALL)
        return px_set_error(PX_EINVAL, "config dfx 0x%x has bits of no collector (PX_DFX_ALL "
                            "is 0x%x)", c->dfx, (unsigned)PX_DFX_ALL);
    if (memchr(c->out_dir, '\0', sizeof(c->out_dir)) == NULL ||
        memchr(c->dfx_transport, '\0', sizeof(c->dfx_transport)) == NULL)
        return px_set_error(PX_EINVAL, "config out_dir or dfx_transport is not terminated");
    if (c->out_dir[0] == '\0')
        return px_set_error(PX_EINVAL, "config out_dir is empty: expected a directory path of "
                            "1..%d bytes (PLEXUS_DFX_OUT)", PX_DFX_OUT_MAX - 1);
    if (c->dfx_transport[0] != '\0' && strcmp(c->dfx_transport, "auto") != 0 &&
        px_parse_word_list(c->dfx_transport, px_dfxt_names, PX_ARRAY_SIZE(px_dfxt_names),
                           &tbits) != PX_OK)
        return px_set_error(PX_EINVAL, "DFX transport list \"%s\": expected auto or a "
                            "comma-separated list of mapped, mapped_huge, shadow "
                            "(PLEXUS_DFX_TRANSPORT)", c->dfx_transport);
    return PX_OK;
}

px_status px_config_validate(const px_config *user)
{
    px_config v;
    const px_config *c = &v;
    px_status st;

    if (user == NULL)
        return px_set_error(PX_EINVAL, "px_config_validate: config is NULL");
    if ((st = config_import(user, 0, &v, "px_config_validate")) != PX_OK)
        return st;
    /* every field in the range its knob accepts: the same table the parsers use */
    for (size_t i = 0; i < PX_ARRAY_SIZE(px_ranges); i++)
        if (px_ranges[i].offset != PX_NOFIELD && (st = px_range_check(c, &px_ranges[i])) != PX_OK)
            return st;
    if (memchr(c->device_profile, '\0', sizeof(c->device_profile)) == NULL ||
        c->device_profile[0] == '\0')
        return px_set_error(PX_EINVAL, "config device_profile is empty or not terminated: "
                            "expected a profile name of 1..%d bytes (PLEXUS_DEVICE_PROFILE)",
                            PX_PROFILE_NAME_MAX - 1);
    if (memchr(c->host_id, '\0', sizeof(c->host_id)) == NULL ||
        (c->host_id[0] != '\0' && !px_host_id_ok(c->host_id)))
        return px_set_error(PX_EINVAL, "config host_id is not a host id: expected \"\" or 1..%d "
                            "letters, digits and . _ : - (PLEXUS_HOST_ID)", PX_HOST_ID_MAX - 1);
    if (c->heap_ring < 4096 || c->heap_ring >= c->device_mem)
        return px_set_error(PX_EINVAL, "heap ring %llu bytes must be at least 4096 and smaller "
                            "than device memory %llu bytes (PLEXUS_HEAP_RING, "
                            "PLEXUS_DEVICE_MEM)", (unsigned long long)c->heap_ring,
                            (unsigned long long)c->device_mem);
    return px_config_validate_dfx(c);
}

/* Writes the names of the collector bits ("depgen,pmu", "0" for none) into buf. */
static void px_dfx_format_bits(uint32_t bits, char *buf, size_t n)
{
    size_t used = 0;

    buf[0] = '\0';
    if (bits == PX_DFX_ALL) {
        snprintf(buf, n, "all");
        return;
    }
    for (size_t i = 0; i < PX_ARRAY_SIZE(px_dfx_names) && used < n; i++)
        if (bits & (1u << i))
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "," : "",
                                     px_dfx_names[i]);
    if (used == 0)
        snprintf(buf, n, "0");
}

static void px_knob_format(const px_config *c, const px_knob *k, char *buf, size_t n)
{
    /* no pointer arithmetic with PX_NOFIELD (SIZE_MAX): it overflows (found by fuzz_knob) */
    const char *f = k->offset == PX_NOFIELD ? NULL : (const char *)c + k->offset;

    if (f == NULL) {
        const char *env = getenv(k->name);
        snprintf(buf, n, "%s", env ? env : k->dflt);
    } else if (k->parse == px_knob_log) {
        snprintf(buf, n, "%s", px_log_level_name(*(const int *)f));
    } else if (k->parse == px_knob_profile || k->parse == px_knob_dir) {
        snprintf(buf, n, "%s", f);
    } else if (k->parse == px_knob_transports) {
        snprintf(buf, n, "%s", f[0] ? f : "auto");
    } else if (k->parse == px_knob_comm_tl) {
        int v = *(const int *)f;

        snprintf(buf, n, "%s", v == PX_COMM_TL_AUTO ? "auto" : px_comm_tl_name(v));
    } else if (k->parse == px_knob_bind) {
        snprintf(buf, n, "%s", *(const int *)f ? "cores" : "none");
    } else if (k->parse == px_knob_dfx) {
        px_dfx_format_bits(*(const uint32_t *)f, buf, n);
    } else if (k->parse == px_knob_bytes) {
        snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)f);
    } else if (k->parse == px_knob_slots || k->parse == px_knob_count ||
               k->parse == px_knob_ns || k->parse == px_knob_records ||
               k->parse == px_knob_buffers) {
        snprintf(buf, n, "%u", *(const uint32_t *)f);
    } else if (k->parse == px_knob_seconds) {
        snprintf(buf, n, "%g", *(const double *)f);
    } else {
        snprintf(buf, n, "%d", *(const int *)f);
    }
}

px_status util_config_format(const px_config *c, const char *name, char *buf, size_t n)
{
    const px_knob *k = px_knob_find(name, strlen(name));

    if (n > 0)
        buf[0] = '\0';
    if (k == NULL)
        return px_set_error(PX_EINVAL, "no knob is called %s", name);
    px_knob_format(c, k, buf, n);
    return PX_OK;
}

void px_config_print(const px_config *user, FILE *f)
{
    px_config c_;
    const px_config *c = &c_;
    char val[64];

    if (user == NULL || f == NULL || config_import(user, 0, &c_, "px_config_print") != PX_OK)
        return;

    fprintf(f, "%-22s %-12s %-8s %s\n", "knob", "value", "default", "description");
    for (size_t i = 0; i < PX_NKNOBS; i++) {
        px_knob_format(c, &px_knobs[i], val, sizeof(val));
        fprintf(f, "%-22s %-12s %-8s %s\n", px_knobs[i].name, val, px_knobs[i].dflt,
                px_knobs[i].doc);
    }
}
