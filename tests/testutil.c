/*
 * testutil.c - shared helpers for the unit tests (see testutil.h).
 */
#include "testutil.h"

#include <dirent.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double px_test_slack(void)
{
    const char *s = getenv("PLEXUS_TEST_SLACK");
    double v = s ? atof(s) : 1.0;

    return v >= 1.0 ? v : 1.0;
}

double px_test_bound_s(double deadline_s)
{
    return deadline_s + PX_TEST_LATE_S * px_test_slack();
}

uint64_t px_test_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t px_test_deadline_ns(double seconds)
{
    return px_test_now_ns() + (uint64_t)(seconds * px_test_slack() * 1e9);
}

int px_test_children(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[512], *p;
        FILE *f;
        int ppid;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
        fclose(f);
        if (p != NULL && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == getpid())
            n++;
    }
    closedir(d);
    return n;
}

void px_test_skip(const char *fmt, ...)
{
    va_list ap;

    printf("skipped: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(77);
}

void px_test_config(px_config *c, int cores)
{
    px_config_default(c);
    c->cores = cores;
    c->device_mem = 256ull << 20;
    c->heap_ring = 64ull << 20;
    c->timeout_s = 30.0 * px_test_slack();
}

int px_test_wait_flag(_Atomic int *f, double seconds)
{
    uint64_t deadline = px_test_deadline_ns(seconds);

    while (!atomic_load(f)) {
        if (px_test_now_ns() > deadline)
            return -1;
        sched_yield();
    }
    return 0;
}

void px_test_mkdtemp(char *buf, size_t n, const char *tag)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(buf, n, "%s/%s_XXXXXX", tmp ? tmp : "/tmp", tag);
    assert_non_null(mkdtemp(buf));
}

void px_test_rmtree(const char *dir)
{
    char cmd[600];

    assert_true(strlen(dir) > 4 && strchr(dir, '\'') == NULL);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Entries of path whose name starts with prefix, . and .. left out; -1 when it cannot open. */
static int px_test_entries(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

int px_test_open_fds(void)
{
    return px_test_entries("/proc/self/fd", "") - 1;
}

int px_test_open_fds_except(const char *targets)
{
    char path[300], link[512], want[256];
    int n = 0, fd;
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;

    if (dir == NULL)
        return -1;
    fd = dirfd(dir);
    while ((e = readdir(dir)) != NULL) {
        ssize_t k;
        int skip = 0;

        if (e->d_name[0] == '.' || atoi(e->d_name) == fd)
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        if ((k = readlink(path, link, sizeof(link) - 1)) < 0)
            continue;
        link[k] = '\0';
        snprintf(want, sizeof(want), "%s", targets);
        for (char *save = NULL, *t = strtok_r(want, "|", &save); t != NULL && !skip;
             t = strtok_r(NULL, "|", &save))
            skip = strstr(link, t) != NULL;
        n += !skip;
    }
    closedir(dir);
    return n;
}

int px_test_shm_plexus_entries(void)
{
    /* the library names nothing there; the Open MPI anchor's scratch of a benchmark that
     * ctest (or another checkout) runs at the same time is not the library's */
    int n = px_test_entries("/dev/shm", "plexus"), anchor = px_test_entries("/dev/shm",
                                                                             "plexus-mpi-anchor");

    if (n >= 0 && anchor > 0)
        n -= anchor;

    return n < 0 ? 0 : n;
}

extern char **environ;

void px_test_clear_env(const char *const *keep)
{
    char names[64][64];
    int n = 0;

    for (char **e = environ; e && *e && n < 64; e++) {
        const char *eq = strchr(*e, '=');
        int kept = 0;

        if (strncmp(*e, "PLEXUS_", 7) != 0 || eq == NULL || eq - *e >= 64)
            continue;
        for (int k = 0; keep != NULL && keep[k] != NULL; k++)
            kept |= strlen(keep[k]) == (size_t)(eq - *e) &&
                    strncmp(*e, keep[k], (size_t)(eq - *e)) == 0;
        if (!kept) {
            memcpy(names[n], *e, (size_t)(eq - *e));
            names[n++][eq - *e] = '\0';
        }
    }
    for (int i = 0; i < n; i++)
        unsetenv(names[i]);
}
