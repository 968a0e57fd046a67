/*
 * limits.c - whether the system can hold the threads a worker is about to start
 * (px_rt_threads_fit), checked before the first one starts, so a request beyond a limit is
 * refused at once, naming the limit and the numbers, instead of failing (or crawling) after
 * thousands of threads and processes were made.
 *
 * Every thread of Linux takes a process id (kernel.pid_max, system-wide) and counts against
 * kernel.threads-max (system-wide) and its real user's RLIMIT_NPROC (not enforced for root or
 * CAP_SYS_RESOURCE / CAP_SYS_ADMIN); its stack takes address space (RLIMIT_AS; commit under
 * vm.overcommit_memory=2) and two mappings (vm.max_map_count, per process), and its kernel
 * stack and first user pages take memory (PX_THREAD_MIN_BYTES each, against MemAvailable).
 * The threads running now are read from /proc (loadavg for the system; the user's processes'
 * status files only when RLIMIT_NPROC applies). A limit that cannot be read is not checked.
 * PX_TEST_NO_THREAD_CHECK=1 in the environment turns the check off, so tests can reach what
 * happens when a thread fails to start anyway (the system changed after the check).
 */
#include "runtime.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define PX_THREAD_HEADROOM 64             /* ids and threads left for everything else */
#define PX_THREAD_MIN_BYTES (64u << 10)   /* kernel stack, task, first stack pages, TLS */
#define PX_THREAD_MAPS 2                  /* a stack and its guard page */
#define PX_THREAD_MAPS_HEADROOM 256       /* mappings a process makes besides */

/* The first integer in file path after `key` (NULL: the file's first), or -1. */
static long long lim_read(const char *path, const char *key)
{
    char line[256];
    long long v = -1;
    FILE *f = fopen(path, "re");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *p = line;

        if (key != NULL) {
            if (strncmp(line, key, strlen(key)) != 0)
                continue;
            p += strlen(key);
        }
        v = strtoll(p, NULL, 10);
        break;
    }
    fclose(f);
    return v;
}

/* Threads of the whole system now (/proc/loadavg: "... running/total last_pid"), or -1. */
static long long lim_system_threads(void)
{
    long long run, total = -1;
    FILE *f = fopen("/proc/loadavg", "re");

    if (f == NULL)
        return -1;
    if (fscanf(f, "%*s %*s %*s %lld/%lld", &run, &total) != 2)
        total = -1;
    fclose(f);
    return total;
}

/* 1 when RLIMIT_NPROC does not bind this process (real uid 0, or the capabilities). */
static int lim_nproc_exempt(void)
{
    char line[256];
    unsigned long long eff = 0;
    FILE *f;

    if (getuid() == 0)
        return 1;
    if ((f = fopen("/proc/self/status", "re")) == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    fclose(f);
    return (eff >> 24 & 1) || (eff >> 21 & 1); /* CAP_SYS_RESOURCE, CAP_SYS_ADMIN */
}

/* Threads of the processes whose real uid is ours, or -1. */
static long long lim_user_threads(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    long long n = 0;
    uid_t me = getuid();

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[288], line[256];
        long long uid = -1, thr = 0;
        FILE *f;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
        if ((f = fopen(path, "re")) == NULL)
            continue; /* gone meanwhile */
        while (fgets(line, sizeof(line), f) != NULL) {
            if (sscanf(line, "Uid: %lld", &uid) == 1)
                continue;
            if (sscanf(line, "Threads: %lld", &thr) == 1)
                break;
        }
        fclose(f);
        if (uid == (long long)me)
            n += thr;
    }
    closedir(d);
    return n;
}

/* Mappings of this process now, or -1. */
static long long lim_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    long long n = 0;
    int ch;

    if (f == NULL)
        return -1;
    while ((ch = getc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

/* Bytes of address space one thread's stack takes (the default stack and its guard). */
static size_t lim_stack_bytes(void)
{
    pthread_attr_t a;
    size_t stack = 8u << 20, guard = 4096;

    if (pthread_getattr_default_np(&a) == 0) {
        (void)pthread_attr_getstacksize(&a, &stack);
        (void)pthread_attr_getguardsize(&a, &guard);
        pthread_attr_destroy(&a);
    }
    return stack + guard;
}

/* "... (at most N cores per <unit> fit now)" for `avail` threads left, or "" when none fit. */
static const char *lim_fit(const px_thread_plan *p, long long avail, char *buf, size_t n)
{
    long long per = p->procs > 0 ? (avail - p->here) / p->procs : avail;
    long long cores = per - (p->procs > 0 ? p->per_proc - p->cores : p->here - p->cores);

    if (cores >= 1)
        snprintf(buf, n, " (at most %lld core%s per %s fit now)", cores, cores > 1 ? "s" : "",
                 p->unit);
    else
        snprintf(buf, n, " (not even one core per %s fits now)", p->unit);
    return buf;
}

px_status px_rt_threads_fit(const px_thread_plan *p)
{
    long long total = (long long)p->procs * p->per_proc + p->here;
    long long sys = lim_system_threads(), pid_max = lim_read("/proc/sys/kernel/pid_max", NULL);
    long long tmax = lim_read("/proc/sys/kernel/threads-max", NULL);
    long long per = PX_MAX((long long)p->per_proc, (long long)p->here);
    size_t stack = lim_stack_bytes();
    struct rlimit rl;
    char fit[96];
    const char *off = getenv("PX_TEST_NO_THREAD_CHECK");

    if (off != NULL && strcmp(off, "1") == 0)
        return PX_OK;
    if (sys >= 0 && pid_max > 0 && sys + total + PX_THREAD_HEADROOM > pid_max)
        return px_set_error(PX_ENOMEM, "%s needs %lld threads, and every thread takes a "
                            "process id: with the %lld threads this system runs now that is "
                            "%lld, beyond kernel.pid_max = %lld (less %d kept free). Lower %s%s, "
                            "or raise the limit (sysctl -w kernel.pid_max=4194304)", p->what,
                            total, sys, sys + total, pid_max, PX_THREAD_HEADROOM, p->lower,
                            lim_fit(p, pid_max - PX_THREAD_HEADROOM - sys, fit, sizeof(fit)));
    if (sys >= 0 && tmax > 0 && sys + total + PX_THREAD_HEADROOM > tmax)
        return px_set_error(PX_ENOMEM, "%s needs %lld threads: with the %lld threads this "
                            "system runs now that is %lld, beyond kernel.threads-max = %lld "
                            "(less %d kept free). Lower %s%s, or raise the limit (sysctl -w "
                            "kernel.threads-max=N)", p->what, total, sys, sys + total, tmax,
                            PX_THREAD_HEADROOM, p->lower,
                            lim_fit(p, tmax - PX_THREAD_HEADROOM - sys, fit, sizeof(fit)));
    if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        !lim_nproc_exempt()) {
        long long mine = lim_user_threads(), lim = (long long)rl.rlim_cur;

        if (mine >= 0 && mine + total > lim)
            return px_set_error(PX_ENOMEM, "%s needs %lld threads: with the %lld threads user "
                                "%d runs now that is %lld, beyond its RLIMIT_NPROC (ulimit -u) "
                                "of %lld threads. Lower %s%s, or raise the limit (ulimit -u, "
                                "or nproc in /etc/security/limits.conf)", p->what, total, mine,
                                (int)getuid(), mine + total, lim, p->lower,
                                lim_fit(p, lim - mine, fit, sizeof(fit)));
    }
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        long long vm = lim_read("/proc/self/status", "VmSize:"); /* kB */
        unsigned long long need = (unsigned long long)(vm > 0 ? vm : 0) * 1024 +
                                  (unsigned long long)per * stack;

        if (need > (unsigned long long)rl.rlim_cur)
            return px_set_error(PX_ENOMEM, "%s needs %lld threads in one process, whose stacks "
                                "of %zu KiB each and the %lld KiB the process maps already "
                                "make %llu MiB, beyond its RLIMIT_AS (ulimit -v) of %llu MiB. "
                                "Lower %s, or raise the limit, or lower the stack size "
                                "(ulimit -s)", p->what, per, stack >> 10, vm, need >> 20,
                                (unsigned long long)rl.rlim_cur >> 20, p->lower);
    }
    {
        long long maps = lim_maps(), mmax = lim_read("/proc/sys/vm/max_map_count", NULL);

        if (maps >= 0 && mmax > 0 &&
            maps + per * PX_THREAD_MAPS + PX_THREAD_MAPS_HEADROOM > mmax)
            return px_set_error(PX_ENOMEM, "%s needs %lld threads in one process, each with %d "
                                "mappings (its stack and guard): with the %lld mappings the "
                                "process has that is beyond vm.max_map_count = %lld (less %d "
                                "kept free). Lower %s, or raise the limit (sysctl -w "
                                "vm.max_map_count=N)", p->what, per, PX_THREAD_MAPS, maps, mmax,
                                PX_THREAD_MAPS_HEADROOM, p->lower);
    }
    if (lim_read("/proc/sys/vm/overcommit_memory", NULL) == 2) {
        long long limit = lim_read("/proc/meminfo", "CommitLimit:");   /* kB */
        long long used = lim_read("/proc/meminfo", "Committed_AS:");
        unsigned long long need = (unsigned long long)total * stack;

        if (limit > 0 && used >= 0 && (unsigned long long)used * 1024 + need >
                                          (unsigned long long)limit * 1024)
            return px_set_error(PX_ENOMEM, "%s needs %lld threads, whose stacks of %zu KiB each "
                                "commit %llu MiB: with %lld MiB committed already that is "
                                "beyond the CommitLimit of %lld MiB (vm.overcommit_memory = 2). "
                                "Lower %s, or lower the stack size (ulimit -s), or raise "
                                "vm.overcommit_ratio", p->what, total, stack >> 10, need >> 20,
                                used >> 10, limit >> 10, p->lower);
    }
    {
        long long avail = lim_read("/proc/meminfo", "MemAvailable:"); /* kB */
        unsigned long long need = (unsigned long long)total * PX_THREAD_MIN_BYTES;

        if (avail > 0 && need > (unsigned long long)avail * 1024)
            return px_set_error(PX_ENOMEM, "%s needs %lld threads, each at least %u KiB of "
                                "memory (kernel stack, first stack pages): %llu MiB, beyond the "
                                "%lld MiB this machine has available. Lower %s%s", p->what,
                                total, PX_THREAD_MIN_BYTES >> 10, need >> 20, avail >> 10,
                                p->lower,
                                lim_fit(p, avail * 1024 / PX_THREAD_MIN_BYTES, fit,
                                        sizeof(fit)));
    }
    return PX_OK;
}
