/*
 * perf.c - the perf_event_open(2) wrapper (see perf.h).
 */
#include "perf.h"

#include <linux/perf_event.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int px_perf_open(uint32_t type, uint64_t config, int group_fd, int read_group, int disabled)
{
    struct perf_event_attr a;

    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = type;
    a.config = config;
    a.disabled = disabled ? 1 : 0;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    if (read_group)
        a.read_format = PERF_FORMAT_GROUP;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
}
