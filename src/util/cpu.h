/*
 * cpu.h - binding a thread to one CPU (PLEXUS_BIND; the runtime's cores and orchestration,
 * the DFX drain).
 */
#ifndef PX_UTIL_CPU_H
#define PX_UTIL_CPU_H

#include <pthread.h>

/* Binds thread t to cpu; when that fails, logs who ("core 2", "the DFX drain of chip 0")
 * and why: the thread runs on unbound. */
void util_bind_thread(pthread_t t, int cpu, const char *who);

#endif
