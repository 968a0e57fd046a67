/*
 * cpu.c - binding a thread to one CPU (cpu.h).
 */
#include "util/cpu.h"

#include <sched.h>
#include <string.h>

#include "util/log.h"

void util_bind_thread(pthread_t t, int cpu, const char *who)
{
    cpu_set_t one;
    int rc;

    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    rc = pthread_setaffinity_np(t, sizeof(one), &one);
    if (rc != 0)
        PX_LOG_WARN("PLEXUS_BIND=cores: cannot bind %s to CPU %d (%s); it stays unbound", who,
                    cpu, strerror(rc));
}
