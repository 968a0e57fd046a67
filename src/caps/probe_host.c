/*
 * probe_host.c - host facts that are neither memory nor perf: invariant TSC, online CPUs,
 * host identity (hostname + boot id). caps_probe_host() is the entry point for every host
 * fact and calls the memory and perf probes too.
 *
 * Nothing here fails: a fact that cannot be read is left absent (value 0, empty text) with a
 * note that says why, usually the errno text.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "caps/caps_internal.h"

#define CAPS_BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

/* Returns 0 with the first line of path in buf, or the errno of the failure. */
int caps_read_line(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "re");
    int err = 0;

    if (f == NULL)
        return errno;
    if (fgets(buf, (int)n, f) == NULL)
        err = ferror(f) ? EIO : ENODATA;
    else
        buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
    return err;
}

#if defined(__x86_64__) || defined(__i386__)
/* cpuid 0x80000007 EDX bit 8: the TSC runs at a constant rate in every P-, C- and T-state. */
static void caps_probe_tsc(px_caps *c)
{
    unsigned int a, b, cx, d, max_ext;

    if (!__get_cpuid(0x80000000u, &max_ext, &b, &cx, &d) || max_ext < 0x80000007u) {
        caps_fact_set(c, PX_FACT_TSC_INVARIANT, 0, PX_SRC_OS,
                      "cpuid leaf 0x80000007 not available; time stamps use CLOCK_MONOTONIC");
        return;
    }
    __get_cpuid(0x80000007u, &a, &b, &cx, &d);
    if (d & (1u << 8))
        caps_fact_set(c, PX_FACT_TSC_INVARIANT, 1, PX_SRC_OS,
                      "cpuid 0x80000007 EDX bit 8 (invariant TSC) is set");
    else
        caps_fact_set(c, PX_FACT_TSC_INVARIANT, 0, PX_SRC_OS,
                      "cpuid 0x80000007 EDX bit 8 (invariant TSC) is clear; time stamps use "
                      "CLOCK_MONOTONIC");
}
#else
static void caps_probe_tsc(px_caps *c)
{
    caps_fact_set(c, PX_FACT_TSC_INVARIANT, 0, PX_SRC_OS,
                  "no x86 TSC on this architecture; time stamps use CLOCK_MONOTONIC");
}
#endif

static void caps_probe_cpus(px_caps *c)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (n > 0)
        caps_fact_set(c, PX_FACT_ONLINE_CPUS, n, PX_SRC_OS, "sysconf(_SC_NPROCESSORS_ONLN)");
    else
        caps_fact_set(c, PX_FACT_ONLINE_CPUS, 0, PX_SRC_OS,
                      "sysconf(_SC_NPROCESSORS_ONLN) failed: %s", strerror(errno));
}

static void caps_probe_hostname(px_caps *c)
{
    char name[256];

    if (gethostname(name, sizeof(name)) != 0) {
        caps_fact_set_text(c, PX_FACT_HOSTNAME, "", PX_SRC_OS, "gethostname failed: %s",
                           strerror(errno));
        return;
    }
    name[sizeof(name) - 1] = '\0';
    if (strlen(name) >= PX_FACT_TEXT_MAX)
        caps_fact_set_text(c, PX_FACT_HOSTNAME, name, PX_SRC_OS,
                           "gethostname, truncated to %d characters", PX_FACT_TEXT_MAX - 1);
    else
        caps_fact_set_text(c, PX_FACT_HOSTNAME, name, PX_SRC_OS, "gethostname");
}

static void caps_probe_boot_id(px_caps *c)
{
    char id[PX_FACT_TEXT_MAX];
    int err = caps_read_line(CAPS_BOOT_ID_PATH, id, sizeof(id));

    if (err != 0)
        caps_fact_set_text(c, PX_FACT_BOOT_ID, "", PX_SRC_OS, "cannot read %s: %s",
                           CAPS_BOOT_ID_PATH, strerror(err));
    else
        caps_fact_set_text(c, PX_FACT_BOOT_ID, id, PX_SRC_OS, "%s", CAPS_BOOT_ID_PATH);
}

/* Fills every host fact of c; never fails (an unreadable fact is absent with a note). */
void caps_probe_host(px_caps *c)
{
    caps_probe_memory(c);
    caps_probe_perf(c);
    caps_probe_tsc(c);
    caps_probe_cpus(c);
    caps_probe_hostname(c);
    caps_probe_boot_id(c);
}
