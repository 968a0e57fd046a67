/*
 * perf.h - one wrapper over perf_event_open(2) for user-space counters of the calling thread,
 * shared by the capability probe (can a counter open here?) and the DFX pmu collector (open a
 * group and read it at task boundaries).
 */
#ifndef PX_UTIL_PERF_H
#define PX_UTIL_PERF_H

#include <stdint.h>

/*
 * Opens counter (type, config) for this thread on any CPU, user space only, close-on-exec.
 * group_fd -1 opens a group leader; read_group sets PERF_FORMAT_GROUP; disabled opens it
 * stopped. Returns the fd, or -1 with errno set.
 */
int px_perf_open(uint32_t type, uint64_t config, int group_fd, int read_group, int disabled);

#endif
